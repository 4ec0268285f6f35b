//! A worker that hangs inside its round (`stall=1:300:round`, the debug boot option: in its
//! stage, holding a lane and the frames of its batch) on an image with fewer workers than
//! lanes: worker 0 reports it (`@fault kind=stall core=1 …`), the image stops its core for
//! good with an NMI whose handler halts it, and worker 0 takes the lane over
//! (`@fault kind=takeover core=1 lane=… `: its lock revoked, its pool's free list rebuilt)
//! and serves all four lanes. Every frame comes back exactly once and in order but those of
//! the hung batch, which are lost and counted (`stranded=`); the run then fails (exit 37)
//! because a worker did not park at shutdown.
//!
//! And the lone worker that hangs (`workers=1` on two cores, between rounds): only the
//! watchdog on the spare core can see it (`seen_by=watchdog`), and since `max_s` would run in
//! the hung worker's own loop, the watchdog ends the run itself (exit 37, with the reason
//! and `@summary`).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use cadence_harness::protocol::{BootOptions, EXIT_RUNTIME_FAILURE};
use cadence_harness::rig::{NicModel, Rig, RigConfig};
use cadence_tests::{BOOT_TIMEOUT, MAX_S, STOP_TIMEOUT, expect_status, image, out_dir, send_paced};

const FLOWS: u16 = 32;
const LANES: u32 = 4;

#[test]
fn a_worker_hung_inside_its_round_is_stopped_and_its_lane_taken_over() -> Result<()> {
    let mut cfg = RigConfig::new(image()?, out_dir("stall"), FLOWS);
    cfg.nic_model = NicModel::Igb;
    cfg.smp = 2;
    cfg.boot = BootOptions::default()
        .set("max_s", MAX_S)
        .set("stats_ms", 0)
        .set("workers", 2)
        .set("lanes", LANES)
        .set("qsize", 1024)
        .set("pool", 4096)
        .set("stall", "1:300:round")
        .set("stall_ms", 300);
    let mut rig = Rig::start(&cfg)?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    // Traffic until worker 1 has hung on a batch and lost its lane (whichever lane it held).
    let mut sent = 0u64;
    let pick = |i: u64| ((i % u64::from(FLOWS)) as u16, 60 + (i * 131 % 700) as usize);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !rig.qemu.com1().iter().any(|l| l.starts_with("@fault kind=takeover")) {
        if Instant::now() >= deadline {
            bail!("no take-over within 120 s\n{}", rig.qemu.diagnostics());
        }
        send_paced(&mut rig, 50, 400, |i| pick(sent + i))?;
        sent += 50;
    }
    // Worker 0 alone now serves every lane.
    send_paced(&mut rig, 800, 400, |i| pick(sent + i))?;
    sent += 800;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let exit = rig.stop(STOP_TIMEOUT, &mut |_| {})?;
    expect_status(&rig, exit, EXIT_RUNTIME_FAILURE)?;
    let com1 = rig.qemu.com1();
    let stall = com1.iter().find(|l| l.starts_with("@fault kind=stall")).cloned().unwrap_or_default();
    assert!(stall.starts_with("@fault kind=stall core=1 ") && stall.contains("seen_by=0"), "{com1:#?}");
    assert!(com1.iter().any(|l| l.starts_with("@fault kind=takeover core=1 lane=")), "{com1:#?}");
    assert!(com1.iter().any(|l| l == "error: 0 of 1 workers parked"), "{com1:#?}");
    assert!(!com1.iter().any(|l| l.contains("still held at shutdown")), "the lane was taken over: {com1:#?}");
    let fw = rig.report.summary.clone().expect("@summary");
    assert_eq!((fw.require("stalls")?, fw.require("takeovers")?), (1, 1), "{fw:?}");
    let stranded = fw.require("stranded")?;
    assert!((1..=64).contains(&stranded), "the hung batch: {fw:?}");
    let k = rig.checker().classes();
    assert_eq!(k.sent, sent);
    assert_eq!(k.lost, stranded, "lost = the hung batch: {k:?} {fw:?}");
    let rest = cadence_harness::traffic::Classes { lost: 0, ..k };
    assert!(rest.clean(), "host saw {:?}: {k:?}\n{:#?}", rest.failures(), rig.checker().examples);
    // Every lane was served after the take-over (worker 0 visits them all).
    let per_lane: Vec<u64> = (0..LANES).map(|l| fw.require(&format!("lane{l}_packets"))).collect::<Result<_>>()?;
    assert!(per_lane.iter().all(|&n| n > 0), "{per_lane:?}");
    Ok(())
}

#[test]
fn a_lone_hung_worker_is_seen_by_the_watchdog_core_which_ends_the_run() -> Result<()> {
    let mut cfg = RigConfig::new(image()?, out_dir("stall_lone"), 4);
    cfg.smp = 2;
    cfg.boot = BootOptions::default()
        .set("max_s", 3)
        .set("stats_ms", 0)
        .set("workers", 1)
        .set("stall", "0:300")
        .set("stall_ms", 300);
    let mut rig = Rig::start(&cfg)?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let ready = rig.qemu.com1().into_iter().find(|l| l.starts_with("@ready")).unwrap_or_default();
    assert!(ready.contains(" watchdog=core "), "{ready}");
    let fault = wait_line(&mut rig, "@fault ", Duration::from_secs(60))?;
    assert!(fault.starts_with("@fault kind=stall core=0 ") && fault.ends_with("seen_by=watchdog"), "{fault}");
    // Nobody sends STOP: max_s passes, worker 0 cannot act on it, the watchdog does.
    let exit = rig.qemu.wait(Duration::from_secs(120))?;
    rig.pump(Duration::from_millis(200));
    expect_status(&rig, exit, EXIT_RUNTIME_FAILURE)?;
    let com1 = rig.qemu.com1();
    assert!(
        com1.iter().any(|l| l.starts_with("error: watchdog: the run did not wind down") && l.contains("after max_s")),
        "{com1:#?}"
    );
    let fw = rig.report.summary.clone().expect("@summary");
    assert_eq!(fw.require("stalls")?, 1, "{fw:?}");
    Ok(())
}

fn wait_line(rig: &mut Rig, prefix: &str, timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        rig.pump(Duration::from_millis(20));
        if let Some(l) = rig.qemu.com1().iter().find(|l| l.starts_with(prefix)) {
            return Ok(l.clone());
        }
    }
    bail!("no {prefix:?} line within {timeout:?}\n{}", rig.qemu.diagnostics())
}
