//! A job mailbox per secondary core, for an image that hands work to its cores after they
//! are up (the firmware's forwarding workers): a core started with [`idle_loop`] as its
//! [`crate::smp::CoreMain`] waits for a job, runs it, and waits again. Such a core can be
//! stopped for good ([`crate::fence`]).
//!
//! Waiting is the deadline sleeper's `WFI` in steps of [`IDLE_STEP_US`] (WFE would only
//! poll: QEMU's TCG treats it as a yield, `@wfe` of the boot check), so an idle core costs
//! its host thread almost nothing and picks a job up at most one step after it was posted.

extern crate alloc;

use alloc::boxed::Box;
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cadence_core::time::{Instant, Sleeper};

use crate::dt::MAX_CPUS;
use crate::timer::{self, WfiSleeper};

/// A job: runs once on the core it was given to.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// How long an idle core sleeps between looks at its mailbox.
pub const IDLE_STEP_US: u64 = 100;

/// Per core: the posted job, if it has not been taken yet.
static SLOTS: [spin::Mutex<Option<Job>>; MAX_CPUS] = [const { spin::Mutex::new(None) }; MAX_CPUS];
/// Per core: a job was posted and has not returned yet.
static BUSY: [AtomicBool; MAX_CPUS] = [const { AtomicBool::new(false) }; MAX_CPUS];
/// [`IDLE_STEP_US`] in counter ticks (set by [`set_rate`] before the cores start).
static STEP_TICKS: AtomicU64 = AtomicU64::new(0);

/// Why a job could not be posted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunError {
    /// No such core, or it is not online.
    NoSuchCore,
    /// The core is still running an earlier job.
    Busy,
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RunError::NoSuchCore => "no such core online",
            RunError::Busy => "the core is busy with an earlier job",
        })
    }
}

/// Sets the idle step from the counter's rate; call before starting cores with
/// [`idle_loop`].
pub fn set_rate(rate: cadence_core::time::TickRate) {
    STEP_TICKS.store(rate.ticks_from_us(IDLE_STEP_US).ticks().max(1), Ordering::Release);
}

/// A secondary core's life when it takes jobs: look at the mailbox, run the job, mark the
/// core idle, sleep a step, again.
pub fn idle_loop(index: usize) -> ! {
    // A worker that hangs in its job can be stopped (`crate::fence`).
    crate::fence::arm_this_core();
    let mut sleeper = WfiSleeper::default();
    loop {
        let job = SLOTS.get(index).and_then(|s| s.lock().take());
        match job {
            Some(job) => {
                job();
                if let Some(b) = BUSY.get(index) {
                    b.store(false, Ordering::Release);
                }
            }
            None => {
                let step = STEP_TICKS.load(Ordering::Acquire).max(1);
                sleeper.sleep_until(Instant(timer::counter().saturating_add(step)));
            }
        }
    }
}

/// Posts `job` to core `index` (online, running [`idle_loop`], not busy).
pub fn run(index: usize, job: Job) -> Result<(), RunError> {
    if !crate::smp::is_online(index) {
        return Err(RunError::NoSuchCore);
    }
    let (Some(slot), Some(busy)) = (SLOTS.get(index), BUSY.get(index)) else { return Err(RunError::NoSuchCore) };
    if busy.swap(true, Ordering::AcqRel) {
        return Err(RunError::Busy);
    }
    *slot.lock() = Some(job);
    Ok(())
}

/// Waits until core `index` has no job (returned, or none posted), at most `ticks`
/// counter ticks; `false` at the deadline.
pub fn wait_idle(index: usize, ticks: u64) -> bool {
    let Some(busy) = BUSY.get(index) else { return true };
    let end = timer::counter().saturating_add(ticks);
    while busy.load(Ordering::Acquire) {
        if timer::counter() >= end {
            return false;
        }
        core::hint::spin_loop();
    }
    true
}
