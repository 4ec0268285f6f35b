//! Windows onto ring memory that the kernel shares with the process through `mmap` of a
//! socket: [`MappedRing`], the [`cadence_drivers::hal::Mmio`] of the hosted build.
//!
//! AF_XDP maps each of its four rings at a fixed page offset of the socket
//! (`Documentation/networking/af_xdp.rst`, "Rings"); `AF_PACKET` maps its RX ring and
//! TX ring back to back in one mapping (`Documentation/networking/packet_mmap.rst`,
//! "Mapping and use of the circular buffer"). A [`MappedRing`] is one ring's part of a
//! mapping; the mapping is unmapped when the last window over it is dropped.
//!
//! Accesses follow the `Mmio` contract: volatile, one access per call, never merged or
//! split; an offset outside the window (or misaligned for its width) reads 0 and
//! ignores the write, and debug builds assert. The kernel is the other party: it reads
//! and writes the same memory from another CPU, exactly as a device does through DMA,
//! so ordering is the driver's job (fences around the producer/consumer indices).

use super::Errno;
use cadence_drivers::hal::Mmio;
use core::ptr::NonNull;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::Arc;

/// One `mmap` of a socket's ring memory; `munmap` on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Mapping` only remembers where a shared mapping is, to unmap it on drop; it
// offers no access to the memory. munmap(2) may be called from any thread.
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` allows nothing at all (no methods read or write the memory).
unsafe impl Sync for Mapping {}

impl Mapping {
    /// `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, pgoff)`.
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize, pgoff: u64) -> Result<Arc<Self>, Errno> {
        if len == 0 {
            return Err(Errno(libc::EINVAL));
        }
        // SAFETY: a fresh mapping chosen by the kernel (address NULL) overlaps nothing
        // Rust owns; `fd` is a valid descriptor for the duration of the call.
        let p = unsafe {
            libc::mmap(
                core::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                pgoff as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Errno::last());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno(libc::EFAULT))?;
        Ok(Arc::new(Self { ptr, len }))
    }

    /// Bytes mapped.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned; the last window over the
        // mapping is gone (windows hold an `Arc<Mapping>`), so no access can follow.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// A window of `len` bytes at `offset` of a kernel ring mapping: a hosted
/// [`Mmio`] for the rings of [`crate::hosted::xdp`] and [`crate::hosted::packet`].
///
/// `Send` (a driver may move its rings to its worker thread), not `Sync`: two threads
/// writing the same ring through `&self` would race.
#[derive(Debug)]
pub struct MappedRing {
    /// Keeps the mapping alive (unmapped when the last window goes).
    _map: Arc<Mapping>,
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the window points into a `MAP_SHARED` mapping that belongs to the process, not
// to a thread; the mapping lives as long as the `Arc` this window holds. Every access is
// a volatile load/store through `&self` and no thread-local state is involved, so moving
// the window to another thread is sound. It is deliberately not `Sync`.
unsafe impl Send for MappedRing {}

impl MappedRing {
    /// The window of `len` bytes at `offset` of `map`, or `None` when it does not fit.
    pub(crate) fn window(map: &Arc<Mapping>, offset: usize, len: usize) -> Option<Self> {
        if offset.checked_add(len)? > map.len() {
            return None;
        }
        // SAFETY: `offset <= map.len`, so the result stays inside (or one past) the
        // mapping that `map.ptr` starts.
        let base = unsafe { map.ptr.add(offset) };
        Some(Self { _map: Arc::clone(map), base, len })
    }

    /// The CPU address of the first byte of the window.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// The window's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The CPU addresses the window covers (for [`super::sleep::Arrival`]).
    pub fn addresses(&self) -> core::ops::Range<usize> {
        let base = self.as_ptr() as usize;
        base..base.saturating_add(self.len)
    }

    /// Whether an access of `width` bytes at `off` is inside the window and aligned.
    #[inline]
    fn check(&self, off: usize, width: usize) -> bool {
        let inside = off.checked_add(width).is_some_and(|end| end <= self.len);
        let ok = inside && (self.base.as_ptr() as usize).wrapping_add(off).is_multiple_of(width);
        debug_assert!(
            ok,
            "ring access of {width} bytes at {off:#x}: outside a {:#x}-byte window or misaligned",
            self.len
        );
        ok
    }

    #[inline]
    fn at<T>(&self, off: usize) -> *mut T {
        // SAFETY: callers passed `check(off, size_of::<T>())`, so `off` is inside the window.
        unsafe { self.base.add(off) }.as_ptr().cast()
    }
}

impl Mmio for MappedRing {
    #[inline]
    fn read8(&self, off: usize) -> u8 {
        if !self.check(off, 1) {
            return 0;
        }
        // SAFETY: `off` is inside the live mapping (checked); a byte is always aligned;
        // the kernel may write it concurrently, which is why the load is volatile.
        unsafe { self.at::<u8>(off).read_volatile() }
    }

    #[inline]
    fn read16(&self, off: usize) -> u16 {
        if !self.check(off, 2) {
            return 0;
        }
        // SAFETY: inside the mapping and 2-byte aligned (checked; the mapping is page
        // aligned); volatile for the kernel's concurrent writes.
        u16::from_le(unsafe { self.at::<u16>(off).read_volatile() })
    }

    #[inline]
    fn read32(&self, off: usize) -> u32 {
        if !self.check(off, 4) {
            return 0;
        }
        // SAFETY: inside the mapping and 4-byte aligned (checked); volatile as above.
        u32::from_le(unsafe { self.at::<u32>(off).read_volatile() })
    }

    #[inline]
    fn write8(&self, off: usize, val: u8) {
        if self.check(off, 1) {
            // SAFETY: inside the live, writable mapping (checked); volatile so the store
            // happens exactly once, as the kernel on the other side expects.
            unsafe { self.at::<u8>(off).write_volatile(val) }
        }
    }

    #[inline]
    fn write16(&self, off: usize, val: u16) {
        if self.check(off, 2) {
            // SAFETY: inside the writable mapping and 2-byte aligned (checked).
            unsafe { self.at::<u16>(off).write_volatile(val.to_le()) }
        }
    }

    #[inline]
    fn write32(&self, off: usize, val: u32) {
        if self.check(off, 4) {
            // SAFETY: inside the writable mapping and 4-byte aligned (checked).
            unsafe { self.at::<u32>(off).write_volatile(val.to_le()) }
        }
    }

    fn len(&self) -> usize {
        self.len
    }

    fn cpu_address(&self, off: usize) -> Option<usize> {
        (off < self.len).then(|| self.base.as_ptr() as usize + off)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{FromRawFd, OwnedFd};

    /// A mapping of a 2-page memfd, as a stand-in for a socket's ring memory.
    fn memfd_mapping() -> Arc<Mapping> {
        // SAFETY: the name is a NUL-terminated literal; a non-negative result is a fresh fd.
        let fd = unsafe { libc::memfd_create(c"cadence-ring-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", Errno::last());
        // SAFETY: `fd` is fresh and owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain ftruncate on our own descriptor.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 8192) }, 0);
        Mapping::map(std::os::fd::AsFd::as_fd(&fd), 8192, 0).unwrap()
    }

    #[test]
    fn reads_back_what_it_wrote_little_endian() {
        let map = memfd_mapping();
        let w = MappedRing::window(&map, 4096, 4096).unwrap();
        w.write32(0, 0x1234_5678);
        assert_eq!(w.read8(0), 0x78);
        assert_eq!(w.read16(2), 0x1234);
        w.write64(8, 0x1122_3344_5566_7788);
        assert_eq!(w.read64(8), 0x1122_3344_5566_7788);
        assert_eq!(w.read32(8), 0x5566_7788);
        // The window starts 4096 bytes into the mapping.
        let whole = MappedRing::window(&map, 0, 8192).unwrap();
        assert_eq!(whole.read32(4096), 0x1234_5678);
        assert_eq!(w.cpu_address(4), Some(whole.as_ptr() as usize + 4100));
        assert_eq!(w.cpu_address(4096), None);
        assert_eq!(w.len(), 4096);
    }

    #[test]
    fn windows_must_fit_the_mapping() {
        let map = memfd_mapping();
        assert!(MappedRing::window(&map, 4096, 4097).is_none());
        assert!(MappedRing::window(&map, usize::MAX, 2).is_none());
        assert!(MappedRing::window(&map, 8192, 0).is_some());
    }

    #[test]
    fn out_of_range_or_misaligned_reads_zero_or_asserts() {
        let map = memfd_mapping();
        let w = MappedRing::window(&map, 0, 64).unwrap();
        w.write32(60, 7);
        for (off, what) in [(64usize, "past the end"), (62, "straddles the end"), (2, "misaligned")] {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| w.read32(off)));
            if cfg!(debug_assertions) {
                assert!(r.is_err(), "debug build must assert on an access {what}");
            } else {
                assert_eq!(r.unwrap(), 0, "an access {what} reads 0");
            }
        }
        assert_eq!(w.read32(60), 7);
    }

    #[test]
    fn unmapped_when_the_last_window_drops() {
        let map = memfd_mapping();
        let a = MappedRing::window(&map, 0, 4096).unwrap();
        let b = MappedRing::window(&map, 4096, 4096).unwrap();
        drop(map);
        assert_eq!(Arc::strong_count(&a._map), 2);
        drop(a);
        assert_eq!(Arc::strong_count(&b._map), 1);
        fn assert_send<T: Send>() {}
        assert_send::<MappedRing>();
    }
}
