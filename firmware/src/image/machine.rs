//! The bare-metal [`Machine`]: the TSC clock, one `HaltSleeper` per core, application
//! cores started over the SMP job mailbox, COM1 with a non-blocking backlog for `@stats`.

extern crate alloc;

use alloc::boxed::Box;
use core::fmt::{self, Write};

use cadence_core::time::Duration;
use cadence_firmware::forward::{BootNonce, Event, Machine, Outcome, SleepSummary};
use cadence_platform::clock::TscClock;
use cadence_platform::exit::{ExitCode, exit};
use cadence_platform::serial;
use cadence_platform::sleep::{HaltSleeper, SleepConfig};
use cadence_platform::smp::{CoreId, Cores, RunError};

/// How long a fenced core has to acknowledge the NMI (it takes it at the next instruction
/// boundary; the margin is for an emulator's scheduling).
const FENCE_TIMEOUT_US: u64 = 100_000;

/// Bytes of queued console output moved per pump (one call per worker-0 round).
const PUMP_BYTES: usize = 256;

/// The machine the image runs on.
pub struct BareMetal {
    pub cores: Cores,
    pub clock: TscClock,
    pub sleep: SleepConfig,
}

impl fmt::Debug for BareMetal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BareMetal").field("online", &self.cores.online()).finish_non_exhaustive()
    }
}

impl BareMetal {
    /// The core that runs worker `w` (≥ 1): the `w`-th online application core.
    fn core_of(&self, w: usize) -> Option<CoreId> {
        self.cores.iter().skip(1).filter(|c| c.is_online()).nth(w.checked_sub(1)?).map(|c| c.id())
    }
}

/// Why a worker could not be had on bare metal.
#[derive(Debug, Clone, Copy)]
pub enum BareMetalError {
    /// The core's sleeper (its LAPIC timer).
    Sleeper(cadence_platform::sleep::SleepError),
    /// Handing the job to the core.
    Run(RunError),
}

impl fmt::Display for BareMetalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BareMetalError::Sleeper(e) => write!(f, "{e}"),
            BareMetalError::Run(e) => write!(f, "{e}"),
        }
    }
}

impl Machine for BareMetal {
    type Clock = TscClock;
    type Sleeper = HaltSleeper;
    type Error = BareMetalError;

    fn clock(&self) -> TscClock {
        self.clock
    }

    fn max_workers(&self) -> usize {
        self.cores.online()
    }

    fn sleeper(&self, _worker: usize) -> Result<HaltSleeper, BareMetalError> {
        HaltSleeper::new(self.sleep).map_err(BareMetalError::Sleeper)
    }

    fn fence(&self, worker: usize) -> Option<cadence_core::sync::Fenced> {
        // Worker 0 runs on the BSP, worker w on the w-th online application core.
        let core = if worker == 0 { Some(CoreId::BSP) } else { self.core_of(worker) }?;
        let holder = cadence_core::sync::Holder::of(worker as u32);
        cadence_platform::fence::fence(&self.cores, core, holder, FENCE_TIMEOUT_US).ok()
    }

    fn boot_nonce(&self) -> BootNonce {
        let n = cadence_platform::entropy::boot_nonce();
        BootNonce { value: n.value, source: n.source.as_str() }
    }

    fn sleep_summary(s: &HaltSleeper) -> SleepSummary {
        // Halted cycles are counted by the pipeline; lateness is not measured here.
        SleepSummary {
            watched: s.watched_sleeps(),
            mwait_hollow: Some(u64::from(s.mwait_hollow())),
            ..SleepSummary::default()
        }
    }

    fn spawn(&self, worker: usize, job: Box<dyn FnOnce() + Send + 'static>) -> Result<(), BareMetalError> {
        let id = self.core_of(worker).ok_or(BareMetalError::Run(RunError::NoSuchCore))?;
        self.cores.run(id, move |_ctx| job()).map_err(BareMetalError::Run)
    }

    fn spawn_watchdog(&self, index: usize, job: Box<dyn FnOnce() + Send + 'static>) -> bool {
        // The first online application core no worker runs on, if there is one.
        self.core_of(index).is_some_and(|id| self.cores.run(id, move |_ctx| job()).is_ok())
    }

    fn abort(&self, outcome: Outcome) -> ! {
        serial::flush();
        exit(match outcome {
            Outcome::Success => ExitCode::Success,
            Outcome::ConfigError => ExitCode::ConfigError,
            Outcome::RuntimeFailure => ExitCode::RuntimeFailure,
        })
    }

    fn join(&self, worker: usize, timeout: Duration) -> bool {
        self.core_of(worker).is_none_or(|id| self.cores.wait_idle(id, timeout).is_ok())
    }

    fn line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) {
        // Queued output first, so lines keep their order.
        serial::flush();
        serial::console(|uart| {
            let _ = write(uart);
            let _ = uart.write_str("\n");
        });
    }

    fn try_line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) -> bool {
        let queued = serial::try_queue(write);
        serial::pump(PUMP_BYTES);
        queued
    }

    fn pump_console(&self) {
        serial::pump(PUMP_BYTES);
    }

    fn read_mgmt(&self, buf: &mut [u8]) -> usize {
        // COM1's receiver: the management channel (docs/PROTOCOL.md). Reading RBR does not
        // disturb the transmitter, so the console lock is not needed.
        serial::Uart::new(serial::COM1).read_ready(buf)
    }

    fn log(&self, args: fmt::Arguments<'_>) {
        // Human lines go to COM2 as defmt (COM1 keeps the machine lines).
        crate::image::log(args);
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
