/*
 * AP start-up trampoline (SDM vol. 3A §9.4.4).
 *
 * Linked at VMA 0x8000 (firmware/link.ld, `.trampoline`), loaded inside the image and
 * copied to 0x8000 by the BSP. A start-up IPI with vector 0x08 starts the AP in real
 * mode at CS:IP = 0x0800:0000, i.e. at cadence_ap_trampoline. With DS = 0 every label
 * below is its own linear address (< 64 KiB), so real-mode code can use them directly.
 *
 * 16-bit: mark "started", load the trampoline GDT, set CR0.PE, far-jump to 32-bit.
 * 32-bit: CR4.PAE, CR3 from the mailbox (the BSP's page tables, below 4 GiB),
 *         EFER.LME, CR0.PG|PE with CD/NW cleared (INIT leaves the caches disabled),
 *         far-jump to 64-bit.
 * 64-bit: the stack from the mailbox, RDI = the launch record, call the Rust entry.
 *
 * The BSP writes the mailboxes (cadence_ap_stack, cadence_ap_arg, cadence_ap_cr3)
 * before each SIPI and waits for the AP's check-in before reusing them.
 */
    .section .trampoline, "awx", @progbits
    .code16
    .global cadence_ap_trampoline
cadence_ap_trampoline:
    cli
    cld
    xor %ax, %ax
    mov %ax, %ds
    movb $1, cadence_ap_started
    lgdtl cadence_ap_gdt_ptr
    mov %cr0, %eax
    or $1, %eax                     /* CR0.PE */
    mov %eax, %cr0
    ljmpl $0x08, $cadence_ap_start32

    .code32
cadence_ap_start32:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    mov %cr4, %eax
    or $0x20, %eax                  /* CR4.PAE */
    mov %eax, %cr4
    mov cadence_ap_cr3, %eax
    mov %eax, %cr3
    mov $0xc0000080, %ecx           /* IA32_EFER */
    rdmsr
    or $0x100, %eax                 /* EFER.LME */
    wrmsr
    mov %cr0, %eax
    and $0x9fffffff, %eax           /* clear CR0.CD (30) and CR0.NW (29) */
    or $0x80000001, %eax            /* CR0.PG | CR0.PE */
    mov %eax, %cr0
    ljmp $0x18, $cadence_ap_start64

    .code64
cadence_ap_start64:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    xor %eax, %eax
    mov %ax, %fs
    mov %ax, %gs
    mov cadence_ap_stack, %rsp      /* 16-byte aligned top */
    mov cadence_ap_arg, %rdi        /* arg 1: &'static ApLaunch */
    xor %ebp, %ebp
    movabs $__cadence_ap_entry, %rax
    call *%rax
1:  cli
    hlt
    jmp 1b

    .p2align 3
cadence_ap_gdt:                     /* accessed bits preset: the CPU never writes here */
    .quad 0
    .quad 0x00cf9b000000ffff        /* 0x08: 32-bit code */
    .quad 0x00cf93000000ffff        /* 0x10: flat data */
    .quad 0x00af9b000000ffff        /* 0x18: 64-bit code */
cadence_ap_gdt_end:
    .p2align 2
cadence_ap_gdt_ptr:
    .short cadence_ap_gdt_end - cadence_ap_gdt - 1
    .long cadence_ap_gdt

    .p2align 3
    .global cadence_ap_stack
cadence_ap_stack:                   /* mailbox: the AP's initial RSP */
    .quad 0
    .global cadence_ap_arg
cadence_ap_arg:                     /* mailbox: RDI for the Rust entry */
    .quad 0
    .global cadence_ap_cr3
cadence_ap_cr3:                     /* mailbox: the page-table root (below 4 GiB) */
    .long 0
    .global cadence_ap_started
cadence_ap_started:                 /* set to 1 by the AP's first instructions */
    .byte 0

    .code64
