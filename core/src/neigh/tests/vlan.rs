//! VLAN sub-interfaces through a whole router chain (`crate::vlan`), frame by frame: ARP on a
//! sub-interface answered with the tag, a packet routed onto a sub-interface tagged and sent
//! out of its port, one from a sub-interface sent untagged, a tag nobody declared dropped,
//! and the configuration's checks naming their record.

use super::*;
use crate::stage::PORTS;
use crate::vlan::TPID;

/// `chain_text` plus interface 8 = VLAN 100 on port 1, with 10.0.5.1/24 on it, its subnet
/// directly connected, and host 10.0.5.2 a static neighbour there; 10.0.0.2 a static
/// neighbour on port 0.
fn chain_vlan() -> (crate::nf::Chain, Arc<NeighShared>) {
    chain_vlan_with("")
}

/// [`chain_vlan`] with `nfs` (chain text: `nf=` records and theirs) before the L3 forwarder.
fn chain_vlan_with(nfs: &str) -> (crate::nf::Chain, Arc<NeighShared>) {
    let i = PORTS;
    let text = std::format!(
        "version=1\nport.addr=port:0,addr:10.0.0.1/24\nport.vlan=iface:{i},port:1,vid:100\n\
         port.addr=port:{i},addr:10.0.5.1/24\nport.addr=port:{i},addr:fd78::1/64\n\
         neigh.static=port:{i},ip:10.0.5.2,mac:02:cc:00:00:00:05\n\
         neigh.static=port:0,ip:10.0.0.2,mac:02:aa:00:00:00:01\n\
         {nfs}nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/24,port:0,via:direct\n\
         l3fwd.route=prefix:10.0.5.0/24,port:{i},via:direct\n"
    );
    let spec = ChainSpec::parse(&text).expect("parses");
    assert_eq!(spec.highest_port(), Some((1, "port.vlan")), "the sub-interface counts as port 1");
    let f = spec.build(Egress::new(OWN, Egress::DEFAULT_PEERS, None), TickRate::try_new(1000).unwrap()).unwrap();
    let mut c = f.chain_for_worker();
    c.enter_lane(0);
    (c, Arc::clone(f.neigh().unwrap()))
}

/// `frame` with an 802.1Q tag for `vid` after its MACs.
fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&TPID.to_be_bytes());
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

#[test]
fn arp_on_a_sub_interface_is_answered_with_its_tag_from_its_port() {
    let (mut chain, n) = chain_vlan();
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let ask = tagged(&arp_frame(arp::OP_REQUEST, HOST_B, [10, 0, 5, 9], [0; 6], [10, 0, 5, 1]), 100);
    let o = step(&mut chain, &mut pool, &[ask], 1, 0);
    assert_eq!((o.sent[0].len(), o.sent[1].len()), (0, 1), "{:?}", o.c);
    let reply = &o.sent[1][0];
    assert_eq!((&reply[..6], &reply[6..12]), (&HOST_B[..], &OWN[1][..]), "to the asker, from port 1's MAC");
    assert_eq!(&reply[12..16], &[0x81, 0x00, 0x00, 100], "tagged VLAN 100");
    let untagged = [&reply[..12], &reply[16..]].concat();
    let a = Arp::parse(&untagged).expect("an ARP reply after the tag");
    assert_eq!((a.op, a.sha, a.spa, a.tpa), (arp::OP_REPLY, OWN[1], [10, 0, 5, 1], [10, 0, 5, 9]));
    // The asker was learned behind the sub-interface.
    let e = n.entries().into_iter().find(|e| e.ip == IpAddr::V4([10, 0, 5, 9])).expect("learned");
    assert_eq!((e.port, e.mac), (PORTS as u8, HOST_B));
    // The same request untagged on port 1 asks for an address port 1 does not have.
    let plain = arp_frame(arp::OP_REQUEST, HOST_B, [10, 0, 5, 9], [0; 6], [10, 0, 5, 1]);
    let o = step(&mut chain, &mut pool, &[plain], 1, 0);
    assert_eq!((o.sent[1].len(), o.c.drops_for(DropReason::ArpNotOurs)), (0, 1));
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn an_ipv6_solicitation_on_a_sub_interface_is_answered_with_its_tag() {
    let (mut chain, _n) = chain_vlan();
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let ns = solicitation(&FD78_1, &FD78_2);
    let o = step(&mut chain, &mut pool, &[tagged(&ns, 100)], 1, 0);
    assert_eq!((o.sent[0].len(), o.sent[1].len()), (0, 1), "{:?}", o.c);
    let a = &o.sent[1][0];
    assert_eq!((&a[..6], &a[6..12], &a[12..16]), (&HOST_A[..], &OWN[1][..], &[0x81, 0x00, 0x00, 100][..]));
    assert_eq!((a[18 + 40], &a[18 + 8..18 + 24]), (136, &FD78_1[..]), "an advertisement from fd78::1");
    // Untagged on port 1, where the address is not: not answered.
    let o = step(&mut chain, &mut pool, &[ns], 1, 0);
    assert!(o.sent.iter().all(Vec::is_empty));
    assert_eq!(o.c.drops_for(DropReason::LocalUnsupported), 1);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn packets_are_routed_onto_and_off_a_sub_interface_with_the_tag_pushed_and_popped() {
    let (mut chain, _n) = chain_vlan();
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    // Port 0 → 10.0.5.2 on VLAN 100 of port 1.
    let there = udp([10, 0, 0, 2], [10, 0, 5, 2]);
    let o = step(&mut chain, &mut pool, core::slice::from_ref(&there), 0, 0);
    assert_eq!((o.sent[0].len(), o.sent[1].len()), (0, 1), "{:?}", o.c);
    let f = &o.sent[1][0];
    assert_eq!(f.len(), there.len() + 4);
    assert_eq!((&f[..6], &f[6..12]), (&[2, 0xcc, 0, 0, 0, 5][..], &OWN[1][..]));
    assert_eq!(&f[12..16], &[0x81, 0x00, 0x00, 100]);
    assert_eq!(&f[16..18], &[0x08, 0x00]);
    assert_eq!(f[16 + 2 + 8], there[14 + 8] - 1, "TTL decremented");
    assert_eq!(&f[18 + 12..], &there[14 + 12..], "addresses and payload as sent");
    // Back: tagged VLAN 100 on port 1 → 10.0.0.2 on port 0, untagged.
    let mut back = udp([10, 0, 5, 2], [10, 0, 0, 2]);
    back[..6].copy_from_slice(&OWN[1]);
    let o = step(&mut chain, &mut pool, &[tagged(&back, 100)], 1, 0);
    assert_eq!((o.sent[0].len(), o.sent[1].len()), (1, 0), "{:?}", o.c);
    let f = &o.sent[0][0];
    assert_eq!(f.len(), back.len());
    assert_eq!((&f[..6], &f[6..12], &f[12..14]), (&[2, 0xaa, 0, 0, 0, 1][..], &OWN[0][..], &[0x08, 0x00][..]));
    assert_eq!(&f[14 + 12..], &back[14 + 12..]);
    // A priority tag (VID 0) on port 0 stays on port 0: routed like an untagged frame.
    let o = step(&mut chain, &mut pool, &[tagged(&there, 0x6000)], 0, 0);
    assert_eq!(o.sent[1].len(), 1, "{:?}", o.c);
    assert_eq!(&o.sent[1][0][12..16], &[0x81, 0x00, 0x00, 100]);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn a_tag_no_sub_interface_declares_is_dropped_and_counted() {
    let (mut chain, _n) = chain_vlan();
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let f = udp([10, 0, 5, 2], [10, 0, 0, 2]);
    // VLAN 200 on port 1, and VLAN 100 on port 0 (declared on port 1 only).
    let o = step(&mut chain, &mut pool, &[tagged(&f, 200)], 1, 0);
    assert_eq!((o.sent[0].len(), o.c.drops_for(DropReason::VlanUnknown)), (0, 1));
    let o = step(&mut chain, &mut pool, &[tagged(&f, 100)], 0, 0);
    assert_eq!((o.sent[1].len(), o.c.drops_for(DropReason::VlanUnknown)), (0, 1));
    // A tag with nothing after it.
    let o = step(&mut chain, &mut pool, &[tagged(&f, 100)[..16].to_vec()], 1, 0);
    assert_eq!(o.c.drops_total(), 1, "{:?}", o.c);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn sub_interface_records_and_routes_to_undeclared_ones_are_refused_by_name() {
    let i = PORTS;
    let bad = |text: &str| ChainSpec::parse(text).map(|_| ()).map_err(|e| std::format!("{e}")).unwrap_err();
    let base = "version=1\nport.addr=port:0,addr:10.0.0.1/24\n";
    for (extra, want) in [
        (std::format!("port.vlan=iface:{i},port:1,vid:4095\n"), "line 3: port.vlan: port.vlan[0]: vid not 1..=4094"),
        ("port.vlan=iface:1,port:1,vid:5\n".to_string(), "line 3: port.vlan: port.vlan[0]: iface not"),
        (std::format!("port.vlan=iface:{i},port:{i},vid:5\n"), "line 3: port.vlan: port.vlan[0]: port not below"),
        (
            std::format!("port.vlan=iface:{i},port:1,vid:5\nport.vlan=iface:{},port:1,vid:5\n", i + 1),
            "line 4: port.vlan: port.vlan[1]: vid not 1..=4094, or the same port and vid twice",
        ),
        (std::format!("port.addr=port:{},addr:10.0.9.1/24\n", i + 1), "line 3: port.addr"),
        (std::format!("port.vlan=iface:{i},port:1\n"), "line 3: port.vlan"),
    ] {
        let e = bad(&std::format!("{base}{extra}"));
        assert!(e.starts_with(want), "{extra}: {e}");
    }
    // A route to a sub-interface nobody declared names the route and the port.
    let e = bad(&std::format!("{base}nf=l3fwd\nl3fwd.route=prefix:10.0.9.0/24,port:{},via:direct\n", i + 1));
    assert_eq!(
        e,
        std::format!(
            "line 3: l3fwd.route: port {} is neither a port nor a sub-interface a port.vlan record declares",
            i + 1
        )
    );
}

/// The ACL sees the VLAN ID a frame arrived with on a sub-interface, though its tag came off
/// before the NFs: a rule of VLAN 100 drops UDP port 53 from the sub-interface, and the same
/// packet from port 0, untagged, goes through onto the sub-interface.
#[test]
fn the_acl_decides_by_the_vlan_of_the_sub_interface_a_frame_came_in_on() {
    let (mut chain, _n) = chain_vlan_with("nf=acl\nacl.rule=prio:10,dport:53,proto:udp,vlan:100,action:deny\n");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let mut back = udp([10, 0, 5, 2], [10, 0, 0, 2]);
    back[..6].copy_from_slice(&OWN[1]);
    for _ in 0..2 {
        let o = step(&mut chain, &mut pool, &[tagged(&back, 100)], 1, 0);
        assert_eq!((o.sent[0].len(), o.c.drops_for(DropReason::AclDeny)), (0, 1), "{:?}", o.c);
    }
    let there = udp([10, 0, 0, 2], [10, 0, 5, 2]);
    let o = step(&mut chain, &mut pool, &[there], 0, 0);
    assert_eq!((o.sent[1].len(), o.c.drops_total()), (1, 0), "{:?}", o.c);
    assert_eq!(&o.sent[1][0][12..16], &[0x81, 0x00, 0x00, 100]);
    assert_eq!(pool.in_use(), 0);
}
