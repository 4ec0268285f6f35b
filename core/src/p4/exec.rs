//! The start of the executor (issue 28 item 2): one packet through a loaded [`Program`] —
//! headers extracted and emitted with their validity bits, metadata in host order, the data
//! movement, ALU, checksum, register and jump instructions, actions with their argument data.
//!
//! Lookups go through the [`Tables`] trait ([`super::tables::TableSet`] maps it onto `pna`'s tables);
//! [`State::run`] uses [`NoEntries`]: applying a table or a learner is a miss that runs its
//! default action with its default arguments, which is exactly what DPDK does for an empty
//! table; `learn`, `rearm` and `forget` go to the trait too ([`NoEntries`] refuses them). A
//! selector ends the packet with [`Fault::Unsupported`], never with something else.
//!
//! Semantics follow DPDK 22.11 (`rte_swx_pipeline_internal.h`): numbers move between fields
//! of at most 64 bits by value (network order in headers, host order in metadata and
//! arguments), truncated to the destination's width; wider fields copy whole; `ckadd`/`cksub`
//! compute on the header's bytes as DPDK does on a little-endian host; a register index is
//! masked to the array's size rounded up to a power of two; metadata is not cleared between
//! packets (as DPDK); an `extract` beyond the frame ends the packet with [`Fault::Truncated`]
//! (DPDK does not check). No allocation per packet: [`State`] is built once per program.

use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use super::program::*;
use super::regs::Registers;

/// Jumps taken for one packet before it is given up: only a jump can loop (a list without
/// one runs through once, and a table runs its action once), so counting jumps bounds the work.
pub const STEP_LIMIT: u32 = 1 << 16;

/// Why a packet ended without `tx` or `drop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Fault {
    /// An `extract` or `lookahead` past the end of the frame.
    Truncated,
    /// The output buffer is smaller than the packet to send.
    OutputTooSmall,
    /// More than [`STEP_LIMIT`] jumps taken.
    StepLimit,
    /// An instruction this step of the executor does not run yet.
    Unsupported(&'static str),
    /// An instruction list ended without `tx`, `drop` or `return`.
    FellOff,
    /// More `emit`s than the program has `emit` instructions (a loop emitting): the output
    /// header list is sized at load, so that no packet allocates.
    EmitLimit,
}

/// What became of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Verdict {
    /// Send `len` bytes of the output buffer to `port`.
    Tx {
        port: u64,
        len: usize,
    },
    Drop,
    Fault(Fault),
}

/// A table hit: the entry's action, its argument data (as [`Program::encode_arg`] lays it
/// out) and its index (what `entryid` reads).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit<'a> {
    pub action: ActionId,
    pub args: &'a [u8],
    pub entry: u32,
}

/// The table operations the executor asks for: the next step of issue 28 maps them onto
/// `pna`'s tables (exact, LPM, ternary; a learner is the exact table with add-on-miss, its
/// timeout list the expire profiles). `key` is always the table's key fields back to back in
/// key order, each big-endian over its width (as [`super::entry::KeyValue`]); for `learn`,
/// `rearm` and `forget` it is the key of the learner lookup whose action is running.
pub trait Tables {
    /// Looks `key` up in `table` (a [`TableRef::Table`] or [`TableRef::Learner`]); a miss
    /// runs the table's default action.
    fn lookup(&mut self, table: TableRef, key: &[u8]) -> Option<Hit<'_>>;

    /// The default action the control plane set for `table` live, if it did (a miss runs it
    /// instead of the spec's). The default: none.
    fn default_action(&self, table: TableRef) -> Option<(ActionId, &[u8])> {
        let _ = table;
        None
    }

    /// `learn`: adds `key` to `learner` with `action`, its argument data `args` and expiry
    /// profile `timeout_id`; `Ok(false)` when the learner refuses it (full). PNA add-on-miss.
    fn learn(
        &mut self,
        learner: u16,
        key: &[u8],
        action: ActionId,
        args: &[u8],
        timeout_id: u64,
    ) -> Result<bool, Fault> {
        let _ = (learner, key, action, args, timeout_id);
        Err(Fault::Unsupported("learn"))
    }

    /// `rearm`: restarts the expiry of the entry just hit, with a new profile if given.
    fn rearm(&mut self, learner: u16, key: &[u8], timeout_id: Option<u64>) -> Result<(), Fault> {
        let _ = (learner, key, timeout_id);
        Err(Fault::Unsupported("rearm"))
    }

    /// `forget`: deletes the entry just hit.
    fn forget(&mut self, learner: u16, key: &[u8]) -> Result<(), Fault> {
        let _ = (learner, key);
        Err(Fault::Unsupported("forget"))
    }

    /// A selector's member for `group` and the selector fields' `hash`
    /// ([`super::hash::selector_hash`]). The default is a selector with no groups, whose group
    /// table DPDK fills with zeros: member 0.
    fn select(&mut self, selector: u16, group: u32, hash: u32) -> u32 {
        let _ = (selector, group, hash);
        0
    }
}

/// Tables without entries: every lookup misses (what DPDK does before any entry is added);
/// `learn`, `rearm` and `forget` are [`Fault::Unsupported`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEntries;

impl Tables for NoEntries {
    fn lookup(&mut self, _: TableRef, _: &[u8]) -> Option<Hit<'_>> {
        None
    }
}

/// Bytes of zeros after the header storage, the metadata and the action data, so that a
/// field of up to 8 bytes is one 8-byte access.
const PAD: usize = 8;

/// The `n` low bytes of a word set (`n` in 1..=8).
#[inline]
fn low_mask(n: usize) -> u64 {
    u64::MAX >> (64 - 8 * n.clamp(1, 8))
}

/// The per-packet storage of a program (header storage, validity, metadata) and its
/// registers; built once, reused for every packet. `DIAG`: whether the two read flags
/// ([`State::read_invalid`], [`State::read_unwritten`]) are kept — the differential check's;
/// the `p4` NF runs without them ([`State::without_diagnostics`]), and a type parameter rather
/// than a flag takes their tests out of its code.
#[derive(Debug, Clone)]
pub struct State<const DIAG: bool = true> {
    hdr: Vec<u8>,
    valid: Vec<bool>,
    meta: Vec<u8>,
    /// The program's registers: this state's own ([`State::new`]) or shared with the other
    /// workers' ([`State::sharing`]); a clone shares them.
    regs: Arc<Registers>,
    /// Headers emitted so far, in order.
    emitted: Vec<HeaderId>,
    /// The parse cursor in the frame.
    cursor: usize,
    /// The key being looked up (capacity: the widest key of the program).
    key: Vec<u8>,
    /// The running action's argument data (capacity: the widest action's).
    argbuf: Vec<u8>,
    /// The last table's result: hit, the action it ran, the entry's index, and the learner
    /// if it was one.
    hit: bool,
    last_action: Option<ActionId>,
    entry: u32,
    learner: Option<u16>,
    /// Whether this packet read a field of a header that was not valid (see
    /// [`State::read_invalid`]).
    invalid_read: core::cell::Cell<bool>,
    /// Per metadata byte: written since this packet's `rx` (see [`State::read_unwritten`]).
    written: Vec<bool>,
    /// Per metadata byte: no instruction of the program writes it (so it is always zero, in
    /// DPDK too): counted as written at `rx`.
    never_written: Vec<bool>,
    unwritten_read: core::cell::Cell<bool>,
}

/// Where an instruction list ended.
enum End {
    Tx(u64),
    Drop,
    Return,
    Fault(Fault),
}

/// Registers of `p` for one state alone ([`State::new`]).
fn own_registers(p: &Program) -> Arc<Registers> {
    Arc::new(Registers::try_new(p).unwrap_or_default())
}

impl State {
    /// Storage for `p`: zeroed headers and metadata, its own registers at their `initval`
    /// (each array's size rounded up to a power of two, as DPDK: 8 bytes a register; arrays
    /// that cannot be allocated are absent and read 0 — the `p4` NF refuses such a program
    /// when it is configured).
    pub fn new(p: &Program) -> Self {
        Self::storage(p, own_registers(p))
    }
}

impl State<false> {
    /// [`State::new`]'s storage without the bookkeeping behind [`State::read_invalid`] and
    /// [`State::read_unwritten`] (a note per field read, a mark per metadata byte written):
    /// both then stay false. What a packet does is unchanged; the `p4` NF runs this way.
    pub fn without_diagnostics(p: &Program) -> Self {
        Self::storage(p, own_registers(p))
    }

    /// [`State::without_diagnostics`] over `regs` (made for `p`, shared with the other
    /// workers: the `p4` NF's).
    pub fn sharing(p: &Program, regs: Arc<Registers>) -> Self {
        Self::storage(p, regs)
    }
}

impl<const DIAG: bool> State<DIAG> {
    /// The storage of [`State::new`], with or without the diagnostics.
    fn storage(p: &Program, regs: Arc<Registers>) -> Self {
        State {
            // Padded by a word so that a field of up to 8 bytes is read and written as one.
            hdr: vec![0; p.header_bytes as usize + PAD],
            valid: vec![false; p.headers.len()],
            meta: vec![0; p.meta_bytes as usize + PAD],
            regs,
            emitted: Vec::with_capacity(
                p.apply
                    .iter()
                    .chain(p.actions.iter().flat_map(|a| &a.instrs))
                    .filter(|i| matches!(i, Instr::Emit { .. }))
                    .count(),
            ),
            key: Vec::with_capacity(
                p.tables
                    .iter()
                    .map(|t| t.keys.iter().map(|k| k.field.bits / 8).sum::<u32>())
                    .chain(p.learners.iter().map(|l| l.keys.iter().map(|k| k.bits / 8).sum::<u32>()))
                    .max()
                    .unwrap_or(0) as usize
                    // room for the last field's whole word (`build_key`)
                    + PAD,
            ),
            cursor: 0,
            argbuf: Vec::with_capacity(p.actions.iter().map(|a| a.arg_bytes).max().unwrap_or(0) as usize + PAD),
            hit: false,
            last_action: None,
            entry: 0,
            learner: None,
            invalid_read: core::cell::Cell::new(false),
            written: vec![false; p.meta_bytes as usize],
            never_written: {
                let mut never = vec![true; p.meta_bytes as usize];
                for i in p.apply.iter().chain(p.actions.iter().flat_map(|a| &a.instrs)) {
                    let dst = match *i {
                        Instr::Rx { port } => port,
                        Instr::Mov { dst, .. }
                        | Instr::Alu { dst, .. }
                        | Instr::Ckadd { dst, .. }
                        | Instr::Cksub { dst, .. }
                        | Instr::Entryid { dst }
                        | Instr::Hash { dst, .. }
                        | Instr::RegRd { dst, .. } => dst,
                        _ => continue,
                    };
                    if matches!(dst.space, Space::Meta) {
                        let (o, n) = (dst.offset as usize, (dst.bits / 8) as usize);
                        if let Some(w) = never.get_mut(o..o + n) {
                            w.fill(false);
                        }
                    }
                }
                never
            },
            unwritten_read: core::cell::Cell::new(false),
        }
    }

    /// Whether the last packet read a field of a header instance that was not valid. DPDK
    /// 22.11 reads such a field through the header's pointer, which `extract` left pointing into
    /// an earlier packet's buffer (`rx` does not reset it): the value it reads is undefined, so
    /// such a packet is not comparable. Cadence reads its own header storage.
    pub fn read_invalid(&self) -> bool {
        self.invalid_read.get()
    }

    /// Whether the last packet read a metadata byte it had not written since its `rx` (and
    /// that some instruction of the program does write: the others are always zero): DPDK
    /// 22.11 keeps up to 16 packet contexts (threads) and clears none between packets, so such
    /// a byte holds what some earlier packet left (`--fresh` finds most such frames, but not
    /// one whose stale value happens to equal zero). Not comparable.
    pub fn read_unwritten(&self) -> bool {
        self.unwritten_read.get()
    }

    fn check_meta(&self, o: usize, n: usize) {
        if DIAG && self.written.get(o..o + n).is_none_or(|w| w.iter().any(|&x| !x)) {
            self.unwritten_read.set(true);
        }
    }

    fn mark_meta(&mut self, f: Field) {
        if DIAG && matches!(f.space, Space::Meta) {
            let (o, n) = (f.offset as usize, (f.bits / 8) as usize);
            if let Some(w) = self.written.get_mut(o..o + n) {
                w.fill(true);
            }
        }
    }

    fn note(&self, space: Space) {
        if DIAG
            && let Space::Header(h) = space
            && !self.valid(h)
        {
            self.invalid_read.set(true);
        }
    }

    /// The metadata bytes (host order), for tests and the control plane.
    pub fn meta(&self) -> &[u8] {
        self.meta.get(..self.meta.len() - PAD).unwrap_or(&[])
    }

    /// Whether header `h` is valid.
    pub fn valid(&self, h: HeaderId) -> bool {
        self.valid.get(usize::from(h)).copied().unwrap_or(false)
    }

    /// Register `i` of array `a`.
    pub fn reg(&self, a: u16, i: usize) -> Option<u64> {
        self.regs.get(a, i as u64)
    }

    /// Notes a read of `f` for the diagnostics (a field of an invalid header, unwritten
    /// metadata).
    fn note_read(&self, f: Field) {
        self.note(f.space);
        if matches!(f.space, Space::Meta) {
            self.check_meta(f.offset as usize, (f.bits / 8) as usize);
        }
    }

    fn bytes<'s>(&'s self, f: Field, args: &'s [u8]) -> &'s [u8] {
        self.note_read(f);
        let buf = match f.space {
            Space::Header(_) => &self.hdr[..],
            Space::Meta => &self.meta[..],
            Space::Arg => args,
        };
        let (o, n) = (f.offset as usize, (f.bits / 8) as usize);
        buf.get(o..o + n).unwrap_or(&[])
    }

    fn bytes_mut(&mut self, f: Field) -> &mut [u8] {
        self.mark_meta(f);
        let buf = match f.space {
            Space::Header(_) => &mut self.hdr[..],
            // Never a destination (the loader refuses `t.` there); metadata keeps it total.
            Space::Meta | Space::Arg => &mut self.meta[..],
        };
        let (o, n) = (f.offset as usize, (f.bits / 8) as usize);
        buf.get_mut(o..o + n).unwrap_or(&mut [])
    }

    /// A field of at most 64 bits as a number (of a wider one, its first 8 bytes): header
    /// fields are in network order, metadata and action data in host order (little-endian).
    /// One 8-byte read where the storage has a word from the field's start on (the header
    /// and metadata storage are padded for it), else byte by byte.
    #[inline(always)]
    fn load(&self, f: Field, args: &[u8]) -> u64 {
        let header = matches!(f.space, Space::Header(_));
        let n = ((f.bits / 8) as usize).min(8);
        if let Some(w) = self.word(f, args) {
            if DIAG {
                self.note_read(f);
            }
            return if n == 0 {
                0
            } else if header {
                u64::from_be_bytes(w) >> (64 - 8 * n)
            } else {
                u64::from_le_bytes(w) & low_mask(n)
            };
        }
        let b = self.bytes(f, args);
        let b = b.get(..8).unwrap_or(b);
        if header {
            b.iter().fold(0, |v, &x| (v << 8) | u64::from(x))
        } else {
            b.iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x))
        }
    }

    /// The 8 bytes of storage from `f`'s start, where there are 8.
    #[inline(always)]
    fn word(&self, f: Field, args: &[u8]) -> Option<[u8; 8]> {
        let buf = match f.space {
            Space::Header(_) => &self.hdr[..],
            Space::Meta => &self.meta[..],
            Space::Arg => args,
        };
        buf.get(f.offset as usize..).and_then(|b| b.first_chunk::<8>()).copied()
    }

    fn operand(&self, o: Operand, args: &[u8]) -> u64 {
        match o {
            Operand::Field(f) => self.load(f, args),
            Operand::Imm(v) => v,
        }
    }

    /// Stores `v` into a field, truncated to its width (a field wider than 64 bits gets `v`
    /// in its last 8 bytes in network order, or its first 8 in host order, zeros elsewhere).
    /// A field of at most 8 bytes is merged into the word at its start (the storage is
    /// padded for it).
    #[inline(always)]
    fn store(&mut self, f: Field, v: u64) {
        let header = matches!(f.space, Space::Header(_));
        self.mark_meta(f);
        let n = (f.bits / 8) as usize;
        let buf = match f.space {
            Space::Header(_) => &mut self.hdr[..],
            // Never a destination (the loader refuses `t.` there); metadata keeps it total.
            Space::Meta | Space::Arg => &mut self.meta[..],
        };
        let o = f.offset as usize;
        if (1..=8).contains(&n)
            && let Some(w) = buf.get_mut(o..).and_then(|b| b.first_chunk_mut::<8>())
        {
            let m = low_mask(n);
            *w = if header {
                let sh = 64 - 8 * n;
                ((u64::from_be_bytes(*w) & !(m << sh)) | ((v & m) << sh)).to_be_bytes()
            } else {
                ((u64::from_le_bytes(*w) & !m) | (v & m)).to_le_bytes()
            };
            return;
        }
        let b = buf.get_mut(o..o + n).unwrap_or(&mut []);
        for (i, x) in b.iter_mut().enumerate() {
            let shift = if header { 8 * (n - 1 - i) } else { 8 * i };
            *x = v.checked_shr(shift as u32).unwrap_or(0) as u8;
        }
    }

    /// Copies a field wider than 64 bits whole (the loader checked equal widths).
    fn copy(&mut self, dst: Field, src: Field, args: &[u8]) {
        let n = (src.bits.min(dst.bits) / 8) as usize;
        let (so, d) = (src.offset as usize, dst.offset as usize);
        let header = |f: Field| matches!(f.space, Space::Header(_));
        self.note(src.space);
        if matches!(src.space, Space::Meta) {
            self.check_meta(so, n);
        }
        self.mark_meta(dst);
        let State { hdr, meta, .. } = self;
        let (from, to): (&[u8], &mut [u8]) = match (src.space, header(dst)) {
            (Space::Header(_), true) => {
                if so + n <= hdr.len() && d + n <= hdr.len() {
                    hdr.copy_within(so..so + n, d);
                }
                return;
            }
            (Space::Meta, false) => {
                if so + n <= meta.len() && d + n <= meta.len() {
                    meta.copy_within(so..so + n, d);
                }
                return;
            }
            (Space::Header(_), false) => (hdr, meta),
            (Space::Meta, true) => (meta, hdr),
            (Space::Arg, true) => (args, hdr),
            (Space::Arg, false) => (args, meta),
        };
        if let (Some(f), Some(t)) = (from.get(so..so + n), to.get_mut(d..d + n)) {
            t.copy_from_slice(f);
        }
    }

    /// The bytes of `f` read as DPDK reads them on a little-endian host (raw, masked).
    #[inline(always)]
    fn raw(&self, f: Field) -> u64 {
        let n = ((f.bits / 8) as usize).min(8);
        if let Some(w) = self.word(f, &[]) {
            if DIAG {
                self.note_read(f);
            }
            return if n == 0 { 0 } else { u64::from_le_bytes(w) & low_mask(n) };
        }
        let b = self.bytes(f, &[]);
        b.get(..8).unwrap_or(b).iter().rev().fold(0, |v, &x| (v << 8) | u64::from(x))
    }

    fn fold(mut r: u64) -> u64 {
        for _ in 0..4 {
            r = (r & 0xFFFF) + (r >> 16);
        }
        let r = !r & 0xFFFF;
        if r == 0 { 0xFFFF } else { r }
    }

    fn ck(&mut self, dst: Field, add: Option<u64>, sub: Option<u64>, header: Option<HeaderId>, p: &Program) {
        let r0 = !self.raw(dst) & 0xFFFF;
        let r = if let Some(s) = add {
            r0 + (s >> 32) + (s & 0xFFFF_FFFF)
        } else if let Some(s) = sub {
            (r0 + 0xF_FFF0_0000) - ((s >> 32) + (s & 0xFFFF_FFFF))
        } else if let Some(h) = header.and_then(|h| p.headers.get(usize::from(h))) {
            let bytes = self.hdr.get(h.offset as usize..(h.offset + h.bytes) as usize).unwrap_or(&[]);
            bytes.chunks_exact(4).fold(r0, |acc, w| acc + u64::from(u32::from_le_bytes(w.try_into().unwrap_or([0; 4]))))
        } else {
            r0
        };
        let out = Self::fold(r) as u16;
        let b = self.bytes_mut(dst);
        for (d, s) in b.iter_mut().zip(out.to_le_bytes()) {
            *d = s;
        }
    }

    /// Runs one packet: `frame` received on `port_in`; the packet to send is written to
    /// `out` (the emitted headers, then the frame from the parse cursor on).
    pub fn run(&mut self, p: &Program, frame: &[u8], port_in: u64, out: &mut [u8]) -> Verdict {
        self.run_with(p, &mut NoEntries, frame, port_in, out)
    }

    /// As [`State::run`], with `tables` answering the lookups.
    pub fn run_with(
        &mut self,
        p: &Program,
        tables: &mut dyn Tables,
        frame: &[u8],
        port_in: u64,
        out: &mut [u8],
    ) -> Verdict {
        match self.apply(p, tables, frame, port_in) {
            Ok(port) => self.deparse(p, frame, port, out),
            Err(v) => v,
        }
    }

    /// Runs `apply` on one packet: the port of its `tx`, or the verdict it ended with.
    fn apply(&mut self, p: &Program, tables: &mut dyn Tables, frame: &[u8], port_in: u64) -> Result<u64, Verdict> {
        let mut steps = 0u32;
        match self.list(p, &p.apply, &[], frame, port_in, &mut steps, Some(tables)) {
            End::Tx(port) => Ok(port),
            End::Drop => Err(Verdict::Drop),
            End::Return => Err(Verdict::Fault(Fault::FellOff)),
            End::Fault(f) => Err(Verdict::Fault(f)),
        }
    }

    /// As [`State::run_with`], writing the packet back into `frame` where it fits there: when
    /// the emitted headers are exactly as long as what the parser took (`extract`s), they are
    /// written over it and the rest of the frame stays where it is (returns `true`: the packet
    /// is `frame`, `len` its length); otherwise (a header added or removed) the packet is
    /// built in `out` as `run_with` does (`false`).
    pub fn run_in_place(
        &mut self,
        p: &Program,
        tables: &mut dyn Tables,
        frame: &mut [u8],
        port_in: u64,
        out: &mut [u8],
    ) -> (Verdict, bool) {
        let port = match self.apply(p, tables, frame, port_in) {
            Ok(port) => port,
            Err(v) => return (v, false),
        };
        let heads = || self.emitted.iter().filter_map(|&h| p.headers.get(usize::from(h)));
        if heads().map(|h| h.bytes as usize).sum::<usize>() != self.cursor || self.cursor > frame.len() {
            return (self.deparse(p, frame, port, out), false);
        }
        let mut at = 0usize;
        for h in heads() {
            let (o, n) = (h.offset as usize, h.bytes as usize);
            if let (Some(src), Some(dst)) = (self.hdr.get(o..o + n), frame.get_mut(at..at + n)) {
                dst.copy_from_slice(src);
            }
            at += n;
        }
        (Verdict::Tx { port, len: frame.len() }, true)
    }

    fn deparse(&self, p: &Program, frame: &[u8], port: u64, out: &mut [u8]) -> Verdict {
        let mut len = 0usize;
        let payload = frame.get(self.cursor..).unwrap_or(&[]);
        let pieces = self
            .emitted
            .iter()
            .filter_map(|&h| p.headers.get(usize::from(h)))
            .map(|h| self.hdr.get(h.offset as usize..(h.offset + h.bytes) as usize).unwrap_or(&[]))
            .chain(core::iter::once(payload));
        for piece in pieces {
            let Some(dst) = out.get_mut(len..len + piece.len()) else {
                return Verdict::Fault(Fault::OutputTooSmall);
            };
            dst.copy_from_slice(piece);
            len += piece.len();
        }
        Verdict::Tx { port, len }
    }

    /// A selector, as DPDK 22.11 runs one (`rte_swx_table_selector_select`): the group id is
    /// the 32-bit host-order word at the `group_id` field's offset; the selector fields' bytes,
    /// at their places in the span from the first field to the end of the last (bytes between
    /// fields masked to zero), zero-padded to a power of two of at least 8, are hashed
    /// ([`super::hash::selector_hash`]); the member id that `tables` picks is written as a
    /// 32-bit host-order word at the `member_id` field's offset. A span over 64 bytes (DPDK
    /// refuses such a selector) ends the packet.
    fn select<T: Tables + ?Sized>(&mut self, s: &SelectorDef, id: u16, tables: Option<&mut T>) -> Result<(), Fault> {
        // The read flags (a field of an invalid header, unwritten metadata) as for a key.
        self.build_key(s.selector.iter().copied());
        let (Some(first), Some(last)) =
            (s.selector.iter().min_by_key(|f| f.offset), s.selector.iter().max_by_key(|f| f.offset))
        else {
            return Err(Fault::FellOff);
        };
        let span = (last.offset + last.bits / 8).saturating_sub(first.offset) as usize;
        if span > 64 {
            return Err(Fault::Unsupported("selector over 64 bytes"));
        }
        let mut buf = [0u8; 64];
        for f in &s.selector {
            let (o, n) = (f.offset as usize, (f.bits / 8) as usize);
            let src = match f.space {
                Space::Header(_) => self.hdr.get(o..o + n),
                Space::Meta | Space::Arg => self.meta.get(o..o + n),
            };
            let at = (f.offset - first.offset) as usize;
            if let (Some(src), Some(dst)) = (src, buf.get_mut(at..at + n)) {
                dst.copy_from_slice(src);
            }
        }
        let size = span.next_power_of_two().max(8);
        let hash = super::hash::selector_hash(buf.get(..size).unwrap_or(&[]));
        let word = |meta: &[u8], o: usize| {
            let mut w = [0u8; 4];
            for (d, s) in w.iter_mut().zip(meta.get(o..).unwrap_or(&[])) {
                *d = *s;
            }
            u32::from_le_bytes(w)
        };
        let go = s.group_id.offset as usize;
        self.check_meta(go, 4);
        let group = word(&self.meta, go);
        let member = tables.map_or(0, |t| t.select(id, group, hash));
        let mo = s.member_id.offset as usize;
        for (d, b) in self.meta.iter_mut().skip(mo).take(4).zip(member.to_le_bytes()) {
            *d = b;
        }
        if DIAG {
            for w in self.written.iter_mut().skip(mo).take(4) {
                *w = true;
            }
        }
        Ok(())
    }

    /// Builds the lookup key of `fields` into `self.key` (big-endian fields back to back).
    fn build_key(&mut self, fields: impl Iterator<Item = Field>) {
        let State { hdr, meta, key, valid, invalid_read, written, unwritten_read, .. } = self;
        key.clear();
        for f in fields {
            if DIAG
                && let Space::Header(h) = f.space
                && !valid.get(usize::from(h)).copied().unwrap_or(false)
            {
                invalid_read.set(true);
            }
            if DIAG
                && matches!(f.space, Space::Meta)
                && written
                    .get(f.offset as usize..(f.offset + f.bits / 8) as usize)
                    .is_none_or(|w| w.iter().any(|&x| !x))
            {
                unwritten_read.set(true);
            }
            let (o, n) = (f.offset as usize, (f.bits / 8) as usize);
            // A field of 1 to 8 bytes as one word (the storage is padded by a word): appended
            // whole, then cut to its length, so no copy of a variable length is made.
            let word = match f.space {
                Space::Header(_) => hdr.get(o..o + PAD),
                Space::Meta | Space::Arg => meta.get(o..o + PAD),
            }
            .and_then(|w| <[u8; PAD]>::try_from(w).ok())
            .filter(|_| (1..=PAD).contains(&n));
            let at = key.len();
            match (f.space, word) {
                (Space::Header(_), Some(w)) => {
                    key.extend_from_slice(&w);
                    key.truncate(at + n);
                }
                // Metadata is host order (little-endian): the key has its bytes reversed,
                // which the top `n` bytes of the word shifted up give in big-endian order.
                (Space::Meta, Some(w)) => {
                    key.extend_from_slice(&(u64::from_le_bytes(w) << (64 - 8 * n)).to_be_bytes());
                    key.truncate(at + n);
                }
                (Space::Header(_), None) => key.extend_from_slice(hdr.get(o..o + n).unwrap_or(&[])),
                (Space::Meta | Space::Arg, _) => key.extend_from_slice(meta.get(o..o + n).unwrap_or(&[])),
            }
        }
    }

    /// Runs an instruction list: `apply`, or the action a table ran (`args` its data).
    #[allow(clippy::too_many_arguments)]
    fn list<T: Tables + ?Sized>(
        &mut self,
        p: &Program,
        list: &[Instr],
        args: &[u8],
        frame: &[u8],
        port_in: u64,
        steps: &mut u32,
        mut tables: Option<&mut T>,
    ) -> End {
        let mut ip = 0usize;
        // A jump taken: counted against the step limit.
        macro_rules! jump {
            ($target:expr) => {{
                *steps += 1;
                if *steps > STEP_LIMIT {
                    return End::Fault(Fault::StepLimit);
                }
                ip = $target as usize;
            }};
        }
        while let Some(i) = list.get(ip) {
            ip += 1;
            match *i {
                Instr::Rx { port } => {
                    self.valid.fill(false);
                    self.emitted.clear();
                    self.cursor = 0;
                    self.hit = false;
                    self.last_action = None;
                    self.learner = None;
                    self.invalid_read.set(false);
                    self.unwritten_read.set(false);
                    if DIAG {
                        self.written.copy_from_slice(&self.never_written);
                    }
                    self.store(port, port_in);
                }
                Instr::Tx { port } => return End::Tx(self.operand(port, args)),
                Instr::Drop => return End::Drop,
                Instr::Extract { header } | Instr::Lookahead { header } => {
                    let Some(h) = p.headers.get(usize::from(header)) else { return End::Fault(Fault::FellOff) };
                    let n = h.bytes as usize;
                    let (Some(src), Some(dst)) = (
                        frame.get(self.cursor..self.cursor + n),
                        self.hdr.get_mut(h.offset as usize..h.offset as usize + n),
                    ) else {
                        return End::Fault(Fault::Truncated);
                    };
                    dst.copy_from_slice(src);
                    if let Some(v) = self.valid.get_mut(usize::from(header)) {
                        *v = true;
                    }
                    if matches!(i, Instr::Extract { .. }) {
                        self.cursor += n;
                    }
                }
                Instr::Emit { header } => {
                    if self.valid(header) {
                        if self.emitted.len() >= self.emitted.capacity() {
                            return End::Fault(Fault::EmitLimit);
                        }
                        self.emitted.push(header);
                    }
                }
                Instr::Validate { header } | Instr::Invalidate { header } => {
                    if let Some(v) = self.valid.get_mut(usize::from(header)) {
                        *v = matches!(i, Instr::Validate { .. });
                    }
                }
                Instr::Mov { dst, src } => match src {
                    Operand::Field(s) if s.bits > 64 || dst.bits > 64 => self.copy(dst, s, args),
                    _ => {
                        let v = self.operand(src, args);
                        self.store(dst, v);
                    }
                },
                Instr::Alu { op, dst, src } => {
                    let (a, b) = (self.load(dst, args), self.operand(src, args));
                    let r = match op {
                        AluOp::Add => a.wrapping_add(b),
                        AluOp::Sub => a.wrapping_sub(b),
                        AluOp::And => a & b,
                        AluOp::Or => a | b,
                        AluOp::Xor => a ^ b,
                        AluOp::Shl => a.checked_shl(b as u32).filter(|_| b < 64).unwrap_or(0),
                        AluOp::Shr => a.checked_shr(b as u32).filter(|_| b < 64).unwrap_or(0),
                    };
                    self.store(dst, r);
                }
                Instr::Ckadd { dst, src: CkSrc::Field(s) } => {
                    let v = self.raw(s);
                    self.ck(dst, Some(v), None, None, p);
                }
                Instr::Ckadd { dst, src: CkSrc::Header(h) } => {
                    self.note(Space::Header(h));
                    self.ck(dst, None, None, Some(h), p)
                }
                Instr::Cksub { dst, src } => {
                    let v = self.raw(src);
                    self.ck(dst, None, Some(v), None, p);
                }
                Instr::Table { table: TableRef::Selector(id) } => {
                    let Some(sel) = p.selectors.get(usize::from(id)) else { return End::Fault(Fault::FellOff) };
                    if let Err(f) = self.select(sel, id, tables.as_deref_mut()) {
                        return End::Fault(f);
                    }
                }
                Instr::Table { table } => {
                    let default = match table {
                        TableRef::Table(t) => p.tables.get(usize::from(t)).map(|t| {
                            self.build_key(t.keys.iter().map(|k| k.field));
                            &t.default
                        }),
                        TableRef::Learner(l) => p.learners.get(usize::from(l)).map(|l| {
                            self.build_key(l.keys.iter().copied());
                            &l.default
                        }),
                        TableRef::Selector(_) => return End::Fault(Fault::Unsupported("selector")),
                    };
                    let Some(d) = default else { return End::Fault(Fault::FellOff) };
                    // An action that only returns (`NoAction`): one step, no call, no data.
                    let return_only = |a: ActionId| {
                        p.actions.get(usize::from(a)).is_some_and(|a| matches!(a.instrs.first(), Some(Instr::Return)))
                    };
                    // The action's data into a buffer of the state (no allocation: its
                    // capacity is the widest action's), so that the action may use `tables`.
                    let mut buf = core::mem::take(&mut self.argbuf);
                    buf.clear();
                    let hit = tables.as_deref_mut().and_then(|t| t.lookup(table, &self.key));
                    let (action, was_hit) = match hit {
                        Some(h) => {
                            if !return_only(h.action) {
                                buf.extend_from_slice(h.args);
                            }
                            self.entry = h.entry;
                            (h.action, true)
                        }
                        None => {
                            // The default the control plane set live, where it set one.
                            let (a, args) = tables
                                .as_deref()
                                .and_then(|t| t.default_action(table))
                                .unwrap_or((d.action, &d.args[..]));
                            if !return_only(a) {
                                buf.extend_from_slice(args);
                            }
                            self.entry = 0;
                            (a, false)
                        }
                    };
                    self.hit = was_hit;
                    self.last_action = Some(action);
                    self.learner = if let TableRef::Learner(l) = table { Some(l) } else { None };
                    let Some(a) = p.actions.get(usize::from(action)) else {
                        self.argbuf = buf;
                        return End::Fault(Fault::FellOff);
                    };
                    if return_only(action) {
                        self.argbuf = buf;
                        continue;
                    }
                    buf.extend_from_slice(&[0; PAD]);
                    let end = self.list(p, &a.run, &buf, frame, port_in, steps, tables.as_deref_mut());
                    self.argbuf = buf;
                    match end {
                        End::Return => {}
                        other => return other,
                    }
                }
                Instr::Learn { action, args: first, timeout_id } => {
                    let tid = self.load(timeout_id, args);
                    let n = p.actions.get(usize::from(action)).map_or(0, |a| a.arg_bytes) as usize;
                    if let Some(f) = first {
                        self.check_meta(f.offset as usize, n);
                    }
                    let data = first
                        .map_or(&[][..], |f| self.meta.get(f.offset as usize..f.offset as usize + n).unwrap_or(&[]));
                    let (Some(l), Some(t)) = (self.learner, tables.as_deref_mut()) else {
                        return End::Fault(Fault::Unsupported("learn"));
                    };
                    if let Err(f) = t.learn(l, &self.key, action, data, tid) {
                        return End::Fault(f);
                    }
                }
                Instr::Rearm { timeout_id } => {
                    let tid = timeout_id.map(|f| self.load(f, args));
                    let (Some(l), Some(t)) = (self.learner, tables.as_deref_mut()) else {
                        return End::Fault(Fault::Unsupported("rearm"));
                    };
                    if let Err(f) = t.rearm(l, &self.key, tid) {
                        return End::Fault(f);
                    }
                }
                Instr::Forget => {
                    let (Some(l), Some(t)) = (self.learner, tables.as_deref_mut()) else {
                        return End::Fault(Fault::Unsupported("forget"));
                    };
                    if let Err(f) = t.forget(l, &self.key) {
                        return End::Fault(f);
                    }
                }
                Instr::Entryid { dst } => self.store(dst, u64::from(self.entry)),
                Instr::Hash { func, dst, first, bytes } => {
                    let (o, n) = (first.offset as usize, bytes as usize);
                    self.note(first.space);
                    if matches!(first.space, Space::Meta) {
                        self.check_meta(o, n);
                    }
                    let buf: &[u8] = match first.space {
                        Space::Header(_) => &self.hdr,
                        Space::Meta => &self.meta,
                        Space::Arg => args,
                    };
                    let src = buf.get(o..o + n).unwrap_or(&[]);
                    let h = match func {
                        HashFunc::Jhash => super::hash::jhash(src, 0),
                        HashFunc::Crc32 => super::hash::crc32c(src, 0),
                    };
                    self.store(dst, u64::from(h));
                }
                Instr::RegRd { array, dst, idx } => {
                    let i = self.operand(idx, args);
                    let v = self.regs.read(array, i);
                    self.store(dst, v);
                }
                Instr::RegWr { array, idx, src } => {
                    let (at, v) = (self.operand(idx, args), self.operand(src, args));
                    self.regs.write(array, at, v);
                }
                Instr::RegAdd { array, idx, src } => {
                    let (at, v) = (self.operand(idx, args), self.operand(src, args));
                    self.regs.add(array, at, v);
                }
                Instr::Jmp { target } => jump!(target),
                Instr::JmpValid { target, header, valid } => {
                    if self.valid(header) == valid {
                        jump!(target);
                    }
                }
                Instr::JmpHit { target, hit } => {
                    if self.hit == hit {
                        jump!(target);
                    }
                }
                Instr::JmpAction { target, action, ran } => {
                    if (self.last_action == Some(action)) == ran {
                        jump!(target);
                    }
                }
                Instr::JmpCmp { target, cond, a, b } => {
                    let (a, b) = (self.load(a, args), self.operand(b, args));
                    let yes = match cond {
                        Cond::Eq => a == b,
                        Cond::Neq => a != b,
                        Cond::Lt => a < b,
                        Cond::Gt => a > b,
                    };
                    if yes {
                        jump!(target);
                    }
                }
                Instr::Return => return End::Return,
                Instr::MovRun { run } => {
                    let Some(r) = p.mov_runs.get(usize::from(run)) else { return End::Fault(Fault::FellOff) };
                    // A byte at a time (each field's bytes reversed at load: host-order action
                    // data into network-order fields). The loader keeps every argument within
                    // the action's data; a byte past it reads as zero, as `mov` stores a
                    // missing operand.
                    for &(d, s) in &r.bytes {
                        if let Some(t) = self.hdr.get_mut(d as usize) {
                            *t = args.get(s as usize).copied().unwrap_or(0);
                        }
                    }
                }
            }
        }
        End::Fault(Fault::FellOff)
    }
}
