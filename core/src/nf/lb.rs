//! L4 load balancer: VIP → backend by Maglev hashing, with per-connection affinity
//! (Maglev, NSDI'16).
//!
//! - A VIP is (address, port, protocol TCP/UDP). Traffic to no VIP passes untouched.
//! - A new connection (5-tuple) to a VIP gets the backend its hash selects in the VIP's
//!   [`maglev`] table; the choice is stored in the affinity table (a PNA exact table with
//!   `add_on_miss`, `AutoDelete`, keyed by the 5-tuple) and later packets follow the entry, not
//!   the Maglev table: [`LbShared::set_backends`] may change the backends at any time and live
//!   connections stay where they are (a removed backend keeps its live connections until they
//!   go idle; the control plane drains it that way).
//! - Affinity is idle-timed: a hit restarts the entry's timer when the last restart is more than
//!   1/8 of `affinity_timeout` old (stored in the entry), so an idle connection is forgotten
//!   between 7/8 and 8/8 of the timeout after its last packet, and a busy one costs one extra
//!   write per eighth of the timeout, not one per packet.
//! - The rewrite sets the destination address (and port, if the backend has one) with
//!   incremental checksum updates (`lb::rewrite`). The backend must be of the VIP's family.
//! - A VIP without backends drops with `LbNoBackend`. A non-first fragment sent to a VIP
//!   address cannot be mapped (no ports): `NfUnsupported`. A full affinity table does not drop:
//!   the packet goes to the Maglev choice and the failed add is counted.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use super::{Nf, NfBatch, NfCtx, Verdict};
use crate::buf::{BATCH_SIZE, Pool};
use crate::drops::DropReason;
use crate::parse::{Fragment, IpAddr, PROTO_TCP, PROTO_UDP, Parsed};
use crate::pna::exact::{Local, LocalStats, TableConfigError, hash_key};
use crate::pna::p4::{Actions, Applied, P4Table, TableDecl};
use crate::pna::{ActionId, ActionMask, AddStatus, IdleTimeout, NotDone};
use crate::time::{Duration, Instant};

#[cfg(all(test, loom))]
mod loom_maglev;
pub mod maglev;
pub(crate) mod rewrite;
#[cfg(test)]
mod tests;

use maglev::{Pick, Target};
use rewrite::{Side, rewrite};

const PROFILE: u8 = 1;
const FLOW_SEED: u64 = 0x4c42_5f46_4c4f_5753;

/// A backend server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Backend {
    /// Its address (the VIP's family).
    pub addr: IpAddr,
    /// Its port; `None` keeps the VIP's port.
    pub port: Option<u16>,
}

/// A virtual service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vip {
    /// The service address.
    pub addr: IpAddr,
    /// The service port.
    pub port: u16,
    /// TCP (6) or UDP (17).
    pub proto: u8,
    /// The initial backends.
    pub backends: Vec<Backend>,
}

/// A load balancer's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LbConfig {
    /// The VIPs (VIP index = position).
    pub vips: Vec<Vip>,
    /// Most backends any VIP may get (sizes the Maglev tables; ≤ [`maglev::MAX_BACKENDS`]).
    pub max_backends: usize,
    /// Connections the affinity table holds.
    pub affinity_capacity: usize,
    /// Idle time after which a connection's backend is forgotten, in clock ticks.
    pub affinity_timeout: Duration,
    /// Affinity buckets each batch sweeps for expired entries (0: lazy reclamation only).
    pub sweep_buckets: usize,
}

impl Default for LbConfig {
    /// No VIPs, up to 128 backends per VIP, 65 536 connections, 2^35 ticks (about 16 s at
    /// 2 GHz) of idle timeout, 16 buckets swept per batch.
    fn default() -> Self {
        Self {
            vips: Vec::new(),
            max_backends: crate::miri_or(128, 16),
            affinity_capacity: crate::miri_or(1 << 16, 64),
            affinity_timeout: Duration(1 << 35),
            sweep_buckets: 16,
        }
    }
}

/// Why a backend list was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LbError {
    /// No VIP with that index.
    UnknownVip {
        /// The index given.
        vip: usize,
    },
    /// More backends than `max_backends`.
    TooManyBackends {
        /// The VIP's index.
        vip: usize,
        /// How many were given.
        count: usize,
    },
    /// A backend of the other IP version than its VIP.
    FamilyMismatch {
        /// The VIP's index.
        vip: usize,
        /// The backend's index in the list.
        backend: usize,
    },
    /// The same backend (address and port) twice.
    DuplicateBackend {
        /// The VIP's index.
        vip: usize,
        /// The index of the second occurrence.
        backend: usize,
    },
    /// Another control-plane call is replacing this VIP's table.
    Busy,
    /// A management command named a backend the VIP does not have.
    NoSuchBackend {
        /// The VIP's index.
        vip: usize,
    },
}

impl fmt::Display for LbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownVip { vip } => write!(f, "no vip {vip}"),
            Self::TooManyBackends { vip, count } => write!(f, "vip {vip}: {count} backends, more than max_backends"),
            Self::FamilyMismatch { vip, backend } => {
                write!(f, "vip {vip}: backend {backend} is of the other IP version")
            }
            Self::DuplicateBackend { vip, backend } => write!(f, "vip {vip}: backend {backend} is listed twice"),
            Self::Busy => f.write_str("another update of the vip is in progress"),
            Self::NoSuchBackend { vip } => write!(f, "vip {vip} has no such backend"),
        }
    }
}

/// Why an LB configuration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum LbConfigError {
    /// Two VIPs with the same address, port and protocol.
    DuplicateVip {
        /// The index of the second one.
        vip: usize,
    },
    /// A VIP whose protocol is neither TCP nor UDP.
    BadVipProto {
        /// The VIP's index.
        vip: usize,
    },
    /// A VIP's backend list is wrong.
    Backends(LbError),
    /// `max_backends` is 0 or above [`maglev::MAX_BACKENDS`].
    BadMaxBackends,
    /// `affinity_capacity` is zero.
    ZeroAffinityCapacity,
    /// `affinity_timeout` is zero.
    ZeroAffinityTimeout,
    /// The affinity table could not be built.
    AffinityTable(TableConfigError),
}

impl fmt::Display for LbConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateVip { vip } => write!(f, "vip {vip}: same address, port and protocol as an earlier vip"),
            Self::BadVipProto { vip } => write!(f, "vip {vip}: proto must be tcp or udp"),
            Self::Backends(e) => write!(f, "{e}"),
            Self::BadMaxBackends => write!(f, "max_backends must be 1..={}", maglev::MAX_BACKENDS),
            Self::ZeroAffinityCapacity => f.write_str("affinity_capacity is zero"),
            Self::ZeroAffinityTimeout => f.write_str("affinity_timeout is zero"),
            Self::AffinityTable(e) => write!(f, "affinity table: {e}"),
        }
    }
}

fn addr_bits(a: &IpAddr) -> u128 {
    match a {
        IpAddr::V4(b) => u128::from(u32::from_be_bytes(*b)),
        IpAddr::V6(b) => u128::from_be_bytes(*b),
    }
}

/// (address bits, IPv6?, protocol, port): the sort key of the VIP index.
type VipKey = (u128, bool, u8, u16);

fn vip_key(addr: &IpAddr, proto: u8, port: u16) -> VipKey {
    (addr_bits(addr), matches!(addr, IpAddr::V6(_)), proto, port)
}

fn check_backends(vip: usize, v6: bool, list: &[Backend], max: usize) -> Result<Vec<Target>, LbError> {
    if list.len() > max {
        return Err(LbError::TooManyBackends { vip, count: list.len() });
    }
    let mut out: Vec<Target> = Vec::with_capacity(list.len());
    for (i, b) in list.iter().enumerate() {
        if matches!(b.addr, IpAddr::V6(_)) != v6 {
            return Err(LbError::FamilyMismatch { vip, backend: i });
        }
        let t = Target { addr: addr_bits(&b.addr), port: b.port };
        if out.contains(&t) {
            return Err(LbError::DuplicateBackend { vip, backend: i });
        }
        out.push(t);
    }
    Ok(out)
}

impl LbConfig {
    /// Checks the VIPs, their backends and the knobs.
    pub fn validate(&self) -> Result<(), LbConfigError> {
        if self.max_backends == 0 || self.max_backends > maglev::MAX_BACKENDS {
            return Err(LbConfigError::BadMaxBackends);
        }
        for (i, v) in self.vips.iter().enumerate() {
            if !matches!(v.proto, PROTO_TCP | PROTO_UDP) {
                return Err(LbConfigError::BadVipProto { vip: i });
            }
            let k = vip_key(&v.addr, v.proto, v.port);
            if self.vips.iter().take(i).any(|o| vip_key(&o.addr, o.proto, o.port) == k) {
                return Err(LbConfigError::DuplicateVip { vip: i });
            }
            check_backends(i, k.1, &v.backends, self.max_backends).map_err(LbConfigError::Backends)?;
        }
        if self.affinity_capacity == 0 {
            return Err(LbConfigError::ZeroAffinityCapacity);
        }
        if self.affinity_timeout.ticks() == 0 {
            return Err(LbConfigError::ZeroAffinityTimeout);
        }
        Ok(())
    }
}

/// The affinity table's actions: the connection's backend and when its timer last restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Affinity {
    To {
        target: Target,
        restarted: u64,
    },
    /// Default (miss) action: pick a backend.
    Pick,
}

impl Actions<4> for Affinity {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0]);

    fn encode(&self) -> (ActionId, [u64; 4]) {
        match self {
            Affinity::To { target, restarted } => {
                let p = target.port.map_or(0, |p| 1 << 16 | u64::from(p));
                (0, [(target.addr >> 64) as u64, target.addr as u64, p, *restarted])
            }
            Affinity::Pick => (1, [0; 4]),
        }
    }

    fn decode(id: ActionId, w: &[u64; 4]) -> Option<Self> {
        match id {
            0 => {
                let port = (w[2] >> 16 & 1 == 1).then_some(w[2] as u16);
                let target = Target { addr: u128::from(w[0]) << 64 | u128::from(w[1]), port };
                Some(Affinity::To { target, restarted: w[3] })
            }
            1 => Some(Affinity::Pick),
            _ => None,
        }
    }
}

struct VipState {
    key: VipKey,
    table: maglev::Table,
    /// The backend list the table was last built from (control plane only).
    backends: spin::Mutex<Vec<Backend>>,
}

/// The LB state every worker shares: VIPs, their Maglev tables, the affinity table.
pub struct LbShared {
    vips: Vec<VipState>,
    /// VIP keys sorted, with the VIP index.
    index: Vec<(VipKey, usize)>,
    affinity: P4Table<5, 4, Affinity>,
    max_backends: usize,
    refresh: u64,
    sweep_buckets: usize,
}

impl fmt::Debug for LbShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LbShared").field("vips", &self.vips.len()).finish_non_exhaustive()
    }
}

impl LbShared {
    /// Validates `cfg`, builds the tables and publishes each VIP's backends.
    pub fn try_new(cfg: &LbConfig) -> Result<Self, LbConfigError> {
        cfg.validate()?;
        let mut decl = TableDecl::new(cfg.affinity_capacity, Affinity::Pick);
        decl.idle_timeout = IdleTimeout::AutoDelete;
        let affinity = P4Table::try_new(decl).map_err(LbConfigError::AffinityTable)?;
        affinity.table().set_expire_profile(PROFILE, cfg.affinity_timeout);
        let vips: Vec<VipState> = cfg
            .vips
            .iter()
            .map(|v| VipState {
                key: vip_key(&v.addr, v.proto, v.port),
                table: maglev::Table::new(cfg.max_backends),
                backends: spin::Mutex::new(Vec::new()),
            })
            .collect();
        let mut index: Vec<(VipKey, usize)> = vips.iter().enumerate().map(|(i, v)| (v.key, i)).collect();
        index.sort_unstable();
        let s = Self {
            vips,
            index,
            affinity,
            max_backends: cfg.max_backends,
            refresh: (cfg.affinity_timeout.ticks() / 8).max(1),
            sweep_buckets: cfg.sweep_buckets,
        };
        for (i, v) in cfg.vips.iter().enumerate() {
            s.set_backends(i, &v.backends).map_err(LbConfigError::Backends)?;
        }
        Ok(s)
    }

    /// Number of VIPs.
    pub fn vip_count(&self) -> usize {
        self.vips.len()
    }

    /// The index of the VIP (address, port, protocol), if there is one.
    pub fn vip_index(&self, addr: &IpAddr, port: u16, proto: u8) -> Option<usize> {
        let k = vip_key(addr, proto, port);
        self.index.binary_search_by(|(x, _)| x.cmp(&k)).ok().and_then(|i| self.index.get(i)).map(|(_, v)| *v)
    }

    /// Whether some VIP has this address.
    fn is_vip_addr(&self, addr: &IpAddr) -> bool {
        let (a, v6) = (addr_bits(addr), matches!(addr, IpAddr::V6(_)));
        let i = self.index.partition_point(|((x, f, _, _), _)| (*x, *f) < (a, v6));
        self.index.get(i).is_some_and(|((x, f, _, _), _)| (*x, *f) == (a, v6))
    }

    /// Control plane: replaces VIP `vip`'s backends and rebuilds its Maglev table (allocates).
    /// Live connections keep their backends (affinity wins); new ones follow the new table.
    pub fn set_backends(&self, vip: usize, backends: &[Backend]) -> Result<(), LbError> {
        let v = self.vips.get(vip).ok_or(LbError::UnknownVip { vip })?;
        let targets = check_backends(vip, v.key.1, backends, self.max_backends)?;
        let mut list = v.backends.lock();
        if !v.table.publish(&targets) {
            return Err(LbError::Busy);
        }
        list.clear();
        list.extend_from_slice(backends);
        Ok(())
    }

    /// VIP `vip`: its address, port, protocol and current backends (control plane).
    pub fn vip(&self, vip: usize) -> Option<(IpAddr, u16, u8, Vec<Backend>)> {
        let v = self.vips.get(vip)?;
        let (bits, v6, proto, port) = v.key;
        Some((ip_of(bits, v6), port, proto, v.backends.lock().clone()))
    }

    /// Control plane: appends `b` to VIP `vip`'s backends and rebuilds its Maglev table
    /// (live connections keep their backends; Maglev moves few new ones).
    pub fn add_backend(&self, vip: usize, b: Backend) -> Result<(), LbError> {
        let (_, _, _, mut list) = self.vip(vip).ok_or(LbError::UnknownVip { vip })?;
        list.push(b);
        self.set_backends(vip, &list)
    }

    /// Control plane: removes `b` from VIP `vip`'s backends (its live connections stay until
    /// they go idle) and rebuilds the Maglev table.
    pub fn delete_backend(&self, vip: usize, b: Backend) -> Result<(), LbError> {
        let (_, _, _, mut list) = self.vip(vip).ok_or(LbError::UnknownVip { vip })?;
        let before = list.len();
        list.retain(|x| *x != b);
        if list.len() == before {
            return Err(LbError::NoSuchBackend { vip });
        }
        self.set_backends(vip, &list)
    }

    /// The backend the Maglev table gives a new connection with this flow key (no affinity).
    pub fn maglev_pick(&self, vip: usize, flow: &crate::parse::FlowKey) -> Option<Backend> {
        let v = self.vips.get(vip)?;
        match v.table.pick(hash_key(FLOW_SEED, &flow.words())) {
            Pick::Target(t) => Some(Backend { addr: ip_of(t.addr, v.key.1), port: t.port }),
            Pick::Empty | Pick::Busy => None,
        }
    }

    /// VIP `vip`'s Maglev table size M and the slots each backend holds, in list order.
    pub fn slot_counts(&self, vip: usize) -> Option<(u32, Vec<u32>)> {
        self.vips.get(vip).map(|v| v.table.slot_counts())
    }
}

fn ip_of(bits: u128, v6: bool) -> IpAddr {
    if v6 { IpAddr::V6(bits.to_be_bytes()) } else { IpAddr::V4((bits as u32).to_be_bytes()) }
}

/// One worker's LB counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LbCounters {
    /// Packets to a VIP that were rewritten to a backend.
    pub balanced: u64,
    /// Packets to no VIP (untouched).
    pub passed: u64,
    /// New connections placed by the Maglev table.
    pub new_conns: u64,
    /// Packets that followed an affinity entry.
    pub affinity_hits: u64,
    /// Affinity entries that could not be added (table/bucket full); the packet still went.
    pub affinity_add_failed: u64,
    /// Drops: the VIP had no backend (or its table stayed busy).
    pub no_backend: u64,
    /// Drops: non-first fragments to a VIP address.
    pub unsupported: u64,
}

/// The LB NF of one worker core.
#[derive(Debug)]
pub struct Lb {
    shared: Arc<LbShared>,
    lane: Local,
    cursor: usize,
    counters: LbCounters,
}

impl Lb {
    /// A worker's LB over the shared state.
    pub fn new(shared: Arc<LbShared>) -> Self {
        let lane = shared.affinity.table().local();
        Self { shared, lane, cursor: 0, counters: LbCounters::default() }
    }

    /// This worker's counters.
    pub fn counters(&self) -> &LbCounters {
        &self.counters
    }

    /// This worker's affinity-table counters.
    pub fn affinity_stats(&self) -> &LocalStats {
        self.lane.stats()
    }

    /// The shared state (for `set_backends`).
    pub fn shared(&self) -> &Arc<LbShared> {
        &self.shared
    }

    /// Where one VIP packet goes: from its affinity entry or a new Maglev pick.
    fn target(&mut self, applied: &Applied<5, Affinity>, vip: usize, now: Instant) -> Option<Target> {
        let shared = &*self.shared;
        match applied {
            Applied::Hit { action: Affinity::To { target, restarted }, entry } => {
                self.counters.affinity_hits += 1;
                if now.ticks().saturating_sub(*restarted) >= shared.refresh {
                    let lane = &mut self.lane;
                    let _ = shared.affinity.restart_expire_timer(lane, entry, now);
                    let _ = shared.affinity.update(
                        lane,
                        entry,
                        &Affinity::To { target: *target, restarted: now.ticks() },
                        now,
                    );
                }
                Some(*target)
            }
            Applied::Miss { miss, .. } => {
                let v = shared.vips.get(vip)?;
                let Pick::Target(t) = v.table.pick(hash_key(FLOW_SEED, miss.key())) else { return None };
                let a = Affinity::To { target: t, restarted: now.ticks() };
                match shared.affinity.add_entry(&mut self.lane, miss, &a, PROFILE, now) {
                    // An earlier packet of the same new connection in this burst added it
                    // (the burst looked every key up before any add); Maglev picked the
                    // same backend for both.
                    AddStatus::NotDone(NotDone::KeyExists) => {}
                    status => {
                        self.counters.new_conns += 1;
                        self.counters.affinity_add_failed += u64::from(!status.is_success());
                    }
                }
                Some(t)
            }
            Applied::Hit { action: Affinity::Pick, .. } => None,
        }
    }
}

impl Drop for Lb {
    fn drop(&mut self) {
        self.shared.affinity.table().retire_local(&mut self.lane);
    }
}

impl Nf for Lb {
    fn name(&self) -> &'static str {
        "lb"
    }

    fn process(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        let shared = Arc::clone(&self.shared);
        let mut keys = [[0u64; 5]; BATCH_SIZE];
        let mut at = [(0usize, 0usize); BATCH_SIZE];
        let mut n = 0;
        for (i, p) in batch.pkts_mut().iter_mut().enumerate() {
            if !p.alive() {
                continue;
            }
            let f = &p.parsed.flow;
            match shared.vip_index(&f.dst, f.dst_port, f.proto) {
                Some(vip) if p.parsed.fragment != Fragment::Later => {
                    if let (Some(k), Some(a)) = (keys.get_mut(n), at.get_mut(n)) {
                        *k = f.words();
                        *a = (i, vip);
                        n += 1;
                    }
                }
                _ if p.parsed.fragment == Fragment::Later && shared.is_vip_addr(&f.dst) => {
                    self.counters.unsupported += 1;
                    p.verdict = Verdict::Drop(DropReason::NfUnsupported);
                }
                _ => self.counters.passed += 1,
            }
        }
        let mut out = [shared.affinity.placeholder(); BATCH_SIZE];
        if let (Some(keys), Some(out)) = (keys.get(..n), out.get_mut(..n)) {
            shared.affinity.apply_burst(&mut self.lane, keys, ctx.now, out);
        }
        for (applied, &(i, vip)) in out.iter().zip(at.iter()).take(n) {
            let target = self.target(applied, vip, ctx.now);
            let Some(p) = batch.pkts_mut().get_mut(i) else { continue };
            match target {
                Some(t) if retarget(pool.frame_mut(p.buf), &mut p.parsed, t) => self.counters.balanced += 1,
                _ => {
                    self.counters.no_backend += 1;
                    p.verdict = Verdict::Drop(DropReason::LbNoBackend);
                }
            }
        }
        if shared.sweep_buckets > 0 {
            let t = shared.affinity.table();
            self.cursor = t.sweep(&mut self.lane, ctx.now, self.cursor, shared.sweep_buckets);
        }
    }

    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        write!(
            w,
            " lb_balanced={} lb_passed={} lb_new_conns={} lb_affinity_hits={} lb_affinity_add_failed={} lb_no_backend={} lb_unsupported={}",
            c.balanced, c.passed, c.new_conns, c.affinity_hits, c.affinity_add_failed, c.no_backend, c.unsupported
        )
    }
}

/// Rewrites the destination to `t` and updates the parse result's flow key to match.
fn retarget(frame: &mut [u8], p: &mut Parsed, t: Target) -> bool {
    let v6 = matches!(p.flow.dst, IpAddr::V6(_));
    let addr = ip_of(t.addr, v6);
    if rewrite(frame, p, Side::Dst, addr.as_bytes(), t.port).is_none() {
        return false;
    }
    p.flow.dst = addr;
    if let Some(port) = t.port {
        p.flow.dst_port = port;
    }
    true
}
