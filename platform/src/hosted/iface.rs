//! Facts about a network interface: index, queue counts, speed, MAC address, MTU, driver.
//!
//! Where an `ioctl` answers (`SIOCGIFINDEX` through `if_nametoindex`, `SIOCGIFHWADDR`,
//! `SIOCGIFMTU`, `SIOCGIFFLAGS`, `SIOCETHTOOL` with `ETHTOOL_GDRVINFO` /
//! `ETHTOOL_GCHANNELS`), it is used: ioctls see the calling thread's network namespace.
//! Queue counts and link speed come from `/sys/class/net/IF/` (`queues/rx-N`,
//! `queues/tx-N`, `speed`), which shows the namespace sysfs was *mounted* in; so sysfs
//! is trusted only when its `ifindex` file matches the ioctl's index (`ip netns exec`
//! remounts /sys, a bare `setns` does not), else queues come from `ETHTOOL_GCHANNELS`
//! and the speed is unknown.

use super::Errno;
use super::sys::{self, Plain};
use core::fmt;
use std::os::fd::{AsRawFd, BorrowedFd};

/// An interface name: at most 15 bytes (`IFNAMSIZ` − 1).
pub type IfName = heapless::String<15>;

/// Checks a name the way the kernel's `dev_valid_name` does: 1..=15 bytes, not `.` or
/// `..`, no `/`, `:`, NUL or whitespace.
pub fn if_name(name: &str) -> Result<IfName, IfError> {
    let bad = name.is_empty()
        || name == "."
        || name == ".."
        || name.bytes().any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace());
    if bad {
        return Err(IfError::BadName);
    }
    IfName::try_from(name).map_err(|_| IfError::BadName)
}

/// Which interface query failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IfCall {
    /// The `AF_INET` datagram socket the ioctls go through.
    Socket,
    /// `SIOCGIFHWADDR`.
    HwAddr,
    /// `SIOCGIFMTU`.
    Mtu,
    /// `SIOCGIFFLAGS`.
    Flags,
    /// `ETHTOOL_GCHANNELS` (queue counts when sysfs cannot tell).
    Channels,
}

impl IfCall {
    fn what(self) -> &'static str {
        match self {
            IfCall::Socket => "socket(AF_INET)",
            IfCall::HwAddr => "SIOCGIFHWADDR",
            IfCall::Mtu => "SIOCGIFMTU",
            IfCall::Flags => "SIOCGIFFLAGS",
            IfCall::Channels => "ETHTOOL_GCHANNELS",
        }
    }
}

/// Why an interface could not be looked at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfError {
    /// Not a valid interface name (empty, over 15 bytes, `/`, `:` or whitespace).
    BadName,
    /// No interface of that name in this network namespace.
    NotFound(IfName),
    /// A query failed.
    Sys {
        /// The query.
        call: IfCall,
        /// The interface.
        name: IfName,
        /// What the kernel said.
        errno: Errno,
    },
}

impl fmt::Display for IfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IfError::BadName => f.write_str("not a valid interface name (1 to 15 bytes, no '/', ':' or spaces)"),
            IfError::NotFound(n) => {
                write!(f, "interface {n} not found in this network namespace (`ip link show` lists them)")
            }
            IfError::Sys { call, name, errno } => write!(f, "{} on {name}: {errno}", call.what()),
        }
    }
}

impl std::error::Error for IfError {}

/// What Cadence needs to know about an interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The name.
    pub name: IfName,
    /// The index (`if_nametoindex`).
    pub index: u32,
    /// Receive queues in use (`real_num_rx_queues`).
    pub rx_queues: u32,
    /// Transmit queues in use.
    pub tx_queues: u32,
    /// Link speed in Mb/s, `None` where the driver does not say (−1) or sysfs is
    /// not this namespace's.
    pub speed_mbps: Option<u32>,
    /// The hardware address.
    pub mac: [u8; 6],
    /// The MTU in bytes.
    pub mtu: u32,
    /// Administratively up (`IFF_UP`).
    pub up: bool,
    /// The driver (`ETHTOOL_GDRVINFO`: `"veth"`, `"ixgbe"`, ...), `"unknown"` when
    /// neither ethtool nor sysfs says.
    pub driver: heapless::String<32>,
}

/// The index of interface `name`.
pub fn ifindex(name: &str) -> Result<u32, IfError> {
    let n = if_name(name)?;
    let mut c = [0u8; 16];
    c[..n.len()].copy_from_slice(n.as_bytes());
    // SAFETY: `c` is a NUL-terminated name (at most 15 bytes, then zeros).
    let i = unsafe { libc::if_nametoindex(c.as_ptr().cast()) };
    if i == 0 { Err(IfError::NotFound(n)) } else { Ok(i) }
}

/// Looks interface `name` up.
pub fn query(name: &str) -> Result<Interface, IfError> {
    let n = if_name(name)?;
    let index = ifindex(name)?;
    let sys_err = |call, errno| IfError::Sys { call, name: n.clone(), errno };
    let sock = sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0).map_err(|e| sys_err(IfCall::Socket, e))?;
    let fd = std::os::fd::AsFd::as_fd(&sock);

    let mut req = IfReq::new(&n);
    ioctl(fd, libc::SIOCGIFHWADDR, &mut req).map_err(|e| sys_err(IfCall::HwAddr, e))?;
    // struct sockaddr: sa_family (2 bytes), then sa_data with the address.
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&req.ifru[2..8]);

    let mut req = IfReq::new(&n);
    ioctl(fd, libc::SIOCGIFMTU, &mut req).map_err(|e| sys_err(IfCall::Mtu, e))?;
    let mtu = req.int() as u32;

    let mut req = IfReq::new(&n);
    ioctl(fd, libc::SIOCGIFFLAGS, &mut req).map_err(|e| sys_err(IfCall::Flags, e))?;
    let up = req.int() & libc::IFF_UP != 0;

    let sysfs = SysfsDir::matching(&n, index);
    let (rx_queues, tx_queues) = match sysfs.as_ref().and_then(SysfsDir::queues) {
        Some(q) => q,
        None => channels(fd, &n).map_err(|e| sys_err(IfCall::Channels, e))?,
    };
    let speed_mbps = sysfs.as_ref().and_then(SysfsDir::speed);
    let driver = drvinfo(fd, &n)
        .or_else(|| sysfs.as_ref().and_then(SysfsDir::driver))
        .unwrap_or_else(|| heapless::String::try_from("unknown").unwrap_or_default());
    Ok(Interface { name: n, index, rx_queues, tx_queues, speed_mbps, mac, mtu, up, driver })
}

/// `struct ifreq` (`<net/if.h>`): the name, then a 24-byte union.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct IfReq {
    name: [u8; 16],
    ifru: [u8; 24],
}

const _: () = assert!(size_of::<IfReq>() == 40);
const _: () = assert!(core::mem::offset_of!(IfReq, ifru) == 16);

impl IfReq {
    fn new(name: &IfName) -> Self {
        let mut r = Self { name: [0; 16], ifru: [0; 24] };
        r.name[..name.len()].copy_from_slice(name.as_bytes());
        r
    }

    /// The union read as `int` (`ifr_mtu`, `ifr_flags` as a short in the low half).
    fn int(&self) -> i32 {
        i32::from_ne_bytes([self.ifru[0], self.ifru[1], self.ifru[2], self.ifru[3]])
    }
}

/// `ioctl(fd, req, &mut ifreq)` for the `SIOCGIF*` requests, which fill the union.
fn ioctl(fd: BorrowedFd<'_>, req: libc::c_ulong, ifr: &mut IfReq) -> Result<(), Errno> {
    // SAFETY: `ifr` is a valid, writable `struct ifreq` for the whole call; the SIOCGIF*
    // and SIOCETHTOOL requests read the name and write at most the 40-byte struct (and,
    // for SIOCETHTOOL, the buffer `ifr_data` points to, whose validity the caller upholds).
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, (ifr as *mut IfReq).cast::<libc::c_void>()) };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

/// `SIOCETHTOOL` with `cmd` in `buf`; the kernel reads and rewrites `buf`.
fn ethtool<T: Plain>(fd: BorrowedFd<'_>, name: &IfName, buf: &mut T) -> Result<(), Errno> {
    let mut req = IfReq::new(name);
    let addr = (buf as *mut T).expose_provenance();
    req.ifru[..8].copy_from_slice(&(addr as u64).to_ne_bytes());
    // `buf` stays borrowed (and so valid for writes of size_of::<T>()) until `ioctl`
    // returns; `T: Plain` makes whatever the kernel writes a valid `T`.
    ioctl(fd, libc::SIOCETHTOOL, &mut req)
}

/// `struct ethtool_drvinfo` (`<linux/ethtool.h>`).
#[repr(C)]
#[derive(Clone, Copy)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

const _: () = assert!(size_of::<EthtoolDrvinfo>() == 196);
const _: () = assert!(core::mem::offset_of!(EthtoolDrvinfo, driver) == 4);
const _: () = assert!(core::mem::offset_of!(EthtoolDrvinfo, version) == 36);
const _: () = assert!(core::mem::offset_of!(EthtoolDrvinfo, n_priv_flags) == 176);

// SAFETY: repr(C) of u32s and byte arrays, no padding (asserted size = sum of fields).
unsafe impl Plain for EthtoolDrvinfo {}

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

const _: () = assert!(size_of::<EthtoolChannels>() == 36);
const _: () = assert!(core::mem::offset_of!(EthtoolChannels, rx_count) == 20);
const _: () = assert!(core::mem::offset_of!(EthtoolChannels, combined_count) == 32);

// SAFETY: repr(C) of nine u32s, no padding.
unsafe impl Plain for EthtoolChannels {}

/// `ETHTOOL_GDRVINFO`.
const ETHTOOL_GDRVINFO: u32 = 0x03;
/// `ETHTOOL_GCHANNELS`.
const ETHTOOL_GCHANNELS: u32 = 0x3c;

fn drvinfo(fd: BorrowedFd<'_>, name: &IfName) -> Option<heapless::String<32>> {
    let mut d = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        n_priv_flags: 0,
        n_stats: 0,
        testinfo_len: 0,
        eedump_len: 0,
        regdump_len: 0,
    };
    ethtool(fd, name, &mut d).ok()?;
    let end = d.driver.iter().position(|&b| b == 0).unwrap_or(31);
    let s = core::str::from_utf8(&d.driver[..end]).ok()?;
    (!s.is_empty()).then(|| heapless::String::try_from(s).ok()).flatten()
}

fn channels(fd: BorrowedFd<'_>, name: &IfName) -> Result<(u32, u32), Errno> {
    let mut c = EthtoolChannels { cmd: ETHTOOL_GCHANNELS, ..Default::default() };
    ethtool(fd, name, &mut c)?;
    Ok(((c.rx_count + c.combined_count).max(1), (c.tx_count + c.combined_count).max(1)))
}

/// `/sys/class/net/IF`, when it describes the interface this namespace calls IF.
struct SysfsDir(std::path::PathBuf);

impl SysfsDir {
    fn matching(name: &IfName, index: u32) -> Option<Self> {
        let dir = std::path::Path::new("/sys/class/net").join(name.as_str());
        let i: u32 = std::fs::read_to_string(dir.join("ifindex")).ok()?.trim().parse().ok()?;
        (i == index).then_some(Self(dir))
    }

    fn queues(&self) -> Option<(u32, u32)> {
        let (mut rx, mut tx) = (0u32, 0u32);
        for e in std::fs::read_dir(self.0.join("queues")).ok()?.flatten() {
            let n = e.file_name();
            let n = n.to_string_lossy();
            if n.starts_with("rx-") {
                rx += 1;
            } else if n.starts_with("tx-") {
                tx += 1;
            }
        }
        (rx > 0 && tx > 0).then_some((rx, tx))
    }

    fn speed(&self) -> Option<u32> {
        let s: i64 = std::fs::read_to_string(self.0.join("speed")).ok()?.trim().parse().ok()?;
        u32::try_from(s).ok().filter(|&s| s > 0)
    }

    fn driver(&self) -> Option<heapless::String<32>> {
        let link = std::fs::read_link(self.0.join("device/driver")).ok()?;
        heapless::String::try_from(link.file_name()?.to_str()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked_like_the_kernel_does() {
        assert!(if_name("veth0").is_ok());
        assert!(if_name("a234567890abcde").is_ok());
        for bad in ["", ".", "..", "a/b", "a:b", "a b", "a234567890abcdef"] {
            assert_eq!(if_name(bad), Err(IfError::BadName), "{bad:?}");
        }
    }

    #[test]
    fn missing_interface_is_not_found() {
        let e = query("cdn-nope0").unwrap_err();
        assert_eq!(e, IfError::NotFound(IfName::try_from("cdn-nope0").unwrap()));
        assert!(e.to_string().contains("not found"), "{e}");
    }

    #[test]
    fn loopback_facts() {
        let lo = query("lo").unwrap();
        assert_eq!(lo.index, ifindex("lo").unwrap());
        assert_eq!(lo.mac, [0; 6]);
        assert_eq!(lo.mtu, 65536);
        assert!(lo.rx_queues >= 1 && lo.tx_queues >= 1);
    }
}
