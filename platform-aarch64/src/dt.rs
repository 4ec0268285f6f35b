//! The device tree as the source of the machine's facts: RAM, the console UART, the GICv3,
//! the generic timer, the PSCI conduit, the PCIe ECAM window and the cores.
//!
//! The blob is parsed here, not by a crate: the `fdt` crate (0.1.5, the common choice)
//! panics on blobs it does not expect (`expect("/chosen is required")`, unsupported cell
//! sizes) and failed to find `/chosen` in the tree QEMU hands over with `-dtb` (fixed up
//! in place by libfdt); a tree from the loader is input, and input must not panic the
//! image. This walker checks every offset and length once (`Tree::new`, `Tree::walk`)
//! and reads only what the image needs; its unit tests run on QEMU's own trees.
//!
//! Facts (Devicetree Specification v0.4, §3 and §5; Linux bindings): the blob's header
//! carries its `totalsize` (§5.2); `/memory` nodes' `reg` give RAM; `/chosen/stdout-path`
//! names the console (§3.6), an `arm,pl011` on `virt`; the interrupt controller
//! `arm,gic-v3` has `reg` = distributor, then redistributor region(s)
//! (interrupt-controller/arm,gic-v3.yaml); `arm,armv8-timer` may carry `clock-frequency`,
//! which then overrides CNTFRQ_EL0 (timer/arm,arch_timer.yaml: "present only where
//! necessary to work around broken firmware"), and 0 there is refused; `arm,psci-0.2` /
//! `arm,psci-1.0` / `arm,psci` has `method` = `"hvc"` or `"smc"` (arm/psci.yaml);
//! `pci-host-ecam-generic` has `reg` = the ECAM window, one MiB per bus, and `bus-range`
//! (pci/host-generic-pci.yaml); `/cpus/cpu@N` `reg` is the core's MPIDR affinity, the
//! target of PSCI `CPU_ON`.
//!
//! Every fact the image needs that is missing is a [`DtError`], reported as an `error:`
//! line with exit status 35 ([`crate::exit::ExitCode::ConfigError`]), never a hang.

use core::fmt;

/// Most cores the platform starts.
pub const MAX_CPUS: usize = 16;

/// A physical address range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Region {
    pub base: u64,
    pub size: u64,
}

impl Region {
    /// One past the last byte (saturating).
    pub const fn end(&self) -> u64 {
        self.base.saturating_add(self.size)
    }
}

/// How PSCI calls reach the firmware.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PsciMethod {
    /// `HVC #0` (a hypervisor, or QEMU under TCG without EL2/EL3 firmware).
    Hvc,
    /// `SMC #0` (EL3 firmware).
    Smc,
}

impl PsciMethod {
    /// The device tree's word for it.
    pub const fn name(self) -> &'static str {
        match self {
            PsciMethod::Hvc => "hvc",
            PsciMethod::Smc => "smc",
        }
    }
}

/// What the image needs to know about the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// The blob itself (kept out of every allocation).
    pub dtb: Region,
    /// The first RAM region.
    pub memory: Region,
    /// The console UART (`arm,pl011`).
    pub uart: Region,
    /// GICv3 distributor (GICD).
    pub gicd: Region,
    /// GICv3 redistributors (GICR), the first region.
    pub gicr: Region,
    /// The timer node's `clock-frequency`, when present (it then overrides CNTFRQ_EL0).
    pub timer_hz: Option<u64>,
    /// The virtual timer's interrupt ID: the third `interrupts` entry of the timer node
    /// (secure, non-secure physical, virtual, hypervisor; cells `<type number flags>`,
    /// type 1 = PPI, INTID = 16 + number).
    pub timer_intid: u32,
    /// The PSCI conduit.
    pub psci: PsciMethod,
    /// The PCIe ECAM window.
    pub ecam: Region,
    /// The first and last bus of the ECAM window.
    pub buses: (u8, u8),
    /// The host bridge's 32-bit memory window (`ranges` space code 0b10), CPU addresses;
    /// size 0 when absent.
    pub mmio32: Region,
    /// Bus address minus CPU address of that window (0 on `virt`: identity).
    pub mmio32_bus_offset: u64,
    /// The cores' MPIDR affinities, in tree order (`cpus[..ncpus]`).
    pub cpus: [u64; MAX_CPUS],
    pub ncpus: usize,
}

/// A device tree that lacks what the image needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DtError {
    /// Not a flattened device tree (bad magic, version or size).
    Header,
    NoMemory,
    /// No `stdout-path` to an `arm,pl011`, and no `arm,pl011` node.
    NoConsole,
    NoGicV3,
    NoTimer,
    /// The timer node says `clock-frequency = <0>`.
    TimerFrequencyZero,
    NoPsci,
    /// `method` is neither `"hvc"` nor `"smc"`.
    PsciMethod,
    NoPcie,
    NoCpus,
}

impl fmt::Display for DtError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DtError::Header => "the device tree is not a valid flattened device tree (x0 at entry)",
            DtError::NoMemory => "the device tree has no /memory node with a reg",
            DtError::NoConsole => "the device tree names no arm,pl011 console (chosen/stdout-path)",
            DtError::NoGicV3 => "the device tree has no arm,gic-v3 interrupt controller with GICD and GICR",
            DtError::NoTimer => "the device tree has no arm,armv8-timer node with its four PPIs",
            DtError::TimerFrequencyZero => "the device tree's arm,armv8-timer says clock-frequency = 0",
            DtError::NoPsci => "the device tree has no PSCI node (arm,psci-1.0 / arm,psci-0.2)",
            DtError::PsciMethod => "the device tree's PSCI method is neither hvc nor smc",
            DtError::NoPcie => "the device tree has no pci-host-ecam-generic PCIe node with an ECAM reg",
            DtError::NoCpus => "the device tree lists no /cpus/cpu@N with a reg",
        })
    }
}

/// FDT header magic (Devicetree Specification v0.4 §5.2).
const FDT_MAGIC: u32 = 0xd00d_feed;
/// Structure block tokens (§5.4.1).
const FDT_BEGIN_NODE: u32 = 1;
const FDT_END_NODE: u32 = 2;
const FDT_PROP: u32 = 3;
const FDT_NOP: u32 = 4;
const FDT_END: u32 = 9;
/// Deepest node nesting followed (virt's deepest is 4: /cpus/cpu-map/socket0/cluster0).
const MAX_DEPTH: usize = 16;

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

/// A validated blob: the structure and strings blocks (§5.2, §5.4, §5.5).
#[derive(Debug, Clone, Copy)]
struct Tree<'a> {
    structs: &'a [u8],
    strings: &'a [u8],
}

impl<'a> Tree<'a> {
    fn new(blob: &'a [u8]) -> Result<Tree<'a>, DtError> {
        let field = |i: usize| be32(blob, 4 * i).map(|v| v as usize).ok_or(DtError::Header);
        if field(0)? != FDT_MAGIC as usize || field(1)? > blob.len() || field(6)? < 16 {
            // magic, totalsize, last_comp_version <= 16 (version 17 is what loaders write)
            return Err(DtError::Header);
        }
        let total = field(1)?;
        let (off_struct, off_strings, size_strings, size_struct) = (field(2)?, field(3)?, field(8)?, field(9)?);
        let block = |off: usize, size: usize| {
            off.checked_add(size).filter(|&e| e <= total).and_then(|e| blob.get(off..e)).ok_or(DtError::Header)
        };
        Ok(Tree { structs: block(off_struct, size_struct)?, strings: block(off_strings, size_strings)? })
    }

    fn string(&self, off: usize) -> Option<&'a str> {
        let s = self.strings.get(off..)?;
        let n = s.iter().position(|&b| b == 0)?;
        core::str::from_utf8(&s[..n]).ok()
    }

    /// Walks the structure block, calling `f` for every event; stops at `FDT_END`, at a
    /// malformed token (an error) or at nesting deeper than [`MAX_DEPTH`] (an error).
    fn walk(&self, mut f: impl FnMut(Event<'a>)) -> Result<(), DtError> {
        let b = self.structs;
        let mut at = 0usize;
        let mut depth = 0usize;
        let align4 = |n: usize| n.checked_add(3).map(|n| n & !3).ok_or(DtError::Header);
        loop {
            let token = be32(b, at).ok_or(DtError::Header)?;
            at += 4;
            match token {
                FDT_BEGIN_NODE => {
                    let rest = b.get(at..).ok_or(DtError::Header)?;
                    let n = rest.iter().position(|&c| c == 0).ok_or(DtError::Header)?;
                    let name = core::str::from_utf8(&rest[..n]).map_err(|_| DtError::Header)?;
                    at = align4(at + n + 1)?;
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(DtError::Header);
                    }
                    f(Event::Begin { depth, name });
                }
                FDT_END_NODE => {
                    if depth == 0 {
                        return Err(DtError::Header);
                    }
                    f(Event::End { depth });
                    depth -= 1;
                }
                FDT_PROP => {
                    let len = be32(b, at).ok_or(DtError::Header)? as usize;
                    let nameoff = be32(b, at + 4).ok_or(DtError::Header)? as usize;
                    at += 8;
                    let value = at.checked_add(len).and_then(|e| b.get(at..e)).ok_or(DtError::Header)?;
                    at = align4(at + len)?;
                    let name = self.string(nameoff).ok_or(DtError::Header)?;
                    f(Event::Prop { depth, name, value });
                }
                FDT_NOP => {}
                FDT_END => return if depth == 0 { Ok(()) } else { Err(DtError::Header) },
                _ => return Err(DtError::Header),
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Event<'a> {
    Begin { depth: usize, name: &'a str },
    Prop { depth: usize, name: &'a str, value: &'a [u8] },
    End { depth: usize },
}

/// Whether a `compatible` value (NUL-separated strings) lists `what`.
fn compatible(value: &[u8], what: &str) -> bool {
    value.split(|&b| b == 0).any(|s| s == what.as_bytes())
}

/// A string property's value without its NUL.
fn string(value: &[u8]) -> Option<&str> {
    core::str::from_utf8(value.strip_suffix(&[0]).unwrap_or(value)).ok()
}

/// A number of `cells` 32-bit cells (1 or 2) at `value[at..]`.
fn cells(value: &[u8], at: usize, cells: u32) -> Option<u64> {
    match cells {
        1 => be32(value, at).map(u64::from),
        2 => Some(u64::from(be32(value, at)?) << 32 | u64::from(be32(value, at + 4)?)),
        _ => None,
    }
}

/// Entry `i` of a `reg` property under a parent with `(address, size)` cells.
fn reg(value: &[u8], i: usize, (ac, sc): (u32, u32)) -> Option<Region> {
    let stride = 4 * (ac + sc) as usize;
    let at = i.checked_mul(stride)?;
    Some(Region {
        base: cells(value, at, ac)?,
        size: if sc == 0 { 0 } else { cells(value, at + 4 * ac as usize, sc)? },
    })
}

/// The first 32-bit memory window of a PCI host bridge's `ranges` (PCI Bus Binding to
/// IEEE 1275, §2.2.1.1: a child address is three cells, `phys.hi` with the space code in
/// bits [25:24], 0b10 = 32-bit memory, then the 64-bit bus address; then the parent's
/// address and the size): the CPU region and bus − CPU offset.
fn mmio32_window(ranges: &[u8], (child_ac, sc): (u32, u32), parent_ac: u32) -> Option<(Region, u64)> {
    if child_ac != 3 {
        return None;
    }
    let stride = 4 * (child_ac + parent_ac + sc) as usize;
    let mut at = 0;
    while at + stride <= ranges.len() {
        let hi = be32(ranges, at)?;
        let bus = cells(ranges, at + 4, 2)?;
        let cpu = cells(ranges, at + 12, parent_ac)?;
        let size = cells(ranges, at + 12 + 4 * parent_ac as usize, sc)?;
        if hi >> 24 & 3 == 0b10 && size > 0 {
            return Some((Region { base: cpu, size }, bus.wrapping_sub(cpu)));
        }
        at += stride;
    }
    None
}

/// One open node while walking: its name, the properties the facts need, and the cells
/// its children's `reg` use.
#[derive(Debug, Clone, Copy, Default)]
struct Frame<'a> {
    name: &'a str,
    compatible: &'a [u8],
    reg: &'a [u8],
    device_type: &'a [u8],
    method: &'a [u8],
    bus_range: &'a [u8],
    clock_frequency: Option<&'a [u8]>,
    interrupts: &'a [u8],
    ranges: &'a [u8],
    /// `#address-cells` / `#size-cells` for this node's children (§2.3.5: default 2 and 1).
    cells: (u32, u32),
}

/// The `stdout-path` of `/chosen`, without its `:options`, resolved through `/aliases`.
fn stdout_path<'a>(tree: &Tree<'a>) -> Result<Option<&'a str>, DtError> {
    let mut path: Option<&'a str> = None;
    let mut in_node = (false, false); // (/chosen, /aliases): depth 2, the root is depth 1
    tree.walk(|e| match e {
        Event::Begin { depth: 2, name } => in_node = (name == "chosen", name == "aliases"),
        Event::Prop { depth: 2, name: "stdout-path", value } if in_node.0 => {
            path = string(value).map(|p| p.split(':').next().unwrap_or(p));
        }
        _ => {}
    })?;
    let Some(p) = path else { return Ok(None) };
    if p.starts_with('/') {
        return Ok(Some(p));
    }
    let mut resolved = None;
    tree.walk(|e| match e {
        Event::Begin { depth: 2, name } => in_node = (false, name == "aliases"),
        Event::Prop { depth: 2, name, value } if in_node.1 && name == p => resolved = string(value),
        _ => {}
    })?;
    Ok(resolved)
}

/// Whether the open nodes below the root, `stack[2..=depth]`, spell `path` (`/a/b`).
fn path_is(stack: &[Frame<'_>], depth: usize, path: &str) -> bool {
    let mut parts = path.split('/').filter(|p| !p.is_empty());
    stack.get(2..=depth).is_some_and(|open| open.iter().all(|f| parts.next() == Some(f.name))) && parts.next().is_none()
}

/// What a walk has found so far.
#[derive(Debug, Default)]
struct Found {
    memory: Option<Region>,
    stdout: Option<Region>,
    first_pl011: Option<Region>,
    gic: Option<(Region, Region)>,
    timer: Option<(Option<u64>, Option<u32>)>,
    psci: Option<Result<PsciMethod, DtError>>,
    pcie: Option<(Region, (u8, u8), Region, u64)>,
    cpus: [u64; MAX_CPUS],
    ncpus: usize,
}

fn find(tree: &Tree<'_>) -> Result<Found, DtError> {
    let stdout = stdout_path(tree)?;
    // stack[0] stands for the root's parent; the root node is depth 1 (§5.4.1: the
    // structure block opens with the root's FDT_BEGIN_NODE, whose name is empty).
    let mut stack = [Frame::default(); MAX_DEPTH + 1];
    stack[0].cells = (2, 1);
    let mut found = Found::default();
    tree.walk(|e| match e {
        Event::Begin { depth, name } => {
            stack[depth] = Frame { name, cells: (2, 1), ..Frame::default() };
        }
        Event::Prop { depth, name, value } => {
            let f = &mut stack[depth];
            match name {
                "compatible" => f.compatible = value,
                "reg" => f.reg = value,
                "device_type" => f.device_type = value,
                "method" => f.method = value,
                "bus-range" => f.bus_range = value,
                "clock-frequency" => f.clock_frequency = Some(value),
                "interrupts" => f.interrupts = value,
                "ranges" => f.ranges = value,
                "#address-cells" => f.cells.0 = be32(value, 0).unwrap_or(2),
                "#size-cells" => f.cells.1 = be32(value, 0).unwrap_or(1),
                _ => {}
            }
        }
        Event::End { depth } => {
            let (f, parent) = (stack[depth], stack[depth - 1]);
            let reg0 = reg(f.reg, 0, parent.cells);
            let is = |c: &str| compatible(f.compatible, c);
            if depth == 2 && (f.device_type == b"memory\0" || f.name.split('@').next() == Some("memory")) {
                found.memory = found.memory.or(reg0.filter(|r| r.size > 0));
            }
            if is("arm,pl011") {
                found.first_pl011 = found.first_pl011.or(reg0);
                if stdout.is_some_and(|p| path_is(&stack, depth, p)) {
                    found.stdout = reg0;
                }
            }
            if is("arm,gic-v3")
                && let (Some(d), Some(r)) = (reg0, reg(f.reg, 1, parent.cells))
            {
                found.gic = found.gic.or(Some((d, r)));
            }
            if is("arm,armv8-timer") {
                let hz = f.clock_frequency.and_then(|v| cells(v, 0, if v.len() == 8 { 2 } else { 1 }));
                // Third entry of three cells: bytes 24..36; type 1 (PPI).
                let intid = match (be32(f.interrupts, 24), be32(f.interrupts, 28)) {
                    (Some(1), Some(n)) if n < 16 => Some(16 + n),
                    _ => None,
                };
                found.timer = found.timer.or(Some((hz, intid)));
            }
            if is("arm,psci-1.0") || is("arm,psci-0.2") || is("arm,psci") {
                let m = match f.method {
                    b"hvc\0" => Ok(PsciMethod::Hvc),
                    b"smc\0" => Ok(PsciMethod::Smc),
                    _ => Err(DtError::PsciMethod),
                };
                found.psci = found.psci.or(Some(m));
            }
            if is("pci-host-ecam-generic")
                && let Some(ecam) = reg0.filter(|r| r.size > 0)
            {
                let buses = match (be32(f.bus_range, 0), be32(f.bus_range, 4)) {
                    (Some(a), Some(b)) => (a.min(255) as u8, b.min(255) as u8),
                    _ => (0, ((ecam.size >> 20).clamp(1, 256) - 1) as u8),
                };
                let (win, off) = mmio32_window(f.ranges, f.cells, parent.cells.0).unwrap_or_default();
                found.pcie = found.pcie.or(Some((ecam, buses, win, off)));
            }
            if depth == 3
                && parent.name == "cpus"
                && (f.device_type == b"cpu\0" || f.name.split('@').next() == Some("cpu"))
                && let Some(mpidr) = cells(f.reg, 0, parent.cells.0)
                && found.ncpus < MAX_CPUS
            {
                found.cpus[found.ncpus] = mpidr;
                found.ncpus += 1;
            }
        }
    })?;
    Ok(found)
}

/// The console UART alone, so that a tree lacking something else can still be reported.
pub fn console(blob: &[u8]) -> Option<Region> {
    let f = find(&Tree::new(blob).ok()?).ok()?;
    f.stdout.or(f.first_pl011)
}

/// `/chosen/bootargs` (QEMU's `-append`), if any.
pub fn bootargs(blob: &[u8]) -> Option<&str> {
    let tree = Tree::new(blob).ok()?;
    let (mut in_chosen, mut args) = (false, None);
    tree.walk(|e| match e {
        Event::Begin { depth: 2, name } => in_chosen = name == "chosen",
        Event::Prop { depth: 2, name: "bootargs", value } if in_chosen => args = string(value),
        _ => {}
    })
    .ok()?;
    args
}

/// The value of property `name` of `/chosen`, if any.
pub fn chosen<'a>(blob: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let tree = Tree::new(blob).ok()?;
    let (mut in_chosen, mut found) = (false, None);
    tree.walk(|e| match e {
        Event::Begin { depth: 2, name } => in_chosen = name == "chosen",
        Event::Prop { depth: 2, name: n, value } if in_chosen && n == name => found = Some(value),
        _ => {}
    })
    .ok()?;
    found
}

/// The initial RAM disk the loader placed (`/chosen/linux,initrd-start` and
/// `linux,initrd-end`, each one or two cells — Linux's
/// Documentation/devicetree/bindings/chosen.txt; QEMU's `-initrd` fills them for an arm64
/// `Image`). `None` without one, or when the two do not make a range.
pub fn initrd(blob: &[u8]) -> Option<Region> {
    let num = |v: &[u8]| match v.len() {
        4 => cells(v, 0, 1),
        8 => cells(v, 0, 2),
        _ => None,
    };
    let start = num(chosen(blob, "linux,initrd-start")?)?;
    let end = num(chosen(blob, "linux,initrd-end")?)?;
    (end >= start).then_some(Region { base: start, size: end - start })
}

/// Reads the facts from a blob.
pub fn parse(blob: &[u8]) -> Result<Facts, DtError> {
    let tree = Tree::new(blob)?;
    let f = find(&tree)?;
    let dtb = Region { base: blob.as_ptr() as usize as u64, size: blob.len() as u64 };
    let memory = f.memory.ok_or(DtError::NoMemory)?;
    let uart = f.stdout.or(f.first_pl011).ok_or(DtError::NoConsole)?;
    let (gicd, gicr) = f.gic.ok_or(DtError::NoGicV3)?;
    let (timer_hz, timer_intid) = match f.timer.ok_or(DtError::NoTimer)? {
        (Some(0), _) => return Err(DtError::TimerFrequencyZero),
        (_, None) => return Err(DtError::NoTimer),
        (hz, Some(intid)) => (hz, intid),
    };
    let psci = f.psci.ok_or(DtError::NoPsci)??;
    let (ecam, buses, mmio32, mmio32_bus_offset) = f.pcie.ok_or(DtError::NoPcie)?;
    if f.ncpus == 0 {
        return Err(DtError::NoCpus);
    }
    Ok(Facts {
        dtb,
        memory,
        uart,
        gicd,
        gicr,
        timer_hz,
        timer_intid,
        psci,
        ecam,
        buses,
        mmio32,
        mmio32_bus_offset,
        cpus: f.cpus,
        ncpus: f.ncpus,
    })
}

/// The loader's blob at physical address `addr` (x0 at entry), sized by its header.
///
/// # Safety
/// `addr` must be the loader's device tree, identity-mapped, readable for its
/// `totalsize` bytes and never written while the image runs.
pub unsafe fn blob_at(addr: u64) -> Result<&'static [u8], DtError> {
    const HEADER: usize = 40;
    if addr == 0 || !addr.is_multiple_of(8) {
        return Err(DtError::Header);
    }
    let p = addr as usize as *const u8;
    // SAFETY: per the contract the header's 40 bytes are readable.
    let head = unsafe { core::slice::from_raw_parts(p, HEADER) };
    let total = u32::from_be_bytes([head[4], head[5], head[6], head[7]]) as usize;
    if !(HEADER..=16 << 20).contains(&total) {
        return Err(DtError::Header);
    }
    // SAFETY: per the contract the blob is readable for its totalsize bytes and stays
    // unchanged.
    Ok(unsafe { core::slice::from_raw_parts(p, total) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIRT: &[u8] = include_bytes!("../tests/fixtures/virt.dtb");

    #[test]
    fn reads_qemu_virt() {
        let f = parse(VIRT).expect("virt parses");
        assert_eq!(f.memory, Region { base: 0x4000_0000, size: 256 << 20 });
        assert_eq!(f.uart, Region { base: 0x0900_0000, size: 0x1000 });
        assert_eq!(f.gicd, Region { base: 0x0800_0000, size: 0x1_0000 });
        assert_eq!(f.gicr.base, 0x080a_0000);
        assert_eq!(f.timer_hz, None);
        assert_eq!(f.timer_intid, 27, "virtual timer: PPI 11");
        assert_eq!(f.psci, PsciMethod::Hvc);
        assert_eq!(f.ecam, Region { base: 0x40_1000_0000, size: 0x1000_0000 });
        assert_eq!(f.buses, (0, 255));
        assert_eq!(f.mmio32, Region { base: 0x1000_0000, size: 0x2eff_0000 });
        assert_eq!(f.mmio32_bus_offset, 0);
        assert_eq!(&f.cpus[..f.ncpus], &[0, 1]);
        assert_eq!(f.dtb.size as usize, VIRT.len());
        assert_eq!(console(VIRT), Some(f.uart));
        assert_eq!(bootargs(VIRT), None);
        assert_eq!(console(include_bytes!("../tests/fixtures/virt-no-psci.dtb")), Some(f.uart));
    }

    #[test]
    fn reads_the_initrd_the_command_line_and_the_rng_seed_from_chosen() {
        let t = include_bytes!("../tests/fixtures/virt-initrd.dtb");
        assert_eq!(initrd(t), Some(Region { base: 0x4800_0000, size: 10 }));
        assert_eq!(bootargs(t), Some("mode=boot"));
        assert_eq!(chosen(t, "rng-seed").map(<[u8]>::len), Some(32));
        assert_eq!(chosen(t, "no-such-property"), None);
        // QEMU's tree without -initrd names none.
        assert_eq!(initrd(VIRT), None);
        // Damaged trees give nothing or something, never a panic.
        for n in 0..t.len() {
            let _ = initrd(&t[..n]);
        }
    }

    #[test]
    fn refuses_trees_without_what_the_image_needs() {
        assert_eq!(parse(include_bytes!("../tests/fixtures/virt-no-psci.dtb")), Err(DtError::NoPsci));
        assert_eq!(parse(include_bytes!("../tests/fixtures/virt-no-pcie.dtb")), Err(DtError::NoPcie));
        assert_eq!(parse(include_bytes!("../tests/fixtures/virt-timer-0hz.dtb")), Err(DtError::TimerFrequencyZero));
        assert_eq!(parse(&VIRT[..100]), Err(DtError::Header));
        let mut bad = VIRT.to_vec();
        bad[0] ^= 0xff;
        assert_eq!(parse(&bad), Err(DtError::Header));
    }

    #[test]
    fn never_panics_on_a_damaged_tree() {
        // Every truncation and every single-byte change of QEMU's tree parses or is refused.
        for n in 0..VIRT.len() {
            let _ = parse(&VIRT[..n]);
        }
        let mut b = VIRT.to_vec();
        for i in 0..b.len() {
            for x in [0x01, 0xff] {
                b[i] ^= x;
                let _ = parse(&b);
                let _ = console(&b);
                b[i] ^= x;
            }
        }
    }
}
