//! Cadence's ACL against DPDK's `rte_acl` (through `dpdk-test-acl`, Debian's `dpdk` package) on
//! the same generated ClassBench-style rule sets and traces: for every tuple, the same winning
//! rule — its 0-based line, not only the action — or the same "no rule". `cargo xtask test`
//! installs the package; without `dpdk-test-acl` this test fails and says so.

use cadence_bench::classbench::{self, TEST_ACL};

fn compare(seed: u64, n_rules: usize, n_tuples: usize) {
    let dir = std::env::temp_dir().join(format!("cadence-acl-diff-{}-{seed}-{n_rules}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let rules = classbench::rules(seed, n_rules);
    let trace = classbench::trace(seed, &rules, n_tuples);
    let (rf, tf) = (dir.join("rules"), dir.join("trace"));
    std::fs::write(&rf, classbench::rules_file(&rules)).expect("rules file");
    std::fs::write(&tf, classbench::trace_file(&trace)).expect("trace file");
    let out = classbench::run_test_acl(&rf, &tf, trace.len(), "scalar", 1, 2)
        .unwrap_or_else(|e| panic!("{e:#} (is {TEST_ACL} installed? cargo xtask test installs it)"));
    let dpdk = classbench::parse_results(&out).expect("dpdk-test-acl's results");
    let acl = classbench::cadence_acl(&rules).expect("Cadence's ACL");
    let ours = classbench::cadence_ids(&acl, &trace);
    assert_eq!(dpdk.len(), trace.len(), "{TEST_ACL} classified every tuple once");
    let differ: Vec<_> = (0..trace.len()).filter(|&i| dpdk[i] != ours[i]).collect();
    assert!(
        differ.is_empty(),
        "seed {seed}, {n_rules} rules: {} of {} tuples differ; first: tuple {:?} dpdk {:?} cadence {:?}",
        differ.len(),
        trace.len(),
        trace[differ[0]],
        dpdk[differ[0]],
        ours[differ[0]]
    );
    // The comparison has teeth: most tuples hit a rule, and many different rules win.
    let hits = ours.iter().flatten().count();
    assert!(hits * 10 >= trace.len() * 8, "{hits} of {} tuples matched", trace.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn acl_picks_the_same_rule_as_rte_acl() {
    for (seed, n) in [(1, 20), (2, 100), (3, 1000)] {
        compare(seed, n, 2000);
    }
}
