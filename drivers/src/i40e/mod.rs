//! The Intel XL710/X710/XXV710 ("i40e") 10/25/40 GbE controller, polled, as a PF driver
//! on the shared ring engine of [`crate::intel`] (XL710 datasheet rev. 2.x; facts
//! cross-checked against Linux/DPDK/iPXE, code our own).
//!
//! The XL710 is firmware-mediated: the driver configures the switch, the VSI and the
//! link through the admin queue, and each LAN queue's state lives in a context object
//! in host memory (the HMC), not in registers. The bring-up (`init`), in order:
//!
//! 1. wait until no global reset runs (GLGEN_RSTAT) and the firmware loaded its
//!    configuration (GLNVM_ULD), then a PF reset (PFGEN_CTRL.PFSWR, bounded);
//! 2. the admin queue ([`aq`]): Get Version (API 1.x), Clear PXE Mode, MAC Address
//!    Read, Get Switch Config (the PF's VSI), Get VSI Parameters (its queue set
//!    handle), Update VSI (a contiguous queue map on TC 0), promiscuous modes;
//! 3. the HMC in direct mode ([`hmc`]) and the bit-packed RX/TX queue contexts;
//! 4. RSS by registers: the 52-byte key (PFQF_HKEY; the first 40 bytes are
//!    `cadence_core::rss::DEFAULT_KEY`, so software predicts the queue), a 512-entry
//!    lookup table (PFQF_HLUT, PFQF_CTL_0.HASHLUTSIZE) and the hashed packet types
//!    (PFQF_HENA) — RX control registers go through the admin queue from API 1.5;
//! 5. descriptor write-back in poll mode: every queue in interrupt 0's linked list
//!    with its cause enabled and no ITR delay, interrupt 0 enabled (INTx stays off in
//!    PCI, MSI-X unconfigured): without it the XL710 writes completions back only
//!    every few descriptors ;
//! 6. per queue: context, then (TX) QTX_CTL, pre-disable cleared, QTX_ENA with a
//!    bounded wait for QENA_STAT; (RX) QRX_ENA with a bounded wait, then the tail;
//! 7. PFHMC_ERRORINFO checked (HMC errors are silent), the link read with events on,
//!    and waited for at most [`Config::link_timeout_ms`].
//!
//! Details of the steps: any failure resets the PF (which stops DMA) and returns the
//! receive buffers; a global reset or firmware not ready is `GlobalReset` /
//! `FirmwareNotReady`. The admin queue ([`aq`]) has 32-entry ASQ and ARQ of 32-byte
//! descriptors, one command at a time, `hal::dma_wmb()` before ATQT, a 250 ms deadline on
//! ATQH, DD then `hal::dma_rmb()`, cookie echo and `retval` as a typed `AqStatus`; a
//! timed-out command blocks later ones (`AqError::Busy`) until the firmware returns it;
//! ARQ events are read and re-posted with ARQT = the index cleaned. Get Version needs API
//! 1.x (else `UnsupportedApi`); Clear PXE Mode's EEXIST is success. The HMC ([`hmc`]) is in
//! direct mode with 2 MiB of backing in SD 0, TX objects at FPM 0 and RX objects after
//! them, 512-aligned (GLHMC_LAN{TX,RX}{BASE,CNT}); contexts are bit-packed by `CtxField`
//! from the datasheet's tables and checked against hand-packed byte images; PFHMC_ERRORINFO
//! becomes an `HmcError`. Interrupt 0's linked list is RX q → TX q → RX q+1, ITR none,
//! PFINT_DYN_CTL0.INTENA. TX enable: QTX_CTL (PF queue), GLLAN_TXPRE_QDIS clear, 10 µs,
//! QTX_ENA and QENA_STAT; RX: QRX_ENA and QENA_STAT, then the tail rounded down to a
//! multiple of 8 (`RxFormat::TAIL_STEP`); link: Get Link Status with events on
//! (`LinkDown`). Rings: the shared engine with the XL710's formats ([`desc`]: 32-byte RX,
//! 16-byte TX data descriptors with ICRC|EOP[|RS], done = DTYPE 0xF; frames under 17 bytes
//! are refused before they could trip malicious-driver detection). The port keeps the admin
//! queue (link events through `poll_events`, `refresh_link`), `set_rss_table` writes only
//! changed HLUT registers and flushes them with a read, `take_queues` hands the rings to
//! lanes.
//!
//! Statistics are the port's 48-bit counters, which do not clear on read: a baseline
//! and a wrap-aware difference ([`HwStats`]), read high–low–high against tearing. Live RSS updates write only the changed
//! lookup-table registers ([`cadence_core::nic::Port::set_rss_table`]).
//!
//! Verification status: model-verified only, against the XL710 model in
//! `tests/src/xl710_model/`, written from the datasheet's facts independently of this
//! driver; X722 (which differs in RSS and write-back) is not supported. The model has
//! readiness knobs (never ready, a global reset that never ends, a stuck PF reset), a
//! firmware answering the commands above (cookie echo, error injection, a firmware that
//! never answers, API version), link events on the ARQ with overflow, the HMC segment and
//! contexts read from host memory at enable, RSS (HENA packet types, 52-byte key,
//! 128/512-entry HLUT, the VSI's queue map), RX write-back DD last and held back unless the
//! queue is in the interrupt list, TX with DTYPE 0xF write-back and malicious-driver
//! detection, 48-bit counters. It records a violation for an admin command before Get
//! Version, with a bad length or flags or an out-of-memory buffer; a queue enabled before
//! its context, QTX_CTL or the pre-disable clear; a malformed context; a tail before
//! QENA_STAT or not a multiple of 8; direct RX control writes with API ≥ 1.5; DMA outside
//! allocated memory. `tests/tests/i40e_model.rs`: bring-up, two PFs forwarding through the
//! real worker loop, RSS spread predicted by `cadence_core::rss` and a live HLUT change
//! mid-stream with conservation and per-flow order, admin errors and timeouts, readiness
//! failures, link down/up events and ARQ overflow, errored/chained/short frames, 48-bit
//! wrap, queues moved out with their wake address, and the model catching injected
//! breaches.

pub mod aq;
pub mod cmd;
pub mod desc;
pub mod hmc;
mod init;
mod port;
pub mod regs;
mod stats;

use core::fmt;

use cadence_core::rss::DEFAULT_KEY;

use crate::hal::{BarError, DmaError};
use aq::AqError;
use hmc::HmcError;

pub use port::I40e;
pub use stats::HwStats;

/// Intel's PCI vendor ID.
pub const VENDOR_ID: u16 = 0x8086;

/// Whether PCI device `device` is an XL710/X710/XXV710 this driver knows.
pub const fn is_supported_device(device: u16) -> bool {
    // SFP+ XL710/X710, KX B/C, QSFP A/B/C, 10GBASE-T, 20G KR2 (A), 10GBASE-T4, 25G B,
    // 25G SFP28, 10G B/SFP, 10GBASE-T BC, QEMU's emulated id.
    matches!(
        device,
        0x1572
            | 0x1580
            | 0x1581
            | 0x1583
            | 0x1584
            | 0x1585
            | 0x1586
            | 0x1587
            | 0x1588
            | 0x1589
            | 0x158A
            | 0x158B
            | 0x104E
            | 0x104F
            | 0x15FF
            | 0x1574
    )
}

/// Queue pairs the driver configures at most (the RSS lookup table's entries are 6 bits
/// wide; the VSI's queue map holds a power of two up to 64).
pub const MAX_QUEUES: u16 = 64;
/// Entries in the RSS lookup table (PFQF_CTL_0.HASHLUTSIZE = 512).
pub const LUT_ENTRIES: usize = 512;

/// Whether `size` descriptors make a valid XL710 ring: a multiple of 32 from 32 to
/// 8160 (the context's QLEN; DPDK's limits).
pub const fn valid_ring_size(size: u16) -> bool {
    size >= 32 && size <= 8160 && size.is_multiple_of(32)
}

/// Bring-up knobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct Config {
    /// Queue pairs, 1..=[`MAX_QUEUES`] and at most what the PF owns. Default 1.
    pub queues: u16,
    /// Descriptors per ring (see [`valid_ring_size`]). Default 512.
    pub ring: u16,
    /// The first 40 bytes of the 52-byte RSS key (the rest is 0: an IPv4 or IPv6
    /// 5-tuple never reaches it). Default `cadence_core::rss::DEFAULT_KEY`.
    pub rss_key: [u8; 40],
    /// Unicast and multicast promiscuous on the VSI (a forwarder needs it). Default on.
    pub promiscuous: bool,
    /// Fill the receive rings from the bring-up's pool. Default on; off when each
    /// queue gets buffers from its own pool later (`IntelRx::fill`).
    pub fill_rx: bool,
    /// How long the bring-up waits for the link, in ms; 0 = not at all. Default 5000.
    pub link_timeout_ms: u32,
    /// The longest frame received, FCS aside: the queue context's RXMAX. Above
    /// `intel::MAX_RX_FRAME` (up to [`MAX_FRAME`]; the MAC's own limit,
    /// PRTGL_SAH.MFS, is 9 728 bytes out of reset): buffers of [`JUMBO_DBUFF`] bytes, frames
    /// over several descriptors. Default `intel::MAX_RX_FRAME`; at most [`MAX_FRAME`].
    pub max_frame: usize,
}

/// Receive buffer bytes with jumbo frames: what follows the frame offset in a pool buffer, in
/// the context's 128-byte units (1 920).
pub const JUMBO_DBUFF: usize = (cadence_core::buf::BUF_SIZE - crate::intel::RX_FRAME_OFFSET) / 128 * 128;

/// The longest frame the XL710 receives, CRC aside: Intel's i40e documentation gives 9 728 bytes
/// with it (the largest jumbo frame). Within what the ring takes (`intel::MAX_JUMBO_FRAME`).
pub const MAX_FRAME: usize = 9728 - 4;
const _: () = assert!(MAX_FRAME <= crate::intel::MAX_JUMBO_FRAME);

impl Default for Config {
    fn default() -> Self {
        Self {
            queues: 1,
            ring: 512,
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

    /// This configuration with `n` queue pairs.
    pub fn with_queues(mut self, n: u16) -> Self {
        self.queues = n;
        self
    }

    /// This configuration with rings of `n` descriptors.
    pub fn with_ring(mut self, n: u16) -> Self {
        self.ring = n;
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
}

/// Why bring-up failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InitError {
    /// The function is not a supported XL710-family device.
    NotI40e {
        /// Its vendor ID.
        vendor: u16,
        /// Its device ID.
        device: u16,
    },
    /// Queue count or ring size out of range.
    BadConfig,
    /// `Config::max_frame` is longer than the XL710 receives ([`MAX_FRAME`]).
    MaxFrame(usize),
    /// BAR 0 could not be mapped.
    MapBar(BarError),
    /// A global reset did not finish (GLGEN_RSTAT.DEVSTATE stayed non-zero).
    GlobalReset,
    /// The firmware never reported its configuration loaded (GLNVM_ULD).
    FirmwareNotReady,
    /// PFGEN_CTRL.PFSWR did not clear.
    ResetTimeout,
    /// PFLAN_QALLOC gives the PF no valid queue range.
    NoQueues,
    /// More queue pairs asked for than the PF owns.
    TooManyQueues {
        /// Asked for.
        asked: u16,
        /// The PF's queues.
        have: u16,
    },
    /// No DMA memory (admin rings, descriptor rings).
    Memory(DmaError),
    /// An admin command failed.
    Aq(AqError),
    /// The firmware speaks an admin API this driver does not (major version ≠ 1).
    UnsupportedApi {
        /// Its major version.
        major: u16,
        /// Its minor version.
        minor: u16,
    },
    /// The HMC could not be set up, or reported an error.
    Hmc(HmcError),
    /// QRX_ENA(n).QENA_STAT did not follow the request.
    RxEnableTimeout(u16),
    /// QTX_ENA(n).QENA_STAT did not follow the request.
    TxEnableTimeout(u16),
    /// The link did not come up within the configured time.
    LinkDown {
        /// How long the driver waited, in ms.
        waited_ms: u32,
    },
}

impl From<AqError> for InitError {
    fn from(e: AqError) -> Self {
        InitError::Aq(e)
    }
}

impl From<HmcError> for InitError {
    fn from(e: HmcError) -> Self {
        InitError::Hmc(e)
    }
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::NotI40e { vendor, device } => write!(f, "{vendor:04x}:{device:04x} is not an XL710/X710"),
            InitError::BadConfig => f.write_str("queue count or ring size out of range"),
            InitError::MaxFrame(n) => write!(f, "max_frame {n}: the XL710 receives frames up to {MAX_FRAME} bytes"),
            InitError::MapBar(e) => write!(f, "BAR 0: {e}"),
            InitError::GlobalReset => f.write_str("device never ready: a global reset did not finish (GLGEN_RSTAT)"),
            InitError::FirmwareNotReady => f.write_str("device never ready: firmware did not load (GLNVM_ULD)"),
            InitError::ResetTimeout => f.write_str("PF reset did not finish (PFGEN_CTRL.PFSWR)"),
            InitError::NoQueues => f.write_str("the PF owns no LAN queues (PFLAN_QALLOC)"),
            InitError::TooManyQueues { asked, have } => write!(f, "{asked} queue pairs asked, the PF owns {have}"),
            InitError::Memory(e) => write!(f, "DMA memory: {e}"),
            InitError::Aq(e) => write!(f, "{e}"),
            InitError::UnsupportedApi { major, minor } => write!(f, "firmware admin API {major}.{minor} unsupported"),
            InitError::Hmc(e) => write!(f, "HMC: {e}"),
            InitError::RxEnableTimeout(q) => write!(f, "QRX_ENA({q}).QENA_STAT did not follow"),
            InitError::TxEnableTimeout(q) => write!(f, "QTX_ENA({q}).QENA_STAT did not follow"),
            InitError::LinkDown { waited_ms } => write!(f, "link did not come up within {waited_ms} ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reg::Place;

    #[test]
    fn registers_sit_at_the_datasheet_offsets() {
        use regs::*;
        assert_eq!(QTX_ENA.at(3).map(Place::offset), Some(0x10000C));
        assert_eq!(QRX_TAIL.at(1535).map(Place::offset), Some(0x128000 + 4 * 1535));
        assert!(QRX_TAIL.at(1536).is_none());
        assert_eq!(PFQF_HLUT.at(127).map(Place::offset), Some(0x240000 + 0x80 * 127));
        assert_eq!(PFQF_HKEY.at(12).map(Place::offset), Some(0x244800 + 0x80 * 12));
        assert_eq!(GLPRT_GOTC.at(2).map(Place::offset), Some(0x300690));
        assert_eq!(PFINT_ITR0.at(2).map(Place::offset), Some(0x038100));
        assert_eq!(QINT_RQCTL::NEXTQ_INDX.mask(), 0x7FF << 16);
    }

    #[test]
    fn ring_sizes_and_devices() {
        assert!(valid_ring_size(32) && valid_ring_size(512) && valid_ring_size(8160));
        assert!(!valid_ring_size(16) && !valid_ring_size(100) && !valid_ring_size(8192));
        assert!(is_supported_device(0x1572) && is_supported_device(0x1583));
        assert!(!is_supported_device(0x37D0), "X722 differs");
    }
}
