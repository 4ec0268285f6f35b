//! A bounded multi-producer multi-consumer ring of expiry reports (`NotifyControl`).
//!
//! Any core that sweeps a table may push; the control plane pops. The ring is a fixed array of
//! cells allocated at creation; each cell has a sequence number (the scheme of D. Vyukov's bounded
//! MPMC queue): a producer claims position `p` by advancing `head` with a compare-exchange when
//! cell `p % n` says "free for lap p", writes the event with `Relaxed` stores and publishes it by
//! storing `p + 1` with `Release`; a consumer that reads `p + 1` with `Acquire` sees the whole event,
//! copies it, and frees the cell for the next lap with `p + n` (`Release`). A full ring refuses
//! the push and counts an overflow; nothing blocks and nothing allocates after creation.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use super::{ActionId, AtomicU64, AtomicUsize, ExpireProfileId, Ordering};
// Attempts a push or pop makes while other cores keep winning the race for the same position.
use crate::sync::atomic::RACE_LIMIT;
use crate::time::Instant;

/// An entry whose idle timer ran out (reported once per expiry under `NotifyControl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpiryEvent<const KW: usize> {
    /// The entry's key.
    pub key: [u64; KW],
    /// Its action.
    pub action: ActionId,
    /// Its expire-time profile.
    pub profile: ExpireProfileId,
    /// The deadline that passed.
    pub deadline: Instant,
}

struct Cell<const KW: usize> {
    seq: AtomicUsize,
    key: [AtomicU64; KW],
    meta: AtomicU64,
    deadline: AtomicU64,
}

#[repr(align(64))]
struct Padded(AtomicUsize);

/// The bounded MPMC ring of [`ExpiryEvent`]s.
pub struct EventRing<const KW: usize> {
    cells: Box<[Cell<KW>]>,
    mask: usize,
    head: Padded,
    tail: Padded,
    overflows: AtomicU64,
}

impl<const KW: usize> fmt::Debug for EventRing<KW> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EventRing")
            .field("capacity", &self.cells.len())
            .field("overflows", &self.overflows())
            .finish_non_exhaustive()
    }
}

impl<const KW: usize> EventRing<KW> {
    /// A ring of at least `capacity` events (rounded up to a power of two, at least 2).
    ///
    /// # Panics
    /// When the heap has no room for it (see [`EventRing::try_new`]).
    #[allow(clippy::panic)]
    pub fn new(capacity: usize) -> Self {
        match Self::try_new(capacity) {
            Some(r) => r,
            None => panic!("event ring of {capacity}: out of memory"),
        }
    }

    /// A ring of at least `capacity` events (rounded up to a power of two, at least 2), or
    /// `None` when the heap has no room for it (a configuration error for the caller, never
    /// an allocation failure that aborts).
    pub fn try_new(capacity: usize) -> Option<Self> {
        let n = capacity.max(2).checked_next_power_of_two().unwrap_or(1 << 20);
        let mut cells = Vec::new();
        cells.try_reserve_exact(n).ok()?;
        for i in 0..n {
            cells.push(Cell {
                seq: AtomicUsize::new(i),
                key: crate::sync::atomic::zeroed(),
                meta: AtomicU64::new(0),
                deadline: AtomicU64::new(0),
            });
        }
        Some(Self {
            cells: cells.into_boxed_slice(),
            mask: n - 1,
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            overflows: AtomicU64::new(0),
        })
    }

    /// How many events the ring holds at most.
    pub fn capacity(&self) -> usize {
        self.cells.len()
    }

    /// Pushes refused because the ring was full (or the race bound ran out).
    pub fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }

    /// Appends an event; `false` (and an overflow counted) when the ring is full.
    pub fn push(&self, ev: &ExpiryEvent<KW>) -> bool {
        let mut pos = self.head.0.load(Ordering::Relaxed);
        for _ in 0..RACE_LIMIT {
            let Some(cell) = self.cells.get(pos & self.mask) else { break };
            let seq = cell.seq.load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos) as isize;
            if diff == 0 {
                match self.head.0.compare_exchange(pos, pos.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        for (w, v) in cell.key.iter().zip(ev.key.iter()) {
                            w.store(*v, Ordering::Relaxed);
                        }
                        cell.meta.store(ev.action as u64 | (ev.profile as u64) << 8, Ordering::Relaxed);
                        cell.deadline.store(ev.deadline.ticks(), Ordering::Relaxed);
                        cell.seq.store(pos.wrapping_add(1), Ordering::Release);
                        return true;
                    }
                    Err(p) => pos = p,
                }
            } else if diff < 0 {
                // The cell still holds an event from the previous lap: full.
                break;
            } else {
                pos = self.head.0.load(Ordering::Relaxed);
            }
            super::spin_hint();
        }
        self.overflows.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Takes the oldest event, if any.
    pub fn pop(&self) -> Option<ExpiryEvent<KW>> {
        let mut pos = self.tail.0.load(Ordering::Relaxed);
        for _ in 0..RACE_LIMIT {
            let cell = self.cells.get(pos & self.mask)?;
            let seq = cell.seq.load(Ordering::Acquire);
            let diff = seq.wrapping_sub(pos.wrapping_add(1)) as isize;
            if diff == 0 {
                match self.tail.0.compare_exchange(pos, pos.wrapping_add(1), Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        let key = core::array::from_fn(|i| cell.key.get(i).map_or(0, |w| w.load(Ordering::Relaxed)));
                        let meta = cell.meta.load(Ordering::Relaxed);
                        let deadline = Instant(cell.deadline.load(Ordering::Relaxed));
                        cell.seq.store(pos.wrapping_add(self.mask).wrapping_add(1), Ordering::Release);
                        return Some(ExpiryEvent { key, action: meta as u8, profile: (meta >> 8) as u8, deadline });
                    }
                    Err(p) => pos = p,
                }
            } else if diff < 0 {
                return None;
            } else {
                pos = self.tail.0.load(Ordering::Relaxed);
            }
            super::spin_hint();
        }
        None
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn ev(k: u64) -> ExpiryEvent<2> {
        ExpiryEvent { key: [k, !k], action: 3, profile: 7, deadline: Instant(k * 10) }
    }

    #[test]
    fn fifo_overflow_and_wraparound() {
        let r = EventRing::<2>::new(3);
        assert_eq!(r.capacity(), 4);
        for lap in 0..5u64 {
            for i in 0..4 {
                assert!(r.push(&ev(lap * 10 + i)));
            }
            assert!(!r.push(&ev(99)));
            for i in 0..4 {
                assert_eq!(r.pop(), Some(ev(lap * 10 + i)));
            }
            assert_eq!(r.pop(), None);
        }
        assert_eq!(r.overflows(), 5);
    }

    #[test]
    fn two_producers_one_consumer_lose_nothing() {
        // Under Miri (whose data-race detector watches the cells) 100 events per producer.
        const N: u64 = crate::testing::miri_or(5000, 100);
        let r = EventRing::<2>::new(64);
        let mut got = std::vec::Vec::new();
        std::thread::scope(|s| {
            for t in 0..2u64 {
                let r = &r;
                s.spawn(move || {
                    for i in 0..N {
                        while !r.push(&ev(t << 32 | i)) {
                            std::thread::yield_now();
                        }
                    }
                });
            }
            while got.len() < 2 * N as usize {
                match r.pop() {
                    Some(e) => got.push(e),
                    None => std::thread::yield_now(),
                }
            }
        });
        for t in 0..2u64 {
            let mine: std::vec::Vec<u64> =
                got.iter().filter(|e| e.key[0] >> 32 == t).map(|e| e.key[0] & 0xFFFF_FFFF).collect();
            assert_eq!(mine, (0..N).collect::<std::vec::Vec<_>>(), "per-producer order kept, nothing lost");
            assert!(got.iter().all(|e| e.key[1] == !e.key[0] && e.action == 3 && e.profile == 7));
        }
    }
}
