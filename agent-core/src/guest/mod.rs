//! Guest work: the runtime that starts guest jobs and carries out the policy's
//! [`GuestDirective`](crate::policy::GuestDirective)s on them — containment of each whole
//! process tree, lowest priority, instant freezing from the input path, eviction with a
//! checkpoint signal and a grace, memory caps and admission, the sandbox, accounting, and
//! no orphans. The policy decides; the runtime only carries out and reports readings.
//!
//! [`GuestRuntime`] is the trait a platform implements (on top of the driver's
//! [`GuestHost`]); [`linux::LinuxRuntime`] is the Linux implementation (cgroup v2, hybrid
//! v1+v2, or a loudly announced process-group fallback).

use crate::agent::GuestHost;
use crate::config::NetworkPolicy;
use std::path::PathBuf;

#[cfg(target_os = "linux")]
pub mod linux;

/// One guest job to run.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GuestSpec {
    /// The program (looked up on the guest's `PATH` when it has no slash).
    pub command: String,
    pub args: Vec<String>,
    /// Extra environment; guests otherwise get a minimal one (PATH, HOME = workdir, TMPDIR).
    pub env: Vec<(String, String)>,
    /// The job's work directory (the only place it may write); default: a fresh
    /// directory under the agent's data directory.
    pub workdir: Option<PathBuf>,
    /// The job's own memory cap in bytes (the runtime's cap and the owner reserve still apply).
    pub memory_cap_bytes: Option<u64>,
    /// The job handles SIGTERM by checkpointing; evictions then signal and wait a grace.
    pub checkpointable: bool,
    /// Network policy; `None` takes the configured default.
    pub network: Option<NetworkPolicy>,
}

impl GuestSpec {
    /// A spec for `command args…` with every other setting at its default.
    pub fn new(command: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            workdir: None,
            memory_cap_bytes: None,
            checkpointable: false,
            network: None,
        }
    }
}

/// How guests are contained on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Containment {
    /// Pure cgroup v2 (freeze, kill, memory, cpu, pids in one hierarchy).
    CgroupV2,
    /// cgroup v1 memory/cpu/pids controllers plus the v2 unified hierarchy for freeze and kill.
    Hybrid,
    /// No cgroup could be created: a process group plus rlimits (a guest that calls
    /// setsid escapes freezing and killing; said loudly at start-up).
    ProcessGroup,
}

impl Containment {
    /// A short machine-readable name.
    pub fn id(self) -> &'static str {
        match self {
            Self::CgroupV2 => "cgroup-v2",
            Self::Hybrid => "hybrid",
            Self::ProcessGroup => "process-group",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CgroupV2 => "cgroup v2",
            Self::Hybrid => "cgroup hybrid (v1 memory/cpu/pids + v2 freeze/kill)",
            Self::ProcessGroup => "process group + rlimits (NO cgroup: weak containment)",
        }
    }
}

/// Where a guest is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum GuestPhase {
    /// Waiting for admission (an Accept directive with enough memory for the owner).
    Queued,
    Running,
    Frozen,
    /// Evicting: checkpoint signal sent, kill pending.
    Stopping,
    /// Gone: its main process's exit code or signal, and whether the runtime evicted it.
    Ended {
        code: Option<i32>,
        signal: Option<i32>,
        evicted: bool,
    },
}

/// A snapshot of one guest.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GuestInfo {
    pub id: String,
    pub pid: Option<u32>,
    pub phase: GuestPhase,
    pub cpu_user_us: u64,
    pub cpu_system_us: u64,
    pub wall_ms: u64,
    pub mem_bytes: u64,
    pub peak_mem_bytes: u64,
    pub memory_limit_bytes: Option<u64>,
    pub workdir: PathBuf,
}

impl GuestInfo {
    /// A guest with no process (queued, or never started): no usage, no limit.
    pub fn without_process(id: String, phase: GuestPhase, workdir: PathBuf) -> Self {
        Self {
            id,
            pid: None,
            phase,
            cpu_user_us: 0,
            cpu_system_us: 0,
            wall_ms: 0,
            mem_bytes: 0,
            peak_mem_bytes: 0,
            memory_limit_bytes: None,
            workdir,
        }
    }
}

/// The guests' memory as the coordinator's memory-centric placement (seed 001) wants it,
/// read from `/proc/meminfo` and each guest's cgroup when asked for (the heartbeat).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GuestsMemory {
    /// `MemAvailable` (free plus reclaimable cache), bytes.
    pub available_bytes: u64,
    /// What the guests may hold in all now ([`lull_core::guest_memory::guests_may_hold`]).
    pub guest_memory_bytes: u64,
    /// The memory guard froze the guests for the owner's memory pressure.
    pub pressure: bool,
    /// Each running guest (not those being stopped).
    pub guests: Vec<GuestMemoryReading>,
}

/// One guest's memory counters (cumulative where they count; the link turns them into
/// rates between heartbeats).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GuestMemoryReading {
    pub id: String,
    /// Memory in use less the inactive file cache, bytes.
    pub working_set_bytes: u64,
    /// Major page faults since it started.
    pub major_faults: u64,
    /// Bytes read and written since it started, where the cgroup counts them (v2 `io.stat`).
    pub io_bytes: Option<u64>,
    /// Wall time it has run, ms.
    pub age_ms: u64,
}

/// What the restore after one eviction did: the owner's swapped anonymous pages and the
/// owner's file cache brought back, each timed on its own (they run one after the other).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct RestoreReport {
    /// Bringing the owner's swapped pages back, ms; `None` when nothing of the owner's
    /// was in swap.
    pub anon_ms: Option<u64>,
    /// The owner's bytes in swap before it, MiB.
    pub anon_swapped_mib: f64,
    /// Reading the owner's file cache back, ms; `None` when no snapshot was taken.
    pub file_cache_ms: Option<u64>,
    /// The owner's resident file pages recorded before the guest started, MiB.
    pub file_cache_recorded_mib: f64,
    /// Of those, missing after the eviction, MiB.
    pub file_cache_missing_mib: f64,
    /// Read back into memory, MiB.
    pub file_cache_restored_mib: f64,
    /// Why the file-cache restore stopped early (the owner's memory pressure rose, a timeout).
    pub file_cache_stopped: Option<String>,
}

/// The owner's memory as the guest runtime keeps it, for `lull status`.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct OwnerMemoryStatus {
    /// How the owner's session is protected while guests run, or why it is not.
    pub protection: String,
    /// The last restore after an eviction.
    pub last_restore: Option<RestoreReport>,
    /// The owner's cgroups `memory.low` (v1: the soft limit) protects, with how much can
    /// take effect, while guests run (or, none running, would protect).
    #[serde(default)]
    pub protected: Vec<ProtectedCgroup>,
    /// `memory.high` on the guests, bytes, where `memory.low` cannot protect all the
    /// owner's memory.
    #[serde(default)]
    pub guests_memory_high: Option<u64>,
    /// Why `memory.low` is not in effect for an owner cgroup, one each (`cgroup: why`).
    #[serde(default)]
    pub not_protected: Vec<String>,
}

/// An owner cgroup and its protection, bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ProtectedCgroup {
    pub cgroup: String,
    pub bytes: u64,
}

/// How guests are contained, for `lull status` and the tray: never "cgroup v2" for
/// less than it is.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ContainmentStatus {
    /// The line status shows: `cgroup v2`, or `cgroup v2 (no io controller: guests' disk
    /// I/O not weighted)`, or the process-group fallback.
    pub summary: String,
    /// `cgroup-v2`, `hybrid` or `process-group`.
    pub kind: String,
    /// Where the guests' cgroups are and who gave them (`systemd scope
    /// lull-guests-….scope (Delegate=yes)`), or why there are none.
    pub placement: String,
    /// Each controller or file the guests lack, with what it costs the owner
    /// (`no io controller: guests' disk I/O not weighted`).
    pub missing: Vec<String>,
}

/// A guest runtime error.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    #[error("cgroup {path}: {source}")]
    Cgroup { path: String, source: std::io::Error },
    #[error("cgroups unusable: {0}")]
    NoCgroups(String),
    #[error("sandbox: {0}")]
    Sandbox(String),
    #[error("starting guest {id}: {source}")]
    Spawn { id: String, source: std::io::Error },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// What a platform's guest runtime offers beyond the driver's [`GuestHost`].
pub trait GuestRuntime: GuestHost {
    /// Queues a job; it starts at the next Accept directive once admitted. Returns its id.
    fn submit(&mut self, spec: GuestSpec) -> String;
    /// Every guest this runtime has known (queued, running and ended).
    fn guests(&mut self) -> Vec<GuestInfo>;
    /// How guests are contained here.
    fn containment(&self) -> Containment;
    /// True when nothing is queued or present.
    fn idle(&mut self) -> bool;
}
