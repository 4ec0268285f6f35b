//! `core::p4::exec` allocates nothing per packet: a counting global allocator watches every
//! spec of the corpus that loads run 1 000 frames (after one warm-up frame) with empty
//! tables; any allocation or deallocation on the test's thread while armed is a failure.
//! (The learner path allocates only inside a `Tables` implementation, which is the table's
//! business, not the executor's.)

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use cadence_core::p4::{self, exec::State};

struct Counting;

static CALLS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if ARMED.try_with(Cell::get).unwrap_or(false) {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: every call forwards to `System` with the caller's arguments, unchanged; counting
// touches only an atomic and a thread-local flag (no allocation).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: the caller's contract for `GlobalAlloc::alloc` holds for `System`.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count();
        // SAFETY: `ptr` came from `System` with this `layout` (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        count();
        // SAFETY: as `dealloc`, and the caller's contract for `realloc` holds for `System`.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn the_executor_does_not_allocate_per_packet() {
    let mut frame = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    frame.extend_from_slice(&[0x45, 0, 0, 36, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    frame.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0, 16, 0, 0]);
    frame.extend_from_slice(&[0; 64]);
    let dir = format!("{}/tests/p4", env!("CARGO_MANIFEST_DIR"));
    let mut runs = 0;
    for sub in ["dpdk", "p4c"] {
        let mut names: Vec<_> = std::fs::read_dir(format!("{dir}/{sub}"))
            .expect("corpus")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "spec"))
            .collect();
        names.sort();
        for path in names {
            let Ok(p) = p4::load(&std::fs::read_to_string(&path).expect("spec")) else { continue };
            let mut st = State::new(&p);
            let mut out = [0u8; 1024];
            let mut f = frame.clone();
            let _ = st.run(&p, &f, 0, &mut out);
            ARMED.with(|a| a.set(true));
            for i in 0..1000u32 {
                f[30..34].copy_from_slice(&i.to_be_bytes());
                let _ = st.run(&p, &f, u64::from(i & 3), &mut out);
            }
            ARMED.with(|a| a.set(false));
            let n = CALLS.swap(0, Ordering::Relaxed);
            assert_eq!(n, 0, "{}: {n} allocator calls over 1 000 packets", path.display());
            runs += 1;
        }
    }
    assert_eq!(runs, 49);
}
