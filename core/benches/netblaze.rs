//! NetBlaze's decisions, in TSC cycles per call (issue 10's targets: a core mapper decision
//! for a backlog of more than 1000 packets under 5 µs, and the mapper's cost per epoch at most
//! 1 % of the epoch):
//! - `CoreMapper::decide` with chain 1's committed profile (`chains/chain1.profile`) on a
//!   backlog of 100 flows and 1393 packets — a whale of 700 packets plus 99 flows of 7 — and a
//!   pool of 8 free auxiliary cores: outside the frontier, in boost mode, the whale split,
//!   the rest first fit onto recruited cores. Each call starts from the same pool (a copy of
//!   8 `AuxCore`s, measured alone in the same run as "reset only");
//! - the same inside the frontier (8 flows of 8 packets: the per-epoch common case);
//! - `ServerMapper::period` over 128 buckets and 4 queues (once per `mapper_ms`).
//!
//! `cargo bench -p cadence-core --bench netblaze` (a smoke pass: `-- --quick`);
//! docs/PERFORMANCE.md "NetBlaze decisions".

use std::hint::black_box;

use cadence_core::netblaze::{AuxCore, CoreMapper, FlowBacklog, NetBlazeConfig, Profile, ServerMapper};
use cadence_core::rss::BucketLoad;
use criterion::{Criterion, criterion_group, criterion_main};

mod common {
    pub mod tsc;
}
use common::tsc::TscCycles;

const PROFILE: &str = include_str!("../../chains/chain1.profile");

fn flows_over(whale: u32, flows: usize, each: u32) -> Vec<FlowBacklog> {
    std::iter::once(FlowBacklog::new(whale)).chain((1..flows).map(|_| FlowBacklog::new(each))).collect()
}

fn decide(c: &mut Criterion<TscCycles>) {
    let profile = Profile::parse(PROFILE).expect("chains/chain1.profile");
    let params = NetBlazeConfig::default().validate().expect("defaults");
    let mapper = CoreMapper::new(params);
    let pool = [AuxCore::default(); 8];
    let mut g = c.benchmark_group("netblaze core mapper, chain 1 profile (cycles per decision)");
    let mut aux = pool;
    g.bench_function("reset only (copy of 8 aux cores)", |b| {
        b.iter(|| {
            aux.copy_from_slice(black_box(&pool));
            black_box(&aux);
        })
    });
    let mut big = flows_over(700, 100, 7);
    let packets: u32 = big.iter().map(|f| f.packets).sum();
    let d = mapper.decide(&profile, &mut big, &mut aux.clone());
    assert!(packets > 1000 && !d.inside && d.splits == 1, "the bench's backlog: {packets} packets, {d:?}");
    g.bench_function(format!("decide: 100 flows, {packets} packets (whale 700), 8 free aux"), |b| {
        b.iter(|| {
            aux.copy_from_slice(&pool);
            black_box(mapper.decide(&profile, black_box(&mut big), &mut aux))
        })
    });
    let mut small = flows_over(8, 8, 8);
    assert!(mapper.decide(&profile, &mut small, &mut aux.clone()).inside);
    g.bench_function("decide: 8 flows, 64 packets (inside the frontier)", |b| {
        b.iter(|| black_box(mapper.decide(&profile, black_box(&mut small), &mut aux)))
    });
    g.finish();
}

fn server(c: &mut Criterion<TscCycles>) {
    let profile = Profile::parse(PROFILE).expect("chains/chain1.profile");
    let params = NetBlazeConfig::default().validate().expect("defaults");
    let mut sm = ServerMapper::new(params, 128, 4);
    let table: Vec<u16> = (0..128u16).map(|b| b % 4).collect();
    // Queue 0 overloaded (its buckets at 120 kpps each: 3.8 Mpps against ~3.9 Mpps), the
    // others light: relieve moves buckets every period.
    let loads: Vec<BucketLoad> = (0..128)
        .map(|b| BucketLoad { flows: 20.0, pps: if b % 4 == 0 { 120_000.0 } else { 5_000.0 + f64::from(b) } })
        .collect();
    let mut active = [true; 4];
    let out = sm.period(&profile.rate, &loads, &table, &mut active);
    assert!(out.moved > 0, "{out:?}");
    let mut g = c.benchmark_group("netblaze server mapper (cycles per period)");
    g.bench_function("period: 128 buckets, 4 queues, one overloaded", |b| {
        b.iter(|| {
            let mut active = [true; 4];
            black_box(sm.period(&profile.rate, black_box(&loads), &table, &mut active))
        })
    });
    g.finish();
}

criterion_group! { name = benches; config = common::tsc::criterion(3, 50); targets = decide, server }
criterion_main!(benches);
