//! Link bring-up and state (82599 §4.6.4 "Link Setup", §8.2.3.22.19 AUTOC,
//! §8.2.3.22.20 LINKS).
//!
//! The link mode the EEPROM loaded into AUTOC is kept (forcing one, as ixy does, breaks
//! other PHYs and cables); the driver checks that an SFP+ cage holds a module where the
//! board has one, restarts auto-negotiation (AUTOC.RESTART_AN, self-clearing) and waits
//! for LINKS.UP with a deadline. On the X540/X550 copper parts the PHY negotiates on its
//! own after the reset; the restart is harmless there.

use cadence_core::time::{Clock, poll_until};

use super::SfpCage;
use super::regs::{AUTOC, ESDP, LINKS};
use crate::hal::Mmio;
use crate::reg::Regs;

/// Link state from LINKS (§8.2.3.22.20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Link {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (0 when down or unknown).
    pub mbps: u32,
}

/// The link as LINKS reads now.
pub(super) fn read<W: Mmio>(r: &Regs<'_, W>) -> Link {
    let v = r.read(LINKS);
    let up = v.is_set(LINKS::UP);
    let mbps = match (up, v.get(LINKS::SPEED)) {
        (true, 1) => 100,
        (true, 2) => 1_000,
        (true, 3) => 10_000,
        _ => 0,
    };
    Link { up, mbps }
}

/// Whether the cage `cage` (if the board has one) holds a module.
pub(super) fn module_present<W: Mmio>(r: &Regs<'_, W>, cage: Option<SfpCage>) -> bool {
    match cage {
        None => true,
        Some(SfpCage::Sdp2Present) => r.read(ESDP).is_set(ESDP::SDP2),
        Some(SfpCage::Sdp0Absent) => !r.read(ESDP).is_set(ESDP::SDP0),
    }
}

/// Restarts auto-negotiation with the link mode AUTOC holds (§4.6.4.2: "set
/// AUTOC.Restart_AN"; the bit clears itself).
pub(super) fn restart_an<W: Mmio>(r: &Regs<'_, W>) {
    r.modify(AUTOC, |v| v.set(AUTOC::RESTART_AN));
}

/// Waits up to `timeout_ms` for LINKS.UP; returns the link, up or not.
pub(super) fn wait<W: Mmio, C: Clock + ?Sized>(r: &Regs<'_, W>, clock: &C, timeout_ms: u32) -> Link {
    let _ = poll_until(clock, clock.rate().ticks_from_ms(timeout_ms.into()), || r.read(LINKS).is_set(LINKS::UP));
    read(r)
}
