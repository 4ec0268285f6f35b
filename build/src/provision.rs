//! QEMU provisioning, shared by `cargo xtask run` and `cargo xtask test`.
//!
//! Cadence needs `qemu-system-x86_64` ≥ 8.0 (10.x from Debian
//! bookworm-backports). When it is missing or older: as root on Debian bookworm with
//! apt-get, add the bookworm-backports source (deb822) if absent and install
//! `qemu-system-x86` from it; otherwise say exactly what to install and fail.

use std::fmt;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The QEMU binary.
pub const QEMU: &str = "qemu-system-x86_64";
/// iproute2's command (the hosted tests' namespaces and veth pairs).
pub const IP: &str = "ip";
/// Oldest QEMU that works (igb needs 8.0; dgram netdevs 7.2).
pub const MIN_VERSION: Version = Version(8, 0, 0);
/// The deb822 source file that is written when bookworm-backports is missing.
pub const BACKPORTS_FILE: &str = "/etc/apt/sources.list.d/bookworm-backports.sources";
/// Its contents.
pub const BACKPORTS_SOURCE: &str = "Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
";

/// A QEMU version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

/// Parses the first line of `qemu-system-x86_64 --version`, e.g.
/// `QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)`.
pub fn parse_version(output: &str) -> Option<Version> {
    let line = output.lines().find(|l| l.contains("version"))?;
    let rest = &line[line.find("version")? + "version".len()..];
    let word = rest.split_whitespace().next()?;
    let mut nums = word.split(|c: char| !c.is_ascii_digit()).take(3).map(|n| n.parse::<u32>().ok());
    let major = nums.next()??;
    let minor = nums.next().flatten().unwrap_or(0);
    let patch = nums.next().flatten().unwrap_or(0);
    Some(Version(major, minor, patch))
}

/// What the machine looks like, for [`plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    /// The installed QEMU's version (`None`: missing or unparseable).
    pub qemu: Option<Version>,
    pub is_root: bool,
    pub has_apt: bool,
    /// `VERSION_CODENAME` from /etc/os-release.
    pub codename: Option<String>,
    /// Whether an apt source for bookworm-backports already exists.
    pub has_backports_source: bool,
}

/// What to do about QEMU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// QEMU is there and new enough.
    Ready(Version),
    /// Install from bookworm-backports; `add_source`: write [`BACKPORTS_FILE`] first.
    Install { add_source: bool },
    /// Cannot install here: the message says what to install.
    Manual(String),
}

/// Decides what to do (pure; unit-tested).
pub fn plan(h: &Host) -> Plan {
    if let Some(v) = h.qemu.filter(|v| *v >= MIN_VERSION) {
        return Plan::Ready(v);
    }
    let found = match h.qemu {
        Some(v) => format!("{QEMU} {v} is older than {MIN_VERSION}"),
        None => format!("{QEMU} was not found"),
    };
    if h.is_root && h.has_apt && h.codename.as_deref() == Some("bookworm") {
        return Plan::Install { add_source: !h.has_backports_source };
    }
    let why = if !h.has_apt {
        "apt-get is not available".to_string()
    } else if !h.is_root {
        "not running as root".to_string()
    } else {
        format!("this is not Debian bookworm ({})", h.codename.as_deref().unwrap_or("unknown release"))
    };
    Plan::Manual(format!(
        "{found}, and it cannot be installed automatically ({why}).\n\
         Install QEMU >= {MIN_VERSION} with x86_64 system emulation, e.g. on Debian 12 as root:\n\
         \x20 printf '%s' '{src}' > {BACKPORTS_FILE}\n\
         \x20 apt-get update && apt-get install -y -t bookworm-backports qemu-system-x86\n\
         (other distributions: the package that provides {QEMU} >= {MIN_VERSION}), then run the command again.",
        src = BACKPORTS_SOURCE.replace('\n', "\\n"),
    ))
}

/// The installed QEMU's version.
pub fn installed_version() -> Option<Version> {
    let out = Command::new(QEMU).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

fn has_backports_source() -> bool {
    let mut files = vec![std::path::PathBuf::from("/etc/apt/sources.list")];
    if let Ok(rd) = std::fs::read_dir("/etc/apt/sources.list.d") {
        files.extend(rd.filter_map(|e| e.ok()).map(|e| e.path()));
    }
    files.iter().any(|p| {
        std::fs::read_to_string(p)
            .map(|s| s.lines().any(|l| !l.trim_start().starts_with('#') && l.contains("bookworm-backports")))
            .unwrap_or(false)
    })
}

fn os_codename() -> Option<String> {
    let s = std::fs::read_to_string("/etc/os-release").ok()?;
    s.lines().find_map(|l| l.strip_prefix("VERSION_CODENAME=")).map(|v| v.trim_matches('"').to_string())
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// Looks at this machine.
pub fn probe() -> Host {
    Host {
        qemu: installed_version(),
        is_root: is_root(),
        has_apt: Path::new("/usr/bin/apt-get").exists(),
        codename: os_codename(),
        has_backports_source: has_backports_source(),
    }
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("{cmd:?} failed ({st})");
    }
    Ok(())
}

/// Makes sure QEMU ≥ 8.0 is installed, installing it when possible; returns its version.
pub fn ensure_qemu() -> Result<Version> {
    match plan(&probe()) {
        Plan::Ready(v) => Ok(v),
        Plan::Manual(msg) => bail!("{msg}"),
        Plan::Install { add_source } => {
            eprintln!("xtask: installing QEMU from bookworm-backports");
            if add_source {
                std::fs::write(BACKPORTS_FILE, BACKPORTS_SOURCE)
                    .with_context(|| format!("writing {BACKPORTS_FILE}"))?;
            }
            run(Command::new("apt-get").arg("update"))?;
            run(Command::new("apt-get")
                .args(["install", "-y", "-t", "bookworm-backports", "qemu-system-x86"])
                .env("DEBIAN_FRONTEND", "noninteractive"))?;
            match installed_version() {
                Some(v) if v >= MIN_VERSION => Ok(v),
                Some(v) => bail!("installed {QEMU} {v}, still older than {MIN_VERSION}"),
                None => bail!("apt-get install finished but {QEMU} does not run"),
            }
        }
    }
}

/// The Arm image's emulator (`-M virt`), from Debian's `qemu-system-arm`.
pub const QEMU_AARCH64: &str = "qemu-system-aarch64";
/// The Debian package that provides [`QEMU_AARCH64`].
pub const QEMU_AARCH64_PACKAGE: &str = "qemu-system-arm";

/// The version of the installed `qemu-system-aarch64`.
pub fn installed_aarch64_version() -> Option<Version> {
    let out = Command::new(QEMU_AARCH64).arg("--version").output().ok()?;
    if !out.status.success() {
        return None;
    }
    parse_version(&String::from_utf8_lossy(&out.stdout))
}

/// Makes sure `qemu-system-aarch64` >= [`MIN_VERSION`] is installed, installing
/// `qemu-system-arm` from bookworm-backports as [`ensure_qemu`] installs the x86 one (as
/// root on Debian 12 with apt-get); returns its version.
pub fn ensure_qemu_aarch64() -> Result<Version> {
    let h = Host { qemu: installed_aarch64_version(), ..probe() };
    match plan(&h) {
        Plan::Ready(v) => Ok(v),
        Plan::Manual(_) => bail!(
            "{QEMU_AARCH64} >= {MIN_VERSION} is needed for the aarch64 image (found: {}) and cannot be installed \
             here: install {QEMU_AARCH64_PACKAGE} (Debian 12: apt-get install -t bookworm-backports {QEMU_AARCH64_PACKAGE})",
            h.qemu.map_or("none".to_string(), |v| v.to_string())
        ),
        Plan::Install { add_source } => {
            eprintln!("xtask: installing {QEMU_AARCH64_PACKAGE} from bookworm-backports");
            if add_source {
                std::fs::write(BACKPORTS_FILE, BACKPORTS_SOURCE)
                    .with_context(|| format!("writing {BACKPORTS_FILE}"))?;
            }
            run(Command::new("apt-get").arg("update"))?;
            run(Command::new("apt-get")
                .args(["install", "-y", "-t", "bookworm-backports", QEMU_AARCH64_PACKAGE])
                .env("DEBIAN_FRONTEND", "noninteractive"))?;
            match installed_aarch64_version() {
                Some(v) if v >= MIN_VERSION => Ok(v),
                Some(v) => bail!("installed {QEMU_AARCH64} {v}, still older than {MIN_VERSION}"),
                None => bail!("apt-get install finished but {QEMU_AARCH64} does not run"),
            }
        }
    }
}

/// For the aarch64 QEMU tests: `qemu-system-aarch64` must be there already (the tests never
/// install, and never skip); the error says how to get it.
pub fn require_qemu_aarch64() -> Result<Version> {
    match installed_aarch64_version() {
        Some(v) if v >= MIN_VERSION => Ok(v),
        other => bail!(
            "{QEMU_AARCH64} >= {MIN_VERSION} is needed for the aarch64 QEMU tests (found: {}). \
             Run `cargo xtask test`, which installs {QEMU_AARCH64_PACKAGE} (as root on Debian 12), or install it yourself.",
            other.map_or("none".to_string(), |v| v.to_string())
        ),
    }
}

/// What builds a GRUB rescue ISO for the multiboot2 boot tests and boots it under UEFI:
/// `grub-mkrescue`, GRUB's BIOS and EFI modules, `xorriso`, `mtools`, and OVMF (Debian
/// packages).
pub const GRUB_PACKAGES: [&str; 6] = ["grub-pc-bin", "grub-efi-amd64-bin", "grub-common", "xorriso", "mtools", "ovmf"];

/// Whether `grub-mkrescue` can build an ISO that boots under BIOS and UEFI here, and OVMF
/// is there to boot it.
pub fn grub_tools_present() -> bool {
    let runs = |cmd: &str| Command::new(cmd).arg("--version").output().is_ok_and(|o| o.status.success());
    runs("grub-mkrescue")
        && runs("xorriso")
        && Path::new("/usr/lib/grub/i386-pc").is_dir()
        && Path::new("/usr/lib/grub/x86_64-efi").is_dir()
        && Path::new("/usr/share/OVMF/OVMF_CODE_4M.fd").is_file()
}

/// Makes sure the GRUB tools of [`GRUB_PACKAGES`] are installed (as root with apt-get:
/// installs them), for the test that boots the image through GRUB's multiboot2 loader.
pub fn ensure_grub_tools() -> Result<()> {
    ensure_packages("the multiboot2 boot test needs GRUB's tools", &GRUB_PACKAGES, grub_tools_present)
}

/// What the hosted end-to-end tests and `cargo xtask run --hosted` use to make network
/// namespaces and veth pairs: iproute2's `ip`.
pub const IPROUTE_PACKAGES: [&str; 1] = ["iproute2"];

/// Whether iproute2's `ip` runs.
pub fn iproute_present() -> bool {
    Command::new(IP).arg("-V").output().is_ok_and(|o| o.status.success())
}

/// Makes sure iproute2 is installed (as root with apt-get: installs it).
pub fn ensure_iproute() -> Result<()> {
    ensure_packages("the hosted dataplane's rig needs iproute2", &IPROUTE_PACKAGES, iproute_present)
}

/// What libFuzzer (built by `cargo fuzz` from C++ source) needs: a C++ compiler.
pub const CXX_PACKAGES: [&str; 1] = ["g++"];

/// Whether a C++ compiler (`c++`) runs.
pub fn cxx_present() -> bool {
    Command::new("c++").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Makes sure a C++ compiler is installed (as root with apt-get: installs g++), for the
/// fuzz targets' libFuzzer.
pub fn ensure_cxx() -> Result<()> {
    ensure_packages("cargo fuzz builds libFuzzer from C++ source", &CXX_PACKAGES, cxx_present)
}

/// Wireshark's command-line decoder, the IPFIX test's independent reader of the export.
pub const TSHARK_PACKAGES: [&str; 1] = ["tshark"];

/// Whether `tshark` runs.
pub fn tshark_present() -> bool {
    Command::new("tshark").arg("--version").output().is_ok_and(|o| o.status.success())
}

/// Makes sure tshark is installed (as root with apt-get: installs it).
pub fn ensure_tshark() -> Result<()> {
    ensure_packages("the IPFIX test decodes the export with tshark", &TSHARK_PACKAGES, tshark_present)
}

/// Open vSwitch, the rack test's top-of-rack switch (its userspace datapath needs no kernel
/// module): `ovsdb-server`, `ovs-vswitchd`, `ovs-vsctl`, `ovs-ofctl`.
pub const OVS_PACKAGES: [&str; 1] = ["openvswitch-switch"];

/// Whether OVS's daemons and tools run.
pub fn ovs_present() -> bool {
    let runs = |c: &str| Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success());
    runs("ovs-vswitchd") && runs("ovsdb-server") && runs("ovs-vsctl") && runs("ovs-ofctl")
}

/// Makes sure Open vSwitch is installed (as root with apt-get: installs it; the package's
/// own service is not used: the rig starts its daemons in a run directory of its own).
pub fn ensure_ovs() -> Result<()> {
    ensure_packages("the rack test runs Open vSwitch as its switch", &OVS_PACKAGES, ovs_present)
}

/// The URL filter's evasion suite: a real HTTP server and a client that controls its bytes
/// (Python 3's standard library), and `ethtool` to turn the test veths' offloads off.
pub const EVASION_PACKAGES: [&str; 2] = ["python3", "ethtool"];

/// Whether `python3` and `ethtool` run.
pub fn evasion_tools_present() -> bool {
    let runs = |c: &str, a: &str| Command::new(c).arg(a).output().is_ok_and(|o| o.status.success());
    runs("python3", "--version") && (runs("ethtool", "--version") || runs("/usr/sbin/ethtool", "--version"))
}

/// Makes sure python3 and ethtool are installed (as root with apt-get: installs them).
pub fn ensure_evasion_tools() -> Result<()> {
    ensure_packages(
        "the URL filter's evasion suite runs Python's http.server and ethtool",
        &EVASION_PACKAGES,
        evasion_tools_present,
    )
}

/// What the router test's hosts run: `ping` (Debian's `iputils-ping`).
pub const ROUTER_PACKAGES: [&str; 2] = ["iputils-ping", "traceroute"];

/// Whether `ping` and `traceroute` run.
pub fn router_tools_present() -> bool {
    let runs = |tool: &str, arg: &str| Command::new(tool).arg(arg).output().is_ok_and(|o| o.status.success());
    runs("ping", "-V") && runs("traceroute", "--version")
}

/// Makes sure `ping` and `traceroute` are installed (as root with apt-get: installs
/// `iputils-ping` and `traceroute`, which Debian 12 does not have by default), beside
/// python3 and ethtool ([`ensure_evasion_tools`]) which the router test also uses.
pub fn ensure_router_tools() -> Result<()> {
    ensure_evasion_tools()?;
    ensure_packages(
        "the router test's hosts ping and traceroute across Cadence",
        &ROUTER_PACKAGES,
        router_tools_present,
    )
}

/// DPDK's ACL test program, the ACL's independent reference (`bench/tests/acl_vs_dpdk.rs`).
pub const TEST_ACL_PACKAGES: [&str; 1] = ["dpdk-dev"];

/// Whether `dpdk-test-acl` is installed.
pub fn test_acl_present() -> bool {
    Command::new("sh").args(["-c", "command -v dpdk-test-acl"]).output().is_ok_and(|o| o.status.success())
}

/// Makes sure `dpdk-test-acl` is installed (as root with apt-get: installs `dpdk-dev`).
pub fn ensure_test_acl() -> Result<()> {
    ensure_packages("the ACL's differential test runs DPDK's dpdk-test-acl", &TEST_ACL_PACKAGES, test_acl_present)
}

/// Installs Debian `packages` unless `present()` already holds (as root with apt-get;
/// otherwise fails with `why` and the packages to install).
pub fn ensure_packages(why: &str, packages: &[&str], present: fn() -> bool) -> Result<()> {
    if present() {
        return Ok(());
    }
    let h = probe();
    if !(h.is_root && h.has_apt) {
        bail!("{why}: install {} (apt-get install)", packages.join(" "));
    }
    eprintln!("xtask: installing {}", packages.join(" "));
    run(Command::new("apt-get").arg("update"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends"])
        .args(packages)
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    if !present() {
        bail!("apt-get installed {} but the tool still does not run", packages.join(" "));
    }
    Ok(())
}

/// For the tests: the GRUB tools must be there already; the error says how to get them.
pub fn require_grub_tools() -> Result<()> {
    if grub_tools_present() {
        return Ok(());
    }
    bail!(
        "grub-mkrescue (packages: {}) is needed to boot the image through GRUB. Run `cargo xtask test`, \
         which installs them (as root on Debian 12), or install them yourself.",
        GRUB_PACKAGES.join(" ")
    )
}

/// For the QEMU tests: QEMU must be there already (the tests never install); the error
/// says how to get it.
pub fn require_qemu() -> Result<Version> {
    match installed_version() {
        Some(v) if v >= MIN_VERSION => Ok(v),
        other => bail!(
            "{QEMU} >= {MIN_VERSION} is needed for the QEMU end-to-end tests (found: {}). \
             Run `cargo xtask test`, which installs it (as root on Debian 12), or install it yourself.",
            other.map_or("none".to_string(), |v| v.to_string())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_versions() {
        assert_eq!(
            parse_version(
                "QEMU emulator version 10.0.2 (Debian 1:10.0.2+ds-2+deb13u1~bpo12+1)\nCopyright (c) 2003-2025"
            ),
            Some(Version(10, 0, 2))
        );
        assert_eq!(
            parse_version("QEMU emulator version 7.2.15 (Debian 1:7.2+dfsg-7+deb12u7)"),
            Some(Version(7, 2, 15))
        );
        assert_eq!(parse_version("QEMU emulator version 8.0.0"), Some(Version(8, 0, 0)));
        assert_eq!(parse_version("QEMU emulator version 9.1.50 (v9.1.0-1234-gdeadbeef)"), Some(Version(9, 1, 50)));
        assert_eq!(parse_version("QEMU emulator version 8.2"), Some(Version(8, 2, 0)));
        assert_eq!(parse_version("garbage"), None);
        assert_eq!(parse_version(""), None);
        assert!(Version(7, 2, 15) < MIN_VERSION && Version(8, 0, 0) >= MIN_VERSION);
        assert!(Version(10, 0, 2) > Version(9, 99, 99));
    }

    fn host(qemu: Option<Version>) -> Host {
        Host { qemu, is_root: true, has_apt: true, codename: Some("bookworm".into()), has_backports_source: false }
    }

    #[test]
    fn plans() {
        assert_eq!(plan(&host(Some(Version(10, 0, 2)))), Plan::Ready(Version(10, 0, 2)));
        assert_eq!(plan(&host(None)), Plan::Install { add_source: true });
        assert_eq!(
            plan(&Host { has_backports_source: true, ..host(Some(Version(7, 2, 15))) }),
            Plan::Install { add_source: false }
        );
        for (h, why) in [
            (Host { is_root: false, ..host(None) }, "not running as root"),
            (Host { has_apt: false, ..host(None) }, "apt-get is not available"),
            (Host { codename: Some("trixie".into()), ..host(None) }, "trixie"),
        ] {
            let p = plan(&h);
            let Plan::Manual(m) = &p else {
                unreachable!("expected Manual, got {p:?}");
            };
            assert!(m.contains(why), "{m}");
            assert!(m.contains("apt-get install -y -t bookworm-backports qemu-system-x86"), "{m}");
        }
        // A new enough QEMU is fine anywhere.
        assert!(matches!(
            plan(&Host { is_root: false, has_apt: false, ..host(Some(Version(8, 1, 0))) }),
            Plan::Ready(_)
        ));
    }

    #[test]
    fn backports_source_is_deb822() {
        for l in [
            "URIs: http://deb.debian.org/debian",
            "Suites: bookworm-backports",
            "Components: main",
            "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg",
        ] {
            assert!(BACKPORTS_SOURCE.lines().any(|x| x == l), "{l}");
        }
    }
}
