//! `cargo xtask test`: every check, in order, stopping at the first failure.

use anyhow::{Context, Result, bail};

use cadence_build::image::{self, Profile};

/// The target `core` and `drivers` must also build for (and pass clippy on): the Arm
/// cores of SmartNICs (issue 15 item 6). `rust-toolchain.toml` lists it, so the toolchain
/// step installs it.
pub const PORTABLE_TARGET: &str = "aarch64-unknown-none";

/// One step of `cargo xtask test`.
#[derive(Debug)]
pub struct Step {
    pub name: &'static str,
    pub args: Vec<&'static str>,
    pub defmt_log: bool,
    /// `RUSTDOCFLAGS` for the step (the docs step denies rustdoc's warnings).
    pub rustdocflags: Option<&'static str>,
}

/// The cargo steps, in order.
pub fn steps() -> Vec<Step> {
    vec![
        Step { name: "format", args: vec!["fmt", "--all", "--", "--check"], defmt_log: false, rustdocflags: None },
        Step {
            name: "clippy (host)",
            args: vec!["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"],
            defmt_log: false,
            rustdocflags: None,
        },
        // The workspace's docs build without a warning: no link to a private or missing
        // item, no bracket rustdoc takes for a link (`cargo doc --no-deps --open` is how
        // docs/ARCHITECTURE.md tells a reader to browse the module docs).
        Step {
            name: "docs",
            args: vec!["doc", "--workspace", "--no-deps"],
            defmt_log: false,
            rustdocflags: Some("-D warnings"),
        },
        Step {
            name: "clippy (bare metal)",
            args: vec![
                "clippy",
                "-p",
                "cadence-firmware",
                "-p",
                "cadence-platform",
                "--target",
                image::TARGET,
                "--",
                "-D",
                "warnings",
            ],
            defmt_log: true,
            rustdocflags: None,
        },
        Step {
            name: "build (portable crates for an Arm SmartNIC core)",
            args: vec!["build", "-p", "cadence-core", "-p", "cadence-drivers", "--target", PORTABLE_TARGET],
            defmt_log: false,
            rustdocflags: None,
        },
        Step {
            name: "clippy (portable crates for an Arm SmartNIC core)",
            args: vec![
                "clippy",
                "-p",
                "cadence-core",
                "-p",
                "cadence-drivers",
                "--target",
                PORTABLE_TARGET,
                "--",
                "-D",
                "warnings",
            ],
            defmt_log: false,
            rustdocflags: None,
        },
        Step {
            name: "clippy (the aarch64 platform, its boot check and the firmware, bare metal)",
            args: vec![
                "clippy",
                "-p",
                "cadence-platform-aarch64",
                "-p",
                "cadence-firmware",
                "--target",
                PORTABLE_TARGET,
                "--",
                "-D",
                "warnings",
            ],
            defmt_log: false,
            rustdocflags: None,
        },
        Step {
            name: "tests (unit, integration and QEMU end-to-end)",
            args: vec!["test", "--workspace"],
            defmt_log: true,
            rustdocflags: None,
        },
    ]
}

fn run_step(s: &Step) -> Result<()> {
    let mut cmd = image::cargo();
    cmd.current_dir(image::workspace_root()).args(&s.args);
    if s.defmt_log {
        cmd.env("DEFMT_LOG", image::defmt_log());
    }
    if let Some(flags) = s.rustdocflags {
        cmd.env("RUSTDOCFLAGS", flags);
    }
    println!("\n==> xtask test: {} (cargo {})", s.name, s.args.join(" "));
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("xtask test: step '{}' failed ({st}): cargo {}", s.name, s.args.join(" "));
    }
    Ok(())
}

/// Runs every step; stops at the first failure.
pub fn test() -> Result<()> {
    println!("==> xtask test: Rust toolchain ({})", cadence_build::toolchain::FILE);
    cadence_build::toolchain::ensure().context("xtask test: step 'Rust toolchain' failed")?;
    let all = steps();
    let (before, after) = all.split_at(all.len() - 1);
    for s in before {
        run_step(s)?;
    }
    // Verification that needs no QEMU (README "Tests"): loom models, Miri, the allocation
    // test, fuzz targets — what `cargo xtask verify` runs.
    crate::verify::all()?;
    println!("\n==> xtask test: QEMU");
    let v = cadence_build::provision::ensure_qemu().context("xtask test: step 'QEMU' failed")?;
    println!("{} {v}", cadence_build::provision::QEMU);
    println!("\n==> xtask test: QEMU for the aarch64 image");
    let v = cadence_build::provision::ensure_qemu_aarch64().context("xtask test: step 'QEMU aarch64' failed")?;
    println!("{} {v}", cadence_build::provision::QEMU_AARCH64);
    println!("\n==> xtask test: GRUB tools (multiboot2 boot test)");
    cadence_build::provision::ensure_grub_tools().context("xtask test: step 'GRUB tools' failed")?;
    println!("\n==> xtask test: iproute2 (hosted end-to-end tests: namespaces and veth pairs)");
    cadence_build::provision::ensure_iproute().context("xtask test: step 'iproute2' failed")?;
    println!("\n==> xtask test: tshark (the IPFIX test's independent decoder)");
    cadence_build::provision::ensure_tshark().context("xtask test: step 'tshark' failed")?;
    println!("\n==> xtask test: Open vSwitch (the rack test's switch)");
    cadence_build::provision::ensure_ovs().context("xtask test: step 'Open vSwitch' failed")?;
    println!("\n==> xtask test: dpdk-test-acl (the ACL's differential test against rte_acl)");
    cadence_build::provision::ensure_test_acl().context("xtask test: step 'dpdk-test-acl' failed")?;
    println!(
        "\n==> xtask test: DPDK's SWX pipeline (the P4 reference runner: libdpdk-dev, dpdk-doc, gcc, the internal headers)"
    );
    cadence_bench::swx::ensure_packages().context("xtask test: step 'SWX pipeline' failed")?;
    let include = cadence_bench::swx::headers::ensure_headers().context("xtask test: step 'SWX pipeline' failed")?;
    println!("{}", include.display());
    println!("\n==> xtask test: python3 and ethtool (the URL filter's evasion suite: a real HTTP server)");
    cadence_build::provision::ensure_evasion_tools().context("xtask test: step 'python3, ethtool' failed")?;
    println!("\n==> xtask test: ping (the router test's hosts)");
    cadence_build::provision::ensure_router_tools().context("xtask test: step 'ping' failed")?;
    println!(
        "\n==> xtask test: fresh machine (the README's `cargo xtask run` without the bare-metal target and rustfmt)"
    );
    cadence_build::toolchain::fresh_machine_check().context("xtask test: step 'fresh machine' failed")?;
    println!("\n==> xtask test: build the image");
    let img = image::build(Profile::Release).context("xtask test: step 'build the image' failed")?;
    println!("{}", img.display());
    for s in after {
        run_step(s)?;
    }
    println!("\nxtask test: all steps passed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_portable_crates_are_built_and_linted_for_the_arm_target_before_the_tests() {
        let all = steps();
        let at = |needle: &str| all.iter().position(|s| s.args.contains(&needle) && s.args.contains(&PORTABLE_TARGET));
        let (build, clippy) = (at("build"), at("clippy"));
        assert!(build.is_some_and(|b| b < 6) && clippy.is_some_and(|c| c < 6), "{all:?}");
        // Everything but the tests runs before the QEMU set-up; the tests come last.
        assert_eq!(all.iter().position(|s| s.args[0] == "test"), Some(all.len() - 1));
        assert!(all.iter().any(|s| s.name == "docs" && s.rustdocflags == Some("-D warnings")), "{all:?}");
        let want = cadence_build::toolchain::wanted().expect("rust-toolchain.toml");
        assert!(want.targets.iter().any(|t| t == PORTABLE_TARGET), "{want:?}");
    }
}
