//! Decoding COM2's defmt stream (rzcobs frames) with the exact ELF that was booted
//! (decoding needs that very ELF, with debuginfo for locations).

use std::path::Path;

use anyhow::{Context, Result, anyhow};
use defmt_decoder::{DecodeError, Encoding, Table};

/// The decoded log.
#[derive(Debug, Clone, Default)]
pub struct Decoded {
    /// One entry per frame: `<timestamp> <LEVEL> <message>` plus ` (<file>:<line>)`
    /// when the location is known.
    pub lines: Vec<String>,
    /// Frames that did not decode.
    pub malformed: usize,
    /// Bytes left over after the last complete frame (a frame cut off at exit).
    pub trailing_bytes: usize,
}

/// A copy of `elf` in which symbols that the linker attached to `.defmt` but that are
/// not defmt's (e.g. a linker-script `__kernel_start = .;` right before the first output
/// section, which lld puts in section 1 = `.defmt`) are made absolute, because
/// `defmt-decoder` tries to decode every symbol of that section and fails on them.
/// defmt's own symbols are JSON (`{"package":…}`) or start with `_defmt`/`__DEFMT_MARKER`.
/// Returns `None` when nothing needed changing (or the file is not ELF64 LE).
pub fn sanitize_elf(elf: &[u8]) -> Option<Vec<u8>> {
    const SHT_SYMTAB: u32 = 2;
    const SHN_ABS: u16 = 0xFFF1;
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| elf.get(o..o + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let u64_at = |o: usize| elf.get(o..o + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    // ELF64, little endian.
    if elf.get(0..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let shoff = usize::try_from(u64_at(0x28)?).ok()?;
    let shentsize = usize::from(u16_at(0x3A)?);
    let shnum = usize::from(u16_at(0x3C)?);
    let shstrndx = usize::from(u16_at(0x3E)?);
    let sh = |i: usize| shoff + i * shentsize;
    let str_at = |tab_off: usize, idx: u32| -> Option<&[u8]> {
        let start = tab_off.checked_add(idx as usize)?;
        let rest = elf.get(start..)?;
        Some(&rest[..rest.iter().position(|&b| b == 0)?])
    };
    let shstr_off = usize::try_from(u64_at(sh(shstrndx) + 0x18)?).ok()?;
    let defmt: Vec<u16> = (0..shnum)
        .filter(|&i| {
            u32_at(sh(i))
                .and_then(|n| str_at(shstr_off, n))
                .is_some_and(|n| n == b".defmt" || n.starts_with(b".defmt."))
        })
        .filter_map(|i| u16::try_from(i).ok())
        .collect();
    let mut out: Option<Vec<u8>> = None;
    for i in 0..shnum {
        if u32_at(sh(i) + 4)? != SHT_SYMTAB {
            continue;
        }
        let off = usize::try_from(u64_at(sh(i) + 0x18)?).ok()?;
        let size = usize::try_from(u64_at(sh(i) + 0x20)?).ok()?;
        let link = usize::try_from(u32_at(sh(i) + 0x28)?).ok()?;
        let entsize = usize::try_from(u64_at(sh(i) + 0x38)?).ok()?.max(24);
        let strtab = usize::try_from(u64_at(sh(link) + 0x18)?).ok()?;
        for s in (off..off + size).step_by(entsize) {
            let shndx = u16_at(s + 6)?;
            if !defmt.contains(&shndx) {
                continue;
            }
            let name = str_at(strtab, u32_at(s)?)?;
            let ours = name.is_empty()
                || name.starts_with(b"{")
                || name.starts_with(b"\"{")
                || name.starts_with(b"_defmt")
                || name.starts_with(b"__DEFMT_MARKER")
                || name.starts_with(b"$d");
            if !ours {
                let o = out.get_or_insert_with(|| elf.to_vec());
                o[s + 6..s + 8].copy_from_slice(&SHN_ABS.to_le_bytes());
            }
        }
    }
    out
}

/// Decodes `stream` (COM2's bytes) with the defmt table of `elf`.
pub fn decode_bytes(elf: &[u8], stream: &[u8]) -> Result<Decoded> {
    let fixed = sanitize_elf(elf);
    let elf = fixed.as_deref().unwrap_or(elf);
    let table = Table::parse(elf)
        .context("reading the defmt table")?
        .ok_or_else(|| anyhow!("the image has no .defmt section (is defmt linked in?)"))?;
    let locations = table.get_locations(elf).unwrap_or_default();
    let mut out = Decoded::default();
    let mut dec = table.new_stream_decoder();
    dec.received(stream);
    loop {
        match dec.decode() {
            Ok(frame) => {
                let mut line = frame.display(false).to_string();
                if let Some(loc) = locations.get(&frame.index()) {
                    line.push_str(&format!(" ({}:{})", loc.file.display(), loc.line));
                }
                out.lines.push(line);
            }
            Err(DecodeError::UnexpectedEof) => break,
            Err(DecodeError::Malformed) => {
                out.malformed += 1;
                // The rzcobs decoder drops the bad frame and goes on; the raw one cannot.
                if matches!(table.encoding(), Encoding::Raw) {
                    break;
                }
            }
        }
    }
    out.trailing_bytes = stream.iter().rposition(|&b| b == 0).map_or(stream.len(), |i| stream.len() - i - 1);
    Ok(out)
}

/// Decodes the COM2 capture `com2` with `elf`.
pub fn decode_file(elf: &Path, com2: &Path) -> Result<Decoded> {
    let e = std::fs::read(elf).with_context(|| format!("reading {}", elf.display()))?;
    let s = std::fs::read(com2).with_context(|| format!("reading {}", com2.display()))?;
    decode_bytes(&e, &s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF64 with `.defmt` (section 1) holding a linker-script symbol and a
    /// defmt JSON symbol.
    fn synthetic_elf() -> (Vec<u8>, usize) {
        let shstr = b"\0.defmt\0.symtab\0.strtab\0.shstrtab\0";
        let strtab = b"\0__kernel_start\0{\"package\":\"x\"}\0";
        let mut e = vec![0u8; 64];
        e[0..6].copy_from_slice(b"\x7fELF\x02\x01");
        let shstr_off = e.len();
        e.extend_from_slice(shstr);
        let str_off = e.len();
        e.extend_from_slice(strtab);
        let sym_off = e.len();
        let mut sym = |name: u32, shndx: u16| {
            let mut s = [0u8; 24];
            s[0..4].copy_from_slice(&name.to_le_bytes());
            s[6..8].copy_from_slice(&shndx.to_le_bytes());
            e.extend_from_slice(&s);
        };
        sym(0, 0);
        sym(1, 1); // __kernel_start in .defmt
        sym(16, 1); // {"package":"x"}
        let shoff = e.len();
        let mut sec = |name: u32, ty: u32, off: usize, size: usize, link: u32, entsize: u64| {
            let mut h = [0u8; 64];
            h[0..4].copy_from_slice(&name.to_le_bytes());
            h[4..8].copy_from_slice(&ty.to_le_bytes());
            h[0x18..0x20].copy_from_slice(&(off as u64).to_le_bytes());
            h[0x20..0x28].copy_from_slice(&(size as u64).to_le_bytes());
            h[0x28..0x2C].copy_from_slice(&link.to_le_bytes());
            h[0x38..0x40].copy_from_slice(&entsize.to_le_bytes());
            e.extend_from_slice(&h);
        };
        sec(0, 0, 0, 0, 0, 0);
        sec(1, 1, 0, 0, 0, 0); // .defmt
        sec(8, 2, sym_off, 72, 3, 24); // .symtab
        sec(16, 3, str_off, strtab.len(), 0, 0); // .strtab
        sec(24, 3, shstr_off, shstr.len(), 0, 0); // .shstrtab
        e[0x28..0x30].copy_from_slice(&(shoff as u64).to_le_bytes());
        e[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        e[0x3C..0x3E].copy_from_slice(&5u16.to_le_bytes());
        e[0x3E..0x40].copy_from_slice(&4u16.to_le_bytes());
        (e, sym_off)
    }

    #[test]
    fn stray_linker_symbols_in_defmt_are_made_absolute() {
        let (elf, sym_off) = synthetic_elf();
        let fixed = sanitize_elf(&elf).expect("a symbol to fix");
        let shndx = |e: &[u8], i: usize| u16::from_le_bytes([e[sym_off + 24 * i + 6], e[sym_off + 24 * i + 7]]);
        assert_eq!(shndx(&fixed, 1), 0xFFF1, "__kernel_start becomes absolute");
        assert_eq!(shndx(&fixed, 2), 1, "defmt's own symbol stays");
        assert_eq!(sanitize_elf(&fixed), None, "nothing left to fix");
        assert_eq!(sanitize_elf(b"not an elf"), None);
    }

    #[test]
    fn elf_without_defmt_is_an_error() {
        assert!(decode_bytes(b"not an elf", &[]).is_err());
    }
}
