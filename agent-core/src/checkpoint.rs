//! The checkpoint file of a checkpointable leased job: where its guest finds it, how the
//! coordinator link reads it for an upload, and how a downloaded one is put in place.
//!
//! The convention: a checkpointable guest gets `LULL_CHECKPOINT`, the absolute path of
//! [`CHECKPOINT_FILE`] in its work directory. It writes its state there whenever it likes
//! (atomically is its business: write a temporary file beside it, then rename it over),
//! and at start it resumes from the file if it is there. The link uploads the file when it
//! has changed (another inode, size or modification time) with each lease renewal and
//! once more after the guest ended by eviction; with the next lease, on this machine or
//! another, it downloads the last upload into the new work directory before the guest
//! starts. At most [`lull_protocol::CHECKPOINT_MAX`] bytes (the coordinator's limit).
//!
//! The guest owns its work directory, and an agent running as root reads the file for
//! it: so the file is opened without following a symbolic link, must be a regular file
//! and must belong to whoever owns the work directory (a hard link to someone else's
//! file is refused), and is read only up to the limit.

use crate::sys::fs as sysfs;
use crate::sys::types::FileId;
use lull_protocol::CHECKPOINT_MAX;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The checkpoint file's name in the guest's work directory.
pub const CHECKPOINT_FILE: &str = "lull-checkpoint";

/// Where a guest working in `workdir` keeps its checkpoint.
pub fn path_in(workdir: &Path) -> PathBuf {
    workdir.join(CHECKPOINT_FILE)
}

/// A checkpoint file's identity; any difference means it changed (write + rename gives
/// it a new inode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    id: FileId,
    len: u64,
    mtime_s: i64,
    mtime_ns: i64,
}

impl Stamp {
    fn of(m: &std::fs::Metadata) -> Self {
        let (mtime_s, mtime_ns) = sysfs::mtime(m);
        Self { id: sysfs::file_id(m), len: m.len(), mtime_s, mtime_ns }
    }
}

/// A checkpoint that cannot be read or written.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error("checkpoint {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("checkpoint {path} is {size} bytes, more than the {max} bytes a checkpoint may hold; it is not uploaded")]
    TooBig { path: String, size: u64, max: usize },
    #[error("checkpoint {path} is not a regular file (a symbolic link, directory or device is never uploaded)")]
    NotAFile { path: String },
    #[error("checkpoint {path} belongs to uid {owner}, not to the work directory's owner (uid {expected}); it is not uploaded")]
    ForeignOwner { path: String, owner: u32, expected: u32 },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CheckpointError + '_ {
    move |source| CheckpointError::Io { path: path.display().to_string(), source }
}

/// Reads the checkpoint at `path` if it is there and differs from `last` (the stamp of
/// what was last uploaded or downloaded): `Ok(None)` when it is missing or unchanged.
pub fn read_changed(path: &Path, last: Option<Stamp>) -> Result<Option<(Stamp, Vec<u8>)>, CheckpointError> {
    let shown = || path.display().to_string();
    // Not following a link; not blocking on a FIFO the guest put there.
    let file = match sysfs::no_follow_nonblocking(std::fs::OpenOptions::new().read(true)).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if sysfs::is_symlink_refusal(&e) => return Err(CheckpointError::NotAFile { path: shown() }),
        Err(e) => return Err(io(path)(e)),
    };
    let meta = file.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(CheckpointError::NotAFile { path: shown() });
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let expected = sysfs::ownership(&std::fs::metadata(dir).map_err(io(dir))?).uid;
    let owner = sysfs::ownership(&meta).uid;
    if owner != expected {
        return Err(CheckpointError::ForeignOwner { path: shown(), owner, expected });
    }
    let stamp = Stamp::of(&meta);
    if last == Some(stamp) {
        return Ok(None);
    }
    if meta.len() > CHECKPOINT_MAX as u64 {
        return Err(CheckpointError::TooBig { path: shown(), size: meta.len(), max: CHECKPOINT_MAX });
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(CHECKPOINT_MAX as u64 + 1).read_to_end(&mut data).map_err(io(path))?;
    if data.len() > CHECKPOINT_MAX {
        // It grew while read (the guest writes in place).
        return Err(CheckpointError::TooBig { path: shown(), size: data.len() as u64, max: CHECKPOINT_MAX });
    }
    Ok(Some((stamp, data)))
}

/// Puts a downloaded checkpoint at `path` (in a new work directory, before the guest
/// starts; the runtime then hands the directory and its files to the guests' account),
/// written to a temporary file and renamed, readable by its owner only. Returns its stamp,
/// so that it is not uploaded back unchanged.
pub fn put_in_place(path: &Path, data: &[u8]) -> Result<Stamp, CheckpointError> {
    use std::io::Write;
    if data.len() > CHECKPOINT_MAX {
        return Err(CheckpointError::TooBig { path: path.display().to_string(), size: data.len() as u64, max: CHECKPOINT_MAX });
    }
    let tmp = path.with_extension("lull-download");
    let mut f = sysfs::no_follow(sysfs::create_mode(std::fs::OpenOptions::new().write(true).create(true).truncate(true), 0o600))
        .open(&tmp)
        .map_err(io(&tmp))?;
    f.write_all(data).map_err(io(&tmp))?;
    f.sync_all().map_err(io(&tmp))?;
    drop(f);
    std::fs::rename(&tmp, path).map_err(io(path))?;
    let meta = std::fs::symlink_metadata(path).map_err(io(path))?;
    Ok(Stamp::of(&meta))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_checkpoint_is_none_and_a_written_one_is_read_once_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let p = path_in(dir.path());
        assert!(read_changed(&p, None).unwrap().is_none(), "no file, nothing to upload");

        std::fs::write(&p, b"count=7").unwrap();
        let (stamp, data) = read_changed(&p, None).unwrap().expect("a new checkpoint is read");
        assert_eq!(data, b"count=7");
        assert!(read_changed(&p, Some(stamp)).unwrap().is_none(), "unchanged: not read again");

        // The guest's write + rename: a new inode, so a change even at the same size.
        let tmp = dir.path().join("ck.tmp");
        std::fs::write(&tmp, b"count=8").unwrap();
        std::fs::rename(&tmp, &p).unwrap();
        let (stamp2, data) = read_changed(&p, Some(stamp)).unwrap().expect("the renamed file is new");
        assert_eq!(data, b"count=8");
        assert_ne!(stamp, stamp2);
    }

    #[test]
    fn a_downloaded_checkpoint_is_in_place_and_not_uploaded_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = path_in(dir.path());
        let stamp = put_in_place(&p, b"\x00\x01state").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"\x00\x01state");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(read_changed(&p, Some(stamp)).unwrap().is_none(), "what was downloaded is not sent back");
        assert_eq!(read_changed(&p, None).unwrap().map(|(_, d)| d), Some(b"\x00\x01state".to_vec()));
        assert!(!dir.path().join("lull-checkpoint.lull-download").exists(), "no temporary file left");
        // Over the limit: refused before anything is written.
        let big = vec![0u8; CHECKPOINT_MAX + 1];
        assert!(matches!(put_in_place(&p, &big), Err(CheckpointError::TooBig { .. })));
        assert_eq!(std::fs::read(&p).unwrap(), b"\x00\x01state");
    }

    #[test]
    fn links_devices_and_oversized_files_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = path_in(dir.path());
        let secret = dir.path().join("elsewhere");
        std::fs::write(&secret, b"secret").unwrap();
        std::os::unix::fs::symlink(&secret, &p).unwrap();
        let e = read_changed(&p, None).unwrap_err();
        assert!(matches!(e, CheckpointError::NotAFile { .. }), "{e}");
        assert!(e.to_string().contains("lull-checkpoint") && e.to_string().contains("symbolic link"), "{e}");
        std::fs::remove_file(&p).unwrap();

        std::fs::create_dir(&p).unwrap();
        assert!(matches!(read_changed(&p, None), Err(CheckpointError::NotAFile { .. })));
        std::fs::remove_dir(&p).unwrap();

        // A FIFO neither blocks the link nor is read.
        let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(read_changed(&p, None), Err(CheckpointError::NotAFile { .. })));
        std::fs::remove_file(&p).unwrap();

        // A sparse file past the limit: refused from its size, without reading it.
        let f = std::fs::File::create(&p).unwrap();
        f.set_len(CHECKPOINT_MAX as u64 + 1).unwrap();
        let e = read_changed(&p, None).unwrap_err();
        assert!(matches!(e, CheckpointError::TooBig { size, .. } if size == CHECKPOINT_MAX as u64 + 1), "{e}");
        f.set_len(CHECKPOINT_MAX as u64).unwrap();
        assert_eq!(read_changed(&p, None).unwrap().map(|(_, d)| d.len()), Some(CHECKPOINT_MAX), "exactly the limit is fine");
    }

    #[test]
    fn a_file_of_another_owner_is_refused() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: needs root to give a file to another owner");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let p = path_in(dir.path());
        std::fs::write(&p, b"x").unwrap();
        std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
        let e = read_changed(&p, None).unwrap_err();
        assert!(matches!(e, CheckpointError::ForeignOwner { owner: 65534, expected: 0, .. }), "{e}");
    }
}
