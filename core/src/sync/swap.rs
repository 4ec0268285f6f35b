//! Configuration that the control plane replaces while workers read it ([`Swap`]).
//!
//! A table that a management command changes (the ACL's rules, the L3 forwarder's routes)
//! is rebuilt whole on the control core and published as a new version; each worker keeps a
//! [`Reader`] whose [`Reader::get`] costs one `Acquire` load per call while nothing changed
//! and takes the new version (one reference-count increment, no allocation) when something
//! did. Workers call it once per batch, so a change takes effect between two batches of each
//! worker: never in the middle of one, and never out of order for a lane (the lane's lock
//! orders one worker's batch before the next worker's, and a later batch sees a version at
//! least as new).
//!
//! Nothing is freed on a worker: [`Swap::publish`] hands the replaced version back to the
//! control plane, which keeps it in a [`Retired`] list and frees it only once no worker holds
//! it any more ([`Retired::collect`]), so the per-packet path never runs a destructor or
//! calls the allocator.
//!
//! Ordering: `publish` stores the new `Arc` under the mutex, then bumps the version with
//! `Release`; a reader that sees the new version (`Acquire`) and then takes the mutex reads
//! the new `Arc` (or a newer one). A reader that saw the old version keeps its old `Arc` one
//! more batch.

use alloc::sync::Arc;
use alloc::vec::Vec;

#[cfg(not(loom))]
use spin::Mutex;

use super::atomic::{AtomicU64, Ordering};
#[cfg(loom)]
use loom_mutex::Mutex;

/// Under `--cfg loom` the lock is loom's, with `spin`'s signature (`lock` cannot fail), so
/// that the model checker sees the lock readers and the control plane share
/// (`sync::loom_swap`).
#[cfg(loom)]
mod loom_mutex {
    pub(super) struct Mutex<T>(loom::sync::Mutex<T>);

    impl<T> Mutex<T> {
        pub(super) fn new(value: T) -> Self {
            Self(loom::sync::Mutex::new(value))
        }

        pub(super) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
            self.0.lock().unwrap_or_else(|e| e.into_inner())
        }
    }
}

/// A value the control plane replaces as a whole.
pub struct Swap<T> {
    current: Mutex<Arc<T>>,
    version: AtomicU64,
}

impl<T: core::fmt::Debug> core::fmt::Debug for Swap<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Swap").field("version", &self.version()).finish_non_exhaustive()
    }
}

impl<T> Swap<T> {
    /// Version 0 holding `value`.
    pub fn new(value: T) -> Self {
        Self { current: Mutex::new(Arc::new(value)), version: AtomicU64::new(0) }
    }

    /// How many times the value was replaced.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The current value (control plane, or a reader catching up).
    pub fn load(&self) -> Arc<T> {
        Arc::clone(&self.current.lock())
    }

    /// A reader positioned on the current version.
    pub fn reader(&self) -> Reader<T> {
        let version = self.version();
        Reader { version, value: self.load() }
    }

    /// Replaces the value; returns the version it replaced, for the caller to retire.
    pub fn publish(&self, value: Arc<T>) -> Arc<T> {
        let old = core::mem::replace(&mut *self.current.lock(), value);
        self.version.fetch_add(1, Ordering::Release);
        old
    }
}

/// One worker's view of a [`Swap`].
#[derive(Debug)]
pub struct Reader<T> {
    version: u64,
    value: Arc<T>,
}

impl<T> Reader<T> {
    /// The newest value: one `Acquire` load when nothing changed since the last call.
    pub fn get(&mut self, swap: &Swap<T>) -> &T {
        let v = swap.version();
        if v != self.version {
            // Only the control plane frees a version (`Retired`): dropping the old `Arc`
            // here decrements its count, it is never the last one.
            self.value = swap.load();
            self.version = v;
        }
        &self.value
    }

    /// The value this reader last took, without looking for a newer one.
    pub fn held(&self) -> &T {
        &self.value
    }

    /// The version this reader last took.
    pub fn version(&self) -> u64 {
        self.version
    }
}

/// Replaced versions waiting until no reader holds them (control plane only).
#[derive(Debug)]
pub struct Retired<T> {
    list: Vec<Arc<T>>,
}

impl<T> Default for Retired<T> {
    fn default() -> Self {
        Self { list: Vec::new() }
    }
}

impl<T> Retired<T> {
    /// Keeps `old` until [`Retired::collect`] finds it unreferenced.
    pub fn push(&mut self, old: Arc<T>) {
        self.list.push(old);
    }

    /// Frees every version no reader holds any more; returns how many are still held.
    pub fn collect(&mut self) -> usize {
        self.list.retain(|a| Arc::strong_count(a) > 1);
        self.list.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_see_a_new_version_at_their_next_get_and_never_free_it() {
        let swap = Swap::new(1u32);
        let mut r = swap.reader();
        assert_eq!(*r.get(&swap), 1);
        let mut retired = Retired::default();
        retired.push(swap.publish(Arc::new(2)));
        // The reader still holds version 0 until it asks again.
        assert_eq!(*r.held(), 1);
        assert_eq!(retired.collect(), 1);
        assert_eq!(*r.get(&swap), 2);
        assert_eq!(r.version(), 1);
        // Now nobody holds version 0: the control plane frees it.
        assert_eq!(retired.collect(), 0);
        retired.push(swap.publish(Arc::new(3)));
        drop(r);
        assert_eq!(retired.collect(), 0);
        assert_eq!(*swap.load(), 3);
    }

    #[test]
    fn a_reader_on_another_thread_takes_every_version_in_order() {
        let swap = Arc::new(Swap::new(0u64));
        let s2 = Arc::clone(&swap);
        let t = std::thread::spawn(move || {
            let mut r = s2.reader();
            let mut last = *r.get(&s2);
            while last < 1000 {
                let v = *r.get(&s2);
                assert!(v >= last, "went back from {last} to {v}");
                last = v;
            }
        });
        let mut retired = Retired::default();
        for v in 1..=1000u64 {
            retired.push(swap.publish(Arc::new(v)));
            retired.collect();
        }
        t.join().unwrap();
        assert_eq!(retired.collect(), 0);
    }
}
