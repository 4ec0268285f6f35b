//! Why a spec (or a table-file line) was refused: the line and the construct.

use alloc::string::String;
use core::fmt;

/// A refusal of a pipeline spec or of a table-file line: the 1-based line of the text and
/// what is wrong there (line 0: the whole text, e.g. a missing `apply` block).
///
/// Not `Copy` like the crate's per-packet error enums: a refusal names the construct from the
/// text (a field, an action), so it carries that name; it exists only at load time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// 1-based line of the text; 0 when the error is about the text as a whole.
    pub line: u32,
    /// What is wrong.
    pub kind: ErrorKind,
}

/// What is wrong on a line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The line does not have the form `expected` (e.g. "`struct NAME {`").
    Syntax { what: &'static str, expected: &'static str },
    /// A valid construct of DPDK's language that Cadence does not run (`what` is its kind:
    /// "instruction", "varbit field", ...), refused by name rather than ignored.
    Unsupported { what: &'static str, name: String },
    /// A name that is not declared (or not declared before its use, as DPDK requires).
    NotFound { what: &'static str, name: String },
    /// A second declaration of a name.
    Duplicate { what: &'static str, name: String },
    /// A field of the wrong width for where it is used.
    Width { name: String, bits: u32, rule: &'static str },
    /// An operand of the wrong kind (or count) for an instruction.
    Operand { instr: String, rule: &'static str },
    /// A number that does not parse or does not fit.
    Number { text: String, rule: &'static str },
    /// A token of 64 characters or more (DPDK's `RTE_SWX_NAME_SIZE`), or too many tokens.
    TooLong { what: &'static str },
    /// Any other rule of the language, stated in `rule` about `name`.
    Invalid { name: String, rule: &'static str },
}

impl SpecError {
    pub(crate) fn new(line: u32, kind: ErrorKind) -> Self {
        SpecError { line, kind }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::Syntax { what, expected } => write!(f, "invalid {what}: expected `{expected}`"),
            ErrorKind::Unsupported { what, name } => write!(f, "{what} `{name}` is not supported"),
            ErrorKind::NotFound { what, name } => write!(f, "{what} `{name}` not found"),
            ErrorKind::Duplicate { what, name } => write!(f, "duplicate {what} `{name}`"),
            ErrorKind::Width { name, bits, rule } => write!(f, "field `{name}` is {bits} bits: {rule}"),
            ErrorKind::Operand { instr, rule } => write!(f, "instruction `{instr}`: {rule}"),
            ErrorKind::Number { text, rule } => write!(f, "number `{text}`: {rule}"),
            ErrorKind::TooLong { what } => write!(f, "{what}"),
            ErrorKind::Invalid { name, rule } => write!(f, "`{name}`: {rule}"),
        }
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.kind)
    }
}

#[cfg(feature = "defmt")]
impl defmt::Format for SpecError {
    fn format(&self, f: defmt::Formatter<'_>) {
        defmt::write!(f, "line {=u32}: {=str}", self.line, alloc::format!("{}", self.kind).as_str());
    }
}
