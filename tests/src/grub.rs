//! Booting the image through GRUB's multiboot2 loader, as on a server: a GRUB rescue ISO
//! (`grub-mkrescue`, which makes it bootable by BIOS and, with GRUB's EFI build installed,
//! by UEFI) booted by QEMU under SeaBIOS or under OVMF.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};

use crate::BOOT_TIMEOUT;

/// The firmware QEMU boots the ISO with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Firmware {
    /// SeaBIOS (QEMU's default): GRUB's i386-pc build.
    Bios,
    /// OVMF (UEFI): GRUB's x86_64-efi build.
    Uefi,
}

/// OVMF's code and variable-store templates (Debian `ovmf`).
pub const OVMF_CODE: &str = "/usr/share/OVMF/OVMF_CODE_4M.fd";
/// See [`OVMF_CODE`].
pub const OVMF_VARS: &str = "/usr/share/OVMF/OVMF_VARS_4M.fd";

/// Builds `dir/cadence.iso` with `image` as `/boot/cadence`, booted with `cmdline`, and
/// `module` (if any) as multiboot2 module 0 (`/boot/module`). Returns the ISO's path.
pub fn iso(dir: &Path, image: &Path, cmdline: &str, module: Option<&[u8]>) -> Result<PathBuf> {
    let root = dir.join("iso");
    std::fs::create_dir_all(root.join("boot/grub"))?;
    std::fs::copy(image, root.join("boot/cadence"))?;
    let mut entry = format!("    multiboot2 /boot/cadence {cmdline}\n");
    if let Some(m) = module {
        std::fs::write(root.join("boot/module"), m)?;
        entry.push_str("    module2 /boot/module\n");
    }
    std::fs::write(
        root.join("boot/grub/grub.cfg"),
        format!("set timeout=0\nset default=0\nmenuentry \"cadence\" {{\n{entry}    boot\n}}\n"),
    )?;
    let iso = dir.join("cadence.iso");
    let out = Command::new("grub-mkrescue").arg("-o").arg(&iso).arg(&root).output().context("running grub-mkrescue")?;
    ensure!(out.status.success(), "grub-mkrescue failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(iso)
}

/// Boots `iso` with two cores under `fw` and waits (hang guard) for QEMU to exit; returns
/// the exit status and COM1.
pub fn boot(dir: &Path, iso: &Path, fw: Firmware) -> Result<(Option<i32>, String)> {
    let com1 = dir.join("com1.log");
    let mut cmd = Command::new(cadence_build::provision::QEMU);
    cmd.args(["-machine", "q35", "-cpu", "max", "-smp", "2", "-m", "256M", "-display", "none", "-monitor", "none"])
        .args(["-no-reboot", "-device", "isa-debug-exit,iobase=0xf4,iosize=0x04"]);
    if fw == Firmware::Uefi {
        // OVMF writes its variable store: each boot gets its own copy of the template.
        let vars = dir.join("ovmf_vars.fd");
        std::fs::copy(OVMF_VARS, &vars).with_context(|| format!("copying {OVMF_VARS}"))?;
        cmd.arg("-drive")
            .arg(format!("if=pflash,format=raw,readonly=on,file={OVMF_CODE}"))
            .arg("-drive")
            .arg(format!("if=pflash,format=raw,file={}", vars.display()));
    } else {
        cmd.args(["-boot", "d"]);
    }
    let mut qemu = cmd
        .arg("-serial")
        .arg(format!("file:{}", com1.display()))
        .arg("-serial")
        .arg(format!("file:{}", dir.join("com2.defmt").display()))
        .arg("-cdrom")
        .arg(iso)
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
    Ok((status.code(), std::fs::read_to_string(&com1).unwrap_or_default()))
}
