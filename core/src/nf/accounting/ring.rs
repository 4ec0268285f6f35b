//! The bounded export ring of flow records: workers push, the control plane pops.
//!
//! D. Vyukov's bounded MPMC queue over atomics (the same scheme as `pna::events`): cell `p % n`
//! carries a sequence number; a producer claims position `p` with a compare-exchange on `head`
//! when the cell says "free for lap p", writes the record with `Relaxed` stores and publishes it
//! by storing `p + 1` with `Release`; a consumer that reads `p + 1` with `Acquire` sees the whole
//! record, copies it and frees the cell for the next lap with `p + n` (`Release`). A full ring
//! refuses the push (the caller counts it); nothing blocks, nothing allocates after creation.

use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering, RACE_LIMIT, spin_hint};
use alloc::boxed::Box;
use alloc::vec::Vec;

/// Words of one record.
pub(crate) const WORDS: usize = 9;

struct Cell {
    seq: AtomicUsize,
    data: [AtomicU64; WORDS],
}

#[repr(align(64))]
struct Padded(AtomicUsize);

pub(crate) struct Ring {
    cells: Box<[Cell]>,
    mask: usize,
    head: Padded,
    tail: Padded,
}

impl Ring {
    /// A ring of at least `capacity` records (a power of two, at least 2), or `None` when the
    /// heap has no room for it.
    pub fn try_new(capacity: usize) -> Option<Self> {
        let n = capacity.max(2).checked_next_power_of_two().unwrap_or(1 << 20);
        let mut cells = Vec::new();
        cells.try_reserve_exact(n).ok()?;
        for i in 0..n {
            cells.push(Cell { seq: AtomicUsize::new(i), data: crate::sync::atomic::zeroed() });
        }
        Some(Self {
            cells: cells.into_boxed_slice(),
            mask: n - 1,
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
        })
    }

    pub fn capacity(&self) -> usize {
        self.cells.len()
    }

    /// Whether a push would find a free cell now (producers racing for the last cell may
    /// still make one fail).
    pub fn has_room(&self) -> bool {
        let (h, t) = (self.head.0.load(Ordering::Relaxed), self.tail.0.load(Ordering::Acquire));
        h.wrapping_sub(t) < self.cells.len()
    }

    /// Appends a record; `false` if the ring is full.
    pub fn push(&self, rec: &[u64; WORDS]) -> bool {
        for _ in 0..RACE_LIMIT {
            let pos = self.head.0.load(Ordering::Relaxed);
            let Some(cell) = self.cells.get(pos & self.mask) else { return false };
            let seq = cell.seq.load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos) as isize;
            if diff == 0 {
                if self
                    .head
                    .0
                    .compare_exchange_weak(pos, pos.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    for (w, v) in cell.data.iter().zip(rec.iter()) {
                        w.store(*v, Ordering::Relaxed);
                    }
                    cell.seq.store(pos.wrapping_add(1), Ordering::Release);
                    return true;
                }
            } else if diff < 0 {
                return false;
            }
            spin_hint();
        }
        false
    }

    /// Takes the oldest record, if any.
    pub fn pop(&self) -> Option<[u64; WORDS]> {
        for _ in 0..RACE_LIMIT {
            let pos = self.tail.0.load(Ordering::Relaxed);
            let cell = self.cells.get(pos & self.mask)?;
            let seq = cell.seq.load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos.wrapping_add(1)) as isize;
            if diff == 0 {
                if self
                    .tail
                    .0
                    .compare_exchange_weak(pos, pos.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    let rec = core::array::from_fn(|i| cell.data.get(i).map_or(0, |w| w.load(Ordering::Relaxed)));
                    cell.seq.store(pos.wrapping_add(self.mask).wrapping_add(1), Ordering::Release);
                    return Some(rec);
                }
            } else if diff < 0 {
                return None;
            }
            spin_hint();
        }
        None
    }
}
