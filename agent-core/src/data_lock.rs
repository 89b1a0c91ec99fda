//! One agent per data directory. Two agents on one ledger would both account the same
//! machine (and a pause sent to one would surface in the other after a restart), so the
//! agent holds an exclusive `flock` on `agent.lock` in its data directory for its whole
//! life, with its pid written inside for the error a second agent gives. The kernel drops
//! the lock when the process ends, however it ends, so a crash leaves nothing stale.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::{Path, PathBuf};

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "agent.lock";

/// Why the data directory could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("another Lull agent{} is using the data directory {dir}: stop it first, or give this one its own (LULL_DATA_DIR)", pid.map(|p| format!(" (pid {p})")).unwrap_or_default())]
    Busy { dir: String, pid: Option<u32> },
    #[error("locking the data directory {dir}: {source}")]
    Io { dir: String, source: std::io::Error },
}

/// The held lock: released when dropped (or when the process ends).
#[derive(Debug)]
pub struct DataDirLock {
    file: File,
    path: PathBuf,
    /// The lock file was there before this agent took it.
    existed: bool,
}

impl DataDirLock {
    /// Creates the data directory if needed and takes its lock, or says which agent holds it.
    pub fn acquire(data_dir: &Path) -> Result<Self, LockError> {
        let io = |source| LockError::Io { dir: data_dir.display().to_string(), source };
        crate::private_files::create_dir(data_dir).map_err(io)?;
        let path = data_dir.join(LOCK_FILE);
        let existed = path.exists();
        let mut file = crate::private_files::open_private(OpenOptions::new().read(true).write(true).create(true).truncate(false), &path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let _ = file.read_to_string(&mut text);
                return Err(LockError::Busy { dir: data_dir.display().to_string(), pid: text.trim().parse().ok() });
            }
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        file.set_len(0).map_err(io)?;
        file.rewind().map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        Ok(Self { file, path, existed })
    }

    /// Whether the lock file is still the one this agent locked: false once the data
    /// directory (or the file) has been removed or replaced under the running agent.
    pub fn still_in_place(&self) -> bool {
        use crate::sys::fs::file_id;
        match (self.file.metadata(), std::fs::metadata(&self.path)) {
            (Ok(held), Ok(there)) => file_id(&held) == file_id(&there),
            _ => false,
        }
    }

    /// Whether an agent had run in this data directory before this one took the lock
    /// (the lock file, never removed, was already there): a ledger missing then was
    /// lost, not yet to be made (see `ledger_integrity`).
    pub fn existed_before(&self) -> bool {
        self.existed
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let dir = tempfile::tempdir().expect("dir");
        let first = DataDirLock::acquire(dir.path()).expect("first");
        assert!(!first.existed_before(), "a new directory had no agent before");
        // flock locks belong to the open file description: a second open in this very
        // process conflicts as a second agent would.
        let second = DataDirLock::acquire(dir.path()).expect_err("second");
        let msg = second.to_string();
        assert!(msg.contains(&format!("pid {}", std::process::id())), "{msg}");
        assert!(first.still_in_place());
        // Owner-only, whatever the umask (the directory Lull made, and the lock file).
        let mode = |p: &Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(p).expect("stat").permissions()) & 0o777;
        assert_eq!(mode(&dir.path().join(LOCK_FILE)), 0o600);
        let made = dir.path().join("made/data");
        drop(DataDirLock::acquire(&made).expect("lock in a new directory"));
        assert_eq!((mode(&made), mode(&made.join(LOCK_FILE))), (0o700, 0o600));
        drop(first);
        let again = DataDirLock::acquire(dir.path()).expect("free after drop");
        assert!(again.existed_before(), "the first agent left its lock file");
        std::fs::remove_dir_all(dir.path()).expect("rm");
        assert!(!again.still_in_place());
    }
}
