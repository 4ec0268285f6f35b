//! ACL: 5-tuple permit/deny rules, classified once per flow.
//!
//! - Rules: source and destination prefixes (IPv4 or IPv6; `None` = any address of either
//!   family), source and destination port ranges, an optional protocol, a priority (higher
//!   wins; equal priorities: the earlier rule wins) and permit/deny. A flow that no rule matches
//!   gets the configured default action.
//! - The first packet of a flow is classified by [`Classifier`] (bit vectors in runs of rules,
//!   merged tuple space search for the largest sets);
//!   the verdict goes into a flow cache, a PNA exact table with `add_on_miss` keyed by the
//!   5-tuple ([`FlowKey::words`]), so later packets cost one hash lookup
//!   (classify work per flow, not per packet). The cache is `AutoDelete` with one expire-time
//!   profile of `flow_timeout`, counted from classification and not refreshed by hits: a flow
//!   is reclassified at most once per `flow_timeout`, stale flows go away, and a hit costs no
//!   write. Each batch also sweeps a few buckets so that expired slots return to the table.
//! - A full cache never changes a verdict: the packet is classified anyway and the failed add
//!   is counted (`acl_cache_add_failed`).
//! - While the IPv4 classifier's cross tables answer IPv4 keys (`classifier` module doc: a
//!   set whose first run fits them, no rule of that run deleted since its build), IPv4 packets
//!   skip the cache and are classified in bursts of [`BURST`] keys held field by field
//!   ([`Keys4`], [`AclRules::classify_v4_burst`]; counted as `acl_direct`): there a
//!   classification costs less than a cache hit, and a flood of new flows costs no adds.
//! - A cache that misses nearly every lookup is skipped for a while (`FloodGuard`, with the
//!   worker's lane of the cache in `cache.rs`): after
//!   [`FLOOD_PROBE`] lookups with more than 7 in 8 new flows (a flood of new flows, or more
//!   live flows than the cache holds), the next [`FLOOD_WINDOW`] packets (doubling while
//!   the flood lasts, up to [`FLOOD_WINDOW_MAX`]) are classified
//!   directly (counted `acl_direct`; windows `acl_flood_windows`), then the cache is probed
//!   again. Verdicts are the same either way; a flood costs a classification per packet, not
//!   a classification, a lookup and an add.
//! - [`AclConfig::always_cache`] sends every packet through the cache.
//! - Alone in a chain, the ACL has a vector loop (`Nf::run_vector`, `nf` module doc): while
//!   the cross tables answer, each common IPv4 frame (untagged, no options, not a fragment)
//!   has its 5-tuple read straight from the frame (`parse::ipv4_flow`), is classified in a
//!   burst and sent or dropped without a packet record; each common IPv6 frame (untagged, no
//!   extension header: `parse::ipv6_flow`) likewise, decided in bursts as the batch path
//!   decides it (the flow cache, or directly in a flood window: `CacheLane::decide`, one
//!   piece of code for both paths); every other frame takes the batch path above.
//! - Denied packets become `Drop(AclDeny)`.
//! - Rule changes ([`AclShared::add_rule`], [`AclShared::delete_rule`]) are visible at the
//!   workers' next batch without rebuilding the classifiers ([`AclRules`]: an added rule joins
//!   a small delta, a deleted one is masked out); the control plane folds them into new
//!   classifiers in the background ([`AclShared::start_merge`], [`Merge::step`],
//!   [`AclShared::finish_merge`]).
//!
//! VLANs: a rule with [`AclRule::vlan`] matches only frames that arrived with that VLAN ID
//! (`Pkt::vlan`: the sub-interface's, whose tag came off at admission, or the outer tag a
//! frame carries through a chain without sub-interfaces); one without matches every frame.
//! The rules of each VLAN (at most [`MAX_VLANS`] VIDs) are classifiers of their own beside
//! those of the rules without a VLAN (`rules` module: scopes), and a tagged frame's answer is
//! the better of the two; its flow-cache key carries the VID (`cache_key`), so the same
//! 5-tuple on two VLANs is two flows. Untagged frames — all the vector loop and the direct
//! IPv4 path take — see only the rules without a VLAN, at the cost they had before.
//!
//! Fragments: a non-first fragment has no ports; its flow key (and so its classification)
//! carries ports 0 (`parse` module docs). ICMP and other protocols classify with ports 0 too.
//! Families: a rule with an IPv4 prefix matches only IPv4 packets, one with an IPv6 prefix only
//! IPv6 packets, one without prefixes both. There is one classifier per family.

use alloc::sync::Arc;
use core::fmt;

use super::{Nf, NfBatch, NfCtx, Pkt, VectorTx, Verdict};
use crate::buf::{BATCH_SIZE, PacketBuf, Pool};
use crate::drops::DropReason;
use crate::parse::{self, FlowKey, IpAddr};
use crate::pna::exact::LocalStats;
use crate::pna::p4::{Actions, P4Table, TableDecl};
use crate::pna::ternary::Rule;
use crate::pna::{ActionId, ActionMask, IdleTimeout};
use crate::sync::{Reader, Swap};

pub mod bitvec;
mod cache;
pub mod classifier;
use cache::{CacheLane, FloodGuard};
mod config;
mod examples;
pub mod rfc;
mod rules;
#[cfg(test)]
mod tests;

pub use bitvec::BitVec;
pub use classifier::Classifier;
pub use config::{AclConfig, AclConfigError, AclField};
pub use examples::{
    CLASSBENCH_KEYS, CLASSBENCH_SEED, classbench_rules, classbench_rules6, classbench_trace, example_rules,
};
pub use rfc::{BURST, Keys4};
pub use rules::{AclRules, DELTA_MAX, MAX_VLANS, Merge};

/// Most rules an ACL takes.
pub const MAX_RULES: usize = 1 << 16;
/// The flow cache's expire-time profile.
const PROFILE: u8 = 1;
/// Rule id stored for flows that took the default action.
const DEFAULT_RULE: u64 = u32::MAX as u64;
/// Where a frame's VLAN ID sits in its flow-cache key: above [`FlowKey::words`]' last word's
/// protocol, ports and family bit (bits 0..=40), so that the same 5-tuple on two VLANs (or
/// tagged and untagged) is two flows, each decided by the rules of its VLAN.
const KEY_VID_SHIFT: u32 = 44;

/// The flow-cache key of a frame of `flow` that arrived with VLAN ID `vid` (12 bits; 0: none).
#[inline(always)]
fn cache_key(flow: &FlowKey, vid: u16) -> [u64; 5] {
    let mut k = flow.words();
    k[4] |= u64::from(vid) << KEY_VID_SHIFT;
    k
}

/// The VLAN ID of a [`cache_key`].
#[inline(always)]
fn key_vid(k: &[u64; 5]) -> u16 {
    (k[4] >> KEY_VID_SHIFT) as u16 & 0xFFF
}

/// What a rule (or the default) decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AclAction {
    /// Let the flow through.
    Permit,
    /// Drop the flow (`DropReason::AclDeny`).
    Deny,
}

/// An address prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Prefix {
    /// The address (bits beyond `len` must be zero).
    pub addr: IpAddr,
    /// Prefix length: 0..=32 for IPv4, 0..=128 for IPv6.
    pub len: u8,
}

impl Prefix {
    /// An IPv4 prefix.
    pub const fn v4(addr: [u8; 4], len: u8) -> Self {
        Self { addr: IpAddr::V4(addr), len }
    }

    /// An IPv6 prefix.
    pub const fn v6(addr: [u8; 16], len: u8) -> Self {
        Self { addr: IpAddr::V6(addr), len }
    }

    /// The prefix in the classifier's space (IPv4 as IPv4-mapped IPv6).
    fn mapped(&self) -> (u128, u8) {
        match self.addr {
            IpAddr::V4(_) => (self.addr.to_v6_bits(), 96 + self.len.min(32)),
            IpAddr::V6(_) => (self.addr.to_v6_bits(), self.len.min(128)),
        }
    }

    fn max_len(&self) -> u8 {
        match self.addr {
            IpAddr::V4(_) => 32,
            IpAddr::V6(_) => 128,
        }
    }
}

/// One ACL rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AclRule {
    /// Higher wins; among equal priorities the earlier rule wins.
    pub priority: u32,
    /// Source prefix; `None` matches any source of either family.
    pub src: Option<Prefix>,
    /// Destination prefix; `None` matches any destination of either family.
    pub dst: Option<Prefix>,
    /// Inclusive source port range.
    pub sport: (u16, u16),
    /// Inclusive destination port range.
    pub dport: (u16, u16),
    /// IP protocol, or any.
    pub proto: Option<u8>,
    /// The VLAN ID (1..=4094) a frame must have arrived with — the tag of the sub-interface
    /// it came in on, or the outer tag it carries through a chain without sub-interfaces;
    /// `None` matches every frame, tagged or not.
    pub vlan: Option<u16>,
    /// What the rule decides.
    pub action: AclAction,
}

impl AclRule {
    /// A rule matching everything, with `priority` and `action` (narrow it with the fields).
    pub const fn any(priority: u32, action: AclAction) -> Self {
        Self {
            priority,
            src: None,
            dst: None,
            sport: (0, u16::MAX),
            dport: (0, u16::MAX),
            proto: None,
            vlan: None,
            action,
        }
    }

    /// The rule in the classifier's form.
    fn to_rule(self) -> Rule {
        let any = (0u128, 0u8);
        Rule {
            priority: self.priority,
            src: self.src.as_ref().map_or(any, Prefix::mapped),
            dst: self.dst.as_ref().map_or(any, Prefix::mapped),
            sport: self.sport,
            dport: self.dport,
            proto: self.proto,
            action: match self.action {
                AclAction::Permit => 0,
                AclAction::Deny => 1,
            },
        }
    }
}

/// A cached verdict's parameter: the rules' generation (high 32 bits) and the rule id (low
/// 32 bits; `u32::MAX`: the default).
fn verdict(a: AclAction, rule: Option<u32>, generation: u32) -> FlowVerdict {
    let param = u64::from(generation) << 32 | rule.map_or(DEFAULT_RULE, u64::from);
    match a {
        AclAction::Permit => FlowVerdict::Permit(param),
        AclAction::Deny => FlowVerdict::Deny(param),
    }
}

/// The generation of the rules that decided a cached verdict.
fn param_generation(param: u64) -> u32 {
    (param >> 32) as u32
}

/// The flow cache's actions: the verdict with its [`verdict`] parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FlowVerdict {
    Permit(u64),
    Deny(u64),
    /// The default action on a miss: classify.
    Classify,
}

impl Actions<1> for FlowVerdict {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0, 1]);

    fn encode(&self) -> (ActionId, [u64; 1]) {
        match self {
            FlowVerdict::Permit(r) => (0, [*r]),
            FlowVerdict::Deny(r) => (1, [*r]),
            FlowVerdict::Classify => (2, [0]),
        }
    }

    fn decode(id: ActionId, p: &[u64; 1]) -> Option<Self> {
        match id {
            0 => Some(FlowVerdict::Permit(p[0])),
            1 => Some(FlowVerdict::Deny(p[0])),
            2 => Some(FlowVerdict::Classify),
            _ => None,
        }
    }
}

/// The ACL state every worker shares: the rules in force and the flow cache.
pub struct AclShared {
    rules: Swap<AclRules>,
    flows: P4Table<5, 1, FlowVerdict>,
    sweep_buckets: usize,
    always_cache: bool,
}

impl fmt::Debug for AclShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclShared").field("rules", &*self.rules.load()).finish_non_exhaustive()
    }
}

impl AclShared {
    /// Validates `cfg` and builds the classifier and the flow cache.
    pub fn try_new(cfg: &AclConfig) -> Result<Self, AclConfigError> {
        cfg.validate()?;
        let mut decl = TableDecl::new(cfg.flow_capacity, FlowVerdict::Classify);
        decl.idle_timeout = IdleTimeout::AutoDelete;
        let flows = P4Table::try_new(decl).map_err(AclConfigError::FlowTable)?;
        flows.table().set_expire_profile(PROFILE, cfg.flow_timeout);
        Ok(Self {
            rules: Swap::new(AclRules::build(cfg.rules.clone(), cfg.default_action, 0)),
            flows,
            sweep_buckets: cfg.sweep_buckets,
            always_cache: cfg.always_cache,
        })
    }

    /// The rules in force now.
    pub fn rules(&self) -> Arc<AclRules> {
        self.rules.load()
    }

    /// Classifies a flow with the rules in force, without the cache.
    pub fn classify(&self, flow: &FlowKey) -> (AclAction, Option<u32>) {
        self.rules.load().classify(flow)
    }

    /// Flows in the cache at `now` (walks the table: control plane only).
    pub fn cached_flows(&self, now: crate::time::Instant) -> usize {
        self.flows.table().count(now)
    }

    /// Control plane: appends `rule` (it gets the next position) and publishes the new rules;
    /// returns its position and the replaced version (to retire). Cached verdicts are
    /// re-decided at each flow's next packet. The classifiers are not rebuilt (the rule joins
    /// the version's delta, [`AclRules`]) unless the delta is full.
    pub fn add_rule(&self, rule: AclRule) -> Result<(usize, Arc<AclRules>), AclConfigError> {
        let cur = self.rules.load();
        config::check_rule(cur.rules().len(), &rule)?;
        if cur.rules().len() >= MAX_RULES {
            return Err(AclConfigError::TooManyRules { count: cur.rules().len() + 1 });
        }
        if rule.vlan.is_some_and(|v| !cur.vlans().contains(&v)) {
            let count = config::vlan_count(cur.rules()) + 1;
            if count > MAX_VLANS {
                return Err(AclConfigError::TooManyVlans { count });
            }
        }
        let next = cur.with_added(rule);
        Ok((next.rules().len() - 1, self.rules.publish(Arc::new(next))))
    }

    /// Control plane: removes the rule at `position` (later rules move down by one) and
    /// publishes the new rules; returns the removed rule and the replaced version (to retire).
    /// The classifiers are not rebuilt (the rule is marked dead in them).
    pub fn delete_rule(&self, position: usize) -> Result<(AclRule, Arc<AclRules>), AclConfigError> {
        let cur = self.rules.load();
        let Some(&gone) = cur.rules().get(position) else {
            return Err(AclConfigError::NoSuchRule { rule: position });
        };
        Ok((gone, self.rules.publish(Arc::new(cur.without(position)))))
    }

    /// Control plane: a merge of the changes since the last build into new classifiers, to be
    /// built a step at a time ([`Merge::step`]) and published with [`AclShared::finish_merge`];
    /// `None` when nothing changed since.
    pub fn start_merge(&self) -> Option<Merge> {
        self.rules.load().merge()
    }

    /// Control plane: publishes a completed merge (rules changed while it was built stay
    /// pending); returns the replaced version to retire, or `None` if the merge was stale (a
    /// rebuild replaced its base meanwhile) and was dropped. Answers do not change: the
    /// generation stays, cached verdicts stay valid.
    pub fn finish_merge(&self, m: Merge) -> Option<Arc<AclRules>> {
        let cur = self.rules.load();
        let next = AclRules::rebased(&cur, m)?;
        Some(self.rules.publish(Arc::new(next)))
    }
}

/// One worker's ACL counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AclCounters {
    /// Packets let through.
    pub permitted: u64,
    /// Packets dropped (`AclDeny`).
    pub denied: u64,
    /// Packets whose verdict came from the flow cache (with a later packet of a new flow
    /// in the burst that cached it: every packet counts once, here, in `classified` or in
    /// `reclassified`).
    pub cache_hits: u64,
    /// New flows classified (cache misses).
    pub classified: u64,
    /// Classifications that no rule matched (the default action applied).
    pub defaulted: u64,
    /// Cache adds that were not done (table or bucket full, races); the verdict still applied.
    pub cache_add_failed: u64,
    /// Cached verdicts decided by rules since replaced, decided again (and re-cached).
    pub reclassified: u64,
    /// Packets classified directly, without the flow cache (IPv4 packets while the cross
    /// tables answer them, and every packet of a flood window; [`AclConfig::always_cache`]
    /// off).
    pub direct: u64,
    /// Flood windows: times the flow cache missed more than 7 in 8 of [`FLOOD_PROBE`] lookups
    /// (new flows, each costing a classification and an add) and the next [`FLOOD_WINDOW`]
    /// packets (more in a lasting flood: `FloodGuard`) were classified directly instead.
    pub flood_windows: u64,
}

/// Lookups of the flow cache over which the flood guard (`FloodGuard`) judges its miss rate.
pub const FLOOD_PROBE: u32 = 512;
/// Packets classified without the cache after a probe that found a flood (the first window
/// of a flood; each further probe that finds it again doubles the window, up to
/// [`FLOOD_WINDOW_MAX`]).
pub const FLOOD_WINDOW: u32 = 4096;
/// The longest flood window: [`FLOOD_WINDOW`] doubled five times (131 072 packets, about 13 ms
/// at 10 Mpps before a flow cache that has become useful again is used).
pub const FLOOD_WINDOW_MAX: u32 = FLOOD_WINDOW << 5;

impl Acl {
    /// Classifies the batch's live untagged IPv4 packets without the flow cache, in bursts
    /// through the classifier's cross tables ([`AclRules::classify_v4_burst`]).
    fn classify_directly(counters: &mut AclCounters, rules: &AclRules, batch: &mut NfBatch) {
        let mut keys = Keys4::default();
        let mut at = [0usize; BURST];
        let mut answers = [(AclAction::Permit, None); BURST];
        let mut from = 0;
        while from < batch.len() {
            keys.clear();
            for (i, p) in batch.pkts().iter().enumerate().skip(from) {
                from = i + 1;
                let k = keys.len();
                if p.alive()
                    && p.vlan() == 0
                    && keys.push(&p.parsed.flow)
                    && let Some(a) = at.get_mut(k)
                {
                    *a = i;
                    if keys.is_full() {
                        break;
                    }
                }
            }
            rules.classify_v4_burst(&keys, &mut answers);
            for (&i, &(action, rule)) in at.iter().zip(&answers).take(keys.len()) {
                if let Some(p) = batch.pkts_mut().get_mut(i) {
                    counters.direct += 1;
                    counters.defaulted += u64::from(rule.is_none());
                    counters.apply(p, action);
                }
            }
        }
    }

    /// Each of `bufs` with its answer: sent to port `to` (its link header `head` already
    /// written by the loop that parsed it; none: no such port, dropped as `NoRoute` as the
    /// chain's egress does) or dropped as `AclDeny`.
    /// `DIRECT`: the answers are the classifier's (counted as classified directly, and as
    /// defaulted where no rule decided, and as permitted or denied); otherwise the flow
    /// cache's decision ([`CacheLane::decide`]) counted them.
    #[inline(never)]
    fn send<const DIRECT: bool>(
        counters: &mut AclCounters,
        pool: &mut Pool<'_>,
        tx: &mut VectorTx<'_>,
        bufs: &[PacketBuf],
        answers: &[(AclAction, Option<u32>)],
        (to, head): (u8, Option<[u8; 12]>),
    ) {
        // The counts in registers through the loop (`counters` is behind a reference the
        // compiler must otherwise store through on every frame).
        let (mut denied, mut defaulted) = (0u64, 0u64);
        for (&b, &(action, rule)) in bufs.iter().zip(answers) {
            defaulted += u64::from(rule.is_none());
            match (action, head) {
                (AclAction::Deny, _) => {
                    denied += 1;
                    tx.drop(pool, b, DropReason::AclDeny);
                }
                (AclAction::Permit, Some(_)) => tx.push(pool, b, to),
                (AclAction::Permit, None) => tx.drop(pool, b, DropReason::NoRoute),
            }
        }
        if DIRECT {
            let n = bufs.len().min(answers.len()) as u64;
            counters.direct += n;
            counters.defaulted += defaulted;
            counters.denied += denied;
            counters.permitted += n - denied;
        }
    }

    /// The vector loop's IPv4 burst (`bufs`, one per key): classified through the cross
    /// tables, counted as classified directly, then sent or dropped; `keys` emptied.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn flush_v4(
        counters: &mut AclCounters,
        rules: &AclRules,
        pool: &mut Pool<'_>,
        tx: &mut VectorTx<'_>,
        keys: &mut Keys4,
        answers: &mut [(AclAction, Option<u32>); BURST],
        bufs: &[PacketBuf],
        route: (u8, Option<[u8; 12]>),
    ) {
        rules.classify_v4_burst(keys, answers);
        Self::send::<true>(counters, pool, tx, bufs, answers, route);
        keys.clear();
    }
}

impl Acl {
    /// The vector loop's IPv6 part: takes frames from the front of `input` while each is a
    /// common IPv6 frame (`parse::ipv6_flow` at depth `l4`), decides them in bursts as the
    /// batch path decides them ([`CacheLane::decide`]: the flow cache, or directly in a flood
    /// window) and sends or drops each; returns how many it took. Out of the IPv4 loop, so
    /// that IPv4 frames pay nothing for it.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn run_v6(
        cache: &mut CacheLane,
        shared: &AclShared,
        rules: &AclRules,
        counters: &mut AclCounters,
        now: crate::time::Instant,
        pool: &mut Pool<'_>,
        tx: &mut VectorTx<'_>,
        input: &[PacketBuf],
        l4: bool,
        route: (u8, Option<[u8; 12]>),
    ) -> usize {
        let mut keys = [[0u64; 5]; BURST];
        let mut decided = [(AclAction::Permit, None); BURST];
        let mut took = 0;
        loop {
            let rest = input.get(took..).unwrap_or(&[]);
            let mut n = 0;
            for (&b, slot) in rest.iter().zip(keys.iter_mut()) {
                let frame = pool.frame_mut(b);
                let flow = if l4 { parse::ipv6_flow::<true>(frame) } else { parse::ipv6_flow::<false>(frame) };
                let Some(flow) = flow else { break };
                *slot = flow.words();
                // The link header while the frame is at hand, as in the IPv4 loop.
                if let (Some(head), Some(m)) = (route.1, frame.first_chunk_mut::<12>()) {
                    *m = head;
                }
                n += 1;
            }
            if n == 0 {
                return took;
            }
            cache.decide(shared, rules, counters, now, keys.get(..n).unwrap_or(&[]), |i, a| {
                if let Some(d) = decided.get_mut(i) {
                    d.0 = a;
                }
            });
            Self::send::<false>(counters, pool, tx, rest.get(..n).unwrap_or(&[]), &decided, route);
            took += n;
            if n < BURST {
                return took;
            }
        }
    }
}

impl AclCounters {
    /// Counts `action` and applies it to `p`.
    #[inline]
    fn apply(&mut self, p: &mut Pkt, action: AclAction) {
        self.count(action);
        if action == AclAction::Deny {
            p.verdict = Verdict::Drop(DropReason::AclDeny);
        }
    }

    /// Counts `action`.
    #[inline(always)]
    fn count(&mut self, action: AclAction) {
        match action {
            AclAction::Permit => self.permitted += 1,
            AclAction::Deny => self.denied += 1,
        }
    }
}

/// The ACL NF of one worker core.
#[derive(Debug)]
pub struct Acl {
    shared: Arc<AclShared>,
    rules: Reader<AclRules>,
    cache: CacheLane,
    counters: AclCounters,
}

impl Acl {
    /// A worker's ACL over the shared state.
    pub fn new(shared: Arc<AclShared>) -> Self {
        let lane = shared.flows.table().local();
        let rules = shared.rules.reader();
        let cache = CacheLane { lane, cursor: 0, flood: FloodGuard::default() };
        Self { shared, rules, cache, counters: AclCounters::default() }
    }

    /// This worker's counters.
    pub fn counters(&self) -> &AclCounters {
        &self.counters
    }

    /// This worker's flow-cache counters.
    pub fn cache_stats(&self) -> &LocalStats {
        self.cache.lane.stats()
    }

    /// The shared state.
    pub fn shared(&self) -> &Arc<AclShared> {
        &self.shared
    }
}

impl Drop for Acl {
    fn drop(&mut self) {
        self.shared.flows.table().retire_local(&mut self.cache.lane);
    }
}

impl Nf for Acl {
    fn name(&self) -> &'static str {
        "acl"
    }

    /// Alone in a chain, common IPv4 and IPv6 frames are classified straight from the
    /// received batch ([`Nf::run_vector`]) unless every packet must go through the flow cache.
    fn vector_v4(&self) -> bool {
        !self.shared.always_cache
    }

    /// IPv6 frames take the loop too: the cache's decision, without a packet record.
    fn vector_v6(&self) -> bool {
        true
    }

    /// While the cross tables answer IPv4 keys (as [`Nf::process`] then classifies directly).
    fn vector_ready(&mut self) -> bool {
        self.rules.get(&self.shared.rules).classifies_v4_by_cross_tables()
    }

    /// [`Nf::process`] without a packet record: each common frame's 5-tuple read from the
    /// frame (`parse::ipv4_flow`, `parse::ipv6_flow`); IPv4 keys classified in bursts through
    /// the cross tables ([`AclRules::classify_v4_burst`]), IPv6 keys decided in bursts as the
    /// batch path decides them (the flow cache, or directly in a flood window); then each
    /// frame sent to the other port with the port's link header (permitted) or dropped as
    /// `AclDeny`, counted as the batch path counts it. A burst ends where the family changes,
    /// so that frames leave in the order they came.
    fn run_vector(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, input: &[PacketBuf], tx: &mut VectorTx<'_>) -> usize {
        let Self { shared, rules, cache, counters } = self;
        let rules = rules.get(&shared.rules);
        let (l4, to) = (tx.l4(), tx.default_out());
        let route = (to, tx.link_header(to, None));
        let mut keys = Keys4::default();
        let mut answers = [(AclAction::Permit, None); BURST];
        let mut took = 0;
        while let Some(&b) = input.get(took) {
            let frame = pool.frame_mut(b);
            let flow = if l4 { parse::ipv4_flow::<true>(frame) } else { parse::ipv4_flow::<false>(frame) };
            let Some(flow) = flow else {
                // Not a common IPv4 frame: the IPv4 frames before it leave first, then the
                // run of common IPv6 frames it may start.
                if !keys.is_empty() {
                    let bufs = input.get(took - keys.len()..took).unwrap_or(&[]);
                    Self::flush_v4(counters, rules, pool, tx, &mut keys, &mut answers, bufs, route);
                }
                let rest = input.get(took..).unwrap_or(&[]);
                match Self::run_v6(cache, shared, rules, counters, ctx.now, pool, tx, rest, l4, route) {
                    0 => break,
                    n => {
                        took += n;
                        continue;
                    }
                }
            };
            if !keys.push(&flow) {
                break; // (an IPv4 key is always taken while there is room)
            }
            // The link header now, while the frame is at hand: a frame the rules then deny
            // is dropped whatever it holds ([`Acl::send`] writes no header after this).
            if let (Some(head), Some(m)) = (route.1, frame.first_chunk_mut::<12>()) {
                *m = head;
            }
            took += 1;
            if keys.is_full() {
                let bufs = input.get(took - keys.len()..took).unwrap_or(&[]);
                Self::flush_v4(counters, rules, pool, tx, &mut keys, &mut answers, bufs, route);
            }
        }
        if !keys.is_empty() {
            let bufs = input.get(took - keys.len()..took).unwrap_or(&[]);
            Self::flush_v4(counters, rules, pool, tx, &mut keys, &mut answers, bufs, route);
        }
        took
    }

    fn process(&mut self, ctx: &NfCtx, _pool: &mut Pool<'_>, batch: &mut NfBatch) {
        let shared = &*self.shared;
        // The rules in force for this whole batch (a change lands between batches).
        let rules = self.rules.get(&shared.rules);
        // Untagged IPv4 packets go straight to the classifier while its cross tables answer
        // them (a classification then costs less than a cache hit); the rest through the flow
        // cache, keyed with the VLAN ID they arrived with.
        let direct = !shared.always_cache && rules.classifies_v4_by_cross_tables();
        if direct {
            Self::classify_directly(&mut self.counters, rules, batch);
        }
        let mut keys = [[0u64; 5]; BATCH_SIZE];
        let mut at = [0usize; BATCH_SIZE];
        let mut n = 0;
        for (i, p) in batch.pkts().iter().enumerate() {
            let vid = p.vlan();
            let done = direct && vid == 0 && matches!(p.parsed.flow.src, IpAddr::V4(_));
            if !p.alive() || done {
                continue;
            }
            if let (Some(k), Some(a)) = (keys.get_mut(n), at.get_mut(n)) {
                *k = cache_key(&p.parsed.flow, vid);
                *a = i;
                n += 1;
            }
        }
        self.cache.decide(shared, rules, &mut self.counters, ctx.now, keys.get(..n).unwrap_or(&[]), |j, a| {
            if a == AclAction::Deny
                && let Some(p) = at.get(j).and_then(|&i| batch.pkts_mut().get_mut(i))
            {
                p.verdict = Verdict::Drop(DropReason::AclDeny);
            }
        });
    }

    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        let s = self.cache.lane.stats();
        write!(
            w,
            " acl_permitted={} acl_denied={} acl_cache_hits={} acl_classified={} acl_defaulted={} acl_cache_add_failed={} acl_cache_expired={} acl_reclassified={} acl_direct={} acl_flood_windows={}",
            c.permitted,
            c.denied,
            c.cache_hits,
            c.classified,
            c.defaulted,
            c.cache_add_failed,
            s.expired_reclaimed,
            c.reclassified,
            c.direct,
            c.flood_windows
        )
    }
}
