//! Symmetric multiprocessing: every enabled core of the ACPI MADT brought up, parked,
//! and handed work.
//!
//! # Using it from the firmware
//!
//! ```text
//! let cores = smp::start_aps(&platform, &SmpConfig::default())?; // BSP = CoreId(0)
//! for c in cores.iter().filter(|c| c.id() != CoreId::BSP && c.is_online()) {
//!     cores.run(c.id(), move |ctx| worker(ctx, /* captured, 'static */))?;
//! }
//! // …the BSP does its own share, then optionally:
//! cores.wait_idle(core, timeout)?;
//! ```
//!
//! Two steps, so that bring-up and the workload stay separate: `start_aps` starts
//! every AP and leaves it **parked** — halted with interrupts enabled, waking only for
//! the wake-up IPI (nothing spins, which matters under QEMU TCG with more vCPUs than
//! host cores). `Cores::run` puts a boxed closure in the core's
//! one-slot mailbox and sends the wake-up IPI; the AP runs it with interrupts disabled
//! (like the BSP's `kmain`) and parks again when it returns. A job that never returns
//! (a worker loop) keeps the core.
//!
//! # Bring-up (SDM vol. 3A §9.4.4 "MP Initialization Example")
//!
//! 1. The BSP selects x2APIC or xAPIC ([`crate::lapic`]), enables its own APIC and
//!    chooses the timer (TSC-deadline, or one-shot calibrated against the TSC).
//! 2. Cores come from the MADT's enabled entries (flags bit 0; hot-plug "online capable"
//!    entries are not there yet): the BSP first as core 0, then the others in table
//!    order. Each gets a [`CoreContext`] (`&'static`, reachable through its `GS` base:
//!    `current`), a 64 KiB stack with an unmapped guard page below it, a double-fault
//!    stack, and its own GDT and TSS.
//! 3. The real-mode trampoline (`trampoline.s`, linked at 0x8000 and loaded in the image
//!    by firmware/link.ld) is copied to 0x8000. For each AP, one at a time: mailboxes
//!    (CR3, stack, launch record) written, INIT (assert; de-assert in xAPIC mode), 10 ms,
//!    SIPI vector 0x08, 200 µs, a second SIPI only if the AP has not reached the
//!    trampoline, then a bounded wait (`SmpConfig::checkin_timeout_ms`) for its
//!    check-in. An AP that does not check in is sent INIT again (so it can never run
//!    later on a stack that was handed to the next one) and marked
//!    [`CoreState::Failed`]; the call still succeeds and the caller reports it.
//! 4. The AP goes 16 → 32 → 64-bit on the BSP's page tables, jumps to Rust, loads its
//!    GDT/TSS and the shared IDT, sets its `GS` base, enables its APIC and timer,
//!    checks in and parks.
//!
//! Every wait of the BSP halts on its own LAPIC timer in short steps (50 µs) rather than
//! spinning.
//!
//! Details of the steps above: the BSP enables its APIC with SVR = 0x1FF; the one-shot
//! timer (divide-by-16) is measured against the TSC over 10 ms (QEMU TCG, i.e. CI, has no
//! TSC-deadline); each AP gets a 64 KiB heap stack with an unmapped guard page, a 16 KiB
//! double-fault stack and its own GDT + TSS, while the IDT is shared. The BSP checks that
//! the trampoline's page at 0x8000 is free RAM before copying it there. The AP clears
//! CR0.CD/NW on its way to 64-bit mode and, once checked in, parks in `sti; hlt` until the
//! wake-up IPI (vector 0xF1). The default check-in deadline is 1 s.
//! `Cores::wait_idle` waits, halting, for a job to finish.
//!
//! `mode=boot` (`firmware/src/image/cores.rs`) starts every core; each sleeps 5 × 1 ms
//! (plus one MWAIT sleep where available) and prints `@cpu`; the BSP collects them
//! (bounded) and prints `@smp` (`tests/tests/smp.rs`: `-smp 4` with x2APIC and `-smp 2`
//! with `-cpu max,-x2apic`).

mod context;

pub use context::{CoreContext, CoreId, CoreState, CoreStats};

#[cfg(target_os = "none")]
#[allow(unsafe_code)] // the AP trampoline: copies code below 1 MiB, INIT/SIPI, hand-over of stacks
mod start;

#[cfg(target_os = "none")]
pub use start::{Cores, RunError, SmpConfig, SmpError, TimerChoice, current, start_aps};
