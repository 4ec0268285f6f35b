//! Test-only knobs: how much work a test does under Miri (`cargo xtask test`, step "Miri"),
//! which interprets every step and checks every access, roughly a thousand times slower than
//! a debug build. Heavy tests (property tests, the 70 000-frame index wraparounds) run
//! reduced there — fewer cases, fewer frames — never skipped.

use proptest::test_runner::Config;

/// Whether the tests run under Miri.
pub(crate) const MIRI: bool = cfg!(miri);

/// `native` normally, `miri` under Miri.
pub(crate) const fn miri_or<T: Copy>(native: T, miri: T) -> T {
    if MIRI { miri } else { native }
}

/// A proptest configuration of `cases` cases (1 under Miri, which also keeps proptest away
/// from the regression files: Miri's isolation refuses file access).
pub(crate) fn proptest_config(cases: u32) -> Config {
    let mut c = Config::with_cases(miri_or(cases, 1));
    if MIRI {
        c.failure_persistence = None;
        c.max_shrink_iters = 0;
    }
    c
}
