//! DMA memory: zeroed, physically contiguous, aligned blocks from the platform's managed
//! range ([`cadence_drivers::hal::DmaAlloc`]).
//!
//! The managed range is identity-mapped write-back RAM below 4 GiB, so a block's CPU
//! address is its bus address (no IOMMU is set up). Blocks are never returned: drivers
//! allocate rings and the packet pool once, at initialization.

use crate::mem::{PhysBump, Range};
use crate::mmio::MmioWindow;
use cadence_core::buf::BUF_SIZE;
use cadence_drivers::hal::{Dma, DmaAlloc, DmaError, Mmio};

/// A block of DMA memory: CPU access through [`Mmio`], device access at [`Dma::phys`].
#[derive(Debug)]
pub struct DmaRegion {
    win: MmioWindow,
}

impl DmaRegion {
    /// The block's first byte, for code that builds descriptors in place.
    pub fn as_ptr(&self) -> *mut u8 {
        self.win.base() as *mut u8
    }
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

/// Hands out DMA memory from one physical range.
#[derive(Debug)]
pub struct DmaAllocator {
    bump: PhysBump,
}

impl DmaAllocator {
    /// An allocator over `r`.
    ///
    /// # Safety
    /// `r` must be identity-mapped RAM that nothing else uses, now or later, and only
    /// one allocator may own it.
    pub(crate) const unsafe fn new(r: Range) -> Self {
        Self { bump: PhysBump::new(r) }
    }

    /// Bytes not yet handed out.
    pub fn remaining(&self) -> u64 {
        self.bump.remaining()
    }

    fn zeroed(&mut self, size: usize, align: usize) -> Result<u64, DmaError> {
        if !align.is_power_of_two() {
            return Err(DmaError::BadAlignment);
        }
        let phys = self.bump.alloc(size as u64, align as u64).ok_or(DmaError::Exhausted)?;
        // SAFETY: `[phys, phys + size)` was just carved from the range this allocator
        // owns exclusively (`new`), which is identity-mapped RAM.
        unsafe { core::ptr::write_bytes(phys as usize as *mut u8, 0, size) };
        Ok(phys)
    }

    /// Memory for a [`cadence_core::buf::Pool`] of `count` buffers: zeroed, aligned to
    /// `BUF_SIZE` (2048). Returns the slice and its physical base.
    pub fn packet_memory(&mut self, count: usize) -> Result<(&'static mut [u8], u64), DmaError> {
        let size = count.checked_mul(BUF_SIZE).ok_or(DmaError::Exhausted)?;
        let phys = self.zeroed(size, BUF_SIZE)?;
        // SAFETY: the block is mapped RAM owned by nobody else from now on (carved once,
        // never handed out again), initialized (zeroed) and `size` bytes long.
        let mem = unsafe { core::slice::from_raw_parts_mut(phys as usize as *mut u8, size) };
        Ok((mem, phys))
    }
}

impl DmaAlloc for DmaAllocator {
    type Region = DmaRegion;

    fn alloc(&mut self, size: usize, align: usize) -> Result<DmaRegion, DmaError> {
        let phys = self.zeroed(size, align)?;
        // SAFETY: the block is identity-mapped RAM owned only by the returned region,
        // and no Rust reference points into it.
        Ok(DmaRegion { win: unsafe { MmioWindow::new(phys as usize, size) } })
    }
}
