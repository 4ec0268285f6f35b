//! The forwarding run on the host: a fake machine (std threads, a nanosecond clock,
//! `thread::sleep`) and copying software ports whose wires are shared queues, so the run's
//! whole life — start, rounds on several workers, STOP, wind-down, `@summary` — is checked
//! without any hardware.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex as StdMutex};
use std::thread::JoinHandle;
use std::time::Instant as StdInstant;
use std::vec;

use alloc::string::{String, ToString};

use cadence_core::buf::{Batch, HEADROOM, MAX_FRAME, Pool};
use cadence_core::control::{CONTROL_ETHERTYPE, Command};
use cadence_core::nic::{Port, PortStats, RssError, RxQueue, RxStats, TxQueue, TxStats};
use cadence_core::time::TickRate;

use super::*;

type Wire = Arc<StdMutex<VecDeque<Vec<u8>>>>;

/// Receive side of a copying port: frames on `wire` are copied into pool buffers.
struct WireRx {
    wire: Wire,
    stats: RxStats,
    /// While set, every burst is topped up with flood frames after the wire's own: the
    /// queue never runs dry (one flow faster than the core).
    flood: Arc<std::sync::atomic::AtomicBool>,
}

impl RxQueue for WireRx {
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let mut n = 0;
        let mut wire = self.wire.lock().expect("wire");
        while batch.room() > 0 {
            let frame = match wire.pop_front() {
                Some(f) => f,
                None if self.flood.load(std::sync::atomic::Ordering::Relaxed) => udp_frame(MAC0, u32::MAX),
                None => break,
            };
            let Some(b) = pool.alloc() else {
                self.stats.no_buffer += 1;
                wire.push_front(frame);
                break;
            };
            if frame.is_empty() || frame.len() > MAX_FRAME {
                self.stats.errors += 1;
                let _ = pool.free(b);
                continue;
            }
            pool.set_frame(b, HEADROOM, frame.len()).expect("fits");
            pool.frame_mut(b).copy_from_slice(&frame);
            self.stats.packets += 1;
            let _ = batch.push(b);
            n += 1;
        }
        n
    }

    fn rx_stats(&self) -> RxStats {
        self.stats
    }
}

/// Transmit side of a copying port: frames are copied onto `wire` and freed at once.
struct WireTx {
    wire: Wire,
    stats: TxStats,
    /// Claims a frame in flight forever (a ring the device stopped serving).
    stuck: bool,
}

impl TxQueue for WireTx {
    fn tx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut Batch) -> usize {
        let n = batch.len();
        for &b in batch.as_slice() {
            self.wire.lock().expect("wire").push_back(pool.frame(b).to_vec());
            self.stats.packets += 1;
            let _ = pool.free(b);
        }
        batch.clear();
        n
    }

    fn reclaim(&mut self, _pool: &mut Pool<'_>) -> usize {
        0
    }

    fn in_flight(&self) -> usize {
        usize::from(self.stuck)
    }

    fn tx_stats(&self) -> TxStats {
        self.stats
    }
}

/// A port with one queue pair on two wires.
struct WirePort {
    mac: [u8; 6],
    queues: Option<(WireRx, WireTx)>,
}

impl Port for WirePort {
    fn mac(&self) -> [u8; 6] {
        self.mac
    }
    fn rx_queues(&self) -> usize {
        1
    }
    fn tx_queues(&self) -> usize {
        1
    }
    fn set_rss_table(&mut self, _table: &[u16]) -> Result<(), RssError> {
        Err(RssError::Unsupported)
    }
    fn stats(&self) -> PortStats {
        PortStats::default()
    }
}

impl FwdPort for WirePort {
    type Rx = WireRx;
    type Tx = WireTx;
    fn take_queues(&mut self) -> Vec<(WireRx, WireTx)> {
        self.queues.take().into_iter().collect()
    }
    fn fill(_rx: &mut WireRx, _pool: &mut Pool<'static>) -> usize {
        0
    }
    fn rss_table(&self) -> Option<Vec<u16>> {
        None
    }
}

/// Nanoseconds since the test started.
#[derive(Debug, Clone, Copy)]
struct NsClock(StdInstant);

impl Clock for NsClock {
    fn now(&self) -> Instant {
        Instant(self.0.elapsed().as_nanos() as u64)
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(1_000_000_000).expect("nonzero")
    }
}

struct ThreadSleeper(NsClock);

impl Sleeper for ThreadSleeper {
    fn sleep_until(&mut self, deadline: Instant) -> Instant {
        let now = self.0.now();
        if deadline > now {
            std::thread::sleep(std::time::Duration::from_nanos(deadline.0 - now.0));
        }
        self.0.now()
    }

    /// Looks at the bell every 50 µs (the fake machine's wake hook does nothing).
    fn sleep_until_rung(&mut self, deadline: Instant, bell: &cadence_core::sync::Doorbell) -> Instant {
        loop {
            let now = self.0.now();
            if now >= deadline || !bell.is_armed() {
                return now;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    fn wakes_on_ring(&self) -> bool {
        true
    }
}

struct FakeMachine {
    clock: NsClock,
    /// `check` fails once this is set.
    gone: std::sync::atomic::AtomicBool,
    cpus: usize,
    /// Worker indices whose spawn fails.
    refuse: Vec<usize>,
    threads: StdMutex<Vec<(usize, JoinHandle<()>)>>,
    lines: StdMutex<Vec<String>>,
    /// `try_line` answers "busy" this many times first.
    busy: StdMutex<u32>,
    /// Runs a watchdog thread when asked.
    watchdog: bool,
    /// What the watchdog's `abort` ended the run with.
    aborted: StdMutex<Option<Outcome>>,
    /// This machine's boot nonce (each fake machine is another boot).
    nonce: u64,
    /// Workers asked to stop for good (bit `w`), and those that acknowledged.
    fence_request: std::sync::atomic::AtomicU64,
    fence_ack: std::sync::atomic::AtomicU64,
}

/// Nonces of the fake machines: one per machine, never repeated in a test process.
fn next_nonce() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0x00c0_ffee_0000_0001);
    NEXT.fetch_add(0x1_0000_0001, std::sync::atomic::Ordering::Relaxed)
}

impl FakeMachine {
    fn leak(cpus: usize, refuse: Vec<usize>, busy: u32) -> &'static FakeMachine {
        Box::leak(Box::new(FakeMachine {
            clock: NsClock(StdInstant::now()),
            gone: std::sync::atomic::AtomicBool::new(false),
            cpus,
            refuse,
            threads: StdMutex::new(Vec::new()),
            lines: StdMutex::new(Vec::new()),
            busy: StdMutex::new(busy),
            watchdog: false,
            aborted: StdMutex::new(None),
            nonce: next_nonce(),
            fence_request: std::sync::atomic::AtomicU64::new(0),
            fence_ack: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    /// A machine with `cpus` CPUs and a watchdog thread.
    fn with_watchdog(cpus: usize) -> &'static FakeMachine {
        Box::leak(Box::new(FakeMachine {
            clock: NsClock(StdInstant::now()),
            gone: std::sync::atomic::AtomicBool::new(false),
            cpus,
            refuse: Vec::new(),
            threads: StdMutex::new(Vec::new()),
            lines: StdMutex::new(Vec::new()),
            busy: StdMutex::new(0),
            watchdog: true,
            aborted: StdMutex::new(None),
            nonce: next_nonce(),
            fence_request: std::sync::atomic::AtomicU64::new(0),
            fence_ack: std::sync::atomic::AtomicU64::new(0),
        }))
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().expect("lines").clone()
    }
}

impl Machine for FakeMachine {
    type Clock = NsClock;
    type Sleeper = ThreadSleeper;
    type Error = String;

    fn clock(&self) -> NsClock {
        self.clock
    }
    fn max_workers(&self) -> usize {
        self.cpus
    }
    fn sleeper(&self, _worker: usize) -> Result<ThreadSleeper, String> {
        Ok(ThreadSleeper(self.clock))
    }
    fn boot_nonce(&self) -> BootNonce {
        BootNonce { value: self.nonce, source: "test" }
    }
    fn sleep_summary(_s: &ThreadSleeper) -> SleepSummary {
        SleepSummary { late_p50_ns: Some(7), ..SleepSummary::default() }
    }
    fn spawn(&self, worker: usize, job: Box<dyn FnOnce() + Send + 'static>) -> Result<(), String> {
        if self.refuse.contains(&worker) {
            return Err("refused by the test".to_string());
        }
        let h = std::thread::spawn(job);
        self.threads.lock().expect("threads").push((worker, h));
        Ok(())
    }
    fn join(&self, worker: usize, _timeout: Duration) -> bool {
        let mut ts = self.threads.lock().expect("threads");
        match ts.iter().position(|(w, _)| *w == worker) {
            // A stalled worker never finishes: do not wait for it.
            Some(i) if ts[i].1.is_finished() => ts.swap_remove(i).1.join().is_ok(),
            Some(_) => false,
            None => true,
        }
    }
    /// The hung worker looks for a fence request every millisecond — the fake's stand-in for
    /// an interrupt that lands wherever the worker is — then acknowledges and never runs again.
    fn stall_forever(&self, worker: usize) -> ! {
        use std::sync::atomic::Ordering;
        loop {
            if self.fence_request.load(Ordering::Acquire) & (1 << worker) != 0 {
                self.fence_ack.fetch_or(1 << worker, Ordering::Release);
                loop {
                    std::thread::park();
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    #[allow(unsafe_code)]
    fn fence(&self, worker: usize) -> Option<cadence_core::sync::Fenced> {
        use std::sync::atomic::Ordering;
        self.fence_request.fetch_or(1 << worker, Ordering::Release);
        let t = StdInstant::now();
        while self.fence_ack.load(Ordering::Acquire) & (1 << worker) == 0 {
            if t.elapsed().as_secs() >= 2 {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // SAFETY: the worker's thread acknowledged from `stall_forever` and parks for good
        // after it (the acknowledgement is its last store, read here with Acquire).
        Some(unsafe { cadence_core::sync::Fenced::new(cadence_core::sync::Holder::of(worker as u32)) })
    }
    fn spawn_watchdog(&self, _index: usize, job: Box<dyn FnOnce() + Send + 'static>) -> bool {
        self.watchdog && std::thread::Builder::new().spawn(job).is_ok()
    }
    fn abort(&self, outcome: Outcome) -> ! {
        // The process must go on (other tests): record it and park this thread for good.
        *self.aborted.lock().expect("aborted") = Some(outcome);
        loop {
            std::thread::park();
        }
    }
    fn line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) {
        let mut s = String::new();
        let _ = write(&mut s);
        self.lines.lock().expect("lines").push(s);
    }
    fn try_line(&self, write: &mut dyn FnMut(&mut dyn Write) -> fmt::Result) -> bool {
        let mut busy = self.busy.lock().expect("busy");
        if *busy > 0 {
            *busy -= 1;
            return false;
        }
        drop(busy);
        self.line(write);
        true
    }
    fn write_extra(&self, out: &mut dyn Write) -> fmt::Result {
        write!(out, " fake_machine=1")
    }
    fn check(&self) -> Result<(), String> {
        if self.gone.load(std::sync::atomic::Ordering::Relaxed) {
            Err("port 1 (fake0) is gone".to_string())
        } else {
            Ok(())
        }
    }
}

const MAC0: [u8; 6] = [2, 0, 0, 0, 0, 0xa0];
const MAC1: [u8; 6] = [2, 0, 0, 0, 0, 0xa1];

/// An IPv4/UDP frame to `dst` whose payload carries `seq`.
fn udp_frame(dst: [u8; 6], seq: u32) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x55]);
    f.extend_from_slice(&0x0800u16.to_be_bytes());
    let payload = seq.to_be_bytes();
    let total = 20 + 8 + payload.len() as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let sum = ip.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum::<u32>();
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = !((sum & 0xffff) + (sum >> 16)) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&1000u16.to_be_bytes());
    f.extend_from_slice(&2000u16.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&payload);
    f
}

/// Control on port 0, signed with [`KEY`].
const CTL: &str = "ctl=port:0 ctl_key=000102030405060708090a0b0c0d0e0f";
const KEY: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

fn control_frame(m: &FakeMachine, dst: [u8; 6], cmd: Command) -> Vec<u8> {
    // Signed for the boot `@ready` announced (wait for it: no frame can be signed before).
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    let ready = m.lines().into_iter().find(|l| l.starts_with("@ready")).unwrap_or_default();
    let nonce = ready
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("ctl_nonce="))
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .expect("@ready announces ctl_nonce");
    signed_frame(dst, cmd, nonce)
}

/// A control frame signed under [`KEY`] for the boot whose nonce is `nonce`.
fn signed_frame(dst: [u8; 6], cmd: Command, nonce: u64) -> Vec<u8> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let counter = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[2, 0, 0, 0, 0, 0x55]);
    f.extend_from_slice(&CONTROL_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&cadence_core::control::signed_payload(&KEY, nonce, counter, cmd));
    f.resize(60, 0);
    f
}

struct Rig {
    in0: Wire,
    out1: Wire,
    /// Floods port 0 while set ([`WireRx::flood`]).
    flood0: Arc<std::sync::atomic::AtomicBool>,
    run: JoinHandle<Outcome>,
    machine: &'static FakeMachine,
}

fn start(cfg: &str, machine: &'static FakeMachine) -> Rig {
    start_with(cfg, machine, false)
}

/// [`start`]; `stuck_tx`: port 1's TX ring never drains.
fn start_with(cfg: &str, machine: &'static FakeMachine, stuck_tx: bool) -> Rig {
    start_profiled(cfg, machine, stuck_tx, None)
}

/// [`start_with`], with a NetBlaze profile (what a chain module may carry).
fn start_profiled(cfg: &str, machine: &'static FakeMachine, stuck_tx: bool, profile: Option<Profile>) -> Rig {
    start_chain(cfg, machine, stuck_tx, profile, ChainSpec::default())
}

/// [`start_profiled`] running `spec`'s chain.
fn start_chain(
    cfg: &str,
    machine: &'static FakeMachine,
    stuck_tx: bool,
    profile: Option<Profile>,
    spec: ChainSpec,
) -> Rig {
    let cfg = cfg.replace("CTL", CTL);
    let wires: Vec<Wire> = (0..4).map(|_| Arc::default()).collect();
    let (in0, in1, out0, out1) = (wires[0].clone(), wires[1].clone(), wires[2].clone(), wires[3].clone());
    let flood0: Arc<std::sync::atomic::AtomicBool> = Arc::default();
    let cfg = BootConfig::parse(&cfg).expect("config");
    let ports = vec![
        WirePort {
            mac: MAC0,
            queues: Some((
                WireRx { wire: in0.clone(), stats: RxStats::default(), flood: flood0.clone() },
                WireTx { wire: out0, stats: TxStats::default(), stuck: false },
            )),
        },
        WirePort {
            mac: MAC1,
            queues: Some((
                WireRx { wire: in1, stats: RxStats::default(), flood: Arc::default() },
                WireTx { wire: out1.clone(), stats: TxStats::default(), stuck: stuck_tx },
            )),
        },
    ];
    let run = std::thread::spawn(move || {
        let mem: &'static mut [u8] = Box::leak(vec![0u8; 512 * cadence_core::buf::BUF_SIZE].into_boxed_slice());
        let pools = vec![Pool::try_new(mem, 0, 512).expect("pool")];
        run(machine, &cfg, pools, ports, &spec, profile.as_ref(), LineRate { mbps: 10_000, from: "default" })
    });
    Rig { in0, out1, flood0, run, machine }
}

/// Waits (bounded) until `cond`.
fn wait_for(mut cond: impl FnMut() -> bool) {
    let t = StdInstant::now();
    while !cond() {
        assert!(t.elapsed().as_secs() < 20, "timed out");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

fn key(line: &str, k: &str) -> Option<u64> {
    line.split_whitespace().find_map(|kv| kv.strip_prefix(k)?.strip_prefix('=')?.parse().ok())
}

#[test]
fn two_workers_forward_every_frame_in_order_then_stop() {
    let m = FakeMachine::leak(4, vec![], 0);
    let rig = start("CTL workers=2 stats_ms=5 qsize=1024 peer1=02:00:00:00:00:b1", m);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    for seq in 0..2000u32 {
        rig.in0.lock().expect("wire").push_back(udp_frame(MAC0, seq));
    }
    wait_for(|| rig.out1.lock().expect("wire").len() == 2000);
    // The periodic line (every 5 ms) comes while the run goes on.
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@stats")));
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::Success);
    let out: Vec<Vec<u8>> = rig.out1.lock().expect("wire").drain(..).collect();
    for (seq, f) in out.iter().enumerate() {
        let mut want = udp_frame(MAC0, seq as u32);
        want[..6].copy_from_slice(&[2, 0, 0, 0, 0, 0xb1]);
        want[6..12].copy_from_slice(&MAC1);
        assert_eq!(f, &want, "frame {seq}");
    }
    let lines = m.lines();
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    assert_eq!(key(summary, "p0_rx"), Some(2001), "{summary}");
    assert_eq!(key(summary, "p1_tx"), Some(2000), "{summary}");
    assert_eq!(key(summary, "workers"), Some(2), "{summary}");
    assert_eq!(key(summary, "fake_machine"), Some(1), "{summary}");
    assert_eq!(key(summary, "stats_skipped"), Some(0), "{summary}");
    // What the sleepers said, per worker; what they did not say is absent.
    assert_eq!((key(summary, "core0_late_p50_ns"), key(summary, "core1_late_p50_ns")), (Some(7), Some(7)));
    assert_eq!(key(summary, "core0_idle_ns"), None, "{summary}");
    assert!(!lines.iter().any(|l| l.starts_with("warning") || l.starts_with("error")), "{lines:?}");
}

#[test]
fn under_a_flood_on_its_only_lane_a_lone_worker_still_reports_watches_and_obeys_stop() {
    // One worker, one lane that never runs dry, a watchdog core: before the round budget the
    // first round never ended — no `@stats`, no heartbeat (the watchdog called the working
    // worker stalled), no STOP.
    let m = FakeMachine::with_watchdog(2);
    let rig = start("CTL workers=1 stats_ms=5 stall_ms=100 round_us=200", m);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    rig.flood0.store(true, std::sync::atomic::Ordering::Relaxed);
    // The flood has begun: frames leave, the rounds are cut, and the lines still come.
    wait_for(|| rig.out1.lock().expect("wire").len() > 10_000);
    let before = m.lines().iter().filter(|l| l.starts_with("@stats")).count();
    wait_for(|| m.lines().iter().filter(|l| l.starts_with("@stats")).count() >= before + 5);
    // Long enough for a watchdog period or two: it must not call the working worker stalled.
    std::thread::sleep(std::time::Duration::from_millis(300));
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::Success);
    rig.flood0.store(false, std::sync::atomic::Ordering::Relaxed);
    let lines = m.lines();
    assert!(!lines.iter().any(|l| l.starts_with("@fault")), "{lines:?}");
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    assert!(key(summary, "core0_cut_rounds").is_some_and(|c| c > 10), "{summary}");
    assert_eq!(key(summary, "stalls"), Some(0), "{summary}");
    assert_eq!(key(summary, "drops"), Some(0), "{summary}");
    assert_eq!(*m.aborted.lock().expect("aborted"), None);
}

#[test]
fn a_stop_captured_from_one_boot_stops_neither_the_next_boot_nor_another_instance() {
    // Boot 1 obeys its STOP; an eavesdropper keeps a copy.
    let m1 = FakeMachine::leak(2, vec![], 0);
    let run1 = start("CTL", m1);
    let captured = control_frame(m1, MAC0, Command::Stop);
    run1.in0.lock().expect("wire").push_back(captured.clone());
    assert_eq!(run1.run.join().expect("run"), Outcome::Success);
    // Boot 2 (a restart, or another instance with the same key): its counter starts from 0
    // again, so only the nonce tells the old frame apart. Replayed, it is refused and counted.
    let m2 = FakeMachine::leak(2, vec![], 0);
    let run2 = start("CTL stats_ms=5", m2);
    wait_for(|| m2.lines().iter().any(|l| l.starts_with("@ready")));
    run2.in0.lock().expect("wire").push_back(captured);
    wait_for(|| m2.lines().iter().any(|l| l.starts_with("@stats") && key(l, "drop_ctl_rejected") == Some(1)));
    assert!(!run2.run.is_finished(), "the captured STOP stopped another boot");
    run2.in0.lock().expect("wire").push_back(control_frame(m2, MAC0, Command::Stop));
    assert_eq!(run2.run.join().expect("run"), Outcome::Success);
    let summary = m2.lines().into_iter().find(|l| l.starts_with("@summary")).expect("@summary");
    assert_eq!((key(&summary, "drop_ctl_rejected"), key(&summary, "ctl")), (Some(1), Some(1)), "{summary}");
    // The two boots announced different nonces.
    let nonce = |m: &FakeMachine| {
        m.lines()
            .into_iter()
            .find(|l| l.starts_with("@ready"))
            .and_then(|l| l.split_whitespace().find_map(|kv| kv.strip_prefix("ctl_nonce=").map(String::from)))
    };
    assert_ne!(nonce(m1), nonce(m2));
}

#[test]
fn report_lines_say_the_dedicated_cores_and_count_the_frames_received() {
    let m = FakeMachine::leak(4, vec![], 0);
    let rig = start("CTL workers=2 stats_ms=0 report_ms=2 qsize=1024", m);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    for seq in 0..500u32 {
        rig.in0.lock().expect("wire").push_back(udp_frame(MAC0, seq));
    }
    wait_for(|| rig.out1.lock().expect("wire").len() == 500);
    // A line after every frame was published by its worker says all of them.
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@report") && key(l, "rx") == Some(500)));
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::Success);
    let reports: Vec<String> = m.lines().into_iter().filter(|l| l.starts_with("@report")).collect();
    for (k, l) in reports.iter().enumerate() {
        // No server mapper: both workers are dedicated; periods counted from 0, rx never
        // going back.
        assert_eq!(key(l, "period"), Some(k as u64), "{l}");
        assert_eq!(key(l, "dedicated"), Some(2), "{l}");
        assert_eq!(key(l, "workers"), Some(2), "{l}");
        assert!(key(l, "pps").is_some() && key(l, "t_ms").is_some(), "{l}");
    }
    let rx: Vec<u64> = reports.iter().filter_map(|l| key(l, "rx")).collect();
    assert!(rx.windows(2).all(|w| w[0] <= w[1]), "{rx:?}");
    let _ = rig.machine;
}

#[test]
fn a_busy_console_skips_stats_lines_and_counts_them() {
    let m = FakeMachine::leak(2, vec![], 3);
    let rig = start("CTL stats_ms=1", m);
    wait_for(|| m.lines().iter().filter(|l| l.starts_with("@stats")).count() >= 2);
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::Success);
    let lines = m.lines();
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    assert_eq!(key(summary, "stats_skipped"), Some(3), "{summary}");
    let _ = rig.machine;
}

#[test]
fn a_chain_or_ctl_naming_a_port_the_dataplane_lacks_is_refused_by_name() {
    // Two ports here: a chain that routes to port 2, or control frames on port 3, is a
    // configuration error at start, not frames dropped later.
    let m = FakeMachine::leak(1, vec![], 0);
    let spec = ChainSpec::parse("version=1\nport.addr=port:2,addr:10.0.2.1/24\n").expect("chain");
    let rig = start_chain("CTL", m, false, None, spec);
    assert_eq!(rig.run.join().expect("run"), Outcome::ConfigError);
    let want = "error: chain: port.addr names port 2, but the dataplane has 2 ports";
    assert!(m.lines().iter().any(|l| l == want), "{:?}", m.lines());
    let m = FakeMachine::leak(1, vec![], 0);
    let rig = start("ctl=port:3 ctl_key=000102030405060708090a0b0c0d0e0f", m);
    assert_eq!(rig.run.join().expect("run"), Outcome::ConfigError);
    let want = "error: boot option 'ctl': port:3, but the dataplane has 2 ports";
    assert!(m.lines().iter().any(|l| l == want), "{:?}", m.lines());
    // Port 1 is there: the run starts (and ends at max_s, as nothing stops it).
    let m = FakeMachine::leak(1, vec![], 0);
    let spec = ChainSpec::parse("version=1\nport.addr=port:1,addr:10.0.1.1/24\n").expect("chain");
    let rig = start_chain("CTL max_s=1", m, false, None, spec);
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure);
    assert!(!m.lines().iter().any(|l| l.starts_with("error: chain")), "{:?}", m.lines());
}

#[test]
fn more_workers_than_cores_is_refused_with_a_message() {
    let m = FakeMachine::leak(1, vec![], 0);
    let rig = start("CTL workers=2", m);
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure);
    assert!(m.lines().iter().any(|l| l == "error: workers=2 but only 1 cores are online"), "{:?}", m.lines());
}

#[test]
fn a_worker_that_cannot_start_stops_the_run_without_hanging() {
    let m = FakeMachine::leak(4, vec![2], 0);
    let rig = start("CTL workers=3", m);
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure);
    let lines = m.lines();
    assert!(lines.iter().any(|l| l == "error: worker 2: refused by the test"), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("@ready")), "{lines:?}");
    // Worker 1 did start; it was stopped and joined, and the summary still came.
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    assert_eq!(key(summary, "workers"), Some(3), "{summary}");
}

#[test]
fn max_s_without_stop_is_a_runtime_failure() {
    let m = FakeMachine::leak(1, vec![], 0);
    let rig = start("CTL max_s=1", m);
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure);
    assert!(m.lines().iter().any(|l| l == "error: max_s=1 reached without a STOP control frame"));
}

#[test]
fn a_ring_bound_below_the_target_vacation_is_reported() {
    let m = FakeMachine::leak(1, vec![], 0);
    // qsize 256 at 10 GbE line rate: 8.6 µs < V̄ = 15 µs.
    let rig = start("CTL qsize=256 max_s=1", m);
    let _ = rig.run.join().expect("run");
    let lines = m.lines();
    let w = lines.iter().find(|l| l.starts_with("warning: T_S is bounded by the ring")).expect("warning");
    assert!(w.contains("8.6 us") && w.contains("ring=256") && w.contains("vbar=15 us"), "{w}");
    // A bigger ring clears it.
    let m = FakeMachine::leak(1, vec![], 0);
    let rig = start("CTL qsize=1024 max_s=1", m);
    let _ = rig.run.join().expect("run");
    assert!(!m.lines().iter().any(|l| l.starts_with("warning: T_S")), "{:?}", m.lines());
}

#[test]
fn a_port_that_vanishes_stops_the_run_with_a_named_error() {
    let m = FakeMachine::leak(2, vec![], 0);
    let rig = start("CTL workers=2", m);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    m.gone.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure);
    let lines = m.lines();
    assert!(lines.iter().any(|l| l == "error: port 1 (fake0) is gone"), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("@summary")), "{lines:?}");
}

#[test]
fn a_tx_ring_that_never_drains_fails_the_run_even_after_stop() {
    let m = FakeMachine::leak(1, vec![], 0);
    let rig = start_with("CTL", m, true);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure);
    let lines = m.lines();
    assert!(lines.iter().any(|l| l == "error: lane 0: TX not drained after 100 ms"), "{lines:?}");
    assert!(lines.iter().any(|l| l.starts_with("@summary")), "{lines:?}");
}

#[test]
fn a_stalled_worker_is_reported_its_lane_kept_forwarding_and_the_run_fails() {
    let m = FakeMachine::leak(2, vec![], 0);
    // Worker 1 stops for good 30 ms in; the watchdog's limit is 100 ms.
    let rig = start("CTL workers=2 stall=1:30 stall_ms=100", m);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@fault kind=stall core=1 ")));
    // Worker 0 alone still forwards everything on the lane.
    for seq in 0..500u32 {
        rig.in0.lock().expect("wire").push_back(udp_frame(MAC0, seq));
    }
    wait_for(|| rig.out1.lock().expect("wire").len() == 500);
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure, "a worker never parked");
    let lines = m.lines();
    let fault = lines.iter().find(|l| l.starts_with("@fault")).expect("fault");
    assert!(fault.contains("lane=0") && fault.contains("seen_by=0"), "{fault}");
    assert!(lines.iter().any(|l| l == "error: 0 of 1 workers parked"), "{lines:?}");
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    assert_eq!(key(summary, "stalls"), Some(1), "{summary}");
    assert_eq!(key(summary, "p1_tx"), Some(500), "{summary}");
}

/// Worker 1 hangs inside a round (`stall=1:30:round`: in its stage, holding lane 0 and its
/// batch). Worker 0 sees it stall, the machine stops it for good, and worker 0 takes lane 0
/// over (`@fault kind=takeover`): forwarding goes on; the frames of the hung batch are lost
/// and counted (`stranded=`), every other frame leaves once and in order; the run still fails
/// at the end (a worker never parked).
#[test]
fn a_worker_hung_inside_its_round_loses_its_lane_to_a_live_worker() {
    let m = FakeMachine::leak(2, vec![], 0);
    let rig = start("CTL workers=2 stall=1:30:round stall_ms=100", m);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    // Frames until worker 1 has some in hand when it hangs (either worker may win a round).
    let mut seq = 0u32;
    while !m.lines().iter().any(|l| l.starts_with("@fault kind=takeover")) {
        assert!(seq < 200_000, "no takeover: {:?}", m.lines());
        for _ in 0..8 {
            rig.in0.lock().expect("wire").push_back(udp_frame(MAC0, seq));
            seq += 1;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // The lane is worker 0's now: more frames, all forwarded.
    let before = seq;
    for _ in 0..500 {
        rig.in0.lock().expect("wire").push_back(udp_frame(MAC0, seq));
        seq += 1;
    }
    wait_for(|| {
        let out = rig.out1.lock().expect("wire");
        out.iter().filter(|f| u32::from_be_bytes([f[42], f[43], f[44], f[45]]) >= before).count() == 500
    });
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure, "worker 1 never parks");
    let lines = m.lines();
    assert!(lines.iter().any(|l| l.starts_with("@fault kind=stall core=1 ")), "{lines:?}");
    let takeover = lines.iter().find(|l| l.starts_with("@fault kind=takeover")).expect("takeover");
    assert!(
        takeover.starts_with("@fault kind=takeover core=1 lane=0 free=") && takeover.contains("seen_by=0"),
        "{takeover}"
    );
    assert!(!lines.iter().any(|l| l.contains("still held at shutdown")), "{lines:?}");
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    let stranded = key(summary, "stranded").expect("stranded");
    assert_eq!(key(summary, "takeovers"), Some(1), "{summary}");
    assert!((1..=32).contains(&stranded), "the hung batch: {summary}");
    // What left: every frame but the hung batch's, once, in order.
    let out: Vec<u32> =
        rig.out1.lock().expect("wire").iter().map(|f| u32::from_be_bytes([f[42], f[43], f[44], f[45]])).collect();
    assert_eq!(out.len() as u64 + stranded, u64::from(seq), "lost = stranded");
    assert!(out.windows(2).all(|w| w[0] < w[1]), "in order, once");
}

#[test]
fn the_watchdog_reports_a_lone_stalled_worker_and_ends_the_run_at_max_s() {
    // One worker, and it hangs 30 ms in: no other worker can see it, the watchdog thread does;
    // `max_s` cannot run in the hung worker's loop, the watchdog ends the run.
    let m = FakeMachine::with_watchdog(1);
    let rig = start("CTL workers=1 stall=0:30 stall_ms=100 max_s=1", m);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready") && l.contains(" watchdog=core ")));
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@fault kind=stall core=0 ")));
    wait_for(|| m.aborted.lock().expect("aborted").is_some());
    assert_eq!(*m.aborted.lock().expect("aborted"), Some(Outcome::RuntimeFailure));
    let lines = m.lines();
    let fault = lines.iter().find(|l| l.starts_with("@fault")).expect("fault");
    assert!(fault.contains("seen_by=watchdog"), "{fault}");
    assert!(
        lines.iter().any(|l| l.starts_with("error: watchdog: the run did not wind down") && l.contains("after max_s")),
        "{lines:?}"
    );
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    assert_eq!(key(summary, "stalls"), Some(1), "{summary}");
    // The hung worker's thread never returns; the run thread is left behind with it.
    assert!(!rig.run.is_finished());
}

#[test]
fn with_a_live_worker_0_the_watchdog_stays_quiet() {
    let m = FakeMachine::with_watchdog(1);
    let rig = start("CTL workers=1 max_s=1", m);
    assert_eq!(rig.run.join().expect("run"), Outcome::RuntimeFailure);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let lines = m.lines();
    assert!(lines.iter().any(|l| l == "error: max_s=1 reached without a STOP control frame"), "{lines:?}");
    assert!(!lines.iter().any(|l| l.contains("watchdog:") || l.starts_with("@fault")), "{lines:?}");
    assert_eq!(*m.aborted.lock().expect("aborted"), None);
}

#[test]
fn the_upper_clamp_of_t_s_never_sits_below_the_vacation_target() {
    let cfg = |s: &str| BootConfig::parse(s).expect("valid");
    // Default V̄ (15 µs): the clamp stays at 1 ms.
    assert_eq!(metronome_config(&cfg(""), None, None).max_short_timeout_ns, 1_000_000);
    // V̄ above 1 ms raises it, or T_S could never reach the target at low load.
    assert_eq!(metronome_config(&cfg("vbar_us=10000"), None, None).max_short_timeout_ns, 10_000_000);
}

/// A profile whose core sustains 400 frames/s.
fn profile_400pps() -> Profile {
    Profile::parse(
        "version=1\ntsc_hz=1000000000\nepoch_ns=80000\nfrontier=1:100\nservice=packet_cycles:500,flow_cycles:300\n\
         rate=1:400\n",
    )
    .expect("profile")
}

#[test]
fn the_mapper_says_why_it_is_off() {
    // No profile: off, whatever mapper_ms says.
    let m = FakeMachine::leak(2, vec![], 0);
    let rig = start("CTL", m);
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::Success);
    let lines = m.lines();
    let ready = lines.iter().find(|l| l.starts_with("@ready")).expect("@ready");
    assert!(ready.contains(" mapper=no_profile "), "{ready}");
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    assert_eq!(key(summary, "mapper_periods"), None, "no mapper counters when it is off: {summary}");
    // A profile, but these ports have one queue pair and no RSS table.
    for (cfg, why) in [("CTL", "one_lane"), ("CTL mapper_ms=0", "mapper_ms=0")] {
        let m = FakeMachine::leak(2, vec![], 0);
        let rig = start_profiled(cfg, m, false, Some(profile_400pps()));
        wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
        rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
        assert_eq!(rig.run.join().expect("run"), Outcome::Success);
        let lines = m.lines();
        let ready = lines.iter().find(|l| l.starts_with("@ready")).expect("@ready");
        assert!(ready.contains(&format!(" mapper={why} ")), "{cfg}: {ready}");
    }
}

#[test]
fn an_slo_that_leaves_no_epoch_is_a_configuration_error_naming_the_field() {
    // slo_us=30: (SLO − 40 us) / 2 is no epoch. Without a profile the SLO only counts.
    let m = FakeMachine::leak(2, vec![], 0);
    let rig = start_profiled("CTL slo_us=30", m, false, Some(profile_400pps()));
    assert_eq!(rig.run.join().expect("run"), Outcome::ConfigError);
    let lines = m.lines();
    assert!(
        lines.iter().any(|l| l.starts_with("error: boot option 'mapper_ms'/'slo_us': netblaze.epoch_ns: ")),
        "{lines:?}"
    );
    assert!(!lines.iter().any(|l| l.starts_with("@ready")), "{lines:?}");
}

/// Flow `flow`'s frame `seq`: [`udp_frame`] from UDP port 1000 + `flow`.
fn flow_frame(dst: [u8; 6], flow: u16, seq: u32) -> Vec<u8> {
    let mut f = udp_frame(dst, seq);
    f[34..36].copy_from_slice(&(1000 + flow).to_be_bytes());
    f
}

/// A profile for one core that finishes 64 packets of one flow per 1 ms epoch, 32 of 1000
/// flows: 256 flows arriving faster than that are outside it.
fn profile_small_core() -> Profile {
    Profile::parse(
        "version=1\ntsc_hz=1000000000\nepoch_ns=1000000\nfrontier=1:64,1000:32\n\
         service=packet_cycles:500,flow_cycles:300\nrate=1:64000\n",
    )
    .expect("profile")
}

#[test]
fn an_aux_core_takes_flows_from_the_lane_and_every_frame_leaves_once_in_flow_order() {
    let m = FakeMachine::leak(3, vec![], 0);
    // The profile's 1 ms epochs need an SLO above them.
    let rig = start_profiled(
        "CTL workers=2 aux=1 qsize=1024 stats_ms=0 slo_us=5000 epoch_us=1000",
        m,
        false,
        Some(profile_small_core()),
    );
    wait_for(|| m.lines().iter().any(|l| l.starts_with("@ready")));
    // Idle for many epochs (of 1 ms): the auxiliary core is asleep on its doorbell when the
    // first flows are handed to it, and the hand-off must wake it.
    std::thread::sleep(std::time::Duration::from_millis(30));
    const FLOWS: u16 = 256;
    const FRAMES: u32 = 12_000;
    for i in 0..FRAMES {
        let flow = (i % u32::from(FLOWS)) as u16;
        rig.in0.lock().expect("wire").push_back(flow_frame(MAC0, flow, i / u32::from(FLOWS)));
        if i % 2000 == 1999 {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
    // Everything out, or (a starved auxiliary thread: its lane's queue for it overflowed,
    // dropping and counting frames of the flows bound to it) nothing more for 300 ms.
    let (mut last, mut since) = (0, StdInstant::now());
    wait_for(|| {
        let n = rig.out1.lock().expect("wire").len();
        if n != last {
            (last, since) = (n, StdInstant::now());
        }
        n == FRAMES as usize || since.elapsed().as_millis() > 300
    });
    rig.in0.lock().expect("wire").push_back(control_frame(m, MAC0, Command::Stop));
    assert_eq!(rig.run.join().expect("run"), Outcome::Success);
    let out: Vec<Vec<u8>> = rig.out1.lock().expect("wire").drain(..).collect();
    let mut next = vec![0u32; usize::from(FLOWS)];
    for f in &out {
        let flow = usize::from(u16::from_be_bytes([f[34], f[35]]) - 1000);
        let seq = u32::from_be_bytes([f[42], f[43], f[44], f[45]]);
        assert!(seq >= next[flow], "flow {flow}: frame {seq} after {}: reordered or twice", next[flow]);
        next[flow] = seq + 1;
    }
    let lines = m.lines();
    let ready = lines.iter().find(|l| l.starts_with("@ready")).expect("@ready");
    assert!(ready.contains(" aux=1 "), "{ready}");
    let summary = lines.iter().find(|l| l.starts_with("@summary")).expect("@summary");
    let handed = key(summary, "nb_handed").expect("nb_handed");
    assert!(handed > 0, "the lane handed flows over: {summary}");
    assert_eq!(key(summary, "aux_frames"), Some(handed), "{summary}");
    assert_eq!(key(summary, "nb_returned"), Some(handed), "{summary}");
    assert!(key(summary, "nb_recruited").unwrap_or(0) >= 1, "{summary}");
    assert!(key(summary, "nb_wakes").unwrap_or(0) >= 1, "a hand-off woke the sleeping core: {summary}");
    assert_eq!(key(summary, "core1_packets"), Some(handed), "the auxiliary core's frames: {summary}");
    // Each frame transmitted once or dropped and counted (`handoff_full` only: nothing else
    // may drop here).
    let dropped = key(summary, "drop_handoff_full").expect("drop_handoff_full");
    assert_eq!(key(summary, "p1_tx"), Some(out.len() as u64), "{summary}");
    assert_eq!(out.len() as u64 + dropped, u64::from(FRAMES), "{summary}");
    assert_eq!(key(summary, "drops"), Some(dropped), "{summary}");
    assert_eq!(key(summary, "nb_lane_busy"), Some(0), "{summary}");
    let resting = key(ready, "pool_in_use").expect("pool_in_use");
    assert_eq!(key(summary, "pool_in_use"), Some(resting), "every buffer back in its pool: {summary}");
    assert!(!lines.iter().any(|l| l.starts_with("warning") || l.starts_with("error")), "{lines:?}");
}

#[test]
fn aux_without_a_profile_a_dedicated_worker_or_an_epoch_below_the_slo_is_a_configuration_error() {
    for (cfg, profile, msg) in [
        ("CTL workers=2 aux=1", None, "error: boot option 'aux': auxiliary cores need a NetBlaze profile"),
        ("CTL workers=2 aux=2", Some(profile_small_core()), "error: boot option 'aux': 2 auxiliary of 2 workers"),
        (
            "CTL workers=2 aux=1 slo_us=5000 epoch_us=80",
            Some(profile_small_core()),
            "error: boot option 'epoch_us': 80 us, but the profile's frontier was measured for 1000 us epochs",
        ),
        (
            "CTL workers=2 aux=1",
            Some(profile_small_core()),
            "error: boot option 'aux'/'slo_us'/'epoch_us': netblaze.epoch_ns: ",
        ),
    ] {
        let m = FakeMachine::leak(3, vec![], 0);
        let rig = start_profiled(cfg, m, false, profile);
        assert_eq!(rig.run.join().expect("run"), Outcome::ConfigError, "{cfg}");
        let lines = m.lines();
        assert!(lines.iter().any(|l| l.starts_with(msg)), "{cfg}: {lines:?}");
        assert!(!lines.iter().any(|l| l.starts_with("@ready")), "{lines:?}");
    }
}
