//! The wire types between a Lull agent and its coordinator (JSON over HTTP): enrolment,
//! heartbeats, ledger records, leases and what an agent reports about a leased task.
//! The coordinator serves them (`coordinator::model` re-exports them beside its admin,
//! job and report types) and the agent's client (`agent_core::coordinator_client`) sends
//! and reads them, so both sides agree by construction.
//!
//! The serde attributes are the wire format: a change to one changes what old agents or
//! old coordinators read (the tests pin each type's JSON). Doc comments become the
//! descriptions of the OpenAPI document.
//!
//! Features: `openapi` derives `utoipa::ToSchema` (the coordinator's OpenAPI document;
//! the agent does not link utoipa), `ts` derives `ts_rs::TS` for the types the
//! dashboard's generated TypeScript reads (`Heartbeat`, `JobSpec`, `Task`).
//!
//! [`duration`] is the one duration grammar both sides read (`lull pause 90m`,
//! `GET /api/v1/reports?since=90m`).

// Product code handles its errors; `.unwrap()` is for tests (clippy.toml allows it there).
#![warn(clippy::unwrap_used)]

pub mod duration;
pub mod limits;
pub mod outcome;

pub use outcome::{signal_name, TaskOutcome, OUTCOME_TEXT_MAX};

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(test)]
mod tests;

// Errors (every endpoint)

/// An error answer: `{"error": "...", "code": "..."}` with a 4xx (or, for a real server
/// fault, 5xx) status. `error` is for people; `code`, where present, is one of
/// [`error_code`] for programs (an agent tells "my credential was replaced" from "the
/// coordinator is down" by it).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: String,
    /// A stable, machine-readable reason (see `error_code`); absent on most errors and
    /// from older coordinators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// The `code`s of [`ErrorBody`]. The 401 codes say why a credential no longer works, so
/// an agent can tell its owner what to do instead of retrying for ever.
pub mod error_code {
    /// 401: no `Authorization: Bearer …` header, or not a Lull credential.
    pub const CREDENTIAL_MISSING: &str = "credential_missing";
    /// 401: a well-formed credential the coordinator does not know (never issued here).
    pub const CREDENTIAL_UNKNOWN: &str = "credential_unknown";
    /// 401: this machine was enrolled again (its credential was replaced by a newer one,
    /// with the machine's own credential or an admin key): this agent is no longer it.
    pub const CREDENTIAL_REPLACED: &str = "credential_replaced";
    /// 401: the pool admin removed this machine from the pool.
    pub const MACHINE_REMOVED: &str = "machine_removed";
    /// 401: this API key was revoked.
    pub const KEY_REVOKED: &str = "key_revoked";
    /// 409 on enrolment: the owner already has a machine of this name (and `replace` was
    /// not asked).
    pub const MACHINE_EXISTS: &str = "machine_exists";
    /// 403 on enrolment: replacing an enrolled machine needs that machine's current
    /// credential or an admin key; a join token alone enrols new machines only.
    pub const REPLACE_NEEDS_CREDENTIAL: &str = "replace_needs_credential";
    /// 400 on `POST /api/v1/records`: a record claims what the machine could not have
    /// done (the message names the record, the field and the range). Resending it will
    /// not help.
    pub const RECORD_OUT_OF_RANGE: &str = "record_out_of_range";
    /// 413: a body, or a part of one, is over its size limit (the message names it).
    pub const TOO_LARGE: &str = "too_large";
}

// Enrolment: `POST /api/v1/enrol`

/// An agent enrols with a join token and its owner's name. A join token enrols a *new*
/// machine only: taking the place of an enrolled one (`replace`) needs that machine's
/// current credential or an admin key as `Authorization: Bearer …`, and then no token.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct EnrolRequest {
    /// A join token (`lull_join_…`); may be empty when replacing with a credential.
    #[serde(default)]
    pub token: String,
    /// The owner of the workstation (1–128 characters).
    pub owner: String,
    /// The machine's name as shown in reports (1–128 characters).
    pub machine: String,
    /// Re-enrol: when the owner already has a machine of this name, it takes that
    /// machine's place (same agent id and history; the old secret stops working, and
    /// answers 401 `credential_replaced`). Needs the machine's current credential or an
    /// admin key (403 `replace_needs_credential` otherwise). Without it such an
    /// enrolment is refused (409 `machine_exists`) and nothing changes.
    #[serde(default, skip_serializing_if = "is_false")]
    pub replace: bool,
    /// The machine's logical CPUs (1–[`limits::CPUS_MAX`]): what the CPU-seconds it
    /// reports are checked against. Required for a new machine; a replacement may leave
    /// it out (the machine keeps the count it had).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// The agent's identity and secret (shown once; the coordinator keeps only its hash).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Enrolment {
    pub agent_id: String,
    pub secret: String,
}

// Heartbeats: `POST /api/v1/heartbeat`

/// An agent's periodic report of its state.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
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
    /// Seconds the machine has been available without a break (0 when it is not): a
    /// machine idle for hours is likelier to stay idle than one idle for minutes (seed
    /// 004 Fig. 7), so the scheduler prefers it. Older agents leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_for_s: Option<u64>,
    /// The machine's live memory report for memory-centric placement and migration (seed
    /// 001). Older agents leave it out; their machines are placed by `free_mem_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryReport>,
    /// The owner's CPU readings taken since the previous heartbeat, oldest first (at
    /// most [`OWNER_LOAD_MAX`]): what the coordinator's instant recruitment predicts a
    /// machine's next seconds from (seed 003's windowed mean). The agent's own readings,
    /// sent as they are: no extra sampling. Older agents leave it out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub owner_load: Vec<LoadReading>,
    /// What keeps the machine from being available now, when it is not: `input` (the
    /// owner's keyboard or mouse), `inhibitor`, `owner_cpu`, `owner_memory`,
    /// `exclusive_program` (never which program). Older agents leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy: Option<String>,
    /// The machine's logical CPUs (1–[`limits::CPUS_MAX`]), as at enrolment; a change
    /// (hardware, a resized VM) is taken from here. Older agents leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(skip))]
    pub cpus: Option<u32>,
}

/// The most owner-load readings one heartbeat carries.
pub const OWNER_LOAD_MAX: usize = 120;

/// One reading of the owner's CPU: its mean over the `secs` seconds before it was taken.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LoadReading {
    /// Owner CPU, percent of the whole machine (0–100), guests excluded.
    pub cpu_pct: u8,
    /// Seconds the reading covers (1–600).
    pub secs: u16,
}

impl LoadReading {
    /// Why a reading is refused (`None`: it is well formed).
    pub fn invalid(&self) -> Option<String> {
        if self.cpu_pct > 100 {
            return Some(format!("owner_load cpu_pct {} is not in 0–100", self.cpu_pct));
        }
        if !(1..=600).contains(&self.secs) {
            return Some(format!("owner_load secs {} is not in 1–600", self.secs));
        }
        None
    }
}

/// What an agent measures of its memory and its guests' (seed 001: jobs' memory demand is
/// not known in advance, so it is watched live), sent with each heartbeat.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct MemoryReport {
    /// Memory available without swapping, reclaimable cache counted (`MemAvailable`), bytes.
    pub available_bytes: u64,
    /// M: what the guests may hold in all now — what they hold plus what is available
    /// beyond the owner's reserve, at most the owner's share for guests — bytes.
    pub guest_memory_bytes: u64,
    /// The agent's memory guard froze its guests for the owner's memory pressure.
    #[serde(default)]
    pub pressure: bool,
    /// Each running guest of a leased task.
    #[serde(default)]
    pub guests: Vec<GuestMemory>,
}

/// One running guest's memory, measured from its cgroup.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct GuestMemory {
    pub job_id: i64,
    pub rank: u32,
    /// Memory in use less the inactive file cache the kernel reclaims first, bytes.
    pub working_set_bytes: u64,
    /// Major page faults per second since the last report.
    pub major_faults_per_s: f64,
    /// Seconds the guest has run.
    pub age_s: f64,
    /// Bytes read and written per second since the last report, where the kernel counts
    /// them for the guest's cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_bytes_per_s: Option<f64>,
}

/// The coordinator's answer to a heartbeat.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatAck {
    /// When to send the next heartbeat.
    pub next_heartbeat_s: u32,
}

// Leases: `POST /api/v1/lease`

/// An agent asks for work.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct LeaseRequest {
    /// Free memory for guests, in bytes: only jobs that fit are leased.
    pub free_mem_bytes: u64,
    /// Long-poll: wait up to this long for work (at most [`MAX_LEASE_WAIT_MS`]).
    #[serde(default)]
    pub wait_ms: u32,
}

/// The longest a lease long poll may wait; the coordinator refuses more with a 400.
pub const MAX_LEASE_WAIT_MS: u32 = 30_000;

/// Work leased to an agent until `expires_ms` (renewed by progress reports).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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

/// What a job runs (stored as JSON).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct JobSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub inputs: BTreeMap<String, String>,
}

// A leased task: `POST /api/v1/tasks/{job}/{rank}/progress|complete|fail|evicted`, `GET …/gang`

/// Progress on a leased task; renews the lease.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Progress {
    pub lease: i64,
    #[serde(default)]
    pub fraction: Option<f64>,
    /// The tail of what the guest has written so far, sent when it wrote more since the
    /// last renewal (so `lull jobs output --follow` shows a running job). Older agents
    /// leave it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Output>,
}

/// The answer to a progress report.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ProgressAck {
    pub expires_ms: i64,
    /// The job was cancelled: stop the guest.
    pub cancel: bool,
    /// The task's gang is halted: another rank was lost and waits for its replacement.
    /// Freeze the guest (not an interruption) and renew more often; thaw when a renewal
    /// says `false` again. Absent from older coordinators (= false).
    #[serde(default)]
    pub halt: bool,
}

/// A lease holder whose owner came back while its guest lingers asks the coordinator to
/// move the task (`POST /api/v1/tasks/{job}/{rank}/migrate`, seed 000 §5.2).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct MigrateRequest {
    pub lease: i64,
    /// The owner's CPU utilisation now, `h`, 0–1 (guests excluded).
    pub owner_utilization: f64,
    /// How long the owner has been back, seconds (0–604800).
    pub owner_busy_for_s: f64,
    /// `T_migr` = suspend + checkpoint size / bandwidth + resume, seconds (0–86400).
    pub migration_cost_s: f64,
    /// CPU seconds the guest has used (user + system, 0–31536000).
    pub cpu_s: f64,
}

/// The coordinator's answer to a migration request. With `migrate`, the task was given
/// back (its last uploaded checkpoint kept, no retry used, no eviction counted): stop
/// the guest as for a lease taken back. Otherwise keep lingering.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MigrateAnswer {
    pub migrate: bool,
    /// Why, in words.
    pub reason: String,
    /// Predicted seconds to finish if it stays (absent when no machine was free).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stay_s: Option<f64>,
    /// Predicted seconds to finish on the best free machine, `T_migr` included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub move_s: Option<f64>,
}

/// A task's guest ended (whatever its exit code): the task is `completed` when it
/// exited with 0, `failed` otherwise, with the reason.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Completion {
    pub lease: i64,
    /// The exit code as a shell gives it (128 + N for signal N, 127 for a program not
    /// found); what older coordinators read. `outcome` says more.
    pub exit_code: i32,
    /// How the guest ended (agents since job outcomes). Without it the coordinator
    /// reads `exit_code` alone (-1 from older agents: the guest never started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<TaskOutcome>,
    /// CPU time the guest used, as measured by the OS.
    pub user_cpu_s: f64,
    pub sys_cpu_s: f64,
    /// The tail of what the guest wrote (agents since `lull jobs output`; older agents
    /// leave it out, and it is left out when the guest wrote nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Output>,
}

/// The most of each stream a completion carries: the last 64 KiB.
pub const OUTPUT_TAIL_MAX: usize = 64 << 10;

/// The tail of a guest's standard output and standard error, each at most
/// [`OUTPUT_TAIL_MAX`] bytes of UTF-8 (invalid bytes and NUL shown as U+FFFD), with how
/// many bytes the guest wrote to each in all.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(deny_unknown_fields)]
pub struct Output {
    pub stdout: String,
    pub stderr: String,
    /// Bytes written to standard output in all (more than `stdout` holds when cut).
    pub stdout_bytes: u64,
    pub stderr_bytes: u64,
}

/// The last [`OUTPUT_TAIL_MAX`] bytes (at most) of `bytes` as text: invalid UTF-8 and NUL
/// (which PostgreSQL text cannot hold) become U+FFFD, and the text is cut at a character
/// boundary from the front so the result never exceeds the cap.
pub fn output_tail(bytes: &[u8]) -> String {
    let from = bytes.len().saturating_sub(OUTPUT_TAIL_MAX);
    let text = String::from_utf8_lossy(&bytes[from..]).replace('\0', "\u{FFFD}");
    if text.len() <= OUTPUT_TAIL_MAX {
        return text;
    }
    let mut cut = text.len() - OUTPUT_TAIL_MAX;
    while !text.is_char_boundary(cut) {
        cut += 1;
    }
    text[cut..].to_string()
}

/// Whether a completion was counted now (`false`: it had been already; a retry).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CompletionAck {
    pub counted: bool,
}

/// A task failed (the agent could not run it) or was evicted.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct TaskRelease {
    pub lease: i64,
    #[serde(default)]
    pub reason: Option<String>,
    /// The agent gives the lease back before the task's guest started (the machine
    /// stopped accepting guest work, a gang that did not fill, a checkpoint that could
    /// not be downloaded): neither an eviction nor a retry, and not an attempt. Older
    /// agents leave it out.
    #[serde(default, skip_serializing_if = "is_false")]
    pub not_started: bool,
}

/// One rank of a job, as leased to one agent.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Task {
    pub rank: u32,
    /// `queued`, `leased`, `completed` (exit 0), `failed` (it ran and failed: a non-zero
    /// exit, a signal, a program not found or not executable, the sandbox, the output
    /// limit), `cancelled`, or `lost` (its retries used up: leases lost or given back
    /// as failed).
    pub state: String,
    pub agent_id: Option<String>,
    /// The machine's name (as enrolled) of `agent_id`.
    #[serde(default)]
    pub machine: Option<String>,
    pub lease: i64,
    /// How many times a machine took it to run (leases delivered and not given back
    /// before the guest started).
    pub attempts: u32,
    /// Leases counted against the job's `max_retries` (failures and lost leases; an
    /// eviction, a move or a lease given back unstarted uses none).
    #[serde(default)]
    pub retries_used: u32,
    /// Times its guest was stopped because the owner came back.
    pub evictions: u32,
    /// The exit code when the program exited.
    pub exit_code: Option<i64>,
    /// The signal's name (`SIGKILL`) when a signal ended it.
    #[serde(default)]
    pub signal: Option<String>,
    /// Why it failed, was lost or was cancelled ("program not found: NAME", "exit code
    /// 3", "killed by SIGKILL", "retries used up: …").
    #[serde(default)]
    pub reason: Option<String>,
    pub user_cpu_s: Option<f64>,
    pub sys_cpu_s: Option<f64>,
}

/// The answer to an agent that gives back every task it holds (`POST /api/v1/give-back`:
/// it just started, or it is stopping, so none of its guests runs).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GivenBack {
    /// Tasks that went back to the queue (neither an eviction nor a retry).
    pub tasks_requeued: u32,
}

/// A gang's readiness: every rank must be leased before any starts.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Gang {
    pub machines: u32,
    pub leased: u32,
    pub ready: bool,
    /// Agent id per rank (null where not leased).
    pub agents: Vec<Option<String>>,
}

// Checkpoints: `PUT/GET /api/v1/tasks/{job}/{rank}/checkpoint` (application/octet-stream)

/// The largest checkpoint the coordinator stores (64 MiB): a bigger upload is refused
/// with 413, and the agent does not send one.
pub const CHECKPOINT_MAX: usize = 64 << 20;

/// The query of a checkpoint upload: with `lease`, the coordinator stores it only while
/// that lease epoch is the task's (a late upload from a lost lease is refused with 409).
/// Without it (older agents), any upload by the holding agent is stored.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::IntoParams), into_params(parameter_in = Query))]
#[serde(deny_unknown_fields)]
pub struct CheckpointQuery {
    /// The uploader's lease epoch.
    #[serde(default)]
    pub lease: Option<i64>,
}

// Ledger records: `POST /api/v1/records`

/// One ledger record of an agent, keyed by its sequence number.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Record {
    pub seq: i64,
    /// `donation` {guest, day, cpu_us, wall_ms}, `interruption` {day, number, limit, …},
    /// `linger` {day, linger_ms}; other kinds are stored and not counted.
    pub kind: String,
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub payload: serde_json::Value,
}

/// A batch of records (at most 1000).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RecordBatch {
    pub records: Vec<Record>,
}

/// Records up to this sequence number are stored (new or already).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RecordsAck {
    pub acked_through: i64,
    /// How many were new.
    pub stored: u32,
    /// The new records stored but not counted in reports: made before this machine
    /// joined the pool (an hour's grace), so not the pool's. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncounted: Vec<i64>,
}
