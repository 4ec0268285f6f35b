//! IPv4 longest-prefix match in a compressed multiway trie that fits in cache (Poptrie: Asai and
//! Ohara, SIGCOMM 2015).
//!
//! DIR-24-8 ([`super::lpm::Lpm4`] with a first stride of 24) reads one entry of a 64 MiB table
//! per lookup: with many routes, most lookups miss every cache level. This trie holds the same
//! routes in a few MiB:
//!
//! - A **direct** array indexed by the address's top `s` bits (16 to 24: 256 KiB with 16, 1 MiB
//!   with 18, 64 MiB with 24). An entry is a leaf (`LEAF | next hop`, or `LEAF | NONE`) or the
//!   index of a node.
//! - A **node** resolves the next 6 bits. Its 64 children are either nodes or leaves, and it
//!   stores neither: `vector` has bit `c` set when child `c` is a node, and the nodes are
//!   consecutive from `base1`, so child `c` is node `base1 + popcount(vector & bits 0..=c) - 1`.
//!   Leaves are compressed: runs of children with the same next hop share one leaf, `leafvec`
//!   has a bit where a run starts, and child `c`'s leaf is `base0 + popcount(leafvec & bits
//!   0..=c) - 1`. A node is 24 bytes; a leaf is a `u32`.
//!
//! Levels start at bit `s`, `s + 6`, `s + 12`, …: with `s = 16` a /24 route sits two nodes down,
//! with `s = 18` one, with `s = 24` none (DIR-24-8's first level, with nodes instead of
//! 256-entry groups below it). A lookup is one direct read and at most three node reads and one
//! leaf read; it cannot panic (every index is read with `get`, and a malformed index gives no
//! route). Which `s` is fastest depends on whether the trie fits in cache: docs/PERFORMANCE.md
//! ("IPv4 LPM") has the figures beside `rte_fib`.
//!
//! **Building and changing.** The trie is built from the route map (prefix, length → next hop),
//! which it keeps. A change of a route longer than `s` rebuilds the subtree of one direct entry
//! (the routes under that /`s` prefix: a few, in a real table); a change of a route of length
//! `l ≤ s` rebuilds the `2^(s − l)` direct entries it covers. A subtree is built aside, then
//! appended and linked by one write of its direct entry; the old one becomes garbage, which is
//! reclaimed by a full rebuild when it outgrows the live trie. Building allocates on the control
//! path only, with `try_reserve`: out of memory is [`LpmError::OutOfMemory`] and leaves the trie
//! and the route map as they were.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;

use super::lpm::{LpmError, MAX_NEXT_HOP};
use crate::sync::prefetch::prefetch;

/// A direct entry (or a leaf) that holds a next hop rather than a node index.
const LEAF: u32 = 1 << 31;
/// The next hop of "no route".
const NONE: u32 = LEAF - 1;
/// Bits a node resolves.
const STRIDE: u32 = 6;

/// One internal node (see the module doc).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Node {
    vector: u64,
    leafvec: u64,
    base0: u32,
    base1: u32,
}

/// Bits `0..=c` of a 64-bit map.
#[inline(always)]
fn upto(c: u32) -> u64 {
    u64::MAX >> (63 - (c & 63))
}

/// The 6-bit child index of `key` (the address in the top half of a `u64`) at bit `depth`.
#[inline(always)]
fn child(key: u64, depth: u32) -> u32 {
    ((key << (depth & 63)) >> (64 - STRIDE)) as u32
}

/// Nodes and leaves built aside (indices relative to their own start) before they join the trie.
#[derive(Default)]
struct Built {
    nodes: Vec<Node>,
    leaves: Vec<u32>,
}

impl Built {
    fn push_node(&mut self) -> Result<usize, LpmError> {
        self.nodes.try_reserve(1).map_err(|_| LpmError::OutOfMemory)?;
        self.nodes.push(Node::default());
        Ok(self.nodes.len() - 1)
    }

    /// Fills node `at`, which resolves bits `depth..depth + 6`, from `routes` (sorted by prefix,
    /// then length; every one longer than `depth` and inside the node's range); `inherited` is
    /// the next hop of the longest route of length ≤ `depth` covering the node.
    fn fill(&mut self, at: usize, routes: &[(u32, u8, u32)], depth: u32, inherited: u32) -> Result<(), LpmError> {
        let end = depth + STRIDE;
        let mut hop = [inherited; 64];
        // Routes ending in this node, painted shortest first; and the runs of longer routes,
        // one per child (a run is contiguous: sorted by prefix, a route ending here that covers
        // child c sorts before every longer route inside c).
        let mut ending: Vec<(u8, u32, u32)> = Vec::new();
        ending.try_reserve(routes.len().min(126)).map_err(|_| LpmError::OutOfMemory)?;
        let mut runs: Vec<(u32, usize, usize)> = Vec::new();
        let mut i = 0;
        while i < routes.len() {
            let (p, len, nh) = routes[i];
            let key = u64::from(p) << 32;
            let c = child(key, depth);
            if u32::from(len) <= end {
                ending.push((len, c, nh));
                i += 1;
                continue;
            }
            let mut j = i + 1;
            while j < routes.len() && u32::from(routes[j].1) > end && child(u64::from(routes[j].0) << 32, depth) == c {
                j += 1;
            }
            runs.try_reserve(1).map_err(|_| LpmError::OutOfMemory)?;
            runs.push((c, i, j));
            i = j;
        }
        ending.sort_by_key(|r| r.0);
        for &(len, c, nh) in &ending {
            let span = 1usize << (end - u32::from(len));
            for h in hop.iter_mut().skip(c as usize).take(span) {
                *h = nh;
            }
        }
        let mut vector = 0u64;
        for &(c, _, _) in &runs {
            vector |= 1 << c;
        }
        let base0 = self.leaves.len();
        let mut leafvec = 0u64;
        let mut last = None;
        for (c, &h) in hop.iter().enumerate() {
            if vector & (1 << c) != 0 {
                continue;
            }
            if last != Some(h) {
                leafvec |= 1 << c;
                self.leaves.try_reserve(1).map_err(|_| LpmError::OutOfMemory)?;
                self.leaves.push(h);
                last = Some(h);
            }
        }
        let base1 = self.nodes.len();
        for _ in &runs {
            self.push_node()?;
        }
        if let Some(n) = self.nodes.get_mut(at) {
            *n = Node { vector, leafvec, base0: base0 as u32, base1: base1 as u32 };
        }
        for (k, &(c, i, j)) in runs.iter().enumerate() {
            self.fill(base1 + k, &routes[i..j], end, hop[c as usize])?;
        }
        Ok(())
    }
}

/// IPv4 routes (prefix → next-hop id) in a Poptrie (see the module doc).
#[derive(Debug)]
pub struct Poptrie4 {
    /// Bits of the direct array (16..=24).
    s: u32,
    direct: Vec<u32>,
    nodes: Vec<Node>,
    leaves: Vec<u32>,
    /// Nodes and leaves no direct entry reaches any more (replaced subtrees).
    garbage: (usize, usize),
    /// Every route: (prefix, length) → next hop.
    routes: BTreeMap<(u32, u8), u32>,
}

#[inline]
fn mask(p: u32, len: u8) -> u32 {
    if len == 0 { 0 } else { p & (u32::MAX << (32 - u32::from(len.min(32)))) }
}

impl Poptrie4 {
    /// An empty trie with a direct array of `2^direct_bits` entries (`direct_bits` is clamped
    /// to 16..=24; 18 puts a /24 route one node down, 16 takes a quarter of the memory, 24 is
    /// a 64 MiB array that answers every route up to /24 in one read).
    pub fn try_new(direct_bits: u8) -> Result<Self, LpmError> {
        let s = u32::from(direct_bits).clamp(16, 24);
        let mut direct = Vec::new();
        direct.try_reserve_exact(1 << s).map_err(|_| LpmError::OutOfMemory)?;
        direct.resize(1 << s, LEAF | NONE);
        Ok(Self { s, direct, nodes: Vec::new(), leaves: Vec::new(), garbage: (0, 0), routes: BTreeMap::new() })
    }

    /// A trie of `routes` (`(prefix, length, next hop)`; a later duplicate replaces an earlier
    /// one, as [`Poptrie4::add`] would), built in one pass.
    pub fn build(direct_bits: u8, routes: &[(u32, u8, u32)]) -> Result<Self, LpmError> {
        let mut t = Self::try_new(direct_bits)?;
        for &(p, len, nh) in routes {
            if len > 32 {
                return Err(LpmError::BadPrefixLength);
            }
            if nh > MAX_NEXT_HOP {
                return Err(LpmError::NextHopTooLarge);
            }
            t.routes.insert((mask(p, len), len), nh);
        }
        t.rebuild()?;
        Ok(t)
    }

    /// Rebuilds everything from the route map (no garbage after).
    fn rebuild(&mut self) -> Result<(), LpmError> {
        let (direct, built) = self.build_range(0, 0)?;
        self.direct = direct;
        self.nodes = built.nodes;
        self.leaves = built.leaves;
        self.garbage = (0, 0);
        Ok(())
    }

    #[inline(always)]
    fn slot(&self, p: u32) -> usize {
        (p >> (32 - self.s)) as usize
    }

    /// The direct entries of the /`len` prefix that holds direct entry `first` (`len ≤ s`:
    /// `2^(s − len)` entries from `first`), built aside from the route map: the entries, and
    /// the subtrees they point to (indices relative to the [`Built`]).
    fn build_range(&self, first: usize, len: u32) -> Result<(Vec<u32>, Built), LpmError> {
        let span = 1usize << (self.s - len);
        let lo = ((first as u64) << (32 - self.s)) as u32;
        let hi = lo | (u32::MAX.checked_shr(len).unwrap_or(0));
        // The longest route shorter than `len` covering the range is every entry's start.
        let base = (0..len as u8).rev().find_map(|l| self.routes.get(&(mask(lo, l), l)).copied()).unwrap_or(NONE);
        let mut entries = Vec::new();
        entries.try_reserve_exact(span).map_err(|_| LpmError::OutOfMemory)?;
        entries.resize(span, LEAF | base);
        let inside = || self.routes.range((lo, 0)..=(hi, 32)).filter(move |(k, _)| u32::from(k.1) >= len);
        // Routes of length len..=s paint the entries, shortest first.
        let mut short: Vec<(u8, u32, u32)> = Vec::new();
        for (&(p, l), &nh) in inside().filter(|(k, _)| u32::from(k.1) <= self.s) {
            short.try_reserve(1).map_err(|_| LpmError::OutOfMemory)?;
            short.push((l, p, nh));
        }
        short.sort_by_key(|r| r.0);
        for &(l, p, nh) in &short {
            let at = self.slot(p) - first;
            for e in entries.iter_mut().skip(at).take(1 << (self.s - u32::from(l))) {
                *e = LEAF | nh;
            }
        }
        // Longer routes, one run per entry: a subtree under it.
        let mut built = Built::default();
        let mut long: Vec<(u32, u8, u32)> = Vec::new();
        let mut link = |built: &mut Built, at: usize, long: &[(u32, u8, u32)]| {
            let Some(e) = entries.get_mut(at) else { return Ok(()) };
            let node = built.push_node()?;
            built.fill(node, long, self.s, *e & !LEAF)?;
            *e = node as u32;
            Ok::<(), LpmError>(())
        };
        let mut current = None;
        for (&(p, l), &nh) in inside().filter(|(k, _)| u32::from(k.1) > self.s) {
            let at = self.slot(p) - first;
            if current != Some(at) {
                if let Some(prev) = current {
                    link(&mut built, prev, &long)?;
                }
                long.clear();
                current = Some(at);
            }
            long.try_reserve(1).map_err(|_| LpmError::OutOfMemory)?;
            long.push((p, l, nh));
        }
        if let Some(prev) = current {
            link(&mut built, prev, &long)?;
        }
        Ok((entries, built))
    }

    /// Nodes and leaves of the subtree at node `n` (to count them as garbage).
    fn subtree_size(&self, n: usize) -> (usize, usize) {
        let Some(node) = self.nodes.get(n) else { return (0, 0) };
        let mut size = (1, node.leafvec.count_ones() as usize);
        for k in 0..node.vector.count_ones() as usize {
            let (a, b) = self.subtree_size(node.base1 as usize + k);
            size = (size.0 + a, size.1 + b);
        }
        size
    }

    /// Rebuilds the direct entries of the /`len` prefix holding entry `first`: built aside,
    /// then appended and linked (nothing changes if building fails).
    fn rebuild_slots(&mut self, first: usize, len: u32) -> Result<(), LpmError> {
        let (entries, built) = self.build_range(first, len)?;
        let (n0, l0) = (self.nodes.len(), self.leaves.len());
        if n0 + built.nodes.len() > NONE as usize || l0 + built.leaves.len() > u32::MAX as usize {
            return Err(LpmError::OutOfMemory);
        }
        self.nodes.try_reserve(built.nodes.len()).map_err(|_| LpmError::OutOfMemory)?;
        self.leaves.try_reserve(built.leaves.len()).map_err(|_| LpmError::OutOfMemory)?;
        // From here nothing can fail.
        for slot in first..first + entries.len() {
            let old = self.direct.get(slot).copied().unwrap_or(LEAF);
            if old & LEAF == 0 {
                let (a, b) = self.subtree_size(old as usize);
                self.garbage = (self.garbage.0 + a, self.garbage.1 + b);
            }
        }
        self.nodes.extend(built.nodes.iter().map(|n| Node {
            base0: n.base0 + l0 as u32,
            base1: n.base1 + n0 as u32,
            ..*n
        }));
        self.leaves.extend_from_slice(&built.leaves);
        for (k, &e) in entries.iter().enumerate() {
            if let Some(d) = self.direct.get_mut(first + k) {
                *d = if e & LEAF != 0 { e } else { e + n0 as u32 };
            }
        }
        Ok(())
    }

    /// Applies a change of the route `p/len` already made to the route map: rebuilds what it
    /// covers, and everything when the garbage outgrows the live trie.
    fn changed(&mut self, p: u32, len: u8) -> Result<(), LpmError> {
        self.rebuild_slots(self.slot(p), u32::from(len).min(self.s))?;
        let (gn, gl) = self.garbage;
        if gn * 2 > self.nodes.len().max(1024) || gl * 2 > self.leaves.len().max(4096) {
            // Reclaiming is not needed for correctness: on failure the trie stays as it is.
            let _ = self.rebuild();
        }
        Ok(())
    }

    /// Adds (or replaces) the route `prefix/len → next_hop`.
    pub fn add(&mut self, prefix: u32, len: u8, next_hop: u32) -> Result<(), LpmError> {
        if len > 32 {
            return Err(LpmError::BadPrefixLength);
        }
        if next_hop > MAX_NEXT_HOP {
            return Err(LpmError::NextHopTooLarge);
        }
        let key = (mask(prefix, len), len);
        let old = self.routes.insert(key, next_hop);
        if let Err(e) = self.changed(key.0, len) {
            match old {
                Some(nh) => self.routes.insert(key, nh),
                None => self.routes.remove(&key),
            };
            return Err(e);
        }
        Ok(())
    }

    /// Deletes the route `prefix/len`.
    pub fn delete(&mut self, prefix: u32, len: u8) -> Result<(), LpmError> {
        if len > 32 {
            return Err(LpmError::BadPrefixLength);
        }
        let key = (mask(prefix, len), len);
        let nh = self.routes.remove(&key).ok_or(LpmError::NotFound)?;
        if let Err(e) = self.changed(key.0, len) {
            self.routes.insert(key, nh);
            return Err(e);
        }
        Ok(())
    }

    /// The leaf that node `n`'s walk for `key` from bit `depth` ends at.
    #[inline(always)]
    fn walk(&self, mut n: u32, key: u64, mut depth: u32) -> Option<u32> {
        // At most ceil((32 - 16) / 6) = 3 nodes below the direct array.
        for _ in 0..3 {
            let node = self.nodes.get(n as usize)?;
            let c = child(key, depth);
            if node.vector & (1 << c) != 0 {
                n = node.base1.wrapping_add((node.vector & upto(c)).count_ones()).wrapping_sub(1);
                depth += STRIDE;
            } else {
                let at = node.base0.wrapping_add((node.leafvec & upto(c)).count_ones()).wrapping_sub(1);
                let l = *self.leaves.get(at as usize)?;
                return (l != NONE).then_some(l);
            }
        }
        None
    }

    /// The next hop of the longest route covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let e = *self.direct.get(self.slot(addr))?;
        if e & LEAF != 0 {
            let nh = e & !LEAF;
            return (nh != NONE).then_some(nh);
        }
        self.walk(e, u64::from(addr) << 32, self.s)
    }

    /// The next hops of `addrs` into `out` (as many as both hold), each as
    /// [`Poptrie4::lookup`] gives it. A lookup is a chain of dependent reads (direct entry,
    /// up to three nodes, a leaf), each a likely cache miss in a large table; so the keys are
    /// walked [`WALK`] at a time in lockstep, one level per step: every key still going down
    /// has the entry it reads next prefetched before any is read, and the misses of the group
    /// overlap instead of following one another. The next group's direct entries are
    /// prefetched while this group walks.
    pub fn lookup_burst(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        for a in addrs.iter().take(WALK) {
            if let Some(e) = self.direct.get(self.slot(*a)) {
                prefetch(e);
            }
        }
        let mut next = addrs.chunks(WALK).skip(1);
        for (a, o) in addrs.chunks(WALK).zip(out.chunks_mut(WALK)) {
            for n in next.next().unwrap_or(&[]) {
                if let Some(e) = self.direct.get(self.slot(*n)) {
                    prefetch(e);
                }
            }
            // Per key: the node it reads next (`down` has its bit), or its answer's leaf
            // index (`leaf` has its bit), or its answer (neither).
            let mut at = [0u32; WALK];
            let (mut down, mut leaf) = (0u64, 0u64);
            for (i, (&k, o)) in a.iter().zip(o.iter_mut()).enumerate() {
                let e = self.direct.get(self.slot(k)).copied().unwrap_or(LEAF | NONE);
                if e & LEAF != 0 {
                    let nh = e & !LEAF;
                    *o = (nh != NONE).then_some(nh);
                } else {
                    at[i] = e;
                    down |= 1 << i;
                    if let Some(n) = self.nodes.get(e as usize) {
                        prefetch(n);
                    }
                }
            }
            let mut depth = self.s;
            // At most ceil((32 - 16) / 6) = 3 nodes below the direct array.
            for _ in 0..3 {
                let mut m = down;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let (Some(&k), Some(cur)) = (a.get(i), at.get_mut(i)) else { continue };
                    let Some(node) = self.nodes.get(*cur as usize) else {
                        down &= !(1 << i);
                        *cur = u32::MAX;
                        leaf |= 1 << i;
                        continue;
                    };
                    let c = child(u64::from(k) << 32, depth);
                    if node.vector & (1 << c) != 0 {
                        *cur = node.base1.wrapping_add((node.vector & upto(c)).count_ones()).wrapping_sub(1);
                        if let Some(n) = self.nodes.get(*cur as usize) {
                            prefetch(n);
                        }
                    } else {
                        *cur = node.base0.wrapping_add((node.leafvec & upto(c)).count_ones()).wrapping_sub(1);
                        if let Some(l) = self.leaves.get(*cur as usize) {
                            prefetch(l);
                        }
                        down &= !(1 << i);
                        leaf |= 1 << i;
                    }
                }
                if down == 0 {
                    break;
                }
                depth += STRIDE;
            }
            // A key still going down here is a malformed trie: no route, as `walk` says.
            let mut m = leaf | down;
            while m != 0 {
                let i = m.trailing_zeros() as usize;
                m &= m - 1;
                let l = if down & (1 << i) != 0 { None } else { at.get(i).and_then(|&x| self.leaves.get(x as usize)) };
                if let Some(o) = o.get_mut(i) {
                    *o = l.copied().filter(|&l| l != NONE);
                }
            }
        }
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.routes.len()
    }

    /// Whether there is no route.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Bytes the lookup reads from: the direct array, the nodes and the leaves (garbage
    /// included; the route map is the control plane's and not counted).
    pub fn lookup_bytes(&self) -> usize {
        self.direct.len() * 4 + self.nodes.len() * core::mem::size_of::<Node>() + self.leaves.len() * 4
    }
}

/// How many keys [`Poptrie4::lookup_burst`] walks in lockstep (at most 64: a bit each).
pub const WALK: usize = 64;
const _: () = assert!(WALK <= 64);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The longest matching route, by scanning every route.
    fn linear(routes: &BTreeMap<(u32, u8), u32>, addr: u32) -> Option<u32> {
        routes.iter().filter(|&(&(p, l), _)| mask(addr, l) == p).max_by_key(|&(&(_, l), _)| l).map(|(_, &nh)| nh)
    }

    /// Routes clustered under few /16 and /18 prefixes (so subtrees go three levels down), or
    /// anywhere.
    fn route() -> impl Strategy<Value = (u32, u8, u32)> {
        let near = (0u32..4, any::<u16>(), 0u8..=32, 0u32..8)
            .prop_map(|(hi, lo, l, nh)| (0x0a00_0000 | hi << 16 | u32::from(lo), l, nh));
        let far = (any::<u32>(), 0u8..=32, 0u32..8);
        prop_oneof![3 => near, 1 => far]
    }

    fn probes() -> impl Strategy<Value = Vec<u32>> {
        proptest::collection::vec(prop_oneof![0x0a00_0000u32..0x0a04_0000, any::<u32>()], 32)
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(64))]

        /// Built in one pass, changed route by route (adds and deletes, each rebuilding only
        /// what it covers) and looked up one by one or in bursts: always the linear answer.
        #[test]
        fn poptrie_matches_linear(
            initial in proptest::collection::vec(route(), 0..crate::testing::miri_or(60, 8)),
            changes in proptest::collection::vec((route(), any::<bool>()), 0..crate::testing::miri_or(40, 6)),
            s in prop_oneof![3 => Just(16u8), 3 => Just(18u8), 1 => Just(crate::testing::miri_or(20u8, 16))],
            probes in probes(),
        ) {
            let mut t = Poptrie4::build(s, &initial).unwrap();
            let mut model = BTreeMap::new();
            for &(p, l, nh) in &initial {
                model.insert((mask(p, l), l), nh);
            }
            let check = |t: &Poptrie4, model: &BTreeMap<(u32, u8), u32>| -> Result<(), TestCaseError> {
                // Probe the given addresses and the edges of every route.
                let mut addrs = probes.clone();
                for &(p, l) in model.keys() {
                    addrs.push(p);
                    addrs.push(p | (u32::MAX.checked_shr(u32::from(l)).unwrap_or(0)));
                }
                let mut out = alloc::vec![None; addrs.len()];
                t.lookup_burst(&addrs, &mut out);
                for (a, o) in addrs.iter().zip(&out) {
                    prop_assert_eq!(t.lookup(*a), linear(model, *a), "address {:#x}", a);
                    prop_assert_eq!(*o, linear(model, *a), "burst, address {:#x}", a);
                }
                Ok(())
            };
            check(&t, &model)?;
            for &((p, l, nh), add) in &changes {
                let key = (mask(p, l), l);
                if add || !model.contains_key(&key) {
                    t.add(p, l, nh).unwrap();
                    model.insert(key, nh);
                } else {
                    prop_assert_eq!(t.delete(p, l), Ok(()));
                    model.remove(&key);
                }
                prop_assert_eq!(t.len(), model.len());
            }
            check(&t, &model)?;
            // A full build of the final routes answers the same.
            let all: Vec<(u32, u8, u32)> = model.iter().map(|(&(p, l), &nh)| (p, l, nh)).collect();
            check(&Poptrie4::build(s, &all).unwrap(), &model)?;
        }
    }

    #[test]
    fn errors_name_the_cause_and_change_nothing() {
        let mut t = Poptrie4::try_new(16).unwrap();
        assert!(t.is_empty());
        assert_eq!(t.add(0x0a00_0000, 33, 1), Err(LpmError::BadPrefixLength));
        assert_eq!(t.add(0x0a00_0000, 8, MAX_NEXT_HOP + 1), Err(LpmError::NextHopTooLarge));
        assert_eq!(t.delete(0x0a00_0000, 8), Err(LpmError::NotFound));
        assert_eq!(t.delete(0x0a00_0000, 40), Err(LpmError::BadPrefixLength));
        assert_eq!(Poptrie4::build(16, &[(0, 40, 1)]).unwrap_err(), LpmError::BadPrefixLength);
        assert!(t.is_empty());
        assert_eq!(t.lookup(0x0a00_0001), None);
        t.add(0x0a00_0000, 8, 7).unwrap();
        t.add(0x0a01_0200, 24, 9).unwrap();
        t.add(0x0a01_0203, 32, 11).unwrap();
        assert_eq!(t.lookup(0x0a01_0203), Some(11));
        assert_eq!(t.lookup(0x0a01_0204), Some(9));
        assert_eq!(t.lookup(0x0a02_0000), Some(7));
        assert_eq!(t.lookup(0x0b00_0000), None);
        t.delete(0x0a00_0000, 8).unwrap();
        assert_eq!(t.lookup(0x0a02_0000), None);
        assert_eq!(t.lookup(0x0a01_0204), Some(9));
        assert_eq!(t.len(), 2);
    }

    /// A 24-bit direct array (DIR-24-8's first level): routes up to /24 answered from it, longer
    /// ones from the nodes below, changes in either.
    #[test]
    #[cfg_attr(miri, ignore = "a 64 MiB direct array")]
    fn a_24_bit_direct_array_answers_as_the_routes_say() {
        let routes = [(0, 0, 1), (0x0a00_0000, 8, 2), (0x0a01_0200, 24, 3), (0x0a01_0280, 25, 4), (0x0a01_0283, 32, 5)];
        let mut t = Poptrie4::build(24, &routes).unwrap();
        let mut model: BTreeMap<(u32, u8), u32> = routes.iter().map(|&(p, l, nh)| ((p, l), nh)).collect();
        let probes = [0u32, 0x0a00_0000, 0x0a01_0201, 0x0a01_027f, 0x0a01_0280, 0x0a01_0283, 0x0a01_02ff, 0x0b00_0000];
        for a in probes {
            assert_eq!(t.lookup(a), linear(&model, a), "{a:#x}");
        }
        t.add(0x0a01_0200, 31, 6).unwrap();
        model.insert((0x0a01_0200, 31), 6);
        t.delete(0x0a00_0000, 8).unwrap();
        model.remove(&(0x0a00_0000, 8));
        let mut out = [None; 8];
        t.lookup_burst(&probes, &mut out);
        for (a, o) in probes.iter().zip(out) {
            assert_eq!(t.lookup(*a), linear(&model, *a), "{a:#x}");
            assert_eq!(o, linear(&model, *a), "burst {a:#x}");
        }
    }

    /// Replaced subtrees are garbage until a full rebuild reclaims them: many changes in one
    /// /16 leave the trie no larger than a few times its fresh build.
    #[test]
    fn garbage_is_reclaimed() {
        let mut t = Poptrie4::try_new(16).unwrap();
        for i in 0..crate::testing::miri_or(2000u32, 100) {
            t.add(0x0a00_0000 | (i % 256) << 8 | (i % 7), 24 + (i % 9) as u8, i % 5).unwrap();
        }
        let fresh = {
            let all: Vec<(u32, u8, u32)> = t.routes.iter().map(|(&(p, l), &nh)| (p, l, nh)).collect();
            Poptrie4::build(16, &all).unwrap()
        };
        assert!(t.lookup_bytes() <= 3 * fresh.lookup_bytes(), "{} vs {}", t.lookup_bytes(), fresh.lookup_bytes());
        for a in (0x0a00_0000u32..0x0a01_0000).step_by(97) {
            assert_eq!(t.lookup(a), fresh.lookup(a));
        }
    }
}
