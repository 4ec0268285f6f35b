//! The port's statistics (XL710 datasheet §10.2.2.21 "Statistics Registers"): 48-bit
//! counters (32-bit for drops and CRC errors) that do **not** clear on read and wrap.
//! The driver keeps the last raw value of each and adds the difference modulo the
//! counter's width, so totals are exact across wraps as long as a counter is read at
//! least once per wrap (2^48 octets take 78 h at 40 Gb/s; the 32-bit drop counter wraps
//! after 2^32 drops).
//!
//! A 48-bit counter is two dwords; a carry between reading them would tear the value, so
//! the high dword is read before and after the low one and the low one re-read when the
//! high one moved.

use super::regs::{GLPRT_BPRC, GLPRT_CRCERRS, GLPRT_GORC, GLPRT_GOTC, GLPRT_MPRC, GLPRT_RDPC, GLPRT_UPRC, GLPRT_UPTC};
use crate::hal::Mmio;
use crate::reg::{At, Place, Register, Regs};

/// Port counters since the bring-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct HwStats {
    /// GLPRT_GORC: good octets received.
    pub rx_bytes: u64,
    /// GLPRT_UPRC + MPRC + BPRC: good packets received.
    pub rx_packets: u64,
    /// GLPRT_RDPC: packets dropped for want of a descriptor or an enabled queue.
    pub rx_dropped: u64,
    /// GLPRT_CRCERRS: frames with a bad CRC.
    pub crc_errors: u64,
    /// GLPRT_GOTC: good octets transmitted.
    pub tx_bytes: u64,
    /// GLPRT_UPTC: unicast packets transmitted.
    pub tx_unicast: u64,
}

/// Raw counter values at the last reading.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Raw {
    gorc: u64,
    uprc: u64,
    mprc: u64,
    bprc: u64,
    rdpc: u64,
    crcerrs: u64,
    gotc: u64,
    uptc: u64,
}

/// A 48-bit counter at `p`, read without tearing.
fn read48<W: Mmio, R: Register>(r: &Regs<'_, W>, p: At<R>) -> u64 {
    let (lo, hi) = (p.offset(), p.offset() + 4);
    let w = r.window();
    let h1 = w.read32(hi);
    let l = w.read32(lo);
    let h2 = w.read32(hi);
    let l = if h1 == h2 { l } else { w.read32(lo) };
    (u64::from(h2 & 0xFFFF) << 32) | u64::from(l)
}

/// Reads port `port`'s counters.
pub(super) fn read<W: Mmio>(r: &Regs<'_, W>, port: usize) -> Raw {
    Raw {
        gorc: GLPRT_GORC.at(port).map_or(0, |p| read48(r, p)),
        uprc: GLPRT_UPRC.at(port).map_or(0, |p| read48(r, p)),
        mprc: GLPRT_MPRC.at(port).map_or(0, |p| read48(r, p)),
        bprc: GLPRT_BPRC.at(port).map_or(0, |p| read48(r, p)),
        rdpc: GLPRT_RDPC.at(port).map_or(0, |p| r.read(p).bits()),
        crcerrs: GLPRT_CRCERRS.at(port).map_or(0, |p| r.read(p).bits()),
        gotc: GLPRT_GOTC.at(port).map_or(0, |p| read48(r, p)),
        uptc: GLPRT_UPTC.at(port).map_or(0, |p| read48(r, p)),
    }
}

/// `now - before` modulo 2^`bits`.
const fn delta(now: u64, before: u64, bits: u32) -> u64 {
    now.wrapping_sub(before) & ((1u64 << bits) - 1)
}

impl HwStats {
    /// These totals plus what the counters advanced from `before` to `now`.
    pub(super) fn advance(self, before: &Raw, now: &Raw) -> HwStats {
        HwStats {
            rx_bytes: self.rx_bytes + delta(now.gorc, before.gorc, 48),
            rx_packets: self.rx_packets
                + delta(now.uprc, before.uprc, 48)
                + delta(now.mprc, before.mprc, 48)
                + delta(now.bprc, before.bprc, 48),
            rx_dropped: self.rx_dropped + delta(now.rdpc, before.rdpc, 32),
            crc_errors: self.crc_errors + delta(now.crcerrs, before.crcerrs, 32),
            tx_bytes: self.tx_bytes + delta(now.gotc, before.gotc, 48),
            tx_unicast: self.tx_unicast + delta(now.uptc, before.uptc, 48),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_wrap_at_the_counter_width() {
        assert_eq!(delta(5, (1 << 48) - 3, 48), 8);
        assert_eq!(delta(2, u64::from(u32::MAX), 32), 3);
        assert_eq!(delta(100, 40, 48), 60);
        let before = Raw { gorc: (1 << 48) - 10, rdpc: u64::from(u32::MAX), ..Raw::default() };
        let now = Raw { gorc: 30, rdpc: 4, ..Raw::default() };
        let s = HwStats::default().advance(&before, &now);
        assert_eq!((s.rx_bytes, s.rx_dropped), (40, 5));
    }
}
