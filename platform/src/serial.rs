//! 16550 UART text console: COM1 (0x3F8) for humans, COM2 (0x2F8) for defmt frames.
//!
//! Registers (PC16550D datasheet, "Register Summary"): THR/RBR at +0, IER +1, FCR +2,
//! LCR +3 (bit 7 DLAB), MCR +4, LSR +5 (bit 5 THRE: transmit holding register empty).
//! Polled, 115200 8N1, FIFOs on, no interrupts. A byte waits at most
//! `TX_SPINS` polls of LSR for room; after that it is written anyway (a missing
//! or stuck UART must not hang the image).

use core::fmt;
use x86_64::instructions::port::Port;

/// COM1 base port.
pub const COM1: u16 = 0x3f8;
/// COM2 base port.
pub const COM2: u16 = 0x2f8;
/// LSR polls before a byte is written regardless.
const TX_SPINS: u32 = 100_000;
/// LSR: transmit holding register empty.
const LSR_THRE: u8 = 1 << 5;
/// LSR: data ready (a received byte waits in RBR / the receive FIFO).
const LSR_DR: u8 = 1 << 0;

/// A 16550 at an I/O base. Holds only the port number, so it is `Copy`; callers that
/// need whole lines keep them together through [`console`].
#[derive(Debug, Clone, Copy)]
pub struct Uart {
    base: u16,
}

impl Uart {
    /// The UART at `base`.
    pub const fn new(base: u16) -> Self {
        Self { base }
    }

    fn out(&self, reg: u16, val: u8) {
        // SAFETY: the ports `base..base+8` belong to this UART; writing its registers
        // has no memory effects.
        unsafe { Port::<u8>::new(self.base + reg).write(val) }
    }

    fn inp(&self, reg: u16) -> u8 {
        // SAFETY: as in `out`; reading LSR/RBR has no memory effects.
        unsafe { Port::<u8>::new(self.base + reg).read() }
    }

    /// Programs 115200 8N1, FIFOs enabled and cleared, interrupts off.
    pub fn init(&self) {
        self.out(1, 0x00); // IER: no interrupts
        self.out(3, 0x80); // LCR: DLAB on
        self.out(0, 0x01); // DLL: divisor 1 = 115200 baud
        self.out(1, 0x00); // DLM
        self.out(3, 0x03); // LCR: 8 data bits, no parity, 1 stop bit, DLAB off
        self.out(2, 0xc7); // FCR: enable, clear RX/TX, 14-byte trigger
        self.out(4, 0x03); // MCR: DTR, RTS (OUT2 off: no IRQ)
    }

    /// Writes one byte, waiting (boundedly) for room in the transmitter.
    pub fn write_byte(&self, b: u8) {
        for _ in 0..TX_SPINS {
            if self.inp(5) & LSR_THRE != 0 {
                break;
            }
            core::hint::spin_loop();
        }
        self.out(0, b);
    }

    /// Reads received bytes into `buf` while LSR says one is ready, never waiting; returns
    /// how many (at most the receive FIFO's 16 per call when nothing else arrives).
    pub fn read_ready(&self, buf: &mut [u8]) -> usize {
        let mut n = 0;
        for slot in buf.iter_mut() {
            if self.inp(5) & LSR_DR == 0 {
                break;
            }
            *slot = self.inp(0);
            n += 1;
        }
        n
    }

    /// Writes raw bytes.
    pub fn write_bytes(&self, bytes: &[u8]) {
        for &b in bytes {
            self.write_byte(b);
        }
    }
}

impl fmt::Write for Uart {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                self.write_byte(b'\r');
            }
            self.write_byte(b);
        }
        Ok(())
    }
}

/// Bytes the transmitter FIFO takes once LSR.THRE says it is empty (16550A: 16).
const FIFO_BYTES: usize = 16;
/// Room for queued console output: the longest `@stats` line of 64 workers and lanes.
const BACKLOG_BYTES: usize = 16 * 1024;

/// Console output queued without waiting for the UART (a running dataplane's `@stats`
/// lines): [`try_queue`] formats a line into it, [`pump`] moves it to COM1 only as fast as
/// the transmitter empties, never waiting.
struct Backlog {
    text: heapless::String<BACKLOG_BYTES>,
    sent: usize,
}

static BACKLOG: spin::Mutex<Backlog> = spin::Mutex::new(Backlog { text: heapless::String::new(), sent: 0 });

/// Formats one line into the console backlog (the newline is added) unless earlier queued
/// output is still going out; returns whether it was queued. A line longer than the
/// backlog is cut short (it still ends with a newline).
pub fn try_queue(f: &mut dyn FnMut(&mut dyn fmt::Write) -> fmt::Result) -> bool {
    let Some(mut b) = BACKLOG.try_lock() else { return false };
    if b.sent < b.text.len() {
        return false;
    }
    b.text.clear();
    b.sent = 0;
    let _ = f(&mut b.text);
    if b.text.push('\n').is_err() {
        // Full: make the last byte the newline (the text is ASCII key=value pairs).
        let cut = b.text.len().saturating_sub(1);
        b.text.truncate(cut);
        let _ = b.text.push('\n');
    }
    true
}

/// Moves queued output to COM1 while its transmitter has room, at most `max` bytes;
/// never waits. Returns the bytes written.
pub fn pump(max: usize) -> usize {
    let Some(mut b) = BACKLOG.try_lock() else { return 0 };
    let uart = Uart::new(COM1);
    let mut n = 0;
    while b.sent < b.text.len() && n < max && uart.inp(5) & LSR_THRE != 0 {
        // The FIFO is empty: up to FIFO_BYTES bytes fit, a newline taking two ("\r\n").
        let mut room = FIFO_BYTES;
        while let Some(&c) = b.text.as_bytes().get(b.sent) {
            let need = if c == b'\n' { 2 } else { 1 };
            if need > room || n >= max {
                break;
            }
            if c == b'\n' {
                uart.out(0, b'\r');
            }
            uart.out(0, c);
            room -= need;
            b.sent += 1;
            n += 1;
        }
    }
    n
}

/// Writes out whatever is queued, waiting for the UART (boundedly per byte, as every
/// blocking write does); for the lines that must not be lost (`@summary`).
pub fn flush() {
    let mut b = BACKLOG.lock();
    let rest = b.sent.min(b.text.len());
    console(|u| {
        let _ = fmt::Write::write_str(u, &b.text[rest..]);
    });
    b.sent = b.text.len();
}

/// Serializes whole `print!` calls on COM1 so lines from different cores do not mix.
static CONSOLE: spin::Mutex<Uart> = spin::Mutex::new(Uart::new(COM1));

/// Programs COM1 and COM2 (called by the entry code).
pub(crate) fn init() {
    Uart::new(COM1).init();
    Uart::new(COM2).init();
}

/// Runs `f` with the COM1 console locked and interrupts off.
pub fn console<R>(f: impl FnOnce(&mut Uart) -> R) -> R {
    x86_64::instructions::interrupts::without_interrupts(|| f(&mut CONSOLE.lock()))
}

/// The COM1 console without taking its lock, for panic and exception reports: the
/// lock may be held by the code that failed. Output may interleave with another core's.
pub fn emergency_console() -> Uart {
    Uart::new(COM1)
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments<'_>) {
    console(|u| {
        let _ = fmt::Write::write_fmt(u, args);
    });
}

/// Prints to COM1, like `std::print!`.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::serial::_print(format_args!($($arg)*)) };
}

/// Prints a line to COM1, like `std::println!`.
#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => { $crate::serial::_print(format_args!("{}\n", format_args!($($arg)*))) };
}
