//! The image boots through GRUB's multiboot2 loader (as on a server), not only through
//! QEMU's PVH `-kernel` path: a GRUB rescue ISO with `multiboot2 /boot/cadence mode=boot`
//! and a chain file as `module2` must reach the banner, hand over the command line and the
//! module, bring every core up, and exit 33 — under SeaBIOS (GRUB's BIOS build) and under
//! OVMF (GRUB's EFI build: UEFI firmware, ExitBootServices, then the same 32-bit entry).

use anyhow::{Result, ensure};
use cadence_tests::grub::{self, Firmware};
use cadence_tests::{image, out_dir};

fn boots_through_grub(name: &str, fw: Firmware) -> Result<()> {
    let img = image()?;
    cadence_build::provision::require_grub_tools()?;
    let dir = out_dir(name);
    let chain = b"version=1\nnf=acl\nacl.default=permit\n";
    let iso = grub::iso(&dir, &img, "mode=boot stats_ms=0", Some(chain))?;
    let (status, text) = grub::boot(&dir, &iso, fw)?;
    ensure!(status == Some(33), "QEMU exit {status:?} (want 33); COM1:\n{text}");
    // The human log (entry protocol, parsed configuration) is defmt on COM2.
    let log = cadence_harness::defmt::decode_file(&img, &dir.join("com2.defmt"))?.lines;
    ensure!(log.iter().any(|l| l.contains("(Multiboot2 boot)")), "not entered through multiboot2; COM2:\n{log:#?}");
    ensure!(log.iter().any(|l| l.contains("mode: Boot")), "the command line did not reach the image; COM2:\n{log:#?}");
    ensure!(text.lines().any(|l| l.starts_with("@banner ")), "no @banner; COM1:\n{text}");
    ensure!(
        text.lines().any(|l| l == "@chain nfs=acl source=module profile=none validate=l4"),
        "the module did not reach the image; COM1:\n{text}"
    );
    ensure!(text.contains("@smp cores=2 online=2"), "the APs did not come up under GRUB; COM1:\n{text}");
    Ok(())
}

#[test]
fn boots_through_grub_multiboot2_under_bios() -> Result<()> {
    boots_through_grub("grub_bios", Firmware::Bios)
}

#[test]
fn boots_through_grub_multiboot2_under_uefi() -> Result<()> {
    boots_through_grub("grub_uefi", Firmware::Uefi)
}
