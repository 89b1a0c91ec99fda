//! The owner typing in a terminal, for the benches that time it: a `script(1)` session
//! whose program (`cat`) reads every line written to its standard input, as a shell reads
//! what its owner types over ssh or in a text console, and a real-time watcher of when the
//! kernel says that program read its pty.

use anyhow::{Context, Result};
use std::ffi::CString;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Starts the session. Each line written to the child's stdin is read by `cat` from the
/// pty's slave side (an `IN_ACCESS` on `/dev/pts/N`, what the terminal backend sees).
pub fn session() -> Result<Child> {
    Command::new("script")
        .args(["-qfc", "cat >/dev/null", "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("starting `script` (util-linux) for a pty session")
}

/// Calls `on_read` each time the program in `script`'s pty reads it, from a thread of
/// its own at `SCHED_FIFO` priority 10 (so its own wake-up on a loaded machine barely
/// counts), watching the pty with inotify `IN_ACCESS` as the terminal backend does.
/// Splits "line written → agent" into the terminal's part (script, the tty layer and the
/// reader being scheduled) and the agent's. `None` when the pty was not found in 5 s.
pub fn watch_reads(script: &Child, on_read: impl Fn() + Send + 'static) -> Option<()> {
    let pid = script.id();
    // script's child runs the reader on the pty.
    let deadline = Instant::now() + Duration::from_secs(5);
    let tty = loop {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        let tty = children.split_whitespace().find_map(|c| std::fs::read_link(format!("/proc/{c}/fd/0")).ok());
        match tty {
            Some(t) if t.starts_with("/dev/pts/") => break t,
            _ if Instant::now() > deadline => return None,
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let path = CString::new(tty.as_os_str().to_string_lossy().into_owned()).ok()?;
    std::thread::spawn(move || {
        let p = libc::sched_param { sched_priority: 10 };
        // SAFETY: sets this thread's policy with a valid parameter; inotify calls on a
        // descriptor this thread owns, reading into its own buffer.
        unsafe {
            libc::sched_setscheduler(0, libc::SCHED_FIFO, &p);
            let fd = libc::inotify_init1(libc::IN_CLOEXEC);
            if fd < 0 || libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_ACCESS) < 0 {
                return;
            }
            let mut buf = [0u8; 512];
            while libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) > 0 {
                on_read();
            }
        }
    });
    Some(())
}
