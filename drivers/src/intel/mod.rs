//! The Intel ring engine, shared by [`crate::ixgbe`] (82599/X5xx), [`crate::igb`]
//! (82576, as QEMU emulates it) and [`crate::i40e`] (XL710/X710).
//!
//! All three hand frames over through descriptor rings with a DD write-back, a tail
//! register the driver bumps and a head the device advances. What differs is the
//! descriptor layout ([`desc::RxFormat`] / [`desc::TxFormat`]: 16-byte advanced
//! descriptors on the 82599 and 82576, 32-byte receive and 16-byte transmit
//! descriptors on the XL710) and where the queue registers live (a [`QueueMap`] for the
//! 82599 and the 82576, whose per-queue blocks share a skeleton; the XL710 programs its
//! queues through HMC contexts instead). [`IntelRx`] / [`IntelTx`] are generic over the
//! format, so the ring logic exists once.
//!
//! - [`desc`]: the descriptor formats (typed descriptor words, [`crate::reg`]).
//! - [`queue`]: the 82599/82576 per-queue register blocks, programming and enabling.
//! - [`IntelRx`] / [`IntelTx`]: the `cadence_core::nic` queues.
//! - [`rss`]: key, redirection table and its live update.
//!
//! The rules the engine keeps (STYLE habit 5): descriptor writes, then
//! `hal::dma_wmb()`, then the tail write; on a write-back, DD is read first, then
//! `hal::dma_rmb()`, then the rest. Nothing on the RX/TX path panics or allocates.
//!
//! Where the queue blocks live ([`QueueMap`]): ixgbe 0x01000 (RX) / 0x06000 (TX) + 0x40n,
//! igb 0x0C000 / 0x0E000 + 0x40n; ENABLE is bit 25, SRRCTL is advanced one-buffer with
//! DROP_EN. [`IntelRx`]'s wake address (`RxQueue::wake_address`) is the DD word of the next
//! descriptor it will look at, where the device's next write-back lands, so `mwait=on`
//! works on Intel rings. [`IntelTx`] writes each descriptor once, RS only on a burst's
//! last, one tail write per burst after `hal::dma_wmb()`.
//!
//! Benchmarked by `tests`' `intel_forward` bench (criterion, TSC cycles: the ixgbe and i40e
//! RX/TX path through the real `Poller` over two model ports, I/O-only and L2 forwarder,
//! the model's tail-write work and the host's DMA-memory emulation timed alone;
//! docs/PERFORMANCE.md), over `tests/src/model_rig.rs` (a host with its pool and the
//! ixgbe/i40e bring-up over the models).
//!
//! In the image (`firmware/src/image/nics.rs`) the `Nic` enum's queues dispatch by enum:
//! `NicRx::Intel` serves igb and ixgbe, whose rings are the same type, `NicRx::I40e` the
//! XL710's; every NIC's link speed goes on its `@nic` line and into Metronome's line rate.

pub mod desc;
pub mod queue;
pub mod rss;
pub(crate) mod rx;
mod tx;

pub use queue::QueueMap;
pub use rx::{
    IntelRx, JUMBO_BUF_KIB, MAX_JUMBO_FRAME, MAX_RX_FRAME, RX_BUF_KIB, RX_FRAME_OFFSET, rx_buf_kib, valid_ring_size,
};
pub use tx::{IntelTx, MAX_TX_FRAME, MAX_TX_JUMBO};

use desc::{AdvRx, AdvTx};

/// A receive queue and a transmit queue of one port, borrowed together.
pub type QueuePair<'a, W, R, RF = AdvRx, TF = AdvTx> = (&'a mut IntelRx<W, R, RF>, &'a mut IntelTx<W, R, TF>);

/// Every receive and every transmit queue of one port, borrowed together.
pub type Queues<'a, W, R> = (&'a mut [IntelRx<W, R>], &'a mut [IntelTx<W, R>]);

/// Every receive and transmit ring, moved out of the port.
pub type OwnedQueues<W, R, RF = AdvRx, TF = AdvTx> =
    (alloc::vec::Vec<IntelRx<W, R, RF>>, alloc::vec::Vec<IntelTx<W, R, TF>>);
