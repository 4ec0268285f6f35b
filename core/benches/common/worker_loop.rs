//! The worker loop over software NICs, one batch per call, as every forwarding bench runs it.

// Each bench uses some of these.
#![allow(dead_code)]

use std::hint::black_box;

use cadence_core::buf::{BATCH_SIZE, BUF_SIZE, Pool};
use cadence_core::poll::{PollConfig, PollStats, Poller};
use cadence_core::softnic::{SoftRxQueue, SoftTxQueue};
use cadence_core::stage::Stage;

use super::stages::Tsc;
use super::tsc::rdtsc;

/// Buffers in the bench's pool.
pub const BUFFERS: usize = 4096;

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
    let r = with_poller(&mut worker, frames, body);
    (r, *worker.stats())
}

/// [`with_worker`] with the poller's configuration (e.g. without latency accounting).
pub fn with_worker_cfg<S: Stage, R>(
    stage: S,
    frames: &[Vec<u8>],
    cfg: PollConfig,
    body: impl FnOnce(&mut dyn FnMut() -> u64) -> R,
) -> (R, PollStats) {
    let mut worker = Poller::new(stage, cfg);
    let r = with_poller(&mut worker, frames, |poll| body(&mut || poll(cfg.timing)));
    (r, *worker.stats())
}

/// The loop both of the above run: `poll(timing)` sets the accounting, lets the wire deliver
/// one batch, and times one `poll_once`.
fn with_poller<S: Stage, R>(
    worker: &mut Poller<S>,
    frames: &[Vec<u8>],
    body: impl FnOnce(&mut dyn FnMut(bool) -> u64) -> R,
) -> R {
    let mut mem = vec![0u8; BUFFERS * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0x1000_0000, BUFFERS).expect("pool");
    let mut rx = [SoftRxQueue::new(&mut pool, 512), SoftRxQueue::new(&mut pool, 512)];
    let mut tx = [SoftTxQueue::new(512, true), SoftTxQueue::new(512, true)];
    let clock = Tsc;
    let mut next = 0usize;
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
