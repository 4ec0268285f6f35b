//! The NetBlaze study (`cargo xtask sim netblaze`): every policy on the same trace, same
//! cores, same SLO; the results as CSV and SVG; and the ingress mapper at rack scale.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cadence_core::netblaze::{IngressConfig, IngressMapper, NetBlazeConfig, Profile};

use super::engine::{Engine, Service};
use super::policies::{Kind, Policy};
use super::trace::{GenConfig, PacketSource, Preset, TraceGen};
use crate::plot::{LinePlot, Series};

/// What to run.
#[derive(Debug, Clone)]
pub struct StudyOptions {
    /// Simulated seconds per trace.
    pub seconds: u64,
    /// Seed of the traces.
    pub seed: u64,
    /// The p99 SLO (ns).
    pub slo_ns: u64,
    /// Traces.
    pub presets: Vec<Preset>,
    /// Policies.
    pub policies: Vec<Kind>,
    /// Dedicated-capable cores (NIC queues) of the server.
    pub dedicated: usize,
    /// Auxiliary cores NetBlaze may borrow.
    pub aux: usize,
    /// The chain's profile file.
    pub profile: PathBuf,
    /// Run the rack-scale ingress study too.
    pub rack: bool,
}

impl Default for StudyOptions {
    /// 60 s, seed 1, 200 µs, both presets, all policies, 16 + 16 cores, Chain 2's profile.
    fn default() -> Self {
        Self {
            seconds: 60,
            seed: 1,
            slo_ns: 200_000,
            presets: vec![Preset::Campus, Preset::Backbone],
            policies: Kind::ALL.to_vec(),
            dedicated: 16,
            aux: 16,
            profile: default_profile(),
            rack: true,
        }
    }
}

/// `chains/chain2.profile` of this workspace.
pub fn default_profile() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../chains/chain2.profile")
}

/// Reads and parses a profile file.
pub fn load_profile(path: &Path) -> anyhow::Result<Profile> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    Profile::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// One policy on one trace.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Trace.
    pub preset: &'static str,
    /// Policy.
    pub policy: &'static str,
    /// Latency percentiles (µs).
    pub p50_us: f64,
    /// p99 (µs).
    pub p99_us: f64,
    /// p99.9 (µs).
    pub p999_us: f64,
    /// Share of 1-second windows whose p99 met the SLO.
    pub windows_ok: f64,
    /// Core-seconds.
    pub core_seconds: f64,
    /// Migrations (flows or buckets moved).
    pub migrations: u64,
    /// Reorderings.
    pub reorderings: u64,
    /// Drops.
    pub drops: u64,
    /// Packets.
    pub packets: u64,
    /// NetBlaze: SLO-risk events, whale splits, recruits, boost epochs.
    pub slo_risk: u64,
    /// Whale splits.
    pub splits: u64,
    /// Auxiliary cores recruited.
    pub recruits: u64,
    /// Epochs in boost mode.
    pub boost_epochs: u64,
}

/// A run's per-second series and its latency quantiles.
#[derive(Debug, Clone)]
pub struct Series1s {
    /// Policy.
    pub policy: &'static str,
    /// p99 per second (µs).
    pub p99: Vec<f64>,
    /// Cores per second (mean).
    pub cores: Vec<f64>,
    /// (latency µs, quantile) for the CDF.
    pub cdf: Vec<(f64, f64)>,
}

/// What the study produced.
#[derive(Debug, Clone, Default)]
pub struct StudySummary {
    /// Every (trace, policy).
    pub rows: Vec<Row>,
    /// Rack study lines.
    pub rack: Vec<String>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

/// Why a study cannot run.
#[derive(Debug, Clone, PartialEq)]
pub enum StudyError {
    /// The trace has no packets.
    EmptyTrace,
    /// The profile's epoch is not below the SLO.
    EpochNotBelowSlo {
        /// Profile epoch (ns).
        epoch_ns: u64,
        /// SLO (ns).
        slo_ns: u64,
    },
    /// The trace's peak second needs more cores than the server has at the profile's rate.
    ProfileDoesNotCover {
        /// Peak packets/s.
        peak_pps: f64,
        /// Cores that needs.
        needed: usize,
        /// Cores there are.
        cores: usize,
    },
}

impl std::fmt::Display for StudyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StudyError::EmptyTrace => f.write_str("the trace has no packets"),
            StudyError::EpochNotBelowSlo { epoch_ns, slo_ns } => {
                write!(
                    f,
                    "the profile's epoch ({epoch_ns} ns) is not below the SLO ({slo_ns} ns): re-profile with a shorter --epoch-us"
                )
            }
            StudyError::ProfileDoesNotCover { peak_pps, needed, cores } => write!(
                f,
                "the profile does not cover the trace: its peak second ({peak_pps:.0} pps) needs {needed} cores at the profile's rate, the server has {cores}"
            ),
        }
    }
}

impl std::error::Error for StudyError {}

const CHUNK_NS: u64 = 10_000_000;

/// Packets and distinct flows per second of a source (a pre-pass).
fn census(src: &mut dyn PacketSource) -> (Vec<u64>, Vec<u64>) {
    let secs = (src.duration_ns().div_ceil(1_000_000_000)).max(1) as usize;
    let (mut pkts, mut flows) = (vec![0u64; secs], vec![0u64; secs]);
    let mut seen: Vec<u32> = Vec::new();
    let mut buf = Vec::new();
    let mut until = 0;
    loop {
        until += CHUNK_NS;
        buf.clear();
        let more = src.next_chunk(until, &mut buf);
        for p in &buf {
            let s = ((p.t_ns / 1_000_000_000) as usize).min(secs - 1);
            pkts[s] += 1;
            let f = p.flow as usize;
            if seen.len() <= f {
                seen.resize(f + 1, u32::MAX);
            }
            if seen[f] != s as u32 {
                seen[f] = s as u32;
                flows[s] += 1;
            }
        }
        if !more && until >= src.duration_ns() {
            break;
        }
    }
    (pkts, flows)
}

/// Cores for `pps` over `flows` flows at `share` of each core's capacity.
fn cores_for(profile: &Profile, pps: f64, flows: f64, share: f64) -> usize {
    (1..=4096)
        .find(|&c| pps / c as f64 <= share * profile.rate.pps((flows / c as f64).ceil().max(1.0) as u32) as f64)
        .unwrap_or(4096)
}

/// Runs every policy over one source (built twice by `make`: a census pass, then the run).
pub fn run_trace(
    name: &'static str,
    make: &dyn Fn() -> anyhow::Result<Box<dyn PacketSource>>,
    opts: &StudyOptions,
    profile: &Profile,
) -> anyhow::Result<(Vec<Row>, Vec<Series1s>)> {
    if profile.epoch_ns >= opts.slo_ns {
        return Err(StudyError::EpochNotBelowSlo { epoch_ns: profile.epoch_ns, slo_ns: opts.slo_ns }.into());
    }
    let (pkts, flows) = census(make()?.as_mut());
    let total: u64 = pkts.iter().sum();
    if total == 0 {
        return Err(StudyError::EmptyTrace.into());
    }
    let secs = pkts.len();
    let (peak_s, &peak) = pkts.iter().enumerate().max_by_key(|(_, p)| **p).unwrap_or((0, &0));
    let needed = cores_for(profile, peak as f64, flows.get(peak_s).copied().unwrap_or(1) as f64, 1.0);
    if needed > opts.dedicated + opts.aux {
        return Err(StudyError::ProfileDoesNotCover {
            peak_pps: peak as f64,
            needed,
            cores: opts.dedicated + opts.aux,
        }
        .into());
    }
    let mean_pps = total as f64 / secs as f64;
    let mean_flows = flows.iter().sum::<u64>() as f64 / secs as f64;
    let static_cores = cores_for(profile, mean_pps, mean_flows, 0.75).min(opts.dedicated);

    let mut cfg = NetBlazeConfig::default();
    cfg.slo_ns = opts.slo_ns;
    cfg.epoch_ns = Some(profile.epoch_ns);
    let epoch = profile.epoch_ns;
    let service = Service::from_profile(profile);
    let mut runs: Vec<(Policy, Engine, u64)> = Vec::new();
    for &k in &opts.policies {
        let p = Policy::new(k, cfg, opts.dedicated, opts.aux, static_cores, secs)?;
        let aux = if k == Kind::NetBlaze { opts.aux } else { 0 };
        runs.push((p, Engine::new(service.clone(), opts.dedicated, aux, secs), epoch));
    }
    let mut src = make()?;
    let end = src.duration_ns();
    let mut buf = Vec::new();
    let mut until = 0;
    loop {
        until += CHUNK_NS;
        buf.clear();
        let more = src.next_chunk(until, &mut buf);
        let fl = src.flows();
        for (pol, eng, next) in &mut runs {
            eng.grow_flows(fl.len());
            for p in &buf {
                while p.t_ns >= *next {
                    pol.epoch(*next, epoch, eng, profile);
                    *next += epoch;
                }
                let route = pol.route(p.flow, &fl[p.flow as usize]);
                eng.arrive(p.t_ns, p.flow, route, pol.follows());
            }
        }
        if !more && until >= end {
            break;
        }
    }
    let mut rows = Vec::new();
    let mut series = Vec::new();
    for (pol, eng, next) in &mut runs {
        while *next <= end {
            pol.epoch(*next, epoch, eng, profile);
            *next += epoch;
        }
        eng.drain();
        let us = |q: f64| eng.latency.quantile(q).unwrap_or(0) as f64 / 1e3;
        let used: Vec<_> = eng.windows.iter().filter(|w| w.count() > 0).collect();
        let ok = used.iter().filter(|w| w.quantile(0.99).unwrap_or(0) <= opts.slo_ns).count();
        let c = &eng.counters;
        rows.push(Row {
            preset: name,
            policy: pol.kind.name(),
            p50_us: us(0.5),
            p99_us: us(0.99),
            p999_us: us(0.999),
            windows_ok: if used.is_empty() { 0.0 } else { ok as f64 / used.len() as f64 },
            core_seconds: pol.core_ns / 1e9,
            migrations: c.migrations,
            reorderings: c.reorderings,
            drops: c.dropped,
            packets: c.arrived,
            slo_risk: c.slo_risk,
            splits: c.splits,
            recruits: c.recruits,
            boost_epochs: c.boost_epochs,
        });
        let mut qs: Vec<f64> = (0..=90).map(|i| f64::from(i) / 100.0).collect();
        qs.extend((1..=99).map(|i| 0.9 + f64::from(i) / 1000.0));
        qs.extend((1..=10).map(|i| 0.999 + f64::from(i) / 10_000.0));
        series.push(Series1s {
            policy: pol.kind.name(),
            p99: eng.windows.iter().map(|w| w.quantile(0.99).unwrap_or(0) as f64 / 1e3).collect(),
            cores: pol.cores_per_s.iter().map(|ns| ns / 1e9).collect(),
            cdf: qs.iter().map(|&q| (us(q), q)).collect(),
        });
    }
    Ok((rows, series))
}

/// The summary as CSV.
pub fn rows_to_csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "trace,policy,p50_us,p99_us,p999_us,windows_meeting_slo,core_seconds,migrations,reorderings,drops,packets,slo_risk,whale_splits,aux_recruits,boost_epochs\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{:.1},{:.1},{:.1},{:.4},{:.3},{},{},{},{},{},{},{},{}",
            r.preset,
            r.policy,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.windows_ok,
            r.core_seconds,
            r.migrations,
            r.reorderings,
            r.drops,
            r.packets,
            r.slo_risk,
            r.splits,
            r.recruits,
            r.boost_epochs
        );
    }
    s
}

/// The summary as a Markdown table.
pub fn rows_to_table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| trace | policy | p50 µs | p99 µs | p99.9 µs | windows meeting SLO | core-s | migrations | reorderings | drops |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.1} % | {:.1} | {} | {} | {} |",
            r.preset,
            r.policy,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            100.0 * r.windows_ok,
            r.core_seconds,
            r.migrations,
            r.reorderings,
            r.drops
        );
    }
    s
}

fn write(out: &Path, name: &str, body: &str, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let p = out.join(name);
    std::fs::write(&p, body).map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
    files.push(p);
    Ok(())
}

fn plots(out: &Path, name: &str, slo_us: f64, series: &[Series1s], files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let cap = 10.0 * slo_us;
    let cdf = LinePlot {
        title: format!("Latency CDF, {name} trace (x capped at 10 × SLO)"),
        x_label: "latency (µs)".into(),
        y_label: "fraction of packets".into(),
        series: series
            .iter()
            .map(|s| Series::new(s.policy, s.cdf.iter().map(|&(x, q)| (x.min(cap), q)).collect()))
            .collect(),
        y_from_zero: true,
        markers: false,
    };
    write(out, &format!("netblaze_{name}_latency_cdf.svg"), &cdf.to_svg(), files)?;
    let mut p99: Vec<Series> = series
        .iter()
        .map(|s| Series::new(s.policy, s.p99.iter().enumerate().map(|(i, &v)| (i as f64, v.min(cap))).collect()))
        .collect();
    let len = series.first().map_or(1, |s| s.p99.len()) as f64;
    p99.push(Series::new("SLO", vec![(0.0, slo_us), (len, slo_us)]).dashed());
    let p = LinePlot {
        title: format!("p99 latency per second, {name} trace (capped at 10 × SLO)"),
        x_label: "time (s)".into(),
        y_label: "p99 latency (µs)".into(),
        series: p99,
        y_from_zero: true,
        markers: false,
    };
    write(out, &format!("netblaze_{name}_p99_per_second.svg"), &p.to_svg(), files)?;
    let c = LinePlot {
        title: format!("Cores in use, {name} trace (dedicated + borrowed auxiliary)"),
        x_label: "time (s)".into(),
        y_label: "cores (mean over the second)".into(),
        series: series
            .iter()
            .map(|s| Series::new(s.policy, s.cores.iter().enumerate().map(|(i, &v)| (i as f64, v)).collect()))
            .collect(),
        y_from_zero: true,
        markers: false,
    };
    write(out, &format!("netblaze_{name}_cores.svg"), &c.to_svg(), files)?;
    let mut csv = String::from("second");
    for s in series {
        let _ = write!(csv, ",{0}_p99_us,{0}_cores", s.policy);
    }
    csv.push('\n');
    for i in 0..series.first().map_or(0, |s| s.p99.len()) {
        let _ = write!(csv, "{i}");
        for s in series {
            let _ = write!(
                csv,
                ",{:.1},{:.3}",
                s.p99.get(i).copied().unwrap_or(0.0),
                s.cores.get(i).copied().unwrap_or(0.0)
            );
        }
        csv.push('\n');
    }
    write(out, &format!("netblaze_{name}_per_second.csv"), &csv, files)
}

/// The rack-scale ingress study (fluid model per second, docs/NETBLAZE.md): a backbone-like
/// trace `scale` times busier spread over `servers` servers of `cores` cores each, by the
/// ingress mapper (destination /k aggregates, τ) and by an ECMP-like hash.
pub fn rack_study(
    opts: &StudyOptions,
    profile: &Profile,
    seconds: u64,
    scale: f64,
    servers: usize,
    cores: usize,
) -> anyhow::Result<Vec<String>> {
    let mut cfg = GenConfig::preset(Preset::Backbone, opts.seed, seconds * 1_000_000_000);
    cfg.flows_per_s *= scale;
    let mut src = TraceGen::new(cfg)?;
    let secs = seconds as usize;
    let mut lines = Vec::new();
    for &(k, tau) in &[(24u8, (cores * 3 / 4) as u16), (16u8, (cores * 3 / 4) as u16)] {
        let mut icfg = IngressConfig::default();
        icfg.prefix_len = k;
        icfg.tau = tau.max(1);
        let mut ing = IngressMapper::new(icfg, servers);
        let mut assign: Vec<u16> = Vec::new();
        let mut load = vec![vec![0u64; servers]; secs];
        let mut ecmp = vec![vec![0u64; servers]; secs];
        let mut buf = Vec::new();
        let mut until = 0;
        let mut second = 0;
        let per_core = profile.rate.floor_pps() as f64;
        let mut src2 = TraceGen::new({
            let mut c = GenConfig::preset(Preset::Backbone, opts.seed, seconds * 1_000_000_000);
            c.flows_per_s *= scale;
            c
        })?;
        let src_ref: &mut TraceGen = if k == 24 { &mut src } else { &mut src2 };
        loop {
            until += CHUNK_NS;
            buf.clear();
            let more = src_ref.next_chunk(until, &mut buf);
            let fl = src_ref.flows();
            for p in &buf {
                let s = ((p.t_ns / 1_000_000_000) as usize).min(secs - 1);
                if s != second {
                    // Servers report their dedicated cores once per second.
                    for (i, &l) in load[second].iter().enumerate() {
                        ing.report(i, ((l as f64 / (0.75 * per_core)).ceil() as u16).max(u16::from(l > 0)));
                    }
                    second = s;
                }
                let fi = p.flow as usize;
                if assign.len() <= fi {
                    assign.resize(fi + 1, u16::MAX);
                }
                if assign[fi] == u16::MAX {
                    assign[fi] = ing.steer(fl[fi].dst).map_or(0, |st| st.server());
                }
                load[s][usize::from(assign[fi])] += 1;
                ecmp[s][fl[fi].rss as usize % servers] += 1;
            }
            if !more && until >= src_ref.duration_ns() {
                break;
            }
        }
        let summarize = |m: &[Vec<u64>]| {
            let used: f64 = m.iter().map(|r| r.iter().filter(|&&x| x > 0).count() as f64).sum::<f64>() / secs as f64;
            let cores_used: f64 =
                m.iter().map(|r| r.iter().map(|&x| (x as f64 / (0.75 * per_core)).ceil()).sum::<f64>()).sum::<f64>()
                    / secs as f64;
            let ok = m.iter().flatten().filter(|&&x| x > 0 && x as f64 <= cores as f64 * per_core).count() as f64
                / m.iter().flatten().filter(|&&x| x > 0).count().max(1) as f64;
            (used, cores_used, ok)
        };
        let (u, c, ok) = summarize(&load);
        let (eu, ec, eok) = summarize(&ecmp);
        lines.push(format!(
            "ingress /{k} tau={tau}: servers {u:.2}, dedicated cores {c:.1}, server-seconds within capacity {:.1} %, ToR entries {}",
            100.0 * ok,
            ing.routes()
        ));
        if k == 24 {
            lines.push(format!(
                "ecmp-like hash: servers {eu:.2}, dedicated cores {ec:.1}, server-seconds within capacity {:.1} %",
                100.0 * eok
            ));
        }
    }
    Ok(lines)
}

/// Runs the whole study and writes its files into `out`.
pub fn run_study(out: &Path, opts: &StudyOptions) -> anyhow::Result<StudySummary> {
    std::fs::create_dir_all(out).map_err(|e| anyhow::anyhow!("creating {}: {e}", out.display()))?;
    let profile = load_profile(&opts.profile)?;
    let mut summary = StudySummary::default();
    let results: Vec<anyhow::Result<(Vec<Row>, Vec<Series1s>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = opts
            .presets
            .iter()
            .map(|&preset| {
                let profile = &profile;
                s.spawn(move || {
                    let make = || -> anyhow::Result<Box<dyn PacketSource>> {
                        Ok(Box::new(TraceGen::new(GenConfig::preset(preset, opts.seed, opts.seconds * 1_000_000_000))?))
                    };
                    run_trace(preset.name(), &make, opts, profile)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(anyhow::anyhow!("a study thread panicked"))))
            .collect()
    });
    for (preset, r) in opts.presets.iter().zip(results) {
        let (rows, series) = r?;
        plots(out, preset.name(), opts.slo_ns as f64 / 1e3, &series, &mut summary.files)?;
        summary.rows.extend(rows);
    }
    write(out, "netblaze_summary.csv", &rows_to_csv(&summary.rows), &mut summary.files)?;
    if opts.rack {
        summary.rack = rack_study(opts, &profile, opts.seconds.min(10), 4.0, 8, 16)?;
        write(out, "netblaze_rack.txt", &(summary.rack.join("\n") + "\n"), &mut summary.files)?;
    }
    Ok(summary)
}
