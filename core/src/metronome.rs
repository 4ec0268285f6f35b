//! The Metronome controller: shared RX queues, one trylock each, adaptive sleep (`SPEC.md` §1;
//! seed paper §IV, eq. (13) and its multi-queue form).
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

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::hist::{AtomicHistogram, LogHistogram};
use crate::rand::XorShift64;

use crate::sync::{TryLock, TryLockGuard};
use crate::time::{Duration, Instant, TickRate};

/// What a worker does after losing the lock race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum LossPolicy {
    /// Metronome: a loser becomes a backup and sleeps the long timeout `T_L` (spec item 2).
    PrimaryBackup,
    /// The paper's strawman (Fig. 6): a loser sleeps the queue's current `T_S` like a winner.
    EqualTimeouts,
}

/// The knobs of the controller. Times are in nanoseconds; [`Params::new`] turns them into ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct MetronomeConfig {
    /// Target vacation `V̄`: how long a queue may sit unpolled on average (default 15 µs).
    pub target_vacation_ns: u64,
    /// Long timeout `T_L` slept by a backup after a lost race (default 500 µs).
    pub long_timeout_ns: u64,
    /// `T_S` of a queue until its first measured busy period (default 20 µs).
    pub initial_short_timeout_ns: u64,
    /// Lower clamp of `T_S` (default 1 µs).
    pub min_short_timeout_ns: u64,
    /// Upper clamp of `T_S` (default 1 ms).
    pub max_short_timeout_ns: u64,
    /// EWMA weight `a` of the OLD value in `ρ ← a·ρ + (1−a)·ρ_sample`, in `[0, 1]` (default 0.75).
    pub ewma_weight: f64,
    /// `ε` of the clamp `ρ ∈ [0, 1−ε]`, in `(0, 1)` (default 1e-6).
    pub rho_epsilon: f64,
    /// Ring depth `D` in descriptors for the ring bound; 0 disables the bound (default 4096).
    pub ring_descriptors: u32,
    /// Line rate `R` in packets/s for the ring bound; 0 disables the bound (default 14.88 Mpps,
    /// 10 GbE with 64-byte frames).
    pub line_rate_pps: u64,
    /// Safety margin of the ring bound `T_S ≤ margin·D/R`, in `(0, 1]` (default 0.5).
    pub ring_margin: f64,
    /// Loser behaviour (default [`LossPolicy::PrimaryBackup`]).
    pub loss_policy: LossPolicy,
    /// Beyond the paper: gain `g` of an integral correction `c` on `T_S`, in `[0, 1]`; 0 (the
    /// default) is the paper's rule exactly. With `g > 0` every measured vacation `V` updates
    /// `c ← c·(1 + g·(1 − V/V̄))` (the ratio capped at 3, `c` kept in `[1/20, 20]`) and the queue
    /// sleeps `c·T_S`. The rule's model takes another worker to be primary with probability
    /// `1 − ρ`; backups that sleep `T_L ≫ T_S` are primary far less often, and the measured
    /// vacation then overshoots `V̄` (up to 2.3× at M = 3 in `cadence-sim`). The correction pulls
    /// the mean back to `V̄` whatever the cause (it also absorbs wake-up latency).
    pub vacation_feedback_gain: f64,
}

impl MetronomeConfig {
    /// The ring bound of SPEC §1 rule 7, `margin·D/R`, in ns: how long `T_S` may be so that a
    /// ring of `D` descriptors filling at line rate `R` never overflows during one sleep.
    /// `None` when `D` or `R` is 0 (no bound). The simulator, the image and the hosted build all
    /// bound `T_S` through this one function.
    pub fn ring_bound_ns(&self) -> Option<f64> {
        (self.ring_descriptors > 0 && self.line_rate_pps > 0)
            .then(|| self.ring_margin * f64::from(self.ring_descriptors) * 1e9 / self.line_rate_pps as f64)
    }

    /// Whether the ring bound holds `T_S` below `V̄` at every load: then the target vacation
    /// cannot be reached (a bigger ring or the port's real, lower line rate is needed).
    pub fn ring_bound_below_target(&self) -> bool {
        self.ring_bound_ns().is_some_and(|b| b < self.target_vacation_ns as f64)
    }
}

/// Minimum-size frames per second at `mbps` megabits per second: 64-byte frames plus the
/// 20 bytes of preamble, start delimiter and inter-frame gap, 672 bits each (10 GbE:
/// 14 880 952).
pub const fn line_rate_pps_for_mbps(mbps: u64) -> u64 {
    mbps.saturating_mul(1_000_000) / 672
}

impl Default for MetronomeConfig {
    fn default() -> Self {
        Self {
            target_vacation_ns: 15_000,
            long_timeout_ns: 500_000,
            initial_short_timeout_ns: 20_000,
            min_short_timeout_ns: 1_000,
            max_short_timeout_ns: 1_000_000,
            ewma_weight: 0.75,
            rho_epsilon: 1e-6,
            ring_descriptors: 4096,
            line_rate_pps: 14_880_000,
            ring_margin: 0.5,
            loss_policy: LossPolicy::PrimaryBackup,
            vacation_feedback_gain: 0.0,
        }
    }
}

/// Why a [`MetronomeConfig`] was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MetronomeConfigError {
    /// `workers` was zero.
    NoWorkers,
    /// `queues` was zero.
    NoQueues,
    /// `ewma_weight` not in `[0, 1]`.
    EwmaWeight,
    /// `rho_epsilon` not in `(0, 1)`.
    RhoEpsilon,
    /// `ring_margin` not in `(0, 1]`.
    RingMargin,
    /// `vacation_feedback_gain` not in `[0, 1]`.
    FeedbackGain,
}

impl fmt::Display for MetronomeConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MetronomeConfigError::NoWorkers => "metronome needs at least one worker",
            MetronomeConfigError::NoQueues => "metronome needs at least one queue",
            MetronomeConfigError::EwmaWeight => "ewma_weight must lie in [0, 1]",
            MetronomeConfigError::RhoEpsilon => "rho_epsilon must lie in (0, 1)",
            MetronomeConfigError::RingMargin => "ring_margin must lie in (0, 1]",
            MetronomeConfigError::FeedbackGain => "vacation_feedback_gain must lie in [0, 1]",
        })
    }
}

/// Smallest and largest `m` that [`short_timeout_factor`] works with (inputs are clamped).
const M_MIN: f64 = 1e-6;
const M_MAX: f64 = 1e9;
/// Integer `m` up to this use the geometric series (at most 63 multiply-adds).
const M_SERIES_MAX: f64 = 64.0;

/// `T_S / V̄ = m·(1−ρ)/(1−ρ^m)` (spec item 5), finite for every input.
///
/// - `ρ` is clamped into `[0, 1]` (NaN counts as 0); `m` into `[1e-6, 1e9]` (NaN counts as 1).
/// - `ρ = 0` gives `m` (all m workers primary, `E[V] = T_S/m`); `ρ = 1` gives the limit 1 (one
///   primary, `E[V] = T_S`).
/// - Integer `m ≤ 64`: `m / (1 + ρ + … + ρ^(m−1))` by Horner's rule, no division by a difference.
/// - Otherwise `1 − ρ^m` is evaluated as `−expm1(m·log1p(−(1−ρ)))`, which keeps full relative
///   precision as ρ → 1 where the direct form cancels (the public code's `0/0` at ρ = 1).
///
/// For `m ≥ 1` the factor is non-increasing in ρ (from `m` down to 1); for `m = 1` it is 1; for
/// `m < 1` (fewer workers than queues, outside the paper's setting) it rises from `m` to 1.
pub fn short_timeout_factor(rho: f64, m: f64) -> f64 {
    let m = if m.is_nan() { 1.0 } else { m.clamp(M_MIN, M_MAX) };
    let rho = if rho.is_nan() { 0.0 } else { rho.clamp(0.0, 1.0) };
    if rho == 0.0 {
        return m;
    }
    if rho == 1.0 {
        return 1.0;
    }
    if m <= M_SERIES_MAX && libm::trunc(m) == m { m / geometric_sum(rho, m as u32) } else { factor_general(rho, m) }
}

/// `1 + ρ + … + ρ^(k−1)` for `k ≥ 1`, by repeated multiplication.
fn geometric_sum(rho: f64, k: u32) -> f64 {
    let mut s = 1.0;
    for _ in 1..k {
        s = s * rho + 1.0;
    }
    s
}

/// `m·x / (1 − (1−x)^m)` with `x = 1 − ρ ∈ (0, 1)`, for any real `m > 0`.
fn factor_general(rho: f64, m: f64) -> f64 {
    let x = 1.0 - rho;
    // 1 − ρ^m = −expm1(m·ln ρ), ln ρ = log1p(−x): no cancellation for ρ near 1.
    let d = -libm::expm1(m * libm::log1p(-x));
    if d > 0.0 && d.is_finite() {
        let f = m * x / d;
        if f.is_finite() { f } else { 1.0 }
    } else {
        // Only reachable through underflow of m·x, where the limit is 1.
        1.0
    }
}

/// The controller's parameters in clock ticks, derived once from a [`MetronomeConfig`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// `V̄` in ticks.
    v_bar: f64,
    /// `m = M/N`.
    m: f64,
    /// EWMA weight of the old value.
    a: f64,
    /// Upper end of the ρ clamp, `1 − ε`.
    rho_max: f64,
    long_timeout: Duration,
    initial_short_timeout: Duration,
    /// Clamp of `T_S` in ticks, `lower ≤ upper`; `upper` includes the ring bound.
    lower: f64,
    upper: f64,
    loss_policy: LossPolicy,
    feedback_gain: f64,
}

/// Range of the vacation-feedback correction factor.
const CORRECTION_MIN: f64 = 0.05;
const CORRECTION_MAX: f64 = 20.0;

impl Params {
    /// Parameters for `workers` cores sharing `queues` queues on a clock of `rate`.
    ///
    /// The ring bound `margin·D/R` lowers the upper clamp; if it falls below the lower clamp,
    /// the ring bound wins (a full ring is worse than a busy poll).
    pub fn new(
        cfg: &MetronomeConfig,
        rate: TickRate,
        workers: usize,
        queues: usize,
    ) -> Result<Self, MetronomeConfigError> {
        if workers == 0 {
            return Err(MetronomeConfigError::NoWorkers);
        }
        if queues == 0 {
            return Err(MetronomeConfigError::NoQueues);
        }
        if !(0.0..=1.0).contains(&cfg.ewma_weight) {
            return Err(MetronomeConfigError::EwmaWeight);
        }
        if !(cfg.rho_epsilon > 0.0 && cfg.rho_epsilon < 1.0) {
            return Err(MetronomeConfigError::RhoEpsilon);
        }
        if !(cfg.ring_margin > 0.0 && cfg.ring_margin <= 1.0) {
            return Err(MetronomeConfigError::RingMargin);
        }
        if !(0.0..=1.0).contains(&cfg.vacation_feedback_gain) {
            return Err(MetronomeConfigError::FeedbackGain);
        }
        let ticks = |ns: u64| rate.ticks_from_ns(ns).ticks() as f64;
        let mut upper = ticks(cfg.max_short_timeout_ns);
        if let Some(bound_ns) = cfg.ring_bound_ns() {
            upper = upper.min(bound_ns * rate.hz() as f64 / 1e9);
        }
        let lower = ticks(cfg.min_short_timeout_ns).min(upper);
        let initial = ticks(cfg.initial_short_timeout_ns).clamp(lower, upper);
        Ok(Self {
            v_bar: ticks(cfg.target_vacation_ns),
            m: workers as f64 / queues as f64,
            a: cfg.ewma_weight,
            rho_max: 1.0 - cfg.rho_epsilon,
            long_timeout: rate.ticks_from_ns(cfg.long_timeout_ns),
            initial_short_timeout: to_ticks(initial),
            lower,
            upper,
            loss_policy: cfg.loss_policy,
            feedback_gain: cfg.vacation_feedback_gain,
        })
    }

    /// `m = M/N`, workers per queue.
    pub fn workers_per_queue(&self) -> f64 {
        self.m
    }

    /// `T_L`.
    pub fn long_timeout(&self) -> Duration {
        self.long_timeout
    }

    /// `T_S` before a queue's first measured busy period.
    pub fn initial_short_timeout(&self) -> Duration {
        self.initial_short_timeout
    }

    /// Largest `T_S` the clamps and the ring bound allow.
    pub fn max_short_timeout(&self) -> Duration {
        to_ticks(self.upper)
    }

    /// Smallest `T_S` the clamps allow.
    pub fn min_short_timeout(&self) -> Duration {
        to_ticks(self.lower)
    }

    /// What a loser does.
    pub fn loss_policy(&self) -> LossPolicy {
        self.loss_policy
    }

    /// `ρ` clamped into `[0, 1−ε]` (NaN counts as 0).
    pub fn clamp_rho(&self, rho: f64) -> f64 {
        if rho.is_nan() { 0.0 } else { rho.clamp(0.0, self.rho_max) }
    }

    /// The short timeout for load `rho`: `V̄·m·(1−ρ)/(1−ρ^m)` with ρ clamped, then clamped to
    /// `[min, min(max, margin·D/R)]`.
    pub fn short_timeout(&self, rho: f64) -> Duration {
        self.corrected_short_timeout(rho, 1.0)
    }

    /// [`Params::short_timeout`] with the rule's value scaled by the vacation-feedback
    /// correction `c` before clamping (NaN or non-positive `c` counts as 1).
    pub fn corrected_short_timeout(&self, rho: f64, c: f64) -> Duration {
        let c = if c > 0.0 && c.is_finite() { c } else { 1.0 };
        let t = c * self.v_bar * short_timeout_factor(self.clamp_rho(rho), self.m);
        to_ticks(t.clamp(self.lower, self.upper))
    }

    /// One step of the vacation feedback: the correction after measuring `vacation` ticks
    /// at load `rho` (unchanged when the gain is 0 or `V̄` is 0).
    ///
    /// Anti-windup: the correction never moves past the value at which `c·T_S(ρ)` meets a
    /// clamp of `T_S` (the ring bound, the min/max timeouts). Beyond it the clamped `T_S` no
    /// longer changes, so integrating further would only wind `c` up against the clamp and
    /// leave it far off when the load moves (e.g. `T_S` pinned at a ring bound below `V̄`).
    pub fn feedback(&self, c: f64, vacation: Duration, rho: f64) -> f64 {
        if self.feedback_gain == 0.0 || self.v_bar <= 0.0 {
            return c;
        }
        let ratio = (vacation.ticks() as f64 / self.v_bar).min(3.0);
        let mut next = c * (1.0 + self.feedback_gain * (1.0 - ratio));
        let rule = self.v_bar * short_timeout_factor(self.clamp_rho(rho), self.m);
        if rule > 0.0 && rule.is_finite() {
            // Where c·rule reaches the clamps; a c already outside may only move back.
            let (lo, hi) = (self.lower / rule, self.upper / rule);
            if next > hi && next > c {
                next = c.max(hi);
            }
            if next < lo && next < c {
                next = c.min(lo);
            }
        }
        next.clamp(CORRECTION_MIN, CORRECTION_MAX)
    }

    /// One EWMA step: `a·ρ + (1−a)·sample`, clamped.
    pub fn ewma(&self, rho: f64, sample: f64) -> f64 {
        self.clamp_rho(self.a * rho + (1.0 - self.a) * sample)
    }
}

/// A non-negative finite tick count rounded to the nearest tick (saturating).
fn to_ticks(t: f64) -> Duration {
    if t.is_nan() || t <= 0.0 {
        Duration::ZERO
    } else if t >= u64::MAX as f64 {
        Duration(u64::MAX)
    } else {
        Duration((t + 0.5) as u64)
    }
}

// ---------------------------------------------------------------------------------------------
// Per-queue state

/// `last_release` before the first release.
const NEVER: u64 = u64::MAX;

/// One receive queue's share of the controller: lock, estimator and statistics.
///
/// The lock sits alone on its cache line; the estimator fields are written only while holding
/// it. Statistics counters are `Relaxed` and may be read by a reporting core at any time.
pub struct QueueState {
    lock: TryLock,
    /// ρ as `f64` bits.
    rho: AtomicU64,
    /// Ticks of the last release, [`NEVER`] before the first.
    last_release: AtomicU64,
    /// Current `T_S` in ticks.
    short_timeout: AtomicU64,
    /// Vacation-feedback correction `c` as `f64` bits (1 without feedback).
    correction: AtomicU64,
    wins: AtomicU64,
    busy_tries: AtomicU64,
    packets: AtomicU64,
    busy_ticks: AtomicU64,
    vacation_sum: AtomicU64,
    vacations: AtomicU64,
    vacation_hist: AtomicHistogram,
}

impl fmt::Debug for QueueState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueState")
            .field("locked", &self.lock.is_locked())
            .field("rho", &self.rho())
            .field("short_timeout", &self.short_timeout())
            .finish_non_exhaustive()
    }
}

impl QueueState {
    /// A queue with ρ = 0 whose first `T_S` is `initial_short_timeout`.
    pub fn new(initial_short_timeout: Duration) -> Self {
        Self {
            lock: TryLock::new(),
            rho: AtomicU64::new(0f64.to_bits()),
            last_release: AtomicU64::new(NEVER),
            short_timeout: AtomicU64::new(initial_short_timeout.ticks()),
            correction: AtomicU64::new(1f64.to_bits()),
            wins: AtomicU64::new(0),
            busy_tries: AtomicU64::new(0),
            packets: AtomicU64::new(0),
            busy_ticks: AtomicU64::new(0),
            vacation_sum: AtomicU64::new(0),
            vacations: AtomicU64::new(0),
            vacation_hist: AtomicHistogram::new(),
        }
    }

    /// The load estimate ρ.
    pub fn rho(&self) -> f64 {
        f64::from_bits(self.rho.load(Relaxed))
    }

    /// The current short timeout `T_S`.
    pub fn short_timeout(&self) -> Duration {
        Duration(self.short_timeout.load(Relaxed))
    }

    /// The vacation-feedback correction `c` (1 when the feedback is off).
    pub fn correction(&self) -> f64 {
        f64::from_bits(self.correction.load(Relaxed))
    }

    /// The queue's lock (for statistics and tests; rounds go through [`Scheduler::try_poll`]).
    pub fn lock(&self) -> &TryLock {
        &self.lock
    }

    /// A copy of the queue's counters and vacation histogram.
    pub fn snapshot(&self) -> QueueSnapshot {
        QueueSnapshot {
            rho: self.rho(),
            short_timeout: self.short_timeout(),
            correction: self.correction(),
            wins: self.wins.load(Relaxed),
            busy_tries: self.busy_tries.load(Relaxed),
            packets: self.packets.load(Relaxed),
            busy_ticks: self.busy_ticks.load(Relaxed),
            vacation_sum_ticks: self.vacation_sum.load(Relaxed),
            vacations: self.vacations.load(Relaxed),
            vacation_histogram: self.vacation_hist.snapshot(),
        }
    }

    /// Records a completed busy period and computes the new `T_S` (holder only: `_held` proves it).
    fn complete(
        &self,
        _held: &TryLockGuard<'_>,
        p: &Params,
        vacation: Option<Duration>,
        busy: Duration,
        now: Instant,
        packets: u64,
    ) -> Duration {
        if let Some(v) = vacation {
            let (b, v) = (busy.ticks() as f64, v.ticks() as f64);
            // ρ_sample = B/(B+V) (spec item 4); a round with neither carries no information.
            if b + v > 0.0 {
                let rho = p.ewma(self.rho(), b / (b + v));
                let c = p.feedback(self.correction(), Duration(v as u64), rho);
                self.rho.store(rho.to_bits(), Relaxed);
                self.correction.store(c.to_bits(), Relaxed);
                self.short_timeout.store(p.corrected_short_timeout(rho, c).ticks(), Relaxed);
            }
        }
        self.packets.fetch_add(packets, Relaxed);
        self.busy_ticks.fetch_add(busy.ticks(), Relaxed);
        self.last_release.store(now.ticks(), Relaxed);
        self.short_timeout()
    }
}

/// A copy of one queue's state and counters.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueSnapshot {
    /// Load estimate ρ.
    pub rho: f64,
    /// Current `T_S`.
    pub short_timeout: Duration,
    /// Vacation-feedback correction `c` (1 when off).
    pub correction: f64,
    /// Lock races won (busy periods started).
    pub wins: u64,
    /// Lock races lost (a worker found the queue taken).
    pub busy_tries: u64,
    /// Packets drained.
    pub packets: u64,
    /// Sum of busy periods.
    pub busy_ticks: u64,
    /// Sum of measured vacations.
    pub vacation_sum_ticks: u64,
    /// Measured vacations (wins after the first).
    pub vacations: u64,
    /// Distribution of measured vacations in ticks.
    pub vacation_histogram: LogHistogram,
}

impl QueueSnapshot {
    /// Mean measured vacation in ticks.
    pub fn vacation_mean(&self) -> Option<f64> {
        (self.vacations > 0).then(|| self.vacation_sum_ticks as f64 / self.vacations as f64)
    }

    /// 99th percentile of the measured vacation in ticks (bucket middle, within 1/16).
    pub fn vacation_p99(&self) -> Option<u64> {
        self.vacation_histogram.quantile(0.99)
    }

    /// Lost tries / all tries on this queue.
    pub fn busy_try_ratio(&self) -> f64 {
        let tries = self.wins + self.busy_tries;
        if tries == 0 { 0.0 } else { self.busy_tries as f64 / tries as f64 }
    }
}

// ---------------------------------------------------------------------------------------------
// Controller

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

/// The role a worker took in its last round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Role {
    /// Won its last race (or has not raced yet): keeps its queue, sleeps `T_S`.
    Primary,
    /// Lost its last race: tries a random queue next, after `T_L`.
    Backup,
}

/// A worker's counters: what its [`Scheduler`] counts, plus the time it has run and slept
/// (filled in by [`crate::worker::Worker::stats`], or by a host through
/// [`Scheduler::record_halted`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WorkerStats {
    /// Ticks since the worker's first round.
    pub elapsed_ticks: u64,
    /// Lock attempts (= wake-ups).
    pub tries: u64,
    /// Attempts won.
    pub wins: u64,
    /// Attempts lost: the queue was locked by another worker.
    pub busy_tries: u64,
    /// Packets drained in won rounds.
    pub packets: u64,
    /// Ticks spent between winning and releasing.
    pub busy_ticks: u64,
    /// Ticks spent halted (in the sleeper).
    pub halted_ticks: u64,
}

impl WorkerStats {
    /// Ticks not halted: polling, processing, losing races.
    pub fn awake_ticks(&self) -> u64 {
        self.elapsed_ticks.saturating_sub(self.halted_ticks)
    }

    /// Lost tries / all tries.
    pub fn busy_try_ratio(&self) -> f64 {
        if self.tries == 0 { 0.0 } else { self.busy_tries as f64 / self.tries as f64 }
    }
}

/// The outcome of one lock attempt.
#[derive(Debug)]
#[must_use = "a won round must be finished to update the estimator and release the lock"]
pub enum Poll<'q> {
    /// The worker holds the queue: drain it, then call [`Scheduler::finish`].
    Won(Session<'q>),
    /// Another worker holds the queue: sleep `sleep` (`T_L`, or `T_S` under
    /// [`LossPolicy::EqualTimeouts`]). [`Scheduler::queue`] now names a random queue.
    Lost {
        /// How long to sleep.
        sleep: Duration,
    },
}

/// A won round: the lock of queue [`Session::queue`] is held until [`Scheduler::finish`]
/// (dropping the session releases the lock without updating the estimator).
#[derive(Debug)]
pub struct Session<'q> {
    guard: TryLockGuard<'q>,
    state: &'q QueueState,
    params: &'q Params,
    queue: usize,
    start: Instant,
    vacation: Option<Duration>,
}

impl<'q> Session<'q> {
    /// The guard of the held queue's lock, to reach data bound to it
    /// ([`crate::sync::Guarded::get_mut`]) for the length of the round.
    pub fn guard_mut(&mut self) -> &mut TryLockGuard<'q> {
        &mut self.guard
    }

    /// Index of the held queue.
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// When the lock was won.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// The vacation `V` that just ended: time since the queue's last release (`None` on the
    /// queue's first round).
    pub fn vacation(&self) -> Option<Duration> {
        self.vacation
    }
}

/// One core's side of Metronome.
#[derive(Debug, Clone)]
pub struct Scheduler {
    queue: usize,
    role: Role,
    rng: XorShift64,
    stats: WorkerStats,
}

impl Scheduler {
    /// A worker that first tries `first_queue`, with its PRNG seeded from `seed` (e.g. the core id).
    pub fn new(first_queue: usize, seed: u64) -> Self {
        Self { queue: first_queue, role: Role::Primary, rng: XorShift64::new(seed), stats: WorkerStats::default() }
    }

    /// The queue this worker tries next.
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// Points the next round at `queue` (a caller that partitions the queues among its
    /// workers moves them itself; see `pipeline`).
    pub fn set_queue(&mut self, queue: usize) {
        self.queue = queue;
    }

    /// The role of the last round.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The counters.
    pub fn stats(&self) -> &WorkerStats {
        &self.stats
    }

    /// Adds halted time (the host measures how long the core really slept).
    pub fn record_halted(&mut self, d: Duration) {
        self.stats.halted_ticks = self.stats.halted_ticks.saturating_add(d.ticks());
    }

    /// One wake-up at `now`: one trylock on [`Scheduler::queue`].
    ///
    /// Won: the vacation since the last release is measured and recorded, the worker is primary
    /// and keeps the queue. Lost: the worker is a backup, picks a uniformly random queue for its
    /// next round and is told to sleep `T_L` (spec items 1–3).
    pub fn try_poll<'q, Q: AsRef<[QueueState]>>(&mut self, ctl: &'q Metronome<Q>, now: Instant) -> Poll<'q> {
        let queues = ctl.queues();
        // A queue index from another controller cannot panic; `Metronome` is never empty.
        let qi = self.queue % queues.len();
        let q = &queues[qi];
        self.stats.tries += 1;
        match q.lock.try_lock() {
            Some(guard) => {
                self.queue = qi;
                self.role = Role::Primary;
                self.stats.wins += 1;
                q.wins.fetch_add(1, Relaxed);
                let last = q.last_release.load(Relaxed);
                let vacation = (last != NEVER).then(|| now.saturating_since(Instant(last)));
                if let Some(v) = vacation {
                    q.vacation_sum.fetch_add(v.ticks(), Relaxed);
                    q.vacations.fetch_add(1, Relaxed);
                    q.vacation_hist.record(v.ticks());
                }
                Poll::Won(Session { guard, state: q, params: &ctl.params, queue: qi, start: now, vacation })
            }
            None => {
                self.role = Role::Backup;
                self.stats.busy_tries += 1;
                q.busy_tries.fetch_add(1, Relaxed);
                self.queue = self.rng.below(queues.len());
                let sleep = match ctl.params.loss_policy {
                    LossPolicy::PrimaryBackup => ctl.params.long_timeout,
                    LossPolicy::EqualTimeouts => q.short_timeout(),
                };
                Poll::Lost { sleep }
            }
        }
    }

    /// Ends a won round at `now` after draining `packets`: `B = now − start`, updates ρ with
    /// `B/(B+V)`, computes `T_S`, records the release time and releases the lock. Returns the
    /// `T_S` to sleep.
    pub fn finish(&mut self, session: Session<'_>, now: Instant, packets: u64) -> Duration {
        let busy = now.saturating_since(session.start);
        self.stats.busy_ticks = self.stats.busy_ticks.saturating_add(busy.ticks());
        self.stats.packets = self.stats.packets.saturating_add(packets);
        let t_s = session.state.complete(&session.guard, session.params, session.vacation, busy, now, packets);
        drop(session.guard); // Release: the estimator writes above are published to the next holder.
        t_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::{histogram_bucket, histogram_bucket_bounds};
    use alloc::vec::Vec;
    use proptest::prelude::*;

    const GHZ: u64 = 1_000_000_000;

    fn rate() -> TickRate {
        TickRate::try_new(GHZ).expect("nonzero")
    }

    fn ctl(workers: usize, queues: usize, cfg: &MetronomeConfig) -> Metronome<Vec<QueueState>> {
        Metronome::with_queues(cfg, rate(), workers, queues).expect("valid config")
    }

    fn rel(a: f64, b: f64) -> f64 {
        ((a - b) / b).abs()
    }

    #[test]
    fn factor_limits() {
        for m in [0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 7.5, 100.0, 1e6] {
            assert_eq!(short_timeout_factor(0.0, m), m, "rho = 0 gives m for m = {m}");
            assert_eq!(short_timeout_factor(1.0, m), 1.0, "rho = 1 gives 1 for m = {m}");
            let near = short_timeout_factor(1.0 - 1e-9, m);
            assert!(rel(near, 1.0) < 1e-3 * m.max(1.0), "rho -> 1 tends to 1: m = {m}, f = {near}");
            let tiny = short_timeout_factor(1e-12, m);
            // m·(1−ρ)/(1−ρ^m) − m ≈ m·ρ^m: slow for m < 1, where ρ^m ≫ ρ.
            let tol = 2.0 * libm::pow(1e-12, m.min(1.0)) + 1e-12;
            assert!(rel(tiny, m) < tol, "rho -> 0 tends to m: m = {m}, f = {tiny}");
        }
        for rho in [0.0, 0.1, 0.5, 0.9, 0.999_999, 1.0] {
            assert!(rel(short_timeout_factor(rho, 1.0), 1.0) < 1e-12, "m = 1 is constant");
        }
    }

    #[test]
    fn factor_known_values() {
        // m = 3, rho = 0.5: 3 / (1 + 0.5 + 0.25).
        assert!(rel(short_timeout_factor(0.5, 3.0), 3.0 / 1.75) < 1e-15);
        // m = 1/2: 0.5·(1−ρ)/(1−√ρ) = 0.5·(1+√ρ).
        assert!(rel(short_timeout_factor(0.25, 0.5), 0.75) < 1e-12);
        // m = 2.5 at rho = 0.5 against the direct form (no cancellation there).
        let direct = 2.5 * 0.5 / (1.0 - libm::pow(0.5, 2.5));
        assert!(rel(short_timeout_factor(0.5, 2.5), direct) < 1e-12);
    }

    #[test]
    fn factor_is_finite_for_hostile_inputs() {
        let xs = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 0.0, 1.0, 2.0, f64::MIN_POSITIVE, f64::MAX];
        for &rho in &xs {
            for &m in &xs {
                let f = short_timeout_factor(rho, m);
                assert!(f.is_finite() && f > 0.0, "rho = {rho}, m = {m}: {f}");
            }
        }
    }

    #[test]
    fn params_reject_bad_configs() {
        let c = MetronomeConfig::default();
        assert_eq!(Params::new(&c, rate(), 0, 1), Err(MetronomeConfigError::NoWorkers));
        assert_eq!(Params::new(&c, rate(), 1, 0), Err(MetronomeConfigError::NoQueues));
        let mut bad = c;
        bad.ewma_weight = 1.5;
        assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::EwmaWeight));
        bad = c;
        bad.ewma_weight = f64::NAN;
        assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::EwmaWeight));
        bad = c;
        bad.rho_epsilon = 0.0;
        assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::RhoEpsilon));
        bad = c;
        bad.ring_margin = 0.0;
        assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::RingMargin));
        bad = c;
        bad.vacation_feedback_gain = -0.1;
        assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::FeedbackGain));
    }

    #[test]
    fn short_timeout_in_ticks_follows_the_rule() {
        let c = MetronomeConfig::default();
        let p = Params::new(&c, rate(), 3, 1).expect("valid");
        assert_eq!(p.workers_per_queue(), 3.0);
        assert_eq!(p.short_timeout(0.0), Duration(45_000));
        assert_eq!(p.short_timeout(1.0), Duration(15_000)); // clamped to 1 − ε: 15_000.03
        assert_eq!(p.short_timeout(f64::NAN), Duration(45_000));
        assert_eq!(p.short_timeout(0.5), Duration((45_000.0f64 / 1.75 + 0.5) as u64));
        assert_eq!(p.long_timeout(), Duration(500_000));
        assert_eq!(p.initial_short_timeout(), Duration(20_000));
        // Multi-queue: m = M/N real-valued, 5 workers on 2 queues.
        let p = Params::new(&c, rate(), 5, 2).expect("valid");
        assert_eq!(p.short_timeout(0.0), Duration(37_500));
        // On a 2.6 GHz TSC the same rule in ticks.
        let p = Params::new(&c, TickRate::try_new(2_600_000_000).expect("rate"), 1, 1).expect("valid");
        assert_eq!(p.short_timeout(0.3), Duration(39_000));
    }

    #[test]
    fn clamps_and_ring_bound_are_honoured() {
        // Default ring: 0.5 · 4096 / 14.88 Mpps = 137.6 µs.
        let c = MetronomeConfig::default();
        let p = Params::new(&c, rate(), 16, 1).expect("valid");
        let bound = (0.5 * 4096.0 * 1e9 / 14.88e6 + 0.5) as u64;
        assert_eq!(p.max_short_timeout(), Duration(bound));
        assert_eq!(p.short_timeout(0.0), Duration(bound), "16·15 µs = 240 µs > ring bound");
        // Without the ring bound the max clamp applies.
        let mut c2 = c;
        c2.ring_descriptors = 0;
        c2.max_short_timeout_ns = 100_000;
        let p = Params::new(&c2, rate(), 16, 1).expect("valid");
        assert_eq!(p.short_timeout(0.0), Duration(100_000));
        // The min clamp.
        let mut c3 = c;
        c3.target_vacation_ns = 100;
        c3.min_short_timeout_ns = 2_000;
        let p = Params::new(&c3, rate(), 2, 1).expect("valid");
        assert_eq!(p.short_timeout(0.9), Duration(2_000));
        assert_eq!(p.min_short_timeout(), Duration(2_000));
        // A ring bound below the min clamp wins over it.
        let mut c4 = c;
        c4.ring_descriptors = 16; // 0.5·16/14.88 Mpps = 537.6 ns
        let p = Params::new(&c4, rate(), 2, 1).expect("valid");
        assert_eq!(p.short_timeout(0.5), Duration(538));
        assert_eq!(p.initial_short_timeout(), Duration(538));
    }

    #[test]
    fn winner_measures_vacation_updates_rho_and_keeps_its_queue() {
        let c = MetronomeConfig::default();
        let m = ctl(3, 1, &c);
        let mut w = Scheduler::new(0, 1);
        // First round: no vacation yet, T_S stays at its initial value.
        let Poll::Won(s) = w.try_poll(&m, Instant(1_000)) else { unreachable!("free lock") };
        assert_eq!(s.vacation(), None);
        assert_eq!(w.finish(s, Instant(2_000), 3), Duration(20_000));
        assert_eq!(m.queues()[0].rho(), 0.0);
        // Second round: V = 10 µs, B = 10 µs → ρ_sample = 0.5 → ρ = 0.25·0.5 = 0.125.
        let Poll::Won(s) = w.try_poll(&m, Instant(12_000)) else { unreachable!("free lock") };
        assert_eq!(s.vacation(), Some(Duration(10_000)));
        assert_eq!(s.queue(), 0);
        let t_s = w.finish(s, Instant(22_000), 7);
        let rho = m.queues()[0].rho();
        assert!(rel(rho, 0.125) < 1e-12);
        assert_eq!(t_s, m.params().short_timeout(0.125));
        assert_eq!(m.queues()[0].short_timeout(), t_s);
        assert_eq!(w.role(), Role::Primary);
        assert_eq!(w.queue(), 0);
        let st = *w.stats();
        assert_eq!((st.tries, st.wins, st.busy_tries, st.packets, st.busy_ticks), (2, 2, 0, 10, 11_000));
        let q = m.queues()[0].snapshot();
        assert_eq!((q.wins, q.vacations, q.packets, q.busy_ticks), (2, 1, 10, 11_000));
        assert_eq!(q.vacation_mean(), Some(10_000.0));
        assert!(!m.queues()[0].lock().is_locked());
    }

    #[test]
    fn loser_becomes_backup_sleeps_long_and_picks_random_queues() {
        let c = MetronomeConfig::default();
        let m = ctl(8, 4, &c);
        let mut a = Scheduler::new(2, 1);
        let Poll::Won(held) = a.try_poll(&m, Instant(0)) else { unreachable!("free lock") };
        let mut b = Scheduler::new(2, 2);
        let mut seen = [0u32; 4];
        for i in 0..400 {
            b.queue = 2;
            match b.try_poll(&m, Instant(i)) {
                Poll::Lost { sleep } => assert_eq!(sleep, Duration(500_000)),
                Poll::Won(_) => unreachable!("queue 2 is held"),
            }
            assert_eq!(b.role(), Role::Backup);
            seen[b.queue()] += 1;
        }
        assert!(seen.iter().all(|&n| n > 60), "uniform-ish random queue choice: {seen:?}");
        assert_eq!(b.stats().busy_tries, 400);
        assert_eq!(m.queues()[2].snapshot().busy_try_ratio(), 400.0 / 401.0);
        drop(held);
        // The backup wins another queue and becomes primary there.
        b.queue = 1;
        assert!(matches!(b.try_poll(&m, Instant(500)), Poll::Won(_)));
        assert_eq!(b.role(), Role::Primary);
    }

    #[test]
    fn equal_timeouts_losers_sleep_t_s() {
        let c = MetronomeConfig { loss_policy: LossPolicy::EqualTimeouts, ..MetronomeConfig::default() };
        let m = ctl(2, 1, &c);
        let mut a = Scheduler::new(0, 1);
        let mut b = Scheduler::new(0, 2);
        let Poll::Won(_held) = a.try_poll(&m, Instant(0)) else { unreachable!("free lock") };
        let Poll::Lost { sleep } = b.try_poll(&m, Instant(1)) else { unreachable!("held") };
        assert_eq!(sleep, Duration(20_000));
    }

    #[test]
    fn rho_converges_to_the_busy_fraction() {
        let c = MetronomeConfig::default();
        let m = ctl(3, 1, &c);
        let mut w = Scheduler::new(0, 7);
        let mut t = 0u64;
        for _ in 0..100 {
            let Poll::Won(s) = w.try_poll(&m, Instant(t)) else { unreachable!("free lock") };
            t += 30_000; // B = 30 µs after a V = 10 µs vacation → ρ = 0.75
            let _ = w.finish(s, Instant(t), 1);
            t += 10_000;
        }
        let q = m.queues()[0].snapshot();
        assert!((q.rho - 0.75).abs() < 1e-9, "rho = {}", q.rho);
        assert_eq!(q.short_timeout, m.params().short_timeout(0.75));
        assert_eq!(q.vacation_p99(), Some(histogram_bucket_bounds(histogram_bucket(10_000)).0 + 512));
    }

    #[test]
    fn rho_stays_below_one_even_if_always_busy() {
        let c = MetronomeConfig::default();
        let m = ctl(2, 1, &c);
        let mut w = Scheduler::new(0, 7);
        let mut t = 0u64;
        for _ in 0..200 {
            let Poll::Won(s) = w.try_poll(&m, Instant(t)) else { unreachable!("free lock") };
            t += 1_000_000;
            let t_s = w.finish(s, Instant(t), 1);
            assert!(t_s >= Duration(15_000) && t_s <= Duration(30_000));
        }
        let rho = m.queues()[0].rho();
        assert!(rho <= 1.0 - 1e-6 && rho > 0.99, "rho = {rho}");
    }

    #[test]
    fn vacation_feedback_scales_t_s_towards_the_target() {
        let mut c = MetronomeConfig::default();
        let off = Params::new(&c, rate(), 3, 1).expect("valid");
        assert_eq!(off.feedback(1.0, Duration(45_000), 0.0), 1.0, "gain 0 is the paper's rule");
        c.vacation_feedback_gain = 0.1;
        let p = Params::new(&c, rate(), 3, 1).expect("valid");
        // Too long a vacation shrinks c, too short grows it, on target leaves it.
        assert!((p.feedback(1.0, Duration(30_000), 0.0) - 0.9).abs() < 1e-12);
        assert!((p.feedback(1.0, Duration(0), 0.0) - 1.1).abs() < 1e-12);
        assert_eq!(p.feedback(1.0, Duration(15_000), 0.0), 1.0);
        // Huge vacations are capped at 3·V̄; c stays in its range.
        assert!((p.feedback(1.0, Duration(u64::MAX), 0.0) - 0.8).abs() < 1e-12);
        assert_eq!(p.feedback(0.05, Duration(u64::MAX), 0.0), 0.05);
        assert_eq!(p.corrected_short_timeout(0.0, 0.5), Duration(22_500));
        assert_eq!(p.corrected_short_timeout(0.0, f64::NAN), Duration(45_000));
        // Through the controller: a queue whose vacations run at 2·V̄ sleeps less and less.
        let m = ctl(3, 1, &c);
        let mut w = Scheduler::new(0, 3);
        let mut t = 0u64;
        let mut t_s = Vec::new();
        for _ in 0..20 {
            let Poll::Won(s) = w.try_poll(&m, Instant(t)) else { unreachable!("free lock") };
            t += 100;
            t_s.push(w.finish(s, Instant(t), 0));
            t += 30_000;
        }
        // From the second round on (the first has no vacation), T_S only shrinks.
        assert!(t_s[1..].windows(2).all(|w| w[1] <= w[0]), "{t_s:?}");
        assert!(m.queues()[0].correction() < 0.2, "c = {}", m.queues()[0].correction());
        assert!(t_s[19] < Duration(9_000), "{t_s:?}");
    }

    #[test]
    fn feedback_does_not_wind_up_against_the_ring_bound() {
        // qsize 256 at 14.88 Mpps: the ring bound (8.6 µs) is below V̄ = 15 µs, so T_S sits at
        // the bound and every vacation is shorter than V̄.
        let mut c = MetronomeConfig { ring_descriptors: 256, vacation_feedback_gain: 0.1, ..Default::default() };
        assert!(c.ring_bound_below_target());
        let bound = c.ring_bound_ns().expect("bound");
        assert!((bound - 8_602.15).abs() < 0.1, "{bound}");
        let p = Params::new(&c, rate(), 1, 1).expect("valid");
        assert_eq!(p.max_short_timeout(), Duration(8_602));
        // Without anti-windup 100 short vacations would take c to its cap of 20.
        let mut corr = 1.0;
        for _ in 0..100 {
            corr = p.feedback(corr, Duration(5_000), 0.0);
        }
        // c·T_S(0) may reach the bound (8602/15000 = 0.573...) but never pass it: here it
        // started above, so it only stays.
        assert_eq!(corr, 1.0);
        // From below the bound, c grows only up to where c·rule meets it.
        let mut corr = 0.3;
        for _ in 0..100 {
            corr = p.feedback(corr, Duration(5_000), 0.0);
        }
        assert!((corr - 8_602.15 / 15_000.0).abs() < 1e-3, "c = {corr}");
        // A long vacation then pulls it down at once, not from a wound-up 20.
        let after = p.feedback(corr, Duration(30_000), 0.0);
        assert!(after < corr * 0.95, "{after} vs {corr}");
        // The same against the lower clamp (1 µs): long vacations stop shrinking c there.
        let mut corr = 1.0;
        for _ in 0..200 {
            corr = p.feedback(corr, Duration(45_000), 0.0);
        }
        assert!((corr - 1_000.0 / 15_000.0).abs() < 1e-3, "c = {corr}");
        assert_eq!(line_rate_pps_for_mbps(10_000), 14_880_952);
        assert_eq!(line_rate_pps_for_mbps(0), 0);
        c.line_rate_pps = 0;
        assert_eq!(c.ring_bound_ns(), None);
        assert!(!c.ring_bound_below_target());
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        #[test]
        fn factor_equals_geometric_series_for_integer_m(rho in 0.0f64..1.0, m in 1u32..=64) {
            let series = f64::from(m) / geometric_sum(rho, m);
            prop_assert!(rel(short_timeout_factor(rho, f64::from(m)), series) < 1e-15);
            // The general (non-integer) evaluation agrees with the series.
            if rho > 0.0 {
                prop_assert!(rel(factor_general(rho, f64::from(m)), series) < 1e-10,
                    "general {} vs series {}", factor_general(rho, f64::from(m)), series);
            }
        }

        #[test]
        fn factor_is_non_increasing_in_rho_for_m_at_least_one(
            r1 in 0.0f64..=1.0, r2 in 0.0f64..=1.0, m in 1.0f64..1000.0
        ) {
            let (lo, hi) = if r1 <= r2 { (r1, r2) } else { (r2, r1) };
            let (f_lo, f_hi) = (short_timeout_factor(lo, m), short_timeout_factor(hi, m));
            prop_assert!(f_hi <= f_lo * (1.0 + 1e-12), "m = {m}: f({lo}) = {f_lo} < f({hi}) = {f_hi}");
            prop_assert!(f_hi >= 1.0 - 1e-12 && f_lo <= m * (1.0 + 1e-12));
        }

        #[test]
        fn factor_is_finite_everywhere(rho in proptest::num::f64::ANY, m in proptest::num::f64::ANY) {
            let f = short_timeout_factor(rho, m);
            prop_assert!(f.is_finite() && f > 0.0);
        }

        #[test]
        fn short_timeout_respects_clamps(
            rho in proptest::num::f64::ANY, workers in 1usize..64, queues in 1usize..8,
            v_bar in 0u64..10_000_000, ring in 0u32..100_000
        ) {
            let c = MetronomeConfig { target_vacation_ns: v_bar, ring_descriptors: ring, ..MetronomeConfig::default() };
            let p = Params::new(&c, rate(), workers, queues).expect("valid");
            let t = p.short_timeout(rho);
            prop_assert!(t <= p.max_short_timeout() && t >= p.min_short_timeout());
            if ring > 0 {
                let bound = 0.5 * f64::from(ring) * 1e9 / 14.88e6;
                prop_assert!(t.ticks() as f64 <= bound + 0.5);
            }
        }

    }
}
