//! "Start Lull when I log in": an XDG autostart entry
//! (`$XDG_CONFIG_HOME/autostart/lull-tray.desktop`), written from the same desktop file
//! the package ships (`packaging/lull-tray-autostart.desktop`), with `Exec` set to the
//! `lull-tray` installed beside this binary (the settings window runs in `lull-window`).

use std::path::PathBuf;

const TEMPLATE: &str = include_str!("../../../packaging/lull-tray-autostart.desktop");

/// Where the entry lives.
pub fn entry_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("autostart").join("lull-tray.desktop"))
}

/// True when the entry exists and is not disabled.
pub fn enabled() -> bool {
    entry_path().and_then(|p| std::fs::read_to_string(p).ok()).is_some_and(|t| !t.lines().any(|l| l.trim() == "Hidden=true"))
}

/// Writes or removes the entry.
pub fn set(on: bool) -> std::io::Result<()> {
    let path = entry_path().ok_or_else(|| std::io::Error::other("no home directory for the autostart entry"))?;
    if !on {
        return match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        };
    }
    let exe = std::env::current_exe()?.with_file_name("lull-tray");
    let text: String =
        TEMPLATE.lines().map(|l| if l.starts_with("Exec=") { format!("Exec=\"{}\"\n", exe.display()) } else { format!("{l}\n") }).collect();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_is_written_and_removed() {
        let dir = tempfile::tempdir().expect("temp dir");
        // This test owns XDG_CONFIG_HOME; no other test in this binary reads it.
        std::env::set_var("XDG_CONFIG_HOME", dir.path());
        assert!(!enabled());
        set(true).expect("write entry");
        assert!(enabled());
        let text = std::fs::read_to_string(dir.path().join("autostart/lull-tray.desktop")).expect("entry");
        assert!(text.contains("[Desktop Entry]") && text.contains("Exec=\"/"), "{text}");
        assert!(text.contains("/lull-tray\"\n"), "the entry starts the tray, not the window process: {text}");
        set(false).expect("remove entry");
        assert!(!enabled());
        set(false).expect("removing twice is fine");
    }
}
