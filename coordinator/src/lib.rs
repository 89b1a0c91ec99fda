//! Lull's coordinator: enrolment and auth, FIFO jobs with leases, the agents' donated-time
//! and interruption records, reports, over an HTTP API (axum) with an OpenAPI document,
//! Prometheus metrics and graceful shutdown. Storage is embedded SQLite by default and
//! PostgreSQL at scale, where several replicas may share one database.
//!
//! [`serve`] takes its listener, database and shutdown signal as arguments, so tests and
//! `lull up` run it on any port with any database, and stop it when they like.

// Product code handles its errors; `.unwrap()` is for tests (clippy.toml allows it there).
#![warn(clippy::unwrap_used)]

pub mod api;
pub mod auth;
pub mod backup;
#[cfg(test)]
mod bindings;
pub mod bounds;
pub mod db;
pub mod identity;
pub mod integrity;
pub mod live;
pub mod metrics;
pub mod migration;
pub mod model;
pub mod owner_only;
pub mod report;
pub mod scheduling;
pub mod store;
pub mod waiting;

pub use db::{Db, DbError, Dialect};

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Tunables of a coordinator.
#[derive(Clone, Debug)]
pub struct Config {
    /// A lease not renewed (progress) for this long is lost: its task is re-queued.
    pub lease_ttl: Duration,
    /// The heartbeat interval agents are told to use.
    pub heartbeat_interval: Duration,
    /// How often heartbeat state is written to the database.
    pub flush_interval: Duration,
    /// How often expired leases are looked for.
    pub sweep_interval: Duration,
    /// When set, `/metrics` answers only `Authorization: Bearer <this key>` (401 otherwise);
    /// unset, it is open to anyone who can reach the coordinator.
    pub metrics_key: Option<String>,
    /// The scheduler's configuration (algorithm, prediction); `lull coordinator serve
    /// --scheduler`.
    pub scheduler: lull_core::sched::SchedConfig,
    /// How long a started gang that lost a member stays halted waiting for its
    /// replacement before the whole gang is re-queued (as the agents' gang fill timeout).
    pub gang_halt_timeout: Duration,
    /// Instant recruitment's settings (the reserve); `lull coordinator serve --reserve-pct`.
    pub recruit: lull_core::sched::RecruitConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            lease_ttl: Duration::from_secs(60),
            heartbeat_interval: Duration::from_secs(10),
            flush_interval: Duration::from_secs(1),
            sweep_interval: Duration::from_secs(1),
            metrics_key: None,
            scheduler: lull_core::sched::SchedConfig::default(),
            gang_halt_timeout: Duration::from_secs(120),
            recruit: scheduling::recruiting::config_with_reserve(scheduling::recruiting::DEFAULT_RESERVE_PCT)
                .expect("the default reserve is in range"),
        }
    }
}

/// A running coordinator's shared state.
pub struct App {
    pub db: Db,
    pub config: Config,
    pub live: live::Live,
    pub metrics: metrics::Metrics,
    /// The scheduler's inbox and the long polls' waiters.
    pub scheduling: scheduling::Scheduling,
    /// Turns true when shutdown begins (long-polls return at once).
    pub shutdown: watch::Receiver<bool>,
}

/// A serving failure.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("serving HTTP: {0}")]
    Io(#[from] std::io::Error),
    #[error("database {path}: {error}")]
    Lock { path: String, error: std::io::Error },
}

/// Serves the coordinator on `listener` with `db` until `shutdown` completes, then stops
/// accepting, lets requests in flight finish (long-polls return at once), writes the
/// last heartbeat state and returns.
pub async fn serve(
    listener: TcpListener,
    db: Db,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    // Held while serving: a restore cannot replace the file underneath.
    let _serving = match &db.path {
        Some(p) => Some(integrity::serve_lock(p).map_err(|error| ServeError::Lock { path: p.display().to_string(), error })?),
        None => None,
    };
    let (stop_tx, stop_rx) = watch::channel(false);
    let app = Arc::new(App {
        db,
        config: config.clone(),
        live: live::Live::default(),
        metrics: metrics::Metrics::default(),
        scheduling: scheduling::Scheduling::default(),
        shutdown: stop_rx.clone(),
    });
    let background = tokio::spawn(background(app.clone(), stop_rx.clone()));
    let deliveries = tokio::spawn(scheduling::delivery::run(app.clone()));
    let (sched_ready, sched_ready_rx) = tokio::sync::oneshot::channel();
    let scheduling = tokio::spawn(scheduling::replicas::run(app.clone(), config.scheduler.clone(), stop_rx.clone(), sched_ready));
    // Serve once the first election was tried (a lone replica then leads from its first
    // request); a database too slow for that does not hold the server back for long.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), sched_ready_rx).await;
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let mut stopped = stop_rx.clone();
    let addr = listener.local_addr().map_or_else(|e| format!("unknown ({e})"), |a| a.to_string());
    tracing::info!(%addr, db = ?app.db.dialect, "coordinator listening");
    if !api::dashboard::built() {
        tracing::warn!("this coordinator was built without its dashboard (ui/dist-dashboard was missing): `/` explains how to build it");
    }
    // With each connection's peer address: keys' and tokens' uses are recorded with it.
    axum::serve(listener, api::router(app.clone()).into_make_service_with_connect_info::<std::net::SocketAddr>())
        .with_graceful_shutdown(async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await?;
    let _ = background.await;
    let _ = scheduling.await;
    let _ = deliveries.await;
    flush(&app).await;
    // Every connection closed: SQLite checkpoints its WAL into the file and removes it, so
    // a stopped coordinator's database is one self-contained file (to copy or restore).
    app.db.close().await;
    tracing::info!("coordinator stopped");
    Ok(())
}

/// Writes the API keys' uses counted since the last write (kept for the next on failure).
pub(crate) async fn flush_key_uses(app: &App) {
    let uses = app.live.take_key_uses();
    if let Err(e) = identity::flush_key_uses(&app.db, &uses).await {
        tracing::warn!(error = %e, "writing API key uses failed; will retry");
        app.live.restore_key_uses(uses);
    }
}

async fn flush(app: &App) {
    flush_key_uses(app).await;
    let snaps = app.live.take_dirty();
    if snaps.is_empty() {
        return;
    }
    let t = std::time::Instant::now();
    let n = snaps.len();
    if let Err(e) = store::flush_snapshots(&app.db, &snaps).await {
        app.metrics.flush_errors.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(error = %e, agents = n, "heartbeat flush failed; will retry");
        app.live.restore(snaps);
        return;
    }
    let took = t.elapsed();
    app.metrics.last_flush_us.store(took.as_micros() as u64, Ordering::Relaxed);
    app.metrics.last_flush_agents.store(n as u64, Ordering::Relaxed);
    if took > app.config.flush_interval {
        tracing::warn!(agents = n, ms = took.as_millis() as u64, "heartbeat flush took longer than its interval");
    }
}

/// Flushes heartbeats and re-queues expired leases until shutdown.
async fn background(app: Arc<App>, mut stop: watch::Receiver<bool>) {
    let mut flush_tick = tokio::time::interval(app.config.flush_interval);
    let mut sweep_tick = tokio::time::interval(app.config.sweep_interval);
    let mut halt_tick = tokio::time::interval(app.config.sweep_interval);
    halt_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    flush_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    sweep_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = flush_tick.tick() => flush(&app).await,
            _ = sweep_tick.tick() => match store::requeue_expired(&app.db).await {
                Ok(jobs) if jobs.is_empty() => {}
                Ok(jobs) => {
                    app.metrics.requeued.fetch_add(jobs.len() as u64, Ordering::Relaxed);
                    tracing::info!(jobs = jobs.len(), "expired leases re-queued");
                    for job in jobs {
                        app.scheduling.send(scheduling::Msg::Job { job, ended: None });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "lease sweep failed"),
            },
            _ = halt_tick.tick() => match store::resolve_halts(&app.db, app.config.gang_halt_timeout.as_millis() as i64).await {
                Ok(jobs) => {
                    for job in jobs {
                        app.metrics.requeued.fetch_add(1, Ordering::Relaxed);
                        tracing::info!(job, timeout_s = app.config.gang_halt_timeout.as_secs(), "halted gang not replaced in time: re-queued whole");
                        app.scheduling.send(scheduling::Msg::Job { job, ended: None });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "gang halt sweep failed"),
            },
            _ = stop.changed() => if *stop.borrow() { return },
        }
    }
}
