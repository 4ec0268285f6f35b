//! Receive and transmit queues of a virtio-net device (virtio 1.2 §5.1.6), as
//! `cadence_core::nic` queues.
//!
//! Every packet travels with a 12-byte `struct virtio_net_hdr` in front of it (§5.1.6:
//! with `VIRTIO_F_VERSION_1` the header always has `num_buffers`, so it is 12 bytes;
//! no offloads are negotiated, so it is all zeros on transmit). It lives in the buffer's
//! headroom, so frames are never copied:
//!
//! ```text
//! buffer: | headroom ... | virtio_net_hdr (12) | frame ...              |
//!         0              HEADROOM-12           HEADROOM (RX frames start here)
//! ```
//!
//! Frames longer than a buffer (jumbo frames; `Config::max_frame`):
//! - on receive, with `VIRTIO_NET_F_MRG_RXBUF` negotiated (§5.1.6.4), the device spreads a
//!   packet over `num_buffers` receive buffers, each its own used entry, the header (with
//!   `num_buffers`) only in the first; the others hold data from their descriptor's start
//!   (`HEADROOM - 12`). The driver chains them into one frame (`Pool::append_segment`). A
//!   packet whose buffers have not all been used yet waits in the queue for the next burst.
//!   Without it, `num_buffers` is not read and a packet is one buffer.
//! - on transmit, a frame over several buffers is one descriptor chain: the header and the
//!   first buffer's bytes, then each further buffer's (§2.7.5).

use cadence_core::buf::{BUF_SIZE, Batch, HEADROOM, MAX_SEGMENTS, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, RxStats, TxQueue, TxStats, WakeAddr};

use super::queue::{DESC_F_WRITE, SplitQueue};
use crate::hal::{Dma, Mmio};

/// Bytes of `struct virtio_net_hdr` with `VIRTIO_F_VERSION_1` (§5.1.6).
pub const NET_HDR_LEN: usize = 12;
/// Where an RX buffer's descriptor starts: the header lands just before `HEADROOM`.
const RX_DESC_OFFSET: usize = HEADROOM - NET_HDR_LEN;
/// Bytes an RX descriptor offers the device: header plus the rest of the buffer.
/// §5.1.6.3.1 asks for at least 1526 bytes without `MRG_RXBUF`/GSO; this is 1996.
const RX_DESC_LEN: usize = BUF_SIZE - RX_DESC_OFFSET;

/// Where `num_buffers` sits in the header (§5.1.6: `le16 num_buffers` after `le16
/// csum_offset`), as an offset in the buffer.
const NUM_BUFFERS_AT: usize = RX_DESC_OFFSET + 10;
/// The longest frame one receive buffer takes: what its descriptor offers, less the header.
pub const MAX_ONE_BUFFER_FRAME: usize = RX_DESC_LEN - NET_HDR_LEN;
/// The longest frame received with `MRG_RXBUF`: [`MAX_SEGMENTS`] buffers, less the header.
pub const MAX_MERGED_FRAME: usize = MAX_SEGMENTS * RX_DESC_LEN - NET_HDR_LEN;

const _: () = assert!(HEADROOM >= NET_HDR_LEN);
const _: () = assert!(RX_DESC_LEN >= 1526);

/// Writes the queue's index to its doorbell if the device wants a notification
/// (§4.1.5.2: "the driver sends an available buffer notification to the device by
/// writing the 16-bit virtqueue index of this virtqueue to the Queue Notify address").
fn kick<R: Dma, W: Mmio>(vq: &mut SplitQueue<R>, doorbell: &W, index: u16) {
    // `publish` ends with the full barrier (`dma_mb`) of §2.7.13, so the doorbell write below is
    // ordered after the avail idx store.
    if vq.publish() {
        doorbell.write16(0, index);
    }
}

/// A packet over several receive buffers (`MRG_RXBUF`) whose buffers are still coming.
#[derive(Debug, Clone, Copy)]
struct Merging {
    /// Its first buffer, with those after it appended; `None` for a packet being thrown
    /// away (a bad `num_buffers` or a bad buffer), whose remaining buffers are recycled.
    head: Option<PacketBuf>,
    /// Buffers still to come.
    left: u16,
}

/// One receive virtqueue (virtqueue `2n` for queue pair `n`, §5.1.2).
#[derive(Debug)]
pub struct VirtioRx<W, R> {
    vq: SplitQueue<R>,
    doorbell: W,
    index: u16,
    stats: RxStats,
    /// `VIRTIO_NET_F_MRG_RXBUF` was negotiated: a packet may span several buffers.
    mergeable: bool,
    /// The packet being put together from several buffers, with `mergeable`.
    merging: Option<Merging>,
    /// Buffers held in `merging.head`.
    merged: usize,
}

impl<W: Mmio, R: Dma> VirtioRx<W, R> {
    pub(crate) fn new(vq: SplitQueue<R>, doorbell: W, index: u16, mergeable: bool) -> Self {
        Self { vq, doorbell, index, stats: RxStats::default(), mergeable, merging: None, merged: 0 }
    }

    /// The virtqueue index.
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Ring entries.
    pub fn size(&self) -> u16 {
        self.vq.size()
    }

    /// Buffers posted to the device, and those of a packet whose last buffers the device
    /// has yet to use (`MRG_RXBUF`).
    pub fn posted(&self) -> usize {
        self.vq.in_flight() + self.merged
    }

    /// Posts `b` as one device-writable descriptor so that the header lands at
    /// `HEADROOM - 12` and the frame at `HEADROOM`. Gives `b` back if the ring is full.
    fn post(&mut self, pool: &Pool<'_>, b: PacketBuf) -> Result<(), PacketBuf> {
        let addr = pool.phys(b) + RX_DESC_OFFSET as u64;
        self.vq.push(addr, RX_DESC_LEN as u32, DESC_F_WRITE, b)
    }

    /// Tops the ring up from `pool` (without notifying). Counts a shortage in
    /// `no_buffer`. Returns how many buffers it posted.
    fn refill(&mut self, pool: &mut Pool<'_>) -> usize {
        let mut n = 0;
        while self.vq.num_free() > 0 {
            let Some(b) = pool.alloc() else {
                self.stats.no_buffer += 1;
                break;
            };
            if let Err(b) = self.post(pool, b) {
                // Cannot happen (a descriptor is free); never leak the buffer anyway.
                let _ = pool.free(b);
                break;
            }
            n += 1;
        }
        n
    }

    /// Fills the ring from `pool` and notifies the device. Returns how many buffers
    /// it posted. The device must be live (`DRIVER_OK`, §3.1.1).
    pub fn fill(&mut self, pool: &mut Pool<'_>) -> usize {
        let n = self.refill(pool);
        kick(&mut self.vq, &self.doorbell, self.index);
        n
    }

    /// Puts an errored frame's buffer straight back on the ring (or in the pool if it
    /// does not fit, which cannot happen right after it came off the ring), counted in
    /// `errors`.
    fn recycle(&mut self, pool: &mut Pool<'_>, b: PacketBuf) {
        self.stats.errors += 1;
        self.repost(pool, b);
    }

    /// Puts a buffer straight back on the ring (or in the pool), uncounted.
    fn repost(&mut self, pool: &mut Pool<'_>, b: PacketBuf) {
        if let Err(b) = self.post(pool, b) {
            let _ = pool.free(b);
        }
    }
}

impl<W: Mmio, R: Dma> VirtioRx<W, R> {
    /// Takes one buffer's used entry as a whole frame (`len`: bytes written, header
    /// included) and puts it in `batch`; an error recycles the buffer.
    fn take_one(&mut self, pool: &mut Pool<'_>, batch: &mut Batch, b: PacketBuf, len: usize) -> bool {
        // Only what cannot be a frame in this buffer is an error here: a write shorter
        // than the header, or longer than the descriptor. A runt Ethernet frame is
        // passed up, so the parser drops and counts it by reason like any bad frame.
        if !(NET_HDR_LEN..=RX_DESC_LEN).contains(&len) || pool.set_frame(b, HEADROOM, len - NET_HDR_LEN).is_err() {
            self.recycle(pool, b);
            return false;
        }
        self.deliver(pool, batch, b)
    }

    /// Puts the frame that starts in `b` in `batch` and counts it.
    fn deliver(&mut self, pool: &mut Pool<'_>, batch: &mut Batch, b: PacketBuf) -> bool {
        let len = pool.frame_len(b);
        if let Err(b) = batch.push(b) {
            // Cannot happen (the batch had room); recycle rather than leak.
            pool.trim_segments(b);
            self.recycle(pool, b);
            return false;
        }
        self.stats.packets += 1;
        self.stats.bytes += len as u64;
        true
    }

    /// Takes one used buffer with `MRG_RXBUF` (`len`: bytes the device wrote into it):
    /// the first of a packet (its header says how many buffers it spans) or the next of
    /// the one being put together; a whole packet goes to `batch`. A packet with a bad
    /// buffer count (0 or over [`MAX_SEGMENTS`]) or a bad buffer is thrown away whole,
    /// each of its buffers recycled, counted once in `errors`.
    fn take_merged(&mut self, pool: &mut Pool<'_>, batch: &mut Batch, b: PacketBuf, len: usize) -> bool {
        let Some(m) = self.merging.take() else {
            // The first buffer: the header is in it.
            if !(NET_HDR_LEN..=RX_DESC_LEN).contains(&len) {
                // No trustworthy count: the buffers after it, if any, start packets of their
                // own and are judged as such.
                self.recycle(pool, b);
                return false;
            }
            let at = pool.raw_mut(b).get(NUM_BUFFERS_AT..NUM_BUFFERS_AT + 2).map(|n| u16::from_le_bytes([n[0], n[1]]));
            let n = at.unwrap_or(0);
            if n == 1 {
                return self.take_one(pool, batch, b, len);
            }
            if n == 0 || usize::from(n) > MAX_SEGMENTS || pool.set_frame(b, HEADROOM, len - NET_HDR_LEN).is_err() {
                self.recycle(pool, b);
                self.merging = (n > 1).then(|| Merging { head: None, left: n - 1 });
                return false;
            }
            self.merging = Some(Merging { head: Some(b), left: n - 1 });
            self.merged = 1;
            return false;
        };
        let left = m.left.saturating_sub(1);
        let Some(head) = m.head else {
            // A packet being thrown away: its buffers go back on the ring uncounted.
            self.repost(pool, b);
            self.merging = (left > 0).then_some(Merging { head: None, left });
            return false;
        };
        // A buffer after the first: data from the descriptor's start, no header.
        if len == 0
            || len > RX_DESC_LEN
            || pool.set_frame(b, RX_DESC_OFFSET, len).is_err()
            || pool.append_segment(head, b).is_err()
        {
            self.repost(pool, b);
            pool.trim_segments(head);
            self.recycle(pool, head);
            self.merged = 0;
            self.merging = (left > 0).then_some(Merging { head: None, left });
            return false;
        }
        if left > 0 {
            self.merged += 1;
            self.merging = Some(Merging { head: Some(head), left });
            return false;
        }
        self.merged = 0;
        self.deliver(pool, batch, head)
    }
}

impl<W: Mmio, R: Dma> RxQueue for VirtioRx<W, R> {
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let mut n = 0;
        if batch.room() > 0 {
            self.vq.poll_used();
        }
        while batch.room() > 0 {
            let Some((b, used_len)) = self.vq.pop_used() else {
                break;
            };
            // §2.7.8: `len` is the number of bytes written into the buffer: header + frame
            // (or, for a buffer after the first of a merged packet, frame bytes only).
            let took = if self.mergeable {
                self.take_merged(pool, batch, b, used_len as usize)
            } else {
                self.take_one(pool, batch, b, used_len as usize)
            };
            n += usize::from(took);
        }
        self.refill(pool);
        // One notification per burst, for the recycled and the refilled buffers together.
        kick(&mut self.vq, &self.doorbell, self.index);
        n
    }

    fn rx_stats(&self) -> RxStats {
        // A used entry naming a descriptor the device did not own is a device error too.
        RxStats { errors: self.stats.errors + self.vq.bad_used(), ..self.stats }
    }

    /// The used ring's `idx`: the device writes it after the used entries (§2.7.8).
    fn wake_address(&self) -> Option<WakeAddr> {
        self.vq.used_idx_address().map(WakeAddr::new)
    }

    /// The used ring's new entries (one read of `idx`).
    fn pending(&self) -> Option<usize> {
        Some(self.vq.pending_used())
    }
}

/// One transmit virtqueue (virtqueue `2n + 1` for queue pair `n`, §5.1.2).
#[derive(Debug)]
pub struct VirtioTx<W, R> {
    vq: SplitQueue<R>,
    doorbell: W,
    index: u16,
    stats: TxStats,
}

impl<W: Mmio, R: Dma> VirtioTx<W, R> {
    pub(crate) fn new(vq: SplitQueue<R>, doorbell: W, index: u16) -> Self {
        Self { vq, doorbell, index, stats: TxStats::default() }
    }

    /// The virtqueue index.
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Ring entries.
    pub fn size(&self) -> u16 {
        self.vq.size()
    }

    /// Used entries naming a descriptor the device did not own (device bugs).
    pub fn bad_completions(&self) -> u64 {
        self.vq.bad_used()
    }
}

impl<W: Mmio, R: Dma> VirtioTx<W, R> {
    /// Puts the frame over several buffers that starts in `b` (header at `hdr`) on the ring
    /// as one descriptor chain: the header and the first buffer's bytes, then each further
    /// buffer's. `Err(true)` when too few descriptors are free (try again later),
    /// `Err(false)` for a frame that cannot be sent (an empty buffer after the first, or more
    /// buffers than the ring has entries).
    fn push_segmented(&mut self, pool: &Pool<'_>, b: PacketBuf, hdr: usize) -> Result<(), bool> {
        let mut parts = [(0u64, 0u32); MAX_SEGMENTS];
        let mut n = 0;
        for (i, s) in pool.segments(b).enumerate() {
            let (off, len) = (pool.frame_offset(s), pool.len(s));
            let part = if i == 0 {
                (pool.phys(b) + hdr as u64, (len + NET_HDR_LEN) as u32)
            } else {
                (pool.phys(s) + off as u64, len as u32)
            };
            if part.1 == 0 {
                return Err(false);
            }
            if let Some(p) = parts.get_mut(i) {
                *p = part;
                n = i + 1;
            }
        }
        if n > usize::from(self.vq.size()) {
            return Err(false);
        }
        if n > self.vq.num_free() {
            return Err(true);
        }
        self.vq.push_chain(parts.get(..n).unwrap_or(&[]), 0, b).map_err(|_| true)
    }
}

impl<W: Mmio, R: Dma> TxQueue for VirtioTx<W, R> {
    /// Frames are refused (freed and counted in `errors`) when they are empty, start less
    /// than 12 bytes into their buffer (no room for the virtio-net header), or span a buffer
    /// that is empty. A frame over several buffers takes a descriptor each.
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        self.reclaim(pool);
        let mut taken = 0;
        for &b in batch.as_slice() {
            let off = pool.frame_offset(b);
            let len = pool.len(b);
            if len == 0 || off < NET_HDR_LEN {
                let _ = pool.free(b);
                self.stats.errors += 1;
                taken += 1;
                continue;
            }
            if self.vq.num_free() == 0 {
                break;
            }
            let hdr = off - NET_HDR_LEN;
            // §5.1.6.2: no offloads negotiated, so the header is all zeros (flags 0,
            // gso_type VIRTIO_NET_HDR_GSO_NONE, num_buffers unused on transmit).
            if let Some(h) = pool.raw_mut(b).get_mut(hdr..off) {
                h.fill(0);
            }
            let bytes = if pool.is_segmented(b) {
                match self.push_segmented(pool, b, hdr) {
                    Ok(()) => pool.frame_len(b),
                    Err(true) => break,
                    Err(false) => {
                        let _ = pool.free(b);
                        self.stats.errors += 1;
                        taken += 1;
                        continue;
                    }
                }
            } else {
                // The pool keeps `off + len <= BUF_SIZE`, so this fits in u32.
                let addr = pool.phys(b) + hdr as u64;
                if self.vq.push(addr, (len + NET_HDR_LEN) as u32, 0, b).is_err() {
                    break; // Cannot happen: a descriptor was free.
                }
                len
            };
            self.stats.packets += 1;
            self.stats.bytes += bytes as u64;
            taken += 1;
        }
        self.stats.ring_full += (batch.len() - taken) as u64;
        batch.drain_front(taken);
        // One notification per burst. The header and descriptor writes are ordered
        // before the avail idx store by the `dma_wmb` in `publish`.
        kick(&mut self.vq, &self.doorbell, self.index);
        taken
    }

    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        if self.vq.in_flight() == 0 {
            return 0;
        }
        self.vq.poll_used();
        let mut n = 0;
        while let Some((b, _)) = self.vq.pop_used() {
            // A refused free is counted by the pool.
            let _ = pool.free(b);
            n += 1;
        }
        n
    }

    fn in_flight(&self) -> usize {
        self.vq.in_flight()
    }

    fn tx_stats(&self) -> TxStats {
        self.stats
    }
}
