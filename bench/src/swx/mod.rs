//! DPDK 22.11's SWX pipeline as a reference runner: the independent implementation that
//! Cadence's P4 executor is compared against frame by frame (issue 28, item 5).
//!
//! [`Runner::build`] provisions what it needs — Debian's DPDK packages ([`ensure_packages`]) and
//! DPDK's two internal headers ([`headers::ensure_headers`]) — and compiles `bench/swx/swx_run.c`
//! once into `target/swx/` (cached by the hash of its source, the headers and the compiler
//! flags). [`Runner::run`] writes the frames to a pcap, runs `swx_run` (codegen of the spec to C,
//! `gcc -O3 -fpic` to a shared object, the pipeline built from it with ring ports, the table
//! files loaded through `rte_swx_ctl_pipeline_*`, then the frames one at a time) and reads back
//! every output frame with its input index and output port. See `swx_run.c` for the exact
//! contract, and its output record format.
//!
//! What DPDK's pipeline leaves undefined, which a comparison must not count as a match or a
//! difference, and what the runner does about it:
//! - metadata and header storage are not cleared between packets (a spec reading a field it
//!   never wrote sees an earlier packet's value): [`Job::fresh`] runs every frame from a zeroed
//!   state, so running both ways tells the frames that depend on earlier ones;
//! - `extract` does not check the frame's length: frame buffers are zeroed before each frame (a
//!   runt's missing bytes read as zeros), and an output whose wrapped length runs past its
//!   buffer is reported as [`Output::overrun`], not read;
//! - a `tx` port is not checked: the port after the configured ones is DPDK's drop port, and
//!   beyond it DPDK reads past its port array — the runner names the frame it crashed on;
//! - a spec can recirculate forever: the runner stops after a bound of pipeline steps a frame;
//! - learner timeouts and meters read the TSC: runs are reproducible while no timeout can
//!   expire. Frames go in one at a time, so a `learn` is always seen by the next frame (in
//!   DPDK's own bursts of up to 16 it may not be).

pub mod headers;
pub mod sets;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result, bail, ensure};

use cadence_build::workspace::{target_dir, workspace_root};

/// What the runner needs from Debian: DPDK's development files (the SWX pipeline library and
/// its public headers), the example specs (`dpdk-doc`), pkg-config, gcc, and xz for unpacking
/// the source tarball the internal headers come from.
pub const PACKAGES: [&str; 5] = ["libdpdk-dev", "dpdk-doc", "pkg-config", "gcc", "xz-utils"];
/// Where `dpdk-doc` puts the SWX pipeline's example specs and their table files.
pub const EXAMPLES: &str = "/usr/share/dpdk/examples/pipeline/examples";
/// The runner's source, relative to the workspace root.
pub const SOURCE: &str = "bench/swx/swx_run.c";
/// EAL arguments that work without hugepages or PCI devices (`-m 512` is too small for the
/// selector specs); `-l` with the first CPU this process may run on ([`first_cpu`]) and a
/// unique `--file-prefix` are added per run.
pub const EAL: [&str; 7] =
    ["--no-pci", "--no-huge", "--no-shconf", "-m", "2048", "--no-telemetry", "--log-level=*:warning"];

/// The first CPU of `Cpus_allowed_list` in `/proc/self/status` (a container may not have CPU
/// 0, and EAL refuses an lcore it cannot run on); 0 when it cannot be read.
pub fn first_cpu() -> u32 {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| parse_first_cpu(&s)).unwrap_or(0)
}

/// The first CPU of a `Cpus_allowed_list:` line, e.g. `2-5,8` → 2.
pub fn parse_first_cpu(status: &str) -> Option<u32> {
    let list = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?.trim();
    list.split([',', '-']).next()?.trim().parse().ok()
}

fn runs(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd).args(args).output().is_ok_and(|o| o.status.success())
}

/// Whether everything of [`PACKAGES`] is usable.
pub fn packages_present() -> bool {
    runs("pkg-config", &["--exists", "libdpdk"])
        && runs("gcc", &["--version"])
        && runs("xz", &["--version"])
        && Path::new(EXAMPLES).join("l2fwd.spec").is_file()
}

/// Installs [`PACKAGES`] when missing (as root with apt-get; otherwise says what to install).
pub fn ensure_packages() -> Result<()> {
    cadence_build::provision::ensure_packages(
        "the SWX reference runner needs DPDK's pipeline library, its example specs and gcc",
        &PACKAGES,
        packages_present,
    )
}

/// One input frame and the pipeline input port it enters on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub port: u32,
    pub bytes: Vec<u8>,
}

/// One output frame: which input frame it came from (0-based), the output port, the bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub input: usize,
    pub port: u32,
    pub bytes: Vec<u8>,
    /// `Some(length)`: DPDK sent a frame whose length runs past its buffer (a runt whose
    /// extracted headers were longer than it: its length wrapped); `bytes` is then empty. Such a
    /// frame is undefined for a comparison.
    pub overrun: Option<u32>,
}

/// A spec and what to run it with.
#[derive(Debug, Clone)]
pub struct Job {
    pub spec: PathBuf,
    /// `(table, selector or learner name, file)`, loaded in this order.
    pub tables: Vec<(String, PathBuf)>,
    /// Output ports (input ports: this rounded up to a power of two).
    pub ports: u32,
    /// Packet mirroring sessions to set.
    pub mirrors: Vec<Mirror>,
    /// Every frame starts from zeroed metadata and header storage, as in a new pipeline
    /// (`swx_run --fresh`); otherwise it sees what earlier frames left, as in DPDK.
    pub fresh: bool,
}

/// A packet mirroring session: where the copies of the packets marked for it go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mirror {
    pub session: u32,
    pub port: u32,
    /// Fast clone (the copy shares the packet's buffer) or slow (a copy of the bytes).
    pub fast: bool,
    /// The length copies are cut to; 0: whole.
    pub truncate: u32,
}

impl Job {
    /// A job on one of `dpdk-doc`'s example specs (`name` without `.spec`).
    pub fn example(name: &str, ports: u32) -> Self {
        Self::new(Path::new(EXAMPLES).join(format!("{name}.spec")), ports)
    }

    /// A job on the spec at `spec`.
    pub fn new(spec: impl Into<PathBuf>, ports: u32) -> Self {
        Self { spec: spec.into(), tables: Vec::new(), ports, mirrors: Vec::new(), fresh: false }
    }

    /// Sets a packet mirroring session.
    pub fn mirror(mut self, m: Mirror) -> Self {
        self.mirrors.push(m);
        self
    }

    /// Adds a table file (`file` relative to [`EXAMPLES`] unless absolute).
    pub fn table(mut self, name: &str, file: impl AsRef<Path>) -> Self {
        self.tables.push((name.to_string(), Path::new(EXAMPLES).join(file)));
        self
    }
}

/// The built runner.
#[derive(Debug, Clone)]
pub struct Runner {
    pub bin: PathBuf,
    pub include: PathBuf,
}

/// FNV-1a, for the runner's cache key (stable across Rust versions, unlike `DefaultHasher`).
fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

fn pkg_config(what: &str) -> Result<String> {
    let out = Command::new("pkg-config").args([what, "libdpdk"]).output().context("running pkg-config")?;
    ensure!(out.status.success(), "pkg-config {what} libdpdk: {}", String::from_utf8_lossy(&out.stderr).trim());
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

static RUN_ID: AtomicU32 = AtomicU32::new(0);

impl Runner {
    /// Provisions the packages and headers, and builds `swx_run` unless an identical build is
    /// cached.
    pub fn build() -> Result<Self> {
        ensure_packages()?;
        let include = headers::ensure_headers()?;
        let src = workspace_root().join(SOURCE);
        let code = std::fs::read(&src).with_context(|| format!("reading {}", src.display()))?;
        let (cflags, libs) = (pkg_config("--cflags")?, pkg_config("--libs")?);
        let mut key = fnv(0xcbf2_9ce4_8422_2325, &code);
        for h in headers::HEADERS {
            key = fnv(key, &std::fs::read(include.join(h))?);
        }
        key = fnv(fnv(key, cflags.as_bytes()), libs.as_bytes());
        let dir = target_dir().join("swx");
        let bin = dir.join(format!("swx_run-{key:016x}"));
        if !bin.is_file() {
            std::fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!("swx_run.tmp-{}", std::process::id()));
            let out = Command::new("gcc")
                .args(["-O2", "-g", "-Wall", "-Wextra", "-Werror", "-DALLOW_EXPERIMENTAL_API"])
                .args(cflags.split_whitespace())
                .arg("-I")
                .arg(&include)
                .arg(&src)
                .arg("-o")
                .arg(&tmp)
                .args(libs.split_whitespace())
                .output()
                .context("starting gcc")?;
            if !out.status.success() {
                bail!("building {} failed:\n{}", src.display(), String::from_utf8_lossy(&out.stderr).trim());
            }
            std::fs::rename(&tmp, &bin).with_context(|| format!("moving the runner to {}", bin.display()))?;
            // Builds of other sources or headers are stale now.
            for e in std::fs::read_dir(&dir)?.filter_map(Result::ok) {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.starts_with("swx_run-") && e.path() != bin {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        Ok(Self { bin, include })
    }

    /// `swx_run` with its EAL arguments (a unique `--file-prefix`, also returned), `--` and
    /// `--include`: ready for the rest of the runner's arguments (`--spec`, `--ports`, …).
    pub fn command(&self) -> (Command, String) {
        let id = RUN_ID.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("swx{}_{id}", std::process::id());
        let mut cmd = Command::new(&self.bin);
        cmd.args(EAL).args(["-l", &first_cpu().to_string(), "--file-prefix", &prefix, "--", "--include"]);
        cmd.arg(&self.include);
        (cmd, prefix)
    }

    /// Runs `job` on `frames`; the outputs in input order, then port order.
    pub fn run(&self, job: &Job, frames: &[Frame]) -> Result<Vec<Output>> {
        let (mut cmd, prefix) = self.command();
        let dir = std::env::temp_dir().join(format!("cadence-{prefix}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let (input, ports, out) = (dir.join("in.pcap"), dir.join("in.ports"), dir.join("out.txt"));
        std::fs::write(&input, pcap(frames))?;
        cmd.arg("--spec").arg(&job.spec).args(["--ports", &job.ports.to_string()]);
        cmd.arg("--in").arg(&input).arg("--out").arg(&out).arg("--work").arg(dir.join("work"));
        if frames.iter().any(|f| f.port != 0) {
            let mut f = std::fs::File::create(&ports)?;
            for fr in frames {
                writeln!(f, "{}", fr.port)?;
            }
            cmd.arg("--in-ports").arg(&ports);
        }
        for (name, file) in &job.tables {
            cmd.arg("--table").arg(name).arg(file);
        }
        if job.fresh {
            cmd.arg("--fresh");
        }
        for m in &job.mirrors {
            let clone = if m.fast { "fast" } else { "slow" };
            cmd.arg("--mirror").args([m.session.to_string(), m.port.to_string(), clone.into(), m.truncate.to_string()]);
        }
        let result = run_and_read(&mut cmd, job, &out);
        let _ = std::fs::remove_dir_all(&dir);
        result
    }
}

fn run_and_read(cmd: &mut Command, job: &Job, out: &Path) -> Result<Vec<Output>> {
    let o = cmd.output().with_context(|| format!("starting {:?}", cmd.get_program()))?;
    if !o.status.success() {
        bail!("swx_run on {} failed ({}): {}", job.spec.display(), o.status, String::from_utf8_lossy(&o.stderr).trim());
    }
    let text = std::fs::read_to_string(out).with_context(|| format!("reading {}", out.display()))?;
    parse_outputs(&text)
}

/// A classic pcap (v2.4, microseconds, Ethernet) of the frames, each stamped with its index.
pub fn pcap(frames: &[Frame]) -> Vec<u8> {
    let mut v = Vec::with_capacity(24 + frames.iter().map(|f| 16 + f.bytes.len()).sum::<usize>());
    for w in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        v.extend_from_slice(&w.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        let len = u32::try_from(f.bytes.len()).unwrap_or(u32::MAX);
        for w in [u32::try_from(i).unwrap_or(u32::MAX), 0, len, len] {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v.extend_from_slice(&f.bytes);
    }
    v
}

/// Parses `swx_run`'s output records: `INPUT_INDEX OUTPUT_PORT HEX_BYTES` a line, or
/// `INPUT_INDEX OUTPUT_PORT !LENGTH` for a frame whose length runs past its buffer.
pub fn parse_outputs(text: &str) -> Result<Vec<Output>> {
    text.lines()
        .enumerate()
        .map(|(n, l)| {
            let mut w = l.split(' ');
            let (Some(i), Some(p), Some(h), None) = (w.next(), w.next(), w.next(), w.next()) else {
                bail!("output line {}: not 'INDEX PORT HEX': {l:?}", n + 1);
            };
            let input = i.parse().with_context(|| format!("output line {}: bad index {i:?}", n + 1))?;
            let port = p.parse().with_context(|| format!("output line {}: bad port {p:?}", n + 1))?;
            if let Some(len) = h.strip_prefix('!') {
                let len = len.parse().with_context(|| format!("output line {}: bad length {len:?}", n + 1))?;
                return Ok(Output { input, port, bytes: Vec::new(), overrun: Some(len) });
            }
            ensure!(h.len() % 2 == 0, "output line {}: odd number of hex digits", n + 1);
            let bytes = (0..h.len())
                .step_by(2)
                .map(|k| u8::from_str_radix(&h[k..k + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .with_context(|| format!("output line {}: bad hex", n + 1))?;
            Ok(Output { input, port, bytes, overrun: None })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_records() {
        let o = parse_outputs("0 1 aabb\n3 0 \n4 2 !4294967290\n").expect("parsed");
        assert_eq!(
            o,
            vec![
                Output { input: 0, port: 1, bytes: vec![0xaa, 0xbb], overrun: None },
                Output { input: 3, port: 0, bytes: vec![], overrun: None },
                Output { input: 4, port: 2, bytes: vec![], overrun: Some(4_294_967_290) }
            ]
        );
        assert!(parse_outputs("0 1 !x\n").is_err());
        assert!(parse_outputs("0 1\n").is_err());
        assert!(parse_outputs("0 1 abc\n").is_err());
        assert!(parse_outputs("0 1 zz\n").is_err());
        assert!(parse_outputs("x 1 aa\n").is_err());
        assert!(parse_outputs("0 1 aa bb\n").is_err());
        assert!(parse_outputs("").expect("empty").is_empty());
    }

    #[test]
    fn reads_the_first_allowed_cpu() {
        assert_eq!(parse_first_cpu("Name:\tx\nCpus_allowed_list:\t2-5,8\n"), Some(2));
        assert_eq!(parse_first_cpu("Cpus_allowed_list:\t0\n"), Some(0));
        assert_eq!(parse_first_cpu("Cpus_allowed_list:\t7,9\n"), Some(7));
        assert_eq!(parse_first_cpu("Cpus_allowed:\tff\n"), None);
        assert_eq!(parse_first_cpu("Cpus_allowed_list:\t\n"), None);
    }

    #[test]
    fn writes_pcap() {
        let p = pcap(&[Frame { port: 0, bytes: vec![1, 2, 3] }, Frame { port: 1, bytes: vec![4] }]);
        assert_eq!(p.len(), 24 + 16 + 3 + 16 + 1);
        assert_eq!(&p[..4], &0xa1b2_c3d4u32.to_le_bytes());
        assert_eq!(&p[20..24], &1u32.to_le_bytes(), "Ethernet");
        assert_eq!(&p[24 + 8..24 + 16], &[3, 0, 0, 0, 3, 0, 0, 0], "lengths");
        assert_eq!(&p[24 + 16..24 + 19], &[1, 2, 3]);
        assert_eq!(&p[43..47], &1u32.to_le_bytes(), "the second frame is stamped 1 s");
    }
}
