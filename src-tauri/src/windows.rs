//! Windows are made on demand and torn down when closed: while none is open, no webview
//! (and no WebKit process) exists, which keeps the idle tray app small (see
//! docs/BENCHMARKS.md). WebKit ends a window's web process with the window, but keeps its
//! network process for the app's lifetime (≈ 30 MB); [`reap_helpers`] ends it once the
//! last window is gone, and WebKit starts a new one with the next window.

use tauri::{AppHandle, Manager, WebviewUrl, WebviewWindowBuilder};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Status,
    Settings,
}

impl Which {
    pub fn label(self) -> &'static str {
        match self {
            Self::Status => "status",
            Self::Settings => "settings",
        }
    }
}

/// Shows the window, creating it if it is not open.
pub fn open(app: &AppHandle, which: Which) -> tauri::Result<()> {
    if let Some(w) = app.get_webview_window(which.label()) {
        w.show()?;
        return w.set_focus();
    }
    let (title, w, h) = match which {
        Which::Status => ("Lull", 780.0, 680.0),
        Which::Settings => ("Lull settings", 720.0, 800.0),
    };
    let url = WebviewUrl::App(format!("index.html?view={}", which.label()).into());
    WebviewWindowBuilder::new(app, which.label(), url).title(title).inner_size(w, h).min_inner_size(480.0, 360.0).build()?;
    Ok(())
}

/// After the last window closed: ends WebKit's helper processes (children of this
/// process named `WebKit…`), which WebKit would otherwise keep until the app exits.
#[cfg(target_os = "linux")]
pub fn reap_helpers(app: &AppHandle) {
    if !app.webview_windows().is_empty() {
        return;
    }
    let app = app.clone();
    std::thread::spawn(move || {
        // Let WebKit finish tearing the window down first.
        std::thread::sleep(std::time::Duration::from_millis(1500));
        if !app.webview_windows().is_empty() {
            return;
        }
        for pid in webkit_children() {
            tracing::info!(pid, "ending an idle WebKit helper process");
            // SAFETY: a signal to a child process of ours, found just above.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
    });
}

/// Child processes of this one whose name starts with "WebKit".
#[cfg(target_os = "linux")]
fn webkit_children() -> Vec<i32> {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "pid (comm) state ppid …": comm may hold spaces, so split after the last ')'.
            let Some((head, tail)) = stat.rsplit_once(')') else { return false };
            let comm = head.split_once('(').map(|(_, c)| c).unwrap_or("");
            let ppid = tail.split_whitespace().nth(1).unwrap_or("");
            ppid == me && comm.starts_with("WebKit")
        })
        .collect()
}
