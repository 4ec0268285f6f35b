//! The TSC as Cadence's clock: [`cadence_core::time::Clock`] for deadlines and
//! `embedded_hal::delay::DelayNs` for drivers' datasheet waits.
//!
//! `DelayNs` busy-waits on `rdtsc` (it never halts: a halting sleep is a separate,
//! interrupt-driven API).

use crate::cpu::rdtsc;
use cadence_core::time::{Clock, Instant, TickRate};

/// The time-stamp counter at a calibrated rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TscClock {
    rate: TickRate,
}

impl TscClock {
    /// A clock ticking at `rate`.
    pub const fn new(rate: TickRate) -> Self {
        Self { rate }
    }
}

impl Clock for TscClock {
    fn now(&self) -> Instant {
        Instant(rdtsc())
    }

    fn rate(&self) -> TickRate {
        self.rate
    }
}

impl embedded_hal::delay::DelayNs for TscClock {
    fn delay_ns(&mut self, ns: u32) {
        let end = rdtsc().saturating_add(self.rate.ticks_from_ns(u64::from(ns)).ticks());
        while rdtsc() < end {
            core::hint::spin_loop();
        }
    }
}
