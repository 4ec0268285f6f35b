//! The AF_XDP queues against the fake kernel of [`super::model`].

use cadence_core::buf::{BUF_SIZE, Batch, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, TxQueue};

use super::model::{Kernel, LINUX_OFFSETS};
use super::{Ring, RingOffsets, RingWindow, XDP_PKT_CONTD, XskConfig, XskError, XskRx, XskTx, try_new_queues};
use crate::shm::{FakeKick, SHM_CPU_BASE, ShmWindow};

type Rx = XskRx<ShmWindow, FakeKick>;
type Tx = XskTx<ShmWindow, FakeKick>;

/// Test frame `seed` of `len` bytes; its first four bytes carry the seed.
pub(super) fn frame_bytes(seed: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (seed as usize).wrapping_mul(31).wrapping_add(i * 7) as u8).collect();
    let n = len.min(4);
    f[..n].copy_from_slice(&seed.to_le_bytes()[..n]);
    f
}

/// A frame length between 14 and 1514 derived from `i`.
fn frame_len(i: u32) -> usize {
    14 + (i as usize * 97) % 1501
}

/// Pool memory for `n` buffers.
pub(super) fn mem(n: usize) -> Vec<u8> {
    vec![0; n * BUF_SIZE]
}

pub(super) struct H<'m> {
    pub(super) k: Kernel,
    pub(super) kick: FakeKick,
    pub(super) pool: Pool<'m>,
    pub(super) rx: Rx,
    pub(super) tx: Tx,
}

impl<'m> H<'m> {
    /// Rings of `sizes` (fill, RX, TX, completion) starting at index `start`, a pool of
    /// `mem.len() / BUF_SIZE` buffers at physical 0, default configuration.
    pub(super) fn new(mem: &'m mut [u8], sizes: [u32; 4], start: u32) -> Self {
        Self::with(mem, sizes, start, 0, XskConfig::default())
    }

    pub(super) fn with(mem: &'m mut [u8], sizes: [u32; 4], start: u32, phys_base: u64, config: XskConfig) -> Self {
        let n = mem.len() / BUF_SIZE;
        let pool = Pool::try_new(mem, phys_base, n).expect("pool");
        let k = Kernel::new(sizes, start, config.umem_base);
        let kick = FakeKick::default();
        let (rx, tx) = try_new_queues(k.rings(), kick.clone(), &pool, &config).expect("queues");
        Self { k, kick, pool, rx, tx }
    }

    /// A fresh buffer holding frame `seed` of `len` bytes at `HEADROOM`.
    pub(super) fn frame(&mut self, seed: u32, len: usize) -> PacketBuf {
        let b = self.pool.alloc().expect("pool has buffers");
        self.pool.set_len(b, len).expect("fits");
        self.pool.frame_mut(b).copy_from_slice(&frame_bytes(seed, len));
        b
    }

    pub(super) fn rx_all(&mut self) -> Vec<PacketBuf> {
        let mut out = Vec::new();
        loop {
            let mut batch = Batch::new();
            if self.rx.rx_burst(&mut self.pool, &mut batch) == 0 {
                return out;
            }
            out.extend_from_slice(batch.as_slice());
        }
    }

    pub(super) fn free_all(&mut self, bufs: &[PacketBuf]) {
        for &b in bufs {
            self.pool.free(b).expect("buffer was ours");
        }
    }

    pub(super) fn assert_clean(&self) {
        assert!(self.k.violations.is_empty(), "kernel saw: {:?}", self.k.violations);
        assert_eq!(self.pool.double_frees(), 0);
    }
}

pub(super) fn batch_of(bufs: &[PacketBuf]) -> Batch {
    let mut b = Batch::new();
    for &x in bufs {
        b.push(x).expect("room");
    }
    b
}

// ---- construction ----

fn window(off: RingOffsets, size: u32, entry: usize) -> RingWindow<ShmWindow> {
    RingWindow { window: ShmWindow::new(off.desc + size as usize * entry), offsets: off, size }
}

#[test]
fn construction_checks_every_ring() {
    let mut m = mem(16);
    let pool = Pool::try_new(&mut m, 0, 16).unwrap();
    let cfg = XskConfig::default();
    let k = FakeKick::default();
    let o = LINUX_OFFSETS;
    let rx = |fill: RingWindow<ShmWindow>, rxw: RingWindow<ShmWindow>| {
        XskRx::try_new(fill, rxw, k.clone(), &pool, &cfg).map(|_| ()).unwrap_err()
    };
    for size in [0, 3, 48, 1 << 31 | 1] {
        let e = rx(window(o, 8, 8), RingWindow { window: ShmWindow::new(64), offsets: o, size });
        assert_eq!(e, XskError::BadSize { ring: Ring::Rx, size });
    }
    assert!(XskRx::try_new(window(o, 8, 8), window(o, 8, 16), k.clone(), &pool, &cfg).is_ok());
    // A window one byte short of the last RX entry.
    let short = RingWindow { window: ShmWindow::new(192 + 8 * 16 - 1), offsets: o, size: 8 };
    assert_eq!(rx(window(o, 8, 8), short), XskError::WindowTooSmall { ring: Ring::Rx, need: 320, have: 319 });
    // A fill window with room for 8 entries, given a size of 16.
    let fill16 = RingWindow { window: ShmWindow::new(192 + 8 * 8), offsets: o, size: 16 };
    assert!(matches!(rx(fill16, window(o, 8, 16)), XskError::WindowTooSmall { ring: Ring::Fill, .. }));
    // Flags word past the end of the window.
    let far = RingOffsets { flags: 4096, ..o };
    assert!(matches!(rx(window(o, 8, 8), window(far, 8, 16)), XskError::WindowTooSmall { ring: Ring::Rx, .. }));
    // Misaligned words and entries.
    for bad in [RingOffsets { producer: 2, ..o }, RingOffsets { flags: 133, ..o }, RingOffsets { desc: 196, ..o }] {
        assert_eq!(rx(window(bad, 8, 8), window(o, 8, 16)), XskError::Misaligned { ring: Ring::Fill });
    }
    // Overlaps: two words on one place, a word inside the entries.
    for bad in [RingOffsets { consumer: 0, ..o }, RingOffsets { flags: 200, ..o }] {
        assert_eq!(rx(window(bad, 8, 8), window(o, 8, 16)), XskError::Overlap { ring: Ring::Fill });
    }
    // A ring that already holds entries.
    let used = window(o, 8, 16);
    used.window.w32(o.producer, 5);
    assert_eq!(rx(window(o, 8, 8), used), XskError::NotEmpty { ring: Ring::Rx });
    // TX side: the same checks, its own ring names.
    let tx_err = |txw, comp, cfg: &XskConfig| XskTx::try_new(txw, comp, k.clone(), &pool, cfg).map(|_| ()).unwrap_err();
    assert_eq!(tx_err(window(o, 8, 16), window(o, 6, 8), &cfg), XskError::BadSize { ring: Ring::Completion, size: 6 });
    let comp_used = window(o, 8, 8);
    comp_used.window.w32(o.consumer, 1);
    assert_eq!(tx_err(window(o, 8, 16), comp_used, &cfg), XskError::NotEmpty { ring: Ring::Completion });
    // UMEM base: aligned, and not above the pool.
    let odd = cfg.with_umem_base(100);
    assert_eq!(tx_err(window(o, 8, 16), window(o, 8, 8), &odd), XskError::UmemMisaligned);
    let above = cfg.with_umem_base(BUF_SIZE as u64);
    assert_eq!(tx_err(window(o, 8, 16), window(o, 8, 8), &above), XskError::PoolBelowUmem);
    // Every error says something.
    assert!(!XskError::NotEmpty { ring: Ring::Tx }.to_string().is_empty());
}

// ---- receive ----  (transmit: `tx_tests.rs`)

#[test]
fn fill_posts_one_ring_of_buffers_and_each_received_frame_is_replaced() {
    let mut m = mem(64);
    let mut h = H::new(&mut m, [16, 16, 16, 16], 0);
    assert_eq!(h.rx.fill(&mut h.pool), 16);
    assert_eq!((h.rx.posted(), h.pool.in_use(), h.k.fill_level()), (16, 16, 16));
    // Posting again finds nothing to do: the kernel holds a ring's worth.
    assert_eq!(h.rx.fill(&mut h.pool), 0);
    for i in 0..5 {
        assert!(h.k.deliver(&mut h.pool, &frame_bytes(i, 60)));
    }
    assert_eq!(h.k.fill_level(), 11);
    let got = h.rx_all();
    assert_eq!(got.len(), 5);
    // Five new fill entries for the five frames handed out.
    assert_eq!((h.k.fill_level(), h.rx.posted(), h.pool.in_use()), (16, 16, 21));
    h.free_all(&got);
    assert_eq!(h.rx.rx_stats().no_buffer, 0);
    h.assert_clean();
}

#[test]
fn frames_round_trip_byte_identical_and_in_order() {
    let mut m = mem(256);
    let mut h = H::new(&mut m, [64, 64, 64, 64], 0);
    h.rx.fill(&mut h.pool);
    let mut expect = Vec::new();
    for i in 0..40u32 {
        let f = frame_bytes(i, frame_len(i));
        assert!(h.k.deliver(&mut h.pool, &f));
        expect.push(f);
    }
    let got = h.rx_all();
    assert_eq!(got.len(), 40);
    for (b, f) in got.iter().zip(&expect) {
        assert_eq!(h.pool.frame(*b), &f[..]);
        // Aligned mode: the frame sits XDP_PACKET_HEADROOM into its chunk.
        assert_eq!(h.pool.frame_offset(*b), 256);
    }
    let stats = h.rx.rx_stats();
    assert_eq!((stats.packets, stats.bytes, stats.errors), (40, expect.iter().map(|f| f.len() as u64).sum(), 0));
    // Forward them all: the same buffers go out, in order, where they lie.
    for chunk in got.chunks(32) {
        let mut batch = batch_of(chunk);
        assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), chunk.len());
        assert!(batch.is_empty());
    }
    assert_eq!(h.tx.in_flight(), 40);
    assert_eq!(h.k.transmit(&mut h.pool, usize::MAX), 40);
    assert_eq!(h.k.sent, expect);
    assert_eq!(h.k.complete(usize::MAX), 40);
    assert_eq!(h.tx.reclaim(&mut h.pool), 40);
    assert_eq!((h.tx.in_flight(), h.pool.in_use()), (0, 64));
    let t = h.tx.tx_stats();
    assert_eq!((t.packets, t.errors, t.ring_full), (40, 0, 0));
    h.assert_clean();
}

#[test]
fn indices_wrap_over_70000_frames_each_way() {
    // Under Miri 400 frames: still across the u32 wrap (the indices start 100 below it).
    const FRAMES: u32 = crate::testing::miri_or(70_000, 400);
    let start = u32::MAX - 100;
    let mut m = mem(128);
    let mut h = H::new(&mut m, [32, 32, 32, 32], start);
    h.rx.fill(&mut h.pool);
    let mut next_rx = 0u32;
    let mut next_tx = 0u32;
    let mut delivered = 0u32;
    while next_rx < FRAMES {
        // Up to 20 frames per round, so bursts straddle the ring ends in every phase.
        for _ in 0..20 {
            if delivered < FRAMES && h.k.deliver(&mut h.pool, &frame_bytes(delivered, 60 + delivered as usize % 40)) {
                delivered += 1;
            }
        }
        let mut batch = Batch::new();
        h.rx.rx_burst(&mut h.pool, &mut batch);
        for &b in batch.as_slice() {
            assert_eq!(h.pool.frame(b), &frame_bytes(next_rx, 60 + next_rx as usize % 40)[..], "frame {next_rx}");
            next_rx += 1;
        }
        // Send them back out; what the TX ring does not take is retried after the kernel
        // makes room.
        while !batch.is_empty() {
            h.tx.tx_burst(&mut h.pool, &mut batch);
            h.k.transmit(&mut h.pool, 25);
            h.k.complete(25);
        }
        for f in h.k.sent.drain(..) {
            assert_eq!(f, frame_bytes(next_tx, 60 + next_tx as usize % 40), "sent frame {next_tx}");
            next_tx += 1;
        }
    }
    while h.tx.in_flight() > 0 {
        h.k.transmit(&mut h.pool, usize::MAX);
        h.k.complete(usize::MAX);
        h.tx.reclaim(&mut h.pool);
    }
    assert_eq!(next_tx + h.k.sent.len() as u32, FRAMES);
    // Every ring went round the u32 end.
    for (name, ring) in [("fill", &h.k.fill), ("rx", &h.k.rx), ("tx", &h.k.tx), ("comp", &h.k.comp)] {
        assert!(ring.prod() < start && ring.prod() > 60_000, "{name} producer {}", ring.prod());
    }
    assert_eq!(h.rx.rx_stats().errors + h.tx.tx_stats().errors, 0);
    let c = (h.rx.counters(), h.tx.counters());
    assert_eq!((c.0.bad_index, c.1.bad_index, c.1.bad_completions), (0, 0, 0));
    assert_eq!(h.pool.in_use(), 32);
    h.assert_clean();
}

#[test]
fn drain_returns_every_buffer_the_kernel_holds() {
    let mut m = mem(128);
    let mut h = H::new(&mut m, [32, 32, 32, 32], 7);
    h.rx.fill(&mut h.pool);
    for i in 0..10 {
        h.k.deliver(&mut h.pool, &frame_bytes(i, 100));
    }
    let got = h.rx_all();
    // Six frames out; the kernel sends four and completes two.
    let mut batch = batch_of(&got[..6]);
    h.tx.tx_burst(&mut h.pool, &mut batch);
    h.k.transmit(&mut h.pool, 4);
    h.k.complete(2);
    assert_eq!(h.k.uncompleted(), 2);
    // Two more delivered but never received: they sit on the RX ring.
    h.k.deliver(&mut h.pool, &frame_bytes(50, 100));
    h.k.deliver(&mut h.pool, &frame_bytes(51, 100));
    h.free_all(&got[6..]);
    // Kernel holds 32 (fill + RX ring), TX ring 6 (2 of them completed, not reaped).
    assert_eq!(h.pool.in_use(), 38);
    let H { mut pool, rx, tx, .. } = h;
    assert_eq!(rx.drain(&mut pool), 32);
    assert_eq!(tx.drain(&mut pool), 6);
    assert_eq!((pool.in_use(), pool.double_frees()), (0, 0));
}

#[test]
fn bad_rx_descriptors_are_counted_and_cost_no_buffer() {
    let mut m = mem(64);
    let mut h = H::new(&mut m, [8, 32, 8, 8], 0);
    h.rx.fill(&mut h.pool);
    // Three good frames; hold the first one in "the application".
    for i in 0..3 {
        h.k.deliver(&mut h.pool, &frame_bytes(i, 64));
    }
    let good = h.rx_all();
    let held = good[0];
    let held_addr = h.pool.phys(held) + 256;
    h.free_all(&good[1..]);
    let posted_before = h.rx.posted();
    // The kernel takes two more fill entries for the length anomalies below.
    let take = |h: &mut H<'_>| -> u64 {
        let c = h.k.fill.cons();
        let a = h.k.fill.w.r64(LINUX_OFFSETS.desc + (c & 7) as usize * 8);
        h.k.fill.set_cons(c.wrapping_add(1));
        a
    };
    let short = take(&mut h);
    let long = take(&mut h);
    let frag = take(&mut h);
    let frag2 = take(&mut h);
    let free_buf_addr = (60 * BUF_SIZE) as u64; // buffer 60: never allocated
    h.k.rx_raw(64 * BUF_SIZE as u64, 64, 0); // just past the pool
    h.k.rx_raw(u64::MAX - 10, 64, 0); // far outside
    h.k.rx_raw(free_buf_addr + 256, 64, 0); // a free buffer
    h.k.rx_raw(held_addr, 64, 0); // the application's buffer
    h.k.rx_raw(short + 256, 13, 0); // runt: one byte short of an Ethernet header
    h.k.rx_raw(short + 256, 64, 0); // the same buffer again: no longer ours
    h.k.rx_raw(long + 256, (BUF_SIZE - 256 + 1) as u32, 0); // one byte past the chunk
    h.k.rx_raw(frag + 256, 64, XDP_PKT_CONTD); // first of a multi-buffer frame
    h.k.rx_raw(frag2 + 256, 64, 0); // its last part
    // A good frame after all that.
    h.k.deliver(&mut h.pool, &frame_bytes(99, 64));
    let got = h.rx_all();
    assert_eq!(got.len(), 1);
    assert_eq!(h.pool.frame(got[0]), &frame_bytes(99, 64)[..]);
    let c = h.rx.counters();
    assert_eq!((c.bad_addr, c.not_owned, c.bad_len, c.fragments), (2, 3, 2, 2));
    assert_eq!(h.k.fill_level(), 8, "every buffer taken back was replaced");
    assert_eq!(h.rx.rx_stats().errors, 9);
    // Runt, long and fragment buffers went back to the pool and were replaced; the
    // application's buffer was left alone.
    assert_eq!(h.rx.posted(), posted_before);
    assert_eq!(h.pool.in_use(), posted_before + 2);
    h.free_all(&[held, got[0]]);
    let H { mut pool, rx, .. } = h;
    assert_eq!(rx.drain(&mut pool), posted_before);
    assert_eq!((pool.in_use(), pool.double_frees()), (0, 0));
}

#[test]
fn an_empty_pool_counts_no_buffer_and_receive_recovers() {
    // Ten buffers for a fill ring of eight.
    let mut m = mem(10);
    let mut h = H::new(&mut m, [8, 16, 8, 8], 0);
    assert_eq!(h.rx.fill(&mut h.pool), 8);
    let mut held = Vec::new();
    for i in 0..8 {
        h.k.deliver(&mut h.pool, &frame_bytes(i, 64));
    }
    let mut batch = Batch::new();
    assert_eq!(h.rx.rx_burst(&mut h.pool, &mut batch), 8);
    held.extend_from_slice(batch.as_slice());
    // Two buffers left for eight empty slots.
    assert_eq!(h.rx.rx_stats().no_buffer, 1);
    assert_eq!(h.k.fill_level(), 2);
    // The kernel runs dry: two frames land, four are lost.
    for i in 8..14 {
        h.k.deliver(&mut h.pool, &frame_bytes(i, 64));
    }
    assert_eq!(h.k.dropped_no_fill, 4);
    let mut batch = Batch::new();
    assert_eq!(h.rx.rx_burst(&mut h.pool, &mut batch), 2);
    held.extend_from_slice(batch.as_slice());
    assert_eq!(h.rx.rx_stats().no_buffer, 2);
    assert_eq!((h.rx.posted(), h.k.fill_level()), (0, 0));
    // Polling an empty ring with an empty pool counts each shortage, and nothing breaks.
    assert_eq!(h.rx.rx_burst(&mut h.pool, &mut Batch::new()), 0);
    assert_eq!(h.rx.rx_stats().no_buffer, 3);
    // The application lets go: the next burst refills, frames flow again.
    h.free_all(&held);
    assert_eq!(h.rx.rx_burst(&mut h.pool, &mut Batch::new()), 0);
    assert_eq!(h.k.fill_level(), 8);
    h.k.deliver(&mut h.pool, &frame_bytes(77, 64));
    let got = h.rx_all();
    assert_eq!(h.pool.frame(got[0]), &frame_bytes(77, 64)[..]);
    assert_eq!(h.rx.rx_stats().no_buffer, 3);
    h.assert_clean();
}

#[test]
fn fill_need_wakeup_kicks_exactly_when_entries_are_new_or_rx_is_empty() {
    let mut m = mem(64);
    let mut h = H::new(&mut m, [8, 8, 8, 8], 0);
    // No flag: never a kick, whatever happens.
    h.rx.fill(&mut h.pool);
    h.rx.rx_burst(&mut h.pool, &mut Batch::new());
    h.k.deliver(&mut h.pool, &frame_bytes(1, 64));
    let got = h.rx_all();
    h.free_all(&got);
    assert_eq!(h.kick.rx(), 0);
    // The kernel asks for a wake-up.
    h.k.fill.set_need_wakeup(true);
    // An empty RX ring: one kick per burst (the kernel may be waiting for us).
    h.rx.rx_burst(&mut h.pool, &mut Batch::new());
    assert_eq!(h.kick.rx(), 1);
    // Frames received and refilled: one kick for the burst, not one per entry.
    for i in 0..3 {
        h.k.deliver(&mut h.pool, &frame_bytes(i, 64));
    }
    let mut batch = Batch::new();
    assert_eq!(h.rx.rx_burst(&mut h.pool, &mut batch), 3);
    assert_eq!(h.kick.rx(), 2);
    // A burst with no room reads nothing and posts nothing: no kick.
    let mut full = Batch::new();
    let extra: Vec<_> = (0..32).map(|_| h.pool.alloc().unwrap()).collect();
    for &b in &extra {
        full.push(b).unwrap();
    }
    h.rx.rx_burst(&mut h.pool, &mut full);
    assert_eq!(h.kick.rx(), 2);
    h.free_all(&extra);
    // Flag cleared: frames flow without kicks.
    h.k.fill.set_need_wakeup(false);
    h.free_all(batch.as_slice());
    h.k.deliver(&mut h.pool, &frame_bytes(9, 64));
    let got = h.rx_all();
    h.free_all(&got);
    assert_eq!(h.kick.rx(), 2);
    assert_eq!(h.rx.counters().kicks, 2);
    // fill() kicks only when it posted something.
    h.k.fill.set_need_wakeup(true);
    assert_eq!(h.rx.fill(&mut h.pool), 0);
    assert_eq!(h.kick.rx(), 2);
    h.assert_clean();
}

#[test]
fn busy_poll_kicks_on_every_empty_burst_and_only_then() {
    let mut m = mem(64);
    let mut h = H::with(&mut m, [8, 8, 8, 8], 0, 0, XskConfig::default().with_always_kick_rx(true));
    h.rx.fill(&mut h.pool);
    assert_eq!(h.kick.rx(), 0, "posting without NEED_WAKEUP is not a reason");
    // Each burst that finds the RX ring empty calls into the kernel (the busy poll).
    for k in 1..=3 {
        assert_eq!(h.rx.rx_burst(&mut h.pool, &mut Batch::new()), 0);
        assert_eq!(h.kick.rx(), k);
    }
    // A burst that took frames (and refilled) does not, while the kernel asks for nothing.
    for i in 0..3 {
        h.k.deliver(&mut h.pool, &frame_bytes(i, 64));
    }
    let mut batch = Batch::new();
    assert_eq!(h.rx.rx_burst(&mut h.pool, &mut batch), 3);
    assert_eq!(h.kick.rx(), 3);
    h.free_all(batch.as_slice());
    // No room in the batch: nothing read, nothing polled.
    let mut full = Batch::new();
    let extra: Vec<_> = (0..32).map(|_| h.pool.alloc().unwrap()).collect();
    for &b in &extra {
        full.push(b).unwrap();
    }
    h.rx.rx_burst(&mut h.pool, &mut full);
    assert_eq!(h.kick.rx(), 3);
    h.free_all(&extra);
    // NEED_WAKEUP still works as without busy polling, one kick per burst.
    h.k.fill.set_need_wakeup(true);
    h.rx.rx_burst(&mut h.pool, &mut Batch::new());
    assert_eq!(h.kick.rx(), 4);
    assert_eq!(h.rx.counters().kicks, 4);
    h.assert_clean();
}

#[test]
fn cached_indices_spare_the_shared_words() {
    let mut m = mem(128);
    let mut h = H::new(&mut m, [64, 64, 64, 64], 0);
    h.rx.fill(&mut h.pool);
    let prod = LINUX_OFFSETS.producer;
    let rx_prod_reads = |h: &H<'_>| h.k.rx.w.reads_of(prod);
    for i in 0..40 {
        h.k.deliver(&mut h.pool, &frame_bytes(i, 60));
    }
    let before = rx_prod_reads(&h);
    let mut a = Batch::new();
    assert_eq!(h.rx.rx_burst(&mut h.pool, &mut a), 32);
    assert_eq!(rx_prod_reads(&h), before + 1);
    // The other eight were already seen: no second look at the producer.
    let mut b = Batch::new();
    assert_eq!(h.rx.rx_burst(&mut h.pool, &mut b), 8);
    assert_eq!(rx_prod_reads(&h), before + 1);
    h.free_all(a.as_slice());
    h.free_all(b.as_slice());
    // The TX ring's consumer is read only when the cached view is short (and not at all
    // for the kick decision while no wake-up is asked for).
    let cons = LINUX_OFFSETS.consumer;
    let reads = h.k.tx.w.reads_of(cons);
    for i in 0..4 {
        let f = h.frame(i, 60);
        h.tx.tx_burst(&mut h.pool, &mut batch_of(&[f]));
    }
    assert_eq!(h.k.tx.w.reads_of(cons), reads);
    h.assert_clean();
}

#[test]
fn wake_address_is_the_rx_producer_word() {
    let mut m = mem(16);
    let h = H::new(&mut m, [8, 8, 8, 8], 0);
    assert_eq!(h.rx.wake_address().map(|a| a.get()), Some(SHM_CPU_BASE + LINUX_OFFSETS.producer));
    assert_eq!(h.rx.pending(), Some(0), "nothing published yet");
}

#[test]
fn umem_base_maps_pool_addresses_to_umem_offsets() {
    // The pool sits 16 buffers into a UMEM registered at physical 0x4000_0000.
    let mut m = mem(32);
    let cfg = XskConfig::default().with_umem_base(0x4000_0000);
    let mut h = H::with(&mut m, [8, 8, 8, 8], 0, 0x4000_0000 + 16 * BUF_SIZE as u64, cfg);
    h.rx.fill(&mut h.pool);
    let first = h.k.fill.w.r64(LINUX_OFFSETS.desc);
    assert_eq!(first, 16 * BUF_SIZE as u64, "fill entries are UMEM offsets of chunk starts");
    h.k.deliver(&mut h.pool, &frame_bytes(5, 80));
    let got = h.rx_all();
    assert_eq!(h.pool.frame(got[0]), &frame_bytes(5, 80)[..]);
    h.tx.tx_burst(&mut h.pool, &mut batch_of(&got));
    let txd = h.k.tx.w.r64(LINUX_OFFSETS.desc);
    assert_eq!(txd, 16 * BUF_SIZE as u64 + 256, "TX address = UMEM offset of the frame's first byte");
    h.k.transmit(&mut h.pool, 1);
    h.k.complete(1);
    h.tx.reclaim(&mut h.pool);
    assert_eq!(h.k.sent, vec![frame_bytes(5, 80)]);
    assert_eq!(h.pool.in_use(), 8);
    h.assert_clean();
}

#[test]
fn corrupt_kernel_indices_are_clamped_and_counted() {
    let mut m = mem(64);
    let mut h = H::new(&mut m, [8, 8, 8, 8], 0);
    h.rx.fill(&mut h.pool);
    // The RX producer leaps far ahead: one ring's worth of (zeroed) entries is read and
    // rejected, nothing more.
    h.k.rx.set_prod(1000);
    h.rx.rx_burst(&mut h.pool, &mut Batch::new());
    let c = h.rx.counters();
    assert_eq!(c.bad_index, 1);
    assert!(h.rx.rx_stats().errors <= 8);
    // The TX consumer claims more than was produced; it is looked at once the cached
    // view is short (nine frames for eight slots). The ring counts as empty: eight go on.
    h.k.tx.set_cons(500);
    let bs: Vec<_> = (0..9).map(|i| h.frame(i, 60)).collect();
    let mut batch = batch_of(&bs);
    assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), 8);
    assert_eq!(h.tx.counters().bad_index, 1);
    assert_eq!(batch.as_slice(), &bs[8..]);
    assert_eq!(h.pool.double_frees(), 0);
}

#[test]
fn non_default_offsets_are_honoured() {
    // Words packed at the end, entries first (any layout the kernel reports).
    let off = RingOffsets { producer: 8 * 16, consumer: 8 * 16 + 4, flags: 8 * 16 + 8, desc: 0 };
    let mut m = mem(32);
    let mut pool = Pool::try_new(&mut m, 0, 32).unwrap();
    let mut k = Kernel::with_offsets([8, 8, 8, 8], 3, 0, off);
    let kick = FakeKick::default();
    let (mut rx, mut tx) = try_new_queues(k.rings(), kick, &pool, &XskConfig::default()).unwrap();
    rx.fill(&mut pool);
    k.deliver(&mut pool, &frame_bytes(1, 70));
    let mut batch = Batch::new();
    assert_eq!(rx.rx_burst(&mut pool, &mut batch), 1);
    tx.tx_burst(&mut pool, &mut batch);
    k.transmit(&mut pool, 1);
    assert_eq!(k.sent, vec![frame_bytes(1, 70)]);
    assert!(k.violations.is_empty());
    assert_eq!(rx.posted(), 8);
    // The kernel's words are where the offsets say.
    assert_eq!(k.fill.w.r32(off.producer), 3 + 8 + 1);
    assert_eq!(k.tx.w.r32(off.producer), 4);
}

// ---- arrival stamps ----

/// The XDP program's metadata: `ns` and, if `magic`, the magic word.
fn meta(ns: u64, magic: bool) -> Vec<u8> {
    let mut m = ns.to_ne_bytes().to_vec();
    m.extend_from_slice(&if magic { super::ARRIVAL_MAGIC } else { 0x1234 }.to_ne_bytes());
    m
}

#[test]
fn arrival_stamps_are_read_converted_and_consumed() {
    use cadence_core::time::{ClockMap, ClockPair, Instant, TickRate};
    let mut m = mem(32);
    // Worker ticks at 2 GHz; CLOCK_MONOTONIC 1 s is tick 10^9.
    let map = ClockMap::try_new(
        ClockPair { ns: 1_000_000_000, ticks: Instant(1_000_000_000) },
        TickRate::try_new(2_000_000_000).unwrap(),
    )
    .unwrap();
    let mut h = H::with(&mut m, [16, 16, 16, 16], 0, 0, XskConfig::default().with_arrival(Some(map)));
    assert!(h.rx.stamps_arrival());
    h.rx.fill(&mut h.pool);
    // Stamped 1 µs after the anchor; unstamped (no magic); stamped at the anchor.
    assert!(h.k.deliver_meta(&mut h.pool, &frame_bytes(1, 60), &meta(1_000_001_000, true)));
    assert!(h.k.deliver_meta(&mut h.pool, &frame_bytes(2, 60), &meta(1_000_002_000, false)));
    assert!(h.k.deliver_meta(&mut h.pool, &frame_bytes(3, 60), &meta(1_000_000_000, true)));
    let got = h.rx_all();
    assert_eq!(got.len(), 3);
    let stamps: Vec<u64> = got.iter().map(|&b| h.pool.stamp(b)).collect();
    assert_eq!(stamps, [1_000_002_000, 0, 1_000_000_000]);
    // Frames are untouched; the magic in front of the stamped ones is cleared.
    for (i, &b) in got.iter().enumerate() {
        assert_eq!(h.pool.frame(b), frame_bytes(i as u32 + 1, 60).as_slice());
        let off = h.pool.frame_offset(b);
        assert_ne!(&h.pool.raw_mut(b)[off - 8..off], &super::ARRIVAL_MAGIC.to_ne_bytes());
    }
    let c = h.rx.counters();
    assert_eq!((c.stamped, c.unstamped), (2, 1));
    h.free_all(&got);

    // Without a map nothing is read: stamps stay 0 and nothing is counted.
    let mut m2 = mem(32);
    let mut plain = H::new(&mut m2, [16, 16, 16, 16], 0);
    assert!(!plain.rx.stamps_arrival());
    plain.rx.fill(&mut plain.pool);
    assert!(plain.k.deliver_meta(&mut plain.pool, &frame_bytes(1, 60), &meta(5, true)));
    let got = plain.rx_all();
    assert_eq!(plain.pool.stamp(got[0]), 0);
    assert_eq!(plain.rx.counters().stamped + plain.rx.counters().unstamped, 0);
    plain.free_all(&got);
    h.assert_clean();
    plain.assert_clean();
}

/// With multi-buffer (`XDP_USE_SG`): a frame longer than a chunk's 1 792 bytes arrives over
/// several descriptors (CONTD on all but the last) and comes out as one frame, byte-exact,
/// also when its pieces straddle two bursts; sent back, it takes a descriptor a buffer,
/// each completed on its own, and nothing is lost.
#[test]
fn multi_buffer_frames_are_chained_on_receive_and_split_on_transmit() {
    let mut m = mem(64);
    let mut h =
        H::with(&mut m, [32, 32, 32, 32], 0, 0, XskConfig::default().with_multi_buffer(true).with_max_tx_frame(9018));
    h.k.multi_buffer = true;
    h.rx.fill(&mut h.pool);
    let lens = [60, 1792, 1793, 4000, 9014];
    let want: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &l)| frame_bytes(i as u32, l)).collect();
    let mut got = Vec::new();
    for f in &want {
        assert!(h.k.deliver(&mut h.pool, f), "{} bytes delivered", f.len());
        got.extend(h.rx_all());
    }
    assert_eq!(got.len(), want.len());
    for (&b, w) in got.iter().zip(&want) {
        let mut v = vec![0u8; w.len()];
        assert_eq!(h.pool.copy_frame(b, &mut v), Some(w.len()));
        assert_eq!(&v, w);
        assert_eq!(h.pool.segments(b).count(), w.len().div_ceil(BUF_SIZE - 256));
    }
    assert_eq!(h.rx.counters().multi_buffer, 3);
    assert_eq!(h.rx.rx_stats().bytes, lens.iter().sum::<usize>() as u64);
    // A frame whose pieces are published over two bursts: held in between.
    let big = frame_bytes(7, 5000); // three chunks
    assert!(h.k.deliver(&mut h.pool, &big));
    let p = h.k.rx.prod();
    h.k.rx.set_prod(p - 1);
    assert!(h.rx_all().is_empty());
    assert_eq!(h.rx.receiving(&h.pool), 2);
    h.k.rx.set_prod(p);
    let last = h.rx_all();
    assert_eq!(last.len(), 1);
    let mut v = vec![0u8; 5000];
    assert_eq!(h.pool.copy_frame(last[0], &mut v), Some(5000));
    assert_eq!(v, big);
    got.extend(last);

    // Out again: one descriptor a buffer, the kernel sees the same frames.
    let mut batch = batch_of(&got);
    assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), got.len());
    let pieces: usize = lens.iter().chain(&[5000]).map(|l| l.div_ceil(BUF_SIZE - 256)).sum();
    assert_eq!(h.tx.in_flight(), pieces);
    h.k.transmit(&mut h.pool, 64);
    let mut all = want.clone();
    all.push(big);
    assert_eq!(h.k.sent, all);
    h.k.complete(64);
    h.tx.reclaim(&mut h.pool);
    assert_eq!(h.tx.in_flight(), 0);
    assert_eq!(h.pool.in_use(), h.rx.posted(), "every sent buffer back");
    h.assert_clean();
}

/// Multi-buffer descriptors that cannot make a frame: a piece outside the pool drops the
/// frame being put together (its buffers back) and the rest of its pieces; a frame over
/// more buffers than a frame may span is dropped whole; the next frame arrives intact.
/// Without multi-buffer, a frame over several buffers is refused on transmit.
#[test]
fn bad_multi_buffer_frames_are_dropped_whole_and_counted() {
    let mut m = mem(64);
    let mut h = H::with(&mut m, [32, 64, 32, 32], 0, 0, XskConfig::default().with_multi_buffer(true));
    h.rx.fill(&mut h.pool);
    let take = |h: &mut H<'_>| {
        let c = h.k.fill.cons();
        let a = h.k.fill.w.r64(LINUX_OFFSETS.desc + (c & 31) as usize * 8);
        h.k.fill.set_cons(c + 1);
        a
    };
    let (a1, a2) = (take(&mut h), take(&mut h));
    h.k.rx_raw(a1 + 256, 1792, XDP_PKT_CONTD);
    h.k.rx_raw(u64::MAX - 10, 100, XDP_PKT_CONTD); // outside the pool: the frame is dropped
    h.k.rx_raw(a2 + 256, 100, 0); // the rest of it
    let mut pieces = Vec::new();
    for _ in 0..=cadence_core::buf::MAX_SEGMENTS {
        pieces.push(take(&mut h));
    }
    for (k, &a) in pieces.iter().enumerate() {
        let last = k + 1 == pieces.len();
        h.k.rx_raw(a + 256, 1000, if last { 0 } else { XDP_PKT_CONTD });
    }
    h.k.deliver(&mut h.pool, &frame_bytes(5, 300));
    let got = h.rx_all();
    assert_eq!(got.len(), 1);
    assert_eq!(h.pool.frame(got[0]), &frame_bytes(5, 300)[..]);
    let c = h.rx.counters();
    assert_eq!((c.bad_addr, c.fragments, c.multi_buffer), (1, 2, 0));
    assert_eq!(h.rx.receiving(&h.pool), 0);
    h.free_all(&got);
    assert_eq!(h.pool.in_use(), h.rx.posted(), "no buffer lost");
    h.assert_clean();

    let mut m = mem(16);
    let mut h = H::new(&mut m, [8, 8, 8, 8], 0);
    let f = h.pool.alloc_frame(&frame_bytes(1, 3000)).expect("two buffers");
    let mut batch = batch_of(&[f]);
    assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), 1);
    assert_eq!((h.tx.tx_stats().errors, h.tx.in_flight(), h.pool.in_use()), (1, 0, 0));
}

/// Round after round of 32 one-chunk frames received, sent back and completed, the kernel's
/// side written by hand: every frame arrives with its bytes, leaves, and comes back, and the
/// queues end holding exactly the fill ring's buffers. Also the cachegrind harness of
/// docs/PERFORMANCE.md ("Jumbo frames on the image's drivers and over AF_XDP"): `XSK_LOOP`
/// rounds (10 by default), the same code in any two builds compared.
#[test]
fn xsk_instruction_loop() {
    let n: usize = std::env::var("XSK_LOOP").ok().and_then(|v| v.parse().ok()).unwrap_or(10);
    let mut m = mem(256);
    let mut h = H::new(&mut m, [64, 64, 64, 64], 0);
    h.rx.fill(&mut h.pool);
    let payload = frame_bytes(1, 60);
    for _ in 0..n {
        for _ in 0..32 {
            let c = h.k.fill.cons();
            let a = h.k.fill.w.r64(LINUX_OFFSETS.desc + (c & 63) as usize * 8);
            h.k.fill.set_cons(c.wrapping_add(1));
            let b = h.pool.handle_at(a).unwrap();
            h.pool.raw_mut(b)[256..316].copy_from_slice(&payload);
            h.k.rx_raw(a + 256, 60, 0);
        }
        let mut batch = Batch::new();
        let got = h.rx.rx_burst(&mut h.pool, &mut batch);
        assert_eq!(got, 32);
        assert!(batch.as_slice().iter().all(|&b| h.pool.frame(b) == &payload[..]));
        assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), 32);
        for _ in 0..32 {
            let c = h.k.tx.cons();
            let a = h.k.tx.w.r64(LINUX_OFFSETS.desc + (c & 63) as usize * 16);
            h.k.tx.set_cons(c.wrapping_add(1));
            h.k.comp_raw(a);
        }
        assert_eq!(h.tx.reclaim(&mut h.pool), 32);
    }
    assert_eq!((h.tx.in_flight(), h.pool.in_use()), (0, h.rx.posted()));
    assert_eq!(h.rx.rx_stats().packets, 32 * n as u64);
    h.assert_clean();
}
