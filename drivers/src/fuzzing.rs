//! Fuzz harnesses (compiled only under `cfg(fuzzing)`, which `cargo fuzz` sets): each takes
//! the fuzzer's bytes as a script of what a hostile device or kernel does between the
//! driver's bursts, drives the real driver against the crate's own device models and fake
//! kernels, and asserts what must hold whatever the other side writes:
//!
//! - nothing panics (the models' windows panic on any access outside a ring);
//! - **conservation**: every pool buffer is in exactly one place — held by the test (handed
//!   out by `rx_burst`, or not yet sent), posted to a receive ring, or in flight on a
//!   transmit ring — after every step, nothing is freed twice, and tearing down gives every
//!   buffer back;
//! - what `rx_burst` hands out is a well-formed frame inside its buffer.
//!
//! The targets in `fuzz/fuzz_targets/` call these; `cargo xtask fuzz` runs them.

use alloc::vec::Vec;

use cadence_core::buf::{BUF_SIZE, Batch, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, TxQueue};

/// The fuzzer's bytes, read front to back; reads past the end give zeros.
#[derive(Debug)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next `n` bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.data.split_at(n.min(self.data.len()));
        self.data = tail;
        head
    }

    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    /// The next little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        let b = self.bytes(2);
        u16::from_le_bytes([b.first().copied().unwrap_or(0), b.get(1).copied().unwrap_or(0)])
    }

    /// The next little-endian `u32`.
    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }

    /// The next little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }

    /// A value below `n` (0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { self.u16() as usize % n }
    }
}

/// Frame `seed` of `len` bytes (an Ethernet-ish frame: bytes 12..14 say IPv4).
fn frame_bytes(seed: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (seed as usize).wrapping_mul(31).wrapping_add(i * 7) as u8).collect();
    if len >= 14 {
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    }
    f
}

/// What the test holds: buffers handed out by `rx_burst` or taken back from `tx_burst`.
struct Held(Vec<PacketBuf>);

impl Held {
    /// Takes what `rx_burst` handed out into `batch`, checking each frame.
    fn received(&mut self, pool: &Pool<'_>, batch: &mut Batch, n: usize) {
        assert_eq!(n, batch.len(), "rx_burst's count disagrees with the batch");
        for &b in batch.as_slice() {
            for s in pool.segments(b) {
                let (off, len) = (pool.frame_offset(s), pool.len(s));
                assert!(off + len <= BUF_SIZE, "frame {off}+{len} outside its buffer");
                assert!(!self.0.iter().any(|&h| pool.segments(h).any(|x| x == s)), "buffer {s:?} handed out twice");
            }
        }
        self.0.extend_from_slice(batch.as_slice());
        batch.clear();
    }

    /// A batch of up to `n` frames to send: held ones first, then fresh `len`-byte frames
    /// (over several buffers when longer than one).
    fn to_send(&mut self, pool: &mut Pool<'_>, n: usize, len: usize, seed: u32) -> Batch {
        let mut batch = Batch::new();
        for i in 0..n.min(32) {
            let b = match self.0.pop() {
                Some(b) => b,
                None => {
                    let bytes = frame_bytes(seed.wrapping_add(i as u32), len);
                    if len > BUF_SIZE - 64 {
                        let Some(b) = pool.alloc_frame(&bytes) else { break };
                        b
                    } else {
                        let Some(b) = pool.alloc() else { break };
                        let _ = pool.set_len(b, len);
                        pool.frame_mut(b).copy_from_slice(&bytes);
                        b
                    }
                }
            };
            if let Err(b) = batch.push(b) {
                self.0.push(b);
                break;
            }
        }
        batch
    }

    /// Takes back what `tx_burst` left in `batch`.
    fn unsent(&mut self, batch: &mut Batch, offered: usize, taken: usize) {
        assert_eq!(offered - taken, batch.len(), "tx_burst's count disagrees with the batch");
        self.0.extend_from_slice(batch.as_slice());
        batch.clear();
    }

    fn free(&mut self, pool: &mut Pool<'_>, n: usize) {
        for _ in 0..n {
            let Some(b) = self.0.pop() else { break };
            assert!(pool.free(b).is_ok(), "a held buffer was already free");
        }
    }

    /// Buffers held: every buffer of every frame.
    fn buffers(&self, pool: &Pool<'_>) -> usize {
        self.0.iter().map(|&b| pool.segments(b).count()).sum()
    }
}

/// virtio-net RX/TX (queue pair 0) against the register-level device model, with the
/// fuzzer playing a hostile device: besides honest deliveries and transmissions it writes
/// used-ring entries naming any descriptor with any length and moves the used index
/// anywhere. Half the inputs want jumbo frames (`MRG_RXBUF`): packets over several buffers,
/// headers claiming any buffer count, frames over several buffers sent.
#[cfg(feature = "virtio")]
pub fn virtio(data: &[u8]) {
    use crate::virtio::model::{FakeClock, Model, POOL_BASE};
    use crate::virtio::{Config, VirtioNet};

    const BUFS: usize = 96;
    let mut inp = Input::new(data);
    let qsize = [8u16, 16, 32][inp.below(3)];
    let jumbo = inp.below(2) == 1;
    let longest = if jumbo { 17_000 } else { 1600 };
    let model = Model::new(BUFS * BUF_SIZE);
    let (pci, mut dma, clock) = (model.pci(), model.dma(), FakeClock::new());
    let mut pool = Pool::try_with_mem(model.pool_mem(), POOL_BASE, BUFS).expect("pool");
    let mut config = Config::default().with_queue_size(qsize);
    if jumbo {
        config = config.with_max_frame(9018);
    }
    let mut net = VirtioNet::try_new(&pci, &mut dma, &clock, &mut pool, &config).expect("init against the model");
    let Some((rx, tx)) = net.queue_pair(0) else { panic!("queue pair 0") };
    let mut held = Held(Vec::new());
    let mut batch = Batch::new();
    let mut seed = 0u32;
    while !inp.is_empty() {
        seed = seed.wrapping_add(1);
        match inp.u8() % 12 {
            0 => {
                let len = inp.below(longest);
                model.inject(&frame_bytes(seed, len));
            }
            1 => {
                let len = inp.below(longest);
                let claimed = inp.u32();
                model.inject_claiming(&frame_bytes(seed, len), claimed);
            }
            11 => {
                let (len, n) = (inp.below(longest), inp.u16());
                model.inject_claiming_buffers(&frame_bytes(seed, len), n);
            }
            2 | 3 => {
                model.step();
            }
            4 => {
                let (q, id, len) = (inp.below(2), inp.u32(), inp.u32());
                model.push_used_raw(q, id, len);
            }
            5 => {
                let (q, idx) = (inp.below(2), inp.u16());
                model.set_used_idx(q, idx);
            }
            6 | 7 => {
                let n = rx.rx_burst(&mut pool, &mut batch);
                held.received(&pool, &mut batch, n);
            }
            8 => {
                let (n, len) = (inp.below(33), inp.below(longest));
                let mut out = held.to_send(&mut pool, n, len, seed);
                let offered = out.len();
                let taken = tx.tx_burst(&mut pool, &mut out);
                held.unsent(&mut out, offered, taken);
            }
            9 => {
                tx.reclaim(&mut pool);
            }
            _ => {
                let n = inp.below(40);
                held.free(&mut pool, n);
                rx.fill(&mut pool);
            }
        }
        assert_eq!(
            pool.in_use(),
            held.buffers(&pool) + rx.posted() + tx.in_flight(),
            "a buffer was lost or duplicated"
        );
        assert_eq!(pool.double_frees(), 0);
    }
}

/// The Intel advanced-descriptor RX ring (shared by ixgbe and igb) with the fuzzer writing
/// the descriptor write-back: any status/error bits (DD, EOP, errors), any length, on any
/// descriptor, including ones the driver has not posted or has already cleaned. Half the
/// inputs take jumbo frames (frames chained over descriptors until EOP).
#[cfg(any(feature = "ixgbe", feature = "igb"))]
pub fn intel_rx(data: &[u8]) {
    use crate::intel::desc::{ADV_DESC_LEN as DESC_LEN, AdvRx, RX_LENGTH, RX_STATUS_ERROR};
    use crate::intel::rx::{IntelRx, MAX_RX_FRAME, RX_FRAME_OFFSET};
    use crate::reg::Register;
    // Byte offsets in an advanced RX write-back, from the format's declaration.
    const STATUS_ERROR: usize = <RX_STATUS_ERROR as Register>::OFFSET;
    const LENGTH: usize = <RX_LENGTH as Register>::OFFSET;
    use crate::shm::{ShmDma, ShmWindow};

    const BUFS: usize = 96;
    let mut inp = Input::new(data);
    let size = [16u16, 32, 64][inp.below(3)];
    let mut mem = alloc::vec![0u8; BUFS * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0x4000_0000, BUFS).expect("pool");
    let mut dma = ShmDma::new(0x1000_0000, 64 * 1024);
    let tail = ShmWindow::new(4);
    let mut q = IntelRx::<_, _, AdvRx>::try_new(&mut dma, size, tail.clone(), 0).expect("ring");
    let jumbo = inp.below(2) == 1;
    if jumbo {
        q.set_max_frame(9018, 1024);
    }
    let ring = dma.window(q.ring_phys()).expect("ring window");
    q.fill(&mut pool);
    let mut held = Held(Vec::new());
    let mut batch = Batch::new();
    while !inp.is_empty() {
        match inp.u8() % 6 {
            0 | 1 => {
                // The device writes back descriptor `i` (status/error word and length).
                let i = inp.below(size as usize);
                let d = i * DESC_LEN;
                ring.w32(d + STATUS_ERROR, inp.u32());
                ring.w16(d + LENGTH, inp.u16());
            }
            2 => {
                // An honest write-back of the next descriptors: DD (| EOP), a length.
                let n = inp.below(8);
                let tail_now = tail.r32(0) as usize;
                for k in 0..n {
                    let i = (inp.below(size as usize) + k) % size as usize;
                    if i == tail_now {
                        break;
                    }
                    let d = i * DESC_LEN;
                    let most = if jumbo { 1024 } else { MAX_RX_FRAME };
                    ring.w16(d + LENGTH, (60 + inp.below(most - 59)) as u16);
                    ring.w32(d + STATUS_ERROR, if jumbo && inp.below(2) == 0 { 0b01 } else { 0b11 });
                }
            }
            3 | 4 => {
                let n = q.rx_burst(&mut pool, &mut batch);
                for &b in batch.as_slice() {
                    for s in pool.segments(b) {
                        assert_eq!(pool.frame_offset(s), RX_FRAME_OFFSET);
                        assert!((1..=MAX_RX_FRAME).contains(&pool.len(s)), "bad length {}", pool.len(s));
                    }
                    assert!(pool.frame_len(b) <= q.max_frame(), "a frame of {} bytes", pool.frame_len(b));
                }
                held.received(&pool, &mut batch, n);
            }
            _ => {
                let n = inp.below(40);
                held.free(&mut pool, n);
                q.fill(&mut pool);
            }
        }
        assert_eq!(pool.in_use(), held.buffers(&pool) + q.posted() + q.receiving(), "a buffer was lost or duplicated");
        assert!(q.posted() < size as usize, "more than size - 1 descriptors posted");
        assert!((tail.r32(0) as usize) < size as usize, "tail outside the ring");
        assert_eq!(pool.double_frees(), 0);
    }
    held.free(&mut pool, usize::MAX);
    q.release(&mut pool);
    assert_eq!(pool.in_use(), 0);
}

/// AF_XDP: the fill/RX/TX/completion rings against the fake kernel, the fuzzer playing the
/// kernel — honest deliveries, transmissions and completions, and arbitrary descriptors,
/// addresses, producer/consumer indices and flags written into the shared rings.
#[cfg(feature = "xsk")]
pub fn xsk(data: &[u8]) {
    use crate::hal::KickError;
    use crate::shm::FakeKick;
    use crate::xsk::model::Kernel;
    use crate::xsk::{XskConfig, try_new_queues};

    const BUFS: usize = 64;
    let mut inp = Input::new(data);
    let sizes = core::array::from_fn(|_| [1u32, 2, 8, 32][inp.below(4)]);
    let start = inp.u32();
    let mut mem = alloc::vec![0u8; BUFS * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, BUFS).expect("pool");
    let mut k = Kernel::new(sizes, start, 0);
    // Half the inputs bind with XDP_USE_SG: frames over several chunks both ways.
    let multi = inp.below(2) == 1;
    k.multi_buffer = multi;
    let longest = if multi { 9100 } else { 1793 };
    let kick = FakeKick::default();
    let config = XskConfig::default().with_multi_buffer(multi).with_max_tx_frame(if multi {
        9018
    } else {
        cadence_core::buf::MAX_FRAME
    });
    let (mut rx, mut tx) = try_new_queues(k.rings(), kick.clone(), &pool, &config).expect("queues");
    let mut held = Held(Vec::new());
    let mut batch = Batch::new();
    let mut seed = 0u32;
    let addr = |inp: &mut Input<'_>| {
        if inp.u8() & 1 == 0 { inp.u64() } else { (inp.below(BUFS + 2) * BUF_SIZE + inp.below(BUF_SIZE + 1)) as u64 }
    };
    while !inp.is_empty() {
        seed = seed.wrapping_add(1);
        match inp.u8() % 16 {
            0 | 1 => {
                let len = inp.below(longest);
                k.deliver(&mut pool, &frame_bytes(seed, len));
            }
            2 => {
                let a = addr(&mut inp);
                let (len, opt) = (inp.u32(), inp.u32() % 3);
                k.rx_raw(a, len, opt);
            }
            3 => k.rx.set_prod(inp.u32()),
            4 => k.fill.set_cons(inp.u32()),
            5 => {
                let n = inp.u8() as usize;
                k.transmit(&mut pool, n);
            }
            6 => {
                let n = inp.u8() as usize;
                k.complete(n);
            }
            7 => {
                let a = addr(&mut inp);
                k.comp_raw(a);
            }
            8 => k.comp.set_prod(inp.u32()),
            9 => k.tx.set_cons(inp.u32()),
            10 => {
                let ring = [&k.fill, &k.rx, &k.tx, &k.comp][inp.below(4)];
                ring.w.w32(ring.off.flags, inp.u32());
            }
            11 => kick.fail_next(if inp.u8() & 1 == 0 { KickError::Gone } else { KickError::Busy }),
            12 => {
                let n = rx.rx_burst(&mut pool, &mut batch);
                for &b in batch.as_slice() {
                    assert!(pool.len(b) >= 14, "runt frame handed out");
                }
                held.received(&pool, &mut batch, n);
            }
            13 => {
                let (n, len) = (inp.below(40), inp.below(longest.max(2100)));
                let mut out = held.to_send(&mut pool, n, len, seed);
                let offered = out.len();
                let taken = tx.tx_burst(&mut pool, &mut out);
                held.unsent(&mut out, offered, taken);
            }
            14 => {
                tx.reclaim(&mut pool);
            }
            _ => {
                let n = inp.below(40);
                held.free(&mut pool, n);
                rx.fill(&mut pool);
            }
        }
        assert_eq!(
            pool.in_use(),
            held.buffers(&pool) + rx.posted() + rx.receiving(&pool) + tx.in_flight(),
            "a buffer was lost or duplicated"
        );
        let (rs, rc) = (rx.rx_stats(), rx.counters());
        assert_eq!(rs.errors, rc.bad_addr + rc.not_owned + rc.bad_len + rc.fragments, "an error went uncounted");
    }
    held.free(&mut pool, usize::MAX);
    rx.drain(&mut pool);
    tx.drain(&mut pool);
    assert_eq!(pool.in_use(), 0);
    assert_eq!(pool.double_frees(), 0);
}

/// `TPACKET_V3`: the RX block ring with the fuzzer writing whole blocks, block headers and
/// packet headers (or real frames through the fake kernel), and the TX frame ring with the
/// fuzzer scribbling slot statuses.
#[cfg(feature = "tpacket")]
pub fn tpacket(data: &[u8]) {
    use crate::shm::{FakeKick, ShmWindow};
    use crate::tpacket::model::{MAC_OFF, RxKernel};
    use crate::tpacket::status::{TP_STATUS_KERNEL, TP_STATUS_USER};
    use crate::tpacket::{RxGeometry, TpacketRx, TpacketTx, TxGeometry, block, pkt};
    use cadence_core::buf::{HEADROOM, MAX_FRAME, MAX_SEGMENTED_FRAME};

    const BUFS: usize = 48;
    let mut inp = Input::new(data);
    let bs = 1usize << (6 + inp.below(7));
    let nr = 1 + inp.below(3);
    let mut k = RxKernel::new(bs, nr);
    let mut rxq = TpacketRx::try_new(k.w.clone(), RxGeometry { block_size: bs, block_nr: nr }).expect("rx");
    let (tbs, tnr, fs) = (4096, 2, 1024);
    let tw = ShmWindow::new(tbs * tnr);
    let geometry = TxGeometry { block_size: tbs, block_nr: tnr, frame_size: fs, frame_nr: 8 };
    let mut txq = TpacketTx::try_new(tw.clone(), FakeKick::default(), geometry, 1514).expect("tx");
    let mut mem = alloc::vec![0u8; BUFS * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, BUFS).expect("pool");
    let mut seed = 0u32;
    while !inp.is_empty() {
        seed = seed.wrapping_add(1);
        let blk = inp.below(nr);
        let base = blk * bs;
        match inp.u8() % 7 {
            0 => {
                let n = inp.below(bs);
                k.w.put(base, inp.bytes(n));
                let st = k.w.r32(base + block::STATUS);
                let user = inp.u8() & 1 == 1;
                k.w.w32(base + block::STATUS, if user { st | TP_STATUS_USER } else { st & !TP_STATUS_USER });
            }
            1 => {
                k.w.w32(base + block::NUM_PKTS, inp.u32() % 8);
                let first = inp.u32();
                k.w.w32(base + block::FIRST, first);
                let mut at = first as usize;
                for _ in 0..inp.below(6) {
                    if !at.is_multiple_of(4) || at < block::HDR_LEN || at + pkt::SIZE > bs {
                        break;
                    }
                    let h = base + at;
                    let next = inp.u32() % 2100;
                    k.w.w32(h + pkt::NEXT_OFFSET, next);
                    k.w.w32(h + pkt::SNAPLEN, inp.u32() % 2100);
                    k.w.w32(h + pkt::LEN, inp.u32());
                    k.w.w32(h + pkt::STATUS, inp.u32());
                    k.w.w16(h + pkt::MAC, inp.u16() % 300);
                    k.w.w32(h + pkt::VLAN_TCI, inp.u32());
                    at = at.saturating_add(next as usize);
                }
                k.w.w32(base + block::STATUS, TP_STATUS_USER);
            }
            2 => {
                for _ in 0..inp.below(6) {
                    seed = seed.wrapping_add(1);
                    let room = bs.saturating_sub(block::HDR_LEN + MAC_OFF + 8);
                    let len = inp.below(1600).min(room);
                    if len > 0 {
                        k.deliver(&frame_bytes(seed, len));
                    }
                }
                k.retire();
            }
            3 | 4 => {
                // A batch that already holds some buffers (any room from 0 to 32).
                let mut batch = Batch::new();
                for _ in 0..inp.below(33) {
                    let Some(d) = pool.alloc() else { break };
                    if let Err(d) = batch.push(d) {
                        let _ = pool.free(d);
                        break;
                    }
                }
                let (pre, before) = (batch.len(), pool.in_use());
                let n = rxq.rx_burst(&mut pool, &mut batch);
                assert_eq!(batch.len(), pre + n);
                // A frame longer than a buffer holds several (each at HEADROOM, each full
                // but the last).
                let held: usize = batch.as_slice()[pre..].iter().map(|&b| pool.segments(b).count()).sum();
                assert_eq!(pool.in_use(), before + held, "a buffer was lost or duplicated");
                for &b in &batch.as_slice()[pre..] {
                    assert!(
                        (14..=MAX_SEGMENTED_FRAME).contains(&pool.frame_len(b)),
                        "bad length {}",
                        pool.frame_len(b)
                    );
                    let segs: Vec<PacketBuf> = pool.segments(b).collect();
                    for (i, &s) in segs.iter().enumerate() {
                        assert_eq!(pool.frame_offset(s), HEADROOM);
                        let full = i + 1 < segs.len();
                        assert!(if full { pool.len(s) == MAX_FRAME } else { (1..=MAX_FRAME).contains(&pool.len(s)) });
                    }
                }
                pool.free_batch(&mut batch);
                let c = rxq.counters();
                assert_eq!(rxq.rx_stats().errors, c.truncated + c.too_long + c.short + c.bad_headers);
                assert!(rxq.current_block() < nr);
            }
            5 => {
                let slot = inp.below(8);
                let off = (slot / 4) * tbs + (slot % 4) * fs;
                tw.w32(off + pkt::STATUS, inp.u32());
            }
            _ => {
                let (n, len) = (inp.below(10), inp.below(1600));
                let mut batch = Batch::new();
                for i in 0..n {
                    let Some(b) = pool.alloc() else { break };
                    let _ = pool.set_len(b, (len + i * 13) % 1600);
                    if let Err(b) = batch.push(b) {
                        let _ = pool.free(b);
                    }
                }
                let offered = batch.len();
                let taken = txq.tx_burst(&mut pool, &mut batch);
                assert_eq!(offered - taken, batch.len());
                pool.free_batch(&mut batch);
                txq.reclaim(&mut pool);
                assert!(txq.in_flight() <= 8);
            }
        }
        // TPACKET copies: the queues own no pool buffer between calls.
        assert_eq!(pool.in_use(), 0, "a buffer was lost");
        assert_eq!(pool.double_frees(), 0);
    }
    for i in 0..8 {
        tw.w32((i / 4) * tbs + (i % 4) * fs + pkt::STATUS, TP_STATUS_KERNEL);
    }
    txq.reclaim(&mut pool);
    assert_eq!(txq.in_flight(), 0);
}
