//! 82576 registers the igb driver touches (82576 datasheet §8, the e1000 register
//! map), as QEMU's `igb` model implements them. Blocks are `#[repr(C)]` layouts with
//! every offset asserted against the datasheet; bit fields are declared once.

use core::mem::offset_of;
use volatile_register::{RO, RW};

use crate::intel::field::Field;

macro_rules! reg {
    ($(#[$m:meta])* $name:ident = $base:ident + $block:ident . $field:ident == $abs:literal) => {
        $(#[$m])*
        pub const $name: usize = $base + offset_of!($block, $field);
        const _: () = assert!($name == $abs);
    };
}

/// General and interrupt registers (§8.2, §8.8) at 0x00000. Layout only.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct General {
    ctrl: RW<u32>,
    _r04: u32,
    status: RO<u32>,
    _r0c: [u32; 3],
    ctrl_ext: RW<u32>,
    _r1c: u32,
    mdic: RW<u32>,
    _r24: [u32; 45],
    imc: RW<u32>,
    _rdc: [u32; 9],
    rctl: RW<u32>,
    _r104: [u32; 191],
    tctl: RW<u32>,
}
const GENERAL: usize = 0x00000;
reg!(/// CTRL (§8.2.1).
    CTRL = GENERAL + General.ctrl == 0x00000);
reg!(/// STATUS (§8.2.2).
    STATUS = GENERAL + General.status == 0x00008);
reg!(/// CTRL_EXT (§8.2.3).
    CTRL_EXT = GENERAL + General.ctrl_ext == 0x00018);
reg!(/// MDIC, MDI (PHY register) control (§8.2.4).
    MDIC = GENERAL + General.mdic == 0x00020);
reg!(/// IMC, legacy interrupt mask clear (§8.8.6).
    IMC = GENERAL + General.imc == 0x000D8);
reg!(/// RCTL, receive control (§8.10.1).
    RCTL = GENERAL + General.rctl == 0x00100);
reg!(/// TCTL, transmit control (§8.12.1).
    TCTL = GENERAL + General.tctl == 0x00400);

/// Extended interrupt mask clear (§8.8.10) at 0x01528. Layout only.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct ExtInterrupt {
    eimc: RW<u32>,
}
const EXT_INTERRUPT: usize = 0x01528;
reg!(/// EIMC.
    EIMC = EXT_INTERRUPT + ExtInterrupt.eimc == 0x01528);

/// Statistics (§8.19) at 0x04000, clear on read. Layout only.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct Stats {
    crcerrs: RO<u32>,
    _r4004: [u32; 3],
    mpc: RO<u32>,
    _r4014: [u32; 24],
    gprc: RO<u32>,
    _r4078: [u32; 2],
    gptc: RO<u32>,
    _r4084: u32,
    gorcl: RO<u32>,
    gorch: RO<u32>,
    gotcl: RO<u32>,
    gotch: RO<u32>,
}
const STATS: usize = 0x04000;
reg!(/// CRCERRS.
    CRCERRS = STATS + Stats.crcerrs == 0x04000);
reg!(/// MPC, missed packets.
    MPC = STATS + Stats.mpc == 0x04010);
reg!(/// GPRC.
    GPRC = STATS + Stats.gprc == 0x04074);
reg!(/// GPTC.
    GPTC = STATS + Stats.gptc == 0x04080);
reg!(/// GORCL (read before GORCH).
    GORCL = STATS + Stats.gorcl == 0x04088);
reg!(/// GORCH.
    GORCH = STATS + Stats.gorch == 0x0408C);
reg!(/// GOTCL.
    GOTCL = STATS + Stats.gotcl == 0x04090);
reg!(/// GOTCH.
    GOTCH = STATS + Stats.gotch == 0x04094);

/// Receive address 0 (§8.10.13) at 0x05400. Layout only.
#[repr(C)]
#[allow(dead_code)]
pub(crate) struct RecvAddr {
    ral: RW<u32>,
    rah: RW<u32>,
}
const RECV_ADDR: usize = 0x05400;
reg!(/// RAL(0).
    RAL0 = RECV_ADDR + RecvAddr.ral == 0x05400);
reg!(/// RAH(0).
    RAH0 = RECV_ADDR + RecvAddr.rah == 0x05404);

/// RQDPC(n), per-queue receive drops (DROP_EN), clear on read (§8.10.x) at 0x0C030 + 0x40n.
pub const fn rqdpc(n: u16) -> usize {
    0x0C030 + 0x40 * n as usize
}

/// Bytes of BAR 0 mapped (the 82576 register space).
pub const BAR_LEN: u64 = 0x20000;

/// CTRL.SLU: set link up (§8.2.1).
pub const CTRL_SLU: Field = Field::bit(6);
/// CTRL.RST: device reset, self-clearing (§8.2.1).
pub const CTRL_RST: Field = Field::bit(26);
/// STATUS.LU: link up (§8.2.2).
pub const STATUS_LU: Field = Field::bit(1);
/// STATUS.SPEED 7:6: 0 = 10, 1 = 100, 2/3 = 1000 Mb/s.
pub const STATUS_SPEED: Field = Field::new(6, 2);
/// CTRL_EXT.DRV_LOAD (§8.2.3).
pub const CTRL_EXT_DRV_LOAD: Field = Field::bit(28);
/// RCTL fields (§8.10.1).
pub mod rctl {
    use super::Field;
    /// Receive enable.
    pub const EN: Field = Field::bit(1);
    /// Unicast promiscuous.
    pub const UPE: Field = Field::bit(3);
    /// Multicast promiscuous.
    pub const MPE: Field = Field::bit(4);
    /// Long packets (jumbo): kept off, see `intel::MAX_RX_FRAME`.
    pub const LPE: Field = Field::bit(5);
    /// Descriptor type 11:10: must be 00b (SRRCTL selects advanced descriptors).
    pub const DTYP: Field = Field::new(10, 2);
    /// Accept broadcast.
    pub const BAM: Field = Field::bit(15);
    /// Strip the Ethernet CRC.
    pub const SECRC: Field = Field::bit(26);
}
/// TCTL fields (§8.12.1).
pub mod tctl {
    use super::Field;
    /// Transmit enable.
    pub const EN: Field = Field::bit(1);
    /// Pad short packets.
    pub const PSP: Field = Field::bit(3);
}
/// MRQC.MRQE 2:0 on the 82576: 010b = RSS (QEMU: `(MRQC & 3) == E1000_MRQC_ENABLE_RSS_MQ`).
pub const MRQC_MRQE: Field = Field::new(0, 3);
/// RAH.ADDR: MAC bytes 4..5.
pub const RAH_ADDR: Field = Field::new(0, 16);
/// GORCH/GOTCH: the high bits of the octet counters.
pub const OCTETS_HIGH: Field = Field::new(0, 32);
/// MDIC fields (§8.2.4).
pub mod mdic {
    use super::Field;
    /// PHY register data 15:0.
    pub const DATA: Field = Field::new(0, 16);
    /// PHY register address 20:16.
    pub const REGADD: Field = Field::new(16, 5);
    /// PHY address 25:21 (the internal PHY is 1).
    pub const PHYADD: Field = Field::new(21, 5);
    /// Opcode 27:26: 01b write, 10b read.
    pub const OP: Field = Field::new(26, 2);
    /// Opcode of a write.
    pub const OP_WRITE: u32 = 0b01;
    /// The access completed.
    pub const READY: Field = Field::bit(28);
    /// The access failed.
    pub const ERROR: Field = Field::bit(30);
}
/// The PHY's MII control register (IEEE 802.3 clause 22, register 0) and its bits.
pub mod bmcr {
    use super::Field;
    /// Register number.
    pub const REG: u32 = 0;
    /// Speed select (MSB): 1000 Mb/s.
    pub const SPEED1000: Field = Field::bit(6);
    /// Full duplex.
    pub const FD: Field = Field::bit(8);
    /// Restart auto-negotiation (self-clearing).
    pub const ANRESTART: Field = Field::bit(9);
    /// Auto-negotiation enable.
    pub const AUTOEN: Field = Field::bit(12);
}
