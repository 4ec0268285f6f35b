//! The nightly toolchain and the tools that need it: Miri (a component of nightly) and
//! `cargo-fuzz` (a cargo subcommand built from crates.io; its targets need nightly's
//! `-Zsanitizer`).
//!
//! The project itself builds on stable (`rust-toolchain.toml`); only the verification steps
//! of `cargo xtask test` and `cargo xtask fuzz` use nightly. As with the stable toolchain's
//! pieces ([`crate::toolchain`]), nothing relies on rustup's auto-install: each command
//! looks for what it needs and adds what is missing — `rustup toolchain install`, `rustup
//! component add`, `cargo install --locked` — so `.ci/run` needs nothing extra. Without
//! rustup it says exactly what to install.

use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::image;

/// The nightly toolchain the verification steps use: `CADENCE_NIGHTLY` (e.g. a dated
/// `nightly-2026-05-19` for a reproducible run), or `nightly`.
pub fn channel() -> String {
    std::env::var("CADENCE_NIGHTLY").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "nightly".to_string())
}

/// Components Miri needs: the interpreter, and the standard library's source (Miri builds
/// its own sysroot from it).
pub const MIRI_COMPONENTS: [&str; 2] = ["miri", "rust-src"];

fn rustup() -> Command {
    let mut c = Command::new("rustup");
    c.current_dir(image::workspace_root());
    c
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed ({st})");
    }
    Ok(())
}

/// `cargo` of the nightly toolchain, run through `rustup run` so that it does not matter
/// which toolchain runs xtask itself (the stable cargo's environment is removed).
pub fn cargo() -> Command {
    let mut c = Command::new("rustup");
    c.current_dir(image::workspace_root()).args(["run", &channel(), "cargo"]);
    for var in ["RUSTUP_TOOLCHAIN", "CARGO", "RUSTC", "RUSTDOC", "RUSTC_WRAPPER", "RUSTFLAGS", "CARGO_TARGET_DIR"] {
        c.env_remove(var);
    }
    c
}

/// Whether rustup has the toolchain `tc` installed.
fn has_toolchain(tc: &str) -> Result<bool> {
    let out = rustup().args(["toolchain", "list"]).output().context("running rustup toolchain list")?;
    if !out.status.success() {
        bail!("rustup toolchain list failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let host = host_triple();
    Ok(String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.split_whitespace().next()).any(|name| {
        name == tc
            || host.as_deref().is_some_and(|h| name.strip_suffix(h).and_then(|n| n.strip_suffix('-')) == Some(tc))
    }))
}

fn host_triple() -> Option<String> {
    let out = Command::new("rustc").arg("-vV").output().ok()?;
    String::from_utf8_lossy(&out.stdout).lines().find_map(|l| l.strip_prefix("host: ")).map(|h| h.trim().to_string())
}

fn require_rustup(what: &str) -> Result<()> {
    if rustup().arg("--version").output().is_ok_and(|o| o.status.success()) {
        return Ok(());
    }
    bail!("{what} needs rustup (https://rustup.rs) to install the {} toolchain", channel())
}

/// Makes sure the nightly toolchain exists and has `components`; installs what is missing.
pub fn ensure_components(components: &[&str]) -> Result<()> {
    require_rustup("the verification steps")?;
    let tc = channel();
    if !has_toolchain(&tc)? {
        eprintln!("xtask: the {tc} toolchain is missing; installing it (profile minimal, {})", components.join(", "));
        let mut cmd = rustup();
        cmd.args(["toolchain", "install", &tc, "--profile", "minimal"]);
        for c in components {
            cmd.args(["--component", c]);
        }
        run(&mut cmd).with_context(|| format!("installing the {tc} toolchain"))?;
    }
    let have = crate::toolchain::installed(&tc)?;
    let want = crate::toolchain::Wanted {
        channel: Some(tc.clone()),
        targets: Vec::new(),
        components: components.iter().map(|c| c.to_string()).collect(),
    };
    let missing = crate::toolchain::missing(&want, &have);
    if !missing.components.is_empty() {
        eprintln!("xtask: toolchain {tc} lacks component {}; adding", missing.components.join(", "));
        run(rustup().args(["component", "add", "--toolchain", &tc]).args(&missing.components))
            .with_context(|| format!("adding {} to {tc}", missing.components.join(", ")))?;
        let after = crate::toolchain::missing(&want, &crate::toolchain::installed(&tc)?);
        if !after.components.is_empty() {
            bail!("rustup finished but {tc} still lacks {}", after.components.join(", "));
        }
    }
    Ok(())
}

/// Nightly with Miri, and Miri's sysroot built (`cargo miri setup`, once per toolchain).
pub fn ensure_miri() -> Result<()> {
    ensure_components(&MIRI_COMPONENTS)?;
    let mut setup = cargo();
    setup.args(["miri", "setup"]);
    run(&mut setup).context("building Miri's sysroot (cargo miri setup)")
}

/// Whether `cargo fuzz` runs.
pub fn has_cargo_fuzz() -> bool {
    cargo().args(["fuzz", "--version"]).output().is_ok_and(|o| o.status.success())
}

/// Nightly, a C++ compiler for libFuzzer, and `cargo-fuzz` (`cargo install cargo-fuzz
/// --locked` when missing).
pub fn ensure_cargo_fuzz() -> Result<()> {
    ensure_components(&[])?;
    crate::provision::ensure_cxx()?;
    if has_cargo_fuzz() {
        return Ok(());
    }
    eprintln!("xtask: cargo-fuzz is missing; installing it (cargo install cargo-fuzz --locked)");
    let mut cmd = image::cargo();
    cmd.current_dir(image::workspace_root()).args(["install", "cargo-fuzz", "--locked"]);
    cmd.env_remove("CARGO_TARGET_DIR");
    run(&mut cmd).context("installing cargo-fuzz")?;
    if !has_cargo_fuzz() {
        bail!("cargo install cargo-fuzz finished but `cargo fuzz --version` does not run (is ~/.cargo/bin on PATH?)");
    }
    Ok(())
}
