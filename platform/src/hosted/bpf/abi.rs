//! The parts of `bpf(2)`'s ABI the XDP redirect program needs, from
//! `include/uapi/linux/bpf.h`: the command numbers, the members of `union bpf_attr`
//! each command reads (declared per command, each a prefix of the union; the kernel
//! zero-fills the rest when `size` is smaller than the union), and `struct bpf_insn`.
//! Every offset is asserted against the C header's (`gcc` `offsetof` on Linux 6.1's
//! header; these members have not moved since they were added).

use core::mem::offset_of;

/// `BPF_MAP_CREATE`.
pub const BPF_MAP_CREATE: i32 = 0;
/// `BPF_MAP_LOOKUP_ELEM`.
pub const BPF_MAP_LOOKUP_ELEM: i32 = 1;
/// `BPF_MAP_UPDATE_ELEM`.
pub const BPF_MAP_UPDATE_ELEM: i32 = 2;
/// `BPF_MAP_DELETE_ELEM`.
pub const BPF_MAP_DELETE_ELEM: i32 = 3;
/// `BPF_PROG_LOAD`.
pub const BPF_PROG_LOAD: i32 = 5;
/// `BPF_LINK_CREATE` (Linux ≥ 5.7; XDP links ≥ 5.9).
pub const BPF_LINK_CREATE: i32 = 28;

/// `BPF_MAP_TYPE_XSKMAP`: queue index → AF_XDP socket.
pub const BPF_MAP_TYPE_XSKMAP: u32 = 17;
/// `BPF_MAP_TYPE_ARRAY`: index → fixed-size value.
pub const BPF_MAP_TYPE_ARRAY: u32 = 2;
/// `BPF_PROG_TYPE_XDP`.
pub const BPF_PROG_TYPE_XDP: u32 = 6;
/// `BPF_PROG_TYPE_SCHED_CLS` (tc / tcx programs).
pub const BPF_PROG_TYPE_SCHED_CLS: u32 = 3;
/// `BPF_XDP` (`enum bpf_attach_type`).
pub const BPF_XDP: u32 = 37;
/// `BPF_F_XDP_HAS_FRAGS` (`prog_flags`, Linux ≥ 5.18): the XDP program takes frames over
/// several buffers (`xdp.frags`), so a driver may hand it such frames and an interface may
/// keep an MTU longer than a page with it attached.
pub const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
/// `BPF_TCX_INGRESS` (`enum bpf_attach_type`; tcx links, Linux ≥ 6.6).
pub const BPF_TCX_INGRESS: u32 = 46;
/// `BPF_ANY`: create or update a map element.
pub const BPF_ANY: u64 = 0;
/// `XDP_FLAGS_SKB_MODE`: generic XDP, after the stack has built an skb.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP in the driver's receive path.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `XDP_PASS`: hand the frame to the kernel's stack.
pub const XDP_PASS: i32 = 2;
/// `XDP_DROP`.
pub const XDP_DROP: i32 = 1;
/// `TC_ACT_SHOT`: a tc program's "drop".
pub const TC_ACT_SHOT: i32 = 2;
/// `BPF_FUNC_map_lookup_elem`: `void *bpf_map_lookup_elem(map, key)`.
pub const BPF_FUNC_MAP_LOOKUP_ELEM: i32 = 1;
/// `BPF_FUNC_ktime_get_ns`: `u64 bpf_ktime_get_ns(void)`, `CLOCK_MONOTONIC` in ns.
pub const BPF_FUNC_KTIME_GET_NS: i32 = 5;
/// `BPF_FUNC_xdp_adjust_meta`: `long bpf_xdp_adjust_meta(xdp_md, delta)`; 0 on success.
pub const BPF_FUNC_XDP_ADJUST_META: i32 = 54;
/// `BPF_FUNC_redirect_map`: `long bpf_redirect_map(map, key, flags)`.
pub const BPF_FUNC_REDIRECT_MAP: i32 = 51;
/// `BPF_PSEUDO_MAP_FD`: an `ld_imm64` whose immediate is a map descriptor.
pub const BPF_PSEUDO_MAP_FD: u8 = 1;
/// `BPF_OBJ_NAME_LEN`.
pub const BPF_OBJ_NAME_LEN: usize = 16;
/// `offsetof(struct xdp_md, data)`.
pub const XDP_MD_DATA: i16 = 0;
/// `offsetof(struct xdp_md, data_meta)`.
pub const XDP_MD_DATA_META: i16 = 8;
/// `offsetof(struct xdp_md, rx_queue_index)`.
pub const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// Opcode `BPF_LDX | BPF_W | BPF_MEM`: `dst = *(u32 *)(src + off)`.
pub const LDX_W_MEM: u8 = 0x61;
/// Opcode `BPF_LD | BPF_DW | BPF_IMM`: 64-bit immediate load (two slots).
pub const LD_DW_IMM: u8 = 0x18;
/// Opcode `BPF_ALU64 | BPF_MOV | BPF_K`: `dst = imm`.
pub const ALU64_MOV_K: u8 = 0xb7;
/// Opcode `BPF_ALU64 | BPF_MOV | BPF_X`: `dst = src`.
pub const ALU64_MOV_X: u8 = 0xbf;
/// Opcode `BPF_ALU64 | BPF_ADD | BPF_K`: `dst += imm`.
pub const ALU64_ADD_K: u8 = 0x07;
/// Opcode `BPF_STX | BPF_MEM | BPF_DW`: `*(u64 *)(dst + off) = src`.
pub const STX_DW_MEM: u8 = 0x7b;
/// Opcode `BPF_JMP | BPF_JGT | BPF_X`: `if dst > src goto pc + 1 + off` (unsigned).
pub const JMP_JGT_X: u8 = 0x2d;
/// Opcode `BPF_ST | BPF_MEM | BPF_W`: `*(u32 *)(dst + off) = imm`.
pub const ST_W_MEM: u8 = 0x62;
/// Opcode `BPF_JMP | BPF_JNE | BPF_K`: `if dst != imm goto pc + 1 + off`.
pub const JMP_JNE_K: u8 = 0x55;
/// Opcode `BPF_JMP | BPF_JEQ | BPF_K`: `if dst == imm goto pc + 1 + off`.
pub const JMP_JEQ_K: u8 = 0x15;
/// Opcode `BPF_STX | BPF_ATOMIC | BPF_DW` with `imm = BPF_ADD`: `lock *(u64 *)(dst + off) += src`.
pub const STX_ATOMIC_DW: u8 = 0xdb;
/// `BPF_ADD`, as the immediate of an atomic instruction.
pub const BPF_ATOMIC_ADD: i32 = 0x00;
/// Opcode `BPF_JMP | BPF_CALL`: call helper `imm`.
pub const JMP_CALL: u8 = 0x85;
/// Opcode `BPF_JMP | BPF_EXIT`: return `r0`.
pub const JMP_EXIT: u8 = 0x95;

/// `struct bpf_insn`: opcode, `dst_reg:4` (low nibble) / `src_reg:4` (high nibble),
/// signed 16-bit offset, signed 32-bit immediate.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Insn {
    /// Opcode.
    pub code: u8,
    /// `src_reg << 4 | dst_reg`.
    pub regs: u8,
    /// Offset.
    pub off: i16,
    /// Immediate.
    pub imm: i32,
}

const _: () = assert!(size_of::<Insn>() == 8);
const _: () = assert!(offset_of!(Insn, off) == 2);
const _: () = assert!(offset_of!(Insn, imm) == 4);

impl Insn {
    /// An instruction.
    pub const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Self { code, regs: (src << 4) | (dst & 0x0f), off, imm }
    }

    /// The 8 bytes the kernel reads.
    pub const fn to_bytes(self) -> [u8; 8] {
        let o = self.off.to_le_bytes();
        let i = self.imm.to_le_bytes();
        [self.code, self.regs, o[0], o[1], i[0], i[1], i[2], i[3]]
    }
}

/// `union bpf_attr` for `BPF_MAP_CREATE` (up to `map_name`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MapCreateAttr {
    /// `map_type`.
    pub map_type: u32,
    /// `key_size`.
    pub key_size: u32,
    /// `value_size`.
    pub value_size: u32,
    /// `max_entries`.
    pub max_entries: u32,
    /// `map_flags`.
    pub map_flags: u32,
    /// `inner_map_fd`.
    pub inner_map_fd: u32,
    /// `numa_node`.
    pub numa_node: u32,
    /// `map_name`.
    pub map_name: [u8; BPF_OBJ_NAME_LEN],
}

const _: () = assert!(size_of::<MapCreateAttr>() == 44);
const _: () = assert!(offset_of!(MapCreateAttr, key_size) == 4);
const _: () = assert!(offset_of!(MapCreateAttr, value_size) == 8);
const _: () = assert!(offset_of!(MapCreateAttr, max_entries) == 12);
const _: () = assert!(offset_of!(MapCreateAttr, map_flags) == 16);
const _: () = assert!(offset_of!(MapCreateAttr, numa_node) == 24);
const _: () = assert!(offset_of!(MapCreateAttr, map_name) == 28);

/// `union bpf_attr` for `BPF_MAP_*_ELEM`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MapElemAttr {
    /// `map_fd`.
    pub map_fd: u32,
    /// Padding before the aligned `key` pointer.
    pub _pad: u32,
    /// `key`: address of the key.
    pub key: u64,
    /// `value`: address of the value.
    pub value: u64,
    /// `flags` (`BPF_ANY`).
    pub flags: u64,
}

const _: () = assert!(size_of::<MapElemAttr>() == 32);
const _: () = assert!(offset_of!(MapElemAttr, key) == 8);
const _: () = assert!(offset_of!(MapElemAttr, value) == 16);
const _: () = assert!(offset_of!(MapElemAttr, flags) == 24);

/// `union bpf_attr` for `BPF_PROG_LOAD` (up to `expected_attach_type`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ProgLoadAttr {
    /// `prog_type`.
    pub prog_type: u32,
    /// `insn_cnt`.
    pub insn_cnt: u32,
    /// `insns`: address of the instructions.
    pub insns: u64,
    /// `license`: address of a NUL-terminated string.
    pub license: u64,
    /// `log_level`.
    pub log_level: u32,
    /// `log_size`.
    pub log_size: u32,
    /// `log_buf`: address of the verifier log buffer.
    pub log_buf: u64,
    /// `kern_version`.
    pub kern_version: u32,
    /// `prog_flags`.
    pub prog_flags: u32,
    /// `prog_name`.
    pub prog_name: [u8; BPF_OBJ_NAME_LEN],
    /// `prog_ifindex` (offload only).
    pub prog_ifindex: u32,
    /// `expected_attach_type`.
    pub expected_attach_type: u32,
}

const _: () = assert!(size_of::<ProgLoadAttr>() == 72);
const _: () = assert!(offset_of!(ProgLoadAttr, insn_cnt) == 4);
const _: () = assert!(offset_of!(ProgLoadAttr, insns) == 8);
const _: () = assert!(offset_of!(ProgLoadAttr, license) == 16);
const _: () = assert!(offset_of!(ProgLoadAttr, log_level) == 24);
const _: () = assert!(offset_of!(ProgLoadAttr, log_size) == 28);
const _: () = assert!(offset_of!(ProgLoadAttr, log_buf) == 32);
const _: () = assert!(offset_of!(ProgLoadAttr, kern_version) == 40);
const _: () = assert!(offset_of!(ProgLoadAttr, prog_flags) == 44);
const _: () = assert!(offset_of!(ProgLoadAttr, prog_name) == 48);
const _: () = assert!(offset_of!(ProgLoadAttr, prog_ifindex) == 64);
const _: () = assert!(offset_of!(ProgLoadAttr, expected_attach_type) == 68);

/// `union bpf_attr` for `BPF_LINK_CREATE` (the `link_create` struct, up to `flags`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct LinkCreateAttr {
    /// `prog_fd`.
    pub prog_fd: u32,
    /// `target_ifindex`.
    pub target_ifindex: u32,
    /// `attach_type` (`BPF_XDP`).
    pub attach_type: u32,
    /// `flags` (`XDP_FLAGS_*_MODE`).
    pub flags: u32,
}

const _: () = assert!(size_of::<LinkCreateAttr>() == 16);
const _: () = assert!(offset_of!(LinkCreateAttr, target_ifindex) == 4);
const _: () = assert!(offset_of!(LinkCreateAttr, attach_type) == 8);
const _: () = assert!(offset_of!(LinkCreateAttr, flags) == 12);

/// A name for `map_name` / `prog_name`: at most 15 bytes of `[A-Za-z0-9_.]`, NUL padded.
pub const fn obj_name(name: &str) -> [u8; BPF_OBJ_NAME_LEN] {
    let b = name.as_bytes();
    let mut out = [0u8; BPF_OBJ_NAME_LEN];
    let mut i = 0;
    while i < b.len() && i < BPF_OBJ_NAME_LEN - 1 {
        out[i] = b[i];
        i += 1;
    }
    out
}
