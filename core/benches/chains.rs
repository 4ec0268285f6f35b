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

use std::hint::black_box;
use std::sync::Arc;

use cadence_core::buf::{BATCH_SIZE, Pool};
use cadence_core::checksum;
use cadence_core::nf::accounting::{Accounting, AccountingConfig, AccountingShared};
use cadence_core::nf::acl::{Acl, AclAction, AclConfig, AclShared, example_rules};
use cadence_core::nf::encrypt::{Encrypt, EncryptConfig, EncryptShared};
use cadence_core::nf::l3fwd::{L3fwd, L3fwdConfig, L3fwdShared, NextHop, Route4};
use cadence_core::nf::lb::{Backend, Lb, LbConfig, LbShared, Vip};
use cadence_core::nf::urlfilter::{UrlFilter, UrlFilterConfig, UrlFilterShared};
use cadence_core::nf::{Chain, Egress, Nf};
use cadence_core::parse::IpAddr;
use cadence_core::softnic::{SoftRxQueue, SoftTxQueue};
use cadence_core::stage::{PORTS, Stage};

use cadence_core::poll::{PollConfig, Poller};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common {
    pub mod stages;
    pub mod tsc;
}
use common::stages::{IoOnly, Tsc};
use common::tsc::{TscCycles, rdtsc};

const VIP: [u8; 4] = [10, 1, 0, 1];
/// Flows each per-flow table holds (the shipped chain files' setting).
const FLOW_CAPACITY: usize = 8192;

/// A 64-byte IPv4/TCP frame (10 payload bytes, valid checksums) of flow `flow`, to the
/// VIP's port 80 from 10.2.x.y:1024+flow.
fn frame(flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let src = [10, 2, (flow >> 8) as u8, flow as u8];
    {
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&50u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&VIP);
        let sum = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    {
        let tcp = &mut f[34..54];
        tcp[0..2].copy_from_slice(&(1024 + flow).to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x18; // PSH|ACK
        tcp[14..16].copy_from_slice(&8192u16.to_be_bytes());
    }
    f[54..64].copy_from_slice(b"0123456789");
    let sum = checksum::l4_checksum_v4(src, VIP, 6, &f[34..64]);
    f[50..52].copy_from_slice(&sum.to_be_bytes());
    f
}

const EGRESS: Egress = Egress {
    own_mac: [[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]],
    peer_mac: [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1]],
    control: None,
};

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

fn l3fwd() -> Box<dyn Nf> {
    let mut cfg = L3fwdConfig::default();
    cfg.next_hops = (0..PORTS as u8).map(|p| NextHop { port: p, mac: [2, 0, 0, 0, 2, p] }).collect();
    cfg.routes4 = (0..256u32)
        .map(|i| Route4 { prefix: [10, (i >> 4) as u8, (i & 15) as u8, 0], len: 24, next_hop: i % 2 })
        .collect();
    // The bench's VIP destination must have a route.
    cfg.routes4.push(Route4 { prefix: [10, 1, 0, 0], len: 16, next_hop: 1 });
    Box::new(L3fwd::new(Arc::new(L3fwdShared::try_new(&cfg).expect("l3fwd"))))
}

fn run<S: Stage>(c: &mut Criterion<TscCycles>, group: &str, name: &str, stage: S, flows: u16) {
    run_with(c, group, name, stage, flows, PollConfig::default());
}

fn run_with<S: Stage>(c: &mut Criterion<TscCycles>, group: &str, name: &str, stage: S, flows: u16, cfg: PollConfig) {
    let mut mem = vec![0u8; 4096 * cadence_core::buf::BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0x1000_0000, 4096).expect("pool");
    let mut rx = [SoftRxQueue::new(&mut pool, 512), SoftRxQueue::new(&mut pool, 512)];
    let mut tx = [SoftTxQueue::new(512, true), SoftTxQueue::new(512, true)];
    let frames: Vec<Vec<u8>> = (0..flows).map(frame).collect();
    let mut worker = Poller::new(stage, cfg);
    let clock = Tsc;
    let mut next = 0usize;
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(BATCH_SIZE as u64));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut cycles = 0;
            for _ in 0..iters {
                for _ in 0..BATCH_SIZE {
                    let _ = rx[0].inject(&mut pool, &frames[next]);
                    next = (next + 1) % frames.len();
                }
                let t0 = rdtsc();
                let out = worker.poll_once(&mut pool, &mut rx, &mut tx, &clock);
                cycles += rdtsc() - t0;
                black_box(out);
            }
            cycles
        })
    });
    g.finish();
    let s = worker.stats();
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

fn config() -> Criterion<TscCycles> {
    Criterion::default()
        .with_measurement(TscCycles)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2))
        .sample_size(30)
}

criterion_group! { name = benches; config = config(); targets = chains }
criterion_main!(benches);
