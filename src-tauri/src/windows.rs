//! The windows, seen from the tray process: they run in a child process, `lull-window`
//! (the Tauri webview app, installed beside `lull-tray`), started when the owner asks for
//! a window and ending when its last window closes. The tray process itself never loads
//! WebKit, which keeps it small while no window is open (docs/BENCHMARKS.md, issue 6).
//!
//! While the child runs, further windows are asked for on its stdin (one name a line), so
//! Status and Settings share one WebKit. Closing its stdin (on Quit, or if the tray dies)
//! ends it.

use anyhow::{Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use crate::which::Which;

struct Running {
    child: Child,
    stdin: ChildStdin,
}

/// The window process, if one runs. Cloning shares it.
#[derive(Clone)]
pub struct Windows {
    running: Arc<Mutex<Option<Running>>>,
    bin: PathBuf,
    note: Option<String>,
    /// Environment variables the tray set for itself that the windows must not inherit.
    unset: Vec<&'static str>,
    on_closed: Arc<dyn Fn() + Send + Sync>,
}

/// `lull-window` beside this executable, or `LULL_WINDOW_BIN`.
pub fn window_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("LULL_WINDOW_BIN").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(std::env::current_exe().context("finding this executable")?.with_file_name("lull-window"))
}

impl Windows {
    /// `note` is shown atop the status window; `on_closed` runs (on a helper thread) when
    /// the window process has ended, i.e. its last window closed.
    pub fn new(bin: PathBuf, note: Option<String>, unset: Vec<&'static str>, on_closed: impl Fn() + Send + Sync + 'static) -> Self {
        Self { running: Arc::default(), bin, note, unset, on_closed: Arc::new(on_closed) }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Running>> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens (or raises) the window: asks the running window process, or starts one.
    pub fn open(&self, which: Which) -> Result<()> {
        let mut g = self.lock();
        if let Some(r) = g.as_mut() {
            let alive = matches!(r.child.try_wait(), Ok(None));
            if alive && writeln!(r.stdin, "{}", which.label()).and_then(|()| r.stdin.flush()).is_ok() {
                return Ok(());
            }
            // It is ending (its last window just closed): a new one takes the request.
            if let Some(mut old) = g.take() {
                let _ = old.child.wait();
            }
        }
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--from-tray", "--open", which.label()]).stdin(Stdio::piped());
        if let Some(n) = &self.note {
            cmd.args(["--note", n]);
        }
        for k in &self.unset {
            cmd.env_remove(k);
        }
        let mut child = cmd.spawn().with_context(|| format!("starting {}", self.bin.display()))?;
        let pid = child.id();
        let Some(stdin) = child.stdin.take() else {
            // Unreachable (stdin is piped above); end the child rather than lose track of it.
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("no pipe to the window process");
        };
        tracing::info!(pid, "window process started for the {} window", which.label());
        *g = Some(Running { child, stdin });
        drop(g);
        let me = self.clone();
        std::thread::Builder::new().name("window-watch".into()).spawn(move || me.watch(pid)).context("starting the window watcher")?;
        Ok(())
    }

    /// Polls the window process `pid` until it ends, then reaps it and runs `on_closed`.
    fn watch(&self, pid: u32) {
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let mut g = self.lock();
            let Some(r) = g.as_mut().filter(|r| r.child.id() == pid) else { return };
            match r.child.try_wait() {
                Ok(None) => continue,
                Ok(Some(st)) => tracing::info!(pid, "window process ended ({st})"),
                Err(e) => tracing::warn!(pid, "cannot wait for the window process: {e}"),
            }
            *g = None;
            drop(g);
            (self.on_closed)();
            return;
        }
    }

    /// Ends the window process: closes its stdin (it closes its windows and exits), and
    /// kills it if it has not ended within 5 s.
    pub fn close(&self) {
        let Some(Running { mut child, stdin }) = self.lock().take() else { return };
        drop(stdin);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        tracing::warn!("the window process did not end within 5 s: killing it");
        let _ = child.kill();
        let _ = child.wait();
    }
}
