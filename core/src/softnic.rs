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
//!
//! A loopback pair, as DPDK's `net_ring` is one: [`SoftRxQueue::fed`] makes a receive ring
//! that is never refilled from the pool — the wire posts buffers it already holds, frames in
//! them ([`SoftRxQueue::deliver`]) — and [`SoftTxQueue::hand_off`] gives the wire the frames a
//! transmit ring holds instead of freeing them. Buffers then circulate between the two
//! without a pool allocation or free on the dataplane's side, which is what a peer over
//! `net_ring` measures (DPDK's l3fwd there neither allocates nor frees an mbuf).

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

/// A ring of buffer handles with free-running `u32` indices: slot `i` is `slots[i & mask]`.
/// The capacity is a power of two at least the queue's size, so the index arithmetic is a mask
/// and a wrapping subtraction, as in a device's descriptor ring.
#[derive(Debug)]
struct Ring {
    slots: alloc::boxed::Box<[PacketBuf]>,
    mask: u32,
}

impl Ring {
    /// Room for `size` handles (at least 1, at most 2^31).
    fn new(size: usize) -> Self {
        let cap = size.clamp(1, 1 << 31).next_power_of_two();
        Self { slots: alloc::vec![PacketBuf::from_raw(0); cap].into_boxed_slice(), mask: (cap - 1) as u32 }
    }

    #[inline(always)]
    fn get(&self, i: u32) -> PacketBuf {
        // The mask keeps the index inside the slice: the fallback is never taken.
        self.slots.get((i & self.mask) as usize).copied().unwrap_or(PacketBuf::from_raw(0))
    }

    #[inline(always)]
    fn set(&mut self, i: u32, b: PacketBuf) {
        if let Some(s) = self.slots.get_mut((i & self.mask) as usize) {
            *s = b;
        }
    }
}

/// A software receive queue: `size` descriptors on a ring. From `head` on: frames the wire
/// delivered and the caller has not taken (`head..filled`), then posted empty buffers
/// (`filled..posted`); `posted - head` never exceeds `size`.
#[derive(Debug)]
pub struct SoftRxQueue {
    size: u32,
    wake: Option<crate::nic::WakeAddr>,
    ring: Ring,
    head: u32,
    filled: u32,
    posted: u32,
    stats: RxStats,
    device_drops: u64,
    /// How many descriptors `rx_burst` keeps posted with pool buffers: `size`, or 0 for a
    /// ring the wire feeds ([`Self::fed`]), which then takes nothing from the pool.
    post_to: u32,
}

impl SoftRxQueue {
    /// A ring of `size` descriptors (at most 2^31), filled from `pool` (as many as it has).
    pub fn new(pool: &mut Pool<'_>, size: usize) -> Self {
        let size = size.min(1 << 31);
        let mut q = Self::empty(size, size);
        q.refill(pool);
        q
    }

    /// A ring of `size` descriptors (at most 2^31) that the wire feeds with its own buffers
    /// ([`Self::deliver`]) and that never takes one from the pool: the receive side of a
    /// loopback, as DPDK's `net_ring` (what a queue hands out, the wire gives back through
    /// a transmit queue's [`SoftTxQueue::hand_off`]). It starts empty; [`Self::inject`] finds
    /// no posted buffer in it.
    pub fn fed(size: usize) -> Self {
        Self::empty(size.min(1 << 31), 0)
    }

    /// A ring of `size` descriptors holding nothing, which keeps `post_to` of them posted.
    fn empty(size: usize, post_to: usize) -> Self {
        Self {
            size: size as u32,
            wake: None,
            ring: Ring::new(size),
            head: 0,
            filled: 0,
            posted: 0,
            stats: RxStats::default(),
            device_drops: 0,
            post_to: post_to as u32,
        }
    }

    #[inline]
    fn refill(&mut self, pool: &mut Pool<'_>) {
        while self.posted.wrapping_sub(self.head) < self.post_to {
            match pool.alloc() {
                Some(b) => {
                    self.ring.set(self.posted, b);
                    self.posted = self.posted.wrapping_add(1);
                }
                None => {
                    self.stats.no_buffer += 1;
                    break;
                }
            }
        }
    }

    /// The wire delivers `frame`: it lands in the next posted buffer at `HEADROOM`.
    #[inline]
    pub fn inject(&mut self, pool: &mut Pool<'_>, frame: &[u8]) -> Result<(), InjectError> {
        if frame.is_empty() || frame.len() > MAX_FRAME {
            self.stats.errors += 1;
            return Err(InjectError::BadLength);
        }
        if self.filled == self.posted {
            self.device_drops += 1;
            return Err(InjectError::NoDescriptor);
        }
        let b = self.ring.get(self.filled);
        self.filled = self.filled.wrapping_add(1);
        write_frame(pool, b, frame);
        Ok(())
    }

    /// The wire delivers `frame` in `b`, a buffer it holds (one a transmit queue handed off, or
    /// one from the pool): `b` goes onto the ring behind the frames already there. Only a
    /// [`Self::fed`] ring takes it; on a refilling ring, or a full one, `b` comes back with
    /// [`InjectError::NoDescriptor`] (counted in [`Self::device_drops`]), and with
    /// [`InjectError::BadLength`] for an empty or too long frame (counted in
    /// [`RxStats::errors`]).
    #[inline]
    pub fn deliver(&mut self, pool: &mut Pool<'_>, b: PacketBuf, frame: &[u8]) -> Result<(), (InjectError, PacketBuf)> {
        if frame.is_empty() || frame.len() > MAX_FRAME {
            self.stats.errors += 1;
            return Err((InjectError::BadLength, b));
        }
        if self.post_to != 0 || self.posted.wrapping_sub(self.head) >= self.size {
            self.device_drops += 1;
            return Err((InjectError::NoDescriptor, b));
        }
        write_frame(pool, b, frame);
        self.ring.set(self.posted, b);
        self.posted = self.posted.wrapping_add(1);
        self.filled = self.posted;
        Ok(())
    }

    /// Buffers owned by the ring (posted or holding frames not yet handed out).
    pub fn owned(&self) -> usize {
        self.posted.wrapping_sub(self.head) as usize
    }

    /// Frames waiting to be handed out.
    pub fn pending(&self) -> usize {
        self.filled.wrapping_sub(self.head) as usize
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
        while self.head != self.posted {
            let _ = pool.free(self.ring.get(self.head));
            self.head = self.head.wrapping_add(1);
        }
        self.filled = self.head;
    }
}

/// The wire writes `frame` (checked: at most [`MAX_FRAME`] bytes) into `b` at `HEADROOM`.
#[inline(always)]
fn write_frame(pool: &mut Pool<'_>, b: PacketBuf, frame: &[u8]) {
    // Cannot fail: HEADROOM + MAX_FRAME == BUF_SIZE.
    let _ = pool.set_frame(b, HEADROOM, frame.len());
    pool.frame_mut(b).copy_from_slice(frame);
}

impl RxQueue for SoftRxQueue {
    #[inline]
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let n = (self.filled.wrapping_sub(self.head) as usize).min(batch.room());
        for _ in 0..n {
            let b = self.ring.get(self.head);
            self.head = self.head.wrapping_add(1);
            self.stats.bytes += pool.len(b) as u64;
            // Cannot fail: `n` is at most the batch's room.
            let _ = batch.push(b);
        }
        self.stats.packets += n as u64;
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

/// A software transmit queue: `size` slots on a ring. From `head` on: frames the wire has
/// sent and the next `tx_burst` or `reclaim` frees (`head..sent`), then frames waiting for the
/// wire (`sent..tail`).
#[derive(Debug)]
pub struct SoftTxQueue {
    size: u32,
    ring: Ring,
    head: u32,
    sent: u32,
    tail: u32,
    auto_complete: bool,
    stats: TxStats,
}

impl SoftTxQueue {
    /// A ring of `size` slots (at most 2^31). With `auto_complete`, frames are done as soon as
    /// they are taken (an infinitely fast wire that nobody watches).
    pub fn new(size: usize, auto_complete: bool) -> Self {
        let size = size.min(1 << 31);
        Self {
            size: size as u32,
            ring: Ring::new(size),
            head: 0,
            sent: 0,
            tail: 0,
            auto_complete,
            stats: TxStats::default(),
        }
    }

    /// The wire sends up to `max` of the oldest frames not yet sent, handing each to
    /// `sink`, and marks them done. Returns how many it sent.
    pub fn transmit(&mut self, pool: &Pool<'_>, max: usize, mut sink: impl FnMut(&[u8])) -> usize {
        let n = (self.tail.wrapping_sub(self.sent) as usize).min(max);
        for _ in 0..n {
            sink(pool.frame(self.ring.get(self.sent)));
            self.sent = self.sent.wrapping_add(1);
        }
        n
    }

    /// The wire takes every frame waiting on the ring and hands each buffer to `sink`, oldest
    /// first: the buffer is the wire's now (it is not freed), for a loopback to deliver again
    /// ([`SoftRxQueue::deliver`]). Frames already sent and done are freed first, as
    /// [`TxQueue::reclaim`] does. Returns how many it handed off.
    pub fn hand_off(&mut self, pool: &mut Pool<'_>, mut sink: impl FnMut(PacketBuf)) -> usize {
        self.reclaim(pool);
        let n = self.tail.wrapping_sub(self.sent) as usize;
        while self.sent != self.tail {
            sink(self.ring.get(self.sent));
            self.sent = self.sent.wrapping_add(1);
        }
        self.head = self.sent;
        n
    }

    /// Free slots on the ring (done frames still occupy theirs until reclaimed).
    pub fn room(&self) -> usize {
        self.size.saturating_sub(self.tail.wrapping_sub(self.head)) as usize
    }
}

impl TxQueue for SoftTxQueue {
    #[inline]
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        if self.auto_complete {
            // Every frame is sent and done as soon as it is taken: it never waits on the ring
            // (what `net_null`'s transmit does with an mbuf).
            for &b in batch.as_slice() {
                let len = pool.len(b);
                if len == 0 || len > MAX_FRAME {
                    self.stats.errors += 1;
                } else {
                    self.stats.packets += 1;
                    self.stats.bytes += len as u64;
                }
                let _ = pool.free(b);
            }
            let taken = batch.len();
            batch.clear();
            return taken;
        }
        // Counts in locals, added to the queue's once per burst.
        let (mut packets, mut bytes, mut errors) = (0u64, 0u64, 0u64);
        self.reclaim(pool);
        let (head, size, mut tail) = (self.head, self.size, self.tail);
        let mut taken = 0;
        for &b in batch.as_slice() {
            // A frame over several buffers goes on the ring as its first, counted by its first
            // buffer's bytes (the wire's side reads it whole: `Pool::copy_frame`).
            let len = pool.len(b);
            if len == 0 || len > MAX_FRAME {
                let _ = pool.free(b);
                errors += 1;
            } else if tail.wrapping_sub(head) < size {
                self.ring.set(tail, b);
                tail = tail.wrapping_add(1);
                packets += 1;
                bytes += len as u64;
            } else {
                break;
            }
            taken += 1;
        }
        self.tail = tail;
        self.stats.packets += packets;
        self.stats.bytes += bytes;
        self.stats.errors += errors;
        self.stats.ring_full += (batch.len() - taken) as u64;
        batch.drain_front(taken);
        taken
    }

    #[inline]
    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        let n = self.sent.wrapping_sub(self.head) as usize;
        while self.head != self.sent {
            let _ = pool.free(self.ring.get(self.head));
            self.head = self.head.wrapping_add(1);
        }
        n
    }

    fn in_flight(&self) -> usize {
        self.tail.wrapping_sub(self.head) as usize
    }

    fn tx_stats(&self) -> TxStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buf::BUF_SIZE;

    /// A batch of `n` one-byte frames from `pool`, frame `i` holding byte `i`.
    fn one_byte_frames(pool: &mut Pool<'_>, n: u8) -> Batch {
        let mut batch = Batch::new();
        for i in 0..n {
            let b = pool.alloc().unwrap();
            pool.set_len(b, 1).unwrap();
            pool.frame_mut(b)[0] = i;
            batch.push(b).unwrap();
        }
        batch
    }

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
        let mut batch = one_byte_frames(&mut pool, 3);
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

    #[test]
    fn an_auto_completing_tx_queue_frees_at_once_and_counts_bad_lengths() {
        let mut mem = vec![0u8; 8 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
        let mut tx = SoftTxQueue::new(2, true);
        let mut batch = Batch::new();
        for len in [60, 0, 100] {
            let b = pool.alloc().unwrap();
            pool.set_len(b, len).unwrap();
            batch.push(b).unwrap();
        }
        // More frames than the ring has slots: none waits, so all are taken.
        assert_eq!(tx.tx_burst(&mut pool, &mut batch), 3);
        let st = tx.tx_stats();
        assert_eq!((st.packets, st.bytes, st.errors, st.ring_full), (2, 160, 1, 0));
        assert_eq!((batch.len(), tx.in_flight(), tx.room(), pool.in_use()), (0, 0, 2, 0));
    }

    #[test]
    fn a_fed_ring_and_a_hand_off_circulate_buffers_without_the_pool() {
        let mut mem = vec![0u8; 8 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
        let mut rx = SoftRxQueue::fed(3);
        // A fed ring starts empty and takes nothing from the pool.
        assert_eq!((rx.owned(), pool.in_use()), (0, 0));
        assert_eq!(rx.inject(&mut pool, &[1; 20]), Err(InjectError::NoDescriptor));
        let bufs: Vec<PacketBuf> = (0..4).map(|_| pool.alloc().unwrap()).collect();
        for (i, &b) in bufs.iter().take(3).enumerate() {
            rx.deliver(&mut pool, b, &[i as u8; 30]).unwrap();
        }
        // Full: the buffer comes back to the wire, counted.
        assert_eq!(rx.deliver(&mut pool, bufs[3], &[9; 30]), Err((InjectError::NoDescriptor, bufs[3])));
        assert_eq!(rx.device_drops(), 2);
        assert_eq!(rx.deliver(&mut pool, bufs[3], &[]), Err((InjectError::BadLength, bufs[3])));
        assert_eq!(rx.rx_stats().errors, 1);
        let mut batch = Batch::new();
        assert_eq!(rx.rx_burst(&mut pool, &mut batch), 3);
        assert_eq!(batch.as_slice(), &bufs[..3]);
        assert_eq!((pool.frame(bufs[1]), rx.owned(), pool.in_use()), (&[1u8; 30][..], 0, 4));
        let st = rx.rx_stats();
        assert_eq!((st.packets, st.bytes, st.no_buffer), (3, 90, 0));
        // The transmit side hands the frames to the wire in order and frees none.
        let mut tx = SoftTxQueue::new(4, false);
        assert_eq!(tx.tx_burst(&mut pool, &mut batch), 3);
        let mut back = Vec::new();
        assert_eq!(tx.hand_off(&mut pool, |b| back.push(b)), 3);
        assert_eq!((back.as_slice(), tx.in_flight(), tx.room(), pool.in_use()), (&bufs[..3], 0, 4, 4));
        assert_eq!(tx.hand_off(&mut pool, |b| back.push(b)), 0);
        // The same buffers go round again.
        for (i, &b) in back.iter().enumerate() {
            rx.deliver(&mut pool, b, &[10 + i as u8; 40]).unwrap();
        }
        assert_eq!(rx.rx_burst(&mut pool, &mut batch), 3);
        assert_eq!(pool.frame(batch.as_slice()[2]), &[12; 40]);
        assert_eq!(rx.rx_stats().bytes, 210);
        // A refilling ring posts its own buffers: the wire cannot feed it.
        let mut refilling = SoftRxQueue::new(&mut pool, 2);
        assert_eq!(refilling.deliver(&mut pool, bufs[3], &[1; 20]), Err((InjectError::NoDescriptor, bufs[3])));
        pool.free_batch(&mut batch);
        let _ = pool.free(bufs[3]);
        refilling.release(&mut pool);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn a_hand_off_frees_what_the_wire_already_sent() {
        let mut mem = vec![0u8; 8 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 8).unwrap();
        let mut tx = SoftTxQueue::new(4, false);
        let mut batch = one_byte_frames(&mut pool, 3);
        assert_eq!(tx.tx_burst(&mut pool, &mut batch), 3);
        let mut sent = Vec::new();
        assert_eq!(tx.transmit(&pool, 1, |f| sent.push(f[0])), 1);
        let mut back = Vec::new();
        assert_eq!(tx.hand_off(&mut pool, |b| back.push(b)), 2);
        // The sent frame went back to the pool; the two waiting ones are the wire's.
        assert_eq!((sent.as_slice(), back.len(), pool.in_use(), tx.in_flight()), (&[0u8][..], 2, 2, 0));
        assert_eq!(pool.frame(back[0])[0], 1);
        assert_eq!(pool.frame(back[1])[0], 2);
        for b in back {
            pool.free(b).unwrap();
        }
        assert_eq!(pool.in_use(), 0);
    }

    proptest::proptest! {
        #![proptest_config(crate::testing::proptest_config(64))]
        /// Against a model (two `VecDeque`s): every frame the wire injects comes out of
        /// `rx_burst` once, in order, while the ring holds at most `size` buffers; every frame
        /// taken by `tx_burst` is sent once, in order, and freed after it was sent; sizes that
        /// are not powers of two included. The pool ends full.
        #[test]
        fn rings_keep_order_and_buffers_against_a_model(
            rx_size in 1usize..9,
            tx_size in 1usize..9,
            ops in proptest::collection::vec((0u8..4, 1usize..6), 1..200),
        ) {
            use std::collections::VecDeque;
            let mut mem = vec![0u8; 32 * BUF_SIZE];
            let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
            let mut rx = SoftRxQueue::new(&mut pool, rx_size);
            let mut tx = SoftTxQueue::new(tx_size, false);
            let (mut next, mut wire_in, mut wire_out) = (0u8, VecDeque::new(), Vec::new());
            let mut taken = Vec::new();
            let mut held = Batch::new();
            for (op, n) in ops {
                match op {
                    0 => for _ in 0..n {
                        match rx.inject(&mut pool, &[next; 20]) {
                            Ok(()) => { wire_in.push_back(next); next = next.wrapping_add(1); }
                            Err(e) => proptest::prop_assert_eq!(e, InjectError::NoDescriptor),
                        }
                    },
                    1 => {
                        let got = rx.rx_burst(&mut pool, &mut held);
                        for &b in &held.as_slice()[held.len() - got..] {
                            let f = pool.frame(b)[0];
                            proptest::prop_assert_eq!(Some(f), wire_in.pop_front());
                            taken.push(f);
                        }
                    }
                    2 => { tx.tx_burst(&mut pool, &mut held); }
                    _ => { tx.transmit(&pool, n, |f| wire_out.push(f[0])); }
                }
                proptest::prop_assert!(rx.owned() <= rx_size && tx.in_flight() <= tx_size);
                proptest::prop_assert_eq!(rx.pending(), wire_in.len());
            }
            // Drain: everything taken from rx leaves on tx, in order.
            while !held.is_empty() || tx.in_flight() > 0 {
                tx.tx_burst(&mut pool, &mut held);
                tx.transmit(&pool, usize::MAX, |f| wire_out.push(f[0]));
                tx.reclaim(&mut pool);
            }
            proptest::prop_assert_eq!(&wire_out, &taken);
            rx.release(&mut pool);
            proptest::prop_assert_eq!(pool.in_use(), 0);
        }

        /// A loopback against a model: frames the wire delivers into a fed ring come out of
        /// `rx_burst` once and in order, what `tx_burst` takes is handed back to the wire once
        /// and in order, and the pool is never touched by either queue: the buffers in use are
        /// exactly those the wire, the rings and the caller hold.
        #[test]
        fn a_loopback_keeps_order_and_never_touches_the_pool(
            rx_size in 1usize..9,
            tx_size in 1usize..9,
            ops in proptest::collection::vec((0u8..4, 1usize..6), 1..200),
        ) {
            use std::collections::VecDeque;
            let mut mem = vec![0u8; 32 * BUF_SIZE];
            let mut pool = Pool::try_new(&mut mem, 0, 32).unwrap();
            let mut rx = SoftRxQueue::fed(rx_size);
            let mut tx = SoftTxQueue::new(tx_size, false);
            // The wire's buffers: six of the pool's, going round.
            let mut wire: VecDeque<PacketBuf> = (0..6).map(|_| pool.alloc().unwrap()).collect();
            let (mut next, mut on_rx, mut taken, mut out) = (0u8, VecDeque::new(), Vec::new(), Vec::new());
            let mut handed = Vec::new();
            let mut held = Batch::new();
            for (op, n) in ops {
                match op {
                    0 => for _ in 0..n {
                        let Some(b) = wire.pop_front() else { break };
                        match rx.deliver(&mut pool, b, &[next; 20]) {
                            Ok(()) => { on_rx.push_back(next); next = next.wrapping_add(1); }
                            Err((e, b)) => {
                                proptest::prop_assert_eq!(e, InjectError::NoDescriptor);
                                proptest::prop_assert_eq!(rx.owned(), rx_size);
                                wire.push_front(b);
                                break;
                            }
                        }
                    },
                    1 => {
                        let got = rx.rx_burst(&mut pool, &mut held);
                        for &b in &held.as_slice()[held.len() - got..] {
                            let f = pool.frame(b)[0];
                            proptest::prop_assert_eq!(Some(f), on_rx.pop_front());
                            taken.push(f);
                        }
                    }
                    2 => { tx.tx_burst(&mut pool, &mut held); }
                    _ => {
                        tx.hand_off(&mut pool, |b| handed.push(b));
                        for b in handed.drain(..) {
                            out.push(pool.frame(b)[0]);
                            wire.push_back(b);
                        }
                    }
                }
                // The wire's, the rings' and the caller's buffers are all there are.
                proptest::prop_assert_eq!(pool.in_use(), 6);
                proptest::prop_assert_eq!(wire.len() + rx.owned() + held.len() + tx.in_flight(), 6);
                proptest::prop_assert!(rx.owned() <= rx_size && tx.in_flight() <= tx_size);
            }
            // Drain: everything taken from rx came back to the wire once, in order.
            while !held.is_empty() || tx.in_flight() > 0 {
                tx.tx_burst(&mut pool, &mut held);
                tx.hand_off(&mut pool, |b| handed.push(b));
            }
            out.extend(handed.iter().map(|&b| pool.frame(b)[0]));
            proptest::prop_assert_eq!(out, taken);
        }
    }
}
