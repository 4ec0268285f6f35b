//! The one pseudo-random generator of the workspace: xorshift64 (Marsaglia 2003).
//!
//! Used where a choice must be cheap and reproducible, never for anything secret: the
//! Metronome backup's random queue, the ACL example rule sets, the simulator's streams
//! (`cadence-sim`) and the host's traffic generators (`xtask`).

/// A tiny xorshift64 generator (Marsaglia 2003); not for crypto.
#[derive(Debug, Clone)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// A generator from `seed` (a zero seed is replaced, xorshift's state must not be 0).
    pub fn new(seed: u64) -> Self {
        // Spread small seeds (core ids) over the state with one splitmix64 step.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        Self { state: if z == 0 { 0x2545_F491_4F6C_DD1D } else { z } }
    }

    /// A generator whose state is `state` as given (no seed spreading), for callers that
    /// need the plain recurrence from a known start; a zero state is replaced.
    pub fn from_state(state: u64) -> Self {
        Self { state: if state == 0 { 0x2545_F491_4F6C_DD1D } else { state } }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// A value in `0..n` (multiply-shift; bias below 2^-32 for the small `n` used here);
    /// 0 when `n` is 0.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_stays_in_range_and_zero_is_zero() {
        let mut r = XorShift64::new(0);
        for n in [1usize, 2, 3, 7, 1000] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
        assert_eq!(r.below(0), 0);
    }

    #[test]
    fn from_state_is_the_plain_recurrence() {
        let mut r = XorShift64::from_state(1);
        let mut x = 1u64;
        for _ in 0..100 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            assert_eq!(r.next_u64(), x);
        }
        // A zero state would stay zero forever; it is replaced.
        assert_ne!(XorShift64::from_state(0).next_u64(), 0);
    }

    #[test]
    fn seeds_give_distinct_reproducible_streams() {
        let a: [u64; 4] = core::array::from_fn({
            let mut r = XorShift64::new(1);
            move |_| r.next_u64()
        });
        let b: [u64; 4] = core::array::from_fn({
            let mut r = XorShift64::new(1);
            move |_| r.next_u64()
        });
        let c: [u64; 4] = core::array::from_fn({
            let mut r = XorShift64::new(2);
            move |_| r.next_u64()
        });
        assert_eq!(a, b);
        assert_ne!(a, c);
    }
}
