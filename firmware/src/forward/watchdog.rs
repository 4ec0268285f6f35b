//! Stall detection, and the watchdog that does not depend on any worker.
//!
//! Every worker checks the others' heartbeats every [`HEALTH_MS`] ([`check`], called from
//! `watch`). That cannot see worker 0 stall when it is the only worker, and `max_s` and the
//! wind-down run inside worker 0's own loop. So when the machine has a core (the image: an
//! application core no worker uses) or a thread (the hosted build) to spare, [`run`] watches
//! from there, independently of every worker:
//! - it reports stalled and recovered workers, worker 0 included (`seen_by=watchdog`);
//! - once the run should be over (a STOP was seen, or `max_s` passed) and it is not wound down
//!   within [`GRACE_MS`], it says so on an `error:` line, prints `@summary` from what the
//!   workers last published, and ends the run with [`Outcome::RuntimeFailure`] through
//!   [`Machine::abort`] — a hung worker 0 no longer hangs the image.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use cadence_core::time::{Clock, Duration, Instant, Sleeper};

use cadence_core::sync::Holder;

use super::{DRAIN_MS, FwdPort, HEALTH_MS, Machine, Outcome, PARK_TIMEOUT_MS, Shared, report, say};

/// The workers' and lanes' health, which the watchdog and every worker's `watch` read and
/// the workers write: heartbeats, what a take-over needs, and what was reported.
pub(super) struct Health {
    /// Per worker: the clock at the end of its last round (its heartbeat), and its lane.
    pub(super) heartbeats: Vec<AtomicU64>,
    pub(super) last_lane: Vec<AtomicUsize>,
    /// Per worker: set for the span of each driver call it makes on a lane (what a take-over
    /// reads to know whether the lane's rings were left consistent).
    pub(super) in_driver: Vec<Arc<AtomicBool>>,
    /// Workers stopped for good by [`Machine::fence`] (bit `w`).
    pub(super) fenced: AtomicU64,
    /// Per lane: buffers out of its pool at rest (its receive rings'), and how often it was
    /// taken over from a stopped worker.
    pub(super) lane_resting: Vec<usize>,
    pub(super) takeovers: Vec<AtomicU64>,
    /// Buffers lost with stopped workers, found at shutdown (lanes taken over: their pools'
    /// shortfall from resting once their TX rings drained).
    pub(super) stranded: AtomicU64,
    /// Workers reported stalled (bit `w`).
    pub(super) stalled: AtomicU64,
    /// Stalls reported (`stalls=`).
    pub(super) stalls: AtomicU64,
    /// A worker whose heartbeat is this old is stalled (0: watchdog off).
    pub(super) stall_limit: Duration,
    /// Debug (`stall=W:MS[:round]`): worker `.0` stops at `.1`, inside a round if `.2`.
    pub(super) inject_stall: Option<(usize, Instant, bool)>,
}

/// How long after the run should have ended the watchdog waits for worker 0's wind-down
/// (which takes at most `PARK_TIMEOUT_MS + DRAIN_MS`) before it ends the run itself.
pub const GRACE_MS: u64 = PARK_TIMEOUT_MS + DRAIN_MS + 1_000;

/// Who noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Seer {
    /// Worker `w`.
    Worker(usize),
    /// The watchdog core or thread.
    Watchdog,
}

impl fmt::Display for Seer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Seer::Worker(w) => write!(f, "{w}"),
            Seer::Watchdog => f.write_str("watchdog"),
        }
    }
}

/// Reports every worker (but the caller) whose last round ended more than `stall_ms` ago
/// (`@fault kind=stall`, once, by whoever sees it first) and every reported one whose rounds
/// resumed (`@fault kind=recovered`).
pub(super) fn check<M: Machine, P: FwdPort>(sh: &Shared<M, P>, me: Seer, now: Instant) {
    let rate = sh.clock.rate();
    for (v, hb) in sh.health.heartbeats.iter().enumerate().filter(|&(v, _)| me != Seer::Worker(v) && v < 64) {
        let quiet = now.saturating_since(Instant(hb.load(Ordering::Relaxed)));
        let bit = 1u64 << v;
        if quiet > sh.health.stall_limit {
            if sh.health.stalled.fetch_or(bit, Ordering::AcqRel) & bit == 0 {
                sh.health.stalls.fetch_add(1, Ordering::Relaxed);
                let lane = sh.health.last_lane.get(v).map_or(0, |l| l.load(Ordering::Relaxed));
                say(
                    sh.machine,
                    format_args!(
                        "@fault kind=stall core={v} lane={lane} quiet_ms={} seen_by={me}",
                        rate.ns(quiet) / 1_000_000
                    ),
                );
                take_over(sh, v, me);
            }
        } else if sh.health.fenced.load(Ordering::Acquire) & bit != 0 {
            // Stopped for good: it cannot recover (its heartbeat only looks fresh because the
            // clock read it before the stop).
        } else if sh.health.stalled.load(Ordering::Acquire) & bit != 0
            && sh.health.stalled.fetch_and(!bit, Ordering::AcqRel) & bit != 0
        {
            say(sh.machine, format_args!("@fault kind=recovered core={v} seen_by={me}"));
        }
    }
}

/// Takes the lanes stalled worker `v` holds away from it, if the machine can stop it for good
/// and it stopped outside every driver call (module docs, "Taking a lane over").
fn take_over<M: Machine, P: FwdPort>(sh: &Shared<M, P>, v: usize, me: Seer) {
    let holder = Holder::of(v as u32);
    let held: heapless::Vec<usize, 64> =
        (0..sh.lanes.len()).filter(|&k| sh.ctl.lanes()[k].lock().holder() == Some(holder)).take(64).collect();
    if held.is_empty() {
        // Stalled between rounds: it holds nothing; the live workers share its lanes.
        return;
    }
    let Some(proof) = sh.machine.fence(v) else {
        for k in &held {
            say(sh.machine, format_args!("@fault kind=lane_held core={v} lane={k} why=no_fence seen_by={me}"));
        }
        return;
    };
    sh.health.fenced.fetch_or(1 << v, Ordering::AcqRel);
    // The stopped side acknowledged (with `Release`, read by the fence with `Acquire`): its
    // last in-driver store is visible here.
    if sh.health.in_driver.get(v).is_none_or(|w| w.load(Ordering::Relaxed)) {
        for k in &held {
            say(sh.machine, format_args!("@fault kind=lane_held core={v} lane={k} why=in_driver seen_by={me}"));
        }
        return;
    }
    for &k in &held {
        // The lock passes straight to us: the pool is repaired before anyone else gets it.
        let Some(mut g) = sh.ctl.lanes()[k].lock().revoke(&proof) else { continue };
        let rebuilt = sh.lanes.get(k).and_then(|lane| lane.get_mut(&mut g)).map(|lane| lane.pool.rebuild_free_list());
        drop(g);
        if let Some(t) = sh.health.takeovers.get(k) {
            t.fetch_add(1, Ordering::Relaxed);
        }
        say(
            sh.machine,
            format_args!(
                "@fault kind=takeover core={v} lane={k} free={} seen_by={me}",
                rebuilt.map_or(-1, |n| n as i64)
            ),
        );
    }
}

/// The watchdog's loop (see the module docs); returns once the run has wound down.
pub(super) fn run<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>) {
    let clock = sh.clock;
    let rate = clock.rate();
    let mut sleeper = match sh.machine.sleeper(sh.health.heartbeats.len()) {
        Ok(s) => s,
        Err(e) => {
            say(sh.machine, format_args!("warning: watchdog: sleeper: {e}; the workers only watch each other"));
            return;
        }
    };
    let period = rate.ticks_from_ms(HEALTH_MS);
    let grace = rate.ticks_from_ms(GRACE_MS);
    // When the run should have ended (STOP seen or `max_s` passed), as first noticed here.
    let mut due: Option<Instant> = None;
    loop {
        let now = sleeper.sleep_until(clock.now().saturating_add(period));
        if sh.finished.load(Ordering::Acquire) {
            return;
        }
        // Once the run winds down, workers leave their loops and stop beating by design.
        if sh.health.stall_limit.ticks() != 0 && !sh.stop.load(Ordering::Acquire) {
            check(sh, Seer::Watchdog, now);
        }
        let should_end = sh.stop.load(Ordering::Acquire) || sh.max_deadline.is_some_and(|d| now >= d);
        if should_end && due.is_none() {
            due = Some(now);
        }
        if let Some(t) = due
            && now.saturating_since(t) > grace
            && !sh.finished.load(Ordering::Acquire)
        {
            let why = if sh.stop.load(Ordering::Acquire) { "after STOP" } else { "after max_s" };
            say(
                sh.machine,
                format_args!(
                    "error: watchdog: the run did not wind down within {GRACE_MS} ms {why} (worker 0 stalled?); \
                     ending it"
                ),
            );
            sh.stop.store(true, Ordering::Release);
            report::line(sh, "@summary", sh.started, clock.now(), true);
            sh.machine.abort(Outcome::RuntimeFailure);
        }
    }
}
