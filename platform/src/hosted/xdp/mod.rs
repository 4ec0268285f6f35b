//! AF_XDP sockets (`Documentation/networking/af_xdp.rst`): the set-up that needs system
//! calls. The ring protocols themselves live in `cadence-drivers`, over the
//! [`MappedRing`] windows and the [`XskKick`] doorbell this module hands out.
//!
//! [`XskSocket::open`] follows af_xdp.rst step by step:
//!
//! 1. `socket(AF_XDP, SOCK_RAW, 0)`;
//! 2. the first socket of a UMEM registers it: `setsockopt(SOL_XDP, XDP_UMEM_REG,
//!    {addr, len, chunk_size 2048, headroom 0, flags 0})` ("UMEM");
//! 3. `XDP_UMEM_FILL_RING` / `XDP_UMEM_COMPLETION_RING` sizes — also on a socket that
//!    shares the UMEM from another interface or queue: "a socket that shares a UMEM but
//!    is bound to a different queue id and/or netdev [...] has to create its own fill
//!    and completion rings" ("XDP_SHARED_UMEM bind flag", Linux ≥ 5.10);
//! 4. `XDP_RX_RING` / `XDP_TX_RING` sizes;
//! 5. `getsockopt(XDP_MMAP_OFFSETS)`, then `mmap` of each ring at its page offset, of
//!    `desc + size × entry` bytes;
//! 6. `bind` with `sockaddr_xdp {flags, ifindex, queue_id, shared_umem_fd}`;
//! 7. `getsockopt(XDP_OPTIONS)`: did the kernel bind in zero-copy mode?
//!
//! Modes: [`BindMode::Copy`] passes `XDP_COPY`, [`BindMode::ZeroCopy`] `XDP_ZEROCOPY`
//! (bind fails with `EOPNOTSUPP` on a driver without it, e.g. veth), and
//! [`BindMode::Auto`] passes neither, which makes the kernel try zero-copy and fall back
//! to copy by itself (`xp_assign_dev`); [`XskSocket::data_path`] says which it got. A
//! socket that shares a UMEM may not pass mode flags at all: it inherits the mode and
//! `need_wakeup` of the socket that registered the UMEM.
//!
//! UMEM conventions (what the drivers side relies on): chunk size 2048 =
//! [`cadence_core::buf::BUF_SIZE`], headroom 0, aligned chunks; the lane's pool is built
//! over the same memory with `phys_base = 0`, so `Pool::phys(buf)` is the buffer's UMEM
//! address. On receive, a descriptor's `addr` points at the frame: the chunk start +
//! [`abi::XDP_PACKET_HEADROOM`] (256) in copy mode, so at most 1792 bytes arrive per
//! chunk; a longer frame only on a socket bound with `XDP_USE_SG` ([`XskConfig::multi_buffer`]),
//! over several chunks. On transmit, `addr` may point anywhere in a chunk as long as the frame does not
//! cross its end; the completion ring returns the `addr` that was sent.

#[allow(unsafe_code)] // the kernel ABI structs read through raw pointers
pub mod abi;
mod error;

pub use error::{XdpCall, XdpError, XskRing};

use super::Errno;
use super::iface::{self, IfName};
use super::kick::XskKick;
use super::mem::PacketMemory;
use super::ring::{MappedRing, Mapping};
use super::sys;
use abi::*;
use core::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// UMEM chunk size: one Cadence packet buffer.
pub const CHUNK_SIZE: u32 = 2048;
/// `SO_BUSY_POLL` of a busy-polling socket, µs: how long one call may poll an empty
/// queue (DPDK's `net_af_xdp` uses the same 20 µs).
pub const BUSY_POLL_US: i32 = 20;
/// UMEM headroom: none (the kernel still keeps its own 256 bytes on receive).
pub const UMEM_HEADROOM: u32 = 0;

const _: () = assert!(CHUNK_SIZE as usize == cadence_core::buf::BUF_SIZE);

/// A memory region that can be registered as a UMEM: page aligned, a whole number of
/// chunks, alive for as long as any socket uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UmemRegion {
    addr: usize,
    len: usize,
}

impl UmemRegion {
    /// The region of a [`PacketMemory`] (leaked, so it outlives every socket). Take it
    /// before handing the memory to the pool with [`PacketMemory::into_slice`].
    pub fn of(mem: &PacketMemory) -> Self {
        Self { addr: mem.as_ptr() as usize, len: mem.len() }
    }

    /// A region at `addr` of `len` bytes.
    ///
    /// # Safety
    /// The memory must stay mapped, readable and writable for the rest of the process
    /// (the kernel pins it and writes received frames into it at any time), and no Rust
    /// reference may be read or written while the kernel owns a chunk of it (the same
    /// hand-off rule as device DMA: a chunk on the fill or TX ring belongs to the kernel
    /// until the RX or completion ring gives it back).
    pub unsafe fn from_raw(addr: *mut u8, len: usize) -> Self {
        Self { addr: addr as usize, len }
    }

    /// Start address.
    pub fn addr(&self) -> usize {
        self.addr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Chunks it holds.
    pub fn chunks(&self) -> usize {
        self.len / CHUNK_SIZE as usize
    }

    fn check(&self) -> Result<(), XdpError> {
        if !self.addr.is_multiple_of(super::mem::PAGE) {
            return Err(XdpError::BadConfig("UMEM start is not page aligned"));
        }
        if self.len == 0 || !self.len.is_multiple_of(CHUNK_SIZE as usize) {
            return Err(XdpError::BadConfig("UMEM length is not a non-zero multiple of 2048"));
        }
        Ok(())
    }
}

/// Where a socket's UMEM comes from.
#[derive(Debug, Clone, Copy)]
pub enum Umem<'a> {
    /// This socket registers the region (the first socket of a lane).
    Register(UmemRegion),
    /// This socket shares the UMEM of another socket (bound to another interface or
    /// queue; it gets its own fill and completion rings).
    SharedWith(&'a XskSocket),
}

/// The mode asked for at bind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindMode {
    /// `XDP_COPY`: the kernel copies frames between its buffers and the UMEM.
    Copy,
    /// `XDP_ZEROCOPY`: the NIC DMAs into the UMEM; fails where the driver cannot.
    ZeroCopy,
    /// Zero-copy where the driver supports it, else copy (the kernel decides).
    #[default]
    Auto,
}

/// The mode the socket got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataPath {
    /// Copy mode.
    Copy,
    /// Zero-copy mode.
    ZeroCopy,
}

impl fmt::Display for DataPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DataPath::Copy => "copy",
            DataPath::ZeroCopy => "zero-copy",
        })
    }
}

/// Ring sizes and mode of an AF_XDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct XskConfig {
    /// Fill ring entries (a power of two).
    pub fill_size: u32,
    /// Completion ring entries (a power of two).
    pub comp_size: u32,
    /// RX ring entries (a power of two).
    pub rx_size: u32,
    /// TX ring entries (a power of two).
    pub tx_size: u32,
    /// The mode to bind in (ignored for [`Umem::SharedWith`]: inherited).
    pub mode: BindMode,
    /// `XDP_USE_NEED_WAKEUP` (ignored for [`Umem::SharedWith`]: inherited).
    pub need_wakeup: bool,
    /// `XDP_USE_SG`: frames over several chunks (jumbo frames; ignored for
    /// [`Umem::SharedWith`]: inherited). A kernel before 6.6 refuses the bind (`EINVAL`).
    pub multi_buffer: bool,
}

impl Default for XskConfig {
    /// 2048 entries per ring (libxdp's default), [`BindMode::Auto`], need-wakeup on.
    fn default() -> Self {
        Self {
            fill_size: 2048,
            comp_size: 2048,
            rx_size: 2048,
            tx_size: 2048,
            mode: BindMode::Auto,
            need_wakeup: true,
            multi_buffer: false,
        }
    }
}

impl XskConfig {
    /// The default with all four rings of `size` entries.
    pub fn with_ring_size(size: u32) -> Self {
        Self { fill_size: size, comp_size: size, rx_size: size, tx_size: size, ..Self::default() }
    }

    /// The same with another mode.
    pub fn mode(self, mode: BindMode) -> Self {
        Self { mode, ..self }
    }

    /// The same with need-wakeup on or off.
    pub fn need_wakeup(self, need_wakeup: bool) -> Self {
        Self { need_wakeup, ..self }
    }

    /// The same with `XDP_USE_SG` on or off.
    pub fn multi_buffer(self, multi_buffer: bool) -> Self {
        Self { multi_buffer, ..self }
    }
}

/// Byte offsets of one ring's fields inside its window (the kernel's
/// `struct xdp_ring_offset`, as `usize` for [`cadence_drivers::hal::Mmio`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RingOffsets {
    /// The `u32` producer index.
    pub producer: usize,
    /// The `u32` consumer index.
    pub consumer: usize,
    /// The `u32` flags word ([`abi::XDP_RING_NEED_WAKEUP`]).
    pub flags: usize,
    /// The first entry.
    pub desc: usize,
}

impl From<XdpRingOffset> for RingOffsets {
    fn from(o: XdpRingOffset) -> Self {
        Self {
            producer: o.producer as usize,
            consumer: o.consumer as usize,
            flags: o.flags as usize,
            desc: o.desc as usize,
        }
    }
}

/// Offsets of all four rings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct XskOffsets {
    /// Fill ring.
    pub fill: RingOffsets,
    /// Completion ring.
    pub comp: RingOffsets,
    /// RX ring.
    pub rx: RingOffsets,
    /// TX ring.
    pub tx: RingOffsets,
}

/// Entries of each ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XskSizes {
    /// Fill ring.
    pub fill: u32,
    /// Completion ring.
    pub comp: u32,
    /// RX ring.
    pub rx: u32,
    /// TX ring.
    pub tx: u32,
}

/// The four ring windows of a socket, for a driver to own.
#[derive(Debug)]
pub struct XskRings {
    /// Fill ring: `u64` UMEM addresses the driver gives the kernel to receive into.
    pub fill: MappedRing,
    /// Completion ring: `u64` UMEM addresses of sent frames.
    pub comp: MappedRing,
    /// RX ring: [`abi::XdpDesc`] of received frames.
    pub rx: MappedRing,
    /// TX ring: [`abi::XdpDesc`] of frames to send.
    pub tx: MappedRing,
}

/// Statistics of a socket (`XDP_STATISTICS`), cumulative since it was opened.
pub type XskStats = XdpStatistics;

/// An open, bound AF_XDP socket (see the module docs).
#[derive(Debug)]
pub struct XskSocket {
    fd: Arc<OwnedFd>,
    ifname: IfName,
    ifindex: u32,
    queue: u32,
    umem: UmemRegion,
    rings: Option<XskRings>,
    offsets: XskOffsets,
    sizes: XskSizes,
    data_path: DataPath,
    need_wakeup: bool,
}

impl XskSocket {
    /// Opens an AF_XDP socket on queue `queue` of `ifname` over `umem`.
    pub fn open(ifname: &str, queue: u32, umem: Umem<'_>, cfg: &XskConfig) -> Result<Self, XdpError> {
        let sizes = XskSizes { fill: cfg.fill_size, comp: cfg.comp_size, rx: cfg.rx_size, tx: cfg.tx_size };
        for s in [sizes.fill, sizes.comp, sizes.rx, sizes.tx] {
            if !s.is_power_of_two() {
                return Err(XdpError::BadConfig("ring sizes must be powers of two"));
            }
        }
        let name = iface::if_name(ifname).map_err(XdpError::Interface)?;
        let ifindex = iface::ifindex(ifname).map_err(XdpError::Interface)?;
        let region = match umem {
            Umem::Register(r) => r,
            Umem::SharedWith(owner) => {
                if owner.ifindex == ifindex && owner.queue == queue {
                    return Err(XdpError::SameQueue);
                }
                owner.umem
            }
        };
        region.check()?;
        let err = |call: XdpCall| {
            let ifname = name.clone();
            move |errno| XdpError::Sys { call, ifname, queue, errno }
        };

        let fd = sys::socket(AF_XDP, libc::SOCK_RAW, 0).map_err(err(XdpCall::Socket))?;
        let s = fd.as_fd();
        if let Umem::Register(r) = umem {
            let reg = XdpUmemReg {
                addr: r.addr as u64,
                len: r.len as u64,
                chunk_size: CHUNK_SIZE,
                headroom: UMEM_HEADROOM,
                flags: 0,
                tx_metadata_len: 0,
            };
            sys::setsockopt(s, SOL_XDP, XDP_UMEM_REG, &reg).map_err(err(XdpCall::UmemReg))?;
        }
        let ring_opts = [
            (XDP_UMEM_FILL_RING, sizes.fill, XskRing::Fill),
            (XDP_UMEM_COMPLETION_RING, sizes.comp, XskRing::Completion),
            (XDP_RX_RING, sizes.rx, XskRing::Rx),
            (XDP_TX_RING, sizes.tx, XskRing::Tx),
        ];
        for (opt, size, ring) in ring_opts {
            sys::setsockopt(s, SOL_XDP, opt, &size).map_err(err(XdpCall::RingSize(ring)))?;
        }
        let mut off = XdpMmapOffsets::default();
        let got = sys::getsockopt(s, SOL_XDP, XDP_MMAP_OFFSETS, &mut off).map_err(err(XdpCall::MmapOffsets))?;
        if got != size_of::<XdpMmapOffsets>() {
            return Err(XdpError::OldKernel);
        }
        let map = |ring, o: &XdpRingOffset, size: u32, entry: usize, pgoff: u64| {
            let len = o.desc as usize + size as usize * entry;
            let m = Mapping::map(s, len, pgoff).map_err(err(XdpCall::Mmap(ring)))?;
            MappedRing::window(&m, 0, len).ok_or(XdpError::BadConfig("ring window outside its mapping"))
        };
        let rings = XskRings {
            fill: map(XskRing::Fill, &off.fr, sizes.fill, UMEM_ENTRY, XDP_UMEM_PGOFF_FILL_RING)?,
            comp: map(XskRing::Completion, &off.cr, sizes.comp, UMEM_ENTRY, XDP_UMEM_PGOFF_COMPLETION_RING)?,
            rx: map(XskRing::Rx, &off.rx, sizes.rx, DESC_ENTRY, XDP_PGOFF_RX_RING)?,
            tx: map(XskRing::Tx, &off.tx, sizes.tx, DESC_ENTRY, XDP_PGOFF_TX_RING)?,
        };

        let (flags, shared_fd, owner_wakeup) = match umem {
            Umem::Register(_) => {
                let mode = match cfg.mode {
                    BindMode::Copy => XDP_COPY,
                    BindMode::ZeroCopy => XDP_ZEROCOPY,
                    BindMode::Auto => 0,
                };
                let sg = if cfg.multi_buffer { XDP_USE_SG } else { 0 };
                (mode | sg | if cfg.need_wakeup { XDP_USE_NEED_WAKEUP } else { 0 }, 0, cfg.need_wakeup)
            }
            Umem::SharedWith(owner) => (XDP_SHARED_UMEM, owner.fd.as_raw_fd() as u32, owner.need_wakeup),
        };
        let addr = SockaddrXdp {
            sxdp_family: AF_XDP as u16,
            sxdp_flags: flags,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: shared_fd,
        };
        bind(s, &addr).map_err(err(XdpCall::Bind))?;

        let mut opts = XdpOptions::default();
        sys::getsockopt(s, SOL_XDP, XDP_OPTIONS, &mut opts).map_err(err(XdpCall::Options))?;
        let data_path = if opts.flags & XDP_OPTIONS_ZEROCOPY != 0 { DataPath::ZeroCopy } else { DataPath::Copy };
        let offsets = XskOffsets { fill: off.fr.into(), comp: off.cr.into(), rx: off.rx.into(), tx: off.tx.into() };
        Ok(Self {
            fd: Arc::new(fd),
            ifname: name,
            ifindex,
            queue,
            umem: region,
            rings: Some(rings),
            offsets,
            sizes,
            data_path,
            need_wakeup: owner_wakeup,
        })
    }

    /// Turns on preferred busy polling (Linux ≥ 5.11, `Documentation/networking/napi.rst`,
    /// "Busy polling"): `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` = [`BUSY_POLL_US`] and
    /// `SO_BUSY_POLL_BUDGET` = `budget` packets. From then on this socket's `recvfrom` and
    /// `sendto` run the NAPI poll of the queue it is bound to in the caller's thread, so
    /// the driver must make those calls when its RX ring is empty (see
    /// `cadence_drivers::xsk::XskConfig::always_kick_rx`), not only on NEED_WAKEUP.
    /// Raising `SO_BUSY_POLL` above `net.core.busy_read` needs CAP_NET_ADMIN.
    pub fn busy_poll(&self, budget: u32) -> Result<(), XdpError> {
        if budget == 0 || budget > u32::from(u16::MAX) {
            return Err(XdpError::BadConfig("busy-poll budget must be in 1..=65535"));
        }
        let s = self.fd.as_fd();
        let err =
            |errno| XdpError::Sys { call: XdpCall::BusyPoll, ifname: self.ifname.clone(), queue: self.queue, errno };
        sys::setsockopt_int(s, libc::SOL_SOCKET, libc::SO_PREFER_BUSY_POLL, 1).map_err(err)?;
        sys::setsockopt_int(s, libc::SOL_SOCKET, libc::SO_BUSY_POLL, BUSY_POLL_US).map_err(err)?;
        sys::setsockopt_int(s, libc::SOL_SOCKET, libc::SO_BUSY_POLL_BUDGET, budget as i32).map_err(err)?;
        Ok(())
    }

    /// The four ring windows, once: a driver takes them and owns them from then on.
    pub fn take_rings(&mut self) -> Option<XskRings> {
        self.rings.take()
    }

    /// The ring windows while nobody has taken them.
    pub fn rings(&self) -> Option<&XskRings> {
        self.rings.as_ref()
    }

    /// Where each ring's fields are inside its window.
    pub fn offsets(&self) -> XskOffsets {
        self.offsets
    }

    /// Entries per ring.
    pub fn sizes(&self) -> XskSizes {
        self.sizes
    }

    /// The mode the kernel bound the socket in.
    pub fn data_path(&self) -> DataPath {
        self.data_path
    }

    /// Whether the kernel flags the rings when it needs a kick (`XDP_USE_NEED_WAKEUP`).
    pub fn need_wakeup(&self) -> bool {
        self.need_wakeup
    }

    /// The UMEM it works on.
    pub fn umem(&self) -> UmemRegion {
        self.umem
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The queue it is bound to.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Its doorbell (shares the descriptor; usable from any thread).
    pub fn kick(&self) -> XskKick {
        XskKick { fd: Arc::clone(&self.fd) }
    }

    /// `XDP_STATISTICS`, cumulative since the socket was opened (kernels before 5.9
    /// report only the first three counters; the rest read 0).
    pub fn stats(&self) -> Result<XskStats, XdpError> {
        let mut st = XdpStatistics::default();
        sys::getsockopt(self.fd.as_fd(), SOL_XDP, XDP_STATISTICS, &mut st).map_err(|errno| XdpError::Sys {
            call: XdpCall::Statistics,
            ifname: self.ifname.clone(),
            queue: self.queue,
            errno,
        })?;
        Ok(st)
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn bind(fd: BorrowedFd<'_>, addr: &SockaddrXdp) -> Result<(), Errno> {
    // SAFETY: `addr` is a valid sockaddr_xdp of the length passed, read by the kernel
    // during the call only.
    let r = unsafe {
        libc::bind(fd.as_raw_fd(), (addr as *const SockaddrXdp).cast(), size_of::<SockaddrXdp>() as libc::socklen_t)
    };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hosted::iface::IfError;

    #[test]
    fn errors_name_the_call_the_interface_and_the_errno() {
        let e = XdpError::Sys {
            call: XdpCall::Bind,
            ifname: IfName::try_from("veth0").unwrap(),
            queue: 1,
            errno: Errno(libc::EOPNOTSUPP),
        };
        assert_eq!(
            e.to_string(),
            "AF_XDP bind on veth0 queue 1: EOPNOTSUPP (Operation not supported): \
             the driver has no zero-copy AF_XDP support: use copy mode (or auto)"
        );
        let e = XdpError::Sys {
            call: XdpCall::Socket,
            ifname: IfName::try_from("eth1").unwrap(),
            queue: 0,
            errno: Errno(libc::EPERM),
        };
        assert!(e.to_string().contains("needs root"), "{e}");
    }

    #[test]
    fn bad_configs_are_refused_before_any_system_call() {
        let mem = crate::hosted::mem::packet_memory(1 << 16, false).unwrap();
        let umem = UmemRegion::of(&mem);
        let cfg = XskConfig { rx_size: 1000, ..XskConfig::default() };
        assert!(matches!(XskSocket::open("lo", 0, Umem::Register(umem), &cfg), Err(XdpError::BadConfig(_))));
        let e = XskSocket::open("cdn-nope0", 0, Umem::Register(umem), &XskConfig::default()).unwrap_err();
        assert!(matches!(e, XdpError::Interface(IfError::NotFound(_))), "{e}");
        // SAFETY: a region that is never registered (open fails before any syscall).
        let odd = unsafe { UmemRegion::from_raw(mem.as_ptr().wrapping_add(64), 4096) };
        assert!(matches!(
            XskSocket::open("lo", 0, Umem::Register(odd), &XskConfig::default()),
            Err(XdpError::BadConfig(_))
        ));
        assert_eq!(umem.chunks(), 32);
    }
}
