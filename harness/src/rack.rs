//! A rack on this machine (issue 30): Open vSwitch ([`crate::ovs`]) as the top-of-rack
//! switch, a generator host behind port 1, `n` servers behind ports 2.. (Linux hosts with a
//! receiver, or hosted Cadence dataplanes whose port 1 leads to such a host), and the rack
//! controller (`cadence_ctl::rack`) on a thread of its own. Used by `tests/tests/rack.rs` and
//! `cargo xtask run --rack N`. The generator and the receivers are Python (raw sockets);
//! every frame carries its flow's sequence number, and [`check_frames`] wants every frame
//! once and in order per flow, on its aggregate's server. Needs root, iproute2, python3 and
//! Open vSwitch. Timeouts are hang guards; nothing asserts on time.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use cadence_core::netblaze::IngressConfig;
use cadence_ctl::rack::{Controller, Event, RackConfig};

use crate::hosts::{Dataplane, Kill, Netns, ip};
use crate::netns::{IP, VethPairs};
use crate::ovs::Ovs;

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
s.setsockopt(socket.SOL_SOCKET,socket.SO_RCVBUF,1<<22)\n\
print('ready',flush=True)\n\
while True:\n    f=s.recv(4096)\n    \
if len(f)<46 or f[23]!=17 or struct.unpack('!H',f[36:38])[0]!=9999: continue\n    \
print(socket.inet_ntoa(f[30:34]),struct.unpack('!H',f[34:36])[0],struct.unpack('!I',f[42:46])[0],flush=True)\n";

/// A receiver in a server's namespace and the lines it printed so far.
#[derive(Debug)]
pub struct FarHost {
    _child: Kill,
    /// `(dst, sport, seq)` of every frame it saw, in order.
    pub seen: Arc<Mutex<Vec<(String, u16, u32)>>>,
}

impl FarHost {
    /// Starts the receiver on `ifname` in `ns`; returns once it listens.
    pub fn start(ns: &str, ifname: &str) -> Result<Self> {
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

    /// Frames seen so far.
    pub fn count(&self) -> usize {
        self.seen.lock().map(|v| v.len()).unwrap_or(0)
    }
}

/// What stands behind a server port of the switch.
#[derive(Debug)]
pub enum Kind {
    /// A Linux host with a receiver.
    Linux,
    /// A hosted Cadence dataplane (this binary, this chain file, 1 worker, `@report` every
    /// 200 ms) whose port 1 leads to a Linux host with a receiver.
    Cadence(PathBuf, PathBuf),
}

/// One server: its dataplane (if any), the receiver at the far side, their namespaces.
#[derive(Debug)]
pub struct Server {
    /// The dataplane, when it is one.
    pub dp: Option<Dataplane>,
    /// The receiver.
    pub recv: FarHost,
    _ns: Netns,
    _veths: Option<VethPairs>,
}

/// The rig: OVS, a generator namespace with a veth into the bridge (port 1), two servers
/// (ports 2 and 3).
#[derive(Debug)]
pub struct Rack {
    /// The switch.
    pub ovs: Ovs,
    gen_ns: Netns,
    gen_if: String,
    /// The servers, server `i` behind switch port `2 + i`.
    pub servers: Vec<Server>,
}

/// A controller running on a thread of its own until its stop flag is set.
#[derive(Debug)]
pub struct Running {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<Controller>>>,
    /// Its events, as they come.
    pub events: Receiver<Event>,
    /// Server reports into it: `(server, dedicated)`.
    pub reports: Sender<(usize, u16)>,
    /// The events taken so far ([`Running::wait`], [`Running::drain`]).
    pub log: Vec<Event>,
    /// The TCP port it listens on.
    pub port: u16,
}

impl Running {
    pub fn start(ovs: &Ovs, servers: usize, tau: u16) -> Result<Self> {
        Self::start_with(ovs, servers, tau, false)
    }

    pub fn start_with(ovs: &Ovs, servers: usize, tau: u16, select_baseline: bool) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let mut ingress = IngressConfig::default();
        (ingress.prefix_len, ingress.tau) = (24, tau);
        let cfg =
            RackConfig { server_ports: (2..2 + servers as u32).collect(), ingress, priority: 100, select_baseline };
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
        Ok(Self { stop, thread: Some(thread), events, reports, log: Vec::new(), port })
    }

    /// Waits (a hang guard of 20 s) for an event `want` accepts, logging every event.
    pub fn wait(&mut self, what: &str, want: impl Fn(&Event) -> bool) -> Result<Event> {
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
    pub fn drain(&mut self) {
        while let Ok(e) = self.events.try_recv() {
            self.log.push(e);
        }
    }

    pub fn stop(mut self) -> Result<Controller> {
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
    pub fn start(out: &Path, tag: &str, kind: &Kind, n: u32) -> Result<Self> {
        let tag = format!("rk{}{tag}", std::process::id() % 10_000);
        let ovs = Ovs::start(&out.join("ovs"), &tag)?;
        let veth_into = |role: &str, ofport: Option<u32>| -> Result<(Netns, String)> {
            let n = Netns::new(format!("{tag}{role}"))?;
            let (sw, host) = (format!("{tag}{role}o"), format!("{tag}{role}h"));
            ip(&["link", "add", &sw, "type", "veth", "peer", "name", &host])?;
            ip(&["link", "set", &host, "netns", &n.0])?;
            ip(&["-n", &n.0, "link", "set", &host, "up"])?;
            ip(&["link", "set", &sw, "up"])?;
            if let Some(p) = ofport {
                ovs.add_port(&sw, p)?;
            }
            Ok((n, host))
        };
        let (gen_ns, gen_if) = veth_into("g", Some(1))?;
        let mut servers = Vec::new();
        for i in 0..n {
            let role = format!("s{i}");
            servers.push(match kind {
                Kind::Linux => {
                    let (ns, host) = veth_into(&role, Some(2 + i))?;
                    Server { dp: None, recv: FarHost::start(&ns.0, &host)?, _ns: ns, _veths: None }
                }
                Kind::Cadence(bin, chain) => {
                    let veths = VethPairs::create(1)?;
                    ovs.add_port(&veths.host[0], 2 + i)?;
                    let ns = Netns::new(format!("{tag}{role}"))?;
                    let host = &veths.host[1];
                    ip(&["link", "set", host, "netns", &ns.0])?;
                    ip(&["-n", &ns.0, "link", "set", host, "up"])?;
                    let recv = FarHost::start(&ns.0, host)?;
                    let extra = ["report_ms=200".to_string()];
                    let dp = Dataplane::start(bin, &veths, chain, &extra, &out.join(format!("dataplane{i}.stderr")))?;
                    Server { dp: Some(dp), recv, _ns: ns, _veths: Some(veths) }
                }
            });
        }
        Ok(Self { ovs, gen_if, gen_ns, servers })
    }

    /// Sends `flows` (`(dst, sport, first, count)`) from the generator.
    pub fn send(&self, flows: &[(&str, u16, u32, u32)]) -> Result<()> {
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
    pub fn wait_frames(&self, n: usize) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.servers.iter().map(|s| s.recv.count()).sum::<usize>() < n {
            if crate::interrupt::requested() {
                bail!("interrupted (Ctrl-C)");
            }
            if Instant::now() > deadline {
                bail!("the servers saw {} frames of {n}", self.servers.iter().map(|s| s.recv.count()).sum::<usize>());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Sends each flow's first frame alone, waits for it, then the rest (module docs).
    pub fn flows(&self, flows: &[(&str, u16, u32)], total: &mut usize) -> Result<()> {
        let first: Vec<_> = flows.iter().map(|&(d, s, f)| (d, s, f, 1)).collect();
        self.send(&first)?;
        *total += flows.len();
        self.wait_frames(*total)?;
        // The rest, 4 flows at a time (a burst the receivers' sockets hold).
        for chunk in flows.chunks(4) {
            let rest: Vec<_> = chunk.iter().map(|&(d, s, f)| (d, s, f + 1, 49)).collect();
            self.send(&rest)?;
            *total += 49 * chunk.len();
            self.wait_frames(*total)?;
        }
        Ok(())
    }
}

/// OVS's table: `nw_dst` prefix → output port, for the entries at priority 100.
pub fn table(ovs: &Ovs) -> Result<BTreeMap<String, String>> {
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

/// The server (`i`: switch port `2 + i`) `table` sends destination `dst` (a /24's address) to.
pub fn server_of(table: &BTreeMap<String, String>, dst: &str) -> Option<usize> {
    let agg = dst.rsplit_once('.').map(|(a, _)| format!("{a}.0/24"))?;
    let port: usize = table.get(&agg)?.strip_prefix("output:")?.parse().ok()?;
    port.checked_sub(2)
}

/// Every frame once, in order per flow (50 frames each), on its aggregate's server only;
/// `n` flows in all.
pub fn check_frames(rack: &Rack, server_of: &dyn Fn(&str) -> Option<usize>, n: usize) -> Result<()> {
    let mut flows: BTreeMap<(String, u16), Vec<u32>> = BTreeMap::new();
    for (i, r) in rack.servers.iter().enumerate() {
        let seen = r.recv.seen.lock().map_err(|_| anyhow!("receiver lock"))?.clone();
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
    if flows.len() != n {
        bail!("{} flows arrived of {n}", flows.len());
    }
    Ok(())
}

/// Feeds every server's `@report` lines to the controller; how many were fed.
pub fn feed_reports(rack: &mut Rack, c: &Running) -> Result<usize> {
    let mut n = 0;
    for (i, s) in rack.servers.iter_mut().enumerate() {
        let Some(dp) = s.dp.as_mut() else { continue };
        for l in dp.take_lines("@report") {
            let (dedicated, _pps) = cadence_ctl::rack::parse_report(&l).ok_or_else(|| anyhow!("bad report: {l}"))?;
            c.reports.send((i, dedicated))?;
            n += 1;
        }
    }
    Ok(n)
}
