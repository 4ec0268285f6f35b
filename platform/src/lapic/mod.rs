//! The local APIC: x2APIC (MSRs) or xAPIC (MMIO) access, per-core enable, EOI, IPIs,
//! and the timer in TSC-deadline or one-shot mode (Intel SDM vol. 3A, chapter 11).
//!
//! The register map and encodings are in [`regs`] (pure, host-tested); the rest runs
//! only on the machine. The mode is chosen once, on the BSP, by `select`:
//!
//! - x2APIC when IA32_APIC_BASE.EXTD (bit 10) is already set (firmware enabled it; it
//!   cannot be turned off without a detour through disabled) or when CPUID `1:ECX[21]`
//!   reports it; every core then sets EXTD itself in `init_this_core`;
//! - xAPIC over MMIO at the IA32_APIC_BASE address (0xFEE00000 on every PC) otherwise,
//!   or when the caller forces it. APIC IDs above 255 are unreachable in xAPIC mode.
//!
//! Timer (`TimerKind`): TSC-deadline where CPUID `1:ECX[24]` has it (LVT timer mode 2,
//! then `mfence`, then `wrmsr IA32_TSC_DEADLINE`, §11.5.4.1); otherwise one-shot with
//! divide-by-16, whose frequency is measured against the TSC once, on the BSP (QEMU TCG
//! has no TSC-deadline, so one-shot is what CI runs).

pub mod regs;

#[cfg(target_os = "none")]
#[allow(unsafe_code)] // the local APIC registers and MSRs
mod local;

#[cfg(target_os = "none")]
pub use local::{ApicMode, LapicError, SPURIOUS_VECTOR, TIMER_VECTOR, TimerKind, WAKE_VECTOR, id, mode, timer_kind};
#[cfg(target_os = "none")]
pub(crate) use local::{arm_timer, disarm_timer, eoi, init_this_core, select, send_ipi, setup_timer};
