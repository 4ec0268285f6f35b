//! Shared helpers for the host integration tests.
//!
//! The QEMU end-to-end tests (`tests/boot.rs`, `tests/forward_10k.rs`,
//! `tests/malformed.rs`, `tests/bad_cmdline.rs`) build the image once per test binary
//! with a nested cargo call and boot it through `xtask`'s rig. They never skip: without
//! QEMU ≥ 8.0 they fail and say to run `cargo xtask test`, which installs it. Timeouts
//! here are hang guards only; nothing asserts on time.

pub mod aarch64;
pub mod grub;
pub mod igb_model;
pub mod ixgbe_model;
pub mod model_host;
pub mod model_rig;
pub mod xl710_model;

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow, bail};
use cadence_build::image::{self, Profile};
use cadence_harness::protocol::{self, BootOptions};
use cadence_harness::qemu::Exit;
use cadence_harness::rig::{Rig, RigConfig};
use cadence_harness::traffic::Pacer;

/// Hang guard for a boot that should end on its own.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(90);
/// Hang guard for QEMU to exit after STOP.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// Checks QEMU and builds the image (once per test binary); returns its path.
pub fn image() -> Result<PathBuf> {
    static IMAGE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            cadence_build::provision::require_qemu().map_err(|e| format!("{e:#}"))?;
            image::build(Profile::Release).map_err(|e| format!("{e:#}"))
        })
        .clone()
        .map_err(|e| anyhow!("{e}"))
}

/// Artifacts of test `name`: `target/xtask/tests/<name>-<pid>/`.
pub fn out_dir(name: &str) -> PathBuf {
    image::target_dir().join("xtask").join("tests").join(format!("{name}-{}", std::process::id()))
}

/// In-guest hang guard (`max_s`): the firmware gives up (status 37) after this long.
pub const MAX_S: u64 = 300;

/// Starts the rig for test `name` with `flows` standard flows and extra boot options
/// (on top of `max_s=`[`MAX_S`]).
pub fn start(name: &str, flows: u16, boot: BootOptions) -> Result<Rig> {
    start_with(name, flows, boot, |_| {})
}

/// [`start`], with `tweak` adjusting the rig's configuration (cores, backend, NIC model)
/// before QEMU starts.
pub fn start_with(name: &str, flows: u16, boot: BootOptions, tweak: impl FnOnce(&mut RigConfig)) -> Result<Rig> {
    let mut cfg = RigConfig::new(image()?, out_dir(name), flows);
    let mut all = BootOptions::default().set("max_s", MAX_S);
    for (k, v) in &boot.0 {
        all = all.set(k, v);
    }
    cfg.boot = all;
    tweak(&mut cfg);
    Rig::start(&cfg)
}

/// Boots with `boot` and waits (hang guard [`BOOT_TIMEOUT`]) for QEMU to exit on its own.
pub fn boot_to_exit(name: &str, boot: BootOptions) -> Result<(Exit, Rig)> {
    let mut rig = start(name, 1, boot)?;
    let exit = rig.qemu.wait(BOOT_TIMEOUT)?;
    rig.pump(Duration::from_millis(200));
    if exit.timed_out {
        bail!("QEMU did not exit within {BOOT_TIMEOUT:?}\n{}", rig.qemu.diagnostics());
    }
    Ok((exit, rig))
}

/// Fails unless QEMU exited with `want`, showing COM1 and stderr.
pub fn expect_status(rig: &Rig, exit: Exit, want: i32) -> Result<()> {
    if exit.status != Some(want) {
        bail!(
            "expected QEMU exit status {want} ({}), got {:?}\n{}",
            protocol::describe_exit(Some(want)),
            exit.status,
            rig.qemu.diagnostics()
        );
    }
    Ok(())
}

/// Sends STOP and checks the firmware exits 33 with a `@summary`; checks conservation
/// (every frame received — or originated, as IPFIX exports are — was sent, dropped by
/// reason, or consumed as control), that the
/// pools are back at their resting value of `@ready`, and that no ring refill found its pool
/// empty (the tests run below capacity); returns the counters.
pub fn stop_ok(rig: &mut Rig) -> Result<protocol::Counters> {
    let exit = rig.stop(STOP_TIMEOUT, &mut |_| {})?;
    expect_status(rig, exit, protocol::EXIT_SUCCESS)?;
    let fw =
        rig.report.summary.clone().ok_or_else(|| anyhow!("no @summary line on COM1\n{}", rig.qemu.diagnostics()))?;
    check_conservation(rig, &fw)?;
    Ok(fw)
}

/// The end-of-run invariants [`stop_ok`] checks, for tests that stop the run themselves.
pub fn check_conservation(rig: &Rig, fw: &protocol::Counters) -> Result<()> {
    let rx = fw.require("p0_rx")? + fw.require("p1_rx")?;
    let tx = fw.require("p0_tx")? + fw.require("p1_tx")?;
    let (drops, ctl, generated) = (fw.require("drops")?, fw.require("ctl")?, fw.require("generated")?);
    if rx + generated != tx + drops + ctl {
        bail!("conservation: rx {rx} + generated {generated} != tx {tx} + drops {drops} + ctl {ctl}: {fw:?}");
    }
    let resting = rig.report.resting_pool.ok_or_else(|| anyhow!("no pool_in_use on @ready"))?;
    if fw.require("pool_in_use")? != resting {
        bail!(
            "pool_in_use {} at the end, {resting} at rest (@ready): a buffer leaked: {fw:?}",
            fw.require("pool_in_use")?
        );
    }
    let no_buf = fw.require("p0_no_buf")? + fw.require("p1_no_buf")?;
    if no_buf != 0 {
        bail!("{no_buf} ring refills found the pool empty below capacity: {fw:?}");
    }
    Ok(())
}

/// Sends `frames` generated frames at `rate` frames/s (token bucket), pumping COM1
/// meanwhile; frame `i` belongs to flow `pick(i).0` and is `pick(i).1` bytes long (raised
/// to the flow's minimum).
pub fn send_paced(rig: &mut Rig, frames: u64, rate: u64, mut pick: impl FnMut(u64) -> (u16, usize)) -> Result<()> {
    let mut pacer = Pacer::new(rate, Instant::now());
    let mut sent = 0u64;
    while sent < frames {
        for _ in 0..pacer.take(Instant::now()) {
            if sent == frames {
                break;
            }
            let (flow, len) = pick(sent);
            rig.send_flow(flow, len)?;
            sent += 1;
        }
        rig.pump(pacer.wait().min(Duration::from_millis(2)));
    }
    Ok(())
}

/// Boots the image with `chain_text` on two virtio-net NICs backed by tap interfaces (no
/// stats lines) for a test that moves the taps into hosts' namespaces; returns the rig, once
/// the image is ready, and the two taps' names (port 0, port 1).
pub fn start_on_taps(name: &str, chain_text: String) -> Result<(Rig, [String; 2])> {
    start_on_more_taps(name, chain_text, 0)
}

/// [`start_on_taps`] with `extra` more tap NICs (ports 2, 3, …; `Rig::extra_tap_ifnames`).
pub fn start_on_more_taps(name: &str, chain_text: String, extra: usize) -> Result<(Rig, [String; 2])> {
    let mut rig = start_with(name, 1, BootOptions::default().set("stats_ms", 0), |cfg| {
        cfg.backend = cadence_harness::rig::Backend::Tap { queues: 1 };
        cfg.chain_text = Some(chain_text);
        cfg.extra_taps = extra;
    })?;
    rig.wait_ready(BOOT_TIMEOUT, &mut |_| {})?;
    let taps: [String; 2] =
        rig.tap_ifnames().try_into().map_err(|t: Vec<String>| anyhow!("two tap interfaces expected, got {t:?}"))?;
    Ok((rig, taps))
}

/// Writes a real-host test's `@summary` to `out/summary.txt` and fails with every check in
/// `failures` (and the summary and where the artifacts are) if there is one.
pub fn report(out: &std::path::Path, summary: &str, failures: &[String]) -> Result<()> {
    std::fs::write(out.join("summary.txt"), summary)?;
    if !failures.is_empty() {
        bail!("{}\nsummary: {summary}\n(artifacts in {})", failures.join("\n"), out.display());
    }
    Ok(())
}

/// `aa:bb:cc:dd:ee:ff`, as `ip` takes a MAC.
pub fn mac_text(m: [u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// Python, in a namespace: sends one raw Ethernet frame (hex, `argv[2]`) out of interface
/// `argv[1]`.
pub const SEND_FRAME: &str = "import socket,sys\ns=socket.socket(socket.AF_PACKET,socket.SOCK_RAW)\n\
                              s.bind((sys.argv[1],0))\ns.send(bytes.fromhex(sys.argv[2]))\n";

/// Ends an image run whose tap NICs were moved into network namespaces (the rig's own
/// sockets on them no longer see anything): a STOP signed for this boot, sent from interface
/// `ifname` in namespace `ns`; then waits for QEMU to exit ([`STOP_TIMEOUT`], then kills it),
/// requires the success status and returns the `@summary` counters.
pub fn stop_from_netns(rig: &mut Rig, ns: &str, ifname: &str) -> Result<protocol::Counters> {
    let stop = rig.control_frame(protocol::Control::Stop)?;
    let hex: String = stop.iter().map(|b| format!("{b:02x}")).collect();
    cadence_harness::hosts::run(
        std::process::Command::new(cadence_harness::netns::IP)
            .args(["netns", "exec", ns, "python3", "-c", SEND_FRAME, ifname, &hex]),
    )?;
    let deadline = Instant::now() + STOP_TIMEOUT;
    let exit = loop {
        rig.pump(Duration::from_millis(50));
        if let Some(e) = rig.qemu.try_exit()? {
            break e;
        }
        if Instant::now() >= deadline {
            break rig.qemu.kill()?;
        }
    };
    rig.pump(Duration::from_millis(100));
    rig.shutdown_receivers();
    expect_status(rig, exit, protocol::EXIT_SUCCESS)?;
    rig.report.summary.clone().ok_or_else(|| anyhow!("no @summary on COM1\n{}", rig.qemu.diagnostics()))
}
