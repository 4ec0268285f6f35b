//! [`NanoSleeper`]: the hosted [`Sleeper`], the role of the Metronome paper's `hr_sleep`
//! (a high-resolution sleep that gives the CPU back to the kernel).
//!
//! A sleep to `deadline` is two phases:
//!
//! 1. **kernel**: `clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME)` until
//!    `deadline − spin_margin` ([`HostClock::monotonic_deadline`] converts the TSC
//!    deadline). The thread is off the CPU; this is the only part that is idle time.
//!    The thread's timer slack is 1 ns (`PR_SET_TIMERSLACK`, set by [`NanoSleeper::new`]),
//!    so the kernel does not add its default 50 µs of slack.
//! 2. **spin**: `core::hint::spin_loop` on the clock until `deadline`. This absorbs the
//!    kernel's wake-up latency: a sleep ends at the deadline within the spin loop's
//!    granularity as long as the kernel woke less than `spin_margin` late.
//!
//! The margin trades CPU for punctuality. Measured on this project's 2-vCPU KVM-PVM
//! machines (`cargo run -p cadence-platform --release --example hosted_sleep`), the
//! kernel's own wake-up is 20–50 µs late at the median and 50–140 µs at p99 even with
//! 1 ns slack (margin 0); [`DEFAULT_SPIN_MARGIN_NS`] is chosen from that (see its docs).
//! On bare metal with a tickless kernel, 5–10 µs is typical.
//!
//! What [`Sleeper::sleep_until`] returns: the clock's time after the spin, i.e. the
//! wake time, `>= deadline` (the sleeper never returns early: it has no early wake-up
//! event). A passed deadline returns at once and is counted in [`SleepStats::passed`],
//! not in the lateness histogram (that lateness is the caller's, not the sleeper's).
//! The kernel phase's target is before the deadline, so no sleep outlasts its deadline
//! by more than the kernel's wake-up latency.

use super::Errno;
use super::clock::HostClock;
use cadence_core::hist::LogHistogram;
use cadence_core::nic::WakeAddr;
use cadence_core::sync::{Doorbell, doorbell};
use cadence_core::time::{Clock, Duration, Instant, Sleeper};
use core::fmt;
use core::marker::PhantomData;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

/// Receive queues one sleep may watch at most (a lane's: one per port).
pub const MAX_WATCHED: usize = 8;

/// A receive queue whose arrivals can end a [`NanoSleeper`]'s sleep: the addresses its wake
/// address ([`cadence_core::nic::RxQueue::wake_address`]) lies in — one word for an AF_XDP
/// RX ring's producer index, the whole ring for `AF_PACKET`, whose wake address moves from
/// block to block — and the socket whose `poll` reports a frame on it (`POLLIN`: an AF_XDP
/// socket's RX ring not empty, an `AF_PACKET` ring's block handed to user space). Made by the
/// socket's kick ([`super::kick::XskKick::arrival`], [`super::kick::PacketKick::arrival`]);
/// holds the socket open.
#[derive(Debug, Clone)]
pub struct Arrival {
    addrs: core::ops::Range<usize>,
    fd: Arc<OwnedFd>,
}

impl Arrival {
    /// Arrivals on the queue whose wake address lies in `addrs`, reported by `fd`.
    pub fn new(addrs: core::ops::Range<usize>, fd: Arc<OwnedFd>) -> Self {
        Self { addrs, fd }
    }

    /// Whether `a` is this queue's wake address.
    pub fn covers(&self, a: WakeAddr) -> bool {
        self.addrs.contains(&a.get())
    }
}

/// Default kernel/spin split: 50 µs.
///
/// Measured with 1 ns timer slack on the 2-vCPU KVM-PVM build machine (sleeps of 50 µs,
/// 200 µs, 1 ms, thousands each): with no margin the wake-up is 23–51 µs late at p50 and
/// 78–140 µs at p99 (up to ~1 ms while the host is busy); 20 µs still leaves p50 at
/// 4–22 µs; from 30 µs on the median sleep ends on time, and with 50 µs p50 is 11–31 ns
/// and p99 20–110 µs (host noise, which no margin short of a pure spin removes), while a
/// 1 ms sleep spends 99 % and a 200 µs sleep 92 % of its time off the CPU. Sleeps
/// shorter than the margin are spun entirely. Tune it with
/// [`SleepConfig::spin_margin_ns`] per machine: the lateness histogram tells how late
/// the kernel wakes.
pub const DEFAULT_SPIN_MARGIN_NS: u64 = 50_000;

/// Knobs of a [`NanoSleeper`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SleepConfig {
    /// How long before the deadline the kernel sleep ends and spinning starts.
    pub spin_margin_ns: u64,
}

impl Default for SleepConfig {
    fn default() -> Self {
        Self { spin_margin_ns: DEFAULT_SPIN_MARGIN_NS }
    }
}

impl SleepConfig {
    /// The default with a different spin margin.
    pub fn with_spin_margin_ns(ns: u64) -> Self {
        Self { spin_margin_ns: ns }
    }
}

/// Why no sleeper could be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SleepError {
    /// `prctl(PR_SET_TIMERSLACK, 1)` failed.
    TimerSlack(Errno),
}

impl fmt::Display for SleepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SleepError::TimerSlack(e) => write!(f, "prctl(PR_SET_TIMERSLACK, 1): {e}"),
        }
    }
}

impl std::error::Error for SleepError {}

/// What a [`NanoSleeper`] did.
#[derive(Debug, Clone, Default)]
pub struct SleepStats {
    /// Calls with a deadline still ahead (they waited).
    pub sleeps: u64,
    /// Calls whose deadline had already passed (returned at once).
    pub passed: u64,
    /// Calls that slept in the kernel (deadline further than the spin margin).
    pub kernel_sleeps: u64,
    /// Nanoseconds spent inside `clock_nanosleep`: off the CPU, the honest "halted" time.
    pub kernel_ns: u64,
    /// Nanoseconds spent spinning to the deadline: busy, on the CPU.
    pub spin_ns: u64,
    /// Wake-up lateness (wake time − deadline) of every waiting call, in nanoseconds.
    pub lateness: LogHistogram,
    /// Sleeps that waited in `ppoll` on receive queues ([`Arrival`]).
    pub arrival_sleeps: u64,
    /// Of those, the ones a frame ended before the deadline.
    pub arrival_wakes: u64,
}

impl SleepStats {
    /// Median lateness in ns (within 1/16), `None` before the first sleep.
    pub fn lateness_p50_ns(&self) -> Option<u64> {
        self.lateness.quantile(0.5)
    }

    /// 99th-percentile lateness in ns (within 1/16).
    pub fn lateness_p99_ns(&self) -> Option<u64> {
        self.lateness.quantile(0.99)
    }
}

/// Sleeps the calling thread until a deadline of a [`HostClock`] (see the module docs).
///
/// Made on the thread that uses it (it sets that thread's timer slack), so it is neither
/// `Send` nor `Sync`, like every [`Sleeper`].
#[derive(Debug)]
pub struct NanoSleeper {
    clock: HostClock,
    margin: Duration,
    stats: SleepStats,
    arrivals: Vec<Arrival>,
    _this_thread: PhantomData<*const ()>,
}

impl NanoSleeper {
    /// A sleeper for the calling thread; sets its timer slack to 1 ns.
    pub fn new(clock: HostClock, cfg: SleepConfig) -> Result<Self, SleepError> {
        // SAFETY: PR_SET_TIMERSLACK takes an integer argument and touches no memory.
        let r = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        if r != 0 {
            return Err(SleepError::TimerSlack(Errno::last()));
        }
        let margin = clock.rate().ticks_from_ns(cfg.spin_margin_ns);
        Ok(Self { clock, margin, stats: SleepStats::default(), arrivals: Vec::new(), _this_thread: PhantomData })
    }

    /// The same sleeper, able to wake on a frame's arrival on these receive queues
    /// ([`Sleeper::sleep_until_arrival`]).
    pub fn with_arrivals(mut self, arrivals: Vec<Arrival>) -> Self {
        self.arrivals = arrivals;
        self
    }

    /// Waits in `ppoll` on `fds` until one reports `POLLIN` or `until` (absolute); `true` if
    /// a frame ended it. Retried on `EINTR` with the time left; any other failure returns
    /// `false` (the caller spins to its deadline).
    fn poll_until(&self, fds: &mut [libc::pollfd], until: Instant) -> bool {
        loop {
            let now = self.clock.now();
            let ns = self.ns(until.saturating_since(now));
            let ts = libc::timespec {
                tv_sec: (ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (ns % 1_000_000_000) as libc::c_long,
            };
            // SAFETY: `fds` is a valid, initialised slice of `pollfd` whose length is passed;
            // `ts` is a valid relative timespec; no signal mask (NULL).
            let r = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, &ts, core::ptr::null()) };
            if r > 0 {
                return fds.iter().any(|p| p.revents & libc::POLLIN != 0);
            }
            if r == 0 || Errno::last().0 != libc::EINTR {
                return false;
            }
        }
    }

    /// The clock it sleeps on.
    pub fn clock(&self) -> HostClock {
        self.clock
    }

    /// The spin margin, in clock ticks.
    pub fn spin_margin(&self) -> Duration {
        self.margin
    }

    /// What it did so far.
    pub fn stats(&self) -> &SleepStats {
        &self.stats
    }

    /// Starts the statistics afresh (e.g. per reporting interval).
    pub fn reset_stats(&mut self) {
        self.stats = SleepStats::default();
    }

    fn ns(&self, d: Duration) -> u64 {
        self.clock.rate().ns(d)
    }

    /// `clock_nanosleep` until `until` (absolute), retried on `EINTR` with the same
    /// absolute target so a signal cannot stretch it.
    fn kernel_sleep(&self, until: Instant) {
        let ts = self.clock.monotonic_deadline(until);
        loop {
            // SAFETY: `ts` is a valid timespec; the remaining-time pointer may be NULL
            // with TIMER_ABSTIME.
            let r = unsafe {
                libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, core::ptr::null_mut())
            };
            // 0: done; EINTR: a signal, sleep on; anything else (EINVAL cannot happen
            // with a normalized timespec): give up and let the spin finish the job.
            if r != libc::EINTR {
                break;
            }
        }
    }
}

/// The hosted [`cadence_core::sync::doorbell::WakeHook`]: wakes the thread waiting on a
/// bell's word in [`NanoSleeper`]'s `sleep_until_rung` (a `futex` wake; a word nobody waits
/// on costs one system call that finds no waiter).
pub fn futex_wake(addr: WakeAddr) {
    // SAFETY: FUTEX_WAKE reads no memory at `addr`: the kernel hashes the address to find
    // waiters; a word nobody waits on wakes nobody. The address is a `Doorbell`'s word (a
    // live, 4-byte aligned `AtomicU32`, `Doorbell::wake_address`).
    unsafe {
        libc::syscall(libc::SYS_futex, addr.get() as *const u32, libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1i32);
    }
}

impl Sleeper for NanoSleeper {
    /// Whether every queue of `watch` was given ([`NanoSleeper::with_arrivals`]).
    fn wakes_on_arrival(&self, watch: &[WakeAddr]) -> bool {
        !watch.is_empty()
            && watch.len() <= MAX_WATCHED
            && watch.iter().all(|a| self.arrivals.iter().any(|x| x.covers(*a)))
    }

    /// Off the CPU in `ppoll` on the sockets of the watched queues until a frame arrives on
    /// one (returns at once, no spin: the frame is what the caller waits for) or until
    /// `deadline − spin margin`, then spun to the deadline as [`Sleeper::sleep_until`] does.
    /// Queues without an [`Arrival`] are not watched; with none, this is `sleep_until`.
    fn sleep_until_arrival(&mut self, deadline: Instant, watch: &[WakeAddr]) -> Instant {
        let mut fds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; MAX_WATCHED];
        let mut n = 0;
        for a in watch {
            if let (Some(x), Some(slot)) = (self.arrivals.iter().find(|x| x.covers(*a)), fds.get_mut(n)) {
                *slot = libc::pollfd { fd: x.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                n += 1;
            }
        }
        let now = self.clock.now();
        if n == 0 || now >= deadline || deadline.saturating_since(now) <= self.margin {
            return self.sleep_until(deadline);
        }
        self.stats.arrival_sleeps += 1;
        let arrived =
            self.poll_until(fds.get_mut(..n).unwrap_or(&mut []), Instant(deadline.ticks() - self.margin.ticks()));
        let woke = self.clock.now();
        self.stats.kernel_sleeps += 1;
        self.stats.kernel_ns += self.ns(woke.saturating_since(now));
        if arrived {
            self.stats.arrival_wakes += 1;
            return woke;
        }
        let mut t = woke;
        while t < deadline {
            core::hint::spin_loop();
            t = self.clock.now();
        }
        self.stats.spin_ns += self.ns(t.saturating_since(woke));
        self.stats.sleeps += 1;
        self.stats.lateness.record(self.ns(t.saturating_since(deadline)));
        t
    }

    /// Off the CPU until the bell is rung ([`futex_wake`]) or the deadline: a `futex` wait on
    /// the bell's word while it reads armed (so a ring between the caller's last check and
    /// the wait returns at once: the kernel compares the word before it sleeps), with the
    /// deadline as an absolute `CLOCK_MONOTONIC` timeout. No spin phase: what this sleep
    /// waits for is an event, not a deadline to hit. Counted as a kernel sleep.
    fn wakes_on_ring(&self) -> bool {
        true
    }

    fn sleep_until_rung(&mut self, deadline: Instant, bell: &Doorbell) -> Instant {
        let now = self.clock.now();
        if now >= deadline || !bell.is_armed() {
            return now;
        }
        let ts = self.clock.monotonic_deadline(deadline);
        while bell.is_armed() {
            // SAFETY: the word is a live, 4-byte aligned `AtomicU32` (`Doorbell::wake_address`)
            // that outlives the call (`bell` is borrowed for it); `ts` is a valid timespec;
            // FUTEX_WAIT_BITSET takes an absolute timeout on CLOCK_MONOTONIC; the second
            // address is unused by this operation.
            let r = unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    bell.wake_address().get() as *const u32,
                    libc::FUTEX_WAIT_BITSET | libc::FUTEX_PRIVATE_FLAG,
                    doorbell::ARMED,
                    &ts as *const libc::timespec,
                    core::ptr::null::<u32>(),
                    libc::FUTEX_BITSET_MATCH_ANY,
                )
            };
            // 0: woken (the loop re-reads the bell: a spurious wake-up sleeps again);
            // EAGAIN: the word changed before the wait (rung); EINTR: a signal, wait on;
            // ETIMEDOUT or anything else: the deadline, or a wait that cannot work — return.
            if r != 0 && Errno::last().0 != libc::EINTR && Errno::last().0 != libc::EAGAIN {
                break;
            }
        }
        let woke = self.clock.now();
        self.stats.kernel_sleeps += 1;
        self.stats.kernel_ns += self.ns(woke.saturating_since(now));
        woke
    }

    fn sleep_until(&mut self, deadline: Instant) -> Instant {
        let now = self.clock.now();
        if now >= deadline {
            self.stats.passed += 1;
            return now;
        }
        let mut spin_from = now;
        if deadline.saturating_since(now) > self.margin {
            self.kernel_sleep(Instant(deadline.ticks() - self.margin.ticks()));
            let woke = self.clock.now();
            self.stats.kernel_sleeps += 1;
            self.stats.kernel_ns += self.ns(woke.saturating_since(now));
            spin_from = woke;
        }
        let mut t = spin_from;
        while t < deadline {
            core::hint::spin_loop();
            t = self.clock.now();
        }
        self.stats.spin_ns += self.ns(t.saturating_since(spin_from));
        self.stats.sleeps += 1;
        self.stats.lateness.record(self.ns(t.saturating_since(deadline)));
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sleeper(margin_ns: u64) -> NanoSleeper {
        let (clock, _) = HostClock::calibrate();
        NanoSleeper::new(clock, SleepConfig::with_spin_margin_ns(margin_ns)).unwrap()
    }

    #[test]
    fn a_passed_deadline_returns_at_once() {
        let mut s = sleeper(DEFAULT_SPIN_MARGIN_NS);
        let c = s.clock();
        let past = c.now();
        let t0 = std::time::Instant::now();
        let woke = s.sleep_until(past);
        assert!(t0.elapsed() < std::time::Duration::from_millis(5));
        assert!(woke >= past);
        let woke = s.sleep_until(Instant(0));
        assert!(woke >= Instant(0));
        assert_eq!(s.stats().passed, 2);
        assert_eq!(s.stats().sleeps, 0);
        assert_eq!(s.stats().lateness.count(), 0);
    }

    #[test]
    fn sleeps_end_at_or_after_the_deadline_and_are_recorded() {
        let mut s = sleeper(DEFAULT_SPIN_MARGIN_NS);
        let c = s.clock();
        let durations_us = [10u64, 80, 300, 1_000, 3_000];
        for &us in &durations_us {
            let deadline = c.now().saturating_add(c.rate().ticks_from_us(us));
            let woke = s.sleep_until(deadline);
            assert!(woke >= deadline, "{us} µs sleep woke before its deadline");
            assert!(c.now() >= deadline);
        }
        let st = s.stats();
        assert_eq!(st.sleeps, durations_us.len() as u64);
        assert_eq!(st.lateness.count(), durations_us.len() as u64);
        // 10 µs is inside the margin: spun; the others went to the kernel (unless the
        // thread was preempted so long that less than the margin was left).
        assert!((1..durations_us.len() as u64).contains(&st.kernel_sleeps), "{st:?}");
        assert!(st.kernel_ns > 0 && st.spin_ns > 0);
        // Kernel + spin time is about the time asked for (plus lateness), never less
        // than the sleeps that went to the kernel minus their margins.
        let asked_ns: u64 = durations_us.iter().map(|us| us * 1_000).sum();
        assert!(st.kernel_ns + st.spin_ns + 20_000 >= asked_ns, "{st:?}");
        assert!(st.lateness_p50_ns().is_some() && st.lateness_p99_ns() >= st.lateness_p50_ns());
    }

    #[test]
    fn zero_margin_sleeps_only_in_the_kernel() {
        let mut s = sleeper(0);
        let c = s.clock();
        let deadline = c.now().saturating_add(c.rate().ticks_from_us(500));
        assert!(s.sleep_until(deadline) >= deadline);
        assert_eq!(s.stats().kernel_sleeps, 1);
        s.reset_stats();
        assert_eq!(s.stats().sleeps, 0);
    }

    #[test]
    fn lateness_quantiles_come_from_the_histogram() {
        let mut st = SleepStats::default();
        assert_eq!((st.lateness_p50_ns(), st.lateness_p99_ns()), (None, None));
        // 98 on-time wake-ups (20 ns), two very late ones (80 µs).
        for _ in 0..98 {
            st.lateness.record(20);
        }
        st.lateness.record(80_000);
        st.lateness.record(80_000);
        let p50 = st.lateness_p50_ns().unwrap();
        let p99 = st.lateness_p99_ns().unwrap();
        assert!(p50.abs_diff(20) <= 2, "p50 {p50}");
        assert!(p99.abs_diff(80_000) <= 80_000 / 16, "p99 {p99}");
    }

    #[test]
    fn timer_slack_is_one_nanosecond() {
        let _s = sleeper(DEFAULT_SPIN_MARGIN_NS);
        // SAFETY: PR_GET_TIMERSLACK reads an integer, touches no memory.
        let slack = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
        assert_eq!(slack, 1);
    }

    /// A thread asleep on an armed bell is woken by another thread's ring (futex wake), long
    /// before its deadline; an unarmed bell, or a passed deadline, returns at once; an armed
    /// bell nobody rings sleeps to its deadline, off the CPU.
    #[test]
    fn a_rung_bell_wakes_the_sleeper_and_the_deadline_is_the_backstop() {
        use std::sync::Arc;
        let mut s = sleeper(DEFAULT_SPIN_MARGIN_NS);
        assert!(s.wakes_on_ring());
        let c = s.clock();
        let bell = Arc::new(Doorbell::new());
        // Not armed: at once, no kernel sleep.
        let t0 = c.now();
        let far = t0.saturating_add(c.rate().ticks_from_ms(10_000));
        assert!(s.sleep_until_rung(far, &bell) < far);
        assert_eq!(s.stats().kernel_sleeps, 0);
        // Armed, rung by another thread after 20 ms: woken (the bell disarmed), not timed out.
        bell.arm();
        let ringer = {
            let bell = bell.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                assert!(bell.ring(futex_wake), "the sleeper was armed");
            })
        };
        let woke = s.sleep_until_rung(far, &bell);
        ringer.join().expect("ringer");
        assert!(woke < far, "woken by the ring, not the 10 s deadline");
        assert!(!bell.is_armed());
        assert_eq!(s.stats().kernel_sleeps, 1);
        // Armed and never rung: the deadline ends it (the kernel's timeout on CLOCK_MONOTONIC,
        // converted from the TSC deadline: within the calibration's error of it, far from
        // the 5 ms this sleep lasts).
        bell.arm();
        let near = c.now().saturating_add(c.rate().ticks_from_ms(5));
        let slack = c.rate().ticks_from_ms(1);
        assert!(s.sleep_until_rung(near, &bell).saturating_add(slack) >= near);
        assert!(bell.is_armed(), "nobody rang");
        assert_eq!(s.stats().kernel_sleeps, 2);
    }

    /// A sleep watching a socket ends when data arrives on it (another thread writes after
    /// 20 ms), long before its 10 s deadline; with nothing arriving it ends at its deadline;
    /// only registered queues count as watched.
    #[test]
    fn an_arrival_on_a_watched_socket_ends_the_sleep_and_the_deadline_is_the_backstop() {
        use std::io::Write;
        use std::os::unix::net::UnixStream;
        let (mut tx, rx) = UnixStream::pair().expect("socketpair");
        let (a, other) = (WakeAddr::new(0x1000), WakeAddr::new(0x2000));
        let mut s = sleeper(DEFAULT_SPIN_MARGIN_NS)
            .with_arrivals(vec![Arrival::new(0x1000..0x1004, Arc::new(OwnedFd::from(rx)))]);
        assert!(s.wakes_on_arrival(&[a]));
        assert!(!s.wakes_on_arrival(&[a, other]), "port 1's queue is not watched");
        assert!(!s.wakes_on_arrival(&[]));
        let c = s.clock();
        let far = c.now().saturating_add(c.rate().ticks_from_ms(10_000));
        let writer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tx.write_all(b"x").expect("write");
            tx
        });
        let woke = s.sleep_until_arrival(far, &[a]);
        let _tx = writer.join().expect("writer");
        assert!(woke < far, "woken by the arrival, not the 10 s deadline");
        assert_eq!((s.stats().arrival_sleeps, s.stats().arrival_wakes), (1, 1));
        // Data still unread: POLLIN at once again. A socket with nothing to read: the deadline.
        let (_quiet_tx, quiet_rx) = UnixStream::pair().expect("socketpair");
        let mut s = sleeper(DEFAULT_SPIN_MARGIN_NS)
            .with_arrivals(vec![Arrival::new(0x1000..0x1004, Arc::new(OwnedFd::from(quiet_rx)))]);
        let c = s.clock();
        let near = c.now().saturating_add(c.rate().ticks_from_ms(5));
        assert!(s.sleep_until_arrival(near, &[a]) >= near);
        assert_eq!((s.stats().arrival_sleeps, s.stats().arrival_wakes, s.stats().sleeps), (1, 0, 1));
        // An unwatched queue: a plain deadline sleep.
        let near = c.now().saturating_add(c.rate().ticks_from_ms(1));
        assert!(s.sleep_until_arrival(near, &[other]) >= near);
        assert_eq!(s.stats().arrival_sleeps, 1);
    }
}
