//! Counting what comes back, exactly: one bit per sequence number sent (so a frame seen
//! twice is a duplicate, one never seen is lost), the highest sequence number seen per
//! flow (a lower one arriving later is reordered), and the latency of every frame.

use super::frames::Tag;

/// Latency percentiles of a trial, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Latency {
    /// Frames measured.
    pub samples: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

/// What came back, counted.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    /// The trial whose frames are counted.
    trial: u8,
    flows: usize,
    /// One bit per sequence number.
    seen: Vec<u64>,
    /// Highest sequence number + 1 seen per flow (0: none yet).
    high: Vec<u32>,
    /// Tagged frames received (duplicates included).
    pub received: u64,
    /// Distinct sequence numbers received.
    pub unique: u64,
    /// Frames whose sequence number had already been received.
    pub duplicated: u64,
    /// Frames that arrived after a later frame of their flow.
    pub reordered: u64,
    /// Frames without our tag, or naming a flow that does not exist.
    pub foreign: u64,
    /// Tagged frames of an earlier trial (late or duplicated after that trial ended).
    pub stale: u64,
    /// Latency of every tagged frame, ns (saturated at `u32::MAX`).
    lat_ns: Vec<u32>,
    /// (send TSC, kernel receive time in ns since the epoch) of every new frame counted
    /// with [`Tally::frame_stamped`], converted by [`Tally::resolve_stamps`].
    stamps: Vec<(u64, u64)>,
}

impl Tally {
    /// A tally of trial `trial` for `flows` flows expecting about `expect` frames.
    pub fn new(trial: u8, flows: u16, expect: usize) -> Tally {
        Tally {
            trial,
            flows: usize::from(flows.max(1)),
            seen: vec![0; expect.div_ceil(64) + 1],
            high: vec![0; usize::from(flows.max(1))],
            lat_ns: Vec::with_capacity(expect.min(64 << 20)),
            ..Tally::default()
        }
    }

    /// Counts one received frame: `latency_ns` is how long since its tag's timestamp.
    #[inline]
    pub fn frame(&mut self, frame: &[u8], now_ns: impl FnOnce(&Tag) -> u64) {
        let Some(tag) = Tag::read(frame) else {
            self.foreign += 1;
            return;
        };
        self.tag(&tag, now_ns(&tag));
    }

    /// Counts one frame that the kernel put in the sink's ring at `kernel_ns` (realtime);
    /// its latency is known once [`Tally::resolve_stamps`] maps send TSCs to realtime.
    #[inline]
    pub fn frame_stamped(&mut self, frame: &[u8], kernel_ns: u64) {
        let Some(tag) = Tag::read(frame) else {
            self.foreign += 1;
            return;
        };
        if self.accept(&tag) {
            self.stamps.push((tag.tsc, kernel_ns));
        }
    }

    /// Turns the stamped frames' (send TSC, receive realtime) into latencies with
    /// `send_ns`, which maps a TSC to realtime ns.
    pub fn resolve_stamps(&mut self, send_ns: impl Fn(u64) -> u64) {
        for &(tsc, rx) in &self.stamps {
            self.lat_ns.push(rx.saturating_sub(send_ns(tsc)).min(u64::from(u32::MAX)) as u32);
        }
        self.stamps.clear();
    }

    /// Counts one tag that arrived `latency_ns` after it was sent.
    #[inline]
    pub fn tag(&mut self, tag: &Tag, latency_ns: u64) {
        if self.accept(tag) {
            self.lat_ns.push(latency_ns.min(u64::from(u32::MAX)) as u32);
        }
    }

    /// Counts `tag`; whether it is a new frame of this trial.
    #[inline]
    fn accept(&mut self, tag: &Tag) -> bool {
        if tag.trial != self.trial {
            self.stale += 1;
            return false;
        }
        let flow = usize::from(tag.flow);
        if flow >= self.flows || tag.seq as usize % self.flows != flow {
            self.foreign += 1;
            return false;
        }
        self.received += 1;
        let (word, bit) = (tag.seq as usize / 64, tag.seq % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicated += 1;
            return false;
        }
        self.seen[word] |= 1 << bit;
        self.unique += 1;
        let next = tag.seq.saturating_add(1);
        if next < self.high[flow] {
            self.reordered += 1;
        } else {
            self.high[flow] = next;
        }
        true
    }

    /// Frames of the `sent` sent (sequence numbers `0..sent`) that never came back.
    pub fn lost(&self, sent: u64) -> u64 {
        let (full, rest) = ((sent / 64) as usize, sent % 64);
        let mut back: u64 = self.seen.iter().take(full).map(|w| u64::from(w.count_ones())).sum();
        if rest > 0 {
            back += u64::from((self.seen.get(full).copied().unwrap_or(0) & ((1u64 << rest) - 1)).count_ones());
        }
        sent - back
    }

    /// Whether every one of `sent` frames came back exactly once (and nothing else did).
    pub fn zero_loss(&self, sent: u64) -> bool {
        self.lost(sent) == 0 && self.unique == sent && self.duplicated == 0
    }

    /// Latency percentiles (nearest rank); sorts the samples.
    pub fn latency(&mut self) -> Latency {
        if self.lat_ns.is_empty() {
            return Latency::default();
        }
        self.lat_ns.sort_unstable();
        let n = self.lat_ns.len();
        let at = |q: f64| u64::from(self.lat_ns[((q * n as f64).ceil() as usize).clamp(1, n) - 1]);
        Latency {
            samples: n as u64,
            p50_ns: at(0.50),
            p99_ns: at(0.99),
            p999_ns: at(0.999),
            max_ns: u64::from(self.lat_ns[n - 1]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(flow: u16, seq: u32) -> Tag {
        Tag { trial: 1, flow, seq, tsc: 0 }
    }

    #[test]
    fn loss_duplicates_and_reordering_are_counted_exactly() {
        let mut t = Tally::new(1, 4, 8);
        // 0..12 sent round robin over 4 flows: 5 is lost, 2 comes twice, 1 (flow 1) comes
        // after 9 (flow 1): reordered; 70 lies beyond the first guess (the bitmap grows).
        for seq in [0u32, 2, 3, 4, 6, 7, 9, 1, 2, 8, 10, 11, 70] {
            t.tag(&tag((seq % 4) as u16, seq), u64::from(seq) * 10);
        }
        assert_eq!((t.received, t.unique, t.duplicated, t.reordered, t.foreign), (13, 12, 1, 1, 0));
        assert_eq!(t.lost(12), 1, "frame 5");
        assert_eq!(t.lost(64), 64 - 11);
        assert_eq!(t.lost(71), 71 - 12);
        assert!(!t.zero_loss(12));
    }

    #[test]
    fn zero_loss_needs_every_frame_once() {
        let mut t = Tally::new(1, 2, 100);
        for seq in 0..100u32 {
            t.tag(&tag((seq % 2) as u16, seq), 1);
        }
        assert!(t.zero_loss(100));
        assert_eq!((t.lost(100), t.lost(101)), (0, 1));
        assert!(!t.zero_loss(101));
    }

    #[test]
    fn foreign_frames_are_not_ours() {
        let mut t = Tally::new(1, 2, 10);
        t.frame(&[0u8; 60], |_| 0);
        t.tag(&tag(5, 5), 0); // no flow 5
        t.tag(&tag(0, 1), 0); // seq 1 belongs to flow 1
        t.tag(&Tag { trial: 0, ..tag(0, 0) }, 0); // an earlier trial's
        assert_eq!((t.foreign, t.stale, t.received), (3, 1, 0));
        let mut f = [0u8; 60];
        tag(1, 3).write(&mut f);
        t.frame(&f, |tg| tg.tsc + 5);
        assert_eq!((t.received, t.unique), (1, 1));
    }

    #[test]
    fn stamped_frames_get_their_latency_once_the_clock_is_mapped() {
        let mut t = Tally::new(1, 1, 10);
        let mut f = [0u8; 60];
        for (seq, tsc, rx) in [(0u32, 1000u64, 5_000u64), (1, 2000, 6_500), (1, 2000, 9_999)] {
            Tag { trial: 1, flow: 0, seq, tsc }.write(&mut f);
            t.frame_stamped(&f, rx);
        }
        t.frame_stamped(&[0u8; 60], 1);
        assert_eq!((t.unique, t.duplicated, t.foreign), (2, 1, 1));
        assert_eq!(t.latency().samples, 0, "nothing resolved yet");
        // 1 tick = 1 ns, TSC 0 = 3000 ns since the epoch.
        t.resolve_stamps(|tsc| tsc + 3_000);
        let l = t.latency();
        assert_eq!((l.samples, l.p50_ns, l.max_ns), (2, 1_000, 1_500));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut t = Tally::new(1, 1, 1000);
        for seq in 0..1000u32 {
            t.tag(&tag(0, seq), u64::from(1000 - seq));
        }
        let l = t.latency();
        assert_eq!((l.samples, l.p50_ns, l.p99_ns, l.p999_ns, l.max_ns), (1000, 500, 990, 999, 1000));
        assert_eq!(Tally::new(1, 1, 0).latency(), Latency::default());
    }
}
