//! The aarch64 bare-metal half of the image (QEMU `virt`: GICv3, generic timer, PSCI,
//! PCIe ECAM; `cadence-platform-aarch64`): the same run as the x86_64 image (`image/`),
//! with the same machine lines and exit statuses.
//!
//! - this file: `kmain` (the boot options from `/chosen/bootargs` first, then the
//!   platform's bring-up, the banner, the chain, the pools, the NICs, then `mode=boot` or
//!   `mode=forward`), the boot nonce;
//! - `crate::bare::nics`: NIC selection (`nics=`) and bring-up, shared with the x86_64
//!   image (virtio-net and igb are what QEMU `virt` offers on PCIe);
//! - `machine`: the aarch64 `forward::Machine` (workers on the secondaries' job
//!   mailboxes, a hung worker's core stopped by FIQ);
//! - `crate::bare::chain`: the chain spec from the initial RAM disk (QEMU's `-initrd`,
//!   which it places in RAM and names in `/chosen/linux,initrd-start`/`-end`: the
//!   counterpart of the x86 image's PVH boot module 0).
//!
//! The console (the one PL011) carries the machine lines and takes the management input;
//! the human log goes out as defmt over semihosting (`-semihosting-config …,chardev=`).
//! `@banner` keeps x86's keys: `tsc_hz` is the generic counter's rate, `tsc_source` where
//! it came from (`cntfrq`: CNTFRQ_EL0; `device-tree`: the timer node's
//! `clock-frequency`), `tsc_check=none`, `cpu` the MIDR_EL1 decoded.

mod machine;

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;

use cadence_core::buf::Pool;
use cadence_core::time::Clock;
use cadence_firmware::config::{BootConfig, Job};
use cadence_firmware::forward::{self, BootNonce, Outcome};

use crate::bare::nics;
use crate::platform::exit::{ExitCode, exit};
use crate::platform::smp::{self, Start};
use crate::platform::{BootArgs, Platform, dt, entry, jobs, pl011, println};

entry!(kmain);

/// How long a secondary core has to check in after `CPU_ON`.
const CHECK_IN_MS: u64 = 2_000;

fn kmain(boot: BootArgs) -> ! {
    // The console first (its address is in the tree), so that a bad command line can be
    // reported before anything else is set up.
    if let Some(uart) = boot.dtb().ok().and_then(dt::console) {
        pl011::init(uart.base as usize);
    }
    let cfg = match boot.dtb().map(|b| dt::chosen(b, "bootargs")) {
        Ok(Some(raw)) if core::str::from_utf8(raw.strip_suffix(&[0]).unwrap_or(raw)).is_err() => {
            println!("error: the command line (/chosen/bootargs) is not UTF-8 text");
            exit(ExitCode::ConfigError)
        }
        _ => match BootConfig::parse(boot.cmdline()) {
            Ok(cfg) => cfg,
            Err(e) => {
                println!("error: {e}");
                exit(ExitCode::ConfigError)
            }
        },
    };
    let p = match crate::platform::init(boot) {
        Ok(p) => p,
        Err(e) => {
            println!("error: {e}");
            exit(e.exit_code())
        }
    };
    crate::bare::log(format_args!("Cadence {} (aarch64, entered at EL{})", env!("CARGO_PKG_VERSION"), boot.entry_el()));
    let bus = p.pci();
    if bus.unassigned > 0 {
        println!("warning: {} PCI functions' BARs did not fit the 32-bit window", bus.unassigned);
    }
    let pci: Vec<crate::platform::pcie::Function> = bus.functions.iter().flatten().copied().collect();
    banner(&p, &cfg, nics::count(&pci, &cfg));
    // The chain configuration (the initial RAM disk) is checked before any device is
    // touched.
    let (spec, profile) = crate::bare::chain::spec(p.initrd_bytes());
    let Some(mut dma) = p.take_dma() else {
        println!("error: the DMA range was already taken");
        exit(ExitCode::RuntimeFailure)
    };
    // One pool per lane: a lane's queues draw from and return to its own buffers only.
    let mut pools = Vec::with_capacity(cfg.lanes);
    for _ in 0..cfg.lanes {
        match dma
            .packet_memory(cfg.pool)
            .map_err(nics::NicError::PacketMemory)
            .and_then(|(mem, phys)| Pool::try_new(mem, phys, cfg.pool).map_err(nics::NicError::Pool))
        {
            Ok(pool) => pools.push(pool),
            Err(e) => {
                println!("error: lane {}: {e}", pools.len());
                exit(ExitCode::RuntimeFailure)
            }
        }
    }
    // Bring-up posts no receive buffers (each lane fills its rings from its own pool), so
    // the pool handed to the drivers only satisfies their signature.
    let ports = match nics::probe(&pci, &mut dma, &p.clock, &mut pools[0], &cfg, &|port| spec.longest_frame(port)) {
        Ok((ports, tried)) => {
            if ports.is_empty() && tried > 0 {
                println!("error: no usable NIC ({tried} found, none came up)");
                exit(ExitCode::RuntimeFailure)
            }
            ports
        }
        Err(e @ (nics::NicError::NotFound(_) | nics::NicError::FrameTooLong { .. })) => {
            println!("error: {e}");
            exit(ExitCode::ConfigError)
        }
        Err(e) => {
            println!("error: {e}");
            exit(ExitCode::RuntimeFailure)
        }
    };
    // Worker 0 runs here; the others on the secondaries, which wait for jobs.
    jobs::set_rate(p.clock.rate());
    let starts = smp::start_secondaries(&p, jobs::idle_loop, p.clock_ticks_ms(CHECK_IN_MS));
    let mut workers = heapless::Vec::new();
    for (i, s) in starts.iter().enumerate().take(p.facts.ncpus) {
        match s {
            None => {}
            Some(Start::Online) => {
                let _ = workers.push(i);
            }
            Some(Start::Refused(e)) => println!("error: core {i}: CPU_ON refused: {e}; going on without it"),
            Some(Start::Silent) => {
                println!("error: core {i} did not check in within {CHECK_IN_MS} ms; going on without it")
            }
        }
        if let Some(e) = smp::gic_error(i) {
            println!("error: core {i}: {e}");
        }
    }
    match cfg.mode {
        Job::Boot => {
            println!("@smp cores={} online={}", p.facts.ncpus, 1 + workers.len());
            crate::bare::log(format_args!("boot: done ({} NICs up)", ports.len()));
            exit(ExitCode::Success)
        }
        Job::Forward => {
            pl011::enable_receiver();
            // Worker 0 (here) can be stopped too, when the watchdog has a core of its own.
            crate::platform::fence::arm_this_core();
            let boot_core = (0..p.facts.ncpus).find(|&i| starts[i].is_none()).unwrap_or(0);
            let machine: &'static machine::BareMetal = Box::leak(Box::new(machine::BareMetal {
                clock: p.clock,
                workers,
                nonce: nonce(&p, boot.dtb().ok()),
                boot_core,
                mpidrs: p.facts.cpus,
            }));
            let (mbps, from) = cfg.line_rate_mbps(ports.iter().filter_map(nics::Nic::speed_mbps).min());
            let ports: Vec<nics::Nic> = ports.into_iter().collect();
            let outcome =
                forward::run(machine, &cfg, pools, ports, &spec, profile.as_ref(), forward::LineRate { mbps, from });
            exit(exit_code(outcome))
        }
    }
}

/// The exit status of a run's outcome.
pub(crate) fn exit_code(o: Outcome) -> ExitCode {
    match o {
        Outcome::Success => ExitCode::Success,
        Outcome::ConfigError => ExitCode::ConfigError,
        Outcome::RuntimeFailure => ExitCode::RuntimeFailure,
    }
}

/// This boot's nonce: the tree's `/chosen/rng-seed` (QEMU `virt` fills it with 32 bytes
/// from the host's RNG; DTSpec 0.4 §3.6) mixed with the counter by SipHash-2-4 (a mixing
/// function: the nonce must be fresh, not secret); `clock` when the tree has no seed (the
/// counter alone then: two boots may collide).
fn nonce(p: &Platform, blob: Option<&[u8]>) -> BootNonce {
    let seed = blob.and_then(|b| dt::chosen(b, "rng-seed")).filter(|s| !s.is_empty());
    let mut input = [0u8; 40];
    input[..8].copy_from_slice(&p.clock.now().ticks().to_le_bytes());
    let n = seed.map_or(0, |s| s.len().min(32));
    if let Some(s) = seed {
        input[8..8 + n].copy_from_slice(&s[..n]);
    }
    let value = cadence_core::control::siphash24(b"cadence/nonce/v1", &input[..8 + n]);
    BootNonce { value, source: if seed.is_some() { "dt-rng-seed" } else { "clock" } }
}

/// Prints the human banner (log) and the `@banner` line.
fn banner(p: &Platform, cfg: &BootConfig, nics: usize) {
    let midr = smp::midr();
    let hz = p.clock.rate().hz();
    let source = if p.facts.timer_hz.is_some() { "device-tree" } else { "cntfrq" };
    let mem_mib = p.facts.memory.size >> 20;
    crate::bare::log(format_args!("cpu: {} ({} cores)", Cpu(midr), p.facts.ncpus));
    crate::bare::log(format_args!("counter: {hz} Hz from {source}"));
    crate::bare::log(format_args!("config: {cfg:?}"));
    println!(
        "@banner version={} cpu=\"{}\" tsc_hz={hz} tsc_source={source} tsc_check=none mem_mib={mem_mib} cores={} nics={nics}",
        env!("CARGO_PKG_VERSION"),
        Cpu(midr),
        p.facts.ncpus
    );
}

/// A core named by its MIDR_EL1 (Arm ARM D17.2.100): implementer and part number.
struct Cpu(u64);

impl core::fmt::Display for Cpu {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let implementer = (self.0 >> 24) & 0xff;
        let part = (self.0 >> 4) & 0xfff;
        let (variant, revision) = ((self.0 >> 20) & 0xf, self.0 & 0xf);
        let name = match (implementer, part) {
            (0x41, 0xd03) => "Cortex-A53",
            (0x41, 0xd07) => "Cortex-A57",
            (0x41, 0xd08) => "Cortex-A72",
            (0x41, 0xd0c) => "Neoverse-N1",
            (0x41, 0xd41) => "Cortex-A78",
            (0x41, 0xd49) => "Neoverse-N2",
            _ => "Arm core",
        };
        write!(f, "{name} r{variant}p{revision} (MIDR {:#010x})", self.0)
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    println!("error: panic: {info}");
    exit(ExitCode::Panic)
}
