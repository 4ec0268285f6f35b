//! The aarch64 boot-check image: boots on QEMU `virt`, prints what it found, exits 33.
//!
//! Lines (COM1's protocol style, `@tag key=value …`):
//! - `Cadence aarch64 boot check` — the banner;
//! - `@boot el=<entry EL> runs_at_el=<EL now> dtb=<address>`;
//! - `@dt mem=<base>+<size> uart=… gicd=… gicr=… psci=hvc|smc ecam=<base>+<size> buses=<a>-<b> cpus=<n> timer_intid=<n>`;
//! - `@mmu tables=<n> heap=<base>+<size>`;
//! - `@timer cntfrq=<Hz> hz=<Hz used>`;
//! - `@sleep asked_us=<µs> slept_ticks=<n> returned=1 fired=<n> wfis=<n>`: one deadline
//!   sleep on the boot core;
//! - `@wfe returns_in_1ms=<n>`: how often `WFE` returned in 1 ms with no event source armed
//!   (≫ 1: it does not wait — QEMU TCG's yield);
//! - `@cpu index=<i> mpidr=<m> online=1|0 sleeps=<n> fired=<n>` per core (the boot core
//!   included: one deadline sleep each, woken by its own virtual timer) and
//!   `@smp cores=<n> online=<n> psci_version=<major>.<minor>`;
//! - `error: core <i> …` for a core that `CPU_ON` refused or that did not check in (the
//!   run goes on);
//! - `@pci bdf=<bb:dd.f> id=<vendor>:<device> class=<cccccc> bars=<n assigned>` per
//!   function on bus 0, and `@nic index=<i> kind=virtio-net bdf=… mac=<aa:bb:…> qsize=<n>`
//!   per virtio-net function brought up with `cadence-drivers`' driver (`error: …` if
//!   one fails), then `@pcisum functions=<n> nics=<n>`;
//! - with `fault=unmapped` on the command line (`-append`): a read of an unmapped address,
//!   which the exception vectors report (`error: CPU exception: …`) and exit 39;
//! - with `fault=stack`: unbounded recursion on the boot core, and with
//!   `fault=stack-secondary` on core 1; the guard page below the stack stops it and the
//!   vectors report it on the core's exception stack (`error: stack overflow: …`, exit 39);
//! - `error: …` and exit 35 (the tree) or 37 (the machine) when bring-up fails.
//!
//! On the host this binary is an empty stub (the workspace builds every crate there);
//! `cadence_build::aarch64::build` builds the real one for `aarch64-unknown-none`.
#![cfg_attr(all(target_arch = "aarch64", target_os = "none"), no_std, no_main)]

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
mod image {
    use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

    use cadence_core::buf::Pool;
    use cadence_core::nic::Port;
    use cadence_core::time::{Clock, Instant, Sleeper};
    use cadence_drivers::virtio::{self, VirtioNet};
    use cadence_platform_aarch64::dt::MAX_CPUS;
    use cadence_platform_aarch64::exit::{ExitCode, exit, park};
    use cadence_platform_aarch64::pcie::Bar;
    use cadence_platform_aarch64::smp::{self, Start};
    use cadence_platform_aarch64::timer::{self, WfiSleeper};
    use cadence_platform_aarch64::{BootArgs, entry, println};
    use cadence_platform_aarch64::{Platform, psci};

    entry!(kmain);

    /// The boot core's test sleep.
    const SLEEP_US: u64 = 2_000;
    /// Each secondary's sleep, in counter ticks (set before they start).
    static SECONDARY_SLEEP_TICKS: AtomicU64 = AtomicU64::new(0);
    /// Per core: 1 + the number of fired wake-ups, once its sleep returned at or after
    /// its deadline (0: not yet, or early).
    static SLEPT: [AtomicU8; MAX_CPUS] = [const { AtomicU8::new(0) }; MAX_CPUS];

    /// `fault=stack-secondary`: core 1 overflows its stack.
    static OVERFLOW_SECONDARY: AtomicU8 = AtomicU8::new(0);

    /// Recurses until the stack runs out (`fault=stack`): each frame keeps 512 bytes.
    #[inline(never)]
    fn overflow(depth: u64) -> u64 {
        let mut frame = [0u8; 512];
        frame[0] = depth as u8;
        core::hint::black_box(&mut frame);
        if depth == u64::MAX {
            return 0;
        }
        overflow(depth + 1).wrapping_add(u64::from(core::hint::black_box(frame[0])))
    }

    /// A secondary core: one deadline sleep on its own timer, report, park.
    fn secondary(index: usize) -> ! {
        if index == 1 && OVERFLOW_SECONDARY.load(Ordering::Acquire) == 1 {
            let n = overflow(0);
            println!("error: core 1's recursion returned {n}");
            exit(ExitCode::RuntimeFailure)
        }
        let mut s = WfiSleeper::default();
        let start = timer::counter();
        let deadline = Instant(start.saturating_add(SECONDARY_SLEEP_TICKS.load(Ordering::Acquire)));
        let woke = s.sleep_until(deadline);
        if woke >= deadline
            && let Some(slot) = SLEPT.get(index)
        {
            slot.store(1 + s.fired.min(100) as u8, Ordering::Release);
        }
        park()
    }

    /// Buffers per NIC's pool.
    const POOL: usize = 512;

    /// Enumerates PCIe and brings every virtio-net function up.
    fn pci_check(p: &Platform) {
        let bus = p.pci();
        let Some(mut dma) = p.take_dma() else {
            println!("error: the DMA range was already taken");
            exit(ExitCode::RuntimeFailure)
        };
        let mut nics = 0;
        for f in bus.functions.iter().flatten() {
            let assigned = f.bars.iter().filter(|b| matches!(b, Bar::Mem { .. })).count();
            println!("@pci bdf={} id={:04x}:{:04x} class={:06x} bars={assigned}", f.bdf, f.vendor, f.device, f.class);
            let is_net = f.vendor == virtio::VENDOR_ID
                && (f.device == virtio::DEVICE_ID || f.device == virtio::TRANSITIONAL_DEVICE_ID);
            if !is_net {
                continue;
            }
            let pool = dma
                .packet_memory(POOL)
                .map_err(|_| "no DMA memory for the packet pool")
                .and_then(|(mem, phys)| Pool::try_new(mem, phys, POOL).map_err(|_| "packet pool"));
            let mut pool = match pool {
                Ok(pool) => pool,
                Err(e) => {
                    println!("error: virtio-net {}: {e}", f.bdf);
                    continue;
                }
            };
            match VirtioNet::try_new(f, &mut dma, &p.clock, &mut pool, &virtio::Config::default()) {
                Ok(dev) => {
                    let m = dev.mac();
                    println!(
                        "@nic index={nics} kind=virtio-net bdf={} mac={:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x} qsize={}",
                        f.bdf,
                        m[0],
                        m[1],
                        m[2],
                        m[3],
                        m[4],
                        m[5],
                        dev.queue_size()
                    );
                    nics += 1;
                }
                Err(e) => println!("error: virtio-net {}: {e}", f.bdf),
            }
        }
        if bus.unassigned > 0 {
            println!("error: {} PCI functions' BARs did not fit the 32-bit window", bus.unassigned);
        }
        println!("@pcisum functions={} nics={nics}", bus.count);
    }

    /// Starts the secondaries and prints one `@cpu` line per core and the `@smp` line.
    fn smp_check(p: &Platform, boot_fired: u64) {
        let ver = psci::check(psci::call(p.facts.psci, psci::PSCI_VERSION, 0, 0, 0)).unwrap_or(0);
        SECONDARY_SLEEP_TICKS.store(p.clock_ticks_ms(2), Ordering::Release);
        let starts = smp::start_secondaries(p, secondary, p.clock_ticks_ms(2_000));
        // The online cores' sleeps: wait for their reports (deadline 2 s of counter).
        let end = timer::counter().saturating_add(p.clock_ticks_ms(2_000));
        let online = |i: usize| starts[i] == Some(Start::Online);
        while (0..p.facts.ncpus).any(|i| online(i) && SLEPT[i].load(Ordering::Acquire) == 0) && timer::counter() < end {
            core::hint::spin_loop();
        }
        let mut n_online = 0;
        for i in 0..p.facts.ncpus {
            let (up, sleeps, fired) = match starts[i] {
                None => (true, 1, boot_fired),
                Some(Start::Online) => {
                    let s = SLEPT[i].load(Ordering::Acquire);
                    (true, u64::from(s > 0), u64::from(s.saturating_sub(1)))
                }
                Some(Start::Refused(e)) => {
                    println!("error: core {i}: CPU_ON refused: {e}");
                    (false, 0, 0)
                }
                Some(Start::Silent) => {
                    println!("error: core {i} did not check in within 2 s; going on without it");
                    (false, 0, 0)
                }
            };
            if let Some(e) = smp::gic_error(i) {
                println!("error: core {i}: {e}");
            }
            n_online += usize::from(up);
            println!(
                "@cpu index={i} mpidr={:#x} online={} sleeps={sleeps} fired={fired}",
                p.facts.cpus[i],
                u8::from(up)
            );
        }
        println!("@smp cores={} online={n_online} psci_version={}.{}", p.facts.ncpus, ver >> 16, ver & 0xffff);
    }

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
        println!(
            "@boot el={} runs_at_el={} dtb={:#x}",
            boot.entry_el(),
            cadence_platform_aarch64::current_el(),
            boot.dtb_address()
        );
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
        if boot.cmdline().split_whitespace().any(|w| w == "fault=stack") {
            let n = overflow(0);
            println!("error: the recursion returned {n}");
            exit(ExitCode::RuntimeFailure)
        }
        if boot.cmdline().split_whitespace().any(|w| w == "fault=stack-secondary") {
            OVERFLOW_SECONDARY.store(1, Ordering::Release);
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
        // Does WFE wait here? With no event source armed (no SEV, event stream off, IRQs
        // masked) a waiting WFE returns about once in 1 ms; a WFE that is a yield returns
        // as often as the loop runs.
        let end = timer::counter().saturating_add(p.clock_ticks_ms(1));
        let mut returns = 0u64;
        while timer::counter() < end && returns < 1_000_000 {
            timer::wait_for_event();
            returns += 1;
        }
        println!("@wfe returns_in_1ms={returns}");
        smp_check(&p, s.fired);
        pci_check(&p);
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
