//! Acceptance criteria of "Metronome on bare metal" (the seed paper's results to reproduce),
//! checked on the simulator running the core controller. M = 3, N = 1, V̄ = 15 µs, Poisson
//! arrivals, loads 0.05–0.95, fixed seeds.
//!
//! Finding (see `spec_rule_alone_overshoots_v_bar_because_backups_sleep_t_l`): with the
//! paper's rule alone the mean vacation overshoots V̄ by up to ~2.3× at low and middle loads,
//! because the rule's model assumes another worker is primary with probability `1 − ρ` while
//! backups sleeping `T_L = 500 µs ≫ T_S` are primary far less often. The vacation criterion is
//! therefore checked on the rule plus Cadence's vacation feedback
//! (`MetronomeConfig::vacation_feedback_gain`, "beyond" the paper); the other criteria hold
//! for the paper's rule as it is.

use std::sync::OnceLock;

use cadence_sim::metronome::{RunResult, SimConfig, run};
use cadence_sim::sweep::Variant;

const V_BAR_NS: f64 = 15_000.0;

fn loads() -> Vec<f64> {
    (1..=19).map(|i| f64::from(i) * 0.05).collect()
}

/// 0.3 s of virtual time per point: ≥ 1000 busy periods even at load 0.95.
fn base() -> SimConfig {
    SimConfig { duration_ns: 300_000_000, seed: 7, ..SimConfig::default() }
}

fn sweep(variant: Variant, workers: usize, loads: &[f64]) -> Vec<(f64, RunResult)> {
    loads.iter().map(|&l| (l, run(&variant.config(&base(), workers, l)).expect("run"))).collect()
}

fn m3(variant: Variant) -> &'static [(f64, RunResult)] {
    static PB: OnceLock<Vec<(f64, RunResult)>> = OnceLock::new();
    static FB: OnceLock<Vec<(f64, RunResult)>> = OnceLock::new();
    static EQ: OnceLock<Vec<(f64, RunResult)>> = OnceLock::new();
    let cell = if variant == Variant::PRIMARY_BACKUP {
        &PB
    } else if variant == Variant::PRIMARY_BACKUP_FEEDBACK {
        &FB
    } else {
        &EQ
    };
    cell.get_or_init(|| sweep(variant, 3, &loads()))
}

#[test]
fn mean_vacation_stays_within_20_percent_of_v_bar_at_every_load() {
    for (l, r) in m3(Variant::PRIMARY_BACKUP_FEEDBACK) {
        let v = r.vacation_mean_ns();
        eprintln!("load {l:.2}: mean vacation {:.2} µs, T_S {:.2} µs", v / 1e3, r.mean_short_timeout_ns() / 1e3);
        assert!((v - V_BAR_NS).abs() <= 0.2 * V_BAR_NS, "load {l:.2}: mean vacation {v:.0} ns");
    }
}

#[test]
fn spec_rule_alone_overshoots_v_bar_because_backups_sleep_t_l() {
    let rows = m3(Variant::PRIMARY_BACKUP);
    for (l, r) in rows {
        eprintln!(
            "paper's rule, load {l:.2}: mean vacation {:.2} µs, T_S {:.2} µs, busy tries {:.1} %",
            r.vacation_mean_ns() / 1e3,
            r.mean_short_timeout_ns() / 1e3,
            100.0 * r.busy_try_ratio()
        );
    }
    let at = |want: f64| &rows.iter().find(|(l, _)| (l - want).abs() < 1e-9).expect("load in grid").1;
    // The controller computes the rule faithfully: its mean T_S is the rule at the offered load
    // (within the EWMA's noise), so the overshoot is not an estimator error...
    let t_s = at(0.5).mean_short_timeout_ns();
    let rule = V_BAR_NS * cadence_core::metronome::short_timeout_factor(0.5, 3.0);
    assert!((t_s - rule).abs() < 0.05 * rule, "T_S {t_s:.0} vs rule {rule:.0}");
    // ...yet the vacation overshoots V̄ at low and middle load.
    assert!(at(0.1).vacation_mean_ns() > 1.5 * V_BAR_NS);
    assert!(at(0.5).vacation_mean_ns() > 1.3 * V_BAR_NS);
    // Cause: backups are out for T_L. With T_L cut to 60 µs the same rule meets V̄ ± 20 %.
    for l in [0.1, 0.5] {
        let mut cfg = Variant::PRIMARY_BACKUP.config(&base(), 3, l);
        cfg.controller.long_timeout_ns = 60_000;
        let v = run(&cfg).expect("run").vacation_mean_ns();
        assert!((v - V_BAR_NS).abs() <= 0.2 * V_BAR_NS, "T_L = 60 µs, load {l}: {v:.0} ns");
    }
}

#[test]
fn cpu_share_rises_with_load() {
    for variant in [Variant::PRIMARY_BACKUP, Variant::PRIMARY_BACKUP_FEEDBACK] {
        let rows = m3(variant);
        for w in rows.windows(2) {
            let ((l0, a), (l1, b)) = (&w[0], &w[1]);
            assert!(
                b.cpu_share() > a.cpu_share(),
                "{}: CPU {:.4} at {l0:.2} but {:.4} at {l1:.2}",
                variant.name,
                a.cpu_share(),
                b.cpu_share()
            );
        }
        // Proportional, not pinned at 100 %: low load costs little.
        assert!(rows[0].1.cpu_share() < 0.1, "{}: {}", variant.name, rows[0].1.cpu_share());
    }
}

#[test]
fn equal_timeouts_spend_more_cpu_than_primary_backup_at_high_load() {
    let pb = m3(Variant::PRIMARY_BACKUP);
    let eq = m3(Variant::EQUAL_TIMEOUTS);
    for ((l, p), (_, e)) in pb.iter().zip(eq).filter(|((l, _), _)| *l >= 0.7 - 1e-9) {
        eprintln!("load {l:.2}: CPU primary/backup {:.4} cores, equal timeouts {:.4}", p.cpu_cores(), e.cpu_cores());
        assert!(e.cpu_cores() > p.cpu_cores(), "load {l:.2}");
    }
}

#[test]
fn busy_try_ratio_grows_with_the_number_of_workers() {
    for l in [0.2, 0.5, 0.9] {
        let ratios: Vec<f64> = (1..=4)
            .map(|m| {
                let r = if m == 3 {
                    m3(Variant::PRIMARY_BACKUP).iter().find(|(x, _)| (x - l).abs() < 1e-9).expect("in grid").1.clone()
                } else {
                    run(&Variant::PRIMARY_BACKUP.config(&base(), m, l)).expect("run")
                };
                r.busy_try_ratio()
            })
            .collect();
        eprintln!("load {l}: busy-try ratio for M = 1..4: {ratios:.4?}");
        assert_eq!(ratios[0], 0.0, "one worker never loses");
        assert!(ratios.windows(2).all(|w| w[1] > w[0]), "load {l}: {ratios:?}");
    }
}
