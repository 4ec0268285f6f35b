//! Model checking of the exact table's bucket seqlock with loom:
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p cadence-core --release pna`.
//!
//! A one-bucket table (every key collides) with two-word parameters whose words are always equal,
//! so a torn read would show unequal words. "Stale after release": once a reader has seen (with
//! `Acquire`) a flag that the writer set (`Release`) after its operation returned, the reader's
//! lookup must see the operation's effect.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

use crate::pna::exact::{ExactConfig, ExactTable, Lookup};
use crate::pna::{AddStatus, IdleTimeout, NotDone};
use crate::time::Instant;

type T = ExactTable<1, 2>;
const NOW: Instant = Instant(1);

fn table(capacity: usize) -> Arc<T> {
    let mut cfg = ExactConfig::new(capacity);
    cfg.buckets = 1;
    cfg.event_ring = 2;
    cfg.idle_timeout = IdleTimeout::AutoDelete;
    Arc::new(T::new(cfg))
}

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(f);
}

fn params_of(l: &Lookup<1, 2>) -> Option<[u64; 2]> {
    l.hit().map(|h| h.params)
}

#[test]
fn pna_loom_insert_vs_lookup_never_torn() {
    model(|| {
        let t = table(4);
        let done = Arc::new(AtomicBool::new(false));
        let (t2, d2) = (t.clone(), done.clone());
        let w = thread::spawn(move || {
            let mut local = t2.local();
            assert_eq!(t2.insert(&mut local, &[7], 0, &[5, 5], 0, NOW), AddStatus::Success);
            d2.store(true, Ordering::Release);
        });
        let mut local = t.local();
        let seen_done = done.load(Ordering::Acquire);
        let got = params_of(&t.lookup(&mut local, &[7], NOW));
        assert!(got.is_none() || got == Some([5, 5]), "torn or wrong: {got:?}");
        if seen_done {
            assert_eq!(got, Some([5, 5]), "insert finished before the lookup but was not seen");
        }
        w.join().expect("writer");
        assert_eq!(params_of(&t.lookup(&mut local, &[7], NOW)), Some([5, 5]));
    });
}

#[test]
fn pna_loom_update_vs_burst_lookup_never_torn_or_stale() {
    model(|| {
        let t = table(4);
        let mut local = t.local();
        assert!(t.insert(&mut local, &[3], 0, &[1, 1], 0, NOW).is_success());
        let h = t.lookup(&mut local, &[3], NOW).hit().expect("present").handle;
        let done = Arc::new(AtomicBool::new(false));
        let (t2, d2) = (t.clone(), done.clone());
        let w = thread::spawn(move || {
            let mut local = t2.local();
            assert_eq!(t2.update_params(&mut local, &h, &[2, 2], NOW), Ok(()));
            d2.store(true, Ordering::Release);
        });
        let seen_done = done.load(Ordering::Acquire);
        let mut out = [Lookup::EMPTY; 1];
        t.lookup_burst(&mut local, &[[3]], NOW, &mut out);
        let got = params_of(&out[0]);
        assert!(got == Some([1, 1]) || got == Some([2, 2]) || got.is_none(), "torn: {got:?}");
        if seen_done {
            assert_eq!(got, Some([2, 2]), "stale after release");
        }
        w.join().expect("writer");
    });
}

#[test]
fn pna_loom_delete_vs_lookup_not_stale_after_release() {
    model(|| {
        let t = table(4);
        let mut local = t.local();
        assert!(t.insert(&mut local, &[9], 0, &[4, 4], 0, NOW).is_success());
        let done = Arc::new(AtomicBool::new(false));
        let (t2, d2) = (t.clone(), done.clone());
        let w = thread::spawn(move || {
            let mut local = t2.local();
            assert_eq!(t2.delete(&mut local, &[9], NOW), Ok(()));
            d2.store(true, Ordering::Release);
        });
        let seen_done = done.load(Ordering::Acquire);
        let got = params_of(&t.lookup(&mut local, &[9], NOW));
        assert!(got.is_none() || got == Some([4, 4]));
        if seen_done {
            assert_eq!(got, None, "deleted entry seen after the delete returned");
        }
        w.join().expect("writer");
    });
}

#[test]
fn pna_loom_two_inserters_one_slot_of_capacity() {
    model(|| {
        let t = table(1);
        let t2 = t.clone();
        let w = thread::spawn(move || {
            let mut local = t2.local();
            let r = t2.insert(&mut local, &[1], 0, &[1, 1], 0, NOW);
            t2.retire_local(&mut local);
            r
        });
        let mut local = t.local();
        let a = t.insert(&mut local, &[2], 0, &[2, 2], 0, NOW);
        t.retire_local(&mut local);
        let b = w.join().expect("writer");
        let ok = [a, b].iter().filter(|s| s.is_success()).count();
        let full = [a, b].iter().filter(|s| **s == AddStatus::NotDone(NotDone::TableFull)).count();
        let busy = [a, b].iter().filter(|s| **s == AddStatus::NotDone(NotDone::Busy)).count();
        // Exactly one wins the one unit of capacity; the other is told why (a full table, or
        // under loom's tiny spin bound a busy bucket), never a panic and never two entries.
        assert!(ok <= 1 && ok + full + busy == 2, "{a:?} {b:?}");
        assert_eq!(t.count(NOW), ok);
        assert_eq!(t.used_capacity(), ok);
    });
}

/// The add that follows a burst lookup's miss starts from the lookup's snapshot
/// (`insert_seen`) only if no writer entered the bucket since: two cores that both missed the
/// same key add it once; a writer between one core's lookup and its add (another key, same
/// bucket) sends that add down the full path, and both keys end up stored.
#[test]
fn pna_loom_add_after_burst_miss_races() {
    model(|| {
        let t = table(2 * crate::pna::exact::CHUNK); // each local's reserve is one chunk
        let t2 = t.clone();
        let w = thread::spawn(move || {
            let mut local = t2.local();
            let mut out = [Lookup::EMPTY; 1];
            t2.lookup_burst(&mut local, &[[5]], NOW, &mut out);
            let r = match &out[0] {
                Lookup::Miss(m) => t2.add_on_miss(&mut local, m, 0, &[5, 5], 0, NOW),
                Lookup::Hit(_) => AddStatus::NotDone(NotDone::KeyExists),
            };
            t2.retire_local(&mut local);
            r
        });
        let mut local = t.local();
        let mut out = [Lookup::EMPTY; 1];
        t.lookup_burst(&mut local, &[[5]], NOW, &mut out);
        let a = match &out[0] {
            Lookup::Miss(m) => t.add_on_miss(&mut local, m, 0, &[5, 5], 0, NOW),
            Lookup::Hit(_) => AddStatus::NotDone(NotDone::KeyExists),
        };
        t.retire_local(&mut local);
        let b = w.join().expect("adder");
        let ok = [a, b].iter().filter(|s| s.is_success()).count();
        let lost =
            [a, b].iter().filter(|s| matches!(s, AddStatus::NotDone(NotDone::KeyExists | NotDone::Busy))).count();
        assert!(ok <= 1 && ok + lost == 2, "{a:?} {b:?}");
        let mut local = t.local();
        assert_eq!(t.count(NOW), ok, "the key is stored once at most");
        assert_eq!(params_of(&t.lookup(&mut local, &[5], NOW)).is_some(), ok == 1);
    });
}

#[test]
fn pna_loom_writer_between_burst_miss_and_add() {
    model(|| {
        let t = table(2 * crate::pna::exact::CHUNK); // each local's reserve is one chunk
        let mut local = t.local();
        let mut out = [Lookup::EMPTY; 1];
        t.lookup_burst(&mut local, &[[6]], NOW, &mut out);
        let Lookup::Miss(miss) = out[0] else { panic!("an empty table hits") };
        let t2 = t.clone();
        let w = thread::spawn(move || {
            let mut local = t2.local();
            let r = t2.insert(&mut local, &[8], 0, &[8, 8], 0, NOW);
            t2.retire_local(&mut local);
            r
        });
        let a = t.add_on_miss(&mut local, &miss, 0, &[6, 6], 0, NOW);
        let b = w.join().expect("writer");
        t.retire_local(&mut local);
        // Under loom's tiny spin bound a lock may give up (`Busy`); whatever was added is
        // there, and neither add overwrote the other's way.
        for (r, k, p) in [(a, 6, [6, 6]), (b, 8, [8, 8])] {
            assert!(r.is_success() || r == AddStatus::NotDone(NotDone::Busy), "{r:?}");
            let got = params_of(&t.lookup(&mut local, &[k], NOW));
            assert_eq!(got, r.is_success().then_some(p), "key {k}");
        }
    });
}
