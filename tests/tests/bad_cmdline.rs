//! Bad boot options: exit status 35 and one `error: boot option '<key>'` line on COM1.

use anyhow::Result;
use cadence_harness::protocol::{BootOptions, EXIT_BAD_CONFIG};
use cadence_tests::{boot_to_exit, expect_status};

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

#[test]
fn a_command_line_over_the_limit_is_refused_not_cut() -> Result<()> {
    // A valid line whose last value runs past byte 1024: `stats_ms=000…0001000` is 1000, but
    // cut at 1024 bytes it reads as 0 and is still valid. Before, the image parsed the cut
    // line and ran (`mode=boot` exits 33) with a configuration nobody asked for.
    let long = format!("mode=boot stats_ms={}1000", "0".repeat(1100));
    assert!(long.len() > 1024);
    let (exit, rig) = boot_to_exit("bad_cmdline_long", BootOptions::default().extend_raw(&long))?;
    expect_status(&rig, exit, EXIT_BAD_CONFIG)?;
    let com1 = rig.qemu.com1();
    assert!(
        com1.iter().any(|l| l == "error: boot command line longer than 1024 bytes (the limit)"),
        "{}",
        com1.join("\n")
    );
    Ok(())
}
