//! The management channel end to end (docs/PROTOCOL.md, "Management channel"): requests on
//! COM1's receiver while traffic flows, replies as `@ctl` lines.
//!
//! - An ACL rule added and removed mid-stream, two workers sharing the lane: the denied
//!   flow's frames stop at one point and resume at one point (frame by frame: every frame
//!   before the first switch came back, none between, every one after the second), each
//!   switch between the moment the command was sent and the moment its reply came; every
//!   other flow lost nothing; the denied frames are exactly the firmware's `drop_acl_deny`.
//!   Bad requests on the way (unknown command, a rule that does not parse, a line too long,
//!   a rule that does not exist) each get their named error and change nothing.
//! - A route changed and changed back mid-stream through `cargo xtask ctl`'s client and the
//!   rig's relay socket: the flow's frames leave by the new next hop from one point on and
//!   by the old one again from a later point, nothing lost or reordered.
//!
//! Timeouts are hang guards; nothing asserts on time.

use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use cadence_build::image;
use cadence_core::nf::l3fwd::NextHop;
use cadence_ctl::ctl::Reply;
use cadence_harness::protocol::BootOptions;
use cadence_harness::rig::Rig;
use cadence_harness::traffic::Pacer;
use cadence_tests::{BOOT_TIMEOUT, start_with, stop_ok};

/// One QEMU at a time: two shared cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

const FLOWS: u16 = 8;
const RATE: u64 = 1000;
/// Hang guard for one reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a flow's frames changed treatment: `seen` is, per sequence number, whether the frame
/// came back (or took the new path); returns the runs as (start, value) pairs.
fn runs(seen: &[bool]) -> Vec<(usize, bool)> {
    let mut out: Vec<(usize, bool)> = Vec::new();
    for (i, &s) in seen.iter().enumerate() {
        if out.last().is_none_or(|&(_, v)| v != s) {
            out.push((i, s));
        }
    }
    out
}

/// A request sent mid-stream: the flow's sent count when it went out and when its reply came.
#[derive(Debug, Default, Clone, Copy)]
struct Window {
    sent_before: u32,
    sent_after: u32,
}

impl Window {
    fn contains(&self, seq: usize) -> bool {
        (self.sent_before as usize..=self.sent_after as usize).contains(&seq)
    }
}

/// Sends `frames` frames round robin at [`RATE`]; before frame `at[i]`, calls `step(i, rig)`
/// (which sends a request and returns its id) and records the window until the reply;
/// returns the replies and windows (measured on flow `watch`).
fn stream_with_requests(
    rig: &mut Rig,
    frames: u64,
    watch: u16,
    at: &[u64],
    mut send: impl FnMut(usize, &mut Rig) -> Result<u32>,
) -> Result<Vec<(Reply, Window)>> {
    let mut pacer = Pacer::new(RATE, Instant::now());
    let mut sent = 0u64;
    let mut done: Vec<(Reply, Window)> = Vec::new();
    let mut pending: Option<(u32, Window)> = None;
    let deadline = Instant::now() + Duration::from_secs(300);
    while sent < frames || pending.is_some() || done.len() < at.len() {
        if Instant::now() > deadline {
            bail!("requests not answered: {} of {}\n{}", done.len(), at.len(), rig.qemu.diagnostics());
        }
        if let Some((id, mut w)) = pending
            && let Some(r) = rig.ctl_reply(id)
        {
            w.sent_after = rig.checker().sent_of(watch);
            done.push((r, w));
            pending = None;
        }
        let next = done.len() + usize::from(pending.is_some());
        if pending.is_none() && next < at.len() && sent >= at[next] {
            let w = Window { sent_before: rig.checker().sent_of(watch), sent_after: 0 };
            pending = Some((send(next, rig)?, w));
        }
        // Frames wait while a request is out only if the next one is due too (keep order).
        for _ in 0..pacer.take(Instant::now()) {
            let due = done.len() + usize::from(pending.is_some());
            if sent >= frames || (due < at.len() && sent >= at[due]) {
                break;
            }
            rig.send_flow((sent % u64::from(FLOWS)) as u16, 60 + (sent * 149 % 1455) as usize)?;
            sent += 1;
        }
        rig.pump(pacer.wait().min(Duration::from_millis(2)));
    }
    Ok(done)
}

fn start_chain(name: &str, chain_text: &str, workers: u32) -> Result<Rig> {
    let text = chain_text.to_string();
    let boot = BootOptions::default().set("stats_ms", 0).set("workers", workers);
    let mut rig = start_with(name, FLOWS, boot, |c| {
        c.chain_text = Some(text);
        c.smp = workers;
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    Ok(rig)
}

#[test]
fn acl_rule_added_and_removed_mid_stream_switches_each_flow_once() -> Result<()> {
    let _one = serial();
    let mut rig = start_chain("mgmt_acl", "version=1\nnf=acl\nacl.default=permit\n", 2)?;
    // The rule set as the image booted.
    let show = rig.ctl("show acl", REPLY_TIMEOUT)?;
    assert_eq!(show.ok()?, "");
    assert_eq!(show.data[0], "default=permit rules=0 generation=0 cached_flows=0");
    // Flow 2 (IPv6/UDP into port 0) is the one the new rule denies.
    let flow = 2u16;
    let dst = rig.checker().flows()[usize::from(flow)].addrs().1;
    let len = if dst.is_ipv4() { 32 } else { 128 };
    let add = format!("acl add prio:100,dst:{dst}/{len},action:deny");
    let long = format!("acl add prio:1,src:any,dst:any,action:deny{}", ",x:y".repeat(80));
    let requests: Vec<(u64, String, Option<&str>)> = vec![
        (400, add, None),
        (500, "frobnicate".into(), Some("unknown_command")),
        (550, "acl add prio:1,action:maybe".into(), Some("bad_argument")),
        (600, long, Some("line_too_long")),
        (650, "acl del 7".into(), Some("not_found")),
        // A flood: 200 bad requests at once; forwarding must not notice.
        (700, "FLOOD".into(), Some("unknown_command")),
        (1000, "acl del 0".into(), None),
    ];
    let at: Vec<u64> = requests.iter().map(|r| r.0).collect();
    let done = stream_with_requests(&mut rig, 1600, flow, &at, |i, rig| match requests[i].1.as_str() {
        "FLOOD" => {
            rig.qemu.send_input(&"ctl 4242 frobnicate now\n".repeat(200))?;
            rig.ctl_send("frobnicate")
        }
        cmd => rig.ctl_send(cmd),
    })?;
    for ((reply, _), (_, cmd, want)) in done.iter().zip(&requests) {
        match want {
            None => {
                reply.ok()?;
            }
            Some(name) => assert_eq!(reply.error(), Some(*name), "`{cmd}`: {reply:?}"),
        }
    }
    assert_eq!(done[0].0.ok()?, "rule=0 generation=1");
    assert_eq!(done[6].0.ok()?, "rules=0 generation=2");
    let (w_add, w_del) = (done[0].1, done[6].1);
    // The bad requests changed nothing: two changes, two generations, no rule left.
    let show = rig.ctl("show acl", REPLY_TIMEOUT)?;
    assert!(show.data[0].starts_with("default=permit rules=0 generation=2 "), "{show:?}");
    // `stats` is one JSON object with every counter.
    let stats = rig.ctl("stats", REPLY_TIMEOUT)?;
    let json: serde_json::Value = serde_json::from_str(&stats.data[0])?;
    assert!(json["p0_rx"].as_u64().is_some_and(|n| n > 0), "{json}");
    assert!(json["acl_reclassified"].as_u64().is_some_and(|n| n > 0), "{json}");
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;

    let c = rig.checker();
    let k = c.classes();
    let failures: Vec<String> = k.failures().into_iter().filter(|f| !f.starts_with("lost")).collect();
    assert!(failures.is_empty(), "host saw {failures:?}: {k:?}\n{:#?}", c.examples);
    // Flow 2: through, denied from one point, through again from a later point.
    let r = runs(&c.seen(flow));
    let [(0, true), (s, false), (t, true)] = r[..] else {
        bail!("flow {flow} did not switch exactly twice: runs {r:?}, windows {w_add:?} {w_del:?}");
    };
    assert!(w_add.contains(s), "deny began at {s}, outside {w_add:?}");
    assert!(w_del.contains(t), "deny ended at {t}, outside {w_del:?}");
    let denied = (t - s) as u64;
    // Every other flow lost nothing.
    for f in (0..FLOWS).filter(|&f| f != flow) {
        assert!(c.seen(f).iter().all(|&x| x), "flow {f} lost frames: {:?}", runs(&c.seen(f)));
    }
    assert_eq!(k.lost, denied, "{k:?}");
    assert_eq!(fw.require("drop_acl_deny")?, denied, "{fw:?}");
    assert_eq!(fw.require("drops")?, denied, "{fw:?}");
    drop(c);
    assert!(fw.require("acl_reclassified")? > 0, "{fw:?}");
    Ok(())
}

#[test]
fn route_changed_and_restored_through_the_relay_moves_a_flow_at_one_point() -> Result<()> {
    let _one = serial();
    let text = cadence_ctl::chain::load(&image::workspace_root().join("chains").join("l3fwd.toml"))?.text;
    let mut rig = start_chain("mgmt_route", &text, 1)?;
    let sock = rig.out_dir.join("ctl.sock");
    rig.serve_ctl(&sock)?;
    // Flow 0 (10.0.0.0 → 10.101.0.0) leaves port 1 to 02:00:00:00:01:01 by 10.101.0.0/29; a
    // host route sends it to another neighbour on the same port until it is deleted.
    let flow = 0u16;
    let hop = NextHop::mac(1, [2, 0, 0, 0, 1, 0x99]);
    rig.checker().allow_next_hop(flow, hop);
    let cmds = ["route add prefix:10.101.0.0/32,port:1,mac:02:00:00:00:01:99", "route del 10.101.0.0/32"];
    // The client runs on a thread of its own, as `cargo xtask ctl` would in another shell.
    let (go_tx, go_rx) = mpsc::channel::<&'static str>();
    let (done_tx, done_rx) = mpsc::channel::<Result<Reply, String>>();
    let client_sock = sock.clone();
    let client = std::thread::spawn(move || {
        let mut c = match cadence_ctl::ctl::Client::connect(&client_sock) {
            Ok(c) => c,
            Err(e) => return done_tx.send(Err(format!("{e:#}"))).unwrap_or(()),
        };
        for cmd in go_rx {
            let r = c.request(cmd, REPLY_TIMEOUT).map_err(|e| format!("{e:#}"));
            if done_tx.send(r).is_err() {
                return;
            }
        }
    });
    let mut windows = Vec::new();
    let mut pacer = Pacer::new(RATE, Instant::now());
    let (frames, at) = (1600u64, [400u64, 1000]);
    let mut sent = 0u64;
    let mut pending: Option<Window> = None;
    let deadline = Instant::now() + Duration::from_secs(300);
    while sent < frames || pending.is_some() {
        if Instant::now() > deadline {
            bail!("the relay's requests were not answered\n{}", rig.qemu.diagnostics());
        }
        if let Some(mut w) = pending
            && let Ok(r) = done_rx.try_recv()
        {
            let r = r.map_err(|e| anyhow!(e))?;
            r.ok()?;
            w.sent_after = rig.checker().sent_of(flow);
            windows.push(w);
            pending = None;
        }
        if pending.is_none() && windows.len() < at.len() && sent >= at[windows.len()] {
            pending = Some(Window { sent_before: rig.checker().sent_of(flow), sent_after: 0 });
            go_tx.send(cmds[windows.len()])?;
        }
        for _ in 0..pacer.take(Instant::now()) {
            if sent >= frames || (windows.len() < at.len() && sent >= at[windows.len()]) {
                break;
            }
            rig.send_flow((sent % u64::from(FLOWS)) as u16, 60 + (sent * 149 % 1455) as usize)?;
            sent += 1;
        }
        rig.pump(pacer.wait().min(Duration::from_millis(2)));
    }
    drop(go_tx);
    let _ = client.join();
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    let c = rig.checker();
    let k = c.classes();
    // Flow 8 and flow 11 have no route (expected drops); everything else came back once.
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    assert_eq!(k.received + k.expected_drops, frames, "{k:?}");
    // Flow 0: the old next hop, the new one from one point, the old one again from a later one.
    let hops = c.hops(flow);
    assert_eq!(hops.len() as u32, c.sent_of(flow), "every frame of flow {flow} came back");
    let took_new: Vec<bool> = hops.iter().map(|&(_, w)| w == 1).collect();
    let r = runs(&took_new);
    let [(0, false), (s, true), (t, false)] = r[..] else {
        bail!("flow {flow} did not switch exactly twice: runs {r:?}, windows {windows:?}");
    };
    assert!(windows[0].contains(s), "new hop from {s}, outside {:?}", windows[0]);
    assert!(windows[1].contains(t), "old hop again from {t}, outside {:?}", windows[1]);
    assert_eq!(fw.require("l3fwd_no_route")?, k.expected_drops, "{fw:?}");
    Ok(())
}
