//! The core mapper: unit cases on the fixture profile, and a proptest over a model of the
//! queues (one dedicated core, auxiliary cores, the follow rule) that every flow leaves in
//! order and every packet leaves once.

use std::collections::{BTreeMap, VecDeque};
use std::vec::Vec;

use proptest::prelude::*;

use super::fixture;
use crate::netblaze::core_mapper::{AuxCore, AuxState, CoreMapper, FlowBacklog, Placement};
use crate::netblaze::epoch::Backlog;
use crate::netblaze::follow::{Follow, FollowTable};
use crate::netblaze::{NetBlazeConfig, Params};

fn params() -> Params {
    NetBlazeConfig::default().validate().expect("config")
}

fn pool(n: usize) -> Vec<AuxCore> {
    vec![AuxCore::default(); n]
}

#[test]
fn inside_the_frontier_nothing_moves() {
    let m = CoreMapper::new(params());
    let mut flows = [FlowBacklog::new(30), FlowBacklog::new(30), FlowBacklog::new(30)];
    let mut aux = pool(2);
    let d = m.decide(&fixture(), &mut flows, &mut aux);
    assert!(d.inside && !d.boost);
    assert_eq!(d.kept, Backlog::new(3, 90));
    assert!(flows.iter().all(|f| f.place == Placement::Local));
    assert!(aux.iter().all(|a| a.state == AuxState::Free));
}

#[test]
fn first_fit_keeps_what_fits_and_recruits_for_the_rest() {
    let m = CoreMapper::new(params());
    // 4 flows × 40 = 160 packets: outside (4 flows → ≤ 98). Keep 40+40 = 80 (2 flows → 99);
    // the third would make 120 > 98. Flows 3 and 4 go to one recruited core (80 ≤ 99).
    let mut flows = [FlowBacklog::new(40), FlowBacklog::new(40), FlowBacklog::new(40), FlowBacklog::new(40)];
    let mut aux = pool(3);
    let d = m.decide(&fixture(), &mut flows, &mut aux);
    assert!(!d.inside && !d.boost);
    assert_eq!(
        flows.iter().map(|f| f.place).collect::<Vec<_>>(),
        [Placement::Local, Placement::Local, Placement::Aux(0), Placement::Aux(0)]
    );
    assert_eq!((d.kept, d.moved, d.recruited, d.slo_risk), (Backlog::new(2, 80), Backlog::new(2, 80), 1, 0));
    assert_eq!(aux[0].state, AuxState::Borrowed);
    assert_eq!(aux[0].backlog, Backlog::new(2, 80));
    // A second dedicated core's overflow reuses the borrowed core while it has room, then recruits.
    let mut flows = [FlowBacklog::new(90), FlowBacklog::new(15), FlowBacklog::new(60)];
    let d = m.decide(&fixture(), &mut flows, &mut aux);
    assert_eq!(
        flows.iter().map(|f| f.place).collect::<Vec<_>>(),
        [Placement::Local, Placement::Aux(0), Placement::Aux(1)]
    );
    assert_eq!(d.recruited, 1);
}

#[test]
fn pinned_flows_stay_and_no_room_is_an_slo_risk() {
    let m = CoreMapper::new(params());
    let mut flows =
        [FlowBacklog { packets: 90, pinned: true, busy: false, place: Placement::Aux(0) }, FlowBacklog::new(50)];
    let mut aux = pool(0);
    let d = m.decide(&fixture(), &mut flows, &mut aux);
    assert_eq!(flows[0].place, Placement::Local);
    assert_eq!(flows[1].place, Placement::Local);
    assert_eq!(d.slo_risk, 1);
    assert_eq!(d.kept, Backlog::new(2, 140));
}

#[test]
fn a_busy_whale_is_split_but_a_busy_minnow_never_moves() {
    let m = CoreMapper::new(params());
    // A packet of the whale is in service: it cannot move whole, but its queued packets can
    // run their head here after that packet and their tail on a booster.
    let busy = |packets| FlowBacklog { packets, pinned: false, busy: true, place: Placement::Local };
    let mut flows = [busy(150), FlowBacklog::new(10)];
    let d = m.decide(&fixture(), &mut flows, &mut pool(2));
    assert_eq!(flows[0].place, Placement::Split { k: 2, booster: 0 });
    assert_eq!((d.whales, d.splits), (1, 1));
    // A busy flow that is not a whale stays, even when the core is over its frontier.
    let mut flows = [busy(60), FlowBacklog::new(60), FlowBacklog::new(60)];
    let d = m.decide(&fixture(), &mut flows, &mut pool(2));
    assert_eq!(flows[0].place, Placement::Local);
    assert!(flows[1..].iter().any(|f| matches!(f.place, Placement::Aux(_))), "{flows:?}");
    assert!(d.kept.packets >= 60);
    // A pinned whale (still bound by an earlier split) is not split again.
    let mut flows = [FlowBacklog { packets: 150, pinned: true, busy: false, place: Placement::Local }];
    let d = m.decide(&fixture(), &mut flows, &mut pool(2));
    assert_eq!((flows[0].place, d.splits), (Placement::Local, 0));
}

#[test]
fn whales_are_split_with_the_predicted_k() {
    let m = CoreMapper::new(params());
    let mut flows = [FlowBacklog::new(10), FlowBacklog::new(150), FlowBacklog::new(10)];
    let mut aux = pool(2);
    let d = m.decide(&fixture(), &mut flows, &mut aux);
    assert!(!d.boost);
    assert_eq!(flows[1].place, Placement::Split { k: 2, booster: 0 });
    assert_eq!((d.whales, d.splits, d.slo_risk), (1, 1, 0));
    // The head takes 150/250 of the epoch; the two small flows (20 of 40 % of 99) fit beside it.
    assert_eq!((flows[0].place, flows[2].place), (Placement::Local, Placement::Local));
    assert!(aux[0].tail_q16 > 0);
    // Beside a head taking 240/250 of the epoch they do not: they go whole to the booster.
    let mut flows = [FlowBacklog::new(10), FlowBacklog::new(240), FlowBacklog::new(10)];
    let d = m.decide(&fixture(), &mut flows, &mut pool(2));
    assert!(d.boost);
    assert_eq!(flows[1].place, Placement::Split { k: 2, booster: 0 });
    assert_eq!((flows[0].place, flows[2].place), (Placement::Aux(0), Placement::Aux(0)));
    // A whale no split can finish in an epoch: best effort, counted.
    let mut flows = [FlowBacklog::new(400)];
    let d = m.decide(&fixture(), &mut flows, &mut pool(2));
    assert_eq!((d.whales, d.slo_risk), (1, 1));
    assert_eq!(flows[0].place, Placement::Split { k: 2, booster: 0 });
}

#[test]
fn boost_mode_keeps_no_whole_flow() {
    let m = CoreMapper::new(params());
    // 6 flows × 50 = 300 packets ≥ 2 × 95: boost. Each auxiliary core takes one flow (two
    // would be 100 > 99).
    let mut flows = [FlowBacklog::new(50); 6];
    let mut aux = pool(8);
    let d = m.decide(&fixture(), &mut flows, &mut aux);
    assert!(d.boost);
    assert_eq!(d.kept, Backlog::EMPTY);
    assert!(flows.iter().all(|f| matches!(f.place, Placement::Aux(_))));
    assert_eq!(d.recruited, 6);
}

#[test]
fn aux_cores_return_after_idle_epochs() {
    let p = params();
    let mut a = AuxCore { state: AuxState::Borrowed, ..AuxCore::default() };
    for i in 1..10 {
        assert!(!a.end_epoch(&p, false), "released after {i} idle epochs");
    }
    assert!(a.end_epoch(&p, false));
    assert_eq!(a.state, AuxState::Free);
    let mut b = AuxCore { state: AuxState::Borrowed, ..AuxCore::default() };
    for _ in 0..9 {
        b.end_epoch(&p, false);
    }
    assert!(!b.end_epoch(&p, true), "a busy epoch resets the count");
    assert_eq!(b.idle_epochs, 0);
}

// ---------------------------------------------------------------------------------------------
// The queue model.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Whole,
    /// Head done here, tail on this booster.
    Head(u16, u8),
}

#[derive(Debug, Clone, Copy)]
struct Pkt {
    flow: u64,
    seq: u32,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Op {
    Arrive(u64, u16),
    Start(usize),
    Complete(usize),
    Epoch,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..6, 1u16..60).prop_map(|(f, n)| Op::Arrive(f, n)),
        1 => (0u64..6).prop_map(|f| Op::Arrive(f, 180)),
        4 => (0usize..4).prop_map(Op::Start),
        6 => (0usize..4).prop_map(Op::Complete),
        2 => Just(Op::Epoch),
    ]
}

/// Core 0 is the dedicated core, 1..=3 are auxiliary cores 0..=2.
struct Model {
    queues: [VecDeque<Pkt>; 4],
    started: [Option<Pkt>; 4],
    enqueued: [u64; 3],
    completed: [u64; 3],
    busy: [bool; 3],
    aux: Vec<AuxCore>,
    follow: FollowTable,
    heads: BTreeMap<u64, u32>,
    next_seq: BTreeMap<u64, u32>,
    last_out: BTreeMap<u64, u32>,
    sent: u64,
    out: u64,
}

impl Model {
    fn new() -> Self {
        Self {
            queues: Default::default(),
            started: [None; 4],
            enqueued: [0; 3],
            completed: [0; 3],
            busy: [false; 3],
            aux: pool(3),
            follow: FollowTable::with_capacity(16),
            heads: BTreeMap::new(),
            next_seq: BTreeMap::new(),
            last_out: BTreeMap::new(),
            sent: 0,
            out: 0,
        }
    }

    fn push_aux(&mut self, a: u16, p: Pkt) -> u64 {
        let i = usize::from(a);
        self.queues[i + 1].push_back(p);
        self.enqueued[i] += 1;
        self.enqueued[i]
    }

    fn egress(&mut self, p: Pkt) -> Result<(), TestCaseError> {
        if let Some(&last) = self.last_out.get(&p.flow) {
            prop_assert!(p.seq > last, "flow {} left out of order: {} after {}", p.flow, p.seq, last);
        }
        self.last_out.insert(p.flow, p.seq);
        self.out += 1;
        Ok(())
    }

    fn arrive(&mut self, flow: u64) {
        let seq = self.next_seq.entry(flow).or_insert(0);
        let p = Pkt { flow, seq: *seq, kind: Kind::Whole };
        *seq += 1;
        self.sent += 1;
        let completed = self.completed;
        match self.follow.lookup(flow, |a| completed[usize::from(a)]) {
            Some(Follow { aux, split_k: 0 }) => {
                let until = self.push_aux(aux, p);
                self.follow.record(flow, Follow { aux, split_k: 0 }, until).expect("room");
            }
            Some(f) => {
                self.queues[0].push_back(Pkt { kind: Kind::Head(f.aux, f.split_k), ..p });
                *self.heads.entry(flow).or_insert(0) += 1;
                self.follow.record(flow, f, u64::MAX).expect("room");
            }
            None => self.queues[0].push_back(p),
        }
    }

    fn complete(&mut self, c: usize) -> Result<(), TestCaseError> {
        let Some(p) = self.started[c].take() else { return Ok(()) };
        if c > 0 {
            self.completed[c - 1] += 1;
            self.busy[c - 1] = true;
            return self.egress(p);
        }
        match p.kind {
            Kind::Whole => self.egress(p),
            Kind::Head(b, k) => {
                let pos = self.push_aux(b, Pkt { kind: Kind::Whole, ..p });
                let left = self.heads.get_mut(&p.flow).map(|h| {
                    *h -= 1;
                    *h
                });
                let until = if left == Some(0) { pos } else { u64::MAX };
                self.follow.record(p.flow, Follow { aux: b, split_k: k }, until).expect("room");
                Ok(())
            }
        }
    }

    fn epoch(&mut self, m: &CoreMapper) {
        let profile = fixture();
        for (i, a) in self.aux.iter_mut().enumerate() {
            let q = &self.queues[i + 1];
            let mut flows: Vec<u64> = q.iter().map(|p| p.flow).collect();
            flows.sort_unstable();
            flows.dedup();
            a.observe(Backlog::new(flows.len() as u32, q.len() as u32), 0);
        }
        // The backlog's flows in order of their first queued packet.
        let mut order: Vec<u64> = Vec::new();
        for p in &self.queues[0] {
            if !order.contains(&p.flow) {
                order.push(p.flow);
            }
        }
        let in_service = self.started[0].map(|p| p.flow);
        let completed = self.completed;
        let mut flows: Vec<FlowBacklog> = order
            .iter()
            .map(|&f| FlowBacklog {
                packets: self.queues[0].iter().filter(|p| p.flow == f).count() as u32,
                pinned: self.heads.get(&f).copied().unwrap_or(0) > 0
                    || self.follow.lookup(f, |a| completed[usize::from(a)]).is_some(),
                busy: in_service == Some(f),
                place: Placement::Local,
            })
            .collect();
        m.decide(&profile, &mut flows, &mut self.aux);
        for (&f, fb) in order.iter().zip(&flows) {
            match fb.place {
                Placement::Local => {}
                Placement::Aux(a) => {
                    let (moved, kept): (VecDeque<Pkt>, VecDeque<Pkt>) =
                        self.queues[0].drain(..).partition(|p| p.flow == f);
                    self.queues[0] = kept;
                    let mut until = 0;
                    for p in moved {
                        until = self.push_aux(a, p);
                    }
                    self.follow.record(f, Follow { aux: a, split_k: 0 }, until).expect("room");
                }
                Placement::Split { k, booster } => {
                    let mut n = 0;
                    for p in self.queues[0].iter_mut().filter(|p| p.flow == f) {
                        p.kind = Kind::Head(booster, k);
                        n += 1;
                    }
                    *self.heads.entry(f).or_insert(0) += n;
                    self.follow.record(f, Follow { aux: booster, split_k: k }, u64::MAX).expect("room");
                }
            }
        }
        let p = *m.params();
        for (i, a) in self.aux.iter_mut().enumerate() {
            let q = &self.queues[i + 1];
            a.observe(Backlog::new(u32::from(!q.is_empty()), q.len() as u32), 0);
            a.end_epoch(&p, self.busy[i]);
            self.busy[i] = false;
        }
    }
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]

    /// Whatever the arrivals, service interleavings and epoch decisions (moves, whale splits,
    /// boost), every flow's packets leave in order and every packet leaves exactly once.
    #[test]
    fn mapper_never_reorders_a_flow(ops in prop::collection::vec(op(), 1..160)) {
        let m = CoreMapper::new(params());
        let mut s = Model::new();
        for op in ops {
            match op {
                Op::Arrive(f, n) => (0..n).for_each(|_| s.arrive(f)),
                Op::Start(c) => {
                    if s.started[c].is_none() {
                        s.started[c] = s.queues[c].pop_front();
                    }
                }
                Op::Complete(c) => s.complete(c)?,
                Op::Epoch => s.epoch(&m),
            }
        }
        // Drain: every core until all queues are empty.
        for _ in 0..100_000 {
            let mut any = false;
            for c in 0..4 {
                if s.started[c].is_none() {
                    s.started[c] = s.queues[c].pop_front();
                }
                if s.started[c].is_some() {
                    any = true;
                    s.complete(c)?;
                }
            }
            if !any {
                break;
            }
        }
        prop_assert_eq!(s.out, s.sent, "every packet leaves exactly once");
    }
}

/// An auxiliary core of the cached first fit's range: free or borrowed, some whole-chain work,
/// some whale tails queued (more than an epoch's now and then).
pub(in crate::netblaze) fn aux_core() -> impl Strategy<Value = AuxCore> {
    (any::<bool>(), 0u32..30, 0u32..200, prop_oneof![Just(0u32), 0u32..70_000]).prop_map(
        |(borrowed, flows, packets, tail_q16)| AuxCore {
            state: if borrowed { AuxState::Borrowed } else { AuxState::Free },
            backlog: Backlog::new(flows, if flows == 0 { 0 } else { packets }),
            tail_q16,
            idle_epochs: 2,
            borrowed_epochs: 0,
        },
    )
}

/// A flow of a backlog: minnows mostly, a whale now and then, some pinned or busy.
fn flow() -> impl Strategy<Value = FlowBacklog> {
    (prop_oneof![8 => 0u32..60, 1 => 100u32..400], any::<bool>(), any::<bool>(), 0u8..4).prop_map(
        |(packets, pinned, busy, roll)| FlowBacklog {
            packets,
            pinned: pinned && roll == 0,
            busy: busy && roll == 1,
            place: Placement::Aux(7),
        },
    )
}

proptest! {
    #![proptest_config(crate::testing::proptest_config(256))]

    /// With up to 16 auxiliary cores `decide` keeps their room cached; with more it runs the
    /// plain first fit. Given the same cores plus ones that can take nothing (whale tails of
    /// more than an epoch queued, so not even an idle-core best effort picks them), both
    /// paths make the same decision, place every flow alike and leave the same cores.
    #[test]
    fn the_cached_and_the_plain_first_fit_decide_alike(
        aux in prop::collection::vec(aux_core(), 0..=16),
        flows in prop::collection::vec(flow(), 0..120),
    ) {
        let m = CoreMapper::new(params());
        let profile = fixture();
        let dead = AuxCore { tail_q16: u32::MAX, ..AuxCore::default() };
        let (mut cached, mut plain) = (aux.clone(), aux.clone());
        plain.resize(17, dead);
        let (mut fc, mut fp) = (flows.clone(), flows);
        let dc = m.decide(&profile, &mut fc, &mut cached);
        let dp = m.decide(&profile, &mut fp, &mut plain);
        prop_assert_eq!(dc, dp);
        prop_assert_eq!(fc, fp);
        prop_assert_eq!(&plain[..cached.len()], &cached[..]);
        prop_assert!(plain[cached.len()..].iter().all(|a| *a == dead), "nothing went to a core with no room");
    }
}
