//! Bad boot options: exit status 35 and one `error: boot option '<key>'` line on COM1.

use anyhow::Result;
use cadence_tests::{boot_to_exit, expect_status};
use xtask::protocol::{BootOptions, EXIT_BAD_CONFIG};

fn expect_rejected(name: &str, opts: &str, key: &str) -> Result<()> {
    let (exit, rig) = boot_to_exit(name, BootOptions::default().extend_raw(opts))?;
    expect_status(&rig, exit, EXIT_BAD_CONFIG)?;
    let needle = format!("error: boot option '{key}'");
    let com1 = rig.qemu.com1();
    assert!(com1.iter().any(|l| l.contains(&needle)), "no line containing {needle:?} on COM1:\n{}", com1.join("\n"));
    Ok(())
}

#[test]
fn unknown_key_is_rejected() -> Result<()> {
    expect_rejected("bad_cmdline_bogus", "bogus=1", "bogus")
}

#[test]
fn out_of_range_value_is_rejected() -> Result<()> {
    expect_rejected("bad_cmdline_qsize", "qsize=300", "qsize")
}
