//! Arbitrary bytes where the kernel writes: block headers, packet headers, slot statuses.
//! The queues must not panic (the windows panic on any access outside the ring), must
//! hand out only well-formed frames, and must keep every pool buffer accounted for.

use cadence_core::buf::{BUF_SIZE, Batch, HEADROOM, MAX_FRAME, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, TxQueue};
use proptest::prelude::*;

use super::model::RxKernel;
use super::status::{TP_STATUS_KERNEL, TP_STATUS_USER};
use super::tests::frame_bytes;
use super::{RxGeometry, TpacketRx, TpacketTx, TxGeometry, block, pkt};
use crate::shm::{FakeKick, ShmWindow};

const BUFS: usize = 48;

/// What the kernel writes into a block before handing it over.
#[derive(Debug, Clone)]
enum Fill {
    /// Random bytes over the whole block (the status word forced to USER or not).
    Raw(Vec<u8>, bool),
    /// A plausible header with random numbers, and packet headers with random fields
    /// at the offsets the chain visits.
    Shaped { num: u32, first: u32, pkts: Vec<[u32; 6]> },
    /// Real frames, as the kernel writes them.
    Frames(Vec<u16>),
}

fn fill() -> impl Strategy<Value = Fill> {
    prop_oneof![
        (prop::collection::vec(any::<u8>(), 0..4096), any::<bool>()).prop_map(|(b, u)| Fill::Raw(b, u)),
        (
            prop_oneof![0u32..6, any::<u32>()],
            prop_oneof![(0u32..200).prop_map(|x| x * 4), any::<u32>()],
            prop::collection::vec(prop::array::uniform6(prop_oneof![0u32..300, 0u32..2100, any::<u32>()]), 0..6),
        )
            .prop_map(|(num, first, pkts)| Fill::Shaped { num, first, pkts }),
        prop::collection::vec(0u16..1600, 0..6).prop_map(Fill::Frames),
    ]
}

/// Writes `f` into block `i` the way a (possibly broken) kernel would.
fn write_block(k: &mut RxKernel, i: usize, f: &Fill, seed: &mut u32) {
    let bs = k.block_size;
    let base = i * bs;
    match f {
        Fill::Raw(bytes, user) => {
            let n = bytes.len().min(bs);
            k.w.put(base, &bytes[..n]);
            let st = k.w.r32(base + block::STATUS);
            k.w.w32(base + block::STATUS, if *user { st | TP_STATUS_USER } else { st & !TP_STATUS_USER });
        }
        Fill::Shaped { num, first, pkts } => {
            k.w.w32(base + block::NUM_PKTS, *num);
            k.w.w32(base + block::FIRST, *first);
            // Packet headers along the chain as long as it stays writable.
            let mut at = *first as usize;
            for p in pkts {
                if !at.is_multiple_of(4) || at < block::HDR_LEN || at + pkt::SIZE > bs {
                    break;
                }
                let h = base + at;
                k.w.w32(h + pkt::NEXT_OFFSET, p[0]);
                k.w.w32(h + pkt::SNAPLEN, p[1]);
                k.w.w32(h + pkt::LEN, p[2]);
                k.w.w32(h + pkt::STATUS, p[3]);
                k.w.w16(h + pkt::MAC, p[4] as u16);
                k.w.w32(h + pkt::VLAN_TCI, p[5]);
                at = at.saturating_add(p[0] as usize);
            }
            k.w.w32(base + block::STATUS, TP_STATUS_USER);
        }
        Fill::Frames(lens) => {
            // Only through the model, and only into the block it fills next.
            for &len in lens {
                *seed += 1;
                let len = (len as usize).min(bs.saturating_sub(block::HDR_LEN + super::model::MAC_OFF + 8));
                if len > 0 {
                    k.deliver(&frame_bytes(*seed, len));
                }
            }
            k.retire();
        }
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]

    #[test]
    fn arbitrary_blocks_cannot_break_the_receive_queue(
        block_shift in 6u32..=12,
        block_nr in 1usize..4,
        steps in prop::collection::vec((0usize..4, fill(), 0usize..33), 1..crate::testing::miri_or(24, 6)),
    ) {
        let bs = 1usize << block_shift;
        let mut k = RxKernel::new(bs, block_nr);
        let mut q = TpacketRx::try_new(k.w.clone(), RxGeometry { block_size: bs, block_nr }).unwrap();
        let mut mem = vec![0u8; BUFS * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, BUFS).unwrap();
        let mut seed = 0;
        for (blk, f, pre) in &steps {
            // Real frames go where the model's kernel writes next; hand-made blocks
            // anywhere, also where the driver is reading.
            write_block(&mut k, blk % block_nr, f, &mut seed);
            // A batch that already holds `pre` buffers (any room from 0 to 32).
            let mut batch = Batch::new();
            let dummies: Vec<PacketBuf> = (0..(*pre).min(32)).filter_map(|_| pool.alloc()).collect();
            for &d in &dummies {
                batch.push(d).unwrap();
            }
            let before = pool.in_use();
            let n = q.rx_burst(&mut pool, &mut batch);
            prop_assert_eq!(batch.len(), dummies.len() + n);
            let taken: usize = batch.as_slice()[dummies.len()..].iter().map(|&b| pool.segments(b).count()).sum();
            prop_assert_eq!(pool.in_use(), before + taken);
            for &b in &batch.as_slice()[dummies.len()..] {
                prop_assert_eq!(pool.frame_offset(b), HEADROOM);
                prop_assert!((14..=MAX_FRAME).contains(&pool.len(b)));
            }
            pool.free_batch(&mut batch);
            prop_assert_eq!(pool.in_use(), 0);
            let c = q.counters();
            prop_assert_eq!(q.rx_stats().errors, c.truncated + c.too_long + c.short + c.bad_headers);
            prop_assert!(q.current_block() < block_nr);
        }
        prop_assert_eq!(pool.double_frees(), 0);
    }

    #[test]
    fn arbitrary_slot_statuses_cannot_break_the_transmit_queue(
        ops in prop::collection::vec((0usize..8, any::<u32>(), 0usize..10, 0usize..1600), 1..crate::testing::miri_or(60, 10)),
    ) {
        let (bs, nr, fs) = (4096, 2, 1024);
        let w = ShmWindow::new(bs * nr);
        let kick = FakeKick::default();
        let mut q = TpacketTx::try_new(w.clone(), kick, TxGeometry { block_size: bs, block_nr: nr, frame_size: fs, frame_nr: 8 }, 1514).unwrap();
        let mut mem = vec![0u8; BUFS * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, BUFS).unwrap();
        for (slot, status, frames, len) in &ops {
            // The kernel (or a stray write) scribbles on a slot's status.
            let off = (slot / 4) * bs + (slot % 4) * fs;
            w.w32(off + pkt::STATUS, *status);
            let mut batch = Batch::new();
            for i in 0..*frames {
                let b = pool.alloc().unwrap();
                pool.set_len(b, (*len + i * 13) % 1600).unwrap();
                batch.push(b).unwrap();
            }
            let offered = batch.len();
            let taken = q.tx_burst(&mut pool, &mut batch);
            prop_assert_eq!(offered - taken, batch.len());
            pool.free_batch(&mut batch);
            q.reclaim(&mut pool);
            prop_assert!(q.in_flight() <= 8);
            prop_assert_eq!(pool.in_use(), 0);
        }
        // A kernel that sends everything lets the queue drain completely.
        for i in 0..8 {
            w.w32((i / 4) * bs + (i % 4) * fs + pkt::STATUS, TP_STATUS_KERNEL);
        }
        q.reclaim(&mut pool);
        prop_assert_eq!(q.in_flight(), 0);
        prop_assert_eq!(pool.double_frees(), 0);
    }
}
