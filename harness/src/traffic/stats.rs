//! Latency samples and percentiles.

use serde::Serialize;

/// Latency samples in ns.
#[derive(Debug, Clone, Default)]
pub struct Latencies(Vec<u64>);

/// Summary of a set of latencies (µs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct LatencySummary {
    pub samples: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl Latencies {
    /// Adds a sample.
    pub fn push(&mut self, ns: u64) {
        self.0.push(ns);
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Nearest-rank percentile (`p` in 0..=100) in ns; `None` without samples.
    pub fn percentile(&self, p: f64) -> Option<u64> {
        let mut v = self.0.clone();
        v.sort_unstable();
        percentile_sorted(&v, p)
    }

    /// p50, p99 and max.
    pub fn summary(&self) -> LatencySummary {
        let mut v = self.0.clone();
        v.sort_unstable();
        let us = |x: Option<u64>| x.map_or(0.0, |n| n as f64 / 1000.0);
        LatencySummary {
            samples: v.len() as u64,
            p50_us: us(percentile_sorted(&v, 50.0)),
            p99_us: us(percentile_sorted(&v, 99.0)),
            max_us: us(v.last().copied()),
        }
    }
}

fn percentile_sorted(v: &[u64], p: f64) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    // Nearest rank: the smallest value with at least p% of the samples at or below it.
    let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
    Some(v[rank.clamp(1, v.len()) - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut l = Latencies::default();
        assert_eq!(l.percentile(50.0), None);
        for n in (1..=100).rev() {
            l.push(n * 1000);
        }
        assert_eq!(l.percentile(50.0), Some(50_000));
        assert_eq!(l.percentile(99.0), Some(99_000));
        assert_eq!(l.percentile(100.0), Some(100_000));
        assert_eq!(l.percentile(0.0), Some(1000));
        let s = l.summary();
        assert_eq!((s.samples, s.p50_us, s.p99_us, s.max_us), (100, 50.0, 99.0, 100.0));
    }
}
