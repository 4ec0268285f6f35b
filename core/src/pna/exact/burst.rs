//! Burst lookups: the primary lookup API.
//!
//! A burst overlaps the cache misses of up to [`BURST`] keys by doing the work in phases, with a
//! software prefetch ([`crate::sync::prefetch`], a no-op where SSE is off) one phase ahead:
//!
//! 1. hash every key and prefetch its bucket's header line;
//! 2. load each `seq`, compare the seven tags with the key's signature (a bit mask of
//!    candidates), prefetch the first candidate slot — the second line, one per hit — or, on an
//!    `add_on_miss` table with no candidate, the first free slot that an add would write;
//! 3. read each candidate slot (key, params, deadline) and write a match straight to the
//!    caller's output as a hit;
//! 4. one `fence(Acquire)`, then re-load every `seq` to validate each key's snapshot; write
//!    the misses (and turn an expired match into one).
//!
//! A key whose snapshot did not validate (a writer was in its bucket) is looked up again alone
//! with the retrying single-key path. A validated miss keeps its snapshot (`seq` and the first
//! free way) in the [`Miss`] token, so that `add_on_miss` right after it locks the bucket with
//! `compare_exchange(seq → seq + 1)` and writes the free way without scanning the bucket again
//! — valid exactly when no writer entered the bucket since (`ExactTable::insert_seen`).
//!
//! Instructions per key (`core/examples/tablecount.rs` under cachegrind, 64K table, 2026-12-01):
//! hit 203 → 160, miss 194 → 171, lookup + add-on-miss 390 → 275 with these changes (no
//! intermediate `Found` array, one 32-bit compare per way, bucket references kept across
//! phases, counters added once per burst, the add's snapshot).

use super::super::IdleTimeout;
use super::super::{Ordering, fence};
use super::{Bucket, EntryHandle, ExactTable, Hit, LIVE, Local, Lookup, Miss, WAYS, sig_of, tag_action, tag_profile};
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
        let (Some(keys), Some(out)) = (keys.get(..n), out.get_mut(..n)) else { return 0 };
        let mut hash = [0u64; BURST];
        let mut bucket: [Option<&Bucket>; BURST] = [None; BURST];
        let mut seq = [0u64; BURST];
        let mut cand = [0u32; BURST];
        // The first free way of a bucket with no candidate (`WAYS`: none, or not looked at).
        let mut first_free = [WAYS as u8; BURST];
        // What phase 3 concluded for each key, from a snapshot phase 4 has yet to validate.
        let mut said = [Said::Miss; BURST];

        // Phase 1: hash, prefetch each header line.
        for ((key, h), bk) in keys.iter().zip(hash.iter_mut()).zip(bucket.iter_mut()) {
            *h = self.hash(key);
            *bk = self.buckets.get((*h & self.mask) as usize);
            if let Some(b) = bk {
                prefetch(*b);
            }
        }
        // Phase 2: open each snapshot (`seq`), signature compare over the seven tags (branch-free),
        // prefetch the first candidate slot.
        for ((((h, bk), c), s), fw) in
            hash.iter().zip(bucket.iter()).zip(cand.iter_mut()).zip(seq.iter_mut()).zip(first_free.iter_mut()).take(n)
        {
            let Some(bk) = bk else {
                *s = 1; // never validates: the key goes to the single-key path
                continue;
            };
            *s = bk.seq.load(Ordering::Acquire);
            let want = sig_of(*h);
            let mut m = 0u32;
            for w in 0..WAYS {
                m |= u32::from(bk.tag(w) as u32 == want) << w;
            }
            *c = m;
            // A hit reads its candidate slot next; a probable miss on an add-on-miss table will
            // likely write the first free slot, and without the line in cache that store would
            // stall the next bucket lock (a locked instruction drains the store buffer).
            let way = if m != 0 {
                m.trailing_zeros() as usize
            } else if self.cfg.add_on_miss {
                let mut free = 0u32;
                for w in 0..WAYS {
                    free |= u32::from(bk.tag(w) & LIVE == 0) << w;
                }
                // Kept for `add_on_miss` (`Miss::free`): the way an add would take.
                *fw = free.trailing_zeros().min(WAYS as u32) as u8;
                *fw as usize
            } else {
                WAYS
            };
            if way < WAYS
                && let Some(slot) = self.slot((*h & self.mask) as usize, way)
            {
                prefetch(slot);
            }
        }
        // Phase 3: read the candidate slots; a match is written out as a hit at once (phase 4
        // turns it back into a miss if its snapshot does not validate or the entry expired).
        let auto_delete = self.cfg.idle_timeout == IdleTimeout::AutoDelete;
        for ((((key, h), c), (bk, sd)), o) in
            keys.iter().zip(hash.iter()).zip(cand.iter()).zip(bucket.iter().zip(said.iter_mut())).zip(out.iter_mut())
        {
            let mut m = *c;
            let Some(bk) = bk else { continue };
            let b = (*h & self.mask) as usize;
            while m != 0 {
                let w = m.trailing_zeros() as usize;
                m &= m - 1;
                let Some(slot) = self.slot(b, w) else { continue };
                if slot.key_eq(key) {
                    let tag = bk.tag(w);
                    let params = slot.read_data();
                    *sd = if auto_delete && slot.deadline.load(Ordering::Relaxed) <= now.ticks() {
                        Said::Expired
                    } else {
                        Said::Hit
                    };
                    *o = Lookup::Hit(Hit {
                        action: tag_action(tag),
                        params,
                        profile: tag_profile(tag),
                        handle: EntryHandle { key: *key, bucket: b as u32, way: w as u8 },
                    });
                    break;
                }
            }
        }
        // Phase 4: validate every snapshot at once.
        fence(Ordering::Acquire);
        // Counted here: the keys whose snapshot validated (`lookup_hashed` counts its own).
        let (mut hits, mut retried_hits, mut misses, mut expired) = (0u64, 0usize, 0u64, 0u64);
        let table = self.id as u32;
        for (((((key, h), s), (bk, sd)), fw), o) in keys
            .iter()
            .zip(hash.iter())
            .zip(seq.iter())
            .zip(bucket.iter().zip(said.iter()))
            .zip(first_free.iter())
            .zip(out.iter_mut())
        {
            let clean = *s & 1 == 0 && bk.is_some_and(|bk| bk.seq.load(Ordering::Relaxed) == *s);
            if !clean {
                local.stats.read_retries += 1;
                *o = self.lookup_hashed(local, key, *h, now);
                retried_hits += usize::from(matches!(o, Lookup::Hit(_)));
                continue;
            }
            match sd {
                Said::Hit => hits += 1,
                Said::Expired => {
                    expired += 1;
                    misses += 1;
                    *o = Lookup::Miss(Miss::new(*key, *h));
                }
                Said::Miss => {
                    misses += 1;
                    // The snapshot validated and the key matched none of its ways: an add may
                    // start from it (`ExactTable::insert_seen`).
                    *o = Lookup::Miss(Miss { key: *key, hash: *h, seen: *s, table, free: *fw });
                }
            }
        }
        local.stats.hits += hits;
        local.stats.misses += misses;
        local.stats.expired_misses += expired;
        hits as usize + retried_hits
    }
}

/// Phase 3's conclusion for one key of a burst.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Said {
    Miss,
    Hit,
    Expired,
}
