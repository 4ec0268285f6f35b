//! One poll of a lane's queues: RX burst on each port, the [`Stage`], TX burst on the
//! destination port, counters.
//!
//! One [`Poller::poll_once`] call:
//! 1. for each port `p`: `rx_burst` into a batch, count `p{p}_rx`/`p{p}_rx_bytes`,
//!    hand the batch to the stage, which empties it into per-port output batches
//!    (or frees and counts what it drops);
//! 2. for each port `q` with output: `tx_burst`; what the ring did not take is
//!    offered again, at most [`PollConfig::tx_retries`] more times within this
//!    poll, then freed and counted as [`DropReason::TxFull`] (and `p{q}_tx_full`);
//! 3. counts the poll (`polls`, and `busy_polls` when anything was received), and
//!    reports what happened in a [`PollOutcome`], including control commands and
//!    whether a periodic `@stats` line is due.
//!
//! After `poll_once` returns, the worker holds no buffers: every buffer is in a ring
//! or in the pool. The loop never panics and never allocates.
//!
//! **In-driver mark** ([`Poller::set_in_driver_word`]): a word that is set for exactly the
//! span of each driver call on the lane (`rx_burst`, `tx_burst`) and clear otherwise. If the
//! worker is stopped for good inside its round (a hung NF, a fault), whoever takes its lane
//! over reads it: clear means the lane's rings were left between two driver calls, consistent
//! (the pool, which the stage also touches, is rebuilt from its metadata:
//! `Pool::rebuild_free_list`); set means a ring may be half-written, and the lane is not
//! taken. The stores are `Relaxed` with a compiler fence on each side: the one who reads the
//! word runs after the stopped side acknowledged the stop with a `Release` store in its
//! program order.
//!
//! Counters the worker cannot see (the driver's `rx_err`, `no_buf`, and the pool's
//! `pool_in_use`) are passed to [`PollStats::write_counters`] by the caller in a
//! [`DriverCounters`], so one function writes every counter of docs/PROTOCOL.md in
//! its documented order.

use alloc::sync::Arc;
use core::fmt;
use core::sync::atomic::{AtomicBool, Ordering, compiler_fence};

use crate::buf::{BATCH_SIZE, Batch, Pool};
use crate::control::Commands;
use crate::drops::DropReason;
use crate::latency::Latency;
use crate::nic::{RxQueue, TxQueue};
use crate::stage::{PORTS, Stage, StageCounters};
use crate::time::{Clock, Duration, Instant, Timeout, poll_until};

/// Runtime knobs of a [`Poller`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub struct PollConfig {
    /// Extra `tx_burst` attempts for frames a full TX ring did not take, within one
    /// poll, before they are dropped as `TxFull`.
    pub tx_retries: u32,
    /// Period of [`PollOutcome::stats_due`]; zero turns it off.
    pub stats_period: Duration,
    /// The latency SLO frames are counted against ([`Latency::over_slo`]); zero: none.
    pub slo: Duration,
    /// Stamp received frames and time transmitted ones ([`crate::latency`]); on by default
    /// (off only to measure what the accounting costs).
    pub timing: bool,
}

impl PollConfig {
    /// A configuration with `tx_retries` and `stats_period`, no SLO.
    pub const fn new(tx_retries: u32, stats_period: Duration) -> Self {
        Self { tx_retries, stats_period, slo: Duration::ZERO, timing: true }
    }

    /// The same without latency accounting.
    pub const fn without_timing(self) -> Self {
        Self { timing: false, ..self }
    }

    /// The same with the latency SLO `slo`.
    pub const fn with_slo(self, slo: Duration) -> Self {
        Self { slo, ..self }
    }
}

impl Default for PollConfig {
    /// Four retries, no periodic stats.
    fn default() -> Self {
        Self::new(4, Duration::ZERO)
    }
}

/// Per-port counters kept by the worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PortCounters {
    /// Frames received.
    pub rx: u64,
    /// Bytes in those frames.
    pub rx_bytes: u64,
    /// Frames taken by the TX ring.
    pub tx: u64,
    /// Bytes in those frames.
    pub tx_bytes: u64,
    /// Frames dropped because the TX ring stayed full.
    pub tx_full: u64,
}

/// What a worker's polls counted: frames and bytes per port, drops by reason, polls (its
/// scheduling counters are [`crate::metronome::WorkerStats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PollStats {
    /// Per-port counters.
    pub ports: [PortCounters; PORTS],
    /// Drops by reason (TX-full drops included) and control frames.
    pub stage: StageCounters,
    /// Calls to `poll_once`.
    pub polls: u64,
    /// Polls that received at least one frame.
    pub busy_polls: u64,
}

/// Counters that the driver and pool keep, passed in for the stats line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DriverCounters {
    /// Per port: frames the device flagged as bad ([`crate::nic::RxStats::errors`]).
    pub rx_err: [u64; PORTS],
    /// Per port: ring refills that found the pool empty
    /// ([`crate::nic::RxStats::no_buffer`]).
    pub no_buf: [u64; PORTS],
    /// Buffers not in the pool ([`Pool::in_use`]).
    pub pool_in_use: u64,
}

impl DriverCounters {
    /// Reads the counters of one RX queue per port and of `pool`.
    pub fn from_queues<R: RxQueue>(rx: &[R], pool: &Pool<'_>) -> Self {
        let mut c = Self { pool_in_use: pool.in_use() as u64, ..Self::default() };
        for (i, q) in rx.iter().take(PORTS).enumerate() {
            let s = q.rx_stats();
            c.rx_err[i] = s.errors;
            c.no_buf[i] = s.no_buffer;
        }
        c
    }
}

impl PollStats {
    /// Adds `other`'s counters to these (summing the workers of several cores).
    pub fn merge(&mut self, other: &PollStats) {
        for (a, b) in self.ports.iter_mut().zip(other.ports.iter()) {
            a.rx = a.rx.saturating_add(b.rx);
            a.rx_bytes = a.rx_bytes.saturating_add(b.rx_bytes);
            a.tx = a.tx.saturating_add(b.tx);
            a.tx_bytes = a.tx_bytes.saturating_add(b.tx_bytes);
            a.tx_full = a.tx_full.saturating_add(b.tx_full);
        }
        self.stage.merge(&other.stage);
        self.polls = self.polls.saturating_add(other.polls);
        self.busy_polls = self.busy_polls.saturating_add(other.busy_polls);
    }

    /// Drops over every reason.
    pub fn drops_total(&self) -> u64 {
        self.stage.drops_total()
    }

    /// Writes every counter of docs/PROTOCOL.md as space-separated `key=value` pairs,
    /// in its order: `p{i}_rx p{i}_rx_bytes p{i}_tx p{i}_tx_bytes p{i}_rx_err
    /// p{i}_no_buf p{i}_tx_full` for each of the dataplane's `ports`, `drops`, `drop_<reason>`
    /// per [`DropReason`], `ctl`, `generated`, `pool_in_use`, `polls`, `busy_polls`. No leading
    /// space, no newline: the caller writes `@stats t_ms=… ` before and `\n` after.
    pub fn write_counters<W: fmt::Write + ?Sized>(&self, w: &mut W, drv: &DriverCounters, ports: usize) -> fmt::Result {
        for (i, p) in self.ports.iter().enumerate().take(ports) {
            let rx_err = drv.rx_err.get(i).copied().unwrap_or(0);
            let no_buf = drv.no_buf.get(i).copied().unwrap_or(0);
            write!(
                w,
                "p{i}_rx={} p{i}_rx_bytes={} p{i}_tx={} p{i}_tx_bytes={} p{i}_rx_err={rx_err} \
                 p{i}_no_buf={no_buf} p{i}_tx_full={} ",
                p.rx, p.rx_bytes, p.tx, p.tx_bytes, p.tx_full
            )?;
        }
        write!(w, "drops={}", self.drops_total())?;
        for r in DropReason::ALL {
            write!(w, " drop_{}={}", r.as_str(), self.stage.drops_for(r))?;
        }
        write!(
            w,
            " ctl={} generated={} pool_in_use={} polls={} busy_polls={}",
            self.stage.ctl, self.stage.generated, drv.pool_in_use, self.polls, self.busy_polls
        )
    }
}

/// What one [`Poller::poll_once`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PollOutcome {
    /// Frames received, all ports.
    pub rx: usize,
    /// Frames taken by TX rings, all ports.
    pub tx: usize,
    /// Frames dropped (any reason, TX-full included).
    pub dropped: usize,
    /// Control commands seen.
    pub commands: Commands,
    /// The clock's reading at the start of the poll.
    pub now: Instant,
    /// A `stats_period` has passed since the last time this was set.
    pub stats_due: bool,
}

/// A busy-poll worker over one RX and one TX queue per port.
#[derive(Debug)]
pub struct Poller<S> {
    stage: S,
    cfg: PollConfig,
    stats: PollStats,
    latency: Latency,
    rx_batch: Batch,
    out: [Batch; PORTS],
    next_stats: Option<Instant>,
    /// Set around each driver call (module docs, "In-driver mark"); `None`: not kept.
    in_driver: Option<Arc<AtomicBool>>,
}

/// Sets (or clears) `word` with nothing moved across it by the compiler.
#[inline(always)]
fn mark(word: &Option<Arc<AtomicBool>>, on: bool) {
    if let Some(w) = word {
        compiler_fence(Ordering::SeqCst);
        w.store(on, Ordering::Relaxed);
        compiler_fence(Ordering::SeqCst);
    }
}

impl<S: Stage> Poller<S> {
    /// A worker running `stage`.
    pub fn new(stage: S, cfg: PollConfig) -> Self {
        Self {
            stage,
            cfg,
            stats: PollStats::default(),
            latency: Latency::new(cfg.slo),
            rx_batch: Batch::new(),
            out: [const { Batch::new() }; PORTS],
            next_stats: None,
            in_driver: None,
        }
    }

    /// Keeps `word` set for the span of each driver call (module docs, "In-driver mark").
    pub fn set_in_driver_word(&mut self, word: Arc<AtomicBool>) {
        self.in_driver = Some(word);
    }

    /// The counters so far.
    pub fn stats(&self) -> &PollStats {
        &self.stats
    }

    /// The sojourn times of the frames this worker transmitted ([`crate::latency`]).
    pub fn latency(&self) -> &Latency {
        &self.latency
    }

    /// Turns the latency accounting ([`PollConfig::timing`]) on or off from the next poll.
    /// Frames a stage holds across the switch keep the stamp they had (none, or a buffer's
    /// earlier one): for measuring what the accounting costs, not for a running dataplane.
    pub fn set_timing(&mut self, on: bool) {
        self.cfg.timing = on;
    }

    /// The stage.
    pub fn stage(&self) -> &S {
        &self.stage
    }

    /// The stage, mutably (to reconfigure it between polls).
    pub fn stage_mut(&mut self) -> &mut S {
        &mut self.stage
    }

    /// One pass over every port: receive, process, transmit. `rx[p]` and `tx[p]` are
    /// port `p`'s queues; ports beyond [`PORTS`] are ignored. The stage sees one output batch
    /// per TX queue, so a frame it sends to a port without one is dropped as `TxFull` there.
    pub fn poll_once<R, T, C>(&mut self, pool: &mut Pool<'_>, rx: &mut [R], tx: &mut [T], clock: &C) -> PollOutcome
    where
        R: RxQueue,
        T: TxQueue,
        C: Clock + ?Sized,
    {
        let now = clock.now();
        // The ports this poll can send on: the stage gets an output batch for each of them
        // only, and only those are looked at below.
        let ports = tx.len().min(PORTS);
        let drops_before = self.stats.stage.drops_total();
        let mut outcome = PollOutcome { now, ..PollOutcome::default() };
        if self.stage.backlog_due(now) {
            let waiting = rx.iter().take(PORTS).filter_map(|q| q.pending()).sum();
            self.stage.ring_backlog(waiting);
        }

        for (port, q) in rx.iter_mut().take(PORTS).enumerate() {
            // Left empty by the stage; cleared anyway so a faulty stage cannot make
            // the worker hand the same buffer out twice.
            if !self.rx_batch.is_empty() {
                pool.free_batch(&mut self.rx_batch);
            }
            mark(&self.in_driver, true);
            let n = q.rx_burst(pool, &mut self.rx_batch);
            mark(&self.in_driver, false);
            if n == 0 {
                continue;
            }
            outcome.rx += n;
            // Arrival stamps for the latency accounting (this poll's clock reading, or the
            // driver's own where it has one), in the same pass over the frames' metadata as
            // the byte count.
            let bytes = if self.cfg.timing {
                if q.stamps_arrival() {
                    let (bytes, from_poll) = pool.stamp_batch_unstamped(&self.rx_batch, now.ticks());
                    self.latency.count_from_poll(from_poll);
                    bytes
                } else {
                    pool.stamp_batch(&self.rx_batch, now.ticks())
                }
            } else {
                self.rx_batch.as_slice().iter().map(|&b| pool.len(b) as u64).sum::<u64>()
            };
            if let Some(c) = self.stats.ports.get_mut(port) {
                c.rx += n as u64;
                c.rx_bytes += bytes;
            }
            let out = self.out.get_mut(..ports).unwrap_or_default();
            let cmds = self.stage.process(port, pool, &mut self.rx_batch, out, &mut self.stats.stage, now);
            outcome.commands.merge(cmds);
        }
        // Frames the stage originates (exports) go out with this poll's.
        self.stage.idle(pool, self.out.get_mut(..ports).unwrap_or_default(), &mut self.stats.stage, now);

        // The ports with frames to send, in one look at their output batches (a poll often
        // sends on few of them).
        let mut busy =
            self.out.iter().take(ports).enumerate().fold(0u32, |m, (p, o)| m | u32::from(!o.is_empty()) << p);
        // One clock reading for every frame handed to a TX ring in this poll.
        let tx_now = if self.cfg.timing && busy != 0 { clock.now() } else { now };
        while busy != 0 {
            let port = busy.trailing_zeros() as usize;
            busy &= busy - 1;
            outcome.tx += self.transmit(pool, port, tx.get_mut(port), tx_now);
        }

        self.stats.polls += 1;
        if outcome.rx > 0 {
            self.stats.busy_polls += 1;
        }
        outcome.dropped = self.stats.stage.drops_total().saturating_sub(drops_before) as usize;
        outcome.stats_due = self.stats_due(now);
        outcome
    }

    /// Offers `out[port]` to `txq`, retrying, and drops what is left as `TxFull`. Always
    /// inlined into `poll_once` (once per port): whether the compiler did so on its own
    /// depended on the caller's size, and cost about 1.5 cycles per packet where it did not.
    #[inline(always)]
    fn transmit<T: TxQueue>(&mut self, pool: &mut Pool<'_>, port: usize, txq: Option<&mut T>, now: Instant) -> usize {
        let (Some(out), Some(counters)) = (self.out.get_mut(port), self.stats.ports.get_mut(port)) else {
            return 0;
        };
        let mut sent = 0;
        // One pass over the frames' metadata: their lengths (the bytes sent) and, with the
        // latency accounting on, their stamps. Frames received in one poll share its stamp
        // and leave with one `now`: each run of equal stamps is recorded once (the histogram
        // is the same as frame by frame).
        let mut lens = [0u64; BATCH_SIZE];
        // (Each entry is the first buffer's length; made whole after the loop, where the pool
        // may hold frames over several buffers: one test per batch.)
        if self.cfg.timing {
            let (mut run_stamp, mut run) = (0u64, 0u64);
            for (l, &b) in lens.iter_mut().zip(out.as_slice()) {
                let (len, t) = pool.len_stamp(b);
                *l = len as u64;
                if t == run_stamp {
                    run += 1;
                    continue;
                }
                if run_stamp != 0 {
                    self.latency.record_n(now.ticks().saturating_sub(run_stamp), run);
                }
                (run_stamp, run) = (t, 1);
            }
            if run_stamp != 0 {
                self.latency.record_n(now.ticks().saturating_sub(run_stamp), run);
            }
        } else {
            for (l, &b) in lens.iter_mut().zip(out.as_slice()) {
                *l = pool.len(b) as u64;
            }
        }
        if pool.has_segmented() {
            whole_lens(pool, out, &mut lens);
        }
        if let Some(q) = txq {
            for _ in 0..=self.cfg.tx_retries {
                if out.is_empty() {
                    break;
                }
                // `tx_burst` takes from the front: these are `lens[sent..]`.
                mark(&self.in_driver, true);
                let n = q.tx_burst(pool, out).min(BATCH_SIZE);
                mark(&self.in_driver, false);
                counters.tx += n as u64;
                counters.tx_bytes += lens.iter().skip(sent).take(n).sum::<u64>();
                sent += n;
            }
        }
        let left = out.len() as u64;
        if left > 0 {
            counters.tx_full += left;
            self.stats.stage.count_drop(DropReason::TxFull, left);
            pool.free_batch(out);
        }
        sent
    }

    fn stats_due(&mut self, now: Instant) -> bool {
        let period = self.cfg.stats_period;
        if period == Duration::ZERO {
            return false;
        }
        match self.next_stats {
            None => {
                self.next_stats = Some(now.saturating_add(period));
                false
            }
            Some(due) if now >= due => {
                self.next_stats = Some(now.saturating_add(period));
                true
            }
            Some(_) => false,
        }
    }

    /// Waits until every TX ring has finished its frames (for STOP: "flush TX"),
    /// reclaiming completed buffers, for at most `timeout`.
    pub fn drain_tx<T: TxQueue, C: Clock + ?Sized>(
        &mut self,
        pool: &mut Pool<'_>,
        tx: &mut [T],
        clock: &C,
        timeout: Duration,
    ) -> Result<(), Timeout> {
        poll_until(clock, timeout, || {
            tx.iter_mut().fold(true, |idle, q| {
                q.reclaim(pool);
                idle && q.in_flight() == 0
            })
        })
    }
}

/// `lens` of `out`'s frames made whole: a frame over several buffers counts all of them.
#[cold]
#[inline(never)]
fn whole_lens(pool: &Pool<'_>, out: &Batch, lens: &mut [u64; BATCH_SIZE]) {
    for (l, &b) in lens.iter_mut().zip(out.as_slice()) {
        *l = pool.frame_len(b) as u64;
    }
}

#[cfg(test)]
mod tests;
