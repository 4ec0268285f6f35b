//! Unit cases of the exact table and the P4 layer: not-done reasons, locals, handles, events,
//! and a two-thread stress test that checks no reader ever sees a torn entry.

use std::vec::Vec;

use crate::pna::exact::{CHUNK, ExactConfig, ExactTable, Lookup, WAYS};
use crate::pna::p4::{Actions, Applied, P4Table, TableDecl};
use crate::pna::{ActionId, ActionMask, AddStatus, EntryError, IdleTimeout, NotDone};
use crate::time::{Duration, Instant};

const T0: Instant = Instant(0);

fn add(t: &ExactTable<2, 1>, local: &mut crate::pna::exact::Local, k: [u64; 2], now: Instant) -> AddStatus {
    match t.lookup(local, &k, now) {
        Lookup::Miss(m) => t.add_on_miss(local, &m, 0, &[k[0]], 0, now),
        Lookup::Hit(_) => AddStatus::NotDone(NotDone::KeyExists),
    }
}

#[test]
#[cfg_attr(miri, ignore = "Miri cannot fail an allocation: it would try to provide the 600 GiB")]
fn a_table_too_big_for_memory_is_a_config_error() {
    // 2^31 buckets of 64 bytes plus 7 slots each: about 600 GiB, more than any heap here.
    let r = ExactTable::<2, 1>::try_new(ExactConfig::new(1 << 32));
    assert_eq!(r.err(), Some(crate::pna::exact::TableConfigError::OutOfMemory));
}

#[test]
fn full_bucket_is_not_done_and_counted() {
    let mut cfg = ExactConfig::new(1000);
    cfg.buckets = 1;
    let t = ExactTable::<2, 1>::new(cfg);
    let mut local = t.local();
    for i in 0..WAYS as u64 {
        assert_eq!(add(&t, &mut local, [i, 1], T0), AddStatus::Success);
    }
    assert_eq!(add(&t, &mut local, [99, 1], T0), AddStatus::NotDone(NotDone::BucketFull));
    assert_eq!(local.stats().add_failures_for(NotDone::BucketFull), 1);
    assert_eq!(local.stats().adds, WAYS as u64);
    for i in 0..WAYS as u64 {
        assert_eq!(t.lookup(&mut local, &[i, 1], T0).hit().map(|h| h.params), Some([i]));
    }
}

#[test]
fn full_table_is_not_done_until_a_delete() {
    let mut cfg = ExactConfig::new(5);
    cfg.buckets = 64;
    let t = ExactTable::<2, 1>::new(cfg);
    let mut local = t.local();
    for i in 0..5 {
        assert_eq!(add(&t, &mut local, [i, 2], T0), AddStatus::Success);
    }
    assert_eq!(add(&t, &mut local, [77, 2], T0), AddStatus::NotDone(NotDone::TableFull));
    assert_eq!(t.delete(&mut local, &[3, 2], T0), Ok(()));
    assert_eq!(t.delete(&mut local, &[3, 2], T0), Err(EntryError::NotFound));
    assert_eq!(add(&t, &mut local, [77, 2], T0), AddStatus::Success);
    assert_eq!(t.count(T0), 5);
    assert_eq!(local.stats().add_failures_for(NotDone::TableFull), 1);
}

#[test]
fn invalid_action_and_disabled_add_on_miss() {
    let mut cfg = ExactConfig::new(8);
    cfg.hit_actions = ActionMask::of(&[1, 200]);
    let t = ExactTable::<2, 1>::new(cfg);
    let mut local = t.local();
    let Lookup::Miss(m) = t.lookup(&mut local, &[1, 1], T0) else { panic!("empty table hit") };
    assert_eq!(t.add_on_miss(&mut local, &m, 0, &[0], 0, T0), AddStatus::NotDone(NotDone::InvalidAction));
    assert_eq!(t.add_on_miss(&mut local, &m, 200, &[0], 0, T0), AddStatus::Success);
    assert_eq!(t.add_on_miss(&mut local, &m, 1, &[0], 0, T0), AddStatus::NotDone(NotDone::KeyExists));
    assert_eq!(t.modify(&mut local, &[1, 1], 2, &[5], T0), Err(EntryError::InvalidAction));
    let mut cfg = ExactConfig::new(8);
    cfg.add_on_miss = false;
    let t = ExactTable::<2, 1>::new(cfg);
    let Lookup::Miss(m) = t.lookup(&mut local, &[1, 1], T0) else { panic!("empty table hit") };
    assert_eq!(t.add_on_miss(&mut local, &m, 0, &[0], 0, T0), AddStatus::NotDone(NotDone::AddOnMissDisabled));
    assert_eq!(t.insert(&mut local, &[1, 1], 0, &[0], 0, T0), AddStatus::Success, "the control plane may insert");
}

#[test]
fn lanes_share_capacity_exactly_through_reserves() {
    let cap = 3 * CHUNK + 5;
    let t = ExactTable::<2, 1>::new(ExactConfig::new(cap));
    let (mut a, mut b) = (t.local(), t.local());
    let mut ok = 0;
    for i in 0..(2 * cap) as u64 {
        let local = if i % 2 == 0 { &mut a } else { &mut b };
        if add(&t, local, [i, 3], T0).is_success() {
            ok += 1;
        }
        assert!(t.used_capacity() <= cap);
    }
    // Early "full" is possible only by what the other local holds in reserve.
    assert!(ok + a.reserve() + b.reserve() >= cap - 1 && ok <= cap, "ok={ok}");
    t.retire_local(&mut a);
    t.retire_local(&mut b);
    assert_eq!(t.used_capacity(), ok);
    assert_eq!(t.count(T0), ok);
}

#[test]
fn stale_handle_after_delete_and_readd_is_not_found() {
    let mut cfg = ExactConfig::new(64);
    cfg.buckets = 1;
    let t = ExactTable::<2, 1>::new(cfg);
    let mut local = t.local();
    assert!(add(&t, &mut local, [1, 0], T0).is_success());
    assert!(add(&t, &mut local, [2, 0], T0).is_success());
    let h = *t.lookup(&mut local, &[1, 0], T0).hit().expect("hit");
    assert_eq!(t.delete(&mut local, &[1, 0], T0), Ok(()));
    assert!(add(&t, &mut local, [3, 0], T0).is_success()); // takes key 1's old slot
    assert_eq!(t.update_params(&mut local, &h.handle, &[9], T0), Err(EntryError::NotFound));
    assert_eq!(t.lookup(&mut local, &[3, 0], T0).hit().map(|h| h.params), Some([3]));
    assert_eq!(local.stats().update_failures, 1);
}

#[test]
fn notify_control_reports_once_and_counts_overflow() {
    let mut cfg = ExactConfig::new(64);
    cfg.idle_timeout = IdleTimeout::NotifyControl;
    cfg.event_ring = 2;
    let t = ExactTable::<2, 1>::new(cfg);
    t.set_expire_profile(1, Duration(10));
    let mut local = t.local();
    for i in 0..3u64 {
        assert!(t.insert(&mut local, &[i, 4], 0, &[i], 1, T0).is_success());
    }
    assert_eq!(t.sweep(&mut local, Instant(9), 0, usize::MAX), 0);
    assert!(t.events().pop().is_none(), "nothing due before the deadline");
    t.sweep(&mut local, Instant(10), 0, usize::MAX);
    assert_eq!(t.events().overflows(), 1, "two fit, the third overflows");
    let got: Vec<_> = core::iter::from_fn(|| t.events().pop()).collect();
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|e| e.profile == 1 && e.deadline == Instant(10)));
    t.sweep(&mut local, Instant(11), 0, usize::MAX);
    assert_eq!(
        core::iter::from_fn(|| t.events().pop()).count(),
        1,
        "the overflowed one is retried, the others not repeated"
    );
    assert_eq!(t.count(Instant(100)), 3, "NotifyControl keeps expired entries until the control plane deletes them");
    assert_eq!(local.stats().expired_notified, 3);
}

#[test]
fn hit_does_not_refresh_the_timer_but_restart_does() {
    let mut cfg = ExactConfig::new(64);
    cfg.idle_timeout = IdleTimeout::AutoDelete;
    let t = ExactTable::<2, 1>::new(cfg);
    t.set_expire_profile(0, Duration(100));
    t.set_expire_profile(2, Duration(1000));
    let mut local = t.local();
    assert!(add(&t, &mut local, [1, 5], T0).is_success());
    assert!(add(&t, &mut local, [2, 5], T0).is_success());
    for now in [10, 50, 99] {
        assert!(t.lookup(&mut local, &[1, 5], Instant(now)).hit().is_some());
    }
    let h2 = t.lookup(&mut local, &[2, 5], Instant(90)).hit().expect("hit").handle;
    assert_eq!(t.restart_expire_timer(&mut local, &h2, Instant(90)), Ok(()));
    assert!(t.lookup(&mut local, &[1, 5], Instant(100)).hit().is_none(), "hits did not keep it alive");
    assert!(t.lookup(&mut local, &[2, 5], Instant(189)).hit().is_some());
    assert_eq!(t.set_entry_expire_time(&mut local, &h2, 2, Instant(189)), Ok(()));
    assert_eq!(t.lookup(&mut local, &[2, 5], Instant(1188)).hit().map(|h| h.profile), Some(2));
    assert!(t.lookup(&mut local, &[2, 5], Instant(1189)).hit().is_none());
    assert_eq!(local.stats().expired_misses, 2);
}

/// The lock-free restart of a table one core writes: it restarts a live entry's timer as the
/// locked one does, refuses a handle whose entry was deleted or has expired (counted as a
/// failed update), and refuses a table without timeouts.
#[test]
fn the_sole_writer_restart_restarts_live_entries_only() {
    let mut cfg = ExactConfig::new(64);
    cfg.idle_timeout = IdleTimeout::AutoDelete;
    let t = ExactTable::<2, 1>::new(cfg);
    t.set_expire_profile(0, Duration(100));
    let mut local = t.local();
    assert!(add(&t, &mut local, [1, 5], T0).is_success());
    assert!(add(&t, &mut local, [2, 5], T0).is_success());
    let h1 = t.lookup(&mut local, &[1, 5], Instant(90)).hit().expect("hit").handle;
    assert_eq!(t.restart_expire_timer_sole_writer(&mut local, &h1, Instant(90)), Ok(()));
    assert!(t.lookup(&mut local, &[1, 5], Instant(189)).hit().is_some(), "restarted at 90: lives to 190");
    assert!(t.lookup(&mut local, &[1, 5], Instant(190)).hit().is_none());
    // Expired: not restarted.
    assert_eq!(t.restart_expire_timer_sole_writer(&mut local, &h1, Instant(190)), Err(EntryError::NotFound));
    // Deleted, and the slot taken by another key: not restarted, the other entry untouched.
    let h2 = t.lookup(&mut local, &[2, 5], Instant(50)).hit().expect("hit").handle;
    assert!(t.delete(&mut local, &[2, 5], Instant(50)).is_ok());
    assert_eq!(t.restart_expire_timer_sole_writer(&mut local, &h2, Instant(60)), Err(EntryError::NotFound));
    let failures = local.stats().update_failures;
    assert_eq!(failures, 2);
    let plain = ExactTable::<2, 1>::new(ExactConfig::new(64));
    let mut pl = plain.local();
    assert!(add(&plain, &mut pl, [3, 5], T0).is_success());
    let h3 = plain.lookup(&mut pl, &[3, 5], T0).hit().expect("hit").handle;
    assert_eq!(plain.restart_expire_timer_sole_writer(&mut pl, &h3, T0), Err(EntryError::NoIdleTimeout));
}

/// Two threads insert disjoint keys, rewrite their parameters and look up both key sets. Every
/// parameter word of an entry always holds the same value, so a torn read would show unequal words.
#[test]
fn concurrent_writers_and_readers_never_see_torn_entries() {
    const N: u64 = crate::testing::miri_or(20_000, 200);
    let mut cfg = ExactConfig::new(2 * N as usize);
    // Crowded buckets: many same-bucket writer/reader races.
    cfg.buckets = crate::testing::miri_or(1024, 16);
    cfg.capacity = cfg.buckets * WAYS;
    let slots = cfg.capacity;
    let t = ExactTable::<2, 4>::new(cfg);
    std::thread::scope(|s| {
        for me in 0..2u64 {
            let t = &t;
            s.spawn(move || {
                let mut local = t.local();
                let mut out = [Lookup::<2, 4>::EMPTY; 32];
                let mut keys = [[0u64; 2]; 32];
                for i in 0..N {
                    let k = [i, me];
                    match t.lookup(&mut local, &k, T0) {
                        Lookup::Miss(m) => {
                            let _ = t.add_on_miss(&mut local, &m, 0, &[i; 4], 0, T0);
                        }
                        Lookup::Hit(h) => {
                            let _ = t.update_params(&mut local, &h.handle, &[i + 1; 4], T0);
                        }
                    }
                    if i % 8 == 0 {
                        for (j, kk) in keys.iter_mut().enumerate() {
                            *kk = [i.saturating_sub(j as u64 * 3), (me + j as u64) % 2];
                        }
                        t.lookup_burst(&mut local, &keys, T0, &mut out);
                        for o in &out {
                            if let Some(h) = o.hit() {
                                assert!(h.params.iter().all(|w| *w == h.params[0]), "torn entry {:?}", h.params);
                                let k = h.handle.key();
                                assert!(h.params[0] == k[0] || h.params[0] == k[0] + 1);
                            }
                        }
                    }
                }
            });
        }
    });
    let stored = t.count(T0);
    assert!(stored <= slots && stored > slots / 2, "stored {stored} of {slots}");
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Nat {
    Translate { addr: u32, port: u16 },
    Count(u64),
    Drop,
}

impl Actions<1> for Nat {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0, 1]);
    fn encode(&self) -> (ActionId, [u64; 1]) {
        match *self {
            Nat::Translate { addr, port } => (0, [u64::from(addr) << 16 | u64::from(port)]),
            Nat::Count(n) => (1, [n]),
            Nat::Drop => (2, [0]),
        }
    }
    fn decode(id: ActionId, p: &[u64; 1]) -> Option<Self> {
        match id {
            0 => Some(Nat::Translate { addr: (p[0] >> 16) as u32, port: p[0] as u16 }),
            1 => Some(Nat::Count(p[0])),
            2 => Some(Nat::Drop),
            _ => None,
        }
    }
}

#[test]
fn p4_table_add_on_miss_update_and_default_only_action() {
    let mut decl = TableDecl::new(16, Nat::Drop);
    decl.idle_timeout = IdleTimeout::NotifyControl;
    let t = P4Table::<2, 1, Nat>::new(decl);
    let mut local = t.table().local();
    let keys = [[1u64, 1], [2, 2], [1, 1]];
    let mut out = [t.placeholder(); 3];
    assert_eq!(t.apply_burst(&mut local, &keys, T0, &mut out), 0);
    let Applied::Miss { default_action: Nat::Drop, miss } = out[0] else { panic!("{:?}", out[0]) };
    assert_eq!(t.add_entry(&mut local, &miss, &Nat::Drop, 0, T0), AddStatus::NotDone(NotDone::InvalidAction));
    assert_eq!(t.add_entry(&mut local, &miss, &Nat::Count(1), 0, T0), AddStatus::Success);
    assert_eq!(t.apply_burst(&mut local, &keys, T0, &mut out), 2);
    let Applied::Hit { action: Nat::Count(1), entry } = out[2] else { panic!("{:?}", out[2]) };
    assert_eq!(t.update(&mut local, &entry, &Nat::Count(2), T0), Ok(()));
    assert_eq!(t.update(&mut local, &entry, &Nat::Translate { addr: 1, port: 2 }, T0), Err(EntryError::InvalidAction));
    assert_eq!(t.apply(&mut local, &[1, 1], T0), Applied::Hit { action: Nat::Count(2), entry });
    assert_eq!(t.restart_expire_timer(&mut local, &entry, T0), Ok(()));
    assert_eq!(t.modify(&mut local, &[1, 1], &Nat::Translate { addr: 7, port: 8 }, T0), Ok(()));
    assert_eq!(t.get(&[1, 1], T0), Some((Nat::Translate { addr: 7, port: 8 }, 0)));
    assert_eq!(t.delete(&mut local, &[1, 1], T0), Ok(()));
    assert!(matches!(t.apply(&mut local, &[1, 1], T0), Applied::Miss { .. }));
}
