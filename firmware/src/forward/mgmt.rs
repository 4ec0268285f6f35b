//! The management channel of a forwarding run (docs/PROTOCOL.md, "Management channel"):
//! request lines from the machine's management input ([`Machine::read_mgmt`]: COM1's
//! receiver in the image, stdin in the hosted build), answered with `@ctl` lines on the
//! console.
//!
//! Worker 0 polls it between its rounds every [`POLL_MS`], reading at most [`POLL_BYTES`]
//! and carrying out at most [`LINES_PER_POLL`] requests per poll, so a flood of input costs
//! the boot core a bounded share of its time and never touches the other workers. NF table
//! changes go through [`cadence_core::manage::Manager`] (published to the workers between
//! their batches); `stats`, `show rss`, `rss …` and `stop` are answered here.

use alloc::string::String;
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::Ordering;

use cadence_core::manage::{self, Command, Done, Error, ErrorKind, Input, LineBuf, Manager, Table};
use cadence_core::offload::NetBlazeStage;
use cadence_core::time::{Clock, Duration, Instant, TickRate};
use cadence_core::worker::Worker;

use super::{FwdPort, Machine, Shared, report, rss, say};

/// How often worker 0 looks at the management input.
pub const POLL_MS: u64 = 2;
/// Most bytes read per poll (a 16550's receive FIFO holds 16).
pub const POLL_BYTES: usize = 64;
/// Most requests carried out per poll.
pub const LINES_PER_POLL: usize = 4;

/// Worker 0's end of the channel.
#[derive(Debug)]
pub struct Channel {
    lines: LineBuf,
    manager: Manager,
    period: Duration,
    next: Instant,
    /// Bytes read but not yet fed (a poll stops after [`LINES_PER_POLL`] requests).
    pending: heapless::Vec<u8, POLL_BYTES>,
}

impl Channel {
    /// A channel polled every [`POLL_MS`] from `start`.
    pub fn new(rate: TickRate, start: Instant) -> Self {
        let period = rate.ticks_from_ms(POLL_MS);
        Self {
            lines: LineBuf::new(),
            manager: Manager::new(),
            period,
            next: start.saturating_add(period),
            pending: heapless::Vec::new(),
        }
    }

    /// Reads and carries out what arrived, if a poll is due.
    pub(super) fn poll<M: Machine, P: FwdPort>(
        &mut self,
        sh: &Shared<M, P>,
        pl: &mut Worker<NetBlazeStage>,
        ports: &mut [P],
        start: Instant,
        now: Instant,
    ) {
        if now < self.next {
            return;
        }
        self.next = now.saturating_add(self.period);
        self.manager.background(sh.chains.factory());
        if self.pending.is_empty() {
            let mut buf = [0u8; POLL_BYTES];
            let n = sh.machine.read_mgmt(&mut buf).min(POLL_BYTES);
            let _ = self.pending.extend_from_slice(buf.get(..n).unwrap_or(&[]));
        }
        let mut used = 0;
        let mut done = 0;
        while used < self.pending.len() && done < LINES_PER_POLL {
            let b = self.pending[used];
            used += 1;
            let line: Option<Result<String, (Option<u32>, Error)>> = match self.lines.push(b) {
                None => None,
                Some(Input::Line(t)) => Some(Ok(t.into())),
                Some(Input::TooLong(t)) => Some(Err((
                    manage::request_id(t),
                    Error::new(ErrorKind::LineTooLong, format_args!("longer than {} bytes", manage::MAX_LINE)),
                ))),
                Some(Input::NotText) => {
                    Some(Err((None, Error::new(ErrorKind::BadRequest, format_args!("not UTF-8 text")))))
                }
            };
            match line {
                None => {}
                Some(Ok(text)) => {
                    done += 1;
                    self.request(sh, pl, ports, start, &text);
                }
                Some(Err((id, e))) => {
                    done += 1;
                    reply_error(sh, id, &e);
                }
            }
        }
        let rest: heapless::Vec<u8, POLL_BYTES> = self.pending.get(used..).unwrap_or(&[]).iter().copied().collect();
        self.pending = rest;
    }

    fn request<M: Machine, P: FwdPort>(
        &mut self,
        sh: &Shared<M, P>,
        pl: &mut Worker<NetBlazeStage>,
        ports: &mut [P],
        start: Instant,
        text: &str,
    ) {
        let req = match manage::parse(text) {
            Ok(r) => r,
            Err((id, e)) => return reply_error(sh, id, &e),
        };
        let id = req.id;
        let now = sh.clock.now();
        let data = |args: fmt::Arguments<'_>| say(sh.machine, format_args!("@ctl id={id} | {args}"));
        let result = match &req.cmd {
            Command::Stats => {
                let mut body = String::new();
                report::body(sh, start, now, &mut body);
                let mut json = String::new();
                let _ = manage::write_json(&body, &mut json);
                data(format_args!("{json}"));
                Ok(Done::Ok(manage::Msg::new()))
            }
            Command::Show(Table::Rss) => show_rss(&*ports, data),
            Command::RssMove(from, to) => rss::move_buckets(sh, pl, ports, *from, *to)
                .map(|m| ok(format_args!("buckets={} drained={} empty={}", m.buckets, m.drained, u8::from(m.empty))))
                .map_err(rss_error),
            Command::RssRestore => rss::restore(sh, pl, ports)
                .map(|m| ok(format_args!("from={} to={} drained={}", m.from, m.to, m.drained)))
                .map_err(rss_error),
            Command::Stop => {
                sh.stop.store(true, Ordering::Release);
                Ok(Done::Ok(manage::Msg::new()))
            }
            cmd => {
                let mut out = data;
                self.manager.execute(sh.chains.factory(), cmd, now, &mut out)
            }
        };
        match result {
            Ok(Done::Ok(m)) if m.is_empty() => say(sh.machine, format_args!("@ctl id={id} ok")),
            Ok(Done::Ok(m)) => say(sh.machine, format_args!("@ctl id={id} ok {m}")),
            // `execute` hands back only the commands matched above.
            Ok(Done::NotMine) => reply_error(
                sh,
                Some(id),
                &Error::new(ErrorKind::Unsupported, format_args!("not available on this machine")),
            ),
            Err(e) => reply_error(sh, Some(id), &e),
        }
    }
}

fn ok(args: fmt::Arguments<'_>) -> Done {
    let mut m = manage::Msg::new();
    let _ = m.write_fmt(args);
    Done::Ok(m)
}

fn rss_error(reason: &'static str) -> Error {
    let kind = match reason {
        "bad_queue" => ErrorKind::BadArgument,
        "no_rss" => ErrorKind::Unsupported,
        "nothing_to_restore" => ErrorKind::NotFound,
        "lanes_busy" => ErrorKind::Busy,
        _ => ErrorKind::Unsupported,
    };
    Error::new(kind, format_args!("rss: {reason}"))
}

fn reply_error<M: Machine, P: FwdPort>(sh: &Shared<M, P>, id: Option<u32>, e: &Error) {
    match id {
        Some(id) => say(sh.machine, format_args!("@ctl id={id} {e}")),
        None => say(sh.machine, format_args!("@ctl id=- {e}")),
    }
}

/// `show rss`: per port, how many indirection entries point at each queue.
fn show_rss<P: FwdPort>(ports: &[P], mut data: impl FnMut(fmt::Arguments<'_>)) -> Result<Done, Error> {
    let mut any = false;
    for (i, p) in ports.iter().enumerate() {
        let Some(table) = p.rss_table() else {
            data(format_args!("port={i} rss=none"));
            continue;
        };
        any = true;
        let queues = table.iter().map(|&q| usize::from(q) + 1).max().unwrap_or(0);
        let mut counts: Vec<usize> = alloc::vec![0; queues];
        for &q in &table {
            if let Some(c) = counts.get_mut(usize::from(q)) {
                *c += 1;
            }
        }
        let mut line = String::new();
        for (q, n) in counts.iter().enumerate() {
            let _ = write!(line, " q{q}={n}");
        }
        data(format_args!("port={i} entries={}{line}", table.len()));
    }
    if any { Ok(ok(format_args!(""))) } else { Err(rss_error("no_rss")) }
}
