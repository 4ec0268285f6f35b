//! The generic timer: the virtual counter as [`cadence_core::time::Clock`] and a deadline
//! [`cadence_core::time::Sleeper`] that waits in `WFI` with the virtual timer armed.
//!
//! Facts (Arm ARM DDI 0487, D11 "The Generic Timer", D17.10 registers):
//! - CNTFRQ_EL0 holds the counter's frequency, written by firmware (QEMU sets it: 62.5
//!   MHz on older CPU models, 1 GHz on newer ones — read, never assumed); a device
//!   tree's `clock-frequency` on the timer node overrides it (see [`crate::dt`]).
//! - CNTVCT_EL0 is the virtual count (physical count − CNTVOFF_EL2, which the boot code
//!   zeroes when it enters at EL2). Reads may be speculated, so an `ISB` precedes each
//!   (D11.2.2, "Reading the counter").
//! - CNTV_CVAL_EL0 is the compare value; CNTV_CTL_EL0 has ENABLE \[0\], IMASK \[1\], ISTATUS
//!   \[2\]; the timer condition is met when CNTVCT − CVAL ≥ 0 and then, with ENABLE set and
//!   IMASK clear, the timer asserts its PPI (INTID 27 on `virt`, from the tree).
//! - `WFI` wakes on a pending IRQ even while PSTATE.I masks it (D1.16.2 "Wait for
//!   Interrupt": "an IRQ interrupt ... regardless of the value of PSTATE.I"), so the
//!   sleeper never takes the interrupt: it keeps IRQs masked, arms the timer, waits,
//!   and disables the timer after waking, which removes the level-sensitive PPI again
//!   (no acknowledge needed). The GIC must forward the PPI to the core (`crate::gic`).

use cadence_core::time::TickRate;
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
use cadence_core::time::{Clock, Instant, Sleeper};

/// CNTV_CTL_EL0.ENABLE.
pub const CTL_ENABLE: u64 = 1 << 0;
/// CNTV_CTL_EL0.IMASK.
pub const CTL_IMASK: u64 = 1 << 1;
/// CNTV_CTL_EL0.ISTATUS.
pub const CTL_ISTATUS: u64 = 1 << 2;

/// Why the timer cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerError {
    /// CNTFRQ_EL0 reads 0 and the tree gives no frequency.
    NoFrequency,
}

impl core::fmt::Display for TimerError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("the generic timer's frequency is 0 (CNTFRQ_EL0) and the device tree gives none")
    }
}

/// The counter's rate: the tree's `clock-frequency` if it has one, else `cntfrq`.
pub fn rate(cntfrq: u64, tree_hz: Option<u64>) -> Result<TickRate, TimerError> {
    TickRate::try_new(tree_hz.unwrap_or(cntfrq)).ok_or(TimerError::NoFrequency)
}

/// CNTFRQ_EL0.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub fn cntfrq() -> u64 {
    let v: u64;
    // SAFETY: reading CNTFRQ_EL0 has no side effects.
    unsafe { core::arch::asm!("mrs {}, cntfrq_el0", out(reg) v, options(nomem, nostack)) };
    v
}

/// CNTVCT_EL0, read after an `ISB` so it is not taken early.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub fn counter() -> u64 {
    let v: u64;
    // SAFETY: reading the virtual counter has no side effects.
    unsafe { core::arch::asm!("isb", "mrs {}, cntvct_el0", out(reg) v, options(nomem, nostack)) };
    v
}

/// Executes one `WFE` (returns on the next event: `SEV`, a cleared exclusive monitor, the
/// event stream, an unmasked interrupt — Arm ARM D1.16.1 — or at once if the event
/// register is set). QEMU's TCG treats `WFE` as a yield and never waits: measured by the
/// boot check's `@wfe` line.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub fn wait_for_event() {
    // SAFETY: waiting for an event touches no memory.
    unsafe { core::arch::asm!("wfe", options(nomem, nostack)) };
}

/// The virtual counter as a `Clock`; copyable, shared by every core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenericClock {
    rate: TickRate,
}

impl GenericClock {
    /// A clock ticking at `rate` (from [`rate`]).
    pub const fn new(rate: TickRate) -> Self {
        GenericClock { rate }
    }

    /// Its rate (also `Clock::rate` on the target).
    pub const fn tick_rate(&self) -> TickRate {
        self.rate
    }
}

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
impl Clock for GenericClock {
    fn now(&self) -> Instant {
        Instant(counter())
    }

    fn rate(&self) -> TickRate {
        self.rate
    }
}

/// A core's deadline sleeper: `WFI` with the virtual timer armed at the deadline.
#[derive(Debug, Default)]
pub struct WfiSleeper {
    /// Sleeps that waited (deadline not yet passed on entry).
    pub sleeps: u64,
    /// Wake-ups that found ISTATUS set: the timer condition, not another event, ended them.
    pub fired: u64,
    /// `WFI`s executed (more than `sleeps` when other events woke the core early).
    pub wfis: u64,
}

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
impl Sleeper for WfiSleeper {
    /// Returns at or after `deadline`: an early wake-up (another interrupt pending) waits
    /// again. Leaves the timer disabled and PSTATE.I as it was (masked).
    fn sleep_until(&mut self, deadline: Instant) -> Instant {
        let mut now = counter();
        if now >= deadline.0 {
            return Instant(now);
        }
        self.sleeps += 1;
        // SAFETY: programming this core's virtual timer touches no memory; the timer is
        // this sleeper's alone (one per core).
        unsafe {
            core::arch::asm!(
                "msr cntv_cval_el0, {cval}",
                "msr cntv_ctl_el0, {ctl}",
                "isb",
                cval = in(reg) deadline.0,
                ctl = in(reg) CTL_ENABLE,
                options(nomem, nostack)
            );
        }
        while now < deadline.0 {
            self.wfis += 1;
            // SAFETY: waiting for an interrupt touches no memory; the armed timer's PPI
            // wakes the core (IRQs masked, so it is not taken).
            unsafe { core::arch::asm!("dsb sy", "wfi", options(nomem, nostack)) };
            now = counter();
        }
        let ctl: u64;
        // SAFETY: reading then disabling this core's timer, as above.
        unsafe {
            core::arch::asm!("mrs {ctl}, cntv_ctl_el0", "msr cntv_ctl_el0, xzr", "isb", ctl = out(reg) ctl,
                options(nomem, nostack));
        }
        if ctl & CTL_ISTATUS != 0 {
            self.fired += 1;
        }
        Instant(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_overrides_cntfrq_and_zero_is_refused() {
        assert_eq!(rate(62_500_000, None).map(TickRate::hz), Ok(62_500_000));
        assert_eq!(rate(62_500_000, Some(1_000_000_000)).map(TickRate::hz), Ok(1_000_000_000));
        assert_eq!(rate(0, None), Err(TimerError::NoFrequency));
        assert_eq!(rate(0, Some(24_000_000)).map(TickRate::hz), Ok(24_000_000));
    }
}
