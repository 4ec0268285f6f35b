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
//! follow the frame start: without jumbo frames the device writes at most the maximum
//! frame size into one buffer (1518 bytes, 1522 with a VLAN tag: 82599 HLREG0.JUMBOEN = 0,
//! 82576 RCTL.LPE = 0, XL710 context RXMAX = 1522), so it never reaches the next buffer.
//! The static assert below pins that.
//!
//! Jumbo frames ([`IntelRx::set_max_frame`] above [`MAX_RX_FRAME`], with the device's long
//! packets on: 82599 HLREG0.JUMBOEN and MAXFRS, 82576 RCTL.LPE and RLPML, XL710 RXMAX): the
//! buffers are then smaller — [`JUMBO_BUF_KIB`] (1 KiB, BSIZEPACKET's granularity; 2 KiB
//! would run 64 bytes past the pool buffer) on the 82599 and 82576, 1 920 bytes (DBUFF's
//! 128-byte units) on the XL710 — and a frame longer than one spans
//! several descriptors, EOP on its last (82599 §7.1.6, 82576 §7.1.5, XL710 §8.3.2.2); the
//! driver chains their buffers into one frame (`Pool::append_segment`), each holding the
//! bytes its write-back's length says.
//!
//! A write-back is handed up only when it is a whole, error-free frame of a plausible
//! length; anything else (error bits, a length of 0 or over the maximum, a frame chained over
//! several descriptors when jumbo frames are off or over more than `buf::MAX_SEGMENTS`) goes
//! straight back on the ring and is counted by reason ([`IntelRx::hw_errors`],
//! [`IntelRx::bad_length`], [`IntelRx::multi_buffer`]).

use alloc::vec::Vec;
use core::marker::PhantomData;

use cadence_core::buf::{BUF_SIZE, Batch, HEADROOM, MAX_SEGMENTS, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, RxStats, WakeAddr};

use super::desc::{AdvRx, RxFormat, RxWriteBack};
use crate::hal::{Dma, DmaAlloc, DmaError, Mmio};

/// Where a received frame starts in its buffer.
pub const RX_FRAME_OFFSET: usize = HEADROOM;
/// Largest frame the device writes with jumbo frames off (1518 + one VLAN tag).
pub const MAX_RX_FRAME: usize = 1522;
/// SRRCTL.BSIZEPACKET in KiB.
pub const RX_BUF_KIB: u32 = 2;
/// SRRCTL.BSIZEPACKET in KiB with jumbo frames: what fits after the frame offset, in whole KiB.
pub const JUMBO_BUF_KIB: u32 = 1;

/// SRRCTL.BSIZEPACKET (KiB) for frames of up to `max_frame` bytes.
pub const fn rx_buf_kib(max_frame: usize) -> u32 {
    if max_frame > MAX_RX_FRAME { JUMBO_BUF_KIB } else { RX_BUF_KIB }
}

/// The longest jumbo frame the ring takes: `buf::MAX_SEGMENTS` buffers of [`JUMBO_BUF_KIB`].
pub const MAX_JUMBO_FRAME: usize = MAX_SEGMENTS * JUMBO_BUF_KIB as usize * 1024;

const _: () = assert!(RX_FRAME_OFFSET + MAX_RX_FRAME <= BUF_SIZE);
const _: () = assert!(RX_BUF_KIB as usize * 1024 <= BUF_SIZE);
const _: () = assert!(RX_FRAME_OFFSET + JUMBO_BUF_KIB as usize * 1024 <= BUF_SIZE);

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
    /// The longest frame taken ([`MAX_RX_FRAME`] unless jumbo frames are on).
    max_frame: usize,
    /// Bytes one buffer takes: [`MAX_RX_FRAME`], or [`JUMBO_BUF_KIB`] with jumbo frames.
    seg_len: usize,
    /// With jumbo frames: the first buffer of the frame whose later descriptors are coming.
    head: Option<PacketBuf>,
    /// Buffers in `head`'s frame.
    held: usize,
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
            max_frame: MAX_RX_FRAME,
            seg_len: MAX_RX_FRAME,
            head: None,
            held: 0,
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

    /// Buffers of a jumbo frame whose last descriptors the device has yet to write back (held
    /// by the queue until then).
    pub fn receiving(&self) -> usize {
        self.head.map_or(0, |_| self.held)
    }

    /// Takes frames of up to `bytes` (at most [`MAX_JUMBO_FRAME`]): above [`MAX_RX_FRAME`],
    /// over several descriptors whose buffers take `buf_bytes` each (at most what follows
    /// the frame offset; the device's SRRCTL, or queue context, must say that size:
    /// [`rx_buf_kib`]). Set before the ring is used.
    pub(crate) fn set_max_frame(&mut self, bytes: usize, buf_bytes: usize) {
        self.max_frame = bytes.clamp(MAX_RX_FRAME, MAX_JUMBO_FRAME);
        let jumbo = self.max_frame > MAX_RX_FRAME;
        self.seg_len = if jumbo { buf_bytes.clamp(1, BUF_SIZE - RX_FRAME_OFFSET) } else { MAX_RX_FRAME };
    }

    /// The longest frame taken.
    pub fn max_frame(&self) -> usize {
        self.max_frame
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

    /// Starts throwing away the frame being received (its buffers up to now back in the pool:
    /// the ring has no free slot for them when they came off it in an earlier burst).
    fn drop_frame(&mut self, pool: &mut Pool<'_>) {
        if let Some(h) = self.head.take() {
            let _ = pool.free(h);
        }
        self.held = 0;
    }

    /// Takes buffer `b` of a jumbo frame over several descriptors (`wb` its write-back):
    /// appended to the frame being received; at EOP the whole frame, if error-free and no
    /// longer than [`Self::max_frame`]. A bad piece (length, or one buffer too many) throws the
    /// frame away, counted once by reason, and its remaining descriptors are recycled.
    fn take_part(&mut self, pool: &mut Pool<'_>, b: PacketBuf, wb: RxWriteBack) -> Option<PacketBuf> {
        if self.discarding {
            self.recycle(pool, b);
            self.discarding = !wb.eop;
            return None;
        }
        let fits = wb.len > 0 && wb.len <= self.seg_len && pool.set_frame(b, RX_FRAME_OFFSET, wb.len).is_ok();
        let linked = fits
            && match self.head {
                None => {
                    self.head = Some(b);
                    true
                }
                Some(h) => pool.append_segment(h, b).is_ok(),
            };
        if !linked {
            self.recycle(pool, b);
            self.drop_frame(pool);
            if fits {
                self.multi_buffer += 1
            } else {
                self.bad_length += 1
            }
            self.stats.errors += 1;
            self.discarding = !wb.eop;
            return None;
        }
        self.held += 1;
        if !wb.eop {
            return None;
        }
        let head = self.head.take()?;
        self.held = 0;
        let long = pool.frame_len(head) > self.max_frame;
        if wb.error || long {
            if wb.error {
                self.hw_errors += 1
            } else {
                self.bad_length += 1
            }
            self.stats.errors += 1;
            let _ = pool.free(head);
            return None;
        }
        Some(head)
    }

    /// Returns every posted buffer to `pool` (the queue must be disabled first).
    pub fn release(&mut self, pool: &mut Pool<'_>) {
        self.drop_frame(pool);
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
            if !wb.eop || self.head.is_some() || self.discarding {
                if self.max_frame > MAX_RX_FRAME {
                    // A jumbo frame over several descriptors.
                    let Some(f) = self.take_part(pool, b, wb) else { continue };
                    let bytes = pool.frame_len(f);
                    if let Err(f) = batch.push(f) {
                        // Cannot happen: the batch had room.
                        let _ = pool.free(f);
                        continue;
                    }
                    self.stats.packets += 1;
                    self.stats.bytes += bytes as u64;
                    n += 1;
                    continue;
                }
                // Jumbo frames off: a frame longer than one buffer is dropped, every piece
                // recycled, counted once.
                if !self.discarding {
                    self.multi_buffer += 1;
                    self.stats.errors += 1;
                }
                self.discarding = !wb.eop;
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
            if len == 0 || len > self.seg_len || pool.set_frame(b, RX_FRAME_OFFSET, len).is_err() {
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
