//! A fixed-size log-bucket histogram of tick counts ([`LogHistogram`]): Metronome's vacations,
//! the hosted sleeper's lateness, the dataplane's per-packet sojourn ([`crate::latency`]) and
//! the simulators all use this one.

use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Sub-buckets per power of two (3 bits: bucket width ≤ 1/8 of its lower bound).
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;

/// Buckets of a [`LogHistogram`]: 8 exact ones for 0..8, then 8 per power of two up to 2^64.
pub const HISTOGRAM_BUCKETS: usize = ((64 - SUB_BITS + 1) * SUB as u32) as usize;

/// Index of the bucket holding `v`.
pub fn histogram_bucket(v: u64) -> usize {
    if v < SUB {
        v as usize
    } else {
        let e = 63 - v.leading_zeros();
        let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
        (e - SUB_BITS + 1) as usize * SUB as usize + sub as usize
    }
}

/// `[lo, hi)` of bucket `i` (`hi` saturates at `u64::MAX` for the last bucket).
pub fn histogram_bucket_bounds(i: usize) -> (u64, u64) {
    let i = i.min(HISTOGRAM_BUCKETS - 1) as u64;
    if i < SUB {
        (i, i + 1)
    } else {
        let shift = (i / SUB) as u32 - 1;
        let lo = (SUB + i % SUB) << shift;
        (lo, lo.saturating_add(1 << shift))
    }
}

/// A fixed-size log-bucket histogram of `u64` values (ticks); no allocation, 4 KiB.
///
/// Quantiles come back as the middle of the bucket that holds them: within 1/16 of the true
/// value (exact below 8).
#[derive(Clone, PartialEq, Eq)]
pub struct LogHistogram {
    counts: [u64; HISTOGRAM_BUCKETS],
    total: u64,
}

impl fmt::Debug for LogHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogHistogram")
            .field("total", &self.total)
            .field("p50", &self.quantile(0.5))
            .field("p99", &self.quantile(0.99))
            .finish()
    }
}

impl Default for LogHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LogHistogram {
    /// An empty histogram.
    pub const fn new() -> Self {
        Self { counts: [0; HISTOGRAM_BUCKETS], total: 0 }
    }

    /// Adds one value.
    pub fn record(&mut self, v: u64) {
        self.record_n(v, 1);
    }

    /// Adds `n` copies of a value.
    pub fn record_n(&mut self, v: u64, n: u64) {
        let i = histogram_bucket(v);
        self.counts[i] = self.counts[i].saturating_add(n);
        self.total = self.total.saturating_add(n);
    }

    /// Adds every value of `other`.
    pub fn merge(&mut self, other: &LogHistogram) {
        for (c, o) in self.counts.iter_mut().zip(other.counts.iter()) {
            *c = c.saturating_add(*o);
        }
        self.total = self.total.saturating_add(other.total);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `q`-quantile (`q` clamped into `[0, 1]`), `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let q = if q.is_nan() { 0.5 } else { q.clamp(0.0, 1.0) };
        // Rank of the quantile, 1-based: ceil(q·n), at least 1.
        let rank = libm::ceil(q * self.total as f64).max(1.0) as u64;
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen = seen.saturating_add(c);
            if seen >= rank {
                let (lo, hi) = histogram_bucket_bounds(i);
                return Some(lo + (hi - lo) / 2);
            }
        }
        None
    }
}

/// A [`LogHistogram`] that several cores may record into (Relaxed counters).
pub(crate) struct AtomicHistogram {
    counts: [AtomicU64; HISTOGRAM_BUCKETS],
}

impl AtomicHistogram {
    pub(crate) const fn new() -> Self {
        Self { counts: [const { AtomicU64::new(0) }; HISTOGRAM_BUCKETS] }
    }

    pub(crate) fn record(&self, v: u64) {
        self.counts[histogram_bucket(v)].fetch_add(1, Relaxed);
    }

    pub(crate) fn snapshot(&self) -> LogHistogram {
        let mut h = LogHistogram::new();
        for (i, c) in self.counts.iter().enumerate() {
            let n = c.load(Relaxed);
            h.counts[i] = n;
            h.total = h.total.saturating_add(n);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rel(a: f64, b: f64) -> f64 {
        (a - b).abs() / b
    }

    #[test]
    fn histogram_buckets_cover_every_value() {
        assert_eq!(histogram_bucket(0), 0);
        assert_eq!(histogram_bucket(7), 7);
        assert_eq!(histogram_bucket(8), 8);
        assert_eq!(histogram_bucket(u64::MAX), HISTOGRAM_BUCKETS - 1);
        assert_eq!(histogram_bucket_bounds(HISTOGRAM_BUCKETS - 1).1, u64::MAX);
        // Contiguous buckets.
        for i in 1..HISTOGRAM_BUCKETS {
            assert_eq!(histogram_bucket_bounds(i - 1).1, histogram_bucket_bounds(i).0, "bucket {i}");
        }
        let mut h = LogHistogram::new();
        assert_eq!(h.quantile(0.5), None);
        for v in 1..=100u64 {
            h.record(v);
        }
        let mut g = LogHistogram::new();
        g.merge(&h);
        assert_eq!(g.count(), 100);
        assert_eq!(g.quantile(0.0), Some(1));
        let p99 = g.quantile(0.99).expect("non-empty");
        assert!(rel(p99 as f64, 99.0) <= 1.0 / 16.0, "p99 = {p99}");
    }

    proptest! {
        #![proptest_config(crate::testing::proptest_config(256))]
        #[test]
        fn histogram_quantiles_are_within_a_sixteenth(mut vs in proptest::collection::vec(0u64..1u64 << 40, 1..crate::testing::miri_or(300, 30)), q in 0.0f64..=1.0) {
            let mut h = LogHistogram::new();
            for &v in &vs {
                h.record(v);
                let (lo, hi) = histogram_bucket_bounds(histogram_bucket(v));
                prop_assert!(lo <= v && v < hi);
            }
            vs.sort_unstable();
            let rank = libm::ceil(q * vs.len() as f64).max(1.0) as usize;
            let exact = vs[rank - 1] as f64;
            let got = h.quantile(q).expect("non-empty") as f64;
            prop_assert!((got - exact).abs() <= exact / 16.0 + 0.5, "q = {q}: {got} vs {exact}");
        }
    }
}
