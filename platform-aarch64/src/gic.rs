//! Just enough GICv3 for a private timer interrupt to wake `WFI`: the distributor's groups
//! enabled, this core's redistributor awake with one PPI enabled in group 1, and the CPU
//! interface (system registers) letting group 1 through at any priority. Interrupts stay
//! masked at PSTATE.I; nothing is ever acknowledged (see [`crate::timer`]).
//!
//! Facts (Arm GICv3/v4 Architecture Specification, IHI 0069H):
//! - GICD_CTLR at GICD + 0x0 (§12.9.4): with one security state (DS = 1, QEMU `virt`
//!   without `secure=on`) EnableGrp0 [0], EnableGrp1 [1], ARE [4]; in the non-secure view
//!   of two states EnableGrp1 [0], EnableGrp1A [1], ARE_NS [4]; writing 0x13 enables the
//!   non-secure group 1 and affinity routing either way. RWP [31] is set while a write
//!   takes effect (waited for, with a deadline).
//! - The redistributor region holds one frame per core (§12.10): RD_base (64 KiB) then
//!   SGI_base (64 KiB), plus two more 64 KiB frames when GICR_TYPER.VLPIS [1] is set;
//!   GICR_TYPER at RD_base + 0x8 has the core's affinity in [63:32] (Aff3.Aff2.Aff1.Aff0)
//!   and Last [4] on the region's last frame.
//! - GICR_WAKER at RD_base + 0x14 (§12.11.43): clear ProcessorSleep [1], then wait for
//!   ChildrenAsleep [2] to clear (deadline).
//! - SGI_base + 0x080 GICR_IGROUPR0, + 0x100 GICR_ISENABLER0 (bit per INTID 0–31),
//!   + 0x400 GICR_IPRIORITYR (a byte per INTID).
//! - ICC_SRE_EL1.SRE [0] = 1 selects the system-register interface; ICC_PMR_EL1 = 0xFF
//!   lets every priority through; ICC_IGRPEN1_EL1 [0] = 1 enables group 1 (§12.2).

use core::ptr::{read_volatile, write_volatile};

use crate::dt::Region;

const GICD_CTLR: usize = 0x0;
const GICD_CTLR_RWP: u32 = 1 << 31;
const GICD_CTLR_ENABLE: u32 = 1 << 0 | 1 << 1 | 1 << 4;
const GICR_TYPER: usize = 0x8;
const GICR_TYPER_LAST: u64 = 1 << 4;
const GICR_TYPER_VLPIS: u64 = 1 << 1;
const GICR_WAKER: usize = 0x14;
const WAKER_PROCESSOR_SLEEP: u32 = 1 << 1;
const WAKER_CHILDREN_ASLEEP: u32 = 1 << 2;
const SGI_BASE: usize = 0x1_0000;
const GICR_IGROUPR0: usize = SGI_BASE + 0x080;
const GICR_ISENABLER0: usize = SGI_BASE + 0x100;
const GICR_IPRIORITYR: usize = SGI_BASE + 0x400;
/// The priority the PPI gets (any value below the mask 0xFF passes).
const PRIORITY: u8 = 0x80;

/// Why the GIC could not be set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GicError {
    /// GICD_CTLR.RWP stayed set past its deadline.
    DistributorBusy,
    /// No redistributor frame has this core's affinity.
    NoRedistributor,
    /// GICR_WAKER.ChildrenAsleep stayed set past its deadline.
    RedistributorAsleep,
    /// The INTID is not a PPI (16–31).
    NotPpi,
}

impl core::fmt::Display for GicError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            GicError::DistributorBusy => "GICD_CTLR.RWP did not clear within its deadline",
            GicError::NoRedistributor => "no GICv3 redistributor frame matches this core's MPIDR",
            GicError::RedistributorAsleep => "GICR_WAKER.ChildrenAsleep did not clear within its deadline",
            GicError::NotPpi => "the timer's interrupt is not a PPI",
        })
    }
}

/// The affinity GICR_TYPER[63:32] holds for a core with this MPIDR_EL1
/// (Aff3 [39:32], Aff2 [23:16], Aff1 [15:8], Aff0 [7:0]).
pub const fn typer_affinity(mpidr: u64) -> u32 {
    ((mpidr >> 32 & 0xff) << 24 | (mpidr & 0xff_ffff)) as u32
}

/// Polls `cond` until it holds or `deadline_ticks` of the generic counter pass.
fn poll(deadline_ticks: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = crate::timer::counter().saturating_add(deadline_ticks);
    loop {
        if cond() {
            return true;
        }
        if crate::timer::counter() > end {
            return false;
        }
        core::hint::spin_loop();
    }
}

/// Enables the distributor (once, on the boot core). `deadline_ticks`: how long RWP may
/// stay set.
///
/// # Safety
/// `gicd` must be the GICv3 distributor from the tree, mapped as device memory.
pub unsafe fn init_distributor(gicd: Region, deadline_ticks: u64) -> Result<(), GicError> {
    let ctlr = (gicd.base as usize + GICD_CTLR) as *mut u32;
    // SAFETY: per the contract GICD_CTLR is mapped device memory.
    unsafe { write_volatile(ctlr, read_volatile(ctlr) | GICD_CTLR_ENABLE) };
    // SAFETY: as above.
    if poll(deadline_ticks, || unsafe { read_volatile(ctlr) } & GICD_CTLR_RWP == 0) {
        Ok(())
    } else {
        Err(GicError::DistributorBusy)
    }
}

/// Wakes this core's redistributor, enables PPI `intid` in group 1 and opens the CPU
/// interface. Returns the redistributor frame's base.
///
/// # Safety
/// `gicr` must be the tree's redistributor region, mapped as device memory; to be called
/// on the core whose MPIDR is `mpidr`.
pub unsafe fn init_core(gicr: Region, mpidr: u64, intid: u32, deadline_ticks: u64) -> Result<u64, GicError> {
    if !(16..32).contains(&intid) {
        return Err(GicError::NotPpi);
    }
    let want = typer_affinity(mpidr);
    let mut frame = gicr.base;
    let rd = loop {
        if frame.saturating_add(0x2_0000) > gicr.end() {
            return Err(GicError::NoRedistributor);
        }
        // SAFETY: `frame` lies inside the mapped redistributor region (checked above).
        let typer = unsafe { read_volatile((frame as usize + GICR_TYPER) as *const u64) };
        if (typer >> 32) as u32 == want {
            break frame as usize;
        }
        if typer & GICR_TYPER_LAST != 0 {
            return Err(GicError::NoRedistributor);
        }
        frame += if typer & GICR_TYPER_VLPIS != 0 { 0x4_0000 } else { 0x2_0000 };
    };
    let waker = (rd + GICR_WAKER) as *mut u32;
    // SAFETY: `rd` is this core's frame inside the mapped region; the writes below touch
    // only its own registers.
    unsafe { write_volatile(waker, read_volatile(waker) & !WAKER_PROCESSOR_SLEEP) };
    // SAFETY: as above.
    if !poll(deadline_ticks, || unsafe { read_volatile(waker) } & WAKER_CHILDREN_ASLEEP == 0) {
        return Err(GicError::RedistributorAsleep);
    }
    let bit = 1u32 << intid;
    let sgi = 1u32 << crate::fence::FENCE_SGI;
    // SAFETY: as above: group 1, priority, then enable (GICR_ISENABLER0 is write-1-to-set);
    // the fence SGI in group 0 (FIQ) at the highest priority (`crate::fence`).
    unsafe {
        let group = (rd + GICR_IGROUPR0) as *mut u32;
        write_volatile(group, (read_volatile(group) | bit) & !sgi);
        write_volatile((rd + GICR_IPRIORITYR + intid as usize) as *mut u8, PRIORITY);
        write_volatile((rd + GICR_IPRIORITYR + crate::fence::FENCE_SGI as usize) as *mut u8, 0);
        write_volatile((rd + GICR_ISENABLER0) as *mut u32, bit | sgi);
    }
    // SAFETY: the CPU interface's system registers of this core; SRE first, then the
    // priority mask and the group enable, each made visible with an ISB.
    unsafe {
        core::arch::asm!(
            "mrs {t}, icc_sre_el1",
            "orr {t}, {t}, #1",
            "msr icc_sre_el1, {t}",
            "isb",
            "mov {t}, #0xff",
            "msr icc_pmr_el1, {t}",
            "mov {t}, #1",
            "msr icc_igrpen1_el1, {t}",
            "msr icc_igrpen0_el1, {t}",
            "isb",
            t = out(reg) _,
            options(nomem, nostack)
        );
    }
    Ok(rd as u64)
}

/// MPIDR_EL1 of this core.
pub fn mpidr() -> u64 {
    let v: u64;
    // SAFETY: reading MPIDR_EL1 has no side effects.
    unsafe { core::arch::asm!("mrs {}, mpidr_el1", out(reg) v, options(nomem, nostack)) };
    v
}
