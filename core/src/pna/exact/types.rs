//! The public value types of the exact table: configuration, lookup results, handles.

use core::fmt;

use super::super::{ActionId, ActionMask, ExpireProfileId, IdleTimeout};

/// How a table is built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct ExactConfig {
    /// Maximum number of entries (adds beyond it are `NotDone(TableFull)`).
    pub capacity: usize,
    /// Number of buckets, a power of two; 0 picks the smallest with capacity / buckets ≤ 2.
    pub buckets: usize,
    /// Idle timeout mode of the table.
    pub idle_timeout: IdleTimeout,
    /// Whether the data plane may add entries on a miss.
    pub add_on_miss: bool,
    /// The actions an entry may carry (PNA: the table's hit actions, not `@defaultonly` ones).
    pub hit_actions: ActionMask,
    /// Capacity of the `NotifyControl` event ring (rounded up to a power of two; at least 2).
    pub event_ring: usize,
    /// Hash seed.
    pub seed: u64,
}

impl ExactConfig {
    /// A table of `capacity` entries, no timeout, add-on-miss on, every action allowed.
    pub const fn new(capacity: usize) -> Self {
        Self {
            capacity,
            buckets: 0,
            idle_timeout: IdleTimeout::NoTimeout,
            add_on_miss: true,
            hit_actions: ActionMask::ALL,
            event_ring: crate::miri_or(1024, 16),
            seed: 0x5171_7E5E_ED00_CAFE,
        }
    }
}

/// Why a table could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TableConfigError {
    /// `capacity` is zero.
    ZeroCapacity,
    /// `buckets` is not a power of two, or the table would not fit the address space.
    BadBuckets,
    /// The heap has no room for a table of this capacity.
    OutOfMemory,
}

impl fmt::Display for TableConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TableConfigError::ZeroCapacity => "capacity is zero",
            TableConfigError::BadBuckets => "bucket count is not a usable power of two",
            TableConfigError::OutOfMemory => "not enough memory for a table of this capacity",
        })
    }
}

/// A reference to a live entry, returned by a hit; it carries the key, so an operation through
/// a handle whose entry was deleted (or whose slot now holds another key) fails with `NotFound`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryHandle<const KW: usize> {
    pub(super) key: [u64; KW],
    pub(super) bucket: u32,
    pub(super) way: u8,
}

impl<const KW: usize> EntryHandle<KW> {
    /// The entry's key.
    pub fn key(&self) -> &[u64; KW] {
        &self.key
    }
}

/// A lookup that found its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit<const KW: usize, const DW: usize> {
    /// The entry's action.
    pub action: ActionId,
    /// The action's parameters.
    pub params: [u64; DW],
    /// The entry's expire-time profile.
    pub profile: ExpireProfileId,
    /// For updates, expire-time changes and deletes of this entry.
    pub handle: EntryHandle<KW>,
}

/// A lookup that found nothing: the token for `add_on_miss` (it keeps the key and its hash,
/// and — from a burst lookup — what the lookup saw of the key's bucket, so that an add right
/// after it need not scan the bucket again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Miss<const KW: usize> {
    pub(super) key: [u64; KW],
    pub(super) hash: u64,
    /// The bucket's `seq` in the lookup's validated snapshot, or [`Miss::UNSEEN`] (odd: never a
    /// snapshot's value).
    pub(super) seen: u64,
    /// The table that made the snapshot (low 32 bits of its id).
    pub(super) table: u32,
    /// The first free way in the snapshot (the key matched no way of it).
    pub(super) free: u8,
}

impl<const KW: usize> Miss<KW> {
    /// `seen` of a miss whose bucket snapshot is not known.
    pub(super) const UNSEEN: u64 = 1;

    pub(crate) const fn new(key: [u64; KW], hash: u64) -> Self {
        Self { key, hash, seen: Self::UNSEEN, table: 0, free: 0 }
    }

    /// The key that missed.
    pub fn key(&self) -> &[u64; KW] {
        &self.key
    }
}

/// The result of one lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup<const KW: usize, const DW: usize> {
    /// The key is in the table.
    Hit(Hit<KW, DW>),
    /// It is not (or it expired under `AutoDelete`).
    Miss(Miss<KW>),
}

impl<const KW: usize, const DW: usize> Lookup<KW, DW> {
    /// A placeholder for output arrays (a miss on the all-zero key).
    pub const EMPTY: Self = Lookup::Miss(Miss::new([0; KW], 0));

    /// The hit, if any.
    pub fn hit(&self) -> Option<&Hit<KW, DW>> {
        match self {
            Lookup::Hit(h) => Some(h),
            Lookup::Miss(_) => None,
        }
    }
}
