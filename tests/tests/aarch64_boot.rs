//! The aarch64 image on QEMU `virt` (GICv3, cortex-a72, 2 cores, 256 MiB): it boots, reads
//! the device tree, says what it found and exits with the success status through
//! semihosting; a device tree without a PCIe host is refused with an `error:` line and status 35.
//! Nothing here asserts timing (TCG).

use anyhow::{Result, bail};
use cadence_tests::aarch64::boot;

#[test]
fn aarch64_image_boots_on_qemu_virt_and_reads_the_device_tree() -> Result<()> {
    let b = boot(2, &[])?;
    if b.status != Some(33) {
        bail!("expected exit status 33 (semihosting SYS_EXIT_EXTENDED, success)\n{}", b.diagnostics());
    }
    assert!(b.lines.iter().any(|l| l == "Cadence aarch64 boot check"), "no banner\n{}", b.diagnostics());
    assert_eq!(b.field("@boot", "el")?, "1", "QEMU virt without virtualization=on enters at EL1");
    // What QEMU's virt board is (QEMU 10, -m 256M -smp 2); the image read each from the tree.
    for (k, v) in [
        ("mem", "0x40000000+0x10000000"),
        ("uart", "0x9000000"),
        ("gicd", "0x8000000"),
        ("gicr", "0x80a0000"),
        ("psci", "hvc"),
        ("ecam", "0x4010000000+0x10000000"),
        ("buses", "0-255"),
        ("cpus", "2"),
    ] {
        assert_eq!(b.field("@dt", k)?, v, "@dt {k}\n{}", b.diagnostics());
    }
    Ok(())
}

#[test]
fn aarch64_image_refuses_a_device_tree_without_pcie() -> Result<()> {
    // (Not the tree without PSCI: QEMU adds its own PSCI node to a `-dtb` it loads,
    // hw/arm/boot.c fdt_add_psci_node; dt.rs's unit tests cover that case.)
    let dtb = concat!(env!("CARGO_MANIFEST_DIR"), "/../platform-aarch64/tests/fixtures/virt-no-pcie.dtb");
    let b = boot(2, &["-dtb", dtb])?;
    if b.status != Some(35) {
        bail!("expected exit status 35 (configuration error)\n{}", b.diagnostics());
    }
    assert!(b.lines.iter().any(|l| l.starts_with("error: ") && l.contains("PCIe")), "{}", b.diagnostics());
    Ok(())
}
