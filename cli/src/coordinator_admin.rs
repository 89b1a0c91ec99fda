//! The coordinator's administration straight in its database: join tokens and API keys
//! (create, list with each use's time and address — never a secret —, revoke by id), and
//! backups (`lull coordinator backup PATH`, `lull coordinator restore BACKUP`).

use crate::db_url::DbArg;
use crate::pool_files::{admin_db, files};
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use coordinator::identity;
use coordinator::model::{ApiKeyInfo, JoinTokenInfo};
use std::path::Path;

fn store_err(e: coordinator::store::StoreError) -> anyhow::Error {
    match e {
        coordinator::store::StoreError::NotFound => anyhow::anyhow!("no such id (the list shows them)"),
        e => anyhow::anyhow!("{e}"),
    }
}

/// A Unix-ms instant in local time, to the second.
fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map_or_else(|| ms.to_string(), |t| t.with_timezone(&chrono::Local).format("%Y-%m-%d %H:%M:%S").to_string())
}

/// `lull coordinator token create|list|revoke`.
pub async fn tokens(cmd: TokenCmd) -> Result<()> {
    match cmd {
        TokenCmd::Create { db, uses, ttl_days, json } => {
            let db = admin_db(&db).await?;
            let req = coordinator::model::CreateJoinToken { uses: Some(uses), ttl_s: Some(ttl_days.saturating_mul(86_400)) };
            let t = identity::create_join_token(&db, &req).await.map_err(store_err)?;
            if json {
                outln!("{}", serde_json::to_string(&t)?);
            } else {
                outln!("{}", t.token);
                errln!("join token {} for {uses} agent(s), valid {ttl_days} day(s)", t.id);
            }
        }
        TokenCmd::List(ListArgs { db, json }) => {
            let list = identity::list_tokens(&admin_db(&db).await?).await.map_err(store_err)?;
            print_tokens(&list, json)?;
        }
        TokenCmd::Revoke(RevokeArgs { db, id, json }) => {
            let t = identity::revoke_token(&admin_db(&db).await?, &id).await.map_err(store_err)?;
            if json {
                outln!("{}", serde_json::to_string(&t)?);
            } else {
                outln!("revoked join token {}: it enrols no one from now on", t.id);
            }
        }
    }
    Ok(())
}

fn print_tokens(list: &[JoinTokenInfo], json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string(list)?);
        return Ok(());
    }
    if list.is_empty() {
        outln!("(no join tokens)");
        return Ok(());
    }
    outln!("{:<12}  {:<8} {:>9}  {:<19}  {:<19}", "id", "state", "uses left", "created", "expires");
    for t in list {
        let left = t.uses.map_or(format!("{}", t.uses_left), |u| format!("{}/{u}", t.uses_left));
        outln!("{:<12}  {:<8} {:>9}  {:<19}  {:<19}", t.id, t.state, left, when(t.created_ms), when(t.expires_ms));
        for u in &t.used {
            let what = match (&u.owner, &u.machine) {
                (Some(o), Some(m)) => format!("{o}/{m}"),
                _ => String::new(),
            };
            outln!("    {}  from {:<15}  {} {what}", when(u.at_ms), u.addr, u.outcome);
        }
    }
    Ok(())
}

/// `lull coordinator key create|list|revoke`.
pub async fn keys(cmd: KeyCmd) -> Result<()> {
    match cmd {
        KeyCmd::Create { db, role, owner, json } => {
            let db = admin_db(&db).await?;
            let k = identity::create_key(&db, &role, owner.as_deref()).await.map_err(store_err)?;
            if json {
                outln!("{}", serde_json::to_string(&k)?);
            } else {
                outln!("{}", k.key);
                errln!("{role} key {}", k.id);
            }
        }
        KeyCmd::List(ListArgs { db, json }) => {
            let list = identity::list_keys(&admin_db(&db).await?).await.map_err(store_err)?;
            print_keys(&list, json)?;
        }
        KeyCmd::Revoke(RevokeArgs { db, id, json }) => {
            let k = identity::revoke_key(&admin_db(&db).await?, &id).await.map_err(store_err)?;
            if json {
                outln!("{}", serde_json::to_string(&k)?);
            } else {
                outln!("revoked {} key {}: it answers 401 from now on (within 30 s on a running coordinator)", k.role, k.id);
            }
        }
    }
    Ok(())
}

fn print_keys(list: &[ApiKeyInfo], json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string(list)?);
        return Ok(());
    }
    outln!("{:<12}  {:<6} {:<16} {:<8} {:<19} {:>8}  last used", "id", "role", "owner", "state", "created", "uses");
    for k in list {
        let last = k.used_from.first().map_or("never".to_string(), |u| format!("{} from {}", when(u.last_ms), u.addr));
        let owner = k.owner.as_deref().unwrap_or("-");
        outln!("{:<12}  {:<6} {:<16} {:<8} {:<19} {:>8}  {last}", k.id, k.role, owner, k.state, when(k.created_ms), k.uses);
    }
    Ok(())
}

/// `lull coordinator backup PATH`.
pub async fn backup(db: &DbArg, path: &Path, json: bool) -> Result<()> {
    if coordinator::db::sqlite_path(&files(db)?.db_url).is_none() {
        anyhow::bail!("{}", coordinator::backup::PG_ADVICE);
    }
    let db = admin_db(db).await?;
    let s = coordinator::backup::backup(&db, path).await?;
    if json {
        outln!("{}", serde_json::to_string(&s)?);
    } else {
        outln!(
            "backed up to {} ({} bytes: {} machines, {} jobs, {} records; schema {}); restore with `lull coordinator restore {}`",
            s.path.display(),
            s.bytes,
            s.machines,
            s.jobs,
            s.records,
            s.schema,
            s.path.display()
        );
    }
    Ok(())
}

/// `lull coordinator restore BACKUP`.
pub async fn restore(db: &DbArg, backup: &Path, json: bool) -> Result<()> {
    let f = files(db)?;
    let Some(dest) = coordinator::db::sqlite_path(&f.db_url) else {
        anyhow::bail!("{}", coordinator::backup::PG_ADVICE);
    };
    let dest = Path::new(dest);
    if let Some(dir) = dest.parent().filter(|d| !d.as_os_str().is_empty()) {
        anyhow::ensure!(dir.is_dir(), "{} does not exist: nothing to restore into", dir.display());
    }
    let r = coordinator::backup::restore(backup, dest).await.with_context(|| format!("restoring {}", dest.display()))?;
    if json {
        outln!("{}", serde_json::to_string(&r)?);
    } else {
        outln!(
            "restored {} from {} ({} machines, {} jobs, {} records)",
            dest.display(),
            backup.display(),
            r.from.machines,
            r.from.jobs,
            r.from.records
        );
        if let Some(k) = &r.kept {
            outln!("the database it replaced is kept as {}", k.display());
        }
        outln!("start the coordinator again (`lull up` or `lull coordinator serve`)");
    }
    Ok(())
}

#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// Create a join token (printed once).
    Create {
        #[command(flatten)]
        db: DbArg,
        /// How many agents may enrol with it (1-100000).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        uses: u32,
        /// Days until it expires (1-365).
        #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u32).range(1..=365))]
        ttl_days: u32,
        /// Print the token as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every join token with its state and each use (time, address, machine); never a
    /// token itself.
    List(ListArgs),
    /// Revoke a join token: it enrols no one from now on.
    Revoke(RevokeArgs),
}

/// A list of tokens or keys.
#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Which token or key to revoke.
#[derive(Args, Debug)]
pub struct RevokeArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Its id, as the list shows it (12 hex digits; never the secret itself, which a
    /// command line would show to other local users).
    pub id: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Subcommand, Debug)]
pub enum KeyCmd {
    /// Create an API key (printed once): `--role admin`, or `--role owner --owner NAME`
    /// for an owner who may read their own machines' reports.
    Create {
        #[command(flatten)]
        db: DbArg,
        /// What the key may do: everything (admin), or read its owner's machines (owner).
        #[arg(long, value_parser = ["admin", "owner"])]
        role: String,
        /// The owner an owner key belongs to (required with --role owner).
        #[arg(long)]
        owner: Option<String>,
        /// Print the key as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Every API key with its role, state and uses per address; never a key itself.
    List(ListArgs),
    /// Revoke an API key: requests with it answer 401 from now on (within 30 s on a
    /// running coordinator). The last admin key is not revoked.
    Revoke(RevokeArgs),
}
