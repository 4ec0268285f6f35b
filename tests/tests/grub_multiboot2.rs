//! The image boots through GRUB's multiboot2 loader (as on a BIOS server), not only through
//! QEMU's PVH `-kernel` path: a GRUB rescue ISO with `multiboot2 /boot/cadence mode=boot`
//! must reach the banner, hand over the command line, bring every core up, and exit 33.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use cadence_tests::{BOOT_TIMEOUT, image, out_dir};

#[test]
fn boots_through_grub_multiboot2() -> Result<()> {
    let img = image()?;
    xtask::provision::require_grub_tools()?;
    let dir = out_dir("grub_multiboot2");
    let root = dir.join("iso");
    std::fs::create_dir_all(root.join("boot/grub"))?;
    std::fs::copy(&img, root.join("boot/cadence"))?;
    std::fs::write(
        root.join("boot/grub/grub.cfg"),
        "set timeout=0\nset default=0\nmenuentry \"cadence\" {\n    multiboot2 /boot/cadence mode=boot stats_ms=0\n    boot\n}\n",
    )?;
    let iso = dir.join("cadence.iso");
    let out = Command::new("grub-mkrescue").arg("-o").arg(&iso).arg(&root).output().context("running grub-mkrescue")?;
    ensure!(out.status.success(), "grub-mkrescue failed: {}", String::from_utf8_lossy(&out.stderr));

    let com1 = dir.join("com1.log");
    let mut qemu = Command::new(xtask::provision::QEMU)
        .args(["-machine", "q35", "-cpu", "max", "-smp", "2", "-m", "256M", "-display", "none", "-monitor", "none"])
        .args(["-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04", "-boot", "d"])
        .arg("-serial")
        .arg(format!("file:{}", com1.display()))
        .args(["-serial", "null", "-cdrom"])
        .arg(&iso)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting QEMU")?;
    // Hang guard only: nothing is asserted about time.
    let deadline = Instant::now() + BOOT_TIMEOUT;
    let status = loop {
        if let Some(s) = qemu.try_wait()? {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = qemu.kill();
            bail!("QEMU did not exit within {BOOT_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&com1).unwrap_or_default();
    ensure!(status.code() == Some(33), "QEMU exit {status} (want 33); COM1:\n{text}");
    ensure!(text.contains("(Multiboot2 boot)"), "not entered through multiboot2; COM1:\n{text}");
    ensure!(text.contains("mode: Boot"), "the command line did not reach the image; COM1:\n{text}");
    ensure!(text.lines().any(|l| l.starts_with("@banner ")), "no @banner; COM1:\n{text}");
    ensure!(text.contains("@smp cores=2 online=2"), "the APs did not come up under GRUB; COM1:\n{text}");
    Ok(())
}
