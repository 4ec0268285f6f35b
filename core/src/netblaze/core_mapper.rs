//! The core mapper (seed paper §3.2,
//! "Handling minnows and whales"; public code `nfv_core_short.cc` `ShortEpochProcess`).
//!
//! At the end of every epoch each dedicated core calls [`CoreMapper::decide`] with the flows
//! of its backlog, in the order their first queued packet arrived, and the server's pool of
//! auxiliary cores. The decision, written into each [`FlowBacklog::place`]:
//!
//! 1. Backlog inside the frontier → every flow stays ([`Decision::inside`]).
//! 2. **Whales** first: a flow whose own backlog exceeds one core's epoch capacity
//!    ([`Profile::is_whale`]) is split at the `k` the per-split predictor picks
//!    ([`Profile::whale_split`]): the head (NFs `1..=k`) stays here, the tail runs on a
//!    booster, an auxiliary core with room for the tail's share of an epoch. No split that
//!    suffices → an SLO-risk event, and the flow is still split best effort, its tail on an
//!    idle auxiliary core; no booster at all → an SLO-risk event, the flow stays whole.
//! 3. **Boost mode** when the backlog exceeds `boost_percent` of the core's epoch capacity:
//!    the core keeps no whole flow (it only pulls, dispatches and runs whale heads).
//! 4. Otherwise first fit in arrival order: a flow stays if the local backlog plus it stays
//!    inside the frontier (less what whale heads take); else it goes **whole** to the first
//!    borrowed auxiliary core with room, else to a newly recruited one; with none left it
//!    stays, best effort, an SLO-risk event.
//!
//! Flows marked [`FlowBacklog::pinned`] (they still follow an earlier move or split, see
//! [`super::follow`]) always stay: moving them could let a later packet finish before an
//! earlier one. A flow marked [`FlowBacklog::busy`] (a packet of it is being processed here
//! right now) may not move whole, for the same reason, but a busy whale may still be split:
//! its queued packets run their head here, after the packet in service, and their tail on the
//! booster in order, so none can finish before it.
//!
//! Shares of an epoch are fixed-point (1/65536); the decision uses integers only and touches
//! only the caller's slices (no allocation).

use super::Params;
use super::epoch::Backlog;
use super::profile::{Frontier, Profile, WhaleChoice};

/// An auxiliary core's index in the server's pool.
pub type AuxId = u16;

/// One share of an epoch in fixed point.
const ONE: u64 = 1 << 16;

/// Where a flow's queued and following packets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Placement {
    /// Processed here.
    #[default]
    Local,
    /// Handed whole to this auxiliary core.
    Aux(AuxId),
    /// Whale: NFs `1..=k` here, `k+1..` on the booster.
    Split {
        /// Split point.
        k: u8,
        /// The auxiliary core running the tail.
        booster: AuxId,
    },
}

/// One flow of a dedicated core's backlog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FlowBacklog {
    /// Its queued packets (not yet started).
    pub packets: u32,
    /// Must stay where it is, whole or split (bound by an earlier move or split).
    pub pinned: bool,
    /// A packet of it is in service here now: it may not move whole, but a whale may split.
    pub busy: bool,
    /// The decision (output).
    pub place: Placement,
}

impl FlowBacklog {
    /// A movable flow with `packets` queued.
    pub const fn new(packets: u32) -> Self {
        Self { packets, pinned: false, busy: false, place: Placement::Local }
    }
}

/// Whether an auxiliary core is lent to the dataplane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AuxState {
    /// Doing background work (halted, for the dataplane).
    #[default]
    Free,
    /// Borrowed: serving hand-off rings.
    Borrowed,
}

/// One auxiliary core as the mappers see it. The caller refreshes `backlog` and `tail_q16`
/// from the core's rings at the start of each epoch ([`AuxCore::observe`]); `decide` adds what
/// it hands over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AuxCore {
    /// Free or borrowed.
    pub state: AuxState,
    /// Whole-chain work queued (⟨flows, packets⟩).
    pub backlog: Backlog,
    /// Whale tails queued, as a share of an epoch (1/65536).
    pub tail_q16: u32,
    /// Consecutive idle epochs while borrowed.
    pub idle_epochs: u32,
    /// Epochs spent borrowed (for core-second accounting).
    pub borrowed_epochs: u64,
}

impl AuxCore {
    /// The core's queued work at the start of an epoch.
    pub fn observe(&mut self, backlog: Backlog, tail_q16: u32) {
        self.backlog = backlog;
        self.tail_q16 = tail_q16;
    }

    /// Ends an epoch: `busy` if it processed anything in it. Returns `true` when the core is
    /// released (borrowed and idle for `aux_idle_epochs` epochs with nothing queued).
    pub fn end_epoch(&mut self, params: &Params, busy: bool) -> bool {
        if self.state != AuxState::Borrowed {
            return false;
        }
        self.borrowed_epochs = self.borrowed_epochs.saturating_add(1);
        if busy || !self.backlog.is_empty() || self.tail_q16 > 0 {
            self.idle_epochs = 0;
            return false;
        }
        self.idle_epochs = self.idle_epochs.saturating_add(1);
        if self.idle_epochs >= params.config().aux_idle_epochs {
            self.state = AuxState::Free;
            self.idle_epochs = 0;
            return true;
        }
        false
    }

    /// Whether `add` (whole-chain work) plus `tail_add` (tail share) fits in one epoch.
    fn fits(&self, full: &Frontier, add: Backlog, tail_add: u64) -> bool {
        fits(full, self.backlog.plus(add), u64::from(self.tail_q16) + tail_add)
    }
}

/// Whether a core finishes `b` plus `reserved` (a share of an epoch) within one epoch.
fn fits(full: &Frontier, b: Backlog, reserved: u64) -> bool {
    if reserved > ONE {
        return false;
    }
    if b.packets == 0 {
        return true;
    }
    let cap = u64::from(full.max_packets(b.flows));
    u64::from(b.packets) * ONE <= cap * (ONE - reserved)
}

/// `packets` of one flow as a share of an epoch on a part with frontier `f`.
fn share(f: &Frontier, packets: u32) -> u64 {
    let cap = u64::from(f.max_packets(1)).max(1);
    (u64::from(packets) * ONE).div_ceil(cap)
}

/// What one epoch's decision did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Decision {
    /// The backlog the decision saw.
    pub backlog: Backlog,
    /// It was inside the frontier: nothing moved.
    pub inside: bool,
    /// Boost mode: the dedicated core kept no whole flow.
    pub boost: bool,
    /// Kept here (whale heads not included).
    pub kept: Backlog,
    /// Handed whole to auxiliary cores.
    pub moved: Backlog,
    /// Auxiliary cores recruited by this decision.
    pub recruited: u16,
    /// Whales seen.
    pub whales: u16,
    /// Whales split onto a booster.
    pub splits: u16,
    /// SLO-risk events: a whale no split suffices for, or a flow or whale tail for which no
    /// auxiliary core had room.
    pub slo_risk: u16,
}

/// The per-epoch decision of one dedicated core (stateless; one per core for symmetry with
/// the firmware, which keeps its parameters per core).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreMapper {
    params: Params,
}

impl CoreMapper {
    /// A mapper with checked parameters.
    pub fn new(params: Params) -> Self {
        Self { params }
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Decides this epoch (module docs): writes `place` of every flow in `flows` (in arrival
    /// order) and adds what it hands over to the auxiliary cores in `aux` (recruiting free
    /// ones, first fit in index order).
    pub fn decide(&self, profile: &Profile, flows: &mut [FlowBacklog], aux: &mut [AuxCore]) -> Decision {
        let full = &profile.full.frontier;
        let mut d = Decision::default();
        let mut all = Sum::default();
        for f in flows.iter_mut() {
            f.place = Placement::Local;
            all.add(f.packets);
        }
        d.backlog = all.backlog();
        if full.contains(d.backlog) {
            d.inside = true;
            d.kept = d.backlog;
            return d;
        }
        let cap = u64::from(full.max_packets(d.backlog.flows)).max(1);
        d.boost = u64::from(d.backlog.packets) * 100 > cap * u64::from(self.params.config().boost_percent);
        let whale = profile.whale_threshold();

        // Pinned flows, and busy ones that are not whales, stay; whales (busy ones too) split,
        // heads here. One pass: a whale's split reads only the auxiliary cores, never what
        // stays here.
        let mut local = Sum::default();
        let mut reserved = 0u64;
        for f in flows.iter_mut() {
            let is_whale = f.packets > whale;
            if f.pinned || f.busy && !is_whale {
                local.add(f.packets);
                continue;
            }
            if !is_whale {
                continue;
            }
            d.whales = d.whales.saturating_add(1);
            let k = match profile.whale_split(f.packets) {
                WhaleChoice::Split { k } => k,
                WhaleChoice::BestEffort { k } => {
                    d.slo_risk = d.slo_risk.saturating_add(1);
                    k
                }
                WhaleChoice::Whole => {
                    d.slo_risk = d.slo_risk.saturating_add(1);
                    local.add(f.packets);
                    continue;
                }
            };
            let Some(split) = profile.split(k) else { continue };
            let tail = share(&split.tail.frontier, f.packets);
            // A tail longer than an epoch fits nowhere: best effort on an idle core.
            let booster = if tail > ONE {
                pick(aux, &mut d, |a| a.backlog.is_empty() && a.tail_q16 == 0)
            } else {
                pick(aux, &mut d, |a| a.fits(full, Backlog::EMPTY, tail))
            };
            match booster {
                Some(b) => {
                    if let Some(a) = aux.get_mut(usize::from(b)) {
                        a.tail_q16 = a.tail_q16.saturating_add(tail.min(u64::from(u32::MAX)) as u32);
                    }
                    reserved += share(&split.head.frontier, f.packets);
                    f.place = Placement::Split { k, booster: b };
                    d.splits = d.splits.saturating_add(1);
                }
                None => {
                    d.slo_risk = d.slo_risk.saturating_add(1);
                    local.add(f.packets);
                }
            }
        }
        // The rest (every flow still here is no whale): first fit here (unless boosting),
        // else whole to an auxiliary core.
        let mut moved = Sum::default();
        let mut slack = Slack::new(full, aux);
        for f in flows.iter_mut() {
            let p = f.packets;
            if f.pinned || f.busy || p == 0 || p > whale {
                continue; // stayed above, or a whale handled above
            }
            if !d.boost && fits(full, local.with(p), reserved) {
                local.add(p);
                continue;
            }
            // Either way the core taking the flow gets its backlog.
            let target = match &mut slack {
                Some(s) => s.pick(full, aux, &mut d, p),
                None => {
                    let b = Backlog::flow(p);
                    pick(aux, &mut d, |a| a.fits(full, b, 0)).inspect(|&i| {
                        if let Some(a) = aux.get_mut(usize::from(i)) {
                            a.backlog = a.backlog.plus(b);
                        }
                    })
                }
            };
            match target {
                Some(i) => {
                    f.place = Placement::Aux(i);
                    moved.add(p);
                }
                None => {
                    d.slo_risk = d.slo_risk.saturating_add(1);
                    local.add(p);
                }
            }
        }
        if let Some(s) = slack {
            s.finish(aux);
        }
        d.kept = local.backlog();
        d.moved = moved.backlog();
        d
    }
}

/// A sum of flows in wide counters ([`Backlog::plus`] saturates at every step; summing
/// non-negative counts wide and saturating once at the end gives the same result).
#[derive(Debug, Clone, Copy, Default)]
struct Sum {
    flows: u64,
    packets: u64,
}

impl Sum {
    /// Adds one flow of `packets` (none if 0).
    #[inline(always)]
    fn add(&mut self, packets: u32) {
        self.flows += u64::from(packets > 0);
        self.packets += u64::from(packets);
    }

    /// The sum with one more flow of `packets` (> 0), as a backlog.
    #[inline(always)]
    fn with(self, packets: u32) -> Backlog {
        let mut s = self;
        s.add(packets);
        s.backlog()
    }

    /// As a backlog (saturating).
    #[inline(always)]
    fn backlog(self) -> Backlog {
        let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Backlog::new(sat(self.flows), sat(self.packets))
    }
}

/// Most auxiliary cores [`Slack`] keeps (more: the plain first fit, [`pick`]).
const SLACK_CORES: usize = 16;

/// First fit of whole flows with each core's room cached: per auxiliary core its backlog in
/// wide counters and the most packets one more flow may bring (`fits` solved for the flow's
/// packets), recomputed only for the core that takes a flow, and which cores are borrowed and
/// free as bit masks. The same choices as [`pick`] with [`AuxCore::fits`], one compare per
/// core tried (only the borrowed, then only the free ones, found by their bits) instead of a
/// frontier lookup and two multiplications; the cores' backlogs are written back by
/// [`Slack::finish`].
struct Slack {
    /// Room per core (−1: none; a core past `aux.len()` has none).
    room: [i64; SLACK_CORES],
    /// Flows queued per core.
    flows: [u64; SLACK_CORES],
    /// Packets queued per core.
    packets: [u64; SLACK_CORES],
    /// Per core the share of an epoch left after its whale tails (`ONE − tail_q16`, 0 when
    /// the tails take an epoch or more: no room for any flow).
    scale: [u64; SLACK_CORES],
    /// Bit `i`: core `i` is borrowed.
    borrowed: u32,
    /// Bit `i`: core `i` is free.
    free: u32,
    /// Bit `i`: core `i` took a flow (its backlog is written back).
    took: u32,
}

impl Slack {
    /// `None` with more cores than it keeps.
    fn new(full: &Frontier, aux: &[AuxCore]) -> Option<Self> {
        if aux.len() > SLACK_CORES {
            return None;
        }
        let mut s = Slack {
            room: [-1; SLACK_CORES],
            flows: [0; SLACK_CORES],
            packets: [0; SLACK_CORES],
            scale: [0; SLACK_CORES],
            borrowed: 0,
            free: 0,
            took: 0,
        };
        for (i, a) in aux.iter().enumerate() {
            s.flows[i] = u64::from(a.backlog.flows);
            s.packets[i] = u64::from(a.backlog.packets);
            s.scale[i] = ONE.saturating_sub(u64::from(a.tail_q16));
            s.room[i] = s.room_of(full, i);
            match a.state {
                AuxState::Borrowed => s.borrowed |= 1 << i,
                AuxState::Free => s.free |= 1 << i,
            }
        }
        Some(s)
    }

    /// The most packets one more flow may bring to core `i`: `fits(full, backlog + ⟨1, p⟩,
    /// tail)` holds exactly for `p ≤` this (≤ 0: none).
    #[inline(always)]
    fn room_of(&self, full: &Frontier, i: usize) -> i64 {
        let flows = u32::try_from(self.flows[i] + 1).unwrap_or(u32::MAX);
        let cap = u64::from(full.max_packets(flows));
        ((cap * self.scale[i]) >> 16) as i64 - self.packets[i] as i64
    }

    /// The first core of `cores` (a bit mask) with room for `p` packets.
    #[inline(always)]
    fn first_fit(&self, mut cores: u32, p: i64) -> Option<usize> {
        while cores != 0 {
            let i = cores.trailing_zeros() as usize;
            if self.room.get(i).is_some_and(|&r| r >= p) {
                return Some(i);
            }
            cores &= cores - 1;
        }
        None
    }

    /// [`pick`] for a whole flow of `packets` (> 0): the first borrowed core with room, else
    /// the first free one with room, recruited; the core taking it gets its backlog and room
    /// updated (here; in `aux` by [`Slack::finish`]).
    fn pick(&mut self, full: &Frontier, aux: &mut [AuxCore], d: &mut Decision, packets: u32) -> Option<AuxId> {
        let p = i64::from(packets);
        let i = match self.first_fit(self.borrowed, p) {
            Some(i) => i,
            None => {
                let i = self.first_fit(self.free, p)?;
                self.free &= !(1 << i);
                self.borrowed |= 1 << i;
                if let Some(a) = aux.get_mut(i) {
                    a.state = AuxState::Borrowed;
                    a.idle_epochs = 0;
                }
                d.recruited = d.recruited.saturating_add(1);
                i
            }
        };
        // `i < SLACK_CORES`: `first_fit` found it in `room`.
        self.flows[i] += 1;
        self.packets[i] += u64::from(packets);
        self.room[i] = self.room_of(full, i);
        self.took |= 1 << i;
        AuxId::try_from(i).ok()
    }

    /// Writes the backlogs of the cores that took flows into `aux` (saturating, as
    /// [`Backlog::plus`] would have step by step).
    fn finish(self, aux: &mut [AuxCore]) {
        let sat = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        for (i, a) in aux.iter_mut().enumerate().filter(|&(i, _)| self.took & (1 << i) != 0) {
            a.backlog = Backlog::new(sat(self.flows[i]), sat(self.packets[i]));
        }
    }
}

/// First fit over borrowed cores, else recruits the first free one (if it has room).
fn pick(aux: &mut [AuxCore], d: &mut Decision, room: impl Fn(&AuxCore) -> bool) -> Option<AuxId> {
    let borrowed = aux.iter().position(|a| a.state == AuxState::Borrowed && room(a));
    if let Some(i) = borrowed {
        return AuxId::try_from(i).ok();
    }
    let free = aux.iter().position(|a| a.state == AuxState::Free && room(a))?;
    let id = AuxId::try_from(free).ok()?;
    if let Some(a) = aux.get_mut(free) {
        a.state = AuxState::Borrowed;
        a.idle_epochs = 0;
    }
    d.recruited = d.recruited.saturating_add(1);
    Some(id)
}

#[cfg(test)]
mod slack_tests {
    use proptest::prelude::*;

    use super::*;
    use crate::netblaze::profile::FrontierPoint;

    fn frontier(points: &[(u32, u32)]) -> Frontier {
        Frontier::try_new(points.iter().map(|&(flows, packets)| FrontierPoint { flows, packets }).collect())
            .expect("frontier")
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]

        /// The cached first fit makes every choice the plain one makes, and leaves the cores
        /// and the decision's counts the same.
        #[test]
        fn slack_picks_what_first_fit_picks(
            aux in proptest::collection::vec(crate::netblaze::tests::core_mapper::aux_core(), 0..=SLACK_CORES),
            flows in proptest::collection::vec(1u32..120, 0..80),
        ) {
            let full = frontier(&[(1, 160), (8, 150), (16, 128), (64, 96), (128, 64)]);
            let (mut plain, mut cached) = (aux.clone(), aux.clone());
            let (mut dp, mut dc) = (Decision::default(), Decision::default());
            let mut slack = Slack::new(&full, &cached).expect("at most SLACK_CORES");
            for &p in &flows {
                let b = Backlog::flow(p);
                let want = pick(&mut plain, &mut dp, |a| a.fits(&full, b, 0));
                if let Some(i) = want {
                    plain[usize::from(i)].backlog = plain[usize::from(i)].backlog.plus(b);
                }
                let got = slack.pick(&full, &mut cached, &mut dc, p);
                prop_assert_eq!(got, want);
            }
            slack.finish(&mut cached);
            prop_assert_eq!(cached, plain);
            prop_assert_eq!(dc, dp);
        }
    }

    /// More cores than it keeps: no cache (the plain first fit runs).
    #[test]
    fn slack_keeps_at_most_its_cores() {
        let full = frontier(&[(1, 10)]);
        assert!(Slack::new(&full, &[AuxCore::default(); SLACK_CORES]).is_some());
        assert!(Slack::new(&full, &[AuxCore::default(); SLACK_CORES + 1]).is_none());
    }
}
