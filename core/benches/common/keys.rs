//! The 16-byte table keys of the table benches (`pna`, `peers`) and of `examples/tablecount`.

/// A 16-byte key (`ExactTable<2, _>`).
pub type Key = [u64; 2];

/// `n` keys from `seed` (splitmix64), exactly as `peer_keys` in `benches/peers/common.h`, so
/// that Cadence's and DPDK's tables hold the same keys.
pub fn keys(n: usize, seed: u64) -> Vec<Key> {
    let mut s = seed;
    let mut next = move || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    (0..n).map(|_| [next(), next()]).collect()
}
