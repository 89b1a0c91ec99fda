//! This process's side of the pipe from the tray (`src-tauri/src/windows.rs`): what it
//! tells the tray, one line each on stdout (`idle N`: no window left after N requests;
//! `quit`: the owner asked to stop Lull).

use std::io::Write;

/// Writes one line to the tray; an error means the tray is gone.
pub fn tell_tray(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").and_then(|()| out.flush())
}
