//! `cargo xtask bench hosted`: the hosted dataplane measured end to end at speed on veth
//! pairs, side by side with DPDK testpmd on the same kernel interfaces, plus Metronome's
//! CPU-proportional-to-load study.
//!
//! The rig (2 vCPUs): one thread pinned to CPU 0 generates and sinks ([`generator`]), the
//! dataplane's worker runs on CPU 1. On veth the kernel's receive path of a frame runs on
//! the CPU that sent it: CPU 0 pays for delivering frames into the dataplane's socket
//! (AF_XDP copy or `AF_PACKET` copy), CPU 1 for delivering its output into the sink's
//! ring. The ceiling (generator → veth → sink, nothing between) puts all of that on CPU 0.
//!
//! Parts:
//! - [`frames`]: tagged IPv4/UDP frames (flow, sequence, TSC), 64 B and IMIX;
//! - [`generator`]: generator + sink thread (TSC token bucket, TPACKET_V3 rings or sendmmsg);
//! - [`tally`]: loss, duplicates, reordering, latency percentiles, exactly;
//! - [`stamped`]: a `TPACKET_V3` reader that keeps the kernel's receive timestamps;
//! - [`rawsock`]: a send-only packet socket (control frames, `sendmmsg`);
//! - [`search`]: RFC 2544 throughput search with rig-limited trials set apart;
//! - [`dut`]: Cadence hosted, testpmd and the ceiling, each in a namespace of its own;
//! - [`dpdk`]: testpmd provisioning, command line and output;
//! - [`sysstat`]: per-thread CPU and the noise guard from `/proc`;
//! - [`hosted`]: the study; [`report`]: results, CSV and SVG files; [`summary`]: the
//!   tables, ratios and targets; [`plot`]: SVG charts.
//!
//! Latency: in the latency and Metronome phases, the kernel's receive timestamp of each
//! frame in the sink's ring minus its send TSC mapped to `CLOCK_REALTIME` ([`stamped`]).
//! The throughput search's sink (`drivers::tpacket::TpacketRx`) only knows when its poll
//! found a frame, which includes waiting for the `TPACKET_V3` block to be handed over
//! (full at ≈ 28 frames of 64 B, or after 1 ms): its latency columns say `sink-poll`.

pub mod dpdk;
#[allow(unsafe_code)] // signals to the dataplane under test, PR_SET_PDEATHSIG before exec
pub mod dut;
pub mod frames;
pub mod generator;
pub mod hosted;
pub mod plot;
#[allow(unsafe_code)] // an AF_PACKET socket bound to an interface
pub mod rawsock;
pub mod report;
pub mod search;
pub mod stamped;
pub mod summary;
#[allow(unsafe_code)] // sysconf(_SC_CLK_TCK)
pub mod sysstat;
pub mod tally;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};

/// Set in the environment of the release build this command re-runs itself as.
const REEXEC_ENV: &str = "CADENCE_BENCH_RELEASE";

/// Options of `cargo xtask bench hosted`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Interleaved rounds of the throughput search (quiet ones wanted).
    pub rounds: u32,
    /// Rounds at most, counting noisy ones (default `rounds + 2`).
    pub max_rounds: Option<u32>,
    /// One round, fewer points, short trials (a smoke run).
    pub quick: bool,
    /// Output directory (default `target/bench/hosted`).
    pub out: Option<PathBuf>,
    /// Seconds of sending per trial (default 2, quick 0.5).
    pub trial_secs: Option<f64>,
    /// Flows per trial.
    pub flows: u16,
    /// Only devices whose name contains one of these (empty: all).
    pub only: Vec<String>,
    /// Skip the Metronome CPU-vs-load study.
    pub no_metronome: bool,
    /// Generator transmit path: `ring`, `sendmmsg` or `auto` (measure both, keep the faster).
    pub tx: String,
    /// Seconds to wait for other processes to use ≤ 0.2 CPUs before a measurement (and
    /// before repeating a noisy trial).
    pub wait_quiet_s: f64,
    /// Boot options added to every Cadence device's command line (after the bench's own,
    /// so they win).
    pub cadence_args: Vec<String>,
}

/// Runs `study` (`hosted`). A debug build of xtask re-runs itself as a release build: the
/// generator needs optimized code to reach the rates measured here.
pub fn main(study: &str, opts: &Options) -> Result<ExitCode> {
    if cfg!(debug_assertions) && std::env::var_os(REEXEC_ENV).is_none() {
        let args: Vec<String> = std::env::args().skip(1).collect();
        eprintln!(
            "xtask: bench needs an optimized generator: running `cargo run --release -p xtask -- {}`",
            args.join(" ")
        );
        let st = cadence_build::image::cargo()
            .current_dir(cadence_build::image::workspace_root())
            .args(["run", "--release", "--quiet", "-p", "xtask", "--"])
            .args(&args)
            .env(REEXEC_ENV, "1")
            .status()
            .context("re-running xtask in release")?;
        return Ok(if st.success() { ExitCode::SUCCESS } else { ExitCode::FAILURE });
    }
    match study {
        "hosted" => hosted::run(opts).map(|()| ExitCode::SUCCESS),
        other => anyhow::bail!("unknown bench study {other} (known: hosted)"),
    }
}
