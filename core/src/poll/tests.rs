use super::*;
use crate::buf::BUF_SIZE;
use crate::nf::{Chain, Egress};
use crate::parse::ETHERTYPE_IPV4;
use crate::softnic::{SoftRxQueue, SoftTxQueue};
use crate::test_frames::*;
use crate::time::TickRate;
use core::cell::Cell;
use proptest::prelude::*;

const OWN: [[u8; 6]; 2] = [[0x52, 0x54, 0, 0, 0, 0x10], [0x52, 0x54, 0, 0, 0, 0x11]];
const PEER: [[u8; 6]; PORTS] = Egress::DEFAULT_PEERS;
const RING: usize = 64;

/// A clock that advances `step` ticks per reading.
struct FakeClock {
    t: Cell<u64>,
    step: u64,
}

impl FakeClock {
    fn new(step: u64) -> Self {
        Self { t: Cell::new(0), step }
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        let t = self.t.get();
        self.t.set(t + self.step);
        Instant(t)
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(1_000).unwrap()
    }
}

/// Two ports of soft queues over one pool.
struct Rig<'m> {
    pool: Pool<'m>,
    rx: [SoftRxQueue; 2],
    tx: [SoftTxQueue; 2],
    worker: Poller<Chain>,
    clock: FakeClock,
}

impl<'m> Rig<'m> {
    fn new(mem: &'m mut [u8], tx_size: usize, ctl: bool, retries: u32) -> Self {
        let count = mem.len() / BUF_SIZE;
        let mut pool = Pool::try_new(mem, 0, count).unwrap();
        let rx = [SoftRxQueue::new(&mut pool, RING), SoftRxQueue::new(&mut pool, RING)];
        let tx = [SoftTxQueue::new(tx_size, false), SoftTxQueue::new(tx_size, false)];
        let worker = Poller::new(
            Chain::new(Vec::new(), Egress::new(OWN, PEER, if ctl { ctl_on(0) } else { None })),
            PollConfig::new(retries, Duration::ZERO),
        );
        Self { pool, rx, tx, worker, clock: FakeClock::new(1) }
    }

    fn poll(&mut self) -> PollOutcome {
        self.worker.poll_once(&mut self.pool, &mut self.rx, &mut self.tx, &self.clock)
    }

    fn inject(&mut self, port: usize, frame: &[u8]) {
        self.rx[port].inject(&mut self.pool, frame).unwrap();
    }

    /// The wire takes everything on port `port`'s TX ring.
    fn wire(&mut self, port: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        self.tx[port].transmit(&self.pool, usize::MAX, |f| got.push(f.to_vec()));
        got
    }

    /// Buffers that belong to RX rings; everything else must be back in the pool.
    fn rx_owned(&self) -> usize {
        self.rx.iter().map(SoftRxQueue::owned).sum()
    }

    /// Sends and reclaims everything, then checks that no buffer leaked.
    fn assert_no_leak(&mut self) {
        for p in 0..2 {
            self.wire(p);
            self.tx[p].reclaim(&mut self.pool);
        }
        assert_eq!(self.pool.in_use(), self.rx_owned());
        assert_eq!(self.pool.double_frees(), 0);
    }
}

fn expect_rewritten(frame: &[u8], original: &[u8], to: usize) {
    assert_eq!(&frame[0..6], &PEER[to]);
    assert_eq!(&frame[6..12], &OWN[to]);
    assert_eq!(&frame[12..], &original[12..]);
}

#[test]
fn every_good_frame_is_forwarded_once_in_order() {
    let mut mem = vec![0u8; 512 * BUF_SIZE];
    let mut rig = Rig::new(&mut mem, 256, false, 4);
    let sent0: Vec<_> = (0..crate::testing::miri_or(200u16, 40)).map(|i| udp4(i, 9, &i.to_be_bytes())).collect();
    let sent1: Vec<_> = (0..crate::testing::miri_or(150u16, 30)).map(|i| tcp6(i, 80, &i.to_be_bytes())).collect();
    let (mut got0, mut got1) = (Vec::new(), Vec::new());
    let (mut i0, mut i1) = (0, 0);
    while i0 < sent0.len() || i1 < sent1.len() || rig.rx.iter().any(|q| q.pending() > 0) {
        // The wire delivers up to 30 frames per port between polls (a poll takes 32).
        for _ in 0..30 {
            if i0 < sent0.len() {
                rig.inject(0, &sent0[i0]);
                i0 += 1;
            }
            if i1 < sent1.len() {
                rig.inject(1, &sent1[i1]);
                i1 += 1;
            }
        }
        rig.poll();
        got1.extend(rig.wire(1));
        got0.extend(rig.wire(0));
    }
    assert_eq!((got1.len(), got0.len()), (sent0.len(), sent1.len()));
    for (g, s) in got1.iter().zip(&sent0) {
        expect_rewritten(g, s, 1);
    }
    for (g, s) in got0.iter().zip(&sent1) {
        expect_rewritten(g, s, 0);
    }
    let st = rig.worker.stats();
    assert_eq!((st.ports[0].rx, st.ports[1].tx, st.ports[1].rx, st.ports[0].tx), (200, 200, 150, 150));
    let bytes0: u64 = sent0.iter().map(|f| f.len() as u64).sum();
    assert_eq!((st.ports[0].rx_bytes, st.ports[1].tx_bytes), (bytes0, bytes0));
    assert_eq!(st.drops_total(), 0);
    assert!(st.busy_polls > 0 && st.busy_polls <= st.polls);
    rig.assert_no_leak();
}

#[test]
fn malformed_frames_are_dropped_by_reason() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let mut rig = Rig::new(&mut mem, 64, false, 4);
    let good = udp4(1, 2, b"ok");
    let mut bad_ver = good.clone();
    bad_ver[14] = 0x55;
    let mut bad_ihl = good.clone();
    bad_ihl[14] = 0x43;
    let mut bad_sum = good.clone();
    bad_sum[14 + 8] = 0;
    let mut bad_total = good.clone();
    bad_total[16..18].copy_from_slice(&500u16.to_be_bytes());
    let mut bad_udp = good.clone();
    bad_udp[38..40].copy_from_slice(&3u16.to_be_bytes());
    let cases: Vec<(Vec<u8>, DropReason)> = vec![
        (good[..10].to_vec(), DropReason::Runt),
        (eth(&[], 0x0806, &[0; 28]), DropReason::UnsupportedEthertype),
        (control(1), DropReason::UnsupportedEthertype),
        (good[..20].to_vec(), DropReason::TruncatedL3),
        (bad_ver, DropReason::BadIpVersion),
        (bad_ihl, DropReason::BadIpHeaderLen),
        (bad_total, DropReason::BadIpTotalLen),
        (bad_sum, DropReason::BadIpChecksum),
        (eth(&[], ETHERTYPE_IPV4, &ipv4(6, &[0; 10])), DropReason::TruncatedL4),
        (bad_udp, DropReason::BadL4Len),
    ];
    for (f, _) in &cases {
        rig.inject(0, &good);
        rig.inject(0, f);
    }
    let out = rig.poll();
    assert_eq!((out.rx, out.tx, out.dropped), (20, 10, 10));
    assert!(out.commands.is_empty(), "ctl=off: STOP is just a drop");
    let st = *rig.worker.stats();
    for (_, r) in &cases {
        let want = cases.iter().filter(|(_, x)| x == r).count() as u64;
        assert_eq!(st.stage.drops_for(*r), want, "{r}");
    }
    assert_eq!((st.drops_total(), st.stage.ctl, st.ports[1].tx), (10, 0, 10));
    assert_eq!(rig.wire(1).len(), 10);
    rig.assert_no_leak();
}

#[test]
fn tx_full_backpressure_is_counted() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let mut rig = Rig::new(&mut mem, 8, false, 3);
    for i in 0..20u16 {
        rig.inject(0, &udp4(i, 1, &[]));
    }
    let out = rig.poll();
    assert_eq!((out.rx, out.tx, out.dropped), (20, 8, 12));
    let st = *rig.worker.stats();
    assert_eq!((st.ports[1].tx, st.ports[1].tx_full), (8, 12));
    assert_eq!(st.stage.drops_for(DropReason::TxFull), 12);
    // Four tx_burst attempts (1 + 3 retries), each refused 12 frames.
    assert_eq!(rig.tx[1].tx_stats().ring_full, 4 * 12);
    // The ring still holds 8 frames; nothing else is outside the pool or RX rings.
    assert_eq!(rig.pool.in_use(), rig.rx_owned() + 8);
    // The first 8 frames went out, in order.
    let got = rig.wire(1);
    assert_eq!(got.iter().map(|f| u16::from_be_bytes([f[34], f[35]])).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    rig.assert_no_leak();
}

#[test]
fn control_stop_and_stats_are_reported() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let mut rig = Rig::new(&mut mem, 64, true, 4);
    rig.inject(1, &udp4(1, 2, &[]));
    rig.inject(0, &control(2));
    rig.inject(0, &control(1));
    let out = rig.poll();
    assert_eq!(out.commands, Commands { stop: true, stats: 1, rss_move: None, rss_restore: false });
    assert_eq!((out.rx, out.tx, out.dropped), (3, 1, 0));
    assert_eq!(rig.worker.stats().stage.ctl, 2);
    let out = rig.poll();
    assert!(out.commands.is_empty());
    assert_eq!(rig.worker.stats().busy_polls, 1);
    assert_eq!(rig.worker.drain_tx(&mut rig.pool, &mut rig.tx, &rig.clock, Duration(10)), Err(Timeout));
    rig.wire(0);
    assert_eq!(rig.worker.drain_tx(&mut rig.pool, &mut rig.tx, &rig.clock, Duration(10)), Ok(()));
    assert_eq!(rig.pool.in_use(), rig.rx_owned());
}

#[test]
fn missing_tx_queue_drops_as_tx_full() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let mut rig = Rig::new(&mut mem, 64, false, 0);
    rig.inject(0, &udp4(1, 2, &[]));
    let out = rig.worker.poll_once(&mut rig.pool, &mut rig.rx, &mut rig.tx[..1], &rig.clock);
    assert_eq!((out.rx, out.tx, out.dropped), (1, 0, 1));
    // The stage had no output batch for port 1 (the poll had no TX queue for it): it dropped
    // the frame itself, counted by reason; port 1 has no counters of its own to bump.
    assert_eq!(rig.worker.stats().stage.drops_for(DropReason::TxFull), 1);
    assert_eq!(rig.worker.stats().ports[1].tx_full, 0);
    assert_eq!(rig.pool.in_use(), rig.rx_owned());
}

#[test]
fn stats_due_follows_the_period() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let count = mem.len() / BUF_SIZE;
    let mut pool = Pool::try_new(&mut mem, 0, count).unwrap();
    let mut rx = [SoftRxQueue::new(&mut pool, 4), SoftRxQueue::new(&mut pool, 4)];
    let mut tx = [SoftTxQueue::new(4, true), SoftTxQueue::new(4, true)];
    let mut w = Poller::new(Chain::new(Vec::new(), Egress::default()), PollConfig::new(0, Duration(10)));
    let clock = FakeClock::new(3);
    let due: Vec<bool> = (0..12).map(|_| w.poll_once(&mut pool, &mut rx, &mut tx, &clock).stats_due).collect();
    // Readings 0, 3, 6, …: the first poll arms the deadline at 10; due at 12, then
    // at 24 (≥ 12 + 10); 33 is short of 24 + 10.
    let at: Vec<usize> = due.iter().enumerate().filter(|(_, d)| **d).map(|(i, _)| i).collect();
    assert_eq!(at, [4, 8]);
    assert_eq!(w.stats().polls, 12);
    assert_eq!(w.stats().busy_polls, 0);
}

#[test]
fn counters_line_has_every_protocol_key_in_order() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let mut rig = Rig::new(&mut mem, 64, true, 0);
    rig.inject(0, &udp4(1, 2, b"abcd"));
    rig.inject(0, &[0u8; 5]);
    rig.inject(0, &control(2));
    rig.poll();
    let drv = DriverCounters::from_queues(&rig.rx, &rig.pool);
    let mut line = String::new();
    rig.worker.stats().write_counters(&mut line, &drv, 2).unwrap();
    let kv: Vec<(&str, &str)> = line.split(' ').map(|p| p.split_once('=').unwrap()).collect();
    let mut keys = Vec::new();
    for i in 0..2 {
        for k in ["rx", "rx_bytes", "tx", "tx_bytes", "rx_err", "no_buf", "tx_full"] {
            keys.push(format!("p{i}_{k}"));
        }
    }
    keys.push("drops".into());
    keys.extend(DropReason::ALL.iter().map(|r| format!("drop_{}", r.as_str())));
    keys.extend(["ctl", "generated", "pool_in_use", "polls", "busy_polls"].map(String::from));
    assert_eq!(kv.iter().map(|(k, _)| k.to_string()).collect::<Vec<_>>(), keys);
    let get = |k: &str| kv.iter().find(|(x, _)| *x == k).unwrap().1.parse::<u64>().unwrap();
    assert_eq!(get("p0_rx"), 3);
    assert_eq!(get("p0_rx_bytes"), (udp4(1, 2, b"abcd").len() + 5 + control(2).len()) as u64);
    assert_eq!((get("p1_tx"), get("drops"), get("drop_runt"), get("ctl")), (1, 1, 1, 1));
    assert_eq!((get("polls"), get("busy_polls")), (1, 1));
    assert_eq!(get("pool_in_use"), rig.pool.in_use() as u64);
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]
    /// Random traffic, ring sizes and wire speeds: every received frame is sent,
    /// dropped or consumed exactly once, and no buffer leaks.
    #[test]
    fn conservation_and_no_leak(
        frames in proptest::collection::vec((0usize..2, 0u8..6), 0..crate::testing::miri_or(300, 40)),
        tx_size in 1usize..40,
        wire_rate in 0usize..40,
        retries in 0u32..3,
    ) {
        let mut mem = vec![0u8; 400 * BUF_SIZE];
        let mut rig = Rig::new(&mut mem, tx_size, true, retries);
        let mut sent = [0u64; 2];
        let mut injected = 0u64;
        for chunk in frames.chunks(50) {
            for &(port, kind) in chunk {
                let f = match kind {
                    0 | 1 => udp4(1, 2, &[kind]),
                    2 => tcp6(3, 4, &[]),
                    3 => vec![0; 9],
                    4 => control(2),
                    _ => eth(&[], 0x0806, &[0; 28]),
                };
                if rig.rx[port].inject(&mut rig.pool, &f).is_ok() {
                    injected += 1;
                }
            }
            rig.poll();
            for (p, s) in sent.iter_mut().enumerate() {
                *s += rig.tx[p].transmit(&rig.pool, wire_rate, |_| {}) as u64;
            }
        }
        while rig.rx.iter().any(|q| q.pending() > 0) {
            rig.poll();
        }
        let st = *rig.worker.stats();
        let rx: u64 = st.ports.iter().map(|p| p.rx).sum();
        let tx: u64 = st.ports.iter().map(|p| p.tx).sum();
        prop_assert_eq!(rx, injected);
        prop_assert_eq!(rx, tx + st.drops_total() + st.stage.ctl);
        let full: u64 = st.ports.iter().map(|p| p.tx_full).sum();
        prop_assert_eq!(full, st.stage.drops_for(DropReason::TxFull));
        let in_rings: usize = rig.tx.iter().map(|q| q.in_flight()).sum();
        prop_assert_eq!(rig.pool.in_use(), rig.rx_owned() + in_rings);
        rig.assert_no_leak();
        let _ = sent;
    }
}

#[test]
fn every_forwarded_frame_is_timed_from_its_poll_to_its_tx_burst() {
    let mut mem = alloc::vec![0u8; 512 * BUF_SIZE];
    let mut rig = Rig::new(&mut mem, 256, false, 0);
    // The fake clock advances one tick per reading and starts at 0: burn the first reading,
    // whose stamp (0) would mean "not stamped".
    let _ = rig.clock.now();
    for seq in 0..40u8 {
        rig.inject((seq % 2) as usize, &udp4(1000 + u16::from(seq), 53, b"payload"));
    }
    let out = rig.poll();
    assert_eq!(out.tx, 40);
    // Two readings per poll: the poll's start (the stamp) and the one before the TX bursts.
    let l = rig.worker.latency();
    assert_eq!(l.count(), 40);
    assert_eq!(l.histogram().quantile(1.0), Some(1));
    // Without timing nothing is stamped or recorded.
    let mut mem2 = alloc::vec![0u8; 512 * BUF_SIZE];
    let mut off = Rig::new(&mut mem2, 256, false, 0);
    off.worker = Poller::new(
        Chain::new(Vec::new(), Egress::new(OWN, PEER, None)),
        PollConfig::new(0, Duration::ZERO).without_timing(),
    );
    let _ = off.clock.now();
    off.inject(0, &udp4(1000, 53, b"payload"));
    assert_eq!(off.poll().tx, 1);
    assert_eq!(off.worker.latency().count(), 0);
}

/// Holds every other frame of a poll until the next poll, and sends held and new frames
/// interleaved: one TX batch then mixes stamps of two polls, run after run.
struct Interleave {
    held: Batch,
}

impl Stage for Interleave {
    fn process(
        &mut self,
        _port: usize,
        _pool: &mut Pool<'_>,
        input: &mut Batch,
        out: &mut [Batch],
        _counters: &mut crate::stage::StageCounters,
        _now: Instant,
    ) -> Commands {
        let mut older = core::mem::replace(&mut self.held, Batch::new());
        let mut keep = false;
        while let Some(b) = input.pop() {
            if keep {
                let _ = self.held.push(b);
            } else if let Some(o) = out.get_mut(1) {
                let _ = o.push(b);
                if let (Some(h), Some(o)) = (older.pop(), out.get_mut(1)) {
                    let _ = o.push(h);
                }
            }
            keep = !keep;
        }
        if let Some(o) = out.get_mut(1) {
            while let Some(h) = older.pop() {
                let _ = o.push(h);
            }
        }
        Commands::default()
    }
}

#[test]
fn a_tx_batch_mixing_polls_times_each_frame_by_its_own_poll() {
    let mut mem = alloc::vec![0u8; 512 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 512).unwrap();
    let mut rx = [SoftRxQueue::new(&mut pool, RING), SoftRxQueue::new(&mut pool, RING)];
    let mut tx = [SoftTxQueue::new(256, true), SoftTxQueue::new(256, true)];
    let mut w = Poller::new(Interleave { held: Batch::new() }, PollConfig::new(0, Duration::ZERO));
    // Readings: poll 1 stamps at 10 and sends at 20; poll 2 stamps at 30 and sends at 40.
    let clock = FakeClock::new(10);
    let _ = clock.now();
    for i in 0..8u16 {
        rx[0].inject(&mut pool, &udp4(1000 + i, 53, b"x")).unwrap();
    }
    assert_eq!(w.poll_once(&mut pool, &mut rx, &mut tx, &clock).tx, 4, "poll 1 sends half, holds half");
    for i in 0..8u16 {
        rx[0].inject(&mut pool, &udp4(2000 + i, 53, b"x")).unwrap();
    }
    // Poll 2's TX batch alternates its own frames (10 ticks) with poll 1's (30 ticks).
    assert_eq!(w.poll_once(&mut pool, &mut rx, &mut tx, &clock).tx, 8);
    let l = w.latency();
    assert_eq!(l.count(), 12, "every transmitted frame timed once");
    let h = l.histogram();
    // 4 frames of poll 1 at 10, 4 of poll 2 at 10, 4 held ones at 30.
    assert_eq!(h.quantile(0.0), Some(10));
    assert_eq!(h.quantile(8.0 / 12.0), Some(10));
    assert!(h.quantile(9.0 / 12.0).is_some_and(|t| (30..32).contains(&t)), "{:?}", h.quantile(0.75));
}

/// A TX queue that takes at most three frames per call (a ring the device drains between
/// attempts) and frees them at once, remembering the bytes of what it took.
struct ThreePerBurst {
    took: Vec<usize>,
}

impl TxQueue for ThreePerBurst {
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let mut n = 0;
        while n < 3 {
            let Some(&b) = batch.as_slice().first() else { break };
            self.took.push(pool.len(b));
            batch.drain_front(1);
            let _ = pool.free(b);
            n += 1;
        }
        n
    }
    fn reclaim(&mut self, _: &mut Pool<'_>) -> usize {
        0
    }
    fn in_flight(&self) -> usize {
        0
    }
    fn tx_stats(&self) -> crate::nic::TxStats {
        crate::nic::TxStats::default()
    }
}

/// Frames a TX ring takes over several attempts of one poll: `tx_bytes` is the bytes of the
/// frames each attempt took (not the first ones' again), with the latency accounting on and
/// off, and every frame taken is timed once.
#[test]
fn tx_bytes_count_what_each_attempt_took() {
    for timing in [true, false] {
        let mut mem = vec![0u8; 64 * BUF_SIZE];
        let count = mem.len() / BUF_SIZE;
        let mut pool = Pool::try_new(&mut mem, 0, count).unwrap();
        let mut rx = [SoftRxQueue::new(&mut pool, RING), SoftRxQueue::new(&mut pool, RING)];
        let mut tx = [ThreePerBurst { took: Vec::new() }, ThreePerBurst { took: Vec::new() }];
        let cfg = PollConfig::new(3, Duration::ZERO);
        let mut worker = Poller::new(
            Chain::new(Vec::new(), Egress::new(OWN, PEER, None)),
            if timing { cfg } else { cfg.without_timing() },
        );
        // Ten frames of different lengths: 3 + 3 + 3 + 1 taken over four attempts.
        for i in 0..10u16 {
            rx[0].inject(&mut pool, &udp4(i, 1, &vec![0xAB; usize::from(i) * 7])).unwrap();
        }
        // Stamp 0 means "never stamped": the clock starts past it.
        let clock = FakeClock::new(1);
        let _ = clock.now();
        let out = worker.poll_once(&mut pool, &mut rx, &mut tx, &clock);
        assert_eq!(out.tx, 10);
        let st = *worker.stats();
        assert_eq!(tx[1].took.len(), 10);
        assert_eq!(st.ports[1].tx_bytes, tx[1].took.iter().map(|&l| l as u64).sum::<u64>(), "timing {timing}");
        assert_eq!(st.ports[1].tx_bytes, st.ports[0].rx_bytes, "L2 forwarding keeps lengths");
        assert_eq!(worker.latency().count(), if timing { 10 } else { 0 });
    }
}

/// An RX queue that stamps its frames with their arrival, as AF_XDP's does: the `n`-th frame
/// it hands out gets `stamps[n]` (0: no stamp).
struct ArrivalRx {
    q: SoftRxQueue,
    stamps: Vec<u64>,
    next: usize,
}

impl RxQueue for ArrivalRx {
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let before = batch.len();
        let n = self.q.rx_burst(pool, batch);
        for &b in batch.as_slice().iter().skip(before) {
            pool.set_stamp(b, self.stamps.get(self.next).copied().unwrap_or(0));
            self.next += 1;
        }
        n
    }
    fn rx_stats(&self) -> crate::nic::RxStats {
        self.q.rx_stats()
    }
    fn stamps_arrival(&self) -> bool {
        true
    }
}

#[test]
fn a_frame_that_waited_in_the_ring_counts_its_wait_from_its_arrival_stamp() {
    let mut mem = alloc::vec![0u8; 512 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 512).unwrap();
    let soft = |pool: &mut Pool<'_>| SoftRxQueue::new(pool, RING);
    // Arrivals: 100 ticks before the poll's reading (1000), 40 before, none, and one after it
    // (the two clocks disagree: counted from the poll instead).
    let stamps = alloc::vec![900, 960, 0, 5_000];
    let mut rx = [
        ArrivalRx { q: soft(&mut pool), stamps, next: 0 },
        ArrivalRx { q: soft(&mut pool), stamps: Vec::new(), next: 0 },
    ];
    let mut tx = [SoftTxQueue::new(256, true), SoftTxQueue::new(256, true)];
    // SLO 30 ticks; the poll reads 1000 and sends at 1010 (10 ticks: under it).
    let cfg = PollConfig::new(0, Duration::ZERO).with_slo(Duration(30));
    let mut w = Poller::new(Chain::new(Vec::new(), Egress::new(OWN, PEER, None)), cfg);
    let clock = FakeClock::new(10);
    clock.t.set(1000);
    for i in 0..4u16 {
        rx[0].q.inject(&mut pool, &udp4(1000 + i, 53, b"x")).unwrap();
    }
    assert_eq!(w.poll_once(&mut pool, &mut rx, &mut tx, &clock).tx, 4);
    let l = w.latency();
    assert_eq!(l.count(), 4);
    // From the ring exit all four would be 10 ticks and none over the SLO; from arrival the
    // first waited 100 more (110) and the second 40 more (50): both over it.
    assert_eq!(l.over_slo(), 2);
    // The unstamped frame and the one stamped after the poll: timed from the poll, counted.
    assert_eq!(l.from_poll(), 2);
    let h = l.histogram();
    assert_eq!(h.quantile(0.0), Some(10));
    assert_eq!(h.quantile(0.5), Some(10));
    assert!(h.quantile(0.75).is_some_and(|t| (48..56).contains(&t)), "{:?}", h.quantile(0.75));
    assert!(h.quantile(1.0).is_some_and(|t| (104..112).contains(&t)), "{:?}", h.quantile(1.0));

    // The same frames from a queue that does not stamp: ring exit, nothing over the SLO.
    let mut plain = [soft(&mut pool), soft(&mut pool)];
    let mut w2 = Poller::new(Chain::new(Vec::new(), Egress::new(OWN, PEER, None)), cfg);
    for i in 0..4u16 {
        plain[0].inject(&mut pool, &udp4(1000 + i, 53, b"x")).unwrap();
    }
    assert_eq!(w2.poll_once(&mut pool, &mut plain, &mut tx, &clock).tx, 4);
    assert_eq!((w2.latency().count(), w2.latency().over_slo(), w2.latency().from_poll()), (4, 0, 0));
    assert_eq!(w2.latency().histogram().quantile(1.0), Some(10));
}
