//! Where this data directory's coordinator lives, shared by every command that talks to
//! or administers the local pool (`lull up`, `lull coordinator …`, `lull jobs`,
//! `lull machines`): its default address, its files (database, address file, admin key),
//! the database an administrative command opens, and the async runtime they run on.

use crate::db_url::DbArg;
use agent_core::paths::Paths;
use anyhow::{Context, Result};
use coordinator::db::sqlite_path;
use coordinator::Db;
use std::path::{Path, PathBuf};

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:7878";

/// The data directory's coordinator files.
pub struct Files {
    pub db_url: String,
    pub url_file: PathBuf,
    pub admin_key_file: PathBuf,
}

/// The coordinator files of this data directory (nothing is created), for the database
/// `db` asks for (see [`DbArg::url`]: a password on the command line is refused).
pub fn files(db: &DbArg) -> Result<Files> {
    let f = data_files()?;
    Ok(Files { db_url: db.url()?.unwrap_or(f.db_url), ..f })
}

/// The data directory's coordinator files, its own SQLite database among them.
pub fn data_files() -> Result<Files> {
    let paths = Paths::from_env()?;
    Ok(Files {
        db_url: format!("sqlite:{}", paths.data_dir.join("coordinator.db").display()),
        url_file: paths.data_dir.join("coordinator.url"),
        admin_key_file: paths.data_dir.join("coordinator-admin.key"),
    })
}

/// The async runtime the local pool's commands run on (two workers).
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().context("starting the async runtime")
}

/// Opens an existing coordinator's database for an administrative command. Refuses,
/// creating nothing, when there is none: no coordinator was set up in this data
/// directory (and no `--db` names one), or the SQLite file named does not exist.
pub(crate) async fn admin_db(db: &DbArg) -> Result<Db> {
    let f = files(db)?;
    if let Some(path) = sqlite_path(&f.db_url) {
        if !Path::new(path).exists() {
            if db.url()?.is_none() {
                anyhow::bail!(
                    "no coordinator is set up here ({path} does not exist): start one with `lull up` or `lull coordinator serve`, \
                     or name its database with --db"
                );
            }
            anyhow::bail!("no coordinator database at {path}: --db must name an existing one");
        }
    }
    Ok(Db::connect(&f.db_url).await?)
}
