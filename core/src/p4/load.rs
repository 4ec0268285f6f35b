//! Resolving the declarations into a [`Program`], in DPDK's order (register and meter arrays,
//! structs, headers, metadata, actions in text order, tables, selectors, learners, `apply`),
//! with DPDK 22.11's checks (`rte_swx_pipeline.c`: `*_register`, `*_config`).

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use super::error::{ErrorKind, SpecError};
use super::instr::{self, Scope};
use super::lex::number;
use super::parse::{Raw, RawDefault, RawTable, RawTableAction};
use super::program::*;

/// Largest struct (header, metadata, arguments) accepted, in bytes: far above any protocol
/// header, and keeps every offset in `u32` arithmetic without overflow.
pub(crate) const MAX_STRUCT_BYTES: u32 = 1 << 16;

fn err(line: u32, kind: ErrorKind) -> SpecError {
    SpecError::new(line, kind)
}

fn not_found(line: u32, what: &'static str, name: &str) -> SpecError {
    err(line, ErrorKind::NotFound { what, name: name.into() })
}

fn dup(line: u32, what: &'static str, name: &str) -> SpecError {
    err(line, ErrorKind::Duplicate { what, name: name.into() })
}

fn invalid(line: u32, name: &str, rule: &'static str) -> SpecError {
    err(line, ErrorKind::Invalid { name: name.into(), rule })
}

/// Resolves `h.HEADER.FIELD`, `m.FIELD` or (inside an action whose argument struct is
/// `args`) `t.FIELD`.
pub(crate) fn resolve_field(p: &Program, name: &str, args: Option<u16>) -> Option<Field> {
    let (space, st, base, fname) = if let Some(rest) = name.strip_prefix("h.") {
        let (h, f) = rest.split_once('.')?;
        let id = p.header(h)?;
        let hd = p.headers.get(usize::from(id))?;
        (Space::Header(id), hd.struct_id, hd.offset, f)
    } else if let Some(f) = name.strip_prefix("m.") {
        (Space::Meta, p.metadata, 0, f)
    } else if let Some(f) = name.strip_prefix("t.") {
        (Space::Arg, args?, 0, f)
    } else {
        return None;
    };
    let fd = p.structs.get(usize::from(st))?.fields.iter().find(|x| x.name == fname)?;
    Some(Field { space, offset: base + fd.offset, bits: fd.bits })
}

/// Loads and validates a whole spec.
pub(crate) fn load(raw: &Raw<'_>) -> Result<Program, SpecError> {
    let mut p = Program {
        structs: Vec::new(),
        headers: Vec::new(),
        metadata: 0,
        header_bytes: 0,
        meta_bytes: 0,
        actions: Vec::new(),
        tables: Vec::new(),
        selectors: Vec::new(),
        learners: Vec::new(),
        regarrays: Vec::new(),
        metarrays: Vec::new(),
        apply: Vec::new(),
        mov_runs: Vec::new(),
    };
    for &(line, name, size, initval) in &raw.regarrays {
        if p.regarrays.iter().any(|r| r.name == name) {
            return Err(dup(line, "regarray", name));
        }
        if size == 0 {
            return Err(invalid(line, name, "a regarray's size must be at least 1"));
        }
        if p.regarrays.len() >= usize::from(u16::MAX) {
            return Err(invalid(line, name, "too many regarrays"));
        }
        p.regarrays.push(RegArrayDef { name: name.into(), size, initval });
    }
    for &(line, name, size) in &raw.metarrays {
        if p.metarrays.iter().any(|r| r.name == name) {
            return Err(dup(line, "metarray", name));
        }
        if size == 0 {
            return Err(invalid(line, name, "a metarray's size must be at least 1"));
        }
        p.metarrays.push(MetArrayDef { name: name.into(), size });
    }
    structs(&mut p, raw)?;
    for &(line, name, st) in &raw.headers {
        if p.header(name).is_some() {
            return Err(dup(line, "header", name));
        }
        let sid = struct_id(&p, st).ok_or_else(|| not_found(line, "struct", st))?;
        let bytes = p.structs.get(usize::from(sid)).map_or(0, |s| s.bytes);
        // DPDK 22.11 keeps the validity bits of a packet's headers in one `u64`
        // (`rte_swx_pipeline_packet_header_register`: `n_headers < 64`).
        if p.headers.len() >= 64 {
            return Err(invalid(line, name, "a program has at most 64 headers"));
        }
        let offset = p.header_bytes;
        p.header_bytes = offset
            .checked_add(bytes)
            .filter(|&b| b <= MAX_STRUCT_BYTES * 4)
            .ok_or_else(|| invalid(line, name, "the headers take more than 256 KiB in all"))?;
        p.headers.push(HeaderDef { name: name.into(), struct_id: sid, offset, bytes });
    }
    let Some((mline, mst)) = raw.metadata else {
        return Err(err(0, ErrorKind::NotFound { what: "statement", name: "metadata".into() }));
    };
    p.metadata = struct_id(&p, mst).ok_or_else(|| not_found(mline, "struct", mst))?;
    p.meta_bytes = p.structs.get(usize::from(p.metadata)).map_or(0, |s| s.bytes);

    for a in &raw.actions {
        if p.action(a.name).is_some() {
            return Err(dup(a.line, "action", a.name));
        }
        if p.actions.len() >= usize::from(u16::MAX) {
            return Err(invalid(a.line, a.name, "too many actions"));
        }
        let args = match a.args {
            None => None,
            Some(st) => Some(struct_id(&p, st).ok_or_else(|| not_found(a.line, "struct", st))?),
        };
        let arg_bytes = args.and_then(|s| p.structs.get(usize::from(s))).map_or(0, |s| s.bytes);
        let instrs = instr::translate_list(&p, Scope::Action { args }, &a.instrs)?;
        if !instrs.iter().any(|i| matches!(i, Instr::Return | Instr::Tx { .. } | Instr::Drop)) {
            return Err(invalid(a.line, a.name, "an action needs at least one `return`, `tx` or `drop`"));
        }
        let learns = instrs.iter().any(|i| matches!(i, Instr::Learn { .. } | Instr::Forget));
        let run = fuse_moves(&mut p.mov_runs, &instrs);
        p.actions.push(ActionDef { name: a.name.into(), args, arg_bytes, instrs, run, learns });
    }

    for t in &raw.tables {
        let def = table(&p, t)?;
        p.tables.push(def);
    }
    for s in &raw.selectors {
        let def = selector(&p, s)?;
        p.selectors.push(def);
    }
    for l in &raw.learners {
        let def = learner(&p, l)?;
        p.learners.push(def);
    }

    let Some((aline, instrs)) = &raw.apply else {
        return Err(err(0, ErrorKind::NotFound { what: "block", name: "apply".into() }));
    };
    let apply = instr::translate_list(&p, Scope::Apply, instrs)?;
    let first_line = instrs.first().map_or(*aline, |i| i.line);
    if !matches!(apply.first(), Some(Instr::Rx { .. })) {
        return Err(invalid(first_line, "apply", "the first instruction of `apply` must be `rx`"));
    }
    if !apply.iter().any(|i| matches!(i, Instr::Tx { .. } | Instr::Drop)) {
        return Err(invalid(*aline, "apply", "`apply` needs at least one `tx` or `drop`"));
    }
    if !matches!(apply.last(), Some(Instr::Tx { .. } | Instr::Drop | Instr::Jmp { .. })) {
        let last = instrs.last().map_or(*aline, |i| i.line);
        return Err(invalid(last, "apply", "the last instruction of `apply` must be `tx`, `drop` or `jmp`"));
    }
    p.apply = apply;
    Ok(p)
}

fn struct_id(p: &Program, name: &str) -> Option<u16> {
    p.structs.iter().position(|s| s.name == name).map(|i| i as u16)
}

fn structs(p: &mut Program, raw: &Raw<'_>) -> Result<(), SpecError> {
    for s in &raw.structs {
        if struct_id(p, s.name).is_some() {
            return Err(dup(s.line, "struct", s.name));
        }
        if s.fields.is_empty() {
            return Err(invalid(s.line, s.name, "a struct needs at least one field"));
        }
        if p.structs.len() >= usize::from(u16::MAX) {
            return Err(invalid(s.line, s.name, "too many structs"));
        }
        let mut fields: Vec<FieldDef> = Vec::with_capacity(s.fields.len());
        let mut bytes = 0u32;
        for &(line, ty, name) in &s.fields {
            if ty.starts_with("varbit<") {
                return Err(err(line, ErrorKind::Unsupported { what: "varbit field", name: name.into() }));
            }
            let bits = ty
                .strip_prefix("bit<")
                .and_then(|r| r.strip_suffix('>'))
                .ok_or_else(|| err(line, ErrorKind::Syntax { what: "struct field", expected: "bit<N> NAME" }))?;
            let bits = number(bits).and_then(|b| u32::try_from(b).ok()).unwrap_or(0);
            if bits == 0 || !bits.is_multiple_of(8) {
                return Err(err(
                    line,
                    ErrorKind::Number { text: ty.into(), rule: "a field's width must be a nonzero multiple of 8 bits" },
                ));
            }
            if fields.iter().any(|f| f.name == name) {
                return Err(dup(line, "field", name));
            }
            let offset = bytes;
            bytes = bytes
                .checked_add(bits / 8)
                .filter(|&b| b <= MAX_STRUCT_BYTES)
                .ok_or_else(|| invalid(line, s.name, "a struct is at most 64 KiB"))?;
            fields.push(FieldDef { name: name.into(), bits, offset });
        }
        p.structs.push(StructDef { name: s.name.into(), fields, bytes });
    }
    Ok(())
}

/// The actions of a table or learner, checked.
fn table_actions(p: &Program, list: &[RawTableAction<'_>], learner: bool) -> Result<Vec<TableAction>, SpecError> {
    if list.is_empty() {
        return Err(invalid(0, "actions", "a table needs at least one action"));
    }
    let mut out: Vec<TableAction> = Vec::with_capacity(list.len());
    for a in list {
        let id = p.action(a.name).ok_or_else(|| not_found(a.line, "action", a.name))?;
        if out.iter().any(|x| x.action == id) {
            return Err(dup(a.line, "action", a.name));
        }
        let def = p.actions.get(usize::from(id));
        if !learner && def.is_some_and(|d| d.learns) {
            return Err(invalid(
                a.line,
                a.name,
                "an action that runs `learn` or `forget` belongs to a learner, not a table",
            ));
        }
        out.push(TableAction { action: id, table_only: a.table_only, default_only: a.default_only });
    }
    Ok(out)
}

/// The default action: one of the table's actions, not `@tableonly`, its arguments given
/// as `NAME VALUE` pairs in the order of its argument struct (or `args none`).
fn default(
    p: &Program,
    line: u32,
    d: Option<&RawDefault<'_>>,
    actions: &[TableAction],
) -> Result<DefaultAction, SpecError> {
    let Some(d) = d else {
        return Err(invalid(line, "default_action", "a table needs a `default_action` statement"));
    };
    let id = p.action(d.name).ok_or_else(|| not_found(d.line, "action", d.name))?;
    let Some(ta) = actions.iter().find(|a| a.action == id) else {
        return Err(invalid(d.line, d.name, "the default action is not in the table's `actions`"));
    };
    if ta.table_only {
        return Err(invalid(d.line, d.name, "a `@tableonly` action cannot be the default action"));
    }
    let def = p.actions.get(usize::from(id)).ok_or_else(|| not_found(d.line, "action", d.name))?;
    let fields = p.action_args(id);
    let mut args = alloc::vec![0u8; def.arg_bytes as usize];
    if !d.args.is_empty() {
        if fields.is_empty() {
            return Err(invalid(d.line, d.name, "arguments given to an action of `args none`"));
        }
        if d.args.len() != fields.len() * 2 {
            return Err(invalid(
                d.line,
                d.name,
                "the default action needs `NAME VALUE` for each of its arguments, in order",
            ));
        }
        for (f, pair) in fields.iter().zip(d.args.chunks(2)) {
            let [n, v] = pair else { continue };
            if *n != f.name {
                return Err(invalid(d.line, n, "not the next argument of the default action"));
            }
            let val = number(v)
                .ok_or_else(|| err(d.line, ErrorKind::Number { text: (*v).to_string(), rule: "expected a number" }))?;
            Program::encode_arg(f, val, &mut args);
        }
    }
    Ok(DefaultAction { action: id, args, is_const: d.is_const })
}

/// Key fields: all in one header or all in the metadata, none twice (DPDK's
/// `table_match_fields_check`).
fn key_fields(p: &Program, keys: &[(u32, &str, Option<&str>)]) -> Result<Vec<KeyField>, SpecError> {
    let mut out: Vec<KeyField> = Vec::with_capacity(keys.len());
    for &(line, name, kind) in keys {
        if !(name.starts_with("h.") || name.starts_with("m.")) {
            return Err(invalid(line, name, "a key field is a header or metadata field"));
        }
        let f = resolve_field(p, name, None).ok_or_else(|| not_found(line, "field", name))?;
        let kind = match kind {
            None | Some("exact") => MatchKind::Exact,
            Some("lpm") => MatchKind::Lpm,
            Some("wildcard") => MatchKind::Wildcard,
            Some(k) => return Err(invalid(line, k, "a match kind is `exact`, `lpm` or `wildcard`")),
        };
        if let Some(first) = out.first()
            && first.field.space != f.space
        {
            return Err(invalid(line, name, "all key fields must be in the same header, or all in the metadata"));
        }
        if out.iter().any(|k| k.field.offset == f.offset) {
            return Err(dup(line, "key field", name));
        }
        out.push(KeyField { field: f, kind });
    }
    if out.iter().filter(|k| k.kind == MatchKind::Lpm).count() > 1 {
        let line = keys.first().map_or(0, |k| k.0);
        return Err(invalid(line, "lpm", "a table has at most one `lpm` key field"));
    }
    Ok(out)
}

fn check_name(p: &Program, line: u32, name: &str) -> Result<(), SpecError> {
    // Indexes are `u16` ([`TableRef`]).
    if [p.tables.len(), p.selectors.len(), p.learners.len()].iter().any(|&n| n >= usize::from(u16::MAX)) {
        return Err(invalid(line, name, "too many tables"));
    }
    if p.table(name).is_some() || p.selector(name).is_some() || p.learner(name).is_some() {
        return Err(dup(line, "table", name));
    }
    Ok(())
}

fn hash_statement(t: &RawTable<'_>) -> Result<(), SpecError> {
    match t.hash {
        None | Some((_, "jhash" | "crc32")) => Ok(()),
        Some((line, f)) => Err(err(line, ErrorKind::NotFound { what: "hash function", name: f.into() })),
    }
}

fn table(p: &Program, t: &RawTable<'_>) -> Result<TableDef, SpecError> {
    check_name(p, t.line, t.name)?;
    hash_statement(t)?;
    let keys = key_fields(p, &t.keys)?;
    let actions = table_actions(p, &t.actions, false).map_err(|e| SpecError { line: e.line.max(t.line), ..e })?;
    let default = default(p, t.line, t.default.as_ref(), &actions)?;
    let size = t.size.map_or(0, |s| s.1);
    Ok(TableDef { name: t.name.into(), keys, actions, default, size, line: t.line })
}

fn learner(p: &Program, t: &RawTable<'_>) -> Result<LearnerDef, SpecError> {
    check_name(p, t.line, t.name)?;
    hash_statement(t)?;
    if t.keys.is_empty() {
        return Err(invalid(t.line, t.name, "a learner needs at least one key field"));
    }
    let keys = key_fields(p, &t.keys)?.into_iter().map(|k| k.field).collect();
    let actions = table_actions(p, &t.actions, true).map_err(|e| SpecError { line: e.line.max(t.line), ..e })?;
    // DPDK's `learner_action_learning_check`: what an action learns is one of this learner's
    // actions.
    for ta in &actions {
        let Some(def) = p.actions.get(usize::from(ta.action)) else { continue };
        for i in &def.instrs {
            if let Instr::Learn { action, .. } = i
                && !actions.iter().any(|a| a.action == *action)
            {
                let name = p.actions.get(usize::from(*action)).map_or(String::new(), |a| a.name.clone());
                return Err(invalid(
                    t.line,
                    &name,
                    "an action learns an action that is not one of the learner's actions",
                ));
            }
        }
    }
    let default = default(p, t.line, t.default.as_ref(), &actions)?;
    let Some((size_line, size)) = t.size else {
        return Err(invalid(t.line, t.name, "a learner needs a `size` statement"));
    };
    if size == 0 {
        return Err(invalid(size_line, t.name, "a learner's size must be at least 1"));
    }
    if t.timeouts.is_empty() {
        return Err(invalid(t.line, t.name, "a learner needs a `timeout` block with at least one timeout"));
    }
    let mut timeouts = Vec::with_capacity(t.timeouts.len());
    for &(line, s) in &t.timeouts {
        if s == 0 {
            return Err(invalid(line, t.name, "a learner timeout is at least 1 second"));
        }
        timeouts.push(s);
    }
    Ok(LearnerDef { name: t.name.into(), keys, actions, default, size, timeouts, line: t.line })
}

fn selector(p: &Program, s: &super::parse::RawSelector<'_>) -> Result<SelectorDef, SpecError> {
    check_name(p, s.line, s.name)?;
    let meta = |what: &'static str, f: Option<(u32, &str)>| -> Result<Field, SpecError> {
        let (line, name) = f.ok_or_else(|| invalid(s.line, what, "a selector needs this statement"))?;
        let fd = resolve_field(p, name, None)
            .filter(|f| f.space == Space::Meta)
            .ok_or_else(|| not_found(line, "metadata field", name))?;
        if fd.bits > 32 {
            return Err(err(
                line,
                ErrorKind::Width {
                    name: name.into(),
                    bits: fd.bits,
                    rule: "a selector's group and member ids are at most 32 bits",
                },
            ));
        }
        Ok(fd)
    };
    let group_id = meta("group_id", s.group_id)?;
    let member_id = meta("member_id", s.member_id)?;
    if s.selector.is_empty() {
        return Err(invalid(s.line, s.name, "a selector needs at least one selector field"));
    }
    let keys: Vec<_> = s.selector.iter().map(|&(l, f)| (l, f, None)).collect();
    let selector: Vec<Field> = key_fields(p, &keys)?.into_iter().map(|k| k.field).collect();
    // DPDK hashes the span from the first field to the end of the last, at most 64 bytes.
    let start = selector.iter().map(|f| f.offset).min().unwrap_or(0);
    let end = selector.iter().map(|f| f.offset + f.bits / 8).max().unwrap_or(0);
    if end.saturating_sub(start) > 64 {
        return Err(invalid(s.line, s.name, "selector fields within 64 bytes of each other"));
    }
    let n_groups_max = s
        .n_groups_max
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(s.line, s.name, "a selector needs `n_groups_max` of at least 1"))?;
    let n_members_per_group_max = s
        .n_members_per_group_max
        .filter(|&n| n > 0)
        .ok_or_else(|| invalid(s.line, s.name, "a selector needs `n_members_per_group_max` of at least 1"))?;
    Ok(SelectorDef {
        name: s.name.into(),
        group_id,
        selector,
        member_id,
        n_groups_max,
        n_members_per_group_max,
        line: s.line,
    })
}

/// An action's instructions with each run of two or more `mov h.FIELD t.ARG` (widths equal,
/// at most 8 bytes) replaced by an [`Instr::MovRun`] appended to `runs`. An action with a
/// jump is left as it is (its targets index the list).
fn fuse_moves(runs: &mut Vec<MovRun>, instrs: &[Instr]) -> Vec<Instr> {
    let arg_move = |i: &Instr| match *i {
        Instr::Mov {
            dst: Field { space: Space::Header(_), offset: dst, bits },
            src: Operand::Field(Field { space: Space::Arg, offset: src, bits: sbits }),
        } if bits == sbits && (8..=64).contains(&bits) => Some(ArgMove { dst, src, bytes: (bits / 8) as u8 }),
        _ => None,
    };
    let jumps = instrs.iter().any(|i| {
        matches!(
            i,
            Instr::Jmp { .. }
                | Instr::JmpValid { .. }
                | Instr::JmpHit { .. }
                | Instr::JmpAction { .. }
                | Instr::JmpCmp { .. }
        )
    });
    if jumps {
        return instrs.to_vec();
    }
    let mut out = Vec::with_capacity(instrs.len());
    let mut k = 0;
    while let Some(i) = instrs.get(k) {
        let moves: Vec<ArgMove> = instrs.get(k..).unwrap_or(&[]).iter().map_while(arg_move).collect();
        match u16::try_from(runs.len()) {
            Ok(run) if moves.len() >= 2 => {
                k += moves.len();
                runs.push(MovRun::new(moves));
                out.push(Instr::MovRun { run });
            }
            _ => {
                out.push(*i);
                k += 1;
            }
        }
    }
    out
}
