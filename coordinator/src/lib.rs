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
pub mod app;
pub mod auth;
pub mod backup;
#[cfg(test)]
mod bindings;
pub mod bounds;
pub mod db;
pub mod hub;
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

pub use app::{App, Config};
pub use db::{Db, DbError, Dialect};

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

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
        scheduling: hub::Scheduling::default(),
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

async fn flush(app: &App) {
    app.flush_key_uses().await;
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
                        app.scheduling.send(hub::Msg::Job { job, ended: None });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "lease sweep failed"),
            },
            _ = halt_tick.tick() => match store::resolve_halts(&app.db, app.config.gang_halt_timeout.as_millis() as i64).await {
                Ok(jobs) => {
                    for job in jobs {
                        app.metrics.requeued.fetch_add(1, Ordering::Relaxed);
                        tracing::info!(job, timeout_s = app.config.gang_halt_timeout.as_secs(), "halted gang not replaced in time: re-queued whole");
                        app.scheduling.send(hub::Msg::Job { job, ended: None });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "gang halt sweep failed"),
            },
            _ = stop.changed() => if *stop.borrow() { return },
        }
    }
}
