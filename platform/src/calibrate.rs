//! Measuring the TSC against CPUID and two hardware timers, in the order of
//! [`crate::tsc`]'s chain; [`crate::tsc::select`] decides.
//!
//! Each hardware measurement takes three windows of [`WINDOW_MS`] and keeps the median.
//! Every wait is bounded by a TSC deadline computed for the fastest plausible TSC
//! ([`crate::tsc::MAX_HZ`]) times four, so a dead timer costs well under a second.

use crate::acpi::PmTimer;
use crate::cpu::{Features, cpuid, rdtsc};
use crate::tsc::{self, Calibration, NoTscSource, PIT_HZ, TscSource};
use x86_64::instructions::port::Port;

/// Length of one measuring window.
const WINDOW_MS: u64 = 20;
/// TSC ticks after which a window is abandoned.
const WINDOW_DEADLINE: u64 = tsc::MAX_HZ / 1000 * WINDOW_MS * 4;

/// Runs the chain and returns the chosen frequency.
pub(crate) fn calibrate(f: &Features, pm: Option<PmTimer>) -> Result<Calibration, NoTscSource> {
    tsc::select(TscSource::CHAIN.into_iter().map(|s| (s, reading(s, f, pm))))
}

fn reading(s: TscSource, f: &Features, pm: Option<PmTimer>) -> Option<u64> {
    match s {
        TscSource::HvLeaf if f.hv_max_leaf >= 0x4000_0010 => tsc::hz_from_hv_leaf(cpuid(0x4000_0010, 0).eax),
        TscSource::Cpuid15 if f.max_leaf >= 0x15 => {
            let r = cpuid(0x15, 0);
            tsc::hz_from_cpuid15(r.eax, r.ebx, r.ecx)
        }
        TscSource::Cpuid16 if f.max_leaf >= 0x16 => tsc::hz_from_cpuid16(cpuid(0x16, 0).eax),
        TscSource::PmTimer => pm.and_then(measure_pm_timer),
        TscSource::Pit => measure_pit(),
        _ => None,
    }
}

fn median_of_three(mut window: impl FnMut() -> Option<u64>) -> Option<u64> {
    Some(tsc::median3([window()?, window()?, window()?]))
}

/// TSC ticks while the ACPI PM timer advances by `WINDOW_MS` worth of ticks.
fn measure_pm_timer(pm: PmTimer) -> Option<u64> {
    let mut port = Port::<u32>::new(pm.port);
    let mut read = || {
        // SAFETY: `pm.port` is the FADT's PM timer register; reading it has no side effects.
        unsafe { port.read() }
    };
    let target = PmTimer::HZ * WINDOW_MS / 1000;
    median_of_three(|| {
        let start = read();
        let t0 = rdtsc();
        loop {
            let ticks = u64::from(pm.ticks_between(start, read()));
            let t1 = rdtsc();
            if ticks >= target {
                return tsc::hz_from_span(t1 - t0, ticks, PmTimer::HZ);
            }
            if t1.wrapping_sub(t0) > WINDOW_DEADLINE {
                return None;
            }
            core::hint::spin_loop();
        }
    })
}

/// TSC ticks while 8254 channel 2 counts down `WINDOW_MS` in mode 0 (interrupt on
/// terminal count): OUT2 (port 0x61 bit 5) rises when the count reaches zero.
fn measure_pit() -> Option<u64> {
    const LATCH: u64 = PIT_HZ * WINDOW_MS / 1000;
    const _: () = assert!(LATCH <= 0xffff);
    let mut ctrl = Port::<u8>::new(0x61);
    let mut cmd = Port::<u8>::new(0x43);
    let mut ch2 = Port::<u8>::new(0x42);
    // SAFETY: port 0x61 (system control port B) gates PIT channel 2 and the speaker.
    let saved = unsafe { ctrl.read() };
    let result = median_of_three(|| {
        // SAFETY: PIT ports: gate channel 2 on with the speaker off, select channel 2,
        // lobyte/hibyte, mode 0, binary, then load the count. No memory effects.
        unsafe {
            ctrl.write((saved & !0x02) | 0x01);
            cmd.write(0b1011_0000);
            ch2.write(LATCH as u8);
            ch2.write((LATCH >> 8) as u8);
        }
        let t0 = rdtsc();
        let mut polls = 0u32;
        loop {
            // SAFETY: reading port B has no side effects.
            let out2 = unsafe { ctrl.read() } & 0x20 != 0;
            let t1 = rdtsc();
            if out2 {
                // A gate that reads high at once is not a PIT (e.g. microvm: port absent).
                return if polls < 2 { None } else { tsc::hz_from_span(t1 - t0, LATCH, PIT_HZ) };
            }
            if t1.wrapping_sub(t0) > WINDOW_DEADLINE {
                return None;
            }
            polls += 1;
            core::hint::spin_loop();
        }
    });
    // SAFETY: restores port B's gate and speaker bits as found.
    unsafe { ctrl.write(saved & 0x0f) };
    result
}
