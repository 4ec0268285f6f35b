//! Cadence's decision layer.
//!
//! Everything that decides lives here and runs unchanged on the host (unit tests,
//! property tests, the simulator) and on bare metal (the firmware): packet buffers
//! and batches ([`buf`]), header parsing ([`parse`]), checksums ([`checksum`]), the
//! Toeplitz RSS hash ([`rss`]), time ([`time`]), the NIC queue contract ([`nic`]),
//! drop reasons ([`drops`]), the stage contract ([`stage`]), one poll of a lane's queues
//! ([`poll`]), the Metronome controller ([`metronome`]) and the worker that runs rounds with
//! both ([`worker`]), plus software
//! NIC queues for host tests and the simulator ([`softnic`]).
//!
//! The crate never names a driver or a platform: those come in through the traits
//! in [`nic`] and [`time`]. It has no `unsafe` code outside [`sync`], whose
//! [`sync::Guarded`] binds lane data to a queue lock and whose [`sync::PacketMem`] holds the
//! packet memory a device shares with the pool (their module docs carry the arguments).
//!
//! Memory: the crate uses `alloc` only while building things at initialization
//! (the pool's bookkeeping arrays); nothing on the per-packet path allocates.
#![cfg_attr(not(test), no_std)]
#![deny(unsafe_code)]

extern crate alloc;

pub mod buf;
pub mod checksum;
pub mod control;
pub mod drops;
pub mod hist;
pub mod latency;
pub mod manage;
pub mod metronome;
pub mod netblaze;
pub mod nf;
pub mod nic;
pub mod parse;
pub mod pna;
pub mod poll;
pub mod rand;
pub mod rss;
pub mod softnic;
pub mod stage;
#[allow(unsafe_code)]
pub mod sync;
pub mod time;
pub mod worker;

/// `native`, or `miri` when this crate runs under Miri (`cargo xtask test`, step "Miri").
///
/// Only sizes go through here: the default capacities of tables and rings are far smaller
/// under Miri, which checks every access of every byte and takes minutes to build and sweep
/// one 65 536-entry table. The code paths are the same at every size.
pub(crate) const fn miri_or<T: Copy>(native: T, miri: T) -> T {
    if cfg!(miri) { miri } else { native }
}

#[cfg(test)]
mod test_frames;
#[cfg(test)]
mod testing;
