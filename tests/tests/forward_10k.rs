//! 10 000 frames of mixed flows (both directions, IPv4/IPv6, UDP/TCP) and sizes
//! 60..=1514 through the forwarder: each must come back exactly once, in per-flow
//! order, out of the other port, with the PROTOCOL.md MAC rewrite and otherwise
//! byte-exact; the firmware's counters must agree.

use std::time::Duration;

use anyhow::Result;
use cadence_harness::protocol::BootOptions;
use cadence_harness::traffic::FlowKind;
use cadence_tests::{BOOT_TIMEOUT, send_paced, start, stop_ok};

const FRAMES: u64 = 10_000;
/// Modest: well below what TCG forwards without loss (see README).
const RATE: u64 = 2000;
const FLOWS: u16 = 8;

#[test]
fn forwards_10k_frames_exactly_once_in_order() -> Result<()> {
    let mut rig = start("forward_10k", FLOWS, BootOptions::default().set("stats_ms", 0))?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    // Flows round robin; sizes sweep 60..=1514 (raised to each flow's minimum).
    send_paced(&mut rig, FRAMES, RATE, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    // The ring bound takes the link speed the virtio-net devices report (the rig gives them
    // speed=1000): Metronome is not bounded by an assumed 10 GbE line rate.
    let com1 = rig.qemu.com1();
    let ready = com1.iter().find(|l| l.starts_with("@ready ")).cloned().unwrap_or_default();
    assert!(ready.contains(" line_mbps=1000 line_from=port "), "{ready}");
    // COM1 holds machine lines only (and the empty line that ends the BIOS's): what people
    // read went to COM2 as defmt.
    let human: Vec<&String> = com1.iter().filter(|l| !l.is_empty() && !l.starts_with('@')).collect();
    assert!(human.is_empty(), "non-machine lines on COM1: {human:#?}");
    let d = cadence_harness::defmt::decode_file(&cadence_tests::image()?, &rig.out_dir.join("com2.defmt"))?;
    assert!(d.lines.iter().any(|l| l.contains("forward: 1 workers on 1 lanes")), "{:#?}", d.lines);
    assert!(!com1.iter().any(|l| l.starts_with("warning: T_S is bounded")), "{com1:#?}");
    let k = rig.checker().classes();
    let examples = rig.checker().examples.clone();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{examples:#?}", k.failures());
    assert_eq!((k.sent, k.received), (FRAMES, FRAMES));
    // Every kind and both ports were exercised.
    let flows = rig.checker().flows().to_vec();
    for kind in FlowKind::ALL {
        for p in 0..2 {
            assert!(flows.iter().any(|f| f.kind == kind && f.ingress == p));
        }
    }
    // The firmware agrees: it received every frame sent (the 10 000 plus the STOP
    // control frame, which `ctl` counts), forwarded the 10 000, dropped nothing.
    let rx = fw.require("p0_rx")? + fw.require("p1_rx")?;
    let tx = fw.require("p0_tx")? + fw.require("p1_tx")?;
    let ctl = fw.require("ctl")?;
    assert_eq!(ctl, 1, "one STOP");
    assert_eq!(rx, FRAMES + ctl, "p0_rx + p1_rx = frames sent + control frames: {fw:?}");
    assert_eq!(tx, FRAMES, "{fw:?}");
    assert_eq!(fw.require("p0_rx")?, rig.sent_per_port[0], "{fw:?}");
    assert_eq!(fw.require("p1_rx")?, rig.sent_per_port[1], "{fw:?}");
    assert_eq!(fw.require("drops")?, 0, "{fw:?}");
    // The dataplane's own latency: every forwarded frame timed, from the poll that took it to
    // its TX burst. That span lies inside the host's (host send → host receive, through
    // QEMU), frame by frame, so each quantile of it is at most the host's — within the
    // histogram's bucket width (1/16) and the two clocks' rates.
    assert_eq!(fw.require("lat_count")?, FRAMES, "{fw:?}");
    let host = &rig.checker().latency;
    for (key, pct) in [("lat_p50_ns", 50.0), ("lat_p99_ns", 99.0)] {
        let dp = fw.require(key)?;
        let h = host.percentile(pct).ok_or_else(|| anyhow::anyhow!("no host latencies"))?;
        assert!(dp > 0 && dp as f64 <= h as f64 * 1.07, "{key} {dp} ns in the dataplane, host p{pct} {h} ns");
    }
    assert_eq!(fw.require("slo_us")?, 200, "{fw:?}");
    assert!(fw.require("over_slo")? <= FRAMES, "{fw:?}");
    assert_eq!(fw.require("core0_lat_count")?, FRAMES, "{fw:?}");
    Ok(())
}
