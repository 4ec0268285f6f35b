//! `cadence_drivers::igb` against the small 82576 model (`cadence_tests::igb_model`).

use cadence_core::buf::{BUF_SIZE, Batch, Pool};
use cadence_core::nic::{Port, RxQueue, TxQueue};
use cadence_drivers::igb::{Config, Igb};
use cadence_harness::protocol::Mac;
use cadence_harness::traffic::frame::{Flow, build};
use cadence_tests::igb_model::Igb82576;
use cadence_tests::model_host::{FakeClock, Host, POOL_BASE};

const MAC: [u8; 6] = [0x52, 0x54, 0, 0x12, 0x34, 0x56];

fn frame(flow: u16, seq: u32) -> Vec<u8> {
    build(&Flow::standard(flow), seq, 120, 0, Mac(MAC), Mac([2, 0, 0, 0, 0, 1]))
}

#[test]
fn igb_init_forwarding_rss_and_live_reta() {
    let host = Host::new(1024 * BUF_SIZE);
    let mut pool = Pool::try_with_mem(host.pool_mem(), POOL_BASE, 1024).expect("pool");
    let (mut dma, clock) = (host.dma(), FakeClock::new());
    let model = Igb82576::new(&host, MAC);
    let cfg = Config::default().with_queues(4, 1).with_ring(64);
    let mut nic = Igb::try_new(&model.pci(), &mut dma, &clock, &mut pool, &cfg).expect("init");
    model.assert_clean();
    assert_eq!(nic.mac(), MAC);
    assert!(nic.link_up(), "auto-negotiation was restarted through MDIC");
    assert_eq!(pool.in_use(), 4 * 63);

    // RSS spreads 32 flows over the 4 queues; each queue hands its frames up intact.
    let frames: Vec<Vec<u8>> = (0..32).map(|f| frame(f, 0)).collect();
    for f in &frames {
        assert!(model.inject(f).is_some());
    }
    let per_queue = model.dev().rx_per_queue;
    assert!(per_queue[..4].iter().all(|&n| n > 0), "{per_queue:?}");
    let mut got = Vec::new();
    let mut batch = Batch::new();
    for (q, &n) in per_queue.iter().enumerate().take(4) {
        nic.rx_queue(q).unwrap().rx_burst(&mut pool, &mut batch);
        got.extend(batch.as_slice().iter().map(|&b| pool.frame(b).to_vec()));
        // And out again on TX queue 0.
        assert_eq!(nic.tx_queue(0).unwrap().tx_burst(&mut pool, &mut batch), n as usize);
    }
    got.sort();
    let mut want = frames.clone();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(model.dev().tx_frames.len(), 32);

    // Live RETA update: everything to queue 2.
    nic.set_rss_table(&[2; 128]).expect("update");
    for f in 0..32 {
        assert_eq!(model.inject(&frame(f, 1)), Some(2));
    }
    assert_eq!(nic.stats().device_drops, 0);
    model.assert_clean();
}

/// Bring-up without buffers, then each queue filled from its own pool (the firmware's
/// per-lane pools): the tail is written only by `fill`, after ENABLE was read back.
#[test]
fn igb_rings_can_be_filled_after_bring_up_from_separate_pools() {
    let host = Host::new(1024 * BUF_SIZE);
    let mem = host.pool_mem();
    let (a, b) = mem.split_at(512 * BUF_SIZE);
    let mut pool0 = Pool::try_with_mem(a, POOL_BASE, 512).expect("pool");
    let mut pool1 = Pool::try_with_mem(b, POOL_BASE + (512 * BUF_SIZE) as u64, 512).expect("pool");
    let (mut dma, clock) = (host.dma(), FakeClock::new());
    let model = Igb82576::new(&host, MAC);
    let cfg = Config::default().with_queues(2, 2).with_ring(32).with_fill_rx(false);
    let mut nic = Igb::try_new(&model.pci(), &mut dma, &clock, &mut pool0, &cfg).expect("init");
    assert_eq!(pool0.in_use(), 0);
    assert_eq!(nic.rx_queue(0).unwrap().fill(&mut pool0), 31);
    assert_eq!(nic.rx_queue(1).unwrap().fill(&mut pool1), 31);
    nic.set_rss_table(&[1; 128]).expect("update");
    assert_eq!(model.inject(&frame(3, 0)), Some(1));
    let mut batch = Batch::new();
    assert_eq!(nic.rx_queue(1).unwrap().rx_burst(&mut pool1, &mut batch), 1);
    assert_eq!(pool1.frame(batch.as_slice()[0]), &frame(3, 0)[..]);
    pool1.free_batch(&mut batch);
    model.assert_clean();
}

/// Bytes `seed` of a jumbo frame of `len` bytes (a frame whose header says IPv4).
fn jumbo(seed: u8, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)).collect();
    f[..6].copy_from_slice(&MAC);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

/// Jumbo frames (`Config::max_frame` 9 018): RCTL.LPE with RLPML, 1 KiB buffers, a frame
/// over as many descriptors as it fills chained into one, byte-exact; one longer than the
/// maximum dropped by the device; a frame over several buffers sent as one descriptor chain.
/// Without jumbo frames the device drops anything over 1 522 bytes.
#[test]
fn igb_jumbo_frames_arrive_over_chained_descriptors_and_leave_whole() {
    let host = Host::new(1024 * BUF_SIZE);
    let mut pool = Pool::try_with_mem(host.pool_mem(), POOL_BASE, 1024).expect("pool");
    let (mut dma, clock) = (host.dma(), FakeClock::new());
    let model = Igb82576::new(&host, MAC);
    let cfg = Config::default().with_ring(64).with_max_frame(9018);
    let mut nic = Igb::try_new(&model.pci(), &mut dma, &clock, &mut pool, &cfg).expect("init");
    model.assert_clean();
    let lens = [60, 1024, 1025, 1514, 9014, 9018];
    let want: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &l)| jumbo(i as u8, l)).collect();
    for f in &want {
        assert_eq!(model.inject(f), Some(0), "{} bytes", f.len());
    }
    assert_eq!(model.inject(&jumbo(9, 9019)), None, "longer than RLPML allows");
    assert_eq!(model.dev().oversized, 1);
    let rx = nic.rx_queue(0).unwrap();
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut pool, &mut batch), lens.len());
    for (&b, w) in batch.as_slice().iter().zip(&want) {
        let mut got = vec![0u8; w.len() + 1];
        assert_eq!(pool.copy_frame(b, &mut got), Some(w.len()));
        assert_eq!(&got[..w.len()], &w[..]);
        assert_eq!(pool.segments(b).count(), w.len().div_ceil(1024), "{} bytes", w.len());
    }
    assert_eq!(rx.rx_stats().bytes, lens.iter().sum::<usize>() as u64);
    assert_eq!(rx.rx_stats().errors, 0);
    // Out again: each frame over its buffers as one chain of descriptors.
    let tx = nic.tx_queue(0).unwrap();
    assert_eq!(tx.tx_burst(&mut pool, &mut batch), lens.len());
    let sent: Vec<Vec<u8>> = model.dev().tx_frames.iter().map(|(_, f)| f.clone()).collect();
    assert_eq!(sent, want);
    tx.reclaim(&mut pool);
    assert_eq!(pool.in_use(), 63, "every buffer back but the ring's");
    model.assert_clean();

    // The same device without jumbo frames: 2 KiB buffers, nothing over 1 522 bytes.
    let host = Host::new(256 * BUF_SIZE);
    let mut pool = Pool::try_with_mem(host.pool_mem(), POOL_BASE, 256).expect("pool");
    let (mut dma, clock) = (host.dma(), FakeClock::new());
    let model = Igb82576::new(&host, MAC);
    let mut nic =
        Igb::try_new(&model.pci(), &mut dma, &clock, &mut pool, &Config::default().with_ring(64)).expect("init");
    assert_eq!(model.inject(&jumbo(1, 1523)), None);
    assert_eq!(model.inject(&jumbo(2, 1522)), Some(0));
    let rx = nic.rx_queue(0).unwrap();
    assert_eq!(rx.rx_burst(&mut pool, &mut batch), 1);
    assert!(!pool.is_segmented(batch.as_slice()[0]));
    model.assert_clean();

    // Longer than the 82576 takes: refused by name before the device is touched.
    let too_long = cadence_drivers::igb::MAX_FRAME + 1;
    let model = Igb82576::new(&host, MAC);
    let r = Igb::try_new(&model.pci(), &mut dma, &clock, &mut pool, &Config::default().with_max_frame(too_long));
    assert_eq!(r.err(), Some(cadence_drivers::igb::InitError::MaxFrame(too_long)));
}
