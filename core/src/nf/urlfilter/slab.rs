//! The reassembly slabs: one fixed-size window of client→server stream bytes per flow
//! under inspection, all allocated at construction and shared by every core.
//!
//! Each slab has a *lease* word: `FREE`, `CLAIMING`, or the deadline (in ticks) of its
//! owner's lease, and a generation that a claim bumps. Claims, renewals and releases are
//! compare-and-swaps on the lease word, so a slab has one owner at a time without a lock:
//!
//! - **claim**: `CAS(free or expired → CLAIMING)`, bump the generation, clear the bitmap,
//!   then publish the deadline (`Release`). A lease whose deadline has passed is free:
//!   that is how the slab of a flow whose table entry expired comes back (the flow entry
//!   and the lease run on the same timeout from the same instant, see `UrlFilter`).
//! - **renew** (every client packet, before writing): load the deadline (`Acquire`), check
//!   the generation, then `CAS(deadline → new deadline)`. A deadline that another owner's
//!   claim published comes with that owner's newer generation (bumped before the deadline
//!   was published), so a lease that moved on is always detected — before the CAS, so a
//!   stale renewal never moves the new owner's deadline (it used to: the CAS came first and
//!   could shorten the new lease; the loom model in `loom_slab` found it). A renewed lease
//!   cannot be claimed until its new deadline.
//! - **release**: the owner stores `FREE`.
//!
//! Bytes and bitmap words are atomics written with `Relaxed` stores by the lease owner
//! only: a flow's client direction is handled by one core at a time, and the lane lock
//! hands it over with release/acquire ordering.

use crate::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};
use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::time::{Duration, Instant};

const FREE: u64 = 0;
const CLAIMING: u64 = u64::MAX;
/// Slabs a claim looks at before reporting exhaustion.
pub(super) const MAX_PROBES: usize = 256;

/// A claimed slab: its index and the generation of the claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SlabRef {
    pub(super) idx: u32,
    pub(super) generation: u32,
}

pub(super) struct Slabs {
    window: usize,
    words: usize,
    lease: Box<[AtomicU64]>,
    gens: Box<[AtomicU32]>,
    contig: Box<[AtomicU32]>,
    have: Box<[AtomicU64]>,
    data: Box<[AtomicU8]>,
}

impl core::fmt::Debug for Slabs {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Slabs").field("count", &self.lease.len()).field("window", &self.window).finish()
    }
}

/// `n` values from `f`, or `None` when the heap has no room (a config error, not a panic).
fn boxed<T>(n: usize, f: impl FnMut() -> T) -> Option<Box<[T]>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    v.resize_with(n, f);
    Some(v.into_boxed_slice())
}

fn deadline(now: Instant, ttl: Duration) -> u64 {
    now.saturating_add(ttl).ticks().clamp(1, CLAIMING - 1)
}

impl Slabs {
    /// `count` slabs of `window` bytes (both checked by the config); `None` when the heap
    /// cannot hold them.
    pub(super) fn try_new(count: usize, window: usize) -> Option<Self> {
        let words = window.div_ceil(64);
        // The largest block first, so that a failing size touches no memory.
        let data = boxed(count.checked_mul(window)?, || AtomicU8::new(0))?;
        let have = boxed(count.checked_mul(words)?, || AtomicU64::new(0))?;
        Some(Self {
            window,
            words,
            lease: boxed(count, || AtomicU64::new(FREE))?,
            gens: boxed(count, || AtomicU32::new(0))?,
            contig: boxed(count, || AtomicU32::new(0))?,
            have,
            data,
        })
    }

    /// Bytes per slab.
    pub(super) fn window(&self) -> usize {
        self.window
    }

    /// Slabs whose lease is held at `now` (diagnostics and tests).
    pub(super) fn in_use(&self, now: Instant) -> usize {
        self.lease.iter().filter(|l| matches!(l.load(Ordering::Relaxed), s if s != FREE && s > now.ticks())).count()
    }

    /// Claims a free (or expired) slab, looking at most at [`MAX_PROBES`] from `cursor` on.
    pub(super) fn claim(&self, cursor: &mut usize, now: Instant, ttl: Duration) -> Option<SlabRef> {
        let n = self.lease.len();
        for _ in 0..n.min(MAX_PROBES) {
            let i = *cursor % n;
            *cursor = cursor.wrapping_add(1);
            let Some(l) = self.lease.get(i) else { continue };
            let s = l.load(Ordering::Relaxed);
            let free = s == FREE || (s != CLAIMING && s <= now.ticks());
            if !free || l.compare_exchange(s, CLAIMING, Ordering::Acquire, Ordering::Relaxed).is_err() {
                continue;
            }
            let generation = self.gens.get(i).map_or(0, |g| g.fetch_add(1, Ordering::Relaxed).wrapping_add(1));
            for w in self.have.get(i * self.words..(i + 1) * self.words).unwrap_or(&[]) {
                w.store(0, Ordering::Relaxed);
            }
            if let Some(c) = self.contig.get(i) {
                c.store(0, Ordering::Relaxed);
            }
            l.store(deadline(now, ttl), Ordering::Release);
            return Some(SlabRef { idx: i as u32, generation });
        }
        None
    }

    /// Renews `r`'s lease to `now + ttl`; `false` if the slab is no longer `r`'s.
    pub(super) fn renew(&self, r: SlabRef, now: Instant, ttl: Duration) -> bool {
        let i = r.idx as usize;
        let (Some(l), Some(g)) = (self.lease.get(i), self.gens.get(i)) else { return false };
        let s = l.load(Ordering::Acquire);
        if s == FREE || s == CLAIMING {
            return false;
        }
        // A deadline that a later claim published comes after that claim's generation bump
        // (this `Acquire` load read its `Release` store), so a lease that moved on is refused
        // here, before it is touched: a stale renewal must not move another owner's deadline
        // (found by the loom model `urlfilter_loom_stale_renewal_detected_and_harmless`).
        if g.load(Ordering::Relaxed) != r.generation {
            return false;
        }
        // Succeeds only if no claim came in between (a claim replaces `s` with CLAIMING, then
        // with a deadline after `s`); the generation is checked again for the same reason.
        if l.compare_exchange(s, deadline(now, ttl), Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return false;
        }
        g.load(Ordering::Relaxed) == r.generation
    }

    /// Gives `r` back (the owner, right after a successful renewal).
    pub(super) fn release(&self, r: SlabRef) {
        let i = r.idx as usize;
        if let (Some(l), Some(g)) = (self.lease.get(i), self.gens.get(i))
            && g.load(Ordering::Relaxed) == r.generation
        {
            l.store(FREE, Ordering::Release);
        }
    }

    /// Writes `bytes` at stream offset `off` (clipped to the window); bytes already present
    /// keep their first-written value. Returns the contiguous prefix length, and whether
    /// this write grew it.
    pub(super) fn write(&self, r: SlabRef, off: usize, bytes: &[u8]) -> (usize, bool) {
        let (len, grew, _) = self.write_checked(r, off, bytes);
        (len, grew)
    }

    /// [`Slabs::write`], also saying whether `bytes` disagree with a byte already present
    /// (a conflicting overlap: no TCP stack retransmits different bytes).
    pub(super) fn write_checked(&self, r: SlabRef, off: usize, bytes: &[u8]) -> (usize, bool, bool) {
        let mut conflict = false;
        let i = r.idx as usize;
        let base = i * self.window;
        let have = self.have.get(i * self.words..(i + 1) * self.words).unwrap_or(&[]);
        let data = self.data.get(base..base + self.window).unwrap_or(&[]);
        let end = off.saturating_add(bytes.len()).min(self.window);
        let mut at = off;
        while at < end {
            let w = at / 64;
            let chunk_end = end.min((w + 1) * 64);
            let Some(word) = have.get(w) else { break };
            let old = word.load(Ordering::Relaxed);
            // The chunk's positions as bits of this word.
            let span = chunk_end - at;
            let mask = if span == 64 { u64::MAX } else { ((1u64 << span) - 1) << (at % 64) };
            let mut new = old;
            if old & mask == 0 {
                // None of these bytes is here yet (the common case): store them all.
                if let (Some(d), Some(src)) = (data.get(at..chunk_end), bytes.get(at - off..chunk_end - off)) {
                    for (d, &b) in d.iter().zip(src) {
                        d.store(b, Ordering::Relaxed);
                    }
                    new |= mask;
                }
            } else {
                for pos in at..chunk_end {
                    let bit = 1u64 << (pos % 64);
                    let (Some(d), Some(&b)) = (data.get(pos), bytes.get(pos - off)) else { continue };
                    if old & bit == 0 {
                        d.store(b, Ordering::Relaxed);
                        new |= bit;
                    } else if d.load(Ordering::Relaxed) != b {
                        conflict = true;
                    }
                }
            }
            if new != old {
                word.store(new, Ordering::Relaxed);
            }
            at = chunk_end;
        }
        let Some(c) = self.contig.get(i) else { return (0, false, conflict) };
        let before = c.load(Ordering::Relaxed) as usize;
        let mut len = before;
        while len < self.window {
            let Some(word) = have.get(len / 64) else { break };
            let shift = len % 64;
            // Ones from position `len` on; the shifted-in high bits are zeros, so the run
            // stops at the end of the word at the latest.
            let run = (!(word.load(Ordering::Relaxed) >> shift)).trailing_zeros() as usize;
            let run = run.min(64 - shift);
            len += run;
            if run < 64 - shift {
                break;
            }
        }
        let len = len.min(self.window);
        c.store(len as u32, Ordering::Relaxed);
        (len, len > before, conflict)
    }

    /// Drops the first `x` stream bytes: what was at offset `x + k` is now at `k` (bytes and
    /// presence alike, out-of-order ones included); `x` past the window empties the slab.
    /// For the next request on the connection. Owner only, like [`Slabs::write`].
    pub(super) fn consume(&self, r: SlabRef, x: usize) {
        let i = r.idx as usize;
        let have = self.have.get(i * self.words..(i + 1) * self.words).unwrap_or(&[]);
        let data = self.data.get(i * self.window..(i + 1) * self.window).unwrap_or(&[]);
        let x = x.min(self.window);
        // One past the highest byte present (0: none).
        let top = have
            .iter()
            .enumerate()
            .rev()
            .find_map(|(w, word)| {
                let v = word.load(Ordering::Relaxed);
                (v != 0).then(|| w * 64 + 64 - v.leading_zeros() as usize)
            })
            .unwrap_or(0);
        if top > x {
            // Bytes after `x` (out-of-order ones, or the next request): move bytes x..top to
            // 0..top - x (absent ones too: their presence bit says what they are), and shift
            // the presence bits by `x` with them, a word at a time in ascending order (each
            // new word reads old words at or after its own place).
            for dst in 0..top - x {
                if let (Some(d), Some(s)) = (data.get(dst), data.get(dst + x)) {
                    d.store(s.load(Ordering::Relaxed), Ordering::Relaxed);
                }
            }
            let (ws, bs) = (x / 64, x % 64);
            let old = |w: usize| have.get(w).map_or(0, |v| v.load(Ordering::Relaxed));
            for (w, h) in have.iter().enumerate() {
                let lo = old(w + ws) >> bs;
                let hi = if bs == 0 { 0 } else { old(w + ws + 1) << (64 - bs) };
                h.store(lo | hi, Ordering::Relaxed);
            }
        } else {
            // Nothing after `x` (the common case: a request consumed whole): clear what was.
            for h in have.iter().take(top.div_ceil(64)) {
                h.store(0, Ordering::Relaxed);
            }
        }
        if let Some(c) = self.contig.get(i) {
            c.store(0, Ordering::Relaxed);
        }
        // Recompute the contiguous prefix (a zero-length write does exactly that).
        let _ = self.write(r, 0, &[]);
    }

    /// Copies the contiguous prefix into `out`; returns its length.
    pub(super) fn read_prefix(&self, r: SlabRef, out: &mut [u8]) -> usize {
        let i = r.idx as usize;
        let len = self.contig.get(i).map_or(0, |c| c.load(Ordering::Relaxed) as usize);
        let base = i * self.window;
        let src = self.data.get(base..base + len).unwrap_or(&[]);
        for (o, s) in out.iter_mut().zip(src) {
            *o = s.load(Ordering::Relaxed);
        }
        len.min(out.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slabs_too_big_for_the_heap_are_refused_not_a_panic() {
        // 2^24 slabs of 1 MiB: 16 TiB (not under Miri, which cannot fail an allocation: it
        // would try to provide them).
        if !cfg!(miri) {
            assert!(Slabs::try_new(1 << 24, 1 << 20).is_none());
        }
        let s = Slabs::try_new(4, 128).unwrap();
        assert_eq!(s.window(), 128);
    }

    /// The window as a model: one optional byte per offset.
    fn prefix(model: &[Option<u8>]) -> Vec<u8> {
        model.iter().map_while(|b| *b).collect()
    }

    proptest::proptest! {
        /// Writes (first-written bytes kept, conflicts reported) and consumes (offset `x`
        /// becomes 0, bytes and presence alike) hold to a model of one optional byte per
        /// offset, for windows that are and are not whole words, with out-of-order bytes
        /// left after a consume.
        #[test]
        fn writes_and_consumes_hold_to_a_byte_model(
            window in proptest::sample::select(vec![64usize, 100, 200, 1024]),
            ops in proptest::collection::vec(
                (proptest::bool::weighted(0.7), 0usize..1100, proptest::collection::vec(0u8..4, 0..150)),
                1..40,
            ),
        ) {
            let s = Slabs::try_new(2, window).unwrap();
            let mut cursor = 0;
            let r = s.claim(&mut cursor, Instant(1), Duration(1 << 40)).unwrap();
            let mut model: Vec<Option<u8>> = vec![None; window];
            for (write, at, bytes) in ops {
                if write {
                    let (len, grew, conflict) = s.write_checked(r, at, &bytes);
                    let before = prefix(&model).len();
                    let mut want_conflict = false;
                    for (k, &b) in bytes.iter().enumerate() {
                        let Some(m) = model.get_mut(at + k) else { break };
                        match m {
                            None => *m = Some(b),
                            Some(old) => want_conflict |= *old != b,
                        }
                    }
                    let after = prefix(&model).len();
                    proptest::prop_assert_eq!((len, grew, conflict), (after, after > before, want_conflict));
                } else {
                    s.consume(r, at);
                    let x = at.min(window);
                    model = model.iter().skip(x).copied().chain(core::iter::repeat_n(None, x)).collect();
                }
                let mut out = vec![0u8; window];
                let n = s.read_prefix(r, &mut out);
                proptest::prop_assert_eq!(&out[..n], &prefix(&model)[..]);
            }
        }
    }
}
