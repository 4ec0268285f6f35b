//! The rig's tap backend against the real image: two virtio-net NICs on multi-queue tap
//! netdevs (`queues=2`, `mq=on,rss=on`), frames injected and captured through
//! `AF_PACKET` sockets.
//!
//! Needs root and QEMU, so it is `#[ignore]`d; run it with
//! `cargo test -p cadence-harness --test tap_rig -- --ignored --nocapture`
//! (`CADENCE_IMAGE=<path>` uses a prebuilt image instead of building one).
//!
//! Sends each flow on its own and drains before the next, so every flow's fate is
//! known. The image runs two lanes (`lanes=2`: both queue pairs polled), so RSS may put a
//! flow on either queue, and every frame of every flow must come back exactly once, in
//! order, unchanged but for the MAC rewrite.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, anyhow, bail};
use cadence_build::image::{self, Profile};
use cadence_harness::protocol::{self, BootOptions};
use cadence_harness::rig::{Backend, Rig, RigConfig};

const FLOWS: u16 = 8;
const PER_FLOW: u64 = 100;

fn image() -> Result<PathBuf> {
    match std::env::var_os("CADENCE_IMAGE") {
        Some(p) => Ok(PathBuf::from(p)),
        None => image::build(Profile::Release),
    }
}

#[test]
#[ignore = "needs root (tap interfaces) and QEMU"]
fn tap_backend_forwards_flows_through_multiqueue_virtio_net() -> Result<()> {
    let out = image::target_dir().join("xtask").join("tests").join(format!("tap_rig-{}", std::process::id()));
    let mut cfg = RigConfig::new(image()?, out, FLOWS);
    cfg.backend = Backend::Tap { queues: 2 };
    cfg.boot = BootOptions::default().set("max_s", 120).set("stats_ms", 0).set("lanes", 2);
    let mut rig = Rig::start(&cfg)?;
    let names = rig.tap_ifnames();
    assert_eq!(names.len(), 2);
    rig.wait_ready(Duration::from_secs(90), &mut |l| eprintln!("com1: {l}"))?;
    eprintln!("qemu: {}", rig.cmdline);
    for n in &rig.report.nics {
        eprintln!("nic: {n:?}");
    }
    let pairs = rig.report.nics.first().map(|n| n.rxq).ok_or_else(|| anyhow!("no @nic line"))?;

    let mut per_flow = Vec::new();
    for flow in 0..FLOWS {
        let before = rig.checker().classes().received;
        for i in 0..PER_FLOW {
            rig.send_flow(flow, 64 + (i as usize * 37) % 1400)?;
            std::thread::sleep(Duration::from_micros(500));
        }
        rig.drain(Duration::from_millis(1500), Duration::from_secs(20), &mut |_| {});
        per_flow.push(rig.checker().classes().received - before);
    }
    eprintln!("received per flow (of {PER_FLOW} each): {per_flow:?}");
    let exit = rig.stop(Duration::from_secs(60), &mut |_| {})?;
    if exit.status != Some(protocol::EXIT_SUCCESS) {
        bail!("firmware exit {:?}\n{}", exit.status, rig.qemu.diagnostics());
    }
    let k = rig.checker().classes();
    eprintln!("host: {k:?}, host noise per port {:?}", rig.host_noise());
    eprintln!("firmware: {:?}", rig.report.summary);
    assert_eq!(rig.host_noise(), [0, 0], "IPv6 is off on the taps: the host kernel must stay quiet");
    assert_eq!((k.duplicated, k.corrupted, k.misdirected, k.bad_rewrite, k.unexpected), (0, 0, 0, 0, 0), "{k:?}");
    assert_eq!(pairs, 2, "both queue pairs up: {:?}", rig.report.nics);
    assert!(k.clean(), "{k:?}: {:?}", rig.checker().examples);
    assert_eq!((k.sent, k.received), (u64::from(FLOWS) * PER_FLOW, u64::from(FLOWS) * PER_FLOW), "{k:?}");
    assert!(per_flow.iter().all(|&n| n == PER_FLOW), "every frame of every flow came back: {per_flow:?}");
    // The interfaces go away with QEMU.
    std::thread::sleep(Duration::from_millis(200));
    for n in names {
        assert!(!std::path::Path::new("/sys/class/net").join(&n).exists(), "{n} left behind");
    }
    Ok(())
}
