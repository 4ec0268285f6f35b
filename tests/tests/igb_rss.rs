//! igb RSS in QEMU (the 82576 model hashes and steers inside QEMU, so dgram backends
//! are enough): 16 queue pairs spread the flows over the lanes, a live RSS_MOVE
//! moves one queue's buckets to another mid-stream without losing or reordering a frame, and
//! NetBlaze's server mapper moves buckets by itself as the load falls and rises.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use cadence_core::rss::BucketMeter;
use cadence_harness::protocol::Mac;
use cadence_harness::protocol::{self, BootOptions, Counters, MachineLine};
use cadence_harness::rig::{NicModel, Rig, RigConfig};
use cadence_harness::traffic::Flow;
use cadence_harness::traffic::frame::build;
use cadence_tests::{BOOT_TIMEOUT, MAX_S, image, out_dir, send_paced, stop_ok};

/// One QEMU at a time: two vCPUs each, on a two-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn boot(name: &str, flows: u16, workers: u32, lanes: u32) -> Result<Rig> {
    let mut cfg = RigConfig::new(image()?, out_dir(name), flows);
    cfg.nic_model = NicModel::Igb;
    cfg.smp = workers;
    cfg.boot = BootOptions::default()
        .set("max_s", MAX_S)
        .set("stats_ms", 0)
        .set("workers", workers)
        .set("lanes", lanes)
        .set("qsize", 64)
        .set("pool", 512);
    let mut rig = Rig::start(&cfg)?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    for n in &rig.report.nics {
        assert_eq!((n.kind.as_str(), n.rxq), ("igb", u64::from(lanes)), "{n:?}");
    }
    Ok(rig)
}

/// Sends `frames` over the flows round robin at `rate`, numbering them from `first`.
fn send(rig: &mut Rig, flows: u16, frames: u64, rate: u64, first: u64) -> Result<()> {
    send_paced(rig, frames, rate, |i| {
        (((first + i) % u64::from(flows)) as u16, 60 + ((first + i) * 131 % 700) as usize)
    })
}

fn lane_packets(c: &Counters, lanes: u32) -> Result<Vec<u64>> {
    (0..lanes).map(|k| c.require(&format!("lane{k}_packets"))).collect()
}

#[test]
fn sixteen_rss_queues_spread_the_flows() -> Result<()> {
    const FLOWS: u16 = 128;
    const LANES: u32 = 16;
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rig = boot("igb_rss16", FLOWS, 2, LANES)?;
    send(&mut rig, FLOWS, 2 * u64::from(FLOWS), 800, 0)?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    let per_lane = lane_packets(&fw, LANES)?;
    let used = per_lane.iter().filter(|&&n| n > 0).count();
    eprintln!("frames per lane: {per_lane:?}");
    // 128 flows hashed over 16 queues: (15/16)^128 < 0.03 % per queue of staying empty.
    assert_eq!(used, LANES as usize, "every queue got flows: {per_lane:?}");
    // The device steered each frame where the dataplane's own hash says (the bucket NetBlaze's
    // server mapper meters, `rss::BucketMeter`), through the driver's round-robin table
    // of 128 entries: lane by lane, exactly. The STOP control frame (not IP) adds one frame
    // to the lane of the device's default queue.
    let meter = BucketMeter::new(128, cadence_core::time::Instant(0), cadence_core::time::Duration(1))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut expect = vec![0u64; LANES as usize];
    for flow in Flow::standard_set(FLOWS) {
        let frame = build(&flow, 0, 60, 0, Mac([2, 0, 0, 0, 0, 1]), Mac([2, 0, 0, 0, 0, 2]));
        let parsed = cadence_core::parse::parse(&frame).map_err(|e| anyhow::anyhow!("flow {}: {e:?}", flow.id))?;
        let (bucket, _) = meter.bucket_of(&parsed.flow);
        expect[bucket % LANES as usize] += 2; // two frames per flow
    }
    eprintln!("predicted by the dataplane hash: {expect:?}");
    let extra: Vec<i64> = per_lane.iter().zip(&expect).map(|(&a, &e)| a as i64 - e as i64).collect();
    assert!(
        extra.iter().all(|&d| d == 0 || d == 1) && extra.iter().sum::<i64>() <= 1,
        "frames per lane {per_lane:?}, the dataplane's hash predicts {expect:?}"
    );
    Ok(())
}

#[test]
fn live_rss_move_loses_and_reorders_nothing() -> Result<()> {
    const FLOWS: u16 = 32;
    const LANES: u32 = 4;
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rig = boot("igb_rss_move", FLOWS, 2, LANES)?;
    send(&mut rig, FLOWS, 600, 600, 0)?;
    // Move queue 1's buckets to queue 2 while frames are in flight, keep sending.
    let mark = rig.qemu.com1().len();
    rig.send_control(protocol::Control::RssMove { from: 1, to: 2 })?;
    send(&mut rig, FLOWS, 200, 600, 600)?;
    let line = wait_line(&mut rig, mark, "@rss ", Duration::from_secs(30))?;
    assert!(line.starts_with("@rss moved from=1 to=2 buckets="), "{line}");
    let buckets: u64 = field(&line, "buckets")?;
    assert!(buckets > 0, "queue 1 had buckets to give: {line}");
    // Snapshot lane 1 right after the move: from now on it must stay idle.
    let mark = rig.qemu.com1().len();
    rig.send_control(protocol::Control::Stats)?;
    let stats = wait_line(&mut rig, mark, "@stats ", Duration::from_secs(30))?;
    let after = MachineLine::parse(&stats).context("not a machine line")??.counters();
    send(&mut rig, FLOWS, 800, 600, 800)?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!((k.sent, k.received), (1600, 1600));
    let (before, end) = (lane_packets(&after, LANES)?, lane_packets(&fw, LANES)?);
    eprintln!("lane frames after the move {before:?}, at the end {end:?}");
    assert_eq!(end[1], before[1], "queue 1 has no buckets left: nothing new reaches lane 1");
    assert!(end[2] > before[2], "lane 2 serves the moved flows");
    Ok(())
}

#[test]
fn rss_restore_undoes_a_move_without_loss_or_reordering() -> Result<()> {
    const FLOWS: u16 = 32;
    const LANES: u32 = 4;
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rig = boot("igb_rss_restore", FLOWS, 2, LANES)?;
    send(&mut rig, FLOWS, 300, 600, 0)?;
    let mark = rig.qemu.com1().len();
    rig.send_control(protocol::Control::RssMove { from: 1, to: 2 })?;
    send(&mut rig, FLOWS, 300, 600, 300)?;
    let moved = wait_line(&mut rig, mark, "@rss ", Duration::from_secs(30))?;
    assert!(moved.starts_with("@rss moved from=1 to=2 ") && moved.ends_with("empty=1"), "{moved}");
    // Undo it mid-stream: queue 1 gets its buckets back after lane 2 is drained of them.
    let mark = rig.qemu.com1().len();
    rig.send_control(protocol::Control::RssRestore)?;
    send(&mut rig, FLOWS, 300, 600, 600)?;
    let restored = wait_line(&mut rig, mark, "@rss ", Duration::from_secs(30))?;
    assert!(restored.starts_with("@rss restored from=1 to=2 ") && restored.ends_with("empty=1"), "{restored}");
    let mark = rig.qemu.com1().len();
    rig.send_control(protocol::Control::Stats)?;
    let stats = wait_line(&mut rig, mark, "@stats ", Duration::from_secs(30))?;
    let after = MachineLine::parse(&stats).context("not a machine line")??.counters();
    send(&mut rig, FLOWS, 400, 600, 900)?;
    // A second restore has nothing to undo.
    let mark = rig.qemu.com1().len();
    rig.send_control(protocol::Control::RssRestore)?;
    let nothing = wait_line(&mut rig, mark, "@rss ", Duration::from_secs(30))?;
    assert_eq!(nothing, "@rss failed restore reason=nothing_to_restore");
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!((k.sent, k.received), (1300, 1300));
    let (before, end) = (lane_packets(&after, LANES)?, lane_packets(&fw, LANES)?);
    assert!(end[1] > before[1], "lane 1 serves its buckets again: {before:?} -> {end:?}");
    Ok(())
}

/// A NetBlaze profile whose queue (core) sustains 400 frames/s whatever the flows: the
/// mapper's thresholds are then 340 (relieve), 300 (move onto) and 200 (reclaim) frames/s,
/// far from the rates the test sends, so TCG's pace does not decide the outcome.
const PROFILE_400PPS: &str = "version=1\ntsc_hz=1000000000\nepoch_ns=80000\nfrontier=1:100,64:80\n\
                              service=packet_cycles:500,flow_cycles:300\nrate=1:400\n";

#[test]
fn the_server_mapper_releases_idle_queues_and_recruits_one_under_load() -> Result<()> {
    const FLOWS: u16 = 48;
    const LANES: u32 = 3;
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let chain = format!("version=1\n[netblaze.profile]\n{PROFILE_400PPS}");
    let (mut rig, ready) = boot_netblaze("igb_mapper", FLOWS, LANES, 2, chain, |b| b)?;
    assert!(ready.contains(" mapper=on "), "{ready}");
    // Light load, 100 frames/s over three queues (~33 each, under the 200 of reclaim): after
    // four periods the mapper empties queues onto the others, which stay under 300.
    let mark = rig.qemu.com1().len();
    send(&mut rig, FLOWS, 450, 100, 0)?;
    let released = wait_line(&mut rig, mark, "@mapper ", Duration::from_secs(60))?;
    assert!(field(&released, "released")? >= 1 && field(&released, "moved")? > 0, "{released}");
    assert_eq!(field(&released, "activated")?, 0, "{released}");
    let active_low = field(&released, "active")?;
    assert!(active_low < u64::from(LANES), "{released}");
    // The released queues' lanes are parked: the workers visit them only on sweeps.
    let mark = rig.qemu.com1().len();
    rig.send_control(protocol::Control::Stats)?;
    let stats = wait_line(&mut rig, mark, "@stats ", Duration::from_secs(30))?;
    assert_eq!(field(&stats, "lanes_parked")?, u64::from(LANES) - active_low, "{stats}");
    // Heavy load, 700 frames/s: more than one queue's 340, so the mapper relieves the queue
    // that holds everything — onto a queue it activates (none of the active ones has room).
    let mark = rig.qemu.com1().len();
    send(&mut rig, FLOWS, 2800, 700, 450)?;
    let recruited = wait_line_with(&mut rig, mark, "@mapper ", "activated=", Duration::from_secs(60), |l| {
        field(l, "activated").is_ok_and(|a| a >= 1)
    })?;
    assert!(field(&recruited, "moved")? > 0 && field(&recruited, "active")? > active_low, "{recruited}");
    assert_eq!(field(&recruited, "empty")?, 1, "the old lanes were drained before the new ones served: {recruited}");
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    // Every frame exactly once, each flow in order, across every move.
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!((k.sent, k.received), (3250, 3250));
    assert!(fw.require("mapper_released")? >= 1 && fw.require("mapper_activated")? >= 1, "{fw:?}");
    assert_eq!(fw.require("mapper_failed")?, 0, "{fw:?}");
    assert!(fw.require("mapper_periods")? >= 6, "{fw:?}");
    assert_eq!(fw.require("lanes_parked")?, u64::from(LANES) - fw.require("mapper_active")?, "{fw:?}");
    Ok(())
}

/// Boots `workers` workers on `lanes` igb queues with the chain module `chain` (a chain and
/// its NetBlaze profile), the server mapper every 500 ms, and `more` boot options; returns
/// the rig, ready, and its `@ready` line.
fn boot_netblaze(
    name: &str,
    flows: u16,
    lanes: u32,
    workers: u32,
    chain: String,
    more: impl FnOnce(BootOptions) -> BootOptions,
) -> Result<(Rig, String)> {
    let mut cfg = RigConfig::new(image()?, out_dir(name), flows);
    cfg.nic_model = NicModel::Igb;
    cfg.smp = workers;
    cfg.chain_text = Some(chain);
    cfg.boot = more(
        BootOptions::default()
            .set("max_s", MAX_S)
            .set("stats_ms", 0)
            .set("workers", workers)
            .set("lanes", lanes)
            .set("qsize", 256)
            .set("pool", 1024)
            .set("mapper_ms", 500),
    );
    let mut rig = Rig::start(&cfg)?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let ready = rig.qemu.com1().iter().find(|l| l.starts_with("@ready")).cloned().unwrap_or_default();
    Ok((rig, ready))
}

/// Pumps COM1 until a line starting with `prefix` appears after the first `from` lines;
/// returns it.
fn wait_line(rig: &mut Rig, from: usize, prefix: &str, timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        rig.pump(Duration::from_millis(20));
        if let Some(l) = rig.qemu.com1().iter().skip(from).find(|l| l.starts_with(prefix)) {
            return Ok(l.clone());
        }
    }
    bail!("no {prefix:?} line within {timeout:?}\n{}", rig.qemu.diagnostics())
}

/// [`wait_line`] for the first such line that `want` accepts (`what` names it in the error).
fn wait_line_with(
    rig: &mut Rig,
    from: usize,
    prefix: &str,
    what: &str,
    timeout: Duration,
    want: impl Fn(&str) -> bool,
) -> Result<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        rig.pump(Duration::from_millis(20));
        if let Some(l) = rig.qemu.com1().iter().skip(from).find(|l| l.starts_with(prefix) && want(l)) {
            return Ok(l.clone());
        }
    }
    bail!("no {prefix:?} line with {what} within {timeout:?}\n{}", rig.qemu.diagnostics())
}

fn field(line: &str, key: &str) -> Result<u64> {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .with_context(|| format!("no {key}= in {line}"))?
        .parse()
        .with_context(|| format!("{key} in {line}"))
}

/// Chain 1 (ACL, load balancer, accounting) on a core of this profile finishes 4 frames of
/// one flow, 2 of 64, per 50 ms epoch (TCG's pace: a few hundred frames/s are well outside
/// it, 50 frames/s inside), and 40 of one flow split after the ACL or after the load
/// balancer (a whale of up to 40 frames an epoch is split, above that best effort); its
/// queue carries 400 frames/s for the server mapper.
const PROFILE_SMALL_CORE: &str = "version=1\nnfs=acl,lb,accounting\ntsc_hz=1000000000\nepoch_ns=50000000\n\
                                  frontier=1:4,64:2\nservice=packet_cycles:500,flow_cycles:300\nrate=1:400\n\
                                  split.1.head.frontier=1:40,64:20\nsplit.1.head.service=packet_cycles:200,flow_cycles:100\n\
                                  split.1.tail.frontier=1:40,64:20\nsplit.1.tail.service=packet_cycles:300,flow_cycles:200\n\
                                  split.2.head.frontier=1:40,64:20\nsplit.2.head.service=packet_cycles:300,flow_cycles:200\n\
                                  split.2.tail.frontier=1:40,64:20\nsplit.2.tail.service=packet_cycles:200,flow_cycles:100\n";

/// NetBlaze end to end: 3 cores (2 dedicated, 1 auxiliary), 3 igb queues, 8 flows (so that a
/// flow placed on the auxiliary core for the next epoch sends in it: the placement is made
/// from one epoch's arrivals for the next). Light traffic (the
/// server mapper releases queues), then a whale (every second frame one flow) at 700 frames/s
/// and a burst at 1400 frames/s: the lanes' traffic no longer fits the profile's epoch, the
/// dedicated workers hand whole flows to the auxiliary core, which runs the chain and gives
/// them back to be sent on their own lanes; light again, the auxiliary core is released.
/// Every frame exactly once, each flow in order, the pool full at the end.
#[test]
fn an_aux_core_takes_flows_in_a_whale_and_a_burst_and_is_released_after() -> Result<()> {
    const FLOWS: u16 = 8;
    const LANES: u32 = 3;
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let chain1 = cadence_ctl::chain::load(&cadence_build::image::workspace_root().join("chains/chain1.toml"))?.text;
    let chain = format!("{chain1}\n[netblaze.profile]\n{PROFILE_SMALL_CORE}");
    // TCG's pace: 50 ms epochs, so an SLO above them.
    let (mut rig, ready) =
        boot_netblaze("igb_aux", FLOWS, LANES, 3, chain, |b| b.set("aux", 1).set("slo_us", 200_000))?;
    assert!(ready.contains(" aux=1 ") && ready.contains(" mapper=on "), "{ready}");
    let whale = |first: u64| {
        move |i: u64| {
            let n = first + i;
            let flow = if n.is_multiple_of(2) { 0 } else { (1 + n / 2 % u64::from(FLOWS - 1)) as u16 };
            (flow, 60 + (n * 131 % 700) as usize)
        }
    };
    // Light: 100 frames/s for 4.5 s, inside the frontier; the server mapper releases queues.
    let mark = rig.qemu.com1().len();
    send(&mut rig, FLOWS, 450, 100, 0)?;
    let released = wait_line(&mut rig, mark, "@mapper ", Duration::from_secs(60))?;
    assert!(field(&released, "released")? >= 1, "{released}");
    // The whale at 700 frames/s, then the burst at 1400 frames/s.
    send_paced(&mut rig, 2100, 700, whale(450))?;
    send_paced(&mut rig, 1400, 1400, whale(2550))?;
    // Light again: 50 frames/s for 3 s; the auxiliary core idles and is released.
    send(&mut rig, FLOWS, 150, 50, 3950)?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!((k.sent, k.received), (4100, 4100));
    let handed = fw.require("nb_handed")?;
    assert!(handed > 0, "flows were handed to the auxiliary core: {fw:?}");
    assert_eq!(fw.require("aux_frames")?, handed, "{fw:?}");
    assert_eq!(fw.require("nb_returned")?, handed, "every handed frame came back to be sent: {fw:?}");
    assert_eq!(fw.require("core2_packets")?, handed, "the auxiliary core is core 2: {fw:?}");
    assert!(fw.require("nb_recruited")? >= 1 && fw.require("nb_released")? >= 1, "{fw:?}");
    assert!(fw.require("nb_whales")? >= 1 && fw.require("nb_outside")? >= 1, "{fw:?}");
    // The whale split: its head (ACL, or ACL and load balancer) on its lane, the rest on the
    // auxiliary core — and still every frame as chain 1 makes it (the checker's expectations).
    assert!(fw.require("nb_splits")? >= 1 && fw.require("nb_heads")? >= 1, "{fw:?}");
    assert_eq!((fw.require("drop_handoff_full")?, fw.require("nb_lane_busy")?), (0, 0), "{fw:?}");
    assert!(fw.require("mapper_moved")? > 0, "{fw:?}");
    Ok(())
}
