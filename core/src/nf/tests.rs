#![cfg(not(loom))]

use super::*;
use crate::buf::BUF_SIZE;
use crate::test_frames::{control, ctl_on, eth, tcp6, udp4};

/// Egress with control accepted on port 1 (where the tests' frames arrive).
fn egress() -> Egress {
    Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1]], ctl_on(1))
}

/// Drops packets whose UDP source port is odd, sends the rest back where they came from
/// with a fixed destination MAC, and counts what it saw.
struct OddDropper {
    seen: u64,
}

impl Nf for OddDropper {
    fn name(&self) -> &'static str {
        "odd"
    }

    fn process(&mut self, _ctx: &NfCtx, _pool: &mut Pool<'_>, batch: &mut NfBatch) {
        for p in batch.alive_mut() {
            self.seen += 1;
            if p.parsed.flow.src_port % 2 == 1 {
                p.verdict = Verdict::Drop(DropReason::AclDeny);
            } else {
                p.verdict = Verdict::Forward(p.ingress);
                p.dst = Dst::Mac([0xaa; 6]);
            }
        }
    }

    fn write_counters(&self, w: &mut dyn core::fmt::Write) -> core::fmt::Result {
        write!(w, " odd_seen={}", self.seen)
    }
}

/// Counts the alive packets it is shown (to prove dead ones are skipped).
struct Counter(u64);

impl Nf for Counter {
    fn name(&self) -> &'static str {
        "count"
    }

    fn process(&mut self, _ctx: &NfCtx, _pool: &mut Pool<'_>, batch: &mut NfBatch) {
        self.0 += batch.alive_mut().count() as u64;
    }
}

fn run(chain: &mut Chain, frames: &[Vec<u8>], port: usize) -> ([Vec<Vec<u8>>; 2], StageCounters, Commands) {
    crate::nf::testkit::run_chain_on(chain, frames, port)
}

#[test]
fn an_empty_chain_forwards_like_the_l2_forwarder() {
    let mut chain = Chain::new(Vec::new(), egress());
    let f = udp4(1000, 53, b"hello");
    let ([to0, to1], counters, _) = run(&mut chain, std::slice::from_ref(&f), 0);
    assert!(to0.is_empty());
    assert_eq!(to1.len(), 1);
    assert_eq!(&to1[0][0..6], &egress().peer_mac[1]);
    assert_eq!(&to1[0][6..12], &egress().own_mac[1]);
    assert_eq!(&to1[0][12..], &f[12..]);
    assert_eq!(counters.drops_total(), 0);
}

#[test]
fn a_metered_empty_chain_forwards_the_same_and_counts_each_parsed_frame_in_its_bucket() {
    use crate::parse::parse;
    use crate::rss::{BucketMeter, MeterSnapshot};
    use crate::time::Duration;
    let frames: Vec<_> = (0..12u16).map(|i| udp4(1000 + i, 53, &[i as u8])).chain([tcp6(7, 8, b"v6")]).collect();
    let mut bad = udp4(1, 2, b"x");
    bad.truncate(20);
    let mut all = frames.clone();
    all.push(bad);
    let mut plain = Chain::new(Vec::new(), egress());
    let mut metered = Chain::new(Vec::new(), egress());
    metered.set_meter(Some(BucketMeter::new(16, Instant(0), Duration(1000)).unwrap()));
    let (sent_plain, c_plain, _) = run(&mut plain, &all, 0);
    let (sent_metered, c_metered, _) = run(&mut metered, &all, 0);
    assert_eq!(sent_metered, sent_plain, "the meter changes nothing that goes out");
    assert_eq!(c_metered, c_plain);
    let meter = metered.meter().unwrap();
    let mut snap = MeterSnapshot::with_buckets(16);
    meter.snapshot_into(&mut snap, Instant(7));
    let mut expect = [0u64; 16];
    for f in &frames {
        expect[meter.bucket_of(&parse(f).unwrap().flow).0] += 1;
    }
    assert_eq!(snap.cur.packets, expect.to_vec(), "13 parsed frames by bucket; the truncated one in none");
    assert_eq!(snap.cur.total(), 13);
}

#[test]
fn nfs_run_in_order_drop_with_reasons_and_redirect() {
    let mut chain = Chain::new(vec![Box::new(OddDropper { seen: 0 }), Box::new(Counter(0))], egress());
    let frames: Vec<_> = (0..10u16).map(|i| udp4(1000 + i, 53, &[i as u8])).collect();
    let mut bad = udp4(1, 2, b"x");
    bad.truncate(20);
    let mut all = frames.clone();
    all.push(bad);
    all.push(control(1));
    let ([to0, to1], counters, cmds) = run(&mut chain, &all, 1);
    assert!(to0.is_empty() || to1.is_empty());
    // Even source ports survive, sent back out of port 1 with the NF's MAC, in order.
    assert_eq!(to1.len(), 5);
    for (k, f) in to1.iter().enumerate() {
        assert_eq!(&f[0..6], &[0xaa; 6]);
        assert_eq!(&f[6..12], &egress().own_mac[1]);
        assert_eq!(&f[12..], &frames[2 * k][12..]);
    }
    assert_eq!(counters.drops_for(DropReason::AclDeny), 5);
    assert_eq!(counters.drops_for(DropReason::TruncatedL3), 1);
    assert_eq!(counters.ctl, 1);
    assert!(cmds.stop);
    let mut s = String::new();
    chain.write_counters(&mut s).unwrap();
    assert_eq!(s, " odd_seen=10", "the malformed and control frames never reached the NFs");
}

#[test]
fn split_off_keeps_the_head_and_returns_the_tail() {
    let mut chain = Chain::new(vec![Box::new(OddDropper { seen: 0 }), Box::new(Counter(0))], egress());
    let tail = chain.split_off(1);
    assert_eq!(chain.nfs().iter().map(|n| n.name()).collect::<Vec<_>>(), ["odd"]);
    assert_eq!(tail.nfs().iter().map(|n| n.name()).collect::<Vec<_>>(), ["count"]);
    let mut head = chain;
    assert!(head.split_off(9).nfs().is_empty());
}

/// Remembers what the chain last told it about readers of the parse after it.
struct ReadAfter(alloc::sync::Arc<core::sync::atomic::AtomicU8>);

impl Nf for ReadAfter {
    fn name(&self) -> &'static str {
        "read_after"
    }
    fn process(&mut self, _ctx: &NfCtx, _pool: &mut Pool<'_>, _batch: &mut NfBatch) {}
    fn set_parsed_read_after(&mut self, read: bool) {
        self.0.store(u8::from(read) + 1, core::sync::atomic::Ordering::Relaxed);
    }
}

/// Each NF is told whether a later NF or the router reads `Pkt::parsed` after it, and told
/// again when the chain changes: the last NF of a chain without a router is the only one
/// with no reader (1: no reader, 2: a reader).
#[test]
fn each_nf_is_told_whether_the_parse_is_read_after_it() {
    use core::sync::atomic::{AtomicU8, Ordering};
    let told: [alloc::sync::Arc<AtomicU8>; 3] = core::array::from_fn(|_| alloc::sync::Arc::new(AtomicU8::new(0)));
    let nfs: Vec<Box<dyn Nf>> = told.iter().map(|t| Box::new(ReadAfter(t.clone())) as Box<dyn Nf>).collect();
    let now = |t: &[alloc::sync::Arc<AtomicU8>; 3]| t.each_ref().map(|a| a.load(Ordering::Relaxed));
    let mut chain = Chain::new(nfs, egress());
    assert_eq!(now(&told), [2, 2, 1]);
    let neigh =
        crate::neigh::NeighShared::try_new(&crate::neigh::NeighConfig::default(), Egress::new(OWN, PEER, None).own_mac)
            .expect("a table");
    chain.set_router(Some(crate::neigh::Router::new(alloc::sync::Arc::new(neigh))));
    assert_eq!(now(&told), [2, 2, 2], "the router reads the parse at egress");
    chain.set_router(None);
    let tail = chain.split_off(1);
    assert_eq!(now(&told), [1, 2, 1], "the tail's core parses what it is handed again");
    assert_eq!(tail.nfs().len(), 2);
}

// The chain without NFs: the L2 forwarder.

const OWN: [[u8; 6]; 2] = [[0x52, 0x54, 0, 0, 0, 0x10], [0x52, 0x54, 0, 0, 0, 0x11]];
const PEER: [[u8; 6]; PORTS] = Egress::DEFAULT_PEERS;

fn load(pool: &mut Pool<'_>, frame: &[u8]) -> PacketBuf {
    let b = pool.alloc().unwrap();
    pool.set_len(b, frame.len()).unwrap();
    pool.frame_mut(b).copy_from_slice(frame);
    b
}

fn batch_of(pool: &mut Pool<'_>, frames: &[alloc::vec::Vec<u8>]) -> Batch {
    let mut batch = Batch::new();
    for f in frames {
        let b = load(pool, f);
        batch.push(b).unwrap();
    }
    batch
}

#[test]
fn forwards_both_ways_with_mac_rewrite_in_order() {
    let mut mem = alloc::vec![0u8; 16 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 16).unwrap();
    let mut l2 = Chain::new(Vec::new(), Egress::new(OWN, PEER, None));
    let mut counters = StageCounters::default();
    for port in 0..2 {
        let frames: Vec<_> = (0..5).map(|i| udp4(i, 7, &[i as u8; 3])).collect();
        let mut input = batch_of(&mut pool, &frames);
        let mut out = [const { Batch::new() }; crate::stage::PORTS];
        let cmds = l2.process(port, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
        assert!(cmds.is_empty() && input.is_empty());
        let to = 1 - port;
        assert!(out[port].is_empty());
        assert_eq!(out[to].len(), 5);
        for (i, &b) in out[to].as_slice().iter().enumerate() {
            let f = pool.frame(b);
            assert_eq!(&f[0..6], &PEER[to]);
            assert_eq!(&f[6..12], &OWN[to]);
            assert_eq!(&f[12..], &frames[i][12..], "nothing else changes");
        }
        pool.free_batch(&mut out[to]);
    }
    assert_eq!(counters, StageCounters::default());
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn drops_are_freed_and_counted() {
    let mut mem = alloc::vec![0u8; 8 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
    let mut l2 = Chain::new(Vec::new(), Egress::new(OWN, PEER, None));
    let mut counters = StageCounters::default();
    let mut bad_sum = udp4(1, 2, &[]);
    bad_sum[24] ^= 0xFF;
    let frames = alloc::vec![
        udp4(1, 2, b"a"),
        alloc::vec![0; 10],
        eth(&[], 0x0806, &[0; 28]),
        bad_sum,
        control(1), // ctl off: just another EtherType
        tcp6(1, 2, b"b"),
    ];
    let mut input = batch_of(&mut pool, &frames);
    let mut out = [const { Batch::new() }; crate::stage::PORTS];
    let cmds = l2.process(1, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
    assert!(cmds.is_empty());
    assert_eq!(out[0].len(), 2);
    assert_eq!(counters.drops_for(DropReason::Runt), 1);
    assert_eq!(counters.drops_for(DropReason::UnsupportedEthertype), 2);
    assert_eq!(counters.drops_for(DropReason::BadIpChecksum), 1);
    assert_eq!((counters.drops_total(), counters.ctl), (4, 0));
    assert_eq!(pool.in_use(), 2);
}

#[test]
fn control_frames_are_consumed_when_enabled() {
    let mut mem = alloc::vec![0u8; 8 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
    let mut l2 = Chain::new(Vec::new(), Egress::new(OWN, PEER, ctl_on(0)));
    let mut counters = StageCounters::default();
    let replayed = control(2);
    let frames = alloc::vec![replayed.clone(), udp4(1, 2, &[]), control(2), control(9), replayed, control(1)];
    let mut input = batch_of(&mut pool, &frames);
    let mut out = [const { Batch::new() }; crate::stage::PORTS];
    let cmds = l2.process(0, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
    assert_eq!(cmds, Commands { stop: true, stats: 2, rss_move: None, rss_restore: false });
    assert_eq!(counters.ctl, 3);
    assert_eq!(counters.drops_for(DropReason::CtlRejected), 2, "unknown command byte, replay");
    assert_eq!(out[1].len(), 1);
    // On the other port even a good frame is refused, and so is one signed with another key.
    let mut forged = control(1);
    let n = forged.len();
    forged[n - 1] ^= 1;
    let mut input = batch_of(&mut pool, &[control(1), forged]);
    let mut o = [const { Batch::new() }; crate::stage::PORTS];
    assert!(l2.process(1, &mut pool, &mut input, &mut o, &mut counters, Instant(0)).is_empty());
    assert_eq!(counters.drops_for(DropReason::CtlRejected), 4);
    assert_eq!(pool.in_use(), 1);
}

#[test]
fn no_room_or_no_port_counts_tx_full() {
    let mut mem = alloc::vec![0u8; 40 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 40).unwrap();
    let mut l2 = Chain::new(Vec::new(), Egress::default());
    let mut counters = StageCounters::default();
    // An output batch that already holds 30 frames takes 2 of the next 4.
    let mut out = [const { Batch::new() }; crate::stage::PORTS];
    for _ in 0..30 {
        let b = load(&mut pool, &udp4(1, 2, &[]));
        out[1].push(b).unwrap();
    }
    let frames: Vec<_> = (0..4).map(|_| udp4(1, 2, &[])).collect();
    let mut input = batch_of(&mut pool, &frames);
    l2.process(0, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
    assert_eq!(counters.drops_for(DropReason::TxFull), 2);
    // A port the forwarder does not have, and an output slice that is too short.
    let mut input = batch_of(&mut pool, &frames[..1]);
    l2.process(crate::stage::PORTS, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
    let mut input = batch_of(&mut pool, &frames[..1]);
    l2.process(0, &mut pool, &mut input, &mut out[..1], &mut counters, Instant(0));
    assert_eq!(counters.drops_for(DropReason::TxFull), 4);
    pool.free_batch(&mut out[1]);
    assert_eq!(pool.in_use(), 0);
}

/// Reads only the IP header (as the L3 forwarder does) and records what it was shown.
struct L3Reader(alloc::sync::Arc<spin::Mutex<Vec<(crate::parse::L4Kind, u16, u16)>>>);

impl Nf for L3Reader {
    fn name(&self) -> &'static str {
        "l3reader"
    }

    fn process(&mut self, _ctx: &NfCtx, _pool: &mut Pool<'_>, batch: &mut NfBatch) {
        for p in batch.alive_mut() {
            self.0.lock().push((p.parsed.l4, p.parsed.flow.src_port, p.parsed.flow.dst_port));
        }
    }

    fn reads(&self) -> Depth {
        Depth::L3
    }
}

/// `set_validate` decides how deep frames are checked, never shallower than the NFs read or
/// the meter needs; each refusal keeps its reason.
#[test]
fn validate_depth_decides_which_frames_are_checked_how_far() {
    use crate::parse::L4Kind;
    let mut bad_sum = udp4(1, 2, b"x");
    bad_sum[24] ^= 1;
    let mut short_udp = udp4(3, 4, b"xyz");
    short_udp[38..40].copy_from_slice(&7u16.to_be_bytes());
    let runt = udp4(5, 6, b"x")[..12].to_vec();
    let frames = [bad_sum.clone(), short_udp.clone(), runt, control(2)];
    let drops = |c: &StageCounters| {
        [DropReason::BadIpChecksum, DropReason::BadL4Len, DropReason::Runt, DropReason::UnsupportedEthertype]
            .map(|r| c.drops_for(r))
    };

    // Default (l4): every check.
    let mut chain = Chain::new(Vec::new(), egress());
    assert_eq!(chain.depth(), Depth::L4);
    let ([_, to1], c, _) = run(&mut chain, &frames[..3], 0);
    assert!(to1.is_empty());
    assert_eq!(drops(&c), [1, 1, 1, 0]);

    // l2: the IP and transport headers are not judged; the link header still is, and a
    // control frame on the control port is still a command.
    chain.set_validate(Depth::L2);
    assert_eq!(chain.depth(), Depth::L2);
    let ([_, to1], c, _) = run(&mut chain, &frames[..3], 0);
    assert_eq!(to1.len(), 2);
    assert_eq!((&to1[0][12..], &to1[1][12..]), (&bad_sum[12..], &short_udp[12..]));
    assert_eq!(drops(&c), [0, 0, 1, 0]);
    let (_, c, cmds) = run(&mut chain, &frames[3..], 1);
    assert_eq!((c.ctl, cmds.is_empty()), (1, false));

    // An NF that reads the IP header: l2 asked, l3 done; the NF is shown no transport header.
    let seen = alloc::sync::Arc::new(spin::Mutex::new(Vec::new()));
    let mut chain = Chain::new(vec![Box::new(L3Reader(seen.clone()))], egress());
    chain.set_validate(Depth::L2);
    assert_eq!(chain.depth(), Depth::L3);
    let ([_, to1], c, _) = run(&mut chain, &frames[..3], 0);
    assert_eq!(to1.len(), 1);
    assert_eq!(drops(&c), [1, 0, 1, 0]);
    assert_eq!(*seen.lock(), [(L4Kind::Unparsed, 0, 0)]);
    // A tail cut off for a booster core checks as its head does.
    assert_eq!(chain.split_off(0).depth(), Depth::L3);
    // The meter needs the 5-tuple: l4 whatever was asked.
    let mut chain = Chain::new(vec![Box::new(L3Reader(seen.clone()))], egress());
    chain.set_validate(Depth::L3);
    let meter = BucketMeter::new(128, Instant(0), crate::time::Duration(1_000)).expect("meter");
    chain.set_meter(Some(meter));
    assert_eq!(chain.depth(), Depth::L4);
    chain.set_meter(None);
    assert_eq!(chain.depth(), Depth::L3);
}

/// Frames over several buffers through chains (issue 27 item 5): the L2 forwarder, the ACL
/// and the URL filter (a stream that is not HTTP, read across the buffers) carry a 9 000-byte
/// TCP packet whole (every byte as sent, the link header rewritten); the encryption NF
/// transforms its payload across the buffers (same length, headers kept). Nothing is dropped
/// as `multi_buffer`; every buffer goes out or back.
#[test]
fn jumbo_frames_cross_every_nf() {
    let key = "01".repeat(32);
    let big: Vec<u8> = (0..9000 - 40).map(|i| (i % 251) as u8).collect();
    let jumbo = crate::test_frames::tcp4(40_000, 443, &big);
    let small = crate::test_frames::tcp4(40_000, 443, b"hello");
    for (text, carried) in [
        (std::string::String::from("version=1\n"), true),
        ("version=1\nnf=acl\nacl.default=permit\n".into(), true),
        ("version=1\nnf=urlfilter\nurlfilter.banned=example.com\nurlfilter.ports=443\n".into(), true),
        (std::format!("version=1\nnf=encrypt\nencrypt.key={key}\n"), false),
    ] {
        let spec = crate::nf::config::ChainSpec::parse(&text).expect("parses");
        let f = spec.build(egress(), crate::time::TickRate::try_new(1000).unwrap()).unwrap();
        let mut chain = f.chain_for_worker();
        chain.enter_lane(0);
        let (sent, c, _) = run(&mut chain, &[jumbo.clone(), small.clone()], 0);
        assert_eq!(sent[1].len(), 2, "{text}: {c:?}");
        assert_eq!(c.drops_for(DropReason::MultiBuffer), 0, "{text}");
        let out = &sent[1][0];
        assert_eq!(out.len(), jumbo.len(), "{text}");
        if carried {
            assert_eq!(&out[12..], &jumbo[12..], "{text}");
        } else {
            // Headers up to the TCP checksum kept, the payload transformed.
            assert_eq!(&out[12..14 + 20 + 16], &jumbo[12..14 + 20 + 16], "{text}");
            assert_ne!(&out[54..], &jumbo[54..], "{text}");
        }
    }
}
