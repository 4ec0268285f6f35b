//! ClassBench-style IPv4 and IPv6 rule sets and traces (`cadence_core::nf::acl::classbench_rules`,
//! `classbench_rules6` and `classbench_trace`, seeded) in the files DPDK's `dpdk-test-acl` reads, and that program run
//! over them: the independent implementation Cadence's ACL is checked against (rule ids, not
//! only actions) and timed beside (issue 33).
//!
//! The formats (DPDK 22.11 `app/test-acl/main.c`):
//! - a rule per line, `@SRC/LEN DST/LEN SPORT_LO : SPORT_HI DPORT_LO : DPORT_HI PROTO/MASK`
//!   (dotted quads; a protocol mask of `0x00` is any protocol). The rule on line `n` (1-based)
//!   gets priority `RTE_ACL_MAX_PRIORITY − n` and user data `n`: the earliest matching line wins;
//! - a trace tuple per line, `SRC DST SPORT DPORT PROTO` as unsigned integers (addresses in host
//!   order);
//! - IPv6 (`--ipv6`): the same, with addresses as `inet_pton` reads them (`2001:db8::/32`,
//!   `::/0`; in the trace `2001:db8::1`), results on `ipv6_5tuple:` lines;
//! - with `--verbose=2` one line per tuple, `ipv4_5tuple: I, category: 0, result: R`, where `R`
//!   is the winning rule's user data minus one — the 0-based line — or `4294967295` for none;
//! - the timing line `... C cycles/pkt, P pkt/sec`.
//!
//! Cadence gets the same rules in the same order, all with one priority: its tie rule (equal
//! priorities: the earlier rule wins) then picks the same rule as DPDK's line order, and its
//! rule id is the same 0-based line.
//!
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use cadence_core::nf::acl::{AclAction, AclConfig, AclRule, AclShared, Prefix};
use cadence_core::parse::{FlowKey, IpAddr};

/// DPDK's ACL test program (Debian's `dpdk` package).
pub const TEST_ACL: &str = "dpdk-test-acl";

fn quad(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

/// Whether `rules` are an IPv6 set (any prefix is IPv6): `dpdk-test-acl --ipv6` reads it.
pub fn is_ipv6(rules: &[AclRule]) -> bool {
    let v6 = |p: &Option<Prefix>| matches!(p, Some(Prefix { addr: IpAddr::V6(_), .. }));
    rules.iter().any(|r| v6(&r.src) || v6(&r.dst))
}

/// A prefix as the rule file writes it (`v6`: the file's family; any: `0.0.0.0/0` or `::/0`).
fn net(p: Option<Prefix>, v6: bool) -> Result<String> {
    match (p, v6) {
        (None, false) => Ok("0.0.0.0/0".into()),
        (None, true) => Ok("::/0".into()),
        (Some(Prefix { addr: IpAddr::V4(a), len }), false) => Ok(format!("{}/{len}", quad(u32::from_be_bytes(a)))),
        (Some(Prefix { addr: IpAddr::V6(a), len }), true) => Ok(format!("{}/{len}", std::net::Ipv6Addr::from(a))),
        (Some(p), _) => bail!("dpdk-test-acl's rule file holds one family; {p:?} is the other"),
    }
}

/// Rules as `dpdk-test-acl`'s rule file (any protocol: `0/0x00`), IPv4 or IPv6 ([`is_ipv6`];
/// IPv6 addresses as `inet_pton` reads them). Refuses a set of both families.
pub fn rules_file(rules: &[AclRule]) -> Result<String> {
    let v6 = is_ipv6(rules);
    let mut s = String::new();
    for r in rules {
        let (p, m) = r.proto.map_or((0, 0), |p| (p, 0xFF));
        let _ = writeln!(
            s,
            "@{} {} {} : {} {} : {} {p}/0x{m:02x}",
            net(r.src, v6)?,
            net(r.dst, v6)?,
            r.sport.0,
            r.sport.1,
            r.dport.0,
            r.dport.1
        );
    }
    Ok(s)
}

/// Flow keys as `dpdk-test-acl`'s trace file: IPv4 addresses as unsigned integers (host
/// order), IPv6 ones as `inet_pton` reads them. Refuses a trace of both families.
pub fn trace_file(trace: &[FlowKey]) -> Result<String> {
    let mut s = String::new();
    for t in trace {
        let (src, dst) = match (t.src, t.dst) {
            (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from_be_bytes(a).to_string(), u32::from_be_bytes(b).to_string()),
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                (std::net::Ipv6Addr::from(a).to_string(), std::net::Ipv6Addr::from(b).to_string())
            }
            _ => bail!("a key of two families: {t:?}"),
        };
        let _ = writeln!(s, "{src} {dst} {} {} {}", t.src_port, t.dst_port, t.proto);
    }
    if trace.iter().any(|t| matches!(t.src, IpAddr::V4(_))) && trace.iter().any(|t| matches!(t.src, IpAddr::V6(_))) {
        bail!("dpdk-test-acl's trace file holds one family");
    }
    Ok(s)
}

/// Cadence's ACL over `rules` (default: permit, so a match is always a rule's).
pub fn cadence_acl(rules: &[AclRule]) -> Result<AclShared> {
    let mut cfg = AclConfig::new(rules.to_vec(), AclAction::Permit);
    cfg.flow_capacity = 64;
    AclShared::try_new(&cfg).map_err(|e| anyhow::anyhow!("Cadence's ACL refused the rules: {e}"))
}

/// Cadence's answer per key: the winning rule's id (its 0-based line), or `None`.
pub fn cadence_ids(acl: &AclShared, trace: &[FlowKey]) -> Vec<Option<u32>> {
    trace.iter().map(|t| acl.classify(t).1).collect()
}

/// Writes the rule and trace files of `n` rules and `keys` keys from `seed` into `dir` (named
/// by `label`); returns their paths.
pub fn write_set(dir: &Path, label: &str, seed: u64, n: usize, keys: usize) -> Result<(PathBuf, PathBuf)> {
    write_set_of(dir, label, seed, n, keys, false)
}

/// [`write_set`] for either family (`v6`: [`cadence_core::nf::acl::classbench_rules6`]).
pub fn write_set_of(dir: &Path, label: &str, seed: u64, n: usize, keys: usize, v6: bool) -> Result<(PathBuf, PathBuf)> {
    let rules = if v6 {
        cadence_core::nf::acl::classbench_rules6(seed, n)
    } else {
        cadence_core::nf::acl::classbench_rules(seed, n)
    };
    let trace = cadence_core::nf::acl::classbench_trace(seed, &rules, keys);
    let (rf, tf) = (dir.join(format!("acl-{label}.rules")), dir.join(format!("acl-{label}.trace")));
    std::fs::write(&rf, rules_file(&rules)?).with_context(|| format!("writing {}", rf.display()))?;
    std::fs::write(&tf, trace_file(&trace)?).with_context(|| format!("writing {}", tf.display()))?;
    Ok((rf, tf))
}

/// `dpdk-test-acl` over the two files, one lcore, 4 KiB pages, `alg` (`scalar`, `sse`,
/// `avx2`, …), `iter` passes over the trace; `verbose` 2 prints every tuple's result. Its
/// standard output, or why it failed.
pub fn run_test_acl(rules: &Path, trace: &Path, tuples: usize, alg: &str, iter: u32, verbose: u32) -> Result<String> {
    let prefix = format!("cadence-acl-{}", std::process::id());
    // An IPv6 rule file (a `:` in its first rule's source network) needs `--ipv6`.
    let v6 = std::fs::read_to_string(rules)
        .is_ok_and(|t| t.lines().next().and_then(|l| l.split_whitespace().next()).is_some_and(|n| n.contains(':')));
    let out = Command::new(TEST_ACL)
        .args([
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "-l",
            "0",
            "--file-prefix",
            &prefix,
            "--log-level",
            "lib.eal:error",
        ])
        .arg("--")
        .arg(format!("--rulesf={}", rules.display()))
        .arg(format!("--tracef={}", trace.display()))
        // Exactly the trace's length: with more, it classifies one record past its buffer.
        .arg(format!("--tracenum={tuples}"))
        .arg(format!("--iter={iter}"))
        .arg(format!("--verbose={verbose}"))
        .arg(format!("--alg={alg}"))
        .args(v6.then_some("--ipv6"))
        .output()
        .with_context(|| format!("running {TEST_ACL} (Debian's dpdk package)"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        bail!(
            "{TEST_ACL} --alg={alg} failed ({}): {}{}",
            out.status,
            stdout.lines().rev().take(3).collect::<Vec<_>>().join(" | "),
            String::from_utf8_lossy(&out.stderr).lines().rev().take(3).collect::<Vec<_>>().join(" | ")
        );
    }
    Ok(stdout)
}

/// The per-tuple results of a `--verbose=2` run, in trace order: the 0-based rule line or
/// `None`. Fails on a line it cannot read, or if the tuples are not numbered 1, 2, … in order.
pub fn parse_results(stdout: &str) -> Result<Vec<Option<u32>>> {
    let mut out = Vec::new();
    for l in stdout.lines().filter(|l| l.starts_with("ipv4_5tuple: ") || l.starts_with("ipv6_5tuple: ")) {
        let num = |key: &str| -> Result<u64> {
            let v = l.split(key).nth(1).and_then(|r| r.split(',').next()).map(str::trim);
            v.and_then(|v| v.parse().ok()).with_context(|| format!("{TEST_ACL}: no {key:?} in {l:?}"))
        };
        let tuple = if l.starts_with("ipv6") { "ipv6_5tuple: " } else { "ipv4_5tuple: " };
        let (i, cat, r) = (num(tuple)?, num("category: ")?, num("result: ")?);
        if cat != 0 {
            continue;
        }
        if i != out.len() as u64 + 1 {
            bail!("{TEST_ACL}: tuple {i} where {} was expected", out.len() + 1);
        }
        out.push(u32::try_from(r).ok().filter(|&r| r != u32::MAX));
    }
    Ok(out)
}

/// The cycles per packet of a timing run (`… C cycles/pkt, …`).
pub fn parse_cycles(stdout: &str) -> Option<f64> {
    stdout.lines().find_map(|l| {
        let (before, _) = l.split_once(" cycles/pkt")?;
        before.rsplit([' ', ',']).next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    use cadence_core::nf::acl::{classbench_rules, classbench_rules6, classbench_trace};

    #[test]
    fn the_files_are_in_classbench_form() {
        let mut r = AclRule::any(1, AclAction::Deny);
        r.src = Some(Prefix::v4([10, 1, 0, 0], 16));
        r.dport = (80, 80);
        r.proto = Some(6);
        assert_eq!(rules_file(&[r]).expect("v4"), "@10.1.0.0/16 0.0.0.0/0 0 : 65535 80 : 80 6/0xff\n");
        r.proto = None;
        assert!(rules_file(&[r]).expect("v4").ends_with(" 0/0x00\n"));
        r.dst = Some(Prefix::v6([0; 16], 8));
        assert!(rules_file(&[r]).is_err(), "IPv6 has no place in the IPv4 file");
        let t = FlowKey {
            src: IpAddr::V4([10, 1, 2, 3]),
            dst: IpAddr::V4([0, 0, 0, 1]),
            src_port: 2,
            dst_port: 80,
            proto: 6,
        };
        assert_eq!(trace_file(&[t]).expect("v4"), "167838211 1 2 80 6\n");
    }

    #[test]
    fn generated_sets_are_seeded_and_traces_fall_inside_rules() {
        for v6 in [false, true] {
            let make = |seed| if v6 { classbench_rules6(seed, 300) } else { classbench_rules(seed, 300) };
            let a = make(7);
            assert_eq!(a, make(7));
            assert_ne!(a, make(8));
            assert_eq!(is_ipv6(&a), v6);
            for r in &a {
                for p in [r.src, r.dst].into_iter().flatten() {
                    let (addr, len, bits) = match p.addr {
                        IpAddr::V4(b) => (u128::from(u32::from_be_bytes(b)), p.len, 32),
                        IpAddr::V6(b) => (u128::from_be_bytes(b), p.len, 128),
                    };
                    assert_eq!(bits == 128, v6, "one family");
                    let host = (u128::MAX >> (128 - bits)).checked_shr(u32::from(len)).unwrap_or(0);
                    assert_eq!(addr & host, 0, "masked: {p:?}");
                }
                assert!(r.sport.0 <= r.sport.1 && r.dport.0 <= r.dport.1);
                let any = (0, u16::MAX);
                let catch_all =
                    r.src.is_none() && r.dst.is_none() && r.sport == any && r.dport == any && r.proto.is_none();
                assert!(!catch_all, "a catch-all would leave every later rule unreachable: {r:?}");
            }
            // Most keys match some rule (nine in ten are aimed at one), all over the list.
            let acl = cadence_acl(&a).expect("acl");
            let ids = cadence_ids(&acl, &classbench_trace(7, &a, 1000));
            assert!(ids.iter().flatten().count() >= 850, "IPv6 {v6}");
            let distinct: std::collections::BTreeSet<u32> = ids.into_iter().flatten().collect();
            assert!(distinct.len() > 150, "{}", distinct.len());
        }
    }

    #[test]
    fn test_acl_output_is_read() {
        let out = "dump_config:\nipv4_5tuple: 1, category: 0, result: 4\nipv4_5tuple: 1, category: 1, result: 9\n\
                   ipv4_5tuple: 2, category: 0, result: 4294967295\n\
                   search_ip5tuples  @lcore 0: 1 iterations, 2 pkts, 1 categories, 132 cycles (0.00 sec), 66.00 cycles/pkt, 39393939.39 pkt/sec\n";
        assert_eq!(parse_results(out).expect("parses"), [Some(4), None]);
        assert_eq!(parse_cycles(out), Some(66.0));
        assert!(parse_results("ipv4_5tuple: 2, category: 0, result: 1\n").is_err(), "out of order");
        assert!(parse_results("ipv4_5tuple: x, category: 0, result: 1\n").is_err());
    }
}
