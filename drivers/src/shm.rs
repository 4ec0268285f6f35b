//! Shared memory and a doorbell for the fake kernels of the AF_XDP and `AF_PACKET` tests.
//!
//! - [`ShmWindow`]: a [`Mmio`] window over a `Vec<u8>` with interior mutability; clones
//!   share the bytes, so the driver and the fake kernel each hold one, as a process and
//!   the kernel share an mmap'ed ring. Every access is checked (inside the window, aligned
//!   to its size) and a bad one panics: a driver that reads outside its ring fails the
//!   test instead of reading 0 as the hal's contract would let it.
//! - [`FakeKick`]: a [`Kick`] that counts calls and fails on demand.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use crate::hal::{Kick, KickError, Mmio};

/// Fake CPU address of the first byte of every [`ShmWindow`] (for `wake_address` tests).
pub(crate) const SHM_CPU_BASE: usize = 0x7f00_0000_0000;

/// A window over shared host memory.
#[derive(Debug, Clone)]
pub(crate) struct ShmWindow {
    mem: Rc<RefCell<Vec<u8>>>,
    /// Word reads per offset (to check that cached indices spare the shared lines).
    reads: Rc<RefCell<std::collections::HashMap<usize, u64>>>,
}

impl ShmWindow {
    /// `len` zero bytes.
    pub(crate) fn new(len: usize) -> Self {
        Self { mem: Rc::new(RefCell::new(vec![0; len])), reads: Rc::default() }
    }

    fn check(&self, off: usize, size: usize) {
        let len = self.mem.borrow().len();
        assert!(off.checked_add(size).is_some_and(|end| end <= len), "access {off}+{size} outside a {len}-byte window");
        assert!(off.is_multiple_of(size), "misaligned {size}-byte access at {off}");
    }

    fn load<const N: usize>(&self, off: usize) -> [u8; N] {
        self.check(off, N);
        if N == 4 {
            *self.reads.borrow_mut().entry(off).or_default() += 1;
        }
        let mut b = [0; N];
        b.copy_from_slice(&self.mem.borrow()[off..off + N]);
        b
    }

    fn store(&self, off: usize, b: &[u8]) {
        self.check(off, b.len());
        self.mem.borrow_mut()[off..off + b.len()].copy_from_slice(b);
    }

    /// 32-bit reads of `off` so far (through [`Mmio`]; the kernel's own accessors below
    /// are not counted).
    pub(crate) fn reads_of(&self, off: usize) -> u64 {
        self.reads.borrow().get(&off).copied().unwrap_or(0)
    }

    // The kernel's side: plain accessors (unchecked alignment is still checked: the
    // kernel's structures are aligned too).

    pub(crate) fn r32(&self, off: usize) -> u32 {
        self.check(off, 4);
        let m = self.mem.borrow();
        u32::from_le_bytes(m[off..off + 4].try_into().unwrap())
    }
    pub(crate) fn r64(&self, off: usize) -> u64 {
        self.check(off, 8);
        let m = self.mem.borrow();
        u64::from_le_bytes(m[off..off + 8].try_into().unwrap())
    }
    pub(crate) fn w16(&self, off: usize, v: u16) {
        self.store(off, &v.to_le_bytes())
    }
    pub(crate) fn w32(&self, off: usize, v: u32) {
        self.store(off, &v.to_le_bytes())
    }
    pub(crate) fn w64(&self, off: usize, v: u64) {
        self.check(off, 8);
        self.mem.borrow_mut()[off..off + 8].copy_from_slice(&v.to_le_bytes());
    }
    /// `len` bytes at `off`.
    pub(crate) fn bytes(&self, off: usize, len: usize) -> Vec<u8> {
        self.mem.borrow()[off..off + len].to_vec()
    }
    /// Copies `data` to `off`.
    pub(crate) fn put(&self, off: usize, data: &[u8]) {
        self.mem.borrow_mut()[off..off + data.len()].copy_from_slice(data);
    }
}

impl Mmio for ShmWindow {
    fn read8(&self, off: usize) -> u8 {
        self.load::<1>(off)[0]
    }
    fn read16(&self, off: usize) -> u16 {
        u16::from_le_bytes(self.load(off))
    }
    fn read32(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.load(off))
    }
    fn write8(&self, off: usize, val: u8) {
        self.store(off, &[val])
    }
    fn write16(&self, off: usize, val: u16) {
        self.store(off, &val.to_le_bytes())
    }
    fn write32(&self, off: usize, val: u32) {
        self.store(off, &val.to_le_bytes())
    }
    fn len(&self) -> usize {
        self.mem.borrow().len()
    }
    fn cpu_address(&self, off: usize) -> Option<usize> {
        (off < self.len()).then_some(SHM_CPU_BASE + off)
    }
}

/// DMA memory for ring drivers in host tests and fuzzing: each allocation is its own
/// [`ShmWindow`] at a fake physical address; [`ShmDma::window`] hands the test (the
/// "device") a clone that shares the bytes.
#[derive(Debug)]
pub(crate) struct ShmDma {
    next: u64,
    end: u64,
    regions: Vec<ShmRegion>,
}

/// One [`ShmDma`] allocation.
#[derive(Debug, Clone)]
pub(crate) struct ShmRegion {
    w: ShmWindow,
    phys: u64,
}

impl ShmDma {
    /// Allocations from physical `base` on, `len` bytes in all.
    pub(crate) fn new(base: u64, len: u64) -> Self {
        Self { next: base, end: base + len, regions: Vec::new() }
    }

    /// The window of the allocation at physical `phys`.
    pub(crate) fn window(&self, phys: u64) -> Option<ShmWindow> {
        self.regions.iter().find(|r| r.phys == phys).map(|r| r.w.clone())
    }
}

impl crate::hal::DmaAlloc for ShmDma {
    type Region = ShmRegion;

    fn alloc(&mut self, size: usize, align: usize) -> Result<ShmRegion, crate::hal::DmaError> {
        if !align.is_power_of_two() {
            return Err(crate::hal::DmaError::BadAlignment);
        }
        let phys = self.next.next_multiple_of(align as u64);
        if phys + size as u64 > self.end {
            return Err(crate::hal::DmaError::Exhausted);
        }
        self.next = phys + size as u64;
        let r = ShmRegion { w: ShmWindow::new(size), phys };
        self.regions.push(r.clone());
        Ok(r)
    }
}

impl Mmio for ShmRegion {
    fn read8(&self, off: usize) -> u8 {
        self.w.read8(off)
    }
    fn read16(&self, off: usize) -> u16 {
        self.w.read16(off)
    }
    fn read32(&self, off: usize) -> u32 {
        self.w.read32(off)
    }
    fn write8(&self, off: usize, val: u8) {
        self.w.write8(off, val)
    }
    fn write16(&self, off: usize, val: u16) {
        self.w.write16(off, val)
    }
    fn write32(&self, off: usize, val: u32) {
        self.w.write32(off, val)
    }
    fn len(&self) -> usize {
        self.w.len()
    }
}

impl crate::hal::Dma for ShmRegion {
    fn phys(&self) -> u64 {
        self.phys
    }
}

/// A doorbell that counts rings and answers with queued failures first.
#[derive(Debug, Clone, Default)]
pub(crate) struct FakeKick {
    state: Rc<KickState>,
}

#[derive(Debug, Default)]
struct KickState {
    tx: Cell<u64>,
    rx: Cell<u64>,
    failures: RefCell<VecDeque<KickError>>,
}

impl FakeKick {
    /// `kick_tx` calls so far (failed ones included).
    pub(crate) fn tx(&self) -> u64 {
        self.state.tx.get()
    }
    /// `kick_rx` calls so far (failed ones included).
    pub(crate) fn rx(&self) -> u64 {
        self.state.rx.get()
    }
    /// The next call (either kind) fails with `e`; queued failures are used in order.
    pub(crate) fn fail_next(&self, e: KickError) {
        self.state.failures.borrow_mut().push_back(e);
    }
    fn answer(&self) -> Result<(), KickError> {
        self.state.failures.borrow_mut().pop_front().map_or(Ok(()), Err)
    }
}

impl Kick for FakeKick {
    fn kick_tx(&self) -> Result<(), KickError> {
        self.state.tx.set(self.state.tx.get() + 1);
        self.answer()
    }
    fn kick_rx(&self) -> Result<(), KickError> {
        self.state.rx.set(self.state.rx.get() + 1);
        self.answer()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A DMA allocation and the device's window on it share their bytes.
    #[test]
    fn shm_dma_regions_are_aligned_and_shared() {
        use crate::hal::{Dma, DmaAlloc, DmaError};
        let mut dma = ShmDma::new(0x1000, 0x3000);
        let a = dma.alloc(100, 64).unwrap();
        let b = dma.alloc(16, 4096).unwrap();
        assert_eq!((a.phys(), b.phys(), a.len()), (0x1000, 0x2000, 100));
        assert_eq!(dma.alloc(8, 3).err(), Some(DmaError::BadAlignment));
        assert_eq!(dma.alloc(0x2000, 8).err(), Some(DmaError::Exhausted));
        let w = dma.window(0x2000).unwrap();
        b.write32(4, 0xdead_beef);
        assert_eq!(w.r32(4), 0xdead_beef);
        w.w16(8, 7);
        assert_eq!((b.read16(8), b.read8(8)), (7, 7));
        b.write16(10, 1);
        b.write8(12, 2);
        assert!(dma.window(0x3000).is_none());
    }

    /// The hal's default byte copies over every head/body/tail split.
    #[test]
    fn default_byte_copies_round_trip_at_every_alignment() {
        let w = ShmWindow::new(64);
        for off in 0..8 {
            for len in 0..20 {
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + off + 1) as u8).collect();
                w.put(0, &[0; 64]);
                w.write_bytes(off, &data);
                assert_eq!(w.bytes(off, len), data, "write at {off}, {len} bytes");
                assert!(w.bytes(off + len, 64 - off - len).iter().all(|&b| b == 0), "wrote past the end");
                let mut out = vec![0xEE; len];
                w.read_bytes(off, &mut out);
                assert_eq!(out, data, "read at {off}, {len} bytes");
            }
        }
    }
}
