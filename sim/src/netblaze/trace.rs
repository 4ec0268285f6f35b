//! Traces: a seeded generator with the properties of the paper's traces, and replayed
//! captures (docs/NETBLAZE.md "Traces").
//!
//! The generator ([`TraceGen`]) produces packets in time order, chunk by chunk, so a
//! 60-second trace never sits in memory whole:
//!
//! - **Flow arrivals** are Poisson within each second at `λ_s = λ₀·m_s`, where the
//!   multiplier `m_s = (1 + A·sin(2πs/P))·e^{σZ_s − σ²/2}` varies over seconds (a slow wave
//!   and a log-normal step per second).
//! - **Flow sizes** (packets) are Pareto(α, x_m), truncated: many minnows, a few flows
//!   carrying most packets.
//! - **Pareto on/off**: a flow sends at its peak rate (log-normal, capped at the link's
//!   line rate) during ON periods and is silent during OFF periods; both are Pareto with the
//!   preset's means. A flow starts ON and ends when its packets are sent. Whales are the
//!   flows whose peak rate times ON time exceeds what one core finishes per epoch.
//!
//! Presets: [`Preset::Campus`] and [`Preset::Backbone`] ([`GenConfig::preset`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use cadence_core::rss::{DEFAULT_KEY, RssInput, ToeplitzTable};

use crate::rng::Rng;

/// One packet: arrival time and flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Packet {
    /// Arrival (ns from the start).
    pub t_ns: u64,
    /// Index into the trace's flows.
    pub flow: u32,
}

/// A flow's identity as the NIC and the ToR see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowInfo {
    /// IPv4 source.
    pub src: u32,
    /// IPv4 destination.
    pub dst: u32,
    /// Source port.
    pub sport: u16,
    /// Destination port.
    pub dport: u16,
    /// IP protocol.
    pub proto: u8,
    /// Toeplitz hash of the 4-tuple with the default key (`core::rss`).
    pub rss: u32,
}

impl FlowInfo {
    /// A flow with its RSS hash computed.
    pub fn new(table: &ToeplitzTable, src: u32, dst: u32, sport: u16, dport: u16, proto: u8) -> Self {
        let ports = matches!(proto, 6 | 17).then_some((sport, dport));
        let rss = table.hash(RssInput::v4(src.to_be_bytes(), dst.to_be_bytes(), ports).as_bytes());
        Self { src, dst, sport, dport, proto, rss }
    }
}

/// The trace presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// A campus uplink: fewer, larger flows, strong per-flow bursts.
    Campus,
    /// A backbone link: many more flows, higher flow churn, bursts from arrivals.
    Backbone,
}

impl Preset {
    /// Its name in files.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Campus => "campus",
            Preset::Backbone => "backbone",
        }
    }
}

/// The generator's parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct GenConfig {
    /// Seed of every random stream.
    pub seed: u64,
    /// Length (ns).
    pub duration_ns: u64,
    /// Mean flow arrivals per second `λ₀`.
    pub flows_per_s: f64,
    /// Amplitude `A` of the slow wave of arrival rates.
    pub wave_amplitude: f64,
    /// Period `P` of the wave (s).
    pub wave_period_s: f64,
    /// σ of the per-second log-normal step.
    pub step_sigma: f64,
    /// Pareto shape α of flow sizes.
    pub size_alpha: f64,
    /// Pareto scale x_m of flow sizes (packets).
    pub size_min: f64,
    /// Truncation of flow sizes (packets).
    pub size_max: f64,
    /// Median peak rate of a flow (packets/s).
    pub peak_median_pps: f64,
    /// σ of the log-normal peak rate.
    pub peak_sigma: f64,
    /// Line rate: the cap on a flow's peak rate (packets/s).
    pub line_pps: f64,
    /// Mean ON period (ns).
    pub on_mean_ns: f64,
    /// Mean OFF period (ns).
    pub off_mean_ns: f64,
    /// Pareto shape of ON and OFF periods.
    pub on_off_alpha: f64,
    /// Destination /24 prefixes the flows spread over (for the ingress mapper).
    pub dst_prefixes: u32,
}

impl GenConfig {
    /// The preset with `seed` and `duration_ns`.
    pub fn preset(p: Preset, seed: u64, duration_ns: u64) -> Self {
        match p {
            Preset::Campus => Self {
                seed,
                duration_ns,
                flows_per_s: 12_000.0,
                wave_amplitude: 0.3,
                wave_period_s: 20.0,
                step_sigma: 0.25,
                size_alpha: 1.05,
                size_min: 8.0,
                size_max: 2.0e6,
                peak_median_pps: 60_000.0,
                peak_sigma: 1.4,
                line_pps: 14.88e6,
                on_mean_ns: 1.0e6,
                off_mean_ns: 10.0e6,
                on_off_alpha: 1.4,
                dst_prefixes: 2048,
            },
            Preset::Backbone => Self {
                seed,
                duration_ns,
                flows_per_s: 30_000.0,
                wave_amplitude: 0.4,
                wave_period_s: 15.0,
                step_sigma: 0.35,
                size_alpha: 1.1,
                size_min: 6.0,
                size_max: 1.0e6,
                peak_median_pps: 40_000.0,
                peak_sigma: 1.6,
                line_pps: 59.52e6,
                on_mean_ns: 0.5e6,
                off_mean_ns: 5.0e6,
                on_off_alpha: 1.3,
                dst_prefixes: 8192,
            },
        }
    }
}

/// Pareto with shape `alpha` and mean `mean` (alpha > 1).
fn pareto_mean(r: &mut Rng, alpha: f64, mean: f64) -> f64 {
    let xm = mean * (alpha - 1.0) / alpha;
    xm / r.uniform().powf(1.0 / alpha)
}

/// A standard normal (Box–Muller).
fn normal(r: &mut Rng) -> f64 {
    (-2.0 * r.uniform().ln()).sqrt() * (std::f64::consts::TAU * r.uniform()).cos()
}

#[derive(Debug, Clone, Copy)]
struct Active {
    flow: u32,
    left: u64,
    next: f64,
    gap: f64,
    on_end: f64,
}

/// A source of packets in time order.
pub trait PacketSource {
    /// Every flow so far (indices are `Packet::flow`).
    fn flows(&self) -> &[FlowInfo];
    /// Appends the packets with `t_ns < until_ns` not yet returned, in time order; `false`
    /// once the source is exhausted.
    fn next_chunk(&mut self, until_ns: u64, out: &mut Vec<Packet>) -> bool;
    /// The trace's length (ns).
    fn duration_ns(&self) -> u64;
}

/// The seeded generator (module docs).
#[derive(Debug)]
pub struct TraceGen {
    cfg: GenConfig,
    toeplitz: ToeplitzTable,
    flows: Vec<FlowInfo>,
    active: Vec<Active>,
    free: Vec<u32>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    arrivals: Rng,
    shapes: Rng,
    next_arrival: f64,
    second: u64,
    rate: f64,
}

impl TraceGen {
    /// A generator (`Err` for parameters that would make no trace).
    pub fn new(cfg: GenConfig) -> anyhow::Result<Self> {
        anyhow::ensure!(cfg.duration_ns > 0, "trace: duration must be positive");
        anyhow::ensure!(cfg.flows_per_s > 0.0 && cfg.flows_per_s.is_finite(), "trace: flows_per_s must be positive");
        anyhow::ensure!(cfg.size_alpha > 0.0 && cfg.size_min >= 1.0, "trace: bad flow size distribution");
        anyhow::ensure!(cfg.on_off_alpha > 1.0, "trace: on_off_alpha must exceed 1");
        anyhow::ensure!(cfg.peak_median_pps > 0.0 && cfg.line_pps > 0.0, "trace: rates must be positive");
        let toeplitz = ToeplitzTable::try_new(&DEFAULT_KEY, 12).map_err(|e| anyhow::anyhow!("toeplitz: {e:?}"))?;
        let mut g = Self {
            arrivals: Rng::new(cfg.seed, 11),
            shapes: Rng::new(cfg.seed, 12),
            cfg,
            toeplitz,
            flows: Vec::new(),
            active: Vec::new(),
            free: Vec::new(),
            heap: BinaryHeap::new(),
            next_arrival: 0.0,
            second: 0,
            rate: 0.0,
        };
        g.rate = g.rate_for(0);
        g.next_arrival = g.arrivals.exp(1e9 / g.rate);
        Ok(g)
    }

    /// Flow arrivals per second in second `s`.
    fn rate_for(&mut self, s: u64) -> f64 {
        let c = &self.cfg;
        let wave = 1.0 + c.wave_amplitude * (std::f64::consts::TAU * s as f64 / c.wave_period_s.max(1e-9)).sin();
        let sigma = c.step_sigma;
        let step = (sigma * normal(&mut self.arrivals) - sigma * sigma / 2.0).exp();
        (c.flows_per_s * wave.max(0.05) * step).max(1.0)
    }

    fn new_flow(&mut self, t: f64) {
        let id = self.flows.len() as u32;
        let r = &mut self.shapes;
        let c = &self.cfg;
        let src = 0x0A00_0000 | (r.next_u64() as u32 & 0x00FF_FFFF);
        let prefix = (r.next_u64() % u64::from(c.dst_prefixes.max(1))) as u32;
        let dst = 0xAC10_0000u32.wrapping_add(prefix << 8) | (r.next_u64() as u32 & 0xFF);
        let sport = 1024 + (r.next_u64() % 60_000) as u16;
        let dport = [80u16, 443, 53, 8080][(r.next_u64() % 4) as usize];
        let proto = if dport == 53 { 17 } else { 6 };
        let size = (c.size_min / r.uniform().powf(1.0 / c.size_alpha)).min(c.size_max).round().max(1.0) as u64;
        let peak = (c.peak_median_pps * (c.peak_sigma * normal(r)).exp()).min(c.line_pps).max(1.0);
        let on = pareto_mean(r, c.on_off_alpha, c.on_mean_ns);
        self.flows.push(FlowInfo::new(&self.toeplitz, src, dst, sport, dport, proto));
        let a = Active { flow: id, left: size, next: t, gap: 1e9 / peak, on_end: t + on };
        let slot = match self.free.pop() {
            Some(s) => {
                self.active[s as usize] = a;
                s
            }
            None => {
                self.active.push(a);
                (self.active.len() - 1) as u32
            }
        };
        self.heap.push(Reverse((t as u64, slot)));
    }
}

impl PacketSource for TraceGen {
    fn flows(&self) -> &[FlowInfo] {
        &self.flows
    }

    fn duration_ns(&self) -> u64 {
        self.cfg.duration_ns
    }

    fn next_chunk(&mut self, until_ns: u64, out: &mut Vec<Packet>) -> bool {
        let until_ns = until_ns.min(self.cfg.duration_ns);
        let end = until_ns as f64;
        let start_len = out.len();
        while self.next_arrival < end {
            let t = self.next_arrival;
            self.new_flow(t);
            let mut next = t + self.arrivals.exp(1e9 / self.rate);
            // A new second: a new rate (the gap is redrawn from the second's start).
            while (next / 1e9) as u64 > self.second {
                self.second += 1;
                self.rate = self.rate_for(self.second);
                next = (self.second as f64 * 1e9).max(t) + self.arrivals.exp(1e9 / self.rate);
            }
            self.next_arrival = next;
        }
        while let Some(&Reverse((t, slot))) = self.heap.peek() {
            if t >= until_ns {
                break;
            }
            self.heap.pop();
            let Some(mut a) = self.active.get(slot as usize).copied() else { continue };
            while a.left > 0 && a.next < end {
                if a.next < a.on_end {
                    out.push(Packet { t_ns: a.next as u64, flow: a.flow });
                    a.left -= 1;
                    a.next += a.gap;
                } else {
                    let c = &self.cfg;
                    let off = pareto_mean(&mut self.shapes, c.on_off_alpha, c.off_mean_ns);
                    let on = pareto_mean(&mut self.shapes, c.on_off_alpha, c.on_mean_ns);
                    a.next = a.on_end + off;
                    a.on_end = a.next + on;
                }
            }
            if a.left > 0 && a.next < self.cfg.duration_ns as f64 {
                self.active[slot as usize] = a;
                self.heap.push(Reverse((a.next as u64, slot)));
            } else {
                self.free.push(slot);
            }
        }
        out[start_len..].sort_unstable();
        until_ns < self.cfg.duration_ns
    }
}

/// A trace held in memory (a replayed capture, or a short generated one in tests).
#[derive(Debug, Clone, Default)]
pub struct MemTrace {
    /// The flows.
    pub flows: Vec<FlowInfo>,
    /// The packets, in time order.
    pub packets: Vec<Packet>,
    next: usize,
}

impl MemTrace {
    /// A trace from flows and packets (sorted here).
    pub fn new(flows: Vec<FlowInfo>, mut packets: Vec<Packet>) -> Self {
        packets.sort_unstable();
        Self { flows, packets, next: 0 }
    }
}

impl PacketSource for MemTrace {
    fn flows(&self) -> &[FlowInfo] {
        &self.flows
    }

    fn duration_ns(&self) -> u64 {
        self.packets.last().map_or(0, |p| p.t_ns + 1)
    }

    fn next_chunk(&mut self, until_ns: u64, out: &mut Vec<Packet>) -> bool {
        let rest = self.packets.get(self.next..).unwrap_or(&[]);
        let n = rest.partition_point(|p| p.t_ns < until_ns);
        out.extend_from_slice(&rest[..n]);
        self.next += n;
        self.next < self.packets.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(g: &mut TraceGen) -> Vec<Packet> {
        let mut out = Vec::new();
        let mut t = 0;
        while t < g.duration_ns() {
            t += 10_000_000;
            g.next_chunk(t, &mut out);
        }
        out
    }

    #[test]
    fn generator_is_deterministic_sorted_and_heavy_tailed() {
        let cfg = GenConfig::preset(Preset::Campus, 3, 500_000_000);
        let a = all(&mut TraceGen::new(cfg.clone()).expect("gen"));
        let mut g = TraceGen::new(cfg).expect("gen");
        let b = all(&mut g);
        assert_eq!(a, b);
        assert!(a.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
        assert!(a.len() > 100_000, "{} packets", a.len());
        let mut sizes = vec![0u64; g.flows().len()];
        for p in &a {
            sizes[p.flow as usize] += 1;
        }
        sizes.sort_unstable_by(|x, y| y.cmp(x));
        let top: u64 = sizes.iter().take(sizes.len() / 100).sum();
        assert!(top as f64 > 0.2 * a.len() as f64, "the top 1 % of flows carry {top} of {}", a.len());
        let different = all(&mut TraceGen::new(GenConfig::preset(Preset::Campus, 4, 500_000_000)).expect("gen"));
        assert_ne!(a.len(), different.len());
    }

    #[test]
    fn mem_trace_returns_chunks_in_order() {
        let pk = |t, flow| Packet { t_ns: t, flow };
        let mut m = MemTrace::new(vec![], vec![pk(5, 0), pk(1, 1), pk(9, 0)]);
        let mut out = vec![];
        assert!(m.next_chunk(6, &mut out));
        assert_eq!(out, [pk(1, 1), pk(5, 0)]);
        assert!(!m.next_chunk(100, &mut out));
        assert_eq!(out.len(), 3);
    }
}
