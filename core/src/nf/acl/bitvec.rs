//! A bit-vector classifier for rule sets of up to a few thousand rules (Lakshman and Stiliadis,
//! SIGCOMM 1998: "High-speed policy-based packet forwarding using efficient multi-dimensional
//! range matching").
//!
//! The rules are put in classification order — priority descending, then id ascending, so that
//! the first matching rule in that order is the answer — and numbered by position. Each of the
//! five fields (source, destination, source port, destination port, protocol) is cut into its
//! *elementary intervals*: the rules' range ends split the field's value space so that every
//! value in one interval is matched by exactly the same rules. Every interval keeps the bit
//! vector of those rules (bit `p` = the rule at position `p`). A lookup finds the key's interval
//! in each field — a binary search for the addresses, a table for ports and protocol — and ANDs
//! the five vectors a 64-bit word at a time, in position order: the first set bit is the winner.
//! Every vector carries a summary word (an *aggregated bit vector*, Baboescu and Varghese,
//! SIGCOMM 2001: bit `k` set when word `k` is not zero); the five summaries ANDed name the only
//! words that can hold a match, so a key skips the words some field has empty and one
//! classifier can take up to 4 096 rules ([`MAX_RULES`]) at little more than a short one's cost.
//! A run of at most 128 rules (two words) ANDs its words in turn and leaves the summaries
//! unread: there the summary AND cost more than the word it might skip.
//!
//! Cost: a lookup is two binary searches over at most `2n + 1` bounds, three table reads, one
//! five-way AND of the summaries and at most `⌈n / 64⌉` five-way ANDs of words (only where the
//! summaries all have a bit; a summary bit whose words AND to zero costs one AND and is
//! passed), whatever the rules look like (no rule is checked field by field). Memory is quadratic: each field holds up to `2n + 1` vectors of `n` bits, so the
//! classifier is built only under a budget ([`BitVec::try_new`], [`MAX_BYTES`]); the tuple-space
//! classifier takes larger sets. Build is `O(n²)` bit writes. No allocation and no panic per
//! lookup.

use alloc::vec;
use alloc::vec::Vec;

use super::rfc::{Rfc, RfcBuild};
use crate::parse::FlowKey;
use crate::pna::ternary::{Match, Point, Rule};

/// The most memory the bit vectors (and their tables) of one classifier may take: about 2 000
/// rules of mixed prefixes and port ranges. Kept well inside the image's heap (at most 32 MiB,
/// shared with the flow tables), where a rule change briefly holds two versions.
pub const MAX_BYTES: usize = 8 << 20;

/// The most rules one classifier takes: one summary word (`Field::summary`) covers 64 words
/// of 64 rules.
pub const MAX_RULES: usize = 64 * 64;

/// One field cut into elementary intervals: interval `i` is `bounds[i] ..= bounds[i + 1] - 1`
/// (the last one runs to the field's maximum); its summary is `bits[i * (words + 1)]` and its
/// vector the `words` words after it (one cache line holds the summary and the first words).
#[derive(Debug, Default)]
struct Field {
    bounds: Vec<u128>,
    /// The bounds as `u64` when they all fit (an IPv4 classifier's: IPv4-mapped addresses lie
    /// below 2^48), for a search of one-instruction compares.
    narrow: Option<Vec<u64>>,
    /// For an IPv4 classifier's addresses: `top[t]` is the number of bounds below the
    /// IPv4-mapped address `t.0.0` (`t` the top 16 bits), so a key's search runs only over the
    /// bounds that share its top 16 bits (`top[t]..top[t + 1]`, usually a handful). For an
    /// IPv6 classifier's (bounds not narrow): the same over the address's top 16 bits
    /// (`t::/16`).
    top: Vec<u16>,
    /// Each interval's summary and vector. The summary aggregates the vector (Baboescu and
    /// Varghese, SIGCOMM 2001): its bit `k` is set when word `k` is not zero, so that a lookup
    /// ANDs only the words that all five fields may have set (at most 64 words: 4 096 rules,
    /// [`MAX_RULES`]).
    /// Runs of at most [`DIRECT_WORDS`] words store no summary (the vector alone).
    bits: Vec<u64>,
    /// Words per interval: the summary (if any) and the vector.
    stride: usize,
    /// Whether each interval starts with a summary word.
    summary: bool,
}

/// Cuts `0..=max` by `ranges` (one per rule, by position) into elementary intervals: interval
/// `i` is `bounds[i] ..= bounds[i + 1] - 1` (the last one runs to `max`). Returns the bounds
/// and, `stride` words per interval, each interval's vector of the rules covering it, bit `p`
/// of word `lead + p / 64` (the words before `lead` left for the caller).
pub(super) fn elementary_intervals(
    ranges: &[(u128, u128)],
    max: u128,
    stride: usize,
    lead: usize,
) -> (Vec<u128>, Vec<u64>) {
    let mut bounds: Vec<u128> = vec![0];
    for &(lo, hi) in ranges {
        bounds.push(lo);
        if hi < max {
            bounds.push(hi + 1);
        }
    }
    bounds.sort_unstable();
    bounds.dedup();
    let mut bits = vec![0u64; bounds.len() * stride];
    for (p, &(lo, hi)) in ranges.iter().enumerate() {
        // The intervals inside [lo, hi]: from the one starting at lo to the last starting at or
        // below hi (ranges' ends are bounds, so none straddles).
        let first = bounds.partition_point(|&b| b < lo);
        let end = bounds.partition_point(|&b| b <= hi);
        for i in first..end {
            if let Some(w) = bits.get_mut(i * stride + lead + p / 64) {
                *w |= 1 << (p % 64);
            }
        }
    }
    (bounds, bits)
}

/// `::ffff:0.0.0.0`, the first IPv4-mapped address.
const MAPPED: u64 = 0xFFFF << 32;
/// Runs of at most this many words (128 rules) carry no summaries and AND every word in turn:
/// there the summary AND costs more than the one word it might skip, and a row of two words
/// (16 bytes) never straddles a cache line, as one of three can.
const DIRECT_WORDS: usize = 2;

impl Field {
    /// Cuts `max`'s value space by `ranges` (one per rule, by position) and sets every rule's
    /// bit in the intervals its range covers.
    fn build(ranges: &[(u128, u128)], max: u128, words: usize) -> Field {
        let summary = words > DIRECT_WORDS;
        let lead = usize::from(summary);
        let stride = words + lead;
        let (bounds, mut bits) = elementary_intervals(ranges, max, stride, lead);
        let narrow = bounds.iter().map(|&b| u64::try_from(b).ok()).collect::<Option<Vec<u64>>>();
        for row in bits.chunks_mut(stride).filter(|_| summary) {
            if let Some((summary, vector)) = row.split_first_mut() {
                *summary = vector.iter().enumerate().fold(0, |m, (k, &w)| m | u64::from(w != 0) << (k % 64));
            }
        }
        Field { bounds, narrow, top: Vec::new(), bits, stride, summary }
    }

    /// Adds the top-16-bit index ([`Field::top`], 128 KiB) for IPv4-mapped keys or IPv6 keys,
    /// where the bounds are many enough for a plain search to cost more than two steps.
    fn with_top_index(mut self) -> Field {
        if self.narrow.is_none() && self.bounds.len() > 8 && self.bounds.len() <= usize::from(u16::MAX) {
            // top[t] = bounds below t << 112: one sweep.
            let mut below = 0;
            self.top = (0..=1u32 << 16)
                .map(|t| {
                    if t == 1 << 16 {
                        below = self.bounds.len(); // every bound lies below the end of the space
                    }
                    while self.bounds.get(below).is_some_and(|&b| b < u128::from(t) << 112) {
                        below += 1;
                    }
                    u16::try_from(below).unwrap_or(u16::MAX)
                })
                .collect();
        }
        if let Some(narrow) = self.narrow.as_ref().filter(|n| n.len() > 8 && n.len() <= usize::from(u16::MAX)) {
            // top[t] = bounds below MAPPED + (t << 16): one sweep, as both grow with t.
            let mut below = 0;
            self.top = (0..=1u64 << 16)
                .map(|t| {
                    while narrow.get(below).is_some_and(|&b| b < MAPPED + (t << 16)) {
                        below += 1;
                    }
                    // At most 2 × MAX_RULES + 1 bounds: fits.
                    u16::try_from(below).unwrap_or(u16::MAX)
                })
                .collect();
        }
        self
    }

    /// The interval holding `v`.
    #[inline]
    fn interval(&self, v: u128) -> usize {
        let n = match (&self.narrow, u64::try_from(v)) {
            (Some(narrow), Ok(v)) => {
                // An IPv4-mapped key with the index: search its top 16 bits' bounds only.
                let t = v.wrapping_sub(MAPPED) >> 16;
                match (self.top.get(t as usize), self.top.get(t as usize + 1)) {
                    (Some(&lo), Some(&hi)) if v >= MAPPED => {
                        let within = narrow.get(lo as usize..hi as usize).unwrap_or(&[]);
                        lo as usize + within.partition_point(|&b| b <= v)
                    }
                    _ => narrow.partition_point(|&b| b <= v),
                }
            }
            // Above every narrow bound: the last interval.
            (Some(narrow), Err(_)) => narrow.len(),
            (None, _) => {
                // The bounds that share the key's top 16 bits, with the index.
                let t = (v >> 112) as usize;
                match (self.top.get(t), self.top.get(t + 1)) {
                    (Some(&lo), Some(&hi)) => {
                        let within = self.bounds.get(usize::from(lo)..usize::from(hi)).unwrap_or(&[]);
                        usize::from(lo) + within.partition_point(|&b| b <= v)
                    }
                    _ => self.bounds.partition_point(|&b| b <= v),
                }
            }
        };
        n.saturating_sub(1)
    }

    /// The summary and the vector of the interval holding `v`.
    #[inline]
    fn row(&self, v: u128) -> (u64, &[u64]) {
        self.row_at(self.interval(v))
    }

    /// The summary and the vector of interval `i` (none past the end).
    #[inline]
    fn row_at(&self, i: usize) -> (u64, &[u64]) {
        let start = i * self.stride;
        match self.bits.get(start..start + self.stride) {
            Some([summary, vector @ ..]) if self.summary => (*summary, vector),
            Some(vector) => (0, vector),
            None => (0, &[]),
        }
    }

    fn bytes(&self) -> usize {
        self.bounds.len() * 16
            + self.narrow.as_ref().map_or(0, |n| n.len() * 8)
            + self.top.len() * 2
            + self.bits.len() * 8
    }
}

/// A port or protocol field: a table from every value to its interval.
#[derive(Debug, Default)]
struct Small {
    field: Field,
    index: Vec<u16>,
}

impl Small {
    fn build(ranges: &[(u128, u128)], max: u16, words: usize) -> Option<Small> {
        let field = Field::build(ranges, u128::from(max), words);
        // Intervals are at most 2n + 1 ≤ 65 536 only while n < 32 768: checked by the caller.
        // The interval of v is the number of bounds at or below v, less one: one sweep, as
        // both grow with v (bounds[0] is 0).
        let mut index = Vec::with_capacity(usize::from(max) + 1);
        let mut upto = 0;
        for v in 0..=u128::from(max) {
            while field.bounds.get(upto).is_some_and(|&b| b <= v) {
                upto += 1;
            }
            index.push(u16::try_from(upto.saturating_sub(1)).ok()?);
        }
        Some(Small { field, index })
    }

    #[inline]
    fn row(&self, v: u16) -> (u64, &[u64]) {
        self.field.row_at(usize::from(self.index.get(usize::from(v)).copied().unwrap_or(0)))
    }

    fn bytes(&self) -> usize {
        self.field.bytes() + self.index.len() * 2
    }
}

/// The bit-vector classifier (see the module doc).
#[derive(Debug, Default)]
pub struct BitVec {
    /// Position → (id, action, priority).
    at: Vec<(u32, u32, u32)>,
    src: Field,
    dst: Field,
    sport: Small,
    dport: Small,
    proto: Small,
    /// The same run as cross tables, for IPv4 keys while no rule of it is deleted
    /// ([`super::rfc`]); `None` when the run is not all IPv4 rules or the tables would not fit.
    rfc: Option<Rfc>,
}

/// A [`BitVec`] built a field at a time ([`BitVecBuild::step`]), so that a large build can be
/// spread over short steps (each field of a 2 048-rule run is about a millisecond here).
#[derive(Debug)]
pub struct BitVecBuild {
    /// Position → (id, rule), in classification order.
    sorted: Vec<(u32, Rule)>,
    words: usize,
    max_bytes: usize,
    bytes: usize,
    src: Option<Field>,
    dst: Option<Field>,
    sport: Option<Small>,
    dport: Option<Small>,
    proto: Option<Small>,
    /// The cross tables still to build after the fields ([`BitVecBuild::with_rfc`]).
    rfc: Option<RfcBuild>,
    rfc_done: Option<Rfc>,
}

impl BitVecBuild {
    /// A build of `(id, rule)` pairs under `max_bytes`, or `None` if it cannot fit.
    pub fn new(rules: &[(u32, Rule)], max_bytes: usize) -> Option<Self> {
        let n = rules.len();
        let words = n.div_ceil(64).max(1);
        // Worst case per field: 2n + 1 intervals of `words` words; five fields.
        let estimate = (2 * n + 1).saturating_mul(words).saturating_mul(8).saturating_mul(5);
        if n > MAX_RULES || estimate > max_bytes.saturating_mul(4) {
            return None;
        }
        let mut sorted = rules.to_vec();
        sorted.sort_by(|a, b| b.1.priority.cmp(&a.1.priority).then(a.0.cmp(&b.0)));
        Some(Self {
            sorted,
            words,
            max_bytes,
            bytes: 0,
            src: None,
            dst: None,
            sport: None,
            dport: None,
            proto: None,
            rfc: None,
            rfc_done: None,
        })
    }

    /// Also builds the run's cross tables ([`super::rfc`]) after its fields, one table per
    /// step, if its rules are all IPv4 rules; a build that outgrows them leaves them out.
    pub fn with_rfc(mut self) -> Self {
        self.rfc = RfcBuild::new(&self.sorted);
        self
    }

    /// Builds the next field: `Some(true)` when all are built, `None` if the vectors exceed
    /// the budget.
    pub fn step(&mut self) -> Option<bool> {
        let words = self.words;
        let ranges = |f: &dyn Fn(&Rule) -> (u128, u128)| self.sorted.iter().map(|(_, r)| f(r)).collect::<Vec<_>>();
        let port = |(lo, hi): (u16, u16)| (u128::from(lo), u128::from(hi));
        let added = if self.src.is_none() {
            let f = Field::build(&ranges(&|r| prefix_range(r.src)), u128::MAX, words).with_top_index();
            let b = f.bytes();
            self.src = Some(f);
            b
        } else if self.dst.is_none() {
            let f = Field::build(&ranges(&|r| prefix_range(r.dst)), u128::MAX, words).with_top_index();
            let b = f.bytes();
            self.dst = Some(f);
            b
        } else if self.sport.is_none() {
            let f = Small::build(&ranges(&|r| port(r.sport)), u16::MAX, words)?;
            let b = f.bytes();
            self.sport = Some(f);
            b
        } else if self.dport.is_none() {
            let f = Small::build(&ranges(&|r| port(r.dport)), u16::MAX, words)?;
            let b = f.bytes();
            self.dport = Some(f);
            b
        } else if self.proto.is_none() {
            let proto = |r: &Rule| r.proto.map_or((0, 255), |p| (u128::from(p), u128::from(p)));
            let f = Small::build(&ranges(&proto), u16::from(u8::MAX), words)?;
            let b = f.bytes();
            self.proto = Some(f);
            b
        } else if let Some(rfc) = self.rfc.as_mut() {
            match rfc.step() {
                Some(false) => return Some(false),
                Some(true) => self.rfc_done = self.rfc.take().and_then(RfcBuild::finish),
                // Too large: the run answers through its vectors alone.
                None => self.rfc = None,
            }
            return Some(true);
        } else {
            0
        };
        self.bytes += added;
        if self.bytes > self.max_bytes {
            return None;
        }
        Some(self.proto.is_some() && self.rfc.is_none())
    }

    /// The classifier, once every field is built.
    pub fn finish(self) -> Option<BitVec> {
        Some(BitVec {
            at: self.sorted.iter().map(|(id, r)| (*id, r.action, r.priority)).collect(),
            src: self.src?,
            dst: self.dst?,
            sport: self.sport?,
            dport: self.dport?,
            proto: self.proto?,
            rfc: self.rfc_done,
        })
    }
}

fn prefix_range((a, len): (u128, u8)) -> (u128, u128) {
    let len = u32::from(len.min(128));
    let host = u128::MAX.checked_shr(len).unwrap_or(0);
    (a & !host, a | host)
}

impl BitVec {
    /// The classifier over `(id, rule)` pairs (ids increasing; equal priorities: the lower id
    /// wins), or `None` if its vectors would take more than `max_bytes` (or the rules are too
    /// many for 16-bit interval tables). Allocates; for the control plane.
    pub fn try_new(rules: &[(u32, Rule)], max_bytes: usize) -> Option<BitVec> {
        let mut b = BitVecBuild::new(rules, max_bytes)?;
        while !b.step()? {}
        b.finish()
    }

    /// Bytes the classifier holds.
    pub fn bytes(&self) -> usize {
        self.src.bytes()
            + self.dst.bytes()
            + self.sport.bytes()
            + self.dport.bytes()
            + self.proto.bytes()
            + self.rfc.as_ref().map_or(0, Rfc::bytes)
    }

    /// Whether IPv4 keys are answered by cross tables ([`super::rfc`]).
    pub fn uses_rfc(&self) -> bool {
        self.rfc.is_some()
    }

    /// Drops the cross tables (the vectors answer alone); returns the bytes they took.
    pub(crate) fn drop_rfc(&mut self) -> usize {
        self.rfc.take().map_or(0, |r| r.bytes())
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    /// The position of rule `id` in classification order (bit `p` of the vectors).
    pub fn position(&self, id: u32) -> Option<usize> {
        self.at.iter().position(|&(i, _, _)| i == id)
    }

    /// The best rule matching `p`: highest priority, then lowest id.
    #[inline]
    pub fn classify(&self, k: &FlowKey) -> Option<Match> {
        self.lookup(&Point::of(k), &[])
    }

    /// [`BitVec::classify`] without the rules whose positions are set in `dead` (bit `p` of
    /// word `p / 64`; words past its end count as zero): deleted since the build.
    #[inline]
    pub fn classify_without(&self, k: &FlowKey, dead: &[u64]) -> Option<Match> {
        self.lookup(&Point::of(k), dead)
    }

    /// [`BitVec::classify_without`] of a key already in the classifiers' coordinates (a
    /// [`Classifier`](super::Classifier) makes it once for all its groups).
    #[inline]
    pub(crate) fn lookup(&self, p: &Point, dead: &[u64]) -> Option<Match> {
        if let Some(answer) = self.lookup_rfc(p, dead) {
            return answer;
        }
        self.lookup_vectors(p, dead)
    }

    /// The answer of the cross tables ([`super::rfc`]), or `None` when they cannot give it:
    /// none built, a rule of the run deleted since, or a key that is not IPv4.
    #[inline]
    pub(crate) fn lookup_rfc(&self, p: &Point, dead: &[u64]) -> Option<Option<Match>> {
        let pos = self.rfc(dead)?.lookup_mapped(p.src, p.dst, p.sport, p.dport, p.proto)?;
        Some(pos.and_then(|pos| self.match_at(pos)))
    }

    /// The cross tables, when they may answer (built, and no rule of the run deleted).
    #[inline]
    pub(crate) fn rfc(&self, dead: &[u64]) -> Option<&Rfc> {
        self.rfc.as_ref().filter(|_| dead.iter().all(|&w| w == 0))
    }

    /// The rule at position `pos` as a match.
    #[inline]
    pub(crate) fn match_at(&self, pos: usize) -> Option<Match> {
        self.at.get(pos).map(|&(rule, action, priority)| Match { rule, action, priority })
    }

    /// The answer of the bit vectors.
    #[inline]
    pub(crate) fn lookup_vectors(&self, p: &Point, dead: &[u64]) -> Option<Match> {
        let ((ms, s), (md, d)) = (self.src.row(p.src), self.dst.row(p.dst));
        let ((msp, sp), (mdp, dp), (mpr, pr)) =
            (self.sport.row(p.sport), self.dport.row(p.dport), self.proto.row(u16::from(p.proto)));
        if s.len() <= DIRECT_WORDS {
            // A run of at most 128 rules: its words ANDed in order, the summaries unread
            // (their AND costs more than the one word it might skip).
            let pos = match s.len() {
                1 => first_match::<1>([s, d, sp, dp, pr], dead),
                2 => first_match::<2>([s, d, sp, dp, pr], dead),
                _ => None,
            }?;
            let &(rule, action, priority) = self.at.get(pos)?;
            return Some(Match { rule, action, priority });
        }
        // Only the words every field may have set, in position order.
        let mut m = ms & md & msp & mdp & mpr;
        while m != 0 {
            let k = m.trailing_zeros() as usize;
            m &= m - 1;
            let word = |r: &[u64]| r.get(k).copied().unwrap_or(0);
            let x = word(s) & word(d) & word(sp) & word(dp) & word(pr) & !dead.get(k).copied().unwrap_or(0);
            if x != 0 {
                let pos = k * 64 + x.trailing_zeros() as usize;
                let &(rule, action, priority) = self.at.get(pos)?;
                return Some(Match { rule, action, priority });
            }
        }
        None
    }
}

/// The first position all five rows of `W` words have set and `dead` has not.
#[inline(always)]
fn first_match<const W: usize>(rows: [&[u64]; 5], dead: &[u64]) -> Option<usize> {
    let [Ok(s), Ok(d), Ok(sp), Ok(dp), Ok(pr)] = rows.map(<&[u64; W]>::try_from) else { return None };
    (0..W).find_map(|k| {
        let w = |r: &[u64; W]| r.get(k).copied().unwrap_or(0);
        let x = w(s) & w(d) & w(sp) & w(dp) & w(pr) & !dead.get(k).copied().unwrap_or(0);
        (x != 0).then(|| k * 64 + x.trailing_zeros() as usize)
    })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::nf::acl::Classifier;
    use crate::parse::IpAddr;
    use proptest::prelude::*;

    fn rule(
        src: (u128, u8),
        dst: (u128, u8),
        sport: (u16, u16),
        dport: (u16, u16),
        proto: Option<u8>,
        pri: u32,
    ) -> Rule {
        Rule { priority: pri, src, dst, sport, dport, proto, action: pri }
    }

    #[test]
    fn first_in_priority_then_id_order_wins() {
        let any = ((0, 0), (0, 0), (0, u16::MAX), (0, u16::MAX), None);
        let r = |pri| rule(any.0, any.1, any.2, any.3, any.4, pri);
        let mut narrow = r(5);
        narrow.dport = (80, 80);
        let rules = vec![(0, r(1)), (1, narrow), (2, r(5)), (3, r(1))];
        let bv = BitVec::try_new(&rules, MAX_BYTES).expect("small");
        let m = |dport| bv.classify(&FlowKey::v4(1, 2, 3, dport, 6)).map(|m| m.rule);
        assert_eq!(m(80), Some(1), "priority 5 and the lower id");
        assert_eq!(m(81), Some(2));
        assert_eq!(BitVec::try_new(&[], MAX_BYTES).expect("empty").classify(&FlowKey::v4(1, 2, 3, 4, 6)), None);
    }

    /// The top-16-bit index finds the interval the plain search finds, for IPv4-mapped keys
    /// around every bound and at the ends of the space.
    #[test]
    fn the_top_index_finds_the_plain_searchs_interval() {
        let m = u128::from(MAPPED);
        let ranges = [
            (0, u128::MAX),
            (m | 0x0A00_0000, m | 0x0AFF_FFFF),
            (m | 0x0A01_0200, m | 0x0A01_02FF),
            (m | 0xFFFF_FF00, m | 0xFFFF_FFFF),
        ];
        let mut ranges = ranges.to_vec();
        // Enough bounds for the index to be built.
        ranges.extend((0..8u128).map(|i| (m | (i << 24) | 0x10_0000, m | (i << 24) | 0x1F_FFFF)));
        let f = Field::build(&ranges, u128::MAX, 1).with_top_index();
        assert_eq!(f.top.len(), (1 << 16) + 1);
        let plain = |v: u128| f.bounds.partition_point(|&b| b <= v).saturating_sub(1);
        let mut probes = vec![0u128, 1, m - 1, m, m | 0xFFFF_FFFF, (m | 0xFFFF_FFFF) + 1, u128::MAX];
        for &(lo, hi) in &ranges {
            probes.extend([lo.saturating_sub(1), lo, lo + 1, hi.saturating_sub(1), hi, hi.saturating_add(1)]);
        }
        for v in probes {
            assert_eq!(f.interval(v), plain(v), "{v:#x}");
        }
        // IPv6 bounds (not narrow): the index on the address's top 16 bits.
        let n = |t: u128, rest: u128| t << 112 | rest;
        let mut ranges6 = vec![(0, u128::MAX), (n(0x2001, 0), n(0x2001, u128::MAX >> 16)), (n(0xFFFF, 5), u128::MAX)];
        ranges6.extend((0..8u128).map(|i| (n(0x2001, i << 80), n(0x2001, (i << 80) | 0xFFFF))));
        ranges6.extend((0..4u128).map(|i| (n(0x3FFE + i, 1), n(0x3FFE + i, 1 << 100))));
        let f = Field::build(&ranges6, u128::MAX, 1).with_top_index();
        assert!(f.narrow.is_none());
        assert_eq!(f.top.len(), (1 << 16) + 1);
        let plain = |v: u128| f.bounds.partition_point(|&b| b <= v).saturating_sub(1);
        let mut probes = vec![0u128, 1, n(1, 0) - 1, n(0xFFFF, 0), u128::MAX - 1, u128::MAX];
        for &(lo, hi) in &ranges6 {
            probes.extend([lo.saturating_sub(1), lo, lo + 1, hi.saturating_sub(1), hi, hi.saturating_add(1)]);
        }
        for v in probes {
            assert_eq!(f.interval(v), plain(v), "{v:#x}");
        }
    }

    #[test]
    fn refuses_what_would_not_fit() {
        let rules: Vec<(u32, Rule)> = (0..3000u32)
            .map(|i| (i, rule((u128::from(i) << 100, 28), (0, 0), (0, u16::MAX), (i as u16, i as u16), Some(6), 1)))
            .collect();
        assert!(BitVec::try_new(&rules, 1 << 20).is_none(), "3000 rules do not fit in 1 MiB");
        let bv = BitVec::try_new(&rules, 64 << 20).expect("they fit in 64 MiB");
        assert!(bv.bytes() <= 64 << 20 && bv.bytes() > 1 << 20);
    }

    /// A summary bit is set exactly where its interval's vector word is not zero, and a run of
    /// more rules than one summary word covers is refused.
    #[test]
    fn summaries_mark_the_words_that_are_not_zero() {
        // 300 rules (5 words): rule i matches source port i only, so each port's interval has
        // one word set; port 1 000 (no rule) none.
        let rules: Vec<(u32, Rule)> =
            (0..300u32).map(|i| (i, rule((0, 0), (0, 0), (i as u16, i as u16), (0, u16::MAX), None, 1))).collect();
        let bv = BitVec::try_new(&rules, MAX_BYTES).expect("small");
        for port in [0u16, 63, 64, 200, 299, 1000] {
            let (summary, row) = bv.sport.row(port);
            let want = row.iter().enumerate().fold(0u64, |m, (k, &w)| m | u64::from(w != 0) << k);
            assert_eq!(summary, want, "port {port}");
            assert_eq!(summary.count_ones(), u32::from(port < 300), "port {port}");
            let m = bv.classify(&FlowKey::v4(1, 2, port, 9, 6)).map(|m| m.rule);
            assert_eq!(m, (port < 300).then_some(u32::from(port)));
        }
        let many: Vec<(u32, Rule)> =
            (0..=MAX_RULES as u32).map(|i| (i, rule((0, 0), (0, 0), (0, u16::MAX), (0, u16::MAX), None, 1))).collect();
        assert!(BitVec::try_new(&many, usize::MAX / 8).is_none(), "one rule past a summary word");
    }

    fn arb_rule() -> impl Strategy<Value = Rule> {
        let prefix = (0u128..8, 0u8..=8).prop_map(|(a, len)| {
            // Clustered high bits so that rules nest and overlap.
            let addr = a << 125;
            let len = len * 16;
            (if len == 0 { 0 } else { addr & (u128::MAX << (128 - u32::from(len))) }, len)
        });
        let port = prop_oneof![
            Just((0u16, u16::MAX)),
            (0u16..8).prop_map(|p| (p, p)),
            (0u16..8, 0u16..8).prop_map(|(a, b)| (a.min(b), a.max(b)))
        ];
        (
            prefix.clone(),
            prefix,
            port.clone(),
            port,
            prop_oneof![Just(None), Just(Some(6u8)), Just(Some(17u8))],
            0u32..4,
        )
            .prop_map(|(s, d, sp, dp, pr, pri)| rule(s, d, sp, dp, pr, pri))
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(128))]
        /// The bit vectors give the linear reference's answer (rule id, action, priority).
        #[test]
        fn bitvec_matches_linear(
            rules in proptest::collection::vec(arb_rule(), 0..150),
            keys in proptest::collection::vec((0u128..8, 0u128..8, 0u16..10, 0u16..10, prop_oneof![Just(6u8), Just(17u8), Just(1u8)]), 40),
        ) {
            let with_ids: Vec<(u32, Rule)> = rules.iter().enumerate().map(|(i, r)| (i as u32, *r)).collect();
            let bv = BitVec::try_new(&with_ids, MAX_BYTES).expect("small");
            let lin = Classifier::with_ids(with_ids);
            for (s, d, sp, dp, pr) in keys {
                let ip = |a: u128| IpAddr::V6(a.to_be_bytes());
                let k = FlowKey { src: ip((s << 125) | 7), dst: ip((d << 125) | 3), src_port: sp, dst_port: dp, proto: pr };
                prop_assert_eq!(bv.classify(&k), lin.classify_linear(&k));
            }
        }
    }
}
