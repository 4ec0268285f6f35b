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
