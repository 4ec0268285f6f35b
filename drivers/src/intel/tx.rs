//! The advanced-descriptor transmit ring (82599 §7.2, 82576 §7.2), as a
//! `cadence_core::nic::TxQueue`.
//!
//! One data descriptor per frame. Completion is batched: only the last descriptor of
//! each burst carries RS (report status), so the device writes DD back once per
//! burst; [`IntelTx::reclaim`] checks the DD bit of the oldest RS descriptor and, when
//! it is set, frees every buffer up to and including it (the device processes a
//! ring in order). TXDCTL.WTHRESH is 0, so each RS descriptor is written back as soon
//! as it is done.

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use core::sync::atomic::{Ordering, fence};

use cadence_core::buf::{BUF_SIZE, Batch, PacketBuf, Pool};
use cadence_core::nic::{TxQueue, TxStats};

use super::desc::{DESC_LEN, tx, tx_cmd_type_len, tx_olinfo};
use super::rx::{RING_ALIGN, valid_ring_size};
use crate::hal::{Dma, DmaAlloc, DmaError, Mmio};

/// Longest frame taken: anything a pool buffer holds (DTALEN allows 16 KiB).
pub const MAX_TX_FRAME: usize = BUF_SIZE;

/// One transmit queue of an Intel NIC.
#[derive(Debug)]
pub struct IntelTx<W, R> {
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
}

impl<W: Mmio, R: Dma> IntelTx<W, R> {
    /// Allocates a ring of `size` descriptors for queue `queue`, tail register `tail`.
    pub(crate) fn try_new<A: DmaAlloc<Region = R>>(
        dma: &mut A,
        size: u16,
        tail: W,
        queue: u16,
    ) -> Result<Self, DmaError> {
        debug_assert!(valid_ring_size(size));
        let ring = dma.alloc(size as usize * DESC_LEN, RING_ALIGN)?;
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
        })
    }

    /// Physical address of the ring.
    pub fn ring_phys(&self) -> u64 {
        self.ring.phys()
    }

    /// Ring bytes (TDLEN).
    pub fn ring_bytes(&self) -> u32 {
        self.size as u32 * DESC_LEN as u32
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

impl<W: Mmio, R: Dma> TxQueue for IntelTx<W, R> {
    /// Empty frames are refused (freed and counted in `errors`).
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        self.reclaim(pool);
        let mut taken = 0;
        let mut last = None;
        for &b in batch.as_slice() {
            let len = pool.len(b);
            if len == 0 || len > MAX_TX_FRAME {
                let _ = pool.free(b);
                self.stats.errors += 1;
                taken += 1;
                continue;
            }
            if self.used >= self.size - 1 {
                break;
            }
            let i = self.next as usize;
            let d = i * DESC_LEN;
            self.ring.write64(d + tx::BUFFER_ADDR, pool.phys(b) + pool.frame_offset(b) as u64);
            self.ring.write32(d + tx::CMD_TYPE_LEN, tx_cmd_type_len(len as u16, false));
            self.ring.write32(d + tx::OLINFO_STATUS, tx_olinfo(len as u16));
            if let Some(s) = self.slots.get_mut(i) {
                *s = Some(b);
            }
            last = Some((i, len as u16));
            self.next = (self.next + 1) % self.size;
            self.used += 1;
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
            taken += 1;
        }
        self.stats.ring_full += (batch.len() - taken) as u64;
        batch.drain_front(taken);
        if let Some((i, len)) = last {
            // RS on the burst's last descriptor only: one DD write-back per burst.
            self.ring.write32(i * DESC_LEN + tx::CMD_TYPE_LEN, tx_cmd_type_len(len, true));
            self.rs.push_back(i as u16);
            // 82599 §7.2.3.5.1 / Linux's wmb() before the tail write: descriptors (and the
            // frames they point at) must be visible to the device before the tail that
            // hands them over. Release orders every earlier store before the tail store.
            fence(Ordering::Release);
            self.tail.write32(0, self.next as u32);
        }
        taken
    }

    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        let mut n = 0;
        while let Some(&i) = self.rs.front() {
            let status = self.ring.read32(i as usize * DESC_LEN + tx::OLINFO_STATUS);
            if !tx::DD.is_set(status) {
                break;
            }
            // DD first, then Acquire: the device is done with every buffer up to `i`.
            fence(Ordering::Acquire);
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
