//! Cycles per packet per NF chain on one core over software NICs, batch 32, 64-byte
//! TCP frames, at 500 and 3000 flows, against an I/O-only stage measured in the same
//! run (SPEC §4; NetBlaze's per-core profiles are the anchors, `docs/PERFORMANCE.md`).
//!
//! - Chain 1: ACL (1500 random rules) → LB (one VIP, 100 backends, Maglev) → Accounting.
//! - Chain 2: ACL (1500 rules) → UrlFilter (10 banned URLs; these flows are not HTTP, so
//!   each is judged once) → Encrypt (ChaCha20 over the payload).
//! - L3 forwarder: 256 /24 routes (DPDK l3fwd-LPM's setting).
//!
//! Per-flow tables hold 8192 flows, as in the shipped `chains/chain1.toml` and `chain2.toml`.
//!
//! `cargo bench -p cadence-core --bench chains`

use std::sync::Arc;

use cadence_core::buf::BATCH_SIZE;
use cadence_core::nf::accounting::{Accounting, AccountingConfig, AccountingShared};
use cadence_core::nf::acl::{Acl, AclAction, AclConfig, AclShared, example_rules};
use cadence_core::nf::encrypt::{Encrypt, EncryptConfig, EncryptShared};
use cadence_core::nf::lb::{Backend, Lb, LbConfig, LbShared, Vip};
use cadence_core::nf::urlfilter::{UrlFilter, UrlFilterConfig, UrlFilterShared};
use cadence_core::nf::{Chain, Nf};
use cadence_core::parse::IpAddr;
use cadence_core::poll::PollConfig;
use cadence_core::stage::Stage;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common {
    pub mod frames;
    pub mod l3;
    pub mod stages;
    pub mod tsc;
    pub mod worker_loop;
}
use common::frames::VIP;
use common::l3::{EGRESS, l3fwd};
use common::stages::IoOnly;
use common::tsc::TscCycles;
use common::worker_loop::with_worker_cfg;

/// Flows each per-flow table holds (the shipped chain files' setting).
const FLOW_CAPACITY: usize = 8192;

fn acl() -> Box<dyn Nf> {
    // Rules from the generator plus a permit for the bench's source range at the top, so
    // every flow is classified against 1500 rules and then passes.
    let mut rules = example_rules(7, 1500);
    let mut permit = cadence_core::nf::acl::AclRule::any(u32::MAX, AclAction::Permit);
    permit.proto = Some(6);
    permit.dport = (80, 80);
    rules.push(permit);
    let mut cfg = AclConfig::new(rules, AclAction::Permit);
    cfg.flow_capacity = FLOW_CAPACITY;
    let shared = Arc::new(AclShared::try_new(&cfg).expect("acl"));
    Box::new(Acl::new(shared))
}

fn lb() -> Box<dyn Nf> {
    let backends = (0..100u8).map(|i| Backend { addr: IpAddr::V4([10, 3, 0, i]), port: None }).collect();
    let mut cfg = LbConfig::default();
    cfg.affinity_capacity = FLOW_CAPACITY;
    cfg.vips.push(Vip { addr: IpAddr::V4(VIP), port: 80, proto: 6, backends });
    Box::new(Lb::new(Arc::new(LbShared::try_new(&cfg).expect("lb"))))
}

fn accounting() -> Box<dyn Nf> {
    let mut cfg = AccountingConfig::default();
    cfg.capacity = FLOW_CAPACITY;
    Box::new(Accounting::new(Arc::new(AccountingShared::try_new(&cfg).expect("accounting"))))
}

fn urlfilter() -> Box<dyn Nf> {
    let mut cfg = UrlFilterConfig::default();
    cfg.banned = (0..10).map(|i| format!("banned{i}.example/path")).collect();
    cfg.flows = FLOW_CAPACITY;
    Box::new(UrlFilter::new(Arc::new(UrlFilterShared::try_new(&cfg).expect("urlfilter"))))
}

fn encrypt() -> Box<dyn Nf> {
    let mut cfg = EncryptConfig::default();
    cfg.key = [7; 32];
    cfg.udp_flows = FLOW_CAPACITY;
    Box::new(Encrypt::new(Arc::new(EncryptShared::try_new(&cfg).expect("encrypt"))))
}

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
