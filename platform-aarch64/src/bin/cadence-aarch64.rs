//! The aarch64 boot-check image: boots on QEMU `virt`, prints what it found, exits 33.
//!
//! Lines (COM1's protocol style, `@tag key=value …`):
//! - `Cadence aarch64 boot check` — the banner;
//! - `@boot el=<entry EL> dtb=<address>`;
//! - `@dt mem=<base>+<size> uart=… gicd=… gicr=… psci=hvc|smc ecam=<base>+<size> buses=<a>-<b> cpus=<n>`;
//! - `error: …` and exit 35 when the device tree lacks one of those.
//!
//! On the host this binary is an empty stub (the workspace builds every crate there);
//! `cadence_build::aarch64::build` builds the real one for `aarch64-unknown-none`.
#![cfg_attr(all(target_arch = "aarch64", target_os = "none"), no_std, no_main)]

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
mod image {
    use cadence_platform_aarch64::exit::{ExitCode, exit};
    use cadence_platform_aarch64::{BootArgs, dt, entry, pl011, println};

    entry!(kmain);

    fn kmain(boot: BootArgs) -> ! {
        let Ok(blob) = boot.dtb() else { exit(ExitCode::ConfigError) };
        if let Some(uart) = dt::console(blob) {
            pl011::init(uart.base as usize);
        }
        println!("Cadence aarch64 boot check");
        println!("@boot el={} dtb={:#x}", boot.entry_el(), boot.dtb_address());
        let f = match dt::parse(blob) {
            Ok(f) => f,
            Err(e) => {
                println!("error: {e}");
                exit(ExitCode::ConfigError)
            }
        };
        println!(
            "@dt mem={:#x}+{:#x} uart={:#x} gicd={:#x} gicr={:#x} psci={} ecam={:#x}+{:#x} buses={}-{} cpus={}",
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
            f.ncpus
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
