//! Per-core state of an exact table: counters and a small capacity reserve.
//!
//! Shared counters would put one cache line in every lookup and insert of every core; a [`Local`]
//! (a core's own state of one table) is owned by that core (plain integers, no atomics) and the
//! control plane adds every `Local`'s figures
//! up when it reports. The capacity reserve is the same idea as rte_hash's per-lcore free-slot
//! cache: a `Local` takes capacity from the table's shared counter [`CHUNK`] entries at a time, so two
//! cores inserting at once do not fight over that counter's cache line on every insert.

use super::super::NotDone;

/// Capacity units a `Local` takes from (or returns to) the table's shared counter at once.
pub const CHUNK: usize = 32;

/// Counters of one core's [`Local`]. Every `NotDone` is counted by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LocalStats {
    /// Lookups that found a live entry.
    pub hits: u64,
    /// Lookups that found none (including `expired_misses`).
    pub misses: u64,
    /// Misses on an entry that is still stored but whose deadline passed (`AutoDelete`).
    pub expired_misses: u64,
    /// Entries added (data-plane `add_on_miss` and control-plane inserts).
    pub adds: u64,
    /// Adds that were not done, indexed by [`NotDone::index`].
    pub add_failures: [u64; NotDone::COUNT],
    /// Data-plane and control-plane updates of an entry (params, action, expire time).
    pub updates: u64,
    /// Updates whose entry had gone (deleted, expired, reused) or whose bucket stayed busy.
    pub update_failures: u64,
    /// Entries deleted by the control plane.
    pub deletes: u64,
    /// Expired slots freed or reused (`AutoDelete`: by an insert or by a sweep).
    pub expired_reclaimed: u64,
    /// Expired entries reported on the event ring (`NotifyControl`).
    pub expired_notified: u64,
    /// Reader retries because a writer changed the bucket during the read.
    pub read_retries: u64,
}

impl LocalStats {
    /// Adds `other` into `self` (to total every core's `Local` of a table).
    pub fn merge(&mut self, other: &LocalStats) {
        self.hits += other.hits;
        self.misses += other.misses;
        self.expired_misses += other.expired_misses;
        self.adds += other.adds;
        for (a, b) in self.add_failures.iter_mut().zip(other.add_failures.iter()) {
            *a += *b;
        }
        self.updates += other.updates;
        self.update_failures += other.update_failures;
        self.deletes += other.deletes;
        self.expired_reclaimed += other.expired_reclaimed;
        self.expired_notified += other.expired_notified;
        self.read_retries += other.read_retries;
    }

    /// Failed adds for one reason.
    pub fn add_failures_for(&self, reason: NotDone) -> u64 {
        self.add_failures.get(reason.index()).copied().unwrap_or(0)
    }

    /// Failed adds, all reasons.
    pub fn add_failures_total(&self) -> u64 {
        self.add_failures.iter().sum()
    }

    #[inline]
    pub(crate) fn count_failure(&mut self, reason: NotDone) {
        if let Some(c) = self.add_failures.get_mut(reason.index()) {
            *c += 1;
        }
    }
}

/// One core's handle on a table: counters plus a capacity reserve. Make one per core with
/// [`ExactTable::local`](super::ExactTable::local); give it back with
/// [`ExactTable::retire_local`](super::ExactTable::retire_local) so its reserve returns to the table.
#[derive(Debug)]
pub struct Local {
    pub(crate) table_id: u64,
    pub(crate) reserve: usize,
    pub(crate) stats: LocalStats,
}

impl Local {
    /// This local's counters.
    pub fn stats(&self) -> &LocalStats {
        &self.stats
    }

    /// Capacity units this `Local` holds in reserve (counted as used by the table).
    pub fn reserve(&self) -> usize {
        self.reserve
    }
}
