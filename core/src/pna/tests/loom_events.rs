//! Loom models of [`EventRing`], the bounded MPMC ring of `NotifyControl` expiry reports:
//! `cargo xtask test`, step "loom".
//!
//! What they prove, for every interleaving within the preemption bound:
//! - **never torn**: a popped event's key, action, profile and deadline all belong to one
//!   pushed event (each event's fields are derived from its key);
//! - **exactly once**: an event whose `push` returned `true` is popped exactly once, by
//!   exactly one of two racing consumers or when the ring is drained afterwards; one whose
//!   `push` returned `false` is never popped and is counted in `overflows`;
//! - **per-producer order** is kept.

use loom::sync::Arc;
use loom::thread;

use crate::pna::events::{EventRing, ExpiryEvent};
use crate::sync::{loom_model, loom_others_first};
use crate::time::Instant;

fn ev(k: u64) -> ExpiryEvent<1> {
    ExpiryEvent { key: [k], action: k as u8, profile: (k as u8) ^ 0x5A, deadline: Instant(k * 10) }
}

/// The event's key, after checking that every field belongs to it.
fn key_of(e: &ExpiryEvent<1>) -> u64 {
    assert_eq!(*e, ev(e.key[0]), "torn event");
    e.key[0]
}

fn check(pushed: &[(u64, bool)], got: &[u64], overflows: u64) {
    let mut want: Vec<u64> = pushed.iter().filter(|(_, ok)| *ok).map(|(k, _)| *k).collect();
    let mut sorted = got.to_vec();
    sorted.sort_unstable();
    want.sort_unstable();
    assert_eq!(sorted, want, "pushed {pushed:?}, popped {got:?}");
    assert_eq!(overflows, pushed.iter().filter(|(_, ok)| !*ok).count() as u64, "every refused push is counted");
}

/// Two sweepers report at once while the control plane pops.
#[test]
fn pna_loom_event_ring_two_producers_one_consumer() {
    loom_model(2, |others_first| {
        let ring = Arc::new(EventRing::<1>::new(2));
        let r2 = ring.clone();
        let a = thread::spawn(move || [(1, r2.push(&ev(1))), (2, r2.push(&ev(2)))]);
        loom_others_first(others_first);
        let b = (3, ring.push(&ev(3)));
        let mut got: Vec<u64> = ring.pop().iter().map(key_of).collect();
        let pa = a.join().expect("producer");
        while let Some(e) = ring.pop() {
            got.push(key_of(&e));
        }
        check(&[pa[0], pa[1], b], &got, ring.overflows());
        let pos = |k| got.iter().position(|g| *g == k);
        if let (Some(p1), Some(p2)) = (pos(1), pos(2)) {
            assert!(p1 < p2, "one producer's reports out of order: {got:?}");
        }
    });
}

/// Two consumers race for the same reports: each event goes to exactly one of them.
#[test]
fn pna_loom_event_ring_two_consumers_never_share_an_event() {
    loom_model(3, |others_first| {
        let ring = Arc::new(EventRing::<1>::new(2));
        assert!(ring.push(&ev(1)));
        let r2 = ring.clone();
        let c = thread::spawn(move || r2.pop().map(|e| key_of(&e)));
        loom_others_first(others_first);
        let pushed = (2, ring.push(&ev(2)));
        let mine = ring.pop().map(|e| key_of(&e));
        let theirs = c.join().expect("consumer");
        let mut got: Vec<u64> = mine.into_iter().chain(theirs).collect();
        while let Some(e) = ring.pop() {
            got.push(key_of(&e));
        }
        check(&[(1, true), pushed], &got, ring.overflows());
    });
}
