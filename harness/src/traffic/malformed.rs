//! Malformed frames, one defect each, with the `DropReason::as_str()` name the firmware
//! must count them under. None of them carries a valid tag, so if one comes back out the
//! sink classifies it as `unexpected`.

use serde::Serialize;

use cadence_core::rand::XorShift64;

use super::frame::inet_checksum;
use crate::protocol::Mac;

/// A kind of malformed frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Malformed {
    /// 10 bytes: shorter than an Ethernet header.
    Runt,
    /// EtherType 0x1234 and random bytes.
    RandomEthertype,
    /// IPv4 EtherType, 10 bytes of IP header.
    TruncatedIpv4,
    /// IPv4 with IHL = 4.
    Ipv4IhlBelow5,
    /// IPv4 total length 200 B beyond the frame.
    Ipv4TotalLenBeyondFrame,
    /// IPv4 header checksum off by one.
    Ipv4BadChecksum,
    /// IPv4 EtherType, version field 6.
    Ipv4WrongVersion,
    /// IPv6 payload length 200 B beyond the frame.
    Ipv6PayloadLenBeyondFrame,
    /// IPv4/UDP with 4 bytes of UDP header.
    TruncatedUdp,
    /// IPv4/TCP with 12 bytes of TCP header.
    TruncatedTcp,
    /// UDP length field larger than the IP payload.
    UdpLenInconsistent,
    /// TCP data offset 4.
    TcpDataOffsetBelow5,
}

impl Malformed {
    /// Every kind.
    pub const ALL: [Malformed; 12] = [
        Malformed::Runt,
        Malformed::RandomEthertype,
        Malformed::TruncatedIpv4,
        Malformed::Ipv4IhlBelow5,
        Malformed::Ipv4TotalLenBeyondFrame,
        Malformed::Ipv4BadChecksum,
        Malformed::Ipv4WrongVersion,
        Malformed::Ipv6PayloadLenBeyondFrame,
        Malformed::TruncatedUdp,
        Malformed::TruncatedTcp,
        Malformed::UdpLenInconsistent,
        Malformed::TcpDataOffsetBelow5,
    ];

    /// The drop reason (`DropReason::as_str()`) the firmware counts it under.
    pub const fn reason(self) -> &'static str {
        match self {
            Malformed::Runt => "runt",
            Malformed::RandomEthertype => "unsupported_ethertype",
            Malformed::TruncatedIpv4 => "truncated_l3",
            Malformed::Ipv4IhlBelow5 => "bad_ip_header_len",
            Malformed::Ipv4TotalLenBeyondFrame | Malformed::Ipv6PayloadLenBeyondFrame => "bad_ip_total_len",
            Malformed::Ipv4BadChecksum => "bad_ip_checksum",
            Malformed::Ipv4WrongVersion => "bad_ip_version",
            Malformed::TruncatedUdp | Malformed::TruncatedTcp => "truncated_l4",
            Malformed::UdpLenInconsistent | Malformed::TcpDataOffsetBelow5 => "bad_l4_len",
        }
    }

    /// Builds the frame; `salt` varies the random parts.
    pub fn build(self, dst: Mac, src: Mac, salt: u32) -> Vec<u8> {
        let mut f = Vec::with_capacity(128);
        f.extend_from_slice(&dst.0);
        f.extend_from_slice(&src.0);
        match self {
            Malformed::Runt => {
                f.truncate(10);
                return f;
            }
            Malformed::RandomEthertype => {
                f.extend_from_slice(&0x1234u16.to_be_bytes());
                let mut rng = XorShift64::from_state(u64::from(salt.wrapping_mul(2_654_435_761) | 1));
                for _ in 0..50 {
                    f.push(rng.next_u64() as u8);
                }
                return f;
            }
            Malformed::Ipv6PayloadLenBeyondFrame => {
                f.extend_from_slice(&0x86DDu16.to_be_bytes());
                let mut ip = [0u8; 40];
                ip[0] = 0x60;
                ip[4..6].copy_from_slice(&(8u16 + 32 + 200).to_be_bytes());
                ip[6] = 17;
                ip[7] = 64;
                ip[8] = 0xfd;
                ip[23] = 1;
                ip[24] = 0xfd;
                ip[39] = 2;
                f.extend_from_slice(&ip);
                f.extend_from_slice(&udp(8 + 32));
                f.extend_from_slice(&[0xab; 32]);
                return f;
            }
            _ => {}
        }
        f.extend_from_slice(&0x0800u16.to_be_bytes());
        let (proto, l4): (u8, Vec<u8>) = match self {
            Malformed::TruncatedUdp => (17, udp(8)[..4].to_vec()),
            Malformed::TruncatedTcp => (6, tcp(5)[..12].to_vec()),
            Malformed::UdpLenInconsistent => {
                let mut u = udp(8 + 32 + 16);
                u.extend_from_slice(&[0xcd; 32]);
                (17, u)
            }
            Malformed::TcpDataOffsetBelow5 => {
                let mut t = tcp(4);
                t.extend_from_slice(&[0xef; 20]);
                (6, t)
            }
            _ => {
                let mut u = udp(8 + 24);
                u.extend_from_slice(&[0x5a; 24]);
                (17, u)
            }
        };
        let mut ip = ipv4(proto, 20 + l4.len(), salt as u16);
        match self {
            Malformed::TruncatedIpv4 => {
                f.extend_from_slice(&ip[..10]);
                return f;
            }
            Malformed::Ipv4IhlBelow5 => ip[0] = 0x44,
            Malformed::Ipv4TotalLenBeyondFrame => {
                ip[2..4].copy_from_slice(&((20 + l4.len() + 200) as u16).to_be_bytes());
            }
            Malformed::Ipv4WrongVersion => ip[0] = 0x65,
            _ => {}
        }
        ip[10..12].copy_from_slice(&[0, 0]);
        let mut c = inet_checksum(&[&ip]);
        if self == Malformed::Ipv4BadChecksum {
            c = c.wrapping_add(1);
        }
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend_from_slice(&ip);
        f.extend_from_slice(&l4);
        f
    }
}

fn ipv4(proto: u8, total: usize, id: u16) -> [u8; 20] {
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[8] = 64;
    ip[9] = proto;
    ip[12..16].copy_from_slice(&[10, 9, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 9, 0, 2]);
    ip
}

/// UDP header with length field `len` (checksum 0 = none).
fn udp(len: usize) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&4000u16.to_be_bytes());
    u[2..4].copy_from_slice(&4001u16.to_be_bytes());
    u[4..6].copy_from_slice(&(len as u16).to_be_bytes());
    u
}

/// TCP header (20 bytes) with data offset `doff`.
fn tcp(doff: u8) -> Vec<u8> {
    let mut t = vec![0u8; 20];
    t[0..2].copy_from_slice(&4000u16.to_be_bytes());
    t[2..4].copy_from_slice(&4001u16.to_be_bytes());
    t[12] = doff << 4;
    t[13] = 0x10;
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::frame::read_tag;

    #[test]
    fn each_defect_is_where_it_should_be() {
        let (d, s) = (Mac([1; 6]), Mac([2; 6]));
        for m in Malformed::ALL {
            let f = m.build(d, s, 7);
            assert!(read_tag(&f).is_none(), "{m:?} must not look like a generated frame");
            let et = f.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]));
            match m {
                Malformed::Runt => assert!(f.len() < 14),
                Malformed::RandomEthertype => assert_eq!(et, Some(0x1234)),
                Malformed::TruncatedIpv4 => assert!(f.len() < 34),
                Malformed::Ipv6PayloadLenBeyondFrame => {
                    let pl = usize::from(u16::from_be_bytes([f[18], f[19]]));
                    assert!(54 + pl > f.len());
                }
                _ => {
                    assert_eq!(et, Some(0x0800));
                    let ihl = usize::from(f[14] & 0xf) * 4;
                    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
                    let csum_ok = inet_checksum(&[&f[14..34]]) == 0;
                    assert_eq!(csum_ok, m != Malformed::Ipv4BadChecksum, "{m:?}");
                    assert_eq!(ihl < 20, m == Malformed::Ipv4IhlBelow5, "{m:?}");
                    assert_eq!(f[14] >> 4 != 4, m == Malformed::Ipv4WrongVersion, "{m:?}");
                    assert_eq!(14 + total > f.len(), m == Malformed::Ipv4TotalLenBeyondFrame);
                    if m == Malformed::UdpLenInconsistent {
                        let ul = usize::from(u16::from_be_bytes([f[38], f[39]]));
                        assert!(ul > total - 20);
                    }
                    if m == Malformed::TcpDataOffsetBelow5 {
                        assert_eq!(f[46] >> 4, 4);
                    }
                    if matches!(m, Malformed::TruncatedUdp | Malformed::TruncatedTcp) {
                        assert_eq!(14 + total, f.len());
                        assert!(f.len() - 34 < if f[23] == 17 { 8 } else { 20 });
                    }
                }
            }
        }
    }
}
