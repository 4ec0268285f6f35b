//! The Internet checksum (RFC 1071), the TCP/UDP pseudo-headers, and incremental
//! updates (RFC 1624).
//!
//! RFC 1071 §1: "Adjacent octets to be checksummed are paired to form 16-bit
//! integers, and the 1's complement sum of these 16-bit integers is formed." The sum
//! is associative and byte-order independent, so [`Sum`] adds 32-bit big-endian words
//! into a 64-bit accumulator (RFC 1071 §2 (C), "parallel summation") and folds the
//! carries back in once at the end.
//!
//! Incremental update, RFC 1624 §3, eqn. 3: `HC' = ~(~HC + ~m + m')`, where `m` is the
//! old value of a 16-bit field and `m'` its new value. Eqn. 3 (unlike eqn. 2 of
//! RFC 1141) never produces `-0` (0xFFFF) for a packet whose data is not all zero,
//! so it agrees bit for bit with a full recomputation in every case that a real
//! header can reach (see the tests).
//!
//! Nothing here can panic, for any input.

/// A running one's-complement sum, not yet folded or complemented.
///
/// Every `add_*` call treats its data as starting at an even offset of the summed
/// stream (an odd trailing byte is padded with a zero byte, RFC 1071 §4.1). Sum
/// odd-length pieces only as the last piece.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Sum(u64);

impl Sum {
    /// An empty sum.
    pub const fn new() -> Self {
        Sum(0)
    }

    /// Adds `data`, as big-endian 16-bit words.
    #[inline]
    pub fn add_bytes(self, data: &[u8]) -> Self {
        let mut acc = self.0;
        let mut words = data.chunks_exact(4);
        for w in &mut words {
            // A u64 holds 2^32 32-bit words without overflow: far more than any frame.
            acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
        }
        let rest = words.remainder();
        let mut tail = [0u8; 4];
        tail[..rest.len()].copy_from_slice(rest);
        acc += u64::from(u32::from_be_bytes(tail));
        Sum(acc)
    }

    /// Adds one 16-bit word.
    #[inline]
    pub const fn add_u16(self, v: u16) -> Self {
        Sum(self.0 + v as u64)
    }

    /// Adds a 32-bit value as two 16-bit words.
    #[inline]
    pub const fn add_u32(self, v: u32) -> Self {
        Sum(self.0 + (v >> 16) as u64 + (v & 0xFFFF) as u64)
    }

    /// Adds another partial sum.
    #[inline]
    pub const fn add(self, other: Sum) -> Self {
        Sum(fold64(self.0) as u64 + fold64(other.0) as u64)
    }

    /// The one's-complement sum folded to 16 bits (not complemented).
    #[inline]
    pub const fn fold(self) -> u16 {
        fold64(self.0)
    }

    /// The checksum field value: the complement of the folded sum.
    #[inline]
    pub const fn finish(self) -> u16 {
        !self.fold()
    }
}

/// Folds the carries of a 64-bit accumulator into 16 bits (end-around carry).
#[inline]
const fn fold64(mut s: u64) -> u16 {
    // Each round at least halves the bit width; four rounds reach 16 bits from 64.
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

/// The Internet checksum of `data`: the value to put in a zeroed checksum field.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    Sum::new().add_bytes(data).finish()
}

/// Whether `data`, checksum field included, sums to `0xFFFF` (RFC 1071 §1: "If the
/// result is all 1 bits, the check succeeds").
#[inline]
pub fn verify(data: &[u8]) -> bool {
    Sum::new().add_bytes(data).fold() == 0xFFFF
}

/// The IPv4 pseudo-header sum (RFC 793 §3.1, RFC 768): source, destination, zero,
/// protocol, and the TCP/UDP length (header plus data).
#[inline]
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], proto: u8, l4_len: u16) -> Sum {
    Sum::new()
        .add_u32(u32::from_be_bytes(src))
        .add_u32(u32::from_be_bytes(dst))
        .add_u16(u16::from(proto))
        .add_u16(l4_len)
}

/// The IPv6 pseudo-header sum (RFC 8200 §8.1): source, destination, the 32-bit
/// upper-layer packet length, three zero bytes and the next header value.
#[inline]
pub fn pseudo_header_v6(src: &[u8; 16], dst: &[u8; 16], proto: u8, l4_len: u32) -> Sum {
    Sum::new().add_bytes(src).add_bytes(dst).add_u32(l4_len).add_u16(u16::from(proto))
}

/// The TCP/UDP/ICMPv6-style checksum of `segment` (header with a zeroed checksum field,
/// plus data) over an IPv4 pseudo-header. Lengths beyond `u16::MAX` are truncated, as
/// the IPv4 total length cannot express them anyway.
#[inline]
pub fn l4_checksum_v4(src: [u8; 4], dst: [u8; 4], proto: u8, segment: &[u8]) -> u16 {
    pseudo_header_v4(src, dst, proto, segment.len() as u16).add_bytes(segment).finish()
}

/// The TCP/UDP/ICMPv6 checksum of `segment` (with a zeroed checksum field) over an
/// IPv6 pseudo-header.
#[inline]
pub fn l4_checksum_v6(src: &[u8; 16], dst: &[u8; 16], proto: u8, segment: &[u8]) -> u16 {
    pseudo_header_v6(src, dst, proto, segment.len() as u32).add_bytes(segment).finish()
}

/// RFC 1624 eqn. 3 for one 16-bit field changing from `old` to `new`: the new checksum
/// from the old checksum `hc`.
#[inline]
pub const fn update16(hc: u16, old: u16, new: u16) -> u16 {
    !fold64(!hc as u64 + !old as u64 + new as u64)
}

/// [`update16`] for the IPv4 word (TTL, protocol) when the TTL drops by one, whatever the TTL
/// (≥ 1) and protocol: `~old + new` is then always `0xFEFF`, and one end-around carry
/// suffices (`~hc + 0xFEFF < 2^17`). The L3 forwarder's per-packet update.
#[inline]
pub const fn update_ttl_decrement(hc: u16) -> u16 {
    let x = (!hc) as u32 + 0xFEFF;
    !(((x & 0xFFFF) + (x >> 16)) as u16)
}

/// [`update_ttl_decrement`] on the checksum's two bytes as they lie in the header: the sum is
/// taken on the native-order word (RFC 1071 §2 (B): one's complement arithmetic commutes with
/// swapping the bytes of every word), so no byte is swapped on a little-endian machine.
#[inline]
pub const fn update_ttl_decrement_ne(hc: [u8; 2]) -> [u8; 2] {
    // `0xFEFF` as the same two bytes in memory order.
    let k = u16::from_ne_bytes(0xFEFFu16.to_be_bytes()) as u32;
    let x = (!u16::from_ne_bytes(hc)) as u32 + k;
    (!(((x & 0xFFFF) + (x >> 16)) as u16)).to_ne_bytes()
}

/// RFC 1624 eqn. 3 for a 32-bit field (an IPv4 address, a TCP sequence number)
/// changing from `old` to `new`, applied to both 16-bit halves at once.
#[inline]
pub const fn update32(hc: u16, old: u32, new: u32) -> u16 {
    let old_hi = (old >> 16) as u16;
    let old_lo = old as u16;
    !fold64(!hc as u64 + !old_hi as u64 + !old_lo as u64 + (new >> 16) as u64 + (new & 0xFFFF) as u64)
}

/// RFC 1624 eqn. 3 for a field of any even length (a MAC or IPv6 address) changing
/// from `old` to `new`, both starting at an even offset of the checksummed data.
/// Only the common prefix of the two slices is considered.
#[inline]
pub fn update_bytes(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    let n = old.len().min(new.len());
    let (old, new) = (old.get(..n).unwrap_or(&[]), new.get(..n).unwrap_or(&[]));
    let mut acc = u64::from(!hc);
    let (mut o, mut w) = (old.chunks_exact(2), new.chunks_exact(2));
    for (a, b) in (&mut o).zip(&mut w) {
        acc += u64::from(!u16::from_be_bytes([a[0], a[1]])) + u64::from(u16::from_be_bytes([b[0], b[1]]));
    }
    // An odd last byte is the high byte of a word whose low byte is zero (RFC 1071 §4.1).
    if let (Some(&a), Some(&b)) = (o.remainder().first(), w.remainder().first()) {
        acc += u64::from(!u16::from_be_bytes([a, 0])) + u64::from(u16::from_be_bytes([b, 0]));
    }
    !fold64(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The IPv4 header from RFC 1071-style textbook examples (checksum 0xb861).
    const IPV4_HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
        0x00, 0xc7,
    ];

    /// Every checksum value, TTLs and protocols at the edges: the TTL shortcut is eqn. 3.
    #[test]
    fn ttl_decrement_is_update16_for_every_checksum() {
        for hc in 0..=u16::MAX {
            for (ttl, proto) in [(1u8, 0u8), (2, 6), (64, 17), (128, 1), (255, 255)] {
                let (old, new) = (u16::from_be_bytes([ttl, proto]), u16::from_be_bytes([ttl - 1, proto]));
                assert_eq!(update_ttl_decrement(hc), update16(hc, old, new), "hc {hc:#06x} ttl {ttl} proto {proto}");
                assert_eq!(update_ttl_decrement_ne(hc.to_be_bytes()), update16(hc, old, new).to_be_bytes());
            }
        }
        // And on a real header: the updated checksum verifies.
        let mut h = IPV4_HDR;
        h[8] -= 1;
        let c = update_ttl_decrement(u16::from_be_bytes([IPV4_HDR[10], IPV4_HDR[11]]));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        assert!(verify(&h));
    }

    #[test]
    fn rfc1071_example_sum() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to ddf2 (folded).
        let s = Sum::new().add_bytes(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]);
        assert_eq!(s.fold(), 0xddf2);
        assert_eq!(s.finish(), !0xddf2);
    }

    #[test]
    fn ipv4_header_fixture() {
        assert!(verify(&IPV4_HDR));
        let mut h = IPV4_HDR;
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
        h[8] = 0x3f; // TTL changed without fixing the checksum
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert!(!verify(&h));
    }

    #[test]
    fn odd_length_is_padded() {
        assert_eq!(Sum::new().add_bytes(&[0x12]).fold(), 0x1200);
        assert_eq!(Sum::new().add_bytes(&[0x12, 0x34, 0x56]).fold(), 0x6834);
        assert_eq!(checksum(&[]), 0xFFFF);
    }

    #[test]
    fn udp_over_ipv4_fixture() {
        // UDP 10.0.0.1:1234 -> 10.0.0.2:80, payload "hi"; hand-computed.
        let src = [10, 0, 0, 1];
        let dst = [10, 0, 0, 2];
        let mut seg = [0x04, 0xd2, 0x00, 0x50, 0x00, 0x0a, 0x00, 0x00, b'h', b'i'];
        let c = l4_checksum_v4(src, dst, 17, &seg);
        // Manual: 0a00+0001+0a00+0002+0011+000a + 04d2+0050+000a+0000+6869
        let manual: u32 = 0x0a00 + 0x0001 + 0x0a00 + 0x0002 + 0x0011 + 0x000a + 0x04d2 + 0x0050 + 0x000a + 0x6869;
        let folded = (manual & 0xFFFF) + (manual >> 16);
        assert_eq!(c, !(folded as u16));
        seg[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(pseudo_header_v4(src, dst, 17, 10).add_bytes(&seg).fold(), 0xFFFF);
    }

    #[test]
    fn udp_over_ipv6_verifies_after_fill() {
        let src = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        let mut seg = [0x30, 0x39, 0x00, 0x35, 0x00, 0x0b, 0x00, 0x00, 1, 2, 3];
        let c = l4_checksum_v6(&src, &dst, 17, &seg);
        seg[6..8].copy_from_slice(&c.to_be_bytes());
        assert_eq!(pseudo_header_v6(&src, &dst, 17, 11).add_bytes(&seg).fold(), 0xFFFF);
    }

    #[test]
    fn incremental_ttl_decrement_fixture() {
        let mut h = IPV4_HDR;
        let old = u16::from_be_bytes([h[8], h[9]]);
        h[8] -= 1;
        let new = u16::from_be_bytes([h[8], h[9]]);
        let hc = update16(0xb861, old, new);
        assert_eq!(hc, 0xb961);
        h[10..12].copy_from_slice(&hc.to_be_bytes());
        assert!(verify(&h));
    }

    #[test]
    fn incremental_address_rewrite_fixture() {
        let mut h = IPV4_HDR;
        let old = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
        let new = u32::from_be_bytes([10, 1, 2, 3]);
        h[12..16].copy_from_slice(&new.to_be_bytes());
        let hc = update32(0xb861, old, new);
        h[10..12].copy_from_slice(&hc.to_be_bytes());
        assert!(verify(&h));
        let mut z = h;
        z[10] = 0;
        z[11] = 0;
        assert_eq!(checksum(&z), hc);
    }

    /// Two checksum values that mean the same one's-complement number.
    fn same(a: u16, b: u16) -> bool {
        a == b || (a | b == 0xFFFF && (a == 0 || b == 0))
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        #[test]
        fn incremental_equals_full(
            mut data in proptest::collection::vec(any::<u8>(), 2..128),
            at in any::<prop::sample::Index>(),
            new16 in any::<u16>(),
            new32 in any::<u32>(),
        ) {
            let len = data.len() & !1;
            data.truncate(len);
            let words = len / 2;
            let i = at.index(words) * 2;
            let hc = checksum(&data);

            // 16-bit field.
            let old = u16::from_be_bytes([data[i], data[i + 1]]);
            let mut d16 = data.clone();
            d16[i..i + 2].copy_from_slice(&new16.to_be_bytes());
            let inc = update16(hc, old, new16);
            let full = checksum(&d16);
            prop_assert!(same(inc, full), "inc {inc:#x} full {full:#x}");
            if d16.iter().any(|&b| b != 0) && data.iter().any(|&b| b != 0) {
                prop_assert_eq!(inc, full);
            }

            // 32-bit field (when there is room for one).
            if len >= 4 {
                let j = at.index(words - 1) * 2;
                let old = u32::from_be_bytes([data[j], data[j + 1], data[j + 2], data[j + 3]]);
                let mut d32 = data.clone();
                d32[j..j + 4].copy_from_slice(&new32.to_be_bytes());
                let inc = update32(hc, old, new32);
                let full = checksum(&d32);
                prop_assert!(same(inc, full), "inc {inc:#x} full {full:#x}");
                if d32.iter().any(|&b| b != 0) && data.iter().any(|&b| b != 0) {
                    prop_assert_eq!(inc, full);
                }
                let inc_b = update_bytes(hc, &data[j..j + 4], &d32[j..j + 4]);
                prop_assert!(same(inc_b, full));
            }

            // A 16-byte field (an IPv6 address) at an even offset, replaced by other bytes.
            if len >= 16 {
                let k = at.index(words - 7) * 2;
                let mut d128 = data.clone();
                for (x, y) in d128[k..k + 16].iter_mut().zip(new32.to_be_bytes().iter().cycle()) {
                    *x ^= y.wrapping_add(1);
                }
                let inc = update_bytes(hc, &data[k..k + 16], &d128[k..k + 16]);
                prop_assert!(same(inc, checksum(&d128)), "16-byte field at {k}");
            }
        }

        #[test]
        fn split_sums_match_whole(data in proptest::collection::vec(any::<u8>(), 0..200), cut in any::<prop::sample::Index>()) {
            let c = cut.index(data.len() / 2 + 1) * 2;
            let whole = Sum::new().add_bytes(&data).fold();
            let parts = Sum::new().add_bytes(&data[..c]).add(Sum::new().add_bytes(&data[c..])).fold();
            // 0 and 0xFFFF are the same number; only all-zero input folds to 0.
            prop_assert!(same(whole, parts));
        }
    }
}
