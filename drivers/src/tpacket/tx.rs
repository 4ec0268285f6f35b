//! The `TPACKET_V3` transmit ring: fixed slots, frames copied in.
//!
//! `packet_mmap.rst`, "Transmission process": the user writes a frame into the next
//! free slot (`tp_status == TP_STATUS_AVAILABLE`), sets `tp_status =
//! TP_STATUS_SEND_REQUEST`, and calls `send()`; the kernel sends every requested slot
//! from its own position on, in ring order, and sets each back to `TP_STATUS_AVAILABLE`
//! when the frame has left (`TP_STATUS_SENDING` meanwhile), or to
//! `TP_STATUS_WRONG_FORMAT` when it refused it.
//!
//! Slots lie block by block: `block_size / frame_size` slots per block, slot `i` at
//! `(i / per_block) × block_size + (i % per_block) × frame_size` (`af_packet.c`,
//! `packet_lookup_frame`). For `TPACKET_V3` the kernel takes `tp_len` bytes at
//! `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))` = 48 into the slot (no
//! `PACKET_TX_HAS_OFF`) and requires `tp_next_offset == 0`.
//!
//! **`PACKET_LOSS`.** Without it, a refused frame stops the kernel at that slot: it
//! marks it `TP_STATUS_WRONG_FORMAT` and does not move on (`tpacket_snd`), so later
//! frames wait until the ring comes round to that slot again. With it the kernel skips
//! the frame and marks it available. The driver refuses what it knows the kernel would
//! (shorter than an Ethernet header, longer than `max_frame` or the slot), so the
//! platform should set `PACKET_LOSS` and pass the interface's MTU + 14 as `max_frame`.

use core::sync::atomic::{Ordering, fence};

use cadence_core::buf::{Batch, Pool};
use cadence_core::nic::{TxQueue, TxStats};

use super::status::{TP_STATUS_AVAILABLE, TP_STATUS_SEND_REQUEST, TP_STATUS_SENDING, TP_STATUS_WRONG_FORMAT};
use super::{ETH_HLEN, TPACKET_ALIGNMENT, TpacketError, pkt};
use crate::hal::{Kick, KickError, Mmio};

/// The TX ring's shape, as given to `PACKET_TX_RING` in `struct tpacket_req3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxGeometry {
    /// Bytes per block (`tp_block_size`).
    pub block_size: usize,
    /// Blocks (`tp_block_nr`).
    pub block_nr: usize,
    /// Bytes per slot (`tp_frame_size`).
    pub frame_size: usize,
    /// Slots (`tp_frame_nr`) = `block_size / frame_size × block_nr`.
    pub frame_nr: usize,
}

/// What a [`TpacketTx`] counted besides its [`TxStats`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TpacketTxCounters {
    /// Slots the kernel marked `TP_STATUS_WRONG_FORMAT` (also in `TxStats::errors`).
    pub wrong_format: u64,
    /// `kick_tx` calls that succeeded.
    pub kicks: u64,
    /// `kick_tx` calls that answered [`KickError::Busy`].
    pub kick_busy: u64,
    /// `kick_tx` calls that failed otherwise.
    pub kick_errors: u64,
}

/// The transmit queue of a `TPACKET_V3` socket.
#[derive(Debug)]
pub struct TpacketTx<W, K> {
    w: W,
    kick: K,
    block_size: usize,
    frame_size: usize,
    per_block: usize,
    frame_nr: usize,
    max_len: usize,
    /// Next slot to fill.
    head: usize,
    /// Oldest slot not yet seen available again.
    tail: usize,
    /// Slots between `tail` and `head`.
    in_flight: usize,
    /// A kick failed and nothing has rung since.
    kick_owed: bool,
    stats: TxStats,
    counters: TpacketTxCounters,
}

impl<W: Mmio, K: Kick> TpacketTx<W, K> {
    /// Takes over a freshly mapped TX ring. `max_frame`: the longest frame to send
    /// (the interface's MTU + 14); frames are also limited to the slot (`frame_size −
    /// 48`).
    ///
    /// Checks: a block; `frame_size` a multiple of 16 holding the 48-byte header and an
    /// Ethernet header; `block_size` a multiple of 16, at least one slot and at most
    /// `u32::MAX`; `frame_nr` equal to the slots the blocks hold; the window holds
    /// `block_size × block_nr` bytes; every slot `TP_STATUS_AVAILABLE`.
    pub fn try_new(ring: W, kick: K, geometry: TxGeometry, max_frame: usize) -> Result<Self, TpacketError> {
        let TxGeometry { block_size, block_nr, frame_size, frame_nr } = geometry;
        if block_nr == 0 {
            return Err(TpacketError::NoBlocks);
        }
        if !frame_size.is_multiple_of(TPACKET_ALIGNMENT) || frame_size < pkt::TX_DATA + ETH_HLEN {
            return Err(TpacketError::BadFrameSize(frame_size));
        }
        if block_size < frame_size || u32::try_from(block_size).is_err() {
            return Err(TpacketError::BadBlockSize(block_size));
        }
        if !block_size.is_multiple_of(TPACKET_ALIGNMENT) {
            return Err(TpacketError::BlockMisaligned(block_size));
        }
        let per_block = block_size / frame_size;
        let slots = per_block.saturating_mul(block_nr);
        if frame_nr != slots {
            return Err(TpacketError::FrameCount { frame_nr, slots });
        }
        let have = ring.len();
        let need = block_size.saturating_mul(block_nr);
        if need > have {
            return Err(TpacketError::WindowTooSmall { need, have });
        }
        let q = Self {
            w: ring,
            kick,
            block_size,
            frame_size,
            per_block,
            frame_nr,
            max_len: max_frame.min(frame_size - pkt::TX_DATA),
            head: 0,
            tail: 0,
            in_flight: 0,
            kick_owed: false,
            stats: TxStats::default(),
            counters: TpacketTxCounters::default(),
        };
        if let Some(i) = (0..frame_nr).find(|&i| q.w.read32(q.slot(i) + pkt::STATUS) != TP_STATUS_AVAILABLE) {
            return Err(TpacketError::SlotBusy(i));
        }
        Ok(q)
    }

    /// What was counted so far.
    pub fn counters(&self) -> TpacketTxCounters {
        self.counters
    }

    /// Slots in the ring.
    pub fn frame_nr(&self) -> usize {
        self.frame_nr
    }

    /// The longest frame the queue sends.
    pub fn max_frame(&self) -> usize {
        self.max_len
    }

    /// Window offset of slot `i` (< `frame_nr`).
    fn slot(&self, i: usize) -> usize {
        (i / self.per_block) * self.block_size + (i % self.per_block) * self.frame_size
    }

    /// Moves `tail` past every slot the kernel is done with, in ring order. Returns how
    /// many.
    fn reap(&mut self) -> usize {
        let mut n = 0;
        while self.in_flight > 0 {
            let s = self.slot(self.tail);
            let status = self.w.read32(s + pkt::STATUS);
            if status & TP_STATUS_WRONG_FORMAT != 0 {
                // Refused by the kernel: count it and make the slot ours again.
                self.counters.wrong_format += 1;
                self.stats.errors += 1;
                self.w.write32(s + pkt::STATUS, TP_STATUS_AVAILABLE);
            } else if status & (TP_STATUS_SEND_REQUEST | TP_STATUS_SENDING) != 0 {
                break;
            }
            // Anything else is available (timestamp bits may be set with it).
            self.tail = (self.tail + 1) % self.frame_nr;
            self.in_flight -= 1;
            n += 1;
        }
        if n > 0 {
            // The slots are rewritten only after the status loads that freed them.
            fence(Ordering::Acquire);
        }
        n
    }

    fn ring(&mut self) {
        match self.kick.kick_tx() {
            Ok(()) => {
                self.counters.kicks += 1;
                self.kick_owed = false;
                return;
            }
            Err(KickError::Busy) => self.counters.kick_busy += 1,
            Err(_) => self.counters.kick_errors += 1,
        }
        self.kick_owed = true;
    }
}

impl<W: Mmio, K: Kick> TxQueue for TpacketTx<W, K> {
    /// Copies each frame (every buffer of one over several) into the next free slot and
    /// frees its buffers at once. Refused
    /// (freed, counted in `errors`, counted as taken): frames shorter than 14 bytes or
    /// longer than [`TpacketTx::max_frame`]. One `kick_tx` per burst that queued
    /// anything, or when a previous kick failed.
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        self.reap();
        let mut queued = 0;
        let mut taken = 0;
        for &b in batch.as_slice() {
            // The whole frame: one over several buffers is copied into the slot piece by piece.
            let len = pool.frame_len(b);
            if !(ETH_HLEN..=self.max_len).contains(&len) {
                let _ = pool.free(b);
                self.stats.errors += 1;
                taken += 1;
                continue;
            }
            if self.in_flight == self.frame_nr {
                break;
            }
            let s = self.slot(self.head);
            if pool.is_segmented(b) {
                let mut at = s + pkt::TX_DATA;
                for seg in pool.segments(b) {
                    self.w.write_bytes(at, pool.frame(seg));
                    at += pool.len(seg);
                }
            } else {
                self.w.write_bytes(s + pkt::TX_DATA, pool.frame(b));
            }
            // `len <= frame_size - 48 <= u32::MAX`.
            self.w.write32(s + pkt::LEN, len as u32);
            self.w.write32(s + pkt::SNAPLEN, len as u32);
            self.w.write32(s + pkt::NEXT_OFFSET, 0);
            // The kernel reads the header and the frame once it sees SEND_REQUEST
            // (`__packet_get_status` is followed by `smp_rmb()`); Release puts them first.
            fence(Ordering::Release);
            self.w.write32(s + pkt::STATUS, TP_STATUS_SEND_REQUEST);
            let _ = pool.free(b);
            self.head = (self.head + 1) % self.frame_nr;
            self.in_flight += 1;
            queued += 1;
            taken += 1;
            self.stats.packets += 1;
            self.stats.bytes += len as u64;
        }
        if queued > 0 || self.kick_owed {
            self.ring();
        }
        self.stats.ring_full += (batch.len() - taken) as u64;
        batch.drain_front(taken);
        taken
    }

    /// Frees the slots the kernel is done with and returns how many (the buffers were
    /// freed when their frames were copied). Rings again if the last kick failed.
    fn reclaim(&mut self, _pool: &mut Pool<'_>) -> usize {
        let n = self.reap();
        if self.kick_owed {
            self.ring();
        }
        n
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn tx_stats(&self) -> TxStats {
        self.stats
    }
}
