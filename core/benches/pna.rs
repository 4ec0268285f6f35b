//! PNA exact-match table costs in TSC cycles per key (`docs/PERFORMANCE.md`, "PNA tables").
//!
//! `cargo bench -p cadence-core --bench pna -- --warm-up-time 1 --measurement-time 3`
//!
//! 16-byte random keys, 8-byte action data, tables of capacity N = 64K and 1M built once per size.
//! Lookup tables are filled to N (the SWX learner's "n_keys_max" load: 2 keys per 7-way bucket).
//! The add-on-miss and delete cases slide a window of 0.75 N present keys over a shuffled key
//! list: each step adds the next 32 keys (burst lookup, all miss, then `add_on_miss` each) and
//! deletes the 32 oldest, so occupancy stays at 75 % (the rte_hash figure's load). Every case
//! times only its own part with `rdtsc` inside `iter_custom`. The two-core figure at the end is
//! printed, not a criterion case: the same 512K inserts by one core, then split over two threads.

use std::hint::black_box;

use cadence_core::pna::exact::{ExactConfig, ExactTable, Local, Lookup};
use cadence_core::pna::{AddStatus, IdleTimeout};
use cadence_core::time::{Duration, Instant};
use criterion::{BenchmarkId, Criterion, Throughput};

mod common {
    pub mod keys;
    pub mod tsc;
}
use common::keys::{Key, keys};
use common::tsc::{TscCycles, rdtsc};

type Table = ExactTable<2, 1>;
const B: usize = 32;
const NOW: Instant = Instant(1);

fn table(n: usize, mode: IdleTimeout) -> Table {
    let mut cfg = ExactConfig::new(n);
    cfg.idle_timeout = mode;
    ExactTable::new(cfg)
}

/// Adds one burst: lookup (all miss), then add each miss. Returns the adds that succeeded.
fn add_burst(t: &Table, lane: &mut Local, ks: &[Key], now: Instant, out: &mut [Lookup<2, 1>; B]) -> usize {
    t.lookup_burst(lane, ks, now, out);
    let mut ok = 0;
    for o in out.iter().take(ks.len()) {
        if let Lookup::Miss(m) = o {
            ok += usize::from(t.add_on_miss(lane, m, 0, &[1], 0, now) == AddStatus::Success);
        }
    }
    ok
}

fn fill(t: &Table, lane: &mut Local, ks: &[Key]) {
    let mut out = [Lookup::EMPTY; B];
    for c in ks.chunks(B) {
        add_burst(t, lane, c, NOW, &mut out);
    }
}

fn bench_size(c: &mut Criterion<TscCycles>, n: usize, label: &str) {
    let mut g = c.benchmark_group(format!("pna exact {label}"));
    g.throughput(Throughput::Elements(B as u64));

    // ---- lookups on a table filled to capacity ----
    let t = table(n, IdleTimeout::NoTimeout);
    let mut lane = t.local();
    let present = keys(n, 1);
    fill(&t, &mut lane, &present);
    let stored = t.count(NOW);
    let absent = keys(n, 2);
    let mut out = [Lookup::EMPTY; B];
    let mut cur = 0usize;
    g.bench_function(BenchmarkId::new("lookup hit burst32", label), |b| {
        b.iter_custom(|iters| {
            let t0 = rdtsc();
            for _ in 0..iters {
                let s = cur % (n - B);
                cur = cur.wrapping_add(B * 7919);
                black_box(t.lookup_burst(&mut lane, &present[s..s + B], NOW, &mut out));
            }
            rdtsc() - t0
        })
    });
    g.bench_function(BenchmarkId::new("lookup miss burst32", label), |b| {
        b.iter_custom(|iters| {
            let t0 = rdtsc();
            for _ in 0..iters {
                let s = cur % (n - B);
                cur = cur.wrapping_add(B * 7919);
                black_box(t.lookup_burst(&mut lane, &absent[s..s + B], NOW, &mut out));
            }
            rdtsc() - t0
        })
    });
    g.bench_function(BenchmarkId::new("lookup hit single x32", label), |b| {
        b.iter_custom(|iters| {
            let t0 = rdtsc();
            for _ in 0..iters {
                let s = cur % (n - B);
                cur = cur.wrapping_add(B * 7919);
                for k in &present[s..s + B] {
                    black_box(t.lookup(&mut lane, k, NOW));
                }
            }
            rdtsc() - t0
        })
    });
    g.bench_function(BenchmarkId::new("update params (after burst lookup)", label), |b| {
        b.iter_custom(|iters| {
            let mut spent = 0;
            for i in 0..iters {
                let s = cur % (n - B);
                cur = cur.wrapping_add(B * 7919);
                t.lookup_burst(&mut lane, &present[s..s + B], NOW, &mut out);
                let t0 = rdtsc();
                for o in &out {
                    if let Lookup::Hit(h) = o {
                        black_box(t.update_params(&mut lane, &h.handle, &[i], NOW).is_ok());
                    }
                }
                spent += rdtsc() - t0;
            }
            spent
        })
    });
    let fill_failures = lane.stats().add_failures_total();
    drop(t);

    // ---- add-on-miss and delete at a steady 75 % occupancy ----
    let t = table(n, IdleTimeout::NoTimeout);
    let mut lane = t.local();
    let all = keys(n, 3);
    let window = (n * 3 / 4) / B * B;
    fill(&t, &mut lane, &all[..window]);
    let (mut head, mut tail) = (window, 0usize);
    let mut add_fail = 0usize;
    let mut adds = 0usize;
    // One step: add all[head..+B] (timed if `time_add`), delete all[tail..+B] (timed if not).
    let mut step = |t: &Table, lane: &mut Local, time_add: bool| -> u64 {
        let h = head % all.len();
        let d = tail % all.len();
        let (hk, dk) = (&all[h..(h + B).min(all.len())], &all[d..(d + B).min(all.len())]);
        let t0 = rdtsc();
        let ok = add_burst(t, lane, hk, NOW, &mut out);
        let t1 = rdtsc();
        for k in dk {
            black_box(t.delete(lane, k, NOW).is_ok());
        }
        let t2 = rdtsc();
        adds += hk.len();
        add_fail += hk.len() - ok;
        head += hk.len();
        tail += dk.len();
        if time_add { t1 - t0 } else { t2 - t1 }
    };
    g.bench_function(BenchmarkId::new("add-on-miss (burst32 miss + add), 75% steady", label), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| step(&t, &mut lane, true)).sum())
    });
    g.bench_function(BenchmarkId::new("delete (control plane), 75% steady", label), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| step(&t, &mut lane, false)).sum())
    });
    drop(t);

    // ---- expiry: AutoDelete steady state: add-on-miss reclaims expired slots in its bucket, and
    // an incremental sweep (32 buckets per burst, timed with it) frees the others, no deletes ----
    let t = table(n, IdleTimeout::AutoDelete);
    let mut lane = t.local();
    // Time advances one tick per added key; entries live 0.5 N ticks, so live + not-yet-swept
    // entries stay within the capacity when the sweep covers the table every 0.5 N ticks.
    t.set_expire_profile(0, Duration((n / 2) as u64));
    let stream = keys(4 * n, 4);
    let mut now = 1u64;
    let mut pos = 0usize;
    let mut cursor = 0usize;
    let mut expiry_step = |t: &Table, lane: &mut Local| -> u64 {
        let s = pos % (stream.len() - B);
        pos += B;
        now += B as u64;
        let t0 = rdtsc();
        add_burst(t, lane, &stream[s..s + B], Instant(now), &mut out);
        cursor = t.sweep(lane, Instant(now), cursor, B);
        rdtsc() - t0
    };
    for _ in 0..(2 * n / B) {
        expiry_step(&t, &mut lane); // reach the steady state
    }
    let before = *lane.stats();
    g.bench_function(BenchmarkId::new("add-on-miss + sweep, AutoDelete steady state", label), |b| {
        b.iter_custom(|iters| (0..iters).map(|_| expiry_step(&t, &mut lane)).sum())
    });
    let after = *lane.stats();
    g.finish();
    let tries = (after.adds + after.add_failures_total()).saturating_sub(before.adds + before.add_failures_total());
    eprintln!(
        "pna {label}: stored {stored}/{n} at fill ({fill_failures} add failures); steady add-on-miss: {add_fail} of {adds} not done; \
         AutoDelete: {} of {tries} not done, {} expired slots reclaimed",
        after.add_failures_total() - before.add_failures_total(),
        after.expired_reclaimed - before.expired_reclaimed
    );
}

/// Inserts (burst lookup + add_on_miss) `ks` into `t`; returns the TSC cycles taken.
fn insert_all(t: &Table, ks: &[Key]) -> u64 {
    let mut lane = t.local();
    let mut out = [Lookup::EMPTY; B];
    let t0 = rdtsc();
    for c in ks.chunks(B) {
        add_burst(t, &mut lane, c, NOW, &mut out);
    }
    rdtsc() - t0
}

/// Looks up `ks` in bursts; returns the TSC cycles taken.
fn lookup_all(t: &Table, ks: &[Key]) -> u64 {
    let mut lane = t.local();
    let mut out = [Lookup::EMPTY; B];
    let t0 = rdtsc();
    for c in ks.chunks(B) {
        black_box(t.lookup_burst(&mut lane, c, NOW, &mut out));
    }
    rdtsc() - t0
}

/// Runs `work` over `ks` on one core, then over its two halves on two threads at once, on fresh
/// tables from `make` (after `prep`); prints cycles per key and the throughput ratio (median of 5).
fn scaling(what: &str, make: &dyn Fn() -> Table, prep: &dyn Fn(&Table), work: fn(&Table, &[Key]) -> u64, ks: &[Key]) {
    let (a, b) = ks.split_at(ks.len() / 2);
    let mut runs = Vec::new();
    for _ in 0..5 {
        let t = make();
        prep(&t);
        let one = work(&t, ks);
        drop(t);
        let t = make();
        prep(&t);
        let barrier = std::sync::Barrier::new(2);
        let wall = std::thread::scope(|s| {
            let h = s.spawn(|| {
                barrier.wait();
                work(&t, b)
            });
            barrier.wait();
            let t0 = rdtsc();
            work(&t, a);
            let _ = h.join();
            rdtsc() - t0
        });
        runs.push((one as f64 / wall as f64, one as f64 / ks.len() as f64, wall as f64 / ks.len() as f64));
    }
    runs.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (r, c1, c2) = runs[runs.len() / 2];
    eprintln!(
        "pna two cores, {what}: one core {c1:.0} cycles/key, two cores {c2:.0} wall cycles/key, throughput ratio {r:.2} ({:?})",
        runs.iter().map(|x| (x.0 * 100.0).round() / 100.0).collect::<Vec<_>>()
    );
}

/// Hashes `ks` 64 times over (ALU only, no table memory): the machine's own two-core scaling.
fn hash_only(t: &Table, ks: &[Key]) -> u64 {
    let t0 = rdtsc();
    let mut acc = 0u64;
    for _ in 0..64 {
        for k in ks {
            acc = acc.wrapping_add(t.hash(black_box(k)));
        }
    }
    black_box(acc);
    rdtsc() - t0
}

/// Two cores inserting into (and looking up in) one table at once against one core doing the same.
fn two_cores() {
    let ks = keys(1 << 14, 6);
    scaling(
        "hashing only (ALU-bound control: the machine's own scaling)",
        &|| table(64, IdleTimeout::NoTimeout),
        &|_| {},
        hash_only,
        &ks,
    );
    for (n, label) in [(1usize << 20, "1M"), (1 << 16, "64K")] {
        let ks = keys(n / 2, 5);
        let make = move || table(n, IdleTimeout::NoTimeout);
        scaling(
            &format!("{} inserts (burst lookup + add) into a {label} table", n / 2),
            &make,
            &|_| {},
            insert_all,
            &ks,
        );
        let fill_ks = ks.clone();
        let prep = move |t: &Table| {
            insert_all(t, &fill_ks);
        };
        scaling(&format!("{} burst lookups (hits) in a {label} table", n / 2), &make, &prep, lookup_all, &ks);
    }
}

fn main() {
    let mut c = Criterion::default().with_measurement(TscCycles).configure_from_args();
    // PNA_BENCH=1M (or 64K, two) runs one part only; unset runs all.
    let only = std::env::var("PNA_BENCH").unwrap_or_default();
    if only.is_empty() || only == "64K" {
        bench_size(&mut c, 1 << 16, "64K");
    }
    if only.is_empty() || only == "1M" {
        bench_size(&mut c, 1 << 20, "1M");
    }
    if only.is_empty() || only == "two" {
        two_cores();
    }
    c.final_summary();
}
