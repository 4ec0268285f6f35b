//! 82576 registers the igb driver touches (82576 datasheet §8, the e1000 register
//! map), as QEMU's `igb` model implements them, declared once each with offset, width,
//! access and fields ([`crate::reg`]). The queue blocks' shared skeleton is in
//! [`crate::intel::queue`], the RSS key and table in [`crate::intel::rss`].

use crate::intel::queue::{RxBlock, TxBlock};
use crate::reg::BlockArray;
use crate::registers;

registers! {
    /// CTRL, device control (§8.2.1).
    pub CTRL: Rw<u32> @ 0x00000 {
        /// Set link up.
        SLU: 6,
        /// Device reset, self-clearing.
        RST: 26,
    }
    /// STATUS, device status (§8.2.2).
    pub STATUS: Ro<u32> @ 0x00008 {
        /// Link up.
        LU: 1,
        /// Speed: 0 = 10, 1 = 100, 2/3 = 1000 Mb/s.
        SPEED: 7:6,
    }
    /// CTRL_EXT, extended device control (§8.2.3).
    pub CTRL_EXT: Rw<u32> @ 0x00018 {
        /// Driver loaded.
        DRV_LOAD: 28,
    }
    /// MDIC, MDI (PHY register) control (§8.2.4).
    pub MDIC: Rw<u32> @ 0x00020 {
        /// PHY register data.
        DATA: 15:0,
        /// PHY register address.
        REGADD: 20:16,
        /// PHY address (the internal PHY is 1).
        PHYADD: 25:21,
        /// Opcode: 01b write, 10b read.
        OP: 27:26,
        /// The access completed.
        READY: 28,
        /// The access failed.
        ERROR: 30,
    }
    /// IMC, legacy interrupt mask clear (§8.8.6).
    pub IMC: Wo<u32> @ 0x000D8 {
        /// Every cause.
        ALL: 31:0,
    }
    /// RCTL, receive control (§8.10.1).
    pub RCTL: Rw<u32> @ 0x00100 {
        /// Receive enable.
        EN: 1,
        /// Unicast promiscuous.
        UPE: 3,
        /// Multicast promiscuous.
        MPE: 4,
        /// Long packets (jumbo frames, up to RLPML): on only for a `Config::max_frame` above
        /// `intel::MAX_RX_FRAME`.
        LPE: 5,
        /// Descriptor type: must be 00b (SRRCTL selects advanced descriptors).
        DTYP: 11:10,
        /// Accept broadcast.
        BAM: 15,
        /// Strip the Ethernet CRC.
        SECRC: 26,
    }
    /// TCTL, transmit control (§8.12.1).
    pub TCTL: Rw<u32> @ 0x00400 {
        /// Transmit enable.
        EN: 1,
        /// Pad short packets.
        PSP: 3,
    }
    /// EIMC, extended interrupt mask clear (§8.8.10).
    pub EIMC: Wo<u32> @ 0x01528 {
        /// Every cause.
        ALL: 31:0,
    }
    /// RLPML, the longest packet received with RCTL.LPE, CRC included (§8.10.18).
    pub RLPML: Rw<u32> @ 0x05004 {
        /// Bytes.
        RLPML: 13:0,
    }
    /// CRCERRS, clear on read (§8.19).
    pub CRCERRS: Rc<u32> @ 0x04000 {}
    /// MPC, missed packets, clear on read.
    pub MPC: Rc<u32> @ 0x04010 {}
    /// GPRC, good packets received, clear on read.
    pub GPRC: Rc<u32> @ 0x04074 {}
    /// GPTC, good packets transmitted, clear on read.
    pub GPTC: Rc<u32> @ 0x04080 {}
    /// GORCL (read before GORCH).
    pub GORCL: Ro<u32> @ 0x04088 {}
    /// GORCH; reading it clears the pair.
    pub GORCH: Rc<u32> @ 0x0408C {
        /// The counter's high bits.
        HIGH: 31:0,
    }
    /// GOTCL.
    pub GOTCL: Ro<u32> @ 0x04090 {}
    /// GOTCH.
    pub GOTCH: Rc<u32> @ 0x04094 {
        /// The counter's high bits.
        HIGH: 31:0,
    }
    /// RAL(0), MAC bytes 0..3 (§8.10.13).
    pub RAL0: Rw<u32> @ 0x05400 {}
    /// RAH(0), MAC bytes 4..5.
    pub RAH0: Rw<u32> @ 0x05404 {
        /// MAC bytes 4..5.
        ADDR: 15:0,
    }
    /// MRQC, multiple receive queues command (§8.10.10).
    pub MRQC: Rw<u32> @ 0x05818 {
        /// MRQE: 010b = RSS (QEMU: `(MRQC & 3) == E1000_MRQC_ENABLE_RSS_MQ`).
        MRQE: 2:0,
        /// Hash TCP over IPv4.
        IPV4_TCP: 16,
        /// Hash IPv4 addresses.
        IPV4: 17,
        /// Hash TCP over IPv6 with extension headers.
        IPV6_EX_TCP: 18,
        /// Hash IPv6 addresses.
        IPV6: 20,
        /// Hash TCP over IPv6.
        IPV6_TCP: 21,
        /// Hash UDP over IPv4.
        IPV4_UDP: 22,
        /// Hash UDP over IPv6.
        IPV6_UDP: 23,
    }
    /// RQDPC(0..15), per-queue receive drops (DROP_EN), clear on read.
    pub RQDPC: Rc<u32> @ 0x0C030 [16; stride 0x40] {}

    /// SRRCTL(n), split receive control, in the queue block (§8.10.2).
    pub SRRCTL: Rw<u32> @ 0x0C in RxBlock {
        /// Packet buffer size in KiB.
        BSIZEPACKET: 6:0,
        /// Header buffer size in 64-byte units.
        BSIZEHEADER: 13:8,
        /// Descriptor type.
        DESCTYPE: 27:25,
        /// Drop frames when the queue has no descriptor (bit 31 on the 82576).
        DROP_EN: 31,
    }
}

/// Receive queues 0..15 (RDBAL(n) at 0x0C000 + 0x40n; 0x02800 + 0x100n is a legacy
/// alias for n < 4).
pub const RX_BLOCKS: BlockArray<RxBlock> = BlockArray::new(0x0C000, 0x40, 16);
/// Transmit queues 0..15 (TDBAL(n) at 0x0E000 + 0x40n).
pub const TX_BLOCKS: BlockArray<TxBlock> = BlockArray::new(0x0E000, 0x40, 16);

/// Bytes of BAR 0 mapped (the 82576 register space).
pub const BAR_LEN: u64 = 0x20000;

/// The PHY's MII control register (IEEE 802.3 clause 22, register 0), reached through
/// MDIC.
pub mod bmcr {
    crate::registers! {
        /// BMCR: basic mode control (PHY register 0).
        pub BMCR: Rw<u16> @ 0x00 in Phy {
            /// Speed select (MSB): 1000 Mb/s.
            SPEED1000: 6,
            /// Full duplex.
            FD: 8,
            /// Restart auto-negotiation (self-clearing).
            ANRESTART: 9,
            /// Auto-negotiation enable.
            AUTOEN: 12,
        }
    }

    /// The space of PHY registers (reached through MDIC, not the BAR).
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Phy {}

    /// BMCR's PHY register number.
    pub const REG: u64 = 0;
}

/// MDIC opcode of a write.
pub const MDIC_OP_WRITE: u64 = 0b01;
