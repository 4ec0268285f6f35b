//! The ACL's flow cache on one worker: [`CacheLane`] (the worker's lane of the shared table,
//! where its sweep goes on) decides a burst of flows through the cache, or directly while its
//! [`FloodGuard`] has a flood window open.

use super::{AclAction, AclCounters, AclRules, AclShared, FLOOD_PROBE, FLOOD_WINDOW, FLOOD_WINDOW_MAX, FlowVerdict};
use super::{PROFILE, param_generation, verdict};
use crate::buf::BATCH_SIZE;
use crate::pna::exact::Local;
use crate::pna::p4::Applied;
use crate::pna::{AddStatus, NotDone};

/// Whether the flow cache is worth its lookups. A cache that misses nearly every lookup (a
/// flood of new flows, or more live flows than it holds) costs a lookup and an add on top of
/// each classification and evicts nothing useful by being skipped: after a probe of
/// [`FLOOD_PROBE`] lookups with more than 7 in 8 misses, the next [`FLOOD_WINDOW`] packets are
/// classified directly (the same rules, so the same verdicts), then the cache is probed
/// again. Each probe in a row that finds the flood again doubles the next window, up to
/// [`FLOOD_WINDOW_MAX`]; a probe that finds the cache useful starts over from
/// [`FLOOD_WINDOW`]. In a sustained flood the probes come to 512 of every 131 584 packets
/// (0.4 %), where a fixed window would send one packet in nine through the cache.
#[derive(Debug, Clone, Copy)]
pub(super) struct FloodGuard {
    looked: u32,
    missed: u32,
    bypass_left: u32,
    /// The window the next flood probe opens.
    window: u32,
}

impl Default for FloodGuard {
    fn default() -> Self {
        Self { looked: 0, missed: 0, bypass_left: 0, window: FLOOD_WINDOW }
    }
}

impl FloodGuard {
    /// Whether a flood window is open (the cache is skipped).
    #[inline]
    pub(super) fn bypassing(&self) -> bool {
        self.bypass_left > 0
    }

    /// `n` packets classified in the window.
    #[inline]
    pub(super) fn spend(&mut self, n: u32) {
        self.bypass_left = self.bypass_left.saturating_sub(n);
    }

    /// A batch's `looked` lookups of which `missed` were new flows; `true` when this ends a
    /// probe that found a flood (a bypass window starts).
    #[inline]
    pub(super) fn observe(&mut self, looked: u32, missed: u32) -> bool {
        self.looked = self.looked.saturating_add(looked);
        self.missed = self.missed.saturating_add(missed);
        if self.looked < FLOOD_PROBE {
            return false;
        }
        let flood = u64::from(self.missed) * 8 > u64::from(self.looked) * 7;
        (self.looked, self.missed) = (0, 0);
        if flood {
            self.bypass_left = self.window;
            self.window = self.window.saturating_mul(2).min(FLOOD_WINDOW_MAX);
        } else {
            self.window = FLOOD_WINDOW;
        }
        flood
    }
}

/// What a worker's ACL holds of the flow cache: its lane, where its sweep goes on, and its
/// flood guard.
#[derive(Debug)]
pub(super) struct CacheLane {
    pub(super) lane: Local,
    pub(super) cursor: usize,
    pub(super) flood: FloodGuard,
}

impl CacheLane {
    /// Decides the flow of each of `keys` (5-tuples with their VLAN ID, `super::cache_key`; at most
    /// [`BATCH_SIZE`]) by the rules in force — through the flow cache, or classified directly
    /// while a flood window is open — counting each packet as the NF counts it (a cache hit, a
    /// new flow classified, one reclassified, or one classified directly) and as permitted or
    /// denied; `out(i, action)` for each `keys[i]`, in order.
    #[inline(always)]
    pub(super) fn decide(
        &mut self,
        shared: &AclShared,
        rules: &AclRules,
        counters: &mut AclCounters,
        now: crate::time::Instant,
        keys: &[[u64; 5]],
        mut out: impl FnMut(usize, AclAction),
    ) {
        let n = keys.len().min(BATCH_SIZE);
        if n == 0 {
            return; // nothing for the cache (its expired entries are reclaimed by later adds)
        }
        // A flood window: classified as they come, without the cache's lookup and add (the
        // same rules: the same verdicts).
        if !shared.always_cache && self.flood.bypassing() {
            for (i, k) in keys.iter().enumerate() {
                let (a, rule) = rules.classify_key(k);
                counters.direct += 1;
                counters.defaulted += u64::from(rule.is_none());
                counters.count(a);
                out(i, a);
            }
            self.flood.spend(n as u32);
            return;
        }
        let generation = rules.generation();
        let new_before = counters.classified + counters.reclassified;
        let mut applied = [shared.flows.placeholder(); BATCH_SIZE];
        let (Some(keys), Some(applied)) = (keys.get(..n), applied.get_mut(..n)) else { return };
        shared.flows.apply_burst(&mut self.lane, keys, now, applied);
        for (i, applied) in applied.iter().enumerate() {
            let action = match *applied {
                Applied::Hit { action: FlowVerdict::Permit(param) | FlowVerdict::Deny(param), entry } => {
                    let a = if matches!(applied, Applied::Hit { action: FlowVerdict::Permit(_), .. }) {
                        AclAction::Permit
                    } else {
                        AclAction::Deny
                    };
                    if param_generation(param) == generation {
                        counters.cache_hits += 1;
                        a
                    } else {
                        // Decided by rules since replaced: decide again and re-cache.
                        let key = *entry.handle().key();
                        let (a, rule) = rules.classify_key(&key);
                        let v = verdict(a, rule, generation);
                        let done = shared.flows.modify(&mut self.lane, &key, &v, now);
                        counters.reclassified += 1;
                        counters.cache_add_failed += u64::from(done.is_err());
                        a
                    }
                }
                Applied::Miss { miss, .. } => {
                    let (a, rule) = rules.classify_key(miss.key());
                    let v = verdict(a, rule, generation);
                    match shared.flows.add_entry(&mut self.lane, &miss, &v, PROFILE, now) {
                        // An earlier packet of the same new flow in this burst (the burst
                        // looked every key up before any add) already classified and cached
                        // it: this one is not a new flow; its verdict is the cached one (the
                        // same rules decided it), so it counts as a cache hit. Every packet
                        // counts once: a hit, a new flow classified, or one reclassified.
                        AddStatus::NotDone(NotDone::KeyExists) => counters.cache_hits += 1,
                        status => {
                            counters.classified += 1;
                            counters.defaulted += u64::from(rule.is_none());
                            counters.cache_add_failed += u64::from(!status.is_success());
                        }
                    }
                    a
                }
                // A hit on the miss-only action cannot be stored; classify to be safe.
                Applied::Hit { action: FlowVerdict::Classify, entry } => {
                    counters.classified += 1;
                    rules.classify_key(entry.handle().key()).0
                }
            };
            counters.count(action);
            out(i, action);
        }
        if shared.sweep_buckets > 0 {
            self.cursor = shared.flows.table().sweep(&mut self.lane, now, self.cursor, shared.sweep_buckets);
        }
        let missed = counters.classified + counters.reclassified - new_before;
        if !shared.always_cache && self.flood.observe(n as u32, missed as u32) {
            counters.flood_windows += 1;
        }
    }
}
