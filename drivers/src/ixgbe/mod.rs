//! The Intel 82599 (X520) 10 GbE controller, polled, on the shared ring engine of
//! [`crate::intel`] (82599 datasheet rev. 3.3; X550 datasheet for the larger RSS table).
//!
//! - [`regs`]: every register the driver touches, declared once with offset, width,
//!   access and fields ([`crate::reg`]).
//! - `init`: bring-up in the order of §4.6.3 — master disable, reset, EEPROM and DMA
//!   init done, interrupts masked, RX (§4.6.7) and TX (§4.6.8) global and per-queue
//!   setup, RSS — every wait bounded by the datasheet's maximum. It returns a plain
//!   `BringUp` (BAR, MAC, rings, RSS shadow) that the port is built from, so the
//!   bring-up does not know the port type.
//! - `link`: SFP+ module presence (82599 SFP+ and X550EM SFP designs), an
//!   auto-negotiation restart through AUTOC (the link mode the EEPROM loaded is kept)
//!   and a bounded wait for LINKS.UP.
//! - `stats`: the clear-on-read counters, accumulated in software (36-bit octets, low
//!   half first).
//! - [`Ixgbe`]: the port: queues (borrowed, or moved out with [`Ixgbe::take_queues`]),
//!   link, RSS (including live redirection-table updates,
//!   [`cadence_core::nic::Port::set_rss_table`]) and statistics.
//!
//! The bring-up order in detail (§4.6.3): master disable, reset, EEC.ARD and
//! RDRXCTL.DMAIDONE, EIMC, packet buffers, FCRTH, CRC strip in HLREG0 and RDRXCTL, RDRXCTL
//! magic bits, SECRXCTRL around RXEN, DMATXCTL.TE before any TXDCTL.ENABLE, RXDCTL.ENABLE read
//! back before the first tail write, DCA_RXCTRL bit 12, NS_DIS; every wait bounded. Link: an
//! SFP+ board needs a module in its cage (82599: ESDP.SDP2 set; X550EM: ESDP.SDP0 clear;
//! otherwise `InitError::NoModule`), and the bring-up waits for LINKS.UP at most
//! `Config::link_timeout_ms` (`InitError::LinkDown`: device reset, buffers returned).
//! Statistics totals past 2^36 keep counting. `take_queues` moves the rings out like igb's.
//!
//! Verification status: this driver has been run only against the register-level
//! 82599 model in `tests/src/ixgbe_model/`, which checks the datasheet's ordering
//! rules (written from the datasheet independently of the driver, it fails a test on any
//! ordering breach: a tail before ENABLE read back, FCTRL written with RXEN set, TXDCTL
//! before TE, misaligned rings, DMA outside allocated memory, …). It is model-verified
//! until real hardware is attached. X540/X550 device IDs
//! are recognized (the X550 family gets its 512-entry table); their copper PHYs
//! negotiate on their own after the reset and the driver only waits for LINKS, which
//! is untested on silicon.
//!
//! ```text
//! let mut nic = Ixgbe::try_new(&pci_fn, &mut dma, &tsc, &mut pool, &Config::default())?;
//! let (rx, tx) = nic.queue_pair(0).expect("pair 0 always exists");
//! ```

mod init;
mod link;
mod port;
pub mod regs;
mod stats;

use core::fmt;

use cadence_core::rss::DEFAULT_KEY;

use crate::hal::{BarError, DmaError};
use crate::intel::QueueMap;
use crate::intel::queue::{RxBlock, TxBlock};
use crate::reg::{Block, Field};

pub use link::Link;
pub use port::Ixgbe;
pub use stats::HwStats;

/// Intel's PCI vendor ID.
pub const VENDOR_ID: u16 = 0x8086;

/// The MAC generation behind a device ID; it decides the redirection-table size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MacType {
    /// 82599 (X520, X540 share its 128-entry table).
    M82599,
    /// X540.
    X540,
    /// X550, X552, X553: 512-entry table (RETA + ERETA).
    X550,
}

impl MacType {
    /// The MAC type of PCI device `device`, if this driver knows it.
    pub const fn from_device_id(device: u16) -> Option<Self> {
        match device {
            // 82599: KX4, KX4 mezz, combo backplane, CX4, SFP+, XAUI, KR, T3, SFP+ FCoE,
            // backplane FCoE, SFP+ SF2, SFP+ SF QP, 82599EN SFP+, LS, QSFP+ SF QP, SFP+ EM.
            0x10F7 | 0x1514 | 0x10F8 | 0x10F9 | 0x10FB | 0x10FC | 0x1517 | 0x151C | 0x1529 | 0x152A | 0x154D
            | 0x154A | 0x1557 | 0x154F | 0x1558 | 0x1507 => Some(MacType::M82599),
            0x1528 | 0x1560 => Some(MacType::X540),
            0x1563 | 0x15D1 | 0x15AA | 0x15AB | 0x15AC | 0x15AD | 0x15AE | 0x15C2 | 0x15C3 | 0x15C4 | 0x15C6
            | 0x15C7 | 0x15C8 | 0x15CE | 0x15E4 | 0x15E5 => Some(MacType::X550),
            _ => None,
        }
    }

    /// Entries in the RSS redirection table (82599 §7.1.2.10: 128; X550: 512).
    pub const fn reta_entries(self) -> usize {
        match self {
            MacType::M82599 | MacType::X540 => 128,
            MacType::X550 => 512,
        }
    }

    /// Receive queues RSS can spread over: the 82599/X540 table entries are 4 bits
    /// wide (§7.1.2.10), so 16; X550 entries reach 64.
    pub const fn rss_queues(self) -> u16 {
        match self {
            MacType::M82599 | MacType::X540 => 16,
            MacType::X550 => 64,
        }
    }
}

/// How a port's SFP+ cage reports a module (82599 and X550EM SFP+ designs); `None` for
/// backplane and copper parts, which have no cage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SfpCage {
    /// 82599 SFP+ boards: ESDP.SDP2 reads 1 while a module sits in the cage.
    Sdp2Present,
    /// X550EM SFP+ boards: ESDP.SDP0 reads 1 while the cage is empty (MOD_ABS).
    Sdp0Absent,
}

impl SfpCage {
    /// The cage of PCI device `device`, if it has one.
    pub const fn of_device(device: u16) -> Option<Self> {
        match device {
            // 82599 SFP+, SFP+ FCoE, SFP+ EM, SFP+ SF2, SFP+ SF QP, 82599EN SFP+.
            0x10FB | 0x1529 | 0x1507 | 0x154D | 0x154A | 0x1557 => Some(SfpCage::Sdp2Present),
            // X550EM_X SFP+, X550EM_A SFP+, X550EM_A SFP+ N.
            0x15AC | 0x15CE | 0x15C4 => Some(SfpCage::Sdp0Absent),
            _ => None,
        }
    }
}

/// Where the 82599 keeps its queue registers (§8.2.3.8, §8.2.3.9).
#[derive(Debug, Clone, Copy)]
pub struct IxgbeQueues;

impl QueueMap for IxgbeQueues {
    const QUEUES: u16 = 128;
    type Srrctl = regs::SRRCTL;
    const SRRCTL: regs::SRRCTL = regs::SRRCTL;
    const SRRCTL_BSIZEPACKET: Field<regs::SRRCTL> = regs::SRRCTL::BSIZEPACKET;
    const SRRCTL_BSIZEHEADER: Field<regs::SRRCTL> = regs::SRRCTL::BSIZEHEADER;
    const SRRCTL_DESCTYPE: Field<regs::SRRCTL> = regs::SRRCTL::DESCTYPE;
    /// SRRCTL.DROP_EN is bit 28 on the 82599 (§8.2.3.8.7).
    const SRRCTL_DROP_EN: Field<regs::SRRCTL> = regs::SRRCTL::DROP_EN;

    /// RDBAL(n) at 0x01000 + 0x40n for n < 64, 0x0D000 + 0x40(n - 64) above.
    fn rx_block(q: u16) -> Option<Block<RxBlock>> {
        let q = usize::from(q);
        if q < 64 { regs::RX_BLOCKS_LOW.at(q) } else { regs::RX_BLOCKS_HIGH.at(q - 64) }
    }

    /// TDBAL(n) at 0x06000 + 0x40n.
    fn tx_block(q: u16) -> Option<Block<TxBlock>> {
        regs::TX_BLOCKS.at(usize::from(q))
    }
}

/// Bring-up knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Config {
    /// Receive queues (1..=16 on the 82599: RSS reaches no further). Default 1.
    pub rx_queues: u16,
    /// Transmit queues (1..=64). Default 1.
    pub tx_queues: u16,
    /// Descriptors per receive ring (16..=8192, a multiple of 8). Default 512.
    pub rx_ring: u16,
    /// Descriptors per transmit ring. Default 512.
    pub tx_ring: u16,
    /// The Toeplitz key. Default `cadence_core::rss::DEFAULT_KEY`, so software can
    /// predict the queue of a flow with `cadence_core::rss`.
    pub rss_key: [u8; 40],
    /// Accept every unicast and multicast frame (a forwarder needs this). Default on.
    pub promiscuous: bool,
    /// Fill the receive rings from the bring-up's pool. Default on; off when each
    /// queue gets buffers from its own pool later (`IntelRx::fill`).
    pub fill_rx: bool,
    /// How long the bring-up waits for LINKS.UP after the auto-negotiation restart, in
    /// ms; 0 = do not wait (the link is whatever it is). Default 5000 (KX4/KR
    /// auto-negotiation and SFP+ link-up take well under a second; Linux allows 9 s).
    pub link_timeout_ms: u32,
    /// The longest frame received, FCS aside. Above `intel::MAX_RX_FRAME` (up to
    /// [`MAX_FRAME`]): HLREG0.JUMBOEN with MAXFRS, 1 KiB receive buffers, frames
    /// over several descriptors. Default `intel::MAX_RX_FRAME`; at most [`MAX_FRAME`].
    pub max_frame: usize,
}

/// The longest frame the 82599 receives, CRC aside: Intel's ixgbe documentation gives 9 728 bytes
/// with it (the largest jumbo frame). Within what the ring takes (`intel::MAX_JUMBO_FRAME`).
pub const MAX_FRAME: usize = 9728 - 4;
const _: () = assert!(MAX_FRAME <= crate::intel::MAX_JUMBO_FRAME);

impl Default for Config {
    fn default() -> Self {
        Self {
            rx_queues: 1,
            tx_queues: 1,
            rx_ring: 512,
            tx_ring: 512,
            rss_key: DEFAULT_KEY,
            promiscuous: true,
            fill_rx: true,
            link_timeout_ms: 5000,
            max_frame: crate::intel::MAX_RX_FRAME,
        }
    }
}

impl Config {
    /// This configuration receiving frames of up to `bytes` ([`Config::max_frame`]).
    pub fn with_max_frame(mut self, bytes: usize) -> Self {
        self.max_frame = bytes;
        self
    }

    /// This configuration with `rx` receive and `tx` transmit queues.
    pub fn with_queues(mut self, rx: u16, tx: u16) -> Self {
        self.rx_queues = rx;
        self.tx_queues = tx;
        self
    }

    /// This configuration with the receive rings filled at bring-up or not.
    pub fn with_fill_rx(mut self, fill: bool) -> Self {
        self.fill_rx = fill;
        self
    }

    /// This configuration waiting at most `ms` for the link (0: not at all).
    pub fn with_link_timeout_ms(mut self, ms: u32) -> Self {
        self.link_timeout_ms = ms;
        self
    }

    /// This configuration with rings of `rx` and `tx` descriptors.
    pub fn with_rings(mut self, rx: u16, tx: u16) -> Self {
        self.rx_ring = rx;
        self.tx_ring = tx;
        self
    }
}

/// Why bring-up failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitError {
    /// The function is not an 82599/X5xx.
    NotIxgbe {
        /// Its vendor ID.
        vendor: u16,
        /// Its device ID.
        device: u16,
    },
    /// A configuration value is out of range (queues, ring sizes).
    BadConfig,
    /// `Config::max_frame` is longer than the 82599 receives ([`MAX_FRAME`]).
    MaxFrame(usize),
    /// BAR 0 could not be mapped.
    MapBar(BarError),
    /// CTRL.RST did not clear.
    ResetTimeout,
    /// EEC.ARD (EEPROM auto-read done) did not set.
    EepromTimeout,
    /// RDRXCTL.DMAIDONE did not set.
    DmaInitTimeout,
    /// Descriptor ring memory could not be had.
    RingAlloc(DmaError),
    /// RXDCTL(n).ENABLE did not read back set.
    RxEnableTimeout(u16),
    /// TXDCTL(n).ENABLE did not read back set.
    TxEnableTimeout(u16),
    /// SECRXSTAT.SECRX_RDY did not set.
    SecRxTimeout,
    /// The SFP+ cage is empty (ESDP).
    NoModule,
    /// LINKS.UP did not set within the configured time after the auto-negotiation
    /// restart.
    LinkDown {
        /// How long the driver waited, in ms.
        waited_ms: u32,
    },
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::NotIxgbe { vendor, device } => write!(f, "{vendor:04x}:{device:04x} is not an 82599/X5xx"),
            InitError::BadConfig => f.write_str("queue count or ring size out of range"),
            InitError::MaxFrame(n) => write!(f, "max_frame {n}: the 82599 receives frames up to {MAX_FRAME} bytes"),
            InitError::MapBar(e) => write!(f, "BAR 0: {e}"),
            InitError::ResetTimeout => f.write_str("CTRL.RST did not clear"),
            InitError::EepromTimeout => f.write_str("EEPROM auto-read did not finish"),
            InitError::DmaInitTimeout => f.write_str("RDRXCTL.DMAIDONE did not set"),
            InitError::RingAlloc(e) => write!(f, "descriptor rings: {e}"),
            InitError::RxEnableTimeout(q) => write!(f, "RXDCTL({q}).ENABLE did not read back"),
            InitError::TxEnableTimeout(q) => write!(f, "TXDCTL({q}).ENABLE did not read back"),
            InitError::SecRxTimeout => f.write_str("SECRXSTAT.SECRX_RDY did not set"),
            InitError::NoModule => f.write_str("no SFP+ module in the cage"),
            InitError::LinkDown { waited_ms } => write!(f, "link did not come up within {waited_ms} ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_blocks_follow_the_register_summary() {
        use crate::reg::Place;
        let rx = |q| IxgbeQueues::rx_block(q).map(Block::base);
        assert_eq!(rx(0), Some(0x01000));
        assert_eq!(rx(63), Some(0x01FC0));
        assert_eq!(rx(64), Some(0x0D000));
        assert_eq!(rx(128), None);
        assert_eq!(IxgbeQueues::rx_block(1).map(|b| b.reg(regs::SRRCTL).offset()), Some(0x01054));
        assert_eq!(IxgbeQueues::tx_block(2).map(Block::base), Some(0x06080));
        assert_eq!(regs::QPRDC.at(1).map(Place::offset), Some(0x01470));
    }

    #[test]
    fn device_ids_pick_the_table_size() {
        assert_eq!(MacType::from_device_id(0x10FB), Some(MacType::M82599));
        assert_eq!(MacType::from_device_id(0x1563).map(MacType::reta_entries), Some(512));
        assert_eq!(MacType::from_device_id(0x10C9), None);
        assert_eq!(SfpCage::of_device(0x10FB), Some(SfpCage::Sdp2Present));
        assert_eq!(SfpCage::of_device(0x10F8), None);
    }
}
