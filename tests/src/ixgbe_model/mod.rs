//! A register-level model of the Intel 82599 for host tests of `cadence_drivers::ixgbe`.
//!
//! Written from the datasheet, independently of the driver: offsets and bits here are
//! typed from the 82599 datasheet (rev. 3.3) register summary, not imported from the
//! driver, so that a wrong constant in the driver shows up as a violation.
//!
//! - Register file with reset values; CTRL.RST resets everything and self-clears after
//!   a few reads; EEC.ARD, RDRXCTL.DMAIDONE, SECRXSTAT.SECRX_RDY and the queue ENABLE
//!   bits take a few reads to appear (so a driver that does not poll fails).
//! - Link (§4.6.4): a board with an SFP+ cage reports the module on ESDP.SDP2; the
//!   link comes up only after software restarted auto-negotiation (AUTOC.RESTART_AN,
//!   self-clearing) with a module in the cage and a partner on the cable, a few LINKS
//!   reads later; pulling the cable takes it down, plugging it back brings it up.
//! - Clear-on-read statistics (GPRC, GPTC, GORC/GOTC as 36-bit L/H pairs, MPC,
//!   CRCERRS, QPRC, QPRDC).
//! - RX engine (`engine`): an injected frame passes the MAC filter, gets a Toeplitz
//!   hash over the MRQC-enabled fields with the RSSRK key (`cadence_core::rss`), a
//!   queue from the 128-entry RETA (4-bit entries), and lands in the next descriptor:
//!   buffer, then the write-back with DD written last. No descriptor: DROP_EN drops
//!   and counts QPRDC, otherwise the frame waits in the packet buffer (MPC when full).
//! - TX engine: on a TDT write (or [`Ixgbe82599::step`] when paused), descriptors from
//!   TDH to TDT are read, frames gathered to EOP, DD written back for RS descriptors.
//!
//! Ordering rules it checks (each breach is a violation; tests assert none):
//! tail bumped before RXDCTL.ENABLE was read back as 1; FCTRL written while
//! RXCTRL.RXEN = 1; RXEN set without SECRXCTRL.RX_DIS, with CRC-strip settings that
//! disagree, or before DMAIDONE was seen; TXDCTL.ENABLE before DMATXCTL.TE; TXPBSIZE
//! changed without RTTDCS.ARBDIS; ring base not 128-byte aligned; RDLEN/TDLEN not a
//! multiple of 128; ring registers changed while the queue is enabled; DCA_RXCTRL bit
//! 12 left set on an enabled queue; GORCH/GOTCH read before GORCL/GOTCL; bad TX
//! descriptors (DTYP, DEXT, IFCS, PAYLEN); any DMA outside allocated memory;
//! sub-dword register accesses; interrupts left unmasked; AUTOC's link mode changed
//! from what the EEPROM loaded.

mod engine;

use std::cell::{RefCell, RefMut};
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

use crate::model_host::{BarDevice, FakePci, Host};

pub use engine::RxOutcome;

/// Register offsets (82599 datasheet table 8-3).
pub mod off {
    pub const CTRL: usize = 0x00000;
    pub const STATUS: usize = 0x00008;
    pub const CTRL_EXT: usize = 0x00018;
    pub const ESDP: usize = 0x00020;
    pub const EIMS: usize = 0x00880;
    pub const EIMC: usize = 0x00888;
    pub const RDRXCTL: usize = 0x02F00;
    pub const RXCTRL: usize = 0x03000;
    pub const FCRTH0: usize = 0x03260;
    pub const RXPBSIZE0: usize = 0x03C00;
    pub const MPC0: usize = 0x03FA0;
    pub const CRCERRS: usize = 0x04000;
    pub const GPRC: usize = 0x04074;
    pub const GPTC: usize = 0x04080;
    pub const GORCL: usize = 0x04088;
    pub const GORCH: usize = 0x0408C;
    pub const GOTCL: usize = 0x04090;
    pub const GOTCH: usize = 0x04094;
    pub const HLREG0: usize = 0x04240;
    pub const MAXFRS: usize = 0x04268;
    pub const AUTOC: usize = 0x042A0;
    pub const LINKS: usize = 0x042A4;
    pub const RTTDCS: usize = 0x04900;
    pub const DMATXCTL: usize = 0x04A80;
    pub const RXCSUM: usize = 0x05000;
    pub const FCTRL: usize = 0x05080;
    pub const MRQC: usize = 0x05818;
    pub const RETA: usize = 0x05C00;
    pub const RSSRK: usize = 0x05C80;
    pub const SECRXCTRL: usize = 0x08D00;
    pub const SECRXSTAT: usize = 0x08D04;
    pub const RAL0: usize = 0x0A200;
    pub const RAH0: usize = 0x0A204;
    pub const TXPBSIZE0: usize = 0x0CC00;
    pub const EEC: usize = 0x10010;
}

/// Queues modeled (the RSS reach of the 82599).
pub const QUEUES: usize = 16;
/// Frames the packet buffer holds when DROP_EN is off.
pub const PB_FRAMES: usize = 64;
/// Reads before a delayed status bit appears.
const DELAY_READS: u32 = 3;
/// LINKS reads between an auto-negotiation restart and the link coming up.
const LINK_READS: u32 = 5;
/// AUTOC as the EEPROM loads it on an SFP+ board: LMS (15:13) = 011b, 10 GbE serial.
pub const AUTOC_EEPROM: u32 = 0b011 << 13;

/// One receive queue, device side.
#[derive(Debug, Clone, Default)]
pub struct RxQ {
    /// RXDCTL.ENABLE was written 1.
    pub enabled: bool,
    /// Reads left before ENABLE reads back 1.
    enable_delay: u32,
    /// The driver read ENABLE back as 1.
    pub enable_seen: bool,
    /// RDH.
    pub head: u32,
}

/// One transmit queue, device side.
#[derive(Debug, Clone, Default)]
pub struct TxQ {
    /// TXDCTL.ENABLE was written 1.
    pub enabled: bool,
    enable_delay: u32,
    /// TDH.
    pub head: u32,
    /// Bytes of a frame gathered so far (non-EOP descriptors).
    partial: Vec<u8>,
}

/// The 82599's state, knobs and observations.
#[derive(Debug)]
pub struct Device {
    host: Rc<Host>,
    regs: HashMap<usize, u32>,
    /// Permanent MAC (RAL0/RAH0 after reset).
    pub mac: [u8; 6],
    rst_delay: u32,
    ard_delay: u32,
    dmaidone_delay: u32,
    secrx_delay: u32,
    dmaidone_seen: bool,
    eims: u32,
    /// Receive queues.
    pub rxq: Vec<RxQ>,
    /// Transmit queues.
    pub txq: Vec<TxQ>,
    // Counters (clear on read through their registers).
    pub(crate) gprc: u64,
    pub(crate) gptc: u64,
    pub(crate) gorc: u64,
    pub(crate) gotc: u64,
    pub(crate) mpc: u64,
    pub(crate) crcerrs: u64,
    pub(crate) qprc: [u64; QUEUES],
    pub(crate) qprdc: [u64; QUEUES],
    gorcl_read: bool,
    gotcl_read: bool,
    /// Frames waiting in the packet buffer (DROP_EN off), with their queue.
    pub(crate) packet_buffer: VecDeque<(usize, Vec<u8>, u32)>,
    /// TDT writes do not run the TX engine; [`Ixgbe82599::step`] does.
    pub tx_paused: bool,
    /// Descriptors the TX engine processes per queue per run (`None`: all).
    pub tx_budget: Option<usize>,
    /// Frames sent: (queue, bytes).
    pub tx_frames: Vec<(u16, Vec<u8>)>,
    /// Protocol violations seen.
    pub violations: Vec<String>,
    /// Resets seen.
    pub resets: u32,
    /// CTRL.RST never self-clears (a wedged device).
    pub stuck_reset: bool,
    /// RETA register writes seen.
    pub reta_writes: u32,
    /// Register reads and writes through BAR 0 so far (the forwarding bench counts
    /// the ones a poll makes).
    pub register_accesses: (u64, u64),
    /// A module sits in the SFP+ cage (ESDP.SDP2 reads 1). Default true.
    pub sfp_module: bool,
    /// A link partner is on the cable. Default true.
    pub partner: bool,
    /// Auto-negotiation was restarted since the last reset.
    an_restarted: bool,
    /// LINKS reads left before the link comes up.
    link_delay: u32,
    /// The link is up.
    pub link_up: bool,
}

impl Device {
    fn new(host: Rc<Host>, mac: [u8; 6]) -> Self {
        let mut d = Self {
            host,
            regs: HashMap::new(),
            mac,
            rst_delay: 0,
            ard_delay: 0,
            dmaidone_delay: 0,
            secrx_delay: 0,
            dmaidone_seen: false,
            eims: 0,
            rxq: Vec::new(),
            txq: Vec::new(),
            gprc: 0,
            gptc: 0,
            gorc: 0,
            gotc: 0,
            mpc: 0,
            crcerrs: 0,
            qprc: [0; QUEUES],
            qprdc: [0; QUEUES],
            gorcl_read: false,
            gotcl_read: false,
            packet_buffer: VecDeque::new(),
            tx_paused: false,
            tx_budget: None,
            tx_frames: Vec::new(),
            violations: Vec::new(),
            resets: 0,
            stuck_reset: false,
            reta_writes: 0,
            register_accesses: (0, 0),
            sfp_module: true,
            partner: true,
            an_restarted: false,
            link_delay: 0,
            link_up: false,
        };
        d.reset();
        d.resets = 0;
        d
    }

    /// Power-on / CTRL.RST state.
    fn reset(&mut self) {
        self.resets += 1;
        self.regs.clear();
        // Reset values (datasheet §8.2.3): HLREG0 TXCRCEN | RXCRCSTRP | TXPADEN, packet
        // buffers 512 / 160 KiB in PB 0, DCA_RXCTRL with bit 12 set, SRRCTL 2 KiB
        // buffers with legacy descriptors, EEPROM present.
        self.regs.insert(off::HLREG0, 0x0000_0403);
        // MAXFRS.MFS 1 518 (§8.2.3.22.13).
        self.regs.insert(off::MAXFRS, 1518 << 16);
        self.regs.insert(off::RXPBSIZE0, 512 << 10);
        self.regs.insert(off::TXPBSIZE0, 160 << 10);
        self.regs.insert(off::EEC, 1 << 8);
        self.regs.insert(off::AUTOC, AUTOC_EEPROM);
        self.regs.insert(off::SECRXSTAT, 0);
        for q in 0..QUEUES {
            self.regs.insert(rx_block(q) + 0x0C, 1 << 12);
            self.regs.insert(rx_block(q) + 0x14, 0x0000_0402);
        }
        let [a, b, c, d, e, f] = self.mac;
        self.regs.insert(off::RAL0, u32::from_le_bytes([a, b, c, d]));
        self.regs.insert(off::RAH0, u32::from_le_bytes([e, f, 0, 0]) | 1 << 31);
        self.rst_delay = 0;
        self.ard_delay = DELAY_READS;
        self.dmaidone_delay = DELAY_READS;
        self.dmaidone_seen = false;
        self.eims = 0;
        self.rxq = vec![RxQ::default(); QUEUES];
        self.txq = vec![TxQ::default(); QUEUES];
        self.packet_buffer.clear();
        self.gorcl_read = false;
        self.gotcl_read = false;
        self.an_restarted = false;
        self.link_up = false;
    }

    /// LINKS: the link comes up `LINK_READS` reads after an auto-negotiation restart
    /// with a module and a partner; without either it is down.
    fn links(&mut self) -> u32 {
        if !(self.sfp_module && self.partner && self.an_restarted) {
            self.link_up = false;
        } else if !self.link_up {
            if self.link_delay > 0 {
                self.link_delay -= 1;
            } else {
                self.link_up = true;
            }
        }
        if self.link_up { 1 << 30 | 3 << 28 } else { 0 }
    }

    /// Pulls the cable (`false`) or plugs it back (`true`); a plugged link comes up
    /// again after a few LINKS reads.
    pub fn set_partner(&mut self, on: bool) {
        self.partner = on;
        if on {
            self.link_delay = LINK_READS;
        }
    }

    /// The raw value of register `o` (no read side effects).
    pub fn reg(&self, o: usize) -> u32 {
        self.regs.get(&o).copied().unwrap_or(0)
    }

    fn set(&mut self, o: usize, v: u32) {
        self.regs.insert(o, v);
    }

    fn rx_enabled(&self) -> bool {
        self.reg(off::RXCTRL) & 1 != 0
    }

    fn read(&mut self, o: usize) -> u32 {
        let countdown = |c: &mut u32| {
            if *c > 0 {
                *c -= 1;
                false
            } else {
                true
            }
        };
        match o {
            off::CTRL => {
                let v = self.reg(o);
                if countdown(&mut self.rst_delay) { v } else { v | 1 << 26 }
            }
            off::STATUS => {
                // GIO master enable status: clear once CTRL.GIO_DIS stopped requests.
                if self.reg(off::CTRL) & 1 << 2 != 0 { 0 } else { 1 << 19 }
            }
            off::EEC => self.reg(o) | if countdown(&mut self.ard_delay) { 1 << 9 } else { 0 },
            off::RDRXCTL => {
                let done = countdown(&mut self.dmaidone_delay);
                self.dmaidone_seen |= done;
                self.reg(o) | if done { 1 << 3 } else { 0 }
            }
            off::SECRXSTAT => {
                let rdy = self.reg(off::SECRXCTRL) & 1 << 1 != 0 && countdown(&mut self.secrx_delay);
                rdy as u32
            }
            off::LINKS => self.links(),
            off::ESDP => self.reg(o) & !(1 << 2) | if self.sfp_module { 1 << 2 } else { 0 },
            off::GPRC => std::mem::take(&mut self.gprc) as u32,
            off::GPTC => std::mem::take(&mut self.gptc) as u32,
            off::CRCERRS => std::mem::take(&mut self.crcerrs) as u32,
            off::GORCL => {
                self.gorcl_read = true;
                self.gorc as u32
            }
            off::GORCH => {
                if !std::mem::take(&mut self.gorcl_read) {
                    self.violations.push("GORCH read before GORCL".into());
                }
                (std::mem::take(&mut self.gorc) >> 32) as u32 & 0xF
            }
            off::GOTCL => {
                self.gotcl_read = true;
                self.gotc as u32
            }
            off::GOTCH => {
                if !std::mem::take(&mut self.gotcl_read) {
                    self.violations.push("GOTCH read before GOTCL".into());
                }
                (std::mem::take(&mut self.gotc) >> 32) as u32 & 0xF
            }
            o if (off::MPC0..off::MPC0 + 32).contains(&o) => {
                if o == off::MPC0 {
                    std::mem::take(&mut self.mpc) as u32
                } else {
                    0
                }
            }
            o => {
                if let Some((q, r)) = queue_reg(o, 0x01000) {
                    match r {
                        0x10 => return self.rxq[q].head,
                        0x28 => {
                            let mut v = self.reg(o) & !(1 << 25);
                            let rq = &mut self.rxq[q];
                            if rq.enabled && countdown(&mut rq.enable_delay) {
                                rq.enable_seen = true;
                                v |= 1 << 25;
                            }
                            return v;
                        }
                        0x30 => return std::mem::take(&mut self.qprc[q]) as u32,
                        _ => {}
                    }
                }
                if let Some((q, 0x30)) = queue_reg(o, 0x01400) {
                    return std::mem::take(&mut self.qprdc[q]) as u32;
                }
                if let Some((q, r)) = queue_reg(o, 0x06000) {
                    match r {
                        0x10 => return self.txq[q].head,
                        0x28 => {
                            let mut v = self.reg(o) & !(1 << 25);
                            let tq = &mut self.txq[q];
                            if tq.enabled && countdown(&mut tq.enable_delay) {
                                v |= 1 << 25;
                            }
                            return v;
                        }
                        _ => {}
                    }
                }
                self.reg(o)
            }
        }
    }

    fn write(&mut self, o: usize, v: u32) {
        match o {
            off::CTRL => {
                if v & 1 << 26 != 0 {
                    self.reset();
                    self.rst_delay = if self.stuck_reset { u32::MAX } else { DELAY_READS };
                    self.set(o, v & !(1 << 26 | 1 << 3 | 1 << 2));
                } else {
                    self.set(o, v);
                }
            }
            off::EIMS => self.eims |= v,
            off::AUTOC => {
                if (v >> 13) & 0b111 != (self.reg(o) >> 13) & 0b111 {
                    self.violations.push(format!("AUTOC.LMS changed from the EEPROM's value: {v:#x}"));
                }
                if v & 1 << 12 != 0 {
                    self.an_restarted = true;
                    self.link_delay = LINK_READS;
                }
                // RESTART_AN clears itself.
                self.set(o, v & !(1 << 12));
            }
            o if (off::RETA..off::RETA + 128).contains(&o) => {
                self.reta_writes += 1;
                self.set(o, v);
            }
            off::EIMC => self.eims &= !v,
            off::RDRXCTL => self.set(o, v & !(1 << 3)),
            off::FCTRL => {
                if self.rx_enabled() {
                    self.violations.push("FCTRL written while RXCTRL.RXEN = 1".into());
                }
                self.set(o, v);
            }
            off::RXCTRL => {
                if v & 1 != 0 && !self.rx_enabled() {
                    self.check_rx_enable();
                }
                self.set(o, v);
                self.drain_packet_buffer();
            }
            off::SECRXCTRL => {
                if v & 1 << 1 != 0 && self.reg(o) & 1 << 1 == 0 {
                    self.secrx_delay = DELAY_READS;
                }
                self.set(o, v);
            }
            o if (off::TXPBSIZE0..off::TXPBSIZE0 + 32).contains(&o) => {
                if self.reg(off::RTTDCS) & 1 << 6 == 0 && v != self.reg(o) {
                    self.violations.push(format!("TXPBSIZE {o:#x} changed without RTTDCS.ARBDIS"));
                }
                self.set(o, v);
            }
            o => {
                if let Some((q, r)) = queue_reg(o, 0x01000) {
                    return self.write_rxq(q, r, o, v);
                }
                if let Some((q, r)) = queue_reg(o, 0x06000) {
                    return self.write_txq(q, r, o, v);
                }
                self.set(o, v);
            }
        }
    }

    fn check_rx_enable(&mut self) {
        if self.reg(off::SECRXCTRL) & 1 << 1 == 0 {
            self.violations.push("RXCTRL.RXEN set without SECRXCTRL.RX_DIS".into());
        }
        if !self.dmaidone_seen {
            self.violations.push("RXCTRL.RXEN set before RDRXCTL.DMAIDONE was seen".into());
        }
        let strip_mac = self.reg(off::HLREG0) & 1 << 1 != 0;
        let strip_dma = self.reg(off::RDRXCTL) & 1 << 1 != 0;
        if strip_mac != strip_dma {
            self.violations.push("HLREG0.RXCRCSTRP and RDRXCTL.CRCSTRIP disagree".into());
        }
        if self.reg(off::FCRTH0) == 0 {
            self.violations.push("FCRTH(0) not set".into());
        }
        for q in 0..QUEUES {
            if self.rxq[q].enabled && self.reg(rx_block(q) + 0x0C) & 1 << 12 != 0 {
                self.violations.push(format!("DCA_RXCTRL({q}) bit 12 still set"));
            }
        }
    }

    fn check_ring(&mut self, what: &str, q: usize, base: u64, len: u32) {
        if !base.is_multiple_of(128) {
            self.violations.push(format!("{what}({q}) ring base {base:#x} not 128-byte aligned"));
        }
        if len == 0 || !len.is_multiple_of(128) {
            self.violations.push(format!("{what}({q}) ring length {len} not a multiple of 128"));
        }
        if !self.host.device_may_access(base, len as usize) {
            self.violations.push(format!("{what}({q}) ring {base:#x}+{len} outside allocated memory"));
        }
    }

    fn write_rxq(&mut self, q: usize, r: usize, o: usize, v: u32) {
        let enabled = self.rxq[q].enabled;
        match r {
            0x00 | 0x04 | 0x08 | 0x14 if enabled => {
                self.violations.push(format!("RX queue {q} register {r:#x} written while enabled"));
                self.set(o, v);
            }
            0x10 => self.rxq[q].head = v,
            0x18 => {
                if v != 0 && !self.rxq[q].enable_seen {
                    self.violations.push(format!("RDT({q}) bumped before RXDCTL.ENABLE read back as 1"));
                }
                if v >= self.rx_ring_len(q).max(1) {
                    self.violations.push(format!("RDT({q}) = {v} outside the ring"));
                }
                self.set(o, v);
                self.drain_packet_buffer();
            }
            0x28 => {
                let on = v & 1 << 25 != 0;
                if on && !enabled {
                    let base = self.reg(o - 0x28) as u64 | (self.reg(o - 0x24) as u64) << 32;
                    let len = self.reg(o - 0x20);
                    self.check_ring("RDBA", q, base, len);
                    let srrctl = self.reg(rx_block(q) + 0x14);
                    if (srrctl >> 25) & 7 != 1 || srrctl & 0x7F == 0 {
                        self.violations.push(format!("SRRCTL({q}) = {srrctl:#x}: not advanced one-buffer"));
                    }
                    self.rxq[q].enable_delay = DELAY_READS;
                    self.rxq[q].enable_seen = false;
                }
                self.rxq[q].enabled = on;
                self.set(o, v);
            }
            _ => self.set(o, v),
        }
    }

    fn write_txq(&mut self, q: usize, r: usize, o: usize, v: u32) {
        let enabled = self.txq[q].enabled;
        match r {
            0x00 | 0x04 | 0x08 if enabled => {
                self.violations.push(format!("TX queue {q} register {r:#x} written while enabled"));
                self.set(o, v);
            }
            0x10 => self.txq[q].head = v,
            0x18 => {
                if v != 0 && !enabled {
                    self.violations.push(format!("TDT({q}) bumped while the queue is disabled"));
                }
                if v >= self.tx_ring_len(q).max(1) {
                    self.violations.push(format!("TDT({q}) = {v} outside the ring"));
                }
                self.set(o, v);
                if !self.tx_paused {
                    self.run_tx(q);
                }
            }
            0x28 => {
                let on = v & 1 << 25 != 0;
                if on && !enabled {
                    if self.reg(off::DMATXCTL) & 1 == 0 {
                        self.violations.push(format!("TXDCTL({q}).ENABLE before DMATXCTL.TE"));
                    }
                    let base = self.reg(o - 0x28) as u64 | (self.reg(o - 0x24) as u64) << 32;
                    let len = self.reg(o - 0x20);
                    self.check_ring("TDBA", q, base, len);
                    self.txq[q].enable_delay = DELAY_READS;
                }
                self.txq[q].enabled = on;
                self.set(o, v);
            }
            _ => self.set(o, v),
        }
    }

    /// Sets register `o` without any side effect or check (fault injection).
    pub fn poke(&mut self, o: usize, v: u32) {
        self.set(o, v);
    }

    /// Adds to the octet counters (to test the 36-bit reads).
    pub fn add_octets(&mut self, rx: u64, tx: u64) {
        self.gorc += rx;
        self.gotc += tx;
    }

    /// Frames waiting in the packet buffer.
    pub fn buffered(&self) -> usize {
        self.packet_buffer.len()
    }

    fn rx_ring_len(&self, q: usize) -> u32 {
        self.reg(rx_block(q) + 0x08) / 16
    }

    fn tx_ring_len(&self, q: usize) -> u32 {
        self.reg(0x06000 + 0x40 * q + 0x08) / 16
    }
}

/// RDBAL(q) block for q < 64.
fn rx_block(q: usize) -> usize {
    0x01000 + 0x40 * q
}

/// `(queue, offset in block)` when `o` lies in the per-queue region at `base`.
fn queue_reg(o: usize, base: usize) -> Option<(usize, usize)> {
    if o < base || o >= base + 0x40 * QUEUES {
        return None;
    }
    Some(((o - base) / 0x40, (o - base) % 0x40))
}

impl BarDevice for Device {
    fn read32(&mut self, off: usize) -> u32 {
        self.register_accesses.0 += 1;
        self.read(off)
    }
    fn write32(&mut self, off: usize, v: u32) {
        self.register_accesses.1 += 1;
        self.write(off, v)
    }
    fn violation(&mut self, what: String) {
        self.violations.push(what);
    }
}

/// The test's handle on one 82599 port.
#[derive(Debug, Clone)]
pub struct Ixgbe82599 {
    dev: Rc<RefCell<Device>>,
}

/// The 82599 SFP+ device ID (X520).
pub const DEVICE_ID: u16 = 0x10FB;

impl Ixgbe82599 {
    /// A port with MAC `mac` on `host`'s memory.
    pub fn new(host: &Rc<Host>, mac: [u8; 6]) -> Self {
        Self { dev: Rc::new(RefCell::new(Device::new(Rc::clone(host), mac))) }
    }

    /// A PCI function in front of it (8086:10fb, 128 KiB BAR 0).
    pub fn pci(&self) -> FakePci<Device> {
        FakePci::new(Rc::clone(&self.dev), 0x8086, DEVICE_ID, 0x20000)
    }

    /// Knobs and observations.
    pub fn dev(&self) -> RefMut<'_, Device> {
        self.dev.borrow_mut()
    }

    /// Receives `frame` from the wire (CRC already stripped).
    pub fn inject(&self, frame: &[u8]) -> RxOutcome {
        self.dev().receive(frame, 0)
    }

    /// Receives `frame` with error bits `errors` (31:20) set in its write-back.
    pub fn inject_flagged(&self, frame: &[u8], errors: u32) -> RxOutcome {
        self.dev().receive(frame, errors)
    }

    /// The queue RSS steers `frame` to now.
    pub fn queue_of(&self, frame: &[u8]) -> usize {
        self.dev.borrow().classify(frame).0
    }

    /// Runs the engines once: TX queues (also when paused), then the packet buffer.
    pub fn step(&self) {
        let mut d = self.dev();
        for q in 0..QUEUES {
            if d.txq[q].enabled {
                d.run_tx(q);
            }
        }
        d.drain_packet_buffer();
    }

    /// Takes the frames sent so far.
    pub fn take_tx(&self) -> Vec<(u16, Vec<u8>)> {
        std::mem::take(&mut self.dev().tx_frames)
    }

    /// Panics with the recorded violations, if any; also checks the interrupt mask.
    pub fn assert_clean(&self) {
        let d = self.dev.borrow();
        assert!(d.violations.is_empty(), "82599 model saw violations: {:#?}", d.violations);
        assert_eq!(d.eims, 0, "interrupts enabled");
    }
}
