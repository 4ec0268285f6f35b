//! A register-level model of one Intel XL710 physical function, for host tests of
//! `cadence_drivers::i40e`.
//!
//! Written from the datasheet's facts (XL710 datasheet §7.9 HMC, §7.10 admin queue,
//! §8.3/§8.4 LAN queues, §10 registers), independently of
//! the driver: every offset and bit below is typed here, none is imported from the
//! driver, so that a wrong constant in the driver shows up as a violation or a failure.
//!
//! Modeled:
//! - readiness: GLGEN_RSTAT.DEVSTATE, GLNVM_ULD (firmware loaded), PFGEN_CTRL.PFSWR
//!   (self-clearing PF reset that clears the PF's state), each with knobs to never
//!   finish;
//! - the admin queue (`aq`): ASQ/ARQ rings in host memory, the commands the driver
//!   uses (Get Version, Clear PXE, MAC Address Read, Get Switch Config, Get/Update VSI
//!   Parameters, Set VSI Promiscuous, Get Link Status, RX Control Register Write) with
//!   cookie echo, error answers, error injection and a firmware that never answers;
//!   link-status events on the ARQ when enabled;
//! - the HMC (`hmc`): segment descriptor 0 in direct mode, the LAN object bases and
//!   counts, and contexts read from host memory when a queue is enabled;
//! - LAN queues (`engine`): RX with RSS (HENA packet types, 52-byte key, Toeplitz
//!   through `cadence_core::rss`, 128/512-entry HLUT, the VSI's contiguous queue map),
//!   32-byte descriptors written back DD last; TX on tail writes, DTYPE 0xF written back
//!   on RS descriptors; write-back only for queues in interrupt 0's linked list with
//!   their cause enabled, otherwise only once four descriptors are pending (the
//!   poll-mode gotcha, notes §2.7);
//! - port statistics: 48-bit GLPRT counters that do not clear on read and wrap.
//!
//! Violations (each fails `assert_clean`): an admin command before Get Version, with a
//! wrong length, wrong BUF/RD/LB flags, a direct command with a buffer, or a buffer
//! outside allocated memory; a queue enabled before its context was written, before
//! QTX_CTL or the TX pre-disable was cleared, with a malformed context (length, base,
//! descriptor size, ready list); a tail written before the queue's enable was seen, not
//! a multiple of 8 (RX) or outside the ring; a frame under 17 bytes or without ICRC;
//! context or DMA accesses outside allocated memory or outside the segment; an RX
//! control register written directly with API 1.5 or later; sub-dword register
//! accesses.

mod aq;
mod engine;
mod hmc;

use std::cell::{RefCell, RefMut};
use std::collections::HashMap;
use std::rc::Rc;

use crate::model_host::{BarDevice, FakePci, Host};

pub use engine::RxOutcome;

/// Register offsets (XL710 datasheet §10.2).
pub mod off {
    pub const PF_ATQBAL: usize = 0x080000;
    pub const PF_ATQBAH: usize = 0x080100;
    pub const PF_ATQLEN: usize = 0x080200;
    pub const PF_ATQH: usize = 0x080300;
    pub const PF_ATQT: usize = 0x080400;
    pub const PF_ARQBAL: usize = 0x080080;
    pub const PF_ARQBAH: usize = 0x080180;
    pub const PF_ARQLEN: usize = 0x080280;
    pub const PF_ARQH: usize = 0x080380;
    pub const PF_ARQT: usize = 0x080480;
    pub const PFGEN_CTRL: usize = 0x092400;
    pub const PF_FUNC_RID: usize = 0x09C000;
    pub const GLNVM_ULD: usize = 0x0B6008;
    pub const GLGEN_RSTAT: usize = 0x0B8188;
    pub const PFHMC_SDCMD: usize = 0x0C0000;
    pub const PFHMC_SDDATALOW: usize = 0x0C0100;
    pub const PFHMC_SDDATAHIGH: usize = 0x0C0200;
    pub const PFHMC_ERRORINFO: usize = 0x0C0400;
    pub const GLHMC_SDPART: usize = 0x0C0800;
    pub const GLHMC_LANTXOBJSZ: usize = 0x0C2004;
    pub const GLHMC_LANQMAX: usize = 0x0C2008;
    pub const GLHMC_LANRXOBJSZ: usize = 0x0C200C;
    pub const GLHMC_LANTXBASE: usize = 0x0C6200;
    pub const GLHMC_LANTXCNT: usize = 0x0C6300;
    pub const GLHMC_LANRXBASE: usize = 0x0C6400;
    pub const GLHMC_LANRXCNT: usize = 0x0C6500;
    pub const PFINT_ITR0: usize = 0x038000;
    pub const PFINT_DYN_CTL0: usize = 0x038480;
    pub const PFINT_LNKLST0: usize = 0x038500;
    pub const QINT_RQCTL: usize = 0x03A000;
    pub const QINT_TQCTL: usize = 0x03C000;
    pub const QTX_HEAD: usize = 0x0E4000;
    pub const GLLAN_TXPRE_QDIS: usize = 0x0E6500;
    pub const QTX_ENA: usize = 0x100000;
    pub const QTX_CTL: usize = 0x104000;
    pub const QTX_TAIL: usize = 0x108000;
    pub const QRX_ENA: usize = 0x120000;
    pub const QRX_TAIL: usize = 0x128000;
    pub const PFLAN_QALLOC: usize = 0x1C0400;
    pub const PFGEN_PORTNUM: usize = 0x1C0480;
    pub const PFQF_CTL_0: usize = 0x1C0AC0;
    pub const PFQF_HLUT: usize = 0x240000;
    pub const PFQF_HKEY: usize = 0x244800;
    pub const PFQF_HENA: usize = 0x245900;
    pub const GLPRT_GORCL: usize = 0x300000;
    pub const GLPRT_CRCERRS: usize = 0x300080;
    pub const GLPRT_UPRCL: usize = 0x3005A0;
    pub const GLPRT_MPRCL: usize = 0x3005C0;
    pub const GLPRT_BPRCL: usize = 0x3005E0;
    pub const GLPRT_RDPC: usize = 0x300600;
    pub const GLPRT_GOTCL: usize = 0x300680;
    pub const GLPRT_UPTCL: usize = 0x3009C0;
}

/// The XL710 QSFP+ device ID.
pub const DEVICE_ID: u16 = 0x1583;
/// Bytes of BAR 0.
pub const BAR_LEN: u64 = 0x40_0000;
/// LAN queues each PF owns in this model.
pub const PF_QUEUES: usize = 64;
/// Reads before a delayed status appears.
const DELAY_READS: u32 = 3;
/// The PF VSI's switch element ID.
pub const VSI_SEID: u16 = 512;
/// The MAC's switch element ID.
pub const MAC_SEID: u16 = 2;
/// Write-backs a queue outside the interrupt list accumulates before they are posted.
pub const UNLINKED_WB_BATCH: usize = 4;

/// One receive queue, device side.
#[derive(Debug, Clone, Default)]
pub struct RxQ {
    /// QENA_REQ set and the context accepted.
    pub enabled: bool,
    delay: u32,
    /// The driver read QENA_STAT as 1.
    pub stat_seen: bool,
    /// From the context.
    pub base: u64,
    /// From the context.
    pub qlen: u32,
    /// From the context: data buffer bytes.
    pub dbuff: usize,
    /// From the context: the largest frame.
    pub rxmax: usize,
    /// Next descriptor the device fills.
    pub head: u32,
    /// QRX_TAIL.
    pub tail: u32,
    /// Write-backs held back (address, 32 bytes) because the queue is not in the
    /// interrupt list.
    pub(crate) pending_wb: Vec<(u64, [u8; 32])>,
    /// Frames delivered.
    pub frames: u64,
}

/// One transmit queue, device side.
#[derive(Debug, Clone, Default)]
pub struct TxQ {
    /// QENA_REQ set and the context accepted.
    pub enabled: bool,
    delay: u32,
    /// The driver read QENA_STAT as 1.
    pub stat_seen: bool,
    /// From the context.
    pub base: u64,
    /// From the context.
    pub qlen: u32,
    /// Next descriptor the device reads.
    pub head: u32,
    /// QTX_TAIL.
    pub tail: u32,
    pub(crate) partial: Vec<u8>,
    pub(crate) pending_wb: Vec<u64>,
}

/// The XL710 PF's state, knobs and observations.
#[derive(Debug)]
pub struct Device {
    pub(crate) host: Rc<Host>,
    regs: HashMap<usize, u32>,
    /// The port's MAC (MAC Address Read).
    pub mac: [u8; 6],
    /// This PF's index (PF_FUNC_RID) and port.
    pub pf: usize,
    /// Admin API version the firmware reports.
    pub api: (u16, u16),
    // Readiness.
    /// GLGEN_RSTAT.DEVSTATE reads non-zero this many more times (`u32::MAX`: forever).
    pub global_reset_reads: u32,
    /// GLNVM_ULD never reports the configuration loaded.
    pub fw_never_ready: bool,
    /// PFGEN_CTRL.PFSWR never clears.
    pub stuck_pf_reset: bool,
    pfswr_delay: u32,
    /// PF resets seen.
    pub pf_resets: u32,
    /// Register reads and writes through BAR 0 so far (the forwarding bench counts
    /// the ones a poll makes).
    pub register_accesses: (u64, u64),
    // Admin queue.
    /// The firmware never completes a command (ATQH stays).
    pub aq_dead: bool,
    /// Answer this opcode with this error code (once per entry).
    pub aq_fail: Vec<(u16, u16)>,
    pub(crate) got_version: bool,
    pub(crate) pxe_cleared: bool,
    /// Admin commands executed, by opcode, in order.
    pub aq_log: Vec<u16>,
    pub(crate) lse: bool,
    /// Events the ARQ had no room for.
    pub arq_overflows: u32,
    // Switch / VSI.
    /// VSI queue map: first PF queue and count (from Update VSI).
    pub vsi_queues: (u16, u16),
    /// The VSI's queue set handle (Get VSI Parameters; the TX contexts' ready list).
    pub qs_handle: u16,
    /// Promiscuous flags set on the VSI.
    pub promisc: u16,
    // Link.
    /// The link is up.
    pub link_up: bool,
    // HMC.
    pub(crate) sd: Option<hmc::Segment>,
    // Queues.
    /// Receive queues (PF-relative).
    pub rxq: Vec<RxQ>,
    /// Transmit queues (PF-relative).
    pub txq: Vec<TxQ>,
    /// TX pre-disable cleared, by absolute queue.
    pub(crate) pre_qdis_clear: Vec<bool>,
    /// TDT writes do not run the TX engine; [`Xl710::step`] does.
    pub tx_paused: bool,
    /// Frames sent: (PF queue, bytes).
    pub tx_frames: Vec<(u16, Vec<u8>)>,
    /// Split received frames into buffers of this many bytes (a chained receive, as a
    /// too-small DBUFF would cause), when set.
    pub split_rx_at: Option<usize>,
    // Statistics (48-bit, free running).
    pub(crate) gorc: u64,
    pub(crate) uprc: u64,
    pub(crate) mprc: u64,
    pub(crate) bprc: u64,
    pub(crate) rdpc: u64,
    pub(crate) gotc: u64,
    pub(crate) uptc: u64,
    /// HLUT register writes seen.
    pub hlut_writes: u32,
    /// Protocol violations seen.
    pub violations: Vec<String>,
}

impl Device {
    fn new(host: Rc<Host>, mac: [u8; 6], pf: usize) -> Self {
        let mut d = Self {
            host,
            regs: HashMap::new(),
            mac,
            pf,
            api: (1, 7),
            global_reset_reads: 0,
            fw_never_ready: false,
            stuck_pf_reset: false,
            pfswr_delay: 0,
            pf_resets: 0,
            register_accesses: (0, 0),
            aq_dead: false,
            aq_fail: Vec::new(),
            got_version: false,
            pxe_cleared: false,
            aq_log: Vec::new(),
            lse: false,
            arq_overflows: 0,
            vsi_queues: (0, 1),
            qs_handle: 0x0123,
            promisc: 0,
            link_up: true,
            sd: None,
            rxq: Vec::new(),
            txq: Vec::new(),
            pre_qdis_clear: Vec::new(),
            tx_paused: false,
            tx_frames: Vec::new(),
            split_rx_at: None,
            gorc: 0,
            uprc: 0,
            mprc: 0,
            bprc: 0,
            rdpc: 0,
            gotc: 0,
            uptc: 0,
            hlut_writes: 0,
            violations: Vec::new(),
        };
        d.pf_reset();
        d.pf_resets = 0;
        d
    }

    /// The first absolute queue of this PF.
    pub fn first_queue(&self) -> usize {
        self.pf * PF_QUEUES
    }

    /// PF reset (PFSWR): the PF's queues, admin queue, HMC and filters back to their
    /// reset values; the port statistics (CORER) stay.
    fn pf_reset(&mut self) {
        self.pf_resets += 1;
        self.regs.clear();
        let first = self.first_queue() as u32;
        self.regs.insert(off::PF_FUNC_RID, self.pf as u32);
        self.regs.insert(off::PFGEN_PORTNUM, self.pf as u32 & 3);
        self.regs.insert(off::PFLAN_QALLOC, first | (first + PF_QUEUES as u32 - 1) << 16 | 1 << 31);
        self.regs.insert(off::GLHMC_LANTXOBJSZ, 7);
        self.regs.insert(off::GLHMC_LANRXOBJSZ, 5);
        self.regs.insert(off::GLHMC_LANQMAX, 1536);
        // Every PF gets 16 segment descriptors from 16·pf.
        self.regs.insert(off::GLHMC_SDPART + 4 * self.pf, (16 * self.pf as u32) | 16 << 16);
        self.regs.insert(off::PFINT_LNKLST0, 0x7FF);
        self.got_version = false;
        self.pxe_cleared = false;
        self.lse = false;
        self.vsi_queues = (0, 1);
        self.promisc = 0;
        self.sd = None;
        self.rxq = vec![RxQ::default(); PF_QUEUES];
        self.txq = vec![TxQ::default(); PF_QUEUES];
        self.pre_qdis_clear = vec![false; 1536];
    }

    /// The raw value of register `o` (no read side effects).
    pub fn reg(&self, o: usize) -> u32 {
        self.regs.get(&o).copied().unwrap_or(0)
    }

    pub(crate) fn set(&mut self, o: usize, v: u32) {
        self.regs.insert(o, v);
    }

    /// Sets register `o` without side effects or checks (fault injection).
    pub fn poke(&mut self, o: usize, v: u32) {
        self.set(o, v);
    }

    /// Adds to the 48-bit counters (to test wrap handling).
    pub fn add_counters(&mut self, rx_octets: u64, rx_drops: u64) {
        self.gorc = (self.gorc + rx_octets) & ((1 << 48) - 1);
        self.rdpc = (self.rdpc + rx_drops) & 0xFFFF_FFFF;
    }

    fn read(&mut self, o: usize) -> u32 {
        let port = self.pf & 3;
        let stat = |base: usize| base + 8 * port;
        let lo = |v: u64| v as u32;
        let hi = |v: u64| (v >> 32) as u32 & 0xFFFF;
        match o {
            off::GLGEN_RSTAT => {
                if self.global_reset_reads > 0 {
                    if self.global_reset_reads != u32::MAX {
                        self.global_reset_reads -= 1;
                    }
                    1
                } else {
                    0
                }
            }
            off::GLNVM_ULD => {
                if self.fw_never_ready {
                    0
                } else {
                    1 << 3 | 1 << 4
                }
            }
            off::PFGEN_CTRL => {
                let v = self.reg(o);
                if v & 1 != 0 && !self.stuck_pf_reset {
                    if self.pfswr_delay > 0 {
                        self.pfswr_delay -= 1;
                    } else {
                        self.pf_reset();
                        return 0;
                    }
                }
                v
            }
            o if o == stat(off::GLPRT_GORCL) => lo(self.gorc),
            o if o == stat(off::GLPRT_GORCL) + 4 => hi(self.gorc),
            o if o == stat(off::GLPRT_UPRCL) => lo(self.uprc),
            o if o == stat(off::GLPRT_UPRCL) + 4 => hi(self.uprc),
            o if o == stat(off::GLPRT_MPRCL) => lo(self.mprc),
            o if o == stat(off::GLPRT_MPRCL) + 4 => hi(self.mprc),
            o if o == stat(off::GLPRT_BPRCL) => lo(self.bprc),
            o if o == stat(off::GLPRT_BPRCL) + 4 => hi(self.bprc),
            o if o == stat(off::GLPRT_GOTCL) => lo(self.gotc),
            o if o == stat(off::GLPRT_GOTCL) + 4 => hi(self.gotc),
            o if o == stat(off::GLPRT_UPTCL) => lo(self.uptc),
            o if o == stat(off::GLPRT_UPTCL) + 4 => hi(self.uptc),
            o if o == stat(off::GLPRT_RDPC) => lo(self.rdpc),
            o if o == stat(off::GLPRT_CRCERRS) => 0,
            o => {
                if let Some(q) = queue_index(o, off::QRX_ENA) {
                    let mut v = self.reg(o) & 0b11;
                    let rq = &mut self.rxq[q];
                    if rq.enabled {
                        if rq.delay > 0 {
                            rq.delay -= 1;
                        } else {
                            rq.stat_seen = true;
                            v |= 1 << 2;
                        }
                    }
                    return v;
                }
                if let Some(q) = queue_index(o, off::QTX_ENA) {
                    let mut v = self.reg(o) & 0b11;
                    let tq = &mut self.txq[q];
                    if tq.enabled {
                        if tq.delay > 0 {
                            tq.delay -= 1;
                        } else {
                            tq.stat_seen = true;
                            v |= 1 << 2;
                        }
                    }
                    return v;
                }
                if let Some(q) = queue_index(o, off::QTX_HEAD) {
                    return self.txq[q].head;
                }
                self.reg(o)
            }
        }
    }

    fn write(&mut self, o: usize, v: u32) {
        match o {
            off::PFGEN_CTRL => {
                if v & 1 != 0 {
                    self.pfswr_delay = DELAY_READS;
                }
                self.set(o, v);
            }
            off::PF_ATQT => {
                self.set(o, v);
                self.run_asq();
            }
            off::PF_ATQLEN | off::PF_ARQLEN => {
                if v & 1 << 31 != 0 && v & 0x3FF == 0 {
                    self.violations.push(format!("admin queue {o:#x} enabled with length 0"));
                }
                self.set(o, v);
            }
            off::PF_ARQT => {
                let len = self.reg(off::PF_ARQLEN) & 0x3FF;
                if len > 0 && v >= len {
                    self.violations.push(format!("ARQT = {v} outside the ring of {len}"));
                }
                self.set(o, v);
            }
            off::PFHMC_SDCMD => self.write_sd(v),
            off::PFQF_CTL_0 => self.rx_ctl_direct(o, v),
            o if o == off::PFQF_HENA || o == off::PFQF_HENA + 0x80 => self.rx_ctl_direct(o, v),
            off::GLLAN_TXPRE_QDIS..=0x0E652C if (o - off::GLLAN_TXPRE_QDIS).is_multiple_of(4) => {
                let abs = 128 * ((o - off::GLLAN_TXPRE_QDIS) / 4) + (v & 0x7FF) as usize;
                if let Some(c) = self.pre_qdis_clear.get_mut(abs) {
                    if v & 1 << 31 != 0 {
                        *c = true;
                    } else if v & 1 << 30 != 0 {
                        *c = false;
                    }
                }
            }
            o => {
                if (off::PFQF_HLUT..off::PFQF_HLUT + 128 * 0x80).contains(&o) {
                    self.hlut_writes += 1;
                }
                if let Some(q) = queue_index(o, off::QRX_ENA) {
                    return self.write_rx_ena(q, v);
                }
                if let Some(q) = queue_index(o, off::QTX_ENA) {
                    return self.write_tx_ena(q, v);
                }
                if let Some(q) = queue_index(o, off::QRX_TAIL) {
                    return self.write_rx_tail(q, v);
                }
                if let Some(q) = queue_index(o, off::QTX_TAIL) {
                    return self.write_tx_tail(q, v);
                }
                self.set(o, v);
            }
        }
    }

    /// An RX control register written with a plain register write.
    fn rx_ctl_direct(&mut self, o: usize, v: u32) {
        if self.api.0 > 1 || self.api.1 >= 5 {
            self.violations
                .push(format!("RX control register {o:#x} written directly with admin API 1.5+ (use command 0x0207)"));
        }
        self.set(o, v);
    }

    /// An RX control register written through the admin queue; false for another
    /// register.
    pub(crate) fn rx_ctl_aq(&mut self, o: usize, v: u32) -> bool {
        if o == off::PFQF_CTL_0 || o == off::PFQF_HENA || o == off::PFQF_HENA + 0x80 {
            self.set(o, v);
            true
        } else {
            false
        }
    }

    /// Whether queue `q` (`tx` or RX) is in interrupt 0's linked list with its cause
    /// enabled, and interrupt 0 is enabled: then its write-backs are posted at once.
    pub(crate) fn wb_linked(&self, tx: bool, q: usize) -> bool {
        if self.reg(off::PFINT_DYN_CTL0) & 1 == 0 {
            return false;
        }
        let lst = self.reg(off::PFINT_LNKLST0);
        let (mut idx, mut ty) = ((lst & 0x7FF) as usize, (lst >> 11) & 3);
        for _ in 0..2 * PF_QUEUES + 2 {
            if idx == 0x7FF || idx >= PF_QUEUES {
                return false;
            }
            let ctl = self.reg(if ty == 1 { off::QINT_TQCTL } else { off::QINT_RQCTL } + 4 * idx);
            if ctl & 1 << 30 == 0 {
                return false;
            }
            if (ty == 1) == tx && idx == q {
                return true;
            }
            idx = ((ctl >> 16) & 0x7FF) as usize;
            ty = (ctl >> 27) & 3;
        }
        false
    }

    /// The 64-bit PFQF_HENA (hashed packet classifier types).
    pub fn hena(&self) -> u64 {
        self.reg(off::PFQF_HENA) as u64 | (self.reg(off::PFQF_HENA + 0x80) as u64) << 32
    }
}

/// PF queue `q` when `o` is element `q` of the per-queue array at `base`.
fn queue_index(o: usize, base: usize) -> Option<usize> {
    (o >= base && o < base + 4 * PF_QUEUES && (o - base).is_multiple_of(4)).then(|| (o - base) / 4)
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

/// The test's handle on one XL710 PF.
#[derive(Debug, Clone)]
pub struct Xl710 {
    dev: Rc<RefCell<Device>>,
}

impl Xl710 {
    /// PF 0 with MAC `mac` on `host`'s memory.
    pub fn new(host: &Rc<Host>, mac: [u8; 6]) -> Self {
        Self::with_pf(host, mac, 0)
    }

    /// PF `pf` (its own port and queue range) with MAC `mac`.
    pub fn with_pf(host: &Rc<Host>, mac: [u8; 6], pf: usize) -> Self {
        Self { dev: Rc::new(RefCell::new(Device::new(Rc::clone(host), mac, pf))) }
    }

    /// A PCI function in front of it (8086:1583, 4 MiB BAR 0).
    pub fn pci(&self) -> FakePci<Device> {
        FakePci::new(Rc::clone(&self.dev), 0x8086, DEVICE_ID, BAR_LEN)
    }

    /// Knobs and observations.
    pub fn dev(&self) -> RefMut<'_, Device> {
        self.dev.borrow_mut()
    }

    /// Receives `frame` from the wire.
    pub fn inject(&self, frame: &[u8]) -> RxOutcome {
        self.dev().receive(frame, 0)
    }

    /// Receives `frame` with error bits `errors` (qword 1 bits 26:19) in its write-back.
    pub fn inject_flagged(&self, frame: &[u8], errors: u8) -> RxOutcome {
        self.dev().receive(frame, errors)
    }

    /// The PF queue RSS steers `frame` to now.
    pub fn queue_of(&self, frame: &[u8]) -> usize {
        self.dev.borrow().classify(frame).0
    }

    /// Brings the link down or up (posting a link event when enabled).
    pub fn set_link(&self, up: bool) {
        self.dev().set_link(up);
    }

    /// Runs the TX engines (also when paused) and posts held write-backs of every
    /// queue (as an ITR expiry would).
    pub fn step(&self) {
        let mut d = self.dev();
        for q in 0..PF_QUEUES {
            if d.txq[q].enabled {
                d.run_tx(q);
            }
        }
        d.flush_all_writebacks();
    }

    /// Takes the frames sent so far.
    pub fn take_tx(&self) -> Vec<(u16, Vec<u8>)> {
        std::mem::take(&mut self.dev().tx_frames)
    }

    /// Panics with the recorded violations, if any.
    pub fn assert_clean(&self) {
        let d = self.dev.borrow();
        assert!(d.violations.is_empty(), "XL710 model saw violations: {:#?}", d.violations);
    }
}
