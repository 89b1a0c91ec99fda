//! The link loop an agent process runs beside its driver ([`run_link`]): heartbeats,
//! the outbox sync, the job slots that lease tasks while the driver wants guest work,
//! the spread lease polls ([`lease_wait`]), and what the link does while the
//! coordinator refuses this machine's credential.

use super::http::Outbox;
use super::http::{ClientError, CoordinatorClient, Credentials, Result};
use super::lease::retry;
use super::machine::{base_speed, free_memory, heartbeat_from, MemoryReporter};
use super::task::{run_task, RunningTasks};
use crate::driver_link::{DriverHandle, HealthSender, LinkHealth};
use crate::paths::Paths;
use lull_protocol::Record;
use std::sync::Arc;
use std::time::Duration;

/// How long one lease request waits for work, on average: each poll waits a random
/// time within a quarter of this either side ([`lease_wait`]).
pub const LEASE_WAIT: Duration = Duration::from_secs(20);

/// How long one lease poll waits, given a random number `r`: spread evenly over
/// 15–25 s (`LEASE_WAIT` ± 25 %). Polls opened together (every agent reconnecting after
/// the coordinator restarted, or a pool enrolled at once) would otherwise end and reopen
/// together every round, a wave of N requests within a second or two; a wave that meets
/// the coordinator's credential cache expiring (30 s after the agents' first calls) looks
/// every agent's secret up in the database at once. Fixed 30-s polls at 10,000 agents on
/// PostgreSQL did that, and the recruit p99 was 2.7–3.8 ms instead of 1.2–1.5 ms
/// (`lull bench recruit-api --poll-wait-ms 30000`, docs/BENCHMARKS.md). Spread, the
/// polls part after one round. The mean, and so the polls per second, stays that of the
/// fixed 20-s wait this replaces.
pub fn lease_wait(r: u64) -> Duration {
    let mean = LEASE_WAIT.as_millis() as u64;
    let spread = mean / 2;
    Duration::from_millis(mean - spread / 2 + r % (spread + 1))
}

/// [`lease_wait`] drawn from the OS's random source: how long the next poll waits.
/// Without that source the poll keeps the mean wait: unspread, not wrong.
pub fn next_lease_wait() -> Duration {
    getrandom::u64().map_or(LEASE_WAIT, lease_wait)
}

/// What the link works with: its one handle to the driver and how many tasks may run at
/// once (`guests.max_jobs`).
#[derive(Clone, Debug)]
pub struct JobLink {
    pub driver: DriverHandle,
    pub max_jobs: u32,
}

impl Outbox for DriverHandle {
    async fn pending(&self, max: usize) -> Result<Vec<Record>> {
        Ok(self.outbox_pending(max).await??)
    }
    async fn acked(&self, through: i64) -> Result<()> {
        Ok(self.outbox_acked(through).await??)
    }
}

/// One job slot: leases a task while the policy accepts guest work and runs it as a
/// guest through the driver, then the next.
pub(crate) async fn run_jobs(
    client: &CoordinatorClient,
    paths: &Paths,
    running: &RunningTasks,
    driver: DriverHandle,
    health: HealthSender,
) {
    let mut backoff = Duration::from_secs(1);
    let mut link = health.subscribe();
    let mut accepting = driver.accepting();
    loop {
        // Asleep until the driver says guest work is wanted (no wake-up meanwhile); the
        // driver gone (its sender dropped) ends the slot. While the coordinator refuses
        // the credential, the heartbeat loop alone asks again.
        if accepting.wait_for(|wanted| *wanted).await.is_err() || link.wait_for(|h| *h == LinkHealth::Working).await.is_err() {
            return;
        }
        match client.lease(free_memory(), next_lease_wait()).await {
            Ok(None) => backoff = Duration::from_secs(1),
            Ok(Some(task)) => {
                backoff = Duration::from_secs(1);
                // The owner may have come back during the long-poll: give the task back
                // at once rather than hold it while it cannot run.
                if *accepting.borrow_and_update() {
                    run_task(client, paths, running, &driver, &accepting, task).await;
                } else {
                    tracing::info!(job = task.job_id, "the machine stopped accepting guest work during the lease; task given back");
                    retry("giving a task back", || client.not_started(&task, "the machine stopped accepting guest work")).await;
                }
            }
            Err(e) if e.credential_refused() => note_refused(&health, &client.base, &e),
            Err(e) => {
                tracing::warn!("lease failed: {e}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        }
    }
}

/// Says (once) that the coordinator refuses this machine's credential (`e`, a 401).
pub(crate) fn note_refused(health: &HealthSender, url: &str, e: &ClientError) {
    let ClientError::Refused { message, code, .. } = e else { return };
    health.send_if_modified(|h| {
        if matches!(h, LinkHealth::CredentialRefused { .. }) {
            return false;
        }
        tracing::error!(
            code = code.as_deref().unwrap_or(""),
            "the coordinator {url} refuses this machine's credential ({message}): no leases, heartbeats or records until it accepts one again"
        );
        *h = LinkHealth::refused(url, message, code.as_deref());
        true
    });
}

/// While the credential is refused: the first retry after this long, each next one
/// twice as late, up to [`REFUSED_RETRY_MAX`]…
pub(crate) const REFUSED_RETRY_FIRST: Duration = Duration::from_secs(30);
pub(crate) const REFUSED_RETRY_MAX: Duration = Duration::from_secs(600);
/// …and `coordinator.json` is looked at this often meanwhile (no request): a new
/// credential for this machine is tried at once.
pub(crate) const CREDENTIALS_LOOK: Duration = Duration::from_secs(15);

/// Waits up to `wait` while the credential is refused, returning early when
/// `coordinator.json` holds a new secret for this coordinator (then in use).
pub(crate) async fn wait_for_credential(paths: &Paths, client: &CoordinatorClient, wait: Duration) {
    let until = tokio::time::Instant::now() + wait;
    let path = Credentials::path(paths);
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(CREDENTIALS_LOOK.min(until - tokio::time::Instant::now())).await;
        if let Ok(Some(creds)) = Credentials::load(&path) {
            if client.adopt(&creds) {
                tracing::info!(file = %path.display(), agent = %creds.agent_id, "coordinator.json holds a new credential for this machine: trying it");
                return;
            }
            if creds.url.trim_end_matches('/') != client.base {
                tracing::warn!(file = %path.display(), url = %creds.url, "coordinator.json names another coordinator: restart the agent to link to it");
            }
        }
    }
}

/// The shortest time between two heartbeats sent early, on a flip of acceptance.
const MIN_BEAT_SPACING: Duration = Duration::from_secs(1);

/// What the heartbeat loop works with.
struct Beat<'a> {
    client: &'a CoordinatorClient,
    paths: &'a Paths,
    driver: &'a DriverHandle,
    running: &'a RunningTasks,
    health: &'a HealthSender,
    /// `S_b`, measured once at the start.
    s_b: f64,
}

impl Beat<'_> {
    /// Every heartbeat interval: the driver's status sent as a heartbeat, then the outbox
    /// synced. Failures are retried with backoff (up to a minute); a refused credential is
    /// asked again rarely (and at once for a new `coordinator.json`). A flip of whether
    /// the machine takes guest work (a `lull donate`, the owner back) is heartbeated at
    /// once, so that what the pool says of this machine (a queued job's "why it waits")
    /// is not a beat interval old.
    async fn run(self) {
        let mut flipped = Some(self.driver.accepting());
        let mut reporter = MemoryReporter::default();
        let mut interval = Duration::from_secs(10);
        let mut backoff = Duration::from_secs(1);
        let mut refused_wait = REFUSED_RETRY_FIRST;
        // The owner-load readings from this number on have not reached the coordinator.
        let mut load_from = 0u64;
        loop {
            let (ok, refused) = self.once(&mut reporter, &mut interval, &mut load_from).await;
            if let Some(e) = refused {
                // Asked again rarely (and at once for a new coordinator.json), not every beat.
                note_refused(self.health, &self.client.base, &e);
                wait_for_credential(self.paths, self.client, refused_wait).await;
                refused_wait = (refused_wait * 2).min(REFUSED_RETRY_MAX);
                continue;
            }
            refused_wait = REFUSED_RETRY_FIRST;
            if ok && *self.health.borrow() != LinkHealth::Working {
                tracing::info!("the coordinator accepts this machine's credential again");
                self.health.send_replace(LinkHealth::Working);
            }
            let wait = if ok {
                backoff = Duration::from_secs(1);
                interval
            } else {
                backoff = (backoff * 2).min(Duration::from_secs(60));
                backoff.min(interval)
            };
            let slept = tokio::time::Instant::now();
            match flipped.as_mut() {
                Some(rx) if ok => tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    changed = rx.changed() => match changed {
                        // At most one extra beat a second, however often it flips.
                        Ok(()) => tokio::time::sleep_until(slept + MIN_BEAT_SPACING).await,
                        Err(_) => flipped = None,
                    },
                },
                _ => tokio::time::sleep(wait).await,
            }
        }
    }

    /// One heartbeat and outbox sync: whether both went through, and the refusal of the
    /// credential if the coordinator answered with one.
    async fn once(&self, reporter: &mut MemoryReporter, interval: &mut Duration, load_from: &mut u64) -> (bool, Option<ClientError>) {
        let mut ok = true;
        if let Ok(st) = self.driver.status().await {
            let memory = st.guest_memory.as_ref().map(|m| {
                let tasks = self.running.lock().unwrap_or_else(|e| e.into_inner()).clone();
                reporter.report(m, &tasks)
            });
            let (hb, next) = heartbeat_from(&st, self.s_b, free_memory(), *load_from, memory);
            match self.client.heartbeat(&hb).await {
                Ok(i) => {
                    *interval = i;
                    *load_from = next;
                }
                Err(e) if e.credential_refused() => return (ok, Some(e)),
                Err(e) => {
                    ok = false;
                    tracing::warn!("heartbeat failed: {e}");
                }
            }
        }
        match self.client.sync_outbox(self.driver).await {
            Ok(s) if s.sent > 0 => tracing::info!(records = s.sent, "ledger records synced"),
            Ok(_) => {}
            Err(e) if e.credential_refused() => return (ok, Some(e)),
            Err(e) => {
                ok = false;
                tracing::warn!("record sync failed (kept in the ledger): {e}");
            }
        }
        (ok, None)
    }
}

/// Links a running agent to its coordinator until `shutdown`, through its one handle to
/// the driver (`link.driver`): every heartbeat interval it asks the driver's status,
/// sends a heartbeat and syncs the outbox the driver reads from its ledger (see [`Beat`]).
/// Records wait in the ledger while the coordinator is unreachable. It also runs up to
/// `max_jobs` job slots, each leasing a task while the policy accepts guest work and
/// running it as a guest (see [`run_task`]).
pub async fn run_link(
    paths: Paths,
    creds: Credentials,
    link: JobLink,
    health: Option<HealthSender>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let client = CoordinatorClient::new(&creds)?;
    let health = health.unwrap_or_else(|| Arc::new(tokio::sync::watch::channel(LinkHealth::Working).0));
    let s_b = tokio::task::spawn_blocking(base_speed).await.unwrap_or(0.0);
    tracing::info!(url = %creds.url, agent = %creds.agent_id, base_speed = s_b, "linked to coordinator");
    let running = RunningTasks::default();
    // A new run holds no lease: what an earlier run of this agent held goes back now,
    // not when its lease expires. Before any slot leases anything.
    match tokio::time::timeout(Duration::from_secs(10), client.give_back_all()).await {
        Ok(Ok(n)) if n > 0 => tracing::info!(tasks = n, "gave back the tasks an earlier run of this agent held"),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!("could not give back an earlier run's tasks (their leases expire instead): {e}"),
        Err(_) => tracing::warn!("giving back an earlier run's tasks timed out (their leases expire instead)"),
    }
    let beat = Beat { client: &client, paths: &paths, driver: &link.driver, running: &running, health: &health, s_b }.run();
    let work = async {
        // Dropped at shutdown, the set aborts its slots.
        let mut slots = tokio::task::JoinSet::new();
        for _ in 0..link.max_jobs.max(1) {
            let (client, paths, driver, running, health) =
                (client.clone(), paths.clone(), link.driver.clone(), running.clone(), health.clone());
            slots.spawn(async move { run_jobs(&client, &paths, &running, driver, health).await });
        }
        while slots.join_next().await.is_some() {}
    };
    tokio::select! {
        _ = shutdown => {}
        _ = beat => {}
        _ = work => {}
    }
    // One last sync so nothing accounted waits for the next start (the driver answers it
    // after it stopped, its final totals written).
    let _ = client.sync_outbox(&link.driver).await;
    // Stopping: its guests are killed with it, so its tasks go back now (briefly: a
    // coordinator stopping too must not hold the agent up).
    if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), client.give_back_all()).await {
        if n > 0 {
            tracing::info!(tasks = n, "stopping: the tasks this agent held went back to the queue");
        }
    }
    Ok(())
}
