//! The PL011 UART as a text console.
//!
//! Facts (Arm PrimeCell UART (PL011) Technical Reference Manual r1p5, §3.2, §3.3.1,
//! §3.3.3 and §3.3.8): UARTDR at offset 0x000 (write: the byte to send; read: the received
//! byte in bits 7:0, its error flags in 11:8), UARTFR at 0x018 with TXFF (bit 5, the
//! transmit FIFO is full) and RXFE (bit 4, the receive FIFO is empty), UARTCR at 0x030
//! with UARTEN (bit 0), TXE (bit 8) and RXE (bit 9). The receiver is the management
//! channel's input (docs/PROTOCOL.md), as COM1's is on x86. QEMU's model (hw/char/pl011.c) transmits at once and needs
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
/// UARTCR: control.
const UARTCR: usize = 0x030;
/// UARTFR.TXFF: transmit FIFO full.
const FR_TXFF: u32 = 1 << 5;
/// UARTFR.RXFE: receive FIFO empty.
const FR_RXFE: u32 = 1 << 4;
/// UARTCR.UARTEN | TXE | RXE.
const CR_ENABLE_RX_TX: u32 = 1 << 0 | 1 << 8 | 1 << 9;
/// UARTDR bits 11:8: framing, parity, break and overrun errors of the byte read.
const DR_ERRORS: u32 = 0xf00;
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
    console(|u| {
        let _ = u.write_fmt(args);
        let _ = u.write_str("\n");
    });
}

/// Runs `f` with the console, holding the line lock (so lines of several cores do not
/// interleave). Does nothing before [`init`].
pub fn console(f: impl FnOnce(&mut dyn Write)) {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return;
    }
    let mut spins = 0;
    while LOCK.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() && spins < LOCK_SPINS {
        spins += 1;
        core::hint::spin_loop();
    }
    f(&mut Uart(base));
    LOCK.store(false, Ordering::Release);
}

/// Turns the receiver on (UARTCR.UARTEN, RXE, and TXE, keeping the other bits): QEMU's
/// model takes no input while they are clear. Does nothing before [`init`].
pub fn enable_receiver() {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return;
    }
    // SAFETY: `base` is the PL011 given to `init`, mapped as device memory; UARTCR is
    // read-modify-written, keeping its other bits.
    unsafe {
        let cr = core::ptr::read_volatile((base + UARTCR) as *const u32);
        core::ptr::write_volatile((base + UARTCR) as *mut u32, cr | CR_ENABLE_RX_TX);
    }
}

/// Reads the received bytes that are there into `buf`, without waiting; returns how many.
/// A byte received with an error (framing, parity, break, overrun) is dropped.
pub fn read_ready(buf: &mut [u8]) -> usize {
    let base = BASE.load(Ordering::Acquire);
    if base == 0 {
        return 0;
    }
    let mut n = 0;
    // At most `buf.len()` reads of UARTDR, so the loop is bounded by the caller's buffer.
    for _ in 0..buf.len() {
        // SAFETY: as in `put`; UARTFR has no read side effects.
        if unsafe { core::ptr::read_volatile((base + UARTFR) as *const u32) } & FR_RXFE != 0 {
            break;
        }
        // SAFETY: as above; reading UARTDR pops one received byte, which is ours to take
        // (the receiver is the management channel's alone).
        let dr = unsafe { core::ptr::read_volatile((base + UARTDR) as *const u32) };
        if dr & DR_ERRORS == 0 {
            buf[n] = dr as u8;
            n += 1;
        }
    }
    n
}
