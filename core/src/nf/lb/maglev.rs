//! Maglev consistent hashing (Eisenbud et al., NSDI'16 §3.4), with a
//! lookup table that the control plane replaces while the data plane reads it without a lock.
//!
//! Population (the paper's Pseudocode 1): backend `i` has `offset = h1(name) mod M` and
//! `skip = h2(name) mod (M − 1) + 1`; its preference list is `(offset + j·skip) mod M`. The
//! backends take turns, each claiming its next preferred slot that is still free, until all M
//! slots are taken. M is prime, so every preference list is a permutation of the slots, and
//! turns make every backend's share ⌊M/N⌋ or ⌈M/N⌉ slots. M is the smallest prime of [`PRIMES`]
//! above 100 × N (paper §5.3: M ≫ N keeps the imbalance under 1 %).
//!
//! Publication: each VIP has two buffers, each a seqlock over (M, N, slots, backends). The
//! writer fills the inactive buffer (`seq` odd, `fence(Release)`, relaxed stores, `seq` even with
//! `Release`), then points `active` at it (`Release`). A reader loads `active`, opens the
//! buffer's `seq` (`Acquire`, even), reads the slot and its backend, `fence(Acquire)`, and checks
//! `seq` again: a writer that began rewriting that buffer meanwhile (two updates in a row) makes
//! the read retry, so a reader never mixes two tables. Readers never write.

use crate::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence, spin_hint};
use alloc::boxed::Box;
use alloc::vec;
use alloc::vec::Vec;

use crate::pna::exact::hash_key;

/// The table sizes to pick from (all prime).
#[cfg(not(loom))]
pub const PRIMES: [u32; 12] = [257, 521, 1031, 2053, 4099, 8209, 16411, 32771, 65537, 131_101, 262_147, 524_309];
/// Under loom, tables of a few slots: every slot store is a step the model checker explores,
/// and the publication protocol does not depend on the size.
#[cfg(loom)]
pub const PRIMES: [u32; 4] = [3, 5, 7, 11];
/// M exceeds `SPREAD` × N (paper §5.3: 100 keeps the imbalance under 1 %; 1 under loom).
const SPREAD: usize = if cfg!(loom) { 1 } else { 100 };
/// Most backends a VIP can have (M must exceed 100 × N).
pub const MAX_BACKENDS: usize = (PRIMES[PRIMES.len() - 1] as usize - 1) / SPREAD;

const SEED_OFFSET: u64 = 0x6d61_676c_6576_0001;
const SEED_SKIP: u64 = 0x6d61_676c_6576_0002;
const READ_RETRIES: u32 = if cfg!(loom) { 3 } else { 64 };

/// The smallest table size above 100 × `n` (at least [`PRIMES`]`[0]`).
pub fn table_size(n: usize) -> Option<u32> {
    PRIMES.iter().copied().find(|&p| p as usize > n.saturating_mul(SPREAD))
}

/// A backend as the table stores it: address bits (IPv4 in the low 32) and port (0: keep).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Target {
    pub addr: u128,
    pub port: Option<u16>,
}

impl Target {
    fn words(&self) -> [u64; 3] {
        let p = self.port.map_or(0, |p| 1 << 16 | u64::from(p));
        [(self.addr >> 64) as u64, self.addr as u64, p]
    }

    fn from_words(w: [u64; 3]) -> Self {
        let port = (w[2] >> 16 & 1 == 1).then_some(w[2] as u16);
        Self { addr: u128::from(w[0]) << 64 | u128::from(w[1]), port }
    }
}

/// Fills a Maglev table of size `m` for `targets` (allocates: control path only).
pub(crate) fn populate(targets: &[Target], m: u32) -> Vec<u32> {
    let n = targets.len();
    let mut entry = vec![u32::MAX; m as usize];
    if n == 0 {
        return entry;
    }
    let m64 = u64::from(m);
    let perm: Vec<(u64, u64)> = targets
        .iter()
        .map(|t| {
            let w = t.words();
            (hash_key(SEED_OFFSET, &w) % m64, hash_key(SEED_SKIP, &w) % (m64 - 1) + 1)
        })
        .collect();
    let mut next = vec![0u64; n];
    let mut filled = 0u64;
    'fill: loop {
        for (i, (&(offset, skip), nx)) in perm.iter().zip(next.iter_mut()).enumerate() {
            let mut c = (offset + *nx % m64 * skip) % m64;
            while entry.get(c as usize).is_some_and(|e| *e != u32::MAX) {
                *nx += 1;
                c = (offset + *nx % m64 * skip) % m64;
            }
            if let Some(e) = entry.get_mut(c as usize) {
                *e = i as u32;
            }
            *nx += 1;
            filled += 1;
            if filled == m64 {
                break 'fill;
            }
        }
    }
    entry
}

struct Buffer {
    seq: AtomicU64,
    m: AtomicU32,
    n: AtomicU32,
    slots: Box<[AtomicU32]>,
    targets: Box<[[AtomicU64; 3]]>,
}

impl Buffer {
    fn new(max_m: u32, max_n: usize) -> Self {
        let mut slots = Vec::with_capacity(max_m as usize);
        slots.resize_with(max_m as usize, || AtomicU32::new(u32::MAX));
        let mut targets = Vec::with_capacity(max_n);
        targets.resize_with(max_n, crate::sync::atomic::zeroed);
        Self {
            seq: AtomicU64::new(0),
            m: AtomicU32::new(PRIMES[0]),
            n: AtomicU32::new(0),
            slots: slots.into_boxed_slice(),
            targets: targets.into_boxed_slice(),
        }
    }
}

/// One VIP's lock-free double-buffered Maglev table.
pub(crate) struct Table {
    bufs: [Buffer; 2],
    active: AtomicUsize,
    writer: AtomicBool,
}

/// What a lookup found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pick {
    /// The backend for the hash.
    Target(Target),
    /// The VIP has no backend.
    Empty,
    /// No clean snapshot within the retry bound (a writer kept rewriting the buffer).
    Busy,
}

impl Table {
    /// An empty table able to hold `max_n` backends.
    pub fn new(max_n: usize) -> Self {
        let max_m = table_size(max_n).unwrap_or(PRIMES[PRIMES.len() - 1]);
        Self {
            bufs: [Buffer::new(max_m, max_n), Buffer::new(max_m, max_n)],
            active: AtomicUsize::new(0),
            writer: AtomicBool::new(false),
        }
    }

    /// Publishes a new backend list (control path; `false` if another writer is inside or the
    /// list is longer than the table was built for).
    pub fn publish(&self, targets: &[Target]) -> bool {
        let Some(m) = table_size(targets.len()) else { return false };
        if self.writer.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            return false;
        }
        let next = 1 - (self.active.load(Ordering::Relaxed) & 1);
        let ok = match self.bufs.get(next) {
            Some(buf) if targets.len() <= buf.targets.len() && m as usize <= buf.slots.len() => {
                let entry = populate(targets, m);
                let s = buf.seq.load(Ordering::Relaxed);
                buf.seq.store(s | 1, Ordering::Relaxed);
                // Orders the odd `seq` before the data stores (see the module docs).
                fence(Ordering::Release);
                buf.m.store(m, Ordering::Relaxed);
                buf.n.store(targets.len() as u32, Ordering::Relaxed);
                for (slot, e) in buf.slots.iter().zip(entry.iter()) {
                    slot.store(*e, Ordering::Relaxed);
                }
                for (cell, t) in buf.targets.iter().zip(targets.iter()) {
                    for (w, v) in cell.iter().zip(t.words()) {
                        w.store(v, Ordering::Relaxed);
                    }
                }
                buf.seq.store((s | 1).wrapping_add(1), Ordering::Release);
                self.active.store(next, Ordering::Release);
                true
            }
            _ => false,
        };
        self.writer.store(false, Ordering::Release);
        ok
    }

    /// The backend for `hash` (data path: no lock, no allocation).
    #[inline]
    pub fn pick(&self, hash: u64) -> Pick {
        for _ in 0..READ_RETRIES {
            let Some(buf) = self.bufs.get(self.active.load(Ordering::Acquire) & 1) else { break };
            let s = buf.seq.load(Ordering::Acquire);
            if s & 1 == 0 {
                let (m, n) = (buf.m.load(Ordering::Relaxed), buf.n.load(Ordering::Relaxed));
                let found = if n == 0 || m == 0 {
                    Pick::Empty
                } else {
                    let i =
                        buf.slots.get((hash % u64::from(m)) as usize).map_or(u32::MAX, |x| x.load(Ordering::Relaxed));
                    match buf.targets.get(i as usize) {
                        Some(cell) => Pick::Target(Target::from_words(core::array::from_fn(|k| {
                            cell.get(k).map_or(0, |w| w.load(Ordering::Relaxed))
                        }))),
                        None => Pick::Empty,
                    }
                };
                fence(Ordering::Acquire);
                if buf.seq.load(Ordering::Relaxed) == s {
                    return found;
                }
            }
            spin_hint();
        }
        Pick::Busy
    }

    /// The active table size and each backend's number of slots (control path, allocates).
    pub fn slot_counts(&self) -> (u32, Vec<u32>) {
        let Some(buf) = self.bufs.get(self.active.load(Ordering::Acquire) & 1) else { return (0, Vec::new()) };
        let (m, n) = (buf.m.load(Ordering::Relaxed), buf.n.load(Ordering::Relaxed) as usize);
        let mut counts = vec![0u32; n];
        for s in buf.slots.iter().take(m as usize) {
            if let Some(c) = counts.get_mut(s.load(Ordering::Relaxed) as usize) {
                *c += 1;
            }
        }
        (m, counts)
    }
}
