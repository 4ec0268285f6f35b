//! Neighbours: the dataplane's own per-port IPv4 addresses, the table of the IPv4 neighbours
//! behind each port (ARP, RFC 826), the frames waiting for a neighbour to be resolved, and
//! the ICMP echo answered for the dataplane's own addresses ([`echo`]).
//!
//! # The table
//!
//! One [`NeighShared`] per chain, shared by every worker: a bounded array of entries
//! ([`NeighConfig::capacity`]; full → a new neighbour is refused and counted as
//! `neigh_table_full`, its frame dropped as [`DropReason::NeighUnresolved`]), each in one of
//! the states of RFC 4861 §7.3.2 that apply to ARP ([`State`]): `incomplete` (a request is
//! out), `reachable` (confirmed within [`NeighConfig::reachable`]), `stale` (still used,
//! not confirmed lately), `failed` (no answer after [`NeighConfig::probes`] requests one
//! [`NeighConfig::retrans`] apart) and `static` (from the configuration, never aged). The
//! ageing runs on the worker clock in [`Router::housekeep`] (at most once per `retrans`, by
//! whichever worker gets there): reachable → stale after `reachable`; stale entries and
//! failed ones are removed after `stale` more; incomplete ones are asked again every
//! `retrans` until they fail.
//!
//! An incomplete entry holds up to [`QUEUE`] frames waiting for the answer (full →
//! [`DropReason::NeighQueueFull`]). A frame's buffer belongs to the pool of the lane it was
//! received on and must leave through that lane (the pool and rings are the lane's; see
//! `crate::sync::Guarded`), so every waiting frame carries its lane, and only a worker that
//! holds that lane sends or frees it ([`Router::housekeep`]); `ready` has a bit per lane
//! (lane mod 64) saying "something of yours can go".
//!
//! # Sharing between workers
//!
//! The table sits behind a `spin::Mutex` taken only off the fast path: on a miss, on an ARP
//! frame, and in housekeeping. The fast path is each worker's own direct-mapped cache of
//! resolved entries ([`Router::lookup`]: one hash and one compare per packet), valid while
//! the table's `generation` (one atomic load per batch, [`Router::begin_batch`]) has not
//! moved; anything that changes or removes a resolved mapping bumps it. A per-worker table
//! would have been simpler but would ask each neighbour once per worker and could not hand a
//! frame queued by one worker to the answer another worker received; one table with
//! per-worker caches asks once and keeps the common path lock-free. The mutex is not modelled
//! under loom (it holds no lock-free protocol of its own; `spin::Mutex` is).
//!
//! Limitations (issue 27, later milestones): IPv4 only; untagged frames only; a stale entry
//! is used until removed (no unicast probe of a neighbour in use — hosts that talk through
//! the dataplane re-ask for its address and refresh it); a NetBlaze auxiliary core has no
//! lane, so a miss there drops the frame ([`DropReason::NeighUnresolved`]).

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::buf::{HEADROOM, PacketBuf, Pool};
use crate::drops::DropReason;
use crate::stage::PORTS;
use crate::time::{Duration, Instant};

pub mod arp;
pub mod echo;

use arp::Arp;

/// Frames that may wait for one neighbour's answer.
pub const QUEUE: usize = 4;
/// Entries of a worker's cache of resolved neighbours (a power of two).
const CACHE: usize = 64;
/// Most addresses per port.
pub const MAX_ADDRS: usize = 4;

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

/// A neighbour given in the configuration (never aged, never replaced by ARP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct StaticNeigh {
    /// The port behind which it is.
    pub port: u8,
    /// Its address.
    pub ip: [u8; 4],
    /// Its MAC.
    pub mac: [u8; 6],
}

/// Configuration of the neighbour table (plain data; [`NeighConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NeighConfig {
    /// The ports' own addresses.
    pub addrs: Vec<PortAddr>,
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
}

impl Default for NeighConfig {
    /// No addresses; 256 entries; reachable 30 s, stale 60 s, retransmit 1 s, 3 probes, in
    /// ticks of a 1 GHz clock until the chain build converts the milliseconds.
    fn default() -> Self {
        Self {
            addrs: Vec::new(),
            statics: Vec::new(),
            capacity: crate::miri_or(256, 16),
            reachable: Duration(30_000_000_000),
            stale: Duration(60_000_000_000),
            retrans: Duration(1_000_000_000),
            probes: 3,
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
            Self::StaticBad { index } => write!(f, "neigh.static[{index}]: address given twice, or a group MAC"),
            Self::Capacity => f.write_str("neigh.capacity: zero, or fewer than the static neighbours"),
            Self::Probes => f.write_str("neigh.probes: zero"),
        }
    }
}

impl NeighConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), NeighConfigError> {
        for (index, a) in self.addrs.iter().enumerate() {
            if usize::from(a.port) >= PORTS {
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
        for (index, s) in self.statics.iter().enumerate() {
            if usize::from(s.port) >= PORTS {
                return Err(NeighConfigError::StaticPort { index });
            }
            if s.mac[0] & 1 != 0 || self.statics.iter().take(index).any(|t| t.ip == s.ip) {
                return Err(NeighConfigError::StaticBad { index });
            }
        }
        if self.capacity == 0 || self.capacity < self.statics.len() {
            return Err(NeighConfigError::Capacity);
        }
        if self.probes == 0 {
            return Err(NeighConfigError::Probes);
        }
        Ok(())
    }
}

/// The state of a neighbour entry (RFC 4861 §7.3.2, as far as ARP goes).
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

/// A frame waiting for its neighbour.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    lane: u16,
    buf: PacketBuf,
}

/// One neighbour.
#[derive(Debug, Clone)]
struct Entry {
    ip: [u8; 4],
    port: u8,
    mac: [u8; 6],
    state: State,
    /// When the state was last set (or the last request sent, while incomplete).
    since: Instant,
    /// Requests sent while incomplete.
    probes: u8,
    queue: heapless::Vec<Waiting, QUEUE>,
}

/// A neighbour as [`NeighShared::entries`] lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NeighView {
    /// Its address.
    pub ip: [u8; 4],
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
struct Table {
    entries: Vec<Entry>,
}

impl Table {
    fn find(&self, ip: [u8; 4]) -> Option<usize> {
        self.entries.iter().position(|e| e.ip == ip)
    }
}

/// The neighbour table and the ports' addresses, shared by every worker of a chain.
#[derive(Debug)]
pub struct NeighShared {
    cfg: NeighConfig,
    own_mac: [[u8; 6]; PORTS],
    table: spin::Mutex<Table>,
    /// Bumped when a resolved mapping changes or goes (workers drop their caches).
    generation: AtomicU64,
    /// Bit `lane % 64`: frames of that lane wait in an entry that was resolved or failed.
    ready: AtomicU64,
    /// When ageing is next due (clock ticks; written under the table's lock).
    next_age: AtomicU64,
    /// [`filter_bit`] of every own address.
    own_filter: u64,
}

/// One of 64 bits for an address (a one-word Bloom filter of the own addresses).
#[inline(always)]
fn filter_bit(ip: [u8; 4]) -> u64 {
    1 << (u32::from_be_bytes(ip).wrapping_mul(0x9E37_79B1) >> 26)
}

impl NeighShared {
    /// Validates `cfg` and builds the table (allocated here, once) for ports with MACs
    /// `own_mac`.
    pub fn try_new(cfg: &NeighConfig, own_mac: [[u8; 6]; PORTS]) -> Result<Self, NeighConfigError> {
        cfg.validate()?;
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
            table: spin::Mutex::new(Table { entries }),
            next_age: AtomicU64::new(0),
            own_filter: cfg.addrs.iter().fold(0, |f, a| f | filter_bit(a.addr)),
            generation: AtomicU64::new(0),
            ready: AtomicU64::new(0),
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

    /// Whether `ip` is an address of `port`.
    fn owned_by(&self, port: u8, ip: [u8; 4]) -> bool {
        self.cfg.addrs.iter().any(|a| a.port == port && a.addr == ip)
    }

    /// The address of `port` whose subnet holds `ip` (else its first address): the sender
    /// of requests for `ip`.
    fn source_for(&self, port: u8, ip: [u8; 4]) -> Option<[u8; 4]> {
        let on = |a: &&PortAddr| a.port == port;
        let mask = |len: u8| if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) };
        let same = |a: &&PortAddr| (u32::from_be_bytes(a.addr) ^ u32::from_be_bytes(ip)) & mask(a.len) == 0;
        self.cfg.addrs.iter().filter(on).find(same).or_else(|| self.cfg.addrs.iter().find(on)).map(|a| a.addr)
    }

    /// Every entry, for a listing (takes the lock).
    pub fn entries(&self) -> Vec<NeighView> {
        let t = self.table.lock();
        t.entries
            .iter()
            .map(|e| NeighView { ip: e.ip, port: e.port, mac: e.mac, state: e.state, queued: e.queue.len() })
            .collect()
    }

    fn bump(&self) {
        self.generation.fetch_add(1, Ordering::Release);
    }

    fn mark_ready(&self, e: &Entry) {
        let bits = e.queue.iter().fold(0u64, |b, w| b | 1 << (w.lane % 64));
        if bits != 0 {
            self.ready.fetch_or(bits, Ordering::Release);
        }
    }

    /// Learns `ip` at `mac` behind `port` from an ARP frame. `create`: a new entry may be
    /// made (the frame was addressed to us, RFC 826's merge rule); otherwise only an
    /// existing one is updated. Static entries are never changed. Returns whether an entry
    /// was created or updated, and counts in `c`.
    fn learn(&self, port: u8, ip: [u8; 4], mac: [u8; 6], create: bool, now: Instant, c: &mut NeighCounters) -> bool {
        if mac[0] & 1 != 0 || ip == [0; 4] || self.is_own(ip) {
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
            None => {
                if t.entries.len() >= self.cfg.capacity {
                    c.table_full += 1;
                    return false;
                }
                t.entries.push(Entry {
                    ip,
                    port,
                    mac,
                    state: State::Reachable,
                    since: now,
                    probes: 0,
                    queue: heapless::Vec::new(),
                });
                c.learned += 1;
                true
            }
        }
    }
}

/// What one worker's neighbour handling counted (summed over workers in the reports).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NeighCounters {
    /// New entries from ARP frames addressed to us.
    pub learned: u64,
    /// Existing entries refreshed or changed by ARP.
    pub updated: u64,
    /// Incomplete entries an answer resolved.
    pub resolved: u64,
    /// ARP requests for our addresses answered.
    pub arp_replies: u64,
    /// ARP requests sent (misses, retransmissions).
    pub arp_requests: u64,
    /// ARP replies nobody asked for (ignored).
    pub arp_unsolicited: u64,
    /// A new neighbour refused: the table was full.
    pub table_full: u64,
    /// Frames queued for a neighbour being resolved.
    pub queued: u64,
    /// Queued frames sent once their neighbour answered.
    pub dequeued: u64,
    /// ICMP echo requests to our addresses answered.
    pub echo_replies: u64,
    /// No buffer for an ARP request.
    pub no_buf: u64,
}

/// What the chain does with an ARP frame ([`Router::arp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpAction {
    /// The frame is now the reply: send it out of its ingress port to this MAC.
    Reply([u8; 6]),
    /// Taken (learned from, or gratuitous update): free it, counted as consumed.
    Consumed,
    /// Drop it by this reason.
    Drop(DropReason),
}

/// What [`Router::miss`] and [`Router::housekeep`] ask the chain to do with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Emit {
    /// Send it out of `port` to `mac` (`generated`: a request the dataplane made, counted as
    /// generated; otherwise a frame that waited for its neighbour).
    Send {
        /// The port.
        port: u8,
        /// Its destination MAC.
        mac: [u8; 6],
        /// Whether the dataplane originated it.
        generated: bool,
    },
    /// Free it, counted under this reason.
    Drop(DropReason),
}

/// The broadcast MAC requests go to.
pub const BROADCAST: [u8; 6] = [0xFF; 6];

/// What became of a frame whose neighbour is not in the worker's cache ([`Router::miss`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// The neighbour is known after all: send to this MAC.
    Send([u8; 6]),
    /// The frame waits in the table (it is no longer the caller's).
    Queued,
    /// Drop it by this reason.
    Drop(DropReason),
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    /// [`slot_key`] of the neighbour; 0 (no valid key) when empty.
    key: u64,
    mac: [u8; 6],
}

/// A cache key: address, port and a valid bit in one word (one compare per lookup).
#[inline(always)]
fn slot_key(ip: [u8; 4], port: u8) -> u64 {
    1 << 40 | u64::from(port) << 32 | u64::from(u32::from_be_bytes(ip))
}

/// One worker's handle on the neighbour table: its cache of resolved neighbours, the lane
/// it holds, its counters.
#[derive(Debug)]
pub struct Router {
    shared: Arc<NeighShared>,
    generation: u64,
    cache: [Slot; CACHE],
    lane: Option<u16>,
    counters: NeighCounters,
}

#[inline(always)]
fn slot_of(ip: [u8; 4]) -> usize {
    (u32::from_be_bytes(ip).wrapping_mul(0x9E37_79B1) >> 26) as usize % CACHE
}

impl Router {
    /// A worker's handle on `shared` (no lane until [`Router::set_lane`]).
    pub fn new(shared: Arc<NeighShared>) -> Self {
        Self { shared, generation: u64::MAX, cache: [Slot::default(); CACHE], lane: None, counters: Default::default() }
    }

    /// The shared table.
    pub fn shared(&self) -> &Arc<NeighShared> {
        &self.shared
    }

    /// This worker's counters.
    pub fn counters(&self) -> &NeighCounters {
        &self.counters
    }

    /// The lane whose pool and rings the next batches use (`Stage::enter_lane`).
    pub fn set_lane(&mut self, lane: usize) {
        self.lane = u16::try_from(lane).ok();
    }

    /// Once per batch: drops the cache if the table's resolved mappings changed.
    #[inline]
    pub fn begin_batch(&mut self) {
        let g = self.shared.generation.load(Ordering::Acquire);
        if g != self.generation {
            self.cache = [Slot::default(); CACHE];
            self.generation = g;
        }
    }

    /// The fast path: the MAC of `ip` behind `port`, if this worker has it cached.
    #[inline(always)]
    pub fn lookup(&self, ip: [u8; 4], port: u8) -> Option<[u8; 6]> {
        let s = self.cache.get(slot_of(ip))?;
        (s.key == slot_key(ip, port)).then_some(s.mac)
    }

    /// Whether `ip` is one of the dataplane's own addresses.
    #[inline]
    pub fn is_own(&self, ip: [u8; 4]) -> bool {
        self.shared.is_own(ip)
    }

    /// Counts an ICMP echo answered.
    pub fn count_echo(&mut self) {
        self.counters.echo_replies += 1;
    }

    /// Builds a request for `ip` out of `port` in a fresh buffer of `pool` (`None`: no
    /// buffer, or the port has no address to ask from).
    fn request(&mut self, pool: &mut Pool<'_>, port: u8, ip: [u8; 4]) -> Option<PacketBuf> {
        let own_ip = self.shared.source_for(port, ip)?;
        let own_mac = *self.shared.own_mac.get(usize::from(port))?;
        let Some(b) = pool.alloc() else {
            self.counters.no_buf += 1;
            return None;
        };
        let ok = pool.set_frame(b, HEADROOM, arp::MIN_FRAME_LEN).is_ok()
            && arp::request(pool.frame_mut(b), own_mac, own_ip, ip);
        if !ok {
            let _ = pool.free(b);
            return None;
        }
        self.counters.arp_requests += 1;
        Some(b)
    }

    /// The slow path for `buf`, to go to `ip` behind `port`: the table's entry if it is
    /// usable (cached from now on); else the frame waits (a new incomplete entry asks at
    /// once, an incomplete one asks again when `retrans` has passed — each request goes to
    /// `emit` with its port). Takes the lock.
    pub fn miss(
        &mut self,
        pool: &mut Pool<'_>,
        buf: PacketBuf,
        ip: [u8; 4],
        port: u8,
        now: Instant,
        emit: &mut dyn FnMut(&mut Pool<'_>, PacketBuf, Emit),
    ) -> Miss {
        let shared = Arc::clone(&self.shared);
        let mut t = shared.table.lock();
        let found = t.find(ip);
        if let Some(e) = found.and_then(|i| t.entries.get(i))
            && e.state.usable()
        {
            if e.port != port {
                // Known behind another port than the route names: a configuration at odds
                // with the network; not guessed at.
                return Miss::Drop(DropReason::NeighUnresolved);
            }
            let mac = e.mac;
            drop(t);
            if let Some(s) = self.cache.get_mut(slot_of(ip)) {
                *s = Slot { key: slot_key(ip, port), mac };
            }
            return Miss::Send(mac);
        }
        // Waiting needs the lane whose pool the buffer is of.
        let Some(lane) = self.lane else { return Miss::Drop(DropReason::NeighUnresolved) };
        let i = match found {
            Some(i) => i,
            None if t.entries.len() >= shared.cfg.capacity => {
                self.counters.table_full += 1;
                return Miss::Drop(DropReason::NeighUnresolved);
            }
            None => {
                t.entries.push(Entry {
                    ip,
                    port,
                    mac: [0; 6],
                    state: State::Incomplete,
                    since: Instant(0),
                    probes: 0,
                    queue: heapless::Vec::new(),
                });
                t.entries.len() - 1
            }
        };
        let Some(e) = t.entries.get_mut(i) else { return Miss::Drop(DropReason::NeighUnresolved) };
        let retrans = shared.cfg.retrans;
        let due = e.probes == 0 || now.saturating_since(e.since) >= retrans;
        // A failed neighbour is asked again at most once per `retrans`.
        if e.state == State::Failed && !due {
            return Miss::Drop(DropReason::NeighUnresolved);
        }
        if e.queue.push(Waiting { lane, buf }).is_err() {
            return Miss::Drop(DropReason::NeighQueueFull);
        }
        self.counters.queued += 1;
        if e.state == State::Failed {
            (e.state, e.probes) = (State::Incomplete, 0);
        }
        if due {
            (e.since, e.probes) = (now, e.probes.saturating_add(1));
            drop(t);
            if let Some(r) = self.request(pool, port, ip) {
                emit(pool, r, Emit::Send { port, mac: BROADCAST, generated: true });
            }
        }
        Miss::Queued
    }

    /// An ARP frame `buf` received on `port`: answer a request for one of the port's
    /// addresses in place, learn from frames addressed to us, update an existing entry from a
    /// gratuitous announcement; ignore (and count) replies nobody asked for and frames for
    /// addresses we do not own.
    pub fn arp(&mut self, pool: &mut Pool<'_>, buf: PacketBuf, port: u8, now: Instant) -> ArpAction {
        let Some(a) = Arp::parse(pool.frame(buf)) else { return ArpAction::Drop(DropReason::ArpBad) };
        let shared = Arc::clone(&self.shared);
        let for_us = shared.owned_by(port, a.tpa);
        if !for_us {
            // Gratuitous: refreshes an entry we have, never makes one (RFC 5227 §2.4: hosts
            // update caches from announcements; a router need not learn every host).
            if a.is_gratuitous() && shared.learn(port, a.spa, a.sha, false, now, &mut self.counters) {
                return ArpAction::Consumed;
            }
            return ArpAction::Drop(DropReason::ArpNotOurs);
        }
        match a.op {
            arp::OP_REQUEST => {
                shared.learn(port, a.spa, a.sha, true, now, &mut self.counters);
                let Some(&own) = shared.own_mac.get(usize::from(port)) else {
                    return ArpAction::Drop(DropReason::ArpBad);
                };
                match arp::reply_in_place(pool.frame_mut(buf), &a, own) {
                    Some(to) => {
                        self.counters.arp_replies += 1;
                        ArpAction::Reply(to)
                    }
                    None => ArpAction::Drop(DropReason::ArpBad),
                }
            }
            _ => {
                // A reply: only one we asked for (an entry exists and is not static) counts.
                let asked = {
                    let t = shared.table.lock();
                    t.find(a.spa).and_then(|i| t.entries.get(i)).is_some_and(|e| e.state != State::Static)
                };
                if asked && shared.learn(port, a.spa, a.sha, false, now, &mut self.counters) {
                    ArpAction::Consumed
                } else {
                    self.counters.arp_unsolicited += 1;
                    ArpAction::Drop(DropReason::ArpUnsolicited)
                }
            }
        }
    }

    /// Housekeeping, once per poll on the lane this worker holds: sends or drops (through
    /// `emit`) the frames of this lane whose neighbour answered or failed; at most once per
    /// `retrans` over all workers, ages the table and asks incomplete neighbours again.
    pub fn housekeep(
        &mut self,
        pool: &mut Pool<'_>,
        now: Instant,
        emit: &mut dyn FnMut(&mut Pool<'_>, PacketBuf, Emit),
    ) {
        let Some(lane) = self.lane else { return };
        self.age(pool, now, emit);
        self.flush(lane, pool, emit);
    }

    /// Sends or drops the frames of `lane` whose neighbour answered or failed.
    fn flush(&mut self, lane: u16, pool: &mut Pool<'_>, emit: &mut dyn FnMut(&mut Pool<'_>, PacketBuf, Emit)) {
        let bit = 1u64 << (lane % 64);
        let shared = &self.shared;
        if shared.ready.load(Ordering::Acquire) & bit != 0 {
            shared.ready.fetch_and(!bit, Ordering::AcqRel);
            let mut t = shared.table.lock();
            for e in t.entries.iter_mut().filter(|e| e.state != State::Incomplete) {
                let mac = e.state.usable().then_some(e.mac);
                let port = e.port;
                let mut other = 0u64;
                e.queue.retain(|w| {
                    if w.lane != lane {
                        other |= 1 << (w.lane % 64);
                        return true;
                    }
                    match mac {
                        Some(mac) => {
                            self.counters.dequeued += 1;
                            emit(pool, w.buf, Emit::Send { port, mac, generated: false });
                        }
                        None => emit(pool, w.buf, Emit::Drop(DropReason::NeighUnresolved)),
                    }
                    false
                });
                if other != 0 {
                    shared.ready.fetch_or(other, Ordering::Release);
                }
            }
        }
    }

    /// At most once per `retrans` over all workers: ages the table, asks incomplete
    /// neighbours again.
    fn age(&mut self, pool: &mut Pool<'_>, now: Instant, emit: &mut dyn FnMut(&mut Pool<'_>, PacketBuf, Emit)) {
        let shared = &self.shared;
        // One relaxed load per poll when nothing is due.
        if now.ticks() < shared.next_age.load(Ordering::Relaxed) {
            return;
        }
        let retrans = shared.cfg.retrans;
        let mut asks: heapless::Vec<([u8; 4], u8), 8> = heapless::Vec::new();
        {
            let Some(mut t) = shared.table.try_lock() else { return };
            if now.ticks() < shared.next_age.load(Ordering::Relaxed) {
                return;
            }
            shared.next_age.store(now.saturating_add(retrans).ticks(), Ordering::Relaxed);
            let (reachable, stale, probes) = (shared.cfg.reachable, shared.cfg.stale, shared.cfg.probes);
            for e in t.entries.iter_mut() {
                let age = now.saturating_since(e.since);
                match e.state {
                    State::Reachable if age >= reachable => (e.state, e.since) = (State::Stale, now),
                    State::Incomplete if age >= retrans && e.probes >= probes => {
                        (e.state, e.since) = (State::Failed, now);
                        shared.mark_ready(e);
                    }
                    State::Incomplete if age >= retrans && !asks.is_full() => {
                        let _ = asks.push((e.ip, e.port));
                        (e.since, e.probes) = (now, e.probes.saturating_add(1));
                    }
                    _ => {}
                }
            }
            // Stale and failed entries past `stale` go (a failed one once its frames are out).
            let before = t.entries.len();
            t.entries.retain(|e| {
                let age = now.saturating_since(e.since);
                !(age >= stale && (e.state == State::Stale || (e.state == State::Failed && e.queue.is_empty())))
            });
            if t.entries.len() != before {
                shared.bump();
            }
        }
        for (ip, port) in asks {
            if let Some(r) = self.request(pool, port, ip) {
                emit(pool, r, Emit::Send { port, mac: BROADCAST, generated: true });
            }
        }
    }

    /// Writes the counters as ` neigh_…=N` pairs.
    pub fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        write!(
            w,
            " neigh_learned={} neigh_updated={} neigh_resolved={} neigh_arp_replies={} neigh_arp_requests={} \
             neigh_arp_unsolicited={} neigh_table_full={} neigh_queued={} neigh_dequeued={} neigh_echo_replies={} \
             neigh_no_buf={}",
            c.learned,
            c.updated,
            c.resolved,
            c.arp_replies,
            c.arp_requests,
            c.arp_unsolicited,
            c.table_full,
            c.queued,
            c.dequeued,
            c.echo_replies,
            c.no_buf
        )
    }
}

#[cfg(test)]
mod tests;
