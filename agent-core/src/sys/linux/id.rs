//! Who this process is.

/// The real user id.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions.
    unsafe { libc::getuid() }
}

/// The effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// Whether the process runs as root (effective uid 0).
pub fn is_root() -> bool {
    euid() == 0
}
