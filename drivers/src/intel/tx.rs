//! The transmit ring of the Intel NICs (82599 §7.2, 82576 §7.2, XL710 §8.4), as a
//! `cadence_core::nic::TxQueue`, generic over the descriptor format ([`TxFormat`]).
//!
//! One data descriptor per frame. Completion is batched: only the last descriptor of
//! each burst carries RS (report status), so the device writes it back once per
//! burst; [`IntelTx::reclaim`] checks the oldest RS descriptor and, when it is done,
//! frees every buffer up to and including it (the device processes a ring in order).
//! TXDCTL.WTHRESH is 0 (the XL710 writes back every RS descriptor), so each RS
//! descriptor is written back as soon as it is done. Each descriptor is written once:
//! the burst's last one is held back until the burst ends, then written with RS.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::marker::PhantomData;

use cadence_core::buf::{BUF_SIZE, Batch, PacketBuf, Pool};
use cadence_core::nic::{TxQueue, TxStats};

use super::desc::{AdvTx, TxFormat};
use super::rx::{RING_ALIGN, valid_ring_size};
use crate::hal::{Dma, DmaAlloc, DmaError, Mmio};

/// Longest frame taken: anything a pool buffer holds (DTALEN allows 16 KiB).
pub const MAX_TX_FRAME: usize = BUF_SIZE;

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
}

impl<W: Mmio, R: Dma, F: TxFormat> TxQueue for IntelTx<W, R, F> {
    /// Frames shorter than the format's minimum (empty ones at least), and frames over
    /// several buffers (one descriptor per frame here), are refused (freed and counted in
    /// `errors`).
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        self.reclaim(pool);
        let mut taken = 0;
        // The burst's latest descriptor, written once the next one (or the end) shows
        // whether it is the last.
        let mut held: Option<(usize, u64, u16)> = None;
        for &b in batch.as_slice() {
            let len = pool.len(b);
            if len < F::MIN_FRAME.max(1) || len > MAX_TX_FRAME || pool.is_segmented(b) {
                let _ = pool.free(b);
                self.stats.errors += 1;
                taken += 1;
                continue;
            }
            if self.used >= self.size - 1 {
                break;
            }
            let i = self.next as usize;
            if let Some((j, addr, l)) = held.take() {
                F::write(&self.ring, j, addr, l, false);
            }
            held = Some((i, pool.phys(b) + pool.frame_offset(b) as u64, len as u16));
            if let Some(s) = self.slots.get_mut(i) {
                *s = Some(b);
            }
            self.next = (self.next + 1) % self.size;
            self.used += 1;
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
            taken += 1;
        }
        self.stats.ring_full += (batch.len() - taken) as u64;
        batch.drain_front(taken);
        if let Some((i, addr, len)) = held {
            // RS on the burst's last descriptor only: one write-back per burst.
            F::write(&self.ring, i, addr, len, true);
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
