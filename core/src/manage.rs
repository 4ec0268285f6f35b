//! The management channel's protocol (docs/PROTOCOL.md, "Management channel"): request
//! lines in, reply lines out, and the commands that change the chain's tables live.
//!
//! ```text
//! ctl ID COMMAND [ARGS]            a request (ID: 1..=10 digits; the line ≤ MAX_LINE bytes)
//! @ctl id=ID | TEXT                zero or more data lines of the reply
//! @ctl id=ID ok [KEY=VALUE…]       the last line of a reply that worked
//! @ctl id=ID error=NAME msg="…"    … or of one that did not (nothing changed)
//! ```
//!
//! The machine polls its management input at a low rate on the boot core (never per packet:
//! worker 0, every 2 ms, through the firmware's `Machine::read_mgmt` — the image reads
//! COM1's receiver, the hosted build a stdin reader thread behind a bounded channel);
//! [`LineBuf`] assembles lines of at most [`MAX_LINE`] bytes from what arrives, [`parse`] turns
//! a line into a [`Command`], and [`Manager::execute`] carries out the commands on the chain's
//! shared NF state (`ChainFactory`'s `acl()`, `lb()`, `nat()`, `accounting()`, `l3fwd()`: the
//! chain's first NF of each kind; the machine itself handles `stats`, `show rss`, `rss …` and
//! `stop`, in `firmware/src/forward/mgmt.rs`).
//!
//! A table change is built whole on the boot core and published for the workers
//! ([`crate::sync::Swap`]): each worker takes it at its next batch, so a change lands
//! between two batches, forwarding never stops and a flow's packets are never reordered. The
//! replaced versions wait in the [`Manager`] until no worker holds them, so no worker frees
//! memory.

use core::fmt::{self, Write};

use crate::nf::acl::{AclConfigError, AclRules};
use crate::nf::config::sections::{self, acl_rule};
use crate::nf::config::text::{Addr, BackendText, Endpoint, Ports, RouteText, RuleText};
use crate::nf::config::{ChainFactory, SpecErrorKind};
use crate::nf::l3fwd::{L3Tables, L3fwdConfigError};
use crate::nf::lb::LbError;
use crate::parse::IpAddr;
use crate::sync::Retired;
use crate::time::Instant;

/// Longest request line, in bytes (without the line end).
pub const MAX_LINE: usize = 256;
/// Most rows one `show` prints (then `| more=N`).
pub const SHOW_MAX: usize = 64;

/// What [`LineBuf::push`] completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input<'a> {
    /// A whole line (line end removed).
    Line(&'a str),
    /// A line longer than [`MAX_LINE`]: its first `MAX_LINE` bytes (to find the id in).
    TooLong(&'a str),
    /// A line that is not UTF-8.
    NotText,
}

/// Assembles request lines from the bytes the machine reads (bounded; nothing allocates).
#[derive(Debug, Default)]
pub struct LineBuf {
    buf: heapless::Vec<u8, MAX_LINE>,
    overflow: bool,
    /// The previous call completed a line: clear before taking the next byte.
    done: bool,
}

impl LineBuf {
    /// An empty buffer.
    pub const fn new() -> Self {
        Self { buf: heapless::Vec::new(), overflow: false, done: false }
    }

    /// Takes one byte; at a line end (`\n`; a `\r` before it is dropped) returns the line.
    pub fn push(&mut self, b: u8) -> Option<Input<'_>> {
        if core::mem::take(&mut self.done) {
            self.buf.clear();
            self.overflow = false;
        }
        if b != b'\n' {
            if self.buf.push(b).is_err() {
                self.overflow = true;
            }
            return None;
        }
        self.done = true;
        if self.buf.last() == Some(&b'\r') && !self.overflow {
            self.buf.pop();
        }
        let text = core::str::from_utf8(&self.buf);
        Some(match (self.overflow, text) {
            (false, Ok(t)) => Input::Line(t),
            (true, Ok(t)) => Input::TooLong(t),
            (true, Err(e)) => Input::TooLong(core::str::from_utf8(&self.buf[..e.valid_up_to()]).unwrap_or("")),
            (false, Err(_)) => Input::NotText,
        })
    }
}

/// What `show` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// The ACL's rules.
    Acl,
    /// The load balancer's VIPs and backends.
    Lb,
    /// NAT's pool and mappings.
    Nat,
    /// Accounting's flows.
    Accounting,
    /// The L3 forwarder's routes.
    L3fwd,
    /// The neighbour table (a chain with port addresses).
    Neigh,
    /// The NICs' RSS redirection tables (the machine answers).
    Rss,
}

/// One management command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// The commands, one per data line.
    Help,
    /// Every counter, as one JSON object (the machine answers).
    Stats,
    /// A table, bounded to [`SHOW_MAX`] rows.
    Show(Table),
    /// `acl add RULE`: append a rule (record syntax of `acl.rule`).
    AclAdd(crate::nf::acl::AclRule),
    /// `acl del ID`: remove rule `ID` (later rules move down).
    AclDel(usize),
    /// `route add prefix:P,port:N,mac:M`.
    RouteAdd(crate::nf::acl::Prefix, crate::nf::l3fwd::NextHop),
    /// `route del PREFIX`.
    RouteDel(crate::nf::acl::Prefix),
    /// `neigh add port:N,ip:IP,mac:MAC`: a static neighbour (IPv4 or IPv6).
    NeighAdd(u8, IpAddr, [u8; 6]),
    /// `neigh del IP`: forget a neighbour.
    NeighDel(IpAddr),
    /// `lb backend add VIP BACKEND`.
    BackendAdd(usize, crate::nf::lb::Backend),
    /// `lb backend del VIP BACKEND`.
    BackendDel(usize, crate::nf::lb::Backend),
    /// `rss move FROM TO` (the machine answers).
    RssMove(u8, u8),
    /// `rss restore` (the machine answers).
    RssRestore,
    /// `stop`: stop as a STOP control frame would (the machine answers).
    Stop,
    /// `p4 add|del TABLE LINE`: a live change of a P4 program's table, `LINE` in DPDK's
    /// table-file syntax (`match KEY… action NAME ARG VALUE…`; a delete needs only the key).
    P4Change {
        /// An add (or a replacement of the key's entry), or a delete.
        add: bool,
        /// The table's name.
        table: alloc::string::String,
        /// The entry's line.
        line: alloc::string::String,
    },
    /// `p4 default TABLE action NAME [ARG VALUE]…`: a live change of a P4 table's default
    /// action (the one a miss runs).
    P4Default {
        /// The table's name.
        table: alloc::string::String,
        /// `action NAME [ARG VALUE]…`.
        line: alloc::string::String,
    },
    /// `p4 show TABLE`: a P4 program's table entries as the control plane sees them (its
    /// table file, then the changes), one table-file line each.
    P4Show(alloc::string::String),
    /// `p4 learner show LEARNER`: the entries a P4 program's learner holds on each worker
    /// (learned by the data plane), one line each, with the instance that holds it.
    P4LearnerShow(alloc::string::String),
    /// `p4 reg read ARRAY INDEX`: a register of the P4 program (every worker shares it).
    P4RegRead {
        /// The `regarray`'s name.
        array: alloc::string::String,
        /// The register's index (below the array's size).
        index: u64,
    },
    /// `p4 reg write ARRAY INDEX VALUE`: sets a register of the P4 program.
    P4RegWrite {
        /// The `regarray`'s name.
        array: alloc::string::String,
        /// The register's index (below the array's size).
        index: u64,
        /// The new value.
        value: u64,
    },
}

/// The commands, as `help` lists them.
pub const HELP: [&str; 21] = [
    "stats",
    "show acl|lb|nat|accounting|l3fwd|neigh|rss",
    "acl add prio:P,src:PFX,dst:PFX,sport:R,dport:R,proto:P,action:permit|deny",
    "acl del ID",
    "route add prefix:PFX,port:N,mac:MAC",
    "route del PFX",
    "neigh add port:N,ip:IP,mac:MAC",
    "neigh del IP",
    "lb backend add VIP BACKEND",
    "lb backend del VIP BACKEND",
    "rss move FROM TO",
    "rss restore",
    "p4 add TABLE match KEY... action NAME [ARG VALUE]...",
    "p4 del TABLE match KEY...",
    "p4 default TABLE action NAME [ARG VALUE]...",
    "p4 show TABLE",
    "p4 learner show LEARNER",
    "p4 reg read ARRAY INDEX",
    "p4 reg write ARRAY INDEX VALUE",
    "stop",
    "help",
];

/// Why a request failed (its `error=` name).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The line is not `ctl ID COMMAND…`.
    BadRequest,
    /// The line is longer than [`MAX_LINE`].
    LineTooLong,
    /// No such command.
    UnknownCommand,
    /// An argument does not parse or is out of range.
    BadArgument,
    /// The chain has no NF the command is for.
    NoSuchNf,
    /// The rule, route, VIP or backend named does not exist.
    NotFound,
    /// It exists already.
    Exists,
    /// A table or list is full.
    Full,
    /// The new tables do not fit in memory.
    NoMemory,
    /// Another change of the same thing is in progress; try again.
    Busy,
    /// This machine or NIC cannot do it.
    Unsupported,
}

impl ErrorKind {
    /// The name on the `error=` line.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::BadRequest => "bad_request",
            ErrorKind::LineTooLong => "line_too_long",
            ErrorKind::UnknownCommand => "unknown_command",
            ErrorKind::BadArgument => "bad_argument",
            ErrorKind::NoSuchNf => "no_such_nf",
            ErrorKind::NotFound => "not_found",
            ErrorKind::Exists => "exists",
            ErrorKind::Full => "full",
            ErrorKind::NoMemory => "no_memory",
            ErrorKind::Busy => "busy",
            ErrorKind::Unsupported => "unsupported",
        }
    }
}

/// The text of an error message or an `ok` line (the control plane allocates).
pub type Msg = alloc::string::String;

/// A failed request: its name and a message for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The `error=` name.
    pub kind: ErrorKind,
    /// The `msg=` text (no `"` in it).
    pub msg: Msg,
}

impl Error {
    /// An error with a formatted message (cut at 160 characters; `"` becomes `'`).
    pub fn new(kind: ErrorKind, args: fmt::Arguments<'_>) -> Self {
        let mut raw = Msg::new();
        let _ = raw.write_fmt(args);
        let msg = raw.chars().take(160).map(|c| if c == '"' { '\'' } else { c }).collect();
        Self { kind, msg }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "error={} msg=\"{}\"", self.kind.name(), self.msg)
    }
}

/// A parsed request: its id and command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The id the reply lines carry.
    pub id: u32,
    /// What to do.
    pub cmd: Command,
}

/// The id of a request line, if its start is `ctl ID` (also for lines that fail later).
pub fn request_id(line: &str) -> Option<u32> {
    let mut w = line.split_ascii_whitespace();
    match (w.next(), w.next()) {
        (Some("ctl"), Some(id)) if (1..=10).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_digit()) => {
            id.parse().ok()
        }
        _ => None,
    }
}

/// Parses a request line; an error carries the id when the line has one.
pub fn parse(line: &str) -> Result<Request, (Option<u32>, Error)> {
    let Some(id) = request_id(line) else {
        return Err((None, Error::new(ErrorKind::BadRequest, format_args!("a request is: ctl ID COMMAND"))));
    };
    if let Some(cmd) = p4_change(line) {
        return cmd.map(|cmd| Request { id, cmd }).map_err(|e| (Some(id), e));
    }
    let mut w = line.split_ascii_whitespace().skip(2);
    let words: heapless::Vec<&str, 6> = w.by_ref().take(6).collect();
    if w.next().is_some() {
        return Err((Some(id), Error::new(ErrorKind::BadArgument, format_args!("too many words"))));
    }
    parse_command(&words).map(|cmd| Request { id, cmd }).map_err(|e| (Some(id), e))
}

/// `ctl ID p4 add|del TABLE LINE…`: the entry's line is the rest of the request, however many
/// words it has; `None` for another command.
fn p4_change(line: &str) -> Option<Result<Command, Error>> {
    let mut rest = line.trim_start();
    for _ in 0..2 {
        rest = rest.split_once(|c: char| c.is_ascii_whitespace()).map_or("", |(_, r)| r).trim_start();
    }
    let rest = rest.strip_prefix("p4")?;
    if !rest.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let mut w = rest.trim_start().splitn(3, |c: char| c.is_ascii_whitespace());
    let (op, table, entry) = (w.next().unwrap_or(""), w.next().unwrap_or(""), w.next().unwrap_or("").trim());
    if op == "reg" {
        return Some(p4_reg(table, entry));
    }
    if op == "learner" {
        return Some(
            match (table, entry.split_ascii_whitespace().take(2).collect::<heapless::Vec<&str, 2>>().as_slice()) {
                ("show", [name]) => Ok(Command::P4LearnerShow((*name).into())),
                _ => Err(bad(format_args!("p4 learner: expected show LEARNER"))),
            },
        );
    }
    let add = match op {
        "add" => true,
        "del" => false,
        "show" if !table.is_empty() && entry.is_empty() => return Some(Ok(Command::P4Show(table.into()))),
        "show" => return Some(Err(bad(format_args!("p4 show: expected TABLE alone")))),
        "default" if !table.is_empty() && !entry.is_empty() => {
            return Some(Ok(Command::P4Default { table: table.into(), line: entry.into() }));
        }
        "default" => return Some(Err(bad(format_args!("p4 default: expected TABLE action NAME [ARG VALUE]...")))),
        _ => return Some(Err(bad(format_args!("p4: expected add, del, default, show, learner or reg, got '{op}'")))),
    };
    if table.is_empty() || entry.is_empty() {
        return Some(Err(bad(format_args!("p4 {op}: expected TABLE and an entry line"))));
    }
    Some(Ok(Command::P4Change { add, table: table.into(), line: entry.into() }))
}

/// `p4 reg read ARRAY INDEX` / `p4 reg write ARRAY INDEX VALUE` (`op` and the words after it;
/// numbers in decimal or `0x` hex).
fn p4_reg(op: &str, rest: &str) -> Result<Command, Error> {
    let num = |w: &str, what: &str| {
        let n = match w.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => w.parse::<u64>(),
        };
        n.map_err(|_| bad(format_args!("p4 reg {op}: {what} '{w}' is not a number")))
    };
    let words: heapless::Vec<&str, 4> = rest.split_ascii_whitespace().take(4).collect();
    match (op, words.as_slice()) {
        ("read", [array, index]) => Ok(Command::P4RegRead { array: (*array).into(), index: num(index, "index")? }),
        ("write", [array, index, value]) => {
            Ok(Command::P4RegWrite { array: (*array).into(), index: num(index, "index")?, value: num(value, "value")? })
        }
        ("read", _) => Err(bad(format_args!("p4 reg read: expected ARRAY INDEX"))),
        ("write", _) => Err(bad(format_args!("p4 reg write: expected ARRAY INDEX VALUE"))),
        _ => Err(bad(format_args!("p4 reg: expected read or write, got '{op}'"))),
    }
}

fn bad(args: fmt::Arguments<'_>) -> Error {
    Error::new(ErrorKind::BadArgument, args)
}

/// Names a record error the way the chain text form does: `FIELD: what is wrong`.
fn no_neigh() -> Error {
    Error::new(ErrorKind::NoSuchNf, format_args!("the chain has no neighbour table (no port.addr)"))
}

fn neigh_error(e: crate::neigh::NeighEdit) -> Error {
    let kind = match e {
        crate::neigh::NeighEdit::NotFound => ErrorKind::NotFound,
        crate::neigh::NeighEdit::Full => ErrorKind::Full,
        _ => ErrorKind::BadArgument,
    };
    Error::new(kind, format_args!("neigh: {e}"))
}

fn record_error(key: &str, e: crate::nf::config::Fail) -> Error {
    match e.field {
        Some(f) => bad(format_args!("{key}.{f}: {}", e.kind)),
        None => bad(format_args!("{key}: {}", e.kind)),
    }
}

fn parse_command(words: &[&str]) -> Result<Command, Error> {
    let number = |s: &str, what: &str| -> Result<usize, Error> {
        crate::nf::config::values::usize_dec(s).map_err(|_| bad(format_args!("{what}: expected a number, got '{s}'")))
    };
    let queue = |s: &str, what: &str| -> Result<u8, Error> {
        u8::try_from(number(s, what)?).map_err(|_| bad(format_args!("{what}: expected a queue 0..=255")))
    };
    let prefix = |s: &str| sections::prefix(s).map_err(|e| bad(format_args!("prefix: expected {e}, got '{s}'")));
    let backend = |s: &str| sections::backend(s).map_err(|e| bad(format_args!("backend: expected {e}, got '{s}'")));
    let neighbour = |s: &str, what: &str| {
        sections::addr(s).map_err(|_| bad(format_args!("{what}: expected an IPv4/IPv6 address, got '{s}'")))
    };
    Ok(match *words {
        ["help"] => Command::Help,
        ["stats"] => Command::Stats,
        ["show", what] => Command::Show(match what {
            "acl" => Table::Acl,
            "lb" => Table::Lb,
            "nat" => Table::Nat,
            "accounting" => Table::Accounting,
            "l3fwd" => Table::L3fwd,
            "neigh" => Table::Neigh,
            "rss" => Table::Rss,
            _ => return Err(bad(format_args!("show: expected acl, lb, nat, accounting, l3fwd, neigh or rss"))),
        }),
        ["acl", "add", rule] => Command::AclAdd(acl_rule(rule).map_err(|e| record_error("acl.rule", e))?),
        ["acl", "del", id] => Command::AclDel(number(id, "acl del")?),
        ["route", "add", r] => {
            let (p, hop) = sections::route(r).map_err(|e| record_error("l3fwd.route", e))?;
            Command::RouteAdd(p, hop)
        }
        ["route", "del", p] => Command::RouteDel(prefix(p)?),
        ["neigh", "add", r] => {
            let [port, addr, mac] = crate::nf::config::record(r, ["port", "ip", "mac"])
                .map_err(|e| record_error("neigh", e))?
                .map(|v| v.unwrap_or(""));
            let port = u8::try_from(number(port, "neigh.port")?)
                .map_err(|_| bad(format_args!("neigh.port: expected a port 0..=255")))?;
            let addr = neighbour(addr, "neigh.ip")?;
            let mac = crate::nf::config::values::mac(mac)
                .map_err(|e| bad(format_args!("neigh.mac: expected {e}, got '{mac}'")))?;
            Command::NeighAdd(port, addr, mac)
        }
        ["neigh", "del", a] => Command::NeighDel(neighbour(a, "neigh del")?),
        ["lb", "backend", "add", vip, b] => Command::BackendAdd(number(vip, "vip")?, backend(b)?),
        ["lb", "backend", "del", vip, b] => Command::BackendDel(number(vip, "vip")?, backend(b)?),
        ["rss", "move", from, to] => Command::RssMove(queue(from, "from")?, queue(to, "to")?),
        ["rss", "restore"] => Command::RssRestore,
        ["stop"] => Command::Stop,
        [first, ..] if ["show", "acl", "route", "neigh", "lb", "rss"].contains(&first) => {
            return Err(bad(format_args!("wrong arguments for '{first}' (see help)")));
        }
        [] => return Err(Error::new(ErrorKind::UnknownCommand, format_args!("no command (see help)"))),
        [other, ..] => {
            return Err(Error::new(ErrorKind::UnknownCommand, format_args!("unknown command '{other}' (see help)")));
        }
    })
}

/// What [`Manager::execute`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Done {
    /// It worked; the text (possibly empty) goes on the `ok` line.
    Ok(Msg),
    /// The command is the machine's to carry out (`stats`, `show rss`, `rss …`, `stop`).
    NotMine,
}

/// The boot core's side of the channel: carries out NF commands, keeps replaced table
/// versions until no worker holds them, and folds ACL rule changes into new classifiers in the
/// background ([`Manager::background`]).
#[derive(Debug, Default)]
pub struct Manager {
    acl: Retired<AclRules>,
    l3: Retired<L3Tables>,
    /// The ACL merge being built, a step per [`Manager::background`] call.
    acl_merge: Option<crate::nf::acl::Merge>,
}

fn acl_error(e: AclConfigError) -> Error {
    let kind = match e {
        AclConfigError::NoSuchRule { .. } => ErrorKind::NotFound,
        AclConfigError::TooManyRules { .. } => ErrorKind::Full,
        _ => ErrorKind::BadArgument,
    };
    Error::new(kind, format_args!("acl: {}", SpecErrorKind::Acl(e)))
}

fn l3_error(e: L3fwdConfigError) -> Error {
    let kind = match e {
        L3fwdConfigError::NoSuchRoute => ErrorKind::NotFound,
        L3fwdConfigError::DuplicateRoute { .. } => ErrorKind::Exists,
        L3fwdConfigError::OutOfGroups { .. } | L3fwdConfigError::TooManyNextHops => ErrorKind::Full,
        L3fwdConfigError::OutOfMemory => ErrorKind::NoMemory,
        _ => ErrorKind::BadArgument,
    };
    Error::new(kind, format_args!("{e}"))
}

fn lb_error(e: LbError) -> Error {
    let kind = match e {
        LbError::UnknownVip { .. } | LbError::NoSuchBackend { .. } => ErrorKind::NotFound,
        LbError::DuplicateBackend { .. } => ErrorKind::Exists,
        LbError::TooManyBackends { .. } => ErrorKind::Full,
        LbError::Busy => ErrorKind::Busy,
        LbError::FamilyMismatch { .. } => ErrorKind::BadArgument,
    };
    Error::new(kind, format_args!("lb: {e}"))
}

fn no_nf(name: &str) -> Error {
    Error::new(ErrorKind::NoSuchNf, format_args!("the chain has no {name}"))
}

fn ok(args: fmt::Arguments<'_>) -> Result<Done, Error> {
    let mut m = Msg::new();
    let _ = m.write_fmt(args);
    Ok(Done::Ok(m))
}

/// Writes rows through `out`, at most [`SHOW_MAX`], then `more=N` for the rest.
struct Rows<'o> {
    out: &'o mut dyn FnMut(fmt::Arguments<'_>),
    shown: usize,
    more: usize,
}

impl<'o> Rows<'o> {
    fn new(out: &'o mut dyn FnMut(fmt::Arguments<'_>)) -> Self {
        Self { out, shown: 0, more: 0 }
    }

    fn row(&mut self, args: fmt::Arguments<'_>) {
        if self.shown < SHOW_MAX {
            (self.out)(args);
            self.shown += 1;
        } else {
            self.more += 1;
        }
    }

    fn end(self) {
        if self.more > 0 {
            (self.out)(format_args!("more={}", self.more));
        }
    }
}

impl Manager {
    /// A manager with nothing retired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Frees replaced versions no worker holds any more; returns how many are still held.
    pub fn collect(&mut self) -> usize {
        self.acl.collect() + self.l3.collect()
    }

    /// One step of background work, called by the boot core between its rounds (every
    /// management poll): one piece of the ACL's merge of rule changes into new classifiers
    /// (`nf::acl` module docs; the longest piece at 10 000 rules is a few milliseconds,
    /// `core/examples/aclupdate.rs`). Returns whether work remains.
    pub fn background(&mut self, chain: &ChainFactory) -> bool {
        let Some(acl) = chain.acl() else { return false };
        let Some(m) = self.acl_merge.as_mut() else {
            self.acl_merge = acl.start_merge();
            return self.acl_merge.is_some();
        };
        if !m.step() {
            return true;
        }
        if let Some(old) = self.acl_merge.take().and_then(|m| acl.finish_merge(m)) {
            self.acl.push(old);
        }
        false
    }

    /// Carries out `cmd` on the chain's NFs, writing data lines through `out`.
    pub fn execute(
        &mut self,
        chain: &ChainFactory,
        cmd: &Command,
        now: Instant,
        out: &mut dyn FnMut(fmt::Arguments<'_>),
    ) -> Result<Done, Error> {
        self.collect();
        match cmd {
            Command::Help => {
                for h in HELP {
                    out(format_args!("{h}"));
                }
                ok(format_args!(""))
            }
            Command::Stats | Command::Show(Table::Rss) | Command::RssMove(..) | Command::RssRestore | Command::Stop => {
                Ok(Done::NotMine)
            }
            Command::Show(t) => show(chain, *t, now, out),
            Command::AclAdd(rule) => {
                let acl = chain.acl().ok_or_else(|| no_nf("acl"))?;
                let (id, old) = acl.add_rule(*rule).map_err(acl_error)?;
                self.acl.push(old);
                ok(format_args!("rule={id} generation={}", acl.rules().generation()))
            }
            Command::AclDel(id) => {
                let acl = chain.acl().ok_or_else(|| no_nf("acl"))?;
                let (_, old) = acl.delete_rule(*id).map_err(acl_error)?;
                self.acl.push(old);
                ok(format_args!("rules={} generation={}", acl.rules().rules().len(), acl.rules().generation()))
            }
            Command::RouteAdd(p, hop) => {
                let l3 = chain.l3fwd().ok_or_else(|| no_nf("l3fwd"))?;
                if !chain.egress().vlans.exists(usize::from(hop.port)) {
                    let why = format_args!("port {} is neither a port nor a declared sub-interface", hop.port);
                    return Err(Error::new(ErrorKind::BadArgument, why));
                }
                self.l3.push(l3.add_route(p.addr, p.len, *hop).map_err(l3_error)?);
                ok(format_args!("routes={}", route_count(&l3.tables())))
            }
            Command::RouteDel(p) => {
                let l3 = chain.l3fwd().ok_or_else(|| no_nf("l3fwd"))?;
                self.l3.push(l3.delete_route(p.addr, p.len).map_err(l3_error)?);
                ok(format_args!("routes={}", route_count(&l3.tables())))
            }
            Command::NeighAdd(port, ip, mac) => {
                let n = chain.neigh().ok_or_else(no_neigh)?;
                n.set_static(*port, *ip, *mac, now).map_err(neigh_error)?;
                ok(format_args!("entries={}", n.entries().len()))
            }
            Command::NeighDel(ip) => {
                let n = chain.neigh().ok_or_else(no_neigh)?;
                n.remove(*ip).map_err(neigh_error)?;
                ok(format_args!("entries={}", n.entries().len()))
            }
            Command::BackendAdd(vip, b) => {
                let lb = chain.lb().ok_or_else(|| no_nf("lb"))?;
                lb.add_backend(*vip, *b).map_err(lb_error)?;
                ok(format_args!("backends={}", lb.vip(*vip).map_or(0, |v| v.3.len())))
            }
            Command::BackendDel(vip, b) => {
                let lb = chain.lb().ok_or_else(|| no_nf("lb"))?;
                lb.delete_backend(*vip, *b).map_err(lb_error)?;
                ok(format_args!("backends={}", lb.vip(*vip).map_or(0, |v| v.3.len())))
            }
            Command::P4Change { add, table, line } => {
                let p4 = chain.p4().ok_or_else(|| no_nf("p4"))?;
                let generation = p4
                    .change(table, line, *add)
                    .map_err(|e| Error::new(ErrorKind::BadArgument, format_args!("p4 {table}: {e}")))?;
                ok(format_args!("generation={generation}"))
            }
            Command::P4Default { table, line } => {
                let p4 = chain.p4().ok_or_else(|| no_nf("p4"))?;
                let generation = p4
                    .change_default(table, line)
                    .map_err(|e| Error::new(ErrorKind::BadArgument, format_args!("p4 {table}: {e}")))?;
                ok(format_args!("generation={generation}"))
            }
            Command::P4Show(table) => {
                let p4 = chain.p4().ok_or_else(|| no_nf("p4"))?;
                let lines = p4.show(table).map_err(|e| Error::new(ErrorKind::BadArgument, format_args!("p4 {e}")))?;
                let mut rows = Rows::new(out);
                for l in &lines {
                    rows.row(format_args!("{l}"));
                }
                rows.end();
                ok(format_args!("entries={} generation={}", lines.len(), p4.generation()))
            }
            Command::P4LearnerShow(learner) => {
                let p4 = chain.p4().ok_or_else(|| no_nf("p4"))?;
                let (lines, instances) =
                    p4.learner_show(learner, now).map_err(|e| bad(format_args!("p4 learner show: {e}")))?;
                let mut rows = Rows::new(out);
                for l in &lines {
                    rows.row(format_args!("{l}"));
                }
                rows.end();
                ok(format_args!("entries={} instances={instances}", lines.len()))
            }
            Command::P4RegRead { array, index } => {
                let p4 = chain.p4().ok_or_else(|| no_nf("p4"))?;
                let v = p4.reg_read(array, *index).map_err(|e| bad(format_args!("p4 reg read: {e}")))?;
                ok(format_args!("value={v}"))
            }
            Command::P4RegWrite { array, index, value } => {
                let p4 = chain.p4().ok_or_else(|| no_nf("p4"))?;
                p4.reg_write(array, *index, *value).map_err(|e| bad(format_args!("p4 reg write: {e}")))?;
                ok(format_args!("value={value}"))
            }
        }
    }
}

fn route_count(t: &L3Tables) -> usize {
    t.config().routes4.len() + t.config().routes6.len()
}

fn proto_name(p: u8) -> crate::nf::config::values::ProtoName {
    crate::nf::config::values::proto_name(Some(p))
}

fn show(chain: &ChainFactory, t: Table, now: Instant, out: &mut dyn FnMut(fmt::Arguments<'_>)) -> Result<Done, Error> {
    match t {
        Table::Acl => {
            let acl = chain.acl().ok_or_else(|| no_nf("acl"))?;
            let r = acl.rules();
            let default = match r.default_action() {
                crate::nf::acl::AclAction::Permit => "permit",
                crate::nf::acl::AclAction::Deny => "deny",
            };
            out(format_args!(
                "default={default} rules={} generation={} cached_flows={}",
                r.rules().len(),
                r.generation(),
                acl.cached_flows(now)
            ));
            let mut rows = Rows::new(out);
            for (i, rule) in r.rules().iter().enumerate() {
                rows.row(format_args!("rule {i} {}", RuleText(rule)));
            }
            rows.end();
        }
        Table::Lb => {
            let lb = chain.lb().ok_or_else(|| no_nf("lb"))?;
            let mut rows = Rows::new(out);
            for i in 0..lb.vip_count() {
                let Some((addr, port, proto, backends)) = lb.vip(i) else { continue };
                let slots = lb.slot_counts(i).map_or(0, |s| s.0);
                let mut list: heapless::String<128> = heapless::String::new();
                for (k, b) in backends.iter().enumerate() {
                    let sep = if k == 0 { "" } else { ";" };
                    if write!(list, "{sep}{}", BackendText(*b)).is_err() {
                        let _ = list.push_str("…");
                        break;
                    }
                }
                rows.row(format_args!(
                    "vip {i} addr:{},port:{port},proto:{},backends:{list} count={} maglev_slots={slots}",
                    Addr(addr),
                    proto_name(proto),
                    backends.len()
                ));
            }
            rows.end();
        }
        Table::Nat => {
            let nat = chain.nat().ok_or_else(|| no_nf("nat"))?;
            let c = nat.config();
            out(format_args!(
                "external={} ports={} in_use={}",
                Addr(IpAddr::V4(c.external_addr)),
                Ports(c.ports),
                nat.ports_in_use()
            ));
            let mut rows = Rows::new(out);
            nat.for_each_mapping(now, |src, sport, dst, dport, proto, ext| {
                rows.row(format_args!(
                    "map inside={} remote={} proto={} external_port={ext}",
                    Endpoint(IpAddr::V4(src), sport),
                    Endpoint(IpAddr::V4(dst), dport),
                    proto_name(proto)
                ));
            });
            rows.end();
        }
        Table::Accounting => {
            let acc = chain.accounting().ok_or_else(|| no_nf("accounting"))?;
            match acc.export() {
                Some(e) => out(format_args!(
                    "flows={} export=ipfix:{}:{}:{}",
                    acc.flow_count(now),
                    e.port,
                    Addr(IpAddr::V4(e.collector)),
                    e.udp_port
                )),
                None => out(format_args!("flows={} export=off", acc.flow_count(now))),
            }
            let mut rows = Rows::new(out);
            acc.for_each_record(now, |r| {
                let f = &r.flow;
                rows.row(format_args!(
                    "flow src={} dst={} proto={} packets={} bytes={}",
                    Endpoint(f.src, f.src_port),
                    Endpoint(f.dst, f.dst_port),
                    proto_name(f.proto),
                    r.packets,
                    r.bytes
                ));
            });
            rows.end();
        }
        Table::L3fwd => {
            let l3 = chain.l3fwd().ok_or_else(|| no_nf("l3fwd"))?;
            let t = l3.tables();
            let c = t.config();
            out(format_args!("routes={} next_hops={}", route_count(&t), c.next_hops.len()));
            let mut rows = Rows::new(out);
            let hop = |i: u32| c.next_hops.get(i as usize).copied();
            for r in &c.routes4 {
                if let Some(h) = hop(r.next_hop) {
                    rows.row(format_args!("route {}", RouteText(crate::nf::acl::Prefix::v4(r.prefix, r.len), h)));
                }
            }
            for r in &c.routes6 {
                if let Some(h) = hop(r.next_hop) {
                    rows.row(format_args!("route {}", RouteText(crate::nf::acl::Prefix::v6(r.prefix, r.len), h)));
                }
            }
            rows.end();
        }
        Table::Neigh => {
            let n = chain.neigh().ok_or_else(no_neigh)?;
            let entries = n.entries();
            out(format_args!("entries={} waiting={} capacity={}", entries.len(), n.waiting(), n.config().capacity));
            let mut rows = Rows::new(out);
            for e in &entries {
                rows.row(format_args!(
                    "neigh ip:{},port:{},mac:{},state:{},queued:{}",
                    Addr(e.ip),
                    e.port,
                    crate::nf::config::text::MacText(e.mac),
                    e.state.as_str(),
                    e.queued
                ));
            }
            rows.end();
        }
        Table::Rss => return Ok(Done::NotMine),
    }
    ok(format_args!(""))
}

/// Writes ` key=value` pairs (a stats line's body) as one JSON object: numbers stay
/// numbers, anything else becomes a string.
pub fn write_json(pairs: &str, w: &mut dyn Write) -> fmt::Result {
    w.write_char('{')?;
    let mut first = true;
    for (k, v) in pairs.split_ascii_whitespace().filter_map(|kv| kv.split_once('=')) {
        if !first {
            w.write_char(',')?;
        }
        first = false;
        write_json_str(w, k)?;
        w.write_char(':')?;
        let numeric =
            !v.is_empty() && v.len() <= 20 && v.bytes().all(|b| b.is_ascii_digit()) && v.parse::<u64>().is_ok();
        if numeric {
            w.write_str(v)?;
        } else {
            write_json_str(w, v)?;
        }
    }
    w.write_char('}')
}

fn write_json_str(w: &mut dyn Write, s: &str) -> fmt::Result {
    w.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => w.write_str("\\\"")?,
            '\\' => w.write_str("\\\\")?,
            c if (c as u32) < 0x20 => write!(w, "\\u{:04x}", c as u32)?,
            c => w.write_char(c)?,
        }
    }
    w.write_char('"')
}

#[cfg(test)]
mod tests;
