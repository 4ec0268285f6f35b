//! The server mapper (seed paper §3.3, Fig. A.1; public code
//! `nfv_ctrl_long.cc`).
//!
//! Every period (1 s) the caller hands over, per RSS bucket (indirection-table entry), the
//! period's average active flows and packets/s ([`BucketLoad`]), the current table
//! (bucket → dedicated core = queue) and which dedicated cores are active. A core's capacity
//! is the profile's long-term rate at its flow count ([`RateCurve::pps`]).
//!
//! 1. **Relieve**: every active core above `overload` (85 %) of its capacity gives away its
//!    largest buckets (the fewest that bring it back under) — each to the first active core
//!    that stays below `target` (75 %) with it, else to a newly activated core.
//! 2. **Reclaim**: the least-loaded active core, if below `reclaim` (50 %) and active for more
//!    than `reclaim_min_periods` (4) periods, is emptied first fit onto cores that stay below
//!    `target`; if some bucket would need a new core the attempt is undone. Repeated while it
//!    succeeds.
//! 3. The output is the list of changed entries only ([`ServerMapper::changes`]), for
//!    `Port::set_rss_table` to write; the caller drains the old queue past the switch point
//!    before the new queue serves a moved bucket (the RSS_MOVE sequence).
//!
//! Scratch space is allocated once in [`ServerMapper::new`].

use alloc::vec;
use alloc::vec::Vec;

use super::Params;
use super::profile::RateCurve;
use crate::rss::meter::BucketLoad;

/// One indirection entry to rewrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RetaChange {
    /// The entry.
    pub bucket: u16,
    /// Its old queue (core).
    pub from: u16,
    /// Its new queue.
    pub to: u16,
}

/// What one period did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PeriodOutcome {
    /// Buckets moved (= changed entries).
    pub moved: u16,
    /// Cores activated.
    pub activated: u16,
    /// Cores released.
    pub released: u16,
    /// Buckets that had to stay on an overloaded core (no core left to activate).
    pub unplaced: u16,
    /// Active cores after the period.
    pub active: u16,
}

#[derive(Debug, Clone, Copy, Default)]
struct Load {
    flows: f64,
    pps: f64,
}

/// Buckets → dedicated cores, every period.
#[derive(Debug, Clone)]
pub struct ServerMapper {
    params: Params,
    table: Vec<u16>,
    loads: Vec<Load>,
    periods: Vec<u32>,
    order: Vec<u16>,
    changes: Vec<RetaChange>,
    tried: Vec<bool>,
}

impl ServerMapper {
    /// A mapper for `buckets` indirection entries and `cores` dedicated cores (queues).
    pub fn new(params: Params, buckets: usize, cores: usize) -> Self {
        Self {
            params,
            table: vec![0; buckets],
            loads: vec![Load::default(); cores],
            periods: vec![0; cores],
            order: Vec::with_capacity(buckets),
            changes: Vec::with_capacity(buckets),
            tried: vec![false; cores],
        }
    }

    /// The entries the last period changed.
    pub fn changes(&self) -> &[RetaChange] {
        &self.changes
    }

    /// Periods core `c` has been active.
    pub fn active_periods(&self, c: usize) -> u32 {
        self.periods.get(c).copied().unwrap_or(0)
    }

    fn cap(rate: &RateCurve, flows: f64) -> f64 {
        let f = if flows.is_finite() && flows > 0.0 { libm::ceil(flows).min(f64::from(u32::MAX)) as u32 } else { 0 };
        rate.pps(f.max(1)) as f64
    }

    fn under(&self, rate: &RateCurve, c: usize, add: BucketLoad, share: f64) -> bool {
        let Some(l) = self.loads.get(c) else { return false };
        l.pps + add.pps <= share * Self::cap(rate, l.flows + add.flows)
    }

    fn assign(&mut self, bucket: usize, to: usize, b: BucketLoad) {
        let Some(&from) = self.table.get(bucket) else { return };
        if let Some(l) = self.loads.get_mut(usize::from(from)) {
            l.flows -= b.flows;
            l.pps -= b.pps;
        }
        if let Some(l) = self.loads.get_mut(to) {
            l.flows += b.flows;
            l.pps += b.pps;
        }
        if let Some(e) = self.table.get_mut(bucket) {
            *e = to as u16;
        }
    }

    /// First active core other than `not` that stays under `target` with `b`.
    fn first_fit(&self, rate: &RateCurve, active: &[bool], not: usize, b: BucketLoad) -> Option<usize> {
        let target = self.params.config().target;
        (0..self.loads.len()).find(|&d| d != not && active.get(d) == Some(&true) && self.under(rate, d, b, target))
    }

    /// Runs one period (module docs). `table[b]` is bucket `b`'s core, `loads[b]` its load;
    /// `active[c]` says which cores are dedicated and is updated. Tables of the wrong length
    /// are taken as far as they go. The changed entries are in [`ServerMapper::changes`];
    /// apply them to `table`.
    pub fn period(
        &mut self,
        rate: &RateCurve,
        loads: &[BucketLoad],
        table: &[u16],
        active: &mut [bool],
    ) -> PeriodOutcome {
        let cfg = *self.params.config();
        let cores = self.loads.len().min(active.len());
        let n = self.table.len().min(table.len()).min(loads.len());
        let mut out = PeriodOutcome::default();
        self.changes.clear();
        for l in &mut self.loads {
            *l = Load::default();
        }
        for b in 0..n {
            let c = table.get(b).copied().unwrap_or(0);
            let c = if usize::from(c) < cores { c } else { 0 };
            if let Some(e) = self.table.get_mut(b) {
                *e = c;
            }
            if let Some(a) = active.get_mut(usize::from(c)) {
                *a = true; // a core that holds buckets is active
            }
            let bl = loads.get(b).copied().unwrap_or_default();
            if let Some(l) = self.loads.get_mut(usize::from(c)) {
                l.flows += bl.flows.max(0.0);
                l.pps += bl.pps.max(0.0);
            }
        }
        let load_of =
            |b: usize| loads.get(b).copied().map(|l| BucketLoad { flows: l.flows.max(0.0), pps: l.pps.max(0.0) });

        // 1. Relieve overloaded cores.
        for c in 0..cores {
            if active.get(c) != Some(&true) {
                continue;
            }
            self.order.clear();
            self.order.extend((0..n).filter(|&b| self.table.get(b) == Some(&(c as u16))).map(|b| b as u16));
            self.order.sort_by(|&a, &b| {
                let pa = load_of(usize::from(a)).map_or(0.0, |l| l.pps);
                let pb = load_of(usize::from(b)).map_or(0.0, |l| l.pps);
                pb.total_cmp(&pa).then(a.cmp(&b))
            });
            let mut next = 0;
            while next + 1 < self.order.len() {
                let Some(l) = self.loads.get(c).copied() else { break };
                if l.pps <= cfg.overload * Self::cap(rate, l.flows) {
                    break;
                }
                let Some(&bucket) = self.order.get(next) else { break };
                next += 1;
                let bucket = usize::from(bucket);
                let Some(b) = load_of(bucket) else { continue };
                let to = match self.first_fit(rate, active, c, b) {
                    Some(d) => d,
                    None => match (0..cores).find(|&d| active.get(d) == Some(&false)) {
                        Some(d) => {
                            if let Some(a) = active.get_mut(d) {
                                *a = true;
                            }
                            if let Some(p) = self.periods.get_mut(d) {
                                *p = 0;
                            }
                            out.activated += 1;
                            d
                        }
                        None => {
                            out.unplaced += 1;
                            continue;
                        }
                    },
                };
                self.assign(bucket, to, b);
            }
        }

        // 2. Reclaim the least-loaded cores while that needs no new core.
        for t in &mut self.tried {
            *t = false;
        }
        loop {
            let active_count = (0..cores).filter(|&c| active.get(c) == Some(&true)).count();
            if active_count <= 1 {
                break;
            }
            let candidate = (0..cores)
                .filter(|&c| active.get(c) == Some(&true) && self.tried.get(c) == Some(&false))
                .filter(|&c| self.periods.get(c).copied().unwrap_or(0) > cfg.reclaim_min_periods)
                .map(|c| {
                    let l = self.loads.get(c).copied().unwrap_or_default();
                    (c, l.pps / Self::cap(rate, l.flows).max(1.0))
                })
                .filter(|&(_, share)| share < cfg.reclaim)
                .min_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
            let Some((c, _)) = candidate else { break };
            if let Some(t) = self.tried.get_mut(c) {
                *t = true;
            }
            self.order.clear();
            self.order.extend((0..n).filter(|&b| self.table.get(b) == Some(&(c as u16))).map(|b| b as u16));
            // Try: the core is taken out of the candidates while its buckets move.
            if let Some(a) = active.get_mut(c) {
                *a = false;
            }
            let mut moved = 0;
            let mut ok = true;
            for i in 0..self.order.len() {
                let Some(&bucket) = self.order.get(i) else { break };
                let bucket = usize::from(bucket);
                let Some(b) = load_of(bucket) else { continue };
                match self.first_fit(rate, active, c, b) {
                    Some(d) => {
                        self.assign(bucket, d, b);
                        moved += 1;
                    }
                    None => {
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                out.released += 1;
                if let Some(p) = self.periods.get_mut(c) {
                    *p = 0;
                }
            } else {
                // Undo: every bucket back on `c`.
                for i in 0..moved {
                    let Some(&bucket) = self.order.get(i) else { break };
                    let bucket = usize::from(bucket);
                    if let Some(b) = load_of(bucket) {
                        self.assign(bucket, c, b);
                    }
                }
                if let Some(a) = active.get_mut(c) {
                    *a = true;
                }
                break;
            }
        }

        // 3. Changed entries only; periods of active cores.
        for b in 0..n {
            let (Some(&from), Some(&to)) = (table.get(b), self.table.get(b)) else { continue };
            if from != to {
                self.changes.push(RetaChange { bucket: b as u16, from, to });
            }
        }
        for c in 0..cores {
            if active.get(c) == Some(&true) {
                if let Some(p) = self.periods.get_mut(c) {
                    *p = p.saturating_add(1);
                }
                out.active += 1;
            } else if let Some(p) = self.periods.get_mut(c) {
                *p = 0;
            }
        }
        out.moved = self.changes.len().min(usize::from(u16::MAX)) as u16;
        out
    }
}
