//! The firmware ↔ host protocol of `docs/PROTOCOL.md`, host side: boot options, exit
//! statuses, the `@banner` / `@nic` / `@stats` / `@summary` machine lines on COM1, and the
//! control frames.
//!
//! PROTOCOL.md: "machine lines that start with `@` followed by space-separated
//! `key=value` pairs (values never contain spaces, except `cpu="…"`, which is quoted)".

use std::collections::BTreeMap;
use std::fmt;

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;

/// QEMU exit status of a successful run (isa-debug-exit value 0x10).
pub const EXIT_SUCCESS: i32 = 33;
/// Bad boot configuration (0x11).
pub const EXIT_BAD_CONFIG: i32 = 35;
/// Runtime failure: no NIC, driver init failed, `max_s` reached (0x12).
pub const EXIT_RUNTIME_FAILURE: i32 = 37;
/// Panic (0x13).
pub const EXIT_PANIC: i32 = 39;
/// Triple fault under `-no-reboot`: always a failure.
pub const EXIT_TRIPLE_FAULT: i32 = 0;

/// What a QEMU exit status means, per PROTOCOL.md's table.
pub fn describe_exit(status: Option<i32>) -> &'static str {
    match status {
        Some(EXIT_SUCCESS) => "success",
        Some(EXIT_BAD_CONFIG) => "bad boot configuration",
        Some(EXIT_RUNTIME_FAILURE) => "runtime failure (no NIC, driver init failed or max_s reached)",
        Some(EXIT_PANIC) => "panic",
        Some(EXIT_TRIPLE_FAULT) => "triple fault (or QEMU quit on its own)",
        Some(_) => "unknown status",
        None => "killed by a signal",
    }
}

/// Exit codes of the hosted binary (a Linux program: 0 is success) — the same outcomes as
/// the image's exit statuses.
pub mod hosted_exit {
    /// Stopped by a STOP control frame, everything wound down.
    pub const SUCCESS: i32 = 0;
    /// Runtime failure (an interface missing, a socket refused, `max_s` reached).
    pub const RUNTIME_FAILURE: i32 = 1;
    /// Bad configuration (a command-line option or the chain file).
    pub const BAD_CONFIG: i32 = 2;
    /// A Rust panic (the default exit code of a panicking `main`).
    pub const PANIC: i32 = 101;
}

/// The image's exit status for a hosted exit code (0 → 33, 2 → 35, 1 → 37, 101 → 39), so
/// one rig and one set of checks serve both; any other code is passed on + 1000, which
/// [`describe_exit`] calls unknown.
pub fn hosted_exit_status(code: i32) -> i32 {
    match code {
        hosted_exit::SUCCESS => EXIT_SUCCESS,
        hosted_exit::BAD_CONFIG => EXIT_BAD_CONFIG,
        hosted_exit::RUNTIME_FAILURE => EXIT_RUNTIME_FAILURE,
        hosted_exit::PANIC => EXIT_PANIC,
        other => other.saturating_add(1000),
    }
}

/// The allowed `tsc_source` values.
pub const TSC_SOURCES: [&str; 5] = ["hv-leaf", "cpuid-15h", "cpuid-16h", "pm-timer", "pit"];

/// EtherType of control frames (IEEE 802 local experimental).
pub const CONTROL_ETHERTYPE: u16 = 0x88B5;
/// The 8 ASCII bytes that start a control frame's payload.
pub const CONTROL_MAGIC: &[u8; 8] = b"CADENCE2";

/// A control command (docs/PROTOCOL.md, "Control frames").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Flush TX, print `@summary`, exit 33.
    Stop,
    /// Print one `@stats` line now.
    Stats,
    /// Steer every RSS bucket of receive queue `from` to queue `to`.
    RssMove { from: u8, to: u8 },
    /// Undo the last RSS_MOVE.
    RssRestore,
}

impl Control {
    fn bytes(self) -> Vec<u8> {
        match self {
            Control::Stop => vec![0x01],
            Control::Stats => vec![0x02],
            Control::RssMove { from, to } => vec![0x03, from, to],
            Control::RssRestore => vec![0x04],
        }
    }
}

pub use cadence_ctl::ctl::random_ctl_key;

/// The `ctl_key=` boot option value of `key`: 32 hex digits.
pub fn ctl_key_hex(key: &[u8; 16]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// Builds a signed control frame: Ethernet header (dst, src, 0x88B5), `CADENCE2`, the boot's
/// nonce (`ctl_nonce` of `@ready`) and the counter (u64 big-endian each), the command bytes,
/// and the SipHash-2-4 tag (u64 big-endian) under `key` of everything from the magic on; zero
/// padding to the 60-byte minimum. Written from docs/PROTOCOL.md with the `siphasher` crate,
/// independently of the image's own check (`cadence_core::control`).
pub fn control_frame(dst: Mac, src: Mac, cmd: Control, key: &[u8; 16], nonce: u64, counter: u64) -> Vec<u8> {
    use std::hash::Hasher as _;
    let mut signed = CONTROL_MAGIC.to_vec();
    signed.extend_from_slice(&nonce.to_be_bytes());
    signed.extend_from_slice(&counter.to_be_bytes());
    signed.extend_from_slice(&cmd.bytes());
    let mut h = siphasher::sip::SipHasher24::new_with_key(key);
    h.write(&signed);
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&CONTROL_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&signed);
    f.extend_from_slice(&h.finish().to_be_bytes());
    f.resize(f.len().max(60), 0);
    f
}

/// The old, unsigned control frame (magic + command byte): what any host on a data segment
/// could send before control was authenticated. Tests send it to prove it is refused.
pub fn unsigned_control_frame(dst: Mac, src: Mac, cmd: Control) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    f.extend_from_slice(&CONTROL_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(CONTROL_MAGIC);
    f.extend_from_slice(&cmd.bytes());
    f.resize(60, 0);
    f
}

/// An Ethernet MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Mac(pub [u8; 6]);

impl fmt::Display for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

impl Serialize for Mac {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::str::FromStr for Mac {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for b in &mut out {
            let p = parts.next().ok_or_else(|| anyhow!("MAC '{s}': too few bytes"))?;
            if p.len() != 2 {
                bail!("MAC '{s}': each byte is two hex digits");
            }
            *b = u8::from_str_radix(p, 16).with_context(|| format!("MAC '{s}'"))?;
        }
        if parts.next().is_some() {
            bail!("MAC '{s}': too many bytes");
        }
        Ok(Mac(out))
    }
}

/// Boot options for `-append`, in the order given. Values are not validated here: the
/// tests hand the firmware bad ones on purpose.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BootOptions(pub Vec<(String, String)>);

impl BootOptions {
    /// Adds (or replaces) `key=value`.
    pub fn set(mut self, key: &str, value: impl ToString) -> Self {
        let value = value.to_string();
        match self.0.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key.to_string(), value)),
        }
        self
    }

    /// Appends raw `key=value` words (e.g. `--extra-append`), keeping duplicates.
    pub fn extend_raw(mut self, words: &str) -> Self {
        for w in words.split_whitespace() {
            let (k, v) = w.split_once('=').unwrap_or((w, ""));
            self.0.push((k.to_string(), v.to_string()));
        }
        self
    }

    /// The `-append` string.
    pub fn to_cmdline(&self) -> String {
        self.0
            .iter()
            .map(|(k, v)| if v.is_empty() { k.clone() } else { format!("{k}={v}") })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// One parsed machine line: `@<kind> k=v …`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MachineLine {
    /// `banner`, `nic`, `stats`, `summary`, …
    pub kind: String,
    /// The pairs, values unquoted.
    pub fields: BTreeMap<String, String>,
}

impl MachineLine {
    /// Parses a COM1 line; `None` when it is not a machine line (does not start with
    /// `@`). Leading/trailing whitespace and `\r` are ignored.
    pub fn parse(line: &str) -> Option<Result<MachineLine>> {
        let line = line.trim();
        let rest = line.strip_prefix('@')?;
        Some(parse_fields(rest).with_context(|| format!("malformed machine line: {line}")))
    }

    /// A field's raw value.
    pub fn str(&self, key: &str) -> Result<&str> {
        self.fields.get(key).map(String::as_str).ok_or_else(|| anyhow!("@{} line has no '{key}'", self.kind))
    }

    /// A field parsed as an unsigned integer.
    pub fn u64(&self, key: &str) -> Result<u64> {
        let v = self.str(key)?;
        v.parse().with_context(|| format!("@{} {key}={v}: not an unsigned integer", self.kind))
    }

    /// Every field that parses as an unsigned integer (the counters of `@stats` and
    /// `@summary`).
    pub fn counters(&self) -> Counters {
        Counters(self.fields.iter().filter_map(|(k, v)| v.parse::<u64>().ok().map(|n| (k.clone(), n))).collect())
    }
}

fn parse_fields(rest: &str) -> Result<MachineLine> {
    let (kind, mut s) = match rest.find(' ') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    if kind.is_empty() || !kind.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        bail!("bad line kind '{kind}'");
    }
    let mut fields = BTreeMap::new();
    loop {
        s = s.trim_start();
        if s.is_empty() {
            break;
        }
        let eq = s.find('=').ok_or_else(|| anyhow!("'{s}': expected key=value"))?;
        let key = &s[..eq];
        if key.is_empty() || key.contains(' ') {
            bail!("'{s}': bad key");
        }
        s = &s[eq + 1..];
        let value;
        if let Some(q) = s.strip_prefix('"') {
            let end = q.find('"').ok_or_else(|| anyhow!("{key}: unterminated quote"))?;
            value = &q[..end];
            s = &q[end + 1..];
            if !(s.is_empty() || s.starts_with(' ')) {
                bail!("{key}: text right after the closing quote");
            }
        } else {
            let end = s.find(' ').unwrap_or(s.len());
            value = &s[..end];
            s = &s[end..];
        }
        if fields.insert(key.to_string(), value.to_string()).is_some() {
            bail!("key '{key}' given twice");
        }
    }
    Ok(MachineLine { kind: kind.to_string(), fields })
}

/// The `@banner` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Banner {
    pub version: String,
    pub cpu: String,
    pub tsc_hz: u64,
    pub tsc_source: String,
    pub tsc_check: String,
    pub mem_mib: u64,
    pub cores: u64,
    pub nics: u64,
}

impl Banner {
    /// From a parsed `@banner` line.
    pub fn from_line(l: &MachineLine) -> Result<Banner> {
        if l.kind != "banner" {
            bail!("expected @banner, got @{}", l.kind);
        }
        Ok(Banner {
            version: l.str("version")?.to_string(),
            cpu: l.str("cpu")?.to_string(),
            tsc_hz: l.u64("tsc_hz")?,
            tsc_source: l.str("tsc_source")?.to_string(),
            tsc_check: l.str("tsc_check")?.to_string(),
            mem_mib: l.u64("mem_mib")?,
            cores: l.u64("cores")?,
            nics: l.u64("nics")?,
        })
    }
}

/// An `@nic` line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Nic {
    pub index: u64,
    pub kind: String,
    pub pci: String,
    pub mac: Mac,
    pub rxq: u64,
    pub txq: u64,
    pub qsize: u64,
}

impl Nic {
    /// From a parsed `@nic` line.
    pub fn from_line(l: &MachineLine) -> Result<Nic> {
        if l.kind != "nic" {
            bail!("expected @nic, got @{}", l.kind);
        }
        Ok(Nic {
            index: l.u64("index")?,
            kind: l.str("kind")?.to_string(),
            pci: l.str("pci")?.to_string(),
            mac: l.str("mac")?.parse()?,
            rxq: l.u64("rxq")?,
            txq: l.u64("txq")?,
            qsize: l.u64("qsize")?,
        })
    }
}

/// The integer counters of a `@stats` or `@summary` line, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Counters(pub BTreeMap<String, u64>);

impl Counters {
    /// A counter, 0 when absent.
    pub fn get(&self, key: &str) -> u64 {
        self.0.get(key).copied().unwrap_or(0)
    }

    /// A counter that must be present.
    pub fn require(&self, key: &str) -> Result<u64> {
        self.0.get(key).copied().ok_or_else(|| anyhow!("counter '{key}' missing"))
    }

    /// Every `drop_<reason>` counter, keyed by reason.
    pub fn drops_by_reason(&self) -> BTreeMap<String, u64> {
        self.0.iter().filter_map(|(k, v)| k.strip_prefix("drop_").map(|r| (r.to_string(), *v))).collect()
    }

    /// A one-line digest for the live view.
    pub fn compact(&self) -> String {
        let mut s = format!(
            "fw: p0 rx={} tx={} | p1 rx={} tx={} | drops={}",
            self.get("p0_rx"),
            self.get("p0_tx"),
            self.get("p1_rx"),
            self.get("p1_tx"),
            self.get("drops")
        );
        for (r, n) in self.drops_by_reason() {
            if n > 0 {
                s.push_str(&format!(" {r}={n}"));
            }
        }
        s.push_str(&format!(" pool_in_use={}", self.get("pool_in_use")));
        s
    }
}

/// Everything the host learned from COM1's machine lines.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub banner: Option<Banner>,
    pub nics: Vec<Nic>,
    pub last_stats: Option<Counters>,
    pub summary: Option<Counters>,
    /// The NFs of `@chain nfs=…` (empty: none, or no such line yet).
    pub chain: Vec<String>,
    /// `@ready` was seen: every lane's receive rings are filled and the workers run.
    pub ready: bool,
    /// `pool_in_use` of `@ready`: buffers out of the pools at rest (in the receive rings).
    pub resting_pool: Option<u64>,
    /// `ctl_nonce` of `@ready`: the boot nonce control frames must be signed for.
    pub ctl_nonce: Option<u64>,
    /// `error: …` lines (bad boot options) and machine lines that failed to parse.
    pub errors: Vec<String>,
    /// Management replies (`@ctl` lines), gathered per request.
    #[serde(skip)]
    pub ctl: cadence_ctl::ctl::Replies,
}

impl Report {
    /// Feeds one COM1 line; returns the parsed machine line, if it was one.
    pub fn feed(&mut self, line: &str) -> Option<MachineLine> {
        if line.starts_with("@ctl ") {
            self.ctl.feed(line);
            return None;
        }
        if line.trim_start().starts_with("error:") {
            self.errors.push(line.trim().to_string());
        }
        match MachineLine::parse(line)? {
            Err(e) => {
                self.errors.push(format!("{e:#}"));
                None
            }
            Ok(l) => {
                let res = match l.kind.as_str() {
                    "banner" => Banner::from_line(&l).map(|b| self.banner = Some(b)),
                    "nic" => Nic::from_line(&l).map(|n| self.nics.push(n)),
                    "stats" => {
                        self.last_stats = Some(l.counters());
                        Ok(())
                    }
                    "summary" => {
                        self.summary = Some(l.counters());
                        Ok(())
                    }
                    "ready" => {
                        self.ready = true;
                        self.resting_pool = l.u64("pool_in_use").ok();
                        self.ctl_nonce = l.str("ctl_nonce").ok().and_then(|h| u64::from_str_radix(h, 16).ok());
                        Ok(())
                    }
                    "chain" => l.str("nfs").map(|n| {
                        self.chain = n.split(',').filter(|n| !n.is_empty() && *n != "none").map(String::from).collect();
                    }),
                    _ => Ok(()),
                };
                if let Err(e) = res {
                    self.errors.push(format!("{e:#}"));
                }
                Some(l)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BANNER: &str = r#"@banner version=0.1.0 cpu="QEMU TCG CPU version 2.5+" tsc_hz=2599012345 tsc_source=pm-timer tsc_check=pit mem_mib=255 cores=1 nics=2"#;

    #[test]
    fn parses_banner_with_quoted_cpu() -> Result<()> {
        let l = MachineLine::parse(BANNER).ok_or_else(|| anyhow!("not a machine line"))??;
        let b = Banner::from_line(&l)?;
        assert_eq!(b.cpu, "QEMU TCG CPU version 2.5+");
        assert_eq!(b.tsc_hz, 2_599_012_345);
        assert_eq!(b.tsc_source, "pm-timer");
        assert_eq!((b.cores, b.nics, b.mem_mib), (1, 2, 255));
        Ok(())
    }

    #[test]
    fn parses_nic_and_counters() -> Result<()> {
        let mut r = Report::default();
        r.feed("@nic index=0 kind=virtio-net pci=00:03.0 mac=52:54:00:00:00:10 rxq=1 txq=1 qsize=256\r");
        r.feed("@summary t_ms=5 p0_rx=10 p1_rx=3 drops=2 drop_runt=2 drop_tx_full=0 ctl=1");
        r.feed("boot: plain text is ignored");
        r.feed("error: boot option 'bogus': unknown key (known: mode)");
        assert_eq!(r.nics.len(), 1);
        assert_eq!(r.nics[0].mac, "52:54:00:00:00:10".parse()?);
        let s = r.summary.ok_or_else(|| anyhow!("no summary"))?;
        assert_eq!(s.get("p0_rx") + s.get("p1_rx"), 13);
        assert_eq!(s.drops_by_reason().get("runt"), Some(&2));
        assert_eq!(s.get("absent"), 0);
        assert_eq!(r.errors.len(), 1);
        Ok(())
    }

    #[test]
    fn rejects_malformed_lines() {
        for bad in ["@banner cpu=\"unterminated", "@nic novalue", "@stats a=1 a=2", "@ a=1", "@stats cpu=\"x\"y"] {
            assert!(matches!(MachineLine::parse(bad), Some(Err(_))), "{bad}");
        }
        assert!(MachineLine::parse("not machine").is_none());
        assert!(matches!(MachineLine::parse("@stats"), Some(Ok(_))));
    }

    #[test]
    fn mac_round_trip_and_errors() -> Result<()> {
        let m: Mac = "02:00:00:ca:de:0f".parse()?;
        assert_eq!(m.to_string(), "02:00:00:ca:de:0f");
        for bad in ["02:00:00:ca:de", "02:00:00:ca:de:0f:00", "2:00:00:ca:de:0f", "zz:00:00:00:00:00"] {
            assert!(bad.parse::<Mac>().is_err(), "{bad}");
        }
        Ok(())
    }

    #[test]
    fn control_frame_layout() {
        let key = [7u8; 16];
        let mv = Control::RssMove { from: 2, to: 5 };
        let f = control_frame(Mac([1; 6]), Mac([2; 6]), mv, &key, 0xA1A2_A3A4_A5A6_A7A8, 0x0102);
        assert_eq!(f.len(), 60);
        assert_eq!(&f[12..14], &[0x88, 0xB5]);
        assert_eq!(&f[14..22], b"CADENCE2");
        assert_eq!(&f[22..30], &[0xA1, 0xA2, 0xA3, 0xA4, 0xA5, 0xA6, 0xA7, 0xA8], "nonce, big-endian");
        assert_eq!(&f[30..38], &[0, 0, 0, 0, 0, 0, 1, 2], "counter, big-endian");
        assert_eq!(&f[38..41], &[3, 2, 5]);
        // The tag covers magic..arguments; a different counter or nonce changes it.
        let g = control_frame(Mac([1; 6]), Mac([2; 6]), mv, &key, 0xA1A2_A3A4_A5A6_A7A8, 0x0103);
        assert_ne!(&f[41..49], &g[41..49]);
        let h = control_frame(Mac([1; 6]), Mac([2; 6]), mv, &key, 0xA1A2_A3A4_A5A6_A7A9, 0x0102);
        assert_ne!(&f[41..49], &h[41..49]);
        assert!(f[49..].iter().all(|&b| b == 0));
        assert_eq!(ctl_key_hex(&[0xab; 16]), "ab".repeat(16));
        assert_ne!(random_ctl_key(), random_ctl_key());
    }

    #[test]
    fn boot_options_cmdline() {
        let o =
            BootOptions::default().set("ctl", "on").set("max_s", 70).set("ctl", "off").extend_raw("bogus=1  burst=99");
        assert_eq!(o.to_cmdline(), "ctl=off max_s=70 bogus=1 burst=99");
    }

    #[test]
    fn exit_descriptions() {
        assert_eq!(describe_exit(Some(33)), "success");
        assert_eq!(describe_exit(Some(0)), "triple fault (or QEMU quit on its own)");
        assert_eq!(describe_exit(None), "killed by a signal");
    }
}
