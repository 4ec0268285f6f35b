//! The aarch64 image on QEMU `virt` (GICv3, cortex-a72, 2 cores, 256 MiB): it boots, says
//! what it found and exits with the success status through semihosting. Nothing here
//! asserts timing (TCG).

use anyhow::{Result, bail};
use cadence_tests::aarch64::boot;

#[test]
fn aarch64_image_boots_on_qemu_virt_and_exits_with_success() -> Result<()> {
    let b = boot(2, &[])?;
    if b.status != Some(33) {
        bail!("expected exit status 33 (semihosting SYS_EXIT_EXTENDED, success)\n{}", b.diagnostics());
    }
    assert!(b.lines.iter().any(|l| l == "Cadence aarch64 boot check"), "no banner\n{}", b.diagnostics());
    assert_eq!(b.field("@boot", "el")?, "1", "QEMU virt without virtualization=on enters at EL1");
    Ok(())
}
