//! Frame builders for the unit tests: well-formed frames that tests then break.

use crate::checksum;
use crate::control::{CONTROL_ETHERTYPE, CONTROL_MAGIC};
use crate::parse::{ETHERTYPE_IPV4, ETHERTYPE_IPV6, PROTO_TCP, PROTO_UDP};

pub const DST: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0x10];
pub const SRC: [u8; 6] = [0x52, 0x54, 0, 0, 0, 0x20];
pub const A4: [u8; 4] = [10, 0, 0, 1];
pub const B4: [u8; 4] = [10, 0, 0, 2];
pub const A6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
pub const B6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

/// Ethernet header, tags `(tpid, tci)`, EtherType, then `payload`.
pub fn eth(vlans: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    for &(tpid, tci) in vlans {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// IPv4 header with `options` and the flags/fragment-offset field `frag`, valid
/// checksum, then `payload`.
pub fn ipv4_with(proto: u8, options: &[u8], frag: u16, payload: &[u8]) -> Vec<u8> {
    let hlen = 20 + options.len();
    let total = (hlen + payload.len()) as u16;
    let mut h = vec![0x40 | (hlen / 4) as u8, 0];
    h.extend_from_slice(&total.to_be_bytes());
    h.extend_from_slice(&[0x12, 0x34]);
    h.extend_from_slice(&frag.to_be_bytes());
    h.extend_from_slice(&[64, proto, 0, 0]);
    h.extend_from_slice(&A4);
    h.extend_from_slice(&B4);
    h.extend_from_slice(options);
    let c = checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend_from_slice(payload);
    h
}

/// IPv4 header (no options, not fragmented), then `payload`.
pub fn ipv4(proto: u8, payload: &[u8]) -> Vec<u8> {
    ipv4_with(proto, &[], 0x4000, payload)
}

/// IPv6 header with next header `next`, then `payload`.
pub fn ipv6(next: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[next, 64]);
    h.extend_from_slice(&A6);
    h.extend_from_slice(&B6);
    h.extend_from_slice(payload);
    h
}

/// A generic IPv6 extension header of `units` 8-byte units after the first 8.
pub fn ext(next: u8, units: u8) -> Vec<u8> {
    let mut e = vec![next, units];
    e.resize(8 * (usize::from(units) + 1), 0);
    e
}

/// An IPv6 Fragment header.
pub fn frag6(next: u8, offset_units: u16, more: bool) -> Vec<u8> {
    let field = (offset_units << 3) | u16::from(more);
    let mut e = vec![next, 0];
    e.extend_from_slice(&field.to_be_bytes());
    e.extend_from_slice(&[0, 0, 0, 7]);
    e
}

/// A TCP segment with a 20-byte header.
pub fn tcp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(&sp.to_be_bytes());
    t.extend_from_slice(&dp.to_be_bytes());
    t.extend_from_slice(&1u32.to_be_bytes());
    t.extend_from_slice(&0u32.to_be_bytes());
    t.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    t.extend_from_slice(payload);
    t
}

/// A UDP datagram whose length field covers `payload`.
pub fn udp(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    let mut u = Vec::new();
    u.extend_from_slice(&sp.to_be_bytes());
    u.extend_from_slice(&dp.to_be_bytes());
    u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    u.extend_from_slice(&[0, 0]);
    u.extend_from_slice(payload);
    u
}

/// An ICMP echo request (8-byte header) with `payload`.
pub fn icmp_echo(payload: &[u8]) -> Vec<u8> {
    let mut m = vec![8, 0, 0, 0, 0, 1, 0, 1];
    m.extend_from_slice(payload);
    m
}

/// Ethernet + IPv4 + UDP with `payload`.
pub fn udp4(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    eth(&[], ETHERTYPE_IPV4, &ipv4(PROTO_UDP, &udp(sp, dp, payload)))
}

/// Ethernet + IPv4 + TCP with `payload`.
pub fn tcp4(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    eth(&[], ETHERTYPE_IPV4, &ipv4(PROTO_TCP, &tcp(sp, dp, payload)))
}

/// Ethernet + IPv6 + TCP with `payload`.
pub fn tcp6(sp: u16, dp: u16, payload: &[u8]) -> Vec<u8> {
    eth(&[], ETHERTYPE_IPV6, &ipv6(PROTO_TCP, &tcp(sp, dp, payload)))
}

/// A control frame carrying command byte `cmd`.
pub fn control(cmd: u8) -> Vec<u8> {
    use core::sync::atomic::{AtomicU64, Ordering};
    // One counter for every test frame: frames built later have higher counters.
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let counter = COUNTER.fetch_add(1, Ordering::Relaxed);
    match crate::control::Command::from_bytes(&[cmd, 0, 0]) {
        Some((c, _)) => eth(&[], CONTROL_ETHERTYPE, &crate::control::signed_payload(&CTL_KEY, CTL_NONCE, counter, c)),
        // An unknown command byte: the right shape otherwise, so only the byte is wrong.
        None => {
            let mut p = CONTROL_MAGIC.to_vec();
            p.extend_from_slice(&CTL_NONCE.to_be_bytes());
            p.extend_from_slice(&counter.to_be_bytes());
            p.push(cmd);
            p.extend_from_slice(&[0; 8]);
            eth(&[], CONTROL_ETHERTYPE, &p)
        }
    }
}

/// The control key of the test frames.
pub const CTL_KEY: [u8; 16] = *b"cadence-test-key";

/// The boot nonce of the test frames.
pub const CTL_NONCE: u64 = 0x5eed_0000_0000_0001;

/// Control accepted on `port` under [`CTL_KEY`] (a fresh counter).
pub fn ctl_on(port: usize) -> Option<crate::control::ControlAuth> {
    Some(crate::control::ControlAuth::new(port, CTL_KEY, CTL_NONCE))
}
