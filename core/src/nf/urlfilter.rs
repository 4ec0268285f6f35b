//! UrlFilter: bounded per-flow TCP reassembly of the client's request head, multi-pattern
//! matching of its URL against banned host+path prefixes, and blocking (optionally
//! resetting) the connections that ask for one (NetBlaze chain 2).
//!
//! # Flows
//!
//! A flow is a TCP connection, keyed in a `pna` exact table (add-on-miss, `AutoDelete`) by its
//! 5-tuple in canonical order (the lower `(address, port)` endpoint first), so both
//! directions hit one entry. The entry holds the flow's state — `Inspect` (with its slab,
//! the slab's generation, the sequence number of stream offset 0, and which endpoint is the
//! client), `Allow` or `Block`:
//!
//! - A miss on a SYN makes the sender the client and `ISN + 1` offset 0; on a SYN-ACK the
//!   receiver is the client and the SYN-ACK's acknowledgment number is offset 0. Such a flow
//!   waits for data in an `Await` entry that holds no slab, under expire profile 2
//!   ([`UrlFilterConfig::handshake_timeout`], short, restarted by each client packet): a
//!   bare SYN claims a flow entry, never a slab, so spoofed SYNs cannot use up the slabs
//!   (only the much larger flow table, and each entry for a short while). The client's first
//!   data segment claims the slab.
//! - On a data segment without a SYN seen (mid-stream pickup, or an `Await` entry that
//!   expired) the sender is the client and the segment starts the stream. Pure ACKs, FINs and
//!   RSTs of unknown flows pass untracked.
//! - `Inspect` entries use expire profile 0 ([`UrlFilterConfig::inspect_timeout`]), restarted
//!   by each client packet, together with the slab's lease (same instant, same timeout): when
//!   the entry expires, so does the lease, and the slab is free for the next claim.
//! - An allowed request keeps the flow under inspection, slab and all, for the next request
//!   on the connection (below, "Every request"). A banned request, a stream that is not
//!   HTTP, a protocol switch or an undecided stream moves the entry to `Allow` or `Block`
//!   under profile 1 ([`UrlFilterConfig::flow_timeout`], restarted by every packet) and
//!   releases the slab at once. Every later packet of a blocked connection, in either direction, is dropped as
//!   `UrlBlocked` (or, from the client, answered with a reset when
//!   [`UrlFilterConfig::reset`] is on).
//!
//! # Reassembly
//!
//! Client→server payload bytes are placed by sequence number relative to offset 0 into the
//! flow's slab ([`UrlFilterConfig::window`] bytes, from a pool allocated at construction):
//! out-of-order segments wait for the holes before them; bytes before offset 0 or past the
//! window are ignored. Only bytes the server's TCP would accept are placed: a segment without
//! ACK (data on a SYN aside) or with a bad TCP checksum is forwarded but not read
//! (`discarded`; the receiver drops it, so reading it would let a client insert bytes the
//! server never sees). Overlapping bytes that agree are a retransmission; bytes that disagree
//! with ones already placed block the connection (`conflicts`): which copy a server keeps
//! depends on its TCP stack, and no legitimate sender retransmits different bytes. The request head is
//! analysed whenever the contiguous prefix grows: once it holds the whole head (up to the
//! empty line), or the window is full, the flow gets its verdict. The segment that completes
//! a banned request is the one dropped (or reset) — the server never gets the whole head, so
//! it never answers; the segments before it were forwarded as they came (nothing is held
//! back).
//!
//! Empty lines before the request line are skipped, as servers do (RFC 9112 §2.2).
//!
//! **Undecided streams** — the filter could not tell the URL: the window filled before the
//! request line or Host header was complete (`gave_up`: headers padded past the window), a
//! complete head without Host (`no_host`), the flow's slab lost under it (`lost`: a client
//! idle past the inspection timeout mid-request), or, on a port listed in
//! [`UrlFilterConfig::ports`], a stream that does not open with an HTTP request line
//! (`not_http`: whatever speaks on a declared HTTP port must speak HTTP). They get
//! [`UrlFilterConfig::undecided`]: `Deny` (the default, fail closed: the connection is
//! blocked like a banned one, counted as `undecided_denied`) or `Allow`. With no ports listed
//! every TCP connection is inspected, and a stream that is not HTTP at all (TLS, SSH) is
//! allowed (`not_http`) — and so is one picked up mid-stream whose first bytes are not a
//! request line, which a client can provoke by pausing mid-request for longer than
//! `inspect_timeout` (its entry expires): list the HTTP ports to close that.
//!
//! **Every request** on a connection is read (keep-alive, pipelining): once a request is
//! allowed, stream offset 0 moves past it — its head, then its body by `Content-Length`, or
//! chunk by chunk through a chunked body and its trailers (`http::next_request`,
//! `http::chunk`, `http::trailers`; the flow entry remembers which of the three offset 0
//! starts) — and the next request is read from there, in the same packet if it is already
//! there. Bodies are never read as requests, however long (their bytes fall before offset 0
//! and are skipped). What ends the reading: a banned request (blocked); bytes after a
//! request that are not a request (`not_http`) — or, after a `CONNECT` or `Upgrade` request,
//! the new protocol's bytes (`switched`, allowed even on a listed port; the bytes after such a
//! request are still read as a request first, since whether the server switched shows only
//! in its answer, which the filter does not read); and framing the filter cannot follow —
//! a head longer than the window, a malformed chunk-size line, `Content-Length` with
//! `Transfer-Encoding` or twice with different values (`unframed`, undecided: a server
//! rejects or mis-frames such a request, and a filter that framed it differently would be
//! walked around). A keep-alive connection holds its slab until its client has been quiet
//! for `inspect_timeout`; then a later request is picked up mid-stream as a new flow.
//!
//! # Matching
//!
//! The URL is `host` (lower case, without port or trailing dot) + the target's path
//! (see `urlfilter::http`); a pattern `host/path` bans every URL it is a prefix of (`example.com/bad`
//! bans `/bad`, `/bad/x` and `/badger` on `example.com`); a pattern without `/` bans the
//! whole host (it is matched as `host/`). Patterns are compiled into one anchored
//! Aho-Corasick automaton (the `aho-corasick` crate, no_std + alloc), searched once per
//! request head; the search does not allocate. The URL is read as servers read it
//! (`urlfilter::http`'s module docs: bare-LF line ends, runs of whitespace in the request
//! line, percent-decoding, backslashes, dot segments, repeated slashes), and the patterns are
//! normalised the same way. Subdomains are not covered by a host pattern.
//!
//! # Exhaustion
//!
//! A new flow that finds no slab (among the 256 it looks at) or no room in the
//! flow table is handled by [`UrlFilterConfig::on_exhaustion`]: `Drop` (the default, fail
//! closed) drops the packet as `FlowTableFull` and adds no entry, so the client's
//! retransmission tries again; `Allow` passes the flow uninspected under an entry of the
//! short handshake timeout (restarted by its packets), so a flood's allow entries vanish soon
//! after it and a flow allowed under pressure has its next request read once it is over.
//! Both are counted, the table's refusals by its reason (`urlfilter_full_capacity`,
//! `urlfilter_full_bucket`, `urlfilter_full_busy`; `urlfilter_flows_used` is the table's
//! used capacity when the counters are written).
//!
//! Expired entries go at once when a batch's sweep reaches their bucket (16 buckets per batch
//! plus two per flow the batch added, so a flood in full batches cannot outrun the sweep),
//! or when a new flow's bucket has no free way.
//!
//! # What it guarantees, and what not
//!
//! Guaranteed (held by `urlfilter::tests` and end to end by `tests/tests/urlfilter_evasion.rs`,
//! a real server's log): no request whose URL, as a server resolves it, starts with a banned
//! pattern reaches the server on an inspected connection — whichever request it is on the
//! connection, however it is spelt (percent-encoding, dot segments, slashes, line ends,
//! whitespace, absolute-form, host case/port/dot), segmented, reordered, retransmitted or
//! padded; streams the filter cannot read are denied by default. Not covered: TLS (`https`:
//! the URL is encrypted; only a listed HTTP port's non-HTTP stream is denied), HTTP/2 and
//! HTTP/3, hosts named by address rather than name (patterns match the Host text), subdomains
//! (a host pattern names one host), IP fragments (dropped, not read), and whatever the server
//! resolves beyond these rules (e.g. case-insensitive file systems, double decoding).
//!
//! TCP in IP fragments cannot be read (no reassembly of IP fragments here): they are dropped
//! as `UrlFragment` by default ([`UrlFilterConfig::fragments`]), or passed uninspected;
//! counted either way. Non-TCP passes (counted).

mod flow;
mod http;
#[cfg(all(test, loom))]
mod loom_slab;
mod rst;
mod slab;

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::{AtomicUsize, Ordering};

use aho_corasick::{AhoCorasick, AhoCorasickKind, Anchored, Input, MatchKind, StartKind};

use super::encrypt::KEY_WORDS;
use super::{Nf, NfBatch, NfCtx};
use crate::buf::Pool;
use crate::pna::exact::Local;
use crate::pna::p4::{Actions, P4Table, TableDecl};
use crate::pna::{ActionId, ActionMask, IdleTimeout};
use crate::time::{Duration, Instant};
use slab::{SlabRef, Slabs};

/// What to do with a new flow when no slab or flow entry is left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Exhaustion {
    /// Drop the packet as `FlowTableFull` (fail closed; a retransmission tries again).
    Drop,
    /// Let the flow through uninspected.
    Allow,
}

/// What to do with a stream the filter could not read a URL from (module docs, "Undecided
/// streams").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Undecided {
    /// Block the connection (fail closed).
    Deny,
    /// Let it through.
    Allow,
}

/// What to do with TCP in IP fragments (non-first fragments carry no ports, so every TCP
/// fragment counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Fragments {
    /// Drop them as `UrlFragment` (fail closed: a client that fragments its request would
    /// otherwise reach the server uninspected; TCP endpoints rarely fragment — path MTU
    /// discovery keeps segments whole).
    Drop,
    /// Pass them uninspected (counted).
    Pass,
}

/// Configuration of the URL filter (plain data; see [`UrlFilterConfig::validate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UrlFilterConfig {
    /// Banned URL prefixes, `host/path` or `host` (printable ASCII, no spaces, no port).
    pub banned: Vec<String>,
    /// Bytes of each client stream reassembled (64..=16384).
    pub window: usize,
    /// Flows under inspection at once (slabs of `window` bytes).
    pub slabs: usize,
    /// Capacity of the flow table (flows under inspection plus flows with a verdict).
    pub flows: usize,
    /// Server ports whose connections are inspected; empty: every TCP connection.
    pub ports: Vec<u16>,
    /// Idle time after which a flow under inspection is forgotten and its slab reused (ticks).
    pub inspect_timeout: Duration,
    /// Idle time after which a flow that opened (SYN, SYN-ACK) but sent no data yet is
    /// forgotten (ticks; short: such a flow holds no slab, only a flow entry).
    pub handshake_timeout: Duration,
    /// Streams the filter could not read a URL from.
    pub undecided: Undecided,
    /// Idle time after which an allowed or blocked flow is forgotten (ticks).
    pub flow_timeout: Duration,
    /// Answer blocked client segments with a TCP reset (rewritten in place) instead of
    /// dropping them silently.
    pub reset: bool,
    /// New flows when slabs or flow entries run out.
    pub on_exhaustion: Exhaustion,
    /// TCP in IP fragments.
    pub fragments: Fragments,
}

impl Default for UrlFilterConfig {
    /// No patterns, 1 KiB windows, 4096 slabs (4 MiB), 65 536 flows, every port, timeouts of
    /// 2^32, 2^36 and 2^30 ticks (inspection, verdict, handshake: about 1.4 s, 23 s and 0.36 s
    /// at 3 GHz), no resets, fail closed (exhaustion and undecided streams).
    fn default() -> Self {
        Self {
            banned: Vec::new(),
            window: 1024,
            slabs: crate::miri_or(4096, 16),
            flows: crate::miri_or(65_536, 64),
            ports: Vec::new(),
            inspect_timeout: Duration(1 << 32),
            handshake_timeout: Duration(1 << 30),
            undecided: Undecided::Deny,
            flow_timeout: Duration(1 << 36),
            reset: false,
            on_exhaustion: Exhaustion::Drop,
            fragments: Fragments::Drop,
        }
    }
}

/// What is wrong with a [`UrlFilterConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UrlFilterConfigError {
    /// `banned[index]` is empty or has an empty host.
    BannedEmpty {
        /// The pattern.
        index: usize,
    },
    /// `banned[index]` has a byte that is not printable ASCII (or a space).
    BannedByte {
        /// The pattern.
        index: usize,
    },
    /// `banned[index]` names a port (`host:port/…`); URLs are matched without ports.
    BannedPort {
        /// The pattern.
        index: usize,
    },
    /// `banned[index]` is longer than `window` (it could never match).
    BannedTooLong {
        /// The pattern.
        index: usize,
    },
    /// `window` is outside 64..=16384.
    Window,
    /// `slabs` is zero or above 2^24.
    Slabs,
    /// `flows` is zero, below `slabs`, or too large for a table.
    Flows,
    /// `inspect_timeout` is zero.
    InspectTimeout,
    /// `flow_timeout` is zero.
    FlowTimeout,
    /// `handshake_timeout` is zero.
    HandshakeTimeout,
    /// The automaton could not be built (too many patterns).
    Matcher,
    /// The heap has no room for `slabs` × `window` bytes.
    OutOfMemory,
}

impl fmt::Display for UrlFilterConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BannedEmpty { index } => write!(f, "urlfilter banned[{index}]: empty host"),
            Self::BannedByte { index } => write!(f, "urlfilter banned[{index}]: not printable ASCII"),
            Self::BannedPort { index } => write!(f, "urlfilter banned[{index}]: has a port"),
            Self::BannedTooLong { index } => write!(f, "urlfilter banned[{index}]: longer than the window"),
            Self::Window => f.write_str("urlfilter window: not in 64..=16384"),
            Self::Slabs => f.write_str("urlfilter slabs: zero or above 2^24"),
            Self::Flows => f.write_str("urlfilter flows: zero, below slabs, or too large"),
            Self::InspectTimeout => f.write_str("urlfilter inspect_timeout: zero"),
            Self::FlowTimeout => f.write_str("urlfilter flow_timeout: zero"),
            Self::HandshakeTimeout => f.write_str("urlfilter handshake_timeout: zero"),
            Self::Matcher => f.write_str("urlfilter banned: automaton too large"),
            Self::OutOfMemory => f.write_str("urlfilter slabs: not enough memory for slabs x window bytes"),
        }
    }
}

impl UrlFilterConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), UrlFilterConfigError> {
        use UrlFilterConfigError as E;
        for (index, p) in self.banned.iter().enumerate() {
            let b = p.as_bytes();
            if !b.iter().all(|c| (0x21..=0x7e).contains(c)) {
                return Err(E::BannedByte { index });
            }
            let host = b.split(|&c| c == b'/').next().unwrap_or(&[]);
            if host.is_empty() || host == b"." {
                return Err(E::BannedEmpty { index });
            }
            if host.contains(&b':') {
                return Err(E::BannedPort { index });
            }
            if b.len() >= self.window {
                return Err(E::BannedTooLong { index });
            }
        }
        if !(64..=16384).contains(&self.window) {
            return Err(E::Window);
        }
        if self.slabs == 0 || self.slabs > 1 << 24 {
            return Err(E::Slabs);
        }
        if self.flows == 0 || self.flows < self.slabs || self.flows > 1 << 28 {
            return Err(E::Flows);
        }
        if self.inspect_timeout.ticks() == 0 {
            return Err(E::InspectTimeout);
        }
        if self.flow_timeout.ticks() == 0 {
            return Err(E::FlowTimeout);
        }
        if self.handshake_timeout.ticks() == 0 {
            return Err(E::HandshakeTimeout);
        }
        Ok(())
    }
}

/// A pattern as the automaton holds it: host lower case without a trailing dot, `/` added
/// to a bare host.
fn normalize(p: &str) -> Vec<u8> {
    let b = p.as_bytes();
    let cut = b.iter().position(|&c| c == b'/').unwrap_or(b.len());
    let (host, path) = b.split_at(cut);
    let mut out = vec![0u8; b.len() + 1];
    let n = http::write_url(host, if path.is_empty() { b"/" } else { path }, &mut out);
    out.truncate(n);
    out
}

/// Where a flow stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Opened (SYN or SYN-ACK seen), no client data yet: no slab.
    Await,
    Inspect,
    Allow,
    Block,
}

/// A flow entry's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowState {
    phase: Phase,
    /// Whether the client is the first endpoint of the canonical key.
    client_first: bool,
    slab: SlabRef,
    /// Sequence number of stream offset 0 (the start of what is read next).
    base: u32,
    /// What stream offset 0 starts.
    read: Reading,
    /// The last request asked to leave HTTP (`CONNECT`, `Upgrade`): bytes after it that are
    /// not a request are the new protocol's, and let the connection go.
    switching: bool,
}

/// What an inspected stream's offset 0 starts (`flow`: every request on the connection).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reading {
    /// A request head.
    Head,
    /// A chunk-size line of a chunked body.
    Chunk,
    /// The trailer section after the last chunk.
    Trailers,
}

impl FlowState {
    const fn verdict(phase: Phase, client_first: bool) -> Self {
        Self {
            phase,
            client_first,
            slab: SlabRef { idx: 0, generation: 0 },
            base: 0,
            read: Reading::Head,
            switching: false,
        }
    }
}

impl Actions<2> for FlowState {
    const HIT_ACTIONS: ActionMask = ActionMask::of(&[0]);
    fn encode(&self) -> (ActionId, [u64; 2]) {
        let phase = match self.phase {
            Phase::Inspect => 0,
            Phase::Allow => 1,
            Phase::Block => 2,
            Phase::Await => 3,
        };
        let read = match self.read {
            Reading::Head => 0u64,
            Reading::Chunk => 1,
            Reading::Trailers => 2,
        };
        let w0 = phase
            | u64::from(self.client_first) << 2
            | read << 3
            | u64::from(self.switching) << 5
            | u64::from(self.slab.idx) << 32;
        (0, [w0, u64::from(self.base) | u64::from(self.slab.generation) << 32])
    }
    fn decode(id: ActionId, p: &[u64; 2]) -> Option<Self> {
        let phase = match (id, p[0] & 3) {
            (0, 0) => Phase::Inspect,
            (0, 1) => Phase::Allow,
            (0, 2) => Phase::Block,
            (0, 3) => Phase::Await,
            _ => return None,
        };
        let read = match p[0] >> 3 & 3 {
            0 => Reading::Head,
            1 => Reading::Chunk,
            2 => Reading::Trailers,
            _ => return None,
        };
        Some(Self {
            phase,
            read,
            switching: p[0] & 1 << 5 != 0,
            client_first: p[0] & 4 != 0,
            slab: SlabRef { idx: (p[0] >> 32) as u32, generation: (p[1] >> 32) as u32 },
            base: p[1] as u32,
        })
    }
}

const PROFILE_INSPECT: u8 = 0;
const PROFILE_FLOW: u8 = 1;
const PROFILE_HANDSHAKE: u8 = 2;

/// The automaton, slabs and flow table, built once and shared by every core.
pub struct UrlFilterShared {
    matcher: AhoCorasick,
    slabs: Slabs,
    flows: P4Table<KEY_WORDS, 2, FlowState>,
    ports: Vec<u16>,
    inspect_timeout: Duration,
    reset: bool,
    on_exhaustion: Exhaustion,
    undecided: Undecided,
    fragments: Fragments,
}

impl fmt::Debug for UrlFilterShared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UrlFilterShared")
            .field("patterns", &self.matcher.patterns_len())
            .field("slabs", &self.slabs)
            .field("flows", &self.flows)
            .finish_non_exhaustive()
    }
}

impl UrlFilterShared {
    /// Validates `cfg`, compiles the patterns and allocates the slabs and the flow table.
    pub fn try_new(cfg: &UrlFilterConfig) -> Result<Self, UrlFilterConfigError> {
        cfg.validate()?;
        let patterns: Vec<Vec<u8>> = cfg.banned.iter().map(|p| normalize(p)).collect();
        let matcher = AhoCorasick::builder()
            .match_kind(MatchKind::Standard)
            .start_kind(StartKind::Anchored)
            // Under Miri the plain NFA (same matches; building the DFA is most of a test's
            // time there).
            .kind(crate::miri_or(None, Some(AhoCorasickKind::NoncontiguousNFA)))
            .build(&patterns)
            .map_err(|_| UrlFilterConfigError::Matcher)?;
        let mut decl = TableDecl::new(cfg.flows, FlowState::verdict(Phase::Allow, false));
        decl.idle_timeout = IdleTimeout::AutoDelete;
        let flows = P4Table::try_new(decl).map_err(|_| UrlFilterConfigError::Flows)?;
        flows.table().set_expire_profile(PROFILE_INSPECT, cfg.inspect_timeout);
        flows.table().set_expire_profile(PROFILE_FLOW, cfg.flow_timeout);
        flows.table().set_expire_profile(PROFILE_HANDSHAKE, cfg.handshake_timeout);
        Ok(Self {
            matcher,
            slabs: Slabs::try_new(cfg.slabs, cfg.window).ok_or(UrlFilterConfigError::OutOfMemory)?,
            flows,
            ports: cfg.ports.clone(),
            inspect_timeout: cfg.inspect_timeout,
            reset: cfg.reset,
            on_exhaustion: cfg.on_exhaustion,
            undecided: cfg.undecided,
            fragments: cfg.fragments,
        })
    }

    /// Whether `url` (host + path, as `http::analyse` builds it) starts with a banned pattern.
    fn banned(&self, url: &[u8]) -> bool {
        let input = Input::new(url).anchored(Anchored::Yes);
        matches!(self.matcher.try_find(input), Ok(Some(_)))
    }

    /// Slabs whose lease is held at `now` (for tests and reports).
    pub fn slabs_in_use(&self, now: Instant) -> usize {
        self.slabs.in_use(now)
    }
}

/// What one URL filter instance counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UrlFilterCounters {
    /// Flows that got a slab and went under inspection.
    pub inspected: u64,
    /// Flows whose request matched no pattern.
    pub allowed: u64,
    /// Flows whose request matched a pattern.
    pub blocked: u64,
    /// Packets of blocked flows dropped (`UrlBlocked`).
    pub blocked_pkts: u64,
    /// Blocked client segments turned into resets.
    pub resets: u64,
    /// Flows whose stream is not an HTTP request.
    pub not_http: u64,
    /// Flows whose window filled before the request line / Host was complete.
    pub gave_up: u64,
    /// Flows whose complete head had no Host (or two different ones).
    pub no_host: u64,
    /// Flows whose request's end could not be told (a head longer than the window, a
    /// chunk-size line that is not one, or ambiguous framing: `http::Next::Unframed`), so the
    /// requests after it could not be read; undecided.
    pub unframed: u64,
    /// Flows that left HTTP after an allowed `CONNECT` or `Upgrade` request (the bytes after
    /// it were not a request): not read further.
    pub switched: u64,
    /// Client segments not placed in the stream because the server's TCP would discard them
    /// (no ACK, or a bad TCP checksum); forwarded as they are.
    pub discarded: u64,
    /// Flows blocked for a conflicting overlap (different bytes for the same stream offsets).
    pub conflicts: u64,
    /// Flows whose slab was lost (a lease that expired under a live flow).
    pub lost: u64,
    /// Undecided flows (`not_http` on a listed port, `gave_up`, `no_host`, `lost`) blocked
    /// by [`Undecided::Deny`].
    pub undecided_denied: u64,
    /// Flows that opened (SYN or SYN-ACK) and waited for data without a slab.
    pub handshakes: u64,
    /// New flows picked up mid-stream (no SYN seen).
    pub midstream: u64,
    /// New flows that found no slab.
    pub slab_exhausted: u64,
    /// New flows that found no room in the flow table (the sum of the three reasons below).
    pub table_full: u64,
    /// … because the table held its capacity of entries (live, or expired and not yet swept).
    pub full_capacity: u64,
    /// … because every way of the key's bucket held a live entry.
    pub full_bucket: u64,
    /// … because the key's bucket stayed locked by another writer for the whole bounded wait
    /// (or another reason the table gave).
    pub full_busy: u64,
    /// Packets passed without a flow (pure ACK/FIN/RST of an unknown flow, or another port).
    pub untracked: u64,
    /// Non-TCP packets passed.
    pub non_tcp: u64,
    /// TCP fragments seen (dropped as `UrlFragment`, or passed uninspected with
    /// [`Fragments::Pass`]).
    pub fragments: u64,
}

/// The URL filter on one worker core.
pub struct UrlFilter {
    shared: Arc<UrlFilterShared>,
    lane: Local,
    cursor: usize,
    /// Where the next batch's expiry sweep of the flow table starts.
    sweep: usize,
    stream: Vec<u8>,
    url: Vec<u8>,
    /// A TCP segment over several buffers (a jumbo frame), copied in one piece to be read.
    linear: Vec<u8>,
    counters: UrlFilterCounters,
}

/// Flow-table buckets each batch sweeps for expired entries (`AutoDelete`: freed at once).
/// Without it an expired entry held its place in the table's capacity until a new flow
/// happened to land in its bucket: a SYN flood's expired handshake entries filled the table
/// and a new connection found it full one time in seven (an empty bucket, no capacity left).
///
/// The sweep also grows with the batch's new flows ([`SWEEP_PER_ADD`] buckets each): with a
/// fixed 16 a flood in full batches (32 SYNs) added 4 096 entries per sweep of a 4 096-flow
/// table, expired entries held all its capacity between visits, and a new flow whose bucket
/// held none found the table full (seen under a 2 300 SYN/s flood when the worker was
/// descheduled and caught up in full batches).
const SWEEP_BUCKETS: usize = 16;
/// Buckets swept per flow the batch added.
const SWEEP_PER_ADD: usize = 2;

impl Drop for UrlFilter {
    /// Gives this instance's capacity reserve back to the shared flow table (without it, each
    /// instance dropped — a chain rebuilt, a worker stopped — kept up to two chunks of the
    /// table's capacity out of use for good).
    fn drop(&mut self) {
        self.shared.flows.table().retire_local(&mut self.lane);
    }
}

impl fmt::Debug for UrlFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UrlFilter").field("counters", &self.counters).finish_non_exhaustive()
    }
}

/// The TCP fields the filter reads.
#[derive(Debug, Clone, Copy)]
struct Seg {
    seq: u32,
    ack: u32,
    flags: u8,
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

impl UrlFilter {
    /// An instance over `shared`, with its own table lane and scratch buffers.
    pub fn new(shared: Arc<UrlFilterShared>) -> Self {
        let window = shared.slabs.window();
        let lane = shared.flows.table().local();
        // Spread the instances' slab cursors apart.
        let cursor = INSTANCES.fetch_add(1, Ordering::Relaxed).wrapping_mul(0x9E37_79B9);
        Self {
            shared,
            lane,
            cursor,
            sweep: 0,
            stream: vec![0; window],
            url: vec![0; window + 256],
            linear: vec![0; crate::buf::MAX_SEGMENTED_FRAME],
            counters: Default::default(),
        }
    }

    /// This instance's counters.
    pub fn counters(&self) -> &UrlFilterCounters {
        &self.counters
    }
}

/// Instances made so far (to start their slab cursors apart).
static INSTANCES: AtomicUsize = AtomicUsize::new(0);

impl Nf for UrlFilter {
    fn name(&self) -> &'static str {
        "urlfilter"
    }

    fn process(&mut self, ctx: &NfCtx, pool: &mut Pool<'_>, batch: &mut NfBatch) {
        let adds = self.lane.stats().adds;
        for p in batch.alive_mut() {
            self.packet(ctx.now, pool, p);
        }
        // Two buckets more per flow this batch added: a full sweep of the table's buckets
        // (capacity / 2) then takes at most capacity / 4 adds, however full the batches are.
        let added = usize::try_from(self.lane.stats().adds.wrapping_sub(adds)).unwrap_or(usize::MAX);
        let buckets = SWEEP_BUCKETS.saturating_add(added.saturating_mul(SWEEP_PER_ADD));
        self.sweep = self.shared.flows.table().sweep(&mut self.lane, ctx.now, self.sweep, buckets);
    }

    fn write_counters(&self, w: &mut dyn fmt::Write) -> fmt::Result {
        let c = &self.counters;
        write!(
            w,
            " urlfilter_inspected={} urlfilter_allowed={} urlfilter_blocked={} urlfilter_blocked_pkts={} \
             urlfilter_resets={} urlfilter_not_http={} urlfilter_gave_up={} urlfilter_no_host={} \
             urlfilter_unframed={} urlfilter_switched={} urlfilter_discarded={} urlfilter_conflicts={} \
             urlfilter_lost={} urlfilter_undecided_denied={} urlfilter_handshakes={} urlfilter_midstream={} \
             urlfilter_slab_exhausted={} urlfilter_table_full={} urlfilter_full_capacity={} urlfilter_full_bucket={} \
             urlfilter_full_busy={} urlfilter_flows_used={} urlfilter_untracked={} urlfilter_non_tcp={} \
             urlfilter_fragments={}",
            c.inspected,
            c.allowed,
            c.blocked,
            c.blocked_pkts,
            c.resets,
            c.not_http,
            c.gave_up,
            c.no_host,
            c.unframed,
            c.switched,
            c.discarded,
            c.conflicts,
            c.lost,
            c.undecided_denied,
            c.handshakes,
            c.midstream,
            c.slab_exhausted,
            c.table_full,
            c.full_capacity,
            c.full_bucket,
            c.full_busy,
            self.shared.flows.table().used_capacity(),
            c.untracked,
            c.non_tcp,
            c.fragments
        )
    }
}

#[cfg(test)]
mod tests;
