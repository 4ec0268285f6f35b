//! Advanced receive and transmit descriptors, identical on the 82599 (datasheet
//! §7.1.6, §7.2.3.2.4) and the 82576 (datasheet §7.1.5, §7.2.2.3): 16 bytes each,
//! little-endian, written by the driver in "read" format and overwritten by the
//! device in "write-back" format.
//!
//! ```text
//! RX read:       [0] pkt_addr (u64)            [8] hdr_addr (u64, 0: bit 0 aliases DD)
//! RX write-back: [0] pkt_info/hdr_info (u32)  [4] RSS hash (u32)
//!                [8] status_error (u32)       [12] length (u16)  [14] vlan (u16)
//! TX read:       [0] buffer_addr (u64)        [8] cmd_type_len (u32)  [12] olinfo_status (u32)
//! TX write-back: [0] reserved (u64)           [8] reserved (u32)      [12] status (u32, DD bit 0)
//! ```

use super::field::Field;

/// Bytes in one descriptor (RX and TX).
pub const DESC_LEN: usize = 16;

/// Byte offsets inside an advanced RX descriptor.
pub mod rx {
    use super::Field;

    /// Read format: packet buffer address.
    pub const PKT_ADDR: usize = 0;
    /// Read format: header buffer address (0: no header split; its bit 0 aliases DD).
    pub const HDR_ADDR: usize = 8;
    /// Write-back: RSS hash (with RXCSUM.PCSD set).
    pub const RSS_HASH: usize = 4;
    /// Write-back: extended status and errors.
    pub const STATUS_ERROR: usize = 8;
    /// Write-back: bytes written into the packet buffer.
    pub const LENGTH: usize = 12;

    /// `status_error` DD: the device is done with this descriptor (82599 §7.1.6.2).
    pub const DD: Field = Field::bit(0);
    /// `status_error` EOP: last descriptor of a frame.
    pub const EOP: Field = Field::bit(1);
    /// `status_error` errors 31:20 (82599 RXE, IPE, L4E, ...; 82576 the same bits).
    /// A frame with any of them set is recycled and counted, never handed up.
    pub const ERRORS: Field = Field::new(20, 12);
    /// Write-back `pkt_info` RSS type 3:0 (0: no hash computed).
    pub const RSS_TYPE: Field = Field::new(0, 4);
}

/// Byte offsets and fields of an advanced TX data descriptor.
pub mod tx {
    use super::Field;

    /// Read format: buffer address.
    pub const BUFFER_ADDR: usize = 0;
    /// Read format: `cmd_type_len`.
    pub const CMD_TYPE_LEN: usize = 8;
    /// Read format: `olinfo_status`; write-back: status (DD).
    pub const OLINFO_STATUS: usize = 12;

    /// `cmd_type_len` DTALEN 15:0: bytes in this buffer.
    pub const DTALEN: Field = Field::new(0, 16);
    /// `cmd_type_len` DTYP 23:20: 0011b = advanced data descriptor.
    pub const DTYP: Field = Field::new(20, 4);
    /// DTYP value of a data descriptor.
    pub const DTYP_DATA: u32 = 0b0011;
    /// `cmd_type_len` DCMD.EOP (bit 24): last descriptor of the frame.
    pub const EOP: Field = Field::bit(24);
    /// `cmd_type_len` DCMD.IFCS (bit 25): the device appends the Ethernet CRC.
    pub const IFCS: Field = Field::bit(25);
    /// `cmd_type_len` DCMD.RS (bit 27): report status (write DD back when done).
    pub const RS: Field = Field::bit(27);
    /// `cmd_type_len` DCMD.DEXT (bit 29): advanced (extended) descriptor format.
    pub const DEXT: Field = Field::bit(29);
    /// `olinfo_status` PAYLEN 31:14: total frame bytes (all buffers of the frame).
    pub const PAYLEN: Field = Field::new(14, 18);
    /// Write-back status DD (bit 0 of the last dword).
    pub const DD: Field = Field::bit(0);
}

/// `cmd_type_len` of a single-buffer frame of `len` bytes: data descriptor, extended
/// format, CRC appended, end of packet; `rs` asks for a DD write-back.
pub const fn tx_cmd_type_len(len: u16, rs: bool) -> u32 {
    let v =
        tx::DTALEN.val(len as u32) | tx::DTYP.val(tx::DTYP_DATA) | tx::DEXT.mask() | tx::IFCS.mask() | tx::EOP.mask();
    if rs { v | tx::RS.mask() } else { v }
}

/// `olinfo_status` of a single-buffer frame of `len` bytes (PAYLEN, no offloads).
pub const fn tx_olinfo(len: u16) -> u32 {
    tx::PAYLEN.val(len as u32)
}

/// A receive write-back, decoded from its `status_error` dword (read after DD).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxStatus(pub u32);

impl RxStatus {
    /// The device is done with the descriptor.
    pub const fn done(self) -> bool {
        rx::DD.is_set(self.0)
    }
    /// Last descriptor of its frame.
    pub const fn eop(self) -> bool {
        rx::EOP.is_set(self.0)
    }
    /// Any receive error bit set.
    pub const fn error(self) -> bool {
        rx::ERRORS.is_set(self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_data_descriptor_matches_the_datasheet_encoding() {
        // 82599 §7.2.3.2.4: DTYP 0x3 at 23:20 = 0x0030_0000; DCMD EOP 0x0100_0000,
        // IFCS 0x0200_0000, RS 0x0800_0000, DEXT 0x2000_0000.
        assert_eq!(tx_cmd_type_len(60, false), 0x2330_003C);
        assert_eq!(tx_cmd_type_len(1514, true), 0x2B30_05EA);
        assert_eq!(tx_olinfo(60), 60 << 14);
        assert_eq!(tx_olinfo(1514), 0x017A_8000);
    }

    #[test]
    fn rx_status_bits() {
        let s = RxStatus(0x0000_0003);
        assert!(s.done() && s.eop() && !s.error());
        // RXE (bit 29) is in the error field.
        assert!(RxStatus(0x2000_0001).error());
        assert!(!RxStatus(0x0000_0001).eop());
        assert_eq!(rx::ERRORS.mask(), 0xFFF0_0000);
    }
}
