//! The neighbour table shared by a chain's workers ([`NeighShared`]): its entries, the
//! frames waiting in them, learning from ARP and IPv6 neighbour discovery (`crate::neigh`
//! module docs).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use super::{NeighConfig, NeighConfigError, NeighCounters, PortAddr, PortAddr6, QUEUE, State};
use crate::buf::PacketBuf;
use crate::drops::DropReason;
use crate::parse::IpAddr;
use crate::stage::PORTS;
use crate::time::Instant;
use crate::vlan::{IFACES, VlanMap};

/// A frame waiting for its neighbour.
#[derive(Debug, Clone, Copy)]
pub(super) struct Waiting {
    pub(super) lane: u16,
    pub(super) buf: PacketBuf,
}

/// One neighbour.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) ip: IpAddr,
    pub(super) port: u8,
    pub(super) mac: [u8; 6],
    pub(super) state: State,
    /// When the state was last set (or the last request sent, while incomplete).
    pub(super) since: Instant,
    /// Requests sent while incomplete.
    pub(super) probes: u8,
    pub(super) queue: heapless::Vec<Waiting, QUEUE>,
}

/// A neighbour as [`NeighShared::entries`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighView {
    /// Its address (IPv4 or IPv6).
    pub ip: IpAddr,
    /// Its port.
    pub port: u8,
    /// Its MAC (zero while incomplete).
    pub mac: [u8; 6],
    /// Its state.
    pub state: State,
    /// Frames waiting for it.
    pub queued: usize,
}

#[derive(Debug)]
pub(super) struct Table {
    pub(super) entries: Vec<Entry>,
    /// Frames waiting over every entry (at most `NeighConfig::max_waiting`).
    pub(super) waiting: usize,
}

impl Table {
    pub(super) fn find(&self, ip: IpAddr) -> Option<usize> {
        self.entries.iter().position(|e| e.ip == ip)
    }
}

/// Why a neighbour could not be set or removed by the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NeighEdit {
    /// The port is not one of the dataplane's.
    BadPort,
    /// The address is one of ours, unspecified or multicast, or the MAC a group address.
    NotANeighbour,
    /// The table is full.
    Full,
    /// No entry for the address.
    NotFound,
}

impl core::fmt::Display for NeighEdit {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::BadPort => "port out of range",
            Self::NotANeighbour => "not a neighbour's address or MAC (ours, unspecified, multicast, or a group MAC)",
            Self::Full => "the neighbour table is full",
            Self::NotFound => "no such neighbour",
        })
    }
}

/// The neighbour table and the ports' addresses, shared by every worker of a chain.
#[derive(Debug)]
pub struct NeighShared {
    pub(super) cfg: NeighConfig,
    /// Each interface's MAC (a sub-interface has its port's).
    pub(super) own_mac: [[u8; 6]; IFACES],
    /// The sub-interfaces (`NeighConfig::vlans`).
    pub(super) vlans: VlanMap,
    pub(super) table: spin::Mutex<Table>,
    /// Bumped when a resolved mapping changes or goes (workers drop their caches).
    pub(super) generation: AtomicU64,
    /// Bit `lane % 64`: frames of that lane wait in an entry that was resolved or failed.
    pub(super) ready: AtomicU64,
    /// When ageing is next due (clock ticks; written under the table's lock).
    pub(super) next_age: AtomicU64,
    /// [`filter_bit`] of every own address.
    pub(super) own_filter: u64,
    /// Per interface: the ICMP error bucket's theoretical arrival time (clock ticks; see
    /// [`NeighShared::icmp_allow`]).
    pub(super) icmp_tat: [AtomicU64; IFACES],
}

/// One of 64 bits for an address (a one-word Bloom filter of the own addresses).
#[inline(always)]
pub(super) fn filter_bit(ip: [u8; 4]) -> u64 {
    1 << (u32::from_be_bytes(ip).wrapping_mul(0x9E37_79B1) >> 26)
}

impl NeighShared {
    /// The sub-interfaces.
    pub fn vlans(&self) -> VlanMap {
        self.vlans
    }

    /// Validates `cfg` and builds the table (allocated here, once) for ports with MACs
    /// `own_mac` (a sub-interface gets its port's).
    pub fn try_new(cfg: &NeighConfig, own_mac: [[u8; 6]; PORTS]) -> Result<Self, NeighConfigError> {
        cfg.validate()?;
        let vlans = cfg.vlan_map()?;
        let own_mac =
            core::array::from_fn(|i| vlans.port_of(i).and_then(|p| own_mac.get(p)).copied().unwrap_or_default());
        let mut entries = Vec::new();
        entries.try_reserve_exact(cfg.capacity).map_err(|_| NeighConfigError::Capacity)?;
        for s in &cfg.statics {
            entries.push(Entry {
                ip: s.ip,
                port: s.port,
                mac: s.mac,
                state: State::Static,
                since: Instant(0),
                probes: 0,
                queue: heapless::Vec::new(),
            });
        }
        Ok(Self {
            cfg: cfg.clone(),
            own_mac,
            vlans,
            table: spin::Mutex::new(Table { entries, waiting: 0 }),
            next_age: AtomicU64::new(0),
            own_filter: cfg.addrs.iter().fold(0, |f, a| f | filter_bit(a.addr)),
            generation: AtomicU64::new(0),
            ready: AtomicU64::new(0),
            icmp_tat: core::array::from_fn(|_| AtomicU64::new(0)),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &NeighConfig {
        &self.cfg
    }

    /// Whether `ip` is one of the dataplane's own addresses (on any port): a one-word filter
    /// first (most packets are not for us), then the list.
    #[inline]
    pub fn is_own(&self, ip: [u8; 4]) -> bool {
        self.own_filter & filter_bit(ip) != 0 && self.cfg.addrs.iter().any(|a| a.addr == ip)
    }

    /// Whether `ip` is one of the dataplane's IPv6 addresses, or the solicited-node multicast
    /// address of one (where solicitations for it go).
    pub fn is_local6(&self, ip: &[u8; 16]) -> bool {
        self.cfg.addrs6.iter().any(|a| a.addr == *ip || super::nd::solicited_node(&a.addr) == *ip)
    }

    /// Whether `ip` is an IPv6 address of `port`.
    pub(super) fn owned_by6(&self, port: u8, ip: &[u8; 16]) -> bool {
        self.cfg.addrs6.iter().any(|a| a.port == port && a.addr == *ip)
    }

    /// The IPv6 address of `port` whose prefix covers `ip` (else its first address): the
    /// sender of solicitations for `ip` and of ICMPv6 errors to it.
    pub(super) fn source_for6(&self, port: u8, ip: &[u8; 16]) -> Option<[u8; 16]> {
        let ip = u128::from_be_bytes(*ip);
        let on = |a: &&PortAddr6| a.port == port;
        let covers = |a: &&PortAddr6| {
            let mask = u128::MAX.checked_shl(128 - u32::from(a.len.min(128))).unwrap_or(0);
            (u128::from_be_bytes(a.addr) ^ ip) & mask == 0
        };
        let addrs = &self.cfg.addrs6;
        addrs.iter().filter(on).find(covers).or_else(|| addrs.iter().find(on)).map(|a| a.addr)
    }

    /// Whether `ip` is an address of `port`.
    pub(super) fn owned_by(&self, port: u8, ip: [u8; 4]) -> bool {
        self.cfg.addrs.iter().any(|a| a.port == port && a.addr == ip)
    }

    /// The address of `port` whose subnet holds `ip` (else its first address): the sender
    /// of requests for `ip`.
    pub(super) fn source_for(&self, port: u8, ip: [u8; 4]) -> Option<[u8; 4]> {
        let on = |a: &&PortAddr| a.port == port;
        let mask = |len: u8| if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
        let same = |a: &&PortAddr| (u32::from_be_bytes(a.addr) ^ u32::from_be_bytes(ip)) & mask(a.len) == 0;
        self.cfg.addrs.iter().filter(on).find(same).or_else(|| self.cfg.addrs.iter().find(on)).map(|a| a.addr)
    }

    /// Whether `port` may send an ICMP error at `now`: a token bucket of
    /// [`NeighConfig::icmp_burst`](super::NeighConfig::icmp_burst) tokens refilled one per
    /// `icmp_interval`, kept as one atomic word per port shared by every worker (the
    /// generic cell rate algorithm, ITU-T I.371: the bucket is the distance between the
    /// theoretical arrival time `tat` and `now`; a send moves `tat` one interval on, and is
    /// refused when that would put it more than `burst` intervals ahead of `now`).
    pub(super) fn icmp_allow(&self, port: u8, now: Instant) -> bool {
        let (interval, burst) = (self.cfg.icmp_interval.ticks().max(1), u64::from(self.cfg.icmp_burst));
        let Some(tat) = self.icmp_tat.get(usize::from(port)) else { return false };
        if burst == 0 {
            return false;
        }
        let limit = now.ticks().saturating_add(interval.saturating_mul(burst));
        tat.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
            let next = t.max(now.ticks()).saturating_add(interval);
            (next <= limit).then_some(next)
        })
        .is_ok()
    }

    /// Whether `ip` is the broadcast address of one of the ports' subnets (below /31).
    pub(super) fn is_subnet_broadcast(&self, ip: [u8; 4]) -> bool {
        let ip = u32::from_be_bytes(ip);
        self.cfg.addrs.iter().any(|a| {
            let host = u32::MAX.checked_shr(u32::from(a.len)).unwrap_or(0);
            a.len < 31 && ip & host == host && (ip ^ u32::from_be_bytes(a.addr)) & !host == 0
        })
    }

    /// Frames waiting for an answer, over the table (takes the lock).
    pub fn waiting(&self) -> usize {
        self.table.lock().waiting
    }

    /// Every entry, for a listing (takes the lock).
    pub fn entries(&self) -> Vec<NeighView> {
        let t = self.table.lock();
        t.entries
            .iter()
            .map(|e| NeighView { ip: e.ip, port: e.port, mac: e.mac, state: e.state, queued: e.queue.len() })
            .collect()
    }

    pub(super) fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    pub(super) fn mark_ready(&self, e: &Entry) {
        let bits = e.queue.iter().fold(0u64, |b, w| b | 1 << (w.lane % 64));
        if bits != 0 {
            self.ready.fetch_or(bits, Ordering::Release);
        }
    }

    /// Control plane: `ip` becomes a static neighbour at `mac` behind `port` (never aged,
    /// never changed by ARP or neighbour discovery): a new entry, or the one `ip` has — frames
    /// waiting in it then go to `mac` (their lanes send them at their next housekeeping).
    pub fn set_static(&self, port: u8, ip: IpAddr, mac: [u8; 6], now: Instant) -> Result<(), NeighEdit> {
        if !self.vlans.exists(usize::from(port)) {
            return Err(NeighEdit::BadPort);
        }
        if !self.neighbour_ok(ip, mac) {
            return Err(NeighEdit::NotANeighbour);
        }
        let mut t = self.table.lock();
        let full = t.entries.len() >= self.cfg.capacity;
        let found = t.find(ip);
        match found.and_then(|i| t.entries.get_mut(i)) {
            Some(e) => {
                let was = e.state;
                (e.mac, e.port, e.state, e.since, e.probes) = (mac, port, State::Static, now, 0);
                if matches!(was, State::Incomplete | State::Failed) {
                    self.mark_ready(e);
                }
            }
            None if full => return Err(NeighEdit::Full),
            None => t.entries.push(Self::entry(ip, port, mac, State::Static, now)),
        }
        drop(t);
        self.bump();
        Ok(())
    }

    /// Control plane: forgets `ip`'s entry, static or learned. One with frames waiting fails
    /// instead (their lanes drop them, `neigh_unresolved`) and goes at the next ageing once
    /// they are out; a later frame for `ip` asks for it again.
    pub fn remove(&self, ip: IpAddr) -> Result<(), NeighEdit> {
        let mut t = self.table.lock();
        let i = t.find(ip).ok_or(NeighEdit::NotFound)?;
        match t.entries.get_mut(i) {
            Some(e) if !e.queue.is_empty() => {
                (e.state, e.since) = (State::Failed, Instant(0));
                self.mark_ready(e);
            }
            _ => {
                t.entries.swap_remove(i);
            }
        }
        drop(t);
        self.bump();
        Ok(())
    }

    /// Whether `ip` may be a neighbour: a unicast address that is not ours.
    fn neighbour_ok(&self, ip: IpAddr, mac: [u8; 6]) -> bool {
        let ok = match ip {
            IpAddr::V4(a) => a != [0; 4] && !self.is_own(a),
            IpAddr::V6(a) => a != [0; 16] && a[0] != 0xff && !self.cfg.addrs6.iter().any(|o| o.addr == a),
        };
        ok && mac[0] & 1 == 0
    }

    /// Learns `ip` at `mac` behind `port` from an ARP frame. `create`: a new entry may be
    /// made (the frame was addressed to us, RFC 826's merge rule); otherwise only an
    /// existing one is updated. Static entries are never changed. Returns whether an entry
    /// was created or updated, and counts in `c`.
    pub(super) fn learn(
        &self,
        port: u8,
        ip: IpAddr,
        mac: [u8; 6],
        create: bool,
        now: Instant,
        c: &mut NeighCounters,
    ) -> bool {
        if !self.neighbour_ok(ip, mac) {
            return false;
        }
        let mut t = self.table.lock();
        match t.find(ip) {
            Some(i) => {
                let Some(e) = t.entries.get_mut(i) else { return false };
                if e.state == State::Static {
                    return false;
                }
                let moved = e.state.usable() && (e.mac != mac || e.port != port);
                let was = e.state;
                (e.mac, e.port, e.state, e.since, e.probes) = (mac, port, State::Reachable, now, 0);
                if matches!(was, State::Incomplete | State::Failed) {
                    c.resolved += 1;
                    self.mark_ready(e);
                }
                if moved {
                    self.bump();
                }
                c.updated += 1;
                true
            }
            None if !create => false,
            None => Self::insert(&mut t, &self.cfg, Self::entry(ip, port, mac, State::Reachable, now), c),
        }
    }

    fn entry(ip: IpAddr, port: u8, mac: [u8; 6], state: State, now: Instant) -> Entry {
        Entry { ip, port, mac, state, since: now, probes: 0, queue: heapless::Vec::new() }
    }

    fn insert(t: &mut Table, cfg: &NeighConfig, e: Entry, c: &mut NeighCounters) -> bool {
        if t.entries.len() >= cfg.capacity {
            c.table_full += 1;
            return false;
        }
        t.entries.push(e);
        c.learned += 1;
        true
    }

    /// A neighbour advertisement for `a.target` received on `port` (RFC 4861 §7.2.5). No
    /// entry (or a static one): `Err(NdUnsolicited)`, nothing changed (an advertisement nobody asked for;
    /// "If no entry exists, the advertisement SHOULD be silently discarded"). An incomplete
    /// (or failed) entry takes the target link-layer address ("If the advertisement's
    /// Solicited flag is set, the state of the entry is set to REACHABLE; otherwise, it is
    /// set to STALE") and its waiting frames go; none given: discarded (`Err(NdBad)`). A
    /// resolved entry:
    /// "If the Override flag is clear and the supplied link-layer address differs from that
    /// in the cache, then … If the state of the entry is REACHABLE, set it to STALE, but do
    /// not update the entry in any other way"; otherwise the address (if given) is recorded,
    /// REACHABLE if solicited, else STALE if the address changed.
    pub(super) fn advertised(
        &self,
        port: u8,
        a: &super::nd::Advert,
        now: Instant,
        c: &mut NeighCounters,
    ) -> Result<(), DropReason> {
        let mut t = self.table.lock();
        let found = t.find(IpAddr::V6(a.target)).and_then(|i| t.entries.get_mut(i));
        let Some(e) = found.filter(|e| e.state != State::Static) else { return Err(DropReason::NdUnsolicited) };
        if matches!(e.state, State::Incomplete | State::Failed) {
            let Some(mac) = a.mac.filter(|m| m[0] & 1 == 0) else { return Err(DropReason::NdBad) };
            let state = if a.solicited { State::Reachable } else { State::Stale };
            (e.mac, e.port, e.state, e.since, e.probes) = (mac, port, state, now, 0);
            c.resolved += 1;
            c.nd_resolved += 1;
            self.mark_ready(e);
            return Ok(());
        }
        let differs = a.mac.is_some_and(|m| m != e.mac) || e.port != port;
        if !a.override_ && differs {
            if e.state == State::Reachable {
                (e.state, e.since) = (State::Stale, now);
            }
            return Ok(());
        }
        if let Some(mac) = a.mac.filter(|m| m[0] & 1 == 0 && differs) {
            (e.mac, e.port) = (mac, port);
            self.bump();
        }
        if a.solicited {
            (e.state, e.since) = (State::Reachable, now);
        } else if differs {
            (e.state, e.since) = (State::Stale, now);
        }
        c.updated += 1;
        Ok(())
    }

    /// A solicitation for our address from `ip` at `mac` (its source link-layer address
    /// option) received on `port`, RFC 4861 §7.2.3: "If an entry does not already exist, the
    /// node SHOULD create a new one and set its reachability state to STALE … If an entry
    /// already exists, and the cached link-layer address differs from the one in the received
    /// Source Link-Layer option, the cached address should be replaced by the received
    /// address, and its reachability state MUST be set to STALE." An incomplete entry is
    /// resolved by it (its frames go). Static entries are never changed.
    pub(super) fn solicited_by(&self, port: u8, ip: [u8; 16], mac: [u8; 6], now: Instant, c: &mut NeighCounters) {
        let ip = IpAddr::V6(ip);
        if !self.neighbour_ok(ip, mac) {
            return;
        }
        let mut t = self.table.lock();
        match t.find(ip).and_then(|i| t.entries.get_mut(i)) {
            None => {
                Self::insert(&mut t, &self.cfg, Self::entry(ip, port, mac, State::Stale, now), c);
            }
            Some(e) if e.state == State::Static || (e.state.usable() && e.mac == mac && e.port == port) => {}
            Some(e) => {
                let was = e.state;
                (e.mac, e.port, e.state, e.since, e.probes) = (mac, port, State::Stale, now, 0);
                if matches!(was, State::Incomplete | State::Failed) {
                    c.resolved += 1;
                    c.nd_resolved += 1;
                    self.mark_ready(e);
                } else {
                    self.bump();
                }
                c.updated += 1;
            }
        }
    }
}
