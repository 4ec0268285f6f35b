//! The 64-bit GDT and TSS: kernel code/data segments and a separate stack for double
//! faults (IST1), so a stack overflow still reaches the exception report.
//!
//! Every core has its own GDT and TSS (a TSS descriptor is marked busy when loaded, and
//! each core needs its own double-fault stack): the BSP's are statics, an AP's are built
//! on the BSP by `for_ap` before the AP starts and loaded by the AP itself.

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

/// One core's GDT and the selectors of its segments and TSS.
pub(crate) struct CoreTables {
    gdt: GlobalDescriptorTable,
    sel: Selectors,
}

/// A TSS whose IST1 is the double-fault stack ending at `df_stack_top`.
fn tss_with_df_stack(df_stack_top: u64) -> TaskStateSegment {
    let mut tss = TaskStateSegment::new();
    tss.interrupt_stack_table[DOUBLE_FAULT_IST] = VirtAddr::new(df_stack_top);
    tss
}

/// The GDT of one core: kernel code, kernel data, its own TSS.
fn build(tss: &'static TaskStateSegment) -> CoreTables {
    let mut gdt = GlobalDescriptorTable::new();
    let code = gdt.append(Descriptor::kernel_code_segment());
    let data = gdt.append(Descriptor::kernel_data_segment());
    let tss = gdt.append(Descriptor::tss_segment(tss));
    CoreTables { gdt, sel: Selectors { code, data, tss } }
}

impl CoreTables {
    /// Loads the GDT, reloads every segment register and loads the TSS, on the calling core.
    pub(crate) fn load(&'static self) {
        self.gdt.load();
        // SAFETY: the selectors index descriptors of the GDT just loaded, which is
        // 'static; the code segment is a 64-bit kernel code segment and the data segment
        // a flat writable one, so execution and stack accesses continue unchanged. The
        // TSS descriptor is this core's own (loading it marks it busy in this GDT only).
        unsafe {
            CS::set_reg(self.sel.code);
            DS::set_reg(self.sel.data);
            ES::set_reg(self.sel.data);
            SS::set_reg(self.sel.data);
            load_tss(self.sel.tss);
        }
    }
}

static TSS: spin::Once<TaskStateSegment> = spin::Once::new();
static GDT: spin::Once<CoreTables> = spin::Once::new();

/// Loads the BSP's GDT, reloads every segment register and loads the TSS (BSP, once).
pub(crate) fn init() {
    let tss = TSS.call_once(|| tss_with_df_stack(DF_STACK.0.get() as u64 + DF_STACK_SIZE as u64));
    GDT.call_once(|| build(tss)).load();
}

/// Builds (does not load) the tables of an AP whose double-fault stack ends at
/// `df_stack_top`; they live as long as the image.
pub(crate) fn for_ap(df_stack_top: u64) -> &'static CoreTables {
    let tss: &'static TaskStateSegment =
        alloc::boxed::Box::leak(alloc::boxed::Box::new(tss_with_df_stack(df_stack_top)));
    alloc::boxed::Box::leak(alloc::boxed::Box::new(build(tss)))
}

/// Bytes of a double-fault stack (each AP gets one of this size).
pub(crate) const DF_STACK_BYTES: usize = DF_STACK_SIZE;
