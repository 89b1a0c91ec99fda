//! The windows, seen from the tray process: they run in a child process, `lull-window`
//! (the Tauri webview app, installed beside `lull-tray`), started when the owner asks for
//! a window and ending when its last window closes. The tray process itself never loads
//! WebKit, which keeps it small while no window is open (docs/BENCHMARKS.md, issue 6).
//!
//! While the child runs, further windows are asked for on its stdin (one name a line), so
//! Status and Settings share one WebKit. Closing its stdin (on Quit, or if the tray dies)
//! ends it.
//!
//! The child does not end on its own when its last window closes: it says `idle N` on
//! its stdout, N being how many window requests it has taken (the one it was started
//! with included), and the tray decides. If the tray has sent no more than N, nothing is
//! in flight and it closes the child's stdin, which ends it; if it has sent more, a
//! request is on its way and the child will open that window. So a request made just as
//! the last window closes is never lost to a child on its way out
//! ([`on_idle`] is the decision). The child says `quit` when the owner asks to stop Lull
//! from a window (Quit Lull, in a window standing in for the tray icon), and `fail TEXT`
//! when it cannot start (on Windows: no WebView2 runtime): the tray logs TEXT and shows
//! it in a notice, as the owner who asked for a window would otherwise see nothing.

use crate::notify;
use anyhow::{Context, Result};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub use crate::which::Which;

struct Running {
    child: Child,
    stdin: ChildStdin,
    /// Window requests sent to this child, the one it was started with included.
    sent: u32,
}

/// What the tray does when the window process says it has no window left after taking
/// `taken` requests, of the `sent` the tray made: `true` = end it (nothing in flight).
pub fn on_idle(taken: u32, sent: u32) -> bool {
    taken >= sent
}

/// The window process, if one runs. Cloning shares it.
#[derive(Clone)]
pub struct Windows {
    running: Arc<Mutex<Option<Running>>>,
    bin: PathBuf,
    note: Option<String>,
    /// Environment variables the tray set for itself that the windows must not inherit.
    unset: Vec<&'static str>,
    on_quit: Arc<dyn Fn() + Send + Sync>,
}

/// `lull-window` (`lull-window.exe`) beside this executable, or `LULL_WINDOW_BIN`.
pub fn window_bin() -> Result<PathBuf> {
    if let Some(p) = std::env::var_os("LULL_WINDOW_BIN").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    Ok(std::env::current_exe().context("finding this executable")?.with_file_name(format!("lull-window{}", std::env::consts::EXE_SUFFIX)))
}

impl Windows {
    /// `note` is shown atop the status window; `on_quit` runs (on a helper thread) when a
    /// window asks to stop Lull.
    pub fn new(bin: PathBuf, note: Option<String>, unset: Vec<&'static str>, on_quit: impl Fn() + Send + Sync + 'static) -> Self {
        Self { running: Arc::default(), bin, note, unset, on_quit: Arc::new(on_quit) }
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
                r.sent += 1;
                return Ok(());
            }
            // It ended (crashed, or was killed): a new one takes the request.
            if let Some(mut old) = g.take() {
                let _ = old.child.wait();
            }
        }
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--from-tray", "--open", which.label()]).stdin(Stdio::piped()).stdout(Stdio::piped());
        if let Some(n) = &self.note {
            cmd.args(["--note", n]);
        }
        for k in &self.unset {
            cmd.env_remove(k);
        }
        let mut child = cmd.spawn().with_context(|| format!("starting {}", self.bin.display()))?;
        let pid = child.id();
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            // Unreachable (both are piped above); end the child rather than lose track of it.
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("no pipes to the window process");
        };
        tracing::info!(pid, "window process started for the {} window", which.label());
        *g = Some(Running { child, stdin, sent: 1 });
        drop(g);
        let me = self.clone();
        std::thread::Builder::new()
            .name("window-watch".into())
            .spawn(move || me.watch(pid, stdout))
            .context("starting the window watcher")?;
        Ok(())
    }

    /// Follows the window process `pid` through its stdout: runs `on_quit` when it says
    /// `quit`; ends it when it is idle with nothing in flight ([`on_idle`]); when it has
    /// ended (stdout closed), reaps it. Blocks on the pipe: no polling while a window is
    /// open.
    fn watch(&self, pid: u32, stdout: ChildStdout) {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.trim() == "quit" {
                tracing::info!(pid, "Quit Lull from a window");
                (self.on_quit)();
                continue;
            }
            if let Some(why) = line.strip_prefix("fail ") {
                tracing::error!(pid, "the window process cannot open a window: {why}");
                let notice =
                    notify::Message { kind: notify::Kind::Attention, summary: "Lull: its window cannot open".into(), body: why.to_owned() };
                if let Err(e) = notify::show(&notice) {
                    tracing::warn!("cannot show a notice: {e}");
                }
                continue;
            }
            let Some(taken) = line.strip_prefix("idle ").and_then(|n| n.trim().parse::<u32>().ok()) else { continue };
            let mut g = self.lock();
            let Some(r) = g.as_ref().filter(|r| r.child.id() == pid) else { return };
            if !on_idle(taken, r.sent) {
                tracing::info!(pid, taken, sent = r.sent, "the window process is idle with a request on its way: keeping it");
                continue;
            }
            tracing::info!(pid, "the window process has no window left: ending it");
            let ended = g.take();
            drop(g);
            self.end(pid, ended);
            return;
        }
        // Its stdout closed: it ended by itself (or crashed).
        let mut g = self.lock();
        let ended = if g.as_ref().is_some_and(|r| r.child.id() == pid) { g.take() } else { None };
        drop(g);
        self.end(pid, ended);
    }

    /// Closes the stdin of a window process taken out of `running` (which ends it) and
    /// reaps it. Lull runs on with no window open.
    fn end(&self, pid: u32, ended: Option<Running>) {
        let Some(Running { mut child, stdin, .. }) = ended else { return };
        drop(stdin);
        match child.wait() {
            Ok(st) if st.success() => tracing::info!(pid, "window process ended ({st})"),
            Ok(st) => tracing::warn!(pid, "window process ended ({st})"),
            Err(e) => tracing::warn!(pid, "cannot wait for the window process: {e}"),
        }
    }

    /// Ends the window process: closes its stdin (it closes its windows and exits), and
    /// kills it if it has not ended within 5 s.
    pub fn close(&self) {
        let Some(Running { mut child, stdin, .. }) = self.lock().take() else { return };
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

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn an_idle_window_process_ends_only_with_nothing_in_flight() {
        assert!(on_idle(1, 1));
        assert!(!on_idle(1, 2), "a request is on its way");
        assert!(on_idle(3, 3));
    }

    /// A stand-in for `lull-window` speaking the same pipe protocol, which logs what it
    /// was asked for: its first window is "closed" 0.3 s after start (it says `idle 1`),
    /// before it reads the request the tray sent meanwhile: the very race a real owner can
    /// hit. The windows it opens from stdin stay open; like the real one, it ends when its
    /// stdin closes (which would close those windows). In its settings window the owner
    /// presses Quit Lull at once: it says `quit`.
    fn fake_window_bin(dir: &std::path::Path) -> PathBuf {
        let bin = dir.join("fake-lull-window");
        std::fs::write(
            &bin,
            r#"#!/bin/sh
log="$(dirname "$0")/log"
echo "start $*" >> "$log"
sleep 0.3
echo "idle 1"
n=1
while read -r w; do
  n=$((n + 1))
  echo "open $w" >> "$log"
  [ "$w" = settings ] && echo quit
done
echo "exit after $n requests" >> "$log"
"#,
        )
        .expect("write the fake");
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        bin
    }

    fn wait_until(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_request_made_as_the_last_window_closes_is_not_lost() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
        let quits = Arc::new(AtomicU32::new(0));
        let q = quits.clone();
        let w = Windows::new(fake_window_bin(dir.path()), None, vec![], move || {
            q.fetch_add(1, Ordering::SeqCst);
        });
        w.open(Which::Status).expect("start the window process");
        // Asked for while the child is about to say it has no window left.
        w.open(Which::Settings).expect("ask the running process");
        wait_until("the request to reach the child", || log().contains("open settings"));
        // Its `idle 1` came with a request in flight: the tray kept it, so the settings
        // window stays open.
        std::thread::sleep(Duration::from_millis(500));
        assert!(!log().contains("exit"), "the tray ended a process with a window open:\n{}", log());
        // Its Quit Lull reached the tray (which, in lull-tray, ends the app).
        wait_until("the quit", || quits.load(Ordering::SeqCst) == 1);

        // Quit: the tray closes its stdin and it ends.
        w.close();
        assert_eq!(log(), "start --from-tray --open status\nopen settings\nexit after 2 requests\n");
        assert!(w.lock().is_none(), "nothing left running");
        // The next request starts a new one.
        w.open(Which::Status).expect("start again");
        wait_until("a second window process", || log().matches("start --from-tray --open status").count() == 2);
        w.close();
    }
}
