//! The cores' stacks, each with a guard page below it and an exception stack below that:
//!
//! ```text
//! low  [ exception stack, 8 KiB ][ guard page, 4 KiB ][ stack ]  high
//! ```
//!
//! The boot core's is the linker script's `.stack` section (a 128 KiB stack); secondary
//! core `i`'s is `STACKS[i]` (a [`STACK_SIZE`] stack). `init` leaves every guard page
//! out of the identity map ([`crate::mmu::Tables::unmap_page`]), so a stack that
//! overflows faults on its guard instead of writing over the memory below it. The fault
//! cannot be taken on the spent stack, so every exception vector (`boot`) first moves SP
//! to the core's exception stack, whose top each core's entry code puts in TPIDR_EL1
//! (free for the OS at EL1, Arm ARM D17.2.140); nothing returns from a vector, so the
//! interrupted SP is not needed. [`owner_of_guard`] names the stack a faulting address
//! ran into, for the exception report.

use core::cell::UnsafeCell;

use crate::dt::MAX_CPUS;

/// Each secondary core's stack.
pub const STACK_SIZE: usize = 64 << 10;
/// The boot core's stack (the linker script's `.stack`; worker 0 runs on it).
pub const BOOT_STACK_SIZE: usize = 128 << 10;
/// Each core's exception stack: the vectors' report (`println!`) and the exit.
pub const EXCEPTION_STACK_SIZE: usize = 8 << 10;
/// The guard page between the two.
pub const GUARD: usize = 4 << 10;

#[repr(C, align(4096))]
struct Stack(UnsafeCell<[u8; EXCEPTION_STACK_SIZE + GUARD + STACK_SIZE]>);

// SAFETY: stack `i` is used only by core `i`, which the boot core starts once; the guard
// page is never accessed (unmapped).
unsafe impl Sync for Stack {}

static STACKS: [Stack; MAX_CPUS] =
    [const { Stack(UnsafeCell::new([0; EXCEPTION_STACK_SIZE + GUARD + STACK_SIZE])) }; MAX_CPUS];

unsafe extern "C" {
    /// The boot core's guard page (`link.ld`): its exception stack ends here.
    static __boot_stack_guard: u8;
}

/// Where one core's stacks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// The initial SP.
    pub top: u64,
    /// The guard page's address.
    pub guard: u64,
    /// The exception stack's top (TPIDR_EL1).
    pub exception_top: u64,
}

/// The boot core's stacks.
pub fn boot() -> Frame {
    // Only the symbol's address is taken.
    let guard = &raw const __boot_stack_guard as usize as u64;
    Frame { top: guard + (GUARD + BOOT_STACK_SIZE) as u64, guard, exception_top: guard }
}

/// Secondary core `i`'s stacks (`i < MAX_CPUS`).
pub fn secondary(i: usize) -> Frame {
    let base = STACKS[i].0.get() as usize as u64;
    let guard = base + EXCEPTION_STACK_SIZE as u64;
    Frame { top: guard + (GUARD + STACK_SIZE) as u64, guard, exception_top: guard }
}

/// Every guard page: the boot core's, then each secondary slot's.
pub fn guards() -> impl Iterator<Item = u64> {
    core::iter::once(boot().guard).chain((0..MAX_CPUS).map(|i| secondary(i).guard))
}

/// Whose stack `addr` overflowed into, when it lies in a guard page: `None` for the boot
/// core's, `Some(i)` for secondary slot `i`'s.
pub fn owner_of_guard(addr: u64) -> Option<Option<usize>> {
    let hit = |f: Frame| (f.guard..f.guard + GUARD as u64).contains(&addr);
    if hit(boot()) {
        return Some(None);
    }
    (0..MAX_CPUS).find(|&i| hit(secondary(i))).map(Some)
}
