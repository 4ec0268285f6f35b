//! The rack controller on a real switch (issue 30, first slice): Open vSwitch (userspace
//! datapath, a run directory of its own, `cadence_harness::ovs`) with a generator host and two
//! server hosts behind it, each in a network namespace, and `cadence_ctl::rack::Controller`
//! speaking OpenFlow 1.3 to it:
//!
//! ```text
//!  netns …g (generator) ══ port 1 ┐
//!                                 OVS bridge (datapath_type=netdev) ── tcp ── controller
//!  netns …s0 (server 0) ══ port 2 ┤
//!  netns …s1 (server 1) ══ port 3 ┘
//! ```
//!
//! The servers here are Linux hosts with a raw-socket receiver (not yet hosted Cadence
//! dataplanes: that and the dataplanes' own `@report` lines are the next slice); their
//! reports are fed to the controller by the test. τ = 2: the first aggregate recruits server
//! 0, the second joins it; server 0 then reports 2 dedicated cores, so the third recruits
//! server 1 and the fourth joins server 1. Assertions are on OVS's own table
//! (`ovs-ofctl -O OpenFlow13 dump-flows`: one entry per aggregate, output to the server the
//! mapper chose) and on what the receivers saw: every frame once, in order per flow, on the
//! chosen server only. Then the controller is replaced by a new one, which must rebuild the
//! four decisions from the switch's table (a fifth aggregate joins server 0, which is under τ
//! after the restart, and no entry moves); then the table is limited (OVS's `flow_limit` with
//! `overflow_policy=refuse`) so that a sixth aggregate's flow-mod is refused: the controller
//! reports the refusal and keeps the aggregate's packets going to its server as packet-outs.
//!
//! Each flow's first frame is sent alone and waited for before the rest (as a TCP flow's
//! first packet waits for its answer): a frame that reaches the switch while its aggregate's
//! entry is being installed goes through the controller and could be passed by a later one
//! (rack.rs module docs). Timeouts are hang guards; nothing asserts on time.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use cadence_core::netblaze::{IngressConfig, Steer};
use cadence_ctl::rack::{Controller, Event, RackConfig};
use cadence_harness::hosts::{Kill, Netns, ip};
use cadence_harness::netns::IP;
use cadence_harness::ovs::{self, Ovs};

/// Python, in the generator's namespace: sends UDP frames out of `argv[1]`. `argv[2..]` are
/// `DST:SPORT:FIRST:COUNT`: frames FIRST..FIRST+COUNT of flow (DST, SPORT), the sequence
/// number in the payload; frames of different flows interleaved.
const SEND: &str = "import socket,struct,sys\n\
s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\ns.bind((sys.argv[1],0))\n\
def csum(h):\n    t=sum(struct.unpack('!10H',h))\n    t=(t>>16)+(t&0xffff); t+=t>>16\n    return (~t)&0xffff\n\
flows=[a.split(':') for a in sys.argv[2:]]\nn=max(int(f[3]) for f in flows)\n\
for i in range(n):\n    for d,sp,first,count in flows:\n        if i>=int(count): continue\n        \
seq=int(first)+i\n        pay=struct.pack('!I',seq)+bytes(20)\n        \
udp=struct.pack('!HHHH',int(sp),9999,8+len(pay),0)+pay\n        \
h=struct.pack('!BBHHHBBH4s4s',0x45,0,20+len(udp),0,0,64,17,0,socket.inet_aton('10.0.0.1'),socket.inet_aton(d))\n        \
h=h[:10]+struct.pack('!H',csum(h))+h[12:]\n        \
s.send(b'\\xff'*6+b'\\x02\\x00\\x00\\x00\\x00\\x01'+b'\\x08\\x00'+h+udp)\n";

/// Python, in a server's namespace: prints `DST SPORT SEQ` for every UDP frame to port 9999
/// on `argv[1]`, `ready` once bound.
const RECV: &str = "import socket,struct,sys\n\
s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x0800))\ns.bind((sys.argv[1],0x0800))\n\
print('ready',flush=True)\n\
while True:\n    f=s.recv(4096)\n    \
if len(f)<46 or f[23]!=17 or struct.unpack('!H',f[36:38])[0]!=9999: continue\n    \
print(socket.inet_ntoa(f[30:34]),struct.unpack('!H',f[34:36])[0],struct.unpack('!I',f[42:46])[0],flush=True)\n";

/// A receiver in a server's namespace and the lines it printed so far.
struct Receiver_ {
    _child: Kill,
    seen: Arc<Mutex<Vec<(String, u16, u32)>>>,
}

impl Receiver_ {
    fn start(ns: &str, ifname: &str) -> Result<Self> {
        let mut child = Kill(
            Command::new(IP)
                .args(["netns", "exec", ns, "python3", "-u", "-c", RECV, ifname])
                .stdout(Stdio::piped())
                .spawn()
                .context("starting a receiver")?,
        );
        let mut out = BufReader::new(child.0.stdout.take().ok_or_else(|| anyhow!("no receiver stdout"))?);
        let mut first = String::new();
        out.read_line(&mut first)?;
        if first.trim() != "ready" {
            bail!("the receiver did not start: {first:?}");
        }
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for l in out.lines().map_while(Result::ok) {
                let w: Vec<&str> = l.split_whitespace().collect();
                if let [d, sp, seq] = w.as_slice()
                    && let (Ok(sp), Ok(seq)) = (sp.parse(), seq.parse())
                    && let Ok(mut v) = s.lock()
                {
                    v.push((d.to_string(), sp, seq));
                }
            }
        });
        Ok(Self { _child: child, seen })
    }

    fn count(&self) -> usize {
        self.seen.lock().map(|v| v.len()).unwrap_or(0)
    }
}

/// The rig: OVS, three namespaces with a veth each into the bridge, two receivers.
struct Rack {
    ovs: Ovs,
    gen_ns: Netns,
    gen_if: String,
    recv: Vec<Receiver_>,
    _ns: Vec<Netns>,
}

/// A controller running on a thread of its own until its stop flag is set.
struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<Controller>>>,
    events: Receiver<Event>,
    reports: Sender<(usize, u16)>,
    log: Vec<Event>,
}

impl Running {
    fn start(ovs: &Ovs) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let mut ingress = IngressConfig::default();
        (ingress.prefix_len, ingress.tau) = (24, 2);
        let cfg = RackConfig { server_ports: vec![2, 3], ingress, priority: 100 };
        let mut c = Controller::new(cfg)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (etx, events) = channel();
        let (reports, rrx) = channel();
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            c.serve(&listener, &rrx, &st, &mut |e| {
                let _ = etx.send(e);
            })?;
            Ok(c)
        });
        ovs.set_controller(port)?;
        Ok(Self { stop, thread: Some(thread), events, reports, log: Vec::new() })
    }

    /// Waits (a hang guard of 20 s) for an event `want` accepts, logging every event.
    fn wait(&mut self, what: &str, want: impl Fn(&Event) -> bool) -> Result<Event> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let e = self
                .events
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .map_err(|_| anyhow!("no {what} from the controller; its events: {:?}", self.log))?;
            self.log.push(e.clone());
            if want(&e) {
                return Ok(e);
            }
        }
    }

    /// Takes the events already sent into the log.
    fn drain(&mut self) {
        while let Ok(e) = self.events.try_recv() {
            self.log.push(e);
        }
    }

    fn stop(mut self) -> Result<Controller> {
        self.stop.store(true, Ordering::Relaxed);
        let t = self.thread.take().ok_or_else(|| anyhow!("stopped twice"))?;
        t.join().map_err(|_| anyhow!("the controller panicked"))?
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Rack {
    fn start(out: &std::path::Path) -> Result<Self> {
        let tag = std::process::id() % 100_000;
        let ovs = Ovs::start(&out.join("ovs"), &format!("rk{tag}"))?;
        let mut ns = Vec::new();
        let mut ifs = Vec::new();
        for (i, role) in ["g", "s0", "s1"].iter().enumerate() {
            let n = Netns::new(format!("rk{tag}{role}"))?;
            let (sw, host) = (format!("rk{tag}{role}o"), format!("rk{tag}{role}h"));
            ip(&["link", "add", &sw, "type", "veth", "peer", "name", &host])?;
            ip(&["link", "set", &host, "netns", &n.0])?;
            ip(&["-n", &n.0, "link", "set", &host, "up"])?;
            ip(&["link", "set", &sw, "up"])?;
            ovs.add_port(&sw, i as u32 + 1)?;
            ifs.push(host);
            ns.push(n);
        }
        let mut ns = ns.into_iter();
        let gen_ns = ns.next().ok_or_else(|| anyhow!("no generator namespace"))?;
        let rest: Vec<Netns> = ns.collect();
        let recv = vec![Receiver_::start(&rest[0].0, &ifs[1])?, Receiver_::start(&rest[1].0, &ifs[2])?];
        Ok(Self { ovs, gen_if: ifs[0].clone(), gen_ns, recv, _ns: rest })
    }

    /// Sends `flows` (`(dst, sport, first, count)`) from the generator.
    fn send(&self, flows: &[(&str, u16, u32, u32)]) -> Result<()> {
        let args: Vec<String> = flows.iter().map(|(d, s, f, c)| format!("{d}:{s}:{f}:{c}")).collect();
        let o = Command::new(IP)
            .args(["netns", "exec", &self.gen_ns.0, "python3", "-c", SEND, &self.gen_if])
            .args(&args)
            .output()
            .context("running the generator")?;
        if !o.status.success() {
            bail!("the generator failed: {}", String::from_utf8_lossy(&o.stderr));
        }
        Ok(())
    }

    /// Waits (a hang guard) until the receivers have seen `n` frames in all.
    fn wait_frames(&self, n: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.recv.iter().map(Receiver_::count).sum::<usize>() < n {
            if Instant::now() > deadline {
                bail!("the servers saw {} frames of {n}", self.recv.iter().map(Receiver_::count).sum::<usize>());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Sends each flow's first frame alone, waits for it, then the rest (module docs).
    fn flows(&self, flows: &[(&str, u16, u32)], total: &mut usize) -> Result<()> {
        let first: Vec<_> = flows.iter().map(|&(d, s, f)| (d, s, f, 1)).collect();
        self.send(&first)?;
        *total += flows.len();
        self.wait_frames(*total)?;
        let rest: Vec<_> = flows.iter().map(|&(d, s, f)| (d, s, f + 1, 49)).collect();
        self.send(&rest)?;
        *total += 49 * flows.len();
        self.wait_frames(*total)
    }
}

/// OVS's table: `nw_dst` prefix → output port, for the entries at priority 100.
fn table(ovs: &Ovs) -> Result<BTreeMap<String, String>> {
    let text = ovs.ofctl("dump-flows", &[])?;
    let mut t = BTreeMap::new();
    for l in text.lines().filter(|l| l.contains("priority=100")) {
        let dst = l
            .split(['\u{20}', ','])
            .find_map(|w| w.strip_prefix("nw_dst="))
            .ok_or_else(|| anyhow!("no nw_dst: {l}"))?;
        let out = l.split("actions=").nth(1).ok_or_else(|| anyhow!("no actions: {l}"))?;
        if t.insert(dst.to_string(), out.trim().to_string()).is_some() {
            bail!("two entries for {dst}:\n{text}");
        }
    }
    Ok(t)
}

#[test]
fn the_controller_programs_ovs_with_one_entry_per_aggregate_and_rebuilds_from_its_table() -> Result<()> {
    if !cadence_harness::netns::can_create() {
        bail!("the rack test needs root and iproute2 (network namespaces); CI runs as root");
    }
    if !ovs::present() {
        bail!(
            "the rack test needs Open vSwitch (packages: {}); `cargo xtask test` installs it as root on Debian",
            cadence_build::provision::OVS_PACKAGES.join(" ")
        );
    }
    let out = cadence_tests::out_dir("rack");
    std::fs::create_dir_all(&out)?;
    let rack = Rack::start(&out)?;
    let r = run(&rack);
    std::fs::write(out.join("dump-flows.txt"), rack.ovs.ofctl("dump-flows", &[]).unwrap_or_default())?;
    r.with_context(|| format!("ovs-vswitchd.log tail:\n{}\n(artifacts in {})", ovs::log_tail(&rack.ovs), out.display()))
}

fn run(rack: &Rack) -> Result<()> {
    let mut c = Running::start(&rack.ovs)?;
    c.wait("connection", |e| matches!(e, Event::Connected { .. }))?;
    c.wait("rebuild", |e| *e == Event::Rebuilt { restored: 0, foreign: 0 })?;
    let mut total = 0;

    // Aggregates 10.1.1/24 and 10.1.2/24 (two flows each): server 0, recruited then joined.
    rack.flows(
        &[("10.1.1.5", 1000, 0), ("10.1.1.6", 1001, 0), ("10.1.2.5", 1002, 0), ("10.1.2.9", 1003, 0)],
        &mut total,
    )?;
    // Server 0 reports 2 dedicated cores (τ): the next aggregates recruit server 1.
    c.reports.send((0, 2))?;
    c.wait("report", |e| *e == Event::Report { server: 0, dedicated: 2 })?;
    rack.flows(&[("10.1.3.5", 1004, 0), ("10.1.4.5", 1005, 0)], &mut total)?;
    // An entry's event is sent before its first packet goes out, so all are in by now.
    c.drain();
    let installed: Vec<Event> = c.log.iter().filter(|e| matches!(e, Event::Installed { .. })).cloned().collect();
    let steers: Vec<Steer> = installed
        .iter()
        .filter_map(|e| if let Event::Installed { steer, .. } = e { Some(*steer) } else { None })
        .collect();
    if steers != [Steer::Recruited(0), Steer::New(0), Steer::Recruited(1), Steer::New(1)] {
        bail!("the mapper's decisions: {steers:?} (events {:?})", c.log);
    }
    let want: BTreeMap<String, String> = [
        ("10.1.1.0/24", "output:2"),
        ("10.1.2.0/24", "output:2"),
        ("10.1.3.0/24", "output:3"),
        ("10.1.4.0/24", "output:3"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    let t = table(&rack.ovs)?;
    if t != want {
        bail!("OVS's table after the first decisions: {t:?}, want {want:?}");
    }

    // A new controller: it rebuilds the four decisions from the table; a fifth aggregate
    // joins server 0 (active, 1 dedicated core after the restart: under τ); nothing moves.
    drop(c.stop()?);
    let mut c = Running::start(&rack.ovs)?;
    c.wait("rebuild after the restart", |e| *e == Event::Rebuilt { restored: 4, foreign: 0 })?;
    rack.flows(&[("10.1.1.7", 1006, 0), ("10.1.4.7", 1007, 0), ("10.1.5.5", 1008, 0)], &mut total)?;
    let mut want = want;
    want.insert("10.1.5.0/24".into(), "output:2".into());
    let t = table(&rack.ovs)?;
    if t != want {
        bail!("OVS's table after the restart: {t:?}, want {want:?}");
    }

    // A full table: OVS refuses the sixth aggregate's entry; the controller says so and
    // still sends its packets to the server it chose (server 0: both servers restored with 1
    // dedicated core, a tie goes to the lower index) as packet-outs.
    rack.ovs.vsctl(&[
        "--",
        "--id=@ft",
        "create",
        "Flow_Table",
        "flow_limit=6",
        "overflow_policy=refuse",
        "--",
        "set",
        "Bridge",
        &rack.ovs.bridge,
        "flow_tables:0=@ft",
    ])?;
    rack.flows(&[("10.1.6.5", 1009, 0)], &mut total)?;
    match c.wait("refusal", |e| matches!(e, Event::Refused { .. }))? {
        // OFPET_FLOW_MOD_FAILED / OFPFMFC_TABLE_FULL.
        Event::Refused { prefix: Some(0x0a01_0600), ty: 5, code: 1 } => {}
        e => bail!("not the table-full refusal of 10.1.6.0/24: {e:?}"),
    }
    let t = table(&rack.ovs)?;
    if t != want {
        bail!("OVS's table after the refusal: {t:?}, want {want:?}");
    }
    let ctl = c.stop()?;
    let counts = ctl.counts();
    if counts.bad != 0 {
        bail!("packet-ins the controller could not read: {counts:?}");
    }

    // Every frame once, in order per flow, on its aggregate's server only.
    let server_of = |dst: &str| -> Option<usize> {
        let agg = dst.rsplit_once('.').map(|(a, _)| format!("{a}.0/24"))?;
        match want.get(&agg).map(String::as_str) {
            Some("output:2") => Some(0),
            Some("output:3") => Some(1),
            _ if agg == "10.1.6.0/24" => Some(0),
            _ => None,
        }
    };
    let mut flows: BTreeMap<(String, u16), Vec<u32>> = BTreeMap::new();
    for (i, r) in rack.recv.iter().enumerate() {
        let seen = r.seen.lock().map_err(|_| anyhow!("receiver lock"))?.clone();
        for (d, sp, seq) in seen {
            if server_of(&d) != Some(i) {
                bail!("flow {d}:{sp} frame {seq} reached server {i}, not its aggregate's");
            }
            flows.entry((d, sp)).or_default().push(seq);
        }
    }
    let expect: Vec<u32> = (0..50).collect();
    for (f, seqs) in &flows {
        let mut once = seqs.clone();
        once.sort_unstable();
        once.dedup();
        if once.len() != seqs.len() {
            bail!("flow {f:?}: duplicates: {seqs:?}");
        }
        if seqs != &expect {
            bail!("flow {f:?}: frames lost or out of order: {seqs:?}");
        }
    }
    if flows.len() != 10 {
        bail!("{} flows arrived of 10", flows.len());
    }
    Ok(())
}
