//! The ACL's bit-vector groups on the ClassBench-style sets `cargo xtask peers --only acl`
//! times: groups, bytes, groups visited per key on the trace, and the time per key of the
//! trace as classified and of the worst case (every group visited, as for a key no rule
//! matches). TSC-free wall-clock figures for comparing group layouts on one machine; the
//! peers harness gives the cycles beside rte_acl.
//!
//! `cargo run --release -p cadence-core --example aclgroups -- 100 1000 10000 1000v6`
//!
//! `--passes N` before the sizes only classifies the trace N times and prints nothing: the
//! difference of two instruction counts (`valgrind --tool=cachegrind --cache-sim=no`, with
//! N = 1 and N = 3, divided by 2 × 100 000 keys) is the instructions per lookup, free of the
//! build and the trace's generation.

use std::hint::black_box;
use std::time::Instant;

use cadence_core::nf::acl::{
    AclAction, AclConfig, AclShared, CLASSBENCH_KEYS, CLASSBENCH_SEED, classbench_rules, classbench_rules6,
    classbench_trace,
};

fn main() {
    // A size, or a size with `v6` after it (`1000v6`) for the IPv6 set.
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let passes: Option<usize> = match args.iter().position(|a| a == "--passes") {
        Some(i) => {
            let n = args.get(i + 1).and_then(|n| n.parse().ok());
            if n.is_none() {
                eprintln!("aclgroups: --passes takes a number");
                std::process::exit(2);
            }
            args.drain(i..i + 2);
            n
        }
        None => None,
    };
    let sizes: Vec<(usize, bool)> = args
        .iter()
        .filter_map(|s| match s.strip_suffix("v6") {
            Some(n) => n.parse().ok().map(|n| (n, true)),
            None => s.parse().ok().map(|n| (n, false)),
        })
        .collect();
    let all = vec![(100, false), (1000, false), (10_000, false), (1000, true)];
    for (n, v6) in if sizes.is_empty() { all } else { sizes } {
        let rules = if v6 { classbench_rules6(CLASSBENCH_SEED, n) } else { classbench_rules(CLASSBENCH_SEED, n) };
        let trace = classbench_trace(CLASSBENCH_SEED, &rules, CLASSBENCH_KEYS);
        let Ok(acl) = AclShared::try_new(&AclConfig::new(rules, AclAction::Permit)) else {
            eprintln!("aclgroups: the ACL refused {n} generated rules");
            std::process::exit(1);
        };
        let set = acl.rules();
        let c = set.classifier(v6);
        if let Some(passes) = passes {
            for _ in 0..passes {
                for k in &trace {
                    black_box(c.classify(black_box(k)));
                }
            }
            continue;
        }
        let visited: usize = trace.iter().map(|k| c.groups_visited(k)).sum();
        let time = |f: &dyn Fn(&cadence_core::parse::FlowKey)| {
            (0..5)
                .map(|_| {
                    let t0 = Instant::now();
                    for k in &trace {
                        f(black_box(k));
                    }
                    t0.elapsed().as_nanos() as f64 / trace.len() as f64
                })
                .fold(f64::INFINITY, f64::min)
        };
        let trace_ns = time(&|k| {
            black_box(c.classify(k));
        });
        let worst_ns = time(&|k| {
            black_box(c.classify_every_group(k));
        });
        println!(
            "rules={n}{} groups={} bytes={} visited_per_key={:.3} trace_ns={trace_ns:.1} every_group_ns={worst_ns:.1}",
            if v6 { "v6" } else { "" },
            c.group_count(),
            c.bytes(),
            visited as f64 / trace.len() as f64
        );
    }
}
