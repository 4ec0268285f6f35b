//! The chain's top-level records for the ports' addresses and the neighbour table
//! (`crate::neigh`):
//!
//! | key | value |
//! |---|---|
//! | `port.addr` | `port:N,addr:IPv4/LEN` or `port:N,addr:IPv6/LEN` (list: one record per address, at most `neigh::MAX_ADDRS` per port and family; IPv6 ones answer neighbour solicitations and echo requests, and send the solicitations for IPv6 next hops) |
//! | `port.mtu` | `port:N,mtu:M`: the longest IP packet port N sends, 1280..=9000 (default 1500; list: at most one record per port) |
//! | `port.vlan` | `iface:I,port:N,vid:V`: interface I (`stage::PORTS..vlan::IFACES`) is 802.1Q VLAN V (1..=4094) on port N (list; `crate::vlan`). Every other record may name I where it names a port |
//! | `neigh.static` | `port:N,ip:IP,mac:MAC`, IPv4 or IPv6 (list) |
//! | `neigh.capacity` | entries, static ones included (default 256) |
//! | `neigh.probes` | requests before an entry fails (default 3) |
//! | `neigh.max_waiting` | frames waiting for answers over the whole table (default 64) |
//! | `neigh.reachable_ms`, `neigh.stale_ms`, `neigh.retrans_ms` | reachable (30 000), stale until removed (60 000), between two requests (1 000) |
//! | `neigh.icmp_rate` | ICMP errors per second per port (default 1 000; 0 sends none) |
//! | `neigh.icmp_burst` | ICMP errors a port may send at once (default 50; 0 sends none) |
//!
//! Any of them gives the chain a neighbour table: it answers ARP and ICMP echo for its
//! addresses and the L3 forwarder's `via:` next hops (IPv4 by ARP, IPv6 by neighbour
//! discovery) resolve through it.

use core::net::IpAddr as NetIp;

use super::{Fail, SpecErrorKind, once, record, req, timeout_ms, values};
use crate::neigh::{NeighConfig, NeighConfigError, PortAddr, PortAddr6, StaticNeigh};
use crate::time::{Duration, TickRate};
use crate::vlan::Vlan;
use alloc::vec::Vec;

/// The neighbour records of a chain as the text form gives them (timeouts in ms).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NeighSpec {
    /// Addresses, static neighbours, capacity and probes (durations: the defaults).
    pub cfg: NeighConfig,
    /// `neigh.reachable_ms`.
    pub reachable_ms: Option<u64>,
    /// `neigh.stale_ms`.
    pub stale_ms: Option<u64>,
    /// `neigh.retrans_ms`.
    pub retrans_ms: Option<u64>,
    /// `neigh.icmp_rate` (per second).
    pub icmp_rate: Option<u32>,
    /// The line of `neigh.icmp_rate` / `neigh.icmp_burst`, once given.
    icmp_rate_line: Option<usize>,
    icmp_burst: Option<usize>,
    /// The line of `neigh.capacity` / `neigh.probes`, once given.
    capacity: Option<usize>,
    probes: Option<usize>,
    max_waiting: Option<usize>,
    /// The line of each `port.addr` and `neigh.static` record.
    addr_lines: Vec<usize>,
    static_lines: Vec<usize>,
    addr6_lines: Vec<usize>,
    /// The line of each port's `port.mtu` record.
    mtu_lines: Vec<(u8, usize)>,
    /// The line of each `port.vlan` record.
    vlan_lines: Vec<usize>,
}

/// The keys of this section.
pub(crate) const KEYS: [&str; 12] = [
    "port.addr",
    "port.mtu",
    "port.vlan",
    "neigh.static",
    "neigh.capacity",
    "neigh.probes",
    "neigh.max_waiting",
    "neigh.reachable_ms",
    "neigh.stale_ms",
    "neigh.retrans_ms",
    "neigh.icmp_rate",
    "neigh.icmp_burst",
];

fn port(s: &str) -> Result<u8, &'static str> {
    values::u16_dec(s).ok().and_then(|n| u8::try_from(n).ok()).ok_or("a port number 0..=255")
}

impl NeighSpec {
    /// Sets `key` (one of [`KEYS`]) from `value`, found on `line`.
    pub(crate) fn set(&mut self, key: &'static str, value: &str, line: usize) -> Result<(), Fail> {
        match key {
            "port.addr" => {
                let [p, a] = record(value, ["port", "addr"])?;
                let port = req("port", p, port)?;
                let (addr, len) = req("addr", a, |s| {
                    const E: &str = "IPv4/LEN or IPv6/LEN";
                    let (a, l) = s.split_once('/').ok_or(E)?;
                    let len = values::u16_dec(l).ok().and_then(|n| u8::try_from(n).ok()).ok_or(E)?;
                    Ok((values::ip(a).map_err(|_| E)?, len))
                })?;
                match addr {
                    NetIp::V4(a) => {
                        self.cfg.addrs.push(PortAddr { port, addr: a.octets(), len });
                        self.addr_lines.push(line);
                    }
                    NetIp::V6(a) => {
                        self.cfg.addrs6.push(PortAddr6 { port, addr: a.octets(), len });
                        self.addr6_lines.push(line);
                    }
                }
            }
            "port.mtu" => {
                let [p, m] = record(value, ["port", "mtu"])?;
                let port = req("port", p, port)?;
                let mtu = req("mtu", m, |s| values::u16_dec(s).map_err(|_| "an MTU in bytes"))?;
                if self.mtu_lines.iter().any(|&(q, _)| q == port) {
                    return Err(Fail::value("a second port.mtu for the same port"));
                }
                let slot = self.cfg.mtu.get_mut(usize::from(port)).ok_or(Fail::value("a port of the dataplane"))?;
                *slot = mtu;
                self.mtu_lines.push((port, line));
            }
            "port.vlan" => {
                let [i, p, v] = record(value, ["iface", "port", "vid"])?;
                let vlan = Vlan {
                    iface: req("iface", i, port)?,
                    port: req("port", p, port)?,
                    vid: req("vid", v, |s| values::u16_dec(s).map_err(|_| "a VLAN ID 1..=4094"))?,
                };
                self.cfg.vlans.push(vlan);
                self.vlan_lines.push(line);
            }
            "neigh.static" => {
                let [p, ip, mac] = record(value, ["port", "ip", "mac"])?;
                let s = StaticNeigh {
                    port: req("port", p, port)?,
                    ip: req("ip", ip, super::sections::addr)?,
                    mac: req("mac", mac, values::mac)?,
                };
                self.cfg.statics.push(s);
                self.static_lines.push(line);
            }
            "neigh.capacity" => {
                once(&mut self.capacity, line)?;
                self.cfg.capacity = values::usize_dec(value).map_err(Fail::value)?;
            }
            "neigh.probes" => {
                once(&mut self.probes, line)?;
                let n = values::u16_dec(value).ok().and_then(|n| u8::try_from(n).ok());
                self.cfg.probes = n.ok_or(Fail::value("an integer 1..=255"))?;
            }
            "neigh.max_waiting" => {
                once(&mut self.max_waiting, line)?;
                self.cfg.max_waiting = values::usize_dec(value).map_err(Fail::value)?;
            }
            "neigh.icmp_rate" => {
                once(&mut self.icmp_rate_line, line)?;
                self.icmp_rate = Some(values::u32_dec(value).map_err(Fail::value)?);
            }
            "neigh.icmp_burst" => {
                once(&mut self.icmp_burst, line)?;
                self.cfg.icmp_burst = values::u32_dec(value).map_err(Fail::value)?;
            }
            "neigh.reachable_ms" => timeout_ms(&mut self.reachable_ms, value)?,
            "neigh.stale_ms" => timeout_ms(&mut self.stale_ms, value)?,
            _ => timeout_ms(&mut self.retrans_ms, value)?,
        }
        Ok(())
    }

    /// Checks the config; an error names the line and key of the record at fault (`None`:
    /// no single record).
    pub(crate) fn finish(&self) -> Result<(), super::sections::FinishError> {
        self.cfg.validate().map_err(|e| {
            let at = match e {
                NeighConfigError::AddrPort { index }
                | NeighConfigError::AddrBad { index }
                | NeighConfigError::AddrCount { index } => self.addr_lines.get(index).map(|&l| (l, "port.addr")),
                NeighConfigError::StaticPort { index } | NeighConfigError::StaticBad { index } => {
                    self.static_lines.get(index).map(|&l| (l, "neigh.static"))
                }
                NeighConfigError::Capacity => self.capacity.map(|l| (l, "neigh.capacity")),
                NeighConfigError::Probes => self.probes.map(|l| (l, "neigh.probes")),
                NeighConfigError::MaxWaiting => self.max_waiting.map(|l| (l, "neigh.max_waiting")),
                NeighConfigError::Addr6 { index } => self.addr6_lines.get(index).map(|&l| (l, "port.addr")),
                NeighConfigError::Vlan { index, .. } => self.vlan_lines.get(index).map(|&l| (l, "port.vlan")),
                NeighConfigError::Mtu { port } => {
                    self.mtu_lines.iter().find(|&&(q, _)| usize::from(q) == port).map(|&(_, l)| (l, "port.mtu"))
                }
            };
            (at, Fail { field: None, kind: SpecErrorKind::Neigh(e) })
        })
    }

    /// The config with its timeouts in ticks of a clock at `rate` (at least one tick).
    pub fn config(&self, rate: TickRate) -> NeighConfig {
        let ticks = |ms: u64| Duration(rate.ticks_from_ms(ms).ticks().max(1));
        let mut c = self.cfg.clone();
        c.reachable = ticks(self.reachable_ms.unwrap_or(30_000));
        c.stale = ticks(self.stale_ms.unwrap_or(60_000));
        c.retrans = ticks(self.retrans_ms.unwrap_or(1_000));
        match self.icmp_rate {
            Some(0) => c.icmp_burst = 0,
            Some(r) => c.icmp_interval = Duration((rate.ticks_from_ms(1_000).ticks() / u64::from(r)).max(1)),
            None => c.icmp_interval = Duration((rate.ticks_from_ms(1_000).ticks() / 1_000).max(1)),
        }
        c
    }
}
