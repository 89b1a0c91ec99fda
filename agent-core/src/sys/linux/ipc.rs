//! The control socket's platform side: a Unix socket only its owner can open, who is at
//! the other end of a connection, and the blocking client the CLI uses. POSIX but for the
//! client's peer pid: macOS's seam uses this file too (`sys/macos/mod.rs`).

use std::io;
use std::os::fd::AsRawFd;
use std::path::Path;

/// The agent's listening control socket.
pub type Listener = tokio::net::UnixListener;
/// One accepted connection (async).
pub type Connection = tokio::net::UnixStream;
/// A client's connection (blocking: the CLI, the tray).
pub type ClientStream = std::os::unix::net::UnixStream;

/// Who is at the other end of a connection: its user and, when it is in the agent's PID
/// namespace, its pid (`SO_PEERCRED`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub pid: Option<i32>,
}

/// Binds a listening Unix socket at `path` that only its owner can open (0600): bound
/// under a umask of 177, so it is never briefly wider, then set to 0600.
pub fn bind_owner_only(path: &Path) -> io::Result<Listener> {
    let listener = super::fs::with_umask(0o177, || tokio::net::UnixListener::bind(path))?;
    super::fs::set_mode(path, 0o600)?;
    Ok(listener)
}

/// The next connection.
pub async fn accept(listener: &Listener) -> io::Result<Connection> {
    listener.accept().await.map(|(stream, _)| stream)
}

/// The peer of an accepted connection.
pub fn peer(conn: &Connection) -> io::Result<Peer> {
    conn.peer_cred().map(|c| Peer { uid: c.uid(), pid: c.pid() })
}

/// How the channel at `path` is named to the owner: the socket's path.
pub fn endpoint(path: &Path) -> String {
    path.display().to_string()
}

/// Connects to the socket at `path`; `NotFound` or `ConnectionRefused` when no agent
/// listens there.
pub fn connect(path: &Path) -> io::Result<ClientStream> {
    ClientStream::connect(path)
}

/// The pid of the process at the other end of a client's connection (`SO_PEERCRED`).
#[cfg(target_os = "linux")]
pub fn peer_pid(stream: &ClientStream) -> Option<u32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which is that large.
    let rc = unsafe {
        libc::getsockopt(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len)
    };
    (rc == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// The pid of the process at the other end of a client's connection (`LOCAL_PEERPID`).
#[cfg(target_os = "macos")]
pub fn peer_pid(stream: &ClientStream) -> Option<u32> {
    let mut pid: libc::pid_t = 0;
    let mut len = std::mem::size_of::<libc::pid_t>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `pid`, which is that large.
    let rc = unsafe {
        libc::getsockopt(stream.as_raw_fd(), libc::SOL_LOCAL, libc::LOCAL_PEERPID, (&mut pid as *mut libc::pid_t).cast(), &mut len)
    };
    (rc == 0 && pid > 0).then_some(pid as u32)
}
