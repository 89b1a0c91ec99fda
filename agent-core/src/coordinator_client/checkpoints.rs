//! A task's checkpoint between the guest and the coordinator: downloaded before the
//! guest starts ([`fetch_checkpoint`]), uploaded when it changed ([`upload_checkpoint`]),
//! and uploaded before a migration request ([`ask_migration`], seed 000 §5.2).

use super::http::CoordinatorClient;
use super::lease::retry;
use crate::driver_link::{MigrationAsk, MigrationOutcome};
use lull_protocol::{Lease, MigrateRequest};
use std::path::Path;
use std::time::Duration;

/// Downloads the task's last checkpoint into the guest's work directory (nothing when it
/// has none); returns the stamp of what was put there. An unreachable coordinator is
/// retried as any report; a refusal other than 404 is an error.
pub async fn fetch_checkpoint(
    client: &CoordinatorClient,
    task: &Lease,
    path: &Path,
) -> std::result::Result<Option<crate::checkpoint::Stamp>, String> {
    let Some(got) = retry("downloading the checkpoint", || client.get_checkpoint(task)).await else {
        return Err("its checkpoint could not be downloaded".into());
    };
    let Some(data) = got else { return Ok(None) };
    let stamp = crate::checkpoint::put_in_place(path, &data).map_err(|e| e.to_string())?;
    tracing::info!(job = task.job_id, rank = task.rank, bytes = data.len(), "checkpoint downloaded: the guest resumes from it");
    Ok(Some(stamp))
}

/// Uploads the guest's checkpoint if it is there and changed since `last`; on success
/// `last` becomes its stamp. Failures are logged: the next renewal (or the caller) tries
/// again, and the task goes on either way.
pub async fn upload_checkpoint(
    client: &CoordinatorClient,
    task: &Lease,
    path: &Path,
    last: &mut Option<crate::checkpoint::Stamp>,
    retrying: bool,
) -> bool {
    let (stamp, data) = match crate::checkpoint::read_changed(path, *last) {
        Ok(Some(c)) => c,
        Ok(None) => return true,
        Err(e) => {
            tracing::warn!(job = task.job_id, rank = task.rank, "{e}");
            return false;
        }
    };
    let bytes = data.len();
    let sent = if retrying {
        retry("uploading the checkpoint", || client.put_checkpoint(task, data.clone())).await.is_some()
    } else {
        match client.put_checkpoint(task, data).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(job = task.job_id, rank = task.rank, "checkpoint upload failed (tried again at the next renewal): {e}");
                false
            }
        }
    };
    if sent {
        tracing::debug!(job = task.job_id, rank = task.rank, bytes, "checkpoint uploaded");
        *last = Some(stamp);
    }
    sent
}

/// How long a migration request (checkpoint upload included) may take: the guest is
/// frozen meanwhile, so an unreachable coordinator must not hold it long.
pub const MIGRATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Seed 000 §5.2 from the link: uploads the guest's checkpoint if it changed (the driver
/// froze the guest, so it is its last), then asks the coordinator whether to move the
/// task, within [`MIGRATE_TIMEOUT`]. A checkpoint that cannot be uploaded means no
/// request (moving would lose what it holds). With yes the coordinator has taken the
/// task back, keeping that checkpoint for the next lease.
pub async fn ask_migration(
    client: &CoordinatorClient,
    task: &Lease,
    checkpoint: Option<&Path>,
    uploaded: &mut Option<crate::checkpoint::Stamp>,
    ask: &MigrationAsk,
) -> MigrationOutcome {
    let asked = tokio::time::timeout(MIGRATE_TIMEOUT, async {
        if let Some(path) = checkpoint {
            if !upload_checkpoint(client, task, path, uploaded, false).await {
                return Err("the checkpoint could not be uploaded, so the task was not offered to move".to_string());
            }
        }
        let req = MigrateRequest {
            lease: task.lease,
            owner_utilization: ask.owner_utilization,
            owner_busy_for_s: ask.owner_busy_for_s,
            migration_cost_s: ask.migration_cost_s,
            cpu_s: ask.cpu_s,
        };
        client.migrate(task, &req).await.map_err(|e| format!("migration request: {e}"))
    })
    .await;
    let outcome = match asked {
        Ok(Ok(a)) if a.migrate => MigrationOutcome::Migrated(a.reason),
        Ok(Ok(a)) => MigrationOutcome::Stays(a.reason),
        Ok(Err(why)) => MigrationOutcome::Failed(why),
        Err(_) => MigrationOutcome::Failed(format!("no answer within {} s", MIGRATE_TIMEOUT.as_secs())),
    };
    match &outcome {
        MigrationOutcome::Migrated(why) => tracing::info!(job = task.job_id, rank = task.rank, "task migrated: {why}"),
        MigrationOutcome::Stays(why) => tracing::info!(job = task.job_id, rank = task.rank, "task stays: {why}"),
        MigrationOutcome::Failed(why) => tracing::warn!(job = task.job_id, rank = task.rank, "migration not asked or not answered: {why}"),
    }
    outcome
}
