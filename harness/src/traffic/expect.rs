//! What a chain should do to each generated flow, derived from its configuration
//! (`cadence_core::nf::config::ChainSpec`) by models written here, independently of the
//! NF code:
//!
//! - ACL: a linear scan of the rules (highest priority wins, ties: the earlier rule; no
//!   match: the default). A denied flow is an expected drop.
//! - LB: a flow to a VIP (address, port, protocol) comes back with the destination
//!   address (and port, if the backend has one) of one of the VIP's backends, the same
//!   one for the whole flow, with valid checksums; a VIP without backends drops.
//! - L3fwd: the longest matching route picks the egress port and the destination MAC;
//!   TTL / hop limit one less; no route drops.
//! - Encrypt: the payload changes, length and headers do not, the L4 checksum stays
//!   valid. To identify the frame (its tag is encrypted too) the checker decrypts it
//!   with the NF itself (ChaCha20 is its own inverse: "a decrypt run restores it"), then
//!   checks the restored frame byte for byte. Limit: UDP decryption follows the
//!   firmware's per-flow datagram counter, so it assumes the datagrams of a flow arrive
//!   in order and none is lost between the image and the host.
//! - NAT: IPv4 flows entering `inside_port` come back with the source address = the
//!   external address and a source port from the pool, the same for the whole flow;
//!   IPv4 flows entering the other port match no mapping (dropped); IPv6 is dropped.
//! - UrlFilter: a TCP flow on an inspected port (`ports`, empty: all) is inspected. An
//!   HTTP flow ([`Flow::http`]: every segment opens with the request head, so the verdict
//!   falls on the first segment the NF sees, whichever it is) has the URL = host (lower
//!   case, without port or trailing dot) + path; it is blocked when a banned pattern
//!   (`host/path`, or `host` taken as `host/`, host normalized the same way) is a prefix
//!   of it: every frame of the flow is an expected drop (`url_blocked`). Otherwise it is
//!   allowed and passes unchanged. Any other TCP flow is `not_http` and passes unchanged:
//!   its first payload byte is filler, which runs up by one per byte (a space only ever
//!   follows 0x1f, not a token character), or the tag's magic 0xCA, so it never opens a
//!   request line. Not modeled (no verdict): heads longer than the window, a UrlFilter
//!   after Encrypt (it sees ciphertext); with `reset = true` a blocked flow's frames are
//!   still expected drops, but the resets that come back are not recognized.
//! - Accounting: no change to generated traffic.
//! - P4: the program's own output, computed by running each frame as it was sent through a
//!   chain of the `p4` NF alone (the spec and table files of the chain under test) on the
//!   host, as Encrypt's frames are decrypted by the NF itself. That the executor does what
//!   DPDK's SWX pipeline does with a spec is the differential check's job
//!   (`bench/tests/p4_vs_dpdk.rs`, which runs `chains/p4/router.spec` too); this model checks
//!   the rest: the frame leaves by the port the program chose, with the bytes it wrote, the
//!   port's own MAC as source, once, in order, and nothing is lost. A flow is an expected
//!   drop (`p4_drop`, `p4_fault`) when its first frame is. Limit: one model instance sees
//!   every frame in the order the checker gets them, so a program whose output depends on
//!   state (learners, registers) is modeled only as far as that order is the image's.
//!
//! NFs that rewrite see the rewritten packet in the firmware; the models look at the
//! flow as generated (every chain file here puts the ACL first).

use std::net::IpAddr;

use cadence_core::buf::{BUF_SIZE, Batch, Pool};
use cadence_core::drops::DropReason;
use cadence_core::nf::acl::{AclAction, AclConfig, Prefix};
use cadence_core::nf::config::{ChainSpec, NfSpec};
use cadence_core::nf::l3fwd::{L3fwdConfig, NextHop};
use cadence_core::nf::lb::LbConfig;
use cadence_core::nf::urlfilter::UrlFilterConfig;
use cadence_core::nf::{Chain, Egress};
use cadence_core::parse::IpAddr as CoreIp;
use cadence_core::stage::{Stage, StageCounters};
use cadence_core::time::{Instant, TickRate};

use super::checker::Macs;
use super::frame::{Flow, build};

/// What the chain does to one flow.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlowExpect {
    /// Dropped, under this `DropReason` name (`acl_deny`, …).
    pub drop: Option<&'static str>,
    /// LB: the backends (address, port; `None` keeps the VIP's) one of which the
    /// destination is rewritten to.
    pub backends: Option<Vec<(IpAddr, Option<u16>)>>,
    /// L3fwd: egress port and destination MAC; the TTL drops by one.
    pub next_hop: Option<NextHop>,
    /// Encrypt: the payload is transformed.
    pub encrypted: bool,
    /// NAT: the source becomes this address with a port from this range.
    pub snat: Option<([u8; 4], (u16, u16))>,
    /// UrlFilter: its verdict on the flow (`None`: not inspected, or not modeled).
    pub url: Option<UrlVerdict>,
    /// P4: the program forwards the flow; each frame is expected as the model chain
    /// ([`Expectations::p4`]) writes it.
    pub p4: bool,
}

/// What the URL filter decides for a TCP flow it inspects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UrlVerdict {
    /// The stream does not open with an HTTP request line (generated filler never does).
    NotHttp,
    /// The request's URL matches no banned pattern: the flow passes.
    Allowed,
    /// It matches one: every frame of the flow is dropped (`url_blocked`).
    Blocked,
}

impl FlowExpect {
    /// Whether anything in the IP/L4 headers changes (so the tag's CRC, which covers
    /// them, cannot be checked on the received frame).
    pub fn rewrites_headers(&self) -> bool {
        self.backends.is_some() || self.next_hop.is_some() || self.snat.is_some() || self.p4
    }
}

/// The expectations of one chain for a set of flows, plus the decryptor.
pub struct Expectations {
    /// Per flow id.
    pub flows: Vec<FlowExpect>,
    /// The NF names.
    pub nfs: Vec<&'static str>,
    decrypt: Option<Chain>,
    /// A chain of the `p4` NF alone: the P4 model.
    p4: Option<Chain>,
}

impl std::fmt::Debug for Expectations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Expectations").field("flows", &self.flows).field("nfs", &self.nfs).finish_non_exhaustive()
    }
}

fn to_std(a: &CoreIp) -> IpAddr {
    match *a {
        CoreIp::V4(b) => IpAddr::from(b),
        CoreIp::V6(b) => IpAddr::from(b),
    }
}

fn bits(a: &IpAddr) -> (u128, u32) {
    match a {
        IpAddr::V4(v) => (u128::from(u32::from(*v)), 32),
        IpAddr::V6(v) => (u128::from(*v), 128),
    }
}

/// Whether `a` lies in `p` (same family, first `len` bits equal).
fn in_prefix(a: &IpAddr, p: &Prefix) -> bool {
    let (pa, pw) = bits(&to_std(&p.addr));
    let (aa, aw) = bits(a);
    if pw != aw {
        return false;
    }
    let len = u32::from(p.len).min(aw);
    len == 0 || (pa ^ aa) >> (aw - len) == 0
}

fn acl(cfg: &AclConfig, f: &Flow) -> AclAction {
    let (src, dst) = f.addrs();
    let proto = f.kind.proto();
    let mut best: Option<(u32, AclAction)> = None;
    for r in &cfg.rules {
        let ok = r.src.as_ref().is_none_or(|p| in_prefix(&src, p))
            && r.dst.as_ref().is_none_or(|p| in_prefix(&dst, p))
            && (r.sport.0..=r.sport.1).contains(&f.src_port)
            && (r.dport.0..=r.dport.1).contains(&f.dst_port)
            && r.proto.is_none_or(|p| p == proto)
            // The generator's frames are untagged: a rule of one VLAN never matches them.
            && r.vlan.is_none();
        // Strictly higher wins, so among equal priorities the first rule stays.
        if ok && best.is_none_or(|(p, _)| r.priority > p) {
            best = Some((r.priority, r.action));
        }
    }
    best.map_or(cfg.default_action, |(_, a)| a)
}

fn lb(cfg: &LbConfig, f: &Flow) -> Option<Vec<(IpAddr, Option<u16>)>> {
    let (_, dst) = f.addrs();
    let v = cfg.vips.iter().find(|v| to_std(&v.addr) == dst && v.port == f.dst_port && v.proto == f.kind.proto())?;
    Some(v.backends.iter().map(|b| (to_std(&b.addr), b.port)).collect())
}

fn l3fwd(cfg: &L3fwdConfig, f: &Flow) -> Option<NextHop> {
    let (_, dst) = f.addrs();
    let (a, w) = bits(&dst);
    let routes: Vec<(u128, u8, u32)> = match dst {
        IpAddr::V4(_) => {
            cfg.routes4.iter().map(|r| (u128::from(u32::from_be_bytes(r.prefix)), r.len, r.next_hop)).collect()
        }
        IpAddr::V6(_) => cfg.routes6.iter().map(|r| (u128::from_be_bytes(r.prefix), r.len, r.next_hop)).collect(),
    };
    let best = routes
        .iter()
        .filter(|(p, len, _)| *len == 0 || (p ^ a) >> (w - u32::from(*len).min(w)) == 0)
        .max_by_key(|(_, len, _)| *len)?;
    cfg.next_hops.get(best.2 as usize).copied()
}

/// The host of a Host header value or a pattern: no port (an IPv6 literal keeps its
/// brackets), no trailing dot, lower case.
fn url_host(h: &str) -> String {
    let h = match (h.starts_with('['), h.find(']'), h.find(':')) {
        (true, Some(i), _) => &h[..=i],
        (false, _, Some(i)) => &h[..i],
        _ => h,
    };
    h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase()
}

fn urlfilter(cfg: &UrlFilterConfig, f: &Flow) -> Option<UrlVerdict> {
    if f.kind.proto() != 6 || !(cfg.ports.is_empty() || cfg.ports.iter().any(|&p| p == f.src_port || p == f.dst_port)) {
        return None;
    }
    let Some(req) = &f.http else { return Some(UrlVerdict::NotHttp) };
    if f.http_head().len() > cfg.window || !req.path.starts_with('/') || url_host(&req.host).is_empty() {
        return None;
    }
    let url = format!("{}{}", url_host(&req.host), req.path);
    let banned = cfg.banned.iter().any(|p| {
        let (host, path) = p.split_at(p.find('/').unwrap_or(p.len()));
        url.starts_with(&format!("{}{}", url_host(host), if path.is_empty() { "/" } else { path }))
    });
    Some(if banned { UrlVerdict::Blocked } else { UrlVerdict::Allowed })
}

/// A chain of NF `i` of `spec` alone, its egress writing no MACs (the checker writes the
/// port's own MAC as source, as the image's egress does).
fn only(spec: &ChainSpec, i: usize) -> Option<Chain> {
    let only = ChainSpec {
        nfs: vec![spec.nfs.get(i)?.clone()],
        timeouts: spec.timeouts.get(i).copied().into_iter().collect(),
        validate: spec.validate,
        neigh: None,
    };
    let egress = Egress::new([[0; 6]; 2], [[0; 6]; 2], None);
    // Frames are run at `Instant(0)`: the clock rate does not matter.
    let rate = TickRate::try_new(1_000_000_000).expect("non-zero");
    only.build(egress, rate).ok().map(|f| f.chain_for_worker())
}

/// Runs one frame that entered by `port` through `chain`: the port it left by and its bytes,
/// or the name of the reason it was dropped for (`"model"` when the model itself failed).
fn run_one(chain: &mut Chain, port: usize, f: &[u8]) -> Result<(usize, Vec<u8>), &'static str> {
    let mut mem = vec![0u8; 2 * BUF_SIZE];
    let mut pool = Pool::try_new(&mut mem, 0, 2).map_err(|_| "model")?;
    let b = pool.alloc().ok_or("model")?;
    pool.set_len(b, f.len()).map_err(|_| "model")?;
    pool.frame_mut(b).copy_from_slice(f);
    let mut input = Batch::new();
    input.push(b).map_err(|_| "model")?;
    let mut out = [const { Batch::new() }; cadence_core::stage::PORTS];
    let mut counters = StageCounters::default();
    chain.process(port, &mut pool, &mut input, &mut out, &mut counters, Instant(0));
    match out.iter().enumerate().find_map(|(q, o)| o.as_slice().first().map(|b| (q, *b))) {
        Some((q, b)) => Ok((q, pool.frame(b).to_vec())),
        None => {
            Err(DropReason::ALL.iter().zip(counters.drops).find(|(_, n)| *n > 0).map_or("model", |(r, _)| r.as_str()))
        }
    }
}

impl Expectations {
    /// The expectations of `spec` for `flows` (flow ids = indices).
    pub fn new(spec: &ChainSpec, flows: &[Flow]) -> Expectations {
        let decrypt = spec.nfs.iter().position(|nf| matches!(nf, NfSpec::Encrypt(_))).and_then(|i| only(spec, i));
        let mut p4 = spec.nfs.iter().position(|nf| matches!(nf, NfSpec::P4(_))).and_then(|i| only(spec, i));
        let out = flows
            .iter()
            .map(|f| {
                let mut e = FlowExpect::default();
                for nf in &spec.nfs {
                    if e.drop.is_some() {
                        break;
                    }
                    match nf {
                        NfSpec::Acl(c) if acl(c, f) == AclAction::Deny => e.drop = Some("acl_deny"),
                        NfSpec::Lb(c) => {
                            e.backends = lb(c, f);
                            if e.backends.as_ref().is_some_and(Vec::is_empty) {
                                e.drop = Some("lb_no_backend");
                            }
                        }
                        NfSpec::L3fwd(c) => match l3fwd(c, f) {
                            Some(h) => e.next_hop = Some(h),
                            None => e.drop = Some("no_route"),
                        },
                        NfSpec::Encrypt(_) => e.encrypted = true,
                        // After Encrypt the filter sees ciphertext: not modeled.
                        NfSpec::UrlFilter(c) if !e.encrypted => {
                            e.url = urlfilter(c, f);
                            if e.url == Some(UrlVerdict::Blocked) {
                                e.drop = Some("url_blocked");
                            }
                        }
                        NfSpec::Nat(c) => {
                            if f.kind.is_v6() {
                                e.drop = Some("nf_unsupported");
                            } else if f.ingress != usize::from(c.inside_port) {
                                e.drop = Some("nat_no_mapping");
                            } else {
                                e.snat = Some((c.external_addr, c.ports));
                            }
                        }
                        NfSpec::P4(_) => {
                            // The flow's first frame, as the rig sends it, decides.
                            let m = Macs::DEFAULT;
                            let first = build(f, 0, 0, 0, m.nic[f.ingress.min(1)], m.peer[f.ingress.min(1)]);
                            match p4.as_mut().map(|c| run_one(c, f.ingress, &first)) {
                                Some(Ok(_)) => e.p4 = true,
                                Some(Err(why)) => e.drop = Some(why),
                                // The spec did not build: the run's own start refuses it.
                                None => {}
                            }
                        }
                        _ => {}
                    }
                }
                e
            })
            .collect();
        Expectations { flows: out, nfs: spec.names().collect(), decrypt, p4 }
    }

    /// The P4 model's output for a frame that entered by `port`: (egress port, bytes; the
    /// source MAC is left as the program wrote it, the image's egress writes its own), or
    /// the name of the drop reason. `None` without a `p4` NF.
    pub fn p4(&mut self, port: usize, f: &[u8]) -> Option<Result<(usize, Vec<u8>), &'static str>> {
        self.p4.as_mut().map(|c| run_one(c, port, f))
    }

    /// The expectation of flow `id`.
    pub fn flow(&self, id: u16) -> Option<&FlowExpect> {
        self.flows.get(usize::from(id))
    }

    /// Decrypts a frame that left the image by `port` (the chain encrypts): runs it
    /// through the chain's Encrypt config once more. `None` without Encrypt, or when the
    /// NF dropped it. (The image's counter entries never expire between two frames of a
    /// flow at the generator's rates; the model runs at a fixed time, so the host's never
    /// do.)
    pub fn decrypt(&mut self, port: usize, f: &[u8]) -> Option<Vec<u8>> {
        let (_, mut g) = run_one(self.decrypt.as_mut()?, port, f).ok()?;
        // The MACs are the received ones (the decrypting chain rewrote them).
        g[..12].copy_from_slice(&f[..12]);
        Some(g)
    }

    /// Whether the chain encrypts.
    pub fn encrypts(&self) -> bool {
        self.decrypt.is_some()
    }
}
