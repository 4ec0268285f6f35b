//! A worker's side: its role, its counters, and the round state machine (`Scheduler`).

use super::*;

/// The role a worker took in its last round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Role {
    /// Won its last race (or has not raced yet): keeps its lane, sleeps `T_S`.
    Primary,
    /// Lost its last race: tries a random lane next, after `T_L`.
    Backup,
}

/// A worker's counters: what its [`Scheduler`] counts, plus the time it has run and slept
/// (filled in by [`crate::worker::Worker::stats`], or by a host through
/// [`Scheduler::record_halted`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WorkerStats {
    /// Ticks since the worker's first round.
    pub elapsed_ticks: u64,
    /// Lock attempts (= wake-ups).
    pub tries: u64,
    /// Attempts won.
    pub wins: u64,
    /// Attempts lost: the lane was locked by another worker.
    pub busy_tries: u64,
    /// Packets drained in won rounds.
    pub packets: u64,
    /// Ticks spent between winning and releasing.
    pub busy_ticks: u64,
    /// Ticks spent halted (in the sleeper).
    pub halted_ticks: u64,
    /// Sleeps taken between rounds (filled in by [`crate::worker::Worker::stats`]): after a
    /// won round whose lane emptied, after a lost one; never in `poll` mode.
    pub sleeps: u64,
    /// Won rounds that ended on the round budget with the lane still delivering
    /// ([`crate::worker::RoundBudget`]): the worker came back without sleeping.
    pub cut_rounds: u64,
}

impl WorkerStats {
    /// Ticks not halted: polling, processing, losing races.
    pub fn awake_ticks(&self) -> u64 {
        self.elapsed_ticks.saturating_sub(self.halted_ticks)
    }

    /// Lost tries / all tries.
    pub fn busy_try_ratio(&self) -> f64 {
        if self.tries == 0 { 0.0 } else { self.busy_tries as f64 / self.tries as f64 }
    }
}

/// The outcome of one lock attempt.
#[derive(Debug)]
#[must_use = "a won round must be finished to update the estimator and release the lock"]
pub enum Attempt<'q> {
    /// The worker holds the lane: drain it, then call [`Scheduler::finish`].
    Won(Session<'q>),
    /// Another worker holds the lane: sleep `sleep` (`T_L`, or `T_S` under
    /// [`LossPolicy::EqualTimeouts`]). [`Scheduler::lane`] now names a random lane.
    Lost {
        /// How long to sleep.
        sleep: Duration,
    },
}

/// A won round: the lock of lane [`Session::lane`] is held until [`Scheduler::finish`]
/// (dropping the session releases the lock without updating the estimator).
#[derive(Debug)]
pub struct Session<'q> {
    guard: TryLockGuard<'q>,
    state: &'q LaneShare,
    params: &'q Params,
    lane: usize,
    start: Instant,
    vacation: Option<Duration>,
}

impl<'q> Session<'q> {
    /// The guard of the held lane's lock, to reach data bound to it
    /// ([`crate::sync::Guarded::get_mut`]) for the length of the round.
    pub fn guard_mut(&mut self) -> &mut TryLockGuard<'q> {
        &mut self.guard
    }

    /// Index of the held lane.
    pub fn lane(&self) -> usize {
        self.lane
    }

    /// When the lock was won.
    pub fn start(&self) -> Instant {
        self.start
    }

    /// The vacation `V` that just ended: time since the lane's last release (`None` on the
    /// lane's first round).
    pub fn vacation(&self) -> Option<Duration> {
        self.vacation
    }
}

/// One core's side of Metronome.
#[derive(Debug, Clone)]
pub struct Scheduler {
    pub(super) lane: usize,
    /// The name this worker takes lane locks under (`TryLock::try_lock_as`).
    pub(super) holder: Holder,
    pub(super) role: Role,
    pub(super) rng: XorShift64,
    pub(super) stats: WorkerStats,
}

impl Scheduler {
    /// A worker that first tries `first_queue`, with its PRNG seeded from `seed` (e.g. the core id).
    pub fn new(first_queue: usize, seed: u64) -> Self {
        Self {
            lane: first_queue,
            holder: Holder::of(0),
            role: Role::Primary,
            rng: XorShift64::new(seed),
            stats: WorkerStats::default(),
        }
    }

    /// Takes lane locks as `holder` from now on (the lock word names it, so a lane it holds
    /// can be taken over if it stops for good: `TryLock::revoke`).
    pub fn set_holder(&mut self, holder: Holder) {
        self.holder = holder;
    }

    /// The lane this worker tries next.
    pub fn lane(&self) -> usize {
        self.lane
    }

    /// Points the next round at `lane` (a caller that partitions the lanes among its
    /// workers moves them itself; see `pipeline`).
    pub fn set_queue(&mut self, lane: usize) {
        self.lane = lane;
    }

    /// The role of the last round.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The counters.
    pub fn stats(&self) -> &WorkerStats {
        &self.stats
    }

    /// Adds halted time (the host measures how long the core really slept).
    pub fn record_halted(&mut self, d: Duration) {
        self.stats.halted_ticks = self.stats.halted_ticks.saturating_add(d.ticks());
    }

    /// One wake-up at `now`: one trylock on [`Scheduler::lane`].
    ///
    /// Won: the vacation since the last release is measured and recorded, the worker is primary
    /// and keeps the lane. Lost: the worker is a backup, picks a uniformly random lane for its
    /// next round and is told to sleep `T_L`.
    pub fn attempt<'q, Q: AsRef<[LaneShare]>>(&mut self, ctl: &'q Metronome<Q>, now: Instant) -> Attempt<'q> {
        let lanes = ctl.lanes();
        // A lane index from another controller cannot panic; `Metronome` is never empty.
        let qi = self.lane % lanes.len();
        let q = &lanes[qi];
        self.stats.tries += 1;
        match q.lock.try_lock_as(self.holder) {
            Some(guard) => {
                self.lane = qi;
                self.role = Role::Primary;
                self.stats.wins += 1;
                q.wins.fetch_add(1, Relaxed);
                let last = q.last_release.load(Relaxed);
                let vacation = (last != NEVER).then(|| now.saturating_since(Instant(last)));
                if let Some(v) = vacation {
                    q.vacation_sum.fetch_add(v.ticks(), Relaxed);
                    q.vacations.fetch_add(1, Relaxed);
                    q.vacation_hist.record(v.ticks());
                }
                Attempt::Won(Session { guard, state: q, params: &ctl.params, lane: qi, start: now, vacation })
            }
            None => {
                self.role = Role::Backup;
                self.stats.busy_tries += 1;
                q.busy_tries.fetch_add(1, Relaxed);
                self.lane = self.rng.below(lanes.len());
                let sleep = match ctl.params.loss_policy {
                    LossPolicy::PrimaryBackup => ctl.params.long_timeout,
                    LossPolicy::EqualTimeouts => q.short_timeout(),
                };
                Attempt::Lost { sleep }
            }
        }
    }

    /// Ends a won round at `now` after draining `packets`: `B = now − start`, updates ρ with
    /// `B/(B+V)`, computes `T_S`, records the release time and releases the lock. Returns the
    /// `T_S` to sleep.
    pub fn finish(&mut self, session: Session<'_>, now: Instant, packets: u64) -> Duration {
        let busy = now.saturating_since(session.start);
        self.stats.busy_ticks = self.stats.busy_ticks.saturating_add(busy.ticks());
        self.stats.packets = self.stats.packets.saturating_add(packets);
        let t_s = session.state.complete(&session.guard, session.params, session.vacation, busy, now, packets);
        drop(session.guard); // Release: the estimator writes above are published to the next holder.
        t_s
    }
}
