//! The 82599 model's receive and transmit engines (datasheet §7.1, §7.2).

use cadence_core::parse::{IpAddr, L4Kind, parse};
use cadence_core::rss::toeplitz;

use super::{Device, PB_FRAMES, QUEUES, off, rx_block};

/// What became of an injected frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RxOutcome {
    /// Written into queue `q`'s ring.
    Delivered(usize),
    /// Dropped by DROP_EN because queue `q` had no descriptor (QPRDC).
    DroppedNoDescriptor(usize),
    /// Held in the packet buffer until queue `q` gets descriptors.
    Buffered(usize),
    /// Missed: receive off, queue disabled, or the packet buffer full (MPC).
    Missed,
    /// Not addressed to this port (MAC filter).
    Filtered,
    /// Longer than the maximum frame size with jumbo frames off.
    Oversize,
}

/// MRQC hash enables and their RSS types (pkt_info 3:0).
const IPV4_TCP: u32 = 1 << 16;
const IPV4: u32 = 1 << 17;
const IPV6: u32 = 1 << 20;
const IPV6_TCP: u32 = 1 << 21;
const IPV4_UDP: u32 = 1 << 22;
const IPV6_UDP: u32 = 1 << 23;

impl Device {
    /// (queue, hash, RSS type) for `frame` under the current MRQC/RSSRK/RETA.
    pub(crate) fn classify(&self, frame: &[u8]) -> (usize, u32, u32) {
        let mrqc = self.reg(off::MRQC);
        if mrqc & 0xF != 1 {
            return (0, 0, 0);
        }
        let Ok(p) = parse(frame) else { return (0, 0, 0) };
        let mut key = [0u8; 40];
        for (i, k) in key.chunks_exact_mut(4).enumerate() {
            k.copy_from_slice(&self.reg(off::RSSRK + 4 * i).to_le_bytes());
        }
        let f = p.flow;
        let ports = [f.src_port.to_be_bytes(), f.dst_port.to_be_bytes()].concat();
        let (tcp, udp) = (matches!(p.l4, L4Kind::Tcp), matches!(p.l4, L4Kind::Udp));
        let (input, kind): (Vec<u8>, u32) = match (f.src, f.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) if tcp && mrqc & IPV4_TCP != 0 => ([&s[..], &d, &ports].concat(), 1),
            (IpAddr::V4(s), IpAddr::V4(d)) if udp && mrqc & IPV4_UDP != 0 => ([&s[..], &d, &ports].concat(), 7),
            (IpAddr::V4(s), IpAddr::V4(d)) if mrqc & IPV4 != 0 => ([&s[..], &d].concat(), 2),
            (IpAddr::V6(s), IpAddr::V6(d)) if tcp && mrqc & IPV6_TCP != 0 => ([&s[..], &d, &ports].concat(), 3),
            (IpAddr::V6(s), IpAddr::V6(d)) if udp && mrqc & IPV6_UDP != 0 => ([&s[..], &d, &ports].concat(), 8),
            (IpAddr::V6(s), IpAddr::V6(d)) if mrqc & IPV6 != 0 => ([&s[..], &d].concat(), 5),
            _ => return (0, 0, 0),
        };
        let hash = toeplitz(&key, &input).unwrap_or(0);
        // §7.1.2.10: the 7 LS bits index the 128-entry RETA; the 82599 uses 4 bits of
        // each entry.
        let i = (hash & 0x7F) as usize;
        let entry = (self.reg(off::RETA + 4 * (i / 4)) >> (8 * (i % 4))) & 0xFF;
        ((entry & 0xF) as usize, hash, kind)
    }

    fn accepts(&self, frame: &[u8]) -> bool {
        let fctrl = self.reg(off::FCTRL);
        let Some(dst) = frame.get(..6) else { return false };
        if dst == [0xFF; 6] {
            fctrl & 1 << 10 != 0
        } else if dst[0] & 1 != 0 {
            fctrl & 1 << 8 != 0
        } else {
            fctrl & 1 << 9 != 0 || dst == self.mac
        }
    }

    /// The receive path for one frame.
    pub(crate) fn receive(&mut self, frame: &[u8], errors: u32) -> RxOutcome {
        if !self.rx_enabled() {
            self.mpc += 1;
            return RxOutcome::Missed;
        }
        if !self.accepts(frame) {
            return RxOutcome::Filtered;
        }
        let vlan = frame.get(12..14) == Some(&[0x81, 0x00]);
        let jumbo = self.reg(off::HLREG0) & 1 << 2 != 0;
        // With JUMBOEN, MAXFRS.MFS bounds a frame, CRC included.
        let too_long = if jumbo {
            frame.len() + 4 > (self.reg(off::MAXFRS) >> 16) as usize
        } else {
            frame.len() > 1518 - 4 + if vlan { 4 } else { 0 }
        };
        if too_long {
            return RxOutcome::Oversize;
        }
        let (q, hash, kind) = self.classify(frame);
        // Earlier frames still in the packet buffer go first.
        self.drain_packet_buffer();
        if !self.packet_buffer.is_empty() {
            return self.buffer(q, frame, errors, hash, kind);
        }
        self.deliver(q, frame, errors, hash, kind)
    }

    fn buffer(&mut self, q: usize, frame: &[u8], errors: u32, hash: u32, kind: u32) -> RxOutcome {
        if self.packet_buffer.len() >= PB_FRAMES {
            self.mpc += 1;
            return RxOutcome::Missed;
        }
        let mut bytes = frame.to_vec();
        bytes.extend_from_slice(&hash.to_le_bytes());
        self.packet_buffer.push_back((q, bytes, errors | kind));
        RxOutcome::Buffered(q)
    }

    /// Free descriptors of queue `q` (between RDH and RDT).
    fn free_descs(&self, q: usize) -> u32 {
        let n = self.rx_ring_len(q);
        let tail = self.reg(rx_block(q) + 0x18);
        if n == 0 { 0 } else { (tail + n - self.rxq[q].head) % n }
    }

    fn deliver(&mut self, q: usize, frame: &[u8], errors: u32, hash: u32, kind: u32) -> RxOutcome {
        if q >= QUEUES || !self.rxq[q].enabled {
            self.mpc += 1;
            return RxOutcome::Missed;
        }
        let block = rx_block(q);
        let srrctl = self.reg(block + 0x14);
        let bsize = ((srrctl & 0x7F) as usize * 1024).max(1024);
        let need = frame.len().div_ceil(bsize).max(1) as u32;
        if self.free_descs(q) < need {
            if srrctl & 1 << 28 != 0 {
                // §7.1.10: with DROP_EN the frame is dropped and counted in QPRDC
                // (and, per errata, still in GPRC).
                self.qprdc[q] += 1;
                self.gprc += 1;
                return RxOutcome::DroppedNoDescriptor(q);
            }
            return self.buffer(q, frame, errors, hash, kind);
        }
        let base = self.reg(block) as u64 | (self.reg(block + 4) as u64) << 32;
        let n = self.rx_ring_len(q);
        let pieces: Vec<&[u8]> = if frame.is_empty() { vec![frame] } else { frame.chunks(bsize).collect() };
        let last = pieces.len() - 1;
        for (i, piece) in pieces.into_iter().enumerate() {
            let head = self.rxq[q].head;
            let d = base + 16 * head as u64;
            let pkt_addr = self.host.r64(d);
            if !self.host.dev_write(pkt_addr, piece) {
                self.violations.push(format!("RX queue {q}: buffer {pkt_addr:#x}+{} outside memory", piece.len()));
            }
            let eop = i == last;
            let status = 1 | if eop { 2 | (errors & 0xFFF0_0000) } else { 0 };
            let wb_lo = (if eop { kind } else { 0 }) as u64 | (hash as u64) << 32;
            // Write-back: body first, then the length, then the status dword with DD.
            let ok = self.host.dev_write(d, &wb_lo.to_le_bytes())
                && self.host.dev_write(d + 12, &(piece.len() as u32).to_le_bytes())
                && self.host.dev_write(d + 8, &(status as u32).to_le_bytes());
            if !ok {
                self.violations.push(format!("RX queue {q}: descriptor {d:#x} outside memory"));
            }
            self.rxq[q].head = (head + 1) % n;
        }
        self.gprc += 1;
        self.gorc += frame.len() as u64 + 4;
        self.qprc[q] += 1;
        RxOutcome::Delivered(q)
    }

    /// Moves packet-buffer frames into their queues while descriptors allow, in order.
    pub(crate) fn drain_packet_buffer(&mut self) {
        while let Some((q, bytes, flags)) = self.packet_buffer.front().cloned() {
            if !self.rx_enabled() || !self.rxq.get(q).is_some_and(|r| r.enabled) || self.free_descs(q) == 0 {
                return;
            }
            self.packet_buffer.pop_front();
            let (frame, hash) = bytes.split_at(bytes.len() - 4);
            let hash = u32::from_le_bytes([hash[0], hash[1], hash[2], hash[3]]);
            if let RxOutcome::Buffered(_) = self.deliver(q, frame, flags & 0xFFF0_0000, hash, flags & 0xF) {
                // Did not fit after all (multi-descriptor frame): it is last now; stop.
                return;
            }
        }
    }

    /// Runs queue `q`'s transmit engine from TDH to TDT.
    pub(crate) fn run_tx(&mut self, q: usize) {
        let block = 0x06000 + 0x40 * q;
        if self.reg(off::DMATXCTL) & 1 == 0 || !self.txq[q].enabled {
            return;
        }
        let base = self.reg(block) as u64 | (self.reg(block + 4) as u64) << 32;
        let n = self.tx_ring_len(q);
        let tail = self.reg(block + 0x18);
        let mut done = 0;
        while self.txq[q].head != tail && self.tx_budget.is_none_or(|b| done < b) && n > 0 {
            let head = self.txq[q].head;
            let d = base + 16 * head as u64;
            let (addr, cmd, olinfo) = (self.host.r64(d), self.host.r32(d + 8), self.host.r32(d + 12));
            let len = (cmd & 0xFFFF) as usize;
            if (cmd >> 20) & 0xF != 3 || cmd & 1 << 29 == 0 {
                self.violations
                    .push(format!("TX queue {q} descriptor {head}: not an advanced data descriptor ({cmd:#x})"));
            }
            let mut bytes = vec![0u8; len];
            if !self.host.dev_read(addr, &mut bytes) {
                self.violations.push(format!("TX queue {q} descriptor {head}: buffer {addr:#x}+{len} outside memory"));
            }
            let first = self.txq[q].partial.is_empty();
            self.txq[q].partial.extend_from_slice(&bytes);
            if first && (olinfo >> 14) as usize != 0 && cmd & 1 << 24 != 0 && (olinfo >> 14) as usize != len {
                self.violations.push(format!("TX queue {q} descriptor {head}: PAYLEN {} != {len}", olinfo >> 14));
            }
            if cmd & 1 << 24 != 0 {
                if cmd & 1 << 25 == 0 {
                    self.violations.push(format!("TX queue {q} descriptor {head}: EOP without IFCS"));
                }
                let frame = std::mem::take(&mut self.txq[q].partial);
                self.gptc += 1;
                self.gotc += frame.len() as u64 + 4;
                self.tx_frames.push((q as u16, frame));
            }
            if cmd & 1 << 27 != 0 && !self.host.dev_write(d + 12, &1u32.to_le_bytes()) {
                self.violations.push(format!("TX queue {q}: descriptor {d:#x} outside memory"));
            }
            self.txq[q].head = (head + 1) % n;
            done += 1;
        }
    }
}
