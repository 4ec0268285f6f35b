//! The rule for `T_S` (seed paper eq. (13) and its multi-queue form) and the parameters in ticks.

use super::*;

/// Smallest and largest `m` that [`short_timeout_factor`] works with (inputs are clamped).
pub(super) const M_MIN: f64 = 1e-6;
pub(super) const M_MAX: f64 = 1e9;
/// Integer `m` up to this use the geometric series (at most 63 multiply-adds).
pub(super) const M_SERIES_MAX: f64 = 64.0;

/// `T_S / V̄ = m·(1−ρ)/(1−ρ^m)`, finite for every input.
///
/// - `ρ` is clamped into `[0, 1]` (NaN counts as 0); `m` into `[1e-6, 1e9]` (NaN counts as 1).
/// - `ρ = 0` gives `m` (all m workers primary, `E[V] = T_S/m`); `ρ = 1` gives the limit 1 (one
///   primary, `E[V] = T_S`).
/// - Integer `m ≤ 64`: `m / (1 + ρ + … + ρ^(m−1))` by Horner's rule, no division by a difference.
/// - Otherwise `1 − ρ^m` is evaluated as `−expm1(m·log1p(−(1−ρ)))`, which keeps full relative
///   precision as ρ → 1 where the direct form cancels (the public code's `0/0` at ρ = 1).
///
/// For `m ≥ 1` the factor is non-increasing in ρ (from `m` down to 1); for `m = 1` it is 1; for
/// `m < 1` (fewer workers than lanes, outside the paper's setting) it rises from `m` to 1.
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
pub(super) fn geometric_sum(rho: f64, k: u32) -> f64 {
    let mut s = 1.0;
    for _ in 1..k {
        s = s * rho + 1.0;
    }
    s
}

/// `m·x / (1 − (1−x)^m)` with `x = 1 − ρ ∈ (0, 1)`, for any real `m > 0`.
pub(super) fn factor_general(rho: f64, m: f64) -> f64 {
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
    pub(super) v_bar: f64,
    /// `m = M/N`.
    pub(super) m: f64,
    /// EWMA weight of the old value.
    pub(super) a: f64,
    /// Upper end of the ρ clamp, `1 − ε`.
    pub(super) rho_max: f64,
    pub(super) long_timeout: Duration,
    pub(super) initial_short_timeout: Duration,
    /// Clamp of `T_S` in ticks, `lower ≤ upper`; `upper` includes the ring bound.
    pub(super) lower: f64,
    pub(super) upper: f64,
    pub(super) loss_policy: LossPolicy,
    pub(super) feedback_gain: f64,
}

/// Range of the vacation-feedback correction factor.
pub(super) const CORRECTION_MIN: f64 = 0.05;
pub(super) const CORRECTION_MAX: f64 = 20.0;

impl Params {
    /// Parameters for `workers` cores sharing `lanes` lanes on a clock of `rate`.
    ///
    /// The ring bound `margin·D/R` lowers the upper clamp; if it falls below the lower clamp,
    /// the ring bound wins (a full ring is worse than a busy poll).
    pub fn new(
        cfg: &MetronomeConfig,
        rate: TickRate,
        workers: usize,
        lanes: usize,
    ) -> Result<Self, MetronomeConfigError> {
        if workers == 0 {
            return Err(MetronomeConfigError::NoWorkers);
        }
        if lanes == 0 {
            return Err(MetronomeConfigError::NoLanes);
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
            m: workers as f64 / lanes as f64,
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

    /// `m = M/N`, workers per lane.
    pub fn workers_per_lane(&self) -> f64 {
        self.m
    }

    /// `T_L`.
    pub fn long_timeout(&self) -> Duration {
        self.long_timeout
    }

    /// `T_S` before a lane's first measured busy period.
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
pub(super) fn to_ticks(t: f64) -> Duration {
    if t.is_nan() || t <= 0.0 {
        Duration::ZERO
    } else if t >= u64::MAX as f64 {
        Duration(u64::MAX)
    } else {
        Duration((t + 0.5) as u64)
    }
}
