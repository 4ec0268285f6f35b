//! Loom models of the Maglev table's publication (`lb::maglev::Table`: two buffers, each a
//! seqlock, and an `active` index): `cargo xtask test`, step "loom". Under loom the tables
//! have a few slots (`PRIMES` = 3, 5, 7, 11; M > N), which changes nothing in the protocol.
//!
//! Every backend's address and port carry its id in each of their three words, so a pick
//! that mixed two backends' words, or one table's slots with another's backend list, would
//! name no backend the writer ever published. What they prove, for every interleaving
//! within the preemption bound:
//! - **never torn**: a reader's pick is `Busy`, or exactly what one published table (the
//!   one in force before, or one the writer published meanwhile) gives for that hash;
//! - **two updates in a row** (the writer rewriting the very buffer a reader is in) make the
//!   reader retry, never mix;
//! - **not stale after release**: a reader that saw the writer's "done" flag (`Acquire`
//!   after the writer's `Release`) picks from the last table;
//! - a second writer racing the first is refused (`publish` returns `false`), never mixed in.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use super::maglev::{Pick, Table, Target, populate, table_size};
use crate::sync::{loom_model, loom_others_first};

const HASH: u64 = 0x9E37_79B9_7F4A_7C15;

fn backend(id: u8) -> Target {
    let w = u128::from(id) * 0x0101_0101_0101_0101;
    Target { addr: w << 64 | w, port: Some(u16::from(id) * 0x0101) }
}

/// What a table of `targets` gives for `HASH`.
fn expected(targets: &[Target]) -> Pick {
    let m = table_size(targets.len()).expect("size");
    let slot = populate(targets, m)[(HASH % u64::from(m)) as usize];
    Pick::Target(targets[slot as usize])
}

#[test]
fn lb_loom_maglev_reader_never_sees_a_torn_table() {
    loom_model(2, |others_first| {
        let t = Arc::new(Table::new(2));
        let first = [backend(1)];
        let second = [backend(2), backend(3)];
        let third = [backend(4)];
        assert!(t.publish(&first));
        let done = Arc::new(AtomicBool::new(false));
        let (t2, d2) = (t.clone(), done.clone());
        let w = thread::spawn(move || {
            assert!(t2.publish(&second));
            // The second update rewrites the buffer the reader may still be reading.
            assert!(t2.publish(&third));
            d2.store(true, Ordering::Release);
        });
        loom_others_first(others_first);
        let seen_done = done.load(Ordering::Acquire);
        let got = t.pick(HASH);
        let allowed = [expected(&first), expected(&second), expected(&third), Pick::Busy];
        assert!(allowed.contains(&got), "torn pick {got:?}");
        if seen_done {
            assert_eq!(got, expected(&third), "stale after the writer finished");
        }
        w.join().expect("writer");
        assert_eq!(t.pick(HASH), expected(&third));
    });
}

#[test]
fn lb_loom_maglev_second_writer_is_refused_not_mixed() {
    loom_model(2, |others_first| {
        let t = Arc::new(Table::new(2));
        let a = [backend(5)];
        let b = [backend(6), backend(7)];
        let t2 = t.clone();
        let w = thread::spawn(move || t2.publish(&b));
        loom_others_first(others_first);
        let mine = t.publish(&a);
        let theirs = w.join().expect("writer");
        assert!(mine || theirs, "both writers refused");
        let got = t.pick(HASH);
        match (mine, theirs) {
            (true, false) => assert_eq!(got, expected(&a)),
            (false, true) => assert_eq!(got, expected(&b)),
            _ => assert!(got == expected(&a) || got == expected(&b), "{got:?}"),
        }
    });
}
