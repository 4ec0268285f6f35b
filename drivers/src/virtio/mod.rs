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
//! Host tests run the driver against a register-level device model (`model/`: the
//! common configuration, the virtqueues, the control queue and Toeplitz steering included).
//!
//! The driver never takes interrupts: `VIRTQ_AVAIL_F_NO_INTERRUPT` is set on every
//! queue, MSI-X vectors are `NO_VECTOR` and INTx is disabled in the PCI command
//! register. Every wait on the device has a deadline.
//!
//! # The datapath
//!
//! `VirtioRx::rx_burst` turns used-ring entries into `PacketBuf` handles, the frame at
//! `HEADROOM` with the 12-byte virtio header just before it, and refills the ring from the
//! pool at once. `VirtioTx::tx_burst` writes the header into the headroom, one descriptor
//! per frame, then `hal::dma_wmb()` → avail idx → `hal::dma_mb()` → doorbell (once per
//! burst); the device consumes, and the used ring's buffers go back to the pool on the next
//! `tx_burst` / reclaim.
//!
//! # Queue pairs and RSS
//!
//! `Config::queue_pairs` (default 1) asks for N pairs. With N > 1 the driver negotiates
//! `CTRL_VQ` with `MQ` and/or `RSS` when offered, reads `max_virtqueue_pairs` and the RSS
//! limits from the device configuration (generation loop), and sets up pairs 0..min(N, max)
//! (rx `2k`, tx `2k+1`) plus the control queue (`2·max_virtqueue_pairs`, virtio 1.2 §5.1.2).
//! After `DRIVER_OK` and before posting RX buffers it sends `VIRTIO_NET_CTRL_MQ_RSS_CONFIG`
//! (hash types IPv4/TCPv4/UDPv4/IPv6/TCPv6/UDPv6 ∩ supported, `cadence_core::rss::DEFAULT_KEY`
//! cut to `rss_max_key_size`, a power-of-two indirection table of ≤ 128 entries filled
//! round-robin, unclassified → pair 0), or `VQ_PAIRS_SET` with `MQ` only; a refusal or
//! timeout fails the bring-up. `Port::set_rss_table` checks the table (length, queue
//! indices) and resends `RSS_CONFIG`; it takes `&mut self`, so it never races itself. The
//! control queue carries one command at a time (header + payload descriptor,
//! device-writable ack descriptor) and waits for the used entry with a deadline; a command
//! that timed out blocks later ones (`Busy`) until the device returns it. QEMU's software
//! RSS steers exactly as `cadence_core::rss` predicts (checked over a tap backend).
//!
//! A receive queue's wake address (`RxQueue::wake_address`, for a sleeper that watches
//! memory, `mwait=on`) is the used ring's `idx`, the word the device writes on arrival.

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

pub use bringup::{Config, DEVICE_ID, TRANSITIONAL_DEVICE_ID, VENDOR_ID, negotiate, negotiate_frames};
pub use ctrl::CtrlError;
pub use error::InitError;
pub use mq::hash_type;
pub use net::{OwnedQueues, QueuePair, Queues, VirtioNet};
pub use rxtx::{MAX_MERGED_FRAME, MAX_ONE_BUFFER_FRAME, NET_HDR_LEN, VirtioRx, VirtioTx};
