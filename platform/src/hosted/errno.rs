//! `errno` values as a type: the number, its symbolic name and the C library's text, so
//! that an error line reads `EOPNOTSUPP (Operation not supported)`.

use core::fmt;

/// An `errno` value returned by a failed system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    /// The calling thread's `errno` right now (read straight after the failed call).
    pub fn last() -> Self {
        Self(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
    }

    /// The raw number.
    pub const fn raw(self) -> i32 {
        self.0
    }

    /// The symbolic name (`"EAGAIN"`), or `"E?"` for one this table does not know.
    pub const fn name(self) -> &'static str {
        match self.0 {
            libc::EPERM => "EPERM",
            libc::ENOENT => "ENOENT",
            libc::ESRCH => "ESRCH",
            libc::EINTR => "EINTR",
            libc::EIO => "EIO",
            libc::ENXIO => "ENXIO",
            libc::E2BIG => "E2BIG",
            libc::EBADF => "EBADF",
            libc::EAGAIN => "EAGAIN",
            libc::ENOMEM => "ENOMEM",
            libc::EACCES => "EACCES",
            libc::EFAULT => "EFAULT",
            libc::EBUSY => "EBUSY",
            libc::EEXIST => "EEXIST",
            libc::ENODEV => "ENODEV",
            libc::EINVAL => "EINVAL",
            libc::ENFILE => "ENFILE",
            libc::EMFILE => "EMFILE",
            libc::ENOTTY => "ENOTTY",
            libc::ENOSPC => "ENOSPC",
            libc::ERANGE => "ERANGE",
            libc::ENOSYS => "ENOSYS",
            libc::ENOTSOCK => "ENOTSOCK",
            libc::EMSGSIZE => "EMSGSIZE",
            libc::ENOPROTOOPT => "ENOPROTOOPT",
            libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
            libc::ESOCKTNOSUPPORT => "ESOCKTNOSUPPORT",
            libc::EOPNOTSUPP => "EOPNOTSUPP",
            libc::EAFNOSUPPORT => "EAFNOSUPPORT",
            libc::EADDRINUSE => "EADDRINUSE",
            libc::EADDRNOTAVAIL => "EADDRNOTAVAIL",
            libc::ENETDOWN => "ENETDOWN",
            libc::ENOBUFS => "ENOBUFS",
            libc::ENOTCONN => "ENOTCONN",
            libc::ETIMEDOUT => "ETIMEDOUT",
            _ => "E?",
        }
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // std's text is "<description> (os error N)"; keep the description only.
        let text = std::io::Error::from_raw_os_error(self.0).to_string();
        let desc = text.rsplit_once(" (os error").map_or(text.as_str(), |(d, _)| d);
        if self.name() == "E?" { write!(f, "errno {} ({desc})", self.0) } else { write!(f, "{} ({desc})", self.name()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_and_describes() {
        assert_eq!(Errno(libc::EOPNOTSUPP).to_string(), "EOPNOTSUPP (Operation not supported)");
        assert_eq!(Errno(libc::EPERM).to_string(), "EPERM (Operation not permitted)");
        assert!(Errno(4095).to_string().starts_with("errno 4095 ("));
    }
}
