//! What the bare-metal images of both machines share (x86_64: `image/`; aarch64:
//! `image_aarch64/`): the chain configuration from the boot module, NIC selection and
//! bring-up, and the human log.

pub mod chain;
pub mod nics;

/// One line of the human log: formatted here, sent as a defmt string (x86_64: COM2;
/// aarch64: semihosting, see `image_aarch64`), so the console keeps the machine lines. A
/// line longer than 1 KiB is cut.
pub(crate) fn log(args: core::fmt::Arguments<'_>) {
    use core::fmt::Write as _;
    let mut s: heapless::String<1024> = heapless::String::new();
    let _ = s.write_fmt(args);
    defmt::info!("{=str}", s.as_str());
}
