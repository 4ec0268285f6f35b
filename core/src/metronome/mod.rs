//! The Metronome controller: shared RX queues, one trylock each, adaptive sleep
//! (seed paper §IV, eq. (13) and its multi-queue form).
//!
//! M workers share N receive queues (M ≥ N is the intended setting). The pieces:
//!
//! - [`QueueState`]: per queue, shared by all workers: the [`TryLock`], the load estimate ρ, the
//!   time of the last release, the current short timeout `T_S` and the queue's statistics. All of
//!   it is kept in atomics; the estimator fields are written only by the lock holder, so
//!   `Relaxed` accesses suffice (the lock's Acquire/Release orders them).
//! - [`Scheduler`]: per worker core, owned: the queue it will try next, its role (primary after a win,
//!   backup after a loss), a small PRNG for the backup's random queue choice, and its counters.
//! - [`Metronome`]: the parameters (in ticks) plus the queues.
//!
//! One round of a worker is a pure state machine that the firmware loop and the simulator both
//! drive with their own clock:
//!
//! ```text
//! match worker.try_poll(&metronome, now) {
//!     Poll::Won(session) => {            // primary; session.vacation() = V
//!         /* rx_burst until it returns 0, process, count packets */
//!         let t_s = worker.finish(session, clock.now(), packets); // updates ρ, T_S; releases
//!         /* flush TX, sleep t_s */
//!     }
//!     Poll::Lost { sleep } => { /* backup: sleep T_L; worker.queue() is now random */ }
//! }
//! ```
//!
//! The rule for `T_S` ("5." in the spec) is [`short_timeout_factor`] times `V̄`, then clamped
//! (`min`/`max`, and below `margin·D/R` so that a ring of `D` descriptors cannot fill at line
//! rate `R` while every worker sleeps, spec item 7).
//!
//! Floating point: the estimator and the rule use `f64` (soft-float on `x86_64-unknown-none`;
//! it runs once per busy period, not per packet). `pow` for a non-integer `m` comes from `libm`.

//!
//! Files: `config` (the parameters and their validation), `rule` (the `T_S` rule and the
//! estimator's parameters in ticks), `queue` (per-queue shared state), `scheduler` (a worker's
//! state machine and its counters); the controller [`Metronome`] ties them together here.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::hist::{AtomicHistogram, LogHistogram};
use crate::rand::XorShift64;

use crate::sync::{Holder, TryLock, TryLockGuard};
use crate::time::{Duration, Instant, TickRate};

mod config;
mod queue;
mod rule;
mod scheduler;

pub use config::*;
pub use queue::*;
pub use rule::*;
pub use scheduler::*;

/// The parameters plus the queues they govern. `Q` is any owner of a slice of queues:
/// `Vec<QueueState>` / `Box<[QueueState]>` built at init, or a `&'static [QueueState]`.
#[derive(Debug)]
pub struct Metronome<Q> {
    params: Params,
    queues: Q,
}

impl Metronome<alloc::vec::Vec<QueueState>> {
    /// A controller for `workers` cores and `queues` fresh queues (allocates at init only).
    pub fn with_queues(
        cfg: &MetronomeConfig,
        rate: TickRate,
        workers: usize,
        queues: usize,
    ) -> Result<Self, MetronomeConfigError> {
        let params = Params::new(cfg, rate, workers, queues)?;
        let qs = (0..queues).map(|_| QueueState::new(params.initial_short_timeout())).collect();
        Ok(Self { params, queues: qs })
    }
}

impl<Q: AsRef<[QueueState]>> Metronome<Q> {
    /// A controller over existing queue states (`queues` must not be empty: then `None`).
    pub fn new(params: Params, queues: Q) -> Option<Self> {
        if queues.as_ref().is_empty() { None } else { Some(Self { params, queues }) }
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// All queues.
    pub fn queues(&self) -> &[QueueState] {
        self.queues.as_ref()
    }
}

#[cfg(test)]
mod tests;
