//! Reserving 2 MiB hugetlbfs pages for the 2 MiB runs, and giving them back.
//!
//! No hugetlbfs mount is needed: DPDK's EAL runs `--in-memory` (it maps hugepages through
//! `memfd_create(MFD_HUGETLB)`) and Cadence's bench maps them with `MAP_HUGETLB`; both draw on
//! the pool that `nr_hugepages` sizes.

use std::path::Path;

/// The pool's size knob.
pub const NR: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
/// Its free count.
pub const FREE: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages";
/// Pages the largest run needs free: the DPDK table programs map `-m 1024` (512 pages); the
/// Cadence 1M run needs ~300 MiB; a margin on top.
pub const NEEDED: u64 = 640;

fn read(p: &str) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// How many pages the pool must grow by to have `needed` free.
pub fn shortfall(free: u64, needed: u64) -> u64 {
    needed.saturating_sub(free)
}

/// A reservation; dropping it sets `nr_hugepages` back to what it was.
#[derive(Debug)]
pub struct Reservation {
    before: Option<u64>,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(n) = self.before {
            if std::fs::write(NR, n.to_string()).is_ok() {
                eprintln!("xtask peers: hugepages released (nr_hugepages back to {n})");
            } else {
                eprintln!("xtask peers: could not set {NR} back to {n}; do it by hand");
            }
        }
    }
}

/// Makes sure [`NEEDED`] pages are free, growing the pool as root when needed. `Err` says why
/// the machine cannot give them (the 2 MiB runs are then skipped and the report says so).
pub fn reserve() -> Result<Reservation, String> {
    if !Path::new(NR).exists() {
        return Err(format!("{NR} does not exist: this kernel has no 2 MiB hugetlbfs pages"));
    }
    let (nr, free) = (read(NR).unwrap_or(0), read(FREE).unwrap_or(0));
    let more = shortfall(free, NEEDED);
    if more == 0 {
        return Ok(Reservation { before: None });
    }
    if let Err(e) = std::fs::write(NR, (nr + more).to_string()) {
        return Err(format!(
            "need {NEEDED} free 2 MiB pages, {free} are free, and writing {NR} failed: {e} (not root?)"
        ));
    }
    let got = read(FREE).unwrap_or(0);
    let r = Reservation { before: Some(nr) };
    if got < NEEDED {
        // `r` drops here and gives back what was obtained.
        return Err(format!(
            "asked the kernel for {} 2 MiB pages, it gave {} (free: {got} of the {NEEDED} needed; memory too fragmented or too small)",
            nr + more,
            read(NR).unwrap_or(0)
        ));
    }
    eprintln!("xtask peers: reserved 2 MiB pages: nr_hugepages {nr} -> {}", nr + more);
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortfalls() {
        assert_eq!(shortfall(0, NEEDED), NEEDED);
        assert_eq!(shortfall(100, 640), 540);
        assert_eq!(shortfall(700, 640), 0);
    }
}
