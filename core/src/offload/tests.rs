//! NetBlaze on a lane: the dedicated side ([`NetBlazeStage`]) and an auxiliary core
//! ([`AuxWorker`]) on two threads over one lane's pool.

use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};

use spin::Mutex;

use crate::buf::{BUF_SIZE, Batch, PacketBuf, Pool};
use crate::drops::DropReason;
use crate::netblaze::tests::fixture;
use crate::netblaze::{CoreMapper, NetBlazeConfig};
use crate::nf::{Chain, Egress, Nf, NfBatch, NfCtx};
use crate::offload::{AuxWorker, LaneConfig, LaneState, NetBlazeStage, SharedLanes, build};
use crate::stage::{PORTS, Stage, StageCounters};
use crate::test_frames::udp4;
use crate::time::{Duration, Instant};
use crate::vlan::{TPID, Vlan, VlanMap};

const EPOCH: u64 = 1_000;

fn cfg(link_capacity: usize) -> LaneConfig {
    LaneConfig { epoch: Duration(EPOCH), link_capacity, tracked_flows: 128, follow_flows: 128 }
}

fn stage(lanes: &SharedLanes) -> NetBlazeStage {
    stage_of(lanes, chain())
}

fn stage_of(lanes: &SharedLanes, chain: Chain) -> NetBlazeStage {
    let params = NetBlazeConfig::default().validate().expect("params");
    NetBlazeStage::new(chain, lanes.clone(), CoreMapper::new(params), Arc::new(fixture()))
}

fn shared(states: Vec<LaneState>) -> SharedLanes {
    crate::offload::share(states)
}

/// NF `i` of the test chains: bumps payload byte `i` after the sequence number, so a frame
/// that left shows which NFs ran on it, and how often (here, on an auxiliary core, or split).
struct Mark(usize);

impl Nf for Mark {
    fn name(&self) -> &'static str {
        "mark"
    }

    fn process(&mut self, _ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        for p in batch.alive_mut() {
            if let Some(x) = pool.frame_mut(p.buf).get_mut(46 + self.0) {
                *x += 1;
            }
        }
    }
}

/// The three-NF chain of the fixture profile (`acl`, `lb`, `accounting` there), as marks.
fn chain() -> Chain {
    Chain::new(vec![Box::new(Mark(0)), Box::new(Mark(1)), Box::new(Mark(2))], Egress::default())
}

/// NF `i` of [`vlan_chain`]: writes into payload byte `i` after the sequence number the
/// interface each frame arrived on, bit 7 set if it arrived with VID 100 ([`crate::nf::Pkt::vlan`]).
struct SeenOn(usize);

impl Nf for SeenOn {
    fn name(&self) -> &'static str {
        "seen-on"
    }

    fn process(&mut self, _ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        for p in batch.alive_mut() {
            let v = p.ingress | if p.vlan() == 100 { 0x80 } else { 0 };
            if let Some(x) = pool.frame_mut(p.buf).get_mut(46 + self.0) {
                *x = v;
            }
        }
    }
}

/// Three [`SeenOn`] NFs, with VLAN 100 of port 0 the sub-interface [`PORTS`].
fn vlan_chain() -> Chain {
    let vlans = VlanMap::new(&[Vlan { iface: PORTS as u8, port: 0, vid: 100 }]).expect("a sub-interface");
    let egress = Egress { vlans, ..Egress::default() };
    Chain::new(vec![Box::new(SeenOn(0)), Box::new(SeenOn(1)), Box::new(SeenOn(2))], egress)
}

/// Flow `flow`'s packet `seq`: UDP from port 1000 + flow, the sequence number and three mark
/// bytes as payload.
fn load(pool: &mut Pool<'_>, flow: u16, seq: u32) -> PacketBuf {
    let mut payload = seq.to_be_bytes().to_vec();
    payload.extend([0, 0, 0]);
    let frame = udp4(1000 + flow, 80, &payload);
    let b = pool.alloc().expect("a buffer");
    pool.set_len(b, frame.len()).expect("len");
    pool.frame_mut(b).copy_from_slice(&frame);
    b
}

/// (flow, seq) of a frame `load` made (the chain rewrote only its MACs).
fn ident(pool: &Pool<'_>, b: PacketBuf) -> (u16, u32) {
    let f = pool.frame(b);
    let sp = u16::from_be_bytes([f[34], f[35]]) - 1000;
    let seq = u32::from_be_bytes([f[42], f[43], f[44], f[45]]);
    (sp, seq)
}

/// What left on port 1 ("transmitted": checked and freed) and what is left on port 0.
fn transmit(pool: &mut Pool<'_>, out: &mut [Batch; PORTS], seen: &mut BTreeMap<u16, Vec<u32>>) {
    transmit_marked(pool, out, seen, [1, 1, 1]);
}

/// [`transmit`], each frame's three NF bytes `marks`.
fn transmit_marked(pool: &mut Pool<'_>, out: &mut [Batch; PORTS], seen: &mut BTreeMap<u16, Vec<u32>>, marks: [u8; 3]) {
    assert!(out[0].is_empty(), "frames from port 0 leave on port 1");
    for &b in out[1].as_slice() {
        let (flow, seq) = ident(pool, b);
        assert_eq!(pool.frame(b).get(46..49), Some(&marks[..]), "flow {flow} frame {seq}: every NF once");
        seen.entry(flow).or_default().push(seq);
        pool.free(b).expect("a frame of the pool");
    }
    out[1].clear();
}

/// Reclaims and transmits until the auxiliary core has given back everything (bounded).
fn settle(
    dedicated: &mut NetBlazeStage,
    pool: &mut Pool<'_>,
    out: &mut [Batch; PORTS],
    counters: &mut StageCounters,
    seen: &mut BTreeMap<u16, Vec<u32>>,
    lane: &Mutex<LaneState>,
    now: Instant,
) {
    for _ in 0..10_000_000 {
        dedicated.idle(pool, out, counters, now);
        transmit(pool, out, seen);
        if lane.lock().all_reclaimed() {
            return;
        }
        std::thread::yield_now();
    }
    panic!("the auxiliary core never gave everything back");
}

/// A burst of 20 epochs (40 flows × 4 packets and a ~126-packet whale per epoch, outside the
/// fixture's frontier), then 20 quiet epochs (2 packets each). The dedicated side hands flows
/// to the auxiliary core on another thread, which runs the chain through a view of the pool
/// and gives them back; the lane transmits them. Every frame transmitted exactly once or
/// counted as a drop, each flow's in order, the auxiliary core recruited then released after
/// its idle epochs, the whale's split decided and kept here, the pool full at the end.
#[test]
#[allow(unsafe_code)] // `Pool::view` (core::buf::view); the SAFETY comment below keeps its contract
fn a_lane_hands_flows_to_an_aux_core_and_transmits_them_back_in_order() {
    const POOL: usize = 1024;
    let mut mem = vec![0u8; POOL * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, POOL).expect("pool");
    // SAFETY: `pool` outlives the view (the scope ends before it), and the test keeps the
    // hand-off discipline: the main thread touches a buffer before the stage hands it off and
    // after the stage reclaims it, the aux thread only between its `receive` and `give_back`.
    let view = unsafe { pool.view() };
    let (states, mut ends) = build(1, 1, cfg(256)).expect("links");
    let lanes = shared(states);
    let mut dedicated = stage(&lanes);
    let mut aux = AuxWorker::new(ends.remove(0), vec![view], chain());
    let done = AtomicBool::new(false);
    struct Done<'a>(&'a AtomicBool);
    impl Drop for Done<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    let mut seen: BTreeMap<u16, Vec<u32>> = BTreeMap::new();
    let mut sent = 0u64;
    let mut counters = StageCounters::default();
    let aux_stats = std::thread::scope(|s| {
        let aux_thread = s.spawn(|| {
            while !done.load(Ordering::Acquire) || aux.pending() > 0 {
                if aux.poll_once(Instant(0)) == 0 {
                    std::thread::yield_now();
                }
            }
            (*aux.stats(), *aux.counters(), aux.held())
        });
        let _done = Done(&done);
        let mut out = [const { Batch::new() }; crate::stage::PORTS];
        let mut seq: BTreeMap<u16, u32> = BTreeMap::new();
        dedicated.enter_lane(0);
        // Under Miri, fewer and shorter burst epochs (the whale still above the frontier's 100)
        // and just enough quiet ones for the release.
        let (burst, quiet) = crate::testing::miri_or((20, 20), (3, 12));
        let (rounds, whale) = crate::testing::miri_or((4, 30), (1, 110));
        for e in 0..burst + quiet {
            let now = Instant(e * EPOCH);
            let mut frames: Vec<u16> = Vec::new();
            if e < burst {
                for round in 0..rounds {
                    frames.extend(1..=40u16);
                    frames.extend(core::iter::repeat_n(0u16, whale + round));
                }
            } else {
                frames.extend([1u16, 2]);
            }
            for chunk in frames.chunks(32) {
                let mut input = Batch::new();
                for &flow in chunk {
                    let n = seq.entry(flow).or_insert(0);
                    input.push(load(&mut pool, flow, *n)).expect("room");
                    *n += 1;
                    sent += 1;
                }
                let _ = dedicated.process(0, &mut pool, &mut input, &mut out, &mut counters, now);
                assert!(input.is_empty());
                dedicated.idle(&mut pool, &mut out, &mut counters, now);
                transmit(&mut pool, &mut out, &mut seen);
            }
            // The aux core keeps up within the epoch (virtual time waits for the thread).
            settle(&mut dedicated, &mut pool, &mut out, &mut counters, &mut seen, &lanes[0], now);
        }
        drop(_done);
        aux_thread.join().expect("aux thread")
    });
    let (stats, aux_counters, held) = aux_stats;
    assert_eq!(held, 0);
    assert!(lanes[0].lock().all_reclaimed(), "every handed buffer came back");
    let nb = *dedicated.counters();
    let dropped = counters.drops_for(DropReason::HandoffFull) + aux_counters.drops_total();
    let transmitted: u64 = seen.values().map(|v| v.len() as u64).sum();
    assert_eq!(transmitted + dropped + counters.drops_total() - counters.drops_for(DropReason::HandoffFull), sent);
    for (flow, seqs) in &seen {
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {flow} reordered or duplicated: {seqs:?}");
    }
    assert!(nb.handed > 0 && stats.frames == nb.handed, "{nb:?} {stats:?}");
    assert_eq!(nb.returned + nb.returned_dropped, nb.handed);
    assert!(nb.recruited >= 1 && nb.released >= 1, "recruited then released: {nb:?}");
    assert!(nb.whales > 0 && nb.splits > 0 && nb.heads > 0, "the whale is split, its heads run here: {nb:?}");
    assert!(nb.outside > 0 && nb.outside < nb.epochs, "{nb:?}");
    assert_eq!(nb.lane_busy, 0);
    assert_eq!(pool.available(), POOL, "the pool is full at the end");
}

/// One lane with one auxiliary core, both driven by the test's thread in turn: the
/// single-threaded tests below.
struct Rig<'m> {
    // Declared before `pool`, so the view inside is dropped first.
    aux: AuxWorker<'m>,
    dedicated: NetBlazeStage,
    lanes: SharedLanes,
    pool: Pool<'m>,
    out: [Batch; PORTS],
    counters: StageCounters,
    /// What left, per flow; the next sequence number per flow.
    seen: BTreeMap<u16, Vec<u32>>,
    seq: BTreeMap<u16, u32>,
    /// The VLAN tag frames arrive with (0: none), and the NF bytes they must leave with.
    vid: u16,
    marks: [u8; 3],
}

impl<'m> Rig<'m> {
    /// `mem.len() / BUF_SIZE` buffers, a link of `link` slots.
    #[allow(unsafe_code)] // `Pool::view`
    fn new(mem: &'m mut [u8], link: usize) -> Self {
        Self::with_chain(mem, link, chain)
    }

    /// [`Rig::new`] running `make`'s chain on both sides.
    #[allow(unsafe_code)] // `Pool::view`
    fn with_chain(mem: &'m mut [u8], link: usize, make: fn() -> Chain) -> Self {
        let bufs = mem.len() / BUF_SIZE;
        let pool = Pool::try_new(mem, 0, bufs).expect("pool");
        // SAFETY: the view lives in the rig with the pool and is dropped before it; the rig
        // keeps the hand-off discipline: the stage touches a buffer before it hands it off
        // and after it reclaims it, the auxiliary loop only between its `receive` and
        // `give_back`, and the test's thread runs one of them at a time.
        let view = unsafe { pool.view() };
        let (states, mut ends) = build(1, 1, cfg(link)).expect("links");
        let lanes = shared(states);
        let mut dedicated = stage_of(&lanes, make());
        dedicated.enter_lane(0);
        let aux = AuxWorker::new(ends.remove(0), vec![view], make());
        let (out, counters) = ([const { Batch::new() }; PORTS], StageCounters::default());
        let (seen, seq) = (BTreeMap::new(), BTreeMap::new());
        Rig { aux, dedicated, lanes, pool, out, counters, seen, seq, vid: 0, marks: [1, 1, 1] }
    }

    /// A batch of the next frame of each flow in `flows`, in order, processed at epoch `e`
    /// (no poll end: nothing reclaimed or transmitted).
    fn process(&mut self, flows: &[u16], e: u64) {
        let mut input = Batch::new();
        for &flow in flows {
            let n = self.seq.entry(flow).or_insert(0);
            let b = load(&mut self.pool, flow, *n);
            if self.vid != 0 {
                let f = self.pool.frame(b).to_vec();
                let tagged = [&f[..12], &TPID.to_be_bytes()[..], &self.vid.to_be_bytes()[..], &f[12..]].concat();
                self.pool.set_len(b, tagged.len()).expect("len");
                self.pool.frame_mut(b).copy_from_slice(&tagged);
            }
            input.push(b).expect("room");
            *n += 1;
        }
        let now = Instant(e * EPOCH);
        let _ = self.dedicated.process(0, &mut self.pool, &mut input, &mut self.out, &mut self.counters, now);
        assert!(input.is_empty());
    }

    /// The end of a poll at epoch `e`: reclaim, hand over, transmit.
    fn idle(&mut self, e: u64) {
        self.dedicated.idle(&mut self.pool, &mut self.out, &mut self.counters, Instant(e * EPOCH));
        transmit_marked(&mut self.pool, &mut self.out, &mut self.seen, self.marks);
    }

    /// `flows` in batches of 32, each a whole poll, at epoch `e`.
    fn send(&mut self, flows: &[u16], e: u64) {
        for chunk in flows.chunks(32) {
            self.process(chunk, e);
            self.idle(e);
        }
    }

    /// Runs the auxiliary core and the lane's poll ends until everything came back.
    fn finish(&mut self, e: u64) {
        for _ in 0..64 {
            while self.aux.poll_once(Instant(0)) > 0 {}
            self.idle(e);
        }
        assert!(self.lanes[0].lock().all_reclaimed());
    }

    /// Frames transmitted, over every flow.
    fn transmitted(&self) -> u64 {
        self.seen.values().map(|v| v.len() as u64).sum()
    }

    /// Frames sent, over every flow.
    fn sent(&self) -> u64 {
        self.seq.values().map(|&n| u64::from(n)).sum()
    }

    /// Each flow's transmitted frames: every one once, in order (`gaps`: frames dropped and
    /// counted may be missing).
    fn assert_in_order(&self, gaps: bool) {
        for (flow, seqs) in &self.seen {
            if gaps {
                assert!(seqs.windows(2).all(|w| w[0] < w[1]), "flow {flow} reordered: {seqs:?}");
            } else {
                assert_eq!(
                    *seqs,
                    (0..seqs.len() as u32).collect::<Vec<_>>(),
                    "flow {flow}: every frame once, in order"
                );
            }
        }
    }
}

/// A hand-off rings the auxiliary core's doorbell: an armed bell (the core asleep on it) is
/// rung once — the wake hook runs, `nb_wakes` counts it — and the bell is disarmed; hand-offs
/// while nobody sleeps ring nothing. The core's bell and the lane's are one.
#[test]
fn a_hand_off_wakes_an_aux_core_asleep_on_its_doorbell() {
    use core::sync::atomic::{AtomicUsize, Ordering};
    static WOKEN: AtomicUsize = AtomicUsize::new(0);
    fn hook(_: crate::nic::WakeAddr) {
        WOKEN.fetch_add(1, Ordering::Relaxed);
    }
    let mut mem = vec![0u8; 512 * BUF_SIZE];
    let mut r = Rig::new(&mut mem, 64);
    let bell = r.lanes[0].lock().bell(0).expect("a bell per auxiliary core");
    r.aux = core::mem::replace(&mut r.aux, AuxWorker::new(Vec::new(), Vec::new(), chain())).with_bell(bell.clone());
    assert!(core::ptr::eq(r.aux.bell().expect("its bell"), &*bell));
    r.dedicated = core::mem::replace(&mut r.dedicated, NetBlazeStage::off(chain())).with_wake(hook);
    let flows: Vec<u16> = (1..=32).collect();
    // Burst epochs: flows go to the auxiliary core while it is awake (not armed).
    for e in 0..3 {
        for _ in 0..5 {
            r.send(&flows, e);
        }
    }
    let handed = r.dedicated.counters().handed;
    assert!(handed > 0, "the burst placed flows on the auxiliary core");
    assert_eq!((r.dedicated.counters().wakes, WOKEN.load(Ordering::Relaxed)), (0, 0), "nobody slept");
    // The core empties its ring and sleeps on its bell; the next hand-offs ring it once.
    r.finish(3);
    bell.arm();
    for _ in 0..5 {
        r.send(&flows, 3);
    }
    assert!(r.dedicated.counters().handed > handed, "more flows handed over");
    assert_eq!((r.dedicated.counters().wakes, WOKEN.load(Ordering::Relaxed)), (1, 1), "woken once");
    assert!(!bell.is_armed(), "the ring disarmed it");
    r.finish(4);
    // The core did not run during the sends: frames past its credit were dropped, counted.
    let refused = r.counters.drops_for(DropReason::HandoffFull);
    assert_eq!(r.transmitted() + refused, r.sent(), "every frame transmitted or counted");
    r.assert_in_order(true);
    assert_eq!(r.pool.available(), 512);
}

/// An auxiliary core that does not run: the link's credit (8) is all the lane lends it, and
/// the lane queues at most as many more plus a batch (40) for it. Flows placed there beyond
/// that stay here (`kept_full`); packets of a flow that follows it are dropped and counted
/// (`handoff_full`), never run here ahead of their flow, never lost. Once the core runs and
/// the lane reclaims, the queued frames follow, in order, and the pool is full.
#[test]
fn a_stalled_aux_core_holds_at_most_the_credit_and_following_packets_are_dropped_counted() {
    let mut mem = vec![0u8; 512 * BUF_SIZE];
    let mut r = Rig::new(&mut mem, 8);
    let flows: Vec<u16> = (1..=32).collect();
    for e in 0..4 {
        for _ in 0..5 {
            r.send(&flows, e);
        }
    }
    let nb = *r.dedicated.counters();
    assert_eq!(r.lanes[0].lock().outstanding(), 8, "the stalled core holds exactly the credit");
    assert_eq!((nb.handed, nb.queued_max), (48, 40), "8 handed over, 40 queued: {nb:?}");
    assert!(nb.kept_full > 0, "{nb:?}");
    let refused = r.counters.drops_for(DropReason::HandoffFull);
    assert!(refused > 0, "following packets beyond the credit are dropped, counted");
    // The core runs; the lane reclaims, hands the queued frames over, and transmits.
    r.finish(10);
    assert_eq!(r.transmitted() + refused, r.sent(), "every frame transmitted or counted");
    r.assert_in_order(true);
    assert_eq!(r.pool.available(), 512);
}

/// Per-flow order across a move back: flows moved to a (stalled) auxiliary core in a burst
/// epoch; the next decisions keep everything here (a quiet epoch); packets of a moved flow
/// that arrive while its earlier ones are still on the auxiliary core follow them there
/// instead of running here first. Once the core runs, each flow leaves in order.
#[test]
fn a_moved_flow_follows_its_packets_on_the_aux_core_after_the_decision_brings_it_back() {
    let mut mem = vec![0u8; 1024 * BUF_SIZE];
    let mut r = Rig::new(&mut mem, 512);
    let burst: Vec<u16> = (0..4).flat_map(|_| 1..=40u16).collect();
    r.send(&burst, 0); // counted
    r.send(&burst, 1); // placed on the aux core, which does not run
    let handed = r.dedicated.counters().handed;
    assert!(handed > 0, "{:?}", r.dedicated.counters());
    r.send(&[1, 2, 3], 2); // still placed (epoch 1's decision)
    r.send(&[1, 2, 3, 4, 5, 6, 7, 8], 3); // epoch 2 was quiet: nothing placed
    r.finish(4);
    r.assert_in_order(false);
    assert_eq!(r.transmitted(), r.sent());
    let nb = *r.dedicated.counters();
    assert!(nb.followed > 0 && nb.handed > handed, "packets of moved flows followed them: {nb:?}");
    assert_eq!(r.pool.available(), 1024);
}

/// Per-flow order through the lane's queue: a flow whose earlier frame is completed on the
/// auxiliary core while a later one still waits in the lane's queue (no credit) stays bound,
/// so its next frame queues behind instead of running here first.
#[test]
fn a_flow_with_a_frame_still_queued_stays_bound_though_its_handed_frames_are_completed() {
    let mut mem = vec![0u8; 512 * BUF_SIZE];
    let mut r = Rig::new(&mut mem, 4);
    // Epoch 0: a burst outside the frontier, counted; flows 1 and 2 come first.
    for _ in 0..5 {
        r.send(&(1..=32u16).collect::<Vec<_>>(), 0);
    }
    // Epoch 1: flows 1 and 2 are placed on the auxiliary core (credit 4). Flow 2 takes 3.
    r.process(&[2, 2, 2], 1);
    assert_eq!(r.lanes[0].lock().outstanding(), 3, "{:?}", r.dedicated.counters());
    // Flow 1's first frame takes the last credit; 5 of flow 2 and flow 1's second queue.
    r.process(&[1, 2, 2, 2, 2, 2, 1], 1);
    assert_eq!(r.lanes[0].lock().outstanding(), 4);
    assert_eq!(r.aux.poll_once(Instant(0)), 4); // all four done, flow 1's first among them
    // Reclaimed (flow 1's first frame completed); the credit takes 4 of flow 2's queued
    // frames: flow 2's last and flow 1's second still wait.
    r.idle(1);
    // Epoch 2 (epoch 1 was quiet: nothing placed): flow 1's third frame must queue behind its
    // second, not run here.
    r.send(&[1], 2);
    r.finish(2);
    r.assert_in_order(false);
    assert_eq!(r.seen.get(&1).map(Vec::len), Some(8));
    assert_eq!(r.pool.available(), 512);
}

/// The rings' occupancy joins the backlog: the poll that ends an epoch first asks the lane's
/// receive queues how many frames wait (`RxQueue::pending`), and the decision sees them as
/// one pinned flow — here 200 waiting frames of 2 flows put an epoch whose own arrivals (64
/// frames of 2 flows) sit inside the frontier outside it.
#[test]
fn frames_waiting_in_the_rings_at_an_epoch_end_count_in_the_backlog() {
    use crate::poll::{PollConfig, Poller};
    use crate::softnic::{SoftRxQueue, SoftTxQueue};
    use crate::time::{Clock, TickRate};
    use core::cell::Cell;

    struct Manual(Cell<u64>);
    impl Clock for Manual {
        fn now(&self) -> Instant {
            Instant(self.0.get())
        }
        fn rate(&self) -> TickRate {
            TickRate::try_new(1_000_000_000).expect("rate")
        }
    }
    let mut mem = vec![0u8; 1024 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 1024).expect("pool");
    let (states, _ends) = build(1, 1, cfg(256)).expect("links");
    let lanes = shared(states);
    let mut st = stage(&lanes);
    st.enter_lane(0);
    let mut rx = [SoftRxQueue::new(&mut pool, 512), SoftRxQueue::new(&mut pool, 8)];
    let mut tx = [SoftTxQueue::new(512, true), SoftTxQueue::new(512, true)];
    let mut poller = Poller::new(st, PollConfig::default());
    let clock = Manual(Cell::new(0));
    let frame = |flow: u16| udp4(1000 + flow, 80, &[0, 0, 0, 0, 0, 0, 0]);
    // Epoch 0: 64 frames of 2 flows arrive and are forwarded (the deadline is set).
    for i in 0..64u16 {
        rx[0].inject(&mut pool, &frame(i % 2)).expect("room");
    }
    while poller.poll_once(&mut pool, &mut rx, &mut tx, &clock).rx > 0 {}
    // Epoch 1: nothing polled until the deadline has passed; 200 frames wait in the ring.
    for i in 0..200u16 {
        rx[0].inject(&mut pool, &frame(i % 2)).expect("room");
    }
    assert_eq!(crate::nic::RxQueue::pending(&rx[0]), Some(200));
    clock.0.set(EPOCH);
    let _ = poller.poll_once(&mut pool, &mut rx, &mut tx, &clock);
    let nb = *poller.stage().counters();
    assert_eq!((nb.epochs, nb.ring, nb.outside), (1, 200, 1), "{nb:?}");
    // Without the rings' frames the same epoch was inside (the check has teeth): 64 frames
    // of 2 flows, 96 a core finishes.
    let profile = fixture();
    assert!(profile.full.frontier.contains(crate::netblaze::Backlog::new(2, 64)));
}

/// A whale from a VLAN sub-interface, split: its head runs here, its tail on the auxiliary
/// core, and both see the frame as received on the sub-interface with its VID (the tag came
/// off at the head) — so do the whole flows placed on the auxiliary core, which take the tag
/// off there. Every frame leaves untagged on port 1 with each NF's byte 0x88 (interface 8,
/// VID 100), none lost.
#[test]
fn a_split_whale_from_a_sub_interface_keeps_its_interface_and_vid_on_the_aux_core() {
    let mut mem = vec![0u8; 1024 * BUF_SIZE];
    let mut r = Rig::with_chain(&mut mem, 512, vlan_chain);
    (r.vid, r.marks) = (100, [0x88; 3]);
    // Under Miri, fewer epochs and one round each (the whale still above the frontier).
    let (epochs, rounds, whale) = crate::testing::miri_or((6, 4, 30), (3, 1, 110));
    for e in 0..epochs {
        let mut frames: Vec<u16> = Vec::new();
        for round in 0..rounds {
            frames.extend(1..=40u16);
            frames.extend(core::iter::repeat_n(0u16, whale + round));
        }
        r.send(&frames, e);
        r.finish(e);
    }
    let nb = *r.dedicated.counters();
    assert!(nb.splits > 0 && nb.heads > 0, "the whale is split: {nb:?}");
    assert!(nb.handed > nb.heads, "whole flows were placed too: {nb:?}");
    r.assert_in_order(false);
    assert_eq!(r.transmitted(), r.sent());
    assert_eq!(r.pool.available(), 1024);
}
