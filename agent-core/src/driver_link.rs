//! What the agent's driver and its coordinator link tell each other, in one place: the
//! jobs the link hands the driver ([`DriverMsg`]), the migration questions and answers
//! between them ([`MigrationAsk`], [`MigrationOutcome`]), whether the driver wants guest
//! work ([`may_lease_now`]) and how the link stands ([`LinkHealth`]), and the link's one
//! in-process handle to the driver ([`DriverHandle`]). Neither side imports the other:
//! both import this.

use crate::control::{self, AgentStatus};
use crate::guest::{GuestInfo, GuestSpec};
use crate::ledger::LedgerError;
use lull_protocol::Record;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};

/// A job the coordinator link hands the driver to run as a guest (the driver owns the
/// guest runtime; the policy still only learns whether guests are present).
#[derive(Debug)]
pub struct JobRequest {
    pub spec: GuestSpec,
    /// The guest's id, or why it cannot run here.
    pub started: oneshot::Sender<Result<String, String>>,
    /// The guest's last snapshot once it has ended, sent only after its final totals are
    /// in the ledger (so what the link reports equals what the ledger accounted).
    pub ended: oneshot::Sender<GuestInfo>,
    /// Where the driver asks the link to request a migration while the guest lingers
    /// (seed 000 §5.2); `None` for a task that is not moved on request (a gang rank). Its
    /// answer comes back as [`DriverMsg::MigrationAnswered`].
    pub migration: Option<mpsc::Sender<MigrationAsk>>,
}

/// The readings of a lingering leased guest's migration request (`POST …/migrate`, seed
/// 000 §5.2), which the driver hands the task's link. The driver has frozen the guest
/// (its own `cgroup.freeze`, as a gang halt does) so that the checkpoint the link
/// uploads before asking is its last: a task given back resumes elsewhere exactly there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MigrationAsk {
    /// h: the owner's CPU utilisation over the linger window, 0–1 (guests excluded).
    pub owner_utilization: f64,
    /// How long the guest has lingered in this episode of owner activity, seconds.
    pub owner_busy_for_s: f64,
    /// `T_migr` as the guest runtime estimates it, seconds.
    pub migration_cost_s: f64,
    /// The guest's CPU time so far (user + system), seconds.
    pub cpu_s: f64,
}

/// What came of a migration request.
#[derive(Clone, Debug, PartialEq)]
pub enum MigrationOutcome {
    /// The coordinator took the task back with the checkpoint just uploaded (no retry
    /// used, no eviction): the guest is killed here, which counts no interruption.
    Migrated(String),
    /// The coordinator's answer was to stay (its reason): the guest keeps lingering.
    Stays(String),
    /// Not asked, or no answer (the coordinator unreachable, the checkpoint not
    /// uploaded, the lease lost): nothing changes, the guest keeps lingering.
    Failed(String),
}

/// What the coordinator link asks of the driver, through its [`DriverHandle`]: the
/// link's only way into the driver (no control socket, no ledger connection of its own).
#[derive(Debug)]
pub enum DriverMsg {
    /// Run a job as a guest.
    Run(JobRequest),
    /// Kill one job's guest at once (its job was cancelled or its lease lost): no
    /// checkpoint signal or grace, and no interruption — the policy is not involved. Its
    /// `ended` is still sent once it is gone.
    Stop { guest: String },
    /// Freeze (`hold`) or thaw one job's guest: its gang is halted until a lost member is
    /// replaced. Outside the policy: no interruption, and it stays frozen across the
    /// directive's thaws until released.
    Hold { guest: String, hold: bool },
    /// The link's answer to a [`MigrationAsk`] for this guest (frozen while it asked).
    MigrationAnswered { guest: String, outcome: MigrationOutcome },
    /// The agent's status, as `lull status` sees it (what a heartbeat reports).
    Status(oneshot::Sender<AgentStatus>),
    /// Up to `max` outbox records not yet acknowledged, oldest first, from the driver's
    /// ledger.
    OutboxPending { max: usize, reply: oneshot::Sender<Result<Vec<Record>, LedgerError>> },
    /// The coordinator has stored every record up to `through`: mark them sent.
    OutboxAcked { through: i64, reply: oneshot::Sender<Result<(), LedgerError>> },
}

/// The driver's end of its handle (see [`DriverMsg`]).
pub type DriverInbox = mpsc::Receiver<DriverMsg>;

/// The driver has stopped: a request through the [`DriverHandle`] found nobody.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the agent's driver has stopped")]
pub struct DriverGone;

/// The link's one in-process handle to the driver: requests with their answers (a
/// `oneshot` each) over one channel, and the driver's published wish for guest work
/// ([`may_lease_now`], updated after every step) to wait on.
#[derive(Clone, Debug)]
pub struct DriverHandle {
    requests: mpsc::Sender<DriverMsg>,
    accepting: watch::Receiver<bool>,
}

impl DriverHandle {
    /// A handle and the driver's end of it; the driver publishes into `accepting`'s
    /// sender.
    pub fn new(accepting: watch::Receiver<bool>) -> (Self, DriverInbox) {
        let (requests, inbox) = mpsc::channel(16);
        (Self { requests, accepting }, inbox)
    }

    /// Whether the driver wants guest work now, to wait on.
    pub fn accepting(&self) -> watch::Receiver<bool> {
        self.accepting.clone()
    }

    /// Hands the driver a message (waiting while its queue is full).
    pub async fn send(&self, msg: DriverMsg) -> Result<(), DriverGone> {
        self.requests.send(msg).await.map_err(|_| DriverGone)
    }

    /// The agent's status now.
    pub async fn status(&self) -> Result<AgentStatus, DriverGone> {
        let (reply, answer) = oneshot::channel();
        self.send(DriverMsg::Status(reply)).await?;
        answer.await.map_err(|_| DriverGone)
    }

    /// Up to `max` records of the outbox not yet acknowledged, oldest first.
    pub async fn outbox_pending(&self, max: usize) -> Result<Result<Vec<Record>, LedgerError>, DriverGone> {
        let (reply, answer) = oneshot::channel();
        self.send(DriverMsg::OutboxPending { max, reply }).await?;
        answer.await.map_err(|_| DriverGone)
    }

    /// Marks the outbox sent up to `through`.
    pub async fn outbox_acked(&self, through: i64) -> Result<Result<(), LedgerError>, DriverGone> {
        let (reply, answer) = oneshot::channel();
        self.send(DriverMsg::OutboxAcked { through, reply }).await?;
        answer.await.map_err(|_| DriverGone)
    }
}

/// How the link to the coordinator stands, for `lull status` and the tray.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum LinkHealth {
    /// Nothing to say (working; an unreachable coordinator is logged and retried).
    #[default]
    Working,
    /// The coordinator answers 401 to this machine's credential.
    CredentialRefused {
        url: String,
        /// Local time it was first refused.
        since: String,
        /// The coordinator's reason.
        message: String,
        /// Its code (`credential_replaced`, `machine_removed`), when it gives one.
        code: Option<String>,
    },
}

impl LinkHealth {
    pub(crate) fn refused(url: &str, message: &str, code: Option<&str>) -> Self {
        let since = chrono::Local::now().format("%Y-%m-%d %H:%M").to_string();
        Self::CredentialRefused { url: url.to_string(), since, message: message.to_string(), code: code.map(str::to_string) }
    }

    /// What the owner is told, if anything: what to do depends on why (the
    /// coordinator's code, when it gives one).
    pub fn alert(&self) -> Option<control::Alert> {
        let Self::CredentialRefused { url, since, message, code } = self else { return None };
        let what = match code.as_deref() {
            Some("machine_removed") => format!(
                "The pool's admin removed this machine: enrol it again as a new machine with a new join token, `lull enrol --replace --url {url} --token …`."
            ),
            Some("credential_replaced") => format!(
                "Another enrolment took this machine's place. If that was not you, tell the pool's admin; to enrol it again, the admin removes the other or you enrol with an admin key (`lull enrol --replace --url {url} …`)."
            ),
            _ => format!(
                "Enrol it again in its own place: `lull enrol --replace --url {url} …` with an admin key or this machine's credential, or ask the pool's coordinator to."
            ),
        };
        Some(control::Alert {
            kind: control::AlertKind::CredentialRefused,
            message: format!(
                "The coordinator {url} refuses this machine's credential since {since} ({message}): this machine takes no pool work and its records wait in the ledger."
            ),
            action: Some(format!("{what} The agent asks again every few minutes and takes a new coordinator.json by itself.")),
        })
    }
}

/// The link's health, shared by its heartbeat loop and job slots.
pub type HealthSender = Arc<tokio::sync::watch::Sender<LinkHealth>>;

/// Whether the agent wants guest work now: the policy accepts guests and the machine is
/// recruitable, already donating, or lending while light (what the driver publishes
/// after each step).
pub fn may_lease_now(state: crate::policy::StateKind, directive: crate::policy::GuestDirective) -> bool {
    use crate::policy::{GuestDirective, StateKind};
    directive == GuestDirective::Accept && matches!(state, StateKind::Recruitable | StateKind::Donating | StateKind::LendingLight)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The handle's requests reach whoever holds the inbox, answers come back on their
    /// oneshot, and once the driver has let go each request says so instead of waiting.
    #[tokio::test]
    async fn the_handle_carries_requests_and_answers_and_says_when_the_driver_is_gone() {
        let (_accepting_tx, accepting) = watch::channel(false);
        let (handle, mut inbox) = DriverHandle::new(accepting);
        let driver = tokio::spawn(async move {
            match inbox.recv().await {
                Some(DriverMsg::OutboxAcked { through, reply }) => {
                    assert_eq!(through, 7);
                    let _ = reply.send(Ok(()));
                }
                other => panic!("expected the ack, got {other:?}"),
            }
            match inbox.recv().await {
                Some(DriverMsg::OutboxPending { max, reply }) => {
                    assert_eq!(max, 3);
                    let _ = reply.send(Ok(Vec::new()));
                }
                other => panic!("expected the outbox request, got {other:?}"),
            }
            // The driver stops here: its inbox is dropped unanswered.
            let _ = inbox.recv().await;
        });
        assert!(matches!(handle.outbox_acked(7).await, Ok(Ok(()))));
        assert!(matches!(handle.outbox_pending(3).await, Ok(Ok(v)) if v.is_empty()));
        // A request it took but never answered, then requests after it is gone.
        assert_eq!(handle.status().await.err(), Some(DriverGone));
        driver.await.expect("the fake driver");
        assert_eq!(handle.status().await.err(), Some(DriverGone));
        assert_eq!(handle.send(DriverMsg::Stop { guest: "g".into() }).await, Err(DriverGone));
    }
}
