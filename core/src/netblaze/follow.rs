//! Per-flow order across a move: later packets of a migrated flow follow it until its queue
//! drains (no reordering).
//!
//! When the core mapper hands a flow to an auxiliary core (or splits a whale onto a booster),
//! the dedicated core records the position its last handed-over packet has in that core's
//! hand-off ring ([`FollowTable::record`]). Each auxiliary core publishes how many packets it
//! has **completed** (sent or dropped), a monotone counter. A later packet of the flow
//! follows the move while the auxiliary core has not completed that position
//! ([`FollowTable::lookup`]); once it has, the entry is dropped and the flow is local again.
//! Completed, not dequeued: a packet still being processed on the auxiliary core could
//! otherwise be overtaken by a later one processed here.
//!
//! A fixed-capacity open-addressing table (linear probing, backward-shift deletion), keyed by
//! the flow's 64-bit hash, allocated once; a full table refuses the record
//! ([`FollowFull`]), and the caller must then keep the flow local.

use alloc::vec;
use alloc::vec::Vec;

use super::core_mapper::AuxId;

/// Where a following packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Follow {
    /// The auxiliary core (whole flow) or booster (tail).
    pub aux: AuxId,
    /// 0: the whole chain runs there; `k`: NFs `1..=k` run here, the rest there.
    pub split_k: u8,
}

/// The table had no room for another moved flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FollowFull;

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    used: bool,
    key: u64,
    follow: Option<Follow>,
    until: u64,
}

/// Moved flows and the completion position each must wait for.
#[derive(Debug, Clone)]
pub struct FollowTable {
    slots: Vec<Slot>,
    len: usize,
}

impl FollowTable {
    /// A table for at least `flows` moved flows (kept at most half full).
    pub fn with_capacity(flows: usize) -> Self {
        let n = flows.saturating_mul(2).max(8).next_power_of_two();
        Self { slots: vec![Slot::default(); n], len: 0 }
    }

    /// Flows recorded.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no flow is recorded.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn home(&self, key: u64) -> usize {
        // Fibonacci hashing spreads keys that differ only in high bits.
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize & self.mask()
    }

    fn find(&self, key: u64) -> Option<usize> {
        let mut i = self.home(key);
        for _ in 0..self.slots.len() {
            let s = self.slots.get(i)?;
            if !s.used {
                return None;
            }
            if s.key == key {
                return Some(i);
            }
            i = (i + 1) & self.mask();
        }
        None
    }

    fn remove_at(&mut self, mut hole: usize) {
        let mask = self.mask();
        if let Some(s) = self.slots.get_mut(hole) {
            *s = Slot::default();
        }
        self.len = self.len.saturating_sub(1);
        let mut j = (hole + 1) & mask;
        loop {
            let Some(&s) = self.slots.get(j) else { return };
            if !s.used {
                return;
            }
            let home = self.home(s.key);
            // Move `s` into the hole if its home does not lie cyclically in (hole, j].
            let dist_hole = hole.wrapping_sub(home) & mask;
            let dist_j = j.wrapping_sub(home) & mask;
            if dist_hole < dist_j {
                if let Some(h) = self.slots.get_mut(hole) {
                    *h = s;
                }
                if let Some(x) = self.slots.get_mut(j) {
                    *x = Slot::default();
                }
                hole = j;
            }
            j = (j + 1) & mask;
        }
    }

    /// Where a newly arrived packet of flow `key` goes: `Some` while the auxiliary core named
    /// in its entry has completed fewer than the recorded position (`completed(aux)` is that
    /// core's published counter), `None` (and the entry is dropped) once it has.
    pub fn lookup(&mut self, key: u64, completed: impl Fn(AuxId) -> u64) -> Option<Follow> {
        let i = self.find(key)?;
        let s = *self.slots.get(i)?;
        let follow = s.follow?;
        if completed(follow.aux) >= s.until {
            self.remove_at(i);
            return None;
        }
        Some(follow)
    }

    /// Records (or extends) a move: flow `key` has packets on `follow.aux` up to ring position
    /// `until` (the count that core will have completed after its last one).
    pub fn record(&mut self, key: u64, follow: Follow, until: u64) -> Result<(), FollowFull> {
        if let Some(i) = self.find(key) {
            if let Some(s) = self.slots.get_mut(i) {
                s.follow = Some(follow);
                s.until = until;
            }
            return Ok(());
        }
        if (self.len + 1) * 2 > self.slots.len() {
            return Err(FollowFull);
        }
        let mut i = self.home(key);
        loop {
            let Some(s) = self.slots.get_mut(i) else { return Err(FollowFull) };
            if !s.used {
                *s = Slot { used: true, key, follow: Some(follow), until };
                self.len += 1;
                return Ok(());
            }
            i = (i + 1) & (self.slots.len() - 1);
        }
    }

    /// Whether flow `key` is recorded (bound to an auxiliary core until its entry is dropped
    /// by [`FollowTable::lookup`]).
    pub fn contains(&self, key: u64) -> bool {
        self.find(key).is_some()
    }

    /// Whether another flow fits.
    pub fn has_room(&self) -> bool {
        self.room() > 0
    }

    /// How many more flows fit.
    pub fn room(&self) -> usize {
        (self.slots.len() / 2).saturating_sub(self.len)
    }
}
