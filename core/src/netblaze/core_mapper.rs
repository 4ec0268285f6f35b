//! The core mapper (`SPEC.md` §2 "Core mapper", "Whales", "Boost mode"; seed paper §3.2,
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
        for f in flows.iter_mut() {
            f.place = Placement::Local;
            if f.packets > 0 {
                d.backlog = d.backlog.plus(Backlog::flow(f.packets));
            }
        }
        if full.contains(d.backlog) {
            d.inside = true;
            d.kept = d.backlog;
            return d;
        }
        let cap = u64::from(full.max_packets(d.backlog.flows)).max(1);
        d.boost = u64::from(d.backlog.packets) * 100 > cap * u64::from(self.params.config().boost_percent);

        // Pinned flows, and busy ones that are not whales, stay and count first.
        let mut local = Backlog::EMPTY;
        for f in flows.iter().filter(|f| (f.pinned || f.busy && !profile.is_whale(f.packets)) && f.packets > 0) {
            local = local.plus(Backlog::flow(f.packets));
        }
        // Whales (busy ones too): split, heads here.
        let mut reserved = 0u64;
        for f in flows.iter_mut().filter(|f| !f.pinned && profile.is_whale(f.packets)) {
            d.whales = d.whales.saturating_add(1);
            let k = match profile.whale_split(f.packets) {
                WhaleChoice::Split { k } => k,
                WhaleChoice::BestEffort { k } => {
                    d.slo_risk = d.slo_risk.saturating_add(1);
                    k
                }
                WhaleChoice::Whole => {
                    d.slo_risk = d.slo_risk.saturating_add(1);
                    local = local.plus(Backlog::flow(f.packets));
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
                    local = local.plus(Backlog::flow(f.packets));
                }
            }
        }
        // The rest: first fit here (unless boosting), else whole to an auxiliary core.
        let mut slack = Slack::new(full, aux);
        let whale = profile.whale_threshold();
        for f in flows.iter_mut().filter(|f| !f.pinned && !f.busy && f.packets > 0 && f.place == Placement::Local) {
            if f.packets > whale {
                continue; // handled above (kept whole, best effort)
            }
            let b = Backlog::flow(f.packets);
            if !d.boost && fits(full, local.plus(b), reserved) {
                local = local.plus(b);
                continue;
            }
            // Either way the core taking the flow gets its backlog.
            let target = match &mut slack {
                Some(s) => s.pick(full, aux, &mut d, f.packets),
                None => pick(aux, &mut d, |a| a.fits(full, b, 0)).inspect(|&i| {
                    if let Some(a) = aux.get_mut(usize::from(i)) {
                        a.backlog = a.backlog.plus(b);
                    }
                }),
            };
            match target {
                Some(i) => {
                    f.place = Placement::Aux(i);
                    d.moved = d.moved.plus(b);
                }
                None => {
                    d.slo_risk = d.slo_risk.saturating_add(1);
                    local = local.plus(b);
                }
            }
        }
        d.kept = local;
        d
    }
}

/// Most auxiliary cores [`Slack`] keeps (more: the plain first fit, [`pick`]).
const SLACK_CORES: usize = 16;

/// First fit of whole flows with each core's room cached: per auxiliary core the most packets
/// one more flow may bring (`fits` solved for the flow's packets), recomputed only for the core
/// that takes a flow. The same choices as [`pick`] with [`AuxCore::fits`], one compare per core
/// tried instead of a frontier lookup and two multiplications.
struct Slack {
    room: [i64; SLACK_CORES],
}

impl Slack {
    /// `None` with more cores than it keeps.
    fn new(full: &Frontier, aux: &[AuxCore]) -> Option<Self> {
        if aux.len() > SLACK_CORES {
            return None;
        }
        let mut s = Slack { room: [-1; SLACK_CORES] };
        for (r, a) in s.room.iter_mut().zip(aux) {
            *r = Self::room_of(full, a);
        }
        Some(s)
    }

    /// The most packets one more flow may bring to `a`: `fits(full, backlog + ⟨1, p⟩,
    /// tail)` holds exactly for `p ≤` this (−1: none).
    fn room_of(full: &Frontier, a: &AuxCore) -> i64 {
        let reserved = u64::from(a.tail_q16);
        if reserved > ONE {
            return -1;
        }
        let cap = u64::from(full.max_packets(a.backlog.flows.saturating_add(1)));
        ((cap * (ONE - reserved)) >> 16) as i64 - i64::from(a.backlog.packets)
    }

    /// [`pick`] for a whole flow of `packets` (> 0): the first borrowed core with room, else
    /// the first free one with room, recruited; the core taking it gets its backlog and room
    /// updated.
    fn pick(&mut self, full: &Frontier, aux: &mut [AuxCore], d: &mut Decision, packets: u32) -> Option<AuxId> {
        let p = i64::from(packets);
        let fits = |state: AuxState| aux.iter().zip(&self.room).position(|(a, &r)| a.state == state && r >= p);
        let i = match fits(AuxState::Borrowed) {
            Some(i) => i,
            None => {
                let i = fits(AuxState::Free)?;
                if let Some(a) = aux.get_mut(i) {
                    a.state = AuxState::Borrowed;
                    a.idle_epochs = 0;
                }
                d.recruited = d.recruited.saturating_add(1);
                i
            }
        };
        let id = AuxId::try_from(i).ok()?;
        if let (Some(a), Some(r)) = (aux.get_mut(i), self.room.get_mut(i)) {
            a.backlog = a.backlog.plus(Backlog::flow(packets));
            *r = Self::room_of(full, a);
        }
        Some(id)
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

    fn core() -> impl Strategy<Value = AuxCore> {
        (any::<bool>(), 0u32..40, 0u32..300, prop_oneof![Just(0u32), 0u32..70_000]).prop_map(
            |(borrowed, flows, packets, tail_q16)| AuxCore {
                state: if borrowed { AuxState::Borrowed } else { AuxState::Free },
                backlog: Backlog::new(flows, if flows == 0 { 0 } else { packets }),
                tail_q16,
                idle_epochs: 3,
                borrowed_epochs: 0,
            },
        )
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]

        /// The cached first fit makes every choice the plain one makes, and leaves the cores
        /// and the decision's counts the same.
        #[test]
        fn slack_picks_what_first_fit_picks(
            aux in proptest::collection::vec(core(), 0..=SLACK_CORES),
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
