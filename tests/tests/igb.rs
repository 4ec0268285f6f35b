//! QEMU end-to-end over igb (`-device igb`, the 82576): two igb NICs on dgram backends,
//! 3000 frames of mixed flows and sizes through the forwarder, each back exactly once,
//! in per-flow order, out of the other port with the PROTOCOL.md MAC rewrite. This
//! runs the shared Intel ring engine (advanced descriptors, DD/EOP, RS-batched TX
//! completion) against QEMU's device model.

use std::time::Duration;

use anyhow::Result;
use cadence_harness::protocol::BootOptions;
use cadence_harness::rig::{NicModel, Rig, RigConfig};
use cadence_tests::{BOOT_TIMEOUT, MAX_S, image, out_dir, send_paced, stop_ok};

const FRAMES: u64 = 3000;
/// Modest: igb pays a VM exit per doorbell under TCG.
const RATE: u64 = 1000;
const FLOWS: u16 = 8;

#[test]
fn forwards_over_igb_exactly_once_in_order() -> Result<()> {
    let mut cfg = RigConfig::new(image()?, out_dir("igb"), FLOWS);
    cfg.nic_model = NicModel::Igb;
    cfg.boot = BootOptions::default().set("max_s", MAX_S).set("stats_ms", 0);
    let mut rig = Rig::start(&cfg)?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    assert_eq!(rig.report.nics.len(), 2, "two @nic lines");
    for n in &rig.report.nics {
        assert_eq!(n.kind, "igb", "{n:?}");
    }
    send_paced(&mut rig, FRAMES, RATE, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    let examples = rig.checker().examples.clone();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{examples:#?}", k.failures());
    assert_eq!((k.sent, k.received), (FRAMES, FRAMES));
    let rx = fw.require("p0_rx")? + fw.require("p1_rx")?;
    let tx = fw.require("p0_tx")? + fw.require("p1_tx")?;
    assert_eq!(rx, FRAMES + fw.require("ctl")?, "{fw:?}");
    assert_eq!(tx, FRAMES, "{fw:?}");
    assert_eq!(fw.require("drops")?, 0, "{fw:?}");
    Ok(())
}
