//! Tests of the hand-off ring and its return path: construction errors, full and empty
//! rings, the cached indices, the `u32` index wrap, the wake address, the credit of the
//! return path, a two-thread run that ends with the pool full, an auxiliary core working
//! through a view of the lane's pool, and proptests against a `VecDeque` model.
#![cfg(not(loom))]

use std::collections::VecDeque;
use std::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::buf::{BATCH_SIZE, BUF_SIZE, Pool};

fn h(i: u16) -> PacketBuf {
    PacketBuf::from_raw(i)
}

fn handles(range: core::ops::Range<u16>) -> Vec<PacketBuf> {
    range.map(h).collect()
}

fn pop_all(c: &mut Consumer) -> Vec<PacketBuf> {
    let mut out = Vec::new();
    let mut batch = Batch::new();
    while c.pop_burst(&mut batch) > 0 {
        out.extend_from_slice(batch.as_slice());
        batch.clear();
    }
    out
}

#[test]
fn handoff_rejects_bad_capacities_with_a_named_error() {
    assert_eq!(try_ring(0).err(), Some(HandoffError::TooSmall));
    assert_eq!(try_ring(1).err(), Some(HandoffError::TooSmall));
    assert_eq!(try_ring(3).err(), Some(HandoffError::NotPowerOfTwo));
    assert_eq!(try_ring(96).err(), Some(HandoffError::NotPowerOfTwo));
    assert_eq!(try_ring(MAX_CAPACITY + 1).err(), Some(HandoffError::TooLarge));
    assert_eq!(try_ring(MAX_CAPACITY * 2).err(), Some(HandoffError::TooLarge));
    assert_eq!(try_ring(usize::MAX).err(), Some(HandoffError::TooLarge));
    assert_eq!(try_link(6).err(), Some(HandoffError::NotPowerOfTwo));
    assert_eq!(HandoffError::NotPowerOfTwo.to_string(), "hand-off ring capacity must be a power of two");
    for cap in [MIN_CAPACITY, 64, MAX_CAPACITY] {
        let (p, c) = try_ring(cap).expect("valid capacity");
        assert_eq!((p.capacity(), c.capacity()), (cap, cap));
        assert!(p.is_empty() && c.is_empty());
    }
}

#[test]
fn handoff_full_ring_takes_fewer_and_counts_the_rest() {
    let (mut p, mut c) = try_ring(4).expect("ring");
    let bufs = handles(0..6);
    assert_eq!(p.push_burst(&bufs), 4, "a ring of 4 takes 4 of 6");
    assert_eq!(p.stats(), RingStats { moved: 4, refused: 2 });
    assert_eq!(p.len(), 4);
    assert_eq!(p.push_burst(&bufs[4..]), 0, "a full ring takes none");
    assert_eq!(p.stats().refused, 4);
    let mut batch = Batch::new();
    for _ in 0..BATCH_SIZE - 2 {
        batch.push(h(999)).expect("room");
    }
    // The batch has room for two: the pop takes two, oldest first.
    assert_eq!(c.pop_burst(&mut batch), 2);
    assert_eq!(&batch.as_slice()[BATCH_SIZE - 2..], &bufs[..2]);
    assert_eq!(c.pop_burst(&mut batch), 0, "a full batch takes nothing");
    assert_eq!(c.len(), 2);
    // Room for two again; the caller's leftovers go in in order.
    assert_eq!(p.push_burst(&bufs[4..]), 2);
    assert_eq!(pop_all(&mut c), [bufs[2], bufs[3], bufs[4], bufs[5]]);
    assert_eq!(c.stats(), RingStats { moved: 6, refused: 0 });
}

#[test]
fn handoff_empty_ring_pops_nothing() {
    let (mut p, mut c) = try_ring(8).expect("ring");
    let mut batch = Batch::new();
    assert_eq!(c.pop_burst(&mut batch), 0);
    assert!(batch.is_empty());
    assert_eq!(p.push_burst(&[]), 0);
    assert_eq!(c.pop_burst(&mut batch), 0);
    assert_eq!(p.stats(), RingStats::default());
}

#[test]
fn handoff_reads_the_other_index_only_when_the_cached_one_falls_short() {
    let (mut p, mut c) = try_ring(8).expect("ring");
    assert_eq!(p.push_burst(&handles(0..2)), 2);
    let mut batch = Batch::new();
    assert_eq!(c.pop_burst(&mut batch), 2);
    assert_eq!(c.prod_cache, 2, "the consumer had to read the producer's index");
    // Six free in the producer's cached view: a burst of 6 does not look at `cons`.
    assert_eq!(p.push_burst(&handles(2..8)), 6);
    assert_eq!(p.cons_cache, 0, "room was there: the consumer's index was not read");
    // A burst of 2 more does not fit the cached view (0 free): it reads `cons` (2 popped).
    assert_eq!(p.push_burst(&handles(8..10)), 2);
    assert_eq!(p.cons_cache, 2);
    // The consumer's cache says 0 ready: it reads `prod` (8 ready) and takes them all.
    batch.clear();
    assert_eq!(c.pop_burst(&mut batch), 8);
    assert_eq!(batch.as_slice(), &handles(2..10)[..]);
}

#[test]
fn handoff_is_fifo_across_the_u32_index_wrap() {
    let (mut p, mut c) = try_ring_at(8, u32::MAX - 5).expect("ring");
    let mut next = 0u16;
    let mut want = 0u16;
    let mut batch = Batch::new();
    for round in 0..40u16 {
        let burst: Vec<PacketBuf> = (next..next + 1 + round % 7).map(h).collect();
        next += p.push_burst(&burst) as u16;
        batch.clear();
        c.pop_burst(&mut batch);
        for b in batch.as_slice() {
            assert_eq!(b.index(), usize::from(want), "round {round}");
            want += 1;
        }
    }
    assert!(p.prod < 1000, "the producer index wrapped");
    assert_eq!(pop_all(&mut c).len(), usize::from(next - want));
}

#[test]
fn handoff_wake_address_is_the_producer_index_on_its_own_lines() {
    let (p, c) = try_ring(4).expect("ring");
    let prod = (&raw const p.shared.prod.0).addr();
    let cons = (&raw const p.shared.cons.0).addr();
    assert_eq!(c.wake_address().get(), prod);
    assert_eq!(prod % 128, 0);
    assert!(cons.abs_diff(prod) >= 128, "the indices share a line pair");
    let slots = (&raw const p.shared.slots).addr();
    assert!(prod.abs_diff(slots) >= 128, "the producer's index shares a line with read-only fields");
}

#[test]
fn handoff_halves_are_send() {
    fn send<T: Send + 'static>(_: &T) {}
    let (p, c) = try_ring(2).expect("ring");
    send(&p);
    send(&c);
    let (d, a) = try_link(2).expect("link");
    send(&d);
    send(&a);
}

fn pool(mem: &mut [u8], n: usize) -> Pool<'_> {
    Pool::try_new(mem, 0, n).expect("pool")
}

fn alloc(p: &mut Pool<'_>, n: usize) -> Vec<PacketBuf> {
    (0..n).map(|_| p.alloc().expect("free buffer")).collect()
}

#[test]
fn handoff_link_credit_caps_what_the_aux_side_holds() {
    let mut mem = vec![0u8; 8 * BUF_SIZE];
    let mut pool = pool(&mut mem, 8);
    let (mut d, mut a) = try_link(4).expect("link");
    let bufs = alloc(&mut pool, 6);
    assert_eq!(d.hand_off(&bufs), 4);
    assert_eq!((d.outstanding(), d.refused()), (4, 2));
    let mut got = Batch::new();
    assert_eq!(a.receive(&mut got), 4);
    assert_eq!(a.held(), 4);
    // The hand-off ring is empty now, but no credit came back yet: nothing goes over.
    assert_eq!(d.hand_off(&bufs[4..]), 0);
    assert_eq!(d.refused(), 4);
    assert_eq!(a.give_back_batch(&mut got), 4);
    assert!(got.is_empty());
    assert_eq!(a.held(), 0);
    // Still no credit until the dedicated core reclaims.
    assert_eq!(d.hand_off(&bufs[4..]), 0);
    assert_eq!(d.reclaim(&mut pool), Reclaimed { freed: 4, routed: 0, refused: 0 });
    assert_eq!(d.outstanding(), 0);
    assert_eq!(pool.available(), 6);
    assert_eq!(d.hand_off(&bufs[4..]), 2);
    assert_eq!(a.receive(&mut got), 2);
    assert_eq!(a.give_back_batch(&mut got), 2);
    assert_eq!(d.reclaim(&mut pool).freed, 2);
    assert_eq!(pool.available(), pool.capacity(), "every buffer came home");
    assert_eq!(pool.double_frees(), 0);
}

#[test]
fn handoff_link_aux_cannot_give_back_more_than_it_holds() {
    let mut mem = vec![0u8; 4 * BUF_SIZE];
    let mut pool = pool(&mut mem, 4);
    let (mut d, mut a) = try_link(4).expect("link");
    let bufs = alloc(&mut pool, 2);
    assert_eq!(a.give_back(&bufs), 0, "nothing received, nothing to give back");
    assert_eq!(d.hand_off(&bufs[..1]), 1);
    let mut got = Batch::new();
    assert_eq!(a.receive(&mut got), 1);
    // It offers two (one it never received): only one is taken.
    assert_eq!(a.give_back(&[got.as_slice()[0], bufs[1]]), 1);
    assert_eq!(d.reclaim(&mut pool), Reclaimed { freed: 1, routed: 0, refused: 0 });
    pool.free(bufs[1]).expect("still the caller's");
    assert_eq!(pool.available(), 4);
}

#[test]
fn handoff_link_reclaim_refuses_a_buffer_the_pool_already_has() {
    let mut mem = vec![0u8; 4 * BUF_SIZE];
    let mut pool = pool(&mut mem, 4);
    let (mut d, mut a) = try_link(2).expect("link");
    let b = pool.alloc().expect("buffer");
    pool.free(b).expect("free");
    // A caller bug: a free buffer handed over. It comes back and the pool refuses it.
    assert_eq!(d.hand_off(&[b]), 1);
    let mut got = Batch::new();
    a.receive(&mut got);
    a.give_back_batch(&mut got);
    assert_eq!(d.reclaim(&mut pool), Reclaimed { freed: 0, routed: 0, refused: 1 });
    assert_eq!(pool.double_frees(), 1);
    assert_eq!(d.outstanding(), 0, "the credit comes back anyway");
    assert_eq!(pool.available(), 4);
}

/// One dedicated thread (owning the pool: allocating, handing off, keeping what did not
/// fit local, reclaiming) and one auxiliary thread (receiving, giving back in bursts of
/// uneven size): every buffer arrives once, in hand-off order, every give-back of held
/// buffers is whole, and the pool ends full with no double free.
#[test]
fn handoff_link_two_threads_end_with_the_pool_full() {
    use std::sync::atomic::{
        AtomicBool,
        Ordering::{Acquire, Release},
    };
    const N: usize = crate::testing::miri_or(20_000, 300);
    let mut mem = vec![0u8; 64 * BUF_SIZE];
    let mut pool = pool(&mut mem, 64);
    let (mut d, mut a) = try_link(16).expect("link");
    let done = AtomicBool::new(false);
    let (sent_log, received_log) = std::thread::scope(|s| {
        let done = &done;
        let aux = s.spawn(move || {
            let (mut got, mut log, mut step) = (Batch::new(), Vec::new(), 0usize);
            loop {
                let finished = done.load(Acquire);
                let n = a.receive(&mut got);
                log.extend_from_slice(&got.as_slice()[got.len() - n..]);
                if got.is_empty() {
                    if finished && a.pending() == 0 {
                        break;
                    }
                    std::thread::yield_now();
                    continue;
                }
                step = (step + 3) % 5;
                let part: Vec<PacketBuf> = got.as_slice().iter().copied().take(step + 1).collect();
                assert_eq!(a.give_back(&part), part.len(), "the return ring has room for what aux holds");
                got.drain_front(part.len());
            }
            assert_eq!(a.held(), 0);
            log
        });
        let (mut log, mut batch) = (Vec::new(), Vec::new());
        while log.len() < N {
            d.reclaim(&mut pool);
            batch.clear();
            while batch.len() < BATCH_SIZE
                && let Some(b) = pool.alloc()
            {
                batch.push(b);
            }
            let n = d.hand_off(&batch);
            log.extend_from_slice(&batch[..n]);
            // What the link did not take stays local: here it is "processed" and freed.
            for b in &batch[n..] {
                pool.free(*b).expect("local free");
            }
        }
        done.store(true, Release);
        let received = aux.join().expect("aux thread");
        while d.outstanding() > 0 {
            d.reclaim(&mut pool);
        }
        (log, received)
    });
    assert_eq!(received_log, sent_log, "every handed-off buffer arrived once, in order");
    assert_eq!(pool.available(), pool.capacity(), "no buffer leaked");
    assert_eq!(pool.double_frees(), 0, "no buffer freed twice");
}

#[derive(Debug, Clone)]
enum Op {
    Push(u16),
    Pop(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![(0u16..40).prop_map(Op::Push), (0usize..=BATCH_SIZE).prop_map(Op::Pop)]
}

#[derive(Debug, Clone)]
enum LinkOp {
    HandOff(usize),
    Receive,
    GiveBack(usize),
    Reclaim,
}

fn link_op() -> impl Strategy<Value = LinkOp> {
    prop_oneof![
        (0usize..40).prop_map(LinkOp::HandOff),
        Just(LinkOp::Receive),
        (0usize..40).prop_map(LinkOp::GiveBack),
        Just(LinkOp::Reclaim),
    ]
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]

    /// Any interleaving of push bursts (0..40 handles) and pops (room 0..=32) on one thread,
    /// from any starting index: the ring behaves exactly like a bounded `VecDeque`: a push
    /// takes `min(burst, free)` from the front, a pop takes `min(room, len)` from the front,
    /// and the counters add up.
    #[test]
    fn handoff_matches_a_bounded_vecdeque(
        log2 in 1u32..7,
        start in prop_oneof![Just(0u32), Just(u32::MAX - 3), any::<u32>()],
        ops in prop::collection::vec(op(), 1..200),
    ) {
        let cap = 1usize << log2;
        let (mut p, mut c) = try_ring_at(cap, start).expect("ring");
        let mut model: VecDeque<PacketBuf> = VecDeque::new();
        let (mut next, mut refused) = (0u16, 0u64);
        for op in ops {
            match op {
                Op::Push(k) => {
                    let burst: Vec<PacketBuf> = (next..next + k).map(h).collect();
                    let n = p.push_burst(&burst);
                    let free = cap - model.len();
                    prop_assert_eq!(n, burst.len().min(free));
                    model.extend(burst.iter().take(n).copied());
                    refused += (burst.len() - n) as u64;
                    next = next.wrapping_add(n as u16);
                }
                Op::Pop(room) => {
                    let mut batch = Batch::new();
                    for _ in 0..BATCH_SIZE - room {
                        batch.push(h(u16::MAX)).expect("room");
                    }
                    let n = c.pop_burst(&mut batch);
                    prop_assert_eq!(n, room.min(model.len()));
                    let got = &batch.as_slice()[BATCH_SIZE - room..];
                    let want: Vec<PacketBuf> = model.drain(..n).collect();
                    prop_assert_eq!(got, &want[..]);
                }
            }
            prop_assert_eq!(c.len(), model.len());
            prop_assert_eq!(p.len(), model.len());
        }
        prop_assert_eq!(p.stats().refused, refused);
        prop_assert_eq!(p.stats().moved - c.stats().moved, model.len() as u64);
    }

    /// Any interleaving of hand-offs, receives, give-backs and reclaims on one thread: the
    /// credit never lets more than the capacity out, a give-back of what aux holds is never
    /// short, buffers arrive in hand-off order, and after teardown the pool is full with no
    /// double free.
    #[test]
    fn handoff_link_conserves_every_buffer(
        log2 in 1u32..6,
        ops in prop::collection::vec(link_op(), 1..200),
    ) {
        let cap = 1usize << log2;
        let mut mem = vec![0u8; 64 * BUF_SIZE];
        let mut pool = pool(&mut mem, 64);
        let (mut d, mut a) = try_link(cap).expect("link");
        let (mut in_ring, mut held, mut returned): (VecDeque<PacketBuf>, VecDeque<PacketBuf>, usize) =
            (VecDeque::new(), VecDeque::new(), 0);
        for op in ops {
            match op {
                LinkOp::HandOff(k) => {
                    let bufs: Vec<PacketBuf> = (0..k).map_while(|_| pool.alloc()).collect();
                    let n = d.hand_off(&bufs);
                    prop_assert_eq!(n, bufs.len().min(cap - (in_ring.len() + held.len() + returned)));
                    in_ring.extend(bufs.iter().take(n).copied());
                    for b in &bufs[n..] {
                        pool.free(*b).expect("kept local, then freed");
                    }
                }
                LinkOp::Receive => {
                    let mut batch = Batch::new();
                    let n = a.receive(&mut batch);
                    let want: Vec<PacketBuf> = in_ring.drain(..n.min(in_ring.len())).collect();
                    prop_assert_eq!(batch.as_slice(), &want[..], "hand-off order");
                    held.extend(want);
                }
                LinkOp::GiveBack(k) => {
                    let part: Vec<PacketBuf> = held.iter().take(k).copied().collect();
                    let n = a.give_back(&part);
                    prop_assert_eq!(n, part.len(), "a give-back of held buffers is never short");
                    held.drain(..n);
                    returned += n;
                }
                LinkOp::Reclaim => {
                    let r = d.reclaim(&mut pool);
                    prop_assert_eq!(r, Reclaimed { freed: returned, routed: 0, refused: 0 });
                    returned = 0;
                }
            }
            prop_assert!(d.outstanding() <= cap);
            prop_assert_eq!(d.outstanding(), in_ring.len() + held.len() + returned);
            prop_assert_eq!(a.held(), held.len());
            prop_assert_eq!(pool.in_use(), d.outstanding());
        }
        // Teardown: aux drains and gives everything back, the dedicated core reclaims.
        let mut batch = Batch::new();
        while a.receive(&mut batch) > 0 || !batch.is_empty() {
            a.give_back_batch(&mut batch);
        }
        let rest: Vec<PacketBuf> = held.drain(..).collect();
        prop_assert_eq!(a.give_back(&rest), rest.len());
        d.reclaim(&mut pool);
        prop_assert_eq!(d.outstanding(), 0);
        prop_assert_eq!(pool.available(), pool.capacity());
        prop_assert_eq!(pool.double_frees(), 0);
    }
}

/// An auxiliary core runs "its chain" on frames handed over, through a view of the lane's
/// pool: reads and rewrites them (a byte bumped, the length cut by one), drops every fifth
/// (the view's `free` keeps it aside) and marks the rest with an output port; the lane routes
/// what comes back in order — the frames marked for port 1 onto its "transmit" path (taken),
/// the others freed. Every frame processed once and seen rewritten, each port's frames in
/// hand-off order, the drops freed, the pool full at the end. Miri runs it (data races and
/// aliasing between the pool and its view).
#[test]
#[allow(unsafe_code)] // a view of the pool (`Pool::view`), under its discipline
fn handoff_an_aux_core_processes_frames_through_a_view_and_the_lane_routes_them_back() {
    use std::sync::atomic::{
        AtomicBool,
        Ordering::{Acquire, Release},
    };
    const N: u32 = crate::testing::miri_or(5_000, 150);
    let mut mem = vec![0u8; 64 * BUF_SIZE];
    let mut pool = pool(&mut mem, 64);
    // SAFETY: `pool` outlives the view (the scope below ends before it), and the test keeps
    // the hand-off discipline: the main thread touches a buffer before `hand_off` and after
    // `reclaim_with` gives it back, the aux thread between `receive` and `give_back`.
    let mut view = unsafe { pool.view() };
    assert!(view.is_view() && !pool.is_view());
    let (mut d, mut a) = try_link(16).expect("link");
    let done = AtomicBool::new(false);
    /// Sets `done` however the main thread leaves (a failed assertion too), so the aux
    /// thread ends and the scope reports the failure instead of hanging.
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Release);
        }
    }
    let (ports, routed, freed) = std::thread::scope(|s| {
        let done = &done;
        let finish = Done(done);
        let aux = s.spawn(move || {
            let (mut got, mut back) = (Batch::new(), Batch::new());
            loop {
                let finished = done.load(Acquire);
                a.receive(&mut got);
                if got.is_empty() {
                    if finished && a.pending() == 0 {
                        break;
                    }
                    std::thread::yield_now();
                    continue;
                }
                for &b in got.as_slice() {
                    let f = view.frame_mut(b);
                    let seq = u32::from_be_bytes([f[0], f[1], f[2], f[3]]);
                    if seq % 5 == 4 {
                        view.free(b).expect("a view keeps a dropped buffer aside");
                        continue;
                    }
                    f[4] = f[4].wrapping_add(1);
                    let len = view.len(b);
                    view.set_len(b, len - 1).expect("shorter fits");
                    crate::offload::marks::set_out(&mut view, b, Some((seq % 2) as u8));
                    back.push(b).expect("room: one batch in, one out");
                }
                got.clear();
                let n = back.len();
                assert_eq!(a.give_back_batch(&mut back), n, "room for what aux holds");
                view.take_released(&mut back);
                let n = back.len();
                assert_eq!(a.give_back_batch(&mut back), n);
            }
            assert_eq!((a.held(), view.released()), (0, 0));
            assert_eq!(view.alloc(), None, "a view owns no buffer");
        });
        let mut ports: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
        let (mut seq, mut routed, mut freed) = (0u32, 0usize, 0usize);
        let route = |p: &mut Pool<'_>, b: PacketBuf, ports: &mut [Vec<u32>; 2]| -> bool {
            let f = p.frame(b);
            let s = u32::from_be_bytes([f[0], f[1], f[2], f[3]]);
            let Some(port) = crate::offload::marks::out(p, b) else {
                assert_eq!(s % 5, 4, "only the dropped frames come back without a port");
                return false;
            };
            assert_ne!(s % 5, 4, "a dropped frame came back marked");
            assert_eq!((f.len(), f[4]), (59, (s as u8).wrapping_add(1)), "frame {s} rewritten once");
            assert_eq!(u32::from(port), s % 2);
            ports[usize::from(port)].push(s);
            if port == 1 {
                // "Transmitted" right away: the caller took it, and it frees it itself.
                p.free(b).expect("own buffer");
                return true;
            }
            false
        };
        while seq < N || d.outstanding() > 0 {
            let r = d.reclaim_with(&mut pool, |p, b| route(p, b, &mut ports));
            (routed, freed) = (routed + r.routed, freed + r.freed);
            assert_eq!(r.refused, 0);
            let mut batch = Vec::new();
            while seq < N
                && batch.len() < BATCH_SIZE
                && let Some(b) = pool.alloc()
            {
                pool.set_frame(b, crate::buf::HEADROOM, 60).expect("fits");
                let f = pool.frame_mut(b);
                f[..4].copy_from_slice(&seq.to_be_bytes());
                f[4] = seq as u8;
                batch.push(b);
                seq += 1;
            }
            let n = d.hand_off(&batch);
            // What the link did not take is "processed here": put back, numbers reused.
            for b in batch[n..].iter().rev() {
                pool.free(*b).expect("local free");
                seq -= 1;
            }
            if n == 0 {
                std::thread::yield_now();
            }
        }
        drop(finish);
        aux.join().expect("aux thread");
        (ports, routed, freed)
    });
    let expect = |port: u32| (0..N).filter(|s| s % 5 != 4 && s % 2 == port).collect::<Vec<_>>();
    assert_eq!(ports[0], expect(0), "port 0's frames, each once, in hand-off order");
    assert_eq!(ports[1], expect(1), "port 1's frames, each once, in hand-off order");
    assert_eq!(routed, ports[1].len());
    let drops = (0..N).filter(|s| s % 5 == 4).count();
    assert_eq!(freed, ports[0].len() + drops, "port 0's frames and the drops freed");
    assert_eq!(pool.available(), pool.capacity(), "no buffer leaked");
    assert_eq!(pool.double_frees(), 0, "no buffer freed twice");
}
