//! The few system-call wrappers every hosted module shares: sockets and socket options.
//! Each returns the [`Errno`] of a failure; the caller names the call and the interface.

use super::Errno;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// A plain-old-data type of the kernel ABI: `#[repr(C)]`, no padding the kernel could
/// misread, and every bit pattern is a valid value.
///
/// # Safety
/// Implement it only for types for which all of the above holds: [`getsockopt`] lets
/// the kernel write arbitrary bytes into one.
pub(crate) unsafe trait Plain: Copy {}

// SAFETY: integers are plain: any bit pattern is a value, no padding.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for u32 {}

/// `socket(domain, ty | SOCK_CLOEXEC, protocol)`.
pub(crate) fn socket(domain: i32, ty: i32, protocol: i32) -> Result<OwnedFd, Errno> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a fresh descriptor
    // that nothing else owns.
    let fd = unsafe { libc::socket(domain, ty | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &val, sizeof val)`.
pub(crate) fn setsockopt<T: Plain>(fd: BorrowedFd<'_>, level: i32, name: i32, val: &T) -> Result<(), Errno> {
    // SAFETY: `val` is valid for reads of `size_of::<T>()` bytes for the duration of the
    // call, and the kernel reads at most `optlen` bytes from it.
    let r = unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, name, (val as *const T).cast(), size_of::<T>() as libc::socklen_t)
    };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// `getsockopt(fd, level, name, &out, &len)`; returns the length the kernel wrote.
pub(crate) fn getsockopt<T: Plain>(fd: BorrowedFd<'_>, level: i32, name: i32, out: &mut T) -> Result<usize, Errno> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `out` is valid for writes of `size_of::<T>()` bytes and the kernel writes
    // at most `len` (= that size) bytes; `T: Plain` makes any bytes it writes a valid
    // `T`. `len` is a valid `socklen_t` for the kernel to update.
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (out as *mut T).cast(), &mut len) };
    if r < 0 { Err(Errno::last()) } else { Ok(len as usize) }
}

/// `setsockopt` of an `int` option.
pub(crate) fn setsockopt_int(fd: BorrowedFd<'_>, level: i32, name: i32, val: i32) -> Result<(), Errno> {
    setsockopt(fd, level, name, &val)
}
