//! The sink: classifies every frame that comes back out of the forwarder.
//!
//! Classes (each received frame lands in exactly one):
//! - `received`: intact, right port, right rewrite, first copy (reordered ones too);
//! - `duplicated`: a copy of a frame already seen;
//! - `reordered`: first copy, but a later frame of its flow came first (also `received`);
//! - `corrupted`: our tag, but the CRC or the byte-exact comparison fails;
//! - `misdirected`: intact but out of the wrong port;
//! - `bad_rewrite`: intact, right port, wrong MAC addresses;
//! - `unexpected`: not ours (no tag, unknown flow, a sequence number never sent);
//! - `not_dropped`: a frame of a flow the chain should drop (e.g. ACL deny);
//! - `bad_nf`: intact and identified, but an NF's rewrite is not what the chain's
//!   configuration says (LB destination outside the VIP's backends or changing within a
//!   flow, payload not encrypted, bad checksum after a rewrite).
//!
//! With a chain ([`Expectations`]) the expected frame is the generated one with the
//! chain's rewrites applied (checksum fields are checked for validity instead of bytes);
//! an encrypting chain's frames are decrypted first.
//!
//! `lost` = sent − frames identified at least once (intact tag and CRC), counted at the
//! end, over the flows the chain should deliver; while running, that difference is "in
//! flight". Frames of flows the chain drops are `expected_drops`, not losses.

use std::time::Instant;

use serde::Serialize;

use super::expect::Expectations;
use super::frame::{self, Flow, TS_MASK};
use super::stats::Latencies;
use crate::protocol::Mac;

/// The MACs of the two-port rig.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Macs {
    /// MAC of NIC `i` inside the guest.
    pub nic: [Mac; 2],
    /// `peer{i}`: the host side of port `i`, destination of frames leaving port `i`.
    pub peer: [Mac; 2],
}

impl Macs {
    /// The MACs `cargo xtask run` and the tests assign.
    pub const DEFAULT: Macs = Macs {
        nic: [Mac([0x52, 0x54, 0x00, 0xca, 0xde, 0x00]), Mac([0x52, 0x54, 0x00, 0xca, 0xde, 0x01])],
        peer: [Mac([0x02, 0x00, 0x00, 0xca, 0xde, 0x10]), Mac([0x02, 0x00, 0x00, 0xca, 0xde, 0x11])],
    };
}

/// Counts per class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Classes {
    pub sent: u64,
    pub sent_bytes: u64,
    pub received: u64,
    pub received_bytes: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub corrupted: u64,
    pub misdirected: u64,
    pub bad_rewrite: u64,
    pub unexpected: u64,
    /// Frames sent on flows the chain drops (not losses).
    pub expected_drops: u64,
    /// Frames of such flows that came back anyway.
    pub not_dropped: u64,
    /// Frames whose NF rewrite disagrees with the chain's configuration.
    pub bad_nf: u64,
}

impl Classes {
    /// No frame lost, corrupted, misdirected, duplicated, reordered, badly rewritten or
    /// unexpected.
    pub fn clean(&self) -> bool {
        self.lost == 0
            && self.duplicated == 0
            && self.reordered == 0
            && self.corrupted == 0
            && self.misdirected == 0
            && self.bad_rewrite == 0
            && self.unexpected == 0
            && self.not_dropped == 0
            && self.bad_nf == 0
    }

    /// Names of the non-zero failure classes.
    pub fn failures(&self) -> Vec<String> {
        [
            ("lost", self.lost),
            ("duplicated", self.duplicated),
            ("reordered", self.reordered),
            ("corrupted", self.corrupted),
            ("misdirected", self.misdirected),
            ("bad_rewrite", self.bad_rewrite),
            ("unexpected", self.unexpected),
            ("not_dropped", self.not_dropped),
            ("bad_nf", self.bad_nf),
        ]
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(k, n)| format!("{k}={n}"))
        .collect()
    }
}

/// What happened to one received frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// An IPFIX export frame for the rig's collector ([`Checker::ipfix`]).
    Exported,
    Received,
    Reordered,
    Duplicated,
    Corrupted,
    Misdirected,
    BadRewrite,
    Unexpected,
    NotDropped,
    BadNf,
}

#[derive(Debug, Default)]
struct FlowState {
    sent: u32,
    /// IP bytes (header included) of the frames sent, as a flow meter counts them.
    sent_ip_bytes: u64,
    /// The 5-tuple of the frames sent.
    key: Option<cadence_core::parse::FlowKey>,
    /// Bit per sequence number: identified at least once.
    seen: Vec<u64>,
    seen_count: u64,
    /// Highest sequence number accepted so far, +1 (0 = none).
    next_expected: u32,
    /// LB: the destination (address bytes and port) the flow was sent to.
    backend: Option<(Vec<u8>, u16)>,
    /// NAT: the source port the flow was given.
    nat_port: Option<u16>,
    /// L3fwd with alternative next hops ([`Checker::allow_next_hop`]): (sequence number,
    /// 0 = the configured next hop, i = alternative i − 1) of each frame identified.
    hops: Vec<(u32, u8)>,
}

impl FlowState {
    fn mark(&mut self, seq: u32) -> bool {
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if self.seen.len() <= w {
            self.seen.resize(w + 1, 0);
        }
        let fresh = self.seen[w] & (1 << b) == 0;
        self.seen[w] |= 1 << b;
        if fresh {
            self.seen_count += 1;
        }
        fresh
    }
}

/// Registers sent frames and checks received ones.
#[derive(Debug)]
pub struct Checker {
    flows: Vec<Flow>,
    state: Vec<FlowState>,
    macs: Macs,
    epoch: Instant,
    classes: Classes,
    /// Latencies of `received` frames, whole run.
    pub latency: Latencies,
    /// Latencies since the last [`Checker::take_window`].
    window: Latencies,
    /// A few examples of failures, for the report.
    pub examples: Vec<String>,
    /// What the chain does to each flow (`None`: plain L2 forwarding).
    expect: Option<Expectations>,
    /// The IPFIX collector export frames go to, when the chain exports.
    pub ipfix: Option<super::ipfix::Collector>,
    /// Per flow, next hops a route change may send it to besides the configured one.
    alt_hops: Vec<Vec<cadence_core::nf::l3fwd::NextHop>>,
}

const MAX_EXAMPLES: usize = 20;

impl Checker {
    /// A checker for `flows` (flow ids must be their indices), timestamps relative to
    /// `epoch`.
    pub fn new(flows: Vec<Flow>, macs: Macs, epoch: Instant) -> Checker {
        let state = flows.iter().map(|_| FlowState::default()).collect();
        Checker {
            flows,
            state,
            macs,
            epoch,
            classes: Classes::default(),
            latency: Latencies::default(),
            window: Latencies::default(),
            examples: Vec::new(),
            expect: None,
            ipfix: None,
            alt_hops: Vec::new(),
        }
    }

    /// A checker that expects what a chain does ([`Expectations`] over the same flows).
    pub fn with_expectations(mut self, e: Expectations) -> Checker {
        self.expect = Some(e);
        self
    }

    /// The chain's expectations, if any.
    pub fn expectations(&self) -> Option<&Expectations> {
        self.expect.as_ref()
    }

    /// Flows that sent frames the chain does not drop (an exporter meters each of them).
    pub fn forwarded_flows(&self) -> usize {
        self.state.iter().enumerate().filter(|(i, s)| s.sent > 0 && !self.dropped(*i)).count()
    }

    /// Whether the chain drops flow `id`.
    fn dropped(&self, id: usize) -> bool {
        self.expect.as_ref().and_then(|e| e.flows.get(id)).is_some_and(|f| f.drop.is_some())
    }

    /// Frames sent on flows that match `pred` (by flow expectation; all flows without a
    /// chain count as passing unchanged).
    pub fn sent_where(&self, pred: impl Fn(&super::expect::FlowExpect) -> bool) -> u64 {
        let plain = super::expect::FlowExpect::default();
        self.state
            .iter()
            .enumerate()
            .filter(|(i, _)| pred(self.expect.as_ref().and_then(|e| e.flows.get(*i)).unwrap_or(&plain)))
            .map(|(_, s)| u64::from(s.sent))
            .sum()
    }

    /// Per flow that sent anything: its 5-tuple, frames sent and their IP bytes (what a flow
    /// meter on the ingress side counts).
    pub fn sent_totals(&self) -> Vec<(cadence_core::parse::FlowKey, u64, u64)> {
        self.state.iter().filter_map(|s| s.key.map(|k| (k, u64::from(s.sent), s.sent_ip_bytes))).collect()
    }

    /// The flows.
    pub fn flows(&self) -> &[Flow] {
        &self.flows
    }

    /// The MACs.
    pub fn macs(&self) -> Macs {
        self.macs
    }

    /// ns since the epoch, for TX timestamps.
    pub fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Builds the next frame of `flow` (length `len`, timestamped now), registers it as
    /// sent, and returns (ingress port, frame).
    pub fn next_frame(&mut self, flow: u16, len: usize) -> Option<(usize, Vec<u8>)> {
        let ts = self.now_ns();
        let f = self.flows.get(usize::from(flow))?;
        let st = self.state.get_mut(usize::from(flow))?;
        let p = f.ingress;
        let frame = frame::build(f, st.sent, len, ts, self.macs.nic[p], self.macs.peer[p]);
        if let Ok(parsed) = cadence_core::parse::parse(&frame) {
            st.sent_ip_bytes += u64::from(parsed.l3_len);
            st.key = Some(parsed.flow);
        }
        st.sent += 1;
        self.classes.sent += 1;
        self.classes.sent_bytes += frame.len() as u64;
        Some((p, frame))
    }

    /// Checks one frame that came out of `port`.
    pub fn receive(&mut self, port: usize, f: &[u8]) -> Verdict {
        if let Some(c) = self.ipfix.as_mut().filter(|c| c.wants(f)) {
            c.receive(f);
            return Verdict::Exported;
        }
        let now = self.now_ns();
        let v = self.classify(port, f, now);
        let c = &mut self.classes;
        match v {
            Verdict::Received | Verdict::Reordered => {
                c.received += 1;
                c.received_bytes += f.len() as u64;
                if v == Verdict::Reordered {
                    c.reordered += 1;
                }
            }
            Verdict::Duplicated => c.duplicated += 1,
            Verdict::Corrupted => c.corrupted += 1,
            Verdict::Misdirected => c.misdirected += 1,
            Verdict::BadRewrite => c.bad_rewrite += 1,
            Verdict::Unexpected => c.unexpected += 1,
            Verdict::NotDropped => c.not_dropped += 1,
            Verdict::BadNf => c.bad_nf += 1,
            // `classify` never answers it (export frames are taken before).
            Verdict::Exported => {}
        }
        if v != Verdict::Received && self.examples.len() < MAX_EXAMPLES {
            let head: Vec<String> = f.iter().take(24).map(|b| format!("{b:02x}")).collect();
            self.examples.push(format!("{v:?}: port {port}, {} B, starts {}", f.len(), head.join("")));
        }
        v
    }

    fn classify(&mut self, port: usize, received: &[u8], now: u64) -> Verdict {
        // An encrypting chain: the tag is encrypted too; decrypt first.
        let plain = self.expect.as_mut().and_then(|e| e.decrypt(port, received));
        let f = plain.as_deref().unwrap_or(received);
        let Some(tag) = frame::read_tag(f) else {
            return Verdict::Unexpected;
        };
        let Some(flow) = self.flows.get(usize::from(tag.flow)) else {
            return Verdict::Unexpected;
        };
        let fe = self.expect.as_ref().and_then(|e| e.flow(tag.flow)).cloned().unwrap_or_default();
        if f.len() < flow.min_len() {
            return Verdict::Corrupted;
        }
        // Header rewrites change bytes the CRC covers; the byte comparison below checks them.
        if !fe.rewrites_headers() && frame::frame_crc(flow.kind, f) != Some(tag.crc) {
            return Verdict::Corrupted;
        }
        if tag.seq >= self.state[usize::from(tag.flow)].sent {
            return Verdict::Unexpected;
        }
        if fe.drop.is_some() {
            return Verdict::NotDropped;
        }
        let (mut egress, mut dst_mac) = match fe.next_hop {
            Some(h) => (usize::from(h.port), crate::protocol::Mac(h.mac)),
            None => (flow.egress(), self.macs.peer[flow.egress()]),
        };
        // A route changed live: the frame may have gone to one of the flow's alternatives.
        let alts = self.alt_hops.get(usize::from(tag.flow)).filter(|a| !a.is_empty() && fe.next_hop.is_some());
        let track_hops = alts.is_some();
        let mut which = 0u8;
        for (i, h) in alts.into_iter().flatten().enumerate() {
            if usize::from(h.port) == port && f.get(..6) == Some(&h.mac[..]) {
                (egress, dst_mac, which) = (usize::from(h.port), crate::protocol::Mac(h.mac), i as u8 + 1);
                break;
            }
        }
        let mut expected = if fe.p4 {
            // The program's output for the frame as it was sent; the port's own MAC as source.
            let i = flow.ingress.min(1);
            let sent = frame::build(flow, tag.seq, f.len(), tag.ts_ns, self.macs.nic[i], self.macs.peer[i]);
            let Some(Ok((to, mut out))) = self.expect.as_mut().and_then(|e| e.p4(flow.ingress, &sent)) else {
                return Verdict::NotDropped;
            };
            egress = to;
            if let Some(src) = out.get_mut(6..12) {
                src.copy_from_slice(&self.macs.nic[egress.min(1)].0);
            }
            out
        } else {
            frame::build(flow, tag.seq, f.len(), tag.ts_ns, dst_mac, self.macs.nic[egress.min(1)])
        };
        // The P4 model's output is the whole frame, checksums included: no rewrite on top.
        let nf_ok = fe.p4 || self.apply_rewrites(&fe, usize::from(tag.flow), f, received, &mut expected);
        if expected.get(12..) != f.get(12..) {
            return Verdict::Corrupted;
        }
        if !nf_ok {
            return Verdict::BadNf;
        }
        let st = &mut self.state[usize::from(tag.flow)];
        let fresh = st.mark(tag.seq);
        if port != egress {
            return Verdict::Misdirected;
        }
        if expected.get(..12) != f.get(..12) {
            return Verdict::BadRewrite;
        }
        if !fresh {
            return Verdict::Duplicated;
        }
        if track_hops {
            st.hops.push((tag.seq, which));
        }
        let lat = now.wrapping_sub(tag.ts_ns) & TS_MASK;
        self.latency.push(lat);
        self.window.push(lat);
        if tag.seq + 1 < st.next_expected {
            return Verdict::Reordered;
        }
        st.next_expected = tag.seq + 1;
        Verdict::Received
    }

    /// Writes the chain's rewrites of flow `id` into `expected` (built from the flow as
    /// generated), taking the choices the chain may make (which backend) from `f`, the
    /// frame as received (decrypted); `raw` is the frame as it left the image. Returns
    /// whether every rewrite is one the chain may make.
    fn apply_rewrites(
        &mut self,
        fe: &super::expect::FlowExpect,
        id: usize,
        f: &[u8],
        raw: &[u8],
        expected: &mut [u8],
    ) -> bool {
        let kind = self.flows[id].kind;
        let (l3, l4) = (14, 14 + kind.l3_len());
        let (dst_at, dst_len) = if kind.is_v6() { (l3 + 24, 16) } else { (l3 + 16, 4) };
        let mut ok = true;
        if let Some(backends) = &fe.backends {
            let got = (f[dst_at..dst_at + dst_len].to_vec(), u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]));
            let vip_port = self.flows[id].dst_port;
            let allowed = backends.iter().any(|(a, p)| {
                let bytes = match a {
                    std::net::IpAddr::V4(v) => v.octets().to_vec(),
                    std::net::IpAddr::V6(v) => v.octets().to_vec(),
                };
                bytes == got.0 && p.unwrap_or(vip_port) == got.1
            });
            let st = &mut self.state[id];
            let same = st.backend.as_ref().is_none_or(|b| *b == got);
            st.backend.get_or_insert_with(|| got.clone());
            ok &= allowed && same;
            expected[dst_at..dst_at + dst_len].copy_from_slice(&got.0);
            expected[l4 + 2..l4 + 4].copy_from_slice(&got.1.to_be_bytes());
        }
        if let Some((ext, (lo, hi))) = fe.snat {
            let got = u16::from_be_bytes([f[l4], f[l4 + 1]]);
            let st = &mut self.state[id];
            let same = *st.nat_port.get_or_insert(got) == got;
            ok &= f[l3 + 12..l3 + 16] == ext && (lo..=hi).contains(&got) && same;
            expected[l3 + 12..l3 + 16].copy_from_slice(&ext);
            expected[l4..l4 + 2].copy_from_slice(&got.to_be_bytes());
        }
        if fe.next_hop.is_some() {
            let ttl = if kind.is_v6() { l3 + 7 } else { l3 + 8 };
            expected[ttl] = expected[ttl].wrapping_sub(1);
        }
        if fe.rewrites_headers() || fe.encrypted {
            // Checksums: valid, whatever their representation of zero.
            ok &= frame::ipv4_checksum_ok(kind, f) && frame::l4_checksum_ok(kind, f);
            if !kind.is_v6() {
                expected[l3 + 10..l3 + 12].copy_from_slice(&f[l3 + 10..l3 + 12]);
            }
            let cs = kind.l4_checksum_offset();
            expected[cs..cs + 2].copy_from_slice(&f[cs..cs + 2]);
        }
        if fe.encrypted {
            // What left the image: encrypted payload, same length, valid checksum.
            let payload = l4 + kind.l4_len();
            let cs = kind.l4_checksum_offset();
            ok &= raw.len() == f.len()
                && raw[payload..] != f[payload..]
                && raw[12..cs] == f[12..cs]
                && raw[cs + 2..payload] == f[cs + 2..payload];
            ok &= frame::l4_checksum_ok(kind, raw);
        }
        ok
    }

    /// Lets frames of `flow` leave by `hop` as well as by the configured next hop (a route
    /// changed live); which one each frame took is kept ([`Checker::hops`]).
    pub fn allow_next_hop(&mut self, flow: u16, hop: cadence_core::nf::l3fwd::NextHop) {
        let i = usize::from(flow);
        if self.alt_hops.len() <= i {
            self.alt_hops.resize(i + 1, Vec::new());
        }
        self.alt_hops[i].push(hop);
    }

    /// For a flow with alternative next hops: (sequence number, 0 = configured hop or i =
    /// alternative i − 1) of every frame identified, in sequence order.
    pub fn hops(&self, flow: u16) -> Vec<(u32, u8)> {
        let mut h = self.state.get(usize::from(flow)).map(|s| s.hops.clone()).unwrap_or_default();
        h.sort_unstable();
        h
    }

    /// Frames sent on `flow` so far (the next frame's sequence number).
    pub fn sent_of(&self, flow: u16) -> u32 {
        self.state.get(usize::from(flow)).map_or(0, |s| s.sent)
    }

    /// Per sequence number of `flow` sent so far: whether it came back.
    pub fn seen(&self, flow: u16) -> Vec<bool> {
        let Some(st) = self.state.get(usize::from(flow)) else { return Vec::new() };
        (0..st.sent).map(|q| st.seen.get((q / 64) as usize).is_some_and(|w| w & (1 << (q % 64)) != 0)).collect()
    }

    /// Frames sent but not identified yet (flows the chain drops do not count).
    pub fn in_flight(&self) -> u64 {
        (0..self.state.len())
            .filter(|&i| !self.dropped(i))
            .map(|i| u64::from(self.state[i].sent) - self.state[i].seen_count)
            .sum()
    }

    /// The counts so far, with `lost` = what is still in flight.
    pub fn classes(&self) -> Classes {
        let expected_drops = self.sent_where(|e| e.drop.is_some());
        Classes { lost: self.in_flight(), expected_drops, ..self.classes }
    }

    /// Latencies since the previous call.
    pub fn take_window(&mut self) -> Latencies {
        std::mem::take(&mut self.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The PROTOCOL.md rewrite: out of port 1 - i, dst = peer, src = that NIC's MAC.
    fn forward(macs: &Macs, port: usize, f: &[u8]) -> (usize, Vec<u8>) {
        let out = 1 - port;
        let mut g = f.to_vec();
        g[0..6].copy_from_slice(&macs.peer[out].0);
        g[6..12].copy_from_slice(&macs.nic[out].0);
        (out, g)
    }

    fn checker() -> Checker {
        Checker::new(Flow::standard_set(8), Macs::DEFAULT, Instant::now())
    }

    #[test]
    fn clean_run_is_clean() {
        let mut c = checker();
        for i in 0..400u32 {
            let (p, f) = c.next_frame((i % 8) as u16, 60 + (i as usize * 37) % 1455).expect("flow");
            let (q, g) = forward(&Macs::DEFAULT, p, &f);
            assert_eq!(c.receive(q, &g), Verdict::Received);
        }
        let k = c.classes();
        assert!(k.clean(), "{k:?}");
        assert_eq!((k.sent, k.received), (400, 400));
        assert_eq!(c.latency.len(), 400);
    }

    /// chains/urlfilter.toml over HTTP flows: banned ones are expected drops (one that comes
    /// back is `not_dropped`), allowed and non-HTTP ones pass byte for byte.
    #[test]
    fn urlfilter_model() {
        use crate::traffic::expect::UrlVerdict::{Allowed, Blocked, NotHttp};
        let path = cadence_build::image::workspace_root().join("chains").join("urlfilter.toml");
        let spec = cadence_ctl::chain::load(&path).expect("chains/urlfilter.toml").spec;
        let mut flows = Flow::standard_set(8);
        flows[1] = flows[1].clone().with_http("example.com", "/forbidden/x");
        flows[3] = flows[3].clone().with_http("Example.COM.:8080", "/forbiddenfruit");
        flows[5] = flows[5].clone().with_http("example.com", "/forbidde");
        flows[7] = flows[7].clone().with_http("ADS.example.net", "/");
        flows[0] = flows[0].clone().with_http("ads.example.net", "/"); // UDP: ignored
        let e = Expectations::new(&spec, &flows);
        let url: Vec<_> = e.flows.iter().map(|f| f.url).collect();
        assert_eq!(url, [None, Some(Blocked), None, Some(Blocked), None, Some(Allowed), None, Some(Blocked)]);
        let drops: Vec<_> = (0..8).filter(|&i| e.flows[i].drop == Some("url_blocked")).collect();
        assert_eq!(drops, [1, 3, 7]);
        let plain = Expectations::new(&spec, &Flow::standard_set(8));
        assert!(plain.flows.iter().all(|f| f.drop.is_none()));
        assert_eq!(plain.flows[5].url, Some(NotHttp));

        let mut c = Checker::new(flows, Macs::DEFAULT, Instant::now()).with_expectations(e);
        for i in 0..80u32 {
            let id = (i % 8) as u16;
            let (p, f) = c.next_frame(id, 60 + i as usize * 17).expect("flow");
            let (q, g) = forward(&Macs::DEFAULT, p, &f);
            let want = if [1, 3, 7].contains(&id) { Verdict::NotDropped } else { Verdict::Received };
            assert_eq!(c.receive(q, &g), want, "flow {id}");
        }
        let k = c.classes();
        assert_eq!((k.sent, k.received, k.expected_drops, k.not_dropped, k.lost), (80, 50, 30, 30, 0), "{k:?}");
    }

    /// chains/p4-router.toml over the standard flows, the P4 model against a router written
    /// here: each forwarded frame leaves by its route's port with the next hop's MAC, the
    /// TTL one less and the IPv4 checksum summed afresh (the program updates it
    /// incrementally); the route's drop, the IPv6 flows (not IPv4) and any frame of theirs
    /// that comes back are caught, as are a TTL left alone, a wrong port and a wrong MAC.
    #[test]
    fn p4_router_model() {
        let path = cadence_build::image::workspace_root().join("chains").join("p4-router.toml");
        let spec = cadence_ctl::chain::load(&path).expect("chains/p4-router.toml").spec;
        let flows = Flow::standard_set(16);
        let e = Expectations::new(&spec, &flows);
        // router_table.txt's routes for these flows: (prefix, length, port, next hop).
        let routes: [([u8; 4], u32, usize, [u8; 6]); 3] = [
            ([10, 101, 0, 0], 16, 1, [2, 0, 0, 0, 1, 1]),
            ([10, 100, 0, 0], 16, 0, [2, 0, 0, 0, 0, 1]),
            ([10, 100, 0, 12], 30, 1, [2, 0, 0, 0, 1, 0x0c]),
        ];
        let route = |f: &[u8]| {
            let dst = u32::from_be_bytes([f[30], f[31], f[32], f[33]]);
            routes
                .iter()
                .filter(|(p, len, ..)| (u32::from_be_bytes(*p) ^ dst) >> (32 - len) == 0)
                .max_by_key(|(_, len, ..)| *len)
                .map(|&(_, _, port, mac)| (port, mac))
        };
        let routed = |f: &[u8], port: usize, mac: [u8; 6]| {
            let mut g = f.to_vec();
            g[0..6].copy_from_slice(&mac);
            g[6..12].copy_from_slice(&Macs::DEFAULT.nic[port].0);
            g[22] -= 1;
            g[24..26].fill(0);
            let sum = g[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum::<u32>();
            let sum = (sum & 0xffff) + (sum >> 16);
            g[24..26].copy_from_slice(&(!((sum & 0xffff) + (sum >> 16)) as u16).to_be_bytes());
            g
        };
        let drops: Vec<_> = (0..16).filter(|&i| e.flows[i].drop == Some("p4_drop")).collect();
        // IPv6 (2, 3, 6, 7, …) and 10.101.0.8 (flow 8, the table's drop).
        assert_eq!(drops, [2, 3, 6, 7, 8, 10, 11, 14, 15]);
        let mut c = Checker::new(flows, Macs::DEFAULT, Instant::now()).with_expectations(e);
        let mut ports = [0u32; 2];
        for i in 0..160u32 {
            let id = (i % 16) as u16;
            let (p, f) = c.next_frame(id, 60 + i as usize * 9).expect("flow");
            if drops.contains(&usize::from(id)) {
                assert_eq!(c.receive(1 - p, &f), Verdict::NotDropped, "flow {id}");
                continue;
            }
            let (q, mac) = route(&f).expect("a route");
            ports[q] += 1;
            let g = routed(&f, q, mac);
            assert_eq!(c.receive(q, &g), Verdict::Received, "flow {id}");
            // Variants of a frame already seen: each is caught for what it is.
            match i / 16 {
                1 => {
                    let mut stale = g.clone();
                    stale[22] += 1; // the TTL not decremented (checksum still the new one)
                    assert_eq!(c.receive(q, &stale), Verdict::Corrupted, "flow {id}");
                }
                2 => {
                    let mut wrong = g.clone();
                    wrong[5] ^= 1;
                    assert_eq!(c.receive(q, &wrong), Verdict::BadRewrite, "flow {id}");
                }
                3 => assert_eq!(c.receive(1 - q, &g), Verdict::Misdirected, "flow {id}"),
                _ => {}
            }
        }
        assert!(ports[0] > 0 && ports[1] > 0, "{ports:?}");
        let k = c.classes();
        assert_eq!((k.sent, k.received, k.expected_drops, k.not_dropped, k.lost), (160, 70, 90, 90, 0), "{k:?}");
        assert_eq!((k.corrupted, k.bad_rewrite, k.misdirected), (7, 7, 7), "{k:?}");
    }

    #[test]
    fn detects_every_failure() {
        let m = Macs::DEFAULT;
        let mut c = checker();
        let mut frames: Vec<(usize, Vec<u8>)> = (0..6).map(|i| c.next_frame(0, 100 + i).expect("flow")).collect();
        let (q0, g0) = forward(&m, frames[0].0, &frames[0].1);
        assert_eq!(c.receive(q0, &g0), Verdict::Received);
        assert_eq!(c.receive(q0, &g0), Verdict::Duplicated);
        // frame 1 is lost; 3 arrives before 2
        let (q3, g3) = forward(&m, frames[3].0, &frames[3].1);
        assert_eq!(c.receive(q3, &g3), Verdict::Received);
        let (q2, g2) = forward(&m, frames[2].0, &frames[2].1);
        assert_eq!(c.receive(q2, &g2), Verdict::Reordered);
        // corrupted payload byte
        let (q4, mut g4) = forward(&m, frames[4].0, &frames[4].1);
        g4[60] ^= 0x40;
        assert_eq!(c.receive(q4, &g4), Verdict::Corrupted);
        // a changed IP TTL is also caught (header byte covered by the CRC)
        let (_, mut g4b) = forward(&m, frames[4].0, &frames[4].1);
        g4b[22] -= 1;
        assert_eq!(c.receive(q4, &g4b), Verdict::Corrupted);
        // a changed L4 checksum (outside the CRC) is caught by the byte comparison
        let cs = c.flows()[0].kind.l4_checksum_offset();
        let (_, mut g4c) = forward(&m, frames[4].0, &frames[4].1);
        g4c[cs] ^= 1;
        assert_eq!(c.receive(q4, &g4c), Verdict::Corrupted);
        // wrong port
        let (q5, g5) = forward(&m, frames[5].0, &frames[5].1);
        assert_eq!(c.receive(1 - q5, &g5), Verdict::Misdirected);
        // not rewritten at all / wrong src MAC
        let (p5, f5) = frames.pop().expect("frame");
        assert_eq!(c.receive(1 - p5, &f5), Verdict::BadRewrite);
        let mut g5b = g5.clone();
        g5b[6..12].copy_from_slice(&m.nic[p5].0);
        assert_eq!(c.receive(q5, &g5b), Verdict::BadRewrite);
        // not ours
        assert_eq!(c.receive(0, &[0u8; 60]), Verdict::Unexpected);
        // ours but never sent
        let mut other = checker();
        let (_, fut) = (0..10).map(|_| other.next_frame(0, 100).expect("flow")).last().expect("last");
        let (qf, gf) = forward(&m, 0, &fut);
        assert_eq!(c.receive(qf, &gf), Verdict::Unexpected);

        let k = c.classes();
        assert_eq!(k.sent, 6);
        assert_eq!(k.received, 3);
        assert_eq!(k.duplicated, 1);
        assert_eq!(k.reordered, 1);
        assert_eq!(k.corrupted, 3);
        assert_eq!(k.misdirected, 1);
        assert_eq!(k.bad_rewrite, 2);
        assert_eq!(k.unexpected, 2);
        // 1 never arrived, 4 only arrived corrupted (5 was identified, though misdirected)
        assert_eq!(k.lost, 2);
        assert!(!k.clean());
        assert_eq!(k.failures().len(), 7);
    }
}
