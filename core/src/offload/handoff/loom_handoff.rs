//! Loom models of the hand-off ring and its return path (`cargo xtask loom`).
//!
//! What they prove, for every interleaving within the preemption bound, on rings of two
//! slots (so every model wraps around and reuses a slot):
//! - **ring**: bursts pushed while the consumer pops arrive exactly once, in push order;
//!   a slot is never read before its handle is in it nor overwritten before it was read
//!   (either would put a stale or a later handle out of order); a full ring refuses and
//!   the refused handles never appear;
//! - **return path**: every buffer handed over is received once in order, every give-back
//!   of held buffers is whole (the credit argument of `link.rs`), and after teardown every
//!   buffer was freed into the pool exactly once (pool full, no double free).
//!
//! Teeth: the producer side's `Release`/`Acquire` (slot writes before `prod`) made
//! `Relaxed` fails both models (a stale slot read: `[0, 0]` for `[0, 1]`). The consumer
//! side's pair (slot reads before `cons`) guards against load buffering — a read returning
//! a value the other core writes later — which loom does not model, so weakening it is not
//! caught here; that side rests on the argument in `mod.rs` (and x86's TSO never reorders a
//! load after a later store; Arm's model does).

use std::vec::Vec;

use loom::thread;

use super::{Batch, PacketBuf, try_link, try_ring};
use crate::buf::{BUF_SIZE, Pool};
use crate::sync::{loom_model, loom_others_first};

fn h(i: u16) -> PacketBuf {
    PacketBuf::from_raw(i)
}

#[test]
fn handoff_loom_bursts_arrive_once_in_order() {
    loom_model(3, |others_first| {
        let (mut p, mut c) = try_ring(2).expect("a 2-slot ring");
        // The consumer pops twice, whatever is there.
        let consumer = thread::spawn(move || {
            let mut got = Vec::new();
            let mut batch = Batch::new();
            for _ in 0..2 {
                batch.clear();
                c.pop_burst(&mut batch);
                got.extend_from_slice(batch.as_slice());
            }
            (c, got)
        });
        loom_others_first(others_first);
        // The producer offers 0, 1, 2 in two bursts, the leftovers of the first again in
        // the second: what a full ring refused is retried, in order.
        let items = [h(0), h(1), h(2)];
        let first = p.push_burst(&items[..2]);
        let second = p.push_burst(&items[first..]);
        let pushed = first + second;
        let (mut c, mut got) = consumer.join().expect("consumer");
        let mut batch = Batch::new();
        c.pop_burst(&mut batch);
        got.extend_from_slice(batch.as_slice());
        assert_eq!(got, items[..pushed], "pushed {pushed}");
        assert_eq!(first, 2, "an empty 2-slot ring takes a burst of 2");
        // Refused: what each burst offered and the ring did not take.
        assert_eq!(p.stats().refused as usize, (2 - first) + (3 - first - second));
    });
}

#[test]
fn handoff_loom_return_path_frees_each_buffer_once() {
    loom_model(2, |others_first| {
        let mut mem = vec![0u8; 3 * BUF_SIZE];
        let mut pool = Pool::try_new(&mut mem, 0, 3).expect("pool");
        let (mut d, mut a) = try_link(2).expect("a 2-slot link");
        let bufs: Vec<PacketBuf> = (0..3).map(|_| pool.alloc().expect("buffer")).collect();
        // The auxiliary core: two rounds of receive, then give back all it holds.
        let aux = thread::spawn(move || {
            let mut log = Vec::new();
            let mut batch = Batch::new();
            for _ in 0..2 {
                let n = a.receive(&mut batch);
                log.extend_from_slice(&batch.as_slice()[batch.len() - n..]);
                let held = batch.len();
                assert_eq!(a.give_back_batch(&mut batch), held, "a give-back of held buffers is whole");
            }
            (a, log)
        });
        loom_others_first(others_first);
        // The dedicated core: hand off, reclaim, hand off what is left (as far as the
        // credit allows), reclaim; what never went over stays local.
        let mut sent = d.hand_off(&bufs);
        d.reclaim(&mut pool);
        sent += d.hand_off(&bufs[sent..]);
        d.reclaim(&mut pool);
        let (mut a, mut log) = aux.join().expect("aux");
        // Teardown: the aux end drains and gives back, the dedicated end reclaims.
        let mut batch = Batch::new();
        while a.receive(&mut batch) > 0 {
            log.extend_from_slice(batch.as_slice());
            a.give_back_batch(&mut batch);
        }
        assert_eq!(a.held(), 0);
        d.reclaim(&mut pool);
        assert_eq!(d.outstanding(), 0);
        assert_eq!(log, bufs[..sent], "received once, in hand-off order");
        for b in &bufs[sent..] {
            pool.free(*b).expect("kept local");
        }
        assert_eq!(pool.available(), 3, "every buffer back in the pool");
        assert_eq!(pool.double_frees(), 0, "none freed twice");
    });
}

/// An idle auxiliary core going to sleep on its doorbell (`sync::Doorbell`) while the
/// dedicated core hands it a burst: whatever the interleaving, either the core's last check
/// after arming sees the burst, or the dedicated core finds the bell armed and wakes it —
/// never "asleep with work waiting and nobody ringing". Teeth: without the fence in `ring`
/// (between the producer's store of its index and its load of the bell), or without the one
/// in `arm` (between the sleeper's store of the bell and its load of the index), this fails.
#[test]
fn doorbell_never_loses_a_wake_up() {
    use crate::sync::Doorbell;
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicBool, Ordering};

    loom_model(3, |others_first| {
        let (mut p, c) = try_ring(2).expect("a 2-slot ring");
        let bell = Arc::new(Doorbell::new());
        let woken = Arc::new(AtomicBool::new(false));
        let (b, w) = (bell.clone(), woken.clone());
        let dedicated = thread::spawn(move || {
            assert_eq!(p.push_burst(&[h(0)]), 1);
            // The wake hook is a plain fn: record that it ran through a side channel.
            if b.ring(crate::sync::doorbell::no_wake) {
                w.store(true, Ordering::SeqCst);
            }
            p
        });
        loom_others_first(others_first);
        bell.arm();
        let sleeps = c.is_empty();
        if !sleeps {
            bell.disarm();
        }
        let _p = dedicated.join().expect("dedicated");
        if sleeps {
            assert!(woken.load(Ordering::SeqCst), "asleep with a burst waiting and nobody rang");
        }
    });
}
