//! Today's counters in a tiny file beside the ledger (`ledger.today` next to
//! `ledger.db`): the budget day, the interruptions used on it and the limit then in
//! force, checksummed (CRC-32) and replaced atomically (written to a temporary file,
//! fsynced, renamed, the directory fsynced) each time an interruption is counted and at
//! every start. It is the second witness of the owner's daily budget: when the ledger is
//! missing, truncated or damaged, the agent recovers today's count from it
//! (`ledger_integrity`); when the record itself is damaged, the ledger still holds the
//! count. The file is two lines: the counters as JSON, then `crc32=XXXXXXXX` over the
//! first line's bytes.

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The counters the record holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetRecord {
    /// The local day the budget counts against.
    pub day: NaiveDate,
    /// Interruptions used on `day`.
    pub used: u32,
    /// The daily limit in force when it was written.
    pub limit: u32,
    /// When it was written (RFC 3339, UTC).
    pub written_utc: String,
    /// Damage the background integrity check found in the ledger: the next start sets
    /// the ledger aside and salvages it even if its quick start-up check passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger_damage: Option<String>,
}

/// What reading the record found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordRead {
    /// No record (never written, or deleted).
    Missing,
    /// An intact record.
    Valid(BudgetRecord),
    /// A record that cannot be trusted: why.
    Damaged(String),
}

/// The record is never larger than this; anything bigger is damage, not read whole.
const RECORD_MAX: u64 = 4096;

/// Where the record of the ledger at `ledger` lives: beside it, `ledger.today`.
pub fn path_for(ledger: &Path) -> PathBuf {
    ledger.with_extension("today")
}

fn checksum(body: &str) -> String {
    format!("crc32={:08x}", crc32fast::hash(body.as_bytes()))
}

/// Reads and verifies the record at `path`.
pub fn read(path: &Path) -> RecordRead {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return RecordRead::Missing,
        Err(e) => return RecordRead::Damaged(format!("cannot be read: {e}")),
    };
    let mut text = String::new();
    if let Err(e) = file.take(RECORD_MAX + 1).read_to_string(&mut text) {
        return RecordRead::Damaged(format!("cannot be read: {e}"));
    }
    if text.len() as u64 > RECORD_MAX {
        return RecordRead::Damaged(format!("is larger than the {RECORD_MAX} bytes a record holds"));
    }
    if text.is_empty() {
        return RecordRead::Damaged("is empty (0 bytes)".into());
    }
    let mut lines = text.lines();
    let (Some(body), Some(sum)) = (lines.next(), lines.next()) else {
        return RecordRead::Damaged("is truncated (no checksum line)".into());
    };
    if sum != checksum(body) {
        return RecordRead::Damaged("fails its checksum".into());
    }
    match serde_json::from_str(body) {
        Ok(r) => RecordRead::Valid(r),
        Err(e) => RecordRead::Damaged(format!("is not a record: {e}")),
    }
}

/// Replaces the record at `path` atomically: a temporary file (owner-only) written and
/// fsynced, renamed over the record, the rename on disk before it returns so it survives
/// a power cut; a failed write leaves no temporary file ([`crate::private_files::write_durably`]).
pub fn write(path: &Path, record: &BudgetRecord) -> std::io::Result<()> {
    let body = serde_json::to_string(record).map_err(std::io::Error::other)?;
    let text = format!("{body}\n{}\n", checksum(&body));
    crate::private_files::write_durably(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(used: u32) -> BudgetRecord {
        BudgetRecord {
            day: NaiveDate::from_ymd_opt(2026, 11, 27).expect("date"),
            used,
            limit: 5,
            written_utc: "2026-11-27T10:00:00.000Z".into(),
            ledger_damage: None,
        }
    }

    #[test]
    fn a_written_record_reads_back_and_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("dir");
        let path = path_for(&dir.path().join("ledger.db"));
        assert_eq!(path.file_name().and_then(|n| n.to_str()), Some("ledger.today"));
        assert_eq!(read(&path), RecordRead::Missing);
        write(&path, &record(3)).expect("write");
        assert_eq!(read(&path), RecordRead::Valid(record(3)));
        write(&path, &record(4)).expect("replace");
        assert_eq!(read(&path), RecordRead::Valid(record(4)));
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert!(!path.with_extension("today.tmp").exists(), "no temporary file left behind");
    }

    #[test]
    fn every_kind_of_damage_is_told_apart_from_a_missing_record() {
        let dir = tempfile::tempdir().expect("dir");
        let path = path_for(&dir.path().join("ledger.db"));
        write(&path, &record(3)).expect("write");
        let good = std::fs::read_to_string(&path).expect("read");
        let damaged = |text: &str| {
            std::fs::write(&path, text).expect("write");
            match read(&path) {
                RecordRead::Damaged(why) => why,
                other => panic!("{text:?} read as {other:?}"),
            }
        };
        assert!(damaged("").contains("empty"));
        assert!(damaged(good.lines().next().expect("body")).contains("truncated"));
        assert!(damaged(&good.replace("\"used\":3", "\"used\":0")).contains("checksum"));
        assert!(damaged(&"x".repeat(5000)).contains("larger"));
        let body = "{\"day\":1}";
        assert!(damaged(&format!("{body}\n{}\n", checksum(body))).contains("not a record"));
    }
}
