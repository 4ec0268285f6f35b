//! Loom models of the expiry path of an exact table under `NotifyControl`: the sweep that
//! reports an expired entry, the consumer that [`take`](crate::pna::exact::ExactTable::take)s
//! it ("delete it if it is still expired"), and data-plane writers on the same bucket
//! (`restart_expire_timer`, `update_params`): `cargo xtask test`, step "loom".
//!
//! One bucket (every key collides), one entry, profile 1 = 10 ticks. What they prove, for
//! every interleaving within the preemption bound:
//! - **reported once, taken once**: two sweepers racing over the expired entry put exactly
//!   one report on the event ring; the consumer that acts on it takes the entry exactly once
//!   (retrying on `Busy`, as NAT and Accounting do through their pending lists), and a
//!   second taker of the same key gets `NotFound`;
//! - **a refresh between report and take keeps it**: if the data plane restarts the timer
//!   before the take, the take answers `Kept` and the entry stays with its new deadline,
//!   its report mark cleared (the next sweep reports it again); if the take comes first, the
//!   refresh finds nothing. Never both a successful refresh and a successful take;
//! - **no torn entry**: an update racing the sweep and the take is seen whole or not at all,
//!   and a successful update before the take is in what the take returns.

use loom::sync::Arc;
use loom::thread;

use crate::pna::exact::{ExactConfig, ExactTable, Take};
use crate::pna::{EntryError, IdleTimeout};
use crate::sync::{loom_model, loom_others_first};
use crate::time::{Duration, Instant};

type T = ExactTable<1, 2>;
const KEY: [u64; 1] = [7];
const PROFILE: u8 = 1;

/// A one-bucket `NotifyControl` table holding `KEY` → [1, 1], inserted at 0 (deadline 10).
fn table() -> Arc<T> {
    let mut cfg = ExactConfig::new(2);
    cfg.buckets = 1;
    cfg.event_ring = 2;
    cfg.idle_timeout = IdleTimeout::NotifyControl;
    let t = T::new(cfg);
    t.set_expire_profile(PROFILE, Duration(10));
    let mut local = t.local();
    assert!(t.insert(&mut local, &KEY, 0, &[1, 1], PROFILE, Instant(0)).is_success());
    Arc::new(t)
}

/// Takes `KEY` if it is still expired at `now`, retrying while the bucket is busy.
fn take_if_expired(t: &T, now: u64) -> Result<crate::pna::exact::Entry<1, 2>, Take<1, 2>> {
    let mut local = t.local();
    loop {
        match t.take(&mut local, &KEY, |e| e.deadline.is_some_and(|d| d.ticks() <= now)) {
            Err(Take::Busy) => thread::yield_now(),
            r => return r,
        }
    }
}

#[test]
fn pna_loom_two_sweeps_report_once_and_the_entry_is_taken_once() {
    loom_model(2, |others_first| {
        let t = table();
        let t2 = t.clone();
        let s = thread::spawn(move || {
            let mut local = t2.local();
            t2.sweep(&mut local, Instant(20), 0, 1);
        });
        loom_others_first(others_first);
        let mut local = t.local();
        t.sweep(&mut local, Instant(20), 0, 1);
        s.join().expect("sweeper");
        let ev = t.events().pop().expect("the expired entry was reported");
        assert_eq!(ev.key, KEY);
        assert_eq!(ev.deadline, Instant(10));
        assert!(t.events().pop().is_none(), "reported twice");
        assert_eq!(t.events().overflows(), 0);
        let e = take_if_expired(&t, 20).expect("still expired: taken");
        assert_eq!((e.params, e.notified), ([1, 1], true));
        assert_eq!(take_if_expired(&t, 20), Err(Take::NotFound), "taken twice");
    });
}

#[test]
fn pna_loom_sweep_races_the_consumer_and_a_second_taker() {
    loom_model(2, |others_first| {
        let t = table();
        let t2 = t.clone();
        // A second worker that found the same key on its own pending list.
        let other = thread::spawn(move || take_if_expired(&t2, 20));
        loom_others_first(others_first);
        let mut local = t.local();
        t.sweep(&mut local, Instant(20), 0, 1);
        let mine = t.events().pop().map(|ev| take_if_expired(&t, ev.deadline.ticks() + 10));
        let theirs = other.join().expect("taker");
        let taken = [mine.as_ref().is_some_and(Result::is_ok), theirs.is_ok()];
        assert_eq!(taken.iter().filter(|t| **t).count(), 1, "taken once: {mine:?} {theirs:?}");
        // The sweep reports at most once; if the other taker came first there is nothing to report.
        assert!(t.events().pop().is_none());
        assert!(t.get(&KEY, Instant(20)).is_none());
    });
}

#[test]
fn pna_loom_refresh_between_report_and_take_keeps_the_entry() {
    loom_model(3, |others_first| {
        let t = table();
        let mut local = t.local();
        // The report is out before the race: the consumer acts on it at time 30.
        t.sweep(&mut local, Instant(20), 0, 1);
        let ev = t.events().pop().expect("reported");
        let handle = t.lookup(&mut local, &KEY, Instant(25)).hit().expect("NotifyControl keeps it matchable").handle;
        let t2 = t.clone();
        // A packet of the flow at 25 restarts the timer: new deadline 35.
        let r = thread::spawn(move || {
            let mut local = t2.local();
            t2.restart_expire_timer(&mut local, &handle, Instant(25))
        });
        loom_others_first(others_first);
        let took = take_if_expired(&t, 30);
        let refreshed = r.join().expect("refresher");
        match (&took, refreshed) {
            (Ok(e), Err(EntryError::NotFound)) => {
                assert_eq!(e.key, ev.key);
                assert!(t.get(&KEY, Instant(30)).is_none());
            }
            (Err(Take::Kept(e)), Ok(())) => {
                assert_eq!(e.deadline, Some(Instant(35)), "kept as refreshed");
                let now = t.get(&KEY, Instant(30)).expect("kept");
                assert!(!now.notified, "its report mark is cleared");
                // ... so its next expiry is reported again, once.
                t.sweep(&mut local, Instant(40), 0, 1);
                assert_eq!(t.events().pop().map(|e| e.deadline), Some(Instant(35)));
                assert!(t.events().pop().is_none());
            }
            other => panic!("refresh and take disagree: {other:?}"),
        }
    });
}

#[test]
fn pna_loom_update_racing_sweep_and_take_is_never_torn() {
    loom_model(2, |others_first| {
        let t = table();
        let mut local = t.local();
        let handle = t.lookup(&mut local, &KEY, Instant(0)).hit().expect("present").handle;
        let t2 = t.clone();
        let u = thread::spawn(move || {
            let mut local = t2.local();
            t2.update_params(&mut local, &handle, &[2, 2], Instant(15))
        });
        loom_others_first(others_first);
        t.sweep(&mut local, Instant(20), 0, 1);
        let took = t.events().pop().map(|_| take_if_expired(&t, 20));
        let updated = u.join().expect("updater");
        let Some(took) = took else { panic!("the expired entry was not reported") };
        let e = took.expect("nothing refreshes the timer: taken");
        assert!(e.params == [1, 1] || e.params == [2, 2], "torn: {:?}", e.params);
        if updated.is_ok() {
            assert_eq!(e.params, [2, 2], "an update that succeeded before the take is lost");
        } else {
            assert_eq!(updated, Err(EntryError::NotFound));
        }
    });
}
