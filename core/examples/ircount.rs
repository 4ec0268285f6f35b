//! Instructions per packet of the forwarding loop, for a noisy machine: a fixed number of
//! batches through the real `Poller` over software NICs, with a deterministic clock, so that
//! `valgrind --tool=cachegrind` counts the same instructions on every run.
//!
//! ```text
//! cargo build --release -p cadence-core --example ircount
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/ircount l2 2000
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/ircount l2 4000
//! ```
//!
//! Instructions per packet = (Ir at 4000 − Ir at 2000) / (2000 × 32): the difference cancels
//! the set-up. Modes: `io` (the I/O-only stage), `l2` (the empty `Chain`, the L2 forwarder),
//! `l3` (the L3 forwarder chain of the benches), `l2v` and `l3v` (the same two checking only
//! as deep as they read: `validate=l2`, `validate=l3`), `l3r` (`l3v` whose next hops are
//! gateways resolved through the neighbour table, `core::neigh`, every one known), `p4l3` (`l3v`'s
//! routes and checks with the forwarding done by the `p4` NF running `chains/p4/router.spec`), `l2m` and `l3m` (the same with the server
//! mapper's per-bucket meter, `rss::BucketMeter`), `l3off` (the L3 chain in
//! `offload::NetBlazeStage::off`, as the firmware runs it without auxiliary cores) and
//! `l3nb` (the L3 chain as a dedicated worker's stage with one auxiliary core, all traffic
//! inside the profile's frontier: what placement costs when nothing moves), `chain1` (the chain
//! benches' Chain 1, ACL → LB → accounting, over their 500 TCP flows), `acl100` and `acl1k` (the
//! ACL alone over ClassBench-style sets of 100 and 1 000 rules, the same flows; `acl100c` and
//! `acl1kc` the same with every packet through the flow cache, `AclConfig::always_cache`), `acl1k6` (the
//! ACL alone over 1 000 ClassBench-style IPv6 rules, every one made a permit, and 500 IPv6 flows of
//! its trace: every packet a flow-cache hit), `url` (the URL
//! filter alone over 64 keep-alive connections, every packet a whole request head it reads); a third argument
//! `notiming` turns the latency
//! accounting off, and `ring` runs the worker over the benches' loopback (`worker_loop::Wire::Ring`:
//! no pool allocation or free per frame, as over DPDK's `net_ring`) instead of the allocating
//! software NIC. The count includes the software NIC's `inject` (the wire's side), which the
//! criterion benches leave outside their measurement: compare modes or commits, not absolute
//! figures with the benches'. docs/PERFORMANCE.md ("Restructuring, before and after") uses it.

use std::cell::Cell;
use std::hint::black_box;

use cadence_core::buf::{BATCH_SIZE, BUF_SIZE, Pool};
use std::sync::Arc;

use cadence_core::netblaze::{CoreMapper, NetBlazeConfig, Profile};
use cadence_core::nf::Chain;
use cadence_core::offload::{self, LaneConfig, NetBlazeStage, SharedLanes};
use cadence_core::parse::Depth;
use cadence_core::poll::{PollConfig, Poller};
use cadence_core::rss::BucketMeter;
use cadence_core::softnic::{SoftRxQueue, SoftTxQueue};
use cadence_core::stage::Stage;
use cadence_core::time::{Clock, Duration, Instant, TickRate};

#[path = "../benches/common/frames.rs"]
mod frames;
#[path = "../benches/common/l3.rs"]
mod l3;
#[path = "../benches/common/nfs.rs"]
mod nfs;
#[path = "../benches/common/stages.rs"]
#[allow(dead_code)] // the benches' `Tsc` clock is not used: the count needs a clock without `rdtsc`
mod stages;
#[path = "../benches/common/tsc.rs"]
mod tsc;
#[path = "../benches/common/worker_loop.rs"]
mod worker_loop;

use stages::IoOnly;
use worker_loop::{Loopback, Wire};

/// A clock that advances 1 000 ticks per reading: no `rdtsc`, the same path every run.
struct Steps(Cell<u64>);

impl Clock for Steps {
    fn now(&self) -> Instant {
        let t = self.0.get() + 1_000;
        self.0.set(t);
        Instant(t)
    }
    fn rate(&self) -> TickRate {
        TickRate::try_new(2_600_000_000).expect("nonzero")
    }
}

fn run<S: Stage>(stage: S, batches: usize, cfg: Cfg) -> Result<(), String> {
    let frames: Vec<Vec<u8>> = (0..BATCH_SIZE as u16).map(frames::udp60).collect();
    run_frames(stage, batches, cfg, &frames)
}

/// The worker's configuration and the software NIC under it.
#[derive(Clone, Copy)]
struct Cfg {
    poll: PollConfig,
    wire: Wire,
}

/// `run` over `frames` in turn, `BATCH_SIZE` per batch, wrapping around.
fn run_frames<S: Stage>(stage: S, batches: usize, cfg: Cfg, frames: &[Vec<u8>]) -> Result<(), String> {
    // The frames as whole batches (as many copies as make them divide evenly), each batch's
    // frames walked as one `Vec`.
    let copies = BATCH_SIZE / gcd(frames.len().max(1), BATCH_SIZE);
    let all: Vec<Vec<u8>> = frames.iter().cycle().take(frames.len() * copies).cloned().collect();
    let groups: Vec<Vec<Vec<u8>>> = all.chunks(BATCH_SIZE).map(<[Vec<u8>]>::to_vec).collect();
    let drops = match cfg.wire {
        Wire::Null => null_loop(stage, cfg.poll, batches, &groups)?,
        Wire::Ring => ring_loop(stage, cfg.poll, batches, &all, &groups)?,
    };
    match drops {
        0 => Ok(()),
        n => Err(format!("{n} frames dropped: the count would not describe forwarding")),
    }
}

/// `run_frames` over the allocating software NIC; returns the frames dropped. Written out as
/// it was before there was a choice of NIC, in its own function with its own worker, so that
/// its count stays comparable with earlier commits' (a shared loop inlines
/// differently).
#[inline(never)]
fn null_loop<S: Stage>(stage: S, cfg: PollConfig, batches: usize, groups: &[Vec<Vec<u8>>]) -> Result<u64, String> {
    let mut mem = vec![0u8; 4096 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0x1000_0000, 4096).map_err(|e| format!("pool: {e:?}"))?;
    let mut rx = [SoftRxQueue::new(&mut pool, 512), SoftRxQueue::new(&mut pool, 512)];
    let mut tx = [SoftTxQueue::new(512, true), SoftTxQueue::new(512, true)];
    let mut worker = Poller::new(stage, cfg);
    let clock = Steps(Cell::new(0));
    for i in 0..batches {
        // Never empty: every mode passes frames.
        for f in &groups[i % groups.len()] {
            let _ = rx[0].inject(&mut pool, f);
        }
        black_box(worker.poll_once(&mut pool, &mut rx, &mut tx, &clock));
    }
    Ok(worker.stats().drops_total())
}

/// [`Steps`] under another name: `ring_loop`'s `poll_once` is then its own copy, and each
/// loop's copy has one caller and is inlined into it as before.
struct RingSteps(Steps);

impl Clock for RingSteps {
    fn now(&self) -> Instant {
        self.0.now()
    }
    fn rate(&self) -> TickRate {
        self.0.rate()
    }
}

/// `run_frames` over the loopback (`Wire::Ring`); returns the frames dropped.
#[inline(never)]
fn ring_loop<S: Stage>(
    stage: S,
    cfg: PollConfig,
    batches: usize,
    all: &[Vec<u8>],
    groups: &[Vec<Vec<u8>>],
) -> Result<u64, String> {
    let mut mem = vec![0u8; 4096 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0x1000_0000, 4096).map_err(|e| format!("pool: {e:?}"))?;
    let mut worker = Poller::new(stage, cfg);
    let clock = RingSteps(Steps(Cell::new(0)));
    // The ring starts with frames in flight, from the same walk.
    let mut next = 0;
    let mut ports = Loopback::new(&mut pool, all, &mut next);
    for i in 0..batches {
        ports.turn(&mut pool);
        ports.offer(&mut pool, &groups[(i + next / BATCH_SIZE) % groups.len()]);
        black_box(worker.poll_once(&mut pool, &mut ports.rx, &mut ports.tx, &clock));
    }
    Ok(worker.stats().drops_total())
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// `chain` as the dedicated stage of one lane with one auxiliary core (which never runs: with
/// this profile nothing leaves the frontier, so nothing is handed over).
fn dedicated(chain: Chain) -> Result<NetBlazeStage, String> {
    let profile = Profile::parse(
        "version=1\ntsc_hz=2600000000\nepoch_ns=80000\nfrontier=1:1000000,1000:900000\n\
         service=packet_cycles:500,flow_cycles:300\nrate=1:1000000\n",
    )
    .map_err(|e| format!("profile: {e:?}"))?;
    let cfg = LaneConfig { epoch: Duration(208_000), link_capacity: 256, tracked_flows: 256, follow_flows: 256 };
    let (states, _ends) = offload::build(1, 1, cfg).map_err(|e| format!("links: {e}"))?;
    let lanes: SharedLanes = states.into_iter().map(spin::Mutex::new).collect::<Vec<_>>().into();
    let params = NetBlazeConfig::default().validate().map_err(|e| format!("{e}"))?;
    let mut stage = NetBlazeStage::new(chain, lanes, CoreMapper::new(params), Arc::new(profile));
    stage.enter_lane(0);
    Ok(stage)
}

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: ircount io|l2|l3|l2v|l3v|l3r|l2m|l3m|l3off|l3nb|p4l3|chain1|acl100|acl1k|acl100c|acl1kc|acl1k6|url BATCHES [notiming] [ring]";
    let metered = |mut c: Chain| {
        let meter = BucketMeter::new(128, Instant(0), Duration(2_600_000_000)).expect("meter");
        c.set_meter(Some(meter));
        c
    };
    let batches: usize = args.get(1).and_then(|n| n.parse().ok()).ok_or(usage)?;
    let mut cfg = Cfg { poll: PollConfig::default(), wire: Wire::Null };
    for a in args.iter().skip(2) {
        match a.as_str() {
            "notiming" => cfg.poll = cfg.poll.without_timing(),
            "ring" => cfg.wire = Wire::Ring,
            _ => return Err(usage.into()),
        }
    }
    match args.first().map(String::as_str) {
        Some("io") => run(IoOnly, batches, cfg),
        Some("l2") => run(Chain::new(Vec::new(), l3::EGRESS), batches, cfg),
        Some("l3") => run(l3::l3fwd_chain(), batches, cfg),
        Some("l2m") => run(metered(Chain::new(Vec::new(), l3::EGRESS)), batches, cfg),
        Some("l3m") => run(metered(l3::l3fwd_chain()), batches, cfg),
        Some("l3off") => run(NetBlazeStage::off(l3::l3fwd_chain()), batches, cfg),
        Some("l3nb") => run(dedicated(l3::l3fwd_chain())?, batches, cfg),
        // The same with the checks stopped where the chain stops reading (`validate=l2`,
        // `validate=l3`): what testpmd's macswap and l3fwd check.
        Some("l2v") => {
            let mut c = Chain::new(Vec::new(), l3::EGRESS);
            c.set_validate(Depth::L2);
            run(c, batches, cfg)
        }
        Some("l3v") => {
            let mut c = l3::l3fwd_chain();
            c.set_validate(Depth::L3);
            run(c, batches, cfg)
        }
        // The L3 forwarder's job done by a P4 program (`chains/p4/router.spec`, the `p4` NF)
        // over the same 256 /24 routes and the /16, checked as deep as `l3v`: what the
        // interpreter costs against the native NF.
        Some("p4l3") => {
            use cadence_core::nf::p4::{P4, P4Config, P4Shared};
            let mut routes = String::new();
            for i in 0..256u32 {
                let p = i % 2;
                routes.push_str(&format!(
                    "match 0x0a{:02x}{:02x}00/0xffffff00 action route nexthop_mac 0x02000000020{p} port_out {p}\n",
                    i >> 4,
                    i & 15
                ));
            }
            routes.push_str("match 0x0a010000/0xffff0000 action route nexthop_mac 0x020000000201 port_out 1\n");
            let p4cfg = P4Config {
                spec: include_str!("../../chains/p4/router.spec").to_string(),
                tables: vec![("routes".to_string(), routes)],
            };
            let rate = cadence_core::time::TickRate::try_new(2_600_000_000).ok_or("rate")?;
            let shared = P4Shared::try_new(&p4cfg, rate).map_err(|e| format!("p4: {e}"))?;
            let mut c = Chain::new(vec![Box::new(P4::new(Arc::new(shared)))], l3::EGRESS);
            c.set_validate(Depth::L3);
            run(c, batches, cfg)
        }
        // `l3v` with its next hops found in the neighbour table (`via:` gateways, both known):
        // what resolution costs when every neighbour is in the worker's cache.
        Some("l3r") => {
            let mut c = l3::l3fwd_resolved_chain();
            c.set_validate(Depth::L3);
            c.enter_lane(0);
            run(c, batches, cfg)
        }
        // The ACL alone over ClassBench-style rule sets, the chain benches' 500 TCP flows.
        Some(m @ ("acl100" | "acl1k" | "acl100c" | "acl1kc")) => {
            use cadence_core::nf::acl::{Acl, AclAction, AclConfig, AclShared, classbench_rules};
            let n = if m.starts_with("acl100") { 100 } else { 1000 };
            let mut acl_cfg = AclConfig::new(classbench_rules(7, n), AclAction::Permit);
            acl_cfg.flow_capacity = 8192;
            acl_cfg.always_cache = m.ends_with('c');
            let acl = AclShared::try_new(&acl_cfg).map_err(|e| format!("acl: {e:?}"))?;
            let frames: Vec<Vec<u8>> = (0..500u16).map(frames::tcp64).collect();
            run_frames(Chain::new(vec![Box::new(Acl::new(Arc::new(acl)))], l3::EGRESS), batches, cfg, &frames)
        }
        Some("acl1k6") => {
            use cadence_core::nf::acl::{
                Acl, AclAction, AclConfig, AclRule, AclShared, classbench_rules6, classbench_trace,
            };
            let rules: Vec<AclRule> =
                classbench_rules6(7, 1000).into_iter().map(|r| AclRule { action: AclAction::Permit, ..r }).collect();
            let frames: Vec<Vec<u8>> = classbench_trace(7, &rules, 500).iter().map(frames::of_flow).collect();
            let mut acl_cfg = AclConfig::new(rules, AclAction::Permit);
            acl_cfg.flow_capacity = 8192;
            let acl = AclShared::try_new(&acl_cfg).map_err(|e| format!("acl: {e:?}"))?;
            run_frames(Chain::new(vec![Box::new(Acl::new(Arc::new(acl)))], l3::EGRESS), batches, cfg, &frames)
        }
        Some("url") => {
            // The URL filter alone (the chain benches' 10 banned URLs, every TCP port read)
            // over 64 keep-alive connections: a SYN each, then every packet one whole request
            // head, each request read (a fixed list of 4 000 batches, whatever the count asked,
            // so that the difference of two counts holds no frame building).
            const CONNS: usize = 64;
            const ISN: u32 = 0x1000;
            let req = |r: usize| {
                format!(
                    "GET /news/article/{r:06}.html HTTP/1.1\r\nHost: www.example.com\r\n\
                     User-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nAccept: text/html\r\n\
                     Accept-Encoding: gzip\r\nConnection: keep-alive\r\n\r\n"
                )
            };
            let len = req(0).len() as u32;
            let frames: Vec<Vec<u8>> = (0..4000 * BATCH_SIZE)
                .map(|k| {
                    let (conn, r) = ((k % CONNS) as u16, k / CONNS);
                    if r == 0 {
                        frames::tcp_segment(conn, ISN, 0x02, b"")
                    } else {
                        let seq = ISN + 1 + (r as u32 - 1) * len;
                        frames::tcp_segment(conn, seq, 0x18, req(r).as_bytes())
                    }
                })
                .collect();
            if batches > 4000 {
                return Err("url: at most 4000 batches".into());
            }
            run_frames(Chain::new(vec![nfs::urlfilter()], l3::EGRESS), batches, cfg, &frames)
        }
        Some("chain1") => {
            // The chain benches' Chain 1 over their 500 TCP flows (every flow known after the
            // first 16 batches: the count is the steady state of cached verdicts and hits).
            let frames: Vec<Vec<u8>> = (0..500u16).map(frames::tcp64).collect();
            run_frames(Chain::new(vec![nfs::acl(), nfs::lb(), nfs::accounting()], l3::EGRESS), batches, cfg, &frames)
        }
        _ => Err(usage.into()),
    }
}
