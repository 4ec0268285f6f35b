//! Recursive Flow Classification (Gupta and McKeown, SIGCOMM 1999: "Packet classification on
//! multiple fields") of the address pair, then the few rules the pair leaves checked in order:
//! the first run of an IPv4 rule set answered in seven table reads and a short list.
//!
//! Each address is cut into two 16-bit *chunks* (high, low). A chunk's values fall into
//! *equivalence classes*: two values are in one class when exactly the same rules match them
//! (a prefix of length `L` matches one high-half value and a low-half range when `L > 16`, a
//! high-half range and every low half when `L ≤ 16`). Phase 0 is one table per chunk (65 536
//! entries), from the value to its class. Each later phase combines two classes by a *cross
//! table* indexed by (class of the one, class of the other), whose entry is the class of the
//! rules both match (their bit vectors ANDed and deduplicated at build):
//!
//! ```text
//! phase 0:  src_hi  src_lo   dst_hi  dst_lo
//! phase 1:      src              dst
//! phase 2:              pair  → the class's candidates: (position, port ranges, protocol)
//! ```
//!
//! A prefix is the product of its two halves' ranges, so the pair's class is exactly the set of
//! rules whose source and destination match the key. Its rules are kept in classification
//! order with their port ranges and protocol beside them (12 bytes each), and the first whose
//! ports and protocol match is the answer. Full RFC would cross the ports too, but on
//! ClassBench-style sets the port pairs alone have tens of thousands of classes (1 000 rules:
//! 279 × 723 source × destination port classes make 49 898), and the final table would need
//! hundreds of millions of entries; the address pair leaves few rules instead (1 000 rules:
//! at most 15 per class, 2.2 checked per key of the trace on average).
//!
//! Cost: seven reads (four independent, two, one), then at most the class's largest list of
//! candidates ([`Rfc::longest`]) at four compares each — bounded at build, whatever the key.
//! [`Rfc::lookup_burst`] takes up to [`BURST`] keys a phase at a time, so that the reads of
//! different keys overlap and the candidates' line is prefetched before the scan.
//! Memory is what limits it: the cross tables are as large as the products of their inputs'
//! class counts (1 000 ClassBench-style rules: 670 × 447 and 820 × 555 address halves' classes,
//! 710 × 902 pairs; about 4.7 MB in all). [`RfcBuild`] gives up past [`MAX_BYTES`] (the
//! bit-vector run it sits in keeps answering; 1 024 random host pairs exceed it), and the
//! build is cut into steps of at most `CELLS_PER_STEP` cross-table cells, like the bit
//! vectors' (`BitVecBuild::step`; about a millisecond each at 1 000 rules). Deleted rules are
//! still in the lists: a run with deletions pending answers through its bit vectors until the
//! background merge rebuilds it.

use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::parse::{FlowKey, IpAddr};
use crate::pna::ternary::Rule;
use crate::sync::prefetch::prefetch;

/// Keys per phase pass of [`Rfc::lookup_burst`].
pub const BURST: usize = 16;

/// [`Rfc::lookup_burst`]'s answer for a key no rule of the run matches (positions are below
/// 65 535: a run holds at most 1 024 rules).
pub const NO_MATCH: u16 = u16::MAX;

/// Up to [`BURST`] IPv4 keys as arrays, field by field (the burst reads each field of every
/// key in turn): the input of [`Rfc::lookup_burst`].
#[derive(Debug, Clone)]
pub struct Keys4 {
    n: usize,
    src: [u32; BURST],
    dst: [u32; BURST],
    sport: [u16; BURST],
    dport: [u16; BURST],
    proto: [u8; BURST],
}

impl Default for Keys4 {
    fn default() -> Self {
        Self { n: 0, src: [0; BURST], dst: [0; BURST], sport: [0; BURST], dport: [0; BURST], proto: [0; BURST] }
    }
}

impl Keys4 {
    /// Appends `k` if it is an IPv4 key and the burst has room; `false` otherwise.
    #[inline]
    pub fn push(&mut self, k: &FlowKey) -> bool {
        let (IpAddr::V4(a), IpAddr::V4(b)) = (k.src, k.dst) else { return false };
        let i = self.n;
        if i >= BURST {
            return false;
        }
        self.src[i] = u32::from_be_bytes(a);
        self.dst[i] = u32::from_be_bytes(b);
        self.sport[i] = k.src_port;
        self.dport[i] = k.dst_port;
        self.proto[i] = k.proto;
        self.n = i + 1;
        true
    }

    /// Keys held.
    #[inline]
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether no key is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether the burst is full.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.n == BURST
    }

    /// Empties the burst.
    #[inline]
    pub fn clear(&mut self) {
        self.n = 0;
    }

    /// Key `i` as a flow key (IPv4), if held.
    pub fn flow(&self, i: usize) -> Option<FlowKey> {
        (i < self.n).then(|| FlowKey::v4(self.src[i], self.dst[i], self.sport[i], self.dport[i], self.proto[i]))
    }
}

/// The most memory the tables of one [`Rfc`] may take (phase 0 alone is 512 KiB; 1 000
/// ClassBench-style rules take about 4 MiB).
pub const MAX_BYTES: usize = 5 << 20;

/// `::ffff:0.0.0.0`, the first IPv4-mapped address (the classifiers' coordinates).
const MAPPED: u128 = 0xFFFF << 32;

/// The classes of one table: class `c` is the bit vector `flat[c * words..][..words]`.
#[derive(Debug, Default)]
struct Classes {
    words: usize,
    flat: Vec<u64>,
}

impl Classes {
    fn len(&self) -> usize {
        self.flat.len().checked_div(self.words).unwrap_or(0)
    }

    fn get(&self, c: usize) -> &[u64] {
        self.flat.get(c * self.words..(c + 1) * self.words).unwrap_or(&[])
    }
}

/// Deduplicates bit vectors into class ids (a build-time map: open addressing over the
/// classes' own storage, so a vector is stored once).
#[derive(Debug)]
struct Dedup {
    /// `slots[h]`: 1 + the class id found at this slot (0: empty); a power of two long.
    slots: Vec<u32>,
    classes: Classes,
}

impl Dedup {
    fn new(words: usize) -> Self {
        Self { slots: vec![0; 1024], classes: Classes { words, flat: Vec::new() } }
    }

    fn hash(v: &[u64]) -> usize {
        let h = v
            .iter()
            .fold(0x9E37_79B9_7F4A_7C15u64, |h, &w| (h ^ w).wrapping_mul(0xD6E8_FEB8_6659_FD93).rotate_left(29));
        (h ^ h >> 32) as usize
    }

    /// The class of `v`, new if unseen; `None` past 65 536 classes.
    fn id(&mut self, v: &[u64]) -> Option<u16> {
        let mask = self.slots.len() - 1;
        let mut h = Self::hash(v) & mask;
        loop {
            match self.slots.get(h).copied()? {
                0 => break,
                c if self.classes.get(c as usize - 1) == v => return u16::try_from(c - 1).ok(),
                _ => h = (h + 1) & mask,
            }
        }
        let c = u16::try_from(self.classes.len()).ok()?;
        self.classes.flat.extend_from_slice(v);
        *self.slots.get_mut(h)? = u32::from(c) + 1;
        if self.classes.len() * 2 > self.slots.len() {
            self.grow();
        }
        Some(c)
    }

    fn grow(&mut self) {
        let n = self.slots.len() * 2;
        self.slots = vec![0; n];
        for c in 0..self.classes.len() {
            let mut h = Self::hash(self.classes.get(c)) & (n - 1);
            while self.slots.get(h).is_some_and(|&x| x != 0) {
                h = (h + 1) & (n - 1);
            }
            if let Some(x) = self.slots.get_mut(h) {
                *x = c as u32 + 1;
            }
        }
    }
}

/// A cross table being filled a few rows per build step.
#[derive(Debug)]
struct Filling {
    dedup: Dedup,
    table: Vec<u16>,
    row: usize,
}

/// Cells of a cross table filled per build step (about a millisecond at 1 000 rules).
const CELLS_PER_STEP: usize = 1 << 15;

/// A cross table: `table[a * width + b]`.
#[derive(Debug, Default)]
struct Cross {
    table: Vec<u16>,
    width: usize,
}

impl Cross {
    #[inline]
    fn at(&self, a: u16, b: u16) -> u16 {
        self.table.get(usize::from(a) * self.width + usize::from(b)).copied().unwrap_or(0)
    }
}

/// One rule of a pair class: its position and what the address pair leaves to check, each
/// range as (first value, last − first), so that a range check is one wrapping subtraction and
/// one compare (the three checks stay short-circuit: making them branch-free measured the
/// same).
#[derive(Debug, Clone, Copy, Default)]
struct Cand {
    pos: u16,
    sport: (u16, u16),
    dport: (u16, u16),
    /// One value (span 0), or `0..=255` for any.
    proto: (u8, u8),
}

impl Cand {
    /// The candidate of the rule at `pos`; `None` if one of its ranges is empty (the rule
    /// matches nothing and is left out of every list).
    fn new(pos: u16, sport: (u16, u16), dport: (u16, u16), proto: (u8, u8)) -> Option<Self> {
        Some(Self {
            pos,
            sport: (sport.0, sport.1.checked_sub(sport.0)?),
            dport: (dport.0, dport.1.checked_sub(dport.0)?),
            proto: (proto.0, proto.1.checked_sub(proto.0)?),
        })
    }

    #[inline]
    fn matches(&self, sport: u16, dport: u16, proto: u8) -> bool {
        (sport.wrapping_sub(self.sport.0) <= self.sport.1)
            && (dport.wrapping_sub(self.dport.0) <= self.dport.1)
            && (proto.wrapping_sub(self.proto.0) <= self.proto.1)
    }
}

/// A phase-0 table: a class for each of the 65 536 values of a 16-bit chunk. Its length is
/// in its type, so that a read indexed by a chunk needs no bounds check.
type Chunk = Box<[u16; 1 << 16]>;

/// A zeroed [`Chunk`], made on the heap (not on the stack and moved); `None` if the
/// allocation's length were not the array's (it is).
fn zeroed_chunk() -> Option<Chunk> {
    vec![0u16; 1 << 16].into_boxed_slice().try_into().ok()
}

/// The tables of one IPv4 run (see the module doc).
#[derive(Debug)]
pub struct Rfc {
    src_hi: Chunk,
    src_lo: Chunk,
    dst_hi: Chunk,
    dst_lo: Chunk,
    src: Cross,
    dst: Cross,
    pair: Cross,
    /// Pair class `c`'s candidates are `cands[lists[c].0..lists[c].1]`, in classification
    /// order.
    lists: Vec<(u32, u32)>,
    cands: Vec<Cand>,
    longest: usize,
}

impl Rfc {
    /// The position (in the run's classification order) of the first rule matching the key,
    /// addresses as IPv4 numbers.
    #[inline]
    pub fn lookup(&self, src: u32, dst: u32, sport: u16, dport: u16, proto: u8) -> Option<usize> {
        let (s_hi, s_lo) = (self.src_hi[(src >> 16) as usize], self.src_lo[usize::from(src as u16)]);
        let (d_hi, d_lo) = (self.dst_hi[(dst >> 16) as usize], self.dst_lo[usize::from(dst as u16)]);
        let c = usize::from(self.pair.at(self.src.at(s_hi, s_lo), self.dst.at(d_hi, d_lo)));
        self.first_in(self.list(c), sport, dport, proto)
    }

    /// [`Rfc::lookup`] of every key of `keys` at once, phase by phase, so that the reads of
    /// different keys overlap (each phase's reads depend on the previous phase's): `out[i]` is
    /// the position of key `i`'s first matching rule, or [`NO_MATCH`].
    #[inline]
    pub fn lookup_burst(&self, keys: &Keys4, out: &mut [u16; BURST]) {
        let n = keys.len();
        // Phase 0, then phase 1: each loop's reads are independent of one another.
        let mut h = [[0u16; 4]; BURST];
        for ((h, &a), &b) in h.iter_mut().zip(&keys.src).zip(&keys.dst).take(n) {
            *h = [
                self.src_hi[(a >> 16) as usize],
                self.src_lo[usize::from(a as u16)],
                self.dst_hi[(b >> 16) as usize],
                self.dst_lo[usize::from(b as u16)],
            ];
        }
        let mut sd = [(0u16, 0u16); BURST];
        for (c, &[sh, sl, dh, dl]) in sd.iter_mut().zip(&h).take(n) {
            *c = (self.src.at(sh, sl), self.dst.at(dh, dl));
        }
        // The pair's candidate list, its first line prefetched for the scan below.
        let mut list = [(0u32, 0u32); BURST];
        for (l, &(s, d)) in list.iter_mut().zip(&sd).take(n) {
            *l = self.list(usize::from(self.pair.at(s, d)));
            if let Some(first) = self.cands.get(l.0 as usize) {
                prefetch(first);
            }
        }
        let ports = keys.sport.iter().zip(&keys.dport).zip(&keys.proto);
        for ((o, &l), ((&sp, &dp), &pr)) in out.iter_mut().zip(&list).zip(ports).take(n) {
            *o = self.first_in(l, sp, dp, pr).map_or(NO_MATCH, |p| p as u16);
        }
    }

    /// Pair class `c`'s entry in [`Rfc::lists`].
    #[inline]
    fn list(&self, c: usize) -> (u32, u32) {
        self.lists.get(c).copied().unwrap_or((0, 0))
    }

    /// The first candidate of a list whose ports and protocol match.
    #[inline]
    fn first_in(&self, (from, to): (u32, u32), sport: u16, dport: u16, proto: u8) -> Option<usize> {
        let cands = self.cands.get(from as usize..to as usize)?;
        cands.iter().find(|k| k.matches(sport, dport, proto)).map(|k| usize::from(k.pos))
    }

    /// The lookup of a key in the classifiers' coordinates (`Point`), if both addresses are
    /// IPv4-mapped.
    #[inline]
    pub fn lookup_mapped(&self, src: u128, dst: u128, sport: u16, dport: u16, proto: u8) -> Option<Option<usize>> {
        if src >> 32 != MAPPED >> 32 || dst >> 32 != MAPPED >> 32 {
            return None;
        }
        Some(self.lookup(src as u32, dst as u32, sport, dport, proto))
    }

    /// Bytes the tables take.
    pub fn bytes(&self) -> usize {
        let c = [&self.src, &self.dst, &self.pair];
        2 * (4 * self.src_hi.len() + c.iter().map(|c| c.table.len()).sum::<usize>())
            + 8 * self.lists.len()
            + core::mem::size_of::<Cand>() * self.cands.len()
    }

    /// The most candidates a lookup checks: the worst case of a key.
    pub fn longest(&self) -> usize {
        self.longest
    }
}

/// A chunk's range for each rule, by position: `(lo, hi)` inclusive.
type Ranges = Vec<(u32, u32)>;

/// An [`Rfc`] built one table per [`RfcBuild::step`].
#[derive(Debug)]
pub struct RfcBuild {
    words: usize,
    /// The four address chunks' ranges, in the order of [`Rfc`]'s phase-0 fields.
    chunks: [Ranges; 4],
    /// Each rule's candidate entry, by position (`None`: the rule matches nothing).
    rules: Vec<Option<Cand>>,
    /// Phase-0 classes, then src, dst and pair classes.
    classes: Vec<Classes>,
    /// The cross table being filled.
    filling: Option<Filling>,
    rfc: Rfc,
    bytes: usize,
}

impl RfcBuild {
    /// A build over a run's rules in classification order, or `None` if a rule is not an
    /// IPv4 rule (an address prefix neither any nor IPv4-mapped) or the run is too long for
    /// 16-bit positions.
    pub fn new(sorted: &[(u32, Rule)]) -> Option<Self> {
        if sorted.is_empty() || sorted.len() > usize::from(u16::MAX) {
            return None;
        }
        let mut chunks: [Ranges; 4] = Default::default();
        let mut rules = Vec::with_capacity(sorted.len());
        for (pos, (_, r)) in sorted.iter().enumerate() {
            let [src_hi, src_lo] = halves(r.src)?;
            let [dst_hi, dst_lo] = halves(r.dst)?;
            for (c, range) in chunks.iter_mut().zip([src_hi, src_lo, dst_hi, dst_lo]) {
                c.push(range);
            }
            let proto = r.proto.map_or((0, u8::MAX), |p| (p, p));
            rules.push(Cand::new(u16::try_from(pos).ok()?, r.sport, r.dport, proto));
        }
        Some(Self {
            words: sorted.len().div_ceil(64),
            chunks,
            rules,
            classes: Vec::new(),
            filling: None,
            rfc: Rfc {
                src_hi: zeroed_chunk()?,
                src_lo: zeroed_chunk()?,
                dst_hi: zeroed_chunk()?,
                dst_lo: zeroed_chunk()?,
                src: Cross::default(),
                dst: Cross::default(),
                pair: Cross::default(),
                lists: Vec::new(),
                cands: Vec::new(),
                longest: 0,
            },
            bytes: 0,
        })
    }

    /// Builds the next table: `Some(true)` when all are built, `None` if the tables exceed
    /// [`MAX_BYTES`] or a table has more than 65 536 classes.
    pub fn step(&mut self) -> Option<bool> {
        let k = self.classes.len();
        if k < 4 {
            let table = [&mut self.rfc.src_hi, &mut self.rfc.src_lo, &mut self.rfc.dst_hi, &mut self.rfc.dst_lo]
                .into_iter()
                .nth(k)?;
            let classes = chunk(self.chunks.get(k)?, table, self.words)?;
            self.bytes += table.len() * 2;
            self.classes.push(classes);
            return Some(false);
        }
        if k < 7 {
            // (left, right) classes of each cross table, by index into `classes`:
            // 4 = src, 5 = dst, 6 = pair.
            let (a, b) = [(0, 1), (2, 3), (4, 5)].get(k - 4).copied()?;
            let (left, right) = (self.classes.get(a)?, self.classes.get(b)?);
            if self.filling.is_none() {
                let cells = left.len().checked_mul(right.len())?;
                self.bytes += cells * 2;
                if self.bytes > MAX_BYTES {
                    return None;
                }
                let table = Vec::with_capacity(cells);
                self.filling = Some(Filling { dedup: Dedup::new(left.words), table, row: 0 });
            }
            let f = self.filling.as_mut()?;
            if !combine(left, right, f)? {
                return Some(false);
            }
            let f = self.filling.take()?;
            let cross = Cross { table: f.table, width: right.len() };
            *[&mut self.rfc.src, &mut self.rfc.dst, &mut self.rfc.pair].into_iter().nth(k - 4)? = cross;
            self.classes.push(f.dedup.classes);
            return Some(false);
        }
        // The pair classes' candidate lists.
        let pairs = self.classes.get(6)?;
        let total: usize = pairs.flat.iter().map(|w| w.count_ones() as usize).sum();
        self.bytes += 8 * pairs.len() + core::mem::size_of::<Cand>() * total;
        if self.bytes > MAX_BYTES || u32::try_from(total).is_err() {
            return None;
        }
        let mut lists = Vec::with_capacity(pairs.len());
        let mut cands = Vec::with_capacity(total);
        let mut longest = 0;
        for c in 0..pairs.len() {
            let before = cands.len();
            for (k, &w) in pairs.get(c).iter().enumerate() {
                let mut w = w;
                while w != 0 {
                    if let Some(c) = *self.rules.get(k * 64 + w.trailing_zeros() as usize)? {
                        cands.push(c);
                    }
                    w &= w - 1;
                }
            }
            longest = longest.max(cands.len() - before);
            lists.push((before as u32, cands.len() as u32));
        }
        (self.rfc.lists, self.rfc.cands, self.rfc.longest) = (lists, cands, longest);
        Some(true)
    }

    /// The tables, once every step is done.
    pub fn finish(self) -> Option<Rfc> {
        (!self.rfc.lists.is_empty()).then_some(self.rfc)
    }
}

/// An address prefix's ranges on its high and low 16 bits, or `None` if it is not IPv4 (any,
/// or IPv4-mapped: length 96..=128 over `::ffff:0:0/96`).
fn halves((a, len): (u128, u8)) -> Option<[(u32, u32); 2]> {
    const ALL: (u32, u32) = (0, 0xFFFF);
    if len == 0 {
        return Some([ALL, ALL]);
    }
    if !(96..=128).contains(&len) || a >> 32 != MAPPED >> 32 {
        return None;
    }
    let l = u32::from(len - 96);
    let v = a as u32;
    let host = u32::MAX.checked_shr(l).unwrap_or(0);
    let (lo, hi) = (v & !host, v | host);
    Some([(lo >> 16, hi >> 16), if l <= 16 { ALL } else { (lo & 0xFFFF, hi & 0xFFFF) }])
}

/// Phase 0: fills `table` from each 16-bit value to its class; returns the classes.
fn chunk(ranges: &[(u32, u32)], table: &mut [u16; 1 << 16], words: usize) -> Option<Classes> {
    let max = table.len() - 1;
    let wide: Vec<(u128, u128)> = ranges.iter().map(|&(lo, hi)| (u128::from(lo), u128::from(hi))).collect();
    let (bounds, bits) = super::bitvec::elementary_intervals(&wide, max as u128, words, 0);
    let mut dedup = Dedup::new(words);
    // Interval i covers bounds[i]..bounds[i + 1] (the last one up to max).
    for (i, v) in bits.chunks(words.max(1)).enumerate() {
        let id = dedup.id(v)?;
        let start = bounds.get(i).map_or(0, |&b| b as usize);
        let end = bounds.get(i + 1).map_or(max + 1, |&b| b as usize);
        table.get_mut(start..end)?.fill(id);
    }
    Some(dedup.classes)
}

/// Fills rows of a cross table (the class of every pair's AND) from `f.row` on, at least
/// [`CELLS_PER_STEP`] cells' worth; `Some(true)` when the table is full.
fn combine(left: &Classes, right: &Classes, f: &mut Filling) -> Option<bool> {
    let mut and = vec![0u64; left.words];
    let mut cells = 0;
    while f.row < left.len() && cells < CELLS_PER_STEP {
        let va = left.get(f.row);
        for b in 0..right.len() {
            for ((o, x), y) in and.iter_mut().zip(va).zip(right.get(b)) {
                *o = x & y;
            }
            f.table.push(f.dedup.id(&and)?);
        }
        cells += right.len().max(1);
        f.row += 1;
    }
    Some(f.row >= left.len())
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::nf::acl::Classifier;
    use crate::parse::FlowKey;
    use proptest::prelude::*;

    #[test]
    fn a_prefix_splits_into_its_halves_ranges() {
        let v4 = |a: u32, len: u8| (MAPPED | u128::from(a), 96 + len);
        assert_eq!(halves((0, 0)), Some([(0, 0xFFFF), (0, 0xFFFF)]));
        assert_eq!(halves(v4(0x0A0B_0C0D, 0)), Some([(0, 0xFFFF), (0, 0xFFFF)]));
        assert_eq!(halves(v4(0x0A0B_0C0D, 8)), Some([(0x0A00, 0x0AFF), (0, 0xFFFF)]));
        assert_eq!(halves(v4(0x0A0B_0C0D, 16)), Some([(0x0A0B, 0x0A0B), (0, 0xFFFF)]));
        assert_eq!(halves(v4(0x0A0B_8C0D, 17)), Some([(0x0A0B, 0x0A0B), (0x8000, 0xFFFF)]));
        assert_eq!(halves(v4(0x0A0B_0C0D, 32)), Some([(0x0A0B, 0x0A0B), (0x0C0D, 0x0C0D)]));
        // Not IPv4: an IPv6 prefix, or a length inside the IPv6 space.
        assert_eq!(halves((1 << 127, 8)), None);
        assert_eq!(halves((MAPPED, 64)), None);
    }

    #[test]
    fn a_burst_takes_ipv4_keys_until_full() {
        let mut b = Keys4::default();
        assert!(b.is_empty());
        let v6 = FlowKey { src: IpAddr::V6([1; 16]), dst: IpAddr::V6([2; 16]), src_port: 1, dst_port: 2, proto: 6 };
        assert!(!b.push(&v6), "an IPv6 key is not taken");
        for i in 0..BURST as u32 {
            assert!(b.push(&FlowKey::v4(i, !i, i as u16, 80, 6)));
        }
        assert!(b.is_full());
        assert!(!b.push(&FlowKey::v4(1, 2, 3, 4, 6)), "a full burst takes no more");
        assert_eq!(b.flow(3), Some(FlowKey::v4(3, !3, 3, 80, 6)));
        assert_eq!(b.flow(BURST), None);
        b.clear();
        assert_eq!((b.len(), b.flow(0)), (0, None));
    }

    #[test]
    fn a_rule_with_an_empty_range_is_no_candidate() {
        assert!(Cand::new(0, (5, 4), (0, 9), (6, 6)).is_none());
        assert!(Cand::new(0, (0, 9), (0, 9), (7, 6)).is_none());
        let c = Cand::new(3, (10, 20), (80, 80), (0, u8::MAX)).expect("ranges");
        assert!(c.matches(10, 80, 17) && c.matches(20, 80, 6));
        assert!(!c.matches(9, 80, 6) && !c.matches(21, 80, 6) && !c.matches(15, 81, 6) && !c.matches(15, 79, 6));
    }

    #[test]
    fn only_ipv4_runs_get_cross_tables() {
        let r = Rule::v4(1, (0x0A00_0000, 8), (0, 0), (0, u16::MAX), (80, 80), Some(6), 0);
        assert!(Classifier::new(&[r]).uses_rfc());
        let v6 = Rule { src: (1 << 127, 8), ..r };
        assert!(!Classifier::new(&[r, v6]).uses_rfc());
        assert!(!Classifier::new(&[]).uses_rfc());
    }

    /// Host pairs whose halves are all distinct make cross tables past the budget: the run keeps
    /// its vectors alone and answers the same.
    #[test]
    fn a_run_past_the_budget_answers_through_its_vectors() {
        let n = crate::testing::miri_or(1024u32, 64);
        let host = |i: u32| i.wrapping_mul(0x9E37_79B1) | 1;
        let rules: Vec<Rule> = (0..n)
            .map(|i| Rule::v4(1, (host(i), 32), (host(i + n), 32), (0, u16::MAX), (0, u16::MAX), None, i))
            .collect();
        let c = Classifier::new(&rules);
        assert_eq!(c.uses_rfc(), n < 1024, "1 024 distinct host pairs exceed {MAX_BYTES} bytes");
        for i in (0..n).step_by(37) {
            let k = FlowKey::v4(host(i), host(i + n), 1, 2, 17);
            assert_eq!(c.classify(&k).map(|m| m.rule), Some(i));
        }
        assert_eq!(c.classify(&FlowKey::v4(host(0), host(n + 1), 1, 2, 17)), None);
    }

    /// Addresses near a few bases, so that prefixes of every length nest, share halves and
    /// straddle the 16-bit cut.
    fn addr() -> impl Strategy<Value = u32> {
        let bases = [0x0A00_0000u32, 0x0A00_FF00, 0x0A01_0000, 0x0AFF_FFF0, 0xC0A8_0101];
        (0..bases.len(), 0u32..4, 0u32..4, 0u32..32)
            .prop_map(move |(b, lo, mid, at)| bases.get(b).copied().unwrap_or(0) ^ (lo << (at % 8)) ^ (mid << 16))
    }

    fn arb_rule() -> impl Strategy<Value = Rule> {
        let len = prop_oneof![Just(0u8), Just(8), Just(15), Just(16), Just(17), Just(24), Just(30), Just(32)];
        let port = prop_oneof![
            Just((0u16, u16::MAX)),
            (0u16..8).prop_map(|p| (p, p)),
            (0u16..8, 0u16..8).prop_map(|(a, b)| (a.min(b), a.max(b))),
            // An empty range (the rule matches nothing).
            (1u16..8).prop_map(|p| (p, p - 1))
        ];
        (
            (addr(), len.clone()),
            (addr(), len),
            port.clone(),
            port,
            prop_oneof![Just(None), Just(Some(6u8)), Just(Some(17u8))],
            0u32..4,
        )
            .prop_map(|(s, d, sp, dp, pr, pri)| Rule::v4(pri, s, d, sp, dp, pr, 0))
    }

    fn arb_key() -> impl Strategy<Value = FlowKey> {
        (addr(), addr(), 0u16..10, 0u16..10, prop_oneof![Just(6u8), Just(17u8), Just(1u8)])
            .prop_map(|(s, d, sp, dp, pr)| FlowKey::v4(s, d, sp, dp, pr))
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(128))]
        /// The cross tables give the linear reference's answer (rule, action, priority), and
        /// with a rule deleted the run answers without it (through its vectors).
        #[test]
        fn cross_tables_answer_as_the_linear_reference(
            rules in proptest::collection::vec(arb_rule(), 1..120),
            keys in proptest::collection::vec(arb_key(), 48),
            kill in any::<prop::sample::Index>(),
        ) {
            let c = Classifier::new(&rules);
            prop_assert!(c.uses_rfc());
            for k in &keys {
                prop_assert_eq!(c.classify(k), c.classify_linear(k));
            }
            // The burst, 16 keys at a time (the last burst short).
            let dead = crate::nf::acl::classifier::Dead::default();
            for chunk in keys.chunks(BURST - 3) {
                let mut burst = Keys4::default();
                for k in chunk {
                    prop_assert!(burst.push(k));
                }
                let mut out = [None; BURST];
                prop_assert!(c.classify_burst_v4(&burst, &dead, &mut out));
                for (k, o) in chunk.iter().zip(out) {
                    prop_assert_eq!(o, c.classify_linear(k));
                }
            }
            let gone = kill.index(rules.len()) as u32;
            let mut dead = crate::nf::acl::classifier::Dead::default();
            prop_assert!(c.kill(&mut dead, gone));
            let without = Classifier::with_ids(
                rules.iter().enumerate().filter(|&(i, _)| i as u32 != gone).map(|(i, r)| (i as u32, *r)).collect(),
            );
            for k in &keys {
                prop_assert_eq!(c.classify_without(k, &dead), without.classify_linear(k));
            }
        }
    }
}
