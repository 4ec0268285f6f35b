//! The rack controller (issue 30): NetBlaze's ingress mapper
//! (`cadence_core::netblaze::IngressMapper`, docs/NETBLAZE.md "Ingress at rack scale") run
//! against a real top-of-rack switch, Open vSwitch, over OpenFlow 1.3 ([`crate::openflow`]).
//!
//! **Why speak OpenFlow ourselves** rather than run `ovs-ofctl` per change: a refused flow-mod
//! (`OFPT_ERROR`) and a lost connection arrive as events on the one connection, in order with
//! the barrier that follows the change, so the controller knows which decision the switch
//! refused; the packet-in → rule → packet-out path needs a connection anyway; and a change is a
//! write, not a process.
//!
//! **How it works.** The controller listens; the bridge connects to it
//! (`ovs-vsctl set-controller BR tcp:127.0.0.1:PORT`, `fail_mode=secure` so the switch does not
//! fall back to a learning switch while the controller is away). On each connection:
//! hello, features (the datapath id), then the flow table is read back (flow-stats multipart)
//! and every entry with the controller's cookie ([`COOKIE`]) whose match is an IPv4
//! destination `/k` and whose action outputs to a server's port is restored into the mapper
//! (`IngressMapper::restore`) — a restarted controller continues with the switch's decisions
//! and never moves an aggregate. Then the default entry (priority 0, everything to the
//! controller, whole packets) is (re)installed. A packet-in is steered: an aggregate the mapper
//! knows goes out (packet-out) to its server; a new one gets its entry
//! (`ip,nw_dst=PREFIX/k → output:PORT` at [`RackConfig::priority`]) and a barrier, and only
//! after the barrier reply is the packet sent out, so the entry exists before any packet of it
//! is forwarded. Entries are only added, never modified or deleted.
//!
//! **Failures.** A refused flow-mod is [`Event::Refused`] (with the aggregate it was for); the
//! mapper keeps its decision, and that aggregate's packets keep coming to the controller,
//! which sends them to the same server. A lost connection is [`Event::Disconnected`]; what is
//! installed stays in the switch (`fail_mode=secure`), and the controller accepts the switch's
//! next connection (OVS reconnects by itself) and rebuilds from its table. Every wait has a
//! deadline.
//!
//! **What is not solved**: packets of a new aggregate that reach the switch between its
//! first packet-in and the entry's installation come to the controller as packet-ins and are
//! sent out after the entry exists, so a later packet that hits the entry directly can pass
//! them (a reorder within the aggregate's first milliseconds). The rack test checks order per
//! flow at the receivers, and its generator sends a flow's first frame alone and waits for it
//! (as a TCP flow's first packet waits for its answer).
//!
//! **Baseline**: with [`RackConfig::select_baseline`] the controller installs an OpenFlow
//! `select` group over the servers' ports instead, and all IPv4 goes to it (the switch hashes
//! each flow onto one bucket, what ECMP does); the mapper is not consulted.
//!
//! Server reports ([`RackConfig`] server `i` ↔ OVS port) come in as `(server, dedicated)`
//! over a channel and go to `IngressMapper::report`; [`parse_report`] reads a dataplane's
//! `@report` line (docs/PROTOCOL.md), and `cadence-ctl rack` takes them on standard input
//! ([`parse_input`]) and prints events as [`event_line`]s.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use cadence_core::netblaze::{IngressConfig, IngressMapper, Steer};

use crate::openflow::{self as of, Header, Match, ty};

/// The cookie on every entry this controller installs (the ASCII "CADENCE" and a version).
pub const COOKIE: u64 = 0x4341_4445_4e43_4501;

/// How long the switch may take to answer a handshake step, a flow-stats read or a barrier.
const ANSWER: Duration = Duration::from_secs(5);
/// How often the controller looks at its stop flag and the reports while idle.
const POLL: Duration = Duration::from_millis(50);

/// The controller's configuration.
#[derive(Debug, Clone)]
pub struct RackConfig {
    /// The switch's port of server `i`, for every server of the rack.
    pub server_ports: Vec<u32>,
    /// The mapper's knobs (`/k`, τ).
    pub ingress: IngressConfig,
    /// The priority of an aggregate's entry (above the default entry's 0).
    pub priority: u16,
    /// The baseline instead of the mapper: one `select` group over every server's port
    /// ([`SELECT_GROUP`], the switch hashes each flow onto a bucket: what ECMP does) and one
    /// entry sending all IPv4 to it (priority 1); no aggregate entries, no packet-ins for
    /// IPv4.
    pub select_baseline: bool,
}

/// The group id of the `select` baseline.
pub const SELECT_GROUP: u32 = 1;

impl RackConfig {
    /// Checks it: at least one server, distinct ports that are real switch ports, a
    /// priority above 0.
    pub fn check(&self) -> Result<()> {
        if self.server_ports.is_empty() {
            bail!("rack: server_ports is empty (one switch port per server)");
        }
        for (i, &p) in self.server_ports.iter().enumerate() {
            if p == 0 || p > 0xffff_ff00 {
                bail!("rack: server_ports[{i}] = {p} is not a switch port (1..=0xffffff00)");
            }
            if self.server_ports[..i].contains(&p) {
                bail!("rack: server_ports[{i}] = {p} repeats an earlier server's port");
            }
        }
        if self.priority <= 1 {
            bail!("rack: priority must be above 1 (the default entry's 0, the select baseline's 1)");
        }
        Ok(())
    }
}

/// What the controller tells its caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The switch connected and answered the handshake.
    Connected {
        /// Its datapath id.
        dpid: u64,
    },
    /// The mapper's state was rebuilt from the switch's table.
    Rebuilt {
        /// Aggregate entries restored into the mapper, or found as the mapper already had
        /// them (a reconnection).
        restored: usize,
        /// Entries with our cookie that were not understood, or that contradict the
        /// mapper (left alone).
        foreign: usize,
    },
    /// A new aggregate's entry was installed (the barrier answered).
    Installed {
        /// Its first address.
        prefix: u32,
        /// `k`.
        len: u8,
        /// The mapper's decision.
        steer: Steer,
        /// The switch port.
        port: u32,
    },
    /// The switch refused a message (`OFPT_ERROR`).
    Refused {
        /// The aggregate whose entry it was, if it was one.
        prefix: Option<u32>,
        /// `ofp_error_msg` type and code.
        ty: u16,
        /// Code.
        code: u16,
    },
    /// A server's report reached the mapper.
    Report {
        /// The server.
        server: usize,
        /// Its dedicated cores.
        dedicated: u16,
    },
    /// The connection ended (the switch closed it, or it broke).
    Disconnected(String),
}

/// Counters of what the controller did with packet-ins.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Packet-ins received.
    pub packet_ins: u64,
    /// Packets sent out to a server.
    pub packet_outs: u64,
    /// Packet-ins dropped: not IPv4 (or too short to be).
    pub not_ipv4: u64,
    /// Packet-ins dropped: unparseable or without an ingress port.
    pub bad: u64,
}

/// The controller: the mapper and the state of one connection at a time.
#[derive(Debug)]
pub struct Controller {
    cfg: RackConfig,
    mapper: IngressMapper,
    xid: u32,
    counts: Counts,
}

/// One connection's byte stream cut into messages.
struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    /// The next whole message, waiting at most until `deadline` (`None`: none by then).
    fn next(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>> {
        loop {
            if self.buf.len() >= 8 {
                let h = Header::parse(&self.buf)?;
                let n = usize::from(h.len);
                if self.buf.len() >= n {
                    let rest = self.buf.split_off(n);
                    return Ok(Some(std::mem::replace(&mut self.buf, rest)));
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.s.set_read_timeout(Some(left.min(POLL)))?;
            let mut chunk = [0u8; 4096];
            match self.s.read(&mut chunk) {
                Ok(0) => bail!("the switch closed the connection"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted) => {}
                Err(e) => return Err(e).context("reading from the switch"),
            }
        }
    }

    fn send(&mut self, m: &[u8]) -> Result<()> {
        self.s.write_all(m).context("writing to the switch")
    }
}

impl Controller {
    /// A controller for `cfg` (checked), its mapper with no aggregate yet.
    pub fn new(cfg: RackConfig) -> Result<Self> {
        cfg.check()?;
        let mapper = IngressMapper::new(cfg.ingress, cfg.server_ports.len());
        Ok(Self { cfg, mapper, xid: 1, counts: Counts::default() })
    }

    /// The mapper.
    pub fn mapper(&self) -> &IngressMapper {
        &self.mapper
    }

    /// What it did with packet-ins.
    pub fn counts(&self) -> Counts {
        self.counts
    }

    fn next_xid(&mut self) -> u32 {
        self.xid = self.xid.wrapping_add(1).max(1);
        self.xid
    }

    /// Serves switch connections accepted on `listener` until `stop` is set: one at a time,
    /// each rebuilt from the switch's table, a lost one reported and the next accepted.
    /// `reports` carries `(server, dedicated cores)`. Returns only when stopped (or when the
    /// listener itself fails).
    pub fn serve(
        &mut self,
        listener: &TcpListener,
        reports: &Receiver<(usize, u16)>,
        stop: &AtomicBool,
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        listener.set_nonblocking(true).context("listener")?;
        while !stop.load(Ordering::Relaxed) {
            self.take_reports(reports, events);
            match listener.accept() {
                Ok((s, _)) => {
                    s.set_nonblocking(false)?;
                    s.set_nodelay(true)?;
                    let mut c = Conn { s, buf: Vec::new() };
                    if let Err(e) = self.session(&mut c, reports, stop, events) {
                        events(Event::Disconnected(format!("{e:#}")));
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
                Err(e) => return Err(e).context("accepting the switch's connection"),
            }
        }
        Ok(())
    }

    fn take_reports(&mut self, reports: &Receiver<(usize, u16)>, events: &mut dyn FnMut(Event)) {
        while let Ok((server, dedicated)) = reports.try_recv() {
            self.mapper.report(server, dedicated);
            events(Event::Report { server, dedicated });
        }
    }

    /// Waits for a message of type `want` with `xid`, handling what comes before it.
    fn expect(&mut self, c: &mut Conn, want: u8, xid: u32, events: &mut dyn FnMut(Event)) -> Result<Vec<u8>> {
        let deadline = Instant::now() + ANSWER;
        let mut pending = Vec::new();
        let found = loop {
            let Some(m) = c.next(deadline)? else {
                bail!("the switch did not answer (type {want}, xid {xid}) within {ANSWER:?}");
            };
            let h = Header::parse(&m)?;
            if h.ty == want && h.xid == xid {
                break m;
            }
            match h.ty {
                ty::ECHO_REQUEST => c.send(&of::echo_reply(h.xid, m.get(8..).unwrap_or(&[])))?,
                ty::ERROR => {
                    let (t, code) = of::parse_error(&m)?;
                    events(Event::Refused { prefix: None, ty: t, code });
                    if h.xid == xid {
                        bail!("the switch refused request {xid}: error type {t} code {code}");
                    }
                }
                // Packet-ins wait until the exchange is over.
                ty::PACKET_IN => pending.push(m),
                _ => {}
            }
        };
        for m in pending {
            self.packet_in(c, &m, events)?;
        }
        Ok(found)
    }

    fn session(
        &mut self,
        c: &mut Conn,
        reports: &Receiver<(usize, u16)>,
        stop: &AtomicBool,
        events: &mut dyn FnMut(Event),
    ) -> Result<()> {
        let x = self.next_xid();
        c.send(&of::hello(x))?;
        let deadline = Instant::now() + ANSWER;
        loop {
            let m = c.next(deadline)?.ok_or_else(|| anyhow!("no hello from the switch within {ANSWER:?}"))?;
            if Header::parse(&m)?.ty == ty::HELLO {
                break;
            }
        }
        let x = self.next_xid();
        c.send(&of::features_request(x))?;
        let f = self.expect(c, ty::FEATURES_REPLY, x, events)?;
        events(Event::Connected { dpid: of::parse_features_reply(&f)? });
        self.rebuild(c, events)?;
        // The default entry: whatever no aggregate entry matches goes to the controller.
        let x = self.next_xid();
        c.send(&of::flow_add(x, COOKIE, 0, &Match::any(), of::PORT_CONTROLLER))?;
        if self.cfg.select_baseline {
            // On a reconnection the group exists already: the switch's refusal
            // (OFPET_GROUP_MOD_FAILED / OFPGMFC_GROUP_EXISTS) is reported and harmless.
            let x = self.next_xid();
            c.send(&of::group_add_select(x, SELECT_GROUP, &self.cfg.server_ports))?;
            let x = self.next_xid();
            c.send(&of::flow_add_group(x, COOKIE, 1, &Match::ipv4_dst(0, 0), SELECT_GROUP))?;
        }
        let x = self.next_xid();
        c.send(&of::barrier_request(x))?;
        self.expect(c, ty::BARRIER_REPLY, x, events)?;
        while !stop.load(Ordering::Relaxed) {
            self.take_reports(reports, events);
            let Some(m) = c.next(Instant::now() + POLL)? else { continue };
            let h = Header::parse(&m)?;
            match h.ty {
                ty::ECHO_REQUEST => c.send(&of::echo_reply(h.xid, m.get(8..).unwrap_or(&[])))?,
                ty::ERROR => {
                    let (t, code) = of::parse_error(&m)?;
                    events(Event::Refused { prefix: None, ty: t, code });
                }
                ty::PACKET_IN => self.packet_in(c, &m, events)?,
                _ => {}
            }
        }
        Ok(())
    }

    /// Reads the switch's table and restores our aggregate entries into the mapper.
    fn rebuild(&mut self, c: &mut Conn, events: &mut dyn FnMut(Event)) -> Result<()> {
        let x = self.next_xid();
        c.send(&of::flow_stats_request(x))?;
        let (mut restored, mut foreign) = (0, 0);
        loop {
            let m = self.expect(c, ty::MULTIPART_REPLY, x, events)?;
            let (entries, more) = of::parse_flow_stats_reply(&m)?;
            for e in entries.iter().filter(|e| e.cookie == COOKIE && e.priority == self.cfg.priority) {
                let server = match e.outputs.as_slice() {
                    [p] => self.cfg.server_ports.iter().position(|q| q == p),
                    _ => None,
                };
                match (e.matching.as_ipv4_dst(), server) {
                    (Some((prefix, len)), Some(s)) if len == self.mapper.prefix_len() => {
                        // Restored, or (a reconnection) already the mapper's decision.
                        let agg = self.mapper.aggregate(prefix);
                        if self.mapper.restore(agg, s as u16) || self.mapper.route(agg) == Some(s as u16) {
                            restored += 1;
                        } else {
                            foreign += 1;
                        }
                    }
                    _ => foreign += 1,
                }
            }
            if !more {
                break;
            }
        }
        events(Event::Rebuilt { restored, foreign });
        Ok(())
    }

    /// Steers one packet-in (module docs).
    fn packet_in(&mut self, c: &mut Conn, m: &[u8], events: &mut dyn FnMut(Event)) -> Result<()> {
        self.counts.packet_ins += 1;
        let Ok(p) = of::parse_packet_in(m) else {
            self.counts.bad += 1;
            return Ok(());
        };
        let Some(in_port) = p.in_port() else {
            self.counts.bad += 1;
            return Ok(());
        };
        // Ethernet without a VLAN tag, IPv4: the destination at bytes 30..34.
        let dst = match (p.data.get(12..14), p.data.get(30..34)) {
            (Some([0x08, 0x00]), Some(&[a, b, c3, d])) => u32::from_be_bytes([a, b, c3, d]),
            _ => {
                self.counts.not_ipv4 += 1;
                return Ok(());
            }
        };
        let Some(steer) = self.mapper.steer(dst) else { return Ok(()) };
        let port = self
            .cfg
            .server_ports
            .get(usize::from(steer.server()))
            .copied()
            .ok_or_else(|| anyhow!("server out of range"))?;
        if !matches!(steer, Steer::Known(_)) {
            let (len, prefix) = (self.mapper.prefix_len(), self.mapper.prefix(self.mapper.aggregate(dst)));
            let x = self.next_xid();
            c.send(&of::flow_add(x, COOKIE, self.cfg.priority, &Match::ipv4_dst(prefix, len), port))?;
            let b = self.next_xid();
            c.send(&of::barrier_request(b))?;
            // The refusal of `x`, if any, comes before the barrier's reply.
            let deadline = Instant::now() + ANSWER;
            let mut pending = Vec::new();
            let mut refused = false;
            loop {
                let r = c.next(deadline)?.ok_or_else(|| anyhow!("no barrier reply within {ANSWER:?}"))?;
                let h = Header::parse(&r)?;
                match h.ty {
                    ty::BARRIER_REPLY if h.xid == b => break,
                    ty::ERROR => {
                        let (t, code) = of::parse_error(&r)?;
                        refused |= h.xid == x;
                        events(Event::Refused { prefix: (h.xid == x).then_some(prefix), ty: t, code });
                    }
                    ty::ECHO_REQUEST => c.send(&of::echo_reply(h.xid, r.get(8..).unwrap_or(&[])))?,
                    ty::PACKET_IN => pending.push(r),
                    _ => {}
                }
            }
            if !refused {
                events(Event::Installed { prefix, len, steer, port });
            }
            let x = self.next_xid();
            c.send(&of::packet_out(x, in_port, port, &p.data))?;
            self.counts.packet_outs += 1;
            for r in pending {
                self.packet_in(c, &r, events)?;
            }
            return Ok(());
        }
        let x = self.next_xid();
        c.send(&of::packet_out(x, in_port, port, &p.data))?;
        self.counts.packet_outs += 1;
        Ok(())
    }
}

/// An event as the line `cadence-ctl rack` prints (docs/PROTOCOL.md "Rack controller").
pub fn event_line(e: &Event) -> String {
    let ip = |a: u32| std::net::Ipv4Addr::from(a).to_string();
    match e {
        Event::Connected { dpid } => format!("@rack connected dpid={dpid:016x}"),
        Event::Rebuilt { restored, foreign } => format!("@rack rebuilt restored={restored} foreign={foreign}"),
        Event::Installed { prefix, len, steer, port } => {
            let how = match steer {
                Steer::Known(_) => "known",
                Steer::New(_) => "new",
                Steer::Recruited(_) => "recruited",
                Steer::Overflow(_) => "overflow",
            };
            format!("@rack installed prefix={}/{len} server={} port={port} steer={how}", ip(*prefix), steer.server())
        }
        Event::Refused { prefix, ty, code } => match prefix {
            Some(p) => format!("@rack refused prefix={} type={ty} code={code}", ip(*p)),
            None => format!("@rack refused prefix=- type={ty} code={code}"),
        },
        Event::Report { server, dedicated } => format!("@rack report server={server} dedicated={dedicated}"),
        Event::Disconnected(why) => format!("@rack disconnected why=\"{why}\""),
    }
}

/// One line of `cadence-ctl rack`'s standard input: `SERVER @report …` (the server's index,
/// then its `@report` line). `(server, dedicated)`, or `None` for any other line.
pub fn parse_input(line: &str) -> Option<(usize, u16)> {
    let (server, rest) = line.trim().split_once(' ')?;
    Some((server.parse().ok()?, parse_report(rest.trim_start())?.0))
}

/// A server's `@report` line (docs/PROTOCOL.md): its dedicated cores and its load (frames
/// received per second over the last period). `None` for any other line.
pub fn parse_report(line: &str) -> Option<(u16, u64)> {
    let rest = line.strip_prefix("@report ")?;
    let key = |k: &str| rest.split_whitespace().find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='));
    Some((key("dedicated")?.parse().ok()?, key("pps")?.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_lines_and_input() {
        let e = Event::Installed { prefix: 0x0a01_0200, len: 24, steer: Steer::Recruited(1), port: 3 };
        assert_eq!(event_line(&e), "@rack installed prefix=10.1.2.0/24 server=1 port=3 steer=recruited");
        let e = Event::Refused { prefix: Some(0x0a01_0600), ty: 5, code: 1 };
        assert_eq!(event_line(&e), "@rack refused prefix=10.1.6.0 type=5 code=1");
        assert_eq!(parse_input("1 @report t_ms=200 period=0 dedicated=2 workers=2 rx=0 pps=0"), Some((1, 2)));
        assert_eq!(parse_input("x @report dedicated=2 pps=0"), None);
        assert_eq!(parse_input("@report dedicated=2 pps=0"), None);
    }

    #[test]
    fn report_lines_parse() {
        assert_eq!(
            parse_report("@report t_ms=2000 period=1 dedicated=3 workers=4 rx=20480 pps=10240"),
            Some((3, 10240))
        );
        assert_eq!(parse_report("@stats t_ms=2000 dedicated=3 pps=1"), None);
        assert_eq!(parse_report("@report t_ms=2000 dedicated=x pps=1"), None);
        assert_eq!(parse_report("@report t_ms=2000 pps=1"), None);
    }

    #[test]
    fn a_bad_configuration_names_the_field() {
        let cfg = |ports: Vec<u32>, priority| RackConfig {
            server_ports: ports,
            ingress: IngressConfig::default(),
            priority,
            select_baseline: false,
        };
        let e = |c: RackConfig| c.check().unwrap_err().to_string();
        assert!(e(cfg(vec![], 100)).contains("server_ports is empty"));
        assert!(e(cfg(vec![1, 0], 100)).contains("server_ports[1] = 0"));
        assert!(e(cfg(vec![1, 2, 1], 100)).contains("server_ports[2] = 1 repeats"));
        assert!(e(cfg(vec![1], 0)).contains("priority"));
        assert!(e(cfg(vec![1], 1)).contains("priority"));
        assert!(cfg(vec![1, 2], 100).check().is_ok());
    }
}
