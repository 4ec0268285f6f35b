//! Local APIC registers and bit fields (Intel SDM vol. 3A, chapter 11 "Advanced
//! Programmable Interrupt Controller"), pure: compiled and tested on the host too.
//!
//! Every register is declared once ([`cadence_drivers::registers!`], the workspace's one
//! register-field type) by its xAPIC MMIO offset (Table 11-1), in the [`Lapic`] space;
//! its x2APIC MSR is `0x800 + offset / 16` (§11.12.1.2, Table 11-6, [`x2apic_msr`]).
//! The MSRs the APIC code touches are declared in the [`Msr`] space by their number.
//! Values are encoded through the declared fields, never by hand-typed masks, and a
//! field of one register does not apply to another.

use cadence_drivers::reg::{Register, Value};
use cadence_drivers::registers;

/// The space of local APIC registers: offsets from the xAPIC register page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lapic {}

/// The space of model-specific registers: the "offset" is the MSR number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msr {}

registers! {
    /// Local APIC ID (xAPIC: bits 31:24; x2APIC: all 32 bits, §11.12.5.1).
    pub ID: Ro<u32> @ 0x020 in Lapic {
        /// The xAPIC ID.
        XAPIC_ID: 31:24,
    }
    /// Task priority.
    pub TPR: Rw<u32> @ 0x080 in Lapic {}
    /// End of interrupt: write 0.
    pub EOI: Wo<u32> @ 0x0B0 in Lapic {}
    /// Spurious interrupt vector register (§11.9).
    pub SVR: Rw<u32> @ 0x0F0 in Lapic {
        /// Spurious vector.
        VECTOR: 7:0,
        /// APIC software enable.
        ENABLE: 8,
    }
    /// Error status.
    pub ESR: Rw<u32> @ 0x280 in Lapic {}
    /// Interrupt command, low half (§11.6.1, Figure 11-12).
    pub ICR_LOW: Rw<u32> @ 0x300 in Lapic {
        /// Vector (start-up: the page of the entry point).
        VECTOR: 7:0,
        /// Delivery mode.
        DELIVERY: 10:8,
        /// Delivery status (xAPIC only; 1 = send pending).
        PENDING: 12,
        /// Level (1 = assert; 0 only for INIT level de-assert).
        LEVEL: 14,
        /// Trigger mode (1 = level).
        TRIGGER: 15,
    }
    /// Interrupt command, high half (xAPIC only).
    pub ICR_HIGH: Rw<u32> @ 0x310 in Lapic {
        /// Destination APIC ID (8 bits).
        DEST: 31:24,
    }
    /// LVT timer (§11.5.4, Figure 11-8).
    pub LVT_TIMER: Rw<u32> @ 0x320 in Lapic {
        /// Vector.
        VECTOR: 7:0,
        /// Masked.
        MASK: 16,
        /// Mode ([`TimerMode`]).
        MODE: 18:17,
    }
    /// LVT error.
    pub LVT_ERROR: Rw<u32> @ 0x370 in Lapic {
        /// Vector.
        VECTOR: 7:0,
        /// Masked.
        MASK: 16,
    }
    /// Timer initial count (one-shot / periodic modes; writing starts the count).
    pub TIMER_INITIAL: Rw<u32> @ 0x380 in Lapic {}
    /// Timer current count.
    pub TIMER_CURRENT: Ro<u32> @ 0x390 in Lapic {}
    /// Timer divide configuration (§11.5.4, Figure 11-10): the 3-bit code split over
    /// bits 1:0 and 3.
    pub TIMER_DIVIDE: Rw<u32> @ 0x3E0 in Lapic {
        /// Code bits 1:0.
        LOW: 1:0,
        /// Code bit 2.
        HIGH: 3,
    }

    /// IA32_APIC_BASE (§11.4.4).
    pub IA32_APIC_BASE: Rw<u64> @ 0x1B in Msr {
        /// x2APIC mode enable (EXTD).
        EXTD: 10,
        /// APIC global enable.
        ENABLE: 11,
        /// Physical base address bits (4 KiB aligned).
        ADDR: 51:12,
    }
    /// IA32_TSC_DEADLINE (§11.5.4.1).
    pub IA32_TSC_DEADLINE: Rw<u64> @ 0x6E0 in Msr {}
    /// The x2APIC interrupt command register: one 64-bit MSR (§11.12.9).
    pub X2APIC_ICR: Rw<u64> @ 0x830 in Msr {
        /// Vector.
        VECTOR: 7:0,
        /// Delivery mode.
        DELIVERY: 10:8,
        /// Level.
        LEVEL: 14,
        /// Trigger mode.
        TRIGGER: 15,
        /// Destination APIC ID (32 bits).
        DEST: 63:32,
    }
}

/// First x2APIC MSR (§11.12.1.2).
pub const X2APIC_MSR_BASE: u32 = 0x800;

/// The x2APIC MSR of local APIC register `R`.
pub const fn x2apic_msr<R: Register<Space = Lapic>>(_: R) -> u32 {
    X2APIC_MSR_BASE + (R::OFFSET >> 4) as u32
}

/// The number of MSR `R`.
pub const fn msr<R: Register<Space = Msr>>(_: R) -> u32 {
    R::OFFSET as u32
}

/// LVT timer modes (bits 18:17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum TimerMode {
    /// Counts down once from the initial count.
    OneShot = 0,
    /// Reloads the initial count.
    Periodic = 1,
    /// Fires when the TSC reaches IA32_TSC_DEADLINE (CPUID `1:ECX[24]`).
    TscDeadline = 2,
}

/// An LVT timer value: `vector`, `mode`, masked or not.
pub const fn lvt_timer(vector: u8, mode: TimerMode, masked: bool) -> Value<LVT_TIMER> {
    LVT_TIMER::VECTOR.value(vector as u64).with(LVT_TIMER::MODE, mode as u64).set_if(LVT_TIMER::MASK, masked)
}

/// The SVR value that enables the APIC with spurious vector `vector`.
pub const fn svr_enabled(vector: u8) -> Value<SVR> {
    SVR::VECTOR.value(vector as u64).set(SVR::ENABLE)
}

/// The divide configuration value for dividing the bus clock by `divisor` (1, 2, 4,
/// …, 128); `None` for any other divisor.
pub const fn divide_config(divisor: u32) -> Option<Value<TIMER_DIVIDE>> {
    // Divide by 2^(code+1) for code 0..=6, by 1 for code 7; the 3-bit code is split
    // over bits 1:0 and 3.
    let code = match divisor {
        2 => 0,
        4 => 1,
        8 => 2,
        16 => 3,
        32 => 4,
        64 => 5,
        128 => 6,
        1 => 7,
        _ => return None,
    };
    Some(TIMER_DIVIDE::LOW.value(code & 0b11).with(TIMER_DIVIDE::HIGH, code >> 2))
}

/// ICR delivery modes (§11.6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Delivery {
    /// The vector, to the destination.
    Fixed = 0b000,
    /// Non-maskable interrupt (vector ignored, taken through IDT vector 2).
    Nmi = 0b100,
    /// INIT.
    Init = 0b101,
    /// Start-up IPI: the AP starts in real mode at `vector << 12`.
    StartUp = 0b110,
}

/// An IPI, before it is encoded for one APIC mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipi {
    /// Delivery mode.
    pub delivery: Delivery,
    /// Vector (for start-up: the page number of the entry point).
    pub vector: u8,
    /// Level: assert (true) or de-assert (INIT level de-assert only).
    pub assert: bool,
    /// Level-triggered (INIT assert and de-assert) rather than edge.
    pub level_triggered: bool,
}

impl Ipi {
    /// INIT, level-triggered assert (§11.6.1: "INIT ... level assert").
    pub const INIT_ASSERT: Ipi = Ipi { delivery: Delivery::Init, vector: 0, assert: true, level_triggered: true };
    /// INIT level de-assert (xAPIC only; not supported in x2APIC mode, §11.12.9).
    pub const INIT_DEASSERT: Ipi = Ipi { delivery: Delivery::Init, vector: 0, assert: false, level_triggered: true };

    /// A start-up IPI that starts the AP at physical `page << 12`.
    pub const fn startup(page: u8) -> Ipi {
        Ipi { delivery: Delivery::StartUp, vector: page, assert: true, level_triggered: false }
    }

    /// A non-maskable interrupt (§11.6.1: delivery mode NMI; the vector field is ignored).
    pub const NMI: Ipi = Ipi { delivery: Delivery::Nmi, vector: 0, assert: true, level_triggered: false };

    /// A fixed, edge-triggered interrupt with `vector`.
    pub const fn fixed(vector: u8) -> Ipi {
        Ipi { delivery: Delivery::Fixed, vector, assert: true, level_triggered: false }
    }

    /// The xAPIC ICR's low 32 bits (physical destination mode, no shorthand).
    pub const fn low(self) -> Value<ICR_LOW> {
        ICR_LOW::VECTOR
            .value(self.vector as u64)
            .with(ICR_LOW::DELIVERY, self.delivery as u64)
            .set_if(ICR_LOW::LEVEL, self.assert)
            .set_if(ICR_LOW::TRIGGER, self.level_triggered)
    }

    /// The 64-bit x2APIC ICR value for destination `apic_id`.
    pub const fn x2apic(self, apic_id: u32) -> Value<X2APIC_ICR> {
        X2APIC_ICR::VECTOR
            .value(self.vector as u64)
            .with(X2APIC_ICR::DELIVERY, self.delivery as u64)
            .set_if(X2APIC_ICR::LEVEL, self.assert)
            .set_if(X2APIC_ICR::TRIGGER, self.level_triggered)
            .with(X2APIC_ICR::DEST, apic_id as u64)
    }

    /// The xAPIC ICR high word for destination `apic_id`, or `None` when the ID does not
    /// fit xAPIC's 8-bit destination field.
    pub const fn xapic_high(apic_id: u32) -> Option<Value<ICR_HIGH>> {
        if apic_id > 0xff { None } else { Some(ICR_HIGH::DEST.value(apic_id as u64)) }
    }
}

/// LAPIC timer ticks for `tsc_ticks` of TSC time, rounded up, at least 1 and at most
/// `u32::MAX` (the caller re-arms when the deadline is further away than that).
pub const fn oneshot_count(tsc_ticks: u64, lapic_hz: u64, tsc_hz: u64) -> u32 {
    if tsc_hz == 0 {
        return u32::MAX;
    }
    let n = (tsc_ticks as u128 * lapic_hz as u128).div_ceil(tsc_hz as u128);
    if n == 0 {
        1
    } else if n > u32::MAX as u128 {
        u32::MAX
    } else {
        n as u32
    }
}

/// The LAPIC timer frequency from a calibration window: the timer counted down
/// `lapic_ticks` while the TSC advanced `tsc_ticks` at `tsc_hz`. `None` when the timer
/// did not move or the window is empty.
pub const fn lapic_hz(lapic_ticks: u64, tsc_ticks: u64, tsc_hz: u64) -> Option<u64> {
    if lapic_ticks == 0 || tsc_ticks == 0 {
        return None;
    }
    let hz = lapic_ticks as u128 * tsc_hz as u128 / tsc_ticks as u128;
    if hz == 0 || hz > u64::MAX as u128 { None } else { Some(hz as u64) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn x2apic_msrs_follow_the_offsets() {
        // SDM Table 11-6.
        assert_eq!(x2apic_msr(ID), 0x802);
        assert_eq!(x2apic_msr(EOI), 0x80b);
        assert_eq!(x2apic_msr(SVR), 0x80f);
        assert_eq!(x2apic_msr(ICR_LOW), 0x830);
        assert_eq!(msr(X2APIC_ICR), x2apic_msr(ICR_LOW));
        assert_eq!(x2apic_msr(LVT_TIMER), 0x832);
        assert_eq!(x2apic_msr(TIMER_INITIAL), 0x838);
        assert_eq!(x2apic_msr(TIMER_CURRENT), 0x839);
        assert_eq!(x2apic_msr(TIMER_DIVIDE), 0x83e);
        assert_eq!((msr(IA32_APIC_BASE), msr(IA32_TSC_DEADLINE)), (0x1b, 0x6e0));
    }

    #[test]
    fn icr_values_match_the_sdm() {
        // The values every bring-up sequence uses.
        assert_eq!(Ipi::INIT_ASSERT.low().bits(), 0xc500);
        assert_eq!(Ipi::INIT_DEASSERT.low().bits(), 0x8500);
        assert_eq!(Ipi::startup(0x08).low().bits(), 0x4608);
        assert_eq!(Ipi::fixed(0xf1).low().bits(), 0x40f1);
        assert_eq!(Ipi::startup(8).x2apic(3).bits(), 0x0000_0003_0000_4608);
        assert_eq!(Ipi::xapic_high(3).map(Value::bits), Some(0x0300_0000));
        assert_eq!(Ipi::xapic_high(256), None);
    }

    #[test]
    fn lvt_svr_and_divide_encodings() {
        assert_eq!(svr_enabled(0xff).bits(), 0x1ff);
        assert_eq!(lvt_timer(0xf0, TimerMode::TscDeadline, false).bits(), 0x4_00f0);
        assert_eq!(lvt_timer(0xf0, TimerMode::OneShot, true).bits(), 0x1_00f0);
        assert_eq!(divide_config(16).map(Value::bits), Some(0b0011));
        assert_eq!(divide_config(1).map(Value::bits), Some(0b1011));
        assert_eq!(divide_config(128).map(Value::bits), Some(0b1010));
        assert_eq!(divide_config(3), None);
    }

    #[test]
    fn fields_preserve_other_bits() {
        // BSP flag (bit 8) and global enable set.
        let base = Value::<IA32_APIC_BASE>::new(0xfee0_0900);
        assert_eq!(base.set(IA32_APIC_BASE::EXTD).bits(), 0xfee0_0d00);
        assert_eq!(base.get(IA32_APIC_BASE::ADDR) << 12, 0xfee0_0000);
        assert!(base.is_set(IA32_APIC_BASE::ENABLE));
    }

    #[test]
    fn oneshot_counts_round_up_and_clamp() {
        // 1 ms at a 2.6 GHz TSC with a 62.5 MHz timer: 62 500 ticks.
        assert_eq!(oneshot_count(2_600_000, 62_500_000, 2_600_000_000), 62_500);
        assert_eq!(oneshot_count(1, 62_500_000, 2_600_000_000), 1);
        assert_eq!(oneshot_count(0, 62_500_000, 2_600_000_000), 1);
        assert_eq!(oneshot_count(u64::MAX, 62_500_000, 2_600_000_000), u32::MAX);
        assert_eq!(oneshot_count(5, 1, 0), u32::MAX);
    }

    #[test]
    fn calibration_arithmetic() {
        assert_eq!(lapic_hz(625_000, 26_000_000, 2_600_000_000), Some(62_500_000));
        assert_eq!(lapic_hz(0, 26_000_000, 2_600_000_000), None);
        assert_eq!(lapic_hz(5, 0, 2_600_000_000), None);
    }
}
