//! Data-plane operations on a hit entry, through its [`EntryHandle`]: parameter updates
//! (beyond PNA, like DPDK's learner "add on hit"), PNA `set_entry_expire_time` and
//! `restart_expire_timer`. Each takes the entry's bucket lock, checks that the slot still holds
//! the handle's key (and, under `AutoDelete`, that it has not expired), then writes.

use super::super::{EntryError, ExpireProfileId, IdleTimeout, Ordering};
use super::{Bucket, EntryHandle, ExactTable, LIVE, Local, NOTIFIED, PROFILE_SHIFT, Slot, tag_profile};
use crate::time::Instant;

impl<const KW: usize, const DW: usize> ExactTable<KW, DW> {
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
            if tag & LIVE == 0
                || !slot.key_eq(&handle.key)
                || self.is_expired(slot.deadline.load(Ordering::Relaxed), now)
            {
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
