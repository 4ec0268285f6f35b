//! Metronome's parameters, their defaults and their validation.

use super::*;

/// What a worker does after losing the lock race.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum LossPolicy {
    /// Metronome: a loser becomes a backup and sleeps the long timeout `T_L`.
    PrimaryBackup,
    /// The paper's strawman (Fig. 6): a loser sleeps the lane's current `T_S` like a winner.
    EqualTimeouts,
}

/// The knobs of the controller. Times are in nanoseconds; [`Params::new`] turns them into ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct MetronomeConfig {
    /// Target vacation `V̄`: how long a lane may sit unpolled on average (default 15 µs).
    pub target_vacation_ns: u64,
    /// Long timeout `T_L` slept by a backup after a lost race (default 500 µs).
    pub long_timeout_ns: u64,
    /// `T_S` of a lane until its first measured busy period (default 20 µs).
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
    /// `c ← c·(1 + g·(1 − V/V̄))` (the ratio capped at 3, `c` kept in `[1/20, 20]`) and the lane
    /// sleeps `c·T_S`. The rule's model takes another worker to be primary with probability
    /// `1 − ρ`; backups that sleep `T_L ≫ T_S` are primary far less often, and the measured
    /// vacation then overshoots `V̄` (up to 2.3× at M = 3 in `cadence-sim`). The correction pulls
    /// the mean back to `V̄` whatever the cause (it also absorbs wake-up latency).
    pub vacation_feedback_gain: f64,
}

impl MetronomeConfig {
    /// The ring bound of Metronome's T_S rule, `margin·D/R`, in ns: how long `T_S` may be so that a
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
    /// `lanes` was zero.
    NoLanes,
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
            MetronomeConfigError::NoLanes => "metronome needs at least one lane",
            MetronomeConfigError::EwmaWeight => "ewma_weight must lie in [0, 1]",
            MetronomeConfigError::RhoEpsilon => "rho_epsilon must lie in (0, 1)",
            MetronomeConfigError::RingMargin => "ring_margin must lie in (0, 1]",
            MetronomeConfigError::FeedbackGain => "vacation_feedback_gain must lie in [0, 1]",
        })
    }
}
