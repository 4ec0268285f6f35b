//! The admin queue (XL710 datasheet §7.10 "Admin Queue"): two rings of 32-byte
//! descriptors in host memory through which the driver talks to the firmware — the send
//! queue (ASQ: commands and their completions, written back in place) and the receive
//! queue (ARQ: events the firmware sends, such as link changes).
//!
//! One command at a time: the descriptor (and its buffer, for an indirect command) is
//! written, `hal::dma_wmb()`, ATQT bumped; the firmware advances ATQH once it wrote the
//! completion back. The wait has a deadline ([`CMD_TIMEOUT_MS`], Linux's
//! `I40E_ASQ_CMD_TIMEOUT`); a command that timed out stays the firmware's, so later
//! commands are refused ([`AqError::Busy`]) until ATQH catches up. A completion must
//! have DD, echo the cookie and answer `retval` 0 (else [`AqError::Failed`] with the
//! firmware's code as an [`AqStatus`]).

use core::fmt;

use cadence_core::time::{Clock, poll_until};

use super::regs::{
    PF_ARQBAH, PF_ARQBAL, PF_ARQH, PF_ARQLEN, PF_ARQT, PF_ATQBAH, PF_ATQBAL, PF_ATQH, PF_ATQLEN, PF_ATQT,
};
use crate::hal::{Dma, DmaAlloc, DmaError, Mmio};
use crate::reg::{Block, Regs, Value};
use crate::registers;

/// Bytes per admin queue descriptor.
pub const DESC_LEN: usize = 32;
/// Descriptors in each ring.
pub const RING_LEN: u16 = 32;
/// Bytes of the send queue's indirect buffer (one command at a time).
pub const SEND_BUF_LEN: usize = 4096;
/// Bytes of each receive queue buffer (no LB flag needed up to 512).
pub const EVENT_BUF_LEN: usize = 512;
/// How long a command may take (Linux and DPDK: 250 ms).
pub const CMD_TIMEOUT_MS: u64 = 250;
/// Buffers longer than this need the LB (large buffer) flag (§7.10.3).
const LARGE_BUF: usize = 512;

/// The space of one admin queue descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AqDesc {}

registers! {
    /// Flags (§7.10.3.1).
    pub AQ_FLAGS: Rw<u16> @ 0 in AqDesc {
        /// Done: the firmware processed the descriptor.
        DD: 0,
        /// Completed.
        CMP: 1,
        /// Error: `retval` holds the code.
        ERR: 2,
        /// Large buffer (over 512 bytes).
        LB: 9,
        /// The buffer is read by the firmware (command input).
        RD: 10,
        /// A buffer is attached.
        BUF: 12,
        /// Do not interrupt on completion (polled).
        SI: 13,
    }
    /// Opcode.
    pub AQ_OPCODE: Rw<u16> @ 2 in AqDesc {}
    /// Buffer bytes.
    pub AQ_DATALEN: Rw<u16> @ 4 in AqDesc {}
    /// Return value: 0 or an [`AqStatus`] code.
    pub AQ_RETVAL: Rw<u16> @ 6 in AqDesc {}
    /// Cookie, high half: echoed by the firmware.
    pub AQ_COOKIE_HIGH: Rw<u32> @ 8 in AqDesc {}
    /// Cookie, low half: echoed by the firmware.
    pub AQ_COOKIE_LOW: Rw<u32> @ 12 in AqDesc {}
    /// Parameters, bytes 0..4.
    pub AQ_PARAM0: Rw<u32> @ 16 in AqDesc {}
    /// Parameters, bytes 4..8.
    pub AQ_PARAM1: Rw<u32> @ 20 in AqDesc {}
    /// Parameters, bytes 8..12 (indirect: buffer address, high).
    pub AQ_ADDR_HIGH: Rw<u32> @ 24 in AqDesc {}
    /// Parameters, bytes 12..16 (indirect: buffer address, low).
    pub AQ_ADDR_LOW: Rw<u32> @ 28 in AqDesc {}
}

/// The firmware's answer codes (`enum i40e_admin_queue_err`, §7.10.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AqStatus {
    /// 1: not permitted.
    Eperm,
    /// 2: no such element.
    Enoent,
    /// 3: bad opcode or not supported by this device.
    Esrch,
    /// 5: I/O error.
    Eio,
    /// 9: out of memory.
    Enomem,
    /// 12: device busy.
    Ebusy,
    /// 13: already exists (e.g. PXE mode already cleared).
    Eexist,
    /// 14: invalid argument.
    Einval,
    /// 16: no space.
    Enospc,
    /// 17: not implemented.
    Enosys,
    /// 20: bad buffer address.
    BadAddr,
    /// Any other code.
    Other(u16),
}

impl AqStatus {
    /// The status of code `c` (non-zero).
    pub const fn from_code(c: u16) -> Self {
        match c {
            1 => AqStatus::Eperm,
            2 => AqStatus::Enoent,
            3 => AqStatus::Esrch,
            5 => AqStatus::Eio,
            9 => AqStatus::Enomem,
            12 => AqStatus::Ebusy,
            13 => AqStatus::Eexist,
            14 => AqStatus::Einval,
            16 => AqStatus::Enospc,
            17 => AqStatus::Enosys,
            20 => AqStatus::BadAddr,
            c => AqStatus::Other(c),
        }
    }
}

impl fmt::Display for AqStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AqStatus::Eperm => f.write_str("EPERM"),
            AqStatus::Enoent => f.write_str("ENOENT"),
            AqStatus::Esrch => f.write_str("ESRCH"),
            AqStatus::Eio => f.write_str("EIO"),
            AqStatus::Enomem => f.write_str("ENOMEM"),
            AqStatus::Ebusy => f.write_str("EBUSY"),
            AqStatus::Eexist => f.write_str("EEXIST"),
            AqStatus::Einval => f.write_str("EINVAL"),
            AqStatus::Enospc => f.write_str("ENOSPC"),
            AqStatus::Enosys => f.write_str("ENOSYS"),
            AqStatus::BadAddr => f.write_str("BAD_ADDR"),
            AqStatus::Other(c) => write!(f, "code {c}"),
        }
    }
}

/// Why an admin queue command failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AqError {
    /// The queue registers did not take the ring (ATQBAL reads back wrong).
    NotStarted,
    /// The firmware did not complete the command within [`CMD_TIMEOUT_MS`].
    Timeout {
        /// The command.
        opcode: u16,
    },
    /// An earlier command timed out and the firmware has not finished it.
    Busy {
        /// The command refused.
        opcode: u16,
    },
    /// The firmware answered with an error code.
    Failed {
        /// The command.
        opcode: u16,
        /// Its answer.
        status: AqStatus,
    },
    /// The completion does not match the command (no DD, another cookie, a buffer
    /// longer than the one given).
    BadCompletion {
        /// The command.
        opcode: u16,
    },
}

impl fmt::Display for AqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AqError::NotStarted => f.write_str("admin queue registers did not take the ring address"),
            AqError::Timeout { opcode } => write!(f, "admin command {opcode:#06x} timed out"),
            AqError::Busy { opcode } => write!(f, "admin command {opcode:#06x} refused: an earlier one timed out"),
            AqError::Failed { opcode, status } => write!(f, "admin command {opcode:#06x} failed: {status}"),
            AqError::BadCompletion { opcode } => write!(f, "admin command {opcode:#06x}: malformed completion"),
        }
    }
}

/// A command: its opcode and 16 parameter bytes. For an indirect command the last 8
/// bytes are the buffer address, which [`AdminQueue::execute`] fills in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Command {
    /// Opcode.
    pub opcode: u16,
    /// Parameters, little-endian as the command's structure lays them out.
    pub params: [u8; 16],
}

impl Command {
    /// Command `opcode` with all parameters 0.
    pub const fn new(opcode: u16) -> Self {
        Self { opcode, params: [0; 16] }
    }

    /// This command with the little-endian `u16` `v` at parameter byte `at`.
    pub fn with_u16(mut self, at: usize, v: u16) -> Self {
        if let Some(d) = self.params.get_mut(at..at + 2) {
            d.copy_from_slice(&v.to_le_bytes());
        }
        self
    }

    /// This command with the little-endian `u32` `v` at parameter byte `at`.
    pub fn with_u32(mut self, at: usize, v: u32) -> Self {
        if let Some(d) = self.params.get_mut(at..at + 4) {
            d.copy_from_slice(&v.to_le_bytes());
        }
        self
    }
}

/// The buffer attached to a command.
#[derive(Debug)]
pub enum Buffer<'a> {
    /// A direct command.
    None,
    /// The firmware reads these bytes (RD flag).
    In(&'a [u8]),
    /// The firmware writes up to this many bytes.
    Out(&'a mut [u8]),
}

/// A completed command or an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response {
    /// Opcode.
    pub opcode: u16,
    /// Parameters as the firmware wrote them back.
    pub params: [u8; 16],
    /// Buffer bytes the firmware wrote (for [`Buffer::Out`] and events).
    pub datalen: u16,
}

impl Response {
    /// The little-endian `u16` at parameter byte `at` (0 past the end).
    pub fn u16_at(&self, at: usize) -> u16 {
        self.params.get(at..at + 2).map_or(0, |b| u16::from_le_bytes([b[0], b[1]]))
    }

    /// The little-endian `u32` at parameter byte `at` (0 past the end).
    pub fn u32_at(&self, at: usize) -> u32 {
        self.params.get(at..at + 4).map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Parameter byte `at` (0 past the end).
    pub fn u8_at(&self, at: usize) -> u8 {
        self.params.get(at).copied().unwrap_or(0)
    }
}

/// Both admin rings and their buffers.
#[derive(Debug)]
pub struct AdminQueue<R> {
    asq: R,
    arq: R,
    send_buf: R,
    event_bufs: R,
    /// Next send descriptor (the ATQT value after the next command).
    asq_next: u16,
    /// Next receive descriptor the firmware will fill.
    arq_next: u16,
    cookie: u32,
    /// Events dropped because the firmware reported an overflow.
    pub(crate) overflows: u64,
}

fn write_params<M: Mmio + ?Sized>(r: &Regs<'_, M>, d: Block<AqDesc>, p: &[u8; 16]) {
    let w = |i: usize| u64::from(u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]));
    r.write(d.reg(AQ_PARAM0), Value::new(w(0)));
    r.write(d.reg(AQ_PARAM1), Value::new(w(4)));
    r.write(d.reg(AQ_ADDR_HIGH), Value::new(w(8)));
    r.write(d.reg(AQ_ADDR_LOW), Value::new(w(12)));
}

fn read_params<M: Mmio + ?Sized>(r: &Regs<'_, M>, d: Block<AqDesc>) -> [u8; 16] {
    let mut p = [0u8; 16];
    let words = [
        r.read(d.reg(AQ_PARAM0)).raw(),
        r.read(d.reg(AQ_PARAM1)).raw(),
        r.read(d.reg(AQ_ADDR_HIGH)).raw(),
        r.read(d.reg(AQ_ADDR_LOW)).raw(),
    ];
    for (chunk, w) in p.chunks_exact_mut(4).zip(words) {
        chunk.copy_from_slice(&w.to_le_bytes());
    }
    p
}

impl<R: Dma> AdminQueue<R> {
    /// Allocates both rings and their buffers.
    pub fn try_new<A: DmaAlloc<Region = R>>(dma: &mut A) -> Result<Self, DmaError> {
        let ring = RING_LEN as usize * DESC_LEN;
        Ok(Self {
            asq: dma.alloc(ring, 4096)?,
            arq: dma.alloc(ring, 4096)?,
            send_buf: dma.alloc(SEND_BUF_LEN, 4096)?,
            event_bufs: dma.alloc(RING_LEN as usize * EVENT_BUF_LEN, 4096)?,
            asq_next: 0,
            arq_next: 0,
            cookie: 0,
            overflows: 0,
        })
    }

    /// Posts receive buffer `i` in descriptor `i` (flags BUF, datalen, address).
    fn post_event_buf(&self, i: u16) {
        let r = Regs::new(&self.arq);
        let d = Block::<AqDesc>::at(usize::from(i) * DESC_LEN);
        let addr = self.event_bufs.phys() + u64::from(i) * EVENT_BUF_LEN as u64;
        let mut p = [0u8; 16];
        p[8..12].copy_from_slice(&((addr >> 32) as u32).to_le_bytes());
        p[12..16].copy_from_slice(&(addr as u32).to_le_bytes());
        write_params(&r, d, &p);
        r.write(d.reg(AQ_COOKIE_HIGH), Value::new(0));
        r.write(d.reg(AQ_COOKIE_LOW), Value::new(0));
        r.write(d.reg(AQ_RETVAL), Value::new(0));
        r.write(d.reg(AQ_OPCODE), Value::new(0));
        r.write(d.reg(AQ_DATALEN), Value::new(EVENT_BUF_LEN as u64));
        r.write(d.reg(AQ_FLAGS), AQ_FLAGS::BUF.value(1));
    }

    /// Programs both queues (§7.10.2: head = tail = 0, base, then length with ENABLE)
    /// and posts every receive buffer. Fails when the base does not read back (the
    /// device is not listening: Linux checks the same).
    pub fn start<W: Mmio>(&mut self, bar: &W) -> Result<(), AqError> {
        let r = Regs::new(bar);
        r.write(PF_ATQH, Value::new(0));
        r.write(PF_ATQT, Value::new(0));
        r.write(PF_ATQBAL, Value::new(self.asq.phys() & 0xFFFF_FFFF));
        r.write(PF_ATQBAH, Value::new(self.asq.phys() >> 32));
        r.write(PF_ATQLEN, PF_ATQLEN::LEN.value(RING_LEN.into()).set(PF_ATQLEN::ENABLE));
        if r.read(PF_ATQBAL).bits() != self.asq.phys() & 0xFFFF_FFFF {
            return Err(AqError::NotStarted);
        }
        for i in 0..RING_LEN {
            self.post_event_buf(i);
        }
        r.write(PF_ARQH, Value::new(0));
        r.write(PF_ARQT, Value::new(0));
        r.write(PF_ARQBAL, Value::new(self.arq.phys() & 0xFFFF_FFFF));
        r.write(PF_ARQBAH, Value::new(self.arq.phys() >> 32));
        r.write(PF_ARQLEN, PF_ARQLEN::LEN.value(RING_LEN.into()).set(PF_ARQLEN::ENABLE));
        if r.read(PF_ARQBAL).bits() != self.arq.phys() & 0xFFFF_FFFF {
            return Err(AqError::NotStarted);
        }
        // The buffers must be visible before the tail hands them over.
        crate::hal::dma_wmb();
        r.write(PF_ARQT, PF_ARQT::TAIL.value(u64::from(RING_LEN - 1)));
        self.asq_next = 0;
        self.arq_next = 0;
        Ok(())
    }

    /// Disables both queues (before a reset or when the bring-up gives up).
    pub fn stop<W: Mmio>(&mut self, bar: &W) {
        let r = Regs::new(bar);
        r.write(PF_ATQLEN, Value::new(0));
        r.write(PF_ARQLEN, Value::new(0));
    }

    /// Runs `cmd` with `buf` and waits (at most [`CMD_TIMEOUT_MS`] on `clock`) for its
    /// completion; returns the firmware's answer, the output buffer filled.
    pub fn execute<W: Mmio, C: Clock + ?Sized>(
        &mut self,
        bar: &W,
        clock: &C,
        cmd: Command,
        buf: Buffer<'_>,
    ) -> Result<Response, AqError> {
        let opcode = cmd.opcode;
        let r = Regs::new(bar);
        if r.read(PF_ATQH).get(PF_ATQH::HEAD) != u64::from(self.asq_next) {
            return Err(AqError::Busy { opcode });
        }
        let (len, input) = match &buf {
            Buffer::None => (0, false),
            Buffer::In(b) => (b.len(), true),
            Buffer::Out(b) => (b.len(), false),
        };
        if len > SEND_BUF_LEN {
            return Err(AqError::BadCompletion { opcode });
        }
        if let Buffer::In(b) = &buf {
            self.send_buf.write_bytes(0, b);
        }
        let i = self.asq_next;
        let d = Block::<AqDesc>::at(usize::from(i) * DESC_LEN);
        let q = Regs::new(&self.asq);
        self.cookie = self.cookie.wrapping_add(1);
        let mut params = cmd.params;
        let mut flags = AQ_FLAGS::SI.value(1);
        if len > 0 {
            let addr = self.send_buf.phys();
            params[8..12].copy_from_slice(&((addr >> 32) as u32).to_le_bytes());
            params[12..16].copy_from_slice(&(addr as u32).to_le_bytes());
            flags = flags.set(AQ_FLAGS::BUF).set_if(AQ_FLAGS::RD, input).set_if(AQ_FLAGS::LB, len > LARGE_BUF);
        }
        write_params(&q, d, &params);
        q.write(d.reg(AQ_COOKIE_HIGH), Value::new(u64::from(opcode)));
        q.write(d.reg(AQ_COOKIE_LOW), Value::new(u64::from(self.cookie)));
        q.write(d.reg(AQ_RETVAL), Value::new(0));
        q.write(d.reg(AQ_DATALEN), Value::new(len as u64));
        q.write(d.reg(AQ_OPCODE), Value::new(u64::from(opcode)));
        q.write(d.reg(AQ_FLAGS), flags);
        self.asq_next = (i + 1) % RING_LEN;
        // §7.10.2: the descriptor and its buffer must be in memory before the tail write
        // that hands them to the firmware.
        crate::hal::dma_wmb();
        r.write(PF_ATQT, PF_ATQT::TAIL.value(u64::from(self.asq_next)));
        let next = u64::from(self.asq_next);
        poll_until(clock, clock.rate().ticks_from_ms(CMD_TIMEOUT_MS), || r.read(PF_ATQH).get(PF_ATQH::HEAD) == next)
            .map_err(|_| AqError::Timeout { opcode })?;
        let flags = q.read(d.reg(AQ_FLAGS));
        if !flags.is_set(AQ_FLAGS::DD) {
            return Err(AqError::BadCompletion { opcode });
        }
        // DD first, then the rest of the write-back.
        crate::hal::dma_rmb();
        if q.read(d.reg(AQ_COOKIE_LOW)).bits() != u64::from(self.cookie)
            || q.read(d.reg(AQ_OPCODE)).bits() != u64::from(opcode)
        {
            return Err(AqError::BadCompletion { opcode });
        }
        let retval = q.read(d.reg(AQ_RETVAL)).raw();
        if flags.is_set(AQ_FLAGS::ERR) || retval != 0 {
            return Err(AqError::Failed { opcode, status: AqStatus::from_code(retval) });
        }
        let datalen = q.read(d.reg(AQ_DATALEN)).raw();
        if let Buffer::Out(out) = buf {
            let n = usize::from(datalen);
            let Some(dst) = out.get_mut(..n) else { return Err(AqError::BadCompletion { opcode }) };
            self.send_buf.read_bytes(0, dst);
        }
        Ok(Response { opcode, params: read_params(&q, d), datalen })
    }

    /// The next event the firmware posted, if any; its buffer (up to `data.len()` bytes)
    /// is copied into `data` and the descriptor re-posted.
    pub fn next_event<W: Mmio>(&mut self, bar: &W, data: &mut [u8]) -> Option<Response> {
        let r = Regs::new(bar);
        if r.read(PF_ARQLEN).is_set(PF_ARQLEN::OVFL) {
            self.overflows += 1;
            r.modify(PF_ARQLEN, |v| v.clear(PF_ARQLEN::OVFL));
        }
        let head = r.read(PF_ARQH).get(PF_ARQH::HEAD);
        if head == u64::from(self.arq_next) {
            return None;
        }
        let i = self.arq_next;
        let d = Block::<AqDesc>::at(usize::from(i) * DESC_LEN);
        let q = Regs::new(&self.arq);
        let flags = q.read(d.reg(AQ_FLAGS));
        let event = flags.is_set(AQ_FLAGS::DD).then(|| {
            crate::hal::dma_rmb();
            let datalen = q.read(d.reg(AQ_DATALEN)).raw().min(EVENT_BUF_LEN as u16);
            let n = usize::from(datalen).min(data.len());
            if let Some(dst) = data.get_mut(..n) {
                self.event_bufs.read_bytes(usize::from(i) * EVENT_BUF_LEN, dst);
            }
            Response { opcode: q.read(d.reg(AQ_OPCODE)).raw(), params: read_params(&q, d), datalen }
        });
        self.post_event_buf(i);
        crate::hal::dma_wmb();
        // ARQT names the last buffer posted (Linux: the index just cleaned).
        r.write(PF_ARQT, PF_ARQT::TAIL.value(u64::from(i)));
        self.arq_next = (i + 1) % RING_LEN;
        event
    }
}
