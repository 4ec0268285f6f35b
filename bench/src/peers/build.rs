//! Provisioning Debian's DPDK packages and building the programs: the C peers of
//! `benches/peers/`, DPDK's l3fwd example (from `dpdk-doc`'s sources, with Cadence's hook) and
//! Cadence's `peers` bench.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use cadence_build::image;

/// What the peers need from Debian: the DPDK runtime with testpmd, its development files,
/// the example sources (l3fwd), pkg-config and a C compiler.
pub const DPDK_PACKAGES: [&str; 6] = ["dpdk", "dpdk-dev", "libdpdk-dev", "dpdk-doc", "pkg-config", "gcc"];
/// testpmd as Debian ships it.
pub const TESTPMD: &str = "dpdk-testpmd";
/// Where `dpdk-doc` puts the l3fwd example.
pub const L3FWD_SRC: &str = "/usr/share/dpdk/examples/l3fwd";
/// l3fwd's sources, as its Makefile lists them.
pub const L3FWD_FILES: [&str; 8] = [
    "main.c",
    "l3fwd_acl.c",
    "l3fwd_lpm.c",
    "l3fwd_fib.c",
    "l3fwd_em.c",
    "l3fwd_event.c",
    "l3fwd_event_generic.c",
    "l3fwd_event_internal_port.c",
];

fn runs(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd).args(args).output().is_ok_and(|o| o.status.success())
}

/// Whether everything of [`DPDK_PACKAGES`] is usable.
pub fn dpdk_present() -> bool {
    runs("pkg-config", &["--exists", "libdpdk"])
        && runs("which", &[TESTPMD])
        && runs("cc", &["--version"])
        && Path::new(L3FWD_SRC).join("main.c").is_file()
}

/// Installs the DPDK packages when missing (as root with apt-get; otherwise says what to install).
pub fn ensure_dpdk() -> Result<()> {
    cadence_build::provision::ensure_packages("the DPDK peer benches need DPDK", &DPDK_PACKAGES, dpdk_present)
}

/// The built programs.
#[derive(Debug, Clone)]
pub struct Binaries {
    pub cadence: PathBuf,
    pub hash: PathBuf,
    pub learner: PathBuf,
    pub ring: PathBuf,
    pub testpmd: PathBuf,
    /// l3fwd, or why it could not be built.
    pub l3fwd: Result<PathBuf, String>,
    /// `swx_run` (DPDK's SWX pipeline, `bench/swx/`) and its `--include` directory, or why it
    /// could not be built.
    pub swx: Result<(PathBuf, PathBuf), String>,
}

fn pkg_config(what: &str) -> Result<Vec<String>> {
    let out = Command::new("pkg-config").args([what, "libdpdk"]).output().context("running pkg-config")?;
    if !out.status.success() {
        bail!("pkg-config {what} libdpdk failed: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().map(str::to_string).collect())
}

/// `cc -O3 $(pkg-config --cflags libdpdk) -I… SOURCES -o OUT $(pkg-config --libs libdpdk)`:
/// the flags Debian's DPDK was built for (`-march=corei7`), like an application built
/// against it; Cadence's bench is built for the default x86-64 target.
fn cc(sources: &[PathBuf], includes: &[PathBuf], out: &Path) -> Result<()> {
    let mut cmd = Command::new("cc");
    cmd.args(["-O3", "-g", "-DALLOW_EXPERIMENTAL_API", "-Wall"]).args(pkg_config("--cflags")?);
    for i in includes {
        cmd.arg("-I").arg(i);
    }
    cmd.args(sources).arg("-o").arg(out).args(pkg_config("--libs")?);
    let o = cmd.output().with_context(|| format!("starting {cmd:?}"))?;
    if !o.status.success() {
        bail!("building {}: {}", out.display(), String::from_utf8_lossy(&o.stderr).trim());
    }
    Ok(())
}

/// l3fwd's `main.c` with Cadence's hook: no RX checksum offload (net_ring has none: l3fwd would
/// refuse to configure the port), `benches/peers/l3fwd_hook.h` included before `main`, and
/// `cadence_peer_start()` / `cadence_peer_stop()` around the launch of the forwarding loop.
/// Every anchor must occur exactly once, so a different l3fwd is refused, not mis-patched.
pub fn patch_l3fwd_main(src: &str) -> Result<String> {
    let edits = [
        (
            ".offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,",
            ".offloads = 0, /* Cadence peers: net_ring has no checksum offload */",
        ),
        (
            "\trte_eal_mp_remote_launch(l3fwd_lkp.main_loop, NULL, CALL_MAIN);\n",
            "\tcadence_peer_start();\n\trte_eal_mp_remote_launch(l3fwd_lkp.main_loop, NULL, CALL_MAIN);\n\tcadence_peer_stop();\n",
        ),
        ("\nint\nmain(int argc, char **argv)", "\n#include \"l3fwd_hook.h\"\n\nint\nmain(int argc, char **argv)"),
    ];
    let mut s = src.to_string();
    for (from, to) in edits {
        let n = s.matches(from).count();
        if n != 1 {
            bail!("l3fwd main.c: expected one '{}', found {n}", from.trim());
        }
        s = s.replacen(from, to, 1);
    }
    Ok(s)
}

fn build_l3fwd(peers: &Path, out: &Path) -> Result<PathBuf> {
    let src = Path::new(L3FWD_SRC);
    let dir = out.join("l3fwd-src");
    std::fs::create_dir_all(&dir)?;
    for e in std::fs::read_dir(src).with_context(|| format!("reading {}", src.display()))? {
        let p = e?.path();
        if p.is_file() {
            std::fs::copy(&p, dir.join(p.file_name().unwrap_or_default()))?;
        }
    }
    let main = std::fs::read_to_string(dir.join("main.c"))?;
    std::fs::write(dir.join("main.c"), patch_l3fwd_main(&main)?)?;
    let bin = out.join("l3fwd");
    let sources: Vec<PathBuf> = L3FWD_FILES.iter().map(|f| dir.join(f)).collect();
    cc(&sources, &[src.join("../common"), peers.to_path_buf()], &bin)?;
    Ok(bin)
}

/// Builds Cadence's `peers` bench (release, bench profile) and returns the executable.
fn cadence_bench() -> Result<PathBuf> {
    let out = image::cargo()
        .current_dir(image::workspace_root())
        .args(["bench", "-p", "cadence-core", "--bench", "peers", "--no-run", "--message-format=json"])
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo bench --no-run")?;
    if !out.status.success() {
        bail!("building the peers bench failed");
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["reason"] == "compiler-artifact" && v["target"]["name"] == "peers")
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .context("cargo did not report the peers bench executable")
}

/// Builds everything into `out` (the C peers each time: they take a second).
pub fn build_all(out: &Path) -> Result<Binaries> {
    let peers = image::workspace_root().join("benches").join("peers");
    std::fs::create_dir_all(out)?;
    let c = |name: &str| -> Result<PathBuf> {
        let bin = out.join(format!("peer_{name}"));
        cc(&[peers.join(format!("{name}.c"))], std::slice::from_ref(&peers), &bin)?;
        Ok(bin)
    };
    let (hash, learner, ring) = (c("hash")?, c("learner")?, c("ring")?);
    let l3fwd = build_l3fwd(&peers, out).map_err(|e| format!("{e:#}"));
    let testpmd = which(TESTPMD).with_context(|| format!("{TESTPMD} is not on PATH"))?;
    let swx = crate::swx::Runner::build().map(|r| (r.bin, r.include)).map_err(|e| format!("{e:#}"));
    Ok(Binaries { cadence: cadence_bench()?, hash, learner, ring, testpmd, l3fwd, swx })
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAIN: &str = "static struct rte_eth_conf port_conf = {\n\t.rxmode = {\n\t\t.offloads = RTE_ETH_RX_OFFLOAD_CHECKSUM,\n\t},\n};\n\
                        \nint\nmain(int argc, char **argv)\n{\n\tret = 0;\n\
                        \trte_eal_mp_remote_launch(l3fwd_lkp.main_loop, NULL, CALL_MAIN);\n\trte_eal_mp_wait_lcore();\n}\n";

    #[test]
    fn patches_l3fwd() {
        let p = patch_l3fwd_main(MAIN).expect("patched");
        assert!(p.contains(".offloads = 0,"));
        assert!(!p.contains("RTE_ETH_RX_OFFLOAD_CHECKSUM"));
        let include = p.find("#include \"l3fwd_hook.h\"").expect("include");
        assert!(include < p.find("main(int argc").expect("main"));
        let start = p.find("cadence_peer_start();").expect("start");
        let launch = p.find("rte_eal_mp_remote_launch").expect("launch");
        let stop = p.find("cadence_peer_stop();").expect("stop");
        assert!(start < launch && launch < stop);
    }

    #[test]
    fn refuses_an_l3fwd_it_does_not_know() {
        let e = patch_l3fwd_main(&MAIN.replace("CALL_MAIN", "SKIP_MAIN")).unwrap_err();
        assert!(e.to_string().contains("found 0"), "{e}");
        let twice = format!("{MAIN}{MAIN}");
        assert!(patch_l3fwd_main(&twice).is_err());
    }

    #[test]
    fn patches_the_shipped_l3fwd_when_installed() {
        let Ok(main) = std::fs::read_to_string(Path::new(L3FWD_SRC).join("main.c")) else {
            return; // dpdk-doc not installed here: the fixture above covers the edits
        };
        patch_l3fwd_main(&main).expect("Debian's l3fwd main.c takes the hook");
    }
}
