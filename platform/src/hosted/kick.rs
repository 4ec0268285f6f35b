//! The doorbells of kernel-served rings: [`cadence_drivers::hal::Kick`] over a socket.
//!
//! AF_XDP (`Documentation/networking/af_xdp.rst`, "XDP_USE_NEED_WAKEUP"): `sendto` with
//! no data makes the kernel walk the TX ring; `recvfrom` with no buffer wakes the
//! driver to refill from the fill ring. `AF_PACKET` (`packet_mmap.rst`, "Transmission
//! process"): `send` with no data transmits every frame marked `TP_STATUS_SEND_REQUEST`;
//! its RX ring needs no wake-up. All calls pass `MSG_DONTWAIT`: none blocks.

use super::Errno;
use cadence_drivers::hal::{Kick, KickError};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// How a kick's `errno` reads to a driver: `EAGAIN`/`EBUSY`/`ENOBUFS` → try again later
/// ([`KickError::Busy`]); `ENXIO`/`ENETDOWN`/`EBADF` → the port is dead
/// ([`KickError::Gone`]); anything else is passed on.
pub fn kick_error(e: Errno) -> KickError {
    match e.raw() {
        libc::EAGAIN | libc::EBUSY | libc::ENOBUFS => KickError::Busy,
        libc::ENXIO | libc::ENETDOWN | libc::EBADF => KickError::Gone,
        other => KickError::Other(other),
    }
}

fn result(r: isize) -> Result<(), KickError> {
    if r < 0 { Err(kick_error(Errno::last())) } else { Ok(()) }
}

/// The doorbell of one AF_XDP socket (cloneable; shares the socket's descriptor).
#[derive(Debug, Clone)]
pub struct XskKick {
    pub(crate) fd: Arc<OwnedFd>,
}

impl XskKick {
    /// Arrivals on this socket's RX ring, whose wake address (the producer index) lies in
    /// `addrs`, for a sleeper.
    pub fn arrival(&self, addrs: core::ops::Range<usize>) -> super::sleep::Arrival {
        super::sleep::Arrival::new(addrs, Arc::clone(&self.fd))
    }
}

impl Kick for XskKick {
    fn kick_tx(&self) -> Result<(), KickError> {
        // SAFETY: no buffer and no address are passed (NULL, 0); the descriptor is kept
        // open by the `Arc`.
        let r = unsafe {
            libc::sendto(self.fd.as_raw_fd(), core::ptr::null(), 0, libc::MSG_DONTWAIT, core::ptr::null(), 0)
        };
        result(r)
    }

    fn kick_rx(&self) -> Result<(), KickError> {
        // SAFETY: as above; a NULL buffer of length 0 and NULL address pointers.
        let r = unsafe {
            libc::recvfrom(
                self.fd.as_raw_fd(),
                core::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                core::ptr::null_mut(),
                core::ptr::null_mut(),
            )
        };
        result(r)
    }
}

/// The doorbell of one `AF_PACKET` ring socket.
#[derive(Debug, Clone)]
pub struct PacketKick {
    pub(crate) fd: Arc<OwnedFd>,
}

impl PacketKick {
    /// Arrivals on this socket's RX ring (a block handed to user space), whose wake address
    /// (the status of the block waited for) lies in `addrs` (the ring), for a sleeper.
    pub fn arrival(&self, addrs: core::ops::Range<usize>) -> super::sleep::Arrival {
        super::sleep::Arrival::new(addrs, Arc::clone(&self.fd))
    }
}

impl Kick for PacketKick {
    fn kick_tx(&self) -> Result<(), KickError> {
        // SAFETY: no buffer (NULL, 0); the descriptor is kept open by the `Arc`.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), core::ptr::null(), 0, libc::MSG_DONTWAIT) };
        result(r)
    }

    /// The RX ring is filled by the kernel as frames arrive: nothing to do.
    fn kick_rx(&self) -> Result<(), KickError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_mapping() {
        for e in [libc::EAGAIN, libc::EBUSY, libc::ENOBUFS] {
            assert_eq!(kick_error(Errno(e)), KickError::Busy);
        }
        for e in [libc::ENXIO, libc::ENETDOWN, libc::EBADF] {
            assert_eq!(kick_error(Errno(e)), KickError::Gone);
        }
        assert_eq!(kick_error(Errno(libc::EINVAL)), KickError::Other(libc::EINVAL));
        assert_eq!(libc::EWOULDBLOCK, libc::EAGAIN);
    }

    #[test]
    fn kick_on_a_plain_socket_reports_errors_not_panics() {
        // A UDP socket that is not connected: send without a destination fails with
        // EDESTADDRREQ, which is passed on as Other.
        let fd = super::super::sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0).unwrap();
        let k = PacketKick { fd: Arc::new(fd) };
        assert_eq!(k.kick_tx(), Err(KickError::Other(libc::EDESTADDRREQ)));
        assert_eq!(k.kick_rx(), Ok(()));
        let x = XskKick { fd: Arc::clone(&k.fd) };
        assert_eq!(x.kick_rx(), Err(KickError::Busy), "recvfrom on an empty UDP socket with MSG_DONTWAIT is EAGAIN");
    }
}
