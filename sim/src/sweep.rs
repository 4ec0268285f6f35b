//! The Metronome load sweep: offered load 0.05–0.95 × M = 1..4 on one queue, for the
//! primary/backup rule and the equal-timeouts strawman, plus a load ramp; CSV and SVG out.
//!
//! Figures reproduced in shape (seed paper): mean vacation flat at `V̄` across load (Table I,
//! Fig. 9), CPU growing with load (Fig. 9b), equal timeouts burning more CPU at high load
//! (Fig. 6), busy tries growing with M (Fig. 7).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use cadence_core::metronome::{LossPolicy, short_timeout_factor};

use crate::metronome::{LoadProfile, RunResult, SimConfig, TracePoint, run};
use crate::plot::{LinePlot, Series};

/// A controller variant to sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variant {
    /// Name in files and legends.
    pub name: &'static str,
    /// What losers do.
    pub policy: LossPolicy,
    /// `MetronomeConfig::vacation_feedback_gain`.
    pub feedback_gain: f64,
}

impl Variant {
    /// The paper's rule exactly.
    pub const PRIMARY_BACKUP: Variant =
        Variant { name: "primary-backup", policy: LossPolicy::PrimaryBackup, feedback_gain: 0.0 };
    /// The paper's rule plus Cadence's vacation feedback (gain 0.03).
    pub const PRIMARY_BACKUP_FEEDBACK: Variant =
        Variant { name: "primary-backup+feedback", policy: LossPolicy::PrimaryBackup, feedback_gain: 0.03 };
    /// The paper's strawman of Fig. 6: losers sleep `T_S` too.
    pub const EQUAL_TIMEOUTS: Variant =
        Variant { name: "equal-timeouts", policy: LossPolicy::EqualTimeouts, feedback_gain: 0.0 };

    /// `base` with this variant's controller knobs, `workers` and a constant `load`.
    pub fn config(&self, base: &SimConfig, workers: usize, load: f64) -> SimConfig {
        let mut cfg = base.clone();
        cfg.workers = workers;
        cfg.load = LoadProfile::Constant(load);
        cfg.controller.loss_policy = self.policy;
        cfg.controller.vacation_feedback_gain = self.feedback_gain;
        cfg
    }
}

/// What to sweep.
#[derive(Debug, Clone)]
pub struct SweepOptions {
    /// Offered loads per queue.
    pub loads: Vec<f64>,
    /// Worker counts M (N = `base.queues`).
    pub workers: Vec<usize>,
    /// Controller variants to compare.
    pub variants: Vec<Variant>,
    /// Everything else (its `workers`, `load` and the variant's knobs are overwritten).
    pub base: SimConfig,
}

impl Default for SweepOptions {
    /// Loads 0.05, 0.10, …, 0.95; M = 1..4; all three variants; 1 s of simulated time per point.
    fn default() -> Self {
        Self {
            loads: (1..=19).map(|i| f64::from(i) * 0.05).collect(),
            workers: vec![1, 2, 3, 4],
            variants: vec![Variant::PRIMARY_BACKUP, Variant::PRIMARY_BACKUP_FEEDBACK, Variant::EQUAL_TIMEOUTS],
            base: SimConfig { duration_ns: 1_000_000_000, ..SimConfig::default() },
        }
    }
}

/// One point of the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct SweepRow {
    /// Controller variant.
    pub variant: Variant,
    /// M.
    pub workers: usize,
    /// N.
    pub queues: usize,
    /// Offered load per queue.
    pub load: f64,
    /// Mean CPU share per worker.
    pub cpu_share: f64,
    /// Sum of CPU shares (cores).
    pub cpu_cores: f64,
    /// Mean measured vacation (µs).
    pub vacation_mean_us: f64,
    /// p99 measured vacation (µs).
    pub vacation_p99_us: f64,
    /// Mean `T_S` over releases (µs).
    pub short_timeout_mean_us: f64,
    /// Final ρ estimate.
    pub rho_estimate: f64,
    /// Lost tries / tries.
    pub busy_try_ratio: f64,
    /// Packet latency p50 (µs).
    pub latency_p50_us: f64,
    /// Packet latency p99 (µs).
    pub latency_p99_us: f64,
    /// Packets dropped.
    pub dropped: u64,
    /// Packets arrived.
    pub arrived: u64,
}

impl SweepRow {
    /// The row for run `r` of `variant` under `cfg` at `load`.
    pub fn from_run(variant: Variant, cfg: &SimConfig, load: f64, r: &RunResult) -> Self {
        let us = |ns: f64| ns / 1_000.0;
        Self {
            variant,
            workers: cfg.workers,
            queues: cfg.queues,
            load,
            cpu_share: r.cpu_share(),
            cpu_cores: r.cpu_cores(),
            vacation_mean_us: us(r.vacation_mean_ns()),
            vacation_p99_us: us(r.vacation_p99_ns()),
            short_timeout_mean_us: us(r.mean_short_timeout_ns()),
            rho_estimate: r.rho_estimate(),
            busy_try_ratio: r.busy_try_ratio(),
            latency_p50_us: us(r.latency.quantile(0.5).unwrap_or(0) as f64),
            latency_p99_us: us(r.latency.quantile(0.99).unwrap_or(0) as f64),
            dropped: r.dropped(),
            arrived: r.arrived(),
        }
    }
}

/// Runs every (policy, M, load) point.
pub fn sweep(opts: &SweepOptions) -> anyhow::Result<Vec<SweepRow>> {
    let mut rows = Vec::new();
    for &variant in &opts.variants {
        for &m in &opts.workers {
            for &load in &opts.loads {
                let cfg = variant.config(&opts.base, m, load);
                let r = run(&cfg)?;
                rows.push(SweepRow::from_run(variant, &cfg, load, &r));
            }
        }
    }
    Ok(rows)
}

/// The sweep as CSV.
pub fn rows_to_csv(rows: &[SweepRow]) -> String {
    let mut s = String::from(
        "variant,workers,queues,load,cpu_share,cpu_cores,vacation_mean_us,vacation_p99_us,t_s_mean_us,\
         rho_estimate,busy_try_ratio,latency_p50_us,latency_p99_us,dropped,arrived\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{:.2},{:.5},{:.5},{:.3},{:.3},{:.3},{:.4},{:.5},{:.3},{:.3},{},{}",
            r.variant.name,
            r.workers,
            r.queues,
            r.load,
            r.cpu_share,
            r.cpu_cores,
            r.vacation_mean_us,
            r.vacation_p99_us,
            r.short_timeout_mean_us,
            r.rho_estimate,
            r.busy_try_ratio,
            r.latency_p50_us,
            r.latency_p99_us,
            r.dropped,
            r.arrived
        );
    }
    s
}

/// What [`run_metronome_sweep`] produced.
#[derive(Debug, Clone)]
pub struct SweepSummary {
    /// Every sweep point.
    pub rows: Vec<SweepRow>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

fn series_by_m(
    rows: &[SweepRow],
    variant: Variant,
    workers: &[usize],
    y: impl Fn(&SweepRow) -> f64,
    suffix: &str,
) -> Vec<Series> {
    workers
        .iter()
        .map(|&m| {
            let pts = rows.iter().filter(|r| r.variant == variant && r.workers == m).map(|r| (r.load, y(r))).collect();
            Series::new(format!("M = {m}{suffix}"), pts)
        })
        .collect()
}

fn write(out: &Path, name: &str, body: &str, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let p = out.join(name);
    std::fs::write(&p, body).map_err(|e| anyhow::anyhow!("writing {}: {e}", p.display()))?;
    files.push(p);
    Ok(())
}

/// Runs the default sweep and a load ramp and writes CSV and SVG figures into `out`.
pub fn run_metronome_sweep(out: &Path) -> anyhow::Result<SweepSummary> {
    run_metronome_sweep_with(out, &SweepOptions::default())
}

/// [`run_metronome_sweep`] with explicit options.
pub fn run_metronome_sweep_with(out: &Path, opts: &SweepOptions) -> anyhow::Result<SweepSummary> {
    std::fs::create_dir_all(out).map_err(|e| anyhow::anyhow!("creating {}: {e}", out.display()))?;
    let rows = sweep(opts)?;
    let mut files = Vec::new();
    write(out, "metronome_sweep.csv", &rows_to_csv(&rows), &mut files)?;

    let pb = Variant::PRIMARY_BACKUP;
    let fb = Variant::PRIMARY_BACKUP_FEEDBACK;
    let eq = Variant::EQUAL_TIMEOUTS;
    let v_bar_us = opts.base.controller.target_vacation_ns as f64 / 1_000.0;
    let n = opts.base.queues.max(1) as f64;
    let load_label = "offered load per queue ρ = λ/μ";

    let cpu = LinePlot {
        title: format!("CPU vs load, primary/backup (N = {}, V̄ = {v_bar_us} µs)", opts.base.queues),
        x_label: load_label.into(),
        y_label: "CPU (cores: busy + polling time / run time, summed)".into(),
        series: series_by_m(&rows, pb, &opts.workers, |r| r.cpu_cores, ""),
        y_from_zero: true,
        markers: true,
    };
    write(out, "metronome_cpu_vs_load.svg", &cpu.to_svg(), &mut files)?;

    let mut vac_series = series_by_m(&rows, pb, &opts.workers, |r| r.vacation_mean_us, "");
    if opts.variants.contains(&fb) {
        let s = series_by_m(&rows, fb, &opts.workers, |r| r.vacation_mean_us, " + feedback");
        vac_series.extend(s.into_iter().map(Series::dashed));
    }
    vac_series.push(Series::new("target V̄", vec![(0.0, v_bar_us), (1.0, v_bar_us)]).dashed());
    let vac = LinePlot {
        title: "Mean measured vacation vs load (solid: paper's rule, dashed: + feedback)".into(),
        x_label: load_label.into(),
        y_label: "mean vacation (µs)".into(),
        series: vac_series,
        y_from_zero: true,
        markers: true,
    };
    write(out, "metronome_vacation_vs_load.svg", &vac.to_svg(), &mut files)?;

    let mut ts_series = series_by_m(&rows, pb, &opts.workers, |r| r.short_timeout_mean_us, "");
    for &m in &opts.workers {
        let pts = (0..=100)
            .map(|i| {
                let rho = f64::from(i) / 100.0;
                (rho, v_bar_us * short_timeout_factor(rho, m as f64 / n))
            })
            .collect();
        ts_series.push(Series::new(format!("rule at ρ, M = {m}"), pts).dashed());
    }
    let ts = LinePlot {
        title: "Mean T_S vs load (solid: simulated, dashed: rule at the true ρ)".into(),
        x_label: load_label.into(),
        y_label: "T_S (µs)".into(),
        series: ts_series,
        y_from_zero: true,
        markers: false,
    };
    write(out, "metronome_ts_vs_load.svg", &ts.to_svg(), &mut files)?;

    if opts.variants.contains(&eq) && opts.variants.contains(&pb) {
        let ms: Vec<usize> = opts.workers.iter().copied().filter(|&m| m >= 2).collect();
        let mut s = series_by_m(&rows, pb, &ms, |r| r.cpu_cores, " primary/backup");
        s.extend(series_by_m(&rows, eq, &ms, |r| r.cpu_cores, " equal timeouts").into_iter().map(Series::dashed));
        let p = LinePlot {
            title: "Equal timeouts vs primary/backup (Fig. 6)".into(),
            x_label: load_label.into(),
            y_label: "CPU (cores)".into(),
            series: s,
            y_from_zero: true,
            markers: true,
        };
        write(out, "metronome_equal_vs_primary_backup.svg", &p.to_svg(), &mut files)?;
    }

    let picks: Vec<f64> = [0.1, 0.5, 0.9]
        .iter()
        .filter_map(|&want| opts.loads.iter().copied().min_by(|a, b| (a - want).abs().total_cmp(&(b - want).abs())))
        .collect();
    let bt = LinePlot {
        title: "Busy tries vs number of workers (Fig. 7)".into(),
        x_label: "workers M".into(),
        y_label: "busy tries / tries (%)".into(),
        series: picks
            .iter()
            .map(|&l| {
                let pts = rows
                    .iter()
                    .filter(|r| r.variant == pb && (r.load - l).abs() < 1e-9)
                    .map(|r| (r.workers as f64, 100.0 * r.busy_try_ratio))
                    .collect();
                Series::new(format!("load {l:.2}"), pts)
            })
            .collect(),
        y_from_zero: true,
        markers: true,
    };
    write(out, "metronome_busy_tries_vs_m.svg", &bt.to_svg(), &mut files)?;

    let lat = LinePlot {
        title: "Packet latency p99 vs load (primary/backup)".into(),
        x_label: load_label.into(),
        y_label: "p99 latency (µs)".into(),
        series: series_by_m(&rows, pb, &opts.workers, |r| r.latency_p99_us, ""),
        y_from_zero: true,
        markers: true,
    };
    write(out, "metronome_latency_p99_vs_load.svg", &lat.to_svg(), &mut files)?;

    // The ramp of Fig. 9: offered load up to 0.95 and back, M = 3.
    let mut ramp = opts.base.clone();
    ramp.workers = 3;
    ramp.load = LoadProfile::Triangle { low: 0.02, peak: 0.95 };
    ramp.duration_ns = 2_000_000_000;
    ramp.trace_interval_ns = Some(5_000_000);
    ramp.controller.loss_policy = pb.policy;
    let r = run(&ramp)?;
    let mut csv = String::from("t_ms,offered_load,rho_estimate,t_s_us\n");
    for p in &r.trace {
        let _ = writeln!(
            csv,
            "{:.3},{:.4},{:.4},{:.3}",
            p.t_ns as f64 / 1e6,
            p.offered,
            p.rho,
            p.short_timeout_ns as f64 / 1e3
        );
    }
    write(out, "metronome_ramp.csv", &csv, &mut files)?;
    let ms = |p: &TracePoint| p.t_ns as f64 / 1e6;
    let rho_plot = LinePlot {
        title: "Load ramp, M = 3: the estimate ρ follows the offered load (Fig. 9)".into(),
        x_label: "time (ms)".into(),
        y_label: "load".into(),
        series: vec![
            Series::new("offered", r.trace.iter().map(|p| (ms(p), p.offered)).collect()),
            Series::new("estimate ρ", r.trace.iter().map(|p| (ms(p), p.rho)).collect()),
        ],
        y_from_zero: true,
        markers: false,
    };
    write(out, "metronome_ramp_rho.svg", &rho_plot.to_svg(), &mut files)?;
    let ts_plot = LinePlot {
        title: "Load ramp, M = 3: T_S over time".into(),
        x_label: "time (ms)".into(),
        y_label: "T_S (µs)".into(),
        series: vec![Series::new("T_S", r.trace.iter().map(|p| (ms(p), p.short_timeout_ns as f64 / 1e3)).collect())],
        y_from_zero: true,
        markers: false,
    };
    write(out, "metronome_ramp_ts.svg", &ts_plot.to_svg(), &mut files)?;

    Ok(SweepSummary { rows, files })
}
