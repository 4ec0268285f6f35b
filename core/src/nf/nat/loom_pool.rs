//! Loom models of the NAT port pool (`nat::pool`): `cargo xtask test`, step "loom"
//! (`RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p cadence-core --release
//! --lib loom`).
//!
//! What they prove, for every interleaving (and every memory-model outcome loom can produce)
//! within the preemption bound:
//! - **no port is handed out twice**: each model thread marks a port it got from `alloc` in
//!   an ownership bitmap with an atomic read-modify-write and asserts the bit was clear; it
//!   clears the bit just before it tries to give the port back;
//! - **`release == false` leaves the port with the caller**: when a give-back fails (the
//!   free list's next cell is still being vacated by a concurrent `alloc`), the thread sets
//!   its bit again and asserts that nobody got the port meanwhile, then retries, as the
//!   NAT's pending list does; the first model also proves that this path is reached;
//! - **no port is lost**: once every thread is done, draining the pool yields each port of
//!   the range exactly once, then nothing; no anomaly was counted and `in_use` is exact.

use std::sync::atomic::{AtomicBool as StdBool, Ordering as StdOrdering};

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use super::pool::PortPool;
use crate::sync::{loom_model, loom_others_first};

/// The range the models use: two ports, so the free list has two cells and wraps every
/// second operation.
const FIRST: u16 = 1;
const LAST: u16 = 2;

/// Set by any execution in which `release` answered `false` (the models must reach it).
static RELEASE_REFUSED: StdBool = StdBool::new(false);

struct Shared {
    pool: PortPool,
    /// Bit `p` set while a model thread owns port `p`.
    owned: AtomicUsize,
}

impl Shared {
    fn new() -> Arc<Self> {
        Arc::new(Self { pool: PortPool::new(FIRST, LAST), owned: AtomicUsize::new(0) })
    }

    fn take(&self) -> Option<u16> {
        let p = self.pool.alloc()?;
        assert!((FIRST..=LAST).contains(&p), "port {p} outside the range");
        let was = self.owned.fetch_or(1 << p, Ordering::AcqRel);
        assert_eq!(was & 1 << p, 0, "port {p} handed out twice");
        Some(p)
    }

    /// Gives `p` back, retrying (as the NAT's pending list does) while `release` refuses.
    fn give_back(&self, p: u16) {
        loop {
            self.owned.fetch_and(!(1 << p), Ordering::AcqRel);
            if self.pool.release(p) {
                return;
            }
            RELEASE_REFUSED.store(true, StdOrdering::Relaxed);
            // Refused: the port never reached the free list, so nobody can own it now.
            let was = self.owned.fetch_or(1 << p, Ordering::AcqRel);
            assert_eq!(was & 1 << p, 0, "port {p} escaped while its release was refused");
            thread::yield_now();
        }
    }

    /// After every thread is done: each port comes out exactly once, then nothing.
    fn assert_conserved(&self) {
        assert_eq!(self.pool.anomalies.load(Ordering::Relaxed), 0);
        assert_eq!(self.pool.in_use(), 0, "a port still counted as handed out");
        let mut seen = 0usize;
        for _ in FIRST..=LAST {
            let p = self.pool.alloc().expect("a port was lost");
            assert_eq!(seen & 1 << p, 0, "port {p} twice in the free list");
            seen |= 1 << p;
        }
        assert_eq!(self.pool.alloc(), None, "more ports than the range");
        assert_eq!(self.pool.in_use(), usize::from(LAST - FIRST) + 1);
    }
}

/// Two workers: one takes a port and gives it back; the other cycles twice, so its second
/// give-back can meet the first worker's `alloc` between claiming a cell and vacating it
/// (the only way `release` answers `false`).
#[test]
fn nat_loom_pool_alloc_release_conserves_ports() {
    loom_model(3, |others_first| {
        let s = Shared::new();
        let s2 = s.clone();
        let t = thread::spawn(move || {
            if let Some(p) = s2.take() {
                s2.give_back(p);
            }
        });
        loom_others_first(others_first);
        for _ in 0..2 {
            if let Some(p) = s.take() {
                s.give_back(p);
            }
        }
        t.join().expect("worker");
        s.assert_conserved();
    });
    assert!(RELEASE_REFUSED.load(StdOrdering::Relaxed), "no schedule made `release` refuse: the model lost its point");
}

/// Three workers on two ports: the pool runs dry (someone gets `None`, never a port that
/// another holds), and everything comes back.
#[test]
fn nat_loom_pool_three_workers_two_ports() {
    loom_model(2, |others_first| {
        let s = Shared::new();
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let s = s.clone();
                thread::spawn(move || {
                    if let Some(p) = s.take() {
                        s.give_back(p);
                    }
                })
            })
            .collect();
        loom_others_first(others_first);
        if let Some(p) = s.take() {
            s.give_back(p);
        }
        for h in hs {
            h.join().expect("worker");
        }
        s.assert_conserved();
    });
}
