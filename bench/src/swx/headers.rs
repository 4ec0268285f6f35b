//! DPDK's two internal SWX pipeline headers, which Debian's `libdpdk-dev` leaves out but the C
//! that `rte_swx_pipeline_codegen()` emits includes: `rte_swx_pipeline_internal.h` and
//! `rte_swx_pipeline_spec.h` (`lib/pipeline/` of DPDK's source tree).
//!
//! They come from Debian's source package of the *installed* DPDK (`dpkg-query`), fetched with
//! `apt-get source --download-only` under a private apt state in `target/swx/apt/` (its own
//! `deb-src` list, package lists and cache: `/etc/apt` is never touched), and are unpacked from
//! the upstream tarball into `target/swx/dpdk-<version>/include/`, once. Two checks keep a wrong
//! copy out: no Debian patch may touch `lib/pipeline/` (the tarball is then what was built), and
//! the tarball's public `rte_swx_pipeline.h` must equal the installed one.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail, ensure};

use cadence_build::workspace::target_dir;

/// The internal headers the generated C includes.
pub const HEADERS: [&str; 2] = ["rte_swx_pipeline_internal.h", "rte_swx_pipeline_spec.h"];
/// The binary package whose source package and version decide which headers are fetched.
pub const DEV_PACKAGE: &str = "libdpdk-dev";
/// Where Debian installs DPDK's public headers.
pub const PUBLIC_INCLUDE: &str = "/usr/include/dpdk";
/// The archive keyring the `deb-src` lines are signed by (Debian's `debian-archive-keyring`).
pub const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
/// The suites searched for the source package: a point release's DPDK is in `bookworm`, a
/// security update's in `bookworm-security`.
pub const SOURCES: [(&str, &str); 3] = [
    ("http://deb.debian.org/debian", "bookworm"),
    ("http://deb.debian.org/debian", "bookworm-updates"),
    ("http://deb.debian.org/debian-security", "bookworm-security"),
];

/// The installed DPDK's source package and version, e.g. `("dpdk", "22.11.11-0+deb12u1")`.
pub fn installed_source() -> Result<(String, String)> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f=${source:Package} ${source:Version}", DEV_PACKAGE])
        .output()
        .context("running dpkg-query (is this Debian?)")?;
    ensure!(
        out.status.success(),
        "dpkg-query -W {DEV_PACKAGE}: {} (is {DEV_PACKAGE} installed?)",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    parse_source(&String::from_utf8_lossy(&out.stdout))
}

/// Parses `dpkg-query`'s `${source:Package} ${source:Version}`.
pub fn parse_source(s: &str) -> Result<(String, String)> {
    let mut w = s.split_whitespace();
    match (w.next(), w.next(), w.next()) {
        (Some(p), Some(v), None) if !p.is_empty() && v.chars().next().is_some_and(|c| c.is_ascii_digit()) => {
            Ok((p.to_string(), v.to_string()))
        }
        _ => bail!("dpkg-query gave no source package and version for {DEV_PACKAGE}: {s:?}"),
    }
}

/// The `sources.list` of the private apt state.
pub fn sources_list() -> String {
    SOURCES.iter().map(|(uri, suite)| format!("deb-src [signed-by={KEYRING}] {uri} {suite} main\n")).collect()
}

/// `apt-get` with the private state under `apt` (sources, lists and cache; the dpkg status is
/// the system's, read only), and no privilege drop to `_apt` (which cannot write to `target/`).
fn apt_get(apt: &Path) -> Command {
    let mut c = Command::new("apt-get");
    let opt = |k: &str, v: &Path| format!("{k}={}", v.display());
    c.args(["-q", "-o", &opt("Dir::Etc::SourceList", &apt.join("sources.list"))])
        .args(["-o", "Dir::Etc::SourceParts=/nonexistent"])
        .args(["-o", &opt("Dir::State::Lists", &apt.join("lists"))])
        .args(["-o", &opt("Dir::Cache", &apt.join("cache"))])
        .args(["-o", "APT::Sandbox::User=root"])
        .env("DEBIAN_FRONTEND", "noninteractive");
    c
}

fn run(what: &str, cmd: &mut Command) -> Result<String> {
    let out = cmd.output().with_context(|| format!("{what}: starting {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{what} failed ({}): {cmd:?}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The directory holding [`HEADERS`] for the installed DPDK, fetching them the first time.
pub fn ensure_headers() -> Result<PathBuf> {
    let (package, version) = installed_source()?;
    let root = target_dir().join("swx");
    let dir = root.join(format!("{package}-{version}")).join("include");
    if HEADERS.iter().all(|h| dir.join(h).is_file()) {
        return Ok(dir);
    }
    let fetched = fetch(&root, &package, &version, &dir);
    // The downloads and a half-done unpacking go either way; the apt lists stay for next time.
    let _ = std::fs::remove_dir_all(root.join(format!("src-{version}")));
    let _ = std::fs::remove_dir_all(root.join(format!("unpack-{}", std::process::id())));
    fetched.with_context(|| {
        format!(
            "getting DPDK's internal SWX headers ({}) from Debian's source package {package} {version} with apt-get source",
            HEADERS.join(", ")
        )
    })?;
    Ok(dir)
}

fn fetch(root: &Path, package: &str, version: &str, dir: &Path) -> Result<()> {
    let apt = root.join("apt");
    for d in ["lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(apt.join(d)).with_context(|| format!("creating {}", apt.join(d).display()))?;
    }
    std::fs::write(apt.join("sources.list"), sources_list())?;
    eprintln!("swx: fetching Debian's source package {package} {version} (private apt state in {})", apt.display());
    run("apt-get update (deb-src lists)", apt_get(&apt).arg("update"))?;
    let dl = root.join(format!("src-{version}"));
    let _ = std::fs::remove_dir_all(&dl);
    std::fs::create_dir_all(&dl)?;
    run(
        "apt-get source --download-only",
        apt_get(&apt).current_dir(&dl).args(["source", "--download-only", &format!("{package}={version}")]),
    )
    .with_context(|| {
        format!(
            "Debian's archive ({}) has no source package {package}={version}; if a newer point release \
             replaced it, upgrade DPDK (apt-get install --only-upgrade {} dpdk) and run again",
            SOURCES.map(|(_, s)| s).join(", "),
            crate::swx::PACKAGES[..2].join(" ")
        )
    })?;
    let file = |suffix: &str| -> Result<PathBuf> {
        std::fs::read_dir(&dl)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)))
            .with_context(|| format!("apt-get source left no *{suffix} in {}", dl.display()))
    };
    let (orig, debian) = (file(".orig.tar.xz")?, file(".debian.tar.xz")?);
    // Debian's patches, all concatenated: none may touch the pipeline library.
    let patches = run(
        "reading Debian's patches",
        Command::new("tar").arg("-xJOf").arg(&debian).args(["--wildcards", "debian/patches/*"]),
    )?;
    ensure!(
        !patches.contains("lib/pipeline/"),
        "a Debian patch in {} changes lib/pipeline/: the upstream headers would not be what was built",
        debian.display()
    );
    let tmp = root.join(format!("unpack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp)?;
    let wanted: Vec<String> =
        HEADERS.iter().chain(&["rte_swx_pipeline.h"]).map(|h| format!("*/lib/pipeline/{h}")).collect();
    run(
        "unpacking the headers",
        Command::new("tar")
            .arg("-xJf")
            .arg(&orig)
            .arg("-C")
            .arg(&tmp)
            .args(["--strip-components=3", "--wildcards"])
            .args(&wanted),
    )?;
    let public = std::fs::read(Path::new(PUBLIC_INCLUDE).join("rte_swx_pipeline.h"))
        .with_context(|| format!("reading {PUBLIC_INCLUDE}/rte_swx_pipeline.h (is {DEV_PACKAGE} installed?)"))?;
    ensure!(
        std::fs::read(tmp.join("rte_swx_pipeline.h"))? == public,
        "{}'s rte_swx_pipeline.h differs from the installed {PUBLIC_INCLUDE}/rte_swx_pipeline.h",
        orig.display()
    );
    for h in HEADERS {
        ensure!(tmp.join(h).is_file(), "{} has no lib/pipeline/{h}", orig.display());
    }
    std::fs::create_dir_all(dir.parent().unwrap_or(dir))?;
    let _ = std::fs::remove_dir_all(dir);
    std::fs::rename(&tmp, dir).with_context(|| format!("moving the headers to {}", dir.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dpkg_query() {
        assert_eq!(
            parse_source("dpdk 22.11.11-0+deb12u1").expect("parsed"),
            ("dpdk".to_string(), "22.11.11-0+deb12u1".to_string())
        );
        assert!(parse_source("").is_err());
        assert!(parse_source("dpdk").is_err());
        assert!(parse_source("dpdk  ").is_err());
        assert!(parse_source("dpdk x1 y").is_err());
    }

    #[test]
    fn sources_are_deb_src_and_signed() {
        let s = sources_list();
        assert_eq!(s.lines().count(), 3);
        for l in s.lines() {
            assert!(
                l.starts_with(
                    "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/"
                ),
                "{l}"
            );
            assert!(l.ends_with(" main"), "{l}");
        }
        assert!(s.contains("debian-security bookworm-security main"));
    }
}
