//! The limits on what crosses the wire: how large a request may be, and how much an agent
//! may claim its machine did. The coordinator refuses anything beyond them with a 4xx
//! whose message names the field and the limit (README, "Limits", lists them for people),
//! and the agent never sends more.
//!
//! The claims are bounded by physics, not by policy: a machine of `cpus` logical CPUs
//! gives at most `cpus` CPU-seconds per second; a local day lasts at most 25 hours (a
//! daylight-saving day), and begins somewhere between UTC+14 and UTC−12; nothing happens
//! in the future or, for the pool, before the machine joined it. The few bounds that are
//! not physical (guests at once, interruptions a day) sit well above anything the agent
//! allows its owner to configure.

/// The most logical CPUs a machine may report (Linux's largest `NR_CPUS`). An agent that
/// reports none is checked against this.
pub const CPUS_MAX: u32 = 8192;

/// The most guests one machine runs at once, for wall time (a sleeping guest donates
/// wall time without CPU): the ceiling of the agent's `guests.max_jobs`.
pub const GUESTS_MAX: u32 = 64;

/// The most interruptions (and the largest daily limit) a machine may report for one
/// day; the agent's own limit is at most 20.
pub const INTERRUPTIONS_PER_DAY_MAX: u32 = 100;

/// The longest one local day's records may cover, in milliseconds: a 25-hour
/// daylight-saving day, plus the accounting step that straddles its midnight.
pub const DAY_MS_MAX: i64 = 26 * HOUR_MS;

/// How far ahead of the coordinator's clock an agent's clock may run.
pub const CLOCK_SKEW_MS: i64 = 5 * 60_000;

/// Records made up to this long before a machine's enrolment still count for the pool
/// (its first accounting step); older ones are stored but not counted.
pub const JOIN_GRACE_MS: i64 = HOUR_MS;

/// The earliest a local day begins, before its UTC midnight (UTC+14).
pub const DAY_STARTS_BEFORE_UTC_MS: i64 = 14 * HOUR_MS;

/// The latest a local day ends, after the next UTC midnight (UTC−12).
pub const DAY_ENDS_AFTER_UTC_MS: i64 = 12 * HOUR_MS;

const HOUR_MS: i64 = 3_600_000;

/// The largest memory amount (bytes) a heartbeat or lease request may state: 1 PiB.
pub const MEMORY_BYTES_MAX: u64 = 1 << 50;

/// The most bytes a completion may say a guest wrote to one stream: 1 PiB.
pub const OUTPUT_BYTES_MAX: u64 = 1 << 50;

/// The largest base or current speed a heartbeat may state (the reference machine is 1).
pub const SPEED_MAX: f64 = 1e6;

/// The longest a machine may say it has been idle, seconds (a year).
pub const IDLE_FOR_S_MAX: u64 = 366 * 86_400;

/// The most records in one `POST /api/v1/records`.
pub const RECORDS_PER_BATCH_MAX: usize = 1000;

/// The largest payload of one record, as JSON text (bytes).
pub const RECORD_PAYLOAD_MAX: usize = 65_536;

/// The largest JSON request body (bytes); checkpoints have their own limit,
/// [`crate::CHECKPOINT_MAX`].
pub const JSON_BODY_MAX: usize = 1 << 20;

/// A job's command (bytes).
pub const COMMAND_MAX: usize = 4096;
/// A job's arguments: how many.
pub const ARGS_MAX: usize = 1024;
/// One argument (bytes).
pub const ARG_MAX: usize = 65_536;
/// A job's environment: how many variables.
pub const ENV_MAX: usize = 256;
/// A job's input files: how many.
pub const INPUTS_MAX: usize = 64;
/// The name of an environment variable or an input file (bytes).
pub const NAME_MAX: usize = 256;
/// The value of an environment variable, or the content of an input file (bytes).
pub const VALUE_MAX: usize = 262_144;
/// A whole job spec (command, arguments, environment and inputs) as stored, JSON bytes.
pub const SPEC_MAX: usize = JSON_BODY_MAX;
