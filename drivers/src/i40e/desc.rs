//! The XL710's LAN descriptors (XL710 datasheet §8.3.2.1 receive, §8.4.2.1 transmit), as
//! formats of the shared ring engine ([`crate::intel::desc`]).
//!
//! ```text
//! RX read (32 B):  [0] pkt_addr   [8] hdr_addr (0; its bit 0 aliases DD)  [16] 0  [24] 0
//! RX write-back:   [0] mirror/l2tag1/rss   [8] qword1: status 18:0 (DD 0, EOP 1),
//!                  error 26:19, ptype 37:30, length 51:38   [16] ext. status, l2tag2 ...
//! TX data (16 B):  [0] buffer_addr  [8] qword1: DTYPE 3:0 (0 = data), CMD 13:4 (EOP, RS,
//!                  ICRC), OFFSET 33:16, BUF_SZ 47:34, L2TAG1 63:48
//! TX write-back:   qword1 DTYPE = 0xF (descriptor done), for RS descriptors
//! ```

use crate::hal::Mmio;
use crate::intel::desc::{RxFormat, RxWriteBack, TxFormat, TxPart};
use crate::reg::{Block, Regs, Value};
use crate::registers;

/// The XL710's 32-byte receive descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum I40eRx {}

/// The XL710's 16-byte transmit data descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum I40eTx {}

registers! {
    /// Read format: packet buffer address.
    pub RX_PKT_ADDR: Wo<u64> @ 0 in I40eRx {}
    /// Read format: header buffer address (0: no split; its bit 0 aliases DD).
    pub RX_HDR_ADDR: Wo<u64> @ 8 in I40eRx {}
    /// Read format: reserved.
    pub RX_RSVD1: Wo<u64> @ 16 in I40eRx {}
    /// Read format: reserved.
    pub RX_RSVD2: Wo<u64> @ 24 in I40eRx {}
    /// Write-back qword 1, low dword: status and errors. The device writes it last.
    pub RX_STATUS_ERROR: Ro<u32> @ 8 in I40eRx {
        /// Descriptor done.
        DD: 0,
        /// End of packet.
        EOP: 1,
        /// Filter status: 3 = the RSS hash is in qword 0.
        FLTSTAT: 13:12,
        /// Receive errors (RXE 19, HBO 21, IPE 22, L4E 23, EIPE 24, OVERSIZE 25).
        ERROR: 26:19,
    }
    /// Write-back qword 1, whole (read after DD).
    pub RX_QW1: Ro<u64> @ 8 in I40eRx {
        /// End of packet.
        EOP: 1,
        /// Receive errors.
        ERROR: 26:19,
        /// Packet type.
        PTYPE: 37:30,
        /// Bytes in the packet buffer.
        LENGTH: 51:38,
    }
    /// Write-back: the RSS hash (with FLTSTAT = 3).
    pub RX_RSS: Ro<u32> @ 4 in I40eRx {}

    /// Buffer address.
    pub TX_BUFFER_ADDR: Wo<u64> @ 0 in I40eTx {}
    /// Qword 1: type, command, offsets, size.
    pub TX_QW1: Wo<u64> @ 8 in I40eTx {
        /// Descriptor type: 0 = data.
        DTYPE: 3:0,
        /// CMD.EOP.
        EOP: 4,
        /// CMD.RS: report status.
        RS: 5,
        /// CMD.ICRC: the device appends the CRC ("without it no packet is sent").
        ICRC: 6,
        /// Header offsets (no offloads: 0).
        OFFSET: 33:16,
        /// Buffer bytes.
        BUF_SZ: 47:34,
    }
    /// Write-back: qword 1's low dword.
    pub TX_DONE: Ro<u32> @ 8 in I40eTx {
        /// 0xF = descriptor done.
        DTYPE: 3:0,
    }
}

/// Bytes in a receive descriptor.
pub const RX_DESC_LEN: usize = 32;
/// Bytes in a transmit descriptor.
pub const TX_DESC_LEN: usize = 16;
/// DTYPE of a data descriptor.
pub const DTYPE_DATA: u64 = 0x0;
/// DTYPE the device writes back on a done descriptor.
pub const DTYPE_DONE: u64 = 0xF;
/// Shortest frame the XL710 sends (shorter ones trip malicious-driver detection and
/// stop the queue, §8.4.2.2).
pub const MIN_TX_FRAME: usize = 17;

/// Qword 1 of a data descriptor for a whole frame of `len` bytes.
pub const fn tx_qw1(len: u16, eop: bool, rs: bool) -> Value<TX_QW1> {
    TX_QW1::DTYPE
        .value(DTYPE_DATA)
        .set_if(TX_QW1::EOP, eop)
        .set(TX_QW1::ICRC)
        .set_if(TX_QW1::RS, rs)
        .with(TX_QW1::BUF_SZ, len as u64)
}

impl RxFormat for I40eRx {
    const LEN: usize = RX_DESC_LEN;
    const DONE_WORD: usize = 8;
    const TAIL_STEP: u16 = 8;

    #[inline]
    fn post<M: Mmio + ?Sized>(ring: &M, i: usize, addr: u64) {
        let (r, d) = (Regs::new(ring), Block::<I40eRx>::at(i * Self::LEN));
        r.write(d.reg(RX_PKT_ADDR), Value::new(addr));
        r.write(d.reg(RX_HDR_ADDR), Value::new(0));
        r.write(d.reg(RX_RSVD1), Value::new(0));
        r.write(d.reg(RX_RSVD2), Value::new(0));
    }

    #[inline]
    fn done<M: Mmio + ?Sized>(ring: &M, i: usize) -> bool {
        let (r, d) = (Regs::new(ring), Block::<I40eRx>::at(i * Self::LEN));
        r.read(d.reg(RX_STATUS_ERROR)).is_set(RX_STATUS_ERROR::DD)
    }

    #[inline]
    fn writeback<M: Mmio + ?Sized>(ring: &M, i: usize) -> RxWriteBack {
        let (r, d) = (Regs::new(ring), Block::<I40eRx>::at(i * Self::LEN));
        let qw1 = r.read(d.reg(RX_QW1));
        RxWriteBack {
            eop: qw1.is_set(RX_QW1::EOP),
            error: qw1.is_set(RX_QW1::ERROR),
            len: qw1.get(RX_QW1::LENGTH) as usize,
        }
    }
}

impl TxFormat for I40eTx {
    const LEN: usize = TX_DESC_LEN;
    const MIN_FRAME: usize = MIN_TX_FRAME;

    #[inline]
    fn write<M: Mmio + ?Sized>(ring: &M, i: usize, addr: u64, len: u16, part: TxPart) {
        let (r, d) = (Regs::new(ring), Block::<I40eTx>::at(i * Self::LEN));
        r.write(d.reg(TX_BUFFER_ADDR), Value::new(addr));
        r.write(d.reg(TX_QW1), tx_qw1(len, part.eop, part.rs));
    }

    #[inline]
    fn done<M: Mmio + ?Sized>(ring: &M, i: usize) -> bool {
        let (r, d) = (Regs::new(ring), Block::<I40eTx>::at(i * Self::LEN));
        r.read(d.reg(TX_DONE)).get(TX_DONE::DTYPE) == DTYPE_DONE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_qword1_matches_the_datasheet_layout() {
        // DTYPE 0, CMD = EOP (bit 4) | ICRC (bit 6) [| RS bit 5], BUF_SZ 60 << 34.
        assert_eq!(tx_qw1(60, true, false).bits(), 0x50 | (60 << 34));
        assert_eq!(tx_qw1(1514, true, true).bits(), 0x70 | (1514 << 34));
        assert_eq!(tx_qw1(1024, false, false).bits(), 0x40 | (1024 << 34));
    }

    #[test]
    fn rx_write_back_fields() {
        assert_eq!(RX_QW1::LENGTH.mask(), 0x3FFF << 38);
        assert_eq!(RX_STATUS_ERROR::ERROR.mask(), 0xFF << 19);
        assert_eq!(RX_QW1::PTYPE.offset(), 30);
    }
}
