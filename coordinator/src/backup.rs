//! Backups of an SQLite coordinator database and their restore (`lull coordinator backup
//! PATH`, `lull coordinator restore BACKUP`). A backup is taken online, while the
//! coordinator serves, with SQLite's `VACUUM INTO` (one read transaction: a consistent
//! copy), into a new owner-only file that is then checked. A restore checks the backup
//! (whole, undamaged, this pool's kind of database), refuses while a coordinator serves
//! the database (the serving lock, [`crate::integrity::serve_lock`]), keeps the current
//! file and its `-wal`/`-shm` beside it under a dated name, and puts a copy of the
//! backup in place. PostgreSQL databases are backed up with `pg_dump` ([`PG_ADVICE`]).

use crate::db::{col, Db, Dialect};
use crate::integrity::{self, companions, Found};
use crate::owner_only::open_owner_only;
use std::io::Write;
use std::path::{Path, PathBuf};

/// What to do for a PostgreSQL database, whose server has its own tools.
pub const PG_ADVICE: &str = "this coordinator's database is PostgreSQL: back it up with the server's own tool, for example \
    `pg_dump --format=custom --file lull.dump \"postgres://USER@HOST/DB\"` (the password from ~/.pgpass or PGPASSFILE), and \
    restore with `pg_restore --clean --dbname \"postgres://USER@HOST/DB\" lull.dump` while every coordinator is stopped";

/// A backup or restore failure, saying what to do.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0}")]
    Postgres(&'static str),
    #[error("{path} already exists: a backup never overwrites a file; name a new one")]
    Exists { path: String },
    #[error("{path}: {what}")]
    Io { path: String, what: String },
    #[error("backing up: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("{path} {what}: not a usable backup")]
    BadBackup { path: String, what: String },
    #[error("a coordinator is serving {path}: stop it (and every `lull up` on it) before restoring")]
    Serving { path: String },
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> BackupError + '_ {
    move |e| BackupError::Io { path: path.display().to_string(), what: e.to_string() }
}

/// What a backup holds, counted once it is written (or before it is restored).
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
pub struct Summary {
    pub path: PathBuf,
    pub bytes: u64,
    pub machines: i64,
    pub jobs: i64,
    pub records: i64,
    /// The newest migration applied (the schema version).
    pub schema: i64,
}

/// Writes a consistent copy of `db` to the new file `dest` (owner-only), checks it and
/// returns what it holds. Refused for PostgreSQL (see [`PG_ADVICE`]) and when `dest`
/// exists.
pub async fn backup(db: &Db, dest: &Path) -> Result<Summary, BackupError> {
    if db.dialect == Dialect::Postgres {
        return Err(BackupError::Postgres(PG_ADVICE));
    }
    match open_owner_only(std::fs::OpenOptions::new().write(true).create_new(true), dest) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(BackupError::Exists { path: dest.display().to_string() }),
        Err(e) => return Err(io(dest)(e)),
    }
    // VACUUM INTO takes the file name as an SQL string literal.
    let literal =
        dest.to_str().ok_or_else(|| BackupError::Io { path: dest.display().to_string(), what: "not UTF-8".into() })?.replace('\'', "''");
    let written = sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM INTO '{literal}'"))).execute(&db.pool).await;
    if let Err(e) = written {
        let _ = std::fs::remove_file(dest);
        return Err(e.into());
    }
    std::fs::File::open(dest).and_then(|f| f.sync_all()).map_err(io(dest))?;
    check_backup(dest).await
}

/// Opens `path` read-only and checks it is a whole, undamaged Lull coordinator database;
/// returns what it holds.
pub async fn check_backup(path: &Path) -> Result<Summary, BackupError> {
    let bad = |what: String| BackupError::BadBackup { path: path.display().to_string(), what };
    match integrity::check_file(path) {
        Ok(Found::Database) => {}
        Ok(Found::Missing) => return Err(bad("does not exist".into())),
        Err(r) => return Err(bad(r.what)),
    }
    sqlx::any::install_default_drivers();
    let url = format!("sqlite://{}?mode=ro", path.display());
    let mut conn = <sqlx::AnyConnection as sqlx::Connection>::connect(&url).await?;
    let lines: Vec<String> = sqlx::query("PRAGMA quick_check")
        .fetch_all(&mut conn)
        .await?
        .iter()
        .map(|r| sqlx::Row::try_get::<String, _>(r, 0))
        .collect::<Result<_, _>>()?;
    let tables: Vec<String> = sqlx::query("SELECT name FROM sqlite_master WHERE type = 'table'")
        .fetch_all(&mut conn)
        .await?
        .iter()
        .map(|r| col::<String>(r, "name"))
        .collect::<Result<_, _>>()?;
    integrity::check_contents(&tables, Some(&lines), Found::Database).map_err(|r| bad(r.what))?;
    let mut n = [0i64; 4];
    for (i, sql) in [
        "SELECT COUNT(*) AS n FROM agents",
        "SELECT COUNT(*) AS n FROM jobs",
        "SELECT COUNT(*) AS n FROM records",
        "SELECT CAST(COALESCE(MAX(version), 0) AS BIGINT) AS n FROM _sqlx_migrations WHERE success",
    ]
    .into_iter()
    .enumerate()
    {
        n[i] = col(&sqlx::query(sql).fetch_one(&mut conn).await?, "n")?;
    }
    let [machines, jobs, records, schema] = n;
    let _ = sqlx::Connection::close(conn).await;
    let bytes = std::fs::metadata(path).map_err(io(path))?.len();
    Ok(Summary { path: path.to_path_buf(), bytes, machines, jobs, records, schema })
}

/// What a restore did.
#[derive(Clone, Debug, serde::Serialize, PartialEq, Eq)]
pub struct Restored {
    pub from: Summary,
    /// Where the database it replaced now is (with its `-wal`/`-shm`), if there was one.
    pub kept: Option<PathBuf>,
}

/// Puts a copy of the backup `from` in place of the SQLite database `dest` (stopped):
/// the backup is checked first, the current file (and its `-wal`/`-shm`) is kept beside
/// it as `DEST.replaced-YYYYMMDDTHHMMSSZ`, and the copy is written owner-only and synced
/// before it takes the name in one rename. Refused while a coordinator serves `dest`.
pub async fn restore(from: &Path, dest: &Path) -> Result<Restored, BackupError> {
    let summary = check_backup(from).await?;
    let dir = dest.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // Held until the new file is in place: no coordinator starts on the old one meanwhile.
    let _lock = match std::fs::File::open(dest) {
        Ok(f) => match f.try_lock() {
            Ok(()) => Some(f),
            Err(std::fs::TryLockError::WouldBlock) => return Err(BackupError::Serving { path: dest.display().to_string() }),
            Err(std::fs::TryLockError::Error(e)) => return Err(io(dest)(e)),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(dest)(e)),
    };
    let tmp = dir.join(format!(".{}.restoring", dest.file_name().and_then(|n| n.to_str()).unwrap_or("coordinator.db")));
    let _ = std::fs::remove_file(&tmp);
    {
        let mut out = open_owner_only(std::fs::OpenOptions::new().write(true).create_new(true), &tmp).map_err(io(&tmp))?;
        let mut src = std::fs::File::open(from).map_err(io(from))?;
        std::io::copy(&mut src, &mut out).map_err(io(&tmp))?;
        out.flush().map_err(io(&tmp))?;
        out.sync_all().map_err(io(&tmp))?;
    }
    let kept = if _lock.is_some() { Some(set_aside(dest)?) } else { None };
    std::fs::rename(&tmp, dest).map_err(io(dest))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))?;
    Ok(Restored { from: summary, kept })
}

/// Keeps the database under `DEST.replaced-<UTC time>` (a second name for the file,
/// and its `-wal` and `-shm` renamed alike, so SQLite still reads them as one database);
/// `dest` itself is then replaced in one rename, never missing. Returns the kept name.
fn set_aside(dest: &Path) -> Result<PathBuf, BackupError> {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%SZ");
    let mut aside = dest.as_os_str().to_owned();
    aside.push(format!(".replaced-{stamp}"));
    let aside = PathBuf::from(aside);
    let [main, wal, shm] = companions(dest);
    let [main_aside, wal_aside, shm_aside] = companions(&aside);
    std::fs::hard_link(&main, &main_aside).map_err(io(&main_aside))?;
    for (from, to) in [(wal, wal_aside), (shm, shm_aside)] {
        match std::fs::rename(&from, &to) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(&from)(e)),
        }
    }
    Ok(aside)
}
