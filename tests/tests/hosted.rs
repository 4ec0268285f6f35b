//! The hosted build end to end: the dataplane as a Linux process in a network namespace of
//! its own, on two veth pairs, AF_XDP and AF_PACKET ports; the host's generator and checker
//! on the far ends. Needs root (CI runs as root); without it the tests fail and say so.
//!
//! - 20 000 frames through Chain 1 over AF_XDP with two workers: exactly once, in per-flow
//!   order, each frame as the chain should change it (the checker's independent NF models),
//!   and the lane's pool back at its resting value (the fill rings' buffers) at the end.
//! - 20 000 frames through the L2 forwarder over AF_PACKET, with malformed frames of every
//!   kind mixed in: the same parser drops and counts them by reason as in the image.
//! - Overload: a dataplane told to sleep 10 ms between polls on 64-entry rings (no wake on
//!   arrival), offered
//!   20 000 frames/s, cannot take it all: the excess is what the kernel counted as dropped at
//!   the sockets' fill rings (`p*_xdp_rx_dropped`), nothing else is lost, and at a load it
//!   can take afterwards every frame comes back. Its latency accounting counts from each
//!   frame's arrival (the XDP program's stamp): most frames, having waited in the ring for
//!   the next poll, are over a 2 ms SLO.
//! - Wake on arrival: a worker asleep on an idle lane (`idle_us`, a 1 s backstop) is woken
//!   by each frame's arrival (`ppoll` on the lane's AF_XDP sockets), every frame once, in
//!   order.
//! - NetBlaze: an auxiliary thread asleep on its doorbell (a futex wait) is woken by the
//!   lane's first hand-off and gives every frame back once, in order.
//! - Bad input: interfaces that do not exist, and an interface that vanishes mid-run, each
//!   end with a clear line and the runtime-failure status.
//! - Nothing behind the chain's back: on a 4-queue NIC with one lane, AF_XDP frames RSS puts
//!   on queues no lane owns are dropped and counted, and the kernel's stack in the
//!   dataplane's namespace receives none of them; over AF_PACKET (which only taps the
//!   traffic) the stack receives nothing either. The dataplane runs without privileges
//!   after set-up (`nobody`, read from /proc), and SIGINT ends a run as cleanly as STOP.
//!
//! Timeouts are hang guards; nothing asserts on time.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use cadence_build::image::{self, Profile};
use cadence_harness::protocol::{self, BootOptions, Counters};
use cadence_harness::rig::{Backend, Rig, RigConfig};
use cadence_harness::traffic::Pacer;
use cadence_harness::traffic::malformed::Malformed;
use cadence_tests::{STOP_TIMEOUT, out_dir, send_paced};

const FRAMES: u64 = 20_000;
const RATE: u64 = 5_000;
const FLOWS: u16 = 16;
/// Hang guard for the hosted dataplane to be ready.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// The hosted binary, built once per test binary; fails (does not skip) without root.
fn hosted() -> Result<PathBuf> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| {
        if !cadence_harness::netns::can_create() {
            return Err("the hosted end-to-end tests need root and iproute2's `ip` (network namespaces, \
                        veth pairs); CI runs as root: run `cargo xtask test` as root"
                .into());
        }
        image::build_hosted(Profile::Release).map_err(|e| format!("{e:#}"))
    })
    .clone()
    .map_err(|e| anyhow!("{e}"))
}

/// One hosted dataplane at a time: each brings a generator and a dataplane onto a 2-CPU
/// machine, and two at once would be measuring each other.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn start(name: &str, io: &'static str, boot: BootOptions, chain: Option<&str>) -> Result<Rig> {
    start_with(name, io, boot, chain, &[])
}

/// IPv4 and IPv6 packets the kernel's stack received in `netns` (`/proc/net/snmp`
/// `Ip: InReceives`, `/proc/net/snmp6` `Ip6InReceives`).
fn stack_received(netns: &str) -> Result<u64> {
    let read = |file: &str| -> Result<String> {
        let out = std::process::Command::new(cadence_harness::netns::IP)
            .args(["netns", "exec", netns, "cat", file])
            .output()?;
        if !out.status.success() {
            bail!("reading {file} in {netns}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let snmp = read("/proc/net/snmp")?;
    let mut ip = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (ip.next().unwrap_or_default(), ip.next().unwrap_or_default());
    let at = names.split_whitespace().position(|n| n == "InReceives").ok_or_else(|| anyhow!("no InReceives"))?;
    let v4: u64 = values.split_whitespace().nth(at).and_then(|v| v.parse().ok()).ok_or_else(|| anyhow!("no count"))?;
    let snmp6 = read("/proc/net/snmp6")?;
    let v6: u64 = snmp6
        .lines()
        .find_map(|l| l.strip_prefix("Ip6InReceives").and_then(|v| v.trim().parse().ok()))
        .ok_or_else(|| anyhow!("no Ip6InReceives"))?;
    Ok(v4 + v6)
}

/// Ends the run with signal `sig` (SIGINT, SIGTERM) instead of a STOP frame: it must wind
/// down as cleanly (`stopping: SIG…`, `@summary`, the success status, conservation).
fn interrupt(rig: &mut Rig, sig: i32) -> Result<Counters> {
    // SAFETY: kill(2) on the child we started and have not reaped.
    if unsafe { libc::kill(rig.qemu.pid() as i32, sig) } != 0 {
        bail!("kill: {}", std::io::Error::last_os_error());
    }
    let exit = rig.qemu.wait(STOP_TIMEOUT)?;
    rig.pump(Duration::from_millis(200));
    rig.shutdown_receivers();
    if exit.status != Some(protocol::EXIT_SUCCESS) {
        bail!("hosted dataplane exit {:?} after signal {sig}\n{}", exit.status, rig.qemu.diagnostics());
    }
    let name = if sig == libc::SIGINT { "SIGINT" } else { "SIGTERM" };
    let com1 = rig.qemu.com1();
    if !com1.iter().any(|l| l == &format!("stopping: {name}")) {
        bail!("no `stopping: {name}` line\n{com1:#?}");
    }
    let fw =
        rig.report.summary.clone().ok_or_else(|| anyhow!("no @summary after {name}\n{}", rig.qemu.diagnostics()))?;
    cadence_tests::check_conservation(rig, &fw)?;
    Ok(fw)
}

/// The real uid of process `pid` (`/proc/PID/status`, `Uid:` line).
fn uid_of(pid: u32) -> Result<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:").and_then(|v| v.split_whitespace().next()).and_then(|v| v.parse().ok()))
        .ok_or_else(|| anyhow!("no Uid line for {pid}"))
}

/// [`start`] with more command-line options for the hosted binary.
fn start_with(name: &str, io: &'static str, boot: BootOptions, chain: Option<&str>, args: &[&str]) -> Result<Rig> {
    let text = match chain {
        Some(c) => Some(cadence_ctl::chain::load(&image::workspace_root().join(c))?.text),
        None => None,
    };
    start_text(name, io, boot, text, args)
}

/// [`start_with`] with the chain module's text itself (a chain and a NetBlaze profile).
fn start_text(name: &str, io: &'static str, boot: BootOptions, chain: Option<String>, args: &[&str]) -> Result<Rig> {
    start_queues(name, io, boot, chain, args, 1)
}

/// [`start_text`] on veths with `queues` RX/TX queues each (lanes as `boot` says).
fn start_queues(
    name: &str,
    io: &'static str,
    boot: BootOptions,
    chain: Option<String>,
    args: &[&str],
    queues: u16,
) -> Result<Rig> {
    let mut cfg = RigConfig::new(hosted()?, out_dir(name), FLOWS);
    let mut argv = vec!["--unpinned".to_string()];
    argv.extend(args.iter().map(|a| a.to_string()));
    cfg.backend = Backend::Veth { queues, io, args: argv };
    let mut all = BootOptions::default().set("max_s", 300).set("stats_ms", 0);
    for (k, v) in &boot.0 {
        all = all.set(k, v);
    }
    cfg.boot = all;
    cfg.chain_text = chain;
    let mut rig = Rig::start(&cfg)?;
    rig.wait_ready(READY_TIMEOUT, &mut |_| {})?;
    Ok(rig)
}

fn stop(rig: &mut Rig) -> Result<Counters> {
    let exit = rig.stop(STOP_TIMEOUT, &mut |_| {})?;
    if exit.status != Some(protocol::EXIT_SUCCESS) {
        bail!("hosted dataplane exit {:?}\n{}", exit.status, rig.qemu.diagnostics());
    }
    let fw = rig.report.summary.clone().ok_or_else(|| anyhow!("no @summary\n{}", rig.qemu.diagnostics()))?;
    cadence_tests::check_conservation(rig, &fw)?;
    Ok(fw)
}

#[test]
fn af_xdp_chain1_two_workers_every_frame_once_in_order() -> Result<()> {
    let _one = serial();
    let mut rig =
        start("hosted_xdp_chain1", "af_xdp", BootOptions::default().set("workers", 2), Some("chains/chain1.toml"))?;
    let com1 = rig.qemu.com1();
    let nic = com1.iter().find(|l| l.starts_with("@nic index=0")).cloned().unwrap_or_default();
    assert!(nic.contains("kind=af_xdp") && nic.contains("data_path="), "{nic}");
    send_paced(&mut rig, FRAMES, RATE, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    // The management channel is the hosted binary's stdin.
    let show = rig.ctl("show acl", Duration::from_secs(30))?;
    assert!(show.data[0].starts_with("default=permit rules=5 generation=0"), "{show:?}");
    assert_eq!(show.data.len(), 6, "{show:?}");
    let fw = stop(&mut rig)?;
    let c = rig.checker();
    let k = c.classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    // Chain 1 denies two of the flows (expected drops, not losses); every other frame came
    // back exactly once, in order, as the chain's NFs should have changed it.
    let denied = c.sent_where(|e| e.drop == Some("acl_deny"));
    assert!(denied > 0 && k.expected_drops == denied, "{k:?}");
    assert_eq!((k.sent, k.received + denied), (FRAMES, FRAMES), "{k:?}");
    let vip = c.sent_where(|e| e.backends.is_some() && e.drop.is_none());
    drop(c);
    assert_eq!(fw.require("acl_permitted")?, k.received, "{fw:?}");
    assert_eq!(fw.require("drop_acl_deny")?, denied, "{fw:?}");
    assert_eq!(fw.require("lb_balanced")?, vip, "{fw:?}");
    assert_eq!(fw.require("accounting_packets")?, k.received, "{fw:?}");
    assert_eq!(fw.require("p0_tx")? + fw.require("p1_tx")?, k.received, "{fw:?}");
    assert_eq!(fw.require("drops")?, denied, "{fw:?}");
    // Both workers ran rounds; the pool is back at rest (`stop` checked it against @ready):
    // only the two fill rings' buffers (one ring per socket, the hosted default of 2048
    // entries: `--xdp-ring`) are out of it.
    assert!(fw.require("core0_tries")? > 0 && fw.require("core1_tries")? > 0, "{fw:?}");
    let ring: u64 = 2048;
    assert_eq!(fw.require("pool_in_use")?, 2 * ring, "{fw:?}");
    // The kernel dropped nothing on the way in either.
    assert_eq!(fw.require("p0_xdp_rx_dropped")? + fw.require("p1_xdp_rx_dropped")?, 0, "{fw:?}");
    Ok(())
}

/// Wake on arrival (`idle_us`): two workers on one AF_XDP lane, an idle lane's sleep
/// stretched to a 1 s backstop from the first empty round on (`idle_after_us=0`). After a
/// second of idle, 200 frames at 100 frames/s: every frame comes back once, in order, and the
/// sleeps a frame's arrival ended (`core{i}_mwait_sleeps`, the hosted sleeper's `ppoll` on
/// the lane's sockets) number at least one per two frames — with deadline sleeps only, a
/// frame would wait for the backstop and none would count.
#[test]
fn af_xdp_a_worker_asleep_on_an_idle_lane_is_woken_by_each_frame() -> Result<()> {
    const SENT: u64 = 200;
    let _one = serial();
    let boot = BootOptions::default().set("workers", 2).set("idle_us", 1_000_000).set("idle_after_us", 0);
    let mut rig = start("hosted_idle_arrival", "af_xdp", boot, None)?;
    std::thread::sleep(Duration::from_secs(1));
    send_paced(&mut rig, SENT, 100, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 700) as usize))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let fw = stop(&mut rig)?;
    let c = rig.checker();
    let k = c.classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    drop(c);
    assert_eq!((k.sent, k.received), (SENT, SENT), "{k:?}");
    let woken = fw.require("core0_mwait_sleeps")? + fw.require("core1_mwait_sleeps")?;
    assert!(woken >= SENT / 2, "sleeps ended by a frame's arrival: {woken} for {SENT} frames\n{fw:?}");
    Ok(())
}

/// Chain 1's profile for a core that finishes 4 packets per 50 ms epoch (2 with many flows):
/// any real traffic is outside the frontier, so the lane hands flows to the auxiliary thread.
const PROFILE_SMALL_CORE: &str = "version=1\nnfs=acl,lb,accounting\ntsc_hz=1000000000\nepoch_ns=50000000\n\
                                  frontier=1:4,64:2\nservice=packet_cycles:500,flow_cycles:300\nrate=1:400\n";

/// NetBlaze's auxiliary thread on the hosted build: 1 dedicated worker, 1 auxiliary, AF_XDP,
/// chain 1 with a profile any traffic of many flows overflows. The auxiliary thread idles first (a second,
/// twenty epochs): asleep on its doorbell (a futex wait), it must be woken by the lane's
/// hand-off (`nb_wakes`), take the flows, and give every frame back — each exactly once, in
/// per-flow order, as chain 1 makes it — and the pool is back at rest.
#[test]
fn af_xdp_an_aux_thread_asleep_on_its_doorbell_is_woken_by_a_hand_off() -> Result<()> {
    const SENT: u64 = 2000;
    let _one = serial();
    let chain1 = cadence_ctl::chain::load(&image::workspace_root().join("chains/chain1.toml"))?.text;
    let boot = BootOptions::default().set("workers", 2).set("aux", 1).set("slo_us", 200_000);
    let chain = format!("{chain1}\n[netblaze.profile]\n{PROFILE_SMALL_CORE}");
    let mut rig = start_text("hosted_aux_doorbell", "af_xdp", boot, Some(chain), &[])?;
    let ready = rig.qemu.com1().iter().find(|l| l.starts_with("@ready")).cloned().unwrap_or_default();
    assert!(ready.contains(" aux=1 "), "{ready}");
    std::thread::sleep(Duration::from_secs(1));
    // 500 frames/s over 16 flows: 25 frames per epoch, under 2 per flow (no whales: the
    // profile has no split), 16 flows far outside the frontier (≈ 3.5 packets at 16 flows).
    send_paced(&mut rig, SENT, 500, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 700) as usize))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let fw = stop(&mut rig)?;
    let c = rig.checker();
    let k = c.classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    let denied = c.sent_where(|e| e.drop == Some("acl_deny"));
    drop(c);
    assert_eq!((k.sent, k.received + denied), (SENT, SENT), "{k:?}");
    let handed = fw.require("nb_handed")?;
    assert!(handed > 0, "the lane handed flows to the auxiliary thread: {fw:?}");
    assert_eq!(fw.require("aux_frames")?, handed, "{fw:?}");
    assert_eq!(fw.require("nb_returned")? + fw.require("nb_returned_dropped")?, handed, "{fw:?}");
    assert!(fw.require("nb_wakes")? >= 1, "a hand-off woke the sleeping auxiliary thread: {fw:?}");
    assert_eq!(fw.require("nb_lane_busy")?, 0, "{fw:?}");
    Ok(())
}

#[test]
fn af_packet_l2_with_malformed_frames_counted_by_reason() -> Result<()> {
    let _one = serial();
    let mut rig = start("hosted_packet_malformed", "af_packet", BootOptions::default(), None)?;
    let netns = rig.veths.as_ref().map(|v| v.netns.clone()).ok_or_else(|| anyhow!("no veths"))?;
    let stack_before = stack_received(&netns)?;
    // Set-up done, privileges gone: the dataplane runs as nobody.
    assert_eq!(uid_of(rig.qemu.pid())?, 65_534, "{}", rig.qemu.diagnostics());
    let com1 = rig.qemu.com1();
    assert!(com1.iter().any(|l| l.starts_with("hosted: privileges dropped after set-up: uid 65534")), "{com1:#?}");
    let macs = rig.checker().macs();
    let mut injected: BTreeMap<&str, u64> = BTreeMap::new();
    let mut pacer = Pacer::new(RATE, Instant::now());
    let (mut good, mut bad, mut refused) = (0u64, 0u64, 0u64);
    while good < FRAMES {
        for _ in 0..pacer.take(Instant::now()) {
            if good == FRAMES {
                break;
            }
            rig.send_flow((good % u64::from(FLOWS)) as u16, 60 + (good * 97 % 1455) as usize)?;
            good += 1;
            if good.is_multiple_of(50) {
                let m = Malformed::ALL[(bad % Malformed::ALL.len() as u64) as usize];
                let port = (bad / Malformed::ALL.len() as u64 % 2) as usize;
                bad += 1;
                // A frame shorter than an Ethernet header cannot cross a veth: the kernel
                // refuses it at the sending socket (EINVAL), so it never reaches the
                // dataplane. Everything else must arrive and be counted.
                match rig.send_raw(port, &m.build(macs.nic[port], macs.peer[port], bad as u32)) {
                    Ok(()) => *injected.entry(m.reason()).or_default() += 1,
                    Err(e) if m == Malformed::Runt => {
                        assert!(format!("{e:#}").contains("Invalid argument"), "{e:#}");
                        refused += 1;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        rig.pump(pacer.wait().min(Duration::from_millis(2)));
    }
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    // AF_PACKET sockets only tap the traffic: the tcx program kept every frame from the
    // namespace's own stack.
    assert_eq!(stack_received(&netns)?, stack_before, "the kernel's stack got frames the dataplane owns");
    // Ctrl-C: the run winds down as after STOP, with @summary and the success status.
    let fw = interrupt(&mut rig, libc::SIGINT)?;
    let k = rig.checker().classes();
    let examples = rig.checker().examples.clone();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{examples:#?}", k.failures());
    assert_eq!((k.sent, k.received), (FRAMES, FRAMES));
    let arrived: u64 = injected.values().sum();
    assert_eq!(arrived + refused, bad);
    let rx = fw.require("p0_rx")? + fw.require("p1_rx")?;
    assert_eq!(rx, FRAMES + arrived, "no control frame: SIGINT ended it: {fw:?}");
    assert_eq!(fw.require("p0_tx")? + fw.require("p1_tx")?, FRAMES, "{fw:?}");
    let got = fw.drops_by_reason();
    for (reason, n) in &injected {
        assert_eq!(got.get(*reason).copied(), Some(*n), "drop_{reason}: {fw:?}");
    }
    assert_eq!(fw.require("drops")?, arrived, "{fw:?}");
    // A copying driver: every buffer is back in the pool.
    assert_eq!(fw.require("pool_in_use")?, 0, "{fw:?}");
    // Every forwarded frame timed from the ring's own time (tp_sec/tp_nsec): at most a
    // handful counted from the poll (a stamp the clock map puts a microsecond past the poll).
    let timed = fw.require("lat_count")?;
    assert_eq!(timed, FRAMES, "{fw:?}");
    assert!(fw.require("lat_from_poll")? * 100 < timed, "frames without a ring time: {fw:?}");
    Ok(())
}

/// A NIC with more receive queues than lanes (veths of 4 queues, `lanes=1`): the frames the
/// kernel puts on queues 1–3 are dropped and counted by the XDP program (`p*_xdp_unowned`),
/// the start says so, every frame on queue 0 goes through the chain once and in order — and
/// the namespace's stack received none of them (before, they went to it: `XDP_PASS`).
#[test]
fn af_xdp_frames_on_queues_no_lane_owns_are_dropped_and_counted_never_given_to_the_stack() -> Result<()> {
    const SENT: u64 = 4_000;
    let _one = serial();
    let mut rig = start_queues("hosted_xdp_unowned", "af_xdp", BootOptions::default(), None, &[], 4)?;
    let netns = rig.veths.as_ref().map(|v| v.netns.clone()).ok_or_else(|| anyhow!("no veths"))?;
    let com1 = rig.qemu.com1();
    assert!(
        com1.iter().any(|l| l.starts_with("warning: ")
            && l.contains("has 4 RX queues and lanes=1")
            && l.contains("xdp_unowned")),
        "{com1:#?}"
    );
    let stack_before = stack_received(&netns)?;
    send_paced(&mut rig, SENT, 2_000, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    assert_eq!(stack_received(&netns)?, stack_before, "the kernel's stack got frames no lane owns");
    // SIGTERM, not a STOP frame: a control frame may hash to a queue no lane owns as well.
    let fw = interrupt(&mut rig, libc::SIGTERM)?;
    let k = rig.checker().classes();
    let unowned = fw.require("p0_xdp_unowned")? + fw.require("p1_xdp_unowned")?;
    assert!(unowned > 0, "the flows all hashed to queue 0: the test proves nothing ({fw:?})");
    // What was not forwarded is exactly what the program dropped; what was forwarded is clean.
    assert_eq!(k.lost, unowned, "{k:?} {fw:?}");
    assert_eq!(k.received + unowned, SENT, "{k:?}");
    let k_rest = cadence_harness::traffic::Classes { lost: 0, ..k };
    assert!(k_rest.clean(), "host saw {:?}: {k:?}", k_rest.failures());
    assert_eq!(fw.require("drops")?, 0, "{fw:?}");
    Ok(())
}

#[test]
fn af_xdp_overload_excess_is_counted_and_the_dataplane_recovers() -> Result<()> {
    let _one = serial();
    // Sleep 10 ms between polls with no feedback and no wake on arrival (`arrival=off`: the
    // deadline alone ends a sleep), 64-entry rings: at most 64 frames per port per 10 ms get
    // in (6 400/s), far below the offered 20 000/s.
    let boot = BootOptions::default()
        .set("arrival", "off")
        .set("qsize", 64)
        .set("vbar_us", 10_000)
        .set("ts0_us", 10_000)
        .set("line_mbps", 1)
        .set("feedback", 0)
        .set("slo_us", SLOW_SLO_US);
    let mut rig = start_with("hosted_xdp_overload", "af_xdp", boot, None, &["--xdp-ring=64"])?;
    let overload = 40_000;
    send_paced(&mut rig, overload, 20_000, |i| ((i % u64::from(FLOWS)) as u16, 60))?;
    rig.drain(Duration::from_secs(2), Duration::from_secs(30), &mut |_| {});
    let k1 = rig.checker().classes();
    assert_eq!(k1.sent, overload);
    assert!(k1.lost > 0, "the offered load was not an overload: {k1:?}");
    // Now a load it takes: every frame back, once and in order.
    send_paced(&mut rig, 2_000, 500, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(2), Duration::from_secs(30), &mut |_| {});
    let fw = stop(&mut rig)?;
    let k2 = rig.checker().classes();
    let examples = rig.checker().examples.clone();
    assert_eq!(k2.lost, k1.lost, "frames lost after the load dropped: {k2:?}");
    assert_eq!(k2.received - k1.received, 2_000, "{k2:?}");
    let k2_rest = cadence_harness::traffic::Classes { lost: 0, ..k2 };
    assert!(k2_rest.clean(), "host saw {:?}: {k2:?}\n{examples:#?}", k2_rest.failures());
    // Every lost frame is one the kernel counted at a socket whose fill ring was empty;
    // the dataplane itself dropped nothing.
    let kernel = fw.require("p0_xdp_rx_dropped")? + fw.require("p1_xdp_rx_dropped")?;
    assert_eq!(kernel, k2.lost, "{fw:?}");
    assert_eq!(fw.require("drops")?, 0, "{fw:?}");
    assert_eq!(fw.require("p0_tx")? + fw.require("p1_tx")?, k2.received, "{fw:?}");
    // Latency from arrival: each frame is timed from the XDP program's stamp, so the time
    // it waited in the RX ring for the next poll (up to 10 ms) counts. Most frames waited
    // more than the 2 ms SLO; counted from the ring exit (the poll that took them), a
    // frame's sojourn is the chain's microseconds and hardly any would be over it.
    let (timed, over) = (fw.require("lat_count")?, fw.require("over_slo")?);
    assert_eq!(timed, k2.received, "every forwarded frame timed: {fw:?}");
    assert!(2 * over > timed, "over_slo {over} of {timed}: the ring wait is not counted\n{fw:?}");
    assert!(fw.require("lat_p50_ns")? > SLOW_SLO_US * 1_000, "{fw:?}");
    // veth's native XDP keeps metadata: every frame carried the program's stamp (at most a
    // handful counted from the poll: a stamp the clock map puts a microsecond past it).
    assert!(fw.require("lat_from_poll")? * 100 < timed, "frames without an XDP stamp: {fw:?}");
    Ok(())
}

/// The SLO of the overload test: far below its 10 ms between polls, far above the chain's
/// time per frame.
const SLOW_SLO_US: u64 = 2_000;

/// A worker that hangs inside its round (`stall=1:300:round`: in its stage, holding the
/// lane and a batch) is seen by the other (`@fault kind=stall`), stopped for good by a signal
/// whose handler never returns, and loses the lane to it (`@fault kind=takeover`): traffic
/// goes on; the hung batch's frames are lost and counted (`stranded`), every other frame
/// comes back once and in order; the run fails at the end (a worker never parked).
#[test]
fn af_xdp_a_worker_hung_inside_its_round_loses_its_lane_and_the_run_goes_on() -> Result<()> {
    const SENT: u64 = 3_000;
    let _one = serial();
    let boot = BootOptions::default().set("workers", 2).set("stall", "1:300:round").set("stall_ms", 200);
    let mut rig = start("hosted_takeover", "af_xdp", boot, None)?;
    // 1 000 frames/s for 3 s: worker 1 hangs on the first batch it wins after 300 ms.
    send_paced(&mut rig, SENT, 1_000, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let exit = rig.stop(STOP_TIMEOUT, &mut |_| {})?;
    let com1 = rig.qemu.com1();
    assert_eq!(exit.status, Some(protocol::EXIT_RUNTIME_FAILURE), "a worker never parked: {com1:#?}");
    assert!(com1.iter().any(|l| l.starts_with("@fault kind=stall core=1 ")), "{com1:#?}");
    assert!(com1.iter().any(|l| l.starts_with("@fault kind=takeover core=1 lane=0 ")), "{com1:#?}");
    assert!(com1.iter().any(|l| l == "error: 0 of 1 workers parked"), "{com1:#?}");
    assert!(!com1.iter().any(|l| l.contains("still held at shutdown")), "{com1:#?}");
    let fw = rig.report.summary.clone().ok_or_else(|| anyhow!("no @summary\n{}", rig.qemu.diagnostics()))?;
    let stranded = fw.require("stranded")?;
    assert_eq!(fw.require("takeovers")?, 1, "{fw:?}");
    assert!((1..=64).contains(&stranded), "the hung batch: {fw:?}");
    let k = rig.checker().classes();
    assert_eq!(k.sent, SENT);
    assert_eq!(k.lost, stranded, "lost = the hung batch: {k:?} {fw:?}");
    let rest = cadence_harness::traffic::Classes { lost: 0, ..k };
    assert!(rest.clean(), "host saw {:?}: {k:?}", rest.failures());
    Ok(())
}

#[test]
fn missing_interfaces_are_a_clear_runtime_failure() -> Result<()> {
    let out = std::process::Command::new(hosted()?)
        .args(["--port0", "cadnope0", "--port1", "cadnope1", "--io", "af_packet"])
        .output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(protocol::hosted_exit::RUNTIME_FAILURE), "{text}");
    assert!(text.lines().any(|l| l.starts_with("error: interface cadnope0")), "{text}");
    // And a bad option is a configuration error naming it.
    let out = std::process::Command::new(hosted()?).args(["--port0", "a", "--port1", "b", "workers=0"]).output()?;
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(protocol::hosted_exit::BAD_CONFIG), "{text}");
    assert!(text.contains("error: boot option 'workers'"), "{text}");
    Ok(())
}

#[test]
fn an_interface_that_vanishes_mid_run_is_reported() -> Result<()> {
    let _one = serial();
    let mut rig = start("hosted_vanish", "af_xdp", BootOptions::default(), None)?;
    send_paced(&mut rig, 500, 2_000, |i| ((i % u64::from(FLOWS)) as u16, 100))?;
    rig.veths.as_ref().ok_or_else(|| anyhow!("no veths"))?.delete_dut(1)?;
    let exit = rig.qemu.wait(Duration::from_secs(30))?;
    rig.pump(Duration::from_millis(200));
    let com1 = rig.qemu.com1();
    assert_eq!(exit.status, Some(protocol::EXIT_RUNTIME_FAILURE), "{com1:#?}");
    assert!(com1.iter().any(|l| l.starts_with("error: port 1: interface") && l.contains("vanished")), "{com1:#?}");
    assert!(com1.iter().any(|l| l.starts_with("@summary")), "{com1:#?}");
    Ok(())
}
