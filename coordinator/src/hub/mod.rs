//! The scheduling hub: the state every part of a replica shares with its scheduler, below
//! the tasks that use it. A change that can matter to placement is a [`Msg`] handed to
//! [`Scheduling::send`], which puts it in the leading driver's inbox or forwards it to the
//! leader elsewhere; the long polls wait here for their leases ([`Scheduling::waiter`],
//! [`deliveries`]); instant recruitment keeps its pool here ([`recruiting`]).
//!
//! Only state lives here: the tasks that run on it (the driver, the replicas' election,
//! the delivery batches, recruitment's writes) are in the `scheduling` module, which
//! holds the whole design in its docs.

pub mod deliveries;
pub mod recruiting;

use crate::model::Heartbeat;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, watch, Notify};

/// How long a lease assigned by the scheduler waits for its agent's long poll before it
/// expires and its task is re-queued (the agent stopped asking for work meanwhile).
pub const DELIVERY_WINDOW_MS: i64 = 10_000;

/// Something the scheduler should look at again.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "m", rename_all = "snake_case")]
pub enum Msg {
    /// A job changed in the database: submitted, a task ended or was given back,
    /// re-queued or cancelled. `ended` carries what a finished task used, for the
    /// runtime prediction.
    Job { job: i64, ended: Option<Ended> },
    /// An agent's long poll for work opened (it has a free slot and `free_mem` bytes
    /// for guests) or closed (`delivered`: it took a lease).
    Poll { agent: String, open: bool, free_mem: u64, delivered: bool, hb: Option<Heartbeat> },
    /// An agent's heartbeat: its budget, speed, load and state.
    Heartbeat { agent: String, hb: Heartbeat },
    /// A machine was removed from the pool.
    AgentRemoved { agent: String },
    /// Instant recruitment lent these machines or gave them back: look at them again.
    Machines { agents: Vec<String> },
}

/// What a task used, reported when it ended.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Ended {
    pub agent: String,
    pub rank: u32,
    /// User + system CPU seconds.
    pub cpu_s: f64,
    /// `true` for a completion, `false` for an eviction or failure.
    pub completed: bool,
}

/// The scheduling side of a replica: where messages go and who waits for leases.
#[derive(Debug)]
pub struct Scheduling {
    /// True while this replica leads (its driver runs).
    leader: AtomicBool,
    /// The running driver's inbox (set while leading): each message with its number.
    inbox: Mutex<Option<mpsc::UnboundedSender<(u64, Msg)>>>,
    /// Numbers the messages sent to this replica's driver.
    seq: AtomicU64,
    /// The number of the last message the driver applied *and* followed with a pass.
    passed: watch::Sender<u64>,
    /// Agent id → woken when a lease for it may be waiting.
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
    /// Messages for the leader elsewhere (PostgreSQL followers), sent by the replicas task.
    outbox: Mutex<Option<mpsc::UnboundedSender<Msg>>>,
    /// This replica's open long polls: agent → (how many, the last free memory given), so
    /// a new leader learns of polls opened before it led ([`Scheduling::reannounce`]).
    open_polls: Mutex<HashMap<String, (u32, u64)>>,
    /// The long polls' lease hand-over, group-committed.
    pub deliveries: deliveries::Deliveries,
    /// Instant recruitment's state (while leading), fed by the driver.
    pub recruiting: recruiting::Recruiting,
}

impl Default for Scheduling {
    fn default() -> Self {
        Scheduling {
            leader: AtomicBool::new(false),
            inbox: Mutex::new(None),
            seq: AtomicU64::new(1),
            passed: watch::Sender::new(0),
            waiters: Mutex::new(HashMap::new()),
            outbox: Mutex::new(None),
            open_polls: Mutex::new(HashMap::new()),
            deliveries: deliveries::Deliveries::default(),
            recruiting: recruiting::Recruiting::default(),
        }
    }
}

impl Scheduling {
    /// Whether this replica runs the scheduler now.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Acquire)
    }

    /// Hands a message to the scheduler, wherever it runs. Never blocks; a message lost
    /// in a change of leader is recovered by the new leader's rebuild from the database
    /// (and open polls by the agents' next poll).
    ///
    /// Returns the message's number when this replica's driver took it (see
    /// [`Scheduling::passed`]), `None` when it went to another replica.
    pub fn send(&self, msg: Msg) -> Option<u64> {
        if self.is_leader() {
            if let Some(tx) = self.inbox.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                let n = self.seq.fetch_add(1, Ordering::Relaxed);
                if tx.send((n, msg)).is_ok() {
                    return Some(n);
                }
                return None;
            }
        }
        if let Some(tx) = self.outbox.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = tx.send(msg);
        }
        None
    }

    /// Watches the number of the last message this replica's driver applied and passed
    /// on: a long poll waits for its own message's number before it says "no work".
    pub fn passed(&self) -> watch::Receiver<u64> {
        self.passed.subscribe()
    }

    /// Records that every message up to `n` was applied and a pass ran after them.
    pub(crate) fn mark_passed(&self, n: u64) {
        self.passed.send_if_modified(|p| {
            let newer = n > *p;
            *p = (*p).max(n);
            newer
        });
    }

    /// The notifier an agent's long poll waits on.
    pub fn waiter(&self, agent: &str) -> Arc<Notify> {
        let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        w.entry(agent.to_string()).or_default().clone()
    }

    /// Wakes an agent's long polls on this replica (a lease may be waiting for it): called
    /// after every write that may leave one, it also makes the agent's next look go to the
    /// database ([`deliveries::Hints`]).
    pub fn wake(&self, agent: &str) {
        self.deliveries.may_wait(agent);
        let w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = w.get(agent) {
            n.notify_waiters();
        }
    }

    /// Forgets an agent's notifier once no poll holds it (called as a poll ends).
    pub fn release_waiter(&self, agent: &str) {
        let mut w = self.waiters.lock().unwrap_or_else(|e| e.into_inner());
        if w.get(agent).is_some_and(|n| Arc::strong_count(n) == 1) {
            w.remove(agent);
        }
    }

    pub(crate) fn lead(&self, inbox: mpsc::UnboundedSender<(u64, Msg)>) {
        *self.inbox.lock().unwrap_or_else(|e| e.into_inner()) = Some(inbox);
        self.deliveries.forget_hints();
        self.leader.store(true, Ordering::Release);
        self.reannounce();
    }

    /// Opens a long poll: counts it here and tells the scheduler. Returns the message's
    /// number when this replica's driver took it.
    pub fn open_poll(&self, agent: &str, free_mem: u64, hb: Option<Heartbeat>) -> Option<u64> {
        {
            let mut open = self.open_polls.lock().unwrap_or_else(|e| e.into_inner());
            let e = open.entry(agent.to_string()).or_insert((0, 0));
            e.0 += 1;
            e.1 = free_mem;
        }
        self.send(Msg::Poll { agent: agent.to_string(), open: true, free_mem, delivered: false, hb })
    }

    /// Closes a long poll (`delivered`: it took a lease).
    pub fn close_poll(&self, agent: &str, delivered: bool) {
        {
            let mut open = self.open_polls.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(e) = open.get_mut(agent) {
                e.0 = e.0.saturating_sub(1);
                if e.0 == 0 {
                    open.remove(agent);
                }
            }
        }
        self.send(Msg::Poll { agent: agent.to_string(), open: false, free_mem: 0, delivered, hb: None });
    }

    /// Tells the (new) leader about every poll open on this replica. A poll announced
    /// twice in a change of leader counts one slot too many until it closes: at worst a
    /// lease waits undelivered and expires after [`DELIVERY_WINDOW_MS`], using no retry.
    pub fn reannounce(&self) {
        let open: Vec<(String, (u32, u64))> =
            self.open_polls.lock().unwrap_or_else(|e| e.into_inner()).iter().map(|(a, v)| (a.clone(), *v)).collect();
        for (agent, (n, free_mem)) in open {
            for _ in 0..n {
                self.send(Msg::Poll { agent: agent.clone(), open: true, free_mem, delivered: false, hb: None });
            }
        }
    }

    pub(crate) fn step_down(&self) {
        self.leader.store(false, Ordering::Release);
        self.deliveries.forget_hints();
        self.recruiting.stop();
        *self.inbox.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub(crate) fn set_outbox(&self, tx: mpsc::UnboundedSender<Msg>) {
        *self.outbox.lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_go_to_the_leader_inbox_else_to_the_outbox() {
        let s = Scheduling::default();
        let (out_tx, mut out_rx) = mpsc::unbounded_channel();
        s.set_outbox(out_tx);
        s.send(Msg::AgentRemoved { agent: "a".into() });
        assert!(matches!(out_rx.try_recv(), Ok(Msg::AgentRemoved { .. })), "a follower forwards");
        let (in_tx, mut in_rx) = mpsc::unbounded_channel();
        s.lead(in_tx);
        assert!(s.send(Msg::AgentRemoved { agent: "b".into() }).is_some());
        assert!(matches!(in_rx.try_recv(), Ok((_, Msg::AgentRemoved { .. }))), "the leader keeps it");
        assert!(out_rx.try_recv().is_err());
    }
}
