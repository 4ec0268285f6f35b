//! The generator and the sink: one thread, pinned to CPU 0, that transmits tagged frames
//! into the dataplane's port 0 and counts what comes out of its port 1.
//!
//! - **Transmit**: paced by the TSC with a token bucket [`DEPTH_NS`] deep (at least
//!   [`BURST`] frames), sent in bursts of at most [`BURST`] frames per system call. The
//!   depth lets the generator make up for a short preemption (a softirq run in
//!   `ksoftirqd`, a timer) with a few back-to-back bursts instead of losing the time;
//!   tokens beyond it are lost, so a generator that cannot keep up shows it as a lower
//!   achieved rate, and such a trial is marked generator-limited. Two paths, chosen by [`TxPath`]: a `TPACKET_V3` TX ring
//!   (`platform::hosted::packet::PacketSocket` + `drivers::tpacket::TpacketTx`, one
//!   `send()` per burst) or `sendmmsg(2)` of up to 32 frames on a send-only socket. Both
//!   bypass the qdisc. `docs/PERFORMANCE.md` records which is faster here.
//! - **Receive**: a `TPACKET_V3` RX ring (4 KiB blocks retired after 1 ms) polled between
//!   bursts; every frame's tag is counted by [`Tally`]. Two readers, chosen by
//!   [`SinkKind`]: `drivers::tpacket::TpacketRx` (the throughput search; latency = the
//!   TSC of the poll that found the frame − the TSC in its tag, so it includes the wait
//!   for the block to be handed over: full at ≈ 28 frames of 64 B, or 1 ms) or
//!   [`StampRx`] (the latency trials; latency = the kernel's receive timestamp − the send
//!   TSC mapped to `CLOCK_REALTIME` through two (TSC, realtime) anchors taken at the
//!   start and the end of the trial).
//!
//! A trial sends for `secs`, then drains (polls until every frame is back, or nothing
//! arrived for `drain_idle_ms`, or `drain_max_ms` passed).

use std::sync::mpsc;

use anyhow::{Context, Result, anyhow, bail};
use cadence_core::buf::{BUF_SIZE, Batch, Pool};
use cadence_core::nic::{RxQueue, TxQueue};
use cadence_core::time::{Clock, Duration as Ticks};
use cadence_drivers::tpacket::{RxGeometry, TpacketRx, TpacketTx, TxGeometry};
use cadence_platform::hosted::clock::HostClock;
use cadence_platform::hosted::kick::PacketKick;
use cadence_platform::hosted::packet::{PacketConfig, PacketGeometry, PacketSocket, RingGeometry};
use cadence_platform::hosted::ring::MappedRing;
use cadence_platform::hosted::thread::{self, Pin, Worker};

use super::frames::{self, SizeMix, Templates};
use super::rawsock::RawSender;
use super::stamped::StampRx;
use super::sysstat::{CpuProbe, Usage, usage};
use super::tally::{Latency, Tally};

/// Most frames per burst (one system call).
pub const BURST: usize = 32;
/// Depth of the token bucket in time: 2 ms of traffic.
pub const DEPTH_NS: f64 = 2e6;
/// A trial whose generator sent less than `1 − GEN_SLACK` of the asked rate is
/// generator-limited.
pub const GEN_SLACK: f64 = 0.01;
/// Packet buffers of the generator's pool (TX staging and RX copies).
const POOL_BUFS: usize = 1024;

/// How the generator transmits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxPath {
    /// `TPACKET_V3` TX ring, `drivers::tpacket::TpacketTx`.
    Ring,
    /// `sendmmsg(2)` on a send-only socket.
    Mmsg,
}

impl TxPath {
    /// `ring` or `sendmmsg`.
    pub fn name(self) -> &'static str {
        match self {
            TxPath::Ring => "ring",
            TxPath::Mmsg => "sendmmsg",
        }
    }
}

/// How the sink reads its ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    /// `drivers::tpacket::TpacketRx`: latency from the sink's poll.
    Driver,
    /// [`StampRx`]: latency from the kernel's receive timestamps.
    Stamped,
}

impl SinkKind {
    /// How latency is taken: `sink-poll` or `kernel-rx`.
    pub fn latency_source(self) -> &'static str {
        match self {
            SinkKind::Driver => "sink-poll",
            SinkKind::Stamped => "kernel-rx",
        }
    }
}

/// Where the generator sends and the sink listens.
#[derive(Debug, Clone)]
pub struct GenConfig {
    /// Transmit here (the dataplane's port 0 peer).
    pub tx_if: String,
    /// Receive here (the dataplane's port 1 peer).
    pub rx_if: String,
    /// Destination and source MAC of the frames.
    pub dst: [u8; 6],
    pub src: [u8; 6],
    /// The CPU of the thread (`None`: unpinned).
    pub cpu: Option<usize>,
    pub path: TxPath,
    pub sink: SinkKind,
    pub clock: HostClock,
}

/// One trial.
#[derive(Debug, Clone)]
pub struct TrialSpec {
    /// Offered load, frames per second.
    pub rate_pps: f64,
    /// Seconds of sending.
    pub secs: f64,
    pub mix: SizeMix,
    pub flows: u16,
    /// Read at the start and the end of the sending (not the drain).
    pub probe: CpuProbe,
    /// Drain: stop after this long without a frame …
    pub drain_idle_ms: u64,
    /// … or after this long in all.
    pub drain_max_ms: u64,
}

/// What a trial measured.
#[derive(Debug, Clone, Default)]
pub struct TrialResult {
    pub asked_pps: f64,
    /// Frames the kernel took from the generator.
    pub sent: u64,
    /// Seconds of sending.
    pub send_s: f64,
    pub achieved_pps: f64,
    pub received: u64,
    pub unique: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub foreign: u64,
    pub stale: u64,
    pub latency: Latency,
    /// How latency was taken ([`SinkKind::latency_source`]).
    pub latency_source: &'static str,
    /// Frames the kernel dropped at the sink (its ring was full): the rig's loss.
    pub sink_drops: u64,
    /// Frames the generator's TX ring reported refused (`TP_STATUS_WRONG_FORMAT`).
    pub tx_errors: u64,
    /// Send attempts the kernel refused because the path into the dataplane was full
    /// (frames retried later): the dataplane did not keep up. A real link would have
    /// dropped them, so a trial with refusals is never zero-loss.
    pub refused: u64,
    /// CPU of the generator thread while sending, in CPUs.
    pub gen_cpu: f64,
    /// Everyone's CPU while sending.
    pub usage: Usage,
    pub drain_s: f64,
}

impl TrialResult {
    /// Every frame back exactly once, and none refused on the way in.
    pub fn zero_loss(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.refused == 0 && self.sent > 0
    }

    /// The generator fell short of the asked rate by more than [`GEN_SLACK`] on its own
    /// (not because the dataplane's queue pushed back: that is the dataplane's limit).
    pub fn generator_limited(&self) -> bool {
        self.achieved_pps < self.asked_pps * (1.0 - GEN_SLACK) && self.refused == 0
    }

    /// The sink lost frames (its ring overflowed): the rig, not the dataplane.
    pub fn sink_limited(&self) -> bool {
        self.sink_drops > 0
    }
}

enum Cmd {
    Trial(Box<TrialSpec>),
    Quit,
}

enum Reply {
    Ready,
    Done(Box<TrialResult>),
    Failed(String),
}

/// The running generator thread.
#[derive(Debug)]
pub struct Generator {
    cmds: mpsc::Sender<Cmd>,
    replies: mpsc::Receiver<Reply>,
    worker: Option<Worker<()>>,
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reply::Ready => "Ready",
            Reply::Done(_) => "Done",
            Reply::Failed(_) => "Failed",
        })
    }
}

impl std::fmt::Debug for Cmd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Cmd::Trial(_) => "Trial",
            Cmd::Quit => "Quit",
        })
    }
}

impl Generator {
    /// Opens the sockets on the generator's own thread and waits until it is ready.
    pub fn start(cfg: GenConfig) -> Result<Generator> {
        let (cmds, cmd_rx) = mpsc::channel();
        let (reply_tx, replies) = mpsc::channel();
        let pin = cfg.cpu.map_or(Pin::Unpinned, Pin::Cpu);
        let worker = thread::spawn("bench-gen", pin, move || engine_main(&cfg, &cmd_rx, &reply_tx))
            .map_err(|e| anyhow!("{e}"))?;
        match replies.recv() {
            Ok(Reply::Ready) => Ok(Generator { cmds, replies, worker: Some(worker) }),
            Ok(Reply::Failed(e)) => bail!("generator: {e}"),
            other => bail!("generator thread ended before it was ready ({other:?})"),
        }
    }

    /// The generator thread's id.
    pub fn tid(&self) -> i32 {
        self.worker.as_ref().map_or(0, Worker::tid)
    }

    /// Runs one trial.
    pub fn trial(&self, spec: TrialSpec) -> Result<TrialResult> {
        self.cmds.send(Cmd::Trial(Box::new(spec))).map_err(|_| anyhow!("generator thread is gone"))?;
        match self.replies.recv() {
            Ok(Reply::Done(r)) => Ok(*r),
            Ok(Reply::Failed(e)) => bail!("generator: {e}"),
            other => bail!("generator thread ended ({other:?})"),
        }
    }
}

impl Drop for Generator {
    fn drop(&mut self) {
        let _ = self.cmds.send(Cmd::Quit);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

fn engine_main(cfg: &GenConfig, cmds: &mpsc::Receiver<Cmd>, out: &mpsc::Sender<Reply>) {
    let mut mem = vec![0u8; POOL_BUFS * BUF_SIZE];
    let engine = Pool::try_new(&mut mem, 0, POOL_BUFS)
        .map_err(|e| anyhow!("generator pool: {e}"))
        .and_then(|pool| Engine::open(cfg, pool));
    let mut e = match engine {
        Ok(e) => e,
        Err(err) => {
            let _ = out.send(Reply::Failed(format!("{err:#}")));
            return;
        }
    };
    if out.send(Reply::Ready).is_err() {
        return;
    }
    while let Ok(Cmd::Trial(spec)) = cmds.recv() {
        if out.send(Reply::Done(Box::new(e.run(&spec)))).is_err() {
            return;
        }
    }
}

enum Tx {
    Ring { q: Box<TpacketTx<MappedRing, PacketKick>>, _sock: PacketSocket },
    Mmsg { s: RawSender, bufs: Vec<Box<[u8]>>, lens: Vec<usize> },
}

enum Sink {
    Driver(TpacketRx<MappedRing>),
    Stamped(StampRx<MappedRing>),
}

struct Engine<'p> {
    clock: HostClock,
    pool: Pool<'p>,
    sink: Sink,
    sink_kind: SinkKind,
    rx_sock: PacketSocket,
    tx: Tx,
    dst: [u8; 6],
    src: [u8; 6],
    trial: u8,
}

/// The sink's rings: 1024 blocks of 4 KiB (4 MiB; ≈ 28 000 frames of 60 bytes), no TX.
fn sink_config() -> PacketConfig {
    PacketConfig::with_geometry(PacketGeometry {
        rx: RingGeometry::new(4096, 1024, 2048),
        tx: RingGeometry::new(4096, 1, 2048),
    })
}

/// The generator's ring socket: 512 TX slots of 2 KiB, a token RX ring (nothing arrives).
fn gen_config() -> PacketConfig {
    PacketConfig::with_geometry(PacketGeometry {
        rx: RingGeometry::new(4096, 1, 2048),
        tx: RingGeometry::new(64 << 10, 16, 2048),
    })
}

impl<'p> Engine<'p> {
    fn open(cfg: &GenConfig, pool: Pool<'p>) -> Result<Engine<'p>> {
        let mut rx_sock = PacketSocket::open(&cfg.rx_if, &sink_config(), None)
            .with_context(|| format!("sink socket on {}", cfg.rx_if))?;
        let g = rx_sock.geometry().rx;
        let rings = rx_sock.take_rings().context("sink rings")?;
        let (block_size, block_nr) = (g.block_size as usize, g.block_nr as usize);
        let sink = match cfg.sink {
            SinkKind::Driver => Sink::Driver(
                TpacketRx::try_new(rings.rx, RxGeometry { block_size, block_nr })
                    .map_err(|e| anyhow!("sink ring: {e}"))?,
            ),
            SinkKind::Stamped => {
                Sink::Stamped(StampRx::new(rings.rx, block_size, block_nr).context("sink ring: window too small")?)
            }
        };
        let tx = match cfg.path {
            TxPath::Ring => {
                let mut s = PacketSocket::open(&cfg.tx_if, &gen_config(), None)
                    .with_context(|| format!("generator socket on {}", cfg.tx_if))?;
                let g = s.geometry().tx;
                let rings = s.take_rings().context("generator rings")?;
                let geometry = TxGeometry {
                    block_size: g.block_size as usize,
                    block_nr: g.block_nr as usize,
                    frame_size: g.frame_size as usize,
                    frame_nr: g.frame_nr as usize,
                };
                let q = TpacketTx::try_new(rings.tx, s.kick(), geometry, frames::MAX_FRAME)
                    .map_err(|e| anyhow!("generator ring: {e}"))?;
                Tx::Ring { q: Box::new(q), _sock: s }
            }
            TxPath::Mmsg => Tx::Mmsg {
                s: RawSender::open(&cfg.tx_if)?,
                bufs: (0..BURST).map(|_| vec![0u8; BUF_SIZE].into_boxed_slice()).collect(),
                lens: vec![0; BURST],
            },
        };
        Ok(Engine {
            clock: cfg.clock,
            pool,
            sink,
            sink_kind: cfg.sink,
            rx_sock,
            tx,
            dst: cfg.dst,
            src: cfg.src,
            trial: 0,
        })
    }

    fn now(&self) -> u64 {
        self.clock.now().0
    }

    /// A (TSC, `CLOCK_REALTIME` ns) pair read together (the TSC is the middle of two reads
    /// around the clock call).
    fn anchor(&self) -> (u64, u64) {
        let a = self.now();
        let rt = cadence_platform::hosted::clock::clock_ns(libc::CLOCK_REALTIME);
        let b = self.now();
        (a / 2 + b / 2, rt)
    }

    /// Sends up to `n` (≤ [`BURST`]) frames stamped `tsc`, numbering them from `*seq`;
    /// returns how many the kernel took and how many it refused (`ENOBUFS`: the veth's
    /// peer queue is full — an AF_XDP receiver's ring pushes back instead of dropping).
    /// Refused frames keep their numbers and go again on the next call.
    fn send(&mut self, n: usize, t: &Templates, seq: &mut u32, tsc: u64) -> (usize, usize) {
        let trial = self.trial;
        match &mut self.tx {
            Tx::Ring { q, .. } => {
                q.reclaim(&mut self.pool);
                let k = n.min(BURST).min(q.frame_nr() - q.in_flight());
                let mut batch = Batch::new();
                for _ in 0..k {
                    let Some(b) = self.pool.alloc() else { break };
                    if self.pool.set_len(b, t.len(*seq)).is_err() {
                        let _ = self.pool.free(b);
                        break;
                    }
                    t.write(trial, *seq, tsc, self.pool.frame_mut(b));
                    // Cannot fail: k ≤ BURST = the batch's capacity.
                    let _ = batch.push(b);
                    *seq += 1;
                }
                let queued = batch.len();
                q.tx_burst(&mut self.pool, &mut batch);
                // The room was checked, so the ring takes everything; should it not, the
                // frames left over were never sent and their numbers are reused.
                let left = batch.len();
                self.pool.free_batch(&mut batch);
                *seq -= left as u32;
                // A frame the kernel cannot pass on is dropped from the ring (PACKET_LOSS):
                // it shows as lost. A full ring is the refusal seen here.
                (queued - left, n.min(BURST) - (queued - left))
            }
            Tx::Mmsg { s, bufs, lens } => {
                let k = n.min(BURST);
                for i in 0..k {
                    lens[i] = t.write(trial, *seq + i as u32, tsc, &mut bufs[i]);
                }
                let sent = s.send_many(&bufs[..k], &lens[..k]).unwrap_or(0);
                *seq += sent as u32;
                (sent, k - sent)
            }
        }
    }

    /// Moves what the sink has into `tally`; returns how many frames.
    fn poll_rx(&mut self, tally: &mut Tally) -> usize {
        let rx = match &mut self.sink {
            Sink::Stamped(s) => return s.poll(4, |f, ns| tally.frame_stamped(f, ns)),
            Sink::Driver(rx) => rx,
        };
        let mut batch = Batch::new();
        let n = rx.rx_burst(&mut self.pool, &mut batch);
        if n == 0 {
            return 0;
        }
        let now = self.now();
        let rate = self.clock.rate();
        for &b in batch.as_slice() {
            tally.frame(self.pool.frame(b), |tag| rate.ns(Ticks(now.saturating_sub(tag.tsc))));
        }
        self.pool.free_batch(&mut batch);
        n
    }

    fn tx_errors(&self) -> u64 {
        match &self.tx {
            Tx::Ring { q, .. } => q.tx_stats().errors,
            Tx::Mmsg { .. } => 0,
        }
    }

    fn run(&mut self, spec: &TrialSpec) -> TrialResult {
        self.trial = self.trial.wrapping_add(1);
        let hz = self.clock.rate().hz() as f64;
        let t = Templates::new(self.dst, self.src, spec.flows, spec.mix);
        let expect = (spec.rate_pps * spec.secs * 1.02) as usize + 1024;
        let mut tally = Tally::new(self.trial, spec.flows, expect);
        // Whatever an earlier trial left in the sink is counted as stale now.
        while self.poll_rx(&mut tally) > 0 {}
        let drops0 = self.rx_sock.stats().map_or(0, |s| s.drops);
        let errors0 = self.tx_errors();
        let per_tick = spec.rate_pps / hz;
        let depth = (spec.rate_pps * DEPTH_NS / 1e9).max(BURST as f64);
        let snap0 = spec.probe.snapshot();
        let cpu0 = thread::thread_cpu_time();
        let anchor0 = self.anchor();
        let t0 = self.now();
        let end = t0 + (spec.secs * hz) as u64;
        let (mut last, mut tokens, mut seq, mut refused) = (t0, 0.0f64, 0u32, 0u64);
        let mut now = t0;
        while now < end {
            tokens = (tokens + now.saturating_sub(last) as f64 * per_tick).min(depth);
            last = now;
            if tokens >= 1.0 {
                let (k, no) = self.send(tokens as usize, &t, &mut seq, now);
                tokens -= k as f64;
                refused += no as u64;
            }
            self.poll_rx(&mut tally);
            now = self.now();
        }
        let cpu1 = thread::thread_cpu_time();
        let snap1 = spec.probe.snapshot();
        let send_s = now.saturating_sub(t0) as f64 / hz;
        let sent = u64::from(seq);
        let drain0 = std::time::Instant::now();
        let mut progress = drain0;
        while tally.unique < sent {
            if self.poll_rx(&mut tally) > 0 {
                progress = std::time::Instant::now();
            } else if progress.elapsed().as_millis() as u64 >= spec.drain_idle_ms
                || drain0.elapsed().as_millis() as u64 >= spec.drain_max_ms
            {
                break;
            }
        }
        // Duplicates and stragglers that come right after the last frame.
        let settle = std::time::Instant::now();
        while settle.elapsed().as_millis() < 2 {
            self.poll_rx(&mut tally);
        }
        let anchor1 = self.anchor();
        if anchor1.0 > anchor0.0 {
            let slope = anchor1.1.saturating_sub(anchor0.1) as f64 / (anchor1.0 - anchor0.0) as f64;
            let at = |tsc: u64| (anchor0.1 as f64 + (tsc as f64 - anchor0.0 as f64) * slope) as u64;
            tally.resolve_stamps(at);
        }
        let u = usage(&snap0, &snap1, super::sysstat::clk_tck());
        TrialResult {
            asked_pps: spec.rate_pps,
            sent,
            send_s,
            achieved_pps: sent as f64 / send_s.max(1e-9),
            received: tally.received,
            unique: tally.unique,
            lost: tally.lost(sent),
            duplicated: tally.duplicated,
            reordered: tally.reordered,
            foreign: tally.foreign,
            stale: tally.stale,
            latency: tally.latency(),
            latency_source: self.sink_kind.latency_source(),
            sink_drops: self.rx_sock.stats().map_or(0, |s| s.drops).saturating_sub(drops0),
            refused,
            tx_errors: self.tx_errors().saturating_sub(errors0),
            gen_cpu: cpu1.saturating_sub(cpu0).as_secs_f64() / u.wall_s,
            usage: u,
            drain_s: drain0.elapsed().as_secs_f64(),
        }
    }
}
