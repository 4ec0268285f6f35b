//! Secondary cores: started with PSCI `CPU_ON`, each on its own stack, brought onto the
//! boot core's identity map and GIC set-up, then handed to the image's per-core function.
//!
//! The hand-over: the boot core fills the core's [`CoreBoot`] block (stack top, the MMU
//! registers, its index and MPIDR, the function) and cleans it to the point of coherency
//! (`DC CVAC` over its lines, then `DSB SY`: Arm ARM D7.5.9, data cache maintenance by
//! VA), because the new core reads it with its MMU and caches off, from memory, while
//! the boot core wrote it through its cache. The page tables need no cleaning: the boot
//! core wrote them before its own MMU was on. `CPU_ON`'s context ID is the block's
//! address; the entry code (`boot`'s `cadence_aarch64_secondary`) sets up FP/SIMD, the
//! stack and the vectors from it, and Rust code turns the MMU on.
//!
//! A core that does not check in before its deadline is reported and the run goes on
//! with the cores that did (issue 26, "Bad input").

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::dt::MAX_CPUS;
use crate::mmu::MmuRegs;
use crate::psci::{self, PsciError};

/// What a secondary core runs once it is set up: `f(index)`; it must not return.
pub type CoreMain = fn(usize) -> !;

/// The block a starting core reads (its address is `CPU_ON`'s context ID).
#[derive(Debug)]
#[repr(C, align(64))]
pub struct CoreBoot {
    /// Initial SP (offset 0: the entry code loads it).
    pub stack_top: u64,
    /// The exception stack's top (offset 8: the entry code puts it in TPIDR_EL1).
    pub exception_stack_top: u64,
    pub mmu: MmuRegs,
    pub index: u64,
    pub mpidr: u64,
    /// A [`CoreMain`] as an address.
    pub main: u64,
    /// The GIC's redistributor region and the timer's PPI, for the core's own set-up.
    pub gicr_base: u64,
    pub gicr_size: u64,
    pub timer_intid: u64,
    /// Counter ticks a GIC wait may take.
    pub gic_deadline: u64,
}

struct Block(UnsafeCell<CoreBoot>);

// SAFETY: block `i` is written by the boot core before `CPU_ON` for core `i` and only
// read afterwards (by core `i`).
unsafe impl Sync for Block {}

static BLOCKS: [Block; MAX_CPUS] = [const {
    Block(UnsafeCell::new(CoreBoot {
        stack_top: 0,
        exception_stack_top: 0,
        mmu: MmuRegs { mair: 0, tcr: 0, ttbr0: 0, sctlr: 0 },
        index: 0,
        mpidr: 0,
        main: 0,
        gicr_base: 0,
        gicr_size: 0,
        timer_intid: 0,
        gic_deadline: 0,
    }))
}; MAX_CPUS];

/// Bit `i`: core `i` reached its function (set by the core itself).
static ONLINE: AtomicU64 = AtomicU64::new(0);
/// Per core: why its own GIC set-up failed (0: it did not).
static GIC_FAILED: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

/// The outcome of starting one core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// `CPU_ON` succeeded and the core checked in.
    Online,
    /// `CPU_ON` failed.
    Refused(PsciError),
    /// `CPU_ON` succeeded but the core did not check in before the deadline.
    Silent,
}

unsafe extern "C" {
    /// The secondary entry in `boot` (x0 = the core's [`CoreBoot`]).
    fn cadence_aarch64_secondary();
}

/// Cleans `[addr, addr + len)` to the point of coherency.
fn clean_to_poc(addr: usize, len: usize) {
    const LINE: usize = 64; // the smallest line CTR_EL0.DminLine allows on Armv8 cores we meet; cleaning more often is harmless
    let mut a = addr & !(LINE - 1);
    while a < addr + len {
        // SAFETY: cleaning a line of mapped memory has no effect on its contents.
        unsafe { core::arch::asm!("dc cvac, {}", in(reg) a, options(nostack)) };
        a += LINE;
    }
    // SAFETY: a barrier.
    unsafe { core::arch::asm!("dsb sy", options(nostack)) };
}

/// Starts every core of `p.facts.cpus` but the calling one, each running `main(index)`,
/// and waits up to `deadline_ticks` for them to check in. Returns each core's outcome
/// (`None` for the boot core and unused slots).
pub fn start_secondaries(p: &crate::Platform, main: CoreMain, deadline_ticks: u64) -> [Option<Start>; MAX_CPUS] {
    let me = crate::gic::mpidr() & 0xff_00ff_ffff;
    let mut out = [None; MAX_CPUS];
    let gic_deadline = p.clock_ticks_ms(10);
    for i in 0..p.facts.ncpus {
        let mpidr = p.facts.cpus[i];
        if mpidr == me {
            continue;
        }
        let stack = crate::stack::secondary(i);
        let block = BLOCKS[i].0.get();
        // SAFETY: core `i` is not running (it is off until CPU_ON below), so the boot core
        // is the block's only user.
        unsafe {
            block.write(CoreBoot {
                stack_top: stack.top,
                exception_stack_top: stack.exception_top,
                mmu: p.mmu,
                index: i as u64,
                mpidr,
                main: main as usize as u64,
                gicr_base: p.facts.gicr.base,
                gicr_size: p.facts.gicr.size,
                timer_intid: u64::from(p.facts.timer_intid),
                gic_deadline,
            });
        }
        clean_to_poc(block as usize, core::mem::size_of::<CoreBoot>());
        let entry = cadence_aarch64_secondary as *const () as usize as u64;
        let r = psci::call(p.facts.psci, psci::CPU_ON, mpidr, entry, block as usize as u64);
        out[i] = Some(match psci::check(r) {
            Ok(_) => Start::Silent,
            Err(e) => Start::Refused(e),
        });
    }
    let end = crate::timer::counter().saturating_add(deadline_ticks);
    let want: u64 = out.iter().enumerate().filter(|(_, s)| **s == Some(Start::Silent)).map(|(i, _)| 1 << i).sum();
    while ONLINE.load(Ordering::Acquire) & want != want && crate::timer::counter() < end {
        core::hint::spin_loop();
    }
    let online = ONLINE.load(Ordering::Acquire);
    for (i, s) in out.iter_mut().enumerate() {
        if *s == Some(Start::Silent) && online & 1 << i != 0 {
            *s = Some(Start::Online);
        }
    }
    out
}

/// This core's MIDR_EL1 (Arm ARM D17.2.100: implementer, variant, part number, revision).
pub fn midr() -> u64 {
    let v: u64;
    // SAFETY: reading MIDR_EL1 has no side effects.
    unsafe { core::arch::asm!("mrs {}, midr_el1", out(reg) v, options(nomem, nostack)) };
    v
}

/// Whether core `index` checked in (the boot core never does: it was not started).
pub fn is_online(index: usize) -> bool {
    index < 64 && ONLINE.load(Ordering::Acquire) & 1 << index != 0
}

/// Why core `index`'s GIC set-up failed, if it did.
pub fn gic_error(index: usize) -> Option<crate::gic::GicError> {
    use crate::gic::GicError::*;
    match GIC_FAILED.get(index)?.load(Ordering::Acquire) {
        1 => Some(DistributorBusy),
        2 => Some(NoRedistributor),
        3 => Some(RedistributorAsleep),
        4 => Some(NotPpi),
        _ => None,
    }
}

/// The Rust side of a secondary core's entry: MMU on, GIC, check in, `main`.
#[unsafe(no_mangle)]
extern "C" fn cadence_aarch64_secondary_main(block: &CoreBoot) -> ! {
    // SAFETY: the boot core's identity map covers this core's code, stack and block, and
    // its tables were written before any MMU was on.
    unsafe { crate::mmu::enable(&block.mmu) };
    let index = block.index as usize;
    let gicr = crate::dt::Region { base: block.gicr_base, size: block.gicr_size };
    // SAFETY: the tree's redistributor region, mapped as device memory; this core's MPIDR.
    let gic = unsafe { crate::gic::init_core(gicr, block.mpidr, block.timer_intid as u32, block.gic_deadline) };
    if let Err(e) = gic {
        use crate::gic::GicError::*;
        let code = match e {
            DistributorBusy => 1,
            NoRedistributor => 2,
            RedistributorAsleep => 3,
            NotPpi => 4,
        };
        if let Some(f) = GIC_FAILED.get(index) {
            f.store(code, Ordering::Release);
        }
    }
    if index < 64 {
        ONLINE.fetch_or(1 << index, Ordering::AcqRel);
    }
    // SAFETY: `main` was stored from a `CoreMain` by `start_secondaries`.
    let main: CoreMain = unsafe { core::mem::transmute::<usize, CoreMain>(block.main as usize) };
    main(index)
}
