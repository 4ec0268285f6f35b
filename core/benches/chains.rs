//! Cycles per packet per NF chain on one core over software NICs, batch 32, 64-byte
//! TCP frames, at 500 and 3000 flows, against an I/O-only stage measured in the same
//! run (NetBlaze's per-core profiles are the anchors, `docs/PERFORMANCE.md`).
//!
//! - Chain 1: ACL (1500 random rules) → LB (one VIP, 100 backends, Maglev) → Accounting.
//! - Chain 2: ACL (1500 rules) → UrlFilter (10 banned URLs; these flows are not HTTP, so
//!   each is judged once) → Encrypt (ChaCha20 over the payload).
//! - L3 forwarder: 256 /24 routes (DPDK l3fwd-LPM's setting).
//!
//! Per-flow tables hold 8192 flows, as in the shipped `chains/chain1.toml` and `chain2.toml`
//! (`common/nfs.rs`). What the latency accounting costs Chain 1 is measured by pairs in the
//! `latency` bench.
//!
//! `cargo bench -p cadence-core --bench chains`

use cadence_core::buf::BATCH_SIZE;
use cadence_core::nf::Chain;
use cadence_core::poll::PollConfig;
use cadence_core::stage::Stage;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common {
    pub mod frames;
    pub mod l3;
    pub mod nfs;
    pub mod stages;
    pub mod tsc;
    pub mod worker_loop;
}
use common::l3::{EGRESS, l3fwd};
use common::nfs::{accounting, acl, encrypt, lb, urlfilter};
use common::stages::IoOnly;
use common::tsc::TscCycles;
use common::worker_loop::with_worker_cfg;

fn run<S: Stage>(c: &mut Criterion<TscCycles>, group: &str, name: &str, stage: S, flows: u16) {
    run_with(c, group, name, stage, flows, PollConfig::default());
}

fn run_with<S: Stage>(c: &mut Criterion<TscCycles>, group: &str, name: &str, stage: S, flows: u16, cfg: PollConfig) {
    let frames: Vec<Vec<u8>> = (0..flows).map(common::frames::tcp64).collect();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(BATCH_SIZE as u64));
    let ((), s) = with_worker_cfg(stage, &frames, cfg, |poll| {
        g.bench_function(name, |b| b.iter_custom(|iters| (0..iters).map(|_| poll()).sum()));
    });
    g.finish();
    eprintln!("{group}/{name}: rx {} tx {} drops {}", s.ports[0].rx, s.ports[1].tx, s.drops_total());
}

fn chains(c: &mut Criterion<TscCycles>) {
    for flows in [500u16, 3000] {
        let group = format!("chains ({flows} flows, batch 32, 64 B TCP)");
        run(c, &group, "io only (baseline)", IoOnly, flows);
        run(c, &group, "chain 1: acl > lb > accounting", Chain::new(vec![acl(), lb(), accounting()], EGRESS), flows);
        // The same without the latency accounting (RX stamps, TX sojourn histogram): its cost.
        run_with(
            c,
            &group,
            "chain 1, no latency accounting",
            Chain::new(vec![acl(), lb(), accounting()], EGRESS),
            flows,
            PollConfig::default().without_timing(),
        );
        run(
            c,
            &group,
            "chain 2: acl > urlfilter > encrypt",
            Chain::new(vec![acl(), urlfilter(), encrypt()], EGRESS),
            flows,
        );
        run(c, &group, "l3fwd (256 x /24)", Chain::new(vec![l3fwd()], EGRESS), flows);
    }
}

criterion_group! { name = benches; config = common::tsc::criterion(2, 30); targets = chains }
criterion_main!(benches);
