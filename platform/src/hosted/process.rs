//! The process itself: the boot nonce from the kernel's random pool.

use cadence_core::control::siphash24;

/// 64 fresh bits for this run's control-frame nonce (`getrandom(2)`), and their source
/// (`getrandom`; `clock` on a kernel without it: the wall clock and the process id).
pub fn boot_nonce() -> (u64, &'static str) {
    let mut b = [0u8; 8];
    // SAFETY: getrandom(2) writes at most `b.len()` bytes into `b`, which this frame owns.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == b.len() as isize {
        return (u64::from_le_bytes(b), "getrandom");
    }
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut input = [0u8; 20];
    input[..16].copy_from_slice(&t.to_le_bytes());
    input[16..].copy_from_slice(&std::process::id().to_le_bytes());
    (siphash24(b"cadence/nonce/v1", &input), "clock")
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_runs_draw_different_nonces() {
        let (a, src) = super::boot_nonce();
        let (b, _) = super::boot_nonce();
        assert_ne!(a, b);
        assert_eq!(src, "getrandom");
    }
}
