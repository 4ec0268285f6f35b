//! The frames the forwarding benches send (shared so that the peer programs can send the
//! same bytes: `benches/peers/l3fwd_hook.h` builds the TCP one).

// Each bench uses some of these.
#![allow(dead_code)]

use cadence_core::checksum;

/// The destination of the TCP frames (the chains' VIP).
pub const VIP: [u8; 4] = [10, 1, 0, 1];

/// A 60-byte IPv4/UDP frame of flow `flow` with a valid header checksum.
pub fn udp60(flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, (flow >> 8) as u8, flow as u8]);
    ip[16..20].copy_from_slice(&[10, 1, 0, 1]);
    let sum = checksum::checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&(1024 + flow).to_be_bytes());
    udp[2..4].copy_from_slice(&4789u16.to_be_bytes());
    udp[4..6].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// A 64-byte IPv4/TCP frame (10 payload bytes, valid checksums) of flow `flow`, to the
/// VIP's port 80 from 10.2.x.y:1024+flow.
pub fn tcp64(flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let src = [10, 2, (flow >> 8) as u8, flow as u8];
    {
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&50u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&VIP);
        let sum = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    {
        let tcp = &mut f[34..54];
        tcp[0..2].copy_from_slice(&(1024 + flow).to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x18; // PSH|ACK
        tcp[14..16].copy_from_slice(&8192u16.to_be_bytes());
    }
    f[54..64].copy_from_slice(b"0123456789");
    let sum = checksum::l4_checksum_v4(src, VIP, 6, &f[34..64]);
    f[50..52].copy_from_slice(&sum.to_be_bytes());
    f
}

/// An IPv4/TCP frame of flow `flow` (from 10.2.x.y:1024+flow to the VIP's port 80) with
/// sequence number `seq`, TCP `flags` and `payload`, valid checksums.
pub fn tcp_segment(flow: u16, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 54 + payload.len()];
    f[0..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let src = [10, 2, (flow >> 8) as u8, flow as u8];
    {
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((40 + payload.len()) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&VIP);
        let sum = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    {
        let tcp = &mut f[34..54];
        tcp[0..2].copy_from_slice(&(1024 + flow).to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[8..12].copy_from_slice(&1u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = flags;
        tcp[14..16].copy_from_slice(&8192u16.to_be_bytes());
    }
    f[54..].copy_from_slice(payload);
    let sum = checksum::l4_checksum_v4(src, VIP, 6, &f[34..]);
    f[50..52].copy_from_slice(&sum.to_be_bytes());
    f
}

/// A frame carrying flow `k` (IPv4 or IPv6; TCP with a 20-byte header, UDP, or another
/// protocol with 8 bytes after the IP header, which carry no ports), valid checksums, so that
/// the parser gives back `k` (ports 0 for a protocol without them).
pub fn of_flow(k: &cadence_core::parse::FlowKey) -> Vec<u8> {
    use cadence_core::parse::IpAddr;
    let l4_len = if k.proto == 6 { 20 } else { 8 };
    let mut l4 = vec![0u8; l4_len];
    if matches!(k.proto, 6 | 17) {
        l4[0..2].copy_from_slice(&k.src_port.to_be_bytes());
        l4[2..4].copy_from_slice(&k.dst_port.to_be_bytes());
    }
    if k.proto == 6 {
        l4[12] = 5 << 4;
        l4[13] = 0x10; // ACK
        l4[14..16].copy_from_slice(&8192u16.to_be_bytes());
    } else if k.proto == 17 {
        l4[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
    }
    let mut f = vec![0u8; 14];
    f[0..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    match (k.src, k.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            if matches!(k.proto, 6 | 17) {
                let sum = checksum::l4_checksum_v4(s, d, k.proto, &l4);
                let at = if k.proto == 6 { 16 } else { 6 };
                l4[at..at + 2].copy_from_slice(&sum.to_be_bytes());
            }
            f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let mut ip = [0u8; 20];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&((20 + l4_len) as u16).to_be_bytes());
            ip[8] = 64;
            ip[9] = k.proto;
            ip[12..16].copy_from_slice(&s);
            ip[16..20].copy_from_slice(&d);
            let sum = checksum::checksum(&ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            f.extend_from_slice(&ip);
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            if matches!(k.proto, 6 | 17) {
                let sum = checksum::l4_checksum_v6(&s, &d, k.proto, &l4);
                let at = if k.proto == 6 { 16 } else { 6 };
                l4[at..at + 2].copy_from_slice(&sum.to_be_bytes());
            }
            f[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
            let mut ip = [0u8; 40];
            ip[0] = 0x60;
            ip[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            ip[6] = k.proto;
            ip[7] = 64;
            ip[8..24].copy_from_slice(&s);
            ip[24..40].copy_from_slice(&d);
            f.extend_from_slice(&ip);
        }
        _ => {}
    }
    f.extend_from_slice(&l4);
    f.resize(f.len().max(60), 0);
    f
}
