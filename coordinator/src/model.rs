//! The wire types of the coordinator's HTTP API (JSON), shared by the server, the
//! OpenAPI document and the clients (`lull submit`, the agent's coordinator client).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

/// An error answer: `{"error": "..."}` with a 4xx (or, for a real server fault, 5xx) status.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: String,
}

/// Admin: create a join token.
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateJoinToken {
    /// How many agents may enrol with it (default 1, at most 100000).
    #[serde(default)]
    pub uses: Option<u32>,
    /// Seconds until it expires (default 7 days, at most 365 days).
    #[serde(default)]
    pub ttl_s: Option<u32>,
}

/// A join token, shown once.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct JoinToken {
    pub token: String,
    pub uses: u32,
    pub expires_ms: i64,
}

/// Admin: create an API key for an admin or an owner.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    /// `admin` or `owner`.
    pub role: String,
    /// The owner's name (for `owner` keys).
    #[serde(default)]
    pub owner: Option<String>,
}

/// An API key, shown once.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ApiKey {
    pub key: String,
    pub role: String,
    pub owner: Option<String>,
}

/// An agent enrols with a join token and its owner's name.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnrolRequest {
    pub token: String,
    /// The owner of the workstation (1–128 characters).
    pub owner: String,
    /// The machine's name as shown in reports (1–128 characters).
    pub machine: String,
}

/// The agent's identity and secret (shown once; the coordinator keeps only its hash).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Enrolment {
    pub agent_id: String,
    pub secret: String,
}

/// An agent's periodic report of its state.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// The policy state (`owner_active`, `idle`, `recruitable`, `donating`, …).
    pub state: String,
    /// Whether the machine is available for guest work now.
    pub available: bool,
    /// Interruptions left in today's budget.
    pub budget_left: u32,
    /// Free memory guests may use, in bytes.
    pub free_mem_bytes: u64,
    /// Base speed S_b from the standard benchmark at start (work units per second).
    pub base_speed: f64,
    /// Current speed S_c under owner load.
    pub current_speed: f64,
    /// The owner's daily interruption limit in force (sent by agents since the dashboard;
    /// older agents leave it out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruption_limit: Option<u32>,
}

/// The coordinator's answer to a heartbeat.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct HeartbeatAck {
    /// When to send the next heartbeat.
    pub next_heartbeat_s: u32,
}

/// A job submission.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Input files: name → content (UTF-8), shipped with the job.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Memory request in bytes; only agents with this much free memory lease it.
    #[serde(default)]
    pub mem_bytes: u64,
    #[serde(default)]
    pub checkpointable: bool,
    /// Program name, for runtime prediction (defaults to the command's file name).
    #[serde(default)]
    pub program: Option<String>,
    /// Machines to gang-start on (1 = sequential job).
    #[serde(default = "one")]
    pub machines: u32,
    /// Retries after failures or lost leases (default 3, at most 100).
    #[serde(default)]
    pub max_retries: Option<u32>,
}

fn one() -> u32 {
    1
}

/// What a job runs (stored as JSON).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct JobSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub inputs: BTreeMap<String, String>,
}

/// A job and its tasks.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Job {
    pub id: i64,
    pub submitter: String,
    pub program: String,
    pub spec: JobSpec,
    pub mem_bytes: u64,
    pub checkpointable: bool,
    pub machines: u32,
    pub max_retries: u32,
    /// `queued`, `running`, `completed`, `failed` or `cancelled`.
    pub state: String,
    pub created_ms: i64,
    pub finished_ms: Option<i64>,
    pub tasks: Vec<Task>,
}

/// One rank of a job, as leased to one agent.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Task {
    pub rank: u32,
    /// `queued`, `leased`, `completed`, `failed` or `cancelled`.
    pub state: String,
    pub agent_id: Option<String>,
    pub lease: i64,
    pub attempts: u32,
    pub evictions: u32,
    pub exit_code: Option<i64>,
    pub user_cpu_s: Option<f64>,
    pub sys_cpu_s: Option<f64>,
}

/// An agent asks for work.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// Free memory for guests, in bytes: only jobs that fit are leased.
    pub free_mem_bytes: u64,
    /// Long-poll: wait up to this long for work (at most 30000).
    #[serde(default)]
    pub wait_ms: u32,
}

/// Work leased to an agent until `expires_ms` (renewed by progress reports).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Lease {
    pub job_id: i64,
    pub rank: u32,
    /// The lease epoch: quote it in progress, completion, failure and eviction.
    pub lease: i64,
    pub expires_ms: i64,
    pub machines: u32,
    pub program: String,
    pub spec: JobSpec,
    pub mem_bytes: u64,
    pub checkpointable: bool,
}

/// Progress on a leased task; renews the lease.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Progress {
    pub lease: i64,
    #[serde(default)]
    pub fraction: Option<f64>,
}

/// The answer to a progress report.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct ProgressAck {
    pub expires_ms: i64,
    /// The job was cancelled: stop the guest.
    pub cancel: bool,
}

/// A task finished (whatever its exit code).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Completion {
    pub lease: i64,
    pub exit_code: i32,
    /// CPU time the guest used, as measured by the OS.
    pub user_cpu_s: f64,
    pub sys_cpu_s: f64,
}

/// Whether a completion was counted now (`false`: it had been already; a retry).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct CompletionAck {
    pub counted: bool,
}

/// A task failed (the agent could not run it) or was evicted.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaskRelease {
    pub lease: i64,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A gang's readiness: every rank must be leased before any starts.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct Gang {
    pub machines: u32,
    pub leased: u32,
    pub ready: bool,
    /// Agent id per rank (null where not leased).
    pub agents: Vec<Option<String>>,
}

/// One ledger record of an agent, keyed by its sequence number.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub seq: i64,
    /// `donation` {guest, day, cpu_us, wall_ms}, `interruption` {day, number, limit, …},
    /// `linger` {day, linger_ms}; other kinds are stored and not counted.
    pub kind: String,
    #[schema(value_type = Object)]
    pub payload: serde_json::Value,
}

/// A batch of records (at most 1000).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordBatch {
    pub records: Vec<Record>,
}

/// Records up to this sequence number are stored (new or already).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RecordsAck {
    pub acked_through: i64,
    /// How many were new.
    pub stored: u32,
}

/// An enrolled machine.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct AgentInfo {
    pub id: String,
    pub owner: String,
    pub machine: String,
    pub enrolled_ms: i64,
    pub last_seen_ms: Option<i64>,
    pub heartbeat: Option<Heartbeat>,
}

/// One row of a donated-time report: a key (owner or machine) and a period (day or week).
#[derive(Clone, Debug, Default, Serialize, Deserialize, ToSchema, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ReportRow {
    /// The owner's name, or the machine's agent id.
    pub key: String,
    /// The machine's name (machine reports only).
    pub machine: Option<String>,
    /// The day (`YYYY-MM-DD`), or the Monday starting the week.
    pub period: String,
    pub cpu_s: f64,
    pub wall_s: f64,
    pub interruptions: u32,
    /// Sum over machines of each machine's daily limit in force.
    pub interruption_limit: u32,
    /// Fraction of the period the machines were available (heartbeat-observed).
    pub available_fraction: f64,
    pub jobs_completed: u32,
    pub evictions: u32,
    pub linger_s: f64,
}

/// A report.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Report {
    pub by: String,
    pub period: String,
    pub since: String,
    pub rows: Vec<ReportRow>,
}

/// Who is looking: what the dashboard shows depends on it.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Viewer {
    /// `admin` or `owner`.
    pub role: String,
    /// The owner's name (owner keys only).
    pub owner: Option<String>,
}

/// The pool at a glance: machines and jobs counted by state.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct PoolSummary {
    pub now_ms: i64,
    pub viewer: Viewer,
    /// A machine not heard from for this long counts as `offline`.
    pub offline_after_s: u32,
    pub machines_total: u32,
    /// Machines by their last reported policy state (`idle`, `donating`, `owner_active`,
    /// `paused`, …), `offline` (silent for `offline_after_s`) or `never_seen`.
    pub machines: BTreeMap<String, u32>,
    pub jobs_total: u32,
    /// Jobs by state (`queued`, `running`, `completed`, `failed`, `cancelled`).
    pub jobs: BTreeMap<String, u32>,
}
