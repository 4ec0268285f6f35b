use super::*;
use crate::hist::{histogram_bucket, histogram_bucket_bounds};
use alloc::vec::Vec;
use proptest::prelude::*;

const GHZ: u64 = 1_000_000_000;

fn rate() -> TickRate {
    TickRate::try_new(GHZ).expect("nonzero")
}

fn ctl(workers: usize, queues: usize, cfg: &MetronomeConfig) -> Metronome<Vec<LaneShare>> {
    Metronome::with_lanes(cfg, rate(), workers, queues).expect("valid config")
}

fn rel(a: f64, b: f64) -> f64 {
    ((a - b) / b).abs()
}

#[test]
fn factor_limits() {
    for m in [0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 7.5, 100.0, 1e6] {
        assert_eq!(short_timeout_factor(0.0, m), m, "rho = 0 gives m for m = {m}");
        assert_eq!(short_timeout_factor(1.0, m), 1.0, "rho = 1 gives 1 for m = {m}");
        let near = short_timeout_factor(1.0 - 1e-9, m);
        assert!(rel(near, 1.0) < 1e-3 * m.max(1.0), "rho -> 1 tends to 1: m = {m}, f = {near}");
        let tiny = short_timeout_factor(1e-12, m);
        // m·(1−ρ)/(1−ρ^m) − m ≈ m·ρ^m: slow for m < 1, where ρ^m ≫ ρ.
        let tol = 2.0 * libm::pow(1e-12, m.min(1.0)) + 1e-12;
        assert!(rel(tiny, m) < tol, "rho -> 0 tends to m: m = {m}, f = {tiny}");
    }
    for rho in [0.0, 0.1, 0.5, 0.9, 0.999_999, 1.0] {
        assert!(rel(short_timeout_factor(rho, 1.0), 1.0) < 1e-12, "m = 1 is constant");
    }
}

#[test]
fn factor_known_values() {
    // m = 3, rho = 0.5: 3 / (1 + 0.5 + 0.25).
    assert!(rel(short_timeout_factor(0.5, 3.0), 3.0 / 1.75) < 1e-15);
    // m = 1/2: 0.5·(1−ρ)/(1−√ρ) = 0.5·(1+√ρ).
    assert!(rel(short_timeout_factor(0.25, 0.5), 0.75) < 1e-12);
    // m = 2.5 at rho = 0.5 against the direct form (no cancellation there).
    let direct = 2.5 * 0.5 / (1.0 - libm::pow(0.5, 2.5));
    assert!(rel(short_timeout_factor(0.5, 2.5), direct) < 1e-12);
}

#[test]
fn factor_is_finite_for_hostile_inputs() {
    let xs = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, 0.0, 1.0, 2.0, f64::MIN_POSITIVE, f64::MAX];
    for &rho in &xs {
        for &m in &xs {
            let f = short_timeout_factor(rho, m);
            assert!(f.is_finite() && f > 0.0, "rho = {rho}, m = {m}: {f}");
        }
    }
}

#[test]
fn params_reject_bad_configs() {
    let c = MetronomeConfig::default();
    assert_eq!(Params::new(&c, rate(), 0, 1), Err(MetronomeConfigError::NoWorkers));
    assert_eq!(Params::new(&c, rate(), 1, 0), Err(MetronomeConfigError::NoLanes));
    let mut bad = c;
    bad.ewma_weight = 1.5;
    assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::EwmaWeight));
    bad = c;
    bad.ewma_weight = f64::NAN;
    assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::EwmaWeight));
    bad = c;
    bad.rho_epsilon = 0.0;
    assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::RhoEpsilon));
    bad = c;
    bad.ring_margin = 0.0;
    assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::RingMargin));
    bad = c;
    bad.vacation_feedback_gain = -0.1;
    assert_eq!(Params::new(&bad, rate(), 1, 1), Err(MetronomeConfigError::FeedbackGain));
}

#[test]
fn short_timeout_in_ticks_follows_the_rule() {
    let c = MetronomeConfig::default();
    let p = Params::new(&c, rate(), 3, 1).expect("valid");
    assert_eq!(p.workers_per_lane(), 3.0);
    assert_eq!(p.short_timeout(0.0), Duration(45_000));
    assert_eq!(p.short_timeout(1.0), Duration(15_000)); // clamped to 1 − ε: 15_000.03
    assert_eq!(p.short_timeout(f64::NAN), Duration(45_000));
    assert_eq!(p.short_timeout(0.5), Duration((45_000.0f64 / 1.75 + 0.5) as u64));
    assert_eq!(p.long_timeout(), Duration(500_000));
    assert_eq!(p.initial_short_timeout(), Duration(20_000));
    // Multi-queue: m = M/N real-valued, 5 workers on 2 queues.
    let p = Params::new(&c, rate(), 5, 2).expect("valid");
    assert_eq!(p.short_timeout(0.0), Duration(37_500));
    // On a 2.6 GHz TSC the same rule in ticks.
    let p = Params::new(&c, TickRate::try_new(2_600_000_000).expect("rate"), 1, 1).expect("valid");
    assert_eq!(p.short_timeout(0.3), Duration(39_000));
}

#[test]
fn clamps_and_ring_bound_are_honoured() {
    // Default ring: 0.5 · 4096 / 14.88 Mpps = 137.6 µs.
    let c = MetronomeConfig::default();
    let p = Params::new(&c, rate(), 16, 1).expect("valid");
    let bound = (0.5 * 4096.0 * 1e9 / 14.88e6 + 0.5) as u64;
    assert_eq!(p.max_short_timeout(), Duration(bound));
    assert_eq!(p.short_timeout(0.0), Duration(bound), "16·15 µs = 240 µs > ring bound");
    // Without the ring bound the max clamp applies.
    let mut c2 = c;
    c2.ring_descriptors = 0;
    c2.max_short_timeout_ns = 100_000;
    let p = Params::new(&c2, rate(), 16, 1).expect("valid");
    assert_eq!(p.short_timeout(0.0), Duration(100_000));
    // The min clamp.
    let mut c3 = c;
    c3.target_vacation_ns = 100;
    c3.min_short_timeout_ns = 2_000;
    let p = Params::new(&c3, rate(), 2, 1).expect("valid");
    assert_eq!(p.short_timeout(0.9), Duration(2_000));
    assert_eq!(p.min_short_timeout(), Duration(2_000));
    // A ring bound below the min clamp wins over it.
    let mut c4 = c;
    c4.ring_descriptors = 16; // 0.5·16/14.88 Mpps = 537.6 ns
    let p = Params::new(&c4, rate(), 2, 1).expect("valid");
    assert_eq!(p.short_timeout(0.5), Duration(538));
    assert_eq!(p.initial_short_timeout(), Duration(538));
}

#[test]
fn winner_measures_vacation_updates_rho_and_keeps_its_queue() {
    let c = MetronomeConfig::default();
    let m = ctl(3, 1, &c);
    let mut w = Scheduler::new(0, 1);
    // First round: no vacation yet, T_S stays at its initial value.
    let Attempt::Won(s) = w.attempt(&m, Instant(1_000)) else { unreachable!("free lock") };
    assert_eq!(s.vacation(), None);
    assert_eq!(w.finish(s, Instant(2_000), 3), Duration(20_000));
    assert_eq!(m.lanes()[0].rho(), 0.0);
    // Second round: V = 10 µs, B = 10 µs → ρ_sample = 0.5 → ρ = 0.25·0.5 = 0.125.
    let Attempt::Won(s) = w.attempt(&m, Instant(12_000)) else { unreachable!("free lock") };
    assert_eq!(s.vacation(), Some(Duration(10_000)));
    assert_eq!(s.lane(), 0);
    let t_s = w.finish(s, Instant(22_000), 7);
    let rho = m.lanes()[0].rho();
    assert!(rel(rho, 0.125) < 1e-12);
    assert_eq!(t_s, m.params().short_timeout(0.125));
    assert_eq!(m.lanes()[0].short_timeout(), t_s);
    assert_eq!(w.role(), Role::Primary);
    assert_eq!(w.lane(), 0);
    let st = *w.stats();
    assert_eq!((st.tries, st.wins, st.busy_tries, st.packets, st.busy_ticks), (2, 2, 0, 10, 11_000));
    let q = m.lanes()[0].snapshot();
    assert_eq!((q.wins, q.vacations, q.packets, q.busy_ticks), (2, 1, 10, 11_000));
    assert_eq!(q.vacation_mean(), Some(10_000.0));
    assert!(!m.lanes()[0].lock().is_locked());
}

#[test]
fn loser_becomes_backup_sleeps_long_and_picks_random_queues() {
    let c = MetronomeConfig::default();
    let m = ctl(8, 4, &c);
    let mut a = Scheduler::new(2, 1);
    let Attempt::Won(held) = a.attempt(&m, Instant(0)) else { unreachable!("free lock") };
    let mut b = Scheduler::new(2, 2);
    let mut seen = [0u32; 4];
    for i in 0..400 {
        b.lane = 2;
        match b.attempt(&m, Instant(i)) {
            Attempt::Lost { sleep } => assert_eq!(sleep, Duration(500_000)),
            Attempt::Won(_) => unreachable!("queue 2 is held"),
        }
        assert_eq!(b.role(), Role::Backup);
        seen[b.lane()] += 1;
    }
    assert!(seen.iter().all(|&n| n > 60), "uniform-ish random queue choice: {seen:?}");
    assert_eq!(b.stats().busy_tries, 400);
    assert_eq!(m.lanes()[2].snapshot().busy_try_ratio(), 400.0 / 401.0);
    drop(held);
    // The backup wins another queue and becomes primary there.
    b.lane = 1;
    assert!(matches!(b.attempt(&m, Instant(500)), Attempt::Won(_)));
    assert_eq!(b.role(), Role::Primary);
}

#[test]
fn equal_timeouts_losers_sleep_t_s() {
    let c = MetronomeConfig { loss_policy: LossPolicy::EqualTimeouts, ..MetronomeConfig::default() };
    let m = ctl(2, 1, &c);
    let mut a = Scheduler::new(0, 1);
    let mut b = Scheduler::new(0, 2);
    let Attempt::Won(_held) = a.attempt(&m, Instant(0)) else { unreachable!("free lock") };
    let Attempt::Lost { sleep } = b.attempt(&m, Instant(1)) else { unreachable!("held") };
    assert_eq!(sleep, Duration(20_000));
}

#[test]
fn rho_converges_to_the_busy_fraction() {
    let c = MetronomeConfig::default();
    let m = ctl(3, 1, &c);
    let mut w = Scheduler::new(0, 7);
    let mut t = 0u64;
    for _ in 0..100 {
        let Attempt::Won(s) = w.attempt(&m, Instant(t)) else { unreachable!("free lock") };
        t += 30_000; // B = 30 µs after a V = 10 µs vacation → ρ = 0.75
        let _ = w.finish(s, Instant(t), 1);
        t += 10_000;
    }
    let q = m.lanes()[0].snapshot();
    assert!((q.rho - 0.75).abs() < 1e-9, "rho = {}", q.rho);
    assert_eq!(q.short_timeout, m.params().short_timeout(0.75));
    assert_eq!(q.vacation_p99(), Some(histogram_bucket_bounds(histogram_bucket(10_000)).0 + 512));
}

#[test]
fn rho_stays_below_one_even_if_always_busy() {
    let c = MetronomeConfig::default();
    let m = ctl(2, 1, &c);
    let mut w = Scheduler::new(0, 7);
    let mut t = 0u64;
    for _ in 0..200 {
        let Attempt::Won(s) = w.attempt(&m, Instant(t)) else { unreachable!("free lock") };
        t += 1_000_000;
        let t_s = w.finish(s, Instant(t), 1);
        assert!(t_s >= Duration(15_000) && t_s <= Duration(30_000));
    }
    let rho = m.lanes()[0].rho();
    assert!(rho <= 1.0 - 1e-6 && rho > 0.99, "rho = {rho}");
}

#[test]
fn vacation_feedback_scales_t_s_towards_the_target() {
    let mut c = MetronomeConfig::default();
    let off = Params::new(&c, rate(), 3, 1).expect("valid");
    assert_eq!(off.feedback(1.0, Duration(45_000), 0.0), 1.0, "gain 0 is the paper's rule");
    c.vacation_feedback_gain = 0.1;
    let p = Params::new(&c, rate(), 3, 1).expect("valid");
    // Too long a vacation shrinks c, too short grows it, on target leaves it.
    assert!((p.feedback(1.0, Duration(30_000), 0.0) - 0.9).abs() < 1e-12);
    assert!((p.feedback(1.0, Duration(0), 0.0) - 1.1).abs() < 1e-12);
    assert_eq!(p.feedback(1.0, Duration(15_000), 0.0), 1.0);
    // Huge vacations are capped at 3·V̄; c stays in its range.
    assert!((p.feedback(1.0, Duration(u64::MAX), 0.0) - 0.8).abs() < 1e-12);
    assert_eq!(p.feedback(0.05, Duration(u64::MAX), 0.0), 0.05);
    assert_eq!(p.corrected_short_timeout(0.0, 0.5), Duration(22_500));
    assert_eq!(p.corrected_short_timeout(0.0, f64::NAN), Duration(45_000));
    // Through the controller: a queue whose vacations run at 2·V̄ sleeps less and less.
    let m = ctl(3, 1, &c);
    let mut w = Scheduler::new(0, 3);
    let mut t = 0u64;
    let mut t_s = Vec::new();
    for _ in 0..20 {
        let Attempt::Won(s) = w.attempt(&m, Instant(t)) else { unreachable!("free lock") };
        t += 100;
        t_s.push(w.finish(s, Instant(t), 0));
        t += 30_000;
    }
    // From the second round on (the first has no vacation), T_S only shrinks.
    assert!(t_s[1..].windows(2).all(|w| w[1] <= w[0]), "{t_s:?}");
    assert!(m.lanes()[0].correction() < 0.2, "c = {}", m.lanes()[0].correction());
    assert!(t_s[19] < Duration(9_000), "{t_s:?}");
}

#[test]
fn feedback_does_not_wind_up_against_the_ring_bound() {
    // qsize 256 at 14.88 Mpps: the ring bound (8.6 µs) is below V̄ = 15 µs, so T_S sits at
    // the bound and every vacation is shorter than V̄.
    let mut c = MetronomeConfig { ring_descriptors: 256, vacation_feedback_gain: 0.1, ..Default::default() };
    assert!(c.ring_bound_below_target());
    let bound = c.ring_bound_ns().expect("bound");
    assert!((bound - 8_602.15).abs() < 0.1, "{bound}");
    let p = Params::new(&c, rate(), 1, 1).expect("valid");
    assert_eq!(p.max_short_timeout(), Duration(8_602));
    // Without anti-windup 100 short vacations would take c to its cap of 20.
    let mut corr = 1.0;
    for _ in 0..100 {
        corr = p.feedback(corr, Duration(5_000), 0.0);
    }
    // c·T_S(0) may reach the bound (8602/15000 = 0.573...) but never pass it: here it
    // started above, so it only stays.
    assert_eq!(corr, 1.0);
    // From below the bound, c grows only up to where c·rule meets it.
    let mut corr = 0.3;
    for _ in 0..100 {
        corr = p.feedback(corr, Duration(5_000), 0.0);
    }
    assert!((corr - 8_602.15 / 15_000.0).abs() < 1e-3, "c = {corr}");
    // A long vacation then pulls it down at once, not from a wound-up 20.
    let after = p.feedback(corr, Duration(30_000), 0.0);
    assert!(after < corr * 0.95, "{after} vs {corr}");
    // The same against the lower clamp (1 µs): long vacations stop shrinking c there.
    let mut corr = 1.0;
    for _ in 0..200 {
        corr = p.feedback(corr, Duration(45_000), 0.0);
    }
    assert!((corr - 1_000.0 / 15_000.0).abs() < 1e-3, "c = {corr}");
    assert_eq!(line_rate_pps_for_mbps(10_000), 14_880_952);
    assert_eq!(line_rate_pps_for_mbps(0), 0);
    c.line_rate_pps = 0;
    assert_eq!(c.ring_bound_ns(), None);
    assert!(!c.ring_bound_below_target());
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]
    #[test]
    fn factor_equals_geometric_series_for_integer_m(rho in 0.0f64..1.0, m in 1u32..=64) {
        let series = f64::from(m) / geometric_sum(rho, m);
        prop_assert!(rel(short_timeout_factor(rho, f64::from(m)), series) < 1e-15);
        // The general (non-integer) evaluation agrees with the series.
        if rho > 0.0 {
            prop_assert!(rel(factor_general(rho, f64::from(m)), series) < 1e-10,
                "general {} vs series {}", factor_general(rho, f64::from(m)), series);
        }
    }

    #[test]
    fn factor_is_non_increasing_in_rho_for_m_at_least_one(
        r1 in 0.0f64..=1.0, r2 in 0.0f64..=1.0, m in 1.0f64..1000.0
    ) {
        let (lo, hi) = if r1 <= r2 { (r1, r2) } else { (r2, r1) };
        let (f_lo, f_hi) = (short_timeout_factor(lo, m), short_timeout_factor(hi, m));
        prop_assert!(f_hi <= f_lo * (1.0 + 1e-12), "m = {m}: f({lo}) = {f_lo} < f({hi}) = {f_hi}");
        prop_assert!(f_hi >= 1.0 - 1e-12 && f_lo <= m * (1.0 + 1e-12));
    }

    #[test]
    fn factor_is_finite_everywhere(rho in proptest::num::f64::ANY, m in proptest::num::f64::ANY) {
        let f = short_timeout_factor(rho, m);
        prop_assert!(f.is_finite() && f > 0.0);
    }

    #[test]
    fn short_timeout_respects_clamps(
        rho in proptest::num::f64::ANY, workers in 1usize..64, queues in 1usize..8,
        v_bar in 0u64..10_000_000, ring in 0u32..100_000
    ) {
        let c = MetronomeConfig { target_vacation_ns: v_bar, ring_descriptors: ring, ..MetronomeConfig::default() };
        let p = Params::new(&c, rate(), workers, queues).expect("valid");
        let t = p.short_timeout(rho);
        prop_assert!(t <= p.max_short_timeout() && t >= p.min_short_timeout());
        if ring > 0 {
            let bound = 0.5 * f64::from(ring) * 1e9 / 14.88e6;
            prop_assert!(t.ticks() as f64 <= bound + 0.5);
        }
    }

}
