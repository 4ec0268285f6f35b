//! The `@stats` / `@summary` lines (docs/PROTOCOL.md): forwarding counters summed over
//! workers, driver counters summed over lanes, NF counters, then per-core and per-lane keys,
//! then the machine's own keys.

use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cadence_core::latency::Latency;
use cadence_core::metronome::WorkerStats;
use cadence_core::offload::NetBlazeCounters;
use cadence_core::poll::{DriverCounters, PollStats};
use cadence_core::stage::PORTS;
use cadence_core::time::{Clock, Duration, Instant};

use spin::Mutex;

use super::{FwdPort, Machine, Shared, SleepSummary, Slot, ms_since};

/// Prints one `tag` line; `wait`: wait for the console (the final `@summary`), else give
/// up when it is busy. Returns whether the line was written.
pub(super) fn line<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    tag: &str,
    start: Instant,
    now: Instant,
    wait: bool,
) -> bool {
    snapshot(sh, tag, start, now, wait, None)
}

/// What the workers publish for the reports: counters, sleeps, sojourn histograms against the
/// SLO, and the @stats requests and skips.
pub(super) struct Telemetry {
    pub(super) slots: Vec<Mutex<Slot>>,
    /// Per worker: what its sleeper said at its last publication.
    pub(super) sleeps: Vec<Mutex<SleepSummary>>,
    /// Per worker: its sojourn histogram at its last publication; and the SLO.
    pub(super) latency: Vec<Mutex<Latency>>,
    /// `@stats` lines skipped because the console was still busy.
    pub(super) stats_skipped: AtomicU64,
    /// A STATS control frame asked for a `@stats` line.
    pub(super) stats_requested: AtomicBool,
    pub(super) slo: Duration,
    pub(super) slo_us: u32,
}

/// Writes what a stats line holds, without its tag, into `out` (management `stats`).
pub(super) fn body<M: Machine, P: FwdPort>(sh: &Shared<M, P>, start: Instant, now: Instant, out: &mut dyn Write) {
    snapshot(sh, "", start, now, false, Some(out));
}

/// One snapshot of every counter: printed as a `tag` line, or (empty `tag`) written into
/// `into`.
fn snapshot<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    tag: &str,
    start: Instant,
    now: Instant,
    wait: bool,
    into: Option<&mut dyn Write>,
) -> bool {
    // Everything is gathered before the console is touched, so the line is one snapshot.
    let mut total = PollStats::default();
    let mut per_core: heapless::Vec<WorkerStats, 64> = heapless::Vec::new();
    let mut nb = NetBlazeCounters::default();
    let mut aux_frames = 0u64;
    for slot in &sh.telemetry.slots {
        let s = *slot.lock();
        total.merge(&s.fwd);
        nb.merge(&s.nb);
        aux_frames = aux_frames.saturating_add(s.aux.frames);
        let _ = per_core.push(s.core);
    }
    let mut lat = Latency::default();
    for l in &sh.telemetry.latency {
        lat.merge(&l.lock());
    }
    let mut drv = DriverCounters::default();
    for (k, lane) in sh.lanes.iter().enumerate() {
        // A lane held by a worker right now is skipped: the line is a snapshot, and
        // waiting for the lock would stall the reporter behind a busy period.
        let Some(mut guard) = sh.ctl.lanes()[k].lock().try_lock() else { continue };
        if let Some(lane) = lane.get_mut(&mut guard) {
            let d = DriverCounters::from_queues(&lane.rx, &lane.pool);
            for p in 0..PORTS {
                drv.rx_err[p] += d.rx_err[p];
                drv.no_buf[p] += d.no_buf[p];
            }
            drv.pool_in_use += d.pool_in_use;
        }
    }
    let t_ms = ms_since(&sh.clock, start, now);
    let mut write = |w: &mut dyn Write| -> fmt::Result {
        write!(w, "{tag} t_ms={t_ms} ")?;
        total.write_counters(&mut *w, &drv, sh.ports)?;
        sh.chains.write_summed(&mut *w)?;
        write!(w, " stats_skipped={}", sh.telemetry.stats_skipped.load(Ordering::Relaxed))?;
        write!(w, " stalls={}", sh.health.stalls.load(Ordering::Relaxed))?;
        let takeovers: u64 = sh.health.takeovers.iter().map(|t| t.load(Ordering::Relaxed)).sum();
        write!(w, " takeovers={takeovers} stranded={}", sh.health.stranded.load(Ordering::Relaxed))?;
        write!(w, " workers={} lanes={}", per_core.len(), sh.lanes.len())?;
        write!(w, " lanes_parked={}", sh.rss.parked_lanes.load(Ordering::Relaxed).count_ones())?;
        write!(w, " slo_us={}", sh.telemetry.slo_us)?;
        if sh.mapping.meter_plan.is_some() {
            let c = *sh.mapping.mapper.lock();
            write!(
                w,
                " mapper_periods={} mapper_moved={} mapper_activated={} mapper_released={} mapper_unplaced={} \
                 mapper_active={} mapper_failed={} mapper_stale={}",
                c.periods, c.moved, c.activated, c.released, c.unplaced, c.active, c.failed, c.stale
            )?;
        }
        if sh.aux.plan.is_some() {
            write!(w, " aux={} aux_frames={aux_frames}", sh.telemetry.slots.len() - sh.aux.dedicated)?;
            nb.write(w)?;
        }
        lat.write(w, "", sh.clock.rate())?;
        lat.write_from_poll(w)?;
        write_cores(sh, w, &per_core)?;
        write_lanes(sh, w)?;
        sh.machine.write_extra(w)
    };
    if tag.is_empty() {
        // The body alone, for the management channel's `stats` (no console involved).
        if let Some(out) = into {
            let _ = write(out);
        }
        return true;
    }
    if wait {
        sh.machine.line(&mut write);
        true
    } else {
        sh.machine.try_line(&mut write)
    }
}

fn write_cores<M: Machine, P: FwdPort>(sh: &Shared<M, P>, w: &mut dyn Write, per_core: &[WorkerStats]) -> fmt::Result {
    for (i, c) in per_core.iter().enumerate() {
        let s = sh.telemetry.sleeps.get(i).map(|s| *s.lock()).unwrap_or_default();
        write!(
            w,
            " core{i}_busy_cycles={} core{i}_halted_cycles={} core{i}_tries={} core{i}_wins={} \
             core{i}_busy_tries={} core{i}_packets={} core{i}_sleeps={} core{i}_cut_rounds={} \
             core{i}_mwait_sleeps={}",
            c.awake_ticks(),
            c.halted_ticks,
            c.tries,
            c.wins,
            c.busy_tries,
            c.packets,
            c.sleeps,
            c.cut_rounds,
            s.watched
        )?;
        if let Some(l) = sh.telemetry.latency.get(i) {
            l.lock().write(w, &alloc::format!("core{i}_"), sh.clock.rate())?;
        }
        for (key, v) in [
            ("idle_ns", s.idle_ns),
            ("spin_ns", s.spin_ns),
            ("late_p50_ns", s.late_p50_ns),
            ("late_p99_ns", s.late_p99_ns),
            ("mwait_hollow", s.mwait_hollow),
        ] {
            if let Some(v) = v {
                write!(w, " core{i}_{key}={v}")?;
            }
        }
    }
    Ok(())
}

fn write_lanes<M: Machine, P: FwdPort>(sh: &Shared<M, P>, w: &mut dyn Write) -> fmt::Result {
    let rate = sh.clock.rate();
    for (k, q) in sh.ctl.lanes().iter().enumerate() {
        let s = q.snapshot();
        write!(
            w,
            " lane{k}_rho_permille={} lane{k}_ts_ns={} lane{k}_vac_mean_ns={} lane{k}_vac_p99_ns={} \
             lane{k}_wins={} lane{k}_busy_tries={} lane{k}_packets={}",
            (s.rho * 1000.0) as u64,
            rate.ns(s.short_timeout),
            s.vacation_mean().map_or(0, |v| rate.ns(Duration(v as u64))),
            s.vacation_p99().map_or(0, |v| rate.ns(Duration(v))),
            s.wins,
            s.busy_tries,
            s.packets
        )?;
    }
    Ok(())
}

/// The rack controller's view of this server, kept between `@report` lines.
pub(super) struct ReportState {
    last_rx: u64,
    last: Instant,
    period: u64,
}

impl ReportState {
    pub(super) fn new(start: Instant) -> Self {
        Self { last_rx: 0, last: start, period: 0 }
    }
}

/// Prints one `@report` line (docs/PROTOCOL.md): the dedicated cores this server uses — the
/// server mapper's active queues when it runs and has decided a period, else the dedicated
/// workers — and the load since the last line (frames received on every port, per second,
/// from the workers' last publications). Gives up when the console is busy (`false`).
pub(super) fn report<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    st: &mut ReportState,
    start: Instant,
    now: Instant,
) -> bool {
    let mut rx = 0u64;
    for slot in &sh.telemetry.slots {
        let s = slot.lock();
        rx = rx.saturating_add(s.fwd.ports.iter().map(|p| p.rx).sum::<u64>());
    }
    let active = sh.mapping.meter_plan.is_some().then(|| sh.mapping.mapper.lock().active).filter(|&a| a > 0);
    let dedicated = active.unwrap_or(sh.aux.dedicated as u64);
    let ns = sh.clock.rate().ns(now.saturating_since(st.last));
    let frames = rx.saturating_sub(st.last_rx);
    let pps = if ns == 0 {
        0
    } else {
        u64::try_from(u128::from(frames) * 1_000_000_000 / u128::from(ns)).unwrap_or(u64::MAX)
    };
    let t_ms = ms_since(&sh.clock, start, now);
    let k = st.period;
    let ok = sh.machine.try_line(&mut |w| {
        write!(
            w,
            "@report t_ms={t_ms} period={k} dedicated={dedicated} workers={} rx={rx} pps={pps}",
            sh.telemetry.slots.len()
        )
    });
    if ok {
        (st.last_rx, st.last, st.period) = (rx, now, k + 1);
    }
    ok
}
