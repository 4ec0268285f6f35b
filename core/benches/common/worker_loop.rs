//! The worker loop over software NICs, one batch per call, as every forwarding bench runs it.

// Each bench uses some of these.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::hint::black_box;

use cadence_core::buf::{BATCH_SIZE, BUF_SIZE, PacketBuf, Pool};
use cadence_core::poll::{PollConfig, PollStats, Poller};
use cadence_core::softnic::{SoftRxQueue, SoftTxQueue};
use cadence_core::stage::Stage;
use cadence_core::time::{Clock, Instant, TickRate};

use super::stages::Tsc;
use super::tsc::rdtsc;

/// Buffers in the bench's pool.
pub const BUFFERS: usize = 4096;

/// Frames circulating through a [`Wire::Ring`] loopback (l3fwd's peer circulates 512 mbufs).
pub const RING_IN_FLIGHT: usize = 512;

/// The software NIC under the worker, chosen to match the DPDK peer's virtual device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// As `net_null` (testpmd's peers): each receive ring refills from the pool as it hands
    /// frames out, and each transmit queue frees a frame as it takes it — one pool allocation
    /// and one free per packet inside the measurement, as `net_null` allocates and frees an
    /// mbuf.
    Null,
    /// As `net_ring` (l3fwd's peer): a loopback. The receive ring is fed with the buffers the
    /// transmit queues handed off (`SoftRxQueue::fed`, `SoftTxQueue::hand_off`), so no
    /// buffer is allocated or freed inside the measurement, as l3fwd over `net_ring` neither
    /// allocates nor frees an mbuf.
    Ring,
}

/// Runs `body` with a `poll` function over a [`Poller`] running `stage` on two software
/// ports (512-slot rings, TX done at once). Each call of `poll` lets the wire deliver one batch
/// of [`BATCH_SIZE`] frames, cycled from `frames`, into port 0's RX ring (outside the
/// measurement: a NIC's DMA does this), then returns the TSC cycles of one
/// `Poller::poll_once` (receive, stage, transmit on both ports). Returns `body`'s result and
/// the worker's counters.
pub fn with_worker<S: Stage, R>(
    stage: S,
    frames: &[Vec<u8>],
    body: impl FnOnce(&mut dyn FnMut() -> u64) -> R,
) -> (R, PollStats) {
    with_worker_cfg(stage, frames, PollConfig::default(), body)
}

/// [`with_worker`] whose `poll` takes whether this poll does the latency accounting
/// ([`Poller::set_timing`]): one worker, one pool, one set of tables for both arms of a
/// paired comparison.
pub fn with_worker_ab<S: Stage, R>(
    stage: S,
    frames: &[Vec<u8>],
    body: impl FnOnce(&mut dyn FnMut(bool) -> u64) -> R,
) -> (R, PollStats) {
    let mut worker = Poller::new(stage, PollConfig::default());
    let r = with_poller(&mut worker, Wire::Null, frames, body);
    (r, *worker.stats())
}

/// [`with_worker`] with the poller's configuration (e.g. without latency accounting).
pub fn with_worker_cfg<S: Stage, R>(
    stage: S,
    frames: &[Vec<u8>],
    cfg: PollConfig,
    body: impl FnOnce(&mut dyn FnMut() -> u64) -> R,
) -> (R, PollStats) {
    worker_on(Wire::Null, stage, frames, cfg, body)
}

/// [`with_worker`] over the software NIC `wire`.
pub fn with_worker_on<S: Stage, R>(
    wire: Wire,
    stage: S,
    frames: &[Vec<u8>],
    body: impl FnOnce(&mut dyn FnMut() -> u64) -> R,
) -> (R, PollStats) {
    worker_on(wire, stage, frames, PollConfig::default(), body)
}

/// [`with_worker_cfg`] and [`with_worker_on`]: a worker with `cfg` over the software NIC
/// `wire`.
fn worker_on<S: Stage, R>(
    wire: Wire,
    stage: S,
    frames: &[Vec<u8>],
    cfg: PollConfig,
    body: impl FnOnce(&mut dyn FnMut() -> u64) -> R,
) -> (R, PollStats) {
    let mut worker = Poller::new(stage, cfg);
    let r = with_poller(&mut worker, wire, frames, |poll| body(&mut || poll(cfg.timing)));
    (r, *worker.stats())
}

/// Two software ports over a loopback ([`Wire::Ring`]) and the wire on their far side: what
/// the worker polls (`rx`, `tx`) and what delivers frames to it ([`Loopback::offer`], outside
/// any measurement: a NIC's DMA does this).
pub struct Loopback {
    pub rx: [SoftRxQueue; 2],
    pub tx: [SoftTxQueue; 2],
    /// The buffers the transmit queues handed back, oldest first.
    back: VecDeque<PacketBuf>,
}

impl Loopback {
    /// Two ports of 512-slot rings; port 0's ring holds [`RING_IN_FLIGHT`] − [`BATCH_SIZE`]
    /// frames of `frames` (cycled from `*next`) before the first poll, as l3fwd's peer
    /// injects 512 mbufs into `net_ring`.
    pub fn new(pool: &mut Pool<'_>, frames: &[Vec<u8>], next: &mut usize) -> Self {
        let mut p = Self {
            rx: [SoftRxQueue::fed(512), SoftRxQueue::fed(512)],
            tx: [SoftTxQueue::new(512, false), SoftTxQueue::new(512, false)],
            back: VecDeque::with_capacity(BUFFERS),
        };
        let (first, n) = (*next, RING_IN_FLIGHT - BATCH_SIZE);
        p.offer(pool, (0..n).map(|k| &frames[(first + k) % frames.len()]));
        *next = (first + n) % frames.len();
        p
    }

    /// The wire takes back what both ports transmitted, for its next deliveries. Once per
    /// poll, before that poll's frames are offered.
    pub fn turn(&mut self, pool: &mut Pool<'_>) {
        for q in &mut self.tx {
            q.hand_off(pool, |b| self.back.push_back(b));
        }
    }

    /// The wire delivers `frames` into port 0, in order, at the ring's tail in the oldest
    /// buffer handed back (from the pool only when none is: at the start, and for frames the
    /// stage dropped). A frame the ring has no room for is not delivered (as a device drops
    /// it).
    pub fn offer<'f>(&mut self, pool: &mut Pool<'_>, frames: impl IntoIterator<Item = &'f Vec<u8>>) {
        for f in frames {
            let Some(b) = self.back.pop_front().or_else(|| pool.alloc()) else { return };
            if let Err((_, b)) = self.rx[0].deliver(pool, b, f) {
                self.back.push_front(b);
            }
        }
    }
}

/// The loop all of the above run: `poll(timing)` sets the accounting, lets the wire deliver
/// one batch, and times one `poll_once`. The same frames arrive whatever the
/// wire; over [`Wire::Ring`] a frame waits on the ring for about `RING_IN_FLIGHT /
/// BATCH_SIZE` polls, so the worker reads it as a circulating frame, not one written just
/// before.
fn with_poller<S: Stage, R>(
    worker: &mut Poller<S>,
    wire: Wire,
    frames: &[Vec<u8>],
    body: impl FnOnce(&mut dyn FnMut(bool) -> u64) -> R,
) -> R {
    let mut mem = vec![0u8; BUFFERS * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0x1000_0000, BUFFERS).expect("pool");
    let mut next = 0usize;
    match wire {
        // The loop the earlier figures were measured with, compiled the same way.
        Wire::Null => {
            let mut rx = [SoftRxQueue::new(&mut pool, 512), SoftRxQueue::new(&mut pool, 512)];
            let mut tx = [SoftTxQueue::new(512, true), SoftTxQueue::new(512, true)];
            let clock = Tsc;
            let mut poll = |timing: bool| {
                worker.set_timing(timing);
                for _ in 0..BATCH_SIZE {
                    let _ = rx[0].inject(&mut pool, &frames[next]);
                    next = (next + 1) % frames.len();
                }
                let t0 = rdtsc();
                let out = worker.poll_once(&mut pool, &mut rx, &mut tx, &clock);
                let cycles = rdtsc() - t0;
                black_box(out);
                cycles
            };
            body(&mut poll)
        }
        Wire::Ring => {
            let mut ports = Loopback::new(&mut pool, frames, &mut next);
            // Another clock type, so that this `poll_once` is its own copy (one caller each,
            // both inlined).
            let clock = RingTsc;
            let mut poll = |timing: bool| {
                worker.set_timing(timing);
                ports.turn(&mut pool);
                let first = next;
                ports.offer(&mut pool, (0..BATCH_SIZE).map(|k| &frames[(first + k) % frames.len()]));
                next = (next + BATCH_SIZE) % frames.len();
                let t0 = rdtsc();
                let out = worker.poll_once(&mut pool, &mut ports.rx, &mut ports.tx, &clock);
                let cycles = rdtsc() - t0;
                black_box(out);
                cycles
            };
            body(&mut poll)
        }
    }
}

/// [`Tsc`] under another name (see [`with_poller`]).
struct RingTsc;

impl Clock for RingTsc {
    fn now(&self) -> Instant {
        Tsc.now()
    }
    fn rate(&self) -> TickRate {
        Tsc.rate()
    }
}
