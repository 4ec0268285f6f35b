//! Loom models of the URL filter's slab leases (`urlfilter::slab`): `cargo xtask test`, step
//! "loom". One slab of 64 bytes, leases of 10 ticks; each model thread passes its own `now`,
//! as cores do. What they prove, for every interleaving within the preemption bound:
//! - **one owner at a time**: two cores claiming the free slab at once: exactly one gets it;
//! - **a lease that moved on is always detected**: an owner whose lease expired and was
//!   claimed by another core fails its renewal, and never both renews and loses the slab;
//! - **a stale renewal leaves the new owner's lease alone**: the new owner keeps the deadline
//!   its claim published (a renewal that answers `false` has changed nothing);
//! - **hand-over is clean**: bytes the previous owner wrote before releasing are gone from
//!   the new owner's view (its claim cleared the bitmap after the release, `Acquire` after
//!   `Release`), whatever the order of the previous owner's last stores.

use loom::sync::Arc;
use loom::thread;

use super::slab::Slabs;
use crate::sync::{loom_model, loom_others_first};
use crate::time::{Duration, Instant};

const TTL: Duration = Duration(10);

fn slabs() -> Arc<Slabs> {
    Arc::new(Slabs::try_new(1, 64).expect("slab"))
}

#[test]
fn urlfilter_loom_two_claims_one_owner() {
    loom_model(3, |others_first| {
        let s = slabs();
        let s2 = s.clone();
        let other = thread::spawn(move || s2.claim(&mut 0, Instant(1), TTL));
        loom_others_first(others_first);
        let mine = s.claim(&mut 0, Instant(1), TTL);
        let theirs = other.join().expect("claimer");
        assert!(mine.is_some() != theirs.is_some(), "{mine:?} {theirs:?}");
        let r = mine.or(theirs).expect("one claim");
        assert_eq!(r.generation, 1);
        assert!(s.renew(r, Instant(2), TTL));
        assert_eq!(s.in_use(Instant(2)), 1);
    });
}

#[test]
fn urlfilter_loom_stale_renewal_detected_and_harmless() {
    loom_model(3, |others_first| {
        let s = slabs();
        // The old owner claimed at 0: its lease runs to 10.
        let old = s.claim(&mut 0, Instant(0), TTL).expect("free slab");
        let s2 = s.clone();
        // Another core at 12 sees the lease expired and claims (deadline 22).
        let claimer = thread::spawn(move || s2.claim(&mut 0, Instant(12), TTL));
        loom_others_first(others_first);
        // The old owner, late, renews as if it were 5 (deadline 15).
        let renewed = s.renew(old, Instant(5), TTL);
        let claimed = claimer.join().expect("claimer");
        match (renewed, claimed) {
            (true, None) => assert_eq!(s.in_use(Instant(14)), 1, "renewed to 15"),
            (false, Some(new)) => {
                assert_eq!(new.generation, old.generation + 1);
                // The new owner's lease is the one it published (22), not the stale 15.
                assert_eq!(s.in_use(Instant(21)), 1, "a failed renewal shortened the new owner's lease");
                assert!(s.renew(new, Instant(13), TTL));
            }
            other => panic!("renewal and claim disagree: {other:?}"),
        }
    });
}

#[test]
fn urlfilter_loom_release_then_claim_hands_over_a_clean_window() {
    loom_model(3, |others_first| {
        let s = slabs();
        let old = s.claim(&mut 0, Instant(0), TTL).expect("free slab");
        let s2 = s.clone();
        let owner = thread::spawn(move || {
            // The owner's last packet: renew, write, release.
            assert!(s2.renew(old, Instant(1), TTL));
            s2.write(old, 0, b"G");
            s2.release(old);
        });
        loom_others_first(others_first);
        // Another core at 2 (before the lease would expire) claims when the slab is free.
        let new = s.claim(&mut 0, Instant(2), TTL);
        owner.join().expect("owner");
        if let Some(new) = new {
            let mut out = [0u8; 4];
            assert_eq!(s.read_prefix(new, &mut out), 0, "the previous owner's bytes leaked into a new claim");
            assert_eq!(s.write(new, 0, b"P"), (1, true));
            assert_eq!(s.read_prefix(new, &mut out), 1);
            assert_eq!(out[0], b'P');
        } else {
            assert_eq!(s.in_use(Instant(2)), 0, "released");
        }
    });
}
