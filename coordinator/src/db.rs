//! Storage: one `sqlx::AnyPool` over either an embedded SQLite file (the default) or a
//! PostgreSQL server (`postgres://…`), with the schema migrated on connect.
//!
//! Both dialects run the *same* SQL text (sqlx passes `$1` placeholders to both; SQLite
//! reads `$N` as positional), except where the dialects differ: the migrations (see
//! `migrations/sqlite` and `migrations/postgres`, which differ only in auto-increment ids
//! and byte strings) and the lease claim, where PostgreSQL adds `FOR UPDATE SKIP LOCKED`
//! so several coordinator replicas can claim concurrently. Values cross the boundary
//! only as `i64`, `f64`, `String` and bytes, the types `Any` supports on both; times are
//! Unix milliseconds, days are `YYYY-MM-DD` text.

use sqlx::any::{AnyPoolOptions, AnyRow};
use sqlx::{AnyPool, Executor};
use std::time::Duration;

/// A storage failure.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("database URL {0:?} is neither sqlite:… nor postgres://…")]
    BadUrl(String),
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("database migration: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
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
}

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

impl Db {
    /// Connects to `url` and migrates the schema. `sqlite:PATH` (the file is created if
    /// missing) or `postgres://user:pass@host/db`. A bare path is taken as an SQLite file.
    pub async fn connect(url: &str) -> Result<Self, DbError> {
        sqlx::any::install_default_drivers();
        let (url, dialect) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (url.to_string(), Dialect::Postgres)
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            let rest = rest.trim_start_matches("//");
            let sep = if rest.contains('?') { '&' } else { '?' };
            let url = if rest.contains("mode=") { format!("sqlite://{rest}") } else { format!("sqlite://{rest}{sep}mode=rwc") };
            (url, Dialect::Sqlite)
        } else if !url.contains("://") && !url.is_empty() {
            (format!("sqlite://{url}?mode=rwc"), Dialect::Sqlite)
        } else {
            return Err(DbError::BadUrl(url.to_string()));
        };
        let pool = match dialect {
            // SQLite has one writer anyway; a single connection serialises the
            // coordinator's short transactions without SQLITE_BUSY upgrades, and WAL lets
            // other processes (`lull coordinator token create`) read and write beside it.
            Dialect::Sqlite => {
                AnyPoolOptions::new()
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
                    .connect(&url)
                    .await?
            }
            Dialect::Postgres => AnyPoolOptions::new().max_connections(16).acquire_timeout(Duration::from_secs(30)).connect(&url).await?,
        };
        match dialect {
            Dialect::Sqlite => SQLITE_MIGRATIONS.run(&pool).await?,
            Dialect::Postgres => POSTGRES_MIGRATIONS.run(&pool).await?,
        }
        Ok(Self { pool, dialect })
    }

    /// Closes the pool (waits for connections to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Reads a column, mapping decode errors to `sqlx::Error`.
pub(crate) fn col<'r, T>(row: &'r AnyRow, name: &str) -> Result<T, sqlx::Error>
where
    T: sqlx::Decode<'r, sqlx::Any> + sqlx::Type<sqlx::Any>,
{
    sqlx::Row::try_get(row, name)
}
