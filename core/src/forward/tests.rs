use super::*;
use crate::buf::BUF_SIZE;
use crate::parse::{ETHERTYPE_IPV4, TPID_8021Q};
use crate::test_frames::*;
use crate::time::Instant;

const OWN: [[u8; 6]; PORTS] = [[0x52, 0x54, 0, 0, 0, 0x10], [0x52, 0x54, 0, 0, 0, 0x11]];
const PEER: [[u8; 6]; PORTS] = ForwardConfig::DEFAULT_PEERS;

fn load(pool: &mut Pool<'_>, frame: &[u8]) -> PacketBuf {
    let b = pool.alloc().unwrap();
    pool.set_len(b, frame.len()).unwrap();
    pool.frame_mut(b).copy_from_slice(frame);
    b
}

fn batch_of(pool: &mut Pool<'_>, frames: &[Vec<u8>]) -> Batch {
    let mut batch = Batch::new();
    for f in frames {
        let b = load(pool, f);
        batch.push(b).unwrap();
    }
    batch
}

#[test]
fn drop_reason_names_and_display() {
    for (i, r) in DropReason::ALL.iter().enumerate() {
        assert_eq!(r.index(), i);
        assert_eq!(format!("{r}"), r.as_str());
    }
}

#[test]
fn control_frames_parse() {
    use crate::control::{parse_control, signed_payload};
    let cmd = |f: &[u8]| parse_control(f).map(|c| c.command);
    assert_eq!(cmd(&control(1)), Some(Command::Stop));
    assert_eq!(cmd(&control(2)), Some(Command::Stats));
    let p = signed_payload(&CTL_KEY, 9, Command::RssMove { from: 1, to: 2 });
    assert_eq!(cmd(&eth(&[], CONTROL_ETHERTYPE, &p)), Some(Command::RssMove { from: 1, to: 2 }));
    assert_eq!(cmd(&control(9)), None, "unknown command byte");
    assert_eq!(cmd(&control(1)[..22]), None);
    let mut bad = control(1);
    bad[14] = b'X';
    assert_eq!(cmd(&bad), None);
    let p = signed_payload(&CTL_KEY, 10, Command::Stats);
    assert_eq!(cmd(&eth(&[(TPID_8021Q, 5)], CONTROL_ETHERTYPE, &p)), Some(Command::Stats));
    assert_eq!(cmd(&udp4(1, 2, &[])), None);
}

#[test]
fn forwards_both_ways_with_mac_rewrite_in_order() {
    let mut mem = vec![0u8; 16 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 16).unwrap();
    let mut fwd = Forwarder::new(ForwardConfig::new(OWN, PEER, None));
    let mut counters = StageCounters::default();
    for port in 0..PORTS {
        let frames: Vec<_> = (0..5).map(|i| udp4(i, 7, &[i as u8; 3])).collect();
        let mut input = batch_of(&mut pool, &frames);
        let mut out = [Batch::new(), Batch::new()];
        let cmds = fwd.process(port, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
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
    let mut mem = vec![0u8; 8 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
    let mut fwd = Forwarder::new(ForwardConfig::new(OWN, PEER, None));
    let mut counters = StageCounters::default();
    let mut bad_sum = udp4(1, 2, &[]);
    bad_sum[24] ^= 0xFF;
    let frames = vec![
        udp4(1, 2, b"a"),
        vec![0; 10],
        eth(&[], 0x0806, &[0; 28]),
        bad_sum,
        control(1), // ctl off: just another EtherType
        tcp6(1, 2, b"b"),
    ];
    let mut input = batch_of(&mut pool, &frames);
    let mut out = [Batch::new(), Batch::new()];
    let cmds = fwd.process(1, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
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
    let mut mem = vec![0u8; 8 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
    let mut fwd = Forwarder::new(ForwardConfig::new(OWN, PEER, ctl_on(0)));
    let mut counters = StageCounters::default();
    let replayed = control(2);
    let frames = vec![replayed.clone(), udp4(1, 2, &[]), control(2), control(9), replayed, control(1)];
    let mut input = batch_of(&mut pool, &frames);
    let mut out = [Batch::new(), Batch::new()];
    let cmds = fwd.process(0, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
    assert_eq!(cmds, Commands { stop: true, stats: 2, rss_move: None, rss_restore: false });
    assert_eq!(counters.ctl, 3);
    assert_eq!(counters.drops_for(DropReason::CtlRejected), 2, "unknown command byte, replay");
    assert_eq!(out[1].len(), 1);
    // On the other port even a good frame is refused, and so is one signed with another key.
    let mut forged = control(1);
    let n = forged.len();
    forged[n - 1] ^= 1;
    let mut input = batch_of(&mut pool, &[control(1), forged]);
    let mut o = [Batch::new(), Batch::new()];
    assert!(fwd.process(1, &mut pool, &mut input, &mut o, &mut counters, Instant(0)).is_empty());
    assert_eq!(counters.drops_for(DropReason::CtlRejected), 4);
    assert_eq!(pool.in_use(), 1);
}

#[test]
fn no_room_or_no_port_counts_tx_full() {
    let mut mem = vec![0u8; 40 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 40).unwrap();
    let mut fwd = Forwarder::new(ForwardConfig::default());
    let mut counters = StageCounters::default();
    // An output batch that already holds 30 frames takes 2 of the next 4.
    let mut out = [Batch::new(), Batch::new()];
    for _ in 0..30 {
        let b = load(&mut pool, &udp4(1, 2, &[]));
        out[1].push(b).unwrap();
    }
    let frames: Vec<_> = (0..4).map(|_| udp4(1, 2, &[])).collect();
    let mut input = batch_of(&mut pool, &frames);
    fwd.process(0, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
    assert_eq!(counters.drops_for(DropReason::TxFull), 2);
    // A port the forwarder does not have, and an output slice that is too short.
    let mut input = batch_of(&mut pool, &frames[..1]);
    fwd.process(5, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
    let mut input = batch_of(&mut pool, &frames[..1]);
    fwd.process(0, &mut pool, &mut input, &mut out[..1], &mut counters, Instant(0));
    assert_eq!(counters.drops_for(DropReason::TxFull), 4);
    pool.free_batch(&mut out[1]);
    assert_eq!(pool.in_use(), 0);
}

#[test]
fn classify_reports_verdicts() {
    let fwd = Forwarder::new(ForwardConfig::new(OWN, PEER, ctl_on(0)));
    assert_eq!(fwd.classify(0, &udp4(1, 2, &[])), Verdict::Forward(1));
    assert_eq!(fwd.classify(1, &tcp4(1, 2, &[])), Verdict::Forward(0));
    assert_eq!(fwd.classify(0, &control(1)), Verdict::Control(Command::Stop));
    assert_eq!(fwd.classify(0, &eth(&[], ETHERTYPE_IPV4, &[0x45])), Verdict::Drop(DropReason::TruncatedL3));
}
