//! Header parsing: Ethernet, up to two VLAN tags, IPv4/IPv6 (with IPv6 extension
//! headers), TCP, UDP, ICMP and ICMPv6.
//!
//! [`parse`] validates a frame once and returns a small `Copy` summary, [`Parsed`]:
//! the offsets of each layer, the protocols, and the [`FlowKey`] 5-tuple. It never
//! panics, for any bytes (a property test feeds it arbitrary input), and every
//! offset in an `Ok` result lies within the frame. Each rejection is a
//! [`ParseError`], which maps 1:1 onto [`DropReason`].
//!
//! What is checked, in order (each check quotes the rule it implements):
//! - Ethernet: 14 bytes; 802.1Q (0x8100) and 802.1ad (0x88A8) tags, at most two, each
//!   4 bytes (`Runt` otherwise); then IPv4 (0x0800) or IPv6 (0x86DD), anything else
//!   is `UnsupportedEthertype` (including a third tag).
//! - IPv4 (RFC 791 §3.1, RFC 1122 §3.2.1): 20 bytes, version 4, IHL ≥ 5, the whole
//!   header present, `IHL*4 <= total length <= bytes present` (trailing Ethernet
//!   padding beyond the total length is allowed), the header checksum verifies.
//! - IPv6 (RFC 8200 §3–4): 40 bytes, version 6, `payload length <= bytes present`;
//!   Hop-by-Hop (0), Routing (43), Fragment (44) and Destination Options (60)
//!   extension headers are skipped, at most [`MAX_EXT_HEADERS`] of them, each within
//!   the payload length (`TruncatedL3` otherwise; too many is `BadIpHeaderLen`, as the
//!   IP header chain then has no acceptable length).
//! - Fragments (RFC 791, RFC 8200 §4.5): only a first fragment carries the L4 header;
//!   a later fragment is forwarded without L4 parsing. Every fragment's flow key has
//!   zero ports, so all fragments of one datagram hash alike.
//! - TCP (RFC 9293 §3.1): 20 bytes, data offset ≥ 5 and within the segment.
//! - UDP (RFC 768): 8 bytes, `8 <= length <= IP payload` (the upper bound is skipped
//!   for a first fragment, whose length field covers the whole datagram).
//! - ICMP: 8 bytes (RFC 792: every message has type, code, checksum and 4 more
//!   bytes); ICMPv6: 4 bytes (RFC 4443 §2.1: type, code, checksum).
//! - Other protocols (and ICMP/ICMPv6 over the other IP version) are forwarded without
//!   L4 parsing.
//!
//! Checksums other than the IPv4 header's are not verified: a forwarder does not
//! own them.
//!
//! How far down that list a frame is checked is a [`Depth`] ([`check_to`], [`parse_to`]): a
//! chain checks as deep as its NFs read or its configuration asks (`nf::Chain::set_validate`);
//! [`parse`] and [`check`] go all the way.

mod fast;
pub use fast::{ipv4_dst, ipv4_flow, ipv6_flow};
pub(crate) mod headers;
#[cfg(test)]
mod tests;

pub use headers::{EthernetFrame, IcmpHeader, Ipv4Header, Ipv6Header, TcpHeader, UdpHeader};

use crate::drops::DropReason;
use core::fmt;
use headers::{be16, byte};

/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;
/// TPID of an IEEE 802.1Q (C-)tag.
pub const TPID_8021Q: u16 = 0x8100;
/// TPID of an IEEE 802.1ad (S-)tag.
pub const TPID_8021AD: u16 = 0x88A8;
/// IP protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// IP protocol number of TCP.
pub const PROTO_TCP: u8 = 6;
/// IP protocol number of UDP.
pub const PROTO_UDP: u8 = 17;
/// IP protocol number of ICMPv6.
pub const PROTO_ICMPV6: u8 = 58;
/// Most IPv6 extension headers skipped before giving up.
pub const MAX_EXT_HEADERS: usize = 8;
/// Most VLAN tags accepted in front of the EtherType.
pub const MAX_VLAN_TAGS: usize = 2;

const EXT_HOP_BY_HOP: u8 = 0;
const EXT_ROUTING: u8 = 43;
const EXT_FRAGMENT: u8 = 44;
const EXT_DEST_OPTS: u8 = 60;

/// Why a frame did not parse. Each variant is the [`DropReason`] of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ParseError {
    /// Shorter than an Ethernet header, or a VLAN tag is cut short.
    Runt,
    /// Neither IPv4 nor IPv6 after at most two VLAN tags.
    UnsupportedEthertype,
    /// The IP header (or an IPv6 extension header) does not fit.
    TruncatedL3,
    /// The IP version field disagrees with the EtherType.
    BadIpVersion,
    /// IPv4 IHL below 5, or more than [`MAX_EXT_HEADERS`] IPv6 extension headers.
    BadIpHeaderLen,
    /// The IP total/payload length is below the header or beyond the frame.
    BadIpTotalLen,
    /// The IPv4 header checksum does not verify.
    BadIpChecksum,
    /// The TCP/UDP/ICMP header does not fit in the IP payload.
    TruncatedL4,
    /// TCP data offset below 5 or beyond the segment; UDP length below 8 or beyond
    /// the IP payload.
    BadL4Len,
}

impl From<ParseError> for DropReason {
    fn from(e: ParseError) -> Self {
        match e {
            ParseError::Runt => DropReason::Runt,
            ParseError::UnsupportedEthertype => DropReason::UnsupportedEthertype,
            ParseError::TruncatedL3 => DropReason::TruncatedL3,
            ParseError::BadIpVersion => DropReason::BadIpVersion,
            ParseError::BadIpHeaderLen => DropReason::BadIpHeaderLen,
            ParseError::BadIpTotalLen => DropReason::BadIpTotalLen,
            ParseError::BadIpChecksum => DropReason::BadIpChecksum,
            ParseError::TruncatedL4 => DropReason::TruncatedL4,
            ParseError::BadL4Len => DropReason::BadL4Len,
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(DropReason::from(*self).as_str())
    }
}

/// An IPv4 or IPv6 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum IpAddr {
    /// IPv4.
    V4([u8; 4]),
    /// IPv6.
    V6([u8; 16]),
}

impl IpAddr {
    /// The address bytes, in network order.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            IpAddr::V4(a) => a,
            IpAddr::V6(a) => a,
        }
    }

    /// The address as an IPv6 number, IPv4 as IPv4-mapped IPv6 (`::ffff:a.b.c.d`): the form
    /// the ACL's rules and classifiers compare.
    #[inline]
    pub fn to_v6_bits(&self) -> u128 {
        match self {
            IpAddr::V4(b) => 0xFFFF << 32 | u128::from(u32::from_be_bytes(*b)),
            IpAddr::V6(b) => u128::from_be_bytes(*b),
        }
    }
}

/// The 5-tuple of a packet. Ports are 0 for protocols without ports and for
/// fragments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// TCP/UDP source port.
    pub src_port: u16,
    /// TCP/UDP destination port.
    pub dst_port: u16,
    /// Upper-layer protocol (after IPv6 extension headers).
    pub proto: u8,
}

/// Words of [`FlowKey::words`].
pub const FLOW_WORDS: usize = 5;

/// Bit of the last key word that marks IPv6.
const V6_BIT: u64 = 1 << 40;

impl FlowKey {
    /// An IPv4 key from host-order addresses.
    pub const fn v4(src: u32, dst: u32, src_port: u16, dst_port: u16, proto: u8) -> FlowKey {
        FlowKey { src: IpAddr::V4(src.to_be_bytes()), dst: IpAddr::V4(dst.to_be_bytes()), src_port, dst_port, proto }
    }

    /// Whether the key carries ports (TCP or UDP, not fragmented).
    pub fn has_ports(&self) -> bool {
        matches!(self.proto, PROTO_TCP | PROTO_UDP) && (self.src_port | self.dst_port) != 0
    }

    /// The 5-tuple as table key words: the one encoding of a flow in `core`, used by every
    /// table keyed by flow (the ACL's verdict cache, LB affinity, accounting, encryption's UDP
    /// counters, the URL filter's streams) and by NetBlaze's placement hash. Source (2 words),
    /// destination (2 words), then protocol | source port << 8 | destination port << 24 |
    /// IPv6 << 40. An IPv4 address sits in the low 32 bits of its pair; the IPv6 bit keeps
    /// the two families apart.
    #[inline]
    pub fn words(&self) -> [u64; FLOW_WORDS] {
        let (s, d) = (ip_bits(&self.src), ip_bits(&self.dst));
        let v6 = if matches!(self.src, IpAddr::V6(_)) { V6_BIT } else { 0 };
        [
            (s >> 64) as u64,
            s as u64,
            (d >> 64) as u64,
            d as u64,
            u64::from(self.proto) | u64::from(self.src_port) << 8 | u64::from(self.dst_port) << 24 | v6,
        ]
    }

    /// The key whose [`FlowKey::words`] are `w`.
    pub fn from_words(w: &[u64; FLOW_WORDS]) -> FlowKey {
        let [sh, sl, dh, dl, m] = *w;
        let (s, d) = ((u128::from(sh) << 64) | u128::from(sl), (u128::from(dh) << 64) | u128::from(dl));
        let ip = |a: u128| {
            if m & V6_BIT != 0 { IpAddr::V6(a.to_be_bytes()) } else { IpAddr::V4((a as u32).to_be_bytes()) }
        };
        FlowKey { src: ip(s), dst: ip(d), src_port: (m >> 8) as u16, dst_port: (m >> 24) as u16, proto: m as u8 }
    }

    /// The other direction of the same conversation: addresses and ports swapped.
    pub fn reversed(&self) -> FlowKey {
        FlowKey { src: self.dst, dst: self.src, src_port: self.dst_port, dst_port: self.src_port, proto: self.proto }
    }
}

fn ip_bits(a: &IpAddr) -> u128 {
    match a {
        IpAddr::V4(b) => u128::from(u32::from_be_bytes(*b)),
        IpAddr::V6(b) => u128::from_be_bytes(*b),
    }
}

/// One VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct VlanTag {
    /// Tag protocol identifier (0x8100 or 0x88A8).
    pub tpid: u16,
    /// Tag control information: PCP (3 bits), DEI (1), VLAN ID (12).
    pub tci: u16,
}

impl VlanTag {
    /// The 12-bit VLAN identifier.
    pub fn vid(&self) -> u16 {
        self.tci & 0x0FFF
    }
}

/// The link layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct L2 {
    /// VLAN tags, outermost first; only the first `vlan_count` are meaningful, and the slots
    /// after them are zero (every parse builds it so).
    pub vlans: [VlanTag; MAX_VLAN_TAGS],
    /// Number of VLAN tags.
    pub vlan_count: u8,
    /// The EtherType after the tags.
    pub ethertype: u16,
    /// Bytes of Ethernet header and tags: the offset of the L3 header.
    pub len: u16,
}

impl L2 {
    /// The VLAN tags present, outermost first.
    pub fn vlans(&self) -> &[VlanTag] {
        self.vlans.get(..usize::from(self.vlan_count)).unwrap_or(&[])
    }
}

/// The network layer protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum L3Kind {
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
}

/// The transport header that was parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum L4Kind {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// ICMP (over IPv4).
    Icmp,
    /// ICMPv6 (over IPv6).
    Icmpv6,
    /// Not parsed: another protocol, or a non-first fragment.
    Unparsed,
}

/// Where a packet stands in fragmentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Fragment {
    /// A whole datagram (including IPv6 atomic fragments).
    Whole,
    /// The first fragment: offset 0, more to come; it carries the L4 header.
    First,
    /// A later fragment: no L4 header.
    Later,
}

/// What [`parse`] learned about a frame. All offsets are from the start of the
/// frame and lie within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Parsed {
    /// The link layer.
    pub l2: L2,
    /// IPv4 or IPv6.
    pub l3: L3Kind,
    /// Offset of the IP header (equals `l2.len`).
    pub l3_offset: u16,
    /// Bytes of IP packet by its length field (header, extension headers, payload);
    /// bytes beyond `l3_offset + l3_len` are link padding.
    pub l3_len: u16,
    /// Offset of the upper-layer header (after IPv4 options or IPv6 extension
    /// headers), even when it was not parsed.
    pub l4_offset: u16,
    /// Upper-layer protocol number.
    pub ip_proto: u8,
    /// Fragmentation state.
    pub fragment: Fragment,
    /// Which transport header was parsed.
    pub l4: L4Kind,
    /// The 5-tuple.
    pub flow: FlowKey,
    /// Offset of the data after the transport header (`l4_offset` when unparsed).
    pub payload_offset: u16,
    /// Bytes of that data (by the UDP length for UDP, by the IP length otherwise).
    pub payload_len: u16,
}

impl Parsed {
    /// Bytes of link header (Ethernet and VLAN tags).
    pub fn l2_len(&self) -> usize {
        usize::from(self.l2.len)
    }
}

/// Parses the Ethernet header and VLAN tags of `frame`.
pub fn parse_l2(frame: &[u8]) -> Result<L2, ParseError> {
    let eth = EthernetFrame::try_new(frame)?;
    let mut l2 = L2 { vlans: [VlanTag::default(); MAX_VLAN_TAGS], vlan_count: 0, ethertype: eth.ethertype(), len: 14 };
    let mut off = 14usize;
    for slot in l2.vlans.iter_mut() {
        if !matches!(l2.ethertype, TPID_8021Q | TPID_8021AD) {
            break;
        }
        if frame.len() < off + 4 {
            return Err(ParseError::Runt);
        }
        *slot = VlanTag { tpid: l2.ethertype, tci: be16(frame, off) };
        l2.ethertype = be16(frame, off + 2);
        l2.vlan_count += 1;
        off += 4;
    }
    l2.len = off as u16;
    Ok(l2)
}

/// How deep a frame is checked and parsed: what a chain reads ([`crate::nf::Nf::reads`]) or,
/// if more, what its configuration asks to be validated. Each depth makes every check of the
/// ones above it and its own, in the order the module doc lists them, so a frame refused at
/// one depth is refused for the same reason at every deeper one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Depth {
    /// Ethernet and its VLAN tags, and an IPv4 or IPv6 EtherType (an L2 forwarder's view:
    /// the IP header is not looked at).
    L2,
    /// And the IP header: version, header and total lengths, the IPv4 checksum, IPv6
    /// extension headers, fragmentation. The transport header is not parsed (its kind is
    /// [`L4Kind::Unparsed`], the flow key's ports are 0).
    L3,
    /// And the transport header: every check (what [`parse`] and [`check`] do).
    #[default]
    L4,
}

impl Depth {
    /// Its name in chain files (`l2`, `l3`, `l4`).
    pub fn name(self) -> &'static str {
        match self {
            Depth::L2 => "l2",
            Depth::L3 => "l3",
            Depth::L4 => "l4",
        }
    }

    /// The depth named `s` ([`Depth::name`]).
    pub fn from_name(s: &str) -> Option<Depth> {
        [Depth::L2, Depth::L3, Depth::L4].into_iter().find(|d| d.name() == s)
    }
}

/// Parses `frame` down to the transport header. Never panics.
pub fn parse(frame: &[u8]) -> Result<Parsed, ParseError> {
    parse_inline::<true>(frame)
}

/// Whether `frame` parses, and if not why: exactly [`parse`]'s checks, without building its
/// result (the compiler drops what only the result needed). For a stage that forwards a
/// frame untouched once it is known to be well formed (the L2 forwarder).
pub fn check(frame: &[u8]) -> Result<(), ParseError> {
    parse_inline::<true>(frame).map(|_| ())
}

/// [`parse`] to `depth`: at [`Depth::L4`] exactly [`parse`]; at [`Depth::L3`] (and at
/// [`Depth::L2`], which has no result without the IP header) down to the IP header only.
#[inline]
pub fn parse_to(frame: &[u8], depth: Depth) -> Result<Parsed, ParseError> {
    match depth {
        Depth::L4 => parse_inline::<true>(frame),
        Depth::L2 | Depth::L3 => parse_inline::<false>(frame),
    }
}

/// [`parse_to`] of a frame over several buffers (`crate::buf`: a jumbo frame): `first` is its
/// first buffer's bytes, `total` the whole frame's length (at least `first`'s). The same
/// checks, lengths judged against `total`; every header read must lie in `first` (a header
/// that runs past it is refused as truncated, as it would be at the frame's end). For a frame
/// of one buffer (`total == first.len()`) exactly [`parse_to`].
pub fn parse_segmented(first: &[u8], total: usize, depth: Depth) -> Result<Parsed, ParseError> {
    match depth {
        Depth::L4 => parse_general::<true>(first, total),
        Depth::L2 | Depth::L3 => parse_general::<false>(first, total),
    }
}

/// [`check`] to `depth` (see [`Depth`]).
#[inline(always)]
pub fn check_to(frame: &[u8], depth: Depth) -> Result<(), ParseError> {
    match depth {
        Depth::L4 => parse_inline::<true>(frame).map(|_| ()),
        Depth::L3 => parse_inline::<false>(frame).map(|_| ()),
        Depth::L2 => check_l2(frame),
    }
}

/// The checks of [`Depth::L2`]: the link header and an IP EtherType.
#[inline(always)]
fn check_l2(frame: &[u8]) -> Result<(), ParseError> {
    // The untagged frame without a second look; tags (and every refusal) by `parse_l2`.
    let ethertype = match frame.get(12..14) {
        Some(&[a, b]) if !matches!(u16::from_be_bytes([a, b]), TPID_8021Q | TPID_8021AD) => u16::from_be_bytes([a, b]),
        _ => parse_l2(frame)?.ethertype,
    };
    match ethertype {
        ETHERTYPE_IPV4 | ETHERTYPE_IPV6 => Ok(()),
        _ => Err(ParseError::UnsupportedEthertype),
    }
}

/// The one parser behind [`parse`], [`check`] and their `_to` forms: the fast path for the
/// common frame (`fast.rs`: untagged IPv4 without options or fragmentation), the general
/// parser for every other frame and for every refusal. `L4`: parse the transport header.
#[inline(always)]
fn parse_inline<const L4: bool>(frame: &[u8]) -> Result<Parsed, ParseError> {
    match fast::ipv4::<L4>(frame) {
        Some(p) => Ok(p),
        None => parse_general::<L4>(frame, frame.len()),
    }
}

/// Every frame, every check, every reason (the transport header's with `L4`). `frame` holds
/// the headers; `total` is the frame's length (more than `frame`'s for a frame over several
/// buffers, [`parse_segmented`]).
#[inline(never)]
fn parse_general<const L4: bool>(frame: &[u8], total: usize) -> Result<Parsed, ParseError> {
    // Offsets are u16: a frame is at most 16 KiB (`buf::MAX_SEGMENTED_FRAME`). Longer input
    // is parsed as its first 64 KiB - 1, which no IP length field can reach past anyway.
    let frame = frame.get(..usize::from(u16::MAX)).unwrap_or(frame);
    let total = total.clamp(frame.len(), usize::from(u16::MAX));
    let l2 = parse_l2(frame)?;
    let l3_off = usize::from(l2.len);
    let l3 = frame.get(l3_off..).unwrap_or(&[]);
    // The frame's bytes from the IP header on, over every buffer.
    let avail = total.saturating_sub(l3_off);
    let net = match l2.ethertype {
        ETHERTYPE_IPV4 => net_v4(l3, avail)?,
        ETHERTYPE_IPV6 => net_v6(l3, avail)?,
        _ => return Err(ParseError::UnsupportedEthertype),
    };
    // The upper-layer bytes: from the L4 offset to the end of the IP packet (`seg`: those in
    // the first buffer, where the transport header must be; `seg_len`: all of them).
    let seg = l3.get(net.l4_rel..net.l3_len.min(l3.len())).unwrap_or(&[]);
    let seg_len = net.l3_len.saturating_sub(net.l4_rel);
    let l4 = if L4 { transport(&net, seg, seg_len)? } else { Transport::unparsed(seg_len) };
    let base = l3_off as u16;
    Ok(Parsed {
        l2,
        l3: net.kind,
        l3_offset: base,
        l3_len: net.l3_len as u16,
        l4_offset: base + net.l4_rel as u16,
        ip_proto: net.proto,
        fragment: net.fragment,
        l4: l4.kind,
        flow: FlowKey { src: net.src, dst: net.dst, src_port: l4.ports.0, dst_port: l4.ports.1, proto: net.proto },
        payload_offset: base + (net.l4_rel + l4.header_len) as u16,
        payload_len: l4.payload_len as u16,
    })
}

/// The network layer, offsets relative to the IP header.
struct Net {
    kind: L3Kind,
    l3_len: usize,
    l4_rel: usize,
    proto: u8,
    fragment: Fragment,
    src: IpAddr,
    dst: IpAddr,
}

/// The IPv4 header at the front of `b` (the first buffer's bytes from it on), in a packet of
/// `avail` bytes to the frame's end.
fn net_v4(b: &[u8], avail: usize) -> Result<Net, ParseError> {
    // A short buffer is TruncatedL3 whatever its first byte says; 20 bytes with the
    // wrong version are BadIpVersion before the IHL is judged.
    if b.len() < Ipv4Header::<&[u8]>::MIN_LEN {
        return Err(ParseError::TruncatedL3);
    }
    if byte(b, 0) >> 4 != 4 {
        return Err(ParseError::BadIpVersion);
    }
    let ip = Ipv4Header::try_new(b)?;
    let hlen = ip.header_len();
    let total = usize::from(ip.total_len());
    // RFC 791: "Total Length is the length of the datagram, measured in octets,
    // including internet header and data."
    if total < hlen || total > avail {
        return Err(ParseError::BadIpTotalLen);
    }
    if !ip.verify_checksum() {
        return Err(ParseError::BadIpChecksum);
    }
    let fragment = match (ip.frag_offset(), ip.more_frags()) {
        (0, false) => Fragment::Whole,
        (0, true) => Fragment::First,
        _ => Fragment::Later,
    };
    Ok(Net {
        kind: L3Kind::Ipv4,
        l3_len: total,
        l4_rel: hlen,
        proto: ip.protocol(),
        fragment,
        src: IpAddr::V4(ip.src()),
        dst: IpAddr::V4(ip.dst()),
    })
}

/// The IPv6 header and its extension headers at the front of `b` (as [`net_v4`]'s).
fn net_v6(b: &[u8], avail: usize) -> Result<Net, ParseError> {
    let ip = Ipv6Header::try_new(b)?;
    if ip.version() != 6 {
        return Err(ParseError::BadIpVersion);
    }
    let end = 40 + usize::from(ip.payload_len());
    if end > avail {
        return Err(ParseError::BadIpTotalLen);
    }
    // Where the headers may be: the packet, within the first buffer.
    let heads = end.min(b.len());
    let mut next = ip.next_header();
    let mut off = 40usize;
    let mut fragment = Fragment::Whole;
    let mut seen = 0usize;
    // RFC 8200 §4: each extension header is identified by the Next Header value of
    // the header before it; skip the four that a forwarder may see.
    while matches!(next, EXT_HOP_BY_HOP | EXT_ROUTING | EXT_FRAGMENT | EXT_DEST_OPTS) {
        if seen == MAX_EXT_HEADERS {
            return Err(ParseError::BadIpHeaderLen);
        }
        seen += 1;
        // Next Header and Hdr Ext Len (the first two bytes of every extension header) must
        // be inside the payload before they are read.
        if off + 2 > heads {
            return Err(ParseError::TruncatedL3);
        }
        let len = if next == EXT_FRAGMENT {
            // RFC 8200 §4.5: Fragment header is 8 bytes; offset in its upper 13 bits
            // of bytes 2..4, M flag in the lowest bit.
            8
        } else {
            // RFC 8200 §4.3: "Hdr Ext Len: Length of the header in 8-octet units, not
            // including the first 8 octets."
            (usize::from(byte(b, off + 1)) + 1) * 8
        };
        if off + len > heads {
            return Err(ParseError::TruncatedL3);
        }
        if next == EXT_FRAGMENT {
            let field = be16(b, off + 2);
            fragment = match (field >> 3, field & 1) {
                (0, 0) => Fragment::Whole,
                (0, _) => Fragment::First,
                _ => Fragment::Later,
            };
        }
        next = byte(b, off);
        off += len;
        if fragment == Fragment::Later {
            break;
        }
    }
    Ok(Net {
        kind: L3Kind::Ipv6,
        l3_len: end,
        l4_rel: off,
        proto: next,
        fragment,
        src: IpAddr::V6(ip.src()),
        dst: IpAddr::V6(ip.dst()),
    })
}

/// The transport layer: header length, payload length, ports.
struct Transport {
    kind: L4Kind,
    header_len: usize,
    payload_len: usize,
    ports: (u16, u16),
}

impl Transport {
    /// No transport header parsed: the whole segment (`seg_len` bytes) is payload, no ports.
    fn unparsed(seg_len: usize) -> Transport {
        Transport { kind: L4Kind::Unparsed, header_len: 0, payload_len: seg_len, ports: (0, 0) }
    }
}

/// The transport header at the front of `seg` (the upper-layer bytes in the first buffer) of
/// an upper-layer segment of `seg_len` bytes.
fn transport(net: &Net, seg: &[u8], seg_len: usize) -> Result<Transport, ParseError> {
    let unparsed = Transport::unparsed(seg_len);
    if net.fragment == Fragment::Later {
        return Ok(unparsed);
    }
    let whole = net.fragment == Fragment::Whole;
    let ports = |p: (u16, u16)| if whole { p } else { (0, 0) };
    Ok(match (net.kind, net.proto) {
        (_, PROTO_TCP) => {
            let tcp = TcpHeader::try_new(seg)?;
            let h = tcp.header_len();
            Transport {
                kind: L4Kind::Tcp,
                header_len: h,
                payload_len: seg_len.saturating_sub(h),
                ports: ports((tcp.src_port(), tcp.dst_port())),
            }
        }
        (_, PROTO_UDP) => {
            let udp = UdpHeader::try_new(seg)?;
            let ulen = usize::from(udp.len());
            // RFC 768: "Length is the length in octets of this user datagram including
            // this header and the data. (This means the minimum value of the length
            // is eight.)" A first fragment holds only part of the datagram.
            if ulen < 8 || (whole && ulen > seg_len) {
                return Err(ParseError::BadL4Len);
            }
            let payload_len = if whole { ulen } else { seg_len }.saturating_sub(8);
            Transport { kind: L4Kind::Udp, header_len: 8, payload_len, ports: ports((udp.src_port(), udp.dst_port())) }
        }
        (L3Kind::Ipv4, PROTO_ICMP) => {
            if seg.len() < 8 {
                return Err(ParseError::TruncatedL4);
            }
            Transport { kind: L4Kind::Icmp, header_len: 8, payload_len: seg_len.saturating_sub(8), ports: (0, 0) }
        }
        (L3Kind::Ipv6, PROTO_ICMPV6) => {
            IcmpHeader::try_new(seg)?;
            Transport { kind: L4Kind::Icmpv6, header_len: 4, payload_len: seg_len.saturating_sub(4), ports: (0, 0) }
        }
        _ => unparsed,
    })
}
