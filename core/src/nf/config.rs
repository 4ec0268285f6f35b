//! Chain configuration: the compact text form the image receives as boot module 0, its
//! no_std parser ([`ChainSpec::parse`]) and the factory that builds each worker's
//! [`Chain`] ([`ChainSpec::build`], [`ChainFactory::chain_for_worker`]).
//!
//! Users write TOML (`chains/*.toml`); `cargo xtask run --chain FILE` checks it and
//! converts it into this form, which maps 1:1 onto the NF config types (docs/PROTOCOL.md,
//! "Chain configuration"):
//!
//! ```text
//! # comments and blank lines are ignored
//! version=1
//! nf=acl
//! acl.default=permit
//! acl.rule=prio:10,src:10.0.0.0/8,dst:any,sport:any,dport:80-443,proto:tcp,action:deny
//! nf=lb
//! lb.vip=addr:10.1.0.1,port:80,proto:tcp,backends:10.2.0.1;10.2.0.2
//! nf=accounting
//! ```
//!
//! - One `key=value` record per line. The first record is `version=1`.
//! - `validate=l2|l3|l4` (at most once, anywhere after the version): how deep every frame is
//!   checked at least ([`crate::parse::Depth`]; default `l4`, every check). The chain checks
//!   deeper where an NF reads deeper (`Chain::set_validate`).
//! - `nf=NAME` appends an NF to the chain (in order) with its default configuration;
//!   the records `NAME.KEY=VALUE` that follow set its fields. A scalar key given twice
//!   is an error; list keys (`acl.rule`, `lb.vip`, `lb.backend`, `urlfilter.banned`,
//!   `l3fwd.route`) append.
//! - A record value is either a scalar or `field:value` pairs separated by `,`; lists
//!   inside a field are separated by `;`. Addresses are IPv4 or IPv6; prefixes
//!   `ADDR/LEN` or `any`; port ranges `LO-HI`, `P` or `any`; protocols `tcp`, `udp`,
//!   `icmp`, `icmpv6`, `any` or a number.
//! - Timeouts are `NAME.KEY_ms=N` records in milliseconds, 1..=[`MAX_TIMEOUT_MS`] (one
//!   day), e.g. `acl.flow_timeout_ms=10000`. The parser has no clock: it keeps them in
//!   milliseconds ([`Timeouts`]) and [`ChainSpec::build`] converts them to ticks of the
//!   clock's [`TickRate`]; absent ones keep the NF's default.
//! - When an NF's records end, its config is checked (`validate()`); an error names the
//!   `nf=` line.
//!
//! Every error names the line (1-based) and the key and field ([`SpecError`]), e.g.
//! `line 4: acl.rule.src: expected an IPv4/IPv6 prefix`.

extern crate alloc;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;

use super::accounting::{Accounting, AccountingConfig, AccountingConfigError, AccountingShared};
use super::acl::{Acl, AclConfig, AclConfigError, AclShared};
use super::encrypt::{Encrypt, EncryptConfig, EncryptConfigError, EncryptShared};
use super::l3fwd::{L3fwd, L3fwdConfig, L3fwdConfigError, L3fwdShared};
use super::lb::{Lb, LbConfig, LbConfigError, LbShared};
use super::nat::{Nat, NatConfig, NatConfigError, NatShared};
use super::p4::{P4, P4Config, P4ConfigError, P4Shared};
use super::urlfilter::{UrlFilter, UrlFilterConfig, UrlFilterConfigError, UrlFilterShared};
use super::{Chain, Egress, Nf};
use crate::neigh::{NeighShared, Router};
use crate::parse::Depth;
use crate::time::{Duration, TickRate};
use alloc::sync::Arc;

pub mod neigh;
pub(crate) mod sections;
pub mod text;
pub mod values;

/// The version this parser reads (`version=1`).
pub const VERSION: u32 = 1;

/// One NF of a chain, with its configuration.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum NfSpec {
    /// `nf=acl`.
    Acl(AclConfig),
    /// `nf=lb`.
    Lb(LbConfig),
    /// `nf=accounting`.
    Accounting(AccountingConfig),
    /// `nf=nat`.
    Nat(NatConfig),
    /// `nf=urlfilter`.
    UrlFilter(UrlFilterConfig),
    /// `nf=encrypt`.
    Encrypt(EncryptConfig),
    /// `nf=l3fwd`.
    L3fwd(L3fwdConfig),
    /// `nf=p4`.
    P4(P4Config),
}

impl NfSpec {
    /// The NF's name in the text form and in reports (`acl`, `lb`, …).
    pub fn name(&self) -> &'static str {
        match self {
            NfSpec::Acl(_) => "acl",
            NfSpec::Lb(_) => "lb",
            NfSpec::Accounting(_) => "accounting",
            NfSpec::Nat(_) => "nat",
            NfSpec::UrlFilter(_) => "urlfilter",
            NfSpec::Encrypt(_) => "encrypt",
            NfSpec::L3fwd(_) => "l3fwd",
            NfSpec::P4(_) => "p4",
        }
    }
}

/// Longest timeout the text form accepts: one day, in milliseconds.
pub const MAX_TIMEOUT_MS: u64 = 86_400_000;

/// An NF's timeouts as the text form gives them, in milliseconds (`None`: the NF's
/// default). Each NF has only its own keys; the others stay `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Timeouts {
    /// `acl.flow_timeout_ms`, `urlfilter.flow_timeout_ms`.
    pub flow_ms: Option<u64>,
    /// `lb.affinity_timeout_ms`.
    pub affinity_ms: Option<u64>,
    /// `accounting.idle_timeout_ms`.
    pub idle_ms: Option<u64>,
    /// `nat.timeout_ms`.
    pub nat_ms: Option<u64>,
    /// `urlfilter.inspect_timeout_ms`.
    pub inspect_ms: Option<u64>,
    /// `urlfilter.handshake_timeout_ms`.
    pub handshake_ms: Option<u64>,
    /// `encrypt.udp_idle_timeout_ms`.
    pub udp_idle_ms: Option<u64>,
}

/// A chain: its NFs in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChainSpec {
    /// The NFs, in order (empty: L2 forwarding). Their `Duration` timeouts are the NFs'
    /// defaults; [`ChainSpec::configs`] applies [`ChainSpec::timeouts`].
    pub nfs: Vec<NfSpec>,
    /// `timeouts[i]`: the timeouts the text form set for `nfs[i]` (missing entries:
    /// none set).
    pub timeouts: Vec<Timeouts>,
    /// `validate=`: how deep every frame is checked at least (default: every check).
    pub validate: Depth,
    /// `port.addr=`, `neigh.…=` ([`neigh`]): the ports' addresses and the neighbour table;
    /// `None` when the chain has none of those records.
    pub neigh: Option<neigh::NeighSpec>,
}

/// What went wrong on a line of the text form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum SpecErrorKind {
    /// The first record is not `version=…`.
    MissingVersion,
    /// `version=` names a version this parser does not read.
    UnsupportedVersion,
    /// The line is not `key=value`.
    NotKeyValue,
    /// `nf=` names no known NF.
    UnknownNf,
    /// The key belongs to no NF, or not to the NF of the current section.
    UnknownKey,
    /// A scalar key given twice for the same NF.
    Duplicate,
    /// A record field that the key does not have.
    UnknownField,
    /// A required record field is missing.
    MissingField,
    /// A record field given twice.
    DuplicateField,
    /// A value that does not parse; the text says what was expected.
    Expected(&'static str),
    /// More than [`MAX_NFS`] NFs.
    TooManyNfs,
    /// The ACL's `validate()` refused.
    Acl(AclConfigError),
    /// The load balancer's `validate()` refused.
    Lb(LbConfigError),
    /// Accounting's `validate()` refused.
    Accounting(AccountingConfigError),
    /// NAT's `validate()` refused.
    Nat(NatConfigError),
    /// The URL filter's `validate()` refused.
    UrlFilter(UrlFilterConfigError),
    /// Encrypt's `validate()` refused.
    Encrypt(EncryptConfigError),
    /// The L3 forwarder's `validate()` refused.
    L3fwd(L3fwdConfigError),
    /// The addresses or the neighbour table's settings are wrong.
    Neigh(crate::neigh::NeighConfigError),
    /// A route names interface `iface` past the ports, which no `port.vlan` record declares.
    NoSuchIface {
        /// The interface.
        iface: u8,
    },
    /// The P4 NF's spec or tables are refused (the class of error; `cadence-ctl` prints the
    /// whole message when it compiles the chain).
    P4(&'static str),
}

/// Most NFs in one chain.
pub const MAX_NFS: usize = 16;

/// A text-form error: the line (1-based), the key and field, and what is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct SpecError {
    /// 1-based line number.
    pub line: usize,
    /// The key of the record (`acl.rule`, `nf`, …), empty when unknown.
    pub key: &'static str,
    /// The field inside the record (`src`, `port`, …), if the error is in one.
    pub field: Option<&'static str>,
    /// What is wrong.
    pub kind: SpecErrorKind,
}

impl fmt::Display for SpecErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecErrorKind::MissingVersion => write!(f, "expected `version={VERSION}` as the first record"),
            SpecErrorKind::UnsupportedVersion => write!(f, "unsupported version (this image reads {VERSION})"),
            SpecErrorKind::NotKeyValue => f.write_str("expected key=value"),
            SpecErrorKind::UnknownNf => {
                f.write_str("unknown NF (known: acl, lb, accounting, nat, urlfilter, encrypt, l3fwd, p4)")
            }
            SpecErrorKind::UnknownKey => {
                f.write_str("unknown key for the current NF (keys are NAME.KEY after nf=NAME)")
            }
            SpecErrorKind::Duplicate => f.write_str("given twice"),
            SpecErrorKind::UnknownField => f.write_str("unknown field"),
            SpecErrorKind::MissingField => f.write_str("missing"),
            SpecErrorKind::DuplicateField => f.write_str("field given twice"),
            SpecErrorKind::Expected(what) => write!(f, "expected {what}"),
            SpecErrorKind::TooManyNfs => write!(f, "more than {MAX_NFS} NFs"),
            SpecErrorKind::Acl(e) => write!(f, "{e}"),
            SpecErrorKind::Lb(e) => write!(f, "{e}"),
            SpecErrorKind::Accounting(e) => write!(f, "{e}"),
            SpecErrorKind::Nat(e) => write!(f, "{e}"),
            SpecErrorKind::UrlFilter(e) => write!(f, "{e}"),
            SpecErrorKind::Encrypt(e) => write!(f, "{e}"),
            SpecErrorKind::L3fwd(e) => write!(f, "{e}"),
            SpecErrorKind::Neigh(e) => write!(f, "{e}"),
            SpecErrorKind::NoSuchIface { iface } => {
                write!(f, "port {iface} is neither a port nor a sub-interface a port.vlan record declares")
            }
            SpecErrorKind::P4(why) => f.write_str(why),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: ", self.line)?;
        match (self.key, self.field) {
            ("", _) => {}
            (k, None) => write!(f, "{k}: ")?,
            (k, Some(fl)) => write!(f, "{k}.{fl}: ")?,
        }
        write!(f, "{}", self.kind)
    }
}

/// An error of one record, before the parser adds the line number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fail {
    pub(crate) field: Option<&'static str>,
    pub(crate) kind: SpecErrorKind,
}

impl Fail {
    /// A value of `field` that does not parse.
    pub(crate) fn expected(field: &'static str, what: &'static str) -> Self {
        Fail { field: Some(field), kind: SpecErrorKind::Expected(what) }
    }
    /// A scalar value that does not parse.
    pub(crate) fn value(what: &'static str) -> Self {
        Fail { field: None, kind: SpecErrorKind::Expected(what) }
    }
}

/// An NF while its records are read: which keys it has, how each sets the config.
pub(crate) trait Section {
    /// The NF's keys, in full (`acl.default`, `acl.rule`).
    fn keys(&self) -> &'static [&'static str];
    /// Sets `key` (one of [`Section::keys`]) from `value`, found on `line`.
    fn set(&mut self, key: &'static str, value: &str, line: usize) -> Result<(), Fail>;
    /// Checks (`validate()`) and finishes the NF; an error names the line of the record
    /// at fault, if it is one record's.
    fn finish(self: Box<Self>) -> Result<(NfSpec, Timeouts), sections::FinishError>;
}

/// Sets a timeout in milliseconds once: 1..=[`MAX_TIMEOUT_MS`].
pub(crate) fn timeout_ms(slot: &mut Option<u64>, value: &str) -> Result<(), Fail> {
    const E: &str = "milliseconds 1..=86400000 (at most one day)";
    let ms = values::u64_dec(value).ok().filter(|ms| (1..=MAX_TIMEOUT_MS).contains(ms)).ok_or(Fail::value(E))?;
    once(slot, ms)
}

/// The fields `names` of a record value (`a:1,b:2`), each at most once, in the order of
/// `names`; any other field is an error.
pub(crate) fn record<'v, const N: usize>(
    value: &'v str,
    names: [&'static str; N],
) -> Result<[Option<&'v str>; N], Fail> {
    let mut out = [None; N];
    for item in values::Fields::new(value) {
        let Ok((name, v)) = item else {
            return Err(Fail { field: None, kind: SpecErrorKind::Expected("field:value pairs separated by ','") });
        };
        let Some(i) = names.iter().position(|n| *n == name.trim()) else {
            return Err(Fail { field: None, kind: SpecErrorKind::UnknownField });
        };
        if out[i].is_some() {
            return Err(Fail { field: Some(names[i]), kind: SpecErrorKind::DuplicateField });
        }
        out[i] = Some(v.trim());
    }
    Ok(out)
}

/// A required field of a [`record`].
pub(crate) fn required<'v>(field: &'static str, v: Option<&'v str>) -> Result<&'v str, Fail> {
    v.ok_or(Fail { field: Some(field), kind: SpecErrorKind::MissingField })
}

/// Parses field `field` of a [`record`] with `parse`, if present.
pub(crate) fn opt<T>(
    field: &'static str,
    v: Option<&str>,
    parse: impl FnOnce(&str) -> Result<T, &'static str>,
) -> Result<Option<T>, Fail> {
    v.map(|v| parse(v).map_err(|e| Fail::expected(field, e))).transpose()
}

/// Parses required field `field` of a [`record`] with `parse`.
pub(crate) fn req<T>(
    field: &'static str,
    v: Option<&str>,
    parse: impl FnOnce(&str) -> Result<T, &'static str>,
) -> Result<T, Fail> {
    parse(required(field, v)?).map_err(|e| Fail::expected(field, e))
}

/// Sets a scalar once: a second record of the same key is [`SpecErrorKind::Duplicate`].
pub(crate) fn once<T>(slot: &mut Option<T>, v: T) -> Result<(), Fail> {
    if slot.is_some() {
        return Err(Fail { field: None, kind: SpecErrorKind::Duplicate });
    }
    *slot = Some(v);
    Ok(())
}

/// The section of NF `name`, fresh (default configuration).
fn section(name: &str) -> Option<Box<dyn Section>> {
    Some(match name {
        "acl" => Box::<sections::AclSection>::default(),
        "lb" => Box::<sections::LbSection>::default(),
        "accounting" => Box::<sections::AccountingSection>::default(),
        "nat" => Box::<sections::NatSection>::default(),
        "urlfilter" => Box::<sections::UrlFilterSection>::default(),
        "encrypt" => Box::<sections::EncryptSection>::default(),
        "l3fwd" => Box::<sections::L3fwdSection>::default(),
        "p4" => Box::<sections::P4Section>::default(),
        _ => return None,
    })
}

impl ChainSpec {
    /// Bytes a frame adds to its IP packet on the wire, FCS aside: the Ethernet header and
    /// one 802.1Q tag.
    pub const L2_OVERHEAD: usize = 18;

    /// The longest frame port `port` must receive: the largest MTU (`port.mtu`) of the port
    /// and of the sub-interfaces on it, plus [`Self::L2_OVERHEAD`]; 1 518 without
    /// `port.mtu`. A NIC brought up for the port must take frames this long.
    pub fn longest_frame(&self, port: usize) -> usize {
        let mtu = match &self.neigh {
            None => crate::neigh::DEFAULT_MTU,
            Some(n) => {
                let vlans = n.cfg.vlan_map().unwrap_or_default();
                let on_port = |i: usize| vlans.port_of(i) == Some(port);
                n.cfg
                    .mtu
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| on_port(i))
                    .map(|(_, &m)| m)
                    .max()
                    .unwrap_or(crate::neigh::DEFAULT_MTU)
            }
        };
        usize::from(mtu) + Self::L2_OVERHEAD
    }

    /// The highest port the chain's configuration names, and the record that names it
    /// (`l3fwd.route`/next hop, `nat.inside_port`, `port.addr`, `neigh.static`, `port.mtu`);
    /// `None` when it names none. A dataplane with fewer ports refuses the chain at start
    /// rather than dropping what goes there. (A `p4` program's ports come from its tables and
    /// are not counted: frames it sends to a missing port are dropped as `tx_full`.)
    pub fn highest_port(&self) -> Option<(u8, &'static str)> {
        let mut named: Vec<(u8, &'static str)> = Vec::new();
        for nf in &self.nfs {
            match nf {
                NfSpec::L3fwd(c) => named.extend(c.next_hops.iter().map(|h| (h.port, "l3fwd.route"))),
                NfSpec::Nat(c) => named.push((c.inside_port, "nat.inside_port")),
                _ => {}
            }
        }
        if let Some(n) = &self.neigh {
            let c = &n.cfg;
            named.extend(c.addrs.iter().map(|a| (a.port, "port.addr")));
            named.extend(c.addrs6.iter().map(|a| (a.port, "port.addr")));
            named.extend(c.statics.iter().map(|s| (s.port, "neigh.static")));
            let set = c.mtu.iter().enumerate().filter(|&(_, &m)| m != crate::neigh::DEFAULT_MTU);
            named.extend(set.map(|(p, _)| (p as u8, "port.mtu")));
            named.extend(c.vlans.iter().map(|v| (v.port, "port.vlan")));
        }
        // A sub-interface counts as the port it is on.
        let vlans = self.neigh.as_ref().and_then(|n| n.cfg.vlan_map().ok()).unwrap_or_default();
        let port = |p: u8| vlans.port_of(usize::from(p)).map_or(p, |q| q as u8);
        named.into_iter().map(|(p, what)| (port(p), what)).max_by_key(|&(p, _)| p)
    }

    /// Parses the text form (see the module docs). Trailing NUL bytes (padding a boot
    /// module may carry) and `\r` line ends are accepted.
    pub fn parse(text: &str) -> Result<ChainSpec, SpecError> {
        let mut spec = ChainSpec::default();
        let mut version_seen = false;
        let mut validate_seen = false;
        // The open NF: (its `nf=` line, its section).
        let mut open: Option<(usize, Box<dyn Section>)> = None;
        let mut last_line = 0;
        // The `nf=` line of each NF, in order.
        let mut nf_lines = Vec::new();
        let text = text.trim_end_matches('\0');
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            last_line = line;
            let l = raw.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let err = |key: &'static str, f: Fail| SpecError { line, key, field: f.field, kind: f.kind };
            let Some((key, value)) = l.split_once('=') else {
                return Err(err("", Fail { field: None, kind: SpecErrorKind::NotKeyValue }));
            };
            let (key, value) = (key.trim(), value.trim());
            if !version_seen {
                if key != "version" {
                    return Err(err("", Fail { field: None, kind: SpecErrorKind::MissingVersion }));
                }
                if values::u32_dec(value) != Ok(VERSION) {
                    return Err(err("version", Fail { field: None, kind: SpecErrorKind::UnsupportedVersion }));
                }
                version_seen = true;
                continue;
            }
            if key == "validate" {
                if validate_seen {
                    return Err(err("validate", Fail { field: None, kind: SpecErrorKind::Duplicate }));
                }
                spec.validate = Depth::from_name(value).ok_or_else(|| {
                    err("validate", Fail { field: None, kind: SpecErrorKind::Expected("l2, l3 or l4") })
                })?;
                validate_seen = true;
                continue;
            }
            if let Some(&k) = neigh::KEYS.iter().find(|k| **k == key) {
                spec.neigh.get_or_insert_with(Default::default).set(k, value, line).map_err(|f| err(k, f))?;
                continue;
            }
            if key == "nf" {
                if let Some((at, s)) = open.take() {
                    spec.push(s, at)?;
                    nf_lines.push(at);
                }
                let Some(s) = section(value) else {
                    return Err(err("nf", Fail { field: None, kind: SpecErrorKind::UnknownNf }));
                };
                if spec.nfs.len() >= MAX_NFS {
                    return Err(err("nf", Fail { field: None, kind: SpecErrorKind::TooManyNfs }));
                }
                open = Some((line, s));
                continue;
            }
            let Some((_, s)) = open.as_mut() else {
                return Err(err("", Fail { field: None, kind: SpecErrorKind::UnknownKey }));
            };
            let Some(&k) = s.keys().iter().find(|k| **k == key) else {
                return Err(err("", Fail { field: None, kind: SpecErrorKind::UnknownKey }));
            };
            s.set(k, value, line).map_err(|f| err(k, f))?;
        }
        if !version_seen {
            return Err(SpecError {
                line: last_line.max(1),
                key: "",
                field: None,
                kind: SpecErrorKind::MissingVersion,
            });
        }
        if let Some((at, s)) = open.take() {
            spec.push(s, at)?;
            nf_lines.push(at);
        }
        if let Some(n) = &spec.neigh {
            n.finish().map_err(|(at, f)| {
                let (line, key) = at.unwrap_or((last_line.max(1), "neigh"));
                SpecError { line, key, field: f.field, kind: f.kind }
            })?;
        }
        // A route may name a sub-interface only if the chain declares it.
        let vlans = spec.neigh.as_ref().and_then(|n| n.cfg.vlan_map().ok()).unwrap_or_default();
        for (nf, &line) in spec.nfs.iter().zip(&nf_lines) {
            if let NfSpec::L3fwd(c) = nf
                && let Some(h) = c.next_hops.iter().find(|h| !vlans.exists(usize::from(h.port)))
            {
                let kind = SpecErrorKind::NoSuchIface { iface: h.port };
                return Err(SpecError { line, key: "l3fwd.route", field: None, kind });
            }
        }
        Ok(spec)
    }

    fn push(&mut self, s: Box<dyn Section>, line: usize) -> Result<(), SpecError> {
        let (nf, t) = s.finish().map_err(|(at, f)| {
            let (line, key) = at.unwrap_or((line, "nf"));
            SpecError { line, key, field: f.field, kind: f.kind }
        })?;
        self.nfs.push(nf);
        self.timeouts.push(t);
        Ok(())
    }

    /// The NF names in order (`acl`, `lb`, …).
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.nfs.iter().map(NfSpec::name)
    }

    /// The NF configs with [`ChainSpec::timeouts`] converted to ticks of a clock at
    /// `rate` (what [`ChainSpec::build`] builds). A timeout shorter than one tick is one
    /// tick.
    pub fn configs(&self, rate: TickRate) -> Vec<NfSpec> {
        let ticks = |ms: u64| Duration(rate.ticks_from_ms(ms).ticks().max(1));
        let set = |d: &mut Duration, ms: Option<u64>| {
            if let Some(ms) = ms {
                *d = ticks(ms);
            }
        };
        let mut out = self.nfs.clone();
        for (i, nf) in out.iter_mut().enumerate() {
            let t = self.timeouts.get(i).copied().unwrap_or_default();
            match nf {
                NfSpec::Acl(c) => set(&mut c.flow_timeout, t.flow_ms),
                NfSpec::Lb(c) => set(&mut c.affinity_timeout, t.affinity_ms),
                NfSpec::Accounting(c) => set(&mut c.idle_timeout, t.idle_ms),
                NfSpec::Nat(c) => set(&mut c.timeout, t.nat_ms),
                NfSpec::P4(_) => {}
                NfSpec::UrlFilter(c) => {
                    set(&mut c.inspect_timeout, t.inspect_ms);
                    set(&mut c.flow_timeout, t.flow_ms);
                    set(&mut c.handshake_timeout, t.handshake_ms);
                }
                NfSpec::Encrypt(c) => set(&mut c.udp_idle_timeout, t.udp_idle_ms),
                NfSpec::L3fwd(_) => {}
            }
        }
        out
    }

    /// Builds every NF's shared state once (tables, `Arc`ed) for chains with `egress`,
    /// timeouts in ticks of a clock at `rate` ([`ChainSpec::configs`]).
    pub fn build(&self, mut egress: Egress, rate: TickRate) -> Result<ChainFactory, BuildError> {
        let configs = self.configs(rate);
        let mut shared = Vec::with_capacity(configs.len());
        for (index, nf) in configs.iter().enumerate() {
            shared.push(SharedNf::try_new(nf, rate).map_err(|why| BuildError { index, nf: nf.name(), why })?);
        }
        let neigh = match &self.neigh {
            Some(n) => {
                Some(Arc::new(NeighShared::try_new(&n.config(rate), egress.own_mac).map_err(|e| BuildError {
                    index: shared.len(),
                    nf: "neigh",
                    why: SpecErrorKind::Neigh(e),
                })?))
            }
            None => None,
        };
        // The sub-interfaces (checked with the neighbour table above): the chain pops and
        // pushes their tags.
        egress.vlans = neigh.as_ref().map(|n| n.vlans()).unwrap_or_default();
        Ok(ChainFactory { shared, egress, validate: self.validate, neigh })
    }
}

/// The NF names the text form knows.
pub const NAMES: [&str; 8] = ["acl", "lb", "accounting", "nat", "urlfilter", "encrypt", "l3fwd", "p4"];

/// Building an NF's shared state failed (e.g. its tables do not fit in memory).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct BuildError {
    /// Position of the NF in the chain.
    pub index: usize,
    /// Its name.
    pub nf: &'static str,
    /// What went wrong.
    pub why: SpecErrorKind,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "nf {} ({}): {}", self.index, self.nf, self.why)
    }
}

/// The class of a P4 configuration error (see [`SpecErrorKind::P4`]).
fn p4_class(e: &P4ConfigError) -> &'static str {
    match e {
        P4ConfigError::NoSpec => "no P4 spec",
        P4ConfigError::Spec(e) => crate::p4::error_class(&e.kind),
        P4ConfigError::Tables(crate::p4::tables::BuildError::Entry { error, .. }) => {
            crate::p4::error_class(&error.kind)
        }
        P4ConfigError::Tables(crate::p4::tables::BuildError::Refused { reason, .. }) => reason,
        P4ConfigError::Registers(_) => sections::REGISTERS_TOO_LARGE,
    }
}

/// One NF's state shared by every worker.
#[derive(Debug)]
enum SharedNf {
    Acl(Arc<AclShared>),
    Lb(Arc<LbShared>),
    Accounting(Arc<AccountingShared>),
    Nat(Arc<NatShared>),
    UrlFilter(Arc<UrlFilterShared>),
    Encrypt(Arc<EncryptShared>),
    L3fwd(Arc<L3fwdShared>),
    P4(Arc<P4Shared>),
}

impl SharedNf {
    fn try_new(spec: &NfSpec, rate: TickRate) -> Result<SharedNf, SpecErrorKind> {
        Ok(match spec {
            NfSpec::Acl(c) => SharedNf::Acl(Arc::new(AclShared::try_new(c).map_err(SpecErrorKind::Acl)?)),
            NfSpec::Lb(c) => SharedNf::Lb(Arc::new(LbShared::try_new(c).map_err(SpecErrorKind::Lb)?)),
            NfSpec::Accounting(c) => {
                SharedNf::Accounting(Arc::new(AccountingShared::try_new(c).map_err(SpecErrorKind::Accounting)?))
            }
            NfSpec::Nat(c) => SharedNf::Nat(Arc::new(NatShared::try_new(c).map_err(SpecErrorKind::Nat)?)),
            NfSpec::UrlFilter(c) => {
                SharedNf::UrlFilter(Arc::new(UrlFilterShared::try_new(c).map_err(SpecErrorKind::UrlFilter)?))
            }
            NfSpec::Encrypt(c) => {
                SharedNf::Encrypt(Arc::new(EncryptShared::try_new(c).map_err(SpecErrorKind::Encrypt)?))
            }
            NfSpec::L3fwd(c) => SharedNf::L3fwd(Arc::new(L3fwdShared::try_new(c).map_err(SpecErrorKind::L3fwd)?)),
            NfSpec::P4(c) => {
                SharedNf::P4(Arc::new(P4Shared::try_new(c, rate).map_err(|e| SpecErrorKind::P4(p4_class(&e)))?))
            }
        })
    }

    fn name(&self) -> &'static str {
        match self {
            SharedNf::Acl(_) => "acl",
            SharedNf::Lb(_) => "lb",
            SharedNf::Accounting(_) => "accounting",
            SharedNf::Nat(_) => "nat",
            SharedNf::UrlFilter(_) => "urlfilter",
            SharedNf::Encrypt(_) => "encrypt",
            SharedNf::L3fwd(_) => "l3fwd",
            SharedNf::P4(_) => "p4",
        }
    }

    fn instance(&self) -> Box<dyn Nf> {
        match self {
            SharedNf::Acl(s) => Box::new(Acl::new(Arc::clone(s))),
            SharedNf::Lb(s) => Box::new(Lb::new(Arc::clone(s))),
            SharedNf::Accounting(s) => Box::new(Accounting::new(Arc::clone(s))),
            SharedNf::Nat(s) => Box::new(Nat::new(Arc::clone(s))),
            SharedNf::UrlFilter(s) => Box::new(UrlFilter::new(Arc::clone(s))),
            SharedNf::Encrypt(s) => Box::new(Encrypt::new(Arc::clone(s))),
            SharedNf::L3fwd(s) => Box::new(L3fwd::new(Arc::clone(s))),
            SharedNf::P4(s) => Box::new(P4::new(Arc::clone(s))),
        }
    }
}

/// The built chain: shared NF state plus egress settings; hands out per-worker chains.
#[derive(Debug)]
pub struct ChainFactory {
    shared: Vec<SharedNf>,
    egress: Egress,
    validate: Depth,
    neigh: Option<Arc<NeighShared>>,
}

impl ChainFactory {
    /// A fresh chain for one worker: new per-worker NF instances over the shared state.
    pub fn chain_for_worker(&self) -> Chain {
        let mut c = Chain::new(self.shared.iter().map(SharedNf::instance).collect(), self.egress.clone());
        c.set_validate(self.validate);
        c.set_router(self.neigh.as_ref().map(|n| Router::new(Arc::clone(n))));
        c
    }

    /// The egress settings every worker's chain gets (MACs, control, sub-interfaces).
    pub fn egress(&self) -> &Egress {
        &self.egress
    }

    /// The neighbour table and addresses, if the chain has them.
    pub fn neigh(&self) -> Option<&Arc<NeighShared>> {
        self.neigh.as_ref()
    }

    /// NFs in the chain.
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// Whether the chain has no NF (plain L2 forwarding).
    pub fn is_empty(&self) -> bool {
        self.shared.is_empty()
    }

    /// The NF names, in chain order.
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.shared.iter().map(SharedNf::name)
    }

    /// The shared state of the chain's first ACL (management channel).
    pub fn acl(&self) -> Option<&Arc<AclShared>> {
        self.shared.iter().find_map(|s| if let SharedNf::Acl(a) = s { Some(a) } else { None })
    }

    /// The shared state of the chain's first load balancer.
    pub fn lb(&self) -> Option<&Arc<LbShared>> {
        self.shared.iter().find_map(|s| if let SharedNf::Lb(a) = s { Some(a) } else { None })
    }

    /// The shared state of the chain's first NAT.
    pub fn nat(&self) -> Option<&Arc<NatShared>> {
        self.shared.iter().find_map(|s| if let SharedNf::Nat(a) = s { Some(a) } else { None })
    }

    /// The shared state of the chain's first Accounting NF.
    pub fn accounting(&self) -> Option<&Arc<AccountingShared>> {
        self.shared.iter().find_map(|s| if let SharedNf::Accounting(a) = s { Some(a) } else { None })
    }

    /// The shared state of the chain's first L3 forwarder.
    pub fn l3fwd(&self) -> Option<&Arc<L3fwdShared>> {
        self.shared.iter().find_map(|s| if let SharedNf::L3fwd(a) = s { Some(a) } else { None })
    }

    /// The shared state of the chain's first P4 program.
    pub fn p4(&self) -> Option<&Arc<P4Shared>> {
        self.shared.iter().find_map(|s| if let SharedNf::P4(a) = s { Some(a) } else { None })
    }
}

#[cfg(test)]
mod tests;
