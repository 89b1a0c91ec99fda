//! The coordinator's scheduling: `lull_core::sched` driven event by event.
//!
//! * Every change that can matter to placement — a job submitted, a task ended, released,
//!   re-queued or cancelled, an agent's long poll opening or closing, a heartbeat — is a
//!   [`Msg`] sent with [`Scheduling::send`]. The database stays the truth; a message only
//!   says *what to look at again*.
//! * One replica leads ([`replicas`]): it holds the scheduler state in memory, rebuilt from
//!   the database when it takes the lead, applies the messages in batches and runs a
//!   pass after each batch (no fixed cycle). A pass's assignments become leases in one
//!   transaction ([`sql::assign`]); each waits for its agent's long poll, which takes it
//!   in one transaction with the other polls asking meanwhile ([`delivery`]). A lease
//!   that is not taken within [`DELIVERY_WINDOW_MS`] goes back to the queue through the
//!   ordinary expiry sweep.
//! * With SQLite there is one replica and it leads. With PostgreSQL every replica tries a
//!   session advisory lock; the holder leads, the others forward their messages with
//!   `pg_notify` and learn of new leases the same way. A killed leader's session ends,
//!   its lock with it, and another replica takes the lead within a second or two.
//!
//! A task is leased only through `UPDATE … WHERE state = 'queued'`, so even two replicas
//! that both believed they led could never lease one task twice.

pub mod delivery;
pub mod driver;
pub mod lease_notice;
pub mod recruiting;
pub mod replicas;
pub mod sql;

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
    /// Messages for the leader elsewhere (PostgreSQL followers), sent by [`replicas`].
    outbox: Mutex<Option<mpsc::UnboundedSender<Msg>>>,
    /// This replica's open long polls: agent → (how many, the last free memory given), so
    /// a new leader learns of polls opened before it led ([`Scheduling::reannounce`]).
    open_polls: Mutex<HashMap<String, (u32, u64)>>,
    /// The long polls' lease hand-over, group-committed.
    pub deliveries: delivery::Deliveries,
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
            deliveries: delivery::Deliveries::default(),
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
    /// database ([`delivery::Hints`]).
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

/// Parses a scheduling algorithm name as configured (`fifo`, `first_fit`/`first-fit`,
/// `random`, `spt`, `lpt`, `backfill`).
pub fn parse_algorithm(s: &str) -> Result<lull_core::sched::Algorithm, String> {
    let norm = s.trim().to_ascii_lowercase().replace('-', "_");
    lull_core::sched::Algorithm::ALL.into_iter().find(|a| a.name() == norm).ok_or_else(|| {
        let names: Vec<&str> = lull_core::sched::Algorithm::ALL.iter().map(|a| a.name()).collect();
        format!("scheduler algorithm {s:?} is not one of {}", names.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_names_parse_and_a_wrong_one_lists_the_choices() {
        assert_eq!(parse_algorithm("first-fit").unwrap(), lull_core::sched::Algorithm::FirstFit);
        assert_eq!(parse_algorithm("Backfill").unwrap(), lull_core::sched::Algorithm::Backfill);
        let e = parse_algorithm("sjf").unwrap_err();
        assert!(e.contains("fifo, first_fit, random, spt, lpt, backfill"), "{e}");
    }

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
