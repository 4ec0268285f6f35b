//! The entry: the arm64 `Image` header, the drop from EL2 to EL1, FP/SIMD access, the boot
//! stack, `.bss` zeroed, the exception vectors installed, then the image's `kmain`.
//!
//! Facts relied on:
//! - Image header (Linux Documentation/arch/arm64/booting.rst §4): `code0` (a branch to
//!   the entry), `code1`, `text_offset` (u64, here 0x80000), `image_size` (u64, includes
//!   .bss), `flags` (bit 0: 0 = little-endian; bits 1–2: 1 = 4 KiB pages; bit 3: 0 = the
//!   2 MiB-aligned base as close to the start of DRAM as possible), three reserved u64,
//!   the magic `"ARM\x64"` at offset 56, a reserved u32. The loader enters at the header's
//!   first byte with x0 = the DTB's physical address, x1–x3 = 0, MMU and D-cache off,
//!   at EL2 or non-secure EL1 (booting.rst §5). QEMU's `-kernel` follows it for a file
//!   with that magic (hw/arm/boot.c); with a non-zero `image_size` it loads at
//!   RAM base + `text_offset`. `-M virt` without `virtualization=on` enters at EL1.
//! - Dropping from EL2 (Arm ARM D1.6, D17.2.48 HCR_EL2, D17.2.27 CNTHCTL_EL2): HCR_EL2.RW
//!   (bit 31) = 1 makes EL1 AArch64; CNTHCTL_EL2.EL1PCTEN/EL1PCEN (bits 0, 1) give EL1 the
//!   physical counter and timer; CNTVOFF_EL2 = 0 makes the virtual counter the physical;
//!   SPSR_EL2 = 0x3c5 returns to EL1h with D, A, I, F masked. Where the core has the GIC
//!   system-register interface (ID_AA64PFR0_EL1.GIC [27:24] ≠ 0), ICC_SRE_EL2.SRE and
//!   .Enable (bits 0, 3) are set so that EL1 can use it (GICv3 spec §12.2.6).
//! - CPACR_EL1.FPEN (bits [21:20]) = 0b11: FP/SIMD does not trap at EL1 (D17.2.30); Rust
//!   code uses the SIMD registers (memcpy), so this comes before any of it.
//! - SCTLR_EL1 is set to its RES1 bits (0x30D0_0800, Arm ARM D17.2.118 for ARMv8.0) with
//!   the MMU and caches off; alignment checking is off, and the target's `+strict-align`
//!   keeps Rust's accesses aligned while memory is Device-nGnRnE (MMU off, D8.2.12).
//! - Secondary cores enter `cadence_aarch64_secondary` from PSCI `CPU_ON` (see `smp`).
//! - Entry at EL3 (`-M virt,secure=on`) is not supported: the core parks.

core::arch::global_asm!(
    r#"
    .section .text.head, "ax"
    .global _head
_head:
    b       2f                      // code0
    .long   0                       // code1
    .quad   0x80000                 // text_offset
    .quad   __image_size            // image_size
    .quad   0x2                     // flags: LE, 4 KiB pages, base near DRAM start
    .quad   0
    .quad   0
    .quad   0
    .ascii  "ARM\x64"               // magic
    .long   0

2:  mov     x19, x0                 // the DTB
    mrs     x20, CurrentEL
    lsr     x20, x20, #2
    cmp     x20, #2
    b.eq    3f
    cmp     x20, #1
    b.eq    4f
1:  wfe                             // EL3 (or EL0): not supported
    b       1b

3:  mov     x1, #(1 << 31)          // HCR_EL2.RW: EL1 is AArch64
    msr     hcr_el2, x1
    mrs     x1, cnthctl_el2
    orr     x1, x1, #3              // EL1PCTEN | EL1PCEN
    msr     cnthctl_el2, x1
    msr     cntvoff_el2, xzr
    mrs     x1, id_aa64pfr0_el1     // GIC [27:24]: system-register interface present?
    ubfx    x1, x1, #24, #4
    cbz     x1, 9f
    mov     x1, #0x9                // ICC_SRE_EL2: SRE | Enable (EL1 may use ICC_SRE_EL1)
    msr     icc_sre_el2, x1
9:  ldr     x1, =0x30d00800
    msr     sctlr_el1, x1
    mov     x1, #0x3c5              // EL1h, DAIF masked
    msr     spsr_el2, x1
    adr     x1, 4f
    msr     elr_el2, x1
    eret

4:  ldr     x1, =0x30d00800         // SCTLR_EL1: RES1 only, MMU and caches off
    msr     sctlr_el1, x1
    mov     x1, #(3 << 20)          // CPACR_EL1.FPEN = 0b11
    msr     cpacr_el1, x1
    isb
    adrp    x1, __boot_stack_top
    add     x1, x1, :lo12:__boot_stack_top
    mov     sp, x1
    adrp    x1, __boot_stack_guard  // the exception stack ends at the guard (stack.rs)
    add     x1, x1, :lo12:__boot_stack_guard
    msr     tpidr_el1, x1
    adrp    x1, __bss_start
    add     x1, x1, :lo12:__bss_start
    adrp    x2, __bss_end
    add     x2, x2, :lo12:__bss_end
5:  cmp     x1, x2
    b.hs    6f
    str     xzr, [x1], #8
    b       5b
6:  adrp    x1, cadence_aarch64_vectors
    add     x1, x1, :lo12:cadence_aarch64_vectors
    msr     vbar_el1, x1
    isb
    mov     x0, x19
    mov     x1, x20
    bl      cadence_aarch64_main
7:  wfe
    b       7b

    // A secondary core, started by PSCI CPU_ON at EL1 with the MMU off (smp.rs); x0 = its
    // CoreBoot block, whose first word is its stack top.
    .section .text, "ax"
    .global cadence_aarch64_secondary
cadence_aarch64_secondary:
    ldr     x1, =0x30d00800         // SCTLR_EL1: RES1 only, MMU and caches off
    msr     sctlr_el1, x1
    mov     x1, #(3 << 20)          // CPACR_EL1.FPEN = 0b11
    msr     cpacr_el1, x1
    isb
    ldr     x1, [x0]
    mov     sp, x1
    ldr     x1, [x0, #8]            // CoreBoot.exception_stack_top
    msr     tpidr_el1, x1
    adrp    x1, cadence_aarch64_vectors
    add     x1, x1, :lo12:cadence_aarch64_vectors
    msr     vbar_el1, x1
    isb
    bl      cadence_aarch64_secondary_main
8:  wfe
    b       8b

    // Exception vectors (Arm ARM D1.10.2): 16 entries of 0x80 bytes, 2 KiB aligned. Each
    // moves to the core's exception stack, then passes its index, ESR_EL1, ELR_EL1 and FAR_EL1 to the reporting handler, which
    // exits; nothing returns, so no registers are saved.
    .section .text.vectors, "ax"
    .balign 0x800
    .global cadence_aarch64_vectors
cadence_aarch64_vectors:
    .set    vector, 0
    .rept   16
    .balign 0x80
    mrs     x9, tpidr_el1           // this core's exception stack: SP may be spent (stack.rs)
    mov     sp, x9
    mov     x0, #vector
    mrs     x1, esr_el1
    mrs     x2, elr_el1
    mrs     x3, far_el1
    b       cadence_aarch64_exception
    .set    vector, vector + 1
    .endr
"#
);

/// The exception level this core runs at now (CurrentEL [3:2]).
pub fn current_el() -> u8 {
    let v: u64;
    // SAFETY: reading CurrentEL has no side effects.
    unsafe { core::arch::asm!("mrs {}, CurrentEL", out(reg) v, options(nomem, nostack)) };
    (v >> 2 & 3) as u8
}
