//! Turning the client's blocked segment into a TCP reset toward the client, in place.
//!
//! RFC 9293 §3.10.7.1 (a segment that must be answered with a reset): "If the incoming
//! segment has an ACK bit set, the reset takes its sequence number from the ACK field of the
//! segment, otherwise the reset has sequence number zero and the ACK field is set to the sum
//! of the sequence number and segment length of the incoming segment." With ACK set, the
//! reset's sequence number is the client's RCV.NXT, which RFC 5961 §3.2 accepts at once.
//!
//! Addresses and ports are swapped, the payload is cut off (the IP length shrinks; the frame
//! is trimmed, padded with zeros to the 60-byte Ethernet minimum where the buffer had that
//! much), TTL / hop limit set to 64, TCP (and IPv4) options overwritten with NOPs so that the
//! header lengths — and so `Parsed`'s offsets — stay as they were, window and urgent pointer
//! zero, both checksums recomputed. IPv6 with extension headers is not rewritten (a routing
//! header would have to be reversed): the caller drops such a segment instead.

use crate::checksum;
use crate::parse::headers::{array, be16, be32, byte, put};
use crate::parse::{IpAddr, Ipv4Header, L3Kind, Parsed};

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;
/// IPv4 and TCP "no operation" option.
const NOP: u8 = 1;
/// The smallest Ethernet frame without FCS.
const MIN_FRAME: usize = 60;

/// Rewrites `frame` (a TCP segment from the client, parsed as `p`) into a reset toward the
/// client. Returns the new frame length; `None` when the segment cannot be rewritten (left
/// unchanged).
pub(super) fn rewrite(frame: &mut [u8], p: &mut Parsed) -> Option<usize> {
    let ip = usize::from(p.l3_offset);
    let l4 = usize::from(p.l4_offset);
    let thl = usize::from(byte(frame, l4 + 12) >> 4) * 4;
    let end = l4 + thl;
    if thl < 20 || end > frame.len() || (p.l3 == L3Kind::Ipv6 && l4 != ip + 40) {
        return None;
    }
    let seq = be32(frame, l4 + 4);
    let ack = be32(frame, l4 + 8);
    let flags = byte(frame, l4 + 13);
    let seg_len = u32::from(p.payload_len) + u32::from(flags & SYN != 0) + u32::from(flags & FIN != 0);
    let (new_seq, new_ack, new_flags) =
        if flags & ACK != 0 { (ack, 0, RST) } else { (0, seq.wrapping_add(seg_len), RST | ACK) };

    // TCP header: swap ports, set the fields, options to NOPs.
    let (sport, dport) = (be16(frame, l4), be16(frame, l4 + 2));
    put(frame, l4, &dport.to_be_bytes());
    put(frame, l4 + 2, &sport.to_be_bytes());
    put(frame, l4 + 4, &new_seq.to_be_bytes());
    put(frame, l4 + 8, &new_ack.to_be_bytes());
    put(frame, l4 + 13, &[new_flags]);
    put(frame, l4 + 14, &[0, 0, 0, 0, 0, 0]); // window, checksum, urgent pointer
    if let Some(opts) = frame.get_mut(l4 + 20..end) {
        opts.fill(NOP);
    }

    let seg_total = (end - l4) as u16;
    let (src, dst) = match p.l3 {
        L3Kind::Ipv4 => {
            let ihl = l4 - ip;
            let (s, d): ([u8; 4], [u8; 4]) = (array(frame, ip + 12), array(frame, ip + 16));
            put(frame, ip + 12, &d);
            put(frame, ip + 16, &s);
            put(frame, ip + 2, &((ihl as u16) + seg_total).to_be_bytes());
            put(frame, ip + 8, &[64]);
            if let Some(opts) = frame.get_mut(ip + 20..l4) {
                opts.fill(NOP);
            }
            let mut h = Ipv4Header::try_new(frame.get_mut(ip..l4)?).ok()?;
            h.fill_checksum();
            let c = checksum::l4_checksum_v4(d, s, crate::parse::PROTO_TCP, frame.get(l4..end)?);
            put(frame, l4 + 16, &c.to_be_bytes());
            (IpAddr::V4(d), IpAddr::V4(s))
        }
        L3Kind::Ipv6 => {
            let (s, d): ([u8; 16], [u8; 16]) = (array(frame, ip + 8), array(frame, ip + 24));
            put(frame, ip + 8, &d);
            put(frame, ip + 24, &s);
            put(frame, ip + 4, &seg_total.to_be_bytes());
            put(frame, ip + 7, &[64]);
            let c = checksum::l4_checksum_v6(&d, &s, crate::parse::PROTO_TCP, frame.get(l4..end)?);
            put(frame, l4 + 16, &c.to_be_bytes());
            (IpAddr::V6(d), IpAddr::V6(s))
        }
    };

    p.l3_len = (end - ip) as u16;
    p.payload_len = 0;
    p.flow.src = src;
    p.flow.dst = dst;
    core::mem::swap(&mut p.flow.src_port, &mut p.flow.dst_port);

    let len = if end < MIN_FRAME && frame.len() >= MIN_FRAME {
        if let Some(pad) = frame.get_mut(end..MIN_FRAME) {
            pad.fill(0);
        }
        MIN_FRAME
    } else {
        end
    };
    Some(len)
}
