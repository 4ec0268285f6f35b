//! The exact table against a reference model: per-bucket arrays of entries with the table's
//! documented placement policy, a virtual clock, expire profiles and the event ring.

use std::collections::{BTreeMap, VecDeque};
use std::vec::Vec;

use proptest::prelude::*;

use crate::pna::events::ExpiryEvent;
use crate::pna::exact::{EntryHandle, ExactConfig, ExactTable, Lookup, WAYS};
use crate::pna::{ActionMask, AddStatus, EntryError, IdleTimeout, NotDone};
use crate::time::{Duration, Instant};

const NEVER: u64 = u64::MAX;
const KEYS: u64 = 40;
const RING: usize = 4;

type Key = [u64; 2];

fn key(i: u64) -> Key {
    [i, i.wrapping_mul(0x9E37_79B9) ^ 0x55]
}

#[derive(Debug, Clone)]
enum Op {
    Lookup(u64),
    Burst(Vec<u64>),
    AddOnMiss { k: u64, action: u8, param: u64, profile: u8 },
    Insert { k: u64, action: u8, param: u64, profile: u8 },
    Update { k: u64, param: u64 },
    StaleUpdate { k: u64, param: u64 },
    SetExpire { k: u64, profile: u8 },
    Restart(u64),
    Modify { k: u64, action: u8, param: u64 },
    Delete(u64),
    Advance(u64),
    SetProfile { profile: u8, dur: u64 },
    Sweep(usize),
    Pop,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..KEYS;
    prop_oneof![
        3 => k.clone().prop_map(Op::Lookup),
        2 => proptest::collection::vec(0..KEYS, 1..crate::testing::miri_or(40, 6)).prop_map(Op::Burst),
        6 => (k.clone(), 0u8..4, any::<u64>(), 0u8..4).prop_map(|(k, action, param, profile)| Op::AddOnMiss { k, action, param, profile }),
        2 => (k.clone(), 0u8..4, any::<u64>(), 0u8..4).prop_map(|(k, action, param, profile)| Op::Insert { k, action, param, profile }),
        3 => (k.clone(), any::<u64>()).prop_map(|(k, param)| Op::Update { k, param }),
        2 => (k.clone(), any::<u64>()).prop_map(|(k, param)| Op::StaleUpdate { k, param }),
        2 => (k.clone(), 0u8..4).prop_map(|(k, profile)| Op::SetExpire { k, profile }),
        2 => k.clone().prop_map(Op::Restart),
        1 => (k.clone(), 0u8..4, any::<u64>()).prop_map(|(k, action, param)| Op::Modify { k, action, param }),
        2 => k.prop_map(Op::Delete),
        3 => (0u64..40).prop_map(Op::Advance),
        2 => (0u8..4, 0u64..60).prop_map(|(profile, dur)| Op::SetProfile { profile, dur }),
        1 => (1usize..5).prop_map(Op::Sweep),
        1 => Just(Op::Pop),
    ]
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct MEntry {
    key: Key,
    action: u8,
    param: u64,
    profile: u8,
    deadline: u64,
    notified: bool,
}

struct Model {
    mode: IdleTimeout,
    capacity: usize,
    hit_actions: ActionMask,
    buckets: Vec<[Option<MEntry>; WAYS]>,
    profiles: [u64; 256],
    events: VecDeque<ExpiryEvent<2>>,
    overflows: u64,
    now: u64,
}

impl Model {
    fn expired(&self, e: &MEntry) -> bool {
        self.mode == IdleTimeout::AutoDelete && e.deadline <= self.now
    }
    fn deadline(&self, profile: u8) -> u64 {
        if self.mode == IdleTimeout::NoTimeout {
            NEVER
        } else {
            self.now.saturating_add(self.profiles[profile as usize])
        }
    }
    fn occupied(&self) -> usize {
        self.buckets.iter().flatten().filter(|e| e.is_some()).count()
    }
    fn find(&self, b: usize, k: &Key) -> Option<usize> {
        self.buckets[b].iter().position(|e| e.is_some_and(|e| e.key == *k))
    }
    /// The present entry (way) for a key.
    fn present(&self, b: usize, k: &Key) -> Option<(usize, MEntry)> {
        let w = self.find(b, k)?;
        let e = self.buckets[b][w]?;
        (!self.expired(&e)).then_some((w, e))
    }
    fn insert(&mut self, b: usize, k: Key, action: u8, param: u64, profile: u8) -> Result<(), NotDone> {
        if !self.hit_actions.contains(action) {
            return Err(NotDone::InvalidAction);
        }
        let new = MEntry { key: k, action, param, profile, deadline: self.deadline(profile), notified: false };
        if let Some(w) = self.find(b, &k) {
            if self.present(b, &k).is_some() {
                return Err(NotDone::KeyExists);
            }
            self.buckets[b][w] = Some(new);
            return Ok(());
        }
        let empty = self.buckets[b].iter().position(Option::is_none);
        if let (Some(w), true) = (empty, self.occupied() < self.capacity) {
            self.buckets[b][w] = Some(new);
            return Ok(());
        }
        let exp = self.buckets[b].iter().position(|e| e.is_some_and(|e| self.expired(&e)));
        if let Some(w) = exp {
            self.buckets[b][w] = Some(new);
            return Ok(());
        }
        Err(if empty.is_some() { NotDone::TableFull } else { NotDone::BucketFull })
    }
}

fn status(r: Result<(), NotDone>) -> AddStatus {
    match r {
        Ok(()) => AddStatus::Success,
        Err(e) => AddStatus::NotDone(e),
    }
}

fn run(mode: IdleTimeout, capacity: usize, buckets: usize, add_on_miss: bool, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut cfg = ExactConfig::new(capacity);
    cfg.buckets = buckets;
    cfg.idle_timeout = mode;
    cfg.add_on_miss = add_on_miss;
    cfg.hit_actions = ActionMask::of(&[0, 1, 2]);
    cfg.event_ring = RING;
    let t = ExactTable::<2, 1>::new(cfg);
    let mut local = t.local();
    let mut m = Model {
        mode,
        capacity,
        hit_actions: cfg.hit_actions,
        buckets: vec![[None; WAYS]; buckets],
        profiles: [NEVER; 256],
        events: VecDeque::new(),
        overflows: 0,
        now: 0,
    };
    let mut handles: BTreeMap<u64, (EntryHandle<2>, usize)> = BTreeMap::new();
    let (mut hits, mut misses) = (0u64, 0u64);

    for op in ops {
        let now = Instant(m.now);
        match op {
            Op::Lookup(k)
            | Op::AddOnMiss { k, .. }
            | Op::Update { k, .. }
            | Op::SetExpire { k, .. }
            | Op::Restart(k) => {
                let kk = key(*k);
                let b = t.bucket_of(&kk);
                // An add-on-miss starts from a burst lookup (whose miss carries the bucket's
                // snapshot, `insert_seen`), the other operations from a single lookup.
                let got = if matches!(op, Op::AddOnMiss { .. }) {
                    let mut out = [Lookup::EMPTY; 1];
                    t.lookup_burst(&mut local, &[kk], now, &mut out);
                    out[0]
                } else {
                    t.lookup(&mut local, &kk, now)
                };
                match (m.present(b, &kk), got) {
                    (Some((w, e)), Lookup::Hit(h)) => {
                        hits += 1;
                        prop_assert_eq!((h.action, h.params, h.profile), (e.action, [e.param], e.profile));
                        handles.insert(*k, (h.handle, w));
                        match op {
                            Op::Update { param, .. } => {
                                prop_assert_eq!(t.update_params(&mut local, &h.handle, &[*param], now), Ok(()));
                                m.buckets[b][w].as_mut().unwrap().param = *param;
                            }
                            Op::SetExpire { .. } | Op::Restart(_) => {
                                let p = if let Op::SetExpire { profile, .. } = op { *profile } else { e.profile };
                                let r = match op {
                                    Op::SetExpire { .. } => t.set_entry_expire_time(&mut local, &h.handle, p, now),
                                    // Odd keys take the lock-free restart of a table one core
                                    // writes (this test's only writer): the same model.
                                    Op::Restart(k) if k & 1 == 1 => {
                                        t.restart_expire_timer_sole_writer(&mut local, &h.handle, now)
                                    }
                                    _ => t.restart_expire_timer(&mut local, &h.handle, now),
                                };
                                if mode == IdleTimeout::NoTimeout {
                                    prop_assert_eq!(r, Err(EntryError::NoIdleTimeout));
                                } else {
                                    prop_assert_eq!(r, Ok(()));
                                    let d = m.deadline(p);
                                    let me = m.buckets[b][w].as_mut().unwrap();
                                    me.profile = p;
                                    me.deadline = d;
                                    me.notified = false;
                                }
                            }
                            _ => {}
                        }
                    }
                    (None, Lookup::Miss(miss)) => {
                        misses += 1;
                        if let Op::AddOnMiss { action, param, profile, .. } = op {
                            let want = if add_on_miss {
                                status(m.insert(b, kk, *action, *param, *profile))
                            } else {
                                AddStatus::NotDone(NotDone::AddOnMissDisabled)
                            };
                            prop_assert_eq!(t.add_on_miss(&mut local, &miss, *action, &[*param], *profile, now), want);
                        }
                    }
                    (want, got) => prop_assert!(false, "key {k}: model {want:?}, table {got:?}"),
                }
            }
            Op::Burst(ks) => {
                let keys: Vec<Key> = ks.iter().map(|k| key(*k)).collect();
                let mut out = vec![Lookup::EMPTY; keys.len()];
                let n = t.lookup_burst(&mut local, &keys, now, &mut out);
                let mut want_hits = 0;
                for (kk, got) in keys.iter().zip(out.iter()) {
                    let want = m.present(t.bucket_of(kk), kk).map(|(_, e)| (e.action, [e.param], e.profile));
                    let got2 = got.hit().map(|h| (h.action, h.params, h.profile));
                    prop_assert_eq!(want, got2);
                    want_hits += usize::from(want.is_some());
                }
                prop_assert_eq!(n, want_hits);
                hits += want_hits as u64;
                misses += (keys.len() - want_hits) as u64;
            }
            Op::Insert { k, action, param, profile } => {
                let kk = key(*k);
                let want = status(m.insert(t.bucket_of(&kk), kk, *action, *param, *profile));
                prop_assert_eq!(t.insert(&mut local, &kk, *action, &[*param], *profile, now), want);
            }
            Op::StaleUpdate { k, param } => {
                if let Some((h, w)) = handles.get(k).copied() {
                    let kk = key(*k);
                    let b = t.bucket_of(&kk);
                    let live = m.buckets[b][w].is_some_and(|e| e.key == kk && !m.expired(&e));
                    let r = t.update_params(&mut local, &h, &[*param], now);
                    if live {
                        prop_assert_eq!(r, Ok(()));
                        m.buckets[b][w].as_mut().unwrap().param = *param;
                    } else {
                        prop_assert_eq!(r, Err(EntryError::NotFound));
                    }
                }
            }
            Op::Modify { k, action, param } => {
                let kk = key(*k);
                let b = t.bucket_of(&kk);
                let r = t.modify(&mut local, &kk, *action, &[*param], now);
                if !m.hit_actions.contains(*action) {
                    prop_assert_eq!(r, Err(EntryError::InvalidAction));
                } else if let Some((w, _)) = m.present(b, &kk) {
                    prop_assert_eq!(r, Ok(()));
                    let e = m.buckets[b][w].as_mut().unwrap();
                    e.action = *action;
                    e.param = *param;
                } else {
                    prop_assert_eq!(r, Err(EntryError::NotFound));
                }
            }
            Op::Delete(k) => {
                let kk = key(*k);
                let b = t.bucket_of(&kk);
                let want = if m.present(b, &kk).is_some() { Ok(()) } else { Err(EntryError::NotFound) };
                if let Some(w) = m.find(b, &kk) {
                    m.buckets[b][w] = None;
                }
                prop_assert_eq!(t.delete(&mut local, &kk, now), want);
            }
            Op::Advance(d) => m.now += d,
            Op::SetProfile { profile, dur } => {
                t.set_expire_profile(*profile, Duration(*dur));
                m.profiles[*profile as usize] = *dur;
            }
            Op::Sweep(step) => {
                let mut cursor = 0;
                loop {
                    cursor = t.sweep(&mut local, now, cursor, *step);
                    if cursor == 0 {
                        break;
                    }
                }
                for b in 0..m.buckets.len() {
                    for w in 0..WAYS {
                        let Some(e) = m.buckets[b][w] else { continue };
                        if e.deadline > m.now || e.notified {
                            continue;
                        }
                        match mode {
                            IdleTimeout::AutoDelete => m.buckets[b][w] = None,
                            IdleTimeout::NotifyControl => {
                                if m.events.len() < RING {
                                    m.events.push_back(ExpiryEvent {
                                        key: e.key,
                                        action: e.action,
                                        profile: e.profile,
                                        deadline: Instant(e.deadline),
                                    });
                                    m.buckets[b][w].as_mut().unwrap().notified = true;
                                } else {
                                    m.overflows += 1;
                                }
                            }
                            IdleTimeout::NoTimeout => {}
                        }
                    }
                }
            }
            Op::Pop => {
                while let Some(want) = m.events.pop_front() {
                    prop_assert_eq!(t.events().pop(), Some(want));
                }
                prop_assert_eq!(t.events().pop(), None);
            }
        }
        // Whole-table agreement after every step.
        let mut got = Vec::new();
        t.for_each(Instant(m.now), |e| got.push((e.key, e.action, e.params[0], e.profile, e.notified)));
        got.sort();
        let mut want: Vec<_> = m
            .buckets
            .iter()
            .flatten()
            .flatten()
            .filter(|e| !m.expired(e))
            .map(|e| (e.key, e.action, e.param, e.profile, e.notified))
            .collect();
        want.sort();
        prop_assert_eq!(got, want);
        prop_assert!(t.used_capacity() <= capacity);
    }
    prop_assert_eq!(t.events().overflows(), m.overflows);
    prop_assert_eq!((local.stats().hits, local.stats().misses), (hits, misses));
    Ok(())
}

fn mode_of(i: u8) -> IdleTimeout {
    match i {
        0 => IdleTimeout::NoTimeout,
        1 => IdleTimeout::NotifyControl,
        _ => IdleTimeout::AutoDelete,
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(300))]

    #[test]
    fn pna_exact_matches_model(
        mode in 0u8..3,
        capacity in 1usize..24,
        bexp in 0u32..3,
        add_on_miss in proptest::bool::weighted(0.9),
        ops in proptest::collection::vec(op(), 1..crate::testing::miri_or(150, 20)),
    ) {
        run(mode_of(mode), capacity, 1 << bexp, add_on_miss, &ops)?;
    }

    /// Larger tables: mostly adds and lookups, few collisions, every mode.
    #[test]
    fn pna_exact_matches_model_roomy(
        mode in 0u8..3,
        ops in proptest::collection::vec(op(), 1..crate::testing::miri_or(300, 30)),
    ) {
        run(mode_of(mode), 64, 64, true, &ops)?;
    }
}
