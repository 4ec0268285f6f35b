//! The forwarding run, for any machine: `workers` workers share `lanes` lanes through the
//! Metronome controller (`core::pipeline`), port 0 ↔ port 1, until a STOP control frame
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
//! `try_lock` after rounds that moved packets (and every [`PUBLISH_EVERY`] rounds), so no
//! worker ever waits for the reporter. `@stats` lines go through
//! [`Machine::try_line`], which may refuse (a console still busy with the previous line);
//! a refused line is skipped and counted (`stats_skipped`), never waited for.

mod aux;
mod chains;
mod mapper;
pub mod mgmt;
mod report;
mod rss;
mod watchdog;

pub use chains::Chains;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use cadence_core::buf::Pool;
use cadence_core::latency::Latency;
use cadence_core::metronome::WorkerStats;
use cadence_core::metronome::{LaneShare, Metronome, MetronomeConfig};
use cadence_core::netblaze::Profile;
use cadence_core::nf::config::ChainSpec;
use cadence_core::nic::{Port, RxQueue, TxQueue};
use cadence_core::offload::{AuxStats, NetBlazeCounters, NetBlazeStage};
use cadence_core::poll::{PollConfig, PollStats};
use cadence_core::rss::MeterSnapshot;
use cadence_core::stage::PORTS;
use cadence_core::sync::doorbell::{WakeHook, no_wake};
use cadence_core::sync::{Fenced, Guarded, Holder};
use cadence_core::time::{Clock, Duration, Instant, Sleeper, poll_until};
use cadence_core::worker::{Lane, Mode, RoundBudget, Worker};
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

/// How a run ended, for the caller to turn into an exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Stopped by a STOP control frame; everything wound down.
    Success,
    /// The configuration cannot work on this machine (e.g. the Metronome parameters).
    ConfigError,
    /// Something failed at run time (`max_s` without STOP, a worker that could not start).
    RuntimeFailure,
}

/// What the run reports to the machine's own log (the image: defmt on COM2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Every worker is running.
    Started {
        /// Workers.
        workers: usize,
        /// Lanes.
        lanes: usize,
    },
    /// `@summary` was printed.
    Done,
}

/// The line rate Metronome's ring bound assumes ([`BootConfig::line_rate_mbps`]): Mb/s and
/// where the figure came from (`option`, `port`, `default`); printed on `@ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRate {
    /// Mb/s.
    pub mbps: u32,
    /// `option`, `port` or `default`.
    pub from: &'static str,
}

/// What the forwarding run needs from the machine under it.
pub trait Machine: Sync + 'static {
    /// The clock every worker reads (the TSC).
    type Clock: Clock + Copy + Send + Sync + 'static;
    /// One worker's sleeper; made by [`Machine::sleeper`] on the worker's own core.
    type Sleeper: Sleeper;
    /// Why a sleeper or a worker could not be had.
    type Error: fmt::Display;

    /// The clock.
    fn clock(&self) -> Self::Clock;
    /// Workers this machine can run at once (online cores, or CPUs for threads).
    fn max_workers(&self) -> usize;
    /// Makes the calling worker's sleeper; called on the core/thread that will use it.
    fn sleeper(&self, worker: usize) -> Result<Self::Sleeper, Self::Error>;
    /// What `s` can say about its sleeps, for the stats lines.
    fn sleep_summary(s: &Self::Sleeper) -> SleepSummary;
    /// How a core wakes another asleep on a `Doorbell` (its `Sleeper::sleep_until_rung`):
    /// by default nothing — the bell's store wakes a core that watches it (MONITOR/MWAIT),
    /// and a sleeper that does not watch sleeps to its deadline.
    fn wake_hook(&self) -> WakeHook {
        no_wake
    }
    /// Runs `job` as worker `worker` (1 ..) on its own core/thread.
    fn spawn(&self, worker: usize, job: Box<dyn FnOnce() + Send + 'static>) -> Result<(), Self::Error>;
    /// Waits at most `timeout` for worker `worker`'s job to have returned.
    fn join(&self, worker: usize, timeout: Duration) -> bool;
    /// Writes one line (`write` is given the console; the machine adds the newline) and
    /// waits until it is out. For messages and the final `@summary`.
    fn line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result);
    /// Queues one line without waiting for the console; returns `false` (and writes
    /// nothing) when the console is still busy with earlier output.
    fn try_line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) -> bool;
    /// Moves queued console output along without waiting; called by worker 0 between
    /// rounds.
    fn pump_console(&self) {}
    /// Machine-specific ` key=value` pairs appended to `@stats`/`@summary` (the hosted
    /// build: CPU time per worker thread, sleeper lateness, kernel socket drops).
    fn write_extra(&self, out: &mut dyn Write) -> fmt::Result {
        let _ = out;
        Ok(())
    }
    /// Writes one line of the human log (what the run is doing, for people; not parsed).
    /// The image sends it to COM2 as defmt so COM1 keeps the machine lines; the default
    /// writes it like [`Machine::line`].
    fn log(&self, args: fmt::Arguments<'_>) {
        self.line(&mut |w| w.write_fmt(args));
    }
    /// Notes an event in the machine's log.
    fn event(&self, e: Event) {
        let _ = e;
    }
    /// Debug `stall=`: worker `worker` never returns, doing no work (a worker that hangs).
    /// The default spins; a machine may wait more cheaply. It must stay fenceable
    /// ([`Machine::fence`]).
    fn stall_forever(&self, worker: usize) -> ! {
        let _ = worker;
        loop {
            core::hint::spin_loop();
        }
    }
    /// Stops worker `worker` (≥ 1, or 0 when the watchdog has a core of its own) for good,
    /// wherever it is — the bare-metal image with an NMI whose handler halts the core, the
    /// hosted build with a signal whose handler never returns — and waits (boundedly) for
    /// it to acknowledge; then returns the proof that it stopped, with which the lanes it
    /// held can be taken over (`cadence_core::sync::TryLock::revoke`). `None` when the
    /// machine cannot stop a worker or it did not acknowledge: its lanes stay held, and the
    /// run reports them. The default cannot.
    fn fence(&self, worker: usize) -> Option<Fenced> {
        let _ = worker;
        None
    }
    /// Runs the watchdog `job` on a core or thread that is not a worker's (`index` is the
    /// first worker index no worker has: the image uses that worker's core, if it exists);
    /// `false` when the machine has none to spare (then the workers only watch each other).
    fn spawn_watchdog(&self, index: usize, job: Box<dyn FnOnce() + Send + 'static>) -> bool {
        let _ = (index, job);
        false
    }
    /// This boot's nonce (called once, at the start of the run): 64 bits that differ from
    /// one boot — and one instance — to the next, which signed control frames must name
    /// (`cadence_core::control`); and where they came from (`@ready` prints both).
    fn boot_nonce(&self) -> BootNonce;
    /// Ends the whole run at once with `outcome`, from the watchdog, when worker 0 cannot
    /// wind it down (it is stalled): the image exits QEMU, the hosted process exits.
    fn abort(&self, outcome: Outcome) -> !;
    /// Reads management input (COM1's receiver, the hosted build's stdin) into `buf`
    /// without waiting; returns the bytes read (0: none, or no such input). Called by
    /// worker 0 every [`mgmt::POLL_MS`], never per packet.
    fn read_mgmt(&self, buf: &mut [u8]) -> usize {
        let _ = buf;
        0
    }
    /// A stop the platform was asked for from outside the dataplane (the hosted build:
    /// `SIGINT`, `SIGTERM`), by name; polled by worker 0 between rounds. The run then winds
    /// down as after a STOP frame (`@summary`, success).
    fn stop_requested(&self) -> Option<&'static str> {
        None
    }
    /// Checks that the ports are still there (the hosted build: an interface may vanish);
    /// `Err` names what is gone. Called by worker 0 every [`HEALTH_MS`], never per packet.
    fn check(&self) -> Result<(), alloc::string::String> {
        Ok(())
    }
}

/// Period of [`Machine::check`].
pub const HEALTH_MS: u64 = 100;

/// What a worker's sleeper says about its sleeps ([`Machine::sleep_summary`]); `None`
/// where the machine does not know.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SleepSummary {
    /// Sleeps that waited in MONITOR/MWAIT on a receive queue (`core{i}_mwait_sleeps`).
    pub watched: u64,
    /// Nanoseconds off the CPU (the hosted sleeper's time inside `clock_nanosleep`;
    /// `core{i}_idle_ns`).
    pub idle_ns: Option<u64>,
    /// Nanoseconds spun on the CPU waiting for a deadline (`core{i}_spin_ns`).
    pub spin_ns: Option<u64>,
    /// Wake-up lateness (wake time − deadline), median and 99th percentile
    /// (`core{i}_late_p50_ns`, `core{i}_late_p99_ns`).
    pub late_p50_ns: Option<u64>,
    /// See `late_p50_ns`.
    pub late_p99_ns: Option<u64>,
}

/// A boot's nonce ([`Machine::boot_nonce`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BootNonce {
    /// The nonce.
    pub value: u64,
    /// Where its unpredictability came from (`rdrand`, `clock`, `getrandom`, …).
    pub source: &'static str,
}

/// A NIC whose queues the lanes take.
pub trait FwdPort: Port + 'static {
    /// A receive queue, moved into a lane.
    type Rx: RxQueue + Send + 'static;
    /// A transmit queue, moved into a lane.
    type Tx: TxQueue + Send + 'static;
    /// Moves every queue pair out of the port (pair `k` = receive queue `k`, transmit
    /// queue `k`); the port keeps its control path (MAC, RSS table, statistics).
    fn take_queues(&mut self) -> Vec<(Self::Rx, Self::Tx)>;
    /// Posts receive buffers from `pool` (the lane's); returns how many.
    fn fill(rx: &mut Self::Rx, pool: &mut Pool<'static>) -> usize;
    /// The RSS indirection table the device holds, if it does RSS.
    fn rss_table(&self) -> Option<Vec<u16>>;
    /// Entries of each receive ring as the device was set up (what Metronome's ring bound
    /// counts); `None`: the boot option `qsize` says.
    fn ring_entries(&self) -> Option<u32> {
        None
    }
}

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

/// Everything the workers share, leaked at start-up (`'static`, never freed).
struct Shared<M: Machine, P: FwdPort> {
    machine: &'static M,
    ctl: Metronome<Vec<LaneShare>>,
    lanes: Vec<Guarded<FwLane<P>>>,
    /// The NF chain every worker runs (its own instance) and their NF counters.
    chains: Chains,
    mode: Mode,
    /// How long one won round may drain its lane (`round_us`).
    round_budget: RoundBudget,
    clock: M::Clock,
    slots: Vec<Mutex<Slot>>,
    /// Set by whichever worker sees STOP, or by worker 0 at `max_s`.
    stop: AtomicBool,
    /// A STATS control frame asked for a `@stats` line.
    stats_requested: AtomicBool,
    /// An RSS command for worker 0: RSS_MOVE `1 << 16 | from << 8 | to`, RSS_RESTORE
    /// `2 << 16`, or 0.
    rss_move: AtomicU32,
    /// The tables before the last RSS_MOVE (for RSS_RESTORE).
    rss_saved: Mutex<Option<rss::Saved>>,
    /// Lanes whose queue holds no RSS entry on any port (bit `k`), after the last table
    /// change: the workers visit them only on sweeps (`Worker::set_parked`).
    parked_lanes: AtomicU64,
    /// Per worker: what its sleeper said at its last publication.
    sleeps: Vec<Mutex<SleepSummary>>,
    /// The server mapper's metering plan (`None`: the mapper is off), each worker's meter
    /// at its last publication, and the mapper's counters.
    meter_plan: Option<mapper::MeterPlan>,
    meters: Vec<Mutex<MeterSnapshot>>,
    mapper: Mutex<mapper::MapperCounters>,
    /// Why the mapper is off (`None`: on).
    mapper_off: Option<&'static str>,
    /// Per worker: its sojourn histogram at its last publication; and the SLO.
    latency: Vec<Mutex<Latency>>,
    slo: Duration,
    slo_us: u32,
    /// `@stats` lines skipped because the console was still busy.
    stats_skipped: AtomicU64,
    /// NetBlaze's auxiliary cores (`aux=`): what the dedicated workers' stages share, and
    /// each auxiliary core's links until it takes them; `None`/empty without.
    aux: Option<aux::Plan>,
    aux_parts: Vec<aux::Slot>,
    /// Workers that serve lanes (the first `dedicated`; the rest are auxiliary), and how
    /// many of them have left their loop.
    dedicated: usize,
    dedicated_done: AtomicUsize,
    /// Set once the lanes are settled at shutdown: the auxiliary workers may return.
    aux_exit: AtomicBool,
    /// Workers other than 0 that have returned.
    parked: AtomicUsize,
    /// Per worker: the clock at the end of its last round (its heartbeat), and its lane.
    heartbeats: Vec<AtomicU64>,
    last_lane: Vec<AtomicUsize>,
    /// Per worker: set for the span of each driver call it makes on a lane (what a take-over
    /// reads to know whether the lane's rings were left consistent).
    in_driver: Vec<Arc<AtomicBool>>,
    /// Workers stopped for good by [`Machine::fence`] (bit `w`).
    fenced: AtomicU64,
    /// Per lane: buffers out of its pool at rest (its receive rings'), and how often it was
    /// taken over from a stopped worker.
    lane_resting: Vec<usize>,
    takeovers: Vec<AtomicU64>,
    /// Buffers lost with stopped workers, found at shutdown (lanes taken over: their pools'
    /// shortfall from resting once their TX rings drained).
    stranded: AtomicU64,
    /// Workers reported stalled (bit `w`).
    stalled: AtomicU64,
    /// Stalls reported (`stalls=`).
    stalls: AtomicU64,
    /// A worker whose heartbeat is this old is stalled (0: watchdog off).
    stall_limit: Duration,
    /// Debug (`stall=W:MS[:round]`): worker `.0` stops at `.1`, inside a round if `.2`.
    inject_stall: Option<(usize, Instant, bool)>,
    /// Workers that could not make their sleeper.
    failed: AtomicUsize,
    /// When the run started (`t_ms=` of the lines) and when `max_s` ends it, if it does.
    started: Instant,
    max_deadline: Option<Instant>,
    /// `@summary` is out: the run is over (the watchdog returns).
    finished: AtomicBool,
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
/// `pools[k]` is lane `k`'s pool; `line_rate_pps` bounds `T_S` by the ring (SPEC §1 rule 7).
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
    if ports.len() != PORTS {
        say(machine, format_args!("error: forwarding needs 2 NICs, found {}", ports.len()));
        return Outcome::RuntimeFailure;
    }
    let own = [ports[0].mac(), ports[1].mac()];
    // The rings go to the lanes; the ports keep their control path (RSS table updates).
    let (q0, q1) = (ports[0].take_queues(), ports[1].take_queues());
    let lanes = q0.len().min(q1.len()).min(pools.len());
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
    for (k, ((mut pool, (r0, t0)), (r1, t1))) in pools.into_iter().zip(q0).zip(q1).take(lanes).enumerate() {
        let mut rx = [r0, r1];
        for r in &mut rx {
            P::fill(r, &mut pool);
        }
        resting += pool.in_use();
        lane_resting.push(pool.in_use());
        bound.push(Guarded::new(ctl.lanes()[k].lock(), Lane { rx, tx: [t0, t1], pool }));
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
        ctl,
        lanes: bound,
        chains,
        mode,
        round_budget: RoundBudget::new(RoundBudget::DEFAULT_POLLS, clock.rate().ticks_from_us(u64::from(cfg.round_us))),
        clock,
        slots: (0..cfg.workers).map(|_| Mutex::new(Slot::default())).collect(),
        stop: AtomicBool::new(false),
        stats_requested: AtomicBool::new(false),
        rss_move: AtomicU32::new(0),
        rss_saved: Mutex::new(None),
        parked_lanes: AtomicU64::new(0),
        sleeps: (0..cfg.workers).map(|_| Mutex::new(SleepSummary::default())).collect(),
        latency: (0..cfg.workers).map(|_| Mutex::new(Latency::default())).collect(),
        meters: mapper::slots(meter_plan.as_ref(), cfg.workers),
        meter_plan,
        mapper: Mutex::new(mapper::MapperCounters::default()),
        mapper_off,
        slo: clock.rate().ticks_from_us(u64::from(cfg.slo_us)),
        slo_us: cfg.slo_us,
        stats_skipped: AtomicU64::new(0),
        aux: aux_plan,
        aux_parts,
        dedicated,
        dedicated_done: AtomicUsize::new(0),
        aux_exit: AtomicBool::new(false),
        parked: AtomicUsize::new(0),
        failed: AtomicUsize::new(0),
        heartbeats: (0..cfg.workers).map(|_| AtomicU64::new(clock.now().ticks())).collect(),
        last_lane: (0..cfg.workers).map(|w| AtomicUsize::new(w % lanes)).collect(),
        stalled: AtomicU64::new(0),
        stalls: AtomicU64::new(0),
        stall_limit: clock.rate().ticks_from_ms(u64::from(cfg.stall_ms)),
        inject_stall: cfg.stall.map(|(w, ms)| {
            (usize::from(w), clock.now().saturating_add(clock.rate().ticks_from_ms(u64::from(ms))), cfg.stall_in_round)
        }),
        in_driver: (0..cfg.workers).map(|_| Arc::new(AtomicBool::new(false))).collect(),
        fenced: AtomicU64::new(0),
        lane_resting,
        takeovers: (0..lanes).map(|_| AtomicU64::new(0)).collect(),
        stranded: AtomicU64::new(0),
        started: started_at,
        max_deadline: (cfg.max_s > 0)
            .then(|| clock.now().saturating_add(clock.rate().ticks_from_ms(u64::from(cfg.max_s) * 1000))),
        finished: AtomicBool::new(false),
    }));

    machine.log(format_args!(
        "forward: {} workers on {lanes} lanes, sched={}, control frames {}",
        cfg.workers,
        mode.as_str(),
        match cfg.ctl {
            Some(0) => "on port 0 (signed)",
            Some(_) => "on port 1 (signed)",
            None => "off",
        }
    ));
    machine.event(Event::Started { workers: cfg.workers, lanes });

    let mut started = 1;
    for w in 1..cfg.workers {
        let job: Box<dyn FnOnce() + Send> = if w < dedicated {
            Box::new(move || worker(shared, w))
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
                shared.mapper_off.unwrap_or("on"),
                nonce.value,
                nonce.source
            ),
        );
        let mapper = plan.map(|p| mapper::Mapper::new(p, started_at, lanes));
        outcome = boot_worker(shared, cfg, &mut ports, mapper);
    }
    wind_down(shared, started, outcome)
}

/// Says so when the ring bound holds `T_S` below V̄ whatever the load (SPEC §1 rule 7):
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

/// A worker's pipeline: first lane `w mod lanes`, its own PRNG seed.
fn pipeline<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>, w: usize) -> Worker<NetBlazeStage> {
    let mut chain = sh.chains.for_worker();
    if let Some((who, at, true)) = sh.inject_stall
        && who == w
    {
        // Debug `stall=W:MS:round`: this worker hangs in its stage, holding its lane.
        chain.push_front(alloc::boxed::Box::new(chains::Hang { at, worker: w, machine: sh.machine }));
    }
    chain.set_meter(sh.meter_plan.and_then(|p| p.meter()));
    let wcfg = PollConfig::new(TX_RETRIES, Duration::ZERO).with_slo(sh.slo);
    let stage = aux::stage(sh.aux.as_ref(), chain, sh.machine.wake_hook());
    let in_driver = sh.in_driver.get(w).cloned().unwrap_or_default();
    Worker::new(sh.mode, w % sh.lanes.len(), w as u64 + 1, stage, wcfg)
        .partition(w, sh.dedicated)
        .with_budget(sh.round_budget)
        .with_lease(Holder::of(w as u32), in_driver)
}

/// Copies `pl`'s latency histogram into worker `w`'s slot (4 KiB: every [`PUBLISH_EVERY`]
/// rounds and at the end, not after every round); `wait` as for [`publish`].
fn publish_latency<M: Machine, P: FwdPort>(sh: &Shared<M, P>, w: usize, pl: &Worker<NetBlazeStage>, wait: bool) {
    if let Some(slot) = sh.latency.get(w) {
        let guard = if wait { Some(slot.lock()) } else { slot.try_lock() };
        if let Some(mut l) = guard {
            l.clone_from(pl.latency());
        }
    }
}

/// Copies `pl`'s counters into slot `w`; `wait`: also when the reporter holds it now.
fn publish<M: Machine, P: FwdPort>(sh: &Shared<M, P>, w: usize, pl: &Worker<NetBlazeStage>, wait: bool) {
    if let Some(slot) = sh.slots.get(w) {
        let guard = if wait { Some(slot.lock()) } else { slot.try_lock() };
        if let Some(mut s) = guard {
            *s = Slot { fwd: *pl.forwarding(), core: pl.stats(), nb: *pl.stage().counters(), ..*s };
        }
    }
    sh.chains.publish(w, pl.stage().chain(), wait);
}

/// Copies what worker `w`'s sleeper says into its slot (unless the reporter reads it now).
fn publish_sleeps<M: Machine, P: FwdPort>(sh: &Shared<M, P>, w: usize, sleeper: &M::Sleeper) {
    if let Some(mut s) = sh.sleeps.get(w).and_then(|s| s.try_lock()) {
        *s = M::sleep_summary(sleeper);
    }
}

/// A worker's own bookkeeping between rounds.
#[derive(Debug, Clone, Copy)]
struct Local {
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
fn step<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    w: usize,
    pl: &mut Worker<NetBlazeStage>,
    sleeper: &mut M::Sleeper,
    local: &mut Local,
) -> bool {
    pl.set_parked(sh.parked_lanes.load(Ordering::Relaxed));
    let r = pl.round(&sh.ctl, &sh.lanes, &sh.clock, sleeper);
    if let (Some(hb), Some(lane)) = (sh.heartbeats.get(w), sh.last_lane.get(w)) {
        hb.store(r.now.ticks(), Ordering::Relaxed);
        lane.store(r.lane, Ordering::Relaxed);
    }
    if let Some((who, at, false)) = sh.inject_stall
        && who == w
        && r.now >= at
    {
        // Debug `stall=`: this worker stops between rounds (holding no lane) for good.
        sh.machine.stall_forever(w);
    }
    if sh.stall_limit.ticks() != 0 && r.now >= local.next_watch {
        local.next_watch = r.now.saturating_add(sh.clock.rate().ticks_from_ms(HEALTH_MS));
        watch(sh, w, pl, r.now);
    }
    if r.commands.stop {
        sh.stop.store(true, Ordering::Release);
    }
    if r.commands.stats > 0 {
        sh.stats_requested.store(true, Ordering::Relaxed);
    }
    if let Some((from, to)) = r.commands.rss_move {
        sh.rss_move.store(1 << 16 | u32::from(from) << 8 | u32::from(to), Ordering::Relaxed);
    }
    if r.commands.rss_restore {
        sh.rss_move.store(2 << 16, Ordering::Relaxed);
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
fn watch<M: Machine, P: FwdPort>(sh: &Shared<M, P>, me: usize, pl: &mut Worker<NetBlazeStage>, now: Instant) {
    watchdog::check(sh, watchdog::Seer::Worker(me), now);
    let stalled = sh.stalled.load(Ordering::Acquire);
    let workers = sh.dedicated;
    let live = (0..workers).filter(|&v| v == me || v >= 64 || stalled & (1 << v) == 0).count();
    let rank = (0..me).filter(|&v| v >= 64 || stalled & (1 << v) == 0).count();
    pl.repartition(rank, live);
}

/// Worker `w` (≥ 1): runs rounds until the stop flag, publishes, returns.
fn worker<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>, w: usize) {
    match sh.machine.sleeper(w) {
        Ok(mut sleeper) => {
            let mut pl = pipeline(sh, w);
            let mut local = Local::new(sh);
            while step(sh, w, &mut pl, &mut sleeper, &mut local) {}
            sh.dedicated_done.fetch_add(1, Ordering::Release);
            // Counters are final: write them even if the reporter holds the slot for a moment.
            publish(sh, w, &pl, true);
            publish_latency(sh, w, &pl, true);
            mapper::publish(sh, w, &pl, true);
            if let Some(s) = sh.sleeps.get(w) {
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

/// Worker 0 on the calling core, plus the clock: `@stats`, `max_s`, RSS moves.
fn boot_worker<M: Machine, P: FwdPort>(
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
    let deadline = sh.max_deadline;
    let mut pl = pipeline(sh, 0);
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
        let asked = sh.stats_requested.swap(false, Ordering::Relaxed);
        if asked || next_stats.is_some_and(|t| now >= t) {
            if !report::line(sh, "@stats", start, now, false) {
                sh.stats_skipped.fetch_add(1, Ordering::Relaxed);
            }
            next_stats = next_stats.map(|t| t.saturating_add(period).max(now));
        }
        match sh.rss_move.swap(0, Ordering::Relaxed) {
            0 => {}
            mv if mv >> 16 == 2 => {
                let _ = rss::restore(sh, &mut pl, ports);
            }
            mv => {
                let _ = rss::move_buckets(sh, &mut pl, ports, (mv >> 8) as u8, mv as u8);
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
    sh.dedicated_done.fetch_add(1, Ordering::Release);
    if sh.aux.is_some() && !settle_lanes(sh, &mut pl) {
        outcome = Outcome::RuntimeFailure;
    }
    publish(sh, 0, &pl, true);
    publish_latency(sh, 0, &pl, true);
    mapper::publish(sh, 0, &pl, true);
    if let Some(s) = sh.sleeps.first() {
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
fn settle_lanes<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>, pl: &mut Worker<NetBlazeStage>) -> bool {
    let m = sh.machine;
    let rate = sh.clock.rate();
    // A dedicated worker that does not leave (stalled) is reported by `wind_down`.
    let _ = poll_until(&sh.clock, rate.ticks_from_ms(PARK_TIMEOUT_MS), || {
        sh.dedicated_done.load(Ordering::Acquire) >= sh.dedicated
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
            if sh.takeovers.get(k).is_some_and(|t| t.load(Ordering::Relaxed) > 0) {
                let resting = sh.lane_resting.get(k).copied().unwrap_or(0);
                let lost = lane.pool.in_use().saturating_sub(resting) as u64;
                sh.stranded.fetch_add(lost, Ordering::Relaxed);
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
