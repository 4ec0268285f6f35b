//! FADT (ACPI 6.5 §5.2.9): where the ACPI PM timer is.
//!
//! The PM timer counts at 3.579545 MHz (§4.8.3.3); it is 24 bits wide unless FADT flag
//! `TMR_VAL_EXT` (bit 8) says 32. Cadence only uses it in I/O space, to calibrate the TSC.

use super::{AcpiError, le32, le64};

/// FADT offset of `PM_TMR_BLK` (32-bit I/O port).
const PM_TMR_BLK: usize = 76;
/// FADT offset of `PM_TMR_LEN` (must be 4 when the timer is supported).
const PM_TMR_LEN: usize = 91;
/// FADT offset of `Flags`.
const FLAGS: usize = 112;
/// Flags: `TMR_VAL_EXT`, the timer is 32 bits wide.
const FLAG_TMR_VAL_EXT: u32 = 1 << 8;
/// Flags: `HW_REDUCED_ACPI`, no fixed hardware (and so no PM timer).
const FLAG_HW_REDUCED: u32 = 1 << 20;
/// FADT offset of `X_PM_TMR_BLK` (a 12-byte Generic Address Structure, §5.2.3.2).
const X_PM_TMR_BLK: usize = 208;
/// GAS address space ID for system I/O.
const GAS_SYSTEM_IO: u8 = 1;

/// The ACPI PM timer's I/O port and width.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub struct PmTimer {
    /// I/O port to read with a 32-bit `in`.
    pub port: u16,
    /// Counter width: 24 or 32.
    pub bits: u8,
}

impl PmTimer {
    /// Counting frequency (ACPI 6.5 §4.8.3.3).
    pub const HZ: u64 = 3_579_545;

    /// Mask of the counter's valid bits.
    pub const fn mask(&self) -> u32 {
        if self.bits >= 32 { u32::MAX } else { (1u32 << self.bits) - 1 }
    }

    /// Ticks from `earlier` to `later`, allowing for one wrap.
    pub const fn ticks_between(&self, earlier: u32, later: u32) -> u32 {
        later.wrapping_sub(earlier) & self.mask()
    }
}

/// Reads the PM timer location out of a checksummed FADT. `Ok(None)` means the FADT
/// declares no usable I/O-space PM timer.
pub fn parse_fadt(t: &[u8]) -> Result<Option<PmTimer>, AcpiError> {
    if t.get(..4) != Some(b"FACP".as_slice()) {
        return Err(AcpiError::BadSignature);
    }
    let blk = le32(t, PM_TMR_BLK).ok_or(AcpiError::Truncated)?;
    let len = *t.get(PM_TMR_LEN).ok_or(AcpiError::Truncated)?;
    // ACPI 1.0 FADTs end before `Flags`; their timer is 24 bits.
    let flags = le32(t, FLAGS).unwrap_or(0);
    if flags & FLAG_HW_REDUCED != 0 {
        return Ok(None);
    }
    let bits = if flags & FLAG_TMR_VAL_EXT != 0 { 32 } else { 24 };
    // "If this field contains a non-zero value which can be used by the OSPM, then the
    // PM_TMR_BLK field must be ignored by the OSPM" (X_PM_TMR_BLK, Table 5.10).
    if let (Some(&space), Some(addr)) = (t.get(X_PM_TMR_BLK), le64(t, X_PM_TMR_BLK + 4))
        && addr != 0
        && space == GAS_SYSTEM_IO
        && let Ok(port) = u16::try_from(addr)
    {
        return Ok(Some(PmTimer { port, bits }));
    }
    if blk == 0 || len != 4 {
        return Ok(None);
    }
    Ok(u16::try_from(blk).ok().map(|port| PmTimer { port, bits }))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::fixtures::sdt;
    use super::*;

    /// A 244-byte FADT body (without header) with the given legacy and extended timer blocks.
    pub(crate) fn fadt_body(blk: u32, len: u8, flags: u32) -> Vec<u8> {
        let mut b = vec![0u8; 244 - 36];
        b[PM_TMR_BLK - 36..PM_TMR_BLK - 32].copy_from_slice(&blk.to_le_bytes());
        b[PM_TMR_LEN - 36] = len;
        b[FLAGS - 36..FLAGS - 32].copy_from_slice(&flags.to_le_bytes());
        b
    }

    #[test]
    fn legacy_block() {
        let t = sdt(b"FACP", 1, &fadt_body(0x608, 4, 0));
        assert_eq!(parse_fadt(&t), Ok(Some(PmTimer { port: 0x608, bits: 24 })));
        let t = sdt(b"FACP", 1, &fadt_body(0xb008, 4, FLAG_TMR_VAL_EXT));
        assert_eq!(parse_fadt(&t), Ok(Some(PmTimer { port: 0xb008, bits: 32 })));
        let t = sdt(b"FACP", 1, &fadt_body(0x608, 0, 0));
        assert_eq!(parse_fadt(&t), Ok(None));
        let t = sdt(b"FACP", 1, &fadt_body(0x608, 4, FLAG_HW_REDUCED));
        assert_eq!(parse_fadt(&t), Ok(None));
    }

    #[test]
    fn extended_block_wins_when_in_io_space() {
        let mut body = fadt_body(0x608, 4, 0);
        body[X_PM_TMR_BLK - 36] = GAS_SYSTEM_IO;
        body[X_PM_TMR_BLK - 36 + 4..X_PM_TMR_BLK - 36 + 12].copy_from_slice(&0x1808u64.to_le_bytes());
        let t = sdt(b"FACP", 5, &body);
        assert_eq!(parse_fadt(&t), Ok(Some(PmTimer { port: 0x1808, bits: 24 })));
        body[X_PM_TMR_BLK - 36] = 0; // memory space: not supported, use the legacy block
        let t = sdt(b"FACP", 5, &body);
        assert_eq!(parse_fadt(&t), Ok(Some(PmTimer { port: 0x608, bits: 24 })));
    }

    #[test]
    fn short_or_foreign_tables() {
        let t = sdt(b"FACP", 1, &[0u8; 20]);
        assert_eq!(parse_fadt(&t), Err(AcpiError::Truncated));
        let t = sdt(b"APIC", 1, &fadt_body(0x608, 4, 0));
        assert_eq!(parse_fadt(&t), Err(AcpiError::BadSignature));
        // An ACPI 1.0 FADT (116 bytes) has no extended block.
        let t = &sdt(b"FACP", 1, &fadt_body(0x608, 4, 0))[..116];
        assert_eq!(parse_fadt(t), Ok(Some(PmTimer { port: 0x608, bits: 24 })));
    }

    #[test]
    fn timer_wraps() {
        let pm = PmTimer { port: 0x608, bits: 24 };
        assert_eq!(pm.ticks_between(0xff_fff0, 0x10), 0x20);
        let pm32 = PmTimer { port: 0x608, bits: 32 };
        assert_eq!(pm32.ticks_between(u32::MAX - 1, 3), 5);
    }
}
