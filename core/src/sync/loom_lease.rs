//! Loom model of taking a lane over from a worker that stopped inside its round
//! (`TryLock::revoke`, `Fenced`; the firmware's watchdog does it, `firmware/src/forward/`).
//!
//! The worker holds the lane's lock (named in the lock word) and updates two fields of the
//! lane together inside a driver call (`in_driver` set around it), as a ring's index and its
//! descriptor. The platform stops it asynchronously: between any two of its steps it may find
//! the fence request, acknowledge (`Release`) and never run again — the model's stand-in for
//! an NMI or a signal that halts the core or thread where it is. The taker requests the fence,
//! waits (boundedly) for the acknowledgement (`Acquire`), and then, only if the worker was not
//! inside a driver call, revokes its lock, takes it, and uses the lane.
//!
//! Checked for every interleaving within the bound: the taker never touches the lane while
//! the worker can (loom's `UnsafeCell` tracking), it only takes over a consistent lane (both
//! fields equal), a lock the worker released itself is never revoked, and when the worker
//! stopped outside the driver the lane is always taken over. Teeth: checking `in_driver`
//! after the acknowledgement is what keeps a half-written lane from the taker (drop the check
//! and the model fails), and the acknowledgement's `Release`/`Acquire` pair is what makes the
//! worker's last `in_driver` store visible to it.

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use super::{Fenced, Holder, TryLock};

/// The worker's holder tag.
const WORKER: Holder = Holder::of(1);

struct Lane {
    lock: TryLock,
    /// The two fields a driver call updates together (ring index, descriptor).
    ring: UnsafeCell<(u32, u32)>,
    in_driver: AtomicBool,
    fence_request: AtomicBool,
    fenced: AtomicBool,
}

impl Lane {
    /// The platform's asynchronous stop, where it may land: acknowledges and tells the
    /// worker to stop for good.
    fn stopped_here(&self) -> bool {
        if self.fence_request.load(Ordering::Relaxed) {
            self.fenced.store(true, Ordering::Release);
            return true;
        }
        false
    }
}

/// The worker's round; returns whether it was stopped inside it.
fn worker(l: &Lane) -> bool {
    let Some(guard) = l.lock.try_lock_as(WORKER) else { return false };
    // The driver call: both fields, `in_driver` around them.
    l.in_driver.store(true, Ordering::Relaxed);
    if l.stopped_here() {
        core::mem::forget(guard);
        return true;
    }
    // SAFETY: loom tracks the access; the lock (or, after a take-over, the fence) excludes others.
    l.ring.with_mut(|r| unsafe { (*r).0 += 1 });
    if l.stopped_here() {
        core::mem::forget(guard);
        return true;
    }
    // SAFETY: as above.
    l.ring.with_mut(|r| unsafe { (*r).1 += 1 });
    l.in_driver.store(false, Ordering::Relaxed);
    // The stage: no lane access.
    if l.stopped_here() {
        core::mem::forget(guard);
        return true;
    }
    drop(guard);
    // A worker that finished its round still gets the signal later (it is asynchronous).
    l.stopped_here();
    false
}

/// The taker: `Some(true)` when it took the lane over, `Some(false)` when the worker stopped
/// inside a driver call (the lane is lost), `None` when no acknowledgement came.
fn taker(l: &Lane, others_first: bool) -> Option<bool> {
    super::loom_others_first(others_first);
    l.fence_request.store(true, Ordering::Relaxed);
    for _ in 0..3 {
        if l.fenced.load(Ordering::Acquire) {
            // SAFETY: the worker acknowledged and runs no further step (the model's `return`).
            let proof = unsafe { Fenced::new(WORKER) };
            if l.in_driver.load(Ordering::Relaxed) {
                return Some(false);
            }
            let Some(_g) = l.lock.revoke(&proof) else {
                // It had released the lock itself: nothing to take over.
                assert!(l.lock.holder() != Some(WORKER));
                return None;
            };
            l.ring.with_mut(|r| {
                // SAFETY: loom tracks this access; the model asserts it never races.
                let (a, b) = unsafe { *r };
                assert_eq!(a, b, "took over a lane left half-written");
            });
            return Some(true);
        }
        thread::yield_now();
    }
    None
}

#[test]
fn lease_loom_a_stopped_holders_lane_is_taken_over_only_when_consistent() {
    super::loom_model(3, |others_first| {
        let l = Arc::new(Lane {
            lock: TryLock::new(),
            ring: UnsafeCell::new((0, 0)),
            in_driver: AtomicBool::new(false),
            fence_request: AtomicBool::new(false),
            fenced: AtomicBool::new(false),
        });
        let w = {
            let l = l.clone();
            thread::spawn(move || worker(&l))
        };
        let took = taker(&l, others_first);
        let stopped_inside = w.join().expect("worker");
        match took {
            // A take-over happened only from a worker stopped inside its round.
            Some(true) => assert!(stopped_inside),
            Some(false) => assert!(stopped_inside && l.lock.holder() == Some(WORKER), "a lost lane stays held"),
            None => {}
        }
        if stopped_inside && l.fenced.load(Ordering::Acquire) && !l.in_driver.load(Ordering::Relaxed) {
            // Stopped outside a driver call, acknowledged in time: the taker must have taken it.
            assert!(took != Some(false));
        }
    });
}
