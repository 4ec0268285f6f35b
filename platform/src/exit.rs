//! Leaving QEMU: isa-debug-exit at port 0xf4 (PROTOCOL.md "Exit status").
//!
//! Writing `v` makes QEMU exit with status `v << 1 | 1`. Where the device is absent
//! (real hardware), `exit` halts the core forever instead.

/// What the image reports when it stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, defmt::Format)]
#[repr(u8)]
pub enum ExitCode {
    /// The run passed (QEMU status 33).
    Success = 0x10,
    /// Bad boot configuration (35).
    ConfigError = 0x11,
    /// Runtime failure: no NIC, driver init failed, `max_s` reached (37).
    RuntimeFailure = 0x12,
    /// Panic or CPU exception (39).
    Panic = 0x13,
}

impl ExitCode {
    /// The value written to the isa-debug-exit port.
    pub const fn value(self) -> u8 {
        self as u8
    }

    /// The exit status QEMU reports for this code.
    pub const fn qemu_status(self) -> i32 {
        (self as i32) << 1 | 1
    }
}

/// The isa-debug-exit I/O port (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`).
pub const DEBUG_EXIT_PORT: u16 = 0xf4;

/// Ends the run: writes `code` to isa-debug-exit, then halts forever with interrupts
/// off in case the device is absent.
#[cfg(target_os = "none")]
pub fn exit(code: ExitCode) -> ! {
    let mut port = x86_64::instructions::port::Port::<u32>::new(DEBUG_EXIT_PORT);
    // SAFETY: port 0xf4 is isa-debug-exit under QEMU and unused on PC hardware; the
    // write has no memory effects.
    unsafe { port.write(u32::from(code.value())) };
    halt_forever()
}

/// Disables interrupts and halts the core for good.
#[cfg(target_os = "none")]
pub fn halt_forever() -> ! {
    loop {
        x86_64::instructions::interrupts::disable();
        x86_64::instructions::hlt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_match_the_protocol() {
        let s: Vec<i32> = [ExitCode::Success, ExitCode::ConfigError, ExitCode::RuntimeFailure, ExitCode::Panic]
            .iter()
            .map(|c| c.qemu_status())
            .collect();
        assert_eq!(s, [33, 35, 37, 39]);
    }
}
