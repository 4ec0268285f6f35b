//! The model's LAN engines (XL710 datasheet §8.3 receive, §8.4 transmit, §7.1.8 RSS):
//! queue enable against the HMC contexts, tails, RSS steering, DMA, write-back rules.

use cadence_core::parse::{Fragment, IpAddr, L4Kind, parse};
use cadence_core::rss::toeplitz;

use super::{DELAY_READS, Device, PF_QUEUES, UNLINKED_WB_BATCH, off};

/// What became of an injected frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxOutcome {
    /// Written into PF queue `q`'s ring.
    Delivered(usize),
    /// Dropped: queue `q` is disabled or has no free descriptor (GLPRT_RDPC).
    Dropped(usize),
    /// Not addressed to this port and no promiscuous mode takes it.
    Filtered,
    /// Longer than the queue's RXMAX.
    Oversize,
    /// The link is down.
    LinkDown,
}

/// Packet classifier types (§7.1.8.1).
const PCTYPE_IPV4_UDP: u32 = 31;
const PCTYPE_IPV4_TCP: u32 = 33;
const PCTYPE_IPV4_OTHER: u32 = 35;
const PCTYPE_FRAG_IPV4: u32 = 36;
const PCTYPE_IPV6_UDP: u32 = 41;
const PCTYPE_IPV6_TCP: u32 = 43;
const PCTYPE_IPV6_OTHER: u32 = 45;
const PCTYPE_FRAG_IPV6: u32 = 46;

impl Device {
    /// (PF queue, hash, hashed) for `frame` under the current HENA / key / HLUT and the
    /// VSI's queue map.
    pub(crate) fn classify(&self, frame: &[u8]) -> (usize, u32, bool) {
        let first = self.vsi_queues.0 as usize;
        let Ok(p) = parse(frame) else { return (first, 0, false) };
        let f = p.flow;
        let ports = [f.src_port.to_be_bytes(), f.dst_port.to_be_bytes()].concat();
        let frag = !matches!(p.fragment, Fragment::Whole);
        let (pctype, input): (u32, Vec<u8>) = match (f.src, f.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => match p.l4 {
                _ if frag => (PCTYPE_FRAG_IPV4, [&s[..], &d].concat()),
                L4Kind::Udp => (PCTYPE_IPV4_UDP, [&s[..], &d, &ports].concat()),
                L4Kind::Tcp => (PCTYPE_IPV4_TCP, [&s[..], &d, &ports].concat()),
                _ => (PCTYPE_IPV4_OTHER, [&s[..], &d].concat()),
            },
            (IpAddr::V6(s), IpAddr::V6(d)) => match p.l4 {
                _ if frag => (PCTYPE_FRAG_IPV6, [&s[..], &d].concat()),
                L4Kind::Udp => (PCTYPE_IPV6_UDP, [&s[..], &d, &ports].concat()),
                L4Kind::Tcp => (PCTYPE_IPV6_TCP, [&s[..], &d, &ports].concat()),
                _ => (PCTYPE_IPV6_OTHER, [&s[..], &d].concat()),
            },
            _ => return (first, 0, false),
        };
        if self.hena() >> pctype & 1 == 0 {
            return (first, 0, false);
        }
        let mut key = [0u8; 52];
        for (i, k) in key.chunks_exact_mut(4).enumerate() {
            k.copy_from_slice(&self.reg(off::PFQF_HKEY + 0x80 * i).to_le_bytes());
        }
        let hash = toeplitz(&key, &input).unwrap_or(0);
        let entries = if self.reg(off::PFQF_CTL_0) & 1 << 16 != 0 { 512 } else { 128 };
        let i = hash as usize & (entries - 1);
        let entry = (self.reg(off::PFQF_HLUT + 0x80 * (i / 4)) >> (8 * (i % 4))) as usize & 0x3F;
        // The entry is a VSI queue; the VSI's queues are contiguous from `first`.
        let vsi_q = entry % self.vsi_queues.1.max(1) as usize;
        (first + vsi_q, hash, true)
    }

    fn accepts(&self, frame: &[u8]) -> bool {
        let Some(dst) = frame.get(..6) else { return false };
        if dst == [0xFF; 6] {
            self.promisc & 0x4 != 0
        } else if dst[0] & 1 != 0 {
            self.promisc & 0x2 != 0
        } else {
            self.promisc & 0x1 != 0 || dst == self.mac
        }
    }

    /// QRX_ENA write: with QENA_REQ, the context is read and checked; QENA_STAT follows a
    /// few reads later.
    pub(crate) fn write_rx_ena(&mut self, q: usize, v: u32) {
        let o = off::QRX_ENA + 4 * q;
        let req = v & 1 != 0;
        let was = self.reg(o) & 1 != 0;
        self.set(o, v & 0b11);
        if req && !was {
            let Some(c) = self.rx_context(q) else { return };
            let mut ok = true;
            if c.qlen < 32 || c.qlen > 8160 || c.qlen % 32 != 0 {
                self.violations
                    .push(format!("RX queue {q}: context QLEN {} not a multiple of 32 in 32..=8160", c.qlen));
                ok = false;
            }
            if c.dsize != 1 || c.dtype != 0 {
                self.violations.push(format!(
                    "RX queue {q}: DSIZE {} / DTYPE {} not modeled (32-byte, one buffer)",
                    c.dsize, c.dtype
                ));
                ok = false;
            }
            if c.dbuff == 0 || !c.crcstrip {
                self.violations.push(format!("RX queue {q}: DBUFF {} / CRCSTRIP {}", c.dbuff, c.crcstrip));
                ok = false;
            }
            if !self.host.device_may_access(c.base, c.qlen as usize * 32) {
                self.violations.push(format!(
                    "RX queue {q}: ring {:#x}+{} outside allocated memory",
                    c.base,
                    c.qlen * 32
                ));
                ok = false;
            }
            if !ok {
                return;
            }
            let tail = self.reg(off::QRX_TAIL + 4 * q);
            self.rxq[q] = super::RxQ {
                enabled: true,
                delay: DELAY_READS,
                base: c.base,
                qlen: c.qlen,
                dbuff: c.dbuff,
                rxmax: c.rxmax,
                tail,
                ..Default::default()
            };
        } else if !req {
            self.rxq[q].enabled = false;
            self.rxq[q].stat_seen = false;
        }
    }

    /// QTX_ENA write.
    pub(crate) fn write_tx_ena(&mut self, q: usize, v: u32) {
        let o = off::QTX_ENA + 4 * q;
        let req = v & 1 != 0;
        let was = self.reg(o) & 1 != 0;
        self.set(o, v & 0b11);
        if req && !was {
            let ctl = self.reg(off::QTX_CTL + 4 * q);
            if ctl & 0b11 != 2 || (ctl >> 2) & 0xF != self.pf as u32 {
                self.violations
                    .push(format!("TX queue {q} enabled with QTX_CTL {ctl:#x} (not PF {}'s queue)", self.pf));
            }
            let abs = self.first_queue() + q;
            if !self.pre_qdis_clear.get(abs).copied().unwrap_or(false) {
                self.violations
                    .push(format!("TX queue {q} (absolute {abs}) enabled before its pre-disable was cleared"));
            }
            let Some(c) = self.tx_context(q) else { return };
            let mut ok = true;
            if c.qlen < 32 || c.qlen > 8160 || c.qlen % 32 != 0 {
                self.violations
                    .push(format!("TX queue {q}: context QLEN {} not a multiple of 32 in 32..=8160", c.qlen));
                ok = false;
            }
            if !c.new_context || c.head_wb {
                self.violations.push(format!("TX queue {q}: NEW_CONTEXT {} HEAD_WB_ENA {}", c.new_context, c.head_wb));
                ok = false;
            }
            if c.rdylist != self.qs_handle {
                self.violations.push(format!(
                    "TX queue {q}: RDYLIST {:#x} is not the VSI's qs_handle {:#x}",
                    c.rdylist, self.qs_handle
                ));
                ok = false;
            }
            if !self.host.device_may_access(c.base, c.qlen as usize * 16) {
                self.violations.push(format!(
                    "TX queue {q}: ring {:#x}+{} outside allocated memory",
                    c.base,
                    c.qlen * 16
                ));
                ok = false;
            }
            if !ok {
                return;
            }
            let tail = self.reg(off::QTX_TAIL + 4 * q);
            self.txq[q] = super::TxQ {
                enabled: true,
                delay: DELAY_READS,
                base: c.base,
                qlen: c.qlen,
                tail,
                ..Default::default()
            };
        } else if !req {
            self.txq[q].enabled = false;
            self.txq[q].stat_seen = false;
        }
    }

    pub(crate) fn write_rx_tail(&mut self, q: usize, v: u32) {
        self.set(off::QRX_TAIL + 4 * q, v);
        let rq = &mut self.rxq[q];
        if v != 0 && !rq.stat_seen {
            self.violations.push(format!("QRX_TAIL({q}) = {v} written before QENA_STAT was seen"));
            return;
        }
        if !v.is_multiple_of(8) {
            self.violations.push(format!("QRX_TAIL({q}) = {v}: not a multiple of 8 descriptors"));
        }
        if rq.qlen > 0 && v >= rq.qlen {
            self.violations.push(format!("QRX_TAIL({q}) = {v} outside the ring of {}", rq.qlen));
            return;
        }
        rq.tail = v;
    }

    pub(crate) fn write_tx_tail(&mut self, q: usize, v: u32) {
        self.set(off::QTX_TAIL + 4 * q, v);
        let tq = &mut self.txq[q];
        if v != 0 && !tq.stat_seen {
            self.violations.push(format!("QTX_TAIL({q}) = {v} written before QENA_STAT was seen"));
            return;
        }
        if tq.qlen > 0 && v >= tq.qlen {
            self.violations.push(format!("QTX_TAIL({q}) = {v} outside the ring of {}", tq.qlen));
            return;
        }
        tq.tail = v;
        if !self.tx_paused {
            self.run_tx(q);
        }
    }

    /// The receive path for one frame; `errors` go into the write-back's error field.
    pub(crate) fn receive(&mut self, frame: &[u8], errors: u8) -> RxOutcome {
        if !self.link_up {
            return RxOutcome::LinkDown;
        }
        if !self.accepts(frame) {
            return RxOutcome::Filtered;
        }
        let (q, hash, hashed) = self.classify(frame);
        if q >= PF_QUEUES || !self.rxq[q].enabled {
            self.rdpc = (self.rdpc + 1) & 0xFFFF_FFFF;
            return RxOutcome::Dropped(q);
        }
        if frame.len() > self.rxq[q].rxmax {
            return RxOutcome::Oversize;
        }
        let piece = self.split_rx_at.unwrap_or(self.rxq[q].dbuff).min(self.rxq[q].dbuff).max(1);
        let pieces: Vec<&[u8]> = if frame.is_empty() { vec![frame] } else { frame.chunks(piece).collect() };
        let rq = &self.rxq[q];
        let free = (rq.tail + rq.qlen - rq.head) % rq.qlen.max(1);
        if (free as usize) < pieces.len() {
            self.rdpc = (self.rdpc + 1) & 0xFFFF_FFFF;
            return RxOutcome::Dropped(q);
        }
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let rq = &self.rxq[q];
            let d = rq.base + 32 * rq.head as u64;
            let pkt_addr = self.host.r64(d);
            if !self.host.dev_write(pkt_addr, piece) {
                self.violations.push(format!("RX queue {q}: buffer {pkt_addr:#x}+{} outside memory", piece.len()));
            }
            let eop = i == last;
            let mut qw1: u64 = 1 | (piece.len() as u64) << 38 | 0x18 << 30;
            if eop {
                qw1 |= 2 | (errors as u64) << 19;
                if hashed {
                    qw1 |= 3 << 12;
                }
            }
            let mut wb = [0u8; 32];
            wb[4..8].copy_from_slice(&(if hashed { hash } else { 0 }).to_le_bytes());
            wb[8..16].copy_from_slice(&qw1.to_le_bytes());
            let rq = &mut self.rxq[q];
            rq.head = (rq.head + 1) % rq.qlen;
            rq.pending_wb.push((d, wb));
        }
        self.rxq[q].frames += 1;
        self.gorc = (self.gorc + frame.len() as u64 + 4) & ((1 << 48) - 1);
        match frame.first() {
            Some(_) if frame.get(..6) == Some(&[0xFF; 6]) => self.bprc += 1,
            Some(b) if b & 1 != 0 => self.mprc += 1,
            _ => self.uprc += 1,
        }
        self.flush_rx_writebacks(q, false);
        RxOutcome::Delivered(q)
    }

    /// Posts queue `q`'s held RX write-backs: at once when the queue is in the
    /// interrupt list, else once [`UNLINKED_WB_BATCH`] are pending (or when `force`d).
    fn flush_rx_writebacks(&mut self, q: usize, force: bool) {
        let linked = self.wb_linked(false, q);
        if !(force || linked || self.rxq[q].pending_wb.len() >= UNLINKED_WB_BATCH) {
            return;
        }
        for (d, wb) in std::mem::take(&mut self.rxq[q].pending_wb) {
            // Body first (qwords 2, 3, 0, the high half of 1), the DD dword last.
            let ok = self.host.dev_write(d + 16, &wb[16..32])
                && self.host.dev_write(d, &wb[0..8])
                && self.host.dev_write(d + 12, &wb[12..16])
                && self.host.dev_write(d + 8, &wb[8..12]);
            if !ok {
                self.violations.push(format!("RX descriptor {d:#x} outside memory"));
            }
        }
    }

    /// Posts every held write-back (an ITR expiry).
    pub(crate) fn flush_all_writebacks(&mut self) {
        for q in 0..PF_QUEUES {
            self.flush_rx_writebacks(q, true);
            self.flush_tx_writebacks(q, true);
        }
    }

    fn flush_tx_writebacks(&mut self, q: usize, force: bool) {
        let linked = self.wb_linked(true, q);
        if !(force || linked || self.txq[q].pending_wb.len() >= UNLINKED_WB_BATCH) {
            return;
        }
        for d in std::mem::take(&mut self.txq[q].pending_wb) {
            if !self.host.dev_write(d + 8, &0xFu64.to_le_bytes()) {
                self.violations.push(format!("TX descriptor {d:#x} outside memory"));
            }
        }
    }

    /// Runs queue `q`'s transmit engine from its head to its tail.
    pub(crate) fn run_tx(&mut self, q: usize) {
        if !self.txq[q].enabled || !self.link_up {
            return;
        }
        while self.txq[q].head != self.txq[q].tail {
            let tq = &self.txq[q];
            let (head, d) = (tq.head, tq.base + 16 * tq.head as u64);
            let (addr, qw1) = (self.host.r64(d), self.host.r64(d + 8));
            let dtype = qw1 & 0xF;
            let cmd = (qw1 >> 4) & 0x3FF;
            let len = ((qw1 >> 34) & 0x3FFF) as usize;
            if dtype != 0 {
                self.violations
                    .push(format!("TX queue {q} descriptor {head}: DTYPE {dtype:#x} is not a data descriptor"));
            }
            let mut bytes = vec![0u8; len];
            if !self.host.dev_read(addr, &mut bytes) {
                self.violations.push(format!("TX queue {q} descriptor {head}: buffer {addr:#x}+{len} outside memory"));
            }
            self.txq[q].partial.extend_from_slice(&bytes);
            let eop = cmd & 0x1 != 0;
            let rs = cmd & 0x2 != 0;
            if eop {
                let frame = std::mem::take(&mut self.txq[q].partial);
                if cmd & 0x4 == 0 {
                    self.violations.push(format!("TX queue {q} descriptor {head}: no ICRC, frame not sent"));
                } else if frame.len() < 17 {
                    // Malicious-driver detection: the queue stops.
                    self.violations
                        .push(format!("TX queue {q}: a {}-byte frame trips malicious-driver detection", frame.len()));
                    self.txq[q].enabled = false;
                    return;
                } else {
                    self.gotc = (self.gotc + frame.len() as u64 + 4) & ((1 << 48) - 1);
                    self.uptc += 1;
                    self.tx_frames.push((q as u16, frame));
                }
            }
            if rs {
                self.txq[q].pending_wb.push(d);
            }
            let tq = &mut self.txq[q];
            tq.head = (tq.head + 1) % tq.qlen;
        }
        self.flush_tx_writebacks(q, false);
    }
}
