//! One instruction line into an [`Instr`], with DPDK 22.11's rules (`rte_swx_pipeline.c`,
//! `instr_*_translate`): which operand kinds each instruction takes, the widths it accepts,
//! and where it may appear (`apply` only, actions only). Labels resolve to indexes of the
//! same list; a jump to its own line is refused (DPDK: "no jump can jump to itself").

use alloc::string::ToString;
use alloc::vec::Vec;

use super::error::{ErrorKind, SpecError};
use super::lex::number;
use super::load::resolve_field;
use super::parse::RawInstr;
use super::program::*;

/// Where a list of instructions runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Scope {
    Apply,
    /// An action; `args` is its argument struct (`t.` fields).
    Action {
        args: Option<u16>,
    },
}

/// Instructions DPDK 22.11 has that Cadence refuses by name (with what they would need).
const UNSUPPORTED: [&str; 9] =
    ["mirror", "recirculate", "recircid", "meter", "metprefetch", "regprefetch", "extern", "movh", "rss"];

struct Cx<'p, 'a> {
    p: &'p Program,
    scope: Scope,
    line: u32,
    op: &'a str,
    labels: &'p [(&'a str, u32)],
    index: u32,
}

impl Cx<'_, '_> {
    fn err(&self, kind: ErrorKind) -> SpecError {
        SpecError::new(self.line, kind)
    }

    fn operand_err(&self, rule: &'static str) -> SpecError {
        self.err(ErrorKind::Operand { instr: self.op.to_string(), rule })
    }

    fn args(&self) -> Option<u16> {
        match self.scope {
            Scope::Apply => None,
            Scope::Action { args } => args,
        }
    }

    fn in_action(&self) -> bool {
        matches!(self.scope, Scope::Action { .. })
    }

    fn apply_only(&self) -> Result<(), SpecError> {
        if self.in_action() { Err(self.operand_err("allowed in `apply` only, not in an action")) } else { Ok(()) }
    }

    fn action_only(&self) -> Result<(), SpecError> {
        if self.in_action() { Ok(()) } else { Err(self.operand_err("allowed in an action only, not in `apply`")) }
    }

    /// Whether `t` names a field (by its prefix): then it must resolve.
    fn is_field_name(t: &str) -> bool {
        t.starts_with("h.") || t.starts_with("m.") || t.starts_with("t.")
    }

    fn field(&self, t: &str) -> Result<Field, SpecError> {
        if t.starts_with("t.") && !self.in_action() {
            return Err(self.operand_err("action arguments (`t.`) exist only inside an action"));
        }
        resolve_field(self.p, t, self.args())
            .ok_or_else(|| self.err(ErrorKind::NotFound { what: "field", name: t.into() }))
    }

    /// A field of at most 64 bits.
    fn field64(&self, t: &str) -> Result<Field, SpecError> {
        self.at_most64(t, self.field(t)?)
    }

    /// `f` (operand `t`) if it has at most 64 bits.
    fn at_most64(&self, t: &str, f: Field) -> Result<Field, SpecError> {
        if f.bits > 64 {
            return Err(self.err(ErrorKind::Width {
                name: t.into(),
                bits: f.bits,
                rule: "this operand takes at most 64 bits",
            }));
        }
        Ok(f)
    }

    /// A destination: a header or metadata field (never an action argument).
    fn dst(&self, t: &str) -> Result<Field, SpecError> {
        if t.starts_with("t.") {
            return Err(self.operand_err("the destination must be a header or metadata field"));
        }
        self.field(t)
    }

    fn dst64(&self, t: &str) -> Result<Field, SpecError> {
        self.at_most64(t, self.dst(t)?)
    }

    fn meta64(&self, t: &str) -> Result<Field, SpecError> {
        if !t.starts_with("m.") {
            return Err(self.operand_err("this operand must be a metadata field"));
        }
        self.field64(t)
    }

    fn imm(&self, t: &str) -> Result<u64, SpecError> {
        number(t)
            .ok_or_else(|| self.err(ErrorKind::Number { text: t.into(), rule: "not a field and not a 64-bit number" }))
    }

    /// A field of at most 64 bits or an immediate.
    fn src64(&self, t: &str) -> Result<Operand, SpecError> {
        if Self::is_field_name(t) { self.field64(t).map(Operand::Field) } else { self.imm(t).map(Operand::Imm) }
    }

    fn header(&self, t: &str) -> Result<HeaderId, SpecError> {
        t.strip_prefix("h.")
            .filter(|n| !n.contains('.'))
            .and_then(|n| self.p.header(n))
            .ok_or_else(|| self.err(ErrorKind::NotFound { what: "header", name: t.into() }))
    }

    fn label(&self, t: &str) -> Result<u32, SpecError> {
        let target = self
            .labels
            .iter()
            .find(|(l, _)| *l == t)
            .map(|&(_, i)| i)
            .ok_or_else(|| self.err(ErrorKind::NotFound { what: "label", name: t.into() }))?;
        if target == self.index {
            return Err(self.operand_err("a jump to its own instruction (a loop) is refused"));
        }
        Ok(target)
    }

    fn action(&self, t: &str) -> Result<ActionId, SpecError> {
        self.p.action(t).ok_or_else(|| self.err(ErrorKind::NotFound { what: "action", name: t.into() }))
    }

    fn regarray(&self, t: &str) -> Result<u16, SpecError> {
        self.p
            .regarrays
            .iter()
            .position(|r| r.name == t)
            .map(|i| i as u16)
            .ok_or_else(|| self.err(ErrorKind::NotFound { what: "regarray", name: t.into() }))
    }

    fn count(&self, t: &[&str], ok: &[usize]) -> Result<(), SpecError> {
        if ok.contains(&t.len()) { Ok(()) } else { Err(self.operand_err("wrong number of operands")) }
    }
}

/// Translates a list (an action's body or `apply`), labels resolved.
pub(crate) fn translate_list(p: &Program, scope: Scope, raw: &[RawInstr<'_>]) -> Result<Vec<Instr>, SpecError> {
    let mut labels: Vec<(&str, u32)> = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        if let Some(l) = r.label {
            if labels.iter().any(|(x, _)| *x == l) {
                return Err(SpecError::new(r.line, ErrorKind::Duplicate { what: "label", name: l.into() }));
            }
            labels.push((l, u32::try_from(i).unwrap_or(u32::MAX)));
        }
    }
    let mut out = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        let cx = Cx {
            p,
            scope,
            line: r.line,
            op: r.tokens.first().copied().unwrap_or(""),
            labels: &labels,
            index: u32::try_from(i).unwrap_or(u32::MAX),
        };
        out.push(one(&cx, &r.tokens)?);
    }
    Ok(out)
}

fn one(cx: &Cx<'_, '_>, t: &[&str]) -> Result<Instr, SpecError> {
    let Some(&op) = t.first() else {
        return Err(cx.err(ErrorKind::Syntax { what: "instruction", expected: "[LABEL :] INSTRUCTION OPERANDS…" }));
    };
    if UNSUPPORTED.contains(&op) {
        return Err(cx.err(ErrorKind::Unsupported { what: "instruction", name: op.into() }));
    }
    let a = |i: usize| t.get(i).copied().unwrap_or("");
    Ok(match op {
        "rx" => {
            cx.count(t, &[2])?;
            cx.apply_only()?;
            Instr::Rx { port: cx.meta64(a(1))? }
        }
        "tx" => {
            cx.count(t, &[2])?;
            let port =
                if Cx::is_field_name(a(1)) { Operand::Field(cx.meta64(a(1))?) } else { Operand::Imm(cx.imm(a(1))?) };
            Instr::Tx { port }
        }
        "drop" => {
            cx.count(t, &[1])?;
            Instr::Drop
        }
        "extract" => {
            cx.apply_only()?;
            if t.len() == 3 {
                return Err(cx.err(ErrorKind::Unsupported { what: "instruction", name: "extract (varbit)".into() }));
            }
            cx.count(t, &[2])?;
            Instr::Extract { header: cx.header(a(1))? }
        }
        "lookahead" => {
            cx.count(t, &[2])?;
            cx.apply_only()?;
            Instr::Lookahead { header: cx.header(a(1))? }
        }
        "emit" | "validate" | "invalidate" => {
            cx.count(t, &[2])?;
            let header = cx.header(a(1))?;
            match op {
                "emit" => Instr::Emit { header },
                "validate" => Instr::Validate { header },
                _ => Instr::Invalidate { header },
            }
        }
        "mov" => {
            cx.count(t, &[3])?;
            let dst = cx.dst(a(1))?;
            if Cx::is_field_name(a(2)) {
                let src = cx.field(a(2))?;
                if (dst.bits > 64 || src.bits > 64) && dst.bits != src.bits {
                    return Err(cx.err(ErrorKind::Width {
                        name: a(2).into(),
                        bits: src.bits,
                        rule: "`mov` between fields wider than 64 bits needs equal widths",
                    }));
                }
                Instr::Mov { dst, src: Operand::Field(src) }
            } else {
                if dst.bits > 64 {
                    return Err(cx.err(ErrorKind::Width {
                        name: a(1).into(),
                        bits: dst.bits,
                        rule: "an immediate goes only into a field of at most 64 bits",
                    }));
                }
                Instr::Mov { dst, src: Operand::Imm(cx.imm(a(2))?) }
            }
        }
        "add" | "sub" | "and" | "or" | "xor" | "shl" | "shr" => {
            cx.count(t, &[3])?;
            let op = match op {
                "add" => AluOp::Add,
                "sub" => AluOp::Sub,
                "and" => AluOp::And,
                "or" => AluOp::Or,
                "xor" => AluOp::Xor,
                "shl" => AluOp::Shl,
                _ => AluOp::Shr,
            };
            Instr::Alu { op, dst: cx.dst64(a(1))?, src: cx.src64(a(2))? }
        }
        "ckadd" | "cksub" => {
            cx.count(t, &[3])?;
            if !a(1).starts_with("h.") {
                return Err(cx.operand_err("the destination must be a 16-bit header field"));
            }
            let dst = cx.field(a(1))?;
            if dst.bits != 16 {
                return Err(cx.err(ErrorKind::Width {
                    name: a(1).into(),
                    bits: dst.bits,
                    rule: "a checksum field is 16 bits",
                }));
            }
            if !a(2).starts_with("h.") {
                return Err(cx.operand_err("the source must be a header field (or, for `ckadd`, a header)"));
            }
            if op == "ckadd" && !a(2).get(2..).is_some_and(|r| r.contains('.')) {
                Instr::Ckadd { dst, src: CkSrc::Header(cx.header(a(2))?) }
            } else {
                let src = cx.field64(a(2))?;
                if op == "ckadd" { Instr::Ckadd { dst, src: CkSrc::Field(src) } } else { Instr::Cksub { dst, src } }
            }
        }
        "table" => {
            cx.count(t, &[2])?;
            cx.apply_only()?;
            let n = a(1);
            let table = if let Some(i) = cx.p.tables.iter().position(|x| x.name == n) {
                TableRef::Table(i as u16)
            } else if let Some(i) = cx.p.selectors.iter().position(|x| x.name == n) {
                TableRef::Selector(i as u16)
            } else if let Some(i) = cx.p.learners.iter().position(|x| x.name == n) {
                TableRef::Learner(i as u16)
            } else {
                return Err(cx.err(ErrorKind::NotFound { what: "table", name: n.into() }));
            };
            Instr::Table { table }
        }
        "learn" => {
            cx.count(t, &[3, 4])?;
            cx.action_only()?;
            let action = cx.action(a(1))?;
            let fields = cx.p.action_args(action);
            let (args, timeout) = if t.len() == 4 { (Some(a(2)), a(3)) } else { (None, a(2)) };
            let args = match (args, fields.is_empty()) {
                (None, true) => None,
                (Some(_), true) => {
                    return Err(cx.operand_err("the learned action has no arguments: give only the timeout id"));
                }
                (None, false) => {
                    return Err(cx.operand_err("the learned action has arguments: give their first metadata field"));
                }
                (Some(m), false) => {
                    let first = cx.meta64(m)?;
                    // DPDK's `learner_action_args_check`: the metadata fields from `m` on,
                    // in order, have the widths of the action's arguments.
                    let meta = cx.p.structs.get(usize::from(cx.p.metadata)).map_or(&[][..], |s| s.fields.as_slice());
                    let pos = meta.iter().position(|f| f.offset == first.offset).unwrap_or(usize::MAX);
                    let ok = meta.get(pos..).is_some_and(|rest| {
                        rest.len() >= fields.len() && rest.iter().zip(fields).all(|(m, f)| m.bits == f.bits)
                    });
                    if !ok {
                        return Err(cx.operand_err("the metadata fields from the first one on must have the widths of the learned action's arguments"));
                    }
                    Some(first)
                }
            };
            Instr::Learn { action, args, timeout_id: cx.meta64(timeout)? }
        }
        "rearm" => {
            cx.count(t, &[1, 2])?;
            cx.action_only()?;
            let timeout_id = if t.len() == 2 { Some(cx.meta64(a(1))?) } else { None };
            Instr::Rearm { timeout_id }
        }
        "forget" => {
            cx.count(t, &[1])?;
            cx.action_only()?;
            Instr::Forget
        }
        "entryid" => {
            cx.count(t, &[2])?;
            Instr::Entryid { dst: cx.meta64(a(1))? }
        }
        "hash" => {
            cx.count(t, &[5])?;
            let func = match a(1) {
                "jhash" => HashFunc::Jhash,
                "crc32" => HashFunc::Crc32,
                f => return Err(cx.err(ErrorKind::NotFound { what: "hash function", name: f.into() })),
            };
            let dst = cx.meta64(a(2))?;
            let first = cx.field(a(3))?;
            let last = cx.field(a(4))?;
            if first.space != last.space || last.offset + last.bits / 8 <= first.offset {
                return Err(
                    cx.operand_err("the first and last hashed fields must be in one struct, the last after the first")
                );
            }
            Instr::Hash { func, dst, first, bytes: last.offset + last.bits / 8 - first.offset }
        }
        "regrd" => {
            cx.count(t, &[4])?;
            // `regrd DST ARRAY INDEX`
            let dst = cx.dst64(a(1))?;
            Instr::RegRd { array: cx.regarray(a(2))?, dst, idx: cx.src64(a(3))? }
        }
        "regwr" | "regadd" => {
            cx.count(t, &[4])?;
            let array = cx.regarray(a(1))?;
            let (idx, src) = (cx.src64(a(2))?, cx.src64(a(3))?);
            if op == "regwr" { Instr::RegWr { array, idx, src } } else { Instr::RegAdd { array, idx, src } }
        }
        "jmp" => {
            cx.count(t, &[2])?;
            Instr::Jmp { target: cx.label(a(1))? }
        }
        "jmpv" | "jmpnv" => {
            cx.count(t, &[3])?;
            Instr::JmpValid { target: cx.label(a(1))?, header: cx.header(a(2))?, valid: op == "jmpv" }
        }
        "jmph" | "jmpnh" => {
            cx.count(t, &[2])?;
            cx.apply_only()?;
            Instr::JmpHit { target: cx.label(a(1))?, hit: op == "jmph" }
        }
        "jmpa" | "jmpna" => {
            cx.count(t, &[3])?;
            cx.apply_only()?;
            Instr::JmpAction { target: cx.label(a(1))?, action: cx.action(a(2))?, ran: op == "jmpa" }
        }
        "jmpeq" | "jmpneq" | "jmplt" | "jmpgt" => {
            cx.count(t, &[4])?;
            let cond = match op {
                "jmpeq" => Cond::Eq,
                "jmpneq" => Cond::Neq,
                "jmplt" => Cond::Lt,
                _ => Cond::Gt,
            };
            let target = cx.label(a(1))?;
            if !Cx::is_field_name(a(2)) {
                return Err(cx.operand_err(
                    "the first operand of a compare-and-jump must be a field (DPDK 22.11 refuses an immediate there)",
                ));
            }
            Instr::JmpCmp { target, cond, a: cx.field64(a(2))?, b: cx.src64(a(3))? }
        }
        "return" => {
            cx.count(t, &[1])?;
            cx.action_only()?;
            Instr::Return
        }
        _ => return Err(cx.err(ErrorKind::NotFound { what: "instruction", name: op.into() })),
    })
}
