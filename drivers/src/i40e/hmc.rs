//! The Host Memory Cache for the LAN queue contexts (XL710 datasheet §7.9 "Host Memory
//! Cache"; §8.3.3.2 and §8.4.3.4 for the receive and transmit queue contexts).
//!
//! The XL710 keeps each queue's state (ring base, length, buffer sizes ...) not in
//! registers but in a context object in host memory, reached through the function's
//! private memory (FPM) space. Direct mode: one segment descriptor (SD 0 of the PF's
//! partition) maps the first 2 MiB of the FPM onto one physically contiguous backing
//! area; TX contexts start at FPM 0, RX contexts after them (512-byte aligned), and
//! `GLHMC_LAN{TX,RX}{BASE,CNT}` tell the device where. The driver writes a context into
//! the backing memory before it asks the device to enable the queue; the device reads it
//! at the enable. HMC errors are silent: `PFHMC_ERRORINFO` is checked afterwards.
//!
//! Contexts are bit-packed little-endian structures whose fields do not follow word
//! boundaries (the base is 57 bits at bit 32, the RX length 13 bits at bit 89), so
//! they are not registers: [`CtxField`] packs them, from the field tables of §8.3.3.2.2
//! and §8.4.3.4.2.

use super::regs::{
    GLHMC_LANQMAX, GLHMC_LANRXBASE, GLHMC_LANRXCNT, GLHMC_LANRXOBJSZ, GLHMC_LANTXBASE, GLHMC_LANTXCNT,
    GLHMC_LANTXOBJSZ, GLHMC_SDPART, PFHMC_ERRORINFO, PFHMC_SDCMD, PFHMC_SDDATAHIGH, PFHMC_SDDATALOW,
};
use crate::hal::{Dma, DmaAlloc, Mmio};
use crate::reg::{Regs, Value};

/// Bytes one segment descriptor maps.
pub const SD_BYTES: usize = 2 << 20;
/// Backing pages (4 KiB) of a direct segment descriptor.
pub const SD_PAGES: u64 = 512;
/// Bytes of a TX queue context (GLHMC_LANTXOBJSZ = 7).
pub const TX_CTX_LEN: usize = 128;
/// Bytes of an RX queue context (GLHMC_LANRXOBJSZ = 5).
pub const RX_CTX_LEN: usize = 32;
/// Granularity of the FPM base registers.
const FPM_BASE_UNIT: usize = 512;

/// A field of a queue context: `width` bits at bit `lsb` of the byte image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CtxField {
    /// Lowest bit.
    pub lsb: u16,
    /// Width in bits (1..=64).
    pub width: u8,
}

impl CtxField {
    const fn new(lsb: u16, width: u8) -> Self {
        Self { lsb, width }
    }

    /// Writes `value` (truncated to the width) into `img`, keeping every other bit;
    /// bits past the image's end are not written.
    pub fn put(self, img: &mut [u8], value: u64) {
        let value = if self.width >= 64 { value } else { value & ((1u64 << self.width) - 1) };
        for b in 0..u16::from(self.width) {
            let bit = usize::from(self.lsb + b);
            if let Some(byte) = img.get_mut(bit / 8) {
                let mask = 1u8 << (bit % 8);
                if value >> b & 1 == 1 {
                    *byte |= mask;
                } else {
                    *byte &= !mask;
                }
            }
        }
    }

    /// Reads the field out of `img` (bits past the end read as 0).
    pub fn get(self, img: &[u8]) -> u64 {
        (0..u16::from(self.width)).fold(0, |v, b| {
            let bit = usize::from(self.lsb + b);
            let set = img.get(bit / 8).is_some_and(|byte| byte >> (bit % 8) & 1 == 1);
            v | u64::from(set) << b
        })
    }
}

/// The LAN RX queue context fields (§8.3.3.2.2).
pub mod rx {
    use super::CtxField;
    /// Head (written by the device; 0 at enable).
    pub const HEAD: CtxField = CtxField::new(0, 13);
    /// Ring base in 128-byte units.
    pub const BASE: CtxField = CtxField::new(32, 57);
    /// Descriptors in the ring.
    pub const QLEN: CtxField = CtxField::new(89, 13);
    /// Data buffer size in 128-byte units.
    pub const DBUFF: CtxField = CtxField::new(102, 7);
    /// Header buffer size in 64-byte units.
    pub const HBUFF: CtxField = CtxField::new(109, 5);
    /// Descriptor type: 0 = one buffer, no header split.
    pub const DTYPE: CtxField = CtxField::new(114, 2);
    /// Descriptor size: 0 = 16 bytes, 1 = 32 bytes.
    pub const DSIZE: CtxField = CtxField::new(116, 1);
    /// Strip the CRC.
    pub const CRCSTRIP: CtxField = CtxField::new(117, 1);
    /// L2 tag 1 in the descriptor's first tag field.
    pub const L2TSEL: CtxField = CtxField::new(119, 1);
    /// Largest frame accepted.
    pub const RXMAX: CtxField = CtxField::new(174, 14);
    /// Descriptor prefetch threshold.
    pub const LRXQTHRESH: CtxField = CtxField::new(198, 3);
    /// Prefetch enable.
    pub const PREFENA: CtxField = CtxField::new(201, 1);
}

/// The LAN TX queue context fields (§8.4.3.4.2).
pub mod tx {
    use super::CtxField;
    /// Head (0 at enable).
    pub const HEAD: CtxField = CtxField::new(0, 13);
    /// A new context: the device resets its internal state for the queue.
    pub const NEW_CONTEXT: CtxField = CtxField::new(30, 1);
    /// Ring base in 128-byte units.
    pub const BASE: CtxField = CtxField::new(32, 57);
    /// Head write-back enable (off: descriptor write-back).
    pub const HEAD_WB_ENA: CtxField = CtxField::new(160, 1);
    /// Descriptors in the ring.
    pub const QLEN: CtxField = CtxField::new(161, 13);
    /// Head write-back address.
    pub const HEAD_WB_ADDR: CtxField = CtxField::new(192, 64);
    /// The TC's queue set handle (Get VSI Parameters' `qs_handle`).
    pub const RDYLIST: CtxField = CtxField::new(980, 10);
}

/// What a receive queue's context says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxCtx {
    /// Ring physical address (128-byte aligned).
    pub base: u64,
    /// Descriptors.
    pub qlen: u16,
    /// Data buffer bytes (a multiple of 128).
    pub buf_bytes: u16,
    /// Largest frame.
    pub rxmax: u16,
}

impl RxCtx {
    /// The context's byte image: 32-byte descriptors, one buffer, CRC stripped,
    /// prefetch on.
    pub fn image(&self) -> [u8; RX_CTX_LEN] {
        let mut img = [0u8; RX_CTX_LEN];
        rx::HEAD.put(&mut img, 0);
        rx::BASE.put(&mut img, self.base / 128);
        rx::QLEN.put(&mut img, self.qlen.into());
        rx::DBUFF.put(&mut img, u64::from(self.buf_bytes) / 128);
        rx::HBUFF.put(&mut img, 0);
        rx::DTYPE.put(&mut img, 0);
        rx::DSIZE.put(&mut img, 1);
        rx::CRCSTRIP.put(&mut img, 1);
        rx::L2TSEL.put(&mut img, 1);
        rx::RXMAX.put(&mut img, self.rxmax.into());
        rx::LRXQTHRESH.put(&mut img, 2);
        rx::PREFENA.put(&mut img, 1);
        img
    }
}

/// What a transmit queue's context says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxCtx {
    /// Ring physical address (128-byte aligned).
    pub base: u64,
    /// Descriptors.
    pub qlen: u16,
    /// Queue set handle of the VSI's TC 0.
    pub rdylist: u16,
}

impl TxCtx {
    /// The context's byte image: a new context, descriptor write-back.
    pub fn image(&self) -> [u8; TX_CTX_LEN] {
        let mut img = [0u8; TX_CTX_LEN];
        tx::HEAD.put(&mut img, 0);
        tx::NEW_CONTEXT.put(&mut img, 1);
        tx::BASE.put(&mut img, self.base / 128);
        tx::HEAD_WB_ENA.put(&mut img, 0);
        tx::QLEN.put(&mut img, self.qlen.into());
        tx::RDYLIST.put(&mut img, self.rdylist.into());
        img
    }
}

/// Why the HMC could not be set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum HmcError {
    /// The device's context object sizes are not the XL710's (128 / 32 bytes).
    ObjectSize,
    /// More queues than the device allows a function (GLHMC_LANQMAX).
    TooManyQueues,
    /// The PF has no segment descriptor (GLHMC_SDPART).
    NoSegment,
    /// No DMA memory for the backing area.
    Memory,
    /// PFHMC_ERRORINFO reports an error (type, object).
    Device {
        /// HMC_ERROR_TYPE.
        error_type: u8,
        /// HMC_OBJECT_TYPE.
        object: u8,
    },
}

impl core::fmt::Display for HmcError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            HmcError::ObjectSize => f.write_str("context object sizes are not 128/32 bytes"),
            HmcError::TooManyQueues => f.write_str("more queues than GLHMC_LANQMAX"),
            HmcError::NoSegment => f.write_str("the PF has no segment descriptor (GLHMC_SDPART)"),
            HmcError::Memory => f.write_str("no DMA memory for the 2 MiB backing area"),
            HmcError::Device { error_type, object } => {
                write!(f, "PFHMC_ERRORINFO: error type {error_type}, object type {object}")
            }
        }
    }
}

/// The PF's HMC: the backing memory and where the contexts sit in it.
#[derive(Debug)]
pub struct Hmc<R> {
    backing: R,
    rx_base: usize,
    queues: u16,
}

impl<R: Dma> Hmc<R> {
    /// Sets up direct-mode backing for `queues` TX and RX contexts of PF `pf` (§7.9.3):
    /// checks the object sizes, allocates 2 MiB, writes SD 0, and the LAN object bases
    /// and counts.
    pub fn try_new<W: Mmio, A: DmaAlloc<Region = R>>(
        bar: &W,
        dma: &mut A,
        pf: usize,
        queues: u16,
    ) -> Result<Self, HmcError> {
        let r = Regs::new(bar);
        let tx_obj = 1usize << r.read(GLHMC_LANTXOBJSZ).get(GLHMC_LANTXOBJSZ::SIZE);
        let rx_obj = 1usize << r.read(GLHMC_LANRXOBJSZ).get(GLHMC_LANRXOBJSZ::SIZE);
        if tx_obj != TX_CTX_LEN || rx_obj != RX_CTX_LEN {
            return Err(HmcError::ObjectSize);
        }
        if u64::from(queues) > r.read(GLHMC_LANQMAX).get(GLHMC_LANQMAX::PMLANQMAX) {
            return Err(HmcError::TooManyQueues);
        }
        let part = GLHMC_SDPART.at(pf).ok_or(HmcError::NoSegment)?;
        if r.read(part).get(GLHMC_SDPART::PMSDSIZE) == 0 {
            return Err(HmcError::NoSegment);
        }
        let rx_base = (usize::from(queues) * TX_CTX_LEN).next_multiple_of(FPM_BASE_UNIT);
        let backing = dma.alloc(SD_BYTES, 4096).map_err(|_| HmcError::Memory)?;
        let pa = backing.phys();
        r.write(PFHMC_SDDATAHIGH, Value::new(pa >> 32));
        r.write(
            PFHMC_SDDATALOW,
            PFHMC_SDDATALOW::PMSDDATALOW
                .value((pa & 0xFFFF_FFFF) >> 12)
                .with(PFHMC_SDDATALOW::PMSDBPCOUNT, SD_PAGES)
                .set(PFHMC_SDDATALOW::PMSDTYPE)
                .set(PFHMC_SDDATALOW::PMSDVALID),
        );
        r.write(PFHMC_SDCMD, PFHMC_SDCMD::PMSDIDX.value(0).set(PFHMC_SDCMD::PMSDWR));
        let (Some(txb), Some(txc), Some(rxb), Some(rxc)) =
            (GLHMC_LANTXBASE.at(pf), GLHMC_LANTXCNT.at(pf), GLHMC_LANRXBASE.at(pf), GLHMC_LANRXCNT.at(pf))
        else {
            return Err(HmcError::NoSegment);
        };
        r.write(txb, GLHMC_LANTXBASE::FPMLANTXBASE.value(0));
        r.write(txc, GLHMC_LANTXCNT::FPMLANTXCNT.value(queues.into()));
        r.write(rxb, GLHMC_LANRXBASE::FPMLANRXBASE.value((rx_base / FPM_BASE_UNIT) as u64));
        r.write(rxc, GLHMC_LANRXCNT::FPMLANRXCNT.value(queues.into()));
        Ok(Self { backing, rx_base, queues })
    }

    /// Writes transmit queue `q`'s context (PF-relative queue).
    pub fn write_tx(&self, q: u16, ctx: &TxCtx) {
        if q < self.queues {
            self.backing.write_bytes(usize::from(q) * TX_CTX_LEN, &ctx.image());
        }
    }

    /// Writes receive queue `q`'s context.
    pub fn write_rx(&self, q: u16, ctx: &RxCtx) {
        if q < self.queues {
            self.backing.write_bytes(self.rx_base + usize::from(q) * RX_CTX_LEN, &ctx.image());
        }
    }

    /// `Err` when PFHMC_ERRORINFO reports an error.
    pub fn check<W: Mmio>(bar: &W) -> Result<(), HmcError> {
        let v = Regs::new(bar).read(PFHMC_ERRORINFO);
        if v.is_set(PFHMC_ERRORINFO::ERROR_DETECTED) {
            return Err(HmcError::Device {
                error_type: v.get(PFHMC_ERRORINFO::HMC_ERROR_TYPE) as u8,
                object: v.get(PFHMC_ERRORINFO::HMC_OBJECT_TYPE) as u8,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_context_bytes_match_a_hand_packed_image() {
        // Ring at 0x1000_0000 (base 0x20_0000 in 128-byte units), 512 descriptors,
        // 2 KiB buffers, rxmax 1522.
        let img = RxCtx { base: 0x1000_0000, qlen: 512, buf_bytes: 2048, rxmax: 1522 }.image();
        // base: bits 32.. → bytes 4..: 0x0020_0000.
        assert_eq!(&img[4..8], &[0x00, 0x00, 0x20, 0x00]);
        // qlen 512 at bit 89 = byte 11 bit 1: 512 << 1 = 0x400 → byte 12 = 0x04.
        assert_eq!(img[11], 0x00);
        // byte 12: qlen bits 7..12 (512 >> 7 = 4 at bit 0..5 → 0x04) | dbuff (16) low 2
        // bits at bit 6 (16 & 3 = 0).
        assert_eq!(img[12], 0x04);
        // byte 13: dbuff bits 2..6 at bit 0 (16 >> 2 = 4) | hbuff 0 at bit 5.
        assert_eq!(img[13], 0x04);
        // byte 14: dtype 0 (bits 2..3), dsize 1 (bit 4), crcstrip 1 (bit 5), l2tsel 1
        // (bit 7), hbuff high bits 0.
        assert_eq!(img[14], 0b1011_0000);
        // rxmax 1522 = 0x5F2 at bit 174 = byte 21 bit 6: 0x5F2 << 6 = 0x17C80.
        assert_eq!(&img[21..24], &[0x80, 0x7C, 0x01]);
        // lrxqthresh 2 at bit 198 = byte 24 bit 6 (0x80); prefena at bit 201 = byte 25
        // bit 1.
        assert_eq!(img[24], 0x80);
        assert_eq!(img[25], 0x02);
        assert_eq!(rx::QLEN.get(&img), 512);
        assert_eq!(rx::RXMAX.get(&img), 1522);
    }

    #[test]
    fn tx_context_bytes_match_a_hand_packed_image() {
        let img = TxCtx { base: 0x1000_0080, qlen: 256, rdylist: 0x123 }.image();
        // new_context: bit 30 → byte 3 bit 6.
        assert_eq!(img[3], 0x40);
        // base 0x1000_0080 / 128 = 0x20_0001 at byte 4.
        assert_eq!(&img[4..8], &[0x01, 0x00, 0x20, 0x00]);
        // qlen 256 at bit 161 = byte 20 bit 1: 256 << 1 = 0x200 → byte 21 = 0x02.
        assert_eq!((img[20], img[21]), (0x00, 0x02));
        // rdylist 0x123 at bit 980 = byte 122 bit 4: 0x123 << 4 = 0x1230.
        assert_eq!((img[122], img[123]), (0x30, 0x12));
        assert_eq!(tx::RDYLIST.get(&img), 0x123);
    }

    #[test]
    fn fields_truncate_and_stay_inside_the_image() {
        let mut img = [0xFFu8; 4];
        CtxField::new(4, 8).put(&mut img, 0x1A5);
        assert_eq!(img, [0x5F, 0xFA, 0xFF, 0xFF]);
        // Past the end: ignored, never a panic.
        CtxField::new(30, 8).put(&mut img, 0);
        assert_eq!(img[3], 0x3F);
        assert_eq!(CtxField::new(30, 8).get(&img), 0);
    }
}
