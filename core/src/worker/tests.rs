use super::*;
use crate::buf::BUF_SIZE;
use crate::metronome::MetronomeConfig;
use crate::nf::{Chain, Egress};
use crate::softnic::{SoftRxQueue, SoftTxQueue};
use crate::test_frames::{control, ctl_on, udp4};
use crate::time::TickRate;
use core::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

const OWN: [[u8; 6]; 2] = [[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]];

/// Virtual time: `now` reads the counter and advances it a little (work takes time);
/// the sleeper jumps to the deadline.
#[derive(Debug)]
struct VirtualTime {
    t: Cell<u64>,
}

impl Clock for VirtualTime {
    fn now(&self) -> Instant {
        let t = self.t.get();
        self.t.set(t + 10);
        Instant(t)
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(1_000_000_000).unwrap()
    }
}

struct JumpSleeper<'a> {
    time: &'a VirtualTime,
    deadlines: Vec<Instant>,
}

impl Sleeper for JumpSleeper<'_> {
    fn sleep_until(&mut self, deadline: Instant) -> Instant {
        self.deadlines.push(deadline);
        if self.time.t.get() < deadline.0 {
            self.time.t.set(deadline.0);
        }
        Instant(self.time.t.get())
    }
}

type SoftLane<'m> = Lane<'m, SoftRxQueue, SoftTxQueue>;

fn lane(mem: &mut [u8], buffers: usize) -> SoftLane<'_> {
    let mut pool = Pool::try_new(mem, 0x100_0000, buffers).unwrap();
    let rx = [SoftRxQueue::new(&mut pool, 64), SoftRxQueue::new(&mut pool, 64)];
    Lane { rx: rx.into(), tx: [SoftTxQueue::new(64, true), SoftTxQueue::new(64, true)].into(), pool }
}

fn controller(workers: usize, lanes: usize) -> Metronome<Vec<LaneShare>> {
    let rate = TickRate::try_new(1_000_000_000).unwrap();
    Metronome::with_lanes(&MetronomeConfig::default(), rate, workers, lanes).unwrap()
}

/// Backing memory for `n` lanes of 256 buffers.
fn memories(n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|_| vec![0u8; 256 * BUF_SIZE]).collect()
}

/// One lane over each of `mems`, lane `k` bound to `ctl`'s lock `k`.
fn bound_lanes<'m>(ctl: &Metronome<Vec<LaneShare>>, mems: &'m mut [Vec<u8>]) -> Vec<Guarded<SoftLane<'m>>> {
    mems.iter_mut().enumerate().map(|(k, m)| Guarded::new(ctl.lanes()[k].lock(), lane(m, 256))).collect()
}

fn forwarder() -> Chain {
    Chain::new(Vec::new(), Egress::new(OWN, Egress::DEFAULT_PEERS, ctl_on(0)))
}

/// Takes lane `k`'s lock for the test itself (the "wire" side) and runs `f` on it.
fn with_lane<R>(
    ctl: &Metronome<Vec<LaneShare>>,
    lanes: &[Guarded<SoftLane<'_>>],
    k: usize,
    f: impl FnOnce(&mut SoftLane<'_>) -> R,
) -> R {
    let mut g = ctl.lanes()[k].lock().try_lock().expect("lane free");
    f(lanes[k].get_mut(&mut g).expect("bound"))
}

#[test]
fn a_won_round_drains_the_lane_forwards_and_sleeps_t_s() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let ctl = controller(1, 1);
    let lanes = [Guarded::new(ctl.lanes()[0].lock(), lane(&mut mem, 256))];
    for i in 0..40u16 {
        with_lane(&ctl, &lanes, 0, |l| l.rx[0].inject(&mut l.pool, &udp4(1000 + i, 53, &[i as u8; 20])).unwrap());
    }
    let time = VirtualTime { t: Cell::new(1_000) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let mut p = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default());

    let r = p.round(&ctl, &lanes, &time, &mut sleeper);
    assert!(r.won);
    assert_eq!(r.packets, 40, "the round drains past one batch of 32");
    assert_eq!(p.forwarding().ports[1].tx, 40);
    // One sleep, of the lane's new T_S, starting within the round.
    assert_eq!(sleeper.deadlines.len(), 1);
    let ts = ctl.lanes()[0].short_timeout().ticks();
    let started = sleeper.deadlines[0].0 - ts;
    assert!((1_000..r.now.0).contains(&started), "sleep of {ts} ticks started at {started}");
    let s = p.stats();
    assert_eq!((s.tries, s.wins, s.busy_tries, s.packets), (1, 1, 0, 40));
    assert!(s.halted_ticks > 0 && s.halted_ticks < s.elapsed_ticks);

    // Every buffer is back: the RX rings own theirs, nothing is in a batch or lost.
    with_lane(&ctl, &lanes, 0, |l| {
        let mut out = Vec::new();
        l.tx[1].transmit(&l.pool, usize::MAX, |f| out.push(f.to_vec()));
        assert_eq!(out.len(), 0, "auto-complete already sent them");
    });
}

#[test]
fn a_lost_round_sleeps_t_l_and_moves_to_a_random_lane() {
    let mut m0 = vec![0u8; 256 * BUF_SIZE];
    let mut m1 = vec![0u8; 256 * BUF_SIZE];
    let ctl = controller(3, 2);
    let lanes = [
        Guarded::new(ctl.lanes()[0].lock(), lane(&mut m0, 256)),
        Guarded::new(ctl.lanes()[1].lock(), lane(&mut m1, 256)),
    ];
    let time = VirtualTime { t: Cell::new(5_000) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let mut p = Worker::new(Mode::Metronome, 0, 7, forwarder(), PollConfig::default());

    let held = ctl.lanes()[0].lock().try_lock().unwrap();
    let r = p.round(&ctl, &lanes, &time, &mut sleeper);
    drop(held);
    assert!(!r.won);
    let t_l = ctl.params().long_timeout().ticks();
    assert!(sleeper.deadlines[0].0 >= 5_000 + t_l);
    assert_eq!(p.stats().busy_tries, 1);
    // Over many losses the backup's random choice visits both lanes.
    let mut seen = [false; 2];
    let guards: Vec<_> = ctl.lanes().iter().map(|q| q.lock().try_lock().unwrap()).collect();
    for _ in 0..64 {
        seen[p.round(&ctl, &lanes, &time, &mut sleeper).lane] = true;
    }
    drop(guards);
    assert_eq!(seen, [true, true]);
}

#[test]
fn poll_mode_never_sleeps_and_still_forwards() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let ctl = controller(1, 1);
    let lanes = [Guarded::new(ctl.lanes()[0].lock(), lane(&mut mem, 256))];
    let time = VirtualTime { t: Cell::new(0) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let mut p = Worker::new(Mode::Poll, 0, 1, forwarder(), PollConfig::default());
    for i in 0..10u16 {
        with_lane(&ctl, &lanes, 0, |l| l.rx[1].inject(&mut l.pool, &udp4(i, 9, b"x")).unwrap());
        p.round(&ctl, &lanes, &time, &mut sleeper);
    }
    assert!(sleeper.deadlines.is_empty());
    assert_eq!(p.forwarding().ports[0].tx, 10);
    let s = p.stats();
    assert_eq!(s.halted_ticks, 0);
    assert_eq!(s.awake_ticks(), s.elapsed_ticks);
}

#[test]
fn stop_ends_the_drain_and_is_reported() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let ctl = controller(1, 1);
    let lanes = [Guarded::new(ctl.lanes()[0].lock(), lane(&mut mem, 256))];
    with_lane(&ctl, &lanes, 0, |l| {
        l.rx[0].inject(&mut l.pool, &udp4(1, 2, b"a")).unwrap();
        l.rx[0].inject(&mut l.pool, &control(1)).unwrap();
    });
    let time = VirtualTime { t: Cell::new(0) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let mut p = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default());
    let r = p.round(&ctl, &lanes, &time, &mut sleeper);
    assert!(r.commands.stop);
    assert_eq!(p.forwarding().stage.ctl, 1);
}

/// A sleeper for real threads: yields for the (tiny, scaled) sleep.
struct YieldSleeper;

impl Sleeper for YieldSleeper {
    fn sleep_until(&mut self, deadline: Instant) -> Instant {
        while now_ns() < deadline.0 {
            std::thread::yield_now();
        }
        Instant(now_ns())
    }
}

fn now_ns() -> u64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant(now_ns())
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(1_000_000_000).unwrap()
    }
}

#[test]
fn three_workers_on_two_lanes_forward_every_frame_exactly_once() {
    // Under Miri (whose data-race detector checks `Guarded` here) 60 frames and small pools.
    const FRAMES: u64 = crate::testing::miri_or(3_000, 60);
    const BUFS: usize = crate::testing::miri_or(512, 64);
    let ctl = Arc::new(controller(3, 2));
    // Scoped threads: the lanes borrow their memory, which the test frees at the end (Miri
    // reports leaked memory).
    let (mut mem0, mut mem1) = (vec![0u8; BUFS * BUF_SIZE], vec![0u8; BUFS * BUF_SIZE]);
    let lanes: Arc<[Guarded<SoftLane<'_>>; 2]> = Arc::new([
        Guarded::new(ctl.lanes()[0].lock(), lane(&mut mem0, BUFS)),
        Guarded::new(ctl.lanes()[1].lock(), lane(&mut mem1, BUFS)),
    ]);
    let sent = Arc::new(AtomicU64::new(0));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));

    std::thread::scope(|s| {
        // The wire: injects frames into both lanes, taking each lane's lock like a worker would
        // (a real NIC needs no lock; the soft NIC does).
        let wire = {
            let (ctl, lanes, sent) = (Arc::clone(&ctl), Arc::clone(&lanes), Arc::clone(&sent));
            s.spawn(move || {
                let mut i = 0u64;
                while i < FRAMES {
                    let k = (i % 2) as usize;
                    if let Some(mut g) = ctl.lanes()[k].lock().try_lock() {
                        let l = lanes[k].get_mut(&mut g).unwrap();
                        if l.rx[0].inject(&mut l.pool, &udp4(i as u16, 7, &i.to_le_bytes())).is_ok() {
                            i += 1;
                            sent.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    std::thread::yield_now();
                }
            })
        };
        let workers: Vec<_> = (0..3)
            .map(|w| {
                let (ctl, lanes, done) = (Arc::clone(&ctl), Arc::clone(&lanes), Arc::clone(&done));
                s.spawn(move || {
                    let mut p = Worker::new(Mode::Metronome, w % 2, w as u64 + 1, forwarder(), PollConfig::default());
                    let mut sleeper = YieldSleeper;
                    while !done.load(Ordering::Relaxed) {
                        p.round(&*ctl, &lanes[..], &RealClock, &mut sleeper);
                    }
                    (*p.forwarding(), p.stats())
                })
            })
            .collect();
        wire.join().unwrap();
        // Let the workers drain what is left (bounded: a hang guard, not a timing assertion).
        let guard = std::time::Instant::now();
        while guard.elapsed() < std::time::Duration::from_secs(30) {
            // A worker may hold a lane right now: then it is not known to be empty yet.
            let empty = (0..2).all(|k| {
                ctl.lanes()[k]
                    .lock()
                    .try_lock()
                    .is_some_and(|mut g| lanes[k].get_mut(&mut g).is_some_and(|l| l.rx[0].pending() == 0))
            });
            if empty {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        done.store(true, Ordering::Relaxed);
        let results: Vec<(PollStats, WorkerStats)> = workers.into_iter().map(|h| h.join().unwrap()).collect();
        let mut total = PollStats::default();
        for (f, _) in &results {
            total.merge(f);
        }
        assert_eq!(sent.load(Ordering::Relaxed), FRAMES);
        assert_eq!(total.ports[0].rx, FRAMES, "every frame received once");
        assert_eq!(total.ports[1].tx, FRAMES, "every frame forwarded once");
        assert_eq!(total.drops_total(), 0);
        // Who won how often is the OS scheduler's business (three threads on however many
        // cores the machine has): the counters must add up, whoever won.
        let wins: u64 = results.iter().map(|(_, c)| c.wins).sum();
        let lane_wins: u64 = (0..2).map(|k| ctl.lanes()[k].snapshot().wins).sum();
        assert_eq!(wins, lane_wins, "every won round counted once per worker and once per lane");
        for (i, (_, c)) in results.iter().enumerate() {
            assert_eq!(c.tries, c.wins + c.busy_tries, "worker {i}: {c:?}");
            assert_eq!(c.sleeps, c.tries - c.cut_rounds, "worker {i}: a sleep after every uncut round: {c:?}");
        }
    });
}

#[test]
fn drain_lane_forwards_everything_pending_without_touching_the_estimators() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let ctl = controller(1, 1);
    let lanes = [Guarded::new(ctl.lanes()[0].lock(), lane(&mut mem, 256))];
    // 60 of a 64-descriptor ring: more than one batch, no descriptor shortage.
    for i in 0..60u16 {
        with_lane(&ctl, &lanes, 0, |l| l.rx[1].inject(&mut l.pool, &udp4(i, 9, b"d")).unwrap());
    }
    let time = VirtualTime { t: Cell::new(0) };
    let mut p = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default());
    let before = ctl.lanes()[0].snapshot();
    // A bound of one poll takes one batch and says the lane was not found empty.
    let d = with_lane(&ctl, &lanes, 0, |l| p.drain_lane(0, l, &time, 1));
    assert_eq!((d.packets, d.empty), (32, false));
    let d = with_lane(&ctl, &lanes, 0, |l| p.drain_lane(0, l, &time, 64));
    assert_eq!((d.packets, d.empty), (28, true));
    assert!(d.commands.is_empty());
    assert_eq!(p.forwarding().ports[0].tx, 60);
    assert_eq!(ctl.lanes()[0].snapshot(), before, "no round was counted");
    assert_eq!(p.stats().tries, 0);
}

#[test]
fn fewer_workers_than_lanes_visit_every_lane_of_their_share() {
    let mut mems = memories(5);
    let ctl = controller(2, 5);
    let lanes = bound_lanes(&ctl, &mut mems);
    let time = VirtualTime { t: Cell::new(0) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let mut w1 = Worker::new(Mode::Metronome, 1, 2, forwarder(), PollConfig::default()).partition(1, 2);
    let visited: Vec<usize> = (0..6).map(|_| w1.round(&ctl, &lanes, &time, &mut sleeper).lane).collect();
    assert_eq!(visited, [1, 3, 1, 3, 1, 3], "worker 1 of 2 owns lanes 1 and 3");
    let mut w0 = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default()).partition(0, 2);
    let visited: Vec<usize> = (0..6).map(|_| w0.round(&ctl, &lanes, &time, &mut sleeper).lane).collect();
    assert_eq!(visited, [0, 2, 4, 0, 2, 4]);
    // With as many workers as lanes, a primary keeps its lane (the paper's rule).
    let ctl2 = controller(2, 2);
    let mut m0 = vec![0u8; 256 * BUF_SIZE];
    let mut m1 = vec![0u8; 256 * BUF_SIZE];
    let lanes2 = [
        Guarded::new(ctl2.lanes()[0].lock(), lane(&mut m0, 256)),
        Guarded::new(ctl2.lanes()[1].lock(), lane(&mut m1, 256)),
    ];
    let mut p = Worker::new(Mode::Metronome, 1, 1, forwarder(), PollConfig::default()).partition(1, 2);
    assert!((0..4).all(|_| p.round(&ctl2, &lanes2, &time, &mut sleeper).lane == 1));
}

#[test]
fn a_repartition_hands_a_stalled_workers_lanes_to_the_live_ones() {
    let mut mems = memories(4);
    let ctl = controller(2, 4);
    let lanes = bound_lanes(&ctl, &mut mems);
    let time = VirtualTime { t: Cell::new(0) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let mut w0 = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default()).partition(0, 2);
    let visited: Vec<usize> = (0..4).map(|_| w0.round(&ctl, &lanes, &time, &mut sleeper).lane).collect();
    assert_eq!(visited, [0, 2, 0, 2], "worker 0 of 2 owns lanes 0 and 2");
    // Worker 1 stalled: worker 0 is the only live one and serves every lane.
    w0.repartition(0, 1);
    assert_eq!(w0.partition_of(), Some((0, 1)));
    let visited: Vec<usize> = (0..8).map(|_| w0.round(&ctl, &lanes, &time, &mut sleeper).lane).collect();
    assert_eq!(visited, [0, 1, 2, 3, 0, 1, 2, 3]);
    // Back to two when it recovers.
    w0.repartition(0, 2);
    let visited: Vec<usize> = (0..4).map(|_| w0.round(&ctl, &lanes, &time, &mut sleeper).lane).collect();
    assert_eq!(visited, [0, 2, 0, 2]);
}

#[test]
fn parked_lanes_are_visited_only_by_the_sweep_and_their_frames_still_go_out() {
    let mut mems = memories(3);
    let ctl = controller(1, 3);
    let lanes = bound_lanes(&ctl, &mut mems);
    let time = VirtualTime { t: Cell::new(0) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let mut w = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default()).partition(0, 1);
    // Frames that reached lane 2 just before it was parked.
    with_lane(&ctl, &lanes, 2, |l| {
        for i in 0..5u16 {
            l.rx[0].inject(&mut l.pool, &udp4(1000 + i, 53, b"late")).unwrap();
        }
    });
    w.set_parked(0b110);
    let visits: Vec<usize> =
        (0..3 * PARKED_SWEEP_ROUNDS).map(|_| w.round(&ctl, &lanes, &time, &mut sleeper).lane).collect();
    let on = |k: usize| visits.iter().filter(|&&l| l == k).count();
    assert!(on(1) + on(2) <= 4, "parked lanes only on sweeps: {} + {} of {}", on(1), on(2), visits.len());
    assert!(on(0) >= visits.len() - 4);
    let sent = with_lane(&ctl, &lanes, 2, |l| l.tx[1].tx_stats().packets);
    assert_eq!(sent, 5, "the sweep forwarded the parked lane's last frames");
    // Unparked again: the share is visited in turn.
    w.set_parked(0);
    let visited: Vec<usize> = (0..6).map(|_| w.round(&ctl, &lanes, &time, &mut sleeper).lane).collect();
    assert!([0, 1, 2].iter().all(|k| visited.contains(k)), "{visited:?}");
}

#[test]
fn a_worker_whose_lanes_are_all_parked_sleeps_t_l_and_one_whose_lane_is_parked_moves() {
    let mut mems = memories(4);
    let ctl = controller(2, 4);
    let lanes = bound_lanes(&ctl, &mut mems);
    let time = VirtualTime { t: Cell::new(0) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let t_l = ctl.params().long_timeout();
    // Worker 1 of 2 owns lanes 1 and 3, both parked: every round but the sweeps ends in T_L.
    let mut w1 = Worker::new(Mode::Metronome, 1, 2, forwarder(), PollConfig::default()).partition(1, 2);
    w1.set_parked(0b1010);
    let mut seen = Vec::new();
    for _ in 0..2 * PARKED_SWEEP_ROUNDS {
        let before = time.t.get();
        let r = w1.round(&ctl, &lanes, &time, &mut sleeper);
        assert!(r.now.saturating_since(Instant(before)) >= t_l, "slept T_L");
        seen.push(r.lane);
    }
    assert!(seen.iter().all(|&k| k == 1 || k == 3), "the sweeps stay in the share: {seen:?}");
    // With as many workers as lanes, a primary whose lane is parked takes the next lane.
    let ctl2 = controller(2, 2);
    let mut m0 = vec![0u8; 256 * BUF_SIZE];
    let mut m1 = vec![0u8; 256 * BUF_SIZE];
    let lanes2 = [
        Guarded::new(ctl2.lanes()[0].lock(), lane(&mut m0, 256)),
        Guarded::new(ctl2.lanes()[1].lock(), lane(&mut m1, 256)),
    ];
    let mut p = Worker::new(Mode::Metronome, 1, 1, forwarder(), PollConfig::default()).partition(1, 2);
    p.set_parked(0b10);
    let visited: Vec<usize> = (0..4).map(|_| p.round(&ctl2, &lanes2, &time, &mut sleeper).lane).collect();
    assert_eq!(visited, [1, 0, 0, 0], "off the parked lane after one round");
}

/// Records what each sleep was asked to watch.
struct WatchingSleeper<'a> {
    inner: JumpSleeper<'a>,
    watched: Vec<Option<crate::nic::WakeAddr>>,
}

impl Sleeper for WatchingSleeper<'_> {
    fn sleep_until(&mut self, deadline: Instant) -> Instant {
        self.inner.sleep_until(deadline)
    }

    fn sleep_until_watching(&mut self, deadline: Instant, watch: Option<crate::nic::WakeAddr>) -> Instant {
        self.watched.push(watch);
        self.inner.sleep_until(deadline)
    }
}

#[test]
fn a_primary_sleeps_watching_its_lanes_receive_queue_and_a_backup_does_not() {
    use crate::nic::WakeAddr;
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let ctl = controller(2, 1);
    let mut l = lane(&mut mem, 256);
    l.rx[0] =
        core::mem::replace(&mut l.rx[0], SoftRxQueue::new(&mut l.pool, 0)).with_wake_address(WakeAddr::new(0x1234));
    let lanes = [Guarded::new(ctl.lanes()[0].lock(), l)];
    let time = VirtualTime { t: Cell::new(0) };
    let mut sleeper =
        WatchingSleeper { inner: JumpSleeper { time: &time, deadlines: Vec::new() }, watched: Vec::new() };
    let mut p = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default());
    assert!(p.round(&ctl, &lanes, &time, &mut sleeper).won);
    let held = ctl.lanes()[0].lock().try_lock().unwrap();
    assert!(!p.round(&ctl, &lanes, &time, &mut sleeper).won);
    drop(held);
    assert_eq!(sleeper.watched, [Some(WakeAddr::new(0x1234)), None]);
}

/// Wakes on arrival on the queues in `can`; records each sleep's length and what it watched.
struct ArrivalSleeper<'a> {
    inner: JumpSleeper<'a>,
    can: Vec<crate::nic::WakeAddr>,
    slept: Vec<(u64, Vec<crate::nic::WakeAddr>)>,
}

impl Sleeper for ArrivalSleeper<'_> {
    fn sleep_until(&mut self, deadline: Instant) -> Instant {
        self.sleep_until_arrival(deadline, &[])
    }

    fn sleep_until_arrival(&mut self, deadline: Instant, watch: &[crate::nic::WakeAddr]) -> Instant {
        let now = self.inner.time.t.get();
        self.slept.push((deadline.0.saturating_sub(now), watch.to_vec()));
        self.inner.sleep_until(deadline)
    }

    fn wakes_on_arrival(&self, watch: &[crate::nic::WakeAddr]) -> bool {
        watch.iter().all(|a| self.can.contains(a))
    }
}

/// The idle policy: a primary whose lane received nothing for `after` sleeps the long
/// backstop — only when its sleeper wakes on arrival on every queue of the lane — and a frame
/// brings `T_S` back at once.
#[test]
fn an_idle_lane_watched_on_every_queue_sleeps_long_and_a_frame_ends_it() {
    use crate::nic::WakeAddr;
    use crate::worker::IdleSleep;
    let (a0, a1) = (WakeAddr::new(0x1000), WakeAddr::new(0x2000));
    const MS: u64 = 1_000_000; // ticks of 1 ns
    let idle = IdleSleep { after: Duration(MS), sleep: Duration(10 * MS) };
    let run = |can: Vec<WakeAddr>, idle: IdleSleep| {
        let mut mem = vec![0u8; 256 * BUF_SIZE];
        let ctl = controller(1, 1);
        let mut l = lane(&mut mem, 256);
        l.rx[0] = core::mem::replace(&mut l.rx[0], SoftRxQueue::new(&mut l.pool, 0)).with_wake_address(a0);
        l.rx[1] = core::mem::replace(&mut l.rx[1], SoftRxQueue::new(&mut l.pool, 0)).with_wake_address(a1);
        let lanes = [Guarded::new(ctl.lanes()[0].lock(), l)];
        let time = VirtualTime { t: Cell::new(1_000) };
        let mut sleeper =
            ArrivalSleeper { inner: JumpSleeper { time: &time, deadlines: Vec::new() }, can, slept: Vec::new() };
        let mut w = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default()).with_idle(idle);
        // 25 ms of nothing (1 ms of T_S sleeps, then the 10 ms ones), then one frame on port 1.
        while time.t.get() < 25 * MS {
            assert!(w.round(&ctl, &lanes, &time, &mut sleeper).won);
        }
        let before_frame = sleeper.slept.len();
        with_lane(&ctl, &lanes, 0, |l| l.rx[1].inject(&mut l.pool, &udp4(1, 2, b"x")).unwrap());
        let r = w.round(&ctl, &lanes, &time, &mut sleeper);
        assert_eq!(r.packets, 1);
        let after_frame = sleeper.slept.get(before_frame).cloned();
        (sleeper.slept, before_frame, after_frame, w.idle_sleeps())
    };
    // Both queues watched: T_S sleeps for the first millisecond, then the 10 ms backstop.
    let (slept, before, after, stretched) = run(vec![a0, a1], idle);
    assert!(slept.iter().all(|(_, w)| w == &[a0, a1]), "a primary watches every port's queue");
    // (The virtual clock moves 10 ns per read: a sleep's length reads a few ns short.)
    let long = |d: u64| (10 * MS - 1_000..=10 * MS).contains(&d);
    let first_long = slept.iter().position(|(d, _)| long(*d)).expect("an idle sleep");
    assert!(slept[..first_long].iter().all(|(d, _)| *d < MS), "T_S before the lane was idle for 1 ms");
    assert!(slept[..first_long].iter().map(|(d, _)| d).sum::<u64>() >= MS - 1_000);
    assert!(slept[first_long..before].iter().all(|(d, _)| long(*d)));
    assert_eq!(stretched, (before - first_long) as u64);
    let (d, _) = after.expect("a sleep after the frame");
    assert!(d < MS, "the frame ended the idle spell: T_S again, not {d}");
    // Port 1's queue not watched, or the policy off: the paper's rule throughout.
    for (can, idle) in [(vec![a0], idle), (vec![a0, a1], IdleSleep::OFF)] {
        let (slept, _, _, stretched) = run(can, idle);
        assert!(slept.iter().all(|(d, _)| *d < MS));
        assert_eq!(stretched, 0);
    }
}

/// A receive queue under a flood: before every burst, `per_burst` more frames arrive (until
/// `limit` have), so the ring never runs dry while the flood lasts.
struct FloodRx {
    inner: SoftRxQueue,
    per_burst: usize,
    limit: u64,
    injected: u64,
}

impl FloodRx {
    fn new(pool: &mut Pool<'_>, per_burst: usize, limit: u64) -> Self {
        Self { inner: SoftRxQueue::new(pool, 64), per_burst, limit, injected: 0 }
    }
}

impl crate::nic::RxQueue for FloodRx {
    fn rx_burst(&mut self, pool: &mut Pool<'_>, batch: &mut crate::buf::Batch) -> usize {
        for _ in 0..self.per_burst {
            if self.injected >= self.limit {
                break;
            }
            let i = self.injected;
            if self.inner.inject(pool, &udp4(4000 + (i % 8) as u16, 53, &i.to_le_bytes())).is_ok() {
                self.injected += 1;
            }
        }
        self.inner.rx_burst(pool, batch)
    }

    fn rx_stats(&self) -> crate::nic::RxStats {
        self.inner.rx_stats()
    }
}

type FloodLane<'m> = Lane<'m, FloodRx, SoftTxQueue>;

/// Frames a flood brings (under Miri, which interprets every step, fewer): without a round
/// budget, one round would forward all of them.
const FLOOD_FRAMES: u64 = crate::testing::miri_or(200_000, 1_000);

/// A lane whose port 0 is flooded with `per_burst` frames before every burst (up to
/// [`FLOOD_FRAMES`]).
fn flood_lane(mem: &mut [u8], per_burst: usize) -> FloodLane<'_> {
    let mut pool = Pool::try_new(mem, 0x100_0000, 256).unwrap();
    let rx = [FloodRx::new(&mut pool, per_burst, FLOOD_FRAMES), FloodRx::new(&mut pool, 0, 0)];
    Lane { rx: rx.into(), tx: [SoftTxQueue::new(64, true), SoftTxQueue::new(64, true)].into(), pool }
}

#[test]
fn a_flooded_lane_ends_the_round_on_its_poll_budget_and_the_worker_comes_back_without_sleeping() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let ctl = controller(1, 1);
    let lanes = [Guarded::new(ctl.lanes()[0].lock(), flood_lane(&mut mem, 32))];
    let time = VirtualTime { t: Cell::new(1_000) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    const POLLS: u64 = crate::testing::miri_or(8, 4);
    let budget = RoundBudget::new(POLLS as u32, Duration::ZERO);
    let mut p = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default()).with_budget(budget);
    for round in 1..=3u64 {
        let r = p.round(&ctl, &lanes, &time, &mut sleeper);
        assert!(r.won && r.cut, "round {round}: {r:?}");
        assert_eq!(r.packets, POLLS * 32, "round {round}: {POLLS} polls of a full batch, then the lane is let go");
        assert!(sleeper.deadlines.is_empty(), "a cut round is not followed by a sleep");
        let s = p.stats();
        assert_eq!((s.wins, s.cut_rounds, s.sleeps, s.packets), (round, round, 0, round * POLLS * 32), "{s:?}");
    }
    // Every frame of those rounds went out (none dropped to make the budget).
    assert_eq!(p.forwarding().ports[1].tx, 3 * POLLS * 32);
    assert_eq!(p.forwarding().drops_total(), 0);
    // The estimator saw a busy lane: ρ rose and the lock was released each time.
    assert!(ctl.lanes()[0].snapshot().rho > 0.0);
    assert!(ctl.lanes()[0].lock().try_lock().is_some(), "the lock is free between rounds");
}

#[test]
fn a_flooded_lane_ends_the_round_on_its_time_budget() {
    let mut mem = vec![0u8; 256 * BUF_SIZE];
    let ctl = controller(1, 1);
    let lanes = [Guarded::new(ctl.lanes()[0].lock(), flood_lane(&mut mem, 32))];
    let time = VirtualTime { t: Cell::new(1_000) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    // Virtual time moves 10 ticks per clock read: 200 ticks is a handful of polls, far fewer
    // than the 100 000 polls the poll bound would allow.
    let budget = RoundBudget::new(100_000, Duration(200));
    let mut p = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default()).with_budget(budget);
    let r = p.round(&ctl, &lanes, &time, &mut sleeper);
    assert!(r.won && r.cut, "{r:?}");
    assert!(r.packets >= 32 && r.packets < FLOOD_FRAMES, "the time bound ended the round: {} frames", r.packets);
    let polls = p.forwarding().polls;
    assert!(polls < 100, "{polls} polls in one round");
    assert!(sleeper.deadlines.is_empty());
    // Once the flood is over the round drains and sleeps as Metronome always did.
    let mut rounds = 1;
    while !p.round(&ctl, &lanes, &time, &mut sleeper).packets.eq(&0) && rounds < 10_000 {
        rounds += 1;
    }
    assert_eq!(p.forwarding().ports[1].tx, FLOOD_FRAMES, "every frame of the flood forwarded");
    assert!(!sleeper.deadlines.is_empty(), "the lane emptied: the worker slept");
    assert_eq!(p.stats().sleeps as usize, sleeper.deadlines.len());
}

#[test]
fn a_worker_with_a_flooded_lane_still_serves_the_other_lanes_of_its_share() {
    let (mut m0, mut m1) = (vec![0u8; 256 * BUF_SIZE], vec![0u8; 256 * BUF_SIZE]);
    let ctl = controller(1, 2);
    let lanes = [
        Guarded::new(ctl.lanes()[0].lock(), flood_lane(&mut m0, 32)),
        Guarded::new(ctl.lanes()[1].lock(), flood_lane(&mut m1, 0)),
    ];
    // Lane 1 holds ten frames that must not wait for lane 0's flood to end.
    with_lane_of(&ctl, &lanes, 1, |l| {
        for i in 0..10u16 {
            l.rx[0].inner.inject(&mut l.pool, &udp4(7000 + i, 53, b"other")).unwrap();
        }
    });
    let time = VirtualTime { t: Cell::new(0) };
    let mut sleeper = JumpSleeper { time: &time, deadlines: Vec::new() };
    let mut w = Worker::new(Mode::Metronome, 0, 1, forwarder(), PollConfig::default())
        .partition(0, 1)
        .with_budget(RoundBudget::new(4, Duration::ZERO));
    let rounds: Vec<Round> = (0..4).map(|_| w.round(&ctl, &lanes, &time, &mut sleeper)).collect();
    let lanes_visited: Vec<usize> = rounds.iter().map(|r| r.lane).collect();
    assert_eq!(lanes_visited, [0, 1, 0, 1], "{rounds:?}");
    assert!(rounds[0].cut && rounds[2].cut);
    assert_eq!(rounds[1].packets, 10, "lane 1's frames went out while lane 0 was flooded");
    let sent = with_lane_of(&ctl, &lanes, 1, |l| l.tx[1].tx_stats().packets);
    assert_eq!(sent, 10);
}

/// [`with_lane`] for flooded lanes.
fn with_lane_of<R>(
    ctl: &Metronome<Vec<LaneShare>>,
    lanes: &[Guarded<FloodLane<'_>>],
    k: usize,
    f: impl FnOnce(&mut FloodLane<'_>) -> R,
) -> R {
    let mut g = ctl.lanes()[k].lock().try_lock().expect("lane free");
    f(lanes[k].get_mut(&mut g).expect("bound"))
}
