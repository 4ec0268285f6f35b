#![cfg(not(loom))]

use std::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::nf::testkit::{frame, run};
use crate::rand::XorShift64;
use crate::time::{Duration, Instant};

/// The reference, written from the rule semantics alone: a linear scan over the `AclRule`s.
fn ref_prefix(p: &Option<Prefix>, a: &IpAddr) -> bool {
    let Some(p) = p else { return true };
    let (pa, x, bits): (u128, u128, u32) = match (p.addr, a) {
        (IpAddr::V4(pa), IpAddr::V4(x)) => (u32::from_be_bytes(pa).into(), u32::from_be_bytes(*x).into(), 32),
        (IpAddr::V6(pa), IpAddr::V6(x)) => (u128::from_be_bytes(pa), u128::from_be_bytes(*x), 128),
        _ => return false,
    };
    let len = u32::from(p.len);
    len == 0 || (pa >> (bits - len)) == (x >> (bits - len))
}

fn ref_verdict(rules: &[AclRule], default: AclAction, f: &FlowKey) -> AclAction {
    ref_position(rules, f).and_then(|i| rules.get(i as usize)).map_or(default, |r| r.action)
}

/// The position of the rule that decides `f` in `rules` (highest priority, then first), for
/// an untagged frame.
fn ref_position(rules: &[AclRule], f: &FlowKey) -> Option<u32> {
    ref_position_on(rules, f, 0)
}

/// [`ref_verdict`] of a frame that arrived with VLAN ID `vid` (0: none).
fn ref_verdict_on(rules: &[AclRule], default: AclAction, f: &FlowKey, vid: u16) -> AclAction {
    ref_position_on(rules, f, vid).and_then(|i| rules.get(i as usize)).map_or(default, |r| r.action)
}

/// [`ref_position`] of a frame that arrived with VLAN ID `vid` (0: none).
fn ref_position_on(rules: &[AclRule], f: &FlowKey, vid: u16) -> Option<u32> {
    let mut best: Option<(usize, &AclRule)> = None;
    for (i, r) in rules.iter().enumerate() {
        let m = r.vlan.is_none_or(|v| v == vid)
            && ref_prefix(&r.src, &f.src)
            && ref_prefix(&r.dst, &f.dst)
            && (r.sport.0..=r.sport.1).contains(&f.src_port)
            && (r.dport.0..=r.dport.1).contains(&f.dst_port)
            && r.proto.is_none_or(|p| p == f.proto);
        if m && best.is_none_or(|(_, b)| r.priority > b.priority) {
            best = Some((i, r));
        }
    }
    best.map(|(i, _)| i as u32)
}

/// A random address inside `p` (or anywhere of `family6`'s family when `p` is `None`).
fn addr_in(rng: &mut XorShift64, p: &Option<Prefix>, family6: bool) -> IpAddr {
    let r = u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64());
    match p {
        Some(Prefix { addr: IpAddr::V4(a), len }) => {
            let m = if *len == 0 { 0 } else { u32::MAX << (32 - u32::from(*len)) };
            IpAddr::V4((u32::from_be_bytes(*a) & m | (r as u32) & !m).to_be_bytes())
        }
        Some(Prefix { addr: IpAddr::V6(a), len }) => {
            let m = if *len == 0 { 0 } else { u128::MAX << (128 - u32::from(*len)) };
            IpAddr::V6((u128::from_be_bytes(*a) & m | r & !m).to_be_bytes())
        }
        None if family6 => IpAddr::V6((0x2001_0db8u128 << 96 | r >> 40).to_be_bytes()),
        None => IpAddr::V4(((0x0a00_0000 | (r as u32 & 0x00ff_ffff)) ^ (r as u32 >> 31 << 30)).to_be_bytes()),
    }
}

/// Packets aimed at the rules (inside their prefixes, at or next to their port bounds) and
/// some at random, TCP or UDP.
fn flows_for(rules: &[AclRule], rng: &mut XorShift64, n: usize) -> Vec<FlowKey> {
    (0..n)
        .map(|_| {
            let pick = rng.next_u64();
            let r =
                rules.get(pick as usize % rules.len().max(1)).copied().unwrap_or(AclRule::any(0, AclAction::Permit));
            let aimed = pick >> 32 & 3 != 0;
            let v6 = matches!(r.src.or(r.dst), Some(Prefix { addr: IpAddr::V6(_), .. }))
                || (r.src.or(r.dst).is_none() && pick >> 40 & 1 == 1);
            let (sp, dp) = if aimed { (r.src, r.dst) } else { (None, None) };
            let port = |rng: &mut XorShift64, range: (u16, u16)| match rng.next_u64() % 5 {
                0 => range.0,
                1 => range.1,
                2 => range.0.wrapping_sub(1),
                3 => range.1.wrapping_add(1),
                _ => rng.next_u64() as u16,
            };
            FlowKey {
                src: addr_in(rng, &sp, v6),
                dst: addr_in(rng, &dp, v6),
                src_port: port(rng, r.sport),
                dst_port: port(rng, r.dport),
                proto: if pick >> 50 & 1 == 0 { r.proto.unwrap_or(6) } else { [6, 17][(pick >> 51 & 1) as usize] },
            }
        })
        .collect()
}

/// `cfg` with every packet through the flow cache (the tests of the cache itself).
fn cached(cfg: AclConfig) -> AclConfig {
    AclConfig { always_cache: true, ..cfg }
}

fn frame_of(f: &FlowKey) -> Vec<u8> {
    frame(f.src, f.dst, f.proto, f.src_port, f.dst_port, b"acl")
}

/// `frame` with an 802.1Q tag of `vid` after its MACs (0: unchanged).
fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    if vid == 0 {
        return frame.to_vec();
    }
    [&frame[..12], &crate::vlan::TPID.to_be_bytes()[..], &vid.to_be_bytes()[..], &frame[12..]].concat()
}

/// `rules` with some of them (a third, picked by `seed`) for VLAN 100 or 200 only.
fn some_for_vlans(mut rules: Vec<AclRule>, seed: u64) -> Vec<AclRule> {
    let mut rng = XorShift64::from_state(seed ^ 0x71a);
    for r in &mut rules {
        r.vlan = [None, None, None, None, Some(100), Some(200)][(rng.next_u64() % 6) as usize];
    }
    rules
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(12))]
    /// 1.5k random rules (or 200, half the cases: a set whose cross tables fit, so that the NF
    /// classifies IPv4 packets directly): the classifier, the shared classify and the NF (first
    /// packet classified, second from the cache) all agree with the linear reference.
    #[test]
    fn acl_matches_linear_reference_with_1500_rules(seed in any::<u64>(), deny_default in any::<bool>()) {
        let n = if seed & 1 == 0 { 1500 } else { 200 };
        let rules = example_rules(seed, crate::testing::miri_or(n, 30));
        let default = if deny_default { AclAction::Deny } else { AclAction::Permit };
        let shared = Arc::new(AclShared::try_new(&AclConfig::new(rules.clone(), default)).unwrap());
        let mut rng = XorShift64::from_state(seed ^ 0x5eed);
        let flows = flows_for(&rules, &mut rng, crate::testing::miri_or(160, 8));
        let expected: Vec<AclAction> = flows.iter().map(|f| ref_verdict(&rules, default, f)).collect();
        // Both classifiers, whichever the set's size picks: the bit vectors and the tuples.
        let now = shared.rules();
        let tuples = [false, true].map(|v6| Classifier::tuples(now.classifier(v6).rules().to_vec()));
        let bits = [false, true].map(|v6| BitVec::try_new(now.classifier(v6).rules(), 64 << 20));
        for (f, e) in flows.iter().zip(&expected) {
            let v6 = matches!(f.src, IpAddr::V6(_));
            let c = now.classifier(v6);
            prop_assert_eq!(c.classify(f), c.classify_linear(f));
            prop_assert_eq!(tuples[usize::from(v6)].classify(f), c.classify_linear(f));
            if let Some(bv) = &bits[usize::from(v6)] {
                prop_assert_eq!(bv.classify(f), c.classify_linear(f));
            }
            prop_assert_eq!(shared.classify(f).0, *e);
        }
        let frames: Vec<Vec<u8>> = flows.iter().map(frame_of).collect();
        let v4 = flows.iter().filter(|f| matches!(f.src, IpAddr::V4(_))).count() as u64;
        // Through the cache only, then with IPv4 packets classified directly where the
        // cross tables answer them: the same verdicts either way.
        for always_cache in [true, false] {
            let cfg = AclConfig { always_cache, ..AclConfig::new(rules.clone(), default) };
            let shared = Arc::new(AclShared::try_new(&cfg).unwrap());
            let direct = !always_cache && shared.rules().classifies_v4_by_cross_tables();
            let mut acl = Acl::new(shared.clone());
            for (pass, now) in [(0, Instant(1)), (1, Instant(2))] {
                let out = run(&mut acl, &frames, 0, now);
                for (o, e) in out.iter().zip(&expected) {
                    let want = match e {
                        AclAction::Permit => Verdict::Forward(1),
                        AclAction::Deny => Verdict::Drop(DropReason::AclDeny),
                    };
                    prop_assert_eq!(o.verdict, want, "pass {} always_cache {}", pass, always_cache);
                }
            }
            let c = *acl.counters();
            let denied = expected.iter().filter(|e| **e == AclAction::Deny).count() as u64;
            prop_assert_eq!(c.denied, 2 * denied);
            prop_assert_eq!(c.permitted + c.denied, 2 * flows.len() as u64);
            prop_assert_eq!(c.cache_add_failed, 0);
            // Duplicate flows within the first batch hit the cache already; every flow the
            // cache sees is classified exactly once.
            let mut uniq: Vec<FlowKey> = flows.iter().filter(|f| !direct || matches!(f.src, IpAddr::V6(_))).copied().collect();
            let through_cache = uniq.len() as u64;
            uniq.sort();
            uniq.dedup();
            prop_assert_eq!(c.direct, if direct { 2 * v4 } else { 0 });
            prop_assert_eq!(c.classified, uniq.len() as u64);
            prop_assert_eq!(c.cache_hits, 2 * through_cache - uniq.len() as u64);
        }
        prop_assert!(shared.rules().classifier(false).tuple_count() <= 2 * 17 * 17);
        prop_assert_eq!(shared.rules().classifier(false).len() + shared.rules().classifier(true).len()
            - rules.iter().filter(|r| r.src.is_none() && r.dst.is_none()).count(), rules.len());
    }

    /// Small rule sets with many equal priorities: ties go to the earlier rule.
    #[test]
    fn acl_ties_and_overlaps_match_reference(
        rules in proptest::collection::vec(
            (0u32..3, 0usize..6, 0usize..6, 0u16..4, prop_oneof![Just(None), Just(Some(6u8)), Just(Some(17u8))], any::<bool>()),
            0..crate::testing::miri_or(80, 10)),
        seed in any::<u64>())
    {
        let prefixes = [None, Some(Prefix::v4([10, 0, 0, 0], 8)), Some(Prefix::v4([10, 1, 0, 0], 16)),
            Some(Prefix::v4([10, 1, 2, 0], 24)), Some(Prefix::v4([10, 1, 2, 3], 32)), Some(Prefix::v4([10, 1, 2, 0], 23))];
        let rules: Vec<AclRule> = rules.iter().map(|&(pri, s, d, pr, proto, permit)| AclRule {
            priority: pri,
            src: prefixes[s].filter(|p| p.len != 23),
            dst: prefixes[d].map(|p| if p.len == 23 { Prefix::v4([10, 1, 2, 0], 23) } else { p }),
            sport: (0, u16::MAX),
            dport: [(0, u16::MAX), (80, 80), (0, 1023), (443, 8443)][pr as usize],
            proto,
            vlan: None,
            action: if permit { AclAction::Permit } else { AclAction::Deny },
        }).collect();
        let cfg = AclConfig::new(rules.clone(), AclAction::Deny);
        prop_assert_eq!(cfg.validate(), Ok(()));
        let shared = AclShared::try_new(&cfg).unwrap();
        let mut rng = XorShift64::from_state(seed);
        let tuples = Classifier::tuples(shared.rules().classifier(false).rules().to_vec());
        for f in flows_for(&rules, &mut rng, crate::testing::miri_or(64, 8)) {
            let now = shared.rules();
            let c = now.classifier(false);
            prop_assert_eq!(c.classify(&f), c.classify_linear(&f));
            prop_assert_eq!(tuples.classify(&f), c.classify_linear(&f));
            prop_assert_eq!(shared.classify(&f).0, ref_verdict(&rules, AclAction::Deny, &f));
        }
    }
}

/// IPv4 packets skip the flow cache while the cross tables answer them, IPv6 packets take it,
/// and a deleted rule (its run's tables no longer answer) sends IPv4 packets back through it
/// until the merge; the verdicts follow the rules in force throughout.
#[test]
fn ipv4_packets_skip_the_cache_while_the_cross_tables_answer() {
    let web = AclRule { dport: (80, 80), proto: Some(6), ..AclRule::any(10, AclAction::Permit) };
    let ssh = AclRule { dst: Some(Prefix::v4([10, 0, 0, 0], 8)), dport: (22, 22), ..AclRule::any(20, AclAction::Deny) };
    let v6 = AclRule {
        src: Some(Prefix { addr: IpAddr::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]), len: 32 }),
        ..AclRule::any(5, AclAction::Permit)
    };
    let shared = Arc::new(AclShared::try_new(&AclConfig::new(vec![web, ssh, v6], AclAction::Deny)).unwrap());
    assert!(shared.rules().classifies_v4_by_cross_tables());
    let mut acl = Acl::new(shared.clone());
    let a4 = |x: u8| IpAddr::V4([10, 0, 0, x]);
    let a6 = |x: u8| IpAddr::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, x]);
    let frames = [
        frame(a4(1), a4(2), 6, 1000, 80, b"x"),  // web: permit
        frame(a4(1), a4(2), 6, 1000, 22, b"x"),  // ssh to 10/8: deny
        frame(a4(1), a4(2), 17, 1000, 53, b"x"), // nothing: default deny
        frame(a6(1), a6(2), 17, 1000, 53, b"x"), // the IPv6 rule: permit
    ];
    let want = [
        Verdict::Forward(1),
        Verdict::Drop(DropReason::AclDeny),
        Verdict::Drop(DropReason::AclDeny),
        Verdict::Forward(1),
    ];
    let out = run(&mut acl, &frames, 0, Instant(1));
    assert_eq!(out.iter().map(|o| o.verdict).collect::<Vec<_>>(), want);
    let c = *acl.counters();
    assert_eq!((c.direct, c.classified, c.cache_hits, c.defaulted), (3, 1, 0, 1));
    // Delete the ssh rule: its run's tables stop answering, IPv4 goes through the cache.
    shared.delete_rule(1).unwrap();
    assert!(!shared.rules().classifies_v4_by_cross_tables());
    let out = run(&mut acl, &frames, 0, Instant(2));
    assert_eq!(out.get(1).map(|o| o.verdict), Some(Verdict::Drop(DropReason::AclDeny)), "now the default");
    assert_eq!(out.first().map(|o| o.verdict), Some(Verdict::Forward(1)));
    let c = *acl.counters();
    // The three IPv4 flows are new to the cache; the IPv6 flow's cached verdict predates the
    // delete and is decided again.
    assert_eq!((c.direct, c.classified, c.reclassified, c.cache_hits), (3, 1 + 3, 1, 0));
}

/// Two packets of one new flow in the same burst: the first is classified and cached, the
/// second counts as a cache hit (its flow is cached by then) — not as a second new flow, and
/// not as nothing (the proptest above found the burst's duplicates counted nowhere).
#[test]
fn a_new_flows_second_packet_in_the_same_burst_counts_as_a_cache_hit() {
    let shared = Arc::new(
        AclShared::try_new(&cached(AclConfig::new(vec![AclRule::any(1, AclAction::Deny)], AclAction::Permit))).unwrap(),
    );
    let mut acl = Acl::new(shared);
    let f = frame(IpAddr::V4([10, 0, 0, 1]), IpAddr::V4([10, 0, 0, 2]), 6, 1000, 80, b"x");
    let g = frame(IpAddr::V4([10, 0, 0, 3]), IpAddr::V4([10, 0, 0, 2]), 6, 1000, 80, b"x");
    let out = run(&mut acl, &[f.clone(), g, f], 0, Instant(1));
    assert!(out.iter().all(|o| o.verdict == Verdict::Drop(DropReason::AclDeny)));
    let c = *acl.counters();
    assert_eq!((c.classified, c.cache_hits, c.denied), (2, 1, 3));
}

#[test]
fn acl_validation_names_the_rule_and_field() {
    let ok = AclRule::any(1, AclAction::Deny);
    let check = |r: AclRule| AclConfig::new(vec![ok, r], AclAction::Permit).validate();
    assert_eq!(
        check(AclRule { src: Some(Prefix::v4([10, 0, 0, 0], 33)), ..ok }),
        Err(AclConfigError::BadPrefixLen { rule: 1, field: AclField::Src })
    );
    assert_eq!(
        check(AclRule { dst: Some(Prefix::v6([0x20; 16], 129)), ..ok }),
        Err(AclConfigError::BadPrefixLen { rule: 1, field: AclField::Dst })
    );
    assert_eq!(
        check(AclRule { dst: Some(Prefix::v4([10, 0, 0, 1], 24)), ..ok }),
        Err(AclConfigError::HostBitsSet { rule: 1, field: AclField::Dst })
    );
    assert_eq!(
        check(AclRule { src: Some(Prefix::v4([10, 0, 0, 0], 8)), dst: Some(Prefix::v6([0; 16], 0)), ..ok }),
        Err(AclConfigError::FamilyMismatch { rule: 1 })
    );
    assert_eq!(
        check(AclRule { sport: (10, 9), ..ok }),
        Err(AclConfigError::EmptyPortRange { rule: 1, field: AclField::SrcPort })
    );
    assert_eq!(
        check(AclRule { dport: (10, 9), ..ok }),
        Err(AclConfigError::EmptyPortRange { rule: 1, field: AclField::DstPort })
    );
    let mut cfg = AclConfig::new(vec![ok], AclAction::Permit);
    cfg.flow_capacity = 0;
    assert_eq!(AclShared::try_new(&cfg).err(), Some(AclConfigError::ZeroFlowCapacity));
    cfg.flow_capacity = 8;
    cfg.flow_timeout = Duration(0);
    assert_eq!(cfg.validate(), Err(AclConfigError::ZeroFlowTimeout));
    assert_eq!(
        AclConfig::new(vec![ok; MAX_RULES + 1], AclAction::Permit).validate(),
        Err(AclConfigError::TooManyRules { count: MAX_RULES + 1 })
    );
    let e = AclConfigError::HostBitsSet { rule: 7, field: AclField::Src };
    assert_eq!(std::format!("{e}"), "rule 7: src has bits set beyond its length");
    // The example rule sets are valid.
    assert_eq!(
        AclConfig::new(example_rules(42, crate::testing::miri_or(1500, 40)), AclAction::Deny).validate(),
        Ok(())
    );
}

#[test]
fn acl_cache_entries_expire_and_flows_are_reclassified() {
    let web = AclRule { dport: (80, 80), proto: Some(6), ..AclRule::any(5, AclAction::Permit) };
    let mut cfg = cached(AclConfig::new(vec![web], AclAction::Deny));
    cfg.flow_timeout = Duration(100);
    let shared = Arc::new(AclShared::try_new(&cfg).unwrap());
    let mut acl = Acl::new(shared.clone());
    let (a, b) = (IpAddr::V4([10, 0, 0, 1]), IpAddr::V4([10, 0, 0, 2]));
    let frames = [frame(a, b, 6, 1000, 80, b""), frame(a, b, 17, 1000, 80, b""), frame(a, b, 1, 0, 0, b"pingpong")];
    let out = run(&mut acl, &frames, 0, Instant(0));
    let v: Vec<_> = out.iter().map(|o| o.verdict).collect();
    assert_eq!(v, [Verdict::Forward(1), Verdict::Drop(DropReason::AclDeny), Verdict::Drop(DropReason::AclDeny)]);
    assert_eq!(acl.counters().classified, 3);
    assert_eq!(acl.counters().defaulted, 2);
    assert_eq!(shared.cached_flows(Instant(0)), 3);
    run(&mut acl, &frames, 0, Instant(99));
    assert_eq!((acl.counters().classified, acl.counters().cache_hits), (3, 3));
    assert_eq!(shared.cached_flows(Instant(100)), 0, "hard timeout of 100 ticks from classification");
    let out = run(&mut acl, &frames, 0, Instant(100));
    assert_eq!(out[0].verdict, Verdict::Forward(1));
    assert_eq!((acl.counters().classified, acl.counters().cache_hits), (6, 3));
    let mut s = String::new();
    acl.write_counters(&mut s).unwrap();
    assert!(s.starts_with(" acl_permitted=3 acl_denied=6 acl_cache_hits=3 acl_classified=6"), "{s}");
}

#[test]
fn packets_of_one_new_flow_in_one_burst_are_classified_once() {
    let rule = AclRule { proto: Some(17), ..AclRule::any(1, AclAction::Deny) };
    let mut acl =
        Acl::new(Arc::new(AclShared::try_new(&cached(AclConfig::new(vec![rule], AclAction::Permit))).unwrap()));
    let (a, b) = (IpAddr::V4([10, 0, 0, 1]), IpAddr::V4([10, 0, 0, 2]));
    // Three packets of one TCP flow and two of one UDP flow, all new, in one burst.
    let frames: Vec<_> = [6, 6, 17, 6, 17].iter().map(|&p| frame(a, b, p, 1000, 80, b"")).collect();
    let out = run(&mut acl, &frames, 0, Instant(0));
    let denied = out.iter().filter(|o| o.verdict == Verdict::Drop(DropReason::AclDeny)).count();
    assert_eq!(denied, 2);
    let c = acl.counters();
    assert_eq!((c.classified, c.cache_add_failed, c.permitted, c.denied), (2, 0, 3, 2));
}

#[test]
fn acl_full_cache_still_decides() {
    let mut cfg = cached(AclConfig::new(
        vec![AclRule { proto: Some(17), ..AclRule::any(1, AclAction::Deny) }],
        AclAction::Permit,
    ));
    cfg.flow_capacity = 2;
    let mut acl = Acl::new(Arc::new(AclShared::try_new(&cfg).unwrap()));
    let frames: Vec<_> = (0..40u16)
        .map(|i| frame(IpAddr::V4([10, 0, 0, 1]), IpAddr::V4([10, 0, 0, 2]), [6, 17][usize::from(i % 2)], i, 80, b""))
        .collect();
    let out = run(&mut acl, &frames, 0, Instant(0));
    for (i, o) in out.iter().enumerate() {
        let want = if i % 2 == 1 { Verdict::Drop(DropReason::AclDeny) } else { Verdict::Forward(1) };
        assert_eq!(o.verdict, want);
    }
    assert_eq!(acl.counters().cache_add_failed, 38);
    assert_eq!(acl.counters().classified, 40);
}

#[test]
fn rules_changed_live_take_effect_at_the_next_batch_and_cached_flows_follow() {
    let shared = Arc::new(AclShared::try_new(&AclConfig::new(Vec::new(), AclAction::Permit)).unwrap());
    let mut acl = Acl::new(shared.clone());
    let (a, b, c) = (IpAddr::V4([10, 0, 0, 1]), IpAddr::V4([10, 0, 0, 2]), IpAddr::V4([10, 0, 0, 3]));
    let frames = [frame(a, b, 6, 1000, 80, b""), frame(a, c, 6, 1000, 80, b"")];
    let v = |out: &[crate::nf::testkit::Out]| out.iter().map(|o| o.verdict).collect::<Vec<_>>();
    assert_eq!(v(&run(&mut acl, &frames, 0, Instant(0))), [Verdict::Forward(1), Verdict::Forward(1)]);
    assert_eq!(shared.cached_flows(Instant(0)), 2);
    // Deny traffic to b: the cached permit is decided again at the flow's next packet.
    let deny_b = AclRule { dst: Some(Prefix::v4([10, 0, 0, 2], 32)), ..AclRule::any(10, AclAction::Deny) };
    let (id, old) = shared.add_rule(deny_b).unwrap();
    assert_eq!((id, old.generation(), shared.rules().generation()), (0, 0, 1));
    let deny = Verdict::Drop(DropReason::AclDeny);
    assert_eq!(v(&run(&mut acl, &frames, 0, Instant(1))), [deny, Verdict::Forward(1)]);
    assert_eq!((acl.counters().reclassified, acl.counters().cache_hits), (2, 0));
    // Later packets hit the re-cached verdicts.
    assert_eq!(v(&run(&mut acl, &frames, 0, Instant(2))), [deny, Verdict::Forward(1)]);
    assert_eq!((acl.counters().reclassified, acl.counters().cache_hits), (2, 2));
    // Removing the rule lets b through again.
    let (gone, _) = shared.delete_rule(0).unwrap();
    assert_eq!(gone, deny_b);
    assert_eq!(v(&run(&mut acl, &frames, 0, Instant(3))), [Verdict::Forward(1), Verdict::Forward(1)]);
    assert_eq!(shared.rules().rules(), &[] as &[AclRule]);
    // Bad changes are refused and change nothing.
    assert_eq!(shared.delete_rule(0).err(), Some(AclConfigError::NoSuchRule { rule: 0 }));
    let bad = AclRule { src: Some(Prefix::v4([10, 0, 0, 1], 8)), ..AclRule::any(1, AclAction::Deny) };
    assert_eq!(shared.add_rule(bad).err(), Some(AclConfigError::HostBitsSet { rule: 0, field: AclField::Src }));
    assert_eq!(shared.rules().generation(), 2);
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(16))]
    /// Rules added and deleted one at a time, with merges started, stepped and finished in
    /// between (and stale merges dropped after a rebuild): after every change each flow gets
    /// the verdict and the deciding rule's position that the reference gives over the rules in
    /// force — whether its rule sits in the base, the delta, or was deleted from the base.
    #[test]
    fn rule_changes_and_background_merges_answer_as_the_reference(
        seed in any::<u64>(),
        ops in proptest::collection::vec((0u8..10, any::<u64>()), 1..crate::testing::miri_or(120, 12)),
    ) {
        // Two groups' worth of rules (the first holds 1 024), so deletes hit both; or one
        // run of at most 128 rules (the classifier's direct path, no summary words).
        let n = if seed % 2 == 0 { 1100 } else { 100 };
        let (mut start, mut extra) = (example_rules(seed, crate::testing::miri_or(n, 20)), example_rules(seed ^ 0xadd, 200));
        // A third of the cases: rules of VLANs 100 and 200 among them (each its own scope;
        // the first rule of VLAN 300 comes by an add, which rebuilds).
        if seed % 3 == 0 {
            start = some_for_vlans(start, seed);
            extra = some_for_vlans(extra, seed ^ 1);
            if let Some(r) = extra.get_mut(7) {
                r.vlan = Some(300);
            }
        }
        let shared = AclShared::try_new(&AclConfig::new(start.clone(), AclAction::Deny)).unwrap();
        let mut model = start;
        let mut merge: Option<Merge> = None;
        let mut rng = XorShift64::from_state(seed ^ 0xf10);
        for (op, x) in ops {
            match op {
                0..=3 => {
                    let r = extra[x as usize % extra.len()];
                    let (pos, _) = shared.add_rule(r).unwrap();
                    prop_assert_eq!(pos, model.len());
                    model.push(r);
                }
                4..=6 if !model.is_empty() => {
                    let pos = x as usize % model.len();
                    let (gone, _) = shared.delete_rule(pos).unwrap();
                    prop_assert_eq!(gone, model.remove(pos));
                }
                7 => merge = merge.or_else(|| shared.start_merge()),
                // A merge with no change while it is built leaves nothing pending.
                8 if merge.is_none() && x % 2 == 0 => if let Some(mut m) = shared.start_merge() {
                    while !m.step() {}
                    prop_assert!(shared.finish_merge(m).is_some());
                    prop_assert_eq!(shared.rules().pending(), (0, 0));
                },
                8 => if let Some(m) = merge.as_mut() { m.step(); },
                _ => if let Some(mut m) = merge.take() {
                    while !m.step() {}
                    let generation = shared.rules().generation();
                    if shared.finish_merge(m).is_some() {
                        prop_assert_eq!(shared.rules().generation(), generation);
                    }
                },
            }
            let now = shared.rules();
            prop_assert!(now.pending().0 <= 2 * DELTA_MAX * (1 + now.vlans().len()));
            let flows = flows_for(&model, &mut rng, crate::testing::miri_or(24, 4));
            let mut burst = vec![(AclAction::Permit, None); flows.len()];
            now.classify_burst(&flows, &mut burst);
            for (f, b) in flows.iter().zip(&burst) {
                let want = (ref_verdict(&model, AclAction::Deny, f), ref_position(&model, f));
                prop_assert_eq!(now.classify(f), want, "{:?}", f);
                prop_assert_eq!(*b, want, "burst {:?}", f);
                for vid in [100, 200, 300, 400] {
                    let want = (ref_verdict_on(&model, AclAction::Deny, f, vid), ref_position_on(&model, f, vid));
                    prop_assert_eq!(now.classify_on(f, vid), want, "vlan {} {:?}", vid, f);
                }
            }
        }
    }
}

#[test]
fn a_full_delta_rebuilds_and_a_merge_it_overtook_is_dropped() {
    let shared = AclShared::try_new(&AclConfig::new(example_rules(7, 40), AclAction::Permit)).unwrap();
    let add = |i: u16| AclRule { dport: (i, i), proto: Some(17), ..AclRule::any(1000, AclAction::Deny) };
    shared.add_rule(add(0)).unwrap();
    let stale = shared.start_merge().expect("a change is pending");
    for i in 1..DELTA_MAX as u16 {
        shared.add_rule(add(i)).unwrap();
    }
    assert_eq!(shared.rules().pending(), (2 * DELTA_MAX, 0), "any-address rules join both families");
    // The next add finds the delta full: the classifiers are rebuilt, nothing is pending.
    let generation = shared.rules().generation();
    shared.add_rule(add(DELTA_MAX as u16)).unwrap();
    assert_eq!(shared.rules().pending(), (0, 0));
    assert_eq!(shared.rules().generation(), generation + 1);
    assert!(shared.finish_merge(stale).is_none(), "built from a base since replaced");
    let f = FlowKey {
        src: IpAddr::V4([10, 0, 0, 1]),
        dst: IpAddr::V4([10, 0, 0, 2]),
        src_port: 5,
        dst_port: DELTA_MAX as u16,
        proto: 17,
    };
    assert_eq!(shared.classify(&f), (AclAction::Deny, Some(40 + DELTA_MAX as u32)));
    assert!(shared.start_merge().is_none(), "nothing to merge after a rebuild");
}

#[test]
fn a_merge_changes_no_verdict_and_keeps_cached_ones() {
    let shared = Arc::new(AclShared::try_new(&cached(AclConfig::new(Vec::new(), AclAction::Permit))).unwrap());
    let mut acl = Acl::new(shared.clone());
    let (a, b, c) = (IpAddr::V4([10, 0, 0, 1]), IpAddr::V4([10, 0, 0, 2]), IpAddr::V4([10, 0, 0, 3]));
    let frames = [frame(a, b, 6, 1000, 80, b""), frame(a, c, 6, 1000, 80, b"")];
    let deny_b = AclRule { dst: Some(Prefix::v4([10, 0, 0, 2], 32)), ..AclRule::any(10, AclAction::Deny) };
    shared.add_rule(deny_b).unwrap();
    let deny = Verdict::Drop(DropReason::AclDeny);
    let v = |out: &[crate::nf::testkit::Out]| out.iter().map(|o| o.verdict).collect::<Vec<_>>();
    assert_eq!(v(&run(&mut acl, &frames, 0, Instant(0))), [deny, Verdict::Forward(1)]);
    assert_eq!(shared.rules().pending(), (1, 0));
    let mut m = shared.start_merge().unwrap();
    while !m.step() {}
    let old = shared.finish_merge(m).unwrap();
    assert_eq!((old.pending(), shared.rules().pending()), ((1, 0), (0, 0)));
    assert_eq!(v(&run(&mut acl, &frames, 0, Instant(1))), [deny, Verdict::Forward(1)]);
    let c = acl.counters();
    assert_eq!((c.classified, c.reclassified, c.cache_hits), (2, 0, 2), "the cached verdicts still hold");
}

/// One frame of a mixed batch for the vector path: flow `f`'s frame as it is (kinds 0–3, the
/// common frame of either family), or one the vector loop must leave to the batch path — a bad
/// IPv4 header checksum (4), an IPv4 first fragment (5: valid, the general parser's), an IPv6
/// hop-by-hop header in front of the transport header (4: valid, the general parser's), an
/// IPv6 payload length past the frame (5) — or a runt (6).
fn mixed_frame(f: &FlowKey, kind: u8) -> Vec<u8> {
    let mut b = frame_of(f);
    let v4 = matches!(f.src, IpAddr::V4(_));
    match kind % 7 {
        4 if v4 => b[24] ^= 0x40,
        5 if v4 => {
            b[20] |= 0x20;
            b[24..26].fill(0);
            let c = crate::checksum::checksum(&b[14..34]);
            b[24..26].copy_from_slice(&c.to_be_bytes());
        }
        4 => {
            let next = b[20];
            b[20] = 0; // hop-by-hop, 8 bytes, then the transport header
            b.splice(54..54, [next, 0, 1, 4, 0, 0, 0, 0]);
            let len = u16::from_be_bytes([b[18], b[19]]) + 8;
            b[18..20].copy_from_slice(&len.to_be_bytes());
        }
        5 => {
            let len = u16::from_be_bytes([b[18], b[19]]) + 1;
            b[18..20].copy_from_slice(&len.to_be_bytes());
        }
        6 => b.truncate(30),
        _ => {}
    }
    b
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(48))]

    /// A chain of the ACL alone takes common IPv4 frames by its vector loop (`Nf::run_vector`):
    /// it sends the same frames, in the same order and with the same bytes, and counts the
    /// same drops by reason and the same ACL counters as the batch path (the ACL followed by
    /// an NF without a vector loop), on batches mixing IPv4 and IPv6 flows (IPv6 through the
    /// flow cache, on both paths) with frames the loop leaves to the batch path; with a rule deleted (the cross tables then do not
    /// answer, and the whole batch takes the batch path and the cache) as well.
    #[test]
    fn the_acl_vector_path_is_the_batch_path(
        seed in any::<u64>(),
        kinds in proptest::collection::vec(any::<u8>(), 1..=crate::buf::BATCH_SIZE),
        deny_default in any::<bool>(),
        delete in any::<bool>(),
    ) {
        use crate::nf::testkit::{Passive, run_chain};
        let rules = example_rules(seed, crate::testing::miri_or(100, 12));
        let default = if deny_default { AclAction::Deny } else { AclAction::Permit };
        let mut rng = XorShift64::from_state(seed ^ 0xacc);
        let flows = flows_for(&rules, &mut rng, kinds.len());
        let frames: Vec<Vec<u8>> = flows.iter().zip(&kinds).map(|(f, &k)| mixed_frame(f, k)).collect();
        let egress = || crate::nf::Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], crate::nf::Egress::DEFAULT_PEERS, None);
        let shared = |rules: &[AclRule]| {
            let s = Arc::new(AclShared::try_new(&AclConfig::new(rules.to_vec(), default)).unwrap());
            if delete {
                s.delete_rule(0).unwrap();
            }
            s
        };
        let mut vector = crate::nf::Chain::new(vec![Box::new(Acl::new(shared(&rules)))], egress());
        let mut batch = crate::nf::Chain::new(vec![Box::new(Acl::new(shared(&rules))), Box::new(Passive)], egress());
        prop_assert!(vector.is_vector() && !batch.is_vector());
        let (a, b) = (run_chain(&mut vector, &frames), run_chain(&mut batch, &frames));
        prop_assert_eq!(a, b);
    }
}

/// The vector loop decides as the rules say (a case with a known answer, so that the
/// equivalence above compares something), counts its packets as classified directly, and is
/// not used while the cross tables do not answer or when every packet must take the cache.
#[test]
fn the_acl_vector_loop_sends_permitted_and_drops_denied() {
    use crate::nf::testkit::run_chain;
    let web = AclRule { dport: (80, 80), proto: Some(6), ..AclRule::any(10, AclAction::Permit) };
    let ssh = AclRule { dport: (22, 22), ..AclRule::any(20, AclAction::Deny) };
    let cfg = AclConfig::new(vec![web, ssh], AclAction::Permit);
    let egress = || {
        crate::nf::Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], crate::nf::Egress::DEFAULT_PEERS, None)
    };
    let shared = Arc::new(AclShared::try_new(&cfg).unwrap());
    let mut chain = crate::nf::Chain::new(vec![Box::new(Acl::new(shared.clone()))], egress());
    assert!(chain.is_vector());
    let a4 = |x: u8| IpAddr::V4([10, 0, 0, x]);
    let a6 = |x: u8| IpAddr::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, x]);
    let frames = [
        frame(a4(1), a4(2), 6, 1000, 80, b"x"),  // web: permit
        frame(a4(1), a4(2), 6, 1000, 22, b"x"),  // ssh: deny
        frame(a6(1), a6(2), 6, 1000, 22, b"x"),  // ssh over IPv6: deny (through the cache)
        frame(a6(1), a6(2), 6, 1000, 80, b"x"),  // web over IPv6: permit (through the cache)
        frame(a4(3), a4(2), 6, 1001, 80, b"x"),  // web: permit
        frame(a4(1), a4(2), 17, 1000, 53, b"x"), // nothing: default permit
    ];
    let ([to0, to1], drops, text) = run_chain(&mut chain, &frames);
    assert!(to0.is_empty());
    assert_eq!(to1.len(), 4);
    // The other port's link header: its peer as destination, its own MAC as source.
    assert_eq!(to1[0][..12], [crate::nf::Egress::DEFAULT_PEERS[1], [2, 0, 0, 0, 0, 0x11]].concat()[..]);
    assert_eq!(to1[1][..12], to1[0][..12]);
    for (sent, i) in to1.iter().zip([0, 3, 4, 5]) {
        assert_eq!(sent[12..], frames[i][12..], "frame {i}, in order");
    }
    assert_eq!(drops[DropReason::AclDeny as usize], 2);
    assert!(text.contains(" acl_permitted=4 acl_denied=2 acl_cache_hits=0 acl_classified=2 acl_defaulted=1"), "{text}");
    assert!(text.contains(" acl_direct=4"), "{text}");
    // The IPv6 flows are cached now: hits.
    let (_, _, text) = run_chain(&mut chain, &frames[2..4]);
    assert!(text.contains(" acl_cache_hits=2 acl_classified=2"), "{text}");
    // A rule deleted: the cross tables stop answering; the batch path and the cache decide.
    shared.delete_rule(1).unwrap();
    let ([_, to1], drops, text) = run_chain(&mut chain, &frames);
    assert_eq!((to1.len(), drops[DropReason::AclDeny as usize]), (6, 0), "ssh now takes the default");
    assert!(text.contains(" acl_reclassified=2 acl_direct=4"), "{text}");
    // With every packet through the cache, no vector loop.
    let cached = Arc::new(AclShared::try_new(&AclConfig { always_cache: true, ..cfg }).unwrap());
    assert!(!crate::nf::Chain::new(vec![Box::new(Acl::new(cached))], egress()).is_vector());
}

/// The flood guard's threshold: a probe of `FLOOD_PROBE` lookups opens a window only with
/// more than 7 in 8 misses; the window lasts `FLOOD_WINDOW` packets, then the cache is probed
/// again; each probe in a row that finds the flood doubles the next window up to
/// `FLOOD_WINDOW_MAX`, and one that does not starts over.
#[test]
fn the_flood_guard_opens_a_window_past_seven_misses_in_eight() {
    let mut g = FloodGuard::default();
    assert!(!g.observe(FLOOD_PROBE - 1, FLOOD_PROBE - 1), "no judgement before a whole probe");
    assert!(g.observe(1, 1));
    assert!(g.bypassing());
    g.spend(FLOOD_WINDOW - 1);
    assert!(g.bypassing());
    g.spend(32);
    assert!(!g.bypassing());
    let seven_eighths = FLOOD_PROBE / 8 * 7;
    assert!(!g.observe(FLOOD_PROBE, seven_eighths), "exactly 7 in 8: the cache stays");
    assert!(!g.bypassing());
    // The flood lasts: 4 096, then 8 192, 16 384, … packets, never more than the cap.
    let mut windows = Vec::new();
    for _ in 0..8 {
        assert!(g.observe(FLOOD_PROBE, seven_eighths + 1));
        let mut n = 0;
        while g.bypassing() {
            g.spend(1024);
            n += 1024;
        }
        windows.push(n);
    }
    let w = FLOOD_WINDOW;
    assert_eq!(windows, [w, 2 * w, 4 * w, 8 * w, 16 * w, 32 * w, 32 * w, 32 * w]);
    assert_eq!(FLOOD_WINDOW_MAX, 32 * w);
    // A probe that finds the cache useful: the next flood starts from the first window again.
    assert!(!g.observe(FLOOD_PROBE, 0));
    assert!(g.observe(FLOOD_PROBE, FLOOD_PROBE));
    g.spend(FLOOD_WINDOW - 1);
    assert!(g.bypassing());
    g.spend(1);
    assert!(!g.bypassing());
}

/// A flood of new IPv6 flows (which always take the cache path): after one probe of misses
/// the NF classifies without the cache, with the verdicts the rules give; once the window is
/// spent, a probe of known flows finds them cached and the cache stays in use.
#[test]
fn a_flood_of_new_flows_skips_the_cache_and_known_flows_return_to_it() {
    let ssh = AclRule { dport: (22, 22), ..AclRule::any(20, AclAction::Deny) };
    let rules = vec![ssh];
    let shared = Arc::new(AclShared::try_new(&AclConfig::new(rules.clone(), AclAction::Permit)).unwrap());
    let mut acl = Acl::new(shared);
    let flow = |i: u32| FlowKey {
        src: IpAddr::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, (i >> 8) as u8, i as u8]),
        dst: IpAddr::V6([0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]),
        proto: 6,
        src_port: 1000 + (i % 7) as u16,
        dst_port: if i.is_multiple_of(3) { 22 } else { 80 },
    };
    let mut t = 1;
    let mut send = |acl: &mut Acl, flows: &[FlowKey]| {
        for chunk in flows.chunks(32) {
            let frames: Vec<Vec<u8>> = chunk.iter().map(frame_of).collect();
            let out = run(acl, &frames, 0, Instant(t));
            t += 1;
            for (o, f) in out.iter().zip(chunk) {
                let want = match ref_verdict(&rules, AclAction::Permit, f) {
                    AclAction::Permit => Verdict::Forward(1),
                    AclAction::Deny => Verdict::Drop(DropReason::AclDeny),
                };
                assert_eq!(o.verdict, want, "{f:?}");
            }
        }
    };
    let probe = FLOOD_PROBE as u64;
    // The probe: every flow new, classified and cached; then the window opens.
    let known: Vec<FlowKey> = (0..FLOOD_PROBE).map(flow).collect();
    send(&mut acl, &known);
    let c = *acl.counters();
    assert_eq!((c.classified, c.cache_hits, c.direct, c.flood_windows), (probe, 0, 0, 1));
    // The window: new flows classified directly, nothing added.
    let new: Vec<FlowKey> = (FLOOD_PROBE..FLOOD_PROBE + FLOOD_WINDOW).map(flow).collect();
    send(&mut acl, &new);
    let c = *acl.counters();
    assert_eq!((c.classified, c.direct, c.flood_windows), (probe, u64::from(FLOOD_WINDOW), 1));
    assert_eq!(c.permitted + c.denied, probe + u64::from(FLOOD_WINDOW));
    // Known flows: the probe finds them in the cache; no new window.
    send(&mut acl, &known);
    send(&mut acl, &known);
    let c = *acl.counters();
    assert_eq!((c.cache_hits, c.classified, c.flood_windows), (2 * probe, probe, 1));
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(12))]
    /// Rules of which a third are for VLAN 100 or 200 only; each flow sent untagged and tagged
    /// 100, 200 and 300, twice: every frame gets the reference's verdict for the VID it
    /// carries — the same 5-tuple on two VLANs is two flows in the cache, each decided by its
    /// VLAN's rules — whether IPv4 goes through the cache or directly.
    #[test]
    fn tagged_frames_are_decided_by_the_rules_of_their_vlan(seed in any::<u64>()) {
        let rules = some_for_vlans(example_rules(seed, crate::testing::miri_or(200, 30)), seed);
        let mut rng = XorShift64::from_state(seed ^ 0x7a6);
        let flows = flows_for(&rules, &mut rng, crate::testing::miri_or(40, 4));
        let vids = [0u16, 100, 200, 300];
        let frames: Vec<Vec<u8>> = flows.iter().flat_map(|f| vids.map(|v| tagged(&frame_of(f), v))).collect();
        let expected: Vec<AclAction> =
            flows.iter().flat_map(|f| vids.map(|v| ref_verdict_on(&rules, AclAction::Deny, f, v))).collect();
        for always_cache in [true, false] {
            let cfg = AclConfig { always_cache, ..AclConfig::new(rules.clone(), AclAction::Deny) };
            let shared = Arc::new(AclShared::try_new(&cfg).unwrap());
            let mut acl = Acl::new(shared.clone());
            for pass in 0..2 {
                let out = run(&mut acl, &frames, 0, Instant(1 + pass));
                for (i, (o, e)) in out.iter().zip(&expected).enumerate() {
                    let want = match e {
                        AclAction::Permit => Verdict::Forward(1),
                        AclAction::Deny => Verdict::Drop(DropReason::AclDeny),
                    };
                    prop_assert_eq!(o.verdict, want, "frame {} pass {} always_cache {}", i, pass, always_cache);
                }
            }
            // Tagged frames always take the cache: each (5-tuple, VID) is classified once.
            let c = *acl.counters();
            let mut keys: Vec<(FlowKey, u16)> = flows.iter().flat_map(|f| vids.map(|v| (*f, v))).filter(|(f, v)| {
                *v != 0 || always_cache || !shared.rules().classifies_v4_by_cross_tables() || matches!(f.src, IpAddr::V6(_))
            }).collect();
            keys.sort();
            keys.dedup();
            prop_assert_eq!(c.classified, keys.len() as u64);
        }
    }
}

/// One flow, rules for VLANs 100 and 200 and one for every frame: untagged, tagged 100, 200
/// and 300 each get their own verdict, cached apart; a VLAN rule added live applies to its
/// VLAN's cached flow at the next packet and to no other.
#[test]
fn a_vlan_rule_decides_only_frames_of_its_vlan() {
    let web = AclRule { dport: (80, 80), proto: Some(6), ..AclRule::any(10, AclAction::Deny) };
    let rules = vec![
        AclRule { vlan: Some(100), ..web },
        AclRule { vlan: Some(200), ..AclRule::any(20, AclAction::Permit) },
        AclRule { dport: (80, 80), ..AclRule::any(5, AclAction::Permit) },
    ];
    let shared = Arc::new(AclShared::try_new(&AclConfig::new(rules, AclAction::Deny)).unwrap());
    assert_eq!(shared.rules().vlans(), &[100, 200]);
    let mut acl = Acl::new(shared.clone());
    let f = FlowKey {
        src: IpAddr::V4([10, 0, 0, 1]),
        dst: IpAddr::V4([10, 0, 0, 2]),
        src_port: 999,
        dst_port: 80,
        proto: 6,
    };
    let frames: Vec<Vec<u8>> = [0, 100, 200, 300].iter().map(|&v| tagged(&frame_of(&f), v)).collect();
    let deny = Verdict::Drop(DropReason::AclDeny);
    let verdicts =
        |acl: &mut Acl, now| run(acl, &frames, 0, Instant(now)).iter().map(|o| o.verdict).collect::<Vec<_>>();
    let want = vec![Verdict::Forward(1), deny, Verdict::Forward(1), Verdict::Forward(1)];
    assert_eq!(verdicts(&mut acl, 1), want, "untagged and VLAN 300: the global rule; 100: its deny; 200: its permit");
    assert_eq!(verdicts(&mut acl, 2), want, "the same from the cache");
    // The untagged frame is classified directly (the cross tables answer), the tagged ones
    // through the cache, each (5-tuple, VID) its own flow.
    let c = acl.counters();
    assert_eq!((c.classified, c.cache_hits, c.direct), (3, 3, 2));
    // A rule of VLAN 300 (a new scope: the classifiers rebuilt) denies VLAN 300's flow only.
    shared.add_rule(AclRule { vlan: Some(300), ..web }).unwrap();
    assert_eq!(shared.rules().vlans(), &[100, 200, 300]);
    assert_eq!(verdicts(&mut acl, 3), vec![Verdict::Forward(1), deny, Verdict::Forward(1), deny]);
    // Another of VLAN 200 joins the delta and, higher, overrides its permit.
    shared.add_rule(AclRule { vlan: Some(200), ..AclRule::any(30, AclAction::Deny) }).unwrap();
    assert_eq!(shared.rules().pending().0, 2, "in the delta of both families, no rebuild");
    assert_eq!(verdicts(&mut acl, 4), vec![Verdict::Forward(1), deny, deny, deny]);
    assert_eq!(shared.rules().classify(&f), (AclAction::Permit, Some(2)));
    assert_eq!(shared.rules().classify_on(&f, 200), (AclAction::Deny, Some(4)));
}

#[test]
fn vlan_ids_in_rules_are_checked() {
    let any = AclRule::any(1, AclAction::Deny);
    for bad in [0, 4095] {
        assert_eq!(
            AclConfig::new(vec![any, AclRule { vlan: Some(bad), ..any }], AclAction::Permit).validate(),
            Err(AclConfigError::BadVlan { rule: 1 })
        );
    }
    let many: Vec<AclRule> = (1..=MAX_VLANS as u16 + 1).map(|v| AclRule { vlan: Some(v), ..any }).collect();
    assert_eq!(
        AclConfig::new(many.clone(), AclAction::Permit).validate(),
        Err(AclConfigError::TooManyVlans { count: MAX_VLANS + 1 })
    );
    assert_eq!(std::format!("{}", AclConfigError::BadVlan { rule: 3 }), "rule 3: vlan not 1..=4094");
    // Live: the rule of one VLAN too many is refused, one of a VLAN already named is taken.
    let shared = AclShared::try_new(&AclConfig::new(many[..MAX_VLANS].to_vec(), AclAction::Permit)).unwrap();
    assert_eq!(shared.add_rule(many[MAX_VLANS]).err(), Some(AclConfigError::TooManyVlans { count: MAX_VLANS + 1 }));
    assert_eq!(
        shared.add_rule(AclRule { vlan: Some(0), ..any }).map(|r| r.0).err(),
        Some(AclConfigError::BadVlan { rule: MAX_VLANS })
    );
    assert_eq!(shared.add_rule(many[0]).map(|r| r.0), Ok(MAX_VLANS));
}
