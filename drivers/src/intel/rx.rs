//! The receive ring of the Intel NICs (82599 §7.1, 82576 §7.1, XL710 §8.3), as a
//! `cadence_core::nic::RxQueue`, generic over the descriptor format ([`RxFormat`]:
//! 16-byte advanced descriptors, the XL710's 32-byte ones).
//!
//! Ring indices: the device owns the descriptors from its head (RDH) up to the tail
//! (RDT, exclusive); the driver owns the rest. `clean` is the next descriptor the
//! driver checks for DD, `fill` the next one it posts a buffer to (and the tail value
//! it shows the device). At most `size - 1` descriptors are posted: head == tail
//! means "empty" to the device.
//!
//! Frames land [`RX_FRAME_OFFSET`] bytes into their buffer. SRRCTL.BSIZEPACKET (the
//! XL710 context's DBUFF) says 2 KiB although only `BUF_SIZE - HEADROOM` = 1984 bytes
//! follow the frame start: the device writes at most the maximum frame size into one
//! buffer (1518 bytes, 1522 with a VLAN tag — jumbo frames stay off, 82599
//! HLREG0.JUMBOEN = 0, 82576 RCTL.LPE = 0, XL710 context RXMAX = 1522), so it never
//! reaches the next buffer. The static assert below pins that.
//!
//! A write-back is handed up only when it is one whole, error-free frame of a plausible
//! length; anything else (error bits, a length of 0 or over [`MAX_RX_FRAME`], a frame
//! chained over several descriptors) goes straight back on the ring and is counted by
//! reason ([`IntelRx::hw_errors`], [`IntelRx::bad_length`], [`IntelRx::multi_buffer`]).

use alloc::vec::Vec;
use core::marker::PhantomData;

use cadence_core::buf::{BUF_SIZE, Batch, HEADROOM, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, RxStats, WakeAddr};

use super::desc::{AdvRx, RxFormat};
use crate::hal::{Dma, DmaAlloc, DmaError, Mmio};

/// Where a received frame starts in its buffer.
pub const RX_FRAME_OFFSET: usize = HEADROOM;
/// Largest frame the device writes with jumbo frames off (1518 + one VLAN tag).
pub const MAX_RX_FRAME: usize = 1522;
/// SRRCTL.BSIZEPACKET in KiB.
pub const RX_BUF_KIB: u32 = 2;

const _: () = assert!(RX_FRAME_OFFSET + MAX_RX_FRAME <= BUF_SIZE);
const _: () = assert!(RX_BUF_KIB as usize * 1024 <= BUF_SIZE);

/// Ring alignment: the datasheets ask for 128 bytes; a page keeps a ring off other
/// allocations' cache lines.
pub(crate) const RING_ALIGN: usize = 4096;

/// Whether `size` descriptors make a valid ring: RDLEN/TDLEN must be a multiple of 128
/// bytes (8 descriptors), at most 8192 descriptors (82599 §8.2.3.8.3), at least 16.
pub const fn valid_ring_size(size: u16) -> bool {
    size >= 16 && size <= 8192 && size.is_multiple_of(8)
}

/// One receive queue of an Intel NIC, with descriptors of format `F`.
#[derive(Debug)]
pub struct IntelRx<W, R, F = AdvRx> {
    ring: R,
    tail: W,
    size: u16,
    queue: u16,
    slots: Vec<Option<PacketBuf>>,
    clean: u16,
    fill: u16,
    posted: u16,
    published: u16,
    /// Inside a multi-descriptor frame whose buffers are being dropped.
    discarding: bool,
    stats: RxStats,
    multi_buffer: u64,
    hw_errors: u64,
    bad_length: u64,
    _format: PhantomData<fn() -> F>,
}

impl<W: Mmio, R: Dma, F: RxFormat> IntelRx<W, R, F> {
    /// Allocates a ring of `size` descriptors (see [`valid_ring_size`]) for queue `queue`
    /// whose tail register is the 4-byte window `tail`.
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
            clean: 0,
            fill: 0,
            posted: 0,
            published: 0,
            discarding: false,
            stats: RxStats::default(),
            multi_buffer: 0,
            hw_errors: 0,
            bad_length: 0,
            _format: PhantomData,
        })
    }

    /// Physical address of the ring.
    pub fn ring_phys(&self) -> u64 {
        self.ring.phys()
    }

    /// Ring bytes (RDLEN).
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

    /// Buffers the device may fill now.
    pub fn posted(&self) -> usize {
        self.posted as usize
    }

    /// Frames that spanned several descriptors (dropped, buffers recycled).
    pub fn multi_buffer(&self) -> u64 {
        self.multi_buffer
    }

    /// Frames the device flagged with an error bit (dropped, buffer recycled).
    pub fn hw_errors(&self) -> u64 {
        self.hw_errors
    }

    /// Write-backs with a length of 0 or over [`MAX_RX_FRAME`] (dropped, buffer
    /// recycled).
    pub fn bad_length(&self) -> u64 {
        self.bad_length
    }

    /// Writes `b` into descriptor `fill` in read format and hands the slot over
    /// (the tail write in [`Self::publish`] shows it to the device). The caller
    /// checked that a slot is free.
    fn post(&mut self, pool: &Pool<'_>, b: PacketBuf) {
        let i = self.fill as usize;
        // No header buffer: this also clears the DD bit a previous write-back left in
        // the same bytes, so the driver cannot mistake the slot for a done one.
        F::post(&self.ring, i, pool.phys(b) + RX_FRAME_OFFSET as u64);
        if let Some(s) = self.slots.get_mut(i) {
            *s = Some(b);
        }
        self.fill = (self.fill + 1) % self.size;
        self.posted += 1;
    }

    /// Posts buffers from `pool` until the ring is full (without a tail write).
    /// Counts a shortage in `no_buffer`. Returns how many it posted.
    pub(crate) fn refill(&mut self, pool: &mut Pool<'_>) -> usize {
        let mut n = 0;
        while self.posted < self.size - 1 {
            let Some(b) = pool.alloc() else {
                self.stats.no_buffer += 1;
                break;
            };
            self.post(pool, b);
            n += 1;
        }
        n
    }

    /// Shows the device every descriptor posted since the last call (a tail write).
    pub(crate) fn publish(&mut self) {
        // Formats that fetch in groups see the tail rounded down to a group; the
        // descriptors past it stay posted and show with a later tail.
        let tail = self.fill - self.fill % F::TAIL_STEP.max(1);
        if tail == self.published {
            return;
        }
        // 82599 §7.1.9 / §7.2.3.5.1, XL710 §8.3.2.1 (and Linux's wmb() before every tail write): the
        // descriptor writes must be globally visible before the tail write that hands
        // them to the device. `dma_wmb` orders them (and any buffer writes) before it.
        crate::hal::dma_wmb();
        self.tail.write32(0, tail as u32);
        self.published = tail;
    }

    /// Tops the ring up from `pool` and shows the new descriptors to the device (one
    /// tail write). The queue must be enabled (its ENABLE bit read back). Returns how
    /// many buffers it posted.
    pub fn fill(&mut self, pool: &mut Pool<'_>) -> usize {
        let n = self.refill(pool);
        self.publish();
        n
    }

    /// Drops a received buffer by posting it again (the slot it left is free).
    fn recycle(&mut self, pool: &Pool<'_>, b: PacketBuf) {
        self.post(pool, b);
    }

    /// Returns every posted buffer to `pool` (the queue must be disabled first).
    pub fn release(&mut self, pool: &mut Pool<'_>) {
        for s in self.slots.iter_mut() {
            if let Some(b) = s.take() {
                let _ = pool.free(b);
            }
        }
        self.posted = 0;
    }
}

impl<W: Mmio, R: Dma, F: RxFormat> RxQueue for IntelRx<W, R, F> {
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let mut n = 0;
        while batch.room() > 0 && self.posted > 0 {
            let i = self.clean as usize;
            if !F::done(&self.ring, i) {
                break;
            }
            // The device writes the descriptor body before DD (82599 §7.1.6.2: "DD is
            // set ... after the data and the descriptor were written"): DD first, then
            // `dma_rmb`, then the length and the buffer.
            crate::hal::dma_rmb();
            let wb = F::writeback(&self.ring, i);
            let slot = self.slots.get_mut(i).and_then(Option::take);
            self.clean = (self.clean + 1) % self.size;
            self.posted -= 1;
            let Some(b) = slot else {
                // Cannot happen: every posted slot holds a buffer.
                self.hw_errors += 1;
                continue;
            };
            if !wb.eop {
                // A frame longer than one buffer: drop every piece, count it once at EOP.
                self.discarding = true;
                self.recycle(pool, b);
                continue;
            }
            if self.discarding {
                self.discarding = false;
                self.multi_buffer += 1;
                self.stats.errors += 1;
                self.recycle(pool, b);
                continue;
            }
            if wb.error {
                self.hw_errors += 1;
                self.stats.errors += 1;
                self.recycle(pool, b);
                continue;
            }
            let len = wb.len;
            if len == 0 || len > MAX_RX_FRAME || pool.set_frame(b, RX_FRAME_OFFSET, len).is_err() {
                self.bad_length += 1;
                self.stats.errors += 1;
                self.recycle(pool, b);
                continue;
            }
            if let Err(b) = batch.push(b) {
                // Cannot happen: the batch had room.
                self.recycle(pool, b);
                continue;
            }
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
            n += 1;
        }
        self.refill(pool);
        // One tail write per burst, for recycled and refilled descriptors together.
        self.publish();
        n
    }

    fn rx_stats(&self) -> RxStats {
        self.stats
    }

    /// The DD word of the next descriptor the driver will look at: the device writes it
    /// last when it hands that descriptor back (the write-back of the next frame).
    /// `None` with nothing posted (no write will come) or when the ring memory has no
    /// CPU address (device models).
    fn wake_address(&self) -> Option<WakeAddr> {
        if self.posted == 0 {
            return None;
        }
        self.ring.cpu_address(self.clean as usize * F::LEN + F::DONE_WORD).map(WakeAddr::new)
    }

    /// Posted descriptors written back (DD set) from the next one the driver looks at, in
    /// ring order: one read per waiting frame, at most the ring.
    fn pending(&self) -> Option<usize> {
        let size = usize::from(self.size).max(1);
        let clean = usize::from(self.clean);
        Some((0..usize::from(self.posted)).take_while(|j| F::done(&self.ring, (clean + j) % size)).count())
    }
}
