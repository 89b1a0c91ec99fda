//! Windows are made on demand and torn down when closed: while none is open, no webview
//! (and no WebKit process) exists, which keeps the idle tray app small (see
//! docs/BENCHMARKS.md).

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
