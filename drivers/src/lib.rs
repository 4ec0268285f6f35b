//! Cadence's NIC drivers: polled, register-level, and generic over the hardware.
//!
//! A driver never names the platform. It reaches the device through the traits of
//! [`hal`]: PCI configuration space and BAR mapping ([`hal::PciFunction`]), MMIO
//! register windows ([`hal::Mmio`]), DMA memory ([`hal::DmaAlloc`]) and a clock
//! (`cadence_core::time::Clock`) for deadlines. The firmware implements them with
//! real port I/O and identity-mapped memory; host tests implement them with device
//! models, so the same driver code runs in both.
//!
//! Every driver implements `cadence_core::nic`'s queue contract.
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_code)]

extern crate alloc;

pub mod hal;
#[cfg(feature = "igb")]
pub mod igb;
#[cfg(any(feature = "ixgbe", feature = "igb"))]
pub mod intel;
#[cfg(feature = "ixgbe")]
pub mod ixgbe;
#[cfg(feature = "virtio")]
pub mod virtio;
