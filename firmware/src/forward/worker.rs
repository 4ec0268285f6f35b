//! One worker's loop: its [`Worker`] built over the shared lanes ([`make_worker`]), each
//! round's bookkeeping ([`step`]: commands seen, counters published, the heartbeat), the
//! loop of workers 1.. ([`run_worker`]) and worker 0's, which also keeps the clock
//! ([`boot_worker`]: `@stats`, RSS commands, the server mapper, `max_s`), and the lanes
//! settled at shutdown ([`settle_lanes`]).

use super::*;

/// A worker: its chain in NetBlaze's stage, first lane `w mod lanes`, its own PRNG seed.
pub(super) fn make_worker<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>, w: usize) -> Worker<NetBlazeStage> {
    let mut chain = sh.chains.for_worker();
    if let Some((who, at, true)) = sh.health.inject_stall
        && who == w
    {
        // Debug `stall=W:MS:round`: this worker hangs in its stage, holding its lane.
        chain.push_front(alloc::boxed::Box::new(chains::Hang { at, worker: w, machine: sh.machine }));
    }
    chain.set_meter(sh.mapping.meter_plan.and_then(|p| p.meter()));
    let wcfg = PollConfig::new(TX_RETRIES, Duration::ZERO).with_slo(sh.telemetry.slo);
    let stage = aux::stage(sh.aux.plan.as_ref(), chain, sh.machine.wake_hook());
    let in_driver = sh.health.in_driver.get(w).cloned().unwrap_or_default();
    Worker::new(sh.mode, w % sh.lanes.len(), w as u64 + 1, stage, wcfg)
        .partition(w, sh.aux.dedicated)
        .with_budget(sh.round_budget)
        .with_idle(sh.idle)
        .with_lease(Holder::of(w as u32), in_driver)
}

/// Copies `pl`'s latency histogram into worker `w`'s slot (4 KiB: every [`PUBLISH_EVERY`]
/// rounds and at the end, not after every round); `wait` as for [`publish`].
pub(super) fn publish_latency<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    w: usize,
    pl: &Worker<NetBlazeStage>,
    wait: bool,
) {
    if let Some(slot) = sh.telemetry.latency.get(w) {
        let guard = if wait { Some(slot.lock()) } else { slot.try_lock() };
        if let Some(mut l) = guard {
            l.clone_from(pl.latency());
        }
    }
}

/// Copies `pl`'s counters into slot `w`; `wait`: also when the reporter holds it now.
pub(super) fn publish<M: Machine, P: FwdPort>(sh: &Shared<M, P>, w: usize, pl: &Worker<NetBlazeStage>, wait: bool) {
    if let Some(slot) = sh.telemetry.slots.get(w) {
        let guard = if wait { Some(slot.lock()) } else { slot.try_lock() };
        if let Some(mut s) = guard {
            *s = Slot { fwd: *pl.forwarding(), core: pl.stats(), nb: *pl.stage().counters(), ..*s };
        }
    }
    sh.chains.publish(w, pl.stage().chain(), wait);
}

/// Copies what worker `w`'s sleeper says into its slot (unless the reporter reads it now).
pub(super) fn publish_sleeps<M: Machine, P: FwdPort>(sh: &Shared<M, P>, w: usize, sleeper: &M::Sleeper) {
    if let Some(mut s) = sh.telemetry.sleeps.get(w).and_then(|s| s.try_lock()) {
        *s = M::sleep_summary(sleeper);
    }
}

/// A worker's own bookkeeping between rounds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Local {
    rounds: u64,
    /// When this worker next checks the others' heartbeats.
    next_watch: Instant,
}

impl Local {
    fn new<M: Machine, P: FwdPort>(sh: &Shared<M, P>) -> Self {
        Local { rounds: 0, next_watch: sh.clock.now().saturating_add(sh.clock.rate().ticks_from_ms(HEALTH_MS)) }
    }
}

/// One round plus the bookkeeping every worker does; returns whether to go on.
pub(super) fn step<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    w: usize,
    pl: &mut Worker<NetBlazeStage>,
    sleeper: &mut M::Sleeper,
    local: &mut Local,
) -> bool {
    pl.set_parked(sh.rss.parked_lanes.load(Ordering::Relaxed));
    let r = pl.round(&sh.ctl, &sh.lanes, &sh.clock, sleeper);
    if let (Some(hb), Some(lane)) = (sh.health.heartbeats.get(w), sh.health.last_lane.get(w)) {
        hb.store(r.now.ticks(), Ordering::Relaxed);
        lane.store(r.lane, Ordering::Relaxed);
    }
    if let Some((who, at, false)) = sh.health.inject_stall
        && who == w
        && r.now >= at
    {
        // Debug `stall=`: this worker stops between rounds (holding no lane) for good.
        sh.machine.stall_forever(w);
    }
    if sh.health.stall_limit.ticks() != 0 && r.now >= local.next_watch {
        local.next_watch = r.now.saturating_add(sh.clock.rate().ticks_from_ms(HEALTH_MS));
        watch(sh, w, pl, r.now);
    }
    if r.commands.stop {
        sh.stop.store(true, Ordering::Release);
    }
    if r.commands.stats > 0 {
        sh.telemetry.stats_requested.store(true, Ordering::Relaxed);
    }
    if let Some((from, to)) = r.commands.rss_move {
        sh.rss.commands.post(rss::RssCommand::Move { from, to });
    }
    if r.commands.rss_restore {
        sh.rss.commands.post(rss::RssCommand::Restore);
    }
    local.rounds += 1;
    let stopping = sh.stop.load(Ordering::Acquire);
    if r.packets > 0 || local.rounds.is_multiple_of(PUBLISH_EVERY) || stopping {
        publish(sh, w, pl, false);
    }
    if local.rounds.is_multiple_of(PUBLISH_EVERY) || stopping {
        publish_sleeps(sh, w, sleeper);
        publish_latency(sh, w, pl, false);
        mapper::publish(sh, w, pl, false);
    }
    !stopping
}

/// The watch every worker keeps every [`HEALTH_MS`] (besides the watchdog core's, when the
/// machine has one): reports stalled and recovered workers ([`watchdog::check`]) and shares
/// the lanes among the live workers (a stalled worker holding no lane loses none; one stalled
/// inside a round keeps that lane locked, and the shutdown reports it).
pub(super) fn watch<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    me: usize,
    pl: &mut Worker<NetBlazeStage>,
    now: Instant,
) {
    watchdog::check(sh, watchdog::Seer::Worker(me), now);
    let stalled = sh.health.stalled.load(Ordering::Acquire);
    let workers = sh.aux.dedicated;
    let live = (0..workers).filter(|&v| v == me || v >= 64 || stalled & (1 << v) == 0).count();
    let rank = (0..me).filter(|&v| v >= 64 || stalled & (1 << v) == 0).count();
    pl.repartition(rank, live);
}

/// Worker `w` (≥ 1): runs rounds until the stop flag, publishes, returns.
pub(super) fn run_worker<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>, w: usize) {
    match sh.machine.sleeper(w) {
        Ok(mut sleeper) => {
            let mut pl = make_worker(sh, w);
            let mut local = Local::new(sh);
            while step(sh, w, &mut pl, &mut sleeper, &mut local) {}
            sh.aux.dedicated_done.fetch_add(1, Ordering::Release);
            // Counters are final: write them even if the reporter holds the slot for a moment.
            publish(sh, w, &pl, true);
            publish_latency(sh, w, &pl, true);
            mapper::publish(sh, w, &pl, true);
            if let Some(s) = sh.telemetry.sleeps.get(w) {
                *s.lock() = M::sleep_summary(&sleeper);
            }
        }
        Err(e) => {
            say(sh.machine, format_args!("error: worker {w}: sleeper: {e}"));
            sh.failed.fetch_add(1, Ordering::Relaxed);
            sh.stop.store(true, Ordering::Release);
        }
    }
    sh.parked.fetch_add(1, Ordering::Release);
}

/// Worker 0 on the calling core, plus the clock: `@stats`, `@report`, `max_s`, RSS moves.
pub(super) fn boot_worker<M: Machine, P: FwdPort>(
    sh: &'static Shared<M, P>,
    cfg: &BootConfig,
    ports: &mut [P],
    mut mapper: Option<mapper::Mapper>,
) -> Outcome {
    let mut sleeper = match sh.machine.sleeper(0) {
        Ok(s) => s,
        Err(e) => {
            say(sh.machine, format_args!("error: worker 0: sleeper: {e}"));
            sh.stop.store(true, Ordering::Release);
            return Outcome::RuntimeFailure;
        }
    };
    let clock = sh.clock;
    let rate = clock.rate();
    let start = sh.started;
    let period = rate.ticks_from_ms(u64::from(cfg.stats_ms));
    let mut next_stats = (cfg.stats_ms > 0).then(|| start.saturating_add(period));
    let report_period = rate.ticks_from_ms(u64::from(cfg.report_ms));
    let mut next_report = (cfg.report_ms > 0).then(|| start.saturating_add(report_period));
    let mut reports = report::ReportState::new(start);
    let deadline = sh.max_deadline;
    let mut pl = make_worker(sh, 0);
    let mut local = Local::new(sh);
    let mut outcome = Outcome::Success;
    let health = rate.ticks_from_ms(HEALTH_MS);
    let mut next_check = start.saturating_add(health);
    let mut mgmt = mgmt::Channel::new(rate, start);
    while step(sh, 0, &mut pl, &mut sleeper, &mut local) {
        sh.machine.pump_console();
        let now = clock.now();
        mgmt.poll(sh, &mut pl, ports, start, now);
        if let Some(why) = sh.machine.stop_requested()
            && !sh.stop.load(Ordering::Relaxed)
        {
            say(sh.machine, format_args!("stopping: {why}"));
            sh.stop.store(true, Ordering::Release);
        }
        if now >= next_check {
            next_check = now.saturating_add(health);
            if let Err(what) = sh.machine.check() {
                say(sh.machine, format_args!("error: {what}"));
                sh.stop.store(true, Ordering::Release);
                outcome = Outcome::RuntimeFailure;
            }
        }
        let asked = sh.telemetry.stats_requested.swap(false, Ordering::Relaxed);
        if asked || next_stats.is_some_and(|t| now >= t) {
            if !report::line(sh, "@stats", start, now, false) {
                sh.telemetry.stats_skipped.fetch_add(1, Ordering::Relaxed);
            }
            next_stats = next_stats.map(|t| t.saturating_add(period).max(now));
        }
        if next_report.is_some_and(|t| now >= t) {
            // A busy console skips this period's line; the next one covers both.
            let _ = report::report(sh, &mut reports, start, now);
            next_report = next_report.map(|t| t.saturating_add(report_period).max(now));
        }
        match sh.rss.commands.take() {
            None => {}
            Some(rss::RssCommand::Restore) => {
                let _ = rss::restore(sh, &mut pl, ports);
            }
            Some(rss::RssCommand::Move { from, to }) => {
                let _ = rss::move_buckets(sh, &mut pl, ports, from, to);
            }
        }
        if let Some(m) = &mut mapper {
            m.poll(sh, &mut pl, ports, now);
        }
        if deadline.is_some_and(|d| now >= d) {
            say(sh.machine, format_args!("error: max_s={} reached without a STOP control frame", cfg.max_s));
            sh.stop.store(true, Ordering::Release);
            outcome = Outcome::RuntimeFailure;
        }
    }
    sh.aux.dedicated_done.fetch_add(1, Ordering::Release);
    if sh.aux.plan.is_some() && !settle_lanes(sh, &mut pl) {
        outcome = Outcome::RuntimeFailure;
    }
    publish(sh, 0, &pl, true);
    publish_latency(sh, 0, &pl, true);
    mapper::publish(sh, 0, &pl, true);
    if let Some(s) = sh.telemetry.sleeps.first() {
        *s.lock() = M::sleep_summary(&sleeper);
    }
    if sh.failed.load(Ordering::Relaxed) > 0 {
        outcome = Outcome::RuntimeFailure;
    }
    outcome
}

/// With auxiliary cores, after STOP: waits for the other dedicated workers to leave their
/// loops, then polls each lane until everything it placed on an auxiliary core (still
/// running) is back and transmitted ([`aux::settle`]), then lets the auxiliary workers return.
/// `false` (said) when a lane does not settle; a lane still held is reported by `wind_down`.
pub(super) fn settle_lanes<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>, pl: &mut Worker<NetBlazeStage>) -> bool {
    let m = sh.machine;
    let rate = sh.clock.rate();
    // A dedicated worker that does not leave (stalled) is reported by `wind_down`.
    let _ = poll_until(&sh.clock, rate.ticks_from_ms(PARK_TIMEOUT_MS), || {
        sh.aux.dedicated_done.load(Ordering::Acquire) >= sh.aux.dedicated
    });
    let mut settled = true;
    for (k, lane) in sh.lanes.iter().enumerate() {
        let Some(mut guard) = sh.ctl.lanes()[k].lock().try_lock() else { continue };
        if let Some(lane) = lane.get_mut(&mut guard)
            && !aux::settle(sh, pl, k, lane)
        {
            say(m, format_args!("error: lane {k}: frames still with auxiliary cores at shutdown"));
            settled = false;
        }
    }
    aux::exit(sh);
    settled
}
