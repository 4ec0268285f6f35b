//! Source NAT for IPv4 with one external address and a port pool.
//!
//! - Outbound (a packet arriving on `inside_port`): the outbound table maps the 5-tuple to the
//!   external port. On a miss the NF takes a port from the pool (`nat::pool`, a lock-free free
//!   list; none left → `NatPortsExhausted`) and inserts both directions: the inbound entry
//!   (protocol, external address:port, remote address:port → inside address:port) and then the
//!   outbound one (`add_on_miss`). The source becomes external address:port.
//! - Inbound (any other port): the inbound table restores the destination; no entry (or not
//!   addressed to the external address) → `NatNoMapping`.
//! - Rewrites update the IPv4 header and TCP/UDP checksums incrementally (`lb::rewrite`). The
//!   parse result's flow key is updated too, so later NFs see the translated flow.
//! - IPv4 TCP and UDP are translated by their ports, ICMP echo request/reply by the echo
//!   identifier (RFC 5508 §3.1: the identifier is the query's "port"; a request out of the
//!   inside takes a mapping, the reply to the external address and identifier is restored);
//!   ICMP error messages (destination unreachable, source quench, time exceeded, parameter
//!   problem) are translated with the packet they quote (RFC 5508 §4.2, RFC 3022 §4.3): one
//!   coming in, sent to the external address about a packet the NAT translated going out,
//!   gets the inside address as its destination and the quoted packet's source (address,
//!   port or echo identifier, its header checksum and its TCP/UDP/echo checksum where the
//!   quote holds it) restored; one going out from an inside host about a packet that came in
//!   through a mapping gets the external address as its source and the quoted packet's
//!   destination translated. The ICMP checksum is computed anew over the message. The
//!   errors the chain itself builds (time exceeded, no route, too big) about a packet NAT
//!   translated on its way out are restored the same way (`Nf::own_error`), so that an
//!   inside host's traceroute and path-MTU discovery work through the NAT. An error
//!   whose quoted packet matches no mapping is dropped as `NatNoMapping` (never created
//!   one). Other ICMP, other protocols and IPv6 are dropped with `NfUnsupported`.
//! - IPv4 fragments (RFC 4787 REQ-14 asks a NAT to pass them): a first fragment carries the
//!   transport header and is translated by its ports like a whole datagram (the TCP/UDP
//!   checksum covers the whole datagram, so the same incremental update holds). A later
//!   fragment has no ports: going out, only its source address changes (to the external
//!   one); coming in, it follows its first fragment — the inbound first fragment records
//!   (remote address, identification, protocol) → inside address in a small table of
//!   fragments (`FRAG_CAPACITY` entries, living `timeout`), and later fragments with that
//!   identity get that destination. A later fragment that arrives before its first one (or
//!   after the entry expired, or when the table was full) matches nothing and is dropped as
//!   `NatNoMapping` (counted `nat_frag_unmatched`): Cadence does not reassemble.
//! - Expiry: the outbound table is `NotifyControl` with one profile of `timeout`; outbound hits
//!   restart the timer at most every eighth of it (RFC 4787 REQ-6: outbound refresh; inbound
//!   packets do not refresh). Each batch sweeps a few buckets and reclaims a few reported
//!   mappings: if the entry is still expired, the outbound entry is deleted (the delete decides
//!   who reclaims), then the inbound one, and only then does the port go back to the pool. An
//!   expired mapping still translates until it is reclaimed, and its port cannot be handed out
//!   before both of its entries are gone: a port is never in two live mappings.
//!
//! Reclaiming takes the outbound entry with [`ExactTable::take`]: "delete it if it is still
//! expired" under the bucket's lock, so a packet that refreshes the mapping on another core
//! either comes first (the entry is kept, and reported again when it next expires) or finds it
//! gone (and gets a new mapping). Nothing is ever forgotten: a step that finds a bucket busy
//! (another writer, a preempted vCPU) — taking the outbound entry, deleting the inbound one,
//! giving the port back — goes on this worker's pending list and is retried at the start of
//! every later batch (bounded work per batch). While the list is full the worker creates no new
//! mappings (`nat_pending_full`, dropped as `flow_table_full`) and takes no new expiry reports,
//! so the list can never overflow. The inbound entry always dies before its port is returned.
//!
//! [`ExactTable::take`]: crate::pna::exact::ExactTable::take

use alloc::sync::Arc;
use core::fmt;

use super::{Nf, NfBatch, NfCtx, Verdict};
use crate::buf::{BATCH_SIZE, Pool};
use crate::drops::DropReason;
use crate::parse::{Fragment, IpAddr, L3Kind, L4Kind, Parsed};
use crate::pna::exact::{Local, LocalStats, TableConfigError, Take};
use crate::pna::p4::{Actions, Applied, P4Table, TableDecl};
use crate::pna::{ActionId, ActionMask, AddStatus, EntryError, IdleTimeout, NotDone};
use crate::stage::PORTS;
use crate::time::{Duration, Instant};

use super::lb::rewrite::{Side, rewrite};

#[cfg(all(test, loom))]
mod loom_pool;
mod pool;
#[cfg(test)]
mod tests;

const PROFILE: u8 = 1;

/// Deferred steps a worker holds at most (see the module docs).
pub const PENDING: usize = 64;
/// Inbound datagrams whose later fragments the NAT can follow at once (module docs).
pub const FRAG_CAPACITY: usize = crate::miri_or(1024, 16);
/// Fragment-table buckets each batch sweeps.
const FRAG_SWEEP: usize = 4;

/// A reclamation step that found its bucket busy, to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Take the expired outbound entry with this key.
    Reclaim([u64; 2]),
    /// Delete the inbound entry with this key, then give `port` back.
    Inbound { key: [u64; 2], port: u16 },
    /// Give `port` back to the pool.
    Port(u16),
}

/// A NAT's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct NatConfig {
    /// The external (public) address.
    pub external_addr: [u8; 4],
    /// The external port range, inclusive (port 0 excluded).
    pub ports: (u16, u16),
    /// The port the inside network is on (its packets are outbound).
    pub inside_port: u8,
    /// Idle time after which a mapping is removed and its port returned, in clock ticks.
    pub timeout: Duration,
    /// Outbound-table buckets each batch sweeps.
    pub sweep_buckets: usize,
    /// Expired mappings each batch reclaims at most.
    pub reclaims_per_batch: usize,
}

impl Default for NatConfig {
    /// 192.0.2.1 (TEST-NET-1), ports 1024..=65535, inside on port 0, 2^36 ticks (about 34 s
    /// at 2 GHz), 16 buckets and 32 reclaims per batch.
    fn default() -> Self {
        Self {
            external_addr: [192, 0, 2, 1],
            ports: (1024, crate::miri_or(u16::MAX, 1279)),
            inside_port: 0,
            timeout: Duration(1 << 36),
            sweep_buckets: 16,
            reclaims_per_batch: 32,
        }
    }
}

/// Why a NAT configuration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum NatConfigError {
    /// The port range is empty or includes port 0.
    BadPortRange,
    /// `inside_port` is not a port of the chain.
    BadInsidePort,
    /// `timeout` is zero.
    ZeroTimeout,
    /// A mapping table could not be built.
    Table(TableConfigError),
}

impl fmt::Display for NatConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadPortRange => f.write_str("ports: the range is empty or includes 0"),
            Self::BadInsidePort => write!(f, "inside_port must be below {PORTS}"),
            Self::ZeroTimeout => f.write_str("timeout is zero"),
            Self::Table(e) => write!(f, "mapping table: {e}"),
        }
    }
}

impl NatConfig {
    /// Checks the knobs.
    pub fn validate(&self) -> Result<(), NatConfigError> {
        if self.ports.0 == 0 || self.ports.0 > self.ports.1 {
            return Err(NatConfigError::BadPortRange);
        }
        if usize::from(self.inside_port) >= PORTS {
            return Err(NatConfigError::BadInsidePort);
        }
        if self.timeout.ticks() == 0 {
            return Err(NatConfigError::ZeroTimeout);
        }
        Ok(())
    }
}

/// Outbound table actions: the external port and when the timer last restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OutMap {
    Translate {
        port: u16,
        restarted: u64,
    },
    /// Default (miss) action: allocate.
    Allocate,
}

impl Actions<1> for OutMap {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0]);

    fn encode(&self) -> (ActionId, [u64; 1]) {
        match self {
            OutMap::Translate { port, restarted } => (0, [u64::from(*port) | restarted << 16]),
            OutMap::Allocate => (1, [0]),
        }
    }

    fn decode(id: ActionId, p: &[u64; 1]) -> Option<Self> {
        match id {
            0 => Some(OutMap::Translate { port: p[0] as u16, restarted: p[0] >> 16 }),
            1 => Some(OutMap::Allocate),
            _ => None,
        }
    }
}

/// Inbound table actions: the inside address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InMap {
    Restore {
        addr: [u8; 4],
        port: u16,
    },
    /// Default (miss) action: drop.
    NoMapping,
}

impl Actions<1> for InMap {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0]);

    fn encode(&self) -> (ActionId, [u64; 1]) {
        match self {
            InMap::Restore { addr, port } => (0, [u64::from(u32::from_be_bytes(*addr)) << 16 | u64::from(*port)]),
            InMap::NoMapping => (1, [0]),
        }
    }

    fn decode(id: ActionId, p: &[u64; 1]) -> Option<Self> {
        match id {
            0 => Some(InMap::Restore { addr: ((p[0] >> 16) as u32).to_be_bytes(), port: p[0] as u16 }),
            1 => Some(InMap::NoMapping),
            _ => None,
        }
    }
}

/// A two-word key: (address a, address b), (port a, port b, protocol).
fn key(a: [u8; 4], pa: u16, b: [u8; 4], pb: u16, proto: u8) -> [u64; 2] {
    [
        u64::from(u32::from_be_bytes(a)) << 32 | u64::from(u32::from_be_bytes(b)),
        u64::from(pa) << 32 | u64::from(pb) << 16 | u64::from(proto),
    ]
}

/// The inbound key of the mapping whose outbound key is `out` and external port `port`.
fn inbound_of(out: &[u64; 2], ext: [u8; 4], port: u16) -> [u64; 2] {
    let remote = (out[0] as u32).to_be_bytes();
    let (rport, proto) = ((out[1] >> 16) as u16, out[1] as u8);
    key(remote, rport, ext, port, proto)
}

/// Fragment-table actions: the inside address of a datagram coming in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FragMap {
    To([u8; 4]),
    /// Default (miss) action: unmatched.
    Unknown,
}

impl Actions<1> for FragMap {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0]);

    fn encode(&self) -> (ActionId, [u64; 1]) {
        match self {
            FragMap::To(a) => (0, [u64::from(u32::from_be_bytes(*a))]),
            FragMap::Unknown => (1, [0]),
        }
    }

    fn decode(id: ActionId, p: &[u64; 1]) -> Option<Self> {
        match id {
            0 => Some(FragMap::To((p[0] as u32).to_be_bytes())),
            1 => Some(FragMap::Unknown),
            _ => None,
        }
    }
}

/// The fragment-table key of an inbound datagram: (remote address, identification, protocol).
fn frag_key(frame: &[u8], p: &Parsed) -> Option<[u64; 2]> {
    let l3 = usize::from(p.l3_offset);
    let h = frame.get(l3..l3 + 20)?;
    let src = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    Some([u64::from(src), u64::from(u16::from_be_bytes([h[4], h[5]])) << 8 | u64::from(h[9])])
}

/// The NAT state every worker shares: both mapping tables and the port pool.
pub struct NatShared {
    out: P4Table<2, 1, OutMap>,
    inb: P4Table<2, 1, InMap>,
    frags: P4Table<2, 1, FragMap>,
    pool: pool::PortPool,
    cfg: NatConfig,
    refresh: u64,
}

impl fmt::Debug for NatShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NatShared").field("config", &self.cfg).field("ports_in_use", &self.pool.in_use()).finish()
    }
}

impl NatShared {
    /// Validates `cfg` and builds the tables (sized to the port range) and the pool.
    pub fn try_new(cfg: &NatConfig) -> Result<Self, NatConfigError> {
        cfg.validate()?;
        let n = usize::from(cfg.ports.1 - cfg.ports.0) + 1;
        // Buckets for λ ≤ 1 (half the default load): a mapping must not fail on a full bucket
        // while ports remain.
        let buckets = (2 * n).next_power_of_two();
        let mut od = TableDecl::new(n, OutMap::Allocate);
        od.idle_timeout = IdleTimeout::NotifyControl;
        od.event_ring = n.min(1 << 14);
        od.buckets = buckets;
        let mut id = TableDecl::new(n, InMap::NoMapping);
        id.add_on_miss = false;
        id.buckets = buckets;
        let out = P4Table::try_new(od).map_err(NatConfigError::Table)?;
        out.table().set_expire_profile(PROFILE, cfg.timeout);
        let inb = P4Table::try_new(id).map_err(NatConfigError::Table)?;
        let mut fd = TableDecl::new(FRAG_CAPACITY, FragMap::Unknown);
        fd.add_on_miss = false;
        fd.idle_timeout = IdleTimeout::AutoDelete;
        let frags = P4Table::try_new(fd).map_err(NatConfigError::Table)?;
        frags.table().set_expire_profile(PROFILE, cfg.timeout);
        Ok(Self {
            out,
            inb,
            frags,
            pool: pool::PortPool::new(cfg.ports.0, cfg.ports.1),
            cfg: *cfg,
            refresh: (cfg.timeout.ticks() / 8).max(1),
        })
    }

    /// The configuration it was built from.
    pub fn config(&self) -> &NatConfig {
        &self.cfg
    }

    /// External ports handed out now.
    pub fn ports_in_use(&self) -> usize {
        self.pool.in_use()
    }

    /// Ports handed out twice or given back twice (always 0 unless there is a bug).
    pub fn pool_anomalies(&self) -> u64 {
        self.pool.anomalies.load(core::sync::atomic::Ordering::Relaxed)
    }

    /// The live mappings at `now` as (inside address, inside port, remote address, remote
    /// port, protocol, external port), for the control plane and tests.
    pub fn for_each_mapping(&self, now: Instant, mut f: impl FnMut([u8; 4], u16, [u8; 4], u16, u8, u16)) {
        self.out.table().for_each(now, |e| {
            let [w0, w1] = e.key;
            let (src, dst) = (((w0 >> 32) as u32).to_be_bytes(), (w0 as u32).to_be_bytes());
            f(src, (w1 >> 32) as u16, dst, (w1 >> 16) as u16, w1 as u8, e.params[0] as u16);
        });
    }
}

/// One worker's NAT counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NatCounters {
    /// Outbound packets translated.
    pub outbound: u64,
    /// Inbound packets restored.
    pub inbound: u64,
    /// Mappings created.
    pub mappings: u64,
    /// Mappings reclaimed after expiry (ports returned).
    pub reclaimed: u64,
    /// Drops: no free port.
    pub ports_exhausted: u64,
    /// Drops: inbound without a mapping.
    pub no_mapping: u64,
    /// Drops: not IPv4 TCP/UDP (or a later fragment).
    pub unsupported: u64,
    /// Drops: a mapping table refused the new mapping.
    pub table_full: u64,
    /// Reclamation steps deferred because a bucket (or the pool) was busy.
    pub deferred: u64,
    /// New mappings refused because the pending list was full (dropped as `flow_table_full`).
    pub pending_full: u64,
    /// ICMP errors translated with the packet they quote (either way).
    pub icmp_errors: u64,
    /// Later fragments translated (either way).
    pub fragments: u64,
    /// Later fragments coming in that matched no first fragment (dropped as `NatNoMapping`).
    pub frag_unmatched: u64,
}

/// The NAT NF of one worker core.
#[derive(Debug)]
pub struct Nat {
    shared: Arc<NatShared>,
    out_lane: Local,
    in_lane: Local,
    frag_lane: Local,
    frag_cursor: usize,
    cursor: usize,
    counters: NatCounters,
    pending: heapless::Deque<Pending, PENDING>,
}

impl Nat {
    /// A worker's NAT over the shared state.
    pub fn new(shared: Arc<NatShared>) -> Self {
        let out_lane = shared.out.table().local();
        let in_lane = shared.inb.table().local();
        let frag_lane = shared.frags.table().local();
        Self {
            shared,
            out_lane,
            in_lane,
            frag_lane,
            frag_cursor: 0,
            cursor: 0,
            counters: NatCounters::default(),
            pending: heapless::Deque::new(),
        }
    }

    /// This worker's counters.
    pub fn counters(&self) -> &NatCounters {
        &self.counters
    }

    /// This worker's outbound-table counters.
    pub fn table_stats(&self) -> &LocalStats {
        self.out_lane.stats()
    }

    /// The shared state.
    pub fn shared(&self) -> &Arc<NatShared> {
        &self.shared
    }

    /// Deferred steps waiting for a busy bucket.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Sweeps `buckets` buckets of the outbound table, retries up to `max` deferred steps and
    /// reclaims up to `max` expired mappings (what each batch does with the configured
    /// budgets). Returns the ports returned.
    pub fn maintain(&mut self, now: Instant, buckets: usize, max: usize) -> usize {
        let table = self.shared.out.table();
        if buckets > 0 {
            self.cursor = table.sweep(&mut self.out_lane, now, self.cursor, buckets);
        }
        let mut returned = 0;
        for _ in 0..self.pending.len().min(max) {
            let Some(step) = self.pending.pop_front() else { break };
            returned += self.run_step(step, now);
        }
        for _ in 0..max {
            // Each report can leave at most one deferred step: take one only if it fits.
            if self.pending.is_full() {
                break;
            }
            let Some(ev) = self.shared.out.table().events().pop() else { break };
            returned += self.run_step(Pending::Reclaim(ev.key), now);
        }
        returned
    }

    /// Runs `step` and whatever follows from it; a step that finds its bucket busy goes on
    /// the pending list. Returns the ports given back (0 or 1).
    fn run_step(&mut self, mut step: Pending, now: Instant) -> usize {
        let shared = Arc::clone(&self.shared);
        loop {
            step = match step {
                Pending::Reclaim(key) => {
                    match shared.out.table().take(&mut self.out_lane, &key, |e| e.deadline.is_some_and(|d| d <= now)) {
                        Ok(e) => {
                            self.counters.reclaimed += 1;
                            let port = e.params[0] as u16;
                            Pending::Inbound { key: inbound_of(&key, shared.cfg.external_addr, port), port }
                        }
                        // Gone (another core reclaimed it) or refreshed since the report (kept,
                        // and reported again when it next expires).
                        Err(Take::NotFound | Take::Kept(_)) => return 0,
                        Err(Take::Busy) => return self.defer(step),
                    }
                }
                Pending::Inbound { key, port } => match shared.inb.delete(&mut self.in_lane, &key, now) {
                    Err(EntryError::Busy) => return self.defer(step),
                    // Deleted, or already gone: either way the port is free of mappings.
                    _ => Pending::Port(port),
                },
                Pending::Port(port) => {
                    if shared.pool.release(port) {
                        return 1;
                    }
                    return self.defer(step);
                }
            };
        }
    }

    /// Puts `step` on the pending list (callers make sure it has room).
    fn defer(&mut self, step: Pending) -> usize {
        self.counters.deferred += 1;
        if self.pending.push_back(step).is_err() {
            // Unreachable: every path that can defer first checks for room.
            debug_assert!(false, "NAT pending list overflow");
        }
        0
    }

    /// A new mapping for the outbound key `miss`: the external port, or the drop reason.
    fn create(
        &mut self,
        miss: &crate::pna::exact::Miss<2>,
        p: &Parsed,
        sport: u16,
        now: Instant,
    ) -> Result<u16, DropReason> {
        let shared = Arc::clone(&self.shared);
        // A failed creation may leave one deferred step: make sure it fits.
        if self.pending.is_full() {
            self.counters.pending_full += 1;
            return Err(DropReason::FlowTableFull);
        }
        let (IpAddr::V4(src), IpAddr::V4(_)) = (p.flow.src, p.flow.dst) else {
            return Err(DropReason::NfUnsupported);
        };
        let Some(port) = shared.pool.alloc() else {
            self.counters.ports_exhausted += 1;
            return Err(DropReason::NatPortsExhausted);
        };
        let inbound = inbound_of(miss.key(), shared.cfg.external_addr, port);
        let restore = InMap::Restore { addr: src, port: sport };
        if !shared.inb.insert(&mut self.in_lane, &inbound, &restore, 0, now).is_success() {
            self.run_step(Pending::Port(port), now);
            self.counters.table_full += 1;
            return Err(DropReason::FlowTableFull);
        }
        let map = OutMap::Translate { port, restarted: now.ticks() };
        match shared.out.add_entry(&mut self.out_lane, miss, &map, PROFILE, now) {
            AddStatus::Success => {
                self.counters.mappings += 1;
                Ok(port)
            }
            status => {
                // The inbound entry dies before its port goes back (retried if busy).
                self.run_step(Pending::Inbound { key: inbound, port }, now);
                // Another packet of the same new flow (this batch, or another core) won.
                if status == AddStatus::NotDone(NotDone::KeyExists)
                    && let Applied::Hit { action: OutMap::Translate { port, .. }, .. } =
                        shared.out.apply(&mut self.out_lane, miss.key(), now)
                {
                    return Ok(port);
                }
                self.counters.table_full += 1;
                Err(DropReason::FlowTableFull)
            }
        }
    }

    fn outbound(
        &mut self,
        applied: &Applied<2, OutMap>,
        p: &Parsed,
        sport: u16,
        now: Instant,
    ) -> Result<u16, DropReason> {
        let shared = &*self.shared;
        match applied {
            Applied::Hit { action: OutMap::Translate { port, restarted }, entry } => {
                // `restarted` keeps 48 bits of ticks: compare modulo 2^48.
                if now.ticks().wrapping_sub(*restarted) & ((1 << 48) - 1) >= shared.refresh {
                    let _ = shared.out.restart_expire_timer(&mut self.out_lane, entry, now);
                    let next = OutMap::Translate { port: *port, restarted: now.ticks() };
                    let _ = shared.out.update(&mut self.out_lane, entry, &next, now);
                }
                Ok(*port)
            }
            Applied::Miss { miss, .. } => self.create(miss, p, sport, now),
            Applied::Hit { action: OutMap::Allocate, .. } => Err(DropReason::FlowTableFull),
        }
    }
}

impl Nat {
    /// A later IPv4 fragment (no ports): going out, its source becomes the external address;
    /// coming in to the external address, it takes the inside address its first fragment
    /// recorded (module docs).
    #[cold]
    #[inline(never)]
    fn later_fragment(
        &mut self,
        frame: &mut [u8],
        p: &mut Parsed,
        outbound: bool,
        now: Instant,
    ) -> Result<(), DropReason> {
        let shared = Arc::clone(&self.shared);
        let ext = shared.cfg.external_addr;
        if outbound {
            rewrite(frame, p, Side::Src, &ext, None).ok_or(DropReason::NfUnsupported)?;
            p.flow.src = IpAddr::V4(ext);
            return Ok(());
        }
        let to = match (p.flow.dst, frag_key(frame, p)) {
            (IpAddr::V4(d), Some(k)) if d == ext => match shared.frags.apply(&mut self.frag_lane, &k, now) {
                Applied::Hit { action: FragMap::To(a), .. } => Some(a),
                _ => None,
            },
            _ => None,
        };
        let Some(addr) = to else {
            self.counters.frag_unmatched += 1;
            return Err(DropReason::NatNoMapping);
        };
        rewrite(frame, p, Side::Dst, &addr, None).ok_or(DropReason::NfUnsupported)?;
        p.flow.dst = IpAddr::V4(addr);
        Ok(())
    }

    /// Translates the ICMP error `p` (and the packet it quotes) through the mapping of the
    /// quoted packet's flow; `None` if `p` is not an ICMP error with an IPv4 TCP, UDP or echo
    /// request quote (left to the caller's `NfUnsupported`). Out of line: errors are rare.
    #[cold]
    #[inline(never)]
    fn icmp_error(
        &mut self,
        frame: &mut [u8],
        p: &mut Parsed,
        outbound: bool,
        now: Instant,
    ) -> Option<Result<(), DropReason>> {
        let q = quoted(frame, p)?;
        let shared = Arc::clone(&self.shared);
        let ext = shared.cfg.external_addr;
        let (IpAddr::V4(_), IpAddr::V4(dst)) = (p.flow.src, p.flow.dst) else { return None };
        if outbound {
            // An inside host about a packet that came in: the quote runs remote → inside, the
            // reverse of the mapping's outbound flow (echo quotes are never mapped inbound).
            if q.proto == crate::parse::PROTO_ICMP {
                return Some(Err(DropReason::NatNoMapping));
            }
            let k = key(q.dst, q.dport, q.src, q.sport, q.proto);
            let Applied::Hit { action: OutMap::Translate { port, .. }, .. } =
                shared.out.apply(&mut self.out_lane, &k, now)
            else {
                return Some(Err(DropReason::NatNoMapping));
            };
            rewrite(frame, p, Side::Src, &ext, None)?;
            p.flow.src = IpAddr::V4(ext);
            Some(rewrite_quoted(frame, p, &q, Side::Dst, ext, port).ok_or(DropReason::NfUnsupported))
        } else {
            // Sent to the external address about a packet that went out translated.
            if dst != ext || q.src != ext {
                return Some(Err(DropReason::NatNoMapping));
            }
            let k = key(q.dst, q.dport, ext, q.sport, q.proto);
            let Applied::Hit { action: InMap::Restore { addr, port }, .. } =
                shared.inb.apply(&mut self.in_lane, &k, now)
            else {
                return Some(Err(DropReason::NatNoMapping));
            };
            rewrite(frame, p, Side::Dst, &addr, None)?;
            p.flow.dst = IpAddr::V4(addr);
            Some(rewrite_quoted(frame, p, &q, Side::Src, addr, port).ok_or(DropReason::NfUnsupported))
        }
    }
}

/// ICMP types whose message quotes the packet that caused it (RFC 792): destination
/// unreachable, source quench, time exceeded, parameter problem.
const ICMP_ERRORS: [u8; 4] = [3, 4, 11, 12];

/// The packet an ICMP error quotes: where its IPv4 header and transport header start, its
/// protocol, addresses and "ports" (TCP/UDP ports; for an echo request its identifier as the
/// source port and 0, as the NAT keys echo flows).
#[derive(Debug, Clone, Copy)]
struct Quoted {
    ip: usize,
    l4: usize,
    proto: u8,
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
}

/// The quote of the ICMP error `p` (IPv4, first fragment), if it holds an IPv4 TCP, UDP or
/// echo request header with its ports (the first 8 bytes after the quoted IP header, which
/// RFC 792 guarantees).
fn quoted(frame: &[u8], p: &Parsed) -> Option<Quoted> {
    if p.l3 != L3Kind::Ipv4 || p.l4 != L4Kind::Icmp || p.fragment == Fragment::Later {
        return None;
    }
    let l4 = usize::from(p.l4_offset);
    if !ICMP_ERRORS.contains(frame.get(l4)?) {
        return None;
    }
    let ip = l4 + 8;
    let h = frame.get(ip..ip + 20)?;
    let ihl = usize::from(h[0] & 0x0F) * 4;
    if h[0] >> 4 != 4 || ihl < 20 || u16::from_be_bytes([h[6], h[7]]) & 0x1FFF != 0 {
        return None;
    }
    let (proto, src, dst) = (h[9], [h[12], h[13], h[14], h[15]], [h[16], h[17], h[18], h[19]]);
    let t = frame.get(ip + ihl..ip + ihl + 8)?;
    let (sport, dport) = match proto {
        crate::parse::PROTO_TCP | crate::parse::PROTO_UDP => {
            (u16::from_be_bytes([t[0], t[1]]), u16::from_be_bytes([t[2], t[3]]))
        }
        crate::parse::PROTO_ICMP if t[0] == ICMP_ECHO_REQUEST => (u16::from_be_bytes([t[4], t[5]]), 0),
        _ => return None,
    };
    Some(Quoted { ip, l4: ip + ihl, proto, src, dst, sport, dport })
}

/// Rewrites one side of the quoted packet `q` inside the ICMP error `p` to `addr:port`
/// (`Side::Src`: its source, or for an echo request its identifier): the quoted IP header's
/// checksum and the quoted TCP/UDP/echo checksum (when the quote reaches it; a UDP checksum of
/// 0 stays 0) follow incrementally; then the ICMP checksum is computed anew over the message
/// (what the outer IP header says is there, bounded by the frame).
fn rewrite_quoted(frame: &mut [u8], p: &Parsed, q: &Quoted, side: Side, addr: [u8; 4], port: u16) -> Option<()> {
    use crate::checksum::{update_bytes, update16};
    let (l3, l4) = (usize::from(p.l3_offset), usize::from(p.l4_offset));
    let total = usize::from(u16::from_be_bytes(frame.get(l3 + 2..l3 + 4)?.try_into().ok()?));
    // The message's end: what the outer IP header says, bounded by the frame (not padding).
    let end = (l3 + total).min(frame.len());
    let at = q.ip + if side == Side::Src { 12 } else { 16 };
    let old: [u8; 4] = frame.get(at..at + 4)?.try_into().ok()?;
    frame.get_mut(at..at + 4)?.copy_from_slice(&addr);
    let c = u16::from_be_bytes(frame.get(q.ip + 10..q.ip + 12)?.try_into().ok()?);
    frame.get_mut(q.ip + 10..q.ip + 12)?.copy_from_slice(&update_bytes(c, &old, &addr).to_be_bytes());
    let (port_at, ck_at, pseudo) = match q.proto {
        crate::parse::PROTO_TCP => (q.l4 + if side == Side::Src { 0 } else { 2 }, q.l4 + 16, true),
        crate::parse::PROTO_UDP => (q.l4 + if side == Side::Src { 0 } else { 2 }, q.l4 + 6, true),
        _ => (q.l4 + 4, q.l4 + 2, false),
    };
    let old_port = u16::from_be_bytes(frame.get(port_at..port_at + 2)?.try_into().ok()?);
    frame.get_mut(port_at..port_at + 2)?.copy_from_slice(&port.to_be_bytes());
    if let Some(ck) = frame.get(ck_at..ck_at + 2).filter(|_| ck_at + 2 <= end).map(|c| u16::from_be_bytes([c[0], c[1]]))
    {
        let none = q.proto == crate::parse::PROTO_UDP && ck == 0;
        if !none {
            let mut c = if pseudo { update_bytes(ck, &old, &addr) } else { ck };
            c = update16(c, old_port, port);
            if q.proto == crate::parse::PROTO_UDP && c == 0 {
                c = 0xFFFF;
            }
            frame.get_mut(ck_at..ck_at + 2)?.copy_from_slice(&c.to_be_bytes());
        }
    }
    let msg = frame.get_mut(l4..end)?;
    msg.get_mut(2..4)?.fill(0);
    let c = crate::checksum::checksum(msg);
    msg.get_mut(2..4)?.copy_from_slice(&c.to_be_bytes());
    Some(())
}

impl Drop for Nat {
    fn drop(&mut self) {
        // Deferred steps are finished now (a bucket is busy only for a bounded while).
        for _ in 0..PENDING * 64 {
            let Some(step) = self.pending.pop_front() else { break };
            self.run_step(step, Instant(u64::MAX));
        }
        self.shared.out.table().retire_local(&mut self.out_lane);
        self.shared.inb.table().retire_local(&mut self.in_lane);
        self.shared.frags.table().retire_local(&mut self.frag_lane);
    }
}

/// Applies a translation's outcome: done, counted in `done`; or `verdict` becomes the drop
/// (a missing mapping counted in `no_mapping`).
fn settle(r: Result<(), DropReason>, verdict: &mut Verdict, done: &mut u64, no_mapping: &mut u64) {
    match r {
        Ok(()) => *done += 1,
        Err(reason) => {
            *no_mapping += u64::from(reason == DropReason::NatNoMapping);
            *verdict = Verdict::Drop(reason);
        }
    }
}

/// ICMP echo request and echo reply types (RFC 792).
const ICMP_ECHO_REQUEST: u8 = 8;
const ICMP_ECHO_REPLY: u8 = 0;

/// The "ports" the NAT maps `p` by, if it can translate it: TCP/UDP ports (read from the
/// header: a first fragment's flow key has none), or for an ICMP echo the identifier
/// standing in for the inside port — `(id, 0)` for a request going out, `(0, id)` for a
/// reply coming in, as RFC 5508 §3.1 has NATs do. IPv4 only; not a later fragment.
fn nat_ports(frame: &[u8], p: &Parsed, outbound: bool) -> Option<(u16, u16)> {
    if p.l3 != L3Kind::Ipv4 || p.fragment == Fragment::Later {
        return None;
    }
    match p.l4 {
        L4Kind::Tcp | L4Kind::Udp => {
            let l4 = usize::from(p.l4_offset);
            let h = frame.get(l4..l4 + 4)?;
            Some((u16::from_be_bytes([h[0], h[1]]), u16::from_be_bytes([h[2], h[3]])))
        }
        L4Kind::Icmp => {
            let l4 = usize::from(p.l4_offset);
            let (kind, id) = (*frame.get(l4)?, u16::from_be_bytes([*frame.get(l4 + 4)?, *frame.get(l4 + 5)?]));
            match (kind, outbound) {
                (ICMP_ECHO_REQUEST, true) => Some((id, 0)),
                (ICMP_ECHO_REPLY, false) => Some((0, id)),
                _ => None,
            }
        }
        _ => None,
    }
}

impl Nf for Nat {
    fn name(&self) -> &'static str {
        "nat"
    }

    fn process(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        let shared = Arc::clone(&self.shared);
        let ext = shared.cfg.external_addr;
        let (mut ok, mut ik) = ([[0u64; 2]; BATCH_SIZE], [[0u64; 2]; BATCH_SIZE]);
        let (mut oa, mut ia) = ([0usize; BATCH_SIZE], [0usize; BATCH_SIZE]);
        // The inside "port" of each outbound packet (its source port, or its echo id).
        let mut osport = [0u16; BATCH_SIZE];
        let (mut no, mut ni) = (0, 0);
        let mut later_in = heapless::Vec::<usize, BATCH_SIZE>::new();
        for (i, p) in batch.pkts_mut().iter_mut().enumerate() {
            if !p.alive() {
                continue;
            }
            let f = &p.parsed.flow;
            let outbound = p.ingress == shared.cfg.inside_port;
            let ports = nat_ports(pool.frame(p.buf), &p.parsed, outbound);
            let (IpAddr::V4(src), IpAddr::V4(dst), Some((sport, dport))) = (f.src, f.dst, ports) else {
                if p.parsed.l3 == L3Kind::Ipv4 && p.parsed.fragment == Fragment::Later {
                    if !outbound {
                        // After this batch's first fragments have recorded where theirs go.
                        let _ = later_in.push(i);
                        continue;
                    }
                    settle(
                        self.later_fragment(pool.frame_mut(p.buf), &mut p.parsed, outbound, ctx.now),
                        &mut p.verdict,
                        &mut self.counters.fragments,
                        &mut self.counters.no_mapping,
                    );
                    continue;
                }
                if let Some(done) = self.icmp_error(pool.frame_mut(p.buf), &mut p.parsed, outbound, ctx.now) {
                    settle(done, &mut p.verdict, &mut self.counters.icmp_errors, &mut self.counters.no_mapping);
                    continue;
                }
                self.counters.unsupported += 1;
                p.verdict = Verdict::Drop(DropReason::NfUnsupported);
                continue;
            };
            if outbound {
                if let (Some(k), Some(a), Some(sp)) = (ok.get_mut(no), oa.get_mut(no), osport.get_mut(no)) {
                    *k = key(src, sport, dst, dport, f.proto);
                    *a = i;
                    *sp = sport;
                    no += 1;
                }
            } else if dst == ext {
                if let (Some(k), Some(a)) = (ik.get_mut(ni), ia.get_mut(ni)) {
                    *k = key(src, sport, dst, dport, f.proto);
                    *a = i;
                    ni += 1;
                }
            } else {
                self.counters.no_mapping += 1;
                p.verdict = Verdict::Drop(DropReason::NatNoMapping);
            }
        }
        let mut out = [shared.out.placeholder(); BATCH_SIZE];
        if let (Some(k), Some(o)) = (ok.get(..no), out.get_mut(..no)) {
            shared.out.apply_burst(&mut self.out_lane, k, ctx.now, o);
        }
        for ((applied, &i), &sport) in out.iter().zip(oa.iter()).zip(osport.iter()).take(no) {
            let Some(p) = batch.pkts_mut().get_mut(i) else { continue };
            let r = self.outbound(applied, &p.parsed, sport, ctx.now);
            match r.and_then(|port| translate(pool.frame_mut(p.buf), &mut p.parsed, Side::Src, ext, port)) {
                Ok(()) => self.counters.outbound += 1,
                Err(reason) => p.verdict = Verdict::Drop(reason),
            }
        }
        let mut inb = [shared.inb.placeholder(); BATCH_SIZE];
        if let (Some(k), Some(o)) = (ik.get(..ni), inb.get_mut(..ni)) {
            shared.inb.apply_burst(&mut self.in_lane, k, ctx.now, o);
        }
        for (applied, &i) in inb.iter().zip(ia.iter()).take(ni) {
            let Some(p) = batch.pkts_mut().get_mut(i) else { continue };
            let r = match applied {
                Applied::Hit { action: InMap::Restore { addr, port }, .. } => {
                    if p.parsed.fragment == Fragment::First
                        && let Some(k) = frag_key(pool.frame(p.buf), &p.parsed)
                    {
                        // Its later fragments follow it (a full table: they will not).
                        let _ = shared.frags.insert(&mut self.frag_lane, &k, &FragMap::To(*addr), PROFILE, ctx.now);
                    }
                    translate(pool.frame_mut(p.buf), &mut p.parsed, Side::Dst, *addr, *port)
                }
                _ => Err(DropReason::NatNoMapping),
            };
            settle(r, &mut p.verdict, &mut self.counters.inbound, &mut self.counters.no_mapping);
        }
        for &i in &later_in {
            let Some(p) = batch.pkts_mut().get_mut(i) else { continue };
            settle(
                self.later_fragment(pool.frame_mut(p.buf), &mut p.parsed, false, ctx.now),
                &mut p.verdict,
                &mut self.counters.fragments,
                &mut self.counters.no_mapping,
            );
        }
        self.maintain(ctx.now, shared.cfg.sweep_buckets, shared.cfg.reclaims_per_batch);
        self.frag_cursor = shared.frags.table().sweep(&mut self.frag_lane, ctx.now, self.frag_cursor, FRAG_SWEEP);
    }

    fn own_error(&mut self, pool: &mut Pool<'_>, b: crate::buf::PacketBuf, now: Instant) {
        let frame = pool.frame_mut(b);
        let Ok(mut parsed) = crate::parse::parse(frame) else { return };
        // About a packet this NAT translated going out: to the external address, restored as
        // one from the network would be. Anything else is not this NAT's to change.
        if let Some(Ok(())) = self.icmp_error(frame, &mut parsed, false, now) {
            self.counters.icmp_errors += 1;
        }
    }

    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        write!(
            w,
            " nat_outbound={} nat_inbound={} nat_mappings={} nat_reclaimed={} nat_ports_exhausted={} nat_no_mapping={} nat_unsupported={} nat_table_full={} nat_deferred={} nat_pending_full={} nat_pending={} nat_icmp_errors={} nat_fragments={} nat_frag_unmatched={}",
            c.outbound,
            c.inbound,
            c.mappings,
            c.reclaimed,
            c.ports_exhausted,
            c.no_mapping,
            c.unsupported,
            c.table_full,
            c.deferred,
            c.pending_full,
            self.pending.len(),
            c.icmp_errors,
            c.fragments,
            c.frag_unmatched
        )
    }
}

/// Rewrites one side of `p` to `addr:port` (for an ICMP echo: the address and the identifier)
/// and updates the flow key.
fn translate(frame: &mut [u8], p: &mut Parsed, side: Side, addr: [u8; 4], port: u16) -> Result<(), DropReason> {
    rewrite(frame, p, side, &addr, Some(port)).ok_or(DropReason::NfUnsupported)?;
    if p.l4 == L4Kind::Icmp || p.fragment != Fragment::Whole {
        // ICMP has no ports in the flow key (the identifier lives in the frame only), nor
        // has a fragment (`parse`: fragments hash without ports).
        match side {
            Side::Src => p.flow.src = IpAddr::V4(addr),
            Side::Dst => p.flow.dst = IpAddr::V4(addr),
        }
        return Ok(());
    }
    match side {
        Side::Src => {
            p.flow.src = IpAddr::V4(addr);
            p.flow.src_port = port;
        }
        Side::Dst => {
            p.flow.dst = IpAddr::V4(addr);
            p.flow.dst_port = port;
        }
    }
    Ok(())
}
