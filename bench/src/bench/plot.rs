//! Hand-written SVG charts (no plotting crate): line charts with a legend and optional
//! logarithmic y axis, and grouped bar charts with min–max whiskers. Enough for the
//! bench's four figures; every chart is one self-contained `<svg>` document.

use std::fmt::Write;

const W: f64 = 860.0;
const H: f64 = 480.0;
const LEFT: f64 = 80.0;
const RIGHT: f64 = 250.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 60.0;
const COLORS: [&str; 10] =
    ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];

/// One line of a line chart.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Dashed (reference lines such as V̄).
    pub dashed: bool,
}

/// A line chart.
#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_y: bool,
    pub series: Vec<Series>,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// "Nice" tick values covering `lo..=hi`.
pub fn ticks(lo: f64, hi: f64, want: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater) || !lo.is_finite() || !hi.is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / want.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let mut v = Vec::new();
    let mut t = (lo / step).ceil() * step;
    while t <= hi + step * 1e-9 {
        v.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    v
}

/// A number for an axis label: 1.2M, 350k, 0.5.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e3 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" { "0".into() } else { s.to_string() }
}

fn frame(svg: &mut String, title: &str, x_label: &str, y_label: &str) {
    let _ = write!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">
<rect width="{W}" height="{H}" fill="white"/>
<text x="{}" y="22" font-size="15" text-anchor="middle">{}</text>
<text x="{}" y="{}" text-anchor="middle">{}</text>
<text transform="translate(18,{}) rotate(-90)" text-anchor="middle">{}</text>
"#,
        (LEFT + W - RIGHT) / 2.0,
        esc(title),
        (LEFT + W - RIGHT) / 2.0,
        H - 15.0,
        esc(x_label),
        (TOP + H - BOTTOM) / 2.0,
        esc(y_label)
    );
}

impl LineChart {
    /// The chart as an SVG document.
    pub fn svg(&self) -> String {
        let pts: Vec<(f64, f64)> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().copied())
            .filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log_y || *y > 0.0))
            .collect();
        let (mut x0, mut x1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
        let (mut y0, mut y1) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
        if pts.is_empty() {
            (x0, x1, y0, y1) = (0.0, 1.0, 0.0, 1.0);
        }
        if x1 <= x0 {
            x1 = x0 + 1.0;
        }
        let (ly0, ly1) = if self.log_y {
            (y0.max(1e-12).log10().floor(), y1.max(1e-12).log10().ceil().max(y0.max(1e-12).log10().floor() + 1.0))
        } else {
            y0 = y0.min(0.0);
            if y1 <= y0 {
                y1 = y0 + 1.0;
            }
            y1 *= 1.05;
            (y0, y1)
        };
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM;
        let sx = |x: f64| LEFT + (x - x0) / (x1 - x0) * pw;
        let sy = |y: f64| {
            let v = if self.log_y { y.max(1e-12).log10() } else { y };
            TOP + ph - (v - ly0) / (ly1 - ly0) * ph
        };
        let mut svg = String::new();
        frame(&mut svg, &self.title, &self.x_label, &self.y_label);
        let _ = writeln!(svg, r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>"##);
        for t in ticks(x0, x1, 8) {
            let x = sx(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{x:.1}" y1="{TOP}" x2="{x:.1}" y2="{:.1}" stroke="#ddd"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                TOP + ph,
                TOP + ph + 16.0,
                short(t)
            );
        }
        let yt: Vec<f64> =
            if self.log_y { (ly0 as i32..=ly1 as i32).map(|e| 10f64.powi(e)).collect() } else { ticks(ly0, ly1, 6) };
        for t in yt {
            let y = sy(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                short(t)
            );
        }
        for (i, s) in self.series.iter().enumerate() {
            let c = COLORS[i % COLORS.len()];
            let dash = if s.dashed { r#" stroke-dasharray="6 4""# } else { "" };
            let mut path = String::new();
            for &(x, y) in s.points.iter().filter(|(x, y)| x.is_finite() && y.is_finite() && (!self.log_y || *y > 0.0))
            {
                let _ = write!(path, "{}{:.1},{:.1}", if path.is_empty() { "M" } else { " L" }, sx(x), sy(y));
                if !s.dashed {
                    let _ = write!(svg, r#"<circle cx="{:.1}" cy="{:.1}" r="2.5" fill="{c}"/>"#, sx(x), sy(y));
                }
            }
            let _ = writeln!(svg, r#"<path d="{path}" fill="none" stroke="{c}" stroke-width="1.8"{dash}/>"#);
            let ly = TOP + 10.0 + i as f64 * 18.0;
            let lx = W - RIGHT + 12.0;
            let _ = writeln!(
                svg,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
                lx + 22.0,
                lx + 28.0,
                ly + 4.0,
                esc(&s.name)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

/// One group of a bar chart: a label and one bar per series (value, min, max).
#[derive(Debug, Clone)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Option<(f64, f64, f64)>>,
}

/// A grouped bar chart with min–max whiskers.
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    pub y_label: String,
    pub series: Vec<String>,
    pub groups: Vec<BarGroup>,
}

impl BarChart {
    /// The chart as an SVG document.
    pub fn svg(&self) -> String {
        let top = self.groups.iter().flat_map(|g| g.bars.iter().flatten().map(|b| b.2.max(b.0))).fold(0.0, f64::max);
        let y1 = if top > 0.0 { top * 1.08 } else { 1.0 };
        let pw = W - LEFT - RIGHT;
        let ph = H - TOP - BOTTOM - 40.0;
        let sy = |y: f64| TOP + ph - y / y1 * ph;
        let mut svg = String::new();
        frame(&mut svg, &self.title, "", &self.y_label);
        let _ = writeln!(svg, r##"<rect x="{LEFT}" y="{TOP}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>"##);
        for t in ticks(0.0, y1, 6) {
            let y = sy(t);
            let _ = writeln!(
                svg,
                r##"<line x1="{LEFT}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                LEFT + pw,
                LEFT - 6.0,
                y + 4.0,
                short(t)
            );
        }
        let gw = pw / self.groups.len().max(1) as f64;
        let bw = (gw * 0.8) / self.series.len().max(1) as f64;
        for (gi, g) in self.groups.iter().enumerate() {
            let gx = LEFT + gi as f64 * gw + gw * 0.1;
            for (si, b) in g.bars.iter().enumerate() {
                let Some((v, lo, hi)) = b else { continue };
                let c = COLORS[si % COLORS.len()];
                let x = gx + si as f64 * bw;
                let _ = writeln!(
                    svg,
                    r#"<rect x="{x:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{c}"/>"#,
                    sy(*v),
                    bw * 0.9,
                    (sy(0.0) - sy(*v)).max(0.0)
                );
                let mx = x + bw * 0.45;
                let _ = writeln!(
                    svg,
                    r#"<line x1="{mx:.1}" y1="{:.1}" x2="{mx:.1}" y2="{:.1}" stroke="black"/>"#,
                    sy(*lo),
                    sy(*hi)
                );
            }
            let lx = gx + gw * 0.4;
            let ly = TOP + ph + 12.0;
            let _ = writeln!(
                svg,
                r#"<text transform="translate({lx:.1},{ly:.1}) rotate(25)" font-size="10">{}</text>"#,
                esc(&g.label)
            );
        }
        for (i, s) in self.series.iter().enumerate() {
            let ly = TOP + 10.0 + i as f64 * 18.0;
            let lx = W - RIGHT + 12.0;
            let _ = writeln!(
                svg,
                r#"<rect x="{lx}" y="{}" width="14" height="10" fill="{}"/><text x="{}" y="{}">{}</text>"#,
                ly - 5.0,
                COLORS[i % COLORS.len()],
                lx + 20.0,
                ly + 4.0,
                esc(s)
            );
        }
        svg.push_str("</svg>\n");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_and_labels() {
        assert_eq!(ticks(0.0, 100.0, 5), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!(ticks(0.0, 1.0, 4), vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(ticks(5.0, 5.0, 4), vec![5.0]);
        assert_eq!(
            (short(1_250_000.0), short(350_000.0), short(0.5), short(0.0)),
            ("1.25M".into(), "350k".into(), "0.5".into(), "0".into())
        );
    }

    #[test]
    fn charts_are_svg_documents_with_every_series() {
        let c = LineChart {
            title: "CPU <vs> load".into(),
            x_label: "load %".into(),
            y_label: "CPUs".into(),
            log_y: false,
            series: vec![
                Series { name: "poll".into(), points: vec![(0.0, 1.0), (100.0, 1.0)], dashed: false },
                Series { name: "metronome".into(), points: vec![(0.0, 0.02), (100.0, f64::NAN)], dashed: true },
            ],
        };
        let s = c.svg();
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(s.contains(">poll</text>") && s.contains(">metronome</text>") && s.contains("CPU &lt;vs&gt; load"));
        assert!(!s.contains("NaN"));
        let log = LineChart { log_y: true, ..c }.svg();
        assert!(!log.contains("NaN") && !log.contains("inf"));
        let b = BarChart {
            title: "zero-loss".into(),
            y_label: "pps".into(),
            series: vec!["64B".into(), "imix".into()],
            groups: vec![BarGroup { label: "testpmd".into(), bars: vec![Some((3e5, 2.9e5, 3.1e5)), None] }],
        };
        let s = b.svg();
        assert!(s.contains(">testpmd</text>") && s.contains(">imix</text>") && s.matches("<rect").count() >= 4);
        assert!(
            LineChart {
                series: vec![],
                ..LineChart {
                    title: String::new(),
                    x_label: String::new(),
                    y_label: String::new(),
                    log_y: false,
                    series: vec![]
                }
            }
            .svg()
            .contains("</svg>")
        );
    }
}
