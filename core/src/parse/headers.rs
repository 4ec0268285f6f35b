//! Typed views over header bytes, smoltcp style: `try_new` checks the length once,
//! after which every getter and setter is infallible.
//!
//! Getters and setters go through [`be16`], [`be32`], [`array`] and their `put_*`
//! twins, which read or write fixed offsets with `slice::get`: even a view over a
//! buffer whose `AsRef` misbehaves cannot panic in a release build (it reads zeros,
//! writes nothing); debug builds assert that no read goes past the checked length.
//!
//! Field layouts: Ethernet II (IEEE 802.3 §3.1.1), IEEE 802.1Q tags (§9.6), IPv4
//! (RFC 791 §3.1), IPv6 (RFC 8200 §3), TCP (RFC 9293 §3.1), UDP (RFC 768), ICMP
//! (RFC 792) and ICMPv6 (RFC 4443 §2.1).

use super::ParseError;
use crate::checksum;

/// Reads a big-endian `u16` at `at` (out of bounds: as [`array`]).
#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(array(b, at))
}

/// Reads a big-endian `u32` at `at` (out of bounds: as [`array`]).
#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(array(b, at))
}

/// Reads `N` bytes at `at`.
///
/// Every view checks its length once in `try_new`, so a read past the end is a bug in
/// this module: debug builds (tests, fuzzing) stop on it; release builds, on the
/// per-packet path, read zeros rather than panic.
#[inline]
pub(crate) fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let got = b.get(at..at.saturating_add(N)).and_then(|s| <[u8; N]>::try_from(s).ok());
    debug_assert!(got.is_some(), "header read of {N} bytes at {at} past a {}-byte view", b.len());
    got.unwrap_or([0; N])
}

/// Reads one byte at `at` (out of bounds: as [`array`]).
#[inline]
pub(crate) fn byte(b: &[u8], at: usize) -> u8 {
    let got = b.get(at).copied();
    debug_assert!(got.is_some(), "header read of 1 byte at {at} past a {}-byte view", b.len());
    got.unwrap_or(0)
}

/// Writes `v` at `at` (out of bounds: a bug, as for [`array`]; release builds write
/// nothing).
#[inline]
pub(crate) fn put(b: &mut [u8], at: usize, v: &[u8]) {
    let len = b.len();
    match b.get_mut(at..at.saturating_add(v.len())) {
        Some(d) => d.copy_from_slice(v),
        None => debug_assert!(false, "header write of {} bytes at {at} past a {len}-byte view", v.len()),
    }
}

/// Declares a view type over a header.
macro_rules! view {
    ($(#[$m:meta])* $name:ident, $min:expr, $err:expr) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T> {
            buf: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Bytes in the fixed part of the header.
            pub const MIN_LEN: usize = $min;

            /// The bytes under the view.
            pub fn as_bytes(&self) -> &[u8] {
                self.buf.as_ref()
            }

            /// Gives the buffer back.
            pub fn into_inner(self) -> T {
                self.buf
            }

            fn min_len_ok(buf: &T) -> Result<(), ParseError> {
                if buf.as_ref().len() < $min { Err($err) } else { Ok(()) }
            }
        }
    };
}

view!(
    /// An Ethernet II header: destination, source, EtherType.
    EthernetFrame,
    14,
    ParseError::Runt
);

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// A view over `buf`, which must hold at least 14 bytes.
    pub fn try_new(buf: T) -> Result<Self, ParseError> {
        Self::min_len_ok(&buf)?;
        Ok(Self { buf })
    }

    /// Destination MAC address.
    pub fn dst(&self) -> [u8; 6] {
        array(self.as_bytes(), 0)
    }

    /// Source MAC address.
    pub fn src(&self) -> [u8; 6] {
        array(self.as_bytes(), 6)
    }

    /// The EtherType (or the TPID of the first VLAN tag).
    pub fn ethertype(&self) -> u16 {
        be16(self.as_bytes(), 12)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination MAC address.
    pub fn set_dst(&mut self, mac: [u8; 6]) {
        put(self.buf.as_mut(), 0, &mac);
    }

    /// Sets the source MAC address.
    pub fn set_src(&mut self, mac: [u8; 6]) {
        put(self.buf.as_mut(), 6, &mac);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, ethertype: u16) {
        put(self.buf.as_mut(), 12, &ethertype.to_be_bytes());
    }
}

view!(
    /// An IPv4 header (RFC 791 §3.1), options included.
    Ipv4Header,
    20,
    ParseError::TruncatedL3
);

impl<T: AsRef<[u8]>> Ipv4Header<T> {
    /// A view over `buf`, which must hold at least 20 bytes, and the whole header
    /// that its IHL announces.
    pub fn try_new(buf: T) -> Result<Self, ParseError> {
        Self::min_len_ok(&buf)?;
        let v = Self { buf };
        if v.ihl() < 5 {
            return Err(ParseError::BadIpHeaderLen);
        }
        if v.header_len() > v.as_bytes().len() {
            return Err(ParseError::TruncatedL3);
        }
        Ok(v)
    }

    /// The version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        byte(self.as_bytes(), 0) >> 4
    }

    /// The IHL field, in 32-bit words.
    pub fn ihl(&self) -> u8 {
        byte(self.as_bytes(), 0) & 0x0F
    }

    /// The header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.ihl()) * 4
    }

    /// DSCP and ECN (the former TOS byte).
    pub fn dscp_ecn(&self) -> u8 {
        byte(self.as_bytes(), 1)
    }

    /// Total length: header plus data, in bytes.
    pub fn total_len(&self) -> u16 {
        be16(self.as_bytes(), 2)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        be16(self.as_bytes(), 4)
    }

    /// The Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        be16(self.as_bytes(), 6) & 0x4000 != 0
    }

    /// The More Fragments flag.
    pub fn more_frags(&self) -> bool {
        be16(self.as_bytes(), 6) & 0x2000 != 0
    }

    /// Fragment offset, in 8-byte units.
    pub fn frag_offset(&self) -> u16 {
        be16(self.as_bytes(), 6) & 0x1FFF
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        byte(self.as_bytes(), 8)
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> u8 {
        byte(self.as_bytes(), 9)
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.as_bytes(), 10)
    }

    /// Source address.
    pub fn src(&self) -> [u8; 4] {
        array(self.as_bytes(), 12)
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 4] {
        array(self.as_bytes(), 16)
    }

    /// Whether the header checksum verifies (RFC 791: "the 16 bit one's complement of
    /// the one's complement sum of all 16 bit words in the header").
    pub fn verify_checksum(&self) -> bool {
        let b = self.as_bytes();
        checksum::verify(b.get(..self.header_len()).unwrap_or(b))
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Header<T> {
    /// Sets the TTL (the checksum is not updated; see [`checksum::update16`]).
    pub fn set_ttl(&mut self, ttl: u8) {
        put(self.buf.as_mut(), 8, &[ttl]);
    }

    /// Sets the source address (checksum not updated).
    pub fn set_src(&mut self, a: [u8; 4]) {
        put(self.buf.as_mut(), 12, &a);
    }

    /// Sets the destination address (checksum not updated).
    pub fn set_dst(&mut self, a: [u8; 4]) {
        put(self.buf.as_mut(), 16, &a);
    }

    /// Sets the header checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put(self.buf.as_mut(), 10, &c.to_be_bytes());
    }

    /// Recomputes the header checksum from scratch.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let len = self.header_len();
        let b = self.as_bytes();
        let c = checksum::checksum(b.get(..len).unwrap_or(b));
        self.set_checksum(c);
    }
}

view!(
    /// An IPv6 fixed header (RFC 8200 §3).
    Ipv6Header,
    40,
    ParseError::TruncatedL3
);

impl<T: AsRef<[u8]>> Ipv6Header<T> {
    /// A view over `buf`, which must hold at least 40 bytes.
    pub fn try_new(buf: T) -> Result<Self, ParseError> {
        Self::min_len_ok(&buf)?;
        Ok(Self { buf })
    }

    /// The version field (6 for IPv6).
    pub fn version(&self) -> u8 {
        byte(self.as_bytes(), 0) >> 4
    }

    /// Traffic class.
    pub fn traffic_class(&self) -> u8 {
        (be16(self.as_bytes(), 0) >> 4) as u8
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        be32(self.as_bytes(), 0) & 0x000F_FFFF
    }

    /// Payload length: bytes after the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        be16(self.as_bytes(), 4)
    }

    /// Next header (the first extension header or the upper-layer protocol).
    pub fn next_header(&self) -> u8 {
        byte(self.as_bytes(), 6)
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        byte(self.as_bytes(), 7)
    }

    /// Source address.
    pub fn src(&self) -> [u8; 16] {
        array(self.as_bytes(), 8)
    }

    /// Destination address.
    pub fn dst(&self) -> [u8; 16] {
        array(self.as_bytes(), 24)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Header<T> {
    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, h: u8) {
        put(self.buf.as_mut(), 7, &[h]);
    }

    /// Sets the source address.
    pub fn set_src(&mut self, a: [u8; 16]) {
        put(self.buf.as_mut(), 8, &a);
    }

    /// Sets the destination address.
    pub fn set_dst(&mut self, a: [u8; 16]) {
        put(self.buf.as_mut(), 24, &a);
    }
}

view!(
    /// A TCP header (RFC 9293 §3.1), options included.
    TcpHeader,
    20,
    ParseError::TruncatedL4
);

impl<T: AsRef<[u8]>> TcpHeader<T> {
    /// A view over `buf` (the segment), which must hold at least 20 bytes and the
    /// whole header that the data offset announces.
    pub fn try_new(buf: T) -> Result<Self, ParseError> {
        Self::min_len_ok(&buf)?;
        let v = Self { buf };
        if v.data_offset() < 5 || v.header_len() > v.as_bytes().len() {
            return Err(ParseError::BadL4Len);
        }
        Ok(v)
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.as_bytes(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.as_bytes(), 2)
    }

    /// Sequence number.
    pub fn seq(&self) -> u32 {
        be32(self.as_bytes(), 4)
    }

    /// Acknowledgment number.
    pub fn ack(&self) -> u32 {
        be32(self.as_bytes(), 8)
    }

    /// Data offset, in 32-bit words.
    pub fn data_offset(&self) -> u8 {
        byte(self.as_bytes(), 12) >> 4
    }

    /// Header length in bytes (data offset × 4).
    pub fn header_len(&self) -> usize {
        usize::from(self.data_offset()) * 4
    }

    /// The eight flag bits CWR ECE URG ACK PSH RST SYN FIN.
    pub fn flags(&self) -> u8 {
        byte(self.as_bytes(), 13)
    }

    /// Window.
    pub fn window(&self) -> u16 {
        be16(self.as_bytes(), 14)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.as_bytes(), 16)
    }

    /// Urgent pointer.
    pub fn urgent(&self) -> u16 {
        be16(self.as_bytes(), 18)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpHeader<T> {
    /// Sets the source port (checksum not updated).
    pub fn set_src_port(&mut self, p: u16) {
        put(self.buf.as_mut(), 0, &p.to_be_bytes());
    }

    /// Sets the destination port (checksum not updated).
    pub fn set_dst_port(&mut self, p: u16) {
        put(self.buf.as_mut(), 2, &p.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put(self.buf.as_mut(), 16, &c.to_be_bytes());
    }
}

view!(
    /// A UDP header (RFC 768).
    UdpHeader,
    8,
    ParseError::TruncatedL4
);

impl<T: AsRef<[u8]>> UdpHeader<T> {
    /// A view over `buf` (the datagram), which must hold at least 8 bytes. The length
    /// field is checked by the parser, which knows whether the datagram is fragmented.
    pub fn try_new(buf: T) -> Result<Self, ParseError> {
        Self::min_len_ok(&buf)?;
        Ok(Self { buf })
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be16(self.as_bytes(), 0)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be16(self.as_bytes(), 2)
    }

    /// Length: header plus data, in bytes.
    pub fn len(&self) -> u16 {
        be16(self.as_bytes(), 4)
    }

    /// Whether the length field says zero bytes (always malformed).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checksum field (0: no checksum, IPv4 only).
    pub fn checksum(&self) -> u16 {
        be16(self.as_bytes(), 6)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpHeader<T> {
    /// Sets the source port (checksum not updated).
    pub fn set_src_port(&mut self, p: u16) {
        put(self.buf.as_mut(), 0, &p.to_be_bytes());
    }

    /// Sets the destination port (checksum not updated).
    pub fn set_dst_port(&mut self, p: u16) {
        put(self.buf.as_mut(), 2, &p.to_be_bytes());
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put(self.buf.as_mut(), 6, &c.to_be_bytes());
    }
}

view!(
    /// The common part of an ICMP (RFC 792) or ICMPv6 (RFC 4443) message: type, code,
    /// checksum.
    IcmpHeader,
    4,
    ParseError::TruncatedL4
);

impl<T: AsRef<[u8]>> IcmpHeader<T> {
    /// A view over `buf`, which must hold at least 4 bytes.
    pub fn try_new(buf: T) -> Result<Self, ParseError> {
        Self::min_len_ok(&buf)?;
        Ok(Self { buf })
    }

    /// Message type.
    pub fn msg_type(&self) -> u8 {
        byte(self.as_bytes(), 0)
    }

    /// Message code.
    pub fn code(&self) -> u8 {
        byte(self.as_bytes(), 1)
    }

    /// Checksum field.
    pub fn checksum(&self) -> u16 {
        be16(self.as_bytes(), 2)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> IcmpHeader<T> {
    /// Sets the checksum field.
    pub fn set_checksum(&mut self, c: u16) {
        put(self.buf.as_mut(), 2, &c.to_be_bytes());
    }
}
