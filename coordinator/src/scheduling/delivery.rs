//! Lease delivery with group commit: the long polls of this replica that look for a
//! waiting lease queue their asks here, and one task hands out the leases of every ask
//! queued meanwhile in one transaction ([`sql::take_deliveries`]).
//!
//! Each delivery is a write (the lease is marked delivered and given its full time), and
//! a write is durable only once committed: with SQLite that is a `fsync` per commit, so
//! one transaction per poll capped deliveries at a few hundred a second. Batched, the
//! commit is shared by every poll that asked while the previous batch was being written,
//! so the batches grow with the load and nothing waits for a timer. A poll is answered
//! only after the commit, as before, and each lease still goes to at most one poll.
//!
//! On the leader most looks would find nothing: a poll opens right after its agent took
//! its last lease, before the scheduler could give it another. So the leader keeps
//! [`Hints`]: the agents a batch found with no lease left waiting, each forgotten as soon
//! as something may have left one for it again ([`Scheduling::wake`] after a pass, a
//! recruitment or another replica's notice; a delivery given back). A poll of an agent
//! known to have nothing skips the database and waits for its wake-up. A hint is kept
//! only when nothing could have left a lease since the batch began (a generation
//! number), and dropped whenever this replica's leadership changes.
//!
//! [`Scheduling::wake`]: crate::hub::Scheduling::wake
//! [`Hints`]: crate::hub::deliveries::Hints

use super::sql;
use crate::app::App;
use crate::hub::DELIVERY_WINDOW_MS;
use crate::model::Lease;
use crate::store::StoreError;
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// At most this many asks go into one transaction.
const BATCH: usize = 2000;

/// Takes a lease waiting for `agent`, in the next batch (or on its own when no batching
/// task runs). On the leader, an agent known to have nothing waiting gets `None` without
/// a look.
pub async fn take(app: &App, agent: &str) -> Result<Option<Lease>, StoreError> {
    let deliveries = &app.scheduling.deliveries;
    if app.scheduling.is_leader() && deliveries.hints().has_nothing(agent) {
        app.metrics.delivery_looks_skipped.fetch_add(1, Ordering::Relaxed);
        return Ok(None);
    }
    if let Some(answered) = deliveries.ask(agent) {
        if let Ok(r) = answered.await {
            return r;
        }
    }
    sql::take_delivery(&app.db, agent, app.config.lease_ttl.as_millis() as i64).await
}

/// The batching task: runs until shutdown begins (asks after that are answered on their
/// own).
pub async fn run(app: Arc<App>) {
    let Some(mut rx) = app.scheduling.deliveries.take_asks() else { return };
    let ttl = app.config.lease_ttl.as_millis() as i64;
    let mut stop = app.shutdown.clone();
    let mut batch = Vec::with_capacity(64);
    loop {
        let n = tokio::select! {
            n = rx.recv_many(&mut batch, BATCH) => n,
            _ = stop.wait_for(|s| *s) => 0,
        };
        if n == 0 {
            break;
        }
        let mut wants: Vec<(String, u32)> = Vec::new();
        let mut ix: HashMap<&str, usize> = HashMap::new();
        for (agent, _) in &batch {
            match ix.get(agent.as_str()) {
                Some(&i) => wants[i].1 += 1,
                None => {
                    ix.insert(agent, wants.len());
                    wants.push((agent.clone(), 1));
                }
            }
        }
        drop(ix);
        app.metrics.delivery_looks.fetch_add(batch.len() as u64, Ordering::Relaxed);
        app.metrics.delivery_batches.fetch_add(1, Ordering::Relaxed);
        let began = app.scheduling.deliveries.hints().begin();
        match sql::take_deliveries(&app.db, &wants, ttl).await {
            Ok((leases, waiting)) => {
                let mut by_agent: HashMap<String, Vec<Lease>> = HashMap::new();
                for (agent, lease) in leases.into_iter().rev() {
                    by_agent.entry(agent).or_default().push(lease);
                }
                if app.scheduling.is_leader() {
                    let mut hints = app.scheduling.deliveries.hints();
                    for (agent, _) in wants.iter().filter(|(a, _)| !waiting.contains(a)) {
                        hints.found_empty(agent, began);
                    }
                }
                for (agent, answer) in batch.drain(..) {
                    let lease = by_agent.get_mut(&agent).and_then(|l| l.pop());
                    if let Err(Ok(Some(lease))) = answer.send(Ok(lease)) {
                        // The poll went away before its answer: the lease was marked
                        // delivered in vain. Give it back to the delivery window.
                        requeue_undelivered(&app, &agent, &lease).await;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, asks = batch.len(), "delivering leases in one batch failed; each poll is answered on its own");
                for (agent, answer) in batch.drain(..) {
                    let _ = answer.send(sql::take_delivery(&app.db, &agent, ttl).await);
                }
            }
        }
    }
}

/// Undoes the delivery of a lease whose poll left before it was answered, so that the
/// agent's next poll takes it (or it expires after the delivery window, using no retry).
async fn requeue_undelivered(app: &App, agent: &str, lease: &Lease) {
    if let Err(e) = sql::undeliver(&app.db, lease, DELIVERY_WINDOW_MS).await {
        tracing::warn!(job = lease.job_id, rank = lease.rank, error = %e, "giving back an unanswered delivery failed");
    }
    // Whether or not the write went through, the agent's next look goes to the database.
    app.scheduling.wake(agent);
}
