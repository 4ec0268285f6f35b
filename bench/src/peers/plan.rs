//! What one round runs (the groups of programs, in rotating order) and what is compared with
//! what (the ratios and the issue's targets).

use std::path::PathBuf;

use super::stats::rotate;

/// The page size a run puts its tables and packet memory on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pages {
    /// 4 KiB pages: DPDK `--no-huge`; Cadence's large allocations `MADV_NOHUGEPAGE`.
    Small,
    /// 2 MiB hugetlbfs pages: DPDK's hugepages (`--in-memory`); Cadence `MAP_HUGETLB`.
    Huge,
}

impl Pages {
    /// The `pages=` label a program prints when it got these pages.
    pub fn label(self) -> &'static str {
        match self {
            Pages::Small => "4k",
            Pages::Huge => "2M",
        }
    }
}

/// A program the harness runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `core/benches/peers.rs` (pinned to CPU 1 with `taskset`).
    Cadence,
    /// `core/benches/peers.rs ring`: two threads, which pin themselves to CPUs 0 and 1 (the
    /// `rte_ring` peer's two lcores), so it starts with `taskset -c 0,1`.
    CadenceRing,
    /// `benches/peers/hash.c`.
    Hash,
    /// `benches/peers/learner.c`.
    Learner,
    /// `benches/peers/ring.c`.
    Ring,
    /// Debian's `dpdk-testpmd`.
    Testpmd,
    /// DPDK's l3fwd example with Cadence's hook.
    L3fwd,
    /// Debian's `dpdk-test-acl` (`rte_acl` over a ClassBench rule and trace file).
    TestAcl,
    /// Debian's `dpdk-test-fib` (`rte_fib` DIR-24-8 over a route and address file).
    TestFib,
    /// `bench/swx/swx_run.c --bench`: DPDK's SWX pipeline (its code-generated shared object).
    Swx,
}

/// How a program's run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// It exits by itself.
    Exits,
    /// testpmd (non-interactive): it forwards until a line arrives on its stdin.
    StdinAfter(u64),
    /// l3fwd: it forwards until SIGINT.
    SigintAfter(u64),
}

/// One program run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// What the output calls it, e.g. `rte_hash 1M (2M pages)`.
    pub label: String,
    pub program: Program,
    pub args: Vec<String>,
    pub ending: Ending,
    /// How its figures are read from its output.
    pub reader: Reader,
}

/// How a program prints its figures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reader {
    /// `PEERBENCH` lines ([`super::line::parse_output`]).
    Lines,
    /// testpmd's own figure; the forwarding mode it measures.
    Testpmd(&'static str),
    /// `dpdk-test-acl`'s `cycles/pkt`: the algorithm (`rte_acl_<alg>` is the figure's
    /// implementation) and the rule-set label (its size).
    TestAcl { alg: &'static str, size: String },
    /// `dpdk-test-fib`'s `AVG FIB lookup` (one pass over the addresses, bursts of 64): the
    /// route-set label.
    TestFib { size: String, v6: bool },
}

/// Programs run back to back in one round: a Cadence bench and its peers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    pub name: &'static str,
    pub jobs: Vec<Job>,
}

/// The knobs of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knobs {
    /// Samples per figure in the programs that sample.
    pub samples: u32,
    /// Seconds of forwarding per testpmd / l3fwd run, and the least time each Cadence
    /// forwarding figure and the ring figure spans.
    pub seconds: u64,
    /// The least time each table figure spans, in milliseconds (so that the noise guard,
    /// whose clock ticks are 10 ms, judges windows of a useful length).
    pub table_ms: u64,
    /// The l3fwd route files (IPv4, IPv6).
    pub routes4: PathBuf,
    pub routes6: PathBuf,
    /// The ACL sets: (label, rule file, trace file, keys in the trace).
    pub acl_sets: Vec<(String, PathBuf, PathBuf, usize)>,
    /// The LPM sets, written by `dpdk-test-fib` itself.
    pub fib_sets: Vec<FibSet>,
    /// The P4 programs (`crate::swx::sets`), each with the pcap of its frames.
    pub p4_sets: Vec<P4Job>,
    /// `swx_run`'s `--include` directory (DPDK's internal headers the generated C includes).
    pub swx_include: PathBuf,
}

/// One P4 program of the `p4` group: what both sides run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct P4Job {
    pub label: &'static str,
    pub spec: PathBuf,
    pub tables: Vec<(String, PathBuf)>,
    /// DPDK's output ports.
    pub ports: u32,
    pub pcap: PathBuf,
}

/// The groups' names, in their order in round 0 (`--only` selects among them).
pub const GROUPS: [&str; 9] = ["tables-64K", "tables-1M", "io", "macswap", "l3fwd", "ring", "acl", "lpm", "p4"];

/// One LPM set: its routes and the addresses looked up, as files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FibSet {
    pub label: String,
    /// `a.b.c.d/len next-hop` lines (IPv6: `a:b:…/len next-hop`).
    pub routes: PathBuf,
    /// The addresses, one per line, as `dpdk-test-fib -u` wrote them (Cadence reads these).
    pub ips: PathBuf,
    /// The same addresses as `dpdk-test-fib -t` must read them to look up the same ones: it
    /// stores an IPv4 line's bytes as they come (network order) and reads them as a host-order
    /// `u32`, so each IPv4 address here has its bytes reversed (IPv6 is read as bytes: the same
    /// file).
    pub ips_dpdk: PathBuf,
    pub v6: bool,
}

/// The LPM route-set sizes (`cargo xtask peers`' `lpm` group; `dpdk-test-fib -n`), each with
/// the prefix-length distribution given to `-d` (`None`: its own, prefixes of every length)
/// and whether the routes are shuffled (`-s`: the addresses are drawn from the first
/// [`FIB_LOOKUPS`] routes in the file's order, so a set larger than that is shuffled or the
/// addresses would all fall in its shortest routes).
pub const FIB_SIZES: [(&str, usize, Option<&str>); 4] =
    [("1K", 1_000, None), ("10K", 10_000, None), ("100K", 100_000, None), ("1M", 1_000_000, Some(FIB_INTERNET))];
pub const FIB_LOOKUPS: usize = 100_000;
/// A full table's prefix lengths (`dpdk-test-fib -d depth:count,…` for 1 000 000 routes): most
/// at /24, a peak at /16–/23, few shorter than /16 or longer than /24, close to the shares of
/// a public BGP table (about 60 % /24, 10–12 % each /22 and /23, 4–5 % each /20 and /21).
/// Every length not listed gets none.
pub const FIB_INTERNET: &str = "0:0,1:0,2:0,3:0,4:0,5:0,6:0,7:0,8:16,9:13,10:40,11:100,12:300,13:600,14:1200,15:2000,\
16:13000,17:8000,18:13500,19:25000,20:45000,21:50000,22:120000,23:100000,24:599000,25:3000,26:3000,27:2500,\
28:2500,29:3000,30:4000,31:500,32:3731";
/// The IPv6 route-set sizes (`dpdk-test-fib -6`: prefixes of every length up to /128, so a
/// set of N routes needs up to 14 N trie groups: 100K would not fit `-g 65536`).
pub const FIB6_SIZES: [(&str, usize); 2] = [("1K", 1_000), ("10K", 10_000)];

/// `dpdk-test-fib`'s arguments after the EAL's: `-n routes -l lookups -w routes_file -u
/// ips_file` writes a set (its generator: prefixes of every length, addresses inside them);
/// `-f -t` reads one; `-g` tbl8 groups for the longest sets.
pub fn fib_args(
    routes: &std::path::Path,
    ips: &std::path::Path,
    write: Option<(usize, Option<&str>)>,
    v6: bool,
) -> Vec<String> {
    let mut v = Vec::new();
    if v6 {
        v.push("-6".into());
    }
    if let Some((n, lengths)) = write {
        v.extend(["-n".into(), n.to_string(), "-l".into(), FIB_LOOKUPS.to_string()]);
        if let Some(d) = lengths {
            v.extend(["-d".into(), d.into(), "-s".into()]);
        }
        v.extend(["-w".into(), routes.display().to_string(), "-u".into(), ips.display().to_string()]);
    } else {
        v.extend(["-f".into(), routes.display().to_string(), "-t".into(), ips.display().to_string()]);
    }
    v.extend(["-g".into(), "65536".into()]);
    v
}

/// `dpdk-test-fib -t`'s file for the IPv4 addresses of `text` (one per line): each with its
/// bytes reversed, since it stores a line's bytes in network order and looks them up as a
/// host-order (little-endian) `u32`. Without this it looks up other addresses than Cadence:
/// for a set written by its own generator, mostly ones that fall in no long route.
pub fn reversed_ipv4(text: &str) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let mut out = String::with_capacity(text.len());
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let a: std::net::Ipv4Addr =
            line.trim().parse().with_context(|| format!("line {}: {line:?} is not an IPv4 address", n + 1))?;
        let [x, y, z, w] = a.octets();
        out.push_str(&format!("{w}.{z}.{y}.{x}\n"));
    }
    Ok(out)
}

/// The ACL rule-set sizes (`cargo xtask peers`' `acl` group) and `rte_acl`'s algorithms.
pub const ACL_SIZES: [(&str, usize); 4] = [("100", 100), ("1K", 1_000), ("10K", 10_000), ("1K-v6", 1_000)];

/// Whether an ACL set's label names an IPv6 set (`…-v6`: `classbench_rules6`, `--ipv6`).
pub fn acl_v6(label: &str) -> bool {
    label.ends_with("-v6")
}
pub const ACL_ALGS: [&str; 3] = ["scalar", "sse", "avx2"];

/// EAL arguments: `lcores`, no PCI, `mem_mb` of memory on `pages`, a file prefix of our own
/// (so that a colleague's DPDK process is never disturbed).
fn eal(pages: Pages, lcores: &str, mem_mb: u32) -> Vec<String> {
    let mut v: Vec<String> = ["-l", lcores, "--no-pci", "--log-level=error", "--file-prefix=cadence-peers"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    match pages {
        Pages::Small => v.extend(["--no-huge".into(), "--no-shconf".into()]),
        Pages::Huge => v.push("--in-memory".into()),
    }
    v.extend(["-m".into(), mem_mb.to_string()]);
    v
}

fn strings(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

/// Every group of one page size, in round 0's order.
pub fn groups(pages: Pages, k: &Knobs) -> Vec<Group> {
    let p = pages.label();
    let huge: Vec<String> = if pages == Pages::Huge { vec!["--huge".into()] } else { vec![] };
    let samples = k.samples.to_string();
    let (table_ms, fwd_ms) = (k.table_ms.to_string(), (k.seconds * 1000).to_string());
    let cadence = |what: &[&str], ms: &str| {
        let mut a = strings(what);
        a.extend(huge.iter().cloned());
        a.extend(["--samples".into(), samples.clone(), "--min-ms".into(), ms.to_string()]);
        a
    };
    let table_peer = |program, name: &str, size: &str| {
        let mut a = eal(pages, "1", 1024);
        a.extend(strings(&["--", "--size", size, "--samples", &samples, "--min-ms", &table_ms]));
        Job { label: format!("{name} {size} ({p})"), program, args: a, ending: Ending::Exits, reader: Reader::Lines }
    };
    let tables = |size: &str| {
        vec![
            Job {
                label: format!("cadence tables {size} ({p})"),
                program: Program::Cadence,
                args: cadence(&["tables", "--size", size], &table_ms),
                ending: Ending::Exits,
                reader: Reader::Lines,
            },
            table_peer(Program::Hash, "rte_hash", size),
            table_peer(Program::Learner, "learner", size),
        ]
    };
    let fwd = |op: &str| Job {
        label: format!("cadence {op} ({p})"),
        program: Program::Cadence,
        args: cadence(&[op], &fwd_ms),
        ending: Ending::Exits,
        reader: Reader::Lines,
    };
    let testpmd = |mode: &'static str| {
        let mut a = eal(pages, "0,1", 256);
        a.extend(strings(&["--vdev", "net_null0", "--vdev", "net_null1", "--"]));
        a.extend(strings(&[
            &format!("--forward-mode={mode}"),
            "--record-core-cycles",
            "--nb-cores=1",
            "--total-num-mbufs=8192",
        ]));
        Job {
            label: format!("testpmd {mode} ({p})"),
            program: Program::Testpmd,
            args: a,
            ending: Ending::StdinAfter(k.seconds),
            reader: Reader::Testpmd(mode),
        }
    };
    let mut l3 = eal(pages, "1", 256);
    l3.extend(strings(&["--vdev", "net_ring0", "--vdev", "net_ring1", "--"]));
    l3.extend(strings(&["-p", "0x3", "-P", "--config=(0,0,1),(1,0,1)", "--parse-ptype"]));
    l3.push(format!("--rule_ipv4={}", k.routes4.display()));
    l3.push(format!("--rule_ipv6={}", k.routes6.display()));
    let mut ring = eal(pages, "0,1", 256);
    ring.extend(strings(&["--", "--samples", &samples, "--min-ms", &fwd_ms]));
    vec![
        Group { name: GROUPS[0], jobs: tables("64K") },
        Group { name: GROUPS[1], jobs: tables("1M") },
        Group { name: GROUPS[2], jobs: vec![fwd("io"), testpmd("io")] },
        Group { name: GROUPS[3], jobs: vec![fwd("l2fwd"), fwd("l2fwd_l2"), testpmd("macswap")] },
        // Each Cadence forwarding op runs over the software NIC that matches its peer's
        // device (`peers` chooses it): `io` and `l2fwd*` over one that allocates and frees per
        // frame as testpmd's `net_null`, `l3fwd*` over a loopback as l3fwd's `net_ring`.
        Group {
            name: GROUPS[4],
            jobs: vec![
                fwd("l3fwd"),
                fwd("l3fwd_l3"),
                fwd("l3fwd_l3_d24"),
                Job {
                    label: format!("l3fwd-lpm ({p})"),
                    program: Program::L3fwd,
                    args: l3,
                    ending: Ending::SigintAfter(k.seconds),
                    reader: Reader::Lines,
                },
            ],
        },
        Group {
            name: GROUPS[5],
            jobs: vec![
                Job {
                    label: format!("cadence ring 2 cpus ({p})"),
                    program: Program::CadenceRing,
                    args: cadence(&["ring"], &fwd_ms),
                    ending: Ending::Exits,
                    reader: Reader::Lines,
                },
                Job {
                    label: format!("rte_ring 2 lcores ({p})"),
                    program: Program::Ring,
                    args: ring,
                    ending: Ending::Exits,
                    reader: Reader::Lines,
                },
            ],
        },
        Group { name: GROUPS[6], jobs: acl_jobs(pages, k, &cadence(&[], &table_ms)) },
        Group { name: GROUPS[7], jobs: lpm_jobs(pages, k, &cadence(&[], &table_ms)) },
        Group { name: GROUPS[8], jobs: p4_jobs(pages, k, &cadence(&[], &fwd_ms)) },
    ]
}

/// The `p4` group: per program (`k.p4_sets`), the `p4` NF and DPDK's SWX pipeline over the same
/// spec, table files and frames, each timed as the forwarding figures are.
fn p4_jobs(pages: Pages, k: &Knobs, cadence_tail: &[String]) -> Vec<Job> {
    let p = pages.label();
    let mut jobs = Vec::new();
    for s in &k.p4_sets {
        let mut a = strings(&["p4", "--label", s.label]);
        a.extend(["--spec".into(), s.spec.display().to_string(), "--pcap".into(), s.pcap.display().to_string()]);
        for (name, file) in &s.tables {
            a.extend(["--table".into(), name.clone(), file.display().to_string()]);
        }
        a.extend(cadence_tail.iter().cloned());
        jobs.push(Job {
            label: format!("cadence p4 {} ({p})", s.label),
            program: Program::Cadence,
            args: a,
            ending: Ending::Exits,
            reader: Reader::Lines,
        });
        let mut a = eal(pages, "1", 1024);
        a.extend(["--".into(), "--include".into(), k.swx_include.display().to_string()]);
        a.extend(["--spec".into(), s.spec.display().to_string(), "--ports".into(), s.ports.to_string()]);
        a.extend(["--in".into(), s.pcap.display().to_string(), "--label".into(), s.label.to_string()]);
        a.extend(["--bench".into(), (k.seconds * 1000).to_string(), "--samples".into(), k.samples.to_string()]);
        for (name, file) in &s.tables {
            a.extend(["--table".into(), name.clone(), file.display().to_string()]);
        }
        jobs.push(Job {
            label: format!("swx {} ({p})", s.label),
            program: Program::Swx,
            args: a,
            ending: Ending::Exits,
            reader: Reader::Lines,
        });
    }
    jobs
}

/// The `lpm` group: per route set, Cadence's IPv4 structures (`Poptrie4`, `Lpm4` as DIR-24-8
/// and with the default first stride 16) and `rte_fib`'s DIR-24-8 over the same routes and
/// addresses (`k.fib_sets`), both measured as `dpdk-test-fib` measures: one pass over the
/// addresses right after the build.
fn lpm_jobs(pages: Pages, k: &Knobs, cadence_tail: &[String]) -> Vec<Job> {
    let p = pages.label();
    let mut jobs = Vec::new();
    for FibSet { label, routes, ips, ips_dpdk, v6 } in &k.fib_sets {
        let (op, peer) = if *v6 { ("lpm6", "rte_fib6") } else { ("lpm", "rte_fib") };
        let mut a = strings(&[op, "--label", label]);
        a.extend(["--routes".into(), routes.display().to_string(), "--ips".into(), ips.display().to_string()]);
        a.extend(cadence_tail.iter().cloned());
        jobs.push(Job {
            label: format!("cadence {op} {label} ({p})"),
            program: Program::Cadence,
            args: a,
            ending: Ending::Exits,
            reader: Reader::Lines,
        });
        let mut a = eal(pages, "1", 1024);
        a.push("--".into());
        a.extend(fib_args(routes, ips_dpdk, None, *v6));
        jobs.push(Job {
            label: format!("{peer} {label} ({p})"),
            program: Program::TestFib,
            args: a,
            ending: Ending::Exits,
            reader: Reader::TestFib { size: label.clone(), v6: *v6 },
        });
    }
    jobs
}

/// The `acl` group: per rule set, Cadence's classifier and `dpdk-test-acl` with each algorithm
/// over the same files (`k.acl_sets`); `cadence_tail` is the Cadence bench's common arguments.
fn acl_jobs(pages: Pages, k: &Knobs, cadence_tail: &[String]) -> Vec<Job> {
    let p = pages.label();
    let mut jobs = Vec::new();
    for (label, rules, trace, keys) in &k.acl_sets {
        let mut a = strings(&["acl", "--rules", label]);
        a.extend(cadence_tail.iter().cloned());
        jobs.push(Job {
            label: format!("cadence acl {label} ({p})"),
            program: Program::Cadence,
            args: a,
            ending: Ending::Exits,
            reader: Reader::Lines,
        });
        for alg in ACL_ALGS {
            let mut a = eal(pages, "1", 1024);
            a.push("--".into());
            a.push(format!("--rulesf={}", rules.display()));
            a.push(format!("--tracef={}", trace.display()));
            // Exactly the trace's length: with more, it classifies one record past its buffer.
            a.push(format!("--tracenum={keys}"));
            a.push(format!("--iter={}", k.samples.max(1)));
            a.push(format!("--alg={alg}"));
            if acl_v6(label) {
                a.push("--ipv6".into());
            }
            // Its default verbosity prints every tuple's result inside the timed loop.
            a.push("--verbose=0".into());
            jobs.push(Job {
                label: format!("rte_acl {alg} {label} ({p})"),
                program: Program::TestAcl,
                args: a,
                ending: Ending::Exits,
                reader: Reader::TestAcl { alg, size: label.clone() },
            });
        }
    }
    jobs
}

/// Round `r`'s programs in order: the page sizes, the groups within a page size and the
/// programs within a group each start one further along every round, so that no program
/// always runs first (on a cold machine) or always right after the same neighbour.
pub fn round_order(r: usize, pages: &[Pages], k: &Knobs, only: &[String]) -> Vec<(Pages, Job)> {
    let mut out = Vec::new();
    for p in rotate(pages, r) {
        let gs: Vec<Group> =
            groups(p, k).into_iter().filter(|g| only.is_empty() || only.iter().any(|o| o == g.name)).collect();
        for g in rotate(&gs, r) {
            for j in rotate(&g.jobs, r) {
                out.push((p, j));
            }
        }
    }
    out
}

/// A target of issue 16: Cadence / peer at most `limit` (median of the rounds, each page size).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    pub limit: f64,
}

/// One ratio of the table: Cadence's `op` against `peer`'s `peer_op` at `size`.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    pub op: &'static str,
    pub size: &'static str,
    pub peer: &'static str,
    pub peer_op: &'static str,
    pub target: Option<Target>,
}

/// Every ratio the table shows, in order.
pub fn comparisons() -> Vec<Comparison> {
    let c = |op, size, peer, peer_op, limit: Option<f64>| Comparison {
        op,
        size,
        peer,
        peer_op,
        target: limit.map(|limit| Target { limit }),
    };
    let mut v = Vec::new();
    for size in ["64K", "1M"] {
        let big = size == "1M";
        v.push(c("hit_b32", size, "rte_hash", "hit_b32", Some(if big { 0.8 } else { 1.0 })));
        v.push(c("hit_b32", size, "learner", "hit_b32", None));
        v.push(c("miss_b32", size, "rte_hash", "miss_b32", None));
        v.push(c("miss_b32", size, "learner", "miss_b32", None));
        v.push(c("add_on_miss", size, "rte_hash", "add_on_miss", big.then_some(0.5)));
        v.push(c("add_on_miss", size, "learner", "add_on_miss", big.then_some(0.7)));
        v.push(c("delete", size, "rte_hash", "delete", None));
        v.push(c("delete", size, "learner", "delete", None));
        v.push(c("rearm", size, "learner", "rearm", None));
    }
    v.push(c("io", "-", "testpmd", "io", Some(0.8)));
    v.push(c("l2fwd", "-", "testpmd", "macswap", None));
    v.push(c("l2fwd_l2", "-", "testpmd", "macswap", Some(1.0)));
    v.push(c("l3fwd", "-", "l3fwd", "l3fwd_lpm", Some(0.7)));
    v.push(c("l3fwd_l3", "-", "l3fwd", "l3fwd_lpm", Some(1.0)));
    // The same router on l3fwd's own LPM layout (DIR-24-8).
    v.push(c("l3fwd_l3_d24", "-", "l3fwd", "l3fwd_lpm", None));
    v.push(c("ring_spsc_b32", "-", "rte_ring", "ring_spsc_b32", None));
    // Issue 33 item 4: an IPv4 LPM at most rte_fib's DIR-24-8: the Poptrie (18-bit direct
    // array), and DIR-24-8 (the same layout as rte_fib's); the Poptrie's 16- and 24-bit direct
    // arrays and the L3 forwarder's default first stride beside them.
    for (size, _, _) in FIB_SIZES {
        v.push(c("lpm4_pop18", size, "rte_fib", "lpm4", Some(1.0)));
        v.push(c("lpm4", size, "rte_fib", "lpm4", Some(1.0)));
        v.push(c("lpm4_pop16", size, "rte_fib", "lpm4", None));
        v.push(c("lpm4_pop24", size, "rte_fib", "lpm4", None));
        v.push(c("lpm4_s16", size, "rte_fib", "lpm4", None));
    }
    // And IPv6 at most rte_fib6's trie.
    for (size, _) in FIB6_SIZES {
        v.push(c("lpm6", size, "rte_fib6", "lpm6", Some(1.0)));
    }
    // Issue 28 item 6: a P4 program at most DPDK's code-generated SWX pipeline on the same spec.
    for label in crate::swx::sets::P4_LABELS {
        v.push(c("p4", label, "swx", "p4", (label != "router").then_some(1.0)));
    }
    // Issue 33: first-packet classification at most rte_acl's, whichever algorithm.
    for (size, _) in ACL_SIZES {
        for alg in ["rte_acl_scalar", "rte_acl_sse", "rte_acl_avx2"] {
            v.push(c("acl_classify", size, alg, "acl_classify", Some(1.0)));
        }
    }
    // Issue 33 item 2: what the ACL NF adds to a packet's cost, at most rte_acl's classification.
    for (size, _) in ACL_SIZES {
        for alg in ["rte_acl_scalar", "rte_acl_sse", "rte_acl_avx2"] {
            v.push(c("acl_nf", size, alg, "acl_classify", Some(1.0)));
        }
    }
    v
}

/// Peer figures with no Cadence counterpart (shown as figures, never as ratios): none since
/// the hand-off ring (`offload::handoff`) pairs with `rte_ring`.
pub const PEER_ONLY: [(&str, &str, &str, &str); 0] = [];

/// The l3fwd IPv4 route file: the routes of Cadence's L3 forwarder bench
/// (`core/benches/common/l3.rs`): route i = 10.(i/16).(i%16).0/24 via port i % 2, and
/// 10.1.0.0/16 via port 1.
pub fn l3fwd_routes4() -> String {
    let mut s = String::from("# Cadence peers: the routes of core/benches/common/l3.rs\n");
    for i in 0..256u32 {
        s.push_str(&format!("R10.{}.{}.0/24 {}\n", i >> 4, i & 15, i % 2));
    }
    s.push_str("R10.1.0.0/16 1\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn knobs() -> Knobs {
        Knobs {
            samples: 7,
            seconds: 3,
            table_ms: 300,
            routes4: "/r4".into(),
            routes6: "/r6".into(),
            acl_sets: vec![("100".into(), "/a.rules".into(), "/a.trace".into(), 10)],
            fib_sets: vec![FibSet {
                label: "1K".into(),
                routes: "/r.txt".into(),
                ips: "/i.txt".into(),
                ips_dpdk: "/i.dpdk".into(),
                v6: false,
            }],
            p4_sets: vec![P4Job {
                label: "fib",
                spec: "/fib.spec".into(),
                tables: vec![("t".into(), "/t.txt".into())],
                ports: 4,
                pcap: "/fib.pcap".into(),
            }],
            swx_include: "/inc".into(),
        }
    }

    /// `dpdk-test-fib -t` reads an IPv4 line's bytes as a little-endian `u32`: its file has
    /// them reversed, so that both sides look up the same addresses; a bad line is refused.
    #[test]
    fn the_peer_reads_the_same_ipv4_addresses() {
        assert_eq!(reversed_ipv4("27.208.240.41\n\n10.0.0.1\n").unwrap(), "41.240.208.27\n1.0.0.10\n");
        assert!(reversed_ipv4("10.0.0.1\n10.0.0\n").unwrap_err().to_string().contains("line 2"));
        let jobs = lpm_jobs(Pages::Small, &knobs(), &[]);
        let args = |p: Program| jobs.iter().find(|j| j.program == p).map(|j| j.args.join(" ")).unwrap();
        assert!(args(Program::Cadence).contains("--ips /i.txt"), "{}", args(Program::Cadence));
        assert!(args(Program::TestFib).contains("-t /i.dpdk"), "{}", args(Program::TestFib));
        // The full-table set has its own length distribution, shuffled (its addresses come
        // from the file's first routes).
        let w = fib_args("/r".as_ref(), "/i".as_ref(), Some((1_000_000, Some(FIB_INTERNET))), false).join(" ");
        assert!(w.contains("-n 1000000 -l 100000 -d 0:0,") && w.contains(",32:3731 -s"), "{w}");
        let total: u64 = FIB_INTERNET.split(',').map(|f| f.split_once(':').unwrap().1.parse::<u64>().unwrap()).sum();
        assert_eq!(total, 1_000_000);
    }

    #[test]
    fn every_round_runs_every_program_once_per_page_size() {
        let k = knobs();
        let both = [Pages::Small, Pages::Huge];
        let n = groups(Pages::Small, &k).iter().map(|g| g.jobs.len()).sum::<usize>();
        for r in 0..4 {
            let order = round_order(r, &both, &k, &[]);
            assert_eq!(order.len(), 2 * n);
            let mut labels: Vec<_> = order.iter().map(|(_, j)| j.label.clone()).collect();
            labels.sort();
            labels.dedup();
            assert_eq!(labels.len(), 2 * n, "round {r} repeats a program");
        }
        // The rotation moves the first program and the first page size.
        let first = |r| round_order(r, &both, &k, &[])[0].clone();
        assert_eq!(first(0).0, Pages::Small);
        assert_eq!(first(1).0, Pages::Huge);
        assert_ne!(first(0).1.label, first(2).1.label);
    }

    #[test]
    fn within_a_group_the_order_rotates() {
        let k = knobs();
        let only = vec!["io".to_string()];
        let o0: Vec<_> = round_order(0, &[Pages::Small], &k, &only).into_iter().map(|(_, j)| j.program).collect();
        let o1: Vec<_> = round_order(1, &[Pages::Small], &k, &only).into_iter().map(|(_, j)| j.program).collect();
        assert_eq!(o0, vec![Program::Cadence, Program::Testpmd]);
        assert_eq!(o1, vec![Program::Testpmd, Program::Cadence]);
    }

    #[test]
    fn page_sizes_reach_both_sides() {
        let k = knobs();
        for (p, j) in round_order(0, &[Pages::Small, Pages::Huge], &k, &[]) {
            let a = j.args.join(" ");
            match (p, j.program) {
                (Pages::Huge, Program::Cadence | Program::CadenceRing) => assert!(a.contains("--huge"), "{a}"),
                (Pages::Small, Program::Cadence | Program::CadenceRing) => assert!(!a.contains("--huge"), "{a}"),
                (Pages::Huge, _) => assert!(a.contains("--in-memory") && !a.contains("--no-huge"), "{a}"),
                (Pages::Small, _) => assert!(a.contains("--no-huge"), "{a}"),
            }
        }
    }

    #[test]
    fn the_ring_pairs_cadence_with_rte_ring_on_two_cpus() {
        let k = knobs();
        let only = vec!["ring".to_string()];
        let jobs: Vec<_> = round_order(0, &[Pages::Small], &k, &only).into_iter().map(|(_, j)| j).collect();
        let progs: Vec<_> = jobs.iter().map(|j| j.program).collect();
        assert_eq!(progs, vec![Program::CadenceRing, Program::Ring]);
        assert_eq!(jobs[0].args[0], "ring");
        assert!(jobs[0].args.join(" ").contains("--min-ms 3000"), "{:?}", jobs[0].args);
        let ring = comparisons().into_iter().find(|c| c.peer == "rte_ring").expect("a ring comparison");
        assert_eq!((ring.op, ring.peer_op, ring.size, ring.target), ("ring_spsc_b32", "ring_spsc_b32", "-", None));
        assert!(PEER_ONLY.is_empty());
    }

    #[test]
    fn the_issue_targets_are_there() {
        let t = |op, size, peer| {
            comparisons().into_iter().find(|c| c.op == op && c.size == size && c.peer == peer).and_then(|c| c.target)
        };
        assert_eq!(t("hit_b32", "1M", "rte_hash"), Some(Target { limit: 0.8 }));
        assert_eq!(t("hit_b32", "64K", "rte_hash"), Some(Target { limit: 1.0 }));
        assert_eq!(t("add_on_miss", "1M", "learner"), Some(Target { limit: 0.7 }));
        assert_eq!(t("add_on_miss", "1M", "rte_hash"), Some(Target { limit: 0.5 }));
        assert_eq!(t("io", "-", "testpmd"), Some(Target { limit: 0.8 }));
        assert_eq!(t("l3fwd", "-", "l3fwd"), Some(Target { limit: 0.7 }));
        // Issue 25: checking only what each reads, at par with macswap and l3fwd.
        assert_eq!(t("l2fwd_l2", "-", "testpmd"), Some(Target { limit: 1.0 }));
        assert_eq!(t("l3fwd_l3", "-", "l3fwd"), Some(Target { limit: 1.0 }));
        assert_eq!(t("acl_classify", "10K", "rte_acl_avx2"), Some(Target { limit: 1.0 }));
        // Issue 33: at 1 000 IPv6 rules too.
        assert_eq!(t("acl_classify", "1K-v6", "rte_acl_sse"), Some(Target { limit: 1.0 }));
        // Issue 33 item 4: the LPM at most rte_fib's DIR-24-8 at every size.
        assert_eq!(t("lpm4", "100K", "rte_fib"), Some(Target { limit: 1.0 }));
        assert_eq!(t("lpm4_s16", "100K", "rte_fib"), None);
        assert_eq!(t("lpm4_pop18", "1M", "rte_fib"), Some(Target { limit: 1.0 }));
        // IPv6 at most rte_fib6's trie.
        assert_eq!(t("lpm6", "10K", "rte_fib6"), Some(Target { limit: 1.0 }));
        // Issue 28 item 6: DPDK's four example programs at most the SWX pipeline; the router
        // (Cadence's own example) is shown without a target.
        assert_eq!(t("p4", "vxlan", "swx"), Some(Target { limit: 1.0 }));
        assert_eq!(t("p4", "router", "swx"), None);
        assert_eq!(t("acl_nf", "1K", "rte_acl_avx2"), Some(Target { limit: 1.0 }));
        assert_eq!(comparisons().iter().filter(|c| c.target.is_some()).count(), 8 + 12 + 12 + 2 * 4 + 2 + 4);
    }

    #[test]
    fn l3fwd_routes_match_the_cadence_bench() {
        let r = l3fwd_routes4();
        let routes: Vec<_> = r.lines().filter(|l| l.starts_with('R')).collect();
        assert_eq!(routes.len(), 257);
        assert_eq!(routes[0], "R10.0.0.0/24 0");
        // The bench's destination 10.1.0.1 falls in route 16, port 0, as in Cadence's.
        assert_eq!(routes[16], "R10.1.0.0/24 0");
        assert_eq!(routes[255], "R10.15.15.0/24 1");
        assert_eq!(routes[256], "R10.1.0.0/16 1");
    }
}
