//! A lane's NetBlaze state ([`LaneState`]), its counters ([`NetBlazeCounters`]) and how
//! every lane's state is built ([`build`]) and shared ([`share`]) (the module docs of
//! [`crate::offload`] tell the whole mechanism).

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use spin::Mutex;

use super::handoff::{AuxEnd, DedicatedEnd, HandoffError, try_link};
use crate::buf::{BATCH_SIZE, PacketBuf};
use crate::netblaze::core_mapper::{AuxCore, AuxId, FlowBacklog};
use crate::netblaze::follow::FollowTable;
use crate::parse;
use crate::pna::exact::hash_key;
use crate::sync::Doorbell;
use crate::time::{Duration, Instant};

/// Sizes of a lane's NetBlaze state, fixed at construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LaneConfig {
    /// Epoch length in clock ticks (> 0).
    pub epoch: Duration,
    /// Slots of each hand-off link (a power of two, [`super::handoff::MIN_CAPACITY`] to
    /// [`super::handoff::MAX_CAPACITY`]): the most of the lane's buffers one auxiliary core
    /// holds at once.
    pub link_capacity: usize,
    /// Flows whose arrivals are counted one by one per epoch (the rest count as one pinned
    /// flow).
    pub tracked_flows: usize,
    /// Flows that may be bound to auxiliary cores at once (the follow table's size).
    pub follow_flows: usize,
}

/// The flow key NetBlaze places by: a hash of the 5-tuple. Two flows with the same key are
/// placed together, which keeps each one's order.
pub fn flow_key(flow: &parse::FlowKey) -> u64 {
    hash_key(0x6E62_6C7A, &flow.words())
}

/// A fixed-capacity map from flow key to a value, cleared in O(1) by a generation number,
/// remembering insertion order (this epoch's arrivals, this epoch's placement).
#[derive(Debug, Clone)]
pub(super) struct EpochMap<V> {
    /// (generation, index + 1 into `entries`), open addressing on the key.
    pub(super) slots: Vec<(u32, u32)>,
    pub(super) entries: Vec<(u64, V)>,
    pub(super) cap: usize,
    pub(super) generation: u32,
}

impl<V: Copy> EpochMap<V> {
    pub(super) fn with_capacity(cap: usize) -> Self {
        let n = cap.max(1).saturating_mul(2).next_power_of_two();
        Self { slots: vec![(0, 0); n], entries: Vec::with_capacity(cap), cap, generation: 1 }
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // A wrapped generation could match stale slots: clear them once.
            self.slots.iter_mut().for_each(|s| *s = (0, 0));
            self.generation = 1;
        }
    }

    /// The slot of `key`: `Ok(entry index)` if present, `Err(free slot)` if not.
    pub(super) fn probe(&self, key: u64) -> Result<usize, Option<usize>> {
        let mask = self.slots.len() - 1;
        let mut i = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & mask;
        for _ in 0..self.slots.len() {
            let Some(&(g, idx)) = self.slots.get(i) else { break };
            if g != self.generation || idx == 0 {
                return Err(Some(i));
            }
            if self.entries.get(idx as usize - 1).is_some_and(|e| e.0 == key) {
                return Ok(idx as usize - 1);
            }
            i = (i + 1) & mask;
        }
        Err(None)
    }

    pub(super) fn get(&self, key: u64) -> Option<V> {
        self.probe(key).ok().and_then(|i| self.entries.get(i)).map(|e| e.1)
    }

    /// The entry of `key`, inserted with `init` if absent and there is room.
    pub(super) fn entry(&mut self, key: u64, init: V) -> Option<&mut V> {
        match self.probe(key) {
            Ok(i) => self.entries.get_mut(i).map(|e| &mut e.1),
            Err(Some(slot)) if self.entries.len() < self.cap => {
                self.entries.push((key, init));
                if let Some(s) = self.slots.get_mut(slot) {
                    *s = (self.generation, self.entries.len() as u32);
                }
                self.entries.last_mut().map(|e| &mut e.1)
            }
            Err(_) => None,
        }
    }
}

/// What NetBlaze did on the lanes a worker served (plain counters, per worker).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NetBlazeCounters {
    /// Epochs ended (decisions taken).
    pub epochs: u64,
    /// Decisions whose predicted backlog was outside the frontier.
    pub outside: u64,
    /// Decisions in boost mode.
    pub boost: u64,
    /// Frames placed on auxiliary cores (handed over at once, or queued until the link has
    /// credit).
    pub handed: u64,
    /// Of those, frames of flows that followed an earlier move.
    pub followed: u64,
    /// Frames given back and put on a transmit batch.
    pub returned: u64,
    /// Frames given back dropped (by the auxiliary core's chain) and freed here.
    pub returned_dropped: u64,
    /// Flows placed on an auxiliary core that stayed here: no credit on the link, or the
    /// follow table was full.
    pub kept_full: u64,
    /// Auxiliary cores recruited / released (per lane's view).
    pub recruited: u64,
    /// See `recruited`.
    pub released: u64,
    /// SLO-risk events of the decisions.
    pub slo_risk: u64,
    /// Whales the decisions saw.
    pub whales: u64,
    /// Whale splits placed by the decisions (the whale's head runs here, its tail on a
    /// booster).
    pub splits: u64,
    /// Of the frames handed over, those whose chain head ran here (whale splits).
    pub heads: u64,
    /// Most frames one link had queued after a hand-off (its credit was used up): how far
    /// behind an auxiliary core fell (the maximum over lanes and workers).
    pub queued_max: u64,
    /// Frames found waiting in the lanes' receive rings at the ends of epochs (summed): the
    /// part of the backlog the decisions see as one pinned flow.
    pub ring: u64,
    /// Calls that found the lane's state held by someone else (a wiring fault: the frames
    /// then ran here, so this must stay 0).
    pub lane_busy: u64,
    /// Hand-offs that found their auxiliary core asleep on its doorbell and woke it.
    pub wakes: u64,
}

impl NetBlazeCounters {
    /// Adds `o` (summing workers).
    pub fn merge(&mut self, o: &NetBlazeCounters) {
        let f = |a: &mut u64, b: u64| *a = a.saturating_add(b);
        f(&mut self.epochs, o.epochs);
        f(&mut self.outside, o.outside);
        f(&mut self.boost, o.boost);
        f(&mut self.handed, o.handed);
        f(&mut self.followed, o.followed);
        f(&mut self.returned, o.returned);
        f(&mut self.returned_dropped, o.returned_dropped);
        f(&mut self.kept_full, o.kept_full);
        f(&mut self.recruited, o.recruited);
        f(&mut self.released, o.released);
        f(&mut self.slo_risk, o.slo_risk);
        f(&mut self.whales, o.whales);
        f(&mut self.splits, o.splits);
        f(&mut self.heads, o.heads);
        f(&mut self.lane_busy, o.lane_busy);
        f(&mut self.ring, o.ring);
        f(&mut self.wakes, o.wakes);
        self.queued_max = self.queued_max.max(o.queued_max);
    }

    /// Writes the counters as ` nb_key=value` pairs (docs/PROTOCOL.md).
    pub fn write(&self, w: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(
            w,
            " nb_epochs={} nb_outside={} nb_boost={} nb_handed={} nb_followed={} nb_returned={} \
             nb_returned_dropped={} nb_kept_full={} nb_recruited={} nb_released={} nb_slo_risk={} \
             nb_whales={} nb_splits={} nb_heads={} nb_queued_max={} nb_ring={} nb_lane_busy={} nb_wakes={}",
            self.epochs,
            self.outside,
            self.boost,
            self.handed,
            self.followed,
            self.returned,
            self.returned_dropped,
            self.kept_full,
            self.recruited,
            self.released,
            self.slo_risk,
            self.whales,
            self.splits,
            self.heads,
            self.queued_max,
            self.ring,
            self.lane_busy,
            self.wakes
        )
    }
}

/// One lane's NetBlaze state (module docs): touched only by the lane's holder.
#[derive(Debug)]
pub struct LaneState {
    pub(super) links: Vec<DedicatedEnd>,
    pub(super) aux: Vec<AuxCore>,
    /// Per link: frames handed over / reclaimed since creation (ring positions).
    pub(super) handed: Vec<u64>,
    pub(super) completed: Vec<u64>,
    /// `completed` at the start of this epoch (an auxiliary core that gave nothing back and
    /// holds nothing was idle).
    pub(super) completed_mark: Vec<u64>,
    pub(super) follow: FollowTable,
    pub(super) arrivals: EpochMap<u32>,
    /// Arrivals of flows beyond `tracked_flows` this epoch.
    pub(super) untracked: u32,
    /// Frames waiting in the lane's receive rings as this epoch ended (read before the poll
    /// that ends it; `Stage::ring_backlog`).
    pub(super) ring: u32,
    /// This epoch's placement: flow → (auxiliary core, split point; 0 = the whole chain).
    pub(super) placed: EpochMap<(AuxId, u8)>,
    pub(super) deadline: Option<Instant>,
    pub(super) epoch: Duration,
    pub(super) scratch: Vec<FlowBacklog>,
    /// Per link: queue places promised to this batch's whale frames (their head runs after
    /// the batch is classified).
    pub(super) reserved: Vec<usize>,
    /// Per link: frames placed on its auxiliary core, oldest first, not handed over yet
    /// (the link had no credit); bounded by the link's capacity plus one batch.
    pub(super) queued: Vec<VecDeque<(PacketBuf, u64, u8)>>,
    pub(super) queue_cap: usize,
    /// Per auxiliary core: its doorbell (shared by every lane; rung after a hand-off).
    pub(super) bells: Vec<Arc<Doorbell>>,
}

impl LaneState {
    /// Whether every buffer handed over from this lane has come back.
    pub fn all_reclaimed(&self) -> bool {
        self.links.iter().all(|l| l.outstanding() == 0) && self.queued.iter().all(VecDeque::is_empty)
    }

    /// Buffers handed over and not reclaimed yet, over every link.
    pub fn outstanding(&self) -> usize {
        self.links.iter().map(DedicatedEnd::outstanding).sum()
    }

    /// Buffers of the lane's pool that NetBlaze holds between polls: handed over and not
    /// reclaimed, or queued for a link without credit (what a lane's buffer accounting adds
    /// to its rings').
    pub fn held(&self) -> usize {
        self.outstanding() + self.queued.iter().map(VecDeque::len).sum::<usize>()
    }

    /// Auxiliary core `a`'s doorbell (the same for every lane): what the core sleeps on when
    /// it has been idle long, and what a hand-off to it rings ([`super::AuxWorker::with_bell`]).
    pub fn bell(&self, a: usize) -> Option<Arc<Doorbell>> {
        self.bells.get(a).cloned()
    }
}

/// Builds, for `lanes` lanes and `aux` auxiliary cores, each lane's state and each auxiliary
/// core's ends of its links (`ends[a][lane]`).
pub fn build(lanes: usize, aux: usize, cfg: LaneConfig) -> Result<(Vec<LaneState>, Vec<Vec<AuxEnd>>), HandoffError> {
    let mut states = Vec::with_capacity(lanes);
    let mut ends: Vec<Vec<AuxEnd>> = (0..aux).map(|_| Vec::with_capacity(lanes)).collect();
    let epoch = Duration(cfg.epoch.ticks().max(1));
    // A link's worth plus one received batch: a whole batch always fits behind a full link.
    let queue_cap = cfg.link_capacity.saturating_add(BATCH_SIZE);
    let bells: Vec<Arc<Doorbell>> = (0..aux).map(|_| Arc::new(Doorbell::new())).collect();
    for _ in 0..lanes {
        let mut links = Vec::with_capacity(aux);
        for e in ends.iter_mut() {
            let (d, a) = try_link(cfg.link_capacity)?;
            links.push(d);
            e.push(a);
        }
        states.push(LaneState {
            links,
            aux: vec![AuxCore::default(); aux],
            handed: vec![0; aux],
            completed: vec![0; aux],
            completed_mark: vec![0; aux],
            follow: FollowTable::with_capacity(cfg.follow_flows),
            arrivals: EpochMap::with_capacity(cfg.tracked_flows),
            untracked: 0,
            ring: 0,
            placed: EpochMap::with_capacity(cfg.tracked_flows),
            deadline: None,
            epoch,
            scratch: Vec::with_capacity(cfg.tracked_flows + PINNED_ENTRIES),
            reserved: vec![0; aux],
            queued: (0..aux).map(|_| VecDeque::with_capacity(queue_cap)).collect(),
            queue_cap,
            bells: bells.clone(),
        });
    }
    Ok((states, ends))
}

/// Entries of an epoch's backlog beyond the tracked flows: the untracked arrivals and the
/// frames still in the receive rings, each one pinned flow. The scratch vector is reserved
/// for `tracked_flows` + these, so a decision never reallocates (on the bare-metal heap a
/// failed allocation is a panic).
pub(super) const PINNED_ENTRIES: usize = 2;

/// The lanes' states, shared by every dedicated worker's [`super::NetBlazeStage`].
pub type SharedLanes = Arc<[Mutex<LaneState>]>;

/// The lanes' states of [`build`], ready to share.
pub fn share(states: Vec<LaneState>) -> SharedLanes {
    states.into_iter().map(Mutex::new).collect::<Vec<_>>().into()
}
