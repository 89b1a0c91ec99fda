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
//! [`Scheduling::wake`]: super::Scheduling::wake

use super::sql;
use crate::model::Lease;
use crate::store::StoreError;
use crate::App;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot};

/// At most this many asks go into one transaction.
const BATCH: usize = 2000;

type Answer = oneshot::Sender<Result<Option<Lease>, StoreError>>;

/// Which agents have no lease waiting, as far as this replica knows (see the module docs).
#[derive(Debug, Default)]
pub struct Hints {
    /// Counts every change that may have left a lease for someone, and every reset.
    generation: u64,
    /// The generation of the last reset (leadership changed: nothing is known).
    reset_at: u64,
    /// Agent → the generation when a lease may last have been left for it.
    touched: HashMap<String, u64>,
    /// Agents known to have no lease waiting.
    empty: HashSet<String>,
}

impl Hints {
    /// The generation to hand to [`Hints::found_empty`] for a look that starts now.
    pub fn begin(&self) -> u64 {
        self.generation
    }

    /// A look that began at generation `began` found no lease left waiting for `agent`:
    /// kept unless something may have left one since.
    pub fn found_empty(&mut self, agent: &str, began: u64) {
        if self.reset_at <= began && self.touched.get(agent).is_none_or(|t| *t <= began) {
            self.empty.insert(agent.to_string());
        }
    }

    /// A lease may now wait for `agent`: its next look goes to the database.
    pub fn may_wait(&mut self, agent: &str) {
        self.generation += 1;
        self.touched.insert(agent.to_string(), self.generation);
        self.empty.remove(agent);
    }

    /// Forgets everything (leadership changed).
    pub fn reset(&mut self) {
        self.generation += 1;
        self.reset_at = self.generation;
        self.touched.clear();
        self.empty.clear();
    }

    /// Whether `agent` is known to have no lease waiting.
    pub fn has_nothing(&self, agent: &str) -> bool {
        self.empty.contains(agent)
    }
}

/// The queue of asks, its receiving end until the batching task takes it, and the
/// leader's [`Hints`].
#[derive(Debug)]
pub struct Deliveries {
    tx: mpsc::UnboundedSender<(String, Answer)>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<(String, Answer)>>>,
    hints: Mutex<Hints>,
}

impl Default for Deliveries {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Deliveries { tx, rx: Mutex::new(Some(rx)), hints: Mutex::new(Hints::default()) }
    }
}

impl Deliveries {
    fn hints(&self) -> std::sync::MutexGuard<'_, Hints> {
        self.hints.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A lease may now wait for `agent` (called after the write that left it is committed).
    pub fn may_wait(&self, agent: &str) {
        self.hints().may_wait(agent);
    }

    /// Forgets which agents have nothing waiting (this replica's leadership changed).
    pub fn forget_hints(&self) {
        self.hints().reset();
    }

    /// Takes a lease waiting for `agent`, in the next batch (or on its own when no
    /// batching task runs). On the leader, an agent known to have nothing waiting gets
    /// `None` without a look.
    pub async fn take(&self, app: &App, agent: &str) -> Result<Option<Lease>, StoreError> {
        if app.scheduling.is_leader() && self.hints().has_nothing(agent) {
            app.metrics.delivery_looks_skipped.fetch_add(1, Ordering::Relaxed);
            return Ok(None);
        }
        let (answer, answered) = oneshot::channel();
        let running = self.rx.lock().unwrap_or_else(|e| e.into_inner()).is_none();
        if running && self.tx.send((agent.to_string(), answer)).is_ok() {
            if let Ok(r) = answered.await {
                return r;
            }
        }
        sql::take_delivery(&app.db, agent, app.config.lease_ttl.as_millis() as i64).await
    }
}

/// The batching task: runs until shutdown begins (asks after that are answered on their
/// own).
pub async fn run(app: Arc<App>) {
    let Some(mut rx) = app.scheduling.deliveries.rx.lock().unwrap_or_else(|e| e.into_inner()).take() else { return };
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
    if let Err(e) = sql::undeliver(&app.db, lease, super::DELIVERY_WINDOW_MS).await {
        tracing::warn!(job = lease.job_id, rank = lease.rank, error = %e, "giving back an unanswered delivery failed");
    }
    // Whether or not the write went through, the agent's next look goes to the database.
    app.scheduling.wake(agent);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_found_empty_is_skipped_until_a_lease_may_wait_for_it() {
        let mut h = Hints::default();
        assert!(!h.has_nothing("a"), "nothing is known at first");
        let began = h.begin();
        h.found_empty("a", began);
        assert!(h.has_nothing("a"));
        assert!(!h.has_nothing("b"));
        h.may_wait("a");
        assert!(!h.has_nothing("a"), "a pass left it a lease");
    }

    #[test]
    fn a_lease_left_while_a_look_was_under_way_is_not_forgotten() {
        let mut h = Hints::default();
        // The look begins, a pass commits a lease for `a` and wakes it, then the look
        // (which read before the commit) reports `a` empty: the hint must not be kept.
        let began = h.begin();
        h.may_wait("a");
        h.found_empty("a", began);
        assert!(!h.has_nothing("a"));
        // Another agent's wake-up does not spoil `b`'s finding.
        let began = h.begin();
        h.may_wait("a");
        h.found_empty("b", began);
        assert!(h.has_nothing("b"));
        // A finding after the wake-up counts.
        let began = h.begin();
        h.found_empty("a", began);
        assert!(h.has_nothing("a"));
    }

    #[test]
    fn a_change_of_leadership_forgets_every_finding_and_the_looks_under_way() {
        let mut h = Hints::default();
        let began = h.begin();
        h.found_empty("a", began);
        let in_flight = h.begin();
        h.reset();
        assert!(!h.has_nothing("a"));
        h.found_empty("b", in_flight);
        assert!(!h.has_nothing("b"), "a look begun before the change tells nothing");
        let began = h.begin();
        h.found_empty("b", began);
        assert!(h.has_nothing("b"));
    }

    #[tokio::test]
    async fn a_wake_up_sends_the_agents_next_look_to_the_database() {
        let s = crate::scheduling::Scheduling::default();
        let began = s.deliveries.hints().begin();
        s.deliveries.hints().found_empty("a", began);
        assert!(s.deliveries.hints().has_nothing("a"));
        s.wake("a");
        assert!(!s.deliveries.hints().has_nothing("a"));
    }
}
