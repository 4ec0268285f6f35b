//! The virtio-net driver against the register-level model in [`super::model`].

use cadence_core::buf::{BUF_SIZE, Batch, HEADROOM, PacketBuf, Pool};
use cadence_core::nic::{Port, RssError, RxQueue, TxQueue};

use super::model::{Event, FakeClock, FakeDma, FakePci, MODEL_NO_VECTOR, Model, POOL_BASE};
use super::pci::CapError;
use super::regs::{DeviceStatus, feature};
use super::{Config, InitError, VirtioNet};

type Net = VirtioNet<super::model::Window, super::model::Region>;

const POOL_BUFS: usize = 1024;

/// A model, its PCI function, DMA, clock and a pool over the shared packet memory.
struct Harness {
    model: Model,
    pci: FakePci,
    dma: FakeDma,
    clock: FakeClock,
    pool: Pool<'static>,
}

impl Harness {
    fn new() -> Self {
        let model = Model::new(POOL_BUFS * BUF_SIZE);
        let pool = Pool::try_with_mem(model.pool_mem(), POOL_BASE, POOL_BUFS).expect("pool");
        Self { pci: model.pci(), dma: model.dma(), clock: FakeClock::new(), model, pool }
    }

    fn try_init(&mut self, config: &Config) -> Result<Net, InitError> {
        VirtioNet::try_new(&self.pci, &mut self.dma, &self.clock, &mut self.pool, config)
    }

    fn init(&mut self, config: &Config) -> Net {
        let net = self.try_init(config).expect("init");
        self.model.assert_clean();
        net
    }

    /// A frame of `len` bytes in a fresh buffer, its bytes derived from `seed`.
    fn frame(&mut self, seed: u32, len: usize) -> PacketBuf {
        let b = self.pool.alloc().expect("pool has buffers");
        // Dirty the headroom: the driver must zero the header it puts there.
        self.pool.raw_mut(b)[..HEADROOM].fill(0xAA);
        self.pool.set_len(b, len).expect("fits");
        self.pool.frame_mut(b).copy_from_slice(&frame_bytes(seed, len));
        b
    }

    fn status(&self) -> DeviceStatus {
        DeviceStatus(self.model.dev().status)
    }
}

fn frame_bytes(seed: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (seed as usize * 31 + i * 7) as u8).collect()
}

/// A frame length between 14 and 1514 derived from `i`.
fn frame_len(i: u32) -> usize {
    14 + (i as usize * 97) % 1501
}

#[test]
fn init_follows_the_spec_sequence_and_negotiates_version_1_and_mac() {
    let mut h = Harness::new();
    let net = h.init(&Config::default());

    let d = h.model.dev();
    let ack = DeviceStatus::ACKNOWLEDGE;
    let drv = ack | DeviceStatus::DRIVER;
    let fok = drv | DeviceStatus::FEATURES_OK;
    let ok = fok | DeviceStatus::DRIVER_OK;
    // Reset, ACKNOWLEDGE, DRIVER, FEATURES_OK, queues 0 and 1, DRIVER_OK, then the first
    // RX notification.
    assert_eq!(
        d.log,
        vec![
            Event::Status(0),
            Event::Status(ack),
            Event::Status(drv),
            Event::Status(fok),
            Event::QueueEnable(0),
            Event::QueueEnable(1),
            Event::Status(ok),
            Event::Notify(0),
        ]
    );
    // MRG_RXBUF, CSUM, STATUS and EVENT_IDX were offered but not taken.
    assert_eq!(d.accepted, feature::VERSION_1 | feature::NET_MAC);
    assert_eq!(net.features(), d.accepted);
    assert_eq!(net.mac(), d.mac);
    assert_eq!(d.config_msix, MODEL_NO_VECTOR);
    for vq in &d.vqs {
        assert!(vq.enabled);
        assert_eq!(vq.size, 256);
        assert_eq!(vq.msix, MODEL_NO_VECTOR);
        // Spec alignments: descriptor table 16, driver area 2, device area 4.
        assert_eq!((vq.desc % 16, vq.driver % 2, vq.device % 4), (0, 0, 0));
    }
    drop(d);
    let cmd = h.pci.command() as u32;
    use crate::hal::pci::{CMD_BUS_MASTER, CMD_INTX_DISABLE, CMD_MEMORY};
    assert_eq!(cmd & (CMD_MEMORY | CMD_BUS_MASTER | CMD_INTX_DISABLE), CMD_MEMORY | CMD_BUS_MASTER | CMD_INTX_DISABLE);
    // The RX ring is full of pool buffers.
    assert_eq!(h.pool.in_use(), 256);
    assert_eq!((net.rx_queues(), net.tx_queues()), (1, 1));
    assert_eq!(h.status(), DeviceStatus(ok));
    assert!(!net.needs_reset());
}

#[test]
fn device_without_version_1_is_refused_and_marked_failed() {
    let mut h = Harness::new();
    h.model.dev().offered = feature::NET_MAC | feature::NET_CSUM;
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::NoVersion1));
    assert!(h.status().contains(DeviceStatus::FAILED));
    assert!(!h.status().contains(DeviceStatus::FEATURES_OK));
    assert_eq!(h.pool.in_use(), 0);
}

#[test]
fn refused_features_ok_is_an_error_and_marks_failed() {
    let mut h = Harness::new();
    h.model.dev().refuse_features_ok = true;
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::FeaturesRefused));
    let s = h.status();
    assert!(s.contains(DeviceStatus::FAILED));
    assert!(!s.contains(DeviceStatus::DRIVER_OK));
    // No queue was touched.
    assert!(!h.model.dev().log.iter().any(|e| matches!(e, Event::QueueEnable(_))));
    h.model.assert_clean();
}

#[test]
fn stuck_reset_times_out_at_the_deadline() {
    let mut h = Harness::new();
    h.model.dev().stuck_reset = true;
    let config = Config { timeout_ms: 5, ..Config::default() };
    assert_eq!(h.try_init(&config).err(), Some(InitError::ResetTimeout));
    let waited = h.clock.ticks();
    assert!((5_000_000..6_000_000).contains(&waited), "waited {waited} ticks for a 5 ms deadline");
    assert!(h.status().contains(DeviceStatus::FAILED));
}

#[test]
fn missing_mac_needs_a_configured_one() {
    let mut h = Harness::new();
    h.model.dev().offered = feature::VERSION_1;
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::NoMac));

    let mut h = Harness::new();
    h.model.dev().offered = feature::VERSION_1;
    let mac = [2, 0, 0, 0, 0, 9];
    let net = h.init(&Config::default().with_mac(mac));
    assert_eq!(net.mac(), mac);
    assert_eq!(net.features(), feature::VERSION_1);
}

#[test]
fn unstable_config_generation_times_out() {
    let mut h = Harness::new();
    h.model.dev().unstable_config = true;
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::ConfigTimeout));
}

#[test]
fn capability_walk_and_ids_are_checked() {
    let mut h = Harness::new();
    h.pci.hide_cap(2);
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::Capability(CapError::NoNotifyCfg)));

    let mut h = Harness::new();
    h.pci.hide_cap(1);
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::Capability(CapError::NoCommonCfg)));

    let mut h = Harness::new();
    h.pci.config.borrow_mut()[2] = 0x00; // Device 0x1000 ...
    h.pci.config.borrow_mut()[3] = 0x10;
    h.pci.config.borrow_mut()[0x2E] = 2; // ... with subsystem 2 (block), not a NIC.
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::NotVirtioNet { vendor: 0x1af4, device: 0x1000 }));
    h.pci.config.borrow_mut()[0x2E] = 1; // Transitional virtio-net with modern caps: fine.
    h.init(&Config::default());

    let mut h = Harness::new();
    h.pci.config.borrow_mut()[0x41] = 0x40; // The MSI-X capability points at itself.
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::Capability(CapError::Loop)));

    let mut h = Harness::new();
    h.pci.config.borrow_mut()[6] = 0; // No capability list.
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::Capability(CapError::NoCapabilityList)));

    let mut h = Harness::new();
    h.model.dev().queue_max = 0;
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::QueueUnavailable(0)));

    let mut h = Harness::new();
    h.model.dev().num_queues = 1;
    assert_eq!(h.try_init(&Config::default()).err(), Some(InitError::TooFewQueues { have: 1, need: 2 }));
}

#[test]
fn queue_size_is_clamped_to_a_power_of_two_under_the_device_max() {
    let mut h = Harness::new();
    h.model.dev().queue_max = 100;
    let mut net = h.init(&Config::default());
    assert!(h.model.dev().vqs.iter().all(|q| q.size == 64));
    assert_eq!(net.rx_queue(0).expect("rx0").posted(), 64);
    let mut h = Harness::new();
    let mut net2 = h.init(&Config::default().with_queue_size(16));
    assert_eq!(net2.tx_queue(0).expect("tx0").size(), 16);
    assert_eq!(net.set_rss_table(&[0; 128]), Err(RssError::Unsupported));
}

#[test]
fn rx_returns_frames_in_order_with_exact_bytes() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default());
    let mut want = Vec::new();
    for i in 0..50u32 {
        let f = frame_bytes(i, frame_len(i));
        h.model.inject(&f);
        want.push(f);
    }
    assert_eq!(h.model.step(), (0, 50));

    let rx = net.rx_queue(0).expect("rx0");
    let mut got = Vec::new();
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 32);
    for &b in batch.as_slice() {
        assert_eq!(h.pool.frame_offset(b), HEADROOM);
        got.push(h.pool.frame(b).to_vec());
    }
    h.pool.free_batch(&mut batch);
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 18);
    got.extend(batch.as_slice().iter().map(|&b| h.pool.frame(b).to_vec()));
    h.pool.free_batch(&mut batch);
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 0);
    assert_eq!(got, want);

    let s = rx.rx_stats();
    assert_eq!(s.packets, 50);
    assert_eq!(s.bytes, want.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!((s.errors, s.no_buffer), (0, 0));
    // Refilled: the ring is full again and nothing else is out of the pool.
    assert_eq!(rx.posted(), 256);
    assert_eq!(h.pool.in_use(), 256);
    h.model.assert_clean();
}

#[test]
fn error_frames_are_counted_and_recycled() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(8));
    h.model.inject(&frame_bytes(1, 60));
    h.model.inject_claiming(&frame_bytes(2, 10), 8); // Shorter than the virtio header.
    h.model.inject_claiming(&frame_bytes(3, 60), 5000); // Longer than the buffer.
    h.model.inject(&frame_bytes(4, 10)); // A runt Ethernet frame: the parser's to judge.
    h.model.step();
    let rx = net.rx_queue(0).expect("rx0");
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 2);
    assert_eq!(h.pool.frame(batch.as_slice()[0]), &frame_bytes(1, 60)[..]);
    assert_eq!(h.pool.frame(batch.as_slice()[1]), &frame_bytes(4, 10)[..]);
    assert_eq!(rx.rx_stats().errors, 2);
    assert_eq!(rx.rx_stats().packets, 2);
    // The two errored buffers went straight back to the ring; two more were refilled.
    assert_eq!(rx.posted(), 8);
    assert_eq!(h.pool.in_use(), 8 + 2);
    h.pool.free_batch(&mut batch);
    assert_eq!(h.pool.in_use(), 8);

    // A used entry naming a descriptor the device never had is counted, not trusted.
    h.model.push_bogus_used(0, 999);
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 0);
    assert_eq!(rx.rx_stats().errors, 3);
    assert_eq!(h.pool.in_use(), 8);
    h.model.assert_clean();
}

#[test]
fn the_wake_address_is_the_used_index_the_device_writes() {
    use cadence_core::nic::RxQueue;
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(8));
    let want = h.model.used_idx_addr(0) as usize;
    let rx = net.rx_queue(0).expect("rx0");
    assert_eq!(rx.wake_address().map(|a| a.get()), Some(want));
    // The device does write there when it hands a frame over.
    let mut before = [0u8; 2];
    assert!(h.model.mem().read(want as u64, &mut before));
    assert_eq!(rx.pending(), Some(0));
    h.model.inject(&frame_bytes(3, 60));
    h.model.inject(&frame_bytes(4, 60));
    h.model.step();
    let mut after = [0u8; 2];
    assert!(h.model.mem().read(want as u64, &mut after));
    assert_eq!(u16::from_le_bytes(after), u16::from_le_bytes(before).wrapping_add(2));
    // The used entries written and not taken: what NetBlaze counts in a lane's backlog.
    assert_eq!(rx.pending(), Some(2));
}

#[test]
fn rx_rings_can_be_left_for_the_caller_to_fill() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(8).with_fill_rx(false));
    let rx = net.rx_queue(0).expect("rx0");
    assert_eq!(rx.posted(), 0);
    assert_eq!(h.pool.in_use(), 0);
    h.model.inject(&frame_bytes(7, 60));
    h.model.step();
    assert_eq!(h.model.rx_pending(), 1, "no buffer posted, nothing delivered");
    assert_eq!(rx.fill(&mut h.pool), 8);
    assert_eq!(rx.posted(), 8);
    h.model.step();
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 1);
    assert_eq!(h.pool.frame(batch.as_slice()[0]), &frame_bytes(7, 60)[..]);
    h.model.assert_clean();
}

#[test]
fn rx_runs_short_when_the_pool_is_empty_and_recovers() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(8));
    let mut hoard = Vec::new();
    while let Some(b) = h.pool.alloc() {
        hoard.push(b);
    }
    for i in 0..3 {
        h.model.inject(&frame_bytes(i, 64));
    }
    h.model.step();
    let rx = net.rx_queue(0).expect("rx0");
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 3);
    assert_eq!(rx.posted(), 5);
    assert_eq!(rx.rx_stats().no_buffer, 1);
    h.pool.free_batch(&mut batch);
    for b in hoard {
        h.pool.free(b).expect("free");
    }
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 0);
    assert_eq!(rx.posted(), 8);
    assert_eq!(h.pool.in_use(), 8);
}

#[test]
fn tx_frames_reach_the_device_byte_exact_with_one_notify_per_burst() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default());
    let mut batch = Batch::new();
    let mut want = Vec::new();
    for i in 0..32u32 {
        let len = frame_len(i);
        let b = h.frame(i, len);
        batch.push(b).expect("room");
        want.push(frame_bytes(i, len));
    }
    let tx = net.tx_queue(0).expect("tx0");
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 32);
    assert!(batch.is_empty());
    assert_eq!(tx.in_flight(), 32);
    assert_eq!(h.model.notifies(1), 1);
    assert_eq!(h.model.step(), (32, 0));
    assert_eq!(h.model.dev().tx_frames, want);

    let s = tx.tx_stats();
    assert_eq!((s.packets, s.errors, s.ring_full), (32, 0, 0));
    assert_eq!(s.bytes, want.iter().map(|f| f.len() as u64).sum::<u64>());
    // Reclaim hands the buffers back.
    assert_eq!(tx.reclaim(&mut h.pool), 32);
    assert_eq!(tx.in_flight(), 0);
    assert_eq!(h.pool.in_use(), 256);
    assert_eq!(tx.reclaim(&mut h.pool), 0);
    h.model.assert_clean();
}

/// The DMA ordering rule (`hal::barrier`) under a memory that reorders the driver's stores
/// between barriers, as Arm may, with the device reading the rings on its own (no
/// doorbell: `VIRTQ_USED_F_NO_NOTIFY`): every frame still reaches the device byte-exact
/// and every received frame comes back. Without the `dma_wmb` before the avail index
/// store (`Queue::publish`) the device sees the new index over stale descriptors and this
/// fails.
#[test]
fn rings_stay_exact_when_stores_between_barriers_reach_the_device_out_of_order() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default());
    h.model.mem().set_reordering(true);
    h.model.set_no_notify(true);
    let mut want = Vec::new();
    for round in 0..4u32 {
        let mut batch = Batch::new();
        for i in 0..16u32 {
            let seed = round * 16 + i;
            let len = frame_len(seed);
            batch.push(h.frame(seed, len)).expect("room");
            want.push(frame_bytes(seed, len));
        }
        let tx = net.tx_queue(0).expect("tx0");
        assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 16);
        assert_eq!(h.model.step().0, 16, "round {round}");
        assert_eq!(tx.reclaim(&mut h.pool), 16);
    }
    assert_eq!(h.model.dev().tx_frames, want);
    // Receive: the refills are published the same way.
    let sent: Vec<Vec<u8>> = (0..24u32).map(|i| frame_bytes(1000 + i, frame_len(i))).collect();
    let mut got = Vec::new();
    for chunk in sent.chunks(8) {
        for f in chunk {
            h.model.inject(f);
        }
        assert_eq!(h.model.step().1, chunk.len());
        let rx = net.rx_queue(0).expect("rx0");
        let mut batch = Batch::new();
        assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), chunk.len());
        got.extend(batch.as_slice().iter().map(|&b| h.pool.frame(b).to_vec()));
        h.pool.free_batch(&mut batch);
    }
    assert_eq!(got, sent);
    h.model.mem().set_reordering(false);
    h.model.assert_clean();
}

#[test]
fn tx_ring_full_takes_what_fits_and_keeps_the_rest_in_order() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(8));
    let base = h.pool.in_use();
    let mut batch = Batch::new();
    for i in 0..12 {
        let b = h.frame(i, 100);
        batch.push(b).expect("room");
    }
    let rest: Vec<PacketBuf> = batch.as_slice()[8..].to_vec();
    let tx = net.tx_queue(0).expect("tx0");
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 8);
    assert_eq!(batch.as_slice(), &rest[..]);
    assert_eq!(tx.tx_stats().ring_full, 4);
    assert_eq!(tx.in_flight(), 8);
    // Still full: nothing taken, no doorbell.
    let bells = h.model.notifies(1);
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 0);
    assert_eq!(h.model.notifies(1), bells);
    assert_eq!(batch.len(), 4);

    // The device drains 5; the next burst reclaims them and takes the remaining 4.
    h.model.dev().tx_budget = Some(5);
    assert_eq!(h.model.step(), (5, 0));
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 4);
    assert!(batch.is_empty());
    assert_eq!(tx.in_flight(), 7);
    h.model.dev().tx_budget = None;
    assert_eq!(h.model.step(), (7, 0));
    assert_eq!(tx.reclaim(&mut h.pool), 7);
    assert_eq!(h.pool.in_use(), base);
    let frames = h.model.dev().tx_frames.clone();
    assert_eq!(frames.len(), 12);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f, &frame_bytes(i as u32, 100));
    }
    h.model.assert_clean();
}

#[test]
fn bad_tx_frames_are_freed_and_counted() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default());
    let base = h.pool.in_use();
    let empty = h.pool.alloc().expect("buf");
    let no_headroom = h.frame(1, 64);
    h.pool.set_frame(no_headroom, 4, 64).expect("fits");
    let good = h.frame(2, 64);
    let mut batch = Batch::new();
    for b in [empty, no_headroom, good] {
        batch.push(b).expect("room");
    }
    let tx = net.tx_queue(0).expect("tx0");
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 3);
    assert_eq!(tx.tx_stats().errors, 2);
    assert_eq!(tx.tx_stats().packets, 1);
    h.model.step();
    assert_eq!(h.model.dev().tx_frames, vec![frame_bytes(2, 64)]);
    tx.reclaim(&mut h.pool);
    assert_eq!(h.pool.in_use(), base);
    assert_eq!(h.pool.double_frees(), 0);
}

#[test]
fn used_no_notify_suppresses_the_doorbell() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default());
    h.model.set_no_notify(true);
    let mut batch = Batch::new();
    let b = h.frame(7, 60);
    batch.push(b).expect("room");
    let tx = net.tx_queue(0).expect("tx0");
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 1);
    assert_eq!(h.model.notifies(1), 0);
    // The device (already polling the queue) still sees the frame.
    assert_eq!(h.model.step(), (1, 0));
    h.model.set_no_notify(false);
    let b = h.frame(8, 60);
    batch.push(b).expect("room");
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 1);
    assert_eq!(h.model.notifies(1), 1);
    h.model.assert_clean();
}

/// Echoes 70 000 frames through 8-entry rings: both 16-bit ring indices wrap, every
/// ring slot is reused thousands of times, and the pool ends exactly where it began.
#[test]
fn rings_wrap_over_many_frames_without_leaking_buffers() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(8));
    let (rx, tx) = net.queue_pair(0).expect("pair 0");
    // Under Miri 160 frames (each of the 8 slots still reused 20 times over; the 16-bit wrap
    // needs 65 536 and is left to the native run).
    let total = crate::testing::miri_or(70_000u32, 160);
    assert!(crate::testing::MIRI || total > u16::MAX as u32 + 1);
    let (mut sent, mut injected, mut echoed) = (0u32, 0u32, 0u32);
    let mut batch = Batch::new();
    let check_echoes = |model: &Model, echoed: &mut u32| {
        for f in model.dev().tx_frames.drain(..) {
            let n = *echoed;
            assert_eq!(f, frame_bytes(n, 14 + n as usize % 200), "frame {n}");
            *echoed += 1;
        }
    };
    while sent < total {
        // The device receives up to 5 frames per round (the ring holds 8).
        while injected < total && h.model.rx_pending() < 5 {
            h.model.inject(&frame_bytes(injected, 14 + injected as usize % 200));
            injected += 1;
        }
        h.model.step();
        check_echoes(&h.model, &mut echoed);
        rx.rx_burst(&mut h.pool, &mut batch);
        // Echo them back; what does not fit now is retried next round.
        sent += tx.tx_burst(&mut h.pool, &mut batch) as u32;
        assert!(h.pool.in_use() <= 8 + 8 + 32, "pool leak: {} in use", h.pool.in_use());
    }
    h.model.step();
    check_echoes(&h.model, &mut echoed);
    tx.reclaim(&mut h.pool);
    assert_eq!(echoed, total);
    assert!(batch.is_empty());
    assert_eq!(tx.in_flight(), 0);
    assert_eq!(rx.posted(), 8);
    assert_eq!(h.pool.in_use(), 8);
    assert_eq!(rx.rx_stats().packets, total as u64);
    assert_eq!(tx.tx_stats().packets, total as u64);
    assert_eq!(h.pool.double_frees(), 0);
    let d = h.model.dev();
    // Both queues' used indices went around the 16-bit space.
    assert_eq!(d.vqs[0].used_idx, total as u16);
    assert_eq!(d.vqs[1].used_idx, total as u16);
    drop(d);
    h.model.assert_clean();
}

/// A device that writes its used ring at random (any id, any length, the used index moved
/// anywhere) is counted, never trusted: no buffer is lost, handed out twice or freed twice.
#[test]
fn a_hostile_used_ring_loses_no_buffer() {
    use cadence_core::nic::RxQueue;
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(8));
    let (rx, tx) = net.queue_pair(0).expect("pair 0");
    let mut batch = Batch::new();
    let mut held = Vec::new();
    for (i, &(id, len)) in [(0u32, 60u32), (0, 60), (3, 5000), (999, 100), (7, 0), (2, 80)].iter().enumerate() {
        h.model.push_used_raw(i % 2, id, len);
        rx.rx_burst(&mut h.pool, &mut batch);
        held.extend_from_slice(batch.as_slice());
        batch.clear();
        tx.reclaim(&mut h.pool);
        assert_eq!(h.pool.in_use(), held.len() + rx.posted() + tx.in_flight());
    }
    // The used index jumps a whole lap ahead: entries the device never wrote.
    let ahead = h.model.dev().vqs[0].used_idx.wrapping_add(9);
    h.model.set_used_idx(0, ahead);
    rx.rx_burst(&mut h.pool, &mut batch);
    held.extend_from_slice(batch.as_slice());
    batch.clear();
    assert_eq!(h.pool.in_use(), held.len() + rx.posted() + tx.in_flight());
    let mut sorted = held.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), held.len(), "a buffer handed out twice");
    for b in held {
        h.pool.free(b).expect("held buffers are not free");
    }
    assert_eq!(h.pool.double_frees(), 0);
    assert!(rx.rx_stats().errors > 0);
}

/// Jumbo frames (`Config::max_frame` above a buffer): `MRG_RXBUF` negotiated, each packet
/// over as many receive buffers as it fills, put back together byte-exact.
#[test]
fn jumbo_frames_arrive_over_merged_buffers_byte_exact() {
    use super::{MAX_MERGED_FRAME, MAX_ONE_BUFFER_FRAME};
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(64).with_max_frame(9018));
    assert_ne!(h.model.dev().accepted & feature::NET_MRG_RXBUF, 0);
    // 1 996 bytes a buffer, the header in the first.
    let lens = [60, MAX_ONE_BUFFER_FRAME, MAX_ONE_BUFFER_FRAME + 1, 3000, 9014, 9018, MAX_MERGED_FRAME];
    let want: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &l)| frame_bytes(i as u32, l)).collect();
    for f in &want {
        h.model.inject(f);
    }
    assert_eq!(h.model.step(), (0, lens.len()));
    let rx = net.rx_queue(0).expect("rx0");
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), lens.len());
    for (&b, w) in batch.as_slice().iter().zip(&want) {
        let mut got = vec![0u8; MAX_MERGED_FRAME];
        let n = h.pool.copy_frame(b, &mut got).expect("fits");
        assert_eq!(&got[..n], &w[..], "a frame of {} bytes", w.len());
        assert_eq!(h.pool.segments(b).count(), (w.len() + 12).div_ceil(1996), "{} bytes", w.len());
        assert_eq!(h.pool.frame_offset(b), HEADROOM);
    }
    let s = rx.rx_stats();
    assert_eq!((s.packets, s.errors), (lens.len() as u64, 0));
    assert_eq!(s.bytes, lens.iter().sum::<usize>() as u64);
    // The ring was topped up for every buffer taken.
    assert_eq!(rx.posted(), 64);
    h.pool.free_batch(&mut batch);
    assert_eq!(h.pool.in_use(), 64);
    h.model.assert_clean();
}

/// A packet whose later buffers the device has not published yet waits in the queue (held,
/// counted as posted) and comes out whole once they are.
#[test]
fn a_merged_packet_seen_in_part_waits_for_its_last_buffers() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(16).with_max_frame(9018));
    let f = frame_bytes(7, 9000); // Five buffers.
    h.model.inject(&f);
    h.model.step();
    h.model.set_used_idx(0, 2);
    let rx = net.rx_queue(0).expect("rx0");
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 0);
    assert_eq!(rx.posted(), 16 + 2, "the two buffers seen are held, the ring refilled");
    h.model.set_used_idx(0, 5);
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 1);
    let mut got = vec![0u8; 9000];
    assert_eq!(h.pool.copy_frame(batch.as_slice()[0], &mut got), Some(9000));
    assert_eq!(got, f);
    assert_eq!(rx.posted(), 16);
    assert_eq!(rx.rx_stats().errors, 0);
    h.pool.free_batch(&mut batch);
    assert_eq!(h.pool.in_use(), 16);
}

/// A header counting 0 buffers, or more than a frame may span, throws its packet away whole
/// (every buffer back on the ring, one error), and the packets after it arrive intact.
#[test]
fn bad_buffer_counts_throw_their_packet_away_whole() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(32).with_max_frame(9018));
    let (a, b, c) = (frame_bytes(1, 1000), frame_bytes(2, 17 * 1996 - 12), frame_bytes(3, 5000));
    h.model.inject_claiming_buffers(&a, 0); // One buffer used, the header says none.
    h.model.inject(&b); // 17 buffers: one more than a frame may span.
    h.model.inject(&c);
    assert_eq!(h.model.step(), (0, 3));
    let rx = net.rx_queue(0).expect("rx0");
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 1);
    let frames: Vec<Vec<u8>> = batch
        .as_slice()
        .iter()
        .map(|&x| {
            let mut v = vec![0u8; 40_000];
            let n = h.pool.copy_frame(x, &mut v).expect("fits");
            v.truncate(n);
            v
        })
        .collect();
    assert_eq!(frames, vec![c], "the packet after the bad ones arrives whole");
    assert_eq!(rx.rx_stats().errors, 2);
    h.pool.free_batch(&mut batch);
    assert_eq!(rx.posted(), 32);
    assert_eq!(h.pool.in_use(), 32, "no buffer lost");
    assert_eq!(h.pool.double_frees(), 0);
}

/// Without `MRG_RXBUF` on offer, a port wanting jumbo frames is refused by name, as is a
/// frame longer than eight buffers hold.
#[test]
fn jumbo_frames_need_mergeable_buffers_on_offer() {
    use super::MAX_MERGED_FRAME;
    let mut h = Harness::new();
    h.model.dev().offered &= !feature::NET_MRG_RXBUF;
    assert_eq!(
        h.try_init(&Config::default().with_max_frame(9018)).err(),
        Some(InitError::NoMergeableRx { max_frame: 9018 })
    );
    assert_eq!(h.status().0 & DeviceStatus::FAILED, DeviceStatus::FAILED);
    let mut h = Harness::new();
    let too_long = MAX_MERGED_FRAME + 1;
    assert_eq!(
        h.try_init(&Config::default().with_max_frame(too_long)).err(),
        Some(InitError::FrameTooLong { max_frame: too_long })
    );
    // A default port does not take MRG_RXBUF even when offered.
    let mut h = Harness::new();
    h.init(&Config::default());
    assert_eq!(h.model.dev().accepted & feature::NET_MRG_RXBUF, 0);
}

/// A frame over several buffers leaves as one descriptor chain, byte-exact; a chain that
/// does not fit the free descriptors waits, in order; every buffer comes back.
#[test]
fn a_frame_over_several_buffers_is_sent_as_one_chain() {
    let mut h = Harness::new();
    let mut net = h.init(&Config::default().with_queue_size(8));
    let base = h.pool.in_use();
    let (big, big2) = (frame_bytes(4, 9014), frame_bytes(5, 6000));
    let a = h.pool.alloc_frame(&big).expect("five buffers");
    let b = h.pool.alloc_frame(&big2).expect("four buffers");
    let small = h.frame(6, 64);
    let mut batch = Batch::new();
    for x in [a, b, small] {
        batch.push(x).expect("room");
    }
    let tx = net.tx_queue(0).expect("tx0");
    // Five descriptors for `a`; `b` needs four, one more than the three left.
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 1);
    assert_eq!(batch.len(), 2);
    assert_eq!(tx.in_flight(), 5);
    h.model.step();
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 2);
    h.model.step();
    tx.reclaim(&mut h.pool);
    assert_eq!(h.model.dev().tx_frames, vec![big, big2, frame_bytes(6, 64)]);
    let s = tx.tx_stats();
    assert_eq!((s.packets, s.bytes, s.errors), (3, 9014 + 6000 + 64, 0));
    assert_eq!(h.pool.in_use(), base);
    assert_eq!(h.pool.double_frees(), 0);
    h.model.assert_clean();
}
