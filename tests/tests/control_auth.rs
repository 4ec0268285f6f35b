//! Control frames are obeyed only from the control port, signed with the boot key for this
//! boot, and once: an unsigned STOP on a data port (what any host on the segment could send),
//! a forged one, one signed for another boot (another nonce), one on the wrong port and a
//! replayed STATS are each dropped and counted as `ctl_rejected` while forwarding goes on; the
//! real STOP then ends the run.

use std::time::Duration;

use anyhow::Result;
use cadence_harness::protocol::{self, BootOptions, Control};
use cadence_tests::{BOOT_TIMEOUT, send_paced, start, stop_ok};

const FLOWS: u16 = 8;

#[test]
fn unauthenticated_control_is_dropped_and_counted_while_forwarding_continues() -> Result<()> {
    let mut rig = start("control_auth", FLOWS, BootOptions::default().set("stats_ms", 0))?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    send_paced(&mut rig, 400, 2000, |i| ((i % u64::from(FLOWS)) as u16, 100))?;
    let m = rig.checker().macs();
    // 1, 2: the old unsigned STOP, on the data port and on the control port.
    rig.send_raw(1, &protocol::unsigned_control_frame(m.nic[1], m.peer[1], Control::Stop))?;
    rig.send_raw(0, &protocol::unsigned_control_frame(m.nic[0], m.peer[0], Control::Stop))?;
    // 3: a STOP signed with another key, on the control port.
    let nonce = rig.report.ctl_nonce.expect("@ready announces the boot nonce");
    rig.send_raw(0, &protocol::control_frame(m.nic[0], m.peer[0], Control::Stop, &[0x5a; 16], nonce, 1_000_000))?;
    // 3b: a STOP signed with the right key for another boot (a captured frame replayed after
    // a restart, or one meant for another instance sharing the key).
    rig.send_raw(
        0,
        &protocol::control_frame(m.nic[0], m.peer[0], Control::Stop, &rig.ctl_key(), nonce ^ 1, 2_000_000),
    )?;
    // 4: a correctly signed STOP on the data port.
    let good_on_wrong_port = rig.control_frame(Control::Stop)?;
    rig.send_raw(1, &good_on_wrong_port)?;
    // 5: a STATS obeyed once, then replayed.
    let stats = rig.control_frame(Control::Stats)?;
    rig.send_raw(0, &stats)?;
    rig.send_raw(0, &stats)?;
    send_paced(&mut rig, 400, 2000, |i| ((i % u64::from(FLOWS)) as u16, 100))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    // Still running: none of the bad STOPs stopped it.
    assert!(rig.qemu.try_exit()?.is_none(), "{}", rig.qemu.diagnostics());
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!((k.sent, k.received), (800, 800));
    assert_eq!(fw.require("drop_ctl_rejected")?, 6, "{fw:?}");
    assert_eq!(fw.require("ctl")?, 2, "the first STATS and the real STOP: {fw:?}");
    let rx = fw.require("p0_rx")? + fw.require("p1_rx")?;
    let tx = fw.require("p0_tx")? + fw.require("p1_tx")?;
    assert_eq!(rx, tx + fw.require("drops")? + fw.require("ctl")?, "conservation: {fw:?}");
    Ok(())
}
