//! The Intel advanced-descriptor ring engine, shared by [`crate::ixgbe`] (82599/X5xx)
//! and [`crate::igb`] (82576, as QEMU emulates it).
//!
//! Both families use the same 16-byte advanced RX and TX descriptors, the same DD/EOP
//! write-back protocol, the same per-queue register skeleton (base, length, head,
//! tail, control with ENABLE at bit 25) and the same RSS registers. What differs is
//! where the queue blocks live: a [`QueueMap`] per device says so.
//!
//! - [`field`]: declared register bit fields and `read`/`write`/`modify` access.
//! - [`desc`]: the descriptor formats.
//! - [`queue`]: per-queue register blocks, programming and enabling.
//! - [`IntelRx`] / [`IntelTx`]: the `cadence_core::nic` queues.
//! - [`rss`]: key, redirection table and its live update.
//!
//! The rules the engine keeps (STYLE habit 5): descriptor writes, then
//! `fence(Release)`, then the tail write; on a write-back, DD is read first, then
//! `fence(Acquire)`, then the rest. Nothing on the RX/TX path panics or allocates.

pub mod desc;
pub mod field;
pub mod queue;
pub mod rss;
pub(crate) mod rx;
mod tx;

pub use queue::QueueMap;
pub use rx::{IntelRx, MAX_RX_FRAME, RX_BUF_KIB, RX_FRAME_OFFSET, valid_ring_size};
pub use tx::{IntelTx, MAX_TX_FRAME};

/// A receive queue and a transmit queue of one port, borrowed together.
pub type QueuePair<'a, W, R> = (&'a mut IntelRx<W, R>, &'a mut IntelTx<W, R>);

/// Every receive and every transmit queue of one port, borrowed together.
pub type Queues<'a, W, R> = (&'a mut [IntelRx<W, R>], &'a mut [IntelTx<W, R>]);

/// Every receive and transmit ring, moved out of the port.
pub type OwnedQueues<W, R> = (alloc::vec::Vec<IntelRx<W, R>>, alloc::vec::Vec<IntelTx<W, R>>);
