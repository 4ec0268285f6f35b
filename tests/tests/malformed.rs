//! Good frames interleaved with malformed ones of every kind, a known number each: all
//! good frames pass exactly once and in order, no malformed frame comes out, and the
//! firmware's `drop_<reason>` counters equal what was injected per reason.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use cadence_core::drops::DropReason;
use cadence_harness::protocol::BootOptions;
use cadence_harness::traffic::Pacer;
use cadence_harness::traffic::malformed::Malformed;
use cadence_tests::{BOOT_TIMEOUT, start, stop_ok};

const GOOD: u64 = 1200;
const FLOWS: u16 = 8;
/// One malformed frame after every this many good ones.
const EVERY: u64 = 5;
const RATE: u64 = 1500;

#[test]
fn malformed_frames_are_dropped_and_counted_by_reason() -> Result<()> {
    // Every reason we inject is one the firmware knows.
    let known: Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    for m in Malformed::ALL {
        assert!(known.contains(&m.reason()), "{m:?}: {} is no DropReason", m.reason());
    }

    let mut rig = start("malformed", FLOWS, BootOptions::default().set("stats_ms", 0))?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let macs = rig.checker().macs();
    let mut injected: BTreeMap<&str, u64> = known.iter().map(|r| (*r, 0)).collect();
    let mut pacer = Pacer::new(RATE, Instant::now());
    let (mut good, mut bad) = (0u64, 0u64);
    while good < GOOD {
        for _ in 0..pacer.take(Instant::now()) {
            if good == GOOD {
                break;
            }
            let flow = (good % u64::from(FLOWS)) as u16;
            rig.send_flow(flow, 60 + (good * 97 % 1455) as usize)?;
            good += 1;
            if good.is_multiple_of(EVERY) {
                let m = Malformed::ALL[(bad % Malformed::ALL.len() as u64) as usize];
                let port = (bad / Malformed::ALL.len() as u64 % 2) as usize;
                let f = m.build(macs.nic[port], macs.peer[port], bad as u32);
                rig.send_raw(port, &f)?;
                *injected.entry(m.reason()).or_default() += 1;
                bad += 1;
            }
        }
        rig.pump(pacer.wait().min(Duration::from_millis(2)));
    }
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    let examples = rig.checker().examples.clone();
    // Good frames: exactly once, in order; nothing else came out (a malformed frame
    // coming out would be `unexpected`).
    assert!(k.clean(), "host saw {:?}: {k:?}\n{examples:#?}", k.failures());
    assert_eq!((k.sent, k.received), (GOOD, GOOD));
    assert_eq!(bad, GOOD / EVERY);
    // Firmware: everything arrived, each malformed frame was counted under its reason.
    let rx = fw.require("p0_rx")? + fw.require("p1_rx")?;
    assert_eq!(rx, GOOD + bad + fw.require("ctl")?, "{fw:?}");
    assert_eq!(fw.require("p0_tx")? + fw.require("p1_tx")?, GOOD, "{fw:?}");
    let got = fw.drops_by_reason();
    for (reason, n) in &injected {
        assert_eq!(got.get(*reason).copied(), Some(*n), "drop_{reason}: firmware {fw:?}");
    }
    assert_eq!(fw.require("drops")?, bad, "{fw:?}");
    Ok(())
}
