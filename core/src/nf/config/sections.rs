//! The records of each NF in the text form and how they fill its config type.
//!
//! | NF | keys |
//! |---|---|
//! | `acl` | `acl.default=permit\|deny`, `acl.flow_capacity=N`, `acl.sweep_buckets=N`, `acl.flow_timeout_ms=MS`, `acl.rule=prio:P,src:PFX,dst:PFX,sport:R,dport:R,proto:P,vlan:V,action:permit\|deny` (list; every field but `action` optional: any; `vlan`: the VID 1..=4094 a frame arrived with) |
//! | `lb` | `lb.vip=addr:IP,port:N,proto:tcp\|udp,backends:B;B;…` (list; a backend is `IP`, `IPv4:PORT` or `[IPv6]:PORT`, without a port it keeps the VIP's), `lb.max_backends=N`, `lb.affinity_capacity=N`, `lb.sweep_buckets=N`, `lb.affinity_timeout_ms=MS` |
//! | `encrypt` | `encrypt.key=HEX64` (the 32-byte ChaCha20 key), `encrypt.udp_flows=N`, `encrypt.clear=pass\|drop`, `encrypt.udp_idle_timeout_ms=MS` |
//! | `accounting` | `accounting.capacity=N`, `accounting.export_ring=N`, `accounting.event_ring=N`, `accounting.sweep_buckets=N`, `accounting.exports_per_batch=N`, `accounting.idle_timeout_ms=MS`, `accounting.export=ipfix:PORT:IP:UDPPORT`, `accounting.export_src=IP` |
//! | `nat` | `nat.external=IPv4`, `nat.ports=LO-HI`, `nat.inside_port=N`, `nat.sweep_buckets=N`, `nat.reclaims_per_batch=N`, `nat.timeout_ms=MS` |
//! | `urlfilter` | `urlfilter.banned=HOST[/PATH]` (list: one record per pattern), `urlfilter.ports=P;P;…`, `urlfilter.reset=true\|false`, `urlfilter.on_exhaustion=drop\|allow`, `urlfilter.undecided=deny\|allow`, `urlfilter.fragments=drop\|pass`, `urlfilter.window=N`, `urlfilter.slabs=N`, `urlfilter.flows=N`, `urlfilter.inspect_timeout_ms=MS`, `urlfilter.flow_timeout_ms=MS`, `urlfilter.handshake_timeout_ms=MS` |
//! | `p4` | `p4.spec=LINE` (list: the pipeline spec, one record per line, blank lines included so that the spec's line numbers hold), `p4.table=NAME` (list: a table or selector whose initial entries follow), `p4.entry=LINE` (list: one line of the last named table's file) |
//! | `l3fwd` | `l3fwd.route=prefix:PFX,port:N,mac:MAC` or `…,via:IP` (a gateway of the prefix's IP version) or `…,via:direct` (directly connected), the two last resolved through the neighbour table (`config::neigh`) (list; next hops are the distinct `(port, mac or via)` in order of first use), `l3fwd.lpm4=trie` or `poptrie` (the IPv4 routes' structure), `l3fwd.first_stride4=N`, `l3fwd.max_groups4=N`, `l3fwd.max_groups6=N` |
//!
//! Timeouts (`…_ms`) are milliseconds, 1..=`MAX_TIMEOUT_MS` (one day); they stay in
//! milliseconds in [`Timeouts`] until `ChainSpec::build` knows the clock's rate.

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::net::IpAddr as NetIp;

use super::values;
use super::{Fail, NfSpec, Section, SpecErrorKind, Timeouts, once, opt, record, req, timeout_ms};
use crate::nf::accounting::{AccountingConfig, IpfixExport};
use crate::nf::acl::{AclAction, AclConfig, AclConfigError, AclRule, Prefix};
use crate::nf::encrypt::{ClearPolicy, EncryptConfig};
use crate::nf::l3fwd::{Family, L3fwdConfig, L3fwdConfigError, Lpm4Kind, NextHop, Route4, Route6};
use crate::nf::lb::{Backend, LbConfig, LbConfigError, LbError, Vip};
use crate::nf::nat::NatConfig;
use crate::nf::urlfilter::{Exhaustion, Fragments, Undecided, UrlFilterConfig, UrlFilterConfigError};
use crate::parse::IpAddr;

/// The class of a P4 program whose register arrays cannot be allocated.
pub(crate) const REGISTERS_TOO_LARGE: &str = "regarray too large";

/// An error of a finished section: the line and key of the record it belongs to
/// (`None`: the `nf=` line).
pub(crate) type FinishError = (Option<(usize, &'static str)>, Fail);

/// A prefix `ADDR/LEN` (or a bare address = host prefix) in the NFs' own form.
pub(crate) fn prefix(s: &str) -> Result<Prefix, &'static str> {
    let (v, len) = values::prefix128(s)?;
    Ok(match values::u128_to_ip(v) {
        NetIp::V4(a) if len >= 96 => Prefix::v4(a.octets(), len - 96),
        NetIp::V4(_) | NetIp::V6(_) => Prefix::v6(v.to_be_bytes(), len),
    })
}

/// A prefix or `any` (`None`).
fn opt_prefix(s: &str) -> Result<Option<Prefix>, &'static str> {
    if s == "any" { Ok(None) } else { prefix(s).map(Some) }
}

fn acl_action(s: &str) -> Result<AclAction, &'static str> {
    match s {
        "permit" => Ok(AclAction::Permit),
        "deny" => Ok(AclAction::Deny),
        _ => Err("permit or deny"),
    }
}

/// One `acl.rule` value: `prio:P,src:PFX,dst:PFX,sport:R,dport:R,proto:P,vlan:V,action:A`
/// (every field but `action` optional). Also the argument of the management command `acl add`.
pub(crate) fn acl_rule(value: &str) -> Result<AclRule, Fail> {
    let [p, src, dst, sport, dport, proto, vlan, action] =
        record(value, ["prio", "src", "dst", "sport", "dport", "proto", "vlan", "action"])?;
    let mut r = AclRule::any(0, req("action", action, acl_action)?);
    r.priority = opt("prio", p, values::u32_dec)?.unwrap_or(0);
    r.src = opt("src", src, opt_prefix)?.flatten();
    r.dst = opt("dst", dst, opt_prefix)?.flatten();
    r.sport = opt("sport", sport, values::port_range)?.unwrap_or((0, u16::MAX));
    r.dport = opt("dport", dport, values::port_range)?.unwrap_or((0, u16::MAX));
    r.proto = opt("proto", proto, values::proto)?.flatten();
    r.vlan = opt("vlan", vlan, |s| match values::u16_dec(s) {
        Ok(v @ 1..=4094) => Ok(Some(v)),
        _ if s == "any" => Ok(None),
        _ => Err("a VLAN ID 1..=4094 or any"),
    })?
    .flatten();
    if let (Some(s), Some(d)) = (r.src, r.dst)
        && matches!(s.addr, IpAddr::V4(_)) != matches!(d.addr, IpAddr::V4(_))
    {
        return Err(Fail::expected("dst", "a prefix of the same IP version as src"));
    }
    Ok(r)
}

/// One `l3fwd.route` value: `prefix:PFX,port:N,mac:MAC` or `prefix:PFX,port:N,via:IP`
/// (a gateway of the prefix's IP version) or `prefix:PFX,port:N,via:direct` (directly
/// connected); the two last resolved through the neighbour table. Also the argument of the management command `route add`.
pub(crate) fn route(value: &str) -> Result<(Prefix, NextHop), Fail> {
    let [pfx, port, mac, via] = record(value, ["prefix", "port", "mac", "via"])?;
    let p = req("prefix", pfx, prefix)?;
    let port = req("port", port, |s| {
        values::u16_dec(s).ok().and_then(|n| u8::try_from(n).ok()).ok_or("a port number 0..=255")
    })?;
    let hop = match (mac, via) {
        (Some(_), Some(_)) => return Err(Fail::expected("via", "either mac or via, not both")),
        (_, None) => NextHop::mac(port, req("mac", mac, values::mac)?),
        (None, Some("direct")) => NextHop::direct(port),
        (None, Some(v)) => match values::ip(v) {
            Ok(NetIp::V4(a)) if matches!(p.addr, IpAddr::V4(_)) => NextHop::gateway(port, a.octets()),
            Ok(NetIp::V6(a)) if matches!(p.addr, IpAddr::V6(_)) => NextHop::gateway6(port, a.octets()),
            _ => return Err(Fail::expected("via", "a gateway address of the prefix's IP version, or direct")),
        },
    };
    Ok((p, hop))
}

/// `acl`.
#[derive(Default)]
pub(crate) struct AclSection {
    cfg: AclConfig,
    default: Option<()>,
    capacity: Option<()>,
    sweep: Option<()>,
    timeouts: Timeouts,
    /// The line of each rule.
    lines: Vec<usize>,
}

impl Section for AclSection {
    fn keys(&self) -> &'static [&'static str] {
        &["acl.default", "acl.flow_capacity", "acl.sweep_buckets", "acl.flow_timeout_ms", "acl.rule"]
    }

    fn set(&mut self, key: &'static str, value: &str, line: usize) -> Result<(), Fail> {
        match key {
            "acl.default" => {
                once(&mut self.default, ())?;
                self.cfg.default_action = acl_action(value).map_err(Fail::value)?;
            }
            "acl.flow_timeout_ms" => timeout_ms(&mut self.timeouts.flow_ms, value)?,
            "acl.flow_capacity" => {
                once(&mut self.capacity, ())?;
                self.cfg.flow_capacity = values::usize_dec(value).map_err(Fail::value)?;
            }
            "acl.sweep_buckets" => {
                once(&mut self.sweep, ())?;
                self.cfg.sweep_buckets = values::usize_dec(value).map_err(Fail::value)?;
            }
            _ => {
                self.cfg.rules.push(acl_rule(value)?);
                self.lines.push(line);
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(NfSpec, Timeouts), FinishError> {
        self.cfg.validate().map_err(|e| {
            let (rule, field) = match e {
                AclConfigError::BadPrefixLen { rule, field } | AclConfigError::HostBitsSet { rule, field } => {
                    (Some(rule), Some(field_name(field)))
                }
                AclConfigError::EmptyPortRange { rule, field } => (Some(rule), Some(field_name(field))),
                AclConfigError::FamilyMismatch { rule } => (Some(rule), Some("dst")),
                AclConfigError::BadVlan { rule } => (Some(rule), Some("vlan")),
                _ => (None, None),
            };
            let at = rule.and_then(|r| self.lines.get(r).map(|&l| (l, "acl.rule")));
            (at, Fail { field, kind: SpecErrorKind::Acl(e) })
        })?;
        Ok((NfSpec::Acl(self.cfg), self.timeouts))
    }
}

fn field_name(f: crate::nf::acl::AclField) -> &'static str {
    use crate::nf::acl::AclField;
    match f {
        AclField::Src => "src",
        AclField::Dst => "dst",
        AclField::SrcPort => "sport",
        AclField::DstPort => "dport",
        AclField::Vlan => "vlan",
    }
}

/// `l3fwd`.
#[derive(Default)]
pub(crate) struct L3fwdSection {
    cfg: L3fwdConfig,
    kind: Option<()>,
    stride: Option<()>,
    groups4: Option<()>,
    groups6: Option<()>,
    lines4: Vec<usize>,
    lines6: Vec<usize>,
}

impl Section for L3fwdSection {
    fn keys(&self) -> &'static [&'static str] {
        &["l3fwd.route", "l3fwd.lpm4", "l3fwd.first_stride4", "l3fwd.max_groups4", "l3fwd.max_groups6"]
    }

    fn set(&mut self, key: &'static str, value: &str, line: usize) -> Result<(), Fail> {
        match key {
            "l3fwd.lpm4" => {
                once(&mut self.kind, ())?;
                self.cfg.lpm4 = match value {
                    "trie" => Lpm4Kind::Trie,
                    "poptrie" => Lpm4Kind::Poptrie,
                    _ => return Err(Fail::value("trie or poptrie")),
                };
            }
            "l3fwd.first_stride4" => {
                once(&mut self.stride, ())?;
                let n = values::u16_dec(value).ok().and_then(|n| u8::try_from(n).ok());
                self.cfg.first_stride4 = n.ok_or(Fail::value("an integer 8..=24"))?;
            }
            "l3fwd.max_groups4" => {
                once(&mut self.groups4, ())?;
                self.cfg.max_groups4 = values::usize_dec(value).map_err(Fail::value)?;
            }
            "l3fwd.max_groups6" => {
                once(&mut self.groups6, ())?;
                self.cfg.max_groups6 = values::usize_dec(value).map_err(Fail::value)?;
            }
            _ => {
                let (p, hop) = route(value)?;
                let next_hop = match self.cfg.next_hops.iter().position(|h| *h == hop) {
                    Some(i) => i,
                    None => {
                        self.cfg.next_hops.push(hop);
                        self.cfg.next_hops.len() - 1
                    }
                } as u32;
                match p.addr {
                    IpAddr::V4(a) => {
                        self.cfg.routes4.push(Route4 { prefix: a, len: p.len, next_hop });
                        self.lines4.push(line);
                    }
                    IpAddr::V6(a) => {
                        self.cfg.routes6.push(Route6 { prefix: a, len: p.len, next_hop });
                        self.lines6.push(line);
                    }
                }
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(NfSpec, Timeouts), FinishError> {
        self.cfg.validate().map_err(|e| {
            let route = match e {
                L3fwdConfigError::RouteLen { family, index }
                | L3fwdConfigError::RouteHostBits { family, index }
                | L3fwdConfigError::RouteNextHop { family, index }
                | L3fwdConfigError::DuplicateRoute { family, index }
                | L3fwdConfigError::OutOfGroups { family, index } => match family {
                    Family::V4 => self.lines4.get(index).copied(),
                    Family::V6 => self.lines6.get(index).copied(),
                },
                L3fwdConfigError::GatewayFamily { family: Family::V4, index } => self.lines4.get(index).copied(),
                L3fwdConfigError::GatewayFamily { family: Family::V6, index } => self.lines6.get(index).copied(),
                _ => None,
            };
            (route.map(|l| (l, "l3fwd.route")), Fail { field: None, kind: SpecErrorKind::L3fwd(e) })
        })?;
        Ok((NfSpec::L3fwd(self.cfg), Timeouts::default()))
    }
}

/// An address in the NFs' own form.
pub(crate) fn addr(s: &str) -> Result<IpAddr, &'static str> {
    Ok(match values::ip(s)? {
        NetIp::V4(a) => IpAddr::V4(a.octets()),
        NetIp::V6(a) => IpAddr::V6(a.octets()),
    })
}

/// A backend: `IP`, `IPv4:PORT` or `[IPv6]:PORT` (`[IPv6]` alone too).
pub(crate) fn backend(s: &str) -> Result<Backend, &'static str> {
    const E: &str = "backends IP, IPv4:PORT or [IPv6]:PORT separated by ';'";
    let (a, port) = if let Some(rest) = s.strip_prefix('[') {
        let (a, tail) = rest.split_once(']').ok_or(E)?;
        match tail {
            "" => (a, None),
            t => (a, Some(t.strip_prefix(':').ok_or(E)?)),
        }
    } else if s.matches(':').count() == 1 {
        let (a, p) = s.split_once(':').ok_or(E)?;
        (a, Some(p))
    } else {
        (s, None)
    };
    let port = port.map(|p| values::u16_dec(p).map_err(|_| E)).transpose()?;
    Ok(Backend { addr: addr(a).map_err(|_| E)?, port })
}

/// `lb`.
#[derive(Default)]
pub(crate) struct LbSection {
    cfg: LbConfig,
    max: Option<()>,
    capacity: Option<()>,
    sweep: Option<()>,
    timeouts: Timeouts,
    lines: Vec<usize>,
}

impl Section for LbSection {
    fn keys(&self) -> &'static [&'static str] {
        &["lb.vip", "lb.max_backends", "lb.affinity_capacity", "lb.sweep_buckets", "lb.affinity_timeout_ms"]
    }

    fn set(&mut self, key: &'static str, value: &str, line: usize) -> Result<(), Fail> {
        match key {
            "lb.affinity_timeout_ms" => timeout_ms(&mut self.timeouts.affinity_ms, value)?,
            "lb.max_backends" => {
                once(&mut self.max, ())?;
                self.cfg.max_backends = values::usize_dec(value).map_err(Fail::value)?;
            }
            "lb.affinity_capacity" => {
                once(&mut self.capacity, ())?;
                self.cfg.affinity_capacity = values::usize_dec(value).map_err(Fail::value)?;
            }
            "lb.sweep_buckets" => {
                once(&mut self.sweep, ())?;
                self.cfg.sweep_buckets = values::usize_dec(value).map_err(Fail::value)?;
            }
            _ => {
                let [a, port, proto, backends] = record(value, ["addr", "port", "proto", "backends"])?;
                let vip_proto = req("proto", proto, |s| match s {
                    "tcp" => Ok(6),
                    "udp" => Ok(17),
                    _ => Err("tcp or udp"),
                })?;
                let mut list = Vec::new();
                for b in values::list(backends.unwrap_or("")) {
                    list.push(backend(b).map_err(|e| Fail::expected("backends", e))?);
                }
                self.cfg.vips.push(Vip {
                    addr: req("addr", a, addr)?,
                    port: req("port", port, values::u16_dec)?,
                    proto: vip_proto,
                    backends: list,
                });
                self.lines.push(line);
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(NfSpec, Timeouts), FinishError> {
        self.cfg.validate().map_err(|e| {
            let (vip, field) = match e {
                LbConfigError::DuplicateVip { vip } => (Some(vip), Some("addr")),
                LbConfigError::BadVipProto { vip } => (Some(vip), Some("proto")),
                LbConfigError::Backends(
                    LbError::TooManyBackends { vip, .. }
                    | LbError::FamilyMismatch { vip, .. }
                    | LbError::DuplicateBackend { vip, .. }
                    | LbError::UnknownVip { vip },
                ) => (Some(vip), Some("backends")),
                _ => (None, None),
            };
            (vip.and_then(|v| self.lines.get(v).map(|&l| (l, "lb.vip"))), Fail { field, kind: SpecErrorKind::Lb(e) })
        })?;
        Ok((NfSpec::Lb(self.cfg), self.timeouts))
    }
}

/// `encrypt`.
#[derive(Default)]
pub(crate) struct EncryptSection {
    cfg: EncryptConfig,
    key: Option<()>,
    flows: Option<()>,
    clear: Option<()>,
    timeouts: Timeouts,
}

impl Section for EncryptSection {
    fn keys(&self) -> &'static [&'static str] {
        &["encrypt.key", "encrypt.udp_flows", "encrypt.clear", "encrypt.udp_idle_timeout_ms"]
    }

    fn set(&mut self, key: &'static str, value: &str, _line: usize) -> Result<(), Fail> {
        match key {
            "encrypt.key" => {
                once(&mut self.key, ())?;
                self.cfg.key = values::hex::<32>(value).map_err(|_| Fail::value("64 hex digits (a 32-byte key)"))?;
            }
            "encrypt.udp_idle_timeout_ms" => timeout_ms(&mut self.timeouts.udp_idle_ms, value)?,
            "encrypt.udp_flows" => {
                once(&mut self.flows, ())?;
                self.cfg.udp_flows = values::usize_dec(value).map_err(Fail::value)?;
            }
            _ => {
                once(&mut self.clear, ())?;
                self.cfg.clear = match value {
                    "pass" => ClearPolicy::Pass,
                    "drop" => ClearPolicy::Drop,
                    _ => return Err(Fail::value("pass or drop")),
                };
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(NfSpec, Timeouts), FinishError> {
        self.cfg.validate().map_err(|e| (None, Fail { field: None, kind: SpecErrorKind::Encrypt(e) }))?;
        Ok((NfSpec::Encrypt(self.cfg), self.timeouts))
    }
}

/// Scalar keys seen so far in a section (each may be given once).
#[derive(Default)]
struct Seen(Vec<&'static str>);

impl Seen {
    fn first(&mut self, key: &'static str) -> Result<(), Fail> {
        if self.0.contains(&key) {
            return Err(Fail { field: None, kind: SpecErrorKind::Duplicate });
        }
        self.0.push(key);
        Ok(())
    }
}

fn usize_value(v: &str) -> Result<usize, Fail> {
    values::usize_dec(v).map_err(Fail::value)
}

/// `accounting`.
#[derive(Default)]
pub(crate) struct AccountingSection {
    cfg: AccountingConfig,
    seen: Seen,
    timeouts: Timeouts,
    export_src: Option<[u8; 4]>,
}

impl Section for AccountingSection {
    fn keys(&self) -> &'static [&'static str] {
        &[
            "accounting.capacity",
            "accounting.export_ring",
            "accounting.event_ring",
            "accounting.sweep_buckets",
            "accounting.exports_per_batch",
            "accounting.idle_timeout_ms",
            "accounting.export",
            "accounting.export_src",
        ]
    }

    fn set(&mut self, key: &'static str, value: &str, _line: usize) -> Result<(), Fail> {
        if key == "accounting.idle_timeout_ms" {
            return timeout_ms(&mut self.timeouts.idle_ms, value);
        }
        self.seen.first(key)?;
        if key == "accounting.export" {
            // ipfix:PORT:IP:UDPPORT
            let bad = || Fail::value("ipfix:PORT:IPV4:UDPPORT, e.g. ipfix:1:192.0.2.10:4739");
            let rest = value.strip_prefix("ipfix:").ok_or_else(bad)?;
            let mut parts = rest.split(':');
            let (Some(port), Some(ip), Some(udp), None) = (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                return Err(bad());
            };
            let port = values::u16_dec(port).ok().filter(|&p| p < 2).ok_or_else(bad)? as u8;
            let collector = values::ipv4(ip).map_err(|_| bad())?.octets();
            let udp_port = values::u16_dec(udp).ok().filter(|&p| p > 0).ok_or_else(bad)?;
            let source = self.cfg.export.map_or(IpfixExport::DEFAULT_SOURCE, |e| e.source);
            self.cfg.export = Some(IpfixExport { port, collector, udp_port, source, domain: 0 });
            return Ok(());
        }
        if key == "accounting.export_src" {
            let source = values::ipv4(value).map_err(Fail::value)?.octets();
            self.export_src = Some(source);
            return Ok(());
        }
        let n = usize_value(value)?;
        let c = &mut self.cfg;
        match key {
            "accounting.capacity" => c.capacity = n,
            "accounting.export_ring" => c.export_ring = n,
            "accounting.event_ring" => c.event_ring = n,
            "accounting.sweep_buckets" => c.sweep_buckets = n,
            _ => c.exports_per_batch = n,
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> Result<(NfSpec, Timeouts), FinishError> {
        if let (Some(e), Some(src)) = (self.cfg.export.as_mut(), self.export_src) {
            e.source = src;
        }
        self.cfg.validate().map_err(|e| (None, Fail { field: None, kind: SpecErrorKind::Accounting(e) }))?;
        Ok((NfSpec::Accounting(self.cfg), self.timeouts))
    }
}

/// `nat`.
#[derive(Default)]
pub(crate) struct NatSection {
    cfg: NatConfig,
    seen: Seen,
    timeouts: Timeouts,
}

impl Section for NatSection {
    fn keys(&self) -> &'static [&'static str] {
        &[
            "nat.external",
            "nat.ports",
            "nat.inside_port",
            "nat.sweep_buckets",
            "nat.reclaims_per_batch",
            "nat.timeout_ms",
        ]
    }

    fn set(&mut self, key: &'static str, value: &str, _line: usize) -> Result<(), Fail> {
        if key == "nat.timeout_ms" {
            return timeout_ms(&mut self.timeouts.nat_ms, value);
        }
        self.seen.first(key)?;
        let c = &mut self.cfg;
        match key {
            "nat.external" => c.external_addr = values::ipv4(value).map_err(Fail::value)?.octets(),
            "nat.ports" => {
                let r = values::port_range(value).map_err(Fail::value)?;
                if r.0 == 0 {
                    return Err(Fail::value("a port range without port 0"));
                }
                c.ports = r;
            }
            "nat.inside_port" => {
                let n = values::u16_dec(value).ok().and_then(|n| u8::try_from(n).ok());
                c.inside_port = n.ok_or(Fail::value("a port number 0..=255"))?;
            }
            "nat.sweep_buckets" => c.sweep_buckets = usize_value(value)?,
            _ => c.reclaims_per_batch = usize_value(value)?,
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(NfSpec, Timeouts), FinishError> {
        self.cfg.validate().map_err(|e| (None, Fail { field: None, kind: SpecErrorKind::Nat(e) }))?;
        Ok((NfSpec::Nat(self.cfg), self.timeouts))
    }
}

/// `urlfilter`.
#[derive(Default)]
pub(crate) struct UrlFilterSection {
    cfg: UrlFilterConfig,
    seen: Seen,
    timeouts: Timeouts,
    /// The line of each banned pattern.
    lines: Vec<usize>,
}

impl Section for UrlFilterSection {
    fn keys(&self) -> &'static [&'static str] {
        &[
            "urlfilter.banned",
            "urlfilter.ports",
            "urlfilter.reset",
            "urlfilter.on_exhaustion",
            "urlfilter.undecided",
            "urlfilter.fragments",
            "urlfilter.window",
            "urlfilter.slabs",
            "urlfilter.flows",
            "urlfilter.inspect_timeout_ms",
            "urlfilter.flow_timeout_ms",
            "urlfilter.handshake_timeout_ms",
        ]
    }

    fn set(&mut self, key: &'static str, value: &str, line: usize) -> Result<(), Fail> {
        if key == "urlfilter.banned" {
            self.cfg.banned.push(value.into());
            self.lines.push(line);
            return Ok(());
        }
        match key {
            "urlfilter.inspect_timeout_ms" => return timeout_ms(&mut self.timeouts.inspect_ms, value),
            "urlfilter.flow_timeout_ms" => return timeout_ms(&mut self.timeouts.flow_ms, value),
            "urlfilter.handshake_timeout_ms" => return timeout_ms(&mut self.timeouts.handshake_ms, value),
            _ => {}
        }
        self.seen.first(key)?;
        let c = &mut self.cfg;
        match key {
            "urlfilter.ports" => {
                c.ports.clear();
                for p in values::list(value) {
                    c.ports.push(values::u16_dec(p).map_err(|_| Fail::value("ports 0..=65535 separated by ';'"))?);
                }
            }
            "urlfilter.reset" => c.reset = values::boolean(value).map_err(Fail::value)?,
            "urlfilter.on_exhaustion" => {
                c.on_exhaustion = match value {
                    "drop" => Exhaustion::Drop,
                    "allow" => Exhaustion::Allow,
                    _ => return Err(Fail::value("drop or allow")),
                }
            }
            "urlfilter.undecided" => {
                c.undecided = match value {
                    "deny" => Undecided::Deny,
                    "allow" => Undecided::Allow,
                    _ => return Err(Fail::value("deny or allow")),
                }
            }
            "urlfilter.fragments" => {
                c.fragments = match value {
                    "drop" => Fragments::Drop,
                    "pass" => Fragments::Pass,
                    _ => return Err(Fail::value("drop or pass")),
                }
            }
            "urlfilter.window" => c.window = usize_value(value)?,
            "urlfilter.slabs" => c.slabs = usize_value(value)?,
            _ => c.flows = usize_value(value)?,
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(NfSpec, Timeouts), FinishError> {
        self.cfg.validate().map_err(|e| {
            let at = match e {
                UrlFilterConfigError::BannedEmpty { index }
                | UrlFilterConfigError::BannedByte { index }
                | UrlFilterConfigError::BannedPort { index }
                | UrlFilterConfigError::BannedTooLong { index } => self.lines.get(index).copied(),
                _ => None,
            };
            (at.map(|l| (l, "urlfilter.banned")), Fail { field: None, kind: SpecErrorKind::UrlFilter(e) })
        })?;
        Ok((NfSpec::UrlFilter(self.cfg), self.timeouts))
    }
}

/// `nf=p4`: the spec a line per record, then each table's file a line per record.
#[derive(Default)]
pub(crate) struct P4Section {
    cfg: crate::nf::p4::P4Config,
    /// The text-form line of each spec line.
    spec_lines: Vec<usize>,
    /// Per table: its `p4.table=` line and the text-form line of each of its entries.
    table_lines: Vec<(usize, Vec<usize>)>,
}

impl Section for P4Section {
    fn keys(&self) -> &'static [&'static str] {
        &["p4.spec", "p4.table", "p4.entry"]
    }

    fn set(&mut self, key: &'static str, value: &str, line: usize) -> Result<(), Fail> {
        match key {
            "p4.spec" => {
                self.cfg.spec.push_str(value);
                self.cfg.spec.push('\n');
                self.spec_lines.push(line);
            }
            "p4.table" => {
                if value.is_empty() || self.cfg.tables.iter().any(|(n, _)| n == value) {
                    return Err(Fail::value("a table name, once"));
                }
                self.cfg.tables.push((value.into(), alloc::string::String::new()));
                self.table_lines.push((line, Vec::new()));
            }
            _ => {
                let (Some((_, file)), Some((_, lines))) = (self.cfg.tables.last_mut(), self.table_lines.last_mut())
                else {
                    return Err(Fail::value("a p4.table record before its entries"));
                };
                file.push_str(value);
                file.push('\n');
                lines.push(line);
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(NfSpec, Timeouts), FinishError> {
        use crate::nf::p4::P4ConfigError;
        use crate::p4::tables::BuildError;
        let fail = |why: &'static str| Fail { field: None, kind: SpecErrorKind::P4(why) };
        match self.cfg.validate() {
            Ok(()) => Ok((NfSpec::P4(self.cfg), Timeouts::default())),
            Err(P4ConfigError::NoSpec) => Err((None, fail("no spec"))),
            Err(P4ConfigError::Spec(e)) => {
                let at = self.spec_lines.get((e.line as usize).wrapping_sub(1)).map(|&l| (l, "p4.spec"));
                Err((at, fail(crate::p4::error_class(&e.kind))))
            }
            Err(P4ConfigError::Tables(BuildError::Entry { table, error })) => {
                let t = self.cfg.tables.iter().position(|(n, _)| *n == table);
                let at = t
                    .and_then(|t| self.table_lines.get(t))
                    .and_then(|(_, lines)| lines.get((error.line as usize).wrapping_sub(1)).map(|&l| (l, "p4.entry")));
                Err((at, fail(crate::p4::error_class(&error.kind))))
            }
            Err(P4ConfigError::Tables(BuildError::Refused { table, reason })) => {
                let t = self.cfg.tables.iter().position(|(n, _)| *n == table);
                let at = t.and_then(|t| self.table_lines.get(t)).map(|&(l, _)| (l, "p4.table"));
                Err((at, fail(reason)))
            }
            Err(P4ConfigError::Registers(_)) => Err((None, fail(REGISTERS_TOO_LARGE))),
        }
    }
}
