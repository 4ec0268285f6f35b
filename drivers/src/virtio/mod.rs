//! virtio-net over modern virtio-PCI, polled (virtio 1.2 §4.1 PCI transport, §2.7
//! split virtqueues, §5.1 network device).
//!
//! - [`pci`]: the capability walk that finds the common, notify, ISR and device
//!   configuration structures (§4.1.4).
//! - [`regs`]: register layouts (declared structs with pinned offsets), status and
//!   feature bits.
//! - `queue`: the split virtqueue (descriptor table, available and used rings in one
//!   DMA allocation) with free-descriptor tracking.
//! - `ctrl`: the control virtqueue (§5.1.6.5): one command at a time, with a deadline.
//! - [`mq`]: the multiqueue commands (`VQ_PAIRS_SET`, `RSS_CONFIG`) and their encoding.
//! - [`VirtioNet`]: bring-up (§3.1.1), queue pairs and RSS, and the port;
//!   [`VirtioRx`] / [`VirtioTx`]: the `cadence_core::nic` queues.
//!
//! Firmware use:
//!
//! ```text
//! let cfg = Config::default().with_queue_pairs(4);   // min(4, device's max) pairs
//! let mut nic = VirtioNet::try_new(&pci_fn, &mut dma, &tsc, &mut pool, &cfg)?;
//! let mac = nic.mac();                               // cadence_core::nic::Port
//! let pairs = nic.rx_queues();
//! let (rx, tx) = nic.queue_pair(0).expect("pair 0 always exists");
//! rx.rx_burst(&mut pool, &mut batch);
//! nic.set_rss_table(&table)?;                        // table.len() == nic.rss_table().len()
//! ```
//!
//! The driver never takes interrupts: `VIRTQ_AVAIL_F_NO_INTERRUPT` is set on every
//! queue, MSI-X vectors are `NO_VECTOR` and INTx is disabled in the PCI command
//! register. Every wait on the device has a deadline.

mod bringup;
mod ctrl;
mod error;
pub mod mq;
mod net;
pub mod pci;
mod queue;
pub mod regs;
mod rxtx;

// Test and fuzz scaffolding: a broken expectation is the point of a test.
#[cfg(any(test, fuzzing))]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
pub(crate) mod model;
#[cfg(test)]
mod mq_tests;
#[cfg(test)]
mod tests;

pub use bringup::{Config, DEVICE_ID, TRANSITIONAL_DEVICE_ID, VENDOR_ID, negotiate};
pub use ctrl::CtrlError;
pub use error::InitError;
pub use mq::hash_type;
pub use net::{OwnedQueues, QueuePair, Queues, VirtioNet};
pub use rxtx::{NET_HDR_LEN, VirtioRx, VirtioTx};
