//! The host end of a QEMU `tap` netdev: naming the interface, waiting for QEMU to create
//! it, making it quiet (no IPv6) and up, and an `AF_PACKET` socket bound to it.
//!
//! Frames the host sends on the socket leave through the tap interface, so QEMU reads
//! them and the guest receives them; frames the guest transmits are written by QEMU into
//! the tap and arrive on the socket as incoming. The socket also sees its own sends
//! (`PACKET_OUTGOING`); [`PacketSocket::recv`] skips them.
//!
//! Needs root (or `CAP_NET_ADMIN` + `CAP_NET_RAW`): QEMU creates the interface and this
//! module raises it and opens raw sockets. The interface disappears when QEMU exits.

use std::ffi::CString;
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// `ETH_P_ALL` in network byte order, as `socket` and `sockaddr_ll` take it.
const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// A fresh interface name for port `port` of this process: `cad<pid>_<nn><port>`,
/// unique across concurrent rigs of one process and across processes (at most 15
/// bytes, IFNAMSIZ - 1).
pub fn unique_ifname(port: usize) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) % 100;
    format!("cad{}_{n:02}{}", std::process::id(), port % 10)
}

/// Waits (at most `timeout`) until interface `ifname` exists, then disables IPv6 on it
/// (no router solicitations, MLD reports or DAD probes into the guest) and brings it
/// up. `alive` is asked between polls; when it says no, the wait ends with an error
/// (QEMU exited and will never create the interface).
pub fn prepare(ifname: &str, timeout: Duration, alive: &mut dyn FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let sys = Path::new("/sys/class/net").join(ifname);
    while !sys.exists() {
        if !alive() {
            bail!("QEMU exited before it created tap interface {ifname}");
        }
        if Instant::now() >= deadline {
            bail!("tap interface {ifname} did not appear within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let v6 = Path::new("/proc/sys/net/ipv6/conf").join(ifname).join("disable_ipv6");
    // A kernel without IPv6 has no such file and sends no IPv6 noise either. The
    // interface's IPv6 sysctls are registered by a notifier after its sysfs entry
    // appears, so a fresh interface may not have them yet: wait for them too.
    if Path::new("/proc/sys/net/ipv6").exists() {
        loop {
            match std::fs::write(&v6, "1") {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::NotFound && Instant::now() < deadline && alive() => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => return Err(e).with_context(|| format!("writing {}", v6.display())),
            }
        }
    }
    set_up(ifname).with_context(|| format!("bringing {ifname} up"))
}

/// `ifreq` with `ifname` in `ifr_name`.
fn ifreq(ifname: &str) -> io::Result<libc::ifreq> {
    let name = ifname.as_bytes();
    if name.len() >= libc::IFNAMSIZ || name.contains(&0) {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad interface name"));
    }
    // SAFETY: `ifreq` is a plain C struct (name array and a union of integers and
    // plain structs) for which all-zero bytes are a valid value.
    let mut req: libc::ifreq = unsafe { zeroed() };
    for (d, &s) in req.ifr_name.iter_mut().zip(name) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

/// Sets `IFF_UP` on `ifname` (SIOCGIFFLAGS, then SIOCSIFFLAGS).
fn set_up(ifname: &str) -> io::Result<()> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else.
    let sock = unsafe { OwnedFd::from_raw_fd(raw) };
    let mut req = ifreq(ifname)?;
    // SAFETY: SIOCGIFFLAGS reads `ifr_name` and writes `ifr_ifru.ifru_flags` of `req`,
    // which is a valid, exclusively borrowed `ifreq`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: SIOCGIFFLAGS just filled `ifru_flags`, the union member read here.
    let flags = unsafe { req.ifr_ifru.ifru_flags };
    req.ifr_ifru.ifru_flags = flags | libc::IFF_UP as libc::c_short;
    // SAFETY: SIOCSIFFLAGS reads `ifr_name` and `ifru_flags` of the valid `req`.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &req) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A raw `AF_PACKET` socket bound to one interface, seeing every protocol.
#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// Opens a socket bound to `ifname` with a receive timeout of `read_timeout` (so
    /// receiver threads can check for shutdown) and a large receive buffer.
    pub fn bind(ifname: &str, read_timeout: Duration) -> Result<PacketSocket> {
        let c = CString::new(ifname).context("interface name")?;
        // SAFETY: `c` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error()).with_context(|| format!("no interface {ifname}"));
        }
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, ETH_P_ALL_BE.into()) };
        if raw < 0 {
            return Err(io::Error::last_os_error()).context("AF_PACKET socket (needs root)");
        }
        // SAFETY: `raw` is a fresh descriptor owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: all-zero bytes are a valid `sockaddr_ll`.
        let mut addr: libc::sockaddr_ll = unsafe { zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = ETH_P_ALL_BE;
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
        let s = PacketSocket { fd };
        // Large buffers: the sink must never be where frames get lost. FORCE (root)
        // goes past net.core.rmem_max; the plain option is the fallback.
        if s.set_int(libc::SO_RCVBUFFORCE, 8 << 20).is_err() {
            let _ = s.set_int(libc::SO_RCVBUF, 8 << 20);
        }
        let tv = libc::timeval {
            tv_sec: read_timeout.as_secs() as libc::time_t,
            tv_usec: read_timeout.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: `tv` is a valid `timeval` and the length passed is its size.
        let rc = unsafe {
            libc::setsockopt(
                s.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error()).context("SO_RCVTIMEO");
        }
        Ok(s)
    }

    fn set_int(&self, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
        // SAFETY: `v` is a valid `c_int` and the length passed is its size.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    /// Another handle on the same socket (for a receiver thread).
    pub fn try_clone(&self) -> io::Result<PacketSocket> {
        Ok(PacketSocket { fd: self.fd.try_clone()? })
    }

    /// Sends one Ethernet frame (without FCS) out of the interface.
    pub fn send(&self, frame: &[u8]) -> io::Result<usize> {
        // SAFETY: `frame` is valid for `frame.len()` bytes of reading.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 { Err(io::Error::last_os_error()) } else { Ok(n as usize) }
    }

    /// Receives the next frame that came in on the interface (skipping this host's own
    /// sends); `WouldBlock`/`TimedOut` after the read timeout.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: all-zero bytes are a valid `sockaddr_ll`.
            let mut from: libc::sockaddr_ll = unsafe { zeroed() };
            let mut len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: `buf` is valid for `buf.len()` bytes of writing; `from`/`len`
            // describe a writable `sockaddr_ll`.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            if from.sll_pkttype != libc::PACKET_OUTGOING {
                return Ok(n as usize);
            }
        }
    }
}

/// Whether `frame` is traffic the host kernel itself puts on an interface (IPv6
/// neighbour discovery, router solicitation, MLD; ARP; LLDP) rather than something
/// the rig or the firmware made. The rig counts these apart from the checker.
pub fn is_host_noise(frame: &[u8]) -> bool {
    let ethertype = frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]));
    match ethertype {
        // IPv6 with ICMPv6 (58) or a hop-by-hop header (0, MLD reports) next.
        Some(0x86DD) => matches!(frame.get(14 + 6), Some(58 | 0)),
        Some(0x0806 | 0x88CC) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz_and_differ() {
        let a = unique_ifname(0);
        let b = unique_ifname(1);
        assert_ne!(a, b);
        assert!(a.len() < libc::IFNAMSIZ && a.starts_with("cad"), "{a}");
        assert!(ifreq(&a).is_ok());
        assert!(ifreq("a-name-that-is-far-too-long").is_err());
    }

    #[test]
    fn host_noise_is_recognized() {
        let mut rs = vec![0x33, 0x33, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xDD];
        rs.extend_from_slice(&[0x60, 0, 0, 0, 0, 8, 58, 255]);
        assert!(is_host_noise(&rs));
        let mut udp6 = rs.clone();
        udp6[14 + 6] = 17;
        assert!(!is_host_noise(&udp6));
        let ipv4 = [&rs[..12], &[0x08, 0x00], &[0x45; 20]].concat();
        assert!(!is_host_noise(&ipv4));
        assert!(!is_host_noise(&[0; 6]));
    }
}
