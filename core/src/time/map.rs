//! Another clock's readings as this clock's ticks: where a platform stamps a frame's
//! arrival with a clock of its own (Linux's `CLOCK_MONOTONIC` in an XDP program, the
//! `TPACKET_V3` ring's header), the receive path turns the stamp into ticks of the worker's
//! [`Clock`](super::Clock) with a [`ClockMap`], so the latency accounting
//! ([`crate::latency`]) can count from it.
//!
//! The map is linear: `ticks = anchor_ticks + (ns − anchor_ns) × ticks_per_ns`, the rate a
//! 32.32 fixed-point multiplier (one 64×64→128 multiply and a shift per conversion). Made
//! from one pair of readings taken together and the worker clock's rate
//! ([`ClockMap::try_new`]), or from two such pairs ([`ClockMap::from_pairs`]), which also
//! takes up any difference between the two clocks' rates (a TSC calibrated against
//! `CLOCK_MONOTONIC_RAW`, mapped from `CLOCK_MONOTONIC`, which NTP slews). What is left
//! is the drift of the two clocks after the second pair: the caller re-anchors as often as
//! that matters to it.

use super::{Instant, TickRate};

/// A reading of the other clock (nanoseconds) and of the worker clock taken together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ClockPair {
    /// The other clock, in nanoseconds.
    pub ns: u64,
    /// The worker clock.
    pub ticks: Instant,
}

/// A linear map from another clock's nanoseconds to a worker clock's ticks (module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ClockMap {
    anchor: ClockPair,
    /// Worker ticks per nanosecond of the other clock, × 2³².
    mult: u64,
}

/// The fixed point of [`ClockMap::mult`].
const SHIFT: u32 = 32;

impl ClockMap {
    /// The map of a worker clock that *is* the other clock (one tick per nanosecond, same
    /// origin: the hosted build's `CLOCK_MONOTONIC` clock).
    pub const fn identity() -> Self {
        Self { anchor: ClockPair { ns: 0, ticks: Instant(0) }, mult: 1 << SHIFT }
    }

    /// The map through `anchor` at the worker clock's `rate` (its ticks per second of the
    /// other clock); `None` if the rate does not fit the fixed point (above 4.29 × 10¹⁸ Hz).
    pub const fn try_new(anchor: ClockPair, rate: TickRate) -> Option<Self> {
        let mult = ((rate.hz() as u128) << SHIFT) / 1_000_000_000;
        if mult > u64::MAX as u128 || mult == 0 {
            return None;
        }
        Some(Self { anchor, mult: mult as u64 })
    }

    /// The map through `b` with the rate the two pairs measured; `None` if `b` is not
    /// later than `a` on both clocks or the rate does not fit the fixed point.
    pub const fn from_pairs(a: ClockPair, b: ClockPair) -> Option<Self> {
        if b.ns <= a.ns || b.ticks.0 <= a.ticks.0 {
            return None;
        }
        let mult = (((b.ticks.0 - a.ticks.0) as u128) << SHIFT) / (b.ns - a.ns) as u128;
        if mult > u64::MAX as u128 || mult == 0 {
            return None;
        }
        Some(Self { anchor: b, mult: mult as u64 })
    }

    /// The anchor the map goes through.
    pub const fn anchor(&self) -> ClockPair {
        self.anchor
    }

    /// The same rate through another anchor (a third clock that runs at the same rate as
    /// the one measured, with another origin: `CLOCK_REALTIME` beside `CLOCK_MONOTONIC`).
    pub const fn through(self, anchor: ClockPair) -> Self {
        Self { anchor, ..self }
    }

    /// The other clock's `ns` as worker ticks (saturating at both ends; never 0, which the
    /// pool reads as "not stamped": a time before the worker clock's origin is tick 1).
    #[inline]
    pub fn ticks(&self, ns: u64) -> u64 {
        let a = self.anchor;
        let t = if ns >= a.ns {
            let d = ((ns - a.ns) as u128 * self.mult as u128) >> SHIFT;
            a.ticks.0.saturating_add(u64::try_from(d).unwrap_or(u64::MAX))
        } else {
            let d = ((a.ns - ns) as u128 * self.mult as u128) >> SHIFT;
            a.ticks.0.saturating_sub(u64::try_from(d).unwrap_or(u64::MAX))
        };
        t.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(ns: u64, ticks: u64) -> ClockPair {
        ClockPair { ns, ticks: Instant(ticks) }
    }

    #[test]
    fn identity_is_identity() {
        let m = ClockMap::identity();
        for ns in [1, 1_000, 123_456_789_012, u64::MAX] {
            assert_eq!(m.ticks(ns), ns);
        }
        // 0 is "not stamped": it maps to 1.
        assert_eq!(m.ticks(0), 1);
    }

    #[test]
    fn a_rate_scales_around_the_anchor() {
        // A 3 GHz counter that read 10^12 when the other clock read 5 s.
        let rate = TickRate::try_new(3_000_000_000).unwrap();
        let m = ClockMap::try_new(pair(5_000_000_000, 1_000_000_000_000), rate).unwrap();
        assert_eq!(m.ticks(5_000_000_000), 1_000_000_000_000);
        // 1 µs later: 3000 ticks later; 1 µs earlier: 3000 ticks earlier.
        assert_eq!(m.ticks(5_000_001_000), 1_000_000_003_000);
        assert_eq!(m.ticks(4_999_999_000), 999_999_997_000);
        // A second later and earlier, within a tick (the fixed point truncates).
        assert!(m.ticks(6_000_000_000).abs_diff(1_003_000_000_000) <= 1);
        assert!(m.ticks(4_000_000_000).abs_diff(997_000_000_000) <= 1);
        // Before the counter's origin: tick 1, not 0 and not a wrap.
        let early = ClockMap::try_new(pair(5_000_000_000, 1_000), rate).unwrap();
        assert_eq!(early.ticks(0), 1);
        // Far in the future: saturates.
        let fast = ClockMap::try_new(pair(0, u64::MAX - 10), rate).unwrap();
        assert_eq!(fast.ticks(u64::MAX), u64::MAX);
    }

    #[test]
    fn two_pairs_measure_the_rate() {
        // 2.5 ticks per ns, measured over 100 ms; anchored at the second pair.
        let m = ClockMap::from_pairs(pair(1_000_000_000, 7_000), pair(1_100_000_000, 250_007_000)).unwrap();
        assert_eq!(m.anchor(), pair(1_100_000_000, 250_007_000));
        assert_eq!(m.ticks(1_100_000_400), 250_008_000);
        assert_eq!(m.ticks(1_000_000_000), 7_000);
        // A rate 100 ppm off the nominal one is kept: 1 s after the anchor is 1.0001 s of ticks.
        let slewed = ClockMap::from_pairs(pair(0, 1), pair(1_000_000_000, 1_000_100_001)).unwrap();
        assert!(slewed.ticks(2_000_000_000).abs_diff(2_000_200_001) <= 1);
        // Another origin, the same rate.
        let moved = m.through(pair(5_000_000_000, 9));
        assert_eq!(moved.ticks(5_000_000_400), 1_009);
        // Pairs that do not move forward on both clocks, or a zero rate, give no map.
        assert_eq!(ClockMap::from_pairs(pair(5, 5), pair(5, 9)), None);
        assert_eq!(ClockMap::from_pairs(pair(5, 9), pair(9, 9)), None);
        assert_eq!(ClockMap::from_pairs(pair(0, 1), pair(u64::MAX, 2)), None);
        assert_eq!(ClockMap::try_new(pair(0, 0), TickRate::try_new(u64::MAX).unwrap()), None);
    }
}
