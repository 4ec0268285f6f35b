//! The 64-bit GDT and TSS: kernel code/data segments and a separate stack for double
//! faults (IST1), so a stack overflow still reaches the exception report.

use core::cell::UnsafeCell;
use x86_64::VirtAddr;
use x86_64::instructions::segmentation::{CS, DS, ES, SS, Segment};
use x86_64::instructions::tables::load_tss;
use x86_64::structures::gdt::{Descriptor, GlobalDescriptorTable, SegmentSelector};
use x86_64::structures::tss::TaskStateSegment;

/// IST slot (0-based, as in `TaskStateSegment::interrupt_stack_table`) of the
/// double-fault stack; the IDT gate names it as IST1.
pub(crate) const DOUBLE_FAULT_IST: usize = 0;
const DF_STACK_SIZE: usize = 16 * 1024;

#[repr(C, align(16))]
struct Stack(UnsafeCell<[u8; DF_STACK_SIZE]>);

// SAFETY: only the CPU uses this memory, as the stack of the double-fault handler;
// Rust code never forms a reference to it.
unsafe impl Sync for Stack {}

static DF_STACK: Stack = Stack(UnsafeCell::new([0; DF_STACK_SIZE]));

struct Selectors {
    code: SegmentSelector,
    data: SegmentSelector,
    tss: SegmentSelector,
}

static TSS: spin::Once<TaskStateSegment> = spin::Once::new();
static GDT: spin::Once<(GlobalDescriptorTable, Selectors)> = spin::Once::new();

/// Loads the GDT, reloads every segment register and loads the TSS (BSP, once).
pub(crate) fn init() {
    let tss = TSS.call_once(|| {
        let mut tss = TaskStateSegment::new();
        let top = DF_STACK.0.get() as u64 + DF_STACK_SIZE as u64;
        tss.interrupt_stack_table[DOUBLE_FAULT_IST] = VirtAddr::new(top);
        tss
    });
    let (gdt, sel) = GDT.call_once(|| {
        let mut gdt = GlobalDescriptorTable::new();
        let code = gdt.append(Descriptor::kernel_code_segment());
        let data = gdt.append(Descriptor::kernel_data_segment());
        let tss = gdt.append(Descriptor::tss_segment(tss));
        (gdt, Selectors { code, data, tss })
    });
    gdt.load();
    // SAFETY: the selectors index descriptors of the GDT just loaded, which is 'static;
    // the code segment is a 64-bit kernel code segment and the data segment a flat
    // writable one, so execution and stack accesses continue unchanged.
    unsafe {
        CS::set_reg(sel.code);
        DS::set_reg(sel.data);
        ES::set_reg(sel.data);
        SS::set_reg(sel.data);
        load_tss(sel.tss);
    }
}
