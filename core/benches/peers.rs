//! Cadence's side of the DPDK side-by-side study (`cargo xtask peers`, `docs/PERFORMANCE.md`,
//! "Side by side with DPDK"): the same operations as the peer programs in `benches/peers/`,
//! measured the same way and printed in the same machine-readable line.
//!
//! ```text
//! peers tables --size 64K|1M|<n>K [--huge] [--samples S] [--min-ms M]   # pna::exact ExactTable<2, 1>
//! peers acl --rules 100|1K|10K|1K-v6 [--huge] [--samples S] [--min-ms M]  # ACL first-packet classification, and the ACL NF per packet
//! peers io|l2fwd|l2fwd_l2|l3fwd|l3fwd_l3|l3fwd_l3_d24 [--huge] [--samples S] [--min-ms M] [--wire null|ring]  # the worker loop, software NICs
//!   (`_l2`, `_l3`: the chain checks only as deep as it reads, `validate=l2` / `validate=l3`;
//!   the software NIC matches the peer's device unless `--wire` says: `io` and `l2fwd*` over
//!   `null`, a refilling RX ring and a freeing TX queue as testpmd's `net_null`; `l3fwd*` over
//!   `ring`, a loopback that neither allocates nor frees, as l3fwd's `net_ring`)
//! peers ring [--huge] [--samples S] [--min-ms M]                   # offload::handoff, CPU 0 -> CPU 1
//! peers lpm --routes F --ips F --label L [--huge]                  # pna::lpm::Lpm4 on dpdk-test-fib's files
//! peers lpm6 --routes F --ips F --label L [--huge]                 # pna::lpm::Lpm6 on dpdk-test-fib -6's files
//! peers p4 --label L --spec F --pcap F [--table NAME F]... [--huge]  # the p4 NF, DPDK's SWX pipeline's peer
//! ```
//!
//! P4: the `p4` NF running the spec with its table files as a chain of one NF that checks the
//! link header only (the program parses the rest), the pcap's frames cycled into port 0 as
//! every forwarding figure is measured (`swx_run --bench` measures DPDK's pipeline the same
//! way: `bench/swx/swx_run.c`); `op=p4 size=L`.
//!
//! Method (identical in `benches/peers/common.h`): one discarded warm-up sample, then samples
//! until there are at least S and at least M milliseconds have passed (so that each figure spans
//! a window the harness's noise guard can judge); each sample times a fixed number of
//! operations with `rdtsc` around every burst (lookups: 1024 bursts of 32 keys; steady
//! add-on-miss/delete: 512 steps of 32; forwarding: 2048 polls of 32 frames); its figure is TSC
//! cycles per key (per packet); the line carries the median, min and max over the samples:
//!
//! `PEERBENCH impl=cadence op=hit_b32 size=64K pages=4k cycles=33.21 min=32.90 max=35.02 samples=7 ops=32768`
//!
//! Tables: the same splitmix64 16-byte keys (same seeds) as the peers; 8-byte action data; a
//! table of capacity N holding 3/4 N keys (rte_hash's 75 % at `entries` = N); hit/miss bursts
//! of 32 consecutive keys from a position that jumps by 32 × 7919 per burst; add-on-miss =
//! burst lookup (all miss) + `add_on_miss` per key, and delete = `delete` by key, each step
//! of a window of 3/4 N keys sliding over N keys; rearm = burst lookup (hit) +
//! `restart_expire_timer` per hit on an `AutoDelete` table (the SWX learner's rearm).
//!
//! Ring: as `benches/peers/ring.c` — a 2048-slot hand-off ring, the producer on CPU 0 (this
//! thread), the consumer on CPU 1 (both pinned here; `cargo xtask peers` starts this case
//! with `taskset -c 0,1`), bursts of 32 handles; a sample moves 2^22 handles, each side times
//! its own loop (its waits included) and the figure is the two sides' cycles per handle
//! added (`op=ring_spsc_b32`, the `rte_ring` peer's op, so the harness pairs them).
//!
//! Pages: `--huge` puts every allocation of 1 MiB or more (tables, key lists, the packet pool)
//! on hugetlbfs 2 MiB pages, otherwise on 4 KiB pages (`common/hugealloc.rs`); the line's
//! `pages=` says what was obtained (`thp` if hugetlbfs ran short).

use std::hint::black_box;
use std::process::ExitCode;

use cadence_core::buf::BATCH_SIZE;
use cadence_core::nf::{Chain, Egress};
use cadence_core::parse::Depth;
use cadence_core::pna::exact::{ExactConfig, ExactTable, Local, Lookup};
use cadence_core::pna::{AddStatus, IdleTimeout};
use cadence_core::stage::Stage;
use cadence_core::time::{Duration, Instant};

mod common {
    pub mod frames;
    pub mod handoff_pair;
    pub mod hugealloc;
    pub mod keys;
    pub mod l3;
    pub mod pin;
    pub mod stages;
    pub mod tsc;
    pub mod worker_loop;
}
use common::hugealloc::{self, HugeAlloc, Pages};
use common::keys::{Key, keys};
use common::stages::IoOnly;
use common::tsc::rdtsc;
use common::worker_loop::{Wire, with_worker, with_worker_on};

#[global_allocator]
static ALLOC: HugeAlloc = HugeAlloc;

#[path = "peers_ops/lpm.rs"]
mod lpm;

type Table = ExactTable<2, 1>;
const B: usize = 32;
const STRIDE: usize = B * 7919;
const LOOKUP_BURSTS: usize = 1024;
const STEADY_STEPS: usize = 512;
const POLLS: usize = 2048;
const NOW: Instant = Instant(1);

/// The sampling rule: at least `samples` samples after the warm-up, and at least `min` time.
#[derive(Clone, Copy)]
struct Rule {
    samples: usize,
    min: std::time::Duration,
}

impl Rule {
    /// Takes samples from `f` by the rule; returns them (the warm-up dropped).
    fn take(self, mut f: impl FnMut() -> f64) -> Vec<f64> {
        let t0 = std::time::Instant::now();
        f(); // warm-up
        let mut v = Vec::new();
        while v.len() < self.samples || t0.elapsed() < self.min {
            v.push(f());
        }
        v
    }
}

/// Prints one result line from the samples.
fn report(op: &str, size: &str, mut s: Vec<f64>, ops: usize) {
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let med = if n % 2 == 1 { s[n / 2] } else { (s[n / 2 - 1] + s[n / 2]) / 2.0 };
    println!(
        "PEERBENCH impl=cadence op={op} size={size} pages={} cycles={med:.2} min={:.2} max={:.2} samples={n} ops={ops}",
        hugealloc::label(),
        s[0],
        s[n - 1]
    );
}

/// Buckets per table (`--buckets-per 4`: capacity / 4); 0 keeps the table's default (capacity / 2).
static BUCKETS_PER: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn table(n: usize, mode: IdleTimeout) -> Table {
    let mut cfg = ExactConfig::new(n);
    cfg.idle_timeout = mode;
    let per = BUCKETS_PER.load(std::sync::atomic::Ordering::Relaxed);
    if let Some(b) = n.checked_div(per) {
        cfg.buckets = b.next_power_of_two();
    }
    let t = ExactTable::new(cfg);
    t.set_expire_profile(0, Duration(u64::MAX / 4));
    t
}

/// One burst of adds: lookup (all miss), then `add_on_miss` each miss. Returns the adds done.
fn add_burst(t: &Table, lane: &mut Local, ks: &[Key], out: &mut [Lookup<2, 1>; B]) -> usize {
    t.lookup_burst(lane, ks, NOW, out);
    let mut ok = 0;
    for o in out.iter().take(ks.len()) {
        if let Lookup::Miss(m) = o {
            ok += usize::from(t.add_on_miss(lane, m, 0, &[1], 0, NOW) == AddStatus::Success);
        }
    }
    ok
}

fn fill(t: &Table, lane: &mut Local, ks: &[Key]) -> usize {
    let mut out = [Lookup::EMPTY; B];
    ks.chunks(B).map(|c| c.len() - add_burst(t, lane, c, &mut out)).sum()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Hit,
    Miss,
    Rearm,
}

/// Cycles per key of [`LOOKUP_BURSTS`] burst lookups of `keys[..live]`.
fn lookups(t: &Table, lane: &mut Local, keys: &[Key], live: usize, cur: &mut usize, kind: Kind, bad: &mut u64) -> f64 {
    let mut out = [Lookup::EMPTY; B];
    let mut spent = 0;
    for _ in 0..LOOKUP_BURSTS {
        let s = *cur % (live - B);
        *cur = cur.wrapping_add(STRIDE);
        let ks = &keys[s..s + B];
        let t0 = rdtsc();
        let hits = t.lookup_burst(lane, ks, NOW, &mut out);
        if kind == Kind::Rearm {
            for o in &out {
                if let Lookup::Hit(h) = o {
                    black_box(t.restart_expire_timer(lane, &h.handle, NOW).is_ok());
                }
            }
        }
        spent += rdtsc() - t0;
        *bad += u64::from(hits != if kind == Kind::Miss { 0 } else { B });
        black_box(&out);
    }
    spent as f64 / (LOOKUP_BURSTS * B) as f64
}

fn tables(n: usize, label: &str, rule: Rule) {
    let live = (n * 3 / 4) / B * B;
    let (present, absent, all) = (keys(n, 1), keys(n, 2), keys(n, 3));
    let mut bad = 0u64;
    let mut cur = 0usize;

    // ---- lookups on a table holding `live` keys ----
    let t = table(n, IdleTimeout::NoTimeout);
    let mut lane = t.local();
    let mut fill_fail = fill(&t, &mut lane, &present[..live]);
    for (kind, op, ks) in [(Kind::Hit, "hit_b32", &present), (Kind::Miss, "miss_b32", &absent)] {
        let r = rule.take(|| lookups(&t, &mut lane, ks, live, &mut cur, kind, &mut bad));
        report(op, label, r, LOOKUP_BURSTS * B);
    }
    drop(t);

    // ---- rearm: lookup hit + restart the entry's timer, on an AutoDelete table ----
    let t = table(n, IdleTimeout::AutoDelete);
    let mut lane = t.local();
    fill_fail += fill(&t, &mut lane, &present[..live]);
    let r = rule.take(|| lookups(&t, &mut lane, &present, live, &mut cur, Kind::Rearm, &mut bad));
    report("rearm", label, r, LOOKUP_BURSTS * B);
    drop(t);

    // ---- add-on-miss and delete at a steady 75 % ----
    let t = table(n, IdleTimeout::NoTimeout);
    let mut lane = t.local();
    fill_fail += fill(&t, &mut lane, &all[..live]);
    let (mut head, mut tail) = (live, 0usize);
    let (mut add_fail, mut adds, mut del_fail) = (0usize, 0usize, 0usize);
    let mut out = [Lookup::EMPTY; B];
    for (phase, op) in ["add_on_miss", "delete"].into_iter().enumerate() {
        let r = rule.take(|| {
            let mut spent = 0;
            for _ in 0..STEADY_STEPS {
                let (h, d) = (head % n, tail % n);
                head += B;
                tail += B;
                let t0 = rdtsc();
                let ok = add_burst(&t, &mut lane, &all[h..h + B], &mut out);
                let t1 = rdtsc();
                for k in &all[d..d + B] {
                    del_fail += usize::from(t.delete(&mut lane, k, NOW).is_err());
                }
                let t2 = rdtsc();
                adds += B;
                add_fail += B - ok;
                spent += if phase == 0 { t1 - t0 } else { t2 - t1 };
            }
            spent as f64 / (STEADY_STEPS * B) as f64
        });
        report(op, label, r, STEADY_STEPS * B);
    }
    println!(
        "PEERINFO impl=cadence size={label} fill_fail={fill_fail} add_fail={add_fail} adds={adds} del_fail={del_fail} bad={bad}"
    );
}

/// Cycles per packet through the worker loop running `stage` on `frames`.
fn forwarding<S: Stage>(op: &str, wire: Wire, stage: S, frames: &[Vec<u8>], rule: Rule) {
    forwarding_of(op, "-", wire, stage, frames, rule);
}

/// [`forwarding`] with the figure's `size=` (the `p4` figures name their program there).
fn forwarding_of<S: Stage>(op: &str, size: &str, wire: Wire, stage: S, frames: &[Vec<u8>], rule: Rule) {
    let (r, stats) = with_worker_on(wire, stage, frames, |poll| {
        rule.take(|| (0..POLLS).map(|_| poll()).sum::<u64>() as f64 / (POLLS * BATCH_SIZE) as f64)
    });
    report(op, size, r, POLLS * BATCH_SIZE);
    println!(
        "PEERINFO impl=cadence op={op} size={size} wire={} rx={} tx={} drops={}",
        match wire {
            Wire::Null => "null",
            Wire::Ring => "ring",
        },
        stats.ports.iter().map(|p| p.rx).sum::<u64>(),
        stats.ports.iter().map(|p| p.tx).sum::<u64>(),
        stats.drops_total()
    );
}

/// Cycles per first-packet classification (no flow cache: the classifier itself, as
/// `rte_acl_classify` is) of the ClassBench-style trace over `n` rules (IPv6 with `v6`), in
/// trace order.
fn acl(n: usize, label: &str, v6: bool, rule: Rule) {
    use cadence_core::nf::acl::{
        AclAction, AclConfig, AclShared, CLASSBENCH_KEYS, CLASSBENCH_SEED, classbench_rules, classbench_rules6,
        classbench_trace,
    };
    // The sets `cargo xtask peers` writes for `dpdk-test-acl`: the same seed, the same keys.
    let rules = if v6 { classbench_rules6(CLASSBENCH_SEED, n) } else { classbench_rules(CLASSBENCH_SEED, n) };
    let trace = classbench_trace(CLASSBENCH_SEED, &rules, CLASSBENCH_KEYS);
    let mut cfg = AclConfig::new(rules.clone(), AclAction::Permit);
    cfg.flow_capacity = 64;
    let Ok(acl) = AclShared::try_new(&cfg) else {
        eprintln!("peers acl: the ACL refused the generated rules");
        return;
    };
    let set = acl.rules();
    let matched = trace.iter().filter(|k| set.classify(k).1.is_some()).count();
    // The burst API, as `dpdk-test-acl` calls `rte_acl_classify` over bursts of keys.
    let mut out = vec![(AclAction::Permit, None); trace.len()];
    let r = rule.take(|| {
        let t0 = rdtsc();
        set.classify_burst(black_box(&trace), &mut out);
        black_box(&out);
        (rdtsc() - t0) as f64 / trace.len() as f64
    });
    report("acl_classify", label, r, trace.len());
    println!("PEERINFO impl=cadence op=acl_classify size={label} rules={n} keys={} matched={matched}", trace.len());
    acl_nf(label, &rules, &trace, rule);
}

/// Cycles per packet the ACL NF adds to the worker loop (`op=acl_nf`): the trace's keys as
/// frames (`common::frames::of_flow`), cycled through a chain of the ACL NF alone (its default
/// configuration: IPv4 classified directly while the cross tables answer, else its flow
/// cache of 65 536 flows, which the trace's 100 000 keys overflow — a flood of new flows),
/// minus the same frames through the empty chain (the same parse, every check), both measured
/// in each sample. Every rule permits here, so that both chains send every frame and the
/// difference is the NF's own work, not the cost of the frames it would drop.
fn acl_nf(label: &str, rules: &[cadence_core::nf::acl::AclRule], trace: &[cadence_core::parse::FlowKey], rule: Rule) {
    use cadence_core::nf::acl::{Acl, AclAction, AclConfig, AclRule, AclShared};
    use std::sync::Arc;
    let permit: Vec<AclRule> = rules.iter().map(|r| AclRule { action: AclAction::Permit, ..*r }).collect();
    let Ok(shared) = AclShared::try_new(&AclConfig::new(permit, AclAction::Permit)) else {
        eprintln!("peers acl: the ACL refused the generated rules");
        return;
    };
    let direct = shared.rules().classifies_v4_by_cross_tables();
    let frames: Vec<Vec<u8>> = trace.iter().map(common::frames::of_flow).collect();
    let nf = Chain::new(vec![Box::new(Acl::new(Arc::new(shared)))], bench_egress());
    let ((r, base_stats), nf_stats) = with_worker(nf, &frames, |nf_poll| {
        with_worker(Chain::new(Vec::new(), bench_egress()), &frames, |base_poll| {
            rule.take(|| {
                let with_nf: u64 = (0..POLLS).map(|_| nf_poll()).sum();
                let without: u64 = (0..POLLS).map(|_| base_poll()).sum();
                (with_nf as f64 - without as f64) / (POLLS * BATCH_SIZE) as f64
            })
        })
    });
    report("acl_nf", label, r, POLLS * BATCH_SIZE);
    let sent = |s: &cadence_core::poll::PollStats| s.ports.iter().map(|p| p.tx).sum::<u64>();
    println!(
        "PEERINFO impl=cadence op=acl_nf size={label} direct={direct} tx={} drops={} base_tx={} base_drops={}",
        sent(&nf_stats),
        nf_stats.drops_total(),
        sent(&base_stats),
        base_stats.drops_total()
    );
}

/// The frames of a classic pcap (microsecond or nanosecond, either byte order).
fn read_pcap(path: &str) -> Result<Vec<Vec<u8>>, String> {
    let b = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let magic = b.get(..4).ok_or(format!("{path}: not a pcap"))?;
    let le = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => false,
        _ => return Err(format!("{path}: not a classic pcap")),
    };
    let word = |at: usize| {
        b.get(at..at + 4).map(|w| {
            let w = [w[0], w[1], w[2], w[3]];
            if le { u32::from_le_bytes(w) } else { u32::from_be_bytes(w) }
        })
    };
    let (mut at, mut frames) = (24, Vec::new());
    while at < b.len() {
        let len = word(at + 8).ok_or(format!("{path}: a record header cut short"))? as usize;
        let data = b.get(at + 16..at + 16 + len).ok_or(format!("{path}: a record cut short"))?;
        frames.push(data.to_vec());
        at += 16 + len;
    }
    if frames.is_empty() {
        return Err(format!("{path}: no frames"));
    }
    Ok(frames)
}

/// Cycles per packet of the `p4` NF running `spec` (with `tables`: `(name, file)`) over the
/// frames of `pcap`, as the forwarding figures: a chain of the one NF checking the link header
/// only, two ports.
fn p4(label: &str, spec: &str, tables: &[(&str, &str)], pcap: &str, rule: Rule) -> Result<(), String> {
    use cadence_core::nf::p4::{P4, P4Config, P4Shared};
    use std::sync::Arc;
    let text = |p: &str| std::fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let mut cfg = P4Config { spec: text(spec)?, tables: Vec::new() };
    for (name, file) in tables {
        cfg.tables.push((name.to_string(), text(file)?));
    }
    // The clock's rate only scales learner timeouts (60 s and more in these specs): a nominal
    // one does, since no entry can age out within a run.
    let rate = cadence_core::time::TickRate::try_new(2_600_000_000).ok_or("no rate")?;
    let shared = P4Shared::try_new(&cfg, rate).map_err(|e| format!("{spec}: {e}"))?;
    let egress = bench_egress();
    let mut chain = Chain::new(vec![Box::new(P4::new(Arc::new(shared)))], egress);
    chain.set_validate(Depth::L2);
    forwarding_of("p4", label, Wire::Null, chain, &read_pcap(pcap)?, rule);
    Ok(())
}

/// The two ports' egress every chain of this bench uses: own MACs 02:..:10 and 02:..:11, the
/// default peers, no control port.
fn bench_egress() -> Egress {
    Egress::new([[2, 0, 0, 0, 0, 0x10], [2, 0, 0, 0, 0, 0x11]], Egress::DEFAULT_PEERS, None)
}

/// `100`, `1K`, `10K`, ...: a count with an optional K (×1000).
fn parse_count(s: &str) -> Option<usize> {
    match s.strip_suffix('K') {
        Some(k) => k.parse::<usize>().ok()?.checked_mul(1000),
        None => s.parse().ok(),
    }
}

/// Handles per ring sample: `PEER_RING_OBJS` of `benches/peers/ring.c`.
const RING_OBJS: u64 = 1 << 22;

/// Cycles per handle (producer + consumer) through the hand-off ring, CPU 0 -> CPU 1.
fn ring(rule: Rule) {
    common::pin::pin_or_warn(0, "peers ring");
    let mut pair = common::handoff_pair::Pair::<common::handoff_pair::Ring>::start("peers ring");
    let r = rule.take(|| pair.sample(RING_OBJS) as f64 / RING_OBJS as f64);
    report("ring_spsc_b32", "-", r, RING_OBJS as usize);
}

/// `64K`, `1M`, ...: a power of two of at least 1K keys.
fn parse_size(s: &str) -> Option<usize> {
    let (num, shift) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 10),
        b'M' => (&s[..s.len() - 1], 20),
        _ => return None,
    };
    let n = num.parse::<usize>().ok()?.checked_shl(shift)?;
    n.is_power_of_two().then_some(n)
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: peers tables --size 64K|1M | io | l2fwd | l2fwd_l2 | l3fwd | l3fwd_l3 | l3fwd_l3_d24 | ring | acl --rules 100|1K|10K|1K-v6 | lpm|lpm6 --routes F --ips F --label L  [--huge] [--samples S] [--min-ms M] [--wire null|ring]"
    );
    ExitCode::FAILURE
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let huge = args.iter().any(|a| a == "--huge");
    hugealloc::set_pages(if huge { Pages::Huge } else { Pages::Small });
    let opt = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(String::as_str);
    let samples = match opt("--samples").map(str::parse::<usize>) {
        None => 7,
        Some(Ok(s)) if (1..4096).contains(&s) => s,
        Some(_) => return usage(),
    };
    let min = match opt("--min-ms").map(str::parse::<u64>) {
        None => 0,
        Some(Ok(ms)) => ms,
        Some(Err(_)) => return usage(),
    };
    let rule = Rule { samples, min: std::time::Duration::from_millis(min) };
    // The software NIC under a forwarding op: by default the one matching its peer's device
    // (`io` and `l2fwd*` as testpmd's `net_null`, `l3fwd*` as l3fwd's `net_ring`).
    let wire = match opt("--wire") {
        None => None,
        Some("null") => Some(Wire::Null),
        Some("ring") => Some(Wire::Ring),
        Some(_) => return usage(),
    };
    let null = wire.unwrap_or(Wire::Null);
    let looped = wire.unwrap_or(Wire::Ring);
    // Experiments only (`docs/PERFORMANCE.md`, "the lookup gap"): fewer, fuller buckets.
    match opt("--buckets-per").map(str::parse::<usize>) {
        None => {}
        Some(Ok(per)) if per.is_power_of_two() => BUCKETS_PER.store(per, std::sync::atomic::Ordering::Relaxed),
        Some(_) => return usage(),
    }
    let Some(case) = args.first().map(String::as_str) else {
        // `cargo bench` runs every bench with `--bench`: this one is driven by `cargo xtask peers`.
        eprintln!("peers: driven by `cargo xtask peers` (see the file's header); nothing to do");
        return ExitCode::SUCCESS;
    };
    match case {
        "--bench" => eprintln!("peers: driven by `cargo xtask peers` (see the file's header); nothing to do"),
        "tables" => match opt("--size").and_then(|s| Some((s, parse_size(s)?))) {
            Some((label, n)) => tables(n, label, rule),
            None => return usage(),
        },
        "io" => {
            forwarding("io", null, IoOnly, &(0..BATCH_SIZE as u16).map(common::frames::udp60).collect::<Vec<_>>(), rule)
        }
        "l2fwd" => {
            let egress = bench_egress();
            forwarding(
                "l2fwd",
                null,
                Chain::new(Vec::new(), egress),
                &(0..BATCH_SIZE as u16).map(common::frames::udp60).collect::<Vec<_>>(),
                rule,
            )
        }
        // The L2 forwarder checking the link header only (`validate=l2`): what macswap checks.
        "l2fwd_l2" => {
            let egress = bench_egress();
            let mut chain = Chain::new(Vec::new(), egress);
            chain.set_validate(Depth::L2);
            forwarding(
                "l2fwd_l2",
                null,
                chain,
                &(0..BATCH_SIZE as u16).map(common::frames::udp60).collect::<Vec<_>>(),
                rule,
            )
        }
        "ring" => ring(rule),
        "acl" => match opt("--rules").and_then(|s| Some((s, parse_count(s.strip_suffix("-v6").unwrap_or(s))?))) {
            Some((label, n)) => acl(n, label, label.ends_with("-v6"), rule),
            None => return usage(),
        },
        // The IPv4 LPM beside `dpdk-test-fib` (issue 33 item 4): DIR-24-8 and the default stride.
        "lpm" => match (opt("--routes"), opt("--ips"), opt("--label")) {
            (Some(r), Some(i), Some(l)) => {
                if let Err(e) = lpm::lpm(r, i, l) {
                    eprintln!("peers lpm: {e}");
                    return ExitCode::FAILURE;
                }
            }
            _ => return usage(),
        },
        // The IPv6 LPM beside `dpdk-test-fib -6` (rte_fib6's trie).
        "lpm6" => match (opt("--routes"), opt("--ips"), opt("--label")) {
            (Some(r), Some(i), Some(l)) => {
                if let Err(e) = lpm::lpm6(r, i, l) {
                    eprintln!("peers lpm6: {e}");
                    return ExitCode::FAILURE;
                }
            }
            _ => return usage(),
        },
        "l3fwd" => forwarding(
            "l3fwd",
            looped,
            common::l3::l3fwd_chain(),
            &(0..500).map(common::frames::tcp64).collect::<Vec<_>>(),
            rule,
        ),
        // The same with DIR-24-8 (`l3fwd.first_stride4=24`): the layout of l3fwd's rte_lpm.
        "l3fwd_l3_d24" => {
            let mut chain = Chain::new(vec![common::l3::l3fwd_stride(24)], common::l3::EGRESS);
            chain.set_validate(Depth::L3);
            forwarding("l3fwd_l3_d24", looped, chain, &(0..500).map(common::frames::tcp64).collect::<Vec<_>>(), rule)
        }
        // The L3 forwarder checking through the IP header only (`validate=l3`).
        "l3fwd_l3" => {
            let mut chain = common::l3::l3fwd_chain();
            chain.set_validate(Depth::L3);
            forwarding("l3fwd_l3", looped, chain, &(0..500).map(common::frames::tcp64).collect::<Vec<_>>(), rule)
        }
        "p4" => match (opt("--label"), opt("--spec"), opt("--pcap")) {
            (Some(l), Some(spec), Some(pcap)) => {
                let tables: Vec<(&str, &str)> = args
                    .iter()
                    .enumerate()
                    .filter(|(_, a)| *a == "--table")
                    .filter_map(|(i, _)| Some((args.get(i + 1)?.as_str(), args.get(i + 2)?.as_str())))
                    .collect();
                if let Err(e) = p4(l, spec, &tables, pcap, rule) {
                    eprintln!("peers p4: {e}");
                    return ExitCode::FAILURE;
                }
            }
            _ => return usage(),
        },
        _ => return usage(),
    }
    if huge && hugealloc::fallback_bytes() > 0 {
        eprintln!(
            "peers: hugetlbfs ran short: {} MiB on transparent huge pages instead ({} MiB on hugetlbfs)",
            hugealloc::fallback_bytes() >> 20,
            hugealloc::hugetlb_bytes() >> 20
        );
    }
    ExitCode::SUCCESS
}
