//! IPv6 next hops resolved through the neighbour table, frame by frame: the solicitation a
//! miss sends (read back by etherparse), the advertisement that resolves it and sends the
//! queue, the advertisements RFC 4861 §7.1.2 discards or nobody asked for, failure after
//! `probes`, learning from a solicitation (§7.2.3), a port with no IPv6 address.

use super::*;

/// Port 0 is fd78::1/64, port 1 fd79::1/64 (and 10.0.1.1/24); both prefixes directly
/// connected, fd7a::/64 through the gateway fd79::fe, fd7b::/64 directly on port 2's
/// stand-in (port 0 of a chain whose port 1 has no IPv6 address: see below).
fn chain6(extra: &str) -> (crate::nf::Chain, Arc<NeighShared>) {
    let text = std::format!(
        "version=1\nport.addr=port:0,addr:fd78::1/64\nport.addr=port:1,addr:10.0.1.1/24\n\
         port.addr=port:1,addr:fd79::1/64\n\
         neigh.retrans_ms=100\nneigh.reachable_ms=1000\nneigh.stale_ms=2000\n{extra}\
         nf=l3fwd\nl3fwd.route=prefix:fd78::/64,port:0,via:direct\n\
         l3fwd.route=prefix:fd79::/64,port:1,via:direct\n\
         l3fwd.route=prefix:fd7a::/64,port:1,via:fd79::fe\n"
    );
    let spec = ChainSpec::parse(&text).expect("parses");
    let f = spec.build(Egress::new(OWN, Egress::DEFAULT_PEERS, None), TickRate::try_new(1000).unwrap()).unwrap();
    let mut c = f.chain_for_worker();
    c.enter_lane(0);
    (c, Arc::clone(f.neigh().unwrap()))
}

fn v6(s: &str) -> [u8; 16] {
    s.parse::<std::net::Ipv6Addr>().unwrap().octets()
}

/// UDP from host A (fd78::2) to `dst`, hop limit 64, as received on port 0.
fn udp6(dst: &str) -> Vec<u8> {
    let mut f = frame(IpAddr::V6(v6("fd78::2")), IpAddr::V6(v6(dst)), 17, 1000, 53, b"x");
    f[..6].copy_from_slice(&OWN[0]);
    f[6..12].copy_from_slice(&HOST_A);
    f
}

/// An ICMPv6 message `msg` in an IPv6 packet from `src` at `mac` to `dst`, hop limit `hop`,
/// checksum filled in.
fn icmp6(mac: [u8; 6], to_mac: [u8; 6], src: [u8; 16], dst: [u8; 16], hop: u8, msg: &[u8]) -> Vec<u8> {
    let mut f = std::vec![0u8; 54 + msg.len()];
    f[..6].copy_from_slice(&to_mac);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..20].copy_from_slice(&(msg.len() as u16).to_be_bytes());
    f[20] = nd::ICMPV6;
    f[21] = hop;
    f[22..38].copy_from_slice(&src);
    f[38..54].copy_from_slice(&dst);
    f[54..].copy_from_slice(msg);
    let c = crate::checksum::l4_checksum_v6(&src, &dst, nd::ICMPV6, &f[54..]);
    f[56..58].copy_from_slice(&c.to_be_bytes());
    f
}

/// A neighbour advertisement for `target` from `src` (at `mac`) to `dst`: `flags` (0x40
/// solicited, 0x20 override), with the target link-layer option `tlla`, hop limit `hop`.
fn advert(mac: [u8; 6], src: &str, dst: &str, target: &str, flags: u8, tlla: Option<[u8; 6]>, hop: u8) -> Vec<u8> {
    let mut m = std::vec![nd::NA, 0, 0, 0, flags, 0, 0, 0];
    m.extend_from_slice(&v6(target));
    if let Some(t) = tlla {
        m.extend_from_slice(&[2, 1]);
        m.extend_from_slice(&t);
    }
    icmp6(mac, OWN[1], v6(src), v6(dst), hop, &m)
}

fn state6(n: &NeighShared, ip: &str) -> Option<State> {
    n.entries().iter().find(|e| e.ip == IpAddr::V6(v6(ip))).map(|e| e.state)
}

fn counters(chain: &crate::nf::Chain) -> std::string::String {
    let mut text = std::string::String::new();
    chain.write_counters(&mut text).unwrap();
    text
}

/// `f` is a neighbour solicitation for `target` from `src` out of port 1, as RFC 4861 §7.2.2
/// has it and etherparse reads it: to the solicited-node address and its Ethernet address,
/// hop limit 255, valid checksum, our MAC in the source link-layer option.
fn assert_solicits(f: &[u8], src: &str, target: &str) {
    let t = v6(target);
    let group = nd::solicited_node(&t);
    assert_eq!(&group[..13], &[0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff]);
    assert_eq!((&f[..6], &f[6..12]), (&[0x33, 0x33, 0xff, t[13], t[14], t[15]][..], &OWN[1][..]));
    let p = etherparse::SlicedPacket::from_ethernet(f).expect("etherparse reads it");
    let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else { panic!("not IPv6") };
    let h = ip.header();
    assert_eq!((h.source(), h.destination(), h.hop_limit()), (v6(src), group, 255));
    let Some(etherparse::TransportSlice::Icmpv6(i)) = &p.transport else { panic!("not ICMPv6") };
    assert_eq!((i.type_u8(), i.code_u8()), (135, 0));
    assert_eq!(i.header().checksum, i.header().icmp_type.calc_checksum(v6(src), group, i.payload()).unwrap());
    let body = i.payload();
    assert_eq!((&body[..16], &body[16..18], &body[18..24]), (&t[..], &[1u8, 1][..], &OWN[1][..]));
    assert_eq!(f.len(), nd::NS_FRAME_LEN);
}

#[test]
fn a_v6_miss_solicits_and_the_advertisement_sends_the_queue() {
    let (mut chain, n) = chain6("");
    let mut mem = std::vec![0u8; 64 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();
    let to_b = udp6("fd79::2");

    // Six frames for an unknown neighbour: one solicitation, four wait, two find the queue full.
    let o = step(&mut chain, &mut pool, &std::vec![to_b.clone(); 6], 0, 10);
    assert_eq!(o.sent[1].len(), 1, "one solicitation");
    assert_solicits(&o.sent[1][0], "fd79::1", "fd79::2");
    assert_eq!((o.c.drops_for(DropReason::NeighQueueFull), o.c.generated), (2, 1));
    assert_eq!(state6(&n, "fd79::2"), Some(State::Incomplete));
    assert_eq!(pool.in_use(), QUEUE);

    // An advertisement with hop limit 254 (§7.1.2), one without a link-layer address, one
    // for an address nobody asked about, unsolicited to all nodes: none resolves anything.
    let bad = [
        advert(HOST_B, "fd79::2", "fd79::1", "fd79::2", 0x60, Some(HOST_B), 254),
        advert(HOST_B, "fd79::2", "fd79::1", "fd79::2", 0x60, None, 255),
        advert(HOST_B, "fd79::9", "fd79::1", "fd79::9", 0x60, Some(HOST_B), 255),
        advert(HOST_B, "fd79::8", "ff02::1", "fd79::8", 0x20, Some(HOST_B), 255),
    ];
    let o = step(&mut chain, &mut pool, &bad, 1, 20);
    assert!(o.sent.iter().all(Vec::is_empty));
    assert_eq!((o.c.drops_for(DropReason::NdBad), o.c.drops_for(DropReason::NdUnsolicited)), (2, 2));
    assert_eq!(state6(&n, "fd79::2"), Some(State::Incomplete));
    assert_eq!((state6(&n, "fd79::9"), state6(&n, "fd79::8")), (None, None), "no entry made");

    // The solicited answer: consumed, the entry reachable, the four frames out to its MAC.
    let na = advert(HOST_B, "fd79::2", "fd79::1", "fd79::2", 0x60, Some(HOST_B), 255);
    let o = step(&mut chain, &mut pool, &[na], 1, 30);
    assert_eq!(o.c.ctl, 1);
    assert_eq!(o.sent[1].len(), QUEUE);
    for f in &o.sent[1] {
        assert_eq!((&f[..6], &f[6..12], f[21]), (&HOST_B[..], &OWN[1][..], 63));
    }
    assert_eq!(state6(&n, "fd79::2"), Some(State::Reachable));
    assert_eq!(pool.in_use(), 0);

    // Known now: straight out, from the worker's cache; and back to A (asked for on port 0).
    let o = step(&mut chain, &mut pool, &[to_b], 0, 40);
    assert_eq!((o.sent[1].len(), &o.sent[1][0][..6]), (1, &HOST_B[..]));
    let text = counters(&chain);
    assert!(text.contains(" neigh_nd_solicits=1 neigh_nd_resolved=1 neigh_nd_unsolicited=2"), "{text}");
    assert!(text.contains(" neigh_queued=4 neigh_dequeued=4 "), "{text}");
}

#[test]
fn a_v6_gateway_is_asked_for_retried_and_fails() {
    let (mut chain, n) = chain6("neigh.probes=2\n");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let o = step(&mut chain, &mut pool, &[udp6("fd7a::7")], 0, 0);
    assert_solicits(&o.sent[1][0], "fd79::1", "fd79::fe");
    let o = step(&mut chain, &mut pool, &[], 0, 100);
    assert_eq!((o.sent[1].len(), o.c.generated), (1, 1), "one retransmission");
    assert_solicits(&o.sent[1][0], "fd79::1", "fd79::fe");
    let o = step(&mut chain, &mut pool, &[], 0, 200);
    assert_eq!(o.c.drops_for(DropReason::NeighUnresolved), 1);
    assert_eq!(state6(&n, "fd79::fe"), Some(State::Failed));
    assert_eq!(pool.in_use(), 0);
    // An advertisement later (unsolicited, Override) still resolves the failed entry.
    let na = advert(HOST_B, "fd79::fe", "ff02::1", "fd79::fe", 0x20, Some(HOST_B), 255);
    step(&mut chain, &mut pool, &[na], 1, 250);
    assert_eq!(state6(&n, "fd79::fe"), Some(State::Stale));
    let o = step(&mut chain, &mut pool, &[udp6("fd7a::7")], 0, 260);
    assert_eq!(&o.sent[1][0][..6], &HOST_B);
}

#[test]
fn a_solicitation_for_our_address_teaches_its_sender() {
    let (mut chain, n) = chain6("");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let mut ns = std::vec![135, 0, 0, 0, 0, 0, 0, 0];
    ns.extend_from_slice(&v6("fd79::1"));
    ns.extend_from_slice(&[1, 1]);
    ns.extend_from_slice(&HOST_B);
    let f = icmp6(HOST_B, [0x33, 0x33, 0xff, 0, 0, 1], v6("fd79::2"), nd::solicited_node(&v6("fd79::1")), 255, &ns);
    let o = step(&mut chain, &mut pool, &[f], 1, 0);
    assert_eq!((o.sent[1].len(), o.sent[1][0][54]), (1, nd::NA), "answered");
    assert_eq!(state6(&n, "fd79::2"), Some(State::Stale), "RFC 4861 §7.2.3");
    // Its frames go without asking.
    let o = step(&mut chain, &mut pool, &[udp6("fd79::2")], 0, 10);
    assert_eq!((o.sent[1].len(), &o.sent[1][0][..6]), (1, &HOST_B[..]));
    assert!(counters(&chain).contains(" neigh_nd_solicits=0 "));
}

#[test]
fn a_port_with_no_ipv6_address_does_not_ask() {
    // Port 0 has only IPv4: a direct IPv6 route to it has nothing to solicit from.
    let text = "version=1\nport.addr=port:0,addr:10.0.0.1/24\nport.addr=port:1,addr:fd79::1/64\n\
                nf=l3fwd\nl3fwd.route=prefix:fd78::/64,port:0,via:direct\n";
    let spec = ChainSpec::parse(text).expect("parses");
    let f = spec.build(Egress::new(OWN, Egress::DEFAULT_PEERS, None), TickRate::try_new(1000).unwrap()).unwrap();
    let mut chain = f.chain_for_worker();
    chain.enter_lane(0);
    let mut mem = std::vec![0u8; 16 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 16).unwrap();
    let mut back = frame(IpAddr::V6(v6("fd79::2")), IpAddr::V6(v6("fd78::2")), 17, 53, 1000, b"x");
    back[..6].copy_from_slice(&OWN[1]);
    back[6..12].copy_from_slice(&HOST_B);
    let o = step(&mut chain, &mut pool, &[back], 1, 0);
    assert!(o.sent.iter().all(Vec::is_empty));
    assert_eq!(o.c.drops_for(DropReason::NeighUnresolved), 1);
    assert!(f.neigh().unwrap().entries().is_empty());
    assert_eq!(pool.in_use(), 0);
}
