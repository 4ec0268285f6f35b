//! Moving packet handles from a producer thread on CPU 0 to a consumer thread on CPU 1,
//! burst 32, over some channel: what the hand-off bench and the peers bench's `ring` case
//! time. Each side times its own loop (its waits on the other side included) with `rdtsc`;
//! the figure is the two sides' cycles added, per object, as DPDK's `ring_perf_autotest`
//! reports its two-lcore case and `benches/peers/ring.c` measures it.

// Each bench uses its own part of this module.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use cadence_core::buf::{BATCH_SIZE, BUF_SIZE, Batch, PacketBuf, Pool};
use cadence_core::offload::handoff::{self, Consumer, Producer};

use super::pin::pin_or_warn;
use super::tsc::rdtsc;

/// Slots of every ring timed here: `benches/peers/ring.c`'s `rte_ring_create(…, 2048, …)`.
pub const RING_SLOTS: usize = 2048;

/// The two ends of a channel of packet handles.
pub trait Channel {
    type Tx: Send;
    type Rx: Send;
    fn pair() -> (Self::Tx, Self::Rx);
    /// Appends from the front of `bufs`; how many went in.
    fn push(tx: &mut Self::Tx, bufs: &[PacketBuf]) -> usize;
    /// Appends up to `batch.room()`; how many came out.
    fn pop(rx: &mut Self::Rx, batch: &mut Batch) -> usize;
}

/// The hand-off ring (`core::offload::handoff`), 2048 slots.
pub struct Ring;

impl Channel for Ring {
    type Tx = Producer;
    type Rx = Consumer;
    fn pair() -> (Producer, Consumer) {
        handoff::try_ring(RING_SLOTS).expect("a valid capacity")
    }
    #[inline]
    fn push(tx: &mut Producer, bufs: &[PacketBuf]) -> usize {
        tx.push_burst(bufs)
    }
    #[inline]
    fn pop(rx: &mut Consumer, batch: &mut Batch) -> usize {
        rx.pop_burst(batch)
    }
}

/// The baseline: a `std::sync::Mutex<VecDeque>` bounded at 2048, one lock per burst.
pub struct MutexDeque;

type Shared = std::sync::Arc<Mutex<VecDeque<PacketBuf>>>;

impl Channel for MutexDeque {
    type Tx = Shared;
    type Rx = Shared;
    fn pair() -> (Shared, Shared) {
        let q = std::sync::Arc::new(Mutex::new(VecDeque::with_capacity(RING_SLOTS)));
        (q.clone(), q)
    }
    #[inline]
    fn push(tx: &mut Shared, bufs: &[PacketBuf]) -> usize {
        let mut q = tx.lock().expect("not poisoned");
        let n = bufs.len().min(RING_SLOTS - q.len());
        q.extend(&bufs[..n]);
        n
    }
    #[inline]
    fn pop(rx: &mut Shared, batch: &mut Batch) -> usize {
        let mut q = rx.lock().expect("not poisoned");
        let n = batch.room().min(q.len());
        for b in q.drain(..n) {
            let _ = batch.push(b);
        }
        n
    }
}

/// `BATCH_SIZE` handles of a small pool, pushed again and again (like `ring.c`'s `objs`:
/// the ring carries handles, it never looks at the buffers).
pub fn burst_handles() -> Vec<PacketBuf> {
    let mem = Box::leak(vec![0u8; BATCH_SIZE * BUF_SIZE].into_boxed_slice());
    let mut pool = Pool::try_new(mem, 0, BATCH_SIZE).expect("pool");
    let v = (0..BATCH_SIZE).map(|_| pool.alloc().expect("buffer")).collect();
    std::mem::forget(pool);
    v
}

/// A consumer thread on CPU 1 that, per sample, pops `objs` handles and times it; the
/// producer is the calling thread (pin it to CPU 0 first).
pub struct Pair<C: Channel> {
    tx: C::Tx,
    burst: Vec<PacketBuf>,
    go: std::sync::Arc<AtomicU32>,
    done: std::sync::Arc<AtomicU32>,
    cons_cycles: std::sync::Arc<AtomicU64>,
    objs: std::sync::Arc<AtomicU64>,
    seq: u32,
    consumer: Option<std::thread::JoinHandle<()>>,
}

const STOP: u32 = u32::MAX;

impl<C: Channel + 'static> Pair<C> {
    /// Starts the consumer thread (pinned to CPU 1).
    pub fn start(who: &'static str) -> Self {
        let (tx, mut rx) = C::pair();
        let go = std::sync::Arc::new(AtomicU32::new(0));
        let done = std::sync::Arc::new(AtomicU32::new(0));
        let cons_cycles = std::sync::Arc::new(AtomicU64::new(0));
        let objs = std::sync::Arc::new(AtomicU64::new(0));
        let (g, d, cc, o) = (go.clone(), done.clone(), cons_cycles.clone(), objs.clone());
        let consumer = std::thread::spawn(move || {
            pin_or_warn(1, who);
            let mut batch = Batch::new();
            let mut seq = 0;
            loop {
                while g.load(Ordering::Acquire) == seq {
                    std::hint::spin_loop();
                }
                seq = g.load(Ordering::Acquire);
                if seq == STOP {
                    return;
                }
                let want = o.load(Ordering::Relaxed);
                let t0 = rdtsc();
                let mut got = 0u64;
                while got < want {
                    got += C::pop(&mut rx, &mut batch) as u64;
                    batch.clear();
                }
                cc.store(rdtsc() - t0, Ordering::Relaxed);
                d.store(seq, Ordering::Release);
            }
        });
        Self { tx, burst: burst_handles(), go, done, cons_cycles, objs, seq: 0, consumer: Some(consumer) }
    }

    /// Moves `objs` handles (a multiple of 32) through the channel; returns the producer's
    /// cycles plus the consumer's.
    pub fn sample(&mut self, objs: u64) -> u64 {
        self.objs.store(objs, Ordering::Relaxed);
        self.seq += 1;
        self.go.store(self.seq, Ordering::Release);
        let t0 = rdtsc();
        let mut put = 0u64;
        while put < objs {
            put += C::push(&mut self.tx, &self.burst) as u64;
        }
        let prod = rdtsc() - t0;
        while self.done.load(Ordering::Acquire) != self.seq {
            std::hint::spin_loop();
        }
        prod + self.cons_cycles.load(Ordering::Relaxed)
    }
}

impl<C: Channel> Drop for Pair<C> {
    fn drop(&mut self) {
        self.go.store(STOP, Ordering::Release);
        if let Some(c) = self.consumer.take() {
            let _ = c.join();
        }
    }
}
