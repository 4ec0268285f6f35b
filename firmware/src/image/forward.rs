//! The forwarding run: `workers` cores share `lanes` lanes through the Metronome
//! controller (`core::pipeline`), port 0 ↔ port 1, until a STOP control frame (exit 33)
//! or `max_s` (exit 37).
//!
//! Lane `k` is queue pair `k` of both NICs plus its own buffer pool; it is bound to the
//! controller's lock `k`. Worker 0 runs on the boot core and also keeps the clock: the
//! periodic `@stats` line, `max_s`, and, once any worker has seen STOP, the wind-down —
//! every other worker notices the shared stop flag after its current round (at most
//! `T_L` later), publishes its counters and parks; worker 0 then drains the TX rings and
//! prints `@summary`.
//!
//! Counters cross cores through one slot per worker, published with a non-blocking
//! `try_lock` after rounds that moved packets (and every [`PUBLISH_EVERY`] rounds), so no
//! worker ever waits for the reporter.

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use cadence_core::buf::Pool;
use cadence_core::forward::PORTS;
use cadence_core::metronome::{Metronome, MetronomeConfig, QueueState};
use cadence_core::nf::Chain;
use cadence_core::nf::config::ChainSpec;
use cadence_core::nic::{Port, TxQueue};
use cadence_core::pipeline::{CoreStats, Lane, Mode, Pipeline};
use cadence_core::sync::Guarded;
use cadence_core::time::{Clock, Duration, Instant, poll_until};
use cadence_core::worker::{DriverCounters, WorkerConfig, WorkerStats};
use cadence_firmware::config::{BootConfig, Sched};
use cadence_platform::Platform;
use cadence_platform::clock::TscClock;
use cadence_platform::exit::{ExitCode, exit};
use cadence_platform::println;
use cadence_platform::sleep::{HaltSleeper, SleepConfig};
use cadence_platform::smp::{self, SmpConfig};
use spin::Mutex;

use super::chain::Chains;
use super::nics::{Nic, NicRx, NicTx};

/// Extra `tx_burst` attempts for frames a full TX ring did not take, within one poll.
const TX_RETRIES: u32 = 4;
/// How long the wind-down waits for the TX rings to drain.
const DRAIN_MS: u64 = 100;
/// Rounds between counter publications of a worker whose rounds move nothing.
const PUBLISH_EVERY: u64 = 64;
/// Hang guard for the other workers to park after STOP (they notice within `T_L`).
const PARK_TIMEOUT_MS: u64 = 2_000;

type FwLane = Lane<'static, NicRx<'static>, NicTx<'static>>;

/// One worker's published counters.
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    fwd: WorkerStats,
    core: CoreStats,
}

/// Everything the workers share, leaked at start-up (`'static`, never freed).
struct Shared {
    ctl: Metronome<Vec<QueueState>>,
    lanes: Vec<Guarded<FwLane>>,
    /// The NF chain every worker runs (its own instance) and their NF counters.
    chains: Chains,
    mode: Mode,
    clock: TscClock,
    slots: Vec<Mutex<Slot>>,
    /// Set by whichever worker sees STOP, or by worker 0 at `max_s`.
    stop: AtomicBool,
    /// A STATS control frame asked for a `@stats` line.
    stats_requested: AtomicBool,
    /// An RSS_MOVE control frame asked to steer queue `from`'s buckets to `to`:
    /// `1 << 16 | from << 8 | to`, or 0.
    rss_move: AtomicU32,
    /// How every worker's sleeper waits (`mwait=`).
    sleep: SleepConfig,
    /// Per worker: sleeps that waited in MONITOR/MWAIT on a receive queue.
    mwait_sleeps: Vec<AtomicU64>,
    /// Workers other than 0 that have parked.
    parked: AtomicUsize,
}

/// Forwards until STOP (exit 33) or `max_s` (exit 37).
pub fn run(
    p: &Platform,
    cfg: &BootConfig,
    pools: Vec<Pool<'static>>,
    ports: heapless::Vec<Nic, 2>,
    spec: &ChainSpec,
) -> ! {
    if ports.len() != PORTS {
        println!("error: forwarding needs 2 NICs, found {}", ports.len());
        exit(ExitCode::RuntimeFailure)
    }
    let mut ports = ports;
    let own = [ports[0].mac(), ports[1].mac()];
    // The rings go to the lanes; the ports keep their control path (RSS table updates).
    let (q0, q1) = (ports[0].take_queues(), ports[1].take_queues());
    let lanes = q0.len().min(q1.len()).min(pools.len());
    if lanes < cfg.lanes {
        println!("warning: lanes={} asked, the NICs give {lanes} queue pairs", cfg.lanes);
    }
    if lanes == 0 {
        println!("error: no queue pair to forward on");
        exit(ExitCode::RuntimeFailure)
    }

    let cores = match smp::start_aps(p, &SmpConfig::default()) {
        Ok(c) => c,
        Err(e) => {
            println!("error: smp: {e}");
            exit(ExitCode::RuntimeFailure)
        }
    };
    if cores.online() < cfg.workers {
        println!("error: workers={} but only {} cores are online", cfg.workers, cores.online());
        exit(ExitCode::RuntimeFailure)
    }

    let mut mcfg = MetronomeConfig::default();
    mcfg.target_vacation_ns = u64::from(cfg.vbar_us) * 1_000;
    mcfg.long_timeout_ns = u64::from(cfg.tl_us) * 1_000;
    mcfg.initial_short_timeout_ns = u64::from(cfg.ts0_us) * 1_000;
    mcfg.ewma_weight = f64::from(cfg.ewma_permille) / 1000.0;
    mcfg.vacation_feedback_gain = f64::from(cfg.feedback_permille) / 1000.0;
    mcfg.ring_descriptors = u32::from(cfg.qsize);
    let ctl = match Metronome::with_queues(&mcfg, p.clock.rate(), cfg.workers, lanes) {
        Ok(c) => c,
        Err(e) => {
            println!("error: metronome: {e}");
            exit(ExitCode::ConfigError)
        }
    };
    // The controller's queue locks live in its Vec's heap buffer: their addresses are
    // fixed from here on, so the lanes can be bound to them.
    let mut bound = Vec::with_capacity(lanes);
    for (k, ((mut pool, (r0, t0)), (r1, t1))) in pools.into_iter().zip(q0).zip(q1).take(lanes).enumerate() {
        let mut rx = [r0, r1];
        for r in &mut rx {
            r.fill(&mut pool);
        }
        bound.push(Guarded::new(ctl.queues()[k].lock(), Lane { rx, tx: [t0, t1], pool }));
    }
    let mode = match cfg.sched {
        Sched::Metronome => Mode::Metronome,
        Sched::Poll => Mode::Poll,
    };
    let shared: &'static Shared = Box::leak(Box::new(Shared {
        ctl,
        lanes: bound,
        chains: Chains::build(spec, cfg, own, cfg.workers, p.clock.rate()),
        mode,
        clock: p.clock,
        slots: (0..cfg.workers).map(|_| Mutex::new(Slot::default())).collect(),
        stop: AtomicBool::new(false),
        stats_requested: AtomicBool::new(false),
        rss_move: AtomicU32::new(0),
        sleep: {
            let mut c = SleepConfig::default();
            c.mwait = cfg.mwait;
            c
        },
        mwait_sleeps: (0..cfg.workers).map(|_| AtomicU64::new(0)).collect(),
        parked: AtomicUsize::new(0),
    }));

    println!(
        "forward: {} workers on {lanes} lanes, sched={}, control frames {}",
        cfg.workers,
        mode.as_str(),
        if cfg.ctl { "on" } else { "off" }
    );
    defmt::info!("forwarding started: {=usize} workers, {=usize} lanes", cfg.workers, lanes);

    // Workers 1.. on the next online cores; worker 0 is this (boot) core.
    for (w, c) in (1..cfg.workers).zip(cores.iter().skip(1).filter(|c| c.is_online())) {
        if let Err(e) = cores.run(c.id(), move |_ctx| ap_worker(shared, w)) {
            println!("error: core {}: {e}", c.id());
            exit(ExitCode::RuntimeFailure)
        }
    }
    // Every lane's receive rings are filled and every worker is running: traffic may come.
    println!("@ready workers={} lanes={lanes} mwait={}", cfg.workers, if cfg.mwait { "on" } else { "off" });
    let code = boot_worker(shared, cfg, &mut ports);
    wind_down(shared, cfg.workers, &cores, code)
}

/// A worker's pipeline: first lane `w mod lanes`, its own PRNG seed.
fn pipeline(sh: &Shared, w: usize) -> Pipeline<Chain> {
    let stage = sh.chains.for_worker();
    Pipeline::new(sh.mode, w % sh.lanes.len(), w as u64 + 1, stage, WorkerConfig::new(TX_RETRIES, Duration::ZERO))
        .partition(w, sh.slots.len())
}

/// Copies `pl`'s counters into slot `w` unless the reporter is reading it right now.
fn publish(sh: &Shared, w: usize, pl: &Pipeline<Chain>) {
    if let Some(mut slot) = sh.slots.get(w).and_then(|s| s.try_lock()) {
        *slot = Slot { fwd: *pl.forwarding(), core: pl.stats() };
    }
    sh.chains.publish(w, pl.stage(), false);
}

/// One round plus the bookkeeping every worker does; returns whether to go on.
fn step(sh: &Shared, w: usize, pl: &mut Pipeline<Chain>, sleeper: &mut HaltSleeper, rounds: &mut u64) -> bool {
    let r = pl.round(&sh.ctl, &sh.lanes, &sh.clock, sleeper);
    if let Some(m) = sh.mwait_sleeps.get(w) {
        m.store(sleeper.watched_sleeps(), Ordering::Relaxed);
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
    *rounds += 1;
    let stopping = sh.stop.load(Ordering::Acquire);
    if r.packets > 0 || (*rounds).is_multiple_of(PUBLISH_EVERY) || stopping {
        publish(sh, w, pl);
    }
    !stopping
}

/// Worker `w` on an application core: runs rounds until the stop flag, then parks.
fn ap_worker(sh: &'static Shared, w: usize) {
    let mut sleeper = match HaltSleeper::new(sh.sleep) {
        Ok(s) => s,
        Err(e) => {
            println!("error: worker {w}: sleeper: {e}");
            sh.stop.store(true, Ordering::Release);
            sh.parked.fetch_add(1, Ordering::Release);
            return;
        }
    };
    let mut pl = pipeline(sh, w);
    let mut rounds = 0;
    while step(sh, w, &mut pl, &mut sleeper, &mut rounds) {}
    // Counters are final: write them even if the reporter holds the slot for a moment.
    if let Some(slot) = sh.slots.get(w) {
        *slot.lock() = Slot { fwd: *pl.forwarding(), core: pl.stats() };
    }
    sh.chains.publish(w, pl.stage(), true);
    sh.parked.fetch_add(1, Ordering::Release);
}

/// Worker 0 on the boot core, plus the clock: `@stats`, `max_s`. Returns the exit code.
fn boot_worker(sh: &'static Shared, cfg: &BootConfig, ports: &mut [Nic]) -> ExitCode {
    let mut sleeper = match HaltSleeper::new(sh.sleep) {
        Ok(s) => s,
        Err(e) => {
            println!("error: worker 0: sleeper: {e}");
            exit(ExitCode::RuntimeFailure)
        }
    };
    let clock = sh.clock;
    let rate = clock.rate();
    let start = clock.now();
    let period = rate.ticks_from_ms(u64::from(cfg.stats_ms));
    let mut next_stats = (cfg.stats_ms > 0).then(|| start.saturating_add(period));
    let deadline = (cfg.max_s > 0).then(|| start.saturating_add(rate.ticks_from_ms(u64::from(cfg.max_s) * 1000)));
    let mut pl = pipeline(sh, 0);
    let mut rounds = 0;
    let mut code = ExitCode::Success;
    while step(sh, 0, &mut pl, &mut sleeper, &mut rounds) {
        let now = clock.now();
        let asked = sh.stats_requested.swap(false, Ordering::Relaxed);
        if asked || next_stats.is_some_and(|t| now >= t) {
            report_line(sh, "@stats", start, now);
            next_stats = next_stats.map(|t| t.saturating_add(period).max(now));
        }
        let mv = sh.rss_move.swap(0, Ordering::Relaxed);
        if mv != 0 {
            rss_move(sh, &mut pl, ports, (mv >> 8) as u8, mv as u8);
        }
        if deadline.is_some_and(|d| now >= d) {
            println!("error: max_s={} reached without a STOP control frame", cfg.max_s);
            sh.stop.store(true, Ordering::Release);
            code = ExitCode::RuntimeFailure;
        }
    }
    if let Some(slot) = sh.slots.first() {
        *slot.lock() = Slot { fwd: *pl.forwarding(), core: pl.stats() };
    }
    sh.chains.publish(0, pl.stage(), true);
    code
}

/// Hang guard for taking every lane's lock before an RSS change (workers hold a lane
/// for one busy period).
const RSS_LOCK_MS: u64 = 500;

/// Steers every RSS bucket of queue `from` to queue `to` on both ports, live, without
/// reordering any flow (SPEC §2: "drain the old queue past the switch point before the
/// new queue serves that bucket"):
/// 1. take every lane's lock, so no worker serves any queue meanwhile;
/// 2. write the new table on both ports (the drivers return once the device has it);
/// 3. drain lane `from` — frames that arrived before the switch — through this core's
///    stage, until its queues are empty; frames of moved flows that arrive after the
///    switch wait in lane `to`;
/// 4. release the locks.
///
/// Prints `@rss moved from=… to=… buckets=…` (or `@rss failed …`).
fn rss_move(sh: &Shared, pl: &mut Pipeline<Chain>, ports: &mut [Nic], from: u8, to: u8) {
    let lanes = sh.lanes.len();
    if from == to || usize::from(from) >= lanes || usize::from(to) >= lanes {
        println!("@rss failed from={from} to={to} reason=bad_queue lanes={lanes}");
        return;
    }
    let clock = sh.clock;
    let deadline = clock.now().saturating_add(clock.rate().ticks_from_ms(RSS_LOCK_MS));
    let mut guards = Vec::with_capacity(lanes);
    for q in sh.ctl.queues() {
        loop {
            if let Some(g) = q.lock().try_lock() {
                guards.push(g);
                break;
            }
            if clock.now() >= deadline {
                println!("@rss failed from={from} to={to} reason=lanes_busy");
                return; // Dropping `guards` releases what was taken.
            }
            core::hint::spin_loop();
        }
    }
    let mut moved = 0;
    for port in ports.iter_mut() {
        let Some(mut table) = port.rss_table() else {
            println!("@rss failed from={from} to={to} reason=no_rss");
            return;
        };
        for e in table.iter_mut().filter(|e| **e == u16::from(from)) {
            *e = u16::from(to);
            moved += 1;
        }
        if let Err(e) = port.set_rss_table(&table) {
            println!("@rss failed from={from} to={to} reason={e}");
            return;
        }
    }
    let mut drained = 0;
    if let (Some(guard), Some(lane)) = (guards.get_mut(usize::from(from)), sh.lanes.get(usize::from(from)))
        && let Some(lane) = lane.get_mut(guard)
    {
        let (n, cmds) = pl.drain_lane(lane, &clock);
        drained = n;
        // Commands met while draining count like any other.
        if cmds.stop {
            sh.stop.store(true, Ordering::Release);
        }
        if cmds.stats > 0 {
            sh.stats_requested.store(true, Ordering::Relaxed);
        }
    }
    drop(guards);
    publish(sh, 0, pl);
    println!("@rss moved from={from} to={to} buckets={moved} drained={drained}");
}

/// After STOP: waits for the other workers to park, drains TX, prints `@summary`, exits.
fn wind_down(sh: &'static Shared, workers: usize, cores: &smp::Cores, code: ExitCode) -> ! {
    println!("forward: stopping");
    let clock = sh.clock;
    let rate = clock.rate();
    let start = clock.now();
    if poll_until(&clock, rate.ticks_from_ms(PARK_TIMEOUT_MS), || sh.parked.load(Ordering::Acquire) + 1 >= workers)
        .is_err()
    {
        println!("warning: {} of {} workers parked", sh.parked.load(Ordering::Acquire), workers - 1);
    }
    // Cores that ran a worker are idle again (their job returned).
    for c in cores.iter().skip(1).take(workers.saturating_sub(1)) {
        let _ = cores.wait_idle(c.id(), rate.ticks_from_ms(10));
    }
    for (k, lane) in sh.lanes.iter().enumerate() {
        let Some(mut guard) = sh.ctl.queues()[k].lock().try_lock() else {
            println!("warning: lane {k} still held; not drained");
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
                println!("warning: lane {k}: TX not drained after {DRAIN_MS} ms");
            }
        }
    }
    report_line(sh, "@summary", start, clock.now());
    defmt::info!("forwarding done");
    exit(code)
}

/// Prints one `@stats`/`@summary` line: the forwarding counters summed over workers, the
/// driver counters summed over lanes, then per-core and per-lane keys
/// (docs/PROTOCOL.md).
fn report_line(sh: &Shared, tag: &str, start: Instant, now: Instant) {
    let rate = sh.clock.rate();
    let mut total = WorkerStats::default();
    let mut per_core: heapless::Vec<CoreStats, 64> = heapless::Vec::new();
    for slot in &sh.slots {
        let s = *slot.lock();
        total.merge(&s.fwd);
        let _ = per_core.push(s.core);
    }
    let mut drv = DriverCounters::default();
    for (k, lane) in sh.lanes.iter().enumerate() {
        // A lane held by a worker right now is skipped: the line is a snapshot, and
        // waiting for the lock would stall the reporter behind a busy period.
        let Some(mut guard) = sh.ctl.queues()[k].lock().try_lock() else { continue };
        if let Some(lane) = lane.get_mut(&mut guard) {
            let d = DriverCounters::from_queues(&lane.rx, &lane.pool);
            for p in 0..PORTS {
                drv.rx_err[p] += d.rx_err[p];
                drv.no_buf[p] += d.no_buf[p];
            }
            drv.pool_in_use += d.pool_in_use;
        }
    }
    let t_ms = rate.ns(now.saturating_since(start)) / 1_000_000;
    cadence_platform::serial::console(|uart| {
        use core::fmt::Write;
        // Console writes cannot fail; a lost line is all a failure could cost.
        let _ = write!(uart, "{tag} t_ms={t_ms} ");
        let _ = total.write_counters(uart, &drv);
        let _ = sh.chains.write_summed(uart);
        let _ = write!(uart, " workers={} lanes={}", per_core.len(), sh.lanes.len());
        for (i, c) in per_core.iter().enumerate() {
            let _ = write!(
                uart,
                " core{i}_busy_cycles={} core{i}_halted_cycles={} core{i}_tries={} core{i}_wins={} \
                 core{i}_busy_tries={} core{i}_packets={} core{i}_mwait_sleeps={}",
                c.busy_ticks(),
                c.halted_ticks,
                c.tries,
                c.wins,
                c.busy_tries,
                c.packets,
                sh.mwait_sleeps.get(i).map_or(0, |m| m.load(Ordering::Relaxed))
            );
        }
        for (k, q) in sh.ctl.queues().iter().enumerate() {
            let s = q.snapshot();
            let _ = write!(
                uart,
                " lane{k}_rho_permille={} lane{k}_ts_ns={} lane{k}_vac_mean_ns={} lane{k}_vac_p99_ns={} \
                 lane{k}_wins={} lane{k}_busy_tries={} lane{k}_packets={}",
                (s.rho * 1000.0) as u64,
                rate.ns(s.short_timeout),
                s.vacation_mean().map_or(0, |v| rate.ns(Duration(v as u64))),
                s.vacation_p99().map_or(0, |v| rate.ns(Duration(v))),
                s.wins,
                s.busy_tries,
                s.packets
            );
        }
        let _ = uart.write_str("\n");
    });
}
