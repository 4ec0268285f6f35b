//! Building the firmware image with a nested cargo call.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

pub use crate::toolchain::cargo;
pub use crate::workspace::{TARGET, target_dir, workspace_root};

/// The firmware package and its binary.
pub const PACKAGE: &str = "cadence-firmware";
/// The image's binary name.
pub const BIN: &str = "cadence";

/// Build profile of the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Release,
    Debug,
}

impl Profile {
    fn dir(self) -> &'static str {
        match self {
            Profile::Release => "release",
            Profile::Debug => "debug",
        }
    }
}

/// Where the image of `profile` is.
pub fn image_path(profile: Profile) -> PathBuf {
    target_dir().join(TARGET).join(profile.dir()).join(BIN)
}

/// The `DEFMT_LOG` the image is built with: the user's, or `info`.
pub fn defmt_log() -> String {
    std::env::var("DEFMT_LOG").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| "info".to_string())
}

/// Builds the image and returns its path. Adds the bare-metal target (and whatever else
/// `rust-toolchain.toml` lists) first when the toolchain lacks it ([`crate::toolchain`]).
pub fn build(profile: Profile) -> Result<PathBuf> {
    crate::toolchain::ensure().context("provisioning the Rust toolchain")?;
    let mut cmd = cargo();
    cmd.current_dir(workspace_root())
        .args(["build", "-p", PACKAGE, "--bin", BIN, "--target", TARGET])
        .env("DEFMT_LOG", defmt_log());
    if profile == Profile::Release {
        cmd.arg("--release");
    }
    eprintln!("xtask: DEFMT_LOG={} {cmd:?}", defmt_log());
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("building the image failed ({st})");
    }
    let path = image_path(profile);
    if !path.is_file() {
        bail!("the build succeeded but {} is missing", path.display());
    }
    Ok(path)
}

/// Where the hosted Linux build of `profile` is.
pub fn hosted_path(profile: Profile) -> PathBuf {
    target_dir().join(profile.dir()).join(BIN)
}

/// Builds the hosted Linux dataplane (the firmware crate's `cadence` binary for the host)
/// and returns its path.
pub fn build_hosted(profile: Profile) -> Result<PathBuf> {
    let mut cmd = cargo();
    cmd.current_dir(workspace_root()).args(["build", "-p", PACKAGE, "--bin", BIN]);
    if profile == Profile::Release {
        cmd.arg("--release");
    }
    eprintln!("xtask: {cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("building the hosted dataplane failed ({st})");
    }
    let path = hosted_path(profile);
    if !path.is_file() {
        bail!("the build succeeded but {} is missing", path.display());
    }
    Ok(path)
}
