//! Cadence's decision layer: everything that decides, running unchanged on the host (unit
//! tests, property tests, the simulator) and on bare metal (the firmware). It never names a
//! driver or a platform: those come in through the traits of [`nic`] and [`time`].
//!
//! From the ground up (a module uses only those above it in this list, never one below):
//!
//! | module | what it holds |
//! |---|---|
//! | [`checksum`] | the Internet checksum (RFC 1071), pseudo-headers, incremental updates (RFC 1624) |
//! | [`drops`] | why frames are dropped: [`drops::DropReason`], declared once |
//! | [`hist`] | the one log-bucket histogram of tick counts |
//! | [`rand`] | the one pseudo-random generator (xorshift64) |
//! | [`parse`] | header parsing (Ethernet, VLAN, IPv4/IPv6, TCP, UDP, ICMP); cannot panic |
//! | [`control`] | signed control frames and who may send them |
//! | [`sync`] | the lane trylock, [`sync::Guarded`], [`sync::Swap`], [`sync::Doorbell`], [`sync::PacketMem`] |
//! | [`buf`] | the packet pool, `PacketBuf` handles, batches; [`buf::Pool::view`] for another core |
//! | [`nic`] | the RX/TX queue contract every driver keeps |
//! | [`time`] | clock ticks, `Clock`, `Sleeper`, deadlines |
//! | [`rss`] | the Toeplitz hash, indirection tables, and [`rss::meter`], the load per RSS bucket |
//! | [`softnic`] | in-memory queues that keep the [`nic`] contract (tests, simulator, benches; a loopback pair as DPDK's `net_ring`) |
//! | [`stage`] | the [`stage::Stage`] contract the worker hands batches to, [`stage::StageCounters`] |
//! | [`latency`] | the dataplane's own per-packet sojourn (RX stamp to TX) |
//! | [`metronome`] | the Metronome controller: shared lanes, trylocks, adaptive sleep |
//! | [`pna`] | P4 PNA match-action tables: exact (add-on-miss, expiry), LPM, ternary |
//! | [`p4`] | P4 programs as DPDK pipeline specs: the loader (validated, resolved program), table-file entries |
//! | [`poll`] | one poll of a lane: RX burst, the stage, TX burst, counters |
//! | [`vlan`] | 802.1Q sub-interfaces: interface numbers past the ports, the tag popped on receive and pushed on transmit |
//! | [`neigh`] | the ports' addresses, the neighbour table (ARP), ICMP echo and IPv6 neighbour solicitations for our addresses |
//! | [`nf`] | network functions and the [`nf::Chain`] that runs them (its phases) |
//! | [`netblaze`] | NetBlaze's decisions: profile, core mapper, follow rule, server and ingress mappers |
//! | [`offload`] | NetBlaze's runtime: the stage every worker runs, auxiliary cores, hand-off rings |
//! | [`worker`] | the multi-core round: workers over lanes, Metronome or poll mode |
//! | [`manage`] | the management channel's protocol and its commands on the chain's tables |
//!
//! `unsafe` lives in two places only, each with its argument in its module docs: [`sync`]
//! (packet memory shared with devices, the metadata table, data bound to a lane's lock) and
//! `buf::view` (a second pool over a pool's buffers, for the core a buffer is handed to).
//!
//! Memory: the crate uses `alloc` only while building things at initialization (the pool's
//! bookkeeping, tables, rings); nothing on the per-packet path allocates
//! (`core/tests/no_alloc.rs` counts). `core/tests/layers.rs` checks the order of the table
//! above.
//!
//! Instruction counts for comparisons a noisy machine cannot spoil (run under cachegrind):
//! `examples/ircount.rs` (instructions per packet of the forwarding loop: io, l2, l3),
//! `examples/tablecount.rs` (the exact table's burst hit, miss, and lookup + add-on-miss),
//! `examples/decidecount.rs` (one overloaded `CoreMapper::decide`). Timed benches are in
//! `benches/` (docs/PERFORMANCE.md).
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
pub mod neigh;
pub mod netblaze;
pub mod nf;
pub mod nic;
pub mod offload;
pub mod p4;
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
pub mod vlan;
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
