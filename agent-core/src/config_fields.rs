//! The agent's own numeric configuration fields (sampling, input, guests, caps, memory,
//! notifications), each defined once with its default, allowed range and unit, as the
//! policy's are in `core/src/policy/fields.rs`. The `Default` impls of `config.rs` take
//! their values from here and `Config::numeric_fields` checks every field against the same
//! constant, so a default and its range cannot drift apart.

use lull_core::field::Field;

/// Between samples while guest work is present, or an offer, a battery or heat rule is in force.
pub(crate) const INTERVAL_MS: Field<u64> =
    Field { name: "sampling.interval_ms", default: 1000, min: 100, max: 60_000, unit: "milliseconds" };
/// Between samples with no guest work.
pub(crate) const RELAXED_INTERVAL_MS: Field<u64> =
    Field { name: "sampling.relaxed_interval_ms", default: 10_000, min: 100, max: 300_000, unit: "milliseconds" };
/// Between rows of the compact trace kept for calibration.
pub(crate) const TRACE_INTERVAL_S: Field<u64> = Field { name: "sampling.trace_interval_s", default: 2, min: 1, max: 3600, unit: "seconds" };
/// How long the trace is kept.
pub(crate) const TRACE_RETENTION_DAYS: Field<u64> =
    Field { name: "sampling.trace_retention_days", default: 30, min: 1, max: 3650, unit: "days" };
/// Idle-notification backends (Wayland, Mutter) report "idled" after this long without input.
pub(crate) const IDLE_NOTIFY_S: Field<u64> = Field { name: "input.idle_notify_s", default: 10, min: 1, max: 600, unit: "seconds" };
/// Largest memory a guest may use (0: no configured cap; the owner reserve still applies).
pub(crate) const MEMORY_CAP_MIB: Field<u64> = Field { name: "guests.memory_cap_mib", default: 2048, min: 0, max: 1_048_576, unit: "MiB" };
/// Memory always left to the owner.
pub(crate) const OWNER_RESERVE_MIB: Field<u64> =
    Field { name: "guests.owner_reserve_mib", default: 1024, min: 0, max: 1_048_576, unit: "MiB" };
/// No guest starts while the owner's own memory use is above this.
pub(crate) const ADMISSION_OWNER_MEM_MAX: Field<f64> =
    Field { name: "guests.admission_owner_mem_max", default: 0.8, min: 0.05, max: 1.0, unit: "fraction of total memory" };
/// Guests are frozen while memory pressure (PSI "some", 10-s average) stays above this.
pub(crate) const PRESSURE_FREEZE_PCT: Field<f64> =
    Field { name: "guests.pressure_freeze_pct", default: 10.0, min: 0.1, max: 100.0, unit: "percent of time stalled" };
/// Guests frozen for memory pressure are killed if it lasts this long.
pub(crate) const PRESSURE_KILL_S: Field<u64> = Field { name: "guests.pressure_kill_s", default: 10, min: 0, max: 3600, unit: "seconds" };
/// Most processes and threads one guest may have.
pub(crate) const PIDS_MAX: Field<u64> = Field { name: "guests.pids_max", default: 4096, min: 8, max: 1_000_000, unit: "processes" };
/// Most coordinator tasks this agent runs as guests at once.
pub(crate) const MAX_JOBS: Field<u32> = Field { name: "guests.max_jobs", default: 1, min: 1, max: 64, unit: "jobs" };
/// Most disk a guest's work directory may use.
pub(crate) const DISK_MIB: Field<u64> = Field { name: "guests.disk_mib", default: 4096, min: 16, max: 1_048_576, unit: "MiB" };
/// Most output kept of each of a guest's stdout and stderr.
pub(crate) const OUTPUT_MIB: Field<u64> = Field { name: "guests.output_mib", default: 16, min: 1, max: 1024, unit: "MiB per stream" };
/// How long a finished guest's work directory is kept.
pub(crate) const RETENTION_DAYS: Field<u32> = Field { name: "guests.retention_days", default: 7, min: 1, max: 3650, unit: "days" };
/// Bandwidth for moving a checkpoint to another machine (T_migr until a coordinator measures it).
pub(crate) const MIGRATION_BANDWIDTH_MIB_S: Field<f64> =
    Field { name: "guests.migration_bandwidth_mib_s", default: 50.0, min: 0.1, max: 100_000.0, unit: "MiB/s" };
/// Most CPU guest work may use.
pub(crate) const CPU_MAX: Field<f64> = Field { name: "caps.cpu_max", default: 1.0, min: 0.05, max: 1.0, unit: "fraction of the machine" };
/// Most memory guest work may use.
pub(crate) const MEMORY_MAX: Field<f64> =
    Field { name: "caps.memory_max", default: 0.5, min: 0.05, max: 0.9, unit: "fraction of total memory" };
/// How much of the owner's memory to protect (0: their recent working set plus a quarter).
pub(crate) const OWNER_PROTECT_MIB: Field<u64> =
    Field { name: "memory.owner_protect_mib", default: 0, min: 0, max: 1_048_576, unit: "MiB" };
/// Most of the owner's resident file pages recorded before a guest starts and read back after an eviction (0: none).
pub(crate) const CACHE_SNAPSHOT_MIB: Field<u64> =
    Field { name: "memory.cache_snapshot_mib", default: 2048, min: 0, max: 65_536, unit: "MiB" };
/// Most files recorded in that snapshot.
pub(crate) const CACHE_SNAPSHOT_FILES: Field<u64> =
    Field { name: "memory.cache_snapshot_files", default: 4096, min: 1, max: 100_000, unit: "files" };
/// At most one notification of a kind this often.
pub(crate) const MIN_INTERVAL_S: Field<u64> =
    Field { name: "notifications.min_interval_s", default: 300, min: 10, max: 86_400, unit: "seconds" };
