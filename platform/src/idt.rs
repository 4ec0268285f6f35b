//! The IDT: every CPU exception (vectors 0–31) reports on COM1 and ends the run with
//! exit status 39; the legacy 8259 PIC is masked (it would otherwise deliver IRQ0 as
//! vector 8, #DF, on the first `sti`).
//!
//! Handlers are naked functions (stable since Rust 1.88): they push a zero error code
//! where the CPU pushes none (Intel SDM vol. 3A §6.15 lists which vectors have one),
//! push the vector, and call [`exception_report`] with a pointer to the frame. The
//! report never returns, so nothing is restored.
//!
//! Three more gates serve the local APIC ([`crate::lapic`]): the timer and the wake-up
//! IPI (naked stubs that save the nine caller-saved registers, call a Rust handler that
//! counts and sends EOI, restore and `iretq`) and the spurious vector (`iretq` alone: no
//! EOI for it, SDM vol. 3A §11.9). One table serves every core; each AP loads it with
//! [`load`].

use crate::exit::{ExitCode, exit};
use core::fmt::Write;
use x86_64::VirtAddr;
use x86_64::instructions::port::Port;
use x86_64::instructions::segmentation::{CS, Segment};
use x86_64::structures::DescriptorTablePointer;

/// What the stubs leave on the stack, lowest address first.
#[repr(C)]
#[derive(Debug)]
struct ExceptionFrame {
    vector: u64,
    error: u64,
    rip: u64,
    cs: u64,
    rflags: u64,
    rsp: u64,
    ss: u64,
}

/// One 16-byte IDT gate (SDM vol. 3A §6.14.1).
#[repr(C)]
#[derive(Clone, Copy)]
struct Gate {
    offset_lo: u16,
    selector: u16,
    ist: u8,
    attributes: u8,
    offset_mid: u16,
    offset_hi: u32,
    reserved: u32,
}
const _: () = assert!(core::mem::size_of::<Gate>() == 16);

/// Present, DPL 0, 64-bit interrupt gate (IF cleared on entry).
const GATE_INTERRUPT: u8 = 0x8e;

impl Gate {
    const MISSING: Gate =
        Gate { offset_lo: 0, selector: 0, ist: 0, attributes: 0, offset_mid: 0, offset_hi: 0, reserved: 0 };

    fn new(handler: usize, selector: u16, ist: u8) -> Self {
        let h = handler as u64;
        Gate {
            offset_lo: h as u16,
            selector,
            ist,
            attributes: GATE_INTERRUPT,
            offset_mid: (h >> 16) as u16,
            offset_hi: (h >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Idt([Gate; 256]);

static IDT: spin::Once<Idt> = spin::Once::new();

macro_rules! stub {
    ($name:ident, $vector:literal) => {
        #[unsafe(naked)]
        extern "C" fn $name() {
            core::arch::naked_asm!(
                "push 0",
                "push {v}",
                "mov rdi, rsp",
                "and rsp, -16",
                "call {report}",
                "ud2",
                v = const $vector,
                report = sym exception_report,
            )
        }
    };
    ($name:ident, $vector:literal, error_code) => {
        #[unsafe(naked)]
        extern "C" fn $name() {
            core::arch::naked_asm!(
                "push {v}",
                "mov rdi, rsp",
                "and rsp, -16",
                "call {report}",
                "ud2",
                v = const $vector,
                report = sym exception_report,
            )
        }
    };
}

stub!(ex0, 0);
stub!(ex1, 1);
stub!(ex2, 2);
stub!(ex3, 3);
stub!(ex4, 4);
stub!(ex5, 5);
stub!(ex6, 6);
stub!(ex7, 7);
stub!(ex8, 8, error_code);
stub!(ex9, 9);
stub!(ex10, 10, error_code);
stub!(ex11, 11, error_code);
stub!(ex12, 12, error_code);
stub!(ex13, 13, error_code);
stub!(ex14, 14, error_code);
stub!(ex15, 15);
stub!(ex16, 16);
stub!(ex17, 17, error_code);
stub!(ex18, 18);
stub!(ex19, 19);
stub!(ex20, 20);
stub!(ex21, 21, error_code);
stub!(ex22, 22);
stub!(ex23, 23);
stub!(ex24, 24);
stub!(ex25, 25);
stub!(ex26, 26);
stub!(ex27, 27);
stub!(ex28, 28);
stub!(ex29, 29, error_code);
stub!(ex30, 30, error_code);
stub!(ex31, 31);

/// An interrupt stub: saves the caller-saved registers, calls `$handler` (a plain
/// `extern "C" fn()`), restores them and returns from the interrupt. The CPU aligned
/// RSP to 16 before pushing its 5-word frame; 9 pushes make it 16-aligned again for
/// the call. The target has no red zone, so the interrupted code's stack is safe.
macro_rules! irq_stub {
    ($name:ident, $handler:path) => {
        #[unsafe(naked)]
        extern "C" fn $name() {
            core::arch::naked_asm!(
                "push rax",
                "push rcx",
                "push rdx",
                "push rsi",
                "push rdi",
                "push r8",
                "push r9",
                "push r10",
                "push r11",
                "cld",
                "call {h}",
                "pop r11",
                "pop r10",
                "pop r9",
                "pop r8",
                "pop rdi",
                "pop rsi",
                "pop rdx",
                "pop rcx",
                "pop rax",
                "iretq",
                h = sym $handler,
            )
        }
    };
}

irq_stub!(lapic_timer_stub, crate::sleep::on_timer_interrupt);
irq_stub!(lapic_wake_stub, crate::sleep::on_wake_interrupt);

/// The spurious vector: nothing to do, and no EOI (SDM vol. 3A §11.9).
#[unsafe(naked)]
extern "C" fn spurious_stub() {
    core::arch::naked_asm!("iretq")
}

const STUBS: [extern "C" fn(); 32] = [
    ex0, ex1, ex2, ex3, ex4, ex5, ex6, ex7, ex8, ex9, ex10, ex11, ex12, ex13, ex14, ex15, ex16, ex17, ex18, ex19, ex20,
    ex21, ex22, ex23, ex24, ex25, ex26, ex27, ex28, ex29, ex30, ex31,
];

const NAMES: [&str; 32] = [
    "#DE divide error",
    "#DB debug",
    "NMI",
    "#BP breakpoint",
    "#OF overflow",
    "#BR bound range",
    "#UD invalid opcode",
    "#NM device not available",
    "#DF double fault",
    "coprocessor segment overrun",
    "#TS invalid TSS",
    "#NP segment not present",
    "#SS stack fault",
    "#GP general protection",
    "#PF page fault",
    "reserved",
    "#MF x87 error",
    "#AC alignment check",
    "#MC machine check",
    "#XM SIMD error",
    "#VE virtualization",
    "#CP control protection",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "reserved",
    "#HV hypervisor injection",
    "#VC VMM communication",
    "#SX security",
    "reserved",
];

extern "C" fn exception_report(f: &ExceptionFrame) -> ! {
    if f.vector == 2 {
        // An NMI the platform sent to stop this core for good does not return from here.
        crate::fence::on_nmi();
    }
    let mut out = crate::serial::emergency_console();
    let name = NAMES.get(f.vector as usize).copied().unwrap_or("?");
    let _ = write!(
        out,
        "\nEXCEPTION vector={} ({}) error={:#x} rip={:#x} cs={:#x} rflags={:#x} rsp={:#x}",
        f.vector, name, f.error, f.rip, f.cs, f.rflags, f.rsp
    );
    if f.vector == 14 {
        let cr2 = x86_64::registers::control::Cr2::read_raw();
        let _ = write!(out, " cr2={cr2:#x}");
    }
    let _ = writeln!(out);
    exit(ExitCode::Panic)
}

/// Masks every line of both 8259 PICs (OCW1 to ports 0x21 and 0xA1).
fn mask_legacy_pic() {
    // SAFETY: writing the PIC interrupt mask registers only stops legacy IRQs; it has
    // no memory effects.
    unsafe {
        Port::<u8>::new(0x21).write(0xff);
        Port::<u8>::new(0xa1).write(0xff);
    }
}

/// Builds and loads the IDT and masks the legacy PIC (after [`crate::gdt::init`]).
pub(crate) fn init() {
    mask_legacy_pic();
    let idt = IDT.call_once(|| {
        let cs = CS::get_reg().0;
        let mut gates = [Gate::MISSING; 256];
        for (v, stub) in STUBS.iter().enumerate() {
            let ist = if v == 8 { crate::gdt::DOUBLE_FAULT_IST as u8 + 1 } else { 0 };
            gates[v] = Gate::new(*stub as usize, cs, ist);
        }
        gates[usize::from(crate::lapic::TIMER_VECTOR)] = Gate::new(lapic_timer_stub as *const () as usize, cs, 0);
        gates[usize::from(crate::lapic::WAKE_VECTOR)] = Gate::new(lapic_wake_stub as *const () as usize, cs, 0);
        gates[usize::from(crate::lapic::SPURIOUS_VECTOR)] = Gate::new(spurious_stub as *const () as usize, cs, 0);
        Idt(gates)
    });
    lidt(idt);
}

/// Loads the (already built) IDT on the calling core: every AP, after its GDT.
pub(crate) fn load() {
    if let Some(idt) = IDT.get() {
        lidt(idt);
    }
}

fn lidt(idt: &'static Idt) {
    let ptr = DescriptorTablePointer {
        limit: (core::mem::size_of::<Idt>() - 1) as u16,
        base: VirtAddr::new(idt as *const Idt as u64),
    };
    // SAFETY: the table is 'static and never changes after construction; each present
    // gate points at a naked stub of this module (exceptions report and exit, the APIC
    // stubs return with every register restored); IST1 is set up in this core's TSS
    // (`gdt::init` on the BSP, `gdt::for_ap` on an AP), loaded before this.
    unsafe { x86_64::instructions::tables::lidt(&ptr) };
}
