//! A flood on one lane that one worker cannot keep up with, in the image: `workers=1`, chain
//! 1, and frames of a flow its ACL denies sent into port 1 as fast as the host can, each made
//! expensive (`burn=`, the debug option: QEMU delivers frames slower than the guest drops
//! them otherwise). While it lasts the worker's rounds end on their budget (`round_us`), and
//! everything that runs between rounds still runs: `@stats` lines keep coming and a signed
//! STOP on port 0 ends the run with the success status — with every frame accounted for.
//!
//! What this test cannot show: QEMU hands the guest frames a few at a time (its virtio-net
//! and igb models deliver as the guest refills and notifies, here about two per poll), so even
//! a saturated worker (about 90 % busy here) finds its ring empty between most polls, and a
//! round without a budget would end too. A ring that never runs dry is what
//! `firmware/src/forward/tests.rs` (`under_a_flood_on_its_only_lane_…`) and the worker's unit
//! tests build, and they fail without the budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use cadence_build::image;
use cadence_harness::protocol::BootOptions;
use cadence_tests::{BOOT_TIMEOUT, send_paced, start_with, stop_ok};

/// Flows the checker knows: 0–7 carry checked traffic; 8 is denied by chain 1's ACL.
const FLOWS: u16 = 16;
const DENIED_FLOW: u16 = 8;
const FLOOD: Duration = Duration::from_secs(3);
/// The flood's rate: several times what the worker can do with [`BURN`].
const FLOOD_PPS: u64 = 30_000;
/// Spin-loop iterations per frame: a few tens of µs per frame under TCG, well below the rate
/// QEMU delivers.
const BURN: u32 = 500;

#[test]
fn under_a_flood_a_lone_worker_keeps_reporting_and_a_signed_stop_ends_the_run() -> Result<()> {
    let chain = cadence_ctl::chain::load(&image::workspace_root().join("chains").join("chain1.toml"))?;
    let boot = BootOptions::default().set("stats_ms", 200).set("workers", 1).set("burn", BURN);
    let mut rig = start_with("flood", FLOWS, boot, |c| c.chain_text = Some(chain.text))?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    // Checked traffic first: the chain (with its debug burn) forwards as it should.
    send_paced(&mut rig, 200, 400, |i| ((i % 8) as u16, 100))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    // The flood: the denied flow's frame (registered once with the checker as an expected
    // drop; its copies never come back), into port 1.
    let (_, denied) = rig.checker().next_frame(DENIED_FLOW, 100).expect("flow 8");
    let until = Arc::new(AtomicBool::new(false));
    let flood = rig.flood(1, denied, FLOOD_PPS, Arc::clone(&until))?;
    let t0 = Instant::now();
    let mut stats_lines = 0;
    while t0.elapsed() < FLOOD {
        stats_lines += rig.pump(Duration::from_millis(50)).iter().filter(|(l, _)| l.starts_with("@stats ")).count();
    }
    // STOP into port 0 while port 1 is still flooded.
    let fw = stop_ok(&mut rig);
    until.store(true, Ordering::Relaxed);
    let flooded = flood.join().expect("flood thread");
    let fw = fw?;
    let (denied_n, cut, tries) =
        (fw.require("drop_acl_deny")?, fw.require("core0_cut_rounds")?, fw.require("core0_tries")?);
    eprintln!(
        "flood: {flooded} frames sent in {FLOOD:?}, {denied_n} denied; {stats_lines} @stats lines; {tries} rounds, {cut} cut"
    );
    // The flood outran the worker: it was busy most of the time, and some rounds ended on
    // their budget rather than on an empty ring.
    let (busy, halted) = (fw.require("core0_busy_cycles")?, fw.require("core0_halted_cycles")?);
    assert!(busy > halted, "the worker was not overloaded: busy {busy}, halted {halted}: {fw:?}");
    assert!(cut > 0, "no round was cut: the flood never outran the worker: {fw:?}");
    // Everything between rounds ran: a line every 200 ms (a few in 3 s, whatever TCG's pace).
    assert!(stats_lines >= 3, "{stats_lines} @stats lines during the flood");
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!(k.received, 200, "{k:?}");
    assert_eq!(fw.require("drops")?, denied_n, "only the flood was dropped, by the ACL: {fw:?}");
    assert_eq!(fw.require("burn_frames")?, 200 + denied_n, "every data frame went through the chain: {fw:?}");
    Ok(())
}
