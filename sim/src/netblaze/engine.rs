//! The server in virtual time: cores with FIFO queues and per-packet service times from the
//! profile, per-flow order bookkeeping, and what a run measures (docs/NETBLAZE.md "Model").
//!
//! - **Cores.** Dedicated cores `0..dedicated` each own a NIC queue (RSS steers a flow's
//!   packets by the indirection table to one); auxiliary cores follow them. A core serves its
//!   queue in FIFO order: a packet starts at `max(core free, packet ready)` and takes its
//!   service time (Lindley's recursion, computed lazily up to the time asked for).
//! - **Service.** Whole chain: `packet_cycles`, plus `flow_cycles` for the first packet of a
//!   flow; a split whale's head and tail take their parts' costs; cycles → ns at the
//!   profile's TSC rate. A packet handed to another core is ready `handoff_ns` later.
//! - **Order.** A flow whose packets are still queued or in service somewhere keeps sending
//!   new packets there when the policy *follows* (NetBlaze's rule, Dyssect), else they go
//!   where the policy routes them, and a packet finishing before an earlier one of its flow is
//!   counted as a **reordering**.
//! - **Drops.** An arrival that finds its NIC queue holding `ring` packets is dropped.
//! - **Latency** = completion − arrival, into a histogram overall and per 1-second window
//!   (by arrival).

use std::collections::VecDeque;

use cadence_core::hist::LogHistogram;
use cadence_core::netblaze::Profile;

/// What a queued packet still needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// The whole chain.
    Whole,
    /// NFs `1..=k` here, then the tail on `booster`.
    Head {
        /// Split point.
        k: u8,
        /// The core running the tail.
        booster: u16,
    },
    /// NFs `k+1..`.
    Tail {
        /// Split point.
        k: u8,
    },
}

/// A packet in a queue.
#[derive(Debug, Clone, Copy)]
pub struct QPkt {
    /// Arrival at the NIC (ns).
    pub arrival: u64,
    /// Earliest start on this core (ns).
    pub ready: u64,
    /// Flow.
    pub flow: u32,
    /// Per-flow sequence number.
    pub seq: u32,
    /// What it needs.
    pub stage: Stage,
}

/// One core.
#[derive(Debug, Default)]
pub struct Core {
    /// Its queue (NIC queue for a dedicated core, hand-off ring for an auxiliary one).
    pub queue: VecDeque<QPkt>,
    /// Busy until (ns).
    pub clock: u64,
    /// Busy time (ns).
    pub busy_ns: u64,
    /// Busy time in the current epoch (ns, reset by the policy).
    pub epoch_busy_ns: u64,
    /// The flow of the packet it started last, and when that packet finishes.
    pub last: Option<(u32, u64)>,
    /// Largest latency of a packet it completed since the policy last reset it (ns).
    pub max_lat: u64,
}

/// Per-flow state.
#[derive(Debug, Clone, Copy, Default)]
pub struct FlowState {
    /// The core its packets are queued on (while `outstanding > 0`).
    pub loc: u16,
    /// Split whale: (k, booster) while its packets follow the split.
    pub split: Option<(u8, u16)>,
    /// Packets queued or in service.
    pub outstanding: u32,
    /// Finish time of its latest started packet.
    pub last_finish: u64,
    /// Next sequence number.
    pub next_seq: u32,
    /// Highest sequence number completed so far, plus one (0: none).
    pub done_seq: u32,
    /// Finish time of that packet.
    pub done_finish: u64,
    /// Latest finish time of any completed packet.
    pub max_finish: u64,
    /// Its first packet has been served (its state exists).
    pub seen: bool,
    /// Scratch for the policies (epoch stamp).
    pub mark: u32,
    /// Scratch for the policies (index).
    pub idx: u32,
}

/// Service times in ns.
#[derive(Debug, Clone)]
pub struct Service {
    /// Whole chain per packet, per new flow.
    pub whole: (u64, u64),
    /// Per split point `k` (index `k`): head and tail per packet.
    pub split: Vec<(u64, u64)>,
}

impl Service {
    /// From a profile's measured cycles.
    pub fn from_profile(p: &Profile) -> Self {
        let ns = |c: u32| p.cycles_to_ns(u64::from(c)).round().max(1.0) as u64;
        let mut split = vec![(0, 0); p.splits.iter().map(|s| usize::from(s.k) + 1).max().unwrap_or(0)];
        for s in &p.splits {
            if let Some(x) = split.get_mut(usize::from(s.k)) {
                *x = (ns(s.head.service.packet_cycles), ns(s.tail.service.packet_cycles));
            }
        }
        Self { whole: (ns(p.full.service.packet_cycles), ns(p.full.service.flow_cycles)), split }
    }
}

/// Counters of a run.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Packets that arrived.
    pub arrived: u64,
    /// Packets dropped at a full NIC queue.
    pub dropped: u64,
    /// Packets completed.
    pub completed: u64,
    /// Reorderings seen at egress.
    pub reorderings: u64,
    /// Flows (or buckets) moved between cores.
    pub migrations: u64,
    /// NetBlaze: SLO-risk events.
    pub slo_risk: u64,
    /// NetBlaze: whales split.
    pub splits: u64,
    /// NetBlaze: epochs in boost mode.
    pub boost_epochs: u64,
    /// NetBlaze: auxiliary cores recruited.
    pub recruits: u64,
}

/// The server.
#[derive(Debug)]
pub struct Engine {
    /// Dedicated cores, then auxiliary cores.
    pub cores: Vec<Core>,
    /// How many of `cores` are dedicated-capable (queues).
    pub dedicated: usize,
    /// Per flow.
    pub flows: Vec<FlowState>,
    /// Service times.
    pub service: Service,
    /// Hand-off delay to another core (ns).
    pub handoff_ns: u64,
    /// NIC queue depth.
    pub ring: usize,
    /// Latency, all packets (ns).
    pub latency: LogHistogram,
    /// Latency per 1-second window of arrival.
    pub windows: Vec<LogHistogram>,
    /// Counters.
    pub counters: Counters,
}

impl Engine {
    /// A server with `dedicated` queues/cores and `aux` auxiliary cores.
    pub fn new(service: Service, dedicated: usize, aux: usize, seconds: usize) -> Self {
        Self {
            cores: (0..dedicated + aux).map(|_| Core::default()).collect(),
            dedicated,
            flows: Vec::new(),
            service,
            handoff_ns: 1_000,
            ring: 4096,
            latency: LogHistogram::new(),
            windows: vec![LogHistogram::new(); seconds.max(1)],
            counters: Counters::default(),
        }
    }

    /// Makes room for flows up to `n`.
    pub fn grow_flows(&mut self, n: usize) {
        if self.flows.len() < n {
            self.flows.resize(n, FlowState::default());
        }
    }

    fn cost(&self, p: &QPkt, new_flow: bool) -> u64 {
        match p.stage {
            Stage::Whole => self.service.whole.0 + if new_flow { self.service.whole.1 } else { 0 },
            Stage::Head { k, .. } => self.service.split.get(usize::from(k)).map_or(self.service.whole.0, |s| s.0),
            Stage::Tail { k } => self.service.split.get(usize::from(k)).map_or(self.service.whole.0, |s| s.1),
        }
    }

    /// Serves core `c`'s queue: every packet that starts before `t`.
    pub fn run_until(&mut self, c: usize, t: u64) {
        loop {
            let Some(core) = self.cores.get(c) else { return };
            let Some(&p) = core.queue.front() else { return };
            let start = core.clock.max(p.ready);
            if start >= t {
                return;
            }
            let new_flow = !self.flows.get(p.flow as usize).is_some_and(|f| f.seen);
            let cost = self.cost(&p, new_flow);
            let finish = start + cost;
            let core = &mut self.cores[c];
            core.queue.pop_front();
            core.clock = finish;
            core.busy_ns += cost;
            core.epoch_busy_ns += cost;
            core.last = Some((p.flow, finish));
            let f = &mut self.flows[p.flow as usize];
            f.seen = true;
            f.last_finish = f.last_finish.max(finish);
            match p.stage {
                Stage::Head { k, booster } => {
                    let tail = QPkt { ready: finish + self.handoff_ns, stage: Stage::Tail { k }, ..p };
                    if let Some(b) = self.cores.get_mut(usize::from(booster)) {
                        b.queue.push_back(tail);
                    }
                }
                Stage::Whole | Stage::Tail { .. } => {
                    let core = &mut self.cores[c];
                    core.max_lat = core.max_lat.max(finish.saturating_sub(p.arrival));
                    self.complete(p, finish);
                }
            }
        }
    }

    fn complete(&mut self, p: QPkt, finish: u64) {
        let f = &mut self.flows[p.flow as usize];
        f.outstanding = f.outstanding.saturating_sub(1);
        // Reordered: a later packet finished before this one, or this one before an earlier.
        let reordered = if p.seq + 1 > f.done_seq {
            let r = finish < f.max_finish;
            f.done_seq = p.seq + 1;
            f.done_finish = finish;
            r
        } else {
            finish > f.done_finish
        };
        f.max_finish = f.max_finish.max(finish);
        if reordered {
            self.counters.reorderings += 1;
        }
        self.counters.completed += 1;
        let lat = finish.saturating_sub(p.arrival);
        self.latency.record(lat);
        let w = (p.arrival / 1_000_000_000) as usize;
        if let Some(h) = self.windows.get_mut(w) {
            h.record(lat);
        }
    }

    /// Every core up to `t`.
    pub fn run_all(&mut self, t: u64) {
        for c in 0..self.cores.len() {
            self.run_until(c, t);
        }
    }

    /// Enqueues an arrival of `flow` at `t`: where its packets are while it has some
    /// outstanding and `follow` holds, else on `route`. Returns `false` if dropped.
    pub fn arrive(&mut self, t: u64, flow: u32, route: usize, follow: bool) -> bool {
        self.counters.arrived += 1;
        let fi = flow as usize;
        let Some(&fs) = self.flows.get(fi) else { return false };
        let mut target = route;
        let mut stage = Stage::Whole;
        if fs.outstanding > 0 || fs.last_finish > t {
            self.run_until(usize::from(fs.loc), t);
            let fs = self.flows[fi];
            if follow && (fs.outstanding > 0 || fs.last_finish > t) {
                target = usize::from(fs.loc);
                if let Some((k, booster)) = fs.split {
                    stage = Stage::Head { k, booster };
                }
            }
        }
        if target != usize::from(fs.loc) || stage == Stage::Whole {
            self.flows[fi].split = None;
        }
        if target < self.dedicated && self.cores[target].queue.len() >= self.ring {
            self.counters.dropped += 1;
            return false;
        }
        let f = &mut self.flows[fi];
        let seq = f.next_seq;
        f.next_seq += 1;
        f.outstanding += 1;
        f.loc = target as u16;
        let ready = if target >= self.dedicated { t + self.handoff_ns } else { t };
        self.cores[target].queue.push_back(QPkt { arrival: t, ready, flow, seq, stage });
        true
    }

    /// Drains every queue (after the last arrival).
    pub fn drain(&mut self) {
        for _ in 0..4 {
            self.run_all(u64::MAX);
        }
    }
}
