//! The loaded program: every name resolved to an index, every field to a place (space, byte
//! offset, width), every label to an instruction index. Names are kept only for the control
//! plane and for messages.

use alloc::string::String;
use alloc::vec::Vec;

/// Index of a header instance in [`Program::headers`].
pub type HeaderId = u16;
/// Index of an action in [`Program::actions`].
pub type ActionId = u16;

/// A struct type: fields in declaration order, each at a byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructDef {
    pub name: String,
    pub fields: Vec<FieldDef>,
    /// Total size in bytes.
    pub bytes: u32,
}

/// One field of a struct type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldDef {
    pub name: String,
    /// Width in bits: a nonzero multiple of 8 (DPDK refuses any other).
    pub bits: u32,
    /// Byte offset in its struct.
    pub offset: u32,
}

/// A header instance (`header NAME instanceof STRUCT`): its bytes live at `offset` of the
/// packet's header storage, in network order as on the wire, with one validity bit (`id`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderDef {
    pub name: String,
    /// Index in [`Program::structs`].
    pub struct_id: u16,
    /// Byte offset in the header storage ([`Program::header_bytes`] in all).
    pub offset: u32,
    /// Size in bytes (extract and emit move exactly this many).
    pub bytes: u32,
}

/// Where a field lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space {
    /// The header storage; the field belongs to this header instance (its validity bit).
    Header(HeaderId),
    /// The packet's metadata.
    Meta,
    /// The running action's argument data (`t.NAME`).
    Arg,
}

/// A resolved field operand: where, at which byte offset of that space, how wide.
///
/// Byte order: fields of at most 64 bits are numbers, in network order in [`Space::Header`]
/// and in host (little-endian) order in [`Space::Meta`] and [`Space::Arg`]; wider fields (e.g.
/// an IPv6 address) are byte strings in network order in every space, moved only whole
/// between fields of the same width (DPDK's rule for `mov`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    pub space: Space,
    /// Byte offset in the space (for a header: in the whole header storage).
    pub offset: u32,
    pub bits: u32,
}

/// A source operand: a field or an immediate (`strtoull` syntax: decimal, `0x` hex, `0` octal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operand {
    Field(Field),
    Imm(u64),
}

/// Arithmetic and logic instructions (`dst = dst OP src`, wrapping at the width of `dst`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AluOp {
    Add,
    Sub,
    And,
    Or,
    Xor,
    Shl,
    Shr,
}

/// Conditions of the compare-and-jump instructions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cond {
    Eq,
    Neq,
    Lt,
    Gt,
}

/// The object a `table` instruction applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TableRef {
    /// Index in [`Program::tables`].
    Table(u16),
    /// Index in [`Program::selectors`].
    Selector(u16),
    /// Index in [`Program::learners`].
    Learner(u16),
}

/// The source of `ckadd`: one header field, or a whole header (its one's-complement sum).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CkSrc {
    Field(Field),
    Header(HeaderId),
}

/// DPDK's built-in hash functions (`hash FUNC DST FIRST LAST`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HashFunc {
    Jhash,
    Crc32,
}

/// One instruction, operands resolved. Jump targets are indexes into the same instruction
/// list (the `apply` block's or the action's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Instr {
    /// Receive: the input port into a metadata field; `apply`'s first instruction.
    Rx {
        port: Field,
    },
    /// Transmit to the port in a metadata field or an immediate port; ends the packet.
    Tx {
        port: Operand,
    },
    /// Drop; ends the packet.
    Drop,
    /// Copy `bytes` of the frame at the parse cursor into the header, mark it valid, advance.
    Extract {
        header: HeaderId,
    },
    /// As `extract`, without marking valid or advancing the cursor.
    Lookahead {
        header: HeaderId,
    },
    /// Append the header to the output if it is valid.
    Emit {
        header: HeaderId,
    },
    Validate {
        header: HeaderId,
    },
    Invalidate {
        header: HeaderId,
    },
    /// `dst = src` (widths convert for fields of at most 64 bits; wider fields copy whole).
    Mov {
        dst: Field,
        src: Operand,
    },
    Alu {
        op: AluOp,
        dst: Field,
        src: Operand,
    },
    /// One's-complement add into a 16-bit header checksum field (RFC 1624).
    Ckadd {
        dst: Field,
        src: CkSrc,
    },
    /// One's-complement subtract of a header field from a 16-bit header checksum field.
    Cksub {
        dst: Field,
        src: Field,
    },
    /// Apply a table, selector or learner: sets hit/miss and the action run, runs it.
    Table {
        table: TableRef,
    },
    /// (Learner actions) add the current key with `action`, its arguments read from the
    /// metadata fields starting at `args` (in order, widths equal to the action's), the
    /// expiry profile from `timeout_id`.
    Learn {
        action: ActionId,
        args: Option<Field>,
        timeout_id: Field,
    },
    /// (Learner actions) restart the hit entry's expiry, optionally with a new profile.
    Rearm {
        timeout_id: Option<Field>,
    },
    /// (Learner actions) delete the hit entry.
    Forget,
    /// The hit entry's index into a metadata field.
    Entryid {
        dst: Field,
    },
    /// Hash of the bytes `first .. first + bytes` of one struct into `dst`.
    Hash {
        func: HashFunc,
        dst: Field,
        first: Field,
        bytes: u32,
    },
    /// `dst = regarray[idx]`.
    RegRd {
        array: u16,
        dst: Field,
        idx: Operand,
    },
    /// `regarray[idx] = src`.
    RegWr {
        array: u16,
        idx: Operand,
        src: Operand,
    },
    /// `regarray[idx] += src`.
    RegAdd {
        array: u16,
        idx: Operand,
        src: Operand,
    },
    Jmp {
        target: u32,
    },
    /// Jump if the header is valid (`valid`) or invalid (`!valid`).
    JmpValid {
        target: u32,
        header: HeaderId,
        valid: bool,
    },
    /// Jump if the last table hit (`hit`) or missed (`!hit`).
    JmpHit {
        target: u32,
        hit: bool,
    },
    /// Jump if the last table ran `action` (`ran`) or not (`!ran`).
    JmpAction {
        target: u32,
        action: ActionId,
        ran: bool,
    },
    /// Jump if `a COND b`, both read as unsigned numbers.
    JmpCmp {
        target: u32,
        cond: Cond,
        a: Field,
        b: Operand,
    },
    /// End of an action: back to `apply`.
    Return,
    /// Made by the loader, never written in a spec: a run of consecutive `mov`s of action
    /// data into header fields of the same width ([`Program::mov_runs`]`[run]`), executed as
    /// one step per `mov` without a dispatch each (DPDK's pipeline fuses such runs too).
    MovRun {
        run: u16,
    },
}

/// One `mov h.HEADER.FIELD t.ARG` of a [`MovRun`]: the field's offset in the header
/// storage, the argument's offset in the action data, their width in bytes (1..=8; the
/// action data in host order, the header in network order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgMove {
    pub dst: u32,
    pub src: u32,
    pub bytes: u8,
}

/// A run of [`ArgMove`]s ([`Instr::MovRun`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovRun {
    pub moves: Vec<ArgMove>,
    /// The same moves a byte at a time, as the executor runs them: (header byte, action data
    /// byte), each field's bytes reversed (host order into network order).
    pub bytes: Vec<(u32, u32)>,
}

impl MovRun {
    /// The run of `moves`.
    pub fn new(moves: Vec<ArgMove>) -> MovRun {
        let bytes = moves
            .iter()
            .flat_map(|m| {
                let n = u32::from(m.bytes);
                (0..n).map(move |i| (m.dst + i, m.src + n - 1 - i))
            })
            .collect();
        MovRun { moves, bytes }
    }
}

/// An action: its argument struct (`args instanceof`) and instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActionDef {
    pub name: String,
    /// Index in [`Program::structs`] of the argument struct; `None` for `args none`.
    pub args: Option<u16>,
    /// Argument data size in bytes (0 for `args none`).
    pub arg_bytes: u32,
    pub instrs: Vec<Instr>,
    /// What the executor runs: `instrs` with each run of two or more `mov`s of action data
    /// into header fields replaced by one [`Instr::MovRun`] (an action with a jump keeps
    /// `instrs` as they are).
    pub run: Vec<Instr>,
    /// Whether the action runs `learn` or `forget` (only learners may use it).
    pub learns: bool,
}

/// A table's match kind for one key field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    Exact,
    Lpm,
    Wildcard,
}

/// One key field of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyField {
    pub field: Field,
    pub kind: MatchKind,
}

/// One action a table (or learner) may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableAction {
    pub action: ActionId,
    /// `@tableonly`: never the default action.
    pub table_only: bool,
    /// `@defaultonly`: never an entry's action.
    pub default_only: bool,
}

/// The action on a miss, with its argument data (encoded as [`Program::encode_arg`] does).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultAction {
    pub action: ActionId,
    pub args: Vec<u8>,
    /// `const`: the control plane may not change it.
    pub is_const: bool,
}

/// A match-action table (`table NAME { … }`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableDef {
    pub name: String,
    pub keys: Vec<KeyField>,
    pub actions: Vec<TableAction>,
    pub default: DefaultAction,
    pub size: u32,
    /// The line of its `table` statement (for messages).
    pub line: u32,
}

/// A learner (`learner NAME { … }`): an exact table with add-on-miss and expiry profiles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnerDef {
    pub name: String,
    pub keys: Vec<Field>,
    pub actions: Vec<TableAction>,
    pub default: DefaultAction,
    pub size: u32,
    /// Expiry profiles in seconds, indexed by the timeout id `learn`/`rearm` read.
    pub timeouts: Vec<u32>,
    pub line: u32,
}

/// A selector (`selector NAME { … }`): group id in, member id out, picked by a hash of the
/// selector fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorDef {
    pub name: String,
    pub group_id: Field,
    pub selector: Vec<Field>,
    pub member_id: Field,
    pub n_groups_max: u32,
    pub n_members_per_group_max: u32,
    pub line: u32,
}

/// A register array (`regarray NAME size N initval V`) of 64-bit registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegArrayDef {
    pub name: String,
    pub size: u32,
    pub initval: u64,
}

/// A meter array (`metarray NAME size N`): declared, but the `meter` instruction is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetArrayDef {
    pub name: String,
    pub size: u32,
}

/// A whole loaded, validated program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    pub structs: Vec<StructDef>,
    pub headers: Vec<HeaderDef>,
    /// Index in [`Program::structs`] of the metadata struct.
    pub metadata: u16,
    /// Size of the header storage of a packet (all instances, back to back).
    pub header_bytes: u32,
    /// Size of a packet's metadata.
    pub meta_bytes: u32,
    pub actions: Vec<ActionDef>,
    pub tables: Vec<TableDef>,
    pub selectors: Vec<SelectorDef>,
    pub learners: Vec<LearnerDef>,
    pub regarrays: Vec<RegArrayDef>,
    pub metarrays: Vec<MetArrayDef>,
    /// The `apply` block; starts with `rx`.
    pub apply: Vec<Instr>,
    /// The runs of [`Instr::MovRun`].
    pub mov_runs: Vec<MovRun>,
}

impl Program {
    /// The header instance named `name` (without `h.`).
    pub fn header(&self, name: &str) -> Option<HeaderId> {
        self.headers.iter().position(|h| h.name == name).map(|i| i as HeaderId)
    }

    /// The action named `name`.
    pub fn action(&self, name: &str) -> Option<ActionId> {
        self.actions.iter().position(|a| a.name == name).map(|i| i as ActionId)
    }

    /// The table named `name`.
    pub fn table(&self, name: &str) -> Option<&TableDef> {
        self.tables.iter().find(|t| t.name == name)
    }

    /// The learner named `name`.
    pub fn learner(&self, name: &str) -> Option<&LearnerDef> {
        self.learners.iter().find(|t| t.name == name)
    }

    /// The selector named `name`.
    pub fn selector(&self, name: &str) -> Option<&SelectorDef> {
        self.selectors.iter().find(|t| t.name == name)
    }

    /// The argument fields of action `a` (empty for `args none`).
    pub fn action_args(&self, a: ActionId) -> &[FieldDef] {
        self.actions
            .get(usize::from(a))
            .and_then(|a| a.args)
            .and_then(|s| self.structs.get(usize::from(s)))
            .map_or(&[], |s| s.fields.as_slice())
    }

    /// Resolves a field name as the spec writes it (`h.HDR.FIELD`, `m.FIELD`) outside any
    /// action. For tests and the control plane.
    pub fn field(&self, name: &str) -> Option<Field> {
        super::load::resolve_field(self, name, None)
    }

    /// Writes `value` as argument `f` (of an action's argument struct) into `data`: host
    /// order for fields of at most 64 bits (as metadata), `value`'s low bytes in network
    /// order for wider ones. `data` is the action's argument data, `arg_bytes` long.
    pub fn encode_arg(f: &FieldDef, value: u64, data: &mut [u8]) {
        let (off, n) = (f.offset as usize, (f.bits / 8) as usize);
        let Some(dst) = data.get_mut(off..off + n) else { return };
        if n <= 8 {
            for (d, s) in dst.iter_mut().zip(value.to_le_bytes()) {
                *d = s;
            }
        } else {
            dst.fill(0);
            for (d, s) in dst.iter_mut().skip(n - 8).zip(value.to_be_bytes()) {
                *d = s;
            }
        }
    }
}
