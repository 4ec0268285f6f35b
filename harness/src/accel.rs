//! What `/dev/kvm` is on this machine, and what `--kvm` passes QEMU for it.
//!
//! Hardware KVM (VMX/SVM) runs the image's ring-0 code natively: that is where the image's
//! speed means something, and the guest gets what a deployment has (`+tsc-deadline`,
//! `+invtsc`: the banner then reports `timer=tsc-deadline` and an invariant TSC).
//!
//! KVM-PVM (the `kvm_pvm` module, a "Pagetable-based Virtual Machine" for guests whose
//! kernel is paravirtualized) *emulates* a guest's ring-0 code. Cadence's image runs
//! entirely in ring 0, so under it the image is slower than under TCG (measured on
//! the project's KVM-PVM machines: a six-instruction loop costs ~7 800 cycles per iteration against 17 under TCG). `--kvm`
//! still works there — it is a correctness venue like TCG — but xtask says so on a warning
//! line and records it in the JSON summary, and figures from such a run describe the
//! hypervisor, not Cadence. Speed is measured on the host (`cargo xtask run --hosted`).

use std::path::Path;

use serde::Serialize;

/// What kind of KVM this machine offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Kvm {
    /// `/dev/kvm` cannot be opened read-write: `--kvm` falls back to TCG.
    Unusable,
    /// KVM on VMX/SVM: the guest's ring 0 runs natively.
    Hardware,
    /// A KVM that emulates the guest's ring 0 (KVM-PVM); `why` says how it was recognized.
    EmulatesRing0 { why: String },
}

/// The facts [`classify`] looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facts {
    /// `/dev/kvm` opens read-write.
    pub dev_kvm: bool,
    /// `/sys/module/kvm_pvm` exists.
    pub kvm_pvm_module: bool,
    /// `/proc/cpuinfo` lists `vmx` or `svm`.
    pub hw_virt_flag: bool,
}

/// Decides (pure; unit-tested).
pub fn classify(f: &Facts) -> Kvm {
    if !f.dev_kvm {
        return Kvm::Unusable;
    }
    if f.kvm_pvm_module {
        return Kvm::EmulatesRing0 { why: "the kvm_pvm module is loaded (KVM-PVM)".into() };
    }
    if !f.hw_virt_flag {
        return Kvm::EmulatesRing0 {
            why: "the CPU has neither VMX nor SVM, so this KVM cannot run ring 0 natively".into(),
        };
    }
    Kvm::Hardware
}

/// Looks at this machine.
pub fn facts() -> Facts {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Facts {
        dev_kvm: std::fs::OpenOptions::new().read(true).write(true).open("/dev/kvm").is_ok(),
        kvm_pvm_module: Path::new("/sys/module/kvm_pvm").exists(),
        hw_virt_flag: cpuinfo
            .lines()
            .filter(|l| l.starts_with("flags"))
            .any(|l| l.split_whitespace().any(|w| w == "vmx" || w == "svm")),
    }
}

/// This machine's KVM.
pub fn detect() -> Kvm {
    classify(&facts())
}

impl Kvm {
    /// The `-accel`/`-cpu` arguments for a guest under this KVM (`None`: use TCG).
    pub fn qemu_args(&self) -> Option<[&'static str; 4]> {
        match self {
            Kvm::Unusable => None,
            // What a deployment has: the host's CPU with the TSC-deadline timer and an
            // invariant TSC (so the guest can trust it across idle states).
            Kvm::Hardware => Some(["-accel", "kvm", "-cpu", "host,+tsc-deadline,+invtsc"]),
            // PVM passes a minimal CPUID; EPYC with these two is what it can give.
            Kvm::EmulatesRing0 { .. } => Some(["-accel", "kvm", "-cpu", "EPYC,+tsc-deadline,+invtsc"]),
        }
    }

    /// The warning line for `--kvm`, when there is one.
    pub fn warning(&self) -> Option<String> {
        match self {
            Kvm::Unusable => Some("xtask: warning: /dev/kvm is not usable here, running under TCG".into()),
            Kvm::Hardware => None,
            Kvm::EmulatesRing0 { why } => Some(format!(
                "xtask: warning: this KVM emulates the guest's ring 0 ({why}); the image runs entirely in \
                 ring 0, so under it the image runs SLOWER than under TCG. Nothing about Cadence's speed can \
                 be learned from this run; measure at speed with `cargo xtask run --hosted` \
                 (docs/PERFORMANCE.md, \"Where speed is measured\")."
            )),
        }
    }

    /// The `accel` of the JSON summary when `--kvm` was asked.
    pub fn accel_name(&self) -> &'static str {
        match self {
            Kvm::Unusable => "tcg",
            Kvm::Hardware => "kvm",
            Kvm::EmulatesRing0 { .. } => "kvm-pvm",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies() {
        let all = Facts { dev_kvm: true, kvm_pvm_module: false, hw_virt_flag: true };
        assert_eq!(classify(&all), Kvm::Hardware);
        assert_eq!(classify(&Facts { dev_kvm: false, ..all.clone() }), Kvm::Unusable);
        let pvm = classify(&Facts { kvm_pvm_module: true, ..all.clone() });
        assert!(matches!(&pvm, Kvm::EmulatesRing0 { why } if why.contains("kvm_pvm")), "{pvm:?}");
        let novirt = classify(&Facts { hw_virt_flag: false, ..all.clone() });
        assert!(matches!(&novirt, Kvm::EmulatesRing0 { why } if why.contains("VMX")), "{novirt:?}");
        assert_eq!(Kvm::Hardware.qemu_args().map(|a| a[3]), Some("host,+tsc-deadline,+invtsc"));
        assert!(pvm.qemu_args().is_some_and(|a| a[3].contains("+tsc-deadline,+invtsc")));
        assert_eq!(Kvm::Unusable.qemu_args(), None);
        assert!(pvm.warning().is_some_and(|w| w.contains("SLOWER than under TCG")));
        assert_eq!(Kvm::Hardware.warning(), None);
        assert_eq!((pvm.accel_name(), Kvm::Hardware.accel_name()), ("kvm-pvm", "kvm"));
    }

    #[test]
    fn this_machine_is_classified_consistently() {
        // Whatever this machine is, the facts and the verdict agree.
        let f = facts();
        match classify(&f) {
            Kvm::Unusable => assert!(!f.dev_kvm),
            Kvm::Hardware => assert!(f.dev_kvm && f.hw_virt_flag && !f.kvm_pvm_module),
            Kvm::EmulatesRing0 { .. } => assert!(f.dev_kvm && (f.kvm_pvm_module || !f.hw_virt_flag)),
        }
    }
}
