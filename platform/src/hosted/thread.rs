//! Worker threads: named, pinned to a CPU, with their CPU time readable from outside;
//! the process's CPU time; how many CPUs are online.
//!
//! Pinning is `sched_setaffinity(0, {cpu})` from inside the new thread before it runs
//! anything else; the spawner waits for the answer, so a refused CPU is an error at
//! spawn time ([`Pin::Cpu`]) or a recorded fallback to running unpinned
//! ([`Pin::Prefer`]). A thread's CPU time is its `CLOCK_THREAD_CPUTIME_ID`; another
//! thread reads it through the clock id `pthread_getcpuclockid` gave for it.

use super::Errno;
use core::fmt;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

/// Where a worker may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// On this CPU only; spawning fails if it does not exist or affinity is refused.
    Cpu(usize),
    /// On this CPU if possible, else anywhere (see [`Worker::placement`]).
    Prefer(usize),
    /// Anywhere the scheduler likes.
    Unpinned,
}

/// Where a worker ended up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Pinned to this CPU.
    Pinned(usize),
    /// Not pinned, as asked.
    Unpinned,
    /// Not pinned although [`Pin::Prefer`] asked: the reason.
    Refused(ThreadError),
}

/// Why a thread could not be started, pinned or read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadError {
    /// The CPU does not exist (`online` CPUs are online).
    NoSuchCpu {
        /// The CPU asked for.
        cpu: usize,
        /// CPUs online.
        online: usize,
    },
    /// `sched_setaffinity` refused the CPU (offline, or outside this process's cpuset).
    Affinity {
        /// The CPU asked for.
        cpu: usize,
        /// What the kernel said.
        errno: Errno,
    },
    /// The OS could not start a thread.
    Spawn,
    /// The worker panicked.
    Panicked,
    /// The worker has finished: its CPU clock is gone.
    Exited,
    /// `clock_gettime` on the worker's CPU clock failed.
    Clock(Errno),
}

impl fmt::Display for ThreadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ThreadError::NoSuchCpu { cpu, online } => {
                write!(f, "CPU {cpu} does not exist ({online} online: 0..={})", online.saturating_sub(1))
            }
            ThreadError::Affinity { cpu, errno } => write!(
                f,
                "cannot pin to CPU {cpu}: sched_setaffinity: {errno} (offline, or outside this process's cpuset/taskset)"
            ),
            ThreadError::Spawn => f.write_str("cannot start a thread"),
            ThreadError::Panicked => f.write_str("worker thread panicked"),
            ThreadError::Exited => f.write_str("worker thread has exited"),
            ThreadError::Clock(e) => write!(f, "reading a thread's CPU clock: {e}"),
        }
    }
}

impl std::error::Error for ThreadError {}

/// A running worker thread.
#[derive(Debug)]
pub struct Worker<T> {
    handle: JoinHandle<Option<T>>,
    tid: i32,
    cpu_clock: libc::clockid_t,
    placement: Placement,
}

impl<T> Worker<T> {
    /// The kernel's thread id (as in `/proc/self/task/TID`, `top -H`, `perf -t`).
    pub fn tid(&self) -> i32 {
        self.tid
    }

    /// Where it runs.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// Whether it has returned.
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// CPU time the worker has used so far (user + system), readable from any thread
    /// while it runs. After it has finished, [`ThreadError::Exited`].
    pub fn cpu_time(&self) -> Result<Duration, ThreadError> {
        if self.handle.is_finished() {
            return Err(ThreadError::Exited);
        }
        clock_time(self.cpu_clock).map_err(ThreadError::Clock)
    }

    /// Waits for the worker and returns what it returned.
    pub fn join(self) -> Result<T, ThreadError> {
        match self.handle.join() {
            Ok(Some(v)) => Ok(v),
            Ok(None) | Err(_) => Err(ThreadError::Panicked),
        }
    }
}

/// Starts `f` on a thread called `name` (at most 15 bytes show in `top`), placed as
/// `pin` says. Returns once the thread is placed; `f` runs after that.
pub fn spawn<T, F>(name: &str, pin: Pin, f: F) -> Result<Worker<T>, ThreadError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let (tx, rx) = mpsc::sync_channel::<Result<(i32, libc::clockid_t, Placement), ThreadError>>(1);
    let handle = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            let placement = match pin {
                Pin::Unpinned => Placement::Unpinned,
                Pin::Cpu(cpu) => match pin_current(cpu) {
                    Ok(()) => Placement::Pinned(cpu),
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return None;
                    }
                },
                Pin::Prefer(cpu) => match pin_current(cpu) {
                    Ok(()) => Placement::Pinned(cpu),
                    Err(e) => Placement::Refused(e),
                },
            };
            let tid = current_tid();
            let clock = match current_cpu_clock() {
                Ok(c) => c,
                Err(e) => {
                    let _ = tx.send(Err(ThreadError::Clock(e)));
                    return None;
                }
            };
            if tx.send(Ok((tid, clock, placement))).is_err() {
                return None;
            }
            drop(tx);
            Some(f())
        })
        .map_err(|_| ThreadError::Spawn)?;
    match rx.recv() {
        Ok(Ok((tid, cpu_clock, placement))) => Ok(Worker { handle, tid, cpu_clock, placement }),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => {
            let _ = handle.join();
            Err(ThreadError::Spawn)
        }
    }
}

/// Pins the calling thread to `cpu`.
pub fn pin_current(cpu: usize) -> Result<(), ThreadError> {
    let online = cpus_online();
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(ThreadError::NoSuchCpu { cpu, online });
    }
    // SAFETY: an all-zero cpu_set_t is the empty set (it is a plain bit array).
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: `cpu < CPU_SETSIZE`, the bound CPU_SET needs.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        return Ok(());
    }
    let errno = Errno::last();
    if cpu >= online && errno.raw() == libc::EINVAL {
        Err(ThreadError::NoSuchCpu { cpu, online })
    } else {
        Err(ThreadError::Affinity { cpu, errno })
    }
}

/// The CPU the calling thread is running on right now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// The calling thread's kernel thread id.
pub fn current_tid() -> i32 {
    // SAFETY: gettid takes no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_time() -> Duration {
    clock_time(libc::CLOCK_THREAD_CPUTIME_ID).unwrap_or_default()
}

/// CPU time of the whole process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessCpu {
    /// In user mode.
    pub user: Duration,
    /// In the kernel on the process's behalf (system calls, the copy-mode AF_XDP path).
    pub system: Duration,
}

/// `getrusage(RUSAGE_SELF)`: CPU time of every thread of the process, finished ones too.
pub fn process_cpu_time() -> ProcessCpu {
    // SAFETY: an all-zero rusage is a valid value (plain integers).
    let mut ru: libc::rusage = unsafe { core::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage; RUSAGE_SELF cannot fail.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32).saturating_mul(1_000));
    ProcessCpu { user: tv(ru.ru_utime), system: tv(ru.ru_stime) }
}

/// CPUs online (`sysconf(_SC_NPROCESSORS_ONLN)`), at least 1.
pub fn cpus_online() -> usize {
    // SAFETY: sysconf takes an integer name and touches no memory.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// The calling thread's CPU-time clock id, valid from any thread while it lives.
fn current_cpu_clock() -> Result<libc::clockid_t, Errno> {
    let mut id: libc::clockid_t = 0;
    // SAFETY: pthread_self() is the calling, live thread; `id` is writable.
    let r = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut id) };
    if r == 0 { Ok(id) } else { Err(Errno(r)) }
}

fn clock_time(clock: libc::clockid_t) -> Result<Duration, Errno> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    if r != 0 {
        return Err(Errno::last());
    }
    Ok(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spins until the calling thread has used `ms` of CPU.
    fn burn(ms: u64) {
        while thread_cpu_time() < Duration::from_millis(ms) {
            core::hint::spin_loop();
        }
    }

    #[test]
    fn pinned_worker_runs_on_its_cpu_and_is_named() {
        let w = spawn("cdn-test-w0", Pin::Cpu(0), || (current_cpu(), std::thread::current().name().map(str::to_owned)))
            .unwrap();
        assert_eq!(w.placement(), Placement::Pinned(0));
        assert!(w.tid() > 0);
        let (cpu, name) = w.join().unwrap();
        assert_eq!(cpu, Some(0));
        assert_eq!(name.as_deref(), Some("cdn-test-w0"));
    }

    #[test]
    fn a_missing_cpu_is_an_error_or_a_recorded_fallback() {
        let online = cpus_online();
        let e = spawn("cdn-test-w1", Pin::Cpu(online + 1000), || ()).unwrap_err();
        assert_eq!(e, ThreadError::NoSuchCpu { cpu: online + 1000, online });
        assert!(e.to_string().contains("does not exist"), "{e}");
        // A CPU number inside CPU_SETSIZE that is not online: refused by the kernel.
        let w = spawn("cdn-test-w2", Pin::Prefer(online + 3), || 7).unwrap();
        assert!(matches!(w.placement(), Placement::Refused(ThreadError::NoSuchCpu { .. })), "{:?}", w.placement());
        assert_eq!(w.join().unwrap(), 7);
    }

    #[test]
    fn worker_cpu_time_is_readable_from_outside() {
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (burnt_tx, burnt_rx) = mpsc::channel::<()>();
        let w = spawn("cdn-test-w3", Pin::Unpinned, move || {
            burn(60);
            let own = thread_cpu_time();
            burnt_tx.send(()).unwrap();
            let _ = go_rx.recv();
            own
        })
        .unwrap();
        assert_eq!(w.placement(), Placement::Unpinned);
        burnt_rx.recv().unwrap();
        let seen = w.cpu_time().unwrap();
        go_tx.send(()).unwrap();
        let own = w.join().unwrap();
        assert!(seen >= Duration::from_millis(60), "saw {seen:?} of CPU from outside");
        assert!(own >= Duration::from_millis(60), "the thread saw {own:?}");
        let p = process_cpu_time();
        assert!(p.user + p.system >= Duration::from_millis(60));
    }

    #[test]
    fn finished_worker_clock_is_gone() {
        let w = spawn("cdn-test-w4", Pin::Unpinned, || ()).unwrap();
        while !w.is_finished() {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(w.cpu_time(), Err(ThreadError::Exited));
        assert!(cpus_online() >= 1);
    }
}
