//! A criterion measurement in TSC cycles, so benches report what DPDK's figures report
//! (the TSC ticks at 2.6 GHz on the machines these benches were recorded on, docs/PERFORMANCE.md).
//!
//! Criterion's time unit is replaced by `rdtsc` deltas; the reports say "cycles".
//! The TSC is invariant on the machines this runs on (constant rate across P-states),
//! so a cycle here is a TSC tick, not a core clock cycle.

// The peers bench uses only `rdtsc`.
#![allow(dead_code)]

use criterion::Throughput;
use criterion::measurement::{Measurement, ValueFormatter};

/// Reads the time-stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // `_rdtsc` has no preconditions: RDTSC is available on every x86_64 CPU.
        #[allow(unused_unsafe)]
        // SAFETY: RDTSC reads a counter and has no memory or state effects.
        unsafe {
            core::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::time::Instant::now().elapsed().as_nanos() as u64
    }
}

/// The benches' criterion set-up: TSC cycles, half a second of warm-up, `measure_s` seconds
/// of measurement in `samples` samples.
pub fn criterion(measure_s: u64, samples: usize) -> criterion::Criterion<TscCycles> {
    criterion::Criterion::default()
        .with_measurement(TscCycles)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(measure_s))
        .sample_size(samples)
}

/// Criterion measurement in TSC cycles.
pub struct TscCycles;

impl Measurement for TscCycles {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        rdtsc()
    }

    fn end(&self, start: u64) -> u64 {
        rdtsc().saturating_sub(start)
    }

    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }

    fn zero(&self) -> u64 {
        0
    }

    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }

    fn formatter(&self) -> &dyn ValueFormatter {
        &CyclesFormatter
    }
}

struct CyclesFormatter;

impl ValueFormatter for CyclesFormatter {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "cycles"
    }

    fn scale_throughputs(&self, _typical: f64, throughput: &Throughput, values: &mut [f64]) -> &'static str {
        // Cycles per element: divide the cycles of one iteration by its element count.
        let n = match *throughput {
            Throughput::Elements(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) => n as f64,
            _ => 1.0,
        };
        for v in values {
            *v /= n;
        }
        "cycles/elem"
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "cycles"
    }
}
