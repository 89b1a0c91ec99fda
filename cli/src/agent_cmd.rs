//! `lull agent`: the headless agent in the foreground. State changes go to stdout (as
//! text, or JSON lines with `--json`); the full log goes to a daily-rotated file in the
//! data directory (seven days kept) and warnings also to stderr.

use crate::spans::human;
use agent_core::agent::{self, AgentSetup, NoGuests, Notice};
use agent_core::config::Config;
use agent_core::paths::Paths;
use agent_core::policy::Action;
use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

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
    std::fs::create_dir_all(&paths.log_dir).with_context(|| format!("creating {}", paths.log_dir.display()))?;
    let appender = tracing_appender::rolling::Builder::new()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix(name)
        .filename_suffix("log")
        .max_log_files(7)
        .build(&paths.log_dir)
        .context("opening the log file")?;
    let (writer, guard) = tracing_appender::non_blocking(appender);
    let file_filter = EnvFilter::try_from_env("LULL_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(writer).with_ansi(false).with_filter(file_filter))
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                .with_filter(EnvFilter::new("warn")),
        )
        .try_init()
        .ok();
    Ok(guard)
}

pub fn run(args: AgentArgs) -> Result<()> {
    let mut paths = Paths::from_env()?;
    if let Some(c) = args.config {
        paths.config_file = c;
    }
    // A bad config is refused before anything starts, naming the field and range.
    let config = Config::load(&paths.config_file)?;
    let _guard = init_logging(&paths, "agent")?;
    let json = args.json;
    let observer = Box::new(move |n: &Notice| print_notice(n, json));
    let backends = Vec::new();
    let setup = AgentSetup { paths, config, input_backends: backends, guests: Box::new(NoGuests), observer: Some(observer) };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the async runtime")?;
    rt.block_on(async move {
        let shutdown = async {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {},
            }
        };
        agent::run(setup, shutdown).await
    })?;
    Ok(())
}

fn print_notice(n: &Notice, json: bool) {
    use std::io::Write;
    let line = match n {
        Notice::Started { state, input, guests } => {
            if json {
                serde_json::json!({"event": "started", "state": state.as_str(), "input": input, "guests": guests}).to_string()
            } else {
                let input = if input.is_empty() { "none".to_string() } else { input.join("; ") };
                format!("lull agent started: {} · input: {input} · guests: {guests}", state.as_str())
            }
        }
        Notice::Restored { restore_ms } => {
            if json {
                serde_json::json!({"event": "restored", "restore_ms": restore_ms}).to_string()
            } else {
                format!("owner memory restored in {restore_ms} ms")
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
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
