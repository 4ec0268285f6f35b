//! Ctrl-C for runs that must clean up after themselves (`cargo xtask run --rack`): after
//! [`catch`], SIGINT only sets a flag ([`requested`]) that the run's waits look at, so the run
//! returns an error and its guards' `Drop`s stop what it started (the daemons, namespaces and
//! dataplanes). The children in the terminal's process group get the same SIGINT themselves
//! (a hosted dataplane prints `@summary` and exits).

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    REQUESTED.store(true, Ordering::Relaxed);
}

/// Installs the SIGINT handler.
pub fn catch() {
    // SAFETY: `on_sigint` is an `extern "C" fn(c_int)` that only stores to an atomic, which is
    // async-signal-safe; `signal` replaces SIGINT's disposition for this process only.
    unsafe {
        libc::signal(libc::SIGINT, on_sigint as *const () as libc::sighandler_t);
    }
}

/// Whether Ctrl-C was pressed since [`catch`].
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}
