//! One tray app per agent, and starting it again brings its window back. The running
//! `lull-tray` listens beside the agent's control socket (`agent.sock` →
//! `agent-tray.sock`), made as the agent's control channel is (`agent_core::control::bind`
//! over `agent_core::sys::ipc`): on Linux and macOS a Unix socket, mode 0600, in the
//! control socket's 0700 directory, a stale one replaced; on Windows the named pipe for
//! that path, which admits the current user only.
//! A second `lull-tray` (the owner starting Lull again from the applications menu, say
//! after closing the window that stands in for a missing tray icon) first asks there to
//! show a window and exits, rather than failing on the agent's data-directory lock.
//!
//! The protocol is one line each way: the window's name (`status`, `settings`), then `ok`
//! or `error: why`. Only the owner's own processes outside any guest sandbox are heard
//! (the control socket's `refused_peer`: same user, same user and PID namespaces), and all
//! they can ask for is a window on the owner's screen.

use crate::which::Which;
use agent_core::control::{refused_peer, PeerRules};
use agent_core::sys::ipc;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// The tray's socket for the agent whose control socket is `agent_socket`.
pub fn socket_path(agent_socket: &Path) -> PathBuf {
    let stem = agent_socket.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "agent".into());
    agent_socket.with_file_name(format!("{stem}-tray.sock"))
}

/// Asks a running tray app to show `which`: `Ok(true)` once it has, `Ok(false)` when no
/// tray app listens (start one), `Err` when one answered but could not.
pub fn ask_to_show(socket: &Path, which: Which) -> Result<bool, String> {
    let mut stream = match ipc::connect(socket) {
        Ok(s) => s,
        Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused) => return Ok(false),
        Err(e) => return Err(format!("{}: {e}", ipc::endpoint(socket))),
    };
    let answer = (|| {
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        writeln!(stream, "{}", which.label())?;
        let mut line = String::new();
        BufReader::new((&stream).take(1024)).read_line(&mut line)?;
        Ok::<_, std::io::Error>(line)
    })()
    .map_err(|e| format!("the running Lull on {} did not answer: {e}", ipc::endpoint(socket)))?;
    match answer.trim() {
        "ok" => Ok(true),
        other => Err(other.strip_prefix("error: ").unwrap_or(other).to_string()),
    }
}

/// The tray's socket while it is served; dropping it removes a Unix socket's file (the
/// serving thread ends with the process; a pipe goes with it).
#[derive(Debug)]
pub struct Listening {
    path: PathBuf,
}

impl Drop for Listening {
    fn drop(&mut self) {
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| agent_core::sys::fs::is_socket(&m)) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// Binds the tray's socket (replacing one left by a tray app that died, never a file in
/// the way) and serves it on a thread of its own (a one-thread tokio runtime, as the
/// agent's channel is tokio's), calling `show` for each request from an allowed peer.
pub fn listen(socket: &Path, show: impl Fn(Which) -> Result<(), String> + Send + 'static) -> std::io::Result<Listening> {
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
            let listener = match agent_core::control::bind(&path) {
                Ok(l) => l,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            tracing::info!("the tray's socket: {}", ipc::endpoint(&path));
            let _ = tx.send(Ok(()));
            loop {
                match ipc::accept(&listener).await {
                    Ok(conn) => serve(conn, &show).await,
                    Err(e) => {
                        tracing::warn!("the tray's socket: {e}");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
    })?;
    rx.recv().map_err(|_| std::io::Error::other("the tray's socket thread ended"))??;
    Ok(Listening { path: socket.to_path_buf() })
}

/// Answers one connection.
async fn serve(mut conn: ipc::Connection, show: &dyn Fn(Which) -> Result<(), String>) {
    let answer = match refused_peer(&conn, &PeerRules::default()) {
        Some(why) => {
            tracing::warn!("the tray's socket refused {why}");
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::net::UnixListener;
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
