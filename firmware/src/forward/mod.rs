//! The forwarding run, for any machine: `workers` workers share `lanes` lanes through the
//! Metronome controller (`core::metronome`), port 0 ↔ port 1, until a STOP control frame
//! (success) or `max_s` (runtime failure).
//!
//! The same code runs in the bare-metal image (cores brought up over INIT-SIPI, halting
//! sleeper, COM1) and in the hosted Linux build (pinned threads, `clock_nanosleep`
//! sleeper, stdout): what differs is behind [`Machine`] (clock, sleepers, starting and
//! joining workers, the console) and [`FwdPort`] (a NIC's queues and RSS table).
//!
//! Lane `k` is queue pair `k` of both ports plus its own buffer pool; it is bound to the
//! controller's lock `k`. Worker 0 runs on the calling core/thread and also keeps the
//! clock: the periodic `@stats` line, `max_s`, and, once any worker has seen STOP, the
//! wind-down — every other worker notices the shared stop flag after its current round (at
//! most `T_L` later), publishes its counters and returns; worker 0 then drains the TX
//! rings and prints `@summary`.
//!
//! Counters cross cores through one slot per worker, published with a non-blocking
//! `try_lock` after rounds that moved packets (and every `PUBLISH_EVERY` rounds), so no
//! worker ever waits for the reporter. `@stats` lines go through
//! [`Machine::try_line`], which may refuse (a console still busy with the previous line);
//! a refused line is skipped and counted (`stats_skipped`), never waited for.

mod aux;
mod chains;
mod machine;
mod mapper;
pub mod mgmt;
mod report;
mod rss;
mod watchdog;
mod worker;

pub use chains::Chains;
pub use machine::{BootNonce, Event, FwdPort, HEALTH_MS, LineRate, Machine, Outcome, SleepSummary};
use worker::*;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use cadence_core::buf::Pool;
use cadence_core::latency::Latency;
use cadence_core::metronome::WorkerStats;
use cadence_core::metronome::{LaneShare, Metronome, MetronomeConfig};
use cadence_core::netblaze::Profile;
use cadence_core::nf::config::ChainSpec;
use cadence_core::nic::{Port, RxQueue, TxQueue};
use cadence_core::offload::{AuxStats, NetBlazeCounters, NetBlazeStage};
use cadence_core::poll::{PollConfig, PollStats};
use cadence_core::stage::PORTS;
use cadence_core::sync::doorbell::{WakeHook, no_wake};
use cadence_core::sync::{Fenced, Guarded, Holder};
use cadence_core::time::{Clock, Duration, Instant, Sleeper, poll_until};
use cadence_core::worker::{IdleSleep, Lane, Mode, RoundBudget, Worker};

use spin::Mutex;

use crate::config::BootConfig;

/// Extra `tx_burst` attempts for frames a full TX ring did not take, within one poll.
const TX_RETRIES: u32 = 4;
/// How long the wind-down waits for the TX rings to drain.
const DRAIN_MS: u64 = 100;
/// Rounds between counter publications of a worker whose rounds move nothing.
const PUBLISH_EVERY: u64 = 64;
/// Hang guard for the other workers to return after STOP (they notice within `T_L`).
const PARK_TIMEOUT_MS: u64 = 2_000;

/// Writes `args` as one line and waits (messages: `error: …`, `warning: …`).
fn say<M: Machine>(m: &M, args: fmt::Arguments<'_>) {
    m.line(&mut |w| w.write_fmt(args));
}

type FwLane<P> = Lane<'static, <P as FwdPort>::Rx, <P as FwdPort>::Tx>;

/// One worker's published counters.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    fwd: PollStats,
    core: WorkerStats,
    /// A dedicated worker's NetBlaze counters; an auxiliary worker's loop counters.
    nb: NetBlazeCounters,
    aux: AuxStats,
}

/// Everything the workers share, leaked at start-up (`'static`, never freed): the machine,
/// the controller and the lanes, the chains, the run's lifecycle (stop, parked, failed,
/// started, finished), and one part per concern, each defined by the module that owns it —
/// [`watchdog::Health`], [`report::Telemetry`], [`mapper::MapperShare`], [`aux::AuxShare`],
/// [`rss::RssState`].
struct Shared<M: Machine, P: FwdPort> {
    machine: &'static M,
    /// The dataplane's ports (2 to `PORTS`): port `p` is queue index `p` of every lane.
    ports: usize,
    ctl: Metronome<Vec<LaneShare>>,
    lanes: Vec<Guarded<FwLane<P>>>,
    /// The NF chain every worker runs (its own instance) and their NF counters.
    chains: Chains,
    mode: Mode,
    /// How long one won round may drain its lane (`round_us`).
    round_budget: RoundBudget,
    /// The idle lane's sleep (`idle_us`).
    idle: IdleSleep,
    clock: M::Clock,
    /// Set by whichever worker sees STOP, or by worker 0 at `max_s`.
    stop: AtomicBool,
    /// Workers other than 0 that have returned.
    parked: AtomicUsize,
    /// The workers' and lanes' health: heartbeats, stalls, fences, take-overs.
    health: watchdog::Health,
    /// Workers that could not make their sleeper.
    failed: AtomicUsize,
    /// When the run started (`t_ms=` of the lines) and when `max_s` ends it, if it does.
    started: Instant,
    max_deadline: Option<Instant>,
    /// `@summary` is out: the run is over (the watchdog returns).
    finished: AtomicBool,
    /// What the workers publish for the reports: counters, sleeps, sojourn histograms
    /// against the SLO, and the `@stats` requests and skips.
    telemetry: report::Telemetry,
    /// NetBlaze's server mapper: the metering plan, each worker's last published meter, the
    /// mapper's counters, and why it is off.
    mapping: mapper::MapperShare,
    /// NetBlaze's auxiliary cores and the dedicated workers' count, as the workers share them.
    aux: aux::AuxShare,
    /// RSS moves: the command for worker 0, the tables before the last move, the lanes no
    /// table entry points at.
    rss: rss::RssState,
}

/// The Metronome configuration of the boot options, with the ports' line rate and the
/// entries of their smallest receive ring (`None`: `qsize`).
pub fn metronome_config(cfg: &BootConfig, line_rate_pps: Option<u64>, ring: Option<u32>) -> MetronomeConfig {
    let mut mcfg = MetronomeConfig::default();
    mcfg.target_vacation_ns = u64::from(cfg.vbar_us) * 1_000;
    mcfg.long_timeout_ns = u64::from(cfg.tl_us) * 1_000;
    mcfg.initial_short_timeout_ns = u64::from(cfg.ts0_us) * 1_000;
    mcfg.ewma_weight = f64::from(cfg.ewma_permille) / 1000.0;
    mcfg.vacation_feedback_gain = f64::from(cfg.feedback_permille) / 1000.0;
    mcfg.ring_descriptors = ring.filter(|&r| r > 0).unwrap_or(u32::from(cfg.qsize));
    // T_S near zero load is about V̄: a clamp below V̄ would make the target unreachable.
    mcfg.max_short_timeout_ns = mcfg.max_short_timeout_ns.max(mcfg.target_vacation_ns);
    if let Some(r) = line_rate_pps.filter(|&r| r > 0) {
        mcfg.line_rate_pps = r;
    }
    mcfg
}

/// Forwards until STOP ([`Outcome::Success`]) or `max_s` ([`Outcome::RuntimeFailure`]).
/// `pools[k]` is lane `k`'s pool; `line_rate_pps` bounds `T_S` by the ring (`T_S ≤ margin·D/R`).
pub fn run<M: Machine, P: FwdPort>(
    machine: &'static M,
    cfg: &BootConfig,
    mut pools: Vec<Pool<'static>>,
    mut ports: Vec<P>,
    spec: &ChainSpec,
    profile: Option<&Profile>,
    line: LineRate,
) -> Outcome {
    let line_rate_pps = Some(cadence_core::metronome::line_rate_pps_for_mbps(u64::from(line.mbps)));
    if !(2..=PORTS).contains(&ports.len()) {
        say(machine, format_args!("error: forwarding needs 2 to {PORTS} NICs, found {}", ports.len()));
        return Outcome::RuntimeFailure;
    }
    // The chain and `ctl=` may name only ports this dataplane has.
    if let Some((p, record)) = spec.highest_port().filter(|&(p, _)| usize::from(p) >= ports.len()) {
        say(
            machine,
            format_args!("error: chain: {record} names port {p}, but the dataplane has {} ports", ports.len()),
        );
        return Outcome::ConfigError;
    }
    if let Some(p) = cfg.ctl.filter(|&p| usize::from(p) >= ports.len()) {
        say(machine, format_args!("error: boot option 'ctl': port:{p}, but the dataplane has {} ports", ports.len()));
        return Outcome::ConfigError;
    }
    let mut own = [[0u8; 6]; PORTS];
    for (o, p) in own.iter_mut().zip(&ports) {
        *o = p.mac();
    }
    // The rings go to the lanes; the ports keep their control path (RSS table updates).
    let mut queues: Vec<_> = ports.iter_mut().map(|p| p.take_queues().into_iter()).collect();
    let lanes = queues.iter().map(|q| q.len()).min().unwrap_or(0).min(pools.len());
    if lanes < cfg.lanes {
        say(machine, format_args!("warning: lanes={} asked, the NICs give {lanes} queue pairs", cfg.lanes));
    }
    if lanes == 0 {
        say(machine, format_args!("error: no queue pair to forward on"));
        return Outcome::RuntimeFailure;
    }
    if machine.max_workers() < cfg.workers {
        say(
            machine,
            format_args!("error: workers={} but only {} cores are online", cfg.workers, machine.max_workers()),
        );
        return Outcome::RuntimeFailure;
    }
    let clock = machine.clock();
    pools.truncate(lanes);
    // Before the pools move into the lanes: the auxiliary cores' views are made from them.
    let (aux_plan, aux_parts) = match aux::setup(cfg, profile, &mut pools, clock.rate()) {
        Ok(Some((plan, parts))) => (Some(plan), parts),
        Ok(None) => (None, Vec::new()),
        Err(e) => {
            say(machine, format_args!("error: {e}"));
            return Outcome::ConfigError;
        }
    };
    let dedicated = cfg.workers - aux_parts.len();
    let ring = ports.iter().filter_map(|p| p.ring_entries()).min();
    let mcfg = metronome_config(cfg, line_rate_pps, ring);
    let ctl = match Metronome::with_lanes(&mcfg, clock.rate(), dedicated, lanes) {
        Ok(c) => c,
        Err(e) => {
            say(machine, format_args!("error: metronome: {e}"));
            return Outcome::ConfigError;
        }
    };
    warn_ring_bound(machine, &mcfg);
    // The controller's queue locks live in its Vec's heap buffer: their addresses are
    // fixed from here on, so the lanes can be bound to them.
    let mut bound = Vec::with_capacity(lanes);
    // Buffers out of the pools once the receive rings are filled: where `pool_in_use`
    // returns to when the run is idle (printed on `@ready`, checked against `@summary`).
    let mut resting = 0;
    let mut lane_resting = Vec::with_capacity(lanes);
    for (k, mut pool) in pools.into_iter().take(lanes).enumerate() {
        // Queue pair `k` of every port, port `p`'s at index `p`.
        let (mut rx, mut tx) = (heapless::Vec::new(), heapless::Vec::new());
        for (r, t) in queues.iter_mut().filter_map(Iterator::next) {
            // Cannot fail: at most PORTS ports (checked above).
            let _ = rx.push(r);
            let _ = tx.push(t);
        }
        for r in &mut rx {
            P::fill(r, &mut pool);
        }
        resting += pool.in_use();
        lane_resting.push(pool.in_use());
        bound.push(Guarded::new(ctl.lanes()[k].lock(), Lane { rx, tx, pool }));
    }
    let mode = cfg.sched;
    let nonce = machine.boot_nonce();
    let chains = match Chains::build(spec, cfg, own, cfg.workers, clock.rate(), nonce.value) {
        Ok(c) => c,
        Err(e) => {
            say(machine, format_args!("error: chain: {e}"));
            return Outcome::RuntimeFailure;
        }
    };
    let setup = match mapper::setup(cfg, profile, &ports, lanes, clock.rate()) {
        Ok(s) => s,
        Err(e) => {
            say(machine, format_args!("error: {e}"));
            return Outcome::ConfigError;
        }
    };
    let started_at = clock.now();
    let (plan, mapper_off) = match setup {
        mapper::Setup::On(plan) => (Some(plan), None),
        mapper::Setup::Off(why) => (None, Some(why)),
    };
    let meter_plan = plan.as_ref().map(|p| p.meter_plan(started_at));
    let shared: &'static Shared<M, P> = Box::leak(Box::new(Shared {
        machine,
        ports: ports.len(),
        ctl,
        lanes: bound,
        chains,
        mode,
        round_budget: RoundBudget::new(RoundBudget::DEFAULT_POLLS, clock.rate().ticks_from_us(u64::from(cfg.round_us))),
        idle: IdleSleep {
            after: clock.rate().ticks_from_us(u64::from(cfg.idle_after_us)),
            sleep: clock.rate().ticks_from_us(u64::from(cfg.idle_us)),
        },
        clock,
        stop: AtomicBool::new(false),
        parked: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        health: watchdog::Health {
            heartbeats: (0..cfg.workers).map(|_| AtomicU64::new(clock.now().ticks())).collect(),
            last_lane: (0..cfg.workers).map(|w| AtomicUsize::new(w % lanes)).collect(),
            in_driver: (0..cfg.workers).map(|_| Arc::new(AtomicBool::new(false))).collect(),
            fenced: AtomicU64::new(0),
            lane_resting,
            takeovers: (0..lanes).map(|_| AtomicU64::new(0)).collect(),
            stranded: AtomicU64::new(0),
            stalled: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            stall_limit: clock.rate().ticks_from_ms(u64::from(cfg.stall_ms)),
            inject_stall: cfg.stall.map(|(w, ms)| {
                (
                    usize::from(w),
                    clock.now().saturating_add(clock.rate().ticks_from_ms(u64::from(ms))),
                    cfg.stall_in_round,
                )
            }),
        },
        telemetry: report::Telemetry {
            slots: (0..cfg.workers).map(|_| Mutex::new(Slot::default())).collect(),
            sleeps: (0..cfg.workers).map(|_| Mutex::new(SleepSummary::default())).collect(),
            latency: (0..cfg.workers).map(|_| Mutex::new(Latency::default())).collect(),
            stats_skipped: AtomicU64::new(0),
            stats_requested: AtomicBool::new(false),
            slo: clock.rate().ticks_from_us(u64::from(cfg.slo_us)),
            slo_us: cfg.slo_us,
        },
        mapping: mapper::MapperShare {
            meter_plan,
            meters: mapper::slots(meter_plan.as_ref(), cfg.workers),
            mapper: Mutex::new(mapper::MapperCounters::default()),
            mapper_off,
        },
        aux: aux::AuxShare {
            plan: aux_plan,
            parts: aux_parts,
            dedicated,
            dedicated_done: AtomicUsize::new(0),
            aux_exit: AtomicBool::new(false),
        },
        rss: rss::RssState {
            commands: rss::RssMailbox::default(),
            saved: Mutex::new(None),
            parked_lanes: AtomicU64::new(0),
        },
        started: started_at,
        max_deadline: (cfg.max_s > 0)
            .then(|| clock.now().saturating_add(clock.rate().ticks_from_ms(u64::from(cfg.max_s) * 1000))),
        finished: AtomicBool::new(false),
    }));

    match cfg.ctl {
        Some(port) => machine.log(format_args!(
            "forward: {} workers on {lanes} lanes, sched={}, control frames on port {port} (signed)",
            cfg.workers,
            mode.as_str(),
        )),
        None => machine.log(format_args!(
            "forward: {} workers on {lanes} lanes, sched={}, control frames off",
            cfg.workers,
            mode.as_str(),
        )),
    }
    machine.event(Event::Started { workers: cfg.workers, lanes });

    let mut started = 1;
    for w in 1..cfg.workers {
        let job: Box<dyn FnOnce() + Send> = if w < dedicated {
            Box::new(move || run_worker(shared, w))
        } else {
            Box::new(move || aux::run(shared, w, w - dedicated))
        };
        if let Err(e) = machine.spawn(w, job) {
            say(machine, format_args!("error: worker {w}: {e}"));
            shared.stop.store(true, Ordering::Release);
            break;
        }
        started += 1;
    }
    let watched =
        started == cfg.workers && machine.spawn_watchdog(cfg.workers, Box::new(move || watchdog::run(shared)));
    let mut outcome = Outcome::RuntimeFailure;
    if started == cfg.workers {
        // Every lane's receive rings are filled and every worker is running: traffic may come.
        say(
            machine,
            format_args!(
                "@ready workers={} lanes={lanes} mwait={} pool_in_use={resting} line_mbps={} line_from={} watchdog={} \
                 aux={} mapper={} ctl_nonce={:016x} nonce_source={}",
                cfg.workers,
                if cfg.mwait { "on" } else { "off" },
                line.mbps,
                line.from,
                if watched { "core" } else { "workers" },
                cfg.workers - dedicated,
                shared.mapping.mapper_off.unwrap_or("on"),
                nonce.value,
                nonce.source
            ),
        );
        let mapper = plan.map(|p| mapper::Mapper::new(p, started_at, lanes));
        outcome = boot_worker(shared, cfg, &mut ports, mapper);
    }
    wind_down(shared, started, outcome)
}

/// Says so when the ring bound holds `T_S` below V̄ whatever the load (the ring rule `T_S ≤ margin·D/R`):
/// then Metronome cannot make the vacation V̄, and a bigger ring or the port's real line
/// rate is what the operator needs to know about.
fn warn_ring_bound<M: Machine>(m: &M, mcfg: &MetronomeConfig) {
    if let Some(b) = mcfg.ring_bound_ns().filter(|_| mcfg.ring_bound_below_target()) {
        say(
            m,
            format_args!(
                "warning: T_S is bounded by the ring at {:.1} us (ring={} at {} pps), below vbar={} us: \
                 the vacation target cannot be met; raise qsize or set line_mbps to the port's real rate",
                b / 1000.0,
                mcfg.ring_descriptors,
                mcfg.line_rate_pps,
                mcfg.target_vacation_ns / 1000
            ),
        );
    }
}

/// After STOP: waits for the other `started − 1` workers to return, drains TX, prints
/// `@summary`.
fn wind_down<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>, started: usize, outcome: Outcome) -> Outcome {
    let m = sh.machine;
    m.log(format_args!("forward: stopping"));
    // Whatever path got here, the auxiliary workers may now return.
    aux::exit(sh);
    let clock = sh.clock;
    let rate = clock.rate();
    let others = started.saturating_sub(1);
    // A shutdown that leaves a worker running, a lane held or frames on a TX ring did not
    // stop cleanly: it says which, and the run fails even after a STOP.
    let mut clean = true;
    if poll_until(&clock, rate.ticks_from_ms(PARK_TIMEOUT_MS), || sh.parked.load(Ordering::Acquire) >= others).is_err()
    {
        say(m, format_args!("error: {} of {} workers parked", sh.parked.load(Ordering::Acquire), others));
        clean = false;
    }
    for w in 1..started {
        let _ = m.join(w, rate.ticks_from_ms(10));
    }
    for (k, lane) in sh.lanes.iter().enumerate() {
        let Some(mut guard) = sh.ctl.lanes()[k].lock().try_lock() else {
            say(m, format_args!("error: lane {k} still held at shutdown; not drained"));
            clean = false;
            continue;
        };
        if let Some(lane) = lane.get_mut(&mut guard) {
            let ok = poll_until(&clock, rate.ticks_from_ms(DRAIN_MS), || {
                lane.tx.iter_mut().fold(true, |idle, q| {
                    q.reclaim(&mut lane.pool);
                    idle && q.in_flight() == 0
                })
            });
            if ok.is_err() {
                say(m, format_args!("error: lane {k}: TX not drained after {DRAIN_MS} ms"));
                clean = false;
            }
            // A lane taken over from a stopped worker: what it held is gone with it.
            if sh.health.takeovers.get(k).is_some_and(|t| t.load(Ordering::Relaxed) > 0) {
                let resting = sh.health.lane_resting.get(k).copied().unwrap_or(0);
                let lost = lane.pool.in_use().saturating_sub(resting) as u64;
                sh.health.stranded.fetch_add(lost, Ordering::Relaxed);
            }
        }
    }
    report::line(sh, "@summary", sh.started, clock.now(), true);
    sh.finished.store(true, Ordering::Release);
    m.event(Event::Done);
    if clean { outcome } else { Outcome::RuntimeFailure }
}

/// The instant `t` as milliseconds since `start`.
fn ms_since<C: Clock>(clock: &C, start: Instant, t: Instant) -> u64 {
    clock.rate().ns(t.saturating_since(start)) / 1_000_000
}

#[cfg(test)]
mod tests;
