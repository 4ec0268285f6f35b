//! The ACL's rule classifier: bit vectors in runs of rules for most sets, and tuple space search
//! with merged tuples (TupleMerge, Daly et al., ToN 2019) for the largest.
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
//! Most sets never reach the tuples: the rules in classification order are cut into runs —
//! 1 024, then 2 048 rules each (`GROUP_RULES`) — and each run gets its own
//! [`super::BitVec`] (two address searches, three table reads, five summary words ANDed and
//! then only the vector words all five summaries leave, whatever the rules).
//! A lookup asks the runs in order and the first run with a match holds the answer (every rule
//! of a later run comes after it in classification order). A key matched by an early rule —
//! on rule sets with broad rules near the top, nearly every key — is answered by the first
//! run; a key that no rule matches visits every run (at 10 000 rules, six: the worst case,
//! measured with `core/examples/aclgroups.rs`). Long runs keep the worst case to few runs (each
//! run's tables cost a few cache misses); the summaries keep a long run's lookup to the words
//! that can hold a match. Only a set whose runs together exceed
//! [`GROUPS_MAX_BYTES`] (about 12 000 rules) goes to the tuples.
//!
//! The first run of an IPv4 set is also built as cross tables ([`super::rfc`]: seven table
//! reads for the address pair, then the pair's few rules in order), which answer an IPv4 key
//! while no rule of that run is deleted; the vectors answer the rest. They are left out when
//! they would take more than [`super::rfc::MAX_BYTES`], or when the set would not fit
//! [`GROUPS_MAX_BYTES`] with them.
//!
//! Everything is built once ([`Classifier::new`], allocating); [`Classifier::classify`] never
//! allocates and never panics.

use alloc::vec::Vec;

use super::BitVec;
use super::bitvec::BitVecBuild;
use super::rfc::{BURST, Keys4, NO_MATCH};
use crate::parse::FlowKey;
use crate::pna::ternary::{Match, Point, Rule};

/// Rules per bit-vector group, in classification order: 1 024 first (a set of up to 1 024
/// rules is one run, so every key visits one run; the vectors' summaries let a key skip the
/// words no field has set, so a long run costs little more than a short one), then runs of
/// 2 048 (each run's vectors take up to about a quarter of its rule count squared in bytes
/// per address field: ~2 MiB at 2 048 rules, inside [`super::bitvec::MAX_BYTES`]).
const GROUP_RULES: [usize; 2] = [1024, 2048];

/// The most memory all the groups of one classifier may take; a larger set goes to the tuples.
pub const GROUPS_MAX_BYTES: usize = 20 << 20;

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

/// Rules deleted from a [`Classifier`] since it was built, one bit per rule (its position in
/// the classifier: [`Classifier::kill`]), so that a delete is visible without a rebuild.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dead {
    words: Vec<u64>,
    count: usize,
}

impl Dead {
    /// Rules marked.
    pub fn count(&self) -> usize {
        self.count
    }

    fn set(&mut self, bit: usize) {
        if self.words.len() <= bit / 64 {
            self.words.resize(bit / 64 + 1, 0);
        }
        if let Some(w) = self.words.get_mut(bit / 64) {
            self.count += usize::from(*w & 1 << (bit % 64) == 0);
            *w |= 1 << (bit % 64);
        }
    }

    #[inline]
    fn is_set(words: &[u64], bit: usize) -> bool {
        words.get(bit / 64).is_some_and(|w| w >> (bit % 64) & 1 != 0)
    }
}

/// A classifier being built a piece at a time ([`Build::step`]: one field of one bit-vector
/// group, or the whole tuple classifier), so that the control plane can spread a large build over many
/// short steps while the data plane keeps classifying with the version in force.
#[derive(Debug)]
pub struct Build {
    rules: Vec<(u32, Rule)>,
    /// The rules in classification order (priority descending, id ascending).
    sorted: Vec<(u32, Rule)>,
    groups: Vec<BitVec>,
    at: usize,
    bytes: usize,
    /// The group being built.
    current: Option<BitVecBuild>,
    /// The set does not fit the bit vectors: the tuples take it.
    tuples: bool,
}

impl Build {
    /// A build of `(id, rule)` pairs (ids increasing); nothing is built yet.
    pub fn new(rules: Vec<(u32, Rule)>) -> Self {
        let mut sorted = rules.clone();
        sorted.sort_by(|a, b| b.1.priority.cmp(&a.1.priority).then(a.0.cmp(&b.0)));
        Build { rules, sorted, groups: Vec::new(), at: 0, bytes: 0, current: None, tuples: false }
    }

    /// Builds the next piece (one field of one group's bit vectors); `true` when nothing is
    /// left to build.
    pub fn step(&mut self) -> bool {
        if self.tuples || (self.at >= self.sorted.len() && !self.groups.is_empty() && self.current.is_none()) {
            return true;
        }
        let len = GROUP_RULES.get(self.groups.len()).or(GROUP_RULES.last()).copied().unwrap_or(1024);
        if self.current.is_none() {
            let run = self.sorted.get(self.at..(self.at + len).min(self.sorted.len())).unwrap_or(&[]);
            // The first run — the one nearly every key is answered by — also gets cross
            // tables for IPv4 keys (`super::rfc`); later runs keep to their vectors, so that
            // a large set's memory stays the vectors'.
            self.current = BitVecBuild::new(run, super::bitvec::MAX_BYTES)
                .map(|b| if self.groups.is_empty() { b.with_rfc() } else { b });
        }
        let built = match self.current.as_mut().map(BitVecBuild::step) {
            Some(Some(false)) => return false,
            Some(Some(true)) => self.current.take().and_then(BitVecBuild::finish),
            _ => None,
        };
        // A set that outgrows the budget with the first run's cross tables keeps its vectors
        // without them (they are an accelerator: the tuples would cost far more).
        if let (Some(bits), Some(first)) = (&built, self.groups.first_mut())
            && self.bytes + bits.bytes() > GROUPS_MAX_BYTES
        {
            self.bytes -= first.drop_rfc();
        }
        match built {
            Some(bits) if self.bytes + bits.bytes() <= GROUPS_MAX_BYTES => {
                self.bytes += bits.bytes();
                self.groups.push(bits);
                self.at += len;
                self.at >= self.sorted.len()
            }
            _ => {
                self.groups = Vec::new();
                self.current = None;
                self.tuples = true;
                true
            }
        }
    }

    /// The classifier (finishing what [`Build::step`] left).
    pub fn finish(mut self) -> Classifier {
        while !self.step() {}
        if self.tuples {
            Classifier::tuples(self.rules)
        } else {
            Classifier { rules: self.rules, groups: self.groups, ..Classifier::default() }
        }
    }
}

/// A 5-tuple classifier over a fixed list of rules, each with its id.
#[derive(Debug, Default)]
pub struct Classifier {
    rules: Vec<(u32, Rule)>,
    /// The bit vectors, one classifier per run of consecutive rules in classification order
    /// (`GROUP_RULES`), when the set fits them ([`GROUPS_MAX_BYTES`]); then the tuples are not
    /// built.
    groups: Vec<BitVec>,
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
        let mut b = Build::new(rules);
        while !b.step() {}
        b.finish()
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
        !self.groups.is_empty()
    }

    /// Whether the first run answers IPv4 keys by cross tables ([`super::rfc`]).
    pub fn uses_rfc(&self) -> bool {
        self.groups.first().is_some_and(BitVec::uses_rfc)
    }

    /// Bit-vector classifiers a lookup may visit (0 with tuples).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// Number of (merged) tuples: the number of hash probes a lookup makes at most (0 with bit
    /// vectors).
    pub fn tuple_count(&self) -> usize {
        self.tuples.len()
    }

    /// Bytes the bit-vector groups hold (0 with tuples).
    pub fn bytes(&self) -> usize {
        self.groups.iter().map(BitVec::bytes).sum()
    }

    /// Groups a lookup of `p` visits (the first with a match ends it); for measurements.
    pub fn groups_visited(&self, k: &FlowKey) -> usize {
        let p = &Point::of(k);
        self.groups.iter().position(|g| g.lookup(p, &[]).is_some()).map_or(self.groups.len(), |i| i + 1)
    }

    /// Classifies `p` in every group and returns the first group's answer: the cost of a key
    /// that no rule matches (the worst case of a lookup); for measurements.
    pub fn classify_every_group(&self, k: &FlowKey) -> Option<Match> {
        let p = &Point::of(k);
        self.groups.iter().map(|g| g.lookup(p, &[])).fold(None, |a, m| a.or(m))
    }

    /// The rules with their ids.
    pub fn rules(&self) -> &[(u32, Rule)] {
        &self.rules
    }

    /// Marks rule `id` deleted in `dead` ([`Classifier::classify_without`]); `false` if this
    /// classifier has no rule `id`. For the control plane (a scan of the rules).
    pub fn kill(&self, dead: &mut Dead, id: u32) -> bool {
        let bit = if self.groups.is_empty() {
            self.rules.iter().position(|&(i, _)| i == id)
        } else {
            // Groups hold consecutive runs of the classification order, each a multiple of 64
            // rules long but the last: a group's bits start at its first rule's position.
            let mut start = 0;
            self.groups.iter().find_map(|g| {
                let found = g.position(id).map(|p| start + p);
                start += g.len();
                found
            })
        };
        bit.inspect(|&b| dead.set(b)).is_some()
    }

    /// The best rule matching `p`: highest priority, then lowest id.
    #[inline]
    pub fn classify(&self, k: &FlowKey) -> Option<Match> {
        self.lookup(&Point::of(k), &[])
    }

    /// [`Classifier::classify`] among the rules not marked in `dead`.
    #[inline]
    pub fn classify_without(&self, k: &FlowKey, dead: &Dead) -> Option<Match> {
        self.point_without(&Point::of(k), dead)
    }

    /// [`Classifier::classify_without`] of a key already in the classifiers' coordinates.
    #[inline]
    pub(crate) fn point_without(&self, p: &Point, dead: &Dead) -> Option<Match> {
        self.lookup(p, &dead.words)
    }

    #[inline]
    fn lookup(&self, p: &Point, dead: &[u64]) -> Option<Match> {
        // The first run's cross tables answer most IPv4 keys of most sets (`super::rfc`):
        // kept apart from the general path so that their few reads are all a lookup costs.
        if let Some(first) = self.groups.first()
            && let Some(answer) = first.lookup_rfc(p, dead)
        {
            return answer.or_else(|| self.lookup_after_first(p, dead));
        }
        self.lookup_general(p, dead)
    }

    /// [`Classifier::classify_without`] of every key of `keys` through the first run's cross
    /// tables, in one burst ([`super::rfc::Rfc::lookup_burst`]: their reads overlapped), then
    /// the later runs for a key the first leaves without a match: `out[i]` is key `i`'s match.
    /// `false` (and `out` untouched) when the cross tables cannot answer (none built, or a rule
    /// of the first run deleted): the caller classifies otherwise.
    pub(crate) fn classify_burst_v4(&self, keys: &Keys4, dead: &Dead, out: &mut [Option<Match>; BURST]) -> bool {
        let Some((first, rfc)) = self.groups.first().and_then(|g| Some((g, g.rfc(&dead.words)?))) else {
            return false;
        };
        let mut pos = [NO_MATCH; BURST];
        rfc.lookup_burst(keys, &mut pos);
        let later = self.groups.len() > 1;
        for (i, (o, &p)) in out.iter_mut().zip(&pos).enumerate().take(keys.len()) {
            *o = match p {
                NO_MATCH if later => keys.flow(i).and_then(|k| self.lookup_after_first(&Point::of(&k), &dead.words)),
                // A one-run set's answer is in (no key conversion).
                NO_MATCH => None,
                p => first.match_at(usize::from(p)),
            };
        }
        true
    }

    /// The runs after the first, when the first has no match.
    #[inline(never)]
    fn lookup_after_first(&self, p: &Point, dead: &[u64]) -> Option<Match> {
        let mut start = self.groups.first().map_or(0, BitVec::len);
        self.groups.iter().skip(1).find_map(|g| {
            let m = g.lookup(p, dead.get(start / 64..).unwrap_or(&[]));
            start += g.len();
            m
        })
    }

    #[inline(never)]
    fn lookup_general(&self, p: &Point, dead: &[u64]) -> Option<Match> {
        if !self.groups.is_empty() {
            // Runs in classification order: the first run with a match holds the answer.
            let mut start = 0;
            return self.groups.iter().find_map(|g| {
                let m = g.lookup(p, dead.get(start / 64..).unwrap_or(&[]));
                start += g.len();
                m
            });
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
                    self.scan(slot, p, dead, &mut best);
                    break;
                }
                h = (h + 1) & t.mask;
            }
        }
        best
    }

    /// Checks one hash entry's rules, in order, against `p`.
    #[inline]
    fn scan(&self, slot: &Slot, p: &Point, dead: &[u64], best: &mut Option<Match>) {
        let list = self.lists.get(slot.start as usize..(slot.start + slot.len) as usize).unwrap_or(&[]);
        for &at in list {
            let Some(&(id, ref r)) = self.rules.get(at as usize) else { continue };
            if Dead::is_set(dead, at as usize) {
                continue;
            }
            if best.is_some_and(|b| b.priority > r.priority || (b.priority == r.priority && b.rule < id)) {
                return; // sorted: nothing later in the list beats the match in hand
            }
            if r.matches_point(p) {
                *best = Some(Match { rule: id, action: r.action, priority: r.priority });
                return;
            }
        }
    }

    /// The reference: a linear scan (highest priority, then lowest id).
    pub fn classify_linear(&self, k: &FlowKey) -> Option<Match> {
        let p = &Point::of(k);
        let mut best: Option<Match> = None;
        for &(id, ref r) in &self.rules {
            if r.matches_point(p) && best.is_none_or(|b| r.priority > b.priority) {
                best = Some(Match { rule: id, action: r.action, priority: r.priority });
            }
        }
        best
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// 4 000 rules of one host each (every rule in a group of its own address), so keys are
    /// answered by every group in turn; equal priorities across a group boundary; a key no rule
    /// matches walks every group and gets none.
    #[test]
    fn every_group_answers_and_ties_cross_group_boundaries() {
        let n = crate::testing::miri_or(4000u32, 300);
        // Priorities descend in steps of one except around the first boundaries, where two
        // rules share a priority and the same host: the lower id (earlier group) must win.
        let mut rules: Vec<(u32, Rule)> = (0..n)
            .map(|i| (i, Rule::v4(10_000 - i, (0x0A00_0000 | i, 32), (0, 0), (0, u16::MAX), (0, u16::MAX), None, i)))
            .collect();
        for &b in &[1024u32, 3072] {
            let Some(&(_, last)) = rules.get(b as usize - 1) else { continue };
            if let Some(next) = rules.get_mut(b as usize) {
                next.1.priority = last.priority;
                next.1.src = last.src;
            }
        }
        let c = Classifier::with_ids(rules.clone());
        assert!(c.uses_bit_vectors());
        assert_eq!(c.group_count(), if n == 4000 { 3 } else { 1 }); // 1 024, 2 048, 928
        for i in (0..n).step_by(7).chain([1023, 1024, 3071, 3072, n - 1]).filter(|&i| i < n) {
            let k = FlowKey::v4(0x0A00_0000 | i, 1, 2, 3, 6);
            assert_eq!(c.classify(&k), c.classify_linear(&k), "host {i}");
            let want = if [1024, 3072].contains(&i) { None } else { Some(i) };
            if let Some(w) = want {
                assert_eq!(c.classify(&k).map(|m| m.rule), Some(w));
            }
        }
        // The shared host of the boundary pairs: rule 1 023 (first group) beats rule 1 024.
        if n > 1024 {
            assert_eq!(c.classify(&FlowKey::v4(0x0A00_0000 | 1023, 1, 2, 3, 6)).map(|m| m.rule), Some(1023));
        }
        assert_eq!(c.classify(&FlowKey::v4(0x0B00_0000, 1, 2, 3, 6)), None);
    }

    /// A set whose groups would exceed the budget goes to the tuples, with the same answers.
    #[test]
    fn sets_past_the_budget_fall_back_to_the_tuples() {
        let rules: Vec<(u32, Rule)> = (0..40u32)
            .map(|i| (i, Rule::v4(1, (i << 24, 8), (0, 0), (i as u16, i as u16), (0, u16::MAX), Some(6), i)))
            .collect();
        assert!(Classifier::with_ids(rules.clone()).uses_bit_vectors());
        let t = Classifier::tuples(rules);
        assert!(!t.uses_bit_vectors());
        assert_eq!(t.group_count(), 0);
        let k = FlowKey::v4(5 << 24 | 1, 2, 5, 80, 6);
        assert_eq!(t.classify(&k).map(|m| m.rule), Some(5));
    }
}
