//! `nics=` under QEMU: the NICs are taken in the order the option names them, and an
//! address without a NIC the image drives is a configuration error naming the option.

use anyhow::Result;
use cadence_harness::protocol::{BootOptions, EXIT_BAD_CONFIG, EXIT_SUCCESS};
use cadence_tests::{boot_to_exit, expect_status};

#[test]
fn nics_takes_the_named_functions_in_its_order() -> Result<()> {
    let (exit, rig) = boot_to_exit("nic_select_default", BootOptions::default().set("mode", "boot"))?;
    expect_status(&rig, exit, EXIT_SUCCESS)?;
    let first = rig.report.nics.clone();
    assert_eq!(first.len(), 2, "{first:?}");
    assert!(first.iter().all(|n| n.kind == "virtio-net" && n.qsize > 0), "{first:?}");
    // Swapped: port 0 is the function that was port 1.
    let swapped = format!("{},{}", first[1].pci, first[0].pci);
    let (exit, rig) =
        boot_to_exit("nic_select_swapped", BootOptions::default().set("mode", "boot").set("nics", &swapped))?;
    expect_status(&rig, exit, EXIT_SUCCESS)?;
    let second = rig.report.nics.clone();
    assert_eq!(
        second.iter().map(|n| (n.index, n.pci.clone())).collect::<Vec<_>>(),
        [(0, first[1].pci.clone()), (1, first[0].pci.clone())]
    );
    assert_eq!((second[0].mac, second[1].mac), (first[1].mac, first[0].mac));
    Ok(())
}

#[test]
fn nics_naming_a_missing_function_is_a_configuration_error() -> Result<()> {
    let opts = BootOptions::default().set("mode", "boot").set("nics", "00:1f.7");
    let (exit, rig) = boot_to_exit("nic_select_missing", opts)?;
    expect_status(&rig, exit, EXIT_BAD_CONFIG)?;
    let com1 = rig.qemu.com1();
    let needle = "error: boot option 'nics': no NIC the image drives at 00:1f.7";
    assert!(com1.iter().any(|l| l.contains(needle)), "no {needle:?} on COM1:\n{}", com1.join("\n"));
    assert!(!com1.iter().any(|l| l.starts_with("@nic ")), "no NIC is brought up");
    Ok(())
}

/// A chain whose `port.mtu` needs frames longer than the port's NIC receives (a virtio-net
/// device without mergeable receive buffers: one buffer, 1 984 bytes, a frame) is a
/// configuration error naming the record, the port and the NIC, before any frame moves.
#[test]
fn a_port_mtu_its_nic_cannot_receive_is_a_configuration_error() -> Result<()> {
    let mut rig = cadence_tests::start_with("nic_select_mtu", 1, BootOptions::default().set("mode", "boot"), |c| {
        c.qemu_args = vec!["-global".into(), "virtio-net-pci.mrg_rxbuf=off".into()];
        c.chain_text = Some("version=1\nport.mtu=port:1,mtu:9000\n".into());
    })?;
    let exit = rig.qemu.wait(cadence_tests::BOOT_TIMEOUT)?;
    rig.pump(std::time::Duration::from_millis(200));
    expect_status(&rig, exit, EXIT_BAD_CONFIG)?;
    let com1 = rig.qemu.com1();
    let needle = "error: port.mtu: port 1 (virtio-net) receives frames of up to 1984 bytes; its MTU needs 9018";
    assert!(com1.iter().any(|l| l.contains(needle)), "no {needle:?} on COM1:\n{}", com1.join("\n"));
    Ok(())
}
