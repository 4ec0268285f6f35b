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
