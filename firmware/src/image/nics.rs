//! Finding and bringing up the NICs: virtio-net and igb (QEMU's 82576), behind one
//! [`Nic`] type with enum-dispatching queues, so the forwarding loop is the same for
//! either kind.

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use cadence_core::buf::{Batch, Pool, PoolError};
use cadence_core::nic::{Port, PortStats, RssError, RxQueue, RxStats, TxQueue, TxStats, WakeAddr};
use cadence_drivers::hal::DmaError;
use cadence_drivers::igb::{self, Igb};
use cadence_drivers::intel::{IntelRx, IntelTx};
use cadence_drivers::virtio::{self, VirtioNet, VirtioRx, VirtioTx};
use cadence_firmware::config::{BootConfig, MacFmt};
use cadence_firmware::forward::FwdPort;
use cadence_platform::Platform;
use cadence_platform::dma::DmaRegion;
use cadence_platform::mmio::MmioWindow;
use cadence_platform::pci::Bdf;
use cadence_platform::println;

/// virtio PCI vendor ID (virtio 1.2 §4.1.2).
pub const VIRTIO_VENDOR: u16 = 0x1af4;
/// Modern virtio-net: 0x1040 + device type 1 (virtio 1.2 §4.1.2.1).
pub const VIRTIO_NET: u16 = 0x1041;
/// Most ports the image drives.
pub const MAX_PORTS: usize = 2;

/// A NIC as the image drives it.
// At most MAX_PORTS of these exist, built once at boot: the size difference (the igb
// port carries a 512-byte redirection-table shadow) costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Nic {
    /// Modern virtio-net.
    Virtio(VirtioNet<MmioWindow, DmaRegion>),
    /// Intel 82576 (`-device igb`).
    Igb(Igb<MmioWindow, DmaRegion>),
}

/// A receive queue of either kind of [`Nic`], borrowed.
#[derive(Debug)]
pub enum NicRx<'a> {
    /// A virtio-net receive virtqueue.
    Virtio(&'a mut VirtioRx<MmioWindow, DmaRegion>),
    /// An Intel advanced-descriptor receive ring.
    Igb(&'a mut IntelRx<MmioWindow, DmaRegion>),
}

/// A transmit queue of either kind of [`Nic`], borrowed.
#[derive(Debug)]
pub enum NicTx<'a> {
    /// A virtio-net transmit virtqueue.
    Virtio(&'a mut VirtioTx<MmioWindow, DmaRegion>),
    /// An Intel advanced-descriptor transmit ring.
    Igb(&'a mut IntelTx<MmioWindow, DmaRegion>),
}

impl Nic {
    /// Moves every queue pair out of the port (pair `k` = receive queue `k`, transmit
    /// queue `k`) to hand to the lanes for the rest of the run; the port keeps its
    /// control path (MAC, RSS table, statistics registers). The rings are leaked: they
    /// live as long as the image.
    pub fn take_queues(&mut self) -> Vec<(NicRx<'static>, NicTx<'static>)> {
        match self {
            Nic::Virtio(n) => {
                let (rx, tx) = n.take_queues();
                let (rx, tx) = (Box::leak(Box::new(rx)), Box::leak(Box::new(tx)));
                rx.iter_mut().zip(tx.iter_mut()).map(|(r, t)| (NicRx::Virtio(r), NicTx::Virtio(t))).collect()
            }
            Nic::Igb(n) => {
                let (rx, tx) = n.take_queues();
                let (rx, tx) = (Box::leak(Box::new(rx)), Box::leak(Box::new(tx)));
                rx.iter_mut().zip(tx.iter_mut()).map(|(r, t)| (NicRx::Igb(r), NicTx::Igb(t))).collect()
            }
        }
    }

    /// The RSS indirection table the device holds (receive queue per bucket), if it
    /// does RSS.
    pub fn rss_table(&self) -> Option<Vec<u16>> {
        match self {
            Nic::Virtio(n) => n.rss_table().map(<[u16]>::to_vec),
            Nic::Igb(n) => Some(n.rss_table().iter().map(|&q| u16::from(q)).collect()),
        }
    }

    /// The `kind=` of the `@nic` line.
    pub fn kind(&self) -> &'static str {
        match self {
            Nic::Virtio(_) => "virtio-net",
            Nic::Igb(_) => "igb",
        }
    }

    /// The link speed in Mb/s the device reports, if it does.
    pub fn speed_mbps(&self) -> Option<u32> {
        match self {
            Nic::Virtio(n) => n.speed_mbps(),
            Nic::Igb(n) => n.speed_mbps(),
        }
    }

    /// Descriptors per ring.
    pub fn queue_size(&self) -> u16 {
        match self {
            Nic::Virtio(n) => n.queue_size(),
            Nic::Igb(n) => n.ring_size(),
        }
    }
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
}

impl Port for Nic {
    fn mac(&self) -> [u8; 6] {
        match self {
            Nic::Virtio(n) => n.mac(),
            Nic::Igb(n) => n.mac(),
        }
    }

    fn rx_queues(&self) -> usize {
        match self {
            Nic::Virtio(n) => n.rx_queues(),
            Nic::Igb(n) => n.rx_queues(),
        }
    }

    fn tx_queues(&self) -> usize {
        match self {
            Nic::Virtio(n) => n.tx_queues(),
            Nic::Igb(n) => n.tx_queues(),
        }
    }

    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError> {
        match self {
            Nic::Virtio(n) => n.set_rss_table(table),
            Nic::Igb(n) => n.set_rss_table(table),
        }
    }

    fn stats(&self) -> PortStats {
        match self {
            Nic::Virtio(n) => n.stats(),
            Nic::Igb(n) => n.stats(),
        }
    }
}

impl NicRx<'_> {
    /// Tops the ring up from `pool` and notifies the device; returns how many buffers
    /// it posted.
    pub fn fill(&mut self, pool: &mut Pool<'_>) -> usize {
        match self {
            NicRx::Virtio(q) => q.fill(pool),
            NicRx::Igb(q) => q.fill(pool),
        }
    }
}

impl RxQueue for NicRx<'_> {
    #[inline]
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        match self {
            NicRx::Virtio(q) => q.rx_burst(pool, batch),
            NicRx::Igb(q) => q.rx_burst(pool, batch),
        }
    }

    fn rx_stats(&self) -> RxStats {
        match self {
            NicRx::Virtio(q) => q.rx_stats(),
            NicRx::Igb(q) => q.rx_stats(),
        }
    }

    fn wake_address(&self) -> Option<WakeAddr> {
        match self {
            NicRx::Virtio(q) => q.wake_address(),
            NicRx::Igb(q) => q.wake_address(),
        }
    }
}

impl TxQueue for NicTx<'_> {
    #[inline]
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        match self {
            NicTx::Virtio(q) => q.tx_burst(pool, batch),
            NicTx::Igb(q) => q.tx_burst(pool, batch),
        }
    }

    fn reclaim(&mut self, pool: &mut Pool<'_>) -> usize {
        match self {
            NicTx::Virtio(q) => q.reclaim(pool),
            NicTx::Igb(q) => q.reclaim(pool),
        }
    }

    fn in_flight(&self) -> usize {
        match self {
            NicTx::Virtio(q) => q.in_flight(),
            NicTx::Igb(q) => q.in_flight(),
        }
    }

    fn tx_stats(&self) -> TxStats {
        match self {
            NicTx::Virtio(q) => q.tx_stats(),
            NicTx::Igb(q) => q.tx_stats(),
        }
    }
}

/// Why the NICs could not be brought up.
#[derive(Debug)]
pub enum NicError {
    /// No DMA memory for the packet pool.
    PacketMemory(DmaError),
    /// The pool refused its region.
    Pool(PoolError),
    /// A virtio-net function failed to initialize.
    Virtio {
        /// Its PCI address.
        bdf: Bdf,
        /// What went wrong.
        err: virtio::InitError,
    },
    /// An igb function failed to initialize.
    Igb {
        /// Its PCI address.
        bdf: Bdf,
        /// What went wrong.
        err: igb::InitError,
    },
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NicError::PacketMemory(e) => write!(f, "packet buffer memory: {e}"),
            NicError::Pool(e) => write!(f, "packet pool: {e}"),
            NicError::Virtio { bdf, err } => write!(f, "virtio-net {bdf}: {err}"),
            NicError::Igb { bdf, err } => write!(f, "igb {bdf}: {err}"),
        }
    }
}

/// NIC functions the image will drive: virtio-net and igb, at most [`MAX_PORTS`] (the
/// `nics=` of the banner, which the host waits for as many `@nic` lines).
pub fn count(p: &Platform) -> usize {
    let n = p.pci.iter().filter(|d| d.is(VIRTIO_VENDOR, VIRTIO_NET) || d.is(igb::VENDOR_ID, igb::DEVICE_ID)).count();
    n.min(MAX_PORTS)
}

/// Brings up the NICs, at most [`MAX_PORTS`]: modern virtio-net functions first, then
/// igb functions, each kind in PCI order, with `cfg.lanes` queue pairs each (as many as
/// the device gives) and empty receive rings (each lane fills its own with
/// [`NicRx::fill`]), and prints one `@nic` line each.
pub fn probe(
    p: &mut Platform,
    pool: &mut Pool<'static>,
    cfg: &BootConfig,
) -> Result<heapless::Vec<Nic, MAX_PORTS>, NicError> {
    let mut ports = heapless::Vec::new();
    // One queue pair per lane; each lane fills its receive rings from its own pool
    // (forward.rs), so bring-up posts no buffers.
    let pairs = cfg.lanes.clamp(1, usize::from(igb::MAX_QUEUES)) as u16;
    let vcfg = virtio::Config::default().with_queue_size(cfg.qsize).with_queue_pairs(pairs).with_fill_rx(false);
    let virtio_fns: heapless::Vec<_, MAX_PORTS> = p.pci_functions(VIRTIO_VENDOR, VIRTIO_NET).take(MAX_PORTS).collect();
    for f in virtio_fns {
        let bdf = f.device().bdf;
        let nic =
            VirtioNet::try_new(&f, &mut p.dma, &p.clock, pool, &vcfg).map_err(|err| NicError::Virtio { bdf, err })?;
        announce(&mut ports, Nic::Virtio(nic), bdf);
    }
    let icfg = igb::Config::default().with_ring(cfg.qsize).with_queues(pairs, pairs).with_fill_rx(false);
    let igb_fns: heapless::Vec<_, MAX_PORTS> =
        p.pci_functions(igb::VENDOR_ID, igb::DEVICE_ID).take(MAX_PORTS - ports.len()).collect();
    for f in igb_fns {
        let bdf = f.device().bdf;
        let nic = Igb::try_new(&f, &mut p.dma, &p.clock, pool, &icfg).map_err(|err| NicError::Igb { bdf, err })?;
        announce(&mut ports, Nic::Igb(nic), bdf);
    }
    Ok(ports)
}

/// Prints the `@nic` line of `nic` and keeps it.
fn announce(ports: &mut heapless::Vec<Nic, MAX_PORTS>, nic: Nic, bdf: Bdf) {
    let (rxq, txq, qsize) = (nic.rx_queues(), nic.tx_queues(), nic.queue_size());
    println!(
        "@nic index={} kind={} pci={} mac={} rxq={} txq={} qsize={}",
        ports.len(),
        nic.kind(),
        bdf,
        MacFmt(nic.mac()),
        rxq,
        txq,
        qsize
    );
    defmt::info!("nic {=usize}: {=str} up, {=usize} queue pairs of {=u16}", ports.len(), nic.kind(), rxq, qsize);
    // Cannot fail: callers take at most MAX_PORTS functions in all.
    let _ = ports.push(nic);
}
