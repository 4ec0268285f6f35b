//! The 82599's statistics (§8.2.3.23): clear-on-read registers, accumulated in
//! software. The octet counters are 36 bits wide, split over a low and a high register;
//! the low half is read first (§8.2.3.23.23: reading the high half clears the pair).
//! The sums are `u64`, so totals past 2^36 octets keep counting (the device's own
//! register would wrap; a read every few seconds keeps each increment far below that:
//! 2^36 octets take 55 s at 10 Gb/s).

use super::regs::{CRCERRS, GORCH, GORCL, GOTCH, GOTCL, GPRC, GPTC, MPC, QPRDC};
use crate::hal::Mmio;
use crate::reg::Regs;

/// Device counters accumulated from the clear-on-read registers (§8.2.3.23).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HwStats {
    /// GPRC: good packets received. Errata (82599 spec update #26): it also counts
    /// packets dropped for lack of a descriptor, so it can exceed what queues saw.
    pub gprc: u64,
    /// GPTC: good packets transmitted.
    pub gptc: u64,
    /// GORC: good octets received (36-bit register).
    pub gorc: u64,
    /// GOTC: good octets transmitted (36-bit register).
    pub gotc: u64,
    /// MPC(0..7): packets missed for lack of packet-buffer room.
    pub mpc: u64,
    /// CRCERRS: frames with a bad CRC.
    pub crcerrs: u64,
    /// QPRDC: frames dropped by DROP_EN because their queue had no descriptor.
    pub qprdc: u64,
}

impl HwStats {
    /// The sums of two readings.
    pub fn plus(self, o: HwStats) -> HwStats {
        HwStats {
            gprc: self.gprc.saturating_add(o.gprc),
            gptc: self.gptc.saturating_add(o.gptc),
            gorc: self.gorc.saturating_add(o.gorc),
            gotc: self.gotc.saturating_add(o.gotc),
            mpc: self.mpc.saturating_add(o.mpc),
            crcerrs: self.crcerrs.saturating_add(o.crcerrs),
            qprdc: self.qprdc.saturating_add(o.qprdc),
        }
    }
}

/// Reads every clear-on-read counter once (which zeroes them) and returns the values;
/// the per-queue drop counters of the first `rx_queues` queues (at most 16 counter sets).
pub(super) fn read_counters<W: Mmio>(r: &Regs<'_, W>, rx_queues: u16) -> HwStats {
    let gorc = {
        let lo = r.read(GORCL).bits();
        lo | r.read(GORCH).get(GORCH::HIGH) << 32
    };
    let gotc = {
        let lo = r.read(GOTCL).bits();
        lo | r.read(GOTCH).get(GOTCH::HIGH) << 32
    };
    HwStats {
        gprc: r.read(GPRC).bits(),
        gptc: r.read(GPTC).bits(),
        gorc,
        gotc,
        mpc: MPC.iter().map(|m| r.read(m).bits()).sum(),
        crcerrs: r.read(CRCERRS).bits(),
        qprdc: QPRDC.iter().take(usize::from(rx_queues)).map(|q| r.read(q).bits()).sum(),
    }
}
