//! Longest-prefix match for IPv4 and IPv6 routes (the L3 forwarder's routes).
//!
//! One multibit trie serves both families. Addresses are left-aligned in a `u128` (IPv4 in the top
//! 32 bits). The first level has `2^first_stride` entries (16 or 24 bits: DIR-24-8 with 24, which
//! costs 64 MiB of first level; DIR-16-8-8 with 16, 256 KiB, one more memory access for routes
//! longer than /24), then 256-entry groups of 8 bits each (IPv6 with 16: 16 + 14 × 8 = 128).
//!
//! An entry is a `u32`: `EXT | group` (go one level down), or `VALID | depth << 22 | next_hop`
//! (the route that covers the entry, with its prefix length, as in DPDK's rte_lpm), or 0 (no
//! route). Adding a route of length `l` paints the entries its prefix covers whose depth is ≤ `l`;
//! deleting it repaints the entries of depth `l` with its parent route (the longest shorter route
//! covering the prefix, from the control plane's route map). Groups come from a pool sized at
//! creation; a group stays allocated when its routes go (no collapse), so a lookup never follows a
//! reused group. A lookup is one load per level and cannot panic. Route changes take `&mut self`.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::fmt;

use crate::sync::prefetch::prefetch;

const EXT: u32 = 1 << 31;
const VALID: u32 = 1 << 30;
const DEPTH_SHIFT: u32 = 22;
const NH_MASK: u32 = (1 << DEPTH_SHIFT) - 1;
/// Largest next-hop id an entry can hold.
pub const MAX_NEXT_HOP: u32 = NH_MASK;
const GROUP: usize = 256;

/// Why a route change was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LpmError {
    /// The prefix length exceeds the address width.
    BadPrefixLength,
    /// The next hop exceeds [`MAX_NEXT_HOP`].
    NextHopTooLarge,
    /// The group pool is exhausted (raise `max_groups`).
    OutOfGroups,
    /// No such route.
    NotFound,
    /// The tables do not fit in the memory left.
    OutOfMemory,
}

impl fmt::Display for LpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LpmError::BadPrefixLength => "prefix length exceeds the address width",
            LpmError::NextHopTooLarge => "next hop too large",
            LpmError::OutOfGroups => "trie group pool exhausted",
            LpmError::NotFound => "no such route",
            LpmError::OutOfMemory => "not enough memory for the tables",
        })
    }
}

#[inline]
fn bits(addr: u128, start: u32, width: u32) -> usize {
    if width == 0 || start >= 128 {
        return 0;
    }
    ((addr << start) >> (128 - width)) as usize
}

#[inline]
fn mask(addr: u128, len: u32) -> u128 {
    if len == 0 { 0 } else { addr & (u128::MAX << (128 - len.min(128))) }
}

#[inline]
fn depth(e: u32) -> u32 {
    (e >> DEPTH_SHIFT) & 0xFF
}

/// The shared trie (addresses left-aligned in a `u128`).
#[derive(Debug)]
struct Trie {
    addr_bits: u32,
    first: u32,
    root: Vec<u32>,
    groups: Vec<u32>,
    max_groups: usize,
    routes: BTreeMap<(u32, u128), u32>,
}

impl Trie {
    fn new(addr_bits: u32, first: u32, max_groups: usize) -> Self {
        let first = first.clamp(8, 24).min(addr_bits);
        Self {
            addr_bits,
            first,
            root: alloc::vec![0; 1 << first],
            groups: Vec::with_capacity(max_groups.saturating_mul(GROUP)),
            max_groups,
            routes: BTreeMap::new(),
        }
    }

    /// As [`Trie::new`], but `None` when the first level or the group pool cannot be
    /// allocated.
    fn try_new(addr_bits: u32, first: u32, max_groups: usize) -> Option<Self> {
        let first = first.clamp(8, 24).min(addr_bits);
        let mut root = Vec::new();
        root.try_reserve_exact(1 << first).ok()?;
        root.resize(1 << first, 0);
        let mut groups = Vec::new();
        groups.try_reserve_exact(max_groups.checked_mul(GROUP)?).ok()?;
        Some(Self { addr_bits, first, root, groups, max_groups, routes: BTreeMap::new() })
    }

    fn lookup(&self, addr: u128) -> Option<u32> {
        let mut e = *self.root.get(bits(addr, 0, self.first))?;
        let mut start = self.first;
        while e & EXT != 0 {
            let g = (e & !EXT) as usize;
            e = *self.groups.get(g * GROUP + bits(addr, start, 8))?;
            start += 8;
        }
        (e & VALID != 0).then_some(e & NH_MASK)
    }

    /// The first-level entry an IPv4 lookup of `addr` reads first (to prefetch it).
    #[inline(always)]
    fn root32(&self, addr: u32) -> Option<&u32> {
        self.root.get((addr >> (32 - self.first)) as usize)
    }

    /// [`Trie::lookup`] of `addr << 96` in 32-bit arithmetic, for a 32-bit trie (the same
    /// entries: the root index is the top `first` bits, each group the next 8) — the L3
    /// forwarder's per-packet path, where the 128-bit shifts cost more than the memory reads.
    #[inline]
    fn lookup32(&self, addr: u32) -> Option<u32> {
        // `first` is 8..=24 (`Trie::new` clamps it): the shift is in range.
        let mut e = *self.root.get((addr >> (32 - self.first)) as usize)?;
        let mut start = self.first;
        while e & EXT != 0 {
            let g = (e & !EXT) as usize;
            // No group starts at bit 32 or later for 32-bit prefixes; index 0 there is what the
            // 128-bit walk reads (its address bits past 32 are zero).
            let i = if start < 32 { ((addr << start) >> 24) as usize } else { 0 };
            e = *self.groups.get(g * GROUP + i)?;
            start += 8;
        }
        (e & VALID != 0).then_some(e & NH_MASK)
    }

    /// Groups that painting `prefix/len` would have to create.
    fn groups_needed(&self, prefix: u128, len: u32) -> usize {
        let mut e = self.root.get(bits(prefix, 0, self.first)).copied().unwrap_or(0);
        let mut end = self.first;
        while len > end {
            if e & EXT == 0 {
                return (len - end).div_ceil(8) as usize;
            }
            let g = (e & !EXT) as usize;
            e = self.groups.get(g * GROUP + bits(prefix, end, 8)).copied().unwrap_or(0);
            end += 8;
        }
        0
    }

    /// Sets every entry covered by `prefix/len` for which `cond(old)` holds to `new`.
    /// `table` is `None` for the root, `Some(g)` for group `g`; `start` is its first bit.
    fn paint(
        &mut self,
        table: Option<usize>,
        start: u32,
        prefix: u128,
        len: u32,
        new: u32,
        cond: &dyn Fn(u32) -> bool,
    ) {
        let (base, width) = match table {
            None => (0, self.first),
            Some(g) => (g * GROUP, 8),
        };
        let end = start + width;
        if len <= end {
            let (first, span) =
                if len <= start { (0, 1usize << width) } else { (bits(prefix, start, width), 1usize << (end - len)) };
            for i in first..first + span {
                let e = self.entry(table, base + i);
                if e & EXT != 0 {
                    self.paint(Some((e & !EXT) as usize), end, prefix, len, new, cond);
                } else if cond(e) {
                    self.set(table, base + i, new);
                }
            }
            return;
        }
        let i = base + bits(prefix, start, width);
        let mut e = self.entry(table, i);
        if e & EXT == 0 {
            if self.groups.len() / GROUP >= self.max_groups {
                debug_assert!(false, "groups_needed was checked first");
                return;
            }
            let g = self.groups.len() / GROUP;
            self.groups.extend(core::iter::repeat_n(e, GROUP));
            e = EXT | g as u32;
            self.set(table, i, e);
        }
        self.paint(Some((e & !EXT) as usize), end, prefix, len, new, cond);
    }

    fn entry(&self, table: Option<usize>, i: usize) -> u32 {
        match table {
            None => self.root.get(i).copied().unwrap_or(0),
            Some(_) => self.groups.get(i).copied().unwrap_or(0),
        }
    }

    fn set(&mut self, table: Option<usize>, i: usize, v: u32) {
        let slot = match table {
            None => self.root.get_mut(i),
            Some(_) => self.groups.get_mut(i),
        };
        if let Some(s) = slot {
            *s = v;
        }
    }

    fn check(&self, len: u32, nh: u32) -> Result<(), LpmError> {
        if len > self.addr_bits {
            return Err(LpmError::BadPrefixLength);
        }
        if nh > MAX_NEXT_HOP {
            return Err(LpmError::NextHopTooLarge);
        }
        Ok(())
    }

    fn add(&mut self, prefix: u128, len: u32, nh: u32) -> Result<(), LpmError> {
        self.check(len, nh)?;
        let prefix = mask(prefix, len);
        if self.groups.len() / GROUP + self.groups_needed(prefix, len) > self.max_groups {
            return Err(LpmError::OutOfGroups);
        }
        self.routes.insert((len, prefix), nh);
        let new = VALID | len << DEPTH_SHIFT | nh;
        self.paint(None, 0, prefix, len, new, &|e| e & VALID == 0 || depth(e) <= len);
        Ok(())
    }

    fn delete(&mut self, prefix: u128, len: u32) -> Result<(), LpmError> {
        self.check(len, 0)?;
        let prefix = mask(prefix, len);
        self.routes.remove(&(len, prefix)).ok_or(LpmError::NotFound)?;
        let parent = (0..len)
            .rev()
            .find_map(|l| self.routes.get(&(l, mask(prefix, l))).map(|nh| VALID | l << DEPTH_SHIFT | nh))
            .unwrap_or(0);
        self.paint(None, 0, prefix, len, parent, &|e| e & VALID != 0 && depth(e) == len);
        Ok(())
    }
}

/// Sizes of an LPM table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct LpmConfig {
    /// Bits resolved by the first level (8..=24; IPv4 default 24 = DIR-24-8, IPv6 default 16).
    pub first_stride: u8,
    /// 256-entry groups for longer routes (allocated at creation: 1 KiB each).
    pub max_groups: usize,
}

impl LpmConfig {
    /// DIR-24-8 for IPv4 with `max_groups` groups.
    pub const fn ipv4(max_groups: usize) -> Self {
        Self { first_stride: 24, max_groups }
    }
    /// First stride 16 for IPv6 with `max_groups` groups.
    pub const fn ipv6(max_groups: usize) -> Self {
        Self { first_stride: 16, max_groups }
    }
}

/// IPv4 routes: prefix → next-hop id.
#[derive(Debug)]
pub struct Lpm4(Trie);

impl Lpm4 {
    /// An empty table (allocates the first level and the group pool).
    pub fn new(cfg: LpmConfig) -> Self {
        Self(Trie::new(32, u32::from(cfg.first_stride), cfg.max_groups))
    }
    /// As [`Lpm4::new`], but `OutOfMemory` instead of an allocation failure.
    pub fn try_new(cfg: LpmConfig) -> Result<Self, LpmError> {
        Trie::try_new(32, u32::from(cfg.first_stride), cfg.max_groups).map(Self).ok_or(LpmError::OutOfMemory)
    }
    /// Adds (or replaces) the route `prefix/len → next_hop`.
    pub fn add(&mut self, prefix: u32, len: u8, next_hop: u32) -> Result<(), LpmError> {
        self.0.add(u128::from(prefix) << 96, u32::from(len), next_hop)
    }
    /// Deletes the route `prefix/len`.
    pub fn delete(&mut self, prefix: u32, len: u8) -> Result<(), LpmError> {
        self.0.delete(u128::from(prefix) << 96, u32::from(len))
    }
    /// The next hop of the longest route covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        self.0.lookup32(addr)
    }
    /// The next hops of `addrs` into `out` (as many as both hold), each as [`Lpm4::lookup`]
    /// gives it, [`LOCKSTEP`] keys at a time so that the cache misses of a large table
    /// (DIR-24-8's first level is 64 MiB) overlap: every key's first-level entry is prefetched,
    /// then each is read and the second-level entry of those that go down is prefetched, then
    /// each key is answered.
    pub fn lookup_burst(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        let t = &self.0;
        for (a, o) in addrs.chunks(LOCKSTEP).zip(out.chunks_mut(LOCKSTEP)) {
            for k in a {
                if let Some(e) = t.root32(*k) {
                    prefetch(e);
                }
            }
            let mut e = [0u32; LOCKSTEP];
            for (k, ei) in a.iter().zip(e.iter_mut()) {
                *ei = t.root32(*k).copied().unwrap_or(0);
                if *ei & EXT != 0
                    && let Some(g) = t.groups.get((*ei & !EXT) as usize * GROUP + ((*k << t.first) >> 24) as usize)
                {
                    prefetch(g);
                }
            }
            for ((k, ei), o) in a.iter().zip(e.iter()).zip(o.iter_mut()) {
                *o = if *ei & EXT == 0 { (*ei & VALID != 0).then_some(*ei & NH_MASK) } else { t.lookup32(*k) };
            }
        }
    }
    /// Bytes the lookup reads from: the first level and the group pool as allocated (the
    /// route map is the control plane's and not counted).
    pub fn lookup_bytes(&self) -> usize {
        (self.0.root.len() + self.0.groups.capacity()) * 4
    }
    /// Number of routes.
    pub fn len(&self) -> usize {
        self.0.routes.len()
    }
    /// Whether there is no route.
    pub fn is_empty(&self) -> bool {
        self.0.routes.is_empty()
    }
}

/// How many keys [`Lpm4::lookup_burst`] takes at a time (docs/PERFORMANCE.md, "IPv4 LPM").
pub const LOCKSTEP: usize = 64;

/// IPv6 routes: prefix → next-hop id.
#[derive(Debug)]
pub struct Lpm6(Trie);

impl Lpm6 {
    /// An empty table (allocates the first level and the group pool).
    pub fn new(cfg: LpmConfig) -> Self {
        Self(Trie::new(128, u32::from(cfg.first_stride), cfg.max_groups))
    }
    /// As [`Lpm6::new`], but `OutOfMemory` instead of an allocation failure.
    pub fn try_new(cfg: LpmConfig) -> Result<Self, LpmError> {
        Trie::try_new(128, u32::from(cfg.first_stride), cfg.max_groups).map(Self).ok_or(LpmError::OutOfMemory)
    }
    /// Adds (or replaces) the route `prefix/len → next_hop`.
    pub fn add(&mut self, prefix: u128, len: u8, next_hop: u32) -> Result<(), LpmError> {
        self.0.add(prefix, u32::from(len), next_hop)
    }
    /// Deletes the route `prefix/len`.
    pub fn delete(&mut self, prefix: u128, len: u8) -> Result<(), LpmError> {
        self.0.delete(prefix, u32::from(len))
    }
    /// The next hop of the longest route covering `addr`.
    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        self.0.lookup(addr)
    }
    /// The next hops of `addrs` into `out` (as many as both hold), each as [`Lpm6::lookup`]
    /// gives it. An IPv6 lookup may walk up to 14 levels, each a dependent load that misses
    /// the cache in a large table; so the keys are walked [`WALK6`] at a time in lockstep: each
    /// step prefetches the next entry of every key still going down, then reads them, so the
    /// misses of the group overlap instead of following one another.
    pub fn lookup_burst(&self, addrs: &[u128], out: &mut [Option<u32>]) {
        let t = &self.0;
        if !t.first.is_multiple_of(8) {
            // Levels that do not start on a byte: one key at a time.
            for (a, o) in addrs.iter().zip(out.iter_mut()) {
                *o = t.lookup(*a);
            }
            return;
        }
        for (a, o) in addrs.chunks(WALK6).zip(out.chunks_mut(WALK6)) {
            let mut e = [0u32; WALK6];
            // Each key's bytes, and the byte its next level reads (levels are 8 bits from a
            // byte boundary: the first stride is a whole number of bytes).
            let mut kb = [[0u8; 16]; WALK6];
            for (&k, b) in a.iter().zip(kb.iter_mut()) {
                *b = k.to_be_bytes();
                if let Some(r) = t.root.get(bits(k, 0, t.first)) {
                    prefetch(r);
                }
            }
            // Keys still going down, as bits.
            let mut down = 0u32;
            for (i, (&k, ei)) in a.iter().zip(e.iter_mut()).enumerate() {
                *ei = t.root.get(bits(k, 0, t.first)).copied().unwrap_or(0);
                down |= u32::from(*ei & EXT != 0) << i;
            }
            let mut level = (t.first / 8) as usize;
            let mut at = [0usize; WALK6];
            while down != 0 {
                // Where every key going down reads next: prefetched first, read after.
                let mut m = down;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let (Some(ei), Some(b), Some(x)) = (e.get(i), kb.get(i), at.get_mut(i)) else { continue };
                    *x = (*ei & !EXT) as usize * GROUP + usize::from(b.get(level).copied().unwrap_or(0));
                    if let Some(n) = t.groups.get(*x) {
                        prefetch(n);
                    }
                }
                let mut m = down;
                while m != 0 {
                    let i = m.trailing_zeros() as usize;
                    m &= m - 1;
                    let (Some(ei), Some(x)) = (e.get_mut(i), at.get(i)) else { continue };
                    *ei = t.groups.get(*x).copied().unwrap_or(0);
                    if *ei & EXT == 0 {
                        down &= !(1 << i);
                    }
                }
                level += 1;
            }
            for (o, ei) in o.iter_mut().zip(e.iter()) {
                *o = (ei & VALID != 0).then_some(ei & NH_MASK);
            }
        }
    }
    /// Number of routes.
    pub fn len(&self) -> usize {
        self.0.routes.len()
    }
    /// Whether there is no route.
    pub fn is_empty(&self) -> bool {
        self.0.routes.is_empty()
    }
}

/// Keys [`Lpm6::lookup_burst`] walks together.
pub const WALK6: usize = 16;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    proptest! {
        #![proptest_config(crate::testing::proptest_config(32))]

        /// The burst lookup (its prefetch pipeline) gives each address exactly what the single
        /// lookup gives, for bursts shorter and longer than its look-ahead, at both strides.
        #[test]
        fn lookup_burst_is_lookup(
            routes in proptest::collection::vec((any::<u32>(), 0u8..=32, 0u32..1000), 1..crate::testing::miri_or(60, 6)),
            addrs in proptest::collection::vec(any::<u32>(), 0..crate::testing::miri_or(70, 20)),
            wide in any::<bool>(),
        ) {
            let mut cfg = LpmConfig::ipv4(256);
            // DIR-24-8's 64 MiB first level is too much for Miri: 16 there.
            cfg.first_stride = if wide && !cfg!(miri) { 24 } else { 16 };
            let mut t = Lpm4::new(cfg);
            for &(p, l, nh) in &routes {
                let p = if l == 0 { 0 } else { p & (u32::MAX << (32 - u32::from(l))) };
                prop_assert_eq!(t.add(p, l, nh), Ok(()));
            }
            // Half the addresses inside routes, so that second levels are walked.
            let probes: Vec<u32> = addrs.iter().zip(routes.iter().cycle()).enumerate()
                .map(|(i, (&a, &(p, _, _)))| if i % 2 == 0 { a } else { p ^ (a & 0xFF) }).collect();
            let mut out = vec![Some(u32::MAX); probes.len()];
            t.lookup_burst(&probes, &mut out);
            let want: Vec<Option<u32>> = probes.iter().map(|&a| t.lookup(a)).collect();
            prop_assert_eq!(out, want);
        }
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(32))]

        /// The IPv6 burst lookup (keys walked in lockstep) gives each address exactly what the
        /// single lookup gives, for bursts shorter and longer than a group, with routes of
        /// every length (so that keys stop at different depths within a group).
        #[test]
        fn lookup6_burst_is_lookup(
            routes in proptest::collection::vec((any::<u128>(), 0u8..=128, 0u32..1000), 1..crate::testing::miri_or(40, 6)),
            addrs in proptest::collection::vec(any::<u128>(), 0..crate::testing::miri_or(50, 20)),
            first in proptest::sample::select(vec![16u8, 8, 12]),
        ) {
            let mut cfg = LpmConfig::ipv6(crate::testing::miri_or(2048, 128));
            // 16 (the default) and 8 walk bytes; 12 takes the one-key-at-a-time path.
            cfg.first_stride = first;
            let mut t = Lpm6::new(cfg);
            for &(p, l, nh) in &routes {
                let p = mask(p, u32::from(l));
                prop_assert_eq!(t.add(p, l, nh), Ok(()));
            }
            // Most addresses inside routes (varying their last bits), so that deep levels are
            // walked.
            let probes: Vec<u128> = addrs.iter().zip(routes.iter().cycle()).enumerate()
                .map(|(i, (&a, &(p, l, _)))| if i % 4 == 0 { a } else { mask(p, u32::from(l)) ^ (a & 0xFFFF) }).collect();
            let mut out = vec![Some(u32::MAX); probes.len()];
            t.lookup_burst(&probes, &mut out);
            let want: Vec<Option<u32>> = probes.iter().map(|&a| t.lookup(a)).collect();
            prop_assert_eq!(out, want);
        }
    }

    /// The linear reference: longest matching prefix among the live routes.
    fn linear(routes: &[(u128, u32, u32)], addr: u128) -> Option<u32> {
        routes.iter().filter(|(p, l, _)| mask(addr, *l) == *p).max_by_key(|(_, l, _)| *l).map(|(_, _, nh)| *nh)
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(u128, u32, u32),
        Del(usize),
    }

    fn check(bits: u32, first: u8, base: u128, ops: &[Op], probes: &[u128]) -> Result<(), TestCaseError> {
        let mut t = Trie::new(bits, u32::from(first), 4096);
        let mut live: Vec<(u128, u32, u32)> = Vec::new();
        for op in ops {
            match op {
                Op::Add(p, l, nh) => {
                    let l = (*l).min(bits);
                    let p = mask(base ^ (*p << (128 - bits)), l);
                    prop_assert_eq!(t.add(p, l, *nh), Ok(()));
                    live.retain(|(q, m, _)| !(*q == p && *m == l));
                    live.push((p, l, *nh));
                }
                Op::Del(i) if !live.is_empty() => {
                    let (p, l, _) = live.remove(i % live.len());
                    prop_assert_eq!(t.delete(p, l), Ok(()));
                    prop_assert_eq!(t.delete(p, l), Err(LpmError::NotFound));
                }
                Op::Del(_) => {}
            }
            for a in probes.iter().map(|a| base ^ (*a << (128 - bits))).chain(live.iter().map(|r| r.0)) {
                prop_assert_eq!(t.lookup(a), linear(&live, a), "addr {:x}", a);
                if bits == 32 {
                    prop_assert_eq!(t.lookup32((a >> 96) as u32), linear(&live, a), "addr {:x} (32-bit walk)", a);
                }
            }
        }
        Ok(())
    }

    /// Prefixes drawn from a few clustered values so that routes nest and overlap.
    fn ops(bits: u32) -> impl Strategy<Value = Vec<Op>> {
        let lens = prop_oneof![0u32..=bits, (bits.saturating_sub(12))..=bits];
        let p = prop_oneof![any::<u128>(), (0u128..16), (0u128..16).prop_map(move |x| x << (bits - 8))];
        let op = prop_oneof![3 => (p, lens, 0u32..1000).prop_map(|(p, l, nh)| Op::Add(p, l, nh)), 1 => any::<usize>().prop_map(Op::Del)];
        proptest::collection::vec(op, 1..crate::testing::miri_or(40, 6))
    }

    proptest! {
        // DIR-24-8 zeroes a 64 MiB first level per case: a few cases only.
        #![proptest_config(crate::testing::proptest_config(6))]
        #[test]
        fn pna_lpm4_dir24_matches_linear(ops in ops(32), probes in proptest::collection::vec(prop_oneof![any::<u128>(), 0u128..64], 8)) {
            // Under Miri a first stride of 12 (the same code; 2^24 first-level entries are hours there).
            check(32, crate::testing::miri_or(24, 12), 0, &ops, &probes.iter().map(|p| p & 0xFFFF_FFFF).collect::<Vec<_>>())?;
        }
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(200))]
        #[test]
        fn pna_lpm4_matches_linear(ops in ops(32), probes in proptest::collection::vec(prop_oneof![any::<u128>(), 0u128..64], 8)) {
            check(32, 16, 0, &ops, &probes.iter().map(|p| p & 0xFFFF_FFFF).collect::<Vec<_>>())?;
        }

        #[test]
        fn pna_lpm6_matches_linear(ops in ops(128), probes in proptest::collection::vec(prop_oneof![any::<u128>(), 0u128..64], 8)) {
            check(128, 16, 0x2001_0db8 << 96, &ops, &probes)?;
        }
    }

    #[test]
    fn pna_lpm4_api_and_errors() {
        let mut t = Lpm4::new(LpmConfig { first_stride: 16, max_groups: 2 });
        assert_eq!(t.add(0x0a00_0000, 8, 1), Ok(()));
        assert_eq!(t.add(0x0a01_0200, 24, 2), Ok(()));
        assert_eq!(t.add(0x0a01_0203, 32, 3), Ok(()));
        assert_eq!(t.add(0x0b01_0203, 32, 3), Err(LpmError::OutOfGroups));
        assert_eq!(t.add(0, 33, 3), Err(LpmError::BadPrefixLength));
        assert_eq!(t.add(0, 0, MAX_NEXT_HOP + 1), Err(LpmError::NextHopTooLarge));
        let out = [0x0a01_0203, 0x0a01_0204, 0x0a02_0000, 0x0b00_0000].map(|a| t.lookup(a));
        assert_eq!(out, [Some(3), Some(2), Some(1), None]);
        assert_eq!(t.delete(0x0a01_0200, 24), Ok(()));
        assert_eq!(t.lookup(0x0a01_0204), Some(1));
        assert_eq!(t.lookup(0x0a01_0203), Some(3));
        assert_eq!(t.len(), 2);
        let mut t6 = Lpm6::new(LpmConfig::ipv6(64));
        assert_eq!(t6.add(0x2001_0db8 << 96, 32, 7), Ok(()));
        assert_eq!(t6.add((0x2001_0db8 << 96) | 1, 128, 8), Ok(()));
        assert_eq!(t6.lookup((0x2001_0db8 << 96) | 1), Some(8));
        assert_eq!(t6.lookup((0x2001_0db8 << 96) | 2), Some(7));
        assert_eq!(t6.lookup(0), None);
    }
}
