//! A worker that hangs (`stall=1:MS`, the debug boot option) on an image with fewer workers
//! than lanes: the watchdog on the other core reports it (`@fault kind=stall core=1 …`),
//! the live worker takes over the hung worker's lanes (it held none), every frame still comes
//! back exactly once and in order — and the run then fails (exit 37), because a worker did
//! not park at shutdown.
//!
//! And the lone worker that hangs (`workers=1` on two cores): only the watchdog on the spare
//! core can see it (`seen_by=watchdog`), and since `max_s` would run in the hung worker's own
//! loop, the watchdog ends the run itself (exit 37, with the reason and `@summary`).

use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use cadence_tests::{BOOT_TIMEOUT, MAX_S, STOP_TIMEOUT, check_conservation, expect_status, image, out_dir, send_paced};
use xtask::protocol::{BootOptions, EXIT_RUNTIME_FAILURE};
use xtask::rig::{NicModel, Rig, RigConfig};

const FLOWS: u16 = 32;
const LANES: u32 = 4;

#[test]
fn a_hung_worker_is_reported_and_its_lanes_taken_over() -> Result<()> {
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
        .set("stall", "1:300")
        .set("stall_ms", 300);
    let mut rig = Rig::start(&cfg)?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let fault = wait_line(&mut rig, "@fault ", Duration::from_secs(60))?;
    assert!(fault.starts_with("@fault kind=stall core=1 ") && fault.contains("seen_by=0"), "{fault}");
    // Worker 1 owned lanes 1 and 3; worker 0 now serves all four.
    send_paced(&mut rig, 800, 400, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 131 % 700) as usize))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let exit = rig.stop(STOP_TIMEOUT, &mut |_| {})?;
    expect_status(&rig, exit, EXIT_RUNTIME_FAILURE)?;
    let com1 = rig.qemu.com1();
    assert!(com1.iter().any(|l| l == "error: 0 of 1 workers parked"), "{com1:#?}");
    let fw = rig.report.summary.clone().expect("@summary");
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!((k.sent, k.received), (800, 800));
    assert_eq!(fw.require("stalls")?, 1, "{fw:?}");
    let per_lane: Vec<u64> = (0..LANES).map(|l| fw.require(&format!("lane{l}_packets"))).collect::<Result<_>>()?;
    assert!(per_lane[1] > 0 && per_lane[3] > 0, "the hung worker's lanes were served: {per_lane:?}");
    assert_eq!(fw.require("core1_packets")?, 0, "worker 1 hung before any traffic: {fw:?}");
    check_conservation(&rig, &fw)
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
