//! DPDK's `testpmd` as the reference dataplane: provisioning (Debian's DPDK 22.11
//! packages, installed like `cadence_build::provision` installs QEMU), its command line, and
//! reading its output.
//!
//! `testpmd` runs in the dataplane's namespace on the same two veths, with the
//! `net_af_xdp` or `net_af_packet` poll-mode driver and `--forward-mode=mac` (each frame
//! leaves by the other port with source = that port's MAC and destination = the peer
//! given with `--eth-peer`, as Cadence's L2 forwarder does). Its forwarding lcore 1 runs
//! on CPU 1 as thread `rte-worker-1` and polls all the time; the main lcore (CPU 0) only
//! prints statistics. `SIGINT` stops it and prints the "Accumulated forward statistics".
//! `net_af_packet` cannot see the kernel dropping frames in front of its ring: only the
//! generator's count says what was lost.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The testpmd binary (package `dpdk-dev` on Debian 12).
pub const TESTPMD: &str = "dpdk-testpmd";
/// What to install on Debian 12.
pub const PACKAGES: [&str; 3] = ["dpdk-dev", "librte-net-af-packet23", "librte-net-af-xdp23"];
/// The poll-mode drivers' shared objects, looked for under `/usr/lib/*/dpdk/pmds-*/`.
pub const PMDS: [&str; 2] = ["librte_net_af_packet.so", "librte_net_af_xdp.so"];
/// The line testpmd prints once it forwards.
pub const READY: &str = "packet forwarding - ports=2 - cores=";

/// What the machine has, for [`plan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Host {
    pub testpmd: bool,
    /// Which of [`PMDS`] were found.
    pub pmds: [bool; 2],
    pub is_root: bool,
    pub has_apt: bool,
}

/// What to do about DPDK.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    Ready,
    /// `apt-get install` [`PACKAGES`].
    Install,
    /// Cannot install: what to do, for the line that says the DPDK rows are skipped.
    Manual(String),
}

/// Decides (pure; unit-tested).
pub fn plan(h: &Host) -> Plan {
    if h.testpmd && h.pmds.iter().all(|&p| p) {
        return Plan::Ready;
    }
    if h.is_root && h.has_apt {
        return Plan::Install;
    }
    let why = if h.has_apt { "not running as root" } else { "apt-get is not available" };
    let missing: Vec<&str> = std::iter::once(TESTPMD)
        .filter(|_| !h.testpmd)
        .chain(PMDS.iter().zip(h.pmds).filter(|(_, ok)| !ok).map(|(n, _)| *n))
        .collect();
    Plan::Manual(format!(
        "DPDK is missing ({}) and cannot be installed here ({why}); on Debian 12 as root: \
         apt-get install -y {}",
        missing.join(", "),
        PACKAGES.join(" ")
    ))
}

/// The directories that hold DPDK's poll-mode drivers.
fn pmd_dirs() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for lib in ["/usr/lib", "/usr/local/lib"] {
        let Ok(rd) = std::fs::read_dir(lib) else { continue };
        let mut arch: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        arch.push(PathBuf::from(lib));
        for a in arch {
            let Ok(rd) = std::fs::read_dir(a.join("dpdk")) else { continue };
            out.extend(
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("pmds-"))),
            );
        }
    }
    out
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// Whether `bin` is an executable file in `$PATH` (testpmd itself is not run: even
/// `--help` initialises the EAL).
fn in_path(bin: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p)
            .any(|d| std::fs::metadata(d.join(bin)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
    })
}

/// The installed DPDK version (`dpkg-query`), if known.
pub fn version() -> Option<String> {
    let out = Command::new("dpkg-query").args(["-W", "-f", "${Version}", "dpdk-dev"]).output().ok()?;
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !v.is_empty()).then_some(v)
}

/// Looks at this machine.
pub fn probe() -> Host {
    let dirs = pmd_dirs();
    let has = |so: &str| dirs.iter().any(|d| d.join(so).exists());
    Host {
        testpmd: in_path(TESTPMD),
        pmds: [has(PMDS[0]), has(PMDS[1])],
        is_root: is_root(),
        has_apt: Path::new("/usr/bin/apt-get").exists(),
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

/// Makes sure testpmd and both PMDs are there, installing them as root with apt-get.
/// `Err`: why not (the bench skips the DPDK rows and says so).
pub fn ensure() -> Result<()> {
    match plan(&probe()) {
        Plan::Ready => Ok(()),
        Plan::Manual(m) => bail!("{m}"),
        Plan::Install => {
            eprintln!("xtask: installing DPDK ({})", PACKAGES.join(" "));
            run(Command::new("apt-get").arg("update"))?;
            run(Command::new("apt-get")
                .args(["install", "-y", "--no-install-recommends"])
                .args(PACKAGES)
                .env("DEBIAN_FRONTEND", "noninteractive"))?;
            match plan(&probe()) {
                Plan::Ready => Ok(()),
                _ => bail!("apt-get installed {} but testpmd or a PMD is still missing", PACKAGES.join(" ")),
            }
        }
    }
}

/// The PMD kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pmd {
    AfXdp,
    AfPacket,
}

/// One testpmd run's arguments.
#[derive(Debug, Clone)]
pub struct TestpmdArgs {
    pub pmd: Pmd,
    /// The two interfaces (inside the namespace).
    pub ifaces: [String; 2],
    /// `--eth-peer` MACs, as text.
    pub peers: [String; 2],
    /// `--file-prefix` (unique per instance).
    pub prefix: String,
    /// Forwarding lcores: 1 on CPU 1, or 2 (CPUs 1 and 0; the main lcore shares CPU 0).
    pub workers: usize,
}

/// The command-line arguments after `dpdk-testpmd`.
pub fn testpmd_args(a: &TestpmdArgs) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    if a.workers >= 2 {
        v.extend(["--lcores".into(), "0@0,1@1,2@0".into()]);
    } else {
        v.extend(["-l".into(), "0,1".into()]);
    }
    v.extend(["--no-huge", "-m", "512", "--no-pci", "--file-prefix"].map(String::from));
    v.push(a.prefix.clone());
    for (i, ifname) in a.ifaces.iter().enumerate() {
        v.push("--vdev".into());
        v.push(match a.pmd {
            Pmd::AfPacket => format!("net_af_packet{i},iface={ifname},framecnt=8192,qdisc_bypass=1"),
            Pmd::AfXdp => format!("net_af_xdp{i},iface={ifname}"),
        });
    }
    v.push("--".into());
    let mbufs = match a.pmd {
        Pmd::AfPacket => 65536,
        Pmd::AfXdp => 16384,
    };
    v.push(format!("--total-num-mbufs={mbufs}"));
    v.push("--forward-mode=mac".into());
    v.push(format!("--nb-cores={}", a.workers.clamp(1, 2)));
    for (i, m) in a.peers.iter().enumerate() {
        v.push(format!("--eth-peer={i},{m}"));
    }
    v.extend(["--auto-start", "--stats-period=1"].map(String::from));
    v
}

/// testpmd's final counters ("Accumulated forward statistics for all ports").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FwdStats {
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

/// Reads the accumulated block from testpmd's output.
pub fn parse_accumulated(out: &str) -> Option<FwdStats> {
    let mut lines = out.lines().skip_while(|l| !l.contains("Accumulated forward statistics"));
    lines.next()?;
    let mut s = FwdStats::default();
    let (mut rx, mut tx) = (false, false);
    for l in lines.take(3) {
        let words: Vec<&str> = l.split_whitespace().collect();
        let val = |key: &str| {
            words.iter().position(|w| *w == key).and_then(|i| words.get(i + 1)).and_then(|v| v.parse::<u64>().ok())
        };
        if let (Some(p), Some(d)) = (val("RX-packets:"), val("RX-dropped:")) {
            (s.rx_packets, s.rx_dropped, rx) = (p, d, true);
        }
        if let (Some(p), Some(d)) = (val("TX-packets:"), val("TX-dropped:")) {
            (s.tx_packets, s.tx_dropped, tx) = (p, d, true);
        }
    }
    (rx && tx).then_some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The end of a real run on this machine (2026-12-01, af_packet, io mode).
    const EXCERPT: &str = "\
Telling cores to stop...
Waiting for lcores to finish...

  ---------------------- Forward statistics for port 0  ----------------------
  RX-packets: 7867           RX-dropped: 0             RX-total: 7867
  TX-packets: 0              TX-dropped: 0             TX-total: 0
  ----------------------------------------------------------------------------

  ---------------------- Forward statistics for port 1  ----------------------
  RX-packets: 0              RX-dropped: 0             RX-total: 0
  TX-packets: 7867           TX-dropped: 0             TX-total: 7867
  ----------------------------------------------------------------------------

  +++++++++++++++ Accumulated forward statistics for all ports+++++++++++++++
  RX-packets: 7867           RX-dropped: 0             RX-total: 7867
  TX-packets: 7867           TX-dropped: 0             TX-total: 7867
  ++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++++

Done.
";

    #[test]
    fn reads_the_accumulated_block() {
        assert_eq!(
            parse_accumulated(EXCERPT),
            Some(FwdStats { rx_packets: 7867, rx_dropped: 0, tx_packets: 7867, tx_dropped: 0 })
        );
        // The port blocks above it are not the total.
        let dropped = EXCERPT.replace(
            "TX-packets: 7867           TX-dropped: 0             TX-total: 7867\n  ++",
            "TX-packets: 7860           TX-dropped: 7             TX-total: 7867\n  ++",
        );
        assert_eq!(
            parse_accumulated(&dropped),
            Some(FwdStats { rx_packets: 7867, rx_dropped: 0, tx_packets: 7860, tx_dropped: 7 })
        );
        assert_eq!(parse_accumulated("Port 0 is closed\nBye...\n"), None, "killed before the block");
        let at = EXCERPT.find("Accumulated").unwrap();
        let cut = &EXCERPT[..at + EXCERPT[at..].find("TX-packets").unwrap()];
        assert_eq!(parse_accumulated(cut), None, "a block without its TX line");
    }

    #[test]
    fn command_lines() {
        let mut a = TestpmdArgs {
            pmd: Pmd::AfPacket,
            ifaces: ["d0".into(), "d1".into()],
            peers: ["02:00:00:00:00:01".into(), "02:00:00:00:00:02".into()],
            prefix: "cb1".into(),
            workers: 1,
        };
        let v = testpmd_args(&a).join(" ");
        assert!(v.starts_with("-l 0,1 --no-huge -m 512 --no-pci --file-prefix cb1 "), "{v}");
        assert!(v.contains("--vdev net_af_packet1,iface=d1,framecnt=8192,qdisc_bypass=1 -- "), "{v}");
        assert!(v.contains("--total-num-mbufs=65536 --forward-mode=mac --nb-cores=1"), "{v}");
        assert!(v.ends_with("--eth-peer=1,02:00:00:00:00:02 --auto-start --stats-period=1"), "{v}");
        a.pmd = Pmd::AfXdp;
        a.workers = 2;
        let v = testpmd_args(&a).join(" ");
        assert!(v.starts_with("--lcores 0@0,1@1,2@0 "), "{v}");
        assert!(v.contains("--vdev net_af_xdp0,iface=d0 --vdev net_af_xdp1,iface=d1 --"), "{v}");
        assert!(v.contains("--total-num-mbufs=16384") && v.contains("--nb-cores=2"), "{v}");
    }

    #[test]
    fn plans() {
        let h = Host { testpmd: true, pmds: [true, true], is_root: false, has_apt: false };
        assert_eq!(plan(&h), Plan::Ready);
        let root = Host { pmds: [true, false], is_root: true, has_apt: true, ..h.clone() };
        assert_eq!(plan(&root), Plan::Install);
        let user = Host { testpmd: false, is_root: false, has_apt: true, ..root.clone() };
        let Plan::Manual(m) = plan(&user) else { unreachable!("{:?}", plan(&user)) };
        assert!(m.contains("dpdk-testpmd, librte_net_af_xdp.so"), "{m}");
        assert!(m.contains("not running as root"), "{m}");
        assert!(m.contains("apt-get install -y dpdk-dev librte-net-af-packet23 librte-net-af-xdp23"), "{m}");
        let Plan::Manual(m) = plan(&Host { has_apt: false, ..user }) else { unreachable!() };
        assert!(m.contains("apt-get is not available"), "{m}");
    }
}
