//! NetBlaze's server mapper in the forwarding run (issue 10
//! item 5): RSS buckets move between queues as their load changes.
//!
//! A queue is a lane here, and a lane is what one core serves at a time (Metronome's
//! trylock), so a queue's capacity is one core's: the profile's long-term rate
//! ([`RateCurve::pps`] at the queue's flows). With the mapper on (a profile in the chain
//! module, `mapper_ms` > 0, RSS over two lanes or more):
//! 1. every worker's chain measures each parsed frame's bucket ([`BucketMeter`]: the
//!    device's Toeplitz hash again, in software) in periods of `mapper_ms` counted from the
//!    run's start, and publishes the current and previous period with its other counters;
//! 2. a quarter period after period `k` ends, worker 0 sums period `k` over the workers'
//!    snapshots ([`PeriodSum`]), hands the per-bucket flows and packets/s with port 0's
//!    indirection table to [`ServerMapper::period`] (relieve above 85 %, reclaim below 50 %
//!    after 4 periods, moves only onto queues that stay under 75 %);
//! 3. the changed entries are written through the RSS_MOVE protocol, one (from, to) pair of
//!    queues at a time ([`super::rss::apply_changes`]): both lanes locked, both ports' tables
//!    written, the old lane drained, then released — so no flow is reordered.
//!
//! A period that moved, activated, released or could not place anything prints `@mapper`;
//! the counters are on `@stats`/`@summary` (`mapper_*`, docs/PROTOCOL.md). "Active" queues
//! are the queues that hold buckets. A released queue's lane receives nothing more and is
//! parked (`rss::refresh_parked`): the workers visit it only on sweeps, and a worker left
//! with parked lanes only sleeps `T_L` — so the consolidation shows as halted cycles
//! (`core::worker::Worker::set_parked`).

use alloc::vec;
use alloc::vec::Vec;

use cadence_core::netblaze::profile::RateCurve;
use cadence_core::netblaze::{NetBlazeConfig, Params, Profile, RetaChange, ServerMapper};
use cadence_core::offload::NetBlazeStage;
use cadence_core::rss::{BucketLoad, BucketMeter, MeterSnapshot, PeriodSum};
use cadence_core::time::{Clock, Duration, Instant};
use cadence_core::worker::Worker;
use spin::Mutex;

use super::{FwdPort, Machine, Shared, ms_since, rss, say};
use crate::config::BootConfig;

/// What every worker needs to meter its traffic: the buckets and the periods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MeterPlan {
    /// Indirection-table entries.
    pub buckets: usize,
    /// Periods are counted from here.
    pub start: Instant,
    /// `mapper_ms`.
    pub period: Duration,
}

/// NetBlaze's server mapper: the metering plan, each worker's last published meter, the
/// mapper's counters, and why it is off.
pub(super) struct MapperShare {
    /// The server mapper's metering plan (`None`: the mapper is off), each worker's meter
    /// at its last publication, and the mapper's counters.
    pub(super) meter_plan: Option<MeterPlan>,
    pub(super) meters: Vec<Mutex<MeterSnapshot>>,
    pub(super) mapper: Mutex<MapperCounters>,
    /// Why the mapper is off (`None`: on).
    pub(super) mapper_off: Option<&'static str>,
}

impl MeterPlan {
    /// A worker's meter.
    pub fn meter(&self) -> Option<BucketMeter> {
        BucketMeter::new(self.buckets, self.start, self.period).ok()
    }
}

/// Counters of `@stats` / `@summary` (`mapper_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct MapperCounters {
    /// Periods decided.
    pub periods: u64,
    /// Indirection entries moved.
    pub moved: u64,
    /// Queues activated / released.
    pub activated: u64,
    pub released: u64,
    /// Buckets left on an overloaded queue (no queue left to activate).
    pub unplaced: u64,
    /// Queues holding buckets after the last period.
    pub active: u64,
    /// Moves that failed (lanes busy, a device that refused).
    pub failed: u64,
    /// Worker snapshots older than the period they were summed for.
    pub stale: u64,
}

/// What the run decided about the mapper before it started.
pub(super) enum Setup {
    /// Off, and why (`no_profile`, `mapper_ms=0`, `one_lane`, `no_rss`, …).
    Off(&'static str),
    /// On.
    On(Plan),
}

/// The mapper's fixed inputs.
pub(super) struct Plan {
    params: Params,
    rate: RateCurve,
    buckets: usize,
    period: Duration,
}

/// Decides whether the mapper runs: a profile, `mapper_ms` > 0, two lanes or more, and ports
/// with RSS tables of one power-of-two length up to 512. A NetBlaze parameter that does not
/// validate is `Err` (a configuration error: the message names the field).
pub(super) fn setup<P: FwdPort>(
    cfg: &BootConfig,
    profile: Option<&Profile>,
    ports: &[P],
    lanes: usize,
    rate: cadence_core::time::TickRate,
) -> Result<Setup, alloc::string::String> {
    let Some(profile) = profile else { return Ok(Setup::Off("no_profile")) };
    if cfg.mapper_ms == 0 {
        return Ok(Setup::Off("mapper_ms=0"));
    }
    let mut nb = NetBlazeConfig::default();
    if cfg.slo_us > 0 {
        nb.slo_ns = u64::from(cfg.slo_us) * 1_000;
    }
    nb.server_period_ns = u64::from(cfg.mapper_ms) * 1_000_000;
    let params = nb.validate().map_err(|e| alloc::format!("boot option 'mapper_ms'/'slo_us': {e}"))?;
    if lanes < 2 {
        return Ok(Setup::Off("one_lane"));
    }
    let tables: Vec<Option<Vec<u16>>> = ports.iter().map(|p| p.rss_table()).collect();
    let Some(Some(first)) = tables.first() else { return Ok(Setup::Off("no_rss")) };
    let buckets = first.len();
    if tables.iter().any(|t| t.as_ref().map(Vec::len) != Some(buckets)) {
        return Ok(Setup::Off("rss_tables_differ"));
    }
    if !(buckets.is_power_of_two() && buckets <= cadence_core::rss::meter::MAX_BUCKETS) {
        return Ok(Setup::Off("rss_table_size"));
    }
    Ok(Setup::On(Plan {
        params,
        rate: profile.rate.clone(),
        buckets,
        period: rate.ticks_from_ms(u64::from(cfg.mapper_ms)),
    }))
}

impl Plan {
    /// The workers' part, with periods counted from `start`.
    pub fn meter_plan(&self, start: Instant) -> MeterPlan {
        MeterPlan { buckets: self.buckets, start, period: self.period }
    }
}

/// Worker 0's mapper state.
pub(super) struct Mapper {
    plan: Plan,
    meter: MeterPlan,
    server: ServerMapper,
    active: Vec<bool>,
    sum: PeriodSum,
    loads: Vec<BucketLoad>,
    changes: Vec<RetaChange>,
    /// The next period to decide.
    next: u64,
}

impl Mapper {
    /// The mapper for `lanes` queues, periods counted from `start`.
    pub fn new(plan: Plan, start: Instant, lanes: usize) -> Self {
        let meter = plan.meter_plan(start);
        Self {
            server: ServerMapper::new(plan.params, plan.buckets, lanes),
            active: vec![false; lanes],
            sum: PeriodSum::with_buckets(plan.buckets),
            loads: Vec::with_capacity(plan.buckets),
            changes: Vec::with_capacity(plan.buckets),
            next: 0,
            meter,
            plan,
        }
    }

    /// Runs the mapper for the last period that ended at least a quarter period before
    /// `now`, if it has not run for it yet.
    pub fn poll<M: Machine, P: FwdPort>(
        &mut self,
        sh: &Shared<M, P>,
        pl: &mut Worker<NetBlazeStage>,
        ports: &mut [P],
        now: Instant,
    ) {
        let period = self.plan.period.ticks().max(1);
        let since = now.saturating_since(self.meter.start).ticks();
        // Period k ends at start + (k + 1)·period; it is decided a quarter period later, when
        // every worker has published a snapshot taken after its end.
        let Some(ready) = since.checked_sub(period / 4) else { return };
        let Some(k) = (ready / period).checked_sub(1) else { return };
        if k < self.next {
            return;
        }
        self.next = k + 1;
        let end = self.meter.start.saturating_add(Duration(period.saturating_mul(k + 1)));
        self.sum.begin(k);
        for m in &sh.mapping.meters {
            self.sum.add(&m.lock(), end);
        }
        let Some(Some(table)) = ports.first().map(|p| p.rss_table()) else { return };
        let secs = sh.clock.rate().ns(self.plan.period) as f64 / 1e9;
        self.sum.bucket_loads(secs, &mut self.loads);
        let outcome = self.server.period(&self.plan.rate, &self.loads, &table, &mut self.active);
        self.changes.clear();
        self.changes.extend_from_slice(self.server.changes());
        let applied = if self.changes.is_empty() {
            Ok(rss::Applied::default())
        } else {
            rss::apply_changes(sh, pl, ports, &self.changes)
        };
        let pps: f64 = self.loads.iter().map(|l| l.pps).sum();
        let stale = self.sum.stale as u64;
        {
            let mut c = sh.mapping.mapper.lock();
            c.periods += 1;
            c.moved += u64::from(outcome.moved);
            c.activated += u64::from(outcome.activated);
            c.released += u64::from(outcome.released);
            c.unplaced += u64::from(outcome.unplaced);
            c.active = u64::from(outcome.active);
            c.stale += stale;
            if applied.is_err() {
                c.failed += 1;
            }
        }
        let eventful = outcome.moved > 0 || outcome.activated > 0 || outcome.released > 0 || outcome.unplaced > 0;
        if !eventful && applied.is_ok() {
            return;
        }
        let t_ms = ms_since(&sh.clock, sh.started, now);
        match applied {
            Ok(a) => say(
                sh.machine,
                format_args!(
                    "@mapper t_ms={t_ms} period={k} pps={} moved={} activated={} released={} unplaced={} active={} \
                     steps={} drained={} empty={} stale={stale}",
                    pps as u64,
                    outcome.moved,
                    outcome.activated,
                    outcome.released,
                    outcome.unplaced,
                    outcome.active,
                    a.steps,
                    a.drained,
                    u8::from(a.empty)
                ),
            ),
            Err(reason) => say(
                sh.machine,
                format_args!("@mapper t_ms={t_ms} period={k} failed reason={reason} moved={}", outcome.moved),
            ),
        }
    }
}

/// Copies worker `w`'s meter into its slot (unless the mapper reads it right now; `wait`:
/// also then — the final counters).
pub(super) fn publish<M: Machine, P: FwdPort>(sh: &Shared<M, P>, w: usize, pl: &Worker<NetBlazeStage>, wait: bool) {
    let (Some(meter), Some(slot)) = (pl.stage().chain().meter(), sh.mapping.meters.get(w)) else { return };
    let guard = if wait { Some(slot.lock()) } else { slot.try_lock() };
    if let Some(mut s) = guard {
        meter.snapshot_into(&mut s, sh.clock.now());
    }
}

/// The snapshot slots: one per worker when the mapper is on, else none.
pub(super) fn slots(plan: Option<&MeterPlan>, workers: usize) -> Vec<spin::Mutex<MeterSnapshot>> {
    match plan {
        Some(p) => (0..workers).map(|_| spin::Mutex::new(MeterSnapshot::with_buckets(p.buckets))).collect(),
        None => Vec::new(),
    }
}
