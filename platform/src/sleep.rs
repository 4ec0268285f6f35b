//! Halting until a TSC deadline: [`HaltSleeper`], the platform's
//! [`cadence_core::time::Sleeper`], and the Rust side of the LAPIC
//! interrupt handlers.
//!
//! A sleep arms this core's LAPIC timer for the deadline (TSC-deadline mode, or a
//! one-shot count computed from the calibrated timer rate; [`crate::lapic`]), then
//! executes `sti; hlt` — `sti` takes effect after the next instruction, so an interrupt
//! that became pending after the last check still ends the `hlt` instead of being lost
//! (SDM vol. 2B, STI) — and on wake-up re-reads the TSC, re-arming and halting again
//! until the deadline has passed. The timer handler only sends EOI and counts: the
//! wake-up is the point. Halted TSC cycles are accounted per core
//! ([`crate::smp::CoreStats`]), so busy vs halted cycles (CPU share) is observable.
//!
//! Beyond the deadline: with [`SleepConfig::mwait`] set and CPUID `1:ECX[3]` (MONITOR/MWAIT)
//! present, [`HaltSleeper::sleep_until_written`] arms MONITOR on the address the core
//! will poll next (an RX descriptor's write-back, a used-ring index) and waits in
//! `sti; mwait`, so a device write ends the sleep early; the deadline timer stays the
//! backstop. Off by default: QEMU TCG wakes from MWAIT slowly and KVM hides it.
//!
//! The timer ISR (vector 0xF0, a naked stub) only sends EOI and counts. Per core
//! ([`crate::smp::CoreStats`]): halted cycles, halts, sleeps and interrupts.

use crate::cpu::rdtsc;
use crate::lapic::{self, TimerKind};
use crate::smp::{self, CoreContext};
use cadence_core::nic::WakeAddr;
use cadence_core::sync::Doorbell;
use cadence_core::time::{Instant, Sleeper};
use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicUsize, Ordering};
use x86_64::instructions::interrupts;

/// Knobs of a [`HaltSleeper`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct SleepConfig {
    /// Wait with MONITOR/MWAIT in [`HaltSleeper::sleep_until_written`] and
    /// `sleep_until_watching` (where the CPU has it). Off: they halt until the deadline
    /// like `sleep_until`.
    pub mwait: bool,
}

/// Why no sleeper could be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum SleepError {
    /// The calling core has no context or no timer yet: call `smp::start_aps` first.
    NotReady,
}

impl fmt::Display for SleepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no per-core timer on this core (smp::start_aps not run)")
    }
}

/// Halts the calling core until a TSC deadline. Bound to the core that made it (it
/// programs that core's timer), so it is neither `Send` nor `Sync`.
///
/// [`Sleeper::sleep_until`] returns only once the TSC has reached the deadline: other
/// interrupts (a wake-up IPI) end a `hlt` early, and the loop re-arms and halts again.
/// [`HaltSleeper::sleep_until_written`] may return early (see there).
#[derive(Debug)]
pub struct HaltSleeper {
    ctx: &'static CoreContext,
    kind: TimerKind,
    mwait: bool,
    /// Sleeps that waited in MWAIT on a watched address.
    watched: u64,
    /// MWAITs in a row that returned before the deadline with the watched byte unchanged.
    hollow: u32,
    /// MWAIT was turned off because it does not wait here ([`HOLLOW_LIMIT`]).
    hollow_off: bool,
    _this_core: PhantomData<*const ()>,
}

/// MWAITs in a row that may return at once, with nothing written and the deadline not
/// reached, before the sleeper concludes MWAIT does not wait on this machine and halts
/// instead. QEMU's TCG reports MONITOR but, with more than one vCPU, executes MWAIT as a
/// `pause` (it returns at once), which would turn every sleep into a spin; real hardware
/// returns early only for an interrupt or a write to the line, rarely this many times in
/// a row with the line unchanged.
pub const HOLLOW_LIMIT: u32 = 32;

impl HaltSleeper {
    /// A sleeper for the calling core.
    pub fn new(cfg: SleepConfig) -> Result<Self, SleepError> {
        let ctx = smp::current().ok_or(SleepError::NotReady)?;
        let kind = lapic::timer_kind().ok_or(SleepError::NotReady)?;
        let monitor = crate::cpu::features().monitor;
        Ok(Self {
            ctx,
            kind,
            mwait: cfg.mwait && monitor,
            watched: 0,
            hollow: 0,
            hollow_off: false,
            _this_core: PhantomData,
        })
    }

    /// The timer mode that wakes it.
    pub fn timer_kind(&self) -> TimerKind {
        self.kind
    }

    /// Whether [`HaltSleeper::sleep_until_written`] uses MONITOR/MWAIT (asked for and
    /// supported, and not turned off as hollow).
    pub fn mwait(&self) -> bool {
        self.mwait
    }

    /// Whether MWAIT was turned off because it returned at once [`HOLLOW_LIMIT`] times in a
    /// row (an emulator's MWAIT that does not wait).
    pub fn mwait_hollow(&self) -> bool {
        self.hollow_off
    }

    /// Sleeps so far that waited in MONITOR/MWAIT on a watched receive queue
    /// (`sleep_until_watching`).
    pub fn watched_sleeps(&self) -> u64 {
        self.watched
    }

    /// The core it belongs to.
    pub fn core(&self) -> &'static CoreContext {
        self.ctx
    }

    /// Sleeps until `deadline` or until `watch` is written, whichever comes first.
    ///
    /// With MWAIT enabled: arms the timer, arms MONITOR on `watch`'s first byte, then
    /// calls `still_idle`; if it says `false` (work arrived between the caller's last
    /// check and the arming) it returns at once, else waits in `sti; mwait`. Any wake-up
    /// — a write to the monitored line, the deadline, any other interrupt — returns:
    /// the caller re-checks its queue and the clock (the `Sleeper` contract allows the
    /// early return). Without MWAIT it is [`Sleeper::sleep_until`].
    pub fn sleep_until_written<T: ?Sized>(
        &mut self,
        watch: &T,
        still_idle: impl FnOnce() -> bool,
        deadline: Instant,
    ) -> Instant {
        // A reference: mapped memory.
        self.mwait_until(watch as *const T as *const u8 as usize, still_idle, deadline)
    }

    /// The MONITOR/MWAIT wait of [`HaltSleeper::sleep_until_written`] on a raw address,
    /// which must be mapped (MONITOR faults like a byte load on an unmapped one).
    fn mwait_until(&mut self, addr: usize, still_idle: impl FnOnce() -> bool, deadline: Instant) -> Instant {
        if !self.mwait {
            return self.sleep_until(deadline);
        }
        let was_enabled = interrupts::are_enabled();
        interrupts::disable();
        self.ctx.account_sleep();
        let now = rdtsc();
        if now >= deadline.ticks() {
            restore(was_enabled);
            return Instant(now);
        }
        lapic::arm_timer(deadline, Instant(now));
        // SAFETY: MONITOR only checks the address like a byte load, for its cache line; the
        // callers pass mapped memory (a reference, or an address inside the DMA range, see
        // `set_watchable`). RAX = address, ECX = EDX = 0 (no extensions or hints). CPUID
        // `1:ECX[3]` was checked by `new`.
        unsafe {
            core::arch::asm!("monitor", in("rax") addr, in("ecx") 0, in("edx") 0,
                options(nostack, preserves_flags));
        }
        // SAFETY: `addr` is mapped (the callers' contract, as for MONITOR); a byte read of
        // memory a device or another core may write is a plain load of whatever it holds.
        let before = unsafe { core::ptr::read_volatile(addr as *const u8) };
        let waited = still_idle();
        let woke = if waited {
            let t0 = rdtsc();
            // SAFETY: `sti` takes effect after `mwait` starts, so a pending interrupt ends
            // the wait instead of being taken before it; EAX = 0 (C1 hint), ECX = 0 (no
            // extensions). The handlers that may run restore every register.
            unsafe { core::arch::asm!("sti", "mwait", in("eax") 0, in("ecx") 0, options(nostack)) };
            interrupts::disable();
            let t1 = rdtsc();
            self.ctx.account_halts(1, t1.saturating_sub(t0));
            t1
        } else {
            rdtsc()
        };
        lapic::disarm_timer();
        restore(was_enabled);
        // SAFETY: as for `before`.
        let after = unsafe { core::ptr::read_volatile(addr as *const u8) };
        if !waited {
            // Work arrived before the wait: nothing to judge MWAIT by.
        } else if after == before && woke < deadline.ticks() {
            self.hollow += 1;
            if self.hollow >= HOLLOW_LIMIT {
                self.mwait = false;
                self.hollow_off = true;
            }
        } else {
            self.hollow = 0;
        }
        Instant(woke)
    }
}

impl Sleeper for HaltSleeper {
    fn sleep_until(&mut self, deadline: Instant) -> Instant {
        self.ctx.account_sleep();
        halt_until(Some(self.ctx), deadline)
    }

    /// With MWAIT on and `watch` inside the DMA range ([`set_watchable`]): MONITOR on it,
    /// so a device write there (a received frame) ends the sleep; the deadline stays the
    /// backstop. Otherwise (MWAIT off or absent, no address, an address outside the DMA
    /// range): [`Sleeper::sleep_until`].
    fn sleep_until_watching(&mut self, deadline: Instant, watch: Option<WakeAddr>) -> Instant {
        match watch.map(WakeAddr::get).filter(|&a| watchable(a)) {
            Some(addr) if self.mwait => {
                self.watched += 1;
                self.mwait_until(addr, || true, deadline)
            }
            _ => self.sleep_until(deadline),
        }
    }

    /// With MWAIT on: MONITOR on the bell's word, then a last look that it is still armed
    /// (a ring between the caller's check and the MONITOR returns at once); a ring's store
    /// to the word ends the wait — no wake call needed (the wake hook is
    /// [`cadence_core::sync::doorbell::no_wake`]). Without MWAIT: to the deadline.
    fn wakes_on_ring(&self) -> bool {
        self.mwait
    }

    fn sleep_until_rung(&mut self, deadline: Instant, bell: &Doorbell) -> Instant {
        if !self.mwait {
            return self.sleep_until(deadline);
        }
        self.watched += 1;
        // A reference's address: mapped memory, as `mwait_until` requires.
        self.mwait_until(bell.wake_address().get(), || bell.is_armed(), deadline)
    }
}

/// The physical (= virtual) range a sleeper may MONITOR: the DMA memory, mapped for the
/// image's whole life. Empty until [`set_watchable`].
static WATCHABLE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// Declares `[start, end)` (the DMA range, identity-mapped and never unmapped) as memory
/// that sleepers may monitor.
pub fn set_watchable(start: usize, end: usize) {
    WATCHABLE[0].store(start, Ordering::Relaxed);
    WATCHABLE[1].store(end, Ordering::Release);
}

fn watchable(addr: usize) -> bool {
    let end = WATCHABLE[1].load(Ordering::Acquire);
    (WATCHABLE[0].load(Ordering::Relaxed)..end).contains(&addr)
}

fn restore(was_enabled: bool) {
    if was_enabled {
        interrupts::enable();
    }
}

/// Halts the calling core (timer armed for `deadline`) until the TSC reaches
/// `deadline`; returns the TSC at wake-up. Accounts the halts in `ctx`. Needs the
/// timer set up on this core (`lapic::setup_timer` / `init_this_core`); leaves the
/// interrupt flag as it found it.
pub(crate) fn halt_until(ctx: Option<&CoreContext>, deadline: Instant) -> Instant {
    let was_enabled = interrupts::are_enabled();
    interrupts::disable();
    let mut now = rdtsc();
    let (mut halts, mut halted) = (0u64, 0u64);
    while now < deadline.ticks() {
        lapic::arm_timer(deadline, Instant(now));
        let t0 = rdtsc();
        sti_hlt();
        interrupts::disable();
        now = rdtsc();
        halts += 1;
        halted += now.saturating_sub(t0);
    }
    if halts > 0 {
        // The timer fired, or is about to after an early wake-up that found the deadline
        // passed: cancel it so it does not end a later, unrelated halt.
        lapic::disarm_timer();
        if let Some(c) = ctx {
            c.account_halts(halts, halted);
        }
    }
    restore(was_enabled);
    Instant(now)
}

/// Enables interrupts and halts, atomically: an interrupt pending before `sti` is taken
/// after `hlt` begins, so it wakes the core. Returns with interrupts enabled, after the
/// handler of the interrupt that woke it ran.
pub(crate) fn sti_hlt() {
    // SAFETY: the only effect is to wait for an interrupt with IF set; every handler
    // that may run returns with all registers restored. Not `nomem`: handlers write
    // memory the compiler must reload afterwards.
    unsafe { core::arch::asm!("sti", "hlt", options(nostack)) }
}

/// The LAPIC timer handler's Rust half (called by the stub in `idt`): EOI, count.
pub(crate) extern "C" fn on_timer_interrupt() {
    lapic::eoi();
    if let Some(c) = smp::current() {
        c.account_timer_irq();
    }
}

/// The wake-up IPI handler's Rust half: EOI, count.
pub(crate) extern "C" fn on_wake_interrupt() {
    lapic::eoi();
    if let Some(c) = smp::current() {
        c.account_wake_irq();
    }
}
