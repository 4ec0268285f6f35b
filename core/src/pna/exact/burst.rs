//! Burst lookups: the primary lookup API.
//!
//! A burst overlaps the cache misses of up to [`BURST`] keys by doing the work in phases, with a
//! software prefetch ([`crate::sync::prefetch`], a no-op where SSE is off) one phase ahead:
//!
//! 1. hash every key and prefetch its bucket's header line;
//! 2. load each `seq`, compare the seven tags with the key's signature (a bit mask of
//!    candidates), prefetch the first candidate slot — the second line, one per hit — or, on an
//!    `add_on_miss` table with no candidate, the first free slot that an add would write;
//! 3. read each candidate slot (key, params, deadline);
//! 4. one `fence(Acquire)`, then re-load every `seq` to validate each key's snapshot.
//!
//! A key whose snapshot did not validate (a writer was in its bucket) is looked up again alone
//! with the retrying single-key path.

use super::super::{Ordering, fence};
use super::{ExactTable, Found, LIVE, Local, Lookup, SIG_MASK, WAYS};
use crate::sync::prefetch::prefetch;
use crate::time::Instant;

/// Keys handled together by one phase pass of [`ExactTable::lookup_burst`].
pub const BURST: usize = 32;

impl<const KW: usize, const DW: usize> ExactTable<KW, DW> {
    /// Looks up `keys` (any number; processed 32 at a time) into `out[i]`; returns the hits.
    /// Keys beyond `out.len()` are not looked up.
    pub fn lookup_burst(
        &self,
        local: &mut Local,
        keys: &[[u64; KW]],
        now: Instant,
        out: &mut [Lookup<KW, DW>],
    ) -> usize {
        let mut hits = 0;
        for (k, o) in keys.chunks(BURST).zip(out.chunks_mut(BURST)) {
            hits += self.lookup_group(local, k, now, o);
        }
        hits
    }

    fn lookup_group(&self, local: &mut Local, keys: &[[u64; KW]], now: Instant, out: &mut [Lookup<KW, DW>]) -> usize {
        let n = keys.len().min(out.len()).min(BURST);
        let mut hash = [0u64; BURST];
        let mut seq = [1u64; BURST];
        let mut cand = [0u32; BURST];
        let mut found: [Option<Found<DW>>; BURST] = [None; BURST];

        // Phase 1: hash, prefetch each header line.
        for i in 0..n {
            let (Some(key), Some(h)) = (keys.get(i), hash.get_mut(i)) else { break };
            *h = self.hash(key);
            if let Some(bucket) = self.buckets.get((*h & self.mask) as usize) {
                prefetch(bucket);
            }
        }
        // Phase 2: open each snapshot (`seq`), signature compare over the seven tags (branch-free),
        // prefetch the first candidate slot.
        for i in 0..n {
            let (Some(h), Some(c), Some(s)) = (hash.get(i), cand.get_mut(i), seq.get_mut(i)) else { break };
            let b = (*h & self.mask) as usize;
            let Some(bucket) = self.buckets.get(b) else { continue };
            *s = bucket.seq.load(Ordering::Acquire);
            let want = (*h >> 32) | LIVE;
            let mut m = 0u32;
            for w in 0..WAYS {
                m |= u32::from(bucket.tag(w) & (SIG_MASK | LIVE) == want) << w;
            }
            *c = m;
            // A hit reads its candidate slot next; a probable miss on an add-on-miss table will
            // likely write the first free slot, and without the line in cache that store would
            // stall the next bucket lock (a locked instruction drains the store buffer).
            let way = if m != 0 {
                m.trailing_zeros()
            } else if self.cfg.add_on_miss {
                let free = (0..WAYS).map(|w| u32::from(bucket.tag(w) & LIVE == 0) << w).fold(0, |a, x| a | x);
                free.trailing_zeros()
            } else {
                u32::MAX
            };
            if let Some(slot) = self.slot(b, way as usize).filter(|_| (way as usize) < WAYS) {
                prefetch(slot);
            }
        }
        // Phase 3: read the candidate slots.
        for i in 0..n {
            let (Some(key), Some(h), Some(c), Some(f)) = (keys.get(i), hash.get(i), cand.get(i), found.get_mut(i))
            else {
                break;
            };
            let b = (*h & self.mask) as usize;
            let mut m = *c;
            while m != 0 {
                let w = m.trailing_zeros() as usize;
                m &= m - 1;
                let Some(slot) = self.slot(b, w) else { continue };
                if slot.key_eq(key) {
                    let Some(bucket) = self.buckets.get(b) else { break };
                    *f = Some(Found {
                        way: w,
                        tag: bucket.tag(w),
                        params: slot.read_data(),
                        deadline: slot.deadline.load(Ordering::Relaxed),
                    });
                    break;
                }
            }
        }
        // Phase 4: validate every snapshot at once.
        fence(Ordering::Acquire);
        let mut hits = 0;
        for i in 0..n {
            let (Some(key), Some(h), Some(s), Some(f), Some(o)) =
                (keys.get(i), hash.get(i), seq.get(i), found.get(i), out.get_mut(i))
            else {
                break;
            };
            let b = (*h & self.mask) as usize;
            let clean = *s & 1 == 0 && self.buckets.get(b).is_some_and(|bk| bk.seq.load(Ordering::Relaxed) == *s);
            *o = if clean {
                // The tag read in phase 3 must agree with the candidate mask of phase 2; both came
                // from the same validated snapshot, so it does.
                debug_assert!(f.is_none_or(|f| f.tag & LIVE != 0));
                self.conclude(local, b, key, *h, *f, now)
            } else {
                local.stats.read_retries += 1;
                self.lookup_hashed(local, key, *h, now)
            };
            hits += usize::from(matches!(o, Lookup::Hit(_)));
        }
        hits
    }
}
