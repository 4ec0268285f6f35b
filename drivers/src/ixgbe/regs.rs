//! 82599 registers and their fields (82599 datasheet §8.2.3, register summary table
//! 8-3), declared once each with offset, width and access ([`crate::reg`]); the X550's
//! extended redirection table from the X550 datasheet §8.2.3.7.17.
//!
//! The per-queue registers shared with the 82576 (ring base, length, head, tail,
//! RXDCTL/TXDCTL) are in [`crate::intel::queue`]; the RSS key, RETA and RXCSUM in
//! [`crate::intel::rss`].

use crate::intel::queue::{RxBlock, TxBlock};
use crate::reg::BlockArray;
use crate::registers;

registers! {
    /// CTRL, device control (§8.2.3.1.1).
    pub CTRL: Rw<u32> @ 0x00000 {
        /// GIO master disable: stop issuing new master requests.
        GIO_DIS: 2,
        /// Link reset.
        LRST: 3,
        /// Device reset; self-clearing.
        RST: 26,
    }
    /// STATUS, device status (§8.2.3.1.2).
    pub STATUS: Ro<u32> @ 0x00008 {
        /// GIO master enable status: clear when no master request is pending.
        GIO_MASTER_EN: 19,
    }
    /// CTRL_EXT, extended device control (§8.2.3.1.3).
    pub CTRL_EXT: Rw<u32> @ 0x00018 {
        /// No-snoop disable (§4.6.7: set it for a polled driver that does not use DCA).
        NS_DIS: 16,
        /// Driver loaded (tells firmware the driver took over).
        DRV_LOAD: 28,
    }
    /// ESDP, extended SDP control (§8.2.3.1.4): the software-definable pins, which SFP+
    /// boards wire to the cage's module-present / module-absent line.
    pub ESDP: Rw<u32> @ 0x00020 {
        /// SDP0 data: on X550EM SFP+ boards 1 = the cage is empty (MOD_ABS).
        SDP0: 0,
        /// SDP2 data: on 82599 SFP+ boards 1 = a module sits in the cage.
        SDP2: 2,
    }
    /// EIMS, interrupt mask set (write 1 to enable; §8.2.3.5.3).
    pub EIMS: Rw<u32> @ 0x00880 {}
    /// EIMC, interrupt mask clear (write 1 to disable; §8.2.3.5.4).
    pub EIMC: Wo<u32> @ 0x00888 {
        /// Every cause the register covers (bit 31 is reserved).
        ALL: 30:0,
    }
    /// EIMC_EX(0..1), the queue-interrupt halves of the mask clear (§8.2.3.5.5).
    pub EIMC_EX: Wo<u32> @ 0x00AB0 [2; stride 4] {}
    /// RDRXCTL, receive DMA control (§8.2.3.8.8).
    pub RDRXCTL: Rw<u32> @ 0x02F00 {
        /// Strip the Ethernet CRC (must agree with HLREG0.RXCRCSTRP).
        CRCSTRIP: 1,
        /// DMA init done (read only).
        DMAIDONE: 3,
        /// RSC first-size field: must be 0.
        RSCFRSTSIZE: 21:17,
        /// RSC coalescing on ACK change: must be 1.
        RSCACKC: 25,
        /// FCoE write-back fix: must be 1.
        FCOE_WRFIX: 26,
    }
    /// RXCTRL, receive control (§8.2.3.8.10).
    pub RXCTRL: Rw<u32> @ 0x03000 {
        /// Receive enable.
        RXEN: 0,
    }
    /// FCRTH(0..7), flow control receive threshold high (§8.2.3.3.4).
    pub FCRTH: Rw<u32> @ 0x03260 [8; stride 4] {
        /// Threshold in 32-byte units (the register value is the byte count).
        RTH: 18:5,
    }
    /// RXPBSIZE(0..7), receive packet buffer sizes (§8.2.3.9.1).
    pub RXPBSIZE: Rw<u32> @ 0x03C00 [8; stride 4] {
        /// Size in KiB.
        SIZE: 19:10,
    }
    /// MPC(0..7), missed packets (no room in the packet buffer), clear on read
    /// (§8.2.3.23.4).
    pub MPC: Rc<u32> @ 0x03FA0 [8; stride 4] {}
    /// CRCERRS, CRC errors, clear on read (§8.2.3.23.1).
    pub CRCERRS: Rc<u32> @ 0x04000 {}
    /// GPRC, good packets received, clear on read (§8.2.3.23.18).
    pub GPRC: Rc<u32> @ 0x04074 {}
    /// GPTC, good packets transmitted, clear on read (§8.2.3.23.22).
    pub GPTC: Rc<u32> @ 0x04080 {}
    /// GORCL, good octets received, low 32 of 36 bits (read before GORCH; §8.2.3.23.23).
    pub GORCL: Ro<u32> @ 0x04088 {}
    /// GORCH, good octets received, high 4 bits; reading it clears the counter.
    pub GORCH: Rc<u32> @ 0x0408C {
        /// The counter's bits 35:32.
        HIGH: 3:0,
    }
    /// GOTCL, good octets transmitted, low 32 of 36 bits (§8.2.3.23.25).
    pub GOTCL: Ro<u32> @ 0x04090 {}
    /// GOTCH, good octets transmitted, high 4 bits.
    pub GOTCH: Rc<u32> @ 0x04094 {
        /// The counter's bits 35:32.
        HIGH: 3:0,
    }
    /// HLREG0, MAC core control 0 (§8.2.3.22.8).
    pub HLREG0: Rw<u32> @ 0x04240 {
        /// Append CRC on transmit.
        TXCRCEN: 0,
        /// Strip CRC on receive.
        RXCRCSTRP: 1,
        /// Jumbo frames (up to MAXFRS; on only for a `Config::max_frame` above
        /// `intel::MAX_RX_FRAME`).
        JUMBOEN: 2,
        /// Pad short frames on transmit.
        TXPADEN: 10,
    }
    /// MAXFRS, the longest frame with HLREG0.JUMBOEN, CRC included (§8.2.3.22.13).
    pub MAXFRS: Rw<u32> @ 0x04268 {
        /// Bytes.
        MFS: 31:16,
    }
    /// AUTOC, auto-negotiation control (§8.2.3.22.19). The link mode the EEPROM loaded
    /// is kept; the driver only restarts auto-negotiation.
    pub AUTOC: Rw<u32> @ 0x042A0 {
        /// Restart auto-negotiation (self-clearing).
        RESTART_AN: 12,
        /// Link mode select (kept as loaded).
        LMS: 15:13,
    }
    /// LINKS, link status (§8.2.3.22.20).
    pub LINKS: Ro<u32> @ 0x042A4 {
        /// Speed: 1 = 100 Mb/s, 2 = 1 Gb/s, 3 = 10 Gb/s.
        SPEED: 29:28,
        /// Link up.
        UP: 30,
    }
    /// RTTDCS, DCB transmit descriptor plane control (§8.2.3.10.2).
    pub RTTDCS: Rw<u32> @ 0x04900 {
        /// TX descriptor arbiter disable (set while changing TX buffers).
        ARBDIS: 6,
    }
    /// TXPBTHRESH(0..7), transmit packet buffer thresholds (§8.2.3.9.16).
    pub TXPBTHRESH: Rw<u32> @ 0x04950 [8; stride 4] {
        /// Threshold in KiB.
        THRESH: 9:0,
    }
    /// DMATXCTL, DMA transmit control (§8.2.3.9.2).
    pub DMATXCTL: Rw<u32> @ 0x04A80 {
        /// Transmit enable, before any TXDCTL.ENABLE.
        TE: 0,
    }
    /// FCTRL, filter control (§8.2.3.7.1); may change only while RXCTRL.RXEN = 0.
    pub FCTRL: Rw<u32> @ 0x05080 {
        /// Multicast promiscuous.
        MPE: 8,
        /// Unicast promiscuous.
        UPE: 9,
        /// Accept broadcast.
        BAM: 10,
    }
    /// MRQC, multiple receive queues command (§8.2.3.7.12).
    pub MRQC: Rw<u32> @ 0x05818 {
        /// MRQE: 0001b = RSS only.
        MRQE: 3:0,
        /// Hash TCP over IPv4.
        IPV4_TCP: 16,
        /// Hash IPv4 addresses.
        IPV4: 17,
        /// Hash TCP over IPv6 with extension headers.
        IPV6_EX_TCP: 18,
        /// Hash IPv6 with extension headers.
        IPV6_EX: 19,
        /// Hash IPv6 addresses.
        IPV6: 20,
        /// Hash TCP over IPv6.
        IPV6_TCP: 21,
        /// Hash UDP over IPv4.
        IPV4_UDP: 22,
        /// Hash UDP over IPv6.
        IPV6_UDP: 23,
    }
    /// DTXMXSZRQ, DMA TX max size of total outstanding requests (§8.2.3.9.12).
    pub DTXMXSZRQ: Rw<u32> @ 0x08100 {
        /// Maximum bytes of outstanding requests.
        MAX_BYTES_NUM_REQ: 11:0,
    }
    /// MTQC, multiple transmit queues command (§8.2.3.9.15).
    pub MTQC: Rw<u32> @ 0x08120 {}
    /// SECRXCTRL, security RX control (§8.2.3.12.10).
    pub SECRXCTRL: Rw<u32> @ 0x08D00 {
        /// Stop the security block's receive path.
        RX_DIS: 1,
    }
    /// SECRXSTAT, security RX status (§8.2.3.12.11).
    pub SECRXSTAT: Ro<u32> @ 0x08D04 {
        /// The security block's receive path is idle.
        SECRX_RDY: 0,
    }
    /// RAL(0), MAC bytes 0..3 (§8.2.3.7.8).
    pub RAL0: Rw<u32> @ 0x0A200 {}
    /// RAH(0), MAC bytes 4..5 and AV (§8.2.3.7.9).
    pub RAH0: Rw<u32> @ 0x0A204 {
        /// MAC bytes 4..5.
        ADDR: 15:0,
        /// Address valid.
        AV: 31,
    }
    /// TXPBSIZE(0..7), transmit packet buffer sizes (§8.2.3.9.13).
    pub TXPBSIZE: Rw<u32> @ 0x0CC00 [8; stride 4] {
        /// Size in KiB.
        SIZE: 19:10,
    }
    /// ERETA(0..95): entries 128..511 of the X550 redirection table (X550 §8.2.3.7.17).
    pub ERETA: Rw<u32> @ 0x0EE80 [96; stride 4] {}
    /// EEC, EEPROM/flash control (§8.2.3.2.1).
    pub EEC: Rw<u32> @ 0x10010 {
        /// EEPROM present.
        EE_PRES: 8,
        /// Auto-read done: the hardware loaded its EEPROM defaults.
        ARD: 9,
    }
    /// QPRDC(0..15), per-queue receive drops with DROP_EN, clear on read (§8.2.3.23.42).
    pub QPRDC: Rc<u32> @ 0x01430 [16; stride 0x40] {}

    /// DCA_RXCTRL(n), receive DCA control, in the queue block (§8.2.3.11.1).
    pub DCA_RXCTRL: Rw<u32> @ 0x0C in RxBlock {
        /// "Reserved, must be set to 0", though it resets to 1.
        BIT12: 12,
    }
    /// SRRCTL(n), split receive control, in the queue block (§8.2.3.8.7; 0x02100 + 4n
    /// is an alias for n < 16).
    pub SRRCTL: Rw<u32> @ 0x14 in RxBlock {
        /// Packet buffer size in KiB.
        BSIZEPACKET: 6:0,
        /// Header buffer size in 64-byte units.
        BSIZEHEADER: 13:8,
        /// Descriptor type.
        DESCTYPE: 27:25,
        /// Drop frames when the queue has no descriptor.
        DROP_EN: 28,
    }
    /// DCA_TXCTRL(n), transmit DCA control, in the queue block (§8.2.3.11.2).
    pub DCA_TXCTRL: Rw<u32> @ 0x0C in TxBlock {}
}

/// Receive queues 0..63 (§8.2.3.8: RDBAL(n) at 0x01000 + 0x40n).
pub const RX_BLOCKS_LOW: BlockArray<RxBlock> = BlockArray::new(0x01000, 0x40, 64);
/// Receive queues 64..127 (at 0x0D000 + 0x40(n − 64)).
pub const RX_BLOCKS_HIGH: BlockArray<RxBlock> = BlockArray::new(0x0D000, 0x40, 64);
/// Transmit queues 0..127 (§8.2.3.9: TDBAL(n) at 0x06000 + 0x40n).
pub const TX_BLOCKS: BlockArray<TxBlock> = BlockArray::new(0x06000, 0x40, 128);

/// Bytes of BAR 0 the driver maps (the register space; flash follows).
pub const BAR_LEN: u64 = 0x20000;
