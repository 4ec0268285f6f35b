//! Metronome in the image: three workers on two cores' worth of lanes, sharing two RSS
//! queue pairs per NIC (tap backends with `queues=2`, `mq=on,rss=on`; needs root, as CI
//! has), and the CPU it spends against busy polling under the same configuration.
//!
//! Timing precision is never asserted (QEMU TCG): the tests compare counts the firmware
//! keeps — frames, rounds won, busy and halted TSC cycles.

use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Result, bail};
use cadence_tests::{BOOT_TIMEOUT, send_paced, start_with, stop_ok};
use xtask::protocol::{BootOptions, Counters};
use xtask::rig::{Backend, Rig};

const WORKERS: u64 = 3;
const LANES: u64 = 2;
const FLOWS: u16 = 8;

/// One QEMU at a time: three vCPUs each, on a two-core machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn require_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        bail!("the tap backend needs root (CAP_NET_ADMIN): run the tests as root, as CI does");
    }
    Ok(())
}

fn boot(name: &str, sched: &str) -> Result<Rig> {
    boot_with(name, sched, "off")
}

fn boot_with(name: &str, sched: &str, mwait: &str) -> Result<Rig> {
    require_root()?;
    let opts = BootOptions::default()
        .set("stats_ms", 0)
        .set("workers", WORKERS)
        .set("lanes", LANES)
        .set("sched", sched)
        .set("mwait", mwait);
    let mut rig = start_with(name, FLOWS, opts, |cfg| {
        cfg.smp = WORKERS as u32;
        cfg.backend = Backend::Tap { queues: LANES as u16 };
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    Ok(rig)
}

/// Sends `frames` round robin over the flows at `rate` frames/s, then drains.
fn send(rig: &mut Rig, frames: u64, rate: u64) -> Result<()> {
    send_paced(rig, frames, rate, |i| ((i % u64::from(FLOWS)) as u16, 60 + (i * 97 % 600) as usize))?;
    rig.drain(Duration::from_secs(3), Duration::from_secs(60), &mut |_| {});
    Ok(())
}

/// Σ busy / Σ (busy + halted) over the workers.
fn busy_share(fw: &Counters) -> Result<f64> {
    let (mut busy, mut halted) = (0u64, 0u64);
    for i in 0..WORKERS {
        busy += fw.require(&format!("core{i}_busy_cycles"))?;
        halted += fw.require(&format!("core{i}_halted_cycles"))?;
    }
    Ok(busy as f64 / (busy + halted).max(1) as f64)
}

#[test]
fn three_workers_share_two_rss_lanes_without_loss() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const FRAMES: u64 = 2_000;
    let mut rig = boot("metronome_3w2l", "metronome")?;
    let nic = &rig.report.nics;
    assert!(nic.iter().all(|n| n.rxq == LANES), "both NICs up with {LANES} queue pairs: {nic:?}");
    send(&mut rig, FRAMES, 400)?;
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}\n{:#?}", k.failures(), rig.checker().examples);
    assert_eq!((k.sent, k.received), (FRAMES, FRAMES));
    assert_eq!(fw.require("drops")?, 0, "{fw:?}");
    assert_eq!(fw.require("workers")?, WORKERS);
    assert_eq!(fw.require("lanes")?, LANES);
    let mut packets = 0;
    for i in 0..WORKERS {
        assert!(fw.require(&format!("core{i}_wins"))? > 0, "worker {i} never won a round: {fw:?}");
        packets += fw.require(&format!("core{i}_packets"))?;
    }
    // RSS spread the flows: both lanes carried traffic (and the STOP frame is one more).
    for l in 0..LANES {
        assert!(fw.require(&format!("lane{l}_wins"))? > 0, "{fw:?}");
    }
    assert_eq!(packets, FRAMES + fw.require("ctl")?, "every frame drained by exactly one worker: {fw:?}");
    Ok(())
}

#[test]
fn metronome_spends_at_most_a_third_of_poll_modes_busy_cycles_at_low_load() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut shares = Vec::new();
    for sched in ["poll", "metronome"] {
        let mut rig = boot(&format!("metronome_share_{sched}"), sched)?;
        send(&mut rig, 300, 100)?;
        let fw = stop_ok(&mut rig)?;
        let k = rig.checker().classes();
        assert!(k.clean(), "{sched}: host saw {:?}: {k:?}", k.failures());
        shares.push(busy_share(&fw)?);
    }
    let (poll, metronome) = (shares[0], shares[1]);
    eprintln!("busy share: poll {poll:.3}, metronome {metronome:.3}");
    assert!(poll > 0.9, "poll mode never halts: busy share {poll:.3}");
    assert!(metronome <= poll / 3.0, "metronome busy share {metronome:.3} vs poll {poll:.3}");
    Ok(())
}

#[test]
fn monitor_mwait_sleeps_on_the_used_ring_and_lose_nothing() -> Result<()> {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    const FRAMES: u64 = 1_000;
    let mut rig = boot_with("metronome_mwait", "metronome", "on")?;
    let ready = rig.qemu.com1().iter().find(|l| l.starts_with("@ready")).cloned().unwrap_or_default();
    assert!(ready.contains("mwait=on"), "{ready}");
    send(&mut rig, FRAMES, 400)?;
    let fw = stop_ok(&mut rig)?;
    let k = rig.checker().classes();
    assert!(k.clean(), "host saw {:?}: {k:?}", k.failures());
    assert_eq!((k.sent, k.received), (FRAMES, FRAMES));
    assert_eq!(fw.require("drops")?, 0, "{fw:?}");
    // QEMU's `-cpu max` has MONITOR/MWAIT: primaries did wait on their used rings.
    let mwaits: u64 = (0..WORKERS).map(|i| fw.get(&format!("core{i}_mwait_sleeps"))).sum();
    assert!(mwaits > 0, "no sleep waited in MWAIT: {fw:?}");
    Ok(())
}
