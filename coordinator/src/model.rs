//! The wire types of the coordinator's HTTP API (JSON), shared by the server, the
//! OpenAPI document and the clients (`lull submit`, the dashboard). The types an agent
//! sends and reads (enrolment, heartbeats, records, leases and task reports) live in the
//! `lull-protocol` crate, shared with the agent's coordinator client, and are re-exported
//! here; this module keeps the admin, job, pool and report types.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use utoipa::ToSchema;

pub use lull_protocol::{
    Completion, CompletionAck, EnrolRequest, Enrolment, ErrorBody, Gang, GivenBack, GuestMemory, Heartbeat, HeartbeatAck, JobSpec, Lease,
    LeaseRequest, MemoryReport, MigrateAnswer, MigrateRequest, Output, Progress, ProgressAck, Record, RecordBatch, RecordsAck, Task,
    TaskOutcome, TaskRelease, OUTPUT_TAIL_MAX,
};

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
    /// What lists show and `DELETE /api/v1/join-tokens/{id}` takes (12 hex digits of the
    /// token's SHA-256).
    #[serde(default)]
    pub id: String,
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
    /// What lists show and `DELETE /api/v1/keys/{id}` takes (12 hex digits of the key's
    /// SHA-256).
    #[serde(default)]
    pub id: String,
    pub key: String,
    pub role: String,
    pub owner: Option<String>,
}

/// A join token as listed (`GET /api/v1/join-tokens`): never the token itself.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct JoinTokenInfo {
    pub id: String,
    pub created_ms: i64,
    pub expires_ms: i64,
    /// How many enrolments it was made for (unknown for tokens made before lists).
    pub uses: Option<u32>,
    pub uses_left: u32,
    pub revoked_ms: Option<i64>,
    /// `active`, `spent`, `expired` or `revoked`.
    pub state: String,
    /// Each use: enrolments and refused attempts, oldest first (at most 1000 kept).
    pub used: Vec<TokenUse>,
}

/// One use of a join token.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct TokenUse {
    pub at_ms: i64,
    /// The caller's address (`IP:port`; behind a reverse proxy, the proxy's).
    pub addr: String,
    /// `enrolled`, or `refused: <code>` (for example an attempt to take over an
    /// enrolled machine).
    pub outcome: String,
    pub agent_id: Option<String>,
    pub owner: Option<String>,
    pub machine: Option<String>,
}

/// An API key as listed (`GET /api/v1/keys`): never the key itself.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct ApiKeyInfo {
    pub id: String,
    /// `admin` or `owner`.
    pub role: String,
    pub owner: Option<String>,
    pub created_ms: i64,
    pub revoked_ms: Option<i64>,
    /// `active` or `revoked`.
    pub state: String,
    /// Requests made with it, in all.
    pub uses: u64,
    pub last_used_ms: Option<i64>,
    /// Its uses per address, most recent first.
    pub used_from: Vec<KeyUse>,
}

/// An API key's uses from one address.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct KeyUse {
    /// The caller's address (`IP:port`; behind a reverse proxy, the proxy's).
    pub addr: String,
    pub first_ms: i64,
    pub last_ms: i64,
    pub uses: u64,
}

/// A job submission. Limits (`lull_protocol::limits`; 400 naming the field, 413 for the
/// whole): command ≤ 4096 bytes; at most 1024 args of ≤ 64 KiB each; at most 256 env
/// variables and 64 input files, names ≤ 256 bytes, values and files ≤ 256 KiB; the spec
/// as stored ≤ 1 MiB of JSON (and the request body ≤ 1 MiB).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitJob {
    /// The program to run (1–4096 bytes).
    pub command: String,
    /// Its arguments (at most 1024, each ≤ 64 KiB).
    #[serde(default)]
    pub args: Vec<String>,
    /// Its environment (at most 256 variables; names ≤ 256 bytes, values ≤ 256 KiB).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Input files: name → content (UTF-8), shipped with the job (at most 64; names ≤ 256
    /// bytes, contents ≤ 256 KiB).
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
    /// Your runtime estimate in seconds on an idle reference machine (base speed 1.0),
    /// used only while the program has no history (0–31536000).
    #[serde(default)]
    pub estimate_s: Option<f64>,
}

fn one() -> u32 {
    1
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
    /// `queued`, `running`, `completed` (every rank exited 0), `failed` (a rank ran and
    /// failed: see `reason`), `cancelled` or `lost` (a rank's retries were used up).
    pub state: String,
    pub created_ms: i64,
    pub finished_ms: Option<i64>,
    /// Why it ended so (failed, lost, cancelled): "program not found: NAME", "exit code
    /// 3", "killed by SIGKILL", "cancelled by alice"; null otherwise.
    #[serde(default)]
    pub reason: Option<String>,
    /// How its ranks ended: the exit code or the signal's name (`SIGKILL`), one word
    /// when the ranks agree, else each rank's joined with commas; null before any ended
    /// and for a program that never ran (see `reason`).
    #[serde(default)]
    pub exit: Option<String>,
    pub tasks: Vec<Task>,
    /// The scheduler's latest placement of this job (null before the first).
    #[serde(default)]
    pub placement: Option<Placement>,
    /// A queued job: why it waits, said now from the pool's machines as this viewer
    /// may see them.
    #[serde(default)]
    pub waiting: Option<Waiting>,
    /// Whether this viewer may cancel it now (its submitter or an admin, while it is
    /// queued or running).
    #[serde(default)]
    pub may_cancel: bool,
}

/// Why a queued job waits.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Waiting {
    /// In words: "no machine idle — vm: owner active (CPU 99 %)", "needs 5 machines,
    /// the pool has 1".
    pub reason: String,
    /// The pool as it is can never run it (more machines than are enrolled, more memory
    /// than any machine offers guests): it waits until that changes.
    pub cannot_run: bool,
}

/// Where and why the scheduler placed a job, and what it predicted.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct Placement {
    /// The machines (agent ids), one per rank placed.
    pub agents: Vec<String>,
    /// Their names, as enrolled (same order).
    pub machines: Vec<String>,
    /// The pool's algorithm (`fifo`, `first_fit`, `random`, `spt`, `lpt`, `backfill`).
    pub algorithm: String,
    /// Why this job, here, now.
    pub reason: String,
    /// Where the prediction came from: `history`, `userestimate` or `default`.
    pub prediction_source: String,
    /// Predicted wall time on these machines, seconds.
    pub predicted_runtime_s: f64,
    pub placed_ms: i64,
    /// Actual wall time since this placement, once the job ended (seconds).
    pub actual_runtime_s: Option<f64>,
}

/// What a job's tasks wrote: `GET /api/v1/jobs/{id}/output`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct JobOutput {
    pub job_id: i64,
    /// The job's state (as [`Job::state`]).
    pub state: String,
    /// Why it ended so (as [`Job::reason`]).
    #[serde(default)]
    pub reason: Option<String>,
    /// One entry per rank.
    pub tasks: Vec<TaskOutput>,
}

/// One rank's output: the tails its agent sent with its renewals while it ran, and with
/// its completion.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct TaskOutput {
    pub rank: u32,
    pub state: String,
    pub agent_id: Option<String>,
    /// The machine's name.
    #[serde(default)]
    pub machine: Option<String>,
    pub exit_code: Option<i64>,
    #[serde(default)]
    pub signal: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// Null until the rank's guest has written something its agent sent (and for
    /// agents that send no output).
    pub output: Option<Output>,
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
    /// Why it takes no guest work now, in words ("owner active (CPU 99 %)", "paused by its
    /// owner", "offline (not heard from lately)"); null when it is ready for work.
    #[serde(default)]
    pub why: Option<String>,
}

/// A machine removed from the pool (`DELETE /api/v1/agents/{id}`).
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema, PartialEq)]
pub struct MachineRemoved {
    pub id: String,
    pub owner: String,
    pub machine: String,
    /// Tasks it held, given back to the queue.
    pub tasks_requeued: u32,
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
    /// Jobs by state (`queued`, `running`, `completed`, `failed`, `cancelled`, `lost`).
    pub jobs: BTreeMap<String, u32>,
}

/// How well the scheduler predicts one program's runtime (seed 002 §4):
/// `GET /api/v1/predictions`.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ProgramPrediction {
    pub program: String,
    /// Completed jobs recorded.
    pub completed: u64,
    /// The current prediction: the mean normtime of the last two runs, seconds at speed 1.
    pub predicted_normtime_s: Option<f64>,
    /// Mean absolute relative error of the normtime predictions jobs were placed with.
    pub mean_error: Option<f64>,
    /// The same for the last-two average (Tsafrir's baseline).
    pub mean_error_last_two: Option<f64>,
    /// The same for WINNER's exponential average.
    pub mean_error_exp_average: Option<f64>,
    /// Mean absolute relative error of the predicted wall time against the actual one.
    pub mean_runtime_error: Option<f64>,
}

impl From<lull_core::sched::ProgramStats> for ProgramPrediction {
    fn from(s: lull_core::sched::ProgramStats) -> Self {
        ProgramPrediction {
            program: s.program,
            completed: s.completed,
            predicted_normtime_s: s.last_two_average_s,
            mean_error: s.mare_used,
            mean_error_last_two: s.mare_last_two,
            mean_error_exp_average: s.mare_exp_average,
            mean_runtime_error: s.mare_runtime,
        }
    }
}
