//! The PNA exact-match table: add-on-miss, data-plane updates, lazy expiry.
//!
//! # Layout
//!
//! Keys are `KW` 64-bit words (a 16-byte key is `KW = 2`), action parameters `DW` words. A key's
//! 64-bit hash picks one bucket (low bits) and a 32-bit signature (high bits). Each bucket is one
//! cache line of header plus [`WAYS`] slots stored apart:
//!
//! ```text
//! Bucket (64 B, align 64):  seq: u64 | tag[0..7]: u64        tag = sig:32 | action:8 | profile:8 | LIVE | NOTIFIED
//! Slot   (align 32):        deadline: u64 | key: [u64; KW] | params: [u64; DW]   (KW=2, DW=1: 32 B)
//! ```
//!
//! A way that holds no entry has tag 0, and a signature always has its low bit set
//! (`sig_of`), so one 32-bit compare per way tests signature and liveness together. A hit
//! reads two lines (the header, then one slot), a miss usually one. There is a single
//! candidate bucket (no cuckoo moves, so an entry never changes place and a handle stays valid
//! while the entry lives); buckets are sized so that a full table loads them at two entries on
//! average (λ ≤ 2 of 7 ways: about 0.5 % of adds at full occupancy find their bucket full, the
//! same order as DPDK's SWX learner).
//!
//! # Concurrency
//!
//! Every word is an atomic, so the crate needs no `unsafe`. `seq` is a per-bucket seqlock:
//!
//! - A **writer** (add, update, delete, sweep) takes the bucket with one
//!   `compare_exchange(even → odd, Acquire)` followed by `fence(Release)`, writes with `Relaxed`
//!   stores, and releases with `store(even + 2, Release)`. Writers of different buckets never
//!   touch a common line; there is no table-wide writer lock.
//! - A **reader** loads `seq` (`Acquire`); if it is odd a writer is inside and it retries. It then
//!   reads tags, key, params and deadline with `Relaxed` loads, issues `fence(Acquire)` and loads
//!   `seq` again (`Relaxed`); any difference means a writer ran meanwhile and the read retries.
//!   Why it is correct: if a reader's loads saw any store of a writer, the writer's
//!   `fence(Release)` (after its odd `seq`) synchronizes with the reader's `fence(Acquire)`, so the
//!   reader's second `seq` load sees at least the odd value and the read is discarded. If the second
//!   load returns the first value, no writer stored into the bucket between the two loads, and the
//!   first load's `Acquire` made the last release's stores visible: the snapshot is exactly one
//!   committed state. A reader never writes shared memory.
//! - Retries are bounded ([`READ_RETRIES`]); a reader that never gets a clean snapshot reports a
//!   miss, which is safe because an add re-checks the key under the bucket's lock. Lock attempts
//!   are bounded too ([`SPIN_LIMIT`], then `Busy`), so nothing waits forever for a stalled core.
//!
//! Flow affinity means one core writes a given flow at a time; the seqlock still makes every read
//! from another core see either the old or the new entry, never a mix.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::AtomicU64 as IdCounter;

use super::events::EventRing;
use super::{ActionId, AtomicU64, AtomicUsize, ExpireProfileId, IdleTimeout, NotDone, Ordering, fence, spin_hint};
use crate::time::{Duration, Instant};

pub mod burst;
mod control;
mod local;
mod types;
mod update;

pub use control::{Entry, Take};
pub use local::{CHUNK, Local, LocalStats};
pub use types::{EntryHandle, ExactConfig, Hit, Lookup, Miss, TableConfigError};

/// Slots per bucket (the header line holds `seq` plus one tag per slot).
pub const WAYS: usize = 7;
/// Lock attempts before a writer gives up with `Busy`.
pub const SPIN_LIMIT: u32 = if cfg!(loom) { 3 } else { 4096 };
/// Snapshot attempts before a reader reports a miss.
pub const READ_RETRIES: u32 = if cfg!(loom) { 3 } else { 256 };
/// Number of expire-time profiles (PNA: a `bit<8>` id).
const PROFILES: usize = if cfg!(loom) { 4 } else { 256 };

const SIG_MASK: u64 = 0xFFFF_FFFF;
const ACTION_SHIFT: u32 = 32;
const PROFILE_SHIFT: u32 = 40;
const LIVE: u64 = 1 << 48;
const NOTIFIED: u64 = 1 << 49;
/// Deadline of an entry that never expires.
const NEVER: u64 = u64::MAX;

static NEXT_TABLE_ID: IdCounter = IdCounter::new(1);

#[repr(align(64))]
pub(crate) struct Bucket {
    seq: AtomicU64,
    tags: [AtomicU64; WAYS],
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Bucket>() == 64);

#[repr(align(32))]
pub(crate) struct Slot<const KW: usize, const DW: usize> {
    deadline: AtomicU64,
    key: [AtomicU64; KW],
    data: [AtomicU64; DW],
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Slot<2, 1>>() == 32);

impl<const KW: usize, const DW: usize> Slot<KW, DW> {
    fn new() -> Self {
        Self { deadline: AtomicU64::new(0), key: crate::sync::atomic::zeroed(), data: crate::sync::atomic::zeroed() }
    }

    #[inline]
    fn key_eq(&self, key: &[u64; KW]) -> bool {
        self.key.iter().zip(key.iter()).all(|(a, b)| a.load(Ordering::Relaxed) == *b)
    }

    #[inline]
    fn read_key(&self) -> [u64; KW] {
        core::array::from_fn(|i| self.key.get(i).map_or(0, |w| w.load(Ordering::Relaxed)))
    }

    #[inline]
    fn read_data(&self) -> [u64; DW] {
        core::array::from_fn(|i| self.data.get(i).map_or(0, |w| w.load(Ordering::Relaxed)))
    }

    #[inline]
    fn write_data(&self, params: &[u64; DW]) {
        for (w, v) in self.data.iter().zip(params.iter()) {
            w.store(*v, Ordering::Relaxed);
        }
    }

    #[inline]
    fn write_key(&self, key: &[u64; KW]) {
        for (w, v) in self.key.iter().zip(key.iter()) {
            w.store(*v, Ordering::Relaxed);
        }
    }
}

/// A writer's hold on one bucket; dropping it publishes the writes (`Release`).
struct Guard<'a> {
    bucket: &'a Bucket,
    odd: u64,
}

impl Drop for Guard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.bucket.seq.store(self.odd.wrapping_add(1), Ordering::Release);
    }
}

impl Bucket {
    fn new() -> Self {
        Self { seq: AtomicU64::new(0), tags: crate::sync::atomic::zeroed() }
    }

    /// Tests only: holds the bucket locked, as another writer (or a preempted vCPU) would.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn hold(&self) -> Option<impl Sized + '_> {
        self.lock()
    }

    /// Takes the bucket for writing, or `None` after [`SPIN_LIMIT`] attempts.
    #[inline]
    fn lock(&self) -> Option<Guard<'_>> {
        for _ in 0..SPIN_LIMIT {
            let s = self.seq.load(Ordering::Relaxed);
            if let Some(g) = self.lock_from(s) {
                return Some(g);
            }
            spin_hint();
        }
        None
    }

    /// One attempt to take the bucket for writing, only if its `seq` is `seen` (even).
    #[inline]
    fn lock_from(&self, seen: u64) -> Option<Guard<'_>> {
        if seen & 1 != 0 || self.seq.compare_exchange(seen, seen | 1, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return None;
        }
        // Orders the odd `seq` before every data store of this critical section, for readers
        // that validate with `fence(Acquire)` + `seq` reload.
        fence(Ordering::Release);
        Some(Guard { bucket: self, odd: seen | 1 })
    }

    #[inline]
    fn tag(&self, way: usize) -> u64 {
        self.tags.get(way).map_or(0, |t| t.load(Ordering::Relaxed))
    }

    #[inline]
    fn set_tag(&self, way: usize, tag: u64) {
        if let Some(t) = self.tags.get(way) {
            t.store(tag, Ordering::Relaxed);
        }
    }
}

/// A hash's 32-bit signature, never 0: its high half with the low bit set. A tag that is not
/// live is 0 (every path that frees a way stores 0), so comparing a tag's low 32 bits with the
/// signature tests both the signature and liveness in one compare.
#[inline]
pub(crate) const fn sig_of(hash: u64) -> u32 {
    (hash >> 32) as u32 | 1
}

#[inline]
const fn make_tag(sig: u64, action: ActionId, profile: ExpireProfileId) -> u64 {
    (sig & SIG_MASK | 1) | (action as u64) << ACTION_SHIFT | (profile as u64) << PROFILE_SHIFT | LIVE
}

#[inline]
const fn tag_action(tag: u64) -> ActionId {
    (tag >> ACTION_SHIFT) as u8
}

#[inline]
const fn tag_profile(tag: u64) -> ExpireProfileId {
    (tag >> PROFILE_SHIFT) as u8
}

#[inline]
const fn fold_mul(a: u64, b: u64) -> u64 {
    let p = (a as u128) * (b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The table's key hash: one folded 64×64→128 multiply per key word.
#[inline]
pub fn hash_key<const KW: usize>(seed: u64, key: &[u64; KW]) -> u64 {
    let mut h = seed;
    for w in key {
        h = fold_mul(h ^ *w, 0x9E37_79B9_7F4A_7C15);
    }
    fold_mul(h, 0xD6E8_FEB8_6659_FD93)
}

/// What a clean snapshot of one bucket found for a key.
#[derive(Clone, Copy)]
struct Found<const DW: usize> {
    way: usize,
    tag: u64,
    params: [u64; DW],
    deadline: u64,
}

/// The exact-match table. Share it by reference between cores; give each core its own [`Local`].
pub struct ExactTable<const KW: usize, const DW: usize> {
    buckets: Box<[Bucket]>,
    slots: Box<[Slot<KW, DW>]>,
    mask: u64,
    used: AtomicUsize,
    profiles: Box<[AtomicU64]>,
    events: EventRing<KW>,
    cfg: ExactConfig,
    id: u64,
}

impl<const KW: usize, const DW: usize> fmt::Debug for ExactTable<KW, DW> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExactTable")
            .field("config", &self.cfg)
            .field("buckets", &self.buckets.len())
            .field("used", &self.used.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<const KW: usize, const DW: usize> ExactTable<KW, DW> {
    /// Builds a table (all memory is allocated here, never later).
    pub fn try_new(cfg: ExactConfig) -> Result<Self, TableConfigError> {
        if cfg.capacity == 0 {
            return Err(TableConfigError::ZeroCapacity);
        }
        let buckets = if cfg.buckets == 0 { cfg.capacity.div_ceil(2).next_power_of_two() } else { cfg.buckets };
        if !buckets.is_power_of_two() || buckets > u32::MAX as usize {
            return Err(TableConfigError::BadBuckets);
        }
        let n_slots = buckets.checked_mul(WAYS).ok_or(TableConfigError::BadBuckets)?;
        // Fallible: a table too big for the heap is a configuration error, not a panic.
        let mut b = Vec::new();
        b.try_reserve_exact(buckets).map_err(|_| TableConfigError::OutOfMemory)?;
        b.resize_with(buckets, Bucket::new);
        let mut s = Vec::new();
        s.try_reserve_exact(n_slots).map_err(|_| TableConfigError::OutOfMemory)?;
        s.resize_with(n_slots, Slot::new);
        let mut p = Vec::with_capacity(PROFILES);
        p.resize_with(PROFILES, || AtomicU64::new(NEVER));
        Ok(Self {
            buckets: b.into_boxed_slice(),
            slots: s.into_boxed_slice(),
            mask: (buckets - 1) as u64,
            used: AtomicUsize::new(0),
            profiles: p.into_boxed_slice(),
            events: EventRing::try_new(cfg.event_ring).ok_or(TableConfigError::OutOfMemory)?,
            cfg,
            id: NEXT_TABLE_ID.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
        })
    }

    /// Builds a table.
    ///
    /// # Panics
    /// If the configuration is invalid (see [`try_new`](Self::try_new)).
    #[allow(clippy::panic)]
    pub fn new(cfg: ExactConfig) -> Self {
        match Self::try_new(cfg) {
            Ok(t) => t,
            Err(e) => panic!("exact table: {e}"),
        }
    }

    /// The configuration the table was built with.
    pub fn config(&self) -> &ExactConfig {
        &self.cfg
    }

    /// Number of buckets.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// A new local for one core (counters and a capacity reserve).
    pub fn local(&self) -> Local {
        Local { table_id: self.id, reserve: 0, stats: LocalStats::default() }
    }

    /// Returns a local's capacity reserve to the table (call when a core stops using the table).
    pub fn retire_local(&self, local: &mut Local) {
        if local.table_id == self.id && local.reserve > 0 {
            self.used.fetch_sub(local.reserve, Ordering::Relaxed);
            local.reserve = 0;
        }
    }

    /// Entries stored plus capacity held in local reserves (an upper bound on the live entries).
    pub fn used_capacity(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The bucket a key hashes to (diagnostics and tests).
    pub fn bucket_of(&self, key: &[u64; KW]) -> usize {
        (hash_key(self.cfg.seed, key) & self.mask) as usize
    }

    /// Hashes a key with this table's seed.
    #[inline]
    pub fn hash(&self, key: &[u64; KW]) -> u64 {
        hash_key(self.cfg.seed, key)
    }

    #[inline]
    fn slot(&self, bucket: usize, way: usize) -> Option<&Slot<KW, DW>> {
        self.slots.get(bucket.wrapping_mul(WAYS).wrapping_add(way))
    }

    #[inline]
    fn is_expired(&self, deadline: u64, now: Instant) -> bool {
        self.cfg.idle_timeout == IdleTimeout::AutoDelete && deadline <= now.ticks()
    }

    /// The deadline of an entry of `profile` whose timer starts at `now`.
    #[inline]
    fn deadline(&self, profile: ExpireProfileId, now: Instant) -> u64 {
        if self.cfg.idle_timeout == IdleTimeout::NoTimeout {
            return NEVER;
        }
        let d = self.profiles.get(profile as usize).map_or(NEVER, |p| p.load(Ordering::Relaxed));
        now.ticks().saturating_add(d)
    }

    /// Sets the duration of an expire-time profile (control plane). Entries keep their current
    /// deadline until their timer restarts. Profiles never set mean "never expire".
    pub fn set_expire_profile(&self, profile: ExpireProfileId, duration: Duration) {
        if let Some(p) = self.profiles.get(profile as usize) {
            p.store(duration.ticks(), Ordering::Relaxed);
        }
    }

    /// Scans one bucket for `key` (caller holds a snapshot or the lock).
    #[inline]
    fn scan(&self, bucket: &Bucket, b: usize, sig: u64, key: &[u64; KW]) -> Option<Found<DW>> {
        for way in 0..WAYS {
            let tag = bucket.tag(way);
            // Signature and liveness in one compare (`sig_of`).
            if tag as u32 != sig as u32 {
                continue;
            }
            let slot = self.slot(b, way)?;
            if slot.key_eq(key) {
                let params = slot.read_data();
                let deadline = slot.deadline.load(Ordering::Relaxed);
                return Some(Found { way, tag, params, deadline });
            }
        }
        None
    }

    /// Turns a clean snapshot into a lookup result and counts it.
    #[inline]
    fn conclude(
        &self,
        local: &mut Local,
        b: usize,
        key: &[u64; KW],
        hash: u64,
        found: Option<Found<DW>>,
        now: Instant,
    ) -> Lookup<KW, DW> {
        if let Some(f) = found {
            if !self.is_expired(f.deadline, now) {
                local.stats.hits += 1;
                return Lookup::Hit(Hit {
                    action: tag_action(f.tag),
                    params: f.params,
                    profile: tag_profile(f.tag),
                    handle: EntryHandle { key: *key, bucket: b as u32, way: f.way as u8 },
                });
            }
            local.stats.expired_misses += 1;
        }
        local.stats.misses += 1;
        Lookup::Miss(Miss::new(*key, hash))
    }

    /// Looks up one key whose hash is known.
    pub(crate) fn lookup_hashed(&self, local: &mut Local, key: &[u64; KW], hash: u64, now: Instant) -> Lookup<KW, DW> {
        let b = (hash & self.mask) as usize;
        let sig = u64::from(sig_of(hash));
        let Some(bucket) = self.buckets.get(b) else {
            local.stats.misses += 1;
            return Lookup::Miss(Miss::new(*key, hash));
        };
        for _ in 0..READ_RETRIES {
            let s = bucket.seq.load(Ordering::Acquire);
            if s & 1 == 0 {
                let found = self.scan(bucket, b, sig, key);
                fence(Ordering::Acquire);
                if bucket.seq.load(Ordering::Relaxed) == s {
                    return self.conclude(local, b, key, hash, found, now);
                }
            }
            local.stats.read_retries += 1;
            spin_hint();
        }
        // No clean snapshot within the bound: a miss (an add re-checks the key under the lock).
        local.stats.misses += 1;
        Lookup::Miss(Miss::new(*key, hash))
    }

    /// Looks up one key (convenience; [`lookup_burst`](Self::lookup_burst) is faster per key).
    #[inline]
    pub fn lookup(&self, local: &mut Local, key: &[u64; KW], now: Instant) -> Lookup<KW, DW> {
        self.lookup_hashed(local, key, self.hash(key), now)
    }

    /// Takes one unit of capacity (local reserve first, then the shared counter in chunks).
    fn take_capacity(&self, local: &mut Local) -> bool {
        if local.table_id != self.id {
            // A foreign local: account one by one, correct but without the reserve.
            let mut cur = self.used.load(Ordering::Relaxed);
            while cur < self.cfg.capacity {
                match self.used.compare_exchange(cur, cur + 1, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => return true,
                    Err(v) => cur = v,
                }
            }
            return false;
        }
        if local.reserve == 0 {
            let mut cur = self.used.load(Ordering::Relaxed);
            while cur < self.cfg.capacity {
                let n = (self.cfg.capacity - cur).min(CHUNK);
                match self.used.compare_exchange(cur, cur + n, Ordering::Relaxed, Ordering::Relaxed) {
                    Ok(_) => {
                        local.reserve = n;
                        break;
                    }
                    Err(v) => cur = v,
                }
            }
        }
        if local.reserve == 0 {
            return false;
        }
        local.reserve -= 1;
        true
    }

    /// Gives one unit of capacity back (into the local's reserve; chunks spill to the table).
    fn give_capacity(&self, local: &mut Local) {
        if local.table_id != self.id {
            self.used.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        local.reserve += 1;
        if local.reserve > 2 * CHUNK {
            self.used.fetch_sub(CHUNK, Ordering::Relaxed);
            local.reserve -= CHUNK;
        }
    }

    /// Adds `key` (hash known) under the bucket lock. Policy, in order: a live entry with the key →
    /// `KeyExists`; an expired entry with the key (`AutoDelete`) is replaced in place; a free slot is
    /// used if capacity remains; else an expired slot is reclaimed; else `TableFull` when the bucket
    /// had a free slot, `BucketFull` when it had none.
    #[allow(clippy::too_many_arguments)]
    fn insert_hashed(
        &self,
        local: &mut Local,
        key: &[u64; KW],
        hash: u64,
        action: ActionId,
        params: &[u64; DW],
        profile: ExpireProfileId,
        now: Instant,
    ) -> Result<(), NotDone> {
        if !self.cfg.hit_actions.contains(action) {
            return Err(NotDone::InvalidAction);
        }
        let b = (hash & self.mask) as usize;
        let sig = u64::from(sig_of(hash));
        let bucket = self.buckets.get(b).ok_or(NotDone::BucketFull)?;
        let _guard = bucket.lock().ok_or(NotDone::Busy)?;
        // Branch-free over the ways: the free ones, and the live ones whose signature matches
        // (a way that is not live has tag 0, and a signature is never 0: see `sig_of`).
        let (mut free, mut cand) = (0u32, 0u32);
        for w in 0..WAYS {
            let tag = bucket.tag(w);
            free |= u32::from(tag & LIVE == 0) << w;
            cand |= u32::from(tag as u32 == sig as u32) << w;
        }
        let mut same = None;
        while cand != 0 {
            let way = cand.trailing_zeros() as usize;
            cand &= cand - 1;
            let Some(slot) = self.slot(b, way) else { continue };
            if slot.key_eq(key) {
                if !self.is_expired(slot.deadline.load(Ordering::Relaxed), now) {
                    return Err(NotDone::KeyExists);
                }
                same = Some(way);
                break;
            }
        }
        let empty = (free != 0).then(|| free.trailing_zeros() as usize);
        let way = if let Some(w) = same {
            local.stats.expired_reclaimed += 1;
            w
        } else if let Some(w) = empty.filter(|_| self.take_capacity(local)) {
            w
        } else if let Some(w) = self.find_expired(bucket, b, now) {
            local.stats.expired_reclaimed += 1;
            w
        } else if empty.is_some() {
            return Err(NotDone::TableFull);
        } else {
            return Err(NotDone::BucketFull);
        };
        let slot = self.slot(b, way).ok_or(NotDone::BucketFull)?;
        self.write_entry(bucket, way, slot, key, sig, action, params, profile, now);
        Ok(())
    }

    /// Writes an entry into `way` of a bucket the caller holds locked: slot first, tag last.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn write_entry(
        &self,
        bucket: &Bucket,
        way: usize,
        slot: &Slot<KW, DW>,
        key: &[u64; KW],
        sig: u64,
        action: ActionId,
        params: &[u64; DW],
        profile: ExpireProfileId,
        now: Instant,
    ) {
        slot.deadline.store(self.deadline(profile, now), Ordering::Relaxed);
        slot.write_key(key);
        slot.write_data(params);
        bucket.set_tag(way, make_tag(sig, action, profile));
    }

    /// The add that follows a burst lookup's miss, without a second scan: if the bucket's `seq`
    /// still is the value of the lookup's validated snapshot, no writer has entered the bucket
    /// since (every writer leaves `seq` two higher), so the bucket is exactly what the lookup
    /// saw — the key in no way of it, `miss.free` the first free way — and taking the lock
    /// with `compare_exchange(seen → seen + 1)` both checks that and locks. `None` (nothing
    /// written): the miss has no snapshot of this table, a writer came in between, or no
    /// capacity is left; the full path decides then.
    fn insert_seen(
        &self,
        local: &mut Local,
        miss: &Miss<KW>,
        action: ActionId,
        params: &[u64; DW],
        profile: ExpireProfileId,
        now: Instant,
    ) -> Option<Result<(), NotDone>> {
        if miss.table != self.id as u32 || usize::from(miss.free) >= WAYS {
            return None;
        }
        if !self.cfg.hit_actions.contains(action) {
            return Some(Err(NotDone::InvalidAction));
        }
        let b = (miss.hash & self.mask) as usize;
        let bucket = self.buckets.get(b)?;
        let way = usize::from(miss.free);
        let slot = self.slot(b, way)?;
        let _guard = bucket.lock_from(miss.seen)?;
        if !self.take_capacity(local) {
            return None;
        }
        self.write_entry(bucket, way, slot, &miss.key, u64::from(sig_of(miss.hash)), action, params, profile, now);
        Some(Ok(()))
    }

    /// A live but expired slot of a locked bucket (`AutoDelete` only).
    fn find_expired(&self, bucket: &Bucket, b: usize, now: Instant) -> Option<usize> {
        if self.cfg.idle_timeout != IdleTimeout::AutoDelete {
            return None;
        }
        (0..WAYS).find(|&w| {
            bucket.tag(w) & LIVE != 0
                && self.slot(b, w).is_some_and(|s| s.deadline.load(Ordering::Relaxed) <= now.ticks())
        })
    }

    fn count_add(local: &mut Local, r: Result<(), NotDone>) -> super::AddStatus {
        match r {
            Ok(()) => {
                local.stats.adds += 1;
                super::AddStatus::Success
            }
            Err(e) => {
                local.stats.count_failure(e);
                super::AddStatus::NotDone(e)
            }
        }
    }

    /// PNA `add_entry` from the miss path: adds the key that missed with `action(params)` and the
    /// expire-time profile. The next lookup of the key hits. Never panics; failures are counted.
    pub fn add_on_miss(
        &self,
        local: &mut Local,
        miss: &Miss<KW>,
        action: ActionId,
        params: &[u64; DW],
        profile: ExpireProfileId,
        now: Instant,
    ) -> super::AddStatus {
        let r = if self.cfg.add_on_miss {
            match self.insert_seen(local, miss, action, params, profile, now) {
                Some(r) => r,
                None => self.insert_hashed(local, &miss.key, miss.hash, action, params, profile, now),
            }
        } else {
            Err(NotDone::AddOnMissDisabled)
        };
        Self::count_add(local, r)
    }
}
