//! `cargo xtask peers`: Cadence side by side with DPDK in the same run (issue 16).
//!
//! Installs Debian's DPDK packages when missing ([`build::ensure_dpdk`]), builds the C peer
//! programs of `benches/peers/`, DPDK's l3fwd example with Cadence's hook and Cadence's `peers`
//! bench ([`build`]), reserves 2 MiB pages ([`hugepages`]), then runs rounds: every round runs
//! each Cadence bench and its peers back to back, for both page sizes, in an order that rotates
//! from round to round ([`plan`]). Every program prints TSC cycles per operation ([`line`](mod@line)).
//! While each program runs, the noise guard ([`noise`]) measures how much CPU other processes
//! used; a round in which they used more than 0.2 CPUs during any program is refused and none
//! of its figures is used. The result is one table of ratios, Cadence / peer, per operation and
//! page size, median and min–max over the accepted rounds ([`report`]), also written as CSV and
//! SVG under `target/bench/peers/`. If every round is refused, nothing is reported and the
//! command fails.

pub mod build;
pub mod hugepages;
pub mod line;
pub mod noise;
pub mod plan;
pub mod report;
pub mod stats;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use self::build::Binaries;
use self::line::Measurement;
use self::noise::{MAX_OTHERS_CPUS, Window};
use self::plan::{Ending, GROUPS, Job, Knobs, Pages, Program, Reader};
use self::report::Record;
use cadence_core::nf::acl::{CLASSBENCH_KEYS, CLASSBENCH_SEED};

/// Options of `cargo xtask peers`.
#[derive(Debug, Clone)]
pub struct Options {
    /// Accepted rounds wanted (at least 3 for the figures).
    pub rounds: usize,
    /// Rounds tried at most (refused rounds are retried up to this many).
    pub max_rounds: usize,
    /// Page sizes to measure.
    pub pages: Vec<Pages>,
    /// Samples per figure.
    pub samples: u32,
    /// Seconds of forwarding per testpmd / l3fwd run.
    pub seconds: u64,
    /// The least time each table figure spans, in milliseconds.
    pub table_ms: u64,
    /// Only these groups (see [`GROUPS`]); empty: all.
    pub only: Vec<String>,
    /// Output directory (default `target/bench/peers`).
    pub out: Option<PathBuf>,
    /// Before each round, wait up to this long for a quiet 2-second window (0: start at once).
    /// A round that then turns noisy is still refused.
    pub wait_quiet: Duration,
}

/// Waits until others use at most [`MAX_OTHERS_CPUS`] over a 2-second window, or `limit` passes.
/// Returns the last window's figure.
fn wait_for_quiet(limit: Duration) -> Result<f64> {
    let t0 = Instant::now();
    loop {
        let a = noise::read()?;
        std::thread::sleep(Duration::from_secs(2));
        let b = noise::read()?;
        let others = Window::between(&a, &b, noise::clock_ticks()).others_cpus();
        if others <= MAX_OTHERS_CPUS || t0.elapsed() >= limit || STOP.load(Ordering::Relaxed) {
            return Ok(others);
        }
        println!(
            "  waiting for a quiet machine: others use {others:.2} CPUs ({:.0} s so far)",
            t0.elapsed().as_secs_f64()
        );
        std::thread::sleep(Duration::from_secs(8));
    }
}

/// Set by SIGINT / SIGTERM: stop after the current program, so that the 2 MiB pages are given
/// back (the reservation's `Drop`) and what was measured is still written.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn catch_signals() {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
}

/// Kill a program that runs this much longer than it should.
const GRACE: Duration = Duration::from_secs(120);

/// What one program run gave.
#[derive(Debug)]
struct Outcome {
    measurements: Vec<Measurement>,
    window: Window,
    /// Why the run gave no (or fewer) figures.
    error: Option<String>,
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Result<Option<ExitStatus>> {
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok(Some(st));
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        s
    })
}

fn command(bins: &Binaries, job: &Job) -> Result<Command, String> {
    let mut cmd = match job.program {
        Program::Cadence => {
            // Pinned to the CPU the DPDK programs' measuring lcore runs on.
            let mut c = Command::new("taskset");
            c.args(["-c", "1"]).arg(&bins.cadence);
            c
        }
        Program::CadenceRing => {
            // Its producer pins itself to CPU 0 and its consumer to CPU 1 (the peer's lcores).
            let mut c = Command::new("taskset");
            c.args(["-c", "0,1"]).arg(&bins.cadence);
            c
        }
        Program::Hash => Command::new(&bins.hash),
        Program::Learner => Command::new(&bins.learner),
        Program::Ring => Command::new(&bins.ring),
        Program::Testpmd => Command::new(&bins.testpmd),
        Program::L3fwd => Command::new(bins.l3fwd.as_ref().map_err(|e| format!("l3fwd was not built: {e}"))?),
        Program::TestAcl => Command::new(crate::classbench::TEST_ACL),
        Program::TestFib => Command::new(TEST_FIB),
        Program::Swx => {
            let (bin, _) = bins.swx.as_ref().map_err(|e| format!("swx_run was not built: {e}"))?;
            // Pinned as the EAL pins the other peers' measuring lcore (`-l 1`).
            let mut c = Command::new("taskset");
            c.args(["-c", "1"]).arg(bin);
            c
        }
    };
    cmd.args(&job.args);
    Ok(cmd)
}

/// Runs one program and measures what others did meanwhile.
fn run_job(bins: &Binaries, job: &Job, pages: Pages) -> Result<Outcome> {
    let mut cmd = match command(bins, job) {
        Ok(c) => c,
        Err(e) => {
            let t = noise::read()?;
            return Ok(Outcome { measurements: vec![], window: Window::between(&t, &t, 1.0), error: Some(e) });
        }
    };
    let stdin = if matches!(job.ending, Ending::StdinAfter(_)) { Stdio::piped() } else { Stdio::null() };
    cmd.stdin(stdin).stdout(Stdio::piped()).stderr(Stdio::piped());
    let before = noise::read()?;
    let mut child = cmd.spawn().with_context(|| format!("starting {cmd:?}"))?;
    let out = reader(child.stdout.take().context("stdout")?);
    let err = reader(child.stderr.take().context("stderr")?);
    let status = match job.ending {
        Ending::Exits => wait_timeout(&mut child, GRACE * 5)?,
        Ending::StdinAfter(s) => {
            std::thread::sleep(Duration::from_secs(s));
            if let Some(mut i) = child.stdin.take() {
                let _ = i.write_all(b"\n");
            }
            wait_timeout(&mut child, GRACE)?
        }
        Ending::SigintAfter(s) => {
            std::thread::sleep(Duration::from_secs(s));
            // SAFETY: kill(2) on the pid of our own child, which we have not waited for yet, so
            // the pid still names it.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
            wait_timeout(&mut child, GRACE)?
        }
    };
    let after = noise::read()?;
    let window = Window::between(&before, &after, noise::clock_ticks());
    let (stdout, stderr) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
    let (measurements, bad) = match &job.reader {
        Reader::Testpmd(mode) => (line::parse_testpmd(&stdout, mode, pages.label()).into_iter().collect(), vec![]),
        Reader::TestAcl { alg, size } => {
            (line::parse_test_acl(&stdout, alg, size, pages.label()).into_iter().collect(), vec![])
        }
        Reader::TestFib { size, v6 } => {
            (line::parse_test_fib(&stdout, size, pages.label(), *v6).into_iter().collect(), vec![])
        }
        Reader::Lines => line::parse_output(&stdout),
    };
    let tail = |s: &str| s.lines().rev().take(6).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join(" | ");
    let error = match status {
        None => Some(format!("killed after running too long; stderr: {}", tail(&stderr))),
        Some(st) if !st.success() => Some(format!("exited with {st}; stderr: {}", tail(&stderr))),
        Some(_) if measurements.is_empty() => Some(format!("printed no result; stdout: {}", tail(&stdout))),
        Some(_) if !bad.is_empty() => Some(format!("unreadable result lines: {}", bad.join("; "))),
        Some(_) => None,
    };
    for l in stdout.lines().filter(|l| l.starts_with("PEERINFO ")) {
        println!("      {l}");
    }
    Ok(Outcome { measurements, window, error })
}

/// Debian's `dpdk-test-fib` (package `dpdk-dev`, as `dpdk-test-acl`).
const TEST_FIB: &str = "dpdk-test-fib";

/// Has `dpdk-test-fib` write a set of `n` routes and [`plan::FIB_LOOKUPS`] addresses inside
/// them (its generator; it also runs its own benchmark, whose figures are not used).
fn write_fib_set(routes: &Path, ips: &Path, n: usize, lengths: Option<&str>, v6: bool) -> Result<()> {
    let out = Command::new(TEST_FIB)
        .args(["-l", "1", "--no-pci", "--no-huge", "--no-shconf", "-m", "1536", "--log-level=error"])
        .arg("--file-prefix=cadence-peers-fibgen")
        .arg("--")
        .args(plan::fib_args(routes, ips, Some((n, lengths)), v6))
        .output()
        .with_context(|| format!("running {TEST_FIB} (Debian's dpdk-dev)"))?;
    let lines = |p: &Path| std::fs::read_to_string(p).map(|t| t.lines().count()).unwrap_or(0);
    if !out.status.success() || lines(routes) == 0 || lines(ips) == 0 {
        bail!(
            "{TEST_FIB} did not write a set of {n} routes ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("")
        );
    }
    Ok(())
}

fn out_dir(o: &Options) -> PathBuf {
    o.out.clone().unwrap_or_else(|| cadence_build::image::target_dir().join("bench").join("peers"))
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Runs the study; `Ok(false)` when no round could be accepted (nothing is reported then).
pub fn run(o: &Options) -> Result<bool> {
    if o.rounds == 0 || o.max_rounds < o.rounds {
        bail!("--rounds must be at least 1 and --max-rounds at least --rounds");
    }
    if let Some(bad) = o.only.iter().find(|g| !GROUPS.contains(&g.as_str())) {
        bail!("--only {bad}: the groups are {}", GROUPS.join(", "));
    }
    build::ensure_dpdk()?;
    let out = out_dir(o);
    let bins = build::build_all(&out.join("bin"))?;
    if let Err(e) = &bins.l3fwd {
        println!("l3fwd could not be built, so the L3 forwarder has no peer: {e}");
    }
    let routes4 = out.join("routes4.cfg");
    write(&routes4, &plan::l3fwd_routes4())?;
    // The ACL sets, written for dpdk-test-acl; Cadence's bench generates the same ones.
    let mut acl_sets = Vec::new();
    for (label, n) in plan::ACL_SIZES {
        let (rules, trace) =
            crate::classbench::write_set_of(&out, label, CLASSBENCH_SEED, n, CLASSBENCH_KEYS, plan::acl_v6(label))?;
        acl_sets.push((label.to_string(), rules, trace, CLASSBENCH_KEYS));
    }
    // The LPM sets, written once per run by dpdk-test-fib's own generator; both sides read them.
    let mut fib_sets = Vec::new();
    if o.only.is_empty() || o.only.iter().any(|g| g == "lpm") {
        for (label, n, lengths) in plan::FIB_SIZES {
            let (routes, ips) = (out.join(format!("fib-{label}.routes")), out.join(format!("fib-{label}.ips")));
            write_fib_set(&routes, &ips, n, lengths, false)?;
            let ips_dpdk = out.join(format!("fib-{label}.ips.dpdk"));
            let text = std::fs::read_to_string(&ips).with_context(|| format!("reading {}", ips.display()))?;
            write(&ips_dpdk, &plan::reversed_ipv4(&text).with_context(|| format!("{}", ips.display()))?)?;
            fib_sets.push(plan::FibSet { label: label.to_string(), routes, ips, ips_dpdk, v6: false });
        }
        for (label, n) in plan::FIB6_SIZES {
            let (routes, ips) = (out.join(format!("fib6-{label}.routes")), out.join(format!("fib6-{label}.ips")));
            write_fib_set(&routes, &ips, n, None, true)?;
            let ips_dpdk = ips.clone();
            fib_sets.push(plan::FibSet { label: label.to_string(), routes, ips, ips_dpdk, v6: true });
        }
    }
    // The P4 programs' frames, as pcaps both sides read.
    let mut p4_sets = Vec::new();
    if o.only.is_empty() || o.only.iter().any(|g| g == "p4") {
        for s in crate::swx::sets::p4_sets() {
            let pcap = out.join(format!("p4-{}.pcap", s.label));
            let frames: Vec<crate::swx::Frame> =
                s.frames.iter().map(|b| crate::swx::Frame { port: 0, bytes: b.clone() }).collect();
            std::fs::write(&pcap, crate::swx::pcap(&frames)).with_context(|| format!("writing {}", pcap.display()))?;
            p4_sets.push(plan::P4Job { label: s.label, spec: s.spec, tables: s.tables, ports: s.ports, pcap });
        }
    }
    let swx_include = bins.swx.as_ref().map(|(_, inc)| inc.clone()).unwrap_or_default();
    if let Err(e) = &bins.swx {
        println!("swx_run could not be built, so the P4 programs have no peer: {e}");
    }
    let knobs = Knobs {
        samples: o.samples,
        seconds: o.seconds,
        table_ms: o.table_ms,
        routes4,
        routes6: Path::new(build::L3FWD_SRC).join("lpm_default_v6.cfg"),
        acl_sets,
        fib_sets,
        p4_sets,
        swx_include,
    };

    catch_signals();
    let mut pages = o.pages.clone();
    let mut _reservation = None;
    if pages.contains(&Pages::Huge) {
        match hugepages::reserve() {
            Ok(r) => _reservation = Some(r),
            Err(e) => {
                println!("2 MiB pages: not measured: {e}");
                pages.retain(|p| *p != Pages::Huge);
            }
        }
    }
    if pages.is_empty() {
        bail!("no page size left to measure");
    }

    let mut records: Vec<Record> = Vec::new();
    let mut accepted: Vec<usize> = Vec::new();
    let mut refused: Vec<(usize, String)> = Vec::new();
    let mut round = 0;
    while accepted.len() < o.rounds && round < o.max_rounds && !STOP.load(Ordering::Relaxed) {
        if !o.wait_quiet.is_zero() {
            wait_for_quiet(o.wait_quiet)?;
        }
        println!("\n== round {round} (accepted so far: {}) ==", accepted.len());
        let mut worst: Option<(f64, String)> = None;
        for (p, job) in plan::round_order(round, &pages, &knobs, &o.only) {
            if STOP.load(Ordering::Relaxed) {
                break;
            }
            let oc = run_job(&bins, &job, p)?;
            let others = oc.window.others_cpus();
            let figures: Vec<String> = oc.measurements.iter().map(|m| format!("{} {:.1}", m.op, m.cycles)).collect();
            println!(
                "  {:<28} others {:.2} CPUs (steal {:.2}) in {:.1} s: {}",
                job.label,
                others,
                oc.window.steal_s / oc.window.wall_s.max(1e-9),
                oc.window.wall_s,
                figures.join(", ")
            );
            if let Some(e) = &oc.error {
                println!("      ! {}: {e}", job.label);
            }
            if worst.as_ref().is_none_or(|(w, _)| others > *w) {
                worst = Some((others, job.label.clone()));
            }
            records.extend(oc.measurements.into_iter().map(|m| Record {
                round,
                pages: p,
                job: job.label.clone(),
                others_cpus: others,
                m,
            }));
        }
        match worst {
            _ if STOP.load(Ordering::Relaxed) => {
                println!("  round {round} interrupted (signal); none of its figures is used");
                refused.push((round, "interrupted by a signal".into()));
            }
            Some((w, label)) if w > MAX_OTHERS_CPUS => {
                let why = format!("other processes used {w:.2} CPUs while '{label}' ran (limit {MAX_OTHERS_CPUS})");
                println!("  round {round} REFUSED: {why}; none of its figures is used");
                refused.push((round, why));
            }
            _ => accepted.push(round),
        }
        round += 1;
    }

    std::fs::create_dir_all(&out)?;
    write(&out.join("measurements.csv"), &report::measurements_csv(&records, &accepted))?;
    println!();
    for (r, why) in &refused {
        println!("refused: round {r}: {why}");
    }
    if accepted.is_empty() && STOP.load(Ordering::Relaxed) {
        println!("interrupted before any round was accepted: no ratio is reported");
        return Ok(false);
    }
    if accepted.is_empty() {
        println!(
            "every round ({round}) was refused by the noise guard: the machine was busy, so no ratio is reported. \
             Run again when it is quiet (raw figures of the refused rounds: {}).",
            out.join("measurements.csv").display()
        );
        return Ok(false);
    }
    let rows = report::rows(&records, &accepted, &pages);
    let table = report::table(&rows, &records, &accepted, &pages);
    println!(
        "Cadence / peer, TSC cycles per operation, {} accepted round(s) of {round} ({} refused):\n",
        accepted.len(),
        refused.len()
    );
    print!("{table}");
    write(&out.join("ratios.csv"), &report::ratios_csv(&rows))?;
    write(&out.join("table.md"), &table)?;
    write(&out.join("ratios.svg"), &report::svg(&rows, "Cadence / DPDK, same run (cargo xtask peers)"))?;
    println!("\nwritten: {0}/ratios.csv, {0}/measurements.csv, {0}/table.md, {0}/ratios.svg", out.display());
    if accepted.len() < o.rounds {
        println!("only {} of the {} rounds asked for were accepted", accepted.len(), o.rounds);
    }
    Ok(true)
}
