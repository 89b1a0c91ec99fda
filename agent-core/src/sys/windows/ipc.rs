//! The control channel's Windows side: a named pipe (`\\.\pipe\lull…`, named after the
//! control path) whose access control list admits the current user only, remote clients
//! refused; the client's pid from `GetNamedPipeClientProcessId`; the blocking client the
//! CLI uses, with its read timeout kept by polling `PeekNamedPipe`.
//!
//! Windows has no uid: the pipe's access control list is what keeps other users out, so
//! a connected peer is reported as this user ([`super::id::uid`]).

use super::security::Descriptor;
use std::io;
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::windows::named_pipe::{NamedPipeServer, ServerOptions};
use windows_sys::Win32::Foundation::ERROR_PIPE_BUSY;
use windows_sys::Win32::Security::SECURITY_ATTRIBUTES;
use windows_sys::Win32::System::Pipes::{GetNamedPipeClientProcessId, GetNamedPipeServerProcessId, PeekNamedPipe};

/// The agent's listening pipe: the instance waiting for the next client.
pub struct Listener {
    name: String,
    next: tokio::sync::Mutex<NamedPipeServer>,
}

/// One accepted connection (async).
pub struct Connection(NamedPipeServer);

/// A client's connection (blocking: the CLI, the tray).
pub struct ClientStream {
    pipe: std::fs::File,
    read_timeout: std::sync::Mutex<Option<Duration>>,
}

/// Who is at the other end of a connection: this user (see the module doc) and its pid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peer {
    pub uid: u32,
    pub pid: Option<i32>,
}

/// The pipe's name for the control path `path`: the path with its backslashes (which a
/// pipe name may not hold) made slashes.
pub fn pipe_name(path: &Path) -> String {
    format!(r"\\.\pipe\lull{}{}", if path.is_absolute() { "" } else { "/" }, path.display().to_string().replace('\\', "/"))
}

/// How the channel at `path` is named to the owner: its pipe's name.
pub fn endpoint(path: &Path) -> String {
    pipe_name(path)
}

/// A security descriptor whose access control list grants the current user all rights
/// and no one else anything (protected: nothing inherited).
fn owner_only_descriptor() -> io::Result<Descriptor> {
    Descriptor::from_sddl("D:P(A;;GA;;;{user})")
}

/// One more instance of the pipe `name`, owner-only; `first` refuses when the pipe
/// exists already (another agent, or another user's squatter).
fn create_instance(name: &str, first: bool) -> io::Result<NamedPipeServer> {
    let sd = owner_only_descriptor()?;
    let mut attrs = sd.attributes();
    let mut opts = ServerOptions::new();
    opts.first_pipe_instance(first).reject_remote_clients(true);
    // SAFETY: attrs and the descriptor it points to outlive the call.
    unsafe { opts.create_with_security_attributes_raw(name, (&mut attrs as *mut SECURITY_ATTRIBUTES).cast()) }
}

/// Creates the pipe for `path`, which only its owner can open. `AddrInUse` when the pipe
/// exists already.
pub fn bind_owner_only(path: &Path) -> io::Result<Listener> {
    let name = pipe_name(path);
    let first = create_instance(&name, true).map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied => io::Error::new(io::ErrorKind::AddrInUse, format!("the pipe {name} exists already: {e}")),
        _ => e,
    })?;
    Ok(Listener { name, next: tokio::sync::Mutex::new(first) })
}

/// The next connection; a fresh instance then waits for the one after.
pub async fn accept(listener: &Listener) -> io::Result<Connection> {
    let mut next = listener.next.lock().await;
    next.connect().await?;
    let fresh = create_instance(&listener.name, false)?;
    Ok(Connection(std::mem::replace(&mut *next, fresh)))
}

/// The peer of an accepted connection: its pid from `GetNamedPipeClientProcessId`.
pub fn peer(conn: &Connection) -> io::Result<Peer> {
    let mut pid = 0u32;
    // SAFETY: a live pipe handle and a valid out-pointer.
    if unsafe { GetNamedPipeClientProcessId(conn.0.as_raw_handle(), &mut pid) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Peer { uid: super::id::uid(), pid: i32::try_from(pid).ok().filter(|p| *p > 0) })
}

/// Connects to the pipe for `path`; `NotFound` when no agent listens there. A pipe whose
/// instances are all busy is tried again for up to a second.
pub fn connect(path: &Path) -> io::Result<ClientStream> {
    let name = pipe_name(path);
    let until = Instant::now() + Duration::from_secs(1);
    loop {
        match std::fs::OpenOptions::new().read(true).write(true).open(&name) {
            Ok(pipe) => return Ok(ClientStream { pipe, read_timeout: std::sync::Mutex::new(None) }),
            Err(e) if e.raw_os_error() == Some(ERROR_PIPE_BUSY as i32) && Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The pid of the agent at the other end of a client's connection.
pub fn peer_pid(stream: &ClientStream) -> Option<u32> {
    let mut pid = 0u32;
    // SAFETY: a live pipe handle and a valid out-pointer.
    let ok = unsafe { GetNamedPipeServerProcessId(stream.pipe.as_raw_handle(), &mut pid) };
    (ok != 0 && pid > 0).then_some(pid)
}

impl ClientStream {
    /// How long a read waits for the agent's first byte (`None`: for ever).
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        *self.read_timeout.lock().unwrap_or_else(|p| p.into_inner()) = t;
        Ok(())
    }

    /// Waits until the pipe holds something to read (or is broken: the read then says
    /// so), or `TimedOut` after the read timeout.
    fn wait_readable(&self) -> io::Result<()> {
        let Some(timeout) = *self.read_timeout.lock().unwrap_or_else(|p| p.into_inner()) else { return Ok(()) };
        let until = Instant::now() + timeout;
        loop {
            let mut available = 0u32;
            // SAFETY: a live pipe handle; only the count is asked for.
            let ok = unsafe {
                PeekNamedPipe(
                    self.pipe.as_raw_handle(),
                    std::ptr::null_mut(),
                    0,
                    std::ptr::null_mut(),
                    &mut available,
                    std::ptr::null_mut(),
                )
            };
            if ok == 0 || available > 0 {
                return Ok(());
            }
            if Instant::now() >= until {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "the agent did not answer in time"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl io::Read for &ClientStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.wait_readable()?;
        match (&self.pipe).read(buf) {
            // The agent closed its end: the end of the answer.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(0),
            r => r,
        }
    }
}

impl io::Write for ClientStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pipe.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.pipe.flush()
    }
}

impl tokio::io::AsyncRead for Connection {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut tokio::io::ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Connection {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
