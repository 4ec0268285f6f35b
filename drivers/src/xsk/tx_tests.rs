//! The AF_XDP transmit queue (and the doorbells) against the fake kernel.

use cadence_core::buf::{BUF_SIZE, Batch, HEADROOM};
use cadence_core::nic::{RxQueue, TxQueue};

use super::XskConfig;
use super::tests::{H, batch_of, frame_bytes, mem};
use crate::hal::KickError;

#[test]
fn tx_need_wakeup_and_always_kick_kick_exactly_when_entries_wait() {
    let mut m = mem(64);
    let mut h = H::new(&mut m, [8, 8, 8, 8], 0);
    // No flag (zero-copy driver busy): no kicks.
    let b = h.frame(1, 60);
    h.tx.tx_burst(&mut h.pool, &mut batch_of(&[b]));
    assert_eq!(h.kick.tx(), 0);
    // Flag set: a kick per burst that leaves entries unconsumed, none per frame.
    h.k.tx.set_need_wakeup(true);
    let bs: Vec<_> = (2..5).map(|i| h.frame(i, 60)).collect();
    h.tx.tx_burst(&mut h.pool, &mut batch_of(&bs));
    assert_eq!(h.kick.tx(), 1);
    // Reclaim with entries still unconsumed kicks again (copy mode sends only in sendto).
    h.tx.reclaim(&mut h.pool);
    assert_eq!(h.kick.tx(), 2);
    // Once the kernel consumed every entry, nothing to kick for.
    h.k.transmit(&mut h.pool, usize::MAX);
    h.tx.reclaim(&mut h.pool);
    h.tx.tx_burst(&mut h.pool, &mut Batch::new());
    assert_eq!(h.kick.tx(), 2);
    h.k.complete(usize::MAX);
    h.tx.reclaim(&mut h.pool);
    assert_eq!(h.tx.in_flight(), 0);
    assert_eq!(h.tx.counters().kicks, 2);
    assert_eq!(h.k.sent.len(), 4);
    h.assert_clean();
    // always_kick_tx: kicks without the flag, still only with entries waiting.
    let mut m = mem(64);
    let mut h = H::with(&mut m, [8, 8, 8, 8], 0, 0, XskConfig::default().with_always_kick_tx(true));
    h.tx.tx_burst(&mut h.pool, &mut Batch::new());
    assert_eq!(h.kick.tx(), 0);
    for i in 0..3 {
        let b = h.frame(i, 60);
        h.tx.tx_burst(&mut h.pool, &mut batch_of(&[b]));
    }
    assert_eq!(h.kick.tx(), 3);
    h.k.transmit(&mut h.pool, usize::MAX);
    h.tx.reclaim(&mut h.pool);
    assert_eq!(h.kick.tx(), 3);
    assert_eq!(h.kick.rx(), 0);
}

#[test]
fn kick_failures_are_counted_and_retried() {
    let mut m = mem(64);
    let mut h = H::new(&mut m, [8, 8, 8, 8], 0);
    h.k.tx.set_need_wakeup(true);
    h.k.fill.set_need_wakeup(true);
    h.kick.fail_next(KickError::Busy);
    h.kick.fail_next(KickError::Gone);
    h.kick.fail_next(KickError::Other(5));
    h.rx.fill(&mut h.pool); // Busy
    let b = h.frame(1, 60);
    h.tx.tx_burst(&mut h.pool, &mut batch_of(&[b])); // Gone
    h.tx.reclaim(&mut h.pool); // Other: the entry still waits, so it is tried again
    h.tx.reclaim(&mut h.pool); // succeeds
    let (rc, tc) = (h.rx.counters(), h.tx.counters());
    assert_eq!((rc.kicks, rc.kick_busy, rc.kick_errors), (0, 1, 0));
    assert_eq!((tc.kicks, tc.kick_busy, tc.kick_errors), (1, 0, 2));
    // The receive side tries again on its next empty poll.
    h.rx.rx_burst(&mut h.pool, &mut Batch::new());
    assert_eq!(h.rx.counters().kicks, 1);
    h.k.transmit(&mut h.pool, usize::MAX);
    assert_eq!(h.k.sent, vec![frame_bytes(1, 60)]);
    h.assert_clean();
}

#[test]
fn a_full_tx_ring_leaves_the_rest_in_the_batch_in_order() {
    let mut m = mem(64);
    let mut h = H::new(&mut m, [8, 8, 4, 4], 0);
    let bs: Vec<_> = (0..10).map(|i| h.frame(i, 60 + i as usize)).collect();
    let mut batch = batch_of(&bs);
    assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), 4);
    assert_eq!(batch.as_slice(), &bs[4..]);
    assert_eq!(h.tx.tx_stats().ring_full, 6);
    // Still full: nothing taken.
    assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), 0);
    assert_eq!(batch.len(), 6);
    // The kernel sends two and completes them: room for two.
    h.k.transmit(&mut h.pool, 2);
    h.k.complete(2);
    assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), 2);
    assert_eq!(batch.as_slice(), &bs[6..]);
    while !batch.is_empty() {
        h.k.transmit(&mut h.pool, usize::MAX);
        h.k.complete(usize::MAX);
        h.tx.tx_burst(&mut h.pool, &mut batch);
    }
    h.k.transmit(&mut h.pool, usize::MAX);
    let want: Vec<_> = (0..10).map(|i| frame_bytes(i, 60 + i as usize)).collect();
    assert_eq!(h.k.sent, want);
    h.k.complete(usize::MAX);
    h.tx.reclaim(&mut h.pool);
    assert_eq!(h.pool.in_use(), 0);
    h.assert_clean();
}

#[test]
fn tx_refuses_empty_and_oversized_frames_and_resubmissions() {
    let mut m = mem(64);
    let mut h = H::with(&mut m, [8, 8, 8, 8], 0, 0, XskConfig::default().with_max_tx_frame(1514));
    let empty = h.frame(0, 0);
    let big = h.frame(1, 1515);
    let edge = h.frame(2, 1514);
    let mut batch = batch_of(&[empty, big, edge, edge]);
    assert_eq!(h.tx.tx_burst(&mut h.pool, &mut batch), 4);
    assert!(batch.is_empty());
    let t = h.tx.tx_stats();
    assert_eq!((t.packets, t.errors), (1, 3));
    assert_eq!(h.tx.counters().resubmitted, 1);
    // The refused ones are free again; the edge frame is on the ring once.
    assert_eq!((h.pool.in_use(), h.tx.in_flight()), (1, 1));
    h.k.transmit(&mut h.pool, usize::MAX);
    assert_eq!(h.k.sent, vec![frame_bytes(2, 1514)]);
    h.k.complete(usize::MAX);
    h.tx.reclaim(&mut h.pool);
    assert_eq!(h.pool.in_use(), 0);
    h.assert_clean();
}

#[test]
fn bad_completions_are_counted_and_never_freed_twice() {
    let mut m = mem(64);
    let mut h = H::new(&mut m, [8, 8, 8, 8], 0);
    h.rx.fill(&mut h.pool);
    let bs: Vec<_> = (0..3).map(|i| h.frame(i, 60)).collect();
    h.tx.tx_burst(&mut h.pool, &mut batch_of(&bs));
    h.k.transmit(&mut h.pool, usize::MAX);
    h.k.complete(1);
    let first = h.k.umem(h.pool.phys(bs[0]) + HEADROOM as u64);
    h.k.comp_raw(first); // completed twice
    h.k.comp_raw(64 * BUF_SIZE as u64); // outside the pool
    h.k.comp_raw(u64::MAX); // overflows
    h.k.comp_raw((40 * BUF_SIZE) as u64); // a free buffer
    h.k.comp_raw(0); // buffer 0: posted on the fill ring, the RX side's
    h.tx.reclaim(&mut h.pool);
    assert_eq!(h.tx.counters().bad_completions, 5);
    assert_eq!(h.tx.in_flight(), 2);
    assert_eq!(h.pool.double_frees(), 0);
    assert_eq!(h.pool.in_use(), 8 + 2);
    h.k.complete(usize::MAX);
    h.tx.reclaim(&mut h.pool);
    assert_eq!((h.tx.in_flight(), h.pool.in_use()), (0, 8));
    h.assert_clean();
}
