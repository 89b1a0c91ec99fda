//! Every file and directory Lull writes is its owner's only (0600 files, 0700
//! directories): the ledger tells when the owner typed, the credentials let a machine
//! speak for itself, the logs and the config tell more than a stranger should know.
//!
//! Three means, each a backstop for the others:
//! - [`owner_only_umask`]: every binary (`lull`, `lull-tray`, `lull-window`) sets a
//!   umask of 077 first thing, so whatever it or a library creates (SQLite's `-wal` and
//!   `-shm`, the daily log files, WebKit's caches) is private;
//! - explicit modes where Lull creates files and directories itself ([`create_dir`],
//!   [`create_file`], [`write`]);
//! - [`tighten`]: an existing install, made by an earlier version or under a wider umask,
//!   is tightened at start (group and other bits taken off), and what was tightened is
//!   logged once.
//!
//! On Windows the mode is an access control list (`sys/windows/fs.rs`): a protected list
//! granting the user and SYSTEM full control and no one else anything; a directory's
//! entries are inherited by what is created inside it, Windows' counterpart of the umask
//! (which does nothing there). [`tighten`] reads no list and changes nothing there yet.
//!
//! Nothing here follows a symbolic link or touches a file another user owns; a root
//! agent's guests' work directories (the guests' account's) and the path to them stay
//! passable as `Paths::create_work_root` made them.

use crate::sys::fs as sysfs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Group and other permission bits.
const OTHERS: u32 = 0o077;

/// Sets the process's umask to 077: call first in `main`, before any thread starts.
pub fn owner_only_umask() {
    sysfs::set_umask(0o077);
}

/// Creates `dir` and its missing parents owner-only (0700); an existing one keeps its mode
/// (see [`tighten`]).
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    sysfs::create_private_dir(dir)
}

/// Opens `path` with `opts` (which create it) owner-only: created 0600 and, should it have
/// existed with another mode, set to 0600 (on Windows: the owner-only list).
pub fn open_private(opts: &mut std::fs::OpenOptions, path: &Path) -> std::io::Result<std::fs::File> {
    let f = sysfs::create_mode(opts, 0o600).open(path)?;
    sysfs::set_file_mode(&f, 0o600)?;
    Ok(f)
}

/// Creates `path` (0600) if it does not exist; an existing file is left as it is.
pub fn create_file(path: &Path) -> std::io::Result<()> {
    match open_private(std::fs::OpenOptions::new().write(true).create_new(true), path) {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        r => r.map(drop),
    }
}

/// Whether others than the owner may open `path` (on Windows: anyone but the owner and
/// SYSTEM is in its access control list).
pub fn others_may_access(path: &Path) -> std::io::Result<bool> {
    sysfs::others_may_access(path)
}

/// Makes the file at `path` owner-only (0600; on Windows its access control list).
pub fn make_owner_only(path: &Path) -> std::io::Result<()> {
    sysfs::set_mode_no_follow(path, 0o600)
}

/// The temporary file a write of `path` goes through: `path` + `.tmp`.
fn temporary(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// The 0600 temporary file beside `path` ([`temporary`]), written and fsynced.
fn write_temporary(path: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let tmp = temporary(path);
    // A leftover temporary file of a crashed write may have had another mode: set again.
    let mut f = open_private(std::fs::OpenOptions::new().write(true).create(true).truncate(true), &tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    Ok(tmp)
}

/// Writes `bytes` to `path` through a 0600 temporary file renamed over it, so the file is
/// never readable by others, not even for a moment, whatever mode an older one had.
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::rename(write_temporary(path, bytes)?, path)
}

/// As [`write`], and the rename is on disk before it returns (the directory fsynced; on
/// Windows a write-through move). A failed write leaves no temporary file behind.
pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let written = write_temporary(path, bytes).and_then(|tmp| sysfs::replace_durably(&tmp, path));
    if written.is_err() {
        // A full disk leaves no half-written temporary file behind.
        let _ = std::fs::remove_file(temporary(path));
    }
    written
}

/// The mode a file or directory should have: `mode` without group and other bits; a
/// directory on a root agent's path to its guests' work directories (`passable`) keeps
/// the search (x) bits others need to pass through, never read or write.
pub fn private_mode(mode: u32, is_dir: bool, passable: bool) -> u32 {
    let perms = mode & 0o7777;
    if is_dir && passable {
        perms & !0o066
    } else {
        perms & !OTHERS
    }
}

/// Takes group and other bits off `path` when it is ours and wider than it should be;
/// `Some(path)` when it was tightened. Symbolic links are never followed.
fn tighten_one(path: &Path, passable: bool, me: u32) -> Option<PathBuf> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    let own = sysfs::ownership(&meta);
    if meta.file_type().is_symlink() || own.uid != me {
        return None;
    }
    let want = private_mode(own.mode, meta.is_dir(), passable);
    if want == own.mode {
        return None;
    }
    // Never a link's target, should the path have become one since it was looked at.
    sysfs::set_mode_no_follow(path, want).ok().map(|()| path.to_path_buf())
}

/// The entries of `dir` (none when it cannot be read).
fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir).map(|rd| rd.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

/// Tightens what Lull keeps: the data directory, everything directly in it, the log
/// files, the guests' work directories (`guests/*`, `jobs/*` of the work root inside
/// it, not what guests wrote inside them: a directory of 0700 already keeps others out),
/// the config file and its directory when that is Lull's own (`…/lull`), and the socket's
/// directory likewise. `work_root` is where guests' work directories go; when the agent
/// is root and that is inside the data directory, the path to it stays passable for the
/// guests' account. Returns what was tightened.
pub fn tighten(data_dir: &Path, config_file: &Path, socket: &Path, work_root: &Path) -> Vec<PathBuf> {
    let me = crate::sys::id::euid();
    let passable = |p: &Path| {
        me == 0 && p.is_dir() && (work_root.starts_with(p) || [work_root.join("guests"), work_root.join("jobs")].iter().any(|w| w == p))
    };
    let mut done = Vec::new();
    let mut one = |p: &Path| done.extend(tighten_one(p, passable(p), me));
    one(data_dir);
    for e in entries(data_dir) {
        one(&e);
    }
    for file in entries(&data_dir.join("logs")) {
        one(&file);
    }
    if work_root.starts_with(data_dir) {
        for sub in ["guests", "jobs"] {
            for w in entries(&work_root.join(sub)) {
                one(&w);
            }
        }
    }
    one(config_file);
    for lulls in [config_file.parent(), socket.parent()].into_iter().flatten() {
        if lulls.file_name().is_some_and(|n| n == "lull") {
            one(lulls);
        }
    }
    done
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).expect("stat").mode() & 0o7777
    }

    fn set(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).expect("chmod");
    }

    #[test]
    fn the_private_mode_takes_group_and_other_bits_off() {
        assert_eq!(private_mode(0o100644, false, false), 0o600);
        assert_eq!(private_mode(0o755, false, false), 0o700);
        assert_eq!(private_mode(0o40755, true, false), 0o700);
        assert_eq!(private_mode(0o755, true, true), 0o711, "passable, not listable");
        assert_eq!(private_mode(0o600, false, false), 0o600);
    }

    /// An install of an earlier version (0644 files, 0755 directories) is tightened;
    /// links are not followed; what was tightened is listed once.
    #[test]
    fn an_existing_install_is_tightened_at_start() {
        let home = tempfile::tempdir().expect("dir");
        let data = home.path().join("share/lull");
        let config_dir = home.path().join("config/lull");
        let runtime = home.path().join("run/lull");
        for d in [&data.join("logs"), &data.join("guests/g1"), &config_dir, &runtime] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        let outside = home.path().join("outside.txt");
        let files = ["ledger.db", "ledger.db-wal", "coordinator.json", "agent.lock", "calibration.svg", "logs/lull.2026-11-27.log"];
        for f in files.iter().map(|f| data.join(f)).chain([config_dir.join("config.toml"), outside.clone()]) {
            std::fs::write(&f, "x").expect("write");
            set(&f, 0o644);
        }
        std::os::unix::fs::symlink(&outside, data.join("link")).expect("symlink");
        for d in [&data, &data.join("logs"), &data.join("guests"), &data.join("guests/g1"), &config_dir, &runtime] {
            set(d, 0o755);
        }
        let done = tighten(&data, &config_dir.join("config.toml"), &runtime.join("agent.sock"), &data);
        for f in files.iter().map(|f| data.join(f)).chain([config_dir.join("config.toml")]) {
            assert_eq!(mode(&f), 0o600, "{}", f.display());
        }
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        for d in [&data.join("logs"), &data.join("guests/g1"), &config_dir, &runtime] {
            assert_eq!(mode(d), 0o700, "{}", d.display());
        }
        // A root agent's guests (another account) pass through to their work directories.
        for d in [&data, &data.join("guests")] {
            assert_eq!(mode(d), if root { 0o711 } else { 0o700 }, "{}", d.display());
        }
        assert_eq!(mode(&outside), 0o644, "a link's target is not Lull's to change");
        assert_eq!(done.len(), files.len() + 7, "{done:?}");
        assert!(tighten(&data, &config_dir.join("config.toml"), &runtime.join("agent.sock"), &data).is_empty(), "once");
        // A directory that is not Lull's own (a config file named by LULL_CONFIG in /etc,
        // a socket in /tmp) is left as it is.
        let shared = home.path().join("shared");
        std::fs::create_dir(&shared).expect("mkdir");
        set(&shared, 0o755);
        tighten(&data, &shared.join("my.toml"), &shared.join("agent.sock"), &data);
        assert_eq!(mode(&shared), 0o755);
    }

    /// Created owner-only whatever the umask: files, directories, and files rewritten
    /// over an older, wider one.
    #[test]
    fn files_and_directories_are_created_owner_only() {
        let home = tempfile::tempdir().expect("dir");
        let dir = home.path().join("a/b");
        create_dir(&dir).expect("mkdir");
        assert_eq!((mode(&home.path().join("a")), mode(&dir)), (0o700, 0o700));
        create_file(&dir.join("f")).expect("create");
        assert_eq!(mode(&dir.join("f")), 0o600);
        let p = dir.join("plot.svg");
        std::fs::write(&p, "old").expect("write");
        set(&p, 0o644);
        write(&p, b"new").expect("write");
        assert_eq!((mode(&p), std::fs::read_to_string(&p).expect("read")), (0o600, "new".to_string()));
    }
}
