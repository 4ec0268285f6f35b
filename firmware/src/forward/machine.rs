//! What differs per machine, behind two traits: [`Machine`] (clock, sleepers, starting and
//! joining workers, the console, the management input, fencing a hung core) and [`FwdPort`]
//! (a NIC's queues, RX filling, ring size and RSS table); and what a run reports back
//! ([`Outcome`], [`Event`], [`SleepSummary`], [`BootNonce`]).

use super::*;

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
    /// Sleeps a receive queue's write ended: MONITOR/MWAIT on bare metal, a frame's arrival
    /// in `ppoll` on the hosted build (`core{i}_mwait_sleeps`).
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
    /// 1 when the image's sleeper turned MONITOR/MWAIT off because it did not wait (an
    /// emulator's MWAIT that returns at once: `cadence_platform::sleep::HOLLOW_LIMIT`), 0
    /// while it waits (`core{i}_mwait_hollow`; image only).
    pub mwait_hollow: Option<u64>,
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
