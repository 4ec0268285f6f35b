//! The aarch64 boot-check image: boots on QEMU `virt`, prints what it found, exits 33.
//!
//! Lines (COM1's protocol style, `@tag key=value …`):
//! - `Cadence aarch64 boot check` — the banner;
//! - `@boot el=<entry EL> dtb=<address>`;
//! - `@dt mem=<base>+<size> uart=… gicd=… gicr=… psci=hvc|smc ecam=<base>+<size> buses=<a>-<b> cpus=<n> timer_intid=<n>`;
//! - `@mmu tables=<n> heap=<base>+<size>`;
//! - `@timer cntfrq=<Hz> hz=<Hz used>`;
//! - `@sleep asked_us=<µs> slept_ticks=<n> returned=1 fired=<n> wfis=<n>`: one deadline
//!   sleep on the boot core;
//! - with `fault=unmapped` on the command line (`-append`): a read of an unmapped address,
//!   which the exception vectors report (`error: CPU exception: …`) and exit 39;
//! - `error: …` and exit 35 (the tree) or 37 (the machine) when bring-up fails.
//!
//! On the host this binary is an empty stub (the workspace builds every crate there);
//! `cadence_build::aarch64::build` builds the real one for `aarch64-unknown-none`.
#![cfg_attr(all(target_arch = "aarch64", target_os = "none"), no_std, no_main)]

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
mod image {
    use cadence_core::time::{Clock, Sleeper};
    use cadence_platform_aarch64::exit::{ExitCode, exit};
    use cadence_platform_aarch64::timer::WfiSleeper;
    use cadence_platform_aarch64::{BootArgs, entry, println};

    entry!(kmain);

    /// The boot core's test sleep.
    const SLEEP_US: u64 = 2_000;

    fn kmain(boot: BootArgs) -> ! {
        let p = match cadence_platform_aarch64::init(boot) {
            Ok(p) => p,
            Err(e) => {
                println!("Cadence aarch64 boot check");
                println!("error: {e}");
                exit(e.exit_code())
            }
        };
        println!("Cadence aarch64 boot check");
        println!("@boot el={} dtb={:#x}", boot.entry_el(), boot.dtb_address());
        let f = &p.facts;
        println!(
            "@dt mem={:#x}+{:#x} uart={:#x} gicd={:#x} gicr={:#x} psci={} ecam={:#x}+{:#x} buses={}-{} cpus={} timer_intid={}",
            f.memory.base,
            f.memory.size,
            f.uart.base,
            f.gicd.base,
            f.gicr.base,
            f.psci.name(),
            f.ecam.base,
            f.ecam.size,
            f.buses.0,
            f.buses.1,
            f.ncpus,
            f.timer_intid
        );
        println!("@mmu tables={} heap={:#x}+{:#x}", p.tables, p.heap.base, p.heap.size);
        println!("@timer cntfrq={} hz={}", p.cntfrq, p.clock.rate().hz());
        if boot.cmdline().split_whitespace().any(|w| w == "fault=unmapped") {
            // Flash at 0 is outside the identity map: a translation fault.
            // SAFETY: deliberately faulting; the read never completes.
            let v = unsafe { core::ptr::read_volatile(0x10 as *const u64) };
            println!("error: the unmapped read returned {v:#x}");
            exit(ExitCode::RuntimeFailure)
        }
        let mut s = WfiSleeper::default();
        let start = p.clock.now();
        let deadline = start.saturating_add(p.clock.rate().ticks_from_us(SLEEP_US));
        let woke = s.sleep_until(deadline);
        println!(
            "@sleep asked_us={SLEEP_US} slept_ticks={} returned={} fired={} wfis={}",
            woke.saturating_since(start).ticks(),
            u8::from(woke >= deadline),
            s.fired,
            s.wfis
        );
        exit(ExitCode::Success)
    }

    #[panic_handler]
    fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
        println!("error: panic: {info}");
        exit(ExitCode::Panic)
    }
}

#[cfg(not(all(target_arch = "aarch64", target_os = "none")))]
fn main() {
    eprintln!("cadence-aarch64 is the aarch64-unknown-none image; build it with cadence_build::aarch64::build");
}
