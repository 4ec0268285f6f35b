//! P4 programs as DPDK pipeline specs: the loader (issue 28, item 1) and the table-file
//! entries of the control plane (item 4).
//!
//! # The language
//! p4c's DPDK backend compiles a P4-16 program (PNA or PSA architecture) to a *pipeline
//! spec*, the text language of DPDK's SWX pipeline (DPDK 22.11: `lib/pipeline/
//! rte_swx_pipeline_spec.c` for the grammar, `rte_swx_pipeline.c` for what each instruction
//! accepts and does; the programmer's guide, "Packet Framework / SWX pipeline"). One
//! statement a line; `;`, `#` and `//` start comments; names are shorter than 64 characters.
//!
//! - `struct NAME {` `bit<N> FIELD` … `}`: N a nonzero multiple of 8;
//! - `header NAME instanceof STRUCT`; `metadata instanceof STRUCT` (exactly one);
//! - `action NAME args none|instanceof STRUCT {` instructions `}`, the struct's fields being the
//!   action's arguments, read as `t.FIELD`;
//! - `table NAME { key { FIELD exact|lpm|wildcard … } actions { ACTION [@tableonly|@defaultonly]
//!   … } default_action ACTION args none|ARG VALUE … [const] size N }` (also `hash F`,
//!   `instanceof T`, `pragma …`: hints for DPDK's table implementations, accepted and without
//!   effect here);
//! - `learner NAME { key { FIELD … } actions { … } default_action … size N timeout { SECONDS … } }`:
//!   PNA's add-on-miss table, its actions may `learn`, `rearm`, `forget`;
//! - `selector NAME { group_id M selector { FIELD … } member_id M n_groups_max N
//!   n_members_per_group_max N }`;
//! - `regarray NAME size N initval V`, `metarray NAME size N`;
//! - `apply {` instructions `}`: `[LABEL :] OPCODE OPERANDS`, operands `h.HEADER.FIELD` (network
//!   order), `m.FIELD` (host order), `t.ARG`, and immediates (`strtoull` base 0).
//!
//! # What Cadence loads
//! Everything above, and the instructions `rx tx drop extract lookahead emit validate
//! invalidate mov add sub and or xor shl shr ckadd cksub table learn rearm forget entryid hash
//! regrd regwr regadd jmp jmpv jmpnv jmph jmpnh jmpa jmpna jmpeq jmpneq jmplt jmpgt return`,
//! with DPDK 22.11's operand rules (see [`instr`](self) and the checks in `load.rs`).
//! Refused by name, never ignored: `varbit` fields (and so `extract H LEN`), `mirror`,
//! `recirculate`, `recircid`, `meter`, `metprefetch`, `regprefetch`, `extern`/`extobj`, and
//! two instructions of later DPDK releases that p4c emits, `movh` and `rss`. Where DPDK 22.11
//! accepts something that does not run the same twice, Cadence refuses it too or says so:
//! an immediate beyond 64 bits (DPDK saturates it silently) is refused; a compare-and-jump
//! whose first operand is an immediate is refused as DPDK does; a table with more than one
//! `lpm` key field is refused (DPDK takes the priority from the last one; Cadence's LPM has
//! one prefix). An immediate wider than its destination is truncated to the destination's
//! width, as DPDK does.
//!
//! Corpus (`core/tests/p4/`, `core/tests/p4_spec.rs`): of DPDK 22.11's 12 example specs 8
//! load (`meter`, `mirroring`, `recirculation`, `varbit` are refused by name); of p4c's 64
//! `pna-*.p4.spec` outputs 41 load, the 23 others refused by name (6 for an immediate first
//! operand of a jump, 3 for `mov` across widths over 64 bits, 2 `rss`, 1 `meter`, 4 varbit,
//! 2 `mirror`, 6 `recircid`, as DPDK 22.11 also refuses the first 12).
//!
//! Every refusal is a [`SpecError`]: the line and the construct (``line 42: instruction
//! `mirror` is not supported``, ``line 7: field `h.ipv4.foo` not found``). The loader never
//! panics (fuzz target `p4_spec`).
//!
//! # The program, and the executor it is shaped for
//! [`load`] returns a [`Program`]: header instances laid out back to back in one *header
//! storage* (each with a validity bit), the metadata as one byte array, each action with its
//! argument size, and every instruction an [`Instr`] whose operands are resolved [`Field`]s
//! (space, byte offset, bits) or immediates; labels are instruction indexes; tables, selectors
//! and learners are indexes. The executor (the next step of issue 28) needs no name and no
//! allocation per packet; per burst, per packet:
//!
//! ```text
//! hdr: [u8; header_bytes], valid: bitset, meta: [u8; meta_bytes]   // per packet, reused
//! ip = 0; list = &program.apply
//! loop {                                   // bounded: at most N steps, else drop (counted)
//!     match list[ip] {
//!         Extract{h}  => copy frame[cursor..+bytes] to hdr[h.offset..], set valid, cursor += bytes
//!         Emit{h}     => if valid(h) append hdr[h.offset..+bytes] to the output headers
//!         Mov{dst,src}/Alu{..} => read src (be for Header, le for Meta/Arg, imm), op, write dst
//!         JmpCmp{target,..}    => if cond { ip = target; continue }
//!         Table{t}    => key bytes from the resolved key fields -> Cadence's table
//!                        (exact → pna::exact, lpm → the LPM, wildcard → pna::ternary,
//!                         learner → exact with add-on-miss + expire profiles, selector →
//!                         members + hash); hit/miss, action id and its argument bytes;
//!                        run program.actions[id].instrs with `Arg` = those bytes (until Return)
//!         Tx{port}    => done: emit the output headers + payload from the cursor, to port
//!         Drop        => done: free
//!     }
//!     ip += 1
//! }
//! ```
//! A backward jump is legal in the language (DPDK only refuses a jump to itself), hence the
//! step bound. [`exec`] is the start of that loop (empty tables: the default action runs),
//! unit-tested over frames; [`tables::TableSet`] is its [`exec::Tables`] on Cadence's own
//! structures, checked against DPDK frame by frame in `bench/tests/p4_vs_dpdk.rs`. Table-file lines ([`entry`]) become typed entries against a
//! loaded table, selector or learner.
//!
//! Memory: `alloc` at load time only (the program, its names, the entries parsed).

mod error;
mod instr;
mod lex;
mod load;
mod parse;
mod program;

pub mod entry;
pub mod exec;
pub mod hash;
pub mod regs;
pub mod tables;

pub use error::{ErrorKind, SpecError};
pub use program::*;

/// A short class of a spec error, for error types that cannot carry its text (the chain's
/// text form, which the image reports as `defmt`): `cadence-ctl` checks a chain's spec on the
/// host and prints the whole message.
pub fn error_class(k: &ErrorKind) -> &'static str {
    match k {
        ErrorKind::Syntax { .. } => "a line of the P4 spec or table file does not parse",
        ErrorKind::Unsupported { .. } => "the P4 spec uses a construct Cadence does not run",
        ErrorKind::NotFound { .. } => "the P4 spec or table file names something not declared",
        ErrorKind::Duplicate { .. } => "the P4 spec declares a name twice",
        ErrorKind::Width { .. } => "a P4 field has the wrong width",
        ErrorKind::Operand { .. } => "a P4 instruction has a wrong operand",
        ErrorKind::Number { .. } => "a number in the P4 spec or table file does not parse or fit",
        ErrorKind::TooLong { .. } => "a P4 name or line is too long",
        _ => "the P4 spec breaks a rule of the language",
    }
}

/// Parses and validates a whole pipeline spec.
pub fn load(text: &str) -> Result<Program, SpecError> {
    let lines = lex::lines(text)?;
    let raw = parse::parse(&lines)?;
    load::load(&raw)
}

#[cfg(test)]
mod tests;
