//! 82599 register blocks and bit fields (82599 datasheet §8.2.3, register summary
//! table 8-3), used by the bring-up in [`super`].
//!
//! Each block is a `#[repr(C)]` struct of `volatile_register` fields used for its
//! layout only: the driver reaches registers through [`crate::hal::Mmio`] at offsets
//! derived with `offset_of!`, and a compile-time assert pins every offset to the
//! datasheet's. Fields are declared once with offset and width ([`Field`]).

use core::mem::offset_of;
use volatile_register::{RO, RW};

use crate::intel::field::Field;

/// `$name = base + offset_of!(Block, field)`, asserted equal to the datasheet offset.
macro_rules! reg {
    ($(#[$m:meta])* $name:ident = $base:ident + $block:ident . $field:ident == $abs:literal) => {
        $(#[$m])*
        pub const $name: usize = $base + offset_of!($block, $field);
        const _: () = assert!($name == $abs);
    };
}

/// General control registers (§8.2.3.1) at 0x00000. Layout only.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct General {
    ctrl: RW<u32>,
    _r04: u32,
    status: RO<u32>,
    _r0c: [u32; 3],
    ctrl_ext: RW<u32>,
}
const GENERAL: usize = 0x00000;
reg!(/// CTRL, device control (§8.2.3.1.1).
    CTRL = GENERAL + General.ctrl == 0x00000);
reg!(/// STATUS, device status (§8.2.3.1.2).
    STATUS = GENERAL + General.status == 0x00008);
reg!(/// CTRL_EXT, extended device control (§8.2.3.1.3).
    CTRL_EXT = GENERAL + General.ctrl_ext == 0x00018);

/// Interrupt registers (§8.2.3.5) at 0x00800. Layout only.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct Interrupt {
    eicr: RW<u32>,
    _r804: [u32; 31],
    eims: RW<u32>,
    _r884: u32,
    eimc: RW<u32>,
    _r88c: [u32; 137],
    eimc_ex: [RW<u32>; 2],
}
const INTERRUPT: usize = 0x00800;
reg!(/// EICR, extended interrupt cause (§8.2.3.5.1).
    EICR = INTERRUPT + Interrupt.eicr == 0x00800);
reg!(/// EIMS, interrupt mask set (write 1 to enable; §8.2.3.5.3).
    EIMS = INTERRUPT + Interrupt.eims == 0x00880);
reg!(/// EIMC, interrupt mask clear (write 1 to disable; §8.2.3.5.4).
    EIMC = INTERRUPT + Interrupt.eimc == 0x00888);
reg!(/// EIMC_EX(0), the queue-interrupt half of the mask clear (§8.2.3.5.5).
    EIMC_EX0 = INTERRUPT + Interrupt.eimc_ex == 0x00AB0);

/// Receive DMA and packet-buffer registers (§8.2.3.8, §8.2.3.9) at 0x02F00.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct RxDma {
    rdrxctl: RW<u32>,
    _r2f04: [u32; 63],
    rxctrl: RW<u32>,
    _r3004: [u32; 151],
    fcrth: [RW<u32>; 8],
    _r3280: [u32; 608],
    rxpbsize: [RW<u32>; 8],
    _r3c20: [u32; 224],
    mpc: [RO<u32>; 8],
}
const RX_DMA: usize = 0x02F00;
reg!(/// RDRXCTL, receive DMA control (§8.2.3.8.8).
    RDRXCTL = RX_DMA + RxDma.rdrxctl == 0x02F00);
reg!(/// RXCTRL, receive control: RXEN (§8.2.3.8.10).
    RXCTRL = RX_DMA + RxDma.rxctrl == 0x03000);
reg!(/// FCRTH(0..7), flow control receive threshold high (§8.2.3.3.4).
    FCRTH0 = RX_DMA + RxDma.fcrth == 0x03260);
reg!(/// RXPBSIZE(0..7), receive packet buffer sizes (§8.2.3.9.1).
    RXPBSIZE0 = RX_DMA + RxDma.rxpbsize == 0x03C00);
reg!(/// MPC(0..7), missed packets (no room in the packet buffer), clear on read (§8.2.3.23.4).
    MPC0 = RX_DMA + RxDma.mpc == 0x03FA0);

/// MAC registers and statistics (§8.2.3.22, §8.2.3.23) at 0x04000.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct Mac {
    crcerrs: RO<u32>,
    _r4004: [u32; 28],
    gprc: RO<u32>,
    _r4078: [u32; 2],
    gptc: RO<u32>,
    _r4084: u32,
    gorcl: RO<u32>,
    gorch: RO<u32>,
    gotcl: RO<u32>,
    gotch: RO<u32>,
    _r4098: [u32; 106],
    hlreg0: RW<u32>,
    _r4244: [u32; 9],
    maxfrs: RW<u32>,
    _r426c: [u32; 13],
    autoc: RW<u32>,
    links: RO<u32>,
    _r42a8: [u32; 406],
    rttdcs: RW<u32>,
    _r4904: [u32; 19],
    txpbthresh: [RW<u32>; 8],
    _r4970: [u32; 68],
    dmatxctl: RW<u32>,
}
const MAC: usize = 0x04000;
reg!(/// CRCERRS, CRC errors, clear on read (§8.2.3.23.1).
    CRCERRS = MAC + Mac.crcerrs == 0x04000);
reg!(/// GPRC, good packets received, clear on read (§8.2.3.23.18).
    GPRC = MAC + Mac.gprc == 0x04074);
reg!(/// GPTC, good packets transmitted, clear on read (§8.2.3.23.22).
    GPTC = MAC + Mac.gptc == 0x04080);
reg!(/// GORCL, good octets received, low 32 of 36 bits (read before GORCH; §8.2.3.23.23).
    GORCL = MAC + Mac.gorcl == 0x04088);
reg!(/// GORCH, good octets received, high 4 bits; reading it clears the counter.
    GORCH = MAC + Mac.gorch == 0x0408C);
reg!(/// GOTCL, good octets transmitted, low 32 of 36 bits (§8.2.3.23.25).
    GOTCL = MAC + Mac.gotcl == 0x04090);
reg!(/// GOTCH, good octets transmitted, high 4 bits.
    GOTCH = MAC + Mac.gotch == 0x04094);
reg!(/// HLREG0, MAC core control 0 (§8.2.3.22.8).
    HLREG0 = MAC + Mac.hlreg0 == 0x04240);
reg!(/// MAXFRS, max frame size (§8.2.3.22.13).
    MAXFRS = MAC + Mac.maxfrs == 0x04268);
reg!(/// AUTOC, auto-negotiation control (§8.2.3.22.19); left as the EEPROM set it.
    AUTOC = MAC + Mac.autoc == 0x042A0);
reg!(/// LINKS, link status (§8.2.3.22.20).
    LINKS = MAC + Mac.links == 0x042A4);
reg!(/// RTTDCS, DCB transmit descriptor plane control: ARBDIS (§8.2.3.10.2).
    RTTDCS = MAC + Mac.rttdcs == 0x04900);
reg!(/// TXPBTHRESH(0..7), transmit packet buffer thresholds (§8.2.3.9.16).
    TXPBTHRESH0 = MAC + Mac.txpbthresh == 0x04950);
reg!(/// DMATXCTL, DMA transmit control: TE (§8.2.3.9.2).
    DMATXCTL = MAC + Mac.dmatxctl == 0x04A80);

/// Receive filter registers (§8.2.3.7) at 0x05000 (RXCSUM and MRQC: [`crate::intel::rss`]).
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct Filter {
    rxcsum: RW<u32>,
    _r5004: [u32; 31],
    fctrl: RW<u32>,
}
const FILTER: usize = 0x05000;
reg!(/// FCTRL, filter control (§8.2.3.7.1); may change only while RXCTRL.RXEN = 0.
    FCTRL = FILTER + Filter.fctrl == 0x05080);

/// Transmit DMA and security registers at 0x08100.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct TxSec {
    dtxmxszrq: RW<u32>,
    _r8104: [u32; 7],
    mtqc: RW<u32>,
    _r8124: [u32; 759],
    secrxctrl: RW<u32>,
    secrxstat: RO<u32>,
}
const TX_SEC: usize = 0x08100;
reg!(/// DTXMXSZRQ, DMA TX max size of total outstanding requests (§8.2.3.9.12).
    DTXMXSZRQ = TX_SEC + TxSec.dtxmxszrq == 0x08100);
reg!(/// MTQC, multiple transmit queues command (§8.2.3.9.15).
    MTQC = TX_SEC + TxSec.mtqc == 0x08120);
reg!(/// SECRXCTRL, security RX control: RX_DIS (§8.2.3.12.10).
    SECRXCTRL = TX_SEC + TxSec.secrxctrl == 0x08D00);
reg!(/// SECRXSTAT, security RX status: SECRX_RDY (§8.2.3.12.11).
    SECRXSTAT = TX_SEC + TxSec.secrxstat == 0x08D04);

/// Receive address 0 (§8.2.3.7.8, §8.2.3.7.9) at 0x0A200.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct RecvAddr {
    ral: RW<u32>,
    rah: RW<u32>,
}
const RECV_ADDR: usize = 0x0A200;
reg!(/// RAL(0), MAC bytes 0..3.
    RAL0 = RECV_ADDR + RecvAddr.ral == 0x0A200);
reg!(/// RAH(0), MAC bytes 4..5 and AV.
    RAH0 = RECV_ADDR + RecvAddr.rah == 0x0A204);

/// Transmit packet buffer sizes (§8.2.3.9.13) at 0x0CC00.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct TxPb {
    txpbsize: [RW<u32>; 8],
}
const TX_PB: usize = 0x0CC00;
reg!(/// TXPBSIZE(0..7).
    TXPBSIZE0 = TX_PB + TxPb.txpbsize == 0x0CC00);

/// X550 extended redirection table (X550 datasheet §8.2.3.7.17) at 0x0EE80.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct Ereta {
    ereta: [RW<u32>; 96],
}
const ERETA_BLOCK: usize = 0x0EE80;
reg!(/// ERETA(0..95): entries 128..511 of the X550 redirection table.
    ERETA = ERETA_BLOCK + Ereta.ereta == 0x0EE80);

/// EEPROM/flash control (§8.2.3.2.1) at 0x10010.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct Eeprom {
    eec: RW<u32>,
}
const EEPROM: usize = 0x10010;
reg!(/// EEC, EEPROM/flash control: auto-read done.
    EEC = EEPROM + Eeprom.eec == 0x10010);

/// QPRDC(n), per-queue receive drops with DROP_EN, clear on read (§8.2.3.23.42).
pub const fn qprdc(n: u16) -> usize {
    0x01430 + 0x40 * n as usize
}

/// Bytes of BAR 0 the driver maps (the register space; flash follows).
pub const BAR_LEN: u64 = 0x20000;

/// CTRL fields (§8.2.3.1.1).
pub mod ctrl {
    use super::Field;
    /// GIO master disable: stop issuing new master requests.
    pub const GIO_DIS: Field = Field::bit(2);
    /// Link reset.
    pub const LRST: Field = Field::bit(3);
    /// Device reset; self-clearing.
    pub const RST: Field = Field::bit(26);
}
/// STATUS.GIO master enable status (§8.2.3.1.2): clear when no master request is pending.
pub const STATUS_GIO_MASTER_EN: Field = Field::bit(19);
/// CTRL_EXT fields (§8.2.3.1.3).
pub mod ctrl_ext {
    use super::Field;
    /// No-snoop disable (§4.6.7: set it for a polled driver that does not use DCA).
    pub const NS_DIS: Field = Field::bit(16);
    /// Driver loaded (tells firmware the driver took over).
    pub const DRV_LOAD: Field = Field::bit(28);
}
/// EEC fields (§8.2.3.2.1).
pub mod eec {
    use super::Field;
    /// EEPROM present.
    pub const EE_PRES: Field = Field::bit(8);
    /// Auto-read done: the hardware loaded its EEPROM defaults.
    pub const ARD: Field = Field::bit(9);
}
/// RDRXCTL fields (§8.2.3.8.8).
pub mod rdrxctl {
    use super::Field;
    /// Strip the Ethernet CRC (must agree with HLREG0.RXCRCSTRP).
    pub const CRCSTRIP: Field = Field::bit(1);
    /// DMA init done (read only).
    pub const DMAIDONE: Field = Field::bit(3);
    /// RSC first-size field 21:17: must be 0.
    pub const RSCFRSTSIZE: Field = Field::new(17, 5);
    /// RSC coalescing on ACK change: must be 1.
    pub const RSCACKC: Field = Field::bit(25);
    /// FCoE write-back fix: must be 1.
    pub const FCOE_WRFIX: Field = Field::bit(26);
}
/// RXCTRL.RXEN: receive enable (§8.2.3.8.10).
pub const RXCTRL_RXEN: Field = Field::bit(0);
/// RXPBSIZE.SIZE / TXPBSIZE.SIZE 19:10 in KiB.
pub const PBSIZE_KIB: Field = Field::new(10, 10);
/// FCRTH.RTH 18:5 (32-byte units; the register value is the byte count).
pub const FCRTH_RTH: Field = Field::new(5, 14);
/// TXPBTHRESH.THRESH 9:0 in KiB.
pub const TXPBTHRESH_KIB: Field = Field::new(0, 10);
/// HLREG0 fields (§8.2.3.22.8).
pub mod hlreg0 {
    use super::Field;
    /// Append CRC on transmit.
    pub const TXCRCEN: Field = Field::bit(0);
    /// Strip CRC on receive.
    pub const RXCRCSTRP: Field = Field::bit(1);
    /// Jumbo frames (kept off: see `intel::MAX_RX_FRAME`).
    pub const JUMBOEN: Field = Field::bit(2);
    /// Pad short frames on transmit.
    pub const TXPADEN: Field = Field::bit(10);
}
/// LINKS fields (§8.2.3.22.20).
pub mod links {
    use super::Field;
    /// Link up.
    pub const UP: Field = Field::bit(30);
    /// Speed 29:28: 1 = 100 Mb/s, 2 = 1 Gb/s, 3 = 10 Gb/s.
    pub const SPEED: Field = Field::new(28, 2);
}
/// RTTDCS.ARBDIS: TX descriptor arbiter disable (set while changing TX buffers).
pub const RTTDCS_ARBDIS: Field = Field::bit(6);
/// DMATXCTL.TE: transmit enable, before any TXDCTL.ENABLE.
pub const DMATXCTL_TE: Field = Field::bit(0);
/// DTXMXSZRQ.MAX_BYTES_NUM_REQ 11:0.
pub const DTXMXSZRQ_MAX: Field = Field::new(0, 12);
/// FCTRL fields (§8.2.3.7.1).
pub mod fctrl {
    use super::Field;
    /// Multicast promiscuous.
    pub const MPE: Field = Field::bit(8);
    /// Unicast promiscuous.
    pub const UPE: Field = Field::bit(9);
    /// Accept broadcast.
    pub const BAM: Field = Field::bit(10);
}
/// SECRXCTRL.RX_DIS (§8.2.3.12.10).
pub const SECRXCTRL_RX_DIS: Field = Field::bit(1);
/// SECRXSTAT.SECRX_RDY (§8.2.3.12.11).
pub const SECRXSTAT_RDY: Field = Field::bit(0);
/// DCA_RXCTRL bit 12: "reserved, must be set to 0" though it resets to 1 (§8.2.3.11.1).
pub const DCA_RXCTRL_BIT12: Field = Field::bit(12);
/// RAH.AV: address valid.
pub const RAH_AV: Field = Field::bit(31);
/// RAH bytes 4..5 of the MAC.
pub const RAH_ADDR: Field = Field::new(0, 16);
/// GORCH/GOTCH: the 4 high bits of the 36-bit octet counters.
pub const OCTETS_HIGH: Field = Field::new(0, 4);
