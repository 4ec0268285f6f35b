//! Finding and bringing up the NICs: virtio-net, igb (QEMU's 82576), ixgbe
//! (82599/X520/X540/X550) and i40e (XL710/X710), behind one [`Nic`] type with
//! enum-dispatching queues, so the forwarding loop is the same for every kind.
//!
//! Which NICs: the ones `nics=` names, in its order; without it, every NIC the image
//! drives up to [`MAX_PORTS`] (8), virtio-net first, then igb, ixgbe, i40e, each kind in
//! PCI order (a warning line names what was left out). A NIC whose bring-up fails is
//! reported (`error: <kind> <pci>: <why>`) and skipped; the caller decides what too few
//! NICs mean (exit 37 only when none of those tried came up). `tests/tests/nic_select.rs`:
//! `nics=` takes the named functions in its order; a missing address is exit 35.
//!
//! Shared by both bare-metal images: the machine's PCI function, DMA and MMIO types come
//! from `machine` below (x86_64: `cadence-platform`'s, functions found by its PCI scan;
//! aarch64: `cadence-platform-aarch64`'s, found on the ECAM bus); the drivers are the same.

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use crate::platform::println;
use cadence_core::buf::{Batch, Pool, PoolError};
use cadence_core::nic::{Port, PortStats, RssError, RxQueue, RxStats, TxQueue, TxStats, WakeAddr};
use cadence_drivers::hal::DmaError;
use cadence_drivers::i40e::desc::{I40eRx, I40eTx};
use cadence_drivers::i40e::{self, I40e};
use cadence_drivers::igb::{self, Igb};
use cadence_drivers::intel::{IntelRx, IntelTx};
use cadence_drivers::ixgbe::{self, Ixgbe, MacType};
use cadence_drivers::virtio::{self, VirtioNet, VirtioRx, VirtioTx};
use cadence_firmware::config::{BootConfig, MacFmt, PciAddr};
use cadence_firmware::forward::FwdPort;
use machine::{Bdf, Clock, DmaAllocator, DmaRegion, MmioWindow, PciDevice};

/// The machine's PCI, DMA and MMIO types, by architecture.
#[cfg(target_arch = "x86_64")]
mod machine {
    pub use crate::platform::clock::TscClock as Clock;
    pub use crate::platform::dma::{DmaAllocator, DmaRegion};
    pub use crate::platform::mmio::MmioWindow;
    pub use crate::platform::pci::{Bdf, Function, PciDevice};

    /// The handle the drivers take for function `d`.
    pub fn function(d: PciDevice) -> Function {
        Function::new(d)
    }
}

/// The machine's PCI, DMA and MMIO types, by architecture.
#[cfg(target_arch = "aarch64")]
mod machine {
    pub use crate::platform::dma::{DmaAllocator, DmaRegion};
    pub use crate::platform::mmio::MmioWindow;
    pub use crate::platform::pcie::{Bdf, Function, Function as PciDevice};
    pub use crate::platform::timer::GenericClock as Clock;

    /// The handle the drivers take for function `d` (the enumerated function itself).
    pub fn function(d: PciDevice) -> Function {
        d
    }
}

/// virtio PCI vendor ID (virtio 1.2 §4.1.2).
pub const VIRTIO_VENDOR: u16 = 0x1af4;
/// Modern virtio-net: 0x1040 + device type 1 (virtio 1.2 §4.1.2.1).
pub const VIRTIO_NET: u16 = 0x1041;
/// Intel's PCI vendor ID.
pub const INTEL_VENDOR: u16 = 0x8086;
/// Most ports the image drives: a dataplane's most ports.
pub const MAX_PORTS: usize = cadence_core::stage::PORTS;

/// The kinds of NIC the image drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NicKind {
    /// Modern virtio-net.
    VirtioNet,
    /// Intel 82576 (`-device igb`).
    Igb,
    /// Intel 82599/X520/X540/X550.
    Ixgbe,
    /// Intel XL710/X710/XXV710.
    I40e,
}

impl NicKind {
    /// The kind of PCI function `d`, if the image drives it.
    pub fn of(d: &PciDevice) -> Option<Self> {
        match (d.vendor, d.device) {
            (VIRTIO_VENDOR, VIRTIO_NET) => Some(NicKind::VirtioNet),
            (INTEL_VENDOR, igb::DEVICE_ID) => Some(NicKind::Igb),
            (INTEL_VENDOR, dev) if MacType::from_device_id(dev).is_some() => Some(NicKind::Ixgbe),
            (INTEL_VENDOR, dev) if i40e::is_supported_device(dev) => Some(NicKind::I40e),
            _ => None,
        }
    }

    /// The `kind=` of the `@nic` line.
    pub const fn as_str(self) -> &'static str {
        match self {
            NicKind::VirtioNet => "virtio-net",
            NicKind::Igb => "igb",
            NicKind::Ixgbe => "ixgbe",
            NicKind::I40e => "i40e",
        }
    }
}

/// A NIC as the image drives it.
// At most MAX_PORTS of these exist, built once at boot: the size difference (the Intel
// ports carry a 512-byte redirection-table shadow) costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Nic {
    /// Modern virtio-net.
    Virtio(VirtioNet<MmioWindow, DmaRegion>),
    /// Intel 82576 (`-device igb`).
    Igb(Igb<MmioWindow, DmaRegion>),
    /// Intel 82599/X5xx.
    Ixgbe(Ixgbe<MmioWindow, DmaRegion>),
    /// Intel XL710/X710.
    I40e(I40e<MmioWindow, DmaRegion>),
}

/// A receive queue of any kind of [`Nic`], borrowed.
#[derive(Debug)]
pub enum NicRx<'a> {
    /// A virtio-net receive virtqueue.
    Virtio(&'a mut VirtioRx<MmioWindow, DmaRegion>),
    /// An Intel advanced-descriptor receive ring (igb, ixgbe).
    Intel(&'a mut IntelRx<MmioWindow, DmaRegion>),
    /// An XL710 receive ring.
    I40e(&'a mut IntelRx<MmioWindow, DmaRegion, I40eRx>),
}

/// A transmit queue of any kind of [`Nic`], borrowed.
#[derive(Debug)]
pub enum NicTx<'a> {
    /// A virtio-net transmit virtqueue.
    Virtio(&'a mut VirtioTx<MmioWindow, DmaRegion>),
    /// An Intel advanced-descriptor transmit ring (igb, ixgbe).
    Intel(&'a mut IntelTx<MmioWindow, DmaRegion>),
    /// An XL710 transmit ring.
    I40e(&'a mut IntelTx<MmioWindow, DmaRegion, I40eTx>),
}

/// Leaks `rx` and `tx` (they live as long as the image) and pairs them up.
fn leak_pairs<R, T, A, B>(rx: Vec<R>, tx: Vec<T>, wrap_rx: A, wrap_tx: B) -> Vec<(NicRx<'static>, NicTx<'static>)>
where
    R: 'static,
    T: 'static,
    A: Fn(&'static mut R) -> NicRx<'static>,
    B: Fn(&'static mut T) -> NicTx<'static>,
{
    let (rx, tx) = (Box::leak(Box::new(rx)), Box::leak(Box::new(tx)));
    rx.iter_mut().zip(tx.iter_mut()).map(|(r, t)| (wrap_rx(r), wrap_tx(t))).collect()
}

impl Nic {
    /// Moves every queue pair out of the port (pair `k` = receive queue `k`, transmit
    /// queue `k`) to hand to the lanes for the rest of the run; the port keeps its
    /// control path (MAC, RSS table, statistics registers).
    pub fn take_queues(&mut self) -> Vec<(NicRx<'static>, NicTx<'static>)> {
        match self {
            Nic::Virtio(n) => {
                let (rx, tx) = n.take_queues();
                leak_pairs(rx, tx, NicRx::Virtio, NicTx::Virtio)
            }
            Nic::Igb(n) => {
                let (rx, tx) = n.take_queues();
                leak_pairs(rx, tx, NicRx::Intel, NicTx::Intel)
            }
            Nic::Ixgbe(n) => {
                let (rx, tx) = n.take_queues();
                leak_pairs(rx, tx, NicRx::Intel, NicTx::Intel)
            }
            Nic::I40e(n) => {
                let (rx, tx) = n.take_queues();
                leak_pairs(rx, tx, NicRx::I40e, NicTx::I40e)
            }
        }
    }

    /// The RSS indirection table the device holds (receive queue per bucket), if it
    /// does RSS.
    pub fn rss_table(&self) -> Option<Vec<u16>> {
        let bytes = |t: &[u8]| t.iter().map(|&q| u16::from(q)).collect();
        match self {
            Nic::Virtio(n) => n.rss_table().map(<[u16]>::to_vec),
            Nic::Igb(n) => Some(bytes(n.rss_table())),
            Nic::Ixgbe(n) => Some(bytes(n.rss_table())),
            Nic::I40e(n) => Some(bytes(n.rss_table())),
        }
    }

    /// The kind.
    pub fn kind(&self) -> NicKind {
        match self {
            Nic::Virtio(_) => NicKind::VirtioNet,
            Nic::Igb(_) => NicKind::Igb,
            Nic::Ixgbe(_) => NicKind::Ixgbe,
            Nic::I40e(_) => NicKind::I40e,
        }
    }

    /// The link speed in Mb/s the device reports, if it does.
    pub fn speed_mbps(&self) -> Option<u32> {
        match self {
            Nic::Virtio(n) => n.speed_mbps(),
            Nic::Igb(n) => n.speed_mbps(),
            Nic::Ixgbe(n) => n.speed_mbps(),
            Nic::I40e(n) => n.speed_mbps(),
        }
    }

    /// Descriptors per ring.
    pub fn queue_size(&self) -> u16 {
        match self {
            Nic::Virtio(n) => n.queue_size(),
            Nic::Igb(n) => n.ring_size(),
            Nic::Ixgbe(n) => n.ring_size(),
            Nic::I40e(n) => n.ring_size(),
        }
    }
}

/// Dispatches `$e` over every [`Nic`] variant with the port bound to `$n`.
macro_rules! each_nic {
    ($nic:expr, $n:ident => $e:expr) => {
        match $nic {
            Nic::Virtio($n) => $e,
            Nic::Igb($n) => $e,
            Nic::Ixgbe($n) => $e,
            Nic::I40e($n) => $e,
        }
    };
}

/// Dispatches `$e` over every queue variant with the queue bound to `$q`.
macro_rules! each_queue {
    ($queue:expr, $ty:ident, $q:ident => $e:expr) => {
        match $queue {
            $ty::Virtio($q) => $e,
            $ty::Intel($q) => $e,
            $ty::I40e($q) => $e,
        }
    };
}

impl FwdPort for Nic {
    type Rx = NicRx<'static>;
    type Tx = NicTx<'static>;

    fn take_queues(&mut self) -> Vec<(NicRx<'static>, NicTx<'static>)> {
        Nic::take_queues(self)
    }

    fn fill(rx: &mut NicRx<'static>, pool: &mut Pool<'static>) -> usize {
        rx.fill(pool)
    }

    fn rss_table(&self) -> Option<Vec<u16>> {
        Nic::rss_table(self)
    }

    fn ring_entries(&self) -> Option<u32> {
        Some(u32::from(self.queue_size()))
    }
}

impl Port for Nic {
    fn mac(&self) -> [u8; 6] {
        each_nic!(self, n => n.mac())
    }

    fn rx_queues(&self) -> usize {
        each_nic!(self, n => n.rx_queues())
    }

    fn tx_queues(&self) -> usize {
        each_nic!(self, n => n.tx_queues())
    }

    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError> {
        each_nic!(self, n => n.set_rss_table(table))
    }

    fn stats(&self) -> PortStats {
        each_nic!(self, n => n.stats())
    }
}

impl NicRx<'_> {
    /// Tops the ring up from `pool` and notifies the device; returns how many buffers
    /// it posted.
    pub fn fill(&mut self, pool: &mut Pool<'_>) -> usize {
        each_queue!(self, NicRx, q => q.fill(pool))
    }
}

impl RxQueue for NicRx<'_> {
    #[inline]
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        each_queue!(self, NicRx, q => q.rx_burst(pool, batch))
    }

    fn rx_stats(&self) -> RxStats {
        each_queue!(self, NicRx, q => q.rx_stats())
    }

    fn wake_address(&self) -> Option<WakeAddr> {
        each_queue!(self, NicRx, q => q.wake_address())
    }

    fn pending(&self) -> Option<usize> {
        each_queue!(self, NicRx, q => q.pending())
    }
}

impl TxQueue for NicTx<'_> {
    #[inline]
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        each_queue!(self, NicTx, q => q.tx_burst(pool, batch))
    }

    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        each_queue!(self, NicTx, q => q.reclaim(pool))
    }

    fn in_flight(&self) -> usize {
        each_queue!(self, NicTx, q => q.in_flight())
    }

    fn tx_stats(&self) -> TxStats {
        each_queue!(self, NicTx, q => q.tx_stats())
    }
}

/// Why no NIC could be had, or a NIC could not be brought up.
#[derive(Debug)]
pub enum NicError {
    /// No DMA memory for the packet pool.
    PacketMemory(DmaError),
    /// The pool refused its region.
    Pool(PoolError),
    /// `nics=` names an address with no NIC the image drives.
    NotFound(PciAddr),
    /// A virtio-net function failed to initialize.
    Virtio(virtio::InitError),
    /// An igb function failed to initialize.
    Igb(igb::InitError),
    /// An ixgbe function failed to initialize.
    Ixgbe(ixgbe::InitError),
    /// An i40e function failed to initialize.
    I40e(i40e::InitError),
    /// The chain wants port `port` to receive frames longer than its NIC takes (`port.mtu`).
    FrameTooLong {
        /// The port.
        port: usize,
        /// Its NIC's kind.
        kind: NicKind,
        /// The longest frame the chain's MTUs for the port need.
        need: usize,
        /// The longest frame the NIC receives.
        most: usize,
    },
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NicError::PacketMemory(e) => write!(f, "packet buffer memory: {e}"),
            NicError::Pool(e) => write!(f, "packet pool: {e}"),
            NicError::NotFound(a) => write!(f, "boot option 'nics': no NIC the image drives at {a}"),
            NicError::Virtio(e) => write!(f, "{e}"),
            NicError::Igb(e) => write!(f, "{e}"),
            NicError::Ixgbe(e) => write!(f, "{e}"),
            NicError::I40e(e) => write!(f, "{e}"),
            NicError::FrameTooLong { port, kind, need, most } => write!(
                f,
                "port.mtu: port {port} ({}) receives frames of up to {most} bytes; its MTU needs {need}",
                kind.as_str()
            ),
        }
    }
}

fn same(a: &PciAddr, b: &Bdf) -> bool {
    (a.bus, a.dev, a.func) == (b.bus, b.dev, b.func)
}

/// The functions the image will drive, in port order (see the module docs), and how
/// many it could drive in all. An address in `nics=` without such a function is an
/// error.
pub fn select(
    pci: &[PciDevice],
    cfg: &BootConfig,
) -> Result<(heapless::Vec<(PciDevice, NicKind), MAX_PORTS>, usize), NicError> {
    let mut all: Vec<(PciDevice, NicKind)> = pci.iter().filter_map(|d| NicKind::of(d).map(|k| (*d, k))).collect();
    // Kind order, then PCI order.
    all.sort_by_key(|(d, k)| (*k, d.bdf.bus, d.bdf.dev, d.bdf.func));
    let mut chosen = heapless::Vec::new();
    match cfg.nics {
        Some(sel) => {
            for a in sel.addrs() {
                let Some(&found) = all.iter().find(|(d, _)| same(a, &d.bdf)) else {
                    return Err(NicError::NotFound(*a));
                };
                // Cannot fail: `nics=` names at most MAX_PORTS addresses.
                let _ = chosen.push(found);
            }
        }
        None => {
            for &f in all.iter().take(MAX_PORTS) {
                let _ = chosen.push(f);
            }
        }
    }
    Ok((chosen, all.len()))
}

/// NIC functions the image will try to bring up (the `nics=` of the banner, which the
/// host waits for as many `@nic` lines); 0 when `nics=` names a missing one.
pub fn count(pci: &[PciDevice], cfg: &BootConfig) -> usize {
    select(pci, cfg).map_or(0, |(c, _)| c.len())
}

/// The longest frame a NIC of `kind` receives here: the Intel NICs take jumbo frames over
/// several descriptors; virtio-net's limit is its driver's to judge (it depends on what the
/// device offers).
fn most_frame(kind: NicKind) -> usize {
    match kind {
        NicKind::VirtioNet => usize::MAX,
        NicKind::Igb => igb::MAX_FRAME,
        NicKind::Ixgbe => ixgbe::MAX_FRAME,
        NicKind::I40e => i40e::MAX_FRAME,
    }
}

/// Brings up the selected NICs with `cfg.lanes` queue pairs each (as many as the
/// device gives) and empty receive rings (each lane fills its own with
/// [`NicRx::fill`]); port `p` takes frames of up to `longest(p)` bytes (the chain's
/// `port.mtu`: virtio-net then spreads longer ones over several buffers). Prints one `@nic`
/// line per NIC brought up and one `error:` line per NIC that failed (and is skipped).
/// `Err` when `nics=` names a missing NIC or a port's NIC cannot take the frames its MTU
/// needs ([`NicError::FrameTooLong`]: configuration errors). Returns the NICs and how many
/// were tried.
pub fn probe(
    pci: &[PciDevice],
    dma: &mut DmaAllocator,
    clock: &Clock,
    pool: &mut Pool<'static>,
    cfg: &BootConfig,
    longest: &dyn Fn(usize) -> usize,
) -> Result<(heapless::Vec<Nic, MAX_PORTS>, usize), NicError> {
    let (chosen, present) = select(pci, cfg)?;
    if cfg.nics.is_none() && present > chosen.len() {
        println!(
            "warning: {present} NICs found, driving the first {} (choose others with nics=BB:DD.F,…)",
            chosen.len()
        );
    }
    let mut ports = heapless::Vec::new();
    let lanes = cfg.lanes.max(1);
    for &(dev, kind) in &chosen {
        let f = machine::function(dev);
        let bdf = dev.bdf;
        let (port, need) = (ports.len(), longest(ports.len()));
        if need > most_frame(kind) {
            return Err(NicError::FrameTooLong { port, kind, need, most: most_frame(kind) });
        }
        let nic = match kind {
            NicKind::VirtioNet => {
                let pairs = lanes.min(usize::from(u16::MAX)) as u16;
                let c = virtio::Config::default()
                    .with_queue_size(cfg.qsize)
                    .with_queue_pairs(pairs)
                    .with_fill_rx(false)
                    .with_max_frame(need.max(virtio::MAX_ONE_BUFFER_FRAME));
                match VirtioNet::try_new(&f, dma, clock, pool, &c) {
                    Err(virtio::InitError::NoMergeableRx { .. }) => {
                        return Err(NicError::FrameTooLong { port, kind, need, most: virtio::MAX_ONE_BUFFER_FRAME });
                    }
                    Err(virtio::InitError::FrameTooLong { .. }) => {
                        return Err(NicError::FrameTooLong { port, kind, need, most: virtio::MAX_MERGED_FRAME });
                    }
                    r => r.map(Nic::Virtio).map_err(NicError::Virtio),
                }
            }
            NicKind::Igb => {
                let pairs = lanes.min(usize::from(igb::MAX_QUEUES)) as u16;
                let c = igb::Config::default()
                    .with_ring(cfg.qsize)
                    .with_queues(pairs, pairs)
                    .with_fill_rx(false)
                    .with_max_frame(need);
                Igb::try_new(&f, dma, clock, pool, &c).map(Nic::Igb).map_err(NicError::Igb)
            }
            NicKind::Ixgbe => {
                let max = MacType::from_device_id(dev.device).map_or(1, MacType::rss_queues);
                let pairs = lanes.min(usize::from(max)) as u16;
                let c = ixgbe::Config::default()
                    .with_rings(cfg.qsize, cfg.qsize)
                    .with_queues(pairs, pairs)
                    .with_fill_rx(false)
                    .with_max_frame(need);
                Ixgbe::try_new(&f, dma, clock, pool, &c).map(Nic::Ixgbe).map_err(NicError::Ixgbe)
            }
            NicKind::I40e => {
                let pairs = lanes.min(usize::from(i40e::MAX_QUEUES)) as u16;
                let c = i40e::Config::default()
                    .with_ring(cfg.qsize)
                    .with_queues(pairs)
                    .with_fill_rx(false)
                    .with_max_frame(need);
                I40e::try_new(&f, dma, clock, pool, &c).map(Nic::I40e).map_err(NicError::I40e)
            }
        };
        match nic {
            Ok(nic) => announce(&mut ports, nic, bdf),
            Err(e) => {
                println!("error: {} {bdf}: {e}", kind.as_str());
                defmt::error!("nic {=str} skipped: bring-up failed", kind.as_str());
            }
        }
    }
    Ok((ports, chosen.len()))
}

/// Prints the `@nic` line of `nic` and keeps it.
fn announce(ports: &mut heapless::Vec<Nic, MAX_PORTS>, nic: Nic, bdf: Bdf) {
    let (rxq, txq, qsize) = (nic.rx_queues(), nic.tx_queues(), nic.queue_size());
    println!(
        "@nic index={} kind={} pci={} mac={} rxq={} txq={} qsize={} speed={}",
        ports.len(),
        nic.kind().as_str(),
        bdf,
        MacFmt(nic.mac()),
        rxq,
        txq,
        qsize,
        nic.speed_mbps().unwrap_or(0)
    );
    defmt::info!(
        "nic {=usize}: {=str} up, {=usize} queue pairs of {=u16}",
        ports.len(),
        nic.kind().as_str(),
        rxq,
        qsize
    );
    // Cannot fail: callers select at most MAX_PORTS functions.
    let _ = ports.push(nic);
}
