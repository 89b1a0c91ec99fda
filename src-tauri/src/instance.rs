//! One tray app per agent, and starting it again brings its window back. The running
//! `lull-tray` listens on a private socket beside the agent's control socket
//! (`agent.sock` → `agent-tray.sock`: mode 0600, in the control socket's 0700 directory;
//! on Windows the named pipe for that path, which admits the current user only, made
//! as the agent's control pipe is: `agent_core::sys::ipc`).
//! A second `lull-tray` (the owner starting Lull again from the applications menu, say
//! after closing the window that stands in for a missing tray icon) first asks there to
//! show a window and exits, rather than failing on the agent's data-directory lock.
//!
//! The protocol is one line each way: the window's name (`status`, `settings`), then `ok`
//! or `error: why`. Only the owner's own processes outside any guest sandbox are heard
//! (the control socket's `refusal`: same user, same user and PID namespaces), and all
//! they can ask for is a window on the owner's screen.

use crate::which::Which;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
#[cfg(target_os = "linux")]
use {
    agent_core::control::{refusal, PeerRules},
    std::os::unix::net::{UnixListener, UnixStream},
};

/// The tray's socket for the agent whose control socket is `agent_socket`.
pub fn socket_path(agent_socket: &Path) -> PathBuf {
    let stem = agent_socket.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "agent".into());
    agent_socket.with_file_name(format!("{stem}-tray.sock"))
}

/// Asks a running tray app to show `which`: `Ok(true)` once it has, `Ok(false)` when no
/// tray app listens (start one), `Err` when one answered but could not.
#[cfg(target_os = "linux")]
pub fn ask_to_show(socket: &Path, which: Which) -> Result<bool, String> {
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused) => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", socket.display())),
    };
    let answer = (|| {
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        writeln!(stream, "{}", which.label())?;
        let mut line = String::new();
        BufReader::new(stream.take(1024)).read_line(&mut line)?;
        Ok::<_, std::io::Error>(line)
    })()
    .map_err(|e| format!("the running Lull on {} did not answer: {e}", socket.display()))?;
    match answer.trim() {
        "ok" => Ok(true),
        other => Err(other.strip_prefix("error: ").unwrap_or(other).to_string()),
    }
}

/// The tray's socket while it is served; dropping it removes the socket file (the
/// serving thread ends with the process).
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub struct Listening {
    path: PathBuf,
}

#[cfg(target_os = "linux")]
impl Drop for Listening {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the tray's socket (replacing one left by a tray app that died: the caller holds
/// the agent's lock, so no live one can be there) and serves it on a thread, calling
/// `show` for each request from an allowed peer.
#[cfg(target_os = "linux")]
pub fn listen(socket: &Path, show: impl Fn(Which) -> Result<(), String> + Send + 'static) -> std::io::Result<Listening> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Ok(meta) = std::fs::symlink_metadata(socket) {
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!("{} is in the way and not a socket", socket.display()),
            ));
        }
        std::fs::remove_file(socket)?;
    }
    // The process umask (077, `owner_only_umask`) makes it owner-only from the start.
    let listener = UnixListener::bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))?;
    std::thread::Builder::new().name("tray-instance".into()).spawn(move || {
        for stream in listener.incoming() {
            match stream {
                Ok(s) => serve(s, &show),
                Err(e) => tracing::warn!("the tray's socket: {e}"),
            }
        }
    })?;
    Ok(Listening { path: socket.to_path_buf() })
}

/// Answers one connection.
#[cfg(target_os = "linux")]
fn serve(mut stream: UnixStream, show: &dyn Fn(Which) -> Result<(), String>) {
    let refused = match peer(&stream) {
        Ok((uid, pid)) => refusal(uid, pid, &PeerRules::default()),
        Err(why) => Some(why),
    };
    let answer = match refused {
        Some(why) => {
            tracing::warn!("the tray's socket refused {why}");
            format!("error: refused: {why}")
        }
        None => {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let mut line = String::new();
            let _ = BufReader::new((&stream).take(64)).read_line(&mut line);
            match Which::parse(line.trim()) {
                Some(w) => {
                    tracing::info!("asked by another start of Lull to show the {} window", w.label());
                    show(w).map_or_else(|e| format!("error: {e}"), |()| "ok".into())
                }
                None => format!("error: no window called {:?} (status or settings)", line.trim()),
            }
        }
    };
    let _ = writeln!(stream, "{answer}");
}

/// The peer's uid and pid (`SO_PEERCRED`), or why they are unknown.
#[cfg(target_os = "linux")]
fn peer(stream: &UnixStream) -> Result<(u32, Option<i32>), String> {
    use std::os::fd::AsRawFd;
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which is that large.
    let rc = unsafe {
        libc::getsockopt(stream.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len)
    };
    if rc != 0 {
        return Err(format!("a peer whose credentials are unreadable ({})", std::io::Error::last_os_error()));
    }
    Ok((cred.uid, Some(cred.pid).filter(|p| *p > 0)))
}

/// Asks a running tray app to show `which` over its pipe: as on Linux.
#[cfg(windows)]
pub fn ask_to_show(socket: &Path, which: Which) -> Result<bool, String> {
    use agent_core::sys::ipc;
    let mut stream = match ipc::connect(socket) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", ipc::pipe_name(socket))),
    };
    let answer = (|| {
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        writeln!(stream, "{}", which.label())?;
        let mut line = String::new();
        BufReader::new((&stream).take(1024)).read_line(&mut line)?;
        Ok::<_, std::io::Error>(line)
    })()
    .map_err(|e| format!("the running Lull on {} did not answer: {e}", ipc::pipe_name(socket)))?;
    match answer.trim() {
        "ok" => Ok(true),
        other => Err(other.strip_prefix("error: ").unwrap_or(other).to_string()),
    }
}

/// The tray's pipe while it is served (it goes when the process ends).
#[cfg(windows)]
#[derive(Debug)]
pub struct Listening;

/// Makes the tray's pipe (owner-only; refused when it exists already) and serves it on a
/// thread of its own (a one-thread tokio runtime: the pipe is tokio's), calling `show`
/// for each request from an allowed peer.
#[cfg(windows)]
pub fn listen(socket: &Path, show: impl Fn(Which) -> Result<(), String> + Send + 'static) -> std::io::Result<Listening> {
    use agent_core::sys::ipc;
    let (tx, rx) = std::sync::mpsc::channel();
    let path = socket.to_path_buf();
    std::thread::Builder::new().name("tray-instance".into()).spawn(move || {
        let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        rt.block_on(async move {
            let listener = match ipc::bind_owner_only(&path) {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            tracing::info!("the tray's pipe: {}", ipc::pipe_name(&path));
            let _ = tx.send(Ok(()));
            loop {
                match ipc::accept(&listener).await {
                    Ok(conn) => serve_pipe(conn, &show).await,
                    Err(e) => {
                        tracing::warn!("the tray's pipe: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
    })?;
    rx.recv().map_err(|_| std::io::Error::other("the tray's pipe thread ended"))??;
    Ok(Listening)
}

/// Answers one connection on the pipe.
#[cfg(windows)]
async fn serve_pipe(mut conn: agent_core::sys::ipc::Connection, show: &dyn Fn(Which) -> Result<(), String>) {
    use agent_core::control::{refused_peer, PeerRules};
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let answer = match refused_peer(&conn, &PeerRules::default()) {
        Some(why) => {
            tracing::warn!("the tray's pipe refused {why}");
            format!("error: refused: {why}")
        }
        None => {
            let mut line = String::new();
            let mut reader = tokio::io::BufReader::new((&mut conn).take(64));
            let _ = tokio::time::timeout(Duration::from_secs(2), reader.read_line(&mut line)).await;
            match Which::parse(line.trim()) {
                Some(w) => {
                    tracing::info!("asked by another start of Lull to show the {} window", w.label());
                    show(w).map_or_else(|e| format!("error: {e}"), |()| "ok".into())
                }
                None => format!("error: no window called {:?} (status or settings)", line.trim()),
            }
        }
    };
    let _ = conn.write_all(format!("{answer}\n").as_bytes()).await;
    let _ = conn.flush().await;
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::mpsc;

    #[test]
    fn the_tray_socket_sits_beside_the_agent_socket() {
        assert_eq!(socket_path(Path::new("/run/user/1000/lull/agent.sock")), Path::new("/run/user/1000/lull/agent-tray.sock"));
        assert_eq!(socket_path(Path::new("/tmp/x/other.sock")), Path::new("/tmp/x/other-tray.sock"));
    }

    #[test]
    fn a_second_start_asks_the_running_one_to_show_a_window() {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("agent-tray.sock");
        assert_eq!(ask_to_show(&socket, Which::Status), Ok(false), "nothing listens yet");
        // A socket left by a tray app that died is replaced.
        drop(UnixListener::bind(&socket).expect("a stale socket"));
        assert_eq!(ask_to_show(&socket, Which::Status), Ok(false), "a dead socket is no running tray");
        let (tx, rx) = mpsc::channel();
        let listening = listen(&socket, move |w| {
            tx.send(w).map_err(|e| e.to_string())?;
            if w == Which::Settings {
                return Err("cannot open it".into());
            }
            Ok(())
        })
        .expect("listen");
        let mode = std::fs::metadata(&socket).expect("socket").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the socket is the owner's only");
        assert_eq!(ask_to_show(&socket, Which::Status), Ok(true));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(Which::Status));
        assert_eq!(ask_to_show(&socket, Which::Settings), Err("cannot open it".into()), "a failure is said, not hidden");
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(Which::Settings));
        drop(listening);
        assert!(!socket.exists(), "removed when the tray app ends");
    }

    #[test]
    fn a_file_in_the_way_is_not_deleted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("agent-tray.sock");
        std::fs::write(&socket, "the owner's").expect("write");
        assert!(listen(&socket, |_| Ok(())).is_err());
        assert_eq!(std::fs::read_to_string(&socket).expect("kept"), "the owner's");
    }
}
