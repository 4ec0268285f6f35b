//! The summary printed at the end (Markdown): zero-loss rates, ratios Cadence / testpmd
//! per I/O kind and Cadence / ceiling (medians of quiet rounds), latency, CPU against
//! load, vacation and lateness, and the targets as met / missed with the figure.

use std::fmt::Write as _;

use super::dut::{Dut, Io, Placement, Sched, VBAR_DEFAULT_US};
use super::frames::SizeMix;
use super::report::{Results, Spread, f, median, metronome_duts};

/// A rate with its flag: `612k` or `≥612k` (rig-limited in some round).
fn rate_cell(s: &Spread) -> String {
    format!("{}{:.0}k", if s.rig_limited > 0 { "≥" } else { "" }, s.median / 1e3)
}

fn ratio_cell(num: Option<&Spread>, den: Option<&Spread>) -> String {
    match (num, den) {
        (Some(n), Some(d)) if d.median > 0.0 => {
            let flag = match (n.rig_limited > 0, d.rig_limited > 0) {
                (true, false) => "≥",
                (false, true) => "≤",
                (true, true) => "~",
                _ => "",
            };
            format!("{flag}{:.2}×", n.median / d.median)
        }
        _ => "–".into(),
    }
}

fn met_cpu(res: &Results, d: &Dut, pct: u32) -> Option<f64> {
    res.metronome.iter().find(|m| m.dut == *d && m.load_pct == pct).map(|m| m.r.usage.workers_total())
}

/// The summary tables, as printed at the end (Markdown).
pub fn summary(res: &Results) -> String {
    let mut s = String::new();
    let mixes = [SizeMix::Fixed(60), SizeMix::Imix];
    let _ = writeln!(s, "\n## Zero-loss rate (frames/s; median [min..max] of counted rounds)\n");
    let noisy: Vec<String> = res.rounds.iter().filter(|r| r.2).map(|r| format!("{} ({:.2} CPUs)", r.0, r.1)).collect();
    let _ = writeln!(
        s,
        "rounds: {}; noisy (others > 0.2 CPUs, excluded): {}; generator: {}\n",
        res.rounds.len(),
        if noisy.is_empty() { "none".to_string() } else { noisy.join(", ") },
        res.tx_path
    );
    let _ = writeln!(s, "| device | 64 B | IMIX | 64 B Mb/s | worker CPU at the 64 B rate |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    for dut in res.duts_in_order() {
        let cell = |mix| {
            res.spread(&dut, mix).map_or("–".to_string(), |(sp, quiet)| {
                format!(
                    "{} [{:.0}k..{:.0}k]{}",
                    rate_cell(&sp),
                    sp.min / 1e3,
                    sp.max / 1e3,
                    if quiet { "" } else { " (noisy rounds)" }
                )
            })
        };
        let mbps = res
            .zero_loss_median(&dut, SizeMix::Fixed(60))
            .map_or("–".into(), |r| f(SizeMix::Fixed(60).wire_mbps(r), 0));
        // The worker's CPU in the passing trials closest to the zero-loss rate.
        let cpu: Vec<f64> = res
            .trials
            .iter()
            .filter(|t| t.phase == "search" && t.dut == dut.name() && t.mix == SizeMix::Fixed(60) && t.r.zero_loss())
            .filter(|t| res.zero_loss_median(&dut, SizeMix::Fixed(60)).is_some_and(|z| t.r.asked_pps >= 0.95 * z))
            .map(|t| t.r.usage.workers_total())
            .collect();
        let cpu = if dut == Dut::Ceiling || cpu.is_empty() { "–".into() } else { f(median(&cpu), 2) };
        let _ = writeln!(s, "| {} | {} | {} | {mbps} | {cpu} |", dut.name(), cell(mixes[0]), cell(mixes[1]));
    }
    let _ =
        writeln!(s, "\n`≥`: the rig (generator or sink) was the limit in some round: the dataplane did at least that.");

    let _ = writeln!(s, "\n## Ratios (medians of counted rounds)\n");
    let _ = writeln!(s, "| Cadence device | / testpmd same I/O, 64 B | IMIX | / ceiling, 64 B | IMIX |");
    let _ = writeln!(s, "|---|---|---|---|---|");
    let sp = |d: &Dut, mix| res.spread(d, mix).map(|x| x.0);
    for io in [Io::AfXdp, Io::AfPacket] {
        let tp = Dut::Testpmd { io, workers: 1 };
        for chain in [false, true] {
            for sched in [Sched::Poll, Sched::Metronome] {
                let d = Dut::cadence(io, chain, sched);
                if sp(&d, mixes[0]).is_none() {
                    continue;
                }
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} |",
                    d.name(),
                    ratio_cell(sp(&d, mixes[0]).as_ref(), sp(&tp, mixes[0]).as_ref()),
                    ratio_cell(sp(&d, mixes[1]).as_ref(), sp(&tp, mixes[1]).as_ref()),
                    ratio_cell(sp(&d, mixes[0]).as_ref(), sp(&Dut::Ceiling, mixes[0]).as_ref()),
                    ratio_cell(sp(&d, mixes[1]).as_ref(), sp(&Dut::Ceiling, mixes[1]).as_ref()),
                );
            }
        }
        if let Some(t) = sp(&tp, mixes[0]) {
            let _ = writeln!(
                s,
                "| ({}) | – | – | {} | {} |",
                tp.name(),
                ratio_cell(Some(&t), sp(&Dut::Ceiling, mixes[0]).as_ref()),
                ratio_cell(sp(&tp, mixes[1]).as_ref(), sp(&Dut::Ceiling, mixes[1]).as_ref())
            );
        }
    }
    let _ = writeln!(s, "\n`≥`/`≤`: numerator/denominator was rig-limited in some round.");

    if !res.latency.is_empty() {
        let _ = writeln!(s, "\n## Latency (µs, kernel receive timestamp at the sink − send TSC)\n");
        let _ = writeln!(s, "| device | mix | load | rate | p50 | p99 | p99.9 | lost |");
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
        for l in &res.latency {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0}k | {:.1} | {:.1} | {:.1} | {} |",
                l.dut.name(),
                l.mix.label(),
                if l.frac.is_finite() { format!("{:.0} %", l.frac * 100.0) } else { "floor".into() },
                l.rate / 1e3,
                l.r.latency.p50_ns as f64 / 1e3,
                l.r.latency.p99_ns as f64 / 1e3,
                l.r.latency.p999_ns as f64 / 1e3,
                l.r.lost
            );
        }
    }

    if !res.metronome.is_empty() {
        metronome_summary(res, &mut s);
    }
    if !res.idle_first.is_empty() {
        let _ = writeln!(
            s,
            "\n## The first frame after {:.0} s of idle (1 worker, AF_XDP, L2, {:.0} frames, one per gap)\n",
            super::report::IDLE_GAP_S,
            super::report::IDLE_FRAMES
        );
        let _ = writeln!(s, "| device | frames received | p50 µs | p99 µs | max µs | lost |");
        let _ = writeln!(s, "|---|---|---|---|---|---|");
        for l in &res.idle_first {
            let _ = writeln!(
                s,
                "| {} | {} | {:.1} | {:.1} | {:.1} | {} |",
                l.dut.name(),
                l.r.received,
                l.r.latency.p50_ns as f64 / 1e3,
                l.r.latency.p99_ns as f64 / 1e3,
                l.r.latency.max_ns as f64 / 1e3,
                l.r.lost
            );
        }
    }
    targets(res, &mut s);
    if !res.failures.is_empty() {
        let _ = writeln!(s, "\n## Failures\n");
        for f in &res.failures {
            let _ = writeln!(s, "- {f}");
        }
    }
    let _ = writeln!(s, "\nelapsed: {:.0} s", res.elapsed_s);
    s
}

fn metronome_summary(res: &Results, s: &mut String) {
    let configs = metronome_duts(res);
    let loads: Vec<u32> = {
        let mut l: Vec<u32> = res.metronome.iter().map(|m| m.load_pct).collect();
        l.sort_unstable();
        l.dedup();
        l
    };
    let _ = writeln!(
        s,
        "\n## Worker CPU vs load (CPUs; load = % of {:.0} frames/s, 64 B, AF_XDP, L2)\n",
        res.metronome_ref_pps
    );
    let _ = write!(s, "| device |");
    for l in &loads {
        let _ = write!(s, " {l} % |");
    }
    let _ = writeln!(s, "\n|---|{}", "---|".repeat(loads.len()));
    for d in &configs {
        let _ = write!(s, "| {} |", d.name());
        for &l in &loads {
            let _ = write!(s, " {} |", met_cpu(res, d, l).map_or("–".into(), |c| f(c, 3)));
        }
        let _ = writeln!(s);
    }
    let _ = writeln!(
        s,
        "\nTwo workers run on CPUs 1 and 0: the second shares CPU 0 with the generator. Three workers are \
         unpinned (two vCPUs)."
    );
    let _ = writeln!(s, "\n## Vacation and wake-up lateness (Metronome, 1 worker)\n");
    let _ =
        writeln!(s, "| V̄ | load | mean vacation (trial) | vacation p99 (run) | lateness p50 | lateness p99 | lost |");
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for m in res.metronome.iter().filter(|m| matches!(m.dut, Dut::Cadence { sched: Sched::Metronome, workers: 1, .. }))
    {
        let Dut::Cadence { vbar_us, .. } = m.dut else { continue };
        let c = m.summary.as_ref();
        let us = |k: &str| c.and_then(|c| c.0.get(k)).map_or("–".into(), |v| f(*v as f64 / 1e3, 1));
        let _ = writeln!(
            s,
            "| {vbar_us} µs | {} % | {} | {} | {} | {} | {} |",
            m.load_pct,
            m.vac_window_ns.map_or("–".into(), |v| format!("{:.1} µs", v / 1e3)),
            us("lane0_vac_p99_ns"),
            us("core0_late_p50_ns"),
            us("core0_late_p99_ns"),
            m.r.lost
        );
    }
}

fn verdict(met: bool) -> &'static str {
    if met { "**met**" } else { "**missed**" }
}

fn targets(res: &Results, s: &mut String) {
    let _ = writeln!(s, "\n## Targets\n");
    let sp = |d: &Dut| res.spread(d, SizeMix::Fixed(60)).map(|x| x.0);
    for io in [Io::AfXdp, Io::AfPacket] {
        for sched in [Sched::Poll, Sched::Metronome] {
            let c = Dut::cadence(io, false, sched);
            let Some(cs) = sp(&c) else { continue };
            if let Some(t) = sp(&Dut::Testpmd { io, workers: 1 }) {
                let r = cs.median / t.median.max(1.0);
                let _ = writeln!(
                    s,
                    "- {}: zero-loss 64 B ≥ 1.0× testpmd/{}: {:.2}× ({:.0} vs {:.0} pps) — {}",
                    c.name(),
                    io.name(),
                    r,
                    cs.median,
                    t.median,
                    verdict(r >= 1.0)
                );
            }
            if let Some(t) = sp(&Dut::Ceiling) {
                let r = cs.median / t.median.max(1.0);
                let _ = writeln!(
                    s,
                    "- {}: ≥ 50 % of the rig's ceiling: {:.0} % ({:.0} vs {:.0} pps{}) — {}",
                    c.name(),
                    r * 100.0,
                    cs.median,
                    t.median,
                    if t.rig_limited > 0 { ", ceiling generator-limited" } else { "" },
                    verdict(r >= 0.5)
                );
            }
        }
    }
    let w3: Vec<_> = res
        .metronome
        .iter()
        .filter(|m| {
            matches!(m.dut, Dut::Cadence { sched: Sched::Metronome, workers: 3, placement: Placement::Unpinned, .. })
                && m.load_pct == 0
        })
        .collect();
    for m in &w3 {
        let share = m.r.usage.workers_total() / 3.0;
        let _ = writeln!(
            s,
            "- {}: zero load, 3 Metronome workers (unpinned on 2 vCPUs) ≤ 5 % of 3 cores: {:.2} % ({:.4} CPUs) — {}",
            m.dut.name(),
            share * 100.0,
            m.r.usage.workers_total(),
            verdict(share <= 0.05)
        );
    }
    if w3.is_empty() {
        let why = res.failures.iter().find(|f| f.contains("/w3/")).map_or("not run", String::as_str);
        let _ = writeln!(s, "- zero load, 3 Metronome workers ≤ 5 % of 3 cores: **not measurable here** ({why})");
        // What one and two idle workers cost, scaled to three (an estimate, not a measurement).
        for w in [1usize, 2] {
            let d = Dut::Cadence {
                io: Io::AfXdp,
                chain: false,
                sched: Sched::Metronome,
                workers: w,
                placement: Placement::Pinned,
                vbar_us: VBAR_DEFAULT_US,
                line_mbps: 0,
            };
            if let Some(c) = met_cpu(res, &d, 0) {
                let _ = writeln!(
                    s,
                    "  estimate from {w} idle worker(s): {:.4} CPUs each → 3 workers ≈ {:.2} % of 3 cores (not measured)",
                    c / w as f64,
                    c / w as f64 * 100.0
                );
            }
        }
    }
    if let Some(t) = res.metronome.iter().find(|m| matches!(m.dut, Dut::Testpmd { workers: 1, .. }) && m.load_pct == 0)
    {
        let _ = writeln!(s, "  (testpmd, 1 worker, zero load: {:.1} % of its core)", t.r.usage.workers_total() * 100.0);
    }
    p99_at_low_load(res, s);
    let poll1 = Dut::cadence(Io::AfXdp, false, Sched::Poll);
    // Every one-worker Metronome configuration of the study, in the order it ran.
    let mut met_w1: Vec<&Dut> = Vec::new();
    for m in &res.metronome {
        if matches!(m.dut, Dut::Cadence { sched: Sched::Metronome, workers: 1, .. }) && !met_w1.contains(&&m.dut) {
            met_w1.push(&m.dut);
        }
    }
    for d in met_w1 {
        let Dut::Cadence { vbar_us: vbar, .. } = *d else { continue };
        if let (Some(m), Some(p)) = (met_cpu(res, d, 50), met_cpu(res, &poll1, 50)) {
            let r = m / p.max(1e-9);
            let _ = writeln!(
                s,
                "- {}: 50 % load, Metronome CPU ≤ 0.5× poll: {r:.2}× ({m:.3} vs {p:.3} CPUs) — {}",
                d.name(),
                verdict(r <= 0.5)
            );
        }
        if let (Some(idle), Some(full)) = (met_cpu(res, d, 0), met_cpu(res, d, 100)) {
            let _ = writeln!(
                s,
                "- {}: worker CPU {idle:.3} at 0 % load, {full:.3} at 100 % (idle/full {:.2})",
                d.name(),
                idle / full.max(1e-9)
            );
        }
        let v: Vec<(u32, f64)> = res
            .metronome
            .iter()
            .filter(|m| m.dut == *d && m.load_pct > 0)
            .filter_map(|m| m.vac_window_ns.map(|x| (m.load_pct, x / 1e3)))
            .collect();
        if v.is_empty() {
            continue;
        }
        let vb = f64::from(vbar);
        let worst = v.iter().map(|(_, x)| (x - vb).abs() / vb).fold(0.0, f64::max);
        let (lo, hi) = v.iter().fold((f64::MAX, 0.0f64), |(a, b), (_, x)| (a.min(*x), b.max(*x)));
        let _ = writeln!(
            s,
            "- {}: mean vacation within ±10 % of V̄ = {vbar} µs across load (10–100 %): {lo:.1}–{hi:.1} µs, worst {:+.0} % — {}",
            d.name(),
            worst * 100.0 * if hi - vb >= vb - lo { 1.0 } else { -1.0 },
            verdict(worst <= 0.10)
        );
    }
}

/// The load of issue 31's latency target: 10 % of the device's own zero-loss rate.
const LOW_LOAD: f64 = 0.1;

/// Issue 31's latency target: per Metronome device of the latency phase, its p99 at 10 % of
/// its zero-loss rate (64 B) against the polling device's with the same I/O and chain, ≤ 2×.
fn p99_at_low_load(res: &Results, s: &mut String) {
    let p99 = |d: &Dut| {
        res.latency
            .iter()
            .find(|l| l.dut == *d && l.mix == SizeMix::Fixed(60) && (l.frac - LOW_LOAD).abs() < 1e-9)
            .map(|l| l.r.latency.p99_ns as f64 / 1e3)
    };
    for l in &res.latency {
        let Dut::Cadence { io, chain, sched: Sched::Metronome, .. } = l.dut else { continue };
        if l.mix != SizeMix::Fixed(60) || (l.frac - LOW_LOAD).abs() >= 1e-9 {
            continue;
        }
        let poll = Dut::cadence(io, chain, Sched::Poll);
        let (Some(m), Some(p)) = (p99(&l.dut), p99(&poll)) else { continue };
        let r = m / p.max(1e-3);
        let _ = writeln!(
            s,
            "- {}: p99 at 10 % load ≤ 2× {}'s: {r:.2}× ({m:.0} vs {p:.0} µs) — {}",
            l.dut.name(),
            poll.name(),
            verdict(r <= 2.0)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_carry_the_rig_limit_flags() {
        let sp = |m: f64, rig: usize| Spread { min: m, median: m, max: m, n: 1, rig_limited: rig };
        assert_eq!(ratio_cell(Some(&sp(600.0, 0)), Some(&sp(300.0, 0))), "2.00×");
        assert_eq!(ratio_cell(Some(&sp(600.0, 1)), Some(&sp(300.0, 0))), "≥2.00×");
        assert_eq!(ratio_cell(Some(&sp(150.0, 0)), Some(&sp(300.0, 2))), "≤0.50×");
        assert_eq!(ratio_cell(None, Some(&sp(300.0, 0))), "–");
    }

    #[test]
    fn the_low_load_p99_is_held_to_twice_the_pollers() {
        use super::super::generator::TrialResult;
        use super::super::report::LatRec;
        let rec = |sched, frac: f64, p99_us: u64| LatRec {
            dut: Dut::cadence(Io::AfXdp, false, sched),
            mix: SizeMix::Fixed(60),
            frac,
            rate: 1000.0,
            r: TrialResult {
                latency: super::super::tally::Latency { p99_ns: p99_us * 1000, ..Default::default() },
                ..Default::default()
            },
        };
        let run = |latency: Vec<LatRec>| {
            let mut s = String::new();
            p99_at_low_load(&Results { latency, ..Default::default() }, &mut s);
            s
        };
        // Metronome's p99 at 10 % against the poller's at 10 %, not at another load.
        let met = run(vec![rec(Sched::Poll, 0.1, 100), rec(Sched::Poll, 0.5, 10), rec(Sched::Metronome, 0.1, 150)]);
        assert!(met.contains("1.50× (150 vs 100 µs) — **met**"), "{met}");
        let missed = run(vec![rec(Sched::Poll, 0.1, 100), rec(Sched::Metronome, 0.1, 201)]);
        assert!(missed.contains("2.01×") && missed.contains("missed"), "{missed}");
        // No poller at 10 %: no verdict rather than a made-up one.
        assert_eq!(run(vec![rec(Sched::Metronome, 0.1, 150), rec(Sched::Poll, 0.9, 100)]), "");
    }

    #[test]
    fn rates_say_when_the_rig_was_the_limit() {
        let sp = Spread { min: 1.0, median: 612_345.0, max: 2.0, n: 3, rig_limited: 1 };
        assert_eq!(rate_cell(&sp), "≥612k");
        assert_eq!(rate_cell(&Spread { rig_limited: 0, ..sp }), "612k");
    }
}
