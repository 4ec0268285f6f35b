//! The transmit ring of the Intel NICs (82599 §7.2, 82576 §7.2, XL710 §8.4), as a
//! `cadence_core::nic::TxQueue`, generic over the descriptor format ([`TxFormat`]).
//!
//! One data descriptor per buffer of a frame: a frame over several buffers (a jumbo frame)
//! takes one per buffer, EOP on its last (82599 §7.2.1.1, 82576 §7.2.1, XL710 §8.4.2.1); its
//! first buffer's slot holds the frame, which is freed whole. Completion is batched: only the last descriptor of
//! each burst carries RS (report status), so the device writes it back once per
//! burst; [`IntelTx::reclaim`] checks the oldest RS descriptor and, when it is done,
//! frees every buffer up to and including it (the device processes a ring in order).
//! TXDCTL.WTHRESH is 0 (the XL710 writes back every RS descriptor), so each RS
//! descriptor is written back as soon as it is done. Each descriptor is written once:
//! the burst's last one is held back until the burst ends, then written with RS.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::marker::PhantomData;

use cadence_core::buf::{BUF_SIZE, Batch, MAX_SEGMENTED_FRAME, PacketBuf, Pool};
use cadence_core::nic::{TxQueue, TxStats};

use super::desc::{AdvTx, TxFormat, TxPart};
use super::rx::{RING_ALIGN, valid_ring_size};
use crate::hal::{Dma, DmaAlloc, DmaError, Mmio};

/// Longest piece of a frame one descriptor takes: anything a pool buffer holds (DTALEN allows
/// 16 KiB).
pub const MAX_TX_FRAME: usize = BUF_SIZE;
/// Longest frame taken over several buffers: what PAYLEN and the devices' jumbo frames allow
/// (82599 and 82576 9 728 bytes and more; XL710 9 728 by default), at most a pool frame.
pub const MAX_TX_JUMBO: usize = 15 * 1024;
const _: () = assert!(MAX_TX_JUMBO <= MAX_SEGMENTED_FRAME);

/// One transmit queue of an Intel NIC, with descriptors of format `F`.
#[derive(Debug)]
pub struct IntelTx<W, R, F = AdvTx> {
    ring: R,
    tail: W,
    size: u16,
    queue: u16,
    slots: Vec<Option<PacketBuf>>,
    /// Next free descriptor (the tail value).
    next: u16,
    /// Oldest descriptor not yet reclaimed.
    clean: u16,
    /// Descriptors between `clean` and `next`.
    used: u16,
    /// Descriptors carrying RS, oldest first (at most one per burst).
    rs: VecDeque<u16>,
    stats: TxStats,
    _format: PhantomData<fn() -> F>,
}

impl<W: Mmio, R: Dma, F: TxFormat> IntelTx<W, R, F> {
    /// Allocates a ring of `size` descriptors for queue `queue`, tail register `tail`.
    pub(crate) fn try_new<A: DmaAlloc<Region = R>>(
        dma: &mut A,
        size: u16,
        tail: W,
        queue: u16,
    ) -> Result<Self, DmaError> {
        debug_assert!(valid_ring_size(size));
        let ring = dma.alloc(size as usize * F::LEN, RING_ALIGN)?;
        Ok(Self {
            ring,
            tail,
            size,
            queue,
            slots: alloc::vec![None; size as usize],
            next: 0,
            clean: 0,
            used: 0,
            // Allocated once here; never grows past `size` entries afterwards.
            rs: VecDeque::with_capacity(size as usize),
            stats: TxStats::default(),
            _format: PhantomData,
        })
    }

    /// Physical address of the ring.
    pub fn ring_phys(&self) -> u64 {
        self.ring.phys()
    }

    /// Ring bytes (TDLEN).
    pub fn ring_bytes(&self) -> u32 {
        self.size as u32 * F::LEN as u32
    }

    /// Descriptors in the ring.
    pub fn size(&self) -> u16 {
        self.size
    }

    /// The queue's index on its device.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// Descriptors free for new frames.
    pub fn free(&self) -> usize {
        (self.size - 1 - self.used) as usize
    }

    /// The length of the frame over several buffers that starts in `b` and the descriptors it
    /// takes (one a buffer); 0 descriptors when it cannot be sent (an empty buffer or one
    /// longer than a descriptor takes, longer than [`MAX_TX_JUMBO`], or more buffers than the
    /// ring holds).
    fn pieces(&self, pool: &Pool<'_>, b: PacketBuf) -> (usize, usize) {
        let (mut total, mut parts) = (0, 0);
        for s in pool.segments(b) {
            let l = pool.len(s);
            if l == 0 || l > MAX_TX_FRAME {
                return (total, 0);
            }
            total += l;
            parts += 1;
        }
        let fits = total <= MAX_TX_JUMBO && parts < usize::from(self.size);
        (total, if fits { parts } else { 0 })
    }
}

impl<W: Mmio, R: Dma, F: TxFormat> TxQueue for IntelTx<W, R, F> {
    /// Frames shorter than the format's minimum (empty ones at least), with a buffer longer
    /// than a descriptor takes or an empty one after the first, or longer than
    /// [`MAX_TX_JUMBO`] over several, are refused (freed and counted in `errors`).
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        self.reclaim(pool);
        let mut taken = 0;
        // The burst's latest descriptor, written once the next one (or the end) shows
        // whether it is the last.
        let mut held: Option<(usize, u64, u16, TxPart)> = None;
        for &b in batch.as_slice() {
            let len = pool.len(b);
            let (total, parts) = if pool.is_segmented(b) { self.pieces(pool, b) } else { (len, 1) };
            if total < F::MIN_FRAME.max(1) || len > MAX_TX_FRAME || parts == 0 {
                let _ = pool.free(b);
                self.stats.errors += 1;
                taken += 1;
                continue;
            }
            if usize::from(self.used) + parts > usize::from(self.size - 1) {
                break;
            }
            if let Some(s) = self.slots.get_mut(self.next as usize) {
                *s = Some(b);
            }
            let mut put = |q: &mut Self, s: PacketBuf, len: usize, eop: bool| {
                if let Some((j, addr, l, part)) = held.take() {
                    F::write(&q.ring, j, addr, l, part);
                }
                let part = TxPart { total: total as u16, eop, rs: false };
                held = Some((q.next as usize, pool.phys(s) + pool.frame_offset(s) as u64, len as u16, part));
                q.next = (q.next + 1) % q.size;
                q.used += 1;
            };
            if parts == 1 {
                put(self, b, len, true);
            } else {
                for (k, s) in pool.segments(b).enumerate() {
                    put(self, s, pool.len(s), k + 1 == parts);
                }
            }
            self.stats.packets += 1;
            self.stats.bytes += total as u64;
            taken += 1;
        }
        self.stats.ring_full += (batch.len() - taken) as u64;
        batch.drain_front(taken);
        if let Some((i, addr, len, part)) = held {
            // RS on the burst's last descriptor only (a frame's last): one write-back per burst.
            F::write(&self.ring, i, addr, len, TxPart { rs: true, ..part });
            self.rs.push_back(i as u16);
            // 82599 §7.2.3.5.1, XL710 §8.4.2 / Linux's wmb() before the tail write: descriptors (and the
            // frames they point at) must be visible to the device before the tail that
            // hands them over. `dma_wmb` orders every earlier store before the tail store.
            crate::hal::dma_wmb();
            self.tail.write32(0, self.next as u32);
        }
        taken
    }

    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        let mut n = 0;
        while let Some(&i) = self.rs.front() {
            if !F::done(&self.ring, i as usize) {
                break;
            }
            // DD first, then `dma_rmb`: the device is done with every buffer up to `i`.
            crate::hal::dma_rmb();
            loop {
                let c = self.clean;
                if let Some(b) = self.slots.get_mut(c as usize).and_then(Option::take) {
                    // A refused free is counted by the pool.
                    let _ = pool.free(b);
                    n += 1;
                }
                self.clean = (c + 1) % self.size;
                self.used = self.used.saturating_sub(1);
                if c == i {
                    break;
                }
            }
            self.rs.pop_front();
        }
        n
    }

    fn in_flight(&self) -> usize {
        self.used as usize
    }

    fn tx_stats(&self) -> TxStats {
        self.stats
    }
}
