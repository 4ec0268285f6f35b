//! Multi-core bring-up in `mode=boot`: every core of the MADT comes online (`@smp`),
//! prints its `@cpu` line, and its deadline sleeper's timer fired. Only that the timer
//! fires is asserted, never how precisely (QEMU TCG timing is meaningless). The xAPIC boot
//! also carries three NICs (issue 27: more than two ports): the image brings all three up,
//! port 0 to 2 in PCI order, without a `nics=`.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use cadence_harness::protocol::Mac;
use cadence_harness::protocol::{BootOptions, EXIT_SUCCESS, MachineLine};
use cadence_harness::qemu::{DgramNic, QemuConfig, boot_and_wait, free_udp_port};
use cadence_harness::rig::{Rig, RigConfig};
use cadence_tests::{BOOT_TIMEOUT, MAX_S, expect_status, image, out_dir};

/// The `@cpu` and `@smp` lines of a run.
fn machine_lines(com1: &[String], kind: &str) -> Result<Vec<MachineLine>> {
    let mut out = Vec::new();
    for l in com1 {
        if let Some(m) = MachineLine::parse(l) {
            let m = m?;
            if m.kind == kind {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// Checks `@smp cores=n online=n apic=<apic>` and one `@cpu` line per core with
/// `online=1`, 5 sleeps and at least one timer interrupt.
fn check_cores(com1: &[String], n: u64, apic: &str) -> Result<()> {
    let all = || com1.join("\n");
    let smp = machine_lines(com1, "smp")?;
    let [smp] = smp.as_slice() else { bail!("expected one @smp line, got {}\n{}", smp.len(), all()) };
    assert_eq!((smp.u64("cores")?, smp.u64("online")?), (n, n), "{}", all());
    assert_eq!(smp.str("apic")?, apic, "{}", all());
    assert!(["oneshot", "tsc-deadline"].contains(&smp.str("timer")?), "{}", all());
    let cpus = machine_lines(com1, "cpu")?;
    assert_eq!(cpus.len() as u64, n, "one @cpu line per core\n{}", all());
    let mut seen = BTreeSet::new();
    for c in &cpus {
        let index = c.u64("index")?;
        assert!(seen.insert(index), "core {index} reported twice\n{}", all());
        assert_eq!(c.u64("online")?, 1, "core {index} not online\n{}", all());
        assert_eq!(c.u64("sleeps")?, 5, "core {index}\n{}", all());
        assert!(c.u64("fired")? >= 1, "core {index}: its deadline timer never fired\n{}", all());
        assert_eq!(c.u64("early")?, 0, "core {index}: a halt-mode sleep returned before its deadline\n{}", all());
    }
    assert_eq!(seen, (0..n).collect(), "core indices\n{}", all());
    Ok(())
}

#[test]
fn four_cores_come_up_and_their_deadline_timers_fire() -> Result<()> {
    let mut cfg = RigConfig::new(image()?, out_dir("smp4"), 1);
    cfg.smp = 4;
    cfg.boot = BootOptions::default().set("max_s", MAX_S).set("mode", "boot");
    let mut rig = Rig::start(&cfg)?;
    let exit = rig.qemu.wait(BOOT_TIMEOUT)?;
    rig.pump(Duration::from_millis(200));
    if exit.timed_out {
        bail!("QEMU did not exit within {BOOT_TIMEOUT:?}\n{}", rig.qemu.diagnostics());
    }
    expect_status(&rig, exit, EXIT_SUCCESS)?;
    assert!(rig.report.errors.is_empty(), "{:?}", rig.report.errors);
    let banner = rig.report.banner.as_ref().ok_or_else(|| anyhow!("no @banner\n{}", rig.qemu.diagnostics()))?;
    assert_eq!(banner.cores, 4);
    check_cores(&rig.qemu.com1(), 4, "x2apic")
}

#[test]
fn xapic_fallback_brings_up_cores_without_x2apic() -> Result<()> {
    let dir = out_dir("smp_xapic");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut nics = Vec::new();
    for i in 0..3u8 {
        let nic = DgramNic {
            mac: Mac([0x52, 0x54, 0, 0xca, 0xde, 0x20 + i]),
            qemu_port: free_udp_port()?,
            host_port: free_udp_port()?,
        };
        nics.push(nic.into());
    }
    let cfg = QemuConfig {
        image: image()?,
        append: BootOptions::default().set("max_s", MAX_S).set("mode", "boot"),
        nics,
        com2: dir.join("com2.defmt"),
        smp: 2,
        kvm: None,
        // A later -cpu overrides the launcher's `-cpu max`.
        extra_args: vec!["-cpu".into(), "max,-x2apic".into()],
        cmdline_file: None,
        arch: cadence_harness::qemu::Arch::X86_64,
    };
    let (exit, com1, stderr) = boot_and_wait(&cfg, BOOT_TIMEOUT)?;
    assert_eq!(exit.status, Some(EXIT_SUCCESS), "COM1:\n{}\nstderr:\n{stderr}", com1.join("\n"));
    // Three NICs, each up as its own port, with the MAC QEMU gave it.
    let nic_lines = machine_lines(&com1, "nic")?;
    assert_eq!(nic_lines.len(), 3, "{}", com1.join("\n"));
    for (i, l) in nic_lines.iter().enumerate() {
        let mac = format!("52:54:00:ca:de:{:02x}", 0x20 + i);
        assert!(l.str("mac").is_ok_and(|m| m.eq_ignore_ascii_case(&mac)), "port {i}: {l:?}");
        assert_eq!(l.u64("index")?, i as u64, "{l:?}");
    }
    check_cores(&com1, 2, "xapic")
}
