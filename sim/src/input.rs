//! Trace files as users hand them over: plain or gzipped (by the file's magic bytes, not
//! its name), in any text encoding (bytes that are not UTF-8 — a Latin-1 name in an
//! SWF comment — are read lossily, so they can only ever fail the line they are on, by
//! number), with malformed lines either refused (the default) or skipped and listed.

use crate::error::TraceError;
use std::io::Read;
use std::path::Path;

/// What to do with a malformed line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BadLines {
    /// Stop at the first one with its line number and what is wrong (nothing is used).
    #[default]
    Refuse,
    /// Leave it out, and report it (line number and reason) beside the result.
    Skip,
}

/// A line left out under [`BadLines::Skip`]: its 1-based number and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    pub line: usize,
    pub reason: String,
}

/// Reads `path` as text: gunzipped if it starts with gzip's magic bytes, invalid UTF-8
/// replaced by U+FFFD (so an odd byte fails only its own line).
pub fn read_text(path: &Path) -> Result<String, TraceError> {
    let io = |source| TraceError::Io { file: path.to_path_buf(), source };
    let raw = std::fs::read(path).map_err(io)?;
    let bytes = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(raw.as_slice()).read_to_end(&mut out).map_err(io)?;
        out
    } else {
        raw
    };
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// Handles one malformed line under `policy`: an error to return (refuse), or the line
/// noted in `skipped`.
pub(crate) fn bad_line(policy: BadLines, skipped: &mut Vec<Skipped>, e: TraceError) -> Result<(), TraceError> {
    match (policy, e) {
        (BadLines::Skip, TraceError::Parse { line, msg, .. }) => {
            skipped.push(Skipped { line, reason: msg });
            Ok(())
        }
        (_, e) => Err(e),
    }
}

/// A file's name for reports: its stem without `.gz`, `.swf`, `.tab` or `.txt`.
pub fn log_name(path: &Path) -> String {
    let mut name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "log".into());
    for ext in [".gz", ".swf", ".tab", ".txt"] {
        if let Some(s) = name.strip_suffix(ext) {
            name = s.to_string();
        }
    }
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' { c } else { '_' }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn gzip_and_stray_bytes_are_read() {
        let dir = std::env::temp_dir().join(format!("lull-sim-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = b"; Installation: Universit\xe9 de Test\n1 0 0\n";
        let plain = dir.join("a.swf");
        std::fs::write(&plain, text).unwrap();
        let gz = dir.join("a.swf.gz");
        let mut e = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::default());
        e.write_all(text).unwrap();
        e.finish().unwrap();
        for p in [&plain, &gz] {
            let t = read_text(p).unwrap();
            assert!(t.starts_with("; Installation: Universit\u{fffd} de Test\n"), "{t:?}");
            assert!(t.ends_with("1 0 0\n"));
        }
        assert_eq!(log_name(&gz), "a");
        assert!(matches!(read_text(&dir.join("none")), Err(TraceError::Io { .. })));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
