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
//! its round won ([`Stage::enter_lane`](crate::stage::Stage::enter_lane)), and it locks that lane's state (uncontended: only
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
