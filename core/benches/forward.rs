//! Cycles per packet through the worker loop over software NICs, batch 32, one core:
//! the L2 forwarder (parse, validate, MAC rewrite) against an I/O-only stage that moves
//! the same batches without touching a byte, measured in the same run.
//!
//! `cargo bench -p cadence-core --bench forward`

use std::hint::black_box;

use cadence_core::buf::{BATCH_SIZE, Pool};
use cadence_core::checksum;
use cadence_core::nf::{Chain, Egress};
use cadence_core::softnic::{SoftRxQueue, SoftTxQueue};
use cadence_core::stage::Stage;

use cadence_core::poll::{PollConfig, Poller};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

mod common {
    pub mod stages;
    pub mod tsc;
}
use common::stages::{IoOnly, Tsc};
use common::tsc::{TscCycles, rdtsc};

/// A 60-byte IPv4/UDP frame of flow `flow` with a valid header checksum.
fn frame(flow: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, (flow >> 8) as u8, flow as u8]);
    ip[16..20].copy_from_slice(&[10, 1, 0, 1]);
    let sum = checksum::checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&(1024 + flow).to_be_bytes());
    udp[2..4].copy_from_slice(&4789u16.to_be_bytes());
    udp[4..6].copy_from_slice(&26u16.to_be_bytes());
    f
}

fn run<S: Stage>(c: &mut Criterion<TscCycles>, name: &str, stage: S) {
    let mut mem = vec![0u8; 4096 * cadence_core::buf::BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0x1000_0000, 4096).expect("pool");
    let mut rx = [SoftRxQueue::new(&mut pool, 512), SoftRxQueue::new(&mut pool, 512)];
    let mut tx = [SoftTxQueue::new(512, true), SoftTxQueue::new(512, true)];
    let frames: Vec<Vec<u8>> = (0..BATCH_SIZE as u16).map(frame).collect();
    let mut worker = Poller::new(stage, PollConfig::default());
    let clock = Tsc;
    let mut g = c.benchmark_group("forward (batch 32, 60 B, software NICs)");
    g.throughput(Throughput::Elements(BATCH_SIZE as u64));
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut cycles = 0;
            for _ in 0..iters {
                // The wire delivers a batch (outside the measurement: a NIC's DMA does this).
                for f in &frames {
                    let _ = rx[0].inject(&mut pool, f);
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
    assert_eq!(worker.stats().drops_total(), 0, "the bench must forward every frame");
}

fn forward(c: &mut Criterion<TscCycles>) {
    run(c, "io only (baseline)", IoOnly);
    let egress = Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], Egress::DEFAULT_PEERS, None);
    run(c, "l2 forwarder (parse + validate + rewrite)", Chain::new(Vec::new(), egress));
}

fn config() -> Criterion<TscCycles> {
    Criterion::default()
        .with_measurement(TscCycles)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! { name = benches; config = config(); targets = forward }
criterion_main!(benches);
