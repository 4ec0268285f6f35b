//! The firmware on aarch64 (QEMU `virt`, GICv3, Cortex-A72, TCG) under the x86 tests' rig.
//! One boot carries what issue 26 asks of the forwarding run, so CI pays for one: chain 1
//! (ACL, LB, accounting) from the initial RAM disk, two Metronome workers on two cores
//! sharing one lane, 10 000 checked frames with malformed ones interleaved, unsigned STOPs
//! refused while forwarding goes on, management requests on the PL011 answered, then the
//! signed STOP (exit 33). Four short boots: igb (QEMU's 82576, which `virt` offers on
//! PCIe too) forwards with the same driver as on x86_64; a worker hung in its round is
//! stopped by FIQ and its lane taken over, and a lone hung worker is caught by the
//! watchdog core (37 each, as `stall.rs` on x86_64); a bad boot option is refused with
//! status 35. Only those statuses pass.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Result;
use cadence_build::image;
use cadence_core::drops::DropReason;
use cadence_harness::protocol::{self, BootOptions, Control};
use cadence_harness::traffic::Pacer;
use cadence_harness::traffic::malformed::Malformed;
use cadence_tests::aarch64::start_firmware;
use cadence_tests::{BOOT_TIMEOUT, expect_status, stop_ok};

/// One QEMU at a time: TCG vCPUs on a two-core machine (hang guards only; nothing asserts
/// on time).
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// With chain 1, flows 8 and 9 are denied by the ACL, flows 12 and 13 go to VIPs.
const FLOWS: u16 = 16;
const FRAMES: u64 = 10_000;
const RATE: u64 = 2000;
/// One malformed frame after every this many good ones.
const EVERY: u64 = 50;

#[test]
fn chain1_two_workers_10k_checked_frames_malformed_and_control_on_aarch64() -> Result<()> {
    let _one = serial();
    let text = cadence_ctl::chain::load(&image::workspace_root().join("chains").join("chain1.toml"))?.text;
    let opts = BootOptions::default().set("stats_ms", 0).set("workers", 2).set("lanes", 1).set("sched", "metronome");
    cadence_tests::aarch64::firmware_image()?;
    let booted = Instant::now();
    let mut rig = start_firmware("aarch64_forward", FLOWS, opts, |c| {
        c.smp = 2;
        c.chain_text = Some(text);
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let boot_s = booted.elapsed().as_secs_f64();
    let banner = rig.report.banner.clone().expect("@banner");
    assert_eq!((banner.cores, banner.nics), (2, 2), "{banner:?}");
    assert!(banner.cpu.contains("Cortex-A72"), "{banner:?}");
    assert_eq!(rig.report.chain, ["acl", "lb", "accounting"], "@chain");
    let macs = rig.checker().macs();
    let known: Vec<&str> = DropReason::ALL.iter().map(|r| r.as_str()).collect();
    let mut injected: BTreeMap<&str, u64> = known.iter().map(|r| (*r, 0)).collect();
    let mut pacer = Pacer::new(RATE, Instant::now());
    let (mut good, mut bad) = (0u64, 0u64);
    while good < FRAMES {
        for _ in 0..pacer.take(Instant::now()) {
            if good == FRAMES {
                break;
            }
            rig.send_flow((good % u64::from(FLOWS)) as u16, 60 + (good * 149 % 1455) as usize)?;
            good += 1;
            if good.is_multiple_of(EVERY) {
                let m = Malformed::ALL[(bad % Malformed::ALL.len() as u64) as usize];
                let port = (bad / Malformed::ALL.len() as u64 % 2) as usize;
                rig.send_raw(port, &m.build(macs.nic[port], macs.peer[port], bad as u32))?;
                *injected.entry(m.reason()).or_default() += 1;
                bad += 1;
            }
            if good == FRAMES / 2 {
                // Unsigned STOPs, on the data port and on the control port: refused.
                rig.send_raw(1, &protocol::unsigned_control_frame(macs.nic[1], macs.peer[1], Control::Stop))?;
                rig.send_raw(0, &protocol::unsigned_control_frame(macs.nic[0], macs.peer[0], Control::Stop))?;
            }
        }
        rig.pump(pacer.wait().min(Duration::from_millis(2)));
    }
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    assert!(rig.qemu.try_exit()?.is_none(), "an unsigned STOP stopped the run\n{}", rig.qemu.diagnostics());
    // The management channel on the PL011's receiver: requests in, `@ctl` replies out.
    let show = rig.ctl("show acl", Duration::from_secs(30))?;
    show.ok()?;
    assert!(show.data.first().is_some_and(|l| l.starts_with("default=")), "{show:?}");
    let stats = rig.ctl("stats", Duration::from_secs(30))?;
    let json: serde_json::Value = serde_json::from_str(&stats.data[0])?;
    assert!(json["p0_rx"].as_u64().is_some_and(|n| n > 0), "{json}");
    // The signed STOP: `@summary`, exit 33, conservation and no leaked buffer.
    let fw = stop_ok(&mut rig)?;
    let total_s = booted.elapsed().as_secs_f64();
    let c = rig.checker();
    let k = c.classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), c.examples);
    assert_eq!(k.sent, FRAMES);
    assert_eq!(bad, FRAMES / EVERY);
    // Chain 1: denied flows dropped by the ACL, VIP flows balanced, the rest checked byte
    // for byte on the other port.
    let denied = c.sent_where(|e| e.drop == Some("acl_deny"));
    assert!(denied > 0);
    assert_eq!(k.expected_drops, denied);
    assert_eq!(k.received + denied, FRAMES, "{k:?}");
    assert_eq!(fw.require("drop_acl_deny")?, denied, "{fw:?}");
    let vip = c.sent_where(|e| e.backends.is_some() && e.drop.is_none());
    assert!(vip > 0);
    assert_eq!(fw.require("lb_balanced")?, vip, "{fw:?}");
    assert_eq!(fw.require("accounting_packets")?, k.received, "{fw:?}");
    // Malformed frames: each dropped under its reason; the unsigned STOPs as ctl_rejected.
    let got = fw.drops_by_reason();
    for (reason, n) in &injected {
        if *reason == "acl_deny" || *reason == "ctl_rejected" {
            continue;
        }
        assert_eq!(got.get(*reason).copied(), Some(*n), "drop_{reason}: firmware {fw:?}");
    }
    assert_eq!(fw.require("drop_ctl_rejected")?, 2, "{fw:?}");
    assert_eq!(fw.require("drops")?, denied + bad + 2, "{fw:?}");
    assert_eq!(fw.require("p0_tx")? + fw.require("p1_tx")?, k.received, "{fw:?}");
    // Two Metronome workers shared the lane: both won rounds, and every frame was drained
    // by exactly one of them.
    assert_eq!((fw.require("workers")?, fw.require("lanes")?), (2, 1), "{fw:?}");
    let mut packets = 0;
    for i in 0..2 {
        assert!(fw.require(&format!("core{i}_wins"))? > 0, "worker {i} never won a round: {fw:?}");
        packets += fw.require(&format!("core{i}_packets"))?;
    }
    let rx = fw.require("p0_rx")? + fw.require("p1_rx")?;
    assert_eq!(packets, rx, "every frame drained by exactly one worker: {fw:?}");
    assert_eq!(rx, FRAMES + bad + 2 + fw.require("ctl")?, "{fw:?}");
    // The console holds machine lines only; the human log went out as defmt over
    // semihosting, decoded from the ELF.
    let com1 = rig.qemu.com1();
    let human: Vec<&String> = com1.iter().filter(|l| !l.is_empty() && !l.starts_with('@')).collect();
    assert!(human.is_empty(), "non-machine lines on the console: {human:#?}");
    let elf = cadence_tests::aarch64::firmware_image()?.with_extension("");
    let d = cadence_harness::defmt::decode_file(&elf, &rig.out_dir.join("com2.defmt"))?;
    assert!(d.lines.iter().any(|l| l.contains("forward: 2 workers on 1 lanes")), "{:#?}", d.lines);
    eprintln!("aarch64: ready after {boot_s:.1} s, whole run {total_s:.1} s");
    Ok(())
}

#[test]
fn igb_forwards_on_aarch64() -> Result<()> {
    let _one = serial();
    const N: u64 = 2000;
    let opts = BootOptions::default().set("stats_ms", 0);
    let mut rig = start_firmware("aarch64_igb", 8, opts, |c| {
        c.nic_model = cadence_harness::rig::NicModel::Igb;
        c.chain_text = None;
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    assert!(rig.report.nics.iter().all(|n| n.kind == "igb"), "{:?}", rig.report.nics);
    cadence_tests::send_paced(&mut rig, N, RATE, |i| ((i % 8) as u16, 60 + (i * 149 % 1455) as usize))?;
    rig.drain(Duration::from_secs(5), Duration::from_secs(60), &mut |_| {});
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!((k.sent, k.received), (N, N));
    assert_eq!(fw.require("p0_tx")? + fw.require("p1_tx")?, N, "{fw:?}");
    Ok(())
}

#[test]
fn a_bad_boot_option_exits_35_on_aarch64() -> Result<()> {
    let _one = serial();
    let mut rig = start_firmware("aarch64_bad_option", 1, BootOptions::default().set("lanes", "many"), |_| {})?;
    let exit = rig.qemu.wait(BOOT_TIMEOUT)?;
    rig.pump(Duration::from_millis(200));
    expect_status(&rig, exit, protocol::EXIT_BAD_CONFIG)?;
    assert!(
        rig.report.errors.iter().any(|l| l.starts_with("error: boot option 'lanes'")),
        "{}",
        rig.qemu.diagnostics()
    );
    Ok(())
}

/// `stall.rs`'s first case on aarch64: worker 1 hangs inside its round holding a lane
/// (`stall=1:300:round`); worker 0 reports it, the image stops its core for good with a
/// Group 0 SGI taken as FIQ (the x86 image's NMI), and worker 0 takes the lane over and
/// serves all four. Every frame comes back but the hung batch's (lost and counted as
/// `stranded`); the run then fails (37) because a worker did not park.
#[test]
fn a_hung_worker_is_stopped_by_fiq_and_its_lane_taken_over_on_aarch64() -> Result<()> {
    let _one = serial();
    const LANES: u64 = 4;
    const STALL_FLOWS: u16 = 32;
    let opts = BootOptions::default()
        .set("stats_ms", 0)
        .set("workers", 2)
        .set("lanes", LANES)
        .set("qsize", 1024)
        .set("pool", 4096)
        .set("stall", "1:300:round")
        .set("stall_ms", 300);
    let mut rig = start_firmware("aarch64_stall", STALL_FLOWS, opts, |c| {
        c.nic_model = cadence_harness::rig::NicModel::Igb;
        c.smp = 2;
        c.chain_text = None;
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let pick = |i: u64| ((i % u64::from(STALL_FLOWS)) as u16, 60 + (i * 131 % 700) as usize);
    let mut sent = 0u64;
    let deadline = Instant::now() + Duration::from_secs(120);
    while !rig.qemu.com1().iter().any(|l| l.starts_with("@fault kind=takeover")) {
        anyhow::ensure!(Instant::now() < deadline, "no take-over within 120 s\n{}", rig.qemu.diagnostics());
        cadence_tests::send_paced(&mut rig, 50, 400, |i| pick(sent + i))?;
        sent += 50;
    }
    cadence_tests::send_paced(&mut rig, 800, 400, |i| pick(sent + i))?;
    sent += 800;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    let exit = rig.stop(cadence_tests::STOP_TIMEOUT, &mut |_| {})?;
    expect_status(&rig, exit, protocol::EXIT_RUNTIME_FAILURE)?;
    let com1 = rig.qemu.com1();
    let stall = com1.iter().find(|l| l.starts_with("@fault kind=stall")).cloned().unwrap_or_default();
    assert!(stall.starts_with("@fault kind=stall core=1 ") && stall.contains("seen_by=0"), "{com1:#?}");
    assert!(com1.iter().any(|l| l.starts_with("@fault kind=takeover core=1 lane=")), "{com1:#?}");
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
    let per_lane: Vec<u64> = (0..LANES).map(|l| fw.require(&format!("lane{l}_packets"))).collect::<Result<_>>()?;
    assert!(per_lane.iter().all(|&n| n > 0), "{per_lane:?}");
    Ok(())
}

/// `stall.rs`'s second case on aarch64: the lone worker hangs between rounds (`workers=1`
/// on two cores); only the watchdog, on the spare core's job mailbox, sees it, and since
/// `max_s` would run in the hung worker's loop, the watchdog ends the run itself (37, with
/// the reason and `@summary`).
#[test]
fn a_lone_hung_worker_is_seen_by_the_watchdog_core_on_aarch64() -> Result<()> {
    let _one = serial();
    let opts = BootOptions::default()
        .set("max_s", 3)
        .set("stats_ms", 0)
        .set("workers", 1)
        .set("stall", "0:300")
        .set("stall_ms", 300);
    let mut rig = start_firmware("aarch64_stall_lone", 4, opts, |c| {
        c.smp = 2;
        c.chain_text = None;
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let ready = rig.qemu.com1().into_iter().find(|l| l.starts_with("@ready")).unwrap_or_default();
    assert!(ready.contains(" watchdog=core "), "{ready}");
    // Nobody sends STOP: max_s passes, worker 0 cannot act on it, the watchdog does.
    let exit = rig.qemu.wait(Duration::from_secs(120))?;
    rig.pump(Duration::from_millis(200));
    expect_status(&rig, exit, protocol::EXIT_RUNTIME_FAILURE)?;
    let com1 = rig.qemu.com1();
    let fault = com1.iter().find(|l| l.starts_with("@fault ")).cloned().unwrap_or_default();
    assert!(fault.starts_with("@fault kind=stall core=0 ") && fault.ends_with("seen_by=watchdog"), "{com1:#?}");
    assert!(
        com1.iter().any(|l| l.starts_with("error: watchdog: the run did not wind down") && l.contains("after max_s")),
        "{com1:#?}"
    );
    let fw = rig.report.summary.clone().expect("@summary");
    assert_eq!(fw.require("stalls")?, 1, "{fw:?}");
    Ok(())
}
