//! Real Linux hosts around the hosted dataplane: network namespaces with a veth each, an
//! address and a default route via Cadence, and the dataplane itself (AF_XDP on the
//! veths' far ends) started on a chain file and stopped with SIGINT for its `@summary`.
//! Used by the tests that put Cadence between real hosts (`tests/tests/nat_icmp.rs`,
//! `tests/tests/urlfilter_evasion.rs`, `tests/tests/rack.rs`), by `cargo xtask run --hosted
//! --topology` and by the rack (`harness/src/rack.rs`). A host on a VLAN ([`vlan_host`]) is
//! a namespace behind an AF_PACKET relay that tags its frames onto another host's link: this
//! machine's kernel has no 802.1Q interfaces.
//! Needs root and iproute2; CI runs as root. Timeouts are hang guards; nothing asserts on
//! time.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use crate::netns::{IP, VethPairs};
use anyhow::{Context, Result, anyhow, bail};

/// A network namespace of the test's own, deleted on drop.
#[derive(Debug)]
pub struct Netns(pub String);

impl Netns {
    /// Creates namespace `name`.
    pub fn new(name: String) -> Result<Self> {
        ip(&["netns", "add", &name])?;
        Ok(Self(name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new(IP).args(["netns", "del", &self.0]).output();
    }
}

/// A child killed on drop.
#[derive(Debug)]
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `ip ARGS`, which must succeed.
pub fn ip(args: &[&str]) -> Result<()> {
    run(Command::new(IP).args(args)).map(|_| ())
}

/// Runs `cmd`, which must succeed.
pub fn run(cmd: &mut Command) -> Result<Output> {
    let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
    if !out.status.success() {
        bail!("{cmd:?} failed: {}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    }
    Ok(out)
}

/// Moves a host end into `ns` as a host at `addr`/24 whose default route is `gw`; offloads
/// off (full checksums on the wire). No neighbour entry is set.
pub fn host(ns: &str, ifname: &str, addr: &str, gw: &str) -> Result<()> {
    ip(&["link", "set", ifname, "netns", ns])?;
    ip(&["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", ifname])?;
    ip(&["-n", ns, "link", "set", ifname, "up"])?;
    ip(&["-n", ns, "link", "set", "lo", "up"])?;
    ip(&["-n", ns, "route", "add", "default", "via", gw])?;
    run(Command::new(IP).args(["netns", "exec", ns, "ethtool", "-K", ifname, "tx", "off"])).map(|_| ())
}

/// The VLAN relay of [`vlan_host`], in Python: frames from the access link (argv 2) get an
/// 802.1Q tag for VID argv 3 and leave by the trunk (argv 1); frames received on the trunk
/// with that VID — the tag in the frame, or beside it as the kernel's receive path leaves it
/// (`PACKET_AUXDATA`'s `tp_vlan_tci`) — leave by the access link untagged. Frames a socket's
/// own interface sends are not relayed. Prints `ready` once both sockets are bound; ends
/// quietly when an interface goes away.
pub const VLAN_RELAY: &str = r#"
import select, socket, struct, sys
SOL_PACKET, PACKET_AUXDATA, VLAN_VALID = 263, 8, 1 << 4
trunk_if, access_if, vid = sys.argv[1], sys.argv[2], int(sys.argv[3])
def bound(ifname):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((ifname, 0))
    return s
trunk, access = bound(trunk_if), bound(access_if)
tag = struct.pack("!HH", 0x8100, vid)
print("ready", flush=True)
def relay():
    ready, _, _ = select.select([trunk, access], [], [])
    if access in ready:
        f, addr = access.recvfrom(65535)
        if addr[2] != socket.PACKET_OUTGOING and len(f) >= 14:
            trunk.send(f[:12] + tag + f[12:])
    if trunk in ready:
        f, anc, _, addr = trunk.recvmsg(65535, socket.CMSG_SPACE(20))
        if addr[2] == socket.PACKET_OUTGOING or len(f) < 14:
            return
        beside = [struct.unpack("IIIHHHH", d[:20]) for (l, t, d) in anc if l == SOL_PACKET and t == PACKET_AUXDATA]
        if beside and beside[0][0] & VLAN_VALID and beside[0][5] & 0xFFF == vid:
            access.send(f)
        elif f[12:14] == b"\x81\x00" and struct.unpack("!H", f[14:16])[0] & 0xFFF == vid:
            access.send(f[:12] + f[16:])
try:
    while True:
        relay()
except OSError:
    pass  # an interface went away: the test is tearing down
"#;

/// A Linux host on VLAN `vid` of host interface `trunk` (in namespace `trunk_ns`): this
/// kernel has no 802.1Q interfaces, so the host gets a veth pair — `name` in namespace `ns`
/// with `addr`/24 and a default route via `gw`, its peer `name`r in `trunk_ns` — and
/// [`VLAN_RELAY`] tags what the host sends onto `trunk` and hands it what comes back on its
/// VLAN untagged, as a switch's access port would. The host's stack is Linux's own; only the
/// tag is the relay's. The relay runs until the returned guard drops.
pub fn vlan_host(trunk_ns: &str, trunk: &str, vid: u16, ns: &str, name: &str, addr: &str, gw: &str) -> Result<Kill> {
    let peer = format!("{name}r");
    ip(&["link", "add", name, "type", "veth", "peer", "name", &peer])?;
    ip(&["link", "set", &peer, "netns", trunk_ns])?;
    let quiet = format!("net.ipv6.conf.{peer}.disable_ipv6=1");
    run(Command::new(IP).args(["netns", "exec", trunk_ns, "sysctl", "-q", "-w", &quiet]))?;
    ip(&["-n", trunk_ns, "link", "set", &peer, "up"])?;
    host(ns, name, addr, gw)?;
    let mut relay = Kill(
        Command::new(IP)
            .args(["netns", "exec", trunk_ns, "python3", "-c", VLAN_RELAY, trunk, &peer, &vid.to_string()])
            .stdout(Stdio::piped())
            .spawn()
            .context("starting the VLAN relay")?,
    );
    let mut first = String::new();
    let out = relay.0.stdout.take().ok_or_else(|| anyhow::anyhow!("no relay stdout"))?;
    BufReader::new(out).read_line(&mut first)?;
    if first.trim() != "ready" {
        bail!("the VLAN relay did not start: {first:?}");
    }
    Ok(relay)
}

/// `args` run in namespace `ns` (any exit status: a ping that gets an ICMP error fails).
pub fn in_ns(ns: &str, args: &[&str]) -> Result<Output> {
    Command::new(IP).args(["netns", "exec", ns]).args(args).output().with_context(|| format!("running {args:?}"))
}

/// The hosted dataplane between the veth pairs' dataplane ends, running `chain` (a text-form
/// chain file) with one worker.
#[derive(Debug)]
pub struct Dataplane {
    child: Kill,
    lines: Receiver<String>,
    /// What it printed before `@ready`.
    startup: Vec<String>,
}

impl Dataplane {
    /// Starts `bin` on `veths` (port `p` on `veths.dut[p]`) with `chain` and the boot options
    /// `extra`, its stderr to `stderr`; returns once it says `@ready`.
    pub fn start(bin: &Path, veths: &VethPairs, chain: &Path, extra: &[String], stderr: &Path) -> Result<Self> {
        Self::start_io(bin, veths, chain, "af_xdp", extra, stderr)
    }

    /// [`Dataplane::start`] with the ports' I/O `io` (`af_xdp`, `af_packet`: `--io`).
    pub fn start_io(
        bin: &Path,
        veths: &VethPairs,
        chain: &Path,
        io: &str,
        extra: &[String],
        stderr: &Path,
    ) -> Result<Self> {
        let ports = veths.dut.iter().enumerate().flat_map(|(p, d)| [format!("--port{p}"), d.clone()]);
        let mut child = Kill(
            Command::new(IP)
                .args(["netns", "exec", &veths.netns])
                .arg(bin)
                .args(ports)
                .args(["--io", io, "--chain"])
                .arg(chain)
                .args(["workers=1", "stats_ms=0"])
                .args(extra)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(std::fs::File::create(stderr)?)
                .spawn()
                .context("starting the hosted dataplane")?,
        );
        let stdout = child.0.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut seen = Vec::new();
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) if l.starts_with("@ready") => break,
                Ok(l) => seen.push(l),
                Err(_) => bail!("the hosted dataplane never said @ready:\n{}", seen.join("\n")),
            }
        }
        Ok(Self { child, lines: rx, startup: seen })
    }

    /// The lines it printed before `@ready` (notes, `@nic` lines).
    pub fn startup_lines(&self) -> &[String] {
        &self.startup
    }

    /// Sends the management request `ctl ID CMD` on its standard input (the hosted build's
    /// management channel, docs/PROTOCOL.md) and returns the answer's data lines; an `error`
    /// answer is an error naming it.
    pub fn ctl(&mut self, id: u32, cmd: &str) -> Result<Vec<String>> {
        Ok(self.ctl_answer(id, cmd)?.0)
    }

    /// [`Dataplane::ctl`] with the `ok` line's fields as well (`entries=2 instances=1`, empty
    /// when it has none).
    pub fn ctl_answer(&mut self, id: u32, cmd: &str) -> Result<(Vec<String>, String)> {
        use std::io::Write;
        let stdin = self.child.0.stdin.as_mut().ok_or_else(|| anyhow!("the dataplane's stdin is gone"))?;
        writeln!(stdin, "ctl {id} {cmd}").and_then(|()| stdin.flush()).context("writing to the dataplane")?;
        let (data, done) = (format!("@ctl id={id} | "), format!("@ctl id={id} "));
        let (ok, ok_fields) = (format!("@ctl id={id} ok"), format!("@ctl id={id} ok "));
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut rows = Vec::new();
        loop {
            match self.lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) if l.starts_with(&data) => rows.push(l[data.len()..].to_string()),
                Ok(l) if l == ok => return Ok((rows, String::new())),
                Ok(l) if l.starts_with(&ok_fields) => return Ok((rows, l[ok_fields.len()..].to_string())),
                Ok(l) if l.starts_with(&done) => bail!("ctl {id} {cmd}: {l}"),
                Ok(_) => {}
                Err(_) => bail!("no answer to ctl {id} {cmd}"),
            }
        }
    }

    /// The lines it printed since the last call (or since `@ready`) that start with
    /// `prefix`, without waiting; the others are dropped.
    pub fn take_lines(&mut self, prefix: &str) -> Vec<String> {
        let mut out = Vec::new();
        while let Ok(l) = self.lines.try_recv() {
            if l.starts_with(prefix) {
                out.push(l);
            }
        }
        out
    }

    /// Stops it as STOP does (SIGINT) and returns its `@summary` line.
    pub fn stop(self) -> Result<String> {
        // SIGINT ends the run as STOP does (the dataplane prints @summary); our child's PID
        // is still ours (`Kill` waits on drop).
        run(Command::new("kill").args(["-INT", &self.child.0.id().to_string()]))?;
        loop {
            match self.lines.recv_timeout(Duration::from_secs(30)) {
                Ok(l) if l.starts_with("@summary") => return Ok(l),
                Ok(_) => {}
                Err(_) => bail!("no @summary from the dataplane after SIGINT"),
            }
        }
    }
}

/// The value of counter `k` in a `@summary` line.
pub fn counter(summary: &str, k: &str) -> Result<u64> {
    summary
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix(k).and_then(|v| v.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| anyhow!("{k} missing in {summary}"))
}
