//! P4 Portable NIC Architecture match-action tables (PNA v0.7 §"add-on-miss",
//! §"idle timeout").
//!
//! - [`exact`]: the exact-match table that the data plane fills itself: `add_on_miss`, data-plane
//!   updates of an entry's parameters, idle timeout (`NoTimeout`, `NotifyControl`, `AutoDelete`)
//!   with expire-time profiles, control-plane insert/modify/delete/iteration, burst lookups.
//!   Lookups take no lock; writers lock one bucket at a time (a seqlock), never the table.
//! - [`p4`]: the P4-shaped face of an exact table for NFs: typed actions with parameters, a default
//!   action, `add_entry` from the miss path, and entry handles for the hit path.
//! - [`events`]: the bounded multi-producer ring that carries `NotifyControl` expiry reports.
//! - [`lpm`]: longest-prefix match for IPv4 and IPv6 routes (a multibit trie, first stride 16 or
//!   24 bits, then 8-bit strides), managed by the control plane.
//! - [`poptrie`]: IPv4 longest-prefix match in a compressed multiway trie that fits in cache
//!   (a 16- to 24-bit direct array, then 6-bit nodes with popcount-indexed children).
//! - [`ternary`]: a 5-tuple rule classifier (prefixes, port ranges, protocol, priority) by tuple
//!   space search, with a linear reference.
//!
//! Details beyond the submodules' own docs:
//!
//! - `ExactTable::lookup_burst` works in phases over 32 keys (hash and prefetch headers;
//!   snapshot and compare tags, prefetch the candidate or the free slot; read the candidate
//!   slots; validate every snapshot), and its `Miss` token keeps the validated snapshot
//!   (`seq`, first free way): `add_on_miss` right after it locks with `compare_exchange(seq →
//!   seq+1)` and writes that way without a second scan — valid exactly when no writer
//!   entered the bucket since; otherwise the full add path runs. The prefetch is
//!   [`crate::sync::prefetch`], the one `unsafe` this needs (`_mm_prefetch` is a
//!   `#[target_feature]` fn; a no-op on the soft-float bare-metal target).
//! - Idle timeout: `NotifyControl` reports an expired entry once on
//!   [`events::EventRing`] (overflow is counted and retried); `AutoDelete` is lazy (an expired
//!   entry is a miss and its slot is reused by adds; the sweep frees the rest). `take(key,
//!   cond)` is the consumer side of an expiry report: under the bucket's lock it deletes and
//!   returns the entry only if `cond` still holds for it (e.g. "still expired"), else keeps
//!   it and clears its reported mark so its next expiry is reported again — no
//!   check-then-delete race with a packet on another core. NAT and Accounting reclaim
//!   through it, and every step that finds a bucket busy (take, the inbound NAT delete, the
//!   port's return to the pool, a record the export ring had no room for after all) goes on
//!   the worker's bounded pending list, retried by later batches; while that list is full
//!   they take no new reports (and NAT creates no new mapping), so nothing is forgotten
//!   (`nf/nat/tests.rs`, `nf/accounting/tests.rs` hold a bucket busy to prove it).
//! - Expire profiles are 256 durations set by the control plane; a hit never refreshes a
//!   timer, `set_entry_expire_time` / `restart_expire_timer` do. Counters live in a per-core
//!   `Local` (`ExactTable::local()`, plain integers) that also holds a 32-entry capacity
//!   reserve, so cores inserting at once share no counter line per insert.
//!
//! Tests: proptest against a reference model with a virtual clock (every op, every mode),
//! loom models of the bucket seqlock (`RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom
//! cargo test -p cadence-core --release pna`), proptests of LPM and ternary against linear
//! scans. Figures: docs/PERFORMANCE.md, "PNA tables".
//!
//! Time is always passed in ([`Instant`](crate::time::Instant)); nothing here reads a clock.
//! Memory is allocated when a table is built; the per-packet paths never allocate and never
//! panic (results are `Option`/`Result`/status enums, failures are counted by reason).

#![forbid(unsafe_code)]

use core::fmt;

pub mod events;
pub mod exact;
pub mod lpm;
pub mod p4;
pub mod poptrie;
pub mod ternary;

#[cfg(test)]
mod tests;

// Atomics: loom's under `--cfg loom` (so the model checker sees every access), core's otherwise.
pub(crate) use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering, fence, spin_hint};

/// PNA `ExpireTimeProfileId_t`: the control plane maps each id to a duration.
pub type ExpireProfileId = u8;

/// An action's identifier within its table (P4 action id, 0..=255).
pub type ActionId = u8;

/// PNA `pna_idle_timeout` table property.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IdleTimeout {
    /// Entries never expire.
    NoTimeout,
    /// Expired entries stay matchable; a sweep reports them once on the event ring and the control
    /// plane decides (usually deletes them).
    NotifyControl,
    /// Expired entries count as absent and their slots as free (lazy deletion); a sweep frees them.
    AutoDelete,
}

/// Why `add_entry` (or a control-plane insert) did not add the entry (`ADD_ENTRY_NOT_DONE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NotDone {
    /// The table holds its capacity of entries.
    TableFull,
    /// Every slot of the key's bucket is taken by a live entry.
    BucketFull,
    /// The action is not one of the table's hit actions.
    InvalidAction,
    /// The key is already in the table (another core added it since the miss).
    KeyExists,
    /// The bucket stayed locked by another writer for the whole bounded wait.
    Busy,
    /// The table was declared without `add_on_miss`.
    AddOnMissDisabled,
}

impl NotDone {
    /// Number of reasons (the length of the per-reason counter array).
    pub const COUNT: usize = 6;

    /// Index into per-reason counters.
    pub const fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for NotDone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NotDone::TableFull => "table full",
            NotDone::BucketFull => "bucket full",
            NotDone::InvalidAction => "invalid action",
            NotDone::KeyExists => "key exists",
            NotDone::Busy => "bucket busy",
            NotDone::AddOnMissDisabled => "add_on_miss disabled",
        })
    }
}

/// PNA `AddEntryErrorStatus_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AddStatus {
    /// `ADD_ENTRY_SUCCESS`: the next lookup of the key hits.
    Success,
    /// `ADD_ENTRY_NOT_DONE`, with the reason (also counted).
    NotDone(NotDone),
}

impl AddStatus {
    /// Whether the entry was added.
    pub const fn is_success(self) -> bool {
        matches!(self, AddStatus::Success)
    }
}

/// Why an operation on an existing entry failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EntryError {
    /// No such entry (never added, deleted, expired under `AutoDelete`, or its slot was reused).
    NotFound,
    /// The bucket stayed locked by another writer for the whole bounded wait.
    Busy,
    /// Expire-time operations need a table with an idle timeout.
    NoIdleTimeout,
    /// The action is not one of the table's hit actions.
    InvalidAction,
}

impl fmt::Display for EntryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EntryError::NotFound => "no such entry",
            EntryError::Busy => "bucket busy",
            EntryError::NoIdleTimeout => "table has no idle timeout",
            EntryError::InvalidAction => "invalid action",
        })
    }
}

/// A set of action ids (256 bits): the actions a table accepts as hit actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ActionMask([u64; 4]);

impl ActionMask {
    /// No action.
    pub const EMPTY: Self = Self([0; 4]);
    /// Every action id.
    pub const ALL: Self = Self([u64::MAX; 4]);

    /// The set of the given ids.
    pub const fn of(ids: &[ActionId]) -> Self {
        let mut m = [0u64; 4];
        let mut i = 0;
        while i < ids.len() {
            let id = ids[i] as usize;
            m[id / 64] |= 1 << (id % 64);
            i += 1;
        }
        Self(m)
    }

    /// Whether `id` is in the set.
    #[inline]
    pub const fn contains(self, id: ActionId) -> bool {
        let id = id as usize;
        self.0[id / 64] & (1 << (id % 64)) != 0
    }
}
