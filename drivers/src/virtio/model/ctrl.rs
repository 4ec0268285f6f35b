//! The device side of multi-queue: the configuration image, the control virtqueue
//! (virtio 1.2 §5.1.6.5) and RSS steering (§5.1.6.4.3, §5.1.6.5.7).
//!
//! Written from the spec, independently of the driver's encoder: the command layout is
//! parsed field by field and every rule the device is told to check is checked (a
//! refusal acks `VIRTIO_NET_ERR`); chain-shape slips by the driver are violations.

use std::rc::Rc;

use cadence_core::rss::toeplitz;

use super::Device;
use crate::virtio::regs::feature;

/// The hash types QEMU's virtio-net supports (IPv4/TCPv4/UDPv4/IPv6/TCPv6/UDPv6 and
/// the three `_EX` types).
pub(crate) const QEMU_HASH_TYPES: u32 = 0x1FF;

const CLASS_MQ: u8 = 4;
const VQ_PAIRS_SET: u8 = 0;
const RSS_CONFIG: u8 = 1;
const OK: u8 = 0;
const ERR: u8 = 1;

/// How the control queue answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CtrlMode {
    /// Carries out valid commands (ack OK), refuses invalid ones (ack ERR).
    Answer,
    /// Refuses every command (ack ERR).
    Refuse,
    /// Returns the chain without writing the ack (a buggy device).
    NoAck,
    /// Never looks at the queue (until [`super::Model::answer_ctrl`]).
    Silent,
}

/// A command the device read, and its answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CtrlCommand {
    pub(crate) class: u8,
    pub(crate) cmd: u8,
    pub(crate) data: Vec<u8>,
    pub(crate) ack: u8,
}

/// An accepted `RSS_CONFIG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RssConf {
    pub(crate) hash_types: u32,
    pub(crate) table: Vec<u16>,
    pub(crate) unclassified: u16,
    pub(crate) max_tx_vq: u16,
    pub(crate) key: Vec<u8>,
}

impl Device {
    /// The control queue's index when `CTRL_VQ` was accepted (§5.1.2: 2N, N =
    /// `max_virtqueue_pairs` with MQ or RSS, else 1).
    pub(super) fn ctrl_queue(&self) -> Option<u16> {
        if self.accepted & feature::NET_CTRL_VQ == 0 {
            return None;
        }
        let multi = self.accepted & (feature::NET_MQ | feature::NET_RSS) != 0;
        Some(if multi { 2 * self.max_pairs } else { 2 })
    }

    /// `struct virtio_net_config` (§5.1.4) as the device shows it.
    pub(super) fn config_image(&self) -> [u8; 24] {
        let mut c = [0u8; 24];
        c[0..6].copy_from_slice(&self.mac);
        c[8..10].copy_from_slice(&self.max_pairs.to_le_bytes());
        c[17] = self.rss_max_key;
        c[18..20].copy_from_slice(&self.rss_max_table.to_le_bytes());
        c[20..24].copy_from_slice(&self.hash_types.to_le_bytes());
        c
    }

    /// Processes every command on the control queue: reads the chain, carries the
    /// command out (or not), writes the ack, publishes the used entry.
    pub(super) fn ctrl_step(&mut self) {
        let Some(q) = self.ctrl_queue().map(usize::from) else { return };
        let Some(vq) = self.vqs.get(q).cloned() else { return };
        let mem = Rc::clone(&self.mem);
        let avail_idx = mem.r16(vq.driver + 2);
        let (mut last, mut used) = (vq.last_avail, vq.used_idx);
        while last != avail_idx {
            let head = mem.r16(vq.driver + 4 + 2 * (last % vq.size) as u64);
            // Walk the chain: readable bytes first, then the writable descriptors.
            let (mut readable, mut writable) = (Vec::new(), Vec::new());
            let mut id = head;
            for _ in 0..vq.size {
                if id >= vq.size {
                    self.violations.push(format!("ctrl: descriptor {id} outside the queue"));
                    break;
                }
                let d = vq.desc + 16 * id as u64;
                let (addr, len, flags, next) = (mem.r64(d), mem.r32(d + 8), mem.r16(d + 12), mem.r16(d + 14));
                if flags & 2 != 0 {
                    writable.push((addr, len));
                } else {
                    if !writable.is_empty() {
                        self.violations.push("ctrl: readable descriptor after a writable one".into());
                    }
                    let mut b = vec![0u8; len as usize];
                    if !mem.read(addr, &mut b) {
                        self.violations.push(format!("ctrl: buffer {addr:#x} outside memory"));
                    }
                    readable.extend_from_slice(&b);
                }
                if flags & 1 == 0 {
                    break;
                }
                id = next;
            }
            let Some(&(ack_addr, ack_len)) = writable.first() else {
                self.violations.push("ctrl: command without a writable ack".into());
                last = last.wrapping_add(1);
                continue;
            };
            if ack_len < 1 || readable.len() < 2 {
                self.violations.push(format!("ctrl: command of {} bytes, ack of {ack_len}", readable.len()));
            }
            let (class, cmd) = (readable.first().copied().unwrap_or(0), readable.get(1).copied().unwrap_or(0));
            let data = readable.get(2..).unwrap_or(&[]).to_vec();
            let ack = match self.ctrl_mode {
                CtrlMode::Refuse => ERR,
                _ => self.execute(class, cmd, &data),
            };
            if self.ctrl_mode != CtrlMode::NoAck {
                mem.write(ack_addr, &[ack]);
            }
            self.ctrl_log.push(CtrlCommand { class, cmd, data, ack });
            let e = vq.device + 4 + 8 * (used % vq.size) as u64;
            mem.write(e, &(head as u32).to_le_bytes());
            mem.write(e + 4, &1u32.to_le_bytes());
            last = last.wrapping_add(1);
            used = used.wrapping_add(1);
        }
        mem.write(vq.device + 2, &used.to_le_bytes());
        self.vqs[q].last_avail = last;
        self.vqs[q].used_idx = used;
    }

    /// Carries out one command; returns the ack.
    pub(crate) fn execute(&mut self, class: u8, cmd: u8, data: &[u8]) -> u8 {
        match (class, cmd) {
            (CLASS_MQ, VQ_PAIRS_SET) => {
                // §5.1.6.5.5: le16 virtqueue_pairs, 1..=max_virtqueue_pairs, with MQ.
                let ok = self.accepted & feature::NET_MQ != 0 && data.len() == 2;
                let pairs = u16::from_le_bytes([data.first().copied().unwrap_or(0), data.get(1).copied().unwrap_or(0)]);
                if ok && (1..=self.max_pairs).contains(&pairs) {
                    self.active_pairs = pairs;
                    self.rss = None;
                    OK
                } else {
                    ERR
                }
            }
            (CLASS_MQ, RSS_CONFIG) if self.accepted & feature::NET_RSS != 0 => match self.parse_rss(data) {
                Some(conf) => {
                    self.active_pairs = conf.max_tx_vq;
                    self.rss = Some(conf);
                    OK
                }
                None => ERR,
            },
            _ => ERR,
        }
    }

    /// Parses and checks a `struct virtio_net_rss_config` (§5.1.6.5.7.1).
    fn parse_rss(&self, d: &[u8]) -> Option<RssConf> {
        let u16_at = |o: usize| Some(u16::from_le_bytes([*d.get(o)?, *d.get(o + 1)?]));
        let hash_types = u32::from_le_bytes(d.get(0..4)?.try_into().ok()?);
        let mask = u16_at(4)?;
        let unclassified = u16_at(6)?;
        let len = usize::from(mask) + 1;
        let table: Vec<u16> = (0..len).map(|i| u16_at(8 + 2 * i)).collect::<Option<_>>()?;
        let at = 8 + 2 * len;
        let max_tx_vq = u16_at(at)?;
        let key_len = usize::from(*d.get(at + 2)?);
        let key = d.get(at + 3..at + 3 + key_len)?.to_vec();
        let exact = d.len() == at + 3 + key_len;
        let pairs_ok = (1..=self.max_pairs).contains(&max_tx_vq);
        let ok = exact
            && len.is_power_of_two()
            && len <= usize::from(self.rss_max_table)
            && key_len <= usize::from(self.rss_max_key)
            && hash_types & !self.hash_types == 0
            && pairs_ok
            && unclassified < max_tx_vq
            && table.iter().all(|&q| q < max_tx_vq);
        ok.then_some(RssConf { hash_types, table, unclassified, max_tx_vq, key })
    }

    /// The receive queue (pair) a frame goes to: RSS when configured, else pair 0
    /// (the model does no automatic steering).
    pub(super) fn steer(&self, frame: &[u8]) -> usize {
        let Some(rss) = &self.rss else { return 0 };
        let q = match hash_input(frame, rss.hash_types).and_then(|input| toeplitz(&rss.key, &input).ok()) {
            // §5.1.6.4.3: "the device ... calculates the hash ... and uses the
            // indirection_table_mask to get the index": table[hash & mask].
            Some(h) => rss.table.get(h as usize & (rss.table.len() - 1)).copied().unwrap_or(rss.unclassified),
            None => rss.unclassified,
        };
        usize::from(q)
    }
}

/// The Toeplitz input for `frame` under the enabled `types` (§5.1.6.4.3.1–2): addresses
/// and ports when the matching TCP/UDP type is on and the packet is an unfragmented
/// TCP/UDP packet, else addresses when the plain IP type is on, else `None`
/// (unclassified). Plain Ethernet II, no VLAN tags, no IPv6 extension headers.
fn hash_input(f: &[u8], types: u32) -> Option<Vec<u8>> {
    let ethertype = u16::from_be_bytes([*f.get(12)?, *f.get(13)?]);
    let ip = f.get(14..)?;
    let (src, dst, proto, l4, v6) = match ethertype {
        0x0800 => {
            let ihl = usize::from(ip.first()? & 0xF) * 4;
            let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]) & 0x3FFF;
            let proto = if frag == 0 { *ip.get(9)? } else { 0 };
            (ip.get(12..16)?, ip.get(16..20)?, proto, ip.get(ihl..), false)
        }
        0x86DD => (ip.get(8..24)?, ip.get(24..40)?, *ip.get(6)?, ip.get(40..), true),
        _ => return None,
    };
    let (ip_t, tcp_t, udp_t) = if v6 { (1 << 3, 1 << 4, 1 << 5) } else { (1 << 0, 1 << 1, 1 << 2) };
    let l4_on = (proto == 6 && types & tcp_t != 0) || (proto == 17 && types & udp_t != 0);
    let mut input = [src, dst].concat();
    if l4_on && let Some(ports) = l4.and_then(|l| l.get(0..4)) {
        input.extend_from_slice(ports);
        return Some(input);
    }
    (types & ip_t != 0).then_some(input)
}
