//! The machine's processors.

/// The logical CPUs online (not this process's share of them); 0 if unknown.
pub fn online() -> usize {
    // SAFETY: sysconf has no preconditions.
    usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap_or(0)
}
