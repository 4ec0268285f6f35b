//! defmt's global logger on aarch64: frames go out byte by byte through semihosting
//! `SYS_WRITEC` (Arm "Semihosting for AArch32 and AArch64" v3.0, §5.2: writes the byte at
//! `[X1]` to the debug channel), which QEMU writes to the chardev named by
//! `-semihosting-config …,chardev=<id>` (else to its standard error). The `virt` board has
//! one PL011, which carries the machine lines; this is the aarch64 counterpart of the
//! x86 image's COM2. One trap per byte is slow, but the human log is a few lines per run,
//! never per packet.
//!
//! Without semihosting enabled the `HLT` would be an undefined instruction: the image is
//! only run with it (its exit status needs it too, [`crate::exit`]).

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

/// `SYS_WRITEC` (semihosting §5.2).
const SYS_WRITEC: u32 = 0x03;
/// Spins on a held logger before writing anyway (a core that faulted mid-frame must not
/// silence the others forever).
const ACQUIRE_SPINS: u32 = 10_000_000;

defmt::timestamp!("{=u64}", crate::timer::counter());

#[defmt::global_logger]
struct Logger;

static TAKEN: AtomicBool = AtomicBool::new(false);

struct Shared(UnsafeCell<defmt::Encoder>);
// SAFETY: the encoder is used only between `acquire` and `release`, which `TAKEN`
// serialises across cores.
unsafe impl Sync for Shared {}
static ENCODER: Shared = Shared(UnsafeCell::new(defmt::Encoder::new()));

fn write_bytes(bytes: &[u8]) {
    for b in bytes {
        // SAFETY: the semihosting call reads the one byte at `b`, which lives for the call.
        unsafe {
            core::arch::asm!(
                "hlt #0xf000",
                inout("w0") SYS_WRITEC => _,
                in("x1") b as *const u8,
                options(nostack, readonly)
            );
        }
    }
}

// SAFETY: `acquire`/`release` bracket every frame and keep other cores out (`TAKEN`);
// `write` and `flush` are called only in between, as defmt's contract says.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        let mut spins = 0u32;
        while TAKEN.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err()
            && spins < ACQUIRE_SPINS
        {
            spins += 1;
            core::hint::spin_loop();
        }
        // SAFETY: this core holds `TAKEN`.
        unsafe { (*ENCODER.0.get()).start_frame(write_bytes) }
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: called after `acquire` on this core, which holds `TAKEN`.
        unsafe { (*ENCODER.0.get()).end_frame(write_bytes) }
        TAKEN.store(false, Ordering::Release);
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: as in `release`.
        unsafe { (*ENCODER.0.get()).write(bytes, write_bytes) }
    }
}
