//! Why an AF_XDP socket could not be opened: the call that failed, the interface and
//! queue, the `errno`, and what to do about it.

use crate::hosted::Errno;
use crate::hosted::iface::{IfError, IfName};
use core::fmt;

/// Which ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XskRing {
    /// Fill ring (UMEM → kernel, for receiving).
    Fill,
    /// Completion ring (kernel → UMEM owner, sent frames).
    Completion,
    /// RX ring.
    Rx,
    /// TX ring.
    Tx,
}

/// The system call that failed while opening an AF_XDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpCall {
    /// `socket(AF_XDP)`.
    Socket,
    /// `setsockopt(XDP_UMEM_REG)`.
    UmemReg,
    /// `setsockopt` of a ring size.
    RingSize(XskRing),
    /// `getsockopt(XDP_MMAP_OFFSETS)`.
    MmapOffsets,
    /// `mmap` of a ring.
    Mmap(XskRing),
    /// `bind`.
    Bind,
    /// `getsockopt(XDP_OPTIONS)`.
    Options,
    /// `getsockopt(XDP_STATISTICS)`.
    Statistics,
    /// `setsockopt` of the busy-polling options (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL`,
    /// `SO_BUSY_POLL_BUDGET`).
    BusyPoll,
}

impl fmt::Display for XdpCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ring = |r: &XskRing| match r {
            XskRing::Fill => "fill",
            XskRing::Completion => "completion",
            XskRing::Rx => "RX",
            XskRing::Tx => "TX",
        };
        match self {
            XdpCall::Socket => f.write_str("socket"),
            XdpCall::UmemReg => f.write_str("UMEM registration"),
            XdpCall::RingSize(r) => write!(f, "{} ring setup", ring(r)),
            XdpCall::MmapOffsets => f.write_str("ring offsets (XDP_MMAP_OFFSETS)"),
            XdpCall::Mmap(r) => write!(f, "mmap of the {} ring", ring(r)),
            XdpCall::Bind => f.write_str("bind"),
            XdpCall::Options => f.write_str("XDP_OPTIONS"),
            XdpCall::Statistics => f.write_str("XDP_STATISTICS"),
            XdpCall::BusyPoll => f.write_str("busy-poll setup"),
        }
    }
}

/// Why an AF_XDP socket could not be opened or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum XdpError {
    /// A configuration the kernel would refuse (ring size not a power of two, UMEM
    /// misaligned, ...).
    BadConfig(&'static str),
    /// The interface is missing or unreadable.
    Interface(IfError),
    /// `Umem::SharedWith` a socket bound to the same interface and queue: the kernel
    /// shares that socket's fill/completion rings instead, which Cadence does not do.
    SameQueue,
    /// The kernel's offsets struct is the pre-5.4 one (no `flags`): too old.
    OldKernel,
    /// A system call failed.
    Sys {
        /// The call.
        call: XdpCall,
        /// The interface.
        ifname: IfName,
        /// The queue.
        queue: u32,
        /// What the kernel said.
        errno: Errno,
    },
}

impl XdpError {
    /// What the user can do about it, where that is known.
    pub fn hint(&self) -> Option<&'static str> {
        let XdpError::Sys { call, errno, .. } = self else {
            return None;
        };
        Some(match (call, errno.raw()) {
            (_, libc::EPERM | libc::EACCES) => {
                "AF_XDP needs root (CAP_NET_ADMIN and CAP_NET_RAW; CAP_IPC_LOCK or `ulimit -l` for the UMEM)"
            }
            (XdpCall::Socket, libc::EAFNOSUPPORT) => "this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)",
            (XdpCall::UmemReg, libc::ENOBUFS | libc::ENOMEM) => {
                "the UMEM exceeds the locked-memory limit (`ulimit -l`, or run as root)"
            }
            (XdpCall::Bind, libc::EOPNOTSUPP) => "the driver has no zero-copy AF_XDP support: use copy mode (or auto)",
            (XdpCall::Bind, libc::EBUSY) => "another AF_XDP socket is already bound to this queue",
            (XdpCall::Bind, libc::EINVAL) => {
                "no such queue on this interface (ethtool -l), or the rings/UMEM were refused"
            }
            (XdpCall::Bind, libc::ENODEV) => "the interface disappeared",
            (XdpCall::BusyPoll, libc::ENOPROTOOPT) => "this kernel has no preferred busy polling (needs Linux >= 5.11)",
            _ => return None,
        })
    }
}

impl fmt::Display for XdpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            XdpError::BadConfig(why) => write!(f, "AF_XDP configuration: {why}"),
            XdpError::Interface(e) => write!(f, "AF_XDP: {e}"),
            XdpError::SameQueue => f.write_str("AF_XDP: a shared UMEM must be bound to another interface or queue"),
            XdpError::OldKernel => f.write_str("AF_XDP: kernel too old (needs Linux >= 5.10)"),
            XdpError::Sys { call, ifname, queue, errno } => {
                write!(f, "AF_XDP {call} on {ifname} queue {queue}: {errno}")?;
                if let Some(h) = self.hint() {
                    write!(f, ": {h}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for XdpError {}
