//! The bare-metal half of the image: entry, NIC bring-up, the forwarding loop.
//!
//! - this file: `kmain` (boot options first, then `cadence_platform::init`, the banner, the
//!   pool, the NICs, then `mode=boot` or `mode=forward`; the whole sequence is in the
//!   platform's `boot` module docs);
//! - `crate::bare::nics`: NIC selection (`nics=`) and probe over virtio-net, igb, ixgbe
//!   and i40e (shared with the aarch64 image);
//! - `cores`: `mode=boot`'s SMP check;
//! - `crate::bare::chain`: the chain spec (and NetBlaze profile) from boot module 0;
//! - `machine`: the bare-metal `forward::Machine`: TSC, `HaltSleeper`, the SMP job mailbox,
//!   COM1 with a non-blocking backlog for machine lines, `Machine::log` → defmt on COM2 for
//!   the human log;
//! - `report`: the banner and the report lines.

mod cores;
mod machine;
mod report;

use crate::bare::nics;

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;

use cadence_core::buf::Pool;
use cadence_firmware::config::{BootConfig, Job};
use cadence_firmware::forward::{self, Outcome};
use cadence_platform::bootinfo::BootInfo;
use cadence_platform::exit::{ExitCode, exit};
use cadence_platform::println;
use cadence_platform::sleep::SleepConfig;
use cadence_platform::smp::{self, SmpConfig};

cadence_platform::entry!(kmain);

fn kmain(boot: &'static BootInfo) -> ! {
    // COM1 carries the machine lines (docs/PROTOCOL.md); what people read goes to COM2 as
    // defmt. The empty line ends whatever the firmware before us left on the line.
    println!();
    log(format_args!("Cadence {} ({:?} boot)", env!("CARGO_PKG_VERSION"), boot.protocol()));
    // The configuration is checked before anything else, so a bad command line fails
    // fast and names the key. A line that was cut (too long, not UTF-8) is refused whole.
    if let Some(e) = boot.cmdline_error() {
        println!("error: {e}");
        exit(ExitCode::ConfigError)
    }
    let cfg = match BootConfig::parse(boot.cmdline()) {
        Ok(cfg) => cfg,
        Err(e) => {
            println!("error: {e}");
            exit(ExitCode::ConfigError)
        }
    };
    let mut p = match cadence_platform::init(boot) {
        Ok(p) => p,
        Err(e) => cadence_platform::fail(e),
    };
    report::banner(&p, &cfg);
    // The chain configuration (boot module 0) is checked before any device is touched.
    let (spec, profile) = crate::bare::chain::spec(p.module(0));
    // One pool per lane: a lane's queues draw from and return to its own buffers only.
    let mut pools = Vec::with_capacity(cfg.lanes);
    for _ in 0..cfg.lanes {
        match p
            .dma
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
    let ports = match nics::probe(&p.pci, &mut p.dma, &p.clock, &mut pools[0], &cfg, &|port| spec.longest_frame(port)) {
        Ok((ports, tried)) => {
            // A NIC that failed was reported and skipped; with none left of those
            // tried, there is nothing to run.
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
    match cfg.mode {
        Job::Boot => {
            // Every core up, each one's deadline sleeper fired: `@cpu` lines and `@smp`.
            if let Err(e) = cores::check(&p) {
                println!("error: smp: {e}");
                exit(ExitCode::RuntimeFailure)
            }
            log(format_args!("boot: done ({} NICs up)", ports.len()));
            exit(ExitCode::Success)
        }
        Job::Forward => {
            let cores = match smp::start_aps(&p, &SmpConfig::default()) {
                Ok(c) => c,
                Err(e) => {
                    println!("error: smp: {e}");
                    exit(ExitCode::RuntimeFailure)
                }
            };
            let mut sleep = SleepConfig::default();
            sleep.mwait = cfg.mwait;
            let machine: &'static machine::BareMetal =
                Box::leak(Box::new(machine::BareMetal { cores, clock: p.clock, sleep }));
            let (mbps, from) = cfg.line_rate_mbps(ports.iter().filter_map(nics::Nic::speed_mbps).min());
            let ports: Vec<nics::Nic> = ports.into_iter().collect();
            exit(
                match forward::run(
                    machine,
                    &cfg,
                    pools,
                    ports,
                    &spec,
                    profile.as_ref(),
                    forward::LineRate { mbps, from },
                ) {
                    Outcome::Success => ExitCode::Success,
                    Outcome::ConfigError => ExitCode::ConfigError,
                    Outcome::RuntimeFailure => ExitCode::RuntimeFailure,
                },
            )
        }
    }
}

/// One line of the human log (on COM2, as defmt).
pub(crate) use crate::bare::log;

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    cadence_platform::panic_exit(info)
}
