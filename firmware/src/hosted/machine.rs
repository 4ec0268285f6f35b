//! The hosted [`Machine`]: the TSC clock calibrated against `CLOCK_MONOTONIC_RAW`, one
//! `NanoSleeper` per worker thread, worker threads pinned to CPUs, stdout as COM1 through a
//! printer thread (so a slow reader of stdout costs a skipped `@stats` line, never a stall).

use std::fmt::{self, Write};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use cadence_core::sync::doorbell::WakeHook;
use cadence_core::time::{Clock, Duration};
use cadence_firmware::forward::{BootNonce, Machine, Outcome, SleepSummary};
use cadence_platform::hosted::clock::HostClock;
use cadence_platform::hosted::iface;
use cadence_platform::hosted::sleep::{Arrival, NanoSleeper, SleepConfig, SleepError, futex_wake};
use cadence_platform::hosted::thread::{self, Pin, ThreadError, Worker};

/// Lines queued for stdout before `try_line` starts skipping.
const QUEUED_LINES: usize = 4;

/// Extra counters of the hosted build, written by [`Machine::write_extra`].
pub trait Extra: Send + Sync {
    /// ` key=value` pairs (socket statistics of the ports).
    fn write(&self, out: &mut dyn Write) -> fmt::Result;
}

/// A returned worker's CPU time and wall time, ns.
type Finished = (u64, u64);

/// The machine the hosted build runs on.
pub struct Hosted {
    clock: HostClock,
    sleep: SleepConfig,
    /// CPU of worker `w` (`None`: unpinned).
    cpus: Vec<Option<usize>>,
    workers: Mutex<Vec<(usize, Worker<()>)>>,
    /// When each worker started (worker 0: when it was pinned), for `core{i}_wall_ns`.
    started: Mutex<Vec<Option<std::time::Instant>>>,
    /// CPU time and wall time of workers whose thread has returned (their CPU clock is
    /// gone then), recorded by the thread itself as its last act.
    finished: Arc<Mutex<Vec<Option<Finished>>>>,
    /// To the printer thread; `None` once flushed.
    out: Mutex<Option<SyncSender<String>>>,
    printer: Mutex<Option<JoinHandle<()>>>,
    extra: Mutex<Option<Box<dyn Extra>>>,
    /// The ports' interfaces and their indices when opened ([`Machine::check`]).
    ifaces: Mutex<Vec<(String, u32)>>,
    /// Management input: chunks of stdin from the reader thread, and the chunk being taken.
    mgmt: Mutex<MgmtIn>,
    /// The receive queues whose arrivals end a worker's sleep (every sleeper gets them all:
    /// a worker may sleep on any lane).
    arrivals: Mutex<Vec<Arrival>>,
}

/// Unpinned workers allowed per online CPU ([`Machine::max_workers`]).
pub const UNPINNED_PER_CPU: usize = 4;

/// Chunks of stdin queued before the reader thread waits (backpressure, nothing dropped).
const MGMT_CHUNKS: usize = 8;
/// Bytes per chunk read from stdin.
const MGMT_CHUNK: usize = 256;

/// The management input of the hosted build: stdin, read by a thread of its own (blocking
/// reads cost no CPU), handed to worker 0 in chunks through a bounded channel.
#[derive(Default)]
struct MgmtIn {
    rx: Option<Receiver<Vec<u8>>>,
    chunk: Vec<u8>,
    at: usize,
}

fn stdin_reader(tx: SyncSender<Vec<u8>>) {
    use std::io::Read as _;
    let mut stdin = std::io::stdin().lock();
    loop {
        let mut buf = vec![0u8; MGMT_CHUNK];
        match stdin.read(&mut buf) {
            // End of input (no management channel, or it closed): nothing more to read.
            Ok(0) | Err(_) => return,
            Ok(n) => {
                buf.truncate(n);
                if tx.send(buf).is_err() {
                    return;
                }
            }
        }
    }
}

impl fmt::Debug for Hosted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hosted").field("clock", &self.clock.source()).field("cpus", &self.cpus).finish_non_exhaustive()
    }
}

/// Why a hosted worker could not be had.
#[derive(Debug, Clone, Copy)]
pub enum HostedError {
    /// The thread's sleeper.
    Sleeper(SleepError),
    /// Starting or pinning the thread.
    Thread(ThreadError),
}

impl fmt::Display for HostedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostedError::Sleeper(e) => write!(f, "{e}"),
            HostedError::Thread(e) => write!(f, "{e}"),
        }
    }
}

fn printer(rx: Receiver<String>) {
    use std::io::Write as _;
    let stdout = std::io::stdout();
    for line in rx {
        let mut out = stdout.lock();
        // A closed stdout ends the printing, not the dataplane.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            break;
        }
    }
}

impl Hosted {
    /// A machine on `clock`, worker `w` pinned to `cpus[w]` (if given).
    pub fn new(clock: HostClock, sleep: SleepConfig, cpus: Vec<Option<usize>>) -> Hosted {
        let (out, rx) = mpsc::sync_channel(QUEUED_LINES);
        let printer = std::thread::Builder::new().name("cadence-stdout".into()).spawn(move || printer(rx)).ok();
        let (mgmt_tx, mgmt_rx) = mpsc::sync_channel(MGMT_CHUNKS);
        let reader = std::thread::Builder::new().name("cadence-stdin".into()).spawn(move || stdin_reader(mgmt_tx));
        let mgmt = MgmtIn { rx: reader.ok().map(|_| mgmt_rx), ..MgmtIn::default() };
        Hosted {
            clock,
            sleep,
            cpus: cpus.clone(),
            workers: Mutex::new(Vec::new()),
            started: Mutex::new(vec![None; cpus.len()]),
            finished: Arc::new(Mutex::new(vec![None; cpus.len()])),
            out: Mutex::new(Some(out)),
            printer: Mutex::new(printer),
            extra: Mutex::new(None),
            ifaces: Mutex::new(Vec::new()),
            mgmt: Mutex::new(mgmt),
            arrivals: Mutex::new(Vec::new()),
        }
    }

    /// The interfaces to watch: `(name, ifindex)` as opened.
    pub fn watch(&self, ifaces: Vec<(String, u32)>) {
        *self.ifaces.lock().unwrap_or_else(|p| p.into_inner()) = ifaces;
    }

    /// The receive queues a sleeper may wait on for arrivals ([`NanoSleeper::with_arrivals`]);
    /// none (the default, or `idle_us=0`'s choice is the worker's): deadline sleeps only.
    pub fn set_arrivals(&self, a: Vec<Arrival>) {
        *self.arrivals.lock().unwrap_or_else(|p| p.into_inner()) = a;
    }

    /// Adds the ports' counters to the stats lines.
    pub fn set_extra(&self, e: Box<dyn Extra>) {
        *self.extra.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    /// Writes a line of the human log to stderr (stdout keeps the machine lines).
    pub fn log_line(&self, args: fmt::Arguments<'_>) {
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), "{args}");
    }

    /// Prints a line (waits for room in the queue).
    pub fn say(&self, args: fmt::Arguments<'_>) {
        self.send(args.to_string(), true);
    }

    /// Queues `line` for stdout; `wait`: wait for room, else give up when the queue is
    /// full. Returns whether it was queued.
    fn send(&self, line: String, wait: bool) -> bool {
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = out.as_ref() else { return false };
        if wait {
            tx.send(line).is_ok()
        } else {
            match tx.try_send(line) {
                Ok(()) => true,
                Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
            }
        }
    }

    /// Waits until every queued line is on stdout; later lines are dropped (call it
    /// right before the process exits).
    pub fn flush(&self) {
        drop(self.out.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(h) = self.printer.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
    }

    /// Pins the calling thread as worker `w`.
    pub fn pin_current(&self, w: usize) -> Result<(), ThreadError> {
        self.mark_started(w);
        match self.cpus.get(w).copied().flatten() {
            Some(cpu) => thread::pin_current(cpu),
            None => Ok(()),
        }
    }

    fn mark_started(&self, w: usize) {
        if let Some(s) = self.started.lock().unwrap_or_else(|p| p.into_inner()).get_mut(w) {
            *s = Some(std::time::Instant::now());
        }
    }

    /// CPU time of worker `w` in ns (worker 0: the calling thread, which is worker 0 when
    /// the run reports).
    fn cpu_ns(&self, w: usize) -> Option<u64> {
        if w == 0 {
            return Some(thread::thread_cpu_time().as_nanos() as u64);
        }
        let ws = self.workers.lock().unwrap_or_else(|p| p.into_inner());
        ws.iter().find(|(i, _)| *i == w).and_then(|(_, h)| h.cpu_time().ok()).map(|d| d.as_nanos() as u64)
    }
}

impl Machine for Hosted {
    type Clock = HostClock;
    type Sleeper = NanoSleeper;
    type Error = HostedError;

    fn clock(&self) -> HostClock {
        self.clock
    }

    /// Pinned: one worker per online CPU. Unpinned (`--unpinned`): up to
    /// [`UNPINNED_PER_CPU`] per CPU — the kernel shares the CPUs between them, which is how
    /// Metronome's M > N idle case (several workers sleeping on one lane) can be measured on
    /// a machine with fewer CPUs than workers.
    fn max_workers(&self) -> usize {
        let cpus = thread::cpus_online().max(1);
        if self.cpus.iter().all(Option::is_none) { cpus * UNPINNED_PER_CPU } else { cpus }
    }

    /// A futex wake: a thread asleep on a doorbell is in a futex wait on its word.
    fn wake_hook(&self) -> WakeHook {
        futex_wake
    }

    fn sleeper(&self, worker: usize) -> Result<NanoSleeper, HostedError> {
        // Called on the worker's own thread: the thread a fence would stop.
        cadence_platform::hosted::process::register_worker_thread(worker);
        let arrivals = self.arrivals.lock().unwrap_or_else(|p| p.into_inner()).clone();
        NanoSleeper::new(self.clock, self.sleep).map(|s| s.with_arrivals(arrivals)).map_err(HostedError::Sleeper)
    }

    fn boot_nonce(&self) -> BootNonce {
        let (value, source) = cadence_platform::hosted::process::boot_nonce();
        BootNonce { value, source }
    }

    fn sleep_summary(s: &NanoSleeper) -> SleepSummary {
        let st = s.stats();
        SleepSummary {
            watched: st.arrival_wakes,
            idle_ns: Some(st.kernel_ns),
            spin_ns: Some(st.spin_ns),
            late_p50_ns: st.lateness_p50_ns(),
            late_p99_ns: st.lateness_p99_ns(),
            mwait_hollow: None,
        }
    }

    fn spawn(&self, worker: usize, job: Box<dyn FnOnce() + Send + 'static>) -> Result<(), HostedError> {
        let pin = self.cpus.get(worker).copied().flatten().map_or(Pin::Unpinned, Pin::Cpu);
        self.mark_started(worker);
        let finished = Arc::clone(&self.finished);
        let t0 = std::time::Instant::now();
        let run = move || {
            job();
            let cpu = thread::thread_cpu_time().as_nanos() as u64;
            if let Some(slot) = finished.lock().unwrap_or_else(|p| p.into_inner()).get_mut(worker) {
                *slot = Some((cpu, t0.elapsed().as_nanos() as u64));
            }
        };
        let h = thread::spawn(&format!("cadence-w{worker}"), pin, run).map_err(HostedError::Thread)?;
        self.workers.lock().unwrap_or_else(|p| p.into_inner()).push((worker, h));
        Ok(())
    }

    fn join(&self, worker: usize, timeout: Duration) -> bool {
        let deadline = self.clock.now().saturating_add(timeout);
        loop {
            let mut ws = self.workers.lock().unwrap_or_else(|p| p.into_inner());
            let Some(i) = ws.iter().position(|(w, _)| *w == worker) else { return true };
            if ws[i].1.is_finished() {
                let (_, h) = ws.swap_remove(i);
                return h.join().is_ok();
            }
            drop(ws);
            if self.clock.now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    fn line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) {
        let mut s = String::new();
        let _ = write(&mut s);
        self.send(s, true);
    }

    fn try_line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) -> bool {
        let mut s = String::new();
        let _ = write(&mut s);
        self.send(s, false)
    }

    fn stall_forever(&self, _worker: usize) -> ! {
        // A hung thread that costs no CPU (the other workers and the generator need it); the
        // fence signal interrupts it like any other code.
        loop {
            std::thread::park();
        }
    }

    fn fence(&self, worker: usize) -> Option<cadence_core::sync::Fenced> {
        cadence_platform::hosted::process::fence(worker, std::time::Duration::from_millis(500))
    }

    fn log(&self, args: fmt::Arguments<'_>) {
        self.log_line(args);
    }

    fn spawn_watchdog(&self, _index: usize, job: Box<dyn FnOnce() + Send + 'static>) -> bool {
        // An unpinned thread: it sleeps between checks, so it costs the workers nothing.
        std::thread::Builder::new().name("cadence-watchdog".into()).spawn(job).is_ok()
    }

    fn abort(&self, outcome: Outcome) -> ! {
        self.flush();
        std::process::exit(match outcome {
            Outcome::Success => 0,
            Outcome::ConfigError => 2,
            Outcome::RuntimeFailure => 1,
        })
    }

    fn read_mgmt(&self, buf: &mut [u8]) -> usize {
        let Ok(mut m) = self.mgmt.try_lock() else { return 0 };
        let m = &mut *m;
        if m.at >= m.chunk.len() {
            match m.rx.as_ref().map(Receiver::try_recv) {
                Some(Ok(c)) => (m.chunk, m.at) = (c, 0),
                _ => return 0,
            }
        }
        let rest = m.chunk.get(m.at..).unwrap_or(&[]);
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        m.at += n;
        n
    }

    fn stop_requested(&self) -> Option<&'static str> {
        cadence_platform::hosted::process::stop_requested()
    }

    fn check(&self) -> Result<(), String> {
        let ifaces = self.ifaces.lock().unwrap_or_else(|p| p.into_inner());
        for (port, (name, index)) in ifaces.iter().enumerate() {
            match iface::ifindex(name) {
                Ok(i) if i == *index => {}
                Ok(i) => return Err(format!("port {port}: interface {name} was replaced (index {index} -> {i})")),
                Err(e) => return Err(format!("port {port}: interface {name} vanished ({e})")),
            }
        }
        Ok(())
    }

    fn write_extra(&self, out: &mut dyn Write) -> fmt::Result {
        let started = self.started.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let finished = self.finished.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (w, t0) in started.iter().enumerate() {
            let done = finished.get(w).copied().flatten();
            let now = self.cpu_ns(w).zip(t0.map(|t| t.elapsed().as_nanos() as u64));
            if let Some((cpu, wall)) = done.or(now) {
                write!(out, " core{w}_cpu_ns={cpu} core{w}_wall_ns={wall}")?;
            }
        }
        if let Some(e) = self.extra.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            e.write(out)?;
        }
        Ok(())
    }
}
