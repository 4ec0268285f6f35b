//! Pinning a bench thread to one CPU (`sched_setaffinity`), for the benches that measure
//! two cores talking (the hand-off ring: producer on CPU 0, consumer on CPU 1, as the
//! `rte_ring` peer's two lcores).

/// Pins the calling thread to `cpu`; `false` (and nothing changed) when the kernel refuses
/// (a CPU that is offline or outside this process's cpuset).
pub fn pin_current(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: an all-zero `cpu_set_t` is the empty set (a plain bit array).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu < CPU_SETSIZE`, the bound `CPU_SET` needs.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid `cpu_set_t` of the size passed; pid 0 is the calling thread.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0 }
}

/// Pins the calling thread to `cpu`, or says on stderr that the figure is unpinned.
pub fn pin_or_warn(cpu: usize, who: &str) {
    if !pin_current(cpu) {
        eprintln!("{who}: cannot pin to CPU {cpu}; this figure is from an unpinned thread");
    }
}
