//! `lull agent`: the headless agent in the foreground. State changes go to stdout (as
//! text, or JSON lines with `--json`); the full log goes to a daily-rotated file in the
//! data directory (seven days kept) and warnings also to stderr.

use crate::spans::human;
use agent_core::agent::Notice;
use agent_core::assembly::{assemble, stop_signal, Extras};
use agent_core::config::Config;
use agent_core::paths::Paths;
use agent_core::policy::Action;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct AgentArgs {
    /// Configuration file (default: the platform config dir's lull/config.toml, or $LULL_CONFIG).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print state changes as JSON lines.
    #[arg(long)]
    pub json: bool,
}

/// Sets up logging: a rotated file in the data dir plus warnings on stderr.
pub fn init_logging(paths: &Paths, name: &str) -> Result<tracing_appender::non_blocking::WorkerGuard> {
    Ok(agent_core::logging::init(&paths.log_dir, name)?)
}

pub fn run(args: AgentArgs) -> Result<()> {
    agent_core::stdout::keep_running_when_closed();
    let mut paths = Paths::from_env()?;
    // A bad config is refused before anything starts, naming the field and range; a
    // file named with --config must exist.
    let config = match args.config {
        Some(c) => {
            paths.config_file = c;
            Config::load_named(&paths.config_file)?
        }
        None => Config::load(&paths.config_file)?,
    };
    let _guard = init_logging(&paths, "agent")?;
    let json = args.json;
    let observer: Box<dyn FnMut(&Notice) + Send> = Box::new(move |n: &Notice| print_notice(n, json));
    let extras = Extras { observer: Some(observer), ..Extras::default() };
    let agent = assemble(paths, config, extras)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    rt.block_on(async move {
        // Not joined: a short-lived agent does not wait for it.
        tokio::spawn(release_startup_pages());
        agent.run(stop_signal()).await
    })?;
    Ok(())
}

/// Once start-up is over, and then every few minutes, unmaps the clean code and read-only
/// data pages nothing has used since the last time (`agent_core::footprint`). The first
/// release drops what start-up ran (about a third of the idle agent's RSS); the later ones
/// what one-off work ran since: the enrolment and the coordinator link's first exchanges,
/// a job's start, a report. What the once-a-second loop runs faults straight back in
/// from the page cache. Each release costs about half a millisecond. Set
/// `LULL_KEEP_STARTUP_PAGES=1` to skip it (to measure the difference).
async fn release_startup_pages() {
    const FIRST: std::time::Duration = std::time::Duration::from_secs(3);
    const EVERY: std::time::Duration = std::time::Duration::from_secs(120);
    if std::env::var_os("LULL_KEEP_STARTUP_PAGES").is_some_and(|v| v == "1") {
        return;
    }
    tokio::time::sleep(FIRST).await;
    // Elsewhere there is no smaps to read: nothing to release, nothing to say.
    if !agent_core::sys::LINUX {
        return;
    }
    for n in 0u64.. {
        match agent_core::footprint::release_startup_pages() {
            Ok(r) if n == 0 => tracing::info!(mappings = r.mappings, kib = r.kib, "released start-up pages"),
            Ok(r) => tracing::debug!(mappings = r.mappings, kib = r.kib, "released unused pages"),
            Err(e) => tracing::info!("could not release unused pages: {e}"),
        }
        tokio::time::sleep(EVERY).await;
    }
}

#[derive(Args, Debug)]
pub struct EnrolArgs {
    /// The coordinator's address, e.g. https://pool.example.org.
    #[arg(long)]
    pub url: String,
    /// A join token from `lull coordinator token create`.
    #[arg(long, env = "LULL_JOIN_TOKEN", hide_env_values = true)]
    pub token: String,
    /// The owner of this machine, as reports should name them (default: $USER, else your account name).
    #[arg(long)]
    pub owner: Option<String>,
    /// This machine's name in reports (default: the host name).
    #[arg(long)]
    pub machine: Option<String>,
    /// Enrol again although this machine is enrolled (its credentials file is replaced),
    /// or take the place of the owner's machine of this name at the coordinator (same id
    /// and history; the old credentials stop working).
    #[arg(long)]
    pub replace: bool,
}

/// `lull enrol`: enrols this machine's agent with a coordinator and keeps the credentials
/// (0600) in the data directory; `lull agent` then links to it. An enrolled machine is
/// enrolled again only with `--replace`: without it the command refuses before it spends
/// the token, and changes nothing.
pub fn enrol(a: EnrolArgs) -> Result<()> {
    let paths = Paths::from_env()?;
    let path = agent_core::coordinator_client::Credentials::path(&paths);
    if !a.replace {
        if let Some(c) = agent_core::coordinator_client::Credentials::load(&path)? {
            anyhow::bail!(
                "this machine is already enrolled (agent {} with {}; {}): `lull enrol --replace …` enrols it again in its place",
                c.agent_id,
                c.url,
                path.display()
            );
        }
    }
    let owner = a.owner.unwrap_or_else(default_owner);
    let machine = a.machine.unwrap_or_else(|| {
        std::fs::read_to_string("/proc/sys/kernel/hostname").map(|s| s.trim().to_string()).unwrap_or_else(|_| "this-machine".into())
    });
    // Replacing this machine's enrolment at the same coordinator proves it with the
    // current credential (a token alone enrols new machines only); it is never sent to
    // another address.
    let saved = if a.replace { agent_core::coordinator_client::Credentials::load(&path)? } else { None };
    let current = saved.as_ref().filter(|c| c.url.trim_end_matches('/') == a.url.trim_end_matches('/')).map(|c| c.secret.as_str());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    let creds = rt.block_on(agent_core::coordinator_client::enrol(&a.url, &a.token, &owner, &machine, a.replace, current))?;
    creds.save(&path)?;
    outln!("enrolled {machine} (owner {owner}) with {}; credentials in {}", creds.url, path.display());
    // The credentials are read when an agent starts: say what to start (or restart).
    match agent_core::control::call(&paths.socket, &agent_core::control::Request::Status) {
        Ok(agent_core::control::Response::Status(s)) => outln!(
            "the agent running now (pid {}) does not know yet: restart it (`lull agent`, or quit and start the tray app) to take work from {}",
            s.pid,
            creds.url
        ),
        _ => outln!("start the agent to take work from {}: `lull agent` (or start the tray app, lull-tray)", creds.url),
    }
    Ok(())
}

/// The owner's name for enrolment: `$USER`, else the account name of this process's uid
/// (a service or `env -i` may leave `$USER` unset), else "owner".
pub(crate) fn default_owner() -> String {
    if let Some(u) = std::env::var("USER").ok().filter(|u| !u.is_empty()) {
        return u;
    }
    agent_core::sys::id::account_name().unwrap_or_else(|| "owner".into())
}

/// An alert as the owner reads it: "attention: what happened — what to do".
fn alert_text(a: &agent_core::control::Alert) -> String {
    match &a.action {
        Some(action) => format!("attention: {} — {action}", a.message),
        None => format!("attention: {}", a.message),
    }
}

pub(crate) fn print_notice(n: &Notice, json: bool) {
    let line = match n {
        Notice::Started { state, input, guests } => {
            if json {
                serde_json::json!({"event": "started", "state": state.as_str(), "input": input, "guests": guests}).to_string()
            } else {
                let input = if input.is_empty() { "none".to_string() } else { input.join("; ") };
                format!("lull agent started: {} · input: {input} · guests: {guests}", state.as_str())
            }
        }
        Notice::Restored { anon_ms, file_cache_ms } => {
            if json {
                serde_json::json!({"event": "restored", "restore_ms": anon_ms, "cache_restore_ms": file_cache_ms}).to_string()
            } else {
                let part = |what: &str, ms: &Option<u64>| ms.map(|ms| format!("{what} in {ms} ms"));
                let parts: Vec<String> =
                    [part("swapped pages", anon_ms), part("file cache", file_cache_ms)].into_iter().flatten().collect();
                format!("owner memory restored: {}", parts.join(", "))
            }
        }
        Notice::InterruptionNotRecorded { at, interruption: i, error, kept_in_record } => {
            if json {
                serde_json::json!({"event": "interruption_not_recorded", "at": at.utc, "interruption": i, "error": error, "kept_in_record": kept_in_record}).to_string()
            } else {
                let kept = if *kept_in_record {
                    "kept in today's record beside the ledger; the budget keeps it as used"
                } else {
                    "today's record could not be written either; the budget keeps it as used until the agent stops"
                };
                format!(
                    "{}  interruption {} of {} for {} ({:?}) NOT written to the ledger: {error}; {kept}",
                    at.local.format("%Y-%m-%d %H:%M:%S"),
                    i.number,
                    i.limit,
                    i.day,
                    i.cause
                )
            }
        }
        Notice::Alert(a) => {
            if json {
                serde_json::json!({"event": "alert", "alert": a}).to_string()
            } else {
                alert_text(a)
            }
        }
        Notice::Action(now, a) => {
            if json {
                serde_json::json!({"event": "action", "at": now.utc, "action": a}).to_string()
            } else {
                let t = now.local.format("%Y-%m-%d %H:%M:%S");
                match a {
                    Action::StateChanged { from, to, reason } => format!("{t}  {} → {}  ({reason})", from.as_str(), to.as_str()),
                    Action::InterruptionCounted(i) => {
                        format!("{t}  interruption {} of {} counted for {} ({:?})", i.number, i.limit, i.day, i.cause)
                    }
                    Action::DayRolled { day } => format!("{t}  new day {day}: interruption budget starts afresh"),
                    Action::ClockStepped { by_ms } => format!("{t}  wall clock set by {}", human(by_ms.unsigned_abs() / 1000)),
                    Action::Directive(_) | Action::OwnerSettingsChanged => return,
                }
            }
        }
    };
    outln!("{line}");
}
