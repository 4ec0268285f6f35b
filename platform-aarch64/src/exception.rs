//! Exceptions: the syndrome decoded and reported, then the image exits with status 39
//! ([`crate::exit::ExitCode::Panic`]), as the x86_64 image's IDT handlers do.
//!
//! Facts (Arm ARM DDI 0487, D1.10.2 "Exception vectors" and D17.2.37 "ESR_EL1"): the vector
//! table is 2 KiB aligned (VBAR_EL1 bits \[10:0\] are RES0), 16 entries of 0x80 bytes in
//! four groups — current EL with SP_EL0, current EL with SP_ELx, lower EL AArch64, lower
//! EL AArch32 — each group synchronous, IRQ, FIQ, SError. ESR_EL1.EC is bits \[31:26\],
//! IL bit 25, ISS bits \[24:0\]; ELR_EL1 holds the return address, FAR_EL1 the faulting
//! virtual address (valid for aborts and alignment faults).

/// Which of the 16 vectors was taken, by group and kind.
pub fn vector_name(index: u64) -> &'static str {
    const NAMES: [&str; 16] = [
        "sync (EL1, SP_EL0)",
        "irq (EL1, SP_EL0)",
        "fiq (EL1, SP_EL0)",
        "serror (EL1, SP_EL0)",
        "sync (EL1)",
        "irq (EL1)",
        "fiq (EL1)",
        "serror (EL1)",
        "sync (EL0, AArch64)",
        "irq (EL0, AArch64)",
        "fiq (EL0, AArch64)",
        "serror (EL0, AArch64)",
        "sync (EL0, AArch32)",
        "irq (EL0, AArch32)",
        "fiq (EL0, AArch32)",
        "serror (EL0, AArch32)",
    ];
    NAMES.get(index as usize).copied().unwrap_or("unknown vector")
}

/// ESR_EL1.EC, bits \[31:26\].
pub const fn exception_class(esr: u64) -> u8 {
    ((esr >> 26) & 0x3f) as u8
}

/// A name for the exception classes the platform can meet (Arm ARM D17.2.37, table of EC
/// values); others are reported by number.
pub fn class_name(ec: u8) -> &'static str {
    match ec {
        0x00 => "unknown reason",
        0x01 => "WFI/WFE trapped",
        0x07 => "FP/SIMD access trapped",
        0x0e => "illegal execution state",
        0x15 => "SVC (AArch64)",
        0x16 => "HVC (AArch64)",
        0x17 => "SMC (AArch64)",
        0x18 => "MSR/MRS/system instruction trapped",
        0x20 => "instruction abort from a lower EL",
        0x21 => "instruction abort (same EL)",
        0x22 => "PC alignment fault",
        0x24 => "data abort from a lower EL",
        0x25 => "data abort (same EL)",
        0x26 => "SP alignment fault",
        0x2f => "SError",
        0x3c => "BRK (AArch64)",
        _ => "other",
    }
}

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
#[allow(unsafe_code)] // `no_mangle`: the vectors in `boot` branch to it by name
#[unsafe(no_mangle)]
extern "C" fn cadence_aarch64_exception(vector: u64, esr: u64, elr: u64, far: u64) -> ! {
    // A FIQ (vectors 2 and 6: current EL, SP0 or SPx) may be a stop request.
    #[cfg(all(target_arch = "aarch64", target_os = "none"))]
    if vector == 2 || vector == 6 {
        crate::fence::on_fiq();
    }
    let ec = exception_class(esr);
    if ec == 0x25 {
        match crate::stack::owner_of_guard(far) {
            Some(None) => crate::println!(
                "error: stack overflow: the boot core ran past its {} KiB stack into the guard page (FAR_EL1={far:#x} ELR_EL1={elr:#x})",
                crate::stack::BOOT_STACK_SIZE >> 10
            ),
            Some(Some(i)) => crate::println!(
                "error: stack overflow: core {i} ran past its {} KiB stack into the guard page (FAR_EL1={far:#x} ELR_EL1={elr:#x})",
                crate::stack::STACK_SIZE >> 10
            ),
            None => {}
        }
    }
    crate::println!(
        "error: CPU exception: {}: ESR_EL1={esr:#x} (EC {ec:#04x}: {}) ELR_EL1={elr:#x} FAR_EL1={far:#x}",
        vector_name(vector),
        class_name(ec)
    );
    crate::exit::exit(crate::exit::ExitCode::Panic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_syndrome() {
        // A data abort at EL1 with a translation fault level 1 (ISS DFSC 0b000101), IL=1.
        let esr = 0x25 << 26 | 1 << 25 | 0b000101;
        assert_eq!(exception_class(esr), 0x25);
        assert_eq!(class_name(exception_class(esr)), "data abort (same EL)");
        assert_eq!(class_name(exception_class(0x3c << 26 | 1 << 25)), "BRK (AArch64)");
        assert_eq!(vector_name(4), "sync (EL1)");
        assert_eq!(vector_name(16), "unknown vector");
    }
}
