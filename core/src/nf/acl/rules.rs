//! The rules in force, changed one rule at a time without a rebuild.
//!
//! A version ([`AclRules`]) is a *base* — the two classifiers (IPv4, IPv6) built over the rules
//! of some earlier version — plus what changed since: the base rules deleted since (a bit per
//! rule, [`Dead`], which the classifiers skip) and the rules added since (the *delta*: at most
//! [`DELTA_MAX`] per family, checked in classification order after the base's answer). A rule
//! change copies the rule list and those two small sets and shares the base, so it costs
//! microseconds whatever the rule count (`core/examples/aclupdate.rs`), where building the
//! classifiers costs tens of milliseconds at 10 000 rules.
//!
//! A *merge* ([`Merge`]) folds the changes into a new base in the background: the control
//! plane builds it a piece at a time ([`Merge::step`]: one bit-vector group per step) while the
//! data plane keeps classifying with the version in force, then [`super::AclShared::finish_merge`]
//! publishes the new base with whatever changed during the build carried over as dead bits and
//! delta. A merge changes no answer, so it keeps the version's generation and no cached verdict
//! is re-decided. When an add finds its family's delta full, that change rebuilds at once (the
//! old behaviour, counted by the caller's latency, never wrong).
//!
//! Rule ids: a rule's *position* (its index in [`AclRules::rules`], what `acl show` prints and
//! `acl del` takes; later rules move down when one is deleted) and its *stable id*, assigned in
//! order when the rule is added and never reused within a base's lineage, which the classifiers
//! use for the tie rule (equal priorities: the earlier rule wins). Positions and stable ids
//! sort alike, so the tie rule is the same in both.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;

use super::classifier::{Build, Dead};
use super::rfc::{BURST, Keys4};
use super::{AclAction, AclRule, Classifier};
use crate::parse::{FlowKey, IpAddr};
use crate::pna::ternary::{Match, Point, Rule};

/// Most rules added since the base, per family, before an add rebuilds at once.
pub const DELTA_MAX: usize = 64;

/// Most distinct VLAN IDs the rules of one ACL name (`AclRule::vlan`).
pub const MAX_VLANS: usize = 16;

/// The classifiers of one build, by *scope* and family: index `2 * scope + v6`. Scope 0 holds
/// the rules without a VLAN ID (they match every frame); scope `1 + i` the rules of VLAN
/// `vids[i]` (they match only frames that arrived with that VID).
#[derive(Debug)]
pub struct Base {
    /// The VLAN IDs with a scope (increasing).
    vids: Vec<u16>,
    family: Vec<Classifier>,
}

impl Base {
    /// The scope of VLAN `vid` (0: none of its own).
    #[inline]
    fn scope(&self, vid: u16) -> usize {
        self.vids.binary_search(&vid).map_or(0, |i| i + 1)
    }

    /// The scope of `rule`, `None` if its VLAN has none in this base.
    fn scope_of(&self, rule: &AclRule) -> Option<usize> {
        scope_in(&self.vids, rule)
    }
}

/// The scope of `rule` among scopes for `vids` (increasing): 0 without a VLAN, `None` if its
/// VLAN has none.
fn scope_in(vids: &[u16], rule: &AclRule) -> Option<usize> {
    rule.vlan.map_or(Some(0), |v| vids.binary_search(&v).ok().map(|i| i + 1))
}

/// The better of two matches: the higher priority, then the earlier rule.
#[inline]
fn better(a: Option<Match>, b: Option<Match>) -> Option<Match> {
    match (a, b) {
        (Some(x), Some(y)) if y.priority > x.priority || (y.priority == x.priority && y.rule < x.rule) => b,
        (Some(_), _) => a,
        (None, _) => b,
    }
}

/// Which families a rule applies to: a rule with an IPv4 prefix only IPv4, an IPv6 prefix only
/// IPv6, no prefix both.
fn in_family(r: &AclRule, v6: bool) -> bool {
    [r.src, r.dst].iter().flatten().all(|p| matches!(p.addr, IpAddr::V6(_)) == v6)
}

/// The rules in force: one version, replaced whole by the control plane
/// ([`super::AclShared::add_rule`], [`super::AclShared::delete_rule`],
/// [`super::AclShared::finish_merge`]).
pub struct AclRules {
    rules: Vec<AclRule>,
    /// The stable id of each rule of `rules` (increasing).
    ids: Vec<u32>,
    base: Arc<Base>,
    /// Base rules deleted since the base was built, per classifier of the base.
    dead: Vec<Dead>,
    /// Rules added since the base was built, per classifier of the base, in classification
    /// order (priority descending, stable id ascending).
    delta: Vec<Vec<(u32, Rule)>>,
    next_id: u32,
    default_action: AclAction,
    /// Counts rule changes (wraps): cached verdicts carry the generation that decided them.
    generation: u32,
}

impl fmt::Debug for AclRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AclRules")
            .field("rules", &self.rules.len())
            .field("vlans", &self.base.vids.len())
            .field("pending", &self.pending())
            .field("default_action", &self.default_action)
            .field("generation", &self.generation)
            .finish()
    }
}

impl AclRules {
    /// Builds the classifiers for `rules` (already validated), all at once.
    pub(super) fn build(rules: Vec<AclRule>, default_action: AclAction, generation: u32) -> Self {
        let ids: Vec<u32> = (0..rules.len() as u32).collect();
        let mut m = Merge::of(&rules, &ids, None);
        while !m.step() {}
        let base = Arc::new(m.finish());
        let next_id = rules.len() as u32;
        let scopes = base.family.len();
        Self {
            rules,
            ids,
            base,
            dead: (0..scopes).map(|_| Dead::default()).collect(),
            delta: alloc::vec![Vec::new(); scopes],
            next_id,
            default_action,
            generation,
        }
    }

    /// The classifier of one family's base for the rules without a VLAN ID (`v6`: IPv6, else
    /// IPv4). Rules changed since the base was built are not in it ([`AclRules::pending`]).
    pub fn classifier(&self, v6: bool) -> &Classifier {
        &self.base.family[usize::from(v6)]
    }

    /// Changes not yet merged into the base: (rules added, base rules deleted).
    pub fn pending(&self) -> (usize, usize) {
        (self.delta.iter().map(Vec::len).sum(), self.dead.iter().map(Dead::count).sum())
    }

    /// Classifies the flow of an untagged frame: the action and the rule's position (`None`:
    /// the default).
    pub fn classify(&self, flow: &FlowKey) -> (AclAction, Option<u32>) {
        self.classify_on(flow, 0)
    }

    /// Classifies the flow of a flow-cache key (`super::cache_key`: the 5-tuple and the VLAN
    /// ID).
    #[inline]
    pub(super) fn classify_key(&self, k: &[u64; 5]) -> (AclAction, Option<u32>) {
        self.classify_on(&FlowKey::from_words(k), super::key_vid(k))
    }

    /// Classifies the flow of a frame that arrived with VLAN ID `vid` (0: untagged): the rules
    /// without a VLAN ID and those of `vid`, whichever match is better.
    pub fn classify_on(&self, flow: &FlowKey, vid: u16) -> (AclAction, Option<u32>) {
        let v6 = usize::from(matches!(flow.src, IpAddr::V6(_)));
        let p = Point::of(flow);
        let mut best = self.best_in(v6, &p);
        if vid != 0 {
            match self.base.scope(vid) {
                0 => {}
                s => best = better(best, self.best_in(2 * s + v6, &p)),
            }
        }
        self.answer(best)
    }

    /// The best match for `p` among classifier `at`'s rules in force (the base's, then the
    /// delta's).
    #[inline]
    fn best_in(&self, at: usize, p: &Point) -> Option<Match> {
        let (Some(c), Some(dead), Some(delta)) = (self.base.family.get(at), self.dead.get(at), self.delta.get(at))
        else {
            return None;
        };
        Self::with_delta(p, c.point_without(p, dead), delta)
    }

    /// [`AclRules::classify`] of every flow of `flows` into `out` (as many as both hold): the
    /// IPv4 flows in bursts of [`BURST`] ([`AclRules::classify_v4_burst`]), the rest one by one.
    pub fn classify_burst(&self, flows: &[FlowKey], out: &mut [(AclAction, Option<u32>)]) {
        let n = flows.len().min(out.len());
        let (flows, out) = (flows.get(..n).unwrap_or(&[]), out.get_mut(..n).unwrap_or(&mut []));
        let mut answers = [(self.default_action, None); BURST];
        for (flows, out) in flows.chunks(BURST).zip(out.chunks_mut(BURST)) {
            let mut keys = Keys4::default();
            let mut at = [0usize; BURST];
            for (i, f) in flows.iter().enumerate() {
                let k = keys.len();
                if keys.push(f) {
                    if let Some(a) = at.get_mut(k) {
                        *a = i;
                    }
                } else if let Some(o) = out.get_mut(i) {
                    *o = self.classify(f);
                }
            }
            self.classify_v4_burst(&keys, &mut answers);
            for (&i, &v) in at.iter().zip(&answers).take(keys.len()) {
                if let Some(o) = out.get_mut(i) {
                    *o = v;
                }
            }
        }
    }

    /// [`AclRules::classify`] of every key of `keys` (IPv4) into `out`, at once: through the
    /// IPv4 classifier's cross tables while they answer (`Classifier::classify_burst_v4`: the
    /// keys' table reads overlapped), else one by one.
    pub fn classify_v4_burst(&self, keys: &Keys4, out: &mut [(AclAction, Option<u32>); BURST]) {
        let (Some(c), Some(dead), Some(delta)) = (self.base.family.first(), self.dead.first(), self.delta.first())
        else {
            out.fill((self.default_action, None));
            return;
        };
        let mut best = [None; BURST];
        if !c.classify_burst_v4(keys, dead, &mut best) {
            for (i, o) in out.iter_mut().enumerate().take(keys.len()) {
                if let Some(f) = keys.flow(i) {
                    *o = self.classify(&f);
                }
            }
            return;
        }
        if delta.is_empty() {
            for (o, &m) in out.iter_mut().zip(&best).take(keys.len()) {
                *o = self.answer(m);
            }
        } else {
            // The delta's rules are checked against the key as a point.
            for (i, (o, &m)) in out.iter_mut().zip(&best).enumerate().take(keys.len()) {
                let p = keys.flow(i).map(|f| Point::of(&f)).unwrap_or_default();
                *o = self.answer(Self::with_delta(&p, m, delta));
            }
        }
    }

    /// Whether IPv4 keys are classified by the IPv4 base's cross tables (built, and no rule of
    /// their run deleted since): then classifying an IPv4 packet costs less than a flow-cache hit.
    pub fn classifies_v4_by_cross_tables(&self) -> bool {
        self.base.family.first().is_some_and(Classifier::uses_rfc) && self.dead.first().is_some_and(|d| d.count() == 0)
    }

    /// The position of rule `id` among the rules: `id` itself while no rule before it was
    /// deleted (ids are increasing, so `ids[id] == id` says so), else a binary search.
    #[inline]
    fn position_of(&self, id: u32) -> Option<u32> {
        if self.ids.get(id as usize) == Some(&id) {
            return Some(id);
        }
        self.ids.binary_search(&id).ok().map(|p| p as u32)
    }

    /// The match from the base's: the delta's rules that come before it are checked first.
    #[inline]
    fn with_delta(p: &Point, base: Option<Match>, delta: &[(u32, Rule)]) -> Option<Match> {
        let mut best = base;
        for &(id, ref r) in delta {
            if best.is_some_and(|b| b.priority > r.priority || (b.priority == r.priority && b.rule < id)) {
                break; // classification order: nothing later beats the match in hand
            }
            if r.matches_point(p) {
                best = Some(Match { rule: id, action: r.action, priority: r.priority });
                break;
            }
        }
        best
    }

    /// The action and rule position of a final match (`None`: the default action).
    #[inline]
    fn answer(&self, best: Option<Match>) -> (AclAction, Option<u32>) {
        match best {
            Some(m) => (if m.action == 0 { AclAction::Permit } else { AclAction::Deny }, self.position_of(m.rule)),
            None => (self.default_action, None),
        }
    }

    /// The rules, in order (position = index).
    pub fn rules(&self) -> &[AclRule] {
        &self.rules
    }

    /// The action for flows no rule matches.
    pub fn default_action(&self) -> AclAction {
        self.default_action
    }

    /// How many rule changes came before this version.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// This version with `rule` appended (already validated). Allocates: for the control plane.
    /// A rule whose VLAN has no scope in the base rebuilds at once, as one that finds its
    /// delta full does.
    pub(super) fn with_added(&self, rule: AclRule) -> Self {
        let fams = [false, true].map(|v6| in_family(&rule, v6));
        let scope = self.base.scope_of(&rule);
        let full = |s: usize| {
            fams.iter()
                .enumerate()
                .any(|(f, &in_f)| in_f && self.delta.get(2 * s + f).is_none_or(|d| d.len() >= DELTA_MAX))
        };
        let Some(scope) = scope.filter(|&s| !full(s) && self.next_id != u32::MAX) else {
            let mut rules = self.rules.clone();
            rules.push(rule);
            return Self::build(rules, self.default_action, self.generation.wrapping_add(1));
        };
        let id = self.next_id;
        let mut next = self.copy();
        next.rules.push(rule);
        next.ids.push(id);
        next.next_id = id + 1;
        for (f, _) in fams.iter().enumerate().filter(|(_, in_f)| **in_f) {
            if let Some(delta) = next.delta.get_mut(2 * scope + f) {
                delta.push((id, rule.to_rule()));
                delta.sort_by(|a, b| b.1.priority.cmp(&a.1.priority).then(a.0.cmp(&b.0)));
            }
        }
        next
    }

    /// This version without the rule at `position` (in range). Allocates: for the control plane.
    pub(super) fn without(&self, position: usize) -> Self {
        let mut next = self.copy();
        let id = next.ids.remove(position);
        next.rules.remove(position);
        for ((delta, dead), c) in next.delta.iter_mut().zip(next.dead.iter_mut()).zip(&self.base.family) {
            if let Some(i) = delta.iter().position(|&(d, _)| d == id) {
                delta.remove(i);
            } else {
                c.kill(dead, id);
            }
        }
        next
    }

    /// The same rules under the next generation, sharing the base.
    fn copy(&self) -> Self {
        Self {
            rules: self.rules.clone(),
            ids: self.ids.clone(),
            base: self.base.clone(),
            dead: self.dead.clone(),
            delta: self.delta.clone(),
            next_id: self.next_id,
            default_action: self.default_action,
            generation: self.generation.wrapping_add(1),
        }
    }

    /// A merge of this version's changes into a new base, or `None` if there are none.
    pub(super) fn merge(&self) -> Option<Merge> {
        (self.pending() != (0, 0)).then(|| Merge::of(&self.rules, &self.ids, Some(self.base.clone())))
    }

    /// The VLAN IDs the rules' base has scopes for (increasing).
    pub fn vlans(&self) -> &[u16] {
        &self.base.vids
    }

    /// `cur` (a later version of the same lineage as `m`'s start) on `m`'s new base, or `None`
    /// if `cur` is on another base (a rebuild happened since: the merge is stale).
    pub(super) fn rebased(cur: &AclRules, m: Merge) -> Option<Self> {
        if !m.from.as_ref().is_some_and(|f| Arc::ptr_eq(f, &cur.base)) {
            return None;
        }
        let merged = m.ids.clone();
        let base = Arc::new(m.finish());
        let in_merged = |id: &u32| merged.binary_search(id).is_ok();
        // The new base has the old one's scopes (`Merge::of`), so dead bits and delta keep
        // their classifier's index.
        let mut dead: Vec<Dead> = base.family.iter().map(|_| Dead::default()).collect();
        // Deleted during the build: in the new base, no longer in force.
        for id in merged.iter().filter(|id| cur.ids.binary_search(id).is_err()) {
            for (d, c) in dead.iter_mut().zip(&base.family) {
                c.kill(d, *id);
            }
        }
        // Added during the build: still the delta.
        let mut delta = cur.delta.clone();
        for d in &mut delta {
            d.retain(|(id, _)| !in_merged(id));
        }
        Some(Self {
            rules: cur.rules.clone(),
            ids: cur.ids.clone(),
            base,
            dead,
            delta,
            next_id: cur.next_id,
            default_action: cur.default_action,
            generation: cur.generation,
        })
    }
}

/// A new base being built from one version's rules (`AclShared::start_merge`), a piece at a time.
#[derive(Debug)]
pub struct Merge {
    /// The base it replaces (`None`: a first build).
    from: Option<Arc<Base>>,
    /// The stable ids of the rules it holds (increasing).
    ids: Vec<u32>,
    vids: Vec<u16>,
    /// One per classifier of the new base (`Base`'s order).
    builds: Vec<Build>,
    done: usize,
}

impl Merge {
    /// A merge keeps the scopes of the base it replaces (every rule's VLAN has one there: a
    /// rule of a new VLAN rebuilds at once), so that a version's dead bits and delta carry
    /// over by index; a first build makes a scope for each VLAN the rules name.
    fn of(rules: &[AclRule], ids: &[u32], from: Option<Arc<Base>>) -> Self {
        let vids = from.as_ref().map_or_else(|| super::config::vlans_of(rules), |b| b.vids.clone());
        let scope = |r: &AclRule| scope_in(&vids, r);
        let builds = (0..2 * (vids.len() + 1))
            .map(|at| {
                let (s, v6) = (at / 2, at % 2 == 1);
                let picked = rules.iter().zip(ids).filter(|(r, _)| scope(r) == Some(s) && in_family(r, v6));
                Build::new(picked.map(|(r, &id)| (id, r.to_rule())).collect())
            })
            .collect();
        Merge { from, ids: ids.to_vec(), vids, builds, done: 0 }
    }

    /// Builds the next piece (one bit-vector group of one family); `true` when the new base is
    /// complete.
    pub fn step(&mut self) -> bool {
        let Some(b) = self.builds.get_mut(self.done) else { return true };
        if b.step() {
            self.done += 1;
        }
        self.done >= self.builds.len()
    }

    fn finish(self) -> Base {
        Base { vids: self.vids, family: self.builds.into_iter().map(Build::finish).collect() }
    }
}
