//! The agent's side of the coordinator protocol (HTTP/JSON over reqwest with rustls):
//! enrolment with a join token, heartbeats carrying the policy state, availability,
//! budget left, free memory and the speeds `S_b`/`S_c`, and the idempotent sync of the
//! ledger's outbox — records are sent in sequence order, marked sent only after the
//! coordinator acknowledged them, and the coordinator stores each (agent, sequence) once,
//! so a crash, a lost answer or a long disconnection neither loses nor doubles any.
//!
//! [`run_link`] is the loop an agent process runs beside its driver: it reads the
//! agent's status over the control socket and the outbox through its own ledger
//! connection (WAL allows both), so the driver itself is untouched.
//! Given the driver's job channel, the link also leases tasks while the policy accepts
//! guest work and hands each to the driver to run as a guest, renewing the lease while
//! it runs and reporting `complete` (exit code, the guest's CPU from its final ledger
//! totals) or `evicted` when it ends.
//!
//! The request and answer bodies are the `lull-protocol` types the coordinator serves.

use crate::agent::JobRequest;
use crate::control::{self, Request, Response};
use crate::guest::{GuestPhase, GuestSpec};
use crate::ledger::{Ledger, LedgerError};
use crate::paths::Paths;
use lull_protocol::{
    Completion, CompletionAck, EnrolRequest, Enrolment, ErrorBody, Heartbeat, HeartbeatAck, Lease, LeaseRequest, Output, Progress,
    ProgressAck, Record, RecordBatch, RecordsAck, Task, TaskRelease,
};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// A coordinator client failure.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("coordinator unreachable: {0}")]
    Http(#[from] reqwest::Error),
    #[error("coordinator answered {status}: {message}")]
    Refused { status: u16, message: String },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("credentials file {path}: {message}")]
    Credentials { path: String, message: String },
}

type Result<T> = std::result::Result<T, ClientError>;

/// What an enrolled agent keeps (in `coordinator.json` in its data directory, mode 0600).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Credentials {
    pub url: String,
    pub agent_id: String,
    pub secret: String,
}

impl Credentials {
    /// Where the credentials live for these paths.
    pub fn path(paths: &Paths) -> std::path::PathBuf {
        paths.data_dir.join("coordinator.json")
    }

    /// Loads saved credentials, if any.
    pub fn load(path: &Path) -> Result<Option<Self>> {
        let err = |message: String| ClientError::Credentials { path: path.display().to_string(), message };
        match std::fs::read_to_string(path) {
            Ok(s) => Ok(Some(serde_json::from_str(&s).map_err(|e| err(e.to_string()))?)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(err(e.to_string())),
        }
    }

    /// Saves the credentials, readable by the owner only.
    pub fn save(&self, path: &Path) -> Result<()> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let err = |e: std::io::Error| ClientError::Credentials { path: path.display().to_string(), message: e.to_string() };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension("json.tmp");
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp).map_err(err)?;
        f.write_all(serde_json::to_string_pretty(self).unwrap_or_default().as_bytes()).map_err(err)?;
        f.sync_all().map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }
}

/// What one outbox sync did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncStats {
    pub sent: usize,
    pub batches: usize,
}

/// Records per request (the coordinator takes up to 1000).
pub const SYNC_BATCH: usize = 500;

/// A client for one enrolled agent.
#[derive(Clone, Debug)]
pub struct CoordinatorClient {
    http: reqwest::Client,
    base: String,
    secret: String,
}

fn http() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder().timeout(Duration::from_secs(40)).connect_timeout(Duration::from_secs(5)).build()?)
}

async fn answer<T: serde::de::DeserializeOwned>(r: reqwest::Response) -> Result<T> {
    let status = r.status();
    if status.is_success() {
        return Ok(r.json().await?);
    }
    let text = r.text().await.unwrap_or_default();
    let message = serde_json::from_str::<ErrorBody>(&text).map(|b| b.error).unwrap_or(text);
    Err(ClientError::Refused { status: status.as_u16(), message })
}

/// Enrols this machine with a join token; returns the credentials to save. With
/// `replace`, an enrolled machine of the owner's with this name is taken over (same id).
pub async fn enrol(url: &str, token: &str, owner: &str, machine: &str, replace: bool) -> Result<Credentials> {
    let base = url.trim_end_matches('/').to_string();
    let req = EnrolRequest { token: token.into(), owner: owner.into(), machine: machine.into(), replace };
    let r = http()?.post(format!("{base}/api/v1/enrol")).json(&req).send().await?;
    let e: Enrolment = answer(r).await?;
    Ok(Credentials { url: base, agent_id: e.agent_id, secret: e.secret })
}

impl CoordinatorClient {
    /// A client with saved credentials.
    pub fn new(creds: &Credentials) -> Result<Self> {
        Ok(Self { http: http()?, base: creds.url.trim_end_matches('/').to_string(), secret: creds.secret.clone() })
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.post(format!("{}{path}", self.base)).bearer_auth(&self.secret)
    }

    /// Sends a heartbeat; returns the interval the coordinator asks for.
    pub async fn heartbeat(&self, hb: &Heartbeat) -> Result<Duration> {
        let a: HeartbeatAck = answer(self.post("/api/v1/heartbeat").json(hb).send().await?).await?;
        Ok(Duration::from_secs(a.next_heartbeat_s.clamp(1, 3600) as u64))
    }

    /// Sends records; returns the highest sequence number the coordinator has stored.
    pub async fn post_records(&self, records: Vec<Record>) -> Result<i64> {
        let a: RecordsAck = answer(self.post("/api/v1/records").json(&RecordBatch { records }).send().await?).await?;
        Ok(a.acked_through)
    }

    /// Sends every pending outbox record, oldest first, marking each batch sent only
    /// after the coordinator acknowledged it. Stops at the first failure (the rest stays
    /// queued for the next sync).
    pub async fn sync_outbox(&self, ledger: &Mutex<Ledger>) -> Result<SyncStats> {
        let mut stats = SyncStats::default();
        loop {
            let pending = ledger.lock().unwrap_or_else(|e| e.into_inner()).outbox_pending(SYNC_BATCH)?;
            if pending.is_empty() {
                return Ok(stats);
            }
            let (sent, last) = (pending.len(), pending.last().map_or(0, |r| r.seq));
            let acked = self.post_records(pending).await?;
            ledger.lock().unwrap_or_else(|e| e.into_inner()).outbox_acked(acked.min(last))?;
            stats.sent += sent;
            stats.batches += 1;
        }
    }

    /// Asks for work, waiting up to `wait` (long-poll); `None` when there is none.
    pub async fn lease(&self, free_mem_bytes: u64, wait: Duration) -> Result<Option<Lease>> {
        let req = LeaseRequest { free_mem_bytes, wait_ms: wait.as_millis().min(30_000) as u32 };
        let r = self.post("/api/v1/lease").json(&req).send().await?;
        if r.status() == reqwest::StatusCode::NO_CONTENT {
            return Ok(None);
        }
        Ok(Some(answer(r).await?))
    }

    /// Renews a lease; `true` if the job was cancelled and the guest must stop.
    pub async fn progress(&self, t: &Lease) -> Result<bool> {
        let req = Progress { lease: t.lease, fraction: None };
        let a: ProgressAck = answer(self.post(&format!("/api/v1/tasks/{}/{}/progress", t.job_id, t.rank)).json(&req).send().await?).await?;
        Ok(a.cancel)
    }

    /// Reports completion with the CPU time the OS measured and the tail of the guest's
    /// output; `true` if counted now, `false` if it had been already (a retry). A
    /// coordinator older than output tails refuses the unknown field (400/422): the
    /// completion is then sent again without it, so the job still completes there.
    pub async fn complete(&self, t: &Lease, exit_code: i32, user_cpu_s: f64, sys_cpu_s: f64, output: Option<Output>) -> Result<bool> {
        let path = format!("/api/v1/tasks/{}/{}/complete", t.job_id, t.rank);
        let had_output = output.is_some();
        let req = Completion { lease: t.lease, exit_code, user_cpu_s, sys_cpu_s, output };
        let a: CompletionAck = match answer(self.post(&path).json(&req).send().await?).await {
            Err(ClientError::Refused { status: 400 | 422, message }) if had_output => {
                tracing::warn!("the coordinator refused the output tail ({message}); completing without it");
                let req = Completion { output: None, ..req };
                answer(self.post(&path).json(&req).send().await?).await?
            }
            other => other?,
        };
        Ok(a.counted)
    }

    /// Gives a task back because the owner returned (does not use one of its retries).
    pub async fn evicted(&self, t: &Lease, reason: &str) -> Result<()> {
        let req = TaskRelease { lease: t.lease, reason: Some(reason.into()) };
        let _: Task = answer(self.post(&format!("/api/v1/tasks/{}/{}/evicted", t.job_id, t.rank)).json(&req).send().await?).await?;
        Ok(())
    }
}

/// The base speed `S_b`: a short standard benchmark (a fixed integer mixing loop, about
/// 50 ms on a current core) in millions of loop iterations per second, best of three.
pub fn base_speed() -> f64 {
    let mut best = 0.0f64;
    for _ in 0..3 {
        let t = Instant::now();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        const N: u64 = 20_000_000;
        for i in 0..N {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x = x.wrapping_add(i);
        }
        std::hint::black_box(x);
        best = best.max(N as f64 / 1e6 / t.elapsed().as_secs_f64().max(1e-9));
    }
    best
}

/// Free memory guests may use now (`MemAvailable`), in bytes.
pub fn free_memory() -> u64 {
    match sysinfo::System::new() {
        Ok(mut sys) => {
            sys.refresh_memory();
            sys.available_memory()
        }
        Err(_) => 0,
    }
}

/// A heartbeat from the agent's status: `S_c` is `S_b` scaled by the CPU share the owner
/// leaves free. It always carries the owner's daily interruption limit (coordinators
/// before the dashboard refuse unknown heartbeat fields: upgrade the coordinator first).
pub fn heartbeat_from(status: &control::AgentStatus, base_speed: f64, free_mem_bytes: u64) -> Heartbeat {
    let p = &status.policy;
    let owner = (p.owner_cpu as f64).clamp(0.0, 1.0);
    Heartbeat {
        state: p.state.as_str().to_string(),
        available: p.available,
        budget_left: p.interruption_limit.saturating_sub(p.interruptions_today),
        free_mem_bytes,
        base_speed,
        current_speed: base_speed * (1.0 - owner),
        interruption_limit: Some(p.interruption_limit),
    }
}

/// Whether the agent wants guest work now: the policy accepts guests and the machine is
/// recruitable or already donating (what the driver publishes after each step).
pub fn may_lease_now(state: crate::policy::StateKind, directive: crate::policy::GuestDirective) -> bool {
    use crate::policy::{GuestDirective, StateKind};
    directive == GuestDirective::Accept && matches!(state, StateKind::Recruitable | StateKind::Donating)
}

/// A leased task's guest spec: its command, arguments and environment (plus
/// `LULL_JOB_ID`, `LULL_RANK`, `LULL_MACHINES`), its memory request as the guest's cap,
/// checkpointable as submitted, the configured network policy, and a work directory
/// `jobs/<job>-<rank>-<lease>` under `work_root` holding the job's input files.
pub fn guest_spec(task: &Lease, work_root: &Path) -> std::result::Result<GuestSpec, String> {
    let s = &task.spec;
    let workdir = work_root.join("jobs").join(format!("{}-{}-{}", task.job_id, task.rank, task.lease));
    std::fs::create_dir_all(&workdir).map_err(|e| format!("creating {}: {e}", workdir.display()))?;
    for (name, content) in &s.inputs {
        let plain = Path::new(name).components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || name.is_empty() {
            return Err(format!("input file name {name:?} is not a plain relative path"));
        }
        let path = workdir.join(name);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        std::fs::write(&path, content).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let mut spec = GuestSpec::new(s.command.clone(), s.args.clone());
    spec.env = s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    spec.env.push(("LULL_JOB_ID".into(), task.job_id.to_string()));
    spec.env.push(("LULL_RANK".into(), task.rank.to_string()));
    spec.env.push(("LULL_MACHINES".into(), task.machines.to_string()));
    spec.workdir = Some(workdir);
    spec.memory_cap_bytes = (task.mem_bytes > 0).then_some(task.mem_bytes);
    spec.checkpointable = task.checkpointable;
    Ok(spec)
}

/// The tail (at most [`lull_protocol::OUTPUT_TAIL_MAX`] bytes) of one of a guest's
/// output files, and the file's whole size; a missing file is empty.
fn file_tail(path: &Path) -> (String, u64) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return (String::new(), 0) };
    let size = f.metadata().map_or(0, |m| m.len());
    let from = size.saturating_sub(lull_protocol::OUTPUT_TAIL_MAX as u64);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut buf).is_err() {
        return (String::new(), size);
    }
    (lull_protocol::output_tail(&buf), size)
}

/// What a guest wrote to `stdout.log` and `stderr.log` in its work directory, as a
/// completion carries it.
pub fn guest_output(workdir: &Path) -> Output {
    let (stdout, stdout_bytes) = file_tail(&workdir.join("stdout.log"));
    let (stderr, stderr_bytes) = file_tail(&workdir.join("stderr.log"));
    Output { stdout, stderr, stdout_bytes, stderr_bytes }
}

/// How long one lease request waits for work.
const LEASE_WAIT: Duration = Duration::from_secs(20);
/// How often a running task's lease is renewed (the coordinator's default TTL is 60 s).
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// Retries a report to the coordinator while it is unreachable (about a minute in all);
/// a refusal (lease lost, task gone) is final.
async fn retry<T, F, Fut>(what: &str, mut call: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    for attempt in 0..6u32 {
        match call().await {
            Ok(v) => return Some(v),
            Err(e @ ClientError::Refused { .. }) => {
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

/// What the link needs to run leased tasks: the driver's job channel and how many tasks
/// may run at once (`guests.max_jobs`).
#[derive(Clone, Debug)]
pub struct JobLink {
    pub jobs: mpsc::Sender<JobRequest>,
    pub max_jobs: u32,
    /// Whether the driver wants guest work now ([`may_lease_now`]), updated on every
    /// step: a slot sleeps on it until the machine is recruitable, with no polling.
    pub accepting: tokio::sync::watch::Receiver<bool>,
}

/// One job slot: leases a task while the policy accepts guest work and runs it as a
/// guest through the driver, then the next.
async fn run_jobs(
    client: &CoordinatorClient,
    paths: &Paths,
    jobs: mpsc::Sender<JobRequest>,
    mut accepting: tokio::sync::watch::Receiver<bool>,
) {
    let mut backoff = Duration::from_secs(1);
    loop {
        // Asleep until the driver says guest work is wanted (no wake-up meanwhile); the
        // driver gone (its sender dropped) ends the slot.
        if accepting.wait_for(|wanted| *wanted).await.is_err() {
            return;
        }
        match client.lease(free_memory(), LEASE_WAIT).await {
            Ok(None) => backoff = Duration::from_secs(1),
            Ok(Some(task)) => {
                backoff = Duration::from_secs(1);
                // The owner may have come back during the long-poll: give the task back
                // at once rather than hold it while it cannot run.
                if *accepting.borrow_and_update() {
                    run_task(client, paths, &jobs, task).await;
                } else {
                    tracing::info!(job = task.job_id, "the machine stopped accepting guest work during the lease; task given back");
                    retry("giving a task back", || client.evicted(&task, "the machine is no longer available")).await;
                }
            }
            Err(e) => {
                tracing::warn!("lease failed: {e}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(60));
            }
        }
    }
}

/// Runs one leased task as a guest, renewing its lease, and reports how it ended:
/// `complete` with the exit code and the guest's user and system CPU from its final
/// totals (already in the ledger), or `evicted` when the policy evicted it or the agent
/// stopped, so the coordinator re-queues it.
async fn run_task(client: &CoordinatorClient, paths: &Paths, jobs: &mpsc::Sender<JobRequest>, task: Lease) {
    tracing::info!(job = task.job_id, rank = task.rank, lease = task.lease, "task leased");
    let spec = match guest_spec(&task, &paths.work_root()) {
        Ok(s) => s,
        Err(why) => {
            tracing::warn!(job = task.job_id, "cannot run the task: {why}");
            let stderr = lull_protocol::output_tail(format!("lull: cannot run the task: {why}\n").as_bytes());
            let output = Output { stderr_bytes: stderr.len() as u64, stderr, ..Output::default() };
            retry("reporting an unrunnable task", || client.complete(&task, 127, 0.0, 0.0, Some(output.clone()))).await;
            return;
        }
    };
    let (started_tx, started_rx) = oneshot::channel();
    let (ended_tx, ended_rx) = oneshot::channel();
    let started = match jobs.send(JobRequest { spec, started: started_tx, ended: ended_tx }).await {
        Ok(()) => started_rx.await.unwrap_or_else(|_| Err("the agent is stopping".into())),
        Err(_) => Err("the agent is stopping".into()),
    };
    let guest = match started {
        Ok(id) => id,
        Err(why) => {
            tracing::warn!(job = task.job_id, "task not started: {why}");
            retry("giving a task back", || client.evicted(&task, &why)).await;
            return;
        }
    };
    tokio::pin!(ended_rx);
    let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + PROGRESS_EVERY, PROGRESS_EVERY);
    let info = loop {
        tokio::select! {
            info = &mut ended_rx => break info.ok(),
            _ = renew.tick() => match client.progress(&task).await {
                Ok(true) => tracing::warn!(job = task.job_id, guest = %guest, "the job was cancelled; its guest runs on to its end"),
                Ok(false) => {}
                Err(e) => tracing::warn!(job = task.job_id, "lease renewal failed: {e}"),
            },
        }
    };
    let Some(info) = info else {
        retry("giving a task back", || client.evicted(&task, "agent stopped")).await;
        return;
    };
    let GuestPhase::Ended { code, signal, evicted } = info.phase else { return };
    if evicted {
        tracing::info!(job = task.job_id, guest = %guest, "task evicted; giving it back");
        retry("reporting an eviction", || client.evicted(&task, "evicted: the owner returned")).await;
        return;
    }
    let exit = code.unwrap_or_else(|| signal.map_or(-1, |s| 128 + s));
    let (user_s, sys_s) = (info.cpu_user_us as f64 / 1e6, info.cpu_system_us as f64 / 1e6);
    tracing::info!(job = task.job_id, guest = %guest, exit, cpu_s = user_s + sys_s, "task ended");
    let output = guest_output(&info.workdir);
    retry("reporting a completion", || client.complete(&task, exit, user_s, sys_s, Some(output.clone()))).await;
}

/// Links a running agent to its coordinator until `shutdown`: every heartbeat interval
/// it reads the agent's status over the control socket, sends a heartbeat and syncs the
/// outbox. Failures are logged and retried with backoff (up to a minute); records wait
/// in the ledger meanwhile. With `jobs` (the driver's job channel), it also runs up to
/// `max_jobs` job slots, each leasing a task while the policy accepts guest work and
/// running it as a guest (see [`run_task`]).
pub async fn run_link(
    paths: Paths,
    creds: Credentials,
    jobs: Option<JobLink>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let client = CoordinatorClient::new(&creds)?;
    let ledger = Mutex::new(Ledger::open(&paths.ledger)?);
    let s_b = tokio::task::spawn_blocking(base_speed).await.unwrap_or(0.0);
    tracing::info!(url = %creds.url, agent = %creds.agent_id, base_speed = s_b, "linked to coordinator");
    let beat = async {
        let mut interval = Duration::from_secs(10);
        let mut backoff = Duration::from_secs(1);
        loop {
            let socket = paths.socket.clone();
            let status = tokio::task::spawn_blocking(move || control::call(&socket, &Request::Status)).await;
            let mut ok = true;
            if let Ok(Ok(Response::Status(st))) = status {
                let hb = heartbeat_from(&st, s_b, free_memory());
                match client.heartbeat(&hb).await {
                    Ok(i) => interval = i,
                    Err(e) => {
                        ok = false;
                        tracing::warn!("heartbeat failed: {e}");
                    }
                }
            }
            match client.sync_outbox(&ledger).await {
                Ok(s) if s.sent > 0 => tracing::info!(records = s.sent, "ledger records synced"),
                Ok(_) => {}
                Err(e) => {
                    ok = false;
                    tracing::warn!("record sync failed (kept in the ledger): {e}");
                }
            }
            let wait = if ok {
                backoff = Duration::from_secs(1);
                interval
            } else {
                backoff = (backoff * 2).min(Duration::from_secs(60));
                backoff.min(interval)
            };
            tokio::time::sleep(wait).await;
        }
    };
    let work = async {
        match jobs {
            Some(link) => {
                // Dropped at shutdown, the set aborts its slots.
                let mut slots = tokio::task::JoinSet::new();
                for _ in 0..link.max_jobs.max(1) {
                    let (client, paths, jobs, accepting) = (client.clone(), paths.clone(), link.jobs.clone(), link.accepting.clone());
                    slots.spawn(async move { run_jobs(&client, &paths, jobs, accepting).await });
                }
                while slots.join_next().await.is_some() {}
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = shutdown => {}
        _ = beat => {}
        _ = work => {}
    }
    // One last sync so nothing accounted waits for the next start.
    let _ = client.sync_outbox(&ledger).await;
    Ok(())
}
