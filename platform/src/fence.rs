//! Stopping a core for good: the platform's side of taking a lane over from a worker that
//! hangs inside its round (`cadence_core::sync::Fenced`, the firmware's watchdog).
//!
//! [`fence`] marks the core's slot *requested* and sends it an NMI (SDM vol. 3A §10.6.1:
//! ICR delivery mode NMI; it reaches a core whatever it runs, interrupts enabled or not). The
//! NMI enters through IDT vector 2 (`idt`), which calls [`on_nmi`] before anything else: a
//! core whose slot is *requested* marks it *stopped* (`Release`) and halts with interrupts
//! off, for ever — NMIs stay blocked because it never executes the `IRET` that would end
//! this one (§6.7.1), so nothing wakes it. The requester waits (with a deadline) for
//! *stopped*, read with `Acquire`: every store the core made before the NMI is visible to it
//! (x86's stores become visible in program order, and the handler's store comes after them
//! on that core). An NMI for a core that was not asked to stop is unexpected and reported
//! as the exception it is.

use core::sync::atomic::{AtomicU8, Ordering};

use cadence_core::sync::{Fenced, Holder};

use crate::acpi::madt::MAX_CPUS;
use crate::cpu::rdtsc;
use crate::lapic::regs::Ipi;
use crate::smp::{CoreId, Cores};

const NONE: u8 = 0;
const REQUESTED: u8 = 1;
const STOPPED: u8 = 2;

/// Per core (its index): not asked, asked to stop, stopped.
static SLOTS: [AtomicU8; MAX_CPUS] = [const { AtomicU8::new(NONE) }; MAX_CPUS];

/// Why a core could not be stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceError {
    /// No such core, or it is not online.
    NoCore,
    /// The NMI could not be sent (the local APIC refused or timed out).
    Send,
    /// The core did not acknowledge within the deadline.
    NoAck,
}

/// Stops core `id` for good and returns the proof that `holder` (the worker that ran on it)
/// stopped, once the core acknowledged; waits at most `timeout_us` for it.
pub fn fence(cores: &Cores, id: CoreId, holder: Holder, timeout_us: u64) -> Result<Fenced, FenceError> {
    let core = cores.get(id).filter(|c| c.is_online()).ok_or(FenceError::NoCore)?;
    let slot = SLOTS.get(id.index()).ok_or(FenceError::NoCore)?;
    if slot.load(Ordering::Acquire) != STOPPED {
        slot.store(REQUESTED, Ordering::Release);
        crate::lapic::send_ipi(core.apic_id(), Ipi::NMI).map_err(|_| FenceError::Send)?;
        let deadline = rdtsc().saturating_add(cores.tsc().ticks_from_us(timeout_us).ticks());
        while slot.load(Ordering::Acquire) != STOPPED {
            if rdtsc() >= deadline {
                return Err(FenceError::NoAck);
            }
            core::hint::spin_loop();
        }
    }
    // SAFETY: the core marked itself stopped from `on_nmi`, which halts it with interrupts
    // and NMIs blocked for good: it runs no further instruction, and its stores before the
    // NMI are visible here (Release there, Acquire above).
    Ok(unsafe { Fenced::new(holder) })
}

/// Called first by the NMI handler: if this core was asked to stop, it says so and halts for
/// ever; otherwise returns (the NMI is reported as unexpected).
pub(crate) fn on_nmi() {
    let Some(me) = crate::smp::current() else { return };
    let Some(slot) = SLOTS.get(me.id().index()) else { return };
    if slot.load(Ordering::Acquire) != REQUESTED {
        return;
    }
    slot.store(STOPPED, Ordering::Release);
    loop {
        // SAFETY: `cli; hlt` with no memory effects: the core stops here for good (interrupts
        // off; NMIs blocked until an IRET that never comes).
        unsafe { core::arch::asm!("cli", "hlt", options(nomem, nostack)) };
    }
}
