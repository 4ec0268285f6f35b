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
//!
//! Two drivers serve a hosted build on Linux, where the "device" is the kernel: [`xsk`]
//! (AF_XDP sockets) and [`tpacket`] (`AF_PACKET` with `TPACKET_V3` rings). They see only
//! shared memory ([`hal::Mmio`] windows over the mmap'ed rings) and a doorbell
//! ([`hal::Kick`]); the platform makes the system calls.
#![cfg_attr(not(any(test, fuzzing)), no_std)]
#![deny(unsafe_code)]
// Under `cfg(fuzzing)` the test-only device models are compiled for the fuzz harnesses,
// which use part of them.
#![cfg_attr(fuzzing, allow(dead_code, unused_imports))]

extern crate alloc;

#[cfg(fuzzing)]
pub mod fuzzing;
pub mod hal;
#[cfg(feature = "i40e")]
pub mod i40e;
#[cfg(feature = "igb")]
pub mod igb;
#[cfg(any(feature = "ixgbe", feature = "igb", feature = "i40e"))]
pub mod intel;
#[cfg(feature = "ixgbe")]
pub mod ixgbe;
pub mod reg;
// Test and fuzz scaffolding: a broken expectation is the point of a test.
#[cfg(any(test, fuzzing))]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod shm;
#[cfg(test)]
mod testing;
#[cfg(feature = "tpacket")]
pub mod tpacket;
#[cfg(feature = "virtio")]
pub mod virtio;
#[cfg(feature = "xsk")]
pub mod xsk;
