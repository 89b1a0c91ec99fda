//! `lull coordinator serve | token create|list|revoke | key create|list|revoke | machine
//! list|rm | backup | restore`: running the coordinator, and administering it straight in
//! its database (whoever can open the database is its administrator; these commands open
//! an existing coordinator's database and never create one). Also the defaults the other
//! commands share: where the coordinator's database, address file and admin key live in
//! the data directory, each written owner-only (0600) in an owner-only directory (0700),
//! and an existing admin key file never overwritten.

use crate::coordinator_admin::{KeyCmd, TokenCmd};
pub use crate::db_url::DbArg;
use crate::pool_files::{admin_db, files, runtime, Files, DEFAULT_LISTEN};
use agent_core::assembly::stop_signal;
use agent_core::paths::Paths;
use agent_core::sys::fs as sysfs;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use coordinator::db::redact_url;
use coordinator::db::sqlite_path;
use coordinator::{Config, Db};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct CoordinatorArgs {
    #[command(subcommand)]
    pub cmd: CoordinatorCmd,
}

#[derive(Subcommand, Debug)]
pub enum CoordinatorCmd {
    /// Run the coordinator in the foreground until Ctrl-C or SIGTERM.
    Serve(ServeArgs),
    /// Join tokens, with which agents enrol.
    Token {
        #[command(subcommand)]
        cmd: TokenCmd,
    },
    /// API keys for administrators and owners.
    Key {
        #[command(subcommand)]
        cmd: KeyCmd,
    },
    /// Enrolled machines: list them, remove one.
    Machine {
        #[command(subcommand)]
        cmd: MachineCmd,
    },
    /// Write a consistent copy of the database (SQLite) to a new file, while the
    /// coordinator runs; for PostgreSQL, says how to use pg_dump.
    Backup {
        #[command(flatten)]
        db: DbArg,
        /// The new file (never overwritten; written owner-only).
        path: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Put a backup in place of the database (SQLite), with the coordinator stopped: the
    /// backup is checked first, and the database it replaces is kept beside it.
    Restore {
        #[command(flatten)]
        db: DbArg,
        /// A file written by `lull coordinator backup`.
        backup: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum MachineCmd {
    /// Every enrolled machine: id, owner, name, last heard from.
    List {
        #[command(flatten)]
        db: DbArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a machine from the pool: its secret stops working and the tasks it holds go
    /// back to the queue; the time it donated stays in the reports.
    Rm {
        #[command(flatten)]
        db: DbArg,
        /// The machine's agent id, or its name when only one machine has it.
        machine: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub db: DbArg,
    /// Address to listen on (put a TLS reverse proxy in front for other machines; see docs/ARCHITECTURE.md).
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// Seconds a lease lives without a progress report before its task is re-queued.
    #[arg(long, default_value_t = 60)]
    pub lease_ttl_s: u64,
    /// Heartbeat interval agents are told to use, seconds.
    #[arg(long, default_value_t = 10)]
    pub heartbeat_s: u64,
    /// Seconds a started gang that lost a member stays halted (its other members frozen)
    /// waiting for a replacement before the whole gang is queued again (1–86400).
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub gang_halt_timeout_s: u64,
    /// Log JSON lines (structured) instead of text.
    #[arg(long)]
    pub log_json: bool,
    #[command(flatten)]
    pub metrics: MetricsKeyArg,
    #[command(flatten)]
    pub scheduler: SchedulerArg,
}

#[derive(Args, Debug, Clone)]
pub struct SchedulerArg {
    /// The pool's scheduling algorithm (seed 002): fifo, first_fit, random, spt, lpt or
    /// backfill (FIFO with conservative backfilling).
    #[arg(long = "scheduler", env = "LULL_SCHEDULER", default_value = "backfill", value_name = "ALGORITHM",
        value_parser = parse_scheduler)]
    pub algorithm: lull_core::sched::Algorithm,
    /// MT of memory-centric placement (seed 001): the oversize (guests' measured working
    /// sets over the memory their machine may give them, minus 1) a machine tolerates,
    /// from -0.9 to 1.0. No job goes where it would reach MT; a machine at or over it has
    /// one job moved to the machine with the most free memory.
    #[arg(long = "memory-threshold", env = "LULL_MEMORY_THRESHOLD", value_name = "FRACTION",
        default_value_t = lull_core::sched::DEFAULT_MEMORY_THRESHOLD, allow_negative_numbers = true, value_parser = parse_memory_threshold)]
    pub memory_threshold: f64,
    /// Which job a machine over MT (or under memory pressure) sheds: age (oldest),
    /// worksize (largest working set), pf-rate (most page faults) or combined (seed 001
    /// eq. 5, the default).
    #[arg(long = "migration-choice", env = "LULL_MIGRATION_CHOICE", value_name = "CHOICE", default_value = "combined",
        value_parser = parse_migration_choice)]
    pub migration_choice: lull_core::sched::Choice,
    /// Instant recruitment's reserve (`[scheduler] reserve_pct`, seed 003): the percent of
    /// the idle machines kept back from every `lull recruit` request for the next one
    /// (0 ≤ x < 100).
    #[arg(long = "reserve-pct", env = "LULL_RESERVE_PCT", default_value_t = coordinator::scheduling::recruiting::DEFAULT_RESERVE_PCT,
        value_name = "PERCENT")]
    pub reserve_pct: f64,
    /// Instant recruitment grants machines predicted to stay below this owner CPU, percent
    /// (0 < x ≤ 100; seed 003: 10; 100 grants any machine that wants work).
    #[arg(long = "recruit-idle-pct", env = "LULL_RECRUIT_IDLE_PCT", default_value_t = coordinator::scheduling::recruiting::DEFAULT_IDLE_LOAD_PCT,
        value_name = "PERCENT")]
    pub recruit_idle_pct: f64,
}

impl SchedulerArg {
    /// Instant recruitment's configuration with this reserve (refused out of range).
    pub fn recruit(&self) -> Result<lull_core::sched::RecruitConfig> {
        coordinator::scheduling::recruiting::config_with(self.reserve_pct, self.recruit_idle_pct).map_err(anyhow::Error::msg)
    }

    /// The scheduler configuration with this algorithm, MT and migration choice.
    pub fn config(&self) -> lull_core::sched::SchedConfig {
        lull_core::sched::SchedConfig {
            memory_threshold: self.memory_threshold,
            migration_choice: self.migration_choice,
            ..lull_core::sched::SchedConfig::with_algorithm(self.algorithm)
        }
    }
}

fn parse_memory_threshold(s: &str) -> std::result::Result<f64, String> {
    let mt: f64 = s.trim().parse().map_err(|_| format!("memory_threshold {s:?} is not a number (-0.9..=1.0)"))?;
    lull_core::sched::check_memory_threshold(mt).map_err(|e| e.to_string())?;
    Ok(mt)
}

fn parse_migration_choice(s: &str) -> std::result::Result<lull_core::sched::Choice, String> {
    s.parse()
}

fn parse_scheduler(s: &str) -> std::result::Result<lull_core::sched::Algorithm, String> {
    coordinator::scheduling::parse_algorithm(s)
}

#[derive(Args, Debug, Clone)]
pub struct MetricsKeyArg {
    /// Require `Authorization: Bearer KEY` on /metrics (default: /metrics is open to anyone
    /// who can reach the coordinator).
    #[arg(long, env = "LULL_METRICS_KEY", hide_env_values = true)]
    pub metrics_key: Option<String>,
}

impl MetricsKeyArg {
    /// The key, refused when empty (an empty key would look set and protect nothing).
    pub fn key(&self) -> Result<Option<String>> {
        match self.metrics_key.as_deref().map(str::trim) {
            Some("") => anyhow::bail!("--metrics-key (LULL_METRICS_KEY) is empty: give a key, or leave it unset for an open /metrics"),
            k => Ok(k.map(str::to_string)),
        }
    }
}

/// Writes a file readable by its owner only (0600), an existing one included (its mode
/// is tightened first).
pub fn write_private(path: &Path, content: &str) -> Result<()> {
    use std::io::Write;
    let mut f = sysfs::create_mode(std::fs::OpenOptions::new().write(true).create(true).truncate(true), 0o600)
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    coordinator::integrity::make_private(path).with_context(|| format!("making {} owner-only", path.display()))?;
    f.write_all(content.as_bytes())?;
    Ok(())
}

/// Refuses, before anything is created, to start a new pool on a missing SQLite file
/// beside an admin key file: the key belongs to a database that is gone (deleted or
/// moved), and a new pool would leave it pointing at nothing.
pub fn refuse_new_pool_beside_a_key(f: &Files) -> Result<()> {
    let key = &f.admin_key_file;
    if let Some(path) = sqlite_path(&f.db_url) {
        if !Path::new(path).exists() && key.exists() {
            anyhow::bail!(
                "the database {path} does not exist, but {} does: it holds the admin key of a database that is gone. Restore                  that database (`lull coordinator restore BACKUP`), or move {} away to start a new pool here",
                key.display(),
                key.display()
            );
        }
    }
    Ok(())
}

/// Makes sure an admin key exists: when the database has none, mints one into the data
/// directory's `coordinator-admin.key` (0600) — unless that file exists, which then
/// belongs to another database (this one replaced, or restored from an older backup) and
/// is never overwritten: refused, saying so. Returns the key file if it exists.
pub async fn ensure_admin_key(db: &Db, f: &Files) -> Result<Option<PathBuf>> {
    let key = &f.admin_key_file;
    if !coordinator::identity::has_admin_key(db).await? {
        if key.exists() {
            anyhow::bail!(
                "the database {} has no admin key, but {} exists: it holds the key of another database (was this one                  replaced, or restored from an older backup?). It is kept as it is: move it away to mint a new admin key here,                  or restore the database it belongs to",
                redact_url(&f.db_url),
                key.display()
            );
        }
        let k = coordinator::identity::create_key(db, "admin", None).await?;
        let mut file = sysfs::create_mode(std::fs::OpenOptions::new().write(true).create_new(true), 0o600)
            .open(key)
            .with_context(|| format!("writing {}", key.display()))?;
        std::io::Write::write_all(&mut file, format!("{}\n", k.key).as_bytes())?;
        tracing::info!(file = %key.display(), "created the first admin key");
    }
    if key.exists() {
        coordinator::integrity::make_private(key).with_context(|| format!("making {} owner-only", key.display()))?;
        return Ok(Some(key.clone()));
    }
    Ok(None)
}

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("LULL_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let b = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let _ = if json { b.json().try_init() } else { b.try_init() };
}

/// Binds the coordinator's address; one taken says what to do about it.
pub async fn listen(addr: &str) -> Result<tokio::net::TcpListener> {
    match tokio::net::TcpListener::bind(addr).await {
        Ok(l) => Ok(l),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => anyhow::bail!(
            "{addr} is already in use (another coordinator or `lull up`?): give another address with --listen, e.g. \
             --listen 127.0.0.1:7879, or --listen 127.0.0.1:0 for any free port"
        ),
        Err(e) => Err(anyhow::Error::from(e).context(format!("listening on {addr} (choose another with --listen)"))),
    }
}

/// Creates the data directory the coordinator's files go in, owner-only (0700), and
/// makes an existing one owner-only; the address file is made owner-only too.
pub fn create_data_dir() -> Result<()> {
    let paths = Paths::from_env()?;
    let dir = &paths.data_dir;
    sysfs::dir_builder(0o700).create(dir).with_context(|| format!("creating {}", dir.display()))?;
    let meta = std::fs::metadata(dir).with_context(|| format!("reading {}", dir.display()))?;
    if sysfs::ownership(&meta).mode & 0o077 != 0 {
        sysfs::set_mode(dir, 0o700).with_context(|| format!("making {} owner-only", dir.display()))?;
        tracing::info!(dir = %dir.display(), "made owner-only (0700): other local users could list it");
    }
    coordinator::integrity::make_private(&dir.join("coordinator.url")).context("making coordinator.url owner-only")?;
    Ok(())
}

/// `machine rm`: the one machine `which` names (an agent id, or a name only one machine has).
async fn find_machine(db: &Db, which: &str) -> Result<coordinator::model::AgentInfo> {
    let all = coordinator::store::list_agents(db, &coordinator::auth::Principal::Admin).await?;
    if let Some(a) = all.iter().find(|a| a.id == which) {
        return Ok(a.clone());
    }
    let named: Vec<_> = all.iter().filter(|a| a.machine == which).collect();
    match named.as_slice() {
        [one] => Ok((*one).clone()),
        [] => anyhow::bail!("no enrolled machine has the id or name {which:?} (`lull coordinator machine list` shows them)"),
        many => {
            let ids: Vec<String> = many.iter().map(|a| format!("{} (owner {})", a.id, a.owner)).collect();
            anyhow::bail!("{} machines are named {which:?}: name one by its id: {}", many.len(), ids.join(", "))
        }
    }
}

fn machines_cmd(cmd: MachineCmd) -> Result<()> {
    runtime()?.block_on(async {
        match cmd {
            MachineCmd::List { db, json } => {
                let db = admin_db(&db).await?;
                let all = coordinator::store::list_agents(&db, &coordinator::auth::Principal::Admin).await?;
                crate::machines_cmd::print(&all, json)
            }
            MachineCmd::Rm { db, machine, json } => {
                let db = admin_db(&db).await?;
                let m = find_machine(&db, &machine).await?;
                let r = coordinator::store::remove_agent(&db, &m.id, "lull coordinator machine rm")
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                if json {
                    outln!("{}", serde_json::to_string(&r)?);
                } else {
                    outln!(
                        "removed {} (owner {}, agent {}); {} task(s) given back to the queue",
                        r.machine,
                        r.owner,
                        r.id,
                        r.tasks_requeued
                    );
                }
                Ok(())
            }
        }
    })
}

pub fn run(a: CoordinatorArgs) -> Result<()> {
    match a.cmd {
        CoordinatorCmd::Serve(s) => serve(s),
        CoordinatorCmd::Machine { cmd } => machines_cmd(cmd),
        CoordinatorCmd::Token { cmd } => runtime()?.block_on(crate::coordinator_admin::tokens(cmd)),
        CoordinatorCmd::Key { cmd } => runtime()?.block_on(crate::coordinator_admin::keys(cmd)),
        CoordinatorCmd::Backup { db, path, json } => runtime()?.block_on(crate::coordinator_admin::backup(&db, &path, json)),
        CoordinatorCmd::Restore { db, backup, json } => runtime()?.block_on(crate::coordinator_admin::restore(&db, &backup, json)),
    }
}

fn serve(a: ServeArgs) -> Result<()> {
    init_logging(a.log_json);
    let f = files(&a.db)?;
    create_data_dir()?;
    let config = Config {
        lease_ttl: Duration::from_secs(a.lease_ttl_s.max(1)),
        heartbeat_interval: Duration::from_secs(a.heartbeat_s.max(1)),
        gang_halt_timeout: Duration::from_secs(a.gang_halt_timeout_s),
        metrics_key: a.metrics.key()?,
        scheduler: a.scheduler.config(),
        recruit: a.scheduler.recruit()?,
        ..Config::default()
    };
    runtime()?.block_on(async move {
        // The address first: a command that fails changes nothing (no database, no key).
        let listener = listen(&a.listen).await?;
        refuse_new_pool_beside_a_key(&f)?;
        let db = Db::connect(&f.db_url).await?;
        let key = ensure_admin_key(&db, &f).await?;
        let addr = listener.local_addr()?;
        write_private(&f.url_file, &format!("http://{addr}\n"))?;
        outln!("coordinator on http://{addr} (database {}); dashboard at http://{addr}/", redact_url(&f.db_url));
        if let Some(k) = key {
            outln!("admin key: {}", k.display());
        }
        coordinator::serve(listener, db, config, stop_signal()).await?;
        Ok(())
    })
}
