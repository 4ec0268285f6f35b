//! The boot configuration: knobs on the kernel command line.
//!
//! The command line is a list of `key=value` pairs separated by spaces
//! (docs/PROTOCOL.md lists every key). Parsing is strict: an unknown key, a key
//! given twice, a token without `=`, or a value out of range is an error naming the
//! key, and the image refuses to start (exit status 35).

use core::fmt;

use cadence_core::stage::PORTS;

pub use cadence_core::worker::Mode;

/// What the image does after booting (boot option `mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(target_os = "none", derive(defmt::Format))]
pub enum Job {
    /// Forward between the ports through the chain until a STOP control frame or `max_s`.
    Forward,
    /// Print the banner and the NICs found, then exit with success.
    Boot,
}

/// A key that must not be printed: its `Debug` says `<secret>`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Secret(pub [u8; 16]);

impl core::fmt::Debug for Secret {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("<secret>")
    }
}

/// A PCI address, bus:device.function (`nics=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct PciAddr {
    /// Bus 0..=255.
    pub bus: u8,
    /// Device 0..=31.
    pub dev: u8,
    /// Function 0..=7.
    pub func: u8,
}

impl PciAddr {
    /// Parses `BB:DD.F` (hexadecimal bus and device, as the `@nic` line prints them).
    pub fn parse(s: &str) -> Option<Self> {
        let (bus, rest) = s.split_once(':')?;
        let (dev, func) = rest.split_once('.')?;
        let hex = |t: &str, max: u8| {
            (!t.is_empty() && t.len() <= 2).then(|| u8::from_str_radix(t, 16).ok()).flatten().filter(|v| *v <= max)
        };
        let func = (func.len() == 1).then(|| func.parse::<u8>().ok()).flatten().filter(|f| *f <= 7)?;
        Some(Self { bus: hex(bus, 0xFF)?, dev: hex(dev, 31)?, func })
    }
}

impl fmt::Display for PciAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.dev, self.func)
    }
}

/// Most NICs `nics=` names (a dataplane's most ports).
pub const MAX_NICS: usize = PORTS;
// The `nics=` error message says "1 to 8".
const _: () = assert!(MAX_NICS == 8);

/// The NICs `nics=` selects, in port order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NicSelect {
    addrs: [PciAddr; MAX_NICS],
    len: u8,
}

impl NicSelect {
    /// Parses 1 to [`MAX_NICS`] distinct addresses separated by `,`.
    pub fn parse(s: &str) -> Option<Self> {
        let mut addrs = [PciAddr { bus: 0, dev: 0, func: 0 }; MAX_NICS];
        let mut len = 0;
        for part in s.split(',') {
            let a = PciAddr::parse(part)?;
            if len == MAX_NICS || addrs[..len].contains(&a) {
                return None;
            }
            addrs[len] = a;
            len += 1;
        }
        Some(Self { addrs, len: len as u8 })
    }

    /// The addresses, port 0 first.
    pub fn addrs(&self) -> &[PciAddr] {
        self.addrs.get(..usize::from(self.len)).unwrap_or(&[])
    }
}

/// Every knob, with its default. See docs/PROTOCOL.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct BootConfig {
    /// What to do.
    pub mode: Job,
    /// Period of `@stats` lines in milliseconds; 0 = off.
    pub stats_ms: u32,
    /// Give up after this many seconds without STOP; 0 = never.
    pub max_s: u32,
    /// The port control frames are accepted on (`ctl=port:N`); `None`: control off.
    pub ctl: Option<u8>,
    /// The SipHash-2-4 key control frames are signed with (`ctl_key=`, 32 hex digits).
    pub ctl_key: Option<Secret>,
    /// Next-hop MAC for frames leaving each port (`peerN`).
    pub peer: [[u8; 6]; PORTS],
    /// Packet buffers in the pool.
    pub pool: usize,
    /// Virtqueue size.
    pub qsize: u16,
    /// Worker cores (the boot core is worker 0).
    pub workers: usize,
    /// Queue pairs per NIC, one lane each.
    pub lanes: usize,
    /// Scheduling mode of the workers.
    pub sched: Mode,
    /// Metronome's target vacation V̄, µs.
    pub vbar_us: u32,
    /// Metronome's long timeout T_L, µs.
    pub tl_us: u32,
    /// Metronome's first short timeout T_S, µs.
    pub ts0_us: u32,
    /// The round budget in µs: a won round that is still receiving after this long lets
    /// its lane go and comes straight back (`core::worker::RoundBudget`), so a flood on one
    /// lane cannot hold the worker's other duties.
    pub round_us: u32,
    /// The idle lane's sleep in µs (`core::worker::IdleSleep`): a primary whose lane has
    /// received nothing for `idle_after_us` sleeps this long instead of `T_S`, where its
    /// sleeper wakes on a frame's arrival on every queue of the lane; 0 turns it off.
    pub idle_us: u32,
    /// How long a lane must have received nothing before `idle_us` applies, µs.
    pub idle_after_us: u32,
    /// Sleeps end when a frame arrives on the lane's receive queues, where the platform can
    /// watch them (the hosted build: `ppoll` on the sockets); `false`: deadline sleeps only,
    /// the paper's Metronome (and no `idle_us`, which needs the watch).
    pub arrival: bool,
    /// Weight of the old ρ in the EWMA, in thousandths.
    pub ewma_permille: u16,
    /// Vacation feedback gain, in thousandths (0 = the paper's T_S rule alone).
    pub feedback_permille: u16,
    /// MONITOR/MWAIT on the lane's receive queue during `T_S` sleeps, where the CPU has it
    /// (on by default: an arrival ends the sleep, the deadline stays the backstop, and
    /// without MONITOR the sleeper halts as before).
    pub mwait: bool,
    /// Line rate in Mb/s for Metronome's ring bound; 0 = the port's link speed (10 GbE
    /// when the port does not report one).
    pub line_mbps: u32,
    /// A worker whose rounds have stopped this long is reported stalled and its lanes are
    /// taken over; 0 turns the watchdog off.
    pub stall_ms: u32,
    /// Debug: worker `.0` stops (spins forever without rounds) `.1` ms into the run.
    pub stall: Option<(u8, u32)>,
    /// Debug (`stall=W:MS:round`): the stalled worker stops inside its next round, in the
    /// stage, holding its lane and the frames of the batch (a hung NF), instead of between
    /// rounds.
    pub stall_in_round: bool,
    /// Debug: every received frame costs this many spin-loop iterations on its worker (an
    /// expensive chain on demand, to overload a worker under emulation); 0: off.
    pub burn: u32,
    /// The NICs to drive, by PCI address, port 0 first (`nics=`); `None`: the first two
    /// the image finds.
    pub nics: Option<NicSelect>,
    /// The per-packet latency SLO in µs: frames whose sojourn in the dataplane exceeds it
    /// are counted (`over_slo`); 0: no SLO.
    pub slo_us: u32,
    /// NetBlaze's server mapper period in ms (`mapper_ms`): with a profile in the chain
    /// module and RSS over more than one lane, every period the mapper moves RSS buckets
    /// between queues; 0 turns it off.
    pub mapper_ms: u32,
    /// NetBlaze's auxiliary cores (`aux`): the last `aux` of the `workers` serve no lane;
    /// the dedicated workers hand them whole flows when the chain module's profile says a
    /// lane's traffic does not fit one core's epoch. 0: none (needs a profile otherwise).
    pub aux: usize,
    /// NetBlaze's epoch in µs as the operator asked for it (`epoch_us`): `None` = the
    /// profile's (`epoch_ns`, the span its frontier was measured for); a value must be that
    /// one. Inside the run the epoch is the profile's, in ns, and in clock ticks on a lane.
    pub epoch_us: Option<u32>,
    /// Period of `@report` lines (dedicated cores and load, for the rack controller) in
    /// milliseconds; 0 = off.
    pub report_ms: u32,
}

impl BootConfig {
    /// The line rate for the ring bound, in Mb/s: `line_mbps`, else the port's link
    /// speed, else [`DEFAULT_LINE_MBPS`]; and where it came from (`option`, `port`,
    /// `default`).
    pub fn line_rate_mbps(&self, port_mbps: Option<u32>) -> (u32, &'static str) {
        match (self.line_mbps, port_mbps.filter(|&m| m > 0)) {
            (0, Some(m)) => (m, "port"),
            (0, None) => (DEFAULT_LINE_MBPS, "default"),
            (m, _) => (m, "option"),
        }
    }
}

impl Default for BootConfig {
    fn default() -> Self {
        Self {
            mode: Job::Forward,
            stats_ms: 1000,
            max_s: 0,
            ctl: None,
            ctl_key: None,
            peer: cadence_core::nf::Egress::DEFAULT_PEERS,
            pool: 4096,
            qsize: 256,
            workers: 1,
            lanes: 1,
            sched: Mode::Metronome,
            vbar_us: 15,
            tl_us: 500,
            ts0_us: 20,
            round_us: 500,
            idle_us: 10_000,
            idle_after_us: IDLE_AFTER_US,
            arrival: true,
            ewma_permille: 750,
            feedback_permille: 30,
            mwait: true,
            line_mbps: 0,
            stall_ms: 1000,
            stall: None,
            stall_in_round: false,
            burn: 0,
            nics: None,
            slo_us: 200,
            mapper_ms: 1000,
            aux: 0,
            epoch_us: None,
            report_ms: 0,
        }
    }
}

/// The default `idle_after_us`: 0, from the lane's first empty round. Where the sleeper wakes
/// on arrival, a `T_S` sleep that ends with nothing costs a wake-up as dear as a frame's, and
/// the vacation is bounded by the arrival itself; measured in docs/PERFORMANCE.md ("the idle
/// lane from the first empty round"): at 5 000 frames/s 81 % → 16 % of a CPU, p99 latency no
/// worse. No effect where the sleeper does not wake on arrival (the image), or with `arrival=off`.
pub const IDLE_AFTER_US: u32 = 0;

/// Every key the command line accepts, in the order of docs/PROTOCOL.md.
pub const KEYS: [&str; 38] = [
    "mode",
    "stats_ms",
    "max_s",
    "ctl",
    "ctl_key",
    "peer0",
    "peer1",
    "peer2",
    "peer3",
    "peer4",
    "peer5",
    "peer6",
    "peer7",
    "pool",
    "qsize",
    "workers",
    "lanes",
    "sched",
    "vbar_us",
    "tl_us",
    "ts0_us",
    "round_us",
    "idle_us",
    "idle_after_us",
    "arrival",
    "ewma",
    "feedback",
    "mwait",
    "line_mbps",
    "stall_ms",
    "stall",
    "burn",
    "nics",
    "slo_us",
    "mapper_ms",
    "aux",
    "epoch_us",
    "report_ms",
];

/// Line rate assumed when neither `line_mbps` nor the port says (10 GbE).
pub const DEFAULT_LINE_MBPS: u32 = 10_000;

/// Why the command line was refused. Borrowed from the command line itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BootConfigError<'a> {
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
    /// A key another one needs is missing.
    Missing {
        /// The missing key.
        key: &'static str,
        /// Why it is needed.
        because: &'static str,
    },
    /// Two keys whose values cannot work together.
    Conflict {
        /// The key whose value is refused.
        key: &'static str,
        /// Why, naming the other key.
        because: &'static str,
    },
}

impl fmt::Display for BootConfigError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            BootConfigError::NotKeyValue { token } => {
                write!(f, "boot option '{token}': expected key=value")
            }
            BootConfigError::UnknownKey { key } => {
                write!(f, "boot option '{key}': unknown key (known: ")?;
                for (i, k) in KEYS.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(k)?;
                }
                f.write_str(")")
            }
            BootConfigError::Duplicate { key } => write!(f, "boot option '{key}': given more than once"),
            BootConfigError::BadValue { key, expected, got } => {
                write!(f, "boot option '{key}': expected {expected}, got '{got}'")
            }
            BootConfigError::Missing { key, because } => write!(f, "boot option '{key}': required {because}"),
            BootConfigError::Conflict { key, because } => write!(f, "boot option '{key}': {because}"),
        }
    }
}

impl BootConfig {
    /// Parses a kernel command line. An empty line gives the defaults.
    pub fn parse(cmdline: &str) -> Result<Self, BootConfigError<'_>> {
        let mut cfg = Self::default();
        let mut seen = [false; KEYS.len()];
        for token in cmdline.split_ascii_whitespace() {
            let Some((key, value)) = token.split_once('=') else {
                return Err(BootConfigError::NotKeyValue { token });
            };
            let Some(slot) = KEYS.iter().position(|k| *k == key) else {
                return Err(BootConfigError::UnknownKey { key });
            };
            if core::mem::replace(&mut seen[slot], true) {
                return Err(BootConfigError::Duplicate { key });
            }
            let bad = |expected| BootConfigError::BadValue { key, expected, got: value };
            match key {
                "mode" => {
                    cfg.mode = match value {
                        "forward" => Job::Forward,
                        "boot" => Job::Boot,
                        _ => return Err(bad("one of forward, boot")),
                    }
                }
                "stats_ms" => cfg.stats_ms = int_in(value, 0, 60_000).ok_or(bad("an integer in 0..=60000"))?,
                "max_s" => cfg.max_s = int_in(value, 0, 86_400).ok_or(bad("an integer in 0..=86400"))?,
                "ctl" => {
                    cfg.ctl = match value {
                        "off" => None,
                        _ => Some(
                            value
                                .strip_prefix("port:")
                                .and_then(|n| n.parse::<u8>().ok())
                                .filter(|&n| usize::from(n) < PORTS)
                                .ok_or(bad("off, or port:N with N below 8"))?,
                        ),
                    }
                }
                "ctl_key" => cfg.ctl_key = Some(Secret(parse_key(value).ok_or(bad("32 hex digits (a 128-bit key)"))?)),
                k if let Some(slot) =
                    k.strip_prefix("peer").and_then(|n| n.parse::<usize>().ok()).and_then(|n| cfg.peer.get_mut(n)) =>
                {
                    *slot = parse_mac(value).ok_or(bad("a MAC address xx:xx:xx:xx:xx:xx"))?;
                }
                "pool" => cfg.pool = int_in(value, 256, 16_384).ok_or(bad("an integer in 256..=16384"))? as usize,
                "qsize" => {
                    cfg.qsize = int_in(value, 64, 1024)
                        .filter(|q| q.is_power_of_two())
                        .ok_or(bad("one of 64, 128, 256, 512, 1024"))? as u16
                }
                "workers" => cfg.workers = int_in(value, 1, 64).ok_or(bad("an integer in 1..=64"))? as usize,
                "lanes" => cfg.lanes = int_in(value, 1, 16).ok_or(bad("an integer in 1..=16"))? as usize,
                "sched" => {
                    cfg.sched = match value {
                        "metronome" => Mode::Metronome,
                        "poll" => Mode::Poll,
                        _ => return Err(bad("one of metronome, poll")),
                    }
                }
                "vbar_us" => cfg.vbar_us = int_in(value, 1, 10_000).ok_or(bad("an integer in 1..=10000"))?,
                "tl_us" => cfg.tl_us = int_in(value, 1, 100_000).ok_or(bad("an integer in 1..=100000"))?,
                "ts0_us" => cfg.ts0_us = int_in(value, 1, 10_000).ok_or(bad("an integer in 1..=10000"))?,
                "round_us" => cfg.round_us = int_in(value, 10, 100_000).ok_or(bad("an integer in 10..=100000"))?,
                "idle_us" => cfg.idle_us = int_in(value, 0, 1_000_000).ok_or(bad("an integer in 0..=1000000"))?,
                "idle_after_us" => {
                    cfg.idle_after_us = int_in(value, 0, 1_000_000).ok_or(bad("an integer in 0..=1000000"))?
                }
                "ewma" => cfg.ewma_permille = permille(value).ok_or(bad("a decimal in 0..=1 (e.g. 0.75)"))?,
                "feedback" => cfg.feedback_permille = permille(value).ok_or(bad("a decimal in 0..=1 (e.g. 0.03)"))?,
                "mwait" => {
                    cfg.mwait = match value {
                        "on" => true,
                        "off" => false,
                        _ => return Err(bad("one of on, off")),
                    }
                }
                "arrival" => {
                    cfg.arrival = match value {
                        "on" => true,
                        "off" => false,
                        _ => return Err(bad("one of on, off")),
                    }
                }
                "line_mbps" => {
                    cfg.line_mbps = int_in(value, 0, 400_000).ok_or(bad("an integer in 0..=400000 (Mb/s)"))?
                }
                "burn" => cfg.burn = int_in(value, 0, 10_000_000).ok_or(bad("an integer in 0..=10000000"))?,
                "stall_ms" => cfg.stall_ms = int_in(value, 0, 600_000).ok_or(bad("an integer in 0..=600000"))?,
                "slo_us" => cfg.slo_us = int_in(value, 0, 10_000_000).ok_or(bad("an integer in 0..=10000000"))?,
                "mapper_ms" => cfg.mapper_ms = int_in(value, 0, 60_000).ok_or(bad("an integer in 0..=60000"))?,
                "aux" => cfg.aux = int_in(value, 0, 63).ok_or(bad("an integer in 0..=63"))? as usize,
                "report_ms" => cfg.report_ms = int_in(value, 0, 60_000).ok_or(bad("an integer in 0..=60000"))?,
                "epoch_us" => {
                    cfg.epoch_us = Some(int_in(value, 1, 10_000_000).ok_or(bad("an integer in 1..=10000000"))?)
                }
                "stall" => {
                    let (w, rest) = value.split_once(':').ok_or(bad("WORKER:MS[:round], e.g. 1:500"))?;
                    let (ms, at) = rest.split_once(':').unwrap_or((rest, ""));
                    let w = int_in(w, 0, 63).ok_or(bad("WORKER:MS[:round] with WORKER in 0..=63"))?;
                    let ms = int_in(ms, 0, 86_400_000).ok_or(bad("WORKER:MS[:round] with MS in 0..=86400000"))?;
                    cfg.stall_in_round = match at {
                        "" => false,
                        "round" => true,
                        _ => return Err(bad("WORKER:MS or WORKER:MS:round")),
                    };
                    cfg.stall = Some((w as u8, ms));
                }
                "nics" => {
                    cfg.nics =
                        Some(NicSelect::parse(value).ok_or(bad(
                            "1 to 8 distinct PCI addresses BB:DD.F separated by ',' (e.g. 00:03.0,00:04.0)",
                        ))?)
                }
                // Every key of KEYS is matched above.
                _ => return Err(BootConfigError::UnknownKey { key }),
            }
        }
        if cfg.stall_ms != 0 && u64::from(cfg.round_us) * 4 > u64::from(cfg.stall_ms) * 1000 {
            return Err(BootConfigError::Conflict {
                key: "round_us",
                because: "must be at most a quarter of stall_ms (a worker's heartbeat beats once a round)",
            });
        }
        if cfg.ctl.is_some() && cfg.ctl_key.is_none() {
            return Err(BootConfigError::Missing {
                key: "ctl_key",
                because: "with ctl=port:N (32 hex digits: control frames are signed with it)",
            });
        }
        Ok(cfg)
    }

    /// Who may send control frames, as `core` checks it, for the boot whose nonce is
    /// `nonce` (`None`: control off).
    pub fn control(&self, nonce: u64) -> Option<cadence_core::control::ControlAuth> {
        let (port, Secret(key)) = (self.ctl?, self.ctl_key?);
        Some(cadence_core::control::ControlAuth::new(usize::from(port), key, nonce))
    }
}

/// 32 hex digits: a 128-bit key, first digit pair = first byte.
fn parse_key(s: &str) -> Option<[u8; 16]> {
    if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut k = [0u8; 16];
    for (i, b) in k.iter_mut().enumerate() {
        *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(k)
}

/// A decimal integer in `lo..=hi`.
fn int_in(s: &str, lo: u32, hi: u32) -> Option<u32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u32>().ok().filter(|v| (lo..=hi).contains(v))
}

/// A decimal fraction in `0..=1` with at most three decimals (`0.75`, `.5`, `1`), in
/// thousandths.
fn permille(s: &str) -> Option<u16> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty()) || frac.len() > 3 {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u32 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut thousandths: u32 = if frac.is_empty() { 0 } else { frac.parse().ok()? };
    for _ in frac.len()..3 {
        thousandths *= 10;
    }
    let v = whole.checked_mul(1000)?.checked_add(thousandths)?;
    (v <= 1000).then_some(v as u16)
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
            "mode=boot stats_ms=0 max_s=70 ctl=port:1 ctl_key=000102030405060708090a0b0c0d0E0F peer0=52:54:00:AA:bb:01 peer1=02:00:00:00:00:09 pool=1024 qsize=512",
        )
        .unwrap();
        assert_eq!(c.mode, Job::Boot);
        assert_eq!(c.stats_ms, 0);
        assert_eq!(c.max_s, 70);
        assert_eq!((c.ctl, c.ctl_key), (Some(1), Some(Secret([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]))));
        // The key never shows in the configuration's debug output (printed on COM1).
        assert!(!alloc::format!("{c:?}").contains("14, 15"), "{c:?}");
        assert_eq!(c.control(7).map(|a| (a.port(), a.nonce())), Some((1, 7)));
        assert_eq!(c.peer[0], [0x52, 0x54, 0, 0xaa, 0xbb, 1]);
        assert_eq!(c.peer[1], [2, 0, 0, 0, 0, 9]);
        assert_eq!((c.pool, c.qsize), (1024, 512));
        let c = BootConfig::parse(
            "workers=3 lanes=2 sched=poll vbar_us=10 tl_us=400 ts0_us=25 ewma=0.5 feedback=.03 mwait=off",
        )
        .unwrap();
        assert_eq!((c.workers, c.lanes, c.sched), (3, 2, Mode::Poll));
        assert_eq!((c.vbar_us, c.tl_us, c.ts0_us), (10, 400, 25));
        assert_eq!((c.ewma_permille, c.feedback_permille, c.mwait), (500, 30, false));
        assert!(BootConfig::default().mwait, "MONITOR/MWAIT on by default where the CPU has it");
        let c = BootConfig::parse("aux=2 epoch_us=80").unwrap();
        assert_eq!(
            (c.aux, BootConfig::default().aux, c.epoch_us, BootConfig::default().epoch_us),
            (2, 0, Some(80), None)
        );
        assert_eq!(BootConfig::parse("report_ms=500").unwrap().report_ms, 500);
        assert_eq!(BootConfig::default().report_ms, 0);
        assert!(matches!(
            BootConfig::parse("report_ms=60001"),
            Err(BootConfigError::BadValue { key: "report_ms", .. })
        ));
        assert!(matches!(BootConfig::parse("epoch_us=0"), Err(BootConfigError::BadValue { key: "epoch_us", .. })));
        assert!(matches!(BootConfig::parse("epoch_us=x"), Err(BootConfigError::BadValue { key: "epoch_us", .. })));
        for bad in ["aux=64", "aux=-1", "aux=x"] {
            assert!(matches!(BootConfig::parse(bad), Err(BootConfigError::BadValue { key: "aux", .. })), "{bad}");
        }
        let c = BootConfig::parse("mapper_ms=250").unwrap();
        assert_eq!((c.mapper_ms, BootConfig::default().mapper_ms), (250, 1000));
        for bad in ["mapper_ms=60001", "mapper_ms=-1", "mapper_ms=x"] {
            assert!(matches!(BootConfig::parse(bad), Err(BootConfigError::BadValue { key: "mapper_ms", .. })), "{bad}");
        }
        let c = BootConfig::parse("burn=5000").unwrap();
        assert_eq!((c.burn, BootConfig::default().burn), (5000, 0));
        assert!(matches!(BootConfig::parse("burn=x"), Err(BootConfigError::BadValue { key: "burn", .. })));
        let c = BootConfig::parse("idle_us=0").unwrap();
        assert_eq!((c.idle_us, BootConfig::default().idle_us), (0, 10_000));
        let c = BootConfig::parse("arrival=off").unwrap();
        assert_eq!((c.arrival, BootConfig::default().arrival), (false, true));
        assert!(matches!(BootConfig::parse("arrival=maybe"), Err(BootConfigError::BadValue { key: "arrival", .. })));
        let c = BootConfig::parse("idle_after_us=0 idle_us=500").unwrap();
        assert_eq!((c.idle_after_us, c.idle_us), (0, 500));
        assert!(matches!(
            BootConfig::parse("idle_after_us=2000000"),
            Err(BootConfigError::BadValue { key: "idle_after_us", .. })
        ));
        for bad in ["idle_us=1000001", "idle_us=-1", "idle_us=x"] {
            assert!(matches!(BootConfig::parse(bad), Err(BootConfigError::BadValue { key: "idle_us", .. })), "{bad}");
        }
        let c = BootConfig::parse("round_us=2000").unwrap();
        assert_eq!((c.round_us, BootConfig::default().round_us), (2000, 500));
        for bad in ["round_us=9", "round_us=100001", "round_us=x"] {
            assert!(matches!(BootConfig::parse(bad), Err(BootConfigError::BadValue { key: "round_us", .. })), "{bad}");
        }
        // A round longer than a quarter of the watchdog's limit would read as a stall.
        let e = BootConfig::parse("stall_ms=100 round_us=25001").unwrap_err();
        assert!(matches!(e, BootConfigError::Conflict { key: "round_us", .. }), "{e:?}");
        assert!(alloc::format!("{e}").contains("stall_ms"), "{e}");
        assert!(BootConfig::parse("stall_ms=100 round_us=25000").is_ok());
        assert!(BootConfig::parse("stall_ms=0 round_us=100000").is_ok(), "no watchdog, no conflict");
        let c = BootConfig::parse("stall_ms=250 stall=1:500").unwrap();
        assert_eq!((c.stall_ms, c.stall, c.stall_in_round), (250, Some((1, 500)), false));
        let c = BootConfig::parse("stall=0:20:round").unwrap();
        assert_eq!((c.stall, c.stall_in_round), (Some((0, 20)), true));
        assert!(matches!(BootConfig::parse("stall=0:20:later"), Err(BootConfigError::BadValue { key: "stall", .. })));
        for bad in ["stall=1", "stall=64:5", "stall=1:x", "stall_ms=-1"] {
            assert!(matches!(BootConfig::parse(bad), Err(BootConfigError::BadValue { .. })), "{bad}");
        }
        let c = BootConfig::parse("line_mbps=25000").unwrap();
        assert_eq!(c.line_mbps, 25_000);
        assert_eq!(c.line_rate_mbps(Some(1000)), (25_000, "option"));
        let d = BootConfig::default();
        assert_eq!(d.line_rate_mbps(Some(1000)), (1000, "port"));
        assert_eq!(d.line_rate_mbps(Some(0)), (DEFAULT_LINE_MBPS, "default"));
        assert_eq!(d.line_rate_mbps(None), (DEFAULT_LINE_MBPS, "default"));
    }

    #[test]
    fn nics_select_by_pci_address() {
        let c = BootConfig::parse("nics=00:04.0,1a:1f.7").unwrap();
        let addrs = c.nics.map(|n| n.addrs().to_vec()).unwrap_or_default();
        assert_eq!(addrs, [PciAddr { bus: 0, dev: 4, func: 0 }, PciAddr { bus: 0x1a, dev: 0x1f, func: 7 }]);
        assert_eq!(alloc::format!("{}", addrs[1]), "1a:1f.7");
        assert_eq!(BootConfig::parse("nics=03:00.1").unwrap().nics.map(|n| n.addrs().len()), Some(1));
        let three = BootConfig::parse("nics=00:05.0,00:03.0,00:04.0").unwrap();
        assert_eq!(three.nics.map(|n| n.addrs().len()), Some(3));
        assert_eq!(BootConfig::default().nics, None);
        for bad in [
            "nics=",
            "nics=00:03",
            "nics=00:20.0",
            "nics=00:03.8",
            "nics=100:03.0",
            "nics=00:03.0,00:03.0",
            "nics=00:03.0,00:04.0,00:05.0,00:06.0,00:07.0,00:08.0,00:09.0,00:0a.0,00:0b.0",
            "nics=00:03.0,",
            "nics=g0:03.0",
        ] {
            let e = BootConfig::parse(bad).unwrap_err();
            assert!(matches!(e, BootConfigError::BadValue { key: "nics", .. }), "{bad}: {e:?}");
            assert!(alloc::format!("{e}").starts_with("boot option 'nics': expected 1 to 8 distinct PCI addresses"));
        }
    }

    #[test]
    fn fractions_parse_in_thousandths() {
        for (s, v) in [("0", 0), ("1", 1000), ("0.75", 750), (".5", 500), ("1.000", 1000), ("0.003", 3)] {
            assert_eq!(permille(s), Some(v), "{s}");
        }
        for s in ["", ".", "1.5", "2", "0.0001", "-0.5", "0,5", "1e-3", "0.7a"] {
            assert_eq!(permille(s), None, "{s}");
        }
    }

    #[test]
    fn unknown_key_is_named_with_the_known_ones() {
        let e = BootConfig::parse("ctl=off bogus=1").unwrap_err();
        assert_eq!(e, BootConfigError::UnknownKey { key: "bogus" });
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
            ("workers=0", "workers", "0"),
            ("lanes=17", "lanes", "17"),
            ("sched=busy", "sched", "busy"),
            ("ewma=1.5", "ewma", "1.5"),
            ("mwait=1", "mwait", "1"),
            ("qsize=300", "qsize", "300"),
            ("pool=10", "pool", "10"),
            ("mode=fast", "mode", "fast"),
            ("ctl=yes", "ctl", "yes"),
            ("ctl=on", "ctl", "on"),
            ("ctl=port:8", "ctl", "port:8"),
            ("ctl=port:x", "ctl", "port:x"),
            ("ctl_key=0011", "ctl_key", "0011"),
            ("ctl_key=zz0102030405060708090a0b0c0d0e0f", "ctl_key", "zz0102030405060708090a0b0c0d0e0f"),
            ("peer0=01:02:03", "peer0", "01:02:03"),
            ("peer1=01:02:03:04:05:06:07", "peer1", "01:02:03:04:05:06:07"),
            ("peer1=0g:02:03:04:05:06", "peer1", "0g:02:03:04:05:06"),
            ("stats_ms=99999999999999", "stats_ms", "99999999999999"),
            ("line_mbps=400001", "line_mbps", "400001"),
            ("line_mbps=10G", "line_mbps", "10G"),
        ] {
            match BootConfig::parse(line) {
                Err(BootConfigError::BadValue { key: k, got: g, .. }) => assert_eq!((k, g), (key, got), "{line}"),
                other => panic!("{line}: {other:?}"),
            }
        }
        let msg = BootConfig::parse("qsize=300").unwrap_err().to_string();
        assert_eq!(msg, "boot option 'qsize': expected one of 64, 128, 256, 512, 1024, got '300'");
    }

    #[test]
    fn control_needs_a_key() {
        let e = BootConfig::parse("ctl=port:0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "boot option 'ctl_key': required with ctl=port:N (32 hex digits: control frames are signed with it)"
        );
        assert_eq!(BootConfig::parse("ctl=off").unwrap().control(7), None);
        assert_eq!(BootConfig::default().control(7), None);
    }

    #[test]
    fn duplicates_and_bare_tokens_are_refused() {
        assert_eq!(BootConfig::parse("ctl=off ctl=off"), Err(BootConfigError::Duplicate { key: "ctl" }));
        assert_eq!(BootConfig::parse("quiet"), Err(BootConfigError::NotKeyValue { token: "quiet" }));
    }

    #[test]
    fn mac_round_trips() {
        let m = parse_mac("02:00:00:00:01:0a").unwrap();
        assert_eq!(MacFmt(m).to_string(), "02:00:00:00:01:0a");
    }
}
