//! Boot information from the loader: PVH `hvm_start_info` or a multiboot2 information
//! structure, copied into a [`BootInfo`] before any memory is reused.
//!
//! Sources: Xen `arch-x86/hvm/start_info.h` (PVH boot ABI, `hvm_start_info` version 1,
//! `hvm_memmap_table_entry`, `hvm_modlist_entry`); Multiboot2 specification 2.0 §3.6
//! (tags: 1 command line, 3 module, 6 memory map, 14 ACPI old RSDP, 15 ACPI new RSDP).
//! Everything is read through [`PhysMem`] and bounds-checked, so a malformed structure
//! gives a [`BootError`], never a wild read.

use crate::physmem::PhysMem;
use core::fmt;

/// `hvm_start_info.magic`.
pub const PVH_MAGIC: u32 = 0x336e_c578;
/// What a multiboot2 loader leaves in EAX.
pub const MB2_BOOTLOADER_MAGIC: u32 = 0x36d7_6289;
/// Most memory-map entries kept; more are counted in [`BootInfo::dropped`].
pub const MAX_REGIONS: usize = 64;
/// Most boot modules kept.
pub const MAX_MODULES: usize = 4;
/// Longest command line kept, in bytes.
pub const CMDLINE_MAX: usize = 1024;
/// Largest multiboot2 information structure accepted.
const MB2_MAX_SIZE: u32 = 64 * 1024;

/// Which loader protocol started the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum Protocol {
    /// Xen PVH direct boot (QEMU `-kernel`, Firecracker, Cloud Hypervisor).
    Pvh,
    /// Multiboot2 (GRUB).
    Multiboot2,
}

/// Type of a memory-map range (E820 numbering, shared by PVH and multiboot2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemKind {
    /// Free RAM (type 1).
    Usable,
    /// Reserved (type 2).
    Reserved,
    /// ACPI tables, reclaimable after parsing (type 3).
    AcpiReclaimable,
    /// ACPI non-volatile storage (type 4).
    AcpiNvs,
    /// Defective RAM (type 5).
    Unusable,
    /// Any other type.
    Other(u32),
}

impl MemKind {
    /// Decodes an E820 type.
    pub const fn from_e820(t: u32) -> Self {
        match t {
            1 => MemKind::Usable,
            2 => MemKind::Reserved,
            3 => MemKind::AcpiReclaimable,
            4 => MemKind::AcpiNvs,
            5 => MemKind::Unusable,
            other => MemKind::Other(other),
        }
    }
}

/// One memory-map range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemRegion {
    /// Physical base address.
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
    /// What the range holds.
    pub kind: MemKind,
}

/// A boot module (PVH module list, multiboot2 tag 3): config data handed over by the loader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Module {
    /// Physical address of the first byte.
    pub base: u64,
    /// Length in bytes.
    pub len: u64,
}

/// A copy of the RSDP that a multiboot2 loader put into its tag 14 or 15.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RsdpCopy {
    bytes: [u8; 36],
    len: u8,
}

impl RsdpCopy {
    fn from_slice(b: &[u8]) -> Self {
        let mut bytes = [0u8; 36];
        let len = b.len().min(36);
        bytes[..len].copy_from_slice(&b[..len]);
        Self { bytes, len: len as u8 }
    }

    /// The copied bytes (20 for ACPI 1.0, 36 for ACPI 2.0+).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// Why the boot information could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum BootError {
    /// EAX held neither the multiboot2 magic, and the PVH structure's magic did not match.
    UnknownProtocol,
    /// A structure the loader pointed at could not be read.
    Unreadable,
    /// A multiboot2 tag is shorter than its header or runs past the structure.
    BadTag,
    /// A multiboot2 memory-map tag has an entry size under 24 bytes.
    BadMemoryMap,
}

impl fmt::Display for BootError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BootError::UnknownProtocol => "no PVH start info and no multiboot2 magic",
            BootError::Unreadable => "boot information outside readable memory",
            BootError::BadTag => "malformed multiboot2 tag",
            BootError::BadMemoryMap => "malformed multiboot2 memory map",
        })
    }
}

/// Everything the loader told the image, copied out of the loader's memory.
#[derive(Debug, Clone)]
pub struct BootInfo {
    protocol: Protocol,
    regions: heapless::Vec<MemRegion, MAX_REGIONS>,
    modules: heapless::Vec<Module, MAX_MODULES>,
    cmdline: heapless::String<CMDLINE_MAX>,
    rsdp_addr: Option<u64>,
    rsdp_copy: Option<RsdpCopy>,
    dropped: u32,
    cmdline_error: Option<CmdlineError>,
}

/// Why the command line could not be taken whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmdlineError {
    /// It is longer than [`CMDLINE_MAX`] bytes.
    TooLong,
    /// It is not UTF-8 from byte `at` on.
    NotUtf8 {
        /// Offset of the first invalid byte.
        at: usize,
    },
}

impl core::fmt::Display for CmdlineError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CmdlineError::TooLong => write!(f, "boot command line longer than {CMDLINE_MAX} bytes (the limit)"),
            CmdlineError::NotUtf8 { at } => write!(f, "boot command line is not UTF-8 (byte {at})"),
        }
    }
}

impl BootInfo {
    fn empty(protocol: Protocol) -> Self {
        Self {
            protocol,
            regions: heapless::Vec::new(),
            modules: heapless::Vec::new(),
            cmdline: heapless::String::new(),
            rsdp_addr: None,
            rsdp_copy: None,
            dropped: 0,
            cmdline_error: None,
        }
    }

    /// The loader protocol.
    pub fn protocol(&self) -> Protocol {
        self.protocol
    }

    /// The memory map, in the loader's order.
    pub fn regions(&self) -> &[MemRegion] {
        &self.regions
    }

    /// Boot modules.
    pub fn modules(&self) -> &[Module] {
        &self.modules
    }

    /// The kernel command line (QEMU `-append`); empty if none. Bytes after the first
    /// invalid UTF-8 sequence, or past [`CMDLINE_MAX`], are dropped — and
    /// [`BootInfo::cmdline_error`] says so: a caller must refuse such a line rather than act on
    /// part of it.
    pub fn cmdline(&self) -> &str {
        &self.cmdline
    }

    /// Why the command line was not taken whole, if it was not.
    pub fn cmdline_error(&self) -> Option<CmdlineError> {
        self.cmdline_error
    }

    /// Physical address of the RSDP, if the loader gave one (PVH `rsdp_paddr`).
    pub fn rsdp_addr(&self) -> Option<u64> {
        self.rsdp_addr
    }

    /// The loader's copy of the RSDP (multiboot2 tag 15, else 14).
    pub fn rsdp_copy(&self) -> Option<&RsdpCopy> {
        self.rsdp_copy.as_ref()
    }

    /// Memory-map entries, modules or command-line bytes that did not fit.
    pub fn dropped(&self) -> u32 {
        self.dropped
    }

    /// Bytes of usable RAM in the memory map.
    pub fn usable_bytes(&self) -> u64 {
        self.regions.iter().filter(|r| r.kind == MemKind::Usable).map(|r| r.len).fold(0u64, u64::saturating_add)
    }

    fn push_region(&mut self, r: MemRegion) {
        if r.len != 0 && self.regions.push(r).is_err() {
            self.dropped += 1;
        }
    }

    fn push_module(&mut self, m: Module) {
        if self.modules.push(m).is_err() {
            self.dropped += 1;
        }
    }

    fn set_cmdline(&mut self, raw: &[u8]) {
        let raw = raw.split(|&b| b == 0).next().unwrap_or(&[]);
        let valid = match core::str::from_utf8(raw) {
            Ok(s) => s,
            Err(e) => {
                self.dropped += 1;
                self.cmdline_error = Some(CmdlineError::NotUtf8 { at: e.valid_up_to() });
                // `valid_up_to` is a char boundary, so this cannot fail.
                core::str::from_utf8(&raw[..e.valid_up_to()]).unwrap_or("")
            }
        };
        let mut end = valid.len().min(CMDLINE_MAX);
        while !valid.is_char_boundary(end) {
            end -= 1;
        }
        if end < valid.len() {
            self.dropped += 1;
            self.cmdline_error = Some(CmdlineError::TooLong);
        }
        self.cmdline.clear();
        // Cannot fail: `end <= CMDLINE_MAX`.
        let _ = self.cmdline.push_str(&valid[..end]);
    }
}

fn le32(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

fn le64(b: &[u8], off: usize) -> u64 {
    (le32(b, off) as u64) | (le32(b, off + 4) as u64) << 32
}

/// Reads a NUL-terminated string of at most `max` bytes at `addr`.
fn read_cstr(mem: &impl PhysMem, addr: u64, max: usize) -> heapless::Vec<u8, { CMDLINE_MAX + 1 }> {
    let mut out = heapless::Vec::new();
    for i in 0..max.min(CMDLINE_MAX + 1) as u64 {
        match mem.read(addr.wrapping_add(i), 1) {
            Some([0]) | None => break,
            Some(b) => {
                let _ = out.push(b[0]);
            }
        }
    }
    out
}

/// Parses the boot information the loader left: `magic` is EAX at entry and
/// `info_addr` is EBX (both protocols pass their structure in EBX).
pub fn parse(magic: u32, info_addr: u64, mem: &impl PhysMem) -> Result<BootInfo, BootError> {
    if magic == MB2_BOOTLOADER_MAGIC {
        return parse_multiboot2(info_addr, mem);
    }
    match mem.read(info_addr, 4) {
        Some(b) if le32(b, 0) == PVH_MAGIC => parse_pvh(info_addr, mem),
        _ => Err(BootError::UnknownProtocol),
    }
}

/// Parses a PVH `hvm_start_info` at `addr`.
pub fn parse_pvh(addr: u64, mem: &impl PhysMem) -> Result<BootInfo, BootError> {
    // Version 0 is 40 bytes long; version 1 adds memmap_paddr/memmap_entries (56).
    let head = mem.read(addr, 40).ok_or(BootError::Unreadable)?;
    if le32(head, 0) != PVH_MAGIC {
        return Err(BootError::UnknownProtocol);
    }
    let version = le32(head, 4);
    let nr_modules = le32(head, 12);
    let modlist = le64(head, 16);
    let cmdline = le64(head, 24);
    let rsdp = le64(head, 32);

    let mut info = BootInfo::empty(Protocol::Pvh);
    if rsdp != 0 {
        info.rsdp_addr = Some(rsdp);
    }
    if cmdline != 0 {
        let s = read_cstr(mem, cmdline, CMDLINE_MAX + 1);
        info.set_cmdline(&s);
    }
    for i in 0..u64::from(nr_modules) {
        // hvm_modlist_entry: paddr, size, cmdline_paddr, reserved (32 bytes).
        let e = mem.read(modlist.wrapping_add(i * 32), 16).ok_or(BootError::Unreadable)?;
        info.push_module(Module { base: le64(e, 0), len: le64(e, 8) });
    }
    if version >= 1 {
        let tail = mem.read(addr, 56).ok_or(BootError::Unreadable)?;
        let memmap = le64(tail, 40);
        let entries = le32(tail, 48);
        for i in 0..u64::from(entries) {
            // hvm_memmap_table_entry: addr, size, type, reserved (24 bytes).
            let e = mem.read(memmap.wrapping_add(i * 24), 24).ok_or(BootError::Unreadable)?;
            info.push_region(MemRegion { base: le64(e, 0), len: le64(e, 8), kind: MemKind::from_e820(le32(e, 16)) });
        }
    }
    Ok(info)
}

/// Parses a multiboot2 boot information structure at `addr`.
pub fn parse_multiboot2(addr: u64, mem: &impl PhysMem) -> Result<BootInfo, BootError> {
    let head = mem.read(addr, 8).ok_or(BootError::Unreadable)?;
    let total = le32(head, 0);
    if !(8..=MB2_MAX_SIZE).contains(&total) {
        return Err(BootError::BadTag);
    }
    let mbi = mem.read(addr, total as usize).ok_or(BootError::Unreadable)?;
    let mut info = BootInfo::empty(Protocol::Multiboot2);
    let mut new_rsdp: Option<RsdpCopy> = None;
    let mut old_rsdp: Option<RsdpCopy> = None;
    let mut off = 8usize;
    while off + 8 <= mbi.len() {
        let kind = le32(mbi, off);
        let size = le32(mbi, off + 4) as usize;
        if size < 8 || off + size > mbi.len() {
            return Err(BootError::BadTag);
        }
        let tag = &mbi[off..off + size];
        match kind {
            0 => break,
            1 => info.set_cmdline(&tag[8..]),
            3 if size >= 16 => {
                let (start, end) = (le32(tag, 8) as u64, le32(tag, 12) as u64);
                info.push_module(Module { base: start, len: end.saturating_sub(start) });
            }
            6 => {
                if size < 16 {
                    return Err(BootError::BadMemoryMap);
                }
                let entry_size = le32(tag, 8) as usize;
                if entry_size < 24 {
                    return Err(BootError::BadMemoryMap);
                }
                for e in tag[16..].chunks_exact(entry_size) {
                    info.push_region(MemRegion {
                        base: le64(e, 0),
                        len: le64(e, 8),
                        kind: MemKind::from_e820(le32(e, 16)),
                    });
                }
            }
            14 => old_rsdp = Some(RsdpCopy::from_slice(&tag[8..])),
            15 => new_rsdp = Some(RsdpCopy::from_slice(&tag[8..])),
            _ => {}
        }
        // Tags start on 8-byte boundaries (Multiboot2 §3.6.1).
        off = (off + size + 7) & !7;
    }
    info.rsdp_copy = new_rsdp.or(old_rsdp);
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::physmem::FakeMem;

    fn pvh_fixture(cmdline: &[u8]) -> FakeMem {
        let mut start = Vec::new();
        start.extend_from_slice(&PVH_MAGIC.to_le_bytes());
        start.extend_from_slice(&1u32.to_le_bytes()); // version
        start.extend_from_slice(&0u32.to_le_bytes()); // flags
        start.extend_from_slice(&1u32.to_le_bytes()); // nr_modules
        start.extend_from_slice(&0x7000u64.to_le_bytes()); // modlist
        start.extend_from_slice(&0x6000u64.to_le_bytes()); // cmdline
        start.extend_from_slice(&0xf5250u64.to_le_bytes()); // rsdp
        start.extend_from_slice(&0x5000u64.to_le_bytes()); // memmap
        start.extend_from_slice(&3u32.to_le_bytes()); // entries
        start.extend_from_slice(&0u32.to_le_bytes());
        let mut map = Vec::new();
        for (base, len, t) in [(0u64, 0x9fc00u64, 1u32), (0xf0000, 0x10000, 2), (0x100000, 0xff00000, 1)] {
            map.extend_from_slice(&base.to_le_bytes());
            map.extend_from_slice(&len.to_le_bytes());
            map.extend_from_slice(&t.to_le_bytes());
            map.extend_from_slice(&0u32.to_le_bytes());
        }
        let mut modl = Vec::new();
        for v in [0x200_0000u64, 300, 0, 0] {
            modl.extend_from_slice(&v.to_le_bytes());
        }
        let mut mem = FakeMem::default();
        mem.put(0x4000, &start).put(0x5000, &map).put(0x6000, cmdline).put(0x7000, &modl);
        mem
    }

    #[test]
    fn pvh_start_info_is_copied() {
        let mem = pvh_fixture(b"mode=boot burst=8\0junk");
        let info = parse(0, 0x4000, &mem).unwrap();
        assert_eq!(info.protocol(), Protocol::Pvh);
        assert_eq!(info.cmdline(), "mode=boot burst=8");
        assert_eq!(info.rsdp_addr(), Some(0xf5250));
        assert_eq!(info.regions().len(), 3);
        assert_eq!(info.regions()[1], MemRegion { base: 0xf0000, len: 0x10000, kind: MemKind::Reserved });
        assert_eq!(info.usable_bytes(), 0x9fc00 + 0xff00000);
        assert_eq!(info.modules(), &[Module { base: 0x200_0000, len: 300 }]);
        assert_eq!(info.dropped(), 0);
    }

    #[test]
    fn pvh_bad_magic_and_unreadable_map() {
        let mut mem = FakeMem::default();
        mem.put(0x4000, &[0u8; 56]);
        assert_eq!(parse(0, 0x4000, &mem).unwrap_err(), BootError::UnknownProtocol);
        // Memory map pointer to nowhere.
        let mut start = pvh_fixture(b"\0");
        start.put(0x9000, &{
            let mut s = vec![0u8; 56];
            s[0..4].copy_from_slice(&PVH_MAGIC.to_le_bytes());
            s[4] = 1;
            s[40..48].copy_from_slice(&0xdead_0000u64.to_le_bytes());
            s[48] = 1;
            s
        });
        assert_eq!(parse(0, 0x9000, &start).unwrap_err(), BootError::Unreadable);
    }

    #[test]
    fn cmdline_is_truncated_at_bad_utf8_and_length() {
        let mem = pvh_fixture(b"a=1 \xff b=2\0");
        let info = parse(0, 0x4000, &mem).unwrap();
        assert_eq!(info.cmdline(), "a=1 ");
        assert_eq!(info.dropped(), 1);
        assert_eq!(info.cmdline_error(), Some(CmdlineError::NotUtf8 { at: 4 }));
        let long = vec![b'x'; CMDLINE_MAX + 10];
        let mem = pvh_fixture(&long);
        let info = parse(0, 0x4000, &mem).unwrap();
        assert_eq!(info.cmdline().len(), CMDLINE_MAX);
        assert_eq!(info.dropped(), 1);
        assert_eq!(info.cmdline_error(), Some(CmdlineError::TooLong));
        assert_eq!(CmdlineError::TooLong.to_string(), "boot command line longer than 1024 bytes (the limit)");
        // Exactly at the limit is whole.
        let mem = pvh_fixture(&vec![b'y'; CMDLINE_MAX]);
        let info = parse(0, 0x4000, &mem).unwrap();
        assert_eq!((info.cmdline().len(), info.cmdline_error()), (CMDLINE_MAX, None));
    }

    fn tag(kind: u32, body: &[u8]) -> Vec<u8> {
        let mut t = Vec::new();
        t.extend_from_slice(&kind.to_le_bytes());
        t.extend_from_slice(&(8 + body.len() as u32).to_le_bytes());
        t.extend_from_slice(body);
        while t.len() % 8 != 0 {
            t.push(0);
        }
        t
    }

    fn mbi(tags: &[Vec<u8>]) -> Vec<u8> {
        let mut body: Vec<u8> = tags.concat();
        body.extend_from_slice(&tag(0, &[]));
        let mut m = Vec::new();
        m.extend_from_slice(&(8 + body.len() as u32).to_le_bytes());
        m.extend_from_slice(&0u32.to_le_bytes());
        m.extend_from_slice(&body);
        m
    }

    fn mmap_body(entries: &[(u64, u64, u32)]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&24u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        for (base, len, t) in entries {
            b.extend_from_slice(&base.to_le_bytes());
            b.extend_from_slice(&len.to_le_bytes());
            b.extend_from_slice(&t.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
        }
        b
    }

    #[test]
    fn multiboot2_tags_are_copied() {
        let mut rsdp1 = vec![0u8; 20];
        rsdp1[..8].copy_from_slice(b"RSD PTR ");
        let mut rsdp2 = vec![0u8; 36];
        rsdp2[..8].copy_from_slice(b"RSD PTR ");
        rsdp2[15] = 2;
        let mut module = Vec::new();
        module.extend_from_slice(&0x30_0000u32.to_le_bytes());
        module.extend_from_slice(&0x30_1000u32.to_le_bytes());
        module.extend_from_slice(b"cfg\0");
        let m = mbi(&[
            tag(1, b"mode=boot\0"),
            tag(14, &rsdp1),
            tag(6, &mmap_body(&[(0, 0x9f000, 1), (0x100000, 0x7ee0000, 1), (0xfffc0000, 0x40000, 2)])),
            tag(15, &rsdp2),
            tag(3, &module),
            tag(21, &[1, 2, 3]),
        ]);
        let mut mem = FakeMem::default();
        mem.put(0x10c150, &m);
        let info = parse(MB2_BOOTLOADER_MAGIC, 0x10c150, &mem).unwrap();
        assert_eq!(info.protocol(), Protocol::Multiboot2);
        assert_eq!(info.cmdline(), "mode=boot");
        assert_eq!(info.regions().len(), 3);
        assert_eq!(info.regions()[2].kind, MemKind::Reserved);
        assert_eq!(info.rsdp_copy().unwrap().bytes().len(), 36, "tag 15 wins over tag 14");
        assert_eq!(info.modules(), &[Module { base: 0x30_0000, len: 0x1000 }]);
        assert_eq!(info.rsdp_addr(), None);
    }

    #[test]
    fn multiboot2_malformed_tags_are_rejected() {
        let mut m = mbi(&[tag(1, b"x\0")]);
        m[12..16].copy_from_slice(&4000u32.to_le_bytes()); // tag runs past the end
        let mut mem = FakeMem::default();
        mem.put(0x1000, &m);
        assert_eq!(parse(MB2_BOOTLOADER_MAGIC, 0x1000, &mem).unwrap_err(), BootError::BadTag);

        let mut bad_map = mmap_body(&[(0, 0x1000, 1)]);
        bad_map[0..4].copy_from_slice(&8u32.to_le_bytes());
        let m = mbi(&[tag(6, &bad_map)]);
        let mut mem = FakeMem::default();
        mem.put(0x1000, &m);
        assert_eq!(parse(MB2_BOOTLOADER_MAGIC, 0x1000, &mem).unwrap_err(), BootError::BadMemoryMap);

        let mut mem = FakeMem::default();
        mem.put(0x1000, &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
        assert_eq!(parse(MB2_BOOTLOADER_MAGIC, 0x1000, &mem).unwrap_err(), BootError::BadTag);
        assert_eq!(parse(0, 0x1000, &mem).unwrap_err(), BootError::UnknownProtocol);
    }
}
