//! The dataplane's own per-packet latency (NetBlaze keeps the p99 *sojourn* under an
//! SLO, so the dataplane must see it, not only the host).
//!
//! Span measured: from the frame's **arrival** to the moment the worker hands it to a
//! transmit ring (one clock reading per poll, before the TX bursts). The arrival is the
//! stamp the receive queue put on the buffer where it has one
//! ([`crate::nic::RxQueue::stamps_arrival`]: the hosted build's AF_XDP queues, stamped by
//! the XDP program with `CLOCK_MONOTONIC` and converted to the worker's ticks through a
//! [`crate::time::ClockMap`]; its `TPACKET_V3` queues, from the ring's own timestamp), and
//! otherwise the reading of the poll that took the frame off the receive ring (the worker
//! stamps the buffer, [`crate::buf::Pool::set_stamp`]). From arrival the span includes the
//! wait in the receive ring (Metronome's vacation, the largest queueing delay); from the
//! ring exit (the image's NICs, and a frame a stamping queue could not stamp) it excludes
//! it. Both include the chain's processing and any wait in the worker's batches, and exclude
//! the wire side. A driver stamp later than the poll's reading (two clocks that disagree)
//! is replaced by the poll's. Dropped frames are counted by reason, not timed. Frames the
//! dataplane makes itself (IPFIX) carry no stamp and are not timed.
//!
//! Recording is one subtraction, one `leading_zeros` and two increments into a fixed
//! [`LogHistogram`] (4 KiB, no allocation), plus one compare against the SLO, per *run* of
//! frames with the same stamp in a TX batch ([`Latency::record_n`]): frames received in one
//! poll and sent in one poll have the same sojourn time, so a batch usually costs one update,
//! and each frame only the load and compare of its stamp.
//!
//! The firmware publishes each worker's [`Latency`] every 64 rounds and merges the workers'
//! for `lat_p50_ns` / `lat_p99_ns` / `lat_p999_ns` / `over_slo` (the QEMU test `forward_10k`
//! checks every frame is timed and that the quantiles stay within the host's).

use core::fmt;

use crate::hist::LogHistogram;
use crate::time::{Duration, TickRate};

/// One worker's (or, merged, every worker's) sojourn times.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Latency {
    hist: LogHistogram,
    /// The SLO in ticks (0: none).
    slo: u64,
    over: u64,
    /// Frames a stamping receive queue handed out without a usable arrival stamp
    /// ([`Latency::count_from_poll`]).
    from_poll: u64,
}

impl fmt::Debug for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Latency").field("hist", &self.hist).field("over_slo", &self.over).finish()
    }
}

impl Latency {
    /// Empty, with the SLO `slo` (zero: no SLO, nothing counts as over).
    pub const fn new(slo: Duration) -> Self {
        Self { hist: LogHistogram::new(), slo: slo.ticks(), over: 0, from_poll: 0 }
    }

    /// Records one frame that spent `ticks` in the dataplane.
    #[inline]
    pub fn record(&mut self, ticks: u64) {
        self.record_n(ticks, 1);
    }

    /// Records `n` frames of the same sojourn time `ticks` (a worker times every frame of a
    /// batch received in one poll and sent in one poll alike: one histogram update for the run).
    #[inline]
    pub fn record_n(&mut self, ticks: u64, n: u64) {
        self.hist.record_n(ticks, n);
        if self.slo != 0 && ticks > self.slo {
            self.over = self.over.saturating_add(n);
        }
    }

    /// Counts `n` frames that a receive queue which stamps arrivals
    /// ([`crate::nic::RxQueue::stamps_arrival`]) handed out without a usable stamp (none, or
    /// one later than the poll): they are timed from the poll that took them instead.
    #[inline]
    pub fn count_from_poll(&mut self, n: u64) {
        self.from_poll = self.from_poll.saturating_add(n);
    }

    /// Frames counted by [`Latency::count_from_poll`].
    pub fn from_poll(&self) -> u64 {
        self.from_poll
    }

    /// Writes ` lat_from_poll=…` ([`Latency::from_poll`]; 0 where no queue stamps arrivals).
    pub fn write_from_poll(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        write!(w, " lat_from_poll={}", self.from_poll)
    }

    /// Adds `other`'s frames (summing workers).
    pub fn merge(&mut self, other: &Latency) {
        self.hist.merge(&other.hist);
        self.over = self.over.saturating_add(other.over);
        self.from_poll = self.from_poll.saturating_add(other.from_poll);
        self.slo = self.slo.max(other.slo);
    }

    /// Frames recorded.
    pub fn count(&self) -> u64 {
        self.hist.count()
    }

    /// Frames over the SLO.
    pub fn over_slo(&self) -> u64 {
        self.over
    }

    /// The histogram of sojourn times, in ticks.
    pub fn histogram(&self) -> &LogHistogram {
        &self.hist
    }

    /// Writes ` {prefix}lat_count=… {prefix}lat_p50_ns=… {prefix}lat_p99_ns=…
    /// {prefix}lat_p999_ns=… {prefix}over_slo=…` (the quantiles 0 when nothing was recorded).
    pub fn write(&self, w: &mut dyn fmt::Write, prefix: &str, rate: TickRate) -> fmt::Result {
        let ns = |q: f64| self.hist.quantile(q).map_or(0, |t| rate.ns(Duration(t)));
        write!(
            w,
            " {prefix}lat_count={} {prefix}lat_p50_ns={} {prefix}lat_p99_ns={} {prefix}lat_p999_ns={} {prefix}over_slo={}",
            self.count(),
            ns(0.5),
            ns(0.99),
            ns(0.999),
            self.over
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::String;

    #[test]
    fn records_quantiles_and_the_slo() {
        let mut a = Latency::new(Duration(1000));
        for t in [10, 20, 30, 2000] {
            a.record(t);
        }
        let mut b = Latency::new(Duration(1000));
        b.record(5000);
        a.merge(&b);
        assert_eq!((a.count(), a.over_slo()), (5, 2));
        let mut s = String::new();
        a.write(&mut s, "core0_", TickRate::try_new(1_000_000_000).expect("rate")).expect("write");
        // 30 lies in the bucket [30, 32): quantiles come back as the middle of their bucket.
        assert!(s.starts_with(" core0_lat_count=5 core0_lat_p50_ns=31 "), "{s}");
        assert!(s.ends_with(" core0_over_slo=2"), "{s}");
        // No SLO: nothing is over it.
        let mut c = Latency::new(Duration::ZERO);
        c.record(u64::MAX);
        assert_eq!(c.over_slo(), 0);
        let mut e = String::new();
        Latency::default().write(&mut e, "", TickRate::try_new(1_000_000_000).expect("rate")).expect("write");
        assert_eq!(e, " lat_count=0 lat_p50_ns=0 lat_p99_ns=0 lat_p999_ns=0 over_slo=0");
        // Frames a stamping queue could not stamp add up across workers.
        let mut d = Latency::default();
        d.count_from_poll(2);
        let mut f = Latency::default();
        f.count_from_poll(3);
        d.merge(&f);
        let mut t = String::new();
        d.write_from_poll(&mut t).expect("write");
        assert_eq!((d.from_poll(), t.as_str()), (5, " lat_from_poll=5"));
    }
}
