//! The atomics every concurrent structure of `core` is built from: `loom`'s under
//! `--cfg loom`, so that the model checker sees every access, `core`'s otherwise.
//!
//! Structures shared between cores (`pna` tables and their event ring, the NAT port pool,
//! the Accounting export ring, the Maglev tables, the URL filter's slab leases, `Swap`, NetBlaze's hand-off rings) import their
//! atomics from here rather than from `core::sync::atomic`; that is what lets each of them be
//! model-checked (`cargo xtask test`, step "loom"; README "Tests"). Nothing here is `unsafe`.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{
    AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering, fence,
};

/// A pause inside a bounded retry loop. Under loom it yields, so that the model checker
/// runs the thread that the loop waits for instead of reporting a livelock.
#[inline]
pub(crate) fn spin_hint() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    core::hint::spin_loop();
}

/// `N` zeroed atomic words. With `core`'s atomics an array-repeat of a `const` (one step in
/// a debug build, and under Miri, instead of `N` calls through `array::from_fn`); loom's
/// atomics have no `const` constructor.
#[inline]
pub(crate) fn zeroed<const N: usize>() -> [AtomicU64; N] {
    #[cfg(not(loom))]
    return [const { AtomicU64::new(0) }; N];
    #[cfg(loom)]
    return core::array::from_fn(|_| AtomicU64::new(0));
}

/// Retry bound of the lock-free rings: large on hardware, small under loom (every retry is
/// a branch the model checker must explore).
pub(crate) const RACE_LIMIT: u32 = if cfg!(loom) { 4 } else { 1 << 12 };
