//! The aarch64 [`Machine`]: the generic timer's virtual counter as the clock, one
//! `WfiSleeper` per core, workers on the secondary cores through their job mailboxes
//! (`cadence_platform_aarch64::jobs`), the PL011 for the machine lines and the management
//! input, the human log as defmt over semihosting.
//!
//! A hung worker's core is stopped for good with a Group 0 SGI taken as FIQ
//! (`cadence_platform_aarch64::fence`), the counterpart of the x86 image's NMI.

extern crate alloc;

use alloc::boxed::Box;
use core::fmt::{self, Write};

use cadence_core::time::Duration;
use cadence_firmware::forward::{BootNonce, Event, Machine, Outcome, SleepSummary};

use crate::platform::exit::exit;
use crate::platform::jobs::{self, RunError};
use crate::platform::pl011;
use crate::platform::timer::{GenericClock, WfiSleeper};

/// The machine the image runs on.
#[derive(Debug)]
pub struct BareMetal {
    pub clock: GenericClock,
    /// Indices (into the tree's cores) of the secondaries that came online, in order:
    /// worker `w` (≥ 1) runs on `workers[w - 1]`.
    pub workers: heapless::Vec<usize, { crate::platform::dt::MAX_CPUS }>,
    /// This boot's nonce, drawn at boot ([`super::nonce`]).
    pub nonce: BootNonce,
    /// The boot core's index (worker 0 runs there).
    pub boot_core: usize,
    /// Every core's MPIDR, by index (the tree's order).
    pub mpidrs: [u64; crate::platform::dt::MAX_CPUS],
}

/// How long a fenced core has to acknowledge the FIQ (it takes it at the next instruction
/// boundary; the margin is for an emulator's scheduling).
const FENCE_TIMEOUT_US: u64 = 100_000;

impl BareMetal {
    fn core_of(&self, w: usize) -> Option<usize> {
        self.workers.get(w.checked_sub(1)?).copied()
    }
}

/// Why a worker could not be had.
#[derive(Debug, Clone, Copy)]
pub struct BareMetalError(RunError);

impl fmt::Display for BareMetalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl Machine for BareMetal {
    type Clock = GenericClock;
    type Sleeper = WfiSleeper;
    type Error = BareMetalError;

    fn clock(&self) -> GenericClock {
        self.clock
    }

    fn max_workers(&self) -> usize {
        1 + self.workers.len()
    }

    fn sleeper(&self, _worker: usize) -> Result<WfiSleeper, BareMetalError> {
        Ok(WfiSleeper::default())
    }

    fn sleep_summary(_s: &WfiSleeper) -> SleepSummary {
        // WFE does not wait under TCG (`@wfe` of the boot check): no watched sleeps.
        SleepSummary::default()
    }

    fn fence(&self, worker: usize) -> Option<cadence_core::sync::Fenced> {
        // Worker 0 runs on the boot core, worker w on the w-th online secondary.
        let core = if worker == 0 { Some(self.boot_core) } else { self.core_of(worker) }?;
        let mpidr = *self.mpidrs.get(core)?;
        let ticks = self.clock.tick_rate().ticks_from_us(FENCE_TIMEOUT_US).ticks();
        crate::platform::fence::fence(core, mpidr, cadence_core::sync::Holder::of(worker as u32), ticks).ok()
    }

    fn spawn(&self, worker: usize, job: Box<dyn FnOnce() + Send + 'static>) -> Result<(), BareMetalError> {
        let core = self.core_of(worker).ok_or(BareMetalError(RunError::NoSuchCore))?;
        jobs::run(core, job).map_err(BareMetalError)
    }

    fn spawn_watchdog(&self, index: usize, job: Box<dyn FnOnce() + Send + 'static>) -> bool {
        self.core_of(index).is_some_and(|core| jobs::run(core, job).is_ok())
    }

    fn join(&self, worker: usize, timeout: Duration) -> bool {
        self.core_of(worker).is_none_or(|core| jobs::wait_idle(core, timeout.ticks()))
    }

    fn boot_nonce(&self) -> BootNonce {
        self.nonce
    }

    fn abort(&self, outcome: Outcome) -> ! {
        exit(super::exit_code(outcome))
    }

    fn line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) {
        pl011::console(|uart| {
            let _ = write(uart);
            let _ = uart.write_str("\n");
        });
    }

    fn try_line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) -> bool {
        // QEMU's PL011 takes bytes as fast as they come (no FIFO wait), so a line never
        // waits long: written at once.
        self.line(write);
        true
    }

    fn read_mgmt(&self, buf: &mut [u8]) -> usize {
        pl011::read_ready(buf)
    }

    fn log(&self, args: fmt::Arguments<'_>) {
        crate::bare::log(args);
    }

    fn event(&self, e: Event) {
        match e {
            Event::Started { workers, lanes } => {
                defmt::info!("forwarding started: {=usize} workers, {=usize} lanes", workers, lanes)
            }
            Event::Done => defmt::info!("forwarding done"),
        }
    }
}
