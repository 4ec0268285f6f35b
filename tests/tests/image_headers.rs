//! The image's boot headers, read from the ELF file itself: the PVH note that QEMU
//! `-kernel`, Firecracker and Cloud Hypervisor use, and the multiboot2 header that GRUB
//! uses (and no multiboot1 header, which would take QEMU's PVH path away).

use anyhow::{Context, Result, bail, ensure};

/// `XEN_ELFNOTE_PHYS32_ENTRY` (xen/include/public/elfnote.h).
const XEN_ELFNOTE_PHYS32_ENTRY: u32 = 18;
/// Multiboot2 header magic (Multiboot2 spec §3.1.1).
const MB2_MAGIC: u32 = 0xE852_50D6;
/// Multiboot1 header magic (Multiboot spec §3.1.1).
const MB1_MAGIC: u32 = 0x1BAD_B002;
/// PT_LOAD / PT_NOTE program header types (ELF gABI).
const PT_LOAD: u32 = 1;
const PT_NOTE: u32 = 4;

fn u16_at(b: &[u8], o: usize) -> Result<u16> {
    Ok(u16::from_le_bytes(b.get(o..o + 2).context("ELF truncated")?.try_into()?))
}
fn u32_at(b: &[u8], o: usize) -> Result<u32> {
    Ok(u32::from_le_bytes(b.get(o..o + 4).context("ELF truncated")?.try_into()?))
}
fn u64_at(b: &[u8], o: usize) -> Result<u64> {
    Ok(u64::from_le_bytes(b.get(o..o + 8).context("ELF truncated")?.try_into()?))
}

struct Phdr {
    kind: u32,
    offset: u64,
    paddr: u64,
    filesz: u64,
}

/// The ELF64 entry point and program headers.
fn program_headers(elf: &[u8]) -> Result<(u64, Vec<Phdr>)> {
    ensure!(elf.get(0..4) == Some(b"\x7fELF".as_slice()), "not an ELF file");
    ensure!(elf[4] == 2 && elf[5] == 1, "not ELF64 little-endian");
    let entry = u64_at(elf, 0x18)?;
    let phoff = u64_at(elf, 0x20)? as usize;
    let phentsize = u16_at(elf, 0x36)? as usize;
    let phnum = u16_at(elf, 0x38)? as usize;
    let mut out = Vec::new();
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        out.push(Phdr {
            kind: u32_at(elf, o)?,
            offset: u64_at(elf, o + 8)?,
            paddr: u64_at(elf, o + 0x18)?,
            filesz: u64_at(elf, o + 0x20)?,
        });
    }
    Ok((entry, out))
}

/// Every (owner, type, desc) note in the PT_NOTE segments.
fn notes(elf: &[u8], phdrs: &[Phdr]) -> Result<Vec<(String, u32, Vec<u8>)>> {
    let mut out = Vec::new();
    for p in phdrs.iter().filter(|p| p.kind == PT_NOTE) {
        let seg = elf.get(p.offset as usize..(p.offset + p.filesz) as usize).context("note segment outside file")?;
        let mut o = 0;
        while o + 12 <= seg.len() {
            let (namesz, descsz, kind) = (u32_at(seg, o)? as usize, u32_at(seg, o + 4)? as usize, u32_at(seg, o + 8)?);
            let name_end = o + 12 + namesz;
            let desc = name_end.next_multiple_of(4);
            let name = seg.get(o + 12..name_end).context("note name truncated")?;
            let owner = String::from_utf8_lossy(name).trim_end_matches('\0').to_string();
            out.push((owner, kind, seg.get(desc..desc + descsz).context("note desc truncated")?.to_vec()));
            o = (desc + descsz).next_multiple_of(4);
        }
    }
    Ok(out)
}

#[test]
fn image_has_a_pvh_note_at_the_32_bit_entry_and_a_valid_multiboot2_header() -> Result<()> {
    let path = cadence_tests::image()?;
    let elf = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let (entry, phdrs) = program_headers(&elf)?;

    // PVH: a Xen note of type 18 whose 4-byte descriptor is the 32-bit entry point,
    // which must lie inside a loaded segment (QEMU loads PT_LOAD at p_paddr).
    let pvh: Vec<_> = notes(&elf, &phdrs)?
        .into_iter()
        .filter(|(owner, kind, _)| owner == "Xen" && *kind == XEN_ELFNOTE_PHYS32_ENTRY)
        .collect();
    ensure!(pvh.len() == 1, "expected one Xen PHYS32_ENTRY note, found {}", pvh.len());
    let desc = &pvh[0].2;
    ensure!(desc.len() == 4 || desc.len() == 8, "PVH entry note has a {}-byte descriptor", desc.len());
    let pvh_entry = u32_at(desc, 0)? as u64;
    ensure!(pvh_entry == entry, "PVH entry {pvh_entry:#x} differs from the ELF entry {entry:#x}");
    ensure!(
        phdrs.iter().any(|p| p.kind == PT_LOAD && (p.paddr..p.paddr + p.filesz).contains(&pvh_entry)),
        "PVH entry {pvh_entry:#x} is in no loaded segment"
    );

    // Multiboot2: magic, architecture 0 (i386 protected mode), header length, and a
    // checksum making the four fields sum to 0, 8-byte aligned in the first 32 KiB.
    let head = &elf[..elf.len().min(32 * 1024)];
    let mut found = None;
    for o in (0..head.len().saturating_sub(16)).step_by(8) {
        if u32_at(head, o)? == MB2_MAGIC {
            found = Some(o);
            break;
        }
    }
    let Some(o) = found else { bail!("no multiboot2 header in the first 32 KiB") };
    let (arch, len, sum) = (u32_at(head, o + 4)?, u32_at(head, o + 8)?, u32_at(head, o + 12)?);
    ensure!(arch == 0, "multiboot2 architecture {arch}, expected 0 (i386)");
    ensure!(len >= 16 && len % 8 == 0, "multiboot2 header length {len}");
    ensure!(MB2_MAGIC.wrapping_add(arch).wrapping_add(len).wrapping_add(sum) == 0, "multiboot2 checksum wrong");
    // The tag list ends with the end tag (type 0, size 8).
    let tags = elf.get(o + 16..o + len as usize).context("multiboot2 header runs past the file")?;
    ensure!(
        tags.len() >= 8 && tags[tags.len() - 8..] == [0, 0, 0, 0, 8, 0, 0, 0],
        "multiboot2 header lacks its end tag"
    );

    // No multiboot1 header: QEMU would take it over PVH (and refuse an ELF64).
    for o in (0..head.len().saturating_sub(4)).step_by(4) {
        ensure!(u32_at(head, o)? != MB1_MAGIC, "multiboot1 magic at file offset {o:#x}");
    }
    Ok(())
}
