//! Which replica schedules, and how the others reach it.
//!
//! SQLite: one replica, always the leader. PostgreSQL: every replica tries
//! `pg_try_advisory_lock` on a connection of its own and checks it every second; the
//! holder runs the driver. The lock lives as long as that session: when the leader is
//! killed, PostgreSQL ends its session, and the next replica to try takes the lead. A
//! leader that loses its connection stops scheduling at once.
//!
//! Messages cross replicas on `LISTEN`/`NOTIFY` channels: followers send their [`Msg`]s
//! on `lull_sched` (the leader applies them), the leader names the agents that got a
//! lease on `lull_lease` (their polls, wherever they wait, look at once), and a new
//! leader says so on `lull_leader` (the others re-announce their open polls).

use super::driver;
use super::lease_notice::lease_notice_agents;
use crate::app::App;
use crate::db::Dialect;
use crate::hub::Msg;
use lull_core::sched::SchedConfig;
use sqlx::postgres::{PgConnection, PgListener};
use sqlx::Connection;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};

/// The advisory lock key of the scheduling leader ("LULLSCHD").
const LEADER_LOCK: i64 = 0x4C55_4C4C_5343_4844;
/// How often the leader checks its lock session and followers try to take the lead.
const LEADER_CHECK: Duration = Duration::from_secs(1);

/// Starts scheduling on this replica: the leader election (or, on SQLite, the driver at
/// once) and, on PostgreSQL, the message bus. `ready` is sent once the first election
/// has been tried (the server starts answering after it, so a lone replica serves its
/// first long poll as the leader). Runs until `stop` turns true.
pub async fn run(app: Arc<App>, config: SchedConfig, stop: watch::Receiver<bool>, ready: oneshot::Sender<()>) {
    match app.db.dialect {
        Dialect::Sqlite => {
            let (tx, rx) = mpsc::unbounded_channel();
            app.scheduling.lead(tx);
            let _ = ready.send(());
            let mut stop = stop;
            tokio::select! {
                _ = driver::run(app.clone(), config, rx) => {}
                _ = stop.wait_for(|s| *s) => {}
            }
            app.scheduling.step_down();
        }
        Dialect::Postgres => {
            let (out_tx, out_rx) = mpsc::unbounded_channel();
            app.scheduling.set_outbox(out_tx);
            let mut stop2 = stop.clone();
            tokio::select! {
                _ = elect(app.clone(), config, ready) => {}
                _ = bus(app.clone(), out_rx) => {}
                _ = stop2.wait_for(|s| *s) => {}
            }
            app.scheduling.step_down();
        }
    }
}

/// Tries to lead; leads while the lock session lives; tries again.
async fn elect(app: Arc<App>, config: SchedConfig, ready: oneshot::Sender<()>) {
    let mut ready = Some(ready);
    loop {
        match PgConnection::connect(app.db.url()).await {
            Ok(mut conn) => {
                let got: Result<bool, _> =
                    sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(LEADER_LOCK).fetch_one(&mut conn).await;
                if let Ok(true) = got {
                    lead(&app, &config, &mut conn, ready.take()).await;
                    let _ = conn.close().await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "scheduler election: cannot connect"),
        }
        if let Some(r) = ready.take() {
            let _ = r.send(());
        }
        tokio::time::sleep(LEADER_CHECK).await;
    }
}

/// Runs the driver while `conn` (which holds the lock) answers.
async fn lead(app: &Arc<App>, config: &SchedConfig, conn: &mut PgConnection, ready: Option<oneshot::Sender<()>>) {
    tracing::info!("this replica leads scheduling");
    let (tx, rx) = mpsc::unbounded_channel();
    app.scheduling.lead(tx);
    let driver = tokio::spawn(driver::run(app.clone(), config.clone(), rx));
    if let Some(r) = ready {
        let _ = r.send(());
    }
    // The other replicas re-announce their open polls to this new leader.
    let _ = sqlx::query("SELECT pg_notify('lull_leader', '')").execute(&mut *conn).await;
    loop {
        tokio::time::sleep(LEADER_CHECK).await;
        let alive = tokio::time::timeout(LEADER_CHECK, sqlx::query("SELECT 1").execute(&mut *conn)).await;
        if !matches!(alive, Ok(Ok(_))) || driver.is_finished() {
            break;
        }
    }
    app.scheduling.step_down();
    driver.abort();
    tracing::warn!("this replica no longer leads scheduling");
}

/// Forwards this replica's messages to the leader and delivers the leader's lease notices.
async fn bus(app: Arc<App>, mut out: mpsc::UnboundedReceiver<Msg>) {
    let send = async {
        while let Some(msg) = out.recv().await {
            let Ok(text) = serde_json::to_string(&msg) else { continue };
            if let Err(e) = sqlx::query("SELECT pg_notify('lull_sched', $1)").bind(text).execute(&app.db.pool).await {
                tracing::warn!(error = %e, "forwarding a scheduler message failed");
            }
        }
    };
    let listen = async {
        loop {
            let mut l = match PgListener::connect(app.db.url()).await {
                Ok(l) => l,
                Err(e) => {
                    tracing::warn!(error = %e, "scheduler bus: cannot connect");
                    tokio::time::sleep(LEADER_CHECK).await;
                    continue;
                }
            };
            if let Err(e) = l.listen_all(["lull_sched", "lull_lease", "lull_leader"]).await {
                tracing::warn!(error = %e, "scheduler bus: LISTEN failed");
                tokio::time::sleep(LEADER_CHECK).await;
                continue;
            }
            while let Ok(n) = l.recv().await {
                match n.channel() {
                    "lull_lease" => {
                        for agent in lease_notice_agents(n.payload()) {
                            app.scheduling.wake(agent);
                        }
                    }
                    "lull_leader" => {
                        if !app.scheduling.is_leader() {
                            app.scheduling.reannounce();
                        }
                    }
                    _ => {
                        if app.scheduling.is_leader() {
                            if let Ok(msg) = serde_json::from_str::<Msg>(n.payload()) {
                                let _ = app.scheduling.send(msg);
                            }
                        }
                    }
                }
            }
        }
    };
    tokio::join!(send, listen);
}
