//! DMA memory: zeroed, physically contiguous, aligned blocks from a carved RAM range
//! ([`cadence_drivers::hal::DmaAlloc`]), never returned (drivers allocate rings and the
//! packet pool once).
//!
//! The range is identity-mapped normal write-back RAM, so a block's CPU address is its
//! bus address (no SMMU is set up). `virt`'s PCIe host is cache-coherent (its tree node
//! says `dma-coherent`): devices snoop the CPU caches, so no cache maintenance is done;
//! the drivers' `fence(Release)` before a doorbell and `fence(Acquire)` after reading a
//! used/DD word are the ordering Arm's weaker memory model needs (DMB ISH/OSH-class
//! barriers, Arm ARM B2.3). A non-coherent interconnect would need cleans and
//! invalidates here.

use cadence_core::buf::BUF_SIZE;
use cadence_drivers::hal::{Dma, DmaAlloc, DmaError, Mmio};

use crate::dt::Region;
use crate::mmio::MmioWindow;

/// A block of DMA memory.
#[derive(Debug)]
pub struct DmaRegion {
    win: MmioWindow,
}

impl Mmio for DmaRegion {
    fn read8(&self, off: usize) -> u8 {
        self.win.read8(off)
    }
    fn read16(&self, off: usize) -> u16 {
        self.win.read16(off)
    }
    fn read32(&self, off: usize) -> u32 {
        self.win.read32(off)
    }
    fn write8(&self, off: usize, val: u8) {
        self.win.write8(off, val)
    }
    fn write16(&self, off: usize, val: u16) {
        self.win.write16(off, val)
    }
    fn write32(&self, off: usize, val: u32) {
        self.win.write32(off, val)
    }
    fn len(&self) -> usize {
        self.win.len()
    }
    fn cpu_address(&self, off: usize) -> Option<usize> {
        self.win.cpu_address(off)
    }
}

impl Dma for DmaRegion {
    fn phys(&self) -> u64 {
        self.win.base() as u64
    }
}

/// Hands out DMA memory from one range.
#[derive(Debug)]
pub struct DmaAllocator {
    next: u64,
    end: u64,
}

impl DmaAllocator {
    /// An allocator over `r`.
    ///
    /// # Safety
    /// `r` must be identity-mapped RAM that nothing else uses, now or later, and only one
    /// allocator may own it.
    pub const unsafe fn new(r: Region) -> Self {
        DmaAllocator { next: r.base, end: r.base.saturating_add(r.size) }
    }

    fn zeroed(&mut self, size: usize, align: usize) -> Result<u64, DmaError> {
        if !align.is_power_of_two() {
            return Err(DmaError::BadAlignment);
        }
        let a = align as u64;
        let base = self.next.checked_add(a - 1).ok_or(DmaError::Exhausted)? & !(a - 1);
        let end = base.checked_add(size as u64).ok_or(DmaError::Exhausted)?;
        if end > self.end {
            return Err(DmaError::Exhausted);
        }
        self.next = end;
        // SAFETY: `[base, end)` was just carved from the range this allocator owns
        // exclusively (`new`), identity-mapped RAM.
        unsafe { core::ptr::write_bytes(base as usize as *mut u8, 0, size) };
        Ok(base)
    }

    /// Memory for a [`cadence_core::buf::Pool`] of `count` buffers: zeroed, aligned to
    /// `BUF_SIZE`. Returns the slice and its physical base.
    pub fn packet_memory(&mut self, count: usize) -> Result<(&'static mut [u8], u64), DmaError> {
        let size = count.checked_mul(BUF_SIZE).ok_or(DmaError::Exhausted)?;
        let phys = self.zeroed(size, BUF_SIZE)?;
        // SAFETY: the block is mapped RAM owned by nobody else from now on, zeroed, `size`
        // bytes long.
        Ok((unsafe { core::slice::from_raw_parts_mut(phys as usize as *mut u8, size) }, phys))
    }
}

impl DmaAlloc for DmaAllocator {
    type Region = DmaRegion;

    fn alloc(&mut self, size: usize, align: usize) -> Result<DmaRegion, DmaError> {
        let phys = self.zeroed(size, align)?;
        // SAFETY: the block is identity-mapped RAM owned only by the returned region, and
        // no Rust reference points into it.
        Ok(DmaRegion { win: unsafe { MmioWindow::new(phys as usize, size) } })
    }
}
