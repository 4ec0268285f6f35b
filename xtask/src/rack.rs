//! `cargo xtask run --rack N`: a rack on this machine (issue 30) — Open vSwitch in its own
//! run directory as the top-of-rack switch (userspace datapath), N hosted Cadence servers
//! behind it (1 worker each: this is a 2-vCPU machine, so N = 2 is what fits; the L2
//! forwarder; `report_ms=200`), each server's port 1 leading to a Linux host that receives,
//! a generator host, and the rack controller (`cadence_ctl::rack`, τ = 1: a server with its
//! one core in use takes no second aggregate) fed by the servers' own `@report` lines.
//!
//! The generator brings N + 1 destination /24 aggregates one after the other (4 flows of 50
//! frames each): the first N recruit one server each, the last overflows onto a server in
//! use. It prints the controller's `@rack` events, OVS's table (`ovs-ofctl dump-flows`), the
//! frames each server forwarded (`@summary`), and the checker's verdict: every frame back
//! once, in order per flow, on its aggregate's server. Everything it started is stopped when
//! it ends, also on Ctrl-C (`cadence_harness::interrupt`). Needs root, iproute2, python3 and
//! Open vSwitch (installed as root on Debian when missing).

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use cadence_build::image::{self, Profile};
use cadence_ctl::rack::{Event, event_line};
use cadence_harness::hosts::counter;
use cadence_harness::rack::{Kind, Rack, Running, check_frames, feed_reports, server_of, table};

/// Runs a rack of `n` servers; `Ok(true)` when every frame came back once and in order on
/// its aggregate's server.
pub fn run(n: u32) -> Result<bool> {
    if !(1..=8).contains(&n) {
        bail!("--rack {n}: 1..=8 servers (each a hosted dataplane with 1 worker; 2 fit this 2-vCPU machine)");
    }
    if !cadence_harness::netns::can_create() {
        bail!("--rack needs root and iproute2's `ip`: it creates network namespaces and veth pairs");
    }
    cadence_build::provision::ensure_ovs()?;
    cadence_build::provision::ensure_evasion_tools()?;
    let bin = image::build_hosted(Profile::Release)?;
    let out = image::target_dir()
        .join("xtask")
        .join("rack")
        .join(crate::run::timestamp_dir_name(std::time::SystemTime::now()));
    std::fs::create_dir_all(&out)?;
    let toml = out.join("l2.toml");
    std::fs::write(&toml, "[chain]\nnfs = []\nvalidate = \"l2\"\n")?;
    let chain = out.join("l2.chain");
    std::fs::write(&chain, cadence_ctl::chain::load(&toml)?.text)?;
    cadence_harness::interrupt::catch();
    let mut rack = Rack::start(&out, "x", &Kind::Cadence(bin, chain), n)?;
    println!(
        "rack: OVS bridge {} (run directory {}), generator on port 1, {n} Cadence servers on ports 2..={}",
        rack.ovs.bridge,
        rack.ovs.dir().display(),
        n + 1
    );
    let r = steer(&mut rack, n);
    let flows = rack.ovs.ofctl("dump-flows", &[]).unwrap_or_default();
    println!("\nOVS's table:\n{flows}");
    std::fs::write(out.join("dump-flows.txt"), &flows)?;
    for (i, s) in rack.servers.iter_mut().enumerate() {
        if let Some(dp) = s.dp.take() {
            let summary = dp.stop()?;
            println!(
                "server {i}: p0_rx={} p1_tx={} (frames from the switch, frames to its far host)",
                counter(&summary, "p0_rx")?,
                counter(&summary, "p1_tx")?
            );
            std::fs::write(out.join(format!("summary{i}.txt")), &summary)?;
        }
    }
    println!("artifacts in {}", out.display());
    match r {
        Ok(()) => {
            println!("OK: every frame once and in order per flow, on its aggregate's server");
            Ok(true)
        }
        Err(_) if cadence_harness::interrupt::requested() => {
            println!("interrupted (Ctrl-C); everything it started is stopped");
            Ok(false)
        }
        Err(e) => {
            println!("FAILED: {e:#}");
            Ok(false)
        }
    }
}

fn steer(rack: &mut Rack, n: u32) -> Result<()> {
    let mut c = Running::start(&rack.ovs, n as usize, 1)?;
    let print = |c: &mut Running, from: usize| {
        for e in &c.log[from..] {
            println!("{}", event_line(e));
        }
        c.log.len()
    };
    c.wait("the switch's connection", |e| matches!(e, Event::Rebuilt { .. }))?;
    let mut shown = print(&mut c, 0);
    // Every server's first report, before any traffic.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut reported = vec![false; n as usize];
    while reported.iter().any(|r| !r) {
        feed_reports(rack, &c)?;
        if let Ok(e) = c.events.recv_timeout(std::time::Duration::from_millis(100)) {
            if let Event::Report { server, .. } = e
                && let Some(r) = reported.get_mut(server)
            {
                *r = true;
            }
            c.log.push(e);
        }
        if cadence_harness::interrupt::requested() {
            bail!("interrupted (Ctrl-C)");
        }
        if std::time::Instant::now() > deadline {
            bail!("not every server reported within 20 s: {reported:?}");
        }
    }
    shown = print(&mut c, shown);
    let mut total = 0;
    let dsts: Vec<Vec<String>> =
        (1..=n + 1).map(|a| (0..4).map(|h| format!("10.4.{a}.{}", 10 + h)).collect()).collect();
    for (a, hosts) in dsts.iter().enumerate() {
        println!("\naggregate 10.4.{}.0/24: 4 flows x 50 frames", a + 1);
        let f: Vec<(&str, u16, u32)> =
            hosts.iter().enumerate().map(|(h, d)| (d.as_str(), 4000 + (a * 4 + h) as u16, 0)).collect();
        rack.flows(&f, &mut total)?;
        feed_reports(rack, &c)?;
        c.drain();
        shown = print(&mut c, shown);
    }
    let _ = shown;
    drop(c.stop().context("stopping the controller")?);
    let t: BTreeMap<String, String> = table(&rack.ovs)?;
    check_frames(rack, &|d| server_of(&t, d), 4 * (n as usize + 1))
}
