//! [`NetBlazeStage`]: the stage every worker runs, its chain wrapped with NetBlaze's
//! placement (the module docs of [`crate::offload`] tell what it does per batch, per poll
//! and per epoch).

use alloc::sync::Arc;
use alloc::vec::Vec;

use super::handoff::DedicatedEnd;
use super::lane::*;
use super::marks::{self, TailMark};
use crate::buf::{BATCH_SIZE, Batch, PacketBuf, Pool};
use crate::control::Commands;
use crate::drops::DropReason;
use crate::netblaze::core_mapper::{AuxId, CoreMapper, FlowBacklog, Placement};
use crate::netblaze::epoch::Backlog;
use crate::netblaze::follow::Follow;
use crate::netblaze::profile::Profile;
use crate::nf::Chain;
use crate::parse;
use crate::stage::{PORTS, Stage, StageCounters};
use crate::sync::doorbell::{WakeHook, no_wake};
use crate::time::Instant;

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
/// each frame still alive is marked for its tail (`marks::set_tail`; the head's destination MAC
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
            chain.admit(usize::from(h.port), pool, counters, &mut none, h.buf, Ok(h.parsed), now);
        }
        let these: &Vec<Head> = heads;
        chain.run_head(usize::from(k), pool, counters, now, |pool, b, ingress, to, dst| {
            let Some(h) = these.iter().find(|h| h.buf == b) else { return };
            if let (Some(d), Some(f)) = (dst, pool.frame_mut(b).get_mut(..6)) {
                f.copy_from_slice(&d);
            }
            // The interface it arrived on (a sub-interface for a frame whose tag the head took
            // off), so that the tail sees the frame as the head did.
            marks::set(pool, b, Some(ingress), Some(TailMark { from: k, port: to, dst_set: dst.is_some() }));
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
        self.chain.enter_lane(lane);
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
            let parsed = match crate::nf::parse_frame(pool, b, crate::parse::Depth::L4) {
                Ok(p) => p,
                Err(e) => {
                    // The chain drops it by reason, or takes it as a control frame.
                    self.chain.admit(port, pool, counters, &mut commands, b, Err(e), now);
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
                self.chain.admit(port, pool, counters, &mut commands, b, Ok(parsed), now);
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
                    self.chain.admit(port, pool, counters, &mut commands, b, Ok(parsed), now);
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
            marks::set_out(pool, b, Some(port as u8));
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
            let Some(p) = marks::out(pool, b) else { return false };
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
