//! Lines and tokens, as DPDK 22.11's `rte_swx_pipeline_spec.c` reads them: one statement a
//! line, tokens split by blanks (` \f\r\t\v`), a token starting with `#`, `;` or `//` ends the
//! line (comment), at most 256 tokens a line, each shorter than 64 characters
//! (`RTE_SWX_NAME_SIZE`).

use alloc::vec::Vec;

use super::error::{ErrorKind, SpecError};

/// At most this many tokens a line (DPDK's `MAX_TOKENS`).
pub(crate) const MAX_TOKENS: usize = 256;
/// A token (any name) is shorter than this (DPDK's `RTE_SWX_NAME_SIZE`).
pub(crate) const NAME_SIZE: usize = 64;

/// One non-empty line: its 1-based number and its tokens.
#[derive(Debug, Clone)]
pub(crate) struct Line<'a> {
    pub no: u32,
    pub tokens: Vec<&'a str>,
}

/// Whether `t` starts a comment.
pub(crate) fn is_comment(t: &str) -> bool {
    t.starts_with('#') || t.starts_with(';') || t.starts_with("//")
}

/// The tokens of one line (comment stripped), or why the line is refused.
pub(crate) fn tokens(line: &str, no: u32) -> Result<Vec<&str>, SpecError> {
    let mut out = Vec::new();
    for t in line.split([' ', '\x0c', '\r', '\t', '\x0b']).filter(|t| !t.is_empty()) {
        if is_comment(t) {
            break;
        }
        if out.len() >= MAX_TOKENS {
            return Err(SpecError::new(no, ErrorKind::TooLong { what: "more than 256 tokens on a line" }));
        }
        if t.len() >= NAME_SIZE {
            return Err(SpecError::new(
                no,
                ErrorKind::TooLong { what: "a token of 64 characters or more (DPDK's limit is 63)" },
            ));
        }
        out.push(t);
    }
    Ok(out)
}

/// The non-empty lines of `text`, numbered from 1.
pub(crate) fn lines(text: &str) -> Result<Vec<Line<'_>>, SpecError> {
    let mut out = Vec::new();
    for (i, l) in text.split('\n').enumerate() {
        let no = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let tokens = tokens(l, no)?;
        if !tokens.is_empty() {
            out.push(Line { no, tokens });
        }
    }
    Ok(out)
}

/// `strtoull(s, &end, 0)` with `*end == 0` required, as DPDK parses every number: decimal,
/// `0x`/`0X` hexadecimal, a leading `0` octal, an optional sign (`-` negates, wrapping).
/// Unlike `strtoull`, a value beyond 64 bits is refused rather than saturated.
pub(crate) fn number(s: &str) -> Option<u64> {
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, s.get(1..)?),
        Some(b'+') => (false, s.get(1..)?),
        _ => (false, s),
    };
    let (radix, digits) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (16, h)
    } else if s.len() > 1 && s.starts_with('0') {
        (8, s.get(1..)?)
    } else {
        (10, s)
    };
    if digits.is_empty() || !digits.bytes().all(|b| (b as char).is_digit(radix)) {
        return None;
    }
    let v = u64::from_str_radix(digits, radix).ok()?;
    Some(if neg { v.wrapping_neg() } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_follow_strtoull_base_0() {
        assert_eq!(number("0"), Some(0));
        assert_eq!(number("42"), Some(42));
        assert_eq!(number("0x1F"), Some(31));
        assert_eq!(number("0X1f"), Some(31));
        assert_eq!(number("010"), Some(8));
        assert_eq!(number("-1"), Some(u64::MAX));
        assert_eq!(number("0xFFFFFFFFFFFFFFFF"), Some(u64::MAX));
        assert_eq!(number("0x10000000000000000"), None);
        assert_eq!(number("0x"), None);
        assert_eq!(number("08"), None);
        assert_eq!(number("12a"), None);
        assert_eq!(number(""), None);
        assert_eq!(number("-"), None);
    }

    #[test]
    fn comments_and_blanks() {
        let ls = lines("; c\n\n  struct a { // x\n\tbit<8> f #y\n").unwrap();
        assert_eq!(ls.len(), 2);
        assert_eq!((ls[0].no, ls[0].tokens.as_slice()), (3, &["struct", "a", "{"][..]));
        assert_eq!((ls[1].no, ls[1].tokens.as_slice()), (4, &["bit<8>", "f"][..]));
        let long = "a".repeat(64);
        assert_eq!(lines(&long).unwrap_err().line, 1);
        assert!(lines(&"a".repeat(63)).is_ok());
    }
}
