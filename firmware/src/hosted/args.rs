//! The hosted binary's command line: its own options (`--port0`, `--io`, …) plus every
//! boot option of the image (docs/PROTOCOL.md), as `key=value` or `--key value` /
//! `--key=value` (dashes for underscores), parsed by the image's own strict parser.

use std::fmt;
use std::path::PathBuf;

use cadence_core::stage::PORTS;
use cadence_firmware::config::{BootConfig, KEYS};

/// The ports' I/O kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Io {
    /// AF_XDP sockets behind an XDP redirect program (copy mode on veth).
    AfXdp,
    /// `AF_PACKET` with `TPACKET_V3` rings.
    AfPacket,
    /// AF_XDP, falling back to `AF_PACKET` when AF_XDP cannot be had (said on a line).
    Auto,
}

/// How AF_XDP sockets bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// Zero-copy where the driver has it, copy otherwise.
    Auto,
    /// Copy mode only.
    Copy,
    /// Zero-copy or fail.
    ZeroCopy,
}

/// What the kernel's stack gets of the frames an `AF_PACKET` dataplane reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketStack {
    /// Nothing: a tcx ingress program drops them after the dataplane's sockets saw them.
    Drop,
    /// A copy of each (`AF_PACKET` sockets are taps): the host may act on them.
    Share,
}

/// Everything the command line says.
#[derive(Debug, Clone)]
pub struct Args {
    /// The interfaces, port `p`'s at index `p` (2 to `PORTS`).
    pub ports: Vec<String>,
    pub io: Io,
    pub xdp_mode: XdpMode,
    /// `AF_PACKET`: what the kernel's stack gets.
    pub packet_stack: PacketStack,
    /// The chain in its text form (docs/PROTOCOL.md; `cargo xtask chain FILE.toml` writes it).
    pub chain: Option<PathBuf>,
    /// CPU of worker `w`; empty: worker `w` on CPU `w` (modulo the CPUs online).
    pub cpus: Vec<usize>,
    /// Run the workers unpinned.
    pub unpinned: bool,
    /// Packet memory on 2 MiB pages (THP / hugetlbfs).
    pub huge: bool,
    /// Spin margin of the sleeper, µs (the last part of a sleep is spun, not slept).
    pub spin_us: u64,
    /// Entries of each AF_XDP ring (fill, completion, RX, TX).
    pub xdp_ring: u32,
    /// Preferred busy polling on the AF_XDP sockets with this budget (packets per
    /// busy-poll call); 0: off.
    pub busy_poll: u32,
    /// Who the process becomes once the ports are set up (as root; `root`: stays root).
    pub user: String,
    /// The boot options, as the image's parser read them.
    pub boot: BootConfig,
    /// Lines to print before starting (`warning: …`).
    pub warnings: Vec<String>,
}

/// AF_XDP ring entries by default: libxdp's and DPDK `net_af_xdp`'s 2048. With 256 (the
/// image's `qsize`), a worker that the kernel preempts for ~0.6 ms at 400 kpps finds its RX
/// ring overflowed; measured on veth, 2048 doubled the zero-loss rate (docs/PERFORMANCE.md).
pub const DEFAULT_XDP_RING: u32 = 2048;

/// The pool a lane needs for AF_XDP rings of `ring` entries when `pool=` is not given:
/// two sockets, each holding up to a fill ring of posted buffers and a TX ring of frames
/// in flight; never below the image's default.
pub fn hosted_pool(ring: u32, ports: usize) -> usize {
    (2 * ports * ring as usize).clamp(4096, 16_384)
}

/// What is wrong with the command line; the message names the option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgError(pub String);

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The `--help` text.
pub const USAGE: &str = "\
usage: cadence --port0 IF --port1 IF [--port2 IF ...] [options] [key=value ...]

Cadence's dataplane as a Linux process: forwards between its ports through the NF chain
(the L2 default pairs them: port 0 <-> port 1, port 2 <-> port 3, ...),
prints the image's machine lines (@ready, @stats, @summary) on stdout, stops on a STOP
control frame (ctl=port:N ctl_key=HEX) or max_s. Exit 0 success, 1 runtime failure, 2 bad configuration.

options:
  --port0 IF ... --port7 IF
                           the interfaces, 2 to 8 of them numbered from 0 (needs root or
                           CAP_NET_RAW/CAP_NET_ADMIN/CAP_BPF)
  --io af_xdp|af_packet|auto
                           port I/O (default auto: AF_XDP, else AF_PACKET with a line saying why;
                           jumbo MTUs over AF_XDP need Linux 6.6 (XDP_USE_SG))
  --xdp-mode auto|copy|zerocopy
                           AF_XDP binding (default auto: zero-copy where the driver has it)
  --packet-stack drop|share
                           AF_PACKET only: drop (default) keeps every frame of the ports from the
                           kernel's stack (a tcx ingress program, Linux >= 6.6); share lets the stack
                           have a copy of each too, as plain AF_PACKET does
  --chain FILE             the NF chain in its text form (docs/PROTOCOL.md); none: L2 forwarding
  --cpus LIST              CPU of each worker, e.g. 1,2,3 (default: worker w on CPU w)
  --unpinned               do not pin the workers (then up to 4 workers per online CPU)
  --huge                   packet memory on 2 MiB pages
  --spin-us N              spin the last N us of each sleep (default 0: sleep in the kernel only)
  --xdp-ring N             entries of each AF_XDP ring, a power of two in 64..=8192 (default 2048);
                           without pool=, the pool is sized to 4 x N buffers per lane (at least 4096)
  --busy-poll N            AF_XDP preferred busy polling, N packets per poll (1..=1024; default 0: off):
                           the worker's own system calls run the interface's NAPI poll
  --user NAME              who to become once the ports are set up, when started as root (default
                           nobody; `root` keeps root); started as another user, every capability
                           is dropped then instead
  --ctl-key-file FILE      the control key (32 hex digits) from FILE, which only its owner may
                           read (mode 0600 or 0400): ctl_key= on the command line shows in `ps`
  key=value, --key value   every boot option of the image (workers, lanes, sched, vbar_us, ...)
";

/// Parses the arguments (without the program name). `Ok(None)`: `--help`.
pub fn parse(args: &[String]) -> Result<Option<Args>, ArgError> {
    let mut ports: [Option<String>; PORTS] = Default::default();
    let (mut io, mut xdp_mode, mut chain) = (Io::Auto, XdpMode::Auto, None);
    let mut packet_stack = PacketStack::Drop;
    let mut user = String::from("nobody");
    let (mut cpus, mut unpinned, mut huge, mut spin_us) = (Vec::new(), false, false, 0u64);
    let (mut xdp_ring, mut busy_poll) = (DEFAULT_XDP_RING, 0u32);
    let mut boot: Vec<String> = Vec::new();
    let mut warnings = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--help" || a == "-h" {
            return Ok(None);
        }
        let Some(flag) = a.strip_prefix("--") else {
            if a.contains('=') {
                boot.push(a.clone());
                continue;
            }
            return Err(ArgError(format!("argument '{a}': expected --option or key=value (see --help)")));
        };
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (flag, None),
        };
        if matches!(name, "unpinned" | "huge") {
            if inline.is_some() {
                return Err(ArgError(format!("option '--{name}' takes no value")));
            }
            if name == "unpinned" {
                unpinned = true;
            } else {
                huge = true;
            }
            continue;
        }
        let value = match inline {
            Some(v) => v,
            None => it.next().cloned().ok_or_else(|| ArgError(format!("option '--{name}' needs a value")))?,
        };
        match name {
            n if let Some(slot) =
                n.strip_prefix("port").and_then(|i| i.parse::<usize>().ok()).and_then(|i| ports.get_mut(i)) =>
            {
                *slot = Some(value);
            }
            "io" => {
                io = match value.as_str() {
                    "af_xdp" => Io::AfXdp,
                    "af_packet" => Io::AfPacket,
                    "auto" => Io::Auto,
                    v => return Err(ArgError(format!("option '--io': expected af_xdp, af_packet or auto, got '{v}'"))),
                }
            }
            "xdp-mode" => {
                xdp_mode = match value.as_str() {
                    "auto" => XdpMode::Auto,
                    "copy" => XdpMode::Copy,
                    "zerocopy" => XdpMode::ZeroCopy,
                    v => {
                        return Err(ArgError(format!(
                            "option '--xdp-mode': expected auto, copy or zerocopy, got '{v}'"
                        )));
                    }
                }
            }
            "packet-stack" => {
                packet_stack = match value.as_str() {
                    "drop" => PacketStack::Drop,
                    "share" => PacketStack::Share,
                    v => return Err(ArgError(format!("option '--packet-stack': expected drop or share, got '{v}'"))),
                }
            }
            "chain" => chain = Some(PathBuf::from(value)),
            "user" => {
                if value.is_empty() {
                    return Err(ArgError("option '--user': expected a user name".into()));
                }
                user = value
            }
            "ctl-key-file" => boot.push(format!("ctl_key={}", read_key_file(&value)?)),
            "cpus" => {
                cpus = value
                    .split(',')
                    .map(|c| c.trim().parse::<usize>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| ArgError(format!("option '--cpus': expected a list like 1,2,3, got '{value}'")))?
            }
            "spin-us" => {
                spin_us = value
                    .parse::<u64>()
                    .ok()
                    .filter(|&v| v <= 10_000)
                    .ok_or_else(|| ArgError(format!("option '--spin-us': expected 0..=10000, got '{value}'")))?
            }
            "xdp-ring" => {
                xdp_ring = value
                    .parse::<u32>()
                    .ok()
                    .filter(|v| v.is_power_of_two() && (64..=8192).contains(v))
                    .ok_or_else(|| {
                        ArgError(format!("option '--xdp-ring': expected a power of two in 64..=8192, got '{value}'"))
                    })?
            }
            "busy-poll" => {
                busy_poll = value
                    .parse::<u32>()
                    .ok()
                    .filter(|&v| v <= 1024)
                    .ok_or_else(|| ArgError(format!("option '--busy-poll': expected 0..=1024, got '{value}'")))?
            }
            other => {
                let key = other.replace('-', "_");
                if !KEYS.contains(&key.as_str()) {
                    return Err(ArgError(format!("option '--{other}': unknown (see --help)")));
                }
                boot.push(format!("{key}={value}"));
            }
        }
    }
    if boot.iter().filter(|b| b.starts_with("ctl_key=")).count() == 1 && !args.iter().any(|a| a == "--ctl-key-file") {
        warnings.push(
            "warning: ctl_key on the command line shows in process listings (ps); use --ctl-key-file FILE".into(),
        );
    }
    // The pool must feed every port's socket's fill and TX rings per lane (two rings' worth
    // a port); the image's default pool (4096) is sized for its own NICs' 256-entry rings.
    if !boot.iter().any(|b| b.starts_with("pool=")) {
        boot.insert(0, format!("pool={}", hosted_pool(xdp_ring, ports.iter().flatten().count().max(2))));
    }
    let line = boot.join(" ");
    let boot = BootConfig::parse(&line).map_err(|e| ArgError(e.to_string()))?;
    // Ports numbered from 0 without a gap, at least two.
    let given = ports.iter().take_while(|p| p.is_some()).count();
    if let Some(gap) = ports.iter().skip(given).position(Option::is_some) {
        return Err(ArgError(format!("option '--port{}' given without '--port{given}'", given + gap)));
    }
    let ports: Vec<String> = ports.into_iter().flatten().collect();
    if ports.len() < 2 {
        return Err(ArgError("options '--port0' and '--port1' are required (the two interfaces)".into()));
    }
    for (i, a) in ports.iter().enumerate() {
        if let Some(j) = ports.iter().skip(i + 1).position(|b| b == a) {
            return Err(ArgError(format!(
                "options '--port{i}' and '--port{}' name the same interface '{a}'",
                i + 1 + j
            )));
        }
    }
    if !cpus.is_empty() && cpus.len() < boot.workers {
        return Err(ArgError(format!(
            "option '--cpus': {} CPUs listed for workers={} (one per worker)",
            cpus.len(),
            boot.workers
        )));
    }
    Ok(Some(Args {
        ports,
        io,
        xdp_mode,
        packet_stack,
        chain,
        cpus,
        unpinned,
        huge,
        spin_us,
        xdp_ring,
        busy_poll,
        user,
        boot,
        warnings,
    }))
}

/// The control key in `path`: 32 hex digits (surrounding whitespace allowed), in a file that
/// neither its group nor others may read or write.
fn read_key_file(path: &str) -> Result<String, ArgError> {
    use std::os::unix::fs::PermissionsExt as _;
    let err = |why: String| ArgError(format!("option '--ctl-key-file': {path}: {why}"));
    let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(err(format!("mode {mode:03o} lets others at the key: chmod 600 {path}")));
    }
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let key = text.trim();
    if key.len() != 32 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(err("expected 32 hex digits (a 128-bit key, e.g. from `openssl rand -hex 16`)".into()));
    }
    Ok(key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Option<Args>, ArgError> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn more_ports_take_their_interfaces_peers_and_pool() {
        // In any order on the line; the pool then feeds a socket per port.
        let a = p("--port2 c --port0 a --port1 b peer2=02:00:00:00:00:33").unwrap().unwrap();
        assert_eq!(a.ports, ["a".to_string(), "b".to_string(), "c".to_string()]);
        assert_eq!(a.boot.peer[2], [2, 0, 0, 0, 0, 0x33]);
        assert_eq!(a.boot.peer[3], cadence_core::nf::Egress::DEFAULT_PEERS[3]);
        assert_eq!(a.boot.pool, hosted_pool(2048, 3));
        assert!(hosted_pool(2048, 3) > hosted_pool(2048, 2));
    }

    #[test]
    fn both_spellings_of_boot_options_parse() {
        let a = p("--port0 a --port1=b --io af_packet workers=2 --stats-ms 250 --sched=poll --cpus 1,0 --huge")
            .unwrap()
            .unwrap();
        assert_eq!(a.ports, ["a".to_string(), "b".to_string()]);
        assert_eq!((a.io, a.boot.workers, a.boot.stats_ms), (Io::AfPacket, 2, 250));
        assert_eq!(a.boot.sched, cadence_core::worker::Mode::Poll);
        assert_eq!((a.cpus, a.huge, a.unpinned, a.spin_us), (vec![1, 0], true, false, 0));
        assert_eq!(a.packet_stack, PacketStack::Drop, "the safe choice by default");
        assert_eq!(p("--port0 a --port1 b --packet-stack share").unwrap().unwrap().packet_stack, PacketStack::Share);
        assert!(p("--help").unwrap().is_none());
        let a = p("--port0 a --port1 b --xdp-ring 2048 --busy-poll=64").unwrap().unwrap();
        assert_eq!((a.xdp_ring, a.busy_poll, a.boot.pool), (2048, 64, 8192));
        let a = p("--port0 a --port1 b").unwrap().unwrap();
        assert_eq!((a.xdp_ring, a.busy_poll, a.boot.pool), (2048, 0, 8192), "defaults: libxdp's ring, no busy polling");
        let a = p("--port0 a --port1 b --xdp-ring 256").unwrap().unwrap();
        assert_eq!(a.boot.pool, 4096, "never below the image's default pool");
        let a = p("--port0 a --port1 b --xdp-ring 4096 pool=2048").unwrap().unwrap();
        assert_eq!(a.boot.pool, 2048, "an explicit pool= wins");
    }

    #[test]
    fn the_control_key_comes_from_a_file_only_its_owner_reads() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("cadence-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join("ctl.key");
        std::fs::write(&key, "00112233445566778899aabbccddeeff\n").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let line = format!("--port0 a --port1 b ctl=port:0 --ctl-key-file {}", key.display());
        let a = p(&line).unwrap().unwrap();
        assert_eq!(a.boot.control(1).map(|c| c.port()), Some(0));
        assert!(a.warnings.is_empty(), "{:?}", a.warnings);
        // On the command line it works, with a warning.
        let a = p("--port0 a --port1 b ctl=port:0 ctl_key=00112233445566778899aabbccddeeff").unwrap().unwrap();
        assert!(a.warnings.iter().any(|w| w.contains("process listings")), "{:?}", a.warnings);
        // A key others may read is refused; so is one that is not a key; so is a missing file.
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = p(&line).unwrap_err().0;
        assert!(e.contains("--ctl-key-file") && e.contains("mode 644") && e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
        std::fs::remove_file(&key).unwrap();
        std::fs::write(&key, "not a key\n").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(p(&line).unwrap_err().0.contains("32 hex digits"));
        let missing = format!("--port0 a --port1 b --ctl-key-file {}", dir.join("nope").display());
        assert!(p(&missing).unwrap_err().0.contains("--ctl-key-file"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_the_option() {
        for (line, want) in [
            ("--port0 a", "'--port0' and '--port1' are required"),
            ("--port0 a --port1 a", "same interface 'a'"),
            ("--port0 a --port1 b --port2 a", "'--port0' and '--port2' name the same interface 'a'"),
            ("--port0 a --port1 b --port3 c", "option '--port3' given without '--port2'"),
            ("--port0 a --port2 c", "option '--port2' given without '--port1'"),
            ("--port0 a --port1 b --port8 c", "option '--port8': unknown"),
            ("--port0 a --port1 b --io dpdk", "option '--io'"),
            ("--port0 a --port1 b --xdp-mode fast", "option '--xdp-mode'"),
            ("--port0 a --port1 b --packet-stack keep", "option '--packet-stack'"),
            ("--port0 a --port1 b --bogus 1", "option '--bogus': unknown"),
            ("--port0 a --port1 b workers=0", "boot option 'workers'"),
            ("--port0 a --port1 b --cpus 1,x", "option '--cpus'"),
            ("--port0 a --port1 b workers=3 --cpus 1", "listed for workers=3"),
            ("--port0 a --port1 b --spin-us 99999", "option '--spin-us'"),
            ("--port0 a --port1 b --xdp-ring 1000", "option '--xdp-ring'"),
            ("--port0 a --port1 b --xdp-ring 16384", "option '--xdp-ring'"),
            ("--port0 a --port1 b --busy-poll 5000", "option '--busy-poll'"),
            ("--port0 a --port1 b --busy-poll x", "option '--busy-poll'"),
            ("--port0 a --port1 b stray", "argument 'stray'"),
            ("--port0", "option '--port0' needs a value"),
            ("--port0 a --port1 b --huge=1", "'--huge' takes no value"),
        ] {
            let e = p(line).unwrap_err().0;
            assert!(e.contains(want), "{line}: {e}");
        }
    }
}
