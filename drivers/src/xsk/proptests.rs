//! A hostile kernel: arbitrary descriptors, addresses, indices and flags written into the
//! rings between bursts. The queues must not panic (the windows panic on any access
//! outside a ring), must count every bad entry, and must lose or double-free no buffer.

use cadence_core::buf::{BUF_SIZE, Batch, PacketBuf, Pool};
use cadence_core::nic::{RxQueue, TxQueue};
use proptest::prelude::*;

use super::model::Kernel;
use super::tests::frame_bytes;
use super::{XskConfig, try_new_queues};
use crate::hal::KickError;
use crate::shm::FakeKick;

const BUFS: usize = 64;

/// An address the kernel writes: anything, or somewhere inside a pool buffer.
#[derive(Debug, Clone)]
enum Addr {
    Raw(u64),
    Buf(u16, u16),
}

#[derive(Debug, Clone)]
enum Op {
    Deliver(u16),
    RawRx(Addr, u32, u32),
    RxProducer(u32),
    FillConsumer(u32),
    Transmit(u8),
    Complete(u8),
    RawCompletion(Addr),
    CompletionProducer(u32),
    TxConsumer(u32),
    Flags(u8, u32),
    KickFails(bool),
    RxBurst,
    TxBurst(u8, u16),
    Reclaim,
    Fill,
    AppFrees(u8),
}

fn addr() -> impl Strategy<Value = Addr> {
    prop_oneof![
        any::<u64>().prop_map(Addr::Raw),
        (0..BUFS as u16 + 2, 0..BUF_SIZE as u16 + 1).prop_map(|(b, o)| Addr::Buf(b, o))
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u16..1793).prop_map(Op::Deliver),
        3 => (addr(), prop_oneof![any::<u32>(), 0u32..2100], 0u32..3).prop_map(|(a, l, o)| Op::RawRx(a, l, o)),
        1 => any::<u32>().prop_map(Op::RxProducer),
        1 => any::<u32>().prop_map(Op::FillConsumer),
        3 => any::<u8>().prop_map(Op::Transmit),
        3 => any::<u8>().prop_map(Op::Complete),
        2 => addr().prop_map(Op::RawCompletion),
        1 => any::<u32>().prop_map(Op::CompletionProducer),
        1 => any::<u32>().prop_map(Op::TxConsumer),
        1 => (0u8..4, any::<u32>()).prop_map(|(r, v)| Op::Flags(r, v)),
        1 => any::<bool>().prop_map(Op::KickFails),
        5 => Just(Op::RxBurst),
        4 => (0u8..40, 0u16..2100).prop_map(|(n, l)| Op::TxBurst(n, l)),
        2 => Just(Op::Reclaim),
        1 => Just(Op::Fill),
        2 => any::<u8>().prop_map(Op::AppFrees),
    ]
}

fn umem_addr(a: &Addr) -> u64 {
    match *a {
        Addr::Raw(x) => x,
        Addr::Buf(b, o) => b as u64 * BUF_SIZE as u64 + o as u64,
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(192))]

    #[test]
    fn a_hostile_kernel_cannot_break_conservation(
        start in any::<u32>(),
        sizes in prop::array::uniform4(prop::sample::select(vec![1u32, 2, 8, 32])),
        ops in prop::collection::vec(op(), 1..crate::testing::miri_or(120, 24)),
    ) {
        let mut mem = vec![0u8; BUFS * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, BUFS).unwrap();
        let mut k = Kernel::new(sizes, start, 0);
        let kick = FakeKick::default();
        let (mut rx, mut tx) = try_new_queues(k.rings(), kick.clone(), &pool, &XskConfig::default()).unwrap();
        let mut held: Vec<PacketBuf> = Vec::new();
        let mut seed = 0u32;
        for op in &ops {
            match op {
                Op::Deliver(len) => {
                    seed += 1;
                    k.deliver(&mut pool, &frame_bytes(seed, *len as usize));
                }
                Op::RawRx(a, len, opt) => k.rx_raw(umem_addr(a), *len, *opt),
                Op::RxProducer(v) => k.rx.set_prod(*v),
                Op::FillConsumer(v) => k.fill.set_cons(*v),
                Op::Transmit(n) => { k.transmit(&mut pool, *n as usize); }
                Op::Complete(n) => { k.complete(*n as usize); }
                Op::RawCompletion(a) => k.comp_raw(umem_addr(a)),
                Op::CompletionProducer(v) => k.comp.set_prod(*v),
                Op::TxConsumer(v) => k.tx.set_cons(*v),
                Op::Flags(r, v) => {
                    let ring = [&k.fill, &k.rx, &k.tx, &k.comp][*r as usize];
                    ring.w.w32(ring.off.flags, *v);
                }
                Op::KickFails(gone) => kick.fail_next(if *gone { KickError::Gone } else { KickError::Busy }),
                Op::RxBurst => {
                    let mut batch = Batch::new();
                    let n = rx.rx_burst(&mut pool, &mut batch);
                    prop_assert_eq!(n, batch.len());
                    for &b in batch.as_slice() {
                        let (off, len) = (pool.frame_offset(b), pool.len(b));
                        prop_assert!(len >= 14 && off + len <= BUF_SIZE);
                        prop_assert!(!held.contains(&b), "buffer {:?} handed out twice", b);
                    }
                    held.extend_from_slice(batch.as_slice());
                }
                Op::TxBurst(n, len) => {
                    let mut batch = Batch::new();
                    for _ in 0..*n {
                        let b = match held.pop() {
                            Some(b) => b,
                            None => match pool.alloc() {
                                Some(b) => { let _ = pool.set_len(b, (*len as usize).min(BUF_SIZE - 64)); b }
                                None => break,
                            },
                        };
                        if batch.push(b).is_err() {
                            held.push(b);
                            break;
                        }
                    }
                    let before = batch.len();
                    let taken = tx.tx_burst(&mut pool, &mut batch);
                    prop_assert_eq!(before - taken, batch.len());
                    held.extend_from_slice(batch.as_slice());
                }
                Op::Reclaim => { tx.reclaim(&mut pool); }
                Op::Fill => { rx.fill(&mut pool); }
                Op::AppFrees(n) => {
                    for _ in 0..*n {
                        let Some(b) = held.pop() else { break };
                        prop_assert!(pool.free(b).is_ok());
                    }
                }
            }
            // Every buffer is in exactly one place.
            prop_assert_eq!(pool.in_use(), held.len() + rx.posted() + tx.in_flight());
            let (rs, rc) = (rx.rx_stats(), rx.counters());
            prop_assert_eq!(rs.errors, rc.bad_addr + rc.not_owned + rc.bad_len + rc.fragments);
        }
        for b in held.drain(..) {
            prop_assert!(pool.free(b).is_ok());
        }
        rx.drain(&mut pool);
        tx.drain(&mut pool);
        prop_assert_eq!(pool.in_use(), 0);
        prop_assert_eq!(pool.double_frees(), 0);
    }
}
