//! Cycles per packet through the worker loop over software NICs, batch 32, one core:
//! the L2 forwarder (parse, validate, MAC rewrite) against an I/O-only stage that moves
//! the same batches without touching a byte, measured in the same run.
//!
//! `cargo bench -p cadence-core --bench forward`

use cadence_core::buf::BATCH_SIZE;
use cadence_core::nf::{Chain, Egress};
use cadence_core::stage::Stage;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common {
    pub mod frames;
    pub mod stages;
    pub mod tsc;
    pub mod worker_loop;
}
use common::stages::IoOnly;
use common::tsc::TscCycles;
use common::worker_loop::with_worker;

fn run<S: Stage>(c: &mut Criterion<TscCycles>, name: &str, stage: S) {
    let frames: Vec<Vec<u8>> = (0..BATCH_SIZE as u16).map(common::frames::udp60).collect();
    let mut g = c.benchmark_group("forward (batch 32, 60 B, software NICs)");
    g.throughput(Throughput::Elements(BATCH_SIZE as u64));
    let ((), stats) = with_worker(stage, &frames, |poll| {
        g.bench_function(name, |b| b.iter_custom(|iters| (0..iters).map(|_| poll()).sum()));
    });
    g.finish();
    assert_eq!(stats.drops_total(), 0, "the bench must forward every frame");
}

fn forward(c: &mut Criterion<TscCycles>) {
    run(c, "io only (baseline)", IoOnly);
    let egress = Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], Egress::DEFAULT_PEERS, None);
    run(c, "l2 forwarder (parse + validate + rewrite)", Chain::new(Vec::new(), egress));
}

criterion_group! { name = benches; config = common::tsc::criterion(3, 50); targets = forward }
criterion_main!(benches);
