//! The aarch64 image's NICs: modern virtio-net functions on the ECAM bus, brought up with
//! `cadence-drivers`' driver (the x86 image's, unchanged) behind [`Nic`], which the
//! forwarding run takes as its [`FwdPort`].
//!
//! Which functions: the ones `nics=` names, in its order; without it, the first
//! [`MAX_PORTS`] virtio-net functions in PCI order (a warning line names what was left
//! out). A function whose bring-up fails is reported (`error: virtio-net <bdf>: <why>`)
//! and skipped, as on x86_64 (`image/nics.rs`, which also drives the Intel NICs).

extern crate alloc;

use alloc::vec::Vec;

use cadence_core::buf::Pool;
use cadence_core::nic::{Port, PortStats, RssError};
use cadence_drivers::virtio::{self, VirtioNet, VirtioRx, VirtioTx};
use cadence_firmware::config::{BootConfig, MacFmt, PciAddr};
use cadence_firmware::forward::FwdPort;

use crate::platform::dma::{DmaAllocator, DmaRegion};
use crate::platform::mmio::MmioWindow;
use crate::platform::pcie::{Bus, Function};
use crate::platform::println;
use crate::platform::timer::GenericClock;

/// Most ports the image drives.
pub const MAX_PORTS: usize = 2;

/// A virtio-net port as the run drives it.
#[derive(Debug)]
pub struct Nic(pub VirtioNet<MmioWindow, DmaRegion>);

/// Why `nics=` could not be satisfied.
#[derive(Debug, Clone, Copy)]
pub struct NotFound(pub PciAddr);

impl core::fmt::Display for NotFound {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "boot option 'nics': no NIC the image drives at {}", self.0)
    }
}

fn is_virtio_net(f: &Function) -> bool {
    f.vendor == virtio::VENDOR_ID && f.device == virtio::DEVICE_ID
}

/// The functions the image will drive, in port order, and how many it could drive in all.
pub fn select(bus: &Bus, cfg: &BootConfig) -> Result<(heapless::Vec<Function, MAX_PORTS>, usize), NotFound> {
    let all: Vec<Function> = bus.functions.iter().flatten().filter(|f| is_virtio_net(f)).copied().collect();
    let mut chosen = heapless::Vec::new();
    match cfg.nics {
        Some(sel) => {
            for a in sel.addrs() {
                let Some(f) = all.iter().find(|f| (f.bdf.bus, f.bdf.dev, f.bdf.func) == (a.bus, a.dev, a.func)) else {
                    return Err(NotFound(*a));
                };
                // Cannot fail: `nics=` names at most MAX_PORTS addresses.
                let _ = chosen.push(*f);
            }
        }
        None => {
            for f in all.iter().take(MAX_PORTS) {
                let _ = chosen.push(*f);
            }
        }
    }
    Ok((chosen, all.len()))
}

/// Brings up `chosen` with `cfg.lanes` queue pairs each and empty receive rings (each lane
/// fills its own); prints one `@nic` line per port brought up and one `error:` line per
/// function that failed. Returns the ports.
pub fn probe(
    chosen: &[Function],
    dma: &mut DmaAllocator,
    clock: &GenericClock,
    pool: &mut Pool<'static>,
    cfg: &BootConfig,
) -> heapless::Vec<Nic, MAX_PORTS> {
    let mut ports = heapless::Vec::new();
    let pairs = cfg.lanes.clamp(1, usize::from(u16::MAX)) as u16;
    let c = virtio::Config::default().with_queue_size(cfg.qsize).with_queue_pairs(pairs).with_fill_rx(false);
    for f in chosen {
        match VirtioNet::try_new(f, dma, clock, pool, &c) {
            Ok(n) => {
                println!(
                    "@nic index={} kind=virtio-net pci={} mac={} rxq={} txq={} qsize={} speed={}",
                    ports.len(),
                    f.bdf,
                    MacFmt(n.mac()),
                    n.rx_queues(),
                    n.tx_queues(),
                    n.queue_size(),
                    n.speed_mbps().unwrap_or(0)
                );
                // Cannot fail: at most MAX_PORTS functions are chosen.
                let _ = ports.push(Nic(n));
            }
            Err(e) => println!("error: virtio-net {}: {e}", f.bdf),
        }
    }
    ports
}

impl Port for Nic {
    fn mac(&self) -> [u8; 6] {
        self.0.mac()
    }

    fn rx_queues(&self) -> usize {
        self.0.rx_queues()
    }

    fn tx_queues(&self) -> usize {
        self.0.tx_queues()
    }

    fn set_rss_table(&mut self, table: &[u16]) -> Result<(), RssError> {
        self.0.set_rss_table(table)
    }

    fn stats(&self) -> PortStats {
        self.0.stats()
    }
}

impl FwdPort for Nic {
    type Rx = VirtioRx<MmioWindow, DmaRegion>;
    type Tx = VirtioTx<MmioWindow, DmaRegion>;

    fn take_queues(&mut self) -> Vec<(Self::Rx, Self::Tx)> {
        let (rx, tx) = self.0.take_queues();
        rx.into_iter().zip(tx).collect()
    }

    fn fill(rx: &mut Self::Rx, pool: &mut Pool<'static>) -> usize {
        rx.fill(pool)
    }

    fn rss_table(&self) -> Option<Vec<u16>> {
        self.0.rss_table().map(<[u16]>::to_vec)
    }

    fn ring_entries(&self) -> Option<u32> {
        Some(u32::from(self.0.queue_size()))
    }
}
