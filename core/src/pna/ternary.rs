//! A ternary/range table for 5-tuple rules (the ACL's rules).
//!
//! A [`Rule`] matches a source and a destination prefix, source and destination port ranges and
//! an optional protocol; the highest `priority` wins (ties: the rule added first). IPv4 and IPv6
//! share one table: IPv4 addresses are IPv4-mapped IPv6 (`::ffff:a.b.c.d`, prefix length + 96), so
//! a v4 rule never matches a v6 packet.
//!
//! Classification is tuple space search: rules are grouped by their mask tuple
//! (source length, destination length, protocol given or not); each tuple keeps an open-addressing
//! hash of the masked (source, destination, protocol) to the tuple's rules with that value, sorted
//! by priority, whose port ranges are then checked in order. Tuples are visited by decreasing best
//! priority and the search stops when no remaining tuple can beat the match in hand, so the cost
//! grows with the number of distinct masks, not rules. The structure is rebuilt by the control
//! plane on every change (allocation there, never in `classify`). [`TernaryTable::classify_linear`]
//! is the reference scan the tests compare against.

use alloc::vec::Vec;
use core::fmt;

use crate::parse::FlowKey;

const V4_MAPPED: u128 = 0xFFFF << 32;

/// A flow key in the classifiers' coordinates: both addresses as IPv6 numbers
/// ([`IpAddr::to_v6_bits`](crate::parse::IpAddr::to_v6_bits)), made once per lookup from the
/// one flow key type, [`FlowKey`], so that the scans compare integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Point {
    pub(crate) src: u128,
    pub(crate) dst: u128,
    pub(crate) sport: u16,
    pub(crate) dport: u16,
    pub(crate) proto: u8,
}

impl Point {
    /// `k` as the classifiers compare it.
    #[inline]
    pub(crate) fn of(k: &FlowKey) -> Self {
        Self { src: k.src.to_v6_bits(), dst: k.dst.to_v6_bits(), sport: k.src_port, dport: k.dst_port, proto: k.proto }
    }
}

/// One classification rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Rule {
    /// Higher wins.
    pub priority: u32,
    /// Source prefix and length (0..=128).
    pub src: (u128, u8),
    /// Destination prefix and length (0..=128).
    pub dst: (u128, u8),
    /// Inclusive source port range.
    pub sport: (u16, u16),
    /// Inclusive destination port range.
    pub dport: (u16, u16),
    /// Protocol, or any.
    pub proto: Option<u8>,
    /// What the rule decides (opaque to the table, e.g. permit/deny).
    pub action: u32,
}

impl Rule {
    /// An IPv4 rule (prefix lengths 0..=32).
    #[allow(clippy::too_many_arguments)]
    pub const fn v4(
        priority: u32,
        src: (u32, u8),
        dst: (u32, u8),
        sport: (u16, u16),
        dport: (u16, u16),
        proto: Option<u8>,
        action: u32,
    ) -> Self {
        let s = if src.1 > 32 { 32 } else { src.1 };
        let d = if dst.1 > 32 { 32 } else { dst.1 };
        Self {
            priority,
            src: (V4_MAPPED | src.0 as u128, 96 + s),
            dst: (V4_MAPPED | dst.0 as u128, 96 + d),
            sport,
            dport,
            proto,
            action,
        }
    }

    /// Whether the rule matches `k`.
    pub fn matches(&self, k: &FlowKey) -> bool {
        self.matches_point(&Point::of(k))
    }

    /// [`Rule::matches`] of a key already in the classifiers' coordinates.
    #[inline]
    pub(crate) fn matches_point(&self, p: &Point) -> bool {
        mask(p.src, self.src.1) == mask(self.src.0, self.src.1)
            && mask(p.dst, self.dst.1) == mask(self.dst.0, self.dst.1)
            && (self.sport.0..=self.sport.1).contains(&p.sport)
            && (self.dport.0..=self.dport.1).contains(&p.dport)
            && self.proto.is_none_or(|x| x == p.proto)
    }
}

/// Why a rule was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RuleError {
    /// A prefix length above 128 or an empty port range.
    Malformed,
    /// No rule with that id.
    NotFound,
}

impl fmt::Display for RuleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleError::Malformed => "malformed rule",
            RuleError::NotFound => "no such rule",
        })
    }
}

/// A rule's identity in its table (the order of addition; lower wins ties).
pub type RuleId = u32;

/// The match a classification returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Match {
    /// The winning rule.
    pub rule: RuleId,
    /// Its action.
    pub action: u32,
    /// Its priority.
    pub priority: u32,
}

#[inline]
fn mask(a: u128, len: u8) -> u128 {
    if len == 0 { 0 } else { a & (u128::MAX << (128 - u32::from(len.min(128)))) }
}

#[inline]
fn hash3(src: u128, dst: u128, proto: u8) -> u64 {
    let f = |a: u64, b: u64| {
        let p = u128::from(a) * u128::from(b);
        (p as u64) ^ ((p >> 64) as u64)
    };
    let mut h = 0x243F_6A88_85A3_08D3u64;
    for w in [src as u64, (src >> 64) as u64, dst as u64, (dst >> 64) as u64, u64::from(proto)] {
        h = f(h ^ w, 0x9E37_79B9_7F4A_7C15);
    }
    h
}

/// (tuple, masked value, priority, id) of one rule while rebuilding.
type Keyed = ((u8, u8, bool), (u128, u128, u8), u32, RuleId);

#[derive(Debug, Clone, Copy)]
struct HashSlot {
    used: bool,
    src: u128,
    dst: u128,
    proto: u8,
    /// Range of `TernaryTable::lists`.
    start: u32,
    len: u32,
}

#[derive(Debug)]
struct Tuple {
    src_len: u8,
    dst_len: u8,
    has_proto: bool,
    best: u32,
    slots: Vec<HashSlot>,
}

/// The 5-tuple classifier.
#[derive(Debug, Default)]
pub struct TernaryTable {
    rules: Vec<Option<Rule>>,
    tuples: Vec<Tuple>,
    lists: Vec<RuleId>,
}

impl TernaryTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule and rebuilds the search structure; returns its id.
    pub fn add(&mut self, rule: Rule) -> Result<RuleId, RuleError> {
        if rule.src.1 > 128 || rule.dst.1 > 128 || rule.sport.0 > rule.sport.1 || rule.dport.0 > rule.dport.1 {
            return Err(RuleError::Malformed);
        }
        let id = u32::try_from(self.rules.len()).map_err(|_| RuleError::Malformed)?;
        self.rules.push(Some(rule));
        self.rebuild();
        Ok(id)
    }

    /// Removes a rule and rebuilds.
    pub fn remove(&mut self, id: RuleId) -> Result<Rule, RuleError> {
        let r = self.rules.get_mut(id as usize).and_then(Option::take).ok_or(RuleError::NotFound)?;
        self.rebuild();
        Ok(r)
    }

    /// Number of rules.
    pub fn len(&self) -> usize {
        self.rules.iter().flatten().count()
    }

    /// Whether there is no rule.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of distinct mask tuples (the search cost).
    pub fn tuple_count(&self) -> usize {
        self.tuples.len()
    }

    fn rebuild(&mut self) {
        // Group rule ids by tuple, then by masked value.
        let mut keyed: Vec<Keyed> = Vec::new();
        for (id, r) in self.rules.iter().enumerate() {
            let Some(r) = r else { continue };
            let key = (mask(r.src.0, r.src.1), mask(r.dst.0, r.dst.1), r.proto.unwrap_or(0));
            keyed.push(((r.src.1, r.dst.1, r.proto.is_some()), key, r.priority, id as RuleId));
        }
        // Within a value: priority descending, then id ascending.
        keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)).then(b.2.cmp(&a.2)).then(a.3.cmp(&b.3)));
        self.tuples.clear();
        self.lists.clear();
        let mut i = 0;
        while i < keyed.len() {
            let t = keyed[i].0;
            let mut j = i;
            while j < keyed.len() && keyed[j].0 == t {
                j += 1;
            }
            let group = &keyed[i..j];
            let values = group.windows(2).filter(|w| w[0].1 != w[1].1).count() + 1;
            let n = (values * 2).next_power_of_two();
            let mut slots = alloc::vec![HashSlot { used: false, src: 0, dst: 0, proto: 0, start: 0, len: 0 }; n];
            let mut best = 0;
            let mut k = 0;
            while k < group.len() {
                let v = group[k].1;
                let start = self.lists.len() as u32;
                while k < group.len() && group[k].1 == v {
                    best = best.max(group[k].2);
                    self.lists.push(group[k].3);
                    k += 1;
                }
                let mut h = hash3(v.0, v.1, v.2) as usize & (n - 1);
                while slots[h].used {
                    h = (h + 1) & (n - 1);
                }
                slots[h] = HashSlot {
                    used: true,
                    src: v.0,
                    dst: v.1,
                    proto: v.2,
                    start,
                    len: self.lists.len() as u32 - start,
                };
            }
            self.tuples.push(Tuple { src_len: t.0, dst_len: t.1, has_proto: t.2, best, slots });
            i = j;
        }
        self.tuples.sort_by_key(|t| core::cmp::Reverse(t.best));
    }

    /// The best rule matching `k` (tuple space search).
    pub fn classify(&self, k: &FlowKey) -> Option<Match> {
        let p = &Point::of(k);
        let mut best: Option<Match> = None;
        for t in &self.tuples {
            if best.is_some_and(|b| b.priority > t.best) {
                break;
            }
            let (s, d, pr) = (mask(p.src, t.src_len), mask(p.dst, t.dst_len), if t.has_proto { p.proto } else { 0 });
            let n = t.slots.len();
            let mut h = hash3(s, d, pr) as usize & (n.wrapping_sub(1));
            for _ in 0..n {
                let Some(slot) = t.slots.get(h) else { break };
                if !slot.used {
                    break;
                }
                if slot.src == s && slot.dst == d && slot.proto == pr {
                    let list = self.lists.get(slot.start as usize..(slot.start + slot.len) as usize).unwrap_or(&[]);
                    for &id in list {
                        let Some(Some(r)) = self.rules.get(id as usize) else { continue };
                        if best.is_some_and(|b| (b.priority, u32::MAX - b.rule) >= (r.priority, u32::MAX - id)) {
                            break; // the list is sorted: nothing later beats the match in hand
                        }
                        if (r.sport.0..=r.sport.1).contains(&p.sport) && (r.dport.0..=r.dport.1).contains(&p.dport) {
                            best = Some(Match { rule: id, action: r.action, priority: r.priority });
                            break;
                        }
                    }
                    break;
                }
                h = (h + 1) & (n - 1);
            }
        }
        best
    }

    /// The reference: a linear scan over every rule.
    pub fn classify_linear(&self, k: &FlowKey) -> Option<Match> {
        let p = &Point::of(k);
        let mut best: Option<Match> = None;
        for (id, r) in self.rules.iter().enumerate() {
            let Some(r) = r else { continue };
            if r.matches_point(p) && best.is_none_or(|b| r.priority > b.priority) {
                best = Some(Match { rule: id as RuleId, action: r.action, priority: r.priority });
            }
        }
        best
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::parse::IpAddr;
    use proptest::prelude::*;
    use std::vec::Vec;

    fn rule() -> impl Strategy<Value = Rule> {
        let addr = prop_oneof![Just(0x0a00_0000u32), Just(0x0a01_0000), Just(0xc0a8_0101), any::<u32>()];
        let len = prop_oneof![Just(0u8), Just(8), Just(16), Just(24), Just(32), 0u8..=32];
        let range = prop_oneof![
            Just((0u16, u16::MAX)),
            (0u16..100).prop_map(|p| (p, p)),
            (0u16..100, 0u16..100).prop_map(|(a, b)| (a.min(b), a.max(b)))
        ];
        let proto = prop_oneof![Just(None), Just(Some(6u8)), Just(Some(17u8))];
        (0u32..20, (addr.clone(), len.clone()), (addr, len), range.clone(), range, proto, any::<u32>())
            .prop_map(|(pri, s, d, sp, dp, pr, a)| Rule::v4(pri, s, d, sp, dp, pr, a))
    }

    fn packet() -> impl Strategy<Value = FlowKey> {
        let addr = prop_oneof![
            (0u32..512).prop_map(|x| 0x0a00_0000 | x),
            (0u32..512).prop_map(|x| 0x0a01_0000 | x),
            Just(0xc0a8_0101),
            any::<u32>()
        ];
        (addr.clone(), addr, 0u16..110, 0u16..110, prop_oneof![Just(6u8), Just(17), Just(1)])
            .prop_map(|(s, d, sp, dp, pr)| FlowKey::v4(s, d, sp, dp, pr))
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(200))]
        #[test]
        fn pna_ternary_matches_linear(rules in proptest::collection::vec(rule(), 0..crate::testing::miri_or(60, 8)),
                                      removals in proptest::collection::vec(any::<usize>(), 0..crate::testing::miri_or(10, 3)),
                                      packets in proptest::collection::vec(packet(), 1..crate::testing::miri_or(40, 6))) {
            let mut t = TernaryTable::new();
            let ids: Vec<RuleId> = rules.iter().map(|r| t.add(*r).expect("well-formed")).collect();
            for r in &removals {
                if !ids.is_empty() {
                    let _ = t.remove(ids[r % ids.len()]);
                }
            }
            for p in &packets {
                prop_assert_eq!(t.classify(p), t.classify_linear(p));
            }
            // Packets built to hit each rule's own prefixes.
            for r in rules.iter() {
                let ip = |a: u128| IpAddr::V4((a as u32).to_be_bytes());
                let p = FlowKey { src: ip(r.src.0), dst: ip(r.dst.0), src_port: r.sport.0, dst_port: r.dport.1, proto: r.proto.unwrap_or(6) };
                prop_assert_eq!(t.classify(&p), t.classify_linear(&p));
            }
        }
    }

    #[test]
    fn pna_ternary_priorities_ranges_and_families() {
        let mut t = TernaryTable::new();
        let deny_all = t.add(Rule::v4(0, (0, 0), (0, 0), (0, u16::MAX), (0, u16::MAX), None, 0)).unwrap();
        let web = t.add(Rule::v4(10, (0x0a00_0000, 8), (0, 0), (0, u16::MAX), (80, 443), Some(6), 1)).unwrap();
        assert_eq!(
            t.add(Rule { sport: (5, 4), ..Rule::v4(1, (0, 0), (0, 0), (0, 0), (0, 0), None, 0) }),
            Err(RuleError::Malformed)
        );
        let p = FlowKey::v4(0x0a01_0203, 0x0808_0808, 40000, 443, 6);
        assert_eq!(t.classify(&p).map(|m| m.rule), Some(web));
        assert_eq!(t.classify(&FlowKey { dst_port: 8080, ..p }).map(|m| m.rule), Some(deny_all));
        let v6 = FlowKey {
            src: IpAddr::V6((0x2001_0db8u128 << 96).to_be_bytes()),
            dst: IpAddr::V6(1u128.to_be_bytes()),
            src_port: 1,
            dst_port: 443,
            proto: 6,
        };
        assert_eq!(t.classify(&v6), None, "v4 rules never match v6 packets");
        assert_eq!(t.tuple_count(), 2);
        assert!(t.remove(web).is_ok());
        assert_eq!(t.remove(web), Err(RuleError::NotFound));
        assert_eq!(t.classify(&p).map(|m| m.rule), Some(deny_all));
    }
}
