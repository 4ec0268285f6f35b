//! Cadence's ACL against DPDK's `rte_acl` (through `dpdk-test-acl`, Debian's `dpdk-dev`
//! package) on the same generated ClassBench-style rule sets and traces: for every tuple, the
//! same winning rule — its 0-based line, not only the action — or the same "no rule"; IPv4 and
//! IPv6 sets.
//! `cargo xtask test` installs the package; without `dpdk-test-acl` this test fails and says so.

use anyhow::{Context, Result, ensure};

use cadence_bench::classbench::{self, TEST_ACL};
use cadence_core::nf::acl::{classbench_rules, classbench_rules6, classbench_trace};

fn compare(seed: u64, n_rules: usize, n_tuples: usize, v6: bool) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("cadence-acl-diff-{}-{seed}-{n_rules}-{v6}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let rules = if v6 { classbench_rules6(seed, n_rules) } else { classbench_rules(seed, n_rules) };
    ensure!(classbench::is_ipv6(&rules) == v6, "the set is of the family asked for");
    let trace = classbench_trace(seed, &rules, n_tuples);
    let (rf, tf) = (dir.join("rules"), dir.join("trace"));
    std::fs::write(&rf, classbench::rules_file(&rules)?)?;
    std::fs::write(&tf, classbench::trace_file(&trace)?)?;
    let out = classbench::run_test_acl(&rf, &tf, trace.len(), "scalar", 1, 2)
        .with_context(|| format!("is {TEST_ACL} installed? cargo xtask test installs it"))?;
    let dpdk = classbench::parse_results(&out)?;
    let acl = classbench::cadence_acl(&rules)?;
    let ours = classbench::cadence_ids(&acl, &trace);
    ensure!(dpdk.len() == trace.len(), "{TEST_ACL} classified {} of {} tuples", dpdk.len(), trace.len());
    let differ: Vec<usize> = (0..trace.len()).filter(|&i| dpdk.get(i) != ours.get(i)).collect();
    if let Some(&i) = differ.first() {
        anyhow::bail!(
            "seed {seed}, {n_rules} rules (IPv6: {v6}): {} of {} tuples differ; first: tuple {:?} dpdk {:?} cadence {:?}",
            differ.len(),
            trace.len(),
            trace.get(i),
            dpdk.get(i),
            ours.get(i)
        );
    }
    // The comparison has teeth: most tuples hit a rule.
    let hits = ours.iter().flatten().count();
    ensure!(hits * 10 >= trace.len() * 8, "only {hits} of {} tuples matched a rule", trace.len());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

#[test]
fn acl_picks_the_same_rule_as_rte_acl() -> Result<()> {
    for (seed, n) in [(1, 20), (2, 100), (3, 1000)] {
        compare(seed, n, 2000, false)?;
    }
    // IPv6 (`dpdk-test-acl --ipv6`): prefixes /0–/128, the same ports and protocols.
    for (seed, n) in [(4, 20), (5, 100), (6, 1000)] {
        compare(seed, n, 2000, true)?;
    }
    Ok(())
}
