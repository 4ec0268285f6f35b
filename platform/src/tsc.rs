//! TSC frequency: the arithmetic and the choice between sources.
//!
//! The TSC rate comes from an ordered chain (docs/PROTOCOL.md names):
//!
//! 1. `hv-leaf` — hypervisor CPUID leaf 0x40000010 EAX (TSC kHz), only where the
//!    hypervisor's maximum leaf (0x40000000 EAX) reaches it;
//! 2. `cpuid-15h` — CPUID 0x15: TSC = crystal Hz (ECX) × EBX / EAX (ECX may be 0: unusable);
//! 3. `cpuid-16h` — CPUID 0x16 EAX: base frequency in MHz (an approximation);
//! 4. `pm-timer` — TSC ticks across a measured span of the ACPI PM timer (3.579545 MHz);
//! 5. `pit` — TSC ticks across a countdown of 8254 channel 2 (1.193182 MHz).
//!
//! A reading is plausible only within [`MIN_HZ`]..=[`MAX_HZ`]. [`select`] takes the
//! readings lazily in chain order and stops at the first pair that agrees within
//! [`AGREE_PERCENT`]: the earlier one is the source, the later one the cross-check.
//! This module is pure: the measuring lives in `calibrate`.

use core::fmt;

/// Slowest plausible TSC.
pub const MIN_HZ: u64 = 500_000_000;
/// Fastest plausible TSC.
pub const MAX_HZ: u64 = 10_000_000_000;
/// Two readings agree when they differ by at most this share of the larger one.
/// PIT calibration under QEMU TCG reads 5–12% high (measured across runs), so 15%.
pub const AGREE_PERCENT: u64 = 15;
/// 8254 PIT input clock.
pub const PIT_HZ: u64 = 1_193_182;

/// A source of the TSC frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum TscSource {
    /// Hypervisor CPUID leaf 0x40000010.
    HvLeaf,
    /// CPUID leaf 0x15 (TSC/crystal ratio).
    Cpuid15,
    /// CPUID leaf 0x16 (base frequency).
    Cpuid16,
    /// ACPI PM timer measurement.
    PmTimer,
    /// 8254 PIT channel 2 measurement.
    Pit,
}

impl TscSource {
    /// Every source, in chain order.
    pub const CHAIN: [TscSource; 5] =
        [TscSource::HvLeaf, TscSource::Cpuid15, TscSource::Cpuid16, TscSource::PmTimer, TscSource::Pit];

    /// The name used in `@banner` (PROTOCOL.md).
    pub const fn as_str(self) -> &'static str {
        match self {
            TscSource::HvLeaf => "hv-leaf",
            TscSource::Cpuid15 => "cpuid-15h",
            TscSource::Cpuid16 => "cpuid-16h",
            TscSource::PmTimer => "pm-timer",
            TscSource::Pit => "pit",
        }
    }
}

impl fmt::Display for TscSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The chosen TSC frequency and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub struct Calibration {
    /// TSC ticks per second.
    pub hz: u64,
    /// The source whose value is used.
    pub source: TscSource,
    /// The source that agreed with it, or `None` if no second plausible source agreed.
    pub check: Option<TscSource>,
    /// Readings that were implausible or disagreed with every other one.
    pub rejected: u8,
}

impl Calibration {
    /// The cross-check's name for `@banner` (`none` if there was none).
    pub fn check_str(&self) -> &'static str {
        self.check.map_or("none", TscSource::as_str)
    }
}

/// No source gave a plausible frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub struct NoTscSource;

impl fmt::Display for NoTscSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no plausible TSC frequency source")
    }
}

/// Whether `hz` is a believable TSC frequency.
pub const fn plausible(hz: u64) -> bool {
    hz >= MIN_HZ && hz <= MAX_HZ
}

/// Whether two readings agree within [`AGREE_PERCENT`] of the larger.
pub const fn agree(a: u64, b: u64) -> bool {
    let (lo, hi) = if a < b { (a, b) } else { (b, a) };
    ((hi - lo) as u128) * 100 <= (hi as u128) * AGREE_PERCENT as u128
}

/// Hypervisor leaf 0x40000010 EAX (kHz) to Hz; `None` for 0.
pub const fn hz_from_hv_leaf(eax: u32) -> Option<u64> {
    if eax == 0 { None } else { Some(eax as u64 * 1_000) }
}

/// CPUID 0x15 (EAX = denominator, EBX = numerator, ECX = crystal Hz) to Hz; `None` if
/// any of them is 0 (the crystal frequency is not enumerated).
pub const fn hz_from_cpuid15(eax: u32, ebx: u32, ecx: u32) -> Option<u64> {
    if eax == 0 || ebx == 0 || ecx == 0 { None } else { Some(ecx as u64 * ebx as u64 / eax as u64) }
}

/// CPUID 0x16 EAX (base MHz) to Hz; `None` for 0.
pub const fn hz_from_cpuid16(eax: u32) -> Option<u64> {
    let mhz = eax & 0xffff;
    if mhz == 0 { None } else { Some(mhz as u64 * 1_000_000) }
}

/// TSC Hz from `tsc_ticks` counted while a reference clock of `ref_hz` advanced
/// `ref_ticks`; `None` if `ref_ticks` is 0 or the result overflows.
pub const fn hz_from_span(tsc_ticks: u64, ref_ticks: u64, ref_hz: u64) -> Option<u64> {
    if ref_ticks == 0 {
        return None;
    }
    let hz = tsc_ticks as u128 * ref_hz as u128 / ref_ticks as u128;
    if hz > u64::MAX as u128 { None } else { Some(hz as u64) }
}

/// The median of three readings (measurements take three windows and keep the middle
/// one, so one preempted window cannot skew the result).
pub fn median3(mut v: [u64; 3]) -> u64 {
    v.sort_unstable();
    v[1]
}

/// Picks the frequency from `readings`, given lazily in chain order.
///
/// Each plausible reading is compared with the earlier plausible ones, oldest first;
/// the first agreeing pair wins (earlier = source, later = check) and no further
/// reading is taken. If no pair agrees, the first plausible reading is used with
/// `check: None`.
pub fn select(readings: impl IntoIterator<Item = (TscSource, Option<u64>)>) -> Result<Calibration, NoTscSource> {
    let mut seen: heapless::Vec<(TscSource, u64), 8> = heapless::Vec::new();
    let mut rejected = 0u8;
    for (src, hz) in readings {
        let Some(hz) = hz.filter(|&h| plausible(h)) else {
            rejected += u8::from(hz.is_some());
            continue;
        };
        if let Some(&(first, first_hz)) = seen.iter().find(|&&(_, h)| agree(h, hz)) {
            rejected += (seen.len() - 1) as u8;
            return Ok(Calibration { hz: first_hz, source: first, check: Some(src), rejected });
        }
        let _ = seen.push((src, hz));
    }
    let &(source, hz) = seen.first().ok_or(NoTscSource)?;
    Ok(Calibration { hz, source, check: None, rejected: rejected + (seen.len() - 1) as u8 })
}

#[cfg(test)]
mod tests {
    use super::*;
    use TscSource::*;

    #[test]
    fn leaf_arithmetic() {
        assert_eq!(hz_from_hv_leaf(2_596_130), Some(2_596_130_000));
        assert_eq!(hz_from_hv_leaf(0), None);
        // Skylake client: 24 MHz crystal, ratio 216/2.
        assert_eq!(hz_from_cpuid15(2, 216, 24_000_000), Some(2_592_000_000));
        assert_eq!(hz_from_cpuid15(2, 216, 0), None);
        assert_eq!(hz_from_cpuid16(2600), Some(2_600_000_000));
        assert_eq!(hz_from_cpuid16(0), None);
        assert_eq!(hz_from_span(2_600_000_000, 3_579_545, 3_579_545), Some(2_600_000_000));
        assert_eq!(hz_from_span(130_000_000, 59_659, PIT_HZ), Some(2_600_004_358));
        assert_eq!(hz_from_span(1, 0, 1), None);
        assert_eq!(median3([5, 1, 3]), 3);
    }

    #[test]
    fn agreement_and_plausibility() {
        assert!(agree(2_600_000_000, 2_900_000_000)); // PIT reads high under TCG
        assert!(!agree(2_600_000_000, 3_100_000_000));
        assert!(agree(7, 7));
        assert!(!plausible(1_200_000)); // microvm's broken PIT
        assert!(!plausible(20_000_000_000));
        assert!(plausible(MIN_HZ) && plausible(MAX_HZ));
    }

    #[test]
    fn tcg_chain_uses_pm_timer_checked_by_pit() {
        let r = [
            (HvLeaf, None),
            (Cpuid15, None),
            (Cpuid16, None),
            (PmTimer, Some(2_598_000_000)),
            (Pit, Some(2_800_000_000)),
        ];
        let c = select(r).unwrap();
        assert_eq!((c.hz, c.source, c.check, c.rejected), (2_598_000_000, PmTimer, Some(Pit), 0));
        assert_eq!(c.check_str(), "pit");
    }

    #[test]
    fn selection_stops_at_the_first_agreeing_pair() {
        let mut taken = Vec::new();
        let r = [(HvLeaf, Some(2_596_130_000)), (Cpuid15, Some(2_596_000_000)), (PmTimer, Some(1))];
        let c = select(r.into_iter().inspect(|(s, _)| taken.push(*s))).unwrap();
        assert_eq!((c.source, c.check), (HvLeaf, Some(Cpuid15)));
        assert_eq!(taken, vec![HvLeaf, Cpuid15], "later sources are not measured");
    }

    #[test]
    fn an_outlier_first_source_loses_to_an_agreeing_pair() {
        let r = [(Cpuid16, Some(1_000_000_000)), (PmTimer, Some(2_600_000_000)), (Pit, Some(2_700_000_000))];
        let c = select(r).unwrap();
        assert_eq!((c.hz, c.source, c.check, c.rejected), (2_600_000_000, PmTimer, Some(Pit), 1));
    }

    #[test]
    fn lone_or_disagreeing_sources() {
        let c = select([(PmTimer, Some(2_600_000_000)), (Pit, Some(1_200_000))]).unwrap();
        assert_eq!((c.source, c.check, c.check_str(), c.rejected), (PmTimer, None, "none", 1));
        let c = select([(Cpuid16, Some(1_000_000_000)), (Pit, Some(3_000_000_000))]).unwrap();
        assert_eq!((c.source, c.hz, c.check, c.rejected), (Cpuid16, 1_000_000_000, None, 1));
        assert_eq!(select([(Pit, Some(1_000)), (PmTimer, None)]), Err(NoTscSource));
    }

    #[test]
    fn names_match_the_protocol() {
        let names: Vec<_> = TscSource::CHAIN.iter().map(|s| s.as_str()).collect();
        assert_eq!(names, ["hv-leaf", "cpuid-15h", "cpuid-16h", "pm-timer", "pit"]);
    }
}
