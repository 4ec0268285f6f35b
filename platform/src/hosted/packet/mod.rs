//! `AF_PACKET` sockets with `TPACKET_V3` rings (`Documentation/networking/packet_mmap.rst`):
//! the set-up that needs system calls. The ring protocols live in `cadence-drivers`,
//! over the two [`MappedRing`] windows and the [`PacketKick`] doorbell handed out here.
//!
//! [`PacketSocket::open`], step by step:
//!
//! 1. `socket(AF_PACKET, SOCK_RAW, 0)`: protocol 0 receives nothing until `bind` names
//!    the protocol, so no frame of another interface slips in before the ring exists;
//! 2. `PACKET_VERSION = TPACKET_V3`;
//! 3. `PACKET_IGNORE_OUTGOING = 1` (else the socket sees its own transmitted frames)
//!    `PACKET_QDISC_BYPASS = 1` (transmit straight to the driver) and `PACKET_LOSS = 1`
//!    (a refused TX frame is skipped, not a stuck slot);
//! 4. `PACKET_RX_RING` with `tpacket_req3` (block size/count, frame size/count,
//!    `tp_retire_blk_tov` ms), then `PACKET_TX_RING` (frame-based: "block transmit is
//!    not supported yet" for V3, so retire/priv/feature must be 0);
//! 5. one `mmap` of both rings: "the RX ring first, then the TX ring" back to back
//!    (packet_mmap.rst, "AF_PACKET TPACKET_V3 example" and `packet_mmap()`);
//! 6. `bind` to the interface with protocol `ETH_P_ALL`;
//! 7. with several lanes on one interface, `PACKET_FANOUT` in mode `PACKET_FANOUT_HASH`
//!    (flow-preserving: one flow always reaches the same socket); the first socket asks
//!    for a fresh group id (`PACKET_FANOUT_FLAG_UNIQUEID`), the others join it.

#[allow(unsafe_code)] // the kernel ABI structs read through raw pointers
pub mod abi;

use super::Errno;
use super::iface::{self, IfError, IfName};
use super::kick::PacketKick;
use super::ring::{MappedRing, Mapping};
use super::sys;
use abi::*;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

/// The shape of one ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingGeometry {
    /// Bytes per block (a multiple of the page size).
    pub block_size: u32,
    /// Blocks.
    pub block_nr: u32,
    /// Bytes per frame slot (a multiple of 16, at least `TPACKET3_HDRLEN`).
    pub frame_size: u32,
    /// Frame slots: `block_nr × block_size / frame_size`.
    pub frame_nr: u32,
}

impl RingGeometry {
    /// `block_nr` blocks of `block_size` bytes cut into `frame_size` slots.
    pub const fn new(block_size: u32, block_nr: u32, frame_size: u32) -> Self {
        let per_block = match block_size.checked_div(frame_size) {
            Some(n) => n,
            None => 0,
        };
        Self { block_size, block_nr, frame_size, frame_nr: per_block.saturating_mul(block_nr) }
    }

    /// Bytes of the ring.
    pub const fn bytes(&self) -> usize {
        self.block_size as usize * self.block_nr as usize
    }

    fn check(&self) -> Result<(), PacketError> {
        let page = super::mem::PAGE as u32;
        if self.block_size == 0 || !self.block_size.is_multiple_of(page) || self.block_nr == 0 {
            return Err(PacketError::BadGeometry("block size must be a non-zero multiple of 4096, blocks > 0"));
        }
        if self.frame_size < TPACKET3_HDRLEN as u32 || !self.frame_size.is_multiple_of(TPACKET_ALIGNMENT as u32) {
            return Err(PacketError::BadGeometry("frame size must be a multiple of 16 of at least 68 bytes"));
        }
        if self.frame_size > self.block_size || self.frame_nr != self.block_size / self.frame_size * self.block_nr {
            return Err(PacketError::BadGeometry("frame count must be blocks × frames per block"));
        }
        Ok(())
    }
}

/// Both rings of a socket: the RX window is bytes `0..rx.bytes()` of the mapping, the TX
/// window the next `tx.bytes()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketGeometry {
    /// RX ring (blocks of variable-size frames).
    pub rx: RingGeometry,
    /// TX ring (fixed frame slots).
    pub tx: RingGeometry,
}

/// Ring shapes and socket options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PacketConfig {
    /// The rings.
    pub geometry: PacketGeometry,
    /// RX: ms after which a partly filled block is handed over (`tp_retire_blk_tov`).
    pub retire_blk_tov_ms: u32,
}

impl Default for PacketConfig {
    /// RX: 512 blocks of 8 KiB (4 MiB, ~2000 full-size frames), retired after 1 ms;
    /// TX: 8 blocks of 128 KiB cut into 512 slots of 2048 bytes.
    ///
    /// Many small blocks rather than a few big ones: a block is handed over when full *or*
    /// after 1 ms, so at a low rate every block carries only a millisecond of frames, and
    /// the ring rides out a worker that is off its CPU for as many milliseconds as it has
    /// blocks (32 blocks froze the ring on a loaded 2-CPU machine at 5 000 frames/s).
    fn default() -> Self {
        Self {
            geometry: PacketGeometry {
                rx: RingGeometry::new(8 << 10, 512, 2048),
                tx: RingGeometry::new(128 << 10, 8, 2048),
            },
            retire_blk_tov_ms: 1,
        }
    }
}

impl PacketConfig {
    /// The default, or for an interface whose frames are longer than its 2 048-byte TX slots
    /// take (`max_frame`: the MTU and the link header; a jumbo frame): RX blocks of 32 KiB
    /// (128 of them: 4 MiB, as the default; a block holds three 9 000-byte frames), TX slots
    /// of 16 KiB (32 blocks of 128 KiB: 256 slots). An RX block must hold a whole frame, or
    /// the kernel cuts it short.
    pub fn for_max_frame(max_frame: usize) -> Self {
        let d = Self::default();
        if max_frame + TPACKET3_HDRLEN <= d.geometry.tx.frame_size as usize {
            return d;
        }
        Self::with_geometry(PacketGeometry {
            rx: RingGeometry::new(32 << 10, 128, 2048),
            tx: RingGeometry::new(128 << 10, 32, 16 << 10),
        })
    }

    /// The default with other rings.
    pub fn with_geometry(geometry: PacketGeometry) -> Self {
        Self { geometry, ..Self::default() }
    }
}

/// The system call that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketCall {
    /// `socket(AF_PACKET)`.
    Socket,
    /// `PACKET_VERSION`.
    Version,
    /// `PACKET_IGNORE_OUTGOING`.
    IgnoreOutgoing,
    /// `PACKET_QDISC_BYPASS`.
    QdiscBypass,
    /// `PACKET_LOSS`.
    Loss,
    /// `PACKET_RX_RING`.
    RxRing,
    /// `PACKET_TX_RING`.
    TxRing,
    /// `mmap` of the rings.
    Mmap,
    /// `bind`.
    Bind,
    /// `PACKET_FANOUT`.
    Fanout,
    /// `PACKET_STATISTICS`.
    Statistics,
}

impl fmt::Display for PacketCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PacketCall::Socket => "socket",
            PacketCall::Version => "PACKET_VERSION (TPACKET_V3)",
            PacketCall::IgnoreOutgoing => "PACKET_IGNORE_OUTGOING",
            PacketCall::QdiscBypass => "PACKET_QDISC_BYPASS",
            PacketCall::Loss => "PACKET_LOSS",
            PacketCall::RxRing => "RX ring setup (PACKET_RX_RING)",
            PacketCall::TxRing => "TX ring setup (PACKET_TX_RING)",
            PacketCall::Mmap => "mmap of the rings",
            PacketCall::Bind => "bind",
            PacketCall::Fanout => "fanout (PACKET_FANOUT)",
            PacketCall::Statistics => "PACKET_STATISTICS",
        })
    }
}

/// Why a packet socket could not be opened or read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PacketError {
    /// Ring sizes the kernel would refuse.
    BadGeometry(&'static str),
    /// Zero lanes.
    NoLanes,
    /// The interface is missing or unreadable.
    Interface(IfError),
    /// A system call failed.
    Sys {
        /// The call.
        call: PacketCall,
        /// The interface.
        ifname: IfName,
        /// What the kernel said.
        errno: Errno,
    },
}

impl PacketError {
    /// What the user can do about it, where that is known.
    pub fn hint(&self) -> Option<&'static str> {
        let PacketError::Sys { call, errno, .. } = self else {
            return None;
        };
        Some(match (call, errno.raw()) {
            (_, libc::EPERM | libc::EACCES) => "AF_PACKET needs root (CAP_NET_RAW)",
            (PacketCall::Socket, libc::EAFNOSUPPORT) => "this kernel has no AF_PACKET (CONFIG_PACKET)",
            (PacketCall::IgnoreOutgoing, libc::ENOPROTOOPT) => "kernel too old (needs Linux >= 4.20)",
            (PacketCall::RxRing | PacketCall::TxRing | PacketCall::Mmap, libc::ENOMEM) => {
                "not enough memory for the rings: use fewer or smaller blocks"
            }
            (PacketCall::Bind, libc::ENETDOWN) => "the interface is down (`ip link set dev IF up`)",
            (PacketCall::Fanout, libc::EINVAL) => "fanout group in use with another mode",
            _ => return None,
        })
    }
}

impl fmt::Display for PacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PacketError::BadGeometry(why) => write!(f, "AF_PACKET ring geometry: {why}"),
            PacketError::NoLanes => f.write_str("AF_PACKET: zero lanes asked for"),
            PacketError::Interface(e) => write!(f, "AF_PACKET: {e}"),
            PacketError::Sys { call, ifname, errno } => {
                write!(f, "AF_PACKET {call} on {ifname}: {errno}")?;
                if let Some(h) = self.hint() {
                    write!(f, ": {h}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for PacketError {}

/// A fanout group: which one, and whether this socket creates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fanout {
    /// Create a new hash-fanout group with an id the kernel picks.
    NewGroup,
    /// Join this hash-fanout group.
    Join(u16),
}

/// The two ring windows of a socket, for a driver to own.
#[derive(Debug)]
pub struct PacketRings {
    /// The RX ring (blocks).
    pub rx: MappedRing,
    /// The TX ring (frame slots).
    pub tx: MappedRing,
}

/// Statistics of a socket, cumulative since it was opened (the kernel resets its
/// counters on every read; the socket adds them up).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PacketStats {
    /// Frames seen (delivered to the ring + dropped).
    pub packets: u64,
    /// Frames dropped because the ring was full.
    pub drops: u64,
    /// Times the ring froze (all blocks in user space).
    pub freezes: u64,
}

#[derive(Debug, Default)]
struct Totals {
    packets: AtomicU64,
    drops: AtomicU64,
    freezes: AtomicU64,
}

/// An open, bound `TPACKET_V3` socket (see the module docs).
#[derive(Debug)]
pub struct PacketSocket {
    fd: Arc<OwnedFd>,
    ifname: IfName,
    ifindex: u32,
    rings: Option<PacketRings>,
    geometry: PacketGeometry,
    fanout_group: Option<u16>,
    totals: Totals,
}

impl PacketSocket {
    /// Opens a socket on `ifname` with `cfg`'s rings, in fanout group `fanout` if any.
    pub fn open(ifname: &str, cfg: &PacketConfig, fanout: Option<Fanout>) -> Result<Self, PacketError> {
        let g = cfg.geometry;
        g.rx.check()?;
        g.tx.check()?;
        let name = iface::if_name(ifname).map_err(PacketError::Interface)?;
        let ifindex = iface::ifindex(ifname).map_err(PacketError::Interface)?;
        let err = |call: PacketCall| {
            let ifname = name.clone();
            move |errno| PacketError::Sys { call, ifname, errno }
        };

        let fd = sys::socket(libc::AF_PACKET, libc::SOCK_RAW, 0).map_err(err(PacketCall::Socket))?;
        let s = fd.as_fd();
        sys::setsockopt_int(s, SOL_PACKET, PACKET_VERSION, TPACKET_V3).map_err(err(PacketCall::Version))?;
        sys::setsockopt_int(s, SOL_PACKET, PACKET_IGNORE_OUTGOING, 1).map_err(err(PacketCall::IgnoreOutgoing))?;
        sys::setsockopt_int(s, SOL_PACKET, PACKET_QDISC_BYPASS, 1).map_err(err(PacketCall::QdiscBypass))?;
        // A refused TX frame must not stop the ring at its slot (drivers::tpacket skips
        // and counts WRONG_FORMAT slots).
        sys::setsockopt_int(s, SOL_PACKET, PACKET_LOSS, 1).map_err(err(PacketCall::Loss))?;
        let rx = TpacketReq3 {
            tp_block_size: g.rx.block_size,
            tp_block_nr: g.rx.block_nr,
            tp_frame_size: g.rx.frame_size,
            tp_frame_nr: g.rx.frame_nr,
            tp_retire_blk_tov: cfg.retire_blk_tov_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        sys::setsockopt(s, SOL_PACKET, PACKET_RX_RING, &rx).map_err(err(PacketCall::RxRing))?;
        let tx = TpacketReq3 {
            tp_block_size: g.tx.block_size,
            tp_block_nr: g.tx.block_nr,
            tp_frame_size: g.tx.frame_size,
            tp_frame_nr: g.tx.frame_nr,
            ..Default::default()
        };
        sys::setsockopt(s, SOL_PACKET, PACKET_TX_RING, &tx).map_err(err(PacketCall::TxRing))?;
        let (rx_len, tx_len) = (g.rx.bytes(), g.tx.bytes());
        let map = Mapping::map(s, rx_len + tx_len, 0).map_err(err(PacketCall::Mmap))?;
        let windows = MappedRing::window(&map, 0, rx_len).zip(MappedRing::window(&map, rx_len, tx_len));
        let Some((rx_ring, tx_ring)) = windows else {
            return Err(PacketError::BadGeometry("ring windows outside the mapping"));
        };

        let addr = libc::sockaddr_ll {
            sll_family: libc::AF_PACKET as u16,
            sll_protocol: ETH_P_ALL.to_be(),
            sll_ifindex: ifindex as i32,
            sll_hatype: 0,
            sll_pkttype: 0,
            sll_halen: 0,
            sll_addr: [0; 8],
        };
        bind(s, &addr).map_err(err(PacketCall::Bind))?;

        let fanout_group = match fanout {
            None => None,
            Some(f) => Some(join_fanout(s, f).map_err(err(PacketCall::Fanout))?),
        };
        Ok(Self {
            fd: Arc::new(fd),
            ifname: name,
            ifindex,
            rings: Some(PacketRings { rx: rx_ring, tx: tx_ring }),
            geometry: g,
            fanout_group,
            totals: Totals::default(),
        })
    }

    /// `lanes` sockets on `ifname` sharing the interface's traffic by flow hash (one
    /// fanout group); a single lane gets no fanout.
    pub fn open_lanes(ifname: &str, lanes: usize, cfg: &PacketConfig) -> Result<Vec<Self>, PacketError> {
        if lanes == 0 {
            return Err(PacketError::NoLanes);
        }
        if lanes == 1 {
            return Ok(vec![Self::open(ifname, cfg, None)?]);
        }
        let first = Self::open(ifname, cfg, Some(Fanout::NewGroup))?;
        let group = first.fanout_group.unwrap_or_default();
        let mut all = Vec::with_capacity(lanes);
        all.push(first);
        for _ in 1..lanes {
            all.push(Self::open(ifname, cfg, Some(Fanout::Join(group)))?);
        }
        Ok(all)
    }

    /// The two ring windows, once: a driver takes them and owns them from then on.
    pub fn take_rings(&mut self) -> Option<PacketRings> {
        self.rings.take()
    }

    /// The ring windows while nobody has taken them.
    pub fn rings(&self) -> Option<&PacketRings> {
        self.rings.as_ref()
    }

    /// The ring shapes.
    pub fn geometry(&self) -> PacketGeometry {
        self.geometry
    }

    /// The fanout group it belongs to.
    pub fn fanout_group(&self) -> Option<u16> {
        self.fanout_group
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Its doorbell (shares the descriptor; usable from any thread).
    pub fn kick(&self) -> PacketKick {
        PacketKick { fd: Arc::clone(&self.fd) }
    }

    /// `PACKET_STATISTICS`, added up since the socket was opened.
    pub fn stats(&self) -> Result<PacketStats, PacketError> {
        let mut st = TpacketStatsV3::default();
        sys::getsockopt(self.fd.as_fd(), SOL_PACKET, PACKET_STATISTICS, &mut st).map_err(|errno| PacketError::Sys {
            call: PacketCall::Statistics,
            ifname: self.ifname.clone(),
            errno,
        })?;
        let t = &self.totals;
        Ok(PacketStats {
            packets: t.packets.fetch_add(st.tp_packets.into(), Relaxed) + u64::from(st.tp_packets),
            drops: t.drops.fetch_add(st.tp_drops.into(), Relaxed) + u64::from(st.tp_drops),
            freezes: t.freezes.fetch_add(st.tp_freeze_q_cnt.into(), Relaxed) + u64::from(st.tp_freeze_q_cnt),
        })
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Joins (or creates) a hash-fanout group; returns its id.
fn join_fanout(s: BorrowedFd<'_>, f: Fanout) -> Result<u16, Errno> {
    let val = match f {
        Fanout::NewGroup => (PACKET_FANOUT_HASH | PACKET_FANOUT_FLAG_UNIQUEID) << 16,
        Fanout::Join(id) => u32::from(id) | (PACKET_FANOUT_HASH << 16),
    };
    sys::setsockopt(s, SOL_PACKET, PACKET_FANOUT, &val)?;
    // Reads back `id | type << 16 | flags << 24`.
    let mut got = 0u32;
    sys::getsockopt(s, SOL_PACKET, PACKET_FANOUT, &mut got)?;
    Ok(got as u16)
}

fn bind(fd: BorrowedFd<'_>, addr: &libc::sockaddr_ll) -> Result<(), Errno> {
    // SAFETY: `addr` is a valid sockaddr_ll of the length passed, read during the call.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 { Err(Errno::last()) } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_geometry_is_valid() {
        let g = PacketConfig::default().geometry;
        g.rx.check().unwrap();
        g.tx.check().unwrap();
        assert_eq!(g.rx.frame_nr, 32 * 64);
        assert_eq!(g.tx.frame_nr, 512);
        assert_eq!(g.rx.bytes(), 4 << 20);
    }

    /// Frames up to 2 048 bytes with their header keep the default rings; a 9 000-byte MTU's
    /// get RX blocks that hold whole frames and TX slots they fit in, as much ring memory.
    #[test]
    fn jumbo_frames_get_rings_that_hold_them() {
        assert_eq!(PacketConfig::for_max_frame(1518), PacketConfig::default());
        let g = PacketConfig::for_max_frame(9018).geometry;
        g.rx.check().unwrap();
        g.tx.check().unwrap();
        assert!(g.rx.block_size as usize >= 3 * (9018 + TPACKET3_HDRLEN) + 64);
        assert!(g.tx.frame_size as usize >= 9018 + TPACKET3_HDRLEN);
        assert_eq!((g.rx.bytes(), g.tx.frame_nr), (4 << 20, 256));
    }

    #[test]
    fn bad_geometry_is_refused_before_any_system_call() {
        let bad = [
            RingGeometry::new(1000, 4, 2048),
            RingGeometry::new(4096, 0, 2048),
            RingGeometry::new(4096, 4, 2040),
            RingGeometry::new(4096, 4, 64),
            RingGeometry { frame_nr: 3, ..RingGeometry::new(4096, 4, 2048) },
        ];
        for g in bad {
            let cfg = PacketConfig::with_geometry(PacketGeometry { rx: g, tx: RingGeometry::new(4096, 1, 2048) });
            assert!(matches!(PacketSocket::open("lo", &cfg, None), Err(PacketError::BadGeometry(_))), "{g:?}");
        }
        assert_eq!(PacketSocket::open_lanes("lo", 0, &PacketConfig::default()).unwrap_err(), PacketError::NoLanes);
    }

    #[test]
    fn errors_name_the_call() {
        let e = PacketError::Sys {
            call: PacketCall::Socket,
            ifname: IfName::try_from("eth0").unwrap(),
            errno: Errno(libc::EPERM),
        };
        assert_eq!(
            e.to_string(),
            "AF_PACKET socket on eth0: EPERM (Operation not permitted): AF_PACKET needs root (CAP_NET_RAW)"
        );
    }
}
