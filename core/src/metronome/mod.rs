//! The Metronome controller: shared lanes (queue k of every port), one trylock each, adaptive sleep
//! (seed paper §IV, eq. (13) and its multi-queue form).
//!
//! M workers share N receive queues (M ≥ N is the intended setting). The pieces:
//!
//! - [`LaneShare`]: per lane, shared by all workers: the [`TryLock`], the load estimate ρ, the
//!   time of the last release, the current short timeout `T_S` and the lane's statistics. All of
//!   it is kept in atomics; the estimator fields are written only by the lock holder, so
//!   `Relaxed` accesses suffice (the lock's Acquire/Release orders them).
//! - [`Scheduler`]: per worker core, owned: the lane it will try next, its role (primary after a win,
//!   backup after a loss), a small PRNG for the backup's random lane choice, and its counters.
//! - [`Metronome`]: the parameters (in ticks) plus the lanes.
//!
//! One round of a worker is a pure state machine that the firmware loop and the simulator both
//! drive with their own clock:
//!
//! ```text
//! match worker.attempt(&metronome, now) {
//!     Attempt::Won(session) => {            // primary; session.vacation() = V
//!         /* rx_burst until it returns 0, process, count packets */
//!         let t_s = worker.finish(session, clock.now(), packets); // updates ρ, T_S; releases
//!         /* flush TX, sleep t_s */
//!     }
//!     Attempt::Lost { sleep } => { /* backup: sleep T_L; worker.lane() is now random */ }
//! }
//! ```
//!
//! The rule for `T_S` is [`short_timeout_factor`] times `V̄`, then clamped
//! (`min`/`max`, and below `margin·D/R` so that a ring of `D` descriptors cannot fill at line
//! rate `R` while every worker sleeps).
//!
//! Floating point: the estimator and the rule use `f64` (soft-float on `x86_64-unknown-none`;
//! it runs once per busy period, not per packet). `pow` for a non-integer `m` comes from `libm`.
//!
//! What the controller keeps: per lane the ρ EWMA, the `T_S` rule with a real-valued `m`
//! (finite for every input), the clamps and the ring-depth bound, the primary/backup worker
//! state machine ([`Scheduler::attempt`] / [`Scheduler::finish`]), per-lane counters and a
//! fixed log histogram for the vacation p99.
//!
//! **Beyond the paper: vacation feedback.** `MetronomeConfig::vacation_feedback_gain`
//! corrects `T_S` from the measured vacation: the simulator shows that backups sleeping
//! `T_L` make the paper's rule overshoot `V̄` by up to 2.4× at low load
//! (`sim/tests/metronome_acceptance.rs`). The library default is 0 (the paper's rule); the
//! image's `feedback=` boot option defaults to 0.03. The correction has anti-windup: it
//! never integrates past the value at which `c·T_S(ρ)` meets a clamp (the ring bound
//! `MetronomeConfig::ring_bound_ns`, the min/max timeouts), so a `T_S` pinned at a clamp
//! recovers as soon as the load moves. The simulator (`cadence-sim`, `cargo xtask sim
//! metronome`) runs this same controller in virtual time.
//!
//! Files: `config` (the parameters and their validation), `rule` (the `T_S` rule and the
//! estimator's parameters in ticks), `lane` (per-lane shared state), `scheduler` (a worker's
//! state machine and its counters); the controller [`Metronome`] ties them together here.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::hist::{AtomicHistogram, LogHistogram};
use crate::rand::XorShift64;

use crate::sync::{Holder, TryLock, TryLockGuard};
use crate::time::{Duration, Instant, TickRate};

mod config;
mod lane;
mod rule;
mod scheduler;

pub use config::*;
pub use lane::*;
pub use rule::*;
pub use scheduler::*;

/// The parameters plus the lanes they govern. `Q` is any owner of a slice of lanes:
/// `Vec<LaneShare>` / `Box<[LaneShare]>` built at init, or a `&'static [LaneShare]`.
#[derive(Debug)]
pub struct Metronome<Q> {
    params: Params,
    lanes: Q,
}

impl Metronome<alloc::vec::Vec<LaneShare>> {
    /// A controller for `workers` cores and `lanes` fresh lanes (allocates at init only).
    pub fn with_lanes(
        cfg: &MetronomeConfig,
        rate: TickRate,
        workers: usize,
        lanes: usize,
    ) -> Result<Self, MetronomeConfigError> {
        let params = Params::new(cfg, rate, workers, lanes)?;
        let qs = (0..lanes).map(|_| LaneShare::new(params.initial_short_timeout())).collect();
        Ok(Self { params, lanes: qs })
    }
}

impl<Q: AsRef<[LaneShare]>> Metronome<Q> {
    /// A controller over existing lane states (`lanes` must not be empty: then `None`).
    pub fn new(params: Params, lanes: Q) -> Option<Self> {
        if lanes.as_ref().is_empty() { None } else { Some(Self { params, lanes }) }
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// All lanes.
    pub fn lanes(&self) -> &[LaneShare] {
        self.lanes.as_ref()
    }
}

#[cfg(test)]
mod tests;
