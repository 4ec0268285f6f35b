#![cfg(not(loom))]

use super::*;
use crate::buf::{BATCH_SIZE, BUF_SIZE};
use crate::nf::Pkt;
use crate::nf::testkit::{Passive, run_chain};
use crate::parse::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, PROTO_UDP};
use crate::test_frames::{eth, ipv4_with, ipv6, udp, udp4};
use crate::time::Instant;
use alloc::vec;
use proptest::prelude::*;

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0xa, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0xb, 2];

/// Runs `nf` over `frames` (arriving on port 0, default egress 1); returns each frame after
/// the NF with its verdict and MAC override.
fn run(nf: &mut dyn Nf, frames: &[Vec<u8>]) -> Vec<(Vec<u8>, Verdict, Option<[u8; 6]>)> {
    let mut mem = vec![0u8; 64 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();
    let mut batch = NfBatch::new();
    for f in frames {
        let b = pool.alloc().unwrap();
        pool.set_len(b, f.len()).unwrap();
        pool.frame_mut(b).copy_from_slice(f);
        let parsed = crate::parse::parse(f).unwrap();
        batch
            .push(Pkt { buf: b, parsed, ingress: 0, vid: 0, verdict: Verdict::Forward(1), dst: crate::nf::Dst::Peer })
            .unwrap();
    }
    nf.process(&NfCtx { now: Instant(1) }, &mut pool, &mut batch);
    batch.pkts().iter().map(|p| (pool.frame(p.buf).to_vec(), p.verdict, p.dst.mac())).collect()
}

fn v4_frame(dst: [u8; 4], ttl: u8, options: &[u8]) -> Vec<u8> {
    let mut ip = ipv4_with(PROTO_UDP, options, 0x4000, &udp(1000, 53, b"payload"));
    ip[16..20].copy_from_slice(&dst);
    ip[8] = ttl;
    ip[10..12].fill(0);
    let hl = 20 + options.len();
    let c = checksum::checksum(&ip[..hl]);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    eth(&[], ETHERTYPE_IPV4, &ip)
}

fn v6_frame(dst: [u8; 16], hop: u8) -> Vec<u8> {
    let mut ip = ipv6(PROTO_UDP, &udp(1000, 53, b"payload"));
    ip[24..40].copy_from_slice(&dst);
    ip[7] = hop;
    eth(&[], ETHERTYPE_IPV6, &ip)
}

fn config() -> L3fwdConfig {
    let mut p6 = [0u8; 16];
    p6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    L3fwdConfig {
        next_hops: vec![NextHop::mac(0, MAC_A), NextHop::mac(1, MAC_B)],
        routes4: vec![
            Route4 { prefix: [10, 0, 0, 0], len: 8, next_hop: 0 },
            Route4 { prefix: [10, 1, 2, 0], len: 24, next_hop: 1 },
            Route4 { prefix: [10, 1, 2, 3], len: 32, next_hop: 0 },
        ],
        routes6: vec![Route6 { prefix: p6, len: 32, next_hop: 1 }],
        ..Default::default()
    }
}

fn nf() -> L3fwd {
    L3fwd::new(Arc::new(L3fwdShared::try_new(&config()).unwrap()))
}

#[test]
fn longest_prefix_wins_and_sets_port_and_mac() {
    let mut f = nf();
    let out = run(
        &mut f,
        &[v4_frame([10, 9, 9, 9], 64, &[]), v4_frame([10, 1, 2, 9], 64, &[]), v4_frame([10, 1, 2, 3], 64, &[])],
    );
    assert_eq!((out[0].1, out[0].2), (Verdict::Forward(0), Some(MAC_A)));
    assert_eq!((out[1].1, out[1].2), (Verdict::Forward(1), Some(MAC_B)));
    assert_eq!((out[2].1, out[2].2), (Verdict::Forward(0), Some(MAC_A)));
    assert_eq!(f.counters().forwarded4, 3);
}

#[test]
fn ttl_and_checksum_verified_by_etherparse() {
    let mut f = nf();
    for (ttl, opts) in [(64u8, &[][..]), (2, &[][..]), (255, &[1, 1, 1, 0][..]), (128, &[0x94, 4, 0, 0][..])] {
        let input = v4_frame([10, 1, 2, 7], ttl, opts);
        let out = run(&mut f, std::slice::from_ref(&input));
        let (frame, verdict, _) = &out[0];
        assert_eq!(*verdict, Verdict::Forward(1));
        let ip = etherparse::Ipv4HeaderSlice::from_slice(&frame[14..]).unwrap();
        assert_eq!(ip.ttl(), ttl - 1);
        assert_eq!(ip.header_checksum(), ip.to_header().calc_header_checksum(), "ttl {ttl}");
        // Only the TTL and checksum bytes changed.
        let changed: Vec<usize> = (0..frame.len()).filter(|&i| frame[i] != input[i]).collect();
        assert!(changed.iter().all(|&i| [14 + 8, 14 + 10, 14 + 11].contains(&i)), "{changed:?}");
    }
}

#[test]
fn ttl_zero_and_one_are_dropped_untouched() {
    let mut f = nf();
    let frames =
        [v4_frame([10, 1, 2, 7], 1, &[]), v4_frame([10, 1, 2, 7], 0, &[]), v6_frame(crate::test_frames::B6, 1)];
    let out = run(&mut f, &frames);
    for (i, (frame, verdict, mac)) in out.iter().enumerate() {
        assert_eq!(*verdict, Verdict::Drop(DropReason::TtlExpired));
        assert_eq!(*mac, None);
        assert_eq!(frame, &frames[i]);
    }
    assert_eq!(f.counters().ttl_expired, 3);
}

#[test]
fn ipv6_hop_limit_is_decremented() {
    let mut f = nf();
    let out = run(&mut f, &[v6_frame(crate::test_frames::B6, 64), v6_frame(crate::test_frames::B6, 2)]);
    for ((frame, verdict, mac), want) in out.iter().zip([63, 1]) {
        assert_eq!((*verdict, *mac), (Verdict::Forward(1), Some(MAC_B)));
        assert_eq!(etherparse::Ipv6HeaderSlice::from_slice(&frame[14..]).unwrap().hop_limit(), want);
    }
    assert_eq!(f.counters().forwarded6, 2);
}

#[test]
fn no_route_is_dropped() {
    let mut f = nf();
    let out = run(
        &mut f,
        &[v4_frame([192, 168, 0, 1], 64, &[]), v6_frame([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1], 64)],
    );
    assert!(out.iter().all(|o| o.1 == Verdict::Drop(DropReason::NoRoute)));
    let mut s = alloc::string::String::new();
    f.write_counters(&mut s).unwrap();
    assert_eq!(s, " l3fwd_forwarded4=0 l3fwd_forwarded6=0 l3fwd_no_route=2 l3fwd_ttl_expired=0");
}

#[test]
fn dead_packets_are_left_alone() {
    let mut f = nf();
    let mut mem = vec![0u8; 4 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 4).unwrap();
    let frame = udp4(1, 2, b"x");
    let b = pool.alloc().unwrap();
    pool.set_len(b, frame.len()).unwrap();
    pool.frame_mut(b).copy_from_slice(&frame);
    let mut batch = NfBatch::new();
    let parsed = crate::parse::parse(&frame).unwrap();
    let dead = Verdict::Drop(DropReason::AclDeny);
    batch.push(Pkt { buf: b, parsed, ingress: 0, vid: 0, verdict: dead, dst: crate::nf::Dst::Peer }).unwrap();
    f.process(&NfCtx { now: Instant(0) }, &mut pool, &mut batch);
    assert_eq!(batch.pkts()[0].verdict, dead);
    assert_eq!(pool.frame(b), &frame[..]);
}

#[test]
fn config_errors_name_the_field() {
    let mut c = config();
    c.first_stride4 = 25;
    assert_eq!(c.validate(), Err(L3fwdConfigError::FirstStride(25)));
    let mut c = config();
    c.lpm4 = Lpm4Kind::Poptrie;
    c.first_stride4 = 8;
    assert_eq!(c.validate(), Err(L3fwdConfigError::PoptrieStride(8)));
    assert_eq!(
        L3fwdShared::try_new(&c).unwrap_err().to_string(),
        "l3fwd first_stride4 8 is not in 16..=24 (l3fwd.lpm4=poptrie)"
    );
    let mut c = config();
    c.next_hops[1].port = crate::vlan::IFACES as u8;
    assert_eq!(c.validate(), Err(L3fwdConfigError::NextHopPort { index: 1 }));
    let mut c = config();
    c.routes4[2].next_hop = 7;
    assert_eq!(c.validate(), Err(L3fwdConfigError::RouteNextHop { family: Family::V4, index: 2 }));
    let mut c = config();
    c.routes4[1].prefix = [10, 1, 2, 1];
    assert_eq!(c.validate(), Err(L3fwdConfigError::RouteHostBits { family: Family::V4, index: 1 }));
    let mut c = config();
    c.routes6[0].len = 129;
    assert_eq!(c.validate(), Err(L3fwdConfigError::RouteLen { family: Family::V6, index: 0 }));
    let mut c = config();
    c.routes4.push(c.routes4[0]);
    assert_eq!(c.validate(), Err(L3fwdConfigError::DuplicateRoute { family: Family::V4, index: 3 }));
    let mut c = config();
    c.max_groups4 = 0;
    let e = L3fwdShared::try_new(&c).unwrap_err();
    assert_eq!(e, L3fwdConfigError::OutOfGroups { family: Family::V4, index: 1 });
    assert_eq!(e.to_string(), "l3fwd routes4[1]: trie groups exhausted");
}

/// Longest match by linear scan (the reference).
fn reference(routes: &[(u128, u8, u32)], addr: u128, width: u32) -> Option<u32> {
    routes
        .iter()
        .filter(|(p, l, _)| {
            let l = u32::from(*l);
            l == 0 || (addr >> (width - l)) == (*p >> (width - l))
        })
        .max_by_key(|r| r.1)
        .map(|r| r.2)
}

fn mask(addr: u128, len: u8, width: u32) -> u128 {
    let addr = addr & (u128::MAX >> (128 - width));
    if u32::from(len) >= width { addr } else { addr & !(u128::MAX >> (128 - width + u32::from(len))) }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(48))]

    #[test]
    fn lpm4_matches_a_linear_scan(
        routes in proptest::collection::vec((any::<u32>(), 0u8..=32, 0u32..4), 1..crate::testing::miri_or(40, 6)),
        probes in proptest::collection::vec((any::<u32>(), 0usize..40, any::<u8>()), 1..crate::testing::miri_or(64, 8)),
        (stride, lpm4) in prop_oneof![
            Just((8u8, Lpm4Kind::Trie)),
            Just((16u8, Lpm4Kind::Trie)),
            Just((16u8, Lpm4Kind::Poptrie)),
            Just((18u8, Lpm4Kind::Poptrie)),
        ],
    ) {
        let mut c = L3fwdConfig {
            lpm4,
            first_stride4: stride,
            max_groups4: 4096,
            next_hops: (0..4).map(|i| NextHop::mac((i % 2) as u8, [2, 0, 0, 0, 0, i as u8])).collect(),
            ..Default::default()
        };
        let mut seen = std::collections::BTreeSet::new();
        let mut refs = Vec::new();
        for (a, len, nh) in routes {
            let p = mask(u128::from(a), len, 32);
            if seen.insert((p, len)) {
                c.routes4.push(Route4 { prefix: (p as u32).to_be_bytes(), len, next_hop: nh });
                refs.push((p, len, nh));
            }
        }
        let shared = Arc::new(L3fwdShared::try_new(&c).unwrap());
        let mut f = L3fwd::new(shared.clone());
        // Probe random addresses and addresses inside (or just past) a route's prefix.
        let addrs: Vec<u32> = probes.iter().map(|&(a, r, low)| match refs.get(r) {
            Some(&(p, _, _)) => (p as u32) | u32::from(low),
            None => a,
        }).collect();
        let frames: Vec<Vec<u8>> = addrs.iter().map(|a| v4_frame(a.to_be_bytes(), 9, &[])).collect();
        for chunk in frames.chunks(BATCH_SIZE).zip(addrs.chunks(BATCH_SIZE)) {
            let out = run(&mut f, chunk.0);
            for ((_, verdict, mac), a) in out.iter().zip(chunk.1) {
                let want = reference(&refs, u128::from(*a), 32);
                prop_assert_eq!(shared.route(IpAddr::V4(a.to_be_bytes())).map(|h| h.mac[5] as u32), want);
                match want {
                    Some(nh) => {
                        prop_assert_eq!(*verdict, Verdict::Forward((nh % 2) as u8));
                        prop_assert_eq!(*mac, Some([2, 0, 0, 0, 0, nh as u8]));
                    }
                    None => prop_assert_eq!(*verdict, Verdict::Drop(DropReason::NoRoute)),
                }
            }
        }
    }

    #[test]
    fn lpm6_matches_a_linear_scan(
        routes in proptest::collection::vec((any::<u128>(), 0u8..=128, 0u32..4), 1..crate::testing::miri_or(24, 6)),
        probes in proptest::collection::vec((any::<u128>(), 0usize..24, any::<u16>()), 1..crate::testing::miri_or(32, 8)),
    ) {
        let mut c = L3fwdConfig {
            max_groups6: 8192,
            next_hops: (0..4).map(|i| NextHop::mac((i % 2) as u8, [2, 0, 0, 0, 0, i as u8])).collect(),
            ..Default::default()
        };
        let mut seen = std::collections::BTreeSet::new();
        let mut refs = Vec::new();
        for (a, len, nh) in routes {
            let p = mask(a, len, 128);
            if seen.insert((p, len)) {
                c.routes6.push(Route6 { prefix: p.to_be_bytes(), len, next_hop: nh });
                refs.push((p, len, nh));
            }
        }
        let shared = Arc::new(L3fwdShared::try_new(&c).unwrap());
        let mut f = L3fwd::new(shared.clone());
        let addrs: Vec<u128> = probes.iter().map(|&(a, r, low)| match refs.get(r) {
            Some(&(p, _, _)) => p | u128::from(low),
            None => a,
        }).collect();
        let frames: Vec<Vec<u8>> = addrs.iter().map(|a| v6_frame(a.to_be_bytes(), 9)).collect();
        let out = run(&mut f, &frames);
        for ((_, verdict, _), a) in out.iter().zip(&addrs) {
            let want = reference(&refs, *a, 128);
            match want {
                Some(nh) => prop_assert_eq!(*verdict, Verdict::Forward((nh % 2) as u8)),
                None => prop_assert_eq!(*verdict, Verdict::Drop(DropReason::NoRoute)),
            }
        }
    }

    #[test]
    fn checksum_update_agrees_with_etherparse(
        ttl in 2u8..=255,
        ident in any::<u16>(),
        tos in any::<u8>(),
        src in any::<[u8; 4]>(),
        low in any::<u8>(),
    ) {
        let mut frame = v4_frame([10, 0, 0, low], ttl, &[]);
        frame[14 + 1] = tos;
        frame[14 + 4..14 + 6].copy_from_slice(&ident.to_be_bytes());
        frame[14 + 12..14 + 16].copy_from_slice(&src);
        frame[14 + 10..14 + 12].fill(0);
        let c = checksum::checksum(&frame[14..34]);
        frame[14 + 10..14 + 12].copy_from_slice(&c.to_be_bytes());
        let out = run(&mut nf(), &[frame]);
        let ip = etherparse::Ipv4HeaderSlice::from_slice(&out[0].0[14..]).unwrap();
        prop_assert_eq!(ip.ttl(), ttl - 1);
        prop_assert_eq!(ip.header_checksum(), ip.to_header().calc_header_checksum());
    }
}

#[test]
fn routes_changed_live_take_effect_at_the_next_batch() {
    let shared = Arc::new(L3fwdShared::try_new(&config()).unwrap());
    let mut f = L3fwd::new(shared.clone());
    let frames = [v4_frame([10, 9, 9, 9], 64, &[]), v4_frame([192, 0, 2, 1], 64, &[])];
    type Out = (Vec<u8>, Verdict, Option<[u8; 6]>);
    let hops = |out: &[Out]| out.iter().map(|o| (o.1, o.2)).collect::<Vec<_>>();
    let before = hops(&run(&mut f, &frames));
    assert_eq!(before, [(Verdict::Forward(0), Some(MAC_A)), (Verdict::Drop(DropReason::NoRoute), None)]);
    // A more specific route for 10.9.0.0/16 via a new next hop, and a route for 192.0.2.0/24.
    let mac_c = [2, 0, 0, 0, 0xc, 3];
    let old = shared.add_route(IpAddr::V4([10, 9, 0, 0]), 16, NextHop::mac(1, mac_c)).unwrap();
    assert_eq!(old.config().next_hops.len(), 2);
    shared.add_route(IpAddr::V4([192, 0, 2, 0]), 24, NextHop::mac(0, MAC_A)).unwrap();
    let after = hops(&run(&mut f, &frames));
    assert_eq!(after, [(Verdict::Forward(1), Some(mac_c)), (Verdict::Forward(0), Some(MAC_A))]);
    // Deleting the /16 falls back to the /8; its next hop is dropped from the list.
    shared.delete_route(IpAddr::V4([10, 9, 0, 0]), 16).unwrap();
    assert_eq!(hops(&run(&mut f, &frames))[0], (Verdict::Forward(0), Some(MAC_A)));
    assert_eq!(shared.tables().config().next_hops.len(), 2);
    // Refused changes name what is wrong and change nothing.
    let v = shared.tables().config().clone();
    assert_eq!(shared.delete_route(IpAddr::V4([10, 9, 0, 0]), 16).err(), Some(L3fwdConfigError::NoSuchRoute));
    let dup = shared.add_route(IpAddr::V4([10, 0, 0, 0]), 8, NextHop::mac(1, MAC_B));
    assert_eq!(dup.err(), Some(L3fwdConfigError::DuplicateRoute { family: Family::V4, index: 4 }));
    let host = shared.add_route(IpAddr::V4([10, 0, 0, 1]), 8, NextHop::mac(1, MAC_B));
    assert_eq!(host.err(), Some(L3fwdConfigError::RouteHostBits { family: Family::V4, index: 4 }));
    let port = shared.add_route(IpAddr::V4([11, 0, 0, 0]), 8, NextHop::mac(crate::vlan::IFACES as u8, MAC_B));
    assert_eq!(port.err(), Some(L3fwdConfigError::NextHopPort { index: 2 }));
    assert_eq!(shared.tables().config(), &v);
}

/// One frame of a mixed batch: the common IPv4 frame (to a routed or unrouted address, any
/// TTL), and every kind the vector path leaves to the batch path.
fn mixed_frame(kind: u8, dst: u8, ttl: u8) -> Vec<u8> {
    let routed = [[10, 1, 2, 3], [10, 1, 2, 9], [10, 9, 9, 9], [192, 0, 2, 1]][usize::from(dst % 4)];
    match kind % 7 {
        0 | 1 => v4_frame(routed, ttl, &[]),
        2 => v4_frame(routed, ttl, &[1, 1, 1, 1]),
        3 => {
            let mut p6 = [0u8; 16];
            p6[..4].copy_from_slice(&[0x20, 0x01, 0x0d, if dst.is_multiple_of(2) { 0xb8 } else { 0xb9 }]);
            v6_frame(p6, ttl)
        }
        4 => {
            let mut f = v4_frame(routed, ttl, &[]);
            f[24] ^= 0x40; // a bad header checksum
            f
        }
        5 => {
            let mut f = v4_frame(routed, ttl, &[]);
            f[20] |= 0x20; // a first fragment: valid, the general parser's
            let c = crate::checksum::checksum(&[&f[14..24], &[0, 0], &f[26..34]].concat());
            f[24..26].copy_from_slice(&c.to_be_bytes());
            f
        }
        _ => v4_frame(routed, ttl, &[])[..30].to_vec(),
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(64))]

    /// The vector path (a chain of the L3 forwarder alone) sends the same frames, in the same
    /// order and with the same bytes, and counts the same drops and NF counters as the batch
    /// path (the same forwarder followed by an NF without a vector path), on batches that mix
    /// common frames with every kind the vector path leaves to the batch path; at both depths.
    #[test]
    fn the_vector_path_is_the_batch_path(
        spec in proptest::collection::vec((any::<u8>(), any::<u8>(), prop_oneof![Just(0u8), Just(1), Just(2), Just(64)]), 1..=BATCH_SIZE),
        l4 in any::<bool>(),
    ) {
        let frames: Vec<Vec<u8>> = spec.iter().map(|&(k, d, t)| mixed_frame(k, d, t)).collect();
        let shared = Arc::new(L3fwdShared::try_new(&config()).unwrap());
        let egress = crate::nf::Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], crate::nf::Egress::DEFAULT_PEERS, None);
        let depth = if l4 { Depth::L4 } else { Depth::L3 };
        let mut vector = crate::nf::Chain::new(vec![Box::new(L3fwd::new(shared.clone()))], egress.clone());
        vector.set_validate(depth);
        let mut batch = crate::nf::Chain::new(vec![Box::new(L3fwd::new(shared)), Box::new(Passive)], egress);
        batch.set_validate(depth);
        prop_assert!(vector.is_vector() && !batch.is_vector());
        let (a, b) = (run_chain(&mut vector, &frames), run_chain(&mut batch, &frames));
        prop_assert_eq!(a, b);
    }
}

/// The vector path forwards the common frame as the batch path does: a case with a known
/// answer, so that the equivalence above compares something.
#[test]
fn the_vector_path_routes_and_drops_by_reason() {
    let shared = Arc::new(L3fwdShared::try_new(&config()).unwrap());
    let egress =
        crate::nf::Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], crate::nf::Egress::DEFAULT_PEERS, None);
    let mut chain = crate::nf::Chain::new(vec![Box::new(L3fwd::new(shared))], egress);
    assert!(chain.is_vector());
    let frames = [v4_frame([10, 1, 2, 9], 64, &[]), v4_frame([192, 0, 2, 1], 64, &[]), v4_frame([10, 1, 2, 3], 1, &[])];
    let ([to0, to1], drops, _) = run_chain(&mut chain, &frames);
    assert!(to0.is_empty());
    assert_eq!(to1.len(), 1);
    assert_eq!(to1[0][..6], MAC_B);
    assert_eq!(to1[0][14 + 8], 63);
    assert!(checksum::verify(&to1[0][14..34]));
    assert_eq!(drops[DropReason::NoRoute.index()], 1);
    assert_eq!(drops[DropReason::TtlExpired.index()], 1);
}

/// Eight next hops on the two ports, hops 6 and 7 gateways (sent to the port's peer in a chain
/// without a router), route `i` 10.0.i.0/24 via hop `i`.
fn many_hops() -> L3fwdConfig {
    L3fwdConfig {
        next_hops: (0..8u8)
            .map(
                |i| {
                    if i < 6 {
                        NextHop::mac(i % 2, [2, 0, 0, 0, 0xc, i])
                    } else {
                        NextHop::gateway(i % 2, [10, 9, 9, i])
                    }
                },
            )
            .collect(),
        routes4: (0..8u8).map(|i| Route4 { prefix: [10, 0, i, 0], len: 24, next_hop: u32::from(i) }).collect(),
        ..Default::default()
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(64))]

    /// Next hops that share the vector loop's per-batch memo slot (hops `i` and `i + 4`) in
    /// any order, with unrouted frames and expiring TTLs among them: each frame leaves with its
    /// own hop's port and MAC (a gateway's: the port's peer), as the batch path sends it.
    #[test]
    fn the_vector_path_keeps_each_next_hops_header(
        spec in proptest::collection::vec((0u8..9, prop_oneof![Just(1u8), Just(64)]), 1..=BATCH_SIZE),
    ) {
        let frames: Vec<Vec<u8>> =
            spec.iter().map(|&(h, t)| v4_frame(if h < 8 { [10, 0, h, 1] } else { [192, 0, 2, 1] }, t, &[])).collect();
        let shared = Arc::new(L3fwdShared::try_new(&many_hops()).unwrap());
        let egress = crate::nf::Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], crate::nf::Egress::DEFAULT_PEERS, None);
        let mut vector = crate::nf::Chain::new(vec![Box::new(L3fwd::new(shared.clone()))], egress.clone());
        let mut batch = crate::nf::Chain::new(vec![Box::new(L3fwd::new(shared)), Box::new(Passive)], egress);
        prop_assert!(vector.is_vector() && !batch.is_vector());
        let (a, b) = (run_chain(&mut vector, &frames), run_chain(&mut batch, &frames));
        prop_assert_eq!(&a, &b);
        // The known answer: per port, the routed frames with a TTL above 1, in order.
        for port in 0..2u8 {
            let want: Vec<[u8; 12]> = spec
                .iter()
                .filter(|&&(h, t)| h < 8 && t > 1 && h % 2 == port)
                .map(|&(h, _)| {
                    let dst = if h < 6 { [2, 0, 0, 0, 0xc, h] } else { crate::nf::Egress::DEFAULT_PEERS[usize::from(port)] };
                    let mut head = [0u8; 12];
                    head[..6].copy_from_slice(&dst);
                    head[6..].copy_from_slice(&[2, 0, 0, 0, 0, 0x10 + port]);
                    head
                })
                .collect();
            let got: Vec<[u8; 12]> = a.0[usize::from(port)].iter().map(|f| f[..12].try_into().unwrap()).collect();
            prop_assert_eq!(got, want, "port {}", port);
        }
    }
}
