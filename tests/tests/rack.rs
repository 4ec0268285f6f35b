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
//! Three tests. In the first, the servers are Linux hosts with a raw-socket receiver and
//! their reports are fed to the controller by the test, to walk the mapper's decisions;
//! τ = 2: the first aggregate recruits server 0, the second joins it; server 0 then reports 2 dedicated cores, so the third recruits
//! server 1 and the fourth joins server 1. Assertions are on OVS's own table
//! (`ovs-ofctl -O OpenFlow13 dump-flows`: one entry per aggregate, output to the server the
//! mapper chose) and on what the receivers saw: every frame once, in order per flow, on the
//! chosen server only. Then the controller is replaced by a new one, which must rebuild the
//! four decisions from the switch's table (a fifth aggregate joins server 0, which is under τ
//! after the restart, and no entry moves); then the table is limited (OVS's `flow_limit` with
//! `overflow_policy=refuse`) so that a sixth aggregate's flow-mod is refused: the controller
//! reports the refusal and keeps the aggregate's packets going to its server as packet-outs;
//! last, the switch drops the connection (pointed elsewhere) and comes back: the controller
//! reports the disconnection, the table stays, and the reconnection finds the five entries.
//!
//! In the second, each server is a hosted Cadence dataplane (1 worker, the L2 forwarder,
//! `report_ms=200`) whose port 0 is the switch's port and whose port 1 leads to a Linux host
//! with the receiver; the controller's reports are the dataplanes' own `@report` lines (read
//! from their management channel's output, `Dataplane::take_lines`), 1 dedicated core each,
//! and τ = 1: the first aggregate recruits server 0, the second server 1, the third overflows
//! onto server 0. Asserted: OVS's table, every frame once and in order per flow at the far
//! hosts, and each dataplane's `@summary` (`p0_rx` = `p1_tx` = the frames of its aggregates).
//!
//! The third sends the same 16 flows (2 aggregates) through the mapper and through the
//! `select` baseline (`RackConfig::select_baseline`) on a fresh rack each: the mapper keeps
//! them on 1 server, `select` spreads them over both; no frame lost or reordered either way.
//!
//! The rig is `cadence_harness::rack`. Each flow's first frame is sent alone and waited for
//! before the rest (as a TCP flow's first packet waits for its answer): a frame that reaches
//! the switch while its aggregate's entry is being installed goes through the controller and
//! could be passed by a later one (`cadence_ctl::rack` module docs); the rest go 4 flows at a
//! time. Timeouts are hang guards; nothing asserts on time.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, anyhow, bail};
use cadence_build::image::{self, Profile};
use cadence_core::netblaze::Steer;
use cadence_ctl::rack::Event;
use cadence_harness::hosts::counter;
use cadence_harness::ovs;
use cadence_harness::rack::{Kind, Rack, Running, check_frames, feed_reports, server_of, table};
use std::net::TcpListener;
use std::time::{Duration, Instant};

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
    let rack = Rack::start(&out, "a", &Kind::Linux, 2)?;
    let r = run(&rack);
    std::fs::write(out.join("dump-flows.txt"), rack.ovs.ofctl("dump-flows", &[]).unwrap_or_default())?;
    r.with_context(|| format!("ovs-vswitchd.log tail:\n{}\n(artifacts in {})", ovs::log_tail(&rack.ovs), out.display()))
}

fn run(rack: &Rack) -> Result<()> {
    let mut c = Running::start(&rack.ovs, 2, 2)?;
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
    let mut c = Running::start(&rack.ovs, 2, 2)?;
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
    // The switch drops the connection and comes back: the controller reports it, the table
    // stays, and the reconnection finds the five entries as the mapper has them.
    // (`del-controller` would not do: OVS flushes the table of a bridge left without a
    // primary controller. Pointing it at a port nobody listens on drops the connection.)
    let nobody = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    rack.ovs.set_controller(nobody)?;
    c.wait("disconnection", |e| matches!(e, Event::Disconnected(_)))?;
    let t = table(&rack.ovs)?;
    if t != want {
        bail!("OVS's table without its controller: {t:?}, want {want:?}");
    }
    rack.ovs.set_controller(c.port)?;
    c.wait("rebuild after the reconnection", |e| *e == Event::Rebuilt { restored: 5, foreign: 0 })?;
    let ctl = c.stop()?;
    let counts = ctl.counts();
    if counts.bad != 0 {
        bail!("packet-ins the controller could not read: {counts:?}");
    }

    // Every frame once, in order per flow, on its aggregate's server only (10.1.6.0/24,
    // refused, reaches server 0 through the controller).
    let mut route = want;
    route.insert("10.1.6.0/24".into(), "output:2".into());
    check_frames(rack, &|d| server_of(&route, d), 10)
}

#[test]
fn cadence_servers_report_their_cores_and_carry_the_aggregates_ovs_sends_them() -> Result<()> {
    if !cadence_harness::netns::can_create() {
        bail!("the rack test needs root and iproute2 (network namespaces); CI runs as root");
    }
    if !ovs::present() {
        bail!(
            "the rack test needs Open vSwitch (packages: {}); `cargo xtask test` installs it as root on Debian",
            cadence_build::provision::OVS_PACKAGES.join(" ")
        );
    }
    let bin = image::build_hosted(Profile::Release)?;
    let out = cadence_tests::out_dir("rack_cadence");
    std::fs::create_dir_all(&out)?;
    // The L2 forwarder: port 0 (from the switch) to port 1 (the far host).
    let toml = out.join("l2.toml");
    std::fs::write(&toml, "[chain]\nnfs = []\nvalidate = \"l2\"\n")?;
    let chain = out.join("l2.chain");
    std::fs::write(&chain, cadence_ctl::chain::load(&toml)?.text)?;
    let mut rack = Rack::start(&out, "b", &Kind::Cadence(bin, chain), 2)?;
    let r = run_cadence(&mut rack);
    std::fs::write(out.join("dump-flows.txt"), rack.ovs.ofctl("dump-flows", &[]).unwrap_or_default())?;
    let mut summaries = Vec::new();
    for s in &mut rack.servers {
        if let Some(dp) = s.dp.take() {
            summaries.push(dp.stop()?);
        }
    }
    std::fs::write(out.join("summaries.txt"), summaries.join("\n"))?;
    r.with_context(|| {
        format!("ovs-vswitchd.log tail:\n{}\n(artifacts in {})", ovs::log_tail(&rack.ovs), out.display())
    })?;
    // Each server forwarded what it received from the switch to its far host: 50 frames per
    // flow of its aggregates (server 0: 10.2.1/24 with 2 flows and the overflow 10.2.3/24;
    // server 1: 10.2.2/24), and nothing else.
    for (i, (s, want)) in summaries.iter().zip([150u64, 50]).enumerate() {
        let (rx, tx) = (counter(s, "p0_rx")?, counter(s, "p1_tx")?);
        if rx != want || tx != want {
            bail!("server {i}: p0_rx={rx} p1_tx={tx}, want {want}: {s}");
        }
    }
    Ok(())
}

fn run_cadence(rack: &mut Rack) -> Result<()> {
    // τ = 1: a server with one dedicated core (one worker) takes no second aggregate.
    let mut c = Running::start(&rack.ovs, 2, 1)?;
    c.wait("rebuild", |e| *e == Event::Rebuilt { restored: 0, foreign: 0 })?;
    // Each server's first report reaches the mapper: 1 dedicated core each.
    for i in 0..2 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            feed_reports(rack, &c)?;
            match c.events.recv_timeout(Duration::from_millis(100)) {
                Ok(e) => {
                    c.log.push(e.clone());
                    if e == (Event::Report { server: i, dedicated: 1 }) {
                        break;
                    }
                }
                Err(_) if Instant::now() > deadline => bail!("no @report of server {i}: {:?}", c.log),
                Err(_) => {}
            }
        }
    }
    // One aggregate at a time, so the decisions come in this order: 10.2.1/24 recruits
    // server 0, 10.2.2/24 server 1, and 10.2.3/24 finds both full and none left (overflow,
    // onto the server with the fewest cores: a tie, the lower index).
    let mut total = 0;
    rack.flows(&[("10.2.1.5", 2000, 0), ("10.2.1.6", 2001, 0)], &mut total)?;
    feed_reports(rack, &c)?;
    rack.flows(&[("10.2.2.5", 2002, 0)], &mut total)?;
    feed_reports(rack, &c)?;
    rack.flows(&[("10.2.3.5", 2003, 0)], &mut total)?;
    c.drain();
    let steers: Vec<Steer> =
        c.log.iter().filter_map(|e| if let Event::Installed { steer, .. } = e { Some(*steer) } else { None }).collect();
    if steers != [Steer::Recruited(0), Steer::Recruited(1), Steer::Overflow(0)] {
        bail!("the mapper's decisions: {steers:?} (events {:?})", c.log);
    }
    let want: BTreeMap<String, String> =
        [("10.2.1.0/24", "output:2"), ("10.2.2.0/24", "output:3"), ("10.2.3.0/24", "output:2")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
    let t = table(&rack.ovs)?;
    if t != want {
        bail!("OVS's table: {t:?}, want {want:?}");
    }
    drop(c.stop()?);
    check_frames(rack, &|d| server_of(&want, d), 4)
}

#[test]
fn against_the_select_baseline_the_mapper_keeps_the_same_traffic_on_fewer_servers() -> Result<()> {
    if !cadence_harness::netns::can_create() {
        bail!("the rack test needs root and iproute2 (network namespaces); CI runs as root");
    }
    if !ovs::present() {
        bail!(
            "the rack test needs Open vSwitch (packages: {}); `cargo xtask test` installs it as root on Debian",
            cadence_build::provision::OVS_PACKAGES.join(" ")
        );
    }
    // The same traffic twice, each time on a fresh rack: 16 flows (distinct source ports) in
    // 2 aggregates; both servers report 1 dedicated core, τ = 6 (the default).
    let flows: Vec<(String, u16)> = (0..16u16).map(|i| (format!("10.3.{}.{}", 1 + i % 2, 10 + i), 3000 + i)).collect();
    let mut carrying = Vec::new();
    for (tag, select) in [("c", false), ("d", true)] {
        let out = cadence_tests::out_dir(&format!("rack_{}", if select { "select" } else { "mapper" }));
        std::fs::create_dir_all(&out)?;
        let rack = Rack::start(&out, tag, &Kind::Linux, 2)?;
        let mut c = Running::start_with(&rack.ovs, 2, 6, select)?;
        c.wait("rebuild", |e| matches!(e, Event::Rebuilt { .. }))?;
        for i in 0..2 {
            c.reports.send((i, 1))?;
        }
        let mut total = 0;
        let f: Vec<(&str, u16, u32)> = flows.iter().map(|(d, s)| (d.as_str(), *s, 0)).collect();
        rack.flows(&f, &mut total)?;
        std::fs::write(out.join("dump-flows.txt"), rack.ovs.ofctl("dump-flows", &[])?)?;
        drop(c.stop()?);
        // Every frame once and in order, each flow on one server.
        let mut on: BTreeMap<(String, u16), BTreeSet<usize>> = BTreeMap::new();
        for (i, s) in rack.servers.iter().enumerate() {
            for (d, sp, _) in s.recv.seen.lock().map_err(|_| anyhow!("receiver lock"))?.iter() {
                on.entry((d.clone(), *sp)).or_default().insert(i);
            }
        }
        if let Some((f, s)) = on.iter().find(|(_, s)| s.len() != 1) {
            bail!("flow {f:?} on servers {s:?}");
        }
        let server = |d: &str| on.iter().find(|((fd, _), _)| fd == d).and_then(|(_, s)| s.first().copied());
        check_frames(&rack, &server, 16)?;
        carrying.push(rack.servers.iter().filter(|s| s.recv.count() > 0).count());
    }
    // The mapper: both aggregates on the first recruited server; select: spread over both.
    if carrying != [1, 2] {
        bail!("servers carrying traffic (mapper, select): {carrying:?}, want [1, 2]");
    }
    Ok(())
}
