//! The long polls' lease hand-over, as state: the queue of asks that the batching task
//! (`scheduling::delivery`, whose docs tell the design) answers in one transaction, and
//! the leader's [`Hints`] of which agents have no lease waiting.

use crate::model::Lease;
use crate::store::StoreError;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use tokio::sync::{mpsc, oneshot};

/// Where one ask's answer goes: the lease taken for it, if any.
pub type Answer = oneshot::Sender<Result<Option<Lease>, StoreError>>;

/// Which agents have no lease waiting, as far as this replica knows (see `scheduling::delivery`).
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
    /// The leader's hints (for the batching task, and tests).
    pub(crate) fn hints(&self) -> std::sync::MutexGuard<'_, Hints> {
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

    /// Queues an ask for `agent` to the batching task; `None` when no batching task runs
    /// (the ask is then answered on its own).
    pub(crate) fn ask(&self, agent: &str) -> Option<oneshot::Receiver<Result<Option<Lease>, StoreError>>> {
        let (answer, answered) = oneshot::channel();
        let running = self.rx.lock().unwrap_or_else(|e| e.into_inner()).is_none();
        (running && self.tx.send((agent.to_string(), answer)).is_ok()).then_some(answered)
    }

    /// The receiving end of the asks, for the batching task (once: `None` after).
    pub(crate) fn take_asks(&self) -> Option<mpsc::UnboundedReceiver<(String, Answer)>> {
        self.rx.lock().unwrap_or_else(|e| e.into_inner()).take()
    }
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
        let s = crate::hub::Scheduling::default();
        let began = s.deliveries.hints().begin();
        s.deliveries.hints().found_empty("a", began);
        assert!(s.deliveries.hints().has_nothing("a"));
        s.wake("a");
        assert!(!s.deliveries.hints().has_nothing("a"));
    }
}
