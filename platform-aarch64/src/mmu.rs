//! The identity map and turning the MMU on: RAM as normal write-back memory, MMIO as
//! Device-nGnRE, nothing else mapped.
//!
//! Facts (Arm ARM DDI 0487, D8 "The AArch64 Virtual Memory System Architecture"):
//! - 4 KiB granule, 48-bit input addresses (TCR_EL1.T0SZ = 16, TG0 = 0b00): level 0
//!   indexes VA\[47:39\], level 1 VA\[38:30\] (1 GiB blocks), level 2 VA\[29:21\] (2 MiB
//!   blocks) (D8.2.7).
//! - Descriptors (D8.3.1, D8.3.2): bits\[1:0\] = 0b11 a table (next level's address in
//!   \[47:12\]), 0b01 a block at level 1 or 2; lower attributes AttrIndx \[4:2\], AP \[7:6\]
//!   (0b00: EL1 read/write), SH \[9:8\] (0b11 inner shareable), AF \[10\] (set, or the first
//!   access faults); upper PXN \[53\], UXN \[54\].
//! - MAIR_EL1 (D17.2.97): attribute 0 = 0x04 Device-nGnRE, attribute 1 = 0xFF normal
//!   memory, inner and outer write-back, read- and write-allocate, non-transient.
//! - TCR_EL1 (D17.2.131): IRGN0/ORGN0 \[9:8\]/\[11:10\] = 0b01 (write-back walks), SH0
//!   \[13:12\] = 0b11, EPD1 \[23\] = 1 (no TTBR1 walks), IPS \[34:32\] = the CPU's PARange
//!   (ID_AA64MMFR0_EL1\[3:0\], D17.2.64), at most 0b101 (48 bits).
//! - SCTLR_EL1 (D17.2.118): M \[0\], C \[2\], SA \[3\], SA0 \[4\], I \[12\] over the RES1 bits
//!   0x30D0_0800; the enable sequence (D8.11, "the MMU ... enabled") writes MAIR, TCR,
//!   TTBR0, invalidates the TLB (`TLBI VMALLE1`, `DSB`, `ISB`), then sets SCTLR.M with an
//!   `ISB` after it. The tables are written with the MMU and caches off, so they are in
//!   memory when the walker reads them.
//!
//! RAM is mapped in whole 2 MiB blocks inside the device tree's region (a partial block
//! at either end is left out); device regions are rounded out to 2 MiB (device memory is
//! never accessed speculatively, so mapping a little more of the MMIO hole is harmless).
//! A whole aligned GiB becomes one level-1 block.
//!
//! Guard pages ([`Tables::unmap_page`]): the block holding the page is split into a table
//! of the same mapping one level down (a level-1 block into 512 level-2 blocks, a level-2
//! block into 512 level-3 pages, descriptor bits\[1:0\] = 0b11 at level 3, D8.3.1), then
//! the page's descriptor is cleared, so any access to it is a translation fault.

use crate::dt::Region;

/// Entries per table (4 KiB granule).
pub const ENTRIES: usize = 512;
/// MAIR_EL1: attribute 0 Device-nGnRE, attribute 1 normal write-back.
pub const MAIR: u64 = 0x04 | 0xff << 8;
/// SCTLR_EL1's RES1 bits (ARMv8.0).
pub const SCTLR_RES1: u64 = 0x30d0_0800;
/// SCTLR_EL1 with the MMU and both caches on and stack alignment checked.
pub const SCTLR_ON: u64 = SCTLR_RES1 | 1 | 1 << 2 | 1 << 3 | 1 << 4 | 1 << 12;

const VALID_TABLE: u64 = 0b11;
const VALID_BLOCK: u64 = 0b01;
/// A level-3 page descriptor (the same bits as a table descriptor one level up).
const VALID_PAGE: u64 = 0b11;
const AF: u64 = 1 << 10;
const SH_INNER: u64 = 0b11 << 8;
const PXN: u64 = 1 << 53;
const UXN: u64 = 1 << 54;
const ADDR_MASK: u64 = 0x0000_ffff_ffff_f000;
const GIB: u64 = 1 << 30;
const MIB2: u64 = 2 << 20;

/// How a range is mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Normal write-back memory, executable at EL1 (AttrIndx 1, inner shareable).
    Ram,
    /// Device-nGnRE, never executable (AttrIndx 0).
    Device,
}

impl Kind {
    const fn attrs(self) -> u64 {
        match self {
            Kind::Ram => 1 << 2 | SH_INNER | AF | UXN,
            Kind::Device => AF | PXN | UXN,
        }
    }
}

/// Why a map could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapError {
    /// More tables were needed than the pool holds.
    OutOfTables,
    /// An address beyond the 48-bit input range.
    TooHigh,
    /// A range already mapped with another kind.
    Overlap,
    /// A guard page outside the mapped RAM.
    NotMapped,
}

impl core::fmt::Display for MapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            MapError::OutOfTables => "the identity map needs more page tables than the platform reserves",
            MapError::TooHigh => "a device tree region lies beyond 48-bit addresses",
            MapError::Overlap => "a device region overlaps RAM in the device tree",
            MapError::NotMapped => "a stack's guard page lies outside the mapped RAM",
        })
    }
}

/// A 4 KiB translation table.
#[derive(Debug, Clone, Copy)]
#[repr(C, align(4096))]
pub struct Table(pub [u64; ENTRIES]);

/// A pool of `N` tables; table 0 is level 0. Tables refer to each other by the physical
/// address of their storage (identity-mapped).
#[derive(Debug)]
pub struct Tables<const N: usize> {
    tables: [Table; N],
    used: usize,
}

impl<const N: usize> Default for Tables<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Tables<N> {
    /// An empty map (nothing mapped).
    pub const fn new() -> Self {
        Tables { tables: [Table([0; ENTRIES]); N], used: 1 }
    }

    /// The level-0 table's address, for TTBR0_EL1.
    pub fn root(&self) -> u64 {
        self.addr(0)
    }

    fn addr(&self, i: usize) -> u64 {
        self.tables[i].0.as_ptr() as usize as u64
    }

    fn index_of(&self, addr: u64) -> Option<usize> {
        (0..self.used).find(|&i| self.addr(i) == addr)
    }

    /// The next-level table of `table[idx]`, made if absent.
    fn next(&mut self, table: usize, idx: usize) -> Result<usize, MapError> {
        let d = self.tables[table].0[idx];
        if d & 0b11 == VALID_TABLE {
            return self.index_of(d & ADDR_MASK).ok_or(MapError::Overlap);
        }
        if d & 0b11 == VALID_BLOCK {
            return Err(MapError::Overlap);
        }
        if self.used == N {
            return Err(MapError::OutOfTables);
        }
        let t = self.used;
        self.used += 1;
        self.tables[table].0[idx] = self.addr(t) | VALID_TABLE;
        Ok(t)
    }

    fn set_block(&mut self, table: usize, idx: usize, d: u64) -> Result<(), MapError> {
        let old = self.tables[table].0[idx];
        if old != 0 && old != d {
            return Err(MapError::Overlap);
        }
        self.tables[table].0[idx] = d;
        Ok(())
    }

    /// Maps `[base, end)` (2 MiB aligned) identity as `kind`.
    fn map_aligned(&mut self, base: u64, end: u64, kind: Kind) -> Result<(), MapError> {
        if end > 1 << 48 {
            return Err(MapError::TooHigh);
        }
        let mut a = base;
        while a < end {
            let l0 = self.next(0, (a >> 39) as usize & 511)?;
            let i1 = (a >> 30) as usize & 511;
            if a.is_multiple_of(GIB) && end - a >= GIB && self.tables[l0].0[i1] & 0b11 != VALID_TABLE {
                self.set_block(l0, i1, a | kind.attrs() | VALID_BLOCK)?;
                a += GIB;
                continue;
            }
            let l2 = self.next(l0, i1)?;
            self.set_block(l2, (a >> 21) as usize & 511, a | kind.attrs() | VALID_BLOCK)?;
            a += MIB2;
        }
        Ok(())
    }

    /// Maps RAM: the whole 2 MiB blocks inside `r`.
    pub fn map_ram(&mut self, r: Region) -> Result<(), MapError> {
        let base = r.base.checked_add(MIB2 - 1).ok_or(MapError::TooHigh)? & !(MIB2 - 1);
        let end = r.end() & !(MIB2 - 1);
        if end <= base {
            return Ok(());
        }
        self.map_aligned(base, end, Kind::Ram)
    }

    /// Maps a device region, rounded out to 2 MiB.
    pub fn map_device(&mut self, r: Region) -> Result<(), MapError> {
        let base = r.base & !(MIB2 - 1);
        let end = r.end().checked_add(MIB2 - 1).ok_or(MapError::TooHigh)? & !(MIB2 - 1);
        self.map_aligned(base, end, Kind::Device)
    }

    /// Unmaps the 4 KiB page holding `va` (a guard page: any access faults), splitting
    /// the blocks above it. The page must be mapped.
    pub fn unmap_page(&mut self, va: u64) -> Result<(), MapError> {
        if va >= 1 << 48 {
            return Err(MapError::TooHigh);
        }
        let mut table = 0usize;
        for shift in [39, 30, 21] {
            let idx = (va >> shift) as usize & 511;
            let d = self.tables[table].0[idx];
            table = match d & 0b11 {
                VALID_TABLE => self.index_of(d & ADDR_MASK).ok_or(MapError::Overlap)?,
                VALID_BLOCK if shift < 39 => self.split(table, idx, shift)?,
                _ => return Err(MapError::NotMapped),
            };
        }
        let idx = (va >> 12) as usize & 511;
        if self.tables[table].0[idx] & 0b11 != VALID_PAGE {
            return Err(MapError::NotMapped);
        }
        self.tables[table].0[idx] = 0;
        Ok(())
    }

    /// Replaces the block `table[idx]` (`1 << shift` bytes) by a new table mapping the
    /// same addresses with the same attributes one level down; returns the new table.
    fn split(&mut self, table: usize, idx: usize, shift: u32) -> Result<usize, MapError> {
        if self.used == N {
            return Err(MapError::OutOfTables);
        }
        let d = self.tables[table].0[idx];
        let (base, attrs) = (d & ADDR_MASK, d & !(ADDR_MASK | 0b11));
        let (child, bits) = (1u64 << (shift - 9), if shift == 21 { VALID_PAGE } else { VALID_BLOCK });
        let t = self.used;
        self.used += 1;
        for (i, e) in self.tables[t].0.iter_mut().enumerate() {
            *e = (base + i as u64 * child) | attrs | bits;
        }
        self.tables[table].0[idx] = self.addr(t) | VALID_TABLE;
        Ok(t)
    }

    /// What `va` translates to: the output address and the block's attributes, or `None`
    /// when unmapped (a software walk, for tests and reports).
    pub fn translate(&self, va: u64) -> Option<(u64, Kind)> {
        let mut table = 0usize;
        for (level, shift) in [(0, 39), (1, 30), (2, 21), (3, 12)] {
            let d = self.tables[table].0[(va >> shift) as usize & 511];
            match d & 0b11 {
                VALID_TABLE if level < 3 => table = self.index_of(d & ADDR_MASK)?,
                VALID_BLOCK if level == 1 || level == 2 => return Some(Self::output(d, shift, va)),
                VALID_PAGE if level == 3 => return Some(Self::output(d, shift, va)),
                _ => return None,
            }
        }
        None
    }

    /// The output address of `va` through the block or page `d` of `1 << shift` bytes.
    fn output(d: u64, shift: u32, va: u64) -> (u64, Kind) {
        let size = 1u64 << shift;
        let kind = if d & (0b111 << 2) == 1 << 2 { Kind::Ram } else { Kind::Device };
        ((d & ADDR_MASK & !(size - 1)) | (va & (size - 1)), kind)
    }

    /// Tables in use.
    pub fn used(&self) -> usize {
        self.used
    }
}

/// TCR_EL1 for this map on a CPU whose ID_AA64MMFR0_EL1.PARange is `parange`.
pub const fn tcr(parange: u64) -> u64 {
    let ips = if parange > 0b101 { 0b101 } else { parange };
    16 | 0b01 << 8 | 0b01 << 10 | 0b11 << 12 | 1 << 23 | ips << 32
}

/// The registers a core loads to use the map (the boot core and every secondary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct MmuRegs {
    pub mair: u64,
    pub tcr: u64,
    pub ttbr0: u64,
    pub sctlr: u64,
}

/// Turns the MMU and caches on with `regs`, on this core.
///
/// # Safety
/// The tables `regs.ttbr0` names must identity-map the code running, its stack and every
/// memory it touches next, and must be in memory (written with the MMU off, or cleaned
/// to the point of coherency); the core must be at EL1 with the MMU off.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub unsafe fn enable(regs: &MmuRegs) {
    // SAFETY: the caller's contract; the sequence is D8.11's: attributes and control
    // registers, TLB invalidated, then SCTLR_EL1.M with an ISB.
    unsafe {
        core::arch::asm!(
            "msr mair_el1, {mair}",
            "msr tcr_el1, {tcr}",
            "msr ttbr0_el1, {ttbr0}",
            "dsb ish",
            "isb",
            "tlbi vmalle1",
            "ic iallu",
            "dsb ish",
            "isb",
            "msr sctlr_el1, {sctlr}",
            "isb",
            mair = in(reg) regs.mair,
            tcr = in(reg) regs.tcr,
            ttbr0 = in(reg) regs.ttbr0,
            sctlr = in(reg) regs.sctlr,
            options(nostack)
        );
    }
}

/// ID_AA64MMFR0_EL1.PARange of this core.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub fn parange() -> u64 {
    let v: u64;
    // SAFETY: reading an ID register has no side effects.
    unsafe { core::arch::asm!("mrs {}, id_aa64mmfr0_el1", out(reg) v, options(nomem, nostack)) };
    v & 0xf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn virt() -> Box<Tables<16>> {
        let mut t = Box::new(Tables::<16>::new());
        t.map_ram(Region { base: 0x4000_0000, size: 256 << 20 }).expect("ram");
        t.map_device(Region { base: 0x0900_0000, size: 0x1000 }).expect("uart");
        t.map_device(Region { base: 0x0800_0000, size: 0x1_0000 }).expect("gicd");
        t.map_device(Region { base: 0x080a_0000, size: 0xf6_0000 }).expect("gicr");
        t.map_device(Region { base: 0x40_1000_0000, size: 0x1000_0000 }).expect("ecam");
        t
    }

    #[test]
    fn maps_qemu_virt_identity_with_the_right_kinds() {
        let t = virt();
        assert_eq!(t.translate(0x4008_0000), Some((0x4008_0000, Kind::Ram)));
        assert_eq!(t.translate(0x4fff_fff8), Some((0x4fff_fff8, Kind::Ram)));
        assert_eq!(t.translate(0x5000_0000), None, "past the end of RAM");
        assert_eq!(t.translate(0x0900_0018), Some((0x0900_0018, Kind::Device)));
        assert_eq!(t.translate(0x080a_0000), Some((0x080a_0000, Kind::Device)));
        assert_eq!(t.translate(0x40_1000_8000), Some((0x40_1000_8000, Kind::Device)));
        assert_eq!(t.translate(0x40_2000_0000), None, "past the ECAM window");
        assert_eq!(t.translate(0), None, "flash is not mapped");
        assert!(t.used() <= 5, "{} tables", t.used());
    }

    #[test]
    fn uses_gib_blocks_and_refuses_overlaps_and_exhaustion() {
        let mut t = Box::new(Tables::<3>::new());
        t.map_ram(Region { base: 0x4000_0000, size: 2 << 30 }).expect("two aligned GiB");
        assert_eq!(t.used(), 2, "L0 and one L1: no level-2 table for whole GiBs");
        assert_eq!(t.translate(0xbfff_ffff), Some((0xbfff_ffff, Kind::Ram)));
        assert_eq!(t.map_device(Region { base: 0x4000_0000, size: 0x1000 }), Err(MapError::Overlap));
        t.map_device(Region { base: 0x0900_0000, size: 0x1000 }).expect("third table");
        assert_eq!(t.map_device(Region { base: 0x1_0000_0000 + (3 << 29), size: 1 }), Err(MapError::OutOfTables));
        assert_eq!(t.map_device(Region { base: 1 << 48, size: 1 }), Err(MapError::TooHigh));
    }

    #[test]
    fn partial_ram_blocks_are_left_out() {
        let mut t = Box::new(Tables::<8>::new());
        t.map_ram(Region { base: 0x4010_0000, size: 0x40_0000 }).expect("ram");
        assert_eq!(t.translate(0x4010_0000), None);
        assert_eq!(t.translate(0x4020_0000), Some((0x4020_0000, Kind::Ram)));
        assert_eq!(t.translate(0x4040_0000), None);
    }

    #[test]
    fn a_guard_page_faults_and_its_neighbours_keep_their_mapping() {
        let mut t = virt();
        let before = t.used();
        let guard = 0x4123_4000;
        t.unmap_page(guard + 0x18).expect("split the 2 MiB block");
        assert_eq!(t.used(), before + 1, "one level-3 table");
        assert_eq!(t.translate(guard), None);
        assert_eq!(t.translate(guard + 0xfff), None);
        assert_eq!(t.translate(guard - 8), Some((guard - 8, Kind::Ram)));
        assert_eq!(t.translate(guard + 0x1000), Some((guard + 0x1000, Kind::Ram)));
        assert_eq!(t.translate(0x4120_0000), Some((0x4120_0000, Kind::Ram)), "the split block's first page");
        assert_eq!(t.translate(0x413f_fff8), Some((0x413f_fff8, Kind::Ram)), "and its last");
        assert_eq!(t.translate(0x4140_0000), Some((0x4140_0000, Kind::Ram)), "the next block is untouched");
        // A second guard in the same block reuses its table.
        t.unmap_page(guard + 0x2_0000).expect("same block");
        assert_eq!(t.used(), before + 1);
        assert_eq!(t.translate(guard + 0x2_0000), None);
        assert_eq!(t.unmap_page(guard), Err(MapError::NotMapped), "already a guard");
        assert_eq!(t.unmap_page(0x5000_0000), Err(MapError::NotMapped), "past RAM");
        assert_eq!(t.unmap_page(1 << 48), Err(MapError::TooHigh));
    }

    #[test]
    fn a_guard_page_in_a_gib_block_splits_it_twice() {
        let mut t = Box::new(Tables::<4>::new());
        t.map_ram(Region { base: 0x4000_0000, size: 1 << 30 }).expect("one GiB");
        assert_eq!(t.used(), 2);
        t.unmap_page(0x7fe0_1000).expect("split the GiB, then the 2 MiB block");
        assert_eq!(t.used(), 4);
        assert_eq!(t.translate(0x7fe0_1008), None);
        assert_eq!(t.translate(0x7fe0_0ff8), Some((0x7fe0_0ff8, Kind::Ram)));
        assert_eq!(t.translate(0x4000_0000), Some((0x4000_0000, Kind::Ram)));
        assert_eq!(t.translate(0x7fff_fff8), Some((0x7fff_fff8, Kind::Ram)));
        assert_eq!(t.unmap_page(0x5000_0000), Err(MapError::OutOfTables), "another block: a fifth table");
    }

    #[test]
    fn control_register_values() {
        // PARange 0b0100 (44 bits, cortex-a72): IPS 0b100.
        assert_eq!(tcr(0b0100), 16 | 1 << 8 | 1 << 10 | 3 << 12 | 1 << 23 | 0b100 << 32);
        assert_eq!(tcr(0b0110) >> 32, 0b101, "IPS capped at 48 bits");
        assert_eq!(SCTLR_ON, 0x30d0_181d);
        assert_eq!(MAIR, 0xff04);
    }
}
