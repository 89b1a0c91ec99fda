//! A gang member held until every rank of its gang is leased ([`wait_for_gang`]), its
//! lease renewed meanwhile, given back when the gang does not fill in time.

use super::http::{ClientError, CoordinatorClient};
use super::lease::{progress_every, renewal, Stopped, PROGRESS_FIRST};
use lull_protocol::Lease;
use std::time::Duration;

/// How long a gang member (a lease with `machines` > 1) waits for every rank of its gang
/// to be leased before giving its lease back ("gang did not fill"), so that a gang bigger
/// than the free machines does not hold this one idle: the coordinator re-queues the
/// gang (its leased peers too) and it is tried again later. Two lease TTLs: long enough
/// for the other ranks' agents to come back from their long-polls.
pub const GANG_FILL_TIMEOUT: Duration = Duration::from_secs(120);
/// The gang is asked again this soon first, then each wait is 1.5 times the last, up to
/// [`GANG_POLL_MAX`] — which bounds how far apart the members of a filled gang start.
pub(crate) const GANG_POLL_FIRST: Duration = Duration::from_millis(500);
pub(crate) const GANG_POLL_MAX: Duration = Duration::from_secs(2);
/// How waiting for a gang ended.
#[derive(Debug, PartialEq, Eq)]
pub enum GangWait {
    /// Every rank is leased: start.
    Ready,
    /// Give the lease back (evicted) for this reason.
    GiveBack(String),
    /// The lease is gone (cancelled or lost): nothing to report.
    Gone(Stopped),
}

/// Holds a gang member until every rank of its gang is leased (`GET …/gang` at once,
/// then after [`GANG_POLL_FIRST`], backing off to [`GANG_POLL_MAX`]), renewing its lease
/// meanwhile; gives up after [`GANG_FILL_TIMEOUT`], or as soon as the machine stops
/// accepting guest work.
pub async fn wait_for_gang(
    client: &CoordinatorClient,
    task: &Lease,
    accepting: &tokio::sync::watch::Receiver<bool>,
    timeout: Duration,
) -> GangWait {
    let t0 = tokio::time::Instant::now();
    let mut poll = GANG_POLL_FIRST;
    let mut renew_at = t0 + progress_every().min(PROGRESS_FIRST);
    tracing::info!(job = task.job_id, rank = task.rank, machines = task.machines, "gang member waiting for its gang to fill");
    loop {
        if !*accepting.borrow() {
            return GangWait::GiveBack("the machine is no longer available".into());
        }
        match client.gang(task).await {
            Ok(g) if g.ready => {
                tracing::info!(job = task.job_id, rank = task.rank, waited_ms = t0.elapsed().as_millis() as u64, "gang filled: starting");
                return GangWait::Ready;
            }
            Ok(g) => tracing::debug!(job = task.job_id, leased = g.leased, machines = g.machines, "gang not filled yet"),
            // Only the holder may ask: a 404 is a lost lease.
            Err(ClientError::Refused { status: 404 | 409, .. }) => return GangWait::Gone(Stopped::LeaseLost),
            Err(e) => tracing::warn!(job = task.job_id, "asking for the gang failed: {e}"),
        }
        if t0.elapsed() >= timeout {
            return GangWait::GiveBack(format!("gang did not fill within {} s", timeout.as_secs()));
        }
        if tokio::time::Instant::now() >= renew_at {
            renew_at = tokio::time::Instant::now() + progress_every();
            if let Err(Some(why)) = renewal(client.progress(task, None).await) {
                return GangWait::Gone(why);
            }
        }
        tokio::time::sleep(poll.min(timeout.saturating_sub(t0.elapsed()))).await;
        poll = poll.mul_f64(1.5).min(GANG_POLL_MAX);
    }
}
