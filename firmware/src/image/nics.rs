//! Finding and bringing up the NICs.

use core::fmt;

use cadence_core::buf::{Pool, PoolError};
use cadence_core::nic::Port;
use cadence_drivers::hal::DmaError;
use cadence_drivers::virtio::{self, InitError, VirtioNet};
use cadence_firmware::config::{BootConfig, MacFmt};
use cadence_platform::Platform;
use cadence_platform::dma::DmaRegion;
use cadence_platform::mmio::MmioWindow;
use cadence_platform::println;

/// virtio PCI vendor ID (virtio 1.2 §4.1.2).
pub const VIRTIO_VENDOR: u16 = 0x1af4;
/// Modern virtio-net: 0x1040 + device type 1 (virtio 1.2 §4.1.2.1).
pub const VIRTIO_NET: u16 = 0x1041;
/// Most ports the image drives.
pub const MAX_PORTS: usize = 2;

/// A virtio-net port as the image drives it.
pub type Nic = VirtioNet<MmioWindow, DmaRegion>;

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
        bdf: cadence_platform::pci::Bdf,
        /// What went wrong.
        err: InitError,
    },
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NicError::PacketMemory(e) => write!(f, "packet buffer memory: {e}"),
            NicError::Pool(e) => write!(f, "packet pool: {e}"),
            NicError::Virtio { bdf, err } => write!(f, "virtio-net {bdf}: {err}"),
        }
    }
}

/// Brings up every modern virtio-net function (at most [`MAX_PORTS`]), in PCI order,
/// filling their receive rings from `pool`, and prints one `@nic` line each.
pub fn probe(
    p: &mut Platform,
    pool: &mut Pool<'static>,
    cfg: &BootConfig,
) -> Result<heapless::Vec<Nic, MAX_PORTS>, NicError> {
    let mut ports = heapless::Vec::new();
    let vcfg = virtio::Config::default().with_queue_size(cfg.qsize);
    let functions: heapless::Vec<_, MAX_PORTS> = p.pci_functions(VIRTIO_VENDOR, VIRTIO_NET).take(MAX_PORTS).collect();
    for f in functions {
        let bdf = f.device().bdf;
        let nic = Nic::try_new(&f, &mut p.dma, &p.clock, pool, &vcfg).map_err(|err| NicError::Virtio { bdf, err })?;
        let (rxq, txq) = (nic.rx_queues(), nic.tx_queues());
        let qsize = nic.queue_size();
        println!(
            "@nic index={} kind=virtio-net pci={} mac={} rxq={} txq={} qsize={}",
            ports.len(),
            bdf,
            MacFmt(nic.mac()),
            rxq,
            txq,
            qsize
        );
        defmt::info!("nic {=usize}: virtio-net up, {=usize} queue pairs of {=u16}", ports.len(), rxq, qsize);
        // Cannot fail: `functions` holds at most MAX_PORTS entries.
        let _ = ports.push(nic);
    }
    Ok(ports)
}
