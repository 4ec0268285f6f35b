//! ClassBench-style IPv4 rule sets and traces (seeded), in the files DPDK's `dpdk-test-acl`
//! reads, and that program run over them: the independent implementation Cadence's ACL is
//! checked against (rule ids, not only actions) and timed beside (issue 33).
//!
//! The formats (DPDK 22.11 `app/test-acl/main.c`):
//! - a rule per line, `@SRC/LEN DST/LEN SPORT_LO : SPORT_HI DPORT_LO : DPORT_HI PROTO/MASK`
//!   (dotted quads; a protocol mask of `0x00` is any protocol). The rule on line `n` (1-based)
//!   gets priority `RTE_ACL_MAX_PRIORITY − n` and user data `n`: the earliest matching line wins;
//! - a trace tuple per line, `SRC DST SPORT DPORT PROTO` as unsigned integers (addresses in host
//!   order);
//! - with `--verbose=2` one line per tuple, `ipv4_5tuple: I, category: 0, result: R`, where `R`
//!   is the winning rule's user data minus one — the 0-based line — or `4294967295` for none;
//! - the timing line `... C cycles/pkt, P pkt/sec`.
//!
//! Cadence gets the same rules in the same order, all with one priority: its tie rule (equal
//! priorities: the earlier rule wins) then picks the same rule as DPDK's line order, and its
//! rule id is the same 0-based line.
//!
//! The generator is not tuned to one set: prefix lengths spread from /0 to /32 with peaks at
//! /16, /24 and /32, addresses drawn around a few shared networks so that rules overlap and
//! nest, port fields any / exact well-known / the unprivileged range / arbitrary ranges,
//! protocols TCP / UDP / any. A trace tuple falls inside a random rule nine times in ten
//! (so that late rules are reached) and is uniform otherwise.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, Result, bail};

use cadence_core::nf::acl::{AclAction, AclConfig, AclRule, AclShared, Prefix};
use cadence_core::parse::{FlowKey, IpAddr};
use cadence_core::rand::XorShift64;

/// DPDK's ACL test program (Debian's `dpdk` package).
pub const TEST_ACL: &str = "dpdk-test-acl";

/// One IPv4 rule: prefixes (address, length), inclusive port ranges, protocol or any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CbRule {
    pub src: (u32, u8),
    pub dst: (u32, u8),
    pub sport: (u16, u16),
    pub dport: (u16, u16),
    pub proto: Option<u8>,
}

/// One trace tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tuple {
    pub src: u32,
    pub dst: u32,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

fn mask(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - u32::from(len.min(32))) }
}

/// `n` rules from `seed` (the same seed, the same rules).
pub fn rules(seed: u64, n: usize) -> Vec<CbRule> {
    let mut rng = XorShift64::new(seed);
    // A few networks the rules cluster in (as a real policy's do): overlap and nesting.
    let nets: Vec<u32> = (0..16).map(|_| rng.next_u64() as u32).collect();
    const LENS: [u8; 16] = [8, 12, 16, 16, 19, 21, 23, 24, 24, 24, 26, 28, 30, 32, 32, 32];
    const WELL_KNOWN: [u16; 10] = [20, 21, 22, 23, 25, 53, 80, 123, 443, 8080];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let prefix = |rng: &mut XorShift64, any_in: u64| {
            if rng.next_u64() % 100 < any_in {
                return (0, 0);
            }
            let len = LENS[rng.below(LENS.len())];
            let base = nets[rng.below(nets.len())];
            // Near the network: its top 8 bits kept, the rest drawn.
            let a = (base & 0xFF00_0000) | (rng.next_u64() as u32 & 0x00FF_FFFF);
            (a & mask(len), len)
        };
        let src = prefix(&mut rng, 25);
        let dst = prefix(&mut rng, 5);
        let port = |rng: &mut XorShift64, any_in: u64| -> (u16, u16) {
            let r = rng.next_u64() % 100;
            if r < any_in {
                (0, u16::MAX)
            } else if r < any_in + (100 - any_in) / 3 {
                let p = WELL_KNOWN[rng.below(WELL_KNOWN.len())];
                (p, p)
            } else if r < any_in + (100 - any_in) / 2 {
                (1024, u16::MAX)
            } else {
                let lo = rng.next_u64() as u16;
                (lo, lo.saturating_add((rng.next_u64() % 4096) as u16))
            }
        };
        let sport = port(&mut rng, 70);
        let dport = port(&mut rng, 25);
        let proto = match rng.next_u64() % 10 {
            0..=4 => Some(6),
            5..=7 => Some(17),
            _ => None,
        };
        out.push(CbRule { src, dst, sport, dport, proto });
    }
    out
}

/// `n` tuples from `seed`: nine in ten inside a random rule of `rules`, the rest uniform.
pub fn trace(seed: u64, rules: &[CbRule], n: usize) -> Vec<Tuple> {
    let mut rng = XorShift64::new(seed ^ 0x7A3C_E5B1_0000_0001);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let r = rng.next_u64();
        let t = match rules.get(rng.below(rules.len().max(1))) {
            Some(rule) if !r.is_multiple_of(10) => {
                let addr = |rng: &mut XorShift64, (a, len): (u32, u8)| a | (rng.next_u64() as u32 & !mask(len));
                let port = |rng: &mut XorShift64, (lo, hi): (u16, u16)| {
                    lo.wrapping_add((rng.next_u64() % (u64::from(hi - lo) + 1)) as u16)
                };
                Tuple {
                    src: addr(&mut rng, rule.src),
                    dst: addr(&mut rng, rule.dst),
                    sport: port(&mut rng, rule.sport),
                    dport: port(&mut rng, rule.dport),
                    proto: rule.proto.unwrap_or([6, 17, 1][rng.below(3)]),
                }
            }
            _ => Tuple {
                src: rng.next_u64() as u32,
                dst: rng.next_u64() as u32,
                sport: rng.next_u64() as u16,
                dport: rng.next_u64() as u16,
                proto: [6, 17, 1][rng.below(3)],
            },
        };
        out.push(t);
    }
    out
}

fn quad(a: u32) -> String {
    let b = a.to_be_bytes();
    format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3])
}

/// The rules as `dpdk-test-acl`'s rule file.
pub fn rules_file(rules: &[CbRule]) -> String {
    let mut s = String::new();
    for r in rules {
        let (p, m) = r.proto.map_or((0, 0), |p| (p, 0xFF));
        let _ = writeln!(
            s,
            "@{}/{} {}/{} {} : {} {} : {} {p}/0x{m:02x}",
            quad(r.src.0),
            r.src.1,
            quad(r.dst.0),
            r.dst.1,
            r.sport.0,
            r.sport.1,
            r.dport.0,
            r.dport.1
        );
    }
    s
}

/// The tuples as `dpdk-test-acl`'s trace file.
pub fn trace_file(trace: &[Tuple]) -> String {
    let mut s = String::new();
    for t in trace {
        let _ = writeln!(s, "{} {} {} {} {}", t.src, t.dst, t.sport, t.dport, t.proto);
    }
    s
}

/// The rules as Cadence's ACL rules: in order, one priority (see the module doc).
pub fn acl_rules(rules: &[CbRule]) -> Vec<AclRule> {
    let prefix = |(a, len): (u32, u8)| (len > 0).then(|| Prefix::v4(a.to_be_bytes(), len));
    rules
        .iter()
        .map(|r| AclRule {
            priority: 1,
            src: prefix(r.src),
            dst: prefix(r.dst),
            sport: r.sport,
            dport: r.dport,
            proto: r.proto,
            action: AclAction::Deny,
        })
        .collect()
}

/// The flow key of a tuple.
pub fn flow(t: &Tuple) -> FlowKey {
    FlowKey {
        src: IpAddr::V4(t.src.to_be_bytes()),
        dst: IpAddr::V4(t.dst.to_be_bytes()),
        src_port: t.sport,
        dst_port: t.dport,
        proto: t.proto,
    }
}

/// Cadence's ACL built over `rules` (default: permit, so a match is always a rule's).
pub fn cadence_acl(rules: &[CbRule]) -> Result<AclShared> {
    let mut cfg = AclConfig::new(acl_rules(rules), AclAction::Permit);
    cfg.flow_capacity = 64;
    AclShared::try_new(&cfg).map_err(|e| anyhow::anyhow!("Cadence's ACL refused the rules: {e}"))
}

/// Cadence's answer per tuple: the 0-based rule line, or `None`.
pub fn cadence_ids(acl: &AclShared, trace: &[Tuple]) -> Vec<Option<u32>> {
    trace.iter().map(|t| acl.classify(&flow(t)).1).collect()
}

/// `dpdk-test-acl` over the two files, one lcore, 4 KiB pages, `alg` (`scalar`, `sse`,
/// `avx2`, …), `iter` passes over the trace; `verbose` 2 prints every tuple's result. Its
/// standard output, or why it failed.
pub fn run_test_acl(rules: &Path, trace: &Path, tuples: usize, alg: &str, iter: u32, verbose: u32) -> Result<String> {
    let prefix = format!("cadence-acl-{}", std::process::id());
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
    for l in stdout.lines().filter(|l| l.starts_with("ipv4_5tuple: ")) {
        let num = |key: &str| -> Result<u64> {
            let v = l.split(key).nth(1).and_then(|r| r.split(',').next()).map(str::trim);
            v.and_then(|v| v.parse().ok()).with_context(|| format!("{TEST_ACL}: no {key:?} in {l:?}"))
        };
        let (i, cat, r) = (num("ipv4_5tuple: ")?, num("category: ")?, num("result: ")?);
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

    #[test]
    fn the_files_are_in_classbench_form() {
        let r = CbRule { src: (0x0A01_0000, 16), dst: (0, 0), sport: (0, 65535), dport: (80, 80), proto: Some(6) };
        assert_eq!(rules_file(&[r]), "@10.1.0.0/16 0.0.0.0/0 0 : 65535 80 : 80 6/0xff\n");
        let any = CbRule { proto: None, ..r };
        assert!(rules_file(&[any]).ends_with(" 0/0x00\n"));
        let t = Tuple { src: 0x0A01_0203, dst: 1, sport: 2, dport: 80, proto: 6 };
        assert_eq!(trace_file(&[t]), "167838211 1 2 80 6\n");
    }

    #[test]
    fn generated_sets_are_seeded_and_traces_fall_inside_rules() {
        let (a, b) = (rules(7, 300), rules(7, 300));
        assert_eq!(a, b);
        assert_ne!(a, rules(8, 300));
        // Every prefix is masked to its length; ranges are ordered.
        for r in &a {
            assert_eq!(r.src.0 & !mask(r.src.1), 0);
            assert_eq!(r.dst.0 & !mask(r.dst.1), 0);
            assert!(r.sport.0 <= r.sport.1 && r.dport.0 <= r.dport.1);
        }
        // Most tuples match some rule (the generator aims nine in ten at rules).
        let acl = cadence_acl(&a).expect("acl");
        let t = trace(7, &a, 1000);
        let hits = cadence_ids(&acl, &t).iter().flatten().count();
        assert!(hits >= 850, "{hits}");
        // And they reach rules all over the list, not only the first ones.
        let ids: std::collections::BTreeSet<u32> = cadence_ids(&acl, &t).into_iter().flatten().collect();
        assert!(ids.len() > 150, "{}", ids.len());
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
