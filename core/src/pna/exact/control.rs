//! Control-plane operations on an exact table: insert, modify, delete, get, iteration, and the
//! expiry sweep that reports (`NotifyControl`) or frees (`AutoDelete`) expired entries.
//!
//! They follow the same bucket protocol as the data plane (lock one bucket to write, seqlock
//! snapshots to read), so the control plane runs on any core while the data plane keeps going.

use super::super::events::ExpiryEvent;
use super::super::{ActionId, AddStatus, EntryError, ExpireProfileId, IdleTimeout, Ordering, fence, spin_hint};
use super::{Bucket, ExactTable, LIVE, Local, NEVER, NOTIFIED, READ_RETRIES, SIG_MASK, WAYS, tag_action, tag_profile};
use crate::time::Instant;

/// A stored entry, as the control plane sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry<const KW: usize, const DW: usize> {
    /// The key.
    pub key: [u64; KW],
    /// The action.
    pub action: ActionId,
    /// The action's parameters.
    pub params: [u64; DW],
    /// The expire-time profile.
    pub profile: ExpireProfileId,
    /// When the entry expires (`None`: never).
    pub deadline: Option<Instant>,
    /// Whether its expiry has been reported on the event ring (`NotifyControl`).
    pub notified: bool,
}

/// Why [`ExactTable::take`] did not delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take<const KW: usize, const DW: usize> {
    /// No such entry.
    NotFound,
    /// The bucket stayed locked for the whole bounded wait: try again later.
    Busy,
    /// The condition refused the entry as it is now; it stays (report mark cleared).
    Kept(Entry<KW, DW>),
}

impl<const KW: usize, const DW: usize> ExactTable<KW, DW> {
    /// Control-plane insert (allowed whatever `add_on_miss` says). Counted like an add.
    pub fn insert(
        &self,
        local: &mut Local,
        key: &[u64; KW],
        action: ActionId,
        params: &[u64; DW],
        profile: ExpireProfileId,
        now: Instant,
    ) -> AddStatus {
        let r = self.insert_hashed(local, key, self.hash(key), action, params, profile, now);
        Self::count_add(local, r)
    }

    /// Finds `key` in a locked bucket: its way, if it is live and (under `AutoDelete`) not expired.
    fn find_locked(&self, bucket: &Bucket, b: usize, key: &[u64; KW], sig: u64) -> Option<usize> {
        (0..WAYS).find(|&w| {
            let tag = bucket.tag(w);
            tag & LIVE != 0 && tag & SIG_MASK == sig && self.slot(b, w).is_some_and(|s| s.key_eq(key))
        })
    }

    /// Control-plane modify: replaces the entry's action and parameters (its timer is untouched).
    pub fn modify(
        &self,
        local: &mut Local,
        key: &[u64; KW],
        action: ActionId,
        params: &[u64; DW],
        now: Instant,
    ) -> Result<(), EntryError> {
        if !self.cfg.hit_actions.contains(action) {
            local.stats.update_failures += 1;
            return Err(EntryError::InvalidAction);
        }
        let hash = self.hash(key);
        let (b, sig) = ((hash & self.mask) as usize, u64::from(super::sig_of(hash)));
        let r = (|| {
            let bucket = self.buckets.get(b).ok_or(EntryError::NotFound)?;
            let _g = bucket.lock().ok_or(EntryError::Busy)?;
            let way = self.find_locked(bucket, b, key, sig).ok_or(EntryError::NotFound)?;
            let slot = self.slot(b, way).ok_or(EntryError::NotFound)?;
            if self.is_expired(slot.deadline.load(Ordering::Relaxed), now) {
                return Err(EntryError::NotFound);
            }
            slot.write_data(params);
            let tag = bucket.tag(way);
            let keep = tag & !(0xFF << super::ACTION_SHIFT);
            bucket.set_tag(way, keep | (action as u64) << super::ACTION_SHIFT);
            Ok(())
        })();
        match r {
            Ok(()) => local.stats.updates += 1,
            Err(_) => local.stats.update_failures += 1,
        }
        r
    }

    /// Control-plane delete. Under `AutoDelete` an expired entry counts as absent: its slot is
    /// freed and the answer is `NotFound`.
    pub fn delete(&self, local: &mut Local, key: &[u64; KW], now: Instant) -> Result<(), EntryError> {
        let hash = self.hash(key);
        let (b, sig) = ((hash & self.mask) as usize, u64::from(super::sig_of(hash)));
        let bucket = self.buckets.get(b).ok_or(EntryError::NotFound)?;
        let guard = bucket.lock().ok_or(EntryError::Busy)?;
        let way = self.find_locked(bucket, b, key, sig).ok_or(EntryError::NotFound)?;
        let expired = self.slot(b, way).is_some_and(|s| self.is_expired(s.deadline.load(Ordering::Relaxed), now));
        bucket.set_tag(way, 0);
        drop(guard);
        self.give_capacity(local);
        if expired {
            local.stats.expired_reclaimed += 1;
            return Err(EntryError::NotFound);
        }
        local.stats.deletes += 1;
        Ok(())
    }

    /// Deletes the entry for `key` and returns it — but only if `cond` holds for it as it is
    /// under the bucket's lock, so nothing can change it between the check and the delete.
    /// This is how the consumer of an expiry report takes an entry: "delete it if it is still
    /// expired" is one step, and no packet on another core can refresh it in between (the
    /// check-then-delete race of a plain [`ExactTable::get`] + [`ExactTable::delete`]).
    ///
    /// - `Ok(entry)`: it was deleted; the caller owns what it held (a NAT port, a flow record).
    /// - [`Take::Kept`]: `cond` refused it (e.g. the flow came back); it stays, and its
    ///   "reported" mark is cleared so its next expiry is reported again.
    /// - [`Take::NotFound`] / [`Take::Busy`]: as for [`ExactTable::delete`]; `Busy` means try
    ///   again later, never "gone".
    ///
    /// Unlike `delete`, an expired entry under `AutoDelete` is returned like any other.
    pub fn take(
        &self,
        local: &mut Local,
        key: &[u64; KW],
        cond: impl FnOnce(&Entry<KW, DW>) -> bool,
    ) -> Result<Entry<KW, DW>, Take<KW, DW>> {
        let hash = self.hash(key);
        let (b, sig) = ((hash & self.mask) as usize, u64::from(super::sig_of(hash)));
        let bucket = self.buckets.get(b).ok_or(Take::NotFound)?;
        let guard = bucket.lock().ok_or(Take::Busy)?;
        let way = self.find_locked(bucket, b, key, sig).ok_or(Take::NotFound)?;
        let slot = self.slot(b, way).ok_or(Take::NotFound)?;
        let tag = bucket.tag(way);
        let d = slot.deadline.load(Ordering::Relaxed);
        let entry = Entry {
            key: slot.read_key(),
            action: tag_action(tag),
            params: slot.read_data(),
            profile: tag_profile(tag),
            deadline: (d != NEVER).then_some(Instant(d)),
            notified: tag & NOTIFIED != 0,
        };
        if !cond(&entry) {
            bucket.set_tag(way, tag & !NOTIFIED);
            return Err(Take::Kept(entry));
        }
        bucket.set_tag(way, 0);
        drop(guard);
        self.give_capacity(local);
        local.stats.deletes += 1;
        Ok(entry)
    }

    /// Tests only: holds `key`'s bucket locked (another writer, a preempted vCPU) until the
    /// returned guard drops; every write to that bucket meanwhile answers `Busy`.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn hold_bucket(&self, key: &[u64; KW]) -> Option<impl Sized + '_> {
        self.buckets.get(self.bucket_of(key))?.hold()
    }

    /// Reads the entries of bucket `b` from a clean snapshot into `out`; returns how many.
    fn snapshot(&self, b: usize, out: &mut [Option<Entry<KW, DW>>; WAYS]) -> usize {
        let Some(bucket) = self.buckets.get(b) else { return 0 };
        for _ in 0..READ_RETRIES {
            let s = bucket.seq.load(Ordering::Acquire);
            if s & 1 == 0 {
                let mut n = 0;
                for (w, o) in out.iter_mut().enumerate() {
                    let tag = bucket.tag(w);
                    *o = None;
                    if tag & LIVE == 0 {
                        continue;
                    }
                    let Some(slot) = self.slot(b, w) else { continue };
                    let d = slot.deadline.load(Ordering::Relaxed);
                    *o = Some(Entry {
                        key: slot.read_key(),
                        action: tag_action(tag),
                        params: slot.read_data(),
                        profile: tag_profile(tag),
                        deadline: (d != NEVER).then_some(Instant(d)),
                        notified: tag & NOTIFIED != 0,
                    });
                    n += 1;
                }
                fence(Ordering::Acquire);
                if bucket.seq.load(Ordering::Relaxed) == s {
                    return n;
                }
            }
            spin_hint();
        }
        // A writer held the bucket for the whole wait: read it under its lock instead.
        let Some(_g) = bucket.lock() else { return 0 };
        let mut n = 0;
        for (w, o) in out.iter_mut().enumerate() {
            let tag = bucket.tag(w);
            *o = None;
            if let (true, Some(slot)) = (tag & LIVE != 0, self.slot(b, w)) {
                let d = slot.deadline.load(Ordering::Relaxed);
                *o = Some(Entry {
                    key: slot.read_key(),
                    action: tag_action(tag),
                    params: slot.read_data(),
                    profile: tag_profile(tag),
                    deadline: (d != NEVER).then_some(Instant(d)),
                    notified: tag & NOTIFIED != 0,
                });
                n += 1;
            }
        }
        n
    }

    /// Whether an entry counts as present at `now` (under `AutoDelete`, expired ones do not).
    fn present(&self, e: &Entry<KW, DW>, now: Instant) -> bool {
        !self.is_expired(e.deadline.map_or(NEVER, Instant::ticks), now)
    }

    /// The entry for `key`, if present at `now`.
    pub fn get(&self, key: &[u64; KW], now: Instant) -> Option<Entry<KW, DW>> {
        let mut buf = [None; WAYS];
        self.snapshot(self.bucket_of(key), &mut buf);
        buf.into_iter().flatten().find(|e| e.key == *key && self.present(e, now))
    }

    /// Calls `f` for every entry present at `now`, bucket by bucket (each bucket is a consistent
    /// snapshot; the table as a whole may change while the iteration runs).
    pub fn for_each(&self, now: Instant, mut f: impl FnMut(&Entry<KW, DW>)) {
        let mut buf = [None; WAYS];
        for b in 0..self.buckets.len() {
            self.snapshot(b, &mut buf);
            for e in buf.iter().flatten() {
                if self.present(e, now) {
                    f(e);
                }
            }
        }
    }

    /// Number of entries present at `now` (walks the whole table).
    pub fn count(&self, now: Instant) -> usize {
        let mut n = 0;
        self.for_each(now, |_| n += 1);
        n
    }

    /// The ring on which a `NotifyControl` sweep reports expired entries.
    pub fn events(&self) -> &super::super::events::EventRing<KW> {
        &self.events
    }

    /// Expiry sweep over `max_buckets` buckets from `cursor`; returns the cursor to pass next time
    /// (0 after the last bucket). `NotifyControl`: each expired entry is reported once on the event
    /// ring (if the ring is full the report is counted as an overflow and retried by a later
    /// sweep); `AutoDelete`: expired entries are freed; `NoTimeout`: nothing to do.
    pub fn sweep(&self, local: &mut Local, now: Instant, cursor: usize, max_buckets: usize) -> usize {
        let n = self.buckets.len();
        if self.cfg.idle_timeout == IdleTimeout::NoTimeout {
            return 0;
        }
        let start = if cursor < n { cursor } else { 0 };
        let end = start.saturating_add(max_buckets).min(n);
        for b in start..end {
            self.sweep_bucket(local, b, now);
        }
        if end >= n { 0 } else { end }
    }

    fn sweep_bucket(&self, local: &mut Local, b: usize, now: Instant) {
        let Some(bucket) = self.buckets.get(b) else { return };
        let due = |w: usize, tag: u64| {
            tag & LIVE != 0
                && tag & NOTIFIED == 0
                && self.slot(b, w).is_some_and(|s| s.deadline.load(Ordering::Relaxed) <= now.ticks())
        };
        // A racy pre-check without the lock: most buckets have nothing due.
        if !(0..WAYS).any(|w| due(w, bucket.tag(w))) {
            return;
        }
        let Some(guard) = bucket.lock() else { return };
        let mut freed = 0;
        for w in 0..WAYS {
            let tag = bucket.tag(w);
            if !due(w, tag) {
                continue;
            }
            let Some(slot) = self.slot(b, w) else { continue };
            if self.cfg.idle_timeout == IdleTimeout::AutoDelete {
                bucket.set_tag(w, 0);
                freed += 1;
                continue;
            }
            let ev = ExpiryEvent {
                key: slot.read_key(),
                action: tag_action(tag),
                profile: tag_profile(tag),
                deadline: Instant(slot.deadline.load(Ordering::Relaxed)),
            };
            if self.events.push(&ev) {
                bucket.set_tag(w, tag | NOTIFIED);
                local.stats.expired_notified += 1;
            }
        }
        drop(guard);
        for _ in 0..freed {
            self.give_capacity(local);
            local.stats.expired_reclaimed += 1;
        }
    }
}
