//! The bench's frames: IPv4/UDP, one template per (flow, size), each carrying an
//! 18-byte tag right after the UDP header that makes every frame countable exactly once.
//!
//! ```text
//! 0      14          34       42                                        60
//! | Eth  | IPv4 (20) | UDP(8) | "CdB" trial u8 | flow u16 | seq u32 | tsc u64 | zeros… |
//! ```
//!
//! `trial` tells a late frame of an earlier trial from this one's, `seq` is the
//! trial-wide sequence number (frame `seq` belongs to flow `seq % flows` and
//! has size `mix.size(seq)`), `tsc` the TSC tick at which the generator wrote it. All
//! fields are little-endian. A 60-byte frame ("64 B" on the wire, with the FCS) is the
//! headers plus the tag and nothing else.
//!
//! Flow `f`: `10.10.f/16 → 10.20.0.1`, UDP `1024 + f → 40000`, DF set, TTL 64, a valid
//! header checksum (the L2 forwarder checks it) and UDP checksum 0 (none, RFC 768). These
//! addresses pass `chains/chain1.toml` (its ACL permits everything but Telnet, SMB and
//! `10.0.0.8/31`; no LB VIP matches), so Chain 1 forwards every frame.

/// Ethernet + IPv4 + UDP header bytes.
pub const HEADERS: usize = 42;
/// Bytes of the tag.
pub const TAG_LEN: usize = 18;
/// The smallest frame: headers + tag = 60 bytes (64 on the wire).
pub const MIN_FRAME: usize = HEADERS + TAG_LEN;
/// The largest frame on a 1500-byte MTU.
pub const MAX_FRAME: usize = 1514;
/// The tag's first three bytes (the fourth is the trial number).
pub const MAGIC: [u8; 3] = *b"CdB";

/// IMIX: 7 : 4 : 1 of 60 / 566 / 1514 bytes, interleaved over a cycle of 12 frames.
pub const IMIX_CYCLE: [u16; 12] = [60, 566, 60, 1514, 60, 566, 60, 60, 566, 60, 566, 60];

/// Which frame sizes a trial sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SizeMix {
    /// Every frame this long (60..=1514, without FCS).
    Fixed(u16),
    /// [`IMIX_CYCLE`].
    Imix,
}

impl SizeMix {
    /// The size of frame `seq`.
    #[inline]
    pub fn size(self, seq: u32) -> usize {
        match self {
            SizeMix::Fixed(n) => n as usize,
            SizeMix::Imix => IMIX_CYCLE[(seq % IMIX_CYCLE.len() as u32) as usize] as usize,
        }
    }

    /// The distinct sizes, smallest first.
    pub fn sizes(self) -> Vec<u16> {
        match self {
            SizeMix::Fixed(n) => vec![n],
            SizeMix::Imix => vec![60, 566, 1514],
        }
    }

    /// Mean frame length without FCS.
    pub fn mean_len(self) -> f64 {
        match self {
            SizeMix::Fixed(n) => f64::from(n),
            SizeMix::Imix => IMIX_CYCLE.iter().map(|&n| f64::from(n)).sum::<f64>() / IMIX_CYCLE.len() as f64,
        }
    }

    /// Short name for tables and files: `64B` or `imix`.
    pub fn label(self) -> String {
        match self {
            SizeMix::Fixed(n) => format!("{}B", n + 4),
            SizeMix::Imix => "imix".to_string(),
        }
    }

    /// Wire bit rate in Mb/s at `pps` (frame + FCS + preamble/IFG 20 B, as RFC 2544 counts).
    pub fn wire_mbps(self, pps: f64) -> f64 {
        pps * (self.mean_len() + 4.0 + 20.0) * 8.0 / 1e6
    }
}

/// One decoded tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// Trial number (wraps at 256).
    pub trial: u8,
    /// Flow index.
    pub flow: u16,
    /// Trial-wide sequence number.
    pub seq: u32,
    /// TSC tick at transmission.
    pub tsc: u64,
}

impl Tag {
    /// Writes the tag into `frame[HEADERS..HEADERS + TAG_LEN]`; `false` if the frame is
    /// too short.
    #[inline]
    pub fn write(&self, frame: &mut [u8]) -> bool {
        let Some(t) = frame.get_mut(HEADERS..HEADERS + TAG_LEN) else { return false };
        t[0..3].copy_from_slice(&MAGIC);
        t[3] = self.trial;
        t[4..6].copy_from_slice(&self.flow.to_le_bytes());
        t[6..10].copy_from_slice(&self.seq.to_le_bytes());
        t[10..18].copy_from_slice(&self.tsc.to_le_bytes());
        true
    }

    /// Reads the tag of `frame`, `None` when it is too short or not ours.
    #[inline]
    pub fn read(frame: &[u8]) -> Option<Tag> {
        let t = frame.get(HEADERS..HEADERS + TAG_LEN)?;
        if t[0..3] != MAGIC {
            return None;
        }
        Some(Tag {
            trial: t[3],
            flow: u16::from_le_bytes([t[4], t[5]]),
            seq: u32::from_le_bytes([t[6], t[7], t[8], t[9]]),
            tsc: u64::from_le_bytes([t[10], t[11], t[12], t[13], t[14], t[15], t[16], t[17]]),
        })
    }
}

/// The RFC 1071 Internet checksum of `bytes`.
pub fn ipv4_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = bytes.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet + IPv4 + UDP headers of flow `flow` for a frame of `len` bytes.
pub fn headers(dst: [u8; 6], src: [u8; 6], flow: u16, len: usize) -> [u8; HEADERS] {
    let mut h = [0u8; HEADERS];
    h[0..6].copy_from_slice(&dst);
    h[6..12].copy_from_slice(&src);
    h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut h[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 10, (flow >> 8) as u8, flow as u8]);
    ip[16..20].copy_from_slice(&[10, 20, 0, 1]);
    let c = ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut h[34..42];
    udp[0..2].copy_from_slice(&1024u16.wrapping_add(flow).to_be_bytes());
    udp[2..4].copy_from_slice(&40000u16.to_be_bytes());
    udp[4..6].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    h
}

/// Header templates for every (flow, size) of a trial.
#[derive(Debug, Clone)]
pub struct Templates {
    flows: u16,
    mix: SizeMix,
    sizes: Vec<u16>,
    /// `[flow * sizes.len() + size_index]`.
    hdr: Vec<[u8; HEADERS]>,
}

impl Templates {
    /// Templates for `flows` flows (≥ 1) and `mix`, from `src` to `dst`.
    pub fn new(dst: [u8; 6], src: [u8; 6], flows: u16, mix: SizeMix) -> Templates {
        let flows = flows.max(1);
        let sizes = mix.sizes();
        let mut hdr = Vec::with_capacity(flows as usize * sizes.len());
        for f in 0..flows {
            for &s in &sizes {
                hdr.push(headers(dst, src, f, s as usize));
            }
        }
        Templates { flows, mix, sizes, hdr }
    }

    /// Flows.
    pub fn flows(&self) -> u16 {
        self.flows
    }

    /// Flow of frame `seq`.
    #[inline]
    pub fn flow(&self, seq: u32) -> u16 {
        (seq % u32::from(self.flows)) as u16
    }

    /// Writes frame `seq` of trial `trial` (headers, tag with `tsc`; the bytes after the
    /// tag are left as they are) into the front of `buf`; returns its length, or 0 when
    /// `buf` is too short.
    #[inline]
    pub fn write(&self, trial: u8, seq: u32, tsc: u64, buf: &mut [u8]) -> usize {
        let len = self.mix.size(seq);
        if buf.len() < len {
            return 0;
        }
        let flow = self.flow(seq);
        let si = self.sizes.iter().position(|&s| s as usize == len).unwrap_or(0);
        buf[..HEADERS].copy_from_slice(&self.hdr[flow as usize * self.sizes.len() + si]);
        Tag { trial, flow, seq, tsc }.write(buf);
        len
    }

    /// The length of frame `seq`.
    #[inline]
    pub fn len(&self, seq: u32) -> usize {
        self.mix.size(seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_round_trips_and_rejects_foreign_frames() {
        let mut f = [0u8; 60];
        let t = Tag { trial: 9, flow: 0xbeef, seq: 0x0102_0304, tsc: 0x1122_3344_5566_7788 };
        assert!(t.write(&mut f));
        assert_eq!(&f[42..46], b"CdB\x09");
        assert_eq!(&f[46..48], &[0xef, 0xbe]);
        assert_eq!(&f[48..52], &[4, 3, 2, 1]);
        assert_eq!(Tag::read(&f), Some(t));
        assert_eq!(Tag::read(&f[..59]), None);
        f[42] = b'X';
        assert_eq!(Tag::read(&f), None);
        assert!(!t.write(&mut [0u8; 59]));
    }

    #[test]
    fn imix_is_7_4_1() {
        let mut n = std::collections::BTreeMap::new();
        for seq in 0..1200u32 {
            *n.entry(SizeMix::Imix.size(seq)).or_insert(0) += 1;
        }
        assert_eq!(n.into_iter().collect::<Vec<_>>(), vec![(60, 700), (566, 400), (1514, 100)]);
        assert!((SizeMix::Imix.mean_len() - 4198.0 / 12.0).abs() < 1e-9);
        assert_eq!(SizeMix::Fixed(60).label(), "64B");
        assert_eq!(SizeMix::Imix.label(), "imix");
        // 64 B at 1 Mpps: 84 bytes per frame on the wire = 672 Mb/s.
        assert!((SizeMix::Fixed(60).wire_mbps(1e6) - 672.0).abs() < 1e-9);
    }

    #[test]
    fn frames_are_valid_ipv4_udp() {
        let t = Templates::new([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 300, SizeMix::Imix);
        let mut buf = [0u8; 2048];
        for seq in [0u32, 1, 3, 299, 301, 12_345] {
            let len = t.write(5, seq, 77, &mut buf);
            let f = &buf[..len];
            assert_eq!(len, SizeMix::Imix.size(seq));
            assert_eq!(&f[12..14], &[0x08, 0x00]);
            assert_eq!(ipv4_checksum(&f[14..34]), 0, "header checksum of frame {seq}");
            assert_eq!(u16::from_be_bytes([f[16], f[17]]) as usize, len - 14);
            assert_eq!(u16::from_be_bytes([f[38], f[39]]) as usize, len - 34);
            let flow = (seq % 300) as u16;
            assert_eq!(&f[26..30], &[10, 10, (flow >> 8) as u8, flow as u8]);
            assert_eq!(Tag::read(f), Some(Tag { trial: 5, flow, seq, tsc: 77 }));
        }
        assert_eq!(t.write(0, 3, 0, &mut [0u8; 100]), 0, "a 1514-byte frame does not fit 100 bytes");
    }

    #[test]
    fn checksum_matches_rfc1071_example() {
        // RFC 1071 §3: the sum of 00 01 f2 03 f4 f5 f6 f7 is ddf2 (before the complement).
        assert_eq!(ipv4_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), !0xddf2);
        assert_eq!(ipv4_checksum(&[0xff]), !0xff00);
    }
}
