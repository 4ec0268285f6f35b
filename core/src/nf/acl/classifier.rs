//! The ACL's rule classifier: tuple space search with merged tuples (TupleMerge, Daly et al.,
//! ToN 2019).
//!
//! Plain tuple space search ([`crate::pna::ternary::TernaryTable`]) keeps one hash table per
//! exact (source length, destination length, protocol-given) tuple, so a rule set with many
//! different prefix lengths costs one probe per distinct tuple. Here a rule is filed under its
//! prefix lengths *rounded down to a multiple of 8* (TupleMerge's "relaxed" tuples): at most
//! 17 × 17 × 2 tuples for any rule set, usually a few dozen. A hash entry then holds every rule
//! whose masked (source, destination, protocol) agrees on the rounded lengths; each candidate is
//! checked in full ([`Rule::matches`]) in (priority descending, index ascending) order, so the
//! first match in a list is that list's best.
//!
//! Tuples are visited by decreasing best priority and the search stops as soon as the match in
//! hand beats every rule a remaining tuple holds. Ties between equal priorities go to the rule
//! that comes first in the rule list, as in the linear reference [`Classifier::classify_linear`].
//!
//! A rule set small enough for its bit vectors to fit [`super::bitvec::MAX_BYTES`] (about
//! 1 500 rules) is classified by [`super::BitVec`] instead: a lookup costs two binary searches
//! and a few word ANDs whatever the rules, where the tuples cost a probe each; the tuples
//! take larger sets. Both give the linear reference's answer.
//!
//! Everything is built once ([`Classifier::new`], allocating); [`Classifier::classify`] never
//! allocates and never panics.

use alloc::vec::Vec;

use super::BitVec;
use crate::pna::ternary::{FiveTuple, Match, Rule};

/// Prefix lengths are rounded down to a multiple of this (the tuple granularity).
const ROUND: u8 = 8;

#[inline]
fn mask(a: u128, len: u8) -> u128 {
    if len == 0 { 0 } else { a & (u128::MAX << (128 - u32::from(len.min(128)))) }
}

#[inline]
fn hash3(src: u128, dst: u128, proto: u8) -> u64 {
    crate::pna::exact::hash_key(
        0x243F_6A88_85A3_08D3,
        &[src as u64, (src >> 64) as u64, dst as u64, (dst >> 64) as u64 ^ u64::from(proto)],
    )
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    used: bool,
    proto: u8,
    src: u128,
    dst: u128,
    /// Range of `Classifier::lists`.
    start: u32,
    len: u32,
}

#[derive(Debug, Clone, Copy)]
struct Tuple {
    src_len: u8,
    dst_len: u8,
    has_proto: bool,
    /// The best priority among the tuple's rules.
    best: u32,
    /// First slot in `Classifier::slots`.
    base: usize,
    /// Slot count − 1 (a power of two minus one).
    mask: usize,
}

/// A 5-tuple classifier over a fixed list of rules, each with its id.
#[derive(Debug, Default)]
pub struct Classifier {
    rules: Vec<(u32, Rule)>,
    /// The bit vectors, when the set fits them (then the tuples are not built).
    bits: Option<BitVec>,
    tuples: Vec<Tuple>,
    slots: Vec<Slot>,
    lists: Vec<u32>,
}

impl Classifier {
    /// Builds the classifier over `rules` (already validated: prefix lengths ≤ 128, port ranges
    /// not empty). Rule `i` of the list has id `i`.
    pub fn new(rules: &[Rule]) -> Self {
        let with_ids: Vec<(u32, Rule)> = rules.iter().enumerate().map(|(i, r)| (i as u32, *r)).collect();
        Self::with_ids(with_ids)
    }

    /// Builds the classifier over `(id, rule)` pairs with ids in increasing order (ties between
    /// equal priorities go to the lower id).
    pub fn with_ids(rules: Vec<(u32, Rule)>) -> Self {
        if let Some(bits) = BitVec::try_new(&rules, super::bitvec::MAX_BYTES) {
            return Classifier { rules, bits: Some(bits), ..Self::default() };
        }
        Self::tuples(rules)
    }

    /// The tuple-space classifier alone, whatever the set's size (for tests and measurements
    /// that compare the two).
    pub fn tuples(rules: Vec<(u32, Rule)>) -> Self {
        // (tuple, masked value, priority, id), sorted so that each tuple's values are contiguous
        // and each value's rules are in classification order.
        type Keyed = ((u8, u8, bool), (u128, u128, u8), u32, u32);
        let mut keyed: Vec<Keyed> = rules
            .iter()
            .enumerate()
            .map(|(id, (_, r))| {
                let (sl, dl) = (r.src.1.min(128) / ROUND * ROUND, r.dst.1.min(128) / ROUND * ROUND);
                let value = (mask(r.src.0, sl), mask(r.dst.0, dl), r.proto.unwrap_or(0));
                ((sl, dl, r.proto.is_some()), value, r.priority, id as u32)
            })
            .collect();
        keyed.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)).then(a.3.cmp(&b.3)));
        let mut c = Classifier { rules, ..Self::default() };
        for group in keyed.chunk_by(|a, b| a.0 == b.0) {
            let Some(first) = group.first() else { continue };
            let values = group.chunk_by(|a, b| a.1 == b.1).count();
            let n = (values * 2).next_power_of_two();
            let base = c.slots.len();
            c.slots.resize(base + n, Slot::default());
            let mut best = 0;
            for same in group.chunk_by(|a, b| a.1 == b.1) {
                let Some(&(_, (src, dst, proto), _, _)) = same.first() else { continue };
                let start = c.lists.len() as u32;
                for &(_, _, pri, id) in same {
                    best = best.max(pri);
                    c.lists.push(id);
                }
                let mut h = hash3(src, dst, proto) as usize & (n - 1);
                while c.slots.get(base + h).is_some_and(|s| s.used) {
                    h = (h + 1) & (n - 1);
                }
                if let Some(s) = c.slots.get_mut(base + h) {
                    *s = Slot { used: true, proto, src, dst, start, len: same.len() as u32 };
                }
            }
            let (src_len, dst_len, has_proto) = first.0;
            c.tuples.push(Tuple { src_len, dst_len, has_proto, best, base, mask: n - 1 });
        }
        c.tuples.sort_by_key(|t| core::cmp::Reverse(t.best));
        c
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.len()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether lookups go through the bit vectors ([`super::BitVec`]).
    pub fn uses_bit_vectors(&self) -> bool {
        self.bits.is_some()
    }

    /// Number of (merged) tuples: the number of hash probes a lookup makes at most (0 with bit
    /// vectors).
    pub fn tuple_count(&self) -> usize {
        self.tuples.len()
    }

    /// The rules with their ids.
    pub fn rules(&self) -> &[(u32, Rule)] {
        &self.rules
    }

    /// The best rule matching `p`: highest priority, then lowest id.
    pub fn classify(&self, p: &FiveTuple) -> Option<Match> {
        if let Some(b) = &self.bits {
            return b.classify(p);
        }
        let mut best: Option<Match> = None;
        for t in &self.tuples {
            if best.is_some_and(|b| b.priority > t.best) {
                break;
            }
            let (s, d) = (mask(p.src, t.src_len), mask(p.dst, t.dst_len));
            let pr = if t.has_proto { p.proto } else { 0 };
            let mut h = hash3(s, d, pr) as usize & t.mask;
            for _ in 0..=t.mask {
                let Some(slot) = self.slots.get(t.base + h) else { break };
                if !slot.used {
                    break;
                }
                if slot.src == s && slot.dst == d && slot.proto == pr {
                    self.scan(slot, p, &mut best);
                    break;
                }
                h = (h + 1) & t.mask;
            }
        }
        best
    }

    /// Checks one hash entry's rules, in order, against `p`.
    #[inline]
    fn scan(&self, slot: &Slot, p: &FiveTuple, best: &mut Option<Match>) {
        let list = self.lists.get(slot.start as usize..(slot.start + slot.len) as usize).unwrap_or(&[]);
        for &at in list {
            let Some(&(id, ref r)) = self.rules.get(at as usize) else { continue };
            if best.is_some_and(|b| b.priority > r.priority || (b.priority == r.priority && b.rule < id)) {
                return; // sorted: nothing later in the list beats the match in hand
            }
            if r.matches(p) {
                *best = Some(Match { rule: id, action: r.action, priority: r.priority });
                return;
            }
        }
    }

    /// The reference: a linear scan (highest priority, then lowest id).
    pub fn classify_linear(&self, p: &FiveTuple) -> Option<Match> {
        let mut best: Option<Match> = None;
        for &(id, ref r) in &self.rules {
            if r.matches(p) && best.is_none_or(|b| r.priority > b.priority) {
                best = Some(Match { rule: id, action: r.action, priority: r.priority });
            }
        }
        best
    }
}
