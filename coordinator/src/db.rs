//! Storage: one `sqlx::AnyPool` over either an embedded SQLite file (the default) or a
//! PostgreSQL server (`postgres://…`), with the schema migrated on connect.
//!
//! Both dialects run the *same* SQL text (sqlx passes `$1` placeholders to both; SQLite
//! reads `$N` as positional). Where they differ the caller asks `Db::dialect`: the
//! migrations (`migrations/sqlite` and `migrations/postgres`, which differ only in
//! auto-increment ids and byte strings), `FOR UPDATE` row locks on PostgreSQL (a machine's
//! record batches, key revocation), SQLite's bound on parameters per statement and its
//! planner hint in the lease statement, leadership (`scheduling::replicas`) and backups.
//! Values cross the boundary only as `i64`, `f64`, `String` and bytes, the types `Any`
//! supports on both; times are Unix milliseconds, days are `YYYY-MM-DD` text.

use crate::integrity;
use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Executor};
use std::time::Duration;

/// A storage failure. Every message names the database it was about with its password
/// hidden ([`redact_url`]), and says it once.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database URL {0:?} is neither sqlite:… nor postgres://…")]
    BadUrl(String),
    #[error("database {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("database {url}: no answer within {secs} s")]
    Timeout { url: String, secs: u64 },
    #[error("database {url}: migrating the schema: {reason}")]
    Migrate { url: String, reason: String },
    /// The file or database is not (or no longer) this pool's: empty, truncated,
    /// damaged or another program's (see [`crate::integrity`]).
    #[error("database {url} {what}: refusing to start on it. {fix}")]
    Refused { url: String, what: String, fix: &'static str },
}

/// How long opening a database may take before it is given up as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a URL's passwords are: the user-info's (`scheme://user:PASSWORD@host`) and
/// any `password=` query parameter's, as byte ranges.
fn password_spans(url: &str) -> Vec<std::ops::Range<usize>> {
    let mut spans = Vec::new();
    if let Some(s) = url.find("://").map(|i| i + 3) {
        let authority_end = url[s..].find(['/', '?', '#']).map_or(url.len(), |i| s + i);
        if let Some(at) = url[s..authority_end].rfind('@').map(|i| s + i) {
            if let Some(colon) = url[s..at].find(':').map(|i| s + i) {
                spans.push(colon + 1..at);
            }
        }
    }
    if let Some(q) = url.find('?') {
        let mut start = q + 1;
        for part in url[q + 1..].split('&') {
            if let Some((k, _)) = part.split_once('=') {
                if k.eq_ignore_ascii_case("password") {
                    spans.push(start + k.len() + 1..start + part.len());
                }
            }
            start += part.len() + 1;
        }
    }
    spans
}

/// Whether a URL carries a password (in its user-info or a `password=` parameter).
pub fn has_password(url: &str) -> bool {
    password_spans(url).into_iter().any(|r| !r.is_empty())
}

/// A database URL fit to print: every password in it replaced by `***`. The one
/// function every message that shows a database URL goes through.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    let mut spans = password_spans(url);
    spans.sort_by_key(|r| std::cmp::Reverse(r.start));
    for r in spans {
        out.replace_range(r, "***");
    }
    out
}

/// `text` with every password of `url` in it replaced by `***` (a driver's message
/// might quote the URL).
fn scrub(text: &str, url: &str) -> String {
    password_spans(url).into_iter().map(|r| &url[r]).filter(|p| !p.is_empty()).fold(text.to_string(), |t, p| t.replace(p, "***"))
}

/// Which SQL dialect the pool speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    Sqlite,
    Postgres,
}

/// The coordinator's database.
#[derive(Clone, Debug)]
pub struct Db {
    pub pool: AnyPool,
    pub dialect: Dialect,
    /// The full connection URL (with its password): for the scheduler's lock session and
    /// its LISTEN connection, which need connections of their own. Never shown.
    url: String,
    /// The SQLite file (none for PostgreSQL).
    pub path: Option<std::path::PathBuf>,
}

/// The SQLite file a database URL names (`sqlite:PATH`, `sqlite://PATH?…` or a bare
/// path), if it names one.
pub fn sqlite_path(url: &str) -> Option<&str> {
    let path = match url.strip_prefix("sqlite:") {
        Some(rest) => rest.trim_start_matches("//"),
        None if !url.contains("://") && !url.is_empty() => url,
        None => return None,
    };
    Some(path.split('?').next().unwrap_or(path)).filter(|p| !p.is_empty() && *p != ":memory:")
}

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

impl Db {
    /// The connection URL, password included: pass it only to a connector, never to logs.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A read-only transaction whose statements all see one snapshot of the database, for
    /// a view read in several statements (a job's row, then its tasks, then its placement)
    /// that must not show a write that landed between them (a job still `queued` beside
    /// its task leased to a machine). SQLite in WAL mode holds the snapshot of the first
    /// read until the end; PostgreSQL needs `REPEATABLE READ` (its default gives each
    /// statement a snapshot of its own). Ends when dropped.
    pub async fn read_snapshot(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>, sqlx::Error> {
        let mut tx = self.pool.begin().await?;
        if self.dialect == Dialect::Postgres {
            tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY").await?;
        }
        Ok(tx)
    }

    /// Connects to `url` and migrates the schema. `sqlite:PATH` or
    /// `postgres://user@host/db` (the password from the URL, `PGPASSWORD` or
    /// `~/.pgpass`). A bare path is taken as an SQLite file.
    ///
    /// A missing SQLite file starts a new pool (created owner-only); an existing one must
    /// be this pool's, whole and undamaged, or it is refused naming the file and the fix
    /// ([`crate::integrity`]); so is a PostgreSQL database holding another program's
    /// tables. A database that does not answer within [`CONNECT_TIMEOUT`] is given up;
    /// errors name the database with its password hidden.
    pub async fn connect(url: &str) -> Result<Self, DbError> {
        sqlx::any::install_default_drivers();
        let shown = redact_url(url);
        let (full, dialect) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (url.to_string(), Dialect::Postgres)
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            let rest = rest.trim_start_matches("//");
            let sep = if rest.contains('?') { '&' } else { '?' };
            let url = if rest.contains("mode=") { format!("sqlite://{rest}") } else { format!("sqlite://{rest}{sep}mode=rwc") };
            (url, Dialect::Sqlite)
        } else if !url.contains("://") && !url.is_empty() {
            (format!("sqlite://{url}?mode=rwc"), Dialect::Sqlite)
        } else {
            return Err(DbError::BadUrl(shown));
        };
        let path = match dialect {
            Dialect::Sqlite => sqlite_path(url).map(std::path::PathBuf::from),
            Dialect::Postgres => None,
        };
        let refused = |r: integrity::Refusal| DbError::Refused { url: shown.clone(), what: r.what, fix: r.fix };
        let found = match &path {
            Some(p) => {
                let found = integrity::check_file(p).map_err(refused)?;
                if found == integrity::Found::Missing && full.contains("mode=rwc") {
                    integrity::create_private(p).map_err(|e| DbError::Connect { url: shown.clone(), reason: e.to_string() })?;
                }
                found
            }
            None => integrity::Found::Missing,
        };
        let failed = |e: sqlx::Error| {
            if dialect == Dialect::Sqlite && integrity::is_damage(&e) {
                return DbError::Refused { url: shown.clone(), what: format!("is damaged ({e})"), fix: integrity::RESTORE };
            }
            DbError::Connect { url: shown.clone(), reason: scrub(&e.to_string(), url) }
        };
        // One plain connection first, within the time limit: it fails fast with the real
        // reason (refused, wrong password, no such file), where a pool would retry until
        // its acquire timeout and say only "pool timed out".
        // It also checks, before anything is written (no journal mode set, no migration),
        // that the database is this pool's and undamaged.
        let mut probe = tokio::time::timeout(CONNECT_TIMEOUT, <sqlx::AnyConnection as sqlx::Connection>::connect(&full))
            .await
            .map_err(|_| DbError::Timeout { url: shown.clone(), secs: CONNECT_TIMEOUT.as_secs() })?
            .map_err(failed)?;
        let checked = check_contents(&mut probe, dialect, found).await;
        let _ = sqlx::Connection::close(probe).await;
        checked.map_err(|e| match e {
            Ok(r) => refused(r),
            Err(e) => failed(e),
        })?;
        if let Some(p) = &path {
            integrity::make_files_private(p);
        }
        let pool = match dialect {
            // SQLite has one writer anyway; a single connection serialises the
            // coordinator's short transactions without SQLITE_BUSY upgrades, and WAL lets
            // other processes (`lull coordinator token create`) read and write beside it.
            Dialect::Sqlite => AnyPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(Duration::from_secs(30))
                .after_connect(|conn, _| {
                    Box::pin(async move {
                        conn.execute("PRAGMA journal_mode = WAL").await?;
                        // FULL: an acknowledged record or completion survives power loss too,
                        // not only a crash of the process (the agent forgets what we ack).
                        conn.execute("PRAGMA synchronous = FULL").await?;
                        conn.execute("PRAGMA busy_timeout = 10000").await?;
                        Ok(())
                    })
                })
                .connect(&full)
                .await
                .map_err(failed)?,
            Dialect::Postgres => {
                AnyPoolOptions::new().max_connections(16).acquire_timeout(Duration::from_secs(30)).connect(&full).await.map_err(failed)?
            }
        };
        let migrated = match dialect {
            Dialect::Sqlite => SQLITE_MIGRATIONS.run(&pool).await,
            Dialect::Postgres => POSTGRES_MIGRATIONS.run(&pool).await,
        };
        migrated.map_err(|e| DbError::Migrate { url: shown.clone(), reason: scrub(&e.to_string(), url) })?;
        if let Some(p) = &path {
            // The -wal and -shm exist now; a file another program made keeps no wider mode.
            integrity::make_files_private(p);
        }
        Ok(Self { pool, dialect, url: full, path })
    }

    /// Closes the pool (waits for connections to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Checks that the database is this pool's and, for SQLite, undamaged (`quick_check`,
/// which reads every page once). The outer error is the verdict (`Ok(refusal)`) or the
/// database's own failure (`Err`).
async fn check_contents(
    conn: &mut sqlx::AnyConnection,
    dialect: Dialect,
    found: integrity::Found,
) -> Result<(), Result<integrity::Refusal, sqlx::Error>> {
    let names = |rows: Vec<AnyRow>| rows.iter().map(|r| col::<String>(r, "name")).collect::<Result<Vec<_>, _>>();
    let (tables, quick_check) = match dialect {
        Dialect::Sqlite => {
            let lines = sqlx::query("PRAGMA quick_check")
                .fetch_all(&mut *conn)
                .await
                .map_err(Err)?
                .iter()
                .map(|r| sqlx::Row::try_get::<String, _>(r, 0))
                .collect::<Result<Vec<_>, _>>()
                .map_err(Err)?;
            let tables =
                names(sqlx::query("SELECT name FROM sqlite_master WHERE type = 'table'").fetch_all(&mut *conn).await.map_err(Err)?)
                    .map_err(Err)?;
            (tables, Some(lines))
        }
        Dialect::Postgres => {
            let rows =
                sqlx::query("SELECT CAST(table_name AS TEXT) AS name FROM information_schema.tables WHERE table_schema = current_schema()")
                    .fetch_all(&mut *conn)
                    .await
                    .map_err(Err)?;
            (names(rows).map_err(Err)?, None)
        }
    };
    integrity::check_contents(&tables, quick_check.as_deref(), found).map_err(Ok)
}

/// Logs a database failure met while serving; a damaged SQLite file is named as such,
/// with the fix.
pub fn log_sql_error(e: &sqlx::Error) {
    if integrity::is_damage(e) {
        tracing::error!(error = %e, "the database is damaged: stop the coordinator and restore it from a backup (`lull coordinator restore BACKUP`)");
    } else {
        tracing::error!(error = %e, "database error");
    }
}

/// Reads a column, mapping decode errors to `sqlx::Error`.
pub(crate) fn col<'r, T>(row: &'r AnyRow, name: &str) -> Result<T, sqlx::Error>
where
    T: sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    sqlx::Row::try_get(row, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden_wherever_they_stand() {
        assert_eq!(redact_url("postgres://nobody:s3cret@db:5432/lull"), "postgres://nobody:***@db:5432/lull");
        assert_eq!(redact_url("postgresql://u:p@ss:w@rd@h/db?sslmode=require"), "postgresql://u:***@h/db?sslmode=require");
        assert_eq!(redact_url("postgres://h/db?user=u&password=s3cret&x=1"), "postgres://h/db?user=u&password=***&x=1");
        assert_eq!(redact_url("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact_url("sqlite:/var/lib/lull/c.db"), "sqlite:/var/lib/lull/c.db");
        assert_eq!(redact_url("postgres://h/a@b:c"), "postgres://h/a@b:c", "an @ in the path is no user-info");
        assert_eq!(scrub("failed for postgres://u:s3cret@h (s3cret)", "postgres://u:s3cret@h"), "failed for postgres://u:***@h (***)");
        assert!(has_password("postgres://u:p@h/db") && has_password("postgres://u@h/db?password=p"));
        assert!(!has_password("postgres://u@h/db") && !has_password("postgres://u:@h/db") && !has_password("sqlite:/a:b@c"));
    }
}
