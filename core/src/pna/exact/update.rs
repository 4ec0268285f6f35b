//! Data-plane operations on a hit entry, through its [`EntryHandle`]: parameter updates
//! (beyond PNA, like DPDK's learner "add on hit"), PNA `set_entry_expire_time` and
//! `restart_expire_timer`. Each takes the entry's bucket lock, checks that the slot still holds
//! the handle's key (and, under `AutoDelete`, that it has not expired), then writes; a table
//! that one core alone writes may restart a timer without the lock
//! (`restart_expire_timer_sole_writer`).

use super::super::{EntryError, ExpireProfileId, IdleTimeout, Ordering};
use super::{Bucket, EntryHandle, ExactTable, LIVE, Local, NOTIFIED, PROFILE_SHIFT, Slot, tag_profile};
use crate::time::Instant;

impl<const KW: usize, const DW: usize> ExactTable<KW, DW> {
    /// Whether the way whose tag is `tag` and slot `slot` still holds `handle`'s entry, alive
    /// at `now`.
    #[inline]
    fn holds(&self, tag: u64, slot: &Slot<KW, DW>, handle: &EntryHandle<KW>, now: Instant) -> bool {
        tag & LIVE != 0 && slot.key_eq(&handle.key) && !self.is_expired(slot.deadline.load(Ordering::Relaxed), now)
    }

    /// Runs `f` on the entry `handle` names, under its bucket's lock, if the entry still lives.
    fn with_handle(
        &self,
        local: &mut Local,
        handle: &EntryHandle<KW>,
        now: Instant,
        f: impl FnOnce(&Bucket, &Slot<KW, DW>, u64) -> Result<(), EntryError>,
    ) -> Result<(), EntryError> {
        let b = handle.bucket as usize;
        let way = handle.way as usize;
        let r = (|| {
            let bucket = self.buckets.get(b).ok_or(EntryError::NotFound)?;
            let slot = self.slot(b, way).ok_or(EntryError::NotFound)?;
            let _guard = bucket.lock().ok_or(EntryError::Busy)?;
            let tag = bucket.tag(way);
            if !self.holds(tag, slot, handle, now) {
                return Err(EntryError::NotFound);
            }
            f(bucket, slot, tag)
        })();
        match r {
            Ok(()) => local.stats.updates += 1,
            Err(_) => local.stats.update_failures += 1,
        }
        r
    }

    /// Data-plane update of the entry's action parameters; the next lookup sees them.
    pub fn update_params(
        &self,
        local: &mut Local,
        handle: &EntryHandle<KW>,
        params: &[u64; DW],
        now: Instant,
    ) -> Result<(), EntryError> {
        self.with_handle(local, handle, now, |_, slot, _| {
            slot.write_data(params);
            Ok(())
        })
    }

    /// PNA `set_entry_expire_time(profile)`: sets the entry's profile and restarts its timer.
    pub fn set_entry_expire_time(
        &self,
        local: &mut Local,
        handle: &EntryHandle<KW>,
        profile: ExpireProfileId,
        now: Instant,
    ) -> Result<(), EntryError> {
        if self.cfg.idle_timeout == IdleTimeout::NoTimeout {
            return Err(EntryError::NoIdleTimeout);
        }
        let way = handle.way as usize;
        self.with_handle(local, handle, now, |bucket, slot, tag| {
            let tag = (tag & !(0xFF << PROFILE_SHIFT) & !NOTIFIED) | (profile as u64) << PROFILE_SHIFT;
            bucket.set_tag(way, tag);
            slot.deadline.store(self.deadline(profile, now), Ordering::Relaxed);
            Ok(())
        })
    }

    /// [`ExactTable::restart_expire_timer`] for a table the calling core alone writes (a P4
    /// program's learner: each worker has its own, and the control plane only reads it). The
    /// deadline is one atomic word, so with no other writer it is stored without the bucket's
    /// lock: a reader's snapshot sees the old or the new deadline, as around the locked write.
    /// An entry whose expiry was reported (`NotifyControl`) takes the locked path, which clears
    /// the report's flag in the tag. Another core writing the table could free and reuse the
    /// slot between the check and the store (the new entry would get this deadline): that no
    /// other core writes is the caller's promise.
    pub fn restart_expire_timer_sole_writer(
        &self,
        local: &mut Local,
        handle: &EntryHandle<KW>,
        now: Instant,
    ) -> Result<(), EntryError> {
        if self.cfg.idle_timeout == IdleTimeout::NoTimeout {
            return Err(EntryError::NoIdleTimeout);
        }
        let (b, way) = (handle.bucket as usize, handle.way as usize);
        let (Some(bucket), Some(slot)) = (self.buckets.get(b), self.slot(b, way)) else {
            local.stats.update_failures += 1;
            return Err(EntryError::NotFound);
        };
        let tag = bucket.tag(way);
        if tag & NOTIFIED != 0 {
            return self.restart_expire_timer(local, handle, now);
        }
        if !self.holds(tag, slot, handle, now) {
            local.stats.update_failures += 1;
            return Err(EntryError::NotFound);
        }
        slot.deadline.store(self.deadline(tag_profile(tag), now), Ordering::Relaxed);
        local.stats.updates += 1;
        Ok(())
    }

    /// PNA `restart_expire_timer()`: the entry's timer starts again from `now`.
    pub fn restart_expire_timer(
        &self,
        local: &mut Local,
        handle: &EntryHandle<KW>,
        now: Instant,
    ) -> Result<(), EntryError> {
        if self.cfg.idle_timeout == IdleTimeout::NoTimeout {
            return Err(EntryError::NoIdleTimeout);
        }
        let way = handle.way as usize;
        self.with_handle(local, handle, now, |bucket, slot, tag| {
            bucket.set_tag(way, tag & !NOTIFIED);
            slot.deadline.store(self.deadline(tag_profile(tag), now), Ordering::Relaxed);
            Ok(())
        })
    }
}
