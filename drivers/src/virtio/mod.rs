//! virtio-net over modern virtio-PCI, polled (virtio 1.2 §4.1 PCI transport, §2.7
//! split virtqueues, §5.1 network device).
//!
//! - [`pci`]: the capability walk that finds the common, notify, ISR and device
//!   configuration structures (§4.1.4).
//! - [`regs`]: register layouts (declared structs with pinned offsets), status and
//!   feature bits.
//! - `queue`: the split virtqueue (descriptor table, available and used rings in one
//!   DMA allocation) with free-descriptor tracking.
//! - [`VirtioNet`]: bring-up (§3.1.1) and the port; [`VirtioRx`] / [`VirtioTx`]: the
//!   `cadence_core::nic` queues.
//!
//! Firmware use:
//!
//! ```text
//! let mut nic = VirtioNet::try_new(&pci_fn, &mut dma, &tsc, &mut pool, &Config::default())?;
//! let mac = nic.mac();                            // cadence_core::nic::Port
//! let (rx, tx) = nic.queue_pair(0).expect("pair 0 always exists");
//! rx.rx_burst(&mut pool, &mut batch);
//! ```
//!
//! The driver never takes interrupts: `VIRTQ_AVAIL_F_NO_INTERRUPT` is set on every
//! queue, MSI-X vectors are `NO_VECTOR` and INTx is disabled in the PCI command
//! register. Every wait on the device has a deadline.

mod error;
mod net;
pub mod pci;
mod queue;
pub mod regs;
mod rxtx;

#[cfg(test)]
mod model;
#[cfg(test)]
mod tests;

pub use error::InitError;
pub use net::{Config, DEVICE_ID, QueuePair, Queues, TRANSITIONAL_DEVICE_ID, VENDOR_ID, VirtioNet, negotiate};
pub use rxtx::{NET_HDR_LEN, VirtioRx, VirtioTx};
