//! Metronome's hot pieces in TSC cycles: the queue trylock (uncontended acquire +
//! release, and a lost race) and one controller round (win, vacation, ρ/T_S update,
//! release).
//!
//! `cargo bench -p cadence-core --bench metronome`

use std::hint::black_box;

use cadence_core::metronome::{Attempt, Metronome, MetronomeConfig, Scheduler};
use cadence_core::sync::TryLock;
use cadence_core::time::{Instant, TickRate};
use criterion::{Criterion, criterion_group, criterion_main};

mod common {
    pub mod tsc;
}
use common::tsc::TscCycles;

fn trylock(c: &mut Criterion<TscCycles>) {
    let mut g = c.benchmark_group("trylock");
    let lock = TryLock::new();
    g.bench_function("uncontended acquire+release", |b| {
        b.iter(|| {
            let guard = black_box(&lock).try_lock();
            black_box(guard.is_some());
        })
    });
    let held = lock.try_lock();
    g.bench_function("lost race (already held)", |b| b.iter(|| black_box(black_box(&lock).try_lock().is_none())));
    drop(held);
    g.finish();
}

fn controller(c: &mut Criterion<TscCycles>) {
    let rate = TickRate::try_new(2_600_000_000).expect("nonzero");
    let mut cfg = MetronomeConfig::default();
    cfg.vacation_feedback_gain = 0.0;
    let ctl = Metronome::with_lanes(&cfg, rate, 3, 1).expect("valid config");
    let mut w = Scheduler::new(0, 1);
    let mut now = 1_000_000u64;
    let mut g = c.benchmark_group("metronome controller");
    g.bench_function("round: win + finish (rho EWMA, T_S rule, release)", |b| {
        b.iter(|| {
            now += 40_000; // 15 µs of vacation at 2.6 GHz
            let t = match w.attempt(&ctl, Instant(now)) {
                Attempt::Won(s) => {
                    now += 2_000;
                    w.finish(s, Instant(now), 8)
                }
                Attempt::Lost { sleep } => sleep,
            };
            black_box(t)
        })
    });
    let mut cfg_m = cfg;
    cfg_m.vacation_feedback_gain = 0.03;
    let ctl_fb = Metronome::with_lanes(&cfg_m, rate, 3, 2).expect("valid config");
    g.bench_function("round with vacation feedback, m = 1.5 (libm pow)", |b| {
        b.iter(|| {
            now += 40_000;
            let t = match w.attempt(&ctl_fb, Instant(now)) {
                Attempt::Won(s) => {
                    now += 2_000;
                    w.finish(s, Instant(now), 8)
                }
                Attempt::Lost { sleep } => sleep,
            };
            black_box(t)
        })
    });
    g.finish();
}

criterion_group! { name = benches; config = common::tsc::criterion(2, 50); targets = trylock, controller }
criterion_main!(benches);
