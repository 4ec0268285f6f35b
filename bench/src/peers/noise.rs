//! The noise guard (issue 16, "Bad input"): how much CPU other processes used while a program
//! was measured, from `/proc/stat` and `getrusage`.
//!
//! Over a measurement window: busy time of the whole machine (`/proc/stat`'s `cpu` line:
//! user + nice + system + irq + softirq; idle, iowait and steal are not work done in this
//! guest) minus the CPU time of this process and of its waited-for children (the measured
//! program), divided by the wall time, is the number of CPUs others kept busy. A round in which
//! any measurement saw more than [`MAX_OTHERS_CPUS`] is refused.

use std::time::Instant;

use anyhow::{Context, Result};

/// Others may use at most this many CPUs during a measurement (the limit; the same
/// limit as the hosted bench's noise guard).
pub const MAX_OTHERS_CPUS: f64 = crate::bench::sysstat::NOISE_LIMIT;

pub use crate::bench::sysstat::{CpuTimes, parse_proc_stat};

/// One reading of everything the guard needs.
#[derive(Debug, Clone, Copy)]
pub struct Reading {
    pub stat: CpuTimes,
    /// CPU seconds of this process.
    pub own_s: f64,
    /// CPU seconds of this process's waited-for children.
    pub children_s: f64,
    pub at: Instant,
}

fn rusage_s(who: libc::c_int) -> f64 {
    let mut ru: libc::rusage = unsafe_zeroed_rusage();
    // SAFETY: `ru` is a valid, writable rusage; getrusage writes only into it.
    let rc = unsafe { libc::getrusage(who, &mut ru) };
    if rc != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn unsafe_zeroed_rusage() -> libc::rusage {
    // SAFETY: rusage is a plain C struct of integers, for which all-zero bytes are valid.
    unsafe { std::mem::zeroed() }
}

/// Clock ticks per second of `/proc/stat`.
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no memory effects.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

/// Reads `/proc/stat` and this process's usage now.
pub fn read() -> Result<Reading> {
    let s = std::fs::read_to_string("/proc/stat").context("reading /proc/stat")?;
    let stat = parse_proc_stat(&s).context("/proc/stat has no cpu line")?;
    Ok(Reading {
        stat,
        own_s: rusage_s(libc::RUSAGE_SELF),
        children_s: rusage_s(libc::RUSAGE_CHILDREN),
        at: Instant::now(),
    })
}

/// What happened on the machine during one window.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub wall_s: f64,
    /// CPU seconds of work on the whole machine.
    pub busy_s: f64,
    /// CPU seconds of this process and the programs it ran and waited for.
    pub ours_s: f64,
    /// CPU seconds the hypervisor gave to others (informational).
    pub steal_s: f64,
}

impl Window {
    /// The window between two readings.
    pub fn between(a: &Reading, b: &Reading, ticks_per_s: f64) -> Window {
        Window {
            wall_s: b.at.duration_since(a.at).as_secs_f64(),
            busy_s: b.stat.busy().saturating_sub(a.stat.busy()) as f64 / ticks_per_s,
            ours_s: (b.own_s - a.own_s).max(0.0) + (b.children_s - a.children_s).max(0.0),
            steal_s: b.stat.steal.saturating_sub(a.stat.steal) as f64 / ticks_per_s,
        }
    }

    /// CPUs that other processes kept busy on average (never negative: tick sampling can make
    /// the machine's busy time come out a little below our own).
    pub fn others_cpus(&self) -> f64 {
        if self.wall_s <= 0.0 {
            return 0.0;
        }
        ((self.busy_s - self.ours_s) / self.wall_s).max(0.0)
    }

    /// Whether the window was quiet enough to measure in.
    pub fn quiet(&self) -> bool {
        self.others_cpus() <= MAX_OTHERS_CPUS
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const STAT: &str = "cpu  1000 20 300 50000 40 5 6 7 0 0\ncpu0 500 10 150 25000 20 2 3 3 0 0\nintr 1 2 3\n";

    #[test]
    fn parses_the_aggregate_line() {
        let c = parse_proc_stat(STAT).expect("cpu line");
        assert_eq!(
            c,
            CpuTimes { user: 1000, nice: 20, system: 300, idle: 50000, iowait: 40, irq: 5, softirq: 6, steal: 7 }
        );
        assert_eq!(c.busy(), 1000 + 20 + 300 + 5 + 6);
        // Old kernels print fewer columns; the rest count as zero.
        assert_eq!(parse_proc_stat("cpu 1 2 3 4\n").map(|c| c.busy()), Some(6));
        assert_eq!(parse_proc_stat("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 2\n"), None);
        assert_eq!(parse_proc_stat("cpu 1 x 3 4\n"), None);
        assert_eq!(parse_proc_stat(""), None);
    }

    fn reading(stat: CpuTimes, own_s: f64, children_s: f64, at: Instant) -> Reading {
        Reading { stat, own_s, children_s, at }
    }

    #[test]
    fn others_are_busy_time_minus_ours_over_wall_time() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(10);
        let a = reading(CpuTimes { user: 1000, system: 100, idle: 5000, steal: 3, ..Default::default() }, 1.0, 2.0, t0);
        // 10 s: the machine did 13.0 CPU-s of work (1200 + 100 ticks), the measured program
        // 10.0 s and we 0.5 s, so others used 2.5 CPU-s: 0.25 CPUs.
        let b = reading(
            CpuTimes { user: 2000, system: 400, irq: 0, idle: 5700, steal: 13, ..Default::default() },
            1.5,
            12.0,
            t1,
        );
        let w = Window::between(&a, &b, 100.0);
        assert_eq!(w.wall_s, 10.0);
        assert_eq!(w.busy_s, 13.0);
        assert_eq!(w.ours_s, 10.5);
        assert_eq!(w.steal_s, 0.1);
        assert!((w.others_cpus() - 0.25).abs() < 1e-9);
        assert!(!w.quiet());
    }

    #[test]
    fn the_rule_is_at_most_a_fifth_of_a_cpu() {
        let w = |busy_s: f64, ours_s: f64| Window { wall_s: 2.0, busy_s, ours_s, steal_s: 0.0 };
        assert!(w(2.0, 2.0).quiet());
        assert!(w(2.4, 2.0).quiet()); // exactly 0.2 CPUs
        assert!(!w(2.41, 2.0).quiet());
        // Tick sampling can put our own time above the machine's: that is no one else's work.
        assert_eq!(w(1.9, 2.0).others_cpus(), 0.0);
        assert_eq!(Window { wall_s: 0.0, busy_s: 1.0, ours_s: 0.0, steal_s: 0.0 }.others_cpus(), 0.0);
    }

    #[test]
    fn counters_going_backwards_count_as_nothing() {
        let t0 = Instant::now();
        let a = reading(CpuTimes { user: 10, ..Default::default() }, 5.0, 5.0, t0);
        let b = reading(CpuTimes { user: 5, ..Default::default() }, 4.0, 4.0, t0 + Duration::from_secs(1));
        let w = Window::between(&a, &b, 100.0);
        assert_eq!((w.busy_s, w.ours_s), (0.0, 0.0));
    }

    #[test]
    fn reads_this_machine() {
        let a = read().expect("/proc/stat");
        let b = read().expect("/proc/stat");
        assert!(b.stat.busy() >= a.stat.busy());
        assert!(Window::between(&a, &b, clock_ticks()).others_cpus() >= 0.0);
    }
}
