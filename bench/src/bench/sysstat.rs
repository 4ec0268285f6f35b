//! Who used the CPUs during a trial, from `/proc` (`proc(5)`).
//!
//! - The dataplane's workers: `/proc/PID/task/TID/schedstat`, first field = time on the
//!   CPU in ns (`se.sum_exec_runtime`, what `CLOCK_THREAD_CPUTIME_ID` reads).
//! - Everything: the `cpu` line of `/proc/stat`, in `USER_HZ` ticks.
//! - Ourselves: `utime + stime` (fields 14, 15) of `/proc/PID/stat` for the dataplane's
//!   process and for this one, and of the `ksoftirqd/N` threads (which carry the kernel
//!   packet work our traffic defers to them).
//!
//! This kernel has no `CONFIG_IRQ_TIME_ACCOUNTING`: a tick that lands in softirq is
//! charged to the task it interrupted *and* shown in `/proc/stat`'s `softirq` column, so
//! "others" = (user + nice + system + irq + softirq) − our processes − ksoftirqd. A trial
//! where others used more than [`NOISE_LIMIT`] CPUs ran next to someone else's work.

use std::path::PathBuf;

/// Others' CPU use above which a round is flagged as noisy and left out of the ratios.
pub const NOISE_LIMIT: f64 = 0.2;

/// The `cpu` line of `/proc/stat`, in ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTimes {
    /// Ticks some task or interrupt ran (everything but idle, iowait and steal; guest time
    /// is already inside user).
    pub fn busy(&self) -> u64 {
        self.user + self.nice + self.system + self.irq + self.softirq
    }
}

/// Parses the aggregate `cpu` line of `/proc/stat`.
pub fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).map(|w| w.parse().ok()).collect::<Option<_>>()?;
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    if v.len() < 4 {
        return None;
    }
    Some(CpuTimes {
        user: at(0),
        nice: at(1),
        system: at(2),
        idle: at(3),
        iowait: at(4),
        irq: at(5),
        softirq: at(6),
        steal: at(7),
    })
}

/// `(comm, utime + stime)` of a `/proc/PID/stat` (or `task/TID/stat`) text. The command
/// name is in parentheses and may itself hold spaces and parentheses: the fields start
/// after the last `)`.
pub fn parse_task_stat(text: &str) -> Option<(String, u64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    // After ")": field 3 (state) is the first; utime and stime are fields 14 and 15.
    let rest: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

/// The first field of a `schedstat` text: ns on the CPU.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// `USER_HZ` (`sysconf(_SC_CLK_TCK)`), 100 on Linux.
pub fn clk_tck() -> u64 {
    // SAFETY: sysconf takes an integer name and touches no memory.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(v).ok().filter(|&v| v > 0).unwrap_or(100)
}

fn monotonic_ns() -> u64 {
    cadence_platform::hosted::clock::clock_ns(libc::CLOCK_MONOTONIC)
}

fn task_ticks(path: &str) -> u64 {
    std::fs::read_to_string(path).ok().and_then(|t| parse_task_stat(&t)).map_or(0, |(_, t)| t)
}

/// Thread ids of `pid` whose name satisfies `keep`.
pub fn tasks_named(pid: i32, keep: impl Fn(&str) -> bool) -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut v: Vec<i32> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|tid| std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).is_ok_and(|c| keep(c.trim_end())))
        .collect();
    v.sort_unstable();
    v
}

/// The `ksoftirqd/N` kernel threads.
pub fn ksoftirqd_pids() -> Vec<i32> {
    let Ok(rd) = std::fs::read_dir("/proc") else { return Vec::new() };
    rd.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with("ksoftirqd/")))
        .collect()
}

/// What to read at the start and end of a trial.
#[derive(Debug, Clone, Default)]
pub struct CpuProbe {
    /// `schedstat` files of the dataplane's worker threads.
    pub workers: Vec<PathBuf>,
    /// The dataplane's process (all its threads), if it is one.
    pub dut_pid: Option<i32>,
    /// `ksoftirqd/N`.
    pub ksoftirqd: Vec<i32>,
}

impl CpuProbe {
    /// A probe of `workers` (thread ids) of process `pid`.
    pub fn new(pid: Option<i32>, workers: &[i32]) -> CpuProbe {
        CpuProbe {
            workers: match pid {
                Some(p) => workers.iter().map(|t| PathBuf::from(format!("/proc/{p}/task/{t}/schedstat"))).collect(),
                None => Vec::new(),
            },
            dut_pid: pid,
            ksoftirqd: ksoftirqd_pids(),
        }
    }

    /// Reads everything now.
    pub fn snapshot(&self) -> Snapshot {
        let stat = std::fs::read_to_string("/proc/stat").ok().and_then(|t| parse_proc_stat(&t)).unwrap_or_default();
        let workers_ns = self
            .workers
            .iter()
            .map(|p| std::fs::read_to_string(p).ok().and_then(|t| parse_schedstat(&t)).unwrap_or(0))
            .collect();
        Snapshot {
            wall_ns: monotonic_ns(),
            stat,
            workers_ns,
            dut_ticks: self.dut_pid.map_or(0, |p| task_ticks(&format!("/proc/{p}/stat"))),
            self_ticks: task_ticks("/proc/self/stat"),
            ksoftirqd_ticks: self.ksoftirqd.iter().map(|p| task_ticks(&format!("/proc/{p}/stat"))).sum(),
        }
    }
}

/// One reading of a [`CpuProbe`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub wall_ns: u64,
    pub stat: CpuTimes,
    /// Per worker thread, ns on the CPU.
    pub workers_ns: Vec<u64>,
    pub dut_ticks: u64,
    pub self_ticks: u64,
    pub ksoftirqd_ticks: u64,
}

/// CPU use between two snapshots, in CPUs (CPU-seconds per second).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Usage {
    pub wall_s: f64,
    /// Per worker thread.
    pub workers: Vec<f64>,
    /// Everyone's busy time.
    pub busy: f64,
    /// The dataplane's process, all threads.
    pub dut: f64,
    /// This process (generator, sink, bookkeeping).
    pub ours: f64,
    pub ksoftirqd: f64,
    /// Softirq + irq columns (packet work, ours or not).
    pub softirq: f64,
    /// Time the hypervisor ran something else on our vCPUs.
    pub steal: f64,
    /// Everything else: other processes.
    pub others: f64,
}

impl Usage {
    /// The workers together.
    pub fn workers_total(&self) -> f64 {
        self.workers.iter().fold(0.0, |a, b| a + b)
    }

    /// Whether others used more than [`NOISE_LIMIT`].
    pub fn noisy(&self) -> bool {
        self.others > NOISE_LIMIT
    }
}

/// CPU use from `a` to `b` with `tck` ticks per second.
pub fn usage(a: &Snapshot, b: &Snapshot, tck: u64) -> Usage {
    let wall_s = (b.wall_ns.saturating_sub(a.wall_ns) as f64 / 1e9).max(1e-9);
    let t = |x: u64, y: u64| y.saturating_sub(x) as f64 / tck as f64 / wall_s;
    let busy = t(a.stat.busy(), b.stat.busy());
    let dut = t(a.dut_ticks, b.dut_ticks);
    let ours = t(a.self_ticks, b.self_ticks);
    let ksoftirqd = t(a.ksoftirqd_ticks, b.ksoftirqd_ticks);
    Usage {
        wall_s,
        workers: a
            .workers_ns
            .iter()
            .zip(&b.workers_ns)
            .map(|(x, y)| y.saturating_sub(*x) as f64 / 1e9 / wall_s)
            .collect(),
        busy,
        dut,
        ours,
        ksoftirqd,
        softirq: t(a.stat.irq + a.stat.softirq, b.stat.irq + b.stat.softirq),
        steal: t(a.stat.steal, b.stat.steal),
        others: (busy - dut - ours - ksoftirqd).max(0.0),
    }
}

/// Others' CPU over a set of trials (wall-weighted mean) and whether that is above
/// [`NOISE_LIMIT`].
pub fn noise_of(trials: &[&Usage]) -> (f64, bool) {
    let wall: f64 = trials.iter().map(|u| u.wall_s).sum();
    if wall <= 0.0 {
        return (0.0, false);
    }
    let others = trials.iter().map(|u| u.others * u.wall_s).sum::<f64>() / wall;
    (others, others > NOISE_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_cpu_line() {
        let text = "cpu  277949 0 42552 345447 1899 3 2564 643 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1 2\n";
        let c = parse_proc_stat(text).unwrap();
        assert_eq!(
            c,
            CpuTimes {
                user: 277949,
                nice: 0,
                system: 42552,
                idle: 345447,
                iowait: 1899,
                irq: 3,
                softirq: 2564,
                steal: 643
            }
        );
        assert_eq!(c.busy(), 277949 + 42552 + 3 + 2564);
        assert_eq!(parse_proc_stat("cpu0 1 2 3 4\n"), None, "only the aggregate line counts");
        assert_eq!(parse_proc_stat("cpu  1 x 3 4\n"), None);
        // Old kernels have fewer columns.
        assert_eq!(parse_proc_stat("cpu  1 2 3 4\n").unwrap().steal, 0);
    }

    #[test]
    fn task_stat_with_a_hostile_name() {
        // comm "a) (b c" — parentheses and spaces inside the name.
        let text = "4242 (a) (b c) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 3 0 99 1 2 3";
        assert_eq!(parse_task_stat(text), Some(("a) (b c".to_string(), 287)));
        let real = "1 (systemd) S 0 1 1 0 -1 4194560 53420 3151244 158 2040 233 1065 8409 3826 20 0 1 0 6 23 1";
        assert_eq!(parse_task_stat(real), Some(("systemd".to_string(), 233 + 1065)));
        assert_eq!(parse_task_stat("1 (x) S 1 2"), None);
        assert_eq!(parse_schedstat("184755335 9765047 372\n"), Some(184_755_335));
        assert_eq!(parse_schedstat(""), None);
    }

    fn snap(wall_s: u64, busy_user: u64, softirq: u64, dut: u64, ours: u64, worker_ns: u64) -> Snapshot {
        Snapshot {
            wall_ns: wall_s * 1_000_000_000,
            stat: CpuTimes { user: busy_user, softirq, ..CpuTimes::default() },
            workers_ns: vec![worker_ns],
            dut_ticks: dut,
            self_ticks: ours,
            ksoftirqd_ticks: 0,
        }
    }

    #[test]
    fn others_are_what_is_left_and_flag_above_the_limit() {
        // 2 s, 100 ticks/s: 300 user + 60 softirq ticks = 1.8 CPUs busy; the dataplane 100
        // ticks (0.5), us 200 (1.0): others 0.3 CPUs.
        let a = snap(10, 1000, 0, 0, 0, 0);
        let b = snap(12, 1300, 60, 100, 200, 1_500_000_000);
        let u = usage(&a, &b, 100);
        assert!((u.busy - 1.8).abs() < 1e-9);
        assert!((u.others - 0.3).abs() < 1e-9, "{u:?}");
        assert!((u.softirq - 0.3).abs() < 1e-9);
        assert!((u.workers_total() - 0.75).abs() < 1e-9);
        assert!(u.noisy());
        // A quiet trial next to it: others 0.05 over 2 s; the mean over 4 s is 0.175.
        let quiet = Usage { wall_s: 2.0, others: 0.05, ..Usage::default() };
        let (mean, flagged) = noise_of(&[&u, &quiet]);
        assert!((mean - 0.175).abs() < 1e-9);
        assert!(!flagged);
        assert!(noise_of(&[&u]).1);
        assert_eq!(noise_of(&[]), (0.0, false));
        // Counters never go backwards into negative use.
        assert_eq!(usage(&b, &a, 100).others, 0.0);
    }
}
