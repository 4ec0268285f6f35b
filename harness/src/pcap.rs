//! A classic libpcap file writer (`cargo xtask run --pcap PATH`): every frame that comes
//! out of the image, both ports, with host timestamps.
//!
//! Format (the "pcap" file format of libpcap, version 2.4, microsecond timestamps, host
//! byte order as the magic number tells readers):
//!
//! | bytes | global header field |
//! |---|---|
//! | 4 | magic `0xA1B2C3D4` |
//! | 2 + 2 | version 2.4 |
//! | 4 | thiszone (0: timestamps are UTC) |
//! | 4 | sigfigs (0) |
//! | 4 | snaplen |
//! | 4 | link type: 1 = `LINKTYPE_ETHERNET` |
//!
//! Then per frame a 16-byte record header (seconds, microseconds, captured length,
//! original length) and the frame bytes (without FCS, as the NIC model hands them over).
//! The format has no interface field: which port a frame left by is not recorded (the
//! source MAC tells: it is that NIC's MAC).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};

/// The magic number of microsecond-resolution pcap files.
pub const MAGIC_US: u32 = 0xA1B2_C3D4;
/// `LINKTYPE_ETHERNET`.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Snapshot length written in the header; frames longer than this are cut.
pub const SNAPLEN: u32 = 65_535;

/// Writes a pcap stream.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    frames: u64,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates (truncates) `path` and writes the global header.
    pub fn create(path: &Path) -> Result<Self> {
        let f = File::create(path).with_context(|| format!("creating {}", path.display()))?;
        PcapWriter::new(BufWriter::new(f)).with_context(|| format!("writing {}", path.display()))
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header to `out`.
    pub fn new(mut out: W) -> Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC_US.to_ne_bytes());
        h.extend_from_slice(&2u16.to_ne_bytes());
        h.extend_from_slice(&4u16.to_ne_bytes());
        h.extend_from_slice(&0i32.to_ne_bytes());
        h.extend_from_slice(&0u32.to_ne_bytes());
        h.extend_from_slice(&SNAPLEN.to_ne_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_ne_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, frames: 0 })
    }

    /// Appends one frame captured at `ts` (wall-clock time).
    pub fn write(&mut self, ts: SystemTime, frame: &[u8]) -> Result<()> {
        let d = ts.duration_since(UNIX_EPOCH).unwrap_or_default();
        let caplen = frame.len().min(SNAPLEN as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&(d.as_secs() as u32).to_ne_bytes());
        h[4..8].copy_from_slice(&d.subsec_micros().to_ne_bytes());
        h[8..12].copy_from_slice(&(caplen as u32).to_ne_bytes());
        h[12..16].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&frame[..caplen])?;
        self.frames += 1;
        Ok(())
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Flushes the underlying writer.
    pub fn flush(&mut self) -> Result<()> {
        self.out.flush()?;
        Ok(())
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> Result<W> {
        self.flush()?;
        Ok(self.out)
    }
}

/// One record of a pcap file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Seconds since the Unix epoch.
    pub secs: u32,
    /// Microseconds within the second.
    pub micros: u32,
    /// The length of the frame on the wire.
    pub orig_len: u32,
    /// The bytes captured.
    pub data: Vec<u8>,
}

/// Reads a microsecond pcap file of either byte order (for tests and tools): the link
/// type and the records.
pub fn read(bytes: &[u8]) -> Result<(u32, Vec<Record>)> {
    let Some(head) = bytes.get(..24) else { bail!("pcap: {} bytes, shorter than the 24-byte header", bytes.len()) };
    let magic = [head[0], head[1], head[2], head[3]];
    let swap = if u32::from_le_bytes(magic) == MAGIC_US {
        false
    } else if u32::from_be_bytes(magic) == MAGIC_US {
        true
    } else {
        bail!("pcap: bad magic {magic:02x?}")
    };
    let u16_at = |b: &[u8], i: usize| {
        let v = [b[i], b[i + 1]];
        if swap { u16::from_be_bytes(v) } else { u16::from_le_bytes(v) }
    };
    let u32_at = |b: &[u8], i: usize| {
        let v = [b[i], b[i + 1], b[i + 2], b[i + 3]];
        if swap { u32::from_be_bytes(v) } else { u32::from_le_bytes(v) }
    };
    if (u16_at(head, 4), u16_at(head, 6)) != (2, 4) {
        bail!("pcap: version {}.{}, expected 2.4", u16_at(head, 4), u16_at(head, 6));
    }
    let linktype = u32_at(head, 20);
    let mut records = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let Some(h) = bytes.get(at..at + 16) else { bail!("pcap: truncated record header at byte {at}") };
        let caplen = u32_at(h, 8) as usize;
        let Some(data) = bytes.get(at + 16..at + 16 + caplen) else {
            bail!("pcap: record at byte {at} claims {caplen} bytes past the end")
        };
        records.push(Record { secs: u32_at(h, 0), micros: u32_at(h, 4), orig_len: u32_at(h, 12), data: data.to_vec() });
        at += 16 + caplen;
    }
    Ok((linktype, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn writes_what_a_reader_reads_back() -> Result<()> {
        let mut w = PcapWriter::new(Vec::new())?;
        let t0 = UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789);
        let frames: Vec<Vec<u8>> =
            (0..5u8).map(|i| (0..60 + usize::from(i) * 300).map(|j| j as u8 ^ i).collect()).collect();
        for (i, f) in frames.iter().enumerate() {
            w.write(t0 + Duration::from_millis(i as u64), f)?;
        }
        assert_eq!(w.frames(), 5);
        let bytes = w.into_inner()?;
        assert_eq!(bytes.len(), 24 + frames.iter().map(|f| 16 + f.len()).sum::<usize>());
        // The header as libpcap documents it, read in host order.
        assert_eq!(u32::from_ne_bytes(bytes[0..4].try_into()?), 0xA1B2_C3D4);
        assert_eq!(u32::from_ne_bytes(bytes[16..20].try_into()?), 65_535);
        let (linktype, recs) = read(&bytes)?;
        assert_eq!(linktype, LINKTYPE_ETHERNET);
        assert_eq!(recs.len(), 5);
        for (i, (r, f)) in recs.iter().zip(&frames).enumerate() {
            assert_eq!(&r.data, f);
            assert_eq!(r.orig_len as usize, f.len());
            assert_eq!(r.secs, 1_700_000_000);
            assert_eq!(r.micros, 123_456 + 1000 * i as u32);
        }
        Ok(())
    }

    #[test]
    fn reads_the_other_byte_order_and_rejects_garbage() -> Result<()> {
        // A big-endian file with one 4-byte record, written by hand.
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC_US.to_be_bytes());
        b.extend_from_slice(&2u16.to_be_bytes());
        b.extend_from_slice(&4u16.to_be_bytes());
        b.extend_from_slice(&[0; 8]);
        b.extend_from_slice(&SNAPLEN.to_be_bytes());
        b.extend_from_slice(&1u32.to_be_bytes());
        for v in [7u32, 8, 4, 10] {
            b.extend_from_slice(&v.to_be_bytes());
        }
        b.extend_from_slice(&[1, 2, 3, 4]);
        let (lt, recs) = read(&b)?;
        assert_eq!(lt, 1);
        assert_eq!(recs, vec![Record { secs: 7, micros: 8, orig_len: 10, data: vec![1, 2, 3, 4] }]);
        assert!(read(&b[..b.len() - 1]).is_err(), "truncated record");
        assert!(read(&[0u8; 24]).is_err(), "bad magic");
        assert!(read(&b[..10]).is_err(), "short header");
        Ok(())
    }

    #[test]
    fn creates_a_file() -> Result<()> {
        let dir = std::env::temp_dir().join(format!("cadence-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let p = dir.join("t.pcap");
        let mut w = PcapWriter::create(&p)?;
        w.write(SystemTime::now(), &[0xAA; 60])?;
        w.flush()?;
        drop(w);
        let (_, recs) = read(&std::fs::read(&p)?)?;
        assert_eq!(recs.len(), 1);
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
