//! Metronome in virtual time (seed paper §IV–V).
//!
//! M workers share N receive queues through the very controller the firmware runs
//! ([`cadence_core::metronome`]): the same trylock, estimator, `T_S` rule and roles. The model
//! around it:
//!
//! - **Queues.** A FIFO ring of `ring_depth` descriptors per queue; an arrival that finds the
//!   ring full is dropped. Arrivals are Poisson or constant-rate at `λ = ρ_offered·μ` per queue,
//!   where `ρ_offered` may follow a triangle over time (the ramp of the paper's Fig. 9).
//! - **Service.** A worker that wins a queue drains it to empty: packets one after another, each
//!   taking a deterministic or exponential service time of mean `1/μ`; packets that arrive while
//!   it works are served in the same busy period; a last empty `rx_burst` (`poll_cost`) ends it.
//!   The lock is held for the whole busy period, so a worker waking on that queue meanwhile loses.
//! - **Wake-ups.** Every sleep (the `T_S` or `T_L` the controller returns) is stretched by a
//!   random wake-up jitter; every round costs `wake_cost` of CPU (timer interrupt, re-arming,
//!   TX flush) on top of the busy period.
//!
//! Time is in nanoseconds (a 1 GHz tick rate for the controller). There is no warm-up cut:
//! the estimator settles within a few dozen busy periods, runs last thousands.

use std::collections::VecDeque;

use cadence_core::hist::LogHistogram;
use cadence_core::metronome::{Attempt, LaneSnapshot, Metronome, MetronomeConfig, Scheduler, Session, WorkerStats};
use cadence_core::time::{Duration, Instant, TickRate};

use crate::rng::Rng;

/// Inter-arrival process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Arrivals {
    /// Exponential gaps.
    Poisson,
    /// Equal gaps `1/λ`.
    Constant,
}

/// Per-packet service time distribution (mean `service_ns`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Service {
    /// Every packet takes exactly `service_ns`.
    Deterministic,
    /// Exponential with mean `service_ns`.
    Exponential,
}

/// Extra delay added to every sleep before the core runs again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Jitter {
    /// Wake exactly on the deadline.
    None,
    /// Uniform in `[0, max_ns)`.
    Uniform {
        /// Upper end.
        max_ns: f64,
    },
    /// Exponential with mean `mean_ns`.
    Exponential {
        /// Mean.
        mean_ns: f64,
    },
}

/// Offered load per queue `ρ_offered = λ/μ` over time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LoadProfile {
    /// The same load throughout.
    Constant(f64),
    /// From `low` up to `peak` at half the run and back to `low` at its end (Fig. 9's ramp).
    Triangle {
        /// Load at the start and the end.
        low: f64,
        /// Load at the middle.
        peak: f64,
    },
}

impl LoadProfile {
    /// The offered load at `t` of a run lasting `duration`.
    pub fn at(&self, t: f64, duration: f64) -> f64 {
        match *self {
            LoadProfile::Constant(l) => l,
            LoadProfile::Triangle { low, peak } => {
                let x = if duration > 0.0 { (t / duration).clamp(0.0, 1.0) } else { 0.0 };
                low + (peak - low) * (1.0 - (2.0 * x - 1.0).abs())
            }
        }
    }
}

/// One simulation run.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// M, worker cores.
    pub workers: usize,
    /// N, receive queues.
    pub queues: usize,
    /// Offered load per queue.
    pub load: LoadProfile,
    /// Arrival process.
    pub arrivals: Arrivals,
    /// Service time distribution.
    pub service: Service,
    /// Mean service time per packet, `1/μ`, in ns.
    pub service_ns: f64,
    /// Ring depth D in descriptors. The controller's ring bound is derived from it: `D` and
    /// `R = μ` (a ring fills fastest when packets arrive at the service capacity).
    pub ring_depth: usize,
    /// Wake-up jitter added to every sleep.
    pub jitter: Jitter,
    /// CPU time per round besides the busy period (ns).
    pub wake_cost_ns: u64,
    /// The empty `rx_burst` that ends a busy period (ns).
    pub poll_cost_ns: u64,
    /// Simulated time (ns).
    pub duration_ns: u64,
    /// Seed of every random stream.
    pub seed: u64,
    /// The controller's knobs (its ring-bound fields are overwritten from `ring_depth`/`service_ns`).
    pub controller: MetronomeConfig,
    /// Record `(ρ, T_S)` of each queue at most once per this interval (ns).
    pub trace_interval_ns: Option<u64>,
}

impl Default for SimConfig {
    /// M = 3, N = 1, ρ = 0.5 Poisson, deterministic 0.5 µs service (2 Mpps per queue), a
    /// 1024-descriptor ring, uniform wake-up jitter below 1 µs, 0.5 µs per round, 0.1 µs per
    /// empty poll, 0.5 s, default controller (V̄ = 15 µs, T_L = 500 µs).
    fn default() -> Self {
        Self {
            workers: 3,
            queues: 1,
            load: LoadProfile::Constant(0.5),
            arrivals: Arrivals::Poisson,
            service: Service::Deterministic,
            service_ns: 500.0,
            ring_depth: 1024,
            jitter: Jitter::Uniform { max_ns: 1_000.0 },
            wake_cost_ns: 500,
            poll_cost_ns: 100,
            duration_ns: 500_000_000,
            seed: 1,
            controller: MetronomeConfig::default(),
            trace_interval_ns: None,
        }
    }
}

/// One point of a queue's `T_S` trajectory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TracePoint {
    /// Time (ns).
    pub t_ns: u64,
    /// Queue.
    pub queue: usize,
    /// Offered load at `t_ns`.
    pub offered: f64,
    /// The controller's estimate ρ.
    pub rho: f64,
    /// `T_S` just computed (ns).
    pub short_timeout_ns: u64,
}

/// One worker's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerResult {
    /// (busy + polling) time / run time.
    pub cpu_share: f64,
    /// The controller's counters for this worker.
    pub stats: WorkerStats,
}

/// One queue's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueResult {
    /// The controller's view: ρ, `T_S`, vacations, busy tries.
    pub snapshot: LaneSnapshot,
    /// Mean of the `T_S` values computed at each release (ns).
    pub mean_short_timeout_ns: f64,
    /// Packets that arrived.
    pub arrived: u64,
    /// Packets dropped on a full ring.
    pub dropped: u64,
    /// Packets served.
    pub served: u64,
}

/// Everything a run measured.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Per worker.
    pub workers: Vec<WorkerResult>,
    /// Per queue.
    pub queues: Vec<QueueResult>,
    /// Packet latency (arrival to end of its service), ns.
    pub latency: LogHistogram,
    /// `(ρ, T_S)` over time, if asked for.
    pub trace: Vec<TracePoint>,
    /// Simulated time (ns).
    pub duration_ns: u64,
}

impl RunResult {
    /// Mean CPU share over the workers (1.0 = every worker busy all the time).
    pub fn cpu_share(&self) -> f64 {
        self.cpu_cores() / self.workers.len().max(1) as f64
    }

    /// Sum of the workers' CPU shares, in cores.
    pub fn cpu_cores(&self) -> f64 {
        self.workers.iter().map(|w| w.cpu_share).sum()
    }

    /// Mean measured vacation over all queues (ns).
    pub fn vacation_mean_ns(&self) -> f64 {
        let (s, n) = self
            .queues
            .iter()
            .fold((0u64, 0u64), |(s, n), q| (s + q.snapshot.vacation_sum_ticks, n + q.snapshot.vacations));
        if n == 0 { 0.0 } else { s as f64 / n as f64 }
    }

    /// 99th percentile of the measured vacation over all queues (ns).
    pub fn vacation_p99_ns(&self) -> f64 {
        let mut h = LogHistogram::new();
        for q in &self.queues {
            h.merge(&q.snapshot.vacation_histogram);
        }
        h.quantile(0.99).unwrap_or(0) as f64
    }

    /// Lost tries / tries, over all workers.
    pub fn busy_try_ratio(&self) -> f64 {
        let (lost, tries) =
            self.workers.iter().fold((0u64, 0u64), |(l, t), w| (l + w.stats.busy_tries, t + w.stats.tries));
        if tries == 0 { 0.0 } else { lost as f64 / tries as f64 }
    }

    /// Mean `T_S` over all releases (ns).
    pub fn mean_short_timeout_ns(&self) -> f64 {
        let (s, n) = self
            .queues
            .iter()
            .fold((0.0, 0u64), |(s, n), q| (s + q.mean_short_timeout_ns * q.snapshot.wins as f64, n + q.snapshot.wins));
        if n == 0 { 0.0 } else { s / n as f64 }
    }

    /// Final load estimate, averaged over queues.
    pub fn rho_estimate(&self) -> f64 {
        self.queues.iter().map(|q| q.snapshot.rho).sum::<f64>() / self.queues.len().max(1) as f64
    }

    /// Packets dropped on full rings.
    pub fn dropped(&self) -> u64 {
        self.queues.iter().map(|q| q.dropped).sum()
    }

    /// Packets that arrived.
    pub fn arrived(&self) -> u64 {
        self.queues.iter().map(|q| q.arrived).sum()
    }

    /// Packets served.
    pub fn served(&self) -> u64 {
        self.queues.iter().map(|q| q.served).sum()
    }
}

/// One simulated receive queue.
struct SimQueue {
    ring: VecDeque<u64>,
    depth: usize,
    /// Time of the next arrival (ns, fractional to avoid drift).
    next_arrival: f64,
    arrivals: Rng,
    service: Rng,
    arrived: u64,
    dropped: u64,
    served: u64,
    ts_sum: f64,
    ts_count: u64,
    last_trace: Option<u64>,
}

impl SimQueue {
    fn new(cfg: &SimConfig, index: usize) -> Self {
        let mut q = Self {
            ring: VecDeque::with_capacity(cfg.ring_depth.min(1 << 16)),
            depth: cfg.ring_depth,
            next_arrival: 0.0,
            arrivals: Rng::new(cfg.seed, 1000 + index as u64),
            service: Rng::new(cfg.seed, 2000 + index as u64),
            arrived: 0,
            dropped: 0,
            served: 0,
            ts_sum: 0.0,
            ts_count: 0,
            last_trace: None,
        };
        q.next_arrival = q.gap(cfg, 0.0);
        q
    }

    /// Time to the next arrival after one at `t`.
    fn gap(&mut self, cfg: &SimConfig, t: f64) -> f64 {
        let load = cfg.load.at(t, cfg.duration_ns as f64);
        if load <= 0.0 || cfg.service_ns <= 0.0 {
            return 1_000_000.0; // look again in 1 ms
        }
        let mean = cfg.service_ns / load;
        match cfg.arrivals {
            Arrivals::Poisson => self.arrivals.exp(mean),
            Arrivals::Constant => mean,
        }
    }

    /// Enqueues every arrival up to and including `t`; a full ring drops.
    fn advance(&mut self, cfg: &SimConfig, t: u64) {
        while self.next_arrival <= t as f64 {
            let a = self.next_arrival;
            self.arrived += 1;
            if self.ring.len() >= self.depth {
                self.dropped += 1;
            } else {
                self.ring.push_back(a as u64);
            }
            self.next_arrival = a + self.gap(cfg, a);
        }
    }

    /// Drains the queue from `start` until it is empty; returns the release time and packets.
    fn busy_period(&mut self, cfg: &SimConfig, start: u64, latency: &mut LogHistogram) -> (u64, u64) {
        let mut t = start;
        let mut packets = 0;
        loop {
            self.advance(cfg, t);
            let Some(arrival) = self.ring.pop_front() else {
                return (t + cfg.poll_cost_ns, packets);
            };
            let s = match cfg.service {
                Service::Deterministic => cfg.service_ns,
                Service::Exponential => self.service.exp(cfg.service_ns),
            };
            t += (s.round() as u64).max(1);
            latency.record(t - arrival);
            packets += 1;
            self.served += 1;
        }
    }
}

/// What a simulated worker does next.
enum Next {
    Wake,
    Release,
}

/// One simulated core.
struct SimWorker<'q> {
    core: Scheduler,
    next: u64,
    what: Next,
    session: Option<Session<'q>>,
    packets: u64,
    active: u64,
    jitter: Rng,
}

fn jitter(cfg: &SimConfig, rng: &mut Rng) -> u64 {
    match cfg.jitter {
        Jitter::None => 0,
        Jitter::Uniform { max_ns } => (rng.uniform() * max_ns.max(0.0)) as u64,
        Jitter::Exponential { mean_ns } => rng.exp(mean_ns.max(0.0)) as u64,
    }
}

/// Runs one simulation.
pub fn run(cfg: &SimConfig) -> anyhow::Result<RunResult> {
    anyhow::ensure!(cfg.service_ns > 0.0 && cfg.service_ns.is_finite(), "service_ns must be positive");
    anyhow::ensure!(cfg.ring_depth > 0, "ring_depth must be positive");
    let rate = TickRate::try_new(1_000_000_000).ok_or_else(|| anyhow::anyhow!("tick rate"))?;
    let mut mc = cfg.controller;
    mc.ring_descriptors = u32::try_from(cfg.ring_depth).unwrap_or(u32::MAX);
    mc.line_rate_pps = (1e9 / cfg.service_ns).round() as u64;
    let ctl = Metronome::with_lanes(&mc, rate, cfg.workers, cfg.queues)
        .map_err(|e| anyhow::anyhow!("metronome config: {e}"))?;

    let mut queues: Vec<SimQueue> = (0..cfg.queues).map(|i| SimQueue::new(cfg, i)).collect();
    let mut latency = LogHistogram::new();
    let mut trace = Vec::new();
    let first = ctl.params().initial_short_timeout().ticks().max(1);
    let mut workers: Vec<SimWorker<'_>> = (0..cfg.workers)
        .map(|i| {
            let mut j = Rng::new(cfg.seed, 3000 + i as u64);
            // Random phases within the first T_S.
            let next = (j.uniform() * first as f64) as u64;
            SimWorker {
                core: Scheduler::new(i % cfg.queues, cfg.seed.wrapping_mul(31).wrapping_add(i as u64)),
                next,
                what: Next::Wake,
                session: None,
                packets: 0,
                active: 0,
                jitter: j,
            }
        })
        .collect();

    // The earliest event; ties go to the lower worker index.
    while let Some((i, t)) = workers.iter().enumerate().map(|(i, w)| (i, w.next)).min_by_key(|&(i, t)| (t, i)) {
        if t >= cfg.duration_ns {
            break;
        }
        let w = &mut workers[i];
        match w.what {
            Next::Wake => match w.core.attempt(&ctl, Instant(t)) {
                Attempt::Won(session) => {
                    let (release, packets) = queues[session.lane()].busy_period(cfg, t, &mut latency);
                    w.session = Some(session);
                    w.packets = packets;
                    w.next = release;
                    w.what = Next::Release;
                }
                Attempt::Lost { sleep } => {
                    let j = jitter(cfg, &mut w.jitter);
                    w.active += cfg.wake_cost_ns;
                    w.core.record_halted(Duration(sleep.ticks() + j));
                    w.next = t + cfg.wake_cost_ns + sleep.ticks() + j;
                }
            },
            Next::Release => {
                let Some(session) = w.session.take() else {
                    anyhow::bail!("worker {i} released without a session");
                };
                let qi = session.lane();
                let busy = t - session.start().ticks();
                let t_s = w.core.finish(session, Instant(t), w.packets);
                let j = jitter(cfg, &mut w.jitter);
                w.active += busy + cfg.wake_cost_ns;
                w.core.record_halted(Duration(t_s.ticks() + j));
                w.next = t + cfg.wake_cost_ns + t_s.ticks() + j;
                w.what = Next::Wake;
                let q = &mut queues[qi];
                q.ts_sum += t_s.ticks() as f64;
                q.ts_count += 1;
                if let Some(every) = cfg.trace_interval_ns
                    && q.last_trace.is_none_or(|l| t >= l + every)
                {
                    q.last_trace = Some(t);
                    trace.push(TracePoint {
                        t_ns: t,
                        queue: qi,
                        offered: cfg.load.at(t as f64, cfg.duration_ns as f64),
                        rho: ctl.lanes()[qi].rho(),
                        short_timeout_ns: t_s.ticks(),
                    });
                }
            }
        }
    }

    let duration = cfg.duration_ns.max(1) as f64;
    let worker_results = workers
        .iter()
        .map(|w| WorkerResult { cpu_share: (w.active as f64 / duration).min(1.0), stats: *w.core.stats() })
        .collect();
    drop(workers); // ends the borrows of `ctl` held by unfinished sessions, releasing their locks
    let queue_results = queues
        .iter()
        .zip(ctl.lanes())
        .map(|(q, s)| QueueResult {
            snapshot: s.snapshot(),
            mean_short_timeout_ns: if q.ts_count == 0 { 0.0 } else { q.ts_sum / q.ts_count as f64 },
            arrived: q.arrived,
            dropped: q.dropped,
            served: q.served,
        })
        .collect();
    Ok(RunResult { workers: worker_results, queues: queue_results, latency, trace, duration_ns: cfg.duration_ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn short(workers: usize, load: f64) -> SimConfig {
        SimConfig { workers, load: LoadProfile::Constant(load), duration_ns: 50_000_000, ..SimConfig::default() }
    }

    #[test]
    fn served_work_matches_offered_load() {
        let r = run(&short(3, 0.6)).expect("run");
        let util = r.served() as f64 * 500.0 / r.duration_ns as f64;
        assert!((util - 0.6).abs() < 0.03, "utilization {util}");
        assert_eq!(r.dropped(), 0);
        // The busy part of CPU share is the service work; the rest is polling.
        assert!(r.cpu_cores() > util, "cpu {} vs util {util}", r.cpu_cores());
        assert!(r.latency.count() == r.served());
    }

    #[test]
    fn a_single_worker_never_loses() {
        let r = run(&short(1, 0.5)).expect("run");
        assert_eq!(r.busy_try_ratio(), 0.0);
        assert!(r.workers[0].stats.wins > 100);
    }

    #[test]
    fn runs_are_deterministic() {
        let a = run(&short(2, 0.3)).expect("run");
        let b = run(&short(2, 0.3)).expect("run");
        assert_eq!(a.workers, b.workers);
        assert_eq!(a.queues, b.queues);
    }

    #[test]
    fn a_tiny_ring_drops() {
        let mut c = short(1, 0.9);
        c.ring_depth = 4;
        c.controller.min_short_timeout_ns = 20_000; // above the ring bound: the bound must win
        let r = run(&c).expect("run");
        assert!(r.dropped() > 0);
        // Every arrival was dropped, served, or is still in the ring.
        let left = r.arrived() - r.dropped() - r.served();
        assert!(left <= 4, "{left} packets unaccounted for");
        // T_S was held under the ring bound 0.5 · 4 · 0.5 µs = 1 µs.
        assert!(r.mean_short_timeout_ns() <= 1_000.0 + 0.5);
    }

    #[test]
    fn triangle_profile_peaks_in_the_middle() {
        let p = LoadProfile::Triangle { low: 0.1, peak: 0.9 };
        assert!((p.at(0.0, 10.0) - 0.1).abs() < 1e-12);
        assert!((p.at(5.0, 10.0) - 0.9).abs() < 1e-12);
        assert!((p.at(10.0, 10.0) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn multi_queue_runs_share_the_work() {
        let mut c = short(4, 0.4);
        c.queues = 2;
        let r = run(&c).expect("run");
        assert_eq!(r.queues.len(), 2);
        for q in &r.queues {
            assert!(q.snapshot.wins > 100, "{q:?}");
        }
    }
}
