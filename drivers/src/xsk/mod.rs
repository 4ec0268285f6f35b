//! Linux AF_XDP sockets (XSK): the four shared rings, as `cadence_core::nic` queues.
//!
//! Sources: `include/uapi/linux/if_xdp.h` (ring offsets, `struct xdp_desc`, flags),
//! `Documentation/networking/af_xdp.rst` (the rings, UMEM, `XDP_USE_NEED_WAKEUP`), the
//! barrier comments of `net/xdp/xsk_queue.h`, and libxdp's `xsk.h` ring helpers, whose
//! cached-index scheme this follows (the code is this crate's own).
//!
//! The hosted platform creates the socket, registers the lane's packet [`Pool`] memory as
//! the UMEM, sizes and mmaps the rings, binds, and hands this module one [`Mmio`] window
//! per ring with the offsets `getsockopt(XDP_MMAP_OFFSETS)` reported, plus a [`Kick`]
//! doorbell (`sendto` / `recvfrom` on the socket). Everything after that is here:
//!
//! | ring | producer | entries | queue |
//! |---|---|---|---|
//! | fill | user | `u64` UMEM address of an empty chunk | [`XskRx`] |
//! | RX | kernel | [`struct xdp_desc`](XdpDesc) of a received frame | [`XskRx`] |
//! | TX | user | `struct xdp_desc` of a frame to send | [`XskTx`] |
//! | completion | kernel | `u64` UMEM address of a sent frame | [`XskTx`] |
//!
//! Each ring is single-producer/single-consumer with free-running `u32` indices (entry =
//! index & (size − 1), size a power of two) and a `flags` word where the kernel sets
//! [`XDP_RING_NEED_WAKEUP`]. `ring.rs` holds the two halves of the index protocol.
//!
//! **UMEM = the pool.** The platform registers the pool's memory with `chunk_size =
//! BUF_SIZE` (2048) in aligned mode, so chunk `i` of the UMEM is buffer `i` of the pool.
//! A UMEM address `a` is the physical address `a + umem_base` of the pool
//! ([`XskConfig::umem_base`]; `0` when the pool was built with `phys_base = 0` over the
//! registered area, the natural choice), and [`Pool::handle_at`] turns it back into the
//! buffer that holds it. The kernel writes a received frame at chunk +
//! `XDP_PACKET_HEADROOM` (256) + the UMEM headroom and reports the address of its first
//! byte, so the frame's offset in its buffer is `addr % 2048`.
//!
//! **Ownership.** Each queue keeps a bit per pool buffer saying which buffers the kernel
//! holds on its behalf (posted to the fill ring, or put on the TX ring). An address the
//! kernel hands back is believed only if its bit is set; anything else (outside the pool,
//! a free buffer, a buffer of someone else, a second completion of one frame) is counted
//! and left alone, so a confused kernel can cost frames but never a buffer or a double
//! free. `drain` returns what the kernel still holds once the socket is closed.
//!
//! **Index protocol** (as libxdp): cached other-side index, `Acquire` after reading the
//! kernel's index, `Release` before publishing ours, `SeqCst` before reading
//! `XDP_RING_NEED_WAKEUP`. The fill ring is kept at one ring's worth of buffers held by the
//! kernel; RX frames are handed out where the kernel wrote them (usually offset 256).
//! `kick_rx` when the fill ring asks for a wake-up after new entries or on an empty RX ring;
//! `kick_tx` when the TX ring asks for one (or `always_kick_tx`, copy mode) and entries
//! wait. Like every driver, `deny(unsafe_code)`: shared words are read and written through
//! [`Mmio`], ordered by explicit fences.
//!
//! **Tests** (`tests.rs`, `proptests.rs`, as for [`crate::tpacket`]) run against a fake
//! kernel (`model.rs`) over shared `Vec<u8>` windows that panic on any access outside a
//! ring: byte-exact round trips, 70 000 frames across the `u32` index wrap, pool
//! conservation after `drain`, bad descriptors and completions, NEED_WAKEUP kicks, kick
//! failures, a full TX ring, and proptests writing arbitrary descriptors and indices.
//! Nothing has run against a real kernel in this crate; that is the hosted platform's test
//! (`platform/tests/hosted_netns.rs`).
//!
//! ```text
//! let (mut rx, mut tx) = xsk::try_new_queues(rings, kick, &pool, &XskConfig::default())?;
//! rx.fill(&mut pool);                       // post fill-ring entries
//! rx.rx_burst(&mut pool, &mut batch);       // cadence_core::nic::RxQueue
//! tx.tx_burst(&mut pool, &mut batch);       // cadence_core::nic::TxQueue
//! // shutdown: close the socket first, then
//! rx.drain(&mut pool); tx.drain(&mut pool);
//! ```
//!
//! [`Pool`]: cadence_core::buf::Pool
//! [`Pool::handle_at`]: cadence_core::buf::Pool::handle_at
//! [`Mmio`]: crate::hal::Mmio
//! [`Kick`]: crate::hal::Kick

mod error;
mod owned;
mod ring;
mod rx;
mod tx;

// Test and fuzz scaffolding: a broken expectation is the point of a test.
#[cfg(any(test, fuzzing))]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub(crate) mod model;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tx_tests;

use core::mem::{offset_of, size_of};

use cadence_core::buf::{MAX_FRAME, Pool};
use cadence_core::time::ClockMap;

pub use error::{Ring, XskError};
pub use rx::{XskRx, XskRxCounters};
pub use tx::{XskTx, XskTxCounters};

use crate::hal::{Kick, Mmio};

/// `XDP_RING_NEED_WAKEUP` (`if_xdp.h`): in a ring's `flags`, the kernel asks for a system
/// call before it looks at the ring again (`XDP_USE_NEED_WAKEUP` bind flag).
pub const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;
/// `XDP_PKT_CONTD` (`if_xdp.h`): in an RX or TX descriptor's `options`, the frame continues
/// in the next descriptor (multi-buffer, only on a socket bound with `XDP_USE_SG`:
/// [`XskConfig::multi_buffer`]).
pub const XDP_PKT_CONTD: u32 = 1 << 0;
/// `XDP_PACKET_HEADROOM` (`include/linux/bpf.h`): bytes the kernel leaves in front of a
/// received frame in its chunk, before the UMEM's own headroom.
pub const XDP_PACKET_HEADROOM: usize = 256;

/// The arrival stamp the hosted build's XDP program writes in the metadata area in front of
/// each frame it redirects (`bpf_xdp_adjust_meta(ctx, -16)`, then, once the verifier's
/// `data_meta + 16 <= data` holds, two native-endian `u64`s): at `frame − 16` the
/// `bpf_ktime_get_ns()` reading (`CLOCK_MONOTONIC`, ns), at `frame − 8`
/// [`ARRIVAL_MAGIC`]. The kernel copies the metadata along with the frame into the UMEM
/// chunk in copy mode (`xsk_copy_xdp` in `net/xdp/xsk.c`: `to_buf = to->data − metalen`)
/// and leaves it in place in zero-copy mode; the RX descriptor points at the frame, not at
/// the metadata. Where the driver under the program has no metadata support,
/// `adjust_meta` fails and the frame goes unstamped: the magic is then absent (the bytes
/// in front of the frame are whatever the chunk held), which is how the RX path tells the
/// two apart; it clears the magic of every stamp it reads, so a chunk's stale stamp is
/// never read twice.
pub mod arrival {
    /// Bytes of metadata in front of the frame.
    pub const META_LEN: usize = 16;
    /// Offset of the `CLOCK_MONOTONIC` stamp (`u64`), from the start of the metadata.
    pub const STAMP: usize = 0;
    /// Offset of the magic word (`u64`), from the start of the metadata.
    pub const MAGIC: usize = 8;
    /// The magic word: the bytes `"CADENCE1"` as a little-endian `u64` (arbitrary bytes in
    /// front of an unstamped frame match it with probability 2⁻⁶⁴).
    pub const ARRIVAL_MAGIC: u64 = u64::from_le_bytes(*b"CADENCE1");
}
pub use arrival::ARRIVAL_MAGIC;

/// `struct xdp_desc` (`if_xdp.h`), an RX or TX ring entry. Declared for its layout: the
/// driver reads and writes the fields through [`Mmio`] at its offsets, never through a
/// reference into the ring.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpDesc {
    /// UMEM address of the frame's first byte.
    pub addr: u64,
    /// Frame length in bytes.
    pub len: u32,
    /// `XDP_PKT_CONTD`, TX metadata flags; 0 here.
    pub options: u32,
}

/// Offsets and size of [`XdpDesc`].
pub(crate) mod desc {
    use super::{XdpDesc, offset_of, size_of};
    pub(crate) const ADDR: usize = offset_of!(XdpDesc, addr);
    pub(crate) const LEN: usize = offset_of!(XdpDesc, len);
    pub(crate) const OPTIONS: usize = offset_of!(XdpDesc, options);
    pub(crate) const SIZE: usize = size_of::<XdpDesc>();
    const _: () = assert!(ADDR == 0 && LEN == 8 && OPTIONS == 12 && SIZE == 16);
}

/// Bytes of a fill or completion ring entry (a `u64` UMEM address).
pub(crate) const ADDR_ENTRY: usize = size_of::<u64>();

/// Where a ring's words lie in its window: `struct xdp_ring_offset` (`if_xdp.h`) as
/// `getsockopt(SOL_XDP, XDP_MMAP_OFFSETS)` reports it for that ring, in bytes from the
/// start of the ring's mmap. (Kernels before 5.4 report no `flags`; point it at a word
/// that stays 0, as libxdp does with `consumer + 4`, and NEED_WAKEUP is never seen.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingOffsets {
    /// The producer index (`u32`).
    pub producer: usize,
    /// The consumer index (`u32`).
    pub consumer: usize,
    /// The flags word (`u32`, [`XDP_RING_NEED_WAKEUP`]).
    pub flags: usize,
    /// The entry array.
    pub desc: usize,
}

/// One mmap'ed ring: its window, where its words are, and its number of entries (the
/// value given to `setsockopt(XDP_{RX,TX}_RING / XDP_UMEM_{FILL,COMPLETION}_RING)`).
#[derive(Debug)]
pub struct RingWindow<W> {
    /// The ring's mmap (`XDP_PGOFF_RX_RING`, `XDP_PGOFF_TX_RING`,
    /// `XDP_UMEM_PGOFF_FILL_RING`, `XDP_UMEM_PGOFF_COMPLETION_RING`).
    pub window: W,
    /// The ring's offsets.
    pub offsets: RingOffsets,
    /// Entries; a power of two.
    pub size: u32,
}

/// The four rings of one socket.
#[derive(Debug)]
pub struct XskRings<W> {
    /// Fill ring (UMEM).
    pub fill: RingWindow<W>,
    /// RX ring.
    pub rx: RingWindow<W>,
    /// TX ring.
    pub tx: RingWindow<W>,
    /// Completion ring (UMEM).
    pub completion: RingWindow<W>,
}

/// Runtime knobs of an AF_XDP queue pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct XskConfig {
    /// The pool physical address at UMEM address 0: UMEM address = pool physical address
    /// − `umem_base`. A multiple of `BUF_SIZE`, at most the pool's `phys_base`. Default 0
    /// (the pool built with `phys_base = 0` over exactly the registered UMEM).
    pub umem_base: u64,
    /// Kick the kernel after every TX burst that leaves entries on the TX ring, whether
    /// or not it set NEED_WAKEUP. Copy mode (veth, generic XDP) sends only inside
    /// `sendto`, a bounded number of frames per call, and needs this when the socket is
    /// bound without `XDP_USE_NEED_WAKEUP`. Default off.
    pub always_kick_tx: bool,
    /// Kick the kernel (`kick_rx`) after every RX burst that found the RX ring empty,
    /// whether or not it set NEED_WAKEUP on the fill ring. A socket in preferred busy-poll
    /// mode needs this: its NAPI poll runs only inside such calls. Default off.
    pub always_kick_rx: bool,
    /// Longest frame `tx_burst` puts on the TX ring; longer ones are refused and counted
    /// (the kernel would reject them, and in copy mode a rejected descriptor blocks the
    /// ring). Set it to the interface's MTU + 14 (+ 4 for a VLAN tag). Default
    /// [`MAX_FRAME`].
    pub max_tx_frame: usize,
    /// Read each frame's arrival stamp ([`arrival`]) and convert it to worker ticks with
    /// this map (`CLOCK_MONOTONIC` ns → the worker clock); the queue then stamps its frames
    /// ([`cadence_core::nic::RxQueue::stamps_arrival`]). `None` (default): no stamps read,
    /// the worker counts from the poll.
    pub arrival: Option<ClockMap>,
    /// The socket is bound with `XDP_USE_SG`: a frame may span several descriptors, each but
    /// the last with [`XDP_PKT_CONTD`]. Received, they are chained into one frame (up to
    /// `buf::MAX_SEGMENTS` buffers; a longer one is dropped, counted in `fragments`); a
    /// frame over several buffers is sent the same way. Off (default): such descriptors are
    /// dropped, and such frames refused.
    pub multi_buffer: bool,
}

impl Default for XskConfig {
    fn default() -> Self {
        Self {
            umem_base: 0,
            always_kick_tx: false,
            always_kick_rx: false,
            max_tx_frame: MAX_FRAME,
            arrival: None,
            multi_buffer: false,
        }
    }
}

impl XskConfig {
    /// With [`XskConfig::umem_base`] set.
    pub fn with_umem_base(mut self, umem_base: u64) -> Self {
        self.umem_base = umem_base;
        self
    }
    /// With [`XskConfig::arrival`] set.
    pub fn with_arrival(mut self, map: Option<ClockMap>) -> Self {
        self.arrival = map;
        self
    }
    /// With [`XskConfig::always_kick_tx`] set.
    pub fn with_always_kick_tx(mut self, on: bool) -> Self {
        self.always_kick_tx = on;
        self
    }
    /// With [`XskConfig::always_kick_rx`] set.
    pub fn with_always_kick_rx(mut self, on: bool) -> Self {
        self.always_kick_rx = on;
        self
    }
    /// With [`XskConfig::max_tx_frame`] set.
    pub fn with_max_tx_frame(mut self, len: usize) -> Self {
        self.max_tx_frame = len;
        self
    }
    /// With [`XskConfig::multi_buffer`] set.
    pub fn with_multi_buffer(mut self, on: bool) -> Self {
        self.multi_buffer = on;
        self
    }
}

/// Checks `config` against `pool` (UMEM base alignment and position).
fn check_umem(pool: &Pool<'_>, config: &XskConfig) -> Result<(), XskError> {
    if !config.umem_base.is_multiple_of(cadence_core::buf::BUF_SIZE as u64) {
        return Err(XskError::UmemMisaligned);
    }
    if pool.phys_base() < config.umem_base {
        return Err(XskError::PoolBelowUmem);
    }
    Ok(())
}

/// Both queues of one socket.
pub type XskQueues<W, K> = (XskRx<W, K>, XskTx<W, K>);

/// Builds both queues of one socket from its four rings. `kick` is cloned into each
/// (the platform's doorbell is a socket descriptor, cheap to copy). Validates every ring
/// (see [`XskRx::try_new`], [`XskTx::try_new`]); nothing is posted yet (call
/// [`XskRx::fill`]).
pub fn try_new_queues<W: Mmio, K: Kick + Clone>(
    rings: XskRings<W>,
    kick: K,
    pool: &Pool<'_>,
    config: &XskConfig,
) -> Result<XskQueues<W, K>, XskError> {
    let XskRings { fill, rx, tx, completion } = rings;
    let rxq = XskRx::try_new(fill, rx, kick.clone(), pool, config)?;
    let txq = XskTx::try_new(tx, completion, kick, pool, config)?;
    Ok((rxq, txq))
}
