//! `cadence_drivers::ixgbe` against the 82599 register-level model
//! (`cadence_tests::ixgbe_model`), which fails a test on any breach of the datasheet's
//! ordering rules.

use std::collections::HashMap;

use cadence_core::buf::{Batch, Pool};
use cadence_core::nf::{Chain, Egress};
use cadence_core::nic::{Port, RssError, RxQueue, TxQueue};
use cadence_core::poll::{PollConfig, Poller};
use cadence_core::rss::DEFAULT_KEY;
use cadence_drivers::hal::PciFunction;
use cadence_drivers::ixgbe::{Config, InitError, Ixgbe};
use cadence_harness::protocol::Mac;
use cadence_harness::traffic::frame::{Flow, build};
use cadence_tests::ixgbe_model::{Ixgbe82599, RxOutcome, off};
use cadence_tests::model_rig::{IxgbeNic, ModelRig};

type Nic = IxgbeNic;

const POOL_BUFS: usize = 2048;
const MAC0: [u8; 6] = [0x02, 0, 0, 0, 0xA0, 0x00];
const MAC1: [u8; 6] = [0x02, 0, 0, 0, 0xA0, 0x01];

/// Frame `seq` of standard flow `flow`, `len` bytes, addressed to `dst`.
fn frame(flow: u16, seq: u32, len: usize, dst: [u8; 6]) -> Vec<u8> {
    build(&Flow::standard(flow), seq, len, 0, Mac(dst), Mac([0x02, 0, 0, 0, 0xBB, 0]))
}

/// Receives everything queue `q` has, returning the frames' bytes.
fn drain(nic: &mut Nic, pool: &mut Pool<'_>, q: usize) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut batch = Batch::new();
    loop {
        let n = nic.rx_queue(q).expect("queue").rx_burst(pool, &mut batch);
        for &b in batch.as_slice() {
            out.push(pool.frame(b).to_vec());
        }
        pool.free_batch(&mut batch);
        if n == 0 {
            return out;
        }
    }
}

#[test]
fn init_follows_the_datasheet_and_programs_rss() {
    let mut h = ModelRig::new(POOL_BUFS);
    let model = Ixgbe82599::new(&h.host, MAC0);
    let pci = model.pci();
    let cfg = Config::default().with_queues(4, 2).with_rings(64, 64);
    let nic = Ixgbe::try_new(&pci, &mut h.dma, &h.clock, &mut h.pool, &cfg).expect("init");
    model.assert_clean();
    assert_eq!(nic.mac(), MAC0);
    assert_eq!((nic.rx_queues(), nic.tx_queues()), (4, 2));
    assert!(nic.link().up && nic.link().mbps == 10_000);
    // Memory + bus master on, INTx off.
    assert_eq!(pci.command() & 0x406, 0x406);
    let d = model.dev();
    assert_eq!(d.resets, 1);
    assert_eq!(d.reg(off::RXCTRL) & 1, 1);
    assert_eq!(d.reg(off::DMATXCTL) & 1, 1);
    assert_eq!(d.reg(off::CTRL_EXT) & 1 << 16, 1 << 16, "NS_DIS");
    assert_eq!(d.reg(off::SECRXCTRL) & 2, 0, "RX_DIS cleared again");
    assert_eq!(d.reg(off::RXPBSIZE0), 512 << 10);
    assert_eq!(d.reg(off::TXPBSIZE0), 160 << 10);
    assert_eq!(d.reg(off::RTTDCS) & 1 << 6, 0, "ARBDIS cleared again");
    assert_eq!(d.reg(off::MRQC) & 0xF, 1);
    assert_eq!(d.reg(off::RXCSUM) & 1 << 13, 1 << 13, "PCSD");
    for i in 0..10 {
        let k = &DEFAULT_KEY[4 * i..4 * i + 4];
        assert_eq!(d.reg(off::RSSRK + 4 * i), u32::from_le_bytes([k[0], k[1], k[2], k[3]]));
    }
    assert_eq!(d.reg(off::RETA), 0x0302_0100);
    for q in 0..4 {
        assert!(d.rxq[q].enabled && d.rxq[q].enable_seen);
        assert_eq!(d.reg(0x01018 + 0x40 * q), 63, "RDT = ring - 1");
        assert_eq!(d.reg(0x01014 + 0x40 * q) >> 28 & 1, 1, "DROP_EN");
    }
    assert!(d.txq[0].enabled && d.txq[1].enabled && !d.txq[2].enabled);
    drop(d);
    assert_eq!(h.pool.in_use(), 4 * 63);
}

#[test]
fn bad_config_and_stuck_reset_are_errors_without_leaks() {
    let mut h = ModelRig::new(POOL_BUFS);
    let model = Ixgbe82599::new(&h.host, MAC0);
    let cfg = Config::default().with_queues(17, 1);
    let r = Ixgbe::try_new(&model.pci(), &mut h.dma, &h.clock, &mut h.pool, &cfg);
    assert_eq!(r.err(), Some(InitError::BadConfig));
    model.dev().stuck_reset = true;
    let r = Ixgbe::try_new(&model.pci(), &mut h.dma, &h.clock, &mut h.pool, &Config::default());
    assert_eq!(r.err(), Some(InitError::ResetTimeout));
    assert_eq!(h.pool.in_use(), 0);
}

#[test]
fn frames_go_in_and_out_byte_exact() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(64, 64));
    let sent: Vec<Vec<u8>> = (0..40).map(|i| frame(i % 8, i as u32, 60 + i as usize * 37, MAC0)).collect();
    for f in &sent {
        assert_eq!(model.inject(f), RxOutcome::Delivered(0));
    }
    let mut batch = Batch::new();
    let mut got = Vec::new();
    while got.len() < sent.len() {
        let n = nic.rx_queue(0).unwrap().rx_burst(&mut h.pool, &mut batch);
        assert!(n > 0);
        got.extend(batch.as_slice().iter().map(|&b| h.pool.frame(b).to_vec()));
        // Send them straight back out.
        let (_, tx) = nic.queue_pair(0).unwrap();
        assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), n);
    }
    assert_eq!(got, sent);
    let out: Vec<Vec<u8>> = model.take_tx().into_iter().map(|(_, f)| f).collect();
    assert_eq!(out, sent);
    let tx = nic.tx_queue(0).unwrap();
    tx.reclaim(&mut h.pool);
    assert_eq!(tx.in_flight(), 0);
    assert_eq!(h.pool.in_use(), 63);
    model.assert_clean();
}

#[test]
fn rings_wrap_around_many_times() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(16, 16));
    let mut batch = Batch::new();
    for i in 0..2000u32 {
        let f = frame((i % 4) as u16, i, 64 + (i as usize % 900), MAC0);
        assert_eq!(model.inject(&f), RxOutcome::Delivered(0), "frame {i}");
        let (rx, tx) = nic.queue_pair(0).unwrap();
        assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 1);
        assert_eq!(h.pool.frame(batch.as_slice()[0]), &f[..]);
        assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 1);
        let (_, out) = model.take_tx().pop().expect("sent");
        assert_eq!(out, f);
    }
    let s = nic.stats();
    assert_eq!((s.rx.packets, s.tx.packets, s.device_drops), (2000, 2000, 0));
    model.assert_clean();
}

#[test]
fn a_full_rx_ring_drops_with_drop_en_and_counts() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(32, 32));
    let mut outcomes = HashMap::new();
    for i in 0..100u32 {
        *outcomes.entry(model.inject(&frame(0, i, 100, MAC0))).or_insert(0u64) += 1;
    }
    // 31 descriptors posted (one slot stays empty), the rest dropped by DROP_EN.
    assert_eq!(outcomes[&RxOutcome::Delivered(0)], 31);
    assert_eq!(outcomes[&RxOutcome::DroppedNoDescriptor(0)], 69);
    let got = drain(&mut nic, &mut h.pool, 0);
    assert_eq!(got.len(), 31);
    let s = nic.stats();
    // Conservation: injected = delivered + counted drops.
    assert_eq!(s.rx.packets + s.device_drops, 100);
    // The ring was refilled: more frames go through.
    assert_eq!(model.inject(&frame(0, 100, 100, MAC0)), RxOutcome::Delivered(0));
    model.assert_clean();
}

#[test]
fn a_full_tx_ring_keeps_what_it_cannot_take_and_recovers() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(32, 32));
    model.dev().tx_paused = true;
    let tx = nic.tx_queue(0).unwrap();
    let mut taken = 0;
    for round in 0..2 {
        let mut batch = Batch::new();
        for i in 0..32 {
            let b = h.pool.alloc().unwrap();
            let f = frame(1, round * 32 + i, 80, MAC1);
            h.pool.set_len(b, f.len()).unwrap();
            h.pool.frame_mut(b).copy_from_slice(&f);
            batch.push(b).unwrap();
        }
        taken += tx.tx_burst(&mut h.pool, &mut batch);
        h.pool.free_batch(&mut batch);
    }
    assert_eq!(taken, 31, "a ring of 32 holds 31 in flight");
    assert_eq!(tx.in_flight(), 31);
    assert_eq!(tx.tx_stats().ring_full, 33);
    model.step();
    assert_eq!(tx.reclaim(&mut h.pool), 31);
    assert_eq!(tx.in_flight(), 0);
    let seqs: Vec<u8> = model.take_tx().iter().map(|(_, f)| f.len() as u8).collect();
    assert_eq!(seqs.len(), 31);
    assert_eq!(h.pool.in_use(), 31, "only the RX ring holds buffers");
    model.assert_clean();
}

#[test]
fn errored_and_multi_buffer_frames_are_recycled_and_counted() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(32, 32));
    let good = frame(0, 1, 200, MAC0);
    model.inject(&good);
    // RXE (bit 29): a receive error the device reports in the write-back.
    model.inject_flagged(&frame(0, 2, 200, MAC0), 1 << 29);
    // 1 KiB buffers (as if misprogrammed) split a 1500-byte frame over two descriptors.
    let srrctl = model.dev().reg(0x01014);
    model.dev().poke(0x01014, (srrctl & !0x7F) | 1);
    model.inject(&frame(0, 3, 1500, MAC0));
    model.dev().poke(0x01014, srrctl);
    let after = frame(0, 4, 300, MAC0);
    model.inject(&after);
    let got = drain(&mut nic, &mut h.pool, 0);
    assert_eq!(got, vec![good, after]);
    let rx = nic.rx_queue(0).unwrap();
    assert_eq!((rx.hw_errors(), rx.multi_buffer(), rx.rx_stats().errors), (1, 1, 2));
    assert_eq!(rx.posted(), 31, "every buffer went back on the ring");
    assert_eq!(h.pool.in_use(), 31);
    model.assert_clean();
}

/// 8 flows over 4 queues; halfway through, every bucket of queue 1 moves to queue 3.
/// Conservation holds, and per-flow order holds when the old queue is drained before
/// the new one is served (the documented recipe).
#[test]
fn live_reta_update_mid_stream_keeps_conservation_and_order() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_queues(4, 1).with_rings(256, 64));
    let flows: Vec<u16> = (0..16).collect();
    let mut injected = 0u64;
    let send = |seq_base: u32, injected: &mut u64| {
        for s in 0..40u32 {
            for &f in &flows {
                model.inject(&frame(f, seq_base + s, 90, MAC0));
                *injected += 1;
            }
        }
    };
    send(0, &mut injected);
    let before: Vec<usize> = flows.iter().map(|&f| model.queue_of(&frame(f, 0, 90, MAC0))).collect();
    assert!((0..4).all(|q| before.contains(&q)), "RSS spreads the flows over every queue: {before:?}");
    let writes_before = model.dev().reta_writes;
    let table: Vec<u16> = (0..128).map(|i| if i % 4 == 1 { 3 } else { (i % 4) as u16 }).collect();
    nic.set_rss_table(&table).expect("update");
    assert_eq!(model.dev().reta_writes - writes_before, 32, "every register holds a bucket of queue 1");
    assert!(nic.rss_table().iter().all(|&q| q != 1));
    // Same table again: nothing to write.
    nic.set_rss_table(&table).expect("update");
    assert_eq!(model.dev().reta_writes - writes_before, 32);
    assert_eq!(nic.set_rss_table(&[7; 128]), Err(RssError::BadQueue));
    send(40, &mut injected);
    let after: Vec<usize> = flows.iter().map(|&f| model.queue_of(&frame(f, 0, 90, MAC0))).collect();
    assert!(!after.contains(&1));
    // Drain the old queue first, then the others.
    let mut seen: HashMap<u16, Vec<u32>> = HashMap::new();
    for q in [1usize, 0, 2, 3] {
        for f in drain(&mut nic, &mut h.pool, q) {
            let tag = cadence_harness::traffic::frame::read_tag(&f).expect("tagged");
            seen.entry(tag.flow).or_default().push(tag.seq);
        }
    }
    let s = nic.stats();
    assert_eq!(s.rx.packets + s.device_drops, injected, "conservation");
    for (flow, seqs) in &seen {
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {flow} out of order: {seqs:?}");
    }
    model.assert_clean();
}

#[test]
fn statistics_accumulate_from_clear_on_read_registers() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(32, 32));
    for i in 0..10 {
        model.inject(&frame(0, i, 100, MAC0));
    }
    let mut batch = Batch::new();
    nic.rx_queue(0).unwrap().rx_burst(&mut h.pool, &mut batch);
    nic.tx_queue(0).unwrap().tx_burst(&mut h.pool, &mut batch);
    let s1 = nic.hw_stats();
    assert_eq!((s1.gprc, s1.gptc, s1.gorc, s1.gotc), (10, 10, 10 * 104, 10 * 104));
    // Past 32 bits: the driver reads L then H (the model checks) and keeps all 36 bits.
    model.dev().add_octets(1 << 33, 3 << 32);
    let s2 = nic.hw_stats();
    assert_eq!(s2.gorc, 10 * 104 + (1 << 33));
    assert_eq!(s2.gotc, 10 * 104 + (3 << 32));
    assert_eq!(nic.hw_stats().gprc, 10, "cleared on read, accumulated in software");
    model.assert_clean();
}

#[test]
fn the_model_catches_ordering_violations() {
    let h = ModelRig::new(POOL_BUFS);
    let model = Ixgbe82599::new(&h.host, MAC0);
    let bar = model.pci().map_bar(0, 0, 0x20000).unwrap();
    use cadence_drivers::hal::Mmio;
    bar.write32(0x01000, 0x1000_0040); // RDBAL(0) not 128-byte aligned
    bar.write32(0x01028, 1 << 25); // RXDCTL(0).ENABLE on that ring, RDLEN 0
    bar.write32(0x01018, 5); // RDT bumped before ENABLE was read back
    bar.write32(off::RXCTRL, 1); // RXEN without the SECRXCTRL dance
    bar.write32(off::FCTRL, 1 << 9); // FCTRL while RXEN
    bar.write32(0x06028, 1 << 25); // TXDCTL.ENABLE before DMATXCTL.TE
    let v = model.dev().violations.clone();
    for needle in ["not 128-byte", "multiple of 128", "RDT(0) bumped", "SECRXCTRL", "FCTRL", "DMATXCTL.TE"] {
        assert!(v.iter().any(|s| s.contains(needle)), "missing {needle:?} in {v:#?}");
    }
}

/// The core worker loop with the L2 forwarder, over the real ixgbe driver on two model
/// ports: what enters port 0 leaves port 1 rewritten, and back, exactly once, in order.
#[test]
fn worker_forwards_between_two_model_ports() {
    let mut h = ModelRig::new(POOL_BUFS);
    let cfg = Config::default().with_rings(128, 128);
    let (m0, mut n0) = h.ixgbe_port(MAC0, &cfg);
    let (m1, mut n1) = h.ixgbe_port(MAC1, &cfg);
    let peers = Egress::DEFAULT_PEERS;
    let mut worker = Poller::new(Chain::new(Vec::new(), Egress::new([MAC0, MAC1], peers, None)), PollConfig::default());
    let models = [&m0, &m1];
    let macs = [MAC0, MAC1];
    let mut sent = [Vec::new(), Vec::new()];
    for i in 0..600u32 {
        let flow = Flow::standard((i % 8) as u16);
        let f = frame(flow.id, i, 60 + (i as usize * 53) % 1400, macs[flow.ingress]);
        assert!(matches!(models[flow.ingress].inject(&f), RxOutcome::Delivered(_)));
        sent[flow.ingress].push(f);
        if i % 20 == 19 {
            let (r0, t0) = n0.queue_pair(0).unwrap();
            let (r1, t1) = n1.queue_pair(0).unwrap();
            worker.poll_once(&mut h.pool, &mut [r0, r1], &mut [t0, t1], &h.clock);
        }
    }
    for _ in 0..4 {
        let (r0, t0) = n0.queue_pair(0).unwrap();
        let (r1, t1) = n1.queue_pair(0).unwrap();
        worker.poll_once(&mut h.pool, &mut [r0, r1], &mut [t0, t1], &h.clock);
    }
    for port in 0..2 {
        let out: Vec<Vec<u8>> = models[1 - port].take_tx().into_iter().map(|(_, f)| f).collect();
        assert_eq!(out.len(), sent[port].len(), "port {port} -> {}", 1 - port);
        for (o, s) in out.iter().zip(&sent[port]) {
            assert_eq!(&o[0..6], &peers[1 - port], "dst = peer of the egress port");
            assert_eq!(&o[6..12], &macs[1 - port], "src = egress port's MAC");
            assert_eq!(&o[12..], &s[12..], "rest unchanged, order kept");
        }
    }
    assert_eq!(worker.stats().stage.drops_total(), 0);
    m0.assert_clean();
    m1.assert_clean();
}

#[test]
fn link_comes_up_after_the_autoneg_restart_and_its_absence_is_an_error() {
    let mut h = ModelRig::new(POOL_BUFS);
    // Up: the bring-up restarted auto-negotiation (AUTOC, link mode kept) and waited.
    let (model, nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(32, 32));
    assert!(model.dev().link_up);
    assert_eq!(model.dev().reg(off::AUTOC), cadence_tests::ixgbe_model::AUTOC_EEPROM, "LMS kept, RESTART_AN cleared");
    assert_eq!(nic.speed_mbps(), Some(10_000));
    // Cable pulled and plugged back: LINKS follows; the driver's wait sees it come back.
    model.dev().set_partner(false);
    assert!(!nic.link().up);
    assert_eq!(nic.speed_mbps(), None);
    model.dev().set_partner(true);
    assert!(nic.wait_link(&h.clock, 100).up);
    // No module in the SFP+ cage.
    let model = Ixgbe82599::new(&h.host, MAC0);
    model.dev().sfp_module = false;
    let r = Ixgbe::try_new(&model.pci(), &mut h.dma, &h.clock, &mut h.pool, &Config::default());
    assert_eq!(r.err(), Some(InitError::NoModule));
    // No partner: a bounded wait, then an error; the rings' buffers come back.
    let model = Ixgbe82599::new(&h.host, MAC0);
    model.dev().partner = false;
    let cfg = Config::default().with_rings(32, 32).with_link_timeout_ms(20);
    let e = Ixgbe::try_new(&model.pci(), &mut h.dma, &h.clock, &mut h.pool, &cfg).err();
    assert_eq!(e, Some(InitError::LinkDown { waited_ms: 20 }));
    assert!(e.is_some_and(|e| e.to_string() == "link did not come up within 20 ms"));
    assert_eq!(h.pool.in_use(), 31, "only the first port's ring holds buffers");
    model.assert_clean();
}

#[test]
fn octet_counters_accumulate_past_36_bits() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(32, 32));
    // Each reading sees less than the 36-bit register holds; the sum passes 2^36 and
    // keeps every bit.
    let step = (1u64 << 35) + 12_345;
    for _ in 0..5 {
        model.dev().add_octets(step, step / 2);
        nic.hw_stats();
    }
    let s = nic.hw_stats();
    assert_eq!(s.gorc, 5 * step);
    assert_eq!(s.gotc, 5 * (step / 2));
    assert!(s.gorc > 1 << 37);
    model.assert_clean();
}

#[test]
fn queues_move_out_for_the_lanes_and_name_their_write_back_word() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_queues(2, 2).with_rings(32, 32));
    let ring = nic.rx_queue(0).unwrap().ring_phys() as usize;
    // The advanced descriptor's status dword (offset 8) of the next descriptor.
    assert_eq!(nic.rx_queue(0).unwrap().wake_address().map(|a| a.get()), Some(ring + 8));
    let f = frame(3, 0, 100, MAC0);
    let q = model.queue_of(&f);
    assert_eq!(nic.rx_queue(q).unwrap().pending(), Some(0));
    model.inject(&f);
    // Written back and not taken: what NetBlaze counts in a lane's backlog.
    assert_eq!(nic.rx_queue(q).unwrap().pending(), Some(1));
    let (mut rx, mut tx) = nic.take_queues();
    assert_eq!((rx.len(), tx.len(), nic.rx_queues(), nic.tx_queues()), (2, 2, 2, 2));
    let mut batch = Batch::new();
    assert_eq!(rx[q].rx_burst(&mut h.pool, &mut batch), 1);
    assert_eq!(rx[q].pending(), Some(0));
    let r = rx[q].ring_phys() as usize;
    assert_eq!(rx[q].wake_address().map(|a| a.get()), Some(r + 16 + 8));
    assert_eq!(tx[0].tx_burst(&mut h.pool, &mut batch), 1);
    assert_eq!(model.take_tx().len(), 1);
    // The port keeps RSS and statistics.
    nic.set_rss_table(&[1; 128]).expect("update");
    assert_eq!(model.queue_of(&f), 1);
    assert_eq!(nic.hw_stats().gprc, 1);
    model.assert_clean();
}

/// Jumbo frames (`Config::max_frame` 9 018): HLREG0.JUMBOEN with MAXFRS 9 022, 1 KiB buffers,
/// a frame over as many descriptors as it fills chained into one, byte-exact, and sent back
/// out as one descriptor chain; one longer than MAXFRS dropped by the device. A max_frame
/// past what the ring takes is refused by name.
#[test]
fn jumbo_frames_arrive_over_chained_descriptors_and_leave_whole() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.ixgbe_port(MAC0, &Config::default().with_rings(64, 64).with_max_frame(9018));
    assert_eq!(model.dev().reg(off::MAXFRS) >> 16, 9022);
    // A standard frame's headers, the rest filler (the device reads no further than the MAC).
    let long = |len: usize| -> Vec<u8> {
        let mut f = frame(1, len as u32, 60, MAC0);
        f.extend((f.len()..len).map(|i| (i * 13) as u8));
        f
    };
    let sent: Vec<Vec<u8>> = [60, 1024, 1025, 1514, 4000, 9014, 9018].into_iter().map(&long).collect();
    for f in &sent {
        assert_eq!(model.inject(f), RxOutcome::Delivered(0), "{} bytes", f.len());
    }
    assert_eq!(model.inject(&long(9019)), RxOutcome::Oversize);
    let mut batch = Batch::new();
    let rx = nic.rx_queue(0).unwrap();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), sent.len());
    for (&b, f) in batch.as_slice().iter().zip(&sent) {
        let mut got = vec![0u8; f.len()];
        assert_eq!(h.pool.copy_frame(b, &mut got), Some(f.len()));
        assert_eq!(&got, f);
        assert_eq!(h.pool.segments(b).count(), f.len().div_ceil(1024));
    }
    let (_, tx) = nic.queue_pair(0).unwrap();
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), sent.len());
    let out: Vec<Vec<u8>> = model.take_tx().into_iter().map(|(_, f)| f).collect();
    assert_eq!(out, sent);
    tx.reclaim(&mut h.pool);
    assert_eq!(h.pool.in_use(), 63);
    model.assert_clean();

    let mut h = ModelRig::new(POOL_BUFS);
    let model = Ixgbe82599::new(&h.host, MAC1);
    let too_long = cadence_drivers::ixgbe::MAX_FRAME + 1;
    let cfg = Config::default().with_max_frame(too_long);
    let r = Ixgbe::try_new(&model.pci(), &mut h.dma, &h.clock, &mut h.pool, &cfg);
    assert_eq!(r.err(), Some(InitError::MaxFrame(too_long)));
}
