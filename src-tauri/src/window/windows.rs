//! The webview windows of `lull-window`: made on demand, torn down when closed. The
//! process ends with its last window (on its own, Tauri's default; under the tray, once
//! the tray has no request in flight), and WebKit's web and network processes end with
//! it, so nothing of WebKit stays in memory once the windows are gone.

use tauri::{AppHandle, Manager, WebviewUrl, WebviewWindowBuilder};

pub use crate::which::Which;

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
