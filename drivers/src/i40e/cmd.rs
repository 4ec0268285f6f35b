//! The admin commands the driver sends, encoded and decoded (XL710 datasheet §7.10.6,
//! "Admin Queue Command Structures"; layouts as `i40e_adminq_cmd.h` documents them).

use cadence_core::time::Clock;

use super::aq::{AdminQueue, AqError, AqStatus, Buffer, Command, Response};
use crate::hal::{Dma, Mmio};

/// Opcodes.
pub mod opcode {
    /// Get firmware and API version (direct).
    pub const GET_VERSION: u16 = 0x0001;
    /// Read the MAC addresses (indirect, 24-byte answer).
    pub const MAC_ADDRESS_READ: u16 = 0x0107;
    /// Leave the pre-boot (PXE) mode (direct).
    pub const CLEAR_PXE_MODE: u16 = 0x0110;
    /// Get the switch configuration (indirect).
    pub const GET_SWITCH_CONFIG: u16 = 0x0200;
    /// Write an RX control register (direct; API 1.5 and later).
    pub const RX_CTL_REG_WRITE: u16 = 0x0207;
    /// Update a VSI's parameters (indirect, 128-byte input).
    pub const UPDATE_VSI_PARAMETERS: u16 = 0x0211;
    /// Get a VSI's parameters (indirect, 128-byte answer).
    pub const GET_VSI_PARAMETERS: u16 = 0x0212;
    /// Set a VSI's promiscuous modes (direct).
    pub const SET_VSI_PROMISCUOUS_MODES: u16 = 0x0254;
    /// Get the link status (direct); also the opcode of link-change events.
    pub const GET_LINK_STATUS: u16 = 0x0607;
}

/// The firmware's version and admin API version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Version {
    /// Firmware major version.
    pub fw_major: u16,
    /// Firmware minor version.
    pub fw_minor: u16,
    /// Admin API major version.
    pub api_major: u16,
    /// Admin API minor version.
    pub api_minor: u16,
}

impl Version {
    /// Whether RX control registers must be written through the admin queue (API 1.5
    /// and later; `i40e_write_rx_ctl`).
    pub const fn rx_ctl_through_aq(self) -> bool {
        self.api_major > 1 || (self.api_major == 1 && self.api_minor >= 5)
    }
}

/// The link as the firmware reports it (Get Link Status, §7.10.6.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct LinkStatus {
    /// Link up.
    pub up: bool,
    /// Speed in Mb/s (0 when down or unknown).
    pub mbps: u32,
}

impl LinkStatus {
    /// Decodes the answer's parameters: `link_speed` at byte 3, `link_info` at byte 4
    /// (bit 0: link up).
    pub fn from_response(r: &Response) -> Self {
        let up = r.u8_at(4) & 0x01 != 0;
        let mbps = match r.u8_at(3) {
            0x01 => 2_500,
            0x02 => 100,
            0x04 => 1_000,
            0x08 => 10_000,
            0x10 => 40_000,
            0x20 => 20_000,
            0x40 => 25_000,
            0x80 => 5_000,
            _ => 0,
        };
        Self { up, mbps: if up { mbps } else { 0 } }
    }
}

/// Switch element type of a VSI (Get Switch Config).
pub const SWITCH_ELEMENT_VSI: u8 = 19;
/// Bytes of the switch configuration answer's header.
const SWITCH_HEADER: usize = 16;
/// Bytes of each switch element in it.
const SWITCH_ELEMENT: usize = 16;
/// Bytes of the buffer asked for: the header and 31 elements.
pub const SWITCH_BUF: usize = 512;

/// Bytes of the VSI properties structure (`i40e_aqc_vsi_properties_data`).
pub const VSI_PROPS: usize = 128;
/// VSI properties: valid-sections flag of the queue map.
const VSI_QUEUE_MAP_VALID: u16 = 0x0040;
/// VSI properties: byte offsets.
const VSI_VALID_SECTIONS: usize = 0;
const VSI_MAPPING_FLAGS: usize = 28;
const VSI_QUEUE_MAPPING: usize = 30;
const VSI_TC_MAPPING: usize = 62;
const VSI_QS_HANDLE: usize = 96;
/// tc_mapping: queue offset 8:0, log2 of the queue count 11:9.
const TC_QUE_NUMBER_SHIFT: u16 = 9;

/// What the driver needs from the VSI's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct VsiInfo {
    /// The VSI's switch element ID.
    pub seid: u16,
    /// Queue set handle of TC 0: the TX contexts' ready list.
    pub qs_handle: u16,
}

/// Promiscuous flags (Set VSI Promiscuous Modes).
pub const PROMISC_UNICAST: u16 = 0x01;
/// Multicast promiscuous.
pub const PROMISC_MULTICAST: u16 = 0x02;
/// Broadcast.
pub const PROMISC_BROADCAST: u16 = 0x04;

/// Clear PXE mode's magic parameter (`rx_cnt`).
const CLEAR_PXE_MAGIC: u8 = 0x2;
/// Get Link Status: enable link status events.
const LSE_ENABLE: u16 = 0x3;

/// The commands, over an [`AdminQueue`].
#[derive(Debug)]
pub struct Commands<'a, W, R, C: ?Sized> {
    /// The queue.
    pub aq: &'a mut AdminQueue<R>,
    /// BAR 0.
    pub bar: &'a W,
    /// The clock for the deadlines.
    pub clock: &'a C,
}

impl<W: Mmio, R: Dma, C: Clock + ?Sized> Commands<'_, W, R, C> {
    fn run(&mut self, cmd: Command, buf: Buffer<'_>) -> Result<Response, AqError> {
        self.aq.execute(self.bar, self.clock, cmd, buf)
    }

    /// Get Version (0x0001): the first command after a reset.
    pub fn get_version(&mut self) -> Result<Version, AqError> {
        let r = self.run(Command::new(opcode::GET_VERSION), Buffer::None)?;
        Ok(Version { fw_major: r.u16_at(8), fw_minor: r.u16_at(10), api_major: r.u16_at(12), api_minor: r.u16_at(14) })
    }

    /// Clear PXE Mode (0x0110): descriptor write-back per descriptor again. EEXIST (the
    /// mode was already clear) is success.
    pub fn clear_pxe_mode(&mut self) -> Result<(), AqError> {
        let mut cmd = Command::new(opcode::CLEAR_PXE_MODE);
        cmd.params[0] = CLEAR_PXE_MAGIC;
        match self.run(cmd, Buffer::None) {
            Ok(_) | Err(AqError::Failed { status: AqStatus::Eexist, .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// MAC Address Read (0x0107): the PF's LAN MAC.
    pub fn mac_address(&mut self) -> Result<[u8; 6], AqError> {
        let mut buf = [0u8; 24];
        let r = self.run(Command::new(opcode::MAC_ADDRESS_READ), Buffer::Out(&mut buf))?;
        // command_flags: LAN_ADDR_VALID (0x10).
        if r.u16_at(0) & 0x10 == 0 {
            return Err(AqError::BadCompletion { opcode: opcode::MAC_ADDRESS_READ });
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&buf[..6]);
        Ok(mac)
    }

    /// Get Switch Config (0x0200): the SEID of the first VSI (the PF's own, which the
    /// firmware created).
    pub fn pf_vsi_seid(&mut self) -> Result<u16, AqError> {
        let mut buf = [0u8; SWITCH_BUF];
        let r = self.run(Command::new(opcode::GET_SWITCH_CONFIG), Buffer::Out(&mut buf))?;
        let bad = AqError::BadCompletion { opcode: opcode::GET_SWITCH_CONFIG };
        let reported = usize::from(u16::from_le_bytes([buf[0], buf[1]]));
        let body = buf.get(SWITCH_HEADER..usize::from(r.datalen)).ok_or(bad)?;
        body.chunks_exact(SWITCH_ELEMENT)
            .take(reported)
            .find(|e| e[0] == SWITCH_ELEMENT_VSI)
            .map(|e| u16::from_le_bytes([e[2], e[3]]))
            .ok_or(bad)
    }

    /// Get VSI Parameters (0x0212) of VSI `seid`: the whole 128-byte structure.
    pub fn vsi_props(&mut self, seid: u16) -> Result<[u8; VSI_PROPS], AqError> {
        let mut buf = [0u8; VSI_PROPS];
        let r = self.run(Command::new(opcode::GET_VSI_PARAMETERS).with_u16(0, seid), Buffer::Out(&mut buf))?;
        if usize::from(r.datalen) != VSI_PROPS {
            return Err(AqError::BadCompletion { opcode: opcode::GET_VSI_PARAMETERS });
        }
        Ok(buf)
    }

    /// The VSI's info from its parameters.
    pub fn vsi_info(&mut self, seid: u16) -> Result<VsiInfo, AqError> {
        let p = self.vsi_props(seid)?;
        Ok(VsiInfo { seid, qs_handle: u16::from_le_bytes([p[VSI_QS_HANDLE], p[VSI_QS_HANDLE + 1]]) })
    }

    /// Update VSI Parameters (0x0211): VSI `seid` gets `queues` contiguous queues from
    /// PF queue 0 on TC 0 (the queue map section only; the count rounded up to a power of
    /// two, as the map holds its log2).
    pub fn map_queues(&mut self, seid: u16, queues: u16) -> Result<(), AqError> {
        let mut p = self.vsi_props(seid)?;
        let put = |p: &mut [u8; VSI_PROPS], at: usize, v: u16| p[at..at + 2].copy_from_slice(&v.to_le_bytes());
        put(&mut p, VSI_VALID_SECTIONS, VSI_QUEUE_MAP_VALID);
        put(&mut p, VSI_MAPPING_FLAGS, 0); // contiguous
        put(&mut p, VSI_QUEUE_MAPPING, 0); // first queue: PF queue 0
        let log2 = queues.max(1).next_power_of_two().trailing_zeros() as u16;
        put(&mut p, VSI_TC_MAPPING, log2 << TC_QUE_NUMBER_SHIFT);
        self.run(Command::new(opcode::UPDATE_VSI_PARAMETERS).with_u16(0, seid), Buffer::In(&p)).map(|_| ())
    }

    /// Set VSI Promiscuous Modes (0x0254): `flags` on, the others of unicast,
    /// multicast and broadcast off.
    pub fn set_promiscuous(&mut self, seid: u16, flags: u16) -> Result<(), AqError> {
        let valid = PROMISC_UNICAST | PROMISC_MULTICAST | PROMISC_BROADCAST;
        let cmd =
            Command::new(opcode::SET_VSI_PROMISCUOUS_MODES).with_u16(0, flags).with_u16(2, valid).with_u16(4, seid);
        self.run(cmd, Buffer::None).map(|_| ())
    }

    /// Get Link Status (0x0607) with link status events enabled.
    pub fn link_status(&mut self) -> Result<LinkStatus, AqError> {
        let r = self.run(Command::new(opcode::GET_LINK_STATUS).with_u16(0, LSE_ENABLE), Buffer::None)?;
        Ok(LinkStatus::from_response(&r))
    }

    /// RX Control Register Write (0x0207): `value` into the register at `offset`.
    pub fn rx_ctl_write(&mut self, offset: u32, value: u32) -> Result<(), AqError> {
        let cmd = Command::new(opcode::RX_CTL_REG_WRITE).with_u32(4, offset).with_u32(12, value);
        self.run(cmd, Buffer::None).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(params: [u8; 16]) -> Response {
        Response { opcode: opcode::GET_LINK_STATUS, params, datalen: 0 }
    }

    #[test]
    fn link_status_decodes_speed_and_state() {
        let mut p = [0u8; 16];
        p[3] = 0x10;
        p[4] = 0x01;
        assert_eq!(LinkStatus::from_response(&response(p)), LinkStatus { up: true, mbps: 40_000 });
        p[4] = 0;
        assert_eq!(LinkStatus::from_response(&response(p)), LinkStatus { up: false, mbps: 0 });
        p[3] = 0x08;
        p[4] = 0x21;
        assert_eq!(LinkStatus::from_response(&response(p)).mbps, 10_000);
    }

    #[test]
    fn rx_ctl_through_the_queue_from_api_1_5() {
        let v = |api_major, api_minor| Version { fw_major: 6, fw_minor: 1, api_major, api_minor };
        assert!(!v(1, 4).rx_ctl_through_aq());
        assert!(v(1, 5).rx_ctl_through_aq());
        assert!(v(2, 0).rx_ctl_through_aq());
    }

    #[test]
    fn commands_lay_out_little_endian_parameters() {
        let c = Command::new(opcode::SET_VSI_PROMISCUOUS_MODES).with_u16(0, 0x7).with_u16(4, 512);
        assert_eq!(&c.params[..6], &[7, 0, 0, 0, 0x00, 0x02]);
        let c = Command::new(opcode::RX_CTL_REG_WRITE).with_u32(4, 0x1C0AC0).with_u32(12, 1 << 16);
        assert_eq!(&c.params[4..8], &[0xC0, 0x0A, 0x1C, 0]);
        assert_eq!(&c.params[12..16], &[0, 0, 1, 0]);
        // Out of range writes are ignored, never a panic.
        assert_eq!(Command::new(1).with_u32(14, 5).params, [0; 16]);
    }
}
