//! Encrypt: ChaCha20 (RFC 8439 §2.4) over the L4 payload of TCP and UDP packets, with a
//! per-flow nonce (NetBlaze's chain 2 ends with it).
//!
//! ChaCha20 is a stream cipher: encrypting is XOR with the keystream, so decrypting is the
//! same operation. A "decrypt" chain is an `Encrypt` with the same [`EncryptConfig`]; it
//! restores every payload as long as it sees the same 5-tuples (nothing rewrites addresses
//! or ports in between) and, for UDP, the same datagrams in the same order (below).
//!
//! # Key, nonce and keystream position
//!
//! One 256-bit key ([`EncryptConfig::key`]) for every flow. Per flow, a 64-bit *flow id* is
//! the `pna` key hash ([`hash_key`]) of the directional 5-tuple's words ([`crate::parse::FlowKey::words`]),
//! seeded from the key; the
//! 96-bit nonce is `flow id (8 bytes, big-endian) ‖ word (4 bytes, big-endian)`:
//!
//! - **TCP** — stateless: `word = 0`, and the byte with sequence number `s` is encrypted with
//!   keystream byte `s` (block `s / 64`, offset `s % 64`; RFC 8439's 32-bit block counter
//!   covers the whole 2^32 sequence space). The data of a SYN starts at `seq + 1`. A segment
//!   that wraps the sequence space is split at the wrap. Loss, reordering, retransmission and
//!   resegmentation between the two chains do not matter: a byte is encrypted the same way
//!   wherever it travels. Limit: a flow that sends more than 4 GiB reuses keystream (the
//!   sequence space wraps; a per-flow epoch would need state that both ends agree on).
//! - **UDP** — a per-flow datagram counter in a `pna` exact table (add-on-miss, `AutoDelete`
//!   after [`EncryptConfig::udp_idle_timeout`]): datagram `i` of a flow uses `word = i` and
//!   the keystream from block 0. Both chains count the same datagrams only if nothing is
//!   lost, duplicated or reordered between them and both flow entries expire together (an
//!   idle gap longer than the timeout restarts both counters); a datagram that the two
//!   chains count differently decrypts to garbage. 2^32 datagrams of one flow reuse a nonce.
//!   A datagram whose flow cannot get a counter entry (table full) is dropped as
//!   `FlowTableFull`: sending it in the clear would leak it.
//!
//! Nonces are unique per (flow id, word); two flows whose 64-bit ids collide (about
//! n²/2^65 for n flows) share keystream.
//!
//! # What is left alone
//!
//! Packets that are not TCP/UDP, and fragments (a later fragment has no L4 header; a first
//! fragment's checksum covers bytes it does not carry), are passed in the clear or dropped as
//! `NfUnsupported`, by [`EncryptConfig::clear`]. Empty payloads pass untouched.
//!
//! # Checksums
//!
//! The TCP/UDP checksum is updated incrementally over the changed bytes (RFC 1624 eqn. 3
//! with the one's-complement sums of the old and new payload: the payload starts at an even
//! offset of the segment, so its words line up with the checksum's). A UDP checksum of 0
//! (IPv4: none) stays 0; a computed 0 is sent as 0xFFFF (RFC 768).
//!
//! The keystream comes from `encrypt::chacha`, a scalar implementation of RFC 8439 §2.3 checked
//! against the RustCrypto `chacha20` crate in the tests (the crate itself cannot be built
//! unoptimized for the soft-float image target without a `--cfg`; see that module).

use alloc::sync::Arc;
use core::fmt;

use super::{Nf, NfBatch, NfCtx, Verdict};
use crate::buf::Pool;
use crate::checksum::Sum;
use crate::drops::DropReason;
use crate::parse::{Fragment, L4Kind};
use crate::pna::exact::{Local, hash_key};
use crate::pna::p4::{Actions, Applied, P4Table, TableDecl};
use crate::pna::{ActionId, ActionMask, AddStatus, IdleTimeout, NotDone};
use crate::time::{Duration, Instant};
use chacha::ChaCha20;

mod chacha;

/// What to do with a packet that Encrypt cannot encrypt (not TCP/UDP, or a fragment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ClearPolicy {
    /// Forward it unchanged (counted).
    Pass,
    /// Drop it as `NfUnsupported`.
    Drop,
}

/// Configuration of Encrypt (plain data; see [`EncryptConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EncryptConfig {
    /// The ChaCha20 key (all zeros is refused).
    pub key: [u8; 32],
    /// Capacity of the UDP datagram-counter table (flows).
    pub udp_flows: usize,
    /// Idle time after which a UDP flow's counter entry expires (ticks, > 0).
    pub udp_idle_timeout: Duration,
    /// Packets that cannot be encrypted: pass or drop.
    pub clear: ClearPolicy,
}

impl Default for EncryptConfig {
    /// A zero key (refused by `validate`: set one), 65 536 UDP flows, 2^32 ticks of idle
    /// timeout (about 1.4 s at 3 GHz), clear packets passed.
    fn default() -> Self {
        Self {
            key: [0; 32],
            udp_flows: crate::miri_or(65_536, 64),
            udp_idle_timeout: Duration(1 << 32),
            clear: ClearPolicy::Pass,
        }
    }
}

/// What is wrong with an [`EncryptConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum EncryptConfigError {
    /// `key` is all zeros (surely not configured).
    ZeroKey,
    /// `udp_flows` is zero or too large for a table.
    UdpFlows,
    /// `udp_idle_timeout` is zero.
    UdpIdleTimeout,
}

impl fmt::Display for EncryptConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ZeroKey => "encrypt key: all zeros",
            Self::UdpFlows => "encrypt udp_flows: zero or too large",
            Self::UdpIdleTimeout => "encrypt udp_idle_timeout: zero",
        })
    }
}

impl EncryptConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), EncryptConfigError> {
        if self.key == [0; 32] {
            return Err(EncryptConfigError::ZeroKey);
        }
        if self.udp_flows == 0 || self.udp_flows > 1 << 28 {
            return Err(EncryptConfigError::UdpFlows);
        }
        if self.udp_idle_timeout.ticks() == 0 {
            return Err(EncryptConfigError::UdpIdleTimeout);
        }
        Ok(())
    }
}

/// The one action of the UDP counter table: the number of the flow's next datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Next(u64);

impl Actions<1> for Next {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0]);
    fn encode(&self) -> (ActionId, [u64; 1]) {
        (0, [self.0])
    }
    fn decode(id: ActionId, p: &[u64; 1]) -> Option<Self> {
        (id == 0).then_some(Next(p[0]))
    }
}

/// Expire-time profile of UDP counter entries.
const PROFILE: u8 = 0;

/// Words of a directional 5-tuple key ([`crate::parse::FlowKey::words`]).
pub(crate) const KEY_WORDS: usize = crate::parse::FLOW_WORDS;

/// The key and tables, built once and shared by every core.
pub struct EncryptShared {
    key: [u8; 32],
    seed: u64,
    udp: P4Table<KEY_WORDS, 1, Next>,
    clear: ClearPolicy,
}

impl fmt::Debug for EncryptShared {
    // The key stays out of logs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncryptShared").field("udp", &self.udp).field("clear", &self.clear).finish_non_exhaustive()
    }
}

impl EncryptShared {
    /// Validates `cfg` and builds the UDP counter table.
    pub fn try_new(cfg: &EncryptConfig) -> Result<Self, EncryptConfigError> {
        cfg.validate()?;
        let mut decl = TableDecl::new(cfg.udp_flows, Next(0));
        decl.idle_timeout = IdleTimeout::AutoDelete;
        let udp = P4Table::try_new(decl).map_err(|_| EncryptConfigError::UdpFlows)?;
        udp.table().set_expire_profile(PROFILE, cfg.udp_idle_timeout);
        let mut s = [0u8; 8];
        s.copy_from_slice(&cfg.key[..8]);
        Ok(Self { key: cfg.key, seed: u64::from_le_bytes(s) ^ 0x6e63_7279_7074_2d31, udp, clear: cfg.clear })
    }

    /// The flow id of a directional 5-tuple key.
    fn flow_id(&self, key: &[u64; KEY_WORDS]) -> u64 {
        hash_key(self.seed, key)
    }

    /// XORs `data` with the keystream of nonce `flow_id ‖ word` from byte `pos` on.
    fn apply(&self, flow_id: u64, word: u32, pos: u64, data: &mut [u8]) -> bool {
        let mut nonce = [0u8; 12];
        nonce[..8].copy_from_slice(&flow_id.to_be_bytes());
        nonce[8..].copy_from_slice(&word.to_be_bytes());
        ChaCha20::new(&self.key, &nonce).apply(pos, data)
    }
}

/// What one Encrypt instance counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct EncryptCounters {
    /// TCP segments whose payload was transformed.
    pub tcp: u64,
    /// UDP datagrams whose payload was transformed.
    pub udp: u64,
    /// Payload bytes transformed.
    pub bytes: u64,
    /// TCP/UDP packets with an empty payload (passed untouched).
    pub empty: u64,
    /// Packets that could not be encrypted and were passed in the clear.
    pub clear_passed: u64,
    /// Packets that could not be encrypted and were dropped (`NfUnsupported`).
    pub clear_dropped: u64,
    /// UDP datagrams dropped because their flow got no counter entry (`FlowTableFull`).
    pub flow_table_full: u64,
}

/// Encrypt on one worker core.
#[derive(Debug)]
pub struct Encrypt {
    shared: Arc<EncryptShared>,
    lane: Local,
    counters: EncryptCounters,
}

impl Encrypt {
    /// An instance over `shared` (with its own lane of the UDP table).
    pub fn new(shared: Arc<EncryptShared>) -> Self {
        let lane = shared.udp.table().local();
        Self { shared, lane, counters: EncryptCounters::default() }
    }

    /// This instance's counters.
    pub fn counters(&self) -> &EncryptCounters {
        &self.counters
    }

    /// The counter word of the next datagram of `key`'s flow (and counts it), or `None` when
    /// the flow cannot get an entry.
    fn next_datagram(&mut self, key: &[u64; KEY_WORDS], now: Instant) -> Option<u32> {
        let t = &self.shared.udp;
        // Two tries: an add can lose a race with another core adding the same flow.
        for _ in 0..2 {
            match t.apply(&mut self.lane, key, now) {
                Applied::Hit { action: Next(n), entry } => {
                    // The flow is handled by one core at a time, so nobody else moves `n`.
                    t.update(&mut self.lane, &entry, &Next(n.wrapping_add(1)), now).ok()?;
                    let _ = t.restart_expire_timer(&mut self.lane, &entry, now);
                    return Some(n as u32);
                }
                Applied::Miss { miss, .. } => match t.add_entry(&mut self.lane, &miss, &Next(1), PROFILE, now) {
                    AddStatus::Success => return Some(0),
                    AddStatus::NotDone(NotDone::KeyExists) => continue,
                    AddStatus::NotDone(_) => return None,
                },
            }
        }
        None
    }
}

/// Replaces a checksum after the bytes it covers changed from sum `old` to sum `new`
/// (RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`, with `m`, `m'` the sums of the changed words).
fn patch_checksum(hc: u16, old: u16, new: u16) -> u16 {
    !Sum::new().add_u16(!hc).add_u16(!old).add_u16(new).fold()
}

/// The one's complement sum of two folded sums.
fn add16(a: u16, b: u16) -> u16 {
    Sum::new().add_u16(a).add_u16(b).fold()
}

impl Nf for Encrypt {
    fn name(&self) -> &'static str {
        "encrypt"
    }

    fn process(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        for p in batch.alive_mut() {
            let pr = &p.parsed;
            let ok_l4 = matches!(pr.l4, L4Kind::Tcp | L4Kind::Udp) && pr.fragment == Fragment::Whole;
            if !ok_l4 {
                match self.shared.clear {
                    ClearPolicy::Pass => self.counters.clear_passed += 1,
                    ClearPolicy::Drop => {
                        self.counters.clear_dropped += 1;
                        p.verdict = Verdict::Drop(DropReason::NfUnsupported);
                    }
                }
                continue;
            }
            if pr.payload_len == 0 {
                self.counters.empty += 1;
                continue;
            }
            let f = &pr.flow;
            let key = f.words();
            let flow_id = self.shared.flow_id(&key);
            let l4 = usize::from(pr.l4_offset);
            let start = usize::from(pr.payload_offset);
            let tcp = pr.l4 == L4Kind::Tcp;
            let (word, pos) = if tcp {
                let h = pool.frame(p.buf).get(l4..l4 + 14).unwrap_or(&[]);
                let seq = h.get(4..8).map_or(0, |s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]));
                let syn = h.get(13).is_some_and(|fl| fl & 0x02 != 0);
                (0, seq.wrapping_add(u32::from(syn)))
            } else {
                match self.next_datagram(&key, ctx.now) {
                    Some(n) => (n, 0),
                    None => {
                        self.counters.flow_table_full += 1;
                        p.verdict = Verdict::Drop(DropReason::FlowTableFull);
                        continue;
                    }
                }
            };
            // The payload, piece by piece: the first buffer's from the payload's start, then
            // every further buffer of a frame over several (a jumbo frame) whole. The keystream
            // goes on where the last piece ended; the checksum is patched with the pieces'
            // sums, a piece at an odd offset of the payload with its sums' bytes swapped
            // (RFC 1071 §2(B): the sum is byte-order independent, so a one-byte shift swaps it).
            let payload = usize::from(pr.payload_len);
            let (mut sums, mut done, mut first) = (None::<(u16, u16)>, 0usize, true);
            let mut s = Some(p.buf);
            while let (Some(b), true) = (s, done < payload) {
                s = pool.next_segment(b);
                let from = if first { start } else { 0 };
                first = false;
                let Some(rest) = pool.frame_mut(b).get_mut(from..) else { break };
                let n = rest.len().min(payload - done);
                let data = rest.split_at_mut(n).0;
                let old = Sum::new().add_bytes(data).fold();
                let at = pos.wrapping_add(done as u32);
                if tcp {
                    // Bytes up to the wrap of the sequence space, then the rest from position 0.
                    let head = (u64::from(u32::MAX) - u64::from(at) + 1).min(data.len() as u64) as usize;
                    let (a, b) = data.split_at_mut(head);
                    let _ =
                        self.shared.apply(flow_id, word, u64::from(at), a) && self.shared.apply(flow_id, word, 0, b);
                } else {
                    let _ = self.shared.apply(flow_id, word, done as u64, data);
                }
                let new = Sum::new().add_bytes(data).fold();
                let (old, new) = if done % 2 == 1 { (old.swap_bytes(), new.swap_bytes()) } else { (old, new) };
                done += data.len();
                sums = Some(match sums {
                    None => (old, new),
                    Some((o, n)) => (add16(o, old), add16(n, new)),
                });
            }
            let frame = pool.frame_mut(p.buf);
            let at = if tcp { l4 + 16 } else { l4 + 6 };
            if let (Some(c), Some((old, new))) = (frame.get_mut(at..at + 2), sums) {
                let hc = u16::from_be_bytes([c[0], c[1]]);
                if tcp || hc != 0 {
                    let mut v = patch_checksum(hc, old, new);
                    if !tcp && v == 0 {
                        v = 0xFFFF;
                    }
                    c.copy_from_slice(&v.to_be_bytes());
                }
            }
            if tcp {
                self.counters.tcp += 1;
            } else {
                self.counters.udp += 1;
            }
            self.counters.bytes += u64::from(pr.payload_len);
        }
    }

    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        write!(
            w,
            " encrypt_tcp={} encrypt_udp={} encrypt_bytes={} encrypt_empty={} encrypt_clear_passed={} \
             encrypt_clear_dropped={} encrypt_flow_table_full={}",
            c.tcp, c.udp, c.bytes, c.empty, c.clear_passed, c.clear_dropped, c.flow_table_full
        )
    }
}

#[cfg(test)]
mod tests;
