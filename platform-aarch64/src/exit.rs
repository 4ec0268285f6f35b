//! Leaving QEMU with a status: Arm semihosting `SYS_EXIT_EXTENDED`.
//!
//! The statuses are the x86_64 image's (docs/PROTOCOL.md "Exit status": 33 success, 35
//! bad configuration, 37 runtime failure, 39 panic or CPU exception), so the rig tells a
//! pass from a crash the same way on both machines; a QEMU that dies on its own exits 1,
//! and PSCI `SYSTEM_OFF` would exit 0, neither of which is a pass.
//!
//! Facts (Arm "Semihosting for AArch32 and AArch64" v3.0, §4.1 and §5.8/§5.9): on AArch64
//! the call is `HLT #0xF000` with the operation in `W0` and a parameter pointer in `X1`;
//! `SYS_EXIT_EXTENDED` is 0x20 and takes a two-word block `{reason, subcode}`; with reason
//! `ADP_Stopped_ApplicationExit` (0x20026) the subcode is the exit status. QEMU honours it
//! with `-semihosting-config enable=on,target=native` (docs/system/arm/… "Semihosting");
//! without semihosting enabled the `HLT` is an undefined instruction, so `exit` falls
//! back to parking the core.

/// What the image reports when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ExitCode {
    /// The run passed (status 33).
    Success = 33,
    /// Bad boot configuration, including a device tree that lacks what the image needs (35).
    ConfigError = 35,
    /// Runtime failure (37).
    RuntimeFailure = 37,
    /// Panic or CPU exception (39).
    Panic = 39,
}

impl ExitCode {
    /// The exit status QEMU reports for this code.
    pub const fn qemu_status(self) -> i32 {
        self as i32
    }
}

/// `SYS_EXIT_EXTENDED` (semihosting §5.9).
pub const SYS_EXIT_EXTENDED: u32 = 0x20;
/// `ADP_Stopped_ApplicationExit` (semihosting §5.8, table 5-6).
pub const ADP_STOPPED_APPLICATION_EXIT: u64 = 0x20026;

/// Ends the run with `code`; parks the core with interrupts masked if semihosting is off.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub fn exit(code: ExitCode) -> ! {
    let block: [u64; 2] = [ADP_STOPPED_APPLICATION_EXIT, code as u64];
    // SAFETY: the semihosting call reads the two-word block, which lives on this stack for
    // the duration of the call; QEMU then ends the process. Without semihosting the HLT
    // traps to our own vectors, which report and park.
    unsafe {
        core::arch::asm!(
            "hlt #0xf000",
            inout("w0") SYS_EXIT_EXTENDED => _,
            in("x1") block.as_ptr(),
            options(nostack, readonly)
        );
    }
    park()
}

/// Masks interrupts and waits for events forever.
#[cfg(all(target_arch = "aarch64", target_os = "none"))]
pub fn park() -> ! {
    loop {
        // SAFETY: masking interrupts and waiting for an event touch no memory.
        unsafe { core::arch::asm!("msr daifset, #0xf", "wfe", options(nomem, nostack)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_the_x86_protocol() {
        let s = [ExitCode::Success, ExitCode::ConfigError, ExitCode::RuntimeFailure, ExitCode::Panic]
            .map(ExitCode::qemu_status);
        assert_eq!(s, [33, 35, 37, 39]);
    }
}
