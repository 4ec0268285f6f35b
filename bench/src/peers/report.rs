//! From accepted rounds to the table of ratios, its CSV files and its SVG chart.

use std::fmt::Write as _;

use super::line::Measurement;
use super::plan::{Comparison, PEER_ONLY, Pages, comparisons};
use super::stats::{Spread, ratio, spread};

/// One measurement of one round.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub round: usize,
    /// The page size the run asked for.
    pub pages: Pages,
    /// The program run's label.
    pub job: String,
    /// CPUs other processes used during the run.
    pub others_cpus: f64,
    pub m: Measurement,
}

/// One line of the table: a comparison at one page size, over the accepted rounds.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub cmp: Comparison,
    pub pages: Pages,
    /// Cadence / peer, one per accepted round that has both figures.
    pub ratios: Vec<f64>,
    pub ratio: Option<Spread>,
    pub cadence: Option<Spread>,
    pub peer: Option<Spread>,
}

fn find<'a>(rs: &'a [Record], round: usize, pages: Pages, imp: &str, op: &str, size: &str) -> Option<&'a Record> {
    rs.iter().find(|r| {
        r.round == round
            && r.pages == pages
            && r.m.imp == imp
            && r.m.op == op
            && r.m.size == size
            && r.m.pages == pages.label()
    })
}

/// The rows of the table from the records of the `accepted` rounds only (a record whose
/// program got other pages than asked, e.g. `thp`, never counts).
pub fn rows(records: &[Record], accepted: &[usize], pages: &[Pages]) -> Vec<Row> {
    let mut out = Vec::new();
    for cmp in comparisons() {
        for &p in pages {
            let (mut ratios, mut cs, mut ps) = (Vec::new(), Vec::new(), Vec::new());
            for &r in accepted {
                let c = find(records, r, p, "cadence", cmp.op, cmp.size);
                let q = find(records, r, p, cmp.peer, cmp.peer_op, cmp.size);
                if let (Some(c), Some(q)) = (c, q)
                    && let Some(x) = ratio(c.m.cycles, q.m.cycles)
                {
                    ratios.push(x);
                    cs.push(c.m.cycles);
                    ps.push(q.m.cycles);
                }
            }
            out.push(Row {
                cmp: cmp.clone(),
                pages: p,
                ratio: spread(&ratios),
                cadence: spread(&cs),
                peer: spread(&ps),
                ratios,
            });
        }
    }
    out
}

/// The verdict on a row with a target: `met (0.74 ≤ 0.8)`, `missed (1.12 > 0.8)`, or `no figure`.
pub fn verdict(row: &Row) -> Option<String> {
    let t = row.cmp.target?;
    Some(match row.ratio {
        None => "no figure".to_string(),
        Some(s) if s.median <= t.limit => format!("met ({:.2} ≤ {})", s.median, t.limit),
        Some(s) => format!("missed ({:.2} > {})", s.median, t.limit),
    })
}

fn cell(s: Option<Spread>) -> String {
    s.map_or("–".into(), |s| format!("**{:.2}** [{:.2}–{:.2}]", s.median, s.min, s.max))
}

fn cycles(c: Option<Spread>, p: Option<Spread>) -> String {
    match (c, p) {
        (Some(c), Some(p)) => format!("{:.1} / {:.1}", c.median, p.median),
        _ => "–".into(),
    }
}

fn peer_name(c: &Comparison) -> String {
    if c.peer_op == c.op { c.peer.to_string() } else { format!("{} {}", c.peer, c.peer_op) }
}

/// The table (Markdown): one line per comparison, a column pair per page size.
pub fn table(rows: &[Row], records: &[Record], accepted: &[usize], pages: &[Pages]) -> String {
    let mut s = String::new();
    let head: Vec<String> = pages
        .iter()
        .map(|p| format!("{} ratio, median [min–max] | {} cycles Cadence / peer", p.label(), p.label()))
        .collect();
    let _ = writeln!(s, "| Cadence op | size | peer | {} | target |", head.join(" | "));
    let _ = writeln!(s, "|---|---|---|{}---|", "---|---|".repeat(pages.len()));
    for cmp in comparisons() {
        let mine: Vec<&Row> =
            rows.iter().filter(|r| r.cmp.op == cmp.op && r.cmp.size == cmp.size && r.cmp.peer == cmp.peer).collect();
        let cols: Vec<String> = pages
            .iter()
            .map(|p| match mine.iter().find(|r| r.pages == *p) {
                Some(r) => format!("{} | {}", cell(r.ratio), cycles(r.cadence, r.peer)),
                None => "– | –".into(),
            })
            .collect();
        let target = match cmp.target {
            None => "–".to_string(),
            Some(t) => {
                let v: Vec<String> =
                    mine.iter().filter_map(|r| verdict(r).map(|v| format!("{}: {v}", r.pages.label()))).collect();
                format!("≤ {}: {}", t.limit, v.join("; "))
            }
        };
        let _ = writeln!(s, "| {} | {} | {} | {} | {target} |", cmp.op, cmp.size, peer_name(&cmp), cols.join(" | "));
    }
    for (imp, op, size, why) in PEER_ONLY {
        let cols: Vec<String> = pages
            .iter()
            .map(|p| {
                let xs: Vec<f64> =
                    accepted.iter().filter_map(|&r| find(records, r, *p, imp, op, size)).map(|r| r.m.cycles).collect();
                match spread(&xs) {
                    Some(sp) => format!("– | peer {:.1} [{:.1}–{:.1}]", sp.median, sp.min, sp.max),
                    None => "– | –".into(),
                }
            })
            .collect();
        let _ = writeln!(s, "| {why} | {size} | {imp} {op} | {} | – |", cols.join(" | "));
    }
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_string() }
}

/// Every measurement of every round, accepted or not.
pub fn measurements_csv(records: &[Record], accepted: &[usize]) -> String {
    let mut s =
        String::from("round,accepted,others_cpus,pages_asked,job,impl,op,size,pages,cycles,min,max,samples,ops\n");
    for r in records {
        let m = &r.m;
        let _ = writeln!(
            s,
            "{},{},{:.3},{},{},{},{},{},{},{},{},{},{},{}",
            r.round,
            accepted.contains(&r.round),
            r.others_cpus,
            r.pages.label(),
            csv_field(&r.job),
            csv_field(&m.imp),
            csv_field(&m.op),
            csv_field(&m.size),
            csv_field(&m.pages),
            m.cycles,
            m.min,
            m.max,
            m.samples,
            m.ops
        );
    }
    s
}

/// The table's figures, one line per row.
pub fn ratios_csv(rows: &[Row]) -> String {
    let mut s = String::from(
        "op,size,peer,peer_op,pages,rounds,ratio_min,ratio_median,ratio_max,cadence_median,peer_median,target,verdict\n",
    );
    for r in rows {
        let f = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.4}"));
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{},{},{},{},{}",
            r.cmp.op,
            r.cmp.size,
            r.cmp.peer,
            r.cmp.peer_op,
            r.pages.label(),
            r.ratios.len(),
            f(r.ratio.map(|x| x.min)),
            f(r.ratio.map(|x| x.median)),
            f(r.ratio.map(|x| x.max)),
            f(r.cadence.map(|x| x.median)),
            f(r.peer.map(|x| x.median)),
            r.cmp.target.map_or(String::new(), |t| t.limit.to_string()),
            csv_field(&verdict(r).unwrap_or_default())
        );
    }
    s
}

/// A dot-and-whisker chart of the ratios (median, min–max), parity at 1 and the targets marked.
pub fn svg(rows: &[Row], title: &str) -> String {
    let shown: Vec<&Row> = rows.iter().filter(|r| r.ratio.is_some()).collect();
    let (left, width, row_h, top) = (330.0, 520.0, 18.0, 46.0);
    let xmax = shown.iter().filter_map(|r| r.ratio.map(|s| s.max)).fold(2.0_f64, f64::max).ceil();
    let x = |v: f64| left + v / xmax * width;
    let height = top + row_h * shown.len() as f64 + 40.0;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{:.0}\" height=\"{height:.0}\" font-family=\"sans-serif\" font-size=\"11\">",
        left + width + 30.0
    );
    let _ = writeln!(s, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(s, "<text x=\"10\" y=\"18\" font-size=\"13\">{}</text>", xml(title));
    let _ = writeln!(
        s,
        "<text x=\"10\" y=\"34\" fill=\"#555\">Cadence / peer, TSC cycles per op; dot = median, bar = min–max over rounds; red tick = target; below 1 Cadence is faster</text>"
    );
    let bottom = top + row_h * shown.len() as f64;
    let mut v = 0.0;
    while v <= xmax + 1e-9 {
        let _ = writeln!(
            s,
            "<line x1=\"{0:.1}\" y1=\"{top}\" x2=\"{0:.1}\" y2=\"{bottom}\" stroke=\"{1}\"/><text x=\"{0:.1}\" y=\"{2}\" text-anchor=\"middle\">{v}</text>",
            x(v),
            if (v - 1.0).abs() < 1e-9 { "#000" } else { "#ddd" },
            bottom + 14.0
        );
        v += if xmax > 4.0 { 1.0 } else { 0.5 };
    }
    for (i, r) in shown.iter().enumerate() {
        let y = top + row_h * (i as f64 + 0.5);
        let Some(sp) = r.ratio else { continue };
        let label = format!("{} {} vs {} ({})", r.cmp.op, r.cmp.size, peer_name(&r.cmp), r.pages.label());
        let color = if r.pages == Pages::Small { "#1f77b4" } else { "#ff7f0e" };
        let _ = writeln!(
            s,
            "<text x=\"{:.0}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            left - 8.0,
            y + 4.0,
            xml(&label)
        );
        let _ = writeln!(
            s,
            "<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"{color}\" stroke-width=\"2\"/>",
            x(sp.min),
            x(sp.max)
        );
        let _ = writeln!(s, "<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"{color}\"/>", x(sp.median));
        if let Some(t) = r.cmp.target {
            let _ = writeln!(
                s,
                "<line x1=\"{0:.1}\" y1=\"{1:.1}\" x2=\"{0:.1}\" y2=\"{2:.1}\" stroke=\"red\" stroke-width=\"2\"/>",
                x(t.limit),
                y - 7.0,
                y + 7.0
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(round: usize, pages: Pages, imp: &str, op: &str, size: &str, cycles: f64) -> Record {
        Record {
            round,
            pages,
            job: format!("{imp} {size}"),
            others_cpus: 0.0,
            m: Measurement {
                imp: imp.into(),
                op: op.into(),
                size: size.into(),
                pages: pages.label().into(),
                cycles,
                min: cycles,
                max: cycles,
                samples: 7,
                ops: 1,
            },
        }
    }

    fn hit_1m(rows: &[Row], pages: Pages) -> &Row {
        rows.iter()
            .find(|r| r.cmp.op == "hit_b32" && r.cmp.size == "1M" && r.cmp.peer == "rte_hash" && r.pages == pages)
            .expect("row")
    }

    #[test]
    fn ratios_come_only_from_accepted_rounds_with_both_figures() {
        let s = Pages::Small;
        let mut rs = Vec::new();
        for (round, c, p) in [(0, 80.0, 100.0), (1, 90.0, 100.0), (2, 500.0, 100.0), (3, 70.0, 100.0)] {
            rs.push(rec(round, s, "cadence", "hit_b32", "1M", c));
            rs.push(rec(round, s, "rte_hash", "hit_b32", "1M", p));
        }
        // Round 4: the peer's figure is missing (its program failed).
        rs.push(rec(4, s, "cadence", "hit_b32", "1M", 10.0));
        // Round 2 was refused by the noise guard.
        let rows = rows(&rs, &[0, 1, 3, 4], &[s]);
        let r = hit_1m(&rows, s);
        assert_eq!(r.ratios, vec![0.8, 0.9, 0.7]);
        assert_eq!(r.ratio, Some(Spread { min: 0.7, median: 0.8, max: 0.9, n: 3 }));
        assert_eq!(r.cadence.map(|c| c.median), Some(80.0));
        assert_eq!(verdict(r).as_deref(), Some("met (0.80 ≤ 0.8)"));
    }

    #[test]
    fn other_pages_than_asked_never_count() {
        let h = Pages::Huge;
        let mut c = rec(0, h, "cadence", "hit_b32", "1M", 80.0);
        c.m.pages = "thp".into();
        let rs = vec![c, rec(0, h, "rte_hash", "hit_b32", "1M", 100.0)];
        let rows = rows(&rs, &[0], &[h]);
        let r = hit_1m(&rows, h);
        assert!(r.ratios.is_empty());
        assert_eq!(verdict(r).as_deref(), Some("no figure"));
    }

    #[test]
    fn the_ring_row_is_cadence_over_rte_ring() {
        let s = Pages::Small;
        let rs =
            vec![rec(0, s, "cadence", "ring_spsc_b32", "-", 10.0), rec(0, s, "rte_ring", "ring_spsc_b32", "-", 8.0)];
        let rows = rows(&rs, &[0], &[s]);
        let r = rows.iter().find(|r| r.cmp.op == "ring_spsc_b32" && r.pages == s).expect("ring row");
        assert_eq!(r.ratios, vec![1.25]);
        assert_eq!(verdict(r), None, "no target for the ring");
        let t = table(&rows, &rs, &[0], &[s]);
        assert!(t.contains("| ring_spsc_b32 | - | rte_ring | **1.25** [1.25–1.25] | 10.0 / 8.0 | – |"), "{t}");
    }

    #[test]
    fn the_table_shows_verdicts_and_the_peer_only_figures() {
        let s = Pages::Small;
        let rs = vec![
            rec(0, s, "cadence", "hit_b32", "1M", 120.0),
            rec(0, s, "rte_hash", "hit_b32", "1M", 100.0),
            rec(0, s, "rte_ring", "ring_spsc_b32", "-", 12.5),
        ];
        let rows = rows(&rs, &[0], &[s]);
        let t = table(&rows, &rs, &[0], &[s]);
        assert!(
            t.contains(
                "| hit_b32 | 1M | rte_hash | **1.20** [1.20–1.20] | 120.0 / 100.0 | ≤ 0.8: 4k: missed (1.20 > 0.8) |"
            ),
            "{t}"
        );
        // The ring is a ratio row now; this round has only the peer's figure.
        assert!(t.contains("| ring_spsc_b32 | - | rte_ring | – | – |"), "{t}");
        let csv = ratios_csv(&rows);
        assert!(
            csv.contains(
                "hit_b32,1M,rte_hash,hit_b32,4k,1,1.2000,1.2000,1.2000,120.0000,100.0000,0.8,missed (1.20 > 0.8)"
            ),
            "{csv}"
        );
        let svg = svg(&rows, "t");
        assert!(svg.starts_with("<svg") && svg.contains("<circle"), "{svg}");
        let m = measurements_csv(&rs, &[]);
        assert_eq!(m.lines().count(), 4);
        assert!(m.lines().nth(1).is_some_and(|l| l.starts_with("0,false,")), "{m}");
    }
}
