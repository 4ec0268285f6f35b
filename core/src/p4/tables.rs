//! The executor's [`Tables`] on Cadence's own structures (issue 28 item 2): a [`TableSet`]
//! built once from a loaded [`Program`] and its table files, with no allocation per packet.
//!
//! - a table whose key fields are all `exact` → [`crate::pna::exact::ExactTable`] (the key packed
//!   big-endian into 1, 2, 4 or up to [`KEY_WORDS`] words, the fewest that hold it: `keyed.rs`;
//!   the entry's argument data and its index as the data);
//! - a table with one `lpm` field and otherwise `exact` ones → [`crate::pna::lpm::Lpm6`]: the exact
//!   fields then the `lpm` field, left-aligned in 128 bits, the prefix length the exact fields'
//!   width plus the entry's; the longest prefix wins, which is DPDK's order for such a table
//!   (`rte_swx_ctl.c` gives an `lpm` entry the priority `width - prefix length`, lower wins). A
//!   key wider than 128 bits is refused with the table's name;
//! - a table with a `wildcard` field → a priority-ordered list scanned linearly (lowest
//!   `priority` first, then the order of the file, as DPDK's wildcard table). Cadence's
//!   `pna::ternary` classifies five-tuples only, so it cannot take an arbitrary key: this list
//!   is the stand-in until a general ternary classifier exists;
//! - a learner → an exact table with add-on-miss under `AutoDelete`, the learner's `timeout`
//!   list as its expire profiles (seconds; the clock in nanoseconds from the caller,
//!   [`TableSet::set_time_ns`], so that a replay is deterministic): `learn` adds on miss,
//!   `rearm` restarts the hit entry's expiry (with a new profile if given), `forget` deletes it.
//!
//! Refused at build, naming the table: a key wider than [`KEY_WORDS`] words, action data wider
//! than [`DATA_WORDS`] words, more than 256 actions, a default entry in a table file (the
//! executor runs the spec's default action), and selectors with members (not run yet).

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use super::SpecError;
use super::entry::{self, Entry, KeyValue};
use super::exec::{Fault, Hit, Tables};
use super::program::{ActionId, MatchKind, Program, SelectorDef, TableDef, TableRef};
use crate::pna::lpm::{Lpm6, LpmConfig};
use crate::time::{Duration, Instant};

mod keyed;
use keyed::{Keyed, KeyedView, data};

/// Key words of an exact table or learner (64 bytes of key).
pub const KEY_WORDS: usize = 8;
/// Words of action data an entry carries (64 bytes).
pub const DATA_WORDS: usize = 8;
/// The data word of an exact table's entry that holds its index (what `entryid` reads).
const INDEX_WORD: usize = DATA_WORDS;

/// Why a table set could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// A table file line refused (its line and construct).
    Entry { table: String, error: SpecError },
    /// A table the structures cannot hold, and why.
    Refused { table: String, reason: &'static str },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Entry { table, error } => write!(f, "table `{table}`: {error}"),
            BuildError::Refused { table, reason } => write!(f, "table `{table}`: {reason}"),
        }
    }
}

fn refused(table: &str, reason: &'static str) -> BuildError {
    BuildError::Refused { table: table.to_string(), reason }
}

/// One entry of the list or LPM kinds: action and argument data.
#[derive(Debug, Clone)]
struct Stored {
    action: ActionId,
    args: Vec<u8>,
}

/// A wildcard entry: value and mask over the whole key, its priority.
#[derive(Debug, Clone)]
struct Ternary {
    value: Vec<u8>,
    mask: Vec<u8>,
    priority: u32,
    index: u32,
}

enum Kind {
    Exact { table: Keyed },
    Lpm { lpm: Lpm6, lpm_field: (usize, usize), entries: Vec<Stored> },
    List { entries: Vec<Ternary>, stored: Vec<Stored> },
}

impl fmt::Debug for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Exact { .. } => "Exact",
            Kind::Lpm { .. } => "Lpm",
            Kind::List { .. } => "List",
        })
    }
}

struct Learner {
    /// The entry the last lookup hit is the table's (for `rearm`).
    table: Keyed,
    profiles: usize,
}

/// The tables, learners and clock of one program.
pub struct TableSet {
    tables: Vec<Kind>,
    /// Per table: the index the next entry added live gets (what `entryid` reads).
    next_index: Vec<u32>,
    learners: Vec<Learner>,
    selectors: Vec<Groups>,
    /// Argument bytes of each action.
    arg_bytes: Vec<usize>,
    /// Per table: the default action the control plane set live (`None`: the spec's).
    defaults: Vec<Option<Stored>>,
    /// The data of the last exact hit, as bytes.
    buf: [u8; DATA_WORDS * 8],
    now: Instant,
    /// Adds a learner refused (full), counted.
    pub learn_refused: u64,
}

impl fmt::Debug for TableSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TableSet").field("tables", &self.tables).field("learners", &self.learners.len()).finish()
    }
}

/// The LPM address of `key` whose `lpm` field is bytes `at..at + w`: the exact fields' bytes
/// in order, then the `lpm` field's, left-aligned in 128 bits (big-endian); `None` for a key
/// wider than 16 bytes (refused when the table is built) or a field outside it.
#[inline]
fn lpm_addr(key: &[u8], at: usize, w: usize) -> Option<u128> {
    let (before, rest) = key.split_at_checked(at)?;
    let (lpm, after) = rest.split_at_checked(w)?;
    let mut a = [0u8; 16];
    let mut n = 0;
    for piece in [before, after, lpm] {
        a.get_mut(n..n + piece.len())?.copy_from_slice(piece);
        n += piece.len();
    }
    Some(u128::from_be_bytes(a))
}

fn exact_table(name: &str, size: u32, key_bytes: usize, learner: bool) -> Result<Keyed, BuildError> {
    if key_bytes > KEY_WORDS * 8 {
        return Err(refused(name, "key wider than 64 bytes"));
    }
    Keyed::new(size, key_bytes, learner).ok_or_else(|| refused(name, "no memory for a table of its size"))
}

impl TableSet {
    /// Builds the set: `files` are `(table name, table-file text)`; tables without a file start
    /// empty.
    pub fn build(p: &Program, files: &[(&str, &str)]) -> Result<Self, BuildError> {
        if p.actions.len() > 256 {
            return Err(refused("*", "more than 256 actions"));
        }
        let arg_bytes: Vec<usize> = p.actions.iter().map(|a| a.arg_bytes as usize).collect();
        if let Some(a) = p.actions.iter().find(|a| a.arg_bytes as usize > DATA_WORDS * 8) {
            return Err(refused(&a.name, "action data wider than 64 bytes"));
        }
        for (name, _) in files {
            if !p.tables.iter().any(|t| t.name == *name) && p.selector(name).is_none() {
                return Err(refused(name, "no such table or selector (learners take no file)"));
            }
        }
        let mut selectors = Vec::with_capacity(p.selectors.len());
        for sel in &p.selectors {
            let text = files.iter().find(|(n, _)| *n == sel.name).map_or("", |(_, x)| *x);
            let members = entry::parse_selector_file(sel, text)
                .map_err(|error| BuildError::Entry { table: sel.name.clone(), error })?;
            selectors.push(Groups::build(sel, &members)?);
        }
        let mut tables = Vec::with_capacity(p.tables.len());
        for t in &p.tables {
            let text = files.iter().find(|(n, _)| *n == t.name).map_or("", |(_, x)| *x);
            let parsed =
                entry::parse_file(p, t, text).map_err(|error| BuildError::Entry { table: t.name.clone(), error })?;
            let widths: Vec<usize> = t.keys.iter().map(|k| (k.field.bits / 8) as usize).collect();
            let key_bytes: usize = widths.iter().sum();
            let lpm = t.keys.iter().position(|k| k.kind == MatchKind::Lpm);
            let wildcard = t.keys.iter().any(|k| k.kind == MatchKind::Wildcard);
            let mut kind = if wildcard {
                Kind::List { entries: Vec::new(), stored: Vec::new() }
            } else if let Some(l) = lpm {
                if key_bytes > 16 {
                    return Err(refused(&t.name, "lpm key wider than 128 bits (the LPM's address)"));
                }
                let at: usize = widths.iter().take(l).sum();
                let lpm =
                    Lpm6::try_new(LpmConfig::ipv6(1024)).map_err(|_| refused(&t.name, "no memory for the LPM"))?;
                Kind::Lpm { lpm, lpm_field: (at, widths.get(l).copied().unwrap_or(0)), entries: Vec::new() }
            } else {
                Kind::Exact { table: exact_table(&t.name, t.size, key_bytes, false)? }
            };
            for (index, e) in parsed.into_iter().enumerate() {
                let Entry::Match { key, priority, prefix_len, action } = e else {
                    return Err(refused(&t.name, "a default entry in its file (the spec's default runs)"));
                };
                insert(&mut kind, &key, priority, prefix_len, action, index as u32, false)
                    .map_err(|why| refused(&t.name, why))?;
            }
            if let Kind::List { entries, .. } = &mut kind {
                // Stable: equal priorities keep the file's order.
                entries.sort_by_key(|e| e.priority);
            }
            tables.push(kind);
        }
        let mut learners = Vec::with_capacity(p.learners.len());
        for l in &p.learners {
            let key_bytes = l.keys.iter().map(|k| (k.bits / 8) as usize).sum();
            let table = exact_table(&l.name, l.size, key_bytes, true)?;
            if l.timeouts.len() > 256 {
                return Err(refused(&l.name, "more than 256 timeouts"));
            }
            for (i, s) in l.timeouts.iter().enumerate() {
                table.set_expire_profile(i as u8, Duration(u64::from(*s).saturating_mul(1_000_000_000)));
            }
            learners.push(Learner { table, profiles: l.timeouts.len() });
        }
        let next_index = p
            .tables
            .iter()
            .map(|t| {
                let text = files.iter().find(|(n, _)| *n == t.name).map_or("", |(_, x)| *x);
                text.lines().count() as u32
            })
            .collect();
        Ok(TableSet {
            defaults: alloc::vec![None; tables.len()],
            tables,
            next_index,
            learners,
            selectors,
            arg_bytes,
            buf: [0; DATA_WORDS * 8],
            now: Instant(0),
            learn_refused: 0,
        })
    }

    /// Sets the clock the learners' expiry reads (nanoseconds).
    pub fn set_time_ns(&mut self, ns: u64) {
        self.now = Instant(ns);
    }

    /// Live entries of learner `l`.
    pub fn learned(&self, l: u16) -> usize {
        self.learners.get(usize::from(l)).map_or(0, |x| x.table.count(self.now))
    }

    /// What the control plane reads of this set's learners ([`learner_lines`]); it does not
    /// keep them alive.
    pub fn learner_views(&self) -> LearnerViews {
        LearnerViews(self.learners.iter().map(|l| l.table.view()).collect())
    }
}

/// One worker's learners as the control plane reads them (`p4 learner show`): weak views of
/// the tables, one per learner of the program, in its order.
pub struct LearnerViews(Vec<KeyedView>);

impl fmt::Debug for LearnerViews {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LearnerViews").field("learners", &self.0.len()).finish()
    }
}

impl LearnerViews {
    /// Whether the worker's tables still exist.
    pub fn alive(&self) -> bool {
        self.0.iter().all(KeyedView::alive)
    }
}

/// The entries learner `learner` holds on each worker (`workers`: a label and that worker's
/// views), as lines `LABEL match KEY… action NAME ARG VALUE… timeout ID expires_in_ms MS` — a
/// key field per learner key field, in hex, as [`table_lines`] writes a table's — at `now_ns`
/// (the learners' clock, nanoseconds). Expired entries are not shown. A worker whose tables
/// are gone is skipped. `Err` names a learner the program does not have.
pub fn learner_lines<'a>(
    p: &Program,
    learner: &str,
    workers: impl Iterator<Item = (&'a str, &'a LearnerViews)>,
    now_ns: u64,
) -> Result<Vec<String>, String> {
    use core::fmt::Write;
    let (index, def) = p
        .learners
        .iter()
        .enumerate()
        .find(|(_, l)| l.name == learner)
        .ok_or_else(|| alloc::format!("no learner `{learner}` in the program"))?;
    let widths: Vec<usize> = def.keys.iter().map(|k| (k.bits / 8) as usize).collect();
    let now = Instant(now_ns);
    let mut lines = Vec::new();
    for (label, views) in workers {
        let Some(view) = views.0.get(index) else { continue };
        view.for_each(now, |e| {
            let mut l = String::from(label);
            l.push_str(" match");
            let mut at = 0;
            for w in &widths {
                l.push(' ');
                hex(&mut l, e.key.get(at..at + w).unwrap_or(&[]));
                at += w;
            }
            action_text(p, &mut l, ActionId::from(e.action), e.args);
            let left = e.deadline.map_or(0, |d| d.ticks().saturating_sub(now_ns));
            let _ = write!(l, " timeout {} expires_in_ms {}", e.profile, left / 1_000_000);
            lines.push(l);
        });
    }
    Ok(lines)
}

/// `0x` and the bytes in hex, in order.
fn hex(out: &mut String, b: &[u8]) {
    use core::fmt::Write;
    out.push_str("0x");
    for x in b {
        let _ = write!(out, "{x:02x}");
    }
}

/// ` action NAME ARG VALUE…` (values in hex: host order up to 8 bytes, else network order).
fn action_text(p: &Program, l: &mut String, action: ActionId, args: &[u8]) {
    use core::fmt::Write;
    let a = p.actions.get(usize::from(action));
    let _ = write!(l, " action {}", a.map_or("?", |a| a.name.as_str()));
    let fields = a.and_then(|a| a.args).and_then(|s| p.structs.get(usize::from(s)));
    for f in fields.map_or(&[][..], |s| &s.fields[..]) {
        let (o, n) = (f.offset as usize, (f.bits / 8) as usize);
        let b = args.get(o..o + n).unwrap_or(&[]);
        let _ = write!(l, " {} ", f.name);
        if n <= 8 {
            let v = b.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x));
            let _ = write!(l, "0x{v:x}");
        } else {
            hex(l, b);
        }
    }
}

/// Adds an entry to a table being built (`live` false: a repeated key is refused) or changed
/// live (`live`: a repeated key's entry is replaced, as DPDK's table add modifies it).
fn insert(
    kind: &mut Kind,
    key: &[KeyValue],
    priority: u32,
    prefix_len: Option<u32>,
    action: entry::EntryAction,
    index: u32,
    live: bool,
) -> Result<(), &'static str> {
    let value: Vec<u8> = key.iter().flat_map(|k| k.value.iter().copied()).collect();
    match kind {
        Kind::Exact { table } => {
            let d = data(&action.args, index);
            if table.insert(&value, action.action as u8, &d, 0, Instant(0)) {
                return Ok(());
            }
            if live && table.modify(&value, action.action as u8, &d, Instant(0)) {
                return Ok(());
            }
            Err("an entry the exact table refused (full or repeated)")
        }
        Kind::Lpm { lpm, lpm_field, entries } => {
            let (addr, len) = lpm_prefix(&value, *lpm_field, prefix_len);
            let hop = u32::try_from(entries.len()).map_err(|_| "too many LPM entries")?;
            lpm.add(addr, len, hop).map_err(|_| "an entry the LPM refused")?;
            entries.push(Stored { action: action.action, args: action.args });
            Ok(())
        }
        Kind::List { entries, stored } => {
            let mask: Vec<u8> = key.iter().flat_map(full_mask).collect();
            if live {
                entries.retain(|e| !(e.value == value && e.mask == mask));
            }
            entries.push(Ternary { value, mask, priority, index: stored.len() as u32 });
            stored.push(Stored { action: action.action, args: action.args });
            if live {
                // Stable: equal priorities keep the order they came in (a build sorts once, at
                // its end).
                entries.sort_by_key(|e| e.priority);
            }
            Ok(())
        }
    }
}

/// The mask of a key field over its whole width (an exact field's: all ones).
fn full_mask(k: &KeyValue) -> Vec<u8> {
    k.mask.clone().unwrap_or_else(|| alloc::vec![0xFF; k.value.len()])
}

/// The table named `name`, with its index in the program.
fn table_def<'p>(p: &'p Program, name: &str) -> Option<(usize, &'p TableDef)> {
    p.tables.iter().enumerate().find(|(_, t)| t.name == name)
}

/// The LPM address and length of an entry's key: the exact fields, then the `lpm` field,
/// left-aligned in 128 bits.
fn lpm_prefix(value: &[u8], (at, w): (usize, usize), prefix_len: Option<u32>) -> (u128, u8) {
    let exact = value.len().saturating_sub(w);
    (lpm_addr(value, at, w).unwrap_or(0), (exact * 8 + prefix_len.unwrap_or(0) as usize) as u8)
}

/// A live change of one table's entries (the control plane's `p4 add|del`), parsed against the
/// program ([`TableChange::parse`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableChange {
    /// The table's index in the program.
    pub table: usize,
    key: Vec<KeyValue>,
    priority: u32,
    prefix_len: Option<u32>,
    /// `None`: delete the entry with this key.
    action: Option<entry::EntryAction>,
    /// A change of the table's default action (`action`), not of an entry.
    default: bool,
}

impl TableChange {
    /// `line` (a table-file line: `match KEY… [priority P] action NAME [ARG VALUE]…`; for a
    /// delete the action may be left out) for `table` of `p`; an error names the construct.
    pub fn parse(p: &Program, table: &str, line: &str, add: bool) -> Result<Self, String> {
        let (index, def) = table_def(p, table).ok_or_else(|| {
            alloc::format!("no table `{table}` in the program (selectors and learners change otherwise)")
        })?;
        let (key, priority, prefix_len, action) = match entry::parse_match(p, def, line, 1) {
            Ok(m) => m,
            Err(e) => return Err(alloc::format!("{}", e.kind)),
        };
        if add && action.is_none() {
            return Err("an entry to add needs `action NAME …` after its key".to_string());
        }
        Ok(TableChange {
            table: index,
            key,
            priority,
            prefix_len,
            action: if add { action } else { None },
            default: false,
        })
    }

    /// A new default action for `table` (the control plane's `p4 default TABLE LINE`, `line`
    /// being `action NAME [ARG VALUE]…`, an action the table lists); refused for a table whose
    /// spec makes its default `const`.
    pub fn parse_default(p: &Program, table: &str, line: &str) -> Result<Self, String> {
        let (index, def) = table_def(p, table).ok_or_else(|| alloc::format!("no table `{table}` in the program"))?;
        if def.default.is_const {
            return Err(alloc::format!("the default action of `{table}` is const in the spec"));
        }
        match entry::parse_line(p, def, line, 1) {
            Ok(Some(Entry::Default(a))) => Ok(TableChange {
                table: index,
                key: Vec::new(),
                priority: 0,
                prefix_len: None,
                action: Some(a),
                default: true,
            }),
            Ok(_) => Err("expected `action NAME [ARG VALUE]…` alone".to_string()),
            Err(e) => Err(alloc::format!("{}", e.kind)),
        }
    }
}

impl TableSet {
    /// Applies a live change: an add (a repeated key's entry replaced) or a delete (`Err` if no
    /// entry has the key). The exact tables change in place; the LPM and the lists allocate
    /// (control-plane work, between batches).
    pub fn apply(&mut self, c: &TableChange) -> Result<(), &'static str> {
        let (Some(kind), Some(next)) = (self.tables.get_mut(c.table), self.next_index.get_mut(c.table)) else {
            return Err("no such table");
        };
        if c.default {
            let (Some(slot), Some(a)) = (self.defaults.get_mut(c.table), c.action.as_ref()) else {
                return Err("no default action given");
            };
            *slot = Some(Stored { action: a.action, args: a.args.clone() });
            return Ok(());
        }
        let Some(action) = c.action.clone() else {
            let value: Vec<u8> = c.key.iter().flat_map(|k| k.value.iter().copied()).collect();
            return match kind {
                Kind::Exact { table } => {
                    if table.delete(&value, self.now) {
                        Ok(())
                    } else {
                        Err("no entry with this key")
                    }
                }
                Kind::Lpm { lpm, lpm_field, .. } => {
                    let (addr, len) = lpm_prefix(&value, *lpm_field, c.prefix_len);
                    lpm.delete(addr, len).map_err(|_| "no entry with this key")
                }
                Kind::List { entries, .. } => {
                    let mask: Vec<u8> = c.key.iter().flat_map(full_mask).collect();
                    let before = entries.len();
                    entries.retain(|e| !(e.value == value && e.mask == mask));
                    if entries.len() == before { Err("no entry with this key") } else { Ok(()) }
                }
            };
        };
        insert(kind, &c.key, c.priority, c.prefix_len, action, *next, true)?;
        *next = next.saturating_add(1);
        Ok(())
    }
}

impl TableChange {
    /// Whether this change is about the entry of `key` (same values, masks and prefix).
    fn same_key(&self, key: &[KeyValue], prefix_len: Option<u32>) -> bool {
        self.prefix_len == prefix_len
            && self.key.len() == key.len()
            && self.key.iter().zip(key).all(|(a, b)| a.value == b.value && full_mask(a) == full_mask(b))
    }
}

/// The entries of `table` as the control plane sees them: those of its table file (`text`),
/// then `changes` in order (an add replaces the entry of its key or appends, a delete removes
/// it), each as a line of DPDK's table-file syntax (`match KEY… [priority P] action NAME [ARG
/// VALUE]…`: keys in hex, masked ones `VALUE/MASK`, `priority` where a key field is a
/// wildcard), and last the default action in force (`default action NAME [ARG VALUE]…`: the
/// spec's, or the last `p4 default`). Workers that refused a change (`p4_change_refused`) may
/// differ from it.
pub fn table_lines(
    p: &Program,
    table: &str,
    text: Option<&str>,
    changes: &[TableChange],
) -> Result<Vec<String>, String> {
    use core::fmt::Write;
    let (index, def) = table_def(p, table).ok_or_else(|| alloc::format!("no table `{table}` in the program"))?;
    let mut rows: Vec<(Vec<KeyValue>, u32, Option<u32>, entry::EntryAction)> = Vec::new();
    for e in entry::parse_file(p, def, text.unwrap_or("")).map_err(|e| alloc::format!("{e}"))? {
        if let entry::Entry::Match { key, priority, prefix_len, action } = e {
            rows.push((key, priority, prefix_len, action));
        }
    }
    let mut default = (def.default.action, def.default.args.clone());
    for c in changes.iter().filter(|c| c.table == index) {
        if c.default {
            if let Some(a) = &c.action {
                default = (a.action, a.args.clone());
            }
            continue;
        }
        let at = rows.iter().position(|(k, _, l, _)| c.same_key(k, *l));
        match (&c.action, at) {
            (Some(a), Some(i)) => {
                if let Some(r) = rows.get_mut(i) {
                    *r = (c.key.clone(), c.priority, c.prefix_len, a.clone());
                }
            }
            (Some(a), None) => rows.push((c.key.clone(), c.priority, c.prefix_len, a.clone())),
            (None, Some(i)) => {
                rows.remove(i);
            }
            (None, None) => {}
        }
    }
    let wildcard = def.keys.iter().any(|k| k.kind == MatchKind::Wildcard);
    let mut lines: Vec<String> = rows
        .iter()
        .map(|(key, priority, _, action)| {
            let mut l = String::from("match");
            for k in key {
                l.push(' ');
                hex(&mut l, &k.value);
                if let Some(m) = &k.mask {
                    l.push('/');
                    hex(&mut l, m);
                }
            }
            if wildcard {
                let _ = write!(l, " priority {priority}");
            }
            action_text(p, &mut l, action.action, &action.args);
            l
        })
        .collect();
    let mut l = String::from("default");
    action_text(p, &mut l, default.0, &default.1);
    lines.push(l);
    Ok(lines)
}

/// A selector's group table, as DPDK 22.11 lays it out (`rte_swx_table_selector.c`): the
/// group and member counts rounded up to powers of two (`G`, `M`); group `g` is `M` member ids
/// in which each member appears in proportion to its weight. Only the groups that have members
/// get their `M` places (`rows`), found through a `G`-entry index (`row_of`, `u32::MAX`: none,
/// which DPDK's zeroed table answers with member 0): `fib`'s 65 536 groups of 64 take 256 KiB
/// of index instead of 16 MiB. Built once; a lookup is two reads.
#[derive(Debug)]
struct Groups {
    row_of: Vec<u32>,
    rows: Vec<u32>,
    groups_mask: u32,
    members_log2: u32,
}

impl Groups {
    /// The group table of `sel` with `members` (file order): a member named again in its
    /// group takes the new weight in its place, as DPDK's `selector_group_member_add` does;
    /// then per group, DPDK's `group_set` — weights divided by every common divisor from 2 up
    /// to the smallest weight, in turn; their sum at most `M`; each member repeated
    /// `weight × (M / sum)` times, then the remainder `M % sum` handed out in member order, at
    /// most a member's weight each.
    fn build(sel: &SelectorDef, members: &[entry::Member]) -> Result<Self, BuildError> {
        let g = sel.n_groups_max.checked_next_power_of_two().ok_or_else(|| refused(&sel.name, "too many groups"))?;
        let m = sel
            .n_members_per_group_max
            .checked_next_power_of_two()
            .filter(|&m| m <= 1 << 20)
            .ok_or_else(|| refused(&sel.name, "more than 2^20 members per group"))?;
        let mut row_of = Vec::new();
        row_of.try_reserve_exact(g as usize).map_err(|_| refused(&sel.name, "no memory for its group index"))?;
        row_of.resize(g as usize, u32::MAX);
        let mut rows: Vec<u32> = Vec::new();
        let mut ids: Vec<u32> = members.iter().map(|x| x.group).collect();
        ids.sort_unstable();
        ids.dedup();
        for gid in ids {
            // (member, normalized weight), in the order members were first named.
            let mut ms: Vec<(u32, u32)> = Vec::new();
            for x in members.iter().filter(|x| x.group == gid) {
                if x.member >= m || x.weight == 0 {
                    return Err(refused(&sel.name, "a member id past n_members_per_group_max, or a zero weight"));
                }
                match ms.iter_mut().find(|e| e.0 == x.member) {
                    Some(e) => e.1 = x.weight,
                    None => ms.push((x.member, x.weight)),
                }
            }
            let min = ms.iter().map(|e| e.1).min().unwrap_or(1);
            for d in 2..=min {
                if ms.iter().all(|e| e.1 % d == 0) {
                    for e in &mut ms {
                        e.1 /= d;
                    }
                }
            }
            let sum: u64 = ms.iter().map(|e| u64::from(e.1)).sum();
            if sum > u64::from(m) {
                return Err(refused(&sel.name, "a group whose weights add up to more than n_members_per_group_max"));
            }
            let sum = (sum as u32).max(1);
            let (mult, mut rem) = (m / sum, m % sum);
            let row = u32::try_from(rows.len() / m as usize).map_err(|_| refused(&sel.name, "too many groups"))?;
            rows.try_reserve(m as usize).map_err(|_| refused(&sel.name, "no memory for its groups"))?;
            for e in &ms {
                let extra = e.1.min(rem);
                rem -= extra;
                rows.extend(core::iter::repeat_n(e.0, (e.1 * mult + extra) as usize));
            }
            // The counts add up to M exactly (M = mult × sum + rem); pad defensively.
            rows.resize((row as usize + 1) * m as usize, 0);
            if let Some(r) = row_of.get_mut(gid as usize) {
                *r = row;
            }
        }
        Ok(Groups { row_of, rows, groups_mask: g - 1, members_log2: m.trailing_zeros() })
    }

    fn select(&self, group: u32, hash: u32) -> u32 {
        let Some(&row) = self.row_of.get((group & self.groups_mask) as usize).filter(|&&r| r != u32::MAX) else {
            return 0;
        };
        let i = (hash & ((1u32 << self.members_log2) - 1)) as usize;
        self.rows.get(((row as usize) << self.members_log2) + i).copied().unwrap_or(0)
    }
}

impl Tables for TableSet {
    fn default_action(&self, table: TableRef) -> Option<(ActionId, &[u8])> {
        match table {
            TableRef::Table(t) => self.defaults.get(usize::from(t))?.as_ref().map(|s| (s.action, &s.args[..])),
            _ => None,
        }
    }

    fn lookup(&mut self, table: TableRef, key: &[u8]) -> Option<Hit<'_>> {
        let TableSet { tables, learners, arg_bytes, buf, now, .. } = self;
        let (action, n, index) = match table {
            TableRef::Table(t) => match tables.get_mut(usize::from(t))? {
                // A table nothing was ever added to (a keyless stub, an empty learner-less
                // table) misses without hashing a key: its used capacity bounds its entries.
                Kind::Exact { table } if table.used_capacity() == 0 => return None,
                Kind::Exact { table } => {
                    let (action, index) = table.lookup(key, *now, buf)?;
                    (ActionId::from(action), arg_bytes.get(usize::from(action)).copied().unwrap_or(0), index)
                }
                Kind::Lpm { lpm, lpm_field: (at, w), entries } => {
                    let i = lpm.lookup(lpm_addr(key, *at, *w)?)?;
                    let e = entries.get(i as usize)?;
                    return Some(Hit { action: e.action, args: &e.args, entry: i });
                }
                Kind::List { entries, stored } => {
                    let e = entries.iter().find(|e| {
                        e.value.len() == key.len()
                            && key.iter().zip(&e.value).zip(&e.mask).all(|((k, v), m)| k & m == v & m)
                    })?;
                    let s = stored.get(e.index as usize)?;
                    return Some(Hit { action: s.action, args: &s.args, entry: e.index });
                }
            },
            TableRef::Learner(l) => {
                let x = learners.get_mut(usize::from(l))?;
                let (action, _) = x.table.lookup(key, *now, buf)?;
                (ActionId::from(action), arg_bytes.get(usize::from(action)).copied().unwrap_or(0), 0)
            }
            TableRef::Selector(_) => return None,
        };
        Some(Hit { action, args: buf.get(..n).unwrap_or(&[]), entry: index })
    }

    fn learn(&mut self, l: u16, key: &[u8], action: ActionId, args: &[u8], timeout_id: u64) -> Result<bool, Fault> {
        let now = self.now;
        let x = self.learners.get_mut(usize::from(l)).ok_or(Fault::Unsupported("learn"))?;
        let Ok(action) = u8::try_from(action) else { return Err(Fault::Unsupported("learn")) };
        // DPDK takes the timeout id modulo nothing: an id past the list is refused here.
        let profile =
            usize::try_from(timeout_id).ok().filter(|&t| t < x.profiles).ok_or(Fault::Unsupported("learn"))?;
        let added = x.table.insert(key, action, &data(args, 0), profile as u8, now);
        if !added {
            self.learn_refused += 1;
        }
        Ok(added)
    }

    fn rearm(&mut self, l: u16, _key: &[u8], timeout_id: Option<u64>) -> Result<(), Fault> {
        let now = self.now;
        let x = self.learners.get_mut(usize::from(l)).ok_or(Fault::Unsupported("rearm"))?;
        if !x.table.has_hit() {
            return Ok(()); // nothing to rearm, as DPDK
        }
        let profile = match timeout_id {
            Some(t) => {
                Some(usize::try_from(t).ok().filter(|&t| t < x.profiles).ok_or(Fault::Unsupported("rearm"))? as u8)
            }
            None => None,
        };
        x.table.rearm(profile, now);
        Ok(())
    }

    fn select(&mut self, selector: u16, group: u32, hash: u32) -> u32 {
        self.selectors.get(usize::from(selector)).map_or(0, |s| s.select(group, hash))
    }

    fn forget(&mut self, l: u16, key: &[u8]) -> Result<(), Fault> {
        let now = self.now;
        let x = self.learners.get_mut(usize::from(l)).ok_or(Fault::Unsupported("forget"))?;
        let _ = x.table.delete(key, now);
        Ok(())
    }
}
