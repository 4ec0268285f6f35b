//! A send-only `AF_PACKET` socket: control frames for the dataplane, and the generator's
//! `sendmmsg` path.
//!
//! Bound with protocol 0, so the kernel delivers nothing to it (`packet(7)`: "If protocol
//! is set to zero, no packets are received"): a socket that listened with `ETH_P_ALL` on
//! the generator's interface would get a clone of every frame the generator sends.
//! `PACKET_QDISC_BYPASS` sends straight to the driver, as the ring sockets do.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, Result};

/// `SOL_PACKET` / `PACKET_QDISC_BYPASS` (`if_packet.h`).
const SOL_PACKET: libc::c_int = 263;
const PACKET_QDISC_BYPASS: libc::c_int = 20;

/// Most frames one `sendmmsg` call takes here.
pub const MMSG_MAX: usize = 64;

/// A send-only raw socket bound to one interface.
#[derive(Debug)]
pub struct RawSender {
    fd: OwnedFd,
    ifname: String,
}

impl RawSender {
    /// Opens and binds it to `ifname`.
    pub fn open(ifname: &str) -> Result<RawSender> {
        let c = CString::new(ifname).context("interface name")?;
        // SAFETY: `c` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error()).with_context(|| format!("no interface {ifname}"));
        }
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error()).context("AF_PACKET socket (needs root)");
        }
        // SAFETY: `raw` is a fresh descriptor owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let one: libc::c_int = 1;
        // SAFETY: `one` is a valid c_int and the length passed is its size.
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                SOL_PACKET,
                PACKET_QDISC_BYPASS,
                (&one as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error()).context("PACKET_QDISC_BYPASS");
        }
        // SAFETY: all-zero bytes are a valid `sockaddr_ll`.
        let mut addr: libc::sockaddr_ll = unsafe { zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = 0;
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a valid `sockaddr_ll` and the length passed is its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error()).with_context(|| format!("binding a packet socket to {ifname}"));
        }
        Ok(RawSender { fd, ifname: ifname.to_string() })
    }

    /// The interface.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Sends one frame; retries a full device queue (`ENOBUFS`/`EAGAIN`) a few times.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let mut tries = 0;
        loop {
            // SAFETY: `frame` is valid for `frame.len()` bytes of reading.
            let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if n >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            let busy = matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::EAGAIN));
            if !busy || tries >= 100 {
                return Err(e);
            }
            tries += 1;
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Sends `bufs[i][..lens[i]]` for every `i` with one `sendmmsg` (at most [`MMSG_MAX`]);
    /// returns how many the kernel took (0 when its queue is full).
    pub fn send_many(&self, bufs: &[Box<[u8]>], lens: &[usize]) -> io::Result<usize> {
        let n = bufs.len().min(lens.len()).min(MMSG_MAX);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: all-zero bytes are valid iovec and mmsghdr values (null pointers, zero
        // lengths), overwritten below for the first `n`.
        let mut iov: [libc::iovec; MMSG_MAX] = unsafe { zeroed() };
        // SAFETY: as above.
        let mut msgs: [libc::mmsghdr; MMSG_MAX] = unsafe { zeroed() };
        for i in 0..n {
            let len = lens[i].min(bufs[i].len());
            iov[i] = libc::iovec { iov_base: bufs[i].as_ptr() as *mut libc::c_void, iov_len: len };
            msgs[i].msg_hdr.msg_iov = &mut iov[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
        }
        // SAFETY: `msgs[..n]` each point at one iovec of `iov`, which describes `len ≤
        // bufs[i].len()` readable bytes of a live buffer; the kernel only reads them during
        // the call and writes `msg_len` of each header.
        let r = unsafe { libc::sendmmsg(self.fd.as_raw_fd(), msgs.as_mut_ptr(), n as libc::c_uint, 0) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOBUFS | libc::EAGAIN) => Ok(0),
            _ => Err(e),
        }
    }
}
