//! A capture reader for replaying a user's trace: classic pcap (both byte orders, µs and ns
//! timestamps) and pcapng (section header, interface description, enhanced and simple packet
//! blocks), Ethernet (with one 802.1Q tag) or raw IPv4 link types. Only the IPv4 5-tuple and
//! the timestamp are kept; other packets are skipped and counted. Malformed input is a named
//! error ([`PcapError`]), never a panic (proptest below feeds it arbitrary bytes).

use std::collections::HashMap;

use cadence_core::rss::{DEFAULT_KEY, ToeplitzTable};

use super::trace::{FlowInfo, MemTrace, Packet};

/// Why a capture was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PcapError {
    /// Fewer bytes than a header needs.
    Truncated(&'static str),
    /// Neither a pcap nor a pcapng magic number.
    BadMagic(u32),
    /// A link type other than Ethernet (1) or raw IP (101, 228).
    UnsupportedLinkType(u32),
    /// A block or record length that does not fit the file.
    BadLength(&'static str),
    /// No IPv4 packet in the capture.
    Empty,
}

impl std::fmt::Display for PcapError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PcapError::Truncated(w) => write!(f, "pcap: truncated {w}"),
            PcapError::BadMagic(m) => write!(f, "pcap: not a pcap or pcapng file (magic {m:#010x})"),
            PcapError::UnsupportedLinkType(l) => write!(f, "pcap: unsupported link type {l}"),
            PcapError::BadLength(w) => write!(f, "pcap: bad {w} length"),
            PcapError::Empty => f.write_str("pcap: no IPv4 packet in the capture (an empty trace)"),
        }
    }
}

impl std::error::Error for PcapError {}

fn u16_at(b: &[u8], at: usize, be: bool) -> Option<u16> {
    let x: [u8; 2] = b.get(at..at + 2)?.try_into().ok()?;
    Some(if be { u16::from_be_bytes(x) } else { u16::from_le_bytes(x) })
}

fn u32_at(b: &[u8], at: usize, be: bool) -> Option<u32> {
    let x: [u8; 4] = b.get(at..at + 4)?.try_into().ok()?;
    Some(if be { u32::from_be_bytes(x) } else { u32::from_le_bytes(x) })
}

/// The 5-tuple of a frame of `link` type, if it is IPv4.
fn five_tuple(link: u32, frame: &[u8]) -> Option<(u32, u32, u16, u16, u8)> {
    let ip = match link {
        1 => {
            let mut off = 12;
            let mut et = u16_at(frame, off, true)?;
            if et == 0x8100 {
                off += 4;
                et = u16_at(frame, off, true)?;
            }
            if et != 0x0800 {
                return None;
            }
            frame.get(off + 2..)?
        }
        _ => frame,
    };
    let vihl = *ip.first()?;
    if vihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(vihl & 15) * 4;
    let proto = *ip.get(9)?;
    let src = u32_at(ip, 12, true)?;
    let dst = u32_at(ip, 16, true)?;
    let frag = u16_at(ip, 6, true)? & 0x1FFF;
    let (sport, dport) = if matches!(proto, 6 | 17) && frag == 0 {
        (u16_at(ip, ihl, true).unwrap_or(0), u16_at(ip, ihl + 2, true).unwrap_or(0))
    } else {
        (0, 0)
    };
    Some((src, dst, sport, dport, proto))
}

struct Builder {
    toeplitz: ToeplitzTable,
    ids: HashMap<(u32, u32, u16, u16, u8), u32>,
    flows: Vec<FlowInfo>,
    packets: Vec<Packet>,
    first_ns: Option<u64>,
    skipped: u64,
}

impl Builder {
    fn add(&mut self, link: u32, t_ns: u64, frame: &[u8]) {
        let Some(key) = five_tuple(link, frame) else {
            self.skipped += 1;
            return;
        };
        let next = self.flows.len() as u32;
        let id = *self.ids.entry(key).or_insert(next);
        if id == next {
            let (s, d, sp, dp, p) = key;
            self.flows.push(FlowInfo::new(&self.toeplitz, s, d, sp, dp, p));
        }
        let first = *self.first_ns.get_or_insert(t_ns);
        self.packets.push(Packet { t_ns: t_ns.saturating_sub(first), flow: id });
    }
}

/// A capture as a trace (timestamps from the first packet), and how many packets were skipped.
pub fn read(bytes: &[u8]) -> Result<(MemTrace, u64), PcapError> {
    let toeplitz = ToeplitzTable::try_new(&DEFAULT_KEY, 12).map_err(|_| PcapError::Truncated("key"))?;
    let mut b = Builder { toeplitz, ids: HashMap::new(), flows: vec![], packets: vec![], first_ns: None, skipped: 0 };
    let magic = u32_at(bytes, 0, false).ok_or(PcapError::Truncated("file header"))?;
    match magic {
        0xA1B2_C3D4 | 0xD4C3_B2A1 | 0xA1B2_3C4D | 0x4D3C_B2A1 => classic(bytes, magic, &mut b)?,
        0x0A0D_0D0A => pcapng(bytes, &mut b)?,
        m => return Err(PcapError::BadMagic(m)),
    }
    if b.packets.is_empty() {
        return Err(PcapError::Empty);
    }
    Ok((MemTrace::new(b.flows, b.packets), b.skipped))
}

fn classic(bytes: &[u8], magic: u32, b: &mut Builder) -> Result<(), PcapError> {
    let be = matches!(magic, 0xD4C3_B2A1 | 0x4D3C_B2A1);
    let nanos = matches!(magic, 0xA1B2_3C4D | 0x4D3C_B2A1);
    let link = u32_at(bytes, 20, be).ok_or(PcapError::Truncated("file header"))? & 0x0FFF_FFFF;
    if !matches!(link, 1 | 101 | 228) {
        return Err(PcapError::UnsupportedLinkType(link));
    }
    let mut at = 24;
    while at < bytes.len() {
        let (Some(sec), Some(frac), Some(incl)) =
            (u32_at(bytes, at, be), u32_at(bytes, at + 4, be), u32_at(bytes, at + 8, be))
        else {
            return Err(PcapError::Truncated("record header"));
        };
        let start = at + 16;
        let end = start.checked_add(incl as usize).ok_or(PcapError::BadLength("record"))?;
        let frame = bytes.get(start..end).ok_or(PcapError::Truncated("record"))?;
        let ns = u64::from(sec) * 1_000_000_000 + if nanos { u64::from(frac) } else { u64::from(frac) * 1000 };
        b.add(link, ns, frame);
        at = end;
    }
    Ok(())
}

fn pcapng(bytes: &[u8], b: &mut Builder) -> Result<(), PcapError> {
    // Byte order from the section header's byte-order magic.
    let be = match u32_at(bytes, 8, false) {
        Some(0x1A2B_3C4D) => false,
        Some(0x4D3C_2B1A) => true,
        Some(_) => return Err(PcapError::BadMagic(0x0A0D_0D0A)),
        None => return Err(PcapError::Truncated("section header")),
    };
    let mut links: Vec<(u32, u64)> = Vec::new(); // (link type, ticks per second)
    let mut at = 0;
    while at < bytes.len() {
        let kind = u32_at(bytes, at, be).ok_or(PcapError::Truncated("block header"))?;
        let len = u32_at(bytes, at + 4, be).ok_or(PcapError::Truncated("block header"))? as usize;
        if len < 12 || !len.is_multiple_of(4) {
            return Err(PcapError::BadLength("block"));
        }
        let body = bytes.get(at + 8..at + len - 4).ok_or(PcapError::Truncated("block"))?;
        match kind {
            0x0A0D_0D0A => links.clear(),
            1 => {
                let link = u32::from(u16_at(body, 0, be).ok_or(PcapError::Truncated("interface block"))?);
                // if_tsresol (option 9): 10^-n or 2^-n seconds; default microseconds.
                let mut res = 1_000_000u64;
                let mut o = 8;
                while let (Some(code), Some(olen)) = (u16_at(body, o, be), u16_at(body, o + 2, be)) {
                    if code == 0 {
                        break;
                    }
                    if code == 9
                        && let Some(&r) = body.get(o + 4)
                    {
                        let n = u32::from(r & 0x7F);
                        res =
                            if r & 0x80 == 0 { 10u64.checked_pow(n) } else { 2u64.checked_pow(n) }.unwrap_or(1_000_000);
                    }
                    o += 4 + usize::from(olen).div_ceil(4) * 4;
                }
                links.push((link, res.max(1)));
            }
            6 => {
                let iface = u32_at(body, 0, be).ok_or(PcapError::Truncated("packet block"))? as usize;
                let hi = u64::from(u32_at(body, 4, be).ok_or(PcapError::Truncated("packet block"))?);
                let lo = u64::from(u32_at(body, 8, be).ok_or(PcapError::Truncated("packet block"))?);
                let cap = u32_at(body, 12, be).ok_or(PcapError::Truncated("packet block"))? as usize;
                let frame = body.get(20..20usize.saturating_add(cap)).ok_or(PcapError::BadLength("packet"))?;
                let &(link, res) = links.get(iface).ok_or(PcapError::BadLength("interface id"))?;
                let ticks = (hi << 32) | lo;
                let ns = (u128::from(ticks) * 1_000_000_000 / u128::from(res)).min(u128::from(u64::MAX)) as u64;
                b.add(link, ns, frame);
            }
            3 => {
                let &(link, _) = links.first().ok_or(PcapError::BadLength("interface id"))?;
                let last = b.packets.last().map_or(0, |p| p.t_ns + b.first_ns.unwrap_or(0));
                b.add(link, last, body.get(4..).unwrap_or(&[]));
            }
            _ => {}
        }
        at += len;
    }
    if links.iter().any(|(l, _)| !matches!(l, 1 | 101 | 228)) && b.packets.is_empty() {
        return Err(PcapError::UnsupportedLinkType(links.first().map_or(0, |l| l.0)));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eth_ipv4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        f[14] = 0x45;
        f[23] = 6;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    fn classic_file(frames: &[(u32, u32, Vec<u8>)]) -> Vec<u8> {
        let mut v = vec![];
        for x in [0xA1B2_C3D4u32, 0x0004_0002, 0, 0, 65535, 1] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.truncate(24);
        v[4..8].copy_from_slice(&[2, 0, 4, 0]);
        v[16..20].copy_from_slice(&65535u32.to_le_bytes());
        v[20..24].copy_from_slice(&1u32.to_le_bytes());
        for (s, us, f) in frames {
            for x in [*s, *us, f.len() as u32, f.len() as u32] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.extend_from_slice(f);
        }
        v
    }

    #[test]
    fn classic_pcap_gives_flows_and_times() {
        let a = eth_ipv4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80);
        let b = eth_ipv4([10, 0, 0, 3], [10, 0, 0, 2], 1000, 80);
        let file = classic_file(&[(10, 0, a.clone()), (10, 5, b), (11, 0, a), (11, 1, vec![0; 20])]);
        let (t, skipped) = read(&file).expect("read");
        assert_eq!(skipped, 1);
        assert_eq!(t.flows.len(), 2);
        assert_eq!(
            t.packets.iter().map(|p| (p.t_ns, p.flow)).collect::<Vec<_>>(),
            [(0, 0), (5000, 1), (1_000_000_000, 0)]
        );
        assert_eq!(t.flows[0].dport, 80);
    }

    #[test]
    fn pcapng_enhanced_blocks() {
        let mut v = vec![];
        let block = |v: &mut Vec<u8>, kind: u32, body: &[u8]| {
            let len = 12 + body.len().div_ceil(4) * 4;
            v.extend_from_slice(&kind.to_le_bytes());
            v.extend_from_slice(&(len as u32).to_le_bytes());
            v.extend_from_slice(body);
            v.resize(v.len() + (len - 12 - body.len()), 0);
            v.extend_from_slice(&(len as u32).to_le_bytes());
        };
        let mut shb = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
        shb.extend_from_slice(&[1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
        block(&mut v, 0x0A0D_0D0A, &shb);
        // Interface: Ethernet, nanosecond resolution.
        let idb = [1u8, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 0, 9, 0, 0, 0, 0, 0, 0, 0];
        block(&mut v, 1, &idb);
        let f = eth_ipv4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        for t in [1_000u32, 3_500] {
            let mut epb = vec![0u8; 4];
            epb.extend_from_slice(&0u32.to_le_bytes());
            epb.extend_from_slice(&t.to_le_bytes());
            epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
            epb.extend_from_slice(&(f.len() as u32).to_le_bytes());
            epb.extend_from_slice(&f);
            block(&mut v, 6, &epb);
        }
        let (t, _) = read(&v).expect("read");
        assert_eq!(t.packets.iter().map(|p| p.t_ns).collect::<Vec<_>>(), [0, 2_500]);
    }

    #[test]
    fn malformed_captures_are_named_errors() {
        assert_eq!(read(&[1, 2]).map(|_| ()), Err(PcapError::Truncated("file header")));
        assert!(matches!(read(&[0; 32]), Err(PcapError::BadMagic(0))));
        let a = eth_ipv4([10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        let mut f = classic_file(&[(1, 0, a)]);
        f.truncate(f.len() - 3);
        assert_eq!(read(&f).map(|_| ()), Err(PcapError::Truncated("record")));
        assert_eq!(read(&classic_file(&[])).map(|_| ()), Err(PcapError::Empty));
        let mut g = classic_file(&[]);
        g[20] = 105;
        assert_eq!(read(&g).map(|_| ()), Err(PcapError::UnsupportedLinkType(105)));
    }

    proptest::proptest! {
        #[test]
        fn never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300), magic in 0usize..3) {
            let mut v = match magic {
                0 => 0xA1B2_C3D4u32.to_le_bytes().to_vec(),
                1 => { let mut x = 0x0A0D_0D0Au32.to_le_bytes().to_vec(); x.extend_from_slice(&[28, 0, 0, 0, 0x4D, 0x3C, 0x2B, 0x1A]); x }
                _ => vec![],
            };
            v.extend_from_slice(&bytes);
            let _ = read(&v);
        }
    }
}
