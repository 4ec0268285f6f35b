//! The XDP program that steers every receive queue's frames into its AF_XDP socket,
//! assembled and loaded by this crate itself (no libbpf, no clang at build time).
//!
//! Per interface ([`XdpProgram::attach`]):
//!
//! 1. `bpf(BPF_MAP_CREATE)` of a `BPF_MAP_TYPE_XSKMAP`: key = queue index (`u32`),
//!    value = AF_XDP socket descriptor (`u32`), one entry per receive queue;
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
//! (`BPF_MAP_UPDATE_ELEM`). Until a queue's slot is filled its frames pass to the
//! kernel's stack (the program's default action, `XDP_PASS`).

pub mod abi;

use super::Errno;
use super::iface::{self, IfError, IfName};
use abi::*;
use core::fmt;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

/// The program: `bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`.
///
/// ```text
/// r2 = *(u32 *)(r1 + 16)      ; xdp_md.rx_queue_index
/// r1 = map_fd ll              ; ld_imm64, src_reg = BPF_PSEUDO_MAP_FD
/// r3 = 2                      ; XDP_PASS: the action when the slot is empty
/// call bpf_redirect_map       ; helper 51
/// exit                        ; return r0
/// ```
pub fn redirect_program(map_fd: i32) -> [Insn; 6] {
    [
        Insn::new(LDX_W_MEM, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        Insn::new(LD_DW_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        // Second half of ld_imm64: the upper 32 bits of the immediate (0).
        Insn::new(0, 0, 0, 0, 0),
        Insn::new(ALU64_MOV_K, 3, 0, 0, XDP_PASS),
        Insn::new(JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        Insn::new(JMP_EXIT, 0, 0, 0, 0),
    ]
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
    /// `BPF_MAP_CREATE` of the XSKMAP.
    MapCreate,
    /// `BPF_PROG_LOAD`.
    ProgLoad,
    /// `BPF_LINK_CREATE` in this mode.
    LinkCreate(Attached),
    /// `BPF_MAP_UPDATE_ELEM`.
    MapUpdate,
    /// `BPF_MAP_DELETE_ELEM`.
    MapDelete,
}

impl fmt::Display for BpfCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BpfCall::MapCreate => f.write_str("XSKMAP creation (BPF_MAP_CREATE)"),
            BpfCall::ProgLoad => f.write_str("program load (BPF_PROG_LOAD)"),
            BpfCall::LinkCreate(m) => write!(f, "{m} attach (BPF_LINK_CREATE)"),
            BpfCall::MapUpdate => f.write_str("XSKMAP update"),
            BpfCall::MapDelete => f.write_str("XSKMAP delete"),
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
    _prog: OwnedFd,
    _link: OwnedFd,
    attached: Attached,
}

impl XdpProgram {
    /// Loads the program for `queues` receive queues and attaches it to `ifname`.
    pub fn attach(ifname: &str, queues: u32, mode: AttachMode) -> Result<Self, BpfError> {
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
        let prog = load(&name, &map)?;
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
        Ok(Self { ifname: name, ifindex, queues, map, _prog: prog, _link: link, attached })
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

    /// Empties queue `queue`'s slot: its frames go to the kernel's stack again.
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

/// Loads [`redirect_program`] over `map`; on refusal, loads it again with a log.
fn load(ifname: &IfName, map: &OwnedFd) -> Result<OwnedFd, BpfError> {
    let insns = redirect_program(map.as_raw_fd());
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr().expose_provenance() as u64,
        license: LICENSE.as_ptr().expose_provenance() as u64,
        prog_name: obj_name("cadence_xsk"),
        expected_attach_type: BPF_XDP,
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
        let bytes: Vec<[u8; 8]> = redirect_program(7).iter().map(|i| i.to_bytes()).collect();
        assert_eq!(
            bytes,
            [
                [0x61, 0x12, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00], // r2 = *(u32 *)(r1 + 16)
                [0x18, 0x11, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00], // r1 = map fd 7 (pseudo)
                [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], //   upper half
                [0xb7, 0x03, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00], // r3 = XDP_PASS
                [0x85, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00], // call 51
                [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00], // exit
            ]
        );
        // In memory, an Insn is exactly its bytes.
        let insn = redirect_program(-2)[1];
        // SAFETY: Insn is repr(C), 8 bytes, no padding.
        let raw: [u8; 8] = unsafe { core::mem::transmute(insn) };
        assert_eq!(raw, insn.to_bytes());
        assert_eq!(raw[4..], (-2i32).to_le_bytes());
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
