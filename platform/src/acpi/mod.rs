//! ACPI: finding the RSDP, walking the RSDT/XSDT, and the two tables Cadence needs —
//! the FADT for the PM timer and the MADT for the cores.
//!
//! A small hand-written parser instead of the `acpi` crate (whose current versions need
//! nightly). Sources: ACPI 6.5 §5.2.5 (RSDP), §5.2.6 (system
//! description table header), §5.2.7/§5.2.8 (RSDT/XSDT), §5.2.9 (FADT), §5.2.12 (MADT).
//! Every table is read through [`PhysMem`], its length bounded and its checksum
//! verified before a field is looked at; all field reads are bounds-checked.

pub mod fadt;
pub mod madt;

use crate::physmem::PhysMem;
use core::fmt;

pub use fadt::{PmTimer, parse_fadt};
pub use madt::{MadtInfo, parse_madt};

/// Size of the common table header (ACPI 6.5 §5.2.6).
pub const SDT_HEADER_LEN: usize = 36;
/// Largest table accepted (bigger lengths are treated as corruption).
const MAX_TABLE_LEN: u32 = 1 << 20;

/// Why an ACPI structure was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum AcpiError {
    /// No RSDP in the boot information or the BIOS areas.
    NoRsdp,
    /// A structure is shorter than its fixed part or its length field.
    Truncated,
    /// A signature did not match.
    BadSignature,
    /// A checksum did not sum to zero.
    BadChecksum,
    /// A structure pointed to memory that cannot be read.
    Unreadable,
    /// A MADT entry has a length that is too small for its type.
    BadEntry,
    /// The table is not listed in the RSDT/XSDT.
    NotFound,
}

impl fmt::Display for AcpiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AcpiError::NoRsdp => "no RSDP found",
            AcpiError::Truncated => "ACPI structure truncated",
            AcpiError::BadSignature => "ACPI signature mismatch",
            AcpiError::BadChecksum => "ACPI checksum mismatch",
            AcpiError::Unreadable => "ACPI structure in unreadable memory",
            AcpiError::BadEntry => "malformed MADT entry",
            AcpiError::NotFound => "ACPI table not found",
        })
    }
}

pub(crate) fn le32(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

pub(crate) fn le64(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

fn sums_to_zero(b: &[u8]) -> bool {
    b.iter().fold(0u8, |a, &x| a.wrapping_add(x)) == 0
}

/// The fields of a validated RSDP (ACPI 6.5 §5.2.5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rsdp {
    /// 0 for ACPI 1.0, 2 or more for ACPI 2.0+.
    pub revision: u8,
    /// OEM ID.
    pub oem_id: [u8; 6],
    /// Physical address of the RSDT.
    pub rsdt_addr: u32,
    /// Physical address of the XSDT (revision 2+, non-zero).
    pub xsdt_addr: Option<u64>,
}

impl Rsdp {
    /// Validates an RSDP: signature `"RSD PTR "`, the checksum of the first 20 bytes, and
    /// for revision 2+ the extended checksum over `length` bytes.
    pub fn parse(b: &[u8]) -> Result<Self, AcpiError> {
        let v1 = b.get(..20).ok_or(AcpiError::Truncated)?;
        if &v1[..8] != b"RSD PTR " {
            return Err(AcpiError::BadSignature);
        }
        if !sums_to_zero(v1) {
            return Err(AcpiError::BadChecksum);
        }
        let mut oem_id = [0u8; 6];
        oem_id.copy_from_slice(&v1[9..15]);
        let revision = v1[15];
        let rsdt_addr = le32(v1, 16).ok_or(AcpiError::Truncated)?;
        let mut xsdt_addr = None;
        if revision >= 2 {
            let len = le32(b, 20).ok_or(AcpiError::Truncated)? as usize;
            let full = b.get(..len.max(36)).ok_or(AcpiError::Truncated)?;
            if !sums_to_zero(full) {
                return Err(AcpiError::BadChecksum);
            }
            xsdt_addr = le64(full, 24).filter(|&a| a != 0);
        }
        Ok(Self { revision, oem_id, rsdt_addr, xsdt_addr })
    }

    /// Reads and validates the RSDP at physical `addr`.
    pub fn read(mem: &impl PhysMem, addr: u64) -> Result<Self, AcpiError> {
        let v1 = mem.read(addr, 20).ok_or(AcpiError::Unreadable)?;
        if v1[15] >= 2
            && let Some(v2) = mem.read(addr, 36)
        {
            return Self::parse(v2);
        }
        Self::parse(v1)
    }
}

/// Looks for the RSDP the way an OS without loader help must (ACPI 6.5 §5.2.5.1): the
/// first KiB of the EBDA (segment at 0x40E), then 0xE0000..0xFFFFF, on 16-byte
/// boundaries. Returns the physical address and the parsed RSDP.
pub fn scan_bios(mem: &impl PhysMem) -> Option<(u64, Rsdp)> {
    let ebda = mem.read_u16(0x40e).map(|seg| u64::from(seg) << 4).filter(|a| (0x80000..0xa0000).contains(a));
    let areas = [ebda.map(|a| (a, 1024usize)), Some((0xe0000, 0x20000))];
    for (base, len) in areas.into_iter().flatten() {
        let Some(area) = mem.read(base, len) else { continue };
        for off in (0..area.len().saturating_sub(20)).step_by(16) {
            if &area[off..off + 8] == b"RSD PTR "
                && let Ok(r) = Rsdp::read(mem, base + off as u64)
            {
                return Some((base + off as u64, r));
            }
        }
    }
    None
}

/// Reads the table at `addr`: header, bounded length, and checksum over the whole table.
pub fn read_table(mem: &impl PhysMem, addr: u64) -> Result<&[u8], AcpiError> {
    let head = mem.read(addr, SDT_HEADER_LEN).ok_or(AcpiError::Unreadable)?;
    let len = le32(head, 4).ok_or(AcpiError::Truncated)?;
    if (len as usize) < SDT_HEADER_LEN || len > MAX_TABLE_LEN {
        return Err(AcpiError::Truncated);
    }
    let t = mem.read(addr, len as usize).ok_or(AcpiError::Unreadable)?;
    if !sums_to_zero(t) {
        return Err(AcpiError::BadChecksum);
    }
    Ok(t)
}

/// The root table: the XSDT (8-byte entries) where there is one, else the RSDT (4-byte).
#[derive(Debug, Clone, Copy)]
pub struct Root<'m> {
    table: &'m [u8],
    entry_len: usize,
}

impl<'m> Root<'m> {
    /// Reads the root table an RSDP points to, preferring the XSDT and falling back to
    /// the RSDT if the XSDT cannot be read.
    pub fn read(mem: &'m impl PhysMem, rsdp: &Rsdp) -> Result<Self, AcpiError> {
        if let Some(x) = rsdp.xsdt_addr
            && let Ok(t) = read_table(mem, x)
            && &t[..4] == b"XSDT"
        {
            return Ok(Self { table: t, entry_len: 8 });
        }
        let t = read_table(mem, u64::from(rsdp.rsdt_addr))?;
        if &t[..4] != b"RSDT" {
            return Err(AcpiError::BadSignature);
        }
        Ok(Self { table: t, entry_len: 4 })
    }

    /// Physical addresses of the listed tables.
    pub fn entries(&self) -> impl Iterator<Item = u64> + 'm {
        let entry_len = self.entry_len;
        self.table[SDT_HEADER_LEN..]
            .chunks_exact(entry_len)
            .map(move |e| if entry_len == 8 { le64(e, 0).unwrap_or(0) } else { u64::from(le32(e, 0).unwrap_or(0)) })
    }

    /// The first listed table with signature `sig` whose checksum is valid.
    pub fn find(&self, mem: &'m impl PhysMem, sig: &[u8; 4]) -> Result<&'m [u8], AcpiError> {
        self.entries().filter_map(|a| read_table(mem, a).ok()).find(|t| &t[..4] == sig).ok_or(AcpiError::NotFound)
    }
}

/// What the platform takes from ACPI.
#[derive(Debug, Clone)]
pub struct AcpiInfo {
    /// Where the RSDP was found (0 when only the loader's copy was seen).
    pub rsdp_addr: u64,
    /// The RSDP.
    pub rsdp: Rsdp,
    /// The FADT's PM timer, if the FADT exists and declares one.
    pub pm_timer: Option<PmTimer>,
    /// The MADT, if present and well-formed.
    pub madt: Option<MadtInfo>,
}

/// Finds the RSDP (the loader's copy, then the loader's address, then a BIOS scan),
/// and reads the FADT and MADT. A missing or malformed FADT/MADT leaves its field `None`.
pub fn discover(mem: &impl PhysMem, copy: Option<&[u8]>, addr: Option<u64>) -> Result<AcpiInfo, AcpiError> {
    let found = copy
        .and_then(|c| Rsdp::parse(c).ok().map(|r| (0, r)))
        .or_else(|| addr.and_then(|a| Rsdp::read(mem, a).ok().map(|r| (a, r))))
        .or_else(|| scan_bios(mem));
    let (rsdp_addr, rsdp) = found.ok_or(AcpiError::NoRsdp)?;
    let root = Root::read(mem, &rsdp)?;
    let pm_timer = root.find(mem, b"FACP").ok().and_then(|t| parse_fadt(t).ok()).flatten();
    let madt = root.find(mem, b"APIC").ok().and_then(|t| parse_madt(t).ok());
    Ok(AcpiInfo { rsdp_addr, rsdp, pm_timer, madt })
}

#[cfg(test)]
pub(crate) mod fixtures {
    /// A table with a valid header and checksum around `body`.
    pub(crate) fn sdt(sig: &[u8; 4], revision: u8, body: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; super::SDT_HEADER_LEN];
        t[..4].copy_from_slice(sig);
        t[4..8].copy_from_slice(&((super::SDT_HEADER_LEN + body.len()) as u32).to_le_bytes());
        t[8] = revision;
        t[10..16].copy_from_slice(b"CADNCE");
        t.extend_from_slice(body);
        fix_checksum(&mut t, 9);
        t
    }

    /// Sets byte `at` so that `b` sums to zero.
    pub(crate) fn fix_checksum(b: &mut [u8], at: usize) {
        b[at] = 0;
        let s = b.iter().fold(0u8, |a, &x| a.wrapping_add(x));
        b[at] = 0u8.wrapping_sub(s);
    }

    pub(crate) fn rsdp_v2(rsdt: u32, xsdt: u64) -> Vec<u8> {
        let mut r = vec![0u8; 36];
        r[..8].copy_from_slice(b"RSD PTR ");
        r[9..15].copy_from_slice(b"BOCHS ");
        r[15] = 2;
        r[16..20].copy_from_slice(&rsdt.to_le_bytes());
        r[20..24].copy_from_slice(&36u32.to_le_bytes());
        r[24..32].copy_from_slice(&xsdt.to_le_bytes());
        fix_checksum(&mut r[..20], 8);
        fix_checksum(&mut r, 32);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::physmem::FakeMem;

    fn machine(xsdt: bool) -> FakeMem {
        let fadt = sdt(b"FACP", 1, &fadt::tests::fadt_body(0x608, 4, 0));
        let madt = sdt(b"APIC", 1, &madt::tests::madt_body(&[(0, 0, 1), (1, 1, 1), (2, 2, 0)]));
        let rsdt = sdt(b"RSDT", 1, &[0x2000u32.to_le_bytes(), 0x3000u32.to_le_bytes()].concat());
        let xsdt_t = sdt(b"XSDT", 1, &[0x2000u64.to_le_bytes(), 0x3000u64.to_le_bytes()].concat());
        let mut mem = FakeMem::default();
        mem.put(0x1000, &rsdt).put(0x1800, &xsdt_t).put(0x2000, &fadt).put(0x3000, &madt);
        mem.put(0xf5250, &rsdp_v2(0x1000, if xsdt { 0x1800 } else { 0 }));
        mem
    }

    #[test]
    fn rsdp_checksums_are_enforced() {
        let good = rsdp_v2(0x1000, 0x1800);
        let r = Rsdp::parse(&good).unwrap();
        assert_eq!((r.revision, r.rsdt_addr, r.xsdt_addr), (2, 0x1000, Some(0x1800)));
        let mut bad = good.clone();
        bad[16] ^= 1;
        assert_eq!(Rsdp::parse(&bad), Err(AcpiError::BadChecksum));
        let mut bad_ext = good.clone();
        bad_ext[30] ^= 1;
        assert_eq!(Rsdp::parse(&bad_ext), Err(AcpiError::BadChecksum));
        let mut sig = good.clone();
        sig[0] = b'X';
        assert_eq!(Rsdp::parse(&sig), Err(AcpiError::BadSignature));
        assert_eq!(Rsdp::parse(&good[..19]), Err(AcpiError::Truncated));
        assert_eq!(Rsdp::parse(&good[..30]), Err(AcpiError::Truncated));
    }

    #[test]
    fn discover_via_address_xsdt_and_rsdt() {
        for xsdt in [true, false] {
            let mem = machine(xsdt);
            let info = discover(&mem, None, Some(0xf5250)).unwrap();
            assert_eq!(info.rsdp_addr, 0xf5250);
            assert_eq!(info.pm_timer, Some(PmTimer { port: 0x608, bits: 24 }));
            assert_eq!(info.madt.unwrap().enabled_cpus, 2);
        }
    }

    #[test]
    fn discover_via_copy_and_bios_scan() {
        let mem = machine(true);
        let copy = rsdp_v2(0x1000, 0x1800);
        assert_eq!(discover(&mem, Some(&copy), None).unwrap().rsdp_addr, 0);

        let mut mem = machine(true);
        let mut bios = vec![0u8; 0x20000];
        bios[0x5250..0x5250 + 36].copy_from_slice(&rsdp_v2(0x1000, 0x1800));
        mem.put(0xe0000, &bios);
        let info = discover(&mem, None, None).unwrap();
        assert_eq!(info.rsdp_addr, 0xe5250);
        assert!(info.madt.is_some());

        assert_eq!(discover(&FakeMem::default(), None, None).unwrap_err(), AcpiError::NoRsdp);
    }

    #[test]
    fn corrupt_tables_are_skipped_or_rejected() {
        let mut madt = sdt(b"APIC", 1, &madt::tests::madt_body(&[(0, 0, 1)]));
        madt[40] ^= 0xff; // breaks the checksum
        let rsdt = sdt(b"RSDT", 1, &[0x3000u32.to_le_bytes()].concat());
        let mut m2 = FakeMem::default();
        m2.put(0x1000, &rsdt).put(0x3000, &madt).put(0xf5250, &rsdp_v2(0x1000, 0));
        let info = discover(&m2, None, Some(0xf5250)).unwrap();
        assert!(info.madt.is_none());
        assert!(info.pm_timer.is_none());

        let mut huge = sdt(b"RSDT", 1, &[]);
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        let mut m3 = FakeMem::default();
        m3.put(0x1000, &huge);
        assert_eq!(read_table(&m3, 0x1000).unwrap_err(), AcpiError::Truncated);
    }
}
