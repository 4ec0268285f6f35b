//! A fake kernel side of an AF_XDP socket, for host tests.
//!
//! It plays the kernel's end of the four rings over [`ShmWindow`]s, with the UMEM being
//! the test's [`Pool`] memory (reached through the pool, as the kernel reaches the
//! registered pages):
//!
//! - [`Kernel::deliver`] takes a fill entry and writes a frame 256 bytes into its chunk,
//!   the way aligned mode does, then publishes an RX descriptor;
//! - [`Kernel::transmit`] consumes TX descriptors, copying the frames out;
//! - [`Kernel::complete`] writes their addresses to the completion ring;
//! - knobs: NEED_WAKEUP on any ring, raw descriptors and indices for the anomaly tests.
//!
//! Things only a broken driver could cause (a fill address of a buffer the pool calls
//! free, a TX descriptor crossing its chunk) are recorded in [`Kernel::violations`].

use std::collections::VecDeque;

use cadence_core::buf::{BUF_SIZE, Pool};

use super::{
    ADDR_ENTRY, RingOffsets, RingWindow, XDP_PACKET_HEADROOM, XDP_PKT_CONTD, XDP_RING_NEED_WAKEUP, XskRings, desc,
};
use crate::shm::ShmWindow;

/// The offsets Linux reports on x86-64 (`struct xdp_ring`: producer, a pad line,
/// consumer and flags on the next line, entries after).
pub(crate) const LINUX_OFFSETS: RingOffsets = RingOffsets { producer: 0, consumer: 128, flags: 132, desc: 192 };

/// One ring as the kernel sees it.
#[derive(Debug, Clone)]
pub(crate) struct KRing {
    pub(crate) w: ShmWindow,
    pub(crate) off: RingOffsets,
    pub(crate) size: u32,
    entry: usize,
}

impl KRing {
    fn new(off: RingOffsets, size: u32, entry: usize, start: u32) -> Self {
        let words_end = off.producer.max(off.consumer).max(off.flags) + 4;
        let w = ShmWindow::new((off.desc + size as usize * entry).max(words_end));
        w.w32(off.producer, start);
        w.w32(off.consumer, start);
        Self { w, off, size, entry }
    }
    pub(crate) fn prod(&self) -> u32 {
        self.w.r32(self.off.producer)
    }
    pub(crate) fn cons(&self) -> u32 {
        self.w.r32(self.off.consumer)
    }
    pub(crate) fn set_prod(&self, v: u32) {
        self.w.w32(self.off.producer, v)
    }
    pub(crate) fn set_cons(&self, v: u32) {
        self.w.w32(self.off.consumer, v)
    }
    /// Entries between consumer and producer.
    pub(crate) fn used(&self) -> u32 {
        self.prod().wrapping_sub(self.cons())
    }
    pub(crate) fn set_need_wakeup(&self, on: bool) {
        self.w.w32(self.off.flags, if on { XDP_RING_NEED_WAKEUP } else { 0 })
    }
    fn slot(&self, idx: u32) -> usize {
        self.off.desc + (idx & (self.size - 1)) as usize * self.entry
    }
    pub(crate) fn window(&self) -> RingWindow<ShmWindow> {
        RingWindow { window: self.w.clone(), offsets: self.off, size: self.size }
    }
}

/// The kernel.
#[derive(Debug)]
pub(crate) struct Kernel {
    pub(crate) fill: KRing,
    pub(crate) rx: KRing,
    pub(crate) tx: KRing,
    pub(crate) comp: KRing,
    /// UMEM address 0 is this pool physical address.
    umem_base: u64,
    /// Where in its chunk a frame is written (XDP_PACKET_HEADROOM + UMEM headroom).
    pub(crate) headroom: usize,
    /// Set NEED_WAKEUP on the fill ring when a frame finds it empty (ZC drivers do).
    pub(crate) fill_wakeup_when_empty: bool,
    /// The socket is bound with `XDP_USE_SG`: a frame longer than a chunk takes several,
    /// `XDP_PKT_CONTD` on all but the last descriptor, on receive and on transmit.
    pub(crate) multi_buffer: bool,
    /// Frames transmitted, in order.
    pub(crate) sent: Vec<Vec<u8>>,
    /// The pieces of a frame being transmitted over several descriptors.
    sending: Vec<u8>,
    /// Addresses transmitted, waiting for the completion ring.
    pending: VecDeque<u64>,
    /// Frames lost for want of a fill entry / RX ring room.
    pub(crate) dropped_no_fill: u64,
    pub(crate) dropped_rx_full: u64,
    pub(crate) violations: Vec<String>,
}

impl Kernel {
    /// Four rings of `sizes` (fill, RX, TX, completion) with Linux's offsets, every index
    /// starting at `start`.
    pub(crate) fn new(sizes: [u32; 4], start: u32, umem_base: u64) -> Self {
        Self::with_offsets(sizes, start, umem_base, LINUX_OFFSETS)
    }

    pub(crate) fn with_offsets(sizes: [u32; 4], start: u32, umem_base: u64, off: RingOffsets) -> Self {
        Self {
            fill: KRing::new(off, sizes[0], ADDR_ENTRY, start),
            rx: KRing::new(off, sizes[1], desc::SIZE, start),
            tx: KRing::new(off, sizes[2], desc::SIZE, start),
            comp: KRing::new(off, sizes[3], ADDR_ENTRY, start),
            umem_base,
            headroom: XDP_PACKET_HEADROOM,
            fill_wakeup_when_empty: false,
            multi_buffer: false,
            sent: Vec::new(),
            sending: Vec::new(),
            pending: VecDeque::new(),
            dropped_no_fill: 0,
            dropped_rx_full: 0,
            violations: Vec::new(),
        }
    }

    /// The windows, as the platform would hand them over.
    pub(crate) fn rings(&self) -> XskRings<ShmWindow> {
        XskRings {
            fill: self.fill.window(),
            rx: self.rx.window(),
            tx: self.tx.window(),
            completion: self.comp.window(),
        }
    }

    /// Entries on the fill ring the kernel has not taken.
    pub(crate) fn fill_level(&self) -> u32 {
        self.fill.used()
    }

    /// Delivers `frame` the way the kernel does in aligned mode: the next fill entry's
    /// chunk gets the frame at `headroom`, an RX descriptor names it. False (and counted)
    /// when the RX ring is full or the fill ring empty.
    pub(crate) fn deliver(&mut self, pool: &mut Pool<'_>, frame: &[u8]) -> bool {
        self.deliver_meta(pool, frame, &[])
    }

    /// [`Kernel::deliver`] with XDP metadata: `meta` goes right in front of the frame, as
    /// `xsk_copy_xdp` puts it.
    pub(crate) fn deliver_meta(&mut self, pool: &mut Pool<'_>, frame: &[u8], meta: &[u8]) -> bool {
        // With multi-buffer, a frame longer than a chunk's room goes over several chunks
        // (the metadata in front of the first); it needs every entry at once.
        let room = BUF_SIZE - self.headroom;
        let pieces: Vec<&[u8]> =
            if self.multi_buffer && frame.len() > room { frame.chunks(room).collect() } else { vec![frame] };
        if self.rx.used().saturating_add(pieces.len() as u32) > self.rx.size {
            self.dropped_rx_full += 1;
            return false;
        }
        let cons = self.fill.cons();
        if self.fill.prod().wrapping_sub(cons) < pieces.len() as u32 {
            self.dropped_no_fill += 1;
            if self.fill_wakeup_when_empty {
                self.fill.set_need_wakeup(true);
            }
            return false;
        }
        for (k, piece) in pieces.iter().enumerate() {
            let cons = self.fill.cons();
            let chunk = self.fill.w.r64(self.fill.slot(cons)) & !(BUF_SIZE as u64 - 1);
            self.fill.set_cons(cons.wrapping_add(1));
            let addr = chunk + self.headroom as u64;
            let Some(b) = pool.handle_at(addr + self.umem_base) else {
                self.violations.push(format!("fill entry {chunk:#x} names no buffer in use"));
                return false;
            };
            if self.headroom + piece.len() > BUF_SIZE {
                self.violations.push("test frame too long for a chunk".into());
                return false;
            }
            pool.raw_mut(b)[self.headroom..self.headroom + piece.len()].copy_from_slice(piece);
            if k == 0 {
                pool.raw_mut(b)[self.headroom - meta.len()..self.headroom].copy_from_slice(meta);
            }
            let options = if k + 1 < pieces.len() { XDP_PKT_CONTD } else { 0 };
            self.rx_raw(addr, piece.len() as u32, options);
        }
        true
    }

    /// Publishes an RX descriptor as given (anomaly tests).
    pub(crate) fn rx_raw(&mut self, addr: u64, len: u32, options: u32) {
        let p = self.rx.prod();
        let e = self.rx.slot(p);
        self.rx.w.w64(e + desc::ADDR, addr);
        self.rx.w.w32(e + desc::LEN, len);
        self.rx.w.w32(e + desc::OPTIONS, options);
        self.rx.set_prod(p.wrapping_add(1));
    }

    /// Consumes up to `max` TX descriptors, copying their frames out of the UMEM. Returns
    /// how many it consumed.
    pub(crate) fn transmit(&mut self, pool: &mut Pool<'_>, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.tx.used() > 0 {
            let c = self.tx.cons();
            let e = self.tx.slot(c);
            let addr = self.tx.w.r64(e + desc::ADDR);
            let len = self.tx.w.r32(e + desc::LEN) as usize;
            let options = self.tx.w.r32(e + desc::OPTIONS);
            self.tx.set_cons(c.wrapping_add(1));
            n += 1;
            let off = (addr % BUF_SIZE as u64) as usize;
            let allowed = if self.multi_buffer { XDP_PKT_CONTD } else { 0 };
            if options & !allowed != 0 || len == 0 || off + len > BUF_SIZE {
                self.violations.push(format!("bad TX descriptor {addr:#x}+{len} options {options}"));
                continue;
            }
            let Some(b) = pool.handle_at(addr + self.umem_base) else {
                self.violations.push(format!("TX descriptor {addr:#x} names no buffer in use"));
                continue;
            };
            self.sending.extend_from_slice(&pool.raw_mut(b)[off..off + len]);
            if options & XDP_PKT_CONTD == 0 {
                self.sent.push(core::mem::take(&mut self.sending));
            }
            self.pending.push_back(addr);
        }
        n
    }

    /// Writes up to `max` sent addresses to the completion ring (as room allows).
    pub(crate) fn complete(&mut self, max: usize) -> usize {
        let mut n = 0;
        while n < max && self.comp.used() < self.comp.size {
            let Some(addr) = self.pending.pop_front() else { break };
            self.comp_raw(addr);
            n += 1;
        }
        n
    }

    /// Sent frames not yet completed.
    pub(crate) fn uncompleted(&self) -> usize {
        self.pending.len()
    }

    /// Publishes a completion entry as given (anomaly tests).
    pub(crate) fn comp_raw(&mut self, addr: u64) {
        let p = self.comp.prod();
        self.comp.w.w64(self.comp.slot(p), addr);
        self.comp.set_prod(p.wrapping_add(1));
    }

    /// The UMEM address of pool byte `phys`.
    pub(crate) fn umem(&self, phys: u64) -> u64 {
        phys - self.umem_base
    }
}
