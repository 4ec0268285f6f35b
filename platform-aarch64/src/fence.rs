//! Stopping a core for good: the platform's side of taking a lane over from a worker that
//! hangs inside its round (`cadence_core::sync::Fenced`, the firmware's watchdog) — the
//! counterpart of the x86 platform's NMI.
//!
//! The cores run with IRQs masked (the sleeper's `WFI` wakes on a pending IRQ without
//! taking it), so a stop request cannot be an ordinary interrupt. It is SGI [`FENCE_SGI`]
//! in Group 0, which a GICv3 without security (QEMU `virt`'s: GICD_CTLR.DS = 1) signals
//! as FIQ (GICv3 architecture specification §4.6, "Interrupt grouping and interrupt
//! routing"); every core's GIC set-up puts the SGI in Group 0 at the highest priority and
//! enables Group 0 (`gic::init_core`), and a core that may be stopped unmasks FIQ
//! ([`arm_this_core`]).
//!
//! [`fence`] marks the core's slot *requested* and sends the SGI (ICC_SGI0R_EL1); the FIQ
//! enters the exception vectors, which call [`on_fiq`] first: a core whose slot is
//! *requested* marks it *stopped* (`Release`) and parks with every exception masked, for
//! ever. The requester waits (with a deadline) for *stopped*, read with `Acquire`: the
//! stores the core made before the FIQ are visible to it. A FIQ for a core that was not
//! asked to stop is reported as the unexpected exception it is.

use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use cadence_core::sync::{Fenced, Holder};

use crate::dt::MAX_CPUS;

/// The SGI that stops a core (Group 0, priority 0).
pub const FENCE_SGI: u32 = 8;

const NONE: u8 = 0;
const REQUESTED: u8 = 1;
const STOPPED: u8 = 2;
/// MPIDR_EL1's affinity fields (Aff3 [39:32], Aff2..Aff0 [23:0]).
const AFFINITY: u64 = 0xff_00ff_ffff;

/// Per core (its index in the tree): not asked, asked to stop, stopped.
static SLOTS: [AtomicU8; MAX_CPUS] = [const { AtomicU8::new(NONE) }; MAX_CPUS];
/// Per core: its affinity, set with the request (the FIQ handler finds its slot by it).
static TARGETS: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(u64::MAX) }; MAX_CPUS];

/// Why a core could not be stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceError {
    /// No such core, or its Aff0 is beyond an SGI's 16-core target list.
    NoCore,
    /// The core did not acknowledge within the deadline.
    NoAck,
}

impl core::fmt::Display for FenceError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            FenceError::NoCore => "no such core",
            FenceError::NoAck => "the core did not acknowledge the stop",
        })
    }
}

/// Lets the calling core be stopped by [`fence`]: unmasks FIQ (PSTATE.F).
pub fn arm_this_core() {
    // SAFETY: unmasking FIQ; the only FIQ source is the GIC's Group 0, whose one enabled
    // interrupt is FENCE_SGI, handled by `on_fiq`.
    unsafe { core::arch::asm!("msr daifclr, #1", options(nomem, nostack)) };
}

/// Stops core `index` (MPIDR `mpidr`) for good and returns the proof that `holder` (the
/// worker that ran on it) stopped, once the core acknowledged; waits at most
/// `timeout_ticks` counter ticks.
pub fn fence(index: usize, mpidr: u64, holder: Holder, timeout_ticks: u64) -> Result<Fenced, FenceError> {
    let (Some(slot), Some(target)) = (SLOTS.get(index), TARGETS.get(index)) else { return Err(FenceError::NoCore) };
    let aff0 = mpidr & 0xff;
    if aff0 >= 16 {
        return Err(FenceError::NoCore);
    }
    if slot.load(Ordering::Acquire) != STOPPED {
        target.store(mpidr & AFFINITY, Ordering::Release);
        slot.store(REQUESTED, Ordering::Release);
        // ICC_SGI0R_EL1 (GICv3 §12.11.23): TargetList [15:0] (Aff0 bits), Aff1 [23:16],
        // INTID [27:24], Aff2 [39:32], Aff3 [55:48].
        let v = 1 << aff0
            | ((mpidr >> 8) & 0xff) << 16
            | u64::from(FENCE_SGI) << 24
            | ((mpidr >> 16) & 0xff) << 32
            | ((mpidr >> 32) & 0xff) << 48;
        // SAFETY: generating an SGI touches no memory; the DSB makes the slot's store
        // visible before the interrupt can be taken.
        unsafe { core::arch::asm!("dsb ish", "msr icc_sgi0r_el1, {}", "isb", in(reg) v, options(nostack)) };
        let end = crate::timer::counter().saturating_add(timeout_ticks);
        while slot.load(Ordering::Acquire) != STOPPED {
            if crate::timer::counter() >= end {
                return Err(FenceError::NoAck);
            }
            core::hint::spin_loop();
        }
    }
    // SAFETY: the core marked itself stopped from `on_fiq`, which parks it with every
    // exception masked for good: it runs no further instruction of the worker, and its
    // stores before the FIQ are visible here (Release there, Acquire above).
    Ok(unsafe { Fenced::new(holder) })
}

/// Called first on a FIQ: if this core was asked to stop, it acknowledges the SGI, says so
/// and parks for ever; otherwise returns (the FIQ is reported as unexpected).
pub(crate) fn on_fiq() {
    let me = crate::gic::mpidr() & AFFINITY;
    // SAFETY: acknowledging the highest-priority Group 0 interrupt (ICC_IAR0_EL1); it is
    // never ended (no EOI), so nothing of lower priority reaches this core again.
    let _iar: u64 = unsafe {
        let v: u64;
        core::arch::asm!("mrs {}, icc_iar0_el1", out(reg) v, options(nomem, nostack));
        v
    };
    for (slot, target) in SLOTS.iter().zip(&TARGETS) {
        if slot.load(Ordering::Acquire) == REQUESTED && target.load(Ordering::Acquire) == me {
            slot.store(STOPPED, Ordering::Release);
            crate::exit::park()
        }
    }
}
