//! The HTTP client of the coordinator protocol (reqwest with rustls): [`CoordinatorClient`]
//! and its calls (heartbeat, records, lease, progress, migrate, complete, checkpoints,
//! gang), enrolment with a join token ([`enrol`]), the saved [`Credentials`], and the
//! bounds on what an answer may hold. Each call is one request; retrying is the caller's.

use super::machine::machine_cpus;
use crate::ledger::{Ledger, LedgerError};
use crate::paths::Paths;
use lull_protocol::limits::JSON_BODY_MAX;
use lull_protocol::{
    Completion, CompletionAck, EnrolRequest, Enrolment, ErrorBody, Gang, Heartbeat, HeartbeatAck, Lease, LeaseRequest, MigrateAnswer,
    MigrateRequest, Output, Progress, ProgressAck, Record, RecordBatch, RecordsAck, Task, TaskOutcome, TaskRelease, CHECKPOINT_MAX,
};
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

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
    #[error(transparent)]
    DriverGone(#[from] crate::driver_link::DriverGone),
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

pub(crate) type Result<T> = std::result::Result<T, ClientError>;

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
        let err = |e: std::io::Error| ClientError::Credentials { path: path.display().to_string(), message: e.to_string() };
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension("json.tmp");
        let mut f = crate::sys::fs::create_mode(std::fs::OpenOptions::new().write(true).create(true).truncate(true), 0o600)
            .open(&tmp)
            .map_err(err)?;
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

/// Where [`CoordinatorClient::sync_outbox`] reads the ledger's outbox: the agent's
/// driver (through its handle, in the link) or a ledger of one's own (in tests).
pub trait Outbox {
    /// Up to `max` records not yet acknowledged, oldest first.
    fn pending(&self, max: usize) -> impl std::future::Future<Output = Result<Vec<Record>>> + Send;
    /// Marks every record up to `through` sent.
    fn acked(&self, through: i64) -> impl std::future::Future<Output = Result<()>> + Send;
}

impl Outbox for Mutex<Ledger> {
    async fn pending(&self, max: usize) -> Result<Vec<Record>> {
        Ok(self.lock().unwrap_or_else(|e| e.into_inner()).outbox_pending(max)?)
    }
    async fn acked(&self, through: i64) -> Result<()> {
        Ok(self.lock().unwrap_or_else(|e| e.into_inner()).outbox_acked(through)?)
    }
}

/// Records per request (the coordinator takes up to 1000).
pub const SYNC_BATCH: usize = 500;

/// A client for one enrolled agent. Its clones share the secret, which the link
/// replaces when `coordinator.json` gets a new one for this machine.
#[derive(Clone, Debug)]
pub struct CoordinatorClient {
    http: reqwest::Client,
    pub(crate) base: String,
    secret: Arc<std::sync::RwLock<String>>,
}

fn http() -> Result<reqwest::Client> {
    Ok(reqwest::Client::builder().timeout(Duration::from_secs(40)).connect_timeout(Duration::from_secs(5)).build()?)
}

/// Room for what an answer wraps around a job's spec (ids, lease, names), and the most
/// of an error answer read.
pub(crate) const ANSWER_ENVELOPE_MAX: usize = 64 << 10;
/// The most an answer other than a checkpoint may hold: a lease carries a job's spec,
/// which the coordinator took in a request of at most [`JSON_BODY_MAX`].
pub(crate) const ANSWER_MAX: usize = JSON_BODY_MAX + ANSWER_ENVELOPE_MAX;

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
    pub async fn sync_outbox(&self, ledger: &impl Outbox) -> Result<SyncStats> {
        let mut stats = SyncStats::default();
        loop {
            let pending = ledger.pending(SYNC_BATCH).await?;
            if pending.is_empty() {
                return Ok(stats);
            }
            let (sent, last) = (pending.len(), pending.last().map_or(0, |r| r.seq));
            let acked = self.post_records(pending).await?;
            ledger.acked(acked.min(last)).await?;
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
