//! Accounting: per-flow packet and byte counters with idle expiry and export (NetFlow-style
//! records).
//!
//! - Per-flow state is a PNA exact table keyed by the 5-tuple ([`FlowKey::words`]) with
//!   `add_on_miss` (first packet) and data-plane parameter updates through the hit handle
//!   (`update_params`): packets, bytes, first seen, last seen. Bytes are IP bytes (the IP
//!   header's length), as NetFlow counts them. Packets of one flow within a batch are added up
//!   first, so each flow costs one update per batch. A flow is updated by one core at a time
//!   (RSS flow affinity, `nf` module docs), which makes the read-modify-write safe.
//! - Expiry is `NotifyControl` with one expire-time profile of `idle_timeout`: a hit restarts
//!   the timer when the last restart is more than 1/8 of the timeout old (so a flow expires
//!   between 7/8 and 8/8 of the timeout after its last packet, and a busy flow costs one extra
//!   write per eighth of the timeout). Each batch, a worker sweeps a few buckets (expired
//!   entries are reported on the table's event ring once) and handles a few reports: an entry
//!   still expired is deleted and its record (flow key, packets, bytes, first/last seen) is
//!   pushed on the bounded export ring that the control plane drains
//!   ([`AccountingShared::drain_exports`]). The entry is taken with
//!   [`ExactTable::take`](crate::pna::exact::ExactTable::take) — "delete it if it is still
//!   expired", one step under the bucket's lock — so a packet of the flow on another core
//!   either comes first (the entry stays, and is reported again at its next expiry) or finds
//!   it gone (and starts a new record): each expired entry is exported exactly once and no
//!   packet is counted into a record already exported.
//! - Nothing is lost: a report whose bucket is busy, or a record the export ring had no room
//!   for after all (another core took the last cell), goes on the worker's pending list and is
//!   retried by later batches (bounded work per batch). While the export ring is full reports
//!   stay on the event ring and their entries in the table (`export_full` counts the stalls);
//!   while the pending list is full no new report is taken.
//! - A failed add (table or bucket full) leaves the packet unaccounted, counted
//!   (`unaccounted_packets`); it is never dropped.
//!

use alloc::sync::Arc;
use core::fmt;

use super::{Nf, NfBatch, NfCtx, Pkt, Verdict};
use crate::buf::{BATCH_SIZE, Pool};
use crate::parse::FlowKey;
use crate::pna::exact::{Local, LocalStats, TableConfigError, Take, hash_key};
use crate::pna::p4::{Actions, Applied, P4Table, TableDecl};
use crate::pna::{ActionId, ActionMask, AddStatus, IdleTimeout, NotDone};
use crate::time::{Duration, Instant};

/// Seed of the per-batch grouping of packets by flow (any value: the hash never leaves the
/// batch).
const DEDUP_SEED: u64 = 0xACC0_0000_0000_0001;

pub mod ipfix;
#[cfg(all(test, loom))]
mod loom_ring;
mod ring;
#[cfg(test)]
mod tests;

pub use ipfix::IpfixExport;

const PROFILE: u8 = 1;

/// Deferred steps a worker holds at most.
pub const PENDING: usize = 32;

/// An export step that could not finish at once, to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    /// Take the expired entry with this key (its bucket was busy).
    Take([u64; 5]),
    /// Push this record (the export ring filled up after the room check).
    Record([u64; ring::WORDS]),
}

/// One exported flow record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FlowRecord {
    /// The flow.
    pub flow: FlowKey,
    /// Packets counted.
    pub packets: u64,
    /// IP bytes counted.
    pub bytes: u64,
    /// When its first packet was counted.
    pub first_seen: Instant,
    /// When its last packet was counted.
    pub last_seen: Instant,
}

impl FlowRecord {
    fn to_words(self) -> [u64; ring::WORDS] {
        let k = self.flow.words();
        [k[0], k[1], k[2], k[3], k[4], self.packets, self.bytes, self.first_seen.0, self.last_seen.0]
    }

    fn from_words(w: &[u64; ring::WORDS]) -> Self {
        let [a, b, c, d, e, packets, bytes, first, last] = *w;
        Self {
            flow: FlowKey::from_words(&[a, b, c, d, e]),
            packets,
            bytes,
            first_seen: Instant(first),
            last_seen: Instant(last),
        }
    }
}

/// An accounting NF's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct AccountingConfig {
    /// Flows the table holds.
    pub capacity: usize,
    /// Idle time after which a flow is exported, in clock ticks.
    pub idle_timeout: Duration,
    /// Records the export ring holds (rounded up to a power of two).
    pub export_ring: usize,
    /// Expiry reports the table's event ring holds.
    pub event_ring: usize,
    /// Buckets each batch sweeps for expired flows.
    pub sweep_buckets: usize,
    /// Expiry reports each batch turns into exports at most.
    pub exports_per_batch: usize,
    /// Send the records as IPFIX messages out of a port (`accounting.export=ipfix:…`);
    /// `None`: they wait on the export ring for the control plane.
    pub export: Option<IpfixExport>,
}

impl Default for AccountingConfig {
    /// 65 536 flows, 2^35 ticks (about 16 s at 2 GHz), 4096-record rings, 16 buckets and
    /// 32 exports per batch.
    fn default() -> Self {
        Self {
            capacity: crate::miri_or(1 << 16, 64),
            idle_timeout: Duration(1 << 35),
            export_ring: crate::miri_or(4096, 16),
            event_ring: crate::miri_or(4096, 16),
            sweep_buckets: 16,
            exports_per_batch: 32,
            export: None,
        }
    }
}

/// Why an accounting configuration was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AccountingConfigError {
    /// `capacity` is zero.
    ZeroCapacity,
    /// `idle_timeout` is zero.
    ZeroIdleTimeout,
    /// `export_ring` or `event_ring` is zero or above [`MAX_RING`].
    ZeroRing,
    /// The flow table could not be built.
    FlowTable(TableConfigError),
    /// The export ring does not fit in the heap.
    OutOfMemory,
}

impl fmt::Display for AccountingConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCapacity => f.write_str("capacity is zero"),
            Self::ZeroIdleTimeout => f.write_str("idle_timeout is zero"),
            Self::ZeroRing => f.write_str("export_ring and event_ring must be in 1..=1048576"),
            Self::FlowTable(e) => write!(f, "flow table: {e}"),
            Self::OutOfMemory => f.write_str("not enough memory for an export ring of this size"),
        }
    }
}

/// Largest `export_ring` / `event_ring` (records): rings are allocated at creation, so a
/// bound keeps a typo from exhausting the heap.
pub const MAX_RING: usize = 1 << 20;

impl AccountingConfig {
    /// Checks the knobs.
    pub fn validate(&self) -> Result<(), AccountingConfigError> {
        if self.capacity == 0 {
            return Err(AccountingConfigError::ZeroCapacity);
        }
        if self.idle_timeout.ticks() == 0 {
            return Err(AccountingConfigError::ZeroIdleTimeout);
        }
        if !(1..=MAX_RING).contains(&self.export_ring) || !(1..=MAX_RING).contains(&self.event_ring) {
            return Err(AccountingConfigError::ZeroRing);
        }
        Ok(())
    }
}

/// The flow table's actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Counted {
    /// packets, bytes, first seen, last seen, last timer restart.
    Count([u64; 5]),
    /// Default (miss) action: start counting.
    Start,
}

impl Actions<5> for Counted {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0]);

    fn encode(&self) -> (ActionId, [u64; 5]) {
        match self {
            Counted::Count(w) => (0, *w),
            Counted::Start => (1, [0; 5]),
        }
    }

    fn decode(id: ActionId, w: &[u64; 5]) -> Option<Self> {
        match id {
            0 => Some(Counted::Count(*w)),
            1 => Some(Counted::Start),
            _ => None,
        }
    }
}

/// The accounting state every worker shares: the flow table and the export ring.
pub struct AccountingShared {
    flows: P4Table<5, 5, Counted>,
    exports: ring::Ring,
    refresh: u64,
    sweep_buckets: usize,
    exports_per_batch: usize,
    export: Option<IpfixExport>,
    /// IPFIX data records sent so far, every worker's exporter together (the messages'
    /// sequence numbers).
    sequence: core::sync::atomic::AtomicU32,
}

impl fmt::Debug for AccountingShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AccountingShared").field("export_ring", &self.exports.capacity()).finish_non_exhaustive()
    }
}

impl AccountingShared {
    /// Validates `cfg` and builds the table and the export ring.
    pub fn try_new(cfg: &AccountingConfig) -> Result<Self, AccountingConfigError> {
        cfg.validate()?;
        let mut decl = TableDecl::new(cfg.capacity, Counted::Start);
        decl.idle_timeout = IdleTimeout::NotifyControl;
        decl.event_ring = cfg.event_ring;
        let flows = P4Table::try_new(decl).map_err(AccountingConfigError::FlowTable)?;
        flows.table().set_expire_profile(PROFILE, cfg.idle_timeout);
        Ok(Self {
            flows,
            exports: ring::Ring::try_new(cfg.export_ring).ok_or(AccountingConfigError::OutOfMemory)?,
            refresh: (cfg.idle_timeout.ticks() / 8).max(1),
            sweep_buckets: cfg.sweep_buckets,
            exports_per_batch: cfg.exports_per_batch,
            export: cfg.export,
            sequence: core::sync::atomic::AtomicU32::new(0),
        })
    }

    /// Takes the oldest exported record (control plane).
    pub fn pop_export(&self) -> Option<FlowRecord> {
        self.exports.pop().map(|w| FlowRecord::from_words(&w))
    }

    /// Hands every exported record to `f` (control plane); returns how many.
    pub fn drain_exports(&self, mut f: impl FnMut(&FlowRecord)) -> usize {
        let mut n = 0;
        while let Some(r) = self.pop_export() {
            f(&r);
            n += 1;
        }
        n
    }

    /// The live record of a flow (control plane; not removed).
    pub fn record(&self, flow: &FlowKey, now: Instant) -> Option<FlowRecord> {
        let e = self.flows.table().get(&flow.words(), now)?;
        let [packets, bytes, first, last, _] = e.params;
        Some(FlowRecord { flow: *flow, packets, bytes, first_seen: Instant(first), last_seen: Instant(last) })
    }

    /// Flows in the table (walks it: control plane only).
    pub fn flow_count(&self, now: Instant) -> usize {
        self.flows.table().count(now)
    }

    /// Hands every live record to `f` (walks the table: control plane only).
    pub fn for_each_record(&self, now: Instant, mut f: impl FnMut(&FlowRecord)) {
        self.flows.table().for_each(now, |e| {
            let [packets, bytes, first, last, _] = e.params;
            let flow = FlowKey::from_words(&e.key);
            f(&FlowRecord { flow, packets, bytes, first_seen: Instant(first), last_seen: Instant(last) });
        });
    }

    /// Where expired records go as IPFIX, if anywhere.
    pub fn export(&self) -> Option<IpfixExport> {
        self.export
    }
}

/// One worker's accounting counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AccountingCounters {
    /// Packets counted.
    pub packets: u64,
    /// Flows started.
    pub flows: u64,
    /// Packets that could not be counted (table or bucket full, update lost to a race).
    pub unaccounted_packets: u64,
    /// Records pushed on the export ring.
    pub exported: u64,
    /// Batches that stopped taking reports because the export ring was full.
    pub export_full: u64,
    /// Export steps deferred to a later batch (bucket busy, export ring taken meanwhile).
    pub deferred: u64,
    /// IPFIX messages sent.
    pub ipfix_messages: u64,
    /// Records in them.
    pub ipfix_records: u64,
    /// Messages postponed because the pool had no buffer.
    pub ipfix_no_buf: u64,
}

/// The accounting NF of one worker core.
#[derive(Debug)]
pub struct Accounting {
    shared: Arc<AccountingShared>,
    lane: Local,
    cursor: usize,
    counters: AccountingCounters,
    pending: heapless::Deque<Pending, PENDING>,
    /// When `maintain` last ran (once per poll: `process` and `generate` share it).
    maintained: Option<Instant>,
}

impl Accounting {
    /// A worker's accounting over the shared state.
    pub fn new(shared: Arc<AccountingShared>) -> Self {
        let lane = shared.flows.table().local();
        Self {
            shared,
            lane,
            cursor: 0,
            counters: AccountingCounters::default(),
            pending: heapless::Deque::new(),
            maintained: None,
        }
    }

    /// This worker's counters.
    pub fn counters(&self) -> &AccountingCounters {
        &self.counters
    }

    /// This worker's flow-table counters.
    pub fn table_stats(&self) -> &LocalStats {
        self.lane.stats()
    }

    /// The shared state.
    pub fn shared(&self) -> &Arc<AccountingShared> {
        &self.shared
    }

    /// Export steps waiting for a busy bucket or room on the export ring.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Sweeps `buckets` buckets for expired flows, retries up to `max_exports` deferred
    /// steps and exports up to `max_exports` of the reported flows (what each batch does with
    /// the configured budgets). Returns the records exported.
    pub fn maintain(&mut self, now: Instant, buckets: usize, max_exports: usize) -> usize {
        let table = self.shared.flows.table();
        if buckets > 0 {
            self.cursor = table.sweep(&mut self.lane, now, self.cursor, buckets);
        }
        let mut done = 0;
        for _ in 0..self.pending.len().min(max_exports) {
            let Some(step) = self.pending.pop_front() else { break };
            done += self.run_step(step, now);
        }
        for _ in 0..max_exports {
            // Each report can leave at most one deferred step: take one only if it fits.
            if self.pending.is_full() {
                break;
            }
            if !self.shared.exports.has_room() {
                // Back-pressure: reports stay on the event ring, entries in the table, until
                // the control plane drains the export ring.
                self.counters.export_full += 1;
                break;
            }
            let Some(ev) = self.shared.flows.table().events().pop() else { break };
            done += self.run_step(Pending::Take(ev.key), now);
        }
        done
    }

    /// Runs `step` and what follows; a step that cannot finish now goes on the pending list.
    /// Returns the records exported (0 or 1).
    fn run_step(&mut self, step: Pending, now: Instant) -> usize {
        let shared = Arc::clone(&self.shared);
        let words = match step {
            Pending::Take(key) => {
                match shared.flows.table().take(&mut self.lane, &key, |e| e.deadline.is_some_and(|d| d <= now)) {
                    Ok(e) => {
                        let [packets, bytes, first, last, _] = e.params;
                        let flow = FlowKey::from_words(&key);
                        FlowRecord { flow, packets, bytes, first_seen: Instant(first), last_seen: Instant(last) }
                            .to_words()
                    }
                    // Gone, or the flow came back since the report (kept; reported again later).
                    Err(Take::NotFound | Take::Kept(_)) => return 0,
                    Err(Take::Busy) => return self.defer(step),
                }
            }
            Pending::Record(words) => words,
        };
        if shared.exports.push(&words) {
            self.counters.exported += 1;
            1
        } else {
            self.defer(Pending::Record(words))
        }
    }

    /// Puts `step` on the pending list (callers make sure it has room).
    fn defer(&mut self, step: Pending) -> usize {
        self.counters.deferred += 1;
        if self.pending.push_back(step).is_err() {
            // Unreachable: `maintain` takes a report only when the list has room, and a
            // retried step frees its own place before it may be put back.
            debug_assert!(false, "accounting pending list overflow");
        }
        0
    }

    /// [`Accounting::maintain`] with the configured budgets, at most once per poll.
    fn maintain_once(&mut self, now: Instant) {
        if self.maintained != Some(now) {
            self.maintained = Some(now);
            let (b, e) = (self.shared.sweep_buckets, self.shared.exports_per_batch);
            self.maintain(now, b, e);
        }
    }

    /// Sends one IPFIX message with up to [`ipfix::MAX_RECORDS`] exported records, if there
    /// are any and the batch has room (at most one message per poll: export never crowds
    /// out forwarding).
    fn export(&mut self, exp: &IpfixExport, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        if batch.len() >= BATCH_SIZE {
            return;
        }
        let mut recs: heapless::Vec<FlowRecord, { ipfix::MAX_RECORDS }> = heapless::Vec::new();
        while !recs.is_full() {
            let Some(r) = self.shared.pop_export() else { break };
            let _ = recs.push(r);
        }
        if recs.is_empty() {
            return;
        }
        let templates = self.counters.ipfix_messages.is_multiple_of(u64::from(ipfix::TEMPLATE_EVERY));
        let size = ipfix::size(&recs, templates);
        let Some(b) = pool.alloc() else {
            self.counters.ipfix_no_buf += 1;
            self.requeue(&recs);
            return;
        };
        let sequence = self.shared.sequence.fetch_add(recs.len() as u32, core::sync::atomic::Ordering::Relaxed);
        let msg = ipfix::Message { sequence, export_time: 0, templates };
        let built = pool
            .set_frame(b, crate::buf::HEADROOM, size)
            .ok()
            .and_then(|()| ipfix::build(pool.frame_mut(b), exp, &msg, &recs))
            .and_then(|_| crate::parse::parse(pool.frame(b)).ok());
        let Some(parsed) = built else {
            // Cannot happen (a message of at most MAX_RECORDS fits a buffer); keep the records.
            let _ = pool.free(b);
            self.requeue(&recs);
            return;
        };
        let pkt = Pkt {
            buf: b,
            parsed,
            ingress: exp.port,
            vid: 0,
            verdict: Verdict::Forward(exp.port),
            dst: crate::nf::Dst::Peer,
        };
        if let Err(p) = batch.push(pkt) {
            let _ = pool.free(p.buf);
            self.requeue(&recs);
            return;
        }
        self.counters.ipfix_messages += 1;
        self.counters.ipfix_records += recs.len() as u64;
    }

    /// Puts records that could not be sent back on the export ring (or, if it filled up
    /// meanwhile, on the pending list: never lost).
    fn requeue(&mut self, recs: &[FlowRecord]) {
        for r in recs {
            if !self.shared.exports.push(&r.to_words()) {
                self.defer(Pending::Record(r.to_words()));
            }
        }
    }

    /// Counts `packets`/`bytes` of one flow whose lookup gave `applied`.
    fn count(&mut self, applied: &Applied<5, Counted>, packets: u64, bytes: u64, now: Instant) {
        let shared = &*self.shared;
        let t = now.ticks();
        match applied {
            Applied::Hit { action: Counted::Count([p, b, first, _, restarted]), entry } => {
                let mut restarted = *restarted;
                if t.saturating_sub(restarted) >= shared.refresh
                    && shared.flows.restart_expire_timer(&mut self.lane, entry, now).is_ok()
                {
                    restarted = t;
                }
                let next = Counted::Count([p + packets, b + bytes, *first, t, restarted]);
                if shared.flows.update(&mut self.lane, entry, &next, now).is_ok() {
                    self.counters.packets += packets;
                } else {
                    self.counters.unaccounted_packets += packets;
                }
            }
            Applied::Miss { miss, .. } => {
                let start = Counted::Count([packets, bytes, t, t, t]);
                match shared.flows.add_entry(&mut self.lane, miss, &start, PROFILE, now) {
                    AddStatus::Success => {
                        self.counters.packets += packets;
                        self.counters.flows += 1;
                    }
                    AddStatus::NotDone(NotDone::KeyExists) => {
                        // Added by another core since the lookup: count through its entry.
                        let again = shared.flows.apply(&mut self.lane, miss.key(), now);
                        if matches!(again, Applied::Hit { .. }) {
                            self.count(&again, packets, bytes, now);
                        } else {
                            self.counters.unaccounted_packets += packets;
                        }
                    }
                    AddStatus::NotDone(_) => self.counters.unaccounted_packets += packets,
                }
            }
            Applied::Hit { action: Counted::Start, .. } => self.counters.unaccounted_packets += packets,
        }
    }
}

impl Drop for Accounting {
    fn drop(&mut self) {
        // Deferred records go out now if the ring has room (the control plane drains it).
        for _ in 0..PENDING * 64 {
            let Some(step) = self.pending.pop_front() else { break };
            self.run_step(step, Instant(u64::MAX));
        }
        self.shared.flows.table().retire_local(&mut self.lane);
    }
}

impl Nf for Accounting {
    fn name(&self) -> &'static str {
        "accounting"
    }

    fn process(&mut self, ctx: &NfCtx, _pool: &mut Pool<'_>, batch: &mut NfBatch) {
        // Unique flows of the batch with their packet and byte sums.
        let mut keys = [[0u64; 5]; BATCH_SIZE];
        let mut sums = [(0u64, 0u64); BATCH_SIZE];
        let mut n = 0;
        // Which unique flow each hash slot holds (open addressing over twice the batch; a key
        // is compared only with the flows whose slot it probes, not with every flow so far).
        let mut index = [u8::MAX; 2 * BATCH_SIZE];
        for p in batch.pkts().iter().filter(|p| p.alive()) {
            let k = p.parsed.flow.words();
            let bytes = u64::from(p.parsed.l3_len);
            let mut i = hash_key(DEDUP_SEED, &k) as usize;
            let seen = loop {
                i &= index.len() - 1;
                match index.get(i).copied() {
                    Some(j) if j != u8::MAX => {
                        if keys.get(usize::from(j)) == Some(&k) {
                            break Some(usize::from(j));
                        }
                        i += 1;
                    }
                    _ => {
                        // A free slot: the flow is new. There are never more than BATCH_SIZE
                        // flows in 2 × BATCH_SIZE slots, so a free one is always found.
                        if let Some(s) = index.get_mut(i) {
                            *s = n as u8;
                        }
                        break None;
                    }
                }
            };
            let at = seen.unwrap_or(n);
            if let (Some(slot), Some(s)) = (keys.get_mut(at), sums.get_mut(at)) {
                *slot = k;
                s.0 += 1;
                s.1 += bytes;
                n += usize::from(seen.is_none());
            }
        }
        let shared = Arc::clone(&self.shared);
        let mut out = [shared.flows.placeholder(); BATCH_SIZE];
        if let (Some(k), Some(o)) = (keys.get(..n), out.get_mut(..n)) {
            shared.flows.apply_burst(&mut self.lane, k, ctx.now, o);
        }
        for (applied, &(packets, bytes)) in out.iter().zip(sums.iter()).take(n) {
            self.count(applied, packets, bytes, ctx.now);
        }
        self.maintain_once(ctx.now);
    }

    fn generate(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        // Expiry goes on when no traffic comes.
        self.maintain_once(ctx.now);
        if let Some(exp) = self.shared.export {
            self.export(&exp, pool, batch);
        }
    }

    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        if self.shared.export.is_some() {
            write!(
                w,
                " accounting_ipfix_messages={} accounting_ipfix_records={} accounting_ipfix_no_buf={}",
                c.ipfix_messages, c.ipfix_records, c.ipfix_no_buf
            )?;
        }
        write!(
            w,
            " accounting_packets={} accounting_flows={} accounting_unaccounted={} accounting_exported={} accounting_export_full={} accounting_deferred={} accounting_pending={}",
            c.packets,
            c.flows,
            c.unaccounted_packets,
            c.exported,
            c.export_full,
            c.deferred,
            self.pending.len()
        )
    }
}
