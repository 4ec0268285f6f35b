//! Linux `AF_PACKET` sockets with `TPACKET_V3` rings, as `cadence_core::nic` queues.
//!
//! Sources: `include/uapi/linux/if_packet.h` (the structures and status bits below),
//! `Documentation/networking/packet_mmap.rst` (ring setup, `TPACKET_V3` blocks, the TX
//! ring), and `net/packet/af_packet.c` for what the kernel checks on TX.
//!
//! The hosted platform creates the socket, sets `PACKET_VERSION = TPACKET_V3`,
//! `PACKET_RX_RING` / `PACKET_TX_RING` with a `struct tpacket_req3`, mmaps them (the RX
//! ring first, the TX ring right after it in the same mapping), binds, and hands this
//! module one [`Mmio`] window per ring plus the geometry it asked for. It should also set
//! `PACKET_LOSS` (see [`TpacketTx`]) and `PACKET_QDISC_BYPASS` if it wants the fast path.
//!
//! Unlike AF_XDP, these rings are not the pool: the RX side copies every frame into a
//! pool buffer, the TX side copies every frame out of one.
//!
//! - [`TpacketRx`]: `tp_block_nr` blocks of `tp_block_size` bytes, filled by the kernel
//!   one after the other; a block is the user's while its `block_status` has
//!   `TP_STATUS_USER`, and holds `num_pkts` packets chained by `tp_next_offset`.
//! - [`TpacketTx`]: `tp_frame_nr` slots of `tp_frame_size` bytes (laid out block by
//!   block); the user fills a slot and sets `TP_STATUS_SEND_REQUEST`, the kernel sends on
//!   `send()` ([`Kick::kick_tx`]) and sets the slot back to `TP_STATUS_AVAILABLE`.
//!
//! Every offset the kernel writes (first packet, next packet, MAC header) is checked
//! against the block before it is followed, so no byte pattern in the ring can make the
//! driver read outside it.
//!
//! RX walks the blocks in ring order, copies each packet into a pool buffer at `HEADROOM`
//! (re-inserting a VLAN tag the kernel stripped, TPID from `tp_vlan_tpid` or 802.1Q), and
//! returns a block (`TP_STATUS_KERNEL` after a `Release` fence) as soon as its last packet
//! is read, keeping its place when a batch fills mid-block. TX copies frames into slots
//! (data at 48, `tp_len`, `tp_next_offset = 0`, `Release`, `TP_STATUS_SEND_REQUEST`), frees
//! the buffer at once, kicks once per burst, and reclaims slots in order
//! (`TP_STATUS_WRONG_FORMAT` counted, slot made available).
//!
//! Tests (`tests.rs`, `proptests.rs`) run against a fake kernel (`model.rs`) over shared
//! `Vec<u8>` windows that panic on any access outside a ring: round trips, mid-block
//! resumption, VLAN re-insertion, truncation, `WRONG_FORMAT`, a full TX ring, kick
//! failures, and proptests writing arbitrary block and packet headers. Nothing has run
//! against a real kernel in this crate; that is the hosted platform's test.
//!
//! [`Mmio`]: crate::hal::Mmio
//! [`Kick::kick_tx`]: crate::hal::Kick::kick_tx

mod error;
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

use core::mem::{offset_of, size_of};

pub use error::TpacketError;
pub use rx::{RxGeometry, TpacketRx, TpacketRxCounters};
pub use tx::{TpacketTx, TpacketTxCounters, TxGeometry};

/// `TPACKET_ALIGNMENT` (`if_packet.h`): slots and headers are aligned to this.
pub const TPACKET_ALIGNMENT: usize = 16;
/// Ethernet header bytes: the shortest frame either direction handles, and where an
/// 802.1Q tag goes back in (after the two MAC addresses, 12 bytes).
pub(crate) const ETH_HLEN: usize = 14;
const ETH_ALEN2: usize = 12;
/// 802.1Q tag bytes.
const VLAN_HLEN: usize = 4;

/// `TPACKET_ALIGN(x)`.
const fn tpacket_align(x: usize) -> usize {
    (x + TPACKET_ALIGNMENT - 1) & !(TPACKET_ALIGNMENT - 1)
}

/// `tp_status` / `block_status` bits (`if_packet.h`).
pub mod status {
    /// RX: the block (or frame) belongs to the kernel.
    pub const TP_STATUS_KERNEL: u32 = 0;
    /// RX: the block belongs to the user.
    pub const TP_STATUS_USER: u32 = 1 << 0;
    /// RX: the frame was truncated to fit the ring (`tp_snaplen < tp_len`).
    pub const TP_STATUS_COPY: u32 = 1 << 1;
    /// RX: the kernel dropped frames since the last block (ring full).
    pub const TP_STATUS_LOSING: u32 = 1 << 2;
    /// RX: the L4 checksum is not filled in yet (a locally generated or veth-forwarded
    /// frame with checksum offload).
    pub const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
    /// RX: `tp_vlan_tci` holds a tag the kernel took off the frame.
    pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
    /// RX: `tp_vlan_tpid` holds that tag's TPID.
    pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
    /// TX: the slot is free for the user.
    pub const TP_STATUS_AVAILABLE: u32 = 0;
    /// TX: the user asks the kernel to send the slot.
    pub const TP_STATUS_SEND_REQUEST: u32 = 1 << 0;
    /// TX: the kernel is sending the slot.
    pub const TP_STATUS_SENDING: u32 = 1 << 1;
    /// TX: the kernel refused the slot's frame.
    pub const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;
}

/// `ETH_P_8021Q`: the TPID used when the kernel reports none.
pub const ETH_P_8021Q: u16 = 0x8100;

/// `struct tpacket_bd_ts`.
#[repr(C)]
#[allow(dead_code)] // Layout declarations: never built, only measured.
struct TpacketBdTs {
    ts_sec: u32,
    ts_usec_or_nsec: u32,
}

/// `struct tpacket_hdr_v1` (the `seq_num` is `__aligned_u64`).
#[repr(C, align(8))]
#[allow(dead_code)]
struct TpacketHdrV1 {
    block_status: u32,
    num_pkts: u32,
    offset_to_first_pkt: u32,
    blk_len: u32,
    seq_num: u64,
    ts_first_pkt: TpacketBdTs,
    ts_last_pkt: TpacketBdTs,
}

/// `struct tpacket_block_desc`: the header at the start of every RX block.
#[repr(C)]
#[allow(dead_code)]
struct TpacketBlockDesc {
    version: u32,
    offset_to_priv: u32,
    hdr: TpacketHdrV1,
}

/// `struct tpacket_hdr_variant1`.
#[repr(C)]
#[allow(dead_code)]
struct TpacketHdrVariant1 {
    tp_rxhash: u32,
    tp_vlan_tci: u32,
    tp_vlan_tpid: u16,
    tp_padding: u16,
}

/// `struct tpacket3_hdr`: the header in front of every packet (RX) and slot (TX).
#[repr(C)]
#[allow(dead_code)]
struct Tpacket3Hdr {
    tp_next_offset: u32,
    tp_sec: u32,
    tp_nsec: u32,
    tp_snaplen: u32,
    tp_len: u32,
    tp_status: u32,
    tp_mac: u16,
    tp_net: u16,
    hv1: TpacketHdrVariant1,
    tp_padding: [u8; 8],
}

/// Byte offsets in a block (`struct tpacket_block_desc`).
pub(crate) mod block {
    use super::{TpacketBlockDesc, TpacketHdrV1, offset_of, size_of};
    const H: usize = offset_of!(TpacketBlockDesc, hdr);
    /// `hdr.bh1.block_status`.
    pub(crate) const STATUS: usize = H + offset_of!(TpacketHdrV1, block_status);
    /// `hdr.bh1.num_pkts`.
    pub(crate) const NUM_PKTS: usize = H + offset_of!(TpacketHdrV1, num_pkts);
    /// `hdr.bh1.offset_to_first_pkt`.
    pub(crate) const FIRST: usize = H + offset_of!(TpacketHdrV1, offset_to_first_pkt);
    /// `hdr.bh1.blk_len`.
    pub(crate) const BLK_LEN: usize = H + offset_of!(TpacketHdrV1, blk_len);
    /// `hdr.bh1.seq_num`.
    pub(crate) const SEQ: usize = H + offset_of!(TpacketHdrV1, seq_num);
    /// `BLK_HDR_LEN` in `af_packet.c`: `ALIGN(sizeof(struct tpacket_block_desc), 8)`.
    pub(crate) const HDR_LEN: usize = size_of::<TpacketBlockDesc>().next_multiple_of(8);
    const _: () = assert!(H == 8 && STATUS == 8 && NUM_PKTS == 12 && FIRST == 16 && BLK_LEN == 20);
    const _: () = assert!(SEQ == 24 && HDR_LEN == 48);
}

/// Byte offsets in a packet / slot header (`struct tpacket3_hdr`).
pub(crate) mod pkt {
    use super::{Tpacket3Hdr, TpacketHdrVariant1, offset_of, size_of, tpacket_align};
    const V: usize = offset_of!(Tpacket3Hdr, hv1);
    pub(crate) const NEXT_OFFSET: usize = offset_of!(Tpacket3Hdr, tp_next_offset);
    pub(crate) const SEC: usize = offset_of!(Tpacket3Hdr, tp_sec);
    pub(crate) const NSEC: usize = offset_of!(Tpacket3Hdr, tp_nsec);
    pub(crate) const SNAPLEN: usize = offset_of!(Tpacket3Hdr, tp_snaplen);
    pub(crate) const LEN: usize = offset_of!(Tpacket3Hdr, tp_len);
    pub(crate) const STATUS: usize = offset_of!(Tpacket3Hdr, tp_status);
    pub(crate) const MAC: usize = offset_of!(Tpacket3Hdr, tp_mac);
    pub(crate) const NET: usize = offset_of!(Tpacket3Hdr, tp_net);
    pub(crate) const VLAN_TCI: usize = V + offset_of!(TpacketHdrVariant1, tp_vlan_tci);
    pub(crate) const VLAN_TPID: usize = V + offset_of!(TpacketHdrVariant1, tp_vlan_tpid);
    /// `sizeof(struct tpacket3_hdr)`.
    pub(crate) const SIZE: usize = size_of::<Tpacket3Hdr>();
    /// Where a TX frame's data starts in its slot without `PACKET_TX_HAS_OFF`:
    /// `tp_hdrlen - sizeof(struct sockaddr_ll)` = `TPACKET_ALIGN(sizeof(struct
    /// tpacket3_hdr))` (`af_packet.c`, `tpacket_parse_header`).
    pub(crate) const TX_DATA: usize = tpacket_align(SIZE);
    const _: () = assert!(NEXT_OFFSET == 0 && SEC == 4 && NSEC == 8 && SNAPLEN == 12 && LEN == 16 && STATUS == 20);
    const _: () = assert!(MAC == 24 && NET == 26 && VLAN_TCI == 32 && VLAN_TPID == 36);
    const _: () = assert!(SIZE == 48 && TX_DATA == 48);
}
