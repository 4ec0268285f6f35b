//! The machine half of [`crate::lapic`]: register access in the selected mode, per-core
//! enable, EOI, IPIs and the timer.

use super::regs::{
    self, EOI, IA32_APIC_BASE, IA32_TSC_DEADLINE, ICR_HIGH, ICR_LOW, ID, Ipi, LVT_TIMER, Lapic, SVR, TIMER_CURRENT,
    TIMER_DIVIDE, TIMER_INITIAL, TPR, TimerMode, X2APIC_ICR,
};
use crate::cpu::{Features, rdmsr, rdtsc, wrmsr};
use crate::paging::{self, Cache};
use crate::physmem::IdentityMap;
use cadence_core::time::{Duration, Instant, TickRate};
use cadence_drivers::reg::{Readable, Register, Value, Writable};
use core::fmt;

/// The LAPIC timer's vector: its handler only sends EOI (the wake-up is the point).
pub const TIMER_VECTOR: u8 = 0xf0;
/// The vector of the IPI that wakes a halted core (e.g. to hand it a job); EOI only.
pub const WAKE_VECTOR: u8 = 0xf1;
/// The spurious-interrupt vector programmed into the SVR (§11.9: no EOI for it).
pub const SPURIOUS_VECTOR: u8 = 0xff;
/// One-shot mode divides the timer's input clock by this.
const TIMER_DIVISOR: u32 = 16;
/// Length of the one-shot calibration window.
const CALIBRATION_MS: u64 = 10;
/// How long an xAPIC ICR may stay "send pending" (§11.6.1: delivery status).
const ICR_SEND_TIMEOUT_US: u64 = 1_000;

/// How the local APIC is accessed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum ApicMode {
    /// x2APIC: registers are MSRs 0x800..0x8FF, IDs are 32 bits.
    X2Apic,
    /// xAPIC: registers are memory-mapped at `base`, IDs are 8 bits.
    XApic {
        /// Physical (= virtual) address of the register page.
        base: u64,
    },
}

impl ApicMode {
    /// `x2apic` or `xapic` (PROTOCOL.md `@smp`).
    pub const fn as_str(self) -> &'static str {
        match self {
            ApicMode::X2Apic => "x2apic",
            ApicMode::XApic { .. } => "xapic",
        }
    }
}

/// How the timer wakes a sleeping core.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum TimerKind {
    /// LVT timer mode 2: fires when the TSC reaches IA32_TSC_DEADLINE.
    TscDeadline,
    /// One-shot countdown at a calibrated frequency (divide-by-16).
    OneShot {
        /// Timer ticks per second after the divider.
        lapic_hz: u64,
    },
}

impl TimerKind {
    /// `tsc-deadline` or `oneshot` (PROTOCOL.md `@smp`).
    pub const fn as_str(self) -> &'static str {
        match self {
            TimerKind::TscDeadline => "tsc-deadline",
            TimerKind::OneShot { .. } => "oneshot",
        }
    }
}

/// What went wrong with the local APIC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum LapicError {
    /// CPUID `1:EDX[9]`: no on-chip APIC.
    NoApic,
    /// The APIC was set up before with another mode or TSC rate.
    AlreadySelected,
    /// The one-shot timer did not count during calibration.
    TimerStopped,
    /// The xAPIC ICR stayed "send pending" past its deadline.
    SendTimeout,
    /// The destination's APIC ID does not fit xAPIC's 8-bit destination.
    UnreachableId,
    /// The xAPIC register page could not be mapped.
    Unmapped,
}

impl fmt::Display for LapicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LapicError::NoApic => "no local APIC (CPUID 1:EDX[9])",
            LapicError::AlreadySelected => "local APIC already set up differently",
            LapicError::TimerStopped => "LAPIC timer does not count",
            LapicError::SendTimeout => "IPI stayed pending",
            LapicError::UnreachableId => "APIC ID above 255 in xAPIC mode",
            LapicError::Unmapped => "cannot map the xAPIC registers",
        })
    }
}

#[derive(Debug)]
struct State {
    mode: ApicMode,
    tsc: TickRate,
}

static STATE: spin::Once<State> = spin::Once::new();
static TIMER: spin::Once<TimerKind> = spin::Once::new();

/// The selected access mode (`None` before the SMP bring-up).
pub fn mode() -> Option<ApicMode> {
    STATE.get().map(|s| s.mode)
}

/// The timer kind in use (`None` before the SMP bring-up).
pub fn timer_kind() -> Option<TimerKind> {
    TIMER.get().copied()
}

/// Chooses x2APIC or xAPIC (see the module docs) for every core; BSP, once.
pub(crate) fn select(features: &Features, tsc: TickRate, force_xapic: bool) -> Result<ApicMode, LapicError> {
    if crate::cpu::cpuid(1, 0).edx & (1 << 9) == 0 {
        return Err(LapicError::NoApic);
    }
    // SAFETY: IA32_APIC_BASE exists on every CPU with an APIC (checked above); ring 0.
    let base_msr = Value::<IA32_APIC_BASE>::new(unsafe { rdmsr(regs::msr(IA32_APIC_BASE)) });
    let mode = if base_msr.is_set(IA32_APIC_BASE::EXTD) || (features.x2apic && !force_xapic) {
        ApicMode::X2Apic
    } else {
        let base = base_msr.get(IA32_APIC_BASE::ADDR) << 12;
        // Below 4 GiB the boot identity map covers it (write-back in the page tables;
        // the firmware's MTRRs make the APIC range uncached, and accesses to it are
        // claimed by the APIC regardless). Elsewhere, map it uncached.
        if base + 0x1000 > IdentityMap::LIMIT {
            paging::map_identity(base, 0x1000, Cache::Uncached).map_err(|_| LapicError::Unmapped)?;
        }
        ApicMode::XApic { base }
    };
    let s = STATE.call_once(|| State { mode, tsc });
    if s.mode != mode || s.tsc != tsc {
        return Err(LapicError::AlreadySelected);
    }
    Ok(mode)
}

/// Reads register `reg` in the selected mode (0 before [`select`]).
fn read<R: Register<Space = Lapic, Value = u32>>(reg: R) -> Value<R>
where
    R::Access: Readable,
{
    Value::new(match STATE.get().map(|s| s.mode) {
        // SAFETY: x2APIC MSRs exist once this core's EXTD is set, which
        // `init_this_core` does before anything else touches the APIC on this core.
        Some(ApicMode::X2Apic) => unsafe { rdmsr(regs::x2apic_msr(reg)) & 0xFFFF_FFFF },
        Some(ApicMode::XApic { base }) => {
            // SAFETY: `base` is the APIC's register page, identity-mapped (`select`),
            // and `R::OFFSET` an aligned offset inside it (every `Lapic` register is
            // declared below 0x400); register reads have no memory effects.
            let v = unsafe { ((base + R::OFFSET as u64) as *const u32).read_volatile() };
            u64::from(v)
        }
        None => 0,
    })
}

/// Writes `val` to register `reg` in the selected mode (dropped before [`select`]).
fn write<R: Register<Space = Lapic, Value = u32>>(reg: R, val: Value<R>)
where
    R::Access: Writable,
{
    match STATE.get().map(|s| s.mode) {
        // SAFETY: as in `read`; APIC register writes change interrupt delivery only,
        // never memory.
        Some(ApicMode::X2Apic) => unsafe { wrmsr(regs::x2apic_msr(reg), val.bits()) },
        // SAFETY: as in `read`.
        Some(ApicMode::XApic { base }) => unsafe { ((base + R::OFFSET as u64) as *mut u32).write_volatile(val.raw()) },
        None => {}
    }
}

/// Enables this core's APIC in the selected mode: EN (and EXTD for x2APIC) in
/// IA32_APIC_BASE, SVR = software enable | [`SPURIOUS_VECTOR`], TPR = 0, and the timer
/// LVT for the selected [`TimerKind`] (masked until [`setup_timer`] ran). Every core,
/// once, with interrupts disabled.
pub(crate) fn init_this_core() {
    let Some(s) = STATE.get() else { return };
    // SAFETY: IA32_APIC_BASE exists (checked by `select`); the writes below follow the
    // legal transitions disabled → xAPIC → x2APIC (SDM §11.12.5, Figure 11-27) and
    // keep the base address, so no memory changes meaning.
    unsafe {
        let msr = regs::msr(IA32_APIC_BASE);
        let mut base = Value::<IA32_APIC_BASE>::new(rdmsr(msr));
        if !base.is_set(IA32_APIC_BASE::ENABLE) {
            base = base.set(IA32_APIC_BASE::ENABLE);
            wrmsr(msr, base.bits());
        }
        if s.mode == ApicMode::X2Apic && !base.is_set(IA32_APIC_BASE::EXTD) {
            wrmsr(msr, base.set(IA32_APIC_BASE::EXTD).bits());
        }
    }
    write(SVR, read(SVR).with(SVR::VECTOR, u64::from(SPURIOUS_VECTOR)).set(SVR::ENABLE));
    write(TPR, Value::new(0));
    program_timer_lvt(TIMER.get().copied());
}

/// This core's APIC ID (after `init_this_core`).
pub fn id() -> u32 {
    match mode() {
        Some(ApicMode::XApic { .. }) => read(ID).get(ID::XAPIC_ID) as u32,
        _ => read(ID).raw(),
    }
}

/// Signals the end of the interrupt being handled (not for the spurious vector).
pub(crate) fn eoi() {
    write(EOI, Value::new(0));
}

/// Sends `ipi` to the core with APIC ID `apic_id`. In xAPIC mode, waits (at most
/// [`ICR_SEND_TIMEOUT_US`]) for the delivery-status bit to clear.
pub(crate) fn send_ipi(apic_id: u32, ipi: Ipi) -> Result<(), LapicError> {
    let Some(s) = STATE.get() else { return Err(LapicError::NoApic) };
    match s.mode {
        ApicMode::X2Apic => {
            // SAFETY: the ICR MSR exists in x2APIC mode (EXTD set on this core); one
            // 64-bit write sends the IPI, with no memory effects (§11.12.9).
            unsafe { wrmsr(regs::msr(X2APIC_ICR), ipi.x2apic(apic_id).bits()) };
            Ok(())
        }
        ApicMode::XApic { .. } => {
            let high = Ipi::xapic_high(apic_id).ok_or(LapicError::UnreachableId)?;
            // The high/low pair must not be split by an interrupt handler that also
            // sends an IPI on this core.
            x86_64::instructions::interrupts::without_interrupts(|| {
                write(ICR_HIGH, high);
                write(ICR_LOW, ipi.low());
            });
            let deadline = Instant(rdtsc()).saturating_add(s.tsc.ticks_from_us(ICR_SEND_TIMEOUT_US));
            loop {
                if !read(ICR_LOW).is_set(ICR_LOW::PENDING) {
                    return Ok(());
                }
                if rdtsc() >= deadline.ticks() {
                    return Err(LapicError::SendTimeout);
                }
                core::hint::spin_loop();
            }
        }
    }
}

/// Chooses the timer kind for every core (BSP, once, after [`init_this_core`]):
/// TSC-deadline when `tsc_deadline` (the caller checked CPUID `1:ECX[24]`), else
/// one-shot, measured against the TSC over [`CALIBRATION_MS`]. Programs this core's LVT.
pub(crate) fn setup_timer(tsc_deadline: bool) -> Result<TimerKind, LapicError> {
    let Some(s) = STATE.get() else { return Err(LapicError::NoApic) };
    if let Some(&k) = TIMER.get() {
        return Ok(k);
    }
    let kind = if tsc_deadline {
        TimerKind::TscDeadline
    } else {
        write(TIMER_DIVIDE, regs::divide_config(TIMER_DIVISOR).unwrap_or_default());
        write(LVT_TIMER, regs::lvt_timer(TIMER_VECTOR, TimerMode::OneShot, true));
        write(TIMER_INITIAL, Value::new(u32::MAX.into()));
        let t0 = rdtsc();
        let c0 = read(TIMER_CURRENT).raw();
        let window = s.tsc.ticks_from_ms(CALIBRATION_MS).ticks();
        // Bounded by the TSC itself.
        while rdtsc().wrapping_sub(t0) < window {
            core::hint::spin_loop();
        }
        let c1 = read(TIMER_CURRENT).raw();
        let t1 = rdtsc();
        write(TIMER_INITIAL, Value::new(0));
        let lapic_hz =
            regs::lapic_hz(u64::from(c0.saturating_sub(c1)), t1 - t0, s.tsc.hz()).ok_or(LapicError::TimerStopped)?;
        TimerKind::OneShot { lapic_hz }
    };
    let kind = *TIMER.call_once(|| kind);
    program_timer_lvt(Some(kind));
    Ok(kind)
}

/// Programs this core's LVT timer (and divider) for `kind`; masked when `None`.
fn program_timer_lvt(kind: Option<TimerKind>) {
    match kind {
        Some(TimerKind::TscDeadline) => {
            write(LVT_TIMER, regs::lvt_timer(TIMER_VECTOR, TimerMode::TscDeadline, false));
            // §11.5.4.1: the LVT write must complete before the first IA32_TSC_DEADLINE
            // write, or that write may be ignored; MFENCE orders them.
            mfence();
        }
        Some(TimerKind::OneShot { .. }) => {
            write(TIMER_DIVIDE, regs::divide_config(TIMER_DIVISOR).unwrap_or_default());
            write(LVT_TIMER, regs::lvt_timer(TIMER_VECTOR, TimerMode::OneShot, false));
        }
        None => write(LVT_TIMER, regs::lvt_timer(TIMER_VECTOR, TimerMode::OneShot, true)),
    }
}

fn mfence() {
    // SAFETY: a fence has no effect besides ordering memory and MSR accesses.
    unsafe { core::arch::asm!("mfence", options(nostack, preserves_flags)) }
}

/// Arms this core's timer to fire at TSC `deadline` (`now` is the current TSC, used
/// by one-shot mode to compute the count; a deadline further away than the 32-bit
/// counter reaches fires early and the caller re-arms).
pub(crate) fn arm_timer(deadline: Instant, now: Instant) {
    match TIMER.get().copied() {
        Some(TimerKind::TscDeadline) => {
            mfence();
            // SAFETY: IA32_TSC_DEADLINE exists (CPUID `1:ECX[24]`, checked before
            // TscDeadline was chosen); 0 would disarm, so write at least 1.
            unsafe { wrmsr(regs::msr(IA32_TSC_DEADLINE), deadline.ticks().max(1)) }
        }
        Some(TimerKind::OneShot { lapic_hz }) => {
            let tsc_hz = STATE.get().map_or(0, |s| s.tsc.hz());
            let delta: Duration = deadline.saturating_since(now);
            write(TIMER_INITIAL, Value::new(regs::oneshot_count(delta.ticks(), lapic_hz, tsc_hz).into()));
        }
        None => {}
    }
}

/// Cancels a pending timer on this core.
pub(crate) fn disarm_timer() {
    match TIMER.get().copied() {
        // SAFETY: as in `arm_timer`; writing 0 disarms (§11.5.4.1).
        Some(TimerKind::TscDeadline) => unsafe { wrmsr(regs::msr(IA32_TSC_DEADLINE), 0) },
        Some(TimerKind::OneShot { .. }) => write(TIMER_INITIAL, Value::new(0)),
        None => {}
    }
}
