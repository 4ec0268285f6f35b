//! Chain files: TOML (`chains/*.toml`, [`schema`]) → the image's text form
//! (`cadence_core::nf::config`, docs/PROTOCOL.md "Chain configuration").
//!
//! [`compile`] deserializes the TOML (serde + `toml`, every leaf with its span), writes one
//! text record per setting, remembering where in the TOML each record and field came
//! from, and then runs the image's own parser ([`ChainSpec::parse`]) over the text: the
//! one set of rules decides what is valid, and its errors (line, key, field) are mapped
//! back to the TOML file, line and field:
//!
//! ```text
//! chains/x.toml:12: acl.rule[3].src: expected an IPv4/IPv6 prefix, got "10.0.0/33"
//! ```

pub mod schema;

use std::fmt;
use std::ops::Range;
use std::path::Path;

use anyhow::{Context, Result};
use cadence_core::nf::config::{ChainSpec, SpecError};
use toml::Spanned;

use schema::{ChainFile, PortSpec};

/// A chain file that passed every check.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The text form (boot module 0).
    pub text: String,
    /// What the image will parse from it.
    pub spec: ChainSpec,
}

impl Compiled {
    /// The NF names in order.
    pub fn names(&self) -> Vec<&'static str> {
        self.spec.names().collect()
    }
}

/// An error in a chain file: where (file, line, dotted field path) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainError {
    pub file: String,
    /// 1-based line in the TOML file.
    pub line: usize,
    /// `acl.rule[3].src`, or empty when the whole file is at fault.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ChainError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}:{}: {}", self.file, self.line, self.message)
        } else {
            write!(f, "{}:{}: {}: {}", self.file, self.line, self.field, self.message)
        }
    }
}

impl std::error::Error for ChainError {}

/// Reads and compiles the chain file at `path` (errors name the path as given).
pub fn load(path: &Path) -> Result<Compiled> {
    let src = std::fs::read_to_string(path).with_context(|| format!("reading chain file {}", path.display()))?;
    Ok(compile(&path.display().to_string(), &src)?)
}

/// 1-based line of byte `offset` in `src`.
fn line_of(src: &str, offset: usize) -> usize {
    src.as_bytes()[..offset.min(src.len())].iter().filter(|&&b| b == b'\n').count() + 1
}

/// Where a text-form field came from.
#[derive(Debug, Clone)]
struct FieldSrc {
    /// The field's name in the text form (`prio`).
    text: &'static str,
    /// Its name in TOML (`priority`).
    toml: &'static str,
    span: Range<usize>,
    raw: String,
}

/// Where a text-form line came from.
#[derive(Debug, Clone, Default)]
struct LineSrc {
    /// TOML path of the record (`acl.rule[3]`, `acl.default`).
    path: String,
    span: Range<usize>,
    fields: Vec<FieldSrc>,
}

/// The text being written, with the origin of every line.
#[derive(Debug, Default)]
struct Emit {
    text: String,
    /// `lines[i]`: text line `i + 1`.
    lines: Vec<LineSrc>,
    file: String,
    /// Line offsets of the TOML source, to turn spans into lines.
    src: String,
    /// The `[[port.vlan]]` tables as (port, VID): sub-interface `PORTS + i` is entry `i`.
    vlans: Vec<(u8, u16)>,
}

impl Emit {
    /// The text form's `port` field of a record with `port` and an optional `vlan`: the port,
    /// or the number of its `[[port.vlan]]` sub-interface with that VID (an error at `vlan`
    /// when the file declares none).
    fn port_field(
        &self,
        port: &Spanned<u8>,
        vlan: Option<&Spanned<u16>>,
        path: &str,
    ) -> Result<Option<(String, Range<usize>)>, ChainError> {
        let Some(v) = vlan else { return Ok(spanned_num(port)) };
        let (p, vid) = (*port.get_ref(), *v.get_ref());
        match self.vlans.iter().position(|&e| e == (p, vid)) {
            Some(i) => Ok(Some(((cadence_core::stage::PORTS + i).to_string(), v.span()))),
            None => Err(self.err(
                &v.span(),
                format!("{path}.vlan"),
                format!("port {p} has no sub-interface with vid {vid} (declare it with [[port.vlan]])"),
            )),
        }
    }

    fn err(&self, span: &Range<usize>, field: impl Into<String>, message: impl Into<String>) -> ChainError {
        ChainError {
            file: self.file.clone(),
            line: line_of(&self.src, span.start),
            field: field.into(),
            message: message.into(),
        }
    }

    /// A value must not break the line or record syntax.
    fn check_raw(&self, raw: &str, span: &Range<usize>, path: &str, list: bool) -> Result<(), ChainError> {
        let bad: &[char] = if list { &[',', ';', '\n', '\r'] } else { &['\n', '\r'] };
        if raw.contains(bad) {
            let what = if list { "',', ';' or a line break" } else { "a line break" };
            return Err(self.err(span, path, format!("must not contain {what}, got {raw:?}")));
        }
        Ok(())
    }

    fn push_line(&mut self, line: String, src: LineSrc) {
        self.text.push_str(&line);
        self.text.push('\n');
        self.lines.push(src);
    }

    /// `key=value`, from `path` at `span`.
    fn scalar(&mut self, key: &str, path: &str, span: Range<usize>, value: &str) -> Result<(), ChainError> {
        self.check_raw(value, &span, path, false)?;
        let raw = value.to_string();
        let fields = vec![FieldSrc { text: "", toml: "", span: span.clone(), raw }];
        self.push_line(format!("{key}={value}"), LineSrc { path: path.into(), span, fields });
        Ok(())
    }

    /// `key=a:1,b:2` from the TOML table `path` at `span`; each field: (text name, TOML
    /// name, value and its span) — absent ones are left out.
    fn record(&mut self, key: &str, path: &str, span: Range<usize>, fields: &[RecordField]) -> Result<(), ChainError> {
        let mut parts = Vec::new();
        let mut srcs = Vec::new();
        for (text, toml, v) in fields {
            let Some((raw, fspan)) = v else { continue };
            // List fields arrive joined with ';' (their items were checked one by one).
            if !LIST_FIELDS.contains(text) {
                self.check_raw(raw, fspan, &format!("{path}.{toml}"), true)?;
            }
            parts.push(format!("{text}:{raw}"));
            srcs.push(FieldSrc { text, toml, span: fspan.clone(), raw: raw.clone() });
        }
        self.push_line(format!("{key}={}", parts.join(",")), LineSrc { path: path.into(), span, fields: srcs });
        Ok(())
    }

    /// Maps an error of the text-form parser back to the TOML.
    fn map(&self, e: &SpecError) -> ChainError {
        let Some(l) = self.lines.get(e.line.wrapping_sub(1)) else {
            return self.err(&(0..0), "", format!("{e}"));
        };
        let kind = e.kind.to_string();
        match e.field.and_then(|f| l.fields.iter().find(|s| s.text == f)) {
            Some(f) => self.err(&f.span, format!("{}.{}", l.path, f.toml), format!("{kind}, got {:?}", f.raw)),
            None => match (e.field, l.fields.as_slice()) {
                // A missing record field.
                (Some(f), _) => self.err(&l.span, format!("{}.{}", l.path, toml_name(f)), kind),
                // A scalar: name the value.
                (None, [v]) if v.text.is_empty() => self.err(&v.span, &l.path, format!("{kind}, got {:?}", v.raw)),
                _ => self.err(&l.span, &l.path, kind),
            },
        }
    }
}

/// One field of a text record: its text name, its TOML name, and its value with the
/// value's span (absent fields are left out).
type RecordField = (&'static str, &'static str, Option<(String, Range<usize>)>);

/// Record fields whose value is a `;`-separated list.
const LIST_FIELDS: [&str; 1] = ["backends"];

/// The TOML name of a text-form record field (they differ only where TOML spells out).
fn toml_name(text: &str) -> &str {
    match text {
        "prio" => "priority",
        "sport" => "src_port",
        "dport" => "dst_port",
        other => other,
    }
}

fn spanned_str(s: &Spanned<String>) -> Option<(String, Range<usize>)> {
    Some((s.get_ref().clone(), s.span()))
}

fn spanned_num<T: ToString>(s: &Spanned<T>) -> Option<(String, Range<usize>)> {
    Some((s.get_ref().to_string(), s.span()))
}

fn spanned_port(s: &Spanned<PortSpec>) -> Option<(String, Range<usize>)> {
    Some((s.get_ref().text(), s.span()))
}

/// Compiles the chain file `src` (named `file` in errors).
pub fn compile(file: &str, src: &str) -> Result<Compiled, ChainError> {
    let mut emit = Emit { file: file.to_string(), src: src.to_string(), ..Emit::default() };
    let doc: ChainFile = toml::from_str(src).map_err(|e| {
        let span = e.span().unwrap_or(0..0);
        let field = path_at(src, &span);
        // The message without toml's own excerpt of the file.
        emit.err(&span, field, e.message().trim().to_string())
    })?;
    emit.push_line(format!("version={}", cadence_core::nf::config::VERSION), LineSrc::default());
    if let Some(v) = &doc.chain.get_ref().validate {
        emit.scalar("validate", "chain.validate", v.span(), v.get_ref())?;
    }
    emit_neigh(&mut emit, doc.port.as_ref(), doc.neigh.as_ref())?;
    // Every configured NF must be in the chain, once.
    let nfs = &doc.chain.get_ref().nfs;
    let configured: [(&str, Option<Range<usize>>); 8] = [
        ("acl", doc.acl.as_ref().map(Spanned::span)),
        ("lb", doc.lb.as_ref().map(Spanned::span)),
        ("accounting", doc.accounting.as_ref().map(Spanned::span)),
        ("nat", doc.nat.as_ref().map(Spanned::span)),
        ("urlfilter", doc.urlfilter.as_ref().map(Spanned::span)),
        ("encrypt", doc.encrypt.as_ref().map(Spanned::span)),
        ("l3fwd", doc.l3fwd.as_ref().map(Spanned::span)),
        ("p4", doc.p4.as_ref().map(Spanned::span)),
    ];
    for (name, span) in &configured {
        if let Some(span) = span
            && !nfs.iter().any(|n| n.get_ref() == name)
        {
            return Err(emit.err(span, *name, format!("configured but not in chain.nfs ({name:?} missing there)")));
        }
    }
    for (i, nf) in nfs.iter().enumerate() {
        if nfs[..i].iter().any(|n| n.get_ref() == nf.get_ref()) {
            return Err(emit.err(&nf.span(), format!("chain.nfs[{i}]"), format!("{:?} listed twice", nf.get_ref())));
        }
        let path = format!("chain.nfs[{i}]");
        emit.scalar("nf", &path, nf.span(), nf.get_ref())?;
        match nf.get_ref().as_str() {
            "acl" => emit_acl(&mut emit, doc.acl.as_ref())?,
            "lb" => emit_lb(&mut emit, doc.lb.as_ref())?,
            "encrypt" => emit_encrypt(&mut emit, doc.encrypt.as_ref())?,
            "accounting" => emit_accounting(&mut emit, doc.accounting.as_ref())?,
            "nat" => emit_nat(&mut emit, doc.nat.as_ref())?,
            "urlfilter" => emit_urlfilter(&mut emit, doc.urlfilter.as_ref())?,
            "l3fwd" => emit_l3fwd(&mut emit, doc.l3fwd.as_ref())?,
            "p4" => emit_p4(&mut emit, doc.p4.as_ref(), Path::new(file).parent().unwrap_or(Path::new(".")))?,
            // Unknown names: the text-form parser says which exist.
            _ => {}
        }
    }
    let spec = ChainSpec::parse(&emit.text).map_err(|e| emit.map(&e))?;
    Ok(Compiled { text: emit.text, spec })
}

/// `[p4]`: the spec a line per record, then each table file a line per record. The spec and
/// the tables are checked here first (the image's text form carries only the class of a P4
/// error): a refusal names the file, its line and the construct.
fn emit_p4(emit: &mut Emit, t: Option<&Spanned<schema::P4Table>>, dir: &Path) -> Result<(), ChainError> {
    let Some(t) = t else {
        return Err(emit.err(&(0..0), "p4", "chain.nfs lists p4 but the file has no [p4] table"));
    };
    let t = t.get_ref();
    let read = |path: &Spanned<String>, field: &str| {
        let full = dir.join(path.get_ref());
        std::fs::read_to_string(&full)
            .map_err(|e| emit.err(&path.span(), field, format!("reading {}: {e}", full.display())))
    };
    let spec = read(&t.spec, "p4.spec")?;
    let mut files = Vec::new();
    for (name, path) in &t.tables {
        files.push((name.clone(), read(path, &format!("p4.tables.{name}"))?, path));
    }
    let cfg = cadence_core::nf::p4::P4Config {
        spec: spec.clone(),
        tables: files.iter().map(|(n, text, _)| (n.clone(), text.clone())).collect(),
    };
    if let Err(e) = cfg.validate() {
        use cadence_core::nf::p4::P4ConfigError;
        use cadence_core::p4::tables::BuildError;
        let (span, field, what) = match &e {
            P4ConfigError::Tables(BuildError::Entry { table, .. } | BuildError::Refused { table, .. }) => {
                match files.iter().find(|(n, _, _)| n == table) {
                    Some((_, _, p)) => (p.span(), format!("p4.tables.{table}"), p.get_ref().clone()),
                    None => (t.spec.span(), "p4.spec".into(), t.spec.get_ref().clone()),
                }
            }
            _ => (t.spec.span(), "p4.spec".into(), t.spec.get_ref().clone()),
        };
        return Err(emit.err(&span, field, format!("{what}: {e}")));
    }
    for line in spec.lines() {
        emit.scalar("p4.spec", "p4.spec", t.spec.span(), line.trim_end_matches('\r'))?;
    }
    for (name, text, path) in &files {
        emit.scalar("p4.table", &format!("p4.tables.{name}"), path.span(), name)?;
        for line in text.lines() {
            emit.scalar("p4.entry", &format!("p4.tables.{name}"), path.span(), line.trim_end_matches('\r'))?;
        }
    }
    Ok(())
}

fn emit_acl(emit: &mut Emit, t: Option<&Spanned<schema::AclTable>>) -> Result<(), ChainError> {
    let Some(t) = t else { return Ok(()) };
    let t = t.get_ref();
    if let Some(d) = &t.default {
        emit.scalar("acl.default", "acl.default", d.span(), d.get_ref())?;
    }
    emit_numbers(
        emit,
        "acl",
        &[
            ("flow_capacity", t.flow_capacity.as_ref()),
            ("sweep_buckets", t.sweep_buckets.as_ref()),
            ("flow_timeout_ms", t.flow_timeout_ms.as_ref()),
        ],
    )?;
    for (i, r) in t.rule.iter().enumerate() {
        let span = r.span();
        let r = r.get_ref();
        emit.record(
            "acl.rule",
            &format!("acl.rule[{i}]"),
            span,
            &[
                ("prio", "priority", r.priority.as_ref().and_then(spanned_num)),
                ("src", "src", r.src.as_ref().and_then(spanned_str)),
                ("dst", "dst", r.dst.as_ref().and_then(spanned_str)),
                ("sport", "src_port", r.src_port.as_ref().and_then(spanned_port)),
                ("dport", "dst_port", r.dst_port.as_ref().and_then(spanned_port)),
                ("proto", "proto", r.proto.as_ref().and_then(spanned_str)),
                ("vlan", "vlan", r.vlan.as_ref().and_then(spanned_num)),
                ("action", "action", spanned_str(&r.action)),
            ],
        )?;
    }
    Ok(())
}

/// `key=value` for each optional number of a table.
fn emit_numbers(emit: &mut Emit, nf: &str, items: &[(&str, Option<&Spanned<u64>>)]) -> Result<(), ChainError> {
    for (k, v) in items {
        if let Some(v) = v {
            let full = format!("{nf}.{k}");
            emit.scalar(&full, &full, v.span(), &v.get_ref().to_string())?;
        }
    }
    Ok(())
}

fn emit_lb(emit: &mut Emit, t: Option<&Spanned<schema::LbTable>>) -> Result<(), ChainError> {
    let Some(t) = t else { return Ok(()) };
    let t = t.get_ref();
    emit_numbers(
        emit,
        "lb",
        &[
            ("max_backends", t.max_backends.as_ref()),
            ("affinity_capacity", t.affinity_capacity.as_ref()),
            ("sweep_buckets", t.sweep_buckets.as_ref()),
            ("affinity_timeout_ms", t.affinity_timeout_ms.as_ref()),
        ],
    )?;
    for (i, v) in t.vip.iter().enumerate() {
        let span = v.span();
        let v = v.get_ref();
        for (j, b) in v.backends.get_ref().iter().enumerate() {
            emit.check_raw(b, &v.backends.span(), &format!("lb.vip[{i}].backends[{j}]"), true)?;
        }
        emit.record(
            "lb.vip",
            &format!("lb.vip[{i}]"),
            span,
            &[
                ("addr", "addr", spanned_str(&v.addr)),
                ("port", "port", spanned_num(&v.port)),
                ("proto", "proto", spanned_str(&v.proto)),
                ("backends", "backends", Some((v.backends.get_ref().join(";"), v.backends.span()))),
            ],
        )?;
    }
    Ok(())
}

fn emit_accounting(emit: &mut Emit, t: Option<&Spanned<schema::AccountingTable>>) -> Result<(), ChainError> {
    let Some(t) = t else { return Ok(()) };
    let t = t.get_ref();
    for (key, v) in [("accounting.export", &t.export), ("accounting.export_src", &t.export_src)] {
        if let Some(v) = v {
            emit.scalar(key, key, v.span(), v.get_ref())?;
        }
    }
    emit_numbers(
        emit,
        "accounting",
        &[
            ("capacity", t.capacity.as_ref()),
            ("export_ring", t.export_ring.as_ref()),
            ("event_ring", t.event_ring.as_ref()),
            ("sweep_buckets", t.sweep_buckets.as_ref()),
            ("exports_per_batch", t.exports_per_batch.as_ref()),
            ("idle_timeout_ms", t.idle_timeout_ms.as_ref()),
        ],
    )
}

fn emit_nat(emit: &mut Emit, t: Option<&Spanned<schema::NatTable>>) -> Result<(), ChainError> {
    let Some(t) = t else { return Ok(()) };
    let t = t.get_ref();
    if let Some(v) = &t.external {
        emit.scalar("nat.external", "nat.external", v.span(), v.get_ref())?;
    }
    if let Some(v) = &t.ports {
        emit.scalar("nat.ports", "nat.ports", v.span(), &v.get_ref().text())?;
    }
    if let Some(v) = &t.inside_port {
        emit.scalar("nat.inside_port", "nat.inside_port", v.span(), &v.get_ref().to_string())?;
    }
    emit_numbers(
        emit,
        "nat",
        &[
            ("sweep_buckets", t.sweep_buckets.as_ref()),
            ("reclaims_per_batch", t.reclaims_per_batch.as_ref()),
            ("timeout_ms", t.timeout_ms.as_ref()),
        ],
    )
}

fn emit_urlfilter(emit: &mut Emit, t: Option<&Spanned<schema::UrlFilterTable>>) -> Result<(), ChainError> {
    let Some(t) = t else { return Ok(()) };
    let t = t.get_ref();
    for (i, b) in t.banned.iter().enumerate() {
        emit.scalar("urlfilter.banned", &format!("urlfilter.banned[{i}]"), b.span(), b.get_ref())?;
    }
    if let Some(v) = &t.ports {
        let list: Vec<String> = v.get_ref().iter().map(u16::to_string).collect();
        emit.scalar("urlfilter.ports", "urlfilter.ports", v.span(), &list.join(";"))?;
    }
    if let Some(v) = &t.reset {
        emit.scalar("urlfilter.reset", "urlfilter.reset", v.span(), &v.get_ref().to_string())?;
    }
    if let Some(v) = &t.on_exhaustion {
        emit.scalar("urlfilter.on_exhaustion", "urlfilter.on_exhaustion", v.span(), v.get_ref())?;
    }
    if let Some(v) = &t.undecided {
        emit.scalar("urlfilter.undecided", "urlfilter.undecided", v.span(), v.get_ref())?;
    }
    if let Some(v) = &t.fragments {
        emit.scalar("urlfilter.fragments", "urlfilter.fragments", v.span(), v.get_ref())?;
    }
    emit_numbers(
        emit,
        "urlfilter",
        &[
            ("window", t.window.as_ref()),
            ("slabs", t.slabs.as_ref()),
            ("flows", t.flows.as_ref()),
            ("inspect_timeout_ms", t.inspect_timeout_ms.as_ref()),
            ("flow_timeout_ms", t.flow_timeout_ms.as_ref()),
            ("handshake_timeout_ms", t.handshake_timeout_ms.as_ref()),
        ],
    )
}

fn emit_encrypt(emit: &mut Emit, t: Option<&Spanned<schema::EncryptTable>>) -> Result<(), ChainError> {
    let Some(t) = t else { return Ok(()) };
    let t = t.get_ref();
    emit.scalar("encrypt.key", "encrypt.key", t.key.span(), t.key.get_ref())?;
    emit_numbers(
        emit,
        "encrypt",
        &[("udp_flows", t.udp_flows.as_ref()), ("udp_idle_timeout_ms", t.udp_idle_timeout_ms.as_ref())],
    )?;
    if let Some(c) = &t.clear {
        emit.scalar("encrypt.clear", "encrypt.clear", c.span(), c.get_ref())?;
    }
    Ok(())
}

fn emit_l3fwd(emit: &mut Emit, t: Option<&Spanned<schema::L3fwdTable>>) -> Result<(), ChainError> {
    let Some(t) = t else { return Ok(()) };
    let t = t.get_ref();
    if let Some(v) = &t.lpm4 {
        emit.scalar("l3fwd.lpm4", "l3fwd.lpm4", v.span(), v.get_ref())?;
    }
    if let Some(v) = &t.first_stride4 {
        emit.scalar("l3fwd.first_stride4", "l3fwd.first_stride4", v.span(), &v.get_ref().to_string())?;
    }
    emit_numbers(emit, "l3fwd", &[("max_groups4", t.max_groups4.as_ref()), ("max_groups6", t.max_groups6.as_ref())])?;
    for (i, r) in t.route.iter().enumerate() {
        let span = r.span();
        let r = r.get_ref();
        emit.record(
            "l3fwd.route",
            &format!("l3fwd.route[{i}]"),
            span,
            &[
                ("prefix", "prefix", spanned_str(&r.prefix)),
                ("port", "port", emit.port_field(&r.port, r.vlan.as_ref(), &format!("l3fwd.route[{i}]"))?),
                ("mac", "mac", r.mac.as_ref().and_then(spanned_str)),
                ("via", "via", r.via.as_ref().and_then(spanned_str)),
            ],
        )?;
    }
    Ok(())
}

/// `[[port.addr]]`, `[[port.mtu]]` and `[neigh]`: top-level records of the text form (before the NFs).
fn emit_neigh(
    emit: &mut Emit,
    port: Option<&Spanned<schema::PortTable>>,
    neigh: Option<&Spanned<schema::NeighTable>>,
) -> Result<(), ChainError> {
    // Sub-interfaces first: the other records may name them.
    for (i, v) in port.map(|p| p.get_ref().vlan.as_slice()).unwrap_or_default().iter().enumerate() {
        let span = v.span();
        let v = v.get_ref();
        let iface = (cadence_core::stage::PORTS + i).to_string();
        emit.record(
            "port.vlan",
            &format!("port.vlan[{i}]"),
            span.clone(),
            &[
                ("iface", "port", Some((iface, span))),
                ("port", "port", spanned_num(&v.port)),
                ("vid", "vid", spanned_num(&v.vid)),
            ],
        )?;
        emit.vlans.push((*v.port.get_ref(), *v.vid.get_ref()));
    }
    for (i, a) in port.map(|p| p.get_ref().addr.as_slice()).unwrap_or_default().iter().enumerate() {
        let span = a.span();
        let a = a.get_ref();
        let path = format!("port.addr[{i}]");
        let port = emit.port_field(&a.port, a.vlan.as_ref(), &path)?;
        emit.record("port.addr", &path, span, &[("port", "port", port), ("addr", "addr", spanned_str(&a.addr))])?;
    }
    for (i, m) in port.map(|p| p.get_ref().mtu.as_slice()).unwrap_or_default().iter().enumerate() {
        let span = m.span();
        let m = m.get_ref();
        let path = format!("port.mtu[{i}]");
        let port = emit.port_field(&m.port, m.vlan.as_ref(), &path)?;
        emit.record("port.mtu", &path, span, &[("port", "port", port), ("mtu", "mtu", spanned_num(&m.mtu))])?;
    }
    let Some(n) = neigh else { return Ok(()) };
    let n = n.get_ref();
    emit_numbers(
        emit,
        "neigh",
        &[
            ("capacity", n.capacity.as_ref()),
            ("probes", n.probes.as_ref()),
            ("max_waiting", n.max_waiting.as_ref()),
            ("reachable_ms", n.reachable_ms.as_ref()),
            ("stale_ms", n.stale_ms.as_ref()),
            ("retrans_ms", n.retrans_ms.as_ref()),
            ("icmp_rate", n.icmp_rate.as_ref()),
            ("icmp_burst", n.icmp_burst.as_ref()),
        ],
    )?;
    for (i, s) in n.statics.iter().enumerate() {
        let span = s.span();
        let s = s.get_ref();
        let path = format!("neigh.static[{i}]");
        let port = emit.port_field(&s.port, s.vlan.as_ref(), &path)?;
        emit.record(
            "neigh.static",
            &path,
            span,
            &[("port", "port", port), ("ip", "ip", spanned_str(&s.ip)), ("mac", "mac", spanned_str(&s.mac))],
        )?;
    }
    Ok(())
}

/// The dotted path (`acl.rule[3].src`) of the deepest TOML key whose key or value span
/// holds `span` (for serde's errors, which carry a span but no path). Table spans are
/// their headers only, so every table is searched.
pub fn path_at(src: &str, span: &Range<usize>) -> String {
    use toml::de::{DeTable, DeValue};
    fn inside(r: &Range<usize>, span: &Range<usize>) -> bool {
        r.start <= span.start && span.end <= r.end.max(r.start + 1)
    }
    fn walk(t: &DeTable<'_>, span: &Range<usize>, prefix: &str) -> Option<String> {
        for (k, v) in t.iter() {
            let path = if prefix.is_empty() { k.get_ref().to_string() } else { format!("{prefix}.{}", k.get_ref()) };
            match v.get_ref() {
                DeValue::Table(t) => {
                    if let Some(p) = walk(t, span, &path) {
                        return Some(p);
                    }
                }
                DeValue::Array(a) => {
                    for (i, item) in a.iter().enumerate() {
                        let ip = format!("{path}[{i}]");
                        if let DeValue::Table(t) = item.get_ref()
                            && let Some(p) = walk(t, span, &ip)
                        {
                            return Some(p);
                        }
                        if inside(&item.span(), span) {
                            return Some(ip);
                        }
                    }
                }
                _ => {}
            }
            if inside(&k.span(), span) || inside(&v.span(), span) {
                return Some(path);
            }
        }
        None
    }
    DeTable::parse(src).ok().and_then(|doc| walk(doc.get_ref(), span, "")).unwrap_or_default()
}

#[cfg(test)]
mod tests;
