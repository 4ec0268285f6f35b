//! The stage contract: what the worker loop hands a batch to ([`Stage`]), the counters every
//! stage keeps ([`StageCounters`]), and the most ports a dataplane has ([`PORTS`]).
//!
//! A [`Stage`] takes a batch received on one port and empties it: every frame either moves to
//! the output batch of some port, or is returned to the pool and counted under one
//! [`DropReason`] (or as a consumed control frame). The NF chain ([`crate::nf::Chain`]) is the
//! stage the dataplane runs; with no NFs it is the L2 forwarder. Every worker runs it wrapped
//! in NetBlaze's stage ([`crate::offload::NetBlazeStage`], the chain alone when NetBlaze is
//! off), which drives the chain through its phases (the chain's "Phases" section). The worker
//! loop ([`crate::worker`]) only sees this trait.

use crate::buf::{Batch, Pool};
use crate::control::Commands;
use crate::drops::DropReason;
use crate::time::Instant;

/// The most ports a dataplane has (per-port state is sized by it; a dataplane runs with 2 to
/// `PORTS` of them). Ports pair up for the L2 default: port `i`'s default egress is port
/// `i ^ 1` (0 ↔ 1, 2 ↔ 3, …, as DPDK's l2fwd pairs its ports); a frame for a port the
/// dataplane does not have is dropped as `TxFull` by the worker loop.
pub const PORTS: usize = 8;

// The worker loop keeps the ports with frames to send in a `u32` bit mask.
const _: () = assert!(PORTS <= 32);

/// Port `port`'s partner for the L2 default: `port ^ 1`.
#[inline]
pub const fn pair_of(port: u8) -> u8 {
    port ^ 1
}

/// Counters every stage keeps: drops by reason and consumed control frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StageCounters {
    /// Drops per reason, indexed by [`DropReason::index`].
    pub drops: [u64; DropReason::COUNT],
    /// Control frames consumed.
    pub ctl: u64,
    /// Frames the stage originated itself ([`Stage::idle`]: e.g. IPFIX export messages):
    /// conservation is `rx + generated = tx + drops + ctl`.
    pub generated: u64,
}

impl Default for StageCounters {
    // By hand: `Default` is derived for arrays of at most 32 elements.
    fn default() -> Self {
        Self { drops: [0; DropReason::COUNT], ctl: 0, generated: 0 }
    }
}

impl StageCounters {
    /// Counts `n` drops for `reason`.
    #[inline]
    pub fn count_drop(&mut self, reason: DropReason, n: u64) {
        if let Some(c) = self.drops.get_mut(reason.index()) {
            *c = c.saturating_add(n);
        }
    }

    /// Drops counted for `reason`.
    pub fn drops_for(&self, reason: DropReason) -> u64 {
        self.drops.get(reason.index()).copied().unwrap_or(0)
    }

    /// Drops over every reason. A wrapping sum (64-bit counters do not wrap in practice):
    /// unlike a saturating one it vectorises, and the poll loop takes it twice per poll, so
    /// its cost does not grow by an instruction pair with each new reason.
    pub fn drops_total(&self) -> u64 {
        self.drops.iter().fold(0u64, |a, &d| a.wrapping_add(d))
    }

    /// Adds `other`'s counters to these (summing cores).
    pub fn merge(&mut self, other: &StageCounters) {
        for (a, b) in self.drops.iter_mut().zip(other.drops.iter()) {
            *a = a.saturating_add(*b);
        }
        self.ctl = self.ctl.saturating_add(other.ctl);
        self.generated = self.generated.saturating_add(other.generated);
    }
}

/// One step of the pipeline.
///
/// Contract:
/// - `process` receives `input`, frames received on `port`, and leaves it empty.
/// - Each frame ends in exactly one place: pushed onto `out[p]` (to be sent on port
///   `p`, in the order of `input` for frames with the same `p`), or returned to
///   `pool` and counted in `counters` (a drop under one reason, or a control frame), or
///   — a chain with addresses only — kept waiting for its next hop's ARP answer in the
///   chain's neighbour table (`crate::neigh`, bounded), which sends or drops it later, from
///   `idle` on the same lane.
/// - When `out[p]` is full, or `p >= out.len()`, the frame is freed and counted as
///   [`DropReason::TxFull`]: the caller should hand in output batches with room.
/// - Never panics and never allocates.
pub trait Stage {
    /// Processes one batch received on `port` at time `now`; returns the control
    /// commands seen.
    fn process(
        &mut self,
        port: usize,
        pool: &mut Pool<'_>,
        input: &mut Batch,
        out: &mut [Batch],
        counters: &mut StageCounters,
        now: Instant,
    ) -> Commands;

    /// Called once per poll, after the received batches: the stage may do bounded
    /// housekeeping and originate frames of its own (pushed onto `out[p]`, counted in
    /// `counters.generated`; what finds no room is freed and counted as `TxFull`), e.g. an
    /// NF exporting records. The default does nothing. Same rules as `process`: never
    /// panics, never allocates.
    fn idle(&mut self, pool: &mut Pool<'_>, out: &mut [Batch], counters: &mut StageCounters, now: Instant) {
        let _ = (pool, out, counters, now);
    }

    /// Called when the worker has won lane `lane` (its queue lock), before that lane's
    /// batches: a stage that keeps state per lane (NetBlaze's placement,
    /// [`crate::offload`]) switches to it. The default does nothing.
    fn enter_lane(&mut self, lane: usize) {
        let _ = lane;
    }

    /// Whether the stage wants to know, before this poll's bursts, how many frames wait in
    /// the lane's receive rings (NetBlaze, when an epoch ends: its backlog). The default:
    /// never (the check then costs nothing).
    fn backlog_due(&self, now: Instant) -> bool {
        let _ = now;
        false
    }

    /// The frames waiting in the lane's receive rings ([`crate::nic::RxQueue::pending`],
    /// summed over the ports that can tell), given when [`Stage::backlog_due`] says so.
    fn ring_backlog(&mut self, frames: usize) {
        let _ = frames;
    }
}
