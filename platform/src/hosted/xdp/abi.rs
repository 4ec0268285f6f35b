//! The AF_XDP user-space ABI, `include/uapi/linux/if_xdp.h` (checked against Linux 6.1's
//! header and today's, which only appended `tx_metadata_len`). Sizes and offsets are
//! asserted at compile time; the values match the C header byte for byte.
//!
//! Ring memory (what a driver reads through the [`super::XskRings`] windows): each ring
//! has a `u32` producer index, a `u32` consumer index, a `u32` flags word and an array of
//! `size` entries (a power of two) at the offsets [`super::XskOffsets`] reports. Fill and
//! completion entries are `u64` UMEM addresses; RX and TX entries are [`XdpDesc`].
//! Indices run freely (wrapping `u32`); entry `i` is at `desc + (i & (size − 1)) × entry`.

use crate::hosted::sys::Plain;
use core::mem::offset_of;

/// `AF_XDP`.
pub const AF_XDP: i32 = 44;
/// `SOL_XDP`.
pub const SOL_XDP: i32 = 283;

/// Socket option: read the ring offsets ([`XdpMmapOffsets`]).
pub const XDP_MMAP_OFFSETS: i32 = 1;
/// Socket option: RX ring size.
pub const XDP_RX_RING: i32 = 2;
/// Socket option: TX ring size.
pub const XDP_TX_RING: i32 = 3;
/// Socket option: register a UMEM ([`XdpUmemReg`]).
pub const XDP_UMEM_REG: i32 = 4;
/// Socket option: fill ring size.
pub const XDP_UMEM_FILL_RING: i32 = 5;
/// Socket option: completion ring size.
pub const XDP_UMEM_COMPLETION_RING: i32 = 6;
/// Socket option: read the statistics ([`XdpStatistics`]).
pub const XDP_STATISTICS: i32 = 7;
/// Socket option: read the options ([`XdpOptions`]).
pub const XDP_OPTIONS: i32 = 8;

/// `sxdp_flags`: share the UMEM of `sxdp_shared_umem_fd`.
pub const XDP_SHARED_UMEM: u16 = 1 << 0;
/// `sxdp_flags`: force copy mode.
pub const XDP_COPY: u16 = 1 << 1;
/// `sxdp_flags`: force zero-copy mode.
pub const XDP_ZEROCOPY: u16 = 1 << 2;
/// `sxdp_flags`: the kernel sets [`XDP_RING_NEED_WAKEUP`] when it wants a kick.
pub const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// `sxdp_flags`: frames over several UMEM chunks (`XDP_PKT_CONTD` in the descriptors'
/// options; Linux ≥ 6.6). A socket sharing the UMEM inherits it.
pub const XDP_USE_SG: u16 = 1 << 4;

/// Ring `flags` word: the kernel needs a wake-up (fill ring: `recvfrom`; TX: `sendto`).
pub const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;
/// [`XdpOptions::flags`]: the socket is bound in zero-copy mode.
pub const XDP_OPTIONS_ZEROCOPY: u32 = 1 << 0;

/// `mmap` offset of the RX ring.
pub const XDP_PGOFF_RX_RING: u64 = 0;
/// `mmap` offset of the TX ring.
pub const XDP_PGOFF_TX_RING: u64 = 0x8000_0000;
/// `mmap` offset of the fill ring.
pub const XDP_UMEM_PGOFF_FILL_RING: u64 = 0x1_0000_0000;
/// `mmap` offset of the completion ring.
pub const XDP_UMEM_PGOFF_COMPLETION_RING: u64 = 0x1_8000_0000;

/// Headroom the kernel keeps in front of a received frame in copy mode and in most
/// zero-copy drivers (`XDP_PACKET_HEADROOM`, `include/uapi/linux/bpf.h`): an RX
/// descriptor's `addr` is the chunk start + UMEM headroom (0) + this.
pub const XDP_PACKET_HEADROOM: usize = 256;

/// `struct sockaddr_xdp`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SockaddrXdp {
    /// `AF_XDP`.
    pub sxdp_family: u16,
    /// `XDP_SHARED_UMEM | XDP_COPY | XDP_ZEROCOPY | XDP_USE_NEED_WAKEUP`.
    pub sxdp_flags: u16,
    /// Interface index.
    pub sxdp_ifindex: u32,
    /// Queue id.
    pub sxdp_queue_id: u32,
    /// With `XDP_SHARED_UMEM`: the socket that registered the UMEM.
    pub sxdp_shared_umem_fd: u32,
}

const _: () = assert!(size_of::<SockaddrXdp>() == 16);
const _: () = assert!(offset_of!(SockaddrXdp, sxdp_flags) == 2);
const _: () = assert!(offset_of!(SockaddrXdp, sxdp_ifindex) == 4);
const _: () = assert!(offset_of!(SockaddrXdp, sxdp_queue_id) == 8);
const _: () = assert!(offset_of!(SockaddrXdp, sxdp_shared_umem_fd) == 12);

/// `struct xdp_ring_offset`: byte offsets inside one ring's mapping.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpRingOffset {
    /// The `u32` producer index.
    pub producer: u64,
    /// The `u32` consumer index.
    pub consumer: u64,
    /// The first entry.
    pub desc: u64,
    /// The `u32` flags word.
    pub flags: u64,
}

const _: () = assert!(size_of::<XdpRingOffset>() == 32);
const _: () = assert!(offset_of!(XdpRingOffset, consumer) == 8);
const _: () = assert!(offset_of!(XdpRingOffset, desc) == 16);
const _: () = assert!(offset_of!(XdpRingOffset, flags) == 24);

/// `struct xdp_mmap_offsets` (the version with `flags`, Linux ≥ 5.4).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpMmapOffsets {
    /// RX ring.
    pub rx: XdpRingOffset,
    /// TX ring.
    pub tx: XdpRingOffset,
    /// Fill ring.
    pub fr: XdpRingOffset,
    /// Completion ring.
    pub cr: XdpRingOffset,
}

const _: () = assert!(size_of::<XdpMmapOffsets>() == 128);
const _: () = assert!(offset_of!(XdpMmapOffsets, tx) == 32);
const _: () = assert!(offset_of!(XdpMmapOffsets, fr) == 64);
const _: () = assert!(offset_of!(XdpMmapOffsets, cr) == 96);

/// `struct xdp_umem_reg`. `tx_metadata_len` (Linux 6.8) is declared so the four bytes
/// that older headers leave as tail padding are zero, not garbage, when a new kernel
/// reads them.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpUmemReg {
    /// Start of the packet area (page aligned).
    pub addr: u64,
    /// Length of the packet area (a multiple of `chunk_size`).
    pub len: u64,
    /// Bytes per chunk (a power of two, 2048..=page size in aligned mode).
    pub chunk_size: u32,
    /// Bytes the kernel leaves free at the start of every chunk.
    pub headroom: u32,
    /// `XDP_UMEM_UNALIGNED_CHUNK_FLAG` and friends.
    pub flags: u32,
    /// TX metadata bytes in front of each TX frame (0: none).
    pub tx_metadata_len: u32,
}

const _: () = assert!(size_of::<XdpUmemReg>() == 32);
const _: () = assert!(offset_of!(XdpUmemReg, chunk_size) == 16);
const _: () = assert!(offset_of!(XdpUmemReg, headroom) == 20);
const _: () = assert!(offset_of!(XdpUmemReg, flags) == 24);
const _: () = assert!(offset_of!(XdpUmemReg, tx_metadata_len) == 28);

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpStatistics {
    /// Dropped for other reasons.
    pub rx_dropped: u64,
    /// Dropped because of an invalid descriptor.
    pub rx_invalid_descs: u64,
    /// TX descriptors the kernel refused.
    pub tx_invalid_descs: u64,
    /// Dropped because the RX ring was full (Linux ≥ 5.9).
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the TX ring was empty when the kernel looked.
    pub tx_ring_empty_descs: u64,
}

const _: () = assert!(size_of::<XdpStatistics>() == 48);
const _: () = assert!(offset_of!(XdpStatistics, rx_ring_full) == 24);
const _: () = assert!(offset_of!(XdpStatistics, tx_ring_empty_descs) == 40);

/// `struct xdp_options`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpOptions {
    /// [`XDP_OPTIONS_ZEROCOPY`].
    pub flags: u32,
}

const _: () = assert!(size_of::<XdpOptions>() == 4);

/// `struct xdp_desc`: one RX or TX ring entry.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpDesc {
    /// UMEM address of the frame's first byte.
    pub addr: u64,
    /// Frame length.
    pub len: u32,
    /// `XDP_PKT_CONTD` (multi-buffer) and TX metadata bits; 0 here.
    pub options: u32,
}

const _: () = assert!(size_of::<XdpDesc>() == 16);
const _: () = assert!(offset_of!(XdpDesc, len) == 8);
const _: () = assert!(offset_of!(XdpDesc, options) == 12);

/// Bytes of a fill or completion ring entry (a `u64` UMEM address).
pub const UMEM_ENTRY: usize = 8;
/// Bytes of an RX or TX ring entry ([`XdpDesc`]).
pub const DESC_ENTRY: usize = size_of::<XdpDesc>();

// SAFETY: this and the four below are repr(C) structs of unsigned integers with no
// padding (each size is asserted to equal the sum of its fields), so any bytes the
// kernel writes are a value.
unsafe impl Plain for SockaddrXdp {}
// SAFETY: see above.
unsafe impl Plain for XdpMmapOffsets {}
// SAFETY: see above.
unsafe impl Plain for XdpUmemReg {}
// SAFETY: see above.
unsafe impl Plain for XdpStatistics {}
// SAFETY: see above.
unsafe impl Plain for XdpOptions {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers of `<linux/if_xdp.h>` as `gcc` prints them (offsetof/sizeof on
    /// Linux 6.1 headers, x86_64).
    #[test]
    fn layouts_match_the_c_header() {
        assert_eq!([size_of::<SockaddrXdp>(), size_of::<XdpRingOffset>(), size_of::<XdpMmapOffsets>()], [16, 32, 128]);
        assert_eq!([size_of::<XdpUmemReg>(), size_of::<XdpStatistics>(), size_of::<XdpDesc>()], [32, 48, 16]);
        assert_eq!(libc::AF_XDP, AF_XDP);
        assert_eq!(libc::SOL_XDP, SOL_XDP);
        assert_eq!(libc::XDP_PGOFF_TX_RING as u64, XDP_PGOFF_TX_RING);
        assert_eq!(libc::XDP_UMEM_PGOFF_FILL_RING, XDP_UMEM_PGOFF_FILL_RING);
        assert_eq!(libc::XDP_UMEM_PGOFF_COMPLETION_RING, XDP_UMEM_PGOFF_COMPLETION_RING);
        assert_eq!(libc::XDP_USE_NEED_WAKEUP, XDP_USE_NEED_WAKEUP);
        assert_eq!(libc::XDP_UMEM_REG, XDP_UMEM_REG);
        assert_eq!(libc::XDP_OPTIONS, XDP_OPTIONS);
    }

    #[test]
    fn sockaddr_bytes() {
        let a = SockaddrXdp {
            sxdp_family: AF_XDP as u16,
            sxdp_flags: XDP_SHARED_UMEM,
            sxdp_ifindex: 7,
            sxdp_queue_id: 1,
            sxdp_shared_umem_fd: 9,
        };
        // SAFETY: a Plain struct viewed as its 16 bytes.
        let b: [u8; 16] = unsafe { core::mem::transmute(a) };
        assert_eq!(b, [44, 0, 1, 0, 7, 0, 0, 0, 1, 0, 0, 0, 9, 0, 0, 0]);
    }
}
