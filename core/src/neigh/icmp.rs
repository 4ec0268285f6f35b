//! ICMP errors (RFC 792) for IPv4 packets the L3 forwarder drops: Time Exceeded (type 11
//! code 0) for a TTL that expires, Destination Unreachable (type 3 code 0, net
//! unreachable) for no route, and (type 3 code 4, RFC 1191) fragmentation needed for a
//! packet with Don't Fragment set that is longer than its egress port's MTU; for IPv6,
//! ICMPv6 (RFC 4443) Time Exceeded (type 3 code 0, hop limit), Destination Unreachable
//! (type 1 code 0, no route) and Packet Too Big (type 2) from the ingress port's IPv6
//! address, quoting as much of the packet as fits in 1280 bytes ([`error6_in_place`],
//! [`may_answer6`]). Built in place in the dropped frame's buffer
//! ([`error_in_place`]) and sent back out of the ingress port (`crate::nf::Chain`).
//!
//! What is quoted: the offending IP header and the first 8 bytes of its payload, as RFC 792
//! asks ("the internet header plus the first 64 bits of the original datagram's data").
//! RFC 1812 §4.3.2.3 allows a router to quote more (up to 576 bytes in all); 8 bytes carry
//! the ports of UDP and TCP and the identifier of ICMP echo, all that traceroute, ping and
//! a host's socket lookup need, and keep the copy short and fixed.
//!
//! The IP header of the error: TOS 0xC0 (RFC 1812 §4.3.2.5: "precedence value of 6
//! (Internetwork Control)" for ICMP errors, as Linux does), no options, identification 0,
//! TTL [`ERROR_TTL`], from the ingress port's address whose subnet holds the packet's
//! source (else the port's first address; RFC 1812 §4.3.2.4 lets a router choose).
//!
//! Never sent ([`may_answer`], RFC 1812 §4.3.2.7 and RFC 1122 §3.2.2): for an ICMP error
//! message (or an ICMP message too short to tell), for a fragment other than the first,
//! for a frame sent to a link-layer broadcast or multicast address, for a packet to an IP
//! broadcast or multicast address, or from an address that does not name a single host
//! (zero, loopback, multicast, broadcast, class E). The broadcast addresses of the ports'
//! subnets (directed broadcasts) are checked by the caller, which knows the subnets
//! (`Router::icmp_error`).

use crate::checksum;

/// IPv6 next header of ICMPv6.
pub const PROTO_ICMPV6: u8 = 58;
/// The most bytes of the offending IPv6 packet an ICMPv6 error quotes: its 40-byte IPv6 and
/// 8-byte ICMPv6 headers and the quote fill the minimum IPv6 MTU (RFC 4443 §3.1, §3.3: "As
/// much of invoking packet as possible without the ICMPv6 packet exceeding the minimum
/// IPv6 MTU").
pub const QUOTE6: usize = 1280 - 48;

/// TTL of an ICMP error the dataplane sends (Linux's default, `net.ipv4.ip_default_ttl`).
pub const ERROR_TTL: u8 = 64;
/// IPv4 protocol number of ICMP.
pub const PROTO_ICMP: u8 = 1;
/// Bytes of the offending packet's payload quoted after its IP header (RFC 792).
pub const QUOTE: usize = 8;
/// What an error adds in front of the quote: its IPv4 header (20) and ICMP header (8).
pub const ADDED: usize = 28;
/// The most bytes from the IP header on that an error needs: its headers, the longest
/// offending IP header (60) and the quote.
pub const MAX_ERROR: usize = ADDED + 60 + QUOTE;

/// Which error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Kind {
    /// Time Exceeded, TTL exceeded in transit (type 11, code 0).
    TimeExceeded,
    /// Destination Unreachable, net unreachable (type 3, code 0).
    NetUnreachable,
    /// The packet is longer than the next hop's MTU (the value) and may not be fragmented:
    /// Destination Unreachable, fragmentation needed and DF set (type 3, code 4) with the
    /// next-hop MTU in the header's last 16 bits (RFC 1191 §4); ICMPv6 Packet Too Big (type
    /// 2, code 0) with the MTU in its 32-bit field (RFC 4443 §3.2). Path-MTU discovery.
    TooBig(u16),
}

impl Kind {
    /// ICMPv6 type and code (RFC 4443 §3.3: Time Exceeded, hop limit exceeded in transit;
    /// §3.1: Destination Unreachable, no route to destination).
    pub const fn type_code6(self) -> (u8, u8) {
        match self {
            Kind::TimeExceeded => (3, 0),
            Kind::NetUnreachable => (1, 0),
            Kind::TooBig(_) => (2, 0),
        }
    }

    /// The ICMP header's second word (bytes 4..8): zero, or the MTU for [`Kind::TooBig`]
    /// (RFC 1191's 16-bit field after 16 unused bits, RFC 4443's 32-bit field: the same
    /// bytes for an MTU below 65 536).
    pub const fn rest(self) -> [u8; 4] {
        match self {
            Kind::TooBig(mtu) => {
                let [h, l] = mtu.to_be_bytes();
                [0, 0, h, l]
            }
            _ => [0; 4],
        }
    }

    /// ICMP type and code.
    pub const fn type_code(self) -> (u8, u8) {
        match self {
            Kind::TimeExceeded => (11, 0),
            Kind::NetUnreachable => (3, 0),
            Kind::TooBig(_) => (3, 4),
        }
    }
}

/// ICMP types that are not errors (RFC 792, RFC 950): echo reply and request, timestamp,
/// information and address mask requests and replies. Anything else is treated as an
/// error, to which no error is sent (RFC 1122 §3.2.2: "An ICMP error message MUST NOT be
/// sent as the result of receiving ... an ICMP error message").
const fn is_query(ty: u8) -> bool {
    matches!(ty, 0 | 8 | 13 | 14 | 15 | 16 | 17 | 18)
}

/// Whether an IPv4 source address names a single host (RFC 1812 §4.3.2.7: not "a
/// source address that does not define a single host").
fn single_host(a: [u8; 4]) -> bool {
    a[0] != 0 && a[0] != 127 && a[0] < 224
}

/// Whether an error may be sent for the IPv4 packet at `ip` of `frame` (Ethernet header at
/// 0): the header fits, and none of RFC 1812 §4.3.2.7's exclusions applies.
pub fn may_answer(frame: &[u8], ip: usize) -> bool {
    let Some(h) = frame.get(ip..).and_then(|h| h.first_chunk::<20>()) else { return false };
    let ihl = usize::from(h[0] & 0x0F) * 4;
    if h[0] >> 4 != 4 || ihl < 20 {
        return false;
    }
    // "a packet destined to an IP broadcast or IP multicast address" / "sent as a Link
    // Layer broadcast or multicast".
    let (src, dst) = ([h[12], h[13], h[14], h[15]], [h[16], h[17], h[18], h[19]]);
    if frame.first().is_none_or(|m| m & 1 != 0) || dst[0] >= 224 || !single_host(src) {
        return false;
    }
    // "a non-initial fragment".
    if u16::from_be_bytes([h[6], h[7]]) & 0x1FFF != 0 {
        return false;
    }
    if h[9] == PROTO_ICMP {
        return frame.get(ip + ihl).is_some_and(|&ty| is_query(ty));
    }
    true
}

/// Turns the IPv4 packet at `ip` of `buf` (the frame from its start to the end of its
/// buffer; `len`: the frame's length) into the ICMP error `kind` from `from` to the
/// packet's source, in place: the link header (`..ip`) is left for the egress to write,
/// the offending header and up to [`QUOTE`] bytes of its payload move [`ADDED`] bytes on.
/// Returns the new frame length; `None` (buffer untouched) if the packet is not IPv4, its
/// header does not fit in `len`, or `buf` is too short for the error.
///
/// The rules of [`may_answer`] are the caller's to check first.
pub fn error_in_place(buf: &mut [u8], ip: usize, len: usize, kind: Kind, from: [u8; 4]) -> Option<usize> {
    let h = buf.get(ip..len.min(buf.len()))?;
    let (&vihl, _) = h.split_first()?;
    let ihl = usize::from(vihl & 0x0F) * 4;
    if vihl >> 4 != 4 || ihl < 20 || h.len() < ihl {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([*h.get(2)?, *h.get(3)?]));
    // The payload present: what the header says, bounded by what arrived.
    let payload = total.min(h.len()).saturating_sub(ihl);
    let quoted = ihl + payload.min(QUOTE);
    let to = [*h.get(12)?, *h.get(13)?, *h.get(14)?, *h.get(15)?];
    let end = ip + ADDED + quoted;
    if buf.len() < end {
        return None;
    }
    buf.copy_within(ip..ip + quoted, ip + ADDED);
    let (ty, code) = kind.type_code();
    let err_len = (ADDED + quoted) as u16;
    let [l0, l1] = err_len.to_be_bytes();
    let hdr = buf.get_mut(ip..ip + 20)?;
    hdr.copy_from_slice(&[0x45, 0xC0, l0, l1, 0, 0, 0, 0, ERROR_TTL, PROTO_ICMP, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    hdr[12..16].copy_from_slice(&from);
    hdr[16..20].copy_from_slice(&to);
    let c = checksum::checksum(hdr);
    hdr[10..12].copy_from_slice(&c.to_be_bytes());
    let icmp = buf.get_mut(ip + 20..end)?;
    let [r0, r1, r2, r3] = kind.rest();
    icmp[..8].copy_from_slice(&[ty, code, 0, 0, r0, r1, r2, r3]);
    let c = checksum::checksum(icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Some(end)
}

/// [`may_answer`] for the IPv6 packet at `ip` of `frame` whose upper-layer header
/// (`proto`, after any extension headers) is at `l4`, `later`: a fragment other than the
/// first. RFC 4443 §2.4 (e): not for an ICMPv6 error message (types below 128), a packet to
/// a multicast address or sent as a link-layer multicast or broadcast, or from an address
/// that does not identify a single node (unspecified, loopback, multicast); and, as for
/// IPv4, not for a later fragment (its upper-layer header cannot be seen).
pub fn may_answer6(frame: &[u8], ip: usize, proto: u8, l4: usize, later: bool) -> bool {
    let Some(h) = frame.get(ip..).and_then(|h| h.first_chunk::<40>()) else { return false };
    let (src, dst) = (&h[8..24], &h[24..40]);
    let unspecified = src.iter().all(|&b| b == 0);
    let loopback = src[..15].iter().all(|&b| b == 0) && src[15] == 1;
    if h[0] >> 4 != 6 || frame.first().is_none_or(|m| m & 1 != 0) || dst[0] == 0xFF {
        return false;
    }
    if src[0] == 0xFF || unspecified || loopback || later {
        return false;
    }
    if proto == PROTO_ICMPV6 {
        return frame.get(l4).is_some_and(|&ty| ty >= 128);
    }
    true
}

/// [`error_in_place`] for IPv6: the packet at `ip` (`len`: the frame's length) becomes the
/// ICMPv6 error `kind` from `from` to its source, quoting as much of it as fits in the
/// minimum MTU ([`QUOTE6`]); hop limit [`ERROR_TTL`]. Returns the new frame length; `None`
/// (buffer untouched) if it is not IPv6, its header does not fit, or `buf` is too short.
pub fn error6_in_place(buf: &mut [u8], ip: usize, len: usize, kind: Kind, from: [u8; 16]) -> Option<usize> {
    let h = buf.get(ip..len.min(buf.len()))?;
    let fixed = h.first_chunk::<40>()?;
    if fixed[0] >> 4 != 6 {
        return None;
    }
    let payload = usize::from(u16::from_be_bytes([fixed[4], fixed[5]]));
    let to: [u8; 16] = fixed[8..24].try_into().ok()?;
    let quoted = (40 + payload).min(h.len()).min(QUOTE6);
    let end = ip + 48 + quoted;
    if buf.len() < end {
        return None;
    }
    buf.copy_within(ip..ip + quoted, ip + 48);
    let [l0, l1] = ((8 + quoted) as u16).to_be_bytes();
    let hdr = buf.get_mut(ip..ip + 40)?;
    hdr[..8].copy_from_slice(&[0x60, 0, 0, 0, l0, l1, PROTO_ICMPV6, ERROR_TTL]);
    hdr[8..24].copy_from_slice(&from);
    hdr[24..40].copy_from_slice(&to);
    let (ty, code) = kind.type_code6();
    let icmp = buf.get_mut(ip + 40..end)?;
    let [r0, r1, r2, r3] = kind.rest();
    icmp[..8].copy_from_slice(&[ty, code, 0, 0, r0, r1, r2, r3]);
    let c = checksum::l4_checksum_v6(&from, &to, PROTO_ICMPV6, icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::vec::Vec;

    const FROM: [u8; 4] = [10, 0, 1, 1];
    const SRC: [u8; 4] = [10, 0, 1, 2];
    const DST: [u8; 4] = [10, 0, 2, 2];

    /// A UDP datagram as `traceroute` sends its first probe: TTL 1, ports 50000 → 33434,
    /// `data` bytes of payload; the buffer is 2 KiB (a pool buffer), the frame `len` bytes.
    fn probe(data: usize) -> (Vec<u8>, usize) {
        let len = 14 + 20 + 8 + data;
        let mut f = std::vec![0u8; 2048];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let tl = (20 + 8 + data) as u16;
        f[14..34].copy_from_slice(&[0x45, 0, 0, 0, 0x12, 0x34, 0, 0, 1, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        f[16..18].copy_from_slice(&tl.to_be_bytes());
        f[26..30].copy_from_slice(&SRC);
        f[30..34].copy_from_slice(&DST);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[34..42].copy_from_slice(&[0xC3, 0x50, 0x82, 0x9A, 0, (8 + data) as u8, 0, 0]);
        for (i, b) in f[42..len].iter_mut().enumerate() {
            *b = i as u8 ^ 0x5A;
        }
        (f, len)
    }

    fn check(f: &[u8], len: usize, kind: Kind, original: &[u8]) {
        let p = etherparse::SlicedPacket::from_ethernet(&f[..len]).expect("etherparse reads it");
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else { panic!("not IPv4") };
        assert_eq!(ip.header().source(), FROM);
        assert_eq!(ip.header().destination(), SRC);
        assert_eq!(ip.header().ttl(), ERROR_TTL);
        assert_eq!(ip.header().protocol(), etherparse::IpNumber::ICMP);
        let hc = ip.header().to_header();
        assert_eq!(hc.header_checksum, hc.calc_header_checksum(), "IPv4 header checksum");
        let Some(etherparse::TransportSlice::Icmpv4(icmp)) = &p.transport else { panic!("not ICMP") };
        match kind {
            Kind::TimeExceeded => assert!(matches!(
                icmp.icmp_type(),
                etherparse::Icmpv4Type::TimeExceeded(etherparse::icmpv4::TimeExceededCode::TtlExceededInTransit)
            )),
            Kind::NetUnreachable => assert!(matches!(
                icmp.icmp_type(),
                etherparse::Icmpv4Type::DestinationUnreachable(etherparse::icmpv4::DestUnreachableHeader::Network)
            )),
            Kind::TooBig(mtu) => assert_eq!(
                icmp.icmp_type(),
                etherparse::Icmpv4Type::DestinationUnreachable(
                    etherparse::icmpv4::DestUnreachableHeader::FragmentationNeeded { next_hop_mtu: mtu }
                )
            ),
        }
        assert!(checksum::verify(&f[34..len]), "ICMP checksum");
        assert_eq!(icmp.payload(), original, "the offending header and 8 bytes of payload");
    }

    #[test]
    fn time_exceeded_quotes_the_header_and_8_bytes() {
        for data in [0, 3, 8, 100, 1400] {
            let (mut f, len) = probe(data);
            let original = f[14..42].to_vec();
            let n = error_in_place(&mut f, 14, len, Kind::TimeExceeded, FROM).expect("built");
            assert_eq!(n, 14 + 28 + 28);
            check(&f, n, Kind::TimeExceeded, &original);
        }
    }

    #[test]
    fn fragmentation_needed_carries_the_next_hop_mtu() {
        let (mut f, len) = probe(1472);
        let original = f[14..42].to_vec();
        let n = error_in_place(&mut f, 14, len, Kind::TooBig(1400), FROM).expect("built");
        check(&f, n, Kind::TooBig(1400), &original);
    }

    #[test]
    fn net_unreachable_for_a_short_payload_quotes_what_arrived() {
        // An IP packet with 3 bytes of payload (no whole L4 header): all 3 quoted.
        let (mut f, _) = probe(0);
        f[16..18].copy_from_slice(&23u16.to_be_bytes());
        let len = 14 + 23;
        let original = f[14..37].to_vec();
        let n = error_in_place(&mut f, 14, len, Kind::NetUnreachable, FROM).expect("built");
        assert_eq!(n, 14 + 28 + 23);
        check(&f, n, Kind::NetUnreachable, &original);
    }

    #[test]
    fn options_are_quoted_whole() {
        // IHL 6: a 4-byte option (NOP ×3, EOL) in the offending header.
        let (mut f, _) = probe(16);
        f.copy_within(34..34 + 24, 38);
        f[34..38].copy_from_slice(&[1, 1, 1, 0]);
        f[14] = 0x46;
        f[16..18].copy_from_slice(&48u16.to_be_bytes());
        f[24..26].fill(0);
        let c = checksum::checksum(&f[14..38]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        let original = f[14..38 + 8].to_vec();
        let n = error_in_place(&mut f, 14, 14 + 48, Kind::TimeExceeded, FROM).expect("built");
        assert_eq!(n, 14 + 28 + 24 + 8);
        check(&f, n, Kind::TimeExceeded, &original);
    }

    #[test]
    fn bad_input_is_refused_and_left_alone() {
        let (mut f, len) = probe(8);
        let before = f.clone();
        assert_eq!(error_in_place(&mut f, 14, 14 + 19, Kind::TimeExceeded, FROM), None, "header cut");
        assert_eq!(error_in_place(&mut f[..60], 14, 50, Kind::TimeExceeded, FROM), None, "no room");
        f[14] = 0x65;
        assert_eq!(error_in_place(&mut f, 14, len, Kind::TimeExceeded, FROM), None, "IPv6 version");
        f[14] = 0x44;
        assert_eq!(error_in_place(&mut f, 14, len, Kind::TimeExceeded, FROM), None, "IHL 4");
        f[14] = 0x45;
        assert_eq!(f, before);
    }

    const FROM6: [u8; 16] = [0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const SRC6: [u8; 16] = [0xfd, 0x78, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    /// A UDP datagram over IPv6 with `data` bytes of payload, hop limit 1, in a 2 KiB buffer.
    fn probe6(data: usize) -> (Vec<u8>, usize) {
        let len = 14 + 40 + 8 + data;
        let mut f = std::vec![0u8; 2048];
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[0x86, 0xDD]);
        f[14] = 0x60;
        f[18..20].copy_from_slice(&((8 + data) as u16).to_be_bytes());
        (f[20], f[21]) = (17, 1);
        f[22..38].copy_from_slice(&SRC6);
        f[38..54].copy_from_slice(&[0xfd, 0x79, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        f[54..62].copy_from_slice(&[0xC3, 0x50, 0x82, 0x9A, 0, (8 + data) as u8, 0, 0]);
        for (i, b) in f[62..len].iter_mut().enumerate() {
            *b = i as u8;
        }
        (f, len)
    }

    #[test]
    fn icmpv6_errors_quote_up_to_the_minimum_mtu() {
        for (data, kind) in [(0, Kind::TimeExceeded), (100, Kind::NetUnreachable), (1400, Kind::TimeExceeded)] {
            let (mut f, len) = probe6(data);
            let quoted = (48 + data).min(QUOTE6);
            let original = f[14..14 + quoted].to_vec();
            assert!(may_answer6(&f, 14, 17, 54, false));
            let n = error6_in_place(&mut f, 14, len, kind, FROM6).expect("built");
            assert_eq!(n, 14 + 48 + quoted);
            assert!(n - 14 <= 1280, "within the minimum MTU");
            let p = etherparse::SlicedPacket::from_ethernet(&f[..n]).expect("etherparse reads it");
            let Some(etherparse::NetSlice::Ipv6(ip)) = &p.net else { panic!("not IPv6") };
            assert_eq!((ip.header().source(), ip.header().destination()), (FROM6, SRC6));
            assert_eq!(ip.header().hop_limit(), ERROR_TTL);
            let Some(etherparse::TransportSlice::Icmpv6(i)) = &p.transport else { panic!("not ICMPv6") };
            assert_eq!((i.type_u8(), i.code_u8()), kind.type_code6());
            let sum = i.header().icmp_type.calc_checksum(FROM6, SRC6, i.payload()).expect("sums");
            assert_eq!(i.header().checksum, sum, "ICMPv6 checksum");
            assert_eq!(i.payload(), &original[..]);
        }
    }

    #[test]
    fn the_icmpv6_never_send_rules() {
        let (f, _) = probe6(8);
        let with = |at: usize, bytes: &[u8]| {
            let mut g = f.clone();
            g[at..at + bytes.len()].copy_from_slice(bytes);
            g
        };
        assert!(!may_answer6(&with(0, &[0x33, 0x33, 0, 0, 0, 1]), 14, 17, 54, false), "link-layer multicast");
        assert!(!may_answer6(&with(38, &[0xFF, 0x02]), 14, 17, 54, false), "multicast destination");
        assert!(!may_answer6(&with(22, &[0; 16]), 14, 17, 54, false), "unspecified source");
        assert!(!may_answer6(&with(22, &[0xFF, 0x02]), 14, 17, 54, false), "multicast source");
        let mut lo = [0u8; 16];
        lo[15] = 1;
        assert!(!may_answer6(&with(22, &lo), 14, 17, 54, false), "loopback source");
        assert!(!may_answer6(&f, 14, 17, 54, true), "later fragment");
        for (ty, ok) in [(128, true), (129, true), (135, true), (1, false), (3, false), (4, false)] {
            let g = with(54, &[ty]);
            assert_eq!(may_answer6(&g, 14, PROTO_ICMPV6, 54, false), ok, "ICMPv6 type {ty}");
        }
        assert!(!may_answer6(&f[..50], 14, 17, 54, false), "header cut");
    }

    #[test]
    fn the_never_send_rules() {
        let (f, _) = probe(8);
        assert!(may_answer(&f, 14), "an ordinary UDP datagram");
        let with = |at: usize, bytes: &[u8]| {
            let mut g = f.clone();
            g[at..at + bytes.len()].copy_from_slice(bytes);
            g
        };
        assert!(!may_answer(&with(0, &[0xFF; 6]), 14), "link-layer broadcast");
        assert!(!may_answer(&with(0, &[0x01, 0, 0x5E, 0, 0, 1]), 14), "link-layer multicast");
        assert!(!may_answer(&with(30, &[255, 255, 255, 255]), 14), "IP broadcast destination");
        assert!(!may_answer(&with(30, &[224, 0, 0, 251]), 14), "IP multicast destination");
        for src in [[0, 0, 0, 0], [127, 0, 0, 1], [224, 0, 0, 1], [255, 255, 255, 255], [240, 0, 0, 1]] {
            assert!(!may_answer(&with(26, &src), 14), "source {src:?}");
        }
        assert!(!may_answer(&with(20, &[0x20, 0xB9]), 14), "non-first fragment");
        assert!(may_answer(&with(20, &[0x20, 0x00]), 14), "first fragment (MF, offset 0)");
        // ICMP: queries are answered, errors and unknown or missing types are not.
        for (ty, ok) in [(8, true), (0, true), (13, true), (3, false), (11, false), (5, false), (4, false), (42, false)]
        {
            let g = with(23, &[PROTO_ICMP]);
            let g = {
                let mut g = g;
                g[34] = ty;
                g
            };
            assert_eq!(may_answer(&g, 14), ok, "ICMP type {ty}");
        }
        assert!(!may_answer(&with(23, &[PROTO_ICMP])[..34], 14), "ICMP without its type");
        assert!(!may_answer(&f[..30], 14), "IP header cut");
    }
}
