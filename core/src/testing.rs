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

/// A proptest configuration of `cases` cases, or of `PROPTEST_CASES` when that asks for more
/// (a long run raises every test's count; it never lowers one); 1 under Miri, which also
/// keeps proptest away from the regression files: Miri's isolation refuses file access.
pub(crate) fn proptest_config(cases: u32) -> Config {
    let env = if MIRI { None } else { std::env::var("PROPTEST_CASES").ok() };
    let mut c = Config::with_cases(miri_or(cases_with(cases, env.as_deref()), 1));
    if MIRI {
        c.failure_persistence = None;
        c.max_shrink_iters = 0;
    }
    c
}

/// A test's own count `cases`, raised to `PROPTEST_CASES` (`env`) when that is a larger number.
fn cases_with(cases: u32, env: Option<&str>) -> u32 {
    cases.max(env.and_then(|v| v.trim().parse().ok()).unwrap_or(0))
}

#[cfg(test)]
mod env_tests {
    /// The property tests' counts are floors: `PROPTEST_CASES` can raise them, never lower them.
    #[test]
    fn proptest_cases_from_the_environment_raise_a_tests_count_and_never_lower_it() {
        assert_eq!(super::cases_with(6, Some("5000")), 5000);
        assert_eq!(super::cases_with(256, Some("16")), 256);
        assert_eq!(super::cases_with(24, Some(" 100 ")), 100);
        assert_eq!(super::cases_with(24, Some("lots")), 24);
        assert_eq!(super::cases_with(24, None), 24);
    }
}
