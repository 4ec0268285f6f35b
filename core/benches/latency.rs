//! What the latency accounting (RX stamps, TX sojourn histogram, [`cadence_core::latency`])
//! costs Chain 1 per packet, measured by pairs: one worker, one pool, one set of tables; each
//! pair is two consecutive polls of a batch of 32, one with the accounting and one without
//! (`Poller::set_timing`), in random order. The figure is the 10 %-trimmed mean of the
//! per-pair differences, with a 95 % interval from 20 consecutive blocks of pairs (each
//! block's trimmed mean; mean ± 2.09 standard errors, Student's t at 19 degrees of freedom).
//! Not the median: this machine's TSC reads in steps of 26 ticks, so a median of differences
//! is a whole number of steps (0.81 cycles per packet each).
//!
//! Why pairs: criterion's separate runs of "chain 1" and "chain 1, no latency accounting" on a
//! machine with neighbours differ by more than the few cycles being priced (their order even
//! flipped between runs, docs/PERFORMANCE.md); two polls a few microseconds apart see the same
//! neighbours, and the median of their difference cancels what moves slower than a pair.
//!
//! A control runs the same pairs with the accounting off in both arms (its interval must hold
//! zero, else the method is biased), and a third set prices the whole loop of an I/O-only
//! stage (the accounting's share of the cheapest poll).
//!
//! `cargo bench -p cadence-core --bench latency [-- PAIRS]` (default 100 000 pairs per set;
//! without `--bench`, as `cargo test --benches` runs it, 2000).

use cadence_core::nf::Chain;
use cadence_core::stage::Stage;

mod common {
    pub mod frames;
    pub mod l3;
    pub mod nfs;
    pub mod stages;
    pub mod tsc;
    pub mod worker_loop;
}
use common::l3::EGRESS;
use common::nfs::{accounting, acl, lb};
use common::stages::IoOnly;
use common::worker_loop::with_worker_ab;

/// Packets per poll.
const BATCH: f64 = cadence_core::buf::BATCH_SIZE as f64;

/// One set of pairs: arm `a` against arm `b` (`true`: accounting on).
struct Pairs {
    /// Cycles of the `a` polls, of the `b` polls, and `a − b` per pair.
    a: Vec<i64>,
    b: Vec<i64>,
    diff: Vec<i64>,
}

/// Blocks the differences are cut into for the interval.
const BLOCKS: usize = 20;

/// The median of `v`.
fn median(v: &[i64]) -> i64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied().unwrap_or(0)
}

/// The mean of `v` without its lowest and highest 10 %.
fn trimmed_mean(v: &[i64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    let cut = s.len() / 10;
    let kept = &s[cut..s.len() - cut];
    kept.iter().map(|&x| x as f64).sum::<f64>() / kept.len().max(1) as f64
}

/// The trimmed mean of `v` and its 95 % interval from [`BLOCKS`] consecutive blocks.
fn trimmed_ci(v: &[i64]) -> (f64, f64, f64) {
    let m = trimmed_mean(v);
    let block = (v.len() / BLOCKS).max(1);
    let means: Vec<f64> = v.chunks(block).take(BLOCKS).map(trimmed_mean).collect();
    let k = means.len() as f64;
    let mean = means.iter().sum::<f64>() / k;
    let var = means.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (k - 1.0).max(1.0);
    let half = 2.09 * (var / k).sqrt();
    (m, mean - half, mean + half)
}

fn pairs<S: Stage>(stage: S, frames: &[Vec<u8>], a: bool, b: bool, n: usize) -> Pairs {
    let (p, stats) = with_worker_ab(stage, frames, |poll| {
        for i in 0..20_000 {
            poll(i % 2 == 0);
        }
        let mut p = Pairs { a: Vec::with_capacity(n), b: Vec::with_capacity(n), diff: Vec::with_capacity(n) };
        // Which arm goes first: random per pair (xorshift), not alternating — the rings wrap
        // every 16 polls, and an alternation of period 4 would put every wrap in one arm.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (ca, cb) = if x & 1 == 0 {
                let ca = poll(a);
                (ca, poll(b))
            } else {
                let cb = poll(b);
                (poll(a), cb)
            };
            p.a.push(ca as i64);
            p.b.push(cb as i64);
            p.diff.push(ca as i64 - cb as i64);
        }
        p
    });
    // Every frame went through: a pair that dropped frames would price something else.
    assert_eq!(stats.drops_total(), 0, "the bench's frames must all pass");
    assert_eq!(stats.ports[0].rx, stats.ports[1].tx, "every frame received is sent");
    p
}

fn report(name: &str, p: Pairs) {
    let (d, lo, hi) = trimmed_ci(&p.diff);
    println!(
        "{name}: {} pairs; median poll {} vs {} cycles; difference per packet {:.2} [{:.2}, {:.2}] cycles",
        p.diff.len(),
        median(&p.a),
        median(&p.b),
        d / BATCH,
        lo / BATCH,
        hi / BATCH,
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench = args.iter().any(|a| a == "--bench");
    let n = args.iter().find_map(|a| a.parse().ok()).unwrap_or(if bench { 100_000 } else { 2000 });
    for flows in [500u16, 3000] {
        let frames: Vec<Vec<u8>> = (0..flows).map(common::frames::tcp64).collect();
        let chain1 = || Chain::new(vec![acl(), lb(), accounting()], EGRESS);
        println!("latency accounting, {flows} flows, batch 32, 64 B TCP (TSC cycles)");
        report("  chain 1, accounting on − off", pairs(chain1(), &frames, true, false, n));
        report("  chain 1, control: off − off", pairs(chain1(), &frames, false, false, n));
        report("  io only, accounting on − off", pairs(IoOnly, &frames, true, false, n));
    }
}
