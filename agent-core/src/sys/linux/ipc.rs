//! The control socket's platform side: a Unix socket only its owner can open, and who is
//! at the other end of a connection.

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The pid of the process at the other end of a connected Unix socket (`SO_PEERCRED`).
pub fn peer_pid(stream: &std::os::unix::net::UnixStream) -> Option<u32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which is that large.
    let rc = unsafe {
        libc::getsockopt(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len)
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// Binds a listening Unix socket at `path` that only its owner can open (0600): bound
/// under a umask of 177, so it is never briefly wider, then set to 0600.
pub fn bind_owner_only(path: &Path) -> io::Result<tokio::net::UnixListener> {
    let listener = super::fs::with_umask(0o177, || tokio::net::UnixListener::bind(path))?;
    super::fs::set_mode(path, 0o600)?;
    Ok(listener)
}
