#![cfg(not(loom))]

use std::collections::{HashMap, HashSet};
use std::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::nf::testkit::{checksums_ok, frame, run};
use crate::rand::XorShift64;

const EXT: [u8; 4] = [203, 0, 113, 7];
const INSIDE: u8 = 0;
const OUTSIDE: u8 = 1;

fn nat(ports: (u16, u16), timeout: u64) -> Nat {
    let cfg = NatConfig {
        external_addr: EXT,
        ports,
        inside_port: INSIDE,
        timeout: Duration(timeout),
        ..NatConfig::default()
    };
    Nat::new(Arc::new(NatShared::try_new(&cfg).unwrap()))
}

fn v4(a: [u8; 4]) -> IpAddr {
    IpAddr::V4(a)
}

fn src_port_of(f: &[u8]) -> u16 {
    crate::parse::parse(f).unwrap().flow.src_port
}

#[test]
fn nat_translates_both_directions_and_restores_exactly() {
    let mut nat = nat((40000, 40010), 1_000_000);
    let (host, server) = ([192, 168, 1, 10], [8, 8, 8, 8]);
    for proto in [6u8, 17] {
        let out = frame(v4(host), v4(server), proto, 5000, 53, b"query");
        let o = &run(&mut nat, std::slice::from_ref(&out), INSIDE, Instant(1))[0];
        assert_eq!(o.verdict, Verdict::Forward(1));
        let port = src_port_of(&o.frame);
        assert!((40000..=40010).contains(&port));
        assert!(checksums_ok(&o.frame));
        assert_eq!(o.frame, frame(v4(EXT), v4(server), proto, port, 53, b"query"), "only src address and port changed");
        // The same flow keeps its port.
        let again = &run(&mut nat, &[out], INSIDE, Instant(2))[0];
        assert_eq!(src_port_of(&again.frame), port);
        // The reply is restored to the inside host.
        let reply = frame(v4(server), v4(EXT), proto, 53, port, b"answer!");
        let r = &run(&mut nat, &[reply], OUTSIDE, Instant(3))[0];
        assert_eq!(r.verdict, Verdict::Forward(0));
        assert!(checksums_ok(&r.frame));
        assert_eq!(r.frame, frame(v4(server), v4(host), proto, 53, 5000, b"answer!"));
    }
    assert_eq!(nat.counters().mappings, 2);
    assert_eq!((nat.counters().outbound, nat.counters().inbound), (4, 2));
}

#[test]
fn nat_drops_unmapped_unsupported_and_counts() {
    let mut nat = nat((40000, 40001), 1_000_000);
    let frames = [
        frame(v4([8, 8, 8, 8]), v4(EXT), 6, 53, 40000, b"x"), // inbound, no mapping
        frame(v4([8, 8, 8, 8]), v4([10, 0, 0, 1]), 6, 53, 40000, b"x"), // not for the external address
        frame(IpAddr::V6([1; 16]), IpAddr::V6([2; 16]), 6, 1, 2, b"x"), // IPv6
        frame(v4([192, 168, 1, 1]), v4([8, 8, 8, 8]), 1, 0, 0, b"pingpong"), // ICMP
    ];
    let v: Vec<Verdict> = run(&mut nat, &frames[..2], OUTSIDE, Instant(0)).iter().map(|o| o.verdict).collect();
    assert_eq!(v, [Verdict::Drop(DropReason::NatNoMapping); 2]);
    let v: Vec<Verdict> = run(&mut nat, &frames[2..], INSIDE, Instant(0)).iter().map(|o| o.verdict).collect();
    assert_eq!(v, [Verdict::Drop(DropReason::NfUnsupported); 2]);
    // Three flows, two ports.
    let flows: Vec<_> = (0..3).map(|i| frame(v4([192, 168, 1, 1]), v4([8, 8, 8, 8]), 17, 1000 + i, 53, b"q")).collect();
    let v: Vec<Verdict> = run(&mut nat, &flows, INSIDE, Instant(0)).iter().map(|o| o.verdict).collect();
    assert_eq!(v[2], Verdict::Drop(DropReason::NatPortsExhausted));
    let c = nat.counters();
    assert_eq!((c.no_mapping, c.unsupported, c.ports_exhausted, c.mappings), (2, 2, 1, 2));
    let mut s = String::new();
    nat.write_counters(&mut s).unwrap();
    assert!(s.contains(" nat_ports_exhausted=1 nat_no_mapping=2 nat_unsupported=2"), "{s}");
    let mut cfg = NatConfig { ports: (0, 10), ..NatConfig::default() };
    assert_eq!(cfg.validate(), Err(NatConfigError::BadPortRange));
    cfg.ports = (10, 9);
    assert_eq!(NatShared::try_new(&cfg).err(), Some(NatConfigError::BadPortRange));
    cfg.ports = (10, 10);
    cfg.inside_port = 8;
    assert_eq!(cfg.validate(), Err(NatConfigError::BadInsidePort));
    cfg.inside_port = 0;
    cfg.timeout = Duration(0);
    assert_eq!(cfg.validate(), Err(NatConfigError::ZeroTimeout));
}

#[test]
fn nat_ports_come_back_after_expiry() {
    let mut nat = nat((50000, 50001), 100);
    let server = v4([8, 8, 4, 4]);
    let old: Vec<_> = (0..2).map(|i| frame(v4([10, 0, 0, 1]), server, 6, 2000 + i, 443, b"x")).collect();
    let ports: Vec<u16> = run(&mut nat, &old, INSIDE, Instant(0)).iter().map(|o| src_port_of(&o.frame)).collect();
    let new = frame(v4([10, 0, 0, 2]), server, 6, 3000, 443, b"y");
    assert_eq!(
        run(&mut nat, std::slice::from_ref(&new), INSIDE, Instant(50))[0].verdict,
        Verdict::Drop(DropReason::NatPortsExhausted)
    );
    // Expired but not yet reclaimed mappings still translate.
    let o = &run(&mut nat, &old[..1], INSIDE, Instant(101))[0];
    assert_eq!(src_port_of(&o.frame), ports[0]);
    // The second mapping has been idle for a full timeout: that batch's sweep reclaimed it and
    // its port is back; the first was refreshed by its packet.
    assert_eq!(nat.counters().reclaimed, 1);
    assert_eq!(nat.shared().ports_in_use(), 1);
    assert_eq!(nat.maintain(Instant(150), usize::MAX, usize::MAX), 0);
    let reply = frame(server, v4(EXT), 6, 443, ports[1], b"late");
    assert_eq!(run(&mut nat, &[reply], OUTSIDE, Instant(150))[0].verdict, Verdict::Drop(DropReason::NatNoMapping));
    let o = &run(&mut nat, &[new], INSIDE, Instant(150))[0];
    assert_eq!(src_port_of(&o.frame), ports[1], "the reclaimed port is reused");
    assert_eq!(nat.counters().reclaimed, 1);
    assert_eq!(nat.shared().pool_anomalies(), 0);
}

/// One mapping made at 0 with timeout 100: its outbound key, inbound key and port.
fn one_mapping(nat: &mut Nat) -> ([u64; 2], [u64; 2], u16) {
    let (host, server) = ([10, 0, 0, 1], [8, 8, 4, 4]);
    let o = &run(nat, &[frame(v4(host), v4(server), 17, 4000, 53, b"q")], INSIDE, Instant(0))[0];
    let port = src_port_of(&o.frame);
    let out = key(host, 4000, server, 53, 17);
    (out, inbound_of(&out, EXT, port), port)
}

#[test]
fn a_busy_inbound_bucket_at_reclaim_is_retried_not_forgotten() {
    let mut nat = nat((50000, 50000), 100);
    let (_, inbound, port) = one_mapping(&mut nat);
    let shared = Arc::clone(nat.shared());
    {
        let _busy = shared.inb.table().hold_bucket(&inbound).unwrap();
        // Expired: the sweep reports it, the outbound entry is taken, the inbound delete
        // finds its bucket busy. The port must not go back while the inbound entry lives.
        assert_eq!(nat.maintain(Instant(150), usize::MAX, usize::MAX), 0);
        assert_eq!((nat.counters().reclaimed, nat.pending(), nat.counters().deferred), (1, 1, 1));
        assert_eq!(nat.shared().ports_in_use(), 1);
    }
    // The next batch finishes it: the inbound entry dies, then the port comes back.
    assert_eq!(nat.maintain(Instant(151), usize::MAX, usize::MAX), 1);
    assert_eq!((nat.pending(), nat.shared().ports_in_use()), (0, 0));
    let reply = frame(v4([8, 8, 4, 4]), v4(EXT), 17, 53, port, b"late");
    assert_eq!(run(&mut nat, &[reply], OUTSIDE, Instant(152))[0].verdict, Verdict::Drop(DropReason::NatNoMapping));
    assert_eq!(nat.shared().pool_anomalies(), 0);
}

#[test]
fn a_busy_outbound_bucket_at_reclaim_is_retried_not_forgotten() {
    let mut nat = nat((50000, 50000), 100);
    let (out, _, _) = one_mapping(&mut nat);
    let shared = Arc::clone(nat.shared());
    // Expired and reported (sweep only, no reclaim budget) ...
    nat.maintain(Instant(151), usize::MAX, 0);
    // ... then the report is taken while the bucket is busy: deferred, not lost.
    {
        let _busy = shared.out.table().hold_bucket(&out).unwrap();
        assert_eq!(nat.maintain(Instant(152), 0, usize::MAX), 0);
        assert_eq!((nat.pending(), nat.shared().ports_in_use()), (1, 1));
    }
    assert_eq!(nat.maintain(Instant(153), 0, usize::MAX), 1);
    assert_eq!((nat.pending(), nat.shared().ports_in_use(), nat.counters().reclaimed), (0, 0, 1));
    // The port is usable again by a new flow.
    let o = &run(&mut nat, &[frame(v4([10, 0, 0, 9]), v4([1, 1, 1, 1]), 6, 1, 2, b"n")], INSIDE, Instant(154))[0];
    assert_eq!(o.verdict, Verdict::Forward(1));
}

#[test]
fn a_refreshed_mapping_is_kept_and_reported_again_at_its_next_expiry() {
    let mut nat = nat((50000, 50000), 100);
    let (out, _, port) = one_mapping(&mut nat);
    // Reported at 150 but not yet taken (budget 0) ...
    nat.maintain(Instant(150), usize::MAX, 0);
    // ... then the flow comes back (its packet restarts the timer) before the report is taken.
    let o =
        &run(&mut nat, &[frame(v4([10, 0, 0, 1]), v4([8, 8, 4, 4]), 17, 4000, 53, b"again")], INSIDE, Instant(160))[0];
    assert_eq!(src_port_of(&o.frame), port);
    nat.maintain(Instant(161), 0, usize::MAX);
    assert_eq!((nat.counters().reclaimed, nat.shared().ports_in_use()), (0, 1), "kept: it is live");
    // It expires again later, is reported again and reclaimed.
    nat.maintain(Instant(300), usize::MAX, usize::MAX);
    assert_eq!((nat.counters().reclaimed, nat.shared().ports_in_use()), (1, 0));
    assert!(nat.shared().out.table().get(&out, Instant(300)).is_none());
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(24))]
    /// Random flows over random time with reclamation: a port is never in two live mappings,
    /// a live flow keeps its port, every outbound translation and its reply restore exactly,
    /// and the pool's books balance.
    #[test]
    fn nat_never_hands_out_a_port_twice(seed in any::<u64>(), ports in 2u16..12, flows in 2u64..crate::testing::miri_or(30, 8)) {
        let timeout = 200;
        let mut nat = nat((30000, 30000 + ports - 1), timeout);
        let mut rng = XorShift64::from_state(seed);
        let mut now = 0u64;
        // Last port each flow had, and when it last sent.
        let mut last: HashMap<u64, (u16, u64)> = HashMap::new();
        for _ in 0..crate::testing::miri_or(120, 12) {
            now += rng.next_u64() % 60;
            let n = 1 + rng.next_u64() % 6;
            let ids: Vec<u64> = (0..n).map(|_| rng.next_u64() % flows).collect();
            let fl = |i: u64| (v4([10, 1, (i >> 8) as u8, i as u8]), 1000 + i as u16, [6u8, 17][(i % 2) as usize]);
            let frames: Vec<_> = ids.iter().map(|&i| { let (a, p, pr) = fl(i); frame(a, v4([9, 9, 9, 9]), pr, p, 80, b"d") }).collect();
            let outs = run(&mut nat, &frames, INSIDE, Instant(now));
            for (&i, o) in ids.iter().zip(&outs) {
                match o.verdict {
                    Verdict::Forward(_) => {
                        let port = src_port_of(&o.frame);
                        prop_assert!(checksums_ok(&o.frame));
                        if let Some(&(p, t)) = last.get(&i) {
                            // Idle for less than 7/8 of the timeout: the mapping is still live.
                            if now - t < timeout * 7 / 8 {
                                prop_assert_eq!(port, p, "a live flow changed port");
                            }
                        }
                        last.insert(i, (port, now));
                        // Its reply is restored exactly.
                        let (a, p, pr) = fl(i);
                        let r = run(&mut nat, &[frame(v4([9, 9, 9, 9]), v4(EXT), pr, 80, port, b"r")], OUTSIDE, Instant(now));
                        prop_assert_eq!(&r[0].frame, &frame(v4([9, 9, 9, 9]), a, pr, 80, p, b"r"));
                    }
                    Verdict::Drop(r) => prop_assert_eq!(r, DropReason::NatPortsExhausted),
                    Verdict::Reply(_) => prop_assert!(false, "NAT never answers"),
                }
            }
            // Live mappings hold distinct ports, as many as the pool has handed out.
            let mut seen = HashSet::new();
            let mut count = 0;
            nat.shared().for_each_mapping(Instant(now), |_, _, _, _, _, port| {
                count += 1;
                assert!(seen.insert(port), "port {port} in two live mappings");
            });
            prop_assert_eq!(count, nat.shared().ports_in_use());
            if rng.next_u64().is_multiple_of(4) {
                nat.maintain(Instant(now), usize::MAX, usize::MAX);
            }
        }
        prop_assert_eq!(nat.shared().pool_anomalies(), 0);
        // Long after, everything is reclaimed and every port is back.
        now += 10 * timeout;
        // The batches' sweeps left the cursor anywhere: a maintain sweeps from there to the end
        // of the table, so only a second maintain that returns nothing has seen every bucket.
        let mut idle = 0;
        while idle < 2 {
            idle = if nat.maintain(Instant(now), usize::MAX, usize::MAX) > 0 { 0 } else { idle + 1 };
        }
        prop_assert_eq!(nat.shared().ports_in_use(), 0);
    }
}

/// An ICMP echo message (RFC 792) with its checksum.
fn icmp(kind: u8, id: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let mut m = vec![kind, 0, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(data);
    let c = crate::checksum::checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    m
}

/// The ICMP message of a frame (after a 20-byte IPv4 header) and whether its checksum holds.
fn icmp_of(f: &[u8]) -> (&[u8], bool) {
    let m = &f[14 + 20..];
    (m, crate::checksum::verify(m))
}

#[test]
fn icmp_echo_is_translated_by_its_identifier() {
    let mut nat = nat((40000, 40010), 1_000_000);
    let (host, other, server) = ([192, 168, 1, 10], [192, 168, 1, 11], [8, 8, 8, 8]);
    // Two inside hosts ping the same server with the same identifier: two mappings.
    let a = frame(v4(host), v4(server), 1, 0, 0, &icmp(8, 77, 1, b"ping a"));
    let b = frame(v4(other), v4(server), 1, 0, 0, &icmp(8, 77, 1, b"ping b"));
    let outs = run(&mut nat, &[a, b], INSIDE, Instant(1));
    let mut ids = Vec::new();
    for o in &outs {
        assert_eq!(o.verdict, Verdict::Forward(1));
        let (m, ok) = icmp_of(&o.frame);
        assert!(ok, "ICMP checksum kept valid");
        assert!(checksums_ok(&o.frame), "IPv4 header checksum");
        assert_eq!(&o.frame[14 + 12..14 + 16], &EXT, "source is the external address");
        let id = u16::from_be_bytes([m[4], m[5]]);
        assert!((40000..=40010).contains(&id), "identifier = an external port: {id}");
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
    // The server's replies come back to each inside host with its own identifier.
    for (id, inside, data) in [(ids[0], host, b"pong a"), (ids[1], other, b"pong b")] {
        let reply = frame(v4(server), v4(EXT), 1, 0, 0, &icmp(0, id, 1, data));
        let r = &run(&mut nat, &[reply], OUTSIDE, Instant(2))[0];
        assert_eq!(r.verdict, Verdict::Forward(0));
        let (m, ok) = icmp_of(&r.frame);
        assert!(ok);
        assert_eq!(&r.frame[14 + 16..14 + 20], &inside);
        assert_eq!(u16::from_be_bytes([m[4], m[5]]), 77, "the inside host's identifier restored");
        assert_eq!(&m[8..], data);
    }
    // A reply to an identifier with no mapping, a request arriving from outside, and other ICMP
    // (destination unreachable) are not translated.
    let stray = frame(v4(server), v4(EXT), 1, 0, 0, &icmp(0, 12345, 1, b"?"));
    assert_eq!(run(&mut nat, &[stray], OUTSIDE, Instant(3))[0].verdict, Verdict::Drop(DropReason::NatNoMapping));
    let inbound_req = frame(v4(server), v4(EXT), 1, 0, 0, &icmp(8, ids[0], 2, b"x"));
    assert_eq!(run(&mut nat, &[inbound_req], OUTSIDE, Instant(3))[0].verdict, Verdict::Drop(DropReason::NfUnsupported));
    let unreach = frame(v4(host), v4(server), 1, 0, 0, &icmp(3, 0, 0, b"y"));
    assert_eq!(run(&mut nat, &[unreach], INSIDE, Instant(3))[0].verdict, Verdict::Drop(DropReason::NfUnsupported));
    assert_eq!(nat.counters().mappings, 2);
}

/// An ICMP error (`ty`, `code`) from `src` to `dst` quoting `quote` (checksums set).
fn icmp_error(src: [u8; 4], dst: [u8; 4], ty: u8, code: u8, quote: &[u8]) -> Vec<u8> {
    let mut msg = std::vec![ty, code, 0, 0, 0, 0, 0, 0];
    msg.extend_from_slice(quote);
    let c = crate::checksum::checksum(&msg);
    msg[2..4].copy_from_slice(&c.to_be_bytes());
    frame(v4(src), v4(dst), 1, 0, 0, &msg)
}

/// The IP packet of `f` (from the IP header), its first `n` bytes.
fn ip_part(f: &[u8], n: usize) -> Vec<u8> {
    f[14..(14 + n).min(f.len())].to_vec()
}

/// What etherparse reads in the ICMP error `f`: (outer source, outer destination, ICMP
/// message bytes); the outer IPv4 and ICMP checksums verified.
fn read_error(f: &[u8]) -> ([u8; 4], [u8; 4], Vec<u8>) {
    let p = etherparse::SlicedPacket::from_ethernet(f).expect("etherparse reads it");
    let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else { panic!("not IPv4") };
    let h = ip.header().to_header();
    assert_eq!(h.header_checksum, h.calc_header_checksum(), "outer IPv4 checksum");
    let Some(etherparse::TransportSlice::Icmpv4(i)) = &p.transport else { panic!("not ICMP") };
    assert!(crate::checksum::verify(i.slice()), "ICMP checksum");
    (h.source, h.destination, i.slice().to_vec())
}

#[test]
fn icmp_errors_coming_in_restore_the_quoted_packet_exactly() {
    let mut nat = nat((40000, 40010), 1_000_000);
    let (host, server, router) = ([192, 168, 1, 10], [8, 8, 8, 8], [198, 51, 100, 1]);
    for proto in [17u8, 6] {
        let out = frame(v4(host), v4(server), proto, 5000, 53, b"query");
        let sent = run(&mut nat, std::slice::from_ref(&out), INSIDE, Instant(1)).remove(0).frame;
        // Port unreachable from the server, quoting 28 bytes (RFC 792); time exceeded from a
        // router on the way quoting the whole datagram (as Linux does).
        let whole = sent.len() - 14;
        for (from, ty, code, n) in [(server, 3, 3, 28), (router, 11, 0, whole)] {
            let err = icmp_error(from, EXT, ty, code, &ip_part(&sent, n));
            let o = &run(&mut nat, &[err], OUTSIDE, Instant(2))[0];
            assert_eq!(o.verdict, Verdict::Forward(0), "proto {proto} type {ty}");
            let (src, dst, msg) = read_error(&o.frame);
            assert_eq!((src, dst, msg[0], msg[1]), (from, host, ty, code));
            // The quote is the packet as the host sent it, byte for byte: address, port, IP
            // checksum, and the TCP/UDP checksum where it was quoted.
            assert_eq!(&msg[8..], &ip_part(&out, n)[..], "proto {proto} type {ty}");
        }
    }
    // An ICMP echo request's identifier: restored with the echo checksum.
    let mut echo = std::vec![8, 0, 0, 0, 0, 77, 0, 1];
    echo.extend_from_slice(b"ping");
    let c = crate::checksum::checksum(&echo);
    echo[2..4].copy_from_slice(&c.to_be_bytes());
    let out = frame(v4(host), v4(server), 1, 0, 0, &echo);
    let sent = run(&mut nat, std::slice::from_ref(&out), INSIDE, Instant(3)).remove(0).frame;
    assert_ne!(sent[38..40], [0, 77], "the identifier was mapped");
    let err = icmp_error(router, EXT, 11, 0, &ip_part(&sent, 28));
    let o = &run(&mut nat, &[err], OUTSIDE, Instant(4))[0];
    let (_, dst, msg) = read_error(&o.frame);
    assert_eq!((dst, &msg[8..]), (host, &ip_part(&out, 28)[..]));
    assert_eq!(nat.counters().icmp_errors, 5);

    // Quoting a flow no mapping has, or sent to another address: dropped, no mapping made.
    let stray = frame(v4(EXT), v4(server), 17, 40009, 53, b"?");
    let err = icmp_error(server, EXT, 3, 3, &ip_part(&stray, 28));
    let o = &run(&mut nat, &[err], OUTSIDE, Instant(5))[0];
    assert_eq!(o.verdict, Verdict::Drop(DropReason::NatNoMapping));
    let elsewhere = icmp_error(server, [203, 0, 113, 9], 3, 3, &ip_part(&stray, 28));
    let o = &run(&mut nat, &[elsewhere], OUTSIDE, Instant(5))[0];
    assert_eq!(o.verdict, Verdict::Drop(DropReason::NatNoMapping));
    assert_eq!(nat.counters().mappings, 3);
    // Other ICMP (a redirect) stays unsupported.
    let redirect = icmp_error(router, EXT, 5, 1, &ip_part(&sent, 28));
    let o = &run(&mut nat, &[redirect], OUTSIDE, Instant(6))[0];
    assert_eq!(o.verdict, Verdict::Drop(DropReason::NfUnsupported));
}

#[test]
fn icmp_errors_going_out_translate_the_quoted_packet_back() {
    let mut nat = nat((40000, 40010), 1_000_000);
    let (host, server) = ([192, 168, 1, 10], [8, 8, 8, 8]);
    let out = frame(v4(host), v4(server), 17, 5000, 53, b"query");
    let port = src_port_of(&run(&mut nat, &[out], INSIDE, Instant(1))[0].frame);
    // The server's datagram to the mapping, as it arrives and as the host gets it.
    let arrived = frame(v4(server), v4(EXT), 17, 53, port, b"late answer");
    let restored = run(&mut nat, std::slice::from_ref(&arrived), OUTSIDE, Instant(2)).remove(0).frame;
    // The host answers "port unreachable" quoting what it got: out it goes from the
    // external address, quoting the datagram as the server sent it.
    let err = icmp_error(host, server, 3, 3, &ip_part(&restored, 28));
    let o = &run(&mut nat, &[err], INSIDE, Instant(3))[0];
    assert_eq!(o.verdict, Verdict::Forward(1));
    let (src, dst, msg) = read_error(&o.frame);
    assert_eq!((src, dst), (EXT, server));
    assert_eq!(&msg[8..], &ip_part(&arrived, 28)[..]);
    // About a packet no mapping let in: dropped.
    let other = frame(v4(server), v4(host), 17, 53, 6000, b"?");
    let err = icmp_error(host, server, 3, 3, &ip_part(&other, 28));
    let o = &run(&mut nat, &[err], INSIDE, Instant(4))[0];
    assert_eq!(o.verdict, Verdict::Drop(DropReason::NatNoMapping));
    assert_eq!((nat.counters().icmp_errors, nat.counters().mappings), (1, 1));
}

/// A chain of NAT then the L3 forwarder, with the ports' addresses (a router): its own ICMP
/// errors about packets NAT translated go to the inside host, quoting what it sent.
#[test]
fn the_chains_own_icmp_errors_reach_the_inside_host_through_the_nat() {
    use crate::buf::{BUF_SIZE, Batch, Pool};
    use crate::nf::Egress;
    use crate::nf::config::ChainSpec;
    use crate::stage::{Stage, StageCounters};
    let text = "version=1\nport.addr=port:0,addr:192.168.1.1/24\nport.addr=port:1,addr:198.51.100.1/24\n\
                port.mtu=port:1,mtu:1400\n\
                nf=nat\nnat.external=203.0.113.7\nnat.ports=40000-40010\nnat.inside_port=0\n\
                nf=l3fwd\nl3fwd.route=prefix:0.0.0.0/0,port:1,mac:02:00:00:00:00:99\n";
    let spec = ChainSpec::parse(text).expect("parses");
    let own = [[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]];
    let f = spec.build(Egress::new(own, Egress::DEFAULT_PEERS, None), crate::time::TickRate::try_new(1000).unwrap());
    let mut chain = f.unwrap().chain_for_worker();
    chain.enter_lane(0);
    let mut mem = std::vec![0u8; 16 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 16).unwrap();
    let host_mac = [2, 0xaa, 0, 0, 0, 1];
    let (host, server) = ([192, 168, 1, 10], [8, 8, 8, 8]);
    let mut send = |f: &[u8]| {
        let mut input = Batch::new();
        let b = pool.alloc().unwrap();
        pool.set_len(b, f.len()).unwrap();
        pool.frame_mut(b).copy_from_slice(f);
        input.push(b).unwrap();
        let mut out = [const { Batch::new() }; crate::stage::PORTS];
        let mut c = StageCounters::default();
        let _ = chain.process(0, &mut pool, &mut input, &mut out, &mut c, Instant(5));
        let sent = [0, 1].map(|p| out[p].as_slice().iter().map(|&b| pool.frame(b).to_vec()).collect::<Vec<_>>());
        for q in &mut out {
            pool.free_batch(q);
        }
        sent
    };
    let with = |mut f: Vec<u8>, ttl: u8, df: bool| {
        f[..6].copy_from_slice(&own[0]);
        f[6..12].copy_from_slice(&host_mac);
        f[22] = ttl;
        f[20] = if df { 0x40 } else { 0 };
        f[24..26].fill(0);
        let c = crate::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    };
    // TTL 1: Time Exceeded from 192.168.1.1 to the host (not to the external address NAT
    // gave the probe), quoting the probe exactly as the host sent it.
    let probe = with(frame(v4(host), v4(server), 17, 33434, 33434, b"probe"), 1, false);
    let sent = send(&probe);
    assert!(sent[1].is_empty());
    let (src, dst, msg) = read_error(&sent[0][0]);
    assert_eq!((src, dst, msg[0]), ([192, 168, 1, 1], host, 11));
    assert_eq!(&msg[8..], &ip_part(&probe, 28)[..], "the quote restored to what the host sent");
    // Too big for port 1 with DF: fragmentation needed, to the host, MTU 1400.
    let big = with(frame(v4(host), v4(server), 17, 5000, 53, &std::vec![1; 1500 - 28]), 64, true);
    let sent = send(&big);
    let (src, dst, msg) = read_error(&sent[0][0]);
    assert_eq!((src, dst, msg[0], msg[1], u16::from_be_bytes([msg[6], msg[7]])), ([192, 168, 1, 1], host, 3, 4, 1400));
    // The quote: as the host sent it but for the TTL the forwarder took (and its checksum).
    let (q, want) = (&msg[8..], ip_part(&big, 28));
    assert_eq!((&q[..8], q[8], &q[12..]), (&want[..8], want[8] - 1, &want[12..]));
    let mut counters = std::string::String::new();
    chain.write_counters(&mut counters).unwrap();
    assert!(counters.contains(" nat_icmp_errors=2"), "{counters}");
}

/// `f` (a whole IPv4 datagram) cut into fragments of at most `mtu` bytes of IP, as frames.
fn fragments_of(f: &[u8], mtu: u16) -> Vec<Vec<u8>> {
    use crate::buf::{BUF_SIZE, Pool};
    let mut mem = std::vec![0u8; 8 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
    let b = pool.alloc().unwrap();
    pool.set_len(b, f.len()).unwrap();
    pool.frame_mut(b).copy_from_slice(f);
    let frags = crate::nf::frag::fragment4(&mut pool, b, 14, mtu).expect("cut");
    frags.iter().map(|&x| pool.frame(x).to_vec()).collect()
}

/// The datagram the fragments `frags` (in order) make: the first's header with the whole
/// length and no fragmentation (DF as it was), then every fragment's data.
fn reassembled(frags: &[Vec<u8>]) -> Vec<u8> {
    let mut f = frags[0].clone();
    for x in &frags[1..] {
        f.extend_from_slice(&x[34..]);
    }
    let total = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&total.to_be_bytes());
    f[20] &= 0x40; // DF kept, MF and the offset gone
    f[21] = 0;
    f[24..26].fill(0);
    let c = crate::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn fragmented_datagrams_are_translated_both_ways() {
    let mut nat = nat((40000, 40010), 1_000_000);
    let (host, server) = ([192, 168, 1, 10], [8, 8, 8, 8]);
    let payload: Vec<u8> = (0..400u16).map(|i| i as u8).collect();
    // Out: three fragments; the first carries the ports. Reassembled, the datagram is the
    // whole one translated (its UDP checksum right over the new pseudo-header and port).
    let whole = frame(v4(host), v4(server), 17, 5000, 53, &payload);
    let out = run(&mut nat, &fragments_of(&whole, 160), INSIDE, Instant(1));
    assert!(out.iter().all(|o| o.verdict == Verdict::Forward(1)));
    let sent: Vec<Vec<u8>> = out.iter().map(|o| o.frame.clone()).collect();
    let port = u16::from_be_bytes([sent[0][34], sent[0][35]]);
    assert!((40000..=40010).contains(&port));
    let back = reassembled(&sent);
    assert!(checksums_ok(&back), "the UDP checksum holds over the reassembled datagram");
    assert_eq!(back, frame(v4(EXT), v4(server), 17, port, 53, &payload));
    // In: the answer in fragments to the mapping, restored to the host.
    let answer = frame(v4(server), v4(EXT), 17, 53, port, &payload);
    let frags = fragments_of(&answer, 160);
    let got = run(&mut nat, &frags, OUTSIDE, Instant(2));
    assert!(got.iter().all(|o| o.verdict == Verdict::Forward(0)));
    let got: Vec<Vec<u8>> = got.iter().map(|o| o.frame.clone()).collect();
    assert_eq!(reassembled(&got), frame(v4(server), v4(host), 17, 53, 5000, &payload));
    assert_eq!(nat.counters().fragments, 4);
    // A later fragment whose first never came (another identification): dropped, counted.
    let mut stray = frags[1].clone();
    stray[18] ^= 0xFF;
    stray[24..26].fill(0);
    let c = crate::checksum::checksum(&stray[14..34]);
    stray[24..26].copy_from_slice(&c.to_be_bytes());
    let o = &run(&mut nat, &[stray], OUTSIDE, Instant(3))[0];
    assert_eq!(o.verdict, Verdict::Drop(DropReason::NatNoMapping));
    assert_eq!(nat.counters().frag_unmatched, 1);
}
