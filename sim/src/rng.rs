//! Random numbers for the simulator: xorshift64* streams and the few distributions it needs.

use cadence_core::rand::XorShift64;

/// One independent random stream (xorshift64 state, `*` output scrambling for good low bits).
#[derive(Debug, Clone)]
pub struct Rng(XorShift64);

impl Rng {
    /// A stream for `(seed, stream)`: different streams of one seed are unrelated.
    pub fn new(seed: u64, stream: u64) -> Self {
        Self(XorShift64::new(seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93)))
    }

    /// 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64().wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in the open interval (0, 1).
    pub fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.uniform().ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_are_right() {
        let mut r = Rng::new(1, 2);
        let n = 100_000;
        let (mut u, mut e) = (0.0, 0.0);
        for _ in 0..n {
            let x = r.uniform();
            assert!(x > 0.0 && x < 1.0);
            u += x;
            e += r.exp(3.0);
        }
        assert!((u / n as f64 - 0.5).abs() < 0.01);
        assert!((e / n as f64 - 3.0).abs() < 0.05);
    }
}
