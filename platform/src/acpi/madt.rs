//! MADT (ACPI 6.5 §5.2.12): how many cores the machine gives us, and their APIC IDs.
//!
//! Only entries whose flags have bit 0 (`Enabled`) set are counted; bit 1
//! (`Online Capable`) marks hot-pluggable CPUs that are not there yet. APIC IDs above
//! 255 appear only as Local x2APIC entries (§5.2.12.12).

use super::{AcpiError, SDT_HEADER_LEN, le32};

/// Most APIC IDs kept.
pub const MAX_CPUS: usize = 256;
/// Processor Local APIC entry (§5.2.12.2), 8 bytes.
const TYPE_LOCAL_APIC: u8 = 0;
/// I/O APIC entry (§5.2.12.3), 12 bytes.
const TYPE_IO_APIC: u8 = 1;
/// Processor Local x2APIC entry (§5.2.12.12), 16 bytes.
const TYPE_LOCAL_X2APIC: u8 = 9;
/// Local APIC flags: the processor is usable.
const FLAG_ENABLED: u32 = 1 << 0;
/// Local APIC flags: the processor can be brought online later.
const FLAG_ONLINE_CAPABLE: u32 = 1 << 1;

/// What the MADT says about the processors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadtInfo {
    /// Physical address of the local APIC (xAPIC mode).
    pub local_apic_addr: u32,
    /// MADT flags (bit 0: PC-AT compatible dual 8259 PICs present).
    pub flags: u32,
    /// Enabled processors (Local APIC or Local x2APIC entries with the Enabled flag).
    pub enabled_cpus: u32,
    /// Disabled but online-capable processors.
    pub online_capable: u32,
    /// APIC IDs of the enabled processors, in table order (first [`MAX_CPUS`]).
    pub apic_ids: heapless::Vec<u32, MAX_CPUS>,
    /// I/O APIC entries.
    pub io_apics: u32,
}

/// Walks a checksummed MADT's interrupt controller structures.
pub fn parse_madt(t: &[u8]) -> Result<MadtInfo, AcpiError> {
    if t.get(..4) != Some(b"APIC".as_slice()) {
        return Err(AcpiError::BadSignature);
    }
    let local_apic_addr = le32(t, SDT_HEADER_LEN).ok_or(AcpiError::Truncated)?;
    let flags = le32(t, SDT_HEADER_LEN + 4).ok_or(AcpiError::Truncated)?;
    let mut info = MadtInfo {
        local_apic_addr,
        flags,
        enabled_cpus: 0,
        online_capable: 0,
        apic_ids: heapless::Vec::new(),
        io_apics: 0,
    };
    let mut off = SDT_HEADER_LEN + 8;
    while off < t.len() {
        let kind = t[off];
        let len = *t.get(off + 1).ok_or(AcpiError::Truncated)? as usize;
        if len < 2 {
            return Err(AcpiError::BadEntry);
        }
        let e = t.get(off..off + len).ok_or(AcpiError::Truncated)?;
        let cpu = match kind {
            TYPE_LOCAL_APIC if len >= 8 => Some((u32::from(e[3]), le32(e, 4).ok_or(AcpiError::BadEntry)?)),
            TYPE_LOCAL_X2APIC if len >= 16 => {
                Some((le32(e, 4).ok_or(AcpiError::BadEntry)?, le32(e, 8).ok_or(AcpiError::BadEntry)?))
            }
            TYPE_LOCAL_APIC | TYPE_LOCAL_X2APIC => return Err(AcpiError::BadEntry),
            TYPE_IO_APIC => {
                info.io_apics += 1;
                None
            }
            _ => None,
        };
        if let Some((id, fl)) = cpu {
            if fl & FLAG_ENABLED != 0 {
                info.enabled_cpus += 1;
                let _ = info.apic_ids.push(id);
            } else if fl & FLAG_ONLINE_CAPABLE != 0 {
                info.online_capable += 1;
            }
        }
        off += len;
    }
    Ok(info)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::fixtures::sdt;
    use super::*;

    /// A MADT body with Local APIC entries `(uid, apic_id, flags)` and one I/O APIC.
    pub(crate) fn madt_body(cpus: &[(u8, u8, u32)]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0xfee0_0000u32.to_le_bytes());
        b.extend_from_slice(&1u32.to_le_bytes());
        for &(uid, id, flags) in cpus {
            b.extend_from_slice(&[TYPE_LOCAL_APIC, 8, uid, id]);
            b.extend_from_slice(&flags.to_le_bytes());
        }
        b.extend_from_slice(&[TYPE_IO_APIC, 12, 0, 0, 0, 0, 0xc0, 0xfe, 0, 0, 0, 0]);
        b
    }

    fn x2apic(id: u32, flags: u32) -> Vec<u8> {
        let mut e = vec![TYPE_LOCAL_X2APIC, 16, 0, 0];
        e.extend_from_slice(&id.to_le_bytes());
        e.extend_from_slice(&flags.to_le_bytes());
        e.extend_from_slice(&7u32.to_le_bytes());
        e
    }

    #[test]
    fn counts_enabled_local_apics_and_x2apics() {
        let mut body = madt_body(&[(0, 0, 1), (1, 1, 0), (2, 2, 2), (3, 3, 1)]);
        body.extend_from_slice(&x2apic(300, 1));
        body.extend_from_slice(&x2apic(301, 0));
        body.extend_from_slice(&[0x7f, 4, 0, 0]); // unknown type: skipped
        let m = parse_madt(&sdt(b"APIC", 4, &body)).unwrap();
        assert_eq!(m.local_apic_addr, 0xfee0_0000);
        assert_eq!(m.enabled_cpus, 3);
        assert_eq!(m.online_capable, 1);
        assert_eq!(m.apic_ids.as_slice(), &[0, 3, 300]);
        assert_eq!(m.io_apics, 1);
    }

    #[test]
    fn malformed_entries_are_rejected() {
        let mut body = madt_body(&[(0, 0, 1)]);
        body.extend_from_slice(&[TYPE_LOCAL_APIC, 0]);
        assert_eq!(parse_madt(&sdt(b"APIC", 4, &body)), Err(AcpiError::BadEntry));
        let mut body = madt_body(&[(0, 0, 1)]);
        body.extend_from_slice(&[TYPE_LOCAL_APIC, 8, 0, 1]);
        assert_eq!(parse_madt(&sdt(b"APIC", 4, &body)), Err(AcpiError::Truncated));
        let mut body = madt_body(&[]);
        body.extend_from_slice(&[TYPE_LOCAL_X2APIC, 8, 0, 0, 0, 0, 0, 0]);
        assert_eq!(parse_madt(&sdt(b"APIC", 4, &body)), Err(AcpiError::BadEntry));
        assert_eq!(parse_madt(&sdt(b"APIC", 4, &[0; 4])), Err(AcpiError::Truncated));
        assert_eq!(parse_madt(&sdt(b"FACP", 4, &madt_body(&[]))), Err(AcpiError::BadSignature));
    }
}
