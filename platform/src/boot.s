/*
 * Cadence boot: one ELF64 image, two ways in, one trampoline.
 *
 *  - PVH (QEMU -kernel, Firecracker, Cloud Hypervisor): the loader reads the
 *    XEN_ELFNOTE_PHYS32_ENTRY note and enters _start32 in 32-bit protected mode,
 *    paging off, EBX = physical address of hvm_start_info (Xen hvmlite ABI).
 *  - Multiboot2 (GRUB): the loader finds the header below in the first 32 KiB and
 *    enters the ELF entry (_start32) the same way, EAX = 0x36d76289, EBX = MBI.
 *
 * No multiboot1 header, ever: QEMU would take it over the PVH path (notes §1).
 * The trampoline zeroes .bss, identity-maps 4 GiB with 2 MiB pages, enables PAE,
 * long mode and paging, loads a minimal GDT, and calls
 * __cadence_start64(magic = EAX, info = EBX) on a 128 KiB stack, which has a
 * guard page below it (unmapped by boot.rs).
 */

    .section .note.pvh, "a", @note
    .p2align 2
    .long 4                         /* n_namesz: "Xen\0" */
    .long 4                         /* n_descsz: a 32-bit entry address */
    .long 18                        /* n_type: XEN_ELFNOTE_PHYS32_ENTRY */
    .asciz "Xen"
    .long _start32

    .section .multiboot2, "a"
    .p2align 3
cadence_mb2_header:                 /* Multiboot2 spec §3.1.1 */
    .long 0xe85250d6                /* magic */
    .long 0                         /* architecture: i386 protected mode */
    .long 24                        /* header_length: these 16 bytes + end tag */
    .long 0x100000000 - (0xe85250d6 + 0 + 24)  /* checksum: the four fields sum to 0 */
    .short 0                        /* end tag: type 0 */
    .short 0                        /*          flags 0 */
    .long 8                         /*          size 8 */

    .section .text.boot, "ax"
    .code32
    .global _start32
_start32:
    cli
    cld
    mov %eax, %ebp                  /* loader magic */
    mov %ebx, %esi                  /* boot information, physical */

    /* Zero .bss (4-byte granular; link.ld aligns both ends to 4 KiB). */
    mov $__bss_start, %edi
    mov $__bss_end, %ecx
    sub %edi, %ecx
    shr $2, %ecx
    xor %eax, %eax
    rep stosl

    /* PML4[0] -> PDPT; PDPT[0..4] -> four PDs; PD[i] = i * 2 MiB | PS | RW | P. */
    mov $(cadence_boot_pdpt + 0x3), %eax
    mov %eax, cadence_boot_pml4
    mov $cadence_boot_pdpt, %edi
    mov $(cadence_boot_pd + 0x3), %eax
    mov $4, %ecx
1:  mov %eax, (%edi)
    add $0x1000, %eax
    add $8, %edi
    dec %ecx
    jnz 1b
    mov $cadence_boot_pd, %edi
    mov $0x83, %eax
    mov $2048, %ecx
2:  mov %eax, (%edi)
    add $0x200000, %eax
    add $8, %edi
    dec %ecx
    jnz 2b

    mov %cr4, %eax
    or $0x20, %eax                  /* CR4.PAE */
    mov %eax, %cr4
    mov $cadence_boot_pml4, %eax
    mov %eax, %cr3
    mov $0xc0000080, %ecx           /* IA32_EFER */
    rdmsr
    or $0x100, %eax                 /* EFER.LME */
    wrmsr
    mov %cr0, %eax
    or $0x80000001, %eax            /* CR0.PG | CR0.PE */
    mov %eax, %cr0

    lgdt cadence_boot_gdt_ptr
    ljmp $0x08, $cadence_start64

    .code64
cadence_start64:
    mov $0x10, %ax
    mov %ax, %ds
    mov %ax, %es
    mov %ax, %ss
    xor %eax, %eax
    mov %ax, %fs
    mov %ax, %gs
    mov $cadence_boot_stack_top, %rsp
    mov %ebp, %edi                  /* arg 1: magic (zero-extends) */
    mov %esi, %esi                  /* arg 2: info address (zero-extends) */
    xor %ebp, %ebp
    call __cadence_start64
3:  cli
    hlt
    jmp 3b

    .section .data.boot, "aw"
    .p2align 3
cadence_boot_gdt:                   /* accessed bits preset: the CPU never writes here */
    .quad 0
    .quad 0x00af9b000000ffff        /* 0x08: 64-bit code, DPL 0 */
    .quad 0x00cf93000000ffff        /* 0x10: flat data */
cadence_boot_gdt_end:
    .p2align 2
cadence_boot_gdt_ptr:
    .short cadence_boot_gdt_end - cadence_boot_gdt - 1
    .long cadence_boot_gdt

    .section .bss.boot, "aw", @nobits
    .p2align 12
cadence_boot_pml4:
    .skip 0x1000
cadence_boot_pdpt:
    .skip 0x1000
cadence_boot_pd:
    .skip 0x4000
    .global cadence_boot_stack_guard
cadence_boot_stack_guard:           /* made not-present by boot.rs: overflow faults */
    .skip 0x1000
cadence_boot_stack:
    .skip 0x20000
cadence_boot_stack_top:

    .code64
