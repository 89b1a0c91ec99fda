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
//! totals) or `evicted` when it ends. Around that it moves checkpoints (a checkpointable
//! guest writes its state to `$LULL_CHECKPOINT`; the link uploads it with each renewal
//! and after an eviction, and downloads the last one before a new lease starts), stops
//! the guest when its job is cancelled or its lease lost, holds a gang member back
//! until every rank of its gang is leased, and asks the coordinator to migrate a
//! lingering guest when the driver says it is time (seed 000 §5.2, [`ask_migration`]).
//!
//! The request and answer bodies are the `lull-protocol` types the coordinator serves.

use crate::control::{self, Request, Response};
use crate::driver_link::{HealthSender, JobMsg, JobRequest, LinkHealth, MigrationAsk, MigrationOutcome};
use crate::guest::{GuestDir, GuestInfo, GuestPhase, GuestSpec};
use crate::ledger::{Ledger, LedgerError};
use crate::paths::Paths;
use lull_protocol::limits::{INPUTS_MAX, JSON_BODY_MAX, VALUE_MAX};
use lull_protocol::{
    Completion, CompletionAck, EnrolRequest, Enrolment, ErrorBody, Gang, GuestMemory, Heartbeat, HeartbeatAck, Lease, LeaseRequest,
    MemoryReport, MigrateAnswer, MigrateRequest, Output, Progress, ProgressAck, Record, RecordBatch, RecordsAck, Task, TaskOutcome,
    TaskRelease, CHECKPOINT_MAX,
};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// A coordinator client failure.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("coordinator unreachable: {0}")]
    Http(#[from] reqwest::Error),
    #[error("coordinator answered {status}: {message}")]
    Refused {
        status: u16,
        message: String,
        /// The error body's machine-readable `code`, when the coordinator gives one
        /// (`credential_replaced`, `machine_removed`, …).
        code: Option<String>,
    },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("credentials file {path}: {message}")]
    Credentials { path: String, message: String },
    #[error("the coordinator's answer is larger than the {max} bytes the protocol allows{}; not read", size.map(|s| format!(" ({s} bytes)")).unwrap_or_default())]
    TooLarge { max: usize, size: Option<u64> },
    #[error("the coordinator's answer is not what was asked for: {0}")]
    Malformed(String),
}

impl ClientError {
    /// The coordinator refused this machine's credential (revoked, or replaced by
    /// another enrolment of this machine).
    pub fn credential_refused(&self) -> bool {
        matches!(self, ClientError::Refused { status: 401, .. })
    }
}

type Result<T> = std::result::Result<T, ClientError>;

/// What an enrolled agent keeps (in `coordinator.json` in its data directory, mode 0600).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Credentials {
    pub url: String,
    pub agent_id: String,
    pub secret: String,
    /// The machine's name and owner as enrolled (credentials saved before they were kept
    /// have neither).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
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

/// A client for one enrolled agent. Its clones share the secret, which the link
/// replaces when `coordinator.json` gets a new one for this machine.
#[derive(Clone, Debug)]
pub struct CoordinatorClient {
    http: reqwest::Client,
    base: String,
    secret: Arc<std::sync::RwLock<String>>,
}

fn http() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder().timeout(Duration::from_secs(40)).connect_timeout(Duration::from_secs(5)).build()?)
}

/// Room for what an answer wraps around a job's spec (ids, lease, names), and the most
/// of an error answer read.
const ANSWER_ENVELOPE_MAX: usize = 64 << 10;
/// The most an answer other than a checkpoint may hold: a lease carries a job's spec,
/// which the coordinator took in a request of at most [`JSON_BODY_MAX`].
const ANSWER_MAX: usize = JSON_BODY_MAX + ANSWER_ENVELOPE_MAX;

async fn answer<T: serde::de::DeserializeOwned>(r: reqwest::Response) -> Result<T> {
    if r.status().is_success() {
        let body = bounded_body(r, ANSWER_MAX).await?;
        return serde_json::from_slice(&body).map_err(|e| ClientError::Malformed(e.to_string()));
    }
    Err(refusal(r).await)
}

/// An answer's body, read only up to `max` bytes: a larger one (declared or sent) is
/// refused without holding it in memory.
async fn bounded_body(mut r: reqwest::Response, max: usize) -> Result<Vec<u8>> {
    if let Some(size) = r.content_length().filter(|n| *n > max as u64) {
        return Err(ClientError::TooLarge { max, size: Some(size) });
    }
    let mut body = Vec::new();
    while let Some(chunk) = r.chunk().await? {
        if body.len() + chunk.len() > max {
            return Err(ClientError::TooLarge { max, size: None });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A refusal's status and the message of its error body (of which at most 64 KiB is read).
async fn refusal(r: reqwest::Response) -> ClientError {
    let status = r.status();
    let text = bounded_body(r, ANSWER_ENVELOPE_MAX).await.map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    let code = serde_json::from_str::<serde_json::Value>(&text).ok().and_then(|v| Some(v.get("code")?.as_str()?.to_string()));
    let message = serde_json::from_str::<ErrorBody>(&text).map(|b| b.error).unwrap_or(text);
    ClientError::Refused { status: status.as_u16(), message, code }
}

/// Enrols this machine with a join token; returns the credentials to save. With
/// `replace`, an enrolled machine of the owner's with this name is taken over (same id):
/// the coordinator allows that only with the machine's current credential (`current`,
/// sent as the bearer) or an admin key, never with a token alone.
pub async fn enrol(url: &str, token: &str, owner: &str, machine: &str, replace: bool, current: Option<&str>) -> Result<Credentials> {
    let base = url.trim_end_matches('/').to_string();
    let req = EnrolRequest { token: token.into(), owner: owner.into(), machine: machine.into(), replace, cpus: Some(machine_cpus()) };
    let mut post = http()?.post(format!("{base}/api/v1/enrol")).json(&req);
    if let Some(secret) = current {
        post = post.bearer_auth(secret);
    }
    let e: Enrolment = answer(post.send().await?).await?;
    Ok(Credentials { url: base, agent_id: e.agent_id, secret: e.secret, machine: Some(machine.into()), owner: Some(owner.into()) })
}

/// This machine's logical CPUs, as the coordinator checks donated CPU-seconds against
/// them: the CPUs online (not this process's share of them, which may be smaller than
/// what its guests can use), at least 1.
pub fn machine_cpus() -> u32 {
    let mine = std::thread::available_parallelism().map_or(1, |n| n.get());
    #[cfg(unix)]
    // SAFETY: sysconf has no preconditions.
    let online = usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap_or(0);
    #[cfg(not(unix))]
    let online = 0;
    u32::try_from(mine.max(online).max(1)).unwrap_or(u32::MAX).min(lull_protocol::limits::CPUS_MAX)
}

impl CoordinatorClient {
    /// A client with saved credentials.
    pub fn new(creds: &Credentials) -> Result<Self> {
        let secret = Arc::new(std::sync::RwLock::new(creds.secret.clone()));
        Ok(Self { http: http()?, base: creds.url.trim_end_matches('/').to_string(), secret })
    }

    fn secret(&self) -> String {
        self.secret.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Takes `creds`' secret if they name this client's coordinator and differ from the
    /// one in use (`lull enrol --replace` wrote them: this machine enrolled again, under
    /// the same agent id or a new one); true when it changed.
    pub fn adopt(&self, creds: &Credentials) -> bool {
        if creds.url.trim_end_matches('/') != self.base {
            return false;
        }
        let mut secret = self.secret.write().unwrap_or_else(|e| e.into_inner());
        let changed = *secret != creds.secret;
        if changed {
            secret.clone_from(&creds.secret);
        }
        changed
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.post(format!("{}{path}", self.base)).bearer_auth(self.secret())
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
        let req = LeaseRequest { free_mem_bytes, wait_ms: wait.as_millis().min(lull_protocol::MAX_LEASE_WAIT_MS as u128) as u32 };
        let r = self.post("/api/v1/lease").json(&req).send().await?;
        if r.status() == reqwest::StatusCode::NO_CONTENT {
            return Ok(None);
        }
        Ok(Some(answer(r).await?))
    }

    /// Renews a lease, with the tail of what the guest wrote so far when it wrote more
    /// (see [`OutputShipper`]); the answer says whether the job was cancelled (the guest
    /// must stop) or its gang is halted. A coordinator older than output shipping
    /// refuses the unknown field (400/422): the renewal is then sent again without it.
    pub async fn progress(&self, t: &Lease, output: Option<Output>) -> Result<ProgressAck> {
        let path = format!("/api/v1/tasks/{}/{}/progress", t.job_id, t.rank);
        let had_output = output.is_some();
        let req = Progress { lease: t.lease, fraction: None, output };
        match answer(self.post(&path).json(&req).send().await?).await {
            Err(ClientError::Refused { status: 400 | 422, .. }) if had_output => {
                let req = Progress { output: None, ..req };
                answer(self.post(&path).json(&req).send().await?).await
            }
            other => other,
        }
    }

    /// Asks the coordinator to move a lingering task (seed 000 §5.2). With `migrate` in
    /// the answer the task was given back (its last uploaded checkpoint kept): stop the
    /// guest as for a lost lease.
    pub async fn migrate(&self, t: &Lease, req: &MigrateRequest) -> Result<MigrateAnswer> {
        answer(self.post(&format!("/api/v1/tasks/{}/{}/migrate", t.job_id, t.rank)).json(req).send().await?).await
    }

    /// Reports how the task's guest ended (`outcome`: its exit code, signal, or why it
    /// never started) with the CPU time the OS measured and the tail of its output;
    /// `true` if counted now, `false` if it had been already (a retry). A coordinator
    /// older than output tails or outcomes refuses the unknown fields (400/422): the
    /// completion is then sent again without them (the exit code as a shell gives it),
    /// so the job still ends there.
    pub async fn complete(
        &self,
        t: &Lease,
        outcome: &TaskOutcome,
        user_cpu_s: f64,
        sys_cpu_s: f64,
        output: Option<Output>,
    ) -> Result<bool> {
        let path = format!("/api/v1/tasks/{}/{}/complete", t.job_id, t.rank);
        let exit_code = outcome.shell_code();
        let req = Completion { lease: t.lease, exit_code, outcome: Some(outcome.clone()), user_cpu_s, sys_cpu_s, output };
        let a: CompletionAck = match answer(self.post(&path).json(&req).send().await?).await {
            Err(ClientError::Refused { status: 400 | 422, message, .. }) => {
                tracing::warn!("the coordinator refused the outcome or output tail ({message}); completing with the exit code alone");
                let req = Completion { output: None, outcome: None, ..req };
                answer(self.post(&path).json(&req).send().await?).await?
            }
            other => other?,
        };
        Ok(a.counted)
    }

    /// Tells the coordinator that no guest of this agent runs (it just started, or it is
    /// stopping): the tasks it held go back to the queue at once, neither an eviction
    /// nor a retry. Returns how many; a coordinator without the route (404) leaves them
    /// to expire, as before.
    pub async fn give_back_all(&self) -> Result<u32> {
        let r = self.post("/api/v1/give-back").send().await?;
        if r.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(0);
        }
        let a: lull_protocol::GivenBack = answer(r).await?;
        Ok(a.tasks_requeued)
    }

    /// Uploads a task's checkpoint under its lease (the coordinator refuses it with 409
    /// once the lease is lost, and with 413 beyond [`CHECKPOINT_MAX`]).
    pub async fn put_checkpoint(&self, t: &Lease, data: Vec<u8>) -> Result<()> {
        let url = format!("{}/api/v1/tasks/{}/{}/checkpoint?lease={}", self.base, t.job_id, t.rank, t.lease);
        let r = self.http.put(url).bearer_auth(self.secret()).header(reqwest::header::CONTENT_TYPE, "application/octet-stream").body(data);
        let r = r.send().await?;
        if r.status().is_success() {
            return Ok(());
        }
        Err(refusal(r).await)
    }

    /// Downloads a task's last checkpoint; `None` when it has none (404).
    pub async fn get_checkpoint(&self, t: &Lease) -> Result<Option<Vec<u8>>> {
        let url = format!("{}/api/v1/tasks/{}/{}/checkpoint", self.base, t.job_id, t.rank);
        let r = self.http.get(url).bearer_auth(self.secret()).send().await?;
        if r.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        if !r.status().is_success() {
            return Err(refusal(r).await);
        }
        Ok(Some(bounded_body(r, CHECKPOINT_MAX).await?))
    }

    /// Whether every rank of a task's gang is leased.
    pub async fn gang(&self, t: &Lease) -> Result<Gang> {
        let url = format!("{}/api/v1/tasks/{}/{}/gang", self.base, t.job_id, t.rank);
        answer(self.http.get(url).bearer_auth(self.secret()).send().await?).await
    }

    /// Gives a task back because the owner returned (does not use one of its retries).
    pub async fn evicted(&self, t: &Lease, reason: &str) -> Result<()> {
        self.release(t, reason, false).await
    }

    /// Gives a task back before its guest started (the machine stopped accepting guest
    /// work, its gang did not fill, its checkpoint could not be downloaded): neither an
    /// eviction nor a retry. A coordinator older than that refuses the field (400/422):
    /// it is then given back as an eviction, as before.
    pub async fn not_started(&self, t: &Lease, reason: &str) -> Result<()> {
        match self.release(t, reason, true).await {
            Err(ClientError::Refused { status: 400 | 422, .. }) => self.release(t, reason, false).await,
            other => other,
        }
    }

    async fn release(&self, t: &Lease, reason: &str, not_started: bool) -> Result<()> {
        let req = TaskRelease { lease: t.lease, reason: Some(reason.into()), not_started };
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

/// The guests of leased tasks running now: guest id → (job, rank). Each task's slot adds
/// its guest once started and takes it out when it ends, so the heartbeat can name the
/// tasks whose memory it reports.
pub type RunningTasks = Arc<Mutex<HashMap<String, (i64, u32)>>>;

/// Takes a task's guest out of [`RunningTasks`] when its slot is done with it, whichever
/// way the task ends.
struct Registered(RunningTasks, String);

impl Drop for Registered {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.1);
    }
}

/// Turns the guests' cumulative memory counters into a heartbeat's memory report (seed
/// 001): page faults and I/O per second since the previous report (since the guest
/// started, for its first), for the guests of leased tasks only.
#[derive(Debug, Default)]
pub struct MemoryReporter {
    /// Per guest: (age ms, major faults, I/O bytes) at the previous report.
    prev: HashMap<String, (u64, u64, Option<u64>)>,
}

impl MemoryReporter {
    /// The report for `m`, naming each guest by its task in `tasks`.
    pub fn report(&mut self, m: &crate::guest::GuestsMemory, tasks: &HashMap<String, (i64, u32)>) -> MemoryReport {
        let mut next = HashMap::new();
        let guests = m
            .guests
            .iter()
            .filter_map(|g| {
                let &(job_id, rank) = tasks.get(&g.id)?;
                let (age0, faults0, io0) = self.prev.get(&g.id).copied().unwrap_or((0, 0, Some(0)));
                let dt_s = g.age_ms.saturating_sub(age0) as f64 / 1000.0;
                let rate = |d: u64| if dt_s > 0.0 { d as f64 / dt_s } else { 0.0 };
                next.insert(g.id.clone(), (g.age_ms, g.major_faults, g.io_bytes));
                Some(GuestMemory {
                    job_id,
                    rank,
                    working_set_bytes: g.working_set_bytes,
                    major_faults_per_s: rate(g.major_faults.saturating_sub(faults0)),
                    age_s: g.age_ms as f64 / 1000.0,
                    io_bytes_per_s: g.io_bytes.map(|b| rate(b.saturating_sub(io0.unwrap_or(0)))),
                })
            })
            .collect();
        self.prev = next;
        MemoryReport { available_bytes: m.available_bytes, guest_memory_bytes: m.guest_memory_bytes, pressure: m.pressure, guests }
    }
}

/// A heartbeat from the agent's status: `S_c` is `S_b` scaled by the CPU share the owner
/// leaves free; free memory at most what guests may hold ([`GuestsMemory`]'s M, which
/// the guest cap and the owner's share bound); what keeps the machine busy, by cause
/// only. It always carries the owner's daily interruption limit (coordinators
/// before the dashboard refuse unknown heartbeat fields: upgrade the coordinator first),
/// the owner-load readings numbered `load_from` onwards (see [`crate::owner_load`]), and
/// `memory` when the agent measures it (see [`MemoryReporter`]); also returns the number
/// to send from next time, once this heartbeat is acknowledged.
pub fn heartbeat_from(
    status: &control::AgentStatus,
    base_speed: f64,
    free_mem_bytes: u64,
    load_from: u64,
    memory: Option<MemoryReport>,
) -> (Heartbeat, u64) {
    let p = &status.policy;
    let owner = (p.owner_cpu as f64).clamp(0.0, 1.0);
    let (owner_load, next) = status.owner_load.since(load_from);
    // What guests may really hold: the free memory, at most what the guest runtime
    // allows them in all (the guest cap and the owner's share).
    let free_mem_bytes = match &status.guest_memory {
        Some(m) => free_mem_bytes.min(m.guest_memory_bytes),
        None => free_mem_bytes,
    };
    let busy = p.busy.and_then(|c| serde_json::to_value(c).ok()).and_then(|v| v.as_str().map(str::to_string));
    let hb = Heartbeat {
        state: p.state.as_str().to_string(),
        available: p.available,
        budget_left: p.interruption_limit.saturating_sub(p.interruptions_today),
        free_mem_bytes,
        base_speed,
        current_speed: base_speed * (1.0 - owner),
        interruption_limit: Some(p.interruption_limit),
        idle_for_s: Some(p.idle_for_s),
        owner_load,
        memory,
        busy,
        cpus: Some(machine_cpus()),
    };
    (hb, next)
}

/// A leased task's guest spec: its command, arguments and environment (plus
/// `LULL_JOB_ID`, `LULL_RANK`, `LULL_MACHINES`; the runtime adds `LULL_CHECKPOINT` for a
/// checkpointable job, see [`crate::checkpoint`]), its memory request as the guest's cap,
/// checkpointable as submitted, and its directory `jobs/<job>-<rank>-<lease>` under
/// `work_root` (made absolute) with the job's input files in its work directory `work/`.
pub fn guest_spec(task: &Lease, work_root: &Path) -> std::result::Result<GuestSpec, String> {
    let s = &task.spec;
    if s.inputs.len() > INPUTS_MAX {
        return Err(format!("the job has {} input files, more than the {INPUTS_MAX} a job may carry", s.inputs.len()));
    }
    if let Some((name, content)) = s.inputs.iter().find(|(_, c)| c.len() > VALUE_MAX) {
        return Err(format!("input file {name:?} holds {} bytes, more than the {VALUE_MAX} an input file may hold", content.len()));
    }
    let dir = work_root.join("jobs").join(format!("{}-{}-{}", task.job_id, task.rank, task.lease));
    let dir = GuestDir::new(std::path::absolute(&dir).map_err(|e| format!("resolving {}: {e}", dir.display()))?);
    let workdir = dir.work();
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(&workdir).map_err(|e| format!("creating {}: {e}", workdir.display()))?;
    for (name, content) in &s.inputs {
        let plain = Path::new(name).components().all(|c| matches!(c, std::path::Component::Normal(_)));
        if !plain || name.is_empty() {
            return Err(format!("input file name {name:?} is not a plain relative path"));
        }
        let path = workdir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("creating {}: {e}", parent.display()))?;
        }
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, content.as_bytes()))
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    let mut spec = GuestSpec::new(s.command.clone(), s.args.clone());
    spec.env = s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    spec.env.push(("LULL_JOB_ID".into(), task.job_id.to_string()));
    spec.env.push(("LULL_RANK".into(), task.rank.to_string()));
    spec.env.push(("LULL_MACHINES".into(), task.machines.to_string()));
    spec.job_dir = Some(dir.root);
    spec.memory_cap_bytes = (task.mem_bytes > 0).then_some(task.mem_bytes);
    spec.checkpointable = task.checkpointable;
    Ok(spec)
}

/// The tail (at most [`lull_protocol::OUTPUT_TAIL_MAX`] bytes) of one of a guest's
/// output files, and the file's whole size; a missing file is empty. Never through a
/// symbolic link (the files are the agent's, beside the guest's work directory).
fn file_tail(path: &Path) -> (String, u64) {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(path) else { return (String::new(), 0) };
    let size = f.metadata().map_or(0, |m| m.len());
    let from = size.saturating_sub(lull_protocol::OUTPUT_TAIL_MAX as u64);
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(from)).is_err() || f.read_to_end(&mut buf).is_err() {
        return (String::new(), size);
    }
    (lull_protocol::output_tail(&buf), size)
}

/// What a guest wrote so far to its output files (`stdout.log` and `stderr.log` beside
/// its work directory), as a renewal or a completion carries it.
fn written_output(stdout_log: &Path, stderr_log: &Path) -> Output {
    let (stdout, stdout_bytes) = file_tail(stdout_log);
    let (stderr, stderr_bytes) = file_tail(stderr_log);
    Output { stdout, stderr, stdout_bytes, stderr_bytes }
}

/// What a guest wrote to its `stdout.log` and `stderr.log`, as a completion carries it;
/// why the runtime did not start it or stopped it (its program not found, its disk limit)
/// ends its stderr as a `lull:` line, unless the runtime already wrote its outcome there.
pub fn guest_output(info: &GuestInfo) -> Output {
    let Output { stdout, mut stderr, stdout_bytes, mut stderr_bytes } = written_output(&info.stdout_log, &info.stderr_log);
    let said = info.start_error.as_ref().is_some_and(|o| stderr.contains(&format!("lull: {}\n", o.describe())));
    if let Some(why) = info.failure.as_ref().filter(|_| !said) {
        let line = format!("lull: {why}\n");
        stderr_bytes += line.len() as u64;
        let mut tail = stderr.into_bytes();
        tail.extend_from_slice(line.as_bytes());
        stderr = lull_protocol::output_tail(&tail);
    }
    Output { stdout, stderr, stdout_bytes, stderr_bytes }
}

/// What a running guest wrote, shipped with its lease renewals (`lull jobs output
/// --follow`): a renewal carries the tails (at most [`lull_protocol::OUTPUT_TAIL_MAX`]
/// of each stream) only when the guest wrote more since the last tails shipped, so a
/// quiet guest costs nothing and a chatty one at most 128 KiB per renewal.
#[derive(Debug, Default)]
pub struct OutputShipper {
    /// The streams' sizes when their tails were last shipped (`None`: nothing shipped,
    /// or the last renewal failed).
    shipped: Option<(u64, u64)>,
}

impl OutputShipper {
    /// The tails to send with the next renewal, if the guest in `dir` wrote more.
    pub fn next(&mut self, dir: &GuestDir) -> Option<Output> {
        let size = |p: std::path::PathBuf| std::fs::metadata(p).map_or(0, |m| m.len());
        let now = (size(dir.stdout()), size(dir.stderr()));
        if self.shipped == Some(now) || (self.shipped.is_none() && now == (0, 0)) {
            return None;
        }
        let out = written_output(&dir.stdout(), &dir.stderr());
        self.shipped = Some((out.stdout_bytes, out.stderr_bytes));
        Some(out)
    }

    /// The renewal carrying the last tails failed: send them again next time.
    pub fn unsent(&mut self) {
        self.shipped = None;
    }
}

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
/// How often a running task's lease is renewed (the coordinator's default TTL is 60 s),
/// which is also how soon a cancel reaches the guest and how often a changed checkpoint
/// is uploaded. `LULL_PROGRESS_MS` (200 to 30,000) overrides it, for tests.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);
/// The first renewal comes this soon after the guest is handed over, so that a job
/// cancelled (or a gang re-queued) just as it was leased stops early.
const PROGRESS_FIRST: Duration = Duration::from_secs(5);
/// How often a halted gang member renews (and so learns its gang is whole again).
const HALT_POLL: Duration = Duration::from_secs(1);
/// How long a gang member (a lease with `machines` > 1) waits for every rank of its gang
/// to be leased before giving its lease back ("gang did not fill"), so that a gang bigger
/// than the free machines does not hold this one idle: the coordinator re-queues the
/// gang (its leased peers too) and it is tried again later. Two lease TTLs: long enough
/// for the other ranks' agents to come back from their long-polls.
pub const GANG_FILL_TIMEOUT: Duration = Duration::from_secs(120);
/// The gang is asked again this soon first, then each wait is 1.5 times the last, up to
/// [`GANG_POLL_MAX`] — which bounds how far apart the members of a filled gang start.
const GANG_POLL_FIRST: Duration = Duration::from_millis(500);
const GANG_POLL_MAX: Duration = Duration::from_secs(2);

/// The renewal interval: [`PROGRESS_EVERY`], or `LULL_PROGRESS_MS` when it is set to a
/// whole number of milliseconds from 200 to 30,000 (anything else is refused with a
/// warning naming it, and the default kept).
fn progress_every() -> Duration {
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
async fn retry<T, F, Fut>(what: &str, mut call: F) -> Option<T>
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

/// What the link needs to run leased tasks: the driver's job channel and how many tasks
/// may run at once (`guests.max_jobs`).
#[derive(Clone, Debug)]
pub struct JobLink {
    pub jobs: mpsc::Sender<JobMsg>,
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
    running: &RunningTasks,
    jobs: mpsc::Sender<JobMsg>,
    mut accepting: tokio::sync::watch::Receiver<bool>,
    health: HealthSender,
) {
    let mut backoff = Duration::from_secs(1);
    let mut link = health.subscribe();
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
                    run_task(client, paths, running, &jobs, &accepting, task).await;
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
fn note_refused(health: &HealthSender, url: &str, e: &ClientError) {
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
const REFUSED_RETRY_FIRST: Duration = Duration::from_secs(30);
const REFUSED_RETRY_MAX: Duration = Duration::from_secs(600);
/// …and `coordinator.json` is looked at this often meanwhile (no request): a new
/// credential for this machine is tried at once.
const CREDENTIALS_LOOK: Duration = Duration::from_secs(15);

/// Waits up to `wait` while the credential is refused, returning early when
/// `coordinator.json` holds a new secret for this coordinator (then in use).
async fn wait_for_credential(paths: &Paths, client: &CoordinatorClient, wait: Duration) {
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
async fn run_task(
    client: &CoordinatorClient,
    paths: &Paths,
    running: &RunningTasks,
    jobs: &mpsc::Sender<JobMsg>,
    accepting: &tokio::sync::watch::Receiver<bool>,
    task: Lease,
) {
    tracing::info!(job = task.job_id, rank = task.rank, lease = task.lease, "task leased");
    let spec = match guest_spec(&task, &paths.work_root()) {
        Ok(s) => s,
        Err(why) => {
            tracing::warn!(job = task.job_id, "cannot run the task: {why}");
            let outcome = TaskOutcome::StartFailed { error: format!("cannot run the task: {why}") };
            let stderr = lull_protocol::output_tail(format!("lull: {}\n", outcome.describe()).as_bytes());
            let output = Output { stderr_bytes: stderr.len() as u64, stderr, ..Output::default() };
            retry("reporting an unrunnable task", || client.complete(&task, &outcome, 0.0, 0.0, Some(output.clone()))).await;
            return;
        }
    };
    let checkpoint = spec.job_dir.as_ref().filter(|_| spec.checkpointable).map(|d| crate::checkpoint::path_in(&GuestDir::new(d).work()));
    let mut uploaded = None;
    if let Some(path) = &checkpoint {
        match fetch_checkpoint(client, &task, path).await {
            Ok(stamp) => uploaded = stamp,
            Err(why) => {
                // Starting from nothing would redo what the checkpoint holds: give the
                // task back for another try instead.
                tracing::warn!(job = task.job_id, rank = task.rank, "task given back: {why}");
                let reason = format!("agent: {why}");
                retry("giving a task back", || client.not_started(&task, &reason)).await;
                return;
            }
        }
    }
    if task.machines > 1 {
        match wait_for_gang(client, &task, accepting, GANG_FILL_TIMEOUT).await {
            GangWait::Ready => {}
            GangWait::GiveBack(why) => {
                tracing::info!(job = task.job_id, rank = task.rank, "gang member gives its lease back: {why}");
                retry("giving a task back", || client.not_started(&task, &why)).await;
                return;
            }
            GangWait::Gone(why) => {
                tracing::info!(job = task.job_id, rank = task.rank, "gang member not started: {}", why.as_str());
                return;
            }
        }
    }
    let dir = GuestDir::new(spec.job_dir.clone().unwrap_or_default());
    let (started_tx, started_rx) = oneshot::channel();
    let (ended_tx, ended_rx) = oneshot::channel();
    // A gang rank is not moved on request (its peers would have to halt for it).
    let (migration_tx, mut migration_rx) = mpsc::channel::<MigrationAsk>(1);
    let migration = (task.machines <= 1).then_some(migration_tx);
    let started = match jobs.send(JobMsg::Run(JobRequest { spec, started: started_tx, ended: ended_tx, migration })).await {
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
            _ = async { if halted { halt_poll.tick().await } else { renew.tick().await } }, if stopped.is_none() => match renewal(client.progress(&task, shipper.next(&dir)).await) {
                Ok(halt) => {
                    if halt != halted {
                        tracing::info!(job = task.job_id, rank = task.rank, guest = %guest, "{}", if halt {
                            "gang halted (a member was lost): guest frozen until it is replaced"
                        } else {
                            "gang whole again: guest thawed"
                        });
                        if jobs.send(JobMsg::Hold { guest: guest.clone(), hold: halt }).await.is_err() {
                            break None;
                        }
                        halted = halt;
                        halt_poll.reset();
                    }
                    if let Some(path) = &checkpoint {
                        upload_checkpoint(client, &task, path, &mut uploaded, false).await;
                    }
                }
                Err(None) => shipper.unsent(),
                Err(Some(why)) => {
                    tracing::info!(job = task.job_id, rank = task.rank, guest = %guest, "{}: stopping its guest", why.as_str());
                    stopped = Some(why);
                    if jobs.send(JobMsg::Stop { guest: guest.clone() }).await.is_err() {
                        break None;
                    }
                }
            },
            // The driver froze the lingering guest and asks whether it should move.
            Some(ask) = migration_rx.recv(), if stopped.is_none() => {
                let outcome = ask_migration(client, &task, checkpoint.as_deref(), &mut uploaded, &ask).await;
                if matches!(outcome, MigrationOutcome::Migrated(_)) {
                    // Given back by the coordinator: the driver kills the guest, and
                    // nothing more is reported (no eviction, no completion).
                    stopped = Some(Stopped::Migrated);
                }
                if jobs.send(JobMsg::MigrationAnswered { guest: guest.clone(), outcome }).await.is_err() {
                    break None;
                }
            },
        }
    };
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

/// The shortest time between two heartbeats sent early, on a flip of acceptance.
const MIN_BEAT_SPACING: Duration = Duration::from_secs(1);

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
    health: Option<HealthSender>,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<()> {
    let client = CoordinatorClient::new(&creds)?;
    let health = health.unwrap_or_else(|| Arc::new(tokio::sync::watch::channel(LinkHealth::Working).0));
    let ledger = Mutex::new(Ledger::open(&paths.ledger)?);
    let s_b = tokio::task::spawn_blocking(base_speed).await.unwrap_or(0.0);
    tracing::info!(url = %creds.url, agent = %creds.agent_id, base_speed = s_b, "linked to coordinator");
    let running = RunningTasks::default();
    if jobs.is_some() {
        // A new run holds no lease: what an earlier run of this agent held goes back now,
        // not when its lease expires. Before any slot leases anything.
        match tokio::time::timeout(Duration::from_secs(10), client.give_back_all()).await {
            Ok(Ok(n)) if n > 0 => tracing::info!(tasks = n, "gave back the tasks an earlier run of this agent held"),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!("could not give back an earlier run's tasks (their leases expire instead): {e}"),
            Err(_) => tracing::warn!("giving back an earlier run's tasks timed out (their leases expire instead)"),
        }
    }
    let linked_jobs = jobs.is_some();
    // A flip of whether the machine takes guest work (a `lull donate`, the owner back)
    // is heartbeated at once, so that what the pool says of this machine (a queued job's
    // "why it waits") is not a beat interval old.
    let mut flipped = jobs.as_ref().map(|j| j.accepting.clone());
    let beat = async {
        let mut reporter = MemoryReporter::default();
        let mut interval = Duration::from_secs(10);
        let mut backoff = Duration::from_secs(1);
        let mut refused_wait = REFUSED_RETRY_FIRST;
        // The owner-load readings from this number on have not reached the coordinator.
        let mut load_from = 0u64;
        loop {
            let socket = paths.socket.clone();
            let status = tokio::task::spawn_blocking(move || control::call(&socket, &Request::Status)).await;
            let mut ok = true;
            let mut refused = None;
            if let Ok(Ok(Response::Status(st))) = status {
                let memory = st.guest_memory.as_ref().map(|m| {
                    let tasks = running.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    reporter.report(m, &tasks)
                });
                let (hb, next) = heartbeat_from(&st, s_b, free_memory(), load_from, memory);
                match client.heartbeat(&hb).await {
                    Ok(i) => {
                        interval = i;
                        load_from = next;
                    }
                    Err(e) if e.credential_refused() => refused = Some(e),
                    Err(e) => {
                        ok = false;
                        tracing::warn!("heartbeat failed: {e}");
                    }
                }
            }
            if refused.is_none() {
                match client.sync_outbox(&ledger).await {
                    Ok(s) if s.sent > 0 => tracing::info!(records = s.sent, "ledger records synced"),
                    Ok(_) => {}
                    Err(e) if e.credential_refused() => refused = Some(e),
                    Err(e) => {
                        ok = false;
                        tracing::warn!("record sync failed (kept in the ledger): {e}");
                    }
                }
            }
            if let Some(e) = refused {
                // Asked again rarely (and at once for a new coordinator.json), not every beat.
                note_refused(&health, &client.base, &e);
                wait_for_credential(&paths, &client, refused_wait).await;
                refused_wait = (refused_wait * 2).min(REFUSED_RETRY_MAX);
                continue;
            }
            refused_wait = REFUSED_RETRY_FIRST;
            if ok && *health.borrow() != LinkHealth::Working {
                tracing::info!("the coordinator accepts this machine's credential again");
                health.send_replace(LinkHealth::Working);
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
    };
    let work = async {
        match jobs {
            Some(link) => {
                // Dropped at shutdown, the set aborts its slots.
                let mut slots = tokio::task::JoinSet::new();
                for _ in 0..link.max_jobs.max(1) {
                    let (client, paths, jobs, accepting) = (client.clone(), paths.clone(), link.jobs.clone(), link.accepting.clone());
                    let (running, health) = (running.clone(), health.clone());
                    slots.spawn(async move { run_jobs(&client, &paths, &running, jobs, accepting, health).await });
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
    if linked_jobs {
        // Stopping: its guests are killed with it, so its tasks go back now (briefly:
        // a coordinator stopping too must not hold the agent up).
        if let Ok(Ok(n)) = tokio::time::timeout(Duration::from_secs(2), client.give_back_all()).await {
            if n > 0 {
                tracing::info!(tasks = n, "stopping: the tasks this agent held went back to the queue");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::{GuestMemoryReading, GuestsMemory};

    /// A one-shot HTTP server on a real socket that answers every request with `head`
    /// and then `body_bytes` bytes of body (chunked when `head` declares no length).
    async fn serve(head: &'static str, body_bytes: usize) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut req = vec![0u8; 64 << 10];
                    let _ = s.read(&mut req).await;
                    let _ = s.write_all(head.as_bytes()).await;
                    let chunked = head.contains("chunked");
                    let chunk = vec![b' '; 64 << 10];
                    let mut left = body_bytes;
                    while left > 0 {
                        let n = left.min(chunk.len());
                        let framed = if chunked {
                            [format!("{n:x}\r\n").into_bytes(), chunk[..n].to_vec(), b"\r\n".to_vec()].concat()
                        } else {
                            chunk[..n].to_vec()
                        };
                        if s.write_all(&framed).await.is_err() {
                            return;
                        }
                        left -= n;
                    }
                    if chunked {
                        let _ = s.write_all(b"0\r\n\r\n").await;
                    }
                });
            }
        });
        url
    }

    fn client(url: &str) -> CoordinatorClient {
        CoordinatorClient::new(&Credentials { url: url.into(), agent_id: "a".into(), secret: "s".into(), machine: None, owner: None })
            .expect("client")
    }

    fn lease() -> Lease {
        serde_json::from_str(r#"{"job_id":7,"rank":0,"lease":3,"expires_ms":1,"machines":1,"program":"sh","spec":{"command":"/bin/sh","args":[],"env":{},"inputs":{}},"mem_bytes":0,"checkpointable":true}"#).expect("lease")
    }

    #[tokio::test]
    async fn answers_beyond_the_protocols_limits_are_refused_unread() {
        // Declared too large: refused before a byte of the body is read.
        let url = serve("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2000000\r\n\r\n", 0).await;
        let e = client(&url).lease(1, Duration::from_millis(1)).await.expect_err("too large");
        assert!(matches!(e, ClientError::TooLarge { size: Some(2_000_000), .. }), "{e:?}");
        // Sent chunked past the limit: refused once the limit is passed.
        let url = serve("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n", ANSWER_MAX + 1).await;
        let e = client(&url).lease(1, Duration::from_millis(1)).await.expect_err("too large");
        assert!(matches!(e, ClientError::TooLarge { size: None, max } if max == ANSWER_MAX), "{e:?}");
        assert!(e.to_string().contains(&ANSWER_MAX.to_string()), "{e}");
        // A checkpoint may be 64 MiB, not a byte more.
        let url =
            serve("HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ntransfer-encoding: chunked\r\n\r\n", CHECKPOINT_MAX + 1)
                .await;
        let e = client(&url).get_checkpoint(&lease()).await.expect_err("too large");
        assert!(matches!(e, ClientError::TooLarge { max: CHECKPOINT_MAX, .. }), "{e:?}");
        let url = serve("HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: 1000\r\n\r\n", 1000).await;
        assert_eq!(client(&url).get_checkpoint(&lease()).await.expect("a checkpoint").map(|d| d.len()), Some(1000));
    }

    #[tokio::test]
    async fn a_401_is_a_refused_credential_with_the_coordinators_reason_and_code() {
        let body = r#"{"error":"unknown credential","code":"machine_removed"}"#;
        let head = format!("HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}", body.len());
        let url = serve(Box::leak(head.into_boxed_str()), 0).await;
        let hb = serde_json::json!({"state": "idle", "available": true, "budget_left": 5, "free_mem_bytes": 1, "base_speed": 1.0, "current_speed": 1.0});
        let e = client(&url).heartbeat(&serde_json::from_value(hb).expect("hb")).await.expect_err("refused");
        assert!(e.credential_refused(), "{e:?}");
        assert!(
            matches!(&e, ClientError::Refused { message, code: Some(c), .. } if message == "unknown credential" && c == "machine_removed"),
            "{e:?}"
        );
        let health: HealthSender = Arc::new(tokio::sync::watch::channel(LinkHealth::Working).0);
        note_refused(&health, &url, &e);
        let a = health.borrow().alert().expect("said");
        assert!(a.message.contains("unknown credential") && a.message.contains(&url), "{a:?}");
        assert!(a.action.as_deref().is_some_and(|x| x.contains("removed this machine") && x.contains("--token")), "{a:?}");
        let replaced = LinkHealth::refused(&url, "replaced", Some("credential_replaced")).alert().expect("said");
        assert!(replaced.action.as_deref().is_some_and(|x| x.contains("admin key")), "{replaced:?}");
        assert_eq!(LinkHealth::Working.alert(), None);
    }

    #[test]
    fn a_lease_with_too_many_or_too_large_inputs_is_not_written() {
        let root = tempfile::tempdir().expect("dir");
        let mut t = lease();
        t.spec.inputs = (0..=INPUTS_MAX).map(|i| (format!("in{i}"), String::new())).collect();
        let e = guest_spec(&t, root.path()).expect_err("too many");
        assert!(e.contains("65 input files") && e.contains("64"), "{e}");
        t.spec.inputs = [("big".to_string(), "x".repeat(VALUE_MAX + 1))].into();
        let e = guest_spec(&t, root.path()).expect_err("too large");
        assert!(e.contains("\"big\"") && e.contains(&VALUE_MAX.to_string()), "{e}");
        assert!(!root.path().join("jobs").exists(), "nothing written");
        t.spec.inputs = [("ok".to_string(), "x".repeat(VALUE_MAX))].into();
        let spec = guest_spec(&t, root.path()).expect("at the limit");
        assert_eq!(
            std::fs::metadata(GuestDir::new(spec.job_dir.expect("dir")).work().join("ok")).expect("written").len(),
            VALUE_MAX as u64
        );
    }

    #[test]
    fn lease_polls_wait_15_to_25_s_spread_evenly_and_within_the_coordinators_limit() {
        let waits: Vec<u64> =
            (0..10_000u64).map(|i| lease_wait(i.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(17)).as_millis() as u64).collect();
        assert_eq!((lease_wait(0), lease_wait(10_000)), (Duration::from_secs(15), Duration::from_secs(25)));
        assert!(waits.iter().all(|w| (15_000..=25_000).contains(w)), "outside 15–25 s");
        assert!(*waits.iter().max().unwrap() <= lull_protocol::MAX_LEASE_WAIT_MS as u64);
        // Evenly: each 2.5-s quarter of the range holds about a quarter of the polls, and
        // the mean is the fixed wait it replaces (so the rate of polls is unchanged).
        for q in 0..4u64 {
            let n = waits.iter().filter(|w| (*w - 15_000) * 4 / 10_001 == q).count();
            assert!((2_200..=2_800).contains(&n), "quarter {q} holds {n} of 10,000");
        }
        let mean = waits.iter().sum::<u64>() as f64 / waits.len() as f64;
        assert!((mean - LEASE_WAIT.as_millis() as f64).abs() < 200.0, "mean {mean} ms");
    }

    #[test]
    fn the_memory_report_names_tasks_and_turns_counters_into_rates() {
        let reading = |age_ms, faults, io| GuestsMemory {
            available_bytes: 5 << 30,
            guest_memory_bytes: 2 << 30,
            pressure: false,
            guests: vec![
                GuestMemoryReading { id: "g1".into(), working_set_bytes: 64 << 20, major_faults: faults, io_bytes: io, age_ms },
                GuestMemoryReading { id: "local".into(), working_set_bytes: 1, major_faults: 0, io_bytes: None, age_ms: 1 },
            ],
        };
        let tasks: HashMap<String, (i64, u32)> = [("g1".to_string(), (7, 0))].into();
        let mut r = MemoryReporter::default();
        // First report: since the guest started (10 s, 50 faults, 1000 bytes).
        let a = r.report(&reading(10_000, 50, Some(1000)), &tasks);
        assert_eq!((a.available_bytes, a.guest_memory_bytes, a.guests.len()), (5 << 30, 2 << 30, 1), "only leased tasks' guests: {a:?}");
        let g = &a.guests[0];
        assert_eq!((g.job_id, g.rank, g.working_set_bytes, g.age_s), (7, 0, 64 << 20, 10.0));
        assert_eq!((g.major_faults_per_s, g.io_bytes_per_s), (5.0, Some(100.0)));
        // Then since the previous report: 30 faults and 600 bytes in 2 s.
        let b = r.report(&reading(12_000, 80, Some(1600)), &tasks);
        assert_eq!((b.guests[0].major_faults_per_s, b.guests[0].io_bytes_per_s), (15.0, Some(300.0)));
        // No time passed (a frozen guest): no rate, not a division by zero.
        let c = r.report(&reading(12_000, 90, None), &tasks);
        assert_eq!((c.guests[0].major_faults_per_s, c.guests[0].io_bytes_per_s), (0.0, None));
    }
}
