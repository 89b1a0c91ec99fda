//! Where the coordinator's database URL comes from, with its password never on a command
//! line (other local users, and a guest running as the same user, can read one in
//! `/proc/PID/cmdline`): `--db` takes a URL without a password, which then comes from
//! `--db-password-file` (an owner-only file), `~/.pgpass` / `PGPASSFILE` or
//! `PGPASSWORD` (which the PostgreSQL driver reads); the whole URL, password included,
//! may instead be given in `LULL_COORDINATOR_DB`. A password given in `--db` is refused,
//! saying where to put it, and never echoed.

use anyhow::{bail, Context, Result};
use clap::Args;
use coordinator::db::has_password;
use std::path::{Path, PathBuf};

/// The environment variable that may hold the whole database URL, password included.
pub const DB_ENV: &str = "LULL_COORDINATOR_DB";

#[derive(Args, Debug, Clone, Default)]
pub struct DbArg {
    /// Database: `sqlite:PATH` (default: coordinator.db in the data directory) or
    /// `postgres://USER@HOST/DB`, without a password (a command line is readable by
    /// others): the password goes in --db-password-file, ~/.pgpass (or PGPASSFILE), or
    /// the whole URL in LULL_COORDINATOR_DB instead of --db.
    #[arg(long)]
    pub db: Option<String>,
    /// A file, readable by its owner only (chmod 600), holding the PostgreSQL password
    /// for --db (or LULL_COORDINATOR_DB).
    #[arg(long, value_name = "FILE")]
    pub db_password_file: Option<PathBuf>,
}

impl DbArg {
    /// The database URL asked for (`None`: the data directory's SQLite file): `--db`
    /// (refused with a password in it), else `LULL_COORDINATOR_DB`; with the password
    /// of `--db-password-file` put in.
    pub fn url(&self) -> Result<Option<String>> {
        let url = match &self.db {
            Some(u) if has_password(u) => bail!(
                "--db must not hold a password: other local users can read a command line. Give --db postgres://USER@HOST/DB \
                 with the password in --db-password-file FILE (chmod 600), in ~/.pgpass (or PGPASSFILE), or the whole URL in \
                 {DB_ENV} instead of --db"
            ),
            Some(u) => Some(u.clone()),
            None => std::env::var(DB_ENV).ok().filter(|u| !u.trim().is_empty()),
        };
        match (&self.db_password_file, url) {
            (Some(file), Some(url)) => Ok(Some(with_password(&url, &read_password_file(file)?)?)),
            (Some(_), None) => bail!("--db-password-file needs a PostgreSQL database: --db postgres://USER@HOST/DB"),
            (None, Some(url)) => {
                if is_postgres(&url) && !has_password(&url) {
                    check_pgpass()?;
                }
                Ok(Some(url))
            }
            (None, None) => Ok(None),
        }
    }
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// Refuses a file others may read or that another user owns (as libpq does for
/// `~/.pgpass`).
fn check_private(file: &Path, what: &str) -> Result<()> {
    let meta = std::fs::metadata(file).with_context(|| format!("reading {what} {}", file.display()))?;
    // Off Unix there are no modes or uids here (both 0): the check passes (issue 30).
    let own = agent_core::sys::fs::ownership(&meta);
    let mode = own.mode & 0o777;
    if mode & 0o077 != 0 {
        bail!("{what} {} is readable by others (mode {mode:o}): `chmod 600 {}`", file.display(), file.display());
    }
    if own.uid != agent_core::sys::id::euid() {
        bail!("{what} {} belongs to another user (uid {}): it must be yours", file.display(), own.uid);
    }
    Ok(())
}

/// The password in `file` (its first line), which must be owner-only.
fn read_password_file(file: &Path) -> Result<String> {
    check_private(file, "--db-password-file")?;
    let text = std::fs::read_to_string(file).with_context(|| format!("reading --db-password-file {}", file.display()))?;
    let password = text.lines().next().unwrap_or("").to_string();
    if password.is_empty() {
        bail!("--db-password-file {} is empty: put the password on its first line", file.display());
    }
    Ok(password)
}

/// The password file PostgreSQL's driver reads, if it exists: `PGPASSFILE` or `~/.pgpass`.
/// One that others may read is ignored by the driver with only a log line, so it is
/// refused here, saying how to fix it.
fn check_pgpass() -> Result<()> {
    let file = std::env::var_os("PGPASSFILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".pgpass")))
        .filter(|f| f.exists());
    match file {
        Some(f) => check_private(&f, "the PostgreSQL password file"),
        None => Ok(()),
    }
}

/// `url` (`postgres://USER@HOST/…`) with `password` put in its user-info,
/// percent-encoded.
pub fn with_password(url: &str, password: &str) -> Result<String> {
    if !is_postgres(url) {
        bail!("--db-password-file needs a PostgreSQL database: --db postgres://USER@HOST/DB");
    }
    if has_password(url) {
        bail!("the database URL already holds a password: give it once (--db-password-file, or the URL in {DB_ENV})");
    }
    let start = url.find("://").map(|i| i + 3).unwrap_or(0);
    let authority_end = url[start..].find(['/', '?', '#']).map_or(url.len(), |i| start + i);
    let Some(at) = url[start..authority_end].rfind('@').map(|i| start + i) else {
        bail!("--db-password-file needs a user in the URL: postgres://USER@HOST/DB");
    };
    let user_end = url[start..at].find(':').map_or(at, |i| start + i);
    let encoded: String = password
        .bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-._~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect();
    Ok(format!("{}:{encoded}{}", &url[..user_end], &url[at..]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn passwords_go_into_the_url_encoded() {
        assert_eq!(with_password("postgres://lull@h:5432/db", "p@ss w:rd").unwrap(), "postgres://lull:p%40ss%20w%3Ard@h:5432/db");
        assert_eq!(with_password("postgres://lull:@h/db", "x").unwrap(), "postgres://lull:x@h/db");
        assert!(with_password("postgres://h/db", "x").unwrap_err().to_string().contains("USER@HOST"));
        assert!(with_password("postgres://u:p@h/db", "x").is_err());
        assert!(with_password("sqlite:/a.db", "x").is_err());
    }

    #[test]
    fn argv_passwords_are_refused_without_being_shown() {
        let a = DbArg { db: Some("postgres://lull:s3cret@h/db".into()), db_password_file: None };
        let e = a.url().unwrap_err().to_string();
        assert!(e.contains("--db-password-file") && e.contains(DB_ENV) && !e.contains("s3cret"), "{e}");
        let a = DbArg { db: Some("postgres://lull@h/db?password=s3cret".into()), db_password_file: None };
        assert!(!a.url().unwrap_err().to_string().contains("s3cret"));
    }

    #[test]
    fn password_files_must_be_private() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "s3cret\n").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o644)).unwrap();
        let a = DbArg { db: Some("postgres://lull@h/db".into()), db_password_file: Some(f.clone()) };
        assert!(a.url().unwrap_err().to_string().contains("chmod 600"));
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(a.url().unwrap().unwrap(), "postgres://lull:s3cret@h/db");
    }
}
