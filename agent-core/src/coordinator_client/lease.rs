//! A lease's renewals and reports: how often a running task's lease is renewed
//! ([`progress_every`]), what one renewal said ([`renewal`], [`Stopped`]), and how a
//! report to the coordinator is retried while it is unreachable ([`retry`]).

use super::http::{ClientError, Result};
use lull_protocol::ProgressAck;
use std::time::Duration;

/// How often a running task's lease is renewed (the coordinator's default TTL is 60 s),
/// which is also how soon a cancel reaches the guest and how often a changed checkpoint
/// is uploaded. `LULL_PROGRESS_MS` (200 to 30,000) overrides it, for tests.
pub(crate) const PROGRESS_EVERY: Duration = Duration::from_secs(15);
/// The first renewal comes this soon after the guest is handed over, so that a job
/// cancelled (or a gang re-queued) just as it was leased stops early.
pub(crate) const PROGRESS_FIRST: Duration = Duration::from_secs(5);

/// The renewal interval: [`PROGRESS_EVERY`], or `LULL_PROGRESS_MS` when it is set to a
/// whole number of milliseconds from 200 to 30,000 (anything else is refused with a
/// warning naming it, and the default kept).
pub(crate) fn progress_every() -> Duration {
    static EVERY: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *EVERY.get_or_init(|| match std::env::var("LULL_PROGRESS_MS") {
        Err(_) => PROGRESS_EVERY,
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(ms) if (200..=30_000).contains(&ms) => Duration::from_millis(ms),
            _ => {
                tracing::warn!("LULL_PROGRESS_MS={v:?} is not a whole number of milliseconds from 200 to 30000; renewing every 15 s");
                PROGRESS_EVERY
            }
        },
    })
}

/// Retries a report to the coordinator while it is unreachable (about a minute in all);
/// a refusal (lease lost, task gone) is final.
pub(crate) async fn retry<T, F, Fut>(what: &str, mut call: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    for attempt in 0..6u32 {
        match call().await {
            Ok(v) => return Some(v),
            Err(e @ (ClientError::Refused { .. } | ClientError::TooLarge { .. } | ClientError::Malformed(_))) => {
                tracing::warn!("{what}: {e}");
                return None;
            }
            Err(e) => {
                tracing::warn!("{what} (retrying): {e}");
                tokio::time::sleep(Duration::from_secs(1 << attempt)).await;
            }
        }
    }
    None
}
/// Why the link stopped a guest itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// The progress answer said the job was cancelled.
    Cancelled,
    /// The coordinator no longer holds the lease for this agent (409: expired, or the
    /// gang re-queued because a peer was evicted).
    LeaseLost,
    /// The coordinator answered a migration request with yes and took the task back.
    Migrated,
}

impl Stopped {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancelled => "the job was cancelled",
            Self::LeaseLost => "the lease is no longer held",
            Self::Migrated => "the task migrates to another machine",
        }
    }
}

/// What one renewal said: held (`Ok(halt)`: whether the gang is halted, so the guest
/// must be frozen), or stopped (cancelled, lease lost), or unknown (`Err(None)`: the
/// coordinator could not be asked; the guest goes on as it is).
pub fn renewal(r: Result<ProgressAck>) -> std::result::Result<bool, Option<Stopped>> {
    match r {
        Ok(a) if a.cancel => Err(Some(Stopped::Cancelled)),
        Ok(a) => Ok(a.halt),
        Err(ClientError::Refused { status: 409, .. }) => Err(Some(Stopped::LeaseLost)),
        Err(e) => {
            tracing::warn!("lease renewal failed: {e}");
            Err(None)
        }
    }
}
