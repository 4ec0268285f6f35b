//! The hosted study: generator check, interleaved RFC 2544 rounds, latency at 10/50/90 %
//! of each zero-loss rate, and Metronome's CPU against load. Results go to CSV and SVG
//! files as each phase ends ([`report`]); the summary tables come last.
//!
//! [`report`]: super::report

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use cadence_core::time::Clock;
use cadence_platform::hosted::clock::HostClock;
use cadence_platform::hosted::thread;

use super::Options;
use super::dpdk;
use super::dut::{Ctx, Dut, Instance, Io, Placement, Sched, VBAR_DEFAULT_US};
use super::frames::SizeMix;
use super::generator::{SinkKind, TrialResult, TrialSpec, TxPath};
use super::report::{self, LatRec, MetRec, Results, SearchRec, TrialRow};
use super::search::{self, Search, Verdict};
use super::sysstat::{CpuProbe, clk_tck, noise_of, usage};
use cadence_build::image::{self, Profile};

/// Precision of the throughput search (RFC 2544 bracket).
const PRECISION: f64 = 0.02;
/// Below this the search gives up (frames/s).
const FLOOR_PPS: f64 = 2_000.0;
/// Load fractions of the latency phase.
const LAT_FRACTIONS: [f64; 3] = [0.1, 0.5, 0.9];

/// The devices of the throughput search.
fn search_duts(with_dpdk: bool) -> Vec<Dut> {
    let mut v = vec![Dut::Ceiling];
    for io in [Io::AfXdp, Io::AfPacket] {
        for chain in [false, true] {
            for sched in [Sched::Poll, Sched::Metronome] {
                v.push(Dut::cadence(io, chain, sched));
            }
        }
        if with_dpdk {
            v.push(Dut::Testpmd { io, workers: 1 });
        }
    }
    v
}

/// The line rate, Mb/s, at which `pps` frames of 64 B arrive (84 B on the wire each:
/// preamble, start delimiter and gap included), rounded up.
pub fn line_mbps_of(pps: f64) -> u32 {
    (pps * 84.0 * 8.0 / 1e6).ceil().clamp(1.0, 400_000.0) as u32
}

/// The configurations of the Metronome study (AF_XDP, L2) and the loads (% of the
/// reference rate) each runs at. `rig_line_mbps`: the rig's ceiling as a line rate; the
/// workers given it as `line_mbps=` bound `T_S` by the rate a veth can really fill their
/// ring at, not by the 10 Gb/s it reports.
fn metronome_configs(with_dpdk: bool, loads: &[u32], rig_line_mbps: Option<u32>) -> Vec<(Dut, Vec<u32>)> {
    let met_at = |workers, placement, vbar_us, line_mbps| Dut::Cadence {
        io: Io::AfXdp,
        chain: false,
        sched: Sched::Metronome,
        workers,
        placement,
        vbar_us,
        line_mbps,
    };
    let met = |workers, placement, vbar_us| met_at(workers, placement, vbar_us, 0);
    let poll = |workers| Dut::Cadence {
        io: Io::AfXdp,
        chain: false,
        sched: Sched::Poll,
        workers,
        placement: Placement::Pinned,
        vbar_us: VBAR_DEFAULT_US,
        line_mbps: 0,
    };
    let mut v = Vec::new();
    for w in [1, 2] {
        v.push((met(w, Placement::Pinned, VBAR_DEFAULT_US), loads.to_vec()));
        if w == 1 {
            // The same worker waking on its deadlines only (`arrival=off`, issue 31).
            v.push((Dut::cadence(Io::AfXdp, false, Sched::Deadline), loads.to_vec()));
            v.push((met(1, Placement::Pinned, 50), loads.to_vec()));
            v.push((met(1, Placement::Pinned, 100), loads.to_vec()));
            if let Some(line) = rig_line_mbps {
                v.push((met_at(1, Placement::Pinned, 50, line), loads.to_vec()));
                v.push((met_at(1, Placement::Pinned, 100, line), loads.to_vec()));
            }
        }
        v.push((poll(w), loads.to_vec()));
        if with_dpdk {
            v.push((Dut::Testpmd { io: Io::AfXdp, workers: w }, loads.to_vec()));
        }
    }
    // Three workers cannot have a CPU each on two vCPUs: run unpinned at zero load (the
    // kernel shares the CPUs; the hosted binary allows unpinned workers beyond the CPUs), at
    // the default V̄ and at a V̄ longer than this guest's wake-up cost.
    v.push((met(3, Placement::Unpinned, VBAR_DEFAULT_US), vec![0]));
    v.push((met(3, Placement::Unpinned, 100), vec![0]));
    v
}

fn machine_facts() -> Vec<(String, String)> {
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| l.strip_prefix("model name")?.split_once(':').map(|(_, v)| v.trim().to_string()))
        .unwrap_or_default();
    let kernel = read("/proc/sys/kernel/osrelease").trim().to_string();
    let mem =
        read("/proc/meminfo").lines().next().unwrap_or_default().split_whitespace().nth(1).unwrap_or("").to_string();
    let date = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    let testpmd = dpdk::version().map_or_else(|| "not installed".into(), |v| format!("dpdk-dev {v}"));
    vec![
        ("date".into(), date),
        ("cpu".into(), cpu),
        ("vcpus".into(), thread::cpus_online().to_string()),
        ("kernel".into(), kernel),
        ("mem_kib".into(), mem),
        ("dpdk".into(), testpmd),
    ]
}

/// Everything one phase needs.
struct Study {
    ctx: Ctx,
    secs: f64,
    /// How long to wait for other processes to quiet down before a measurement.
    wait_s: f64,
    flows: u16,
    res: Results,
    out: PathBuf,
}

impl Study {
    fn spec(&self, rate: f64, mix: SizeMix) -> TrialSpec {
        TrialSpec {
            rate_pps: rate,
            secs: self.secs,
            mix,
            flows: self.flows,
            probe: CpuProbe::default(),
            drain_idle_ms: 100,
            drain_max_ms: 2_000,
        }
    }

    /// Runs a trial on `inst`; a trial during which other processes used more than 0.2
    /// CPUs is recorded (phase `<phase>-noisy`), then run again once the machine is quiet
    /// (at most twice more). Returns the last.
    fn quiet_trial(
        &mut self,
        inst: &mut Instance,
        phase: &'static str,
        round: u32,
        mix: SizeMix,
        load_pct: Option<f64>,
        rate: f64,
    ) -> Result<TrialResult> {
        let mut tries = 0;
        loop {
            let t = inst.trial(self.spec(rate, mix))?;
            tries += 1;
            // Kept when quiet, after two repeats, or when the machine does not get quiet.
            if !t.usage.noisy() || tries > 2 || !wait_quiet(&inst.probe(), self.wait_s) {
                self.row(phase, round, &inst.dut, mix, load_pct, &t);
                return Ok(t);
            }
            self.row(noisy_phase(phase), round, &inst.dut, mix, load_pct, &t);
        }
    }

    fn row(
        &mut self,
        phase: &'static str,
        round: u32,
        dut: &Dut,
        mix: SizeMix,
        load_pct: Option<f64>,
        r: &TrialResult,
    ) {
        let line = format!(
            "  {phase:<9} {:<38} {:<5} asked {:>9.0} sent {:>9.0} pps{}  lost {:>7} dup {} reord {}{}  p50 {:>7.1} µs  worker cpu {:.2}  others {:.2}{}",
            dut.name(),
            mix.label(),
            r.asked_pps,
            r.achieved_pps,
            if r.generator_limited() { " (GEN-LIMITED)" } else { "" },
            r.lost,
            r.duplicated,
            r.reordered,
            if r.refused > 0 { format!(" REFUSED {}", r.refused) } else { String::new() },
            r.latency.p50_ns as f64 / 1e3,
            r.usage.workers_total(),
            r.usage.others,
            if r.sink_limited() { format!("  SINK DROPPED {}", r.sink_drops) } else { String::new() },
        );
        println!("{line}");
        self.res.trials.push(TrialRow { phase, round, dut: dut.name(), mix, load_pct, r: r.clone() });
    }

    fn save(&self) -> Result<()> {
        report::write_all(&self.res, &self.out)
    }
}

fn noisy_phase(phase: &str) -> &'static str {
    match phase {
        "search" => "search-noisy",
        "latency" => "latency-noisy",
        _ => "metronome-noisy",
    }
}

/// Waits (at most `max_s`) until other processes use at most 0.2 CPUs over a second
/// (everything `probe` names, this process and ksoftirqd are not "other"); whether they
/// did.
fn wait_quiet(probe: &CpuProbe, max_s: f64) -> bool {
    let start = Instant::now();
    let mut said = false;
    loop {
        let a = probe.snapshot();
        std::thread::sleep(std::time::Duration::from_millis(1000));
        let u = usage(&a, &probe.snapshot(), clk_tck());
        if !u.noisy() {
            return true;
        }
        if start.elapsed().as_secs_f64() >= max_s {
            println!("bench: still {:.2} CPUs used by others after {max_s:.0} s; going on", u.others);
            return false;
        }
        if !said {
            println!("bench: others use {:.2} CPUs: waiting for a quiet machine (at most {max_s:.0} s)", u.others);
            said = true;
        }
    }
}

/// Runs the whole study.
pub fn run(o: &Options) -> Result<()> {
    if !cadence_harness::netns::can_create() {
        bail!("cargo xtask bench hosted needs root and iproute2's `ip`: it creates network namespaces and veth pairs");
    }
    let cpus = thread::cpus_online();
    if cpus < 2 {
        bail!("the bench needs two CPUs (generator on CPU 0, dataplane on CPU 1); this machine has {cpus}");
    }
    super::dut::cleanup_stale();
    let rounds = if o.quick { 1 } else { o.rounds.max(1) };
    let secs = o.trial_secs.unwrap_or(if o.quick { 0.5 } else { 2.0 });
    let out = o.out.clone().unwrap_or_else(|| image::target_dir().join("bench").join("hosted"));
    let logs = out.join("logs");
    std::fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let started = Instant::now();

    let mut facts = machine_facts();
    if !o.cadence_args.is_empty() {
        facts.push(("cadence_args".into(), o.cadence_args.join(" ")));
    }
    for (k, v) in &facts {
        println!("bench: {k}: {v}");
    }
    let cadence = image::build_hosted(Profile::Release)?;
    let chain = cadence_ctl::chain::load(&image::workspace_root().join("chains/chain1.toml"))?;
    let chain_txt = out.join("chain1.txt");
    std::fs::write(&chain_txt, &chain.text)?;
    let with_dpdk = match dpdk::ensure() {
        Ok(()) => true,
        Err(e) => {
            println!("bench: DPDK rows SKIPPED: {e:#}");
            false
        }
    };
    let (clock, refused) = HostClock::calibrate();
    if let Some(why) = refused {
        println!("bench: warning: TSC not used ({why}); timestamps from CLOCK_MONOTONIC");
    }
    println!("bench: TSC {} Hz; {rounds} round(s), trials of {secs} s, {} flows", clock.rate().hz(), o.flows);

    let mut st = Study {
        ctx: Ctx {
            cadence,
            chain_txt,
            log_dir: logs,
            clock,
            tx_path: TxPath::Ring,
            cadence_args: o.cadence_args.clone(),
        },
        secs,
        wait_s: o.wait_quiet_s,
        flows: o.flows,
        res: Results { facts, quick: o.quick, with_dpdk, ..Results::default() },
        out: out.clone(),
    };
    st.ctx.tx_path = match o.tx.as_str() {
        "ring" => TxPath::Ring,
        "sendmmsg" => TxPath::Mmsg,
        _ => gen_check(&mut st)?,
    };
    st.res.tx_path = st.ctx.tx_path.name().into();
    println!("bench: generator transmits with {}", st.ctx.tx_path.name());

    let keep = |d: &Dut| o.only.is_empty() || o.only.iter().any(|s| d.name().contains(s.as_str()));
    let duts: Vec<Dut> = search_duts(with_dpdk).into_iter().filter(keep).collect();
    let mixes = [SizeMix::Fixed(60), SizeMix::Imix];
    let max_rounds = if o.quick { 1 } else { o.max_rounds.unwrap_or(rounds + 2).max(rounds) };
    let mut clean = 0;
    let mut r = 0;
    while clean < rounds && r < max_rounds {
        if round(&mut st, r, &duts, &mixes)? {
            clean += 1;
        }
        r += 1;
        st.save()?;
    }
    if clean < rounds {
        println!("bench: only {clean} of {r} rounds were quiet enough (others ≤ 0.2 CPUs)");
    }

    latency_phase(&mut st, &duts, &mixes)?;
    st.save()?;

    if !o.no_metronome {
        // 1 % and 10 %: where waking on arrival matters (issue 31).
        let loads: Vec<u32> = if o.quick {
            vec![0, 1, 10, 50, 100]
        } else {
            [0, 1, 5].into_iter().chain((10..=100).step_by(10)).collect()
        };
        let configs: Vec<(Dut, Vec<u32>)> =
            metronome_configs(with_dpdk, &loads, rig_line_mbps(&st.res)).into_iter().filter(|(d, _)| keep(d)).collect();
        metronome_phase(&mut st, &configs)?;
        st.save()?;
        idle_phase(&mut st)?;
        st.save()?;
    }
    st.res.elapsed_s = started.elapsed().as_secs_f64();
    st.save()?;
    print!("{}", super::summary::summary(&st.res));
    println!("bench: CSV and SVG files in {}", out.display());
    Ok(())
}

/// The ceiling with each transmit path, unpaced (3 Mpps asked), three trials each,
/// alternating, each retried while others use the CPUs; returns the faster by median.
fn gen_check(st: &mut Study) -> Result<TxPath> {
    let paths = [TxPath::Ring, TxPath::Mmsg];
    let mut insts = Vec::new();
    for path in paths {
        st.ctx.tx_path = path;
        insts.push(Instance::start(&st.ctx, &Dut::Ceiling, SinkKind::Driver)?);
    }
    let mut rates = [Vec::new(), Vec::new()];
    for _ in 0..3 {
        for (i, path) in paths.iter().enumerate() {
            let mut tries = 0;
            let r = loop {
                let quiet = wait_quiet(&insts[i].probe(), st.wait_s);
                let r = insts[i].trial(st.spec(3e6, SizeMix::Fixed(60)))?;
                tries += 1;
                if !r.usage.noisy() || !quiet || tries > 2 {
                    break r;
                }
            };
            println!(
                "bench: generator check, {}: offered 3 Mpps, sent {:.0} pps, received {}/{} (sink drops {}), \
                 generator thread {:.2} CPUs, others {:.2}",
                path.name(),
                r.achieved_pps,
                r.unique,
                r.sent,
                r.sink_drops,
                r.gen_cpu,
                r.usage.others
            );
            rates[i].push(r.achieved_pps);
            st.res.gencheck.push((path.name().to_string(), r));
        }
    }
    for inst in insts {
        inst.stop()?;
    }
    let (ring, mmsg) = (report::median(&rates[0]), report::median(&rates[1]));
    println!("bench: generator alone (ceiling, 64 B): ring {ring:.0} pps, sendmmsg {mmsg:.0} pps (medians of 3)");
    Ok(if mmsg > ring { TxPath::Mmsg } else { TxPath::Ring })
}

/// Round `r`: every device once, in rotating order, both frame mixes. Returns whether the
/// round was quiet (others ≤ 0.2 CPUs).
fn round(st: &mut Study, r: u32, duts: &[Dut], mixes: &[SizeMix]) -> Result<bool> {
    let n = duts.len().max(1);
    let order: Vec<Dut> = (0..n).map(|i| duts[(i + r as usize) % n].clone()).collect();
    println!("bench: round {r}: {}", order.iter().map(Dut::name).collect::<Vec<_>>().join(", "));
    let first_trial = st.res.trials.len();
    let first_search = st.res.searches.len();
    for dut in &order {
        let mut inst = match Instance::start(&st.ctx, dut, SinkKind::Driver) {
            Ok(i) => i,
            Err(e) => {
                println!("bench: {} did not start: {e:#}", dut.name());
                st.res.failures.push(format!("round {r}: {} did not start: {e:#}", dut.name()));
                continue;
            }
        };
        for &mix in mixes {
            let start = st.res.start_rate(dut, mix);
            let mut err = None;
            wait_quiet(&inst.probe(), st.wait_s);
            let outcome = search::run(Search::new(start, PRECISION, FLOOR_PPS, 16), |rate| {
                match st.quiet_trial(&mut inst, "search", r, mix, None, rate) {
                    Ok(t) => verdict(&t),
                    Err(e) => {
                        err.get_or_insert(e);
                        // Stop the search: a rate no generator reaches.
                        Verdict::RigLimited { achieved: 0.0, zero_loss: false }
                    }
                }
            });
            if let Some(e) = err {
                println!("bench: {} {}: {e:#}", dut.name(), mix.label());
                st.res.failures.push(format!("round {r}: {} {}: {e:#}", dut.name(), mix.label()));
                continue;
            }
            println!(
                "bench: round {r} {} {}: zero-loss {:.0} pps{} after {} trials",
                dut.name(),
                mix.label(),
                outcome.rate,
                if outcome.rig_limited { " (rig-limited: the dataplane was not the limit)" } else { "" },
                outcome.trials
            );
            st.res.searches.push(SearchRec { round: r, dut: dut.clone(), mix, outcome, noisy: false });
        }
        match inst.stop() {
            Ok(s) if !s.clean => st.res.failures.push(format!("round {r}: {} did not stop cleanly", dut.name())),
            Ok(_) => {}
            Err(e) => st.res.failures.push(format!("round {r}: {} stop: {e:#}", dut.name())),
        }
    }
    let usages: Vec<_> =
        st.res.trials[first_trial..].iter().filter(|t| t.phase == "search").map(|t| &t.r.usage).collect();
    let (others, noisy) = noise_of(&usages);
    for s in &mut st.res.searches[first_search..] {
        s.noisy = noisy;
    }
    st.res.rounds.push((r, others, noisy));
    println!(
        "bench: round {r}: others used {others:.3} CPUs on average{}",
        if noisy { " — NOISY: excluded from the ratios" } else { "" }
    );
    Ok(!noisy)
}

/// The search's view of a trial.
fn verdict(t: &TrialResult) -> Verdict {
    if t.sink_limited() {
        let achieved = t.sent.saturating_sub(t.sink_drops) as f64 / t.send_s.max(1e-9);
        Verdict::RigLimited { achieved, zero_loss: false }
    } else if t.generator_limited() {
        Verdict::RigLimited { achieved: t.achieved_pps, zero_loss: t.zero_loss() }
    } else if t.zero_loss() {
        Verdict::Pass
    } else {
        Verdict::Fail { delivered: t.unique as f64 / t.send_s.max(1e-9) }
    }
}

/// Latency at 10/50/90 % of each device's median zero-loss rate; the ceiling also at
/// every rate the others ran at (64 B), as the rig's floor.
fn latency_phase(st: &mut Study, duts: &[Dut], mixes: &[SizeMix]) -> Result<()> {
    let mut ceiling_rates: Vec<f64> = Vec::new();
    for dut in duts {
        let rates: Vec<(SizeMix, f64, f64)> = mixes
            .iter()
            .flat_map(|&mix| {
                let zl = st.res.zero_loss_median(dut, mix);
                LAT_FRACTIONS.iter().filter_map(move |&f| zl.filter(|z| *z > 0.0).map(|z| (mix, f, f * z)))
            })
            .collect();
        if rates.is_empty() {
            continue;
        }
        if *dut != Dut::Ceiling {
            ceiling_rates.extend(rates.iter().filter(|r| r.0 == SizeMix::Fixed(60)).map(|r| r.2));
        }
        run_latency(st, dut, &rates)?;
    }
    if duts.contains(&Dut::Ceiling) && !ceiling_rates.is_empty() {
        ceiling_rates.sort_by(f64::total_cmp);
        ceiling_rates.dedup_by(|a, b| (*a - *b).abs() <= 0.05 * *b);
        let rates: Vec<_> = ceiling_rates.into_iter().map(|r| (SizeMix::Fixed(60), f64::NAN, r)).collect();
        run_latency(st, &Dut::Ceiling, &rates)?;
    }
    Ok(())
}

fn run_latency(st: &mut Study, dut: &Dut, rates: &[(SizeMix, f64, f64)]) -> Result<()> {
    let mut inst = match Instance::start(&st.ctx, dut, SinkKind::Stamped) {
        Ok(i) => i,
        Err(e) => {
            st.res.failures.push(format!("latency: {} did not start: {e:#}", dut.name()));
            return Ok(());
        }
    };
    wait_quiet(&inst.probe(), st.wait_s);
    for &(mix, frac, rate) in rates {
        let t = st.quiet_trial(&mut inst, "latency", 0, mix, Some(frac * 100.0), rate)?;
        st.res.latency.push(LatRec { dut: dut.clone(), mix, frac, rate, r: t });
    }
    inst.stop()?;
    Ok(())
}

/// The rig's ceiling (64 B) as a line rate, when it was measured.
fn rig_line_mbps(res: &Results) -> Option<u32> {
    res.zero_loss_median(&Dut::Ceiling, SizeMix::Fixed(60)).filter(|p| *p > 0.0).map(line_mbps_of)
}

/// Metronome vs poll vs testpmd: worker CPU, vacation and wake-up lateness against load;
/// a fresh instance per point, so each `@summary` describes that load alone.
fn metronome_phase(st: &mut Study, configs: &[(Dut, Vec<u32>)]) -> Result<()> {
    let reference = [Sched::Metronome, Sched::Poll]
        .iter()
        .find_map(|&sched| st.res.zero_loss_median(&Dut::cadence(Io::AfXdp, false, sched), SizeMix::Fixed(60)))
        .filter(|r| *r > 0.0);
    let Some(reference) = reference else {
        st.res.failures.push("metronome: no zero-loss rate of cadence/af_xdp/l2 to scale the loads by".into());
        return Ok(());
    };
    st.res.metronome_ref_pps = reference;
    println!("bench: Metronome study: loads are % of {reference:.0} pps (Cadence AF_XDP L2 zero-loss, 64 B)");
    for (dut, loads) in configs {
        for &pct in loads {
            let rate = reference * f64::from(pct) / 100.0;
            let mut inst = match Instance::start(&st.ctx, dut, SinkKind::Stamped) {
                Ok(i) => i,
                Err(e) => {
                    st.res.failures.push(format!("metronome: {} did not start: {e:#}", dut.name()));
                    continue;
                }
            };
            let mut quiet = wait_quiet(&inst.probe(), st.wait_s);
            let mut tries = 0;
            let (before, t, after) = loop {
                let before = inst.stats_now();
                let t = inst.trial(st.spec(rate, SizeMix::Fixed(60)))?;
                let after = inst.stats_now();
                tries += 1;
                if !t.usage.noisy() || !quiet || tries > 2 {
                    break (before, t, after);
                }
                st.row("metronome-noisy", 0, dut, SizeMix::Fixed(60), Some(f64::from(pct)), &t);
                quiet = wait_quiet(&inst.probe(), st.wait_s);
            };
            let stopped = inst.stop()?;
            st.row("metronome", 0, dut, SizeMix::Fixed(60), Some(f64::from(pct)), &t);
            st.res.metronome.push(MetRec {
                dut: dut.clone(),
                load_pct: pct,
                rate,
                vac_window_ns: report::window_vacation(before.as_ref(), after.as_ref()),
                summary: stopped.summary,
                r: t,
            });
        }
    }
    Ok(())
}

/// The first frame after a second of idle (issue 31): one frame per [`report::IDLE_GAP_S`]
/// for [`report::IDLE_FRAMES`] frames, so that every frame finds the worker asleep, through
/// one worker polling, sleeping on deadlines only, and sleeping until arrival; its latency
/// (generator to sink, as every latency here) is what waking costs the first frame.
fn idle_phase(st: &mut Study) -> Result<()> {
    for sched in [Sched::Poll, Sched::Deadline, Sched::Metronome] {
        let dut = Dut::cadence(Io::AfXdp, false, sched);
        let mut inst = match Instance::start(&st.ctx, &dut, SinkKind::Stamped) {
            Ok(i) => i,
            Err(e) => {
                st.res.failures.push(format!("idle: {} did not start: {e:#}", dut.name()));
                continue;
            }
        };
        // Let the worker reach its idle sleep before the first frame.
        std::thread::sleep(std::time::Duration::from_secs_f64(report::IDLE_GAP_S));
        let rate = 1.0 / report::IDLE_GAP_S;
        let spec = TrialSpec { secs: report::IDLE_FRAMES * report::IDLE_GAP_S, ..st.spec(rate, SizeMix::Fixed(60)) };
        let t = inst.trial(spec)?;
        inst.stop()?;
        st.row("idle", 0, &dut, SizeMix::Fixed(60), None, &t);
        st.res.idle_first.push(LatRec { dut, mix: SizeMix::Fixed(60), frac: 0.0, rate, r: t });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_rate_of_64_byte_frames() {
        // 10 GbE carries 14 880 952 frames/s of 64 B (84 B on the wire).
        assert_eq!(line_mbps_of(14_880_952.0), 10_000);
        assert_eq!(line_mbps_of(439_000.0), 296);
        assert_eq!(line_mbps_of(0.0), 1, "never 0, which would mean 'the port's speed'");
    }

    #[test]
    fn rig_line_adds_metronome_workers_bounded_by_it() {
        let without = metronome_configs(false, &[0, 50], None);
        let with = metronome_configs(false, &[0, 50], Some(296));
        assert_eq!(with.len(), without.len() + 2);
        assert!(without.iter().any(|(d, _)| d.name() == "cadence/af_xdp/l2/metronome-deadline"));
        let names: Vec<String> = with.iter().map(|(d, _)| d.name()).collect();
        assert!(names.contains(&"cadence/af_xdp/l2/metronome/vbar100/line296".to_string()), "{names:?}");
        assert!(without.iter().all(|(d, _)| !d.name().contains("/line")));
    }
}
