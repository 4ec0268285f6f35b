//! A fake kernel side of a `TPACKET_V3` socket, for host tests, written from
//! `af_packet.c`'s behaviour.
//!
//! - [`RxKernel`]: fills blocks in order like `prb_fill_curr_block` / `prb_close_block`:
//!   packets at `BLK_HDR_LEN` (+ private area), each `tpacket3_hdr` followed by the frame
//!   at `tp_mac` = 82 (`TPACKET_ALIGN(68 + 16) − 14`), the next packet 8-byte aligned, the
//!   last one's `tp_next_offset` zeroed when the block closes; a block closes when the next
//!   frame does not fit or on [`RxKernel::retire`] (the retire timer). A frame finding the
//!   current block still the user's is dropped and the next block handed over carries
//!   `TP_STATUS_LOSING`. VLAN tags are stripped into `tp_vlan_tci`/`tp_vlan_tpid` as
//!   hardware offload does. `snap_cap` truncates frames (`TP_STATUS_COPY`).
//! - [`TxKernel`]: `tpacket_snd` on [`TxKernel::send`]: from its own position, every slot
//!   in `TP_STATUS_SEND_REQUEST` is checked (`tp_next_offset == 0`, 14 ≤ `tp_len` ≤ the
//!   slot and the MTU), its frame copied out and the slot set available (or `SENDING`
//!   until [`TxKernel::complete`]); a refused frame is `TP_STATUS_WRONG_FORMAT` and stops
//!   the kernel there, unless `loss` (`PACKET_LOSS`) is on.

use std::collections::VecDeque;

use super::status::*;
use super::{ETH_P_8021Q, block, pkt};
use crate::shm::ShmWindow;

/// `tp_mac` of a packet with a 14-byte MAC header and no reserve: `TPACKET_ALIGN(68 +
/// 16) − 14`.
pub(crate) const MAC_OFF: usize = 82;
/// `tp_net`.
pub(crate) const NET_OFF: usize = 96;
/// `TPACKET_V3`.
const TPACKET_V3: u32 = 2;

const fn align8(x: usize) -> usize {
    (x + 7) & !7
}

/// The kernel's side of an RX ring.
#[derive(Debug)]
pub(crate) struct RxKernel {
    pub(crate) w: ShmWindow,
    pub(crate) block_size: usize,
    pub(crate) block_nr: usize,
    /// `tp_sizeof_priv`.
    pub(crate) priv_size: usize,
    /// Truncate captured bytes to this (`TP_STATUS_COPY`).
    pub(crate) snap_cap: Option<usize>,
    /// Strip 802.1Q / 802.1ad tags into the header (offload).
    pub(crate) strip_vlan: bool,
    /// Report the TPID (`TP_STATUS_VLAN_TPID_VALID`); off: old kernels, TCI only.
    pub(crate) report_tpid: bool,
    /// Mark frames `TP_STATUS_CSUMNOTREADY`.
    pub(crate) csum_not_ready: bool,
    cur: usize,
    open: bool,
    off: usize,
    num: u32,
    last: Option<usize>,
    seq: u64,
    losing: bool,
    pub(crate) dropped: u64,
    /// `tp_sec`, `tp_nsec` of the next frames.
    pub(crate) time: (u32, u32),
}

impl RxKernel {
    pub(crate) fn new(block_size: usize, block_nr: usize) -> Self {
        Self {
            w: ShmWindow::new(block_size * block_nr),
            block_size,
            block_nr,
            priv_size: 0,
            snap_cap: None,
            strip_vlan: true,
            report_tpid: true,
            csum_not_ready: false,
            cur: 0,
            open: false,
            off: 0,
            num: 0,
            last: None,
            seq: 0,
            losing: false,
            dropped: 0,
            time: (1, 0),
        }
    }

    fn first(&self) -> usize {
        block::HDR_LEN + align8(self.priv_size)
    }

    pub(crate) fn block_status(&self, i: usize) -> u32 {
        self.w.r32(i * self.block_size + block::STATUS)
    }

    /// Opens the current block if the user gave it back; false if not.
    fn open_block(&mut self) -> bool {
        if self.block_status(self.cur) != TP_STATUS_KERNEL {
            return false;
        }
        let base = self.cur * self.block_size;
        self.w.w32(base, TPACKET_V3);
        self.w.w32(base + 4, block::HDR_LEN as u32);
        self.open = true;
        self.off = self.first();
        self.num = 0;
        self.last = None;
        true
    }

    /// Hands the current block to the user (`prb_close_block`). Returns false if none
    /// was open.
    pub(crate) fn retire(&mut self) -> bool {
        if !self.open {
            return false;
        }
        let base = self.cur * self.block_size;
        if let Some(last) = self.last {
            self.w.w32(base + last + pkt::NEXT_OFFSET, 0);
        }
        self.seq += 1;
        self.w.w32(base + block::NUM_PKTS, self.num);
        self.w.w32(base + block::FIRST, self.first() as u32);
        self.w.w32(base + block::BLK_LEN, self.off as u32);
        self.w.w64(base + block::SEQ, self.seq);
        let status = TP_STATUS_USER | if self.losing { TP_STATUS_LOSING } else { 0 };
        self.losing = false;
        self.w.w32(base + block::STATUS, status);
        self.open = false;
        self.cur = (self.cur + 1) % self.block_nr;
        true
    }

    /// Receives `wire` (a frame as on the wire). False when dropped (ring full).
    pub(crate) fn deliver(&mut self, wire: &[u8]) -> bool {
        // Offload: a tag after the MAC addresses goes into the header.
        let mut frame = wire.to_vec();
        let mut vlan = None;
        if self.strip_vlan && frame.len() >= 18 {
            let tpid = u16::from_be_bytes([frame[12], frame[13]]);
            if tpid == ETH_P_8021Q || tpid == 0x88a8 {
                let tci = u16::from_be_bytes([frame[14], frame[15]]);
                frame.drain(12..16);
                vlan = Some((tpid, tci));
            }
        }
        let mut snap = frame.len();
        let mut status = TP_STATUS_USER;
        if let Some(cap) = self.snap_cap.filter(|&c| c < snap) {
            snap = cap;
            status |= TP_STATUS_COPY;
        }
        let total = align8(MAC_OFF + snap);
        for _ in 0..2 {
            if !self.open && !self.open_block() {
                self.dropped += 1;
                self.losing = true;
                return false;
            }
            if self.off + total <= self.block_size {
                break;
            }
            if self.num == 0 {
                panic!("test frame of {snap} bytes does not fit an empty block");
            }
            self.retire();
        }
        if !self.open {
            self.dropped += 1;
            self.losing = true;
            return false;
        }
        let h = self.cur * self.block_size + self.off;
        if let Some((tpid, tci)) = vlan {
            status |= TP_STATUS_VLAN_VALID;
            if self.report_tpid {
                status |= TP_STATUS_VLAN_TPID_VALID;
                self.w.w16(h + pkt::VLAN_TPID, tpid);
            } else {
                self.w.w16(h + pkt::VLAN_TPID, 0);
            }
            self.w.w32(h + pkt::VLAN_TCI, tci as u32);
        } else {
            self.w.w32(h + pkt::VLAN_TCI, 0);
            self.w.w16(h + pkt::VLAN_TPID, 0);
        }
        if self.csum_not_ready {
            status |= TP_STATUS_CSUMNOTREADY;
        }
        self.w.w32(h + pkt::NEXT_OFFSET, total as u32);
        self.w.w32(h + pkt::SEC, self.time.0);
        self.w.w32(h + pkt::NSEC, self.time.1);
        self.w.w32(h + pkt::SNAPLEN, snap as u32);
        self.w.w32(h + pkt::LEN, frame.len() as u32);
        self.w.w32(h + pkt::STATUS, status);
        self.w.w16(h + pkt::MAC, MAC_OFF as u16);
        self.w.w16(h + pkt::NET, NET_OFF as u16);
        self.w.put(h + MAC_OFF, &frame[..snap]);
        self.last = Some(self.off);
        self.off += total;
        self.num += 1;
        true
    }
}

/// The kernel's side of a TX ring.
#[derive(Debug)]
pub(crate) struct TxKernel {
    pub(crate) w: ShmWindow,
    block_size: usize,
    frame_size: usize,
    per_block: usize,
    frame_nr: usize,
    /// `PACKET_LOSS`.
    pub(crate) loss: bool,
    /// Longest frame the device takes (MTU + 14).
    pub(crate) max_len: usize,
    /// Leave sent slots `SENDING` until [`TxKernel::complete`].
    pub(crate) async_complete: bool,
    head: usize,
    sending: VecDeque<usize>,
    pub(crate) sent: Vec<Vec<u8>>,
    pub(crate) refused: u64,
    pub(crate) violations: Vec<String>,
}

impl TxKernel {
    pub(crate) fn new(block_size: usize, block_nr: usize, frame_size: usize) -> Self {
        Self {
            w: ShmWindow::new(block_size * block_nr),
            block_size,
            frame_size,
            per_block: block_size / frame_size,
            frame_nr: block_size / frame_size * block_nr,
            loss: false,
            max_len: 1514,
            async_complete: false,
            head: 0,
            sending: VecDeque::new(),
            sent: Vec::new(),
            refused: 0,
            violations: Vec::new(),
        }
    }

    /// Window offset of slot `i`, computed the way `packet_lookup_frame` does: block
    /// `i / per_block`, frame `i % per_block` in it.
    pub(crate) fn slot(&self, i: usize) -> usize {
        let blk = i / self.per_block;
        let in_blk = i % self.per_block;
        blk * self.block_size + in_blk * self.frame_size
    }

    pub(crate) fn status(&self, i: usize) -> u32 {
        self.w.r32(self.slot(i) + pkt::STATUS)
    }

    /// `tpacket_snd`: sends every requested slot from the kernel's position. Returns how
    /// many it sent.
    pub(crate) fn send(&mut self) -> usize {
        let mut n = 0;
        for _ in 0..self.frame_nr {
            let s = self.slot(self.head);
            if self.w.r32(s + pkt::STATUS) != TP_STATUS_SEND_REQUEST {
                break;
            }
            let len = self.w.r32(s + pkt::LEN) as usize;
            let ok = self.w.r32(s + pkt::NEXT_OFFSET) == 0
                && len >= 14
                && len <= self.frame_size - pkt::TX_DATA
                && len <= self.max_len;
            if !ok {
                self.refused += 1;
                if self.loss {
                    self.w.w32(s + pkt::STATUS, TP_STATUS_AVAILABLE);
                    self.head = (self.head + 1) % self.frame_nr;
                    continue;
                }
                self.w.w32(s + pkt::STATUS, TP_STATUS_WRONG_FORMAT);
                break;
            }
            self.sent.push(self.w.bytes(s + pkt::TX_DATA, len));
            if self.async_complete {
                self.w.w32(s + pkt::STATUS, TP_STATUS_SENDING);
                self.sending.push_back(s);
            } else {
                self.w.w32(s + pkt::STATUS, TP_STATUS_AVAILABLE);
            }
            self.head = (self.head + 1) % self.frame_nr;
            n += 1;
        }
        n
    }

    /// Finishes up to `max` frames left `SENDING`, oldest first.
    pub(crate) fn complete(&mut self, max: usize) -> usize {
        let mut n = 0;
        while n < max {
            let Some(s) = self.sending.pop_front() else { break };
            if self.w.r32(s + pkt::STATUS) != TP_STATUS_SENDING {
                self.violations.push(format!("slot at {s} rewritten while sending"));
            }
            self.w.w32(s + pkt::STATUS, TP_STATUS_AVAILABLE);
            n += 1;
        }
        n
    }
}
