//! The statements and blocks of a spec (the grammar of DPDK 22.11's
//! `rte_swx_pipeline_spec.c`), into raw declarations: names still unresolved, each with its
//! line. [`super::load`] resolves them.

use alloc::vec::Vec;

use super::error::{ErrorKind, SpecError};
use super::lex::{Line, number};

/// `struct NAME {` … `}`: fields as (line, type token, name).
#[derive(Debug)]
pub(crate) struct RawStruct<'a> {
    pub line: u32,
    pub name: &'a str,
    pub fields: Vec<(u32, &'a str, &'a str)>,
}

/// An instruction line: optional `LABEL :`, then the tokens.
#[derive(Debug, Clone)]
pub(crate) struct RawInstr<'a> {
    pub line: u32,
    pub label: Option<&'a str>,
    pub tokens: Vec<&'a str>,
}

#[derive(Debug)]
pub(crate) struct RawAction<'a> {
    pub line: u32,
    pub name: &'a str,
    pub args: Option<&'a str>,
    pub instrs: Vec<RawInstr<'a>>,
}

/// `actions { NAME [@tableonly|@defaultonly] }` entries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawTableAction<'a> {
    pub line: u32,
    pub name: &'a str,
    pub table_only: bool,
    pub default_only: bool,
}

/// `default_action NAME args none|ARG VALUE… [const]`.
#[derive(Debug, Clone)]
pub(crate) struct RawDefault<'a> {
    pub line: u32,
    pub name: &'a str,
    pub args: Vec<&'a str>,
    pub is_const: bool,
}

#[derive(Debug)]
pub(crate) struct RawTable<'a> {
    pub line: u32,
    pub name: &'a str,
    /// (line, field, match kind token; `None` in a learner's key).
    pub keys: Vec<(u32, &'a str, Option<&'a str>)>,
    pub actions: Vec<RawTableAction<'a>>,
    pub default: Option<RawDefault<'a>>,
    pub size: Option<(u32, u32)>,
    pub hash: Option<(u32, &'a str)>,
    /// Learners only: expiry profiles in seconds.
    pub timeouts: Vec<(u32, u32)>,
}

#[derive(Debug)]
pub(crate) struct RawSelector<'a> {
    pub line: u32,
    pub name: &'a str,
    pub group_id: Option<(u32, &'a str)>,
    pub selector: Vec<(u32, &'a str)>,
    pub member_id: Option<(u32, &'a str)>,
    pub n_groups_max: Option<u32>,
    pub n_members_per_group_max: Option<u32>,
}

/// A spec's declarations, in the order of the text within each kind.
#[derive(Debug, Default)]
pub(crate) struct Raw<'a> {
    pub structs: Vec<RawStruct<'a>>,
    /// (line, name, struct).
    pub headers: Vec<(u32, &'a str, &'a str)>,
    pub metadata: Option<(u32, &'a str)>,
    pub actions: Vec<RawAction<'a>>,
    pub tables: Vec<RawTable<'a>>,
    pub learners: Vec<RawTable<'a>>,
    pub selectors: Vec<RawSelector<'a>>,
    /// (line, name, size, initval).
    pub regarrays: Vec<(u32, &'a str, u32, u64)>,
    /// (line, name, size).
    pub metarrays: Vec<(u32, &'a str, u32)>,
    pub apply: Option<(u32, Vec<RawInstr<'a>>)>,
}

fn syntax(line: u32, what: &'static str, expected: &'static str) -> SpecError {
    SpecError::new(line, ErrorKind::Syntax { what, expected })
}

fn num32(line: u32, t: &str) -> Result<u32, SpecError> {
    number(t).and_then(|v| u32::try_from(v).ok()).ok_or_else(|| {
        SpecError::new(line, ErrorKind::Number { text: t.into(), rule: "expected a 32-bit unsigned number" })
    })
}

fn instr<'a>(l: &Line<'a>) -> RawInstr<'a> {
    match l.tokens.as_slice() {
        [label, ":", rest @ ..] => RawInstr { line: l.no, label: Some(label), tokens: rest.to_vec() },
        t => RawInstr { line: l.no, label: None, tokens: t.to_vec() },
    }
}

/// The block the parser is in.
enum Block<'a> {
    Top,
    Struct(RawStruct<'a>),
    Action(RawAction<'a>),
    Table { t: RawTable<'a>, learner: bool, inner: Inner },
    Selector { s: RawSelector<'a>, inner: bool },
    Apply(u32, Vec<RawInstr<'a>>),
}

/// A table's or learner's inner block.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inner {
    None,
    Key,
    Actions,
    Timeout,
}

/// Parses the statements of `lines` into declarations.
pub(crate) fn parse<'a>(lines: &[Line<'a>]) -> Result<Raw<'a>, SpecError> {
    let mut raw = Raw::default();
    let mut block = Block::Top;
    for l in lines {
        let no = l.no;
        let t = l.tokens.as_slice();
        block = match block {
            Block::Top => top(&mut raw, l)?,
            Block::Struct(mut s) => match t {
                ["}"] => {
                    raw.structs.push(s);
                    Block::Top
                }
                [ty, name] => {
                    s.fields.push((no, ty, name));
                    Block::Struct(s)
                }
                _ => return Err(syntax(no, "struct field", "bit<N> NAME")),
            },
            Block::Action(mut a) => match t {
                ["}"] => {
                    raw.actions.push(a);
                    Block::Top
                }
                _ => {
                    a.instrs.push(instr(l));
                    Block::Action(a)
                }
            },
            Block::Apply(line, mut v) => match t {
                ["}"] => {
                    if raw.apply.is_some() {
                        return Err(SpecError::new(line, ErrorKind::Duplicate { what: "block", name: "apply".into() }));
                    }
                    raw.apply = Some((line, v));
                    Block::Top
                }
                _ => {
                    v.push(instr(l));
                    Block::Apply(line, v)
                }
            },
            Block::Table { t: tab, learner, inner } => table_line(&mut raw, tab, learner, inner, l)?,
            Block::Selector { s, inner } => selector_line(&mut raw, s, inner, l)?,
        };
    }
    match block {
        Block::Top => Ok(raw),
        _ => Err(syntax(lines.last().map_or(0, |l| l.no), "end of text", "}")),
    }
}

fn top<'a>(raw: &mut Raw<'a>, l: &Line<'a>) -> Result<Block<'a>, SpecError> {
    let no = l.no;
    Ok(match l.tokens.as_slice() {
        ["struct", name, "{"] => Block::Struct(RawStruct { line: no, name, fields: Vec::new() }),
        ["struct", ..] => return Err(syntax(no, "struct statement", "struct NAME {")),
        ["header", name, "instanceof", st] => {
            raw.headers.push((no, name, st));
            Block::Top
        }
        ["header", ..] => return Err(syntax(no, "header statement", "header NAME instanceof STRUCT")),
        ["metadata", "instanceof", st] => {
            if raw.metadata.is_some() {
                return Err(SpecError::new(no, ErrorKind::Duplicate { what: "statement", name: "metadata".into() }));
            }
            raw.metadata = Some((no, st));
            Block::Top
        }
        ["metadata", ..] => return Err(syntax(no, "metadata statement", "metadata instanceof STRUCT")),
        ["action", name, "args", "none", "{"] => {
            Block::Action(RawAction { line: no, name, args: None, instrs: Vec::new() })
        }
        ["action", name, "args", "instanceof", st, "{"] => {
            Block::Action(RawAction { line: no, name, args: Some(st), instrs: Vec::new() })
        }
        ["action", ..] => {
            return Err(syntax(no, "action statement", "action NAME args none|instanceof STRUCT {"));
        }
        [kw @ ("table" | "learner"), name, "{"] => Block::Table {
            t: RawTable {
                line: no,
                name,
                keys: Vec::new(),
                actions: Vec::new(),
                default: None,
                size: None,
                hash: None,
                timeouts: Vec::new(),
            },
            learner: *kw == "learner",
            inner: Inner::None,
        },
        ["table", ..] => return Err(syntax(no, "table statement", "table NAME {")),
        ["learner", ..] => return Err(syntax(no, "learner statement", "learner NAME {")),
        ["selector", name, "{"] => Block::Selector {
            s: RawSelector {
                line: no,
                name,
                group_id: None,
                selector: Vec::new(),
                member_id: None,
                n_groups_max: None,
                n_members_per_group_max: None,
            },
            inner: false,
        },
        ["selector", ..] => return Err(syntax(no, "selector statement", "selector NAME {")),
        ["regarray", name, "size", size, "initval", init] => {
            let size = num32(no, size)?;
            let init = number(init).ok_or_else(|| {
                SpecError::new(no, ErrorKind::Number { text: (*init).into(), rule: "expected a 64-bit number" })
            })?;
            raw.regarrays.push((no, name, size, init));
            Block::Top
        }
        ["regarray", ..] => {
            return Err(syntax(no, "regarray statement", "regarray NAME size N initval V"));
        }
        ["metarray", name, "size", size] => {
            raw.metarrays.push((no, name, num32(no, size)?));
            Block::Top
        }
        ["metarray", ..] => return Err(syntax(no, "metarray statement", "metarray NAME size N")),
        ["apply", "{"] => Block::Apply(no, Vec::new()),
        ["apply", ..] => return Err(syntax(no, "apply statement", "apply {")),
        [kw @ ("extobj" | "rss"), ..] => {
            return Err(SpecError::new(no, ErrorKind::Unsupported { what: "statement", name: (*kw).into() }));
        }
        [kw, ..] => {
            return Err(SpecError::new(
                no,
                ErrorKind::Invalid { name: (*kw).into(), rule: "not a statement of the spec language" },
            ));
        }
        [] => Block::Top,
    })
}

/// `default_action NAME args none [const]` | `default_action NAME args A V … [const]`.
fn default_action<'a>(l: &Line<'a>) -> Result<RawDefault<'a>, SpecError> {
    let no = l.no;
    let bad = || syntax(no, "default_action statement", "default_action NAME args none|ARG VALUE… [const]");
    let t = l.tokens.as_slice();
    let [_, name, "args", rest @ ..] = t else { return Err(bad()) };
    let (rest, is_const) = match rest {
        [r @ .., "const"] => (r, true),
        r => (r, false),
    };
    let args = match rest {
        ["none"] => Vec::new(),
        [] => return Err(bad()),
        r => r.to_vec(),
    };
    Ok(RawDefault { line: no, name, args, is_const })
}

fn table_line<'a>(
    raw: &mut Raw<'a>,
    mut tab: RawTable<'a>,
    learner: bool,
    inner: Inner,
    l: &Line<'a>,
) -> Result<Block<'a>, SpecError> {
    let no = l.no;
    let t = l.tokens.as_slice();
    let what = if learner { "learner" } else { "table" };
    let inner = match (inner, t) {
        (Inner::None, ["}"]) => {
            if learner {
                raw.learners.push(tab);
            } else {
                raw.tables.push(tab);
            }
            return Ok(Block::Top);
        }
        (Inner::Key | Inner::Actions | Inner::Timeout, ["}"]) => Inner::None,
        (Inner::Key, [f, kind]) if !learner => {
            tab.keys.push((no, f, Some(kind)));
            Inner::Key
        }
        (Inner::Key, [f]) if learner => {
            tab.keys.push((no, f, None));
            Inner::Key
        }
        (Inner::Key, _) if learner => return Err(syntax(no, "learner key field", "FIELD")),
        (Inner::Key, _) => return Err(syntax(no, "table key field", "FIELD exact|lpm|wildcard")),
        (Inner::Actions, [name, ann @ ..]) => {
            let (mut table_only, mut default_only) = (false, false);
            match ann {
                [] => {}
                ["@tableonly"] => table_only = true,
                ["@defaultonly"] => default_only = true,
                _ => return Err(syntax(no, "actions entry", "NAME [@tableonly|@defaultonly]")),
            }
            tab.actions.push(RawTableAction { line: no, name, table_only, default_only });
            Inner::Actions
        }
        (Inner::Timeout, [v]) => {
            tab.timeouts.push((no, num32(no, v)?));
            Inner::Timeout
        }
        (Inner::Timeout, _) => return Err(syntax(no, "timeout entry", "SECONDS")),
        (Inner::None, ["key", "{"]) => Inner::Key,
        (Inner::None, ["actions", "{"]) => Inner::Actions,
        (Inner::None, ["timeout", "{"]) if learner => Inner::Timeout,
        (Inner::None, ["default_action", ..]) => {
            if tab.default.is_some() {
                return Err(SpecError::new(
                    no,
                    ErrorKind::Duplicate { what: "statement", name: "default_action".into() },
                ));
            }
            tab.default = Some(default_action(l)?);
            Inner::None
        }
        (Inner::None, ["size", n]) => {
            tab.size = Some((no, num32(no, n)?));
            Inner::None
        }
        (Inner::None, ["hash", f]) => {
            tab.hash = Some((no, f));
            Inner::None
        }
        // A recommended table type or a pragma: performance hints for DPDK's table
        // implementations, with no effect on what the program does.
        (Inner::None, ["instanceof", _]) if !learner => Inner::None,
        (Inner::None, ["pragma", ..]) if !learner => Inner::None,
        (Inner::None, [kw, ..]) => {
            return Err(SpecError::new(
                no,
                ErrorKind::Invalid {
                    name: (*kw).into(),
                    rule: if learner {
                        "not a statement of a learner block"
                    } else {
                        "not a statement of a table block"
                    },
                },
            ));
        }
        _ => return Err(syntax(no, what, "}")),
    };
    Ok(Block::Table { t: tab, learner, inner })
}

fn selector_line<'a>(
    raw: &mut Raw<'a>,
    mut s: RawSelector<'a>,
    inner: bool,
    l: &Line<'a>,
) -> Result<Block<'a>, SpecError> {
    let no = l.no;
    let inner = match (inner, l.tokens.as_slice()) {
        (true, ["}"]) => false,
        (true, [f]) => {
            s.selector.push((no, f));
            true
        }
        (true, _) => return Err(syntax(no, "selector field", "FIELD")),
        (false, ["}"]) => {
            raw.selectors.push(s);
            return Ok(Block::Top);
        }
        (false, ["group_id", f]) => {
            s.group_id = Some((no, f));
            false
        }
        (false, ["member_id", f]) => {
            s.member_id = Some((no, f));
            false
        }
        (false, ["selector", "{"]) => true,
        (false, ["n_groups_max", n]) => {
            s.n_groups_max = Some(num32(no, n)?);
            false
        }
        (false, ["n_members_per_group_max", n]) => {
            s.n_members_per_group_max = Some(num32(no, n)?);
            false
        }
        (false, [kw, ..]) => {
            return Err(SpecError::new(
                no,
                ErrorKind::Invalid { name: (*kw).into(), rule: "not a statement of a selector block" },
            ));
        }
        (false, []) => false,
    };
    Ok(Block::Selector { s, inner })
}
