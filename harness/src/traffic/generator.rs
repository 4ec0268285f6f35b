//! The traffic generator: which flow and which size comes next, and when.

use std::str::FromStr;
use std::time::{Duration, Instant};

use cadence_core::rand::XorShift64;

use anyhow::{Result, bail};
use serde::Serialize;

use super::frame::{MAX_FRAME, MIN_FRAME};

/// Frame size distribution (Ethernet frame without FCS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Sizes {
    /// Uniform in `min..=max`.
    Range { min: usize, max: usize },
    /// Simple IMIX 7:4:1 of 64/570/1518 B on the wire, i.e. 60/566/1514 here.
    Imix,
}

impl Default for Sizes {
    fn default() -> Self {
        Sizes::Range { min: MIN_FRAME, max: MAX_FRAME }
    }
}

impl FromStr for Sizes {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Sizes> {
        if s.eq_ignore_ascii_case("imix") {
            return Ok(Sizes::Imix);
        }
        let (a, b) = s.split_once('-').unwrap_or((s, s));
        let (min, max): (usize, usize) = (a.trim().parse()?, b.trim().parse()?);
        if min > max {
            bail!("sizes '{s}': MIN is larger than MAX");
        }
        if !(MIN_FRAME..=MAX_FRAME).contains(&min) || !(MIN_FRAME..=MAX_FRAME).contains(&max) {
            bail!("sizes '{s}': sizes are {MIN_FRAME}..={MAX_FRAME} bytes (frames without the 4-byte FCS)");
        }
        Ok(Sizes::Range { min, max })
    }
}

impl Sizes {
    /// Draws a size.
    pub fn draw(&self, rng: &mut XorShift64) -> usize {
        match *self {
            Sizes::Range { min, max } => min + (rng.next_u64() % (max - min + 1) as u64) as usize,
            Sizes::Imix => match rng.next_u64() % 12 {
                0..=6 => 60,
                7..=10 => 566,
                _ => 1514,
            },
        }
    }
}

/// Token-bucket pacer: `rate` frames per second, bursts of at most `burst`.
#[derive(Debug)]
pub struct Pacer {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Pacer {
    /// A pacer that starts with one token.
    pub fn new(rate_pps: u64, now: Instant) -> Pacer {
        let rate = rate_pps.max(1) as f64;
        Pacer {
            rate,
            // 10 ms worth of frames, at least 4: a sender whose loop takes a little longer
            // than one token's time still offers the rate (a burst of 1 lost the remainder
            // of every late token: 451 of 500 frames/s), and a long stall releases little.
            burst: (rate / 100.0).max(4.0),
            tokens: 1.0,
            last: now,
        }
    }

    /// How many frames may go now.
    pub fn take(&mut self, now: Instant) -> u64 {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst);
        let n = self.tokens.floor();
        self.tokens -= n;
        n as u64
    }

    /// How long until the next token.
    pub fn wait(&self) -> Duration {
        Duration::from_secs_f64(((1.0 - self.tokens) / self.rate).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_and_draw() -> Result<()> {
        assert_eq!("imix".parse::<Sizes>()?, Sizes::Imix);
        assert_eq!("60-1514".parse::<Sizes>()?, Sizes::Range { min: 60, max: 1514 });
        assert_eq!("128".parse::<Sizes>()?, Sizes::Range { min: 128, max: 128 });
        for bad in ["59-100", "100-60", "60-1515", "x", "1-"] {
            assert!(bad.parse::<Sizes>().is_err(), "{bad}");
        }
        let mut rng = XorShift64::new(1);
        let s = Sizes::Range { min: 60, max: 70 };
        let mut seen = [false; 11];
        for _ in 0..1000 {
            let n = s.draw(&mut rng);
            assert!((60..=70).contains(&n));
            seen[n - 60] = true;
        }
        assert!(seen.iter().all(|&b| b));
        let imix: Vec<usize> = (0..1200).map(|_| Sizes::Imix.draw(&mut rng)).collect();
        let small = imix.iter().filter(|&&n| n == 60).count();
        assert!((500..900).contains(&small), "{small}");
        Ok(())
    }

    #[test]
    fn pacer_conserves_rate() {
        // Virtual time: 1000 pps over 2 s in 1 ms steps gives ~2000 frames.
        let t0 = Instant::now();
        let mut p = Pacer::new(1000, t0);
        let mut sent = 0;
        for ms in 1..=2000 {
            sent += p.take(t0 + Duration::from_millis(ms));
        }
        assert!((1999..=2001).contains(&sent), "{sent}");
        // A sender whose every turn comes 10 % late (2.2 ms for a 2 ms token at 500 pps)
        // still sends at the rate.
        let mut p = Pacer::new(500, t0);
        let mut sent = 0;
        for turn in 1..=1000u64 {
            sent += p.take(t0 + Duration::from_micros(2_200 * turn));
        }
        assert!((1099..=1101).contains(&sent), "2.2 s at 500 pps: {sent}");
        // A long pause does not release more than a burst (10 ms, at least 4).
        let mut p = Pacer::new(1000, t0);
        assert_eq!(p.take(t0 + Duration::from_secs(10)), 10);
        let mut p = Pacer::new(100, t0);
        assert_eq!(p.take(t0 + Duration::from_secs(10)), 4);
    }
}
