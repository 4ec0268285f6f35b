//! Address and port rewrites with incremental checksum updates (RFC 1624 eqn. 3), shared by
//! the load balancer (destination) and NAT (source, destination).
//!
//! IPv4: the header checksum follows the address (RFC 791); TCP and UDP checksums follow the
//! address through the pseudo-header (RFC 793 §3.1, RFC 768) and the port directly. A UDP
//! checksum of 0 over IPv4 means "no checksum" and stays 0; an updated UDP checksum that comes
//! out 0 is sent as 0xFFFF (RFC 768: "If the computed checksum is zero, it is transmitted as all
//! ones"). IPv6 has no header checksum; TCP/UDP checksums follow the address the same way.
//! A non-first fragment has no transport header: only the address changes (its datagram's
//! checksum lives in the first fragment, which gets the same pseudo-header update).

use crate::checksum::{update_bytes, update16, update32};
use crate::parse::{Fragment, L3Kind, L4Kind, Parsed};

/// Which endpoint of a packet to rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Side {
    /// The source address and port.
    Src,
    /// The destination address and port.
    Dst,
}

fn be16(f: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(f.get(at..at + 2)?.try_into().ok()?))
}

fn put16(f: &mut [u8], at: usize, v: u16) -> Option<()> {
    f.get_mut(at..at + 2)?.copy_from_slice(&v.to_be_bytes());
    Some(())
}

/// Rewrites one endpoint of a parsed packet to `addr` (4 bytes for IPv4, 16 for IPv6; it must
/// be of the packet's family) and, if given, `port` (TCP/UDP only). Returns `None` (and may
/// have changed nothing) if the frame does not hold what `parsed` says.
pub(crate) fn rewrite(frame: &mut [u8], p: &Parsed, side: Side, addr: &[u8], port: Option<u16>) -> Option<()> {
    let l3 = usize::from(p.l3_offset);
    let l4 = usize::from(p.l4_offset);
    let (at, len) = match (p.l3, side) {
        (L3Kind::Ipv4, Side::Src) => (l3 + 12, 4),
        (L3Kind::Ipv4, Side::Dst) => (l3 + 16, 4),
        (L3Kind::Ipv6, Side::Src) => (l3 + 8, 16),
        (L3Kind::Ipv6, Side::Dst) => (l3 + 24, 16),
    };
    if addr.len() != len {
        return None;
    }
    let mut old = [0u8; 16];
    let old = old.get_mut(..len)?;
    old.copy_from_slice(frame.get(at..at + len)?);
    // The transport checksum and port, when the packet carries the transport header.
    // (checksum offset, UDP, covers the addresses through a pseudo-header).
    let l4_ck = match (p.l4, p.fragment) {
        (_, Fragment::Later) => None,
        (L4Kind::Tcp, _) => Some((l4 + 16, false, true)),
        (L4Kind::Udp, _) => Some((l4 + 6, true, true)),
        // ICMPv4: the checksum covers the message only; `port` is an echo identifier.
        (L4Kind::Icmp, _) => Some((l4 + 2, false, false)),
        _ => None,
    };
    let port_at = match p.l4 {
        L4Kind::Icmp => l4 + 4,
        _ => l4 + if side == Side::Src { 0 } else { 2 },
    };
    if let Some((ck_at, udp, pseudo)) = l4_ck {
        let mut c = be16(frame, ck_at)?;
        let old_port = be16(frame, port_at)?;
        let none = udp && c == 0 && p.l3 == L3Kind::Ipv4;
        if !none {
            if pseudo {
                c = update_bytes(c, old, addr);
            }
            if let Some(np) = port {
                c = update16(c, old_port, np);
            }
            if udp && c == 0 {
                c = 0xFFFF;
            }
            put16(frame, ck_at, c)?;
        }
        if let Some(np) = port {
            put16(frame, port_at, np)?;
        }
    }
    if p.l3 == L3Kind::Ipv4 {
        let (o, n) = (u32::from_be_bytes(old.try_into().ok()?), u32::from_be_bytes(addr.try_into().ok()?));
        let c = update32(be16(frame, l3 + 10)?, o, n);
        put16(frame, l3 + 10, c)?;
    }
    frame.get_mut(at..at + len)?.copy_from_slice(addr);
    Some(())
}
