//! Identity mapping beyond the boot map.
//!
//! The trampoline maps the first 4 GiB one-to-one with 2 MiB pages (write-back); that
//! covers the image, low RAM, the LAPIC, the I/O APIC and ACPI tables. PCI BARs can be
//! anywhere the firmware put them — 64-bit BARs usually above 4 GiB — so
//! [`map_identity`] adds 2 MiB identity mappings on demand, taking page tables from a
//! fixed pool in `.bss` (Intel SDM vol. 3A §4.5, 4-level paging).

use core::fmt;

const PRESENT: u64 = 1 << 0;
const WRITABLE: u64 = 1 << 1;
const WRITE_THROUGH: u64 = 1 << 3;
const CACHE_DISABLE: u64 = 1 << 4;
/// PS: this PDPT/PD entry maps a 1 GiB / 2 MiB page.
const HUGE: u64 = 1 << 7;
/// Physical address bits 51:12 of an entry.
const ADDR_MASK: u64 = 0x000f_ffff_ffff_f000;
const PAGE_2M: u64 = 2 << 20;
/// Page tables available for new mappings: each new GiB needs one PD, each new 512 GiB
/// one PDPT as well.
const POOL_TABLES: usize = 32;

/// How a new mapping is cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cache {
    /// Write-back: RAM.
    WriteBack,
    /// Uncached (PCD|PWT): device registers.
    Uncached,
}

/// Why a range could not be mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum MapError {
    /// The range runs past the CPU's physical address width.
    BeyondPhysicalAddressWidth,
    /// The page-table pool is used up.
    OutOfTables,
}

impl fmt::Display for MapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MapError::BeyondPhysicalAddressWidth => "range beyond the physical address width",
            MapError::OutOfTables => "page-table pool exhausted",
        })
    }
}

#[repr(C, align(4096))]
struct Table([u64; 512]);

struct Pool {
    tables: [Table; POOL_TABLES],
    used: usize,
}

impl Pool {
    /// A zeroed table's physical (= virtual) address.
    fn take(&mut self) -> Result<u64, MapError> {
        let t = self.tables.get_mut(self.used).ok_or(MapError::OutOfTables)?;
        self.used += 1;
        Ok(t.0.as_mut_ptr() as u64)
    }
}

/// Also serializes every change to the live page tables.
static POOL: spin::Mutex<Pool> = spin::Mutex::new(Pool { tables: [const { Table([0; 512]) }; POOL_TABLES], used: 0 });

/// The entry at `index` of the table at physical address `table`.
///
/// # Safety
/// `table` must be the address of a live page table inside the identity map, and the
/// caller must hold [`POOL`]'s lock (no one else writes the tables).
unsafe fn entry<'a>(table: u64, index: u64) -> &'a mut u64 {
    // SAFETY: per the contract, `table` is an identity-mapped, 4 KiB-aligned array of
    // 512 entries that only the lock holder touches; `index < 512`.
    unsafe { &mut *(table as *mut u64).add((index & 511) as usize) }
}

/// The table an entry points to, creating it from the pool if the entry is empty.
///
/// # Safety
/// As [`entry`]: `e` is an entry of a live table and the lock is held.
unsafe fn next_table(e: &mut u64, pool: &mut Pool) -> Result<u64, MapError> {
    if *e & PRESENT == 0 {
        *e = pool.take()? | PRESENT | WRITABLE;
    }
    Ok(*e & ADDR_MASK)
}

/// Makes the 4 KiB page at `addr` (inside the boot identity map) not-present, splitting
/// its 2 MiB page into 4 KiB pages with the same attributes.
pub(crate) fn unmap_guard_page(addr: u64) -> Result<(), MapError> {
    let mut pool = POOL.lock();
    let (cr3, _) = x86_64::registers::control::Cr3::read_raw();
    let pml4 = cr3.start_address().as_u64();
    // SAFETY: as in `map_identity`: live tables inside the identity map, lock held.
    // `addr` is below 4 GiB, so every level down to the PD exists (boot map).
    unsafe {
        let pdpt = next_table(entry(pml4, addr >> 39), &mut pool)?;
        let pd = next_table(entry(pdpt, addr >> 30), &mut pool)?;
        let pde = entry(pd, addr >> 21);
        if *pde & HUGE != 0 {
            let pt = pool.take()?;
            let base = *pde & ADDR_MASK & !(PAGE_2M - 1);
            // Bit 7 means PAT in a 4 KiB entry: copy only presence, write and caching.
            let flags = *pde & (PRESENT | WRITABLE | WRITE_THROUGH | CACHE_DISABLE);
            for i in 0..512 {
                *entry(pt, i) = (base + i * 4096) | flags;
            }
            *pde = pt | PRESENT | WRITABLE;
        }
        let pt = *pde & ADDR_MASK;
        *entry(pt, addr >> 12) &= !PRESENT;
    }
    // A present entry changed: the TLB may hold it.
    x86_64::instructions::tlb::flush_all();
    Ok(())
}

/// Maps `[start, start + len)` one-to-one (rounded out to 2 MiB), leaving any part
/// that is already mapped as it is.
pub fn map_identity(start: u64, len: u64, cache: Cache) -> Result<(), MapError> {
    let phys_bits = crate::cpu::features().phys_bits.min(52);
    let end = start.checked_add(len).ok_or(MapError::BeyondPhysicalAddressWidth)?;
    if end > 1u64 << phys_bits {
        return Err(MapError::BeyondPhysicalAddressWidth);
    }
    let flags = PRESENT
        | WRITABLE
        | HUGE
        | match cache {
            Cache::WriteBack => 0,
            Cache::Uncached => CACHE_DISABLE | WRITE_THROUGH,
        };
    let mut pool = POOL.lock();
    let (cr3, _) = x86_64::registers::control::Cr3::read_raw();
    let pml4 = cr3.start_address().as_u64();
    let mut added = false;
    let mut page = start & !(PAGE_2M - 1);
    while page < end {
        // SAFETY: CR3 names the live PML4, and every table reached from it is either a
        // boot table in `.bss` or a pool table, all inside the identity map; we hold
        // the pool lock, the only writer.
        unsafe {
            let pdpt = next_table(entry(pml4, page >> 39), &mut pool)?;
            let pdpte = entry(pdpt, page >> 30);
            if *pdpte & (PRESENT | HUGE) != PRESENT | HUGE {
                let pd = next_table(pdpte, &mut pool)?;
                let pde = entry(pd, page >> 21);
                if *pde & PRESENT == 0 {
                    *pde = page | flags;
                    added = true;
                }
            }
        }
        page += PAGE_2M;
    }
    if added {
        // Only not-present entries changed, which the TLB never caches; the flush is
        // cheap insurance against paging-structure caches.
        x86_64::instructions::tlb::flush_all();
    }
    Ok(())
}
