//! Descriptor formats, declared as typed "registers" of DMA memory ([`crate::reg`]):
//! a descriptor is a [`Block`] of its format's space at `index × length` in the ring.
//!
//! The ring engine ([`super::IntelRx`], [`super::IntelTx`]) is generic over
//! [`RxFormat`] / [`TxFormat`]; the formats here and in [`crate::i40e`] say where the
//! address goes, where DD is and how long the frame was, nothing else.
//!
//! Advanced descriptors (82599 §7.1.6, §7.2.3.2.4; 82576 §7.1.5, §7.2.2.3), 16 bytes,
//! little-endian, written by the driver in "read" format and overwritten by the device
//! in "write-back" format:
//!
//! ```text
//! RX read:       [0] pkt_addr (u64)            [8] hdr_addr (u64, 0: bit 0 aliases DD)
//! RX write-back: [0] pkt_info/hdr_info (u32)  [4] RSS hash (u32)
//!                [8] status_error (u32)       [12] length (u16)  [14] vlan (u16)
//! TX read:       [0] buffer_addr (u64)        [8] cmd_type_len (u32)  [12] olinfo_status (u32)
//! TX write-back: [0] reserved (u64)           [8] reserved (u32)      [12] status (u32, DD bit 0)
//! ```

use crate::hal::Mmio;
use crate::reg::{Block, Regs, Value};
use crate::registers;

/// What a receive write-back says, read after DD and an Acquire fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxWriteBack {
    /// Last descriptor of its frame.
    pub eop: bool,
    /// The device flagged the frame (CRC, length, checksum errors ...).
    pub error: bool,
    /// Bytes the device wrote into this descriptor's buffer.
    pub len: usize,
}

/// A receive descriptor format.
pub trait RxFormat: 'static {
    /// Bytes per descriptor.
    const LEN: usize;
    /// Byte offset, within a descriptor, of the word holding DD: the device writes it
    /// last, so it is what a MONITOR on the next descriptor watches.
    const DONE_WORD: usize;
    /// The tail is written in multiples of this many descriptors (the XL710 fetches
    /// receive descriptors in groups of 8, §8.3.2.2); 1 = any value.
    const TAIL_STEP: u16 = 1;
    /// Writes descriptor `i` in read format: packet buffer at `addr`, no header buffer
    /// (which also clears the DD bit a previous write-back left there).
    fn post<M: Mmio + ?Sized>(ring: &M, i: usize, addr: u64);
    /// Whether the device is done with descriptor `i` (reads the DD word only).
    fn done<M: Mmio + ?Sized>(ring: &M, i: usize) -> bool;
    /// Descriptor `i`'s write-back; call after [`RxFormat::done`] and `hal::dma_rmb()`.
    fn writeback<M: Mmio + ?Sized>(ring: &M, i: usize) -> RxWriteBack;
}

/// A transmit descriptor format (one data descriptor per buffer of a frame, EOP on its last).
pub trait TxFormat: 'static {
    /// Bytes per descriptor.
    const LEN: usize;
    /// Shortest frame the device takes without complaint (the XL710 stops a queue on a
    /// frame under 17 bytes: malicious-driver detection).
    const MIN_FRAME: usize;
    /// Writes descriptor `i`: `len` bytes at `addr` of a frame of `total` bytes, its last
    /// (`eop`) or not, the device to add the CRC; `rs` asks for a completion write-back.
    fn write<M: Mmio + ?Sized>(ring: &M, i: usize, addr: u64, len: u16, part: TxPart);
    /// Whether the device wrote descriptor `i` back as done (an RS descriptor).
    fn done<M: Mmio + ?Sized>(ring: &M, i: usize) -> bool;
}

/// Where a transmit descriptor sits in its frame, for [`TxFormat::write`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxPart {
    /// Bytes of the whole frame.
    pub total: u16,
    /// The frame's last descriptor (EOP).
    pub eop: bool,
    /// Report status (a completion write-back).
    pub rs: bool,
}

impl TxPart {
    /// A frame of `len` bytes in one descriptor.
    pub const fn whole(len: u16, rs: bool) -> Self {
        Self { total: len, eop: true, rs }
    }
}

/// The advanced receive descriptor of the 82599 and the 82576.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvRx {}

/// The advanced transmit data descriptor of the 82599 and the 82576.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdvTx {}

/// Bytes in one advanced descriptor (RX and TX).
pub const ADV_DESC_LEN: usize = 16;

registers! {
    /// Read format: packet buffer address.
    pub RX_PKT_ADDR: Wo<u64> @ 0 in AdvRx {}
    /// Read format: header buffer address (0: no header split; its bit 0 aliases DD).
    pub RX_HDR_ADDR: Wo<u64> @ 8 in AdvRx {}
    /// Write-back: packet info (RSS type, packet type).
    pub RX_PKT_INFO: Ro<u32> @ 0 in AdvRx {
        /// RSS type (0: no hash computed).
        RSS_TYPE: 3:0,
    }
    /// Write-back: RSS hash (with RXCSUM.PCSD set).
    pub RX_RSS_HASH: Ro<u32> @ 4 in AdvRx {}
    /// Write-back: extended status and errors (82599 §7.1.6.2).
    pub RX_STATUS_ERROR: Ro<u32> @ 8 in AdvRx {
        /// The device is done with this descriptor.
        DD: 0,
        /// Last descriptor of a frame.
        EOP: 1,
        /// Errors (82599 RXE, IPE, L4E, ...; 82576 the same bits). A frame with any of
        /// them set is recycled and counted, never handed up.
        ERRORS: 31:20,
    }
    /// Write-back: bytes written into the packet buffer.
    pub RX_LENGTH: Ro<u16> @ 12 in AdvRx {}

    /// Read format: buffer address.
    pub TX_BUFFER_ADDR: Wo<u64> @ 0 in AdvTx {}
    /// Read format: command, type and length.
    pub TX_CMD_TYPE_LEN: Wo<u32> @ 8 in AdvTx {
        /// DTALEN: bytes in this buffer.
        DTALEN: 15:0,
        /// DTYP: 0011b = advanced data descriptor.
        DTYP: 23:20,
        /// DCMD.EOP: last descriptor of the frame.
        EOP: 24,
        /// DCMD.IFCS: the device appends the Ethernet CRC.
        IFCS: 25,
        /// DCMD.RS: report status (write DD back when done).
        RS: 27,
        /// DCMD.DEXT: advanced (extended) descriptor format.
        DEXT: 29,
    }
    /// Read format: offload info and the frame length.
    pub TX_OLINFO_STATUS: Wo<u32> @ 12 in AdvTx {
        /// PAYLEN: total frame bytes (all buffers of the frame).
        PAYLEN: 31:14,
    }
    /// Write-back: status (the last dword).
    pub TX_STATUS: Ro<u32> @ 12 in AdvTx {
        /// Descriptor done.
        DD: 0,
    }
}

/// DTYP value of an advanced data descriptor.
pub const DTYP_DATA: u64 = 0b0011;

/// `cmd_type_len` of a single-buffer frame of `len` bytes: data descriptor, extended
/// format, CRC appended, end of packet; `rs` asks for a DD write-back.
pub const fn tx_cmd_type_len(len: u16, eop: bool, rs: bool) -> Value<TX_CMD_TYPE_LEN> {
    TX_CMD_TYPE_LEN::DTALEN
        .value(len as u64)
        .with(TX_CMD_TYPE_LEN::DTYP, DTYP_DATA)
        .set(TX_CMD_TYPE_LEN::DEXT)
        .set(TX_CMD_TYPE_LEN::IFCS)
        .set_if(TX_CMD_TYPE_LEN::EOP, eop)
        .set_if(TX_CMD_TYPE_LEN::RS, rs)
}

/// `olinfo_status` of a single-buffer frame of `len` bytes (PAYLEN, no offloads).
pub const fn tx_olinfo(len: u16) -> Value<TX_OLINFO_STATUS> {
    TX_OLINFO_STATUS::PAYLEN.value(len as u64)
}

impl RxFormat for AdvRx {
    const LEN: usize = ADV_DESC_LEN;
    const DONE_WORD: usize = 8;

    #[inline]
    fn post<M: Mmio + ?Sized>(ring: &M, i: usize, addr: u64) {
        let (r, d) = (Regs::new(ring), Block::<AdvRx>::at(i * Self::LEN));
        r.write(d.reg(RX_PKT_ADDR), Value::new(addr));
        r.write(d.reg(RX_HDR_ADDR), Value::new(0));
    }

    #[inline]
    fn done<M: Mmio + ?Sized>(ring: &M, i: usize) -> bool {
        let (r, d) = (Regs::new(ring), Block::<AdvRx>::at(i * Self::LEN));
        r.read(d.reg(RX_STATUS_ERROR)).is_set(RX_STATUS_ERROR::DD)
    }

    #[inline]
    fn writeback<M: Mmio + ?Sized>(ring: &M, i: usize) -> RxWriteBack {
        let (r, d) = (Regs::new(ring), Block::<AdvRx>::at(i * Self::LEN));
        let s = r.read(d.reg(RX_STATUS_ERROR));
        RxWriteBack {
            eop: s.is_set(RX_STATUS_ERROR::EOP),
            error: s.is_set(RX_STATUS_ERROR::ERRORS),
            len: r.read(d.reg(RX_LENGTH)).bits() as usize,
        }
    }
}

impl TxFormat for AdvTx {
    const LEN: usize = ADV_DESC_LEN;
    const MIN_FRAME: usize = 1;

    #[inline]
    fn write<M: Mmio + ?Sized>(ring: &M, i: usize, addr: u64, len: u16, part: TxPart) {
        let (r, d) = (Regs::new(ring), Block::<AdvTx>::at(i * Self::LEN));
        r.write(d.reg(TX_BUFFER_ADDR), Value::new(addr));
        r.write(d.reg(TX_CMD_TYPE_LEN), tx_cmd_type_len(len, part.eop, part.rs));
        // PAYLEN: the whole packet (82599 §7.2.3.2.4, 82576 §7.2.2.3.10: read from a packet's
        // first descriptor; written in each).
        r.write(d.reg(TX_OLINFO_STATUS), tx_olinfo(part.total));
    }

    #[inline]
    fn done<M: Mmio + ?Sized>(ring: &M, i: usize) -> bool {
        let (r, d) = (Regs::new(ring), Block::<AdvTx>::at(i * Self::LEN));
        r.read(d.reg(TX_STATUS)).is_set(TX_STATUS::DD)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_data_descriptor_matches_the_datasheet_encoding() {
        // 82599 §7.2.3.2.4: DTYP 0x3 at 23:20 = 0x0030_0000; DCMD EOP 0x0100_0000,
        // IFCS 0x0200_0000, RS 0x0800_0000, DEXT 0x2000_0000.
        assert_eq!(tx_cmd_type_len(60, true, false).bits(), 0x2330_003C);
        assert_eq!(tx_cmd_type_len(1514, true, true).bits(), 0x2B30_05EA);
        // Not the frame's last: EOP (bit 24) clear.
        assert_eq!(tx_cmd_type_len(1024, false, false).bits(), 0x2230_0400);
        assert_eq!(tx_olinfo(60).bits(), 60 << 14);
        assert_eq!(tx_olinfo(1514).bits(), 0x017A_8000);
    }

    #[test]
    fn rx_status_bits() {
        let s = Value::<RX_STATUS_ERROR>::new(0x0000_0003);
        assert!(s.is_set(RX_STATUS_ERROR::DD) && s.is_set(RX_STATUS_ERROR::EOP));
        assert!(!s.is_set(RX_STATUS_ERROR::ERRORS));
        // RXE (bit 29) is in the error field.
        assert!(Value::<RX_STATUS_ERROR>::new(0x2000_0001).is_set(RX_STATUS_ERROR::ERRORS));
        assert_eq!(RX_STATUS_ERROR::ERRORS.mask(), 0xFFF0_0000);
    }
}
