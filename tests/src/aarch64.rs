//! Booting the aarch64 images in `qemu-system-aarch64 -M virt,gic-version=3 -cpu
//! cortex-a72`: the platform's boot check ([`boot`]: console and exit status) and the
//! firmware under the x86 tests' rig ([`start_firmware`]: the generator, the
//! frame-by-frame checker, control frames, the same machine lines).
//!
//! The image exits through semihosting (`SYS_EXIT_EXTENDED`) with the x86 image's statuses
//! (33 success, 35 configuration, 37 runtime, 39 exception or panic); QEMU's own failures
//! exit 1 and a hang is killed at the guard, so only 33 is a pass. Without
//! `qemu-system-aarch64` the tests fail and say how to get it; they never skip.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use cadence_build::aarch64;
use cadence_build::image::Profile;
use cadence_build::provision::QEMU_AARCH64;

/// Hang guard for one boot (a boot takes about a second under TCG).
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// Checks QEMU and builds the Arm image (once per test binary); returns its path.
pub fn image() -> Result<PathBuf> {
    static IMAGE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            cadence_build::provision::require_qemu_aarch64().map_err(|e| format!("{e:#}"))?;
            aarch64::build(Profile::Release).map_err(|e| format!("{e:#}"))
        })
        .clone()
        .map_err(|e| anyhow!("{e}"))
}

/// Checks QEMU and builds the aarch64 firmware (once per test binary); returns the flat
/// image's path (the ELF, for defmt, is beside it without `.img`).
pub fn firmware_image() -> Result<PathBuf> {
    static IMAGE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    IMAGE
        .get_or_init(|| {
            cadence_build::provision::require_qemu_aarch64().map_err(|e| format!("{e:#}"))?;
            aarch64::build_firmware(Profile::Release).map_err(|e| format!("{e:#}"))
        })
        .clone()
        .map_err(|e| anyhow!("{e}"))
}

/// Starts the rig with the aarch64 firmware for test `name` (`flows` standard flows, `boot`
/// on top of `max_s=`[`crate::MAX_S`]); `tweak` adjusts the configuration (cores, chain)
/// before QEMU starts.
pub fn start_firmware(
    name: &str,
    flows: u16,
    boot: cadence_harness::protocol::BootOptions,
    tweak: impl FnOnce(&mut cadence_harness::rig::RigConfig),
) -> Result<cadence_harness::rig::Rig> {
    let mut cfg = cadence_harness::rig::RigConfig::new(firmware_image()?, crate::out_dir(name), flows);
    cfg.arch = cadence_harness::qemu::Arch::Aarch64;
    let mut all = cadence_harness::protocol::BootOptions::default().set("max_s", crate::MAX_S);
    for (k, v) in &boot.0 {
        all = all.set(k, v);
    }
    cfg.boot = all;
    tweak(&mut cfg);
    cadence_harness::rig::Rig::start(&cfg)
}

/// One boot's outcome.
#[derive(Debug)]
pub struct Boot {
    /// QEMU's exit status (`None`: killed at the hang guard or by a signal).
    pub status: Option<i32>,
    /// The console (PL011) lines.
    pub lines: Vec<String>,
    /// QEMU's standard error.
    pub stderr: String,
}

impl Boot {
    /// The console and stderr, for failure messages.
    pub fn diagnostics(&self) -> String {
        format!("status {:?}\n--- console ---\n{}\n--- stderr ---\n{}", self.status, self.lines.join("\n"), self.stderr)
    }

    /// The `key=value` fields of the first console line starting with `tag ` (`@dt`, …).
    pub fn fields(&self, tag: &str) -> Option<Vec<(String, String)>> {
        let line = self.lines.iter().find(|l| l.split_whitespace().next() == Some(tag))?;
        Some(
            line.split_whitespace()
                .skip(1)
                .filter_map(|w| w.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    /// Field `key` of the first `tag` line.
    pub fn field(&self, tag: &str, key: &str) -> Result<String> {
        let f = self.fields(tag).ok_or_else(|| anyhow!("no {tag} line\n{}", self.diagnostics()))?;
        f.into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .ok_or_else(|| anyhow!("{tag} has no {key}=\n{}", self.diagnostics()))
    }
}

/// Boots the image on `smp` cores with `extra` QEMU arguments; waits for QEMU to exit
/// (killing it at [`BOOT_TIMEOUT`]).
pub fn boot(smp: u32, extra: &[&str]) -> Result<Boot> {
    let img = image()?;
    let mut cmd = Command::new(QEMU_AARCH64);
    cmd.args(["-M", "virt,gic-version=3", "-cpu", "cortex-a72", "-m", "256M", "-nographic"])
        .args(["-smp", &smp.to_string()])
        .args(["-semihosting-config", "enable=on,target=native"])
        .arg("-kernel")
        .arg(&img)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    let mut out = child.stdout.take().context("QEMU's stdout")?;
    let mut err = child.stderr.take().context("QEMU's stderr")?;
    let out_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st.code();
        }
        if start.elapsed() > BOOT_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = out_t.join().map_err(|_| anyhow!("stdout reader panicked"))?;
    let err = err_t.join().map_err(|_| anyhow!("stderr reader panicked"))?;
    let lines = String::from_utf8_lossy(&out).lines().map(|l| l.trim_end_matches('\r').to_string()).collect();
    Ok(Boot { status, lines, stderr: String::from_utf8_lossy(&err).into_owned() })
}
