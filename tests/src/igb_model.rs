//! A small register-level model of the 82576 as QEMU's `igb` behaves, for host tests of
//! `cadence_drivers::igb` (offsets typed from the 82576 datasheet / QEMU `igb_regs.h`,
//! not imported from the driver).
//!
//! Modeled: CTRL.RST (self-clearing after a few reads), the link coming up only after
//! an auto-negotiation restart through MDIC (PHY 1, BMCR.ANRESTART), RCTL/TCTL enables,
//! queue blocks at 0x0C000/0x0E000 + 0x40n with ENABLE read-back delays, RSS only when
//! MRQC.MRQE = 010b and RXCSUM.PCSD = 1 (Toeplitz over the MRQC fields, 4-bit RETA
//! entries), DROP_EN (SRRCTL bit 31) with RQDPC, and DD written last. Long packets: without
//! RCTL.LPE a frame over 1 522 bytes is dropped (`oversized`), with it one over RLPML − 4
//! (RLPML counts the CRC); a frame longer than SRRCTL.BSIZEPACKET spans descriptors, EOP on
//! its last, each with its own length (dropped when the ring has too few); a transmitted
//! frame is the descriptors up to EOP.
//!
//! Checked (violations): RDT bumped before RXDCTL.ENABLE read back; RCTL.EN with DTYP ≠
//! 0, or with LPE but RLPML not above 1 526; ring base/length alignment; SRRCTL not
//! advanced one-buffer at enable; DMA outside allocated memory; bad TX descriptors;
//! sub-dword register accesses.

use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::rc::Rc;

use cadence_core::parse::{IpAddr, L4Kind, parse};
use cadence_core::rss::toeplitz;

use crate::model_host::{BarDevice, FakePci, Host};

/// Queues of each direction.
pub const QUEUES: usize = 16;
const CTRL: usize = 0x0000;
const STATUS: usize = 0x0008;
const MDIC: usize = 0x0020;
const RCTL: usize = 0x0100;
const TCTL: usize = 0x0400;
const RXCSUM: usize = 0x5000;
const RLPML: usize = 0x5004;
const MRQC: usize = 0x5818;
const RETA: usize = 0x5C00;
const RSSRK: usize = 0x5C80;
const RAL0: usize = 0x5400;
const RAH0: usize = 0x5404;
const RX_BASE: usize = 0x0C000;
const TX_BASE: usize = 0x0E000;
const DELAY_READS: u32 = 2;

#[derive(Debug, Clone, Default)]
struct Q {
    enabled: bool,
    delay: u32,
    seen: bool,
    head: u32,
}

/// The 82576's state and observations.
#[derive(Debug)]
pub struct IgbDevice {
    host: Rc<Host>,
    regs: HashMap<usize, u32>,
    mac: [u8; 6],
    rst_delay: u32,
    /// STATUS.LU.
    pub link_up: bool,
    rxq: Vec<Q>,
    txq: Vec<Q>,
    /// Frames each receive queue got.
    pub rx_per_queue: [u64; QUEUES],
    /// Frames dropped by DROP_EN, per queue (RQDPC).
    pub rqdpc: [u64; QUEUES],
    /// Frames sent: (queue, bytes).
    pub tx_frames: Vec<(u16, Vec<u8>)>,
    /// Frames dropped as longer than the long-packet settings allow.
    pub oversized: u64,
    /// The bytes of a transmitted frame before its EOP descriptor, per queue.
    tx_partial: Vec<Vec<u8>>,
    /// Protocol violations.
    pub violations: Vec<String>,
}

impl IgbDevice {
    fn reset(&mut self) {
        self.regs.clear();
        let [a, b, c, d, e, f] = self.mac;
        self.regs.insert(RAL0, u32::from_le_bytes([a, b, c, d]));
        self.regs.insert(RAH0, u32::from_le_bytes([e, f, 0, 0]) | 1 << 31);
        // QEMU: RXDCTL0 and TXDCTL0 come out of reset enabled; RXCSUM IPOFLD|TUOFLD.
        self.regs.insert(RXCSUM, 0x300);
        self.link_up = false;
        self.rxq = vec![Q::default(); QUEUES];
        self.txq = vec![Q::default(); QUEUES];
        self.tx_partial = vec![Vec::new(); QUEUES];
    }

    fn reg(&self, o: usize) -> u32 {
        self.regs.get(&o).copied().unwrap_or(0)
    }

    fn ring(&self, block: usize) -> (u64, u32) {
        (self.reg(block) as u64 | (self.reg(block + 4) as u64) << 32, self.reg(block + 8) / 16)
    }

    fn read(&mut self, o: usize) -> u32 {
        match o {
            CTRL => {
                let v = self.reg(o);
                if self.rst_delay > 0 {
                    self.rst_delay -= 1;
                    v | 1 << 26
                } else {
                    v
                }
            }
            STATUS => (self.link_up as u32) << 1 | 2 << 6,
            _ => {
                for (base, is_rx) in [(RX_BASE, true), (TX_BASE, false)] {
                    if (base..base + 0x40 * QUEUES).contains(&o) {
                        let (q, r) = ((o - base) / 0x40, (o - base) % 0x40);
                        let qs = if is_rx { &mut self.rxq[q] } else { &mut self.txq[q] };
                        match r {
                            0x10 => return qs.head,
                            0x28 => {
                                let mut v = self.regs.get(&o).copied().unwrap_or(0) & !(1 << 25);
                                if qs.enabled {
                                    if qs.delay > 0 {
                                        qs.delay -= 1;
                                    } else {
                                        qs.seen = true;
                                        v |= 1 << 25;
                                    }
                                }
                                return v;
                            }
                            0x30 if is_rx => return std::mem::take(&mut self.rqdpc[q]) as u32,
                            _ => {}
                        }
                    }
                }
                self.reg(o)
            }
        }
    }

    fn write(&mut self, o: usize, v: u32) {
        match o {
            CTRL if v & 1 << 26 != 0 => {
                self.reset();
                self.rst_delay = DELAY_READS;
                self.regs.insert(CTRL, v & !(1 << 26));
            }
            MDIC => {
                let (data, reg, phy, op) = (v & 0xFFFF, (v >> 16) & 0x1F, (v >> 21) & 0x1F, (v >> 26) & 3);
                if phy == 1 && op == 1 && reg == 0 && data & 1 << 9 != 0 && data & 1 << 12 != 0 {
                    self.link_up = true;
                }
                self.regs.insert(MDIC, v | 1 << 28);
            }
            RCTL => {
                let lpe_unset = v & 1 << 5 != 0 && self.reg(RLPML) & 0x3FFF <= 1526;
                if v & 2 != 0 && ((v >> 10) & 3 != 0 || lpe_unset) {
                    self.violations.push(format!("RCTL.EN with DTYP set, or LPE without RLPML: {v:#x}"));
                }
                self.regs.insert(o, v);
            }
            _ => {
                for (base, is_rx) in [(RX_BASE, true), (TX_BASE, false)] {
                    if (base..base + 0x40 * QUEUES).contains(&o) {
                        let (q, r) = ((o - base) / 0x40, (o - base) % 0x40);
                        return self.write_queue(is_rx, q, r, o, v);
                    }
                }
                self.regs.insert(o, v);
            }
        }
    }

    fn write_queue(&mut self, is_rx: bool, q: usize, r: usize, o: usize, v: u32) {
        let block = o - r;
        match r {
            0x10 => {
                let qs = if is_rx { &mut self.rxq[q] } else { &mut self.txq[q] };
                qs.head = v;
            }
            0x18 => {
                let seen = if is_rx { self.rxq[q].seen } else { self.txq[q].enabled };
                if v != 0 && !seen {
                    self.violations
                        .push(format!("tail of {} queue {q} bumped before ENABLE", if is_rx { "RX" } else { "TX" }));
                }
                self.regs.insert(o, v);
                if !is_rx {
                    self.run_tx(q);
                }
            }
            0x28 if v & 1 << 25 != 0 => {
                let (base, n) = self.ring(block);
                if !base.is_multiple_of(128) || n == 0 || !(n * 16).is_multiple_of(128) {
                    self.violations.push(format!("queue {q}: ring {base:#x} len {} misaligned", n * 16));
                }
                if !self.host.device_may_access(base, n as usize * 16) {
                    self.violations.push(format!("queue {q}: ring outside allocated memory"));
                }
                if is_rx && (self.reg(block + 0x0C) >> 25) & 7 != 1 {
                    self.violations.push(format!("SRRCTL({q}) not advanced one-buffer"));
                }
                let qs = if is_rx { &mut self.rxq[q] } else { &mut self.txq[q] };
                if !qs.enabled {
                    qs.delay = DELAY_READS;
                }
                qs.enabled = true;
                self.regs.insert(o, v);
            }
            _ => {
                self.regs.insert(o, v);
            }
        }
    }

    fn queue_for(&self, frame: &[u8]) -> usize {
        let mrqc = self.reg(MRQC);
        if mrqc & 3 != 2 || self.reg(RXCSUM) & 1 << 13 == 0 {
            return 0;
        }
        let Ok(p) = parse(frame) else { return 0 };
        let mut key = [0u8; 40];
        for (i, k) in key.chunks_exact_mut(4).enumerate() {
            k.copy_from_slice(&self.reg(RSSRK + 4 * i).to_le_bytes());
        }
        let f = p.flow;
        let ports = [f.src_port.to_be_bytes(), f.dst_port.to_be_bytes()].concat();
        let (tcp, udp) = (matches!(p.l4, L4Kind::Tcp), matches!(p.l4, L4Kind::Udp));
        let input: Vec<u8> = match (f.src, f.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) if (tcp && mrqc & 1 << 16 != 0) || (udp && mrqc & 1 << 22 != 0) => {
                [&s[..], &d, &ports].concat()
            }
            (IpAddr::V4(s), IpAddr::V4(d)) if mrqc & 1 << 17 != 0 => [&s[..], &d].concat(),
            (IpAddr::V6(s), IpAddr::V6(d)) if (tcp && mrqc & 1 << 18 != 0) || (udp && mrqc & 1 << 23 != 0) => {
                [&s[..], &d, &ports].concat()
            }
            (IpAddr::V6(s), IpAddr::V6(d)) if mrqc & 1 << 20 != 0 => [&s[..], &d].concat(),
            _ => return 0,
        };
        let hash = toeplitz(&key, &input).unwrap_or(0);
        let i = (hash & 0x7F) as usize;
        ((self.reg(RETA + 4 * (i / 4)) >> (8 * (i % 4))) & 0xF) as usize
    }

    /// Receives `frame`; returns the queue it landed in, if any.
    pub fn receive(&mut self, frame: &[u8]) -> Option<usize> {
        if !self.link_up || self.reg(RCTL) & 2 == 0 {
            return None;
        }
        let q = self.queue_for(frame);
        let block = RX_BASE + 0x40 * q;
        let (base, n) = self.ring(block);
        let tail = self.reg(block + 0x18);
        if !self.rxq[q].enabled || n == 0 || self.rxq[q].head == tail {
            if self.reg(block + 0x0C) & 1 << 31 != 0 {
                self.rqdpc[q] += 1;
            }
            return None;
        }
        let longest = if self.reg(RCTL) & 1 << 5 != 0 { (self.reg(RLPML) & 0x3FFF) as usize - 4 } else { 1522 };
        if frame.len() > longest {
            self.oversized += 1;
            return None;
        }
        let bsize = ((self.reg(block + 0x0C) & 0x7F) as usize * 1024).max(1024);
        let pieces = frame.len().div_ceil(bsize).max(1);
        let free = (tail + n - self.rxq[q].head) % n;
        if (free as usize) < pieces {
            if self.reg(block + 0x0C) & 1 << 31 != 0 {
                self.rqdpc[q] += 1;
            }
            return None;
        }
        for (k, piece) in frame.chunks(bsize).enumerate() {
            let head = self.rxq[q].head;
            let d = base + 16 * head as u64;
            let addr = self.host.r64(d);
            // Status: DD, and EOP on the last piece.
            let status = if k + 1 == pieces { 3u32 } else { 1 };
            let ok = self.host.dev_write(addr, piece)
                && self.host.dev_write(d, &0u64.to_le_bytes())
                && self.host.dev_write(d + 12, &(piece.len() as u32).to_le_bytes())
                && self.host.dev_write(d + 8, &status.to_le_bytes());
            if !ok {
                self.violations.push(format!("RX queue {q}: DMA outside allocated memory at {addr:#x}"));
            }
            self.rxq[q].head = (head + 1) % n;
        }
        self.rx_per_queue[q] += 1;
        Some(q)
    }

    fn run_tx(&mut self, q: usize) {
        if self.reg(TCTL) & 2 == 0 || !self.txq[q].enabled {
            return;
        }
        let block = TX_BASE + 0x40 * q;
        let (base, n) = self.ring(block);
        let tail = self.reg(block + 0x18);
        while self.txq[q].head != tail && n > 0 {
            let head = self.txq[q].head;
            let d = base + 16 * head as u64;
            let (addr, cmd) = (self.host.r64(d), self.host.r32(d + 8));
            if (cmd >> 20) & 0xF != 3 || cmd & 1 << 29 == 0 || cmd & 1 << 25 == 0 || cmd & 0xFFFF == 0 {
                self.violations.push(format!("TX queue {q} descriptor {head}: {cmd:#x}"));
            }
            let mut bytes = vec![0u8; (cmd & 0xFFFF) as usize];
            if !self.host.dev_read(addr, &mut bytes) {
                self.violations.push(format!("TX queue {q}: buffer {addr:#x} outside memory"));
            }
            self.tx_partial[q].extend_from_slice(&bytes);
            if cmd & 1 << 24 != 0 {
                let frame = std::mem::take(&mut self.tx_partial[q]);
                self.tx_frames.push((q as u16, frame));
            }
            if cmd & 1 << 27 != 0 {
                self.host.dev_write(d + 12, &1u32.to_le_bytes());
            }
            self.txq[q].head = (head + 1) % n;
        }
    }
}

impl BarDevice for IgbDevice {
    fn read32(&mut self, off: usize) -> u32 {
        self.read(off)
    }
    fn write32(&mut self, off: usize, v: u32) {
        self.write(off, v)
    }
    fn violation(&mut self, what: String) {
        self.violations.push(what);
    }
}

/// The test's handle on one igb port.
#[derive(Debug, Clone)]
pub struct Igb82576 {
    dev: Rc<RefCell<IgbDevice>>,
}

impl Igb82576 {
    /// A port with MAC `mac` on `host`'s memory.
    pub fn new(host: &Rc<Host>, mac: [u8; 6]) -> Self {
        let mut d = IgbDevice {
            host: Rc::clone(host),
            regs: HashMap::new(),
            mac,
            rst_delay: 0,
            link_up: false,
            rxq: Vec::new(),
            txq: Vec::new(),
            rx_per_queue: [0; QUEUES],
            rqdpc: [0; QUEUES],
            tx_frames: Vec::new(),
            oversized: 0,
            tx_partial: vec![Vec::new(); QUEUES],
            violations: Vec::new(),
        };
        d.reset();
        Self { dev: Rc::new(RefCell::new(d)) }
    }

    /// A PCI function in front of it (8086:10c9).
    pub fn pci(&self) -> FakePci<IgbDevice> {
        FakePci::new(Rc::clone(&self.dev), 0x8086, 0x10C9, 0x20000)
    }

    /// State and observations.
    pub fn dev(&self) -> RefMut<'_, IgbDevice> {
        self.dev.borrow_mut()
    }

    /// Receives `frame` from the wire.
    pub fn inject(&self, frame: &[u8]) -> Option<usize> {
        self.dev().receive(frame)
    }

    /// Panics with the recorded violations, if any.
    pub fn assert_clean(&self) {
        let d = self.dev.borrow();
        assert!(d.violations.is_empty(), "igb model saw violations: {:#?}", d.violations);
    }
}
