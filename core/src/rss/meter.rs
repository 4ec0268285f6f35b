//! Per-bucket load as the dataplane sees it: the input of NetBlaze's server mapper
//! (`crate::netblaze::server_mapper`), which moves RSS buckets between cores.
//!
//! The server mapper needs, per RSS bucket (indirection-table entry), the last period's
//! packets/s and active flows. The NIC does not hand Cadence its RSS hash, so each worker
//! computes it again for every frame its chain parses: the Toeplitz hash of the flow under
//! [`DEFAULT_KEY`] (the key every driver programs), addresses plus TCP/UDP ports (the hash
//! types every driver enables), and the bucket is its low bits ([`reta_index`]) — the entry
//! the device looked up. Frames that do not parse (non-IP, malformed) are not in any
//! bucket's load (the device hashes them by what it can, or not at all; the chain counts
//! them under their drop reason).
//!
//! One [`BucketMeter`] per worker (in its chain), so recording is plain stores: per frame a
//! compare of the clock against the period's end, one table-driven Toeplitz hash (12 bytes
//! for IPv4, 36 for IPv6), and two updates — the bucket's packet count and its flow sketch,
//! a 64-bit bitmap with bit `hash >> 26` set (linear counting: `n ≈ −64 · ln(zeros / 64)`,
//! good to a few hundred flows per bucket, and a full sketch reads as 310, the estimate
//! for half a zero bit). Periods are fixed
//! slices of the clock from a common start (`index = (now − start) / period`), so every
//! worker's period `k` covers the same span; a worker keeps the period it is in and the one
//! before, and publishes both ([`MeterSnapshot`]); the mapper sums period `k` over the
//! workers' snapshots ([`PeriodSum`]) — the counts add, the sketches OR (a flow served by two
//! workers in one period is one flow).
//!
//! Everything is allocated in [`BucketMeter::new`]; recording and snapshots never allocate
//! and never panic.

use alloc::vec;
use alloc::vec::Vec;

use crate::parse::FlowKey;
use crate::rss::{DEFAULT_KEY, MAX_INPUT, ToeplitzTable, reta_index};
use crate::time::{Duration, Instant};

/// One bucket's load over the last period.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BucketLoad {
    /// Average active flows.
    pub flows: f64,
    /// Average packets per second.
    pub pps: f64,
}

/// Most buckets a meter keeps (the largest indirection table of the drivers: i40e's 512).
pub const MAX_BUCKETS: usize = 512;

/// What a full flow sketch (all 64 bits set) reads as: `64 · ln 128`, the estimate for half
/// a zero bit (one zero bit reads as 266).
pub const SKETCH_MAX_FLOWS: f64 = 310.0;

/// Why a [`BucketMeter`] could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum MeterError {
    /// Buckets not a power of two in `1..=MAX_BUCKETS` (the device indexes by low bits).
    Buckets,
    /// A zero period.
    PeriodZero,
}

impl core::fmt::Display for MeterError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            MeterError::Buckets => "buckets must be a power of two in 1..=512 (the RSS indirection table)",
            MeterError::PeriodZero => "the mapper period must be positive",
        })
    }
}

/// One period's counts on one worker (or summed).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeriodLoad {
    /// Which period: `(t − start) / period`.
    pub index: u64,
    /// Frames per bucket.
    pub packets: Vec<u64>,
    /// Flow sketch per bucket (bit `hash >> 26`).
    pub sketch: Vec<u64>,
}

impl PeriodLoad {
    fn zeroed(buckets: usize) -> Self {
        Self { index: 0, packets: vec![0; buckets], sketch: vec![0; buckets] }
    }

    /// Zero counts standing for no period (index `u64::MAX`, which no clock reaches).
    fn none(buckets: usize) -> Self {
        Self { index: u64::MAX, ..Self::zeroed(buckets) }
    }

    fn reset(&mut self, index: u64) {
        self.index = index;
        self.packets.iter_mut().for_each(|p| *p = 0);
        self.sketch.iter_mut().for_each(|s| *s = 0);
    }

    /// Frames over every bucket.
    pub fn total(&self) -> u64 {
        self.packets.iter().fold(0u64, |a, &p| a.saturating_add(p))
    }
}

/// What a worker publishes: the period it is in and the one before, and when it copied them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MeterSnapshot {
    /// The clock when the snapshot was taken.
    pub at: Instant,
    /// The period the meter is in.
    pub cur: PeriodLoad,
    /// The period before it.
    pub done: PeriodLoad,
}

impl MeterSnapshot {
    /// An empty snapshot for `buckets` buckets (its storage allocated now, so copying a
    /// meter into it never allocates).
    pub fn with_buckets(buckets: usize) -> Self {
        Self { at: Instant(0), cur: PeriodLoad::none(buckets), done: PeriodLoad::none(buckets) }
    }

    /// This worker's counts for period `index`, if it has them.
    pub fn period(&self, index: u64) -> Option<&PeriodLoad> {
        [&self.done, &self.cur].into_iter().find(|p| p.index == index)
    }
}

/// One worker's per-bucket meter (module docs).
#[derive(Clone)]
pub struct BucketMeter {
    toeplitz: ToeplitzTable,
    start: Instant,
    period: Duration,
    /// End of the current period.
    next: Instant,
    cur: PeriodLoad,
    done: PeriodLoad,
}

impl core::fmt::Debug for BucketMeter {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("BucketMeter")
            .field("buckets", &self.cur.packets.len())
            .field("period", &self.period)
            .field("index", &self.cur.index)
            .finish_non_exhaustive()
    }
}

impl BucketMeter {
    /// A meter for `buckets` indirection entries, periods of `period` ticks counted from
    /// `start` (the same for every worker).
    pub fn new(buckets: usize, start: Instant, period: Duration) -> Result<Self, MeterError> {
        if !(buckets.is_power_of_two() && buckets <= MAX_BUCKETS) {
            return Err(MeterError::Buckets);
        }
        if period.ticks() == 0 {
            return Err(MeterError::PeriodZero);
        }
        let toeplitz = match ToeplitzTable::try_new(&DEFAULT_KEY, MAX_INPUT) {
            Ok(t) => t,
            // DEFAULT_KEY is 40 bytes, MAX_INPUT 36: cannot fail.
            Err(_) => return Err(MeterError::Buckets),
        };
        let (cur, done) = (PeriodLoad::zeroed(buckets), PeriodLoad::none(buckets));
        Ok(Self { toeplitz, start, period, next: start.saturating_add(period), cur, done })
    }

    /// Buckets.
    pub fn buckets(&self) -> usize {
        self.cur.packets.len()
    }

    /// The period length.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Which period `now` falls in.
    pub fn index_at(&self, now: Instant) -> u64 {
        now.saturating_since(self.start).ticks() / self.period.ticks().max(1)
    }

    /// The bucket the device steered `flow` to (the hash of the module docs).
    #[inline]
    pub fn bucket_of(&self, flow: &FlowKey) -> (usize, u32) {
        let h = self.toeplitz.hash_flow(flow, true);
        (reta_index(h, self.buckets()), h)
    }

    /// Counts one frame of `flow` received at `now`.
    #[inline]
    pub fn record(&mut self, flow: &FlowKey, now: Instant) {
        if now >= self.next {
            self.rotate(now);
        }
        let (b, h) = self.bucket_of(flow);
        if let Some(p) = self.cur.packets.get_mut(b) {
            *p = p.saturating_add(1);
        }
        if let Some(s) = self.cur.sketch.get_mut(b) {
            *s |= 1u64 << (h >> 26);
        }
    }

    /// Moves to the period `now` is in: the current one becomes the one before if they are
    /// adjacent, else the one before is empty (this worker saw nothing in it).
    fn rotate(&mut self, now: Instant) {
        let idx = self.index_at(now);
        if idx == self.cur.index {
            return;
        }
        if idx == self.cur.index.saturating_add(1) {
            core::mem::swap(&mut self.cur, &mut self.done);
        } else {
            self.done.reset(idx.saturating_sub(1));
        }
        self.cur.reset(idx);
        let end = self.period.ticks().saturating_mul(idx.saturating_add(1));
        self.next = self.start.saturating_add(Duration(end));
    }

    /// Copies both periods into `into` (sized by [`MeterSnapshot::with_buckets`]: no
    /// allocation), stamped `now`.
    pub fn snapshot_into(&self, into: &mut MeterSnapshot, now: Instant) {
        into.at = now;
        into.cur.clone_from(&self.cur);
        into.done.clone_from(&self.done);
    }
}

/// Flows that set `bits` of a 64-bit linear-counting sketch (module docs).
pub fn sketch_flows(bits: u64) -> f64 {
    let zeros = bits.count_zeros();
    if zeros == 0 { SKETCH_MAX_FLOWS } else { -64.0 * libm::log(f64::from(zeros) / 64.0) }
}

/// Period `index` summed over workers, for the mapper.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeriodSum {
    sum: PeriodLoad,
    /// Workers whose snapshot was taken before the period ended (their counts may be short).
    pub stale: usize,
}

impl PeriodSum {
    /// Storage for `buckets` buckets.
    pub fn with_buckets(buckets: usize) -> Self {
        Self { sum: PeriodLoad::zeroed(buckets), stale: 0 }
    }

    /// Sums period `index`, which ended at `end`, over `snapshots`.
    pub fn gather<'a>(&mut self, index: u64, end: Instant, snapshots: impl IntoIterator<Item = &'a MeterSnapshot>) {
        self.begin(index);
        for s in snapshots {
            self.add(s, end);
        }
    }

    /// Starts summing period `index` ([`PeriodSum::add`] each worker's snapshot).
    pub fn begin(&mut self, index: u64) {
        self.sum.reset(index);
        self.stale = 0;
    }

    /// Adds one worker's snapshot to the period begun, which ended at `end` (a snapshot
    /// taken before `end` counts as stale).
    pub fn add(&mut self, s: &MeterSnapshot, end: Instant) {
        if s.at < end {
            self.stale += 1;
        }
        let Some(p) = s.period(self.sum.index) else { return };
        for (a, b) in self.sum.packets.iter_mut().zip(&p.packets) {
            *a = a.saturating_add(*b);
        }
        for (a, b) in self.sum.sketch.iter_mut().zip(&p.sketch) {
            *a |= *b;
        }
    }

    /// The summed counts.
    pub fn load(&self) -> &PeriodLoad {
        &self.sum
    }

    /// Per bucket: flows (sketch) and packets/s over a period of `period_s` seconds,
    /// written into `out` (resized to the buckets once; no allocation after).
    pub fn bucket_loads(&self, period_s: f64, out: &mut Vec<BucketLoad>) {
        out.resize(self.sum.packets.len(), BucketLoad::default());
        let secs = if period_s > 0.0 { period_s } else { 1.0 };
        for ((o, &p), &s) in out.iter_mut().zip(&self.sum.packets).zip(&self.sum.sketch) {
            *o = BucketLoad { flows: sketch_flows(s), pps: p as f64 / secs };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::IpAddr;
    use crate::rss::toeplitz;

    fn flow(i: u16) -> FlowKey {
        FlowKey {
            src: IpAddr::V4([10, 0, (i >> 8) as u8, i as u8]),
            dst: IpAddr::V4([10, 101, 0, 1]),
            src_port: 10_000 + i,
            dst_port: 20_000,
            proto: 17,
        }
    }

    #[test]
    fn bad_sizes_are_refused() {
        assert_eq!(BucketMeter::new(0, Instant(0), Duration(10)).err(), Some(MeterError::Buckets));
        assert_eq!(BucketMeter::new(96, Instant(0), Duration(10)).err(), Some(MeterError::Buckets));
        assert_eq!(BucketMeter::new(1024, Instant(0), Duration(10)).err(), Some(MeterError::Buckets));
        assert_eq!(BucketMeter::new(128, Instant(0), Duration(0)).err(), Some(MeterError::PeriodZero));
    }

    #[test]
    fn the_bucket_is_the_one_the_device_looks_up() {
        // The reference hash, bit by bit, over the layout the NIC hashes (addresses, ports).
        let m = BucketMeter::new(128, Instant(0), Duration(100)).unwrap();
        for i in 0..64 {
            let f = flow(i);
            let mut input = [0u8; 12];
            input[..4].copy_from_slice(&[10, 0, (i >> 8) as u8, i as u8]);
            input[4..8].copy_from_slice(&[10, 101, 0, 1]);
            input[8..10].copy_from_slice(&(10_000 + i).to_be_bytes());
            input[10..].copy_from_slice(&20_000u16.to_be_bytes());
            let h = toeplitz(&DEFAULT_KEY, &input).unwrap();
            assert_eq!(m.bucket_of(&f), ((h & 127) as usize, h), "flow {i}");
        }
    }

    #[test]
    fn periods_rotate_and_gaps_read_as_empty() {
        let mut m = BucketMeter::new(8, Instant(1000), Duration(100)).unwrap();
        let mut snap = MeterSnapshot::with_buckets(8);
        for t in [1000, 1050, 1099] {
            m.record(&flow(1), Instant(t));
        }
        m.record(&flow(2), Instant(1100)); // period 1
        m.snapshot_into(&mut snap, Instant(1100));
        assert_eq!((snap.done.index, snap.done.total()), (0, 3));
        assert_eq!((snap.cur.index, snap.cur.total()), (1, 1));
        assert_eq!(snap.period(0).map(PeriodLoad::total), Some(3));
        // Nothing in periods 2 and 3, then a frame in period 4: period 3 reads as empty and
        // the counts of periods 0 and 1 are gone.
        m.record(&flow(3), Instant(1450));
        m.snapshot_into(&mut snap, Instant(1450));
        assert_eq!((snap.done.index, snap.done.total()), (3, 0));
        assert_eq!((snap.cur.index, snap.cur.total()), (4, 1));
        assert!(snap.period(1).is_none());
    }

    #[test]
    fn sums_add_counts_and_or_sketches_over_workers() {
        let (start, period) = (Instant(0), Duration(1000));
        let mut a = BucketMeter::new(4, start, period).unwrap();
        let mut b = BucketMeter::new(4, start, period).unwrap();
        // The same 20 flows through both workers in period 0, five frames each in all.
        for i in 0..20 {
            a.record(&flow(i), Instant(10));
            for _ in 0..4 {
                b.record(&flow(i), Instant(20));
            }
        }
        let (mut sa, mut sb) = (MeterSnapshot::with_buckets(4), MeterSnapshot::with_buckets(4));
        a.snapshot_into(&mut sa, Instant(1001));
        b.snapshot_into(&mut sb, Instant(500)); // taken before the period ended
        let mut sum = PeriodSum::with_buckets(4);
        sum.gather(0, Instant(1000), [&sa, &sb]);
        assert_eq!(sum.stale, 1);
        assert_eq!(sum.load().total(), 100);
        let mut loads = Vec::new();
        sum.bucket_loads(0.5, &mut loads);
        assert_eq!(loads.len(), 4);
        let pps: f64 = loads.iter().map(|l| l.pps).sum();
        assert!((pps - 200.0).abs() < 1e-9, "100 frames in half a second: {pps}");
        let flows: f64 = loads.iter().map(|l| l.flows).sum();
        // 20 distinct flows; linear counting over four 64-bit sketches.
        assert!((14.0..=28.0).contains(&flows), "about 20 flows: {flows}");
        // Per bucket the frames are the flows' (5 each) and the sketch is not empty.
        for (i, l) in loads.iter().enumerate() {
            let n = (0..20).filter(|&f| a.bucket_of(&flow(f)).0 == i).count() as f64;
            assert!((l.pps - n * 10.0).abs() < 1e-9, "bucket {i}");
            assert_eq!(l.flows > 0.0, n > 0.0, "bucket {i}");
        }
        // A period nobody has: all zero.
        sum.gather(7, Instant(8000), [&sa, &sb]);
        assert_eq!(sum.load().total(), 0);
    }

    #[test]
    fn the_sketch_saturates_instead_of_overflowing() {
        assert_eq!(sketch_flows(0), 0.0);
        assert!((sketch_flows(1) - 1.0).abs() < 0.01);
        assert_eq!(sketch_flows(u64::MAX), SKETCH_MAX_FLOWS);
        assert!(sketch_flows(u64::MAX >> 1) < SKETCH_MAX_FLOWS);
    }
}
