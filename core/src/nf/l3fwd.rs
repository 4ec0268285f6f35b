//! The L3 forwarder (Metronome's application): longest-prefix match
//! of the destination address to a next hop, destination MAC rewrite, TTL / hop-limit
//! decrement and the incremental IPv4 header checksum update.
//!
//! - Routes live in [`Lpm4`] / [`Lpm6`] (`pna::lpm`). The IPv4 trie defaults to a 16-bit first
//!   level (DIR-16-8-8: 256 KiB plus 1 KiB per group); DIR-24-8 (`first_stride4 = 24`) costs
//!   64 MiB of first level and is for images with the memory to spare. `l3fwd.lpm4=poptrie`
//!   ([`Lpm4Kind::Poptrie`]) holds the IPv4 routes in a [`Poptrie4`] instead (`pna::poptrie`):
//!   a few MiB for 100 000 routes, and the faster lookup from about 10 000 routes to 100 000
//!   (with a full table of a million, the trie is).
//! - A route names a next hop by index into [`L3fwdConfig::next_hops`]; a next hop is an
//!   egress port and the MAC of the neighbour behind it, given ([`Resolve::Static`]: the
//!   packet leaves with `Verdict::Forward(port)` and `Pkt::dst = Dst::Mac(mac)`, the chain writes
//!   the source MAC) or found in the neighbour table (`crate::neigh`) by the chain's egress:
//!   a gateway's address ([`Resolve::Gateway`], [`Resolve::Gateway6`]) or, directly
//!   connected, the packet's own destination ([`Resolve::Direct`], either family), in
//!   `Pkt::dst` (`Dst::Via`, `Dst::Via6`). A static next hop costs what it always did; a
//!   resolved one costs the egress one cache lookup when the neighbour is known. An IPv6
//!   gateway is not checked against the egress port's prefixes (nor is an IPv4 one against
//!   its subnets): a link-local gateway (`fe80::…`) is the common case in IPv6, and a route
//!   added from the management channel has no addresses to be checked against; a gateway
//!   nobody answers for fails as any unanswered neighbour does.
//! - Order of checks per packet (as Linux's `ip_forward` does it): route first — no route is
//!   `NoRoute` — then TTL. RFC 1812 §5.3.1: a router decrements the TTL and "if the TTL is
//!   reduced to zero (or less), the packet MUST be discarded", so a packet that arrives with
//!   TTL (hop limit) 0 or 1 is dropped as `TtlExpired` and never sent with TTL 0. In a chain
//!   with addresses (a router, `crate::neigh`), the chain turns a packet dropped as
//!   `TtlExpired` or `NoRoute` into the ICMP (ICMPv6) error that says so after the NFs
//!   (`crate::neigh::icmp`); the forwarder itself only drops and counts, so the vector loop
//!   (chains without a router) is unchanged.
//! - IPv4 checksum: RFC 1624 eqn. 3 over the 16-bit word that holds TTL and protocol
//!   ([`checksum::update_ttl_decrement`]); IPv6 has no header checksum.
//!
//! - The common IPv4 frame takes the vector loop ([`Nf::run_vector`], `super::VectorTx`): parse, lookup,
//!   TTL, link header and TX queue in one pass over the frame, the same verdicts and counters
//!   as `process` plus the chain's egress (a proptest in `tests.rs` holds them equal).
//!
//! Nothing here has per-flow state. The tables are read-only once built; a route change
//! ([`L3fwdShared::add_route`], [`L3fwdShared::delete_route`], from the management channel)
//! builds new tables from the changed route list and publishes them through a
//! [`Swap`]: each worker takes them at its next batch, so no lock is taken on
//! the data path and a change lands between two batches.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use super::{Dst, Nf, NfBatch, NfCtx, VectorTx, Verdict};
use crate::buf::{PacketBuf, Pool};
use crate::checksum;
use crate::drops::DropReason;
use crate::parse::{self, Depth, IpAddr, L3Kind};
use crate::pna::lpm::{Lpm4, Lpm6, LpmConfig, LpmError, MAX_NEXT_HOP};
use crate::pna::poptrie::Poptrie4;
use crate::sync::{Reader, Swap};

/// How a next hop's destination MAC is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Resolve {
    /// [`NextHop::mac`], as configured (the route's `mac:`).
    Static,
    /// The MAC of this IPv4 gateway, from the neighbour table (`via:IP`).
    Gateway([u8; 4]),
    /// The MAC of this IPv6 gateway, from the neighbour table (`via:IPv6`; IPv6 routes only).
    Gateway6([u8; 16]),
    /// The MAC of the packet's own destination, from the neighbour table: the destination
    /// is on the port's subnet (`via:direct`).
    Direct,
}

/// Where a route leads: an egress port and how to find the MAC of the neighbour behind it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NextHop {
    /// The egress port.
    pub port: u8,
    /// Destination MAC of frames sent to this next hop ([`Resolve::Static`]; zero otherwise).
    pub mac: [u8; 6],
    /// Where the MAC comes from.
    pub resolve: Resolve,
}

impl NextHop {
    /// A next hop at a fixed MAC.
    pub const fn mac(port: u8, mac: [u8; 6]) -> Self {
        Self { port, mac, resolve: Resolve::Static }
    }

    /// The IPv4 gateway `ip` behind `port`, resolved through the neighbour table.
    pub const fn gateway(port: u8, ip: [u8; 4]) -> Self {
        Self { port, mac: [0; 6], resolve: Resolve::Gateway(ip) }
    }

    /// The IPv6 gateway `ip` behind `port`, resolved through the neighbour table.
    pub const fn gateway6(port: u8, ip: [u8; 16]) -> Self {
        Self { port, mac: [0; 6], resolve: Resolve::Gateway6(ip) }
    }

    /// Directly connected on `port`: the destination itself is the neighbour.
    pub const fn direct(port: u8) -> Self {
        Self { port, mac: [0; 6], resolve: Resolve::Direct }
    }
}

/// An IPv4 route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Route4 {
    /// The prefix (host bits must be zero).
    pub prefix: [u8; 4],
    /// Prefix length, 0..=32.
    pub len: u8,
    /// Index into [`L3fwdConfig::next_hops`].
    pub next_hop: u32,
}

/// An IPv6 route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Route6 {
    /// The prefix (host bits must be zero).
    pub prefix: [u8; 16],
    /// Prefix length, 0..=128.
    pub len: u8,
    /// Index into [`L3fwdConfig::next_hops`].
    pub next_hop: u32,
}

/// Configuration of the L3 forwarder (plain data; see [`L3fwdConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct L3fwdConfig {
    /// Next hops, referred to by index from the routes.
    pub next_hops: Vec<NextHop>,
    /// IPv4 routes.
    pub routes4: Vec<Route4>,
    /// IPv6 routes.
    pub routes6: Vec<Route6>,
    /// The structure that holds the IPv4 routes (default [`Lpm4Kind::Trie`]).
    pub lpm4: Lpm4Kind,
    /// First-level stride of the IPv4 trie, 8..=24 (default 16; 24 = DIR-24-8, 64 MiB); with
    /// [`Lpm4Kind::Poptrie`], the bits of its direct array, 16..=24.
    pub first_stride4: u8,
    /// 1 KiB trie groups for IPv4 routes longer than the first stride.
    pub max_groups4: usize,
    /// 1 KiB trie groups for IPv6 routes longer than 16 bits.
    pub max_groups6: usize,
    /// Number of egress ports (next hops must name a port below it).
    pub ports: u8,
}

impl Default for L3fwdConfig {
    fn default() -> Self {
        Self {
            next_hops: Vec::new(),
            routes4: Vec::new(),
            routes6: Vec::new(),
            lpm4: Lpm4Kind::Trie,
            first_stride4: 16,
            max_groups4: crate::miri_or(1024, 16),
            max_groups6: crate::miri_or(1024, 16),
            ports: crate::vlan::IFACES as u8,
        }
    }
}

/// Which structure holds the IPv4 routes (`l3fwd.lpm4`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Lpm4Kind {
    /// [`Lpm4`]: a first level of `first_stride4` bits, then 256-entry groups (DIR-16-8-8 by
    /// default, DIR-24-8 with 24). The cheapest lookup with few routes.
    #[default]
    Trie,
    /// [`Poptrie4`]: a direct array of `first_stride4` bits, then 6-bit nodes whose children
    /// are counted with popcount. A few MiB where the trie takes tens (100 000 routes: about
    /// 4 MiB against 100), and faster than the trie from 10 000 routes up to 100 000
    /// (docs/PERFORMANCE.md, "IPv4 LPM").
    Poptrie,
}

/// The IPv4 routes, in the structure the configuration chose.
#[derive(Debug)]
enum Routes4 {
    Trie(Lpm4),
    Poptrie(Poptrie4),
}

impl Routes4 {
    #[inline(always)]
    fn lookup(&self, addr: u32) -> Option<u32> {
        match self {
            Routes4::Trie(t) => t.lookup(addr),
            Routes4::Poptrie(t) => t.lookup(addr),
        }
    }
}

/// An address family, to name a route in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Family {
    /// `routes4`.
    V4,
    /// `routes6`.
    V6,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::V4 => "routes4",
            Family::V6 => "routes6",
        })
    }
}

/// What is wrong with an [`L3fwdConfig`] (or what building its tables hit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum L3fwdConfigError {
    /// `first_stride4` is outside 8..=24.
    FirstStride(u8),
    /// `first_stride4` is outside 16..=24 with `lpm4` [`Lpm4Kind::Poptrie`].
    PoptrieStride(u8),
    /// `ports` is zero.
    NoPorts,
    /// `next_hops[index].port` is not below `ports`.
    NextHopPort {
        /// The next hop.
        index: usize,
    },
    /// More next hops than a trie entry can name.
    TooManyNextHops,
    /// The route's prefix length exceeds the address width.
    RouteLen {
        /// `routes4` or `routes6`.
        family: Family,
        /// Index of the route.
        index: usize,
    },
    /// The route's prefix has bits set beyond its length.
    RouteHostBits {
        /// `routes4` or `routes6`.
        family: Family,
        /// Index of the route.
        index: usize,
    },
    /// The route names a next hop that does not exist.
    RouteNextHop {
        /// `routes4` or `routes6`.
        family: Family,
        /// Index of the route.
        index: usize,
    },
    /// The same prefix appears twice.
    DuplicateRoute {
        /// `routes4` or `routes6`.
        family: Family,
        /// Index of the second occurrence.
        index: usize,
    },
    /// The trie ran out of groups at this route (raise `max_groups4` / `max_groups6`).
    OutOfGroups {
        /// `routes4` or `routes6`.
        family: Family,
        /// Index of the route.
        index: usize,
    },
    /// The tries do not fit in the memory left.
    OutOfMemory,
    /// A management command named a route that does not exist.
    NoSuchRoute,
    /// `next_hops[index]` is the gateway 0.0.0.0, or an IPv6 gateway that is not a unicast
    /// address (unspecified, loopback, multicast).
    NextHopGateway {
        /// The next hop.
        index: usize,
    },
    /// A route whose gateway is of the other family (an IPv4 route via an IPv6 gateway or
    /// the reverse).
    GatewayFamily {
        /// `routes4` or `routes6`.
        family: Family,
        /// Index of the route.
        index: usize,
    },
}

impl fmt::Display for L3fwdConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::FirstStride(s) => write!(f, "l3fwd first_stride4 {s} is not in 8..=24"),
            Self::PoptrieStride(s) => write!(f, "l3fwd first_stride4 {s} is not in 16..=24 (l3fwd.lpm4=poptrie)"),
            Self::NoPorts => f.write_str("l3fwd ports is zero"),
            Self::NextHopPort { index } => write!(f, "l3fwd next_hops[{index}]: port out of range"),
            Self::TooManyNextHops => write!(f, "l3fwd next_hops: more than {} entries", MAX_NEXT_HOP + 1),
            Self::RouteLen { family, index } => write!(f, "l3fwd {family}[{index}]: prefix length too long"),
            Self::RouteHostBits { family, index } => write!(f, "l3fwd {family}[{index}]: host bits set"),
            Self::RouteNextHop { family, index } => write!(f, "l3fwd {family}[{index}]: no such next hop"),
            Self::DuplicateRoute { family, index } => write!(f, "l3fwd {family}[{index}]: duplicate prefix"),
            Self::OutOfGroups { family, index } => write!(f, "l3fwd {family}[{index}]: trie groups exhausted"),
            Self::OutOfMemory => f.write_str("l3fwd: the tries do not fit in the memory left"),
            Self::NoSuchRoute => f.write_str("l3fwd: no such route"),
            Self::NextHopGateway { index } => {
                write!(f, "l3fwd next_hops[{index}]: gateway 0.0.0.0, or not a unicast IPv6 address")
            }
            Self::GatewayFamily { family, index } => {
                write!(f, "l3fwd {family}[{index}]: a gateway of the other IP version")
            }
        }
    }
}

fn host_bits_clear(addr: u128, len: u8, width: u32) -> bool {
    let len = u32::from(len);
    len >= width || addr & (u128::MAX >> (128 - width + len)) == 0
}

impl L3fwdConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), L3fwdConfigError> {
        if !(8..=24).contains(&self.first_stride4) {
            return Err(L3fwdConfigError::FirstStride(self.first_stride4));
        }
        if self.lpm4 == Lpm4Kind::Poptrie && self.first_stride4 < 16 {
            return Err(L3fwdConfigError::PoptrieStride(self.first_stride4));
        }
        if self.ports == 0 {
            return Err(L3fwdConfigError::NoPorts);
        }
        if self.next_hops.len() > MAX_NEXT_HOP as usize + 1 {
            return Err(L3fwdConfigError::TooManyNextHops);
        }
        if let Some(index) = self.next_hops.iter().position(|h| h.port >= self.ports) {
            return Err(L3fwdConfigError::NextHopPort { index });
        }
        let bad_gateway = |h: &NextHop| match h.resolve {
            Resolve::Gateway(a) => a == VIA_DESTINATION,
            Resolve::Gateway6(a) => a[0] == 0xff || u128::from_be_bytes(a) <= 1,
            Resolve::Static | Resolve::Direct => false,
        };
        if let Some(index) = self.next_hops.iter().position(bad_gateway) {
            return Err(L3fwdConfigError::NextHopGateway { index });
        }
        let v4 = self.routes4.iter().map(|r| (u128::from(u32::from_be_bytes(r.prefix)), r.len, r.next_hop));
        self.check_routes(Family::V4, 32, v4)?;
        let v6 = self.routes6.iter().map(|r| (u128::from_be_bytes(r.prefix), r.len, r.next_hop));
        self.check_routes(Family::V6, 128, v6)?;
        let resolve = |nh: u32| self.next_hops.get(nh as usize).map(|h| h.resolve);
        if let Some(index) = self.routes4.iter().position(|r| matches!(resolve(r.next_hop), Some(Resolve::Gateway6(_))))
        {
            return Err(L3fwdConfigError::GatewayFamily { family: Family::V4, index });
        }
        match self.routes6.iter().position(|r| matches!(resolve(r.next_hop), Some(Resolve::Gateway(_)))) {
            Some(index) => Err(L3fwdConfigError::GatewayFamily { family: Family::V6, index }),
            None => Ok(()),
        }
    }

    fn check_routes(
        &self,
        family: Family,
        width: u32,
        routes: impl Iterator<Item = (u128, u8, u32)>,
    ) -> Result<(), L3fwdConfigError> {
        let mut seen = alloc::collections::BTreeSet::new();
        for (index, (prefix, len, nh)) in routes.enumerate() {
            if u32::from(len) > width {
                return Err(L3fwdConfigError::RouteLen { family, index });
            }
            if !host_bits_clear(prefix, len, width) {
                return Err(L3fwdConfigError::RouteHostBits { family, index });
            }
            if nh as usize >= self.next_hops.len() {
                return Err(L3fwdConfigError::RouteNextHop { family, index });
            }
            if !seen.insert((prefix, len)) {
                return Err(L3fwdConfigError::DuplicateRoute { family, index });
            }
        }
        Ok(())
    }
}

/// What a next hop writes into a packet, precomputed so that the per-packet step is one
/// store whatever the kind of next hop ([`Resolve`]).
#[derive(Debug, Clone, Copy)]
struct HopOut {
    port: u8,
    /// `Pkt::dst`: the MAC of a static next hop, or the neighbour to resolve.
    dst: Dst,
}

/// What the IPv4 vector loop ([`Nf::run_vector`], chains without a router) needs of a next hop:
/// its port and its MAC if static (a `via` one goes to the port's peer). Eight bytes, kept
/// apart from [`HopOut`] (which holds an IPv6 gateway) so that the loop's index stays a shift.
#[derive(Debug, Clone, Copy)]
struct HopOut4 {
    port: u8,
    mac: Option<[u8; 6]>,
}

/// `Dst::Via` of a directly connected route: the neighbour is the packet's own destination,
/// IPv4 or IPv6 (the chain's egress reads it; 0.0.0.0 is never a gateway, `validate`
/// refuses it).
pub const VIA_DESTINATION: [u8; 4] = [0; 4];

impl HopOut {
    fn of(h: &NextHop) -> Self {
        match h.resolve {
            Resolve::Static => Self { port: h.port, dst: Dst::Mac(h.mac) },
            Resolve::Gateway(ip) => Self { port: h.port, dst: Dst::Via(ip) },
            Resolve::Gateway6(ip) => Self { port: h.port, dst: Dst::Via6(ip) },
            Resolve::Direct => Self { port: h.port, dst: Dst::Via(VIA_DESTINATION) },
        }
    }
}

/// The forwarder's tables, built from one route list (replaced whole on a route change).
#[derive(Debug)]
pub struct L3Tables {
    lpm4: Routes4,
    lpm6: Lpm6,
    /// `config.next_hops`, as the data path writes them.
    out: Vec<HopOut>,
    /// The same, as the IPv4 vector loop reads them.
    out4: Vec<HopOut4>,
    config: L3fwdConfig,
}

impl L3Tables {
    /// Validates `cfg` and builds the tries (all memory is allocated here, fallibly).
    fn try_build(cfg: L3fwdConfig) -> Result<Self, L3fwdConfigError> {
        cfg.validate()?;
        let oom = |_| L3fwdConfigError::OutOfMemory;
        let lpm4 = match cfg.lpm4 {
            Lpm4Kind::Trie => {
                let mut c4 = LpmConfig::ipv4(cfg.max_groups4);
                c4.first_stride = cfg.first_stride4;
                let mut lpm4 = Lpm4::try_new(c4).map_err(oom)?;
                for (index, r) in cfg.routes4.iter().enumerate() {
                    lpm4.add(u32::from_be_bytes(r.prefix), r.len, r.next_hop)
                        .map_err(|e| route_error(e, Family::V4, index))?;
                }
                Routes4::Trie(lpm4)
            }
            Lpm4Kind::Poptrie => {
                let list: Vec<(u32, u8, u32)> =
                    cfg.routes4.iter().map(|r| (u32::from_be_bytes(r.prefix), r.len, r.next_hop)).collect();
                // `validate` has refused every bad length and next hop: what is left is memory.
                Routes4::Poptrie(Poptrie4::build(cfg.first_stride4, &list).map_err(oom)?)
            }
        };
        let mut lpm6 = Lpm6::try_new(LpmConfig::ipv6(cfg.max_groups6)).map_err(oom)?;
        for (index, r) in cfg.routes6.iter().enumerate() {
            lpm6.add(u128::from_be_bytes(r.prefix), r.len, r.next_hop)
                .map_err(|e| route_error(e, Family::V6, index))?;
        }
        let out = cfg.next_hops.iter().map(HopOut::of).collect();
        let out4 = cfg.next_hops.iter().map(|h| HopOut4 { port: h.port, mac: HopOut::of(h).dst.mac() }).collect();
        Ok(Self { lpm4, lpm6, out, out4, config: cfg })
    }

    /// The next hop for `addr`.
    pub fn route(&self, addr: IpAddr) -> Option<NextHop> {
        let nh = match addr {
            IpAddr::V4(a) => self.lpm4.lookup(u32::from_be_bytes(a)),
            IpAddr::V6(a) => self.lpm6.lookup(u128::from_be_bytes(a)),
        }?;
        self.config.next_hops.get(nh as usize).copied()
    }

    /// The route list these tables were built from.
    pub fn config(&self) -> &L3fwdConfig {
        &self.config
    }
}

/// The forwarder's tables, shared by every core.
#[derive(Debug)]
pub struct L3fwdShared {
    tables: Swap<L3Tables>,
}

impl L3fwdShared {
    /// Validates `cfg` and builds the tries (all memory is allocated here).
    pub fn try_new(cfg: &L3fwdConfig) -> Result<Self, L3fwdConfigError> {
        Ok(Self { tables: Swap::new(L3Tables::try_build(cfg.clone())?) })
    }

    /// The next hop for `addr` (the lookup the data path makes; for tests and tools).
    pub fn route(&self, addr: IpAddr) -> Option<NextHop> {
        self.tables.load().route(addr)
    }

    /// The tables in force now.
    pub fn tables(&self) -> Arc<L3Tables> {
        self.tables.load()
    }

    /// Control plane: adds the route `addr/len → hop` (a prefix already routed is
    /// `DuplicateRoute`), rebuilds the tables and publishes them; returns the replaced
    /// version (to retire). Allocates.
    pub fn add_route(&self, addr: IpAddr, len: u8, hop: NextHop) -> Result<Arc<L3Tables>, L3fwdConfigError> {
        let mut cfg = self.tables.load().config.clone();
        let next_hop = match cfg.next_hops.iter().position(|h| *h == hop) {
            Some(i) => i,
            None => {
                cfg.next_hops.push(hop);
                cfg.next_hops.len() - 1
            }
        } as u32;
        match addr {
            IpAddr::V4(prefix) => cfg.routes4.push(Route4 { prefix, len, next_hop }),
            IpAddr::V6(prefix) => cfg.routes6.push(Route6 { prefix, len, next_hop }),
        }
        self.publish(cfg)
    }

    /// Control plane: removes the route `addr/len` (`NoSuchRoute` if there is none) and
    /// publishes the rebuilt tables; returns the replaced version (to retire).
    pub fn delete_route(&self, addr: IpAddr, len: u8) -> Result<Arc<L3Tables>, L3fwdConfigError> {
        let mut cfg = self.tables.load().config.clone();
        let before = cfg.routes4.len() + cfg.routes6.len();
        match addr {
            IpAddr::V4(p) => cfg.routes4.retain(|r| (r.prefix, r.len) != (p, len)),
            IpAddr::V6(p) => cfg.routes6.retain(|r| (r.prefix, r.len) != (p, len)),
        }
        if cfg.routes4.len() + cfg.routes6.len() == before {
            return Err(L3fwdConfigError::NoSuchRoute);
        }
        self.publish(cfg)
    }

    /// Drops next hops no route uses (renumbering the rest), builds and publishes.
    fn publish(&self, mut cfg: L3fwdConfig) -> Result<Arc<L3Tables>, L3fwdConfigError> {
        let used = |i: usize| {
            cfg.routes4.iter().any(|r| r.next_hop as usize == i) || cfg.routes6.iter().any(|r| r.next_hop as usize == i)
        };
        let keep: Vec<bool> = (0..cfg.next_hops.len()).map(used).collect();
        let mut map = Vec::with_capacity(keep.len());
        let mut hops = Vec::new();
        for (h, k) in cfg.next_hops.iter().zip(&keep) {
            map.push(hops.len() as u32);
            if *k {
                hops.push(*h);
            }
        }
        let renumber = |nh: &mut u32| *nh = map.get(*nh as usize).copied().unwrap_or(*nh);
        cfg.routes4.iter_mut().for_each(|r| renumber(&mut r.next_hop));
        cfg.routes6.iter_mut().for_each(|r| renumber(&mut r.next_hop));
        cfg.next_hops = hops;
        Ok(self.tables.publish(Arc::new(L3Tables::try_build(cfg)?)))
    }
}

fn route_error(e: LpmError, family: Family, index: usize) -> L3fwdConfigError {
    match e {
        LpmError::OutOfGroups => L3fwdConfigError::OutOfGroups { family, index },
        LpmError::NextHopTooLarge | LpmError::NotFound => L3fwdConfigError::RouteNextHop { family, index },
        LpmError::BadPrefixLength => L3fwdConfigError::RouteLen { family, index },
        LpmError::OutOfMemory => L3fwdConfigError::OutOfMemory,
    }
}

/// [`L3fwd`]'s `process` with `lookup4` as the IPv4 route lookup (one copy per structure, so
/// that the choice is made once per batch).
#[inline(always)]
fn forward(
    counters: &mut L3fwdCounters,
    t: &L3Tables,
    pool: &mut Pool<'_>,
    batch: &mut NfBatch,
    lookup4: impl Fn(u32) -> Option<u32>,
) {
    // One pass: the lookup, then the TTL, per packet (a burst pass over the addresses first
    // only copied them: the trie walk is the same either way).
    for p in batch.pkts_mut().iter_mut() {
        if !p.alive() {
            continue;
        }
        let nh = match p.parsed.flow.dst {
            IpAddr::V4(a) => lookup4(u32::from_be_bytes(a)),
            IpAddr::V6(a) => t.lpm6.lookup(u128::from_be_bytes(a)),
        };
        let Some(hop) = nh.and_then(|nh| t.out.get(nh as usize)) else {
            counters.no_route += 1;
            p.verdict = Verdict::Drop(DropReason::NoRoute);
            continue;
        };
        let ip = usize::from(p.parsed.l3_offset);
        if let Err(r) = L3fwd::decrement(pool.frame_mut(p.buf), ip, p.parsed.l3) {
            counters.ttl_expired += 1;
            p.verdict = Verdict::Drop(r);
            continue;
        }
        match p.parsed.l3 {
            L3Kind::Ipv4 => counters.forwarded4 += 1,
            L3Kind::Ipv6 => counters.forwarded6 += 1,
        }
        p.verdict = Verdict::Forward(hop.port);
        p.dst = hop.dst;
    }
}

/// [`L3fwd`]'s `run_vector` with `lookup4` as the route lookup (one copy per structure).
#[inline(always)]
fn forward_v4(
    counters: &mut L3fwdCounters,
    out4: &[HopOut4],
    pool: &mut Pool<'_>,
    input: &[PacketBuf],
    tx: &mut VectorTx<'_>,
    lookup4: impl Fn(u32) -> Option<u32>,
) -> usize {
    let l4 = tx.l4();
    // The last next hops' port and link header (`None`: the chain has no such port), by the
    // next hop's low two bits: a burst to a few next hops builds each header once.
    let mut heads = [HeadMemo { hop: u32::MAX, port: 0, head: None }; 4];
    let mut forwarded = 0;
    let mut took = 0;
    for &b in input {
        let f = pool.frame_mut(b);
        let dst = if l4 { parse::ipv4_dst::<true>(f) } else { parse::ipv4_dst::<false>(f) };
        let (Some(dst), Some(h)) = (dst, f.first_chunk_mut::<34>()) else { break };
        took += 1;
        let memo = match lookup4(dst) {
            Some(nh) if heads[(nh & 3) as usize].hop == nh => &heads[(nh & 3) as usize],
            Some(nh) if let Some(hop) = out4.get(nh as usize) => {
                // A `via` next hop (no MAC) goes to the port's peer, as the egress sends it.
                let head = tx.link_header(hop.port, hop.mac);
                let memo = &mut heads[(nh & 3) as usize];
                *memo = HeadMemo { hop: nh, port: hop.port, head };
                &*memo
            }
            _ => {
                counters.no_route += 1;
                tx.drop(pool, b, DropReason::NoRoute);
                continue;
            }
        };
        // The IPv4 header the parse checked is at 14: TTL at 22, its checksum at 24..26.
        if h[22] <= 1 {
            counters.ttl_expired += 1;
            tx.drop(pool, b, DropReason::TtlExpired);
            continue;
        }
        h[22] -= 1;
        if let Some(c) = h.get_mut(24..26).and_then(|c| c.first_chunk_mut::<2>()) {
            *c = checksum::update_ttl_decrement_ne(*c);
        }
        forwarded += 1;
        let Some(head) = memo.head else {
            tx.drop(pool, b, DropReason::NoRoute);
            continue;
        };
        if let Some(m) = h.first_chunk_mut::<12>() {
            *m = head;
        }
        tx.push(pool, b, memo.port);
    }
    counters.forwarded4 += forwarded;
    took
}

/// One entry of `forward_v4`'s next-hop memo: next hop `hop` leaves by `port` with link
/// header `head` (`None`: the chain has no port `port`).
#[derive(Clone, Copy)]
struct HeadMemo {
    hop: u32,
    port: u8,
    head: Option<[u8; 12]>,
}

/// What one forwarder instance counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct L3fwdCounters {
    /// IPv4 packets forwarded.
    pub forwarded4: u64,
    /// IPv6 packets forwarded.
    pub forwarded6: u64,
    /// Dropped: no route (`NoRoute`).
    pub no_route: u64,
    /// Dropped: TTL / hop limit 0 or 1 on arrival (`TtlExpired`).
    pub ttl_expired: u64,
}

/// The forwarder on one worker core.
#[derive(Debug)]
pub struct L3fwd {
    shared: Arc<L3fwdShared>,
    tables: Reader<L3Tables>,
    counters: L3fwdCounters,
}

impl L3fwd {
    /// An instance over `shared`.
    pub fn new(shared: Arc<L3fwdShared>) -> Self {
        let tables = shared.tables.reader();
        Self { shared, tables, counters: L3fwdCounters::default() }
    }

    /// This instance's counters.
    pub fn counters(&self) -> &L3fwdCounters {
        &self.counters
    }

    /// Decrements the TTL / hop limit of the IP header at `ip` in place (IPv4: with the
    /// RFC 1624 checksum update). `Err` when it is 0 or 1.
    fn decrement(frame: &mut [u8], ip: usize, l3: L3Kind) -> Result<(), DropReason> {
        let at = match l3 {
            L3Kind::Ipv4 => ip + 8,
            L3Kind::Ipv6 => ip + 7,
        };
        let ttl = frame.get(at).copied().unwrap_or(0);
        if ttl <= 1 {
            return Err(DropReason::TtlExpired);
        }
        if let Some(b) = frame.get_mut(at) {
            *b = ttl - 1;
        }
        if l3 == L3Kind::Ipv4 {
            // TTL is the high byte of the word at offset 8 (TTL, protocol): RFC 1624 eqn. 3
            // for that word, which for a decrement by one does not depend on its value.
            if let Some(c) = frame.get_mut(ip + 10..ip + 12).and_then(|c| c.first_chunk_mut::<2>()) {
                *c = checksum::update_ttl_decrement(u16::from_be_bytes(*c)).to_be_bytes();
            }
        }
        Ok(())
    }
}

impl Nf for L3fwd {
    fn name(&self) -> &'static str {
        "l3fwd"
    }

    /// The destination address and the TTL: the IP header only.
    fn reads(&self) -> Depth {
        Depth::L3
    }

    fn process(&mut self, _ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        // The tables in force for this whole batch (a route change lands between batches); the
        // IPv4 structure is chosen once per batch, not per packet.
        let t = self.tables.get(&self.shared.tables);
        let c = &mut self.counters;
        match &t.lpm4 {
            Routes4::Trie(r) => forward(c, t, pool, batch, |a| r.lookup(a)),
            Routes4::Poptrie(r) => forward(c, t, pool, batch, |a| r.lookup(a)),
        }
    }

    fn vector_v4(&self) -> bool {
        true
    }

    /// `process` and the egress in one pass for the common IPv4 frame: the same lookup, TTL
    /// decrement, counters and next hop; the frame's memory is looked at once.
    fn run_vector(&mut self, _ctx: &NfCtx, pool: &mut Pool<'_>, input: &[PacketBuf], tx: &mut VectorTx<'_>) -> usize {
        let t = self.tables.get(&self.shared.tables);
        let c = &mut self.counters;
        match &t.lpm4 {
            Routes4::Trie(r) => forward_v4(c, &t.out4, pool, input, tx, |a| r.lookup(a)),
            Routes4::Poptrie(r) => forward_v4(c, &t.out4, pool, input, tx, |a| r.lookup(a)),
        }
    }

    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        write!(
            w,
            " l3fwd_forwarded4={} l3fwd_forwarded6={} l3fwd_no_route={} l3fwd_ttl_expired={}",
            c.forwarded4, c.forwarded6, c.no_route, c.ttl_expired
        )
    }
}

#[cfg(test)]
mod tests;
