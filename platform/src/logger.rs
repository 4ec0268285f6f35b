//! The `defmt` global logger: rzcobs frames on COM2, timestamped with the TSC
//!.
//!
//! `acquire` disables interrupts (an interrupt handler that logs must not re-enter a
//! frame) and takes a spin flag (cores take turns); `release` ends the frame, drops the
//! flag and restores the interrupt flag. Text never goes to COM2, frames never to COM1.

use crate::serial::{COM2, Uart};
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

defmt::timestamp!("{=u64}", crate::cpu::rdtsc());

/// Spins on a held flag before logging anyway: a core that faulted while holding it
/// must not hang every other core's logging forever (the frames may then interleave).
const ACQUIRE_SPINS: u32 = 10_000_000;

#[defmt::global_logger]
struct Logger;

static TAKEN: AtomicBool = AtomicBool::new(false);

struct State {
    encoder: defmt::Encoder,
    restore_interrupts: bool,
}

/// The encoder and saved interrupt flag, touched only between `acquire` and `release`.
struct Shared(UnsafeCell<State>);

// SAFETY: the inner state is only accessed by the core that holds `TAKEN` (acquire to
// release), with interrupts off, so accesses never overlap.
unsafe impl Sync for Shared {}

static STATE: Shared = Shared(UnsafeCell::new(State { encoder: defmt::Encoder::new(), restore_interrupts: false }));

fn com2_write(bytes: &[u8]) {
    Uart::new(COM2).write_bytes(bytes);
}

// SAFETY: `acquire` establishes exclusive access (flag + interrupts off) that lasts
// until `release`, as `defmt::Logger` requires.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        let enabled = x86_64::instructions::interrupts::are_enabled();
        x86_64::instructions::interrupts::disable();
        let mut spins = 0u32;
        while TAKEN.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err()
            && spins < ACQUIRE_SPINS
        {
            spins += 1;
            core::hint::spin_loop();
        }
        // SAFETY: we hold the flag with interrupts off: no one else touches STATE.
        let st = unsafe { &mut *STATE.0.get() };
        st.restore_interrupts = enabled;
        st.encoder.start_frame(com2_write);
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: defmt calls `release` only after `acquire` on this core, so we hold
        // the flag with interrupts off.
        let st = unsafe { &mut *STATE.0.get() };
        st.encoder.end_frame(com2_write);
        let restore = st.restore_interrupts;
        TAKEN.store(false, Ordering::Release);
        if restore {
            x86_64::instructions::interrupts::enable();
        }
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: between `acquire` and `release` (defmt's contract), see `release`.
        let st = unsafe { &mut *STATE.0.get() };
        st.encoder.write(bytes, com2_write);
    }
}
