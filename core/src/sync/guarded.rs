//! Data that only the holder of a given [`TryLock`] may touch.
//!
//! Metronome's queue locks live in the controller ([`crate::metronome::LaneShare`]); the
//! things they protect (a lane's NIC queues and its buffer pool) live elsewhere and are
//! owned by no single core. [`Guarded<T>`] binds such data to one lock: a mutable
//! reference comes only from a live guard of exactly that lock, and lasts no longer than a
//! mutable borrow of the guard.
//!
//! This is the one place in `core` that needs `unsafe` (an `UnsafeCell` shared between
//! cores). The argument, in full:
//! - a [`TryLock`] hands out at most one [`TryLockGuard`] at a time (its
//!   `compare_exchange(0 → 1)`; loom-tested in `sync`), so at most one core at a time can
//!   pass the identity check below for a given lock;
//! - [`Guarded::get_mut`] borrows that guard mutably for as long as the returned `&mut T`
//!   lives, so one guard cannot yield two live `&mut T` either;
//! - the guard's `Release` store on drop happens after the last use of the `&mut T`, and the
//!   next holder's `Acquire` exchange synchronizes with it, so the next holder sees every
//!   write;
//! - the lock is identified by address. If it were dropped and another lock built at the
//!   same address, no guard of the old one could exist any more, and guards of the new one
//!   are again exclusive: every access still goes through the one live lock at that
//!   address.

use core::cell::UnsafeCell;
use core::fmt;

use super::{TryLock, TryLockGuard};

/// A `T` that only the holder of one particular [`TryLock`] can reach.
pub struct Guarded<T> {
    lock: *const TryLock,
    data: UnsafeCell<T>,
}

// SAFETY: `T` is only ever reached through `get_mut`, which requires the unique guard of the
// bound lock (see the module docs), so at most one core accesses it at a time and accesses are
// ordered by the lock's Acquire/Release; moving that access between cores needs `T: Send`.
// The raw pointer is used as an identity only, never dereferenced.
unsafe impl<T: Send> Sync for Guarded<T> {}
// SAFETY: as above; the pointer is an identity, not a reference to shared state.
unsafe impl<T: Send> Send for Guarded<T> {}

impl<T> Guarded<T> {
    /// Binds `data` to `lock`.
    pub fn new(lock: &TryLock, data: T) -> Self {
        Self { lock: lock as *const TryLock, data: UnsafeCell::new(data) }
    }

    /// Whether `lock` is the lock this data is bound to.
    pub fn is_bound_to(&self, lock: &TryLock) -> bool {
        core::ptr::eq(self.lock, lock)
    }

    /// The data, for the holder of the bound lock; `None` for a guard of another lock.
    #[inline]
    pub fn get_mut<'a>(&'a self, guard: &'a mut TryLockGuard<'_>) -> Option<&'a mut T> {
        if !self.is_bound_to(guard.lock()) {
            return None;
        }
        // SAFETY: `guard` is a live guard of the bound lock, so no other core holds it and no
        // other `&mut T` derived from it is live: this one borrows `guard` mutably for `'a`
        // (module docs give the full argument).
        Some(unsafe { &mut *self.data.get() })
    }

    /// The data, through exclusive access to the cell itself (set-up and teardown).
    pub fn get_mut_exclusive(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// The data, consuming the cell.
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T> fmt::Debug for Guarded<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guarded").field("lock", &self.lock).finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn only_a_guard_of_the_bound_lock_opens_it() {
        let a = TryLock::new();
        let b = TryLock::new();
        let cell = Guarded::new(&a, 5u32);
        let mut gb = b.try_lock().unwrap();
        assert!(cell.get_mut(&mut gb).is_none());
        let mut ga = a.try_lock().unwrap();
        *cell.get_mut(&mut ga).unwrap() += 1;
        drop(ga);
        assert_eq!(cell.into_inner(), 6);
    }

    #[test]
    fn concurrent_holders_never_lose_an_update() {
        // The lock lives at a stable address (as the controller's queue locks do, in a Vec
        // built once) and the cell is bound to it there.
        let lock = Arc::new(TryLock::new());
        let cell = Arc::new(Guarded::new(&lock, 0u64));
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let (lock, cell) = (Arc::clone(&lock), Arc::clone(&cell));
                std::thread::spawn(move || {
                    let mut won = 0u64;
                    for _ in 0..crate::testing::miri_or(20_000, 200) {
                        if let Some(mut g) = lock.try_lock() {
                            let v = cell.get_mut(&mut g).unwrap();
                            // A read-modify-write in two steps: a second concurrent holder
                            // would make updates disappear.
                            let old = *v;
                            std::hint::spin_loop();
                            *v = old + 1;
                            won += 1;
                        }
                    }
                    won
                })
            })
            .collect();
        let wins: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let mut g = lock.try_lock().unwrap();
        assert_eq!(*cell.get_mut(&mut g).unwrap(), wins);
        assert!(wins > 0);
    }
}

/// Loom model of [`Guarded`]: `cargo xtask test`, step "loom".
///
/// The guarded data is a `loom::cell::UnsafeCell`, which records every access and fails the
/// model on two accesses that the memory model does not order (a data race). Three cores
/// make one Metronome-style try each and, on a win, do a read-modify-write of the data
/// through [`Guarded::get_mut`]. What it proves, for every interleaving within the
/// preemption bound: the lock's guard is the only way in and hands the data over with
/// happens-before (no race is ever reported), no update is lost (the data ends equal to
/// the number of wins), and a guard of another lock never opens the data.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::Guarded;
    use crate::sync::{TryLock, loom_model, loom_others_first};
    use loom::cell::UnsafeCell;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    struct Lane {
        lock: TryLock,
        other: TryLock,
    }

    #[test]
    fn sync_loom_guarded_data_is_reached_only_under_its_lock() {
        loom_model(2, |others_first| {
            // The locks live at a stable address (an `Arc`), as the controller's do.
            let lane = Arc::new(Lane { lock: TryLock::new(), other: TryLock::new() });
            let data = Arc::new(Guarded::new(&lane.lock, UnsafeCell::new(0usize)));
            let wins = Arc::new(AtomicUsize::new(0));
            let round = {
                let (lane, data, wins) = (lane.clone(), data.clone(), wins.clone());
                move || {
                    if let Some(mut g) = lane.other.try_lock() {
                        assert!(data.get_mut(&mut g).is_none(), "another lock's guard opened the data");
                    }
                    if let Some(mut g) = lane.lock.try_lock() {
                        let cell = data.get_mut(&mut g).expect("the bound lock's guard opens it");
                        // SAFETY: loom's cell checks this access against every other one;
                        // the pointer is valid for the cell's lifetime.
                        cell.with_mut(|p| unsafe { *p += 1 });
                        wins.fetch_add(1, Ordering::Relaxed);
                    }
                }
            };
            let hs: Vec<_> = (0..2).map(|_| thread::spawn(round.clone())).collect();
            loom_others_first(others_first);
            round();
            for h in hs {
                h.join().expect("core");
            }
            let mut g = lane.lock.try_lock().expect("free after every core is done");
            let cell = data.get_mut(&mut g).expect("bound");
            // SAFETY: as above.
            let n = cell.with(|p| unsafe { *p });
            assert_eq!(n, wins.load(Ordering::Relaxed), "an update was lost");
            assert!(n >= 1, "the first try on a free lock wins");
        });
    }
}
