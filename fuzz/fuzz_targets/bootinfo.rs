//! `platform::bootinfo`: the PVH `hvm_start_info` (with its module list and memory map) and
//! the multiboot2 information structure (tags) parsed out of arbitrary memory. The first
//! input byte picks the protocol, the rest is physical memory at 0x1000 (the structure at
//! its start; pointers in it may point anywhere). Never panics; whatever is returned stays
//! within the parser's fixed capacities, and parsing is a function of the bytes.
#![no_main]

use cadence_platform::bootinfo::{self, BootInfo, CMDLINE_MAX, MAX_MODULES, MAX_REGIONS};
use cadence_platform::physmem::PhysMem;

const BASE: u64 = 0x1000;

struct Mem<'a>(&'a [u8]);

impl PhysMem for Mem<'_> {
    fn read(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let off = usize::try_from(addr.checked_sub(BASE)?).ok()?;
        self.0.get(off..off.checked_add(len)?)
    }
}

fn check(info: &BootInfo) {
    assert!(info.regions().len() <= MAX_REGIONS);
    assert!(info.modules().len() <= MAX_MODULES);
    assert!(info.cmdline().len() <= CMDLINE_MAX);
    assert!(!info.cmdline().contains('\0'));
    let _ = info.usable_bytes();
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else { return };
    let mem = Mem(rest);
    let magic = if which & 1 == 0 { bootinfo::MB2_BOOTLOADER_MAGIC } else { bootinfo::PVH_MAGIC };
    let a = bootinfo::parse(magic, BASE, &mem);
    if let Ok(info) = &a {
        check(info);
    }
    let b = bootinfo::parse(magic, BASE, &mem);
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
    for r in [bootinfo::parse_pvh(BASE, &mem), bootinfo::parse_multiboot2(BASE, &mem)].iter().flatten() {
        check(r);
    }
});
