//! The result lines the programs print, parsed.
//!
//! Cadence's bench (`core/benches/peers.rs`), the C peers (`benches/peers/*.c`) and the l3fwd
//! hook print one line per operation:
//!
//! ```text
//! PEERBENCH impl=rte_hash op=hit_b32 size=64K pages=4k cycles=33.21 min=32.90 max=35.02 samples=7 ops=32768
//! ```
//!
//! testpmd prints its own figure (`--record-core-cycles`), parsed by [`parse_testpmd`]:
//!
//! ```text
//! CPU cycles/packet=43.68 (total cycles=7870798345 / total io packets=180175488) at 2600 MHz Clock
//! ```

use std::fmt;

/// The prefix of a result line.
pub const PREFIX: &str = "PEERBENCH ";

/// One measured figure: TSC cycles per operation of one implementation.
#[derive(Debug, Clone, PartialEq)]
pub struct Measurement {
    /// `cadence`, `rte_hash`, `learner`, `rte_ring`, `testpmd`, `l3fwd`.
    pub imp: String,
    /// The operation (`hit_b32`, `add_on_miss`, `io`, ...).
    pub op: String,
    /// Table size (`64K`, `1M`) or `-`.
    pub size: String,
    /// Pages the memory was on: `4k`, `2M` (or `thp` when hugetlbfs ran short).
    pub pages: String,
    /// Median cycles per operation over the program's samples.
    pub cycles: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Samples behind the median.
    pub samples: u32,
    /// Operations per sample.
    pub ops: u64,
}

/// Why a result line was not understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// A required field is absent.
    Missing(&'static str),
    /// A field's value is not a number, or not a positive finite one.
    BadNumber(&'static str),
    /// A word is not `key=value`.
    NotKeyValue(String),
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LineError::Missing(k) => write!(f, "field {k}= is missing"),
            LineError::BadNumber(k) => write!(f, "field {k}= is not a positive number"),
            LineError::NotKeyValue(w) => write!(f, "'{w}' is not key=value"),
        }
    }
}

fn field<'a>(kv: &[(&'a str, &'a str)], key: &'static str) -> Option<&'a str> {
    kv.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
}

fn positive(kv: &[(&str, &str)], key: &'static str) -> Result<Option<f64>, LineError> {
    match field(kv, key) {
        None => Ok(None),
        Some(v) => match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
            _ => Err(LineError::BadNumber(key)),
        },
    }
}

/// Parses one line: `None` when it is not a result line, else the measurement or why not.
pub fn parse_line(line: &str) -> Option<Result<Measurement, LineError>> {
    let rest = line.trim_end().strip_prefix(PREFIX)?;
    Some(parse_fields(rest))
}

fn parse_fields(rest: &str) -> Result<Measurement, LineError> {
    let mut kv = Vec::new();
    for w in rest.split_whitespace() {
        let (k, v) = w.split_once('=').ok_or_else(|| LineError::NotKeyValue(w.to_string()))?;
        kv.push((k, v));
    }
    let text = |k: &'static str| field(&kv, k).map(str::to_string).ok_or(LineError::Missing(k));
    let cycles = positive(&kv, "cycles")?.ok_or(LineError::Missing("cycles"))?;
    let count = |k: &'static str| match field(&kv, k) {
        None => Ok(None),
        Some(v) => v.parse::<u64>().map(Some).map_err(|_| LineError::BadNumber(k)),
    };
    Ok(Measurement {
        imp: text("impl")?,
        op: text("op")?,
        size: text("size")?,
        pages: text("pages")?,
        cycles,
        min: positive(&kv, "min")?.unwrap_or(cycles),
        max: positive(&kv, "max")?.unwrap_or(cycles),
        samples: count("samples")?.map_or(1, |s| s as u32),
        ops: count("ops")?.unwrap_or(0),
    })
}

/// Every result line of a program's output, and the lines that looked like results but were not.
pub fn parse_output(out: &str) -> (Vec<Measurement>, Vec<String>) {
    let mut ms = Vec::new();
    let mut bad = Vec::new();
    for l in out.lines() {
        match parse_line(l) {
            Some(Ok(m)) => ms.push(m),
            Some(Err(e)) => bad.push(format!("{e}: {l}")),
            None => {}
        }
    }
    (ms, bad)
}

/// testpmd's `CPU cycles/packet=…` line (printed at exit with `--record-core-cycles`) as a
/// measurement of `op` (its forwarding mode) on `pages`; one sample, `ops` = its packet count.
pub fn parse_testpmd(out: &str, op: &str, pages: &str) -> Option<Measurement> {
    let line = out.lines().rev().find(|l| l.contains("CPU cycles/packet="))?;
    let after = &line[line.find("CPU cycles/packet=")? + "CPU cycles/packet=".len()..];
    let cycles: f64 = after.split_whitespace().next()?.parse().ok().filter(|c: &f64| c.is_finite() && *c > 0.0)?;
    let ops = line
        .split("packets=")
        .nth(1)
        .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Some(one_sample("testpmd", op, "-", pages, cycles, ops))
}

/// A peer program's single figure (no samples of its own) as a measurement.
fn one_sample(imp: impl Into<String>, op: &str, size: &str, pages: &str, cycles: f64, ops: u64) -> Measurement {
    Measurement {
        imp: imp.into(),
        op: op.into(),
        size: size.into(),
        pages: pages.into(),
        cycles,
        min: cycles,
        max: cycles,
        samples: 1,
        ops,
    }
}

/// `dpdk-test-acl`'s figure (`… C cycles/pkt, …`, over `--iter` passes of the trace) as the
/// measurement of `rte_acl_<alg>`'s `acl_classify` on the set `size`.
pub fn parse_test_acl(out: &str, alg: &str, size: &str, pages: &str) -> Option<Measurement> {
    let cycles = crate::classbench::parse_cycles(out).filter(|c| c.is_finite() && *c > 0.0)?;
    let ops = out
        .lines()
        .find_map(|l| l.split(" pkts,").next().filter(|_| l.contains(" pkts,"))?.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0);
    Some(one_sample(format!("rte_acl_{alg}"), "acl_classify", size, pages, cycles, ops))
}

/// `dpdk-test-fib`'s `AVG FIB lookup C` (cycles per lookup of one pass in bursts of 64) as
/// the measurement of `rte_fib`'s `lpm4` (with `v6`: `rte_fib6`'s `lpm6`) on the set `size`;
/// `Lookup tuples: N` gives the count.
pub fn parse_test_fib(out: &str, size: &str, pages: &str, v6: bool) -> Option<Measurement> {
    let cycles: f64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("AVG FIB lookup ")?.trim().parse().ok())
        .filter(|c: &f64| c.is_finite() && *c > 0.0)?;
    let ops = out.lines().find_map(|l| l.trim().strip_prefix("Lookup tuples:")?.trim().parse().ok()).unwrap_or(0);
    let (imp, op) = if v6 { ("rte_fib6", "lpm6") } else { ("rte_fib", "lpm4") };
    Some(one_sample(imp, op, size, pages, cycles, ops))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_test_fib() {
        let out = "Routes total: 1000\nLookup tuples: 100000\nAVG FIB add 8809\nAVG FIB lookup 124.5\nAVG FIB delete 3417380\n";
        let m = parse_test_fib(out, "1K", "4k", false).expect("a figure");
        assert_eq!(
            (m.imp.as_str(), m.op.as_str(), m.size.as_str(), m.cycles, m.ops),
            ("rte_fib", "lpm4", "1K", 124.5, 100_000)
        );
        assert_eq!(parse_test_fib("AVG FIB add 3\n", "1K", "4k", false), None);
        let m = parse_test_fib(out, "10K", "2M", true).expect("a figure");
        assert_eq!((m.imp.as_str(), m.op.as_str(), m.size.as_str()), ("rte_fib6", "lpm6", "10K"));
    }

    #[test]
    fn parses_test_acl() {
        let out = "search_ip5tuples  @lcore 1: 7 iterations, 700000 pkts, 1 categories, 46200000 cycles (0.02 sec), 66.00 cycles/pkt, 39393939.39 pkt/sec\n";
        let m = parse_test_acl(out, "sse", "100", "4k").expect("a figure");
        assert_eq!(
            (m.imp.as_str(), m.op.as_str(), m.size.as_str(), m.cycles, m.ops),
            ("rte_acl_sse", "acl_classify", "100", 66.0, 700_000)
        );
        assert_eq!(parse_test_acl("no figure here\n", "sse", "100", "4k"), None);
    }

    #[test]
    fn parses_a_result_line() {
        let m = parse_line(
            "PEERBENCH impl=rte_hash op=hit_b32 size=64K pages=4k cycles=33.21 min=32.90 max=35.02 samples=7 ops=32768\n",
        )
        .expect("a result line")
        .expect("valid");
        assert_eq!(
            m,
            Measurement {
                imp: "rte_hash".into(),
                op: "hit_b32".into(),
                size: "64K".into(),
                pages: "4k".into(),
                cycles: 33.21,
                min: 32.90,
                max: 35.02,
                samples: 7,
                ops: 32768,
            }
        );
    }

    #[test]
    fn optional_fields_default_and_order_does_not_matter() {
        let m = parse_line("PEERBENCH cycles=198.88 pages=2M size=- op=l3fwd_lpm impl=l3fwd").unwrap().unwrap();
        assert_eq!((m.min, m.max, m.samples, m.ops), (198.88, 198.88, 1, 0));
        assert_eq!(m.pages, "2M");
    }

    #[test]
    fn rejects_bad_lines() {
        assert_eq!(parse_line("EAL: Detected CPU lcores: 2"), None);
        assert_eq!(parse_line("cadence peer: injected 512 of 512 frames"), None);
        assert_eq!(parse_line("PEERBENCH impl=x op=y size=- pages=4k"), Some(Err(LineError::Missing("cycles"))));
        assert_eq!(
            parse_line("PEERBENCH impl=x op=y size=- pages=4k cycles=nan"),
            Some(Err(LineError::BadNumber("cycles")))
        );
        assert_eq!(
            parse_line("PEERBENCH impl=x op=y size=- pages=4k cycles=0"),
            Some(Err(LineError::BadNumber("cycles")))
        );
        assert_eq!(
            parse_line("PEERBENCH impl=x op=y size=- pages=4k cycles=-3"),
            Some(Err(LineError::BadNumber("cycles")))
        );
        assert_eq!(
            parse_line("PEERBENCH impl=x op=y pages=4k cycles=3 samples=many"),
            Some(Err(LineError::Missing("size")))
        );
        assert_eq!(
            parse_line("PEERBENCH impl=x op=y size=- pages=4k cycles=3 samples=many"),
            Some(Err(LineError::BadNumber("samples")))
        );
        assert_eq!(
            parse_line("PEERBENCH impl=x op=y garbage cycles=3"),
            Some(Err(LineError::NotKeyValue("garbage".into())))
        );
    }

    #[test]
    fn output_keeps_good_lines_and_names_bad_ones() {
        let (ms, bad) = parse_output(
            "EAL: noise\nPEERBENCH impl=a op=b size=1M pages=2M cycles=10\nPEERBENCH impl=a op=c size=1M pages=2M\nPEERINFO x=1\n",
        );
        assert_eq!(ms.len(), 1);
        assert_eq!(bad.len(), 1);
        assert!(bad[0].contains("cycles= is missing"), "{bad:?}");
    }

    #[test]
    fn parses_testpmd() {
        let out = "  +++++ Accumulated forward statistics for all ports+++++\n  RX-packets: 180175488\n\n  \
                   CPU cycles/packet=43.68 (total cycles=7870798345 / total io packets=180175488) at 2600 MHz Clock\n\nDone.\n";
        let m = parse_testpmd(out, "io", "4k").expect("figure");
        assert_eq!((m.imp.as_str(), m.op.as_str(), m.pages.as_str()), ("testpmd", "io", "4k"));
        assert_eq!((m.cycles, m.ops), (43.68, 180_175_488));
        let mac = "CPU cycles/packet=41.20 (busy cycles=100 / total macswap packets=7) at 2600 MHz Clock";
        assert_eq!(parse_testpmd(mac, "macswap", "2M").map(|m| (m.cycles, m.ops)), Some((41.20, 7)));
        assert_eq!(parse_testpmd("Press enter to exit\nBye...", "io", "4k"), None);
        assert_eq!(parse_testpmd("CPU cycles/packet=inf (x)", "io", "4k"), None);
    }
}
