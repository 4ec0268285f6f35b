//! The `p4` NF: a P4 PNA program, as p4c's DPDK backend emits it (a DPDK SWX pipeline spec),
//! run on each packet by [`crate::p4`]'s executor over Cadence's own tables
//! ([`crate::p4::tables::TableSet`]: exact tables, the LPM, learners with add-on-miss and
//! expiry, selectors).
//!
//! - **Configuration** ([`P4Config`]): the spec's text and, per table or selector, its initial
//!   entries in DPDK's table-file syntax (`match … action … ARG VALUE …`). Both are checked
//!   whole when the chain is built: a spec the loader refuses names its line and construct, a
//!   table line its table, line and construct, and a table the structures cannot hold its
//!   table ([`P4ConfigError`]).
//! - **Per worker**: each NF instance builds its own [`TableSet`] from the files (as DPDK runs
//!   one pipeline per thread: a learner learns the flows its worker sees, which flow affinity
//!   makes the flow's only worker) and its own packet state. The registers (`regarray`) are
//!   one set for every worker ([`crate::p4::regs`]: a PNA pipeline has one instance of each
//!   register), read and written in place by the control plane (`p4 reg read|write`). Each
//!   instance registers weak views of its learners in [`P4Shared`], so the control plane reads
//!   every worker's learned flows in place (`p4 learner show`, [`P4Shared::learner_show`]).
//!   Nothing is allocated per packet.
//! - **Per packet**: `rx` reads the port the frame arrived on; the program's `tx PORT` sends the
//!   frame it emitted (its headers, then the payload from the parse cursor) to that port of
//!   the chain; the link header keeps the program's destination MAC, and the chain's egress
//!   writes the port's own MAC as the source, as it does for every frame it sends. A port the
//!   chain does not have drops the frame as `no_route`. `drop` drops it as `p4_drop`; a fault
//!   (an `extract` past the frame's end, a runaway loop, an output larger than a buffer, an
//!   instruction not run) as `p4_fault`, counted by kind. After the program the frame is
//!   parsed again for the NFs after it (a program may change header lengths: encapsulation);
//!   a frame that no longer parses is dropped as `nf_unsupported`.
//! - **Alone in a chain** the NF runs every frame the chain admits straight from the received
//!   batch (`Nf::run_vector`, `Nf::vector_any`): the same program, verdicts, counters and link
//!   header as the batch path, without a packet record or the egress pass (a proptest holds the
//!   two paths to the same output).
//! - **Time**: learner timeouts are in seconds; the NF gives the tables the batch's time in
//!   nanoseconds at the chain's clock rate.

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::{Dst, Nf, NfBatch, NfCtx, VectorTx, Verdict};
use crate::buf::{BUF_SIZE, PacketBuf, Pool};
use crate::drops::DropReason;
use crate::p4::exec::{Fault, State, Verdict as P4Verdict};
use crate::p4::regs::Registers;
use crate::p4::tables::{BuildError, LearnerViews, TableChange, TableSet};
use crate::p4::{Program, SpecError};
use crate::parse::{self, Depth};
use crate::time::{Duration, TickRate};

/// The `p4` NF's configuration: the spec and the initial entries of its tables.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct P4Config {
    /// The pipeline spec's text (the DPDK SWX language).
    pub spec: String,
    /// `(table or selector name, table-file text)`, in order; tables without one start empty.
    pub tables: Vec<(String, String)>,
}

/// A configuration the NF refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum P4ConfigError {
    /// No spec was given.
    NoSpec,
    /// The spec does not load (its line and construct).
    Spec(SpecError),
    /// A table file or a table the structures cannot hold.
    Tables(BuildError),
    /// A register array larger than `p4::regs::MAX_REGISTERS`, or whose memory cannot be
    /// allocated (what is wrong, naming the array).
    Registers(String),
}

impl fmt::Display for P4ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoSpec => f.write_str("p4 spec: none given"),
            Self::Spec(e) => write!(f, "p4 spec: {e}"),
            Self::Tables(e) => write!(f, "p4 tables: {e}"),
            Self::Registers(why) => write!(f, "p4 {why}"),
        }
    }
}

impl P4Config {
    /// Loads the spec and builds its tables once, to refuse a bad configuration before any
    /// worker starts.
    pub fn validate(&self) -> Result<(), P4ConfigError> {
        self.load().map(|_| ())
    }

    /// The loaded program, its tables checked, and its registers.
    /// The program, its registers, and its tables built from the files (the check that
    /// they load; the first instance takes them).
    fn load(&self) -> Result<(Program, Registers, TableSet), P4ConfigError> {
        if self.spec.trim().is_empty() {
            return Err(P4ConfigError::NoSpec);
        }
        let program = crate::p4::load(&self.spec).map_err(P4ConfigError::Spec)?;
        let tables = table_set(&program, &self.tables)?;
        let regs = Registers::try_new(&program).map_err(P4ConfigError::Registers)?;
        Ok((program, regs, tables))
    }
}

fn table_set(program: &Program, tables: &[(String, String)]) -> Result<TableSet, P4ConfigError> {
    let files: Vec<(&str, &str)> = tables.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    TableSet::build(program, &files).map_err(P4ConfigError::Tables)
}

/// What the workers share: the loaded program, the table files, the clock rate, the table
/// changes the control plane made since (each worker applies them to its own tables before its
/// next batch), and the program's registers (one set for every worker, read and written in
/// place by the control plane: [`P4Shared::reg_read`], [`P4Shared::reg_write`]).
#[derive(Debug)]
pub struct P4Shared {
    program: Program,
    regs: Arc<Registers>,
    tables: Vec<(String, String)>,
    rate: TickRate,
    changes: spin::Mutex<Vec<TableChange>>,
    /// `changes.len()`, read by the workers once per batch without the lock.
    generation: AtomicUsize,
    /// Each instance's learners, as the control plane reads them (`p4 learner show`): the
    /// instance's number (in the order the workers built their chains) and weak views of its
    /// tables. An instance dropped leaves a dead view, pruned at the next registration.
    learners: spin::Mutex<Vec<(usize, LearnerViews)>>,
    /// Instances made so far (the next one's number).
    instances: AtomicUsize,
    /// The tables built when the files were checked, for the first instance to take (a
    /// learner's table can be large: built once, not twice).
    spare: spin::Mutex<Option<TableSet>>,
}

impl P4Shared {
    /// Loads `cfg`'s spec and checks its tables; `rate` is the clock's (for learner timeouts).
    pub fn try_new(cfg: &P4Config, rate: TickRate) -> Result<Self, P4ConfigError> {
        let (program, regs, tables) = cfg.load()?;
        Ok(Self {
            program,
            regs: Arc::new(regs),
            tables: cfg.tables.clone(),
            rate,
            changes: spin::Mutex::new(Vec::new()),
            generation: AtomicUsize::new(0),
            learners: spin::Mutex::new(Vec::new()),
            instances: AtomicUsize::new(0),
            spare: spin::Mutex::new(Some(tables)),
        })
    }

    /// The entries each instance's learner `learner` holds now (the control plane's `p4
    /// learner show`), as lines `instance=N match KEY… action NAME ARG VALUE… timeout ID
    /// expires_in_ms MS` ([`crate::p4::tables::learner_lines`]), and how many instances
    /// were read. A learner learns the flows its worker sees (one pipeline per worker, as
    /// DPDK), so the same key may appear under several instances only if its flow moved.
    pub fn learner_show(&self, learner: &str, now: crate::time::Instant) -> Result<(Vec<String>, usize), String> {
        let now_ns = self.rate.ns(Duration(now.ticks()));
        let reg = self.learners.lock();
        let labels: Vec<(String, &LearnerViews)> =
            reg.iter().filter(|(_, v)| v.alive()).map(|(n, v)| (format!("instance={n}"), v)).collect();
        let lines = crate::p4::tables::learner_lines(
            &self.program,
            learner,
            labels.iter().map(|(l, v)| (l.as_str(), *v)),
            now_ns,
        )?;
        Ok((lines, labels.len()))
    }

    /// Numbers a new instance and registers its learners for [`P4Shared::learner_show`].
    fn register_instance(&self, tables: Option<&TableSet>) {
        let n = self.instances.fetch_add(1, Ordering::Relaxed);
        if let Some(t) = tables {
            let mut reg = self.learners.lock();
            reg.retain(|(_, v)| v.alive());
            reg.push((n, t.learner_views()));
        }
    }

    /// A live change of `table` (the control plane's `p4 add|del TABLE LINE`): `line` in the
    /// table-file syntax, checked against the program now; every worker applies it before its
    /// next batch (a worker that cannot — a full table, a delete of a key it does not hold —
    /// counts it in `p4_change_refused`). Returns the change's generation.
    pub fn change(&self, table: &str, line: &str, add: bool) -> Result<usize, String> {
        Ok(self.log(TableChange::parse(&self.program, table, line, add)?))
    }

    /// A live change of `table`'s default action (the control plane's `p4 default TABLE
    /// LINE`, `line` being `action NAME [ARG VALUE]…`), checked now, applied by every worker
    /// before its next batch as [`P4Shared::change`]'s are. Returns the change's generation.
    pub fn change_default(&self, table: &str, line: &str) -> Result<usize, String> {
        Ok(self.log(TableChange::parse_default(&self.program, table, line)?))
    }

    /// Appends a checked change to the log the workers catch up with; its generation.
    fn log(&self, c: TableChange) -> usize {
        let mut log = self.changes.lock();
        log.push(c);
        self.generation.store(log.len(), Ordering::Release);
        log.len()
    }

    /// The entries of `table` as the control plane sees them (its table file, then the
    /// changes made since), each a line of the table-file syntax
    /// ([`crate::p4::tables::table_lines`]).
    pub fn show(&self, table: &str) -> Result<Vec<String>, String> {
        let text = self.tables.iter().find(|(n, _)| n == table).map(|(_, t)| t.as_str());
        let log = self.changes.lock();
        crate::p4::tables::table_lines(&self.program, table, text, &log)
    }

    /// Register `index` of the program's array `array` (the control plane's `p4 reg read`):
    /// the value every worker's packets see now.
    pub fn reg_read(&self, array: &str, index: u64) -> Result<u64, String> {
        Ok(self.regs.read(self.register(array, index)?, index))
    }

    /// Sets register `index` of array `array` to `value` (`p4 reg write`): the next packet of
    /// any worker that reads it sees `value`.
    pub fn reg_write(&self, array: &str, index: u64, value: u64) -> Result<(), String> {
        self.regs.write(self.register(array, index)?, index, value);
        Ok(())
    }

    /// The id of the program's register array `name`, if `index` is below its declared size
    /// (so the data path's mask leaves `index` as it is).
    fn register(&self, name: &str, index: u64) -> Result<u16, String> {
        let (i, r) = (self.program.regarrays.iter().enumerate())
            .find(|(_, r)| r.name == name)
            .ok_or_else(|| format!("no regarray {name} in the program"))?;
        if index >= u64::from(r.size) {
            return Err(format!("regarray {name}: index {index} is not below its size {}", r.size));
        }
        Ok(i as u16)
    }

    /// Changes made so far.
    pub fn generation(&self) -> usize {
        self.generation.load(Ordering::Acquire)
    }

    /// The loaded program.
    pub fn program(&self) -> &Program {
        &self.program
    }
}

/// The `p4` NF's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct P4Counters {
    /// Packets the program sent (`tx`) to a port of the chain.
    pub tx: u64,
    /// Packets the program dropped (`drop`).
    pub dropped: u64,
    /// `tx` to a port the chain does not have (dropped as `no_route`).
    pub bad_port: u64,
    /// Faults: an `extract` or `lookahead` past the frame's end.
    pub truncated: u64,
    /// Faults: an output larger than a buffer, or more `emit`s than the program has.
    pub too_big: u64,
    /// Faults: more instructions than the step limit (a loop).
    pub step_limit: u64,
    /// Faults: an instruction the executor does not run, or a list that ended without `tx`,
    /// `drop` or `return`.
    pub unsupported: u64,
    /// Frames the program sent that no longer parse, where a later NF or the router reads the
    /// parse (dropped as `nf_unsupported`; the chain's last NF without a router sends them).
    pub unparsable: u64,
    /// Learner adds refused (the learner was full).
    pub learn_refused: u64,
    /// Packets dropped because this worker's tables could not be built.
    pub no_tables: u64,
    /// Live table changes applied to this worker's tables.
    pub changes: u64,
    /// Live table changes this worker's tables refused (full, or a delete of a missing key).
    pub change_refused: u64,
}

/// The `p4` NF on one worker.
pub struct P4 {
    shared: Arc<P4Shared>,
    /// `None` only if building the tables failed for a worker after it succeeded once at
    /// configuration (memory): every packet is then dropped as `p4_fault` (`p4_no_tables`).
    tables: Option<TableSet>,
    exec: Exec,
    counters: P4Counters,
    /// Changes of `shared` applied to `tables`.
    applied: usize,
    /// Whether anything after this NF reads the parse result ([`Nf::set_parsed_read_after`]):
    /// if not, the program's output is sent as it is, without a parse of it.
    parsed_read_after: bool,
}

impl fmt::Debug for P4 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("P4").field("counters", &self.counters).finish_non_exhaustive()
    }
}

impl P4 {
    /// An instance with its own tables, built from the shared files (checked when `shared`
    /// was made; the first instance takes the tables that check built). The control plane's
    /// changes since are applied before its first batch, as any instance's are.
    pub fn new(shared: Arc<P4Shared>) -> Self {
        let spare = shared.spare.lock().take();
        let tables = spare.or_else(|| table_set(&shared.program, &shared.tables).ok());
        shared.register_instance(tables.as_ref());
        let state = State::sharing(&shared.program, shared.regs.clone());
        Self {
            shared,
            tables,
            exec: Exec { state, out: vec![0; BUF_SIZE] },
            counters: P4Counters::default(),
            applied: 0,
            parsed_read_after: true,
        }
    }

    /// Applies the control plane's changes this worker has not (between batches: the LPM and
    /// the lists allocate).
    fn catch_up(&mut self) {
        let log = self.shared.changes.lock();
        for c in log.get(self.applied..).unwrap_or(&[]) {
            let done = self.tables.as_mut().map(|t| t.apply(c));
            match done {
                Some(Ok(())) => self.counters.changes += 1,
                _ => self.counters.change_refused += 1,
            }
        }
        self.applied = log.len();
    }

    /// This instance's counters.
    pub fn counters(&self) -> P4Counters {
        P4Counters { learn_refused: self.tables.as_ref().map_or(0, |t| t.learn_refused), ..self.counters }
    }
}

/// A worker's executor: the program's packet state and the buffer an output too long for the
/// frame is built in.
struct Exec {
    state: State<false>,
    out: Vec<u8>,
}

impl Exec {
    /// Runs the program on frame `b` (arrived on port `ingress`): the port it leaves by and its
    /// link destination (the MAC the program left in the frame), or why it is dropped, counted in
    /// `counters`. The output replaces the frame when it did not fit over the headers parsed.
    #[inline(always)]
    fn run(
        &mut self,
        program: &Program,
        tables: &mut TableSet,
        counters: &mut P4Counters,
        pool: &mut Pool<'_>,
        b: PacketBuf,
        ingress: u8,
    ) -> Result<(u8, Dst), DropReason> {
        let Exec { state, out } = self;
        let (v, in_place) = state.run_in_place(program, tables, pool.frame_mut(b), u64::from(ingress), out);
        let (port, len) = match v {
            P4Verdict::Tx { port, len } => (port, len),
            P4Verdict::Drop => {
                counters.dropped += 1;
                return Err(DropReason::P4Drop);
            }
            P4Verdict::Fault(f) => {
                count_fault(counters, f);
                return Err(DropReason::P4Fault);
            }
        };
        let Ok(port) = u8::try_from(port) else {
            counters.bad_port += 1;
            return Err(DropReason::NoRoute);
        };
        // Headers as long as those parsed were written over them in the frame; otherwise the
        // packet is in `out` and replaces the frame.
        if !in_place {
            let Some(out) = out.get(..len) else {
                counters.too_big += 1;
                return Err(DropReason::P4Fault);
            };
            if pool.set_len(b, len).is_err() {
                counters.too_big += 1;
                return Err(DropReason::P4Fault);
            }
            let frame = pool.frame_mut(b);
            if frame.len() != len {
                counters.too_big += 1;
                return Err(DropReason::P4Fault);
            }
            frame.copy_from_slice(out);
        }
        let dst = match pool.frame(b).first_chunk::<6>() {
            Some(&mac) => Dst::Mac(mac),
            None => Dst::Peer,
        };
        Ok((port, dst))
    }
}

fn count_fault(c: &mut P4Counters, f: Fault) {
    match f {
        Fault::Truncated => c.truncated += 1,
        Fault::OutputTooSmall | Fault::EmitLimit => c.too_big += 1,
        Fault::StepLimit => c.step_limit += 1,
        Fault::Unsupported(_) | Fault::FellOff => c.unsupported += 1,
    }
}

impl Nf for P4 {
    fn name(&self) -> &'static str {
        "p4"
    }

    /// The program parses the frame itself; the chain only needs the link header.
    fn reads(&self) -> Depth {
        Depth::L2
    }

    /// Alone in a chain, the NF takes every frame the chain admits straight from the received
    /// batch ([`Nf::run_vector`]): the program reads the frame itself, so no packet record is
    /// built or read back.
    fn vector_v4(&self) -> bool {
        true
    }

    fn vector_any(&self) -> bool {
        true
    }

    /// Not without tables (every frame is then dropped as the batch path counts it).
    fn vector_ready(&mut self) -> bool {
        self.tables.is_some()
    }

    /// [`Nf::process`] and the chain's egress without a packet record: each frame the chain
    /// admits ([`VectorTx::admits`]) run through the program, then sent to the port it chose
    /// with the program's destination MAC and the port's own MAC as source, or dropped, counted
    /// as the batch path counts it.
    fn run_vector(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, input: &[PacketBuf], tx: &mut VectorTx<'_>) -> usize {
        if self.shared.generation() != self.applied {
            self.catch_up();
        }
        let Some(tables) = self.tables.as_mut() else { return 0 };
        tables.set_time_ns(self.shared.rate.ns(Duration(ctx.now.ticks())));
        let ingress = tx.ingress();
        let mut took = 0;
        for &b in input {
            if !tx.admits(pool.frame(b)) {
                break;
            }
            took += 1;
            let run = self.exec.run(&self.shared.program, tables, &mut self.counters, pool, b, ingress);
            match run {
                Ok((port, dst)) => {
                    self.counters.tx += 1;
                    match tx.link_header(port, dst.mac()) {
                        Some(head) => {
                            if let Some(m) = pool.frame_mut(b).first_chunk_mut::<12>() {
                                *m = head;
                            }
                            tx.push(pool, b, port);
                        }
                        None => tx.drop(pool, b, DropReason::NoRoute),
                    }
                }
                Err(reason) => tx.drop(pool, b, reason),
            }
        }
        took
    }

    fn process(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        if self.shared.generation() != self.applied {
            self.catch_up();
        }
        let Some(tables) = self.tables.as_mut() else {
            for p in batch.alive_mut() {
                self.counters.no_tables += 1;
                p.verdict = Verdict::Drop(DropReason::P4Fault);
            }
            return;
        };
        tables.set_time_ns(self.shared.rate.ns(Duration(ctx.now.ticks())));
        for p in batch.alive_mut() {
            let run = self.exec.run(&self.shared.program, tables, &mut self.counters, pool, p.buf, p.ingress);
            let (port, dst) = match run {
                Ok(x) => x,
                Err(reason) => {
                    p.verdict = Verdict::Drop(reason);
                    continue;
                }
            };
            // A later reader needs the headers as they now are; with none (the chain's last
            // NF, no router), the packet is what the program emitted, as P4 has it.
            if self.parsed_read_after {
                let Ok(parsed) = parse::parse(pool.frame(p.buf)) else {
                    self.counters.unparsable += 1;
                    p.verdict = Verdict::Drop(DropReason::NfUnsupported);
                    continue;
                };
                p.parsed = parsed;
            }
            p.dst = dst;
            self.counters.tx += 1;
            p.verdict = Verdict::Forward(port);
        }
    }

    fn set_parsed_read_after(&mut self, read: bool) {
        self.parsed_read_after = read;
    }

    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = self.counters();
        write!(
            w,
            " p4_tx={} p4_dropped={} p4_bad_port={} p4_truncated={} p4_too_big={} p4_step_limit={} \
             p4_unsupported={} p4_unparsable={} p4_learn_refused={} p4_no_tables={} p4_changes={} \
             p4_change_refused={}",
            c.tx,
            c.dropped,
            c.bad_port,
            c.truncated,
            c.too_big,
            c.step_limit,
            c.unsupported,
            c.unparsable,
            c.learn_refused,
            c.no_tables,
            c.changes,
            c.change_refused
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
