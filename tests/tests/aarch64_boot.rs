//! The aarch64 image on QEMU `virt` (GICv3, cortex-a72, 2 cores, 256 MiB): it boots, reads
//! the device tree, turns the MMU on, reads the generic timer, sleeps to a deadline and
//! exits with the success status through semihosting; a device tree without a PCIe host
//! is refused with an `error:` line and status 35; a fault is reported with its syndrome
//! and status 39; both cores come up through PSCI and sleep on their own timers. Nothing here asserts timing precision (TCG).

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
    assert_eq!(b.field("@boot", "runs_at_el")?, "1");
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
        ("timer_intid", "27"),
    ] {
        assert_eq!(b.field("@dt", k)?, v, "@dt {k}\n{}", b.diagnostics());
    }
    // The MMU is on (the lines after it were printed through the map) with a heap.
    assert!(b.field("@mmu", "tables")?.parse::<u32>()? >= 2, "{}", b.diagnostics());
    // CNTFRQ_EL0 as QEMU sets it for cortex-a72 (62.5 MHz; 1 GHz only on newer models).
    let cntfrq: u64 = b.field("@timer", "cntfrq")?.parse()?;
    assert!(cntfrq > 0, "{}", b.diagnostics());
    assert_eq!(b.field("@timer", "hz")?.parse::<u64>()?, cntfrq, "no clock-frequency in virt's tree");
    // The deadline sleep returned at or after its deadline, woken by the timer (ISTATUS).
    let asked_ticks = b.field("@sleep", "asked_us")?.parse::<u64>()? * cntfrq / 1_000_000;
    assert!(b.field("@sleep", "slept_ticks")?.parse::<u64>()? >= asked_ticks, "{}", b.diagnostics());
    assert_eq!(b.field("@sleep", "returned")?, "1", "{}", b.diagnostics());
    assert_eq!(b.field("@sleep", "fired")?, "1", "the virtual timer's PPI did not end the WFI\n{}", b.diagnostics());
    // Both cores checked in (the second started by PSCI CPU_ON over HVC, as virt's tree
    // says), each slept to a deadline on its own timer and was woken by it.
    assert_eq!(b.field("@smp", "cores")?, "2", "{}", b.diagnostics());
    assert_eq!(b.field("@smp", "online")?, "2", "{}", b.diagnostics());
    let cpus: Vec<_> = b.lines.iter().filter(|l| l.starts_with("@cpu ")).collect();
    assert_eq!(cpus.len(), 2, "{}", b.diagnostics());
    for (i, l) in cpus.iter().enumerate() {
        for want in [format!("index={i} "), format!("mpidr={i:#x} "), "online=1".into(), "sleeps=1".into()] {
            assert!(l.contains(&want), "core {i}: {l} lacks {want}\n{}", b.diagnostics());
        }
        assert!(!l.ends_with("fired=0"), "core {i}: its timer never ended a sleep: {l}");
    }
    assert!(!b.lines.iter().any(|l| l.starts_with("error:")), "{}", b.diagnostics());
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

#[test]
fn aarch64_exception_is_reported_with_its_syndrome_and_status_39() -> Result<()> {
    let b = boot(1, &["-append", "fault=unmapped"])?;
    if b.status != Some(39) {
        bail!("expected exit status 39 (CPU exception)\n{}", b.diagnostics());
    }
    let line = b
        .lines
        .iter()
        .find(|l| l.starts_with("error: CPU exception: sync (EL1)"))
        .ok_or_else(|| anyhow::anyhow!("no exception report\n{}", b.diagnostics()))?;
    // A data abort at EL1 (EC 0x25) on the unmapped address 0x10.
    assert!(line.contains("EC 0x25") && line.contains("FAR_EL1=0x10"), "{line}");
    Ok(())
}

#[test]
fn aarch64_stack_overflow_hits_the_guard_page_and_is_reported_on_the_boot_core_and_a_secondary() -> Result<()> {
    for (cpus, fault, who) in [
        (1, "fault=stack", "the boot core ran past its 128 KiB stack"),
        (2, "fault=stack-secondary", "core 1 ran past its 64 KiB stack"),
    ] {
        let b = boot(cpus, &["-append", fault])?;
        if b.status != Some(39) {
            bail!("{fault}: expected exit status 39 (CPU exception)\n{}", b.diagnostics());
        }
        let line = b
            .lines
            .iter()
            .find(|l| l.starts_with("error: stack overflow: "))
            .ok_or_else(|| anyhow::anyhow!("{fault}: no stack overflow report\n{}", b.diagnostics()))?;
        assert!(line.contains(who), "{fault}: {line}");
        // Then the vectors' own report: a data abort at EL1 (EC 0x25) on the guard page.
        assert!(
            b.lines.iter().any(|l| l.starts_with("error: CPU exception: sync (EL1)") && l.contains("EC 0x25")),
            "{fault}\n{}",
            b.diagnostics()
        );
    }
    Ok(())
}

#[test]
fn aarch64_image_entered_at_el2_drops_to_el1_and_calls_psci_by_smc() -> Result<()> {
    // With virtualization=on QEMU enters at EL2 and its tree says PSCI goes by SMC.
    let b = boot(2, &["-M", "virtualization=on"])?;
    if b.status != Some(33) {
        bail!("expected exit status 33\n{}", b.diagnostics());
    }
    assert_eq!(b.field("@boot", "el")?, "2", "{}", b.diagnostics());
    assert_eq!(b.field("@boot", "runs_at_el")?, "1", "{}", b.diagnostics());
    assert_eq!(b.field("@dt", "psci")?, "smc", "{}", b.diagnostics());
    assert_eq!(b.field("@smp", "online")?, "2", "{}", b.diagnostics());
    Ok(())
}

#[test]
fn aarch64_image_enumerates_pcie_and_brings_up_virtio_net() -> Result<()> {
    let b = boot(
        1,
        &["-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0,disable-legacy=on,mac=52:54:00:12:34:56"],
    )?;
    if b.status != Some(33) {
        bail!("expected exit status 33\n{}", b.diagnostics());
    }
    // The host bridge and the NIC, found through ECAM; the NIC's BARs (the common/notify
    // capability BAR and MSI-X) assigned from the tree's 32-bit window.
    let pci: Vec<_> = b.lines.iter().filter(|l| l.starts_with("@pci ")).collect();
    assert!(pci.iter().any(|l| l.contains("id=1b36:0008")), "QEMU's host bridge\n{}", b.diagnostics());
    let nic = pci
        .iter()
        .find(|l| l.contains("id=1af4:1041"))
        .ok_or_else(|| anyhow::anyhow!("no virtio-net function\n{}", b.diagnostics()))?;
    assert!(!nic.ends_with("bars=0"), "{nic}");
    // The drivers crate's virtio-net bring-up ran to DRIVER_OK and read the MAC QEMU was given.
    assert_eq!(b.field("@nic", "kind")?, "virtio-net");
    assert_eq!(b.field("@nic", "mac")?, "52:54:00:12:34:56", "{}", b.diagnostics());
    assert_eq!(b.field("@pcisum", "nics")?, "1");
    assert!(!b.lines.iter().any(|l| l.starts_with("error:")), "{}", b.diagnostics());
    Ok(())
}
