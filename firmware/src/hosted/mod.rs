//! The hosted build: Cadence's dataplane as a Linux process, over AF_XDP or `AF_PACKET`
//! ports, with worker threads pinned to CPUs. Same forwarding run, chains, counters and
//! machine lines as the image (`cadence_firmware::forward`), on `platform::hosted`.
//!
//! Exit codes: 0 success (STOP), 1 runtime failure, 2 bad configuration
//! (`cadence_harness::protocol::hosted_exit_status` maps them onto the image's 33/37/35, so one
//! checker serves both).
//!
//! Built with `cargo xtask run --hosted`, or `cargo build --release -p cadence-firmware` →
//! `target/release/cadence`. The parts:
//!
//! - `args`: its own options plus every boot option, as `key=value` or `--key value`,
//!   through the image's own strict parser.
//! - `ports`: 2 to 8 interfaces (`--port0 … --port7`) with `lanes=` queue pairs each. Over
//!   AF_XDP the XDP program is attached to each interface, lane `k`'s pool is the UMEM of all
//!   its sockets (port 0 queue `k` registers it, the other ports' queue `k` share it), and
//!   `cadence_drivers::xsk` drives
//!   the rings, so a frame is forwarded without a user-space copy. Its rings have
//!   `--xdp-ring` entries (default 2048, libxdp's and DPDK's: with the image's 256 a worker
//!   the kernel preempts for ~0.6 ms at 400 kpps overflows its RX ring, which halved the
//!   zero-loss rate) and, without `pool=`, the lane's pool is sized to feed every port's
//!   socket's fill and TX rings (`args::hosted_pool`). `--busy-poll N` turns on preferred busy
//!   polling (`XskSocket::busy_poll`, and `XskConfig::always_kick_rx` so that every empty
//!   RX burst calls into the kernel, which runs the interface's NAPI poll in the worker's
//!   thread). Over `AF_PACKET`: one `TPACKET_V3` socket per lane and interface in a
//!   hash-fanout group, and `cadence_drivers::tpacket` copies frames in and out of the
//!   pool. `--io auto` tries AF_XDP and falls back with a line saying why.
//! - `machine`: the `forward::Machine`: `HostClock`, a `NanoSleeper` per worker, workers as
//!   threads pinned by `--cpus` (or unpinned with `--unpinned`, which allows up to four
//!   workers per online CPU, so that M > N idle workers can be measured on a small
//!   machine), stdout through a printer thread with a 4-line queue so a slow reader costs a
//!   skipped `@stats` line, never a stalled worker; `check` watches that both interfaces
//!   still exist, every 100 ms from worker 0.
//!
//! Everything above the ports — `forward::run`, the chains, `TryLock`, the Metronome
//! workers, the counters and lines — is the image's code. Extra keys in its
//! `@stats`/`@summary`: per worker `core{i}_cpu_ns` / `core{i}_wall_ns` (thread CPU time, so
//! CPU share is measured, not inferred from sleeps), `core{i}_idle_ns` / `core{i}_spin_ns`
//! and `core{i}_late_p50_ns` / `core{i}_late_p99_ns` (the sleeper's kernel-sleep time, spin
//! time and wake-up lateness), and per port the kernel's socket counters
//! (`p{i}_xdp_rx_dropped`, `p{i}_xdp_rx_ring_full`, `p{i}_xdp_fill_empty`, …;
//! `p{i}_packet_drops`, `p{i}_packet_freezes`).
//!
//! # How it is tested
//!
//! The rig's veth backend (`cadence_harness::rig::Backend::Veth`, `cadence_harness::netns`): a network
//! namespace of its own holding the dataplane's ends of two veth pairs (IPv6 off, the NIC
//! MACs the checker expects), the host ends (the peers' MACs) carrying the same generator
//! and checker as the QEMU runs through `AF_PACKET` sockets, and `ip netns exec NS
//! target/release/cadence …`; everything is deleted with the namespace.
//! `tests/tests/hosted.rs` (root; CI runs as root): 20 000 frames through Chain 1 over
//! AF_XDP with two workers (exactly once, in order, NF rewrites checked, ACL-denied flows
//! expected, pool back at rest), 20 000 frames over `AF_PACKET` with every kind of
//! malformed frame dropped and counted by reason (a frame shorter than an Ethernet header
//! cannot be sent into a veth at all: the kernel refuses it), missing interfaces and a bad
//! option (exit 1 / 2 with the line), an interface deleted mid-run (`error: port 1:
//! interface … vanished`, exit 1, `@summary` still printed), and an overload (10 ms sleeps
//! on 64-entry rings offered 20 000 frames/s: every lost frame is one the kernel counted in
//! `p*_xdp_rx_dropped`, the dataplane drops nothing, and at 500 frames/s afterwards every
//! frame comes back). The overload test runs hosted because there the kernel counts the
//! excess; under QEMU a full virtio or igb RX ring makes QEMU's backend drop or hold frames
//! without telling the guest.

mod args;
mod machine;
mod ports;

use std::process::ExitCode;

use cadence_core::buf::Pool;
use cadence_core::netblaze::{Profile, module};
use cadence_core::nf::config::ChainSpec;
use cadence_core::time::Clock;
use cadence_firmware::config::{Job, MacFmt};
use cadence_firmware::forward::{self, Outcome};
use cadence_platform::hosted::clock::HostClock;
use cadence_platform::hosted::sleep::SleepConfig;
use cadence_platform::hosted::thread;

use machine::Hosted;

const EXIT_RUNTIME: u8 = 1;
const EXIT_CONFIG: u8 = 2;

/// The hosted binary's `main`.
pub fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match args::parse(&argv) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{}", args::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            println!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    println!("Cadence {} (hosted)", env!("CARGO_PKG_VERSION"));
    // Ctrl-C and `kill` end the run cleanly, with `@summary` (before anything is set up, so
    // no signal can leave an XDP program or a half-made socket behind).
    if let Err(e) = cadence_platform::hosted::process::catch_stop_signals() {
        println!("warning: SIGINT/SIGTERM will kill the run without @summary (sigaction: {e})");
    }
    for w in &args.warnings {
        println!("{w}");
    }
    let (spec, profile) = match read_chain(&args) {
        Ok(s) => s,
        Err(msg) => {
            println!("error: {msg}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let (clock, refused) = HostClock::calibrate();
    if let Some(why) = refused {
        println!("warning: TSC not used ({why}); timing from CLOCK_MONOTONIC");
    }
    let cpus = thread::cpus_online();
    let pins: Vec<Option<usize>> = (0..args.boot.workers)
        .map(|w| if args.unpinned { None } else { Some(args.cpus.get(w).copied().unwrap_or(w % cpus.max(1))) })
        .collect();
    let machine: &'static Hosted =
        Box::leak(Box::new(Hosted::new(clock, SleepConfig::with_spin_margin_ns(args.spin_us * 1000), pins)));
    let code = run(machine, &args, &spec, profile.as_ref(), clock);
    machine.flush();
    code
}

/// The chain file, and its NetBlaze profile if it carries one after a `[netblaze.profile]`
/// line (the same text as the image's boot module 0).
fn read_chain(args: &args::Args) -> Result<(ChainSpec, Option<Profile>), String> {
    let Some(path) = &args.chain else { return Ok((ChainSpec::default(), None)) };
    let text = std::fs::read_to_string(path).map_err(|e| format!("chain config {}: {e}", path.display()))?;
    module::parse(&text).map_err(|e| e.to_string())
}

fn run(
    m: &'static Hosted,
    args: &args::Args,
    spec: &ChainSpec,
    profile: Option<&Profile>,
    clock: HostClock,
) -> ExitCode {
    let cfg = &args.boot;
    let cal = clock.calibration();
    m.say(format_args!(
        "@banner version={} cpu=\"{}\" tsc_hz={} tsc_source={} tsc_check={} mem_mib={} cores={} nics=2 platform=hosted",
        env!("CARGO_PKG_VERSION"),
        cpu_brand(),
        clock.rate().hz(),
        match clock.source() {
            cadence_platform::hosted::clock::ClockSource::Tsc => "tsc",
            cadence_platform::hosted::clock::ClockSource::Monotonic => "clock-monotonic",
        },
        if cal.is_some() { "monotonic-raw" } else { "none" },
        mem_mib(),
        thread::cpus_online()
    ));
    let mut names = String::new();
    for (i, n) in spec.names().enumerate() {
        names.push_str(if i > 0 { "," } else { "" });
        names.push_str(n);
    }
    m.say(format_args!(
        "@chain nfs={} source={} profile={} validate={}",
        if names.is_empty() { "none" } else { &names },
        if args.chain.is_some() { "file" } else { "none" },
        if profile.is_some() { "file" } else { "none" },
        spec.validate.name()
    ));
    let mut opened = match ports::open(args, cfg, &clock) {
        Ok(p) => p,
        Err(e) => {
            m.say(format_args!("error: {e}"));
            return ExitCode::from(EXIT_RUNTIME);
        }
    };
    for note in &opened.notes {
        m.say(format_args!("{note}"));
    }
    for (i, p) in opened.ports.iter().enumerate() {
        m.say(format_args!(
            "@nic index={i} kind={} pci=iface:{} mac={} rxq={} txq={} qsize={}{}",
            p.kind(),
            p.ifname(),
            MacFmt(cadence_core::nic::Port::mac(p)),
            p.queues(),
            p.queues(),
            p.ring_size(),
            p.detail()
        ));
    }
    if cfg.mode == Job::Boot {
        m.log_line(format_args!("boot: done ({} NICs up)", opened.ports.len()));
        return ExitCode::SUCCESS;
    }
    // Everything that needed privileges is in hand (sockets, programs, memory): give them up.
    match cadence_platform::hosted::process::drop_privileges(&args.user) {
        Ok(Some(d)) => m.say(format_args!(
            "hosted: privileges dropped after set-up: uid {} gid {} ({}), no capabilities",
            d.uid, d.gid, d.user
        )),
        Ok(None) => m.say(format_args!("warning: --user root: the dataplane keeps running as root")),
        Err(e) => {
            m.say(format_args!("error: dropping privileges: {e}"));
            return ExitCode::from(EXIT_RUNTIME);
        }
    }
    let (mbps, from) = cfg.line_rate_mbps(opened.ports.iter().filter_map(ports::HostedPort::speed_mbps).min());
    if let Err(e) = m.pin_current(0) {
        m.say(format_args!("error: worker 0: {e}"));
        return ExitCode::from(EXIT_RUNTIME);
    }
    m.set_extra(Box::new(opened.counters()));
    // `arrival=off`: deadline sleeps only (the paper's Metronome).
    if cfg.arrival {
        m.set_arrivals(std::mem::take(&mut opened.arrivals));
    }
    m.watch(opened.ports.iter().map(|p| (p.ifname().to_string(), p.ifindex())).collect());
    let pools: Vec<Pool<'static>> = opened.pools.drain(..).collect();
    let ports = std::mem::take(&mut opened.ports);
    let outcome = forward::run(m, cfg, pools, ports, spec, profile, forward::LineRate { mbps, from });
    match outcome {
        Outcome::Success => ExitCode::SUCCESS,
        Outcome::ConfigError => ExitCode::from(EXIT_CONFIG),
        Outcome::RuntimeFailure => ExitCode::from(EXIT_RUNTIME),
    }
}

/// The CPU's brand string from /proc/cpuinfo (quotes removed: the banner quotes it).
fn cpu_brand() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().replace('"', "")))
        .unwrap_or_else(|| "unknown".into())
}

/// Total memory in MiB from /proc/meminfo.
fn mem_mib() -> u64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("MemTotal:")?.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}
