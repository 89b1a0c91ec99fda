//! Settings changed from the CLI or the tray are written into the owner's config file in
//! place: only the fields the change touched are set (with `toml_edit`), so the owner's
//! comments, order, formatting and every value they wrote by hand stay as they are — even
//! one edited while the agent ran. The result is read back and validated before it
//! replaces the file (atomically), and becomes the agent's configuration: a hand edit the
//! agent had not seen yet takes effect with the change, and a file that no longer
//! validates is left untouched and named in the error.

use crate::config::{Config, ConfigError};
use std::path::Path;
use toml_edit::{DocumentMut, Item, Table};

/// One changed leaf: its path of keys and its new value (`None`: removed).
type Change = (Vec<String>, Option<toml::Value>);

/// The leaves where `new` differs from `old` (whole arrays count as leaves).
fn changes(old: &toml::Value, new: &toml::Value, path: &mut Vec<String>, out: &mut Vec<Change>) {
    match (old, new) {
        (toml::Value::Table(a), toml::Value::Table(b)) => {
            for (k, vb) in b {
                path.push(k.clone());
                match a.get(k) {
                    Some(va) => changes(va, vb, path, out),
                    None => out.push((path.clone(), Some(vb.clone()))),
                }
                path.pop();
            }
            for k in a.keys().filter(|k| !b.contains_key(*k)) {
                path.push(k.clone());
                out.push((path.clone(), None));
                path.pop();
            }
        }
        (a, b) if a != b => out.push((path.clone(), Some(b.clone()))),
        _ => {}
    }
}

/// `value` as a toml_edit value (tables become inline tables).
fn edit_value(value: &toml::Value) -> Result<toml_edit::Value, String> {
    // A scalar or array prints as TOML; wrapped in a key, a table prints as a document.
    let text = match value {
        toml::Value::Table(_) => {
            let doc = toml::to_string(&toml::Table::from_iter([("v".to_string(), value.clone())])).map_err(|e| e.to_string())?;
            let parsed: DocumentMut = doc.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
            return match parsed.get("v") {
                Some(Item::Table(t)) => Ok(toml_edit::Value::InlineTable(t.clone().into_inline_table())),
                Some(Item::Value(v)) => Ok(v.clone()),
                _ => Err("a table that did not print".into()),
            };
        }
        v => v.to_string(),
    };
    text.parse::<toml_edit::Value>().map_err(|e| e.to_string())
}

/// Sets (or removes) one leaf in the document, making missing tables as it goes.
fn apply(doc: &mut DocumentMut, (path, value): &Change) -> Result<(), String> {
    let Some((leaf, tables)) = path.split_last() else { return Ok(()) };
    let mut table: &mut Table = doc.as_table_mut();
    for key in tables {
        let item = table.entry(key).or_insert_with(|| {
            let mut t = Table::new();
            t.set_implicit(true);
            Item::Table(t)
        });
        // An inline table written by hand (`budget = { … }`) is edited as a table.
        if let Item::Value(toml_edit::Value::InlineTable(t)) = item {
            *item = Item::Table(std::mem::take(t).into_table());
        }
        table = item.as_table_mut().ok_or_else(|| format!("`{key}` in the config file is not a table"))?;
    }
    match value {
        Some(v) => {
            let new = edit_value(v)?;
            match table.get_mut(leaf).and_then(Item::as_value_mut) {
                // Keep the comment and spacing around the old value.
                Some(old) => {
                    let decor = old.decor().clone();
                    *old = new;
                    *old.decor_mut() = decor;
                }
                None => {
                    table.insert(leaf, Item::Value(new));
                }
            }
        }
        None => {
            table.remove(leaf);
        }
    }
    Ok(())
}

/// Writes into the config file at `path` what changed from `previous` to `wanted`,
/// keeping everything else in the file, and returns the configuration the file now holds.
pub fn save_changes(path: &Path, previous: &Config, wanted: &Config) -> Result<Config, ConfigError> {
    let shown = path.display().to_string();
    let io = |e: std::io::Error| ConfigError::Io { path: shown.clone(), message: e.to_string() };
    wanted.validate()?;
    let text = crate::config::read_config_text(path)?.unwrap_or_default();
    // The file as it is now must parse (and validate) before anything is written into it.
    Config::from_toml(&text, &shown)?;
    let mut doc: DocumentMut =
        text.parse().map_err(|e: toml_edit::TomlError| ConfigError::Parse { path: shown.clone(), message: e.to_string() })?;
    let invalid = |message: String| ConfigError::Invalid { field: "(all)".into(), message };
    let (old, new) = (
        toml::Value::try_from(previous).map_err(|e| invalid(e.to_string()))?,
        toml::Value::try_from(wanted).map_err(|e| invalid(e.to_string()))?,
    );
    let mut diff = Vec::new();
    changes(&old, &new, &mut Vec::new(), &mut diff);
    for change in &diff {
        apply(&mut doc, change).map_err(|message| ConfigError::Invalid { field: change.0.join("."), message })?;
    }
    let merged_text = doc.to_string();
    let merged = Config::from_toml(&merged_text, &shown)?;
    if merged_text != text {
        if let Some(dir) = path.parent() {
            crate::private_files::create_dir(dir).map_err(io)?;
        }
        // Owner-only, whatever the file's mode was (an older one may have been 0644).
        crate::private_files::write(path, merged_text.as_bytes()).map_err(io)?;
    }
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HAND_WRITTEN: &str = "# My settings for Lull.\n\n[availability]\n# Two minutes: I read a lot.\nrecruitment_threshold_s = 120   # seconds\n\n[budget] # how often I may be interrupted\ninterruptions_per_day = 5\n";

    #[test]
    fn a_change_keeps_comments_order_and_hand_edits() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, HAND_WRITTEN).expect("write");
        let running = Config::load(&path).expect("load");
        // The owner edits a value by hand while the agent runs.
        std::fs::write(&path, HAND_WRITTEN.replace("= 120", "= 60")).expect("edit");
        let mut wanted = running.clone();
        wanted.budget.interruptions_per_day = 3;
        let merged = save_changes(&path, &running, &wanted).expect("save");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text, HAND_WRITTEN.replace("= 120", "= 60").replace("interruptions_per_day = 5", "interruptions_per_day = 3"), "{text}");
        assert_eq!((merged.availability.recruitment_threshold_s, merged.budget.interruptions_per_day), (60, 3));
    }

    /// The file Lull writes is the owner's only, even where an older one was 0644 and
    /// whatever the umask; a new one in a new directory too.
    #[test]
    fn the_saved_file_is_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, HAND_WRITTEN).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        let running = Config::load(&path).expect("load");
        let mut wanted = running.clone();
        wanted.budget.interruptions_per_day = 7;
        save_changes(&path, &running, &wanted).expect("save");
        assert_eq!(mode(&path), 0o600);
        let fresh = dir.path().join("new/lull/config.toml");
        save_changes(&fresh, &Config::default(), &wanted).expect("save");
        assert_eq!((mode(fresh.parent().expect("dir")), mode(&fresh)), (0o700, 0o600));
    }

    #[test]
    fn new_fields_and_tables_are_added_and_removed_ones_dropped() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "# mine\n[rules.hours]\nmon = [\"09:00-17:00\"]\n").expect("write");
        let running = Config::load(&path).expect("load");
        let mut wanted = running.clone();
        wanted.caps.cpu_max = 0.5;
        wanted.rules.hours.mon = None;
        wanted.rules.hours.tue = Some(vec!["08:00-12:00".into()]);
        let merged = save_changes(&path, &running, &wanted).expect("save");
        assert_eq!(merged, wanted);
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.starts_with("# mine\n"), "{text}");
        assert!(!text.contains("mon"), "{text}");
        assert_eq!(Config::load(&path).expect("reload"), wanted);
    }

    #[test]
    fn a_file_that_no_longer_validates_is_left_alone() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("config.toml");
        std::fs::write(&path, "[budget]\ninterruptions_per_day = 5\n").expect("write");
        let running = Config::load(&path).expect("load");
        let broken = "[budget]\ninterruptions_per_day = 500\n";
        std::fs::write(&path, broken).expect("edit");
        let mut wanted = running.clone();
        wanted.caps.cpu_max = 0.5;
        let e = save_changes(&path, &running, &wanted).expect_err("refused");
        assert!(e.to_string().contains("budget.interruptions_per_day"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), broken);
    }

    #[test]
    fn no_file_yet_gets_only_the_change() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("sub").join("config.toml");
        let running = Config::default();
        let mut wanted = running.clone();
        wanted.budget.interruptions_per_day = 2;
        save_changes(&path, &running, &wanted).expect("save");
        assert_eq!(std::fs::read_to_string(&path).expect("read").trim(), "[budget]\ninterruptions_per_day = 2");
    }
}
