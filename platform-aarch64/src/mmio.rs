//! Volatile windows over identity-mapped device registers or DMA memory
//! ([`cadence_drivers::hal::Mmio`]); the same code as the x86 platform's `mmio` (it names
//! no instruction set), kept here because that crate is x86-only.
//!
//! Device windows lie in Device-nGnRE memory ([`crate::mmu`]): accesses are not merged,
//! split, reordered with each other or speculated (Arm ARM B2.8.2). An access outside the
//! window is ignored (a write) or reads 0, and debug builds assert.
//!
//! Device-nGnRE orders a window's accesses among themselves, not against Normal memory —
//! the descriptors and rings in DMA memory a doorbell write hands over. So a register
//! window ([`MmioWindow::device`]) carries the ordering `drivers::hal` asks of it, as
//! Linux's arm64 `writel`/`readl` do: `DMB OSHST` before each write (every earlier store
//! to memory is observable by the device, an outer-shareable observer, before the
//! register write) and `DMB OSHLD` after each read (later loads, e.g. of a write-back the
//! register reported, are not satisfied before it). A window over DMA memory
//! ([`MmioWindow::new`]) has none: the drivers' `hal::dma_*` barriers order it.

use cadence_drivers::hal::Mmio;

/// `[base, base + len)`, accessed with volatile loads and stores.
#[derive(Debug)]
pub struct MmioWindow {
    base: usize,
    len: usize,
    /// Device registers: barriers around each access (module docs).
    device: bool,
}

// SAFETY: the window is an address range; accesses are volatile and the hardware (or the
// drivers' fences) orders them. Moving it to another core is sound.
unsafe impl Send for MmioWindow {}

impl MmioWindow {
    /// A window over `[base, base + len)`.
    ///
    /// # Safety
    /// The range must be mapped (identity) for as long as the window lives, must be
    /// device memory or memory no Rust reference points into, and must not wrap.
    pub const unsafe fn new(base: usize, len: usize) -> Self {
        Self { base, len, device: false }
    }

    /// A window over device registers `[base, base + len)`: each write is preceded by
    /// `DMB OSHST`, each read followed by `DMB OSHLD` (module docs).
    ///
    /// # Safety
    /// As [`MmioWindow::new`], and the range is mapped as device memory.
    pub const unsafe fn device(base: usize, len: usize) -> Self {
        Self { base, len, device: true }
    }

    /// The first byte's address.
    pub const fn base(&self) -> usize {
        self.base
    }

    fn ptr<T>(&self, off: usize) -> Option<*mut T> {
        let size = core::mem::size_of::<T>();
        let ok = off.checked_add(size).is_some_and(|end| end <= self.len) && (self.base + off).is_multiple_of(size);
        debug_assert!(ok, "MMIO access at {off:#x} size {size} outside window of {:#x} bytes", self.len);
        ok.then_some((self.base + off) as *mut T)
    }

    fn read<T: Default>(&self, off: usize) -> T {
        let v = match self.ptr::<T>(off) {
            // SAFETY: in bounds and aligned (checked by `ptr`), mapped per `new`'s contract.
            Some(p) => unsafe { p.read_volatile() },
            None => T::default(),
        };
        if self.device {
            // SAFETY: a barrier; touches no memory itself. Without `nomem` it is also a
            // compiler barrier, so later memory accesses stay after it.
            unsafe { core::arch::asm!("dmb oshld", options(nostack, preserves_flags)) };
        }
        v
    }

    fn write<T>(&self, off: usize, val: T) {
        if self.device {
            // SAFETY: as in `read`; earlier memory accesses stay before it.
            unsafe { core::arch::asm!("dmb oshst", options(nostack, preserves_flags)) };
        }
        if let Some(p) = self.ptr::<T>(off) {
            // SAFETY: in bounds and aligned (checked by `ptr`), mapped per `new`'s contract.
            unsafe { p.write_volatile(val) }
        }
    }
}

impl Mmio for MmioWindow {
    fn read8(&self, off: usize) -> u8 {
        self.read(off)
    }
    fn read16(&self, off: usize) -> u16 {
        u16::from_le(self.read(off))
    }
    fn read32(&self, off: usize) -> u32 {
        u32::from_le(self.read(off))
    }
    fn write8(&self, off: usize, val: u8) {
        self.write(off, val)
    }
    fn write16(&self, off: usize, val: u16) {
        self.write(off, val.to_le())
    }
    fn write32(&self, off: usize, val: u32) {
        self.write(off, val.to_le())
    }
    fn len(&self) -> usize {
        self.len
    }
    fn cpu_address(&self, off: usize) -> Option<usize> {
        (off < self.len).then_some(self.base + off)
    }
}
