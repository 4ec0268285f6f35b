//! Neighbours: the dataplane's own per-port IPv4 and IPv6 addresses, the table of the
//! neighbours behind each port (IPv4 by ARP, RFC 826; IPv6 by neighbour discovery, RFC 4861,
//! [`nd`]), the frames waiting for a neighbour to be resolved, and the ICMP echo answered for
//! the dataplane's own addresses ([`echo`]).
//!
//! # The table
//!
//! One [`NeighShared`] per chain, shared by every worker: a bounded array of entries
//! ([`NeighConfig::capacity`]; full → a new neighbour is refused and counted as
//! `neigh_table_full`, its frame dropped as [`DropReason::NeighUnresolved`](crate::drops::DropReason::NeighUnresolved)), each keyed by
//! an IPv4 or IPv6 address and in one of the states of RFC 4861 §7.3.2 that the dataplane
//! uses ([`State`]; no DELAY or PROBE: see the limitations): `incomplete` (a request is
//! out), `reachable` (confirmed within [`NeighConfig::reachable`]), `stale` (still used,
//! not confirmed lately), `failed` (no answer after [`NeighConfig::probes`] requests one
//! [`NeighConfig::retrans`] apart) and `static` (from the configuration, never aged). The
//! ageing runs on the worker clock in [`Router::housekeep`] (at most once per `retrans`, by
//! whichever worker gets there): reachable → stale after `reachable`; stale entries and
//! failed ones are removed after `stale` more; incomplete ones are asked again every
//! `retrans` until they fail. A request is an ARP request (broadcast) for an IPv4 neighbour
//! and a neighbour solicitation for an IPv6 one (to its solicited-node multicast address,
//! from the egress port's IPv6 address whose prefix covers it, else the port's first,
//! [`nd::solicit`]); a port with no address of the family to ask from drops the frame at
//! once ([`DropReason::NeighUnresolved`](crate::drops::DropReason::NeighUnresolved)).
//!
//! An incomplete entry holds up to [`QUEUE`] frames waiting for the answer, and the table
//! at most [`NeighConfig::max_waiting`] in all (full →
//! [`DropReason::NeighQueueFull`](crate::drops::DropReason::NeighQueueFull)): a flood of
//! frames to addresses nobody answers pins at most that many of a lane's buffers, for at
//! most `probes × retrans`. A frame's buffer belongs to the pool of the lane it was
//! received on and must leave through that lane (the pool and rings are the lane's; see
//! `crate::sync::Guarded`), so every waiting frame carries its lane, and only a worker that
//! holds that lane sends or frees it ([`Router::housekeep`]); `ready` has a bit per lane
//! (lane mod 64) saying "something of yours can go".
//!
//! # Sharing between workers
//!
//! The table sits behind a `spin::Mutex` taken only off the fast path: on a miss, on an ARP
//! frame, and in housekeeping. The fast path is each worker's own direct-mapped cache of
//! resolved entries ([`Router::lookup`]: one hash and one compare per packet; IPv6 neighbours
//! in a smaller cache of their own, [`Router::lookup6`], so that the IPv4 key stays one
//! word), valid while
//! the table's `generation` (one atomic load per batch, [`Router::begin_batch`]) has not
//! moved; anything that changes or removes a resolved mapping bumps it. A per-worker table
//! would have been simpler but would ask each neighbour once per worker and could not hand a
//! frame queued by one worker to the answer another worker received; one table with
//! per-worker caches asks once and keeps the common path lock-free. The mutex is not modelled
//! under loom (it holds no lock-free protocol of its own; `spin::Mutex` is).
//!
//! ICMP errors ([`icmp`]): a packet the L3 forwarder drops for TTL (hop limit) expiry or no
//! route becomes, in place, a Time Exceeded or (Net) Unreachable back to its sender, ICMP
//! or ICMPv6 ([`Router::icmp_error`], [`Router::icmp_error6`]), rate-limited per port by a token bucket shared by the workers (one
//! atomic word per port, `NeighShared::icmp_allow`; [`NeighConfig::icmp_interval`],
//! [`NeighConfig::icmp_burst`]).
//!
//! IPv6 ([`nd`]): solicitations for the ports' IPv6 addresses and echo requests to them are
//! answered in place, and a solicitation with a source link-layer address teaches its sender
//! (a stale entry, RFC 4861 §7.2.3). An advertisement (to one of our addresses or to all
//! nodes) resolves or updates the entry of its target by §7.2.5 and is consumed; one §7.1.2
//! discards (hop limit not 255, bad checksum, …) is dropped as `nd_bad`, one for an address
//! with no entry is ignored and counted (`nd_unsolicited`), as ARP replies nobody asked for
//! are.
//!
//! Limitations (issue 27, later milestones): no ICMP errors from the head of a NetBlaze
//! split (its drops are freed there); static neighbours are IPv4 only (an IPv6 next hop is
//! resolved, or given by `mac:`); no duplicate address detection of our own IPv6 addresses,
//! no router advertisements, no redirects; one VLAN tag at most (`crate::vlan`); a stale entry
//! is used until removed (no DELAY / PROBE states, no unicast probe of a neighbour in use —
//! hosts that talk through the dataplane re-ask for its address and refresh it; the
//! advertisement's Router flag is not recorded); a NetBlaze auxiliary core has no
//! lane, so a miss there drops the frame ([`DropReason::NeighUnresolved`](crate::drops::DropReason::NeighUnresolved)), and an echo
//! request to our address in a flow NetBlaze split is answered by the head but its reply
//! still runs the tail's NFs; frames still waiting when a run stops stay out of the pool.

use alloc::vec::Vec;
use core::fmt;

use crate::time::Duration;
use crate::vlan::{IFACES, Vlan, VlanMap};

pub mod arp;
pub mod echo;
pub mod icmp;
pub mod nd;
mod router;
mod table;

pub use router::{ArpAction, BROADCAST, Emit, Miss, NeighCounters, Router};
pub use table::{NeighEdit, NeighShared, NeighView};

/// Frames that may wait for one neighbour's answer.
pub const QUEUE: usize = 4;
/// Most addresses per port.
pub const MAX_ADDRS: usize = 4;
/// A port's MTU unless `port.mtu` says otherwise (Ethernet's).
pub const DEFAULT_MTU: u16 = 1500;
/// The smallest MTU a port may have: IPv6's minimum link MTU (RFC 8200 §5), so that every
/// port carries IPv6.
pub const MIN_MTU: u16 = 1280;
/// The largest MTU a port may have: 9 000, a jumbo frame's (issue 27 item 5). Frames over
/// one buffer (`crate::buf::MAX_FRAME`) are carried where the driver takes them over
/// several buffers — today the hosted build's AF_PACKET ports; the others receive up to
/// 1 522 bytes (1 500 of IP, the Ethernet header and a tag) and refuse to send a frame over
/// several buffers (counted in their TX errors).
pub const MAX_MTU: u16 = 9000;

/// An address of one of the dataplane's ports: `addr/len` on `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PortAddr {
    /// The port.
    pub port: u8,
    /// The address.
    pub addr: [u8; 4],
    /// The prefix length of the subnet on the port, 1..=32.
    pub len: u8,
}

/// An IPv6 address of one of the dataplane's ports: `addr/len` on `port` (answered: neighbour
/// solicitations and echo requests, [`nd`]; the source of the solicitations sent from the
/// port for the neighbours its prefix covers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PortAddr6 {
    /// The port.
    pub port: u8,
    /// The address.
    pub addr: [u8; 16],
    /// The prefix length of the subnet on the port, 1..=128.
    pub len: u8,
}

/// A neighbour given in the configuration (never aged, never replaced by ARP or neighbour
/// discovery), IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StaticNeigh {
    /// The port behind which it is.
    pub port: u8,
    /// Its address.
    pub ip: crate::parse::IpAddr,
    /// Its MAC.
    pub mac: [u8; 6],
}

/// Configuration of the neighbour table (plain data; [`NeighConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NeighConfig {
    /// The ports' own addresses.
    pub addrs: Vec<PortAddr>,
    /// The ports' own IPv6 addresses.
    pub addrs6: Vec<PortAddr6>,
    /// Static neighbours.
    pub statics: Vec<StaticNeigh>,
    /// Most entries (static ones included).
    pub capacity: usize,
    /// How long an answer keeps an entry reachable (ticks; the text form's milliseconds
    /// converted by the chain build).
    pub reachable: Duration,
    /// How long a stale or failed entry stays before it is removed (ticks).
    pub stale: Duration,
    /// Time between two requests for the same address (ticks).
    pub retrans: Duration,
    /// Requests sent before an entry fails.
    pub probes: u8,
    /// Frames waiting for an answer over the whole table (each holds a lane's buffer; at
    /// most [`QUEUE`] per neighbour).
    pub max_waiting: usize,
    /// ICMP errors ([`icmp`]): ticks between two tokens of a port's bucket (the text form's
    /// `neigh.icmp_rate` per second converted by the chain build).
    pub icmp_interval: Duration,
    /// ICMP errors: tokens a port's bucket holds (a burst sent at once); 0 sends none.
    pub icmp_burst: u32,
    /// Each interface's MTU: the longest IP packet it sends (`port.mtu`; [`DEFAULT_MTU`]). A
    /// longer packet routed to it is dropped as `too_big` and answered with an ICMP
    /// "fragmentation needed" / ICMPv6 "packet too big" carrying the MTU ([`icmp`]).
    pub mtu: [u16; IFACES],
    /// The VLAN sub-interfaces (`port.vlan`, [`crate::vlan`]): interfaces `PORTS..IFACES`
    /// that the other fields may name as they name ports.
    pub vlans: Vec<Vlan>,
}

impl Default for NeighConfig {
    /// No addresses; 256 entries, 64 frames waiting at most; reachable 30 s, stale 60 s, retransmit 1 s, 3 probes;
    /// ICMP errors 1 000 per second per port with a burst of 50 (Linux's
    /// `net.ipv4.icmp_msgs_per_sec` and `icmp_msgs_burst`); in ticks of a 1 GHz clock until
    /// the chain build converts them.
    fn default() -> Self {
        Self {
            addrs: Vec::new(),
            addrs6: Vec::new(),
            statics: Vec::new(),
            capacity: crate::miri_or(256, 16),
            reachable: Duration(30_000_000_000),
            stale: Duration(60_000_000_000),
            retrans: Duration(1_000_000_000),
            probes: 3,
            max_waiting: 64,
            icmp_interval: Duration(1_000_000),
            icmp_burst: 50,
            mtu: [DEFAULT_MTU; IFACES],
            vlans: Vec::new(),
        }
    }
}

/// What is wrong with a [`NeighConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NeighConfigError {
    /// `addrs[index].port` is not a port of the dataplane.
    AddrPort {
        /// The address.
        index: usize,
    },
    /// `addrs[index].len` is not 1..=32, or the address is the subnet's network or
    /// broadcast address, or a multicast, loopback or zero address.
    AddrBad {
        /// The address.
        index: usize,
    },
    /// More than [`MAX_ADDRS`] addresses on one port, or the same address twice.
    AddrCount {
        /// The address.
        index: usize,
    },
    /// `statics[index].port` is not a port of the dataplane.
    StaticPort {
        /// The static neighbour.
        index: usize,
    },
    /// The same address twice among the static neighbours, or a static neighbour at a
    /// multicast or broadcast MAC.
    StaticBad {
        /// The static neighbour.
        index: usize,
    },
    /// `capacity` is zero or below the static neighbours' count.
    Capacity,
    /// `probes` is zero.
    Probes,
    /// `max_waiting` is zero.
    MaxWaiting,
    /// `addrs6[index]`: port out of range, prefix length not 1..=128, a multicast,
    /// unspecified or loopback address, more than [`MAX_ADDRS`] on the port, or given twice.
    Addr6 {
        /// The address.
        index: usize,
    },
    /// `mtu[port]` is not [`MIN_MTU`]..=[`MAX_MTU`], or names an interface that is neither a
    /// port nor a declared sub-interface.
    Mtu {
        /// The port.
        port: usize,
    },
    /// `vlans[index]` is bad ([`crate::vlan::VlanError`]).
    Vlan {
        /// The sub-interface.
        index: usize,
        /// What is wrong.
        why: crate::vlan::VlanError,
    },
}

impl fmt::Display for NeighConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::AddrPort { index } => write!(f, "port.addr[{index}]: port out of range"),
            Self::AddrBad { index } => {
                write!(f, "port.addr[{index}]: prefix length not 1..=32, or not a host address of its subnet")
            }
            Self::AddrCount { index } => {
                write!(f, "port.addr[{index}]: more than {MAX_ADDRS} addresses on the port, or given twice")
            }
            Self::StaticPort { index } => write!(f, "neigh.static[{index}]: port out of range"),
            Self::StaticBad { index } => {
                write!(f, "neigh.static[{index}]: address given twice or not unicast, or a group MAC")
            }
            Self::Capacity => f.write_str("neigh.capacity: zero, or fewer than the static neighbours"),
            Self::Probes => f.write_str("neigh.probes: zero"),
            Self::MaxWaiting => f.write_str("neigh.max_waiting: zero"),
            Self::Mtu { port } => {
                write!(f, "port.mtu (port {port}): not {MIN_MTU}..={MAX_MTU}, or not a port or sub-interface")
            }
            Self::Vlan { index, why } => write!(f, "port.vlan[{index}]: {why}"),
            Self::Addr6 { index } => write!(
                f,
                "port.addr (IPv6) [{index}]: port or prefix length out of range, not a unicast address, \
                 or too many on the port"
            ),
        }
    }
}

impl NeighConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), NeighConfigError> {
        let vlans = self.vlan_map()?;
        let iface = |p: u8| vlans.exists(usize::from(p));
        for (index, a) in self.addrs.iter().enumerate() {
            if !iface(a.port) {
                return Err(NeighConfigError::AddrPort { index });
            }
            let host_mask = u32::MAX.checked_shr(u32::from(a.len)).unwrap_or(0);
            let host = u32::from_be_bytes(a.addr) & host_mask;
            // On a /31 or /32 every address is a host's (RFC 3021); below, not the network's
            // or the broadcast address.
            let subnet_ok = a.len >= 31 || (host != 0 && host != host_mask);
            let special = a.addr[0] == 0 || a.addr[0] == 127 || a.addr[0] >= 224;
            if !(1..=32).contains(&a.len) || !subnet_ok || special {
                return Err(NeighConfigError::AddrBad { index });
            }
            let on_port = self.addrs.iter().take(index).filter(|b| b.port == a.port).count();
            if on_port >= MAX_ADDRS || self.addrs.iter().take(index).any(|b| b.addr == a.addr) {
                return Err(NeighConfigError::AddrCount { index });
            }
        }
        for (index, a) in self.addrs6.iter().enumerate() {
            let special = a.addr[0] == 0xff || a.addr == [0; 16] || u128::from_be_bytes(a.addr) == 1;
            let on_port = self.addrs6.iter().take(index).filter(|b| b.port == a.port).count();
            let twice = self.addrs6.iter().take(index).any(|b| b.addr == a.addr);
            if !iface(a.port) || !(1..=128).contains(&a.len) || special || on_port >= MAX_ADDRS || twice {
                return Err(NeighConfigError::Addr6 { index });
            }
        }
        for (index, s) in self.statics.iter().enumerate() {
            if !iface(s.port) {
                return Err(NeighConfigError::StaticPort { index });
            }
            let unicast = match s.ip {
                crate::parse::IpAddr::V4(a) => a != [0; 4] && a[0] < 224,
                crate::parse::IpAddr::V6(a) => a != [0; 16] && a[0] != 0xff,
            };
            if !unicast || s.mac[0] & 1 != 0 || self.statics.iter().take(index).any(|t| t.ip == s.ip) {
                return Err(NeighConfigError::StaticBad { index });
            }
        }
        if self.capacity == 0 || self.capacity < self.statics.len() {
            return Err(NeighConfigError::Capacity);
        }
        if self.probes == 0 {
            return Err(NeighConfigError::Probes);
        }
        if self.max_waiting == 0 {
            return Err(NeighConfigError::MaxWaiting);
        }
        let bad_mtu =
            |(p, m): (usize, &u16)| !(MIN_MTU..=MAX_MTU).contains(m) || (*m != DEFAULT_MTU && !vlans.exists(p));
        if let Some(port) = self.mtu.iter().enumerate().position(bad_mtu) {
            return Err(NeighConfigError::Mtu { port });
        }
        Ok(())
    }

    /// The sub-interfaces as a map, checked.
    pub fn vlan_map(&self) -> Result<VlanMap, NeighConfigError> {
        VlanMap::new(&self.vlans).map_err(|(index, why)| NeighConfigError::Vlan { index, why })
    }
}

/// The state of a neighbour entry (RFC 4861 §7.3.2, for ARP and IPv6 neighbour discovery
/// alike; no DELAY or PROBE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum State {
    /// A request is out, no answer yet: frames wait.
    Incomplete,
    /// Confirmed by an answer within `reachable`.
    Reachable,
    /// Not confirmed lately; still used.
    Stale,
    /// No answer to `probes` requests: frames for it are dropped until it is removed.
    Failed,
    /// From the configuration.
    Static,
}

impl State {
    /// Whether frames can be sent to the entry's MAC.
    pub fn usable(self) -> bool {
        matches!(self, State::Reachable | State::Stale | State::Static)
    }

    /// The name in `show neigh`-style listings.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Incomplete => "incomplete",
            State::Reachable => "reachable",
            State::Stale => "stale",
            State::Failed => "failed",
            State::Static => "static",
        }
    }
}

#[cfg(test)]
mod tests;
