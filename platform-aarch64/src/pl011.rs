//! The PL011 UART as a text console.
//!
//! Facts (Arm PrimeCell UART (PL011) Technical Reference Manual r1p5, §3.2 and §3.3.3):
//! UARTDR at offset 0x000 (write: the byte to send), UARTFR at 0x018 with TXFF (bit 5,
//! the transmit FIFO is full). QEMU's model (hw/char/pl011.c) transmits at once and needs
//! no baud set-up; on hardware the firmware before us has set the line up. The UART's
//! address comes from the device tree (`stdout-path`, `arm,pl011`); 0x0900_0000 on `virt`.
//!
//! Every wait for FIFO room is bounded ([`TX_SPINS`]): a UART that never drains drops the
//! byte rather than hanging the core.

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// UARTDR: data (write sends one byte).
const UARTDR: usize = 0x000;
/// UARTFR: flags.
const UARTFR: usize = 0x018;
/// UARTFR.TXFF: transmit FIFO full.
const FR_TXFF: u32 = 1 << 5;
/// Polls of UARTFR before a byte is dropped (far beyond a real FIFO's drain time).
const TX_SPINS: u32 = 1_000_000;

/// The console's base address; 0 until [`init`].
static BASE: AtomicUsize = AtomicUsize::new(0);
/// Cores take turns printing whole lines.
static LOCK: AtomicBool = AtomicBool::new(false);
/// Spins on a held lock before printing anyway (a core that faulted mid-line must not
/// silence the others forever).
const LOCK_SPINS: u32 = 10_000_000;

/// Sets the console's UART base (identity-mapped device memory).
pub fn init(base: usize) {
    BASE.store(base, Ordering::Release);
}

fn put(base: usize, b: u8) {
    let mut spins = 0;
    // SAFETY: `base` is the PL011 given to `init`, mapped as device memory; UARTFR is a
    // read-only register without side effects.
    while unsafe { core::ptr::read_volatile((base + UARTFR) as *const u32) } & FR_TXFF != 0 {
        spins += 1;
        if spins == TX_SPINS {
            return;
        }
        core::hint::spin_loop();
    }
    // SAFETY: as above; writing UARTDR queues one byte.
    unsafe { core::ptr::write_volatile((base + UARTDR) as *mut u32, u32::from(b)) };
}

struct Uart(usize);

impl Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                put(self.0, b'\r');
            }
            put(self.0, b);
        }
        Ok(())
    }
}

/// Prints `args` and a newline as one line (used by [`crate::println!`]). Does nothing
/// before [`init`].
pub fn print_line(args: fmt::Arguments<'_>) {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return;
    }
    let mut spins = 0;
    while LOCK.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() && spins < LOCK_SPINS {
        spins += 1;
        core::hint::spin_loop();
    }
    let mut u = Uart(base);
    let _ = u.write_fmt(args);
    let _ = u.write_str("\n");
    LOCK.store(false, Ordering::Release);
}
