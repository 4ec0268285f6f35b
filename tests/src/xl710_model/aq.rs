//! The model's admin queue (XL710 datasheet §7.10): the firmware side of the ASQ and
//! the ARQ. Descriptor: flags u16 @0 (DD 0x1, CMP 0x2, ERR 0x4, LB 0x200, RD 0x400,
//! BUF 0x1000, SI 0x2000), opcode @2, datalen @4, retval @6, cookie @8..16, params @16
//! (indirect: address high @24, low @28).

use super::{Device, MAC_SEID, PF_QUEUES, VSI_SEID, off};

const DD: u16 = 0x1;
const CMP: u16 = 0x2;
const ERR: u16 = 0x4;
const LB: u16 = 0x200;
const RD: u16 = 0x400;
const BUF: u16 = 0x1000;

const EPERM: u16 = 1;
const ENOENT: u16 = 2;
const ESRCH: u16 = 3;
const EEXIST: u16 = 13;
const EINVAL: u16 = 14;
const ENOSYS: u16 = 17;

/// How a command uses its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// No buffer.
    Direct,
    /// The firmware writes `min..=max` bytes.
    Out(usize, usize),
    /// The firmware reads exactly this many bytes.
    In(usize),
}

/// The commands this firmware knows, and their buffers.
fn shape(opcode: u16) -> Option<Shape> {
    Some(match opcode {
        0x0001 | 0x0110 | 0x0254 | 0x0607 | 0x0207 => Shape::Direct,
        0x0107 => Shape::Out(24, 24),
        0x0200 => Shape::Out(32, 4096),
        0x0212 => Shape::Out(128, 128),
        0x0211 => Shape::In(128),
        _ => return None,
    })
}

/// One descriptor, decoded.
#[derive(Debug, Clone)]
struct Desc {
    flags: u16,
    opcode: u16,
    datalen: u16,
    params: [u8; 16],
}

impl Desc {
    fn parse(b: &[u8; 32]) -> Self {
        let mut params = [0u8; 16];
        params.copy_from_slice(&b[16..32]);
        Desc {
            flags: u16::from_le_bytes([b[0], b[1]]),
            opcode: u16::from_le_bytes([b[2], b[3]]),
            datalen: u16::from_le_bytes([b[4], b[5]]),
            params,
        }
    }
    fn addr(&self) -> u64 {
        let p = &self.params;
        (u32::from_le_bytes([p[8], p[9], p[10], p[11]]) as u64) << 32
            | u32::from_le_bytes([p[12], p[13], p[14], p[15]]) as u64
    }
    fn u16_at(&self, at: usize) -> u16 {
        u16::from_le_bytes([self.params[at], self.params[at + 1]])
    }
    fn u32_at(&self, at: usize) -> u32 {
        u32::from_le_bytes([self.params[at], self.params[at + 1], self.params[at + 2], self.params[at + 3]])
    }
}

/// The firmware's answer: retval, parameters, buffer bytes written.
struct Answer {
    retval: u16,
    params: [u8; 16],
    out: Vec<u8>,
}

impl Answer {
    fn ok(params: [u8; 16]) -> Self {
        Answer { retval: 0, params, out: Vec::new() }
    }
    fn err(retval: u16, params: [u8; 16]) -> Self {
        Answer { retval, params, out: Vec::new() }
    }
}

fn put16(p: &mut [u8], at: usize, v: u16) {
    p[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

impl Device {
    /// The ATQT write: runs every descriptor from ATQH to ATQT.
    pub(crate) fn run_asq(&mut self) {
        if self.aq_dead {
            return;
        }
        let len = self.reg(off::PF_ATQLEN);
        if len & 1 << 31 == 0 {
            // Zeroing the tail before enabling is the set-up sequence (§7.10.2).
            if self.reg(off::PF_ATQT) != 0 {
                self.violations.push("ATQT bumped while the send queue is disabled".into());
            }
            return;
        }
        let n = len & 0x3FF;
        let tail = self.reg(off::PF_ATQT) & 0x3FF;
        if tail >= n {
            self.violations.push(format!("ATQT = {tail} outside the ring of {n}"));
            return;
        }
        let base = (self.reg(off::PF_ATQBAH) as u64) << 32 | self.reg(off::PF_ATQBAL) as u64;
        let mut head = self.reg(off::PF_ATQH) & 0x3FF;
        while head != tail {
            let at = base + 32 * head as u64;
            let mut raw = [0u8; 32];
            if !self.host.dev_read(at, &mut raw) {
                self.violations.push(format!("admin descriptor {at:#x} outside allocated memory"));
                break;
            }
            let d = Desc::parse(&raw);
            let answer = self.execute(&d);
            let mut flags = d.flags | DD | CMP;
            if answer.retval != 0 {
                flags |= ERR;
            }
            let mut datalen = d.datalen;
            if !answer.out.is_empty() {
                datalen = answer.out.len() as u16;
                if !self.host.dev_write(d.addr(), &answer.out) {
                    self.violations.push(format!("admin buffer {:#x} outside allocated memory", d.addr()));
                }
            }
            // Write-back: the parameters (keeping the indirect address), then the
            // header with DD.
            let mut params = answer.params;
            if d.flags & BUF != 0 {
                params[8..16].copy_from_slice(&d.params[8..16]);
            }
            raw[16..32].copy_from_slice(&params);
            put16(&mut raw, 4, datalen);
            put16(&mut raw, 6, answer.retval);
            put16(&mut raw, 0, flags);
            self.host.dev_write(at + 16, &raw[16..32]);
            self.host.dev_write(at, &raw[..16]);
            self.aq_log.push(d.opcode);
            head = (head + 1) % n;
        }
        self.set(off::PF_ATQH, head);
    }

    /// Checks a descriptor's buffer against what its command needs; records what is
    /// wrong and returns false then.
    fn check_buffer(&mut self, d: &Desc, shape: Shape) -> bool {
        let len = d.datalen as usize;
        let bad = |what: String, v: &mut Vec<String>| {
            v.push(format!("admin command {:#06x}: {what}", d.opcode));
            false
        };
        match shape {
            Shape::Direct => {
                if d.flags & BUF != 0 || len != 0 {
                    return bad(format!("direct command with a buffer (datalen {len})"), &mut self.violations);
                }
                true
            }
            Shape::Out(min, max) => {
                if d.flags & BUF == 0 {
                    return bad("indirect command without BUF".into(), &mut self.violations);
                }
                if len < min || len > max {
                    return bad(format!("bad length {len} (wants {min}..={max})"), &mut self.violations);
                }
                if d.flags & RD != 0 {
                    return bad("RD set on an answer buffer".into(), &mut self.violations);
                }
                self.check_addr_and_lb(d)
            }
            Shape::In(want) => {
                if d.flags & BUF == 0 || d.flags & RD == 0 {
                    return bad("input buffer without BUF|RD".into(), &mut self.violations);
                }
                if len != want {
                    return bad(format!("bad length {len} (wants {want})"), &mut self.violations);
                }
                self.check_addr_and_lb(d)
            }
        }
    }

    fn check_addr_and_lb(&mut self, d: &Desc) -> bool {
        let len = d.datalen as usize;
        if (len > 512) != (d.flags & LB != 0) {
            self.violations.push(format!("admin command {:#06x}: LB flag wrong for {len} bytes", d.opcode));
            return false;
        }
        if !self.host.device_may_access(d.addr(), len) {
            self.violations.push(format!(
                "admin command {:#06x}: buffer {:#x} outside allocated memory",
                d.opcode,
                d.addr()
            ));
            return false;
        }
        true
    }

    /// Runs one command.
    fn execute(&mut self, d: &Desc) -> Answer {
        let p = d.params;
        let Some(shape) = shape(d.opcode) else { return Answer::err(ESRCH, p) };
        if d.opcode != 0x0001 && !self.got_version {
            self.violations.push(format!("admin command {:#06x} before Get Version", d.opcode));
        }
        if !self.check_buffer(d, shape) {
            return Answer::err(EINVAL, p);
        }
        if let Some(i) = self.aq_fail.iter().position(|&(op, _)| op == d.opcode) {
            let (_, code) = self.aq_fail.remove(i);
            return Answer::err(code, p);
        }
        match d.opcode {
            0x0001 => {
                self.got_version = true;
                let mut r = [0u8; 16];
                r[0..4].copy_from_slice(&0x0102_0304u32.to_le_bytes());
                put16(&mut r, 8, 6);
                put16(&mut r, 10, 1);
                put16(&mut r, 12, self.api.0);
                put16(&mut r, 14, self.api.1);
                Answer::ok(r)
            }
            0x0110 => {
                if p[0] != 0x2 {
                    self.violations.push(format!("Clear PXE Mode with rx_cnt {} (must be 2)", p[0]));
                    return Answer::err(EINVAL, p);
                }
                if std::mem::replace(&mut self.pxe_cleared, true) { Answer::err(EEXIST, p) } else { Answer::ok(p) }
            }
            0x0107 => {
                let mut r = p;
                put16(&mut r, 0, 0x10 | 0x40);
                let mut out = vec![0u8; 24];
                out[..6].copy_from_slice(&self.mac);
                out[12..18].copy_from_slice(&self.mac);
                Answer { retval: 0, params: r, out }
            }
            0x0200 => {
                let mut out = vec![0u8; 16 + 2 * 16];
                put16(&mut out, 0, 2);
                put16(&mut out, 2, 2);
                // Element 0: the MAC (type 1); element 1: the PF's VSI (type 19).
                out[16] = 1;
                put16(&mut out, 18, MAC_SEID);
                out[32] = 19;
                put16(&mut out, 34, VSI_SEID);
                put16(&mut out, 36, MAC_SEID);
                let mut r = p;
                put16(&mut r, 0, 0);
                Answer { retval: 0, params: r, out }
            }
            0x0212 => {
                if d.u16_at(0) != VSI_SEID {
                    return Answer::err(ENOENT, p);
                }
                let mut out = vec![0u8; 128];
                put16(&mut out, 28, 0);
                put16(&mut out, 30, self.vsi_queues.0);
                let log2 = self.vsi_queues.1.max(1).trailing_zeros() as u16;
                put16(&mut out, 62, log2 << 9);
                put16(&mut out, 96, self.qs_handle);
                for i in 1..8 {
                    put16(&mut out, 96 + 2 * i, 0xFFFF);
                }
                let mut r = p;
                put16(&mut r, 0, VSI_SEID);
                Answer { retval: 0, params: r, out }
            }
            0x0211 => {
                if d.u16_at(0) != VSI_SEID {
                    return Answer::err(ENOENT, p);
                }
                let mut b = [0u8; 128];
                self.host.dev_read(d.addr(), &mut b);
                let valid = u16::from_le_bytes([b[0], b[1]]);
                if valid & 0x40 != 0 {
                    if u16::from_le_bytes([b[28], b[29]]) != 0 {
                        self.violations.push("non-contiguous VSI queue maps are not modeled".into());
                        return Answer::err(EINVAL, p);
                    }
                    let first = u16::from_le_bytes([b[30], b[31]]) & 0x7FF;
                    let tc0 = u16::from_le_bytes([b[62], b[63]]);
                    let count = 1u16 << ((tc0 >> 9) & 0x7);
                    let offset = tc0 & 0x1FF;
                    if offset != 0 || first as usize + count as usize > PF_QUEUES {
                        self.violations
                            .push(format!("VSI queue map {first}+{count} (TC offset {offset}) outside the PF"));
                        return Answer::err(EINVAL, p);
                    }
                    self.vsi_queues = (first, count);
                }
                Answer::ok(p)
            }
            0x0254 => {
                if d.u16_at(4) & 0x3FF != VSI_SEID {
                    return Answer::err(ENOENT, p);
                }
                let (flags, valid) = (d.u16_at(0), d.u16_at(2));
                self.promisc = (self.promisc & !valid) | (flags & valid);
                Answer::ok(p)
            }
            0x0607 => {
                match d.u16_at(0) & 0x3 {
                    0x3 => self.lse = true,
                    0x2 => self.lse = false,
                    _ => {}
                }
                Answer::ok(self.link_params())
            }
            0x0207 => {
                if self.api.0 == 1 && self.api.1 < 5 {
                    return Answer::err(ENOSYS, p);
                }
                let (addr, value) = (d.u32_at(4) as usize, d.u32_at(12));
                if !self.rx_ctl_aq(addr, value) {
                    self.violations.push(format!("RX control write to {addr:#x}, not an RX control register"));
                    return Answer::err(EPERM, p);
                }
                Answer::ok(p)
            }
            _ => Answer::err(ESRCH, p),
        }
    }

    /// Get Link Status parameters for the current link.
    fn link_params(&self) -> [u8; 16] {
        let mut r = [0u8; 16];
        put16(&mut r, 0, if self.lse { 0x1 } else { 0 });
        r[2] = 0x1E; // 40GBASE-SR4
        r[3] = if self.link_up { 0x10 } else { 0 };
        r[4] = if self.link_up { 0x01 | 0x40 } else { 0x40 };
        put16(&mut r, 8, 9728);
        r
    }

    /// Changes the link; with events enabled, posts a link event on the ARQ.
    pub(crate) fn set_link(&mut self, up: bool) {
        if self.link_up == up {
            return;
        }
        self.link_up = up;
        if self.lse {
            let p = self.link_params();
            self.post_event(0x0607, p);
        }
    }

    /// Posts an event at ARQH when the driver left room (ARQH != ARQT), else counts an
    /// overflow (ARQLEN.ARQOVFL).
    pub(crate) fn post_event(&mut self, opcode: u16, params: [u8; 16]) {
        let len = self.reg(off::PF_ARQLEN);
        if len & 1 << 31 == 0 {
            return;
        }
        let n = len & 0x3FF;
        let head = self.reg(off::PF_ARQH) & 0x3FF;
        let tail = self.reg(off::PF_ARQT) & 0x3FF;
        if n == 0 || head == tail {
            self.arq_overflows += 1;
            self.set(off::PF_ARQLEN, len | 1 << 29);
            return;
        }
        let base = (self.reg(off::PF_ARQBAH) as u64) << 32 | self.reg(off::PF_ARQBAL) as u64;
        let at = base + 32 * head as u64;
        let mut raw = [0u8; 32];
        if !self.host.dev_read(at, &mut raw) {
            self.violations.push(format!("ARQ descriptor {at:#x} outside allocated memory"));
            return;
        }
        let posted = Desc::parse(&raw);
        if posted.flags & BUF == 0 {
            self.violations.push(format!("ARQ descriptor {head} posted without a buffer"));
        }
        let mut out = [0u8; 32];
        let mut p = params;
        p[8..16].copy_from_slice(&posted.params[8..16]);
        out[16..32].copy_from_slice(&p);
        put16(&mut out, 2, opcode);
        put16(&mut out, 4, 0);
        put16(&mut out, 0, DD | CMP | BUF);
        self.host.dev_write(at + 16, &out[16..32]);
        self.host.dev_write(at, &out[..16]);
        self.set(off::PF_ARQH, (head + 1) % n);
    }
}
