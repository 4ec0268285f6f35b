//! The multi-core worker loop of Metronome: M workers share N lanes through Metronome's
//! trylocks and either sleep between rounds (`metronome` mode) or never do (`poll` mode,
//! the DPDK-like busy-polling baseline).
//!
//! A **lane** ([`Lane`]) is what one queue lock protects: receive queue `k` of every port,
//! transmit queue `k` of every port, and the buffer pool those queues draw from and return
//! to. Frames received on lane `k` leave on lane `k`, so a lane is self-contained and whoever
//! holds its lock owns all of it. Lanes are bound to the controller's queue locks with
//! [`Guarded`], so only the round's winner can reach one.
//!
//! One [`Worker::round`] per wake-up:
//! 1. one `try_lock` on the lane the worker is bound to ([`metronome::Scheduler::attempt`]);
//! 2. **lost**: the worker becomes a backup, picks a random lane for next time, and (in
//!    `metronome` mode) sleeps `T_L`;
//! 3. **won**: the vacation is recorded, the lane is drained — [`crate::poll::Poller::poll_once`]
//!    (RX burst on every port, the stage, TX burst on the destination port) until a poll
//!    receives nothing — then ρ and `T_S` are updated, the lock is released, and (in
//!    `metronome` mode) the worker sleeps `T_S`. TX needs no separate flush: `poll_once`
//!    hands every frame to a TX ring (or drops it as `tx_full`) before it returns.
//!
//! **The round budget** ([`RoundBudget`]): a lane that never empties (one flow faster than
//! the core) would keep "until a poll receives nothing" going for ever, and with it
//! everything the caller does between rounds — the heartbeat, the control channel, `@stats`,
//! RSS moves, `max_s`, a partitioned worker's other lanes. So a won round also ends after
//! [`RoundBudget::polls`] polls or once [`RoundBudget::time`] has passed since the lock was
//! won (checked at the start of each poll: a poll that has begun runs whole). Such a **cut**
//! round updates ρ and `T_S` like any other and releases the lock, but the worker does not
//! sleep: the lane still holds frames, so it comes straight back (a primary keeps its lane;
//! a partitioned worker moves to the next lane of its share, as after every round). A lane
//! that empties within the budget keeps Metronome's drain-then-sleep unchanged.
//!
//! Fewer workers than lanes (M < N; the paper assumes M ≥ N, and a primary that never
//! loses would keep its lane forever while the others starve): each worker then owns the
//! lanes `k ≡ w (mod M)` ([`Worker::partition`]) and moves to the next of them after
//! every round, so every lane is visited.
//!
//! A worker that stops (the firmware's watchdog reports it stalled) leaves its lanes to the
//! live workers, which re-partition them among themselves ([`Worker::repartition`]).
//! End to end, `tests/tests/flood.rs` runs one worker under a flood of a denied flow and
//! checks that `@stats` and a signed STOP are still served (the round budget), and
//! `tests/tests/metronome.rs` runs 3 workers on 2 RSS lanes over tap and checks what the
//! schedulers decided at low load (sleeps after rounds in `metronome` mode, none in `poll`).
//!
//! **Parked lanes** ([`Worker::set_parked`]): a lane whose queue no port's RSS table names
//! (released by NetBlaze's server mapper, or after an RSS move) is skipped: before each
//! round the worker's next lane, if parked, becomes the next of its share (or of all lanes,
//! unpartitioned) that is not, and when none is left it sleeps `T_L` instead of `T_S`. Once
//! every [`PARKED_SWEEP_ROUNDS`] (64) rounds a worker goes to a parked lane anyway, in turn,
//! so the frames the device wrote just before the change are forwarded late, never lost
//! (`worker/tests.rs`: parked lanes visited only by sweeps, their last frames still sent; a
//! worker whose share is all parked sleeps `T_L`; a primary whose lane is parked moves).
//! That is how NetBlaze's server mapper and Metronome combine: the mapper decides which
//! queues carry traffic, and the cores of the others halt. Measured under TCG (where `T_S`
//! sits at its 1 µs floor, so the figures say little about bare metal): `cargo xtask run
//! --nic igb --lanes 3 --workers 2 --seconds 20 --rate 300`, the two cores busy 39.6 % +
//! 37.3 % of their cycles without a profile and 37.7 % + 15.9 % with `--profile
//! chains/chain1.profile` (2 of 3 queues released at t ≈ 5 s, core 1's share parked from
//! then on; 5740 frames, none lost or reordered).
//!
//! **Sleeping on the device's write** (`mwait=on`, beyond the paper, off by default): a
//! receive queue can name the address its device writes on arrival
//! ([`crate::nic::RxQueue::wake_address`]: virtio-net's used-ring `idx`, the DD word of the
//! next descriptor of an Intel ring, an AF_XDP ring's producer index); after a won round the
//! primary sleeps with `Sleeper::sleep_until_arrival` on every port's queue of its lane, and
//! the platform's sleeper waits for a write there — MONITOR/MWAIT on the first (only inside
//! the DMA range), `ppoll` on the sockets of all of them on the hosted build — with the `T_S`
//! deadline as the backstop.
//!
//! **The idle lane** ([`IdleSleep`], beyond the paper): a primary whose lane has received
//! nothing for a while sleeps a long backstop instead of `T_S`, where its sleeper wakes on
//! arrival on every queue of the lane ([`Sleeper::wakes_on_arrival`]); the first frame ends
//! that sleep and brings `T_S` back. `worker/tests.rs` holds it to that; the hosted build's
//! figures are in docs/PERFORMANCE.md ("Idle costs nothing").
//!
//! Accounting per core ([`WorkerStats`]): elapsed ticks since the first round, ticks halted
//! in the sleeper (the rest is busy: polling, processing, losing races), tries, wins, busy
//! tries, packets, sleeps taken and rounds cut by the budget. Per lane, the controller's [`metronome::LaneSnapshot`] has ρ, `T_S`
//! and the vacation statistics.

use crate::buf::Pool;
use crate::control::Commands;
use crate::metronome::{self, Attempt, LaneShare, Metronome, WorkerStats};
use crate::nic::{RxQueue, TxQueue, WakeAddr};
use crate::poll::{PollConfig, PollStats, Poller};
use crate::stage::{PORTS, Stage};
use crate::sync::Guarded;
use crate::time::{Clock, Duration, Instant, Sleeper};

/// How workers spend the time between rounds, chosen at boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Mode {
    /// Never sleep: try the next lane at once (busy polling, the DPDK-like baseline).
    Poll,
    /// Sleep `T_S` after a won round and `T_L` after a lost one.
    Metronome,
}

impl Mode {
    /// The boot-option spelling: `poll` or `metronome`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Mode::Poll => "poll",
            Mode::Metronome => "metronome",
        }
    }
}

/// What one queue lock protects: queue `k` of every port and their buffer pool.
#[derive(Debug)]
pub struct Lane<'m, R, T> {
    /// Receive queue `k` of each port (port `p`'s at index `p`; at most [`PORTS`]).
    pub rx: heapless::Vec<R, PORTS>,
    /// Transmit queue `k` of each port, as `rx`.
    pub tx: heapless::Vec<T, PORTS>,
    /// The buffers these queues use.
    pub pool: Pool<'m>,
}

/// How much one won round may drain before it lets go of its lane (module docs, "The round
/// budget"): whichever of the two bounds comes first ends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct RoundBudget {
    /// Polls at most (at least one poll always runs).
    pub polls: u32,
    /// Time at most since the lock was won, checked before each further poll; zero: no
    /// time bound (the polls still bound the round).
    pub time: Duration,
}

impl RoundBudget {
    /// At most `polls` polls (≥ 1) and `time` (zero: no time bound).
    pub const fn new(polls: u32, time: Duration) -> Self {
        Self { polls: if polls == 0 { 1 } else { polls }, time }
    }
}

impl Default for RoundBudget {
    /// [`RoundBudget::DEFAULT_POLLS`] polls, no time bound (a caller with a clock sets one:
    /// the firmware's `round_us`).
    fn default() -> Self {
        Self::new(Self::DEFAULT_POLLS, Duration::ZERO)
    }
}

impl RoundBudget {
    /// The default bound in polls: 256 polls of up to a batch per port.
    pub const DEFAULT_POLLS: u32 = 256;
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Round {
    /// The lane tried.
    pub lane: usize,
    /// Whether the lock was won.
    pub won: bool,
    /// Whether the round ended on its budget with the lane still delivering (no sleep
    /// followed).
    pub cut: bool,
    /// Frames received.
    pub packets: u64,
    /// Control commands seen while draining.
    pub commands: Commands,
    /// The clock at the end of the round (after any sleep).
    pub now: Instant,
}

/// What [`Worker::drain_lane`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    /// Frames received.
    pub packets: u64,
    /// Control commands seen.
    pub commands: Commands,
    /// Whether a poll found the lane empty before the bound.
    pub empty: bool,
}

/// One core's worker: the Metronome state machine plus the forwarding loop it drives.
#[derive(Debug)]
pub struct Worker<S> {
    mode: Mode,
    sched: metronome::Scheduler,
    fwd: Poller<S>,
    first: Option<Instant>,
    last: Instant,
    halted: u64,
    sleeps: u64,
    cut_rounds: u64,
    budget: RoundBudget,
    /// `(w, M)` when this worker visits lanes `k ≡ w (mod M)` in turn.
    partition: Option<(usize, usize)>,
    /// Lanes that receive nothing (bit `k`: lane `k`, [`Worker::set_parked`]).
    parked: u64,
    /// Rounds since this worker last let a parked lane be its next one (the sweep), and the
    /// lane the next sweep starts looking from (sweeps take the parked lanes in turn).
    since_sweep: u32,
    sweep_from: usize,
    /// The idle lane's long sleep ([`Worker::with_idle`]).
    idle: IdleSleep,
    /// How long the lane of this worker's last round had received nothing, as that round
    /// ended (`None`: it received frames, or the round was lost):
    /// [`metronome::LaneShare::quiet_for`].
    quiet: Option<Duration>,
    /// Sleeps stretched by [`IdleSleep`].
    idle_sleeps: u64,
}

/// The idle policy (beyond the paper): a primary whose lane has received nothing for
/// `after` (whichever workers polled it: [`metronome::LaneShare::quiet_for`]) sleeps `sleep`
/// instead of `T_S`, but only when its sleeper wakes on the arrival of
/// a frame on every receive queue of the lane ([`Sleeper::wakes_on_arrival`]). Then the
/// first frame after idle ends the sleep as soon as the platform wakes the thread, so the
/// deadline is only the backstop against a wake-up the platform misses: `T_S` exists to bound
/// the vacation of a lane nobody watches, and a watched lane has no vacation to bound. A
/// sleeper that cannot watch the lane keeps the paper's rule. Frames (or a lost round) end the
/// idle spell at once, and the next sleep is `T_S` again. The firmware's default `after` is
/// zero: on a watched lane a `T_S` deadline that finds nothing costs a wake-up and bounds
/// nothing, so the worker waits for the arrival from its lane's first empty round (measured in
/// docs/PERFORMANCE.md, "Idle costs nothing").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleSleep {
    /// How long a lane must have received nothing (zero: from its first empty round on).
    pub after: Duration,
    /// The backstop deadline of an idle lane's sleep; zero turns the policy off.
    pub sleep: Duration,
}

impl IdleSleep {
    /// The policy off.
    pub const OFF: IdleSleep = IdleSleep { after: Duration::ZERO, sleep: Duration::ZERO };

    fn on(&self) -> bool {
        self.sleep != Duration::ZERO
    }
}

/// A worker lets a parked lane be its next one once in this many rounds, so that frames that
/// reached a lane as it was parked (the device's last writes before a table change) are
/// forwarded, late but not lost ([`Worker::set_parked`]).
pub const PARKED_SWEEP_ROUNDS: u32 = 64;

impl<S: Stage> Worker<S> {
    /// A worker that first tries lane `first_lane`, seeding its random lane choice with
    /// `seed` (e.g. the core index), running `stage`.
    pub fn new(mode: Mode, first_lane: usize, seed: u64, stage: S, cfg: PollConfig) -> Self {
        Self {
            mode,
            sched: metronome::Scheduler::new(first_lane, seed),
            fwd: Poller::new(stage, cfg),
            first: None,
            last: Instant(0),
            halted: 0,
            sleeps: 0,
            cut_rounds: 0,
            budget: RoundBudget::default(),
            partition: None,
            parked: 0,
            since_sweep: 0,
            sweep_from: 0,
            idle: IdleSleep::OFF,
            quiet: None,
            idle_sleeps: 0,
        }
    }

    /// Sets the idle policy ([`IdleSleep`]; off by default).
    pub fn with_idle(mut self, idle: IdleSleep) -> Self {
        self.idle = idle;
        self
    }

    /// Sleeps the idle policy stretched so far.
    pub fn idle_sleeps(&self) -> u64 {
        self.idle_sleeps
    }

    /// Takes lane locks as `holder` (the lock word names it: a lane this worker holds when it
    /// stops for good can be revoked from it, `sync::TryLock::revoke`), and keeps `in_driver`
    /// set for the span of each driver call (`poll::Poller::set_in_driver_word`), which tells
    /// the one taking its lane over whether the rings were left consistent.
    pub fn with_lease(
        mut self,
        holder: crate::sync::Holder,
        in_driver: alloc::sync::Arc<core::sync::atomic::AtomicBool>,
    ) -> Self {
        self.sched.set_holder(holder);
        self.fwd.set_in_driver_word(in_driver);
        self
    }

    /// Bounds each won round by `budget` (module docs, "The round budget"); the default is
    /// [`RoundBudget::default`].
    pub fn with_budget(mut self, budget: RoundBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Declares the lanes that receive nothing (bit `k` for lane `k` < 64): lanes whose queue
    /// holds no entry of any port's RSS table, e.g. the queues NetBlaze's server mapper
    /// released. The worker then goes to them only once every [`PARKED_SWEEP_ROUNDS`] rounds
    /// (to forward what the device wrote just before the change): a worker whose next lane is
    /// parked takes the next one of its share that is not (partitioned), or the next lane
    /// that is not (otherwise), and when there is none it sleeps `T_L` instead of `T_S`. So
    /// the cores NetBlaze saves show as halted cycles. 0 (the default): every lane is visited.
    pub fn set_parked(&mut self, mask: u64) {
        self.parked = mask;
    }

    fn is_parked(&self, lane: usize) -> bool {
        lane < 64 && self.parked & (1 << lane) != 0
    }

    /// Declares this worker as worker `w` of `workers`. With fewer workers than lanes it
    /// then owns lanes `k ≡ w (mod workers)` and visits them in turn (module docs); with
    /// at least as many workers as lanes this changes nothing (the paper's setting).
    pub fn partition(mut self, w: usize, workers: usize) -> Self {
        self.partition = (workers > 0).then_some((w % workers, workers));
        self
    }

    /// Re-declares this worker as live worker `w` of `workers` (e.g. after another worker
    /// stalled and the live ones share its lanes): with fewer live workers than lanes it then
    /// visits lanes `k ≡ w (mod workers)`, starting with lane `w`.
    pub fn repartition(&mut self, w: usize, workers: usize) {
        if workers == 0 {
            return;
        }
        let next = (w % workers, workers);
        if self.partition != Some(next) {
            self.partition = Some(next);
            self.sched.set_queue(next.0);
        }
    }

    /// This worker's partition `(w, workers)`, if declared.
    pub fn partition_of(&self) -> Option<(usize, usize)> {
        self.partition
    }

    /// The mode chosen at boot.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// This core's scheduling counters.
    pub fn stats(&self) -> WorkerStats {
        WorkerStats {
            elapsed_ticks: self.first.map_or(0, |f| self.last.saturating_since(f).ticks()),
            halted_ticks: self.halted,
            sleeps: self.sleeps,
            cut_rounds: self.cut_rounds,
            ..*self.sched.stats()
        }
    }

    /// The sojourn times of the frames this worker transmitted ([`crate::latency`]).
    pub fn latency(&self) -> &crate::latency::Latency {
        self.fwd.latency()
    }

    /// This core's forwarding counters (ports, drops, control frames).
    pub fn forwarding(&self) -> &PollStats {
        self.fwd.stats()
    }

    /// The stage this worker runs (e.g. its NF chain, for its counters).
    pub fn stage(&self) -> &S {
        self.fwd.stage()
    }

    /// One wake-up: one lock attempt, a drained lane if won (within the round budget), then
    /// the mode's sleep (none after a cut round).
    ///
    /// `lanes[k]` must be bound to `ctl.queues()[k].lock()`; a lane that is missing or
    /// bound to another lock is treated as empty (the round still releases the lock).
    pub fn round<Q, R, T, C, Z>(
        &mut self,
        ctl: &Metronome<Q>,
        lanes: &[Guarded<Lane<'_, R, T>>],
        clock: &C,
        sleeper: &mut Z,
    ) -> Round
    where
        Q: AsRef<[LaneShare]>,
        R: RxQueue,
        T: TxQueue,
        C: Clock + ?Sized,
        Z: Sleeper + ?Sized,
    {
        let now = clock.now();
        self.first.get_or_insert(now);
        let mut round = Round { lane: self.sched.lane(), now, ..Round::default() };
        // Where a frame for this worker's lane will show up next (every port's receive
        // queue), for a sleeper that can watch them; known only after a won round.
        let mut watch: heapless::Vec<WakeAddr, PORTS> = heapless::Vec::new();
        let mut sleep = match self.sched.attempt(ctl, now) {
            Attempt::Won(mut session) => {
                round.won = true;
                round.lane = session.lane();
                let k = session.lane();
                let start = session.start();
                if let Some(lane) = lanes.get(k).and_then(|l| l.get_mut(session.guard_mut())) {
                    self.fwd.stage_mut().enter_lane(k);
                    for a in lane.rx.iter().filter_map(|q| q.wake_address()) {
                        let _ = watch.push(a);
                    }
                    let mut polls = 0u32;
                    loop {
                        let out = self.fwd.poll_once(&mut lane.pool, &mut lane.rx, &mut lane.tx, clock);
                        polls += 1;
                        round.packets += out.rx as u64;
                        round.commands.merge(out.commands);
                        if out.rx == 0 || round.commands.stop {
                            break;
                        }
                        let b = self.budget;
                        if polls >= b.polls || (b.time != Duration::ZERO && out.now.saturating_since(start) >= b.time) {
                            round.cut = true;
                            break;
                        }
                    }
                }
                let end = clock.now();
                let t_s = self.sched.finish(session, end, round.packets);
                self.quiet = ctl.lanes().get(k).and_then(|l| l.quiet_for(end));
                t_s
            }
            Attempt::Lost { sleep } => {
                self.quiet = None;
                sleep
            }
        };
        if let Some((w, m)) = self.partition
            && m < lanes.len()
        {
            // Next lane of this worker's share, whatever the round's outcome.
            let next = round.lane + m;
            self.sched.set_queue(if next < lanes.len() { next } else { w });
        }
        if self.parked != 0 && !lanes.is_empty() {
            self.since_sweep += 1;
            let unparked = self.lane_from(self.sched.lane(), lanes.len(), false);
            if unparked.is_none() {
                // Nothing this worker can go to receives anything: the long sleep.
                sleep = sleep.max(ctl.params().long_timeout());
            }
            if self.since_sweep >= PARKED_SWEEP_ROUNDS {
                // The sweep: the next parked lane of the share, in turn.
                self.since_sweep = 0;
                if let Some(k) = self.lane_from(self.sweep_from, lanes.len(), true) {
                    self.sched.set_queue(k);
                    self.sweep_from = self.step(k, lanes.len());
                }
            } else if let Some(k) = unparked.filter(|_| self.is_parked(self.sched.lane())) {
                self.sched.set_queue(k);
            }
        }
        if round.cut {
            self.cut_rounds += 1;
        }
        round.now = match self.mode {
            // A cut round left frames on the lane: straight back, no sleep.
            Mode::Poll => clock.now(),
            Mode::Metronome if round.cut => clock.now(),
            // A primary keeps its lane (unless partitioned), so it watches that lane.
            Mode::Metronome => {
                let watch: &[WakeAddr] = if self.partition_keeps_lane(lanes.len()) { &watch } else { &[] };
                let idle = self.idle.on()
                    && self.quiet.is_some_and(|q| q >= self.idle.after)
                    && !watch.is_empty()
                    && sleeper.wakes_on_arrival(watch);
                if idle && self.idle.sleep > sleep {
                    sleep = self.idle.sleep;
                    self.idle_sleeps += 1;
                }
                self.sleep(clock, sleeper, sleep, watch)
            }
        };
        self.last = round.now;
        round
    }

    /// Drains `lane` (lane `k`) outside the Metronome rounds: polls it until a poll receives nothing,
    /// at most `max_polls` times, forwarding what it gets through this worker's stage. For a
    /// caller that already holds the lane's lock (e.g. a live RSS change draining the old
    /// queue past the switch point); the controller's estimators are not touched. Returns the
    /// frames received, the control commands seen, and whether the lane was found empty (a
    /// lane that still delivered after `max_polls` polls is not).
    pub fn drain_lane<R, T, C>(&mut self, k: usize, lane: &mut Lane<'_, R, T>, clock: &C, max_polls: usize) -> Drained
    where
        R: RxQueue,
        T: TxQueue,
        C: Clock + ?Sized,
    {
        self.fwd.stage_mut().enter_lane(k);
        let mut d = Drained::default();
        for _ in 0..max_polls {
            let out = self.fwd.poll_once(&mut lane.pool, &mut lane.rx, &mut lane.tx, clock);
            d.packets += out.rx as u64;
            d.commands.merge(out.commands);
            if out.rx == 0 {
                d.empty = true;
                break;
            }
        }
        d
    }

    /// The lane after `k` in this worker's rotation: its share when partitioned (wrapping to
    /// its first lane), else every lane.
    fn step(&self, k: usize, lanes: usize) -> usize {
        let (first, step) = match self.partition {
            Some((w, m)) if m < lanes => (w, m),
            _ => (0, 1),
        };
        if k + step < lanes { k + step } else { first }
    }

    /// The first lane from `from` on, in this worker's rotation, that is parked (`parked`)
    /// or not.
    fn lane_from(&self, from: usize, lanes: usize, parked: bool) -> Option<usize> {
        let mut k = match self.partition {
            // A lane outside the share (the sweep's first start): begin at the share's first.
            Some((w, m)) if m < lanes && (from >= lanes || from % m != w) => w,
            _ => from.min(lanes.saturating_sub(1)),
        };
        for _ in 0..lanes {
            if self.is_parked(k) == parked {
                return Some(k);
            }
            k = self.step(k, lanes);
        }
        None
    }

    /// Whether this worker's next round is on the lane it just had (not when it cycles
    /// through a partition).
    fn partition_keeps_lane(&self, lanes: usize) -> bool {
        self.partition.is_none_or(|(_, m)| m >= lanes)
    }

    /// Sleeps `d` (ending early if `watch` is written, where the sleeper can watch) and
    /// books the time as halted; returns the wake-up time.
    fn sleep<C: Clock + ?Sized, Z: Sleeper + ?Sized>(
        &mut self,
        clock: &C,
        sleeper: &mut Z,
        d: Duration,
        watch: &[WakeAddr],
    ) -> Instant {
        let before = clock.now();
        let woke = sleeper.sleep_until_arrival(before.saturating_add(d), watch);
        let halted = woke.saturating_since(before);
        self.sleeps += 1;
        self.halted = self.halted.saturating_add(halted.ticks());
        self.sched.record_halted(halted);
        woke
    }
}

#[cfg(test)]
mod tests;
