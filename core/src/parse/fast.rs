//! The fast path of [`super::parse`]: an untagged Ethernet frame carrying a whole IPv4
//! datagram with a 20-byte header (no options, not a fragment) — what nearly every frame on a
//! forwarding path is. It reads the fixed 34 bytes of Ethernet and IP header as one array (one
//! length check, then constant offsets the compiler needs no bounds checks for) and the
//! transport header the same way, and builds the [`Parsed`] the general parser would.
//! [`ipv6`] is its IPv6 twin (an untagged frame whose fixed header is followed directly by the
//! transport header: no extension header), for a vector loop that takes IPv6 too (the ACL's).
//!
//! It decides only acceptance: every frame it does not take whole and valid (a tag, IPv6, IP
//! options, a fragment, any check that fails) gets `None`, and the general parser then gives
//! the verdict and, for a bad frame, the reason — so the reasons counted never depend on which
//! path ran. `tests.rs` holds the two to the same result on arbitrary and mutated frames.

use super::{
    ETHERTYPE_IPV4, ETHERTYPE_IPV6, EXT_DEST_OPTS, EXT_FRAGMENT, EXT_HOP_BY_HOP, EXT_ROUTING, FlowKey, Fragment,
    IpAddr, L2, L3Kind, L4Kind, MAX_VLAN_TAGS, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP, Parsed, VlanTag,
};

/// Ethernet (14) and a 20-byte IPv4 header.
const HEAD: usize = 34;

#[inline(always)]
fn be16(b: &[u8; HEAD], i: usize) -> u16 {
    // Constant `i` at every call: the two reads are within the array by construction.
    u16::from_be_bytes([b[i], b[i + 1]])
}

/// Whether the 20-byte IPv4 header at bytes 14..34 sums to `0xFFFF` (RFC 1071 §1), as
/// `checksum::verify` decides it. RFC 1071 §2 (A, B): the one's complement sum does not depend
/// on byte order and may be taken over wider words with end-around carry; so the header is
/// summed as two 64-bit and one 32-bit native-order words. Folding that sum to 16 bits keeps
/// it modulo `0xFFFF` (2^16 ≡ 1) and gives `0xFFFF` exactly when the sum is a nonzero
/// multiple of `0xFFFF`: that is the test, one multiplication for the remainder.
#[inline(always)]
pub(super) fn header_sums_to_ones(h: &[u8; HEAD]) -> bool {
    let (Some(a), Some(b), Some(c)) = (h.get(14..22), h.get(22..30), h.get(30..34)) else { return false };
    let (Ok(a), Ok(b), Ok(c)) = (<[u8; 8]>::try_from(a), <[u8; 8]>::try_from(b), <[u8; 4]>::try_from(c)) else {
        return false;
    };
    let s = u128::from(u64::from_ne_bytes(a)) + u128::from(u64::from_ne_bytes(b)) + u128::from(u32::from_ne_bytes(c));
    // Below 2^66: the high part (at most 3) added back to the low 64 bits (2^64 ≡ 1 modulo
    // 0xFFFF), and the carry of that once more (the sum is then below 3: no second carry).
    let (s, carry) = (s as u64).overflowing_add((s >> 64) as u64);
    let s = s + u64::from(carry);
    s != 0 && divisible_by_ffff(s)
}

/// `x % 0xFFFF == 0` as one multiplication and one compare (Granlund and Montgomery, 1994:
/// for an odd `d`, `x` is a multiple of `d` exactly when `x * d⁻¹ mod 2^64 <= (2^64 - 1) / d`,
/// multiplication by the inverse being a bijection that maps the multiples onto `0..=that`).
#[inline(always)]
pub(super) const fn divisible_by_ffff(x: u64) -> bool {
    x.wrapping_mul(INVERSE_FFFF) <= u64::MAX / 0xFFFF
}

/// The inverse of `0xFFFF` modulo 2^64: Newton's iteration `y ← y (2 − d y)` doubles the
/// correct low bits each step, from 1 bit to 64 in six (a test checks the product is 1).
pub(super) const INVERSE_FFFF: u64 = {
    let d: u64 = 0xFFFF;
    let mut y: u64 = 1;
    let mut i = 0;
    while i < 6 {
        y = y.wrapping_mul(2u64.wrapping_sub(d.wrapping_mul(y)));
        i += 1;
    }
    y
};

/// The destination address of `frame` (host order) if `ipv4` takes it whole and valid at the
/// same depth, `None` exactly when `ipv4` gives `None`: the vector path's parse
/// (`crate::nf::V4Group`), which needs no [`Parsed`].
#[inline(always)]
pub fn ipv4_dst<const L4: bool>(frame: &[u8]) -> Option<u32> {
    match ipv4::<L4>(frame)?.flow.dst {
        IpAddr::V4(a) => Some(u32::from_be_bytes(a)),
        IpAddr::V6(_) => None,
    }
}

/// The flow key of `frame` if `ipv4` takes it whole and valid at the same depth (ports as
/// the general parser gives them: 0 below `L4` and for protocols without ports), `None`
/// exactly when `ipv4` gives `None`: the vector path's parse for an NF that reads the
/// 5-tuple (the ACL).
#[inline(always)]
pub fn ipv4_flow<const L4: bool>(frame: &[u8]) -> Option<FlowKey> {
    Some(ipv4::<L4>(frame)?.flow)
}

/// The flow key of `frame` if `ipv6` takes it whole and valid at the same depth, `None`
/// exactly when `ipv6` gives `None`: the vector path's parse of an IPv6 frame for an NF
/// that reads the 5-tuple (the ACL).
#[inline(always)]
pub fn ipv6_flow<const L4: bool>(frame: &[u8]) -> Option<FlowKey> {
    Some(ipv6::<L4>(frame)?.flow)
}

/// Ethernet (14) and the fixed IPv6 header (40).
const HEAD6: usize = 54;

/// The [`Parsed`] of `frame` if it is an untagged IPv6 packet whose fixed header is followed
/// directly by the transport header (no extension header, so not a fragment) and that passes
/// every check; `None` for anything else, the general parser's to judge (see the module doc).
/// Without `L4` the transport header is neither checked nor parsed.
#[inline(always)]
pub(super) fn ipv6<const L4: bool>(frame: &[u8]) -> Option<Parsed> {
    let h: &[u8; HEAD6] = frame.first_chunk()?;
    if u16::from_be_bytes([h[12], h[13]]) != ETHERTYPE_IPV6 || h[14] >> 4 != 6 {
        return None;
    }
    // RFC 8200 §3: the payload length counts every byte after the fixed header; it lies
    // within the frame (trailing padding allowed). Frames past 64 KiB - 1 are the general
    // parser's.
    let payload = usize::from(u16::from_be_bytes([h[18], h[19]]));
    if payload > frame.len() - HEAD6 || frame.len() > usize::from(u16::MAX) {
        return None;
    }
    let proto = h[20];
    if matches!(proto, EXT_HOP_BY_HOP | EXT_ROUTING | EXT_FRAGMENT | EXT_DEST_OPTS) {
        return None;
    }
    let seg = frame.get(HEAD6..HEAD6 + payload)?;
    // RFC 4443 §2.1: an ICMPv6 message has type, code and checksum.
    let (kind, header_len, payload_len, ports) = transport::<L4>(proto, seg, (PROTO_ICMPV6, L4Kind::Icmpv6, 4))?;
    let (Some(src), Some(dst)) = (h.get(22..38), h.get(38..54)) else { return None };
    let (Ok(src), Ok(dst)) = (<[u8; 16]>::try_from(src), <[u8; 16]>::try_from(dst)) else { return None };
    Some(Parsed {
        l2: L2 { vlans: [VlanTag::default(); MAX_VLAN_TAGS], vlan_count: 0, ethertype: ETHERTYPE_IPV6, len: 14 },
        l3: L3Kind::Ipv6,
        l3_offset: 14,
        l3_len: (40 + payload) as u16,
        l4_offset: HEAD6 as u16,
        ip_proto: proto,
        fragment: Fragment::Whole,
        l4: kind,
        flow: FlowKey { src: IpAddr::V6(src), dst: IpAddr::V6(dst), src_port: ports.0, dst_port: ports.1, proto },
        payload_offset: (HEAD6 + header_len) as u16,
        payload_len: payload_len as u16,
    })
}

/// The [`Parsed`] of `frame` if it is an untagged, option-less, unfragmented IPv4 datagram
/// that passes every check; `None` for anything else (see the module doc). Without `L4` the
/// transport header is neither checked nor parsed (as the general parser at `Depth::L3`).
#[inline(always)]
pub(super) fn ipv4<const L4: bool>(frame: &[u8]) -> Option<Parsed> {
    let h: &[u8; HEAD] = frame.first_chunk()?;
    // EtherType IPv4, version 4 with IHL 5, neither MF nor a fragment offset (DF may be set).
    if be16(h, 12) != ETHERTYPE_IPV4 || h[14] != 0x45 || be16(h, 20) & 0x3FFF != 0 {
        return None;
    }
    let total = usize::from(be16(h, 16));
    // RFC 791: the total length covers the header and lies within the frame (trailing
    // Ethernet padding is allowed). Frames past 64 KiB - 1 are the general parser's.
    if total < 20 || total > frame.len() - 14 || frame.len() > usize::from(u16::MAX) {
        return None;
    }
    if !header_sums_to_ones(h) {
        return None;
    }
    let proto = h[23];
    let seg = frame.get(HEAD..14 + total)?;
    // RFC 792: every ICMP message has type, code, checksum and 4 more bytes.
    let (kind, header_len, payload_len, ports) = transport::<L4>(proto, seg, (PROTO_ICMP, L4Kind::Icmp, 8))?;
    let src = IpAddr::V4([h[26], h[27], h[28], h[29]]);
    let dst = IpAddr::V4([h[30], h[31], h[32], h[33]]);
    Some(Parsed {
        l2: L2 { vlans: [VlanTag::default(); MAX_VLAN_TAGS], vlan_count: 0, ethertype: ETHERTYPE_IPV4, len: 14 },
        l3: L3Kind::Ipv4,
        l3_offset: 14,
        l3_len: total as u16,
        l4_offset: HEAD as u16,
        ip_proto: proto,
        fragment: Fragment::Whole,
        l4: kind,
        flow: FlowKey { src, dst, src_port: ports.0, dst_port: ports.1, proto },
        payload_offset: (HEAD + header_len) as u16,
        payload_len: payload_len as u16,
    })
}

/// The transport header of a whole datagram's upper-layer bytes `seg` for protocol `proto`, as
/// the general parser reads it: `(kind, header length, payload length, ports)`, or `None` for
/// a header it would refuse (the general parser then says why). `icmp`: the IP version's ICMP
/// protocol number, its kind and its fixed header length. Without `L4` nothing is parsed.
#[inline(always)]
fn transport<const L4: bool>(
    proto: u8,
    seg: &[u8],
    icmp: (u8, L4Kind, usize),
) -> Option<(L4Kind, usize, usize, (u16, u16))> {
    Some(match proto {
        _ if !L4 => (L4Kind::Unparsed, 0, seg.len(), (0, 0)),
        PROTO_TCP => {
            let t: &[u8; 20] = seg.first_chunk()?;
            let hl = usize::from(t[12] >> 4) * 4;
            if hl < 20 || hl > seg.len() {
                return None;
            }
            (L4Kind::Tcp, hl, seg.len() - hl, (u16::from_be_bytes([t[0], t[1]]), u16::from_be_bytes([t[2], t[3]])))
        }
        PROTO_UDP => {
            let u: &[u8; 8] = seg.first_chunk()?;
            let ulen = usize::from(u16::from_be_bytes([u[4], u[5]]));
            if ulen < 8 || ulen > seg.len() {
                return None;
            }
            (L4Kind::Udp, 8, ulen - 8, (u16::from_be_bytes([u[0], u[1]]), u16::from_be_bytes([u[2], u[3]])))
        }
        p if p == icmp.0 => {
            if seg.len() < icmp.2 {
                return None;
            }
            (icmp.1, icmp.2, seg.len() - icmp.2, (0, 0))
        }
        _ => (L4Kind::Unparsed, 0, seg.len(), (0, 0)),
    })
}
