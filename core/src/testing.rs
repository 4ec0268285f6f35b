//! Test-only knobs shared by `core`'s tests: how much work a test does under Miri.
//!
//! Miri interprets every step and checks every access, roughly a thousand times slower than
//! a debug build, so the heavy tests (property tests, long packet runs, large tables) run
//! reduced under `cfg(miri)` — fewer cases, fewer packets, smaller tables — never skipped:
//! each still walks the code it exists for (`cargo xtask test`, step "Miri").

use proptest::test_runner::Config;

pub(crate) use crate::miri_or;

/// Whether the tests run under Miri.
pub(crate) const MIRI: bool = cfg!(miri);

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
