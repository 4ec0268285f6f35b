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
