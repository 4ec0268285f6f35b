//! Test frames: flows, the frame builder and the tag that every generated frame carries.
//!
//! A generated frame is Ethernet + IPv4/IPv6 + UDP/TCP + filler + an 18-byte tag at the
//! very end (so the sink finds it without parsing):
//!
//! | bytes | field |
//! |---|---|
//! | 2 | magic `0xCADE` |
//! | 2 | flow id |
//! | 4 | per-flow sequence number |
//! | 6 | host monotonic TX timestamp, ns since the run's epoch (48 bit: 78 h) |
//! | 4 | CRC32 of the frame from byte 12 (after the MACs, which the forwarder rewrites) up to the CRC, skipping the L4 checksum field |
//!
//! The L4 checksum is computed last, over the finished segment, so every checksum in the
//! frame is right. Everything in a frame is a pure function of (flow, seq, length,
//! timestamp), so the sink rebuilds the expected frame and compares it byte for byte.
//!
//! # HTTP flows
//!
//! A TCP flow with [`Flow::http`] set carries an HTTP request head at the start of every
//! segment's payload, right after the TCP header and before the tag:
//! `GET <path> HTTP/1.1\r\nHost: <host>\r\n\r\n` + tag. Its frames all have one length,
//! [`Flow::min_len`] (a requested length is ignored), and its TCP sequence numbers advance
//! by that payload length: segment `seq` starts at [`HTTP_ISN`] + `seq` × payload length
//! (wrapping), so a reassembler sees one stream — the head, tag 0, the head, tag 1, … — that
//! opens with a complete request head whichever segment it picks the stream up from. No SYN
//! is sent: a middlebox picks the connection up mid-stream. Other flows are unchanged: their
//! TCP sequence number is the frame's sequence number and their payload is filler.
//!
//! Sizes are Ethernet frames without the FCS: "64 B" on the wire is a 60-byte frame
//! here. A flow's smallest frame is its headers plus the tag, at least 60 B: 60 for
//! IPv4/UDP, 72 for IPv4/TCP, 80 for IPv6/UDP, 92 for IPv6/TCP ([`FlowKind::min_len`]);
//! smaller requested sizes are raised to that.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::protocol::Mac;

/// Magic at the start of the tag.
pub const TAG_MAGIC: u16 = 0xCADE;
/// Length of the tag.
pub const TAG_LEN: usize = 18;
/// Largest frame (without FCS).
pub const MAX_FRAME: usize = 1514;
/// Smallest Ethernet frame without FCS.
pub const MIN_FRAME: usize = 60;
/// Mask of the 48-bit timestamp.
pub const TS_MASK: u64 = (1 << 48) - 1;

/// TCP sequence number of an HTTP flow's first segment (near the wrap, so that a few
/// hundred segments cross it).
pub const HTTP_ISN: u32 = 0xFFFF_C000;

/// Network and transport layer of a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum FlowKind {
    Ipv4Udp,
    Ipv4Tcp,
    Ipv6Udp,
    Ipv6Tcp,
}

impl FlowKind {
    /// Every kind, in the order flows cycle through them.
    pub const ALL: [FlowKind; 4] = [FlowKind::Ipv4Udp, FlowKind::Ipv4Tcp, FlowKind::Ipv6Udp, FlowKind::Ipv6Tcp];

    /// IP header length.
    pub const fn l3_len(self) -> usize {
        match self {
            FlowKind::Ipv4Udp | FlowKind::Ipv4Tcp => 20,
            FlowKind::Ipv6Udp | FlowKind::Ipv6Tcp => 40,
        }
    }

    /// Transport header length.
    pub const fn l4_len(self) -> usize {
        match self {
            FlowKind::Ipv4Udp | FlowKind::Ipv6Udp => 8,
            FlowKind::Ipv4Tcp | FlowKind::Ipv6Tcp => 20,
        }
    }

    /// IP protocol number.
    pub const fn proto(self) -> u8 {
        match self {
            FlowKind::Ipv4Udp | FlowKind::Ipv6Udp => 17,
            FlowKind::Ipv4Tcp | FlowKind::Ipv6Tcp => 6,
        }
    }

    /// Whether it is IPv6.
    pub const fn is_v6(self) -> bool {
        matches!(self, FlowKind::Ipv6Udp | FlowKind::Ipv6Tcp)
    }

    /// Offset of the L4 checksum field in the frame.
    pub const fn l4_checksum_offset(self) -> usize {
        14 + self.l3_len()
            + match self.proto() {
                17 => 6,
                _ => 16,
            }
    }

    /// Smallest frame of this kind: headers + tag, at least [`MIN_FRAME`].
    pub const fn min_len(self) -> usize {
        let n = 14 + self.l3_len() + self.l4_len() + TAG_LEN;
        if n < MIN_FRAME { MIN_FRAME } else { n }
    }

    /// Short name (`v4-udp`, …).
    pub const fn name(self) -> &'static str {
        match self {
            FlowKind::Ipv4Udp => "v4-udp",
            FlowKind::Ipv4Tcp => "v4-tcp",
            FlowKind::Ipv6Udp => "v6-udp",
            FlowKind::Ipv6Tcp => "v6-tcp",
        }
    }
}

/// One flow: a 5-tuple that enters the forwarder on `ingress` and must leave on the other
/// port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Flow {
    pub id: u16,
    pub kind: FlowKind,
    /// Port (0 or 1) the flow is sent into.
    pub ingress: usize,
    pub src_port: u16,
    pub dst_port: u16,
    /// TCP only: every segment opens with this HTTP request head (module docs).
    pub http: Option<HttpRequest>,
}

/// The HTTP request an HTTP flow's segments carry: `GET <path> HTTP/1.1` with
/// `Host: <host>` (written as given: case, port and all).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct HttpRequest {
    /// The Host header's value.
    pub host: String,
    /// The request target (origin-form, starting with `/`).
    pub path: String,
}

impl HttpRequest {
    /// The request head, up to and including the empty line.
    pub fn head(&self) -> Vec<u8> {
        format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", self.path, self.host).into_bytes()
    }
}

impl Flow {
    /// The standard flow `id`: kinds cycle v4-udp, v4-tcp, v6-udp, v6-tcp; ingress
    /// alternates every four flows so each kind goes both ways (0,0,0,0,1,1,1,1,…).
    pub fn standard(id: u16) -> Flow {
        Flow {
            id,
            kind: FlowKind::ALL[usize::from(id) % 4],
            ingress: usize::from(id / 4) % 2,
            src_port: 10_000 + id,
            dst_port: 20_000 + id,
            http: None,
        }
    }

    /// This flow carrying an HTTP request to `host` for `path` in every segment (TCP flows
    /// only; a UDP flow is returned unchanged).
    pub fn with_http(mut self, host: &str, path: &str) -> Flow {
        if self.kind.proto() == 6 {
            self.http = Some(HttpRequest { host: host.into(), path: path.into() });
        }
        self
    }

    /// The request head every segment carries (empty: not an HTTP flow).
    pub fn http_head(&self) -> Vec<u8> {
        match &self.http {
            Some(h) if self.kind.proto() == 6 => h.head(),
            _ => Vec::new(),
        }
    }

    /// The flow's smallest frame: the kind's ([`FlowKind::min_len`]), plus the request head
    /// for an HTTP flow, whose frames all have this length.
    pub fn min_len(&self) -> usize {
        let head = self.http_head().len();
        if head == 0 { self.kind.min_len() } else { (self.kind.min_len() + head).min(MAX_FRAME) }
    }

    /// The TCP sequence number of segment `seq`.
    pub fn tcp_seq(&self, seq: u32) -> u32 {
        let head = self.http_head().len();
        if head == 0 {
            seq
        } else {
            let payload = (self.min_len() - 14 - self.kind.l3_len() - self.kind.l4_len()) as u32;
            HTTP_ISN.wrapping_add(seq.wrapping_mul(payload))
        }
    }

    /// `n` standard flows.
    pub fn standard_set(n: u16) -> Vec<Flow> {
        (0..n).map(Flow::standard).collect()
    }

    /// Egress port.
    pub fn egress(&self) -> usize {
        1 - self.ingress
    }

    /// Source and destination address of the flow's frames.
    pub fn addrs(&self) -> (std::net::IpAddr, std::net::IpAddr) {
        if self.kind.is_v6() {
            let (s, d) = self.v6_addrs();
            (s.into(), d.into())
        } else {
            let (s, d) = self.v4_addrs();
            (s.into(), d.into())
        }
    }

    fn v4_addrs(&self) -> (Ipv4Addr, Ipv4Addr) {
        let [hi, lo] = self.id.to_be_bytes();
        let side = self.ingress as u8;
        (Ipv4Addr::new(10, side, hi, lo), Ipv4Addr::new(10, 1 - side + 100, hi, lo))
    }

    fn v6_addrs(&self) -> (Ipv6Addr, Ipv6Addr) {
        let side = self.ingress as u16;
        (
            Ipv6Addr::new(0xfd00, 0xcade, side, 0, 0, 0, 0, self.id),
            Ipv6Addr::new(0xfd00, 0xcade, 100 + (1 - side), 0, 0, 0, 0, self.id),
        )
    }
}

/// What is inside a generated frame's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    pub flow: u16,
    pub seq: u32,
    /// ns since the run's epoch, 48 bits.
    pub ts_ns: u64,
    pub crc: u32,
}

/// Reads the tag at the end of a frame; `None` when too short or the magic is wrong.
pub fn read_tag(frame: &[u8]) -> Option<Tag> {
    let t = frame.get(frame.len().checked_sub(TAG_LEN)?..)?;
    if u16::from_be_bytes([t[0], t[1]]) != TAG_MAGIC {
        return None;
    }
    let mut ts = [0u8; 8];
    ts[2..].copy_from_slice(&t[8..14]);
    Some(Tag {
        flow: u16::from_be_bytes([t[2], t[3]]),
        seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        ts_ns: u64::from_be_bytes(ts),
        crc: u32::from_be_bytes([t[14], t[15], t[16], t[17]]),
    })
}

/// The CRC a frame of `kind` should carry: bytes 12..len-4, without the L4 checksum.
/// `None` when the frame is too short for the kind.
pub fn frame_crc(kind: FlowKind, frame: &[u8]) -> Option<u32> {
    let cs = kind.l4_checksum_offset();
    let end = frame.len().checked_sub(4)?;
    if end < cs + 2 {
        return None;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&frame[12..cs]);
    h.update(&frame[cs + 2..end]);
    Some(h.finalize())
}

/// RFC 1071 Internet checksum of `chunks` taken as one byte string (each chunk but the
/// last must have even length). Independent of `cadence-core` on purpose: this is the
/// oracle the firmware is checked against.
pub fn inet_checksum(chunks: &[&[u8]]) -> u16 {
    let mut sum: u64 = 0;
    for c in chunks {
        let mut it = c.chunks_exact(2);
        for w in &mut it {
            sum += u64::from(u16::from_be_bytes([w[0], w[1]]));
        }
        if let [b] = it.remainder() {
            sum += u64::from(*b) << 8;
        }
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// Builds the frame `seq` of `flow`, `len` bytes long (clamped to the flow's
/// [`Flow::min_len`]..=[`MAX_FRAME`]; an HTTP flow's frames are always [`Flow::min_len`]
/// long), as sent into the forwarder: dst = `dst` (the ingress NIC), src = `src` (the host
/// side of the ingress port).
pub fn build(flow: &Flow, seq: u32, len: usize, ts_ns: u64, dst: Mac, src: Mac) -> Vec<u8> {
    let kind = flow.kind;
    let head = flow.http_head();
    let len = if head.is_empty() { len.clamp(kind.min_len(), MAX_FRAME) } else { flow.min_len() };
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&dst.0);
    f[6..12].copy_from_slice(&src.0);
    let l3 = 14;
    let l4 = l3 + kind.l3_len();
    let l4_total = len - l4;
    if kind.is_v6() {
        f[12..14].copy_from_slice(&0x86DDu16.to_be_bytes());
        let (s, d) = flow.v6_addrs();
        // version 6, traffic class 0, flow label = flow id
        f[l3..l3 + 4].copy_from_slice(&(0x6000_0000u32 | u32::from(flow.id)).to_be_bytes());
        f[l3 + 4..l3 + 6].copy_from_slice(&(l4_total as u16).to_be_bytes());
        f[l3 + 6] = kind.proto();
        f[l3 + 7] = 64;
        f[l3 + 8..l3 + 24].copy_from_slice(&s.octets());
        f[l3 + 24..l3 + 40].copy_from_slice(&d.octets());
    } else {
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let (s, d) = flow.v4_addrs();
        f[l3] = 0x45;
        f[l3 + 2..l3 + 4].copy_from_slice(&((len - l3) as u16).to_be_bytes());
        f[l3 + 4..l3 + 6].copy_from_slice(&(seq as u16).to_be_bytes()); // identification
        f[l3 + 6] = 0x40; // DF
        f[l3 + 8] = 64;
        f[l3 + 9] = kind.proto();
        f[l3 + 12..l3 + 16].copy_from_slice(&s.octets());
        f[l3 + 16..l3 + 20].copy_from_slice(&d.octets());
        let c = inet_checksum(&[&f[l3..l4]]);
        f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
    }
    f[l4..l4 + 2].copy_from_slice(&flow.src_port.to_be_bytes());
    f[l4 + 2..l4 + 4].copy_from_slice(&flow.dst_port.to_be_bytes());
    if kind.proto() == 17 {
        f[l4 + 4..l4 + 6].copy_from_slice(&(l4_total as u16).to_be_bytes());
    } else {
        f[l4 + 4..l4 + 8].copy_from_slice(&flow.tcp_seq(seq).to_be_bytes()); // TCP sequence number
        f[l4 + 12] = 5 << 4; // data offset 5
        f[l4 + 13] = 0x18; // PSH | ACK
        f[l4 + 14..l4 + 16].copy_from_slice(&0xFFFFu16.to_be_bytes());
    }
    let tag = len - TAG_LEN;
    let payload = l4 + kind.l4_len();
    for (i, b) in f[payload..tag].iter_mut().enumerate() {
        *b = match head.get(i) {
            Some(&h) => h,
            None => (seq as usize).wrapping_mul(31).wrapping_add(usize::from(flow.id) * 7).wrapping_add(i) as u8,
        };
    }
    f[tag..tag + 2].copy_from_slice(&TAG_MAGIC.to_be_bytes());
    f[tag + 2..tag + 4].copy_from_slice(&flow.id.to_be_bytes());
    f[tag + 4..tag + 8].copy_from_slice(&seq.to_be_bytes());
    f[tag + 8..tag + 14].copy_from_slice(&(ts_ns & TS_MASK).to_be_bytes()[2..]);
    let crc = frame_crc(kind, &f).unwrap_or(0);
    f[tag + 14..tag + 18].copy_from_slice(&crc.to_be_bytes());
    // L4 checksum last, over the pseudo-header and the finished segment.
    let proto_len = [0, kind.proto()];
    let seg_len = (l4_total as u32).to_be_bytes();
    let c = if kind.is_v6() {
        inet_checksum(&[&f[l3 + 8..l3 + 40], &seg_len, &[0, 0, 0, kind.proto()], &f[l4..]])
    } else {
        inet_checksum(&[&f[l3 + 12..l3 + 20], &proto_len, &seg_len[2..], &f[l4..]])
    };
    // UDP: a computed 0 is sent as 0xFFFF (RFC 768).
    let c = if c == 0 && kind.proto() == 17 { 0xFFFF } else { c };
    let cs = kind.l4_checksum_offset();
    f[cs..cs + 2].copy_from_slice(&c.to_be_bytes());
    f
}

/// Whether the IPv4 header checksum of a frame of `kind` is right (always true for IPv6).
pub fn ipv4_checksum_ok(kind: FlowKind, f: &[u8]) -> bool {
    kind.is_v6() || f.get(14..34).is_some_and(|h| inet_checksum(&[h]) == 0)
}

/// Verifies the L4 checksum of a frame built by [`build`] (a self-check of the builder).
pub fn l4_checksum_ok(kind: FlowKind, f: &[u8]) -> bool {
    let l3 = 14;
    let l4 = l3 + kind.l3_len();
    let seg_len = ((f.len() - l4) as u32).to_be_bytes();
    let sum = if kind.is_v6() {
        inet_checksum(&[&f[l3 + 8..l3 + 40], &seg_len, &[0, 0, 0, kind.proto()], &f[l4..]])
    } else {
        inet_checksum(&[&f[l3 + 12..l3 + 20], &[0, kind.proto()], &seg_len[2..], &f[l4..]])
    };
    sum == 0 || (sum == 0xFFFF && kind.proto() == 17)
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Mac = Mac([0x52, 0x54, 0, 0xca, 0xde, 0]);
    const S: Mac = Mac([2, 0, 0, 0xca, 0xde, 0x10]);

    /// A digest of standard frames as generated before HTTP flows existed: adding per-flow
    /// options must not change a byte of them.
    #[test]
    fn standard_frames_unchanged() {
        let mut h = crc32fast::Hasher::new();
        for id in 0..16u16 {
            let flow = Flow::standard(id);
            for (seq, len) in [(0u32, 0usize), (1, 60), (2, 99), (7, 577), (300, 1514), (70_000, 1000)] {
                h.update(&build(&flow, seq, len, 0x0102_0304_0506 + u64::from(seq), D, S));
            }
        }
        assert_eq!(h.finalize(), 0xda83_1a16);
    }

    #[test]
    fn http_flows_carry_the_head_in_one_stream() {
        for id in [1u16, 3] {
            let flow = Flow::standard(id).with_http("Example.COM:8080", "/forbidden/x");
            let head = b"GET /forbidden/x HTTP/1.1\r\nHost: Example.COM:8080\r\n\r\n";
            assert_eq!(flow.http_head(), head);
            assert_eq!(flow.min_len(), flow.kind.min_len() + head.len());
            let payload_at = 14 + flow.kind.l3_len() + 20;
            let payload = (flow.min_len() - payload_at) as u32;
            let mut next = HTTP_ISN;
            for seq in 0..400u32 {
                // Any requested length: always the flow's one length.
                let f = build(&flow, seq, 60 + seq as usize * 3, 77, D, S);
                assert_eq!(f.len(), flow.min_len());
                assert_eq!(&f[payload_at..payload_at + head.len()], head);
                let tcp_seq = u32::from_be_bytes(f[payload_at - 16..payload_at - 12].try_into().expect("4 bytes"));
                assert_eq!(tcp_seq, next, "segment {seq}");
                next = next.wrapping_add(payload);
                let tag = read_tag(&f).expect("tag");
                assert_eq!((tag.flow, tag.seq), (id, seq));
                assert_eq!(frame_crc(flow.kind, &f), Some(tag.crc));
                assert!(l4_checksum_ok(flow.kind, &f));
                assert!(ipv4_checksum_ok(flow.kind, &f));
            }
            assert!(next < HTTP_ISN, "the sequence numbers wrapped");
        }
        // UDP flows take no request.
        assert_eq!(Flow::standard(0).with_http("h", "/"), Flow::standard(0));
    }

    #[test]
    fn min_lengths() {
        assert_eq!(FlowKind::Ipv4Udp.min_len(), 60);
        assert_eq!(FlowKind::Ipv4Tcp.min_len(), 72);
        assert_eq!(FlowKind::Ipv6Udp.min_len(), 80);
        assert_eq!(FlowKind::Ipv6Tcp.min_len(), 92);
    }

    #[test]
    fn frames_round_trip_with_valid_checksums() {
        for id in 0..8u16 {
            let flow = Flow::standard(id);
            for len in [0, 60, 61, 64, 100, 577, 1513, 1514, 4000] {
                let f = build(&flow, 0xdead_0000 + u32::from(id), len, 0x1234_5678_9abc, D, S);
                assert_eq!(f.len(), len.clamp(flow.kind.min_len(), MAX_FRAME));
                let tag = read_tag(&f).expect("tag");
                assert_eq!(tag.flow, id);
                assert_eq!(tag.seq, 0xdead_0000 + u32::from(id));
                assert_eq!(tag.ts_ns, 0x1234_5678_9abc);
                assert_eq!(frame_crc(flow.kind, &f), Some(tag.crc));
                assert!(l4_checksum_ok(flow.kind, &f), "{:?} len {len}", flow.kind);
                if !flow.kind.is_v6() {
                    assert_eq!(inet_checksum(&[&f[14..34]]), 0, "IPv4 header checksum");
                    assert_eq!(usize::from(u16::from_be_bytes([f[16], f[17]])), f.len() - 14);
                } else {
                    assert_eq!(usize::from(u16::from_be_bytes([f[18], f[19]])), f.len() - 54);
                }
            }
        }
    }

    #[test]
    fn crc_ignores_macs_but_not_payload() {
        let flow = Flow::standard(2);
        let mut f = build(&flow, 7, 300, 1, D, S);
        let crc = read_tag(&f).expect("tag").crc;
        f[0] ^= 0xff;
        f[11] ^= 0xff;
        assert_eq!(frame_crc(flow.kind, &f), Some(crc));
        f[100] ^= 1;
        assert_ne!(frame_crc(flow.kind, &f), Some(crc));
    }

    #[test]
    fn inet_checksum_rfc1071_example() {
        // RFC 1071 §3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        assert_eq!(inet_checksum(&[&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]]), !0xddf2);
        assert_eq!(inet_checksum(&[&[0x00, 0x01], &[0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]]), !0xddf2);
    }

    #[test]
    fn flows_cover_kinds_and_both_directions() {
        let flows = Flow::standard_set(8);
        for k in FlowKind::ALL {
            for p in 0..2 {
                assert!(flows.iter().any(|f| f.kind == k && f.ingress == p), "{k:?} port {p}");
            }
        }
    }
}
