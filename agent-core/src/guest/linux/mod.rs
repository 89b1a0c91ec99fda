//! The Linux guest runtime: [`LinuxRuntime`] implements [`GuestRuntime`] and the driver's
//! [`GuestHost`] on cgroup v2, on a hybrid v1 + v2 system, or (said loudly) on process
//! groups and rlimits where no cgroup can be created.
//!
//! It carries out directives — Accept: thaw and start admitted jobs; Linger: thaw, start
//! nothing; Freeze: freeze; Evict: checkpoint signal then kill after the grace (or kill
//! at once) — and on every tick it accounts, enforces the memory protection (caps
//! re-clamped to what the owner can spare, freeze then kill under pressure) and, once an
//! eviction is complete, restores the owner's swapped-out pages and then the owner's file
//! cache, timing each. While guests run the owner's session is protected
//! ([`owner_protect`]); before the first guest starts the owner's resident file pages are
//! recorded ([`owner_cache`]).
//!
//! # Privileges: what each step needs and how it gets it
//! On an owner's desktop the agent runs as the owner, not as root, and guests run as the
//! owner too, with strictly less: no step hands a guest a privilege.
//!
//! | step | needs | how it gets it |
//! | --- | --- | --- |
//! | guests' cgroups, their `memory.*`, `cpu.*`, `pids.max` | a writable cgroup subtree | root makes `lull` in each hierarchy; an owner's agent gets a delegated scope from its systemd user manager, or uses its own delegated cgroup (`Delegate=yes`), or a subtree a root install step chowned to the owner (`ci/setup-guest.sh` makes `lull-deleg` for the tests) ([`delegation`]) |
//! | the lowest CPU weight where guests meet the owner's processes | the top of that subtree | written on every level from the top down (a default weight above the guests lets them compete); a delegatee cannot set its own cgroup's weight, so a unit's `CPUWeight=idle` does |
//! | moving a guest into its cgroup | v2: the common ancestor's `cgroup.procs`; v1: the target's and the same uid | the agent runs inside the delegated subtree; the guest writes itself ("0") before exec |
//! | freeze and kill (`cgroup.freeze`, `cgroup.kill`) | the instance's own files | made by the agent, in its subtree |
//! | SCHED_IDLE, nice 19, idle I/O; parent-death signal, watchdog | nothing | lowering one's own priority; own children |
//! | namespaces (bubblewrap) | unprivileged user namespaces (bwrap is not setuid) | probed once at start as the guests' account, else the Landlock fallback, said loudly ([`isolation`]) |
//! | outbound network | `slirp4netns`, `/dev/net/tun` | joined through the sandbox's user namespace; missing, a job asking for network is refused saying why ([`outbound`]) |
//! | admission, caps, PSI | `/proc/meminfo`, `/proc/pressure/memory` | world-readable |
//! | restoring swapped pages | CAP_SYS_NICE for `process_madvise`; ptrace-read rights for `/proc/PID/mem` | the first is skipped without it; the read-back works for the same uid at Yama scope 0, else needs CAP_SYS_PTRACE ([`memory`]) |
//! | file-cache snapshot and restore | the owner's own files (`mincore` tells the truth only for them) | same uid; others' files skipped unless root ([`owner_cache`]) |
//! | owner protection (`memory.low`, v1 soft limits) | the owner's session cgroup | root, or a cgroup delegated to the owner; otherwise none, said once ([`owner_protect`]) |
//!
//! With no cgroup at all the runtime falls back to process groups and `RLIMIT_AS`, said
//! loudly at start: a guest that calls setsid then escapes freezing (in its own PID
//! namespace it still dies with its main process) ([`fallback`]).

pub mod account;
pub mod bubblewrap;
pub mod cgroup;
pub mod delegation;
pub mod disk;
pub mod fallback;
pub mod hold;
pub mod isolation;
pub mod memory;
pub mod outbound;
pub mod output;
pub mod owner_cache;
pub mod owner_protect;
pub mod sandbox;
pub mod spawn;
pub mod syscall_filter;
pub mod watchdog;
pub mod workdir;

use crate::config::Config;
use crate::guest::{Containment, GuestDir, GuestError, GuestInfo, GuestPhase, GuestRuntime, GuestSpec, OwnerMemoryStatus, RestoreReport};
use crate::guest::{FastFreeze, GuestHost, TaskOutcome};
use crate::ledger::GuestTotals;
use crate::policy::GuestDirective;
use crate::sensors::GuestReading;
use cgroup::{Cgroups, GuestCgroup};
use std::collections::VecDeque;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

use lull_core::guest_memory::{self, MemoryReading, MemoryRules, PressureDecision, PressureWatch, StallReading, MIB};
use lull_core::owner_memory::WarmRules;

/// What the restore thread did after one eviction.
struct Restored {
    anon: memory::Restore,
    cache: Option<owner_cache::CacheRestore>,
}

impl Restored {
    fn report(&self) -> RestoreReport {
        let mib = |b: u64| b as f64 / MIB as f64;
        RestoreReport {
            anon_ms: (self.anon.swapped_before > 0).then_some(self.anon.took.as_millis() as u64),
            anon_swapped_mib: mib(self.anon.swapped_before),
            file_cache_ms: self.cache.as_ref().map(|c| c.took.as_millis() as u64),
            file_cache_recorded_mib: self.cache.as_ref().map_or(0.0, |c| mib(c.recorded_bytes)),
            file_cache_missing_mib: self.cache.as_ref().map_or(0.0, |c| mib(c.missing_bytes)),
            file_cache_restored_mib: self.cache.as_ref().map_or(0.0, |c| mib(c.restored_bytes)),
            file_cache_stopped: self.cache.as_ref().and_then(|c| c.stopped.clone()),
        }
    }
}

/// State shared with the input thread's fast path.
struct Fast {
    freeze_file: Option<std::fs::File>,
    groups: Mutex<Vec<i32>>,
    frozen: AtomicBool,
    /// CPU-weight files raised while freezing (see [`Fast::freeze`]): (file, boosted, lowest).
    boost: Mutex<Vec<(PathBuf, &'static str, &'static str)>>,
    boosted: AtomicBool,
}

impl Fast {
    /// Freezes every guest. The cgroup is frozen once each of its tasks has passed
    /// through the kernel's freeze trap, which a runnable task of an idle-weight group on
    /// a busy CPU reaches only when next scheduled — which can be hundreds of ms away. So
    /// for the moment of freezing, the guests' cgroups get normal CPU weight: their tasks
    /// are scheduled soon and go straight into the trap (a task scheduled with the
    /// freeze pending runs no user code). The lowest weight is restored as soon as the
    /// kernel reports all frozen, and always before a thaw.
    fn freeze(&self) {
        self.frozen.store(true, Ordering::Release);
        match &self.freeze_file {
            Some(f) => {
                let _ = f.write_at(b"1", 0);
                let boost = self.boost.lock().unwrap_or_else(|p| p.into_inner());
                if !boost.is_empty() {
                    self.boosted.store(true, Ordering::Release);
                    for (file, value, _) in boost.iter() {
                        let _ = std::fs::write(file, value);
                    }
                }
            }
            None => {
                let groups = self.groups.lock().unwrap_or_else(|p| p.into_inner());
                for &g in groups.iter() {
                    fallback::signal_group(g, libc::SIGSTOP);
                }
            }
        }
    }

    /// Back to the lowest CPU weight (bottom-up).
    fn unboost(&self) {
        if self.boosted.swap(false, Ordering::AcqRel) {
            let boost = self.boost.lock().unwrap_or_else(|p| p.into_inner());
            for (file, _, lowest) in boost.iter().rev() {
                let _ = std::fs::write(file, lowest);
            }
        }
    }
}

struct Guest {
    id: String,
    child: Child,
    pid: u32,
    cg: Option<GuestCgroup>,
    dir: GuestDir,
    /// The guest's processes that are not the job's (bwrap, the network link).
    helpers: Vec<i32>,
    link: Option<outbound::Link>,
    pump: Option<output::Pump>,
    disk: disk::DiskGuard,
    /// Its own freeze (a gang halt, a disk measurement); `None` without cgroups.
    hold: Option<Arc<hold::Hold>>,
    /// Why the runtime stopped it (its disk limit).
    failure: Option<String>,
    cap: u64,
    limit: Option<u64>,
    wall_ms: u64,
    cpu: (u64, u64),
    mem: u64,
    peak: u64,
    checkpointable: bool,
    stopping: bool,
    evicted: bool,
    /// Frozen on its own (its gang is halted), whatever the directive: its own cgroup's
    /// `cgroup.freeze` (a thaw of the agent instance's does not thaw it).
    held: bool,
    kill_at: Option<Instant>,
    exit: Option<std::process::ExitStatus>,
}

impl Guest {
    fn info(&self, frozen: bool) -> GuestInfo {
        GuestInfo {
            id: self.id.clone(),
            pid: Some(self.pid),
            phase: if self.stopping {
                GuestPhase::Stopping
            } else if frozen || self.held {
                GuestPhase::Frozen
            } else {
                GuestPhase::Running
            },
            cpu_user_us: self.cpu.0,
            cpu_system_us: self.cpu.1,
            wall_ms: self.wall_ms,
            mem_bytes: self.mem,
            peak_mem_bytes: self.peak,
            memory_limit_bytes: self.limit,
            workdir: self.dir.work(),
            stdout_log: self.dir.stdout(),
            stderr_log: self.dir.stderr(),
            failure: self.failure.clone(),
            start_error: None,
        }
    }

    fn totals(&self) -> GuestTotals {
        GuestTotals { guest: self.id.clone(), cpu_us: self.cpu.0 + self.cpu.1, wall_ms: self.wall_ms, peak_mem_bytes: self.peak }
    }
}

/// The Linux guest runtime.
pub struct LinuxRuntime {
    cfg: crate::config::Guests,
    /// The owner's caps from the settings window: CPU share and memory fraction.
    caps: crate::config::Caps,
    kill_grace: Duration,
    cgroups: Option<Cgroups>,
    kind: Containment,
    /// Namespaces, or the Landlock fallback.
    isolation: isolation::Isolation,
    data_dir: PathBuf,
    queue: VecDeque<(String, GuestSpec)>,
    guests: Vec<Guest>,
    ended: Vec<(GuestInfo, GuestTotals, bool)>,
    ended_cpu_us: u64,
    directive: GuestDirective,
    fast: Arc<Fast>,
    watchdog: Option<watchdog::Watchdog>,
    /// The memory-pressure watch (the core decides, this runtime reads and acts).
    pressure: PressureWatch,
    restore_due: bool,
    restore_job: Option<std::thread::JoinHandle<Restored>>,
    /// The last restore's report, until the driver takes it.
    restore_report: Option<RestoreReport>,
    last_report: Option<RestoreReport>,
    last_restore: Option<memory::Restore>,
    last_cache_restore: Option<owner_cache::CacheRestore>,
    /// `[memory]`: protection of the owner's session and the file-cache snapshot's bounds.
    warm: WarmRules,
    protection: owner_protect::OwnerProtection,
    /// The owner's resident file pages, recorded before the first guest started.
    cache_snapshot: Option<owner_cache::CacheSnapshot>,
    last_tick: Instant,
    /// When T_migr was last estimated, and the estimate.
    migration: Option<(Instant, Duration)>,
    seq: u64,
    refused: Option<String>,
    /// The account guests switch to (the agent runs as root), none (they keep the
    /// owner's), or why no guest may start (root, and no unprivileged account).
    account: Result<Option<account::GuestAccount>, String>,
    /// Where guests' work directories go (`guests/`, `jobs/`): handed to `account`.
    work_root: PathBuf,
    /// Why guests have no cgroups (the process-group fallback).
    no_cgroups: Option<String>,
    /// The system calls guests may not make; `None` where no filter can be built.
    syscalls: Option<seccompiler::BpfProgram>,
}

impl LinuxRuntime {
    /// Opens the runtime: finds or creates the cgroups (falling back loudly), kills what an
    /// earlier agent left behind, starts the no-orphans watchdog, finds the account guests
    /// run as. `work_root` holds the guests' work directories
    /// ([`crate::paths::Paths::work_root`]).
    pub fn new(config: &Config, work_root: &Path) -> Self {
        let cfg = config.guests.clone();
        let account = match account::resolve(&cfg.run_as) {
            Ok((a, note)) => {
                if let Some(note) = note {
                    warn!("{note}");
                }
                Ok(a)
            }
            Err(e) => {
                error!("{e}");
                Err(e.to_string())
            }
        };
        let base = std::env::var("LULL_CGROUP").ok().filter(|v| !v.is_empty()).unwrap_or_else(|| cfg.cgroup.clone());
        // `none` turns cgroups off (the fallback, e.g. to try or test it).
        let (opened, watchdog) = delegation::open(&base);
        let no_cgroups = opened.as_ref().err().map(ToString::to_string);
        let cgroups = match opened {
            Ok(c) => {
                let stale = c.cleanup_stale();
                if stale > 0 {
                    warn!(stale, "killed and removed guest cgroups left by an earlier agent");
                }
                if !c.missing.is_empty() {
                    warn!("guests' cgroups in {} lack: {}", c.placement, cgroup::describe_containment(c.kind, &c.missing));
                }
                Some(c)
            }
            Err(e) => {
                error!(
                    "NO CGROUPS FOR GUESTS ({e}): falling back to process groups + rlimits. A guest that calls setsid \
                     escapes freezing and killing; memory is capped by RLIMIT_AS only."
                );
                None
            }
        };
        let kind = cgroups.as_ref().map_or(Containment::ProcessGroup, |c| c.kind);
        let isolation = isolation::Isolation::choose(account.as_ref().ok().and_then(|a| a.as_ref()).map(|a| (a.uid, a.gid)), cfg.network);
        if !isolation.namespaces() && sandbox::kernel_abi() < 1 {
            error!("NO LANDLOCK on this kernel: guests run with no-new-privileges but without a filesystem sandbox");
        }
        let freeze_file = cgroups.as_ref().and_then(|c| std::fs::OpenOptions::new().write(true).open(c.freeze_file()).ok());
        // LULL_FREEZE_BOOST=0 turns the freeze-time boost off (for A/B measurements).
        let boost_on = std::env::var("LULL_FREEZE_BOOST").map_or(true, |v| v != "0");
        let boost = match (&cgroups, boost_on) {
            (Some(c), true) => c.cpu_levels.iter().flat_map(|d| c.boost_files(d)).collect(),
            _ => Vec::new(),
        };
        let fast = Arc::new(Fast {
            freeze_file,
            groups: Mutex::new(Vec::new()),
            frozen: AtomicBool::new(false),
            boost: Mutex::new(boost),
            boosted: AtomicBool::new(false),
        });
        let watchdog = match watchdog {
            Ok(w) => Some(w),
            Err(e) => {
                error!("could not start the no-orphans watchdog: {e}");
                None
            }
        };
        let syscalls = match syscall_filter::guest_filter() {
            Ok(p) => Some(p),
            Err(e) => {
                error!("guests may preallocate disk space past [guests] disk_mib: {e}");
                None
            }
        };
        info!(containment = kind.as_str(), sandbox = %isolation.describe(), base = %base, "guest runtime ready");
        let m = &config.memory;
        let warm = WarmRules {
            protect: m.protect_owner,
            protect_bytes: (m.owner_protect_mib != 0).then_some(m.owner_protect_mib * MIB),
            cache_max_bytes: m.cache_snapshot_mib * MIB,
            cache_max_files: m.cache_snapshot_files as usize,
        };
        let mut protection = owner_protect::OwnerProtection::new(cgroups.as_ref(), m, warm, cfg.owner_reserve_mib * MIB);
        let marker = cgroups.as_ref().map(Cgroups::marker).unwrap_or_default();
        protection.probe(&memory::owner_pids(&marker), memory::meminfo().total);
        Self {
            cfg,
            caps: config.caps.clone(),
            kill_grace: Duration::from_secs(config.eviction.kill_grace_s),
            cgroups,
            kind,
            isolation,
            data_dir: work_root.join("guests"),
            queue: VecDeque::new(),
            guests: Vec::new(),
            ended: Vec::new(),
            ended_cpu_us: 0,
            directive: GuestDirective::Evict,
            fast,
            watchdog,
            pressure: PressureWatch::default(),
            restore_due: false,
            restore_job: None,
            restore_report: None,
            last_report: None,
            last_restore: None,
            last_cache_restore: None,
            warm,
            protection,
            cache_snapshot: None,
            last_tick: Instant::now(),
            migration: None,
            seq: 0,
            refused: None,
            account,
            work_root: work_root.to_path_buf(),
            no_cgroups,
            syscalls,
        }
    }

    /// The cgroups in use (None in the fallback).
    pub fn cgroups(&self) -> Option<&Cgroups> {
        self.cgroups.as_ref()
    }

    /// Whether the kernel reports every guest frozen (cgroup) or all are stopped (fallback).
    pub fn frozen(&self) -> bool {
        match &self.cgroups {
            Some(c) => c.frozen(),
            None => self.fast.frozen.load(Ordering::Acquire),
        }
    }

    /// The last restore's figures (swapped pages).
    pub fn last_restore(&self) -> Option<memory::Restore> {
        self.last_restore
    }

    /// The last file-cache restore's figures.
    pub fn last_cache_restore(&self) -> Option<owner_cache::CacheRestore> {
        self.last_cache_restore.clone()
    }

    /// The owner's file-cache snapshot in hand (taken before the first guest started,
    /// consumed by the restore after an eviction).
    pub fn cache_snapshot(&self) -> Option<&owner_cache::CacheSnapshot> {
        self.cache_snapshot.as_ref()
    }

    /// What `lull status` says about the owner's protection.
    pub fn protection(&self) -> String {
        self.protection.describe()
    }

    /// Before the first guest starts: the owner's file cache recorded and the owner's
    /// session protected.
    fn keep_owner_warm(&mut self) {
        let owner = memory::owner_pids(&self.guest_cgroup_marker());
        self.protection.engage(&owner, memory::meminfo().total);
        if self.warm.cache_max_bytes > 0 {
            // The owner's session's processes when it is known, else all the owner's.
            let session = self.protection.session_pids();
            let snap = owner_cache::snapshot(session.as_deref().unwrap_or(&owner), &self.warm);
            info!(
                files = snap.files.len(),
                mib = snap.bytes / MIB,
                skipped = snap.skipped,
                truncated = snap.truncated,
                ms = snap.took.as_millis() as u64,
                "owner's file cache recorded"
            );
            self.cache_snapshot = Some(snap);
        }
    }

    /// The process group leaders' pids (= pgids) of present guests.
    pub fn pids(&self) -> Vec<u32> {
        self.guests.iter().map(|g| g.pid).collect()
    }

    /// Runs the per-tick work now (also run by `present()`).
    pub fn tick(&mut self) {
        self.maintain();
    }

    fn set_frozen(&mut self, frozen: bool) {
        if frozen {
            self.fast.freeze();
            return;
        }
        self.fast.frozen.store(false, Ordering::Release);
        self.fast.unboost();
        match &self.cgroups {
            Some(c) => {
                if let Err(e) = c.set_frozen(false) {
                    error!("could not thaw guests: {e}");
                }
            }
            None => {
                for g in &self.guests {
                    fallback::signal_group(g.pid as i32, libc::SIGCONT);
                }
            }
        }
    }

    fn next_id(&mut self) -> String {
        self.seq += 1;
        format!("g{}-{}-{}", chrono::Utc::now().timestamp_millis(), std::process::id(), self.seq)
    }

    /// The owner's memory settings as the core's admission and pressure rules read them.
    fn memory_rules(&self) -> MemoryRules {
        super::memory_rules(&self.cfg, &self.caps)
    }

    /// Admission (decided by [`guest_memory::admit`] on this moment's readings): the cap a
    /// new guest gets, or why it may not start.
    fn admit(&self, spec_cap: Option<u64>) -> Result<u64, String> {
        let mi = memory::meminfo();
        let guests_mem: u64 = self.guests.iter().map(|g| g.mem).sum();
        let reading = MemoryReading { total: mi.total, available: mi.available };
        guest_memory::admit(&self.memory_rules(), reading, guests_mem, spec_cap).map_err(|r| r.to_string())
    }

    fn start_admitted(&mut self) {
        while let Some((id, spec)) = self.queue.front().cloned() {
            let limit = match self.admit(spec.memory_cap_bytes) {
                Ok(l) => l,
                Err(why) => {
                    if self.refused.as_deref() != Some(&why) {
                        warn!("guest {id} not admitted yet: {why}");
                        self.refused = Some(why);
                    }
                    return;
                }
            };
            self.refused = None;
            self.queue.pop_front();
            if self.guests.is_empty() && self.restore_job.is_none() {
                self.keep_owner_warm();
            }
            match self.start(&id, &spec, limit) {
                Ok(g) => {
                    info!(guest = %g.id, pid = g.pid, limit_mib = limit / MIB, "guest started");
                    self.guests.push(g);
                }
                Err(e) => {
                    let outcome = crate::guest::start_failure(&e, &spec.command);
                    // The job's own mistake (a program it does not have) is its outcome,
                    // said to whoever submitted it; only the agent's own is an error here.
                    if matches!(outcome, TaskOutcome::ProgramNotFound { .. } | TaskOutcome::NotExecutable { .. }) {
                        info!(guest = %id, "guest not started: {e}");
                    } else {
                        error!(guest = %id, "guest not started: {e}");
                    }
                    let dir = self.dir_of(&id, &spec);
                    // The job's own output says it too (`lull jobs output`, `lull run`).
                    if dir.root.starts_with(&self.work_root) {
                        output::note(&dir.stderr(), &format!("lull: {}", outcome.describe()));
                    }
                    let mut info =
                        GuestInfo::without_process(id.clone(), GuestPhase::Ended { code: None, signal: None, evicted: false }, &dir);
                    info.failure = Some(e.to_string());
                    info.start_error = Some(outcome);
                    let t = GuestTotals { guest: id, cpu_us: 0, wall_ms: 0, peak_mem_bytes: 0 };
                    self.ended.push((info, t, true));
                }
            }
        }
    }

    /// The directory a guest works in: the one the coordinator link prepared, or a new
    /// one under `guests/` (checked by [`workdir::prepare`] before it is used).
    fn dir_of(&self, id: &str, spec: &GuestSpec) -> GuestDir {
        GuestDir::new(spec.job_dir.clone().unwrap_or_else(|| self.data_dir.join(id)))
    }

    fn start(&mut self, id: &str, spec: &GuestSpec, limit: u64) -> Result<Guest, GuestError> {
        let account = self.account.clone().map_err(GuestError::Sandbox)?;
        let dir = self.dir_of(id, spec);
        workdir::prepare(&self.work_root, &dir, account.as_ref())?;
        let outbound = self.isolation.outbound_for(spec, self.cfg.network)?;
        self.isolation.find_program(spec, &dir)?;
        // Parent frozen from an earlier freeze would freeze the newcomer too.
        self.set_frozen(false);
        let cg = match &self.cgroups {
            Some(c) => {
                let g = c.create(id, self.cfg.pids_max, self.caps.cpu_max)?;
                g.set_memory_limit(limit)?;
                Some(g)
            }
            None => None,
        };
        let disk_bytes = self.cfg.disk_mib * MIB;
        let confinement = spawn::Confinement {
            procs_files: cg.as_ref().map(|g| g.procs_files()).unwrap_or_default(),
            address_space: if cg.is_none() && limit != u64::MAX { Some(limit) } else { None },
            file_size: Some(disk_bytes),
            account: account.as_ref().map(|a| (a.uid, a.gid)),
            syscalls: self.syscalls.clone(),
            ..spawn::Confinement::default()
        };
        let launched = match self.isolation.launch(id, spec, &dir, confinement, outbound, self.cfg.output_mib * MIB) {
            Ok(l) => l,
            Err(e) => {
                if let Some(g) = &cg {
                    g.kill();
                    g.wait_empty(Duration::from_secs(2));
                    g.remove();
                }
                return Err(e);
            }
        };
        let pid = launched.child.id();
        let boost_on = !self.fast.boost.lock().unwrap_or_else(|p| p.into_inner()).is_empty();
        if let (Some(c), Some(g), true) = (&self.cgroups, &cg, boost_on) {
            self.fast.boost.lock().unwrap_or_else(|p| p.into_inner()).extend(c.boost_files(&g.cpu));
        }
        if cg.is_none() {
            self.fast.groups.lock().unwrap_or_else(|p| p.into_inner()).push(pid as i32);
            if let Some(w) = &self.watchdog {
                w.watch_group(pid as i32);
            }
        }
        let hold = cg.as_ref().map(|g| Arc::new(hold::Hold::new(g.unified.join("cgroup.freeze"))));
        let (cg1, cg2) = (cg.clone(), cg.clone());
        let guarded = disk::GuardedGuest {
            hold: hold.clone(),
            pids: Box::new(move || Self::pids_of(cg1.as_ref(), pid)),
            kill: Box::new(move || Self::kill_all(cg2.as_ref(), pid)),
        };
        let disk = match disk::DiskGuard::start(disk::DiskWatch::new(&dir.work(), disk_bytes), guarded) {
            Ok(d) => d,
            Err(source) => {
                let mut child = launched.child;
                Self::kill_all(cg.as_ref(), pid);
                let _ = child.wait();
                return Err(GuestError::Io { what: "starting the guest's disk guard".into(), source });
            }
        };
        Ok(Guest {
            id: id.into(),
            child: launched.child,
            pid,
            limit: cg.as_ref().and_then(|g| g.memory_limit()).or((limit != u64::MAX).then_some(limit)),
            cg,
            disk,
            hold,
            dir,
            helpers: launched.helpers,
            link: launched.link,
            pump: Some(launched.pump),
            failure: None,
            cap: guest_memory::cap_for(&self.memory_rules(), memory::meminfo().total, spec.memory_cap_bytes),
            wall_ms: 0,
            cpu: (0, 0),
            mem: 0,
            peak: 0,
            checkpointable: spec.checkpointable,
            stopping: false,
            evicted: false,
            held: false,
            kill_at: None,
            exit: None,
        })
    }

    /// Sends `sig` to the job's processes: not to bwrap's own or the network link, which
    /// a checkpoint signal would end before the job could act on it.
    fn signal_job(g: &Guest, sig: i32) {
        let pids = Self::pids_of(g.cg.as_ref(), g.pid);
        for pid in pids.into_iter().filter(|p| !g.helpers.contains(p)) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// Every process of the guest: its cgroup's, or without cgroups its process group's.
    fn pids_of(cg: Option<&GuestCgroup>, pgid: u32) -> Vec<i32> {
        match cg {
            Some(cg) => cg.pids(),
            None => fallback::members(pgid as i32).into_iter().map(|p| p as i32).collect(),
        }
    }

    /// Freezes (`hold`) or thaws one guest on its own: its gang is halted while a lost
    /// member is replaced. Not an eviction and not the policy's: the directive's freezes
    /// and thaws act on the agent instance's cgroup above it and leave this one as it is.
    /// False when no such guest runs.
    pub fn hold_one(&mut self, id: &str, hold: bool) -> bool {
        let Some(g) = self.guests.iter_mut().find(|g| g.id == id && !g.stopping) else { return false };
        if g.held == hold {
            return true;
        }
        Self::set_held(g, hold);
        info!(guest = %g.id, "guest {} (gang halt)", if hold { "held frozen" } else { "released" });
        true
    }

    fn set_held(g: &mut Guest, hold: bool) {
        g.held = hold;
        let r = match &g.hold {
            Some(h) => h.set(hold::Reason::Gang, hold).map_err(|e| e.to_string()),
            None => {
                fallback::signal_group(g.pid as i32, if hold { libc::SIGSTOP } else { libc::SIGCONT });
                Ok(())
            }
        };
        if let Err(e) = r {
            warn!(guest = %g.id, "could not {} the guest: {e}", if hold { "freeze" } else { "thaw" });
        }
    }

    fn kill_guest(g: &Guest) {
        Self::kill_all(g.cg.as_ref(), g.pid);
    }

    /// Kills every process of the guest: its cgroup's, or without cgroups its process group's.
    fn kill_all(cg: Option<&GuestCgroup>, pgid: u32) {
        match cg {
            Some(cg) => cg.kill(),
            None => fallback::signal_group(pgid as i32, libc::SIGKILL),
        }
    }

    /// Stops one guest as an eviction stops it (a checkpointable one gets SIGTERM and the
    /// kill grace); a queued one is dropped from the queue and ends as evicted at once.
    /// False when no such guest is queued or running.
    pub fn stop_one(&mut self, id: &str) -> bool {
        self.stop_one_within(id, self.kill_grace)
    }

    /// Kills one guest at once, checkpointable or not (a cancelled job, a lost lease: a
    /// checkpoint would be of no use); a queued one is dropped. False as for [`Self::stop_one`].
    pub fn kill_one(&mut self, id: &str) -> bool {
        self.stop_one_within(id, Duration::ZERO)
    }

    fn stop_one_within(&mut self, id: &str, grace: Duration) -> bool {
        if let Some(i) = self.queue.iter().position(|(q, _)| q == id) {
            let (id, spec) = self.queue.remove(i).expect("position() just found this index");
            let dir = self.dir_of(&id, &spec);
            let info = GuestInfo::without_process(id.clone(), GuestPhase::Ended { code: None, signal: None, evicted: true }, &dir);
            let t = GuestTotals { guest: id, cpu_us: 0, wall_ms: 0, peak_mem_bytes: 0 };
            self.ended.push((info, t, true));
            return true;
        }
        let Some(g) = self.guests.iter_mut().find(|g| g.id == id) else { return false };
        if g.stopping {
            if grace.is_zero() && g.kill_at.take().is_some() {
                // Stopping within a grace already: end it now.
                Self::kill_guest(g);
            }
        } else {
            g.stopping = true;
            g.evicted = true;
            if g.held {
                Self::set_held(g, false);
            }
            if g.checkpointable && !grace.is_zero() {
                Self::signal_job(g, libc::SIGTERM);
                g.kill_at = Some(Instant::now() + grace);
            } else {
                Self::kill_guest(g);
            }
            info!(guest = %g.id, "guest stopped on request");
        }
        true
    }

    fn evict_all(&mut self) {
        let now = Instant::now();
        let mut signalled = false;
        for g in self.guests.iter_mut().filter(|g| !g.stopping) {
            g.stopping = true;
            g.evicted = true;
            if g.held {
                // A halted gang member evicted: it must run its checkpoint handler.
                Self::set_held(g, false);
            }
            if g.checkpointable && !self.kill_grace.is_zero() {
                signalled = true;
                Self::signal_job(g, libc::SIGTERM);
                g.kill_at = Some(now + self.kill_grace);
            } else {
                Self::kill_guest(g);
            }
            info!(guest = %g.id, checkpoint = g.checkpointable, "guest evicted");
        }
        if signalled {
            // Frozen guests cannot checkpoint: let them run their handler.
            self.set_frozen(false);
        }
        if !self.guests.is_empty() {
            self.restore_due = true;
        }
    }

    /// The guests' cgroup path as it appears in `/proc/PID/cgroup`.
    fn guest_cgroup_marker(&self) -> String {
        self.cgroups.as_ref().map(Cgroups::marker).unwrap_or_default()
    }

    /// One tick of the runtime: every guest accounted (and ended ones collected), memory
    /// watched, admitted guests started, the owner's protection kept, and the owner's
    /// memory restored once an eviction is complete.
    fn maintain(&mut self) {
        let now = Instant::now();
        let dt = now.duration_since(self.last_tick);
        self.last_tick = now;
        let frozen = self.fast.frozen.load(Ordering::Acquire);
        if frozen && self.fast.boosted.load(Ordering::Acquire) && self.frozen() {
            self.fast.unboost();
        }
        // Accounting, kill deadlines, ends.
        let mut i = 0;
        while i < self.guests.len() {
            Self::account_guest(&mut self.guests[i], now, dt, frozen);
            if Self::guest_gone(&self.guests[i]) {
                let g = self.guests.remove(i);
                self.collect_ended(g);
                continue;
            }
            i += 1;
        }
        self.watch_memory();
        if self.directive == GuestDirective::Accept && !self.pressure.frozen() {
            self.start_admitted();
        }
        if self.guests.is_empty() {
            // No guest left: the owner's protection is put back as it was.
            if self.protection.engaged() {
                self.protection.release();
            }
        } else {
            self.protection.update(memory::meminfo().total);
        }
        if self.restore_due && self.guests.is_empty() && self.restore_job.is_none() {
            self.restore_due = false;
            self.start_owner_restore();
        }
        if self.restore_job.as_ref().is_some_and(|j| j.is_finished()) {
            if let Some(Ok(r)) = self.restore_job.take().map(|j| j.join()) {
                self.owner_restored(r);
            }
        }
    }

    /// A guest's tick: its donated wall time, CPU and memory counters; a disk-cap breach
    /// or a kill deadline acted on; its exit noticed (and its network link closed then).
    fn account_guest(g: &mut Guest, now: Instant, dt: Duration, frozen: bool) {
        // Frozen (by the policy or a gang halt) is not donated wall time: the guest
        // does no work; its CPU counters do not move either.
        if !frozen && !g.stopping && !g.held {
            g.wall_ms += dt.as_millis() as u64;
        }
        match &g.cg {
            Some(cg) => {
                g.cpu = cg.cpu_us();
                g.mem = cg.memory_current();
                g.peak = g.peak.max(cg.memory_peak().unwrap_or(0)).max(g.mem);
            }
            None => {
                let (cpu, rss) = fallback::usage(g.pid as i32);
                g.cpu = (g.cpu.0.max(cpu.0), g.cpu.1.max(cpu.1));
                g.mem = rss;
                g.peak = g.peak.max(rss);
            }
        }
        if g.failure.is_none() && !g.stopping {
            // The guard has killed it already; here it is said and accounted.
            if let Some(over) = g.disk.over() {
                warn!(guest = %g.id, "{over}: guest stopped");
                g.failure = Some(over.to_string());
                g.stopping = true;
                Self::kill_guest(g);
            }
        }
        if g.kill_at.is_some_and(|t| now >= t) {
            g.kill_at = None;
            Self::kill_guest(g);
        }
        if g.exit.is_none() {
            g.exit = g.child.try_wait().ok().flatten();
        }
        if g.exit.is_some() {
            // The sandbox has ended: its network link goes with it.
            if let Some(mut link) = g.link.take() {
                link.close();
            }
        }
    }

    /// Whether nothing of the guest runs any more: its cgroup is empty, or (without one)
    /// it exited and no process of its group is left.
    fn guest_gone(g: &Guest) -> bool {
        match &g.cg {
            Some(cg) => !cg.populated(),
            None => g.exit.is_some() && fallback::members(g.pid as i32).is_empty(),
        }
    }

    /// A guest that is gone, taken out of the runtime: reaped, its cgroup and fast-path
    /// entries removed, its output finished, and its end recorded in `ended`.
    fn collect_ended(&mut self, mut g: Guest) {
        if g.exit.is_none() {
            g.exit = g.child.wait().ok();
        }
        if let Some(cg) = &g.cg {
            cg.remove();
            self.fast.boost.lock().unwrap_or_else(|p| p.into_inner()).retain(|(f, _, _)| !f.starts_with(&cg.cpu));
        }
        self.fast.groups.lock().unwrap_or_else(|p| p.into_inner()).retain(|&p| p != g.pid as i32);
        // Every writer has gone: the last output is in its files before anyone reads them.
        if let Some(pump) = g.pump.take() {
            let cuts = pump.cuts();
            if !pump.finish(Duration::from_millis(200)) {
                warn!(guest = %g.id, "the guest's output is still held open by a process outside it");
            }
            // Output cut at the cap fails the job (its output is not all there).
            if let (None, Some(stream)) = (&g.failure, cuts.first()) {
                let name = if stream == 0 { "stdout" } else { "stderr" };
                g.failure = Some(super::caps::output_limit(name, self.cfg.output_mib));
            }
        }
        let status = g.exit;
        let mut info = g.info(false);
        let (code, signal) = self.isolation.decode(status);
        info.phase = GuestPhase::Ended { code, signal, evicted: g.evicted };
        info!(guest = %g.id, status = ?status, cpu_s = (g.cpu.0 + g.cpu.1) as f64 / 1e6, wall_s = g.wall_ms / 1000, "guest ended");
        self.ended_cpu_us += g.cpu.0 + g.cpu.1;
        self.ended.push((info, g.totals(), false));
    }

    /// Restores the owner's memory once an eviction is complete, on a thread of its own:
    /// swapped pages first (what the owner touches first), then the file cache at low
    /// I/O priority.
    fn start_owner_restore(&mut self) {
        let marker = self.guest_cgroup_marker();
        let snapshot = self.cache_snapshot.take();
        let rules = self.memory_rules();
        self.restore_job = std::thread::Builder::new()
            .name("lull-restore".into())
            .spawn(move || {
                let anon = if memory::meminfo().swap_total > 0 {
                    memory::restore_owner(&marker, Duration::from_secs(60))
                } else {
                    memory::Restore::default()
                };
                let cache = snapshot.map(|snap| {
                    owner_cache::io_priority_for_this_thread(owner_cache::RestoreIo::from_env());
                    let mut gate = owner_cache::PressureGate::new(rules);
                    let mut c =
                        owner_cache::restore(&snap, owner_cache::restore_read_bytes(), || gate.may_continue(), Duration::from_secs(60));
                    (c.idle_looks, c.idle_stops) = (gate.idle_looks, gate.idle_stops);
                    c
                });
                Restored { anon, cache }
            })
            .ok();
    }

    /// The owner's memory restore finished: logged and kept for the status and report.
    fn owner_restored(&mut self, r: Restored) {
        let a = &r.anon;
        if a.swapped_before > 0 {
            info!(
                ms = a.took.as_millis() as u64,
                before_mib = a.swapped_before / MIB,
                after_mib = a.swapped_after / MIB,
                processes = a.processes,
                "owner pages restored from swap"
            );
        }
        if let Some(c) = &r.cache {
            info!(
                ms = c.took.as_millis() as u64,
                recorded_mib = c.recorded_bytes / MIB,
                missing_mib = c.missing_bytes / MIB,
                restored_mib = c.restored_bytes / MIB,
                files = c.files_missing,
                stopped = c.stopped.as_deref().unwrap_or(""),
                idle_looks = c.idle_looks,
                idle_stops = c.idle_stops,
                "owner's file cache read back"
            );
        }
        let report = r.report();
        self.restore_report = Some(report.clone());
        self.last_report = Some(report);
        self.last_restore = Some(r.anon);
        self.last_cache_restore = r.cache;
    }

    /// Pressure (decided by [`guest_memory::PressureWatch`]): freeze guests when
    /// available memory falls below the owner reserve or the owner's memory stall time
    /// (system PSI minus the guests' own) passes the threshold; kill them when it lasts;
    /// thaw when it clears. Also re-clamps caps to what the owner can spare
    /// ([`guest_memory::reclamp`]).
    fn watch_memory(&mut self) {
        // Nothing to guard while no guest exists: an idle agent reads no PSI or meminfo
        // here (the stall baseline restarts with the next guest).
        if self.guests.is_empty() && !self.pressure.frozen() {
            self.pressure.idle();
            return;
        }
        let rules = self.memory_rules();
        let mi = memory::meminfo();
        let stall = StallReading {
            at: crate::clock::mono_now(),
            system_us: memory::system_stall_us().unwrap_or(0),
            guests_us: self.cgroups.as_ref().and_then(|c| c.memory_stall_us()).unwrap_or(0),
        };
        let active = self.guests.iter().any(|g| !g.stopping);
        match self.pressure.step(&rules, mi.available, stall, active) {
            (PressureDecision::Freeze, pct) => {
                warn!(available_mib = mi.available / MIB, owner_stall_pct = pct, "owner memory under pressure: guests frozen");
                self.set_frozen(true);
            }
            (PressureDecision::Kill, _) => {
                warn!("owner memory pressure persists: guests killed");
                let grace = std::mem::replace(&mut self.kill_grace, Duration::ZERO);
                self.evict_all();
                self.kill_grace = grace;
            }
            (PressureDecision::Thaw, _) => {
                info!("owner memory pressure cleared");
                if matches!(self.directive, GuestDirective::Accept | GuestDirective::Linger) {
                    self.set_frozen(false);
                }
            }
            (PressureDecision::Hold, _) => {}
        }
        // Caps: each guest may use at most what it has plus what the owner can spare.
        for g in self.guests.iter_mut().filter(|g| !g.stopping) {
            let Some(cg) = &g.cg else { continue };
            if let Some(want) = guest_memory::reclamp(&rules, mi.available, g.mem, g.cap, g.limit) {
                match cg.set_memory_limit(want) {
                    Ok(()) => g.limit = cg.memory_limit(),
                    Err(e) => tracing::debug!("re-clamping {}'s memory: {e}", g.id),
                }
            }
        }
    }
}

impl GuestHost for LinuxRuntime {
    fn describe(&self) -> String {
        let user = match &self.account {
            Ok(Some(a)) => format!(" · as {}", a.name),
            Ok(None) => String::new(),
            Err(_) => " · NO unprivileged account: guests refused".into(),
        };
        let containment = match &self.cgroups {
            Some(c) => format!("{} in {}", cgroup::describe_containment(c.kind, &c.missing), c.placement),
            None => self.kind.as_str().to_owned(),
        };
        format!(
            "linux: {containment} · sandbox: {} + no-new-privs · SCHED_IDLE, nice 19, idle I/O{user} · disk {} MiB, output {} MiB per stream",
            self.isolation.describe(),
            self.cfg.disk_mib,
            self.cfg.output_mib
        )
    }

    fn apply(&mut self, directive: GuestDirective) {
        self.directive = directive;
        match directive {
            GuestDirective::Accept => {
                if !self.pressure.frozen() {
                    self.set_frozen(false);
                    self.start_admitted();
                }
            }
            GuestDirective::Linger => {
                if !self.pressure.frozen() {
                    self.set_frozen(false);
                }
            }
            GuestDirective::Freeze => self.set_frozen(true),
            GuestDirective::Evict => self.evict_all(),
        }
    }

    fn present(&mut self) -> bool {
        self.maintain();
        !self.guests.is_empty()
    }

    fn reading(&mut self) -> GuestReading {
        let live: u64 = self.guests.iter().map(|g| g.cpu.0 + g.cpu.1).sum();
        GuestReading { cpu_us_total: self.ended_cpu_us + live, mem_bytes: self.guests.iter().map(|g| g.mem).sum() }
    }

    fn totals(&mut self) -> Vec<GuestTotals> {
        crate::guest::totals_to_report(self.guests.iter().map(Guest::totals), &mut self.ended)
    }

    fn fast_freeze(&self) -> Option<FastFreeze> {
        let fast = self.fast.clone();
        Some(Arc::new(move || fast.freeze()))
    }

    fn take_restore(&mut self) -> Option<RestoreReport> {
        self.restore_report.take()
    }

    fn containment_status(&self) -> Option<crate::guest::ContainmentStatus> {
        Some(match &self.cgroups {
            Some(c) => crate::guest::ContainmentStatus {
                summary: cgroup::describe_containment(c.kind, &c.missing),
                kind: c.kind.id().into(),
                placement: c.placement.clone(),
                missing: c.missing.iter().map(ToString::to_string).collect(),
            },
            None => crate::guest::ContainmentStatus {
                summary: self.kind.as_str().into(),
                kind: self.kind.id().into(),
                placement: self.no_cgroups.clone().unwrap_or_default(),
                missing: vec!["no cgroup: a guest that calls setsid escapes freezing and killing; memory capped by RLIMIT_AS only".into()],
            },
        })
    }

    fn owner_memory(&mut self) -> Option<OwnerMemoryStatus> {
        let (protected, guests_memory_high, not_protected) = self.protection.status();
        Some(OwnerMemoryStatus {
            protection: self.protection.describe(),
            last_restore: self.last_report.clone(),
            protected,
            guests_memory_high,
            not_protected,
        })
    }

    fn migration_cost(&mut self) -> Option<Duration> {
        if self.guests.is_empty() {
            return None;
        }
        let now = Instant::now();
        if self.migration.is_none_or(|(at, _)| now.duration_since(at) >= MIGRATION_EVERY) {
            let bytes: u64 = self.guests.iter().map(|g| g.mem + dir_bytes(&g.dir.work(), 100_000)).sum();
            self.migration = Some((now, migration_cost(bytes, self.cfg.migration_bandwidth_mib_s)));
        }
        self.migration.map(|(_, t)| t)
    }

    fn start_guest(&mut self, spec: GuestSpec) -> Option<String> {
        Some(self.submit(spec))
    }

    fn stop_guest(&mut self, id: &str) -> bool {
        self.stop_one(id)
    }

    fn kill_guest(&mut self, id: &str) -> bool {
        self.kill_one(id)
    }

    fn hold_guest(&mut self, id: &str, hold: bool) -> bool {
        self.hold_one(id, hold)
    }

    fn memory(&mut self) -> Option<crate::guest::GuestsMemory> {
        let mi = memory::meminfo();
        let held: u64 = self.guests.iter().map(|g| g.mem).sum();
        let reading = MemoryReading { total: mi.total, available: mi.available };
        let may_hold = guest_memory::guests_may_hold(&self.memory_rules(), reading, held, self.cfg.max_jobs);
        let guests = self
            .guests
            .iter()
            .filter(|g| !g.stopping)
            .map(|g| {
                let ((ws, faults), io) = match &g.cg {
                    Some(cg) => (cg.memory_stat(), cg.io_bytes()),
                    None => ((g.mem, 0), None),
                };
                crate::guest::GuestMemoryReading {
                    id: g.id.clone(),
                    working_set_bytes: ws,
                    major_faults: faults,
                    io_bytes: io,
                    age_ms: g.wall_ms,
                }
            })
            .collect();
        Some(crate::guest::GuestsMemory {
            available_bytes: mi.available,
            guest_memory_bytes: may_hold,
            pressure: self.pressure.frozen(),
            guests,
        })
    }

    fn guest_cgroup(&self) -> Option<String> {
        self.cgroups.as_ref().map(Cgroups::marker)
    }

    fn guest_info(&mut self, id: &str) -> Option<GuestInfo> {
        if let Some(e) = self.ended.iter().rev().find(|e| e.0.id == id) {
            return Some(e.0.clone());
        }
        let frozen = self.fast.frozen.load(Ordering::Acquire);
        if let Some(g) = self.guests.iter().find(|g| g.id == id) {
            return Some(g.info(frozen));
        }
        self.guests().into_iter().find(|g| g.id == id)
    }
}

/// How often the checkpoint size is re-measured.
const MIGRATION_EVERY: Duration = Duration::from_secs(30);
/// Suspend plus resume, the fixed part of T_migr.
const SUSPEND_RESUME: Duration = Duration::from_secs(1);

/// T_migr = suspend + checkpoint bytes / bandwidth + resume (seed 000, eq. 3).
pub fn migration_cost(checkpoint_bytes: u64, bandwidth_mib_s: f64) -> Duration {
    SUSPEND_RESUME + Duration::from_secs_f64(checkpoint_bytes as f64 / MIB as f64 / bandwidth_mib_s.max(0.1))
}

/// Total size of the regular files under `dir`, looking at no more than `max_entries`.
fn dir_bytes(dir: &Path, max_entries: usize) -> u64 {
    let (mut total, mut seen, mut stack) = (0u64, 0usize, vec![dir.to_path_buf()]);
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            seen += 1;
            if seen > max_entries {
                return total;
            }
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) if m.is_file() => total += m.len(),
                _ => {}
            }
        }
    }
    total
}

impl GuestRuntime for LinuxRuntime {
    fn submit(&mut self, spec: GuestSpec) -> String {
        let id = self.next_id();
        self.queue.push_back((id.clone(), spec));
        id
    }

    fn guests(&mut self) -> Vec<GuestInfo> {
        let frozen = self.fast.frozen.load(Ordering::Acquire);
        let mut out: Vec<GuestInfo> = self.ended.iter().map(|e| e.0.clone()).collect();
        out.extend(self.guests.iter().map(|g| g.info(frozen)));
        out.extend(self.queue.iter().map(|(id, spec)| GuestInfo::without_process(id.clone(), GuestPhase::Queued, &self.dir_of(id, spec))));
        out
    }

    fn containment(&self) -> Containment {
        self.kind
    }

    fn idle(&mut self) -> bool {
        self.queue.is_empty() && self.guests.is_empty()
    }
}

impl Drop for LinuxRuntime {
    fn drop(&mut self) {
        for g in &self.guests {
            Self::kill_guest(g);
        }
        for g in &mut self.guests {
            if let Some(cg) = &g.cg {
                cg.wait_empty(Duration::from_secs(2));
                cg.remove();
            }
            let _ = g.child.wait();
        }
        if let Some(c) = &self.cgroups {
            c.remove_all();
        }
        if let Some(j) = self.restore_job.take() {
            let _ = j.join();
        }
    }
}

#[cfg(test)]
mod tests;
