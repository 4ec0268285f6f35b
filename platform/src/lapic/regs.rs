//! Local APIC registers and bit fields (Intel SDM vol. 3A, chapter 11 "Advanced
//! Programmable Interrupt Controller"), pure: compiled and tested on the host too.
//!
//! Every register is named once by its xAPIC MMIO offset (Table 11-1); its x2APIC MSR
//! is `0x800 + offset / 16` (§11.12.1.2, Table 11-6). Bit fields declare their offset and
//! width once ([`Field`]) and values are encoded through them, never by hand-typed masks.

/// A register, by its xAPIC MMIO offset from the APIC base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reg(pub u32);

impl Reg {
    /// Local APIC ID (xAPIC: bits 31:24; x2APIC: all 32 bits, §11.12.5.1).
    pub const ID: Reg = Reg(0x020);
    /// Task priority.
    pub const TPR: Reg = Reg(0x080);
    /// End of interrupt: write 0.
    pub const EOI: Reg = Reg(0x0b0);
    /// Spurious interrupt vector register (bit 8: APIC software enable).
    pub const SVR: Reg = Reg(0x0f0);
    /// Error status.
    pub const ESR: Reg = Reg(0x280);
    /// Interrupt command, low half (x2APIC: the whole 64-bit ICR at MSR 0x830).
    pub const ICR_LOW: Reg = Reg(0x300);
    /// Interrupt command, high half (xAPIC only: destination in bits 31:24).
    pub const ICR_HIGH: Reg = Reg(0x310);
    /// LVT timer.
    pub const LVT_TIMER: Reg = Reg(0x320);
    /// LVT error.
    pub const LVT_ERROR: Reg = Reg(0x370);
    /// Timer initial count (one-shot / periodic modes; writing starts the count).
    pub const TIMER_INITIAL: Reg = Reg(0x380);
    /// Timer current count.
    pub const TIMER_CURRENT: Reg = Reg(0x390);
    /// Timer divide configuration.
    pub const TIMER_DIVIDE: Reg = Reg(0x3e0);

    /// The register's x2APIC MSR.
    pub const fn msr(self) -> u32 {
        X2APIC_MSR_BASE + (self.0 >> 4)
    }
}

/// First x2APIC MSR (§11.12.1.2).
pub const X2APIC_MSR_BASE: u32 = 0x800;
/// IA32_APIC_BASE MSR (§11.4.4).
pub const IA32_APIC_BASE: u32 = 0x1b;
/// IA32_TSC_DEADLINE MSR (§11.5.4.1).
pub const IA32_TSC_DEADLINE: u32 = 0x6e0;
/// IA32_APIC_BASE: x2APIC mode enable (EXTD).
pub const APIC_BASE_EXTD: Field = Field::new(10, 1);
/// IA32_APIC_BASE: APIC global enable.
pub const APIC_BASE_ENABLE: Field = Field::new(11, 1);
/// IA32_APIC_BASE: physical base address bits (4 KiB aligned).
pub const APIC_BASE_ADDR: Field = Field::new(12, 40);

/// A bit field of a register: `BITS` bits at `OFFSET`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Lowest bit.
    pub offset: u32,
    /// Width in bits.
    pub bits: u32,
}

impl Field {
    /// A field of `bits` bits at `offset`.
    pub const fn new(offset: u32, bits: u32) -> Self {
        Self { offset, bits }
    }

    /// The field's mask in place.
    pub const fn mask(self) -> u64 {
        (if self.bits >= 64 { u64::MAX } else { (1u64 << self.bits) - 1 }) << self.offset
    }

    /// `value` placed in the field (excess high bits dropped).
    pub const fn encode(self, value: u64) -> u64 {
        (value << self.offset) & self.mask()
    }

    /// The field's value in `reg`.
    pub const fn decode(self, reg: u64) -> u64 {
        (reg & self.mask()) >> self.offset
    }

    /// `reg` with the field replaced by `value`, every other bit preserved.
    pub const fn set(self, reg: u64, value: u64) -> u64 {
        (reg & !self.mask()) | self.encode(value)
    }
}

/// Interrupt vector (bits 7:0) of the LVT entries, the SVR and the ICR.
pub const VECTOR: Field = Field::new(0, 8);
/// SVR: APIC software enable (§11.9).
pub const SVR_ENABLE: Field = Field::new(8, 1);
/// LVT: masked.
pub const LVT_MASK: Field = Field::new(16, 1);
/// LVT timer: mode, bits 18:17 (§11.5.4, Figure 11-8).
pub const LVT_TIMER_MODE: Field = Field::new(17, 2);
/// ICR: delivery mode, bits 10:8 (§11.6.1, Figure 11-12).
pub const ICR_DELIVERY: Field = Field::new(8, 3);
/// ICR: delivery status (xAPIC only; 1 = send pending).
pub const ICR_PENDING: Field = Field::new(12, 1);
/// ICR: level (1 = assert; 0 only for INIT level de-assert).
pub const ICR_LEVEL: Field = Field::new(14, 1);
/// ICR: trigger mode (1 = level).
pub const ICR_TRIGGER: Field = Field::new(15, 1);
/// ICR: destination, xAPIC (bits 63:56 of the 64-bit ICR).
pub const ICR_DEST_XAPIC: Field = Field::new(56, 8);
/// ICR: destination, x2APIC (bits 63:32).
pub const ICR_DEST_X2APIC: Field = Field::new(32, 32);
/// Divide configuration: bits 0, 1 and 3 (§11.5.4, Figure 11-10).
pub const DIVIDE_LOW: Field = Field::new(0, 2);
/// Divide configuration: the high bit of the code, at bit 3.
pub const DIVIDE_HIGH: Field = Field::new(3, 1);

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
pub const fn lvt_timer(vector: u8, mode: TimerMode, masked: bool) -> u32 {
    (VECTOR.encode(vector as u64) | LVT_TIMER_MODE.encode(mode as u64) | LVT_MASK.encode(masked as u64)) as u32
}

/// The SVR value that enables the APIC with spurious vector `vector`.
pub const fn svr_enabled(vector: u8) -> u32 {
    (VECTOR.encode(vector as u64) | SVR_ENABLE.encode(1)) as u32
}

/// The divide configuration value for dividing the bus clock by `divisor` (1, 2, 4,
/// …, 128); `None` for any other divisor.
pub const fn divide_config(divisor: u32) -> Option<u32> {
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
    Some((DIVIDE_LOW.encode(code & 0b11) | DIVIDE_HIGH.encode(code >> 2)) as u32)
}

/// ICR delivery modes (§11.6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Delivery {
    /// The vector, to the destination.
    Fixed = 0b000,
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

    /// A fixed, edge-triggered interrupt with `vector`.
    pub const fn fixed(vector: u8) -> Ipi {
        Ipi { delivery: Delivery::Fixed, vector, assert: true, level_triggered: false }
    }

    /// The ICR's low 32 bits (physical destination mode, no shorthand).
    pub const fn low(self) -> u32 {
        (VECTOR.encode(self.vector as u64)
            | ICR_DELIVERY.encode(self.delivery as u64)
            | ICR_LEVEL.encode(self.assert as u64)
            | ICR_TRIGGER.encode(self.level_triggered as u64)) as u32
    }

    /// The 64-bit x2APIC ICR value for destination `apic_id`.
    pub const fn x2apic(self, apic_id: u32) -> u64 {
        ICR_DEST_X2APIC.encode(apic_id as u64) | self.low() as u64
    }

    /// The xAPIC ICR high word for destination `apic_id`, or `None` when the ID does not
    /// fit xAPIC's 8-bit destination field.
    pub const fn xapic_high(apic_id: u32) -> Option<u32> {
        if apic_id > 0xff { None } else { Some((ICR_DEST_XAPIC.encode(apic_id as u64) >> 32) as u32) }
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
        assert_eq!(Reg::ID.msr(), 0x802);
        assert_eq!(Reg::EOI.msr(), 0x80b);
        assert_eq!(Reg::SVR.msr(), 0x80f);
        assert_eq!(Reg::ICR_LOW.msr(), 0x830);
        assert_eq!(Reg::LVT_TIMER.msr(), 0x832);
        assert_eq!(Reg::TIMER_INITIAL.msr(), 0x838);
        assert_eq!(Reg::TIMER_CURRENT.msr(), 0x839);
        assert_eq!(Reg::TIMER_DIVIDE.msr(), 0x83e);
    }

    #[test]
    fn icr_values_match_the_sdm() {
        // The values every bring-up sequence uses (notes/platform.md §2).
        assert_eq!(Ipi::INIT_ASSERT.low(), 0xc500);
        assert_eq!(Ipi::INIT_DEASSERT.low(), 0x8500);
        assert_eq!(Ipi::startup(0x08).low(), 0x4608);
        assert_eq!(Ipi::fixed(0xf1).low(), 0x40f1);
        assert_eq!(Ipi::startup(8).x2apic(3), 0x0000_0003_0000_4608);
        assert_eq!(Ipi::xapic_high(3), Some(0x0300_0000));
        assert_eq!(Ipi::xapic_high(256), None);
    }

    #[test]
    fn lvt_svr_and_divide_encodings() {
        assert_eq!(svr_enabled(0xff), 0x1ff);
        assert_eq!(lvt_timer(0xf0, TimerMode::TscDeadline, false), 0x4_00f0);
        assert_eq!(lvt_timer(0xf0, TimerMode::OneShot, true), 0x1_00f0);
        assert_eq!(divide_config(16), Some(0b0011));
        assert_eq!(divide_config(1), Some(0b1011));
        assert_eq!(divide_config(128), Some(0b1010));
        assert_eq!(divide_config(3), None);
    }

    #[test]
    fn fields_preserve_other_bits() {
        let base = 0xfee0_0900u64; // BSP flag (bit 8) and global enable set
        assert_eq!(APIC_BASE_EXTD.set(base, 1), 0xfee0_0d00);
        assert_eq!(APIC_BASE_ADDR.decode(base) << 12, 0xfee0_0000);
        assert_eq!(APIC_BASE_ENABLE.decode(base), 1);
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
