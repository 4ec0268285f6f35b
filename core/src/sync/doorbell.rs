//! [`Doorbell`]: how a core that found nothing to do for a long time sleeps without missing
//! the work that arrives while it falls asleep — NetBlaze's idle auxiliary cores (issue 10
//! item 6: an idle auxiliary core halts, and the core-seconds NetBlaze saves show as halted
//! time).
//!
//! The sleeper **arms** the bell, then checks its queues once more, then sleeps until the bell
//! is rung or a deadline ([`crate::time::Sleeper::sleep_until_rung`]), then disarms it. A
//! producer, after making work visible (a hand-off ring's producer index, stored with
//! `Release`), **rings** the bell: if it is armed, it disarms it and wakes the sleeper —
//! through the platform's wake hook where a plain store does not wake (a Linux thread in a
//! futex wait), by the store itself where it does (MONITOR/MWAIT on the bell's word).
//!
//! No lost wake-up: both sides put a sequentially consistent fence between their store (the
//! arm; the work) and their load (the queues; the bell), so at least one sees the other's
//! store — either the sleeper's last check finds the work, or the producer finds the bell
//! armed and wakes it (the loom model `doorbell_never_loses_a_wake_up`). The producer's cost
//! when nobody sleeps: one fence and one load of a line the sleeper writes only when it
//! arms.

use super::atomic::{AtomicU32, Ordering, fence};

/// A CPU address a sleeper may monitor for writes ([`crate::nic::RxQueue::wake_address`], a [`Doorbell`]'s word). Only an
/// identity: `core` never dereferences it; the platform's sleeper hands it to MONITOR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WakeAddr(usize);

impl WakeAddr {
    /// The address `addr`.
    pub const fn new(addr: usize) -> Self {
        Self(addr)
    }

    /// The address.
    pub const fn get(self) -> usize {
        self.0
    }
}

/// The bell's word: nobody waits.
pub const IDLE: u32 = 0;
/// The bell's word: a core sleeps (or is about to) and wants to be woken.
pub const ARMED: u32 = 1;

/// What a platform does to wake a core sleeping on a bell's word (a `futex` wake on Linux;
/// nothing where the store itself wakes the sleeper).
pub type WakeHook = fn(WakeAddr);

/// A wake hook that does nothing: for sleepers that watch the word (MONITOR/MWAIT) or sleep
/// only to a deadline.
pub fn no_wake(_: WakeAddr) {}

/// One sleeping core's bell (module docs). Shared by the sleeper and every producer that
/// hands it work.
#[derive(Debug)]
pub struct Doorbell {
    word: AtomicU32,
}

impl Default for Doorbell {
    fn default() -> Self {
        Self::new()
    }
}

impl Doorbell {
    /// A bell nobody waits on.
    pub fn new() -> Self {
        Self { word: AtomicU32::new(IDLE) }
    }

    /// The sleeper: about to sleep. Check the queues after this, then sleep only if they are
    /// still empty.
    pub fn arm(&self) {
        self.word.store(ARMED, Ordering::SeqCst);
        fence(Ordering::SeqCst);
    }

    /// The sleeper: awake (or not sleeping after all).
    pub fn disarm(&self) {
        self.word.store(IDLE, Ordering::Relaxed);
    }

    /// Whether the sleeper still waits (no producer rang since it armed).
    pub fn is_armed(&self) -> bool {
        self.word.load(Ordering::SeqCst) == ARMED
    }

    /// The producer, after making work visible: wakes the sleeper with `wake` if the bell is
    /// armed. Returns whether it woke one (the bell is disarmed then).
    pub fn ring(&self, wake: WakeHook) -> bool {
        fence(Ordering::SeqCst);
        if self.word.load(Ordering::Relaxed) != ARMED {
            return false;
        }
        if self.word.swap(IDLE, Ordering::AcqRel) != ARMED {
            return false; // another producer rang first
        }
        wake(self.wake_address());
        true
    }

    /// The bell's word (32 bits, 4-byte aligned): what a sleeper waits on.
    pub fn wake_address(&self) -> WakeAddr {
        WakeAddr::new(&self.word as *const AtomicU32 as usize)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use core::sync::atomic::AtomicUsize;

    static WOKEN: AtomicUsize = AtomicUsize::new(0);

    fn count(_: WakeAddr) {
        WOKEN.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
    }

    #[test]
    fn only_an_armed_bell_wakes_and_only_once() {
        let bell = Doorbell::new();
        let before = WOKEN.load(core::sync::atomic::Ordering::Relaxed);
        assert!(!bell.ring(count), "nobody sleeps: no wake");
        bell.arm();
        assert!(bell.is_armed());
        assert!(bell.ring(count), "armed: woken");
        assert!(!bell.is_armed(), "ringing disarms");
        assert!(!bell.ring(count), "a second ring finds nobody waiting");
        bell.arm();
        bell.disarm();
        assert!(!bell.ring(count), "disarmed by the sleeper: no wake");
        assert_eq!(WOKEN.load(core::sync::atomic::Ordering::Relaxed) - before, 1);
    }

    #[test]
    fn the_word_is_aligned_for_a_futex() {
        let bell = Doorbell::new();
        assert_eq!(bell.wake_address().get() % 4, 0);
    }
}
