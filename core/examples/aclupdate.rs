//! Time of one ACL rule change (add, delete) on ClassBench-style sets: how long the control
//! plane takes before the change is visible to the data plane.
//!
//! `cargo run --release -p cadence-core --example aclupdate -- 1000 10000`

use std::time::Instant;

use cadence_core::nf::acl::{AclAction, AclConfig, AclRule, AclShared, CLASSBENCH_SEED, classbench_rules};

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|s| s.parse().ok()).collect();
    for n in if sizes.is_empty() { vec![1000, 10_000] } else { sizes } {
        let rules = classbench_rules(CLASSBENCH_SEED, n + 64);
        let (base, extra) = rules.split_at(n);
        let t0 = Instant::now();
        let Ok(acl) = AclShared::try_new(&AclConfig::new(base.to_vec(), AclAction::Permit)) else {
            eprintln!("aclupdate: the ACL refused {n} generated rules");
            std::process::exit(1);
        };
        let build = t0.elapsed();
        let mut adds = Vec::new();
        for r in extra.iter().take(16) {
            let t = Instant::now();
            let (_, old) = acl.add_rule(AclRule { ..*r }).expect("add");
            adds.push(t.elapsed());
            drop(old);
        }
        let mut dels = Vec::new();
        for i in 0..16 {
            let t = Instant::now();
            let (_, old) = acl.delete_rule(i * (n / 16)).expect("delete");
            dels.push(t.elapsed());
            drop(old);
        }
        // The background merge of those 32 changes: the longest step is what the control
        // plane's core spends at once.
        let t = Instant::now();
        let mut merge = acl.start_merge().expect("changes pending");
        let mut steps = Vec::new();
        loop {
            let s = Instant::now();
            let done = merge.step();
            steps.push(s.elapsed());
            if done {
                break;
            }
        }
        let s = Instant::now();
        let old = acl.finish_merge(merge).expect("not stale");
        steps.push(s.elapsed());
        let merge_total = t.elapsed();
        drop(old);
        assert_eq!(acl.rules().pending(), (0, 0));
        steps.sort();
        adds.sort();
        dels.sort();
        println!(
            "rules={n} build_ms={:.2} add_us median={:.1} max={:.1} delete_us median={:.1} max={:.1} merge_ms={:.2} steps={} step_max_ms={:.2}",
            build.as_secs_f64() * 1e3,
            adds[adds.len() / 2].as_secs_f64() * 1e6,
            adds[adds.len() - 1].as_secs_f64() * 1e6,
            dels[dels.len() / 2].as_secs_f64() * 1e6,
            dels[dels.len() - 1].as_secs_f64() * 1e6,
            merge_total.as_secs_f64() * 1e3,
            steps.len(),
            steps[steps.len() - 1].as_secs_f64() * 1e3,
        );
    }
}
