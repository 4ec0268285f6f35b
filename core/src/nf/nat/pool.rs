//! The NAT's port pool: a free list that every worker takes from and gives back to without a
//! lock and without allocating, plus an "allocated" bitmap that catches a port handed out twice
//! or returned twice.
//!
//! The free list is D. Vyukov's bounded MPMC queue (as `pna::events`): cell `p % n` holds a
//! sequence number and a port; a producer claims position `p` with a compare-exchange on `head`
//! when the cell says "free for lap p", stores the port (`Relaxed`) and publishes `p + 1`
//! (`Release`); a consumer that sees `p + 1` (`Acquire`) claims `tail`, reads the port and frees
//! the cell with `p + n`. The queue holds every port of the range, so a give-back never finds it
//! full.

use crate::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering, RACE_LIMIT, spin_hint};
use alloc::boxed::Box;
use alloc::vec::Vec;

struct Cell {
    seq: AtomicUsize,
    port: AtomicU32,
}

#[repr(align(64))]
struct Padded(AtomicUsize);

pub(crate) struct PortPool {
    cells: Box<[Cell]>,
    mask: usize,
    head: Padded,
    tail: Padded,
    /// One bit per port of the range: set while the port is handed out.
    taken: Box<[AtomicU64]>,
    first: u16,
    /// Ports handed out that were already out, or given back that were not (bugs; counted).
    pub(crate) anomalies: AtomicU64,
}

impl PortPool {
    /// A pool holding every port of `first..=last`.
    pub fn new(first: u16, last: u16) -> Self {
        let count = usize::from(last.saturating_sub(first)) + 1;
        let n = count.next_power_of_two();
        let mut cells = Vec::with_capacity(n);
        for i in 0..n {
            cells.push(Cell { seq: AtomicUsize::new(i), port: AtomicU32::new(0) });
        }
        let mut taken = Vec::with_capacity(count.div_ceil(64));
        taken.resize_with(count.div_ceil(64), || AtomicU64::new(0));
        let pool = Self {
            cells: cells.into_boxed_slice(),
            mask: n - 1,
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            taken: taken.into_boxed_slice(),
            first,
            anomalies: AtomicU64::new(0),
        };
        for p in first..=last {
            pool.push(p);
        }
        pool
    }

    fn bit(&self, port: u16) -> Option<(&AtomicU64, u64)> {
        let i = usize::from(port.checked_sub(self.first)?);
        Some((self.taken.get(i / 64)?, 1 << (i % 64)))
    }

    /// Takes a free port, if any.
    pub fn alloc(&self) -> Option<u16> {
        let port = self.pop()?;
        if let Some((w, b)) = self.bit(port)
            && w.fetch_or(b, Ordering::AcqRel) & b != 0
        {
            self.anomalies.fetch_add(1, Ordering::Relaxed);
            debug_assert!(false, "port {port} handed out twice");
        }
        Some(port)
    }

    /// Gives a port back (its mappings must be gone). `false`: the free list stayed
    /// contended for the whole bounded wait; the caller still owns the port and must try
    /// again later (the NAT keeps it on its pending list). A port is never lost: its
    /// "taken" bit is cleared only around a push, and set again if the push gave up.
    pub fn release(&self, port: u16) -> bool {
        let Some((w, b)) = self.bit(port) else { return true };
        if w.fetch_and(!b, Ordering::AcqRel) & b == 0 {
            self.anomalies.fetch_add(1, Ordering::Relaxed);
            debug_assert!(false, "port {port} given back twice");
            return true;
        }
        if self.push(port) {
            return true;
        }
        // Still ours: nobody can pop a port that never reached the queue.
        w.fetch_or(b, Ordering::AcqRel);
        false
    }

    /// Ports handed out now.
    pub fn in_use(&self) -> usize {
        self.taken.iter().map(|w| w.load(Ordering::Relaxed).count_ones() as usize).sum()
    }

    fn push(&self, port: u16) -> bool {
        for _ in 0..RACE_LIMIT {
            let pos = self.head.0.load(Ordering::Relaxed);
            let Some(cell) = self.cells.get(pos & self.mask) else { return false };
            let diff = cell.seq.load(Ordering::Acquire).wrapping_sub(pos) as isize;
            if diff == 0 {
                if self
                    .head
                    .0
                    .compare_exchange_weak(pos, pos.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    cell.port.store(u32::from(port), Ordering::Relaxed);
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

    fn pop(&self) -> Option<u16> {
        for _ in 0..RACE_LIMIT {
            let pos = self.tail.0.load(Ordering::Relaxed);
            let cell = self.cells.get(pos & self.mask)?;
            let diff = cell.seq.load(Ordering::Acquire).wrapping_sub(pos.wrapping_add(1)) as isize;
            if diff == 0 {
                if self
                    .tail
                    .0
                    .compare_exchange_weak(pos, pos.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    let port = cell.port.load(Ordering::Relaxed) as u16;
                    cell.seq.store(pos.wrapping_add(self.mask).wrapping_add(1), Ordering::Release);
                    return Some(port);
                }
            } else if diff < 0 {
                return None;
            }
            spin_hint();
        }
        None
    }
}
