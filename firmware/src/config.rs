//! The boot configuration: knobs on the kernel command line.
//!
//! The command line is a list of `key=value` pairs separated by spaces
//! (docs/PROTOCOL.md lists every key). Parsing is strict: an unknown key, a key
//! given twice, a token without `=`, or a value out of range is an error naming the
//! key, and the image refuses to start (exit status 35).

use core::fmt;

/// What the image does after booting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(target_os = "none", derive(defmt::Format))]
pub enum Mode {
    /// Forward port 0 ↔ port 1 until a STOP control frame or `max_s`.
    Forward,
    /// Print the banner and the NICs found, then exit with success.
    Boot,
}

/// Every knob, with its default. See docs/PROTOCOL.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BootConfig {
    /// What to do.
    pub mode: Mode,
    /// Period of `@stats` lines in milliseconds; 0 = off.
    pub stats_ms: u32,
    /// Give up after this many seconds without STOP; 0 = never.
    pub max_s: u32,
    /// Accept control frames.
    pub ctl: bool,
    /// Next-hop MAC for frames leaving port 0 and port 1.
    pub peer: [[u8; 6]; 2],
    /// Packet buffers in the pool.
    pub pool: usize,
    /// Virtqueue size.
    pub qsize: u16,
}

impl Default for BootConfig {
    fn default() -> Self {
        Self {
            mode: Mode::Forward,
            stats_ms: 1000,
            max_s: 0,
            ctl: false,
            peer: [[0x02, 0, 0, 0, 0x01, 0x00], [0x02, 0, 0, 0, 0x01, 0x01]],
            pool: 4096,
            qsize: 256,
        }
    }
}

/// Every key the command line accepts, in the order of docs/PROTOCOL.md.
pub const KEYS: [&str; 8] = ["mode", "stats_ms", "max_s", "ctl", "peer0", "peer1", "pool", "qsize"];

/// Why the command line was refused. Borrowed from the command line itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError<'a> {
    /// A token without `=`.
    NotKeyValue {
        /// The token.
        token: &'a str,
    },
    /// A key that is not in [`KEYS`].
    UnknownKey {
        /// The key.
        key: &'a str,
    },
    /// A key given more than once.
    Duplicate {
        /// The key.
        key: &'a str,
    },
    /// A value that does not parse or is out of range.
    BadValue {
        /// The key.
        key: &'a str,
        /// What the key takes.
        expected: &'static str,
        /// What was given.
        got: &'a str,
    },
}

impl fmt::Display for ConfigError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::NotKeyValue { token } => {
                write!(f, "boot option '{token}': expected key=value")
            }
            ConfigError::UnknownKey { key } => {
                write!(f, "boot option '{key}': unknown key (known: ")?;
                for (i, k) in KEYS.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(k)?;
                }
                f.write_str(")")
            }
            ConfigError::Duplicate { key } => write!(f, "boot option '{key}': given more than once"),
            ConfigError::BadValue { key, expected, got } => {
                write!(f, "boot option '{key}': expected {expected}, got '{got}'")
            }
        }
    }
}

impl BootConfig {
    /// Parses a kernel command line. An empty line gives the defaults.
    pub fn parse(cmdline: &str) -> Result<Self, ConfigError<'_>> {
        let mut cfg = Self::default();
        let mut seen = [false; KEYS.len()];
        for token in cmdline.split_ascii_whitespace() {
            let Some((key, value)) = token.split_once('=') else {
                return Err(ConfigError::NotKeyValue { token });
            };
            let Some(slot) = KEYS.iter().position(|k| *k == key) else {
                return Err(ConfigError::UnknownKey { key });
            };
            if core::mem::replace(&mut seen[slot], true) {
                return Err(ConfigError::Duplicate { key });
            }
            let bad = |expected| ConfigError::BadValue { key, expected, got: value };
            match key {
                "mode" => {
                    cfg.mode = match value {
                        "forward" => Mode::Forward,
                        "boot" => Mode::Boot,
                        _ => return Err(bad("one of forward, boot")),
                    }
                }
                "stats_ms" => cfg.stats_ms = int_in(value, 0, 60_000).ok_or(bad("an integer in 0..=60000"))?,
                "max_s" => cfg.max_s = int_in(value, 0, 86_400).ok_or(bad("an integer in 0..=86400"))?,
                "ctl" => {
                    cfg.ctl = match value {
                        "on" => true,
                        "off" => false,
                        _ => return Err(bad("one of on, off")),
                    }
                }
                "peer0" | "peer1" => {
                    let port = usize::from(key == "peer1");
                    cfg.peer[port] = parse_mac(value).ok_or(bad("a MAC address xx:xx:xx:xx:xx:xx"))?;
                }
                "pool" => cfg.pool = int_in(value, 256, 16_384).ok_or(bad("an integer in 256..=16384"))? as usize,
                "qsize" => {
                    cfg.qsize = int_in(value, 64, 1024)
                        .filter(|q| q.is_power_of_two())
                        .ok_or(bad("one of 64, 128, 256, 512, 1024"))? as u16
                }
                // Every key of KEYS is matched above.
                _ => return Err(ConfigError::UnknownKey { key }),
            }
        }
        Ok(cfg)
    }
}

/// A decimal integer in `lo..=hi`.
fn int_in(s: &str, lo: u32, hi: u32) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().filter(|v| (lo..=hi).contains(v))
}

/// `xx:xx:xx:xx:xx:xx`, hex digits in either case.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for byte in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Writes `mac` as `xx:xx:xx:xx:xx:xx`.
#[derive(Debug, Clone, Copy)]
pub struct MacFmt(pub [u8; 6]);

impl fmt::Display for MacFmt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", m[0], m[1], m[2], m[3], m[4], m[5])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_line_gives_defaults() {
        assert_eq!(BootConfig::parse("").unwrap(), BootConfig::default());
        assert_eq!(BootConfig::parse("   ").unwrap(), BootConfig::default());
    }

    #[test]
    fn every_key_parses() {
        let c = BootConfig::parse(
            "mode=boot stats_ms=0 max_s=70 ctl=on peer0=52:54:00:AA:bb:01 peer1=02:00:00:00:00:09 pool=1024 qsize=512",
        )
        .unwrap();
        assert_eq!(c.mode, Mode::Boot);
        assert_eq!(c.stats_ms, 0);
        assert_eq!(c.max_s, 70);
        assert!(c.ctl);
        assert_eq!(c.peer[0], [0x52, 0x54, 0, 0xaa, 0xbb, 1]);
        assert_eq!(c.peer[1], [2, 0, 0, 0, 0, 9]);
        assert_eq!((c.pool, c.qsize), (1024, 512));
    }

    #[test]
    fn unknown_key_is_named_with_the_known_ones() {
        let e = BootConfig::parse("ctl=on bogus=1").unwrap_err();
        assert_eq!(e, ConfigError::UnknownKey { key: "bogus" });
        let msg = e.to_string();
        assert!(msg.starts_with("boot option 'bogus': unknown key (known: mode, stats_ms"), "{msg}");
    }

    #[test]
    fn bad_values_name_key_and_value() {
        for (line, key, got) in [
            ("pool=99999", "pool", "99999"),
            ("pool=-1", "pool", "-1"),
            ("pool=", "pool", ""),
            ("max_s=1.5", "max_s", "1.5"),
            ("qsize=300", "qsize", "300"),
            ("pool=10", "pool", "10"),
            ("mode=fast", "mode", "fast"),
            ("ctl=yes", "ctl", "yes"),
            ("peer0=01:02:03", "peer0", "01:02:03"),
            ("peer1=01:02:03:04:05:06:07", "peer1", "01:02:03:04:05:06:07"),
            ("peer1=0g:02:03:04:05:06", "peer1", "0g:02:03:04:05:06"),
            ("stats_ms=99999999999999", "stats_ms", "99999999999999"),
        ] {
            match BootConfig::parse(line) {
                Err(ConfigError::BadValue { key: k, got: g, .. }) => assert_eq!((k, g), (key, got), "{line}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        let msg = BootConfig::parse("qsize=300").unwrap_err().to_string();
        assert_eq!(msg, "boot option 'qsize': expected one of 64, 128, 256, 512, 1024, got '300'");
    }

    #[test]
    fn duplicates_and_bare_tokens_are_refused() {
        assert_eq!(BootConfig::parse("ctl=on ctl=off"), Err(ConfigError::Duplicate { key: "ctl" }));
        assert_eq!(BootConfig::parse("quiet"), Err(ConfigError::NotKeyValue { token: "quiet" }));
    }

    #[test]
    fn mac_round_trips() {
        let m = parse_mac("02:00:00:00:01:0a").unwrap();
        assert_eq!(MacFmt(m).to_string(), "02:00:00:00:01:0a");
    }
}
