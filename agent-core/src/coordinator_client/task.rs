//! The task runner: one leased task run as a guest through the driver ([`run_task`]),
//! its lease renewed while it runs, its checkpoint moved, its gang awaited, its
//! migration asked when the driver says so, and how it ended reported (`complete`, or
//! `evicted`).

use super::checkpoints::{ask_migration, fetch_checkpoint, upload_checkpoint};
use super::gang::{wait_for_gang, GangWait, GANG_FILL_TIMEOUT};
use super::guest_io::{guest_output, guest_spec, OutputShipper};
use super::http::CoordinatorClient;
use super::lease::{progress_every, renewal, retry, Stopped, PROGRESS_FIRST};
use crate::checkpoint::Stamp;
use crate::driver_link::{DriverHandle, DriverMsg, JobRequest, MigrationAsk, MigrationOutcome};
use crate::guest::{GuestDir, GuestInfo, GuestPhase, GuestSpec};
use crate::paths::Paths;
use lull_protocol::{Lease, Output, TaskOutcome};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// The guests of leased tasks running now: guest id → (job, rank). Each task's slot adds
/// its guest once started and takes it out when it ends, so the heartbeat can name the
/// tasks whose memory it reports.
pub type RunningTasks = Arc<Mutex<HashMap<String, (i64, u32)>>>;

/// Takes a task's guest out of [`RunningTasks`] when its slot is done with it, whichever
/// way the task ends.
pub(crate) struct Registered(RunningTasks, String);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.1);
    }
}

/// How often a halted gang member renews (and so learns its gang is whole again).
pub(crate) const HALT_POLL: Duration = Duration::from_secs(1);

/// Everything before a leased task's guest is handed over: its guest spec, its last
/// checkpoint downloaded, its gang filled. `None` when it cannot start here (reported or
/// given back already, or its lease gone).
async fn prepare(
    client: &CoordinatorClient,
    paths: &Paths,
    accepting: &tokio::sync::watch::Receiver<bool>,
    task: &Lease,
) -> Option<(GuestSpec, Option<PathBuf>, Option<Stamp>)> {
    tracing::info!(job = task.job_id, rank = task.rank, lease = task.lease, "task leased");
    let spec = match guest_spec(task, &paths.work_root()) {
        Ok(s) => s,
        Err(why) => {
            tracing::warn!(job = task.job_id, "cannot run the task: {why}");
            let outcome = TaskOutcome::StartFailed { error: format!("cannot run the task: {why}") };
            let stderr = lull_protocol::output_tail(format!("lull: {}\n", outcome.describe()).as_bytes());
            let output = Output { stderr_bytes: stderr.len() as u64, stderr, ..Output::default() };
            retry("reporting an unrunnable task", || client.complete(task, &outcome, 0.0, 0.0, Some(output.clone()))).await;
            return None;
        }
    };
    let checkpoint = spec.job_dir.as_ref().filter(|_| spec.checkpointable).map(|d| crate::checkpoint::path_in(&GuestDir::new(d).work()));
    let mut uploaded = None;
    if let Some(path) = &checkpoint {
        match fetch_checkpoint(client, task, path).await {
            Ok(stamp) => uploaded = stamp,
            Err(why) => {
                // Starting from nothing would redo what the checkpoint holds: give the
                // task back for another try instead.
                tracing::warn!(job = task.job_id, rank = task.rank, "task given back: {why}");
                let reason = format!("agent: {why}");
                retry("giving a task back", || client.not_started(task, &reason)).await;
                return None;
            }
        }
    }
    if task.machines > 1 {
        match wait_for_gang(client, task, accepting, GANG_FILL_TIMEOUT).await {
            GangWait::Ready => {}
            GangWait::GiveBack(why) => {
                tracing::info!(job = task.job_id, rank = task.rank, "gang member gives its lease back: {why}");
                retry("giving a task back", || client.not_started(task, &why)).await;
                return None;
            }
            GangWait::Gone(why) => {
                tracing::info!(job = task.job_id, rank = task.rank, "gang member not started: {}", why.as_str());
                return None;
            }
        }
    }
    Some((spec, checkpoint, uploaded))
}

/// Follows a handed-over guest until it ends: renews the lease (freezing and thawing
/// the guest as its gang halts and is whole again, uploading a changed checkpoint),
/// stops it when the job is cancelled or the lease lost, and asks the coordinator when
/// the driver wants it moved. Returns its last snapshot (`None`: the driver is gone) and
/// why the link stopped it itself, if it did.
#[allow(clippy::too_many_arguments)]
async fn follow_guest(
    client: &CoordinatorClient,
    driver: &DriverHandle,
    task: &Lease,
    guest: &str,
    dir: &GuestDir,
    checkpoint: Option<&Path>,
    uploaded: &mut Option<Stamp>,
    ended_rx: oneshot::Receiver<GuestInfo>,
    mut migration_rx: mpsc::Receiver<MigrationAsk>,
) -> (Option<GuestInfo>, Option<Stopped>) {
    tokio::pin!(ended_rx);
    let every = progress_every();
    let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every.min(PROGRESS_FIRST), every);
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // While the gang is halted (another rank lost) the guest is frozen and the lease is
    // renewed every HALT_POLL, so it runs again within about that once the rank is
    // replaced.
    let mut halt_poll = tokio::time::interval(HALT_POLL.min(every));
    let mut halted = false;
    let mut stopped: Option<Stopped> = None;
    let mut shipper = OutputShipper::default();
    let info = loop {
        tokio::select! {
            info = &mut ended_rx => break info.ok(),
            _ = async { if halted { halt_poll.tick().await } else { renew.tick().await } }, if stopped.is_none() => match renewal(client.progress(task, shipper.next(dir)).await) {
                Ok(halt) => {
                    if halt != halted {
                        tracing::info!(job = task.job_id, rank = task.rank, guest = %guest, "{}", if halt {
                            "gang halted (a member was lost): guest frozen until it is replaced"
                        } else {
                            "gang whole again: guest thawed"
                        });
                        if driver.send(DriverMsg::Hold { guest: guest.to_string(), hold: halt }).await.is_err() {
                            break None;
                        }
                        halted = halt;
                        halt_poll.reset();
                    }
                    if let Some(path) = checkpoint {
                        upload_checkpoint(client, task, path, uploaded, false).await;
                    }
                }
                Err(None) => shipper.unsent(),
                Err(Some(why)) => {
                    tracing::info!(job = task.job_id, rank = task.rank, guest = %guest, "{}: stopping its guest", why.as_str());
                    stopped = Some(why);
                    if driver.send(DriverMsg::Stop { guest: guest.to_string() }).await.is_err() {
                        break None;
                    }
                }
            },
            // The driver froze the lingering guest and asks whether it should move.
            Some(ask) = migration_rx.recv(), if stopped.is_none() => {
                let outcome = ask_migration(client, task, checkpoint, uploaded, &ask).await;
                if matches!(outcome, MigrationOutcome::Migrated(_)) {
                    // Given back by the coordinator: the driver kills the guest, and
                    // nothing more is reported (no eviction, no completion).
                    stopped = Some(Stopped::Migrated);
                }
                if driver.send(DriverMsg::MigrationAnswered { guest: guest.to_string(), outcome }).await.is_err() {
                    break None;
                }
            },
        }
    };
    (info, stopped)
}

/// Runs one leased task as a guest, renewing its lease, and reports how it ended:
/// `complete` with the exit code and the guest's user and system CPU from its final
/// totals (already in the ledger), or `evicted` when the policy evicted it or the agent
/// stopped, so the coordinator re-queues it. A checkpointable task's last checkpoint is
/// downloaded before the guest starts, its changed checkpoint uploaded with each
/// renewal and after an eviction (before `evicted` is reported). A gang member starts
/// only once its gang has filled. A cancel or a lost lease kills the guest at once and
/// reports nothing (the coordinator already knows). While the guest lingers the driver
/// may ask, through the job's migration channel, whether the task should move
/// ([`ask_migration`]); a yes also ends it that way (the driver kills the guest).
pub(crate) async fn run_task(
    client: &CoordinatorClient,
    paths: &Paths,
    running: &RunningTasks,
    driver: &DriverHandle,
    accepting: &tokio::sync::watch::Receiver<bool>,
    task: Lease,
) {
    tracing::info!(job = task.job_id, rank = task.rank, lease = task.lease, "task leased");
    let Some((spec, checkpoint, mut uploaded)) = prepare(client, paths, accepting, &task).await else { return };
    let dir = GuestDir::new(spec.job_dir.clone().unwrap_or_default());
    let (started_tx, started_rx) = oneshot::channel();
    let (ended_tx, ended_rx) = oneshot::channel();
    // A gang rank is not moved on request (its peers would have to halt for it).
    let (migration_tx, migration_rx) = mpsc::channel::<MigrationAsk>(1);
    let migration = (task.machines <= 1).then_some(migration_tx);
    let started = match driver.send(DriverMsg::Run(JobRequest { spec, started: started_tx, ended: ended_tx, migration })).await {
        Ok(()) => started_rx.await.unwrap_or_else(|_| Err("the agent is stopping".into())),
        Err(_) => Err("the agent is stopping".into()),
    };
    let guest = match started {
        Ok(id) => id,
        Err(why) => {
            tracing::warn!(job = task.job_id, "task not started: {why}");
            retry("giving a task back", || client.not_started(&task, &why)).await;
            return;
        }
    };
    running.lock().unwrap_or_else(|e| e.into_inner()).insert(guest.clone(), (task.job_id, task.rank));
    let _registered = Registered(running.clone(), guest.clone());
    let (info, stopped) =
        follow_guest(client, driver, &task, &guest, &dir, checkpoint.as_deref(), &mut uploaded, ended_rx, migration_rx).await;
    if let Some(why) = stopped {
        tracing::info!(job = task.job_id, rank = task.rank, guest = %guest, "guest stopped: {}", why.as_str());
        return;
    }
    let Some(info) = info else {
        retry("giving a task back", || client.evicted(&task, "agent stopped")).await;
        return;
    };
    let GuestPhase::Ended { evicted, .. } = info.phase else { return };
    if evicted {
        tracing::info!(job = task.job_id, guest = %guest, "task evicted; giving it back");
        if let Some(path) = &checkpoint {
            // After the grace the guest had to write it; the task goes back either way.
            upload_checkpoint(client, &task, path, &mut uploaded, true).await;
        }
        retry("reporting an eviction", || client.evicted(&task, "evicted: the owner returned")).await;
        return;
    }
    let outcome = info.outcome().unwrap_or_else(|| TaskOutcome::StartFailed { error: "it ended without an exit status".into() });
    let (user_s, sys_s) = (info.cpu_user_us as f64 / 1e6, info.cpu_system_us as f64 / 1e6);
    tracing::info!(job = task.job_id, guest = %guest, outcome = %outcome.describe(), cpu_s = user_s + sys_s, "task ended");
    let output = guest_output(&info);
    retry("reporting a completion", || client.complete(&task, &outcome, user_s, sys_s, Some(output.clone()))).await;
}
