//! ICMP echo (RFC 792) to one of the dataplane's own IPv4 addresses, answered in place.
//!
//! RFC 792, "Echo or Echo Reply Message": "To form an echo reply message, the source and
//! destination addresses are simply reversed, the type code changed to 0, and the checksum
//! recomputed." RFC 1122 §3.2.2.6: "The data received in the ICMP Echo Request MUST be
//! entirely included in the Echo Reply." Swapping the addresses leaves the IPv4 header
//! checksum as it was; the TTL is set to [`REPLY_TTL`] (header checksum updated, RFC 1624)
//! and the ICMP checksum is updated for the type word (8 → 0), RFC 1624 eqn. 3.

use crate::checksum;

/// TTL of a reply (Linux's default, `net.ipv4.ip_default_ttl`).
pub const REPLY_TTL: u8 = 64;
/// ICMP type of an echo request.
pub const ECHO_REQUEST: u8 = 8;

/// Turns the echo request at `ip` (IPv4 header, `ihl` bytes long) / `icmp` (its ICMP
/// header) of `frame` into the reply. `false` (frame untouched) if it is not an echo
/// request with code 0 or the headers do not fit.
pub fn reply_in_place(frame: &mut [u8], ip: usize, icmp: usize) -> bool {
    let Some(&[ty, code, c0, c1]) = frame.get(icmp..icmp + 4).and_then(|s| s.first_chunk::<4>()) else {
        return false;
    };
    if ty != ECHO_REQUEST || code != 0 || frame.get(ip..ip + 20).is_none() || ip + 20 > icmp {
        return false;
    }
    // Type 8 code 0 → type 0 code 0.
    let csum = checksum::update16(u16::from_be_bytes([c0, c1]), u16::from_be_bytes([ty, code]), 0);
    frame[icmp] = 0;
    frame[icmp + 2..icmp + 4].copy_from_slice(&csum.to_be_bytes());
    // Addresses swapped: the header checksum does not change (a sum does not see order).
    let (mut src, mut dst) = ([0u8; 4], [0u8; 4]);
    src.copy_from_slice(&frame[ip + 12..ip + 16]);
    dst.copy_from_slice(&frame[ip + 16..ip + 20]);
    frame[ip + 12..ip + 16].copy_from_slice(&dst);
    frame[ip + 16..ip + 20].copy_from_slice(&src);
    // TTL: the high byte of the word at offset 8.
    let old = u16::from_be_bytes([frame[ip + 8], frame[ip + 9]]);
    let new = u16::from_be_bytes([REPLY_TTL, frame[ip + 9]]);
    let hc = checksum::update16(u16::from_be_bytes([frame[ip + 10], frame[ip + 11]]), old, new);
    frame[ip + 8] = REPLY_TTL;
    frame[ip + 10..ip + 12].copy_from_slice(&hc.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo request as `ping -c1 -s 8 10.0.0.1` from 10.0.0.2 lays it out: IPv4 (DF, TTL
    /// 64), ICMP id 0x1234, seq 1, 8 data bytes; checksums computed here from scratch.
    fn request() -> std::vec::Vec<u8> {
        let mut f = std::vec![0u8; 14 + 20 + 16];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip.copy_from_slice(&[0x45, 0, 0, 36, 0xab, 0xcd, 0x40, 0, 64, 1, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1]);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f[34..42].copy_from_slice(&[8, 0, 0, 0, 0x12, 0x34, 0, 1]);
        f[42..50].copy_from_slice(b"abcdefgh");
        let c = checksum::checksum(&f[34..]);
        f[36..38].copy_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn the_reply_swaps_addresses_and_both_checksums_verify() {
        let mut f = request();
        f[22] = 3; // arrived with TTL 3
        let c = checksum::checksum(&{
            let mut h = f[14..34].to_vec();
            h[10..12].fill(0);
            h
        });
        f[24..26].copy_from_slice(&c.to_be_bytes());
        assert!(reply_in_place(&mut f, 14, 34));
        assert_eq!(&f[26..30], &[10, 0, 0, 1]);
        assert_eq!(&f[30..34], &[10, 0, 0, 2]);
        assert_eq!((f[22], f[34]), (REPLY_TTL, 0));
        assert!(checksum::verify(&f[14..34]), "IPv4 header checksum");
        assert!(checksum::verify(&f[34..]), "ICMP checksum");
        assert_eq!(&f[38..50], &[0x12, 0x34, 0, 1, b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h']);
        // Checked by an independent parser too.
        let p = etherparse::SlicedPacket::from_ethernet(&f).expect("etherparse reads it");
        assert!(matches!(
            p.transport,
            Some(etherparse::TransportSlice::Icmpv4(ref i))
                if matches!(i.icmp_type(), etherparse::Icmpv4Type::EchoReply(_))
        ));
    }

    #[test]
    fn other_icmp_is_left_alone() {
        let mut f = request();
        f[34] = 0; // already a reply
        let before = f.clone();
        assert!(!reply_in_place(&mut f, 14, 34));
        assert_eq!(f, before);
        assert!(!reply_in_place(&mut f[..36], 14, 34), "truncated ICMP header");
    }
}
