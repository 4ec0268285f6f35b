//! `cadence-ctl profile --chain FILE`: NetBlaze's capacity predictor, measured on this
//! machine (issue 10 item 3).
//!
//! The chain's real code runs in the real worker loop (`core::worker::Worker::poll_once`)
//! over software NICs, as `core/benches/chains.rs` does, timed with the TSC around each poll
//! (the injection of frames into the RX ring is outside the measurement). Frames are 64-byte
//! IPv4/TCP frames to port 80 of one address, one source address per flow.
//!
//! For each part — the whole chain and, for every split point `k`, the head (NFs `1..=k`) and
//! the tail (`k+1..=n`) built with `Chain::split_off` — it measures:
//!
//! - **Frontier**: for flows `f` = 1, 2, 4, …: epochs of `p` packets (multiples of 32, the
//!   batch size) over `f` flows new to the chain (the first `f` packets create the flows'
//!   state; packets go round robin over the flows); the median cycles of `reps` epochs;
//!   the largest `p` whose median fits in the epoch is the point `f:p`. Flows stop at the
//!   first `f` for which not even `max(f, 32)` packets fit. Capacities are made
//!   non-increasing (a running minimum against noise).
//! - **Service cost**: cycles per packet of 64 known flows in steady state, and the extra
//!   cycles of a new flow's first packet (32 new flows, one packet each, less 32 × the
//!   former).
//! - **Rate** (whole chain only): cycles per packet in steady state over `F` known flows,
//!   `F` = 1 … 6000, as packets/s at the TSC rate.
//!
//! Fresh flows need room in the NFs' tables: the chain's shared state is rebuilt
//! (`ChainSpec::build`) every 2000 new flows.
//!
//! `--acl-rules N` adds N generated rules (`nf::acl::example_rules`, the bench's set) to the
//! ACL, plus a top-priority permit for the profile's traffic, as the chain bench does — the
//! paper's ACL holds 1.5k rules.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use cadence_core::buf::{BATCH_SIZE, BUF_SIZE, Pool};
use cadence_core::checksum;
use cadence_core::netblaze::{Frontier, FrontierPoint, Part, Profile, RateCurve, RatePoint, ServiceCost, SplitProfile};
use cadence_core::nf::acl::{AclAction, AclRule, example_rules};
use cadence_core::nf::config::{ChainFactory, ChainSpec, NfSpec};
use cadence_core::nf::{Chain, Egress};
use cadence_core::poll::{PollConfig, Poller};
use cadence_core::softnic::{SoftRxQueue, SoftTxQueue};
use cadence_core::time::{Clock, Instant, TickRate};

/// What to profile and how.
#[derive(Debug, Clone)]
pub struct ProfileOptions {
    /// The chain file (TOML).
    pub chain: PathBuf,
    /// The epoch the frontiers are for (µs): `(SLO − 40)/2`, 80 for a 200 µs SLO.
    pub epoch_us: u64,
    /// Generated ACL rules to add (0: the file's rules only).
    pub acl_rules: usize,
    /// Epochs measured per grid point (the median counts).
    pub reps: usize,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        Self { chain: PathBuf::from("chains/chain1.toml"), epoch_us: 80, acl_rules: 1500, reps: 9 }
    }
}

/// Flow counts of the frontier grid.
const FLOWS: [u32; 12] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048];
/// Flow counts of the long-term rate curve.
const RATE_FLOWS: [u32; 7] = [1, 100, 500, 1000, 2000, 3000, 6000];
/// New flows before the NFs' tables are rebuilt (the shipped chains hold 8192 flows).
const REBUILD_EVERY: u32 = 2000;
/// The destination every profile flow goes to.
const DST: [u8; 4] = [10, 1, 0, 1];

/// Reads the time-stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC reads a counter; it has no memory effects and exists on every x86_64 CPU.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
}

/// The TSC rate, measured against the monotonic clock over 100 ms.
pub fn tsc_hz() -> u64 {
    let (t0, c0) = (std::time::Instant::now(), rdtsc());
    std::thread::sleep(std::time::Duration::from_millis(100));
    let (dt, dc) = (t0.elapsed().as_secs_f64(), rdtsc().saturating_sub(c0));
    let hz = dc as f64 / dt.max(1e-9);
    // Round to 1 MHz: the figure goes into a file and should not move run to run.
    ((hz / 1e6).round() * 1e6) as u64
}

/// The TSC as the NFs' clock.
#[derive(Debug, Clone, Copy)]
struct Tsc(TickRate);

impl Clock for Tsc {
    fn now(&self) -> Instant {
        Instant(rdtsc())
    }
    fn rate(&self) -> TickRate {
        self.0
    }
}

/// A 64-byte IPv4/TCP frame (10 payload bytes, valid checksums) of flow `flow`: from
/// 10.a.b.c:1024 (a.b.c = the flow's low 24 bits) to 10.1.0.1:80.
pub fn frame(flow: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x52, 0x54, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let src = [10, (flow >> 16) as u8, (flow >> 8) as u8, flow as u8];
    {
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&50u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&DST);
        let sum = checksum::checksum(ip);
        ip[10..12].copy_from_slice(&sum.to_be_bytes());
    }
    {
        let tcp = &mut f[34..54];
        tcp[0..2].copy_from_slice(&1024u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[4..8].copy_from_slice(&1000u32.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x18; // PSH|ACK
        tcp[14..16].copy_from_slice(&8192u16.to_be_bytes());
    }
    f[54..64].copy_from_slice(b"0123456789");
    let sum = checksum::l4_checksum_v4(src, DST, 6, &f[34..64]);
    f[50..52].copy_from_slice(&sum.to_be_bytes());
    f
}

const EGRESS: Egress =
    Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], [[2, 0, 0, 0, 1, 0], [2, 0, 0, 0, 1, 1]], None);

/// The chain spec with `acl_rules` generated rules and a top-priority permit for the profile's
/// traffic added to its ACL (if it has one).
pub fn with_acl_rules(mut spec: ChainSpec, acl_rules: usize) -> ChainSpec {
    if acl_rules == 0 {
        return spec;
    }
    for nf in &mut spec.nfs {
        if let NfSpec::Acl(c) = nf {
            c.rules.extend(example_rules(7, acl_rules));
            let mut permit = AclRule::any(u32::MAX, AclAction::Permit);
            permit.proto = Some(6);
            permit.dport = (80, 80);
            c.rules.push(permit);
        }
    }
    spec
}

/// Which part of the chain a measurement runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Full,
    Head(usize),
    Tail(usize),
}

/// One part under measurement: its worker, software NICs, pool and a supply of new flows.
struct Bench<'a> {
    spec: &'a ChainSpec,
    which: Which,
    rate: TickRate,
    factory: ChainFactory,
    worker: Poller<Chain>,
    fresh: u32,
    next_flow: u32,
}

fn part_chain(factory: &ChainFactory, which: Which) -> Chain {
    let mut c = factory.chain_for_worker();
    match which {
        Which::Full => c,
        Which::Head(k) => {
            let _tail = c.split_off(k);
            c
        }
        Which::Tail(k) => c.split_off(k),
    }
}

impl<'a> Bench<'a> {
    fn new(spec: &'a ChainSpec, which: Which, rate: TickRate) -> Result<Self> {
        let factory = spec.build(EGRESS.clone(), rate).map_err(|e| anyhow::anyhow!("building the chain: {e}"))?;
        let worker = Poller::new(part_chain(&factory, which), PollConfig::default());
        Ok(Self { spec, which, rate, factory, worker, fresh: 0, next_flow: 1 })
    }

    /// `n` flow ids never seen by the NFs' tables (rebuilding them when they fill up).
    fn new_flows(&mut self, n: u32) -> Result<Vec<u32>> {
        if self.fresh + n > REBUILD_EVERY {
            self.factory =
                self.spec.build(EGRESS.clone(), self.rate).map_err(|e| anyhow::anyhow!("building the chain: {e}"))?;
            self.worker = Poller::new(part_chain(&self.factory, self.which), PollConfig::default());
            self.fresh = 0;
        }
        self.fresh += n;
        let ids = (self.next_flow..self.next_flow + n).collect();
        self.next_flow = (self.next_flow + n) % (1 << 24);
        Ok(ids)
    }
}

/// Software NICs and their pool, kept for the whole profile so that buffers stay warm as
/// they are in a running dataplane.
struct Nics {
    pool: Pool<'static>,
    rx: [SoftRxQueue; 2],
    tx: [SoftTxQueue; 2],
}

impl Nics {
    fn new() -> Result<Self> {
        // One pool for the whole command (8 MiB); leaked, the process ends soon after.
        let mem: &'static mut [u8] = Box::leak(vec![0u8; 4096 * BUF_SIZE].into_boxed_slice());
        let mut pool = Pool::try_new(mem, 0x1000_0000, 4096).map_err(|e| anyhow::anyhow!("pool: {e:?}"))?;
        let rx = [SoftRxQueue::new(&mut pool, 512), SoftRxQueue::new(&mut pool, 512)];
        Ok(Self { pool, rx, tx: [SoftTxQueue::new(512, true), SoftTxQueue::new(512, true)] })
    }
}

/// Cycles to run `frames` (in order, 32 at a time) through the worker; only the polls are timed.
fn run_frames(worker: &mut Poller<Chain>, nics: &mut Nics, frames: &[&[u8]], clock: &Tsc) -> Result<u64> {
    let mut cycles = 0;
    for chunk in frames.chunks(BATCH_SIZE) {
        for f in chunk {
            nics.rx[0].inject(&mut nics.pool, f).map_err(|e| anyhow::anyhow!("inject: {e:?}"))?;
        }
        let t0 = rdtsc();
        let _ = worker.poll_once(&mut nics.pool, &mut nics.rx, &mut nics.tx, clock);
        cycles += rdtsc().saturating_sub(t0);
    }
    Ok(cycles)
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

/// Median cycles of an epoch of `packets` packets over `flows` new flows.
fn epoch_cycles(b: &mut Bench<'_>, nics: &mut Nics, clock: &Tsc, flows: u32, packets: u32, reps: usize) -> Result<u64> {
    let mut samples = Vec::with_capacity(reps);
    let warm_ids = b.new_flows(32)?;
    let warm: Vec<Vec<u8>> = warm_ids.iter().map(|&f| frame(f)).collect();
    let warm: Vec<&[u8]> = warm.iter().map(Vec::as_slice).collect();
    for _ in 0..reps {
        // The core was busy before the epoch: 64 packets of known flows, untimed.
        run_frames(&mut b.worker, nics, &warm, clock)?;
        run_frames(&mut b.worker, nics, &warm, clock)?;
        let ids = b.new_flows(flows)?;
        let frames: Vec<Vec<u8>> = ids.iter().map(|&f| frame(f)).collect();
        let order: Vec<&[u8]> = (0..packets as usize).map(|i| frames[i % frames.len()].as_slice()).collect();
        samples.push(run_frames(&mut b.worker, nics, &order, clock)?);
    }
    Ok(median(samples))
}

/// Median cycles per packet in steady state over `flows` known flows.
fn steady_cycles(b: &mut Bench<'_>, nics: &mut Nics, clock: &Tsc, flows: u32, reps: usize) -> Result<f64> {
    let ids = b.new_flows(flows)?;
    let frames: Vec<Vec<u8>> = ids.iter().map(|&f| frame(f)).collect();
    let all: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
    run_frames(&mut b.worker, nics, &all, clock)?; // creates the flows' state
    let per_rep = (flows as usize).max(1024);
    let order: Vec<&[u8]> = (0..per_rep).map(|i| all[i % all.len()]).collect();
    let mut samples = Vec::with_capacity(reps);
    for _ in 0..reps {
        samples.push(run_frames(&mut b.worker, nics, &order, clock)?);
    }
    Ok(median(samples) as f64 / per_rep as f64)
}

/// Frontier and service cost of one part.
fn measure_part(b: &mut Bench<'_>, nics: &mut Nics, clock: &Tsc, epoch_cycles_max: u64, reps: usize) -> Result<Part> {
    let packet = steady_cycles(b, nics, clock, 64, reps)?;
    let first = epoch_cycles(b, nics, clock, 32, 32, reps)? as f64;
    let flow = ((first - 32.0 * packet) / 32.0).max(0.0);
    let mut points: Vec<FrontierPoint> = Vec::new();
    for &f in &FLOWS {
        let mut p = f.max(32).div_ceil(32) * 32;
        let mut best = None;
        loop {
            let c = epoch_cycles(b, nics, clock, f, p, reps)?;
            if c > epoch_cycles_max {
                break;
            }
            best = Some(p);
            p += 32;
        }
        let Some(p) = best else { break };
        let p = points.last().map_or(p, |last| p.min(last.packets));
        points.push(FrontierPoint { flows: f, packets: p });
    }
    if points.is_empty() {
        bail!("not even one flow of 32 packets fits in the epoch: make --epoch-us longer");
    }
    let frontier = Frontier::try_new(points).map_err(|e| anyhow::anyhow!("frontier: {e}"))?;
    Ok(Part {
        frontier,
        service: ServiceCost { packet_cycles: packet.round() as u32, flow_cycles: flow.round() as u32 },
    })
}

/// Profiles the chain (module docs) and returns the profile.
pub fn profile(opts: &ProfileOptions, progress: &mut dyn FnMut(&str)) -> Result<Profile> {
    if opts.epoch_us == 0 || opts.reps == 0 {
        bail!("--epoch-us and --reps must be positive");
    }
    let compiled = crate::chain::load(&opts.chain)?;
    let spec = with_acl_rules(compiled.spec, opts.acl_rules);
    let n = spec.nfs.len();
    if n == 0 {
        bail!("{}: the chain has no NF", opts.chain.display());
    }
    let hz = tsc_hz();
    let rate = TickRate::try_new(hz).context("TSC rate")?;
    let clock = Tsc(rate);
    let epoch_cycles_max = (u128::from(opts.epoch_us) * u128::from(hz) / 1_000_000) as u64;
    let mut nics = Nics::new()?;

    progress(&format!("TSC {:.3} GHz, epoch {} us = {epoch_cycles_max} cycles", hz as f64 / 1e9, opts.epoch_us));
    let mut full = Bench::new(&spec, Which::Full, rate)?;
    let full_part = measure_part(&mut full, &mut nics, &clock, epoch_cycles_max, opts.reps)?;
    progress(&format!("whole chain: {:?}", full_part.service));
    let mut rate_points: Vec<RatePoint> = Vec::new();
    for &f in &RATE_FLOWS {
        let c = steady_cycles(&mut full, &mut nics, &clock, f, opts.reps)?;
        let pps = (hz as f64 / c.max(1.0)) as u64;
        let pps = rate_points.last().map_or(pps, |l| pps.min(l.pps)).max(1);
        rate_points.push(RatePoint { flows: f, pps });
    }
    let rate_curve = RateCurve::try_new(rate_points).map_err(|e| anyhow::anyhow!("rate: {e}"))?;
    let mut splits = Vec::new();
    for k in 1..n {
        let mut head = Bench::new(&spec, Which::Head(k), rate)?;
        let head = measure_part(&mut head, &mut nics, &clock, epoch_cycles_max, opts.reps)?;
        let mut tail = Bench::new(&spec, Which::Tail(k), rate)?;
        let tail = measure_part(&mut tail, &mut nics, &clock, epoch_cycles_max, opts.reps)?;
        progress(&format!("split {k}: head {:?}, tail {:?}", head.service, tail.service));
        splits.push(SplitProfile { k: k as u8, head, tail });
    }
    Ok(Profile {
        nfs: spec.names().map(String::from).collect(),
        tsc_hz: hz,
        epoch_ns: opts.epoch_us * 1000,
        full: full_part,
        rate: rate_curve,
        splits,
    })
}

/// The file: a header (what, when, how) and the records.
pub fn render(p: &Profile, opts: &ProfileOptions, date: &str) -> Result<String> {
    let mut s = String::new();
    writeln!(s, "# NetBlaze capacity profile of {} (docs/PROTOCOL.md \"NetBlaze profile\")", opts.chain.display())?;
    writeln!(s, "# produced {date} on this machine by:")?;
    writeln!(
        s,
        "#   cargo xtask profile --chain {} --epoch-us {} --acl-rules {} --reps {}",
        opts.chain.display(),
        opts.epoch_us,
        opts.acl_rules,
        opts.reps
    )?;
    writeln!(s, "# frontier: flows:packets one core finishes per epoch (new flows); rate: flows:packets/s")?;
    writeln!(s, "# long term (known flows); service: cycles per packet and per new flow.")?;
    p.write(&mut s)?;
    Ok(s)
}

/// Today's date (UTC) as `YYYY-MM-DD`, from the system clock.
pub fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_date((secs / 86_400) as i64);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian `(year, month, day)` of `days` since 1970-01-01 (H. Hinnant's
/// `civil_from_days`).
pub fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// The default output path: the chain file's, with `.profile` for `.toml`.
pub fn default_out(chain: &Path) -> PathBuf {
    chain.with_extension("profile")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_parse_and_differ_per_flow() {
        let a = frame(1);
        let b = frame(0x01_0203);
        let pa = cadence_core::parse::parse(&a).expect("parses");
        let pb = cadence_core::parse::parse(&b).expect("parses");
        assert_ne!(pa, pb);
        assert_eq!(&b[26..30], &[10, 1, 2, 3]);
    }

    #[test]
    fn acl_rules_are_added_with_a_permit_on_top() {
        let spec = crate::chain::compile("c.toml", "[chain]\nnfs = [\"acl\"]\n").expect("chain").spec;
        let spec = with_acl_rules(spec, 10);
        let NfSpec::Acl(c) = &spec.nfs[0] else { panic!("acl") };
        assert_eq!(c.rules.len(), 11);
        assert_eq!(c.rules.last().map(|r| r.priority), Some(u32::MAX));
    }

    #[test]
    fn a_tiny_chain_profiles_and_the_file_parses_back() {
        let dir = std::env::temp_dir().join(format!("cadence-profile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let chain = dir.join("c.toml");
        std::fs::write(
            &chain,
            "[chain]\nnfs = [\"acl\", \"accounting\"]\n[acl]\nflow_capacity = 8192\n[accounting]\ncapacity = 8192\n",
        )
        .expect("write");
        let opts = ProfileOptions { chain, epoch_us: 400, acl_rules: 0, reps: 1 };
        let p = profile(&opts, &mut |_| {}).expect("profile");
        assert_eq!(p.nfs, ["acl", "accounting"]);
        assert_eq!(p.splits.len(), 1);
        let text = render(&p, &opts, "2026-12-01").expect("render");
        assert_eq!(Profile::parse(&text).expect("parse"), p);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert_eq!(&d[4..5], "-");
    }
}
