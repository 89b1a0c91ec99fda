//! Guest work: the runtime that starts guest jobs and carries out the policy's
//! [`GuestDirective`](crate::policy::GuestDirective)s on them — containment of each whole
//! process tree, lowest priority, instant freezing from the input path, eviction with a
//! checkpoint signal and a grace, memory caps and admission, the sandbox, accounting, and
//! no orphans. The policy decides; the runtime only carries out and reports readings.
//!
//! [`GuestRuntime`] is the trait a platform implements (on top of the driver's
//! [`GuestHost`], in [`host`]); [`linux::LinuxRuntime`] is the Linux implementation (cgroup v2, hybrid
//! v1+v2, or a loudly announced process-group fallback).

use crate::config::NetworkPolicy;
use crate::ledger::GuestTotals;
use crate::sys::types::SpawnRefusal;
pub use host::{FastFreeze, GuestHost, NoGuests};
pub use lull_protocol::TaskOutcome;
use std::path::PathBuf;

pub mod caps;
pub mod host;
#[cfg(target_os = "linux")]
pub mod linux;
#[cfg(target_os = "macos")]
pub mod macos;
#[cfg(windows)]
pub mod windows;
// The queue and figures the Windows and macOS runtimes share.
#[cfg(any(windows, target_os = "macos"))]
mod level_guard;
#[cfg(any(windows, target_os = "macos"))]
mod queue;

/// The platform's guest runtime: on Linux cgroups, sandbox and watchdog (it kills what a
/// crashed earlier agent left behind, [`linux::LinuxRuntime`]); on Windows a Job Object
/// per guest (`windows::WindowsRuntime`); on macOS a process group per guest
/// (`macos::MacosRuntime`); elsewhere none yet ([`NoGuests`]: the agent
/// runs and reports, and takes no work).
pub fn platform_runtime(config: &crate::config::Config, work_root: &std::path::Path) -> Box<dyn GuestHost> {
    #[cfg(target_os = "linux")]
    return Box::new(linux::LinuxRuntime::new(config, work_root));
    #[cfg(windows)]
    return Box::new(windows::WindowsRuntime::new(config, work_root));
    #[cfg(target_os = "macos")]
    return Box::new(macos::MacosRuntime::new(config, work_root));
    #[cfg(not(any(target_os = "linux", windows, target_os = "macos")))]
    {
        let _ = (config, work_root);
        Box::new(NoGuests)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spawn_error(errno: i32) -> GuestError {
        GuestError::Spawn { id: "g1".into(), source: std::io::Error::from_raw_os_error(errno) }
    }

    #[test]
    fn a_guest_that_could_not_start_says_why_in_one_outcome() {
        assert_eq!(start_failure(&spawn_error(libc::ENOENT), "nosuch"), TaskOutcome::ProgramNotFound { program: "nosuch".into() });
        assert_eq!(
            start_failure(&spawn_error(libc::EACCES), "./x"),
            TaskOutcome::NotExecutable { program: "./x".into(), error: "permission denied".into() }
        );
        assert_eq!(
            start_failure(&GuestError::Sandbox("no account".into()), "x"),
            TaskOutcome::SandboxRefused { error: "no account".into() }
        );
        let unseen = GuestError::ProgramNotFound { program: "nosuch".into(), looked_in: "not on the guest's PATH=/usr/bin".into() };
        assert_eq!(start_failure(&unseen, "nosuch"), TaskOutcome::ProgramNotFound { program: "nosuch".into() });
        assert!(matches!(start_failure(&GuestError::Network("no outbound".into()), "x"), TaskOutcome::SandboxRefused { .. }));
        let plain = GuestError::NotExecutable { program: "/etc/passwd".into(), reason: "permission denied".into() };
        assert_eq!(
            start_failure(&plain, "/etc/passwd"),
            TaskOutcome::NotExecutable { program: "/etc/passwd".into(), error: "permission denied".into() }
        );
        assert!(matches!(start_failure(&spawn_error(libc::EMFILE), "x"), TaskOutcome::StartFailed { .. }));
        let dir = GuestDir::new("/nonexistent/g");
        let mut info = GuestInfo::without_process("g".into(), GuestPhase::Ended { code: None, signal: None, evicted: false }, &dir);
        info.start_error = Some(start_failure(&spawn_error(libc::ENOENT), "nosuch"));
        assert_eq!(info.outcome().unwrap().describe(), "program not found: nosuch");
        info.phase = GuestPhase::Ended { code: None, signal: Some(9), evicted: true };
        assert_eq!(info.outcome(), None, "an evicted guest was given back, not ended");
        // The runtime stopped it at a limit: a failure with the runtime's reason, not SIGKILL.
        info.start_error = None;
        info.failure = Some("disk limit: the work directory used 20.0 MiB, 4.0 MiB over [guests] disk_mib = 16".into());
        info.phase = GuestPhase::Ended { code: None, signal: Some(9), evicted: false };
        let stopped = info.outcome().unwrap();
        assert!(!stopped.succeeded());
        assert_eq!(
            stopped.describe(),
            "stopped by its agent: disk limit: the work directory used 20.0 MiB, 4.0 MiB over [guests] disk_mib = 16"
        );
    }
}

/// The owner's memory settings as the core's admission and pressure rules read them.
pub fn memory_rules(cfg: &crate::config::Guests, caps: &crate::config::Caps) -> lull_core::guest_memory::MemoryRules {
    use lull_core::guest_memory::MIB;
    lull_core::guest_memory::MemoryRules {
        owner_reserve_bytes: cfg.owner_reserve_mib * MIB,
        admission_owner_mem_max: cfg.admission_owner_mem_max,
        memory_cap_bytes: (cfg.memory_cap_mib != 0).then_some(cfg.memory_cap_mib * MIB),
        memory_share: caps.memory_max,
        pressure_freeze_pct: cfg.pressure_freeze_pct,
        pressure_kill: std::time::Duration::from_secs(cfg.pressure_kill_s),
    }
}

/// One guest job to run.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GuestSpec {
    /// The program, looked up inside the guest's view on its `PATH` when it has no slash.
    pub command: String,
    pub args: Vec<String>,
    /// Extra environment; guests otherwise get a minimal one (PATH, LANG, and HOME, TMPDIR
    /// and for a checkpointable job `LULL_CHECKPOINT`, which the runtime sets last).
    pub env: Vec<(String, String)>,
    /// The directory the coordinator link prepared for a leased task under the work root
    /// (`jobs/<job>-<rank>-<lease>`, its input files and checkpoint already in `work/`);
    /// `None`: a new one under `guests/`. Never from a control request (not serialized),
    /// and the runtime refuses one outside its work root: a job never chooses where it works.
    #[serde(skip)]
    pub job_dir: Option<PathBuf>,
    /// The job's own memory cap in bytes (the runtime's cap and the owner reserve still apply).
    pub memory_cap_bytes: Option<u64>,
    /// The job handles SIGTERM by checkpointing; evictions then signal and wait a grace.
    pub checkpointable: bool,
    /// The network the job asks for (`None`: none). It gets outbound network only if the
    /// owner's `[guests] network` allows it; otherwise it is not started, saying why.
    pub network: Option<NetworkPolicy>,
}

impl GuestSpec {
    /// A spec for `command args…` with every other setting at its default.
    pub fn new(command: impl Into<String>, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        Self {
            command: command.into(),
            args: args.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            job_dir: None,
            memory_cap_bytes: None,
            checkpointable: false,
            network: None,
        }
    }
}

/// One guest's directory under the work root: `work/`, its work directory (the only place
/// it may write; the guests' account owns it), beside `stdout.log` and `stderr.log`, which
/// the agent writes from the guest's pipes and the guest cannot reach. Outside its
/// sandbox nothing of it is readable by other users (0700/0600).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestDir {
    pub root: PathBuf,
}

impl GuestDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }
    /// The guest's work directory.
    pub fn work(&self) -> PathBuf {
        self.root.join("work")
    }
    pub fn stdout(&self) -> PathBuf {
        self.root.join("stdout.log")
    }
    pub fn stderr(&self) -> PathBuf {
        self.root.join("stderr.log")
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
    /// Windows: a Job Object per guest (kill on close, limits, freezing by suspending its
    /// threads).
    JobObject,
}

impl Containment {
    /// A short machine-readable name.
    pub fn id(self) -> &'static str {
        match self {
            Self::CgroupV2 => "cgroup-v2",
            Self::Hybrid => "hybrid",
            Self::ProcessGroup => "process-group",
            Self::JobObject => "job-object",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CgroupV2 => "cgroup v2",
            Self::Hybrid => "cgroup hybrid (v1 memory/cpu/pids + v2 freeze/kill)",
            Self::ProcessGroup => "process group + rlimits (NO cgroup: weak containment)",
            Self::JobObject => "Windows Job Object",
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
    /// Its work directory (on the host; inside its sandbox it is `/work`).
    pub workdir: PathBuf,
    /// Its output, capped at `[guests] output_mib` each (written by the agent).
    #[serde(default)]
    pub stdout_log: PathBuf,
    #[serde(default)]
    pub stderr_log: PathBuf,
    /// Why the runtime did not start it, stopped it itself (its program not found, its
    /// disk limit reached, …) or cut its output at the output limit; `None` for a guest
    /// that ran and ended on its own or was evicted or stopped on request.
    #[serde(default)]
    pub failure: Option<String>,
    /// Why the guest never ran, when it could not be started (`failure` says it too) ("program not found: NAME"):
    /// one of the outcomes a program that did not start can have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_error: Option<TaskOutcome>,
}

impl GuestInfo {
    /// A guest with no process (queued, or never started): no usage, no limit.
    pub fn without_process(id: String, phase: GuestPhase, dir: &GuestDir) -> Self {
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
            workdir: dir.work(),
            stdout_log: dir.stdout(),
            stderr_log: dir.stderr(),
            failure: None,
            start_error: None,
        }
    }

    /// How it ended: why it never started, why the runtime stopped it (a limit: a failed
    /// outcome with the runtime's reason), or its exit code or signal; `None` while it
    /// runs, and for a guest evicted or stopped (the job was given back, not ended).
    pub fn outcome(&self) -> Option<TaskOutcome> {
        match self.phase {
            GuestPhase::Ended { evicted: true, .. } => None,
            GuestPhase::Ended { code, signal, .. } => self
                .start_error
                .clone()
                .or_else(|| self.failure.clone().map(|error| TaskOutcome::Stopped { error }))
                .or_else(|| TaskOutcome::from_status(code, signal)),
            _ => None,
        }
    }
}

/// What a guest that could not be started ends with: a program not found (in the guest's
/// view, or ENOENT) or not executable (EACCES, ENOEXEC, EISDIR, ETXTBSY), the sandbox or
/// the guests' account refusing (EPERM, the runtime's own sandbox error, a work directory
/// or network refused), or another start failure.
pub fn start_failure(e: &GuestError, program: &str) -> TaskOutcome {
    match e {
        GuestError::ProgramNotFound { program, .. } => TaskOutcome::ProgramNotFound { program: program.clone() },
        GuestError::NotExecutable { program, reason } => TaskOutcome::NotExecutable { program: program.clone(), error: reason.clone() },
        GuestError::Sandbox(_) | GuestError::OutsideWorkRoot(_) | GuestError::Network(_) => {
            TaskOutcome::SandboxRefused { error: e.to_string().trim_start_matches("sandbox: ").to_string() }
        }
        GuestError::Spawn { source, .. } => match crate::sys::errno::spawn_refusal(source) {
            SpawnRefusal::NotFound => TaskOutcome::ProgramNotFound { program: program.to_string() },
            SpawnRefusal::NotExecutable => TaskOutcome::NotExecutable { program: program.to_string(), error: os_words(source) },
            SpawnRefusal::NotPermitted => TaskOutcome::SandboxRefused { error: os_words(source) },
            SpawnRefusal::Other => TaskOutcome::StartFailed { error: source.to_string() },
        },
        other => TaskOutcome::StartFailed { error: other.to_string() },
    }
}

/// An OS error's text without its number, in lower case ("permission denied").
fn os_words(e: &std::io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    let mut c = text.chars();
    c.next().map(|f| f.to_lowercase().chain(c).collect()).unwrap_or_default()
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
    /// `cgroup-v2`, `hybrid`, `process-group` or `job-object`.
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
    /// The job's program is not in the guest's view (its `PATH` there, its work directory
    /// or a system directory): the job cannot run here.
    #[error("program not found: {program} ({looked_in})")]
    ProgramNotFound {
        program: String,
        /// Where it was looked for, as the guest sees its file system ("not on the
        /// guest's PATH=…", "no such file …").
        looked_in: String,
    },
    /// The job's program is there but cannot be executed (no execute permission, a
    /// directory): found before anything is started.
    #[error("program not executable: {program} ({reason})")]
    NotExecutable { program: String, reason: String },
    /// A work directory outside the runtime's work root was asked for.
    #[error("work directory {0} refused: a guest works only in a new directory under Lull's own work root")]
    OutsideWorkRoot(String),
    /// The job asked for network this machine does not give it.
    #[error("network refused: {0}")]
    Network(String),
    #[error("starting guest {id}: {source}")]
    Spawn { id: String, source: std::io::Error },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// An ended guest as a runtime keeps it: its last snapshot, its totals, and whether the
/// totals went to the ledger yet.
pub type EndedGuest = (GuestInfo, GuestTotals, bool);

/// [`GuestHost::totals`] for a runtime: the running guests' `live` totals, then each ended
/// guest's not reported yet (marked reported now).
pub fn totals_to_report(live: impl Iterator<Item = GuestTotals>, ended: &mut [EndedGuest]) -> Vec<GuestTotals> {
    let mut out: Vec<GuestTotals> = live.collect();
    for (_, t, reported) in ended.iter_mut().filter(|e| !e.2) {
        out.push(t.clone());
        *reported = true;
    }
    out
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
