//! The `AF_PACKET` ring ABI, `include/uapi/linux/if_packet.h`, for `TPACKET_V3`.
//! Sizes and offsets are asserted against the C header's (`gcc` on Linux 6.1 headers).
//!
//! RX ring (what a driver walks through the RX window): `block_nr` blocks of
//! `block_size` bytes; a block starts with [`TpacketBlockDesc`] whose
//! `hdr.block_status & TP_STATUS_USER` says the kernel handed it over; its `num_pkts`
//! frames start at `offset_to_first_pkt`, each a [`Tpacket3Hdr`] (frame bytes at
//! `tp_mac`, `tp_snaplen` of them; the next at `tp_next_offset`). The driver gives the
//! block back by writing `TP_STATUS_KERNEL` to `block_status`.
//!
//! TX ring (frame-based even in V3): `frame_nr` slots of `frame_size` bytes, each a
//! [`Tpacket3Hdr`] whose `tp_status` is `TP_STATUS_AVAILABLE` when free; the driver
//! writes the frame at [`TX_DATA_OFFSET`], sets `tp_len`, then `tp_status =
//! TP_STATUS_SEND_REQUEST`, and kicks. The kernel sets it back to `TP_STATUS_AVAILABLE`
//! once sent (`TP_STATUS_WRONG_FORMAT` if it refused the frame).

use crate::hosted::sys::Plain;
use core::mem::offset_of;

/// `SOL_PACKET`.
pub const SOL_PACKET: i32 = 263;
/// `PACKET_RX_RING`.
pub const PACKET_RX_RING: i32 = 5;
/// `PACKET_STATISTICS`.
pub const PACKET_STATISTICS: i32 = 6;
/// `PACKET_VERSION`.
pub const PACKET_VERSION: i32 = 10;
/// `PACKET_TX_RING`.
pub const PACKET_TX_RING: i32 = 13;
/// `PACKET_FANOUT`.
pub const PACKET_FANOUT: i32 = 18;
/// `PACKET_QDISC_BYPASS`.
pub const PACKET_QDISC_BYPASS: i32 = 20;
/// `PACKET_LOSS`: a TX slot the kernel refuses is marked `TP_STATUS_WRONG_FORMAT` and
/// skipped, instead of stopping the ring at it.
pub const PACKET_LOSS: i32 = 14;
/// `PACKET_IGNORE_OUTGOING` (Linux ≥ 4.20).
pub const PACKET_IGNORE_OUTGOING: i32 = 23;
/// `TPACKET_V3`.
pub const TPACKET_V3: i32 = 2;
/// `PACKET_FANOUT_HASH`: by flow hash, so a flow stays on one socket.
pub const PACKET_FANOUT_HASH: u32 = 0;
/// `PACKET_FANOUT_FLAG_UNIQUEID`: the kernel picks an unused group id (Linux ≥ 4.20).
pub const PACKET_FANOUT_FLAG_UNIQUEID: u32 = 0x2000;
/// `ETH_P_ALL`.
pub const ETH_P_ALL: u16 = 0x0003;

/// Status: owned by the kernel (RX block) / free (TX frame: `TP_STATUS_AVAILABLE`).
pub const TP_STATUS_KERNEL: u32 = 0;
/// RX status: handed to user space.
pub const TP_STATUS_USER: u32 = 1 << 0;
/// TX status: free slot.
pub const TP_STATUS_AVAILABLE: u32 = 0;
/// TX status: filled by user space, to be sent.
pub const TP_STATUS_SEND_REQUEST: u32 = 1 << 0;
/// TX status: being sent.
pub const TP_STATUS_SENDING: u32 = 1 << 1;
/// TX status: refused (bad length).
pub const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;
/// `TPACKET_ALIGNMENT`.
pub const TPACKET_ALIGNMENT: usize = 16;
/// `TPACKET3_HDRLEN`: `TPACKET_ALIGN(sizeof(struct tpacket3_hdr)) + sizeof(struct
/// sockaddr_ll)`.
pub const TPACKET3_HDRLEN: usize = 68;
/// Where a TX frame's bytes go in its slot (without `PACKET_TX_HAS_OFF`):
/// `TPACKET3_HDRLEN - sizeof(struct sockaddr_ll)`.
pub const TX_DATA_OFFSET: usize = TPACKET3_HDRLEN - 20;

/// `struct tpacket_req3`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TpacketReq3 {
    /// Bytes per block (a multiple of the page size).
    pub tp_block_size: u32,
    /// Blocks.
    pub tp_block_nr: u32,
    /// Bytes per frame (a multiple of 16).
    pub tp_frame_size: u32,
    /// Frames: `block_nr × (block_size / frame_size)`.
    pub tp_frame_nr: u32,
    /// RX: ms after which a partly filled block is handed over (TX: 0).
    pub tp_retire_blk_tov: u32,
    /// Private bytes per block (0).
    pub tp_sizeof_priv: u32,
    /// Feature requests (0).
    pub tp_feature_req_word: u32,
}

const _: () = assert!(size_of::<TpacketReq3>() == 28);
const _: () = assert!(offset_of!(TpacketReq3, tp_retire_blk_tov) == 16);
const _: () = assert!(offset_of!(TpacketReq3, tp_feature_req_word) == 24);

/// `struct tpacket_stats_v3`. Reading it resets the kernel's counters.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TpacketStatsV3 {
    /// Frames seen (delivered + dropped).
    pub tp_packets: u32,
    /// Frames dropped (ring full).
    pub tp_drops: u32,
    /// Times the ring froze (every block owned by user space).
    pub tp_freeze_q_cnt: u32,
}

const _: () = assert!(size_of::<TpacketStatsV3>() == 12);

/// `struct tpacket_hdr_v1`: the block header after the block descriptor's version words.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TpacketHdrV1 {
    /// `TP_STATUS_KERNEL` / `TP_STATUS_USER` (+ flags).
    pub block_status: u32,
    /// Frames in the block.
    pub num_pkts: u32,
    /// Offset of the first frame from the block start.
    pub offset_to_first_pkt: u32,
    /// Bytes used in the block.
    pub blk_len: u32,
    /// Block sequence number.
    pub seq_num: u64,
    /// Timestamp of the first frame (sec, nsec).
    pub ts_first_pkt: [u32; 2],
    /// Timestamp of the last frame.
    pub ts_last_pkt: [u32; 2],
}

const _: () = assert!(size_of::<TpacketHdrV1>() == 40);
const _: () = assert!(offset_of!(TpacketHdrV1, num_pkts) == 4);
const _: () = assert!(offset_of!(TpacketHdrV1, offset_to_first_pkt) == 8);
const _: () = assert!(offset_of!(TpacketHdrV1, blk_len) == 12);
const _: () = assert!(offset_of!(TpacketHdrV1, seq_num) == 16);
const _: () = assert!(offset_of!(TpacketHdrV1, ts_first_pkt) == 24);
const _: () = assert!(offset_of!(TpacketHdrV1, ts_last_pkt) == 32);

/// `struct tpacket_block_desc`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TpacketBlockDesc {
    /// Version.
    pub version: u32,
    /// Offset to private data.
    pub offset_to_priv: u32,
    /// The V1 block header.
    pub hdr: TpacketHdrV1,
}

const _: () = assert!(size_of::<TpacketBlockDesc>() == 48);
const _: () = assert!(offset_of!(TpacketBlockDesc, hdr) == 8);

/// Byte offset of `block_status` in a block.
pub const BLOCK_STATUS: usize = offset_of!(TpacketBlockDesc, hdr) + offset_of!(TpacketHdrV1, block_status);
/// Byte offset of `num_pkts` in a block.
pub const BLOCK_NUM_PKTS: usize = offset_of!(TpacketBlockDesc, hdr) + offset_of!(TpacketHdrV1, num_pkts);
/// Byte offset of `offset_to_first_pkt` in a block.
pub const BLOCK_FIRST_PKT: usize = offset_of!(TpacketBlockDesc, hdr) + offset_of!(TpacketHdrV1, offset_to_first_pkt);

/// `struct tpacket3_hdr`: one frame's header (RX in a block; TX at a slot's start).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tpacket3Hdr {
    /// RX: offset of the next frame from this header (0 for the last).
    pub tp_next_offset: u32,
    /// Seconds of the timestamp.
    pub tp_sec: u32,
    /// Nanoseconds of the timestamp.
    pub tp_nsec: u32,
    /// Bytes captured.
    pub tp_snaplen: u32,
    /// Bytes on the wire (TX: bytes to send).
    pub tp_len: u32,
    /// Status (TX: `TP_STATUS_*`).
    pub tp_status: u32,
    /// Offset of the frame's first byte from this header.
    pub tp_mac: u16,
    /// Offset of the network header from this header.
    pub tp_net: u16,
    /// `hv1.tp_rxhash`.
    pub tp_rxhash: u32,
    /// `hv1.tp_vlan_tci`.
    pub tp_vlan_tci: u32,
    /// `hv1.tp_vlan_tpid`.
    pub tp_vlan_tpid: u16,
    /// `hv1.tp_padding`.
    pub hv1_padding: u16,
    /// `tp_padding[8]`.
    pub tp_padding: [u8; 8],
}

const _: () = assert!(size_of::<Tpacket3Hdr>() == 48);
const _: () = assert!(offset_of!(Tpacket3Hdr, tp_snaplen) == 12);
const _: () = assert!(offset_of!(Tpacket3Hdr, tp_len) == 16);
const _: () = assert!(offset_of!(Tpacket3Hdr, tp_status) == 20);
const _: () = assert!(offset_of!(Tpacket3Hdr, tp_mac) == 24);
const _: () = assert!(offset_of!(Tpacket3Hdr, tp_rxhash) == 28);
const _: () = assert!(TPACKET3_HDRLEN == size_of::<Tpacket3Hdr>().next_multiple_of(TPACKET_ALIGNMENT) + 20);

// SAFETY: repr(C) structs of unsigned integers, no padding (sizes asserted to the sum
// of the fields); every bit pattern is a value.
unsafe impl Plain for TpacketReq3 {}
// SAFETY: as above.
unsafe impl Plain for TpacketStatsV3 {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_match_the_c_header() {
        assert_eq!((BLOCK_STATUS, BLOCK_NUM_PKTS, BLOCK_FIRST_PKT), (8, 12, 16));
        assert_eq!(TX_DATA_OFFSET, 48);
        assert_eq!(size_of::<libc::sockaddr_ll>(), 20);
        assert_eq!(libc::ETH_P_ALL as u16, ETH_P_ALL);
    }
}
