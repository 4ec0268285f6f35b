//! One receive queue's share of the controller: lock, estimator, statistics, snapshots.

use super::*;

/// `last_release` before the first release.
pub(super) const NEVER: u64 = u64::MAX;

/// One receive queue's share of the controller: lock, estimator and statistics.
///
/// The lock sits alone on its cache line; the estimator fields are written only while holding
/// it. Statistics counters are `Relaxed` and may be read by a reporting core at any time.
pub struct LaneShare {
    pub(super) lock: TryLock,
    /// ρ as `f64` bits.
    pub(super) rho: AtomicU64,
    /// Ticks of the last release, [`NEVER`] before the first.
    pub(super) last_release: AtomicU64,
    /// Current `T_S` in ticks.
    pub(super) short_timeout: AtomicU64,
    /// Vacation-feedback correction `c` as `f64` bits (1 without feedback).
    pub(super) correction: AtomicU64,
    pub(super) wins: AtomicU64,
    pub(super) busy_tries: AtomicU64,
    pub(super) packets: AtomicU64,
    pub(super) busy_ticks: AtomicU64,
    pub(super) vacation_sum: AtomicU64,
    pub(super) vacations: AtomicU64,
    pub(super) vacation_hist: AtomicHistogram,
    /// Ticks since which the lane's rounds have received nothing ([`NEVER`]: its last round
    /// received frames, or it had none yet).
    pub(super) quiet_since: AtomicU64,
}

impl fmt::Debug for LaneShare {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LaneShare")
            .field("locked", &self.lock.is_locked())
            .field("rho", &self.rho())
            .field("short_timeout", &self.short_timeout())
            .finish_non_exhaustive()
    }
}

impl LaneShare {
    /// A lane with ρ = 0 whose first `T_S` is `initial_short_timeout`.
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
            quiet_since: AtomicU64::new(NEVER),
        }
    }

    /// How long the lane's rounds have received nothing, at `now` (`None` when its last
    /// round received frames, or before its first): what the worker's idle policy reads
    /// ([`crate::worker::IdleSleep`]). A lane property, not a worker's: workers take turns on
    /// a quiet lane.
    pub fn quiet_for(&self, now: Instant) -> Option<Duration> {
        match self.quiet_since.load(Relaxed) {
            NEVER => None,
            t => Some(now.saturating_since(Instant(t))),
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

    /// The lane's lock (for statistics and tests; rounds go through [`Scheduler::attempt`]).
    pub fn lock(&self) -> &TryLock {
        &self.lock
    }

    /// A copy of the lane's counters and vacation histogram.
    pub fn snapshot(&self) -> LaneSnapshot {
        LaneSnapshot {
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
    pub(super) fn complete(
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
            // ρ_sample = B/(B+V): a round with neither carries no information.
            if b + v > 0.0 {
                let rho = p.ewma(self.rho(), b / (b + v));
                let c = p.feedback(self.correction(), Duration(v as u64), rho);
                self.rho.store(rho.to_bits(), Relaxed);
                self.correction.store(c.to_bits(), Relaxed);
                self.short_timeout.store(p.corrected_short_timeout(rho, c).ticks(), Relaxed);
            }
        }
        self.packets.fetch_add(packets, Relaxed);
        if packets != 0 {
            self.quiet_since.store(NEVER, Relaxed);
        } else if self.quiet_since.load(Relaxed) == NEVER {
            self.quiet_since.store(now.ticks(), Relaxed);
        }
        self.busy_ticks.fetch_add(busy.ticks(), Relaxed);
        self.last_release.store(now.ticks(), Relaxed);
        self.short_timeout()
    }
}

/// A copy of one lane's state and counters.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneSnapshot {
    /// Load estimate ρ.
    pub rho: f64,
    /// Current `T_S`.
    pub short_timeout: Duration,
    /// Vacation-feedback correction `c` (1 when off).
    pub correction: f64,
    /// Lock races won (busy periods started).
    pub wins: u64,
    /// Lock races lost (a worker found the lane taken).
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

impl LaneSnapshot {
    /// Mean measured vacation in ticks.
    pub fn vacation_mean(&self) -> Option<f64> {
        (self.vacations > 0).then(|| self.vacation_sum_ticks as f64 / self.vacations as f64)
    }

    /// 99th percentile of the measured vacation in ticks (bucket middle, within 1/16).
    pub fn vacation_p99(&self) -> Option<u64> {
        self.vacation_histogram.quantile(0.99)
    }

    /// Lost tries / all tries on this lane.
    pub fn busy_try_ratio(&self) -> f64 {
        let tries = self.wins + self.busy_tries;
        if tries == 0 { 0.0 } else { self.busy_tries as f64 / tries as f64 }
    }
}
