//! Multi-queue, the control queue and RSS against the device model.

use cadence_core::buf::{BUF_SIZE, Batch, Pool};
use cadence_core::nic::{Port, RssError, RxQueue};
use cadence_core::rss::DEFAULT_KEY;

use super::model::{CtrlMode, Event, FakeClock, FakeDma, FakePci, Model, POOL_BASE};
use super::regs::{DeviceStatus, feature};
use super::{Config, CtrlError, InitError, VirtioNet};

type Net = VirtioNet<super::model::Window, super::model::Region>;

const POOL_BUFS: usize = 4096;

struct Harness {
    model: Model,
    pci: FakePci,
    dma: FakeDma,
    clock: FakeClock,
    pool: Pool<'static>,
}

impl Harness {
    /// A device with `pairs` queue pairs, offering CTRL_VQ, MQ and RSS.
    fn new(pairs: u16) -> Self {
        let model = Model::with_pairs(POOL_BUFS * BUF_SIZE, pairs);
        let pool = Pool::try_with_mem(model.pool_mem(), POOL_BASE, POOL_BUFS).expect("pool");
        Self { pci: model.pci(), dma: model.dma(), clock: FakeClock::new(), model, pool }
    }

    fn try_init(&mut self, config: &Config) -> Result<Net, InitError> {
        VirtioNet::try_new(&self.pci, &mut self.dma, &self.clock, &mut self.pool, config)
    }

    fn init(&mut self, pairs: u16) -> Net {
        let net = self.try_init(&Config::default().with_queue_size(64).with_queue_pairs(pairs)).expect("init");
        self.model.assert_clean();
        net
    }

    /// Runs the device, then drains receive queue `q`: the frames it got.
    fn receive(&mut self, net: &mut Net, q: usize) -> Vec<Vec<u8>> {
        self.model.step();
        let mut out = Vec::new();
        let mut batch = Batch::new();
        let rx = net.rx_queue(q).expect("queue");
        while rx.rx_burst(&mut self.pool, &mut batch) > 0 {
            out.extend(batch.as_slice().iter().map(|&b| self.pool.frame(b).to_vec()));
            self.pool.free_batch(&mut batch);
        }
        out
    }
}

/// An Ethernet + IPv4 frame of protocol `proto` with the given ports (when `ports` is
/// set, as TCP/UDP), and a payload byte `tag`.
fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, ports: Option<(u16, u16)>, tag: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    let l4 = match ports {
        Some((s, d)) => [&s.to_be_bytes()[..], &d.to_be_bytes(), &[0, 12, 0, 0], &[tag; 4]].concat(),
        None => vec![8, 0, 0, 0, tag, tag, tag, tag],
    };
    let total = (20 + l4.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&l4);
    f
}

fn udp4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, tag: u8) -> Vec<u8> {
    ipv4(src, dst, 17, Some((sport, dport)), tag)
}

/// An Ethernet + IPv6 + TCP frame.
fn tcp6(src: [u16; 8], dst: [u16; 8], sport: u16, dport: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x86, 0xDD];
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 6, 64]);
    for g in src.iter().chain(&dst) {
        f.extend_from_slice(&g.to_be_bytes());
    }
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&[0; 16]);
    f
}

/// The RSS_CONFIG payload written out by hand from §5.1.6.5.7.1.
fn expected_rss_config(hash_types: u32, table: &[u16], max_tx_vq: u16, key: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&hash_types.to_le_bytes());
    b.extend_from_slice(&(table.len() as u16 - 1).to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    for q in table {
        b.extend_from_slice(&q.to_le_bytes());
    }
    b.extend_from_slice(&max_tx_vq.to_le_bytes());
    b.push(key.len() as u8);
    b.extend_from_slice(key);
    b
}

fn round_robin(len: usize, pairs: u16) -> Vec<u16> {
    (0..len).map(|i| (i % pairs as usize) as u16).collect()
}

#[test]
fn four_pairs_negotiate_mq_and_rss_and_send_the_spec_rss_config() {
    let mut h = Harness::new(4);
    let net = h.init(4);
    let d = h.model.dev();
    assert_eq!(
        d.accepted,
        feature::VERSION_1 | feature::NET_MAC | feature::NET_CTRL_VQ | feature::NET_MQ | feature::NET_RSS
    );
    let ok = DeviceStatus::ACKNOWLEDGE | DeviceStatus::DRIVER | DeviceStatus::FEATURES_OK | DeviceStatus::DRIVER_OK;
    // Queues 0..8, the control queue 8 = 2 * max pairs, DRIVER_OK, the RSS command,
    // then the receive rings are filled.
    let mut want: Vec<Event> = (0..=8).map(Event::QueueEnable).collect();
    want.extend([
        Event::Status(ok),
        Event::Notify(8),
        Event::Notify(0),
        Event::Notify(2),
        Event::Notify(4),
        Event::Notify(6),
    ]);
    assert_eq!(d.log[4..], want[..]);
    // One command: class MQ (4), RSS_CONFIG (1), bytes exactly as the spec lays them out.
    assert_eq!(d.ctrl_log.len(), 1);
    let c = &d.ctrl_log[0];
    assert_eq!((c.class, c.cmd, c.ack), (4, 1, 0));
    let table = round_robin(128, 4);
    assert_eq!(c.data, expected_rss_config(0x3F, &table, 4, &DEFAULT_KEY));
    assert_eq!(d.active_pairs, 4);
    let rss = d.rss.clone().expect("rss on");
    assert_eq!((rss.hash_types, rss.unclassified, rss.max_tx_vq), (0x3F, 0, 4));
    drop(d);
    assert_eq!((net.rx_queues(), net.tx_queues()), (4, 4));
    assert_eq!(net.rss_table(), Some(&table[..]));
    assert_eq!(net.rss_key(), Some(&DEFAULT_KEY[..]));
    assert_eq!(net.rss_hash_types(), Some(0x3F));
    // Every receive ring is full.
    assert_eq!(h.pool.in_use(), 4 * 64);
    h.model.assert_clean();
}

#[test]
fn pairs_are_capped_by_the_device_and_the_control_queue_follows_max_pairs() {
    // Ask for 8 of 2: 2 pairs, control queue 4.
    let mut h = Harness::new(2);
    let net = h.init(8);
    assert_eq!(net.rx_queues(), 2);
    assert!(h.model.dev().vqs[4].enabled);
    assert_eq!(h.model.dev().ctrl_log[0].data, expected_rss_config(0x3F, &round_robin(128, 2), 2, &DEFAULT_KEY));

    // Ask for 2 of 8: queues 0..4 and the control queue 16; 4..16 left alone.
    let mut h = Harness::new(8);
    let net = h.init(2);
    assert_eq!(net.rx_queues(), 2);
    let d = h.model.dev();
    let enabled: Vec<usize> = (0..d.vqs.len()).filter(|&q| d.vqs[q].enabled).collect();
    assert_eq!(enabled, [0, 1, 2, 3, 16]);
    assert_eq!(d.active_pairs, 2);
    drop(d);
    h.model.assert_clean();
}

#[test]
fn device_limits_shape_the_rss_config() {
    let mut h = Harness::new(4);
    {
        let mut d = h.model.dev();
        d.rss_max_table = 100; // Not a power of two: the driver takes 64.
        d.rss_max_key = 20;
        d.hash_types = 0x1 | 0x4 | 0x40; // IPv4, UDPv4, IP_EX.
    }
    let mut net = h.init(4);
    let c = h.model.dev().ctrl_log[0].clone();
    assert_eq!(c.data, expected_rss_config(0x5, &round_robin(64, 4), 4, &DEFAULT_KEY[..20]));
    assert_eq!(net.rss_table().map(<[u16]>::len), Some(64));
    assert_eq!(net.set_rss_table(&[0; 128]), Err(RssError::BadLength));
    h.model.assert_clean();
}

#[test]
fn one_pair_wanted_negotiates_no_control_queue() {
    let mut h = Harness::new(4);
    let mut net = h.try_init(&Config::default()).expect("init");
    let d = h.model.dev();
    assert_eq!(d.accepted, feature::VERSION_1 | feature::NET_MAC);
    assert!(d.ctrl_log.is_empty());
    assert_eq!(d.vqs.iter().filter(|q| q.enabled).count(), 2);
    drop(d);
    assert_eq!(net.rx_queues(), 1);
    assert_eq!(net.rss_table(), None);
    assert_eq!(net.set_rss_table(&[0; 128]), Err(RssError::Unsupported));
    h.model.assert_clean();
}

#[test]
fn mq_without_rss_sends_vq_pairs_set() {
    let mut h = Harness::new(3);
    h.model.dev().offered &= !feature::NET_RSS;
    let mut net = h.init(3);
    let d = h.model.dev();
    assert_eq!(
        d.accepted & (feature::NET_CTRL_VQ | feature::NET_MQ | feature::NET_RSS),
        feature::NET_CTRL_VQ | feature::NET_MQ
    );
    assert_eq!(d.ctrl_log.len(), 1);
    let c = &d.ctrl_log[0];
    assert_eq!((c.class, c.cmd, c.data.as_slice(), c.ack), (4, 0, &[3u8, 0][..], 0));
    assert_eq!(d.active_pairs, 3);
    drop(d);
    assert_eq!(net.rx_queues(), 3);
    assert_eq!(net.set_rss_table(&[0; 128]), Err(RssError::Unsupported));
}

#[test]
fn refused_or_unanswered_multiqueue_setup_fails_init_without_posting_buffers() {
    for (mode, err) in [
        (CtrlMode::Refuse, CtrlError::Refused(1)),
        (CtrlMode::NoAck, CtrlError::Refused(0xFF)),
        (CtrlMode::Silent, CtrlError::Timeout),
    ] {
        let mut h = Harness::new(2);
        h.model.dev().ctrl_mode = mode;
        let config = Config { timeout_ms: 5, ..Config::default().with_queue_pairs(2) };
        assert_eq!(h.try_init(&config).err(), Some(InitError::Multiqueue(err)), "{mode:?}");
        assert!(DeviceStatus(h.model.dev().status).contains(DeviceStatus::FAILED));
        assert_eq!(h.pool.in_use(), 0);
        if mode == CtrlMode::Silent {
            let waited = h.clock.ticks();
            assert!((5_000_000..6_000_000).contains(&waited), "waited {waited} ticks for a 5 ms deadline");
        }
    }
}

#[test]
fn a_flow_stays_on_one_queue_and_flows_spread_over_all() {
    let mut h = Harness::new(4);
    let mut net = h.init(4);
    let mut per_queue = [0usize; 4];
    let mut sent: Vec<Vec<Vec<u8>>> = vec![Vec::new(); 4];
    for flow in 0..64u32 {
        // Scattered addresses and ports (Toeplitz is linear: counting flows 0, 1, 2, ...
        // in two fields at once can cancel out in the low hash bits).
        let x = flow.wrapping_mul(0x9E37_79B9);
        let src = [10, (x >> 24) as u8, (x >> 16) as u8, (x >> 8) as u8];
        let mut q_of_flow = None;
        for seq in 0..3u8 {
            let f = udp4(src, [10, 1, 0, 1], x as u16, 4791, seq);
            let q = h.model.inject(&f);
            assert!(q_of_flow.is_none_or(|p| p == q), "flow {flow} moved from {q_of_flow:?} to {q}");
            q_of_flow = Some(q);
            sent[q].push(f);
        }
        per_queue[q_of_flow.expect("sent")] += 1;
    }
    assert!(per_queue.iter().all(|&n| n >= 5), "64 flows spread badly: {per_queue:?}");
    // The driver's queue k receives exactly what the device steered to k, in order.
    for (q, want) in sent.iter().enumerate() {
        assert_eq!(&h.receive(&mut net, q), want, "queue {q}");
    }
    h.model.assert_clean();
}

#[test]
fn steering_matches_the_rss_verification_suite() {
    // Microsoft RSS verification suite hashes with DEFAULT_KEY; bucket = hash & 127,
    // queue = bucket % 4 under the round-robin table.
    let mut h = Harness::new(4);
    let mut net = h.init(4);
    // TCPv4 38.27.205.30:48228 -> 209.142.163.6:2217: 0xafc7327f -> bucket 127 -> queue 3.
    let tcp = ipv4([38, 27, 205, 30], [209, 142, 163, 6], 6, Some((48228, 2217)), 1);
    assert_eq!(h.model.inject(&tcp), 3);
    // UDPv4 199.92.111.2:14230 -> 65.69.140.83:4739: 0xc626b0ea -> bucket 106 -> queue 2.
    let udp = udp4([199, 92, 111, 2], [65, 69, 140, 83], 14230, 4739, 2);
    assert_eq!(h.model.inject(&udp), 2);
    // ICMP 153.39.163.191 -> 202.188.127.2, addresses only: 0x5d1809c5 -> bucket 69 -> queue 1.
    let icmp = ipv4([153, 39, 163, 191], [202, 188, 127, 2], 1, None, 3);
    assert_eq!(h.model.inject(&icmp), 1);
    // TCPv6 3ffe:2501:200:1fff::7:2794 -> 3ffe:2501:200:3::1:1766: 0x40207d3d -> 61 -> queue 1.
    let v6 = tcp6([0x3ffe, 0x2501, 0x200, 0x1fff, 0, 0, 0, 7], [0x3ffe, 0x2501, 0x200, 3, 0, 0, 0, 1], 2794, 1766);
    assert_eq!(h.model.inject(&v6), 1);
    // Not IP: unclassified, queue 0.
    let arp = [vec![0xFF; 6], vec![2, 0, 0, 0, 0, 9], vec![0x08, 0x06], vec![0; 28]].concat();
    assert_eq!(h.model.inject(&arp), 0);
    assert_eq!(h.receive(&mut net, 3), vec![tcp]);
    assert_eq!(h.receive(&mut net, 2), vec![udp]);
    assert_eq!(h.receive(&mut net, 1), vec![icmp, v6]);
    assert_eq!(h.receive(&mut net, 0), vec![arp]);
}

#[test]
fn set_rss_table_moves_a_flows_bucket_to_another_queue() {
    let mut h = Harness::new(4);
    let mut net = h.init(4);
    let flow = |tag| udp4([199, 92, 111, 2], [65, 69, 140, 83], 14230, 4739, tag);
    assert_eq!(h.model.inject(&flow(0)), 2); // Bucket 106 (see above).
    let mut table = net.rss_table().expect("rss").to_vec();
    table[106] = 3;
    net.set_rss_table(&table).expect("accepted");
    assert_eq!(net.rss_table(), Some(&table[..]));
    {
        let d = h.model.dev();
        assert_eq!(d.ctrl_log.len(), 2);
        assert_eq!(d.ctrl_log[1].data, expected_rss_config(0x3F, &table, 4, &DEFAULT_KEY));
        assert_eq!(d.rss.as_ref().map(|r| r.table.clone()), Some(table.clone()));
    }
    assert_eq!(h.model.inject(&flow(1)), 3);
    // Another flow in another bucket did not move.
    let other = udp4([38, 27, 205, 30], [209, 142, 163, 6], 48228, 2217, 9);
    assert_eq!(h.model.inject(&other), 3); // Bucket 127 -> 127 % 4.
    assert_eq!(h.receive(&mut net, 2), vec![flow(0)]);
    assert_eq!(h.receive(&mut net, 3), vec![flow(1), other]);
    h.model.assert_clean();
}

#[test]
fn bad_tables_are_refused_before_any_command() {
    let mut h = Harness::new(4);
    let mut net = h.init(4);
    assert_eq!(net.set_rss_table(&[0; 64]), Err(RssError::BadLength));
    assert_eq!(net.set_rss_table(&[]), Err(RssError::BadLength));
    let mut t = vec![0u16; 128];
    t[77] = 4;
    assert_eq!(net.set_rss_table(&t), Err(RssError::BadQueue));
    assert_eq!(h.model.dev().ctrl_log.len(), 1, "only the bring-up command");
    assert_eq!(net.rss_table(), Some(&round_robin(128, 4)[..]));
}

#[test]
fn device_refusal_and_timeouts_keep_the_old_table_and_recover() {
    let mut h = Harness::new(2);
    let mut net = h.init(2);
    let old = round_robin(128, 2);
    let zeros = vec![0u16; 128];
    let ones = vec![1u16; 128];

    h.model.dev().ctrl_mode = CtrlMode::Refuse;
    assert_eq!(net.set_rss_table(&zeros), Err(RssError::Device));
    assert_eq!(net.rss_table(), Some(&old[..]));
    assert_eq!(h.model.dev().rss.as_ref().map(|r| r.table.clone()), Some(old.clone()));

    // A device that never answers: the wait ends at the deadline (100 ms default).
    h.model.dev().ctrl_mode = CtrlMode::Silent;
    let t0 = h.clock.ticks();
    assert_eq!(net.set_rss_table(&zeros), Err(RssError::Device));
    let waited = h.clock.ticks() - t0;
    assert!((100_000_000..101_000_000).contains(&waited), "waited {waited} ticks for a 100 ms deadline");
    // The command is still the device's: the next one is refused at once.
    let t1 = h.clock.ticks();
    assert_eq!(net.set_rss_table(&ones), Err(RssError::Device));
    assert_eq!(h.clock.ticks(), t1, "no wait while the earlier command is outstanding");
    assert_eq!(net.rss_table(), Some(&old[..]));

    // The device answers late (the timed-out table takes effect there); the port
    // recovers and the next command goes through.
    h.model.answer_ctrl();
    h.model.dev().ctrl_mode = CtrlMode::Answer;
    assert_eq!(h.model.dev().rss.as_ref().map(|r| r.table.clone()), Some(zeros.clone()));
    net.set_rss_table(&ones).expect("accepted after recovery");
    assert_eq!(net.rss_table(), Some(&ones[..]));
    let d = h.model.dev();
    assert_eq!(d.rss.as_ref().map(|r| r.table.clone()), Some(ones));
    // Bring-up, refused, late-answered, accepted.
    assert_eq!(d.ctrl_log.iter().map(|c| c.ack).collect::<Vec<_>>(), [0, 1, 0, 0]);
    drop(d);
    h.model.assert_clean();
}

#[test]
fn control_commands_are_checked_by_the_device() {
    // The model refuses RSS_CONFIG payloads that break the spec's rules; the driver
    // never sends one, so drive the device with hand-made commands through a port.
    let mut h = Harness::new(2);
    let _net = h.init(2);
    let mut d = h.model.dev();
    let good = expected_rss_config(0x3F, &round_robin(4, 2), 2, &DEFAULT_KEY);
    assert_eq!(d.execute(4, 1, &good), 0);
    let mut bad_mask = good.clone();
    bad_mask[4] = 2; // Length 3: not a power of two.
    let long_table = expected_rss_config(0x3F, &round_robin(256, 2), 2, &DEFAULT_KEY);
    let bad_queue = expected_rss_config(0x3F, &[0, 1, 2, 0], 2, &DEFAULT_KEY);
    let bad_types = expected_rss_config(0x400, &round_robin(4, 2), 2, &DEFAULT_KEY);
    let too_many_tx = expected_rss_config(0x3F, &round_robin(4, 2), 3, &DEFAULT_KEY);
    let long_key = expected_rss_config(0x3F, &round_robin(4, 2), 2, &[0; 41]);
    let mut trailing = good.clone();
    trailing.push(0);
    for (i, bad) in [bad_mask, long_table, bad_queue, bad_types, too_many_tx, long_key, trailing].iter().enumerate() {
        assert_eq!(d.execute(4, 1, bad), 1, "bad config {i}");
    }
    assert_eq!(d.execute(4, 0, &[2, 0]), 0, "VQ_PAIRS_SET 2");
    assert_eq!(d.execute(4, 0, &[3, 0]), 1, "VQ_PAIRS_SET 3 > max");
    assert_eq!(d.execute(4, 0, &[0, 0]), 1, "VQ_PAIRS_SET 0");
    assert_eq!(d.execute(9, 9, &[]), 1, "unknown class");
}

#[test]
fn the_device_configuration_must_hold_the_fields_in_use() {
    // Shrink the device-configuration capability to 10 bytes: MAC, status and
    // max_virtqueue_pairs, but none of the RSS limits.
    let shrink = |h: &Harness| {
        let mut c = h.pci.config.borrow_mut();
        let mut p = c[crate::hal::pci::CAP_PTR as usize] as usize;
        while p != 0 {
            if c[p] == crate::hal::pci::CAP_VENDOR && c[p + 3] == 4 {
                c[p + 12..p + 16].copy_from_slice(&10u32.to_le_bytes());
            }
            p = c[p + 1] as usize;
        }
    };
    let mut h = Harness::new(2);
    shrink(&h);
    let config = Config::default().with_queue_pairs(2);
    assert_eq!(h.try_init(&config).err(), Some(InitError::NoDeviceCfg));

    // MQ without RSS needs only max_virtqueue_pairs.
    let mut h = Harness::new(2);
    shrink(&h);
    h.model.dev().offered &= !feature::NET_RSS;
    let net = h.try_init(&config).expect("init");
    assert_eq!(net.rx_queues(), 2);
    h.model.assert_clean();
}
