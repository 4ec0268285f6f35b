//! An IPFIX collector for the rig (RFC 7011): export frames addressed to the collector are
//! taken away from the checker and decoded here, template-driven (it learns the field lists
//! from the template sets it receives, as any collector does, instead of assuming the
//! image's layout), into flow records to compare with what the host sent.

use std::collections::HashMap;
use std::net::IpAddr;

use cadence_core::parse::{self, FlowKey};

/// One decoded data record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub flow: FlowKey,
    /// `packetDeltaCount` (IE 2).
    pub packets: u64,
    /// `octetDeltaCount` (IE 1).
    pub octets: u64,
}

/// What the collector received.
#[derive(Debug, Default)]
pub struct Collector {
    /// The collector address and UDP port export frames go to.
    pub target: Option<([u8; 4], u16)>,
    /// Messages decoded.
    pub messages: u64,
    /// Data records decoded.
    pub records: Vec<Record>,
    /// Data sets that arrived before their template (RFC 7011 allows dropping them; here
    /// they are a failure: the exporter sends templates first).
    pub without_template: u64,
    /// Frames that were not well-formed IPFIX, with the reason.
    pub errors: Vec<String>,
    /// The raw export frames (for a pcap and an independent decoder).
    pub frames: Vec<Vec<u8>>,
    templates: HashMap<u16, Vec<(u16, u16)>>,
    /// Sequence number expected next (the sum of records seen).
    sequence_gaps: u64,
}

impl Collector {
    /// A collector for messages to `addr:port`.
    pub fn new(addr: [u8; 4], port: u16) -> Collector {
        Collector { target: Some((addr, port)), ..Collector::default() }
    }

    /// Whether `frame` is an export frame for this collector (IPv4/UDP to the target).
    pub fn wants(&self, frame: &[u8]) -> bool {
        let Some((addr, port)) = self.target else { return false };
        parse::parse(frame)
            .is_ok_and(|p| p.flow.proto == 17 && p.flow.dst == parse::IpAddr::V4(addr) && p.flow.dst_port == port)
    }

    /// Decodes one export frame.
    pub fn receive(&mut self, frame: &[u8]) {
        self.frames.push(frame.to_vec());
        match self.decode(frame) {
            Ok(()) => self.messages += 1,
            Err(e) => self.errors.push(e),
        }
    }

    /// Sequence numbers that did not match the records counted before (0 when every message
    /// arrived; messages of several workers may interleave, which this does not count).
    pub fn sequence_gaps(&self) -> u64 {
        self.sequence_gaps
    }

    fn decode(&mut self, frame: &[u8]) -> Result<(), String> {
        let p = parse::parse(frame).map_err(|e| format!("not an IPv4/UDP frame: {e:?}"))?;
        let m = frame.get(usize::from(p.l4_offset) + 8..).ok_or("no UDP payload")?;
        let be16 = |b: &[u8], at: usize| b.get(at..at + 2).map(|x| u16::from_be_bytes([x[0], x[1]]));
        if be16(m, 0) != Some(10) {
            return Err(format!("version {:?}, want 10", be16(m, 0)));
        }
        let len = usize::from(be16(m, 2).ok_or("short header")?);
        let m = m.get(..len).ok_or_else(|| format!("message length {len} beyond the datagram"))?;
        let mut at = 16;
        while at + 4 <= m.len() {
            let id = be16(m, at).ok_or("short set")?;
            let slen = usize::from(be16(m, at + 2).ok_or("short set")?);
            let set = m.get(at + 4..at + slen).ok_or_else(|| format!("set {id} of {slen} bytes beyond the message"))?;
            if slen < 4 {
                return Err(format!("set {id} length {slen}"));
            }
            match id {
                2 => self.templates_from(set)?,
                256.. => self.data_from(id, set)?,
                _ => {} // options templates: none expected
            }
            at += slen;
        }
        Ok(())
    }

    fn templates_from(&mut self, set: &[u8]) -> Result<(), String> {
        let mut at = 0;
        while at + 4 <= set.len() {
            let id = u16::from_be_bytes([set[at], set[at + 1]]);
            let n = usize::from(u16::from_be_bytes([set[at + 2], set[at + 3]]));
            let mut fields = Vec::with_capacity(n);
            for i in 0..n {
                let f = set.get(at + 4 + 4 * i..at + 8 + 4 * i).ok_or("short template")?;
                fields.push((u16::from_be_bytes([f[0], f[1]]), u16::from_be_bytes([f[2], f[3]])));
            }
            self.templates.insert(id, fields);
            at += 4 + 4 * n;
        }
        Ok(())
    }

    fn data_from(&mut self, id: u16, set: &[u8]) -> Result<(), String> {
        let Some(fields) = self.templates.get(&id).cloned() else {
            self.without_template += 1;
            return Ok(());
        };
        let rec_len: usize = fields.iter().map(|&(_, l)| usize::from(l)).sum();
        if rec_len == 0 {
            return Err(format!("template {id} of zero length"));
        }
        for rec in set.chunks_exact(rec_len) {
            let (mut src, mut dst) = (None, None);
            let (mut sport, mut dport, mut proto, mut packets, mut octets) = (0, 0, 0, 0, 0);
            let mut at = 0;
            for &(ie, l) in &fields {
                let v = &rec[at..at + usize::from(l)];
                at += usize::from(l);
                let num = || v.iter().fold(0u64, |a, &b| a << 8 | u64::from(b));
                match (ie, v.len()) {
                    (8, 4) | (27, 16) => src = ip(v),
                    (12, 4) | (28, 16) => dst = ip(v),
                    (7, _) => sport = num() as u16,
                    (11, _) => dport = num() as u16,
                    (4, _) => proto = num() as u8,
                    (2, _) => packets = num(),
                    (1, _) => octets = num(),
                    _ => {}
                }
            }
            let (Some(src), Some(dst)) = (src, dst) else {
                return Err(format!("template {id} has no addresses"));
            };
            self.records.push(Record {
                flow: FlowKey { src, dst, src_port: sport, dst_port: dport, proto },
                packets,
                octets,
            });
        }
        Ok(())
    }

    /// Records summed per flow.
    pub fn totals(&self) -> HashMap<FlowKey, (u64, u64)> {
        let mut t: HashMap<FlowKey, (u64, u64)> = HashMap::new();
        for r in &self.records {
            let e = t.entry(r.flow).or_default();
            e.0 += r.packets;
            e.1 += r.octets;
        }
        t
    }
}

fn ip(v: &[u8]) -> Option<parse::IpAddr> {
    match v.len() {
        4 => Some(parse::IpAddr::V4([v[0], v[1], v[2], v[3]])),
        16 => v.try_into().ok().map(parse::IpAddr::V6),
        _ => None,
    }
}

/// A flow key as a std address pair (for reports).
pub fn std_addrs(k: &FlowKey) -> (IpAddr, IpAddr) {
    let conv = |a: parse::IpAddr| match a {
        parse::IpAddr::V4(b) => IpAddr::from(b),
        parse::IpAddr::V6(b) => IpAddr::from(b),
    };
    (conv(k.src), conv(k.dst))
}

/// The IPFIX export of a run, checked against the host's own counts.
#[derive(Debug, Clone, serde::Serialize, Default, PartialEq, Eq)]
pub struct IpfixSummary {
    pub messages: u64,
    pub records: u64,
    /// Flows with at least one record.
    pub flows: u64,
    /// Exported flows whose packets and IP bytes equal what the host sent on them.
    pub flows_matching: u64,
    /// The others: `flow: exported packets/bytes vs sent packets/bytes`.
    pub mismatches: Vec<String>,
    /// Malformed messages and data without a template.
    pub errors: Vec<String>,
}

/// Compares the collector's records with the checker's sent totals (per flow: records of
/// several expiries add up; flows not exported yet are not counted).
pub fn summary(c: &super::Checker) -> Option<IpfixSummary> {
    let col = c.ipfix.as_ref()?;
    let sent: std::collections::HashMap<_, _> = c.sent_totals().into_iter().map(|(k, p, b)| (k, (p, b))).collect();
    let mut s = IpfixSummary {
        messages: col.messages,
        records: col.records.len() as u64,
        errors: col.errors.clone(),
        ..IpfixSummary::default()
    };
    if col.without_template > 0 {
        s.errors.push(format!("{} data sets before their template", col.without_template));
    }
    for (flow, (p, b)) in col.totals() {
        s.flows += 1;
        match sent.get(&flow) {
            Some(&(sp, sb)) if (sp, sb) == (p, b) => s.flows_matching += 1,
            other => {
                let (src, dst) = std_addrs(&flow);
                s.mismatches.push(format!(
                    "{src}:{} -> {dst}:{} proto {}: exported {p} packets / {b} bytes, sent {:?}",
                    flow.src_port, flow.dst_port, flow.proto, other
                ));
            }
        }
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use cadence_core::nf::accounting::FlowRecord;
    use cadence_core::nf::accounting::ipfix::{self, IpfixExport, Message};
    use cadence_core::time::Instant;

    #[test]
    fn decodes_what_the_image_encodes_from_its_templates() {
        let exp = IpfixExport { port: 1, collector: [10, 0, 0, 9], udp_port: 4739, source: [192, 0, 2, 1], domain: 3 };
        let recs: Vec<FlowRecord> = (0..5u8)
            .map(|i| FlowRecord {
                flow: FlowKey {
                    src: if i == 4 { parse::IpAddr::V6([i; 16]) } else { parse::IpAddr::V4([10, 0, 0, i]) },
                    dst: if i == 4 { parse::IpAddr::V6([9; 16]) } else { parse::IpAddr::V4([10, 9, 9, 9]) },
                    src_port: 1000 + u16::from(i),
                    dst_port: 53,
                    proto: 17,
                },
                packets: u64::from(i) + 1,
                bytes: 100 * (u64::from(i) + 1),
                first_seen: Instant(0),
                last_seen: Instant(1),
            })
            .collect();
        let mut buf = [0u8; 1514];
        let mut c = Collector::new([10, 0, 0, 9], 4739);
        // Data before any template is counted, not guessed at.
        let n =
            ipfix::build(&mut buf, &exp, &Message { sequence: 0, export_time: 0, templates: false }, &recs).unwrap();
        assert!(c.wants(&buf[..n]));
        c.receive(&buf[..n]);
        assert_eq!((c.records.len(), c.without_template), (0, 2));
        let n = ipfix::build(&mut buf, &exp, &Message { sequence: 5, export_time: 0, templates: true }, &recs).unwrap();
        c.receive(&buf[..n]);
        assert!(c.errors.is_empty(), "{:?}", c.errors);
        assert_eq!(c.records.len(), 5);
        for r in &recs {
            assert_eq!(c.totals().get(&r.flow), Some(&(r.packets, r.bytes)));
        }
        // Not for this collector.
        let other = Collector::new([10, 0, 0, 8], 4739);
        assert!(!other.wants(&buf[..n]));
        // A truncated message is an error, not a panic.
        let mut t = buf[..n].to_vec();
        t.truncate(60);
        let mut c2 = Collector::new([10, 0, 0, 9], 4739);
        c2.receive(&t);
        assert_eq!(c2.errors.len(), 1);
    }
}
