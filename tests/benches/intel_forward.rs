//! Cycles per packet of the Intel RX/TX path through the real worker loop, batch 32,
//! 60-byte frames, one core: the real ixgbe and i40e drivers (their `IntelRx` /
//! `IntelTx` rings) on two ports of the register-level models (82599, XL710), polled by
//! the real `cadence_core::poll::Poller` with the I/O-only stage and with the empty
//! `Chain` (the L2 forwarder) — the Intel counterpart of `core/benches/forward.rs`.
//!
//! `cargo bench -p cadence-tests --bench intel_forward`
//!
//! Only `Poller::poll_once` is timed. The wire stays outside the interval: before it,
//! the model delivers 32 frames into port 0's RX ring (descriptor write-backs with DD,
//! as the NIC's DMA would); after it, the models' TX engines run (`tx_paused`: a tail
//! write only records the tail) and port 1's sent frames are counted. One piece of model
//! work cannot leave the interval: the tail writes the driver makes inside `poll_once`
//! land in the model's register file (a `RefCell` borrow, a `HashMap` store, the
//! model's ordering checks). A census counts those writes per poll, and a separate
//! bench, "model tail writes alone", times exactly that many writes of the same
//! registers with nothing else around them; docs/PERFORMANCE.md reports both the raw
//! figure and the figure with that subtracted.

use std::hint::black_box;

use cadence_core::buf::BATCH_SIZE;
use cadence_core::nf::{Chain, Egress};
use cadence_core::nic::{RxQueue, TxQueue};
use cadence_core::poll::{PollConfig, Poller};
use cadence_core::stage::Stage;
use cadence_drivers::hal::{DmaAlloc, Mmio, PciFunction};
use cadence_drivers::{i40e, ixgbe};
use cadence_tests::ixgbe_model::{self, Ixgbe82599};
use cadence_tests::model_host::{BarDevice, FakePci, Window};
use cadence_tests::model_rig::ModelRig;
use cadence_tests::xl710_model::{self, Xl710};
use criterion::{BenchmarkGroup, Criterion, Throughput, criterion_group, criterion_main};

// The house bench pieces, shared with `cadence-core`'s benches rather than copied
// (at the crate root: `stages` names `super::tsc`).
#[path = "../../core/benches/common/frames.rs"]
mod frames;
#[path = "../../core/benches/common/stages.rs"]
mod stages;
#[path = "../../core/benches/common/tsc.rs"]
mod tsc;
use stages::{IoOnly, Tsc};
use tsc::{TscCycles, rdtsc};

/// Buffers in the bench's pool (as `core/benches/common/worker_loop.rs`).
const BUFFERS: usize = 4096;
/// Descriptors per ring (the software NICs' rings are 512 slots too).
const RING: u16 = 512;
const MAC0: [u8; 6] = [0x02, 0, 0, 0, 0xA0, 0x00];
const MAC1: [u8; 6] = [0x02, 0, 0, 0, 0xA0, 0x01];

/// What the bench needs of a model port besides its driver.
trait ModelPort {
    /// The register file behind BAR 0.
    type Dev: BarDevice;
    /// Queue 0's RX tail register (BAR 0 offset).
    const RX_TAIL: usize;
    /// Queue 0's TX tail register (BAR 0 offset).
    const TX_TAIL: usize;
    fn pci(&self) -> FakePci<Self::Dev>;
    /// Delivers `frame` from the wire; whether it landed in a descriptor.
    fn inject(&self, frame: &[u8]) -> bool;
    /// Runs the TX engines and posts held write-backs.
    fn step(&self);
    /// Takes the frames sent so far; how many.
    fn take_tx(&self) -> usize;
    /// Tail writes only record the tail; `step` runs the TX engine.
    fn pause_tx(&self);
    /// Register (reads, writes) through BAR 0 so far.
    fn register_accesses(&self) -> (u64, u64);
    /// Register `off`'s value.
    fn reg(&self, off: usize) -> u32;
    fn assert_clean(&self);
}

impl ModelPort for Ixgbe82599 {
    type Dev = ixgbe_model::Device;
    /// RDT(0), 82599 datasheet table 8-3.
    const RX_TAIL: usize = 0x01018;
    /// TDT(0).
    const TX_TAIL: usize = 0x06018;
    fn pci(&self) -> FakePci<Self::Dev> {
        Ixgbe82599::pci(self)
    }
    fn inject(&self, frame: &[u8]) -> bool {
        matches!(Ixgbe82599::inject(self, frame), ixgbe_model::RxOutcome::Delivered(_))
    }
    fn step(&self) {
        Ixgbe82599::step(self)
    }
    fn take_tx(&self) -> usize {
        Ixgbe82599::take_tx(self).len()
    }
    fn pause_tx(&self) {
        self.dev().tx_paused = true;
    }
    fn register_accesses(&self) -> (u64, u64) {
        self.dev().register_accesses
    }
    fn reg(&self, off: usize) -> u32 {
        self.dev().reg(off)
    }
    fn assert_clean(&self) {
        Ixgbe82599::assert_clean(self)
    }
}

impl ModelPort for Xl710 {
    type Dev = xl710_model::Device;
    /// QRX_TAIL of the PF's queue 0.
    const RX_TAIL: usize = xl710_model::off::QRX_TAIL;
    /// QTX_TAIL of the PF's queue 0.
    const TX_TAIL: usize = xl710_model::off::QTX_TAIL;
    fn pci(&self) -> FakePci<Self::Dev> {
        Xl710::pci(self)
    }
    fn inject(&self, frame: &[u8]) -> bool {
        matches!(Xl710::inject(self, frame), xl710_model::RxOutcome::Delivered(_))
    }
    fn step(&self) {
        Xl710::step(self)
    }
    fn take_tx(&self) -> usize {
        Xl710::take_tx(self).len()
    }
    fn pause_tx(&self) {
        self.dev().tx_paused = true;
    }
    fn register_accesses(&self) -> (u64, u64) {
        self.dev().register_accesses
    }
    fn reg(&self, off: usize) -> u32 {
        self.dev().reg(off)
    }
    fn assert_clean(&self) {
        Xl710::assert_clean(self)
    }
}

/// Two model ports with their drivers' queue 0 taken out (the drivers' own ring types:
/// what a firmware lane polls).
struct Ports<M, R, T> {
    rig: ModelRig,
    models: [M; 2],
    rx: [R; 2],
    tx: [T; 2],
}

fn ixgbe_ports() -> Ports<Ixgbe82599, impl RxQueue, impl TxQueue> {
    let mut rig = ModelRig::new(BUFFERS);
    let cfg = ixgbe::Config::default().with_rings(RING, RING);
    let (m0, mut n0) = rig.ixgbe_port(MAC0, &cfg);
    let (m1, mut n1) = rig.ixgbe_port(MAC1, &cfg);
    let ((mut r0, mut t0), (mut r1, mut t1)) = (n0.take_queues(), n1.take_queues());
    Ports { rig, models: [m0, m1], rx: [r0.remove(0), r1.remove(0)], tx: [t0.remove(0), t1.remove(0)] }
}

fn i40e_ports() -> Ports<Xl710, impl RxQueue, impl TxQueue> {
    let mut rig = ModelRig::new(BUFFERS);
    let cfg = i40e::Config::default().with_queues(1).with_ring(RING);
    let (m0, mut n0) = rig.i40e_port(MAC0, 0, &cfg);
    let (m1, mut n1) = rig.i40e_port(MAC1, 1, &cfg);
    let ((mut r0, mut t0), (mut r1, mut t1)) = (n0.take_queues(), n1.take_queues());
    Ports { rig, models: [m0, m1], rx: [r0.remove(0), r1.remove(0)], tx: [t0.remove(0), t1.remove(0)] }
}

/// Forwards 32 frames from port 0 to port 1 with `worker`: the wire before and after,
/// untimed; returns the TSC cycles of the `poll_once` in between.
fn one_batch<S: Stage, M: ModelPort, R: RxQueue, T: TxQueue>(
    p: &mut Ports<M, R, T>,
    worker: &mut Poller<S>,
    frames: &[Vec<u8>],
    next: &mut usize,
    counts: &mut (u64, u64),
) -> u64 {
    for _ in 0..BATCH_SIZE {
        assert!(p.models[0].inject(&frames[*next]), "the model must deliver every frame");
        *next = (*next + 1) % frames.len();
    }
    // Held write-backs posted (the i40e's poll-mode rule); nothing to send on port 0.
    p.models[0].step();
    let t0 = rdtsc();
    let out = worker.poll_once(&mut p.rig.pool, &mut p.rx, &mut p.tx, &Tsc);
    let cycles = rdtsc() - t0;
    black_box(out);
    // The TX engine reads the descriptors and writes DD; the next poll reclaims them.
    p.models[1].step();
    counts.0 += BATCH_SIZE as u64;
    counts.1 += p.models[1].take_tx() as u64;
    cycles
}

/// What one poll does to the model side, counted over a run of polls.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Census {
    /// Register writes per poll on (port 0, port 1): the RX tail on port 0, the TX tail
    /// on port 1.
    tail_writes: (u64, u64),
    /// The drivers' 32-bit (reads, writes) of descriptor memory per poll, through the
    /// host's emulated DMA memory (`model_host::Region`).
    dma: (u64, u64),
}

/// Counts what 512 polls do to the models and the host's DMA memory.
fn census<S: Stage, M: ModelPort, R: RxQueue, T: TxQueue>(
    p: &mut Ports<M, R, T>,
    worker: &mut Poller<S>,
    frames: &[Vec<u8>],
    next: &mut usize,
    counts: &mut (u64, u64),
) -> Census {
    const POLLS: u64 = 512;
    let regs = |p: &Ports<M, R, T>| [p.models[0].register_accesses(), p.models[1].register_accesses()];
    let (before, dma_before) = (regs(p), p.rig.host.cpu_dma_accesses.get());
    for _ in 0..POLLS {
        one_batch(p, worker, frames, next, counts);
    }
    let (after, dma_after) = (regs(p), p.rig.host.cpu_dma_accesses.get());
    // The RX/TX path reads no register (drivers/src/intel/{rx,tx}.rs): DD comes from
    // descriptor memory. Were that to change, the subtraction would miss it.
    assert_eq!((after[0].0 - before[0].0, after[1].0 - before[1].0), (0, 0), "register reads on the RX/TX path");
    let (w0, w1) = (after[0].1 - before[0].1, after[1].1 - before[1].1);
    assert!(w0 % POLLS == 0 && w1 % POLLS == 0, "tail writes vary per poll: {w0} {w1} in {POLLS} polls");
    let per_poll = |n: u64| (n + POLLS / 2) / POLLS;
    Census {
        tail_writes: (w0 / POLLS, w1 / POLLS),
        dma: (per_poll(dma_after.0 - dma_before.0), per_poll(dma_after.1 - dma_before.1)),
    }
}

fn run<S: Stage, M: ModelPort, R: RxQueue, T: TxQueue>(
    g: &mut BenchmarkGroup<'_, TscCycles>,
    name: &str,
    stage: S,
    mut p: Ports<M, R, T>,
) -> (Census, [M; 2]) {
    let frames: Vec<Vec<u8>> = (0..BATCH_SIZE as u16).map(frames::udp60).collect();
    for m in &p.models {
        m.pause_tx();
    }
    let mut worker = Poller::new(stage, PollConfig::default());
    let (mut next, mut counts) = (0usize, (0u64, 0u64));
    let census = census(&mut p, &mut worker, &frames, &mut next, &mut counts);
    g.bench_function(name, |b| {
        b.iter_custom(|iters| (0..iters).map(|_| one_batch(&mut p, &mut worker, &frames, &mut next, &mut counts)).sum())
    });
    // Whatever the last poll sent is still on port 1's ring: one more poll, no frames.
    p.models[1].step();
    counts.1 += p.models[1].take_tx() as u64;
    assert_eq!(worker.stats().drops_total(), 0, "the bench must forward every frame");
    assert_eq!(counts.0, counts.1, "every frame delivered into port 0 left port 1");
    for m in &p.models {
        m.assert_clean();
    }
    (census, p.models)
}

/// Times `writes.0` writes of port 0's RX tail and `writes.1` of port 1's TX tail (the
/// tail writes one poll makes), each with the value the register holds, through the
/// same BAR window path as the driver's tail writes; no driver code runs.
fn tail_writes_alone<M: ModelPort>(
    g: &mut BenchmarkGroup<'_, TscCycles>,
    name: &str,
    models: &[M; 2],
    writes: (u64, u64),
) {
    let rx = models[0].pci().map_bar(0, M::RX_TAIL as u64, 4).expect("RX tail window");
    let tx = models[1].pci().map_bar(0, M::TX_TAIL as u64, 4).expect("TX tail window");
    let (vr, vt) = (models[0].reg(M::RX_TAIL), models[1].reg(M::TX_TAIL));
    let write = |w: &Window<M::Dev>, v: u32, n: u64| {
        for _ in 0..n {
            w.write32(0, black_box(v));
        }
    };
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let t0 = rdtsc();
            for _ in 0..iters {
                write(&rx, vr, writes.0);
                write(&tx, vt, writes.1);
            }
            rdtsc() - t0
        })
    });
    // Rewriting a tail with its own value breaks no ordering rule.
    for m in models {
        m.assert_clean();
    }
}

/// Times `accesses.0` 32-bit reads and `accesses.1` 32-bit writes of a descriptor ring
/// in the host's emulated DMA memory (a `RefCell` borrow and a bounds check each),
/// the descriptor accesses one poll makes. Not subtracted (see docs/PERFORMANCE.md): on
/// hardware these are real memory accesses, often to lines the NIC just wrote.
fn dma_accesses_alone(g: &mut BenchmarkGroup<'_, TscCycles>, name: &str, accesses: (u64, u64)) {
    let mut rig = ModelRig::new(1);
    let ring = rig.dma.alloc(usize::from(RING) * 32, 128).expect("ring");
    let len = ring.len() / 4;
    g.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut i = 0;
            let t0 = rdtsc();
            for _ in 0..iters {
                for _ in 0..accesses.0 {
                    black_box(ring.read32(4 * i));
                    i = (i + 1) % len;
                }
                for _ in 0..accesses.1 {
                    ring.write32(4 * i, black_box(i as u32));
                    i = (i + 1) % len;
                }
            }
            rdtsc() - t0
        })
    });
}

fn intel_forward(c: &mut Criterion<TscCycles>) {
    let mut g = c.benchmark_group("intel forward (batch 32, 60 B, register models)");
    g.throughput(Throughput::Elements(BATCH_SIZE as u64));
    let egress = || Egress::new([MAC0, MAC1], Egress::DEFAULT_PEERS, None);

    // The tail writes are timed on the ports the L2 run left behind: tails where
    // forwarding put them, TX paused as in the runs.
    let (io, _) = run(&mut g, "ixgbe: io only", IoOnly, ixgbe_ports());
    let (l2, models) = run(&mut g, "ixgbe: l2 forwarder", Chain::new(Vec::new(), egress()), ixgbe_ports());
    assert_eq!(io, l2, "both stages make the same accesses");
    eprintln!("ixgbe census per poll: {io:?}");
    tail_writes_alone(&mut g, "ixgbe: model tail writes alone", &models, io.tail_writes);
    dma_accesses_alone(&mut g, "ixgbe: host DMA-memory accesses alone", io.dma);

    let (io, _) = run(&mut g, "i40e: io only", IoOnly, i40e_ports());
    let (l2, models) = run(&mut g, "i40e: l2 forwarder", Chain::new(Vec::new(), egress()), i40e_ports());
    assert_eq!(io, l2, "both stages make the same accesses");
    eprintln!("i40e census per poll: {io:?}");
    tail_writes_alone(&mut g, "i40e: model tail writes alone", &models, io.tail_writes);
    dma_accesses_alone(&mut g, "i40e: host DMA-memory accesses alone", io.dma);
    g.finish();
}

criterion_group! { name = benches; config = tsc::criterion(3, 50); targets = intel_forward }
criterion_main!(benches);
