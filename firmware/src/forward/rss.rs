//! A live RSS change (control command RSS_MOVE) that reorders no flow.

use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use cadence_core::nf::Chain;
use cadence_core::pipeline::Pipeline;
use cadence_core::time::Clock;

use super::{FwdPort, Machine, Shared, publish, say};

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
pub(super) fn move_buckets<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    pl: &mut Pipeline<Chain>,
    ports: &mut [P],
    from: u8,
    to: u8,
) {
    let m = sh.machine;
    let lanes = sh.lanes.len();
    if from == to || usize::from(from) >= lanes || usize::from(to) >= lanes {
        say(m, format_args!("@rss failed from={from} to={to} reason=bad_queue lanes={lanes}"));
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
                say(m, format_args!("@rss failed from={from} to={to} reason=lanes_busy"));
                return; // Dropping `guards` releases what was taken.
            }
            core::hint::spin_loop();
        }
    }
    let mut moved = 0;
    for port in ports.iter_mut() {
        let Some(mut table) = port.rss_table() else {
            say(m, format_args!("@rss failed from={from} to={to} reason=no_rss"));
            return;
        };
        for e in table.iter_mut().filter(|e| **e == u16::from(from)) {
            *e = u16::from(to);
            moved += 1;
        }
        if let Err(e) = port.set_rss_table(&table) {
            say(m, format_args!("@rss failed from={from} to={to} reason={e}"));
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
    publish(sh, 0, pl, false);
    say(m, format_args!("@rss moved from={from} to={to} buckets={moved} drained={drained}"));
}
