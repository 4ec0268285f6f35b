//! The capacity predictor (seed paper §3.2 "Predicting
//! core usage", Fig. 3).
//!
//! Profiled offline per chain by `cargo xtask profile --chain FILE`, which runs the chain's
//! real code on the machine over software NICs:
//!
//! - [`Frontier`]: the Pareto frontier of ⟨flows, packets⟩ one core finishes within one
//!   epoch, as points sorted by flows (strictly increasing) with packets non-increasing.
//!   Lookups interpolate linearly between points and round down, so
//!   [`Frontier::max_packets`] is non-increasing in flows; above the last point's flow count
//!   the core cannot finish the epoch at all (capacity 0).
//! - One frontier per part: the whole chain ([`Profile::full`]) and, per split point `k`
//!   (NFs `1..=k` on the dedicated core, `k+1..=n` on a booster core), the head and the tail
//!   ([`SplitProfile`]).
//! - [`RateCurve`]: flows → packets/s a core sustains in the long term (the server mapper's
//!   capacity), non-increasing in flows, clamped at both ends.
//! - [`ServiceCost`]: the measured per-packet and per-new-flow cycles of each part (the
//!   simulator's service model; the predictor itself uses only the frontiers).
//!
//! Text form and parser: [`text`] (docs/PROTOCOL.md "NetBlaze profile").

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use super::epoch::Backlog;

pub mod text;

pub use text::{ProfileError, ProfileErrorKind};

/// One point of a [`Frontier`]: with `flows` flows a core finishes `packets` packets per epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrontierPoint {
    /// Flows (≥ 1).
    pub flows: u32,
    /// Packets (≥ 1).
    pub packets: u32,
}

/// Why a list of points is not a frontier (or a rate curve).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum FrontierError {
    /// No points.
    Empty,
    /// Point `index` has zero flows or zero capacity.
    Zero {
        /// Index of the point.
        index: u16,
    },
    /// Point `index` does not have more flows than the one before it.
    FlowsNotIncreasing {
        /// Index of the point.
        index: u16,
    },
    /// Point `index` has more capacity than the one before it (not monotone).
    CapacityIncreasing {
        /// Index of the point.
        index: u16,
    },
}

impl fmt::Display for FrontierError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            FrontierError::Empty => f.write_str("no points"),
            FrontierError::Zero { index } => write!(f, "point {index} has zero flows or capacity"),
            FrontierError::FlowsNotIncreasing { index } => {
                write!(f, "point {index}: flows must increase strictly")
            }
            FrontierError::CapacityIncreasing { index } => {
                write!(f, "point {index}: capacity must not increase with flows (not monotone)")
            }
        }
    }
}

/// Checks `(flows, capacity)` pairs: non-empty, non-zero, flows strictly increasing,
/// capacity non-increasing.
fn check(points: impl Iterator<Item = (u32, u64)>) -> Result<(), FrontierError> {
    let mut prev: Option<(u32, u64)> = None;
    let mut n = 0usize;
    for (i, (f, c)) in points.enumerate() {
        let index = i.min(usize::from(u16::MAX)) as u16;
        if f == 0 || c == 0 {
            return Err(FrontierError::Zero { index });
        }
        if let Some((pf, pc)) = prev {
            if f <= pf {
                return Err(FrontierError::FlowsNotIncreasing { index });
            }
            if c > pc {
                return Err(FrontierError::CapacityIncreasing { index });
            }
        }
        prev = Some((f, c));
        n += 1;
    }
    if n == 0 { Err(FrontierError::Empty) } else { Ok(()) }
}

/// `a` at `fa`, `b` at `fb` (`fa < x < fb`, `a ≥ b`): the linear interpolation at `x`,
/// rounded down. Non-increasing in `x`, between `b` and `a`.
fn interpolate(fa: u32, a: u64, fb: u32, b: u64, x: u32) -> u64 {
    let span = u128::from(fb.saturating_sub(fa).max(1));
    let drop = u128::from(a.saturating_sub(b)) * u128::from(x.saturating_sub(fa));
    // Round the drop up so that the value rounds down.
    let drop = drop.div_ceil(span);
    a.saturating_sub(drop.min(u128::from(u64::MAX)) as u64)
}

/// Flow counts up to this have [`Frontier::max_packets`] precomputed (4 KiB per frontier at
/// most): the core mapper asks it for every flow it places, and the interpolation's 128-bit
/// division made a decision over 100 flows cost 3 % of an 80 µs epoch.
const DENSE_FLOWS: u32 = 1024;

/// The Pareto frontier of ⟨flows, packets⟩ per epoch (sorted arrays; checked at creation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontier {
    points: Vec<FrontierPoint>,
    /// `max_packets(f)` for `f` in `0..=min(max_flows, DENSE_FLOWS)` (derived from `points`).
    dense: Vec<u32>,
}

impl Frontier {
    /// A frontier from points sorted by flows; an empty or non-monotone list is refused.
    pub fn try_new(points: Vec<FrontierPoint>) -> Result<Self, FrontierError> {
        check(points.iter().map(|p| (p.flows, u64::from(p.packets))))?;
        let mut f = Self { points, dense: Vec::new() };
        let top = f.max_flows().min(DENSE_FLOWS);
        f.dense = (0..=top).map(|n| f.interpolated(n)).collect();
        Ok(f)
    }

    /// The points, flows increasing.
    pub fn points(&self) -> &[FrontierPoint] {
        &self.points
    }

    /// The most flows a core can take in one epoch (the last point's).
    pub fn max_flows(&self) -> u32 {
        self.points.last().map_or(0, |p| p.flows)
    }

    /// Packets a core finishes in one epoch when they belong to `flows` flows: the first
    /// point's packets at or below its flow count, interpolated (rounded down) between points,
    /// 0 above [`Frontier::max_flows`]. Non-increasing in `flows`.
    #[inline]
    pub fn max_packets(&self, flows: u32) -> u32 {
        match self.dense.get(flows as usize) {
            Some(&p) => p,
            None => self.interpolated(flows),
        }
    }

    /// [`Frontier::max_packets`] from the points.
    fn interpolated(&self, flows: u32) -> u32 {
        let pts = &self.points;
        let i = pts.partition_point(|p| p.flows < flows);
        let Some(hi) = pts.get(i) else { return 0 };
        if hi.flows == flows || i == 0 {
            return hi.packets;
        }
        let Some(lo) = pts.get(i - 1) else { return hi.packets };
        interpolate(lo.flows, u64::from(lo.packets), hi.flows, u64::from(hi.packets), flows) as u32
    }

    /// Whether a core finishes backlog `b` within one epoch.
    pub fn contains(&self, b: Backlog) -> bool {
        b.packets == 0 || b.packets <= self.max_packets(b.flows)
    }

    /// `b` as a share of one epoch in 1/65536 units (`u32::MAX` when the flow count is past
    /// the frontier): `packets / max_packets(flows)`.
    pub fn load_q16(&self, b: Backlog) -> u32 {
        if b.packets == 0 {
            return 0;
        }
        let cap = self.max_packets(b.flows);
        if cap == 0 {
            return u32::MAX;
        }
        ((u64::from(b.packets) << 16) / u64::from(cap)).min(u64::from(u32::MAX)) as u32
    }
}

/// One point of a [`RateCurve`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RatePoint {
    /// Active flows on the core (≥ 1).
    pub flows: u32,
    /// Packets per second the core sustains (≥ 1).
    pub pps: u64,
}

/// Flows → packets/s a core sustains in the long term (the server mapper's capacity).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateCurve {
    points: Vec<RatePoint>,
}

impl RateCurve {
    /// A curve from points sorted by flows; an empty or non-monotone list is refused.
    pub fn try_new(points: Vec<RatePoint>) -> Result<Self, FrontierError> {
        check(points.iter().map(|p| (p.flows, p.pps)))?;
        Ok(Self { points })
    }

    /// The points, flows increasing.
    pub fn points(&self) -> &[RatePoint] {
        &self.points
    }

    /// Sustained packets/s with `flows` active flows: clamped to the first and last points,
    /// interpolated (rounded down) between them. Non-increasing in `flows`.
    pub fn pps(&self, flows: u32) -> u64 {
        let pts = &self.points;
        let i = pts.partition_point(|p| p.flows < flows);
        match (i.checked_sub(1).and_then(|j| pts.get(j)), pts.get(i)) {
            (_, Some(hi)) if hi.flows == flows => hi.pps,
            (Some(lo), Some(hi)) => interpolate(lo.flows, lo.pps, hi.flows, hi.pps, flows),
            (None, Some(hi)) => hi.pps,
            (Some(lo), None) => lo.pps,
            (None, None) => 0,
        }
    }

    /// The sustained rate at the last point (the plateau at high flow counts).
    pub fn floor_pps(&self) -> u64 {
        self.points.last().map_or(0, |p| p.pps)
    }
}

/// Measured cost of one part of a chain, in TSC cycles (the simulator's service model).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ServiceCost {
    /// Per packet of a flow the NFs already know.
    pub packet_cycles: u32,
    /// Extra for the first packet of a new flow (state creation, classification).
    pub flow_cycles: u32,
}

/// A chain, or a part of one, on one core: its frontier and its cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    /// ⟨flows, packets⟩ per epoch.
    pub frontier: Frontier,
    /// Cycles per packet and per new flow.
    pub service: ServiceCost,
}

/// The chain cut after NF `k`: the head (NFs `1..=k`) stays on the dedicated core, the tail
/// (`k+1..=n`) runs on a booster core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitProfile {
    /// The split point, `1..n`.
    pub k: u8,
    /// NFs `1..=k`.
    pub head: Part,
    /// NFs `k+1..=n`.
    pub tail: Part,
}

impl SplitProfile {
    /// Packets of one flow the pair finishes per epoch: the slower of head and tail.
    pub fn whale_capacity(&self) -> u32 {
        self.head.frontier.max_packets(1).min(self.tail.frontier.max_packets(1))
    }
}

/// How to treat a whale of a given backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum WhaleChoice {
    /// Split at `k`: the pair finishes the backlog within an epoch.
    Split {
        /// Split point.
        k: u8,
    },
    /// No split suffices: split at the best `k` anyway (best effort), an SLO-risk event.
    BestEffort {
        /// Split point with the most capacity.
        k: u8,
    },
    /// The profile has no split points: process it whole, best effort (an SLO-risk event).
    Whole,
}

/// A chain's profile: NetBlaze's capacity predictor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// NF names in order (informational; `nfs=`).
    pub nfs: Vec<String>,
    /// TSC rate the cycles were measured at.
    pub tsc_hz: u64,
    /// The epoch the frontiers are for (ns).
    pub epoch_ns: u64,
    /// The whole chain on one core.
    pub full: Part,
    /// Long-term capacity of one core running the whole chain.
    pub rate: RateCurve,
    /// Split points, `k` increasing (may be empty for a one-NF chain).
    pub splits: Vec<SplitProfile>,
}

impl Profile {
    /// A whale is a flow whose own backlog exceeds this: what one core finishes of one flow
    /// in an epoch.
    pub fn whale_threshold(&self) -> u32 {
        self.full.frontier.max_packets(1)
    }

    /// Whether a single flow's backlog of `packets` is a whale.
    pub fn is_whale(&self, packets: u32) -> bool {
        packets > self.whale_threshold()
    }

    /// The split point for a whale with `packets` queued: among the splits whose pair finishes
    /// them within an epoch the one with the most capacity; else best effort at the split
    /// with the most capacity (ties: the smaller `k`).
    pub fn whale_split(&self, packets: u32) -> WhaleChoice {
        let best =
            self.splits.iter().map(|s| (s.whale_capacity(), s.k)).fold(None::<(u32, u8)>, |acc, (c, k)| match acc {
                Some((bc, _)) if bc >= c => acc,
                _ => Some((c, k)),
            });
        match best {
            None => WhaleChoice::Whole,
            Some((c, k)) if c >= packets => WhaleChoice::Split { k },
            Some((_, k)) => WhaleChoice::BestEffort { k },
        }
    }

    /// The split at point `k`.
    pub fn split(&self, k: u8) -> Option<&SplitProfile> {
        self.splits.iter().find(|s| s.k == k)
    }

    /// Nanoseconds of `cycles` at this profile's TSC rate.
    pub fn cycles_to_ns(&self, cycles: u64) -> f64 {
        if self.tsc_hz == 0 { 0.0 } else { cycles as f64 * 1e9 / self.tsc_hz as f64 }
    }
}

#[cfg(test)]
mod dense_tests {
    use super::*;

    #[test]
    fn the_table_answers_what_the_interpolation_does_on_both_sides_of_its_end() {
        let pts = [(1, 5000), (7, 4990), (300, 2000), (2000, 100)];
        let f = Frontier::try_new(pts.iter().map(|&(flows, packets)| FrontierPoint { flows, packets }).collect())
            .expect("valid");
        assert_eq!(f.dense.len(), DENSE_FLOWS as usize + 1);
        for n in 0..=2100 {
            assert_eq!(f.max_packets(n), f.interpolated(n), "flows {n}");
        }
        assert_eq!(f.max_packets(u32::MAX), 0);
    }
}
