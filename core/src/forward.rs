//! (being written) The forwarding stage: verdicts and drop reasons.

/// Why a frame was dropped. Every drop on the per-packet path is counted under one of
/// these; [`DropReason::as_str`] is the name used in stats lines and JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than an Ethernet header (with its VLAN tags).
    Runt = 0,
    /// Neither IPv4 nor IPv6 after the VLAN tags (ARP, random bytes, …).
    UnsupportedEthertype,
    /// The IP header does not fit in the frame.
    TruncatedL3,
    /// The IP version field disagrees with the EtherType.
    BadIpVersion,
    /// IPv4 IHL below 5 (20 bytes).
    BadIpHeaderLen,
    /// The IP total/payload length is below the header or beyond the frame.
    BadIpTotalLen,
    /// The IPv4 header checksum is wrong.
    BadIpChecksum,
    /// The TCP/UDP/ICMP header does not fit in the IP payload.
    TruncatedL4,
    /// TCP data offset below 5 or beyond the segment; UDP length inconsistent.
    BadL4Len,
    /// The TX ring stayed full: the frame could not be sent.
    TxFull,
}

impl DropReason {
    /// Number of reasons (size of a per-reason counter array).
    pub const COUNT: usize = 10;

    /// Every reason, in counter order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::Runt,
        DropReason::UnsupportedEthertype,
        DropReason::TruncatedL3,
        DropReason::BadIpVersion,
        DropReason::BadIpHeaderLen,
        DropReason::BadIpTotalLen,
        DropReason::BadIpChecksum,
        DropReason::TruncatedL4,
        DropReason::BadL4Len,
        DropReason::TxFull,
    ];

    /// Index into a per-reason counter array.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Stable snake_case name, used in `@stats`/`@summary` lines (`drop_<name>=N`) and JSON.
    pub const fn as_str(self) -> &'static str {
        match self {
            DropReason::Runt => "runt",
            DropReason::UnsupportedEthertype => "unsupported_ethertype",
            DropReason::TruncatedL3 => "truncated_l3",
            DropReason::BadIpVersion => "bad_ip_version",
            DropReason::BadIpHeaderLen => "bad_ip_header_len",
            DropReason::BadIpTotalLen => "bad_ip_total_len",
            DropReason::BadIpChecksum => "bad_ip_checksum",
            DropReason::TruncatedL4 => "truncated_l4",
            DropReason::BadL4Len => "bad_l4_len",
            DropReason::TxFull => "tx_full",
        }
    }
}
