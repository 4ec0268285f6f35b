//! The policies (docs/NETBLAZE.md "Policies"). All steer by a
//! 128-entry RSS indirection table (bucket = `reta_index(Toeplitz hash)`, `core::rss`) and move
//! buckets between dedicated cores; only NetBlaze has auxiliary cores.
//!
//! - **NetBlaze**: `core::netblaze`'s [`CoreMapper`] every epoch on every dedicated core (with
//!   the server's auxiliary cores, whale splits, boost) and its [`ServerMapper`] every period;
//!   per-flow order by following.
//! - **Static RSS**: a fixed number of cores (provisioned for the trace's mean load at the
//!   server mapper's 75 % target), buckets round robin, nothing moves.
//! - **Metron-like**: every 1.5 s a core above 85 % of its capacity gives half its buckets to
//!   a new core (the switch rule takes effect 200 ms later); a core below 30 % is merged into
//!   another that stays under 75 %. Moves are immediate (may reorder).
//! - **Quadrant-like**: every 0.5 s a core whose largest packet delay exceeded the SLO gives
//!   half its buckets to the core with the smallest delay if that is under half the SLO, else
//!   to a new core; a core under a quarter of the SLO and 30 % load is merged. Immediate.
//! - **Dyssect-like**: every 100 ms, p50-oriented: as many cores as the measured CPU load needs
//!   at 80 % utilization; buckets rebalanced longest-processing-time-first when the core count
//!   changes or a core is above 90 %; moves follow (no reordering).

use cadence_core::netblaze::{
    AuxCore, AuxState, Backlog, CoreMapper, FlowBacklog, NetBlazeConfig, Params, Placement, Profile, ServerMapper,
};
use cadence_core::rss::{BucketLoad, reta_index};

use super::engine::{Engine, Stage};
use super::trace::FlowInfo;

/// Indirection-table entries (82599's 128).
pub const RETA: usize = 128;

/// Which policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// NetBlaze.
    NetBlaze,
    /// Static RSS.
    StaticRss,
    /// Metron-like.
    Metron,
    /// Quadrant-like.
    Quadrant,
    /// Dyssect-like.
    Dyssect,
}

impl Kind {
    /// All of them, in table order.
    pub const ALL: [Kind; 5] = [Kind::NetBlaze, Kind::StaticRss, Kind::Metron, Kind::Quadrant, Kind::Dyssect];

    /// Name in files.
    pub fn name(self) -> &'static str {
        match self {
            Kind::NetBlaze => "netblaze",
            Kind::StaticRss => "static-rss",
            Kind::Metron => "metron",
            Kind::Quadrant => "quadrant",
            Kind::Dyssect => "dyssect",
        }
    }
}

/// One policy's state.
#[derive(Debug)]
pub struct Policy {
    /// Which.
    pub kind: Kind,
    params: Params,
    /// Bucket → dedicated core.
    pub reta: Vec<u16>,
    /// Dedicated cores in use.
    pub active: Vec<bool>,
    /// NetBlaze's auxiliary cores.
    pub aux: Vec<AuxCore>,
    mapper: CoreMapper,
    server: ServerMapper,
    /// Per bucket this period: packets, distinct flows.
    bucket_pkts: Vec<u64>,
    bucket_flows: Vec<u32>,
    flow_period: Vec<u32>,
    period: u32,
    period_start: u64,
    period_ns: u64,
    /// A pending table (Metron's rule delay): applies at this time.
    pending: Option<(u64, Vec<u16>)>,
    scratch_ids: Vec<u32>,
    scratch: Vec<FlowBacklog>,
    stamp: u32,
    busy_mark: Vec<u64>,
    /// Core-seconds so far (ns·cores).
    pub core_ns: f64,
    /// Per second: core-ns used in it.
    pub cores_per_s: Vec<f64>,
}

fn bucket(f: &FlowInfo) -> usize {
    reta_index(f.rss, RETA)
}

impl Policy {
    /// A policy over `dedicated` queues (and, for NetBlaze, `aux` auxiliary cores);
    /// `static_cores` is Static RSS's provisioning.
    pub fn new(
        kind: Kind,
        cfg: NetBlazeConfig,
        dedicated: usize,
        aux: usize,
        static_cores: usize,
        seconds: usize,
    ) -> anyhow::Result<Self> {
        let params = cfg.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        let start = if kind == Kind::StaticRss { static_cores.clamp(1, dedicated) } else { 1 };
        let reta = (0..RETA).map(|b| (b % start) as u16).collect();
        let mut active = vec![false; dedicated];
        active.iter_mut().take(start).for_each(|a| *a = true);
        let period_ns = match kind {
            Kind::NetBlaze | Kind::StaticRss => cfg.server_period_ns,
            Kind::Metron => 1_500_000_000,
            Kind::Quadrant => 500_000_000,
            Kind::Dyssect => 100_000_000,
        };
        Ok(Self {
            kind,
            params,
            reta,
            active,
            aux: vec![AuxCore::default(); if kind == Kind::NetBlaze { aux } else { 0 }],
            mapper: CoreMapper::new(params),
            server: ServerMapper::new(params, RETA, dedicated),
            bucket_pkts: vec![0; RETA],
            bucket_flows: vec![0; RETA],
            flow_period: Vec::new(),
            period: 1,
            period_start: 0,
            period_ns,
            pending: None,
            scratch_ids: Vec::new(),
            scratch: Vec::new(),
            stamp: 0,
            busy_mark: vec![0; dedicated],
            core_ns: 0.0,
            cores_per_s: vec![0.0; seconds.max(1)],
        })
    }

    /// Whether moved flows follow their queued packets (no reordering).
    pub fn follows(&self) -> bool {
        matches!(self.kind, Kind::NetBlaze | Kind::Dyssect | Kind::StaticRss)
    }

    /// The dedicated core for a flow, counting it for the period's bucket loads.
    pub fn route(&mut self, flow: u32, info: &FlowInfo) -> usize {
        let b = bucket(info);
        self.bucket_pkts[b] += 1;
        let fi = flow as usize;
        if self.flow_period.len() <= fi {
            self.flow_period.resize(fi + 1, 0);
        }
        if self.flow_period[fi] != self.period {
            self.flow_period[fi] = self.period;
            self.bucket_flows[b] += 1;
        }
        usize::from(self.reta[b])
    }

    fn bucket_loads(&self, secs: f64) -> Vec<BucketLoad> {
        (0..RETA)
            .map(|b| BucketLoad { flows: f64::from(self.bucket_flows[b]), pps: self.bucket_pkts[b] as f64 / secs })
            .collect()
    }

    fn core_loads(&self, loads: &[BucketLoad], cores: usize) -> Vec<BucketLoad> {
        let mut out = vec![BucketLoad::default(); cores];
        for (b, l) in loads.iter().enumerate() {
            if let Some(o) = out.get_mut(usize::from(self.reta[b])) {
                o.flows += l.flows;
                o.pps += l.pps;
            }
        }
        out
    }

    fn set_table(&mut self, table: Vec<u16>, eng: &mut Engine) {
        let moved = self.reta.iter().zip(&table).filter(|(a, b)| a != b).count();
        eng.counters.migrations += moved as u64;
        self.reta = table;
        for (c, a) in self.active.iter_mut().enumerate() {
            *a = self.reta.contains(&(c as u16));
        }
    }

    /// The epoch ending at `t` (every `epoch_ns`): runs the cores to `t`, makes the policy's
    /// decisions and accounts core time.
    pub fn epoch(&mut self, t: u64, epoch_ns: u64, eng: &mut Engine, profile: &Profile) {
        eng.run_all(t);
        if self.kind == Kind::NetBlaze {
            self.netblaze_epoch(t, eng, profile);
        }
        if let Some((at, _)) = &self.pending
            && *at <= t
            && let Some((_, table)) = self.pending.take()
        {
            self.set_table(table, eng);
        }
        if t >= self.period_start + self.period_ns {
            let secs = (t - self.period_start) as f64 / 1e9;
            self.period_decision(t, secs, eng, profile);
            self.period_start = t;
            self.period = self.period.wrapping_add(1);
            self.bucket_pkts.iter_mut().for_each(|x| *x = 0);
            self.bucket_flows.iter_mut().for_each(|x| *x = 0);
            eng.cores.iter_mut().for_each(|c| c.max_lat = 0);
        }
        let cores = self.active.iter().filter(|&&a| a).count()
            + self.aux.iter().filter(|a| a.state == AuxState::Borrowed).count();
        let used = cores as f64 * epoch_ns as f64;
        self.core_ns += used;
        let s = ((t.saturating_sub(1)) / 1_000_000_000) as usize;
        if let Some(x) = self.cores_per_s.get_mut(s) {
            *x += used;
        }
    }

    fn netblaze_epoch(&mut self, t: u64, eng: &mut Engine, profile: &Profile) {
        let d = eng.dedicated;
        let full = &profile.full.frontier;
        // The auxiliary cores' queued work.
        for (i, a) in self.aux.iter_mut().enumerate() {
            let q = &eng.cores[d + i].queue;
            self.stamp = self.stamp.wrapping_add(1);
            let (mut flows, mut packets, mut tail) = (0u32, 0u32, 0u64);
            for p in q {
                match p.stage {
                    Stage::Tail { k } => {
                        let cap = profile.split(k).map_or(1, |s| s.tail.frontier.max_packets(1)).max(1);
                        tail += (1u64 << 16) / u64::from(cap);
                    }
                    _ => {
                        packets += 1;
                        let f = &mut eng.flows[p.flow as usize];
                        if f.mark != self.stamp {
                            f.mark = self.stamp;
                            flows += 1;
                        }
                    }
                }
            }
            a.observe(Backlog::new(flows, packets), tail.min(u64::from(u32::MAX)) as u32);
        }
        for c in 0..d {
            if !self.active[c] {
                continue;
            }
            let n = eng.cores[c].queue.len() as u32;
            if n == 0 || n <= full.max_packets(n) {
                continue; // inside the frontier whatever the flows
            }
            self.stamp = self.stamp.wrapping_add(1);
            self.scratch_ids.clear();
            self.scratch.clear();
            let in_service = eng.cores[c].last.filter(|&(_, fin)| fin > t).map(|(f, _)| f);
            for p in &eng.cores[c].queue {
                let f = &mut eng.flows[p.flow as usize];
                if f.mark != self.stamp {
                    f.mark = self.stamp;
                    f.idx = self.scratch.len() as u32;
                    self.scratch_ids.push(p.flow);
                    let busy = Some(p.flow) == in_service;
                    let pinned = f.split.is_some();
                    self.scratch.push(FlowBacklog { packets: 0, pinned, busy, place: Placement::Local });
                }
                let e = &mut self.scratch[f.idx as usize];
                e.packets += 1;
                if p.stage != Stage::Whole {
                    e.pinned = true;
                }
            }
            let dec = self.mapper.decide(profile, &mut self.scratch, &mut self.aux);
            eng.counters.slo_risk += u64::from(dec.slo_risk);
            eng.counters.splits += u64::from(dec.splits);
            eng.counters.recruits += u64::from(dec.recruited);
            eng.counters.boost_epochs += u64::from(dec.boost);
            if dec.moved.is_empty() && dec.splits == 0 {
                continue;
            }
            let handoff = t + eng.handoff_ns;
            let queue = std::mem::take(&mut eng.cores[c].queue);
            let mut kept = std::collections::VecDeque::with_capacity(queue.len());
            for mut p in queue {
                let f = &mut eng.flows[p.flow as usize];
                match self.scratch.get(f.idx as usize).map(|e| e.place) {
                    Some(Placement::Aux(a)) if p.stage == Stage::Whole => {
                        let core = d + usize::from(a);
                        f.loc = core as u16;
                        p.ready = p.ready.max(handoff);
                        eng.cores[core].queue.push_back(p);
                    }
                    Some(Placement::Split { k, booster }) if p.stage == Stage::Whole => {
                        let b = (d + usize::from(booster)) as u16;
                        f.split = Some((k, b));
                        p.stage = Stage::Head { k, booster: b };
                        kept.push_back(p);
                    }
                    _ => kept.push_back(p),
                }
            }
            eng.counters.migrations += u64::from(dec.moved.flows);
            eng.cores[c].queue = kept;
        }
        for (i, a) in self.aux.iter_mut().enumerate() {
            let core = &mut eng.cores[d + i];
            let busy = core.epoch_busy_ns > 0 || !core.queue.is_empty();
            a.end_epoch(&self.params, busy);
        }
        eng.cores.iter_mut().for_each(|c| c.epoch_busy_ns = 0);
    }

    fn period_decision(&mut self, t: u64, secs: f64, eng: &mut Engine, profile: &Profile) {
        let d = eng.dedicated;
        let loads = self.bucket_loads(secs.max(1e-9));
        let cap = |l: &BucketLoad| profile.rate.pps(l.flows.ceil().max(1.0) as u32) as f64;
        match self.kind {
            Kind::StaticRss => {}
            Kind::NetBlaze => {
                let mut active = self.active.clone();
                self.server.period(&profile.rate, &loads, &self.reta, &mut active);
                let mut table = self.reta.clone();
                for ch in self.server.changes() {
                    table[usize::from(ch.bucket)] = ch.to;
                }
                self.set_table(table, eng);
                self.active = active;
            }
            Kind::Metron | Kind::Quadrant => {
                let per_core = self.core_loads(&loads, d);
                let mut table = self.reta.clone();
                let slo = self.params.slo_ns();
                let mut active = self.active.clone();
                for c in 0..d {
                    if !active[c] {
                        continue;
                    }
                    let l = per_core[c];
                    let over = match self.kind {
                        Kind::Metron => l.pps > 0.85 * cap(&l),
                        _ => eng.cores[c].max_lat > slo,
                    };
                    let mine: Vec<usize> = (0..RETA).filter(|&b| table[b] == c as u16).collect();
                    if over && mine.len() > 1 {
                        let target = if self.kind == Kind::Quadrant {
                            (0..d)
                                .filter(|&x| x != c && active[x] && eng.cores[x].max_lat < slo / 2)
                                .min_by_key(|&x| eng.cores[x].max_lat)
                        } else {
                            None
                        };
                        let Some(to) = target.or_else(|| (0..d).find(|&x| !active[x])) else { continue };
                        active[to] = true;
                        for &b in mine.iter().skip(mine.len() / 2) {
                            table[b] = to as u16;
                        }
                    } else if !over && l.pps < 0.3 * cap(&l) && active.iter().filter(|&&a| a).count() > 1 {
                        let quiet = self.kind == Kind::Metron || eng.cores[c].max_lat < slo / 4;
                        let to = (0..d)
                            .filter(|&x| x != c && active[x])
                            .min_by(|&a, &b| per_core[a].pps.total_cmp(&per_core[b].pps));
                        if let Some(to) = to
                            && quiet
                            && per_core[to].pps + l.pps < 0.75 * cap(&per_core[to])
                        {
                            for &b in &mine {
                                table[b] = to as u16;
                            }
                            active[c] = false;
                        }
                    }
                }
                if self.kind == Kind::Metron {
                    self.pending = Some((t + 200_000_000, table));
                } else {
                    self.set_table(table, eng);
                }
            }
            Kind::Dyssect => {
                let util: Vec<f64> = (0..d)
                    .map(|c| eng.cores[c].busy_ns.saturating_sub(self.busy_mark[c]) as f64 / (secs * 1e9))
                    .collect();
                let total: f64 = util.iter().sum();
                let want = ((total / 0.8).ceil() as usize).clamp(1, d);
                let have = self.active.iter().filter(|&&a| a).count();
                let hot = (0..d).any(|c| self.active[c] && util[c] > 0.9);
                if want != have || hot {
                    let mut order: Vec<usize> = (0..RETA).collect();
                    order.sort_by(|&a, &b| loads[b].pps.total_cmp(&loads[a].pps).then(a.cmp(&b)));
                    let mut sum = vec![0.0f64; want];
                    let mut table = self.reta.clone();
                    for b in order {
                        let i = (0..want).min_by(|&x, &y| sum[x].total_cmp(&sum[y])).unwrap_or(0);
                        sum[i] += loads[b].pps;
                        table[b] = i as u16;
                    }
                    self.set_table(table, eng);
                }
                for c in 0..d {
                    self.busy_mark[c] = eng.cores[c].busy_ns;
                }
            }
        }
    }
}
