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

/// The account name of this process's real user from the password database.
pub fn account_name() -> Option<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: passwd is plain old data; zeroed is a valid (empty) value for getpwuid_r to fill.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call and buf outlives the read of pw_name.
    let rc = unsafe { libc::getpwuid_r(uid(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut found) };
    if rc != 0 || found.is_null() || pw.pw_name.is_null() {
        return None;
    }
    // SAFETY: getpwuid_r succeeded, so pw_name points at a NUL-terminated string in buf.
    let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
    Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}
