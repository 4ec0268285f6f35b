//! The eBPF programs the hosted build loads itself (no libbpf, no clang at build time):
//! the XDP program that steers every receive queue's frames into its AF_XDP socket, and the
//! tcx program that keeps frames an `AF_PACKET` dataplane reads from the kernel's stack.
//!
//! **XDP** per interface ([`XdpProgram::attach`]):
//!
//! 1. `bpf(BPF_MAP_CREATE)` of a `BPF_MAP_TYPE_XSKMAP` (key = queue index, `u32`; value =
//!    AF_XDP socket descriptor, `u32`; one entry per lane), and of a one-entry
//!    `BPF_MAP_TYPE_ARRAY` of `u64`: the frames no lane owns;
//! 2. `bpf(BPF_PROG_LOAD)` of [`redirect_program`], type `BPF_PROG_TYPE_XDP`, license
//!    `"Dual MIT/GPL"` (GPL-compatible; `bpf_redirect_map` is not GPL-only anyway). When
//!    the verifier refuses it, it is loaded again with a log buffer and the log goes into
//!    the error;
//! 3. `bpf(BPF_LINK_CREATE)` with `attach_type = BPF_XDP` on the interface, native
//!    (`XDP_FLAGS_DRV_MODE`) first and generic (`XDP_FLAGS_SKB_MODE`) when the driver has
//!    no native XDP. A link, unlike a netlink attachment, belongs to its descriptor: the
//!    program detaches itself when the [`XdpProgram`] is dropped or the process exits,
//!    however it exits.
//!
//! [`XdpProgram::register`] then puts `queue → socket` into the map
//! (`BPF_MAP_UPDATE_ELEM`). A frame on a queue whose slot is empty — a queue at or above
//! `lanes` on a NIC with more receive queues than lanes, or a lane not registered yet — is
//! **dropped and counted** ([`XdpProgram::unowned`]), never passed to the kernel's stack:
//! passing it would let it skip the chain (not filtered, NATed or counted) and reach the
//! host. (`bpf_redirect_map` returns the low bits of its `flags` argument when the lookup
//! fails: `XDP_DROP` here.)
//!
//! **tcx** ([`IngressDrop::attach`]): an `AF_PACKET` socket is a tap — the kernel's stack
//! still gets every frame it reads. A `BPF_PROG_TYPE_SCHED_CLS` program that returns
//! `TC_ACT_SHOT`, linked at `BPF_TCX_INGRESS` (Linux ≥ 6.6), drops them after the taps have
//! seen them (`__netif_receive_skb_core` delivers to `ptype_all` taps, fanout groups
//! included, before the ingress hook), so the host never acts on traffic the dataplane owns.

pub mod abi;

use super::Errno;
use super::iface::{self, IfError, IfName};
use abi::*;
use core::fmt;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

/// The XDP program: stamps the frame's arrival in its metadata area, then
/// `bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_DROP)`; a frame no socket takes is
/// dropped and counted in `unowned[0]`.
///
/// The stamp ([`cadence_drivers::xsk::arrival`]): `bpf_xdp_adjust_meta(ctx, -16)`, then,
/// with the verifier's bounds check `data_meta + 16 <= data`, `bpf_ktime_get_ns()` at
/// `data_meta` and the magic word at `data_meta + 8`. When `adjust_meta` fails (a driver
/// without metadata support) the frame is redirected unstamped; the RX path sees no magic.
///
/// ```text
///  0: r6 = r1                     ; the context, kept across the calls
///  1: r2 = -16
///  2: call bpf_xdp_adjust_meta    ; helper 54: 16 bytes of metadata in front of the frame
///  3: if r0 != 0 goto 14          ; no metadata here: redirect unstamped
///  4: call bpf_ktime_get_ns       ; helper 5: r0 = CLOCK_MONOTONIC ns
///  5: r2 = *(u32 *)(r6 + 8)       ; xdp_md.data_meta (reloaded: adjust_meta moved it)
///  6: r3 = *(u32 *)(r6 + 0)       ; xdp_md.data
///  7: r4 = r2
///  8: r4 += 16
///  9: if r4 > r3 goto 14          ; the verifier's bounds check
/// 10: *(u64 *)(r2 + 0) = r0       ; the stamp
/// 11: r5 = ARRIVAL_MAGIC ll       ; ld_imm64 (two slots)
/// 13: *(u64 *)(r2 + 8) = r5       ; the magic
/// 14: r2 = *(u32 *)(r6 + 16)      ; xdp_md.rx_queue_index
/// 15: r1 = xsks ll                ; ld_imm64, src_reg = BPF_PSEUDO_MAP_FD (two slots)
/// 17: r3 = 1                      ; XDP_DROP: the action when the queue's slot is empty
/// 18: call bpf_redirect_map       ; helper 51
/// 19: if r0 != 1 goto 30          ; redirected (XDP_REDIRECT): return it
/// 20: *(u32 *)(r10 - 4) = 0       ; key 0 on the stack
/// 21: r2 = r10
/// 22: r2 += -4
/// 23: r1 = unowned ll             ; the counter's array map (two slots)
/// 25: call bpf_map_lookup_elem    ; helper 1
/// 26: if r0 == 0 goto 29
/// 27: r1 = 1
/// 28: lock *(u64 *)(r0 + 0) += r1
/// 29: r0 = 1                      ; XDP_DROP
/// 30: exit                        ; return r0
/// ```
pub fn redirect_program(xsks_fd: i32, unowned_fd: i32) -> [Insn; 31] {
    use cadence_drivers::xsk::arrival::{ARRIVAL_MAGIC, MAGIC, META_LEN, STAMP};
    let meta = META_LEN as i32;
    [
        Insn::new(ALU64_MOV_X, 6, 1, 0, 0),
        Insn::new(ALU64_MOV_K, 2, 0, 0, -meta),
        Insn::new(JMP_CALL, 0, 0, 0, BPF_FUNC_XDP_ADJUST_META),
        Insn::new(JMP_JNE_K, 0, 0, 10, 0),
        Insn::new(JMP_CALL, 0, 0, 0, BPF_FUNC_KTIME_GET_NS),
        Insn::new(LDX_W_MEM, 2, 6, XDP_MD_DATA_META, 0),
        Insn::new(LDX_W_MEM, 3, 6, XDP_MD_DATA, 0),
        Insn::new(ALU64_MOV_X, 4, 2, 0, 0),
        Insn::new(ALU64_ADD_K, 4, 0, 0, meta),
        Insn::new(JMP_JGT_X, 4, 3, 4, 0),
        Insn::new(STX_DW_MEM, 2, 0, STAMP as i16, 0),
        Insn::new(LD_DW_IMM, 5, 0, 0, ARRIVAL_MAGIC as u32 as i32),
        Insn::new(0, 0, 0, 0, (ARRIVAL_MAGIC >> 32) as u32 as i32),
        Insn::new(STX_DW_MEM, 2, 5, MAGIC as i16, 0),
        Insn::new(LDX_W_MEM, 2, 6, XDP_MD_RX_QUEUE_INDEX, 0),
        Insn::new(LD_DW_IMM, 1, BPF_PSEUDO_MAP_FD, 0, xsks_fd),
        // Second half of ld_imm64: the upper 32 bits of the immediate (0).
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(ALU64_MOV_K, 3, 0, 0, XDP_DROP),
        Insn::new(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        Insn::new(JMP_JNE_K, 0, 0, 10, XDP_DROP),
        Insn::new(ST_W_MEM, 10, 0, -4, 0),
        Insn::new(ALU64_MOV_X, 2, 10, 0, 0),
        Insn::new(ALU64_ADD_K, 2, 0, 0, -4),
        Insn::new(LD_DW_IMM, 1, BPF_PSEUDO_MAP_FD, 0, unowned_fd),
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(JMP_CALL, 0, 0, 0, BPF_FUNC_MAP_LOOKUP_ELEM),
        Insn::new(JMP_JEQ_K, 0, 0, 2, 0),
        Insn::new(ALU64_MOV_K, 1, 0, 0, 1),
        Insn::new(STX_ATOMIC_DW, 0, 1, 0, BPF_ATOMIC_ADD),
        Insn::new(ALU64_MOV_K, 0, 0, 0, XDP_DROP),
        Insn::new(JMP_EXIT, 0, 0, 0, 0),
    ]
}

/// The tcx ingress program: every frame is dropped before the kernel's stack
/// (`return TC_ACT_SHOT`).
pub fn ingress_drop_program() -> [Insn; 2] {
    [Insn::new(ALU64_MOV_K, 0, 0, 0, TC_ACT_SHOT), Insn::new(JMP_EXIT, 0, 0, 0, 0)]
}

/// The license the program is loaded under.
pub const LICENSE: &core::ffi::CStr = c"Dual MIT/GPL";

/// Where to attach the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachMode {
    /// Native if the driver supports it, else generic.
    #[default]
    Auto,
    /// Native only (`XDP_FLAGS_DRV_MODE`).
    Driver,
    /// Generic only (`XDP_FLAGS_SKB_MODE`).
    Skb,
}

/// Where the program got attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attached {
    /// In the driver (native XDP).
    Driver,
    /// Generic XDP (after skb allocation; slower, works everywhere).
    Skb,
}

impl Attached {
    fn flags(self) -> u32 {
        match self {
            Attached::Driver => XDP_FLAGS_DRV_MODE,
            Attached::Skb => XDP_FLAGS_SKB_MODE,
        }
    }
}

impl fmt::Display for Attached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Attached::Driver => "native",
            Attached::Skb => "generic (skb)",
        })
    }
}

/// The `bpf(2)` command that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BpfCall {
    /// `BPF_MAP_CREATE` of the XSKMAP or the counter.
    MapCreate,
    /// `BPF_LINK_CREATE` at tcx ingress.
    TcxCreate,
    /// `BPF_PROG_LOAD`.
    ProgLoad,
    /// `BPF_LINK_CREATE` in this mode.
    LinkCreate(Attached),
    /// `BPF_MAP_UPDATE_ELEM`.
    MapUpdate,
    /// `BPF_MAP_DELETE_ELEM`.
    MapDelete,
    /// `BPF_MAP_LOOKUP_ELEM` of the counter.
    MapLookup,
}

impl fmt::Display for BpfCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BpfCall::MapCreate => f.write_str("map creation (BPF_MAP_CREATE)"),
            BpfCall::TcxCreate => f.write_str("tcx ingress attach (BPF_LINK_CREATE)"),
            BpfCall::ProgLoad => f.write_str("program load (BPF_PROG_LOAD)"),
            BpfCall::LinkCreate(m) => write!(f, "{m} attach (BPF_LINK_CREATE)"),
            BpfCall::MapUpdate => f.write_str("XSKMAP update"),
            BpfCall::MapDelete => f.write_str("XSKMAP delete"),
            BpfCall::MapLookup => f.write_str("counter read (BPF_MAP_LOOKUP_ELEM)"),
        }
    }
}

/// Why the XDP program could not be set up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BpfError {
    /// The interface is missing or unreadable.
    Interface(IfError),
    /// Zero queues, or a queue index beyond the map.
    BadQueue {
        /// The queue.
        queue: u32,
        /// The map's entries.
        queues: u32,
    },
    /// A `bpf(2)` call failed.
    Sys {
        /// The command.
        call: BpfCall,
        /// The interface.
        ifname: IfName,
        /// What the kernel said.
        errno: Errno,
    },
    /// The verifier refused the program; its log.
    Verifier {
        /// The interface.
        ifname: IfName,
        /// What the kernel said.
        errno: Errno,
        /// The verifier log.
        log: String,
    },
}

impl BpfError {
    /// What the user can do about it, where that is known.
    pub fn hint(&self) -> Option<&'static str> {
        let BpfError::Sys { call, errno, .. } = self else {
            return None;
        };
        Some(match (call, errno.raw()) {
            (_, libc::EPERM | libc::EACCES) => "loading XDP programs needs root (CAP_BPF, CAP_NET_ADMIN)",
            (_, libc::ENOSYS) => "this kernel has no bpf(2) (CONFIG_BPF_SYSCALL)",
            (BpfCall::MapCreate, libc::EINVAL) => "this kernel has no XSKMAP (CONFIG_XDP_SOCKETS)",
            (BpfCall::LinkCreate(_), libc::EBUSY | libc::EEXIST) => {
                "another XDP program is attached to this interface (`ip link set dev IF xdp off`)"
            }
            (BpfCall::LinkCreate(Attached::Driver), libc::EOPNOTSUPP) => "the driver has no native XDP",
            (BpfCall::LinkCreate(_), libc::EINVAL) => "kernel without XDP links (needs Linux >= 5.9)",
            (BpfCall::TcxCreate, libc::EINVAL | libc::EOPNOTSUPP) => {
                "kernel without tcx links (needs Linux >= 6.6): run with --packet-stack share to let the \
                 kernel's stack have the frames too"
            }
            (BpfCall::MapUpdate, libc::EOPNOTSUPP | libc::EINVAL) => "the descriptor is not a bound AF_XDP socket",
            _ => return None,
        })
    }
}

impl fmt::Display for BpfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BpfError::Interface(e) => write!(f, "XDP program: {e}"),
            BpfError::BadQueue { queue, queues } => {
                write!(f, "XDP program: queue {queue} outside the map's {queues} queues")
            }
            BpfError::Sys { call, ifname, errno } => {
                write!(f, "XDP {call} on {ifname}: {errno}")?;
                if let Some(h) = self.hint() {
                    write!(f, ": {h}")?;
                }
                Ok(())
            }
            BpfError::Verifier { ifname, errno, log } => {
                write!(f, "XDP program load on {ifname}: {errno}; verifier log:\n{}", log.trim_end())
            }
        }
    }
}

impl std::error::Error for BpfError {}

/// The redirect program attached to one interface, with its XSKMAP. Dropping it
/// detaches the program.
#[derive(Debug)]
pub struct XdpProgram {
    ifname: IfName,
    ifindex: u32,
    queues: u32,
    map: OwnedFd,
    unowned: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    attached: Attached,
}

impl XdpProgram {
    /// Loads the program for `queues` receive queues and attaches it to `ifname`.
    pub fn attach(ifname: &str, queues: u32, mode: AttachMode) -> Result<Self, BpfError> {
        Self::attach_frags(ifname, queues, mode, false)
    }

    /// [`XdpProgram::attach`], the program loaded frags-aware (`BPF_F_XDP_HAS_FRAGS`) when
    /// `frags`: for sockets that take frames over several buffers (`XDP_USE_SG`) on an
    /// interface with a jumbo MTU. It reads nothing past a frame's first buffer.
    pub fn attach_frags(ifname: &str, queues: u32, mode: AttachMode, frags: bool) -> Result<Self, BpfError> {
        if queues == 0 {
            return Err(BpfError::BadQueue { queue: 0, queues });
        }
        let name = iface::if_name(ifname).map_err(BpfError::Interface)?;
        let ifindex = iface::ifindex(ifname).map_err(BpfError::Interface)?;
        let err = |call: BpfCall| {
            let ifname = name.clone();
            move |errno| BpfError::Sys { call, ifname, errno }
        };

        let mut m = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: queues,
            map_name: obj_name("cadence_xsks"),
            ..Default::default()
        };
        let map = bpf_fd(BPF_MAP_CREATE, &mut m).map_err(err(BpfCall::MapCreate))?;
        let mut c = MapCreateAttr {
            map_type: BPF_MAP_TYPE_ARRAY,
            key_size: 4,
            value_size: 8,
            max_entries: 1,
            map_name: obj_name("cadence_unowned"),
            ..Default::default()
        };
        let unowned = bpf_fd(BPF_MAP_CREATE, &mut c).map_err(err(BpfCall::MapCreate))?;
        let insns = redirect_program(map.as_raw_fd(), unowned.as_raw_fd());
        let flags = if frags { BPF_F_XDP_HAS_FRAGS } else { 0 };
        let prog = load(&name, BPF_PROG_TYPE_XDP, BPF_XDP, flags, "cadence_xsk", &insns)?;
        let try_mode = |a: Attached| {
            let mut l = LinkCreateAttr {
                prog_fd: prog.as_raw_fd() as u32,
                target_ifindex: ifindex,
                attach_type: BPF_XDP,
                flags: a.flags(),
            };
            bpf_fd(BPF_LINK_CREATE, &mut l).map(|fd| (fd, a)).map_err(err(BpfCall::LinkCreate(a)))
        };
        let (link, attached) = match mode {
            AttachMode::Driver => try_mode(Attached::Driver)?,
            AttachMode::Skb => try_mode(Attached::Skb)?,
            AttachMode::Auto => match try_mode(Attached::Driver) {
                Ok(l) => l,
                Err(BpfError::Sys { errno, .. })
                    if matches!(errno.raw(), libc::EOPNOTSUPP | libc::EINVAL | ENOTSUPP) =>
                {
                    try_mode(Attached::Skb)?
                }
                Err(e) => return Err(e),
            },
        };
        Ok(Self { ifname: name, ifindex, queues, map, unowned, _prog: prog, _link: link, attached })
    }

    /// Frames dropped because no lane owns their queue (since the program was attached).
    pub fn unowned(&self) -> Result<u64, BpfError> {
        let key = 0u32;
        let mut value = 0u64;
        let mut a = MapElemAttr {
            map_fd: self.unowned.as_raw_fd() as u32,
            key: (&raw const key).expose_provenance() as u64,
            value: (&raw mut value).expose_provenance() as u64,
            ..Default::default()
        };
        // `key` and `value` live on this frame until `bpf` returns; the kernel writes the
        // 8-byte value into `value`.
        bpf(BPF_MAP_LOOKUP_ELEM, &mut a).map_err(|errno| self.sys(BpfCall::MapLookup, errno))?;
        Ok(value)
    }

    /// Steers queue `queue`'s frames to `socket` (an AF_XDP socket bound to that queue
    /// of this interface).
    pub fn register(&self, queue: u32, socket: &impl AsFd) -> Result<(), BpfError> {
        self.check(queue)?;
        let fd = socket.as_fd().as_raw_fd() as u32;
        let mut a = MapElemAttr {
            map_fd: self.map.as_raw_fd() as u32,
            key: (&raw const queue).expose_provenance() as u64,
            value: (&raw const fd).expose_provenance() as u64,
            flags: BPF_ANY,
            ..Default::default()
        };
        // `queue` and `fd` live on this frame until `bpf` returns.
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(drop).map_err(|errno| self.sys(BpfCall::MapUpdate, errno))
    }

    /// Empties queue `queue`'s slot: its frames are dropped and counted again.
    pub fn unregister(&self, queue: u32) -> Result<(), BpfError> {
        self.check(queue)?;
        let mut a = MapElemAttr {
            map_fd: self.map.as_raw_fd() as u32,
            key: (&raw const queue).expose_provenance() as u64,
            ..Default::default()
        };
        bpf(BPF_MAP_DELETE_ELEM, &mut a).map(drop).map_err(|errno| self.sys(BpfCall::MapDelete, errno))
    }

    /// Where it is attached.
    pub fn attached(&self) -> Attached {
        self.attached
    }

    /// Queues the map has room for.
    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// The interface index.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    fn check(&self, queue: u32) -> Result<(), BpfError> {
        if queue >= self.queues { Err(BpfError::BadQueue { queue, queues: self.queues }) } else { Ok(()) }
    }

    fn sys(&self, call: BpfCall, errno: Errno) -> BpfError {
        BpfError::Sys { call, ifname: self.ifname.clone(), errno }
    }
}

/// The kernel-internal `ENOTSUPP` (524) that some drivers leak to user space.
const ENOTSUPP: i32 = 524;

/// Loads `insns` as a program of `prog_type` for `attach`; on refusal, loads it again with a
/// log.
fn load(
    ifname: &IfName,
    prog_type: u32,
    attach: u32,
    prog_flags: u32,
    name: &str,
    insns: &[Insn],
) -> Result<OwnedFd, BpfError> {
    let mut attr = ProgLoadAttr {
        prog_type,
        prog_flags,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr().expose_provenance() as u64,
        license: LICENSE.as_ptr().expose_provenance() as u64,
        prog_name: obj_name(name),
        expected_attach_type: attach,
        ..Default::default()
    };
    // `insns` and `LICENSE` outlive both calls below.
    let first = match bpf_fd(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => return Ok(fd),
        Err(e) => e,
    };
    if matches!(first.raw(), libc::EPERM | libc::ENOSYS) {
        return Err(BpfError::Sys { call: BpfCall::ProgLoad, ifname: ifname.clone(), errno: first });
    }
    let mut log = vec![0u8; 64 * 1024];
    attr.log_level = 1;
    attr.log_size = log.len() as u32;
    attr.log_buf = log.as_mut_ptr().expose_provenance() as u64;
    match bpf_fd(BPF_PROG_LOAD, &mut attr) {
        // Loaded with a log although not without one: take it.
        Ok(fd) => Ok(fd),
        Err(errno) => {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let log = String::from_utf8_lossy(&log[..end]).into_owned();
            Err(BpfError::Verifier { ifname: ifname.clone(), errno, log })
        }
    }
}

/// [`ingress_drop_program`] linked at an interface's tcx ingress: the kernel's stack gets
/// none of its frames (module docs). Dropping it unlinks the program.
#[derive(Debug)]
pub struct IngressDrop {
    _prog: OwnedFd,
    _link: OwnedFd,
}

impl IngressDrop {
    /// Loads the program and links it at `ifname`'s tcx ingress.
    pub fn attach(ifname: &str) -> Result<Self, BpfError> {
        let name = iface::if_name(ifname).map_err(BpfError::Interface)?;
        let ifindex = iface::ifindex(ifname).map_err(BpfError::Interface)?;
        let insns = ingress_drop_program();
        let prog = load(&name, BPF_PROG_TYPE_SCHED_CLS, BPF_TCX_INGRESS, 0, "cadence_nostack", &insns)?;
        let mut l = LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_TCX_INGRESS,
            flags: 0,
        };
        let link = bpf_fd(BPF_LINK_CREATE, &mut l).map_err(|errno| BpfError::Sys {
            call: BpfCall::TcxCreate,
            ifname: name.clone(),
            errno,
        })?;
        Ok(Self { _prog: prog, _link: link })
    }
}

/// `bpf(cmd, attr, sizeof attr)`.
fn bpf<T>(cmd: i32, attr: &mut T) -> Result<i64, Errno> {
    // SAFETY: `attr` is a valid, writable prefix of `union bpf_attr` for `cmd` (the
    // abi structs), of the size passed; the kernel zero-extends it. Any address inside
    // it (key, value, insns, license, log) points at memory the caller keeps alive and
    // correctly sized for the duration of this call.
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, (attr as *mut T).cast::<libc::c_void>(), size_of::<T>()) };
    if r < 0 { Err(Errno::last()) } else { Ok(r) }
}

/// A `bpf(2)` command that returns a new descriptor.
fn bpf_fd<T>(cmd: i32, attr: &mut T) -> Result<OwnedFd, Errno> {
    let fd = bpf(cmd, attr)? as i32;
    // SAFETY: MAP_CREATE, PROG_LOAD and LINK_CREATE return a fresh descriptor (with
    // O_CLOEXEC) that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_bytes() {
        let bytes: Vec<[u8; 8]> = redirect_program(7, 9).iter().map(|i| i.to_bytes()).collect();
        assert_eq!(
            bytes,
            [
                [0xbf, 0x16, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r6 = r1
                [0xb7, 0x02, 0x00, 0x00, 0xf0, 0xff, 0xff, 0xff], // r2 = -16
                [0x85, 0x00, 0x00, 0x00, 0x36, 0x00, 0x00, 0x00], // call 54
                [0x55, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x00], // if r0 != 0 goto +10
                [0x85, 0x00, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00], // call 5
                [0x61, 0x62, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = *(u32 *)(r6 + 8)
                [0x61, 0x63, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r3 = *(u32 *)(r6 + 0)
                [0xbf, 0x24, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r4 = r2
                [0x07, 0x04, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00], // r4 += 16
                [0x2d, 0x34, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00], // if r4 > r3 goto +4
                [0x7b, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // *(u64 *)(r2 + 0) = r0
                [0x18, 0x05, 0x00, 0x00, b'C', b'A', b'D', b'E'], // r5 = "CADENCE1"
                [0x00, 0x00, 0x00, 0x00, b'N', b'C', b'E', b'1'], //   upper half
                [0x7b, 0x52, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00], // *(u64 *)(r2 + 8) = r5
                [0x61, 0x62, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = *(u32 *)(r6 + 16)
                [0x18, 0x11, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00], // r1 = map fd 7 (pseudo)
                [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   upper half
                [0xb7, 0x03, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // r3 = XDP_DROP
                [0x85, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00], // call 51
                [0x55, 0x00, 0x0a, 0x00, 0x01, 0x00, 0x00, 0x00], // if r0 != 1 goto +10
                [0x62, 0x0a, 0xfc, 0xff, 0x00, 0x00, 0x00, 0x00], // *(u32 *)(r10 - 4) = 0
                [0xbf, 0xa2, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = r10
                [0x07, 0x02, 0x00, 0x00, 0xfc, 0xff, 0xff, 0xff], // r2 += -4
                [0x18, 0x11, 0x00, 0x00, 0x09, 0x00, 0x00, 0x00], // r1 = map fd 9 (pseudo)
                [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   upper half
                [0x85, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // call 1
                [0x15, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00], // if r0 == 0 goto +2
                [0xb7, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // r1 = 1
                [0xdb, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // lock *(u64 *)(r0 + 0) += r1
                [0xb7, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00], // r0 = XDP_DROP
                [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // exit
            ]
        );
        // The jumps land where the listing says: the redirect (both stamp exits), the exit,
        // and the final r0 = XDP_DROP.
        let p = redirect_program(7, 9);
        let redirect = Insn::new(LDX_W_MEM, 2, 6, XDP_MD_RX_QUEUE_INDEX, 0);
        assert_eq!(p[3 + 1 + p[3].off as usize], redirect);
        assert_eq!(p[9 + 1 + p[9].off as usize], redirect);
        assert_eq!(p[19 + 1 + p[19].off as usize], Insn::new(JMP_EXIT, 0, 0, 0, 0));
        assert_eq!(p[26 + 1 + p[26].off as usize], Insn::new(ALU64_MOV_K, 0, 0, 0, XDP_DROP));
        // In memory, an Insn is exactly its bytes.
        let insn = redirect_program(-2, 9)[15];
        // SAFETY: Insn is repr(C), 8 bytes, no padding.
        let raw: [u8; 8] = unsafe { core::mem::transmute(insn) };
        assert_eq!(raw, insn.to_bytes());
        assert_eq!(raw[4..], (-2i32).to_le_bytes());
        let drop: Vec<[u8; 8]> = ingress_drop_program().iter().map(|i| i.to_bytes()).collect();
        assert_eq!(drop, [[0xb7, 0, 0, 0, 2, 0, 0, 0], [0x95, 0, 0, 0, 0, 0, 0, 0]]);
    }

    #[test]
    fn names_are_truncated_and_nul_padded() {
        assert_eq!(&obj_name("cadence_xsks")[..13], b"cadence_xsks\0");
        assert_eq!(obj_name("a_very_long_program_name")[15], 0);
        assert_eq!(LICENSE.to_bytes(), b"Dual MIT/GPL");
    }

    #[test]
    fn errors_carry_hints() {
        let e = BpfError::Sys {
            call: BpfCall::LinkCreate(Attached::Driver),
            ifname: IfName::try_from("eth0").unwrap(),
            errno: Errno(libc::EBUSY),
        };
        let s = e.to_string();
        assert!(s.starts_with("XDP native attach (BPF_LINK_CREATE) on eth0: EBUSY"), "{s}");
        assert!(s.contains("another XDP program"), "{s}");
        assert!(matches!(XdpProgram::attach("lo", 0, AttachMode::Auto), Err(BpfError::BadQueue { .. })));
    }
}
