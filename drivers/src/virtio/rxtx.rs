//! Receive and transmit queues of a virtio-net device (virtio 1.2 §5.1.6), as
//! `cadence_core::nic` queues.
//!
//! Every packet travels with a 12-byte `struct virtio_net_hdr` in front of it (§5.1.6:
//! with `VIRTIO_F_VERSION_1` the header always has `num_buffers`, so it is 12 bytes;
//! no offloads and no `VIRTIO_NET_F_MRG_RXBUF` are negotiated, so it is all zeros on
//! transmit and ignored on receive). It lives in the buffer's headroom, so frames are
//! never copied:
//!
//! ```text
//! buffer: | headroom ... | virtio_net_hdr (12) | frame ...              |
//!         0              HEADROOM-12           HEADROOM (RX frames start here)
//! ```

use cadence_core::buf::{BUF_SIZE, Batch, HEADROOM, PacketBuf, Pool};
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

/// One receive virtqueue (virtqueue `2n` for queue pair `n`, §5.1.2).
#[derive(Debug)]
pub struct VirtioRx<W, R> {
    vq: SplitQueue<R>,
    doorbell: W,
    index: u16,
    stats: RxStats,
}

impl<W: Mmio, R: Dma> VirtioRx<W, R> {
    pub(crate) fn new(vq: SplitQueue<R>, doorbell: W, index: u16) -> Self {
        Self { vq, doorbell, index, stats: RxStats::default() }
    }

    /// The virtqueue index.
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Ring entries.
    pub fn size(&self) -> u16 {
        self.vq.size()
    }

    /// Buffers posted to the device.
    pub fn posted(&self) -> usize {
        self.vq.in_flight()
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
    /// does not fit, which cannot happen right after it came off the ring).
    fn recycle(&mut self, pool: &mut Pool<'_>, b: PacketBuf) {
        self.stats.errors += 1;
        if let Err(b) = self.post(pool, b) {
            let _ = pool.free(b);
        }
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
            // §2.7.8: `len` is the number of bytes written into the buffer: header + frame.
            let used_len = used_len as usize;
            // Only what cannot be a frame in this buffer is an error here: a write shorter
            // than the header, or longer than the descriptor. A runt Ethernet frame is
            // passed up, so the parser drops and counts it by reason like any bad frame.
            if !(NET_HDR_LEN..=RX_DESC_LEN).contains(&used_len) {
                self.recycle(pool, b);
                continue;
            }
            let len = used_len - NET_HDR_LEN;
            if pool.set_frame(b, HEADROOM, len).is_err() {
                self.recycle(pool, b);
                continue;
            }
            if let Err(b) = batch.push(b) {
                // Cannot happen (the batch had room); recycle rather than leak.
                self.recycle(pool, b);
                continue;
            }
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
            n += 1;
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

impl<W: Mmio, R: Dma> TxQueue for VirtioTx<W, R> {
    /// Frames are refused (freed and counted in `errors`) when they are empty, start less
    /// than 12 bytes into their buffer (no room for the virtio-net header), or span several
    /// buffers (one descriptor per frame here).
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        self.reclaim(pool);
        let mut taken = 0;
        for &b in batch.as_slice() {
            let off = pool.frame_offset(b);
            let len = pool.len(b);
            if len == 0 || off < NET_HDR_LEN || pool.is_segmented(b) {
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
            // The pool keeps `off + len <= BUF_SIZE`, so this fits in u32.
            let addr = pool.phys(b) + hdr as u64;
            if self.vq.push(addr, (len + NET_HDR_LEN) as u32, 0, b).is_err() {
                break; // Cannot happen: a descriptor was free.
            }
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
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
