//! A register-level model of a modern virtio-net PCI function, for host tests.
//!
//! - [`FakePci`] (in `host`): configuration space with the virtio vendor capabilities (common,
//!   notify, ISR, device) behind an MSI-X capability, all in BAR 4 like QEMU's.
//! - [`Device`]: common-configuration semantics (reset to 0, feature select windows,
//!   FEATURES_OK accept/refuse, queue registers), the doorbells, and the device side of
//!   the split virtqueues: [`Model::step`] consumes TX descriptor chains (checking the
//!   header is zero) and delivers injected RX frames (buffer first, then the used idx), with
//!   `MRG_RXBUF` over as many buffers as a frame fills (`num_buffers` in the first header).
//! - [`FakeDma`] (in `host`): DMA memory over host memory at fake physical addresses; the packet
//!   pool's memory ([`PoolMem`]) is reachable by physical address too.
//! - Multi-queue (in `ctrl`, turned on by [`Model::with_pairs`]): `CTRL_VQ`, `MQ` and `RSS`
//!   offered, the configuration fields `max_virtqueue_pairs` and the RSS limits, the control
//!   queue answered during the doorbell write (like QEMU) with every command's layout
//!   checked, and injected frames steered to a receive queue at injection time by the
//!   Toeplitz hash of the configured key and the indirection table.
//!
//! Protocol slips by the driver (a queue register written outside FEATURES_OK..DRIVER_OK,
//! a notification before DRIVER_OK, a non-zero TX header, a descriptor the device did not
//! expect, ...) are recorded in [`Device::violations`]; tests assert it stays empty.

mod ctrl;
mod host;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use cadence_core::buf::{BUF_SIZE, HEADROOM};

use super::regs::{DeviceStatus, NO_VECTOR, common, feature};
pub(crate) use ctrl::{CtrlCommand, CtrlMode, RssConf};
pub(crate) use host::{FakeClock, FakeDma, FakePci, Region, Window};
use host::{Mem, PoolMem};

/// BAR holding every virtio structure.
pub(crate) const BAR: u8 = 4;
const COMMON_OFF: u64 = 0x0000;
const COMMON_LEN: u64 = 0x40;
const ISR_OFF: u64 = 0x1000;
const DEVICE_OFF: u64 = 0x2000;
/// All of `struct virtio_net_config` up to `supported_hash_types` (§5.1.4).
const DEVICE_LEN: u64 = 0x18;
const NOTIFY_OFF: u64 = 0x3000;
/// Doorbell spacing (`notify_off_multiplier`); `queue_notify_off` of queue q is q.
pub(crate) const NOTIFY_MULT: u64 = 4;
const BAR_LEN: u64 = 0x4000;

/// Fake physical base of DMA (ring) memory.
const DMA_BASE: u64 = 0x1000_0000;
const DMA_LEN: usize = 1 << 20;
/// Fake physical base of packet-pool memory.
pub(crate) const POOL_BASE: u64 = 0x4000_0000;
/// Something the driver did, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// A write to `device_status`.
    Status(u8),
    /// `queue_enable` written 1 for a queue.
    QueueEnable(u16),
    /// A doorbell write for a queue.
    Notify(u16),
}

/// One virtqueue as the device sees it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Vq {
    pub(crate) size: u16,
    pub(crate) msix: u16,
    pub(crate) enabled: bool,
    pub(crate) desc: u64,
    pub(crate) driver: u64,
    pub(crate) device: u64,
    last_avail: u16,
    pub(crate) used_idx: u16,
}

/// An RX frame waiting for a buffer; `claimed` overrides the used length reported (of its
/// first buffer), `num_buffers` the header's count with `MRG_RXBUF`.
#[derive(Debug, Clone)]
struct RxFrame {
    bytes: Vec<u8>,
    claimed: Option<u32>,
    num_buffers: Option<u16>,
}

/// The device's state and knobs.
#[derive(Debug)]
pub(crate) struct Device {
    mem: Rc<Mem>,
    // Knobs.
    pub(crate) offered: u64,
    pub(crate) refuse_features_ok: bool,
    pub(crate) stuck_reset: bool,
    pub(crate) unstable_config: bool,
    pub(crate) queue_max: u16,
    pub(crate) num_queues: u16,
    pub(crate) mac: [u8; 6],
    /// TX descriptors [`Model::step`] consumes per call (`None`: all).
    pub(crate) tx_budget: Option<usize>,
    /// `max_virtqueue_pairs` (valid with MQ/RSS).
    pub(crate) max_pairs: u16,
    /// `rss_max_key_size`.
    pub(crate) rss_max_key: u8,
    /// `rss_max_indirection_table_length`.
    pub(crate) rss_max_table: u16,
    /// `supported_hash_types`.
    pub(crate) hash_types: u32,
    /// How the control queue answers.
    pub(crate) ctrl_mode: CtrlMode,
    // Registers.
    pub(crate) status: u8,
    dfselect: u32,
    gfselect: u32,
    pub(crate) accepted: u64,
    pub(crate) config_msix: u16,
    generation: u8,
    select: u16,
    pub(crate) vqs: Vec<Vq>,
    // Observations.
    pub(crate) log: Vec<Event>,
    pub(crate) violations: Vec<String>,
    pub(crate) tx_frames: Vec<Vec<u8>>,
    /// Frames waiting for a buffer, per receive queue (pair).
    rx_pending: Vec<VecDeque<RxFrame>>,
    /// Control commands the device carried out or refused, in order.
    pub(crate) ctrl_log: Vec<CtrlCommand>,
    /// Queue pairs in use (1 until `VQ_PAIRS_SET` or `RSS_CONFIG`).
    pub(crate) active_pairs: u16,
    /// The RSS configuration in force.
    pub(crate) rss: Option<RssConf>,
}

impl Device {
    fn reset(&mut self) {
        self.status = 0;
        self.accepted = 0;
        self.config_msix = 0;
        self.select = 0;
        let max = self.queue_max;
        self.vqs = vec![Vq { size: max, ..Vq::default() }; self.num_queues as usize];
        self.active_pairs = 1;
        self.rss = None;
        self.rx_pending.resize(self.max_pairs.max(1) as usize, VecDeque::new());
    }

    fn live_queue_config(&self) -> bool {
        let s = DeviceStatus(self.status);
        s.contains(DeviceStatus::FEATURES_OK) && !s.contains(DeviceStatus::DRIVER_OK)
    }

    fn write_status(&mut self, v: u8) {
        self.log.push(Event::Status(v));
        if v == 0 {
            if self.stuck_reset {
                self.status = DeviceStatus::ACKNOWLEDGE | DeviceStatus::DRIVER;
            } else {
                self.reset();
            }
            return;
        }
        if v & DeviceStatus::FAILED == 0 && v & self.status != self.status {
            self.violations.push(format!("status {v:#x} clears bits of {:#x}", self.status));
        }
        let mut v = v;
        let newly_ok = v & DeviceStatus::FEATURES_OK != 0 && self.status & DeviceStatus::FEATURES_OK == 0;
        if newly_ok {
            let subset = self.accepted & !self.offered == 0;
            let v1 = self.accepted & feature::VERSION_1 != 0;
            if self.refuse_features_ok || !subset || !v1 {
                v &= !DeviceStatus::FEATURES_OK;
            }
        }
        if v & DeviceStatus::DRIVER_OK != 0 && v & DeviceStatus::FEATURES_OK == 0 && v & DeviceStatus::FAILED == 0 {
            self.violations.push("DRIVER_OK without FEATURES_OK".into());
        }
        self.status = v;
    }

    fn vq(&mut self) -> Option<&mut Vq> {
        let s = self.select as usize;
        self.vqs.get_mut(s)
    }

    fn common_read(&mut self, off: usize) -> u32 {
        match off {
            common::DEVICE_FEATURE_SELECT => self.dfselect,
            common::DEVICE_FEATURE => match self.dfselect {
                0 => self.offered as u32,
                1 => (self.offered >> 32) as u32,
                _ => 0,
            },
            common::DRIVER_FEATURE_SELECT => self.gfselect,
            common::DRIVER_FEATURE => (self.accepted >> (32 * (self.gfselect & 1))) as u32,
            common::CONFIG_MSIX_VECTOR => self.config_msix as u32,
            common::NUM_QUEUES => self.num_queues as u32,
            common::DEVICE_STATUS => self.status as u32,
            common::CONFIG_GENERATION => {
                if self.unstable_config {
                    self.generation = self.generation.wrapping_add(1);
                }
                self.generation as u32
            }
            common::QUEUE_SELECT => self.select as u32,
            common::QUEUE_SIZE => self.vq().map_or(0, |q| q.size as u32),
            common::QUEUE_MSIX_VECTOR => self.vq().map_or(0, |q| q.msix as u32),
            common::QUEUE_ENABLE => self.vq().map_or(0, |q| q.enabled as u32),
            common::QUEUE_NOTIFY_OFF => self.select as u32,
            _ => 0,
        }
    }

    fn common_write(&mut self, off: usize, v: u64) {
        let queue_reg = matches!(
            off,
            common::QUEUE_SIZE
                | common::QUEUE_MSIX_VECTOR
                | common::QUEUE_ENABLE
                | common::QUEUE_DESC
                | common::QUEUE_DRIVER
                | common::QUEUE_DEVICE
        ) || off == common::QUEUE_DESC + 4
            || off == common::QUEUE_DRIVER + 4
            || off == common::QUEUE_DEVICE + 4;
        if queue_reg && !self.live_queue_config() {
            self.violations.push(format!("queue register {off:#x} written in status {:#x}", self.status));
        }
        let max = self.queue_max;
        let sel = self.select;
        let hi = |old: u64, v: u64| (old & 0xFFFF_FFFF) | v << 32;
        let lo = |old: u64, v: u64| (old & !0xFFFF_FFFF) | v;
        match off {
            common::DEVICE_FEATURE_SELECT => self.dfselect = v as u32,
            common::DRIVER_FEATURE_SELECT => self.gfselect = v as u32,
            common::DRIVER_FEATURE => {
                let s = DeviceStatus(self.status);
                if !s.contains(DeviceStatus::DRIVER) || s.contains(DeviceStatus::FEATURES_OK) {
                    self.violations.push("driver_feature written outside DRIVER..FEATURES_OK".into());
                }
                match self.gfselect {
                    0 => self.accepted = lo(self.accepted, v),
                    1 => self.accepted = hi(self.accepted, v),
                    _ => {}
                }
            }
            common::CONFIG_MSIX_VECTOR => self.config_msix = v as u16,
            common::DEVICE_STATUS => self.write_status(v as u8),
            common::QUEUE_SELECT => self.select = v as u16,
            common::QUEUE_SIZE => {
                let v = v as u16;
                if !v.is_power_of_two() || v > max {
                    self.violations.push(format!("queue {sel} size {v} (max {max})"));
                }
                if let Some(q) = self.vq() {
                    q.size = v;
                }
            }
            common::QUEUE_MSIX_VECTOR => {
                if let Some(q) = self.vq() {
                    q.msix = v as u16;
                }
            }
            common::QUEUE_ENABLE => {
                self.log.push(Event::QueueEnable(sel));
                if let Some(q) = self.vq() {
                    q.enabled = v == 1;
                }
            }
            o if (common::QUEUE_DESC..common::QUEUE_DEVICE + 8).contains(&o) => {
                let Some(q) = self.vq() else { return };
                let field = match (o - common::QUEUE_DESC) / 8 {
                    0 => &mut q.desc,
                    1 => &mut q.driver,
                    _ => &mut q.device,
                };
                *field = if o % 8 == 0 { lo(*field, v) } else { hi(*field, v) };
            }
            _ => {}
        }
    }

    fn notify(&mut self, off: u64, v: u16) {
        let q = ((off - NOTIFY_OFF) / NOTIFY_MULT) as u16;
        self.log.push(Event::Notify(q));
        if v != q {
            self.violations.push(format!("doorbell of queue {q} written {v}"));
        }
        if !DeviceStatus(self.status).contains(DeviceStatus::DRIVER_OK) {
            self.violations.push(format!("notify of queue {q} before DRIVER_OK"));
        }
        if !self.vqs.get(q as usize).is_some_and(|vq| vq.enabled) {
            self.violations.push(format!("notify of disabled queue {q}"));
        }
        if Some(q) == self.ctrl_queue() && self.ctrl_mode != CtrlMode::Silent {
            self.ctrl_step();
        }
    }

    fn bar_read(&mut self, off: u64, size: usize) -> u32 {
        if off < COMMON_OFF + COMMON_LEN {
            let v = self.common_read(off as usize);
            // Sub-word reads of a wider field see its low bytes (enough for the driver).
            if size < 4 { v & ((1u32 << (8 * size)) - 1) } else { v }
        } else if (DEVICE_OFF..DEVICE_OFF + DEVICE_LEN).contains(&off) {
            let o = (off - DEVICE_OFF) as usize;
            let cfg = self.config_image();
            (0..size).fold(0, |v, i| v | (cfg.get(o + i).copied().unwrap_or(0) as u32) << (8 * i))
        } else {
            0
        }
    }

    fn bar_write(&mut self, off: u64, v: u64) {
        if off < COMMON_OFF + COMMON_LEN {
            self.common_write(off as usize, v);
        } else if (NOTIFY_OFF..BAR_LEN).contains(&off) {
            self.notify(off, v as u16);
        } else {
            self.violations.push(format!("write {v:#x} to BAR offset {off:#x}"));
        }
    }

    /// Consumes TX descriptors of queue `q`; returns how many.
    fn tx_step(&mut self, q: usize) -> usize {
        let Some(vq) = self.vqs.get(q).cloned() else { return 0 };
        let mem = Rc::clone(&self.mem);
        let avail_idx = mem.r16(vq.driver + 2);
        if avail_idx.wrapping_sub(vq.last_avail) > vq.size {
            self.violations.push(format!("queue {q}: avail idx {avail_idx} ran past the ring"));
            return 0;
        }
        let (mut last, mut used) = (vq.last_avail, vq.used_idx);
        let mut n = 0;
        while last != avail_idx && self.tx_budget.is_none_or(|b| n < b) {
            let id = mem.r16(vq.driver + 4 + 2 * (last % vq.size) as u64);
            // The chain from `id` (§2.7.5): every descriptor device-readable, the header in
            // the first, at most `size` long.
            let mut bytes = Vec::new();
            let mut d_id = id;
            for i in 0..=vq.size {
                if i == vq.size || d_id >= vq.size {
                    self.violations.push(format!("queue {q}: TX chain from {id} loops or leaves the table"));
                    break;
                }
                let d = vq.desc + 16 * d_id as u64;
                let (addr, len, flags, next) = (mem.r64(d), mem.r32(d + 8), mem.r16(d + 12), mem.r16(d + 14));
                if flags & !super::queue::DESC_F_NEXT != 0 || (i == 0 && len < 12) || (i > 0 && len == 0) {
                    self.violations.push(format!("queue {q}: bad TX descriptor {d_id} flags {flags} len {len}"));
                }
                let mut part = vec![0u8; len as usize];
                if !mem.read(addr, &mut part) {
                    self.violations.push(format!("queue {q}: TX buffer {addr:#x} outside memory"));
                }
                bytes.extend_from_slice(&part);
                if flags & super::queue::DESC_F_NEXT == 0 {
                    break;
                }
                d_id = next;
            }
            if bytes.iter().take(12).any(|&b| b != 0) {
                self.violations.push(format!("queue {q}: non-zero virtio_net_hdr {:?}", bytes.get(..12)));
            }
            self.tx_frames.push(bytes.get(12..).unwrap_or(&[]).to_vec());
            // Used element first: id, len (nothing written into a TX buffer).
            let e = vq.device + 4 + 8 * (used % vq.size) as u64;
            mem.write(e, &(id as u32).to_le_bytes());
            mem.write(e + 4, &0u32.to_le_bytes());
            last = last.wrapping_add(1);
            used = used.wrapping_add(1);
            n += 1;
        }
        // ... then the used idx.
        mem.write(vq.device + 2, &used.to_le_bytes());
        self.vqs[q].last_avail = last;
        self.vqs[q].used_idx = used;
        n
    }

    /// Delivers pending RX frames into queue `q`'s posted buffers; returns how many.
    fn rx_step(&mut self, q: usize) -> usize {
        let Some(vq) = self.vqs.get(q).cloned() else { return 0 };
        let mem = Rc::clone(&self.mem);
        let avail_idx = mem.r16(vq.driver + 2);
        if avail_idx.wrapping_sub(vq.last_avail) > vq.size {
            self.violations.push(format!("queue {q}: avail idx {avail_idx} ran past the ring"));
            return 0;
        }
        let (mut last, mut used) = (vq.last_avail, vq.used_idx);
        let mut n = 0;
        let merge = self.accepted & feature::NET_MRG_RXBUF != 0;
        // The header goes just before HEADROOM, the frame at HEADROOM, up to the buffer end.
        let (off, want_len) = ((HEADROOM - 12) as u64, (BUF_SIZE - HEADROOM + 12) as u32);
        while last != avail_idx {
            let Some(q_pending) = self.rx_pending.get_mut(q / 2) else { break };
            let Some(frame) = q_pending.front().cloned() else { break };
            // virtio_net_hdr: all zero but num_buffers (§5.1.6.4), then the frame.
            let mut bytes = vec![0u8; 12];
            bytes.extend_from_slice(&frame.bytes);
            // With MRG_RXBUF a packet takes as many buffers as it fills (and waits until
            // that many are posted, as QEMU does); without, one, cut to its length.
            let need = if merge { bytes.len().div_ceil(want_len as usize) } else { 1 };
            if usize::from(avail_idx.wrapping_sub(last)) < need {
                break;
            }
            q_pending.pop_front();
            let count = frame.num_buffers.unwrap_or(need as u16);
            bytes[10..12].copy_from_slice(&count.to_le_bytes());
            if !merge {
                bytes.truncate(want_len as usize);
            }
            for (i, chunk) in bytes.chunks(want_len as usize).enumerate() {
                let id = mem.r16(vq.driver + 4 + 2 * (last % vq.size) as u64);
                let d = vq.desc + 16 * id as u64;
                let (addr, len, flags) = (mem.r64(d), mem.r32(d + 8), mem.r16(d + 12));
                if id >= vq.size || flags != 2 {
                    self.violations.push(format!("queue {q}: bad RX descriptor {id} flags {flags}"));
                }
                if addr < POOL_BASE || (addr - POOL_BASE) % BUF_SIZE as u64 != off || len != want_len {
                    self.violations.push(format!("queue {q}: RX descriptor {id} at {addr:#x} len {len}"));
                }
                if !mem.write(addr, chunk) {
                    self.violations.push(format!("queue {q}: RX buffer {addr:#x} outside memory"));
                }
                let e = vq.device + 4 + 8 * (used % vq.size) as u64;
                mem.write(e, &(id as u32).to_le_bytes());
                let claimed = frame.claimed.filter(|_| i == 0).unwrap_or(chunk.len() as u32);
                mem.write(e + 4, &claimed.to_le_bytes());
                last = last.wrapping_add(1);
                used = used.wrapping_add(1);
            }
            n += 1;
        }
        mem.write(vq.device + 2, &used.to_le_bytes());
        self.vqs[q].last_avail = last;
        self.vqs[q].used_idx = used;
        n
    }
}

/// The test's handle on the device.
#[derive(Debug, Clone)]
pub(crate) struct Model {
    pub(crate) dev: Rc<RefCell<Device>>,
    mem: Rc<Mem>,
}

impl Model {
    /// A device offering VERSION_1 | MAC | MRG_RXBUF | CSUM | STATUS, 2 queues of 256.
    pub(crate) fn new(pool_bytes: usize) -> Self {
        let mem = Rc::new(Mem {
            dma: RefCell::new(vec![0; DMA_LEN]),
            pool: PoolMem::new(pool_bytes),
            weak: RefCell::new(None),
        });
        let dev = Device {
            mem: Rc::clone(&mem),
            offered: feature::VERSION_1
                | feature::NET_MAC
                | feature::NET_MRG_RXBUF
                | feature::NET_CSUM
                | feature::NET_STATUS
                | feature::RING_EVENT_IDX,
            refuse_features_ok: false,
            stuck_reset: false,
            unstable_config: false,
            queue_max: 256,
            num_queues: 2,
            mac: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
            tx_budget: None,
            max_pairs: 1,
            rss_max_key: 40,
            rss_max_table: 128,
            hash_types: ctrl::QEMU_HASH_TYPES,
            ctrl_mode: CtrlMode::Answer,
            status: 0,
            dfselect: 0,
            gfselect: 0,
            accepted: 0,
            config_msix: 0,
            generation: 0,
            select: 0,
            vqs: Vec::new(),
            log: Vec::new(),
            violations: Vec::new(),
            tx_frames: Vec::new(),
            rx_pending: Vec::new(),
            ctrl_log: Vec::new(),
            active_pairs: 1,
            rss: None,
        };
        let model = Self { dev: Rc::new(RefCell::new(dev)), mem };
        model.dev.borrow_mut().reset();
        model
    }

    /// [`Model::new`] plus `CTRL_VQ`, `MQ` and `RSS` with `pairs` queue pairs (and the
    /// control queue after them: `2 * pairs + 1` virtqueues).
    pub(crate) fn with_pairs(pool_bytes: usize, pairs: u16) -> Self {
        let model = Self::new(pool_bytes);
        {
            let mut d = model.dev();
            d.offered |= feature::NET_CTRL_VQ | feature::NET_MQ | feature::NET_RSS;
            d.max_pairs = pairs;
            d.num_queues = 2 * pairs + 1;
            d.reset();
        }
        model
    }

    /// The pool memory (build the `Pool` over it at [`POOL_BASE`] with `Pool::try_with_mem`).
    pub(crate) fn pool_mem(&self) -> cadence_core::buf::PacketMem<'static> {
        self.mem.pool.packet_mem()
    }

    /// Knobs and observations.
    pub(crate) fn dev(&self) -> std::cell::RefMut<'_, Device> {
        self.dev.borrow_mut()
    }

    /// A PCI function in front of this device.
    pub(crate) fn pci(&self) -> FakePci {
        FakePci::new(Rc::clone(&self.dev))
    }

    /// A DMA allocator over this device's memory.
    pub(crate) fn dma(&self) -> FakeDma {
        FakeDma { mem: Rc::clone(&self.mem), next: 0 }
    }

    /// Queues a frame for reception on the receive queue the device steers it to;
    /// returns that queue (pair index).
    pub(crate) fn inject(&self, bytes: &[u8]) -> usize {
        self.push_rx(RxFrame { bytes: bytes.to_vec(), claimed: None, num_buffers: None })
    }

    /// Queues a frame whose header claims `num_buffers` buffers (with `MRG_RXBUF`; a lying
    /// device), spread over as many as it fills.
    pub(crate) fn inject_claiming_buffers(&self, bytes: &[u8], num_buffers: u16) {
        self.push_rx(RxFrame { bytes: bytes.to_vec(), claimed: None, num_buffers: Some(num_buffers) });
    }

    /// Queues a frame whose used entry reports `claimed` bytes (a lying device).
    pub(crate) fn inject_claiming(&self, bytes: &[u8], claimed: u32) {
        self.push_rx(RxFrame { bytes: bytes.to_vec(), claimed: Some(claimed), num_buffers: None });
    }

    fn push_rx(&self, frame: RxFrame) -> usize {
        let mut d = self.dev();
        let q = d.steer(&frame.bytes);
        if let Some(p) = d.rx_pending.get_mut(q) {
            p.push_back(frame);
        }
        q
    }

    /// Frames still waiting for RX buffers, on all queues.
    /// The host memory behind the fake physical addresses.
    pub(crate) fn mem(&self) -> &Mem {
        &self.mem
    }

    /// Where virtqueue `q`'s used ring keeps its `idx` (device area + 2, §2.7.8).
    pub(crate) fn used_idx_addr(&self, q: usize) -> u64 {
        self.dev().vqs[q].device + 2
    }

    pub(crate) fn rx_pending(&self) -> usize {
        self.dev().rx_pending.iter().map(VecDeque::len).sum()
    }

    /// Answers the control queue now (a device that answers late, after
    /// [`CtrlMode::Silent`]).
    pub(crate) fn answer_ctrl(&self) {
        self.dev().ctrl_step();
    }

    /// Runs the device: consumes TX queues, fills RX queues. Returns (tx, rx) counts.
    pub(crate) fn step(&self) -> (usize, usize) {
        // The device looks at memory now: with reordering on, it sees what the barriers
        // oblige and no more ([`Mem::observe`]).
        self.mem.observe();
        let mut d = self.dev();
        let (mut tx, mut rx) = (0, 0);
        for q in 0..d.vqs.len() {
            if !d.vqs[q].enabled || !DeviceStatus(d.status).contains(DeviceStatus::DRIVER_OK) {
                continue;
            }
            let avail_flags = self.mem.r16(d.vqs[q].driver);
            if avail_flags & super::queue::AVAIL_F_NO_INTERRUPT == 0 {
                d.violations.push(format!("queue {q}: VIRTQ_AVAIL_F_NO_INTERRUPT not set"));
            }
            if Some(q as u16) == d.ctrl_queue() {
                continue;
            }
            if q % 2 == 0 { rx += d.rx_step(q) } else { tx += d.tx_step(q) }
        }
        (tx, rx)
    }

    /// Sets or clears `VIRTQ_USED_F_NO_NOTIFY` on every enabled queue.
    pub(crate) fn set_no_notify(&self, on: bool) {
        let d = self.dev();
        for vq in d.vqs.iter().filter(|q| q.enabled) {
            self.mem.write(vq.device, &(on as u16).to_le_bytes());
        }
    }

    /// Publishes a used entry naming descriptor `id` on queue `q` (a buggy device).
    pub(crate) fn push_bogus_used(&self, q: usize, id: u32) {
        let mut d = self.dev();
        let vq = d.vqs[q].clone();
        let e = vq.device + 4 + 8 * (vq.used_idx % vq.size) as u64;
        self.mem.write(e, &id.to_le_bytes());
        self.mem.write(e + 4, &100u32.to_le_bytes());
        let used = vq.used_idx.wrapping_add(1);
        self.mem.write(vq.device + 2, &used.to_le_bytes());
        d.vqs[q].used_idx = used;
    }

    /// Publishes a used entry `(id, len)` on queue `q` and advances the used index (a
    /// hostile device: any id, any length).
    pub(crate) fn push_used_raw(&self, q: usize, id: u32, len: u32) {
        let mut d = self.dev();
        let Some(vq) = d.vqs.get(q).cloned() else { return };
        if vq.size == 0 {
            return;
        }
        let e = vq.device + 4 + 8 * (vq.used_idx % vq.size) as u64;
        self.mem.write(e, &id.to_le_bytes());
        self.mem.write(e + 4, &len.to_le_bytes());
        let used = vq.used_idx.wrapping_add(1);
        self.mem.write(vq.device + 2, &used.to_le_bytes());
        d.vqs[q].used_idx = used;
    }

    /// Moves queue `q`'s used index to `idx` (a hostile device: entries it never wrote).
    pub(crate) fn set_used_idx(&self, q: usize, idx: u16) {
        let mut d = self.dev();
        let Some(vq) = d.vqs.get(q).cloned() else { return };
        self.mem.write(vq.device + 2, &idx.to_le_bytes());
        d.vqs[q].used_idx = idx;
    }

    /// Doorbell writes for queue `q` so far.
    pub(crate) fn notifies(&self, q: u16) -> usize {
        self.dev().log.iter().filter(|e| **e == Event::Notify(q)).count()
    }

    /// Panics with the recorded protocol violations, if any.
    pub(crate) fn assert_clean(&self) {
        let d = self.dev();
        assert!(d.violations.is_empty(), "device saw protocol violations: {:#?}", d.violations);
    }
}

/// `NO_VECTOR`, for assertions.
pub(crate) const MODEL_NO_VECTOR: u16 = NO_VECTOR;
