//! The NetBlaze hand-off ring (`core::offload::handoff`) between two pinned threads, burst
//! 32, in TSC cycles per packet handle (producer side + consumer side, as DPDK's
//! `ring_perf_autotest` reports its two-lcore SP/SC case), against a baseline measured in
//! the same run: the same loop over a `Mutex<VecDeque>` bounded at the same 2048 slots.
//! Producer on CPU 0 (the bench's main thread), consumer on CPU 1. Also one thread doing a
//! push burst and a pop burst of 32 in turn (DPDK's one-lcore figure: the ring's own
//! instructions, no cache line crossing cores).
//!
//! `cargo bench -p cadence-core --bench handoff` (a smoke pass: `-- --quick`). The DPDK
//! comparison (same loop, `rte_ring` SP/SC) is `cargo xtask peers --only ring`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common {
    pub mod handoff_pair;
    pub mod pin;
    pub mod tsc;
}
use common::handoff_pair::{Channel, MutexDeque, Pair, Ring};
use common::pin::pin_or_warn;
use common::tsc::TscCycles;

const BURST: u64 = 32;

fn run<C: Channel + 'static>(g: &mut criterion::BenchmarkGroup<'_, TscCycles>, name: &str) {
    let mut pair = Pair::<C>::start("handoff bench");
    // One criterion iteration = one burst of 32 handles through the channel.
    g.bench_function(name, |b| b.iter_custom(|iters| pair.sample(iters * BURST)));
}

fn handoff(c: &mut Criterion<TscCycles>) {
    pin_or_warn(0, "handoff bench");
    let mut g = c.benchmark_group("hand-off, burst 32, CPU 0 -> CPU 1 (cycles: producer + consumer)");
    g.throughput(Throughput::Elements(BURST));
    run::<MutexDeque>(&mut g, "Mutex<VecDeque> (baseline)");
    run::<Ring>(&mut g, "handoff ring (SPSC, 2048 slots)");
    g.finish();
}

fn one_thread(c: &mut Criterion<TscCycles>) {
    let mut g = c.benchmark_group("hand-off, one thread: push_burst(32) + pop_burst(32)");
    g.throughput(Throughput::Elements(BURST));
    let burst = common::handoff_pair::burst_handles();
    let (mut p, mut q) = cadence_core::offload::handoff::try_ring(common::handoff_pair::RING_SLOTS).expect("ring");
    let mut batch = cadence_core::buf::Batch::new();
    g.bench_function("handoff ring (SPSC, 2048 slots)", |b| {
        b.iter(|| {
            let n = p.push_burst(std::hint::black_box(&burst));
            let m = q.pop_burst(&mut batch);
            batch.clear();
            std::hint::black_box((n, m))
        })
    });
    g.finish();
}

criterion_group! { name = benches; config = common::tsc::criterion(3, 50); targets = one_thread, handoff }
criterion_main!(benches);
