//! Building the aarch64 images for QEMU `virt` — the firmware (`cadence-firmware`'s
//! `cadence`, [`build_firmware`]) and the platform's boot check
//! (`cadence-platform-aarch64`'s `cadence-aarch64`, [`build`]): a nested cargo build for `aarch64-unknown-none`, then the linked ELF flattened
//! into the arm64 `Image` QEMU's `-kernel` and firmware loaders take (its header is the
//! first 64 bytes of the image; see `platform-aarch64/link.ld`).
//!
//! Flattening is done here rather than by `objcopy -O binary` so that no binutils are
//! needed: the `PT_LOAD` segments' file bytes are laid out at their physical addresses
//! relative to the lowest one (ELF-64 Object File Format, "Program header"); the
//! zero-fill (`.bss`, stacks) is left out, as the header's `image_size` covers it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

use crate::image::{Profile, cargo, defmt_log, target_dir, workspace_root};

/// The bare-metal target of the Arm image.
pub const TARGET: &str = "aarch64-unknown-none";
/// The package and binary of the Arm image.
pub const PACKAGE: &str = "cadence-platform-aarch64";
/// Its binary name (the ELF); the flat image is `<BIN>.img` beside it.
pub const BIN: &str = "cadence-aarch64";
/// The arm64 `Image` magic at offset 56 ("ARM\x64").
pub const IMAGE_MAGIC: [u8; 4] = *b"ARM\x64";

/// The firmware's package and binary (the same `cadence` as on x86_64).
pub const FIRMWARE_PACKAGE: &str = "cadence-firmware";
/// The firmware's binary name; the flat image is `<FIRMWARE_BIN>.img` beside the ELF.
pub const FIRMWARE_BIN: &str = "cadence";

/// Where the flat boot-check image of `profile` is.
pub fn image_path(profile: Profile) -> PathBuf {
    bin_image_path(BIN, profile)
}

/// Where the flat firmware image of `profile` is (its ELF, for defmt, is beside it
/// without the `.img`).
pub fn firmware_image_path(profile: Profile) -> PathBuf {
    bin_image_path(FIRMWARE_BIN, profile)
}

fn bin_image_path(bin: &str, profile: Profile) -> PathBuf {
    let dir = match profile {
        Profile::Release => "release",
        Profile::Debug => "debug",
    };
    target_dir().join(TARGET).join(dir).join(format!("{bin}.img"))
}

/// Builds the boot-check image and returns the flat `Image`'s path.
pub fn build(profile: Profile) -> Result<PathBuf> {
    build_bin(PACKAGE, BIN, profile)
}

/// Builds the firmware for aarch64 and returns the flat `Image`'s path.
pub fn build_firmware(profile: Profile) -> Result<PathBuf> {
    build_bin(FIRMWARE_PACKAGE, FIRMWARE_BIN, profile)
}

fn build_bin(package: &str, bin: &str, profile: Profile) -> Result<PathBuf> {
    crate::toolchain::ensure().context("provisioning the Rust toolchain")?;
    let mut cmd = cargo();
    cmd.current_dir(workspace_root())
        .args(["build", "-p", package, "--bin", bin, "--target", TARGET])
        .env("DEFMT_LOG", defmt_log());
    if profile == Profile::Release {
        cmd.arg("--release");
    }
    eprintln!("xtask: {cmd:?}");
    let st = cmd.status().with_context(|| format!("starting {cmd:?}"))?;
    if !st.success() {
        bail!("building the aarch64 image failed ({st})");
    }
    let out = bin_image_path(bin, profile);
    let elf = out.with_extension("");
    flatten_file(&elf, &out)?;
    Ok(out)
}

/// Flattens the ELF at `elf` into `out`.
pub fn flatten_file(elf: &Path, out: &Path) -> Result<()> {
    let bytes = std::fs::read(elf).with_context(|| format!("reading {}", elf.display()))?;
    let flat = flatten(&bytes).with_context(|| format!("flattening {}", elf.display()))?;
    if flat.get(56..60) != Some(&IMAGE_MAGIC[..]) {
        bail!("{} has no arm64 Image header (magic at offset 56)", elf.display());
    }
    std::fs::write(out, flat).with_context(|| format!("writing {}", out.display()))
}

fn u16_at(b: &[u8], at: usize) -> Result<u16> {
    let s = b.get(at..at + 2).context("ELF truncated")?;
    Ok(u16::from_le_bytes([s[0], s[1]]))
}

fn u32_at(b: &[u8], at: usize) -> Result<u32> {
    let s = b.get(at..at + 4).context("ELF truncated")?;
    Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

fn u64_at(b: &[u8], at: usize) -> Result<u64> {
    let s = b.get(at..at + 8).context("ELF truncated")?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_le_bytes(a))
}

/// The file bytes of an ELF-64 little-endian executable's `PT_LOAD` segments, laid out
/// at their physical addresses relative to the lowest loaded one.
pub fn flatten(elf: &[u8]) -> Result<Vec<u8>> {
    const PT_LOAD: u32 = 1;
    if elf.get(0..4) != Some(b"\x7fELF") || elf.get(4) != Some(&2) || elf.get(5) != Some(&1) {
        bail!("not a 64-bit little-endian ELF file");
    }
    let phoff = u64_at(elf, 0x20)? as usize;
    let phentsize = usize::from(u16_at(elf, 0x36)?);
    let phnum = usize::from(u16_at(elf, 0x38)?);
    let mut segs = Vec::new();
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if u32_at(elf, ph)? != PT_LOAD {
            continue;
        }
        let (offset, paddr, filesz) = (u64_at(elf, ph + 8)?, u64_at(elf, ph + 0x18)?, u64_at(elf, ph + 0x20)?);
        if filesz > 0 {
            segs.push((paddr, offset as usize, filesz as usize));
        }
    }
    let Some(base) = segs.iter().map(|s| s.0).min() else { bail!("no PT_LOAD segment with file contents") };
    let end = segs.iter().map(|s| (s.0 - base) as usize + s.2).max().unwrap_or(0);
    if end > 64 << 20 {
        bail!("the loaded segments span {end} bytes: not an image");
    }
    let mut out = vec![0u8; end];
    for (paddr, offset, filesz) in segs {
        let src = elf.get(offset..offset + filesz).context("segment outside the file")?;
        let at = (paddr - base) as usize;
        out[at..at + filesz].copy_from_slice(src);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF-64 with two PT_LOAD segments (one with a gap before it) and a
    /// zero-fill one.
    fn elf() -> Vec<u8> {
        let mut e = vec![0u8; 0x200];
        e[0..4].copy_from_slice(b"\x7fELF");
        e[4] = 2;
        e[5] = 1;
        e[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        e[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        e[0x38..0x3a].copy_from_slice(&3u16.to_le_bytes());
        let ph = |e: &mut Vec<u8>, i: usize, off: u64, paddr: u64, filesz: u64| {
            let at = 0x40 + i * 56;
            e[at..at + 4].copy_from_slice(&1u32.to_le_bytes());
            e[at + 8..at + 16].copy_from_slice(&off.to_le_bytes());
            e[at + 0x18..at + 0x20].copy_from_slice(&paddr.to_le_bytes());
            e[at + 0x20..at + 0x28].copy_from_slice(&filesz.to_le_bytes());
        };
        ph(&mut e, 0, 0x100, 0x4008_0000, 4);
        ph(&mut e, 1, 0x180, 0x4008_0010, 2);
        ph(&mut e, 2, 0x1f0, 0x4009_0000, 0);
        e[0x100..0x104].copy_from_slice(&[1, 2, 3, 4]);
        e[0x180..0x182].copy_from_slice(&[9, 8]);
        e
    }

    #[test]
    fn lays_segments_out_at_their_addresses() {
        let flat = flatten(&elf()).expect("flattens");
        assert_eq!(flat.len(), 0x12);
        assert_eq!(&flat[0..4], &[1, 2, 3, 4]);
        assert!(flat[4..0x10].iter().all(|&b| b == 0));
        assert_eq!(&flat[0x10..0x12], &[9, 8]);
    }

    #[test]
    fn refuses_what_is_not_an_elf() {
        assert!(flatten(b"MZ\0\0").is_err());
        let mut e = elf();
        e.truncate(0x60);
        assert!(flatten(&e).is_err());
    }
}
