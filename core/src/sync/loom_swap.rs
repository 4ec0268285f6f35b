//! loom model of [`super::Swap`]: a worker's [`super::Reader`] against the control plane
//! publishing two versions and retiring the ones it replaced.

use alloc::sync::Arc;

use super::{Retired, Swap, loom_model, loom_others_first};

/// For every interleaving of one reader's two `get`s with two `publish`es (each followed by
/// a `collect`): the reader never goes back to an older value, never holds a value older
/// than the version it recorded (the value is stored before the version is bumped), ends on
/// the newest value once it saw the newest version, and every replaced version is freed by
/// the control plane once the reader let go of it.
#[test]
fn swap_loom_readers_never_go_back_and_retired_versions_are_freed() {
    loom_model(3, |others_first| {
        let swap = loom::sync::Arc::new(Swap::new(0u64));
        let s2 = loom::sync::Arc::clone(&swap);
        let reader = loom::thread::spawn(move || {
            let mut r = s2.reader();
            let mut last = *r.held();
            assert!(last >= r.version(), "value {last} older than version {}", r.version());
            for _ in 0..2 {
                let v = *r.get(&s2);
                assert!(v >= last, "went back from {last} to {v}");
                assert!(v >= r.version(), "value {v} older than version {}", r.version());
                last = v;
            }
            if r.version() == 2 {
                assert_eq!(*r.held(), 2, "saw the newest version but holds an older value");
            }
        });
        loom_others_first(others_first);
        let mut retired = Retired::default();
        // The value published as version v is v.
        for v in 1..=2u64 {
            retired.push(swap.publish(Arc::new(v)));
            retired.collect();
        }
        reader.join().unwrap();
        assert_eq!(retired.collect(), 0, "a replaced version outlived its last reader");
        assert_eq!(*swap.load(), 2);
    });
}
