//! Loom models of the Accounting export ring (`accounting::ring`, a bounded Vyukov MPMC
//! queue of 9-word flow records): `cargo xtask test`, step "loom".
//!
//! What they prove, for every interleaving within the preemption bound:
//! - **never torn**: every word of a popped record carries the same value (the producer
//!   writes all nine with `Relaxed` stores and publishes them with one `Release`);
//! - **exactly once**: a record whose `push` returned `true` is popped exactly once (during
//!   the race or when the ring is drained afterwards), one whose `push` returned `false`
//!   (full ring) never appears;
//! - **per-producer order**: two records of one producer come out in the order pushed;
//! - `has_room` is exact once the producers are done.

use loom::sync::Arc;
use loom::thread;

use super::ring::{Ring, WORDS};
use crate::sync::{loom_model, loom_others_first};

fn record(id: u64) -> [u64; WORDS] {
    [id; WORDS]
}

/// The record's id, after checking that it is not torn.
fn id_of(rec: &[u64; WORDS]) -> u64 {
    assert!(rec.iter().all(|w| *w == rec[0]), "torn record {rec:?}");
    rec[0]
}

#[test]
fn accounting_loom_export_ring_two_producers_one_consumer() {
    loom_model(2, |others_first| {
        let ring = Arc::new(Ring::try_new(2).expect("a 2-cell ring"));
        assert_eq!(ring.capacity(), 2);
        let r2 = ring.clone();
        // Producer A pushes records 1 then 2; producer B (this thread) pushes 3, then pops.
        let a = thread::spawn(move || [r2.push(&record(1)), r2.push(&record(2))]);
        loom_others_first(others_first);
        let pushed_b = ring.push(&record(3));
        let mut got = Vec::new();
        if let Some(rec) = ring.pop() {
            got.push(id_of(&rec));
        }
        let pushed_a = a.join().expect("producer");
        while let Some(rec) = ring.pop() {
            got.push(id_of(&rec));
        }
        assert!(ring.has_room());
        let mut want: Vec<u64> = [(1, pushed_a[0]), (2, pushed_a[1]), (3, pushed_b)]
            .iter()
            .filter(|(_, ok)| *ok)
            .map(|(id, _)| *id)
            .collect();
        let mut sorted = got.clone();
        sorted.sort_unstable();
        want.sort_unstable();
        assert_eq!(sorted, want, "pushed {pushed_a:?} {pushed_b}, popped {got:?}");
        let pos = |id| got.iter().position(|g| *g == id);
        if let (Some(p1), Some(p2)) = (pos(1), pos(2)) {
            assert!(p1 < p2, "producer A's records out of order: {got:?}");
        }
    });
}

/// A full ring refuses, and a consumer racing the producer frees exactly the cells it took.
#[test]
fn accounting_loom_export_ring_full_then_drained_concurrently() {
    loom_model(3, |others_first| {
        let ring = Arc::new(Ring::try_new(2).expect("a 2-cell ring"));
        assert!(ring.push(&record(1)) && ring.push(&record(2)));
        assert!(!ring.has_room());
        let r2 = ring.clone();
        let c = thread::spawn(move || r2.pop().map(|r| id_of(&r)));
        loom_others_first(others_first);
        let pushed = ring.push(&record(3));
        let first = c.join().expect("consumer");
        // The consumer takes the oldest record or finds none it can claim yet; never 3 first.
        assert!(first.is_none() || first == Some(1), "{first:?}");
        let mut rest = Vec::new();
        while let Some(rec) = ring.pop() {
            rest.push(id_of(&rec));
        }
        let all: Vec<u64> = first.into_iter().chain(rest).collect();
        let expect: Vec<u64> = if pushed { vec![1, 2, 3] } else { vec![1, 2] };
        assert_eq!(all, expect, "FIFO, each record once");
    });
}
