//! The return path: buffers an auxiliary core is done with (processed, or dropped) go back
//! to the lane pool that owns them.
//!
//! A [`try_link`] is two rings of the same capacity `C` between one dedicated core and one
//! auxiliary core: the hand-off ring (dedicated → aux) and a return ring (aux → dedicated).
//! The auxiliary core never allocates from or frees into the lane's pool (it has one owner,
//! the core that holds the lane); it reaches the frames it holds through a view of that pool
//! ([`Pool::view`]: bytes and metadata of held buffers, `free` keeps a buffer aside), marks
//! where each processed frame goes ([`super::super::marks::set_out`]), and gives buffers back with
//! [`AuxEnd::give_back`]; the dedicated core, on its next round, routes what came back in
//! order — onto its transmit batches, say, for the frames marked with a port — and frees the
//! rest into its pool ([`DedicatedEnd::reclaim_with`]; [`DedicatedEnd::reclaim`] frees all).
//!
//! **Credit.** The dedicated end counts the buffers it handed over and has not reclaimed
//! yet ([`DedicatedEnd::outstanding`]) and hands over only while that stays at most `C`. So:
//! - the auxiliary side (hand-off ring + buffers in its hands + return ring) never holds
//!   more than `C` of the lane's buffers, whatever it does: a stalled auxiliary core cannot
//!   drain the lane's pool, it only makes [`DedicatedEnd::hand_off`] take fewer (the packets
//!   stay local and are counted, as for a full ring);
//! - the return ring always has room for every buffer the auxiliary core holds:
//!   [`AuxEnd::give_back`] of buffers it received never comes back short. Argument: when
//!   the dedicated core pushed the buffers the aux core now holds, `handed − reclaimed ≤ C`;
//!   the aux core popped them after that push (Release/Acquire on the hand-off ring), so the
//!   return ring's consumer index it reads is at least that `reclaimed`, and its own count
//!   `returned + held = received ≤ handed ≤ C + reclaimed` leaves room for all it holds.
//!   The loom model checks it (`handoff/loom_handoff.rs`).
//!
//! **No leak, no double free.** Every buffer is in exactly one place: the dedicated core's
//! hands, the hand-off ring, the aux core's hands ([`AuxEnd::held`]), the return ring, or
//! the pool. `give_back` takes at most [`AuxEnd::held`] buffers (a buggy caller cannot
//! return more than it received), and a buffer the pool refuses (freed twice, not its own)
//! is counted by the pool and in [`Reclaimed::refused`], never freed twice.
//!
//! Teardown: the aux end gives back what it holds and drains the hand-off ring
//! ([`AuxEnd::receive`] until empty, then `give_back`), the dedicated end reclaims until
//! [`DedicatedEnd::outstanding`] is 0: the pool is full again (the tests end that way).

use core::fmt;

use super::{Consumer, HandoffError, Producer, RingStats, try_ring_at};
use crate::buf::{BATCH_SIZE, Batch, PacketBuf, Pool};
use crate::nic::WakeAddr;

/// Builds a hand-off ring and its return ring, both of `capacity` slots (a power of two in
/// [`super::MIN_CAPACITY`]`..=`[`super::MAX_CAPACITY`]); the dedicated core keeps the
/// [`DedicatedEnd`], the auxiliary core gets the [`AuxEnd`].
pub fn try_link(capacity: usize) -> Result<(DedicatedEnd, AuxEnd), HandoffError> {
    try_link_at(capacity, 0)
}

/// [`try_link`] with every index starting at `start` (tests cross the `u32` wrap with it).
pub(crate) fn try_link_at(capacity: usize, start: u32) -> Result<(DedicatedEnd, AuxEnd), HandoffError> {
    let (to_aux, from_dedicated) = try_ring_at(capacity, start)?;
    let (back, from_aux) = try_ring_at(capacity, start)?;
    Ok((DedicatedEnd { to_aux, from_aux, outstanding: 0, refused: 0 }, AuxEnd { from_dedicated, back, held: 0 }))
}

/// What one [`DedicatedEnd::reclaim`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reclaimed {
    /// Buffers returned to the pool.
    pub freed: usize,
    /// Buffers `route` took ([`DedicatedEnd::reclaim_with`]).
    pub routed: usize,
    /// Buffers the pool refused (already free, or not its own); the pool counts them too.
    pub refused: usize,
}

/// The dedicated core's end of a [`try_link`]: hands buffers over, takes them back.
pub struct DedicatedEnd {
    to_aux: Producer,
    from_aux: Consumer,
    /// Handed over and not reclaimed yet (at most the capacity).
    outstanding: usize,
    /// Handles offered to `hand_off` that it did not take.
    refused: u64,
}

impl fmt::Debug for DedicatedEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DedicatedEnd")
            .field("capacity", &self.capacity())
            .field("outstanding", &self.outstanding)
            .field("refused", &self.refused)
            .finish()
    }
}

impl DedicatedEnd {
    /// Buffers the auxiliary side may hold at once (both rings' capacity).
    pub fn capacity(&self) -> usize {
        self.to_aux.capacity()
    }

    /// Buffers handed over and not reclaimed yet: in the hand-off ring, in the auxiliary
    /// core's hands, or in the return ring.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// Handles [`DedicatedEnd::hand_off`] did not take (the caller kept them), since creation.
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// The hand-off ring's producer counters.
    pub fn stats(&self) -> RingStats {
        self.to_aux.stats()
    }

    /// Hands as many handles from the front of `bufs` to the auxiliary core as the credit
    /// allows (at most [`DedicatedEnd::capacity`] outstanding), in order; returns how many.
    /// The rest stay with the caller, who keeps the packets local and counts them (so does
    /// [`DedicatedEnd::refused`]). Call [`DedicatedEnd::reclaim`] first in a round to get
    /// credit back. Never blocks, never allocates, never panics.
    #[inline]
    pub fn hand_off(&mut self, bufs: &[PacketBuf]) -> usize {
        let credit = self.capacity().saturating_sub(self.outstanding);
        let take = bufs.len().min(credit);
        // The ring holds at most `outstanding` handles, so it has room for `take`; it is
        // still the ring that says how many went in.
        let n = self.to_aux.push_burst(bufs.get(..take).unwrap_or(&[]));
        self.outstanding += n;
        self.refused += (bufs.len() - n) as u64;
        n
    }

    /// Frees into `pool` every buffer the auxiliary core gave back so far (at most one
    /// capacity's worth per call), and returns the credit they held.
    pub fn reclaim(&mut self, pool: &mut Pool<'_>) -> Reclaimed {
        self.reclaim_with(pool, |_, _| false)
    }

    /// [`DedicatedEnd::reclaim`], offering each given-back buffer to `route` first, in the
    /// order the auxiliary core gave them back: `route` returns `true` when it took the
    /// buffer (e.g. onto a transmit batch, for a frame the auxiliary core processed and
    /// marked with [`super::super::marks::set_out`] through its view), `false` to have it freed. A taken
    /// buffer counts in neither field of [`Reclaimed`] but `routed`.
    pub fn reclaim_with(
        &mut self,
        pool: &mut Pool<'_>,
        route: impl FnMut(&mut Pool<'_>, PacketBuf) -> bool,
    ) -> Reclaimed {
        self.reclaim_upto(pool, usize::MAX, route)
    }

    /// [`DedicatedEnd::reclaim_with`] of at most `max` buffers, the oldest given back: the
    /// rest stay in the return ring, in order, for a later call (e.g. as many as the
    /// transmit batches have room for).
    pub fn reclaim_upto(
        &mut self,
        pool: &mut Pool<'_>,
        max: usize,
        mut route: impl FnMut(&mut Pool<'_>, PacketBuf) -> bool,
    ) -> Reclaimed {
        let mut done = Reclaimed::default();
        let mut scratch = Batch::new();
        let mut left = max;
        // Bounded: the return ring never holds more than the capacity.
        for _ in 0..self.capacity().div_ceil(BATCH_SIZE) {
            if left == 0 {
                break;
            }
            let n = self.from_aux.pop_burst_max(&mut scratch, left);
            left -= n;
            if n == 0 {
                break;
            }
            // Each popped buffer has left the auxiliary side, whatever the pool says of it.
            self.outstanding = self.outstanding.saturating_sub(n);
            for &b in scratch.as_slice() {
                if route(pool, b) {
                    done.routed += 1;
                    continue;
                }
                match pool.free(b) {
                    Ok(()) => done.freed += 1,
                    Err(_) => done.refused += 1,
                }
            }
            scratch.clear();
        }
        done
    }
}

/// The auxiliary core's end of a [`try_link`]: receives buffers, gives them back.
pub struct AuxEnd {
    from_dedicated: Consumer,
    back: Producer,
    /// Received and not given back yet.
    held: usize,
}

impl fmt::Debug for AuxEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuxEnd").field("capacity", &self.from_dedicated.capacity()).field("held", &self.held).finish()
    }
}

impl AuxEnd {
    /// Buffers received and not given back yet.
    pub fn held(&self) -> usize {
        self.held
    }

    /// The hand-off ring's consumer counters.
    pub fn stats(&self) -> RingStats {
        self.from_dedicated.stats()
    }

    /// Buffers waiting in the hand-off ring (a lower bound: more may arrive at once); 0 is
    /// the auxiliary core's cue to sleep on [`AuxEnd::wake_address`].
    pub fn pending(&self) -> usize {
        self.from_dedicated.len()
    }

    /// Where a hand-off writes: monitor it to sleep until the dedicated core hands over.
    pub fn wake_address(&self) -> WakeAddr {
        self.from_dedicated.wake_address()
    }

    /// Appends up to `batch.room()` handed-over buffers to `batch`, oldest first; returns
    /// how many. They are the aux core's until it gives them back.
    #[inline]
    pub fn receive(&mut self, batch: &mut Batch) -> usize {
        let n = self.from_dedicated.pop_burst(batch);
        self.held += n;
        n
    }

    /// Gives buffers it is done with (transmitted, or dropped) back to the owning pool, from
    /// the front of `bufs`; returns how many were taken. Never fewer than
    /// `bufs.len().min(held())` (the credit argument in the module docs); more than
    /// [`AuxEnd::held`] is never taken, so a caller cannot hand back buffers it never got.
    #[inline]
    pub fn give_back(&mut self, bufs: &[PacketBuf]) -> usize {
        let take = bufs.len().min(self.held);
        let n = self.back.push_burst(bufs.get(..take).unwrap_or(&[]));
        self.held -= n;
        n
    }

    /// [`AuxEnd::give_back`] of a whole batch: what was taken leaves the batch's front.
    #[inline]
    pub fn give_back_batch(&mut self, batch: &mut Batch) -> usize {
        let n = self.give_back(batch.as_slice());
        batch.drain_front(n);
        n
    }
}
