//! The hosted clock: the TSC at a rate calibrated against `CLOCK_MONOTONIC_RAW`, or
//! `CLOCK_MONOTONIC` in nanoseconds where the TSC cannot be trusted.
//!
//! The TSC is used when CPUID `0x80000007:EDX[8]` says it is invariant (constant rate in
//! every P-, C- and T-state; Intel SDM vol. 3B §18.17.1) and the kernel itself runs its
//! clock on it (`/sys/devices/system/clocksource/clocksource0/current_clocksource` is
//! `tsc`: the kernel checked that the TSCs of all CPUs agree). Its rate is measured
//! twice over 50 ms against `CLOCK_MONOTONIC_RAW` (which NTP does not slew); the two
//! measurements must agree within 0.1 % (three tries). Otherwise [`HostClock`] is
//! `CLOCK_MONOTONIC` read through the vDSO, one tick per nanosecond, and says why.
//!
//! Deadlines become `CLOCK_MONOTONIC` times for `clock_nanosleep` through
//! [`HostClock::monotonic_deadline`], which pairs a fresh TSC read with a fresh
//! `CLOCK_MONOTONIC` read each time: only the time *remaining* to the deadline is
//! converted at the calibrated rate, so NTP slewing `CLOCK_MONOTONIC` away from the TSC
//! over hours never shifts a wake-up. The pair taken at calibration is kept in
//! [`Calibration`] for the record.

use cadence_core::time::{Clock, ClockMap, ClockPair, Duration, Instant, TickRate};
use core::fmt;

/// How many ticks per second the fallback clock runs at.
const NS_PER_S: u64 = 1_000_000_000;
/// One calibration window.
const WINDOW: std::time::Duration = std::time::Duration::from_millis(50);
/// Two windows must agree within this (parts per million): 0.1 %.
const AGREE_PPM: u64 = 1_000;
/// The least span over which [`HostClock::map_from`] measures the TSC against
/// `CLOCK_MONOTONIC`.
pub const MAP_WINDOW: std::time::Duration = std::time::Duration::from_millis(200);
/// Calibration attempts before giving up on the TSC.
const TRIES: usize = 3;

/// Which counter a [`HostClock`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockSource {
    /// `rdtsc`, at the calibrated rate.
    Tsc,
    /// `CLOCK_MONOTONIC` nanoseconds (1 GHz).
    Monotonic,
}

/// Why the TSC was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TscRefused {
    /// Not an x86_64 machine.
    NotX86,
    /// CPUID says the TSC is not invariant.
    NotInvariant,
    /// The kernel's clocksource is not the TSC (it found the TSC unreliable).
    KernelDistrustsTsc,
    /// The calibration windows disagreed by more than 0.1 % (ppm of the worst try).
    CalibrationDisagrees {
        /// The disagreement of the last try, in parts per million.
        ppm: u64,
    },
}

impl fmt::Display for TscRefused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TscRefused::NotX86 => f.write_str("no TSC on this architecture"),
            TscRefused::NotInvariant => f.write_str("TSC not invariant (CPUID 0x80000007 EDX[8] clear)"),
            TscRefused::KernelDistrustsTsc => f.write_str("the kernel's clocksource is not tsc"),
            TscRefused::CalibrationDisagrees { ppm } => {
                write!(f, "TSC calibration windows disagree by {ppm} ppm (> {AGREE_PPM})")
            }
        }
    }
}

/// The measurements behind a TSC clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    /// The two window rates, in Hz.
    pub windows_hz: [u64; 2],
    /// Their disagreement in parts per million.
    pub ppm: u64,
    /// TSC at the calibration anchor.
    pub anchor_tsc: u64,
    /// `CLOCK_MONOTONIC` (ns) at the same moment.
    pub anchor_monotonic_ns: u64,
}

/// The hosted [`Clock`]: `Copy + Send + Sync`, cheap to hand to every worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostClock {
    source: ClockSource,
    rate: TickRate,
    calibration: Option<Calibration>,
}

impl HostClock {
    /// The TSC when it can be trusted (see the module docs), else `CLOCK_MONOTONIC`;
    /// the second value says why the TSC was refused. Takes 100–300 ms (calibration).
    pub fn calibrate() -> (Self, Option<TscRefused>) {
        match Self::tsc() {
            Ok(c) => (c, None),
            Err(why) => (Self::monotonic(), Some(why)),
        }
    }

    /// The TSC clock, or why not.
    pub fn tsc() -> Result<Self, TscRefused> {
        tsc_impl::check()?;
        let mut ppm = u64::MAX;
        for _ in 0..TRIES {
            let (a, b) = (tsc_impl::window(), tsc_impl::window());
            ppm = a.abs_diff(b).saturating_mul(1_000_000) / a.max(1);
            if ppm <= AGREE_PPM {
                let hz = a / 2 + b / 2;
                let (anchor_tsc, anchor_monotonic_ns) = tsc_impl::pair(libc::CLOCK_MONOTONIC);
                let rate = TickRate::try_new(hz).ok_or(TscRefused::CalibrationDisagrees { ppm })?;
                let calibration = Calibration { windows_hz: [a, b], ppm, anchor_tsc, anchor_monotonic_ns };
                return Ok(Self { source: ClockSource::Tsc, rate, calibration: Some(calibration) });
            }
        }
        Err(TscRefused::CalibrationDisagrees { ppm })
    }

    /// `CLOCK_MONOTONIC` in nanoseconds.
    pub const fn monotonic() -> Self {
        Self { source: ClockSource::Monotonic, rate: GHZ, calibration: None }
    }

    /// Which counter it reads.
    pub fn source(&self) -> ClockSource {
        self.source
    }

    /// The TSC calibration, `None` for the monotonic clock.
    pub fn calibration(&self) -> Option<Calibration> {
        self.calibration
    }

    /// `deadline` as a `CLOCK_MONOTONIC` time, for `clock_nanosleep(TIMER_ABSTIME)`;
    /// a deadline already passed gives the current monotonic time.
    pub fn monotonic_deadline(&self, deadline: Instant) -> libc::timespec {
        match self.source {
            ClockSource::Monotonic => timespec(deadline.ticks()),
            ClockSource::Tsc => {
                let (now, mono) = tsc_impl::pair(libc::CLOCK_MONOTONIC);
                let left = self.rate.ns(Duration(deadline.ticks().saturating_sub(now)));
                timespec(mono.saturating_add(left))
            }
        }
    }
}

impl HostClock {
    /// A map from `clock`'s nanoseconds (`CLOCK_MONOTONIC`: the XDP program's
    /// `bpf_ktime_get_ns`; `CLOCK_REALTIME`: `TPACKET_V3`'s `tp_sec`/`tp_nsec`) to this
    /// clock's ticks, for the receive paths' arrival stamps
    /// ([`cadence_core::time::ClockMap`]).
    ///
    /// `CLOCK_MONOTONIC` on the monotonic clock is the identity; `CLOCK_REALTIME` there is
    /// an offset. On the TSC the rate is measured against `CLOCK_MONOTONIC` between the
    /// calibration's anchor and a fresh pair of readings at least [`MAP_WINDOW`] later
    /// (waiting out the rest of it if the calibration was more recent: start-up only). That
    /// takes in NTP's frequency correction, which `CLOCK_MONOTONIC` and `CLOCK_REALTIME`
    /// share and the calibration against `CLOCK_MONOTONIC_RAW` leaves out (tens of ppm: tens
    /// of µs per second of run). The map goes through a fresh pair of `clock` and the TSC.
    ///
    /// The map is not re-anchored during the run: what it cannot follow is NTP changing its
    /// correction afterwards (the two brackets' width over the window, ~0.1 ppm, plus
    /// whatever NTP does), and a step of `CLOCK_REALTIME`, which shifts every later
    /// `AF_PACKET` stamp by the step (a stamp then in the worker's future is counted from the
    /// poll).
    pub fn map_from(&self, clock: libc::clockid_t) -> ClockMap {
        if self.source == ClockSource::Monotonic {
            if clock == libc::CLOCK_MONOTONIC {
                return ClockMap::identity();
            }
            return ClockMap::try_new(self.pair_with(clock), self.rate).unwrap_or(ClockMap::identity());
        }
        let rate = self.calibration.and_then(|c| {
            let window = MAP_WINDOW.as_nanos() as u64;
            let waited = clock_ns(libc::CLOCK_MONOTONIC).saturating_sub(c.anchor_monotonic_ns);
            if waited < window {
                std::thread::sleep(std::time::Duration::from_nanos(window - waited));
            }
            let anchor = ClockPair { ns: c.anchor_monotonic_ns, ticks: Instant(c.anchor_tsc) };
            ClockMap::from_pairs(anchor, self.pair_with(libc::CLOCK_MONOTONIC))
        });
        let here = self.pair_with(clock);
        // The rate fits the fixed point (a TSC or 1 GHz); identity only if it did not.
        rate.map(|m| m.through(here)).or_else(|| ClockMap::try_new(here, self.rate)).unwrap_or(ClockMap::identity())
    }

    /// [`HostClock::map_from`] `CLOCK_MONOTONIC`: the XDP program's `bpf_ktime_get_ns`.
    pub fn monotonic_map(&self) -> ClockMap {
        self.map_from(libc::CLOCK_MONOTONIC)
    }

    /// [`HostClock::map_from`] `CLOCK_REALTIME`: `TPACKET_V3`'s `tp_sec`/`tp_nsec`.
    pub fn realtime_map(&self) -> ClockMap {
        self.map_from(libc::CLOCK_REALTIME)
    }

    /// A reading of `clock` (ns) and of this clock taken together: the best of five
    /// brackets `now; clock_gettime; now`, this clock taken as the bracket's middle.
    fn pair_with(&self, clock: libc::clockid_t) -> ClockPair {
        let mut best = (u64::MAX, ClockPair::default());
        for _ in 0..5 {
            let a = self.now().ticks();
            let ns = clock_ns(clock);
            let b = self.now().ticks();
            let width = b.wrapping_sub(a);
            if width < best.0 {
                best = (width, ClockPair { ns, ticks: Instant(a + width / 2) });
            }
        }
        best.1
    }
}

impl Clock for HostClock {
    #[inline]
    fn now(&self) -> Instant {
        match self.source {
            ClockSource::Tsc => Instant(tsc_impl::rdtsc()),
            ClockSource::Monotonic => Instant(clock_ns(libc::CLOCK_MONOTONIC)),
        }
    }

    fn rate(&self) -> TickRate {
        self.rate
    }
}

/// 1 GHz.
const GHZ: TickRate = match TickRate::try_new(NS_PER_S) {
    Some(r) => r,
    None => unreachable!(),
};

/// `clock_gettime(clock)` in nanoseconds.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the monotonic clocks always exist on
    // Linux, so the call cannot fail and leaves `ts` set.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).saturating_mul(NS_PER_S).saturating_add(ts.tv_nsec as u64)
}

/// Nanoseconds as a `timespec`.
pub fn timespec(ns: u64) -> libc::timespec {
    libc::timespec { tv_sec: (ns / NS_PER_S) as libc::time_t, tv_nsec: (ns % NS_PER_S) as libc::c_long }
}

#[cfg(target_arch = "x86_64")]
mod tsc_impl {
    use super::{TscRefused, WINDOW, clock_ns};

    pub(super) use crate::cpu::rdtsc;

    pub(super) fn check() -> Result<(), TscRefused> {
        if !crate::cpu::features().invariant_tsc {
            return Err(TscRefused::NotInvariant);
        }
        let src = "/sys/devices/system/clocksource/clocksource0/current_clocksource";
        match std::fs::read_to_string(src) {
            Ok(s) if s.trim() != "tsc" => Err(TscRefused::KernelDistrustsTsc),
            // Unreadable (no sysfs in a container): CPUID's word stands.
            _ => Ok(()),
        }
    }

    /// A (TSC, `clock` ns) pair read as close together as possible: the best of five
    /// brackets `rdtsc; clock_gettime; rdtsc`, the TSC taken as the bracket's middle.
    pub(super) fn pair(clock: libc::clockid_t) -> (u64, u64) {
        let mut best = (u64::MAX, 0, 0);
        for _ in 0..5 {
            let a = rdtsc();
            let ns = clock_ns(clock);
            let b = rdtsc();
            let width = b.wrapping_sub(a);
            if width < best.0 {
                best = (width, a + width / 2, ns);
            }
        }
        (best.1, best.2)
    }

    /// TSC ticks per second over one window against `CLOCK_MONOTONIC_RAW`.
    pub(super) fn window() -> u64 {
        let (t0, n0) = pair(libc::CLOCK_MONOTONIC_RAW);
        std::thread::sleep(WINDOW);
        let (t1, n1) = pair(libc::CLOCK_MONOTONIC_RAW);
        let dns = n1.saturating_sub(n0).max(1) as u128;
        (t1.wrapping_sub(t0) as u128 * 1_000_000_000 / dns) as u64
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod tsc_impl {
    use super::TscRefused;

    pub(super) fn check() -> Result<(), TscRefused> {
        Err(TscRefused::NotX86)
    }
    pub(super) fn rdtsc() -> u64 {
        0
    }
    pub(super) fn pair(clock: libc::clockid_t) -> (u64, u64) {
        (0, super::clock_ns(clock))
    }
    pub(super) fn window() -> u64 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ticks of `c` over 200 ms of `CLOCK_MONOTONIC`, in seconds of `c`'s rate.
    fn seconds_per_second(c: &HostClock) -> f64 {
        let (t0, m0) = (c.now(), clock_ns(libc::CLOCK_MONOTONIC));
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (t1, m1) = (c.now(), clock_ns(libc::CLOCK_MONOTONIC));
        let clock_s = c.rate().ns(t1.saturating_since(t0)) as f64;
        clock_s / (m1 - m0) as f64
    }

    #[test]
    fn calibrated_clock_keeps_time_with_clock_monotonic() {
        let (c, refused) = HostClock::calibrate();
        println!("clock {:?} at {} Hz (refused: {refused:?}), {:?}", c.source(), c.rate().hz(), c.calibration());
        let r = seconds_per_second(&c);
        assert!((0.8..1.2).contains(&r), "{:?} clock ran {r} s per second", c.source());
        if c.source() == ClockSource::Tsc {
            let cal = c.calibration().unwrap();
            assert!(cal.ppm <= AGREE_PPM);
            assert!(refused.is_none());
        } else {
            assert!(refused.is_some(), "fell back without a reason");
        }
    }

    #[test]
    fn monotonic_clock_is_nanoseconds() {
        let c = HostClock::monotonic();
        assert_eq!(c.rate().hz(), 1_000_000_000);
        let r = seconds_per_second(&c);
        assert!((0.8..1.2).contains(&r));
        let ts = c.monotonic_deadline(Instant(5_000_000_123));
        assert_eq!((ts.tv_sec, ts.tv_nsec), (5, 123));
    }

    #[test]
    fn deadlines_convert_to_clock_monotonic() {
        let (c, _) = HostClock::calibrate();
        let d = c.now().saturating_add(c.rate().ticks_from_ms(100));
        let ts = c.monotonic_deadline(d);
        let target = ts.tv_sec as u64 * NS_PER_S + ts.tv_nsec as u64;
        let now = clock_ns(libc::CLOCK_MONOTONIC);
        let ahead = target as i64 - now as i64;
        assert!((90_000_000..=100_100_000).contains(&ahead), "100 ms deadline is {ahead} ns ahead");
        // A passed deadline maps to (about) now.
        let ts = c.monotonic_deadline(Instant(0));
        let past = ts.tv_sec as u64 * NS_PER_S + ts.tv_nsec as u64;
        let now = clock_ns(libc::CLOCK_MONOTONIC);
        if c.source() == ClockSource::Tsc {
            assert!(now.abs_diff(past) < 10_000_000);
        }
    }

    #[test]
    fn maps_from_the_kernel_clocks_agree_with_a_fresh_reading() {
        let (c, _) = HostClock::calibrate();
        assert_eq!(HostClock::monotonic().map_from(libc::CLOCK_MONOTONIC), ClockMap::identity());
        for clock in [libc::CLOCK_MONOTONIC, libc::CLOCK_REALTIME] {
            for hc in [c, HostClock::monotonic()] {
                let map = hc.map_from(clock);
                std::thread::sleep(std::time::Duration::from_millis(20));
                // A stamp taken now maps to (about) now: within 1 ms, whatever the load.
                let (t0, ns, t1) = (hc.now(), clock_ns(clock), hc.now());
                let mapped = map.ticks(ns);
                let slack = hc.rate().ticks_from_ms(1).ticks();
                assert!(
                    mapped + slack >= t0.ticks() && mapped <= t1.ticks() + slack,
                    "{:?} clock {clock}: {mapped} not in [{t0:?}, {t1:?}] ± 1 ms",
                    hc.source()
                );
            }
        }
    }

    #[test]
    fn clock_is_copy_send_sync() {
        fn check<T: Copy + Send + Sync>() {}
        check::<HostClock>();
    }
}
