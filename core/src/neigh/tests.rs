#![cfg(not(loom))]

//! The neighbour table through a whole chain (L3 forwarder with resolved next hops), frame by
//! frame: ARP answered and learned from, frames waiting for an answer and sent after it,
//! full queue, full table, failure, ageing, ICMP echo; and the config's checks.

use std::vec::Vec;

use super::arp::Arp;
use super::*;
use crate::buf::{BUF_SIZE, Batch, Pool};
use crate::drops::DropReason;
use crate::nf::Egress;
use crate::nf::config::ChainSpec;
use crate::nf::testkit::frame;
use crate::parse::IpAddr;
use crate::stage::{Stage, StageCounters};
use crate::time::Instant;
use crate::time::TickRate;
use alloc::sync::Arc;

const OWN: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]];
const HOST_A: [u8; 6] = [2, 0xaa, 0, 0, 0, 1];
const HOST_B: [u8; 6] = [2, 0xbb, 0, 0, 0, 2];

/// Port 0 is 10.0.0.1/24, port 1 10.0.1.1/24; both subnets directly connected, the rest
/// through 10.0.1.254. Clock: 1 kHz, so ticks are milliseconds.
fn chain_text(extra: &str) -> std::string::String {
    std::format!(
        "version=1\nport.addr=port:0,addr:10.0.0.1/24\nport.addr=port:1,addr:10.0.1.1/24\n\
         neigh.retrans_ms=100\nneigh.reachable_ms=1000\nneigh.stale_ms=2000\n{extra}\
         nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/24,port:0,via:direct\n\
         l3fwd.route=prefix:10.0.1.0/24,port:1,via:direct\n\
         l3fwd.route=prefix:0.0.0.0/0,port:1,via:10.0.1.254\n\
         l3fwd.route=prefix:192.0.2.0/24,port:1,mac:02:00:00:00:00:99\n"
    )
}

fn build(extra: &str) -> (crate::nf::Chain, Arc<NeighShared>) {
    let spec = ChainSpec::parse(&chain_text(extra)).expect("parses");
    let f = spec.build(Egress::new(OWN, Egress::DEFAULT_PEERS, None), TickRate::try_new(1000).unwrap()).unwrap();
    let mut c = f.chain_for_worker();
    c.enter_lane(0);
    (c, Arc::clone(f.neigh().unwrap()))
}

fn udp(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
    let mut f = frame(IpAddr::V4(src), IpAddr::V4(dst), 17, 1000, 53, b"x");
    f[..6].copy_from_slice(&OWN[0]);
    f[6..12].copy_from_slice(&HOST_A);
    f
}

fn arp_frame(op: u16, sha: [u8; 6], spa: [u8; 4], tha: [u8; 6], tpa: [u8; 4]) -> Vec<u8> {
    let mut f = std::vec![0u8; 60];
    arp::request(&mut f, sha, spa, tpa);
    f[20..22].copy_from_slice(&op.to_be_bytes());
    f[32..38].copy_from_slice(&tha);
    if op == arp::OP_REPLY {
        f[..6].copy_from_slice(&OWN[1]);
    }
    f
}

struct Out {
    sent: [Vec<Vec<u8>>; 2],
    c: StageCounters,
}

/// One batch of `frames` on `port` at `now` (ms), then the chain's idle: what left each port
/// (a frame longer than a buffer goes in over several, and comes out whole).
fn step(chain: &mut crate::nf::Chain, pool: &mut Pool<'_>, frames: &[Vec<u8>], port: usize, now: u64) -> Out {
    let mut input = Batch::new();
    for f in frames {
        input.push(pool.alloc_frame(f).unwrap()).unwrap();
    }
    let mut out = [const { Batch::new() }; crate::stage::PORTS];
    let mut c = StageCounters::default();
    let _ = chain.process(port, pool, &mut input, &mut out, &mut c, Instant(now));
    chain.idle(pool, &mut out, &mut c, Instant(now));
    let whole = |b| {
        let mut f = std::vec![0; pool.frame_len(b)];
        pool.copy_frame(b, &mut f);
        f
    };
    let sent = [0, 1].map(|p| out[p].as_slice().iter().map(|&b| whole(b)).collect::<Vec<_>>());
    for q in &mut out {
        pool.free_batch(q);
    }
    Out { sent, c }
}

fn state_of(n: &NeighShared, ip: [u8; 4]) -> Option<State> {
    n.entries().iter().find(|e| e.ip == IpAddr::V4(ip)).map(|e| e.state)
}

#[test]
fn a_miss_queues_asks_once_and_the_answer_sends_the_queue() {
    let (mut chain, n) = build("");
    let mut mem = std::vec![0u8; 128 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 128).unwrap();
    let to_b = udp([10, 0, 0, 2], [10, 0, 1, 2]);

    // Six frames for an unknown neighbour: one request, four wait, two find the queue full.
    let o = step(&mut chain, &mut pool, &std::vec![to_b.clone(); 6], 0, 10);
    assert_eq!(o.sent[1].len(), 1, "one request");
    let req = Arp::parse(&o.sent[1][0]).expect("an ARP request");
    assert_eq!((req.op, req.spa, req.tpa), (arp::OP_REQUEST, [10, 0, 1, 1], [10, 0, 1, 2]));
    assert_eq!((&o.sent[1][0][..6], &o.sent[1][0][6..12]), (&BROADCAST[..], &OWN[1][..]));
    assert_eq!(o.c.drops_for(DropReason::NeighQueueFull), 2);
    assert_eq!(o.c.generated, 1);
    assert_eq!(state_of(&n, [10, 0, 1, 2]), Some(State::Incomplete));
    assert_eq!(pool.in_use(), QUEUE, "the waiting frames hold their buffers");

    // Within `retrans`: no second request.
    let o = step(&mut chain, &mut pool, &[], 0, 50);
    assert!(o.sent[1].is_empty());

    // The answer: consumed, the entry reachable, the four frames out to its MAC.
    let reply = arp_frame(arp::OP_REPLY, HOST_B, [10, 0, 1, 2], OWN[1], [10, 0, 1, 1]);
    let o = step(&mut chain, &mut pool, &[reply], 1, 60);
    assert_eq!(o.c.ctl, 1);
    assert_eq!(o.sent[1].len(), QUEUE);
    for f in &o.sent[1] {
        assert_eq!((&f[..6], &f[6..12]), (&HOST_B[..], &OWN[1][..]));
        assert_eq!(f[22], 63, "TTL decremented once");
    }
    assert_eq!(state_of(&n, [10, 0, 1, 2]), Some(State::Reachable));
    assert_eq!(pool.in_use(), 0);

    // Known now: straight out, from the worker's cache.
    let o = step(&mut chain, &mut pool, &[to_b], 0, 70);
    assert_eq!(o.sent[1].len(), 1);
    assert_eq!(&o.sent[1][0][..6], &HOST_B);
    let mut text = std::string::String::new();
    chain.write_counters(&mut text).unwrap();
    assert!(text.contains(" neigh_resolved=1 ") && text.contains(" neigh_dequeued=4 "), "{text}");

    // A static next hop never looks at the table.
    let o = step(&mut chain, &mut pool, &[udp([10, 0, 0, 2], [192, 0, 2, 7])], 0, 80);
    assert_eq!(&o.sent[1][0][..6], &[2, 0, 0, 0, 0, 0x99]);
}

#[test]
fn arp_for_our_address_is_answered_in_place_and_learned_from() {
    let (mut chain, n) = build("");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let mut req = std::vec![0u8; 60];
    arp::request(&mut req, HOST_A, [10, 0, 0, 2], [10, 0, 0, 1]);
    let o = step(&mut chain, &mut pool, &[req], 0, 5);
    assert_eq!(o.sent[0].len(), 1);
    let f = &o.sent[0][0];
    assert_eq!((&f[..6], &f[6..12]), (&HOST_A[..], &OWN[0][..]));
    let a = Arp::parse(f).unwrap();
    assert_eq!(a, Arp { op: arp::OP_REPLY, sha: OWN[0], spa: [10, 0, 0, 1], tha: HOST_A, tpa: [10, 0, 0, 2] });
    assert_eq!(state_of(&n, [10, 0, 0, 2]), Some(State::Reachable));

    // The same request on the other port (not its address), one for an address we do not
    // own, and a reply nobody asked for: dropped by reason, no entry made.
    let mut wrong_port = std::vec![0u8; 60];
    arp::request(&mut wrong_port, HOST_B, [10, 0, 0, 9], [10, 0, 0, 1]);
    let mut not_ours = std::vec![0u8; 60];
    arp::request(&mut not_ours, HOST_B, [10, 0, 1, 9], [10, 0, 1, 77]);
    let unsolicited = arp_frame(arp::OP_REPLY, HOST_B, [10, 0, 1, 8], OWN[1], [10, 0, 1, 1]);
    let o = step(&mut chain, &mut pool, &[wrong_port, not_ours, unsolicited], 1, 6);
    assert!(o.sent.iter().all(Vec::is_empty));
    assert_eq!(o.c.drops_for(DropReason::ArpNotOurs), 2);
    assert_eq!(o.c.drops_for(DropReason::ArpUnsolicited), 1);
    for ip in [[10, 0, 0, 9], [10, 0, 1, 9], [10, 0, 1, 8]] {
        assert_eq!(state_of(&n, ip), None, "{ip:?}");
    }

    // Gratuitous ARP: updates the entry we have (a new MAC), makes none for a stranger.
    let mut grat = std::vec![0u8; 60];
    arp::request(&mut grat, HOST_B, [10, 0, 0, 2], [10, 0, 0, 2]);
    let mut grat2 = std::vec![0u8; 60];
    arp::request(&mut grat2, HOST_B, [10, 0, 0, 3], [10, 0, 0, 3]);
    let o = step(&mut chain, &mut pool, &[grat, grat2], 0, 7);
    assert_eq!((o.c.ctl, o.c.drops_for(DropReason::ArpNotOurs)), (1, 1));
    let e = n.entries().into_iter().find(|e| e.ip == IpAddr::V4([10, 0, 0, 2])).unwrap();
    assert_eq!(e.mac, HOST_B);
    assert_eq!(state_of(&n, [10, 0, 0, 3]), None);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn an_echo_request_to_our_address_is_answered_and_other_local_traffic_dropped() {
    let (mut chain, _) = build("");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let mut ping = frame(IpAddr::V4([10, 0, 0, 2]), IpAddr::V4([10, 0, 1, 1]), 1, 0, 0, &[8, 0, 0, 0, 0, 7, 0, 1]);
    ping[6..12].copy_from_slice(&HOST_A);
    let c = crate::checksum::checksum(&ping[34..]);
    ping[36..38].copy_from_slice(&c.to_be_bytes());
    let udp_to_us = udp([10, 0, 0, 2], [10, 0, 0, 1]);
    let o = step(&mut chain, &mut pool, &[ping, udp_to_us], 0, 1);
    assert_eq!(o.sent[0].len(), 1, "the reply leaves by the ingress port");
    let f = &o.sent[0][0];
    assert_eq!((&f[..6], &f[6..12]), (&HOST_A[..], &OWN[0][..]));
    assert_eq!((&f[26..30], &f[30..34], f[34]), (&[10, 0, 1, 1][..], &[10, 0, 0, 2][..], 0));
    assert!(crate::checksum::verify(&f[14..34]) && crate::checksum::verify(&f[34..]));
    assert_eq!(o.c.drops_for(DropReason::LocalUnsupported), 1);
}

#[test]
fn unanswered_neighbours_fail_and_their_frames_are_dropped_then_retried() {
    let (mut chain, n) = build("neigh.probes=2\n");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let o = step(&mut chain, &mut pool, &[udp([10, 0, 0, 2], [8, 8, 8, 8])], 0, 0);
    let r = Arp::parse(&o.sent[1][0]).unwrap();
    assert_eq!(r.tpa, [10, 0, 1, 254], "a gateway route asks for the gateway");
    // One retransmission at `retrans`, then failure: the waiting frame dropped.
    let o = step(&mut chain, &mut pool, &[], 0, 100);
    assert_eq!((o.sent[1].len(), o.c.generated), (1, 1));
    assert_eq!(state_of(&n, [10, 0, 1, 254]), Some(State::Incomplete));
    let o = step(&mut chain, &mut pool, &[], 0, 200);
    assert_eq!(o.c.drops_for(DropReason::NeighUnresolved), 1);
    assert_eq!(state_of(&n, [10, 0, 1, 254]), Some(State::Failed));
    assert_eq!(pool.in_use(), 0);
    // A frame soon after: dropped without asking; after `retrans`: asked again.
    let o = step(&mut chain, &mut pool, &[udp([10, 0, 0, 2], [8, 8, 8, 8])], 0, 250);
    assert_eq!((o.sent[1].len(), o.c.drops_for(DropReason::NeighUnresolved)), (0, 1));
    let o = step(&mut chain, &mut pool, &[udp([10, 0, 0, 2], [8, 8, 8, 8])], 0, 300);
    assert_eq!(o.sent[1].len(), 1);
    assert_eq!(state_of(&n, [10, 0, 1, 254]), Some(State::Incomplete));
}

#[test]
fn entries_age_reachable_to_stale_to_gone_and_the_cache_follows() {
    let (mut chain, n) = build("neigh.static=port:1,ip:10.0.1.50,mac:02:00:00:00:00:50\n");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let mut req = std::vec![0u8; 60];
    arp::request(&mut req, HOST_B, [10, 0, 1, 2], [10, 0, 1, 1]);
    step(&mut chain, &mut pool, &[req], 1, 0);
    let to_b = udp([10, 0, 0, 2], [10, 0, 1, 2]);
    assert_eq!(&step(&mut chain, &mut pool, std::slice::from_ref(&to_b), 0, 10).sent[1][0][..6], &HOST_B);
    step(&mut chain, &mut pool, &[], 0, 1000);
    assert_eq!(state_of(&n, [10, 0, 1, 2]), Some(State::Stale));
    // Stale is still used.
    assert_eq!(&step(&mut chain, &mut pool, std::slice::from_ref(&to_b), 0, 1100).sent[1][0][..6], &HOST_B);
    step(&mut chain, &mut pool, &[], 0, 3000);
    assert_eq!(state_of(&n, [10, 0, 1, 2]), None, "removed after stale_ms");
    assert_eq!(state_of(&n, [10, 0, 1, 50]), Some(State::Static), "static entries never age");
    // The worker's cache forgot it too: the next frame asks.
    let o = step(&mut chain, &mut pool, &[to_b], 0, 3010);
    assert_eq!(Arp::parse(&o.sent[1][0]).map(|a| a.tpa), Some([10, 0, 1, 2]));
    assert_eq!(
        &step(&mut chain, &mut pool, &[udp([10, 0, 0, 2], [10, 0, 1, 50])], 0, 3020).sent[1][0][..6],
        &[2, 0, 0, 0, 0, 0x50]
    );
}

#[test]
fn a_full_table_refuses_new_neighbours_and_counts() {
    let (mut chain, n) = build("neigh.capacity=2\n");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let reqs: Vec<Vec<u8>> = (2..6)
        .map(|i| {
            let mut f = std::vec![0u8; 60];
            arp::request(&mut f, [2, 0, 0, 0, 7, i], [10, 0, 0, i], [10, 0, 0, 1]);
            f
        })
        .collect();
    let o = step(&mut chain, &mut pool, &reqs, 0, 0);
    assert_eq!(o.sent[0].len(), 4, "every request is still answered");
    assert_eq!(n.entries().len(), 2);
    let o = step(&mut chain, &mut pool, &[udp([10, 0, 0, 2], [10, 0, 1, 9])], 0, 1);
    assert_eq!(o.c.drops_for(DropReason::NeighUnresolved), 1);
    let mut text = std::string::String::new();
    chain.write_counters(&mut text).unwrap();
    assert!(text.contains(" neigh_table_full=3 "), "{text}");
}

#[test]
fn frames_waiting_over_the_whole_table_are_bounded() {
    let (mut chain, n) = build("neigh.max_waiting=3\n");
    let mut mem = std::vec![0u8; 64 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();
    // Five unknown neighbours, one frame each: three wait, two are dropped; five are asked.
    let frames: Vec<Vec<u8>> = (2..7).map(|i| udp([10, 0, 0, 2], [10, 0, 1, i])).collect();
    let o = step(&mut chain, &mut pool, &frames, 0, 0);
    assert_eq!(o.c.drops_for(DropReason::NeighQueueFull), 2);
    assert_eq!(n.entries().iter().map(|e| e.queued).sum::<usize>(), 3);
    assert_eq!(pool.in_use(), 3);
    // One answer frees its frame and its place.
    let reply = arp_frame(arp::OP_REPLY, HOST_B, [10, 0, 1, 2], OWN[1], [10, 0, 1, 1]);
    assert_eq!(step(&mut chain, &mut pool, &[reply], 1, 1).sent[1].len(), 1);
    let o = step(&mut chain, &mut pool, &[udp([10, 0, 0, 2], [10, 0, 1, 9])], 0, 2);
    assert_eq!(o.c.drops_for(DropReason::NeighQueueFull), 0);
    assert_eq!(pool.in_use(), 3);
}

/// fd78::1 and fd78::2.
const FD78_1: [u8; 16] = [0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
const FD78_2: [u8; 16] = [0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// A neighbour solicitation from `host` (MAC `HOST_A`, given as its source link-layer
/// address) for `target`, to the target's solicited-node address.
fn solicitation(target: &[u8; 16], host: &[u8; 16]) -> Vec<u8> {
    let dst = nd::solicited_node(target);
    let mut f = std::vec![0u8; 54 + 32];
    f[..6].copy_from_slice(&[0x33, 0x33, 0xff, target[13], target[14], target[15]]);
    f[6..12].copy_from_slice(&HOST_A);
    f[12..14].copy_from_slice(&[0x86, 0xdd]);
    f[14] = 0x60;
    f[18..22].copy_from_slice(&[0, 32, 58, 255]);
    f[22..38].copy_from_slice(host);
    f[38..54].copy_from_slice(&dst);
    f[54] = 135;
    f[62..78].copy_from_slice(target);
    f[78..80].copy_from_slice(&[1, 1]);
    f[80..86].copy_from_slice(&HOST_A);
    let c = crate::checksum::l4_checksum_v6(host, &dst, 58, &f[54..]);
    f[56..58].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn an_ipv6_solicitation_for_our_address_is_answered_on_its_port_only() {
    let (mut chain, _) = build("port.addr=port:0,addr:fd78::1/64\n");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let (ours, host) = (FD78_1, FD78_2);
    let f = solicitation(&ours, &host);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&f), 0, 1);
    assert_eq!(o.sent[0].len(), 1, "the advertisement leaves by the ingress port");
    let a = &o.sent[0][0];
    assert_eq!((&a[..6], &a[6..12], a[54]), (&HOST_A[..], &OWN[0][..], 136));
    assert_eq!((&a[22..38], &a[38..54], &a[80..86]), (&ours[..], &host[..], &OWN[0][..]));
    // On the other port, where the address is not: not answered, dropped as for us.
    let o = step(&mut chain, &mut pool, &[f], 1, 2);
    assert!(o.sent.iter().all(Vec::is_empty));
    assert_eq!(o.c.drops_for(DropReason::LocalUnsupported), 1);
    let mut text = std::string::String::new();
    chain.write_counters(&mut text).unwrap();
    assert!(text.contains(" neigh_nd_adverts=1"), "{text}");
}

#[test]
fn bad_configuration_names_the_record() {
    let bad = |extra: &str| {
        ChainSpec::parse(&std::format!("version=1\n{extra}")).map(|_| ()).map_err(|e| std::format!("{e}")).unwrap_err()
    };
    assert_eq!(bad("port.addr=port:8,addr:10.0.0.1/24\n"), "line 2: port.addr: port.addr[0]: port out of range");
    assert!(bad("port.addr=port:0,addr:10.0.0.0/24\n").contains("not a host address"));
    assert!(bad("port.addr=port:0,addr:10.0.0.1\n").starts_with("line 2: port.addr.addr: expected IPv4/LEN"));
    assert!(bad("neigh.static=port:0,ip:10.0.0.5,mac:01:00:5e:00:00:01\n").contains("group MAC"));
    assert!(bad("port.addr=port:0,addr:10.0.0.1/24\nneigh.capacity=0\n").starts_with("line 3: neigh.capacity"));
    assert!(bad("nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/8,port:1,via:10.0.0.1,mac:02:00:00:00:00:01\n").contains("via"));
    assert!(bad("nf=l3fwd\nl3fwd.route=prefix:2001:db8::/32,port:1,via:10.0.0.1\n").contains("IP version"));
    assert!(bad("nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/8,port:1,via:fd78::fe\n").contains("IP version"));
    assert!(bad("nf=l3fwd\nl3fwd.route=prefix:2001:db8::/32,port:1,via:ff02::1\n").contains("not a unicast IPv6"));
    assert!(bad("port.addr=port:0,addr:ff02::1/64\n").contains("not a unicast address"));
    // /31 and /32 have no network or broadcast address.
    assert!(ChainSpec::parse("version=1\nport.addr=port:0,addr:10.0.0.0/31\n").is_ok());
}

/// `udp` with TTL `ttl` (header checksum recomputed).
fn udp_ttl(src: [u8; 4], dst: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut f = udp(src, dst);
    f[22] = ttl;
    f[24..26].fill(0);
    let c = crate::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

/// The ICMP error `f` as etherparse reads it: (source, destination, type, code, quoted
/// bytes); the IPv4 and ICMP checksums verified.
fn icmp_of(f: &[u8]) -> ([u8; 4], [u8; 4], u8, u8, Vec<u8>) {
    let p = etherparse::SlicedPacket::from_ethernet(f).expect("etherparse reads it");
    let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else { panic!("not IPv4") };
    let h = ip.header().to_header();
    assert_eq!(h.header_checksum, h.calc_header_checksum());
    assert!(crate::checksum::verify(&f[34..]), "ICMP checksum");
    let Some(etherparse::TransportSlice::Icmpv4(i)) = &p.transport else { panic!("not ICMP") };
    (h.source, h.destination, i.type_u8(), i.code_u8(), i.payload().to_vec())
}

#[test]
fn ttl_expiry_and_no_route_are_answered_with_icmp_errors_rate_limited() {
    // No default route here: 198.51.100.0/24 is unrouted. A burst of 3, then 10 per second.
    let text = "version=1\nport.addr=port:0,addr:10.0.0.1/24\nport.addr=port:1,addr:10.0.1.1/24\n\
                neigh.icmp_rate=10\nneigh.icmp_burst=3\n\
                nf=l3fwd\nl3fwd.route=prefix:10.0.0.0/24,port:0,via:direct\n\
                l3fwd.route=prefix:10.0.1.0/24,port:1,mac:02:00:00:00:00:99\n";
    let spec = ChainSpec::parse(text).expect("parses");
    let f = spec.build(Egress::new(OWN, Egress::DEFAULT_PEERS, None), TickRate::try_new(1000).unwrap()).unwrap();
    let mut chain = f.chain_for_worker();
    chain.enter_lane(0);
    let mut mem = std::vec![0u8; 64 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 64).unwrap();

    // TTL 1 across the dataplane: Time Exceeded from the ingress port's address, back out of
    // the ingress port to the sender's MAC, quoting the header as received and 8 bytes.
    let probe = udp_ttl([10, 0, 0, 2], [10, 0, 1, 2], 1);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&probe), 0, 10);
    assert!(o.sent[1].is_empty());
    assert_eq!(o.sent[0].len(), 1, "the error leaves by the ingress port");
    let e = &o.sent[0][0];
    assert_eq!((&e[..6], &e[6..12]), (&HOST_A[..], &OWN[0][..]));
    let (src, dst, ty, code, quoted) = icmp_of(e);
    assert_eq!((src, dst, ty, code), ([10, 0, 0, 1], [10, 0, 0, 2], 11, 0));
    assert_eq!(quoted, probe[14..42].to_vec());
    assert_eq!(pool.in_use(), 0);

    // No route: Net Unreachable.
    let lost = udp_ttl([10, 0, 0, 2], [198, 51, 100, 7], 64);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&lost), 0, 10);
    let (src, dst, ty, code, quoted) = icmp_of(&o.sent[0][0]);
    assert_eq!((src, dst, ty, code), ([10, 0, 0, 1], [10, 0, 0, 2], 3, 0));
    assert_eq!(quoted, lost[14..42].to_vec());

    // The bucket had 3: one left at t=10; of four more, one goes, three are suppressed
    // (dropped by their reason and counted); 100 ms later one token more.
    let o = step(&mut chain, &mut pool, &std::vec![probe.clone(); 4], 0, 10);
    assert_eq!(o.sent[0].len(), 1);
    assert_eq!(o.c.drops_for(DropReason::TtlExpired), 3);
    let o = step(&mut chain, &mut pool, &std::vec![probe.clone(); 2], 0, 110);
    assert_eq!((o.sent[0].len(), o.c.drops_for(DropReason::TtlExpired)), (1, 1));

    // Never for a frame to a link-layer broadcast, nor for an ICMP error (counted as the
    // drop it is, no token used).
    let mut bcast = probe.clone();
    bcast[..6].fill(0xFF);
    assert!(o.sent[1].is_empty());
    let mut icmp_err = icmp_errors_frame();
    icmp_err[22] = 1;
    icmp_err[24..26].fill(0);
    let c = crate::checksum::checksum(&icmp_err[14..34]);
    icmp_err[24..26].copy_from_slice(&c.to_be_bytes());
    // Nor for a packet to the broadcast address of port 1's subnet (a directed broadcast).
    let directed = udp_ttl([10, 0, 0, 2], [10, 0, 1, 255], 1);
    let o = step(&mut chain, &mut pool, &[bcast, icmp_err, directed], 0, 1_000);
    assert!(o.sent.iter().all(Vec::is_empty));
    assert_eq!(o.c.drops_for(DropReason::TtlExpired), 3);

    let mut text = std::string::String::new();
    chain.write_counters(&mut text).unwrap();
    assert!(text.contains(" neigh_icmp_errors=4 neigh_icmp_suppressed=4"), "{text}");
    assert!(text.contains(" l3fwd_no_route=1 l3fwd_ttl_expired=10"), "{text}");
    assert_eq!(pool.in_use(), 0);
}

/// An ICMP Time Exceeded from 10.0.0.2 to 10.0.1.2 (as if a host relayed one), TTL 64.
fn icmp_errors_frame() -> Vec<u8> {
    let mut f = crate::nf::testkit::frame(
        IpAddr::V4([10, 0, 0, 2]),
        IpAddr::V4([10, 0, 1, 2]),
        1,
        0,
        0,
        &[11, 0, 0, 0, 0, 0, 0, 0, 0x45, 0, 0, 28],
    );
    f[..6].copy_from_slice(&OWN[0]);
    f[6..12].copy_from_slice(&HOST_A);
    f
}

#[test]
fn hop_limit_expiry_and_no_route_over_ipv6_are_answered_with_icmpv6_errors() {
    let text = "version=1\nport.addr=port:0,addr:fd78::1/64\nport.addr=port:1,addr:fd79::1/64\n\
                nf=l3fwd\nl3fwd.route=prefix:fd79::/64,port:1,mac:02:00:00:00:00:99\n";
    let spec = ChainSpec::parse(text).expect("parses");
    let f = spec.build(Egress::new(OWN, Egress::DEFAULT_PEERS, None), TickRate::try_new(1000).unwrap()).unwrap();
    let mut chain = f.chain_for_worker();
    chain.enter_lane(0);
    let mut mem = std::vec![0u8; 16 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 16).unwrap();
    let a: [u8; 16] = "fd78::2".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let own: [u8; 16] = "fd78::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let v6 = |dst: &str, hops: u8| {
        let d = dst.parse::<std::net::Ipv6Addr>().unwrap().octets();
        let mut f = frame(IpAddr::V6(a), IpAddr::V6(d), 17, 1000, 33434, b"probe");
        f[..6].copy_from_slice(&OWN[0]);
        f[6..12].copy_from_slice(&HOST_A);
        f[21] = hops;
        f
    };
    for (pkt, ty) in [(v6("fd79::2", 1), 3u8), (v6("fd7a::2", 64), 1)] {
        let o = step(&mut chain, &mut pool, std::slice::from_ref(&pkt), 0, 10);
        assert!(o.sent[1].is_empty());
        let e = &o.sent[0][0];
        assert_eq!((&e[..6], &e[6..12]), (&HOST_A[..], &OWN[0][..]));
        let p = etherparse::SlicedPacket::from_ethernet(e).expect("etherparse reads it");
        let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else { panic!("not IPv6") };
        assert_eq!((ip.header().source(), ip.header().destination()), (own, a));
        let Some(etherparse::TransportSlice::Icmpv6(i)) = &p.transport else { panic!("not ICMPv6") };
        assert_eq!((i.type_u8(), i.code_u8()), (ty, 0));
        assert_eq!(i.header().checksum, i.header().icmp_type.calc_checksum(own, a, i.payload()).unwrap());
        assert_eq!(i.payload(), &pkt[14..], "the whole packet quoted (below the minimum MTU)");
    }
    let mut text = std::string::String::new();
    chain.write_counters(&mut text).unwrap();
    assert!(text.contains(" neigh_icmp_errors=2 neigh_icmp_suppressed=0"), "{text}");
    assert_eq!(pool.in_use(), 0);
}

/// `udp` padded to an IP packet of `ip_len` bytes, Don't Fragment set or not.
fn udp_sized(dst: [u8; 4], ip_len: usize, df: bool) -> Vec<u8> {
    let mut f = frame(IpAddr::V4([10, 0, 0, 2]), IpAddr::V4(dst), 17, 1000, 53, &std::vec![0x5A; ip_len - 28]);
    f[..6].copy_from_slice(&OWN[0]);
    f[6..12].copy_from_slice(&HOST_A);
    f[20] = if df { 0x40 } else { 0 };
    f[24..26].fill(0);
    let c = crate::checksum::checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f
}

#[test]
fn packets_longer_than_the_egress_mtu_get_path_mtu_errors_or_are_fragmented() {
    let (mut chain, _) = build("port.mtu=port:1,mtu:1400\n");
    let mut mem = std::vec![0u8; 16 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 16).unwrap();
    // To 192.0.2.7 (port 1, static MAC): up to 1400 bytes of IP go; 1401 with DF set is
    // answered "fragmentation needed" with the MTU, from port 0's address to the sender.
    let fits = udp_sized([192, 0, 2, 7], 1400, true);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&fits), 0, 10);
    assert_eq!((o.sent[0].len(), o.sent[1].len()), (0, 1));
    let big = udp_sized([192, 0, 2, 7], 1401, true);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&big), 0, 10);
    assert!(o.sent[1].is_empty());
    let e = &o.sent[0][0];
    assert_eq!((&e[..6], &e[6..12]), (&HOST_A[..], &OWN[0][..]));
    let (src, dst, ty, code, quoted) = icmp_of(e);
    assert_eq!((src, dst, ty, code), ([10, 0, 0, 1], [10, 0, 0, 2], 3, 4));
    assert_eq!(u16::from_be_bytes([e[40], e[41]]), 1400, "the next-hop MTU (RFC 1191)");
    // The packet is quoted as it would have left: TTL already decremented (checksum
    // following), the rest as received.
    assert_eq!((&quoted[..8], quoted[8], &quoted[12..]), (&big[14..22], big[22] - 1, &big[26..42]));
    assert!(crate::checksum::verify(&quoted[..20]));
    assert_eq!(o.c.drops_for(DropReason::TooBig), 0, "the frame became the error");
    // Without DF: cut into two fragments that fit, both to the route's next hop (the extra
    // one counted as generated); reassembled they are the datagram as forwarded.
    let whole = udp_sized([192, 0, 2, 7], 1401, false);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&whole), 0, 10);
    assert_eq!((o.sent[0].len(), o.sent[1].len(), o.c.generated), (0, 2, 1));
    let (a, b) = (&o.sent[1][0], &o.sent[1][1]);
    assert!(a.len() - 14 <= 1400 && b.len() - 14 <= 1400);
    assert!([a, b].iter().all(|f| f[..6] == [2, 0, 0, 0, 0, 0x99] && crate::checksum::verify(&f[14..34])));
    assert_eq!((u16::from_be_bytes([a[20], a[21]]), u16::from_be_bytes([b[20], b[21]])), (0x2000, 1376 / 8));
    let mut data = a[34..].to_vec();
    data.extend_from_slice(&b[34..]);
    assert_eq!(data, whole[34..].to_vec());
    assert_eq!((a[22], b[22]), (63, 63), "TTL decremented once, in every fragment");
    let mut back = udp_sized([10, 0, 0, 2], 1500, true);
    back[26..30].copy_from_slice(&[192, 0, 2, 7]);
    back[24..26].fill(0);
    let c = crate::checksum::checksum(&back[14..34]);
    back[24..26].copy_from_slice(&c.to_be_bytes());
    // (Cadence asks for A first; A's answer sends it, whole.)
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&back), 1, 10);
    assert!(Arp::parse(&o.sent[0][0]).is_some_and(|r| r.op == arp::OP_REQUEST));
    let reply = arp_frame(arp::OP_REPLY, HOST_A, [10, 0, 0, 2], OWN[0], [10, 0, 0, 1]);
    let o = step(&mut chain, &mut pool, &[reply], 0, 20);
    assert_eq!((o.sent[0].len(), o.sent[1].len()), (1, 0));
    assert_eq!((o.sent[0][0].len(), &o.sent[0][0][..6]), (14 + 1500, &HOST_A[..]), "1500 fits port 0");
    let mut text = std::string::String::new();
    chain.write_counters(&mut text).unwrap();
    assert!(text.contains(" neigh_too_big=2 neigh_fragmented=1 neigh_fragments=2"), "{text}");
    assert_eq!(pool.in_use(), 0);
}

/// Jumbo frames (issue 27 item 5) through the router: a 9 000-byte IPv4 packet over five
/// buffers is routed whole — TTL down and MACs rewritten in its first buffer, every later
/// byte as sent — toward a port whose MTU is 9 000; toward one of 1 500, with DF set it is
/// answered "fragmentation needed" (the error built from its first buffer, the others freed),
/// without DF it is cut into fragments read across its buffers. Nothing leaks.
#[test]
fn a_jumbo_packet_is_routed_whole_or_answered_from_its_first_buffer() {
    let (mut chain, _) = build("port.mtu=port:0,mtu:9000\nport.mtu=port:1,mtu:9000\n");
    let mut mem = std::vec![0u8; 16 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 16).unwrap();
    let mut jumbo = udp_sized([192, 0, 2, 7], 9000, true);
    for (i, b) in jumbo[42..].iter_mut().enumerate() {
        *b = (i * 13 % 251) as u8;
    }
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&jumbo), 0, 10);
    assert_eq!((o.sent[0].len(), o.sent[1].len(), o.c.drops_total()), (0, 1, 0), "{:?}", o.c);
    let f = &o.sent[1][0];
    assert_eq!(f.len(), 14 + 9000);
    assert_eq!((&f[..6], &f[6..12]), (&[2, 0, 0, 0, 0, 0x99][..], &OWN[1][..]));
    assert_eq!(f[22], jumbo[22] - 1, "TTL decremented");
    assert!(crate::checksum::verify(&f[14..34]));
    assert_eq!(&f[26..], &jumbo[26..], "addresses, ports and all 8 972 bytes of payload as sent");
    assert_eq!(pool.in_use(), 0);
    // Port 1 at 1 500 bytes: DF set, answered from the first buffer; no DF, dropped.
    let (mut chain, _) = build("port.mtu=port:0,mtu:9000\n");
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&jumbo), 0, 10);
    let (src, dst, ty, code, quoted) = icmp_of(&o.sent[0][0]);
    assert_eq!((src, dst, ty, code, o.sent[1].len()), ([10, 0, 0, 1], [10, 0, 0, 2], 3, 4, 0));
    assert_eq!(u16::from_be_bytes([o.sent[0][0][40], o.sent[0][0][41]]), 1500);
    assert_eq!(&quoted[12..], &jumbo[26..42]);
    // Without DF: cut into seven fragments of at most 1 500 bytes of IP, which put back
    // together are the packet as forwarded.
    let mut no_df = udp_sized([192, 0, 2, 7], 9000, false);
    no_df[42..].copy_from_slice(&jumbo[42..]);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&no_df), 0, 10);
    assert_eq!((o.sent[0].len(), o.sent[1].len(), o.c.generated), (0, 7, 6), "{:?}", o.c);
    let mut data = Vec::new();
    for (i, f) in o.sent[1].iter().enumerate() {
        assert!(f.len() - 14 <= 1500 && crate::checksum::verify(&f[14..34]));
        let fo = u16::from_be_bytes([f[20], f[21]]);
        assert_eq!((usize::from(fo & 0x1FFF) * 8, fo & 0x2000 != 0), (data.len(), i < 6), "fragment {i}");
        data.extend_from_slice(&f[34..]);
    }
    assert_eq!(data, no_df[34..].to_vec(), "the datagram's 8 980 bytes, in order");
    assert_eq!((pool.in_use(), pool.double_frees(), o.c.drops_for(DropReason::MultiBuffer)), (0, 0, 0));
}

#[test]
fn an_ipv6_packet_longer_than_the_egress_mtu_gets_packet_too_big() {
    let text = "version=1\nport.addr=port:0,addr:fd78::1/64\nport.mtu=port:1,mtu:1280\n\
                nf=l3fwd\nl3fwd.route=prefix:fd79::/64,port:1,mac:02:00:00:00:00:99\n";
    let spec = ChainSpec::parse(text).expect("parses");
    let f = spec.build(Egress::new(OWN, Egress::DEFAULT_PEERS, None), TickRate::try_new(1000).unwrap()).unwrap();
    let mut chain = f.chain_for_worker();
    chain.enter_lane(0);
    let mut mem = std::vec![0u8; 16 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 16).unwrap();
    let a: [u8; 16] = "fd78::2".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let own: [u8; 16] = "fd78::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let d: [u8; 16] = "fd79::2".parse::<std::net::Ipv6Addr>().unwrap().octets();
    let sized = |ip_len: usize| {
        let mut f = frame(IpAddr::V6(a), IpAddr::V6(d), 17, 1000, 53, &std::vec![7; ip_len - 48]);
        f[..6].copy_from_slice(&OWN[0]);
        f[6..12].copy_from_slice(&HOST_A);
        f
    };
    let o = step(&mut chain, &mut pool, &[sized(1280)], 0, 10);
    assert_eq!((o.sent[0].len(), o.sent[1].len()), (0, 1));
    let big = sized(1281);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&big), 0, 10);
    let e = &o.sent[0][0];
    let p = etherparse::SlicedPacket::from_ethernet(e).expect("etherparse reads it");
    let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else { panic!("not IPv6") };
    assert_eq!((ip.header().source(), ip.header().destination()), (own, a));
    let Some(etherparse::TransportSlice::Icmpv6(i)) = &p.transport else { panic!("not ICMPv6") };
    assert_eq!(i.icmp_type(), etherparse::Icmpv6Type::PacketTooBig { mtu: 1280 });
    assert_eq!(i.header().checksum, i.header().icmp_type.calc_checksum(own, a, i.payload()).unwrap());
    // Quoted up to the minimum MTU, as it would have left (hop limit decremented).
    let q = i.payload();
    assert_eq!((q.len(), &q[..7], q[7], &q[8..]), (1232, &big[14..21], big[21] - 1, &big[22..14 + 1232]));
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn a_port_mtu_out_of_range_or_given_twice_names_its_line() {
    let bad = |extra: &str| {
        ChainSpec::parse(&std::format!("version=1\n{extra}")).map(|_| ()).map_err(|e| std::format!("{e}")).unwrap_err()
    };
    let tail = "not 1280..=9000, or not a port or sub-interface";
    assert_eq!(bad("port.mtu=port:1,mtu:1279\n"), std::format!("line 2: port.mtu: port.mtu (port 1): {tail}"));
    assert_eq!(bad("port.mtu=port:0,mtu:9001\n"), std::format!("line 2: port.mtu: port.mtu (port 0): {tail}"));
    assert!(bad("port.mtu=port:0,mtu:1400\nport.mtu=port:0,mtu:1300\n").starts_with("line 3: port.mtu"));
    assert!(bad("port.mtu=port:8,mtu:1400\n").starts_with("line 2: port.mtu"));
    assert!(bad("port.mtu=port:0\n").starts_with("line 2: port.mtu"));
}

mod nd6;
mod vlan;

#[test]
fn a_neighbour_set_by_the_control_plane_sends_what_waited_and_one_removed_drops_it() {
    let (mut chain, n) = build("");
    let mut mem = std::vec![0u8; 32 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
    let to_b = udp([10, 0, 0, 2], [10, 0, 1, 2]);
    // Two frames wait for 10.0.1.2; the operator sets it static: they go to that MAC.
    let o = step(&mut chain, &mut pool, &std::vec![to_b.clone(); 2], 0, 10);
    assert_eq!(o.sent[1].len(), 1, "the ARP request");
    n.set_static(1, IpAddr::V4([10, 0, 1, 2]), HOST_B, Instant(20)).unwrap();
    let o = step(&mut chain, &mut pool, &[], 0, 20);
    assert_eq!(o.sent[1].len(), 2);
    assert!(o.sent[1].iter().all(|f| f[..6] == HOST_B));
    assert_eq!(state_of(&n, [10, 0, 1, 2]), Some(State::Static));
    // ARP cannot move a static neighbour; later frames go straight out.
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&to_b), 0, 30);
    assert_eq!(&o.sent[1][0][..6], &HOST_B);
    // Removed: the next frame asks again.
    n.remove(IpAddr::V4([10, 0, 1, 2])).unwrap();
    assert_eq!(state_of(&n, [10, 0, 1, 2]), None);
    let o = step(&mut chain, &mut pool, std::slice::from_ref(&to_b), 0, 40);
    assert!(Arp::parse(&o.sent[1][0]).is_some_and(|r| r.op == arp::OP_REQUEST));
    // Removed while a frame waits: it fails, the frame is dropped by its lane, then it goes.
    n.remove(IpAddr::V4([10, 0, 1, 2])).unwrap();
    assert_eq!(state_of(&n, [10, 0, 1, 2]), Some(State::Failed));
    let o = step(&mut chain, &mut pool, &[], 0, 50);
    assert_eq!(o.c.drops_for(DropReason::NeighUnresolved), 1);
    let _ = step(&mut chain, &mut pool, &[], 0, 5_000);
    assert_eq!(state_of(&n, [10, 0, 1, 2]), None);
    assert_eq!(pool.in_use(), 0);
}
