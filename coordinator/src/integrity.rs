//! The coordinator's database, guarded at start: an SQLite file that is empty,
//! truncated, not SQLite, damaged, or another program's database is refused — naming
//! the file and the fix — rather than silently becoming an empty pool; a PostgreSQL
//! database holding another program's tables likewise. Files are kept private (0600:
//! the database with its `-wal` and `-shm`), and a running coordinator holds a shared
//! lock on its SQLite file so that a restore (`crate::backup`) cannot replace it
//! underneath.
//!
//! A missing SQLite file is the one case that starts a new pool: it is created here,
//! owner-only, before SQLite opens it (SQLite gives `-wal` and `-shm` the main file's
//! permissions).

use crate::owner_only;
use std::io::Read;
use std::path::{Path, PathBuf};

/// SQLite's 16-byte header string.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// The table every Lull coordinator database has (sqlx's record of migrations).
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// What a database path held before the coordinator opened it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// Nothing: a new pool starts here.
    Missing,
    /// An SQLite file whose header is whole.
    Database,
}

/// Why a database is refused: what is wrong, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub what: String,
    pub fix: &'static str,
}

/// The fix for a damaged, emptied or truncated file.
pub const RESTORE: &str = "If it held this pool, restore it from a backup: stop the coordinator and run `lull coordinator restore \
    BACKUP` (backups are made with `lull coordinator backup PATH`; see README, \"Backups\"); to start a new pool instead, move \
    the file away";

/// The fix for another program's file.
pub const FOREIGN: &str = "Name the pool's database with --db, or move this file away to start a new pool here";

fn refuse(what: String, fix: &'static str) -> Refusal {
    Refusal { what, fix }
}

/// Checks the SQLite file at `path` before anything opens it, reading only its header:
/// missing (a new pool), or an SQLite file whose length agrees with its header. Empty,
/// short, cut-off and non-SQLite files are refused.
pub fn check_file(path: &Path) -> Result<Found, Refusal> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Found::Missing),
        Err(e) => return Err(refuse(format!("cannot be read: {e}"), FOREIGN)),
    };
    if !meta.is_file() {
        return Err(refuse("is not a file".into(), FOREIGN));
    }
    let len = meta.len();
    if len == 0 {
        return Err(refuse("is empty (0 bytes): whatever it held is gone".into(), RESTORE));
    }
    let mut header = [0u8; 100];
    let mut f = std::fs::File::open(path).map_err(|e| refuse(format!("cannot be read: {e}"), FOREIGN))?;
    let got = read_up_to(&mut f, &mut header).map_err(|e| refuse(format!("cannot be read: {e}"), FOREIGN))?;
    let magic_len = got.min(MAGIC.len());
    if header[..magic_len] != MAGIC[..magic_len] {
        return Err(refuse("is not an SQLite database (another program's file, or overwritten)".into(), FOREIGN));
    }
    if got < header.len() {
        return Err(refuse(format!("is truncated: {len} bytes, shorter than an SQLite header"), RESTORE));
    }
    let page_size = match u16::from_be_bytes([header[16], header[17]]) {
        1 => 65_536u64,
        n => u64::from(n),
    };
    if !(512..=65_536).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(refuse(format!("has a damaged header (page size {page_size})"), RESTORE));
    }
    // The in-header page count is valid when its "version-valid-for" matches the change
    // counter (SQLite ≥ 3.7.0 keeps it so).
    let pages = u64::from(u32::from_be_bytes([header[28], header[29], header[30], header[31]]));
    let valid = header[92..96] == header[24..28];
    if len % page_size != 0 || (valid && len < pages * page_size) {
        let expected = if valid {
            format!("its header says {} bytes", pages * page_size)
        } else {
            format!("not a whole number of {page_size}-byte pages")
        };
        return Err(refuse(format!("is truncated: {len} bytes, {expected}"), RESTORE));
    }
    Ok(Found::Database)
}

fn read_up_to(f: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..])? {
            0 => break,
            n => got += n,
        }
    }
    Ok(got)
}

/// Creates a missing database file, owner-only (0600), so SQLite opens a private file
/// and gives its `-wal` and `-shm` the same mode. An existing file is left alone.
pub fn create_private(path: &Path) -> std::io::Result<()> {
    match owner_only::open_owner_only(std::fs::OpenOptions::new().write(true).create_new(true), path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// The database file and its `-wal` and `-shm` companions.
pub fn companions(path: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| {
        let mut s = path.as_os_str().to_owned();
        s.push(suffix);
        PathBuf::from(s)
    };
    [path.to_path_buf(), with("-wal"), with("-shm")]
}

/// Makes `path` owner-only (0600) if it exists and others may read or write it; returns
/// whether it changed anything.
pub fn make_private(path: &Path) -> std::io::Result<bool> {
    let others = match owner_only::others_may_access(path) {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    if !others {
        return Ok(false);
    }
    owner_only::set_owner_only(path)?;
    Ok(true)
}

/// Makes the database file and its companions owner-only, saying once what it tightened.
pub fn make_files_private(path: &Path) {
    for p in companions(path) {
        match make_private(&p) {
            Ok(true) => tracing::info!(file = %p.display(), "made owner-only (0600): other local users could read it"),
            Ok(false) => {}
            Err(e) => tracing::warn!(file = %p.display(), error = %e, "could not make it owner-only"),
        }
    }
}

/// The verdict on a database's tables (`tables`: every table it has) and SQLite's
/// `quick_check` (`None` for PostgreSQL): damaged, another program's, or an empty file
/// that `found` says existed, are refused.
pub fn check_contents(tables: &[String], quick_check: Option<&[String]>, found: Found) -> Result<(), Refusal> {
    if let Some(lines) = quick_check {
        if lines != ["ok"] {
            // A row may hold several lines ("*** in database main ***\nPage 3: ..."): the
            // refusal is one line.
            let shown: Vec<&str> = lines.iter().flat_map(|l| l.lines()).map(str::trim).filter(|l| !l.is_empty()).take(3).collect();
            return Err(refuse(format!("is damaged (SQLite quick_check: {})", shown.join("; ")), RESTORE));
        }
    }
    if tables.is_empty() {
        return match found {
            Found::Missing => Ok(()),
            Found::Database => Err(refuse("is an SQLite database with no tables, not this pool's".into(), RESTORE)),
        };
    }
    if !tables.iter().any(|t| t == MIGRATIONS_TABLE) {
        let mut names: Vec<&str> = tables.iter().map(String::as_str).take(5).collect();
        if tables.len() > 5 {
            names.push("…");
        }
        return Err(refuse(format!("is not a Lull coordinator database (it holds the tables {})", names.join(", ")), FOREIGN));
    }
    Ok(())
}

/// Whether an SQLite error says the file is damaged or not a database
/// (`SQLITE_CORRUPT` 11, `SQLITE_NOTADB` 26, or their messages).
pub fn is_damage(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(d) => {
            let code = d.code();
            matches!(code.as_deref(), Some("11" | "26" | "267" | "523")) || says_damaged(d.message())
        }
        other => says_damaged(&other.to_string()),
    }
}

fn says_damaged(text: &str) -> bool {
    text.contains("malformed") || text.contains("file is not a database")
}

/// A shared lock on an SQLite database file, held while a coordinator serves it: a
/// restore takes the exclusive one, and so refuses while any coordinator runs.
#[derive(Debug)]
pub struct ServeLock {
    _file: std::fs::File,
}

/// Takes the shared serving lock on `path` (refused while a restore holds it).
pub fn serve_lock(path: &Path) -> std::io::Result<ServeLock> {
    let f = std::fs::File::open(path)?;
    match f.try_lock_shared() {
        Ok(()) => Ok(ServeLock { _file: f }),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(std::io::Error::new(std::io::ErrorKind::WouldBlock, "a restore is replacing this database; try again when it is done"))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// A real SQLite file made by the sqlite3 library (through sqlx) with a few pages.
    fn real_db(dir: &Path) -> PathBuf {
        let p = dir.join("real.db");
        let url = format!("sqlite://{}?mode=rwc", p.display());
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
            sqlx::any::install_default_drivers();
            let mut c = <sqlx::AnyConnection as sqlx::Connection>::connect(&url).await.unwrap();
            sqlx::Executor::execute(
                &mut c,
                "CREATE TABLE _sqlx_migrations(x); CREATE TABLE t(x); INSERT INTO t VALUES (randomblob(20000));",
            )
            .await
            .unwrap();
            sqlx::Connection::close(c).await.unwrap();
        });
        p
    }

    #[test]
    fn files_are_judged_by_their_header() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(check_file(&dir.path().join("none.db")), Ok(Found::Missing));
        let real = real_db(dir.path());
        assert_eq!(check_file(&real), Ok(Found::Database));
        let bytes = std::fs::read(&real).unwrap();
        assert!(check_file(&write(dir.path(), "empty.db", b"")).unwrap_err().what.contains("empty"));
        assert!(check_file(&write(dir.path(), "short.db", &bytes[..50])).unwrap_err().what.contains("truncated"));
        let cut = check_file(&write(dir.path(), "cut.db", &bytes[..bytes.len() - 4096])).unwrap_err();
        assert!(cut.what.contains("truncated") && cut.fix == RESTORE, "{cut:?}");
        assert!(check_file(&write(dir.path(), "odd.db", &bytes[..bytes.len() - 100])).unwrap_err().what.contains("truncated"));
        let junk = check_file(&write(dir.path(), "junk.db", &[7u8; 10_000])).unwrap_err();
        assert!(junk.what.contains("not an SQLite") && junk.fix == FOREIGN, "{junk:?}");
    }

    #[test]
    fn contents_must_be_this_pools() {
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_contents(&[], Some(&t(&["ok"])), Found::Missing).is_ok());
        assert!(check_contents(&t(&["_sqlx_migrations", "jobs"]), Some(&t(&["ok"])), Found::Database).is_ok());
        assert!(check_contents(&[], Some(&t(&["ok"])), Found::Database).unwrap_err().what.contains("no tables"));
        assert!(check_contents(&t(&["photos"]), None, Found::Database).unwrap_err().what.contains("photos"));
        let bad = check_contents(
            &t(&["_sqlx_migrations"]),
            Some(&t(&["*** in database main ***", "Page 5: btreeInitPage() returns error code 11"])),
            Found::Database,
        )
        .unwrap_err();
        assert!(bad.what.contains("damaged") && bad.fix == RESTORE, "{bad:?}");
        // SQLite puts the header and the first finding in one row, a newline between: the
        // refusal is still one line (a failing command says why once).
        let bad = check_contents(
            &t(&["_sqlx_migrations"]),
            Some(&t(&["*** in database main ***\nPage 5: btreeInitPage() returns error code 11", "Page 7: never used"])),
            Found::Database,
        )
        .unwrap_err();
        assert!(!bad.what.contains('\n'), "{bad:?}");
        assert!(
            bad.what.ends_with(
                "(SQLite quick_check: *** in database main ***; Page 5: btreeInitPage() returns error code 11; Page 7: never used)"
            ),
            "{bad:?}"
        );
    }

    #[test]
    fn files_are_made_private_and_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "c.db", b"x");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(make_private(&p).unwrap());
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(!make_private(&p).unwrap());
        let n = dir.path().join("new.db");
        create_private(&n).unwrap();
        assert_eq!(std::fs::metadata(&n).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_served_file_cannot_be_locked_for_a_restore() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "c.db", b"x");
        let held = serve_lock(&p).unwrap();
        let f = std::fs::File::open(&p).unwrap();
        assert!(f.try_lock().is_err(), "the exclusive lock while a coordinator serves");
        drop(held);
        assert!(f.try_lock().is_ok());
        assert!(serve_lock(&p).is_err(), "no serving while a restore holds it");
    }
}
