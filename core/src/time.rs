//! Time in clock ticks.
//!
//! An [`Instant`] and a [`Duration`] count ticks of one clock (the TSC on bare metal,
//! virtual ticks in the simulator, a fake counter in tests); a [`TickRate`] converts
//! between ticks and nanoseconds. Conversions saturate instead of overflowing, so no
//! input can make them panic.

use core::fmt;

mod map;
pub use map::{ClockMap, ClockPair};

/// Ticks per second of a clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TickRate {
    hz: u64,
}

impl TickRate {
    /// A rate of `hz` ticks per second, or `None` for zero.
    pub const fn try_new(hz: u64) -> Option<Self> {
        if hz == 0 { None } else { Some(Self { hz }) }
    }

    /// Ticks per second.
    pub const fn hz(self) -> u64 {
        self.hz
    }

    /// Ticks in `ns` nanoseconds (saturating).
    pub const fn ticks_from_ns(self, ns: u64) -> Duration {
        let t = (ns as u128 * self.hz as u128) / 1_000_000_000;
        Duration(if t > u64::MAX as u128 { u64::MAX } else { t as u64 })
    }

    /// Ticks in `us` microseconds (saturating).
    pub const fn ticks_from_us(self, us: u64) -> Duration {
        self.ticks_from_ns(us.saturating_mul(1_000))
    }

    /// Ticks in `ms` milliseconds (saturating).
    pub const fn ticks_from_ms(self, ms: u64) -> Duration {
        self.ticks_from_ns(ms.saturating_mul(1_000_000))
    }

    /// Nanoseconds in `d` (saturating).
    pub const fn ns(self, d: Duration) -> u64 {
        let n = (d.0 as u128 * 1_000_000_000) / self.hz as u128;
        if n > u64::MAX as u128 { u64::MAX } else { n as u64 }
    }
}

/// A point in time, in ticks since the clock's origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Instant(pub u64);

/// A span of time, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Duration(pub u64);

impl Instant {
    /// Ticks since the origin.
    pub const fn ticks(self) -> u64 {
        self.0
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, saturating at the end of time.
    pub const fn saturating_add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl Duration {
    /// Zero ticks.
    pub const ZERO: Duration = Duration(0);

    /// Ticks in this span.
    pub const fn ticks(self) -> u64 {
        self.0
    }
}

/// A monotonic clock.
pub trait Clock {
    /// The current time. Successive calls on one core never go backwards.
    fn now(&self) -> Instant;
    /// How fast this clock ticks.
    fn rate(&self) -> TickRate;
}

/// Idles the calling core until a deadline on its clock: the Metronome's sleep
///.
///
/// On bare metal the platform halts the core until a LAPIC timer interrupt at the TSC
/// deadline; in the simulator time jumps; in tests a fake advances a counter.
///
/// # Obligations of an implementation
///
/// - `sleep_until` reads the time on the same clock the deadline was computed from and
///   returns it: the wake time, taken after the core woke up.
/// - It returns at once when `deadline` has already passed (the returned instant is then
///   `>= deadline`).
/// - It never sleeps unboundedly past `deadline`: the timer it arms is the backstop. How
///   late it may return is not part of the contract (timer and wake-up latency: a few µs
///   on hardware, up to milliseconds under QEMU TCG).
/// - It **may return before `deadline`**, on a wake-up event the implementation documents
///   (a write to a monitored address, an interrupt it does not filter). The returned
///   instant tells the caller which case it is in; a caller that needs the full sleep
///   calls again with the same deadline.
/// - It does not allocate, and it leaves the interrupt flag as it found it.
///
/// A sleeper belongs to one core: it programs that core's timer, so it is typically
/// neither `Send` nor `Sync`.
pub trait Sleeper {
    /// Idles until `deadline` (or an earlier documented wake-up); returns the time at wake-up.
    fn sleep_until(&mut self, deadline: Instant) -> Instant;

    /// Like [`Sleeper::sleep_until`], but may also end as soon as the device writes
    /// `watch` (a receive queue's [`crate::nic::RxQueue::wake_address`]): the "beyond" of
    /// Metronome, a packet arrival ends the sleep and the deadline stays the backstop. The
    /// default ignores `watch`.
    fn sleep_until_watching(&mut self, deadline: Instant, watch: Option<crate::nic::WakeAddr>) -> Instant {
        let _ = watch;
        self.sleep_until(deadline)
    }

    /// Like [`Sleeper::sleep_until_watching`] over several receive queues (a lane's, one per
    /// port): may end as soon as a frame arrives on any of them. The default watches the
    /// first one only (MONITOR arms one line).
    fn sleep_until_arrival(&mut self, deadline: Instant, watch: &[crate::nic::WakeAddr]) -> Instant {
        self.sleep_until_watching(deadline, watch.first().copied())
    }

    /// Whether [`Sleeper::sleep_until_arrival`] on `watch` ends when a frame arrives on any
    /// of those queues (not only at its deadline): a worker stretches an idle lane's sleep
    /// only then ([`crate::worker::IdleSleep`]). The default: no.
    fn wakes_on_arrival(&self, watch: &[crate::nic::WakeAddr]) -> bool {
        let _ = watch;
        false
    }

    /// Sleeps until `deadline` or until `bell` is rung ([`crate::sync::Doorbell`]: the caller
    /// armed it, then found nothing to do); returns at once if it is rung already. The
    /// default watches the bell's word ([`Sleeper::sleep_until_watching`]) — a ring's store
    /// ends the sleep where a watch wakes on stores, else the deadline does; a sleeper whose
    /// platform has a wake call (a futex) overrides it.
    fn sleep_until_rung(&mut self, deadline: Instant, bell: &crate::sync::Doorbell) -> Instant {
        self.sleep_until_watching(deadline, Some(bell.wake_address()))
    }

    /// Whether [`Sleeper::sleep_until_rung`] ends when the bell is rung (with the machine's
    /// wake hook), rather than only at its deadline: a caller sleeps long on a bell only
    /// then. The default: no.
    fn wakes_on_ring(&self) -> bool {
        false
    }
}

/// A bounded wait ran out: the condition never became true before its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Timeout;

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("timed out")
    }
}

/// Polls `cond` until it returns `true` or `timeout` has passed on `clock`.
///
/// This is the only way Cadence waits on hardware: every register or device wait
/// names its deadline (the datasheet's maximum). The condition is checked once more
/// after the deadline, so a condition that became true just in time is not missed.
pub fn poll_until<C: Clock + ?Sized>(
    clock: &C,
    timeout: Duration,
    mut cond: impl FnMut() -> bool,
) -> Result<(), Timeout> {
    let deadline = clock.now().saturating_add(timeout);
    loop {
        if cond() {
            return Ok(());
        }
        if clock.now() >= deadline {
            return if cond() { Ok(()) } else { Err(Timeout) };
        }
        core::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;

    struct FakeClock {
        t: Cell<u64>,
        step: u64,
    }

    impl Clock for FakeClock {
        fn now(&self) -> Instant {
            let t = self.t.get();
            self.t.set(t + self.step);
            Instant(t)
        }
        fn rate(&self) -> TickRate {
            TickRate::try_new(1_000_000_000).unwrap()
        }
    }

    #[test]
    fn conversions_round_trip_and_saturate() {
        let r = TickRate::try_new(2_600_000_000).unwrap();
        assert_eq!(r.ticks_from_us(1), Duration(2_600));
        assert_eq!(r.ns(Duration(2_600)), 1_000);
        assert_eq!(r.ticks_from_ns(u64::MAX), Duration(u64::MAX));
        assert!(TickRate::try_new(0).is_none());
    }

    #[test]
    fn poll_until_succeeds_when_condition_turns_true() {
        let c = FakeClock { t: Cell::new(0), step: 10 };
        let mut n = 0;
        assert_eq!(
            poll_until(&c, Duration(1_000), || {
                n += 1;
                n == 5
            }),
            Ok(())
        );
    }

    #[test]
    fn poll_until_times_out() {
        let c = FakeClock { t: Cell::new(0), step: 10 };
        let mut calls = 0u32;
        let r = poll_until(&c, Duration(100), || {
            calls += 1;
            false
        });
        assert_eq!(r, Err(Timeout));
        assert!(calls >= 10, "polled {calls} times before giving up");
    }
}
