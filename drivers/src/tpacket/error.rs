//! Why a `TPACKET_V3` queue could not be built.

use core::fmt;

/// Why [`super::TpacketRx::try_new`] / [`super::TpacketTx::try_new`] refused a ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum TpacketError {
    /// `block_nr` is 0.
    NoBlocks,
    /// `block_size` is smaller than what one block must hold (RX: the 48-byte block
    /// header; TX: one slot), or larger than the `u32` offsets inside it can address.
    BadBlockSize(usize),
    /// `block_size` is not a multiple of `TPACKET_ALIGNMENT` (16): headers in later
    /// blocks would be misaligned.
    BlockMisaligned(usize),
    /// `frame_size` is not a multiple of `TPACKET_ALIGNMENT`, or too small for the slot
    /// header and an Ethernet header.
    BadFrameSize(usize),
    /// `frame_nr` is not `block_size / frame_size × block_nr`, the number of slots the
    /// kernel cycles through (it refuses any other value too).
    FrameCount {
        /// `frame_nr` given.
        frame_nr: usize,
        /// Slots the blocks hold.
        slots: usize,
    },
    /// The window is smaller than `block_size × block_nr`.
    WindowTooSmall {
        /// Bytes the geometry needs.
        need: usize,
        /// Bytes in the window.
        have: usize,
    },
    /// A TX slot is not `TP_STATUS_AVAILABLE` at start: not a fresh TX ring.
    SlotBusy(usize),
}

impl fmt::Display for TpacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TpacketError::NoBlocks => f.write_str("TPACKET ring: no blocks"),
            TpacketError::BadBlockSize(s) => write!(f, "TPACKET ring: block size {s} out of range"),
            TpacketError::BlockMisaligned(s) => write!(f, "TPACKET ring: block size {s} not a multiple of 16"),
            TpacketError::BadFrameSize(s) => write!(f, "TPACKET TX ring: frame size {s} unusable"),
            TpacketError::FrameCount { frame_nr, slots } => {
                write!(f, "TPACKET TX ring: {frame_nr} frames given, the blocks hold {slots}")
            }
            TpacketError::WindowTooSmall { need, have } => {
                write!(f, "TPACKET ring: window of {have} bytes, {need} needed")
            }
            TpacketError::SlotBusy(i) => write!(f, "TPACKET TX ring: slot {i} busy at start"),
        }
    }
}
