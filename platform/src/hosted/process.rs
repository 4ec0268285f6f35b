//! The process itself: the boot nonce from the kernel's random pool, the stop signals, and
//! the privileges set-up needed and the run does not.

use cadence_core::control::siphash24;

/// 64 fresh bits for this run's control-frame nonce (`getrandom(2)`), and their source
/// (`getrandom`; `clock` on a kernel without it: the wall clock and the process id).
pub fn boot_nonce() -> (u64, &'static str) {
    let mut b = [0u8; 8];
    // SAFETY: getrandom(2) writes at most `b.len()` bytes into `b`, which this frame owns.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n == b.len() as isize {
        return (u64::from_le_bytes(b), "getrandom");
    }
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mut input = [0u8; 20];
    input[..16].copy_from_slice(&t.to_le_bytes());
    input[16..].copy_from_slice(&std::process::id().to_le_bytes());
    (siphash24(b"cadence/nonce/v1", &input), "clock")
}

#[cfg(test)]
mod tests {
    #[test]
    fn two_runs_draw_different_nonces() {
        let (a, src) = super::boot_nonce();
        let (b, _) = super::boot_nonce();
        assert_ne!(a, b);
        assert_eq!(src, "getrandom");
    }
}

// ---------------------------------------------------------------------------------------
// Stop signals
// ---------------------------------------------------------------------------------------

use core::sync::atomic::{AtomicI32, Ordering};

/// The stop signal received (`SIGINT`, `SIGTERM`), 0 while none.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop_signal(sig: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP_SIGNAL.store(sig, Ordering::Release);
}

/// Makes `SIGINT` and `SIGTERM` request a clean stop ([`stop_requested`]) instead of killing
/// the process: the run winds down and prints `@summary`. A second signal of either kind
/// after the first still only asks again (the run's own deadlines bound the wind-down).
pub fn catch_stop_signals() -> Result<(), super::Errno> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler is
        // an `extern "C" fn(c_int)` that only stores to an atomic (async-signal-safe), and
        // `sa` lives until sigaction returns.
        let r = unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, core::ptr::null_mut())
        };
        if r != 0 {
            return Err(super::Errno::last());
        }
    }
    Ok(())
}

/// The stop signal received so far, by name (`SIGINT`, `SIGTERM`).
pub fn stop_requested() -> Option<&'static str> {
    match STOP_SIGNAL.load(Ordering::Acquire) {
        0 => None,
        libc::SIGINT => Some("SIGINT"),
        libc::SIGTERM => Some("SIGTERM"),
        _ => Some("a signal"),
    }
}

// ---------------------------------------------------------------------------------------
// Privileges
// ---------------------------------------------------------------------------------------

/// What [`drop_privileges`] left the process with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    /// The user and group now in effect.
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
    /// The user's name.
    pub user: String,
}

/// Gives up what set-up needed (sockets, XDP and tcx programs, packet memory are in hand):
/// as root, becomes `user` (`setgroups(0)`, `setgid`, `setuid`, which also clears every
/// capability); as another user, drops every capability it holds (file capabilities such
/// as `CAP_NET_RAW`, `CAP_BPF`). Then `PR_SET_NO_NEW_PRIVS`, so nothing it could execute
/// would gain them back. `user = "root"` as root keeps everything (`Ok(None)`).
pub fn drop_privileges(user: &str) -> Result<Option<Dropped>, String> {
    // SAFETY: geteuid takes no arguments and cannot fail.
    let euid = unsafe { libc::geteuid() };
    if euid == 0 && user == "root" {
        return Ok(None);
    }
    if euid == 0 {
        let (uid, gid) = lookup_user(user)?;
        // SAFETY: setgroups with a zero-length list reads no memory; setgid/setuid take
        // plain ids. glibc applies each to every thread of the process.
        unsafe {
            if libc::setgroups(0, core::ptr::null()) != 0 {
                return Err(format!("setgroups(0): {}", super::Errno::last()));
            }
            if libc::setgid(gid) != 0 {
                return Err(format!("setgid({gid}): {}", super::Errno::last()));
            }
            if libc::setuid(uid) != 0 {
                return Err(format!("setuid({uid}): {}", super::Errno::last()));
            }
        }
    } else {
        clear_capabilities()?;
    }
    // SAFETY: prctl with PR_SET_NO_NEW_PRIVS takes integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!("prctl(PR_SET_NO_NEW_PRIVS): {}", super::Errno::last()));
    }
    // SAFETY: getuid/getgid take no arguments and cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    if euid == 0 && uid == 0 {
        return Err("still uid 0 after setuid".into());
    }
    Ok(Some(Dropped { uid, gid, user: if euid == 0 { user.to_string() } else { format!("uid {uid}") } }))
}

/// `user`'s uid and gid (`getpwnam_r`).
fn lookup_user(user: &str) -> Result<(u32, u32), String> {
    let name = std::ffi::CString::new(user).map_err(|_| format!("user '{user}': not a name"))?;
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: a zeroed passwd is a valid out-value; `name` is NUL-terminated, `buf` is
    // writable for its length, and `found` receives either null or a pointer to `pw`.
    let (r, found, pw) = unsafe {
        let mut pw: libc::passwd = core::mem::zeroed();
        let mut found: *mut libc::passwd = core::ptr::null_mut();
        let r = libc::getpwnam_r(name.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found);
        (r, found, pw)
    };
    if r != 0 || found.is_null() {
        return Err(format!("user '{user}': no such user (give --user with an existing one, or --user root)"));
    }
    Ok((pw.pw_uid, pw.pw_gid))
}

/// Empties the effective, permitted and inheritable capability sets (`capset`, version 3).
fn clear_capabilities() -> Result<(), String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut h = Header { version: VERSION_3, pid: 0 };
    let d = [Data { effective: 0, permitted: 0, inheritable: 0 }; 2];
    // SAFETY: capset(2) reads a version-3 header and two data structs, both valid for the
    // call; dropping capabilities is always allowed.
    let r = unsafe { libc::syscall(libc::SYS_capset, &raw mut h, d.as_ptr()) };
    if r != 0 {
        return Err(format!("capset: {}", super::Errno::last()));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Fencing a worker thread
// ---------------------------------------------------------------------------------------

use core::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Once;

/// Worker slots that can be fenced (the forwarding run's limit on workers, plus the watchdog).
pub const FENCE_SLOTS: usize = 65;

/// Per slot: the registered thread (`pthread_t`; 0: none), and whether it stopped for good.
static THREADS: [AtomicU64; FENCE_SLOTS] = [const { AtomicU64::new(0) }; FENCE_SLOTS];
static FENCED: [AtomicBool; FENCE_SLOTS] = [const { AtomicBool::new(false) }; FENCE_SLOTS];

std::thread_local! {
    /// The calling thread's slot (`usize::MAX`: none), read by the fence handler.
    static SLOT: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
}

/// The signal that fences a worker thread.
const FENCE_SIGNAL: libc::c_int = libc::SIGUSR2;

extern "C" fn on_fence(_sig: libc::c_int) {
    // Async-signal-safe: a const-initialized thread-local without destructor (a plain TLS
    // read), one atomic store, then pause(2) for ever. The thread never returns to what it
    // was doing.
    let slot = SLOT.with(core::cell::Cell::get);
    if let Some(f) = FENCED.get(slot) {
        f.store(true, Ordering::Release);
    }
    loop {
        // SAFETY: pause(2) takes no arguments; it returns only after another handler ran.
        unsafe { libc::pause() };
    }
}

/// Registers the calling thread as worker slot `slot`, so that [`fence`] can stop it (call it
/// on the worker's own thread, before its first round). Installs the fence signal's handler
/// the first time.
pub fn register_worker_thread(slot: usize) {
    static HANDLER: Once = Once::new();
    HANDLER.call_once(|| {
        // SAFETY: as in `catch_stop_signals`: a zeroed sigaction with the handler set; the
        // handler touches only async-signal-safe state (see `on_fence`).
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_fence as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(FENCE_SIGNAL, &sa, core::ptr::null_mut());
        }
    });
    let Some(t) = THREADS.get(slot) else { return };
    SLOT.with(|s| s.set(slot));
    // SAFETY: pthread_self has no preconditions.
    t.store(unsafe { libc::pthread_self() } as u64, Ordering::Release);
}

/// Stops worker thread `slot` for good: sends it the fence signal, whose handler
/// acknowledges and never returns, and waits at most `timeout` for the acknowledgement.
/// The proof that it stopped, or `None` (no such thread registered, or no acknowledgement).
pub fn fence(slot: usize, timeout: std::time::Duration) -> Option<cadence_core::sync::Fenced> {
    let tid = THREADS.get(slot)?.load(Ordering::Acquire);
    let fenced = FENCED.get(slot)?;
    if tid == 0 {
        return None;
    }
    if !fenced.load(Ordering::Acquire) {
        // SAFETY: `tid` is a thread of this process registered by itself; a worker thread
        // never exits while the run lasts (the run ends the process), so the id is live.
        if unsafe { libc::pthread_kill(tid as libc::pthread_t, FENCE_SIGNAL) } != 0 {
            return None;
        }
    }
    let end = std::time::Instant::now() + timeout;
    while !fenced.load(Ordering::Acquire) {
        if std::time::Instant::now() >= end {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
    let holder = cadence_core::sync::Holder::of(u32::try_from(slot).ok()?);
    // SAFETY: the thread acknowledged from `on_fence`, which never returns: it runs no
    // further instruction of its own, and its stores before the acknowledgement are visible
    // here (Release there, Acquire here).
    Some(unsafe { cadence_core::sync::Fenced::new(holder) })
}
