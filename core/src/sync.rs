//! The per-lane trylock of Metronome and the other shared-memory primitives of `core`.
//!
//! Every receive queue has one [`TryLock`]. A worker that wakes up makes exactly one attempt,
//! a single `compare_exchange(0 → 1, Acquire, Relaxed)` (one `LOCK CMPXCHG` on x86_64); the
//! winner drains the queue and releases with one `Release` store when its [`TryLockGuard`] is
//! dropped, the loser goes back to sleep. There is deliberately no spinning `lock()`: a
//! Metronome worker that finds its queue taken never waits for it.
//!
//! Each lock fills a cache line of its own (`#[repr(align(64))]`), so that losers hammering
//! one lock never invalidate the line of another queue's lock or of the data next to it (the
//! public Metronome code packs its locks into one 8-byte array).
//!
//! Ordering: the `Acquire` of a successful exchange synchronizes with the `Release` store of the
//! previous holder, so everything that holder wrote before releasing (the queue's load estimate,
//! its release time, the descriptors it consumed) is visible to the next holder. A failed
//! exchange publishes nothing and needs nothing, hence `Relaxed`.
//!
//! The lock itself needs no `unsafe`: it guards no data of its own, so the guard is only a
//! proof of ownership. Data that a lock protects but that lives elsewhere (a lane's NIC
//! queues and buffer pool) is bound to it with [`Guarded`]. Packet memory that the CPU
//! shares with devices is [`PacketMem`] (a raw pointer, so that a device writing one buffer
//! does not alias a reference to the whole region), with its metadata table and the view of a
//! pool that a NetBlaze auxiliary core takes buffers through (`buf::view`). Those are the
//! `unsafe` corners of `core`, each with its argument in its module docs. Under `--cfg loom` the atomics come
//! from `loom` (`sync::atomic`, for every concurrent structure of `core`) so that the loom
//! models explore every interleaving and every memory-model outcome.

pub(crate) mod atomic;
pub mod doorbell;
mod guarded;
mod packet_mem;
pub mod prefetch;
pub mod swap;

#[cfg(all(test, loom))]
mod loom_swap;

pub use doorbell::Doorbell;
pub use guarded::Guarded;
pub use packet_mem::{MetaTable, PacketMem};
pub use swap::{Reader, Retired, Swap};

#[cfg(all(test, loom))]
mod loom_lease;

#[cfg(loom)]
use loom::sync::atomic::{AtomicU32, Ordering};

#[cfg(not(loom))]
use core::sync::atomic::{AtomicU32, Ordering};

/// Runs a loom model twice, exploring schedules with at most `bound` preemptions per
/// execution unless `LOOM_MAX_PREEMPTIONS` says otherwise (the bound keeps `cargo xtask
/// test`'s loom step short; raise it by hand to search deeper).
///
/// The model gets `others_first`: `false` on the first run, `true` on the second, where the
/// model's main thread should call [`loom_others_first`] right before its racing part. Why:
/// loom's DPOR reorders a spawned thread before the main thread only at conflicting
/// accesses, and a load does not conflict with a load, so when both sides start by loading
/// the same word, the schedules in which the spawned thread runs first (entirely, or up to
/// some point) are never tried. A yield at the start of the main thread's part makes them
/// the starting point of the second run, and DPOR explores the interleavings from there.
#[cfg(all(test, loom))]
pub(crate) fn loom_model(bound: usize, f: impl Fn(bool) + Sync + Send + 'static) {
    let f = std::sync::Arc::new(f);
    for others_first in [false, true] {
        let mut b = loom::model::Builder::new();
        if b.preemption_bound.is_none() {
            b.preemption_bound = Some(bound);
        }
        let f = f.clone();
        b.check(move || f(others_first));
    }
}

/// See [`loom_model`]: lets the spawned threads run first when `others_first` is set.
#[cfg(all(test, loom))]
pub(crate) fn loom_others_first(others_first: bool) {
    if others_first {
        loom::thread::yield_now();
    }
}

const UNLOCKED: u32 = 0;
const LOCKED: u32 = 1;

/// Who holds a [`TryLock`]: a tag above 1 that names one holder (a worker), written into the
/// lock word by [`TryLock::try_lock_as`], so that a lock held by a holder that stopped for
/// good can be revoked ([`TryLock::revoke`]). [`TryLock::try_lock`] holds anonymously.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder(u32);

impl Holder {
    /// Holder number `n` (a worker's index): tag `n + 2` (0 is free, 1 anonymous).
    pub const fn of(n: u32) -> Self {
        Self(n.saturating_add(2))
    }

    /// The tag in the lock word.
    pub const fn tag(self) -> u32 {
        self.0
    }
}

/// Proof that a [`Holder`] stopped for good: it will never execute another instruction, so
/// what it held may be taken from it ([`TryLock::revoke`]). Only the platform can know that
/// (it stopped the core or thread itself, and the stopped side acknowledged), hence the
/// `unsafe` constructor.
#[derive(Debug)]
pub struct Fenced {
    holder: Holder,
}

impl Fenced {
    /// The proof that `holder` stopped.
    ///
    /// # Safety
    /// `holder` (the core or thread that takes locks as it) has stopped and will never run
    /// again — not a single instruction, not a deferred store — and everything it stored
    /// before stopping is visible to the caller (the platform's acknowledgement was read
    /// with `Acquire`). Then no live guard of its can be used again, and taking its locks
    /// away cannot make two holders of one lock.
    pub const unsafe fn new(holder: Holder) -> Self {
        Self { holder }
    }

    /// Who stopped.
    pub const fn holder(&self) -> Holder {
        self.holder
    }
}

/// A non-blocking lock that occupies one cache line.
///
/// `try_lock` either takes the lock at once or reports that another core holds it.
#[repr(align(64))]
#[derive(Debug)]
pub struct TryLock {
    state: AtomicU32,
}

// One lock, one cache line: nothing else may share the line (checked at compile time).
#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<TryLock>() == 64 && core::mem::align_of::<TryLock>() == 64);

impl TryLock {
    /// A new, unlocked lock.
    #[cfg(not(loom))]
    pub const fn new() -> Self {
        Self { state: AtomicU32::new(UNLOCKED) }
    }

    /// A new, unlocked lock (loom's atomics cannot be built in a `const fn`).
    #[cfg(loom)]
    pub fn new() -> Self {
        Self { state: AtomicU32::new(UNLOCKED) }
    }

    /// Takes the lock if it is free, with one compare-and-exchange; never waits.
    ///
    /// `None` means another holder has it right now (a "busy try" in Metronome's terms).
    #[inline]
    pub fn try_lock(&self) -> Option<TryLockGuard<'_>> {
        match self.state.compare_exchange(UNLOCKED, LOCKED, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Some(TryLockGuard { lock: self }),
            Err(_) => None,
        }
    }

    /// [`TryLock::try_lock`] as `holder`: the lock word names it until the guard is dropped
    /// (or the lock revoked from it), for [`TryLock::holder`] and [`TryLock::revoke`].
    #[inline]
    pub fn try_lock_as(&self, holder: Holder) -> Option<TryLockGuard<'_>> {
        match self.state.compare_exchange(UNLOCKED, holder.tag().max(LOCKED), Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Some(TryLockGuard { lock: self }),
            Err(_) => None,
        }
    }

    /// Whether some holder has the lock at this instant (a racy hint for statistics only:
    /// the answer may be stale by the time the caller looks at it).
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.state.load(Ordering::Relaxed) != UNLOCKED
    }

    /// The holder named in the lock word at this instant (`None`: free, or held
    /// anonymously). A racy reading, like [`TryLock::is_locked`]: only
    /// [`TryLock::revoke`] acts on it, atomically.
    #[inline]
    pub fn holder(&self) -> Option<Holder> {
        match self.state.load(Ordering::Relaxed) {
            UNLOCKED | LOCKED => None,
            tag => Some(Holder(tag)),
        }
    }

    /// Takes the lock from the holder `fenced` names if it holds it right now, and only then
    /// (one compare-and-exchange from its tag to held-anonymously: a lock it released
    /// meanwhile, and perhaps someone else took, is left alone). The caller gets the guard —
    /// the lock passes straight to it, no one else can slip in before it has repaired what
    /// the stopped holder may have left half-done — and releases it like any other. The
    /// stopped holder's guard, never dropped, can never be used again (the [`Fenced`]
    /// contract).
    ///
    /// Ordering: `Acquire` — the caller sees what the stopped holder wrote (its last stores
    /// reached the caller through the platform's acknowledgement too); the guard's `Release`
    /// drop publishes the caller's repairs to the next holder.
    pub fn revoke(&self, fenced: &Fenced) -> Option<TryLockGuard<'_>> {
        let tag = fenced.holder().tag();
        if tag <= LOCKED {
            return None;
        }
        match self.state.compare_exchange(tag, LOCKED, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => Some(TryLockGuard { lock: self }),
            Err(_) => None,
        }
    }
}

impl Default for TryLock {
    fn default() -> Self {
        Self::new()
    }
}

/// Proof that the holder owns a [`TryLock`]; dropping it releases the lock.
#[derive(Debug)]
#[must_use = "dropping the guard releases the lock at once"]
pub struct TryLockGuard<'a> {
    lock: &'a TryLock,
}

impl TryLockGuard<'_> {
    /// The lock this guard holds (to check that a guard belongs to a given queue).
    pub fn lock(&self) -> &TryLock {
        self.lock
    }
}

impl Drop for TryLockGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // Release: everything written while holding the lock happens-before the next
        // holder's successful (Acquire) exchange.
        self.lock.state.store(UNLOCKED, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn second_try_fails_until_the_guard_is_dropped() {
        let l = TryLock::new();
        assert!(!l.is_locked());
        let g = l.try_lock().expect("free lock");
        assert!(core::ptr::eq(g.lock(), &l));
        assert!(l.is_locked());
        assert!(l.try_lock().is_none());
        drop(g);
        assert!(!l.is_locked());
        assert!(l.try_lock().is_some());
    }

    #[test]
    fn a_lock_names_its_holder_and_only_a_fenced_holder_loses_it() {
        let l = TryLock::new();
        let (w1, w2) = (Holder::of(1), Holder::of(2));
        let g = l.try_lock_as(w1).expect("free lock");
        assert_eq!(l.holder(), Some(w1));
        assert!(l.try_lock_as(w2).is_none() && l.try_lock().is_none());
        // SAFETY: (test) worker 2 holds nothing; a proof for it revokes nothing.
        let other = unsafe { Fenced::new(w2) };
        assert!(l.revoke(&other).is_none(), "a lock its holder did not lose stays held");
        assert_eq!(l.holder(), Some(w1));
        // SAFETY: (test) `g` is forgotten below and never used again: worker 1 "stopped".
        let stopped = unsafe { Fenced::new(w1) };
        core::mem::forget(g);
        let taken = l.revoke(&stopped).expect("revoked");
        assert!(l.is_locked() && l.holder().is_none(), "passed straight to the revoker");
        assert!(l.try_lock().is_none(), "no one slips in before the revoker releases");
        assert!(l.revoke(&stopped).is_none(), "once");
        drop(taken);
        let g2 = l.try_lock_as(w2).expect("taken over");
        assert_eq!(l.holder(), Some(w2));
        drop(g2);
        // Anonymous holders cannot be revoked (nothing names them).
        let anon = l.try_lock().expect("free");
        assert!(l.is_locked() && l.holder().is_none());
        // SAFETY: (test) a proof naming the anonymous tag is refused by `revoke` itself.
        assert!(l.revoke(&unsafe { Fenced::new(Holder(1)) }).is_none());
        drop(anon);
    }

    #[test]
    fn locks_in_an_array_sit_on_distinct_cache_lines() {
        let locks = [TryLock::new(), TryLock::new(), TryLock::new()];
        let a = &locks[0] as *const TryLock as usize;
        let b = &locks[1] as *const TryLock as usize;
        assert_eq!(a % 64, 0);
        assert_eq!(b - a, 64);
    }

    #[test]
    fn threads_never_hold_the_lock_together() {
        use std::sync::atomic::AtomicUsize;
        let lock = TryLock::new();
        let inside = AtomicUsize::new(0);
        let wins = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..crate::testing::miri_or(20_000, 200) {
                        if let Some(_g) = lock.try_lock() {
                            assert_eq!(inside.fetch_add(1, Ordering::Relaxed), 0);
                            wins.fetch_add(1, Ordering::Relaxed);
                            inside.fetch_sub(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert!(wins.into_inner() > 0);
        assert!(!lock.is_locked());
    }
}

/// Model checking with loom: `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom
/// cargo test -p cadence-core --release sync`.
///
/// The protected "data" is a counter incremented non-atomically (a `Relaxed` load, then a
/// `Relaxed` store of the value plus one). Loom lets a `Relaxed` load return any value that the
/// memory model allows, so the counter ends equal to the number of wins only if the lock both
/// excludes concurrent holders and makes each release visible to the next holder.
#[cfg(all(test, loom))]
mod loom_tests {
    use super::TryLock;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    /// State shared by the model threads.
    struct Shared {
        lock: TryLock,
        /// Holders currently inside the critical section (RMW, so always the latest value).
        inside: AtomicUsize,
        /// The protected counter, only ever touched with `Relaxed` loads and stores.
        counter: AtomicUsize,
        /// Successful acquisitions.
        wins: AtomicUsize,
    }

    impl Shared {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                lock: TryLock::new(),
                inside: AtomicUsize::new(0),
                counter: AtomicUsize::new(0),
                wins: AtomicUsize::new(0),
            })
        }

        /// One Metronome round: one try; on a win, a non-atomic increment under the lock.
        fn round(&self) {
            if let Some(guard) = self.lock.try_lock() {
                assert_eq!(self.inside.fetch_add(1, Ordering::Relaxed), 0, "two holders at once");
                let v = self.counter.load(Ordering::Relaxed);
                self.counter.store(v + 1, Ordering::Relaxed);
                self.inside.fetch_sub(1, Ordering::Relaxed);
                self.wins.fetch_add(1, Ordering::Relaxed);
                drop(guard);
            }
        }
    }

    fn run(threads: usize, rounds: usize) {
        loom::model(move || {
            let s = Shared::new();
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let s = s.clone();
                    thread::spawn(move || {
                        for _ in 0..rounds {
                            s.round();
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().expect("model thread");
            }
            // Every release was observed by the next holder: no increment was lost.
            assert_eq!(s.counter.load(Ordering::Relaxed), s.wins.load(Ordering::Relaxed));
            assert!(s.wins.load(Ordering::Relaxed) >= 1, "the first try on a free lock wins");
            assert!(!s.lock.is_locked());
        });
    }

    #[test]
    fn sync_two_threads_exclusive_and_releases_observed() {
        run(2, 2);
    }

    #[test]
    fn sync_three_threads_exclusive_and_releases_observed() {
        run(3, 1);
    }

    #[test]
    fn sync_value_written_under_the_lock_is_seen_by_the_next_holder() {
        loom::model(|| {
            let s = Shared::new();
            // The first holder publishes a value, then a "released" marker, both Relaxed.
            let published = Arc::new(AtomicUsize::new(0));
            let p = published.clone();
            let s1 = s.clone();
            let writer = thread::spawn(move || {
                if let Some(g) = s1.lock.try_lock() {
                    s1.counter.store(42, Ordering::Relaxed);
                    p.store(1, Ordering::Relaxed);
                    drop(g);
                }
            });
            // A later holder that sees the marker must also see the value.
            if let Some(g) = s.lock.try_lock() {
                if published.load(Ordering::Relaxed) == 1 {
                    assert_eq!(s.counter.load(Ordering::Relaxed), 42);
                }
                drop(g);
            }
            writer.join().expect("writer");
        });
    }

    /// The tests above have teeth: the same protocol with a `Relaxed` acquire loses updates.
    #[test]
    #[should_panic(expected = "left == right")]
    fn sync_relaxed_lock_is_caught() {
        loom::model(|| {
            let lock = Arc::new(AtomicUsize::new(0));
            let counter = Arc::new(AtomicUsize::new(0));
            let wins = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..2)
                .map(|_| {
                    let (lock, counter, wins) = (lock.clone(), counter.clone(), wins.clone());
                    thread::spawn(move || {
                        for _ in 0..2 {
                            if lock.compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                                let v = counter.load(Ordering::Relaxed);
                                counter.store(v + 1, Ordering::Relaxed);
                                wins.fetch_add(1, Ordering::Relaxed);
                                lock.store(0, Ordering::Relaxed);
                            }
                        }
                    })
                })
                .collect();
            for h in hs {
                h.join().expect("model thread");
            }
            assert_eq!(counter.load(Ordering::Relaxed), wins.load(Ordering::Relaxed));
        });
    }
}
