//! `cargo xtask build | run | test | …` (the alias lives in `.cargo/config.toml`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use cadence_build::image::{self, Profile};
use cadence_harness::traffic::Sizes;
use clap::{Parser, Subcommand};
use xtask::run::{self, RunOptions};

#[derive(Debug, Parser)]
#[command(name = "cargo xtask", about = "Cadence developer commands")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

// One value per invocation: the size difference between subcommands costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Cmd {
    /// Build the image (release, DEFMT_LOG=info unless set) and print its path.
    Build {
        /// Debug profile instead of release.
        #[arg(long)]
        debug: bool,
        /// The machine: x86_64 (the ELF QEMU q35 boots by PVH) or aarch64 (the arm64
        /// `Image` for QEMU virt).
        #[arg(long, default_value = "x86_64", value_parser = ["x86_64", "aarch64"])]
        arch: String,
    },
    /// Build the image, boot it in QEMU with two virtio-net NICs, push traffic through
    /// it, check every frame that comes back, stop it, report.
    Run {
        /// Seconds of traffic.
        #[arg(long, default_value_t = 10)]
        seconds: u64,
        /// Offered load in frames per second (token bucket).
        #[arg(long, default_value_t = run::DEFAULT_RATE)]
        rate: u64,
        /// Number of flows (IPv4/UDP, IPv4/TCP, IPv6/UDP, IPv6/TCP in turn; flows 0-3
        /// enter port 0, 4-7 port 1, and so on).
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
        flows: u16,
        /// Frame sizes: MIN-MAX (uniform) or imix (7:4:1 of 60/566/1514). Sizes are
        /// Ethernet frames without the 4-byte FCS, 60..=1514: "64 B" on the wire is 60
        /// here. Each flow's smallest frame is its headers plus an 18-byte tag (60 B
        /// IPv4/UDP, 72 IPv4/TCP, 80 IPv6/UDP, 92 IPv6/TCP); smaller sizes are raised.
        #[arg(long, default_value = "60-1514")]
        sizes: Sizes,
        /// Seed of the flow/size choices.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Also write the machine-readable summary here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Use KVM (`-accel kvm -cpu EPYC`) when /dev/kvm is usable; TCG otherwise.
        #[arg(long)]
        kvm: bool,
        /// Guest cores.
        #[arg(long, default_value_t = 1)]
        smp: u32,
        /// More boot options (`key=value ...`) appended to the kernel command line.
        #[arg(long, default_value = "", allow_hyphen_values = true)]
        extra_append: String,
        /// Debug build of the image.
        #[arg(long)]
        debug: bool,
        /// Worker cores (the guest gets at least this many vCPUs).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
        workers: u32,
        /// Queue pairs per NIC, one lane each. Above 1 with virtio-net this uses tap
        /// backends with multi-queue (needs root).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
        lanes: u16,
        /// Worker scheduling: metronome (sleep between rounds) or poll (busy polling).
        #[arg(long, default_value = "metronome", value_parser = ["metronome", "poll"])]
        sched: String,
        /// NIC model: virtio-net or igb (Intel 82576; RSS inside QEMU, no root needed).
        #[arg(long, default_value = "virtio-net", value_parser = ["virtio-net", "igb"])]
        nic: String,
        /// The NF chain (a TOML file, see chains/), passed to the image as boot module 0;
        /// `none` runs the plain L2 forwarder. The checker expects what the chain does.
        #[arg(long, default_value = run::DEFAULT_CHAIN)]
        chain: String,
        /// A NetBlaze profile (`cargo xtask profile` writes them: chains/*.profile) to pass
        /// with the chain: with RSS over two lanes or more, the server mapper then moves
        /// RSS buckets between queues every `mapper_ms` (docs/PROTOCOL.md).
        #[arg(long)]
        profile: Option<PathBuf>,
        /// Record every frame that comes out of the image (both ports) to this pcap file.
        #[arg(long)]
        pcap: Option<PathBuf>,
        /// Run the hosted Linux build instead of the image: in a network namespace of its
        /// own, on two veth pairs whose far ends carry the generator and checker (root).
        #[arg(long)]
        hosted: bool,
        /// The hosted build's port I/O: af_xdp (XDP redirect program + AF_XDP sockets),
        /// af_packet (TPACKET_V3 rings), or auto (AF_XDP, falling back to AF_PACKET).
        #[arg(long, default_value = "auto", value_parser = ["af_xdp", "af_packet", "auto"])]
        io: String,
        /// One more argument for the hosted binary (repeatable), e.g. `--hosted-arg=--cpus=1`.
        #[arg(long = "hosted-arg", allow_hyphen_values = true)]
        hosted_args: Vec<String>,
        /// The machine to boot: x86_64 (QEMU q35) or aarch64 (QEMU virt with GICv3 and
        /// Cortex-A72 cores, TCG).
        #[arg(long, default_value = "x86_64", value_parser = ["x86_64", "aarch64"])]
        arch: String,
        /// With --hosted: instead of the generator and checker, real Linux hosts around
        /// Cadence. `router`: four hosts (ports 0, 1, 2, and VLAN 100 of port 2) in namespaces of their own whose only route is a
        /// default via Cadence (chains/router.toml unless --chain names another); pings,
        /// traceroute and path MTU as a user would try them, then Cadence's neighbour, ICMP
        /// and forwarding counters.
        #[arg(long, value_parser = ["router"], requires = "hosted")]
        topology: Option<String>,
        /// A rack of N hosted Cadence servers (1 worker each; 2 fit a 2-vCPU machine) behind
        /// Open vSwitch, with the rack controller (NetBlaze's ingress mapper) and a generator
        /// of N + 1 aggregates; checks every frame once and in order (docs/NETBLAZE.md).
        #[arg(long, conflicts_with = "topology")]
        rack: Option<u32>,
    },
    /// Run a simulator study, writing CSV and SVG files: `metronome` (the Metronome sweep
    /// of CPU share, vacation and T_S against offered load for M = 1..4, and equal timeouts
    /// vs primary/backup) or `netblaze` (NetBlaze against static RSS, Metron-, Quadrant- and
    /// Dyssect-like policies on the campus and backbone traces, and the ingress mapper at
    /// rack scale; docs/NETBLAZE.md).
    Sim {
        /// The study to run.
        #[arg(value_parser = ["metronome", "netblaze"])]
        study: String,
        /// Output directory (default: target/sim/<study>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// More arguments for the study (`cargo xtask sim netblaze -- --seconds 10`).
        #[arg(last = true)]
        rest: Vec<String>,
    },
    /// The operator's commands (`cadence-ctl`'s): `ctl` (one management command to a
    /// running dataplane), `chain` (a chain file checked and converted), `profile` (NetBlaze's
    /// capacity predictor measured).
    #[command(flatten)]
    Ops(cadence_ctl::cli::Cmd),
    /// Cadence side by side with DPDK in the same run: builds the DPDK peer programs
    /// (benches/peers/, installing Debian's DPDK packages when missing) and Cadence's
    /// `peers` bench, runs interleaved rounds on 4 KiB and 2 MiB pages, refuses rounds in
    /// which other processes used more than 0.2 CPUs, and prints one table of ratios
    /// (Cadence / peer); CSV and SVG go to target/bench/peers/.
    Peers {
        /// Accepted rounds wanted.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
        rounds: u32,
        /// Rounds tried at most, counting refused ones (default: twice --rounds).
        #[arg(long)]
        max_rounds: Option<u32>,
        /// Page sizes: 4k, 2M or both.
        #[arg(long, default_value = "both", value_parser = ["4k", "2M", "both"])]
        pages: String,
        /// Samples per figure in each program.
        #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=63))]
        samples: u32,
        /// Seconds of forwarding per testpmd / l3fwd run.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=60))]
        seconds: u64,
        /// The least time each table figure's samples span, in milliseconds.
        #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(0..=10_000))]
        table_ms: u64,
        /// Only these groups (comma-separated): tables-64K, tables-1M, io, macswap, l3fwd, ring, acl.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
        /// Output directory (default: target/bench/peers).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Before each round, wait up to this many seconds for a quiet machine (others using
        /// at most 0.2 CPUs over 2 s); a round that turns noisy is still refused.
        #[arg(long, default_value_t = 0)]
        wait_quiet: u64,
    },
    /// Run a P4 pipeline spec through DPDK 22.11's SWX pipeline, the reference runner
    /// (bench/swx/swx_run.c; provisions DPDK's packages and internal headers, builds the
    /// runner once): `cargo xtask swx -- --spec S --ports N --in IN.pcap --out OUT [--table
    /// NAME FILE]... [--in-ports FILE] [--out-pcap PREFIX] [--mirror SESSION PORT fast|slow
    /// TRUNCATE]... [--fresh]`. OUT gets one line per output frame, `INPUT_INDEX OUTPUT_PORT
    /// HEX`; docs/P4.md.
    Swx {
        /// The runner's arguments (after `--`).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Everything: fmt check, clippy (host and bare metal), the loom models, Miri, a short
    /// run of every fuzz target, QEMU provisioning, the image build, and `cargo test
    /// --workspace` (unit tests and QEMU end-to-end tests).
    Test,
    /// Benchmark a study end to end (`hosted`: the hosted dataplane at speed on veth pairs,
    /// side by side with DPDK testpmd, RFC 2544 zero-loss rates, latency, and Metronome's
    /// CPU against load), writing CSV and SVG files. Root; two or more CPUs.
    Bench {
        /// The study to run.
        #[arg(value_parser = ["hosted"])]
        study: String,
        /// Interleaved rounds of the throughput search (each runs every device once, in
        /// rotating order); up to two more run when a round was noisy.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=20))]
        rounds: u32,
        /// Rounds at most, noisy ones included (default: rounds + 2).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=40))]
        max_rounds: Option<u32>,
        /// A smoke run: one round, short trials, loads 0/50/100 % only.
        #[arg(long)]
        quick: bool,
        /// Output directory (default: target/bench/hosted).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Seconds of sending per trial (default 2; 0.5 with --quick).
        #[arg(long)]
        trial_secs: Option<f64>,
        /// Flows per trial.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u16).range(1..))]
        flows: u16,
        /// Only the devices whose name contains this (repeatable), e.g. `--only testpmd`.
        #[arg(long)]
        only: Vec<String>,
        /// Skip the Metronome CPU-vs-load study.
        #[arg(long)]
        no_metronome: bool,
        /// Generator transmit path: ring (TPACKET_V3), sendmmsg, or auto (measure both on
        /// the ceiling, keep the faster).
        #[arg(long, default_value = "auto", value_parser = ["auto", "ring", "sendmmsg"])]
        tx: String,
        /// Seconds to wait for other processes to use at most 0.2 CPUs before each
        /// measurement; a noisy trial is repeated once the machine is quiet, or kept (and
        /// its round flagged) when it does not get quiet within this.
        #[arg(long, default_value_t = 300.0)]
        wait_quiet: f64,
        /// One more boot option for every Cadence device (repeatable), e.g.
        /// `--cadence-arg qsize=1024` or `--cadence-arg line_mbps=300`; recorded in the
        /// facts file and the report.
        #[arg(long = "cadence-arg", allow_hyphen_values = true)]
        cadence_args: Vec<String>,
    },
    /// Every verification step of `cargo xtask test`, exactly as it runs them: the loom
    /// models, Miri, the no-allocation test, every fuzz target for a few seconds.
    Verify,
    /// The loom models of `cadence-core` (`--cfg loom`, release, target/loom).
    Loom,
    /// `cadence-core`'s and `cadence-drivers`' library tests under Miri (installs nightly's
    /// miri component when missing).
    Miri,
    /// Run the fuzz targets (cargo-fuzz on nightly; installed when missing): TARGET or each
    /// in turn, from the seed corpus in fuzz/corpus/, new inputs to target/fuzz/.
    Fuzz {
        /// One target (default: all of them, one after the other).
        target: Option<String>,
        /// Seconds per target.
        #[arg(long, conflicts_with = "runs")]
        seconds: Option<u64>,
        /// Executions per target instead of a time limit.
        #[arg(long)]
        runs: Option<u64>,
    },
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<ExitCode> {
    match Cli::parse().cmd {
        Cmd::Build { debug, arch } => {
            let profile = if debug { Profile::Debug } else { Profile::Release };
            let p = match arch.as_str() {
                "aarch64" => cadence_build::aarch64::build_firmware(profile)?,
                _ => image::build(profile)?,
            };
            println!("{}", p.display());
        }
        Cmd::Run {
            seconds,
            rate,
            flows,
            sizes,
            seed,
            json,
            kvm,
            smp,
            extra_append,
            debug,
            workers,
            lanes,
            sched,
            nic,
            chain,
            profile,
            pcap,
            hosted,
            io,
            hosted_args,
            arch,
            topology,
            rack,
        } => {
            if let Some(n) = rack {
                let ok = xtask::rack::run(n)?;
                return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
            }
            if topology.is_some() {
                let chain = if chain == run::DEFAULT_CHAIN { xtask::topology::ROUTER_CHAIN.into() } else { chain };
                let ok = xtask::topology::router(&image::workspace_root().join(chain))?;
                return Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE });
            }
            let opts = RunOptions {
                seconds,
                rate,
                flows,
                sizes,
                seed,
                json,
                kvm,
                smp,
                extra_append,
                debug,
                workers,
                lanes,
                sched,
                nic,
                chain: (chain != "none").then(|| PathBuf::from(chain)),
                profile,
                pcap,
                hosted,
                io,
                hosted_args,
                arch,
                ..RunOptions::default()
            };
            let s = run::run(&opts)?;
            print!("{}", run::render(&s));
            if !s.ok {
                return Ok(ExitCode::FAILURE);
            }
        }
        Cmd::Ops(cmd) => return cadence_ctl::cli::run(cmd),
        Cmd::Sim { study, out, rest } => {
            let out = out.unwrap_or_else(|| image::target_dir().join("sim").join(&study));
            let status = image::cargo()
                .current_dir(image::workspace_root())
                .args(["run", "--release", "--quiet", "-p", "cadence-sim", "--", &study, "--out"])
                .arg(&out)
                .args(&rest)
                .status()?;
            if !status.success() {
                anyhow::bail!("cadence-sim {study} failed: {status}");
            }
        }
        Cmd::Peers { rounds, max_rounds, pages, samples, seconds, table_ms, only, out, wait_quiet } => {
            use cadence_bench::peers::plan::Pages;
            let opts = cadence_bench::peers::Options {
                rounds: rounds as usize,
                max_rounds: max_rounds.map_or(2 * rounds as usize, |m| m as usize),
                pages: match pages.as_str() {
                    "4k" => vec![Pages::Small],
                    "2M" => vec![Pages::Huge],
                    _ => vec![Pages::Small, Pages::Huge],
                },
                samples,
                seconds,
                table_ms,
                only,
                out,
                wait_quiet: std::time::Duration::from_secs(wait_quiet),
            };
            if !cadence_bench::peers::run(&opts)? {
                return Ok(ExitCode::FAILURE);
            }
        }
        Cmd::Swx { args } => {
            let runner = cadence_bench::swx::Runner::build()?;
            let (mut cmd, _) = runner.command();
            let st = cmd.args(&args).status().with_context(|| format!("starting {}", runner.bin.display()))?;
            if !st.success() {
                return Ok(ExitCode::FAILURE);
            }
        }
        Cmd::Test => xtask::tasks::test()?,
        Cmd::Bench {
            study,
            rounds,
            max_rounds,
            quick,
            out,
            trial_secs,
            flows,
            only,
            no_metronome,
            tx,
            wait_quiet,
            cadence_args,
        } => {
            let opts = cadence_bench::bench::Options {
                rounds,
                max_rounds,
                quick,
                out,
                trial_secs,
                flows,
                only,
                no_metronome,
                tx,
                wait_quiet_s: wait_quiet,
                cadence_args,
            };
            return cadence_bench::bench::main(&study, &opts);
        }
        Cmd::Verify => xtask::verify::all()?,
        Cmd::Loom => xtask::verify::loom()?,
        Cmd::Miri => xtask::verify::miri()?,
        Cmd::Fuzz { target, seconds, runs } => {
            use xtask::verify::Budget;
            let budget = match (seconds, runs) {
                (_, Some(n)) => Budget::Runs(n),
                (Some(s), None) => Budget::Seconds(s),
                (None, None) => Budget::Seconds(60),
            };
            xtask::verify::fuzz(target.as_deref(), budget)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
