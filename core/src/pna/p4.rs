//! The P4-shaped face of an exact table, for NFs (PNA §"add-on-miss", §"idle timeout").
//!
//! A P4 table declares its key, its actions (with parameters), a default action, `add_on_miss`
//! and its idle-timeout mode. Here the key is `[u64; KW]`, the actions are a Rust enum that
//! implements [`Actions`] (id + parameters packed into `DW` words), and the rest is a [`TableDecl`].
//! [`P4Table::apply_burst`] returns, per key, either the hit action with its parameters and an
//! [`EntryRef`] (for data-plane updates and expire-time changes) or the default action with the
//! [`Miss`] token that `add_entry` takes.
//!
//! ```
//! use cadence_core::pna::{ActionId, ActionMask, AddStatus, IdleTimeout};
//! use cadence_core::pna::p4::{Actions, Applied, P4Table, TableDecl};
//! use cadence_core::time::{Duration, Instant};
//!
//! #[derive(Debug, Clone, Copy, PartialEq)]
//! enum Conn { Track { packets: u64 }, Drop }
//! impl Actions<1> for Conn {
//!     const HIT_ACTIONS: ActionMask = ActionMask::of(&[0]);
//!     fn encode(&self) -> (ActionId, [u64; 1]) {
//!         match self { Conn::Track { packets } => (0, [*packets]), Conn::Drop => (1, [0]) }
//!     }
//!     fn decode(id: ActionId, p: &[u64; 1]) -> Option<Self> {
//!         match id { 0 => Some(Conn::Track { packets: p[0] }), 1 => Some(Conn::Drop), _ => None }
//!     }
//! }
//!
//! let mut decl = TableDecl::new(1024, Conn::Drop);
//! decl.idle_timeout = IdleTimeout::AutoDelete;
//! let t = P4Table::<2, 1, Conn>::new(decl);
//! t.table().set_expire_profile(1, Duration(1_000));
//! let mut local = t.table().local();
//! let key = [[0x0a00_0001_0a00_0002, 0x0006_1234_0050]];
//! let mut out = [t.placeholder(); 1];
//! t.apply_burst(&mut local, &key, Instant(0), &mut out);
//! let Applied::Miss { miss, .. } = out[0] else { unreachable!() };
//! assert_eq!(t.add_entry(&mut local, &miss, &Conn::Track { packets: 1 }, 1, Instant(0)), AddStatus::Success);
//! t.apply_burst(&mut local, &key, Instant(10), &mut out);
//! let Applied::Hit { action: Conn::Track { packets }, entry } = out[0] else { unreachable!() };
//! t.update(&mut local, &entry, &Conn::Track { packets: packets + 1 }, Instant(10)).unwrap();
//! t.apply_burst(&mut local, &key, Instant(2_000), &mut out); // idle for 1000 ticks: gone
//! assert!(matches!(out[0], Applied::Miss { .. }));
//! ```

use core::fmt;
use core::marker::PhantomData;

use super::exact::{EntryHandle, ExactConfig, ExactTable, Local, Lookup, Miss, burst::BURST};
use super::{ActionId, ActionMask, AddStatus, EntryError, ExpireProfileId, IdleTimeout};
use crate::time::Instant;

/// A table's actions: an enum whose variants carry the parameters, packed into `DW` words.
pub trait Actions<const DW: usize>: Sized + Copy {
    /// The actions an entry may carry (PNA: hit actions; `@defaultonly` ones are left out).
    const HIT_ACTIONS: ActionMask;
    /// The action's id and its parameters.
    fn encode(&self) -> (ActionId, [u64; DW]);
    /// The action with id `id` and parameters `params`; `None` for an unknown id.
    fn decode(id: ActionId, params: &[u64; DW]) -> Option<Self>;
}

/// A P4 table declaration (key and action types are the table's type parameters).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct TableDecl<A> {
    /// Maximum number of entries.
    pub capacity: usize,
    /// The default (miss) action.
    pub default_action: A,
    /// PNA `add_on_miss`.
    pub add_on_miss: bool,
    /// PNA `pna_idle_timeout`.
    pub idle_timeout: IdleTimeout,
    /// Capacity of the `NotifyControl` event ring.
    pub event_ring: usize,
    /// Buckets (power of two; 0 = automatic).
    pub buckets: usize,
}

impl<A> TableDecl<A> {
    /// `capacity` entries, `add_on_miss = true`, no idle timeout.
    pub fn new(capacity: usize, default_action: A) -> Self {
        Self {
            capacity,
            default_action,
            add_on_miss: true,
            idle_timeout: IdleTimeout::NoTimeout,
            event_ring: 1024,
            buckets: 0,
        }
    }
}

/// A hit entry, for updates from the action that hit it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<const KW: usize> {
    handle: EntryHandle<KW>,
    action: ActionId,
}

impl<const KW: usize> EntryRef<KW> {
    /// The raw handle of the exact table.
    pub fn handle(&self) -> &EntryHandle<KW> {
        &self.handle
    }
}

/// The outcome of applying the table to one key.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Applied<const KW: usize, A> {
    /// The key matched an entry: its action (with parameters) and a reference for updates.
    Hit {
        /// The entry's action and parameters.
        action: A,
        /// For `update`, `set_entry_expire_time` and `restart_expire_timer`.
        entry: EntryRef<KW>,
    },
    /// No entry: the default action, and the token for `add_entry`.
    Miss {
        /// The table's default action.
        default_action: A,
        /// The key that missed.
        miss: Miss<KW>,
    },
}

/// A P4 exact-match table with typed actions.
pub struct P4Table<const KW: usize, const DW: usize, A: Actions<DW>> {
    table: ExactTable<KW, DW>,
    default_action: A,
    _a: PhantomData<A>,
}

impl<const KW: usize, const DW: usize, A: Actions<DW>> fmt::Debug for P4Table<KW, DW, A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("P4Table").field("table", &self.table).finish_non_exhaustive()
    }
}

impl<const KW: usize, const DW: usize, A: Actions<DW>> P4Table<KW, DW, A> {
    /// Builds the table; `Err` for an invalid declaration.
    pub fn try_new(decl: TableDecl<A>) -> Result<Self, super::exact::TableConfigError> {
        let mut cfg = ExactConfig::new(decl.capacity);
        cfg.add_on_miss = decl.add_on_miss;
        cfg.idle_timeout = decl.idle_timeout;
        cfg.hit_actions = A::HIT_ACTIONS;
        cfg.event_ring = decl.event_ring;
        cfg.buckets = decl.buckets;
        Ok(Self { table: ExactTable::try_new(cfg)?, default_action: decl.default_action, _a: PhantomData })
    }

    /// Builds the table.
    ///
    /// # Panics
    /// If the declaration is invalid (zero capacity, bucket count not a power of two).
    #[allow(clippy::panic)]
    pub fn new(decl: TableDecl<A>) -> Self {
        match Self::try_new(decl) {
            Ok(t) => t,
            Err(e) => panic!("P4 table: {e}"),
        }
    }

    /// The underlying exact table (locals, profiles, control plane, sweep, events).
    pub fn table(&self) -> &ExactTable<KW, DW> {
        &self.table
    }

    /// A value to fill output arrays with before [`apply_burst`](Self::apply_burst).
    pub fn placeholder(&self) -> Applied<KW, A> {
        match Lookup::<KW, DW>::EMPTY {
            Lookup::Miss(miss) => Applied::Miss { default_action: self.default_action, miss },
            Lookup::Hit(_) => Applied::Miss { default_action: self.default_action, miss: Miss::new([0; KW], 0) },
        }
    }

    fn convert(&self, l: Lookup<KW, DW>) -> Applied<KW, A> {
        match l {
            Lookup::Hit(h) => match A::decode(h.action, &h.params) {
                Some(action) => Applied::Hit { action, entry: EntryRef { handle: h.handle, action: h.action } },
                None => {
                    // Entries are only written from `encode`, so this is unreachable in practice;
                    // answer the default action rather than panic.
                    debug_assert!(false, "stored action {} does not decode", h.action);
                    let key = *h.handle.key();
                    Applied::Miss { default_action: self.default_action, miss: Miss::new(key, self.table.hash(&key)) }
                }
            },
            Lookup::Miss(miss) => Applied::Miss { default_action: self.default_action, miss },
        }
    }

    /// Applies the table to each key (in groups of 32); returns the hits.
    pub fn apply_burst(
        &self,
        local: &mut Local,
        keys: &[[u64; KW]],
        now: Instant,
        out: &mut [Applied<KW, A>],
    ) -> usize {
        let mut raw = [Lookup::<KW, DW>::EMPTY; BURST];
        let mut hits = 0;
        for (k, o) in keys.chunks(BURST).zip(out.chunks_mut(BURST)) {
            let n = k.len().min(o.len());
            let (Some(kk), Some(rr)) = (k.get(..n), raw.get_mut(..n)) else { break };
            hits += self.table.lookup_burst(local, kk, now, rr);
            for (dst, src) in o.iter_mut().zip(rr.iter()) {
                *dst = self.convert(*src);
            }
        }
        hits
    }

    /// Applies the table to one key.
    pub fn apply(&self, local: &mut Local, key: &[u64; KW], now: Instant) -> Applied<KW, A> {
        self.convert(self.table.lookup(local, key, now))
    }

    /// PNA `add_entry(action, params, expire_time_profile_id)` from the default action.
    pub fn add_entry(
        &self,
        local: &mut Local,
        miss: &Miss<KW>,
        action: &A,
        profile: ExpireProfileId,
        now: Instant,
    ) -> AddStatus {
        let (id, params) = action.encode();
        self.table.add_on_miss(local, miss, id, &params, profile, now)
    }

    /// Data-plane update of the hit entry's parameters (the action stays the one that hit;
    /// passing another action is `InvalidAction`).
    pub fn update(&self, local: &mut Local, entry: &EntryRef<KW>, action: &A, now: Instant) -> Result<(), EntryError> {
        let (id, params) = action.encode();
        if id != entry.action {
            return Err(EntryError::InvalidAction);
        }
        self.table.update_params(local, &entry.handle, &params, now)
    }

    /// PNA `set_entry_expire_time(profile)` for the hit entry.
    pub fn set_entry_expire_time(
        &self,
        local: &mut Local,
        entry: &EntryRef<KW>,
        profile: ExpireProfileId,
        now: Instant,
    ) -> Result<(), EntryError> {
        self.table.set_entry_expire_time(local, &entry.handle, profile, now)
    }

    /// PNA `restart_expire_timer()` for the hit entry.
    pub fn restart_expire_timer(
        &self,
        local: &mut Local,
        entry: &EntryRef<KW>,
        now: Instant,
    ) -> Result<(), EntryError> {
        self.table.restart_expire_timer(local, &entry.handle, now)
    }

    /// Control-plane insert of a typed entry.
    pub fn insert(
        &self,
        local: &mut Local,
        key: &[u64; KW],
        action: &A,
        profile: ExpireProfileId,
        now: Instant,
    ) -> AddStatus {
        let (id, params) = action.encode();
        self.table.insert(local, key, id, &params, profile, now)
    }

    /// Control-plane modify of a typed entry (action and parameters).
    pub fn modify(&self, local: &mut Local, key: &[u64; KW], action: &A, now: Instant) -> Result<(), EntryError> {
        let (id, params) = action.encode();
        self.table.modify(local, key, id, &params, now)
    }

    /// Control-plane delete.
    pub fn delete(&self, local: &mut Local, key: &[u64; KW], now: Instant) -> Result<(), EntryError> {
        self.table.delete(local, key, now)
    }

    /// The typed entry for `key`, if present at `now`.
    pub fn get(&self, key: &[u64; KW], now: Instant) -> Option<(A, ExpireProfileId)> {
        let e = self.table.get(key, now)?;
        A::decode(e.action, &e.params).map(|a| (a, e.profile))
    }
}
