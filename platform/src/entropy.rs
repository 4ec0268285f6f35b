//! The boot nonce: 64 bits that differ from one boot to the next, for what must not be
//! replayed across boots (signed control frames carry it, `core::control`).
//!
//! Sources, mixed with SipHash-2-4 (as a mixing function: the nonce must be fresh, not
//! secret): RDRAND (Intel SDM vol. 1 §7.3.17; CPUID `1:ECX[30]`), retried up to 10 times as
//! Intel's DRNG guide advises for a transient underflow; the TSC; and the CMOS real-time
//! clock's date and time registers (seconds 0x00, minutes 0x02, hours 0x04, day 0x07, month
//! 0x08, year 0x09, read through ports 0x70/0x71), which move forward between boots on any
//! PC. Without RDRAND two boots give the same nonce only if they read the same RTC second
//! and the same TSC value at this point: unlikely, not impossible; [`BootNonce::source`]
//! says which case a boot is in (`@ready` prints it).

use cadence_core::control::siphash24;
use x86_64::instructions::port::Port;

use crate::cpu::{cpuid, rdtsc};

/// Where the nonce's unpredictability came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonceSource {
    /// RDRAND (with the TSC and the RTC).
    Rdrand,
    /// The TSC and the RTC only (no RDRAND, or it kept failing).
    Clock,
}

impl NonceSource {
    /// `rdrand` or `clock`.
    pub const fn as_str(self) -> &'static str {
        match self {
            NonceSource::Rdrand => "rdrand",
            NonceSource::Clock => "clock",
        }
    }
}

/// A boot's nonce and its source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootNonce {
    /// The nonce.
    pub value: u64,
    /// Where it came from.
    pub source: NonceSource,
}

/// Draws this boot's nonce (call once).
pub fn boot_nonce() -> BootNonce {
    let random = rdrand64();
    let rtc = rtc_bytes();
    let mut input = [0u8; 24];
    input[..8].copy_from_slice(&random.unwrap_or(0).to_le_bytes());
    input[8..16].copy_from_slice(&rdtsc().to_le_bytes());
    input[16..].copy_from_slice(&rtc);
    let value = siphash24(b"cadence/nonce/v1", &input);
    BootNonce { value, source: if random.is_some() { NonceSource::Rdrand } else { NonceSource::Clock } }
}

/// 64 random bits from RDRAND, if the CPU has it and it delivers within 10 tries.
fn rdrand64() -> Option<u64> {
    if cpuid(1, 0).ecx & (1 << 30) == 0 {
        return None;
    }
    for _ in 0..10 {
        let mut v = 0u64;
        // SAFETY: CPUID.1:ECX[30] says this CPU implements RDRAND (the target feature the
        // intrinsic needs); it only writes `v` and reports success in CF.
        if unsafe { core::arch::x86_64::_rdrand64_step(&mut v) } == 1 {
            return Some(v);
        }
    }
    None
}

/// The RTC's date and time registers, raw (BCD or binary, whatever the clock keeps: only
/// their change between boots matters).
fn rtc_bytes() -> [u8; 8] {
    let mut out = [0u8; 8];
    for (o, reg) in out.iter_mut().zip([0x00u8, 0x02, 0x04, 0x07, 0x08, 0x09, 0x32, 0x0A]) {
        let mut index: Port<u8> = Port::new(0x70);
        let mut data: Port<u8> = Port::new(0x71);
        // SAFETY: ports 0x70/0x71 are the CMOS index/data pair of every PC; selecting a
        // register and reading it changes nothing else (bit 7 of the index, NMI masking, is
        // left clear as the platform keeps it).
        unsafe {
            index.write(reg);
            *o = data.read();
        }
    }
    out
}
