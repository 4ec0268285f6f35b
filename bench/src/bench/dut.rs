//! The devices under test and how each is started, measured and stopped.
//!
//! Every dataplane runs in a network namespace of its own on two fresh veth pairs
//! ([`cadence_harness::netns::VethPairs`]); the generator (CPU 0) sends into host end 0 and the sink
//! listens on host end 1. The ceiling has no dataplane: one veth pair in the host's
//! namespace, sent into on one end and received on its peer, so it measures the generator,
//! the veth and the sink alone.
//!
//! MACs: host ends `02:cb:00:00:00:0{1,2}`, dataplane ends `02:cb:00:00:01:0{1,2}`; the
//! generator addresses frames to dataplane end 0, and each dataplane writes the host end
//! of its egress port as destination (`peer0/peer1` for Cadence, `--eth-peer` for testpmd).

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::dpdk::{self, FwdStats, Pmd, TestpmdArgs};
use super::generator::{GenConfig, Generator, SinkKind, TrialResult, TrialSpec, TxPath};
use super::rawsock::RawSender;
use super::sysstat::{CpuProbe, tasks_named};
use cadence_harness::netns::{self, VethPairs};
use cadence_harness::protocol::{self, Control, Counters, Mac, Report};
use cadence_harness::qemu::Qemu;
use cadence_platform::hosted::clock::HostClock;

/// Host-end MACs (generator, sink).
pub const HOST_MACS: [[u8; 6]; 2] = [[2, 0xcb, 0, 0, 0, 1], [2, 0xcb, 0, 0, 0, 2]];
/// Dataplane-end MACs (port 0, port 1).
pub const DUT_MACS: [[u8; 6]; 2] = [[2, 0xcb, 0, 0, 1, 1], [2, 0xcb, 0, 0, 1, 2]];

/// Port I/O kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Io {
    AfXdp,
    AfPacket,
}

impl Io {
    /// As Cadence's `--io` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Io::AfXdp => "af_xdp",
            Io::AfPacket => "af_packet",
        }
    }
}

/// Worker scheduling of Cadence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sched {
    Poll,
    /// Metronome as the binary runs it by default: the timer deadline, and wake on arrival
    /// (`arrival=on`, issue 31).
    Metronome,
    /// Metronome waking on its timer deadlines only (`arrival=off`): the paper's rule.
    Deadline,
}

impl Sched {
    pub fn name(self) -> &'static str {
        match self {
            Sched::Poll => "poll",
            Sched::Metronome => "metronome",
            Sched::Deadline => "metronome-deadline",
        }
    }

    /// The dataplane's boot options for this schedule.
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Sched::Poll => &["sched=poll"],
            Sched::Metronome => &["sched=metronome", "arrival=on"],
            Sched::Deadline => &["sched=metronome", "arrival=off"],
        }
    }
}

/// Cadence's worker placement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Placement {
    /// Worker w on CPU `[1, 0][w]` (`--cpus 1` or `--cpus 1,0`).
    Pinned,
    /// `--unpinned` (three workers on two vCPUs).
    Unpinned,
}

/// A device under test.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dut {
    /// Generator → veth → sink, nothing in between.
    Ceiling,
    /// The hosted Cadence binary. `line_mbps` 0: the interface's own speed (a veth says
    /// 10 Gb/s) for Metronome's ring bound; else `line_mbps=` on its command line.
    Cadence { io: Io, chain: bool, sched: Sched, workers: usize, placement: Placement, vbar_us: u32, line_mbps: u32 },
    /// DPDK testpmd, `--forward-mode=mac`.
    Testpmd { io: Io, workers: usize },
}

/// Cadence's default V̄ (`vbar_us`).
pub const VBAR_DEFAULT_US: u32 = 15;

impl Dut {
    /// One pinned Cadence worker, V̄ = 15 µs.
    pub fn cadence(io: Io, chain: bool, sched: Sched) -> Dut {
        Dut::Cadence {
            io,
            chain,
            sched,
            workers: 1,
            placement: Placement::Pinned,
            vbar_us: VBAR_DEFAULT_US,
            line_mbps: 0,
        }
    }

    /// A short unique name: `ceiling`, `cadence/af_xdp/l2/poll`, `testpmd/af_packet`,
    /// with `/w2`, `/unpinned`, `/vbar50`, `/line300` when not the defaults.
    pub fn name(&self) -> String {
        match self {
            Dut::Ceiling => "ceiling".into(),
            Dut::Cadence { io, chain, sched, workers, placement, vbar_us, line_mbps } => {
                let mut s = format!("cadence/{}/{}/{}", io.name(), if *chain { "chain1" } else { "l2" }, sched.name());
                if *workers != 1 {
                    s += &format!("/w{workers}");
                }
                if *placement == Placement::Unpinned {
                    s += "/unpinned";
                }
                if *vbar_us != VBAR_DEFAULT_US && *sched != Sched::Poll {
                    s += &format!("/vbar{vbar_us}");
                }
                if *line_mbps != 0 {
                    s += &format!("/line{line_mbps}");
                }
                s
            }
            Dut::Testpmd { io, workers } => {
                let mut s = format!("testpmd/{}", io.name());
                if *workers != 1 {
                    s += &format!("/w{workers}");
                }
                s
            }
        }
    }

    /// The I/O kind (none for the ceiling).
    pub fn io(&self) -> Option<Io> {
        match self {
            Dut::Ceiling => None,
            Dut::Cadence { io, .. } | Dut::Testpmd { io, .. } => Some(*io),
        }
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        match self {
            Dut::Ceiling => 0,
            Dut::Cadence { workers, .. } | Dut::Testpmd { workers, .. } => *workers,
        }
    }
}

/// What every instance needs.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// The hosted Cadence binary.
    pub cadence: PathBuf,
    /// Chain 1 in its text form.
    pub chain_txt: PathBuf,
    /// Logs go here.
    pub log_dir: PathBuf,
    pub clock: HostClock,
    pub tx_path: TxPath,
    /// Boot options added to every Cadence command line, last (they override the bench's).
    pub cadence_args: Vec<String>,
}

/// A veth pair in the host's namespace (the ceiling).
#[derive(Debug)]
struct Pair {
    ends: [String; 2],
}

impl Pair {
    fn create() -> Result<Pair> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed) % 100;
        let id = std::process::id();
        let ends = [format!("cbc{id}_{n:02}a"), format!("cbc{id}_{n:02}b")];
        ip(&["link", "add", &ends[0], "type", "veth", "peer", "name", &ends[1]])?;
        let pair = Pair { ends };
        for (i, e) in pair.ends.iter().enumerate() {
            let _ = Command::new("sysctl").args(["-q", "-w", &format!("net.ipv6.conf.{e}.disable_ipv6=1")]).output();
            ip(&["link", "set", e, "address", &Mac(HOST_MACS[i]).to_string()])?;
            ip(&["link", "set", e, "up"])?;
        }
        Ok(pair)
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new(netns::IP).args(["link", "del", &self.ends[0]]).output();
    }
}

/// The pid in a name `<prefix><pid>_…`, if it has that shape.
fn owner_pid(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.split('_').next()?.parse().ok()
}

/// Removes what a killed earlier run left behind: ceiling pairs (`cbc<pid>_…`), testpmd
/// runtime directories (`/var/run/dpdk/cadbench<pid>_…`) and rig namespaces
/// (`cad<pid>_…`, with their veths) of processes that no longer exist.
pub fn cleanup_stale() {
    let dead = |pid: u32| !std::path::Path::new(&format!("/proc/{pid}")).exists();
    if let Ok(rd) = std::fs::read_dir("/sys/class/net") {
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().to_string();
            if owner_pid(&name, "cbc").is_some_and(dead) && name.ends_with('a') {
                let _ = Command::new(netns::IP).args(["link", "del", &name]).output();
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir("/var/run/dpdk") {
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().to_string();
            if owner_pid(&name, "cadbench").is_some_and(dead) {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    if let Ok(rd) = std::fs::read_dir("/run/netns") {
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().to_string();
            if owner_pid(&name, "cad").is_some_and(dead) {
                let _ = Command::new(netns::IP).args(["netns", "del", &name]).output();
            }
        }
    }
}

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new(netns::IP).args(args).output().context("running ip")?;
    if !out.status.success() {
        bail!("`ip {}` failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

#[derive(Debug)]
enum Wiring {
    Pairs(VethPairs),
    /// Held for its `Drop` (deletes the pair).
    Pair(#[allow(dead_code)] Pair),
}

/// What stopping an instance returned.
#[derive(Debug, Clone, Default)]
pub struct Stopped {
    /// Cadence's `@summary`.
    pub summary: Option<Counters>,
    /// testpmd's accumulated counters.
    pub testpmd: Option<FwdStats>,
    /// Whether it exited cleanly (Cadence: status 0; testpmd: printed its counters).
    pub clean: bool,
}

/// A running device under test with its generator.
#[derive(Debug)]
pub struct Instance {
    pub dut: Dut,
    // Field order is drop order: the generator's sockets and the process go before the
    // interfaces they use.
    generator: Generator,
    proc: Option<Qemu>,
    ctl: Option<RawSender>,
    /// The key Cadence's control frames are signed with (`ctl_key=`) and the next counter.
    ctl_key: [u8; 16],
    ctl_counter: u64,
    wiring: Wiring,
    pid: Option<i32>,
    /// Worker thread ids.
    pub workers: Vec<i32>,
    pub report: Report,
    dpdk_prefix: Option<String>,
}

/// Makes the child get `SIGKILL` when this process dies, so that an interrupted bench
/// leaves no dataplane running (`prctl(2)`, `PR_SET_PDEATHSIG`; it survives the `exec` of
/// `ip netns exec` and of the dataplane, neither being set-user-ID).
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only makes the
    // async-signal-safe prctl(2) system call.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The process running in namespace `ns` (there is exactly one).
fn netns_pid(ns: &str) -> Result<i32> {
    let out = Command::new(netns::IP).args(["netns", "pids", ns]).output().context("ip netns pids")?;
    let pids: Vec<i32> =
        String::from_utf8_lossy(&out.stdout).split_whitespace().filter_map(|w| w.parse().ok()).collect();
    match pids.as_slice() {
        [p] => Ok(*p),
        other => bail!("expected one process in namespace {ns}, found {other:?}"),
    }
}

fn unique(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

impl Instance {
    /// Wires, starts the generator (with a `sink` of that kind), starts the dataplane and
    /// waits until it forwards.
    pub fn start(ctx: &Ctx, dut: &Dut, sink: SinkKind) -> Result<Instance> {
        let (wiring, gen_ifs) = match dut {
            Dut::Ceiling => {
                let p = Pair::create()?;
                let ifs = p.ends.clone();
                (Wiring::Pair(p), ifs)
            }
            _ => {
                let v = VethPairs::create(1)?;
                for i in 0..2 {
                    v.set_mac(true, i, DUT_MACS[i])?;
                    v.set_mac(false, i, HOST_MACS[i])?;
                }
                let ifs = [v.host[0].clone(), v.host[1].clone()];
                (Wiring::Pairs(v), ifs)
            }
        };
        let dst = if *dut == Dut::Ceiling { HOST_MACS[1] } else { DUT_MACS[0] };
        let generator = Generator::start(GenConfig {
            tx_if: gen_ifs[0].clone(),
            rx_if: gen_ifs[1].clone(),
            dst,
            src: HOST_MACS[0],
            cpu: Some(0),
            path: ctx.tx_path,
            sink,
            clock: ctx.clock,
        })?;
        let mut inst = Instance {
            dut: dut.clone(),
            generator,
            proc: None,
            ctl: None,
            ctl_key: protocol::random_ctl_key(),
            ctl_counter: 1,
            wiring,
            pid: None,
            workers: Vec::new(),
            report: Report::default(),
            dpdk_prefix: None,
        };
        let Wiring::Pairs(v) = &inst.wiring else { return Ok(inst) };
        let (ns, ports) = (v.netns.clone(), v.dut.clone());
        let log = ctx.log_dir.join(format!("{}.log", unique(&dut.name().replace('/', "-"))));
        let mut cmd = Command::new(netns::IP);
        cmd.args(["netns", "exec", &ns]);
        match dut {
            Dut::Cadence { io, chain, sched, workers, placement, vbar_us, line_mbps } => {
                cmd.arg(&ctx.cadence).args(["--port0", &ports[0], "--port1", &ports[1], "--io", io.name()]);
                if *chain {
                    cmd.arg("--chain").arg(&ctx.chain_txt);
                }
                match placement {
                    Placement::Pinned => cmd.args(["--cpus", if *workers >= 2 { "1,0" } else { "1" }]),
                    Placement::Unpinned => cmd.arg("--unpinned"),
                };
                cmd.args([
                    "ctl=port:0".to_string(),
                    format!("ctl_key={}", protocol::ctl_key_hex(&inst.ctl_key)),
                    format!("peer0={}", Mac(HOST_MACS[0])),
                    format!("peer1={}", Mac(HOST_MACS[1])),
                    "stats_ms=0".into(),
                    "max_s=3600".into(),
                    format!("workers={workers}"),
                    format!("vbar_us={vbar_us}"),
                ]);
                cmd.args(sched.args());
                if *line_mbps != 0 {
                    cmd.arg(format!("line_mbps={line_mbps}"));
                }
                cmd.args(&ctx.cadence_args);
                inst.ctl = Some(RawSender::open(&gen_ifs[0])?);
            }
            Dut::Testpmd { io, workers } => {
                let prefix = unique("cadbench");
                let args = TestpmdArgs {
                    pmd: match io {
                        Io::AfXdp => Pmd::AfXdp,
                        Io::AfPacket => Pmd::AfPacket,
                    },
                    ifaces: [ports[0].clone(), ports[1].clone()],
                    peers: [Mac(HOST_MACS[0]).to_string(), Mac(HOST_MACS[1]).to_string()],
                    prefix: prefix.clone(),
                    workers: *workers,
                };
                cmd.arg(dpdk::TESTPMD).args(dpdk::testpmd_args(&args));
                inst.dpdk_prefix = Some(prefix);
            }
            Dut::Ceiling => {}
        }
        std::fs::write(log.with_extension("cmdline"), format!("{cmd:?}\n"))?;
        die_with_parent(&mut cmd);
        inst.proc = Some(Qemu::spawn_hosted(cmd, Some(log))?);
        inst.wait_ready(Duration::from_secs(30))?;
        // `ip netns exec` execs the dataplane: the one process in the namespace.
        let pid = netns_pid(&ns)?;
        inst.pid = Some(pid);
        let want = dut.workers();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            inst.workers = match dut {
                Dut::Testpmd { .. } => tasks_named(pid, |c| c.starts_with("rte-worker")),
                // Worker 0 is the main thread (tid = pid); the others are `cadence-w<N>`.
                // Not by the name `cadence`: a thread nobody named (a library's) inherits
                // it, and neither the `cadence-watchdog`/`-stdin`/`-stdout` helpers.
                _ => {
                    let mut v = tasks_named(pid, |c| {
                        c.strip_prefix("cadence-w")
                            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                    });
                    v.insert(0, pid);
                    v
                }
            };
            if inst.workers.len() >= want || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if inst.workers.len() != want {
            bail!("{}: found {} worker threads, expected {want}", dut.name(), inst.workers.len());
        }
        Ok(inst)
    }

    fn wait_ready(&mut self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        let testpmd = matches!(self.dut, Dut::Testpmd { .. });
        let Some(p) = self.proc.as_mut() else { return Ok(()) };
        loop {
            if let Some(l) = p.next_line(Duration::from_millis(50)) {
                self.report.feed(&l);
                if testpmd && l.contains(dpdk::READY) {
                    return Ok(());
                }
                if !testpmd && self.report.ready {
                    return Ok(());
                }
            }
            if p.try_exit()?.is_some() {
                bail!("{} exited before it was ready\n{}", self.dut.name(), p.diagnostics());
            }
            if Instant::now() >= deadline {
                let d = p.diagnostics();
                let _ = p.kill();
                bail!("{} not ready within {timeout:?}\n{d}", self.dut.name());
            }
        }
    }

    /// The probe for trials: the workers, the process.
    pub fn probe(&self) -> CpuProbe {
        CpuProbe::new(self.pid, &self.workers)
    }

    /// Runs one trial (the spec's probe is replaced by this instance's).
    pub fn trial(&mut self, mut spec: TrialSpec) -> Result<TrialResult> {
        spec.probe = self.probe();
        if let Some(p) = self.proc.as_mut()
            && let Some(e) = p.try_exit()?
        {
            bail!("{} has exited ({:?})\n{}", self.dut.name(), e.status, p.diagnostics());
        }
        let r = self.generator.trial(spec);
        self.pump();
        r
    }

    /// Reads whatever the dataplane printed.
    fn pump(&mut self) {
        if let Some(p) = self.proc.as_ref() {
            while let Some(l) = p.next_line(Duration::ZERO) {
                self.report.feed(&l);
            }
        }
    }

    /// Cadence only: asks for an `@stats` line now (STATS control frame) and returns its
    /// counters, or `None` if none came within 500 ms.
    pub fn stats_now(&mut self) -> Option<Counters> {
        self.pump();
        let ctl = self.ctl.as_ref()?;
        let f = protocol::control_frame(
            Mac(DUT_MACS[0]),
            Mac(HOST_MACS[0]),
            Control::Stats,
            &self.ctl_key,
            self.report.ctl_nonce?,
            self.ctl_counter,
        );
        self.ctl_counter += 1;
        ctl.send(&f).ok()?;
        let p = self.proc.as_ref()?;
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            if let Some(l) = p.next_line(Duration::from_millis(20)) {
                self.report.feed(&l);
                if l.starts_with("@stats") {
                    return self.report.last_stats.clone();
                }
            }
        }
        None
    }

    /// Stops the dataplane (Cadence: STOP frame; testpmd: SIGINT) and reads what it
    /// printed last; then removes its namespace and interfaces.
    pub fn stop(mut self) -> Result<Stopped> {
        let mut out = Stopped::default();
        let Some(mut p) = self.proc.take() else {
            out.clean = true;
            return Ok(out);
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut next_try = Instant::now();
        let exit = loop {
            if Instant::now() >= next_try {
                match (&self.dut, &self.ctl) {
                    (Dut::Testpmd { .. }, _) => {
                        if let Some(pid) = self.pid {
                            // SAFETY: kill(2) with a pid we started and have not reaped.
                            unsafe { libc::kill(pid, libc::SIGINT) };
                        }
                    }
                    (_, Some(ctl)) => {
                        let f = protocol::control_frame(
                            Mac(DUT_MACS[0]),
                            Mac(HOST_MACS[0]),
                            Control::Stop,
                            &self.ctl_key,
                            // Before `@ready` no frame can be signed: the deadline kills it.
                            self.report.ctl_nonce.unwrap_or(0),
                            self.ctl_counter,
                        );
                        self.ctl_counter += 1;
                        let _ = ctl.send(&f);
                    }
                    _ => {}
                }
                next_try = Instant::now() + Duration::from_secs(3);
            }
            if let Some(l) = p.next_line(Duration::from_millis(20)) {
                self.report.feed(&l);
            }
            if let Some(e) = p.try_exit()? {
                break e;
            }
            if Instant::now() >= deadline {
                break p.kill()?;
            }
        };
        while let Some(l) = p.next_line(Duration::from_millis(50)) {
            self.report.feed(&l);
        }
        let text = p.com1().join("\n");
        match self.dut {
            Dut::Testpmd { .. } => {
                out.testpmd = dpdk::parse_accumulated(&text);
                out.clean = out.testpmd.is_some() && !exit.timed_out;
            }
            _ => {
                out.summary = self.report.summary.clone();
                out.clean = exit.status == Some(33) && out.summary.is_some();
            }
        }
        if let Some(prefix) = &self.dpdk_prefix {
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
        }
        Ok(out)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some(mut p) = self.proc.take() {
            let _ = p.kill();
        }
        if let Some(prefix) = &self.dpdk_prefix {
            let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(Dut::Ceiling.name(), "ceiling");
        assert_eq!(Dut::cadence(Io::AfXdp, false, Sched::Poll).name(), "cadence/af_xdp/l2/poll");
        let d = Dut::Cadence {
            io: Io::AfPacket,
            chain: true,
            sched: Sched::Metronome,
            workers: 3,
            placement: Placement::Unpinned,
            vbar_us: 50,
            line_mbps: 0,
        };
        assert_eq!(d.name(), "cadence/af_packet/chain1/metronome/w3/unpinned/vbar50");
        let l = Dut::Cadence {
            io: Io::AfPacket,
            chain: true,
            sched: Sched::Metronome,
            workers: 1,
            placement: Placement::Pinned,
            vbar_us: 50,
            line_mbps: 300,
        };
        assert_eq!(l.name(), "cadence/af_packet/chain1/metronome/vbar50/line300");
        assert_eq!(Dut::Testpmd { io: Io::AfXdp, workers: 2 }.name(), "testpmd/af_xdp/w2");
        assert_eq!((d.workers(), d.io(), Dut::Ceiling.io()), (3, Some(Io::AfPacket), None));
    }

    #[test]
    fn stale_names_name_their_owner() {
        assert_eq!(owner_pid("cbc4618_03a", "cbc"), Some(4618));
        assert_eq!(owner_pid("cad12_00", "cad"), Some(12));
        assert_eq!(owner_pid("cadence", "cad"), None);
        assert_eq!(owner_pid("eth0", "cbc"), None);
    }
}
