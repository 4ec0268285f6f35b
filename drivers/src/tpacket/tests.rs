//! The `TPACKET_V3` queues against the fake kernel of [`super::model`].

use cadence_core::buf::{BUF_SIZE, Batch, HEADROOM, MAX_FRAME, MAX_SEGMENTED_FRAME, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, TxQueue};

use super::model::{MAC_OFF, RxKernel, TxKernel};
use super::status::*;
use super::{RxGeometry, TpacketError, TpacketRx, TpacketTx, TxGeometry, block, pkt};
use crate::hal::KickError;
use crate::shm::{FakeKick, SHM_CPU_BASE, ShmWindow};

/// Test frame `seed` of `len` bytes (no 802.1Q TPID at bytes 12..14 unless `len` is tiny).
pub(super) fn frame_bytes(seed: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| (seed as usize).wrapping_mul(31).wrapping_add(i * 7) as u8).collect();
    let n = len.min(4);
    f[..n].copy_from_slice(&seed.to_le_bytes()[..n]);
    if len >= 14 {
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    }
    f
}

/// A frame with an 802.1Q (or `tpid`) tag carrying `tci` after the MAC addresses.
fn tagged(seed: u32, len: usize, tpid: u16, tci: u16) -> Vec<u8> {
    let mut f = frame_bytes(seed, len);
    f[12..14].copy_from_slice(&tpid.to_be_bytes());
    f[14..16].copy_from_slice(&tci.to_be_bytes());
    f[16..18].copy_from_slice(&0x0800u16.to_be_bytes());
    f
}

fn mem(n: usize) -> Vec<u8> {
    vec![0; n * BUF_SIZE]
}

fn rx_pair(block_size: usize, block_nr: usize) -> (RxKernel, TpacketRx<ShmWindow>) {
    let k = RxKernel::new(block_size, block_nr);
    let q = TpacketRx::try_new(k.w.clone(), RxGeometry { block_size, block_nr }).expect("rx");
    (k, q)
}

fn burst(q: &mut TpacketRx<ShmWindow>, pool: &mut Pool<'_>) -> Vec<PacketBuf> {
    let mut batch = Batch::new();
    let n = q.rx_burst(pool, &mut batch);
    assert_eq!(n, batch.len());
    batch.as_slice().to_vec()
}

fn frames(pool: &Pool<'_>, bufs: &[PacketBuf]) -> Vec<Vec<u8>> {
    bufs.iter().map(|&b| pool.frame(b).to_vec()).collect()
}

/// Each frame whole, every buffer of one over several.
fn whole(pool: &Pool<'_>, bufs: &[PacketBuf]) -> Vec<Vec<u8>> {
    bufs.iter()
        .map(|&b| {
            let mut f = vec![0; pool.frame_len(b)];
            assert_eq!(pool.copy_frame(b, &mut f), Some(f.len()));
            f
        })
        .collect()
}

fn free_all(pool: &mut Pool<'_>, bufs: &[PacketBuf]) {
    for &b in bufs {
        pool.free(b).expect("ours");
    }
}

// ---- construction ----

#[test]
fn rx_construction_checks_the_geometry() {
    let w = ShmWindow::new(8192);
    let e = |block_size, block_nr| TpacketRx::try_new(w.clone(), RxGeometry { block_size, block_nr }).unwrap_err();
    assert_eq!(e(4096, 0), TpacketError::NoBlocks);
    assert_eq!(e(32, 1), TpacketError::BadBlockSize(32));
    assert_eq!(e(4100, 1), TpacketError::BlockMisaligned(4100));
    assert_eq!(e(4096, 3), TpacketError::WindowTooSmall { need: 12288, have: 8192 });
    assert_eq!(e(1 << 40, 1), TpacketError::BadBlockSize(1 << 40));
    assert!(!e(4096, 0).to_string().is_empty());
    assert!(TpacketRx::try_new(w.clone(), RxGeometry { block_size: 4096, block_nr: 2 }).is_ok());
    assert!(TpacketRx::try_new(w, RxGeometry { block_size: 48, block_nr: 1 }).is_ok());
}

#[test]
fn tx_construction_checks_the_geometry() {
    let w = ShmWindow::new(8192);
    let e = |block_size, block_nr, frame_size, frame_nr| {
        TpacketTx::try_new(
            w.clone(),
            FakeKick::default(),
            TxGeometry { block_size, block_nr, frame_size, frame_nr },
            1514,
        )
        .unwrap_err()
    };
    assert_eq!(e(4096, 0, 2048, 0), TpacketError::NoBlocks);
    assert_eq!(e(4096, 2, 2040, 4), TpacketError::BadFrameSize(2040));
    assert_eq!(e(4096, 2, 48, 170), TpacketError::BadFrameSize(48));
    assert_eq!(e(1024, 2, 2048, 1), TpacketError::BadBlockSize(1024));
    assert_eq!(e(4104, 2, 2048, 4), TpacketError::BlockMisaligned(4104));
    assert_eq!(e(4096, 2, 2048, 3), TpacketError::FrameCount { frame_nr: 3, slots: 4 });
    assert_eq!(e(4096, 4, 2048, 8), TpacketError::WindowTooSmall { need: 16384, have: 8192 });
    // A slot the kernel (or someone) already uses.
    w.w32(2048 + pkt::STATUS, TP_STATUS_SEND_REQUEST);
    assert_eq!(e(4096, 2, 2048, 4), TpacketError::SlotBusy(1));
    w.w32(2048 + pkt::STATUS, 0);
    let q = TpacketTx::try_new(
        w,
        FakeKick::default(),
        TxGeometry { block_size: 4096, block_nr: 2, frame_size: 2048, frame_nr: 4 },
        9000,
    )
    .unwrap();
    // Limited by the slot: 2048 − 48.
    assert_eq!(q.max_frame(), 2000);
}

// ---- receive ----

#[test]
fn frames_arrive_byte_identical_in_order_across_blocks() {
    let (mut k, mut q) = rx_pair(8192, 4);
    let mut m = mem(256);
    let mut pool = Pool::try_new(&mut m, 0, 256).unwrap();
    let mut want = Vec::new();
    let mut got = Vec::new();
    // 60 frames of 60..1514 bytes: several blocks each round, the ring wraps.
    for round in 0..5u32 {
        for i in 0..12 {
            let seed = round * 12 + i;
            let f = frame_bytes(seed, 60 + (seed as usize * 211) % 1455);
            assert!(k.deliver(&f));
            want.push(f);
        }
        k.retire();
        loop {
            let bufs = burst(&mut q, &mut pool);
            if bufs.is_empty() {
                break;
            }
            got.extend(frames(&pool, &bufs));
            for &b in &bufs {
                assert_eq!(pool.frame_offset(b), HEADROOM);
            }
            free_all(&mut pool, &bufs);
        }
    }
    assert_eq!(got, want);
    let s = q.rx_stats();
    assert_eq!((s.packets, s.errors, s.no_buffer), (60, 0, 0));
    assert_eq!(s.bytes, want.iter().map(|f| f.len() as u64).sum::<u64>());
    // Every block went back; the kernel could fill them all again.
    for i in 0..4 {
        assert_eq!(k.block_status(i), TP_STATUS_KERNEL, "block {i}");
    }
    assert!(q.counters().blocks > 4, "the ring went round");
    assert_eq!((k.dropped, pool.in_use()), (0, 0));
}

#[test]
fn a_full_batch_mid_block_resumes_at_the_next_packet_and_keeps_the_block() {
    let (mut k, mut q) = rx_pair(1 << 16, 2);
    let mut m = mem(128);
    let mut pool = Pool::try_new(&mut m, 0, 128).unwrap();
    for i in 0..45 {
        k.deliver(&frame_bytes(i, 64));
    }
    k.retire();
    let a = burst(&mut q, &mut pool);
    assert_eq!(a.len(), 32);
    // 13 packets left: the block is still the user's.
    assert_eq!(k.block_status(0), TP_STATUS_USER);
    assert_eq!(q.counters().blocks, 0);
    let b = burst(&mut q, &mut pool);
    assert_eq!(b.len(), 13);
    assert_eq!(k.block_status(0), TP_STATUS_KERNEL);
    assert_eq!(q.current_block(), 1);
    let all: Vec<_> = frames(&pool, &a).into_iter().chain(frames(&pool, &b)).collect();
    assert_eq!(all, (0..45).map(|i| frame_bytes(i, 64)).collect::<Vec<_>>());
    // Exactly 32: the block goes back in the same burst as its last packet.
    free_all(&mut pool, &a);
    free_all(&mut pool, &b);
    for i in 0..32 {
        k.deliver(&frame_bytes(100 + i, 64));
    }
    k.retire();
    assert_eq!(burst(&mut q, &mut pool).len(), 32);
    assert_eq!(k.block_status(1), TP_STATUS_KERNEL);
    assert_eq!(q.current_block(), 0);
}

#[test]
fn blocks_are_read_in_ring_order_only() {
    let (k, mut q) = rx_pair(4096, 4);
    let mut m = mem(8);
    let mut pool = Pool::try_new(&mut m, 0, 8).unwrap();
    // Block 1 is handed over but block 0 is not: nothing may be read.
    k.w.w32(4096 + block::STATUS, TP_STATUS_USER);
    k.w.w32(4096 + block::NUM_PKTS, 0);
    assert!(burst(&mut q, &mut pool).is_empty());
    assert_eq!(k.block_status(1), TP_STATUS_USER);
    assert_eq!(q.counters().blocks, 0);
}

#[test]
fn vlan_tags_are_put_back_byte_for_byte() {
    let (mut k, mut q) = rx_pair(8192, 2);
    let mut m = mem(16);
    let mut pool = Pool::try_new(&mut m, 0, 16).unwrap();
    let wire = [
        tagged(1, 100, 0x8100, 0x0123),
        tagged(2, 64, 0x88a8, 0xE00A), // 802.1ad, PCP 7, VID 10
        tagged(3, 1518, 0x8100, 0x0FFF),
        tagged(4, 60, 0x8100, 0x0000), // priority tag
        frame_bytes(5, 60),            // untagged
    ];
    for f in &wire {
        k.deliver(f);
    }
    k.retire();
    let got = burst(&mut q, &mut pool);
    assert_eq!(frames(&pool, &got), wire.to_vec());
    assert_eq!(q.counters().vlan_restored, 4);
    free_all(&mut pool, &got);
    // An old kernel reports no TPID: 802.1Q is assumed.
    k.report_tpid = false;
    let f = tagged(6, 80, 0x8100, 0x0042);
    k.deliver(&f);
    k.retire();
    let got = burst(&mut q, &mut pool);
    assert_eq!(frames(&pool, &got), vec![f]);
    // The kernel's view really was untagged (the test is not vacuous).
    let h = block::HDR_LEN + 8192;
    assert_ne!(k.w.r32(h + pkt::STATUS) & TP_STATUS_VLAN_VALID, 0);
    assert_eq!(k.w.r32(h + pkt::SNAPLEN), 76);
}

#[test]
fn truncated_long_and_short_frames_are_counted_and_skipped() {
    let (mut k, mut q) = rx_pair(65536, 2);
    let mut m = mem(24);
    let mut pool = Pool::try_new(&mut m, 0, 24).unwrap();
    k.snap_cap = Some(1000);
    k.deliver(&frame_bytes(1, 1200)); // cut to 1000: truncated
    k.snap_cap = None;
    k.deliver(&frame_bytes(2, 70)); // fine
    k.deliver(&frame_bytes(3, MAX_FRAME + 1)); // over a buffer: two
    k.deliver(&tagged(4, MAX_FRAME, 0x8100, 5)); // MAX_FRAME − 4 in the ring, MAX_FRAME with its tag back
    k.deliver(&frame_bytes(5, 13)); // shorter than an Ethernet header
    k.deliver(&frame_bytes(6, 80)); // fine
    k.retire();
    let got = burst(&mut q, &mut pool);
    let want =
        vec![frame_bytes(2, 70), frame_bytes(3, MAX_FRAME + 1), tagged(4, MAX_FRAME, 0x8100, 5), frame_bytes(6, 80)];
    assert_eq!(whole(&pool, &got), want);
    assert_eq!(got.iter().map(|&b| pool.is_segmented(b)).collect::<Vec<_>>(), vec![false, true, false, false]);
    let c = q.counters();
    assert_eq!((c.truncated, c.too_long, c.short, c.multi_buffer), (1, 0, 1, 1));
    assert_eq!(q.rx_stats().errors, 2);
    assert_eq!(k.block_status(0), TP_STATUS_KERNEL);
    free_all(&mut pool, &got);
    // A jumbo frame whose tag the kernel took off: the tag back, over five buffers; one
    // longer than a pool frame takes (with its tag back): too long.
    k.deliver(&tagged(7, 9018, 0x8100, 5));
    k.deliver(&tagged(8, MAX_SEGMENTED_FRAME + 1, 0x8100, 5));
    k.retire();
    let got = burst(&mut q, &mut pool);
    assert_eq!(whole(&pool, &got), vec![tagged(7, 9018, 0x8100, 5)]);
    assert_eq!(pool.segments(got[0]).count(), 5);
    let c = q.counters();
    assert_eq!((c.too_long, c.multi_buffer, c.vlan_restored), (1, 2, 2));
    free_all(&mut pool, &got);
    assert_eq!(pool.in_use(), 0);
}

/// A jumbo frame when the pool has fewer free buffers than it spans: dropped and counted as
/// no buffer, nothing taken, the block still goes back.
#[test]
fn a_jumbo_frame_without_enough_buffers_is_dropped_whole() {
    let (mut k, mut q) = rx_pair(65536, 2);
    let mut m = mem(4);
    let mut pool = Pool::try_new(&mut m, 0, 4).unwrap();
    k.deliver(&frame_bytes(1, 9000));
    k.deliver(&frame_bytes(2, 3000));
    k.retire();
    let got = burst(&mut q, &mut pool);
    assert_eq!(whole(&pool, &got), vec![frame_bytes(2, 3000)]);
    assert_eq!((q.rx_stats().no_buffer, pool.in_use()), (1, 2));
    assert_eq!(k.block_status(0), TP_STATUS_KERNEL);
    free_all(&mut pool, &got);
}

#[test]
fn an_empty_pool_drops_and_counts_and_the_block_still_goes_back() {
    let (mut k, mut q) = rx_pair(8192, 2);
    let mut m = mem(4);
    let mut pool = Pool::try_new(&mut m, 0, 4).unwrap();
    for i in 0..6 {
        k.deliver(&frame_bytes(i, 100));
    }
    k.retire();
    let got = burst(&mut q, &mut pool);
    assert_eq!(got.len(), 4);
    assert_eq!(q.rx_stats().no_buffer, 2);
    assert_eq!(q.rx_stats().errors, 0);
    assert_eq!(k.block_status(0), TP_STATUS_KERNEL);
    free_all(&mut pool, &got);
    k.deliver(&frame_bytes(9, 100));
    k.retire();
    let got = burst(&mut q, &mut pool);
    assert_eq!(frames(&pool, &got), vec![frame_bytes(9, 100)]);
}

#[test]
fn the_kernel_losing_frames_is_seen_on_the_next_block() {
    let (mut k, mut q) = rx_pair(4096, 2);
    let mut m = mem(32);
    let mut pool = Pool::try_new(&mut m, 0, 32).unwrap();
    k.deliver(&frame_bytes(1, 1000));
    k.retire();
    k.deliver(&frame_bytes(2, 1000));
    k.retire();
    // Both blocks are the user's: the next frame is lost.
    assert!(!k.deliver(&frame_bytes(3, 1000)));
    let got = burst(&mut q, &mut pool);
    assert_eq!(got.len(), 2);
    free_all(&mut pool, &got);
    k.deliver(&frame_bytes(4, 1000));
    k.retire();
    assert_eq!(burst(&mut q, &mut pool).len(), 1);
    assert_eq!(q.counters().losing, 1);
}

#[test]
fn checksum_not_ready_frames_are_delivered_and_counted() {
    let (mut k, mut q) = rx_pair(4096, 2);
    let mut m = mem(4);
    let mut pool = Pool::try_new(&mut m, 0, 4).unwrap();
    k.csum_not_ready = true;
    k.deliver(&frame_bytes(1, 100));
    k.retire();
    assert_eq!(burst(&mut q, &mut pool).len(), 1);
    assert_eq!(q.counters().csum_not_ready, 1);
}

#[test]
fn a_private_area_moves_the_first_packet() {
    let (mut k, _) = rx_pair(8192, 2);
    k.priv_size = 20;
    let mut q = TpacketRx::try_new(k.w.clone(), RxGeometry { block_size: 8192, block_nr: 2 }).unwrap();
    let mut m = mem(4);
    let mut pool = Pool::try_new(&mut m, 0, 4).unwrap();
    k.deliver(&frame_bytes(1, 100));
    k.retire();
    assert_eq!(k.w.r32(block::FIRST), 48 + 24);
    let got = burst(&mut q, &mut pool);
    assert_eq!(frames(&pool, &got), vec![frame_bytes(1, 100)]);
}

/// Writes a block by hand: `USER`, `num` packets, first at `first`.
fn hand_block(w: &ShmWindow, base: usize, num: u32, first: u32) {
    w.w32(base + block::NUM_PKTS, num);
    w.w32(base + block::FIRST, first);
    w.w32(base + block::STATUS, TP_STATUS_USER);
}

/// Writes a packet header by hand at `base + at`.
fn hand_packet(w: &ShmWindow, base: usize, at: usize, next: u32, mac: u16, snap: u32) {
    let h = base + at;
    w.w32(h + pkt::NEXT_OFFSET, next);
    w.w32(h + pkt::SNAPLEN, snap);
    w.w32(h + pkt::LEN, snap);
    w.w32(h + pkt::STATUS, TP_STATUS_USER);
    w.w16(h + pkt::MAC, mac);
}

#[test]
fn headers_pointing_outside_the_block_are_counted_and_the_block_returned() {
    let bs = 4096;
    let (k, mut q) = rx_pair(bs, 6);
    let mut m = mem(16);
    let mut pool = Pool::try_new(&mut m, 0, 16).unwrap();
    let w = &k.w;
    // Block 0: first packet past the end.
    hand_block(w, 0, 3, bs as u32 - 40);
    // Block 1: a good packet whose tp_next_offset is 0 (would loop forever), then more.
    hand_block(w, bs, 5, 48);
    hand_packet(w, bs, 48, 0, MAC_OFF as u16, 60);
    w.put(bs + 48 + MAC_OFF, &frame_bytes(1, 60));
    // Block 2: data running past the block, then a good packet.
    hand_block(w, 2 * bs, 2, 48);
    hand_packet(w, 2 * bs, 48, 256, 4000, 200);
    hand_packet(w, 2 * bs, 304, 0, MAC_OFF as u16, 60);
    w.put(2 * bs + 304 + MAC_OFF, &frame_bytes(2, 60));
    // Block 3: misaligned and header-overlapping first offsets... the first of them.
    hand_block(w, 3 * bs, 1, 50);
    // Block 4: tp_mac inside the packet header.
    hand_block(w, 4 * bs, 1, 48);
    hand_packet(w, 4 * bs, 48, 0, 8, 60);
    // Block 5: first packet inside the block header.
    hand_block(w, 5 * bs, 1, 8);
    let got = burst(&mut q, &mut pool);
    assert_eq!(frames(&pool, &got), vec![frame_bytes(1, 60), frame_bytes(2, 60)]);
    assert_eq!(q.counters().bad_headers, 6);
    assert_eq!(q.rx_stats().errors, 6);
    for i in 0..6 {
        assert_eq!(k.block_status(i), TP_STATUS_KERNEL, "block {i}");
    }
    assert_eq!(q.current_block(), 0);
}

#[test]
fn wake_address_follows_the_block_waited_for() {
    let (mut k, mut q) = rx_pair(4096, 3);
    let mut m = mem(4);
    let mut pool = Pool::try_new(&mut m, 0, 4).unwrap();
    assert_eq!(q.wake_address().map(|a| a.get()), Some(SHM_CPU_BASE + block::STATUS));
    k.deliver(&frame_bytes(1, 100));
    k.retire();
    let got = burst(&mut q, &mut pool);
    assert_eq!(got.len(), 1);
    free_all(&mut pool, &got);
    assert_eq!(q.wake_address().map(|a| a.get()), Some(SHM_CPU_BASE + 4096 + block::STATUS));
}

// ---- transmit ----

fn tx_pair(
    block_size: usize,
    block_nr: usize,
    frame_size: usize,
) -> (TxKernel, FakeKick, TpacketTx<ShmWindow, FakeKick>) {
    let k = TxKernel::new(block_size, block_nr, frame_size);
    let kick = FakeKick::default();
    let geometry = TxGeometry { block_size, block_nr, frame_size, frame_nr: block_size / frame_size * block_nr };
    let q = TpacketTx::try_new(k.w.clone(), kick.clone(), geometry, 1514).expect("tx");
    (k, kick, q)
}

fn batch_of(pool: &mut Pool<'_>, frames: &[Vec<u8>]) -> Batch {
    let mut batch = Batch::new();
    for f in frames {
        let b = pool.alloc().expect("buffer");
        pool.set_len(b, f.len()).unwrap();
        pool.frame_mut(b).copy_from_slice(f);
        batch.push(b).unwrap();
    }
    batch
}

#[test]
fn tx_frames_go_out_in_order_from_slots_laid_out_block_by_block() {
    // Two 1536-byte slots per 4096-byte block (1024 bytes unused at each block's end).
    let (mut k, kick, mut q) = tx_pair(4096, 3, 1536);
    assert_eq!(q.frame_nr(), 6);
    let mut m = mem(64);
    let mut pool = Pool::try_new(&mut m, 0, 64).unwrap();
    let want: Vec<_> = (0..5).map(|i| frame_bytes(i, 60 + i as usize * 300)).collect();
    let mut batch = batch_of(&mut pool, &want);
    assert_eq!(q.tx_burst(&mut pool, &mut batch), 5);
    // Copied and freed at once; one kick for the burst.
    assert_eq!((pool.in_use(), kick.tx(), q.in_flight()), (0, 1, 5));
    // Slot 3 is the second slot of block 1: at 4096 + 1536, data 48 further.
    assert_eq!(k.w.bytes(4096 + 1536 + 48, want[3].len()), want[3]);
    assert_eq!(k.w.r32(4096 + 1536 + pkt::STATUS), TP_STATUS_SEND_REQUEST);
    assert_eq!(k.w.r32(4096 + 1536 + pkt::LEN), want[3].len() as u32);
    assert_eq!(k.send(), 5);
    assert_eq!(k.sent, want);
    assert_eq!(q.reclaim(&mut pool), 5);
    assert_eq!(q.in_flight(), 0);
    let s = q.tx_stats();
    assert_eq!((s.packets, s.errors, s.ring_full), (5, 0, 0));
    assert_eq!(kick.rx(), 0);
}

/// A frame over several buffers goes out whole from one slot; its buffers are freed at once;
/// one longer than the slot takes is refused whole.
#[test]
fn tx_a_frame_over_several_buffers_goes_out_whole() {
    let mut k = TxKernel::new(65536, 2, 16384);
    k.max_len = 9018; // the interface's MTU of 9000
    let geometry = TxGeometry { block_size: 65536, block_nr: 2, frame_size: 16384, frame_nr: 8 };
    let mut q = TpacketTx::try_new(k.w.clone(), FakeKick::default(), geometry, 9018).expect("tx");
    let mut m = mem(16);
    let mut pool = Pool::try_new(&mut m, 0, 16).unwrap();
    let (jumbo, small, over) = (frame_bytes(1, 9018), frame_bytes(2, 60), frame_bytes(3, 9019));
    let mut batch = Batch::new();
    for f in [&jumbo, &small, &over] {
        batch.push(pool.alloc_frame(f).expect("buffers")).unwrap();
    }
    assert_eq!(q.tx_burst(&mut pool, &mut batch), 3);
    assert_eq!(pool.in_use(), 0, "every buffer freed, the refused frame's too");
    assert_eq!(k.send(), 2);
    assert_eq!(k.sent, vec![jumbo, small]);
    let s = q.tx_stats();
    assert_eq!((s.packets, s.bytes, s.errors), (2, 9078, 1));
}

#[test]
fn tx_slots_wrap_over_many_frames_and_a_full_ring_leaves_the_rest() {
    let (mut k, kick, mut q) = tx_pair(4096, 2, 2048);
    k.async_complete = true;
    let mut m = mem(64);
    let mut pool = Pool::try_new(&mut m, 0, 64).unwrap();
    let mut want = Vec::new();
    let mut seed = 0;
    let mut bursts = 0;
    while seed < 1000 {
        let fs: Vec<_> = (0..6).map(|i| frame_bytes(seed + i, 60 + ((seed + i) as usize % 200))).collect();
        let mut batch = batch_of(&mut pool, &fs);
        let taken = q.tx_burst(&mut pool, &mut batch);
        bursts += 1;
        // Four slots: never more than four in flight; the rest stays in the batch, in order.
        assert!(q.in_flight() <= 4);
        assert_eq!(batch.len(), 6 - taken);
        want.extend(fs[..taken].iter().cloned());
        free_all(&mut pool, batch.as_slice());
        seed += taken as u32;
        k.send();
        // Slots stay SENDING until completed: in flight until then.
        assert_eq!(q.reclaim(&mut pool), 0);
        k.complete(3);
        q.reclaim(&mut pool);
    }
    k.complete(usize::MAX);
    q.reclaim(&mut pool);
    assert_eq!(q.in_flight(), 0);
    assert_eq!(k.sent, want);
    assert!(q.tx_stats().ring_full > 0);
    assert_eq!(kick.tx(), bursts);
    assert_eq!(pool.in_use(), 0);
    assert!(k.violations.is_empty());
}

#[test]
fn tx_refuses_runts_and_oversized_frames() {
    let (mut k, kick, mut q) = tx_pair(8192, 1, 2048);
    let mut m = mem(8);
    let mut pool = Pool::try_new(&mut m, 0, 8).unwrap();
    let mut batch =
        batch_of(&mut pool, &[frame_bytes(1, 13), frame_bytes(2, 1515), frame_bytes(3, 1514), frame_bytes(4, 0)]);
    assert_eq!(q.tx_burst(&mut pool, &mut batch), 4);
    let s = q.tx_stats();
    assert_eq!((s.packets, s.errors), (1, 3));
    assert_eq!(pool.in_use(), 0);
    k.send();
    assert_eq!(k.sent, vec![frame_bytes(3, 1514)]);
    assert_eq!(kick.tx(), 1);
    // A burst that queues nothing does not kick.
    let mut batch = batch_of(&mut pool, &[frame_bytes(5, 3)]);
    q.tx_burst(&mut pool, &mut batch);
    assert_eq!(kick.tx(), 1);
}

#[test]
fn wrong_format_is_counted_and_the_slot_made_available() {
    // The kernel's MTU is smaller than what the driver was told: it refuses the frame.
    let (mut k, _kick, mut q) = tx_pair(8192, 1, 2048);
    k.max_len = 1000;
    let mut m = mem(8);
    let mut pool = Pool::try_new(&mut m, 0, 8).unwrap();
    let mut batch = batch_of(&mut pool, &[frame_bytes(1, 100), frame_bytes(2, 1200), frame_bytes(3, 100)]);
    q.tx_burst(&mut pool, &mut batch);
    // Without PACKET_LOSS the kernel stops at the refused slot.
    assert_eq!(k.send(), 1);
    assert_eq!(k.status(1), TP_STATUS_WRONG_FORMAT);
    assert_eq!(q.reclaim(&mut pool), 2);
    assert_eq!(k.status(1), TP_STATUS_AVAILABLE);
    assert_eq!(q.counters().wrong_format, 1);
    assert_eq!(q.tx_stats().errors, 1);
    assert_eq!(q.in_flight(), 1);
    // With PACKET_LOSS the kernel skips a refused frame itself.
    let (mut k, _kick, mut q) = tx_pair(8192, 1, 2048);
    k.max_len = 1000;
    k.loss = true;
    let mut batch = batch_of(&mut pool, &[frame_bytes(1, 100), frame_bytes(2, 1200), frame_bytes(3, 100)]);
    q.tx_burst(&mut pool, &mut batch);
    assert_eq!(k.send(), 2);
    assert_eq!(q.reclaim(&mut pool), 3);
    assert_eq!(k.sent, vec![frame_bytes(1, 100), frame_bytes(3, 100)]);
    assert_eq!((q.in_flight(), q.counters().wrong_format), (0, 0));
}

#[test]
fn tx_kick_failures_are_counted_and_the_kick_retried() {
    let (mut k, kick, mut q) = tx_pair(8192, 1, 2048);
    let mut m = mem(8);
    let mut pool = Pool::try_new(&mut m, 0, 8).unwrap();
    kick.fail_next(KickError::Busy);
    kick.fail_next(KickError::Other(90));
    let mut batch = batch_of(&mut pool, &[frame_bytes(1, 100)]);
    q.tx_burst(&mut pool, &mut batch); // Busy
    q.reclaim(&mut pool); // Other: still owed
    q.reclaim(&mut pool); // rings
    q.reclaim(&mut pool); // nothing owed: no call
    assert_eq!(kick.tx(), 3);
    let c = q.counters();
    assert_eq!((c.kicks, c.kick_busy, c.kick_errors), (1, 1, 1));
    k.send();
    assert_eq!(k.sent.len(), 1);
    // A failed kick is also retried by the next burst, even one that queues nothing.
    kick.fail_next(KickError::Gone);
    let mut batch = batch_of(&mut pool, &[frame_bytes(2, 100)]);
    q.tx_burst(&mut pool, &mut batch);
    assert_eq!(kick.tx(), 4);
    q.tx_burst(&mut pool, &mut Batch::new());
    assert_eq!(kick.tx(), 5);
    q.tx_burst(&mut pool, &mut Batch::new());
    assert_eq!(kick.tx(), 5);
    assert_eq!(q.counters().kick_errors, 2);
}

// ---- arrival stamps ----

#[test]
fn arrival_stamps_come_from_the_packet_header_time() {
    use cadence_core::time::ClockMap;
    let mut m = mem(16);
    let mut pool = Pool::try_new(&mut m, 0, 16).unwrap();
    let (mut k, q) = rx_pair(4096, 2);
    let mut q = q.with_arrival(Some(ClockMap::identity()));
    assert!(q.stamps_arrival());
    k.time = (5, 250);
    assert!(k.deliver(&frame_bytes(1, 60)));
    // No time in the header: unstamped.
    k.time = (0, 0);
    assert!(k.deliver(&frame_bytes(2, 60)));
    k.time = (7, 999_999_999);
    assert!(k.deliver(&frame_bytes(3, 60)));
    k.retire();
    let got = burst(&mut q, &mut pool);
    let stamps: Vec<u64> = got.iter().map(|&b| pool.stamp(b)).collect();
    assert_eq!(stamps, [5_000_000_250, 0, 7_999_999_999]);
    assert_eq!((q.counters().stamped, q.counters().unstamped), (2, 1));
    free_all(&mut pool, &got);
    // Without a map: no stamps, nothing counted.
    let (mut k2, mut plain) = rx_pair(4096, 2);
    assert!(!plain.stamps_arrival());
    assert!(k2.deliver(&frame_bytes(1, 60)));
    k2.retire();
    let got = burst(&mut plain, &mut pool);
    assert_eq!(pool.stamp(got[0]), 0);
    assert_eq!(plain.counters().stamped + plain.counters().unstamped, 0);
    free_all(&mut pool, &got);
}
