//! IPFIX export of flow records (RFC 7011 protocol, RFC 7012 information elements) over UDP.
//!
//! One export frame is Ethernet / IPv4 / UDP / one IPFIX message:
//!
//! ```text
//! message header (16): version 10 | length | export time | sequence number | observation domain
//! [template set (set id 2): template 256 (IPv4 flows) and 257 (IPv6 flows)]   every TEMPLATE_EVERY messages
//! data set 256: IPv4 records | data set 257: IPv6 records
//! ```
//!
//! Records carry the 5-tuple, `packetDeltaCount` (IE 2) and `octetDeltaCount` (IE 1): the
//! packets and IP bytes of one flow between its first packet and its expiry. Over UDP the
//! templates must be resent (RFC 7011 §8.4): every [`TEMPLATE_EVERY`]th message of each
//! exporter carries them, the first one included. The sequence number counts data records
//! sent before the message (RFC 7011 §3.1), shared by every worker's exporter.

use super::FlowRecord;
use crate::checksum;
use crate::parse::IpAddr;

/// IPFIX's version number.
pub const VERSION: u16 = 10;
/// Template id of IPv4 flow records.
pub const TEMPLATE_V4: u16 = 256;
/// Template id of IPv6 flow records.
pub const TEMPLATE_V6: u16 = 257;
/// A message carries the templates once in this many messages (and the first).
pub const TEMPLATE_EVERY: u32 = 32;
/// Records in one message at most (keeps a frame under 1514 bytes with IPv6 records).
pub const MAX_RECORDS: usize = 24;
/// Bytes of Ethernet + IPv4 + UDP headers in front of the message.
pub const L2_L4: usize = 14 + 20 + 8;

/// `(information element id, length)` of the IPv4 template.
const FIELDS_V4: [(u16, u16); 7] = [(8, 4), (12, 4), (7, 2), (11, 2), (4, 1), (2, 8), (1, 8)];
/// `(information element id, length)` of the IPv6 template.
const FIELDS_V6: [(u16, u16); 7] = [(27, 16), (28, 16), (7, 2), (11, 2), (4, 1), (2, 8), (1, 8)];
/// Bytes of one IPv4 / IPv6 data record.
const RECORD_V4: usize = 4 + 4 + 2 + 2 + 1 + 8 + 8;
const RECORD_V6: usize = 16 + 16 + 2 + 2 + 1 + 8 + 8;

/// Where export messages go (`accounting.export=ipfix:PORT:IP:UDPPORT` in the chain config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct IpfixExport {
    /// The dataplane port the messages leave by.
    pub port: u8,
    /// The collector's IPv4 address.
    pub collector: [u8; 4],
    /// The collector's UDP port (4739 is IPFIX's).
    pub udp_port: u16,
    /// The exporter's source IPv4 address (`accounting.export_src`, default 192.0.2.1).
    pub source: [u8; 4],
    /// The observation domain id.
    pub domain: u32,
}

impl IpfixExport {
    /// The default exporter address (TEST-NET-1).
    pub const DEFAULT_SOURCE: [u8; 4] = [192, 0, 2, 1];
    /// The exporter's UDP source port.
    pub const SOURCE_PORT: u16 = 4739;
}

/// What one message holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message {
    /// Data records before this message (the header's sequence number).
    pub sequence: u32,
    /// Seconds for the header's export time (a clock of the exporter's).
    pub export_time: u32,
    /// Whether the template set goes in front.
    pub templates: bool,
}

/// Writes the Ethernet/IPv4/UDP frame carrying one IPFIX message with `records` into `buf`
/// (the MACs are left zero: the chain's egress writes them). Returns the frame's length, or
/// `None` if `buf` is too small or there are more than [`MAX_RECORDS`] records.
pub fn build(buf: &mut [u8], exp: &IpfixExport, msg: &Message, records: &[FlowRecord]) -> Option<usize> {
    if records.len() > MAX_RECORDS {
        return None;
    }
    let mut w = Writer { buf, at: L2_L4 };
    // Message header; the length is patched at the end.
    w.u16(VERSION)?;
    w.u16(0)?;
    w.u32(msg.export_time)?;
    w.u32(msg.sequence)?;
    w.u32(exp.domain)?;
    if msg.templates {
        let set = w.at;
        w.u16(2)?;
        w.u16(0)?;
        for (id, fields) in [(TEMPLATE_V4, &FIELDS_V4), (TEMPLATE_V6, &FIELDS_V6)] {
            w.u16(id)?;
            w.u16(fields.len() as u16)?;
            for &(ie, len) in fields {
                w.u16(ie)?;
                w.u16(len)?;
            }
        }
        w.patch_len(set)?;
    }
    for (id, v6) in [(TEMPLATE_V4, false), (TEMPLATE_V6, true)] {
        let mut set = None;
        for r in records.iter().filter(|r| matches!(r.flow.src, IpAddr::V6(_)) == v6) {
            if set.is_none() {
                set = Some(w.at);
                w.u16(id)?;
                w.u16(0)?;
            }
            match (r.flow.src, r.flow.dst) {
                (IpAddr::V4(s), IpAddr::V4(d)) => {
                    w.bytes(&s)?;
                    w.bytes(&d)?;
                }
                (IpAddr::V6(s), IpAddr::V6(d)) => {
                    w.bytes(&s)?;
                    w.bytes(&d)?;
                }
                // A flow key has one family; a mixed one cannot be described: zeros.
                _ => w.bytes(&[0; 32][..if v6 { 32 } else { 8 }])?,
            }
            w.u16(r.flow.src_port)?;
            w.u16(r.flow.dst_port)?;
            w.bytes(&[r.flow.proto])?;
            w.u64(r.packets)?;
            w.u64(r.bytes)?;
        }
        if let Some(at) = set {
            w.patch_len(at)?;
        }
    }
    let end = w.at;
    let ipfix_len = (end - L2_L4) as u16;
    let b = w.buf;
    b.get_mut(L2_L4 + 2..L2_L4 + 4)?.copy_from_slice(&ipfix_len.to_be_bytes());
    // Ethernet: MACs filled in at egress.
    b.get_mut(..12)?.fill(0);
    b.get_mut(12..14)?.copy_from_slice(&0x0800u16.to_be_bytes());
    // IPv4: no options, DF, TTL 64, UDP.
    let total = (end - 14) as u16;
    let ip = b.get_mut(14..34)?;
    ip.copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[12..16].copy_from_slice(&exp.source);
    ip[16..20].copy_from_slice(&exp.collector);
    let sum = checksum::checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    // UDP, checksum 0 (none, allowed over IPv4: RFC 768).
    let udp = b.get_mut(34..42)?;
    udp[0..2].copy_from_slice(&IpfixExport::SOURCE_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&exp.udp_port.to_be_bytes());
    udp[4..6].copy_from_slice(&((end - 34) as u16).to_be_bytes());
    udp[6..8].fill(0);
    Some(end)
}

/// Bytes a message with `records` takes, templates included (for sizing buffers).
pub fn size(records: &[FlowRecord], templates: bool) -> usize {
    let v6 = records.iter().filter(|r| matches!(r.flow.src, IpAddr::V6(_))).count();
    let v4 = records.len() - v6;
    let tpl = if templates { 4 + 2 * (4 + 4 * FIELDS_V4.len()) } else { 0 };
    let sets = if v4 > 0 { 4 + v4 * RECORD_V4 } else { 0 } + if v6 > 0 { 4 + v6 * RECORD_V6 } else { 0 };
    L2_L4 + 16 + tpl + sets
}

/// A bounds-checked big-endian writer.
struct Writer<'a> {
    buf: &'a mut [u8],
    at: usize,
}

impl Writer<'_> {
    fn bytes(&mut self, b: &[u8]) -> Option<()> {
        self.buf.get_mut(self.at..self.at + b.len())?.copy_from_slice(b);
        self.at += b.len();
        Some(())
    }
    fn u16(&mut self, v: u16) -> Option<()> {
        self.bytes(&v.to_be_bytes())
    }
    fn u32(&mut self, v: u32) -> Option<()> {
        self.bytes(&v.to_be_bytes())
    }
    fn u64(&mut self, v: u64) -> Option<()> {
        self.bytes(&v.to_be_bytes())
    }
    /// Writes the length of the set that starts at `set` (up to here) into its header.
    fn patch_len(&mut self, set: usize) -> Option<()> {
        let len = (self.at - set) as u16;
        self.buf.get_mut(set + 2..set + 4)?.copy_from_slice(&len.to_be_bytes());
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::FlowKey;
    use crate::time::Instant;

    fn rec(src: IpAddr, dst: IpAddr, packets: u64, bytes: u64) -> FlowRecord {
        FlowRecord {
            flow: FlowKey { src, dst, src_port: 1234, dst_port: 80, proto: 6 },
            packets,
            bytes,
            first_seen: Instant(0),
            last_seen: Instant(1),
        }
    }

    const EXP: IpfixExport =
        IpfixExport { port: 1, collector: [10, 0, 0, 9], udp_port: 4739, source: [192, 0, 2, 1], domain: 7 };

    #[test]
    fn a_message_is_laid_out_as_rfc_7011_says() {
        let recs = [
            rec(IpAddr::V4([1, 2, 3, 4]), IpAddr::V4([5, 6, 7, 8]), 3, 300),
            rec(IpAddr::V6([0x20; 16]), IpAddr::V6([0x30; 16]), 1, 80),
        ];
        let mut buf = [0u8; 1514];
        let msg = Message { sequence: 41, export_time: 99, templates: true };
        let n = build(&mut buf, &EXP, &msg, &recs).unwrap();
        assert_eq!(n, size(&recs, true));
        let f = &buf[..n];
        // It parses as the IPv4/UDP frame it claims to be, to the collector.
        let p = crate::parse::parse(f).expect("a valid frame");
        assert_eq!(p.flow.dst, IpAddr::V4([10, 0, 0, 9]));
        assert_eq!((p.flow.src_port, p.flow.dst_port, p.flow.proto), (4739, 4739, 17));
        let m = &f[L2_L4..];
        assert_eq!(u16::from_be_bytes([m[0], m[1]]), 10);
        assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), m.len());
        assert_eq!(&m[4..16], &[0, 0, 0, 99, 0, 0, 0, 41, 0, 0, 0, 7]);
        // Template set: id 2, two templates of 7 fields.
        assert_eq!(&m[16..18], &[0, 2]);
        let tlen = usize::from(u16::from_be_bytes([m[18], m[19]]));
        assert_eq!(tlen, 4 + 2 * (4 + 28));
        assert_eq!(&m[20..24], &[1, 0, 0, 7], "template 256, 7 fields");
        assert_eq!(&m[24..28], &[0, 8, 0, 4], "sourceIPv4Address");
        // Data set 256 then 257.
        let d = &m[16 + tlen..];
        assert_eq!(&d[0..4], &[1, 0, 0, 4 + RECORD_V4 as u8]);
        assert_eq!(&d[4..12], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&d[12..17], &[0x04, 0xd2, 0, 80, 6]);
        assert_eq!(&d[17..25], &3u64.to_be_bytes());
        assert_eq!(&d[25..33], &300u64.to_be_bytes());
        let d6 = &d[4 + RECORD_V4..];
        assert_eq!(&d6[0..2], &[1, 1]);
        assert_eq!(usize::from(u16::from_be_bytes([d6[2], d6[3]])), 4 + RECORD_V6);
        // Without templates, only the data sets follow the header.
        let n2 = build(&mut buf, &EXP, &Message { templates: false, ..msg }, &recs[..1]).unwrap();
        assert_eq!(&buf[L2_L4 + 16..L2_L4 + 18], &[1, 0]);
        assert_eq!(n2, size(&recs[..1], false));
    }

    #[test]
    fn too_many_records_or_too_small_a_buffer_is_refused() {
        let r = rec(IpAddr::V6([1; 16]), IpAddr::V6([2; 16]), 1, 1);
        let many = [r; MAX_RECORDS + 1];
        let mut buf = [0u8; 4096];
        assert_eq!(build(&mut buf, &EXP, &Message { sequence: 0, export_time: 0, templates: true }, &many), None);
        // The largest message fits a standard frame.
        assert!(size(&many[..MAX_RECORDS], true) <= 1514);
        let mut small = [0u8; 100];
        assert_eq!(build(&mut small, &EXP, &Message { sequence: 0, export_time: 0, templates: true }, &[r]), None);
    }
}
