//! NetBlaze's hand-off ring: a bounded single-producer single-consumer ring of packet
//! buffer handles ([`PacketBuf`]) from one core to another (the core mapper:
//! "hand the rest, whole flows only, to auxiliary cores through SPSC rings"), and the
//! return path that brings every buffer back to the lane pool that owns it ([`link`]).
//!
//! # Shape
//!
//! [`try_ring`] builds one ring and splits it into a [`Producer`] and a [`Consumer`]. Each
//! half is `Send` (it moves to the core that uses it), neither is `Clone`, and pushing or
//! popping takes `&mut self`: the type system is what makes it *single* producer, *single*
//! consumer. A second producer cannot be made:
//!
//! ```compile_fail,E0599
//! let (p, _c) = cadence_core::offload::handoff::try_ring(2).expect("ring");
//! let _second = p.clone(); // `Producer` is not `Clone`
//! ```
//!
//! Everything is allocated by [`try_ring`] (capacity a power of two in 2..=65 536, else
//! `HandoffError::{TooSmall, NotPowerOfTwo, TooLarge}`; `OutOfMemory`); a push or a pop
//! allocates nothing, takes no lock, never waits and never panics.
//!
//! - [`Producer::push_burst`] takes as many handles from the front of a slice as there is
//!   room for and says how many. A full ring takes fewer (possibly none): the caller keeps
//!   the rest and counts them ("a full hand-off ring keeps the packet local and counts it";
//!   the producer counts them too, [`RingStats::refused`]).
//! - [`Consumer::pop_burst`] appends up to the batch's room, oldest first.
//!
//! # Protocol (the scheme of DPDK's `rte_ring` in SP/SC mode and of the AF_XDP rings)
//!
//! Two free-running `u32` indices, `prod` (next slot the producer fills) and `cons` (next
//! slot the consumer empties); `prod − cons` (wrapping) is the fill level, at most the
//! capacity, a power of two so that `index & mask` is the slot. Each side owns one index
//! (the only writer of it) and keeps a **cached copy of the other side's index**: the
//! producer re-reads `cons` only when its cached copy says there is not room for the whole
//! burst, the consumer re-reads `prod` only when its copy says there is not enough for the
//! whole batch. In a steady stream each side reads the other's line about once per burst,
//! not once per packet.
//!
//! Ordering, quoted at the loads and stores that implement it:
//! - the producer writes the slots (`Relaxed`), then publishes `prod` with `Release`; the
//!   consumer's `Acquire` load of `prod` makes those slot writes visible before it reads
//!   them (no stale slot);
//! - the consumer reads the slots, then publishes `cons` with `Release`; the producer's
//!   `Acquire` load of `cons` orders the consumer's reads before the producer's next writes
//!   to the same slots (a slot is never overwritten while it is being read).
//!
//! The two indices sit on cache lines of their own, 128 bytes apart (two lines, because
//! x86's adjacent-line prefetcher pairs lines: crossbeam's `CachePadded` and DPDK's
//! `RTE_CACHE_GUARD` pad the same way), and away from the read-only fields (slot pointer,
//! mask), so the producer's stores never invalidate the consumer's line and vice versa.
//!
//! # Waking an idle auxiliary core
//!
//! [`Consumer::wake_address`] is the address of `prod`, the one word the producer writes
//! when it hands packets over: a halted auxiliary core arms MONITOR on it (issue 10 item 6;
//! `core::time::Sleeper::sleep_until_watching`) so that a hand-off ends its sleep.
//!
//! # Why here and not in `core::sync`
//!
//! The ring carries packet handles (a slot is one `u16` atomic holding the handle's index,
//! 32 slots per cache line) and needs no `unsafe` at all: every shared word is an atomic,
//! as in `pna::exact`. `core::sync` is the crate's one module allowed `unsafe`; a safe
//! structure is better kept under the crate-wide `deny(unsafe_code)`. Its only user is
//! NetBlaze's hand-off; a second user (a pipeline split between cores) can move it.
//!
//! # Tests
//!
//! Unit tests and a proptest against a `VecDeque` model (`handoff/tests.rs`), loom models
//! of the ring and of the return path (`handoff/loom_handoff.rs`, `cargo xtask loom`), the
//! cross-core bench `cargo bench -p cadence-core --bench handoff` and the `rte_ring` peer
//! figure (`cargo xtask peers --only ring`).

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use crate::buf::{Batch, PacketBuf};
use crate::nic::WakeAddr;
use crate::sync::atomic::{AtomicU16, AtomicU32, Ordering};

pub mod link;

#[cfg(test)]
mod tests;

#[cfg(all(test, loom))]
mod loom_handoff;

pub use link::{AuxEnd, DedicatedEnd, Reclaimed, try_link};

/// Fewest slots a ring may have.
pub const MIN_CAPACITY: usize = 2;
/// Most slots a ring may have: as many as a pool has buffers at most (`u16` handles), so
/// one ring can carry a whole lane's pool.
pub const MAX_CAPACITY: usize = 1 << 16;

/// Why a ring was not built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HandoffError {
    /// The capacity is not a power of two.
    NotPowerOfTwo,
    /// The capacity is below [`MIN_CAPACITY`].
    TooSmall,
    /// The capacity is above [`MAX_CAPACITY`].
    TooLarge,
    /// The heap had no room for the slots.
    OutOfMemory,
}

impl fmt::Display for HandoffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            HandoffError::NotPowerOfTwo => "hand-off ring capacity must be a power of two",
            HandoffError::TooSmall => "hand-off ring capacity must be at least 2",
            HandoffError::TooLarge => "hand-off ring capacity must be at most 65536",
            HandoffError::OutOfMemory => "no memory for the hand-off ring",
        })
    }
}

/// One index on a pair of cache lines of its own.
#[repr(C, align(128))]
struct Line(AtomicU32);

/// What both halves share.
#[repr(C)]
struct Shared {
    /// Read-only after construction (both sides read them; nobody writes them).
    slots: Box<[AtomicU16]>,
    mask: u32,
    /// Next slot the producer fills; written by the producer only. The wake address.
    prod: Line,
    /// Next slot the consumer empties; written by the consumer only.
    cons: Line,
}

// The indices share no line with each other nor with the read-only fields.
#[cfg(not(loom))]
const _: () = {
    assert!(core::mem::offset_of!(Shared, prod) >= 128 && core::mem::offset_of!(Shared, prod) % 128 == 0);
    assert!(core::mem::offset_of!(Shared, cons) - core::mem::offset_of!(Shared, prod) >= 128);
};

impl Shared {
    fn capacity(&self) -> u32 {
        self.mask.wrapping_add(1)
    }
}

/// Counters of one side of a ring (plain integers: each side counts only its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingStats {
    /// Handles that went through this side (pushed, or popped).
    pub moved: u64,
    /// Producer only: handles offered to [`Producer::push_burst`] that a full ring did not
    /// take (the caller kept them).
    pub refused: u64,
}

/// Builds a ring of `capacity` slots (a power of two in [`MIN_CAPACITY`]`..=`[`MAX_CAPACITY`])
/// and splits it into its two halves. The only allocation the ring ever makes.
pub fn try_ring(capacity: usize) -> Result<(Producer, Consumer), HandoffError> {
    try_ring_at(capacity, 0)
}

/// [`try_ring`] with both indices starting at `start` (tests cross the `u32` wrap with it).
pub(crate) fn try_ring_at(capacity: usize, start: u32) -> Result<(Producer, Consumer), HandoffError> {
    if capacity < MIN_CAPACITY {
        return Err(HandoffError::TooSmall);
    }
    if capacity > MAX_CAPACITY {
        return Err(HandoffError::TooLarge);
    }
    if !capacity.is_power_of_two() {
        return Err(HandoffError::NotPowerOfTwo);
    }
    let mut slots = Vec::new();
    slots.try_reserve_exact(capacity).map_err(|_| HandoffError::OutOfMemory)?;
    for _ in 0..capacity {
        slots.push(AtomicU16::new(0));
    }
    // `capacity <= 1 << 16`, so the mask fits a `u32`.
    let mask = (capacity - 1) as u32;
    let shared = Arc::new(Shared {
        slots: slots.into_boxed_slice(),
        mask,
        prod: Line(AtomicU32::new(start)),
        cons: Line(AtomicU32::new(start)),
    });
    let producer = Producer { shared: shared.clone(), prod: start, cons_cache: start, stats: RingStats::default() };
    let consumer = Consumer { shared, cons: start, prod_cache: start, stats: RingStats::default() };
    Ok((producer, consumer))
}

/// The producing half of a hand-off ring (the dedicated core's end). `Send`, not `Clone`.
pub struct Producer {
    shared: Arc<Shared>,
    /// Our own index (the published value of `shared.prod`).
    prod: u32,
    /// The consumer's index as last read: never ahead of the real one.
    cons_cache: u32,
    stats: RingStats,
}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.capacity())
            .field("prod", &self.prod)
            .field("cons_cache", &self.cons_cache)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Producer {
    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.shared.capacity() as usize
    }

    /// Handles in the ring now (exact for the producer's own pushes; the consumer may have
    /// taken some since, so this is an upper bound).
    pub fn len(&self) -> usize {
        // Acquire: pairs with the consumer's Release store (see `push_burst`).
        let cons = self.shared.cons.0.load(Ordering::Acquire);
        self.prod.wrapping_sub(cons).min(self.shared.capacity()) as usize
    }

    /// Whether the ring holds nothing (a lower bound: the answer may be stale at once).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// This side's counters.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// Room for the whole burst of `want`? Re-reads the consumer's index only when the
    /// cached one says no.
    #[inline]
    fn room(&mut self, want: u32) -> u32 {
        let cap = self.shared.capacity();
        let mut free = cap.saturating_sub(self.prod.wrapping_sub(self.cons_cache));
        if free < want {
            // Acquire: the consumer read the slots it frees before its Release store of
            // `cons`; our writes to those slots (below) come after that read.
            self.cons_cache = self.shared.cons.0.load(Ordering::Acquire);
            free = cap.saturating_sub(self.prod.wrapping_sub(self.cons_cache));
        }
        free
    }

    /// Appends as many handles from the front of `bufs` as there is room for, in order, and
    /// returns how many. Those now belong to the ring; the rest (`bufs[n..]`) stay with the
    /// caller, who keeps them local and counts them (so does [`RingStats::refused`]).
    ///
    /// Never blocks, never allocates, never panics.
    #[inline]
    pub fn push_burst(&mut self, bufs: &[PacketBuf]) -> usize {
        let want = bufs.len().min(self.capacity()) as u32;
        let n = want.min(self.room(want));
        let shared = &*self.shared;
        let mut pos = self.prod;
        for b in bufs.iter().take(n as usize) {
            if let Some(slot) = shared.slots.get((pos & shared.mask) as usize) {
                slot.store(b.raw(), Ordering::Relaxed);
            }
            pos = pos.wrapping_add(1);
        }
        if n > 0 {
            self.prod = pos;
            // Release: the slot writes above happen-before the consumer's Acquire load that
            // sees this index, so it never reads a slot before its handle is in it.
            shared.prod.0.store(pos, Ordering::Release);
        }
        self.stats.moved += u64::from(n);
        self.stats.refused += (bufs.len() - n as usize) as u64;
        n as usize
    }
}

/// The consuming half of a hand-off ring (the auxiliary core's end). `Send`, not `Clone`.
pub struct Consumer {
    shared: Arc<Shared>,
    /// Our own index (the published value of `shared.cons`).
    cons: u32,
    /// The producer's index as last read: never ahead of the real one.
    prod_cache: u32,
    stats: RingStats,
}

impl fmt::Debug for Consumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("capacity", &self.capacity())
            .field("cons", &self.cons)
            .field("prod_cache", &self.prod_cache)
            .field("stats", &self.stats)
            .finish()
    }
}

impl Consumer {
    /// Slots in the ring.
    pub fn capacity(&self) -> usize {
        self.shared.capacity() as usize
    }

    /// Handles ready to pop now (a lower bound: the producer may have pushed more since).
    pub fn len(&self) -> usize {
        // Acquire: pairs with the producer's Release store (see `pop_burst`).
        let prod = self.shared.prod.0.load(Ordering::Acquire);
        prod.wrapping_sub(self.cons).min(self.shared.capacity()) as usize
    }

    /// Whether nothing is ready to pop now.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// This side's counters.
    pub fn stats(&self) -> RingStats {
        self.stats
    }

    /// The address of the producer's index, the word every hand-off writes: a halted
    /// auxiliary core monitors it (MONITOR/MWAIT) so that the next hand-off wakes it.
    pub fn wake_address(&self) -> WakeAddr {
        WakeAddr::new((&raw const self.shared.prod.0).addr())
    }

    /// Handles ready, up to `want`: re-reads the producer's index only when the cached one
    /// says fewer than `want`.
    #[inline]
    fn ready(&mut self, want: u32) -> u32 {
        let cap = self.shared.capacity();
        let mut ready = self.prod_cache.wrapping_sub(self.cons).min(cap);
        if ready < want {
            // Acquire: the producer wrote the slots before its Release store of `prod`, so
            // every slot below the index we read holds its handle (never a stale one).
            self.prod_cache = self.shared.prod.0.load(Ordering::Acquire);
            ready = self.prod_cache.wrapping_sub(self.cons).min(cap);
        }
        ready
    }

    /// Appends up to `batch.room()` handles to `batch`, oldest first, and returns how many
    /// (0 when the ring is empty or the batch full). Those now belong to the batch.
    ///
    /// Never blocks, never allocates, never panics.
    #[inline]
    pub fn pop_burst(&mut self, batch: &mut Batch) -> usize {
        self.pop_burst_max(batch, usize::MAX)
    }

    /// [`Consumer::pop_burst`] of at most `max` handles.
    #[inline]
    pub fn pop_burst_max(&mut self, batch: &mut Batch, max: usize) -> usize {
        let want = batch.room().min(max) as u32;
        if want == 0 {
            return 0;
        }
        let n = want.min(self.ready(want));
        let shared = &*self.shared;
        let mut pos = self.cons;
        for _ in 0..n {
            if let Some(slot) = shared.slots.get((pos & shared.mask) as usize) {
                // Cannot fail: `n <= batch.room()`.
                let _ = batch.push(PacketBuf::from_raw(slot.load(Ordering::Relaxed)));
            }
            pos = pos.wrapping_add(1);
        }
        if n > 0 {
            self.cons = pos;
            // Release: our slot reads above happen-before the producer's Acquire load that
            // sees this index, so it never overwrites a slot we are still reading.
            shared.cons.0.store(pos, Ordering::Release);
        }
        self.stats.moved += u64::from(n);
        n as usize
    }
}
