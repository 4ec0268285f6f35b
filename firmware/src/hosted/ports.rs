//! The hosted build's ports: 2 to `PORTS` Linux interfaces, each with one queue pair per
//! lane, over AF_XDP (an XDP redirect program + one socket per queue; the lane's pool is the
//! UMEM all its sockets share, so a frame is forwarded without a copy in user space) or over
//! `AF_PACKET` `TPACKET_V3` rings (one fanout socket per lane and interface; the driver
//! copies frames in and out of the pool). The ring protocols are `cadence_drivers::xsk`
//! and `cadence_drivers::tpacket`; the sockets, mappings and the BPF programs are
//! `cadence_platform::hosted`.
//!
//! Nothing reaches the host's stack behind the chain's back: over AF_XDP a frame on a
//! receive queue no lane owns (a NIC with more queues than `lanes`) is dropped and counted
//! by the XDP program (`p{i}_xdp_unowned`, with a warning at start); over `AF_PACKET`, whose
//! sockets only tap the traffic, a tcx ingress program drops every frame before the stack
//! unless `--packet-stack share` asks for the old behaviour (both kernel and dataplane get
//! each frame).

use std::fmt::{self, Write};
use std::sync::{Arc, Mutex};

use cadence_core::buf::{BUF_SIZE, Batch, Pool};
use cadence_core::nic::{Port, PortStats, RssError, RxQueue, RxStats, TxQueue, TxStats, WakeAddr};
use cadence_drivers::tpacket::{RxGeometry, TpacketRx, TpacketTx, TxGeometry};
use cadence_drivers::xsk::{self, RingWindow, XskRx, XskTx};
use cadence_firmware::config::BootConfig;
use cadence_firmware::forward::FwdPort;
use cadence_platform::hosted::bpf::{AttachMode, Attached, IngressDrop, XdpProgram};
use cadence_platform::hosted::clock::HostClock;
use cadence_platform::hosted::iface::{self, Interface};
use cadence_platform::hosted::kick::{PacketKick, XskKick};
use cadence_platform::hosted::mem::{self, POOL_PHYS_BASE};
use cadence_platform::hosted::packet::{PacketConfig, PacketSocket, PacketStats};
use cadence_platform::hosted::ring::MappedRing;
use cadence_platform::hosted::sleep::Arrival;
use cadence_platform::hosted::xdp::{self, BindMode, DataPath, Umem, UmemRegion, XskConfig, XskSocket, XskStats};

use super::args::{Args, Io, PacketStack, XdpMode};
use super::machine::Extra;

/// Ethernet header + a VLAN tag on top of the MTU: the longest frame a port sends (the one
/// figure the image's NIC bring-up uses too).
const L2_OVERHEAD: usize = cadence_core::nf::config::ChainSpec::L2_OVERHEAD;

/// A receive queue of either kind.
#[derive(Debug)]
pub enum HostedRx {
    Xdp(XskRx<MappedRing, XskKick>),
    Packet(TpacketRx<MappedRing>),
}

/// A transmit queue of either kind.
#[derive(Debug)]
pub enum HostedTx {
    Xdp(XskTx<MappedRing, XskKick>),
    Packet(TpacketTx<MappedRing, PacketKick>),
}

/// What keeps a port's kernel objects alive (the attached program; the sockets live in
/// [`SocketStats`]).
#[derive(Debug)]
enum Keep {
    Xdp { _program: Arc<XdpProgram> },
    Packet { _stack: Option<IngressDrop> },
}

/// One interface, as the forwarding run drives it.
#[derive(Debug)]
pub struct HostedPort {
    iface: Interface,
    ring: usize,
    queues: Vec<(HostedRx, HostedTx)>,
    lanes: usize,
    keep: Keep,
    detail: String,
}

impl HostedPort {
    /// The `kind=` of the `@nic` line.
    pub fn kind(&self) -> &'static str {
        match self.keep {
            Keep::Xdp { .. } => "af_xdp",
            Keep::Packet { .. } => "af_packet",
        }
    }

    /// The interface name.
    pub fn ifname(&self) -> &str {
        &self.iface.name
    }

    /// The interface index when it was opened.
    pub fn ifindex(&self) -> u32 {
        self.iface.index
    }

    /// Queue pairs (lanes).
    pub fn queues(&self) -> usize {
        self.lanes
    }

    /// Entries per ring.
    pub fn ring_size(&self) -> usize {
        self.ring
    }

    /// More `@nic` keys (` key=value`).
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// The interface's link speed, if it reports one.
    pub fn speed_mbps(&self) -> Option<u32> {
        self.iface.speed_mbps
    }
}

impl Port for HostedPort {
    fn mac(&self) -> [u8; 6] {
        self.iface.mac
    }
    fn rx_queues(&self) -> usize {
        self.lanes
    }
    fn tx_queues(&self) -> usize {
        self.lanes
    }
    fn set_rss_table(&mut self, _table: &[u16]) -> Result<(), RssError> {
        // The kernel (or the NIC under it) steers frames to queues; Cadence does not own
        // that table here.
        Err(RssError::Unsupported)
    }
    fn stats(&self) -> PortStats {
        PortStats::default()
    }
}

impl FwdPort for HostedPort {
    type Rx = HostedRx;
    type Tx = HostedTx;

    fn take_queues(&mut self) -> Vec<(HostedRx, HostedTx)> {
        std::mem::take(&mut self.queues)
    }

    fn fill(rx: &mut HostedRx, pool: &mut Pool<'static>) -> usize {
        match rx {
            HostedRx::Xdp(q) => q.fill(pool),
            HostedRx::Packet(_) => 0,
        }
    }

    fn rss_table(&self) -> Option<Vec<u16>> {
        None
    }

    fn ring_entries(&self) -> Option<u32> {
        u32::try_from(self.ring).ok()
    }
}

impl RxQueue for HostedRx {
    #[inline]
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        match self {
            HostedRx::Xdp(q) => q.rx_burst(pool, batch),
            HostedRx::Packet(q) => q.rx_burst(pool, batch),
        }
    }
    fn rx_stats(&self) -> RxStats {
        match self {
            HostedRx::Xdp(q) => q.rx_stats(),
            HostedRx::Packet(q) => q.rx_stats(),
        }
    }
    fn wake_address(&self) -> Option<WakeAddr> {
        match self {
            HostedRx::Xdp(q) => q.wake_address(),
            HostedRx::Packet(q) => q.wake_address(),
        }
    }
    fn pending(&self) -> Option<usize> {
        match self {
            HostedRx::Xdp(q) => q.pending(),
            HostedRx::Packet(q) => q.pending(),
        }
    }
    #[inline]
    fn stamps_arrival(&self) -> bool {
        match self {
            HostedRx::Xdp(q) => q.stamps_arrival(),
            HostedRx::Packet(q) => q.stamps_arrival(),
        }
    }
}

impl TxQueue for HostedTx {
    #[inline]
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        match self {
            HostedTx::Xdp(q) => q.tx_burst(pool, batch),
            HostedTx::Packet(q) => q.tx_burst(pool, batch),
        }
    }
    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        match self {
            HostedTx::Xdp(q) => q.reclaim(pool),
            HostedTx::Packet(q) => q.reclaim(pool),
        }
    }
    fn in_flight(&self) -> usize {
        match self {
            HostedTx::Xdp(q) => q.in_flight(),
            HostedTx::Packet(q) => q.in_flight(),
        }
    }
    fn tx_stats(&self) -> TxStats {
        match self {
            HostedTx::Xdp(q) => q.tx_stats(),
            HostedTx::Packet(q) => q.tx_stats(),
        }
    }
}

/// The ports, the lanes' pools, and what to say about them.
#[derive(Debug)]
pub struct Opened {
    pub ports: Vec<HostedPort>,
    pub pools: Vec<Pool<'static>>,
    /// Lines to print (fallbacks, modes).
    pub notes: Vec<String>,
    /// Kernel socket statistics, for the stats lines.
    stats: SocketStats,
    /// Every receive queue's arrivals, for the workers' sleepers.
    pub arrivals: Vec<Arrival>,
}

impl Opened {
    /// The kernel-side counters of the ports' sockets, for the stats lines.
    pub fn counters(&self) -> SocketStats {
        self.stats.clone()
    }
}

/// Every socket of every port, to read the kernel's statistics for the stats lines (the
/// sockets live as long as this: the machine keeps it for the whole run).
#[derive(Debug, Clone, Default)]
pub struct SocketStats {
    xdp: Vec<(usize, Arc<Mutex<XskSocket>>)>,
    packet: Vec<(usize, Arc<Mutex<PacketSocket>>)>,
    /// Per port, its XDP program (the frames no lane owns).
    programs: Vec<Arc<XdpProgram>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Extra for SocketStats {
    fn write(&self, out: &mut dyn Write) -> fmt::Result {
        let mut x = [XskStats::default(); 2];
        for (port, sock) in &self.xdp {
            if let (Some(a), Ok(s)) = (x.get_mut(*port), lock(sock).stats()) {
                a.rx_dropped += s.rx_dropped;
                a.rx_ring_full += s.rx_ring_full;
                a.rx_fill_ring_empty_descs += s.rx_fill_ring_empty_descs;
                a.rx_invalid_descs += s.rx_invalid_descs;
                a.tx_invalid_descs += s.tx_invalid_descs;
            }
        }
        let mut p = [PacketStats::default(); 2];
        for (port, sock) in &self.packet {
            if let (Some(a), Ok(s)) = (p.get_mut(*port), lock(sock).stats()) {
                a.drops += s.drops;
                a.freezes += s.freezes;
            }
        }
        for i in 0..2 {
            if !self.xdp.is_empty() {
                write!(
                    out,
                    " p{i}_xdp_rx_dropped={} p{i}_xdp_rx_ring_full={} p{i}_xdp_fill_empty={} p{i}_xdp_rx_invalid={} \
                     p{i}_xdp_tx_invalid={}",
                    x[i].rx_dropped,
                    x[i].rx_ring_full,
                    x[i].rx_fill_ring_empty_descs,
                    x[i].rx_invalid_descs,
                    x[i].tx_invalid_descs
                )?;
                if let Some(Ok(n)) = self.programs.get(i).map(|p| p.unowned()) {
                    write!(out, " p{i}_xdp_unowned={n}")?;
                }
            }
            if !self.packet.is_empty() {
                write!(out, " p{i}_packet_drops={} p{i}_packet_freezes={}", p[i].drops, p[i].freezes)?;
            }
        }
        Ok(())
    }
}

/// Why the ports could not be opened.
#[derive(Debug)]
pub struct OpenError(String);

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Opens every port with `cfg.lanes` queue pairs, over the I/O the arguments ask for.
pub fn open(args: &Args, cfg: &BootConfig, clock: &HostClock) -> Result<Opened, OpenError> {
    let mut ifaces = Vec::new();
    for name in &args.ports {
        let i = iface::query(name).map_err(|e| OpenError(format!("interface {name}: {e}")))?;
        if (i.rx_queues as usize) < cfg.lanes || (i.tx_queues as usize) < cfg.lanes {
            return Err(OpenError(format!(
                "interface {name} has {} RX / {} TX queues, lanes={} needs one pair per lane",
                i.rx_queues, i.tx_queues, cfg.lanes
            )));
        }
        ifaces.push(i);
    }
    let mut notes = Vec::new();
    let mtus: Vec<(&str, u32)> = ifaces.iter().map(|i| (i.name.as_str(), i.mtu)).collect();
    let multi = xdp_multi_buffer(&mtus);
    match args.io {
        Io::AfPacket => open_packet(args, cfg, clock, ifaces, notes),
        Io::AfXdp => open_xdp(args, cfg, clock, &ifaces, multi, notes),
        Io::Auto => match open_xdp(args, cfg, clock, &ifaces, multi, Vec::new()) {
            Ok(o) => Ok(o),
            Err(e) => {
                notes.push(format!("warning: AF_XDP unavailable ({e}); falling back to AF_PACKET"));
                open_packet(args, cfg, clock, ifaces, notes)
            }
        },
    }
}

/// What interfaces of these MTUs (`(name, mtu)`) ask of the I/O: AF_XDP sockets bound for
/// frames over several chunks (`XDP_USE_SG`, Linux ≥ 6.6) when a frame (with the link header
/// and a tag) is longer than one chunk takes after the kernel's 256 bytes of headroom
/// ([`MAX_ONE_CHUNK_MTU`]); with it, a line naming the interface. `AF_PACKET` receives such
/// frames over several buffers by itself.
fn xdp_multi_buffer(mtus: &[(&str, u32)]) -> Option<String> {
    let &(name, mtu) = mtus.iter().find(|(_, m)| *m as usize > MAX_ONE_CHUNK_MTU)?;
    Some(format!(
        "hosted: {name} has MTU {mtu}: over AF_XDP, frames span several chunks (XDP_USE_SG, Linux 6.6 or later; \
         one chunk takes an MTU up to {MAX_ONE_CHUNK_MTU})"
    ))
}

/// The largest MTU whose frames (with the link header and a tag) fit one AF_XDP chunk after
/// the kernel's headroom (`XDP_PACKET_HEADROOM`).
const MAX_ONE_CHUNK_MTU: usize = BUF_SIZE - xdp::abi::XDP_PACKET_HEADROOM - L2_OVERHEAD;

fn pool_for(args: &Args, cfg: &BootConfig) -> Result<(Pool<'static>, Option<UmemRegion>, String), OpenError> {
    let m = mem::packet_memory(cfg.pool * BUF_SIZE, args.huge)
        .map_err(|e| OpenError(format!("packet memory ({} buffers): {e}", cfg.pool)))?;
    let pages = m.pages().to_string();
    let umem = UmemRegion::of(&m);
    let pool =
        Pool::try_new(m.into_slice(), POOL_PHYS_BASE, cfg.pool).map_err(|e| OpenError(format!("packet pool: {e}")))?;
    Ok((pool, Some(umem), pages))
}

fn window(ring: MappedRing, o: xdp::RingOffsets, size: u32) -> RingWindow<MappedRing> {
    RingWindow {
        window: ring,
        offsets: xsk::RingOffsets { producer: o.producer, consumer: o.consumer, flags: o.flags, desc: o.desc },
        size,
    }
}

/// Opens every port over AF_XDP; with `multi` (a jumbo MTU's line, [`xdp_multi_buffer`]) the
/// program is frags-aware and the sockets take frames over several chunks.
fn open_xdp(
    args: &Args,
    cfg: &BootConfig,
    clock: &HostClock,
    ifaces: &[Interface],
    multi: Option<String>,
    mut notes: Vec<String>,
) -> Result<Opened, OpenError> {
    let multi_buffer = multi.is_some();
    notes.extend(multi);
    let lanes = cfg.lanes;
    let ring = args.xdp_ring as usize;
    // A lane's pool feeds a socket per port, each holding up to a fill ring of posted
    // buffers and a TX ring of frames in flight: with less, the kernel runs short of fill
    // entries.
    let rings = 2 * args.ports.len();
    if rings * ring > cfg.pool {
        notes.push(format!(
            "warning: pool={} buffers is below {rings} x {ring} ({} sockets' fill and TX rings): \
             raise pool= or lower --xdp-ring",
            cfg.pool,
            args.ports.len()
        ));
    }
    let mode = match args.xdp_mode {
        XdpMode::Auto => BindMode::Auto,
        XdpMode::Copy => BindMode::Copy,
        XdpMode::ZeroCopy => BindMode::ZeroCopy,
    };
    let xcfg = XskConfig::with_ring_size(ring as u32).mode(mode).need_wakeup(true).multi_buffer(multi_buffer);
    // A bind the kernel refuses for want of XDP_USE_SG says so.
    let sg_hint = |e: String| {
        if multi_buffer { format!("{e} (frames over several chunks need XDP_USE_SG: Linux 6.6 or later)") } else { e }
    };
    // The XDP program's arrival stamps (CLOCK_MONOTONIC) in worker ticks, for every queue.
    let arrival_map = clock.monotonic_map();
    let mut programs = Vec::new();
    for (port, i) in ifaces.iter().enumerate() {
        let p = XdpProgram::attach_frags(&i.name, lanes as u32, AttachMode::Auto, multi_buffer)
            .map_err(|e| OpenError(format!("XDP program on {}: {e}", i.name)))?;
        programs.push(Arc::new(p));
        if i.rx_queues as usize > lanes {
            notes.push(format!(
                "warning: {} has {} RX queues and lanes={lanes}: frames the NIC puts on queues {lanes}..{} are dropped \
                 and counted (p{port}_xdp_unowned), not forwarded; steer them with `ethtool -L {} combined {lanes}` \
                 (or RSS: `ethtool -X {} equal {lanes}`), or give lanes={}",
                i.name,
                i.rx_queues,
                i.rx_queues - 1,
                i.name,
                i.name,
                i.rx_queues
            ));
        }
    }
    let mut pools = Vec::new();
    let mut paths = vec![DataPath::Copy; ifaces.len()];
    let mut queues: Vec<Vec<(HostedRx, HostedTx)>> = ifaces.iter().map(|_| Vec::new()).collect();
    let mut stats = SocketStats { programs: programs.clone(), ..SocketStats::default() };
    let mut arrivals = Vec::new();
    let mut pages = String::new();
    for k in 0..lanes {
        let (pool, umem, p) = pool_for(args, cfg)?;
        pages = p;
        let umem = umem.ok_or_else(|| OpenError("no UMEM".into()))?;
        // Queue `k` of the first port registers the lane's UMEM; queue `k` of every other
        // port shares it (one pool per lane).
        let first = ifaces.first().ok_or_else(|| OpenError("no port".into()))?;
        let s0 = XskSocket::open(&first.name, k as u32, Umem::Register(umem), &xcfg)
            .map_err(|e| OpenError(sg_hint(e.to_string())))?;
        let mut socks = Vec::with_capacity(ifaces.len());
        for i in ifaces.iter().skip(1) {
            socks.push(
                XskSocket::open(&i.name, k as u32, Umem::SharedWith(&s0), &xcfg)
                    .map_err(|e| OpenError(e.to_string()))?,
            );
        }
        socks.insert(0, s0);
        for (port, mut s) in socks.into_iter().enumerate() {
            if args.busy_poll > 0 {
                s.busy_poll(args.busy_poll).map_err(|e| OpenError(e.to_string()))?;
            }
            let rings = s.take_rings().ok_or_else(|| OpenError("AF_XDP rings already taken".into()))?;
            let (o, z) = (s.offsets(), s.sizes());
            let dr = xsk::XskRings {
                fill: window(rings.fill, o.fill, z.fill),
                completion: window(rings.comp, o.comp, z.comp),
                rx: window(rings.rx, o.rx, z.rx),
                tx: window(rings.tx, o.tx, z.tx),
            };
            let dcfg = xsk::XskConfig::default()
                .with_always_kick_tx(s.data_path() == DataPath::Copy || !s.need_wakeup())
                .with_always_kick_rx(args.busy_poll > 0)
                .with_max_tx_frame(ifaces[port].mtu as usize + L2_OVERHEAD)
                .with_multi_buffer(multi_buffer)
                .with_arrival(Some(arrival_map));
            let (rx, tx) = xsk::try_new_queues(dr, s.kick(), &pool, &dcfg)
                .map_err(|e| OpenError(format!("AF_XDP queue {k} of {}: {e}", ifaces[port].name)))?;
            if let Some(a) = rx.wake_address() {
                arrivals.push(s.kick().arrival(a.get()..a.get() + 4));
            }
            let (Some(program), Some(path), Some(q), Some(iface)) =
                (programs.get(port), paths.get_mut(port), queues.get_mut(port), ifaces.get(port))
            else {
                return Err(OpenError(format!("port {port}: no XDP program")));
            };
            program.register(k as u32, &s).map_err(|e| OpenError(format!("XSKMAP of {}: {e}", iface.name)))?;
            *path = s.data_path();
            q.push((HostedRx::Xdp(rx), HostedTx::Xdp(tx)));
            stats.xdp.push((port, Arc::new(Mutex::new(s))));
        }
        pools.push(pool);
    }
    let mut ports = Vec::new();
    for (((iface, program), q), path) in ifaces.iter().cloned().zip(programs).zip(queues).zip(paths) {
        let path = match path {
            DataPath::ZeroCopy => "zerocopy",
            DataPath::Copy => "copy",
        };
        let attached = match program.attached() {
            Attached::Driver => "native",
            Attached::Skb => "generic",
        };
        let detail =
            format!(" iface={} xdp={attached} data_path={path} memory={}", iface.name, pages.replace(' ', "_"));
        let busy =
            if args.busy_poll > 0 { format!(", busy polling (budget {})", args.busy_poll) } else { String::new() };
        notes.push(format!(
            "hosted: {} AF_XDP, XDP program {attached}, {path} mode, {lanes} queue(s) of {ring} entries{busy}",
            iface.name
        ));
        ports.push(HostedPort { iface, ring, queues: q, lanes, keep: Keep::Xdp { _program: program }, detail });
    }
    Ok(Opened { ports, pools, notes, stats, arrivals })
}

fn open_packet(
    args: &Args,
    cfg: &BootConfig,
    clock: &HostClock,
    ifaces: Vec<Interface>,
    mut notes: Vec<String>,
) -> Result<Opened, OpenError> {
    let lanes = cfg.lanes;
    // Rings for the longest frame an interface carries (jumbo frames: larger blocks and slots).
    let longest = ifaces.iter().map(|i| i.mtu as usize + L2_OVERHEAD).max().unwrap_or(0);
    let pcfg = PacketConfig::for_max_frame(longest);
    // The rings' arrival times (CLOCK_REALTIME) in worker ticks, for every queue.
    let arrival_map = clock.realtime_map();
    let mut pools = Vec::new();
    let mut pages = String::new();
    for _ in 0..lanes {
        let (pool, _, p) = pool_for(args, cfg)?;
        pages = p;
        pools.push(pool);
    }
    let mut stats = SocketStats::default();
    let mut arrivals = Vec::new();
    let mut ports = Vec::new();
    for (port, iface) in ifaces.into_iter().enumerate() {
        let stack = match args.packet_stack {
            PacketStack::Drop => {
                let d = IngressDrop::attach(&iface.name)
                    .map_err(|e| OpenError(format!("keeping {}'s frames from the kernel's stack: {e}", iface.name)))?;
                notes.push(format!(
                    "hosted: {}: the kernel's stack gets none of its frames (tcx ingress drop; --packet-stack share \
                     gives it a copy of each)",
                    iface.name
                ));
                Some(d)
            }
            PacketStack::Share => {
                notes.push(format!(
                    "warning: {}: --packet-stack share: the kernel's stack gets every frame the dataplane reads too \
                     (the host may answer, route or deliver traffic the chain filters)",
                    iface.name
                ));
                None
            }
        };
        let socks = PacketSocket::open_lanes(&iface.name, lanes, &pcfg).map_err(|e| OpenError(e.to_string()))?;
        let mut queues = Vec::new();
        let mut ring = 0;
        for mut s in socks {
            let g = s.geometry();
            let rings = s.take_rings().ok_or_else(|| OpenError("AF_PACKET rings already taken".into()))?;
            arrivals.push(s.kick().arrival(rings.rx.addresses()));
            let rx = TpacketRx::try_new(
                rings.rx,
                RxGeometry { block_size: g.rx.block_size as usize, block_nr: g.rx.block_nr as usize },
            )
            .map_err(|e| OpenError(format!("TPACKET_V3 RX ring of {}: {e}", iface.name)))?
            .with_arrival(Some(arrival_map));
            let tx = TpacketTx::try_new(
                rings.tx,
                s.kick(),
                TxGeometry {
                    block_size: g.tx.block_size as usize,
                    block_nr: g.tx.block_nr as usize,
                    frame_size: g.tx.frame_size as usize,
                    frame_nr: g.tx.frame_nr as usize,
                },
                iface.mtu as usize + L2_OVERHEAD,
            )
            .map_err(|e| OpenError(format!("TPACKET_V3 TX ring of {}: {e}", iface.name)))?;
            ring = g.tx.frame_nr as usize;
            queues.push((HostedRx::Packet(rx), HostedTx::Packet(tx)));
            stats.packet.push((port, Arc::new(Mutex::new(s))));
        }
        let detail = format!(" iface={} fanout={} memory={}", iface.name, lanes > 1, pages.replace(' ', "_"));
        notes.push(format!("hosted: {} AF_PACKET TPACKET_V3, {lanes} socket(s)", iface.name));
        ports.push(HostedPort { iface, ring, queues, lanes, keep: Keep::Packet { _stack: stack }, detail });
    }
    Ok(Opened { ports, pools, notes, stats, arrivals })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Interfaces whose frames fit a chunk need nothing; a jumbo MTU asks AF_XDP for frames
    /// over several chunks, with a line naming the interface.
    #[test]
    fn a_jumbo_mtu_asks_af_xdp_for_frames_over_several_chunks() {
        let small = [("a", 1500), ("b", MAX_ONE_CHUNK_MTU as u32)];
        assert_eq!(xdp_multi_buffer(&small), None);
        let jumbo = [("a", 1500), ("j0", 9000)];
        let note = xdp_multi_buffer(&jumbo).expect("multi-buffer");
        assert!(note.starts_with("hosted: j0 has MTU 9000: over AF_XDP, frames span several chunks"), "{note}");
        assert_eq!(MAX_ONE_CHUNK_MTU, 1774);
    }
}
