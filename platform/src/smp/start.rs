//! The machine half of [`crate::smp`]: the trampoline, INIT-SIPI-SIPI, the AP entry,
//! the park loop and the job mailbox.

use super::context::{CoreContext, CoreId, CoreState};
use crate::Platform;
use crate::bootinfo::MemKind;
use crate::cpu::{rdtsc, wrmsr};
use crate::gdt::{self, CoreTables};
use crate::lapic::{self, ApicMode, LapicError, TimerKind, WAKE_VECTOR, regs::Ipi};
use crate::sleep::{halt_until, sti_hlt};
use alloc::boxed::Box;
use alloc::vec::Vec;
use cadence_core::time::{Clock, Duration, Instant, TickRate, Timeout};
use core::alloc::Layout;
use core::fmt::{self, Write};
use core::sync::atomic::{AtomicBool, Ordering, fence};
use x86_64::instructions::interrupts;
use x86_64::registers::control::{Cr3, Cr4};

core::arch::global_asm!(include_str!("trampoline.s"), options(att_syntax));

/// Where the trampoline runs: a free page below 1 MiB; the SIPI vector is its page number.
const TRAMPOLINE: u64 = 0x8000;
const SIPI_VECTOR: u8 = (TRAMPOLINE >> 12) as u8;
/// IA32_GS_BASE: the per-core context pointer.
const IA32_GS_BASE: u32 = 0xc000_0101;
/// After INIT, before the first SIPI (SDM §9.4.4.1: "10-millisecond delay").
const INIT_DELAY_US: u64 = 10_000;
/// After a SIPI, before the second one (SDM §9.4.4.1: "200-microsecond delay").
const SIPI_DELAY_US: u64 = 200;
/// Step of the BSP's halting waits.
const WAIT_STEP_US: u64 = 50;
const PAGE: usize = 4096;

unsafe extern "C" {
    /// Where the linker put the trampoline's bytes in the image (firmware/link.ld).
    static __trampoline_lma: u8;
    /// First byte of the trampoline at its run address, 0x8000 (firmware/link.ld).
    static __trampoline_start: u8;
    /// One past its last byte, at the run address.
    static __trampoline_end: u8;
    /// Mailbox (trampoline.s): the AP's initial RSP.
    static mut cadence_ap_stack: u64;
    /// Mailbox: the AP's first argument, its `&'static ApLaunch`.
    static mut cadence_ap_arg: u64;
    /// Mailbox: CR3 (below 4 GiB).
    static mut cadence_ap_cr3: u32;
    /// Set to 1 by the AP when it runs the first trampoline instructions.
    static mut cadence_ap_started: u8;
}

/// A job handed to a parked core.
type Job = Box<dyn FnOnce(&'static CoreContext) + Send + 'static>;

/// Which LAPIC timer mode to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimerChoice {
    /// TSC-deadline where CPUID `1:ECX[24]` has it, one-shot otherwise.
    #[default]
    Auto,
    /// One-shot even where TSC-deadline exists (to exercise that path under KVM).
    OneShot,
}

/// Knobs of [`start_aps`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SmpConfig {
    /// Most cores brought up, the BSP included (at least 1).
    pub max_cores: usize,
    /// Stack of each AP, in bytes (rounded up to 4 KiB; a guard page comes on top).
    pub stack_bytes: usize,
    /// How long one AP may take from its first SIPI to its check-in.
    pub checkin_timeout_ms: u64,
    /// Use xAPIC even where x2APIC exists (ignored when the firmware already enabled
    /// x2APIC, which cannot be undone here).
    pub force_xapic: bool,
    /// Timer mode.
    pub timer: TimerChoice,
}

impl Default for SmpConfig {
    fn default() -> Self {
        SmpConfig {
            max_cores: crate::acpi::madt::MAX_CPUS,
            stack_bytes: 64 << 10,
            checkin_timeout_ms: 1_000,
            force_xapic: false,
            timer: TimerChoice::Auto,
        }
    }
}

/// Why the cores could not be brought up at all (single APs that fail are reported
/// through [`CoreState::Failed`] instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum SmpError {
    /// `start_aps` was called before.
    AlreadyStarted,
    /// The BSP's local APIC or timer could not be set up.
    Lapic(LapicError),
    /// The page at 0x8000 is not free RAM (or the trampoline outgrew it).
    NoTrampolinePage,
    /// The page tables live above 4 GiB, out of the 32-bit trampoline's reach.
    PageTablesAbove4G,
    /// The heap could not hold the per-core tables.
    OutOfMemory,
}

impl fmt::Display for SmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SmpError::AlreadyStarted => f.write_str("cores already started"),
            SmpError::Lapic(e) => write!(f, "local APIC: {e}"),
            SmpError::NoTrampolinePage => f.write_str("page 0x8000 is not free RAM for the AP trampoline"),
            SmpError::PageTablesAbove4G => f.write_str("page tables above 4 GiB"),
            SmpError::OutOfMemory => f.write_str("heap exhausted"),
        }
    }
}

/// Why a job was not handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub enum RunError {
    /// Core 0 is the caller's own: it runs its share itself.
    NotAnAp,
    /// No core with that index.
    NoSuchCore,
    /// The core is not online.
    Offline,
    /// A job is already waiting in its mailbox.
    Busy,
    /// The job is posted but the wake-up IPI failed.
    Ipi(LapicError),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::NotAnAp => f.write_str("core 0 is the BSP"),
            RunError::NoSuchCore => f.write_str("no such core"),
            RunError::Offline => f.write_str("core is not online"),
            RunError::Busy => f.write_str("core already has a job waiting"),
            RunError::Ipi(e) => write!(f, "wake-up IPI: {e}"),
        }
    }
}

/// What an AP needs from the BSP, handed over through the trampoline's mailbox.
struct ApLaunch {
    ctx: &'static CoreContext,
    tables: &'static CoreTables,
    cr4: u64,
}

/// Set once the BSP's `GS` base points at its context; every AP sets its own before
/// running anything that could call [`current`].
static PERCPU_READY: AtomicBool = AtomicBool::new(false);

/// The calling core's context (`None` before [`start_aps`]).
pub fn current() -> Option<&'static CoreContext> {
    if !PERCPU_READY.load(Ordering::Acquire) {
        return None;
    }
    let p: usize;
    // SAFETY: a plain load through GS; every core that can get here has its GS base at
    // its own pinned, 'static `CoreContext` (BSP: before PERCPU_READY; AP: first thing in
    // `__cadence_ap_entry`), whose first field is its address.
    unsafe { core::arch::asm!("mov {}, gs:[0]", out(reg) p, options(nostack, readonly, preserves_flags)) };
    // SAFETY: `p` is the address of a leaked (never freed) `CoreContext` (see above).
    (p != 0).then(|| unsafe { &*(p as *const CoreContext) })
}

/// The cores, as [`start_aps`] left them. Cheap to copy.
#[derive(Debug, Clone, Copy)]
pub struct Cores {
    all: &'static [CoreContext],
    mode: ApicMode,
    timer: TimerKind,
    tsc: TickRate,
}

impl Cores {
    /// The TSC's rate (what deadlines on the cores are counted in).
    pub fn tsc(&self) -> TickRate {
        self.tsc
    }

    /// Cores known (the MADT's enabled entries, capped at `max_cores`), BSP included.
    pub fn len(&self) -> usize {
        self.all.len()
    }

    /// Never true: the BSP is always there.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty()
    }

    /// Cores that checked in, BSP included.
    pub fn online(&self) -> usize {
        self.all.iter().filter(|c| c.is_online()).count()
    }

    /// Core `id`'s context.
    pub fn get(&self, id: CoreId) -> Option<&'static CoreContext> {
        self.all.get(id.index())
    }

    /// Every core, BSP first.
    pub fn iter(&self) -> impl Iterator<Item = &'static CoreContext> + use<> {
        self.all.iter()
    }

    /// How the APICs are driven.
    pub fn apic_mode(&self) -> ApicMode {
        self.mode
    }

    /// The timer mode every core's sleeper uses.
    pub fn timer_kind(&self) -> TimerKind {
        self.timer
    }

    /// Hands `job` to parked AP `id` and wakes it. The AP runs it with interrupts
    /// disabled and parks again when it returns. Allocates (init-time only).
    pub fn run<F>(&self, id: CoreId, job: F) -> Result<(), RunError>
    where
        F: FnOnce(&'static CoreContext) + Send + 'static,
    {
        if id == CoreId::BSP {
            return Err(RunError::NotAnAp);
        }
        let ctx = self.get(id).ok_or(RunError::NoSuchCore)?;
        if !ctx.is_online() {
            return Err(RunError::Offline);
        }
        let job: Box<Job> = Box::new(Box::new(job));
        let raw = Box::into_raw(job).cast::<()>();
        // Release: the job's captures are visible to the AP that takes it (Acquire).
        if ctx.job.compare_exchange(core::ptr::null_mut(), raw, Ordering::AcqRel, Ordering::Acquire).is_err() {
            // SAFETY: `raw` came from `Box::into_raw` above and was not published.
            drop(unsafe { Box::from_raw(raw.cast::<Job>()) });
            return Err(RunError::Busy);
        }
        lapic::send_ipi(ctx.apic_id(), Ipi::fixed(WAKE_VECTOR)).map_err(RunError::Ipi)
    }

    /// Waits (halting the calling core in short steps) until core `id` has no job
    /// waiting and none running, or `timeout` passes.
    pub fn wait_idle(&self, id: CoreId, timeout: Duration) -> Result<(), Timeout> {
        let Some(ctx) = self.get(id) else { return Ok(()) };
        let me = current();
        let deadline = Instant(rdtsc()).saturating_add(timeout);
        loop {
            // `park` sets Running before it takes the job, so "no job and not Running"
            // cannot be seen between the two.
            if ctx.job.load(Ordering::Acquire).is_null() && ctx.state() != CoreState::Running {
                return Ok(());
            }
            let now = Instant(rdtsc());
            if now >= deadline {
                return Err(Timeout);
            }
            halt_until(me, now.saturating_add(self.tsc.ticks_from_us(WAIT_STEP_US)).min(deadline));
        }
    }
}

/// Brings up every enabled core (see the module docs of [`crate::smp`]); BSP, once,
/// with interrupts disabled. With one core it still sets up the BSP's context, APIC
/// and timer, so sleepers work everywhere.
pub fn start_aps(p: &Platform, cfg: &SmpConfig) -> Result<Cores, SmpError> {
    static STARTED: AtomicBool = AtomicBool::new(false);
    if STARTED.swap(true, Ordering::AcqRel) {
        return Err(SmpError::AlreadyStarted);
    }
    interrupts::disable();
    let tsc = p.clock.rate();
    let mode = lapic::select(&p.features, tsc, cfg.force_xapic).map_err(SmpError::Lapic)?;
    lapic::init_this_core();
    let bsp_apic = lapic::id();
    let deadline_ok = p.features.tsc_deadline && cfg.timer == TimerChoice::Auto;
    let timer = lapic::setup_timer(deadline_ok).map_err(SmpError::Lapic)?;

    // The BSP first, then the MADT's other enabled entries in table order.
    let madt: &[u32] = p.acpi.as_ref().and_then(|a| a.madt.as_ref()).map_or(&[], |m| m.apic_ids.as_slice());
    let max = cfg.max_cores.max(1);
    let mut ids: Vec<u32> = Vec::new();
    ids.try_reserve_exact(madt.len().min(max) + 1).map_err(|_| SmpError::OutOfMemory)?;
    ids.push(bsp_apic);
    for &id in madt {
        if ids.len() < max && !ids.contains(&id) {
            ids.push(id);
        }
    }
    let mut contexts: Vec<CoreContext> = Vec::new();
    contexts.try_reserve_exact(ids.len()).map_err(|_| SmpError::OutOfMemory)?;
    contexts.extend(ids.iter().enumerate().map(|(i, &id)| CoreContext::new(CoreId(i as u32), id)));
    let all: &'static [CoreContext] = Box::leak(contexts.into_boxed_slice());
    for c in all {
        c.pin();
    }
    let bsp = &all[0];
    // SAFETY: IA32_GS_BASE exists on every x86_64 CPU; nothing else uses GS, and the
    // value is the address of a leaked context (the invariant `current` relies on).
    unsafe { wrmsr(IA32_GS_BASE, bsp.address() as u64) };
    PERCPU_READY.store(true, Ordering::Release);
    bsp.check_in(rdtsc(), CoreState::Offline, CoreState::Running);
    let cores = Cores { all, mode, timer, tsc };
    if all.len() > 1 {
        install_trampoline(p)?;
        for ctx in &all[1..] {
            start_one(ctx, bsp, mode, cfg, tsc);
        }
    }
    Ok(cores)
}

/// Copies the trampoline to 0x8000 (after checking that page is free RAM) and fills in
/// the CR3 mailbox.
fn install_trampoline(p: &Platform) -> Result<(), SmpError> {
    let start = &raw const __trampoline_start as u64;
    let end = &raw const __trampoline_end as u64;
    let lma = &raw const __trampoline_lma as u64;
    let page = crate::mem::Range { start: TRAMPOLINE, end: TRAMPOLINE + PAGE as u64 };
    let overlaps = |r: crate::mem::Range| r.start < page.end && page.start < r.end;
    let usable = p
        .boot
        .regions()
        .iter()
        .any(|r| r.kind == MemKind::Usable && r.base <= page.start && page.end <= r.base + r.len);
    let taken = p.boot.modules().iter().any(|m| overlaps(crate::mem::Range::at(m.base, m.len))) || overlaps(p.managed);
    if start != TRAMPOLINE || end > page.end || !usable || taken {
        return Err(SmpError::NoTrampolinePage);
    }
    let (frame, _) = Cr3::read_raw();
    let cr3 = u32::try_from(frame.start_address().as_u64()).map_err(|_| SmpError::PageTablesAbove4G)?;
    // SAFETY: the source is the trampoline's load image inside the kernel (linker
    // symbols); the destination is the free RAM page at 0x8000 (checked above: usable,
    // no module, not heap or DMA, identity-mapped), used by nothing else; they do not
    // overlap (the image starts at 1 MiB).
    unsafe { core::ptr::copy_nonoverlapping(lma as *const u8, start as *mut u8, (end - start) as usize) };
    // SAFETY: the mailbox lies in the page just written, which only this code and the
    // (not yet started) APs use.
    unsafe { (&raw mut cadence_ap_cr3).write_volatile(cr3) };
    Ok(())
}

/// Page-aligned heap memory that is never freed.
fn alloc_pages(bytes: usize) -> Result<u64, SmpError> {
    let layout = Layout::from_size_align(bytes.next_multiple_of(PAGE), PAGE).map_err(|_| SmpError::OutOfMemory)?;
    // SAFETY: the layout has a non-zero size (callers ask for at least one page).
    let p = unsafe { alloc::alloc::alloc(layout) };
    if p.is_null() { Err(SmpError::OutOfMemory) } else { Ok(p as u64) }
}

/// Allocates an AP's stacks and tables; returns its launch record and stack top.
fn prepare(ctx: &'static CoreContext, cfg: &SmpConfig) -> Result<(&'static ApLaunch, u64), SmpError> {
    let stack_bytes = cfg.stack_bytes.max(PAGE).next_multiple_of(PAGE);
    let base = alloc_pages(PAGE + stack_bytes)?;
    if let Err(e) = crate::paging::unmap_guard_page(base) {
        let _ = writeln!(crate::serial::emergency_console(), "warning: core {}: no stack guard page: {e}", ctx.id());
    }
    let stack_top = base + (PAGE + stack_bytes) as u64;
    let df = alloc_pages(gdt::DF_STACK_BYTES)?;
    let tables = gdt::for_ap(df + gdt::DF_STACK_BYTES as u64);
    let launch = Box::leak(Box::new(ApLaunch { ctx, tables, cr4: Cr4::read_raw() }));
    Ok((launch, stack_top))
}

/// INIT-SIPI-SIPI for one AP and the bounded wait for its check-in.
fn start_one(ctx: &'static CoreContext, bsp: &'static CoreContext, mode: ApicMode, cfg: &SmpConfig, tsc: TickRate) {
    let pause = |us: u64| {
        halt_until(Some(bsp), Instant(rdtsc()).saturating_add(tsc.ticks_from_us(us)));
    };
    let (launch, stack_top) = match prepare(ctx, cfg) {
        Ok(l) => l,
        Err(e) => {
            let _ = writeln!(crate::serial::emergency_console(), "warning: core {}: {e}", ctx.id());
            ctx.set_state(CoreState::Failed);
            return;
        }
    };
    ctx.set_state(CoreState::Starting);
    // SAFETY: the mailboxes lie in the trampoline page (installed), which no AP reads
    // now: the previous AP checked in (or was sent INIT) before this one starts.
    unsafe {
        (&raw mut cadence_ap_stack).write_volatile(stack_top);
        (&raw mut cadence_ap_arg).write_volatile(launch as *const ApLaunch as u64);
        (&raw mut cadence_ap_started).write_volatile(0);
    }
    // The mailboxes are written before the INIT that lets the AP read them.
    fence(Ordering::SeqCst);
    let id = ctx.apic_id();
    let xapic = matches!(mode, ApicMode::XApic { .. });
    let init = || -> Result<(), LapicError> {
        lapic::send_ipi(id, Ipi::INIT_ASSERT)?;
        if xapic {
            lapic::send_ipi(id, Ipi::INIT_DEASSERT)?;
        }
        Ok(())
    };
    let sent = init().and_then(|()| {
        pause(INIT_DELAY_US);
        lapic::send_ipi(id, Ipi::startup(SIPI_VECTOR))?;
        pause(SIPI_DELAY_US);
        // SAFETY: a byte of the trampoline page the AP writes; volatile, no reference.
        if unsafe { (&raw const cadence_ap_started).read_volatile() } == 0 {
            lapic::send_ipi(id, Ipi::startup(SIPI_VECTOR))?;
        }
        Ok(())
    });
    if let Err(e) = sent {
        let _ = writeln!(crate::serial::emergency_console(), "warning: core {} (APIC {id}): {e}", ctx.id());
        ctx.set_state(CoreState::Failed);
        return;
    }
    let deadline = Instant(rdtsc()).saturating_add(tsc.ticks_from_ms(cfg.checkin_timeout_ms));
    while ctx.state() == CoreState::Starting && rdtsc() < deadline.ticks() {
        pause(WAIT_STEP_US);
    }
    if ctx.transition(CoreState::Starting, CoreState::Failed) {
        // Late or dead: hold it in wait-for-SIPI so it can never run on the mailboxes
        // of the next AP.
        let _ = init();
    }
}

/// The Rust entry of an AP (called by trampoline.s on the AP's own stack).
#[unsafe(no_mangle)]
extern "C" fn __cadence_ap_entry(launch: &'static ApLaunch) -> ! {
    let ctx = launch.ctx;
    launch.tables.load();
    crate::idt::load();
    // SAFETY: the BSP's CR4, valid on this core (same CPU model, same paging mode: the
    // trampoline already set PAE and long mode; the rest only enables features).
    unsafe { Cr4::write_raw(launch.cr4) };
    // SAFETY: as in `start_aps` for the BSP: GS base at this core's pinned context.
    unsafe { wrmsr(IA32_GS_BASE, ctx.address() as u64) };
    lapic::init_this_core();
    if !ctx.check_in(rdtsc(), CoreState::Starting, CoreState::Idle) {
        // The BSP gave up on this core; it is about to send INIT.
        crate::exit::halt_forever()
    }
    park(ctx)
}

/// The idle loop of an AP: run the job in the mailbox, else halt until an interrupt.
fn park(ctx: &'static CoreContext) -> ! {
    loop {
        interrupts::disable();
        if !ctx.job.load(Ordering::Acquire).is_null() {
            ctx.set_state(CoreState::Running);
            let raw = ctx.job.swap(core::ptr::null_mut(), Ordering::Acquire);
            if !raw.is_null() {
                // SAFETY: the mailbox only ever holds pointers from `Box::into_raw` of a
                // `Box<Job>` (`Cores::run`), and this swap takes each exactly once.
                let job = unsafe { Box::from_raw(raw.cast::<Job>()) };
                job(ctx);
                ctx.account_job();
            }
            ctx.set_state(CoreState::Idle);
            continue;
        }
        // A wake-up IPI sent after the check above is pending until `sti`, and then
        // ends the `hlt` (sti_hlt's shadow).
        let t0 = rdtsc();
        sti_hlt();
        interrupts::disable();
        ctx.account_halts(1, rdtsc().saturating_sub(t0));
    }
}
