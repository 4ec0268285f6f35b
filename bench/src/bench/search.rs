//! RFC 2544 §26.1-style throughput search: the highest offered rate at which every frame
//! comes back, by bisection on the offered rate.
//!
//! RFC 2544 asks for the fastest rate "at which the count of test frames transmitted by
//! the DUT is equal to the number of test frames sent to it". Here a trial passes when
//! every tagged frame came back exactly once. What the rig cannot offer is never charged
//! to the dataplane: a trial whose generator fell short of the asked rate by more than
//! 1 %, or whose sink dropped frames, is *rig-limited*; it lowers the highest rate the rig
//! can offer (the cap), its losses count for nothing, and when every frame came back it
//! only says that the dataplane does at least what was offered. The search ends when the
//! bracket [highest pass, lowest fail] is within `precision` (2 %) of its top, or when the
//! dataplane passed at the cap (then the result is the rig's limit, marked as such).

/// One trial's verdict, as the search sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Every frame back exactly once at the asked rate.
    Pass,
    /// Frames lost or duplicated at the asked rate; `delivered` frames/s came back.
    Fail { delivered: f64 },
    /// The rig could not offer the asked rate: it reached `achieved` frames/s, and every
    /// frame came back (`zero_loss`) or not.
    RigLimited { achieved: f64, zero_loss: bool },
}

/// How the search ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    /// The highest rate that passed (0 if none did).
    pub rate: f64,
    /// The lowest rate that failed, if any.
    pub fail: Option<f64>,
    /// The result is the rig's limit, not the dataplane's: it passed at the highest rate
    /// the rig could offer and no failure closes the bracket above it.
    pub rig_limited: bool,
    /// Trials run.
    pub trials: u32,
}

/// The search state.
///
/// Plain bisection from [0, cap] needs ~9 trials to reach 2 %. Two guesses shorten it
/// without changing what counts as a result (only trials decide): after the first
/// failure, try just under the rate that came back then (an overloaded dataplane
/// forwards about its capacity); after a pass at such a guess, try 2 % above it. Every
/// other step bisects.
#[derive(Debug, Clone)]
pub struct Search {
    lo: f64,
    hi: Option<f64>,
    cap: f64,
    precision: f64,
    floor: f64,
    trials: u32,
    max_trials: u32,
    hint: Option<f64>,
    hinted: bool,
    stepped: bool,
}

impl Search {
    /// Starts with `start` (an upper guess; the first trial runs there), stopping within
    /// `precision` (e.g. 0.02), giving up below `floor` frames/s and after `max_trials`.
    pub fn new(start: f64, precision: f64, floor: f64, max_trials: u32) -> Search {
        Search {
            lo: 0.0,
            hi: None,
            cap: start,
            precision,
            floor,
            trials: 0,
            max_trials,
            hint: None,
            hinted: false,
            stepped: false,
        }
    }

    fn bracketed(&self) -> bool {
        self.hi.is_some_and(|hi| hi - self.lo <= self.precision * hi || hi < self.floor)
    }

    fn at_cap(&self) -> bool {
        self.lo > 0.0 && self.lo >= self.cap * (1.0 - self.precision)
    }

    /// The next rate to try, or `None` when the search is over.
    pub fn next(&self) -> Option<f64> {
        if self.trials >= self.max_trials || self.bracketed() || self.at_cap() {
            return None;
        }
        if self.hi.is_none() && self.cap < self.floor {
            return None;
        }
        if let Some(h) = self.hint.filter(|&h| h < self.cap) {
            return Some(h);
        }
        match self.hi {
            Some(hi) if hi <= self.cap => Some((self.lo + hi) / 2.0),
            _ => Some(self.cap),
        }
    }

    /// Records the verdict of a trial at `rate`.
    pub fn record(&mut self, rate: f64, v: Verdict) {
        self.trials += 1;
        let from_hint = self.hint == Some(rate);
        self.hint = None;
        let inside = |s: &Search, h: f64| h > s.lo && s.hi.is_none_or(|hi| h < hi);
        match v {
            Verdict::Pass => {
                self.lo = self.lo.max(rate);
                if from_hint && !self.stepped {
                    self.stepped = true;
                    let h = rate * (1.0 + self.precision);
                    self.hint = inside(self, h).then_some(h);
                }
            }
            Verdict::Fail { delivered } => {
                self.hi = Some(self.hi.map_or(rate, |h| h.min(rate)));
                if !self.hinted {
                    self.hinted = true;
                    let h = delivered * (1.0 - self.precision / 2.0);
                    self.hint = inside(self, h).then_some(h);
                }
            }
            Verdict::RigLimited { achieved, zero_loss } => {
                // Just under what it reached, so that the next trial at the cap can be offered.
                self.cap = self.cap.min(achieved * (1.0 - self.precision / 2.0));
                // Everything back at what was offered: a lower bound (the result is then
                // the rig's limit and says so), never an upper one.
                if zero_loss {
                    self.lo = self.lo.max(achieved.min(self.hi.unwrap_or(f64::MAX)));
                }
            }
        }
    }

    /// The result so far.
    pub fn outcome(&self) -> Outcome {
        Outcome { rate: self.lo, fail: self.hi, rig_limited: self.at_cap() && !self.bracketed(), trials: self.trials }
    }
}

/// Runs a search against `trial` (which returns the verdict at a rate).
pub fn run(mut s: Search, mut trial: impl FnMut(f64) -> Verdict) -> Outcome {
    while let Some(rate) = s.next() {
        let v = trial(rate);
        s.record(rate, v);
    }
    s.outcome()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dataplane that forwards up to `capacity` without loss (and `delivers` frames/s
    /// when overloaded), behind a generator that reaches at most `top`.
    fn fake_with(capacity: f64, delivers: f64, top: f64) -> impl FnMut(f64) -> Verdict {
        move |rate| {
            if rate > top {
                Verdict::RigLimited { achieved: top, zero_loss: top <= capacity }
            } else if rate <= capacity {
                Verdict::Pass
            } else {
                Verdict::Fail { delivered: delivers.min(rate) }
            }
        }
    }

    fn fake(capacity: f64, top: f64) -> impl FnMut(f64) -> Verdict {
        fake_with(capacity, capacity, top)
    }

    fn check(o: &Outcome, capacity: f64) {
        assert!(o.rate <= capacity, "{capacity}: passed above the capacity: {o:?}");
        assert!(o.rate >= capacity * 0.98, "{capacity}: not within 2 %: {o:?}");
        let fail = o.fail.unwrap();
        assert!(fail > capacity && (fail - o.rate) <= 0.02 * fail, "{capacity}: {o:?}");
        assert!(!o.rig_limited, "{capacity}: {o:?}");
    }

    #[test]
    fn brackets_the_capacity_within_two_percent() {
        for capacity in [1_000.0, 123_456.0, 300_000.0, 612_345.0, 870_000.0] {
            let o = run(Search::new(2e6, 0.02, 100.0, 40), fake(capacity, 900_000.0));
            check(&o, capacity);
            assert!(o.trials <= 5, "{capacity}: {} trials", o.trials);
        }
    }

    #[test]
    fn a_dataplane_that_loses_below_what_it_delivers_is_bisected() {
        // Loses frames from 300k on but forwards 500k when overloaded: the first guess
        // fails and bisection finds 300k.
        for delivers in [500_000.0, 310_000.0, 250_000.0] {
            let o = run(Search::new(2e6, 0.02, 100.0, 40), fake_with(300_000.0, delivers, 900_000.0));
            check(&o, 300_000.0);
            assert!(o.trials <= 14, "{delivers}: {} trials", o.trials);
        }
    }

    #[test]
    fn a_dataplane_faster_than_the_generator_is_marked_rig_limited() {
        let o = run(Search::new(2e6, 0.02, 100.0, 40), fake(1.5e6, 900_000.0));
        assert!(o.rig_limited, "{o:?}");
        assert!(o.rate <= 900_000.0 && o.rate >= 900_000.0 * 0.97, "{o:?}");
        assert_eq!(o.fail, None);
        assert!(o.trials <= 3, "{o:?}");
        // Never counted: a capacity right at the generator's limit is still the rig's.
        let o = run(Search::new(2e6, 0.02, 100.0, 40), fake(895_000.0, 900_000.0));
        assert!(o.rate <= 895_000.0, "{o:?}");
    }

    #[test]
    fn nothing_passes() {
        let o = run(Search::new(1e6, 0.02, 1_000.0, 40), fake(0.0, 2e6));
        assert_eq!(o.rate, 0.0);
        assert!(o.fail.unwrap() < 1_000.0, "{o:?}");
        assert!(!o.rig_limited);
    }

    #[test]
    fn gives_up_after_max_trials() {
        let o = run(Search::new(1e6, 0.0, 0.0, 5), fake(333_333.0, 2e6));
        assert_eq!(o.trials, 5);
        assert!(o.rate <= 333_333.0);
    }

    #[test]
    fn a_noisy_rig_limit_mid_search_lowers_the_cap() {
        // The generator reaches 900k at first, then (another tenant) only 400k; the
        // dataplane would do 600k: the result is the rig's 400k, marked.
        let mut calls = 0;
        let o = run(Search::new(2e6, 0.02, 100.0, 40), |rate| {
            calls += 1;
            let top = if calls <= 2 { 900_000.0 } else { 400_000.0 };
            fake(600_000.0, top)(rate)
        });
        assert!(o.rig_limited && o.rate <= 400_000.0 && o.rate >= 380_000.0, "{o:?}");
    }
}
