//! XL710 registers the driver touches (XL710 datasheet §10 "Register Descriptions";
//! offsets as in the register summary), each declared once with offset, width, access
//! and fields ([`crate::reg`]). Per-queue registers are arrays indexed by the PF-relative
//! queue; `GLLAN_TXPRE_QDIS` by the absolute queue / 128; per-port statistics by port.

use crate::registers;

registers! {
    /// GLGEN_RSTAT, global reset status (§10.2.2.1.5).
    pub GLGEN_RSTAT: Ro<u32> @ 0x0B8188 {
        /// Device state: 0 = active, else a global reset is pending or running.
        DEVSTATE: 1:0,
    }
    /// GLNVM_ULD, NVM load done (§10.2.2.20.9): what the firmware finished loading.
    pub GLNVM_ULD: Ro<u32> @ 0x0B6008 {
        /// Core configuration loaded.
        CONF_CORE_DONE: 3,
        /// Global configuration loaded.
        CONF_GLOBAL_DONE: 4,
    }
    /// PFGEN_CTRL, PF control (§10.2.2.1.2).
    pub PFGEN_CTRL: Rw<u32> @ 0x092400 {
        /// PF software reset; the hardware clears it when the reset is done.
        PFSWR: 0,
    }
    /// PF_FUNC_RID, the PF's requester ID (§10.2.2.2.3).
    pub PF_FUNC_RID: Ro<u32> @ 0x09C000 {
        /// PCI function number = PF index.
        FUNCTION_NUMBER: 2:0,
    }
    /// PFGEN_PORTNUM, the PF's port (§10.2.2.1.8).
    pub PFGEN_PORTNUM: Ro<u32> @ 0x1C0480 {
        /// Port number.
        PORT_NUM: 1:0,
    }
    /// PFLAN_QALLOC, the PF's LAN queue range (§10.2.2.12.1).
    pub PFLAN_QALLOC: Ro<u32> @ 0x1C0400 {
        /// First absolute queue of the PF.
        FIRSTQ: 10:0,
        /// Last absolute queue of the PF.
        LASTQ: 26:16,
        /// The range is valid.
        VALID: 31,
    }

    /// PF_ATQBAL, admin transmit (send) queue base, low (§10.2.2.3.1).
    pub PF_ATQBAL: Rw<u32> @ 0x080000 {}
    /// PF_ATQBAH, admin send queue base, high.
    pub PF_ATQBAH: Rw<u32> @ 0x080100 {}
    /// PF_ATQLEN, admin send queue length and enable.
    pub PF_ATQLEN: Rw<u32> @ 0x080200 {
        /// Descriptors in the ring.
        LEN: 9:0,
        /// Overflow (read).
        OVFL: 29,
        /// Critical error (read).
        CRIT: 30,
        /// Queue enable.
        ENABLE: 31,
    }
    /// PF_ATQH, admin send queue head (advanced by the firmware).
    pub PF_ATQH: Rw<u32> @ 0x080300 {
        /// Head index.
        HEAD: 9:0,
    }
    /// PF_ATQT, admin send queue tail (written by the driver).
    pub PF_ATQT: Rw<u32> @ 0x080400 {
        /// Tail index.
        TAIL: 9:0,
    }
    /// PF_ARQBAL, admin receive (event) queue base, low.
    pub PF_ARQBAL: Rw<u32> @ 0x080080 {}
    /// PF_ARQBAH, admin receive queue base, high.
    pub PF_ARQBAH: Rw<u32> @ 0x080180 {}
    /// PF_ARQLEN, admin receive queue length and enable.
    pub PF_ARQLEN: Rw<u32> @ 0x080280 {
        /// Descriptors in the ring.
        LEN: 9:0,
        /// Overflow: an event was lost (read).
        OVFL: 29,
        /// Critical error (read).
        CRIT: 30,
        /// Queue enable.
        ENABLE: 31,
    }
    /// PF_ARQH, admin receive queue head (advanced by the firmware).
    pub PF_ARQH: Rw<u32> @ 0x080380 {
        /// Head index.
        HEAD: 9:0,
    }
    /// PF_ARQT, admin receive queue tail (the last buffer the driver posted).
    pub PF_ARQT: Rw<u32> @ 0x080480 {
        /// Tail index.
        TAIL: 9:0,
    }

    /// GLHMC_LANTXOBJSZ, LAN TX context size as log2 bytes (§10.2.2.17).
    pub GLHMC_LANTXOBJSZ: Ro<u32> @ 0x0C2004 {
        /// log2 of the object size.
        SIZE: 3:0,
    }
    /// GLHMC_LANQMAX, most LAN queues a function may have.
    pub GLHMC_LANQMAX: Ro<u32> @ 0x0C2008 {
        /// Queue count.
        PMLANQMAX: 10:0,
    }
    /// GLHMC_LANRXOBJSZ, LAN RX context size as log2 bytes.
    pub GLHMC_LANRXOBJSZ: Ro<u32> @ 0x0C200C {
        /// log2 of the object size.
        SIZE: 3:0,
    }
    /// GLHMC_SDPART(pf), the PF's segment descriptors.
    pub GLHMC_SDPART: Ro<u32> @ 0x0C0800 [16; stride 4] {
        /// First segment descriptor of the PF.
        PMSDBASE: 11:0,
        /// Segment descriptors the PF may use.
        PMSDSIZE: 28:16,
    }
    /// PFHMC_SDCMD, segment-descriptor command.
    pub PFHMC_SDCMD: Wo<u32> @ 0x0C0000 {
        /// Segment descriptor index (relative to the PF's partition).
        PMSDIDX: 11:0,
        /// Write SDDATALOW/HIGH into that descriptor.
        PMSDWR: 31,
    }
    /// PFHMC_SDDATALOW, segment descriptor data, low.
    pub PFHMC_SDDATALOW: Rw<u32> @ 0x0C0100 {
        /// The descriptor is valid.
        PMSDVALID: 0,
        /// 1 = direct (one contiguous backing area), 0 = paged.
        PMSDTYPE: 1,
        /// Backing pages (4 KiB) in the segment.
        PMSDBPCOUNT: 11:2,
        /// Backing address bits 31:12.
        PMSDDATALOW: 31:12,
    }
    /// PFHMC_SDDATAHIGH, segment descriptor data, high: backing address bits 63:32.
    pub PFHMC_SDDATAHIGH: Rw<u32> @ 0x0C0200 {}
    /// PFHMC_ERRORINFO: HMC errors are reported here, silently.
    pub PFHMC_ERRORINFO: Ro<u32> @ 0x0C0400 {
        /// Error type.
        HMC_ERROR_TYPE: 11:8,
        /// Object type.
        HMC_OBJECT_TYPE: 20:16,
        /// An error was detected.
        ERROR_DETECTED: 31,
    }
    /// GLHMC_LANTXBASE(pf), TX contexts' base in the function's FPM, 512-byte units.
    pub GLHMC_LANTXBASE: Rw<u32> @ 0x0C6200 [16; stride 4] {
        /// Base.
        FPMLANTXBASE: 23:0,
    }
    /// GLHMC_LANTXCNT(pf), TX contexts.
    pub GLHMC_LANTXCNT: Rw<u32> @ 0x0C6300 [16; stride 4] {
        /// Count.
        FPMLANTXCNT: 10:0,
    }
    /// GLHMC_LANRXBASE(pf), RX contexts' base, 512-byte units.
    pub GLHMC_LANRXBASE: Rw<u32> @ 0x0C6400 [16; stride 4] {
        /// Base.
        FPMLANRXBASE: 23:0,
    }
    /// GLHMC_LANRXCNT(pf), RX contexts.
    pub GLHMC_LANRXCNT: Rw<u32> @ 0x0C6500 [16; stride 4] {
        /// Count.
        FPMLANRXCNT: 10:0,
    }

    /// QTX_CTL(q), transmit queue owner (§10.2.2.12.7).
    pub QTX_CTL: Rw<u32> @ 0x104000 [1536; stride 4] {
        /// Owner type: 2 = PF.
        PFVF_Q: 1:0,
        /// Owning PF.
        PF_INDX: 5:2,
    }
    /// QTX_ENA(q), transmit queue enable.
    pub QTX_ENA: Rw<u32> @ 0x100000 [1536; stride 4] {
        /// Enable request.
        QENA_REQ: 0,
        /// Fast disable.
        FAST_QDIS: 1,
        /// Enable status: follows the request once the queue is (un)configured.
        QENA_STAT: 2,
    }
    /// QTX_TAIL(q), transmit tail.
    pub QTX_TAIL: Rw<u32> @ 0x108000 [1536; stride 4] {
        /// Tail index.
        TAIL: 12:0,
    }
    /// QRX_ENA(q), receive queue enable.
    pub QRX_ENA: Rw<u32> @ 0x120000 [1536; stride 4] {
        /// Enable request.
        QENA_REQ: 0,
        /// Fast disable.
        FAST_QDIS: 1,
        /// Enable status.
        QENA_STAT: 2,
    }
    /// QRX_TAIL(q), receive tail.
    pub QRX_TAIL: Rw<u32> @ 0x128000 [1536; stride 4] {
        /// Tail index.
        TAIL: 12:0,
    }
    /// GLLAN_TXPRE_QDIS(i), transmit pre-queue disable for absolute queues 128i..128i+127.
    pub GLLAN_TXPRE_QDIS: Rw<u32> @ 0x0E6500 [12; stride 4] {
        /// Absolute queue index within the group.
        QINDX: 10:0,
        /// Set the queue's pre-disable.
        SET_QDIS: 30,
        /// Clear it (before enabling the queue).
        CLEAR_QDIS: 31,
    }

    /// QINT_RQCTL(q), receive queue interrupt cause control (§10.2.2.4.17).
    pub QINT_RQCTL: Rw<u32> @ 0x03A000 [1536; stride 4] {
        /// MSI-X vector.
        MSIX_INDX: 7:0,
        /// ITR index (3 = none).
        ITR_INDX: 12:11,
        /// Next queue of the linked list (0x7FF = end).
        NEXTQ_INDX: 26:16,
        /// Next queue's type: 0 = RX, 1 = TX.
        NEXTQ_TYPE: 28:27,
        /// Cause enable.
        CAUSE_ENA: 30,
    }
    /// QINT_TQCTL(q), transmit queue interrupt cause control.
    pub QINT_TQCTL: Rw<u32> @ 0x03C000 [1536; stride 4] {
        /// MSI-X vector.
        MSIX_INDX: 7:0,
        /// ITR index (3 = none).
        ITR_INDX: 12:11,
        /// Next queue of the linked list (0x7FF = end).
        NEXTQ_INDX: 26:16,
        /// Next queue's type: 0 = RX, 1 = TX.
        NEXTQ_TYPE: 28:27,
        /// Cause enable.
        CAUSE_ENA: 30,
    }
    /// PFINT_LNKLST0, head of the queue list of interrupt 0.
    pub PFINT_LNKLST0: Rw<u32> @ 0x038500 {
        /// First queue (0x7FF = empty).
        FIRSTQ_INDX: 10:0,
        /// Its type: 0 = RX, 1 = TX.
        FIRSTQ_TYPE: 12:11,
    }
    /// PFINT_DYN_CTL0, interrupt 0 dynamic control.
    pub PFINT_DYN_CTL0: Rw<u32> @ 0x038480 {
        /// Interrupt enable.
        INTENA: 0,
        /// Clear the pending bit.
        CLEARPBA: 1,
        /// ITR index to update (3 = none).
        ITR_INDX: 4:3,
    }
    /// PFINT_ITR0(i), interval of ITR `i` of interrupt 0, 2 µs units.
    pub PFINT_ITR0: Rw<u32> @ 0x038000 [3; stride 0x80] {
        /// Interval.
        INTERVAL: 11:0,
    }

    /// PFQF_HKEY(i), the RSS key, bytes 4i..4i+3 (§10.2.2.18).
    pub PFQF_HKEY: Rw<u32> @ 0x244800 [13; stride 0x80] {}
    /// PFQF_HLUT(i), the RSS lookup table, entries 4i..4i+3, one per byte.
    pub PFQF_HLUT: Rw<u32> @ 0x240000 [128; stride 0x80] {}
    /// PFQF_HENA(i), the packet classifier types hashed, bits 32i..32i+31.
    pub PFQF_HENA: Rw<u32> @ 0x245900 [2; stride 0x80] {}
    /// PFQF_CTL_0, PF filter control.
    pub PFQF_CTL_0: Rw<u32> @ 0x1C0AC0 {
        /// 1 = a 512-entry lookup table, 0 = 128 entries.
        HASHLUTSIZE: 16,
    }

    /// GLPRT_GORC(port), good octets received, 48 bits (low dword, then high).
    pub GLPRT_GORC: Ro<u64> @ 0x300000 [4; stride 8] {
        /// The count.
        VALUE: 47:0,
    }
    /// GLPRT_UPRC(port), unicast packets received, 48 bits.
    pub GLPRT_UPRC: Ro<u64> @ 0x3005A0 [4; stride 8] {
        /// The count.
        VALUE: 47:0,
    }
    /// GLPRT_MPRC(port), multicast packets received, 48 bits.
    pub GLPRT_MPRC: Ro<u64> @ 0x3005C0 [4; stride 8] {
        /// The count.
        VALUE: 47:0,
    }
    /// GLPRT_BPRC(port), broadcast packets received, 48 bits.
    pub GLPRT_BPRC: Ro<u64> @ 0x3005E0 [4; stride 8] {
        /// The count.
        VALUE: 47:0,
    }
    /// GLPRT_RDPC(port), packets dropped for want of a descriptor or an enabled queue.
    pub GLPRT_RDPC: Ro<u32> @ 0x300600 [4; stride 8] {}
    /// GLPRT_GOTC(port), good octets transmitted, 48 bits.
    pub GLPRT_GOTC: Ro<u64> @ 0x300680 [4; stride 8] {
        /// The count.
        VALUE: 47:0,
    }
    /// GLPRT_UPTC(port), unicast packets transmitted, 48 bits.
    pub GLPRT_UPTC: Ro<u64> @ 0x3009C0 [4; stride 8] {
        /// The count.
        VALUE: 47:0,
    }
    /// GLPRT_CRCERRS(port), CRC errors.
    pub GLPRT_CRCERRS: Ro<u32> @ 0x300080 [4; stride 8] {}
}

/// QTX_CTL.PFVF_Q: the queue belongs to a PF.
pub const QTX_CTL_PF_QUEUE: u64 = 2;
/// End of an interrupt's queue list.
pub const QUEUE_LIST_END: u64 = 0x7FF;
/// Queue types in the interrupt lists.
pub const QTYPE_RX: u64 = 0;
/// Queue types in the interrupt lists.
pub const QTYPE_TX: u64 = 1;
/// "No ITR" index.
pub const ITR_NONE: u64 = 3;

/// Bytes of BAR 0 the driver maps (the XL710's register space is 4 MiB; the last
/// register used is below 0x380000).
pub const BAR_LEN: u64 = 0x40_0000;
