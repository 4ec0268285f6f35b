//! Table entries in DPDK's table-file syntax (issue 28 item 4, the file half), typed against
//! a loaded table — what DPDK 22.11's `rte_swx_ctl_pipeline_table_entry_read`
//! (`lib/pipeline/rte_swx_ctl.c`) accepts, one entry a line:
//!
//! ```text
//! match VALUE[/MASK] … [priority N] action NAME ARG VALUE …    ; an entry
//! action NAME ARG VALUE …                                      ; the default entry
//! ```
//!
//! One `VALUE[/MASK]` per key field, in key order. Fields of at most 64 bits take numbers
//! (`strtoull` base 0: decimal, `0x` hex, leading-`0` octal); wider fields take exactly their
//! width in hex digits (optional `0x`), as DPDK's `hex_string_parse`. On an `lpm` field the mask
//! must be a prefix of the field's width (`0xFFFFFF00` on 32 bits: /24), and the entry's
//! priority becomes `width - prefix length`, as DPDK sets it. Arguments come as `NAME VALUE`
//! pairs in the order of the action's argument struct, each name checked. Comments (`;`, `#`,
//! `//`) end a line; a blank line is no entry.
//!
//! Stricter than DPDK, so that nothing runs differently from what the line says: a value or
//! mask wider than its field is refused (DPDK keeps its low bytes); a mask on an `exact` field
//! must be all ones (DPDK ignores it in an exact table and applies it in a wildcard one); an
//! entry's action must be one of the table's and not `@defaultonly`, the default entry's not
//! `@tableonly`.
//!
//! Selector files (`selector.txt`, `fib_nexthop_group_table.txt`): `group G member M weight W`.

use alloc::string::ToString;
use alloc::vec::Vec;

use super::error::{ErrorKind, SpecError};
use super::lex::{self, number};
use super::program::{ActionId, FieldDef, LearnerDef, MatchKind, Program, SelectorDef, TableDef};

/// One key field's value and mask: big-endian byte strings of the field's width, whatever
/// space the field lives in (the executor converts a metadata key to this order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub value: Vec<u8>,
    /// `None`: all ones (an exact match of the field).
    pub mask: Option<Vec<u8>>,
}

/// An action with its argument data (encoded as [`Program::encode_arg`]: host order for
/// arguments of at most 64 bits, big-endian for wider ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryAction {
    pub action: ActionId,
    pub args: Vec<u8>,
}

/// One line of a table file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// `match … action …`: a table entry.
    Match {
        key: Vec<KeyValue>,
        /// `priority N`, or for an `lpm` key `width - prefix length` (lower wins, as DPDK).
        priority: u32,
        /// The prefix length of the `lpm` key field, if the table has one.
        prefix_len: Option<u32>,
        action: EntryAction,
    },
    /// `action …` alone: the table's default entry.
    Default(EntryAction),
}

/// One member of a selector group (`group G member M weight W`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub group: u32,
    pub member: u32,
    pub weight: u32,
}

fn invalid(no: u32, name: &str, rule: &'static str) -> SpecError {
    SpecError::new(no, ErrorKind::Invalid { name: name.into(), rule })
}

fn syntax(no: u32) -> SpecError {
    SpecError::new(
        no,
        ErrorKind::Syntax {
            what: "table entry", expected: "match VALUE[/MASK]… [priority N] action NAME ARG VALUE…"
        },
    )
}

/// The comment-free tokens of a line (any number of tokens, any length: names are checked
/// against the program, not against DPDK's token limit).
fn tokens(line: &str) -> Vec<&str> {
    line.split([' ', '\x0c', '\r', '\t', '\x0b'])
        .filter(|t| !t.is_empty())
        .take_while(|t| !lex::is_comment(t))
        .collect()
}

/// `text` as `bytes` big-endian bytes: a number for fields of at most 8 bytes, else exactly
/// `2 * bytes` hex digits after an optional `0x`.
fn field_bytes(no: u32, text: &str, bits: u32) -> Result<Vec<u8>, SpecError> {
    let n = (bits / 8) as usize;
    let bad = |rule| SpecError::new(no, ErrorKind::Number { text: text.into(), rule });
    if n <= 8 {
        let v = number(text).ok_or_else(|| bad("expected a number"))?;
        if bits < 64 && v >> bits != 0 {
            return Err(bad("wider than its field"));
        }
        let be = v.to_be_bytes();
        return Ok(be.get(8 - n..).unwrap_or(&[]).to_vec());
    }
    let hex = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")).unwrap_or(text);
    if hex.len() != 2 * n {
        return Err(bad("a field wider than 64 bits takes exactly its width in hex digits"));
    }
    let mut out = Vec::with_capacity(n);
    for pair in hex.as_bytes().chunks(2) {
        let s = core::str::from_utf8(pair).map_err(|_| bad("not hex"))?;
        out.push(u8::from_str_radix(s, 16).map_err(|_| bad("not hex"))?);
    }
    Ok(out)
}

/// The prefix length of `mask` (big-endian), if it is ones then zeros.
fn prefix_len(mask: &[u8]) -> Option<u32> {
    let bits = mask.len() * 8;
    let bit = |i: usize| mask.get(i / 8).is_some_and(|b| b & (0x80 >> (i % 8)) != 0);
    let ones = (0..bits).take_while(|&i| bit(i)).count();
    if (ones..bits).any(bit) { None } else { u32::try_from(ones).ok() }
}

/// `NAME VALUE …` for the arguments `fields`, into argument data of `bytes`.
fn args(no: u32, fields: &[FieldDef], bytes: u32, t: &[&str]) -> Result<Vec<u8>, SpecError> {
    if t.len() != fields.len() * 2 {
        return Err(invalid(
            no,
            "action",
            "the action needs `NAME VALUE` for each of its arguments, in order, and nothing after",
        ));
    }
    let mut data = alloc::vec![0u8; bytes as usize];
    for (f, pair) in fields.iter().zip(t.chunks(2)) {
        let [name, value] = pair else { continue };
        if *name != f.name {
            return Err(invalid(no, name, "not the next argument of the action"));
        }
        let be = field_bytes(no, value, f.bits)?;
        let (off, n) = (f.offset as usize, (f.bits / 8) as usize);
        let Some(dst) = data.get_mut(off..off + n) else { continue };
        if n <= 8 {
            // Host order, as `Program::encode_arg`: the big-endian bytes reversed.
            for (d, s) in dst.iter_mut().zip(be.iter().rev()) {
                *d = *s;
            }
        } else {
            for (d, s) in dst.iter_mut().zip(&be) {
                *d = *s;
            }
        }
    }
    Ok(data)
}

/// `action NAME ARG VALUE …` against the table's actions.
fn action(
    p: &Program,
    actions: &[super::TableAction],
    no: u32,
    t: &[&str],
    default: bool,
) -> Result<EntryAction, SpecError> {
    let [_, name, rest @ ..] = t else { return Err(syntax(no)) };
    let id = p
        .action(name)
        .ok_or_else(|| SpecError::new(no, ErrorKind::NotFound { what: "action", name: (*name).to_string() }))?;
    let Some(ta) = actions.iter().find(|a| a.action == id) else {
        return Err(invalid(no, name, "not one of the table's actions"));
    };
    if default && ta.table_only {
        return Err(invalid(no, name, "a `@tableonly` action cannot be the default entry's"));
    }
    if !default && ta.default_only {
        return Err(invalid(no, name, "a `@defaultonly` action cannot be an entry's"));
    }
    let bytes = p.actions.get(usize::from(id)).map_or(0, |a| a.arg_bytes);
    Ok(EntryAction { action: id, args: args(no, p.action_args(id), bytes, rest)? })
}

/// One line of a table file for `table` (of `p`); `Ok(None)` for a blank or comment line;
/// `no` is the line's number, for errors.
pub fn parse_line(p: &Program, table: &TableDef, line: &str, no: u32) -> Result<Option<Entry>, SpecError> {
    let t = tokens(line);
    match t.first() {
        None => return Ok(None),
        Some(&"action") => return action(p, &table.actions, no, &t, true).map(|a| Some(Entry::Default(a))),
        Some(&"match") => {}
        Some(_) => return Err(syntax(no)),
    }
    let (key, priority, prefix_len, action) = parse_match(p, table, line, no)?;
    let action = action.ok_or_else(|| invalid(no, "match", "an entry needs `action NAME …` after its key"))?;
    Ok(Some(Entry::Match { key, priority, prefix_len, action }))
}

/// A `match KEY… [priority P] [action NAME [ARG VALUE]…]` line for `table`: its key, priority,
/// the `lpm` field's prefix length and the action if it names one.
#[allow(clippy::type_complexity)]
pub fn parse_match(
    p: &Program,
    table: &TableDef,
    line: &str,
    no: u32,
) -> Result<(Vec<KeyValue>, u32, Option<u32>, Option<EntryAction>), SpecError> {
    let t = tokens(line);
    if t.first() != Some(&"match") {
        return Err(syntax(no));
    }
    let n = table.keys.len();
    let values = t.get(1..1 + n).ok_or_else(|| invalid(no, "match", "fewer values than the table has key fields"))?;
    let mut key = Vec::with_capacity(n);
    let mut prefix = None;
    for (k, v) in table.keys.iter().zip(values) {
        let (val, mask) = match v.split_once('/') {
            Some((val, mask)) => (val, Some(mask)),
            None => (*v, None),
        };
        let value = field_bytes(no, val, k.field.bits)?;
        let mask = match mask {
            None => None,
            Some(m) => {
                let m = field_bytes(no, m, k.field.bits)?;
                match k.kind {
                    MatchKind::Exact if m.iter().any(|&b| b != 0xFF) => {
                        return Err(invalid(no, v, "a mask on an `exact` key field must be all ones"));
                    }
                    MatchKind::Exact => None,
                    MatchKind::Lpm => {
                        prefix = Some(
                            prefix_len(&m)
                                .ok_or_else(|| invalid(no, v, "an `lpm` mask must be a prefix (ones, then zeros)"))?,
                        );
                        Some(m)
                    }
                    MatchKind::Wildcard => Some(m),
                }
            }
        };
        if k.kind == MatchKind::Lpm && mask.is_none() {
            prefix = Some(k.field.bits);
        }
        key.push(KeyValue { value, mask });
    }
    let mut rest = t.get(1 + n..).unwrap_or(&[]);
    let mut priority = 0;
    if let ["priority", pr, tail @ ..] = rest {
        priority = number(pr).and_then(|v| u32::try_from(v).ok()).ok_or_else(|| {
            SpecError::new(no, ErrorKind::Number { text: (*pr).into(), rule: "expected a 32-bit unsigned number" })
        })?;
        rest = tail;
    }
    if let (Some(pl), Some(k)) = (prefix, table.keys.iter().find(|k| k.kind == MatchKind::Lpm)) {
        priority = k.field.bits.saturating_sub(pl);
    }
    let action = match rest.first() {
        None => None,
        Some(&"action") => Some(action(p, &table.actions, no, rest, false)?),
        Some(_) => return Err(invalid(no, "match", "an entry needs `action NAME …` after its key")),
    };
    Ok((key, priority, prefix, action))
}

/// A learner's default entry (`action NAME ARG VALUE …`, DPDK's
/// `rte_swx_ctl_pipeline_learner_default_entry_read`): learners take no `match` lines, their
/// entries are learned; `Ok(None)` for a blank or comment line.
pub fn parse_learner_default(
    p: &Program,
    learner: &LearnerDef,
    line: &str,
    no: u32,
) -> Result<Option<EntryAction>, SpecError> {
    let t = tokens(line);
    match t.first() {
        None => Ok(None),
        Some(&"action") => action(p, &learner.actions, no, &t, true).map(Some),
        Some(_) => {
            Err(invalid(no, t.first().copied().unwrap_or(""), "a learner's default entry is `action NAME ARG VALUE …`"))
        }
    }
}

/// Every entry of a table file, or the first refusal (its line).
pub fn parse_file(p: &Program, table: &TableDef, text: &str) -> Result<Vec<Entry>, SpecError> {
    let mut out = Vec::new();
    for (i, l) in text.split('\n').enumerate() {
        let no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        if let Some(e) = parse_line(p, table, l, no)? {
            out.push(e);
        }
    }
    Ok(out)
}

/// One line of a selector file for `sel`: `group G member M weight W`; `Ok(None)` for a blank
/// or comment line. The group must be below `n_groups_max`, the weight at least 1.
pub fn parse_selector_line(sel: &SelectorDef, line: &str, no: u32) -> Result<Option<Member>, SpecError> {
    let num = |t: &str| {
        number(t).and_then(|v| u32::try_from(v).ok()).ok_or_else(|| {
            SpecError::new(no, ErrorKind::Number { text: t.into(), rule: "expected a 32-bit unsigned number" })
        })
    };
    match tokens(line).as_slice() {
        [] => Ok(None),
        ["group", g, "member", m, "weight", w] => {
            let (group, member, weight) = (num(g)?, num(m)?, num(w)?);
            if group >= sel.n_groups_max {
                return Err(invalid(no, g, "a group id below the selector's `n_groups_max`"));
            }
            if weight == 0 {
                return Err(invalid(no, w, "a member's weight is at least 1"));
            }
            Ok(Some(Member { group, member, weight }))
        }
        _ => {
            Err(SpecError::new(no, ErrorKind::Syntax { what: "selector entry", expected: "group G member M weight W" }))
        }
    }
}

/// Every member of a selector file, or the first refusal.
pub fn parse_selector_file(sel: &SelectorDef, text: &str) -> Result<Vec<Member>, SpecError> {
    let mut out = Vec::new();
    for (i, l) in text.split('\n').enumerate() {
        if let Some(m) = parse_selector_line(sel, l, u32::try_from(i + 1).unwrap_or(u32::MAX))? {
            out.push(m);
        }
    }
    Ok(out)
}
