//! Guest cgroups on a pure v2 system and on a hybrid one (v1 memory/cpu/pids controllers
//! plus the v2 unified hierarchy, used only for `cgroup.freeze`, `cgroup.kill`,
//! `cgroup.events` and `cpu.stat`).
//!
//! Layout, per hierarchy: `<base>/guests/<agent instance>/<guest id>`, where the agent
//! instance is `a<pid>-<start time>` (several agents may share a base, e.g. in tests).
//! Freezing all of an agent's guests at once is one write of "1" to its instance's
//! `cgroup.freeze` in the v2 (or unified) hierarchy; killing one guest's whole tree is one
//! write to its `cgroup.kill`. A guest that double-forks, calls setsid or daemonizes stays
//! in its cgroup, so it is frozen and killed with it. At start-up, instances whose agent
//! is gone are killed and removed (the no-orphans backstop).
//!
//! The base is a path below each hierarchy's root (a root agent's `lull`), the agent's own
//! delegated cgroup (`self`), or a delegated scope the owner's systemd made for guests
//! ([`super::delegation`], [`Cgroups::open_delegated`]). On v2 the guests get every
//! controller the base has — `cpu` (`cpu.idle`, else `cpu.weight` 1), `memory`
//! (`memory.max`, `memory.swap.max`), `pids` (`pids.max`), `io` (`io.weight` 1) — and
//! whatever is missing is listed ([`Cgroups::missing`], [`missing_controls`]) so status
//! never says "cgroup v2" for less.

use crate::guest::{Containment, GuestError};
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const ROOT: &str = "/sys/fs/cgroup";

fn cg_err(path: &Path, source: std::io::Error) -> GuestError {
    GuestError::Cgroup { path: path.display().to_string(), source }
}

/// Writes a control file.
pub fn write(path: &Path, value: &str) -> Result<(), GuestError> {
    std::fs::write(path, value).map_err(|e| cg_err(path, e))
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// A `key value` field of a flat-keyed file (cpu.stat, cgroup.events, memory.stat).
pub fn keyed(path: &Path, key: &str) -> Option<u64> {
    read(path)?.lines().find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')).and_then(|v| v.trim().parse().ok()))
}

fn number(path: &Path) -> Option<u64> {
    read(path)?.trim().parse().ok()
}

/// The `total=` stall time (µs) of the "some" line of a PSI file.
pub fn psi_some_total(path: &Path) -> Option<u64> {
    let text = read(path)?;
    let line = text.lines().find(|l| l.starts_with("some"))?;
    line.split_whitespace().find_map(|f| f.strip_prefix("total=")).and_then(|v| v.parse().ok())
}

/// This process's cgroup path in the v2 (or unified) hierarchy, e.g. `/lull/agent`.
pub fn own_unified_path() -> Option<String> {
    read(Path::new("/proc/self/cgroup"))?.lines().find_map(|l| l.strip_prefix("0::").map(str::to_owned))
}

/// This agent's guests' parent directories in each hierarchy.
#[derive(Clone, Debug)]
pub struct Cgroups {
    pub kind: Containment,
    /// `<base>/guests/<instance>` in the v2 / unified hierarchy: freeze, kill, events, cpu.stat.
    pub unified: PathBuf,
    /// v1 memory, cpu and pids instance directories (hybrid only; on v2 all are `unified`).
    pub memory: PathBuf,
    pub cpu: PathBuf,
    pub pids: Option<PathBuf>,
    /// The cpu cgroups above the guests that hold the lowest weight, top-down (the
    /// instance included).
    pub cpu_levels: Vec<PathBuf>,
    /// What the guests lack (controllers, files), each with what it costs.
    pub missing: Vec<MissingControl>,
    /// Where the guests' cgroups are and who gave them, for status: `/lull`, the agent's
    /// own cgroup, or the systemd scope.
    pub placement: String,
    /// The delegated base the agent's own helpers (the watchdog) live in, whose
    /// processes are never the owner's (set for a systemd scope).
    pub delegated_base: Option<PathBuf>,
}

/// One thing guests' cgroups lack, and what that costs the owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingControl {
    /// A controller (`io`) or a file (`cgroup.kill`).
    pub control: &'static str,
    pub consequence: &'static str,
}

impl std::fmt::Display for MissingControl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.control.contains('.') {
            write!(f, "no {}: {}", self.control, self.consequence)
        } else {
            write!(f, "no {} controller: {}", self.control, self.consequence)
        }
    }
}

/// What guests on cgroup v2 lack, from the controllers their cgroup has
/// (`cgroup.controllers` of the agent instance) and which files exist there. The memory
/// controller and `cgroup.freeze` are not listed: without them there is no cgroup
/// containment at all (the process-group fallback).
pub fn missing_controls(controllers: &str, has_swap_max: bool, has_kill: bool) -> Vec<MissingControl> {
    let has = |c: &str| controllers.split_whitespace().any(|w| w == c);
    let mut out = Vec::new();
    if !has("cpu") {
        out.push(MissingControl { control: "cpu", consequence: "guests' CPU weight not lowered (SCHED_IDLE per process only)" });
    }
    if !has("pids") {
        out.push(MissingControl { control: "pids", consequence: "guests' process count not capped" });
    }
    if !has("io") {
        out.push(MissingControl { control: "io", consequence: "guests' disk I/O not weighted" });
    }
    if has("memory") && !has_swap_max {
        out.push(MissingControl { control: "memory.swap.max", consequence: "guests' swap use not capped" });
    }
    if !has_kill {
        out.push(MissingControl { control: "cgroup.kill", consequence: "guests killed process by process" });
    }
    out
}

/// "cgroup v2", or "cgroup v2 (no io controller: guests' disk I/O not weighted)": the
/// containment named with everything it lacks.
pub fn describe_containment(kind: Containment, missing: &[MissingControl]) -> String {
    if missing.is_empty() {
        return kind.as_str().to_owned();
    }
    let list: Vec<String> = missing.iter().map(ToString::to_string).collect();
    format!("{} ({})", kind.as_str(), list.join("; "))
}

/// Start time of a process in clock ticks since boot (field 22 of /proc/PID/stat).
fn start_time(pid: u32) -> Option<u64> {
    let stat = read(Path::new(&format!("/proc/{pid}/stat")))?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(19)?.parse().ok()
}

/// A new instance directory name for this agent: `a<pid>-<start time>-<n>` (n counts
/// runtimes within one process).
pub fn instance_name() -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let pid = std::process::id();
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("a{pid}-{}-{n}", start_time(pid).unwrap_or(0))
}

/// Whether the agent that made instance directory `name` still runs.
pub fn instance_alive(name: &str) -> bool {
    let mut it = name.strip_prefix('a').unwrap_or("").split('-');
    match (it.next().and_then(|p| p.parse::<u32>().ok()), it.next().and_then(|s| s.parse::<u64>().ok())) {
        (Some(pid), Some(start)) => start_time(pid) == Some(start),
        _ => false,
    }
}

/// One guest's cgroup directories.
#[derive(Clone, Debug)]
pub struct GuestCgroup {
    pub unified: PathBuf,
    pub memory: PathBuf,
    pub cpu: PathBuf,
    pub pids: Option<PathBuf>,
    kind: Containment,
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Cgroups {
    /// Finds the cgroup layout and creates `<base>/guests` in each hierarchy. `base` is
    /// relative to each hierarchy's root, or `self` for the agent's own (delegated) v2
    /// cgroup, into whose `agent` leaf the agent then moves itself.
    pub fn open(base: &str) -> Result<Self, GuestError> {
        let root = Path::new(ROOT);
        if root.join("cgroup.controllers").exists() {
            Self::open_v2(root, base)
        } else if root.join("unified/cgroup.procs").exists() && root.join("memory/cgroup.procs").exists() {
            Self::open_hybrid(root, base)
        } else {
            Err(GuestError::NoCgroups(format!("neither a cgroup v2 nor a hybrid hierarchy at {ROOT}")))
        }
    }

    fn base_rel(base: &str) -> Result<String, GuestError> {
        if base == "self" {
            let own = own_unified_path().ok_or_else(|| GuestError::NoCgroups("no v2 entry in /proc/self/cgroup".into()))?;
            // Already moved into the leaf by an earlier start: the base is its parent.
            let own = own.strip_suffix("/agent").map(str::to_owned).unwrap_or(own);
            Ok(own.trim_start_matches('/').to_owned())
        } else {
            Ok(base.trim_start_matches('/').to_owned())
        }
    }

    /// Unprivileged, moving processes between v2 cgroups needs write access to their
    /// common ancestor: the agent must already live inside the delegated subtree. Moves
    /// it into the `agent` leaf so the base itself holds no processes.
    fn enter_agent_leaf(v2root: &Path, rel: &str) -> Result<(), GuestError> {
        let own = own_unified_path().unwrap_or_default();
        let base_cg = format!("/{rel}");
        let inside = own == base_cg || own.starts_with(&format!("{base_cg}/"));
        if !inside {
            if is_root() {
                return Ok(());
            }
            return Err(GuestError::NoCgroups(format!(
                "the agent (in {own}) is not inside its delegated cgroup subtree {base_cg}; \
                 start it inside the subtree (systemd Delegate=yes, or ci/setup-guest.sh's layout)"
            )));
        }
        if own == base_cg {
            let leaf = v2root.join(rel).join("agent");
            std::fs::create_dir_all(&leaf).map_err(|e| cg_err(&leaf, e))?;
            write(&leaf.join("cgroup.procs"), "0")?;
        }
        Ok(())
    }

    fn open_v2(root: &Path, base: &str) -> Result<Self, GuestError> {
        let rel = Self::base_rel(base)?;
        let base_dir = root.join(&rel);
        std::fs::create_dir_all(&base_dir).map_err(|e| cg_err(&base_dir, e))?;
        Self::enter_agent_leaf(root, &rel)?;
        let placement = if base == "self" { format!("the agent's own cgroup /{rel}") } else { format!("/{rel}") };
        Self::build_v2(root, &rel, placement, true)
    }

    /// Guests in a delegated v2 cgroup the owner's systemd made (`rel`, below the v2
    /// root), which holds one of the agent's processes (the watchdog): it moves into the
    /// `leaf` child first (no internal processes once controllers are enabled below).
    pub fn open_delegated(rel: &str, leaf: &str, placement: String) -> Result<Self, GuestError> {
        let root = Path::new(ROOT);
        let base_dir = root.join(rel);
        let leaf_dir = base_dir.join(leaf);
        std::fs::create_dir_all(&leaf_dir).map_err(|e| cg_err(&leaf_dir, e))?;
        for pid in read(&base_dir.join("cgroup.procs")).unwrap_or_default().split_whitespace() {
            write(&leaf_dir.join("cgroup.procs"), pid)?;
        }
        let mut c = Self::build_v2(root, rel, placement, false)?;
        c.delegated_base = Some(base_dir);
        Ok(c)
    }

    /// `<base>/guests/<instance>` with every controller the base offers enabled down to
    /// it, the lowest CPU weight on every level we may set (`own_base_weight`: also on
    /// the base itself), and the list of what is missing.
    fn build_v2(root: &Path, rel: &str, placement: String, own_base_weight: bool) -> Result<Self, GuestError> {
        let base_dir = root.join(rel);
        let parent = base_dir.join("guests");
        let guests = parent.join(instance_name());
        std::fs::create_dir_all(&guests).map_err(|e| cg_err(&guests, e))?;
        let offered = read(&base_dir.join("cgroup.controllers")).unwrap_or_default();
        for dir in [&base_dir, &parent, &guests] {
            for c in ["memory", "cpu", "pids", "io"] {
                if !offered.split_whitespace().any(|w| w == c) && c != "memory" {
                    continue;
                }
                if let Err(e) = write(&dir.join("cgroup.subtree_control"), &format!("+{c}")) {
                    if c == "memory" {
                        return Err(GuestError::NoCgroups(format!(
                            "no memory controller for guests in {} (it offers: {}): {e}",
                            base_dir.display(),
                            if offered.trim().is_empty() { "none" } else { offered.trim() }
                        )));
                    }
                    tracing::warn!("cgroup controller {c} unavailable for guests: {e}");
                }
            }
        }
        // Lowest weight at every level, from the base (where the subtree meets its
        // siblings) down. A delegated base cannot always set its own weight: the unit
        // does (the scope's CPUWeight=idle); it is still boosted while freezing.
        let mut cpu_levels = Vec::new();
        for dir in [&base_dir, &parent, &guests] {
            let ours = own_base_weight || dir != &base_dir;
            if (ours && set_v2_cpu_lowest(dir).is_ok()) || (!ours && dir.join("cpu.weight").exists()) {
                cpu_levels.push(dir.clone());
            } else if dir == &base_dir && dir.join("cpu.weight").exists() {
                tracing::warn!(
                    "could not set the lowest CPU weight on {}: the guests' subtree should be its own unit with CPUWeight=idle",
                    base_dir.display()
                );
            }
        }
        let missing = missing_controls(
            &read(&guests.join("cgroup.controllers")).unwrap_or_default(),
            guests.join("memory.swap.max").exists(),
            guests.join("cgroup.kill").exists(),
        );
        Ok(Self {
            kind: Containment::CgroupV2,
            unified: guests.clone(),
            memory: guests.clone(),
            cpu: guests.clone(),
            pids: Some(guests),
            cpu_levels,
            missing,
            placement,
            delegated_base: None,
        })
    }

    fn open_hybrid(root: &Path, base: &str) -> Result<Self, GuestError> {
        let rel = Self::base_rel(base)?;
        let unified_root = root.join("unified");
        let ubase = unified_root.join(&rel);
        std::fs::create_dir_all(&ubase).map_err(|e| cg_err(&ubase, e))?;
        Self::enter_agent_leaf(&unified_root, &rel)?;
        let inst = instance_name();
        let unified = ubase.join("guests").join(&inst);
        let memory = root.join("memory").join(&rel).join("guests").join(&inst);
        let cpu_root = if root.join("cpu/cgroup.procs").exists() { root.join("cpu") } else { root.join("cpu,cpuacct") };
        // The lowest weight must hold where the subtree meets its siblings (the top
        // component of the base), not only below it: set it on every level.
        let mut level = cpu_root.clone();
        let mut cpu_levels = Vec::new();
        for part in rel.split('/').filter(|p| !p.is_empty()).chain(["guests"]) {
            level = level.join(part);
            set_v1_cpu_if_present(&level);
            cpu_levels.push(level.clone());
        }
        let cpu = level.join(&inst);
        for d in [&unified, &memory, &cpu] {
            std::fs::create_dir_all(d).map_err(|e| cg_err(d, e))?;
        }
        let pids_dir = root.join("pids").join(&rel).join("guests").join(&inst);
        let pids = std::fs::create_dir_all(&pids_dir).ok().map(|_| pids_dir);
        if !unified.join("cgroup.freeze").exists() {
            return Err(GuestError::NoCgroups("the unified hierarchy has no cgroup.freeze (kernel older than 5.2)".into()));
        }
        set_v1_cpu(&cpu)?;
        cpu_levels.push(cpu.clone());
        let mut missing = Vec::new();
        if pids.is_none() {
            missing.push(MissingControl { control: "pids", consequence: "guests' process count not capped" });
        }
        if !unified.join("cgroup.kill").exists() {
            missing.push(MissingControl { control: "cgroup.kill", consequence: "guests killed process by process" });
        }
        let placement = format!("/{rel}");
        Ok(Self { kind: Containment::Hybrid, unified, memory, cpu, pids, cpu_levels, missing, placement, delegated_base: None })
    }

    /// The file whose "1" freezes every guest at once.
    pub fn freeze_file(&self) -> PathBuf {
        self.unified.join("cgroup.freeze")
    }

    /// The file whose "1" kills every guest at once.
    pub fn kill_file(&self) -> PathBuf {
        self.unified.join("cgroup.kill")
    }

    /// Freezes (true) or thaws every guest.
    pub fn set_frozen(&self, frozen: bool) -> Result<(), GuestError> {
        write(&self.freeze_file(), if frozen { "1" } else { "0" })
    }

    /// Whether the kernel reports every guest frozen.
    pub fn frozen(&self) -> bool {
        keyed(&self.unified.join("cgroup.events"), "frozen") == Some(1)
    }

    /// The CPU-weight files of the cpu cgroup `dir` with their freeze-time (normal) and
    /// guest (lowest) values, in the order to raise them.
    pub fn boost_files(&self, dir: &Path) -> Vec<(PathBuf, &'static str, &'static str)> {
        match self.kind {
            Containment::Hybrid => {
                let mut v = Vec::new();
                if dir.join("cpu.idle").exists() {
                    v.push((dir.join("cpu.idle"), "0", "1"));
                }
                v.push((dir.join("cpu.shares"), "1024", "2"));
                v
            }
            _ => {
                let mut v = Vec::new();
                if dir.join("cpu.idle").exists() {
                    v.push((dir.join("cpu.idle"), "0", "1"));
                }
                v.push((dir.join("cpu.weight"), "100", "1"));
                v
            }
        }
    }

    /// The path fragment of `/proc/PID/cgroup` lines whose processes are Lull's (guests,
    /// and the watchdog in a delegated scope), never the owner's.
    pub fn marker(&self) -> String {
        let dir = self.delegated_base.as_ref().unwrap_or(&self.unified);
        let u = dir.to_string_lossy();
        u.strip_prefix("/sys/fs/cgroup/unified").or_else(|| u.strip_prefix(ROOT)).unwrap_or(&u).to_owned()
    }

    /// Total "some" memory stall time of all guests, µs.
    pub fn memory_stall_us(&self) -> Option<u64> {
        psi_some_total(&self.unified.join("memory.pressure"))
    }

    /// Creates one guest's cgroups with the lowest CPU weight, a pids limit and, when
    /// `cpu_max` (a fraction of the whole machine) is below 1, a CPU bandwidth quota.
    pub fn create(&self, id: &str, pids_max: u64, cpu_max: f64) -> Result<GuestCgroup, GuestError> {
        let g = GuestCgroup {
            unified: self.unified.join(id),
            memory: self.memory.join(id),
            cpu: self.cpu.join(id),
            pids: self.pids.as_ref().map(|p| p.join(id)),
            kind: self.kind,
        };
        for d in [&g.unified, &g.memory, &g.cpu].into_iter().chain(g.pids.as_ref()) {
            std::fs::create_dir_all(d).map_err(|e| cg_err(d, e))?;
        }
        match self.kind {
            Containment::Hybrid => {
                set_v1_cpu(&g.cpu)?;
                let _ = write(&g.memory.join("memory.swappiness"), "0");
            }
            _ => {
                let _ = set_v2_cpu_lowest(&g.cpu);
                for (file, value) in [("io.weight", "default 1"), ("io.bfq.weight", "default 1")] {
                    if g.unified.join(file).exists() {
                        let _ = write(&g.unified.join(file), value);
                    }
                }
            }
        }
        if let Some(p) = &g.pids {
            let _ = write(&p.join("pids.max"), &pids_max.to_string());
        }
        if cpu_max < 1.0 {
            let quota = cpu_quota_us(cpu_max, std::thread::available_parallelism().map_or(1, |n| n.get()));
            let set = match self.kind {
                Containment::Hybrid => write(&g.cpu.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())
                    .and_then(|_| write(&g.cpu.join("cpu.cfs_quota_us"), &quota.to_string())),
                _ => write(&g.cpu.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}")),
            };
            if let Err(e) = set {
                tracing::warn!("could not cap guest CPU at {:.0} %: {e}", cpu_max * 100.0);
            }
        }
        Ok(g)
    }

    /// Kills and removes the guest cgroups of agent instances that are gone (after a
    /// crash or kill -9). Returns how many guests there were.
    pub fn cleanup_stale(&self) -> usize {
        let parent = |p: &Path| p.parent().map(Path::to_path_buf);
        let Some(uparent) = parent(&self.unified) else { return 0 };
        let Ok(entries) = std::fs::read_dir(&uparent) else { return 0 };
        let mut n = 0;
        for inst in entries.flatten().filter(|e| e.path().is_dir()) {
            let name = inst.file_name().to_string_lossy().into_owned();
            if inst.path() == self.unified || instance_alive(&name) {
                continue;
            }
            let dirs = |p: &Path| parent(p).map(|d| d.join(&name));
            let stale = Cgroups {
                cpu_levels: Vec::new(),
                missing: Vec::new(),
                placement: String::new(),
                delegated_base: None,
                kind: self.kind,
                unified: inst.path(),
                memory: dirs(&self.memory).unwrap_or_else(|| inst.path()),
                cpu: dirs(&self.cpu).unwrap_or_else(|| inst.path()),
                pids: self.pids.as_deref().and_then(dirs),
            };
            n += stale.remove_all();
        }
        n
    }

    /// Kills every guest of this instance and removes all its directories. Returns how
    /// many guests there were.
    pub fn remove_all(&self) -> usize {
        let mut n = 0;
        if let Ok(entries) = std::fs::read_dir(&self.unified) {
            for e in entries.flatten().filter(|e| e.path().is_dir()) {
                let id = e.file_name().to_string_lossy().into_owned();
                let g = GuestCgroup {
                    unified: self.unified.join(&id),
                    memory: self.memory.join(&id),
                    cpu: self.cpu.join(&id),
                    pids: self.pids.as_ref().map(|p| p.join(&id)),
                    kind: self.kind,
                };
                g.kill();
                g.wait_empty(Duration::from_secs(2));
                g.remove();
                n += 1;
            }
        }
        // v1 hierarchies may hold leftovers the unified one no longer lists.
        for dir in [&self.memory, &self.cpu].into_iter().chain(self.pids.as_ref()) {
            if dir == &self.unified {
                continue;
            }
            if let Ok(entries) = std::fs::read_dir(dir) {
                for e in entries.flatten().filter(|e| e.path().is_dir()) {
                    kill_procs(&e.path());
                    let _ = std::fs::remove_dir(e.path());
                }
            }
        }
        for dir in [&self.unified, &self.memory, &self.cpu].into_iter().chain(self.pids.as_ref()) {
            let _ = std::fs::remove_dir(dir);
        }
        n
    }
}

fn set_v1_cpu_if_present(dir: &Path) {
    if std::fs::create_dir_all(dir).is_ok() {
        let _ = set_v1_cpu(dir);
    }
}

/// The CPU bandwidth period for a capped guest, µs (the kernel's default).
pub const CPU_PERIOD_US: u64 = 100_000;

/// The quota per [`CPU_PERIOD_US`] that lets a guest use `cpu_max` of `cpus` cores (at
/// least 1 ms, the kernel's minimum).
pub fn cpu_quota_us(cpu_max: f64, cpus: usize) -> u64 {
    ((cpu_max.clamp(0.0, 1.0) * cpus as f64 * CPU_PERIOD_US as f64) as u64).max(1_000)
}

/// v1 cpu: the smallest share (2) and, where the kernel has it, `cpu.idle` (the group is
/// scheduled like SCHED_IDLE; the kernel then refuses share changes, so an idle group
/// from an earlier start is left as is).
fn set_v1_cpu(dir: &Path) -> Result<(), GuestError> {
    if number(&dir.join("cpu.idle")) != Some(1) {
        write(&dir.join("cpu.shares"), "2")?;
    }
    let _ = write(&dir.join("cpu.idle"), "1");
    Ok(())
}

/// v2 cpu: `cpu.idle` 1 where the kernel has it (the group is scheduled like
/// SCHED_IDLE against its siblings), over the smallest weight (1). An idle group refuses
/// weight changes: one already idle is left as is.
fn set_v2_cpu_lowest(dir: &Path) -> Result<(), GuestError> {
    if number(&dir.join("cpu.idle")) == Some(1) {
        return Ok(());
    }
    write(&dir.join("cpu.weight"), "1")?;
    let _ = write(&dir.join("cpu.idle"), "1");
    Ok(())
}

/// SIGKILLs every process listed in a cgroup's `cgroup.procs` (for hierarchies without
/// `cgroup.kill`).
fn kill_procs(dir: &Path) {
    for pid in read(&dir.join("cgroup.procs")).unwrap_or_default().lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

impl GuestCgroup {
    /// The `cgroup.procs` files a new guest process writes "0" into before exec, so its
    /// whole future tree is contained from its first instruction.
    pub fn procs_files(&self) -> Vec<CString> {
        let mut dirs = vec![&self.unified];
        if self.kind == Containment::Hybrid {
            dirs.push(&self.memory);
            dirs.push(&self.cpu);
            if let Some(p) = &self.pids {
                dirs.push(p);
            }
        }
        // Paths come from directory names we made; they hold no NUL.
        dirs.iter().filter_map(|d| CString::new(d.join("cgroup.procs").into_os_string().into_encoded_bytes()).ok()).collect()
    }

    /// Sets the hard memory limit, without swap. On v2 `memory.high` stays `max`: with no
    /// swap it could only throttle a runaway guest, which then holds its memory for minutes
    /// instead of being killed inside its own cgroup at `memory.max` (seen in the VM bench,
    /// case 29-hostile-memory). The owner's protection, where it needs a `memory.high`, puts
    /// one on all the guests together (`owner_protect.rs`).
    pub fn set_memory_limit(&self, bytes: u64) -> Result<(), GuestError> {
        match self.kind {
            Containment::Hybrid => {
                let (limit, memsw) = (self.memory.join("memory.limit_in_bytes"), self.memory.join("memory.memsw.limit_in_bytes"));
                let current = number(&limit).unwrap_or(u64::MAX);
                // memsw must stay ≥ the limit: raise it first when raising, lower it last.
                if bytes > current {
                    let _ = write(&memsw, &bytes.to_string());
                    write(&limit, &bytes.to_string())?;
                } else {
                    write(&limit, &bytes.to_string())?;
                    if memsw.exists() {
                        write(&memsw, &bytes.to_string())?;
                    }
                }
                Ok(())
            }
            _ => {
                write(&self.memory.join("memory.max"), &bytes.to_string())?;
                let _ = write(&self.memory.join("memory.swap.max"), "0");
                let _ = write(&self.memory.join("memory.high"), "max");
                Ok(())
            }
        }
    }

    /// The current hard memory limit.
    pub fn memory_limit(&self) -> Option<u64> {
        match self.kind {
            Containment::Hybrid => number(&self.memory.join("memory.limit_in_bytes")),
            _ => read(&self.memory.join("memory.max")).and_then(|s| s.trim().parse().ok()),
        }
    }

    /// Current memory use.
    pub fn memory_current(&self) -> u64 {
        match self.kind {
            Containment::Hybrid => number(&self.memory.join("memory.usage_in_bytes")),
            _ => number(&self.memory.join("memory.current")),
        }
        .unwrap_or(0)
    }

    /// Peak memory use as the kernel recorded it (v1 max_usage, v2 memory.peak), if it does.
    pub fn memory_peak(&self) -> Option<u64> {
        match self.kind {
            Containment::Hybrid => number(&self.memory.join("memory.max_usage_in_bytes")),
            _ => number(&self.memory.join("memory.peak")),
        }
    }

    /// Seed 001's measures of the guest's memory from one read of `memory.stat`: its
    /// working set (memory in use less the inactive file cache the kernel reclaims first)
    /// and its major page faults so far.
    pub fn memory_stat(&self) -> (u64, u64) {
        let stat = read(&self.memory.join("memory.stat")).unwrap_or_default();
        let field = |k: &str| stat.lines().find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.trim().parse::<u64>().ok());
        let (inactive, faults) = match self.kind {
            // v1 counts the cgroup's own pages under `total_*` (its children included).
            Containment::Hybrid => (field("total_inactive_file"), field("total_pgmajfault")),
            _ => (field("inactive_file"), field("pgmajfault")),
        };
        (self.memory_current().saturating_sub(inactive.unwrap_or(0)), faults.unwrap_or(0))
    }

    /// Bytes read and written so far (`io.stat` in the v2 or unified hierarchy, summed over
    /// devices); `None` where the io controller does not count for the guest.
    pub fn io_bytes(&self) -> Option<u64> {
        let text = read(&self.unified.join("io.stat"))?;
        let mut total = 0u64;
        for f in text.split_whitespace() {
            if let Some(v) = f.strip_prefix("rbytes=").or_else(|| f.strip_prefix("wbytes=")) {
                total = total.saturating_add(v.parse().unwrap_or(0));
            }
        }
        Some(total)
    }

    /// How many times the guest hit its memory limit (OOM kills inside the cgroup).
    pub fn oom_kills(&self) -> u64 {
        match self.kind {
            Containment::Hybrid => keyed(&self.memory.join("memory.oom_control"), "oom_kill").unwrap_or(0),
            _ => keyed(&self.memory.join("memory.events"), "oom_kill").unwrap_or(0),
        }
    }

    /// CPU time used, user and system, µs (the unified `cpu.stat` is always there).
    pub fn cpu_us(&self) -> (u64, u64) {
        let f = self.unified.join("cpu.stat");
        (keyed(&f, "user_usec").unwrap_or(0), keyed(&f, "system_usec").unwrap_or(0))
    }

    /// Whether any process is left in the guest's cgroup.
    pub fn populated(&self) -> bool {
        keyed(&self.unified.join("cgroup.events"), "populated") != Some(0)
    }

    /// The guest's processes.
    pub fn pids(&self) -> Vec<i32> {
        read(&self.unified.join("cgroup.procs")).unwrap_or_default().lines().filter_map(|l| l.trim().parse().ok()).collect()
    }

    /// Sends `sig` to every process of the guest.
    pub fn signal(&self, sig: i32) {
        for pid in self.pids() {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(pid, sig) };
        }
    }

    /// Kills the whole tree, frozen or not.
    pub fn kill(&self) {
        if write(&self.unified.join("cgroup.kill"), "1").is_err() {
            kill_procs(&self.unified);
        }
    }

    /// Waits until the cgroup is empty; true if it emptied in time.
    pub fn wait_empty(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.populated() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    /// Removes the (empty) cgroup directories.
    pub fn remove(&self) {
        for d in [&self.unified, &self.memory, &self.cpu].into_iter().chain(self.pids.as_ref()) {
            let _ = std::fs::remove_dir(d);
        }
    }
}
