//! The host side of the register-level NIC models: memory at fake physical
//! addresses (DMA allocations and the packet pool), a PCI function whose BAR 0 is a
//! model's register file, a bump DMA allocator and a fake clock.
//!
//! Device accesses to memory go through [`Host::dev_read`] / [`Host::dev_write`],
//! which accept only ranges inside one DMA allocation or inside the pool: anything
//! else is a driver bug (a bad descriptor address), which the models record as a
//! violation.

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::rc::Rc;

use cadence_core::buf::PacketMem;
use cadence_core::time::{Clock, Instant, TickRate};
use cadence_drivers::hal::{BarError, Dma, DmaAlloc, DmaError, Mmio, PciFunction};

/// Fake physical base of DMA (ring) memory.
pub const DMA_BASE: u64 = 0x1000_0000;
/// Bytes of DMA memory (an XL710 port's HMC backing alone is 2 MiB).
pub const DMA_LEN: usize = 24 << 20;
/// Fake physical base of the packet pool.
pub const POOL_BASE: u64 = 0x4000_0000;

/// Memory shared by the driver (CPU side) and the models (device side).
#[derive(Debug)]
pub struct Host {
    dma: RefCell<Vec<u8>>,
    allocs: RefCell<Vec<(u64, u64)>>,
    /// The pool's memory: a `Box<[u8]>` of `pool_len` bytes, freed when the host drops. The
    /// pool and the models reach it through their own copies of this pointer (never through
    /// a reference to all of it), so a model's DMA write aliases nothing the pool handed out.
    pool_ptr: NonNull<u8>,
    pool_len: usize,
    pool_taken: Cell<bool>,
    /// CPU-side (reads, writes) of DMA memory through [`Region`]s so far: the drivers'
    /// descriptor accesses (the forwarding bench counts the ones a poll makes).
    pub cpu_dma_accesses: Cell<(u64, u64)>,
}

impl Drop for Host {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: `pool_ptr` came from `Box::into_raw` of a boxed slice of `pool_len` bytes;
        // this is the one place that frees it.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.pool_ptr.as_ptr(), self.pool_len)) });
    }
}

impl Host {
    /// Host memory with a pool region of `pool_bytes`.
    pub fn new(pool_bytes: usize) -> Rc<Self> {
        let raw = Box::into_raw(vec![0u8; pool_bytes].into_boxed_slice());
        let pool_ptr = NonNull::new(raw.cast::<u8>()).expect("Box::into_raw is never null");
        Rc::new(Self {
            dma: RefCell::new(vec![0; DMA_LEN]),
            allocs: RefCell::new(Vec::new()),
            pool_ptr,
            pool_len: pool_bytes,
            pool_taken: Cell::new(false),
            cpu_dma_accesses: Cell::new((0, 0)),
        })
    }

    /// The pool memory, to build a `Pool` over at [`POOL_BASE`] with `Pool::try_with_mem`.
    /// Once per host. The pool must not be used after the host is dropped (tests keep the
    /// host alive as long as the pool; the `'static` only spares them a lifetime).
    #[allow(unsafe_code)]
    pub fn pool_mem(&self) -> PacketMem<'static> {
        assert!(!self.pool_taken.replace(true), "pool memory handed out twice");
        // SAFETY: `pool_ptr` is a `Box<[u8]>` of `pool_len` bytes, freed only when the host
        // drops (after which the pool is not used, above). The models also write it, like a
        // DMA device: only inside a register write or `step`, and only in buffers the driver
        // posted to a ring and does not touch until the device hands them back — the DMA
        // discipline `PacketMem::from_raw_parts` asks for.
        unsafe { PacketMem::from_raw_parts(self.pool_ptr, self.pool_len) }
    }

    /// A DMA allocator over this host's memory.
    pub fn dma(self: &Rc<Self>) -> FakeDma {
        FakeDma { host: Rc::clone(self), next: 0 }
    }

    /// Whether `[addr, addr + len)` lies in one DMA allocation or in the pool.
    pub fn device_may_access(&self, addr: u64, len: usize) -> bool {
        let end = addr.saturating_add(len as u64);
        let in_pool = addr >= POOL_BASE && end <= POOL_BASE + self.pool_len as u64;
        in_pool || self.allocs.borrow().iter().any(|&(a, l)| addr >= a && end <= a + l)
    }

    /// Device read of `out.len()` bytes at `addr`; false (nothing read) when outside
    /// the memory the driver allocated.
    #[allow(unsafe_code)]
    pub fn dev_read(&self, addr: u64, out: &mut [u8]) -> bool {
        if !self.device_may_access(addr, out.len()) {
            return false;
        }
        if addr >= POOL_BASE {
            let o = (addr - POOL_BASE) as usize;
            // SAFETY: inside the pool (checked by `device_may_access`); see `pool_mem`.
            unsafe { std::ptr::copy_nonoverlapping(self.pool_ptr.as_ptr().add(o), out.as_mut_ptr(), out.len()) };
        } else {
            let o = (addr - DMA_BASE) as usize;
            out.copy_from_slice(&self.dma.borrow()[o..o + out.len()]);
        }
        true
    }

    /// Device write of `data` at `addr`; false (nothing written) when outside the
    /// memory the driver allocated.
    #[allow(unsafe_code)]
    pub fn dev_write(&self, addr: u64, data: &[u8]) -> bool {
        if !self.device_may_access(addr, data.len()) {
            return false;
        }
        if addr >= POOL_BASE {
            let o = (addr - POOL_BASE) as usize;
            // SAFETY: inside the pool (checked by `device_may_access`); see `pool_mem`.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.pool_ptr.as_ptr().add(o), data.len()) };
        } else {
            let o = (addr - DMA_BASE) as usize;
            self.dma.borrow_mut()[o..o + data.len()].copy_from_slice(data);
        }
        true
    }

    /// Device read of a little-endian u64 (0 when outside).
    pub fn r64(&self, a: u64) -> u64 {
        let mut b = [0; 8];
        self.dev_read(a, &mut b);
        u64::from_le_bytes(b)
    }

    /// Device read of a little-endian u32 (0 when outside).
    pub fn r32(&self, a: u64) -> u32 {
        let mut b = [0; 4];
        self.dev_read(a, &mut b);
        u32::from_le_bytes(b)
    }
}

/// A register file behind BAR 0.
pub trait BarDevice {
    /// A 32-bit read at `off`.
    fn read32(&mut self, off: usize) -> u32;
    /// A 32-bit write at `off`.
    fn write32(&mut self, off: usize, v: u32);
    /// Records a protocol violation.
    fn violation(&mut self, what: String);
}

/// A PCI function whose BAR 0 is `D`'s register file.
#[derive(Debug)]
pub struct FakePci<D> {
    dev: Rc<RefCell<D>>,
    config: RefCell<[u8; 256]>,
    bar_len: u64,
}

impl<D> FakePci<D> {
    /// A function with IDs `vendor:device` and a BAR 0 of `bar_len` bytes.
    pub fn new(dev: Rc<RefCell<D>>, vendor: u16, device: u16, bar_len: u64) -> Self {
        let mut c = [0u8; 256];
        c[0..4].copy_from_slice(&(vendor as u32 | (device as u32) << 16).to_le_bytes());
        Self { dev, config: RefCell::new(c), bar_len }
    }

    /// The PCI command register.
    pub fn command(&self) -> u16 {
        let c = self.config.borrow();
        u16::from_le_bytes([c[4], c[5]])
    }
}

impl<D: BarDevice> PciFunction for FakePci<D> {
    type Window = Window<D>;

    fn config_read32(&self, off: u8) -> u32 {
        let c = self.config.borrow();
        let o = off as usize & !3;
        u32::from_le_bytes([c[o], c[o + 1], c[o + 2], c[o + 3]])
    }

    fn config_write32(&self, off: u8, val: u32) {
        if off == 4 {
            self.config.borrow_mut()[4..6].copy_from_slice(&(val as u16).to_le_bytes());
        }
    }

    fn map_bar(&self, bar: u8, offset: u64, len: u64) -> Result<Window<D>, BarError> {
        if bar != 0 {
            return Err(BarError::Absent);
        }
        if offset + len > self.bar_len {
            return Err(BarError::OutOfRange);
        }
        Ok(Window { dev: Rc::clone(&self.dev), base: offset as usize, len: len as usize })
    }
}

/// A mapped piece of BAR 0. Registers are 32 bits wide: narrower accesses are
/// violations.
#[derive(Debug)]
pub struct Window<D> {
    dev: Rc<RefCell<D>>,
    base: usize,
    len: usize,
}

impl<D: BarDevice> Window<D> {
    fn narrow(&self, off: usize) {
        self.dev.borrow_mut().violation(format!("sub-dword register access at {:#x}", self.base + off));
    }
}

impl<D: BarDevice> Mmio for Window<D> {
    fn read8(&self, off: usize) -> u8 {
        self.narrow(off);
        0
    }
    fn read16(&self, off: usize) -> u16 {
        self.narrow(off);
        0
    }
    fn read32(&self, off: usize) -> u32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len, "read outside window at {off:#x}");
        self.dev.borrow_mut().read32(self.base + off)
    }
    fn write8(&self, off: usize, _: u8) {
        self.narrow(off)
    }
    fn write16(&self, off: usize, _: u16) {
        self.narrow(off)
    }
    fn write32(&self, off: usize, val: u32) {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len, "write outside window at {off:#x}");
        self.dev.borrow_mut().write32(self.base + off, val)
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// Bump allocator over the host's DMA memory; records every allocation so the models
/// can check device accesses against them.
#[derive(Debug)]
pub struct FakeDma {
    host: Rc<Host>,
    next: usize,
}

impl DmaAlloc for FakeDma {
    type Region = Region;

    fn alloc(&mut self, size: usize, align: usize) -> Result<Region, DmaError> {
        if !align.is_power_of_two() {
            return Err(DmaError::BadAlignment);
        }
        let off = self.next.next_multiple_of(align);
        if off + size > DMA_LEN {
            return Err(DmaError::Exhausted);
        }
        self.next = off + size;
        self.host.allocs.borrow_mut().push((DMA_BASE + off as u64, size as u64));
        Ok(Region { host: Rc::clone(&self.host), off, len: size })
    }
}

/// One DMA allocation, CPU side.
#[derive(Debug)]
pub struct Region {
    host: Rc<Host>,
    off: usize,
    len: usize,
}

impl Region {
    fn read<const N: usize>(&self, off: usize) -> [u8; N] {
        assert!(off.is_multiple_of(N) && off + N <= self.len, "bad DMA access at {off}");
        let (r, w) = self.host.cpu_dma_accesses.get();
        self.host.cpu_dma_accesses.set((r + 1, w));
        let mut b = [0; N];
        b.copy_from_slice(&self.host.dma.borrow()[self.off + off..self.off + off + N]);
        b
    }
    fn write(&self, off: usize, b: &[u8]) {
        assert!(off.is_multiple_of(b.len()) && off + b.len() <= self.len, "bad DMA access at {off}");
        let (r, w) = self.host.cpu_dma_accesses.get();
        self.host.cpu_dma_accesses.set((r, w + 1));
        self.host.dma.borrow_mut()[self.off + off..self.off + off + b.len()].copy_from_slice(b);
    }
}

impl Mmio for Region {
    fn read8(&self, off: usize) -> u8 {
        self.read::<1>(off)[0]
    }
    fn read16(&self, off: usize) -> u16 {
        u16::from_le_bytes(self.read(off))
    }
    fn read32(&self, off: usize) -> u32 {
        u32::from_le_bytes(self.read(off))
    }
    fn write8(&self, off: usize, val: u8) {
        self.write(off, &[val])
    }
    fn write16(&self, off: usize, val: u16) {
        self.write(off, &val.to_le_bytes())
    }
    fn write32(&self, off: usize, val: u32) {
        self.write(off, &val.to_le_bytes())
    }
    fn len(&self) -> usize {
        self.len
    }
    /// The fake physical address stands in for the CPU address (host memory has no
    /// other stable one): enough for tests that check which word a driver names for a
    /// MONITOR; nothing dereferences it.
    fn cpu_address(&self, off: usize) -> Option<usize> {
        (off < self.len).then(|| (DMA_BASE as usize) + self.off + off)
    }
}

impl Dma for Region {
    fn phys(&self) -> u64 {
        DMA_BASE + self.off as u64
    }
}

/// A 1 GHz clock that advances `step` ticks on every read.
#[derive(Debug)]
pub struct FakeClock {
    /// Ticks so far.
    pub t: Cell<u64>,
    /// Ticks per read.
    pub step: u64,
}

impl FakeClock {
    /// 10 µs per read.
    pub fn new() -> Self {
        Self { t: Cell::new(0), step: 10_000 }
    }
}

impl Default for FakeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        let t = self.t.get();
        self.t.set(t + self.step);
        Instant(t)
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(1_000_000_000).expect("non-zero")
    }
}
