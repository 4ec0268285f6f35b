//! The host side of the model: memory at fake physical addresses, the PCI function's
//! configuration space and BAR windows, the DMA allocator and a fake clock.

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;
use std::rc::Rc;

use cadence_core::buf::PacketMem;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cadence_core::time::{Clock, Instant, TickRate};

use super::{
    BAR, BAR_LEN, COMMON_LEN, COMMON_OFF, DEVICE_LEN, DEVICE_OFF, DMA_BASE, DMA_LEN, Device, ISR_OFF, NOTIFY_MULT,
    NOTIFY_OFF, POOL_BASE,
};
use crate::hal::{BarError, Dma, DmaAlloc, DmaError, Mmio, PciFunction, pci};

/// Host memory standing behind fake physical addresses.
#[derive(Debug)]
pub(crate) struct Mem {
    pub(super) dma: RefCell<Vec<u8>>,
    pub(super) pool: PoolMem,
    /// With store reordering on ([`Mem::set_reordering`]): the driver's stores to DMA
    /// memory the device has not seen yet, in program order, each with the number of
    /// barriers (`hal::barrier`) executed before it.
    pub(super) weak: RefCell<Option<Vec<Pending>>>,
}

/// A driver store the device has not seen yet.
#[derive(Debug)]
pub(super) struct Pending {
    epoch: u64,
    at: usize,
    bytes: Vec<u8>,
}

/// Packet-pool memory: one host allocation that the test's `Pool` and the model both
/// reach, each through its own copy of one raw pointer, as CPU and device share memory on
/// real hardware. Neither holds a reference to the whole of it (`core::buf::PacketMem`), so
/// the model writing one buffer aliases nothing the pool handed out (Miri-checked: `cargo
/// xtask test`, step "Miri"). Freed when the model's memory ([`Mem`]) is dropped.
#[derive(Debug)]
pub(crate) struct PoolMem {
    ptr: NonNull<u8>,
    len: usize,
    handed_out: Cell<bool>,
}

impl PoolMem {
    pub(super) fn new(len: usize) -> Self {
        let raw = Box::into_raw(vec![0u8; len].into_boxed_slice());
        let ptr = NonNull::new(raw.cast::<u8>()).expect("Box::into_raw is never null");
        Self { ptr, len, handed_out: Cell::new(false) }
    }

    /// The memory a `Pool` is built over (`Pool::try_with_mem`). Once per model.
    ///
    /// The pool must not be used after the model's memory is dropped (the harnesses keep
    /// the model alive as long as the pool; the `'static` only spares them a lifetime).
    #[allow(unsafe_code)]
    pub(crate) fn packet_mem(&self) -> PacketMem<'static> {
        assert!(!self.handed_out.replace(true), "pool memory handed out twice");
        // SAFETY: `ptr` is a `Box<[u8]>` of `len` bytes, freed only when `Mem` drops, after
        // which the harness no longer uses the pool (above). The model reads and writes it
        // (like a DMA device) only inside `Model::step` and doorbell writes, and only in
        // buffers the driver posted to a ring, which the driver and the pool leave alone
        // until the device hands them back — the DMA discipline `PacketMem` asks for.
        unsafe { PacketMem::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for PoolMem {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `Box::into_raw` of a boxed slice of `len` bytes, and this
        // is the one place that frees it.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len)) });
    }
}

impl Mem {
    /// Turns the store-reordering memory on or off (off: stores reach the device at once).
    ///
    /// On, the driver's stores to DMA memory reach the device only as a weakly ordered
    /// machine (Arm) guarantees: a register write makes every earlier store visible (the
    /// platform's register accessors carry the barrier: `hal`), and when the device looks
    /// at memory on its own ([`Mem::observe`], at each model step) it sees every store
    /// older than the last barrier before the newest pending store, and of the stores
    /// after that barrier only the newest — the reordering the architecture allows between
    /// barriers. The driver reads its own stores back at once (store forwarding). A
    /// driver that publishes an index without a write barrier after the descriptors it
    /// covers shows the device a new index over stale descriptors.
    pub(crate) fn set_reordering(&self, on: bool) {
        self.commit_all();
        *self.weak.borrow_mut() = on.then(Vec::new);
    }

    /// Makes every pending store visible, in program order (a register write).
    pub(super) fn commit_all(&self) {
        let pending = self.weak.borrow_mut().as_mut().map(std::mem::take).unwrap_or_default();
        let mut dma = self.dma.borrow_mut();
        for p in pending {
            dma[p.at..p.at + p.bytes.len()].copy_from_slice(&p.bytes);
        }
    }

    /// The device looks at memory on its own: see [`Mem::set_reordering`].
    pub(super) fn observe(&self) {
        let mut weak = self.weak.borrow_mut();
        let Some(pending) = weak.as_mut() else { return };
        let Some(newest) = pending.last().map(|p| p.epoch) else { return };
        let older = pending.iter().filter(|p| p.epoch < newest).count();
        let mut visible: Vec<Pending> = pending.drain(..older).collect();
        if let Some(last) = pending.pop() {
            visible.push(last);
        }
        let mut dma = self.dma.borrow_mut();
        for p in visible {
            dma[p.at..p.at + p.bytes.len()].copy_from_slice(&p.bytes);
        }
    }

    /// Copies `out.len()` bytes at physical `addr` into `out`; false if outside memory.
    #[allow(unsafe_code)]
    pub(crate) fn read(&self, addr: u64, out: &mut [u8]) -> bool {
        let n = out.len() as u64;
        if addr >= DMA_BASE && addr + n <= DMA_BASE + DMA_LEN as u64 {
            let o = (addr - DMA_BASE) as usize;
            out.copy_from_slice(&self.dma.borrow()[o..o + out.len()]);
            true
        } else if addr >= POOL_BASE && addr + n <= POOL_BASE + self.pool.len as u64 {
            let o = (addr - POOL_BASE) as usize;
            // SAFETY: `o + n <= len` was just checked; see `PoolMem::packet_mem` for aliasing.
            unsafe { std::ptr::copy_nonoverlapping(self.pool.ptr.as_ptr().add(o), out.as_mut_ptr(), out.len()) };
            true
        } else {
            false
        }
    }

    /// Copies `data` to physical `addr`; false if outside memory.
    #[allow(unsafe_code)]
    pub(super) fn write(&self, addr: u64, data: &[u8]) -> bool {
        let n = data.len() as u64;
        if addr >= DMA_BASE && addr + n <= DMA_BASE + DMA_LEN as u64 {
            let o = (addr - DMA_BASE) as usize;
            self.dma.borrow_mut()[o..o + data.len()].copy_from_slice(data);
            true
        } else if addr >= POOL_BASE && addr + n <= POOL_BASE + self.pool.len as u64 {
            let o = (addr - POOL_BASE) as usize;
            // SAFETY: `o + n <= len` was just checked; see `PoolMem::packet_mem` for aliasing.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.pool.ptr.as_ptr().add(o), data.len()) };
            true
        } else {
            false
        }
    }

    pub(super) fn r16(&self, a: u64) -> u16 {
        let mut b = [0; 2];
        self.read(a, &mut b);
        u16::from_le_bytes(b)
    }
    pub(super) fn r32(&self, a: u64) -> u32 {
        let mut b = [0; 4];
        self.read(a, &mut b);
        u32::from_le_bytes(b)
    }
    pub(super) fn r64(&self, a: u64) -> u64 {
        let mut b = [0; 8];
        self.read(a, &mut b);
        u64::from_le_bytes(b)
    }
}

/// Configuration space of the fake function.
#[derive(Debug)]
pub(crate) struct FakePci {
    dev: Rc<RefCell<Device>>,
    pub(crate) config: RefCell<[u8; 256]>,
}

impl FakePci {
    pub(super) fn new(dev: Rc<RefCell<Device>>) -> Self {
        let mut c = [0u8; 256];
        c[0..4].copy_from_slice(&(0x1af4u32 | 0x1041 << 16).to_le_bytes());
        c[6] = 0x10; // Status: capability list.
        c[pci::CAP_PTR as usize] = 0x40;
        // MSI-X capability first, to be skipped.
        c[0x40] = pci::CAP_MSIX;
        c[0x41] = 0x4C;
        let mut at = 0x4C;
        let caps: [(u8, u64, u64); 4] =
            [(1, COMMON_OFF, COMMON_LEN), (2, NOTIFY_OFF, 0x1000), (3, ISR_OFF, 4), (4, DEVICE_OFF, DEVICE_LEN)];
        for (i, (kind, off, len)) in caps.into_iter().enumerate() {
            let size = if kind == 2 { 20 } else { 16 };
            let next = if i + 1 == caps.len() { 0 } else { at + size };
            c[at] = pci::CAP_VENDOR;
            c[at + 1] = next as u8;
            c[at + 2] = size as u8;
            c[at + 3] = kind;
            c[at + 4] = BAR;
            c[at + 8..at + 12].copy_from_slice(&(off as u32).to_le_bytes());
            c[at + 12..at + 16].copy_from_slice(&(len as u32).to_le_bytes());
            if kind == 2 {
                c[at + 16..at + 20].copy_from_slice(&(NOTIFY_MULT as u32).to_le_bytes());
            }
            at += size;
        }
        Self { dev, config: RefCell::new(c) }
    }

    /// Removes the capability of `cfg_type` `kind` from the chain (by making it reserved).
    pub(crate) fn hide_cap(&self, kind: u8) {
        let mut c = self.config.borrow_mut();
        let mut p = c[pci::CAP_PTR as usize] as usize;
        while p != 0 {
            if c[p] == pci::CAP_VENDOR && c[p + 3] == kind {
                c[p + 3] = 0x77;
            }
            p = c[p + 1] as usize;
        }
    }

    /// The PCI command register.
    pub(crate) fn command(&self) -> u16 {
        let c = self.config.borrow();
        u16::from_le_bytes([c[4], c[5]])
    }
}

impl PciFunction for FakePci {
    type Window = Window;

    fn config_read32(&self, off: u8) -> u32 {
        let c = self.config.borrow();
        let o = off as usize & !3;
        u32::from_le_bytes([c[o], c[o + 1], c[o + 2], c[o + 3]])
    }

    fn config_write32(&self, off: u8, val: u32) {
        // Only the command register is writable here; status bits are RW1C (none set).
        if off == pci::COMMAND {
            self.config.borrow_mut()[4..6].copy_from_slice(&(val as u16).to_le_bytes());
        }
    }

    fn map_bar(&self, bar: u8, offset: u64, len: u64) -> Result<Window, BarError> {
        if bar != BAR {
            return Err(BarError::Absent);
        }
        if offset + len > BAR_LEN {
            return Err(BarError::OutOfRange);
        }
        Ok(Window { dev: Rc::clone(&self.dev), base: offset, len: len as usize })
    }
}

/// A mapped piece of BAR 4.
#[derive(Debug)]
pub(crate) struct Window {
    dev: Rc<RefCell<Device>>,
    base: u64,
    len: usize,
}

impl Window {
    fn read(&self, off: usize, size: usize) -> u32 {
        assert!(off + size <= self.len, "read outside window");
        self.dev.borrow_mut().bar_read(self.base + off as u64, size)
    }
    fn write(&self, off: usize, size: usize, v: u64) {
        assert!(off + size <= self.len, "write outside window");
        let mut d = self.dev.borrow_mut();
        // A register write comes after every earlier store (the platform's accessors order
        // it: `hal`), so the device sees them all when it acts on it.
        d.mem.commit_all();
        d.bar_write(self.base + off as u64, v);
    }
}

impl Mmio for Window {
    fn read8(&self, off: usize) -> u8 {
        self.read(off, 1) as u8
    }
    fn read16(&self, off: usize) -> u16 {
        self.read(off, 2) as u16
    }
    fn read32(&self, off: usize) -> u32 {
        self.read(off, 4)
    }
    fn write8(&self, off: usize, val: u8) {
        self.write(off, 1, val as u64)
    }
    fn write16(&self, off: usize, val: u16) {
        self.write(off, 2, val as u64)
    }
    fn write32(&self, off: usize, val: u32) {
        self.write(off, 4, val as u64)
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// Bump allocator over the model's DMA memory.
#[derive(Debug)]
pub(crate) struct FakeDma {
    pub(super) mem: Rc<Mem>,
    pub(super) next: usize,
}

impl DmaAlloc for FakeDma {
    type Region = Region;

    fn alloc(&mut self, size: usize, align: usize) -> Result<Region, DmaError> {
        if !align.is_power_of_two() {
            return Err(DmaError::BadAlignment);
        }
        let off = (self.next + align - 1) & !(align - 1);
        if off + size > DMA_LEN {
            return Err(DmaError::Exhausted);
        }
        self.next = off + size;
        Ok(Region { mem: Rc::clone(&self.mem), off, len: size })
    }
}

/// One DMA allocation.
#[derive(Debug)]
pub(crate) struct Region {
    mem: Rc<Mem>,
    off: usize,
    len: usize,
}

impl Region {
    fn read<const N: usize>(&self, off: usize) -> [u8; N] {
        assert!(off.is_multiple_of(N) && off + N <= self.len, "bad DMA access at {off}");
        let at = self.off + off;
        let mut b = [0; N];
        b.copy_from_slice(&self.mem.dma.borrow()[at..at + N]);
        // The driver's own pending stores, oldest first (store forwarding).
        if let Some(pending) = self.mem.weak.borrow().as_ref() {
            for p in pending {
                for (j, &v) in p.bytes.iter().enumerate() {
                    if let Some(slot) = (p.at + j).checked_sub(at).and_then(|k| b.get_mut(k)) {
                        *slot = v;
                    }
                }
            }
        }
        b
    }
    fn write(&self, off: usize, b: &[u8]) {
        assert!(off.is_multiple_of(b.len()) && off + b.len() <= self.len, "bad DMA access at {off}");
        let at = self.off + off;
        if let Some(pending) = self.mem.weak.borrow_mut().as_mut() {
            pending.push(Pending { epoch: crate::hal::barrier::epoch::now(), at, bytes: b.to_vec() });
            return;
        }
        self.mem.dma.borrow_mut()[at..at + b.len()].copy_from_slice(b);
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
    /// The fake physical address, as on the platform (identity-mapped DMA memory).
    fn cpu_address(&self, off: usize) -> Option<usize> {
        (off < self.len).then(|| DMA_BASE as usize + self.off + off)
    }
}

impl Dma for Region {
    fn phys(&self) -> u64 {
        DMA_BASE + self.off as u64
    }
}

/// A clock that advances `step` ticks (1 GHz) on every read. Clones share the time
/// (the port keeps a clone for its control commands).
#[derive(Debug, Clone)]
pub(crate) struct FakeClock {
    t: Arc<AtomicU64>,
    pub(crate) step: u64,
}

impl FakeClock {
    pub(crate) fn new() -> Self {
        Self { t: Arc::new(AtomicU64::new(0)), step: 10_000 }
    }

    /// Ticks read so far.
    pub(crate) fn ticks(&self) -> u64 {
        self.t.load(Ordering::Relaxed)
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        Instant(self.t.fetch_add(self.step, Ordering::Relaxed))
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(1_000_000_000).expect("non-zero")
    }
}
