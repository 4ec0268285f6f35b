//! Software NIC queues: in-memory [`RxQueue`] and [`TxQueue`] that obey the contract
//! of [`crate::nic`], for host tests and the simulator.
//!
//! [`SoftRxQueue`] models a receive ring of `size` descriptors, each holding a pool
//! buffer. The "wire" side ([`SoftRxQueue::inject`]) writes a frame into the next
//! posted buffer, as a device's DMA would; `rx_burst` hands filled buffers to the
//! caller and refills the ring from the pool.
//!
//! [`SoftTxQueue`] models a transmit ring of `size` slots. `tx_burst` takes frames
//! onto the ring; the wire side ([`SoftTxQueue::transmit`]) sends the oldest ones and
//! marks them done, and the next `tx_burst` or `reclaim` returns done buffers to the
//! pool. With `auto_complete` every frame is done as soon as it is taken.
//!
//! Both allocate their rings when created and never afterwards.

use alloc::collections::VecDeque;
use core::fmt;

use crate::buf::{Batch, HEADROOM, MAX_FRAME, PacketBuf, Pool};
use crate::nic::{RxQueue, RxStats, TxQueue, TxStats};

/// Why the wire could not deliver a frame into a [`SoftRxQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum InjectError {
    /// No posted buffer: the ring is full of received frames or ran short of buffers
    /// (counted in [`SoftRxQueue::device_drops`]).
    NoDescriptor,
    /// The frame is empty or longer than [`MAX_FRAME`] (counted in
    /// [`RxStats::errors`]).
    BadLength,
}

impl fmt::Display for InjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InjectError::NoDescriptor => "no posted receive buffer",
            InjectError::BadLength => "frame empty or longer than a buffer",
        })
    }
}

/// A software receive queue.
#[derive(Debug)]
pub struct SoftRxQueue {
    size: usize,
    wake: Option<crate::nic::WakeAddr>,
    posted: VecDeque<PacketBuf>,
    filled: VecDeque<PacketBuf>,
    stats: RxStats,
    device_drops: u64,
}

impl SoftRxQueue {
    /// A ring of `size` descriptors, filled from `pool` (as many as it has).
    pub fn new(pool: &mut Pool<'_>, size: usize) -> Self {
        let mut q = Self {
            size,
            wake: None,
            posted: VecDeque::with_capacity(size),
            filled: VecDeque::with_capacity(size),
            stats: RxStats::default(),
            device_drops: 0,
        };
        q.refill(pool);
        q
    }

    fn refill(&mut self, pool: &mut Pool<'_>) {
        while self.posted.len() + self.filled.len() < self.size {
            match pool.alloc() {
                Some(b) => self.posted.push_back(b),
                None => {
                    self.stats.no_buffer += 1;
                    break;
                }
            }
        }
    }

    /// The wire delivers `frame`: it lands in the next posted buffer at `HEADROOM`.
    pub fn inject(&mut self, pool: &mut Pool<'_>, frame: &[u8]) -> Result<(), InjectError> {
        if frame.is_empty() || frame.len() > MAX_FRAME {
            self.stats.errors += 1;
            return Err(InjectError::BadLength);
        }
        let Some(b) = self.posted.pop_front() else {
            self.device_drops += 1;
            return Err(InjectError::NoDescriptor);
        };
        // Cannot fail: HEADROOM + MAX_FRAME == BUF_SIZE.
        let _ = pool.set_frame(b, HEADROOM, frame.len());
        pool.frame_mut(b).copy_from_slice(frame);
        self.filled.push_back(b);
        Ok(())
    }

    /// Buffers owned by the ring (posted or holding frames not yet handed out).
    pub fn owned(&self) -> usize {
        self.posted.len() + self.filled.len()
    }

    /// Frames waiting to be handed out.
    pub fn pending(&self) -> usize {
        self.filled.len()
    }

    /// This queue with `addr` as its [`RxQueue::wake_address`] (for tests of sleepers).
    pub fn with_wake_address(mut self, addr: crate::nic::WakeAddr) -> Self {
        self.wake = Some(addr);
        self
    }

    /// Frames the wire could not deliver for lack of a posted buffer.
    pub fn device_drops(&self) -> u64 {
        self.device_drops
    }

    /// Returns every buffer the ring owns to `pool` (teardown).
    pub fn release(&mut self, pool: &mut Pool<'_>) {
        for b in self.posted.drain(..).chain(self.filled.drain(..)) {
            let _ = pool.free(b);
        }
    }
}

impl RxQueue for SoftRxQueue {
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let mut n = 0;
        while !batch.is_full() {
            let Some(b) = self.filled.pop_front() else { break };
            self.stats.packets += 1;
            self.stats.bytes += pool.len(b) as u64;
            // Cannot fail: the batch is not full.
            let _ = batch.push(b);
            n += 1;
        }
        self.refill(pool);
        n
    }

    fn rx_stats(&self) -> RxStats {
        self.stats
    }

    fn wake_address(&self) -> Option<crate::nic::WakeAddr> {
        self.wake
    }

    fn pending(&self) -> Option<usize> {
        Some(SoftRxQueue::pending(self))
    }
}

/// A software transmit queue.
#[derive(Debug)]
pub struct SoftTxQueue {
    size: usize,
    /// Frames on the ring, oldest first, with their done flag.
    ring: VecDeque<(PacketBuf, bool)>,
    auto_complete: bool,
    stats: TxStats,
}

impl SoftTxQueue {
    /// A ring of `size` slots. With `auto_complete`, frames are done as soon as they
    /// are taken (an infinitely fast wire that nobody watches).
    pub fn new(size: usize, auto_complete: bool) -> Self {
        Self { size, ring: VecDeque::with_capacity(size), auto_complete, stats: TxStats::default() }
    }

    /// The wire sends up to `max` of the oldest frames not yet sent, handing each to
    /// `sink`, and marks them done. Returns how many it sent.
    pub fn transmit(&mut self, pool: &Pool<'_>, max: usize, mut sink: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        for (b, done) in self.ring.iter_mut().filter(|(_, d)| !*d).take(max) {
            sink(pool.frame(*b));
            *done = true;
            n += 1;
        }
        n
    }

    /// Free slots on the ring (done frames still occupy theirs until reclaimed).
    pub fn room(&self) -> usize {
        self.size.saturating_sub(self.ring.len())
    }
}

impl TxQueue for SoftTxQueue {
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        self.reclaim(pool);
        let mut taken = 0;
        for &b in batch.as_slice() {
            let len = pool.len(b);
            if len == 0 || len > MAX_FRAME {
                let _ = pool.free(b);
                self.stats.errors += 1;
            } else if self.ring.len() < self.size {
                self.ring.push_back((b, self.auto_complete));
                self.stats.packets += 1;
                self.stats.bytes += len as u64;
            } else {
                break;
            }
            taken += 1;
        }
        self.stats.ring_full += (batch.len() - taken) as u64;
        batch.drain_front(taken);
        if self.auto_complete {
            self.reclaim(pool);
        }
        taken
    }

    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        let mut n = 0;
        while let Some(&(b, true)) = self.ring.front() {
            self.ring.pop_front();
            let _ = pool.free(b);
            n += 1;
        }
        n
    }

    fn in_flight(&self) -> usize {
        self.ring.len()
    }

    fn tx_stats(&self) -> TxStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BUF_SIZE;

    #[test]
    fn rx_ring_owns_buffers_and_refills() {
        let mut mem = vec![0u8; 8 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
        let mut rx = SoftRxQueue::new(&mut pool, 4);
        assert_eq!((rx.owned(), pool.in_use()), (4, 4));
        for i in 0..4u8 {
            rx.inject(&mut pool, &[i; 20]).unwrap();
        }
        assert_eq!(rx.inject(&mut pool, &[9; 20]), Err(InjectError::NoDescriptor));
        assert_eq!(rx.inject(&mut pool, &[]), Err(InjectError::BadLength));
        let mut batch = Batch::new();
        assert_eq!(rx.rx_burst(&mut pool, &mut batch), 4);
        assert_eq!(pool.frame(batch.as_slice()[2]), &[2; 20]);
        assert_eq!((rx.owned(), pool.in_use()), (4, 8));
        // The pool is empty now: the next refill runs short and is counted.
        rx.inject(&mut pool, &[1; 20]).unwrap();
        assert_eq!(rx.rx_burst(&mut pool, &mut batch), 1);
        assert_eq!(rx.rx_stats().no_buffer, 1);
        assert_eq!(rx.rx_stats().packets, 5);
        pool.free_batch(&mut batch);
        rx.release(&mut pool);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn tx_ring_backpressure_and_completion() {
        let mut mem = vec![0u8; 8 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
        let mut tx = SoftTxQueue::new(2, false);
        let mut batch = Batch::new();
        for i in 0..3u8 {
            let b = pool.alloc().unwrap();
            pool.set_len(b, 1).unwrap();
            pool.frame_mut(b)[0] = i;
            batch.push(b).unwrap();
        }
        assert_eq!(tx.tx_burst(&mut pool, &mut batch), 2);
        assert_eq!((batch.len(), tx.in_flight(), tx.tx_stats().ring_full), (1, 2, 1));
        let mut seen = Vec::new();
        assert_eq!(tx.transmit(&pool, 1, |f| seen.push(f[0])), 1);
        assert_eq!(tx.tx_burst(&mut pool, &mut batch), 1);
        assert_eq!(tx.transmit(&pool, 8, |f| seen.push(f[0])), 2);
        assert_eq!(seen, [0, 1, 2]);
        assert_eq!(tx.reclaim(&mut pool), 2);
        assert_eq!(pool.in_use(), 0);
    }
}
