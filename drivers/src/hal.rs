//! What a driver needs from the machine, as traits.
//!
//! Offsets are in bytes from the start of a window. Accesses are volatile and are
//! never merged, split or reordered with each other by the implementation (the
//! hardware's own ordering rules, and the driver's fences, do the rest). An access
//! outside a window is a driver bug: implementations ignore the write / read as 0
//! and debug builds assert.
//!
//! Ordering against DMA: [`barrier`] states the rule (descriptors, [`dma_wmb`], the
//! index or doorbell; the done word, [`dma_rmb`], the body) and gives the barriers, which
//! are stronger than `core::sync::atomic::fence` on aarch64. A platform whose register
//! accesses are not ordered against memory by the architecture orders them in its
//! [`Mmio`] (aarch64: `DMB OSHST` before a register write, `DMB OSHLD` after a read).

use core::fmt;

/// A window of device registers or device-visible memory, accessed with volatile
/// loads and stores.
pub trait Mmio {
    /// Reads a byte at `off`.
    fn read8(&self, off: usize) -> u8;
    /// Reads a little-endian `u16` at `off` (2-byte aligned).
    fn read16(&self, off: usize) -> u16;
    /// Reads a little-endian `u32` at `off` (4-byte aligned).
    fn read32(&self, off: usize) -> u32;
    /// Writes a byte at `off`.
    fn write8(&self, off: usize, val: u8);
    /// Writes a little-endian `u16` at `off` (2-byte aligned).
    fn write16(&self, off: usize, val: u16);
    /// Writes a little-endian `u32` at `off` (4-byte aligned).
    fn write32(&self, off: usize, val: u32);
    /// Reads a `u64` at `off` as two `u32` accesses, low half first.
    fn read64(&self, off: usize) -> u64 {
        let lo = self.read32(off) as u64;
        let hi = self.read32(off + 4) as u64;
        lo | hi << 32
    }
    /// Writes a `u64` at `off` as two `u32` accesses, low half first.
    fn write64(&self, off: usize, val: u64) {
        self.write32(off, val as u32);
        self.write32(off + 4, (val >> 32) as u32);
    }
    /// Copies `out.len()` bytes starting at `off` into `out` (a frame out of a kernel
    /// ring). The default reads bytes up to the first 4-byte boundary, then `u32`s, then
    /// the tail bytes; an implementation over plain shared memory may override it with
    /// one volatile copy. Offsets past the window read as 0, like every access.
    fn read_bytes(&self, off: usize, out: &mut [u8]) {
        let head = (4 - off % 4) % 4;
        let (head_bytes, rest) = out.split_at_mut(head.min(out.len()));
        for (i, b) in head_bytes.iter_mut().enumerate() {
            *b = self.read8(off.wrapping_add(i));
        }
        let mut at = off.wrapping_add(head_bytes.len());
        let mut words = rest.chunks_exact_mut(4);
        for w in &mut words {
            w.copy_from_slice(&self.read32(at).to_le_bytes());
            at = at.wrapping_add(4);
        }
        for (i, b) in words.into_remainder().iter_mut().enumerate() {
            *b = self.read8(at.wrapping_add(i));
        }
    }
    /// Copies `data` to the window starting at `off` (a frame into a kernel ring); the
    /// write counterpart of [`Mmio::read_bytes`], with the same default access pattern.
    fn write_bytes(&self, off: usize, data: &[u8]) {
        let head = (4 - off % 4) % 4;
        let (head_bytes, rest) = data.split_at(head.min(data.len()));
        for (i, &b) in head_bytes.iter().enumerate() {
            self.write8(off.wrapping_add(i), b);
        }
        let mut at = off.wrapping_add(head_bytes.len());
        let mut words = rest.chunks_exact(4);
        for w in &mut words {
            self.write32(at, u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
            at = at.wrapping_add(4);
        }
        for (i, &b) in words.remainder().iter().enumerate() {
            self.write8(at.wrapping_add(i), b);
        }
    }
    /// Bytes in the window.
    fn len(&self) -> usize;
    /// The CPU address of byte `off` of the window, where the implementation has one and
    /// `off` is inside the window (for a sleeper that monitors device writes); `None` by
    /// default (device models, windows without a stable address).
    fn cpu_address(&self, off: usize) -> Option<usize> {
        let _ = off;
        None
    }
    /// Whether the window is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A physically contiguous block of DMA memory: CPU access through [`Mmio`], device
/// access at [`Dma::phys`].
pub trait Dma: Mmio {
    /// Physical (bus) address of the first byte.
    fn phys(&self) -> u64;
}

/// Why DMA memory could not be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DmaError {
    /// Not enough memory left.
    Exhausted,
    /// The alignment is not a power of two.
    BadAlignment,
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DmaError::Exhausted => "DMA memory exhausted",
            DmaError::BadAlignment => "DMA alignment not a power of two",
        })
    }
}

/// A source of zeroed, physically contiguous DMA memory.
pub trait DmaAlloc {
    /// The memory it hands out.
    type Region: Dma;
    /// `size` zeroed bytes aligned to `align` (a power of two). Memory is never
    /// returned: drivers allocate their rings once, at initialization.
    fn alloc(&mut self, size: usize, align: usize) -> Result<Self::Region, DmaError>;
}

/// Why a BAR could not be mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum BarError {
    /// No such BAR, or it is unimplemented (reads as 0).
    Absent,
    /// The BAR is an I/O-port BAR, not memory.
    NotMemory,
    /// The requested range is outside the BAR.
    OutOfRange,
}

impl fmt::Display for BarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BarError::Absent => "BAR absent",
            BarError::NotMemory => "BAR is not a memory BAR",
            BarError::OutOfRange => "range outside the BAR",
        })
    }
}

/// One PCI function, as a driver sees it.
pub trait PciFunction {
    /// A mapped part of a memory BAR.
    type Window: Mmio;
    /// Reads the 32-bit configuration register at `off` (4-byte aligned, < 256).
    fn config_read32(&self, off: u8) -> u32;
    /// Writes the 32-bit configuration register at `off` (4-byte aligned, < 256).
    fn config_write32(&self, off: u8, val: u32);
    /// Maps `len` bytes at `offset` into memory BAR `bar` (0..=5; a 64-bit BAR is
    /// named by its low half).
    fn map_bar(&self, bar: u8, offset: u64, len: u64) -> Result<Self::Window, BarError>;

    /// Reads the 16-bit configuration register at `off` (2-byte aligned).
    fn config_read16(&self, off: u8) -> u16 {
        (self.config_read32(off & !3) >> ((off & 2) * 8)) as u16
    }
    /// Reads the configuration byte at `off`.
    fn config_read8(&self, off: u8) -> u8 {
        (self.config_read32(off & !3) >> ((off & 3) * 8)) as u8
    }
}

/// PCI configuration-space offsets and bits every driver uses (PCI Local Bus 3.0 §6.1).
pub mod pci {
    /// Vendor ID (low half) and device ID (high half).
    pub const ID: u8 = 0x00;
    /// Command (low half) and status (high half).
    pub const COMMAND: u8 = 0x04;
    /// Command: respond to memory-space accesses.
    pub const CMD_MEMORY: u32 = 1 << 1;
    /// Command: the function may master the bus (DMA).
    pub const CMD_BUS_MASTER: u32 = 1 << 2;
    /// Command: INTx# disabled (polled drivers).
    pub const CMD_INTX_DISABLE: u32 = 1 << 10;
    /// Status: the function has a capabilities list.
    pub const STATUS_CAP_LIST: u32 = 1 << (16 + 4);
    /// Pointer to the first capability.
    pub const CAP_PTR: u8 = 0x34;
    /// Capability ID of a vendor-specific capability (virtio uses these).
    pub const CAP_VENDOR: u8 = 0x09;
    /// Capability ID of MSI-X.
    pub const CAP_MSIX: u8 = 0x11;
}

/// Why a kernel wake-up call failed ([`Kick`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum KickError {
    /// The kernel is busy right now (`EAGAIN`/`EBUSY`/`ENOBUFS`): try again on a later burst.
    Busy,
    /// The interface or socket is gone (`ENXIO`/`ENETDOWN`/`EBADF`): the port is dead.
    Gone,
    /// Any other error, with its errno.
    Other(i32),
}

impl fmt::Display for KickError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KickError::Busy => f.write_str("kernel busy, retry later"),
            KickError::Gone => f.write_str("interface or socket gone"),
            KickError::Other(e) => write!(f, "errno {e}"),
        }
    }
}

/// The doorbell of a ring that a kernel, not a device, serves: Linux's AF_XDP and
/// `AF_PACKET` rings are shared memory ([`Mmio`] windows) plus a system call that tells
/// the kernel to look at them. The hosted platform implements it with `sendto` /
/// `recvfrom` / `poll` on the socket (`MSG_DONTWAIT`); tests implement it with a fake
/// kernel that serves the rings when kicked.
///
/// Obligations: neither call blocks, allocates or panics; a failure is returned, and the
/// driver counts it and retries on a later burst.
pub trait Kick {
    /// Asks the kernel to transmit what the TX ring holds (AF_XDP: `sendto(fd, NULL, 0,
    /// MSG_DONTWAIT)`; `AF_PACKET`: `send(fd, NULL, 0, MSG_DONTWAIT)`).
    fn kick_tx(&self) -> Result<(), KickError>;
    /// Asks the kernel to look at the fill ring again after it said it needs a wake-up
    /// (AF_XDP's `XDP_RING_NEED_WAKEUP` on the fill ring: `recvfrom(fd, NULL, 0,
    /// MSG_DONTWAIT)`). `AF_PACKET` needs none.
    fn kick_rx(&self) -> Result<(), KickError>;
}

/// `embedded_hal::delay::DelayNs` over any [`cadence_core::time::Clock`]: a busy wait
/// until the clock has advanced by the delay. Drivers use it where a datasheet asks
/// for a fixed delay ("wait 1 ms after setting CTRL.RST"), as opposed to a wait for a
/// condition (`cadence_core::time::poll_until`, with a deadline). The image builds it
/// over the TSC clock, host tests over their fake clocks.
#[derive(Debug)]
pub struct ClockDelay<'a, C: ?Sized> {
    clock: &'a C,
}

impl<'a, C: cadence_core::time::Clock + ?Sized> ClockDelay<'a, C> {
    /// Delays measured on `clock`.
    pub const fn new(clock: &'a C) -> Self {
        Self { clock }
    }
}

impl<C: cadence_core::time::Clock + ?Sized> embedded_hal::delay::DelayNs for ClockDelay<'_, C> {
    fn delay_ns(&mut self, ns: u32) {
        let end = self.clock.now().saturating_add(self.clock.rate().ticks_from_ns(u64::from(ns)));
        while self.clock.now() < end {
            core::hint::spin_loop();
        }
    }
}

/// The barriers of a DMA hand-off, for memory a device reads or writes (descriptor rings,
/// virtqueues, packet buffers). The rule every driver follows:
///
/// - **Handing over** (descriptors, then the index or tail that gives them to the device):
///   write the descriptors and buffers, then [`dma_wmb`], then the index store or the
///   doorbell/tail register write.
/// - **Taking back** (a write-back the device made): read the word that says it is done
///   (DD, the used index), then [`dma_rmb`], then the rest of the descriptor and the
///   buffer.
/// - **A store, then a load the device's answer depends on** (virtio's avail index, then
///   the notification-suppression flags): [`dma_mb`] between them.
///
/// Why not `core::sync::atomic::fence`: on aarch64 it is `DMB ISH*`, which orders accesses
/// only as the cores of the inner-shareable domain observe them; a DMA master sits in the
/// outer-shareable domain (Arm ARM B2.3, "Shareability"), so these are `DMB OSHST`, `DMB
/// OSHLD` and `DMB OSH`, as Linux's `dma_wmb`/`dma_rmb`/`mb` are there. On x86_64 (TSO,
/// coherent DMA) they are the fences `Release`, `Acquire` and `SeqCst`, which cost nothing
/// but the compiler's ordering (the `SeqCst` one is an `MFENCE`).
///
/// A register write through [`Mmio`] is itself ordered after earlier memory stores by the
/// platform where the architecture does not do it (aarch64's register windows put `DMB
/// OSHST` before each write and `DMB OSHLD` after each read, as Linux's `writel`/`readl`):
/// the driver's [`dma_wmb`] before a doorbell write is then redundant there but kept, since
/// the index store it also orders is a plain memory store.
///
/// The virtio device model checks the write side: its store-reordering memory
/// (`virtio::model`, `Mem::set_reordering`) shows the device stores between two barriers
/// in any order, and a test fails when the `dma_wmb` before the avail index is removed.
pub mod barrier {
    /// The barriers executed on this thread, for the device models' store-reordering
    /// memory (`virtio::model`): stores between two barriers may reach the device in any
    /// order, stores on either side of one may not.
    #[cfg(any(test, fuzzing))]
    pub(crate) mod epoch {
        std::thread_local! {
            static EPOCH: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
        }

        /// One barrier executed.
        pub(crate) fn bump() {
            EPOCH.with(|e| e.set(e.get() + 1));
        }

        /// Barriers executed so far.
        pub(crate) fn now() -> u64 {
            EPOCH.with(core::cell::Cell::get)
        }
    }

    /// Orders earlier stores to DMA memory before later stores (the index, tail or
    /// doorbell that hands them over).
    #[inline]
    pub fn dma_wmb() {
        #[cfg(any(test, fuzzing))]
        epoch::bump();
        #[cfg(target_arch = "aarch64")]
        // SAFETY: a barrier; touches no memory itself. Without `nomem` the compiler also
        // keeps memory accesses on their side of it.
        #[allow(unsafe_code)]
        unsafe {
            core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
        };
        #[cfg(not(target_arch = "aarch64"))]
        core::sync::atomic::fence(core::sync::atomic::Ordering::Release);
    }

    /// Orders an earlier load of a device's write-back (DD, the used index) before later
    /// loads and stores (the descriptor body, the buffer).
    #[inline]
    pub fn dma_rmb() {
        #[cfg(any(test, fuzzing))]
        epoch::bump();
        #[cfg(target_arch = "aarch64")]
        // SAFETY: as in `dma_wmb`.
        #[allow(unsafe_code)]
        unsafe {
            core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
        };
        #[cfg(not(target_arch = "aarch64"))]
        core::sync::atomic::fence(core::sync::atomic::Ordering::Acquire);
    }

    /// Orders every earlier access to DMA memory before every later one (a store, then a
    /// load the device's answer depends on).
    #[inline]
    pub fn dma_mb() {
        #[cfg(any(test, fuzzing))]
        epoch::bump();
        #[cfg(target_arch = "aarch64")]
        // SAFETY: as in `dma_wmb`.
        #[allow(unsafe_code)]
        unsafe {
            core::arch::asm!("dmb osh", options(nostack, preserves_flags))
        };
        #[cfg(not(target_arch = "aarch64"))]
        core::sync::atomic::fence(core::sync::atomic::Ordering::SeqCst);
    }
}

pub use barrier::{dma_mb, dma_rmb, dma_wmb};
