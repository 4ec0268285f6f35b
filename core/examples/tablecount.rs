//! Instructions per key of the exact table's burst operations, for a noisy machine: a table of
//! `SIZE` entries holding 3/4 of them (the keys and order of `benches/peers.rs`), then `BURSTS`
//! bursts of 32 keys — hits, misses, or misses each followed by `add_on_miss` — so that
//! `valgrind --tool=cachegrind` counts the same instructions on every run.
//!
//! ```text
//! cargo build --release -p cadence-core --example tablecount
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/tablecount hit 65536 1000
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/tablecount hit 65536 2000
//! ```
//!
//! Instructions per key = (Ir at 2000 − Ir at 1000) / (1000 × 32): the difference cancels the
//! set-up. `add` takes fresh keys, at most SIZE / 32 bursts in all (use 200 and 400 at 64K).
//! docs/PERFORMANCE.md ("Side by side with DPDK") uses it.

use std::hint::black_box;
use std::process::ExitCode;

use cadence_core::pna::AddStatus;
use cadence_core::pna::exact::{ExactConfig, ExactTable, Lookup};
use cadence_core::time::Instant;

#[path = "../benches/common/keys.rs"]
mod keys;

use keys::keys;

const B: usize = 32;
const NOW: Instant = Instant(1);

fn main() -> ExitCode {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let (Some(op), Some(Ok(n)), Some(Ok(bursts))) =
        (a.first().map(String::as_str), a.get(1).map(|s| s.parse::<usize>()), a.get(2).map(|s| s.parse::<usize>()))
    else {
        eprintln!("usage: tablecount hit|miss|add SIZE BURSTS");
        return ExitCode::from(2);
    };
    let live = (n * 3 / 4) / B * B;
    if live < 2 * B || (op == "add" && bursts * B > n) || !matches!(op, "hit" | "miss" | "add") {
        eprintln!("tablecount: SIZE must be at least 86 and add's BURSTS at most SIZE / 32");
        return ExitCode::from(2);
    }
    let t: ExactTable<2, 1> = ExactTable::new(ExactConfig::new(n));
    let mut lane = t.local();
    let mut out = [Lookup::EMPTY; B];
    let (present, absent) = (keys(n, 1), keys(n, 2));
    for c in present.get(..live).unwrap_or_default().chunks(B) {
        t.lookup_burst(&mut lane, c, NOW, &mut out);
        for o in &out {
            if let Lookup::Miss(m) = o {
                black_box(t.add_on_miss(&mut lane, m, 0, &[1], 0, NOW) == AddStatus::Success);
            }
        }
    }
    let mut cur = 0usize;
    let mut fresh = 0usize;
    for _ in 0..bursts {
        let s = cur % (live - B);
        cur = cur.wrapping_add(B * 7919);
        match op {
            "hit" => black_box(t.lookup_burst(&mut lane, present.get(s..s + B).unwrap_or_default(), NOW, &mut out)),
            "miss" => black_box(t.lookup_burst(&mut lane, absent.get(s..s + B).unwrap_or_default(), NOW, &mut out)),
            _ => {
                let ks = absent.get(fresh..fresh + B).unwrap_or_default();
                fresh += B;
                t.lookup_burst(&mut lane, ks, NOW, &mut out);
                for o in &out {
                    if let Lookup::Miss(m) = o {
                        black_box(t.add_on_miss(&mut lane, m, 0, &[1], 0, NOW) == AddStatus::Success);
                    }
                }
                0
            }
        };
        black_box(&out);
    }
    ExitCode::SUCCESS
}
