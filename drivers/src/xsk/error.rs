//! Why an AF_XDP queue could not be built.

use core::fmt;

/// One of the four rings of an AF_XDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Ring {
    /// The UMEM fill ring.
    Fill,
    /// The RX ring.
    Rx,
    /// The TX ring.
    Tx,
    /// The UMEM completion ring.
    Completion,
}

impl fmt::Display for Ring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ring::Fill => "fill ring",
            Ring::Rx => "RX ring",
            Ring::Tx => "TX ring",
            Ring::Completion => "completion ring",
        })
    }
}

/// Why [`super::XskRx::try_new`] / [`super::XskTx::try_new`] refused its rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum XskError {
    /// The ring size is 0, not a power of two, or over 2^31 (free-running `u32` indices
    /// need at least one bit of slack).
    BadSize {
        /// The ring.
        ring: Ring,
        /// The size given.
        size: u32,
    },
    /// `producer`, `consumer` or `flags` is not 4-byte aligned, or `desc` not 8-byte aligned.
    Misaligned {
        /// The ring.
        ring: Ring,
    },
    /// The window ends before a word or the last entry.
    WindowTooSmall {
        /// The ring.
        ring: Ring,
        /// Bytes the offsets and size need.
        need: usize,
        /// Bytes in the window.
        have: usize,
    },
    /// Two of the words, or a word and the entry array, overlap.
    Overlap {
        /// The ring.
        ring: Ring,
    },
    /// The ring already holds entries (producer ≠ consumer): it is not a freshly bound
    /// socket's, and its entries would name buffers this driver never gave out.
    NotEmpty {
        /// The ring.
        ring: Ring,
    },
    /// [`super::XskConfig::umem_base`] is not a multiple of `BUF_SIZE`, so UMEM chunks
    /// would not line up with pool buffers.
    UmemMisaligned,
    /// The pool starts below [`super::XskConfig::umem_base`]: its first buffers would have
    /// no UMEM address.
    PoolBelowUmem,
}

impl fmt::Display for XskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XskError::BadSize { ring, size } => write!(f, "AF_XDP {ring}: size {size} is not a power of two <= 2^31"),
            XskError::Misaligned { ring } => write!(f, "AF_XDP {ring}: misaligned offset"),
            XskError::WindowTooSmall { ring, need, have } => {
                write!(f, "AF_XDP {ring}: window of {have} bytes, {need} needed")
            }
            XskError::Overlap { ring } => write!(f, "AF_XDP {ring}: offsets overlap"),
            XskError::NotEmpty { ring } => write!(f, "AF_XDP {ring}: not empty at start"),
            XskError::UmemMisaligned => f.write_str("AF_XDP UMEM base not a multiple of the buffer size"),
            XskError::PoolBelowUmem => f.write_str("AF_XDP pool starts below the UMEM base"),
        }
    }
}
