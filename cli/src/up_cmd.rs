//! `lull up`: the newcomer's one command. Starts a coordinator on embedded SQLite in the
//! data directory (or the database `--db` names, as for `lull coordinator serve`: its
//! password never on the command line), enrols this machine's agent to it (once, as the
//! pool's admin; the credentials are kept in `coordinator.json`), runs the agent in-process linked to the coordinator (heartbeats,
//! ledger records, leased tasks run as guests under the policy), and prints the
//! dashboard address. Ctrl-C stops all three cleanly.

use crate::agent_cmd::init_logging;
use crate::coordinator_cmd::{create_data_dir, ensure_admin_key, DbArg, MetricsKeyArg};
use crate::pool_files::{files, DEFAULT_LISTEN};
use agent_core::agent;
use agent_core::assembly::{assemble, stop_signal, Extras, Link};
use agent_core::config::Config as AgentConfig;
use agent_core::coordinator_client::{self, Credentials};
use agent_core::paths::Paths;
use anyhow::{Context, Result};
use clap::Args;
use coordinator::Db;
use std::path::{Path, PathBuf};

#[derive(Args, Debug)]
pub struct UpArgs {
    /// Address for the coordinator.
    #[arg(long, default_value = DEFAULT_LISTEN)]
    pub listen: String,
    /// The owner this machine is enrolled for (default: $USER, else your account name).
    #[arg(long)]
    pub owner: Option<String>,
    /// This machine's name in reports (default: the host name).
    #[arg(long)]
    pub machine: Option<String>,
    #[command(flatten)]
    pub db: DbArg,
    #[command(flatten)]
    pub metrics: MetricsKeyArg,
    #[command(flatten)]
    pub scheduler: crate::coordinator_cmd::SchedulerArg,
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "this-machine".into())
}

pub fn run(a: UpArgs) -> Result<()> {
    agent_core::stdout::keep_running_when_closed();
    // First: a database URL with a password on the command line is refused before
    // anything is written.
    let f = files(&a.db)?;
    let paths = Paths::from_env()?;
    // A config the agent would refuse is said before anything is written.
    let config = AgentConfig::load(&paths.config_file)?;
    let rt = crate::pool_files::runtime()?;
    // The address and the admin key's file next: a command refused for them changes
    // nothing (no directory, lock, log or database).
    let listener = rt.block_on(crate::coordinator_cmd::listen(&a.listen))?;
    crate::coordinator_cmd::refuse_new_pool_beside_a_key(&f)?;
    // Before anything is printed or written: this HOME's agent must not already be up
    // (its data directory locked, or an agent answering on this socket).
    // A data directory this command makes is taken away again if it fails before its
    // agent starts (an unreachable --db, say); declared first, it goes after the lock.
    let mut fresh_dir = FreshDir::before(&paths.data_dir);
    let data_lock = agent_core::data_lock::DataDirLock::acquire(&paths.data_dir).inspect_err(|_| fresh_dir.keep_it())?;
    if let Ok(agent_core::control::Response::Status(s)) = agent_core::control::call(&paths.socket, &agent_core::control::Request::Status) {
        anyhow::bail!(
            "another Lull agent (pid {}) is already listening on {}: stop it first (lull up runs its own)",
            s.pid,
            paths.socket.display()
        );
    }
    let _guard = init_logging(&paths, "up")?;
    create_data_dir()?;
    let coordinator_config = coordinator::Config {
        metrics_key: a.metrics.key()?,
        scheduler: a.scheduler.config(),
        recruit: a.scheduler.recruit()?,
        ..coordinator::Config::default()
    };
    let owner = a.owner.unwrap_or_else(crate::agent_cmd::default_owner);
    let machine = a.machine.unwrap_or_else(hostname);
    let agent_built = std::cell::Cell::new(false);
    let built = &agent_built;
    let outcome = rt.block_on(async move {
        let db = Db::connect(&f.db_url).await?;
        let key_file = ensure_admin_key(&db, &f).await?;
        let url = format!("http://{}", listener.local_addr()?);
        crate::coordinator_cmd::write_private(&f.url_file, &format!("{url}\n"))?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let server = tokio::spawn(coordinator::serve(listener, db.clone(), coordinator_config, stopped(stop_rx.clone())));

        let creds = enrol_once(&db, &paths, &url, &owner, &machine).await?;
        // The banner waits for the agent's first notice, which comes once its socket
        // answers: every command it suggests (`lull status` first) works when it shows.
        let mut banner = Some(up_banner(&url, &f.db_url, &machine, &owner, &creds, key_file.as_deref()));
        let json = false;
        let observer: Box<dyn FnMut(&agent::Notice) + Send> = Box::new(move |n| {
            if let Some(b) = banner.take_if(|_| matches!(n, agent::Notice::Started { .. })) {
                agent_core::out!("{b}");
            }
            crate::agent_cmd::print_notice(n, json)
        });
        let extras = Extras { observer: Some(observer), link: Link::With(creds), data_lock: Some(data_lock), ..Extras::default() };
        // The handlers first: a SIGTERM once the addresses are printed stops `lull up`
        // cleanly, even while the agent is still starting.
        let stop = stop_signal();
        let agent = assemble(paths, config, extras)?;
        built.set(true);
        let signal = async {
            stop.await;
            outln!("stopping…");
        };
        let agent_res = agent.run(signal).await;
        let _ = stop_tx.send(true);
        agent_res.context("agent")?;
        server.await.context("coordinator task")??;
        Ok(())
    });
    if agent_built.get() {
        fresh_dir.keep_it();
    }
    outcome
}

/// A data directory that did not exist when `lull up` began: removed with all it holds
/// (the lock, the log, a new database), and the parents made for it, when the command
/// fails before its agent starts, so a refused `lull up` leaves this HOME as it found it.
/// Kept once the agent is built, and whenever another agent has taken its lock since.
struct FreshDir(Option<(PathBuf, PathBuf)>);

impl FreshDir {
    /// Notes `dir` and the outermost of its parents that does not exist yet.
    fn before(dir: &Path) -> Self {
        let outermost = dir.ancestors().take_while(|d| !d.as_os_str().is_empty() && !d.exists()).last();
        Self(outermost.map(|top| (dir.to_path_buf(), top.to_path_buf())))
    }

    fn keep_it(&mut self) {
        self.0 = None;
    }
}

impl Drop for FreshDir {
    fn drop(&mut self) {
        let Some((dir, top)) = self.0.take() else { return };
        // Removed only under its lock: an agent that started in it meanwhile keeps it.
        let lock = agent_core::data_lock::DataDirLock::acquire(&dir);
        if lock.is_ok() {
            if let Err(e) = std::fs::remove_dir_all(&dir) {
                tracing::warn!(dir = %dir.display(), "could not remove the data directory this failed `lull up` made: {e}");
            }
            // Its parents only while empty: another program may have written there since.
            for parent in dir.ancestors().skip(1).take_while(|d| d.starts_with(&top)) {
                if std::fs::remove_dir(parent).is_err() {
                    break;
                }
            }
        }
    }
}

/// Enrols this machine once: saved credentials this coordinator knows are reused
/// (following it to a new address `url`); otherwise this machine enrols, as the pool's
/// admin (`lull up` holds its database), taking the place of its earlier enrolment if any.
async fn enrol_once(db: &Db, paths: &Paths, url: &str, owner: &str, machine: &str) -> Result<Credentials> {
    let cred_path = Credentials::path(paths);
    let known = match Credentials::load(&cred_path)? {
        Some(c) => coordinator::identity::principal_by_hash(db, &coordinator::auth::hash_secret(&c.secret)).await.ok().flatten().map(|_| c),
        None => None,
    };
    if let Some(mut c) = known {
        if c.url != url {
            c.url = url.to_string();
            c.save(&cred_path)?;
        }
        return Ok(c);
    }
    let req = coordinator::model::EnrolRequest {
        token: String::new(),
        owner: owner.to_string(),
        machine: machine.to_string(),
        replace: true,
        cpus: Some(coordinator_client::machine_cpus()),
    };
    let admin = coordinator::auth::Principal::Admin;
    let caller = coordinator::identity::Caller { principal: Some(&admin), addr: "lull up" };
    let e = coordinator::identity::enrol(db, &req, caller).await.map_err(|e| anyhow::anyhow!("enrolling this machine: {e}"))?;
    let c = Credentials {
        url: url.to_string(),
        agent_id: e.agent_id,
        secret: e.secret,
        machine: Some(machine.to_string()),
        owner: Some(owner.to_string()),
    };
    c.save(&cred_path)?;
    Ok(c)
}

/// What `lull up` prints once the agent has started: the coordinator and its database,
/// the dashboard, this machine's enrolment, the admin key's file, and what to try.
fn up_banner(url: &str, db_url: &str, machine: &str, owner: &str, creds: &Credentials, key_file: Option<&Path>) -> String {
    let mut banner = String::from("Lull is up.\n");
    banner += &format!("  coordinator  {url}   (database {})\n", coordinator::db::redact_url(db_url));
    if coordinator::api::dashboard::built() {
        banner += &format!("  dashboard    {url}/   (sign in with the admin key: the file below holds it)\n");
    } else {
        banner += "  dashboard    none: this build lacks it (build ui/ first: scripts/up.sh does)\n";
    }
    banner += &format!("  agent        {machine}, owner {owner}, enrolled as {}\n", creds.agent_id);
    if let Some(k) = key_file {
        banner += &format!("  admin key    {}\n", k.display());
    }
    banner += "Try: lull submit -- /bin/sh -c 'echo hello'   ·   lull report --by owner --since 7d   ·   lull status\n";
    banner
}
