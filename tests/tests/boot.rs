//! `mode=boot`: the image prints its banner and one `@nic` line per NIC, then exits 33.

use anyhow::Result;
use cadence_harness::protocol::{BootOptions, EXIT_SUCCESS, TSC_SOURCES};
use cadence_harness::traffic::Macs;
use cadence_tests::{boot_to_exit, expect_status, image};

#[test]
fn boot_mode_reports_banner_and_nics() -> Result<()> {
    let (exit, rig) = boot_to_exit("boot", BootOptions::default().set("mode", "boot"))?;
    expect_status(&rig, exit, EXIT_SUCCESS)?;
    let diag = || rig.qemu.diagnostics();
    let b = rig.report.banner.as_ref().ok_or_else(|| anyhow::anyhow!("no @banner\n{}", diag()))?;
    assert!(b.tsc_hz > 0, "tsc_hz = 0");
    assert!(TSC_SOURCES.contains(&b.tsc_source.as_str()), "tsc_source {}", b.tsc_source);
    assert!(b.tsc_check == "none" || TSC_SOURCES.contains(&b.tsc_check.as_str()), "tsc_check {}", b.tsc_check);
    assert!(b.cores >= 1);
    assert_eq!(b.nics, 2);
    assert_eq!(rig.report.nics.len(), 2, "{}", diag());
    for (i, n) in rig.report.nics.iter().enumerate() {
        assert_eq!(n.index, i as u64);
        assert_eq!(n.kind, "virtio-net");
        assert_eq!(n.mac, Macs::DEFAULT.nic[i], "NIC {i} reports another MAC than QEMU was given");
        assert!(n.rxq >= 1 && n.txq >= 1 && n.qsize > 0);
    }
    assert!(rig.report.errors.is_empty(), "{:?}", rig.report.errors);
    // COM2 carries defmt frames that decode with the exact ELF that booted (built with
    // DEFMT_LOG=info, so the boot logs something).
    let d = cadence_harness::defmt::decode_file(&image()?, &rig.out_dir.join("com2.defmt"))?;
    assert_eq!(d.malformed, 0, "malformed defmt frames; decoded: {:#?}", d.lines);
    assert!(!d.lines.is_empty(), "COM2 had no defmt frames (DEFMT_LOG unset when building?)");
    Ok(())
}
