//! The agent inside the tray app: the complete agent `agent_core::assembly` builds for
//! every entry point (real input, the guest runtime with its fast freeze, the coordinator
//! link when enrolled), on its own thread with a current-thread runtime. The tray, the
//! windows and the CLI all talk to it over its control socket. It stops on Quit, SIGTERM,
//! SIGINT or SIGHUP, and always evicts its guests, flushes its ledger and removes its
//! socket on the way out.

use agent_core::assembly::{assemble, stop_signal, Extras};
use agent_core::config::Config;
use agent_core::control::{call, Request, Response};
use agent_core::paths::Paths;
use anyhow::{anyhow, Context, Result};
use std::path::PathBuf;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

pub use agent_core::agent::Observer;

/// Runs the complete agent on the current thread until `stop` fires (if given) or a
/// SIGTERM, SIGINT or SIGHUP arrives.
pub fn run_blocking(paths: Paths, config: Config, observer: Option<Observer>, stop: Option<oneshot::Receiver<()>>) -> Result<()> {
    let agent = assemble(paths, config, Extras { observer, ..Extras::default() })?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the agent's runtime")?;
    rt.block_on(async move {
        let shutdown = async move {
            let stop = async move {
                match stop {
                    Some(rx) => {
                        let _ = rx.await;
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = stop_signal() => {},
                _ = stop => {},
            }
        };
        agent.run(shutdown).await
    })?;
    Ok(())
}

/// The agent running on a background thread.
pub struct Embedded {
    pub socket: PathBuf,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<()>>>,
}

impl Embedded {
    /// Starts the agent and waits until its control socket answers. `on_exit` runs on
    /// the agent's thread once it has stopped, for whatever reason.
    pub fn start(paths: Paths, config: Config, observer: Observer, on_exit: Box<dyn FnOnce() + Send>) -> Result<Self> {
        let socket = paths.socket.clone();
        let (tx, rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("agent".into())
            .spawn(move || {
                let r = run_blocking(paths, config, Some(observer), Some(rx));
                if let Err(e) = &r {
                    tracing::error!("the agent stopped: {}", agent_core::message::once(e.chain()));
                }
                on_exit();
                r
            })
            .context("starting the agent thread")?;
        let mut me = Self { socket, stop: Some(tx), thread: Some(thread) };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if matches!(call(&me.socket, &Request::Status), Ok(Response::Status(_))) {
                return Ok(me);
            }
            if me.thread.as_ref().is_some_and(|t| t.is_finished()) {
                let r = me.thread.take().map(|t| t.join());
                return Err(match r {
                    Some(Ok(Err(e))) => e,
                    _ => anyhow!("the agent stopped during start-up"),
                });
            }
            if Instant::now() > deadline {
                return Err(anyhow!("the agent did not answer on {} within 20 s", me.socket.display()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the agent and waits for it (ledger flushed, socket removed).
    pub fn stop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            if let Ok(Err(e)) = t.join() {
                tracing::warn!("the agent reported on stopping: {}", agent_core::message::once(e.chain()));
            }
        }
    }
}

impl Drop for Embedded {
    fn drop(&mut self) {
        self.stop();
    }
}
