//! CPU identification (CPUID), the time-stamp counter, and model-specific registers.
//!
//! CPUID bits used (Intel SDM vol. 2A, CPUID): `1:EDX[4]` TSC,
//! `1:ECX[3]` MONITOR/MWAIT, `1:ECX[21]` x2APIC, `1:ECX[24]` TSC-deadline, `1:ECX[31]` hypervisor present,
//! `0x80000001:EDX[26]` 1 GiB pages, `0x80000007:EDX[8]` invariant TSC,
//! `0x80000008:EAX[7:0]` physical address bits, `0x80000002..4` brand string.
//! CPUID and RDTSC are unprivileged and run on the host too; the MSR accessors are
//! `unsafe` and only meaningful at ring 0.

use core::arch::x86_64::CpuidResult;

/// Executes CPUID with `leaf` in EAX and `sub` in ECX.
pub fn cpuid(leaf: u32, sub: u32) -> CpuidResult {
    core::arch::x86_64::__cpuid_count(leaf, sub)
}

/// Reads the time-stamp counter.
#[inline(always)]
pub fn rdtsc() -> u64 {
    // SAFETY: RDTSC has no side effects; CR4.TSD is clear (the platform never sets it),
    // so it is allowed at every privilege level.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Reads model-specific register `msr`.
///
/// # Safety
/// Must run at ring 0 and `msr` must exist on this CPU (else #GP).
#[cfg(target_os = "none")]
pub unsafe fn rdmsr(msr: u32) -> u64 {
    // SAFETY: upheld by the caller (ring 0, the MSR exists).
    unsafe { x86_64::registers::model_specific::Msr::new(msr).read() }
}

/// Writes model-specific register `msr`.
///
/// # Safety
/// Must run at ring 0, `msr` must exist, and the write must not break memory safety
/// (e.g. EFER, PAT or the APIC base change how memory behaves).
#[cfg(target_os = "none")]
pub unsafe fn wrmsr(msr: u32, val: u64) {
    // SAFETY: upheld by the caller.
    unsafe { x86_64::registers::model_specific::Msr::new(msr).write(val) }
}

/// The CPU features the platform looks at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
pub struct Features {
    /// Highest basic leaf.
    pub max_leaf: u32,
    /// Highest extended leaf.
    pub max_ext_leaf: u32,
    /// Running under a hypervisor (`1:ECX[31]`).
    pub hypervisor: bool,
    /// Highest hypervisor leaf (0x40000000 EAX), 0 on bare metal.
    pub hv_max_leaf: u32,
    /// TSC present.
    pub tsc: bool,
    /// Invariant TSC.
    pub invariant_tsc: bool,
    /// LAPIC TSC-deadline mode.
    pub tsc_deadline: bool,
    /// x2APIC.
    pub x2apic: bool,
    /// MONITOR/MWAIT (`1:ECX[3]`).
    pub monitor: bool,
    /// 1 GiB pages.
    pub pdpe1gb: bool,
    /// Physical address width in bits (36 if not enumerated).
    pub phys_bits: u8,
}

/// Reads the features.
pub fn features() -> Features {
    let l0 = cpuid(0, 0);
    let l1 = cpuid(1, 0);
    let e0 = cpuid(0x8000_0000, 0);
    let max_ext = if e0.eax >= 0x8000_0000 { e0.eax } else { 0 };
    let ext = |leaf: u32| if max_ext >= leaf { Some(cpuid(leaf, 0)) } else { None };
    let hypervisor = l1.ecx & (1 << 31) != 0;
    let hv_max_leaf = if hypervisor {
        let h = cpuid(0x4000_0000, 0).eax;
        if (0x4000_0000..0x4001_0000).contains(&h) { h } else { 0 }
    } else {
        0
    };
    Features {
        max_leaf: l0.eax,
        max_ext_leaf: max_ext,
        hypervisor,
        hv_max_leaf,
        tsc: l1.edx & (1 << 4) != 0,
        invariant_tsc: ext(0x8000_0007).is_some_and(|r| r.edx & (1 << 8) != 0),
        tsc_deadline: l1.ecx & (1 << 24) != 0,
        x2apic: l1.ecx & (1 << 21) != 0,
        monitor: l1.ecx & (1 << 3) != 0,
        pdpe1gb: ext(0x8000_0001).is_some_and(|r| r.edx & (1 << 26) != 0),
        phys_bits: ext(0x8000_0008).map_or(36, |r| (r.eax & 0xff) as u8).max(32),
    }
}

/// The processor brand string (CPUID 0x80000002..0x80000004), trimmed; empty if the
/// CPU does not report one.
pub fn brand() -> heapless::String<48> {
    if cpuid(0x8000_0000, 0).eax < 0x8000_0004 {
        return heapless::String::new();
    }
    let mut words = [0u32; 12];
    for (i, leaf) in (0x8000_0002..=0x8000_0004u32).enumerate() {
        let r = cpuid(leaf, 0);
        words[i * 4..i * 4 + 4].copy_from_slice(&[r.eax, r.ebx, r.ecx, r.edx]);
    }
    brand_from_words(&words)
}

/// Decodes the brand string from the 12 registers of leaves 0x80000002..4: ASCII up to
/// the first NUL, surrounding spaces trimmed, non-printable bytes and `"` replaced
/// by `?` (the banner quotes it).
pub fn brand_from_words(words: &[u32; 12]) -> heapless::String<48> {
    let mut bytes = [0u8; 48];
    for (i, w) in words.iter().enumerate() {
        bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    let raw = bytes.split(|&b| b == 0).next().unwrap_or(&[]);
    let mut out: heapless::String<48> = heapless::String::new();
    for &b in raw {
        let c = if b.is_ascii_graphic() && b != b'"' || b == b' ' { b as char } else { '?' };
        // Cannot overflow: at most 48 one-byte chars.
        let _ = out.push(c);
    }
    heapless::String::try_from(out.trim()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[u8]) -> [u32; 12] {
        let mut b = [0u8; 48];
        b[..s.len()].copy_from_slice(s);
        let mut w = [0u32; 12];
        for i in 0..12 {
            w[i] = u32::from_le_bytes(b[i * 4..i * 4 + 4].try_into().unwrap());
        }
        w
    }

    #[test]
    fn brand_is_trimmed_and_sanitized() {
        assert_eq!(brand_from_words(&words(b"QEMU TCG CPU version 2.5+")).as_str(), "QEMU TCG CPU version 2.5+");
        assert_eq!(brand_from_words(&words(b"      Intel(R) Xeon(R) \"X\"\x01 ")).as_str(), "Intel(R) Xeon(R) ?X??");
        assert_eq!(brand_from_words(&[0; 12]).as_str(), "");
    }

    #[test]
    fn host_cpu_has_a_tsc() {
        let f = features();
        assert!(f.tsc);
        assert!(f.phys_bits >= 32);
        assert!(rdtsc() > 0);
    }
}
