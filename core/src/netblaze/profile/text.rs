//! The profile's text form (docs/PROTOCOL.md "NetBlaze profile"), parsed without `std`.
//!
//! ```text
//! # comments and blank lines are ignored
//! version=1
//! nfs=acl,lb,accounting
//! tsc_hz=2600000000
//! epoch_ns=80000
//! frontier=1:560,16:544,64:512,256:416        # flows:packets per epoch, whole chain
//! service=packet_cycles:380,flow_cycles:2400  # cycles, whole chain
//! rate=1:6800000,500:6700000,3000:6500000     # flows:packets/s, long term
//! split.1.head.frontier=1:1900,64:1700
//! split.1.head.service=packet_cycles:110,flow_cycles:1500
//! split.1.tail.frontier=1:800,64:700
//! split.1.tail.service=packet_cycles:270,flow_cycles:900
//! ```
//!
//! One `key=value` record per line, the first one `version=1`; every key once; `frontier`,
//! `service`, `rate`, `tsc_hz`, `epoch_ns` are required; a split point `k` (1..=n−1 where
//! `n` is the number of `nfs`) needs all four of its records. Every error names the line
//! and the key ([`ProfileError`]).

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use super::{Frontier, FrontierError, FrontierPoint, Part, Profile, RateCurve, RatePoint, ServiceCost, SplitProfile};
use crate::nf::config::values::{u32_dec, u64_dec};

/// The version [`Profile::parse`] reads.
pub const VERSION: u32 = 1;

/// What went wrong in a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ProfileErrorKind {
    /// The first record is not `version=…`.
    MissingVersion,
    /// `version=` is not 1.
    UnsupportedVersion,
    /// The line is not `key=value`.
    NotKeyValue,
    /// A key this parser does not know.
    UnknownKey,
    /// A key given twice.
    Duplicate,
    /// A number, or a `a:b` pair, does not parse.
    BadValue(&'static str),
    /// A frontier or rate curve is empty or not monotone.
    Curve(FrontierError),
    /// A required record is missing (the error's `key` names it).
    Missing,
    /// A split point outside `1..n`.
    SplitOutOfRange,
    /// A split point lacks one of its four records (the error's `key` names it).
    SplitIncomplete,
}

/// An error in a profile: the 1-based line (0: the whole file) and the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileError {
    /// 1-based line; 0 when a record is missing.
    pub line: u32,
    /// The key at fault (`frontier`, `split.2.tail.service`, …).
    pub key: String,
    /// What is wrong.
    pub kind: ProfileErrorKind,
}

impl fmt::Display for ProfileErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileErrorKind::MissingVersion => f.write_str("the first record must be version=1"),
            ProfileErrorKind::UnsupportedVersion => f.write_str("unsupported version (this parser reads 1)"),
            ProfileErrorKind::NotKeyValue => f.write_str("expected key=value"),
            ProfileErrorKind::UnknownKey => f.write_str("unknown key"),
            ProfileErrorKind::Duplicate => f.write_str("given twice"),
            ProfileErrorKind::BadValue(what) => write!(f, "expected {what}"),
            ProfileErrorKind::Curve(e) => write!(f, "{e}"),
            ProfileErrorKind::Missing => f.write_str("missing"),
            ProfileErrorKind::SplitOutOfRange => f.write_str("split point must lie in 1..number of nfs"),
            ProfileErrorKind::SplitIncomplete => f.write_str("split point incomplete: missing record"),
        }
    }
}

impl fmt::Display for ProfileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "profile: {}: {}", self.key, self.kind)
        } else {
            write!(f, "profile line {}: {}: {}", self.line, self.key, self.kind)
        }
    }
}

fn err(line: u32, key: &str, kind: ProfileErrorKind) -> ProfileError {
    ProfileError { line, key: String::from(key), kind }
}

/// `a:b,c:d,…` as pairs of `u64`.
fn pairs(v: &str) -> impl Iterator<Item = Result<(u64, u64), ()>> + '_ {
    v.split(',').filter(|s| !s.trim().is_empty()).map(|item| {
        let (a, b) = item.split_once(':').ok_or(())?;
        Ok((u64_dec(a.trim()).map_err(|_| ())?, u64_dec(b.trim()).map_err(|_| ())?))
    })
}

fn frontier(line: u32, key: &str, v: &str) -> Result<Frontier, ProfileError> {
    let bad = || err(line, key, ProfileErrorKind::BadValue("flows:packets pairs of u32"));
    let mut pts = Vec::new();
    for p in pairs(v) {
        let (f, p) = p.map_err(|()| bad())?;
        let (Ok(flows), Ok(packets)) = (u32::try_from(f), u32::try_from(p)) else { return Err(bad()) };
        pts.push(FrontierPoint { flows, packets });
    }
    Frontier::try_new(pts).map_err(|e| err(line, key, ProfileErrorKind::Curve(e)))
}

fn rate(line: u32, key: &str, v: &str) -> Result<RateCurve, ProfileError> {
    let mut pts = Vec::new();
    for p in pairs(v) {
        let (f, pps) = p.map_err(|()| err(line, key, ProfileErrorKind::BadValue("flows:pps pairs")))?;
        let flows = u32::try_from(f).map_err(|_| err(line, key, ProfileErrorKind::BadValue("flows as u32")))?;
        pts.push(RatePoint { flows, pps });
    }
    RateCurve::try_new(pts).map_err(|e| err(line, key, ProfileErrorKind::Curve(e)))
}

fn service(line: u32, key: &str, v: &str) -> Result<ServiceCost, ProfileError> {
    let bad = || err(line, key, ProfileErrorKind::BadValue("packet_cycles:N,flow_cycles:N"));
    let (mut pc, mut fc) = (None, None);
    for item in v.split(',').filter(|s| !s.trim().is_empty()) {
        let (name, n) = item.split_once(':').ok_or_else(bad)?;
        let n = u32_dec(n.trim()).map_err(|_| bad())?;
        match name.trim() {
            "packet_cycles" if pc.is_none() => pc = Some(n),
            "flow_cycles" if fc.is_none() => fc = Some(n),
            _ => return Err(bad()),
        }
    }
    match (pc, fc) {
        (Some(packet_cycles), Some(flow_cycles)) => Ok(ServiceCost { packet_cycles, flow_cycles }),
        _ => Err(bad()),
    }
}

/// A split point's records as they are read.
#[derive(Default)]
struct SplitParts {
    k: u8,
    line: u32,
    head_frontier: Option<Frontier>,
    head_service: Option<ServiceCost>,
    tail_frontier: Option<Frontier>,
    tail_service: Option<ServiceCost>,
}

fn set<T>(slot: &mut Option<T>, value: T, line: u32, key: &str) -> Result<(), ProfileError> {
    if slot.is_some() {
        return Err(err(line, key, ProfileErrorKind::Duplicate));
    }
    *slot = Some(value);
    Ok(())
}

impl Profile {
    /// Parses the text form (see the module docs); every error names line and key.
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let mut version_seen = false;
        let mut nfs: Option<Vec<String>> = None;
        let (mut tsc_hz, mut epoch_ns) = (None, None);
        let (mut full_frontier, mut full_service, mut rate_curve) = (None, None, None);
        let mut splits: Vec<SplitParts> = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = u32::try_from(i + 1).unwrap_or(u32::MAX);
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            // A comment after a record.
            let l = l.split_once(" #").map_or(l, |(a, _)| a).trim();
            let Some((key, value)) = l.split_once('=') else {
                return Err(err(line, l, ProfileErrorKind::NotKeyValue));
            };
            let (key, value) = (key.trim(), value.trim());
            if !version_seen {
                if key != "version" {
                    return Err(err(line, key, ProfileErrorKind::MissingVersion));
                }
                if u32_dec(value) != Ok(VERSION) {
                    return Err(err(line, key, ProfileErrorKind::UnsupportedVersion));
                }
                version_seen = true;
                continue;
            }
            let num =
                |v: &str| u64_dec(v).map_err(|_| err(line, key, ProfileErrorKind::BadValue("an unsigned integer")));
            match key {
                "version" => return Err(err(line, key, ProfileErrorKind::Duplicate)),
                "nfs" => {
                    let names = value.split(',').map(|s| String::from(s.trim())).filter(|s| !s.is_empty()).collect();
                    set(&mut nfs, names, line, key)?;
                }
                "tsc_hz" => set(&mut tsc_hz, num(value)?, line, key)?,
                "epoch_ns" => set(&mut epoch_ns, num(value)?, line, key)?,
                "frontier" => set(&mut full_frontier, frontier(line, key, value)?, line, key)?,
                "service" => set(&mut full_service, service(line, key, value)?, line, key)?,
                "rate" => set(&mut rate_curve, rate(line, key, value)?, line, key)?,
                _ => {
                    let mut it = key.split('.');
                    let (Some("split"), Some(k), Some(side), Some(what), None) =
                        (it.next(), it.next(), it.next(), it.next(), it.next())
                    else {
                        return Err(err(line, key, ProfileErrorKind::UnknownKey));
                    };
                    let k = u8::try_from(u32_dec(k).unwrap_or(0)).unwrap_or(0);
                    if k == 0 {
                        return Err(err(line, key, ProfileErrorKind::SplitOutOfRange));
                    }
                    let idx = match splits.iter().position(|s| s.k == k) {
                        Some(i) => i,
                        None => {
                            splits.push(SplitParts { k, line, ..SplitParts::default() });
                            splits.len() - 1
                        }
                    };
                    let Some(s) = splits.get_mut(idx) else { return Err(err(line, key, ProfileErrorKind::UnknownKey)) };
                    match (side, what) {
                        ("head", "frontier") => set(&mut s.head_frontier, frontier(line, key, value)?, line, key)?,
                        ("head", "service") => set(&mut s.head_service, service(line, key, value)?, line, key)?,
                        ("tail", "frontier") => set(&mut s.tail_frontier, frontier(line, key, value)?, line, key)?,
                        ("tail", "service") => set(&mut s.tail_service, service(line, key, value)?, line, key)?,
                        _ => return Err(err(line, key, ProfileErrorKind::UnknownKey)),
                    }
                }
            }
        }
        if !version_seen {
            return Err(err(0, "version", ProfileErrorKind::MissingVersion));
        }
        let missing = |key: &str| err(0, key, ProfileErrorKind::Missing);
        let nfs = nfs.unwrap_or_default();
        let n = nfs.len();
        splits.sort_by_key(|s| s.k);
        let mut out = Vec::with_capacity(splits.len());
        for s in splits {
            if n > 0 && usize::from(s.k) >= n {
                return Err(err(s.line, "split", ProfileErrorKind::SplitOutOfRange));
            }
            let incomplete = |what: &str| {
                let mut key = String::from("split.");
                let _ = fmt::write(&mut key, format_args!("{}.{what}", s.k));
                err(s.line, &key, ProfileErrorKind::SplitIncomplete)
            };
            let head = Part {
                frontier: s.head_frontier.ok_or_else(|| incomplete("head.frontier"))?,
                service: s.head_service.ok_or_else(|| incomplete("head.service"))?,
            };
            let tail = Part {
                frontier: s.tail_frontier.ok_or_else(|| incomplete("tail.frontier"))?,
                service: s.tail_service.ok_or_else(|| incomplete("tail.service"))?,
            };
            out.push(SplitProfile { k: s.k, head, tail });
        }
        Ok(Profile {
            nfs,
            tsc_hz: tsc_hz.filter(|&h| h > 0).ok_or_else(|| missing("tsc_hz"))?,
            epoch_ns: epoch_ns.filter(|&e| e > 0).ok_or_else(|| missing("epoch_ns"))?,
            full: Part {
                frontier: full_frontier.ok_or_else(|| missing("frontier"))?,
                service: full_service.ok_or_else(|| missing("service"))?,
            },
            rate: rate_curve.ok_or_else(|| missing("rate"))?,
            splits: out,
        })
    }

    /// Writes the records of the text form (no header comments), which
    /// [`Profile::parse`] reads back to an equal profile.
    pub fn write(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        fn frontier(w: &mut dyn fmt::Write, key: &str, f: &Frontier) -> fmt::Result {
            write!(w, "{key}=")?;
            for (i, p) in f.points().iter().enumerate() {
                write!(w, "{}{}:{}", if i > 0 { "," } else { "" }, p.flows, p.packets)?;
            }
            writeln!(w)
        }
        fn service(w: &mut dyn fmt::Write, key: &str, s: &ServiceCost) -> fmt::Result {
            writeln!(w, "{key}=packet_cycles:{},flow_cycles:{}", s.packet_cycles, s.flow_cycles)
        }
        writeln!(w, "version={VERSION}")?;
        write!(w, "nfs=")?;
        for (i, n) in self.nfs.iter().enumerate() {
            write!(w, "{}{n}", if i > 0 { "," } else { "" })?;
        }
        writeln!(w)?;
        writeln!(w, "tsc_hz={}", self.tsc_hz)?;
        writeln!(w, "epoch_ns={}", self.epoch_ns)?;
        frontier(w, "frontier", &self.full.frontier)?;
        service(w, "service", &self.full.service)?;
        write!(w, "rate=")?;
        for (i, p) in self.rate.points().iter().enumerate() {
            write!(w, "{}{}:{}", if i > 0 { "," } else { "" }, p.flows, p.pps)?;
        }
        writeln!(w)?;
        for s in &self.splits {
            let mut key = String::new();
            for (side, part) in [("head", &s.head), ("tail", &s.tail)] {
                key.clear();
                write!(key, "split.{}.{side}.frontier", s.k)?;
                frontier(w, &key, &part.frontier)?;
                key.clear();
                write!(key, "split.{}.{side}.service", s.k)?;
                service(w, &key, &part.service)?;
            }
        }
        Ok(())
    }
}

use core::fmt::Write as _;
