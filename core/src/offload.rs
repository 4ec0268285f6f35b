//! NetBlaze's runtime: what moves packets between cores, beside [`crate::netblaze`], which
//! keeps the decisions (the core mapper, the follow rule, the profile, the server mapper).
//!
//! - [`lane`]: a lane's NetBlaze state ([`LaneState`]: links, follow table, this epoch's
//!   arrivals, the placement) and its counters; [`lane::build`] makes every lane's state and
//!   the auxiliary cores' ends.
//! - [`stage`]: [`NetBlazeStage`], the stage every worker runs: the dedicated side of the core
//!   mapper in the forwarding loop, wrapping the worker's [`Chain`](crate::nf::Chain).
//! - [`aux`]: [`AuxWorker`], an auxiliary core's loop.
//! - [`handoff`]: the SPSC hand-off ring of buffer handles between a dedicated and an
//!   auxiliary core ([`handoff::try_ring`]) and the return path that brings every buffer back
//!   to its lane's pool ([`handoff::try_link`]).
//! - [`marks`]: what a handed-off buffer carries in its metadata (the pool's opaque bytes):
//!   its output port, and the tail mark of a split chain.
//!
//! The chain runs in phases here (a batch admitted, its head, its tail): the contract is
//! [`Chain`](crate::nf::Chain)'s "Phases" section.
//!
//! **Dedicated = a lane.** Metronome's workers roam between lanes, so the NetBlaze state of a
//! dedicated core lives beside the lane it serves ([`LaneState`]: one hand-off link per
//! auxiliary core, the follow table, this epoch's per-flow arrivals, the current placement,
//! the lane's view of the auxiliary cores) and is touched only by whoever holds the lane's
//! queue lock. [`NetBlazeStage`] wraps a worker's [`Chain`](crate::nf::Chain); the worker tells it which lane
//! its round won ([`Stage::enter_lane`](crate::stage::Stage::enter_lane); also before
//! `Worker::drain_lane` drains a lane for an RSS move), and it locks that lane's state (uncontended: only
//! the lane's holder ever does) for each call.
//!
//! **Per received batch** ([`NetBlazeStage`]'s `process`): each frame that parses is keyed by its
//! flow (a hash of the 5-tuple); its arrival is counted for this epoch; a flow the follow table
//! still binds to auxiliary core `a` (its earlier packets there are not all *completed*,
//! [`crate::netblaze::follow`]) goes to `a`, else a flow this epoch's decision placed on `a` goes there
//! (and is bound in the follow table), else it runs through the chain here (which takes the
//! parse made here: one parse per frame). A frame for `a` carries its ingress port in the
//! buffer's metadata ([`marks::set_out`]) and joins the link's queue, which is handed over as
//! far as the link's credit allows (recording each flow's last ring position; a flow with a
//! frame still queued stays bound without one). What may not go: a newly placed flow that
//! finds the queue (a link's capacity plus a batch) or the follow table full stays here
//! (counted `kept_full`); a packet of a *bound* flow may not run here (it would overtake its
//! flow's earlier packets), so with the queue full it is dropped and counted
//! ([`DropReason::HandoffFull`](crate::drops::DropReason::HandoffFull)). Frames that do not parse stay here: the chain drops them by
//! reason or takes them as control frames.
//!
//! **Per poll** ([`NetBlazeStage`]'s `idle`): what the auxiliary cores gave back is reclaimed in
//! ring order ([`handoff::DedicatedEnd::reclaim_upto`]), at most as many as the transmit batches have
//! room for, so a frame the auxiliary core marked with a port goes onto that port's batch and
//! leaves with this poll's transmit burst; the rest (dropped there) returns to the pool. A
//! link's **completed** count is what was reclaimed from it: the auxiliary core gives a
//! received burst back whole and in the order it received it, so the first `completed` frames
//! handed over are all on a transmit batch or freed — the follow table's rule (a flow is local
//! again once its last handed position is completed) then never lets a later packet leave
//! first.
//!
//! **Per epoch** (at the first call after the deadline): the auxiliary cores' idle epochs are
//! counted ([`AuxCore::end_epoch`](crate::netblaze::AuxCore::end_epoch); 10 idle epochs release one), then
//! [`CoreMapper::decide`](crate::netblaze::CoreMapper::decide) runs over this epoch's per-flow arrivals — the backlog NetBlaze
//! decides on is *predicted* from them, because Metronome's loop never holds packets in
//! per-flow queues (the ring holds them, unparsed): flows still bound by the follow table are
//! pinned, untracked arrivals (more flows than [`LaneConfig::tracked_flows`]) form one pinned
//! flow. The flows it hands to auxiliary cores, whole or split, make the placement of the
//! next epoch.
//!
//! **Whale split** (placement with split point `k` > 0): the frame's queue place is reserved
//! while the batch is classified; then the chain's head (NFs `0..k`, [`Chain::run_head`](crate::nf::Chain::run_head))
//! runs here over the batch's frames of that `k`, and each frame still alive is marked for its
//! tail ([`marks::set_tail`]: the tail's first NF, the head's verdict port, whether the head
//! chose the destination MAC, then written into the frame) and queued like a whole flow's, its
//! flow bound with `split_k = k`; what the head drops is freed and counted here.
//!
//! **The auxiliary side** ([`AuxWorker`]): per lane, the [`handoff::AuxEnd`] and a view of the lane's
//! pool ([`Pool::view`](crate::buf::Pool::view)); per poll and link, one burst received, split by ingress port (and
//! tail marks: one tail pass, NFs `k..`, per split point), run through the worker's own chain
//! on the view, each frame marked with its output port (or none: dropped), and given back in
//! the order received, in one push.
//!
//! Nothing here allocates after construction, nothing panics on any input.
//!
//! # In the forwarding run
//!
//! The firmware's run (`firmware/src/forward/`) turns it on with `aux=N` (and a profile in
//! the chain module): the last `N` workers serve no lane and run [`AuxWorker`]s; Metronome
//! shares the lanes among the others (the *dedicated* workers) alone. Without `aux`,
//! `NetBlazeStage::off(chain)` is the chain plus one branch per batch. The lane state's
//! lock is uncontended by construction: a failed `try_lock` would be counted `nb_lane_busy`
//! and must stay 0.
//!
//! **The ring backlog.** The poll that ends an epoch first asks its queues how many frames
//! wait ([`Stage::backlog_due`](crate::stage::Stage::backlog_due) →
//! [`RxQueue::pending`](crate::nic::RxQueue::pending), summed over the ports →
//! [`Stage::ring_backlog`](crate::stage::Stage::ring_backlog); counted `nb_ring`): those
//! frames form one more pinned flow of the decision. `pending` reads the ring without
//! taking anything: virtio the used index, the Intel engine the DD bits from the next
//! descriptor on, AF_XDP the RX producer index, the software NIC its queue; `TPACKET_V3`
//! cannot tell (`None`). A whale split's booster runs frames with a tail mark through
//! [`Chain::admit_tail`](crate::nf::Chain::admit_tail) (the head's verdict and MAC) and
//! `run_tail` (NFs `k..`, the egress), one pass per split point; `nb_splits`, `nb_heads`
//! count it.
//!
//! **Where the buffers come from.** The firmware gets the auxiliary cores' views through
//! [`Pool::aux_views`](crate::buf::Pool::aux_views) (safe, for `Pool<'static>`: it makes the
//! metadata table permanent first, so no view can outlive what it aliases, and returns opaque
//! `AuxView`s that only `AuxWorker::with_views` takes — the discipline is then kept by the
//! only code that holds both sides of a buffer, this module, as a driver keeps it for a
//! device). The view's contract is the DMA discipline with the auxiliary core in the
//! device's place (`buf::view`); the lane transmits what comes back
//! ([`handoff::DedicatedEnd::reclaim_with`]), so the auxiliary core needs no TX queue of its
//! own, per-flow order is the order the link returns frames, and every buffer returns to
//! its own pool. Tested by a two-thread test under Miri (Stacked Borrows and the data-race
//! detector): the aux thread rewrites frames through the view, drops every fifth, marks
//! ports; the lane routes them back — each frame once, rewritten, each port's in hand-off
//! order, the pool full. Cost: the pool's metadata through `MetaTable` and the view checks
//! in `alloc`/`free` added ~3 instructions per packet to the forwarding loop (cachegrind
//! `ircount`: io 290.8 → 294.2, l3 838.3 → 841.0).
//!
//! **The auxiliary loop's sleep.** With nothing in its rings an auxiliary core sleeps
//! `vbar_us` (watching its ring's producer index, [`AuxWorker::wake_address`], where the
//! machine can, with one lane), so an idle aux core shows as halted cycles. Idle for ten
//! such sleeps (or a whole epoch, if shorter), where its sleeper wakes on a ring
//! (`Sleeper::wakes_on_ring`: MWAIT on bare metal, the hosted `NanoSleeper`), it sleeps on
//! its **doorbell** instead ([`crate::sync::Doorbell`], one per aux core, shared by every
//! lane: `LaneState::bell`, `AuxWorker::with_bell`): arm, look at the rings once more, then
//! `Sleeper::sleep_until_rung` (at most 100 ms); a lane's `flush` that handed it frames rings
//! the bell — if armed, it disarms it and calls the platform's wake hook (the firmware's
//! `Machine::wake_hook`: `futex_wake` hosted, nothing on bare metal where the store to the
//! MONITORed word wakes MWAIT), counted `nb_wakes`. The hosted build's `vbar_us` sleeps spin
//! (under its 50 µs margin); the doorbell is what gives an idle aux thread's CPU back. The
//! aux core's drop counters are published as a worker's, so `rx + generated = tx + drops +
//! ctl` sums over all workers; `core{i}_packets` of an aux core is the frames it processed,
//! `aux_frames` their sum (`= nb_handed` at the end). At shutdown the firmware settles every
//! lane (nothing placed still queued, handed over or unreturned) before the aux workers may
//! return; an RSS move settles the old lane the same way.
//!
//! **Epoch.** The epoch is the profile's `epoch_ns`, the span its frontier was measured for;
//! the run's `epoch_us=` (0: the profile's) may only name it — another epoch needs another
//! profile (`cargo xtask profile --epoch-us N`) — and must be below the SLO.
//!
//! # Tests
//!
//! `offload/tests.rs`: two threads over one lane — a burst outside the frontier, then quiet:
//! flows handed over and back in order, every frame once, the aux core recruited then
//! released, the pool full; a stalled aux core holds exactly the credit, the lane queues a
//! link plus a batch more, bound frames beyond that dropped and counted; a moved flow's
//! later frames follow it after the decision brings it back; a flow with a frame still
//! queued stays bound though its handed frames are completed (each of the last two fails
//! when its rule is removed); the whale of the first is split, its heads run on the lane.
//! The chains there are three marking NFs, so every frame that leaves shows each NF ran on
//! it exactly once, whether it ran here, on the aux core or split (running a tail from NF
//! `k − 1` fails them). End to end: `tests/tests/igb_rss.rs` (QEMU TCG, 3 cores = 2
//! dedicated + 1 aux, 3 igb queues, chain 1 with a profile that splits after NF 1 or 2, the
//! server mapper on: light load, a whale at 700 frames/s, a burst at 1400 frames/s, light
//! again — every frame exactly once, in order and as chain 1 makes it, flows handed to
//! core 2 and back, the whale split, the aux core recruited and released, the mapper moved
//! buckets, the pool full at the end). Hand-off ring: `handoff/tests.rs`, loom models in
//! `handoff/loom_handoff.rs`, the bench `cargo bench -p cadence-core --bench handoff` and the
//! `rte_ring` pairing `cargo xtask peers --only ring` (docs/PERFORMANCE.md, "Hand-off ring").

pub mod aux;
pub mod handoff;
pub mod lane;
pub mod marks;
pub mod stage;

#[cfg(test)]
mod tests;

pub use aux::{AuxStats, AuxWorker};
pub use lane::{LaneConfig, LaneState, NetBlazeCounters, SharedLanes, build, flow_key, share};
pub use marks::TailMark;
pub use stage::NetBlazeStage;
