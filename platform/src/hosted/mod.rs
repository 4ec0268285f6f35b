//! The hosted machine layer: what Cadence needs from Linux to run as a process
//! (`target_os = "linux"` only), in the roles the bare-metal modules play on the metal.
//!
//! | module | bare-metal role it replaces | Linux interface |
//! |---|---|---|
//! | [`mem`] | DMA memory for the packet pool | anonymous `mmap`, THP / hugetlbfs |
//! | [`ring`] | MMIO windows ([`cadence_drivers::hal::Mmio`]) | `mmap` of a socket's ring memory |
//! | [`kick`] | doorbell register writes ([`cadence_drivers::hal::Kick`]) | `sendto` / `recvfrom` / `send`, `MSG_DONTWAIT` |
//! | [`xdp`] | NIC queue bring-up (zero-copy path) | AF_XDP sockets, UMEM, four rings |
//! | [`bpf`] | RSS / queue steering into the rings | an XDP program + XSKMAP, `bpf(2)`, BPF links |
//! | [`packet`] | NIC queue bring-up (portable path) | `AF_PACKET` `TPACKET_V3` rings, fanout |
//! | [`iface`] | PCI probe facts | `ioctl` (`SIOCGIF*`, ethtool), `/sys/class/net` |
//! | [`clock`] | `TscClock` and its calibration | `rdtsc` vs `CLOCK_MONOTONIC_RAW` |
//! | [`sleep`] | `HaltSleeper` | `clock_nanosleep(TIMER_ABSTIME)` + spin |
//! | [`thread`] | SMP bring-up, one worker per core | pinned `std::thread`s, CPU-time clocks |
//! | [`process`] | the boot nonce (RDRAND, the RTC); what runs at ring 0 | `getrandom(2)`; SIGINT/SIGTERM as a clean stop; `setuid`/`capset` after set-up |
//!
//! The drivers crate never sees a file descriptor: it gets windows, offsets, sizes and a
//! kick object. Errors carry the call that failed, the interface and the `errno`, and
//! print as the line a user needs ("AF_XDP bind on veth0 queue 1: EOPNOTSUPP (Operation
//! not supported): the driver has no zero-copy AF_XDP support: use copy mode").
//!
//! `unsafe` here is system calls and raw ring memory; every block says which invariant
//! makes it sound.
//!
//! # What each piece does
//!
//! - `mem::packet_memory` maps a lane's pool memory (anonymous, zeroed, pre-faulted,
//!   leaked; 2 MiB aligned with `MADV_HUGEPAGE`, or `MAP_HUGETLB` where hugetlbfs pages are
//!   reserved, reporting which); the pool uses `phys_base = 0`, so a buffer's address is
//!   its UMEM offset.
//! - `xdp::XskSocket::open` does the AF_XDP set-up of af_xdp.rst (UMEM chunk 2048 =
//!   `BUF_SIZE`, headroom 0; fill/completion/RX/TX sizes; `XDP_MMAP_OFFSETS`; four `mmap`s;
//!   bind in copy, zero-copy or auto mode, reading back which one `XDP_OPTIONS` reports); a
//!   lane's second port shares the first port's UMEM with `XDP_SHARED_UMEM` and its own
//!   fill/completion rings.
//! - `bpf::XdpProgram` assembles the redirect program (the arrival stamp
//!   `bpf_ktime_get_ns()` in 16 bytes of XDP metadata, then `bpf_redirect_map(xskmap,
//!   rx_queue_index, …)`), loads it with `bpf(2)` (verifier log in the error) and attaches
//!   it through a BPF link (native, else generic), so it detaches itself when the process
//!   ends.
//! - `packet::PacketSocket` is the portable path: `TPACKET_V3` RX blocks and TX frames in
//!   one mapping, `PACKET_IGNORE_OUTGOING`, `PACKET_QDISC_BYPASS`, and `PACKET_FANOUT_HASH`
//!   across a port's lanes.
//! - Drivers get `MappedRing` windows (volatile, bounds-checked, `Send`), the kernel's ring
//!   offsets, sizes and an `XskKick`/`PacketKick`; the ABI structs carry compile-time
//!   size/offset asserts checked against the uapi headers.
//! - `clock::HostClock` is the TSC (invariant per CPUID and the kernel's clocksource, two
//!   50 ms windows against `CLOCK_MONOTONIC_RAW` agreeing within 0.1 %) or
//!   `CLOCK_MONOTONIC`; `HostClock::map_from` converts the kernel's receive stamps
//!   (`CLOCK_MONOTONIC`, `CLOCK_REALTIME`) to its ticks.
//! - `sleep::NanoSleeper` sleeps in `clock_nanosleep(TIMER_ABSTIME)` until `deadline − spin
//!   margin` with 1 ns timer slack, then spins to the deadline (the library default margin
//!   is 50 µs; the hosted binary uses `--spin-us`, default 0, because a Metronome `T_S` of a
//!   few µs would otherwise be spun entirely), and counts kernel (idle) vs spin (busy) time
//!   and a lateness histogram (`cargo run -p cadence-platform --release --example
//!   hosted_sleep` measures it).
//! - `thread::spawn` starts named workers pinned to a CPU (or reports why not) whose CPU
//!   time other threads can read.
//!
//! Tests: layout/encoding/errno unit tests, and `platform/tests/hosted_netns.rs` (root) runs
//! each case in a fresh network namespace with a veth pair: `TPACKET_V3` RX and TX, AF_XDP
//! copy-mode receive through the loaded program, zero-copy refused on veth with auto
//! falling back to copy, and a shared UMEM across both veth ends (TX on one socket, RX on
//! the other).

#[allow(unsafe_code)] // bpf(2) system calls and the program bytes the kernel reads
pub mod bpf;
#[allow(unsafe_code)] // clock_gettime and the TSC
pub mod clock;
mod errno;
#[allow(unsafe_code)] // ioctl(2) on interfaces
pub mod iface;
#[allow(unsafe_code)] // sendto/poll wake-ups of the kernel rings
pub mod kick;
#[allow(unsafe_code)] // mmap of UMEM and rings, huge pages
pub mod mem;
#[allow(unsafe_code)] // AF_PACKET socket set-up system calls
pub mod packet;
#[allow(unsafe_code)] // getrandom(2), sigaction, setuid/capset
pub mod process;
#[allow(unsafe_code)] // the shared producer/consumer rings mapped from the kernel
pub mod ring;
#[allow(unsafe_code)] // timerfd, clock_nanosleep and prctl system calls
pub mod sleep;
#[allow(unsafe_code)] // thin wrappers of libc system calls
mod sys;
#[allow(unsafe_code)] // sched_setaffinity, gettid, the pinned thread start
pub mod thread;
#[allow(unsafe_code)] // AF_XDP socket set-up system calls
pub mod xdp;

pub use errno::Errno;
