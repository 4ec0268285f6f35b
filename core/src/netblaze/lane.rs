//! NetBlaze on a lane: the dedicated side of the core mapper in the forwarding loop
//! ([`LaneState`], [`NetBlazeStage`]) and the auxiliary cores' loop ([`AuxWorker`]).
//!
//! **Dedicated = a lane.** Metronome's workers roam between lanes, so the NetBlaze state of a
//! dedicated core lives beside the lane it serves ([`LaneState`]: one hand-off link per
//! auxiliary core, the follow table, this epoch's per-flow arrivals, the current placement,
//! the lane's view of the auxiliary cores) and is touched only by whoever holds the lane's
//! queue lock. [`NetBlazeStage`] wraps a worker's [`Chain`]; the worker tells it which lane
//! its round won ([`Stage::enter_lane`]), and it locks that lane's state (uncontended: only
//! the lane's holder ever does) for each call.
//!
//! **Per received batch** ([`NetBlazeStage::process`]): each frame that parses is keyed by its
//! flow (a hash of the 5-tuple); its arrival is counted for this epoch; a flow the follow table
//! still binds to auxiliary core `a` (its earlier packets there are not all *completed*,
//! [`super::follow`]) goes to `a`, else a flow this epoch's decision placed on `a` goes there
//! (and is bound in the follow table), else it runs through the chain here (which takes the
//! parse made here: one parse per frame). A frame for `a` carries its ingress port in the
//! buffer's metadata ([`Pool::set_out`]) and joins the link's queue, which is handed over as
//! far as the link's credit allows (recording each flow's last ring position; a flow with a
//! frame still queued stays bound without one). What may not go: a newly placed flow that
//! finds the queue (a link's capacity plus a batch) or the follow table full stays here
//! (counted `kept_full`); a packet of a *bound* flow may not run here (it would overtake its
//! flow's earlier packets), so with the queue full it is dropped and counted
//! ([`DropReason::HandoffFull`]). Frames that do not parse stay here: the chain drops them by
//! reason or takes them as control frames.
//!
//! **Per poll** ([`NetBlazeStage::idle`]): what the auxiliary cores gave back is reclaimed in
//! ring order ([`DedicatedEnd::reclaim_upto`]), at most as many as the transmit batches have
//! room for, so a frame the auxiliary core marked with a port goes onto that port's batch and
//! leaves with this poll's transmit burst; the rest (dropped there) returns to the pool. A
//! link's **completed** count is what was reclaimed from it: the auxiliary core gives a
//! received burst back whole and in the order it received it, so the first `completed` frames
//! handed over are all on a transmit batch or freed — the follow table's rule (a flow is local
//! again once its last handed position is completed) then never lets a later packet leave
//! first.
//!
//! **Per epoch** (at the first call after the deadline): the auxiliary cores' idle epochs are
//! counted ([`AuxCore::end_epoch`]; 10 idle epochs release one), then
//! [`CoreMapper::decide`] runs over this epoch's per-flow arrivals — the backlog NetBlaze
//! decides on is *predicted* from them, because Metronome's loop never holds packets in
//! per-flow queues (the ring holds them, unparsed): flows still bound by the follow table are
//! pinned, untracked arrivals (more flows than [`LaneConfig::tracked_flows`]) form one pinned
//! flow. The flows it hands to auxiliary cores, whole or split, make the placement of the
//! next epoch.
//!
//! **Whale split** (placement with split point `k` > 0): the frame's queue place is reserved
//! while the batch is classified; then the chain's head (NFs `0..k`, [`Chain`]'s `run_head`)
//! runs here over the batch's frames of that `k`, and each frame still alive is marked for its
//! tail ([`Pool::set_tail`]: the tail's first NF, the head's verdict port, whether the head
//! chose the destination MAC, then written into the frame) and queued like a whole flow's, its
//! flow bound with `split_k = k`; what the head drops is freed and counted here.
//!
//! **The auxiliary side** ([`AuxWorker`]): per lane, the [`AuxEnd`] and a view of the lane's
//! pool ([`Pool::view`]); per poll and link, one burst received, split by ingress port (and
//! tail marks: one tail pass, NFs `k..`, per split point), run through the worker's own chain
//! on the view, each frame marked with its output port (or none: dropped), and given back in
//! the order received, in one push.
//!
//! Nothing here allocates after construction, nothing panics on any input.

use alloc::collections::VecDeque;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use spin::Mutex;

use super::core_mapper::{AuxCore, AuxId, CoreMapper, FlowBacklog, Placement};
use super::epoch::Backlog;
use super::follow::{Follow, FollowTable};
use super::handoff::{AuxEnd, DedicatedEnd, HandoffError, try_link};
use super::profile::Profile;
use crate::buf::{BATCH_SIZE, Batch, PacketBuf, Pool, TailMark};
use crate::control::Commands;
use crate::drops::DropReason;
use crate::nf::Chain;
use crate::nf::acl::flow_words;
use crate::parse;
use crate::pna::exact::hash_key;
use crate::stage::{PORTS, Stage, StageCounters};
use crate::sync::Doorbell;
use crate::sync::doorbell::{WakeHook, no_wake};
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
    hash_key(0x6E62_6C7A, &flow_words(flow))
}

/// A fixed-capacity map from flow key to a value, cleared in O(1) by a generation number,
/// remembering insertion order (this epoch's arrivals, this epoch's placement).
#[derive(Debug, Clone)]
struct EpochMap<V> {
    /// (generation, index + 1 into `entries`), open addressing on the key.
    slots: Vec<(u32, u32)>,
    entries: Vec<(u64, V)>,
    cap: usize,
    generation: u32,
}

impl<V: Copy> EpochMap<V> {
    fn with_capacity(cap: usize) -> Self {
        let n = cap.max(1).saturating_mul(2).next_power_of_two();
        Self { slots: vec![(0, 0); n], entries: Vec::with_capacity(cap), cap, generation: 1 }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            // A wrapped generation could match stale slots: clear them once.
            self.slots.iter_mut().for_each(|s| *s = (0, 0));
            self.generation = 1;
        }
    }

    /// The slot of `key`: `Ok(entry index)` if present, `Err(free slot)` if not.
    fn probe(&self, key: u64) -> Result<usize, Option<usize>> {
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

    fn get(&self, key: u64) -> Option<V> {
        self.probe(key).ok().and_then(|i| self.entries.get(i)).map(|e| e.1)
    }

    /// The entry of `key`, inserted with `init` if absent and there is room.
    fn entry(&mut self, key: u64, init: V) -> Option<&mut V> {
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
    links: Vec<DedicatedEnd>,
    aux: Vec<AuxCore>,
    /// Per link: frames handed over / reclaimed since creation (ring positions).
    handed: Vec<u64>,
    completed: Vec<u64>,
    /// `completed` at the start of this epoch (an auxiliary core that gave nothing back and
    /// holds nothing was idle).
    completed_mark: Vec<u64>,
    follow: FollowTable,
    arrivals: EpochMap<u32>,
    /// Arrivals of flows beyond `tracked_flows` this epoch.
    untracked: u32,
    /// Frames waiting in the lane's receive rings as this epoch ended (read before the poll
    /// that ends it; `Stage::ring_backlog`).
    ring: u32,
    /// This epoch's placement: flow → (auxiliary core, split point; 0 = the whole chain).
    placed: EpochMap<(AuxId, u8)>,
    deadline: Option<Instant>,
    epoch: Duration,
    scratch: Vec<FlowBacklog>,
    /// Per link: queue places promised to this batch's whale frames (their head runs after
    /// the batch is classified).
    reserved: Vec<usize>,
    /// Per link: frames placed on its auxiliary core, oldest first, not handed over yet
    /// (the link had no credit); bounded by the link's capacity plus one batch.
    queued: Vec<VecDeque<(PacketBuf, u64, u8)>>,
    queue_cap: usize,
    /// Per auxiliary core: its doorbell (shared by every lane; rung after a hand-off).
    bells: Vec<Arc<Doorbell>>,
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
    /// it has been idle long, and what a hand-off to it rings ([`AuxWorker::with_bell`]).
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
const PINNED_ENTRIES: usize = 2;

/// The lanes' states, shared by every dedicated worker's [`NetBlazeStage`].
pub type SharedLanes = Arc<[Mutex<LaneState>]>;

/// The lanes' states of [`build`], ready to share.
pub fn share(states: Vec<LaneState>) -> SharedLanes {
    states.into_iter().map(Mutex::new).collect::<Vec<_>>().into()
}

/// A dedicated worker's stage: its chain, wrapped with NetBlaze's placement (module docs),
/// or the chain alone ([`NetBlazeStage::off`]: no auxiliary cores).
pub struct NetBlazeStage {
    chain: Chain,
    nb: Option<Dedicated>,
    counters: NetBlazeCounters,
    /// This batch's whale frames, for the head passes (allocated once, a batch at most).
    heads: Vec<Head>,
    /// Flows of `heads` the follow table does not hold yet (each needs a slot).
    new_head_flows: usize,
    /// The current lane's epoch deadline as last seen (for `Stage::backlog_due`).
    due: Option<Instant>,
    /// How a hand-off wakes an auxiliary core asleep on its doorbell (the platform's).
    wake: WakeHook,
}

/// A whale's frame waiting for its head pass.
#[derive(Debug, Clone, Copy)]
struct Head {
    buf: PacketBuf,
    parsed: parse::Parsed,
    aux: AuxId,
    k: u8,
    key: u64,
    port: u8,
}

/// What a dedicated worker decides with.
struct Dedicated {
    lanes: SharedLanes,
    lane: usize,
    mapper: CoreMapper,
    profile: Arc<Profile>,
}

impl core::fmt::Debug for NetBlazeStage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("NetBlazeStage")
            .field("on", &self.nb.is_some())
            .field("lane", &self.nb.as_ref().map(|d| d.lane))
            .field("counters", &self.counters)
            .finish()
    }
}

impl NetBlazeStage {
    /// `chain` wrapped, over the lanes' states `lanes`, deciding with `mapper` and `profile`.
    pub fn new(chain: Chain, lanes: SharedLanes, mapper: CoreMapper, profile: Arc<Profile>) -> Self {
        let nb = Some(Dedicated { lanes, lane: 0, mapper, profile });
        Self {
            chain,
            nb,
            counters: NetBlazeCounters::default(),
            heads: Vec::with_capacity(BATCH_SIZE),
            new_head_flows: 0,
            due: None,
            wake: no_wake,
        }
    }

    /// The same, waking sleeping auxiliary cores with `wake` (the platform's
    /// [`WakeHook`]: a futex wake for threads; [`no_wake`] where the doorbell's store
    /// itself wakes the core, or where auxiliary cores never sleep on it).
    #[must_use]
    pub fn with_wake(mut self, wake: WakeHook) -> Self {
        self.wake = wake;
        self
    }

    /// `chain` alone: every frame runs here (one branch per batch over the bare chain).
    pub fn off(chain: Chain) -> Self {
        Self {
            chain,
            nb: None,
            counters: NetBlazeCounters::default(),
            heads: Vec::new(),
            new_head_flows: 0,
            due: None,
            wake: no_wake,
        }
    }

    /// Whether NetBlaze places flows (built with [`NetBlazeStage::new`]).
    pub fn is_on(&self) -> bool {
        self.nb.is_some()
    }

    /// The chain (its NF counters, its meter).
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// What NetBlaze did on the lanes this worker served.
    pub fn counters(&self) -> &NetBlazeCounters {
        &self.counters
    }
}

/// The head passes of this batch's whale frames, one per split point: NFs `0..k` here, then
/// each frame still alive is marked for its tail (`Pool::set_tail`; the head's destination MAC
/// written into the frame) and queued for its booster, its flow bound in the follow table;
/// what the head drops is freed and counted here.
fn run_heads(
    chain: &mut Chain,
    heads: &mut Vec<Head>,
    nb: &mut NetBlazeCounters,
    st: &mut LaneState,
    pool: &mut Pool<'_>,
    counters: &mut StageCounters,
    now: Instant,
) {
    while let Some(k) = heads.first().map(|h| h.k) {
        chain.begin();
        let mut none = Commands::default();
        for h in heads.iter().filter(|h| h.k == k) {
            chain.admit(usize::from(h.port), pool, counters, &mut none, h.buf, Ok(h.parsed));
        }
        let these: &Vec<Head> = heads;
        chain.run_head(usize::from(k), pool, counters, now, |pool, b, to, dst| {
            let Some(h) = these.iter().find(|h| h.buf == b) else { return };
            if let (Some(d), Some(f)) = (dst, pool.frame_mut(b).get_mut(..6)) {
                f.copy_from_slice(&d);
            }
            pool.set_out(b, Some(h.port));
            pool.set_tail(b, Some(TailMark { from: k, port: to, dst_set: dst.is_some() }));
            // Within the place reserved for it when the batch was classified.
            if let Some(q) = st.queued.get_mut(usize::from(h.aux)) {
                q.push_back((b, h.key, k));
            }
            let _ = st.follow.record(h.key, Follow { aux: h.aux, split_k: k }, u64::MAX);
            nb.handed += 1;
            nb.heads += 1;
        });
        heads.retain(|h| h.k != k);
    }
}

/// Ends the epoch if its deadline has passed (module docs).
fn tick(d: &Dedicated, counters: &mut NetBlazeCounters, st: &mut LaneState, now: Instant) {
    let Some(deadline) = st.deadline else {
        st.deadline = Some(now.saturating_add(st.epoch));
        return;
    };
    if now < deadline {
        return;
    }
    // Epochs that passed (a lane nobody polled for a while): idle ones count for the
    // auxiliary cores, at most as many as release one.
    let params = *d.mapper.params();
    let idle_cap = u64::from(params.config().aux_idle_epochs);
    let passed = (now.saturating_since(deadline).ticks() / st.epoch.ticks()).saturating_add(1).min(idle_cap);
    st.deadline = Some(now.saturating_add(st.epoch));
    for (a, core) in st.aux.iter_mut().enumerate() {
        let done = st.completed.get(a).copied().unwrap_or(0);
        let mark = st.completed_mark.get_mut(a);
        let outstanding = st.links.get(a).map_or(0, DedicatedEnd::outstanding);
        let busy = mark.as_ref().is_some_and(|m| **m != done) || outstanding > 0;
        if let Some(m) = mark {
            *m = done;
        }
        let queued = u32::try_from(outstanding).unwrap_or(u32::MAX);
        core.observe(Backlog::new(u32::from(queued > 0), queued), 0);
        for i in 0..passed {
            if core.end_epoch(&params, busy && i == 0) {
                counters.released += 1;
                break;
            }
        }
    }
    // The predicted backlog: this epoch's arrivals per flow (module docs).
    st.scratch.clear();
    for &(key, packets) in &st.arrivals.entries {
        let mut f = FlowBacklog::new(packets);
        f.pinned = st.follow.contains(key);
        st.scratch.push(f);
    }
    // Untracked arrivals, and the frames still in the rings (their flows unknown until
    // parsed): local load that cannot move ([`PINNED_ENTRIES`] of them at most).
    for pinned in [st.untracked, st.ring] {
        if pinned > 0 {
            let mut f = FlowBacklog::new(pinned);
            f.pinned = true;
            st.scratch.push(f);
        }
    }
    counters.ring = counters.ring.saturating_add(u64::from(st.ring));
    let decision = d.mapper.decide(&d.profile, &mut st.scratch, &mut st.aux);
    counters.epochs += 1;
    counters.outside += u64::from(!decision.inside);
    counters.boost += u64::from(decision.boost);
    counters.recruited += u64::from(decision.recruited);
    counters.slo_risk += u64::from(decision.slo_risk);
    counters.whales += u64::from(decision.whales);
    st.placed.clear();
    for (&(key, _), f) in st.arrivals.entries.iter().zip(st.scratch.iter()) {
        match f.place {
            Placement::Local => {}
            Placement::Aux(a) => {
                let _ = st.placed.entry(key, (a, 0));
            }
            Placement::Split { k, booster } => {
                counters.splits += 1;
                let _ = st.placed.entry(key, (booster, k));
            }
        }
    }
    st.arrivals.clear();
    st.untracked = 0;
    st.ring = 0;
}

impl Stage for NetBlazeStage {
    fn enter_lane(&mut self, lane: usize) {
        if let Some(d) = &mut self.nb {
            d.lane = lane;
            self.due = d.lanes.get(lane).and_then(|l| l.try_lock()).and_then(|st| st.deadline);
        }
    }

    fn backlog_due(&self, now: Instant) -> bool {
        self.due.is_some_and(|d| now >= d)
    }

    fn ring_backlog(&mut self, frames: usize) {
        if let Some(mut st) = self.nb.as_ref().and_then(|d| d.lanes.get(d.lane)).and_then(|l| l.try_lock()) {
            st.ring = u32::try_from(frames).unwrap_or(u32::MAX);
        }
    }

    fn process(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        input: &mut Batch,
        out: &mut [Batch],
        counters: &mut StageCounters,
        now: Instant,
    ) -> Commands {
        let Some(d) = &self.nb else {
            return self.chain.process(port, pool, input, out, counters, now);
        };
        let Some(mut st) = d.lanes.get(d.lane).and_then(|l| l.try_lock()) else {
            self.counters.lane_busy += 1;
            return self.chain.process(port, pool, input, out, counters, now);
        };
        let st = &mut *st;
        tick(d, &mut self.counters, st, now);
        self.due = st.deadline;
        st.reserved.iter_mut().for_each(|r| *r = 0);
        self.heads.clear();
        self.new_head_flows = 0;
        let mut commands = Commands::default();
        // Frames that stay here go straight into the chain's batch with the parse made here.
        self.chain.begin();
        for &b in input.as_slice() {
            let parsed = match parse::parse(pool.frame(b)) {
                Ok(p) => p,
                Err(e) => {
                    // The chain drops it by reason, or takes it as a control frame.
                    self.chain.admit(port, pool, counters, &mut commands, b, Err(e));
                    continue;
                }
            };
            let key = flow_key(&parsed.flow);
            match st.arrivals.entry(key, 0) {
                Some(n) => *n = n.saturating_add(1),
                None => st.untracked = st.untracked.saturating_add(1),
            }
            let completed = &st.completed;
            let following = st.follow.lookup(key, |a| completed.get(usize::from(a)).copied().unwrap_or(u64::MAX));
            let target = following.map(|f| (f.aux, f.split_k)).or_else(|| st.placed.get(key));
            let Some(((a, k), queue)) = target.and_then(|t| Some((t, st.queued.get_mut(usize::from(t.0))?))) else {
                self.chain.admit(port, pool, counters, &mut commands, b, Ok(parsed));
                continue;
            };
            let ai = usize::from(a);
            let reserved = st.reserved.get(ai).copied().unwrap_or(0);
            // A flow with an earlier frame of this batch in a head pass is bound like one
            // the follow table holds (its binding is recorded when that frame is queued).
            let bound = following.is_some() || (k > 0 && self.heads.iter().any(|h| h.key == key));
            let new_binds = usize::from(!bound) + self.new_head_flows;
            let room = queue.len() + reserved < st.queue_cap && (bound || st.follow.room() >= new_binds);
            if !room {
                if bound {
                    // It may not run here before its flow's earlier packets: dropped, counted.
                    let _ = pool.free(b);
                    counters.count_drop(DropReason::HandoffFull, 1);
                } else {
                    self.counters.kept_full += 1;
                    self.chain.admit(port, pool, counters, &mut commands, b, Ok(parsed));
                }
                continue;
            }
            self.counters.followed += u64::from(following.is_some());
            if k > 0 {
                // A whale's frame: its head runs here after this loop, then it is queued.
                if let Some(r) = st.reserved.get_mut(ai) {
                    *r += 1;
                }
                self.new_head_flows += usize::from(!bound);
                self.heads.push(Head { buf: b, parsed, aux: a, k, key, port: port as u8 });
                continue;
            }
            pool.set_out(b, Some(port as u8));
            queue.push_back((b, key, 0));
            // Bound to `a` until handed over and completed (`flush` records the position).
            let _ = st.follow.record(key, Follow { aux: a, split_k: 0 }, u64::MAX);
            if let Some(m) = self.chain.meter_mut() {
                m.record(&parsed.flow, now);
            }
            self.counters.handed += 1;
        }
        input.clear();
        self.chain.run_admitted(pool, out, counters, now);
        run_heads(&mut self.chain, &mut self.heads, &mut self.counters, st, pool, counters, now);
        flush(st, &mut self.counters, self.wake);
        commands
    }

    fn idle(&mut self, pool: &mut Pool<'_>, out: &mut [Batch], counters: &mut StageCounters, now: Instant) {
        if let Some(d) = &self.nb {
            if let Some(mut st) = d.lanes.get(d.lane).and_then(|l| l.try_lock()) {
                let st = &mut *st;
                reclaim(st, pool, out, counters, &mut self.counters);
                flush(st, &mut self.counters, self.wake);
                tick(d, &mut self.counters, st, now);
                self.due = st.deadline;
            } else {
                self.counters.lane_busy += 1;
            }
        }
        self.chain.idle(pool, out, counters, now);
    }
}

/// Hands each link's queued frames over, oldest first, as far as its credit allows, and
/// records in the follow table the ring position of each flow's last frame handed; a flow
/// with a frame still queued stays bound without a position (module docs). A link that took
/// frames rings its auxiliary core's doorbell (it may be asleep on it).
fn flush(st: &mut LaneState, nb: &mut NetBlazeCounters, wake: WakeHook) {
    for (a, ((link, queue), handed)) in
        st.links.iter_mut().zip(st.queued.iter_mut()).zip(st.handed.iter_mut()).enumerate()
    {
        let before = *handed;
        let Ok(aux) = AuxId::try_from(a) else { continue };
        let mut bufs = [PacketBuf::from_raw(0); BATCH_SIZE];
        while !queue.is_empty() {
            let credit = link.capacity().saturating_sub(link.outstanding());
            let n = queue.len().min(credit).min(BATCH_SIZE);
            if n == 0 {
                break;
            }
            for (slot, &(b, _, _)) in bufs.iter_mut().zip(queue.iter()) {
                *slot = b;
            }
            // Takes all `n`: they are within the credit.
            let took = link.hand_off(bufs.get(..n).unwrap_or(&[]));
            for (i, (_, key, split_k)) in queue.drain(..took).enumerate() {
                let _ = st.follow.record(key, Follow { aux, split_k }, *handed + i as u64 + 1);
            }
            *handed += took as u64;
            if took < n {
                break;
            }
        }
        if *handed != before && st.bells.get(a).is_some_and(|b| b.ring(wake)) {
            nb.wakes += 1;
        }
        for &(_, key, split_k) in queue.iter() {
            let _ = st.follow.record(key, Follow { aux, split_k }, u64::MAX);
        }
        nb.queued_max = nb.queued_max.max(queue.len() as u64);
    }
}

/// Takes back what the auxiliary cores gave back, in ring order, as far as the transmit
/// batches have room: frames marked with a port onto that port's batch, the rest (dropped
/// there) into the pool (module docs).
fn reclaim(
    st: &mut LaneState,
    pool: &mut Pool<'_>,
    out: &mut [Batch],
    counters: &mut StageCounters,
    nb: &mut NetBlazeCounters,
) {
    for (link, completed) in st.links.iter_mut().zip(st.completed.iter_mut()) {
        if link.outstanding() == 0 {
            continue;
        }
        let room = out.iter().take(PORTS).map(Batch::room).min().unwrap_or(0);
        if room == 0 {
            break;
        }
        let mut lost = 0u64;
        let r = link.reclaim_upto(pool, room, |pool, b| {
            // Marked with a port by the auxiliary core: onto this poll's transmit batch (room
            // was checked); unmarked (dropped there): freed.
            let Some(p) = pool.out(b) else { return false };
            match out.get_mut(usize::from(p)).map(|o| o.push(b)) {
                Some(Ok(())) => true,
                _ => {
                    lost += 1;
                    false
                }
            }
        });
        counters.count_drop(DropReason::TxFull, lost);
        *completed += (r.routed + r.freed + r.refused) as u64;
        nb.returned += r.routed as u64;
        nb.returned_dropped += (r.freed as u64).saturating_sub(lost);
    }
}

/// What an auxiliary core's loop did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AuxStats {
    /// Frames received from the lanes and given back.
    pub frames: u64,
    /// Polls ([`AuxWorker::poll_once`]) and those that received anything.
    pub polls: u64,
    /// See `polls`.
    pub busy_polls: u64,
}

/// One link of an auxiliary core: its end, the view of the lane's pool, and what it could
/// not give back yet (never anything, by the link's credit rule; kept rather than lost).
struct AuxLink<'m> {
    end: AuxEnd,
    view: Pool<'m>,
    unreturned: Batch,
}

/// An auxiliary core's loop (module docs): its chain over the frames the lanes hand it.
pub struct AuxWorker<'m> {
    links: Vec<AuxLink<'m>>,
    chain: Chain,
    counters: StageCounters,
    stats: AuxStats,
    by_port: [Batch; PORTS],
    /// This burst's whale frames: (buffer, tail mark, ingress port).
    tails: Vec<(PacketBuf, TailMark, usize)>,
    out: [Batch; PORTS],
    scratch: Batch,
    /// What it sleeps on when idle long ([`LaneState::bell`]); `None`: it never does.
    bell: Option<Arc<Doorbell>>,
}

impl core::fmt::Debug for AuxWorker<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AuxWorker").field("links", &self.links.len()).field("stats", &self.stats).finish()
    }
}

impl AuxWorker<'static> {
    /// [`AuxWorker::new`] over views made by [`Pool::aux_views`] (lanes whose pools live as
    /// long as the program).
    pub fn with_views(ends: Vec<AuxEnd>, views: Vec<crate::sync::AuxView>, chain: Chain) -> Self {
        AuxWorker::new(ends, views.into_iter().map(crate::sync::AuxView::into_pool).collect(), chain)
    }
}

impl<'m> AuxWorker<'m> {
    /// An auxiliary core over `ends[k]` and `views[k]` (lane `k`'s end of the link to this
    /// core and a [`Pool::view`] of lane `k`'s pool), running `chain`.
    pub fn new(ends: Vec<AuxEnd>, views: Vec<Pool<'m>>, chain: Chain) -> Self {
        let links = ends.into_iter().zip(views).map(|(end, view)| AuxLink { end, view, unreturned: Batch::new() });
        Self {
            links: links.collect(),
            chain,
            counters: StageCounters::default(),
            stats: AuxStats::default(),
            by_port: [Batch::new(), Batch::new()],
            tails: Vec::with_capacity(BATCH_SIZE),
            out: [Batch::new(), Batch::new()],
            scratch: Batch::new(),
            bell: None,
        }
    }

    /// One burst from every link: processed and given back (module docs). Returns the
    /// frames processed.
    pub fn poll_once(&mut self, now: Instant) -> usize {
        let mut total = 0;
        for link in self.links.iter_mut() {
            if !link.unreturned.is_empty() {
                link.end.give_back_batch(&mut link.unreturned);
                if !link.unreturned.is_empty() {
                    continue;
                }
            }
            let got = &mut link.unreturned;
            let n = link.end.receive(got);
            if n == 0 {
                continue;
            }
            total += n;
            self.tails.clear();
            for &b in got.as_slice() {
                let p = link.view.out(b).map(usize::from).filter(|&p| p < PORTS).unwrap_or(0);
                if let Some(mark) = link.view.tail(b) {
                    // A whale's frame whose head ran on its lane.
                    self.tails.push((b, mark, p));
                } else if let Some(batch) = self.by_port.get_mut(p) {
                    let _ = batch.push(b);
                }
            }
            for (p, batch) in self.by_port.iter_mut().enumerate() {
                if !batch.is_empty() {
                    // Control frames never come here (they do not parse): no commands.
                    let _ = self.chain.process(p, &mut link.view, batch, &mut self.out, &mut self.counters, now);
                }
            }
            // The tails, one pass per split point.
            while let Some(from) = self.tails.first().map(|t| t.1.from) {
                self.chain.begin();
                for &(b, mark, p) in self.tails.iter().filter(|t| t.1.from == from) {
                    self.chain.admit_tail(p, &mut link.view, &mut self.counters, b, mark);
                }
                self.chain.run_tail(usize::from(from), &mut link.view, &mut self.out, &mut self.counters, now);
                self.tails.retain(|t| t.1.from != from);
            }
            // Where each frame goes: a port, or nowhere (the chain dropped it; the view kept it
            // aside, and it goes back with the rest, in the order received).
            for &b in got.as_slice() {
                link.view.set_out(b, None);
            }
            for (p, batch) in self.out.iter_mut().enumerate() {
                for &b in batch.as_slice() {
                    link.view.set_out(b, Some(p as u8));
                }
                batch.clear();
            }
            while link.view.take_released(&mut self.scratch) > 0 {
                self.scratch.clear();
            }
            link.end.give_back_batch(got);
        }
        self.stats.polls += 1;
        self.stats.busy_polls += u64::from(total > 0);
        self.stats.frames += total as u64;
        total
    }

    /// The same, with its doorbell ([`LaneState::bell`]): the lanes ring it after each
    /// hand-off, so the core may sleep on it ([`crate::time::Sleeper::sleep_until_rung`]).
    #[must_use]
    pub fn with_bell(mut self, bell: Arc<Doorbell>) -> Self {
        self.bell = Some(bell);
        self
    }

    /// Its doorbell, if it has one.
    pub fn bell(&self) -> Option<&Doorbell> {
        self.bell.as_deref()
    }

    /// Frames waiting in the hand-off rings (0: nothing to do; a lower bound).
    pub fn pending(&self) -> usize {
        self.links.iter().map(|l| l.end.pending()).sum()
    }

    /// Frames received and not given back yet.
    pub fn held(&self) -> usize {
        self.links.iter().map(|l| l.end.held()).sum()
    }

    /// Where a hand-off writes, when this core serves a single lane (a sleeper that watches
    /// memory wakes on it); `None` with several.
    pub fn wake_address(&self) -> Option<crate::nic::WakeAddr> {
        match self.links.as_slice() {
            [one] => Some(one.end.wake_address()),
            _ => None,
        }
    }

    /// The chain's drop counters (published as a worker's: conservation sums them).
    pub fn counters(&self) -> &StageCounters {
        &self.counters
    }

    /// The chain (its NF counters).
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    /// The loop's counters.
    pub fn stats(&self) -> &AuxStats {
        &self.stats
    }
}
