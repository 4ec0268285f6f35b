//! PSCI calls over the conduit the device tree names (`hvc` or `smc`).
//!
//! Facts (Arm Power State Coordination Interface, DEN 0022D, §5.1 and §5.6; SMC Calling
//! Convention DEN 0028, §2.7): the function ID goes in W0, arguments in X1–X3, the result
//! comes back in X0; X4–X17 may be clobbered (SMCCC 1.0). `PSCI_VERSION` = 0x8400_0000
//! (major in \[31:16\], minor in \[15:0\]); `CPU_ON` (SMC64) = 0xC400_0003 with X1 = the
//! target's MPIDR affinity, X2 = the physical entry address, X3 = a context ID handed to
//! the new core in X0. The core starts at the caller's exception level, MMU and caches
//! off (§6.4.3). Return codes (§5.2.2): 0 success, −2 invalid parameters, −4 already on,
//! −5 on pending, −6 internal failure, −9 invalid address.

#[cfg(all(target_arch = "aarch64", target_os = "none"))]
use crate::dt::PsciMethod;

/// `PSCI_VERSION`.
pub const PSCI_VERSION: u32 = 0x8400_0000;
/// `CPU_ON`, SMC64.
pub const CPU_ON: u32 = 0xc400_0003;

/// A PSCI error return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PsciError(pub i64);

impl core::fmt::Display for PsciError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let name = match self.0 {
            -1 => "NOT_SUPPORTED",
            -2 => "INVALID_PARAMETERS",
            -3 => "DENIED",
            -4 => "ALREADY_ON",
            -5 => "ON_PENDING",
            -6 => "INTERNAL_FAILURE",
            -9 => "INVALID_ADDRESS",
            _ => "unknown error",
        };
        write!(f, "PSCI {name} ({})", self.0)
    }
}

/// A PSCI call's result: non-negative is success, negative an error code.
pub fn check(ret: i64) -> Result<u64, PsciError> {
    if ret < 0 { Err(PsciError(ret)) } else { Ok(ret as u64) }
}

/// Calls PSCI function `fid` with three arguments.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub fn call(method: PsciMethod, fid: u32, a1: u64, a2: u64, a3: u64) -> i64 {
    let mut x0 = u64::from(fid);
    // SAFETY: a PSCI call to the firmware or hypervisor the tree names; per SMCCC it
    // returns in X0 and may clobber X1–X17, all declared. CPU_ON's entry address and
    // context are the caller's responsibility (see `smp`).
    unsafe {
        match method {
            PsciMethod::Hvc => core::arch::asm!("hvc #0", inout("x0") x0, inout("x1") a1 => _, inout("x2") a2 => _,
                inout("x3") a3 => _, out("x4") _, out("x5") _, out("x6") _, out("x7") _, out("x8") _, out("x9") _,
                out("x10") _, out("x11") _, out("x12") _, out("x13") _, out("x14") _, out("x15") _, out("x16") _,
                out("x17") _, options(nostack)),
            PsciMethod::Smc => core::arch::asm!("smc #0", inout("x0") x0, inout("x1") a1 => _, inout("x2") a2 => _,
                inout("x3") a3 => _, out("x4") _, out("x5") _, out("x6") _, out("x7") _, out("x8") _, out("x9") _,
                out("x10") _, out("x11") _, out("x12") _, out("x13") _, out("x14") _, out("x15") _, out("x16") _,
                out("x17") _, options(nostack)),
        }
    }
    x0 as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_codes() {
        assert_eq!(check(0), Ok(0));
        assert_eq!(check(0x1_0000), Ok(0x1_0000), "PSCI_VERSION 1.0");
        assert_eq!(check(-4), Err(PsciError(-4)));
        assert_eq!(PsciError(-4).to_string(), "PSCI ALREADY_ON (-4)");
    }
}
