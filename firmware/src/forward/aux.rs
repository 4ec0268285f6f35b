//! NetBlaze's auxiliary cores in the forwarding run (issue 10
//! item 4; `core::offload` has the mechanism and its argument).
//!
//! With `aux=N` (and a profile in the chain module) the last `N` workers serve no lane: they
//! run [`AuxWorker`] over one hand-off link per lane. The dedicated workers (the others;
//! Metronome shares the lanes among them alone) run their chain wrapped in a
//! [`NetBlazeStage`]: every epoch of the profile (`epoch_ns`, the span its frontier was
//! measured for) each lane's holder decides, from that epoch's per-flow arrivals, which whole
//! flows go to an auxiliary core, hands them over with their ingress port, and transmits what
//! comes back on the lane's own TX queues — so per-flow order is the lane's, and every buffer
//! returns to its lane's pool.
//!
//! An auxiliary core with nothing in its rings sleeps `vbar_us` (watching its one ring's
//! producer index where the machine can, when it serves a single lane), so an idle one
//! shows as halted cycles (`core{i}_halted_cycles`). Idle as long as `DEEP_AFTER_SLEEPS` such
//! sleeps, or a whole epoch if that is shorter, it sleeps on its doorbell instead
//! (`cadence_core::sync::Doorbell`), where its sleeper can be woken by a ring
//! (`Sleeper::wakes_on_ring`): until a lane hands it frames and rings, at most
//! `DEEP_SLEEP_MS` — so a sleeper that cannot halt for short sleeps (the hosted build spins
//! through sleeps under its 50 µs margin) gives its CPU back too, and one that serves several
//! lanes (no single ring to watch) still wakes on the first hand-off. The hand-off wakes it
//! with the machine's `Machine::wake_hook` (a futex wake on the hosted build, a system call
//! only when the core sleeps; nothing on bare metal, where the ring's store to the watched
//! word wakes MWAIT). Shutdown order: the dedicated workers
//! stop first and count themselves done; worker 0 then polls every lane until nothing it
//! placed on an auxiliary core is queued, handed over or unreturned ([`settle`]) — the
//! auxiliary cores still running — so all of it is transmitted before the TX rings are
//! drained; only then do the auxiliary workers return. A live RSS
//! change settles the old lane the same way before it is released, so a flow handed over
//! from the old queue leaves before the new queue serves it.

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use cadence_core::buf::AuxView;
use cadence_core::buf::Pool;
use cadence_core::netblaze::{CoreMapper, NetBlazeConfig, Profile};
use cadence_core::nf::Chain;
use cadence_core::offload::handoff::AuxEnd;
use cadence_core::offload::{self, AuxStats, AuxWorker, LaneConfig, NetBlazeStage, SharedLanes};
use cadence_core::poll::PollStats;
use cadence_core::sync::Doorbell;
use cadence_core::sync::doorbell::WakeHook;
use cadence_core::time::{Clock, Duration, Instant, Sleeper, TickRate, poll_until};
use cadence_core::worker::Worker;
use spin::Mutex;

use super::{FwLane, FwdPort, Machine, PUBLISH_EVERY, Shared, say};
use crate::config::BootConfig;

/// Flows per lane whose arrivals are counted one by one per epoch, and that may be bound to
/// auxiliary cores at once.
const TRACKED_FLOWS: usize = 256;
/// Most slots of one hand-off link (buffers one auxiliary core may hold of one lane).
const MAX_LINK: usize = 1024;
/// How long worker 0 polls one lane at shutdown for what the auxiliary cores gave back.
const SETTLE_MS: u64 = 100;
/// Longest doorbell sleep of an auxiliary core (a backstop: a ring or the shutdown's ring
/// ends it sooner).
const DEEP_SLEEP_MS: u64 = 100;
/// Empty `vbar_us` sleeps in a row after which an auxiliary core sleeps on its doorbell (150 µs
/// at the default `vbar_us`), unless an epoch is shorter: a trickle of frames — one every few
/// milliseconds — then costs a wake per frame instead of a CPU spinning between them (the hosted
/// sleeper spins through sleeps under its 50 µs margin).
const DEEP_AFTER_SLEEPS: u64 = 10;

/// NetBlaze's auxiliary cores and the dedicated workers' count, as the workers share them.
pub(super) struct AuxShare {
    /// NetBlaze's auxiliary cores (`aux=`): what the dedicated workers' stages share, and
    /// each auxiliary core's links until it takes them; `None`/empty without.
    pub(super) plan: Option<Plan>,
    pub(super) parts: Vec<Slot>,
    /// Workers that serve lanes (the first `dedicated`; the rest are auxiliary), and how
    /// many of them have left their loop.
    pub(super) dedicated: usize,
    pub(super) dedicated_done: AtomicUsize,
    /// Set once the lanes are settled at shutdown: the auxiliary workers may return.
    pub(super) aux_exit: AtomicBool,
}

/// The dedicated workers' side: what every [`NetBlazeStage`] shares.
pub(super) struct Plan {
    lanes: SharedLanes,
    mapper: CoreMapper,
    profile: Arc<Profile>,
    /// How long an idle auxiliary core sleeps.
    pub sleep: Duration,
    /// Idle this long (`DEEP_AFTER_SLEEPS` sleeps, at most an epoch), an auxiliary core sleeps
    /// on its doorbell.
    deep_after: Duration,
    /// Each auxiliary core's doorbell (rung at shutdown, so a sleeping core returns).
    bells: Vec<Arc<Doorbell>>,
}

/// One auxiliary core's ends of the links and views of the lanes' pools, taken by the core
/// when it starts.
pub(super) struct Parts {
    ends: Vec<AuxEnd>,
    views: Vec<AuxView>,
    bell: Option<Arc<Doorbell>>,
}

/// One auxiliary core's [`Parts`] until it takes them.
pub(super) type Slot = Mutex<Option<Parts>>;

/// The auxiliary cores' wiring, or `None` with `aux=0`. Must run before the pools move into
/// the lanes (the views are made from them). A setting that cannot work is `Err`, naming the
/// boot option (exit 35).
pub(super) fn setup(
    cfg: &BootConfig,
    profile: Option<&Profile>,
    pools: &mut [Pool<'static>],
    rate: TickRate,
) -> Result<Option<(Plan, Vec<Slot>)>, String> {
    if cfg.aux == 0 {
        return Ok(None);
    }
    let Some(profile) = profile else {
        return Err(String::from(
            "boot option 'aux': auxiliary cores need a NetBlaze profile in the chain module ([netblaze.profile])",
        ));
    };
    if cfg.aux >= cfg.workers {
        return Err(alloc::format!(
            "boot option 'aux': {} auxiliary of {} workers leaves no worker to serve the lanes",
            cfg.aux,
            cfg.workers
        ));
    }
    // The epoch is the profile's: its frontier holds for that span only.
    if let Some(us) = cfg.epoch_us
        && u64::from(us) * 1_000 != profile.epoch_ns
    {
        return Err(alloc::format!(
            "boot option 'epoch_us': {us} us, but the profile's frontier was measured for {} us epochs \
             (cadence-ctl profile --epoch-us {us})",
            profile.epoch_ns / 1_000,
        ));
    }
    let mut nb = NetBlazeConfig::default();
    if cfg.slo_us > 0 {
        nb.slo_ns = u64::from(cfg.slo_us) * 1_000;
    }
    nb.epoch_ns = Some(profile.epoch_ns);
    let params = nb.validate().map_err(|e| alloc::format!("boot option 'aux'/'slo_us'/'epoch_us': {e}"))?;
    let smallest = pools.iter().map(Pool::capacity).min().unwrap_or(0);
    // A quarter of the smallest pool over the auxiliary cores, in 32..=1024 slots.
    let link = prev_power_of_two((smallest / 4 / cfg.aux).clamp(32, MAX_LINK));
    let lcfg = LaneConfig {
        epoch: rate.ticks_from_ns(profile.epoch_ns),
        link_capacity: link,
        tracked_flows: TRACKED_FLOWS,
        follow_flows: TRACKED_FLOWS,
    };
    let (states, mut ends) =
        offload::build(pools.len(), cfg.aux, lcfg).map_err(|e| alloc::format!("boot option 'aux': {e}"))?;
    let mut views: Vec<Vec<AuxView>> = (0..cfg.aux).map(|_| Vec::with_capacity(pools.len())).collect();
    for pool in pools.iter_mut() {
        for (a, v) in pool.aux_views(cfg.aux).into_iter().enumerate() {
            if let Some(list) = views.get_mut(a) {
                list.push(v);
            }
        }
    }
    let bells: Vec<Arc<Doorbell>> = (0..cfg.aux).filter_map(|a| states.first().and_then(|s| s.bell(a))).collect();
    let parts = ends
        .drain(..)
        .zip(views)
        .enumerate()
        .map(|(a, (ends, views))| Mutex::new(Some(Parts { ends, views, bell: bells.get(a).cloned() })))
        .collect();
    let plan = Plan {
        lanes: offload::share(states),
        mapper: CoreMapper::new(params),
        profile: Arc::new(profile.clone()),
        sleep: rate.ticks_from_us(u64::from(cfg.vbar_us).max(1)),
        deep_after: rate.ticks_from_ns(
            profile.epoch_ns.min(u64::from(cfg.vbar_us).max(1).saturating_mul(1_000 * DEEP_AFTER_SLEEPS)),
        ),
        bells,
    };
    Ok(Some((plan, parts)))
}

fn prev_power_of_two(n: usize) -> usize {
    if n.is_power_of_two() { n } else { n.next_power_of_two() / 2 }
}

/// A dedicated worker's stage: `chain`, wrapped when auxiliary cores exist; a hand-off wakes
/// a sleeping auxiliary core with `wake`.
pub(super) fn stage(plan: Option<&Plan>, chain: Chain, wake: WakeHook) -> NetBlazeStage {
    match plan {
        Some(p) => NetBlazeStage::new(chain, p.lanes.clone(), p.mapper, p.profile.clone()).with_wake(wake),
        None => NetBlazeStage::off(chain),
    }
}

/// Lets the auxiliary workers return (once their rings are empty), waking any asleep on its
/// doorbell.
pub(super) fn exit<M: Machine, P: FwdPort>(sh: &Shared<M, P>) {
    sh.aux.aux_exit.store(true, Ordering::Release);
    if let Some(plan) = &sh.aux.plan {
        for bell in &plan.bells {
            bell.ring(sh.machine.wake_hook());
        }
    }
}

/// Polls lane `k` (held by the caller) through `pl` until every buffer it handed to an
/// auxiliary core is back and transmitted, or `SETTLE_MS` passes; `true` when settled.
pub(super) fn settle<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    pl: &mut Worker<NetBlazeStage>,
    k: usize,
    lane: &mut FwLane<P>,
) -> bool {
    let Some(plan) = &sh.aux.plan else { return true };
    let Some(state) = plan.lanes.get(k) else { return true };
    let clock = sh.clock;
    poll_until(&clock, clock.rate().ticks_from_ms(SETTLE_MS), || {
        let _ = pl.drain_lane(k, lane, &clock, 1);
        state.lock().all_reclaimed()
    })
    .is_ok()
}

/// Auxiliary worker `w` (the `a`-th): serves its links until the dedicated workers are done
/// and its rings are empty, publishing like any worker; then returns.
pub(super) fn run<M: Machine, P: FwdPort>(sh: &'static Shared<M, P>, w: usize, a: usize) {
    let parts = sh.aux.parts.get(a).and_then(|p| p.lock().take());
    let (Some(plan), Some(parts)) = (&sh.aux.plan, parts) else {
        say(sh.machine, format_args!("error: worker {w}: auxiliary core {a} has no links"));
        sh.failed.fetch_add(1, Ordering::Relaxed);
        sh.stop.store(true, Ordering::Release);
        sh.parked.fetch_add(1, Ordering::Release);
        return;
    };
    let mut sleeper = match sh.machine.sleeper(w) {
        Ok(s) => s,
        Err(e) => {
            say(sh.machine, format_args!("error: worker {w}: sleeper: {e}"));
            sh.failed.fetch_add(1, Ordering::Relaxed);
            sh.stop.store(true, Ordering::Release);
            sh.parked.fetch_add(1, Ordering::Release);
            return;
        }
    };
    let clock = sh.clock;
    let mut aux = AuxWorker::with_views(parts.ends, parts.views, sh.chains.for_worker());
    if let Some(bell) = parts.bell {
        aux = aux.with_bell(bell);
    }
    let first = clock.now();
    let mut halted = 0u64;
    let mut loops = 0u64;
    let mut busy_at = first;
    loop {
        let now = clock.now();
        let n = aux.poll_once(now);
        if let Some(hb) = sh.health.heartbeats.get(w) {
            hb.store(now.ticks(), Ordering::Relaxed);
        }
        loops += 1;
        if loops.is_multiple_of(PUBLISH_EVERY) {
            publish(sh, w, &aux, first, clock.now(), halted, false);
        }
        if n > 0 {
            busy_at = now;
            continue;
        }
        if sh.aux.aux_exit.load(Ordering::Acquire) && aux.pending() == 0 && aux.held() == 0 {
            break;
        }
        let before = clock.now();
        let woke = match aux.bell() {
            // Idle for `deep_after` and holding nothing (a give-back still owed is retried by
            // the next poll, not after a long sleep): off until a lane rings. Armed before the
            // last look at the rings (no lost wake-up, `Doorbell`).
            Some(bell)
                if sleeper.wakes_on_ring()
                    && aux.held() == 0
                    && before.saturating_since(busy_at) >= plan.deep_after =>
            {
                bell.arm();
                let woke = if aux.pending() == 0 && !sh.aux.aux_exit.load(Ordering::Acquire) {
                    let deep = clock.rate().ticks_from_ms(DEEP_SLEEP_MS);
                    sleeper.sleep_until_rung(before.saturating_add(deep), bell)
                } else {
                    before
                };
                bell.disarm();
                woke
            }
            _ => sleeper.sleep_until_watching(before.saturating_add(plan.sleep), aux.wake_address()),
        };
        halted = halted.saturating_add(woke.saturating_since(before).ticks());
    }
    publish(sh, w, &aux, first, clock.now(), halted, true);
    if let Some(s) = sh.telemetry.sleeps.get(w) {
        *s.lock() = M::sleep_summary(&sleeper);
    }
    sh.parked.fetch_add(1, Ordering::Release);
}

/// Copies an auxiliary core's counters into its slot: its chain's drops (conservation sums
/// them with the dedicated workers'), its elapsed and halted time, the frames it processed.
fn publish<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    w: usize,
    aux: &AuxWorker<'static>,
    first: Instant,
    now: Instant,
    halted: u64,
    wait: bool,
) {
    if let Some(slot) = sh.telemetry.slots.get(w) {
        let guard = if wait { Some(slot.lock()) } else { slot.try_lock() };
        if let Some(mut s) = guard {
            let st: AuxStats = *aux.stats();
            let fwd = PollStats { stage: *aux.counters(), polls: st.polls, busy_polls: st.busy_polls, ..s.fwd };
            let mut core = s.core;
            core.elapsed_ticks = now.saturating_since(first).ticks();
            core.halted_ticks = halted;
            core.packets = st.frames;
            *s = super::Slot { fwd, core, aux: st, ..*s };
        }
    }
    sh.chains.publish(w, aux.chain(), wait);
}
