//! `cadence_drivers::i40e` against the XL710 register-level model
//! (`cadence_tests::xl710_model`), which fails a test on any breach of the datasheet's
//! ordering rules.

use std::collections::HashMap;

use cadence_core::buf::{Batch, Pool};
use cadence_core::nf::{Chain, Egress};
use cadence_core::nic::{Port, RssError, RxQueue, TxQueue};
use cadence_core::poll::{PollConfig, Poller};
use cadence_core::rss::DEFAULT_KEY;
use cadence_drivers::hal::{Mmio, PciFunction};
use cadence_drivers::i40e::aq::{AqError, AqStatus};
use cadence_drivers::i40e::cmd::opcode;
use cadence_drivers::i40e::{Config, InitError};
use cadence_harness::protocol::Mac;
use cadence_harness::traffic::frame::{Flow, build, read_tag};
use cadence_tests::model_rig::{I40eNic, ModelRig};
use cadence_tests::xl710_model::{RxOutcome, VSI_SEID, Xl710, off};

type Nic = I40eNic;

const POOL_BUFS: usize = 2048;
const MAC0: [u8; 6] = [0x02, 0, 0, 0, 0x40, 0x00];
const MAC1: [u8; 6] = [0x02, 0, 0, 0, 0x40, 0x01];

fn cfg(queues: u16, ring: u16) -> Config {
    Config::default().with_queues(queues).with_ring(ring)
}

/// Frame `seq` of standard flow `flow`, `len` bytes, addressed to `dst`.
fn frame(flow: u16, seq: u32, len: usize, dst: [u8; 6]) -> Vec<u8> {
    build(&Flow::standard(flow), seq, len, 0, Mac(dst), Mac([0x02, 0, 0, 0, 0xBB, 0]))
}

/// Receives everything queue `q` has.
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
fn bring_up_follows_the_datasheet() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, nic) = h.i40e_port(MAC0, 0, &cfg(4, 64));
    assert_eq!(nic.mac(), MAC0);
    assert_eq!((nic.rx_queues(), nic.tx_queues()), (4, 4));
    assert_eq!(nic.speed_mbps(), Some(40_000));
    assert_eq!(nic.vsi_seid(), VSI_SEID);
    assert_eq!((nic.version().api_major, nic.version().api_minor), (1, 7));
    let d = model.dev();
    assert_eq!(d.pf_resets, 1, "one PF reset");
    assert_eq!(
        d.aq_log[..7],
        [
            opcode::GET_VERSION,
            opcode::CLEAR_PXE_MODE,
            opcode::MAC_ADDRESS_READ,
            opcode::GET_SWITCH_CONFIG,
            opcode::GET_VSI_PARAMETERS,
            opcode::GET_VSI_PARAMETERS,
            opcode::UPDATE_VSI_PARAMETERS,
        ]
    );
    assert!(d.aq_log.contains(&opcode::RX_CTL_REG_WRITE), "API 1.7: RX control registers through the AQ");
    assert_eq!(d.vsi_queues, (0, 4));
    assert_eq!(d.promisc, 0x7);
    // RSS: 512-entry table spread round robin, key from DEFAULT_KEY, IPv4/IPv6 types.
    assert_eq!(d.reg(off::PFQF_CTL_0) >> 16 & 1, 1);
    assert_eq!(d.reg(off::PFQF_HLUT), 0x0302_0100);
    assert_eq!(d.reg(off::PFQF_HLUT + 0x80 * 127), 0x0302_0100);
    assert_eq!(
        d.reg(off::PFQF_HKEY),
        u32::from_le_bytes([DEFAULT_KEY[0], DEFAULT_KEY[1], DEFAULT_KEY[2], DEFAULT_KEY[3]])
    );
    for t in [31, 33, 35, 41, 43, 45] {
        assert_eq!(d.hena() >> t & 1, 1, "PCTYPE {t} hashed");
    }
    for q in 0..4 {
        assert!(d.rxq[q].enabled && d.rxq[q].stat_seen && d.txq[q].enabled);
        // 63 buffers posted, the tail rounded down to a multiple of 8.
        assert_eq!(d.rxq[q].tail, 56, "queue {q}");
        assert_eq!((d.rxq[q].qlen, d.rxq[q].dbuff, d.rxq[q].rxmax), (64, 2048, 1522));
    }
    assert!(!d.rxq[4].enabled);
    drop(d);
    assert_eq!(h.pool.in_use(), 4 * 63);
}

#[test]
fn a_second_pf_uses_its_own_queues_port_and_counters() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC1, 1, &cfg(2, 32));
    assert_eq!(nic.pf_port(), (1, 1));
    let f = frame(0, 0, 100, MAC1);
    assert!(matches!(model.inject(&f), RxOutcome::Delivered(_)));
    let got: Vec<_> = (0..2).flat_map(|q| drain(&mut nic, &mut h.pool, q)).collect();
    assert_eq!(got, vec![f]);
    assert_eq!(nic.hw_stats().rx_bytes, 104);
    model.assert_clean();
}

#[test]
fn frames_go_in_and_out_byte_exact_and_rings_wrap() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC0, 0, &cfg(1, 32));
    let mut batch = Batch::new();
    for i in 0..1500u32 {
        let f = frame((i % 4) as u16, i, 60 + (i as usize * 7) % 1400, MAC0);
        assert_eq!(model.inject(&f), RxOutcome::Delivered(0), "frame {i}");
        let (rx, tx) = nic.queue_pair(0).unwrap();
        assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), 1, "frame {i}: one write-back, at once");
        assert_eq!(h.pool.frame(batch.as_slice()[0]), &f[..]);
        assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 1);
        let (_, out) = model.take_tx().pop().expect("sent");
        assert_eq!(out, f);
    }
    let s = nic.stats();
    assert_eq!((s.rx.packets, s.tx.packets, s.device_drops), (1500, 1500, 0));
    let tx = nic.tx_queue(0).unwrap();
    tx.reclaim(&mut h.pool);
    assert_eq!(tx.in_flight(), 0, "DTYPE 0xF written back on every burst's RS descriptor");
    model.assert_clean();
}

/// A queue outside the interrupt list is written back only every
/// few descriptors. The driver links every queue, so a lone frame shows at once; the
/// same model with the list broken holds it back.
#[test]
fn a_single_frame_is_written_back_at_once_in_poll_mode() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC0, 0, &cfg(1, 32));
    let f = frame(1, 0, 80, MAC0);
    model.inject(&f);
    assert_eq!(drain(&mut nic, &mut h.pool, 0), vec![f.clone()]);
    // Break the list: the next three frames stay invisible, the fourth releases all.
    model.dev().poke(off::QINT_RQCTL, 0);
    for i in 1..4 {
        model.inject(&frame(1, i, 80, MAC0));
        assert!(drain(&mut nic, &mut h.pool, 0).is_empty(), "frame {i} held back");
    }
    model.inject(&frame(1, 4, 80, MAC0));
    assert_eq!(drain(&mut nic, &mut h.pool, 0).len(), 4);
    model.assert_clean();
}

/// The core worker loop with the L2 forwarder, over the real i40e driver on two model
/// ports (two PFs of one host): what enters one port leaves the other rewritten, once,
/// in order.
#[test]
fn worker_forwards_between_two_model_ports() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (m0, mut n0) = h.i40e_port(MAC0, 0, &cfg(1, 128));
    let (m1, mut n1) = h.i40e_port(MAC1, 1, &cfg(1, 128));
    let peers = Egress::DEFAULT_PEERS;
    let mut worker = Poller::new(Chain::new(Vec::new(), Egress::new([MAC0, MAC1], peers, None)), PollConfig::default());
    let models = [&m0, &m1];
    let macs = [MAC0, MAC1];
    let mut sent = [Vec::new(), Vec::new()];
    for i in 0..800u32 {
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

/// 32 flows over 4 queues; halfway, every bucket of queue 1 moves to queue 3 through the
/// live HLUT update (only changed registers written). Conservation, and per-flow order
/// when the old queue is drained first.
#[test]
fn rss_spreads_and_a_live_hlut_change_keeps_conservation_and_order() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC0, 0, &cfg(4, 512));
    let flows: Vec<u16> = (0..32).collect();
    let mut injected = 0u64;
    let send = |seq_base: u32, injected: &mut u64| {
        for s in 0..12u32 {
            for &f in &flows {
                model.inject(&frame(f, seq_base + s, 90, MAC0));
                *injected += 1;
            }
        }
    };
    send(0, &mut injected);
    let before: Vec<usize> = flows.iter().map(|&f| model.queue_of(&frame(f, 0, 90, MAC0))).collect();
    assert!((0..4).all(|q| before.contains(&q)), "RSS spreads the flows over every queue: {before:?}");
    // The model's steering is Toeplitz with the driver's key: software predicts it.
    for &f in &flows {
        let fr = frame(f, 0, 90, MAC0);
        let p = cadence_core::parse::parse(&fr).expect("parses");
        let input = cadence_core::rss::RssInput::from_flow(&p.flow, true);
        let hash = cadence_core::rss::toeplitz(&DEFAULT_KEY, input.as_bytes()).expect("hash");
        assert_eq!(model.queue_of(&fr), nic.rss_table()[hash as usize % 512] as usize);
    }
    let writes_before = model.dev().hlut_writes;
    let table: Vec<u16> = (0..512).map(|i| if i % 4 == 1 { 3 } else { (i % 4) as u16 }).collect();
    nic.set_rss_table(&table).expect("update");
    assert_eq!(model.dev().hlut_writes - writes_before, 128, "every register holds a bucket of queue 1");
    nic.set_rss_table(&table).expect("update");
    assert_eq!(model.dev().hlut_writes - writes_before, 128, "nothing changed, nothing written");
    assert_eq!(nic.set_rss_table(&[7; 512]), Err(RssError::BadQueue));
    assert_eq!(nic.set_rss_table(&[0; 300]), Err(RssError::BadLength));
    send(100, &mut injected);
    let after: Vec<usize> = flows.iter().map(|&f| model.queue_of(&frame(f, 0, 90, MAC0))).collect();
    assert!(!after.contains(&1));
    let mut seen: HashMap<u16, Vec<u32>> = HashMap::new();
    for q in [1usize, 0, 2, 3] {
        for f in drain(&mut nic, &mut h.pool, q) {
            let tag = read_tag(&f).expect("tagged");
            seen.entry(tag.flow).or_default().push(tag.seq);
        }
    }
    let s = nic.stats();
    assert_eq!(s.rx.packets + s.device_drops, injected, "conservation");
    assert_eq!(s.device_drops, 0);
    for (flow, seqs) in &seen {
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {flow} out of order: {seqs:?}");
    }
    model.assert_clean();
}

#[test]
fn admin_queue_errors_and_timeouts_are_typed_and_leak_nothing() {
    let mut h = ModelRig::new(POOL_BUFS);
    let model = Xl710::new(&h.host, MAC0);
    model.dev().aq_fail.push((opcode::GET_SWITCH_CONFIG, 12));
    let e = h.try_i40e(&model, &cfg(2, 64)).err();
    assert_eq!(e, Some(InitError::Aq(AqError::Failed { opcode: opcode::GET_SWITCH_CONFIG, status: AqStatus::Ebusy })));
    assert!(e.is_some_and(|e| e.to_string().contains("0x0200 failed: EBUSY")));
    // A firmware that never answers: a timeout, not a hang.
    let model = Xl710::new(&h.host, MAC0);
    model.dev().aq_dead = true;
    assert_eq!(h.try_i40e(&model, &cfg(2, 64)).err(), Some(InitError::Aq(AqError::Timeout { opcode: 1 })));
    // An API this driver does not speak.
    let model = Xl710::new(&h.host, MAC0);
    model.dev().api = (2, 0);
    assert_eq!(h.try_i40e(&model, &cfg(2, 64)).err(), Some(InitError::UnsupportedApi { major: 2, minor: 0 }));
    // Failing late (the queues were filled): the PF is reset, the buffers come back.
    let model = Xl710::new(&h.host, MAC0);
    model.set_link(false);
    let e = h.try_i40e(&model, &cfg(2, 64).with_link_timeout_ms(50)).err();
    assert_eq!(e, Some(InitError::LinkDown { waited_ms: 50 }));
    assert_eq!(h.pool.in_use(), 0, "buffers returned");
    assert_eq!(model.dev().pf_resets, 2, "the PF was reset to stop DMA");
    model.assert_clean();
    // An old API writes the RX control registers directly, and that is fine.
    let model = Xl710::new(&h.host, MAC0);
    model.dev().api = (1, 4);
    let nic = h.try_i40e(&model, &cfg(2, 64)).expect("init");
    assert!(!model.dev().aq_log.contains(&opcode::RX_CTL_REG_WRITE));
    assert_eq!(model.dev().reg(off::PFQF_CTL_0) >> 16 & 1, 1);
    model.assert_clean();
    drop(nic);
}

#[test]
fn a_device_that_never_becomes_ready_is_an_error() {
    let mut h = ModelRig::new(POOL_BUFS);
    let model = Xl710::new(&h.host, MAC0);
    model.dev().fw_never_ready = true;
    assert_eq!(h.try_i40e(&model, &cfg(1, 64)).err(), Some(InitError::FirmwareNotReady));
    let model = Xl710::new(&h.host, MAC0);
    model.dev().global_reset_reads = u32::MAX;
    assert_eq!(h.try_i40e(&model, &cfg(1, 64)).err(), Some(InitError::GlobalReset));
    let model = Xl710::new(&h.host, MAC0);
    model.dev().stuck_pf_reset = true;
    assert_eq!(h.try_i40e(&model, &cfg(1, 64)).err(), Some(InitError::ResetTimeout));
    let model = Xl710::new(&h.host, MAC0);
    assert_eq!(h.try_i40e(&model, &cfg(65, 64)).err(), Some(InitError::BadConfig));
    assert_eq!(h.try_i40e(&model, &cfg(1, 100)).err(), Some(InitError::BadConfig));
    assert_eq!(h.pool.in_use(), 0);
}

#[test]
fn link_down_and_up_arrive_as_events() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC0, 0, &cfg(1, 64));
    assert!(nic.link().up);
    model.set_link(false);
    assert!(!nic.poll_events().up);
    assert_eq!(nic.speed_mbps(), None);
    assert_eq!(model.inject(&frame(0, 0, 100, MAC0)), RxOutcome::LinkDown);
    model.set_link(true);
    let l = nic.poll_events();
    assert!(l.up && l.mbps == 40_000);
    assert_eq!(nic.link_events(), 2);
    let f = frame(0, 1, 100, MAC0);
    assert_eq!(model.inject(&f), RxOutcome::Delivered(0));
    assert_eq!(drain(&mut nic, &mut h.pool, 0), vec![f]);
    // The query agrees with the events.
    assert!(nic.refresh_link(&h.clock).expect("link").up);
    // Many events without polling: the ring fills, the firmware counts an overflow,
    // and the driver keeps working.
    for i in 0..80 {
        model.set_link(i % 2 == 0);
    }
    assert!(model.dev().arq_overflows > 0);
    nic.poll_events();
    model.set_link(true);
    nic.poll_events();
    assert!(nic.link().up);
    model.assert_clean();
}

#[test]
fn errored_chained_and_bad_length_write_backs_are_dropped_and_counted() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC0, 0, &cfg(1, 64));
    let good = frame(0, 1, 200, MAC0);
    model.inject(&good);
    // RXE (bit 19 → error bit 0).
    model.inject_flagged(&frame(0, 2, 200, MAC0), 0x01);
    // A frame chained over two descriptors.
    model.dev().split_rx_at = Some(1024);
    model.inject(&frame(0, 3, 1500, MAC0));
    model.dev().split_rx_at = None;
    let after = frame(0, 4, 300, MAC0);
    model.inject(&after);
    assert_eq!(drain(&mut nic, &mut h.pool, 0), vec![good, after]);
    let rx = nic.rx_queue(0).unwrap();
    assert_eq!((rx.hw_errors(), rx.multi_buffer(), rx.bad_length(), rx.rx_stats().errors), (1, 1, 0, 2));
    assert_eq!(rx.posted(), 63, "every buffer went back on the ring");
    // A too-short frame on TX is refused before it could stop the queue.
    let mut batch = Batch::new();
    let b = h.pool.alloc().unwrap();
    h.pool.set_len(b, 16).unwrap();
    batch.push(b).unwrap();
    let tx = nic.tx_queue(0).unwrap();
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), 1);
    assert_eq!(tx.tx_stats().errors, 1);
    assert!(model.take_tx().is_empty());
    assert_eq!(h.pool.in_use(), 63);
    model.assert_clean();
}

#[test]
fn statistics_are_48_bit_and_survive_a_wrap() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC0, 0, &cfg(1, 64));
    for i in 0..10 {
        model.inject(&frame(0, i, 100, MAC0));
    }
    drain(&mut nic, &mut h.pool, 0);
    assert_eq!(nic.hw_stats().rx_bytes, 10 * 104);
    assert_eq!(nic.hw_stats().rx_packets, 10, "not clear-on-read: read twice, same total");
    // Across the 48-bit wrap (and the 32-bit wrap of the drop counter).
    model.dev().add_counters((1 << 48) - 500, u64::from(u32::MAX) - 1);
    nic.hw_stats();
    model.dev().add_counters(1000, 5);
    let s = nic.hw_stats();
    assert_eq!(s.rx_bytes, 10 * 104 + (1 << 48) - 500 + 1000);
    assert_eq!(s.rx_dropped, u64::from(u32::MAX) - 1 + 5);
    model.assert_clean();
}

#[test]
fn queues_move_out_and_name_their_write_back_word() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC0, 0, &cfg(2, 64));
    let first = nic.rx_queue(0).unwrap();
    let phys = first.ring_phys() as usize;
    assert_eq!(first.wake_address().map(|a| a.get()), Some(phys + 8), "descriptor 0's qword 1");
    let f = frame(0, 0, 100, MAC0);
    let q = model.queue_of(&f);
    model.inject(&f);
    let (mut rx, tx) = nic.take_queues();
    assert_eq!((rx.len(), tx.len(), nic.rx_queues()), (2, 2, 2));
    let mut got = 0;
    let mut batch = Batch::new();
    for q in &mut rx {
        got += q.rx_burst(&mut h.pool, &mut batch);
        h.pool.free_batch(&mut batch);
    }
    assert_eq!(got, 1);
    let ring = rx[q].ring_phys() as usize;
    assert_eq!(rx[q].wake_address().map(|a| a.get()), Some(ring + 32 + 8), "queue {q} moved on to descriptor 1");
    // The port keeps its control path.
    nic.set_rss_table(&[1; 512]).expect("update");
    assert_eq!(model.queue_of(&frame(5, 0, 100, MAC0)), 1);
    model.assert_clean();
}

#[test]
fn the_model_catches_ordering_violations() {
    let h = ModelRig::new(POOL_BUFS);
    let model = Xl710::new(&h.host, MAC0);
    let bar = model.pci().map_bar(0, 0, 0x40_0000).unwrap();
    bar.write32(off::QRX_ENA, 1); // RX queue 0 enabled with no HMC and no context
    bar.write32(off::QRX_TAIL + 4, 8); // a tail before the queue runs
    bar.write32(off::QTX_ENA + 8, 1); // TX queue 2 without QTX_CTL or pre-disable clear
    // An admin command before Get Version, with a bad length, its buffer outside memory.
    let mut dma = h.host.dma();
    let ring = cadence_drivers::hal::DmaAlloc::alloc(&mut dma, 32 * 32, 4096).unwrap();
    let phys = cadence_drivers::hal::Dma::phys(&ring);
    ring.write32(0, 0x1000 | 0x2000); // BUF | SI
    ring.write16(2, opcode::GET_VSI_PARAMETERS);
    ring.write16(4, 64);
    ring.write32(28, 0x7000_0000);
    bar.write32(off::PF_ATQBAL, phys as u32);
    bar.write32(off::PF_ATQBAH, (phys >> 32) as u32);
    bar.write32(off::PF_ATQLEN, 32 | 1 << 31);
    bar.write32(off::PF_ATQT, 1);
    bar.read8(0); // a sub-dword register access
    let v = model.dev().violations.clone();
    for needle in [
        "without an HMC segment",
        "QRX_TAIL(1) = 8 written before",
        "QTX_CTL",
        "pre-disable",
        "before Get Version",
        "bad length 64",
        "sub-dword",
    ] {
        assert!(v.iter().any(|s| s.contains(needle)), "missing {needle:?} in {v:#?}");
    }
    // The admin command was answered EINVAL, DD set.
    assert_eq!(ring.read16(0) & 0x7, 0x7);
    assert_eq!(ring.read16(6), 14);
}

/// Jumbo frames (`Config::max_frame` 9 018): the queue context says 1 920-byte buffers and
/// RXMAX 9 022; a frame over as many descriptors as it fills is chained into one,
/// byte-exact, and sent back out as one descriptor chain; one longer than RXMAX is dropped
/// by the device.
#[test]
fn jumbo_frames_arrive_over_chained_descriptors_and_leave_whole() {
    let mut h = ModelRig::new(POOL_BUFS);
    let (model, mut nic) = h.i40e_port(MAC0, 0, &cfg(1, 64).with_max_frame(9018));
    {
        let d = model.dev();
        assert_eq!((d.rxq[0].dbuff, d.rxq[0].rxmax), (1920, 9022));
    }
    let long = |len: usize| -> Vec<u8> {
        let mut f = frame(1, len as u32, 60, MAC0);
        f.extend((f.len()..len).map(|i| (i * 11) as u8));
        f
    };
    let sent: Vec<Vec<u8>> = [60, 1920, 1921, 4000, 9014, 9018].into_iter().map(&long).collect();
    let mut batch = Batch::new();
    for f in &sent {
        assert_eq!(model.inject(f), RxOutcome::Delivered(0), "{} bytes", f.len());
    }
    assert_eq!(model.inject(&long(9023)), RxOutcome::Oversize);
    let (rx, tx) = nic.queue_pair(0).unwrap();
    assert_eq!(rx.rx_burst(&mut h.pool, &mut batch), sent.len());
    for (&b, f) in batch.as_slice().iter().zip(&sent) {
        let mut got = vec![0u8; f.len()];
        assert_eq!(h.pool.copy_frame(b, &mut got), Some(f.len()));
        assert_eq!(&got, f);
        assert_eq!(h.pool.segments(b).count(), f.len().div_ceil(1920));
    }
    assert_eq!(tx.tx_burst(&mut h.pool, &mut batch), sent.len());
    let out: Vec<Vec<u8>> = model.take_tx().into_iter().map(|(_, f)| f).collect();
    assert_eq!(out, sent);
    tx.reclaim(&mut h.pool);
    assert_eq!(tx.in_flight(), 0);
    model.assert_clean();

    // Longer than the XL710 takes: refused by name.
    let mut h = ModelRig::new(POOL_BUFS);
    let too_long = cadence_drivers::i40e::MAX_FRAME + 1;
    let model = Xl710::with_pf(&h.host, MAC1, 0);
    let r = h.try_i40e(&model, &cfg(1, 64).with_max_frame(too_long));
    assert_eq!(r.err(), Some(InitError::MaxFrame(too_long)));
}
