//! The one way to build a complete agent: input backends as configured, the platform's
//! guest runtime, the ledger and control socket (opened by the driver), and the
//! coordinator link when this machine is enrolled. `lull agent`, `lull up`, `lull run`
//! and the tray app (`lull-tray`) all call [`assemble`]; an entry point adds only what is
//! its own (an observer that prints or notifies, extra diagnostic input, the
//! credentials `lull up` just made). Two places that build an agent by hand drift: the
//! tray's agent once had no input, no guests and no coordinator link.

use crate::agent::{self, AgentError};
use crate::config::Config;
use crate::control::CoordinatorLink;
use crate::coordinator_client::{self, Credentials, JobLink};
use crate::data_lock::{DataDirLock, LockError};
use crate::driver_link::{DriverHandle, LinkHealth};
use crate::guest::GuestHost;
use crate::input::InputBackend;
use crate::paths::Paths;
use std::future::Future;

/// Which coordinator the agent links to.
#[derive(Debug, Clone)]
pub enum Link {
    /// The one this machine enrolled with (`coordinator.json` in the data directory), if any.
    IfEnrolled,
    /// These credentials (`lull up`, which enrols to its own coordinator first).
    With(Credentials),
}

/// What an entry point adds to the complete agent.
pub struct Extras {
    /// Told every state change, interruption and restore (the CLI prints, the tray notifies).
    pub observer: Option<agent::Observer>,
    pub link: Link,
    /// Input backends beside the configured ones (`lull run --activity-fifo`).
    pub extra_input: Vec<Box<dyn InputBackend>>,
    /// The data directory's lock, when the entry point took it before anything else
    /// (`lull up`, which must change no file when another agent owns the directory);
    /// otherwise [`assemble`] takes it first.
    pub data_lock: Option<DataDirLock>,
}

impl Default for Extras {
    fn default() -> Self {
        Self { observer: None, link: Link::IfEnrolled, extra_input: Vec::new(), data_lock: None }
    }
}

/// Why an agent could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum AssemblyError {
    #[error("creating the data directory {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error(transparent)]
    Credentials(#[from] coordinator_client::ClientError),
    #[error(transparent)]
    Locked(#[from] LockError),
    /// Linked to a coordinator with a guest runtime that cannot contain strangers' code.
    #[error("this agent is enrolled with {url}, but it cannot run the pool's guests safely here: {why}. Remove the enrolment ({credentials}) to run Lull unlinked; `lull run` still runs your own jobs")]
    UncontainedPool { url: String, why: String, credentials: String },
}

/// A complete agent, ready to run: the driver and, when linked, the coordinator link.
pub struct CompleteAgent {
    setup: agent::AgentSetup,
    link: Option<Credentials>,
    lock: DataDirLock,
}

/// Builds the complete agent for `paths` and `config`.
pub fn assemble(paths: Paths, config: Config, extras: Extras) -> Result<CompleteAgent, AssemblyError> {
    let Extras { observer, link, extra_input, data_lock } = extras;
    // First: a second agent on this data directory touches nothing (not even the guests'
    // cgroups, which the guest runtime below cleans of a dead agent's leftovers).
    let lock = match data_lock {
        Some(l) => l,
        None => DataDirLock::acquire(&paths.data_dir)?,
    };
    // An install made by an earlier version, or under a wider umask, is made owner-only.
    paths.tighten_install();
    let mut input_backends = crate::input::platform_backends(&config.input);
    input_backends.extend(extra_input);
    let guests = guest_runtime(&config, &paths)?;
    let link = match link {
        Link::IfEnrolled => Credentials::load(&Credentials::path(&paths))?,
        Link::With(c) => Some(c),
    };
    // Trust: the pool's guests run only where they cannot reach the owner's files.
    if let (Some(c), Some(why)) = (&link, guests.pool_refusal()) {
        let credentials = Credentials::path(&paths).display().to_string();
        return Err(AssemblyError::UncontainedPool { url: c.url.clone(), why, credentials });
    }
    let coordinator =
        link.as_ref().map(|c| CoordinatorLink { url: c.url.clone(), agent_id: c.agent_id.clone(), machine: c.machine.clone() });
    let setup = agent::AgentSetup {
        paths,
        config,
        input_backends,
        guests,
        observer,
        coordinator,
        accepting: None,
        data_lock: None,
        link_health: None,
    };
    Ok(CompleteAgent { setup, link, lock })
}

/// The platform's guest runtime (on Linux: cgroups, sandbox, watchdog; it kills what a
/// crashed earlier agent left behind).
fn guest_runtime(config: &Config, paths: &Paths) -> Result<Box<dyn GuestHost>, AssemblyError> {
    std::fs::create_dir_all(&paths.data_dir)
        .map_err(|source| AssemblyError::DataDir { path: paths.data_dir.display().to_string(), source })?;
    let work_root =
        paths.create_work_root().map_err(|source| AssemblyError::DataDir { path: paths.work_root().display().to_string(), source })?;
    Ok(crate::guest::platform_runtime(config, &work_root))
}

impl CompleteAgent {
    /// The coordinator this agent will link to.
    pub fn coordinator(&self) -> Option<&Credentials> {
        self.link.as_ref()
    }

    /// Runs the driver and, when linked, the coordinator link (heartbeats, records,
    /// leased tasks run as guests) until `shutdown` resolves or the driver stops.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), AgentError> {
        let Self { mut setup, link, lock } = self;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let (accepting_tx, accepting) = tokio::sync::watch::channel(false);
        setup.accepting = Some(accepting_tx);
        // The link's one way into the driver: a handle, whose other end the driver serves.
        let (driver_handle, inbox) = DriverHandle::new(accepting);
        let inbox = link.is_some().then_some(inbox);
        // The driver checks on its own tick that the data directory is still there.
        setup.data_lock = Some(lock);
        let job_link = JobLink { driver: driver_handle, max_jobs: setup.config.guests.max_jobs };
        // The link says how it stands (a refused credential) in the driver's status.
        let (health_tx, health_rx) = tokio::sync::watch::channel(LinkHealth::Working);
        setup.link_health = Some(health_rx);
        let health = std::sync::Arc::new(health_tx);
        let paths = setup.paths.clone();
        let retention = crate::retention::run(paths.work_root(), setup.config.guests.retention_days);
        let driver = async {
            let r = agent::run_with_jobs(setup, inbox, stopped(stop_rx.clone())).await;
            // Whatever ends the driver (shutdown or an error) also ends the link.
            let _ = stop_tx.send(true);
            r
        };
        let linked = async {
            if let Some(creds) = link {
                if let Err(e) = coordinator_client::run_link(paths, creds, job_link, Some(health), stopped(stop_rx.clone())).await {
                    tracing::warn!("coordinator link stopped: {e}");
                }
            }
        };
        let watch = async {
            tokio::select! {
                _ = shutdown => { let _ = stop_tx.send(true); }
                _ = stopped(stop_rx.clone()) => {}
            }
        };
        // Old guests' work directories go at start and daily, while the agent runs.
        let cleaner = async {
            tokio::select! {
                _ = retention => {}
                _ = stopped(stop_rx.clone()) => {}
            }
        };
        let (r, _, _, _) = tokio::join!(driver, linked, watch, cleaner);
        r
    }
}

/// Resolves on the first SIGINT, SIGTERM or SIGHUP (a closed terminal): how the
/// foreground commands and the tray app are told to stop. The handlers are installed
/// by this call, not when the future is first polled: a signal that comes in between
/// (`lull run` stopped just as its job is handed over) is delivered, not fatal. Must be
/// called inside a tokio runtime.
pub fn stop_signal() -> impl std::future::Future<Output = ()> {
    crate::sys::signal::stop_requested()
}
