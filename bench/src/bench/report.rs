//! The study's results: what was measured ([`Results`]), medians over quiet rounds, and
//! the CSV files and SVG figures written from it (the tables are [`super::summary`]'s).

use std::path::Path;

use anyhow::{Context, Result};

use super::dut::{Dut, Sched};
use super::frames::SizeMix;
use super::generator::TrialResult;
use super::plot::{BarChart, BarGroup, LineChart, Series};
use super::search::Outcome;
use cadence_harness::protocol::Counters;

/// One trial as run.
#[derive(Debug, Clone)]
pub struct TrialRow {
    pub phase: &'static str,
    pub round: u32,
    pub dut: String,
    pub mix: SizeMix,
    pub load_pct: Option<f64>,
    pub r: TrialResult,
}

/// One throughput search.
#[derive(Debug, Clone)]
pub struct SearchRec {
    pub round: u32,
    pub dut: Dut,
    pub mix: SizeMix,
    pub outcome: Outcome,
    /// Its round was noisy.
    pub noisy: bool,
}

/// One latency point.
#[derive(Debug, Clone)]
pub struct LatRec {
    pub dut: Dut,
    pub mix: SizeMix,
    /// Fraction of the zero-loss rate (NaN: a ceiling point at another device's rate).
    pub frac: f64,
    pub rate: f64,
    pub r: TrialResult,
}

/// One point of the Metronome study.
#[derive(Debug, Clone)]
pub struct MetRec {
    pub dut: Dut,
    pub load_pct: u32,
    pub rate: f64,
    /// Mean vacation during the trial, from two `@stats` lines (Cadence Metronome only).
    pub vac_window_ns: Option<f64>,
    /// The instance's `@summary` (Cadence).
    pub summary: Option<Counters>,
    pub r: TrialResult,
}

/// Everything measured.
#[derive(Debug, Default)]
pub struct Results {
    pub facts: Vec<(String, String)>,
    pub quick: bool,
    pub with_dpdk: bool,
    pub tx_path: String,
    pub gencheck: Vec<(String, TrialResult)>,
    pub trials: Vec<TrialRow>,
    pub searches: Vec<SearchRec>,
    /// (round, others' mean CPUs, noisy).
    pub rounds: Vec<(u32, f64, bool)>,
    pub latency: Vec<LatRec>,
    pub metronome: Vec<MetRec>,
    pub metronome_ref_pps: f64,
    /// The first frame after a second of idle ([`IDLE_GAP_S`]): one trial per schedule.
    pub idle_first: Vec<LatRec>,
    pub failures: Vec<String>,
    pub elapsed_s: f64,
}

/// The idle before each frame of the first-frame-after-idle trial, seconds (issue 31).
pub const IDLE_GAP_S: f64 = 1.0;
/// Frames of that trial (one per gap).
pub const IDLE_FRAMES: f64 = 20.0;

/// The median (mean of the middle two for an even count); 0 for none.
pub fn median(v: &[f64]) -> f64 {
    let mut s: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if s.is_empty() {
        return 0.0;
    }
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 }
}

/// The mean vacation between two `@stats` snapshots of lane 0: each carries the running
/// mean (`lane0_vac_mean_ns`) over `lane0_wins − 1` vacations.
pub fn window_vacation(before: Option<&Counters>, after: Option<&Counters>) -> Option<f64> {
    let (a, b) = (before?, after?);
    let (wa, wb) = (a.0.get("lane0_wins").copied()?, b.0.get("lane0_wins").copied()?);
    let (ma, mb) = (a.0.get("lane0_vac_mean_ns").copied()? as f64, b.0.get("lane0_vac_mean_ns").copied()? as f64);
    let (na, nb) = (wa.saturating_sub(1) as f64, wb.saturating_sub(1) as f64);
    (nb > na).then(|| (mb * nb - ma * na) / (nb - na))
}

/// Min, median, max.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub n: usize,
    /// Rounds whose result was the rig's limit.
    pub rig_limited: usize,
}

impl Results {
    /// The searches of `dut`/`mix` that count: quiet rounds, or all rounds when none was quiet.
    fn counted(&self, dut: &Dut, mix: SizeMix) -> (Vec<&SearchRec>, bool) {
        let all: Vec<&SearchRec> = self.searches.iter().filter(|s| s.dut == *dut && s.mix == mix).collect();
        let quiet: Vec<&SearchRec> = all.iter().copied().filter(|s| !s.noisy).collect();
        if quiet.is_empty() { (all, false) } else { (quiet, true) }
    }

    /// Zero-loss rate over the counted rounds.
    pub fn spread(&self, dut: &Dut, mix: SizeMix) -> Option<(Spread, bool)> {
        let (recs, quiet) = self.counted(dut, mix);
        if recs.is_empty() {
            return None;
        }
        let v: Vec<f64> = recs.iter().map(|s| s.outcome.rate).collect();
        let spread = Spread {
            min: v.iter().copied().fold(f64::MAX, f64::min),
            median: median(&v),
            max: v.iter().copied().fold(0.0, f64::max),
            n: v.len(),
            rig_limited: recs.iter().filter(|s| s.outcome.rig_limited).count(),
        };
        Some((spread, quiet))
    }

    /// Median zero-loss rate of `dut`/`mix`.
    pub fn zero_loss_median(&self, dut: &Dut, mix: SizeMix) -> Option<f64> {
        self.spread(dut, mix).map(|(s, _)| s.median)
    }

    /// Where to start a search: above what this device did before, else above what the
    /// generator reached on its own.
    pub fn start_rate(&self, dut: &Dut, mix: SizeMix) -> f64 {
        let prev: Vec<f64> = self
            .searches
            .iter()
            .filter(|s| s.dut == *dut && s.mix == mix && s.outcome.rate > 0.0)
            .map(|s| s.outcome.rate)
            .collect();
        if !prev.is_empty() {
            return prev.iter().copied().fold(0.0, f64::max) * 1.15;
        }
        let reached: Vec<f64> = self.gencheck.iter().map(|(_, r)| r.achieved_pps).collect();
        let g = reached.iter().copied().fold(0.0, f64::max);
        if g > 0.0 { g * 1.2 } else { 1.5e6 }
    }

    pub(super) fn duts_in_order(&self) -> Vec<Dut> {
        let mut v: Vec<Dut> = Vec::new();
        for s in &self.searches {
            if !v.contains(&s.dut) {
                v.push(s.dut.clone());
            }
        }
        v
    }
}

/// A CSV file: header and rows.
#[derive(Debug, Default)]
struct Csv {
    text: String,
}

impl Csv {
    fn new(header: &[&str]) -> Csv {
        Csv { text: header.join(",") + "\n" }
    }

    fn row(&mut self, cells: &[String]) {
        let quoted: Vec<String> = cells
            .iter()
            .map(|c| if c.contains([',', '"']) { format!("\"{}\"", c.replace('"', "\"\"")) } else { c.clone() })
            .collect();
        self.text += &(quoted.join(",") + "\n");
    }

    fn write(&self, dir: &Path, name: &str) -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, &self.text).with_context(|| format!("writing {}", p.display()))
    }
}

pub(super) fn f(v: f64, digits: usize) -> String {
    if v.is_finite() { format!("{v:.digits$}") } else { String::new() }
}

const TRIAL_COLUMNS: [&str; 33] = [
    "phase",
    "round",
    "dut",
    "mix",
    "load_pct",
    "asked_pps",
    "achieved_pps",
    "sent",
    "received",
    "unique",
    "lost",
    "duplicated",
    "reordered",
    "foreign",
    "stale",
    "sink_drops",
    "refused",
    "generator_limited",
    "zero_loss",
    "latency_source",
    "lat_p50_ns",
    "lat_p99_ns",
    "lat_p999_ns",
    "lat_max_ns",
    "worker_cpu",
    "worker_cpu_each",
    "dut_process_cpu",
    "gen_thread_cpu",
    "xtask_cpu",
    "ksoftirqd_cpu",
    "softirq_cpu",
    "steal_cpu",
    "others_cpu",
];

fn trial_cells(phase: &str, round: u32, dut: &str, mix: SizeMix, load: Option<f64>, r: &TrialResult) -> Vec<String> {
    let u = &r.usage;
    vec![
        phase.into(),
        round.to_string(),
        dut.into(),
        mix.label(),
        load.map_or(String::new(), |l| f(l, 0)),
        f(r.asked_pps, 0),
        f(r.achieved_pps, 0),
        r.sent.to_string(),
        r.received.to_string(),
        r.unique.to_string(),
        r.lost.to_string(),
        r.duplicated.to_string(),
        r.reordered.to_string(),
        r.foreign.to_string(),
        r.stale.to_string(),
        r.sink_drops.to_string(),
        r.refused.to_string(),
        r.generator_limited().to_string(),
        r.zero_loss().to_string(),
        r.latency_source.into(),
        r.latency.p50_ns.to_string(),
        r.latency.p99_ns.to_string(),
        r.latency.p999_ns.to_string(),
        r.latency.max_ns.to_string(),
        f(u.workers_total(), 4),
        u.workers.iter().map(|w| f(*w, 4)).collect::<Vec<_>>().join(";"),
        f(u.dut, 4),
        f(r.gen_cpu, 4),
        f(u.ours, 4),
        f(u.ksoftirqd, 4),
        f(u.softirq, 4),
        f(u.steal, 4),
        f(u.others, 4),
    ]
}

fn counter(c: Option<&Counters>, key: &str) -> String {
    c.and_then(|c| c.0.get(key)).map_or(String::new(), u64::to_string)
}

/// Worker CPU share of the whole instance from `@summary` (Σ core cpu / Σ core wall).
fn summary_share(c: Option<&Counters>, workers: usize) -> Option<f64> {
    let c = c?;
    let (mut cpu, mut wall) = (0u64, 0u64);
    for i in 0..workers {
        cpu += c.0.get(&format!("core{i}_cpu_ns")).copied()?;
        wall += c.0.get(&format!("core{i}_wall_ns")).copied()?;
    }
    (wall > 0).then(|| cpu as f64 / wall as f64 * workers as f64)
}

/// Writes every CSV and SVG file.
pub fn write_all(res: &Results, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut facts = Csv::new(&["key", "value"]);
    for (k, v) in &res.facts {
        facts.row(&[k.clone(), v.clone()]);
    }
    facts.row(&["tx_path".into(), res.tx_path.clone()]);
    facts.row(&["elapsed_s".into(), f(res.elapsed_s, 0)]);
    facts.write(dir, "facts.csv")?;

    let mut trials = Csv::new(&TRIAL_COLUMNS);
    for (path, r) in &res.gencheck {
        trials.row(&trial_cells("gencheck", 0, &format!("ceiling/{path}"), SizeMix::Fixed(60), None, r));
    }
    for t in &res.trials {
        trials.row(&trial_cells(t.phase, t.round, &t.dut, t.mix, t.load_pct, &t.r));
    }
    trials.write(dir, "trials.csv")?;

    let mut searches =
        Csv::new(&["round", "dut", "mix", "zero_loss_pps", "fail_pps", "rig_limited", "trials", "round_noisy"]);
    for s in &res.searches {
        searches.row(&[
            s.round.to_string(),
            s.dut.name(),
            s.mix.label(),
            f(s.outcome.rate, 0),
            s.outcome.fail.map_or(String::new(), |x| f(x, 0)),
            s.outcome.rig_limited.to_string(),
            s.outcome.trials.to_string(),
            s.noisy.to_string(),
        ]);
    }
    searches.write(dir, "searches.csv")?;

    let mut rounds = Csv::new(&["round", "others_cpu", "noisy"]);
    for (r, o, n) in &res.rounds {
        rounds.row(&[r.to_string(), f(*o, 4), n.to_string()]);
    }
    rounds.write(dir, "rounds.csv")?;

    let mixes = [SizeMix::Fixed(60), SizeMix::Imix];
    let mut zl = Csv::new(&[
        "dut",
        "mix",
        "rounds_counted",
        "quiet_only",
        "min_pps",
        "median_pps",
        "max_pps",
        "median_wire_mbps",
        "rig_limited_rounds",
    ]);
    let mut groups = Vec::new();
    for dut in res.duts_in_order() {
        let mut bars = Vec::new();
        for mix in mixes {
            let Some((s, quiet)) = res.spread(&dut, mix) else {
                bars.push(None);
                continue;
            };
            zl.row(&[
                dut.name(),
                mix.label(),
                s.n.to_string(),
                quiet.to_string(),
                f(s.min, 0),
                f(s.median, 0),
                f(s.max, 0),
                f(mix.wire_mbps(s.median), 1),
                s.rig_limited.to_string(),
            ]);
            bars.push(Some((s.median, s.min, s.max)));
        }
        groups.push(BarGroup { label: dut.name(), bars });
    }
    zl.write(dir, "zero_loss.csv")?;
    if !groups.is_empty() {
        let chart = BarChart {
            title: "Zero-loss rate (RFC 2544, median of rounds, min–max whiskers)".into(),
            y_label: "frames/s".into(),
            series: mixes.iter().map(|m| m.label()).collect(),
            groups,
        };
        std::fs::write(dir.join("zero_loss.svg"), chart.svg())?;
    }

    let mut lat =
        Csv::new(&["dut", "mix", "load_pct", "rate_pps", "p50_ns", "p99_ns", "p999_ns", "max_ns", "lost", "samples"]);
    for l in &res.latency {
        lat.row(&[
            l.dut.name(),
            l.mix.label(),
            f(l.frac * 100.0, 0),
            f(l.rate, 0),
            l.r.latency.p50_ns.to_string(),
            l.r.latency.p99_ns.to_string(),
            l.r.latency.p999_ns.to_string(),
            l.r.latency.max_ns.to_string(),
            l.r.lost.to_string(),
            l.r.latency.samples.to_string(),
        ]);
    }
    lat.write(dir, "latency.csv")?;
    let mut series = Vec::new();
    for dut in res.duts_in_order() {
        let pts: Vec<(f64, f64)> = res
            .latency
            .iter()
            .filter(|l| l.dut == dut && l.mix == SizeMix::Fixed(60))
            .map(|l| (l.rate, l.r.latency.p50_ns as f64 / 1e3))
            .collect();
        if !pts.is_empty() {
            series.push(Series { name: dut.name(), points: pts, dashed: dut == Dut::Ceiling });
        }
    }
    if !series.is_empty() {
        let chart = LineChart {
            title: "Latency p50 vs offered load, 64 B (10/50/90 % of each zero-loss rate; dashed: ceiling)".into(),
            x_label: "offered load (frames/s)".into(),
            y_label: "p50 latency (µs)".into(),
            log_y: true,
            series,
        };
        std::fs::write(dir.join("latency.svg"), chart.svg())?;
    }

    write_metronome(res, dir)
}

fn write_metronome(res: &Results, dir: &Path) -> Result<()> {
    let mut met = Csv::new(&[
        "dut",
        "workers",
        "vbar_us",
        "load_pct",
        "rate_pps",
        "achieved_pps",
        "lost",
        "worker_cpu",
        "worker_cpu_each",
        "others_cpu",
        "vac_window_mean_ns",
        "vac_summary_mean_ns",
        "vac_summary_p99_ns",
        "late_p50_ns",
        "late_p99_ns",
        "summary_worker_cpu",
        "rho_permille",
        "ts_ns",
    ]);
    for m in &res.metronome {
        let s = m.summary.as_ref();
        let w = m.dut.workers();
        let lates = |k: &str| (0..w).map(|i| counter(s, &format!("core{i}_late_{k}_ns"))).collect::<Vec<_>>().join(";");
        met.row(&[
            m.dut.name(),
            w.to_string(),
            match m.dut {
                Dut::Cadence { vbar_us, sched: Sched::Metronome, .. } => vbar_us.to_string(),
                _ => String::new(),
            },
            m.load_pct.to_string(),
            f(m.rate, 0),
            f(m.r.achieved_pps, 0),
            m.r.lost.to_string(),
            f(m.r.usage.workers_total(), 4),
            m.r.usage.workers.iter().map(|x| f(*x, 4)).collect::<Vec<_>>().join(";"),
            f(m.r.usage.others, 4),
            m.vac_window_ns.map_or(String::new(), |v| f(v, 0)),
            counter(s, "lane0_vac_mean_ns"),
            counter(s, "lane0_vac_p99_ns"),
            lates("p50"),
            lates("p99"),
            summary_share(s, w).map_or(String::new(), |v| f(v, 4)),
            counter(s, "lane0_rho_permille"),
            counter(s, "lane0_ts_ns"),
        ]);
    }
    met.write(dir, "metronome.csv")?;
    if res.metronome.is_empty() {
        return Ok(());
    }
    let configs = metronome_duts(res);
    for w in [1usize, 2] {
        let series: Vec<Series> = configs
            .iter()
            .filter(|d| d.workers() == w)
            .map(|d| Series {
                name: d.name(),
                points: res
                    .metronome
                    .iter()
                    .filter(|m| m.dut == *d)
                    .map(|m| (f64::from(m.load_pct), m.r.usage.workers_total()))
                    .collect(),
                dashed: false,
            })
            .collect();
        let chart = LineChart {
            title: format!(
                "Worker CPU vs load, {w} worker(s){}",
                if w == 2 { " (CPUs 1 and 0; CPU 0 shared with the generator)" } else { " (CPU 1)" }
            ),
            x_label: format!("offered load (% of {:.0} frames/s)", res.metronome_ref_pps),
            y_label: "CPUs used by the workers".into(),
            log_y: false,
            series,
        };
        std::fs::write(dir.join(format!("cpu_vs_load_w{w}.svg")), chart.svg())?;
    }
    let mut series = Vec::new();
    for d in configs.iter().filter(|d| matches!(d, Dut::Cadence { sched: Sched::Metronome, workers: 1, .. })) {
        let Dut::Cadence { vbar_us, .. } = d else { continue };
        let pts: Vec<(f64, f64)> = res
            .metronome
            .iter()
            .filter(|m| m.dut == *d && m.load_pct > 0)
            .filter_map(|m| m.vac_window_ns.map(|v| (f64::from(m.load_pct), v / 1e3)))
            .collect();
        series.push(Series { name: format!("measured, V̄ = {vbar_us} µs"), points: pts, dashed: false });
        series.push(Series {
            name: format!("V̄ = {vbar_us} µs"),
            points: vec![(10.0, f64::from(*vbar_us)), (100.0, f64::from(*vbar_us))],
            dashed: true,
        });
    }
    let chart = LineChart {
        title: "Mean vacation vs load (Metronome, 1 worker)".into(),
        x_label: format!("offered load (% of {:.0} frames/s)", res.metronome_ref_pps),
        y_label: "mean vacation (µs)".into(),
        log_y: false,
        series,
    };
    std::fs::write(dir.join("vacation_vs_load.svg"), chart.svg())?;
    Ok(())
}

pub(super) fn metronome_duts(res: &Results) -> Vec<Dut> {
    let mut v: Vec<Dut> = Vec::new();
    for m in &res.metronome {
        if !v.contains(&m.dut) {
            v.push(m.dut.clone());
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::dut::Io;
    use std::collections::BTreeMap;

    fn counters(pairs: &[(&str, u64)]) -> Counters {
        Counters(pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect::<BTreeMap<_, _>>())
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[f64::NAN, 5.0]), 5.0);
    }

    #[test]
    fn vacation_of_a_window_from_two_running_means() {
        // 100 vacations of mean 20 µs, then 300 more of mean 40 µs: the running mean is 35.
        let a = counters(&[("lane0_wins", 101), ("lane0_vac_mean_ns", 20_000)]);
        let b = counters(&[("lane0_wins", 401), ("lane0_vac_mean_ns", 35_000)]);
        let v = window_vacation(Some(&a), Some(&b)).unwrap();
        assert!((v - 40_000.0).abs() < 1e-6, "{v}");
        assert_eq!(window_vacation(Some(&b), Some(&b)), None, "no vacation in between");
        assert_eq!(window_vacation(None, Some(&b)), None);
    }

    fn search(round: u32, dut: Dut, rate: f64, rig: bool, noisy: bool) -> SearchRec {
        SearchRec {
            round,
            dut,
            mix: SizeMix::Fixed(60),
            outcome: Outcome { rate, fail: None, rig_limited: rig, trials: 3 },
            noisy,
        }
    }

    #[test]
    fn noisy_rounds_are_left_out_unless_all_are_noisy() {
        let d = Dut::Testpmd { io: Io::AfXdp, workers: 1 };
        let mut res = Results {
            searches: vec![
                search(0, d.clone(), 300.0, false, false),
                search(1, d.clone(), 100.0, false, true),
                search(2, d.clone(), 320.0, true, false),
            ],
            ..Results::default()
        };
        let (s, quiet) = res.spread(&d, SizeMix::Fixed(60)).unwrap();
        assert!(quiet);
        assert_eq!((s.n, s.min, s.median, s.max, s.rig_limited), (2, 300.0, 310.0, 320.0, 1));
        for r in &mut res.searches {
            r.noisy = true;
        }
        let (s, quiet) = res.spread(&d, SizeMix::Fixed(60)).unwrap();
        assert!(!quiet);
        assert_eq!((s.n, s.median), (3, 300.0));
        assert_eq!(res.start_rate(&d, SizeMix::Fixed(60)), 320.0 * 1.15);
        assert_eq!(res.zero_loss_median(&Dut::Ceiling, SizeMix::Fixed(60)), None);
    }
}
