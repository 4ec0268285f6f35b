//! NetBlaze: an NF chain's p99 latency under an SLO with as few core-seconds as possible
//! (seed paper "Scheduling Network Function Chains Under Sub-Millisecond
//! Latency SLOs", §3).
//!
//! This module holds the **decisions** — pure functions and small state machines over
//! counts — so that the firmware and the simulator (`cadence-sim`, `cargo xtask sim
//! netblaze`) run the very same code, the simulator in virtual time. What moves packets
//! between cores (the stage every worker runs, the auxiliary loop, the hand-off rings) is
//! NetBlaze's runtime, [`crate::offload`]; the per-bucket load the server mapper reads is
//! measured by [`crate::rss::meter`].
//!
//! - [`epoch`]: what a dedicated core counts per epoch ([`EpochCounters`]) and its backlog
//!   ⟨flows, packets⟩ ([`Backlog`]).
//! - [`profile`]: the capacity predictor, profiled offline by `cargo xtask profile`: the
//!   Pareto frontier of ⟨flows, packets⟩ one core finishes within an epoch
//!   ([`Frontier`]), per chain split point `k` ([`SplitProfile`]), and flows → packets/s for
//!   the long term ([`RateCurve`]); its text form ([`Profile::parse`], docs/PROTOCOL.md
//!   "NetBlaze profile").
//! - [`core_mapper`]: every epoch, per dedicated core: keep what fits, hand whole flows to
//!   auxiliary cores, split whales, boost mode ([`CoreMapper::decide`]).
//! - [`follow`]: the rule that keeps per-flow order when a flow moves: later packets of a
//!   migrated flow follow it until the auxiliary core has *completed* its last one
//!   ([`FollowTable`]).
//! - [`server_mapper`]: every period (1 s): RSS buckets → dedicated cores with the 85 / 75 /
//!   50 % thresholds, writing only changed indirection entries ([`ServerMapper::period`]).
//! - [`ingress`]: the rack-scale step: destination-prefix aggregates → servers with the
//!   threshold τ ([`IngressMapper`]; simulated only).
//!
//! Nothing here allocates per decision: the mappers allocate their scratch space when they are
//! built, the core mapper works in the caller's slices. Nothing panics on any input (profiles
//! are validated once, at [`Profile::parse`] / [`Frontier::try_new`]).
//!
//! Details per file: `NetBlazeConfig` (SLO; epoch = (SLO − 40 µs)/2 by default; 10 idle
//! epochs; boost at 200 % of epoch capacity; 1 s period; 85/75/50 %; 4 periods) →
//! `validate()` → `Params`, and `NetBlazeConfigError::field()` names the field
//! (`netblaze.epoch_ns: must be below slo_ns`). The `Frontier` keeps sorted points with
//! monotone interpolation; `max_packets` is a table per flow count up to 1024 built at
//! creation, the interpolation beyond. `CoreMapper::decide(&Profile, &mut [FlowBacklog], &mut
//! [AuxCore]) -> Decision`: inside the frontier nothing; whales split at the predicted `k`
//! onto a booster; boost; first fit locally, whole flows to borrowed auxiliary cores,
//! recruiting free ones; pinned flows stay, busy ones (a packet in service) never move whole
//! but a busy whale splits (its head runs here after the packet in service, so order holds).
//! Its whole-flow first fit keeps each core's room cached (`Slack`, up to 16 aux cores: per
//! core its backlog in wide counters and the most packets one more flow may bring,
//! recomputed only for the core that takes one, borrowed and free cores as bit masks,
//! backlogs written back at the end — the same choices as the plain first fit: one proptest
//! per pick, one over whole decisions against the plain path forced by a 17th core).
//! [`module`]: boot module 0 = the chain configuration, then after a line
//! `[netblaze.profile]` the profile (`module::parse` → `(ChainSpec, Option<Profile>)`, errors
//! carry the module's line). The per-bucket meter ([`crate::rss::meter`]) costs ~115
//! instructions per frame (docs/PERFORMANCE.md).
//!
//! **Boost mode** is the decision's: `CoreMapper::decide` keeps no whole flow on a boosting
//! lane (every movable flow goes to an auxiliary core with room), so a boosting dedicated
//! core only parses, places and hands over, plus the whale heads — NetBlaze's "only pulls
//! and dispatches".
//!
//! Costs: `cargo bench -p cadence-core --bench netblaze` (`CoreMapper::decide` over a
//! 1393-packet backlog and inside the frontier, `ServerMapper::period`); the latency
//! accounting's: `cargo bench -p cadence-core --bench latency` (pairs of polls of one Chain 1
//! worker with the accounting on and off, `Poller::set_timing`; an off/off control). Both in
//! docs/PERFORMANCE.md, "NetBlaze decisions".
//!
//! Floating point: the server mapper and the ingress mapper use `f64` (once per period); the
//! per-epoch core mapper uses integers only.

use core::fmt;

pub mod core_mapper;
pub mod epoch;
pub mod follow;
pub mod ingress;
pub mod module;
pub mod profile;
pub mod server_mapper;

#[cfg(test)]
pub(crate) mod tests;

pub use core_mapper::{AuxCore, AuxId, AuxState, CoreMapper, Decision, FlowBacklog, Placement};
pub use epoch::{Backlog, EpochCounters};
pub use follow::{Follow, FollowFull, FollowTable};
pub use ingress::{IngressConfig, IngressMapper, ServerView, Steer};
pub use profile::{
    Frontier, FrontierError, FrontierPoint, Part, Profile, ProfileError, ProfileErrorKind, RateCurve, RatePoint,
    ServiceCost, SplitProfile, WhaleChoice,
};
pub use server_mapper::{PeriodOutcome, RetaChange, ServerMapper};

/// The public code's epoch rule: `(SLO − 40 µs) / 2` (`nfvctrl` scripts, `short_epoch_period`).
pub const fn default_epoch_ns(slo_ns: u64) -> u64 {
    slo_ns.saturating_sub(40_000) / 2
}

/// NetBlaze's knobs. Times in nanoseconds, thresholds as fractions of a core's
/// predicted capacity. [`NetBlazeConfig::validate`] checks them once.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct NetBlazeConfig {
    /// The p99 latency SLO (default 200 µs; the paper: 100–500 µs).
    pub slo_ns: u64,
    /// Epoch length in ns; `None`: [`default_epoch_ns`] of `slo_ns` (80 µs at 200 µs).
    /// [`NetBlazeConfig::validate`] resolves it ([`Params::epoch_ns`]).
    pub epoch_ns: Option<u64>,
    /// An auxiliary core returns to background work after this many idle epochs (10).
    pub aux_idle_epochs: u32,
    /// Boost mode: a dedicated core whose backlog exceeds this many percent of its epoch
    /// capacity only pulls and dispatches (default 200: two epochs of work).
    pub boost_percent: u32,
    /// Server mapper period (default 1 s).
    pub server_period_ns: u64,
    /// A dedicated core above this share of its predicted capacity is relieved (0.85).
    pub overload: f64,
    /// Buckets move only onto cores that stay below this share (0.75).
    pub target: f64,
    /// A core below this share may be emptied and released (0.5) …
    pub reclaim: f64,
    /// … once it has been active for more than this many periods (4).
    pub reclaim_min_periods: u32,
}

impl Default for NetBlazeConfig {
    fn default() -> Self {
        Self {
            slo_ns: 200_000,
            epoch_ns: None,
            aux_idle_epochs: 10,
            boost_percent: 200,
            server_period_ns: 1_000_000_000,
            overload: 0.85,
            target: 0.75,
            reclaim: 0.5,
            reclaim_min_periods: 4,
        }
    }
}

/// Why a [`NetBlazeConfig`] was refused; [`NetBlazeConfigError::field`] names the field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum NetBlazeConfigError {
    /// `slo_ns` is zero.
    SloZero,
    /// `epoch_ns` (given or derived) is zero: the SLO leaves no epoch (SLO ≤ 40 µs).
    EpochZero,
    /// `epoch_ns` is not below `slo_ns`.
    EpochNotBelowSlo,
    /// `aux_idle_epochs` is zero.
    AuxIdleEpochsZero,
    /// `boost_percent` is below 100 (boost before the frontier is crossed).
    BoostBelowCapacity,
    /// `server_period_ns` is not above `epoch_ns`.
    ServerPeriodTooShort,
    /// `overload` not in `(0, 1]`.
    Overload,
    /// `target` not in `(0, overload]`.
    Target,
    /// `reclaim` not in `[0, target)`.
    Reclaim,
}

impl NetBlazeConfigError {
    /// The field at fault.
    pub const fn field(self) -> &'static str {
        match self {
            NetBlazeConfigError::SloZero => "slo_ns",
            NetBlazeConfigError::EpochZero | NetBlazeConfigError::EpochNotBelowSlo => "epoch_ns",
            NetBlazeConfigError::AuxIdleEpochsZero => "aux_idle_epochs",
            NetBlazeConfigError::BoostBelowCapacity => "boost_percent",
            NetBlazeConfigError::ServerPeriodTooShort => "server_period_ns",
            NetBlazeConfigError::Overload => "overload",
            NetBlazeConfigError::Target => "target",
            NetBlazeConfigError::Reclaim => "reclaim",
        }
    }
}

impl fmt::Display for NetBlazeConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self {
            NetBlazeConfigError::SloZero => "must be positive",
            NetBlazeConfigError::EpochZero => "is zero (an SLO of at most 40 us leaves no default epoch)",
            NetBlazeConfigError::EpochNotBelowSlo => "must be below slo_ns",
            NetBlazeConfigError::AuxIdleEpochsZero => "must be at least 1",
            NetBlazeConfigError::BoostBelowCapacity => "must be at least 100",
            NetBlazeConfigError::ServerPeriodTooShort => "must be longer than one epoch",
            NetBlazeConfigError::Overload => "must lie in (0, 1]",
            NetBlazeConfigError::Target => "must lie in (0, overload]",
            NetBlazeConfigError::Reclaim => "must lie in [0, target)",
        };
        write!(f, "netblaze.{}: {why}", self.field())
    }
}

/// A checked [`NetBlazeConfig`] with the epoch resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Params {
    cfg: NetBlazeConfig,
    epoch_ns: u64,
}

impl NetBlazeConfig {
    /// Checks every field (in declaration order; the first fault is reported).
    pub fn validate(&self) -> Result<Params, NetBlazeConfigError> {
        let in_unit = |x: f64| x > 0.0 && x <= 1.0;
        if self.slo_ns == 0 {
            return Err(NetBlazeConfigError::SloZero);
        }
        let mut cfg = *self;
        let epoch_ns = cfg.epoch_ns.unwrap_or(default_epoch_ns(self.slo_ns));
        cfg.epoch_ns = Some(epoch_ns);
        if epoch_ns == 0 {
            return Err(NetBlazeConfigError::EpochZero);
        }
        if epoch_ns >= cfg.slo_ns {
            return Err(NetBlazeConfigError::EpochNotBelowSlo);
        }
        if cfg.aux_idle_epochs == 0 {
            return Err(NetBlazeConfigError::AuxIdleEpochsZero);
        }
        if cfg.boost_percent < 100 {
            return Err(NetBlazeConfigError::BoostBelowCapacity);
        }
        if cfg.server_period_ns <= epoch_ns {
            return Err(NetBlazeConfigError::ServerPeriodTooShort);
        }
        if !in_unit(cfg.overload) {
            return Err(NetBlazeConfigError::Overload);
        }
        if !(in_unit(cfg.target) && cfg.target <= cfg.overload) {
            return Err(NetBlazeConfigError::Target);
        }
        if !(cfg.reclaim >= 0.0 && cfg.reclaim < cfg.target) {
            return Err(NetBlazeConfigError::Reclaim);
        }
        Ok(Params { cfg, epoch_ns })
    }
}

impl Params {
    /// The checked configuration (its `epoch_ns` resolved).
    pub fn config(&self) -> &NetBlazeConfig {
        &self.cfg
    }

    /// The epoch length (ns), resolved.
    pub fn epoch_ns(&self) -> u64 {
        self.epoch_ns
    }

    /// The SLO (ns).
    pub fn slo_ns(&self) -> u64 {
        self.cfg.slo_ns
    }
}
