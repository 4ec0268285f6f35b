//! What each core owns: its index, APIC ID, start-up state, the job mailbox and its
//! busy/halted accounting. Pure atomics, so it compiles and is tested on the host too.

// The crate-internal mutators are called by the machine half (`start`, `sleep`) only.
#![cfg_attr(not(target_os = "none"), allow(dead_code))]

use core::fmt;
use core::sync::atomic::{AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering};

/// A core's index: 0 is the BSP, APs follow in MADT order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, defmt::Format)]
pub struct CoreId(pub u32);

impl CoreId {
    /// The bootstrap processor.
    pub const BSP: CoreId = CoreId(0);

    /// The index as a `usize`.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for CoreId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Where a core is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
#[repr(u8)]
pub enum CoreState {
    /// Not started (yet).
    Offline = 0,
    /// INIT-SIPI-SIPI sent, check-in pending.
    Starting = 1,
    /// Online and parked: halted, waiting for a job.
    Idle = 2,
    /// Online and running a job (the BSP is always `Running`).
    Running = 3,
    /// Did not check in before the timeout; sent INIT again and left parked there.
    Failed = 4,
}

impl CoreState {
    const fn from_u8(v: u8) -> CoreState {
        match v {
            1 => CoreState::Starting,
            2 => CoreState::Idle,
            3 => CoreState::Running,
            4 => CoreState::Failed,
            _ => CoreState::Offline,
        }
    }

    /// Whether the core checked in (and can be counted as online).
    pub const fn is_online(self) -> bool {
        matches!(self, CoreState::Idle | CoreState::Running)
    }
}

/// A snapshot of one core's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, defmt::Format)]
pub struct CoreStats {
    /// TSC when the core checked in.
    pub online_tsc: u64,
    /// TSC cycles spent halted (`hlt`/`mwait`), parked or sleeping.
    pub halted_cycles: u64,
    /// Calls to a sleeper on this core.
    pub sleeps: u64,
    /// Halts executed (a sleep may halt more than once: early wake-ups re-arm).
    pub halts: u64,
    /// LAPIC timer interrupts taken.
    pub timer_irqs: u64,
    /// Wake-up IPIs taken.
    pub wake_irqs: u64,
    /// Jobs run to completion.
    pub jobs: u64,
}

impl CoreStats {
    /// TSC cycles not spent halted since the core came online, up to `now`.
    pub const fn busy_cycles(&self, now_tsc: u64) -> u64 {
        now_tsc.saturating_sub(self.online_tsc).saturating_sub(self.halted_cycles)
    }

    /// Halted share of the time since `since` (TSC), in per mille, given the halted
    /// cycles then (`halted_then`) and now: the CPU share a sleeping core gave back.
    pub const fn halted_permille(&self, since_tsc: u64, halted_then: u64, now_tsc: u64) -> u64 {
        let span = now_tsc.saturating_sub(since_tsc);
        if span == 0 {
            return 0;
        }
        let h = self.halted_cycles.saturating_sub(halted_then);
        let p = (h as u128 * 1000 / span as u128) as u64;
        if p > 1000 { 1000 } else { p }
    }
}

/// One core's context, `&'static` for the life of the image. The `GS` base of each
/// core points at its own (see `smp::current`), so the first field is the context's own
/// address: `mov reg, gs:[0]` yields it.
///
/// Counters have one writer, the owning core (its interrupt handlers write only the
/// interrupt counters, which the rest of its code does not); anyone may read them.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct CoreContext {
    /// This context's address (offset 0, read through `GS`).
    this: AtomicUsize,
    id: CoreId,
    apic_id: u32,
    state: AtomicU8,
    /// A boxed job waiting for this core (null: none); see `Cores::run`.
    pub(crate) job: AtomicPtr<()>,
    online_tsc: AtomicU64,
    halted_cycles: AtomicU64,
    sleeps: AtomicU64,
    halts: AtomicU64,
    timer_irqs: AtomicU64,
    wake_irqs: AtomicU64,
    jobs: AtomicU64,
}

const _: () = assert!(core::mem::offset_of!(CoreContext, this) == 0);

/// Adds `v` to a counter that only the calling core writes (no locked instruction).
fn bump(c: &AtomicU64, v: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
}

impl CoreContext {
    /// A context for core `id` with APIC ID `apic_id`, offline. Call
    /// [`CoreContext::pin`] once it sits at its final address.
    pub const fn new(id: CoreId, apic_id: u32) -> Self {
        CoreContext {
            this: AtomicUsize::new(0),
            id,
            apic_id,
            state: AtomicU8::new(CoreState::Offline as u8),
            job: AtomicPtr::new(core::ptr::null_mut()),
            online_tsc: AtomicU64::new(0),
            halted_cycles: AtomicU64::new(0),
            sleeps: AtomicU64::new(0),
            halts: AtomicU64::new(0),
            timer_irqs: AtomicU64::new(0),
            wake_irqs: AtomicU64::new(0),
            jobs: AtomicU64::new(0),
        }
    }

    /// Records the context's final address (for `GS`-relative access).
    pub fn pin(&'static self) {
        self.this.store(self as *const Self as usize, Ordering::Relaxed);
    }

    /// The recorded address (0 before [`CoreContext::pin`]).
    pub fn address(&self) -> usize {
        self.this.load(Ordering::Relaxed)
    }

    /// The core's index.
    pub const fn id(&self) -> CoreId {
        self.id
    }

    /// The core's local APIC ID.
    pub const fn apic_id(&self) -> u32 {
        self.apic_id
    }

    /// Its current state.
    pub fn state(&self) -> CoreState {
        CoreState::from_u8(self.state.load(Ordering::Acquire))
    }

    /// Whether it checked in.
    pub fn is_online(&self) -> bool {
        self.state().is_online()
    }

    pub(crate) fn set_state(&self, s: CoreState) {
        self.state.store(s as u8, Ordering::Release);
    }

    /// Moves from state `from` to `to` if the core is still in `from`; `false` if it
    /// was not (e.g. the BSP gave up on a late AP while it was checking in).
    pub(crate) fn transition(&self, from: CoreState, to: CoreState) -> bool {
        self.state.compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// The check-in: records TSC `now` as the time the core came online and moves it
    /// from `from` to the online state `to`; `false` if it was no longer in `from`.
    pub(crate) fn check_in(&self, now: u64, from: CoreState, to: CoreState) -> bool {
        self.online_tsc.store(now, Ordering::Relaxed);
        self.transition(from, to)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CoreStats {
        CoreStats {
            online_tsc: self.online_tsc.load(Ordering::Relaxed),
            halted_cycles: self.halted_cycles.load(Ordering::Relaxed),
            sleeps: self.sleeps.load(Ordering::Relaxed),
            halts: self.halts.load(Ordering::Relaxed),
            timer_irqs: self.timer_irqs.load(Ordering::Relaxed),
            wake_irqs: self.wake_irqs.load(Ordering::Relaxed),
            jobs: self.jobs.load(Ordering::Relaxed),
        }
    }

    /// Accounts halts: `halts` of them, `cycles` TSC cycles in all (owning core only).
    pub(crate) fn account_halts(&self, halts: u64, cycles: u64) {
        bump(&self.halts, halts);
        bump(&self.halted_cycles, cycles);
    }

    /// Accounts one call to a sleeper (owning core only).
    pub(crate) fn account_sleep(&self) {
        bump(&self.sleeps, 1);
    }

    /// Accounts a finished job (owning core only).
    pub(crate) fn account_job(&self) {
        bump(&self.jobs, 1);
    }

    /// Accounts a timer interrupt (the owning core's interrupt handler only).
    pub(crate) fn account_timer_irq(&self) {
        bump(&self.timer_irqs, 1);
    }

    /// Accounts a wake-up IPI (the owning core's interrupt handler only).
    pub(crate) fn account_wake_irq(&self) {
        bump(&self.wake_irqs, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_and_online_means_checked_in() {
        let c = CoreContext::new(CoreId(2), 7);
        assert_eq!(c.state(), CoreState::Offline);
        for s in [CoreState::Starting, CoreState::Idle, CoreState::Running, CoreState::Failed, CoreState::Offline] {
            c.set_state(s);
            assert_eq!(c.state(), s);
        }
        assert!(!c.is_online());
        assert!(!c.check_in(100, CoreState::Starting, CoreState::Idle));
        c.set_state(CoreState::Starting);
        assert!(c.check_in(100, CoreState::Starting, CoreState::Idle));
        assert!(c.is_online());
        assert!(!c.transition(CoreState::Starting, CoreState::Failed));
        assert_eq!((c.id(), c.apic_id()), (CoreId(2), 7));
    }

    #[test]
    fn accounting_adds_up() {
        let c: &'static CoreContext = Box::leak(Box::new(CoreContext::new(CoreId(1), 1)));
        c.pin();
        assert_eq!(c.address(), c as *const CoreContext as usize);
        assert!(c.check_in(1_000, CoreState::Offline, CoreState::Idle));
        c.account_sleep();
        c.account_halts(2, 600);
        c.account_timer_irq();
        c.account_wake_irq();
        c.account_job();
        let s = c.stats();
        assert_eq!((s.sleeps, s.halts, s.halted_cycles, s.timer_irqs, s.wake_irqs, s.jobs), (1, 2, 600, 1, 1, 1));
        assert_eq!(s.busy_cycles(2_000), 400);
        assert_eq!(s.busy_cycles(500), 0);
        assert_eq!(s.halted_permille(1_000, 0, 2_000), 600);
        assert_eq!(s.halted_permille(1_000, 0, 1_000), 0);
        assert_eq!(s.halted_permille(1_900, 0, 2_000), 1000);
    }

    #[test]
    fn context_owns_its_cache_line() {
        assert_eq!(core::mem::align_of::<CoreContext>(), 64);
    }
}
