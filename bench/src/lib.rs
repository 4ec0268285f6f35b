//! Cadence's benchmark lab: [`bench`](mod@bench) (`cargo xtask bench hosted`: the hosted build end to end
//! with its own load generator, zero-loss search, latency, CPU) and [`peers`] (`cargo xtask
//! peers`: Cadence's per-packet paths side by side with DPDK's, same run, same machine), and
//! [`swx`]: DPDK's SWX pipeline as the reference runner P4 specs are checked against.
//!
//! `unsafe` is denied but in the modules that make system calls: raw sockets, `sysconf`,
//! `getrusage`, signals to the process under test, `mlock`/CPU pinning.
#![deny(unsafe_code)]

pub mod bench;
pub mod classbench;
#[allow(unsafe_code)] // signal handlers and signals to the peers under test, getrusage
pub mod peers;
pub mod swx;
