//! Live RSS changes (control commands RSS_MOVE and RSS_RESTORE) that reorder no flow.

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use cadence_core::netblaze::RetaChange;
use cadence_core::offload::NetBlazeStage;
use cadence_core::time::Clock;
use cadence_core::worker::Worker;
use spin::Mutex;

use super::{FwdPort, Machine, Shared, publish, say};

/// An RSS command for worker 0, from a control frame or the management channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RssCommand {
    /// RSS_MOVE: every indirection entry of queue `from` to queue `to`.
    Move { from: u8, to: u8 },
    /// RSS_RESTORE: the tables before the last move.
    Restore,
}

/// RSS moves: the command for worker 0, the tables before the last move, the lanes no table
/// entry points at.
pub(super) struct RssState {
    /// An RSS command for worker 0 (latest wins).
    pub(super) commands: RssMailbox,
    /// The tables before the last RSS_MOVE (for RSS_RESTORE).
    pub(super) saved: Mutex<Option<Saved>>,
    /// Lanes whose queue holds no RSS entry on any port (bit `k`), after the last table
    /// change: the workers visit them only on sweeps (`Worker::set_parked`).
    pub(super) parked_lanes: AtomicU64,
}

/// A one-command mailbox between the workers that receive RSS commands and worker 0, which
/// carries them out between its rounds. The rule: the latest command wins — a command posted
/// before worker 0 took the previous one replaces it (a host that sends MOVE then RESTORE
/// quickly gets the RESTORE). Posting and taking never block.
#[derive(Debug, Default)]
pub(super) struct RssMailbox(AtomicU32);

impl RssMailbox {
    const EMPTY: u32 = 0;
    const MOVE: u32 = 1 << 16;
    const RESTORE: u32 = 2 << 16;

    /// Leaves `cmd` for worker 0, replacing one it has not taken yet.
    pub(super) fn post(&self, cmd: RssCommand) {
        let word = match cmd {
            RssCommand::Move { from, to } => Self::MOVE | u32::from(from) << 8 | u32::from(to),
            RssCommand::Restore => Self::RESTORE,
        };
        self.0.store(word, Ordering::Relaxed);
    }

    /// The command waiting, if any; the mailbox is empty afterwards.
    pub(super) fn take(&self) -> Option<RssCommand> {
        match self.0.swap(Self::EMPTY, Ordering::Relaxed) {
            Self::EMPTY => None,
            Self::RESTORE => Some(RssCommand::Restore),
            w if w & !0xFFFF == Self::MOVE => Some(RssCommand::Move { from: (w >> 8) as u8, to: w as u8 }),
            // Nothing else is ever posted.
            _ => None,
        }
    }
}

/// Hang guard for taking the two lanes' locks (a worker holds a lane for one busy period).
const RSS_LOCK_MS: u64 = 100;
/// Most polls of the old lane while draining it: after the switch no frame of the moved
/// buckets reaches it, so what is left is at most one ring (4096 / 32 = 128 polls); the
/// margin covers frames the device was still writing.
const DRAIN_POLLS: usize = 256;

/// The tables before the last RSS_MOVE, for RSS_RESTORE.
#[derive(Debug, Clone, Default)]
pub(super) struct Saved {
    /// Per port, the indirection table before the move.
    tables: Vec<Vec<u16>>,
    /// The move it undoes.
    from: u8,
    to: u8,
}

/// Steers every RSS bucket of queue `from` to queue `to` on both ports, live, without
/// reordering any flow (the old queue is drained past the switch point before the new
/// queue serves that bucket):
/// 1. take the locks of lanes `from` and `to` only (bounded wait), so no worker serves
///    either meanwhile while every other lane keeps forwarding;
/// 2. write the new table on both ports (the drivers return once the device has it);
/// 3. drain lane `from` — frames that arrived before the switch — through this core's
///    stage, at most [`DRAIN_POLLS`] polls; frames of moved flows that arrive after the
///    switch wait in lane `to`;
/// 4. release the locks.
///
/// The old tables are kept for RSS_RESTORE. Prints `@rss moved from=… to=… buckets=…
/// drained=… empty=…` (or `@rss failed … reason=…`) and returns the same.
pub(super) fn move_buckets<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    pl: &mut Worker<NetBlazeStage>,
    ports: &mut [P],
    from: u8,
    to: u8,
) -> Result<Moved, &'static str> {
    let m = sh.machine;
    let lanes = sh.lanes.len();
    if from == to || usize::from(from) >= lanes || usize::from(to) >= lanes {
        say(m, format_args!("@rss failed from={from} to={to} reason=bad_queue lanes={lanes}"));
        return Err("bad_queue");
    }
    let mut before = Vec::with_capacity(ports.len());
    let mut after = Vec::with_capacity(ports.len());
    let mut moved = 0;
    for port in ports.iter() {
        let Some(table) = port.rss_table() else {
            say(m, format_args!("@rss failed from={from} to={to} reason=no_rss"));
            return Err("no_rss");
        };
        let mut new = table.clone();
        for e in new.iter_mut().filter(|e| **e == u16::from(from)) {
            *e = u16::from(to);
            moved += 1;
        }
        before.push(table);
        after.push(new);
    }
    match switch(sh, pl, ports, &after, from, to) {
        Ok((drained, empty)) => {
            *sh.rss.saved.lock() = Some(Saved { tables: before, from, to });
            say(
                m,
                format_args!(
                    "@rss moved from={from} to={to} buckets={moved} drained={drained} empty={}",
                    u8::from(empty)
                ),
            );
            Ok(Moved { from, to, buckets: moved, drained, empty })
        }
        Err(reason) => {
            say(m, format_args!("@rss failed from={from} to={to} reason={reason}"));
            Err(reason)
        }
    }
}

/// What a move or a restore did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Moved {
    /// The queue that gave up its buckets.
    pub from: u8,
    /// The queue that took them.
    pub to: u8,
    /// Table entries changed, over both ports (0 for a restore).
    pub buckets: usize,
    /// Frames drained from the old lane.
    pub drained: u64,
    /// Whether the old lane was found empty.
    pub empty: bool,
}

/// Undoes the last RSS_MOVE: its buckets go back from `to` to `from` by the same protocol
/// (lane `to`, which served them meanwhile, is drained before `from` serves them again).
/// Prints `@rss restored from=… to=… drained=… empty=…` (or `@rss failed … reason=…`) and
/// returns the same.
pub(super) fn restore<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    pl: &mut Worker<NetBlazeStage>,
    ports: &mut [P],
) -> Result<Moved, &'static str> {
    let m = sh.machine;
    let Some(saved) = sh.rss.saved.lock().take() else {
        say(m, format_args!("@rss failed restore reason=nothing_to_restore"));
        return Err("nothing_to_restore");
    };
    // Lane `to` holds the moved buckets' frames now: it is the one to drain.
    match switch(sh, pl, ports, &saved.tables, saved.to, saved.from) {
        Ok((drained, empty)) => {
            say(
                m,
                format_args!(
                    "@rss restored from={} to={} drained={drained} empty={}",
                    saved.from,
                    saved.to,
                    u8::from(empty)
                ),
            );
            Ok(Moved { from: saved.to, to: saved.from, buckets: 0, drained, empty })
        }
        Err(reason) => {
            say(m, format_args!("@rss failed restore reason={reason}"));
            *sh.rss.saved.lock() = Some(saved);
            Err(reason)
        }
    }
}

/// What [`apply_changes`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Applied {
    /// RSS_MOVE steps: one per (from, to) pair of queues.
    pub steps: usize,
    /// Frames drained from the old lanes.
    pub drained: u64,
    /// Whether every old lane was found empty.
    pub empty: bool,
}

impl Default for Applied {
    fn default() -> Self {
        Self { steps: 0, drained: 0, empty: true }
    }
}

/// Writes the server mapper's changed entries on both ports, live, without reordering any
/// flow: one step per (from, to) pair of queues, each the RSS_MOVE protocol of
/// [`move_buckets`] with only that pair's entries changed. Every step leaves each bucket's
/// queued frames in one lane (the one the table names), so any order of steps keeps that;
/// a step that fails leaves the tables as far as they got, and the mapper's next period
/// starts from the table the port holds. The saved tables of an earlier RSS_MOVE are
/// dropped (RSS_RESTORE after the mapper moved buckets has nothing to undo).
pub(super) fn apply_changes<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    pl: &mut Worker<NetBlazeStage>,
    ports: &mut [P],
    changes: &[RetaChange],
) -> Result<Applied, &'static str> {
    let mut pairs: Vec<(u16, u16)> = changes.iter().map(|c| (c.from, c.to)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    *sh.rss.saved.lock() = None;
    let mut out = Applied::default();
    for (from, to) in pairs {
        let (Ok(from8), Ok(to8)) = (u8::try_from(from), u8::try_from(to)) else { return Err("bad_queue") };
        let mut tables = Vec::with_capacity(ports.len());
        for port in ports.iter() {
            let Some(mut table) = port.rss_table() else { return Err("no_rss") };
            for c in changes.iter().filter(|c| (c.from, c.to) == (from, to)) {
                if let Some(e) = table.get_mut(usize::from(c.bucket)) {
                    *e = to;
                }
            }
            tables.push(table);
        }
        let (drained, empty) = switch(sh, pl, ports, &tables, from8, to8)?;
        out.steps += 1;
        out.drained += drained;
        out.empty &= empty;
    }
    Ok(out)
}

/// Locks lanes `drain` and `other`, writes `tables` (one per port), drains lane `drain`,
/// unlocks. Returns the frames drained and whether the lane was found empty.
fn switch<M: Machine, P: FwdPort>(
    sh: &Shared<M, P>,
    pl: &mut Worker<NetBlazeStage>,
    ports: &mut [P],
    tables: &[Vec<u16>],
    drain: u8,
    other: u8,
) -> Result<(u64, bool), &'static str> {
    let clock = sh.clock;
    let deadline = clock.now().saturating_add(clock.rate().ticks_from_ms(RSS_LOCK_MS));
    let queues = sh.ctl.lanes();
    let (Some(qd), Some(qo)) = (queues.get(usize::from(drain)), queues.get(usize::from(other))) else {
        return Err("bad_queue");
    };
    // Workers take one lane lock at a time, so taking two here cannot deadlock with them.
    let mut guards = Vec::with_capacity(2);
    for q in [qd, qo] {
        loop {
            if let Some(g) = q.lock().try_lock() {
                guards.push(g);
                break;
            }
            if clock.now() >= deadline {
                return Err("lanes_busy"); // Dropping `guards` releases what was taken.
            }
            core::hint::spin_loop();
        }
    }
    // A port that refuses keeps its old table while the other may have switched: the old
    // lane is drained all the same (both lanes are still locked), so order holds either way.
    let refused = ports.iter_mut().zip(tables).any(|(port, table)| port.set_rss_table(table).is_err());
    let mut result = (0, false);
    if let (Some(guard), Some(lane)) = (guards.first_mut(), sh.lanes.get(usize::from(drain)))
        && let Some(lane) = lane.get_mut(guard)
    {
        let d = pl.drain_lane(usize::from(drain), lane, &clock, DRAIN_POLLS);
        // Frames the old lane handed to auxiliary cores leave before the new lane serves
        // their flows (a lane that does not settle is reported as not drained).
        let settled = super::aux::settle(sh, pl, usize::from(drain), lane);
        result = (d.packets, d.empty && settled);
        // Commands met while draining count like any other.
        if d.commands.stop {
            sh.stop.store(true, Ordering::Release);
        }
        if d.commands.stats > 0 {
            sh.telemetry.stats_requested.store(true, Ordering::Relaxed);
        }
    }
    drop(guards);
    refresh_parked(sh, ports);
    publish(sh, 0, pl, false);
    if refused { Err("device_refused") } else { Ok(result) }
}

/// Lanes whose queue no port's RSS table names any more (bit `k`, `k` < 64): the workers
/// visit them only on sweeps, so a queue the server mapper released costs its cores (nearly)
/// nothing. A port without a table parks nothing.
fn refresh_parked<M: Machine, P: FwdPort>(sh: &Shared<M, P>, ports: &[P]) {
    let lanes = sh.lanes.len().min(64);
    let all = if lanes == 64 { u64::MAX } else { (1u64 << lanes) - 1 };
    let mut used = 0u64;
    for port in ports {
        let Some(table) = port.rss_table() else {
            sh.rss.parked_lanes.store(0, Ordering::Relaxed);
            return;
        };
        for &q in &table {
            if usize::from(q) < lanes {
                used |= 1 << q;
            }
        }
    }
    sh.rss.parked_lanes.store(all & !used, Ordering::Relaxed);
}

#[cfg(test)]
mod mailbox_tests {
    use super::{RssCommand, RssMailbox};

    #[test]
    fn the_mailbox_hands_over_one_command_and_the_latest_wins() {
        let m = RssMailbox::default();
        assert_eq!(m.take(), None);
        m.post(RssCommand::Move { from: 3, to: 0 });
        assert_eq!(m.take(), Some(RssCommand::Move { from: 3, to: 0 }));
        assert_eq!(m.take(), None, "taken once");
        // Two posts before one take: the second replaces the first.
        m.post(RssCommand::Move { from: 255, to: 254 });
        m.post(RssCommand::Restore);
        assert_eq!((m.take(), m.take()), (Some(RssCommand::Restore), None));
        m.post(RssCommand::Restore);
        m.post(RssCommand::Move { from: 0, to: 255 });
        assert_eq!(m.take(), Some(RssCommand::Move { from: 0, to: 255 }));
    }
}
