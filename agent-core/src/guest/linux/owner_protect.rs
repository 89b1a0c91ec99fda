//! The owner's session protected while guests run, so the kernel reclaims from guests
//! before the owner (seed 000 §4's priority page pools, in cgroup terms):
//!
//! - **cgroup v2**: `memory.low` on the owner's session cgroup (the kernel reclaims
//!   protected memory only when nothing unprotected is left).
//! - **cgroup v1** (the memory controller of a hybrid system): `memory.soft_limit_in_bytes`
//!   of 0 on the guests' instance cgroup and the protection as the owner's session's soft
//!   limit. Under machine-wide pressure the kernel first reclaims from the groups furthest
//!   above their soft limit — the guests, whose every page is above 0. (A v1 soft limit is
//!   not consulted when a *parent's* hard limit is hit; v2's `memory.low` is.)
//!
//! How much ([`protection_for`]: fixed, or the owner's recent working set, peak while
//! guests run, plus a quarter) and where ([`session_candidates`]: the owner's
//! `user-UID.slice` or the session cgroup below it that holds most of the owner's
//! processes and none of the guests, the first the agent can write; or
//! `[memory] owner_cgroup`) are decided in the core. The protection is written when the
//! first guest starts, raised as the owner grows while guests run, and the previous value
//! is put back when the last guest has gone and when the agent exits. Where nothing can be
//! written, it says why once in the log and in `lull status`.

use super::cgroup::{keyed, Cgroups};
use crate::guest::Containment;
use lull_core::guest_memory::MIB;
use lull_core::owner_memory::{protection_for, protection_update, session_candidates, working_set, WarmRules};
use std::path::{Path, PathBuf};
use tracing::{info, warn};

const ROOT: &str = "/sys/fs/cgroup";

/// Which memory controller the guests are under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flavour {
    V2,
    V1,
}

impl Flavour {
    fn root(self) -> PathBuf {
        match self {
            Flavour::V2 => PathBuf::from(ROOT),
            Flavour::V1 => Path::new(ROOT).join("memory"),
        }
    }
    fn protect_file(self) -> &'static str {
        match self {
            Flavour::V2 => "memory.low",
            Flavour::V1 => "memory.soft_limit_in_bytes",
        }
    }
    fn usage_file(self) -> &'static str {
        match self {
            Flavour::V2 => "memory.current",
            Flavour::V1 => "memory.usage_in_bytes",
        }
    }
    fn inactive_file_key(self) -> &'static str {
        match self {
            Flavour::V2 => "inactive_file",
            Flavour::V1 => "total_inactive_file",
        }
    }
}

/// The protection in force, and how to undo it.
pub struct OwnerProtection {
    rules: WarmRules,
    /// `[memory] owner_cgroup`, or empty to find it.
    configured: String,
    flavour: Option<Flavour>,
    /// The root of the protected memory hierarchy (`/sys/fs/cgroup` on v2,
    /// `/sys/fs/cgroup/memory` on a hybrid system).
    root: PathBuf,
    /// The guests' instance cgroup in the memory hierarchy (v1: its soft limit is set to 0).
    guests_memory: Option<PathBuf>,
    /// The cgroup protected now, while guests run.
    target: Option<PathBuf>,
    /// Files written, with the value each held before (put back on release).
    saved: Vec<(PathBuf, String)>,
    written: Option<u64>,
    peak_working_set: u64,
    /// Why there is no protection, once said.
    why_not: Option<String>,
}

impl OwnerProtection {
    /// Protection for guests under `cgroups` (none: nothing to protect against).
    pub fn new(cgroups: Option<&Cgroups>, memory: &crate::config::Memory, rules: WarmRules) -> Self {
        let flavour = cgroups.and_then(|c| match c.kind {
            Containment::CgroupV2 => Some(Flavour::V2),
            Containment::Hybrid => Some(Flavour::V1),
            Containment::ProcessGroup => None,
        });
        Self {
            rules,
            configured: memory.owner_cgroup.clone(),
            root: flavour.map_or_else(|| PathBuf::from(ROOT), |f| f.root()),
            flavour,
            guests_memory: cgroups.map(|c| c.memory.clone()),
            target: None,
            saved: Vec::new(),
            written: None,
            peak_working_set: 0,
            why_not: None,
        }
    }

    /// The cgroup v2 path (`memory.low`) on the v2 hierarchy mounted at `root`, guests in
    /// `guests` (a directory of it): what [`Self::new`] makes on a pure v2 system, for
    /// tests that run it on whichever v2 hierarchy the machine has (a hybrid system's
    /// `/sys/fs/cgroup/unified`).
    #[cfg(test)]
    pub(crate) fn v2_at(root: &Path, guests: &Path, memory: &crate::config::Memory, rules: WarmRules) -> Self {
        let mut p = Self::new(None, memory, rules);
        p.flavour = Some(Flavour::V2);
        p.root = root.to_path_buf();
        p.guests_memory = Some(guests.to_path_buf());
        p
    }

    /// What `lull status` says about it.
    pub fn describe(&self) -> String {
        let Some(f) = self.flavour else {
            return "none: guests are not in cgroups".into();
        };
        if !self.rules.protect {
            return "off (memory.protect_owner = false)".into();
        }
        match (&self.target, self.written, &self.why_not) {
            (Some(t), Some(b), _) => {
                let how = match f {
                    Flavour::V2 => "memory.low",
                    Flavour::V1 => "soft limit (guests' soft limit 0)",
                };
                let cg = t.strip_prefix(&self.root).map(|p| format!("/{}", p.display())).unwrap_or_else(|_| t.display().to_string());
                format!("{how} {} MiB on {cg} while guests run", b / MIB)
            }
            (_, _, Some(why)) => format!("none: {why}"),
            _ => format!("{} on the owner's session while guests run (none run now)", f.protect_file()),
        }
    }

    /// The cgroups (in the protected hierarchy) the processes `pids` are in.
    fn owner_cgroups(f: Flavour, pids: &[u32]) -> Vec<String> {
        pids.iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/cgroup")).ok())
            .filter_map(|text| text.lines().find_map(|l| memory_cgroup_of_line(f, l)))
            .collect()
    }

    fn find_target(&self, f: Flavour, owner_pids: &[u32]) -> Result<PathBuf, String> {
        let file = f.protect_file();
        let writable = |dir: &Path| std::fs::OpenOptions::new().write(true).open(dir.join(file)).map(|_| ()).map_err(|e| e.to_string());
        if !self.configured.is_empty() {
            let dir = self.root.join(self.configured.trim_start_matches('/'));
            return writable(&dir)
                .map(|_| dir.clone())
                .map_err(|e| format!("cannot write {file} of the configured owner cgroup {}: {e}", dir.display()));
        }
        let guests = self
            .guests_memory
            .as_ref()
            .and_then(|g| g.strip_prefix(&self.root).ok())
            .map(|p| format!("/{}", p.display()))
            .unwrap_or_default();
        let owner = Self::owner_cgroups(f, owner_pids);
        let candidates = session_candidates(&owner, &guests);
        if candidates.is_empty() {
            let mut seen: Vec<&String> = owner.iter().collect();
            seen.sort();
            seen.dedup();
            let shown: Vec<&str> = seen.iter().take(3).map(|s| s.as_str()).collect();
            return Err(format!(
                "no owner session cgroup (user-UID.slice) among the owner's processes' cgroups ({}); set [memory] owner_cgroup",
                shown.join(", ")
            ));
        }
        let mut last = String::new();
        for c in &candidates {
            let dir = self.root.join(c.trim_start_matches('/'));
            match writable(&dir) {
                Ok(()) => return Ok(dir),
                Err(e) => last = format!("cannot write {file} of {c} (nor of {} other candidates): {e}", candidates.len() - 1),
            }
        }
        Err(last)
    }

    /// The owner's working set now, from the protected cgroup's counters.
    fn working_set(f: Flavour, dir: &Path) -> Option<u64> {
        let usage: u64 = std::fs::read_to_string(dir.join(f.usage_file())).ok()?.trim().parse().ok()?;
        let inactive = keyed(&dir.join("memory.stat"), f.inactive_file_key()).unwrap_or(0);
        Some(working_set(usage, inactive))
    }

    fn write(&mut self, file: PathBuf, value: u64) -> std::io::Result<()> {
        if !self.saved.iter().any(|(p, _)| p == &file) {
            let before = std::fs::read_to_string(&file)?.trim().to_owned();
            std::fs::write(&file, value.to_string())?;
            self.saved.push((file, before));
            return Ok(());
        }
        std::fs::write(&file, value.to_string())
    }

    /// At start-up: finds the owner's session without writing anything, so that a
    /// machine where nothing can be protected says so (once) before any guest runs.
    pub fn probe(&mut self, owner_pids: &[u32]) {
        let Some(f) = self.flavour else { return };
        if !self.rules.protect {
            return;
        }
        if let Err(why) = self.find_target(f, owner_pids) {
            warn!("the owner's memory will not be protected from guests: {why}");
            self.why_not = Some(why);
        }
    }

    /// The first guest is starting: find the owner's session and protect it.
    /// `owner_pids`: the owner's processes (guests excluded).
    pub fn engage(&mut self, owner_pids: &[u32], total: u64) {
        let Some(f) = self.flavour else { return };
        if !self.rules.protect || self.target.is_some() {
            return;
        }
        match self.find_target(f, owner_pids) {
            Ok(dir) => {
                if f == Flavour::V1 {
                    if let Some(g) = self.guests_memory.clone() {
                        if let Err(e) = self.write(g.join("memory.soft_limit_in_bytes"), 0) {
                            warn!("could not set the guests' memory soft limit to 0: {e}");
                        }
                    }
                }
                self.peak_working_set = Self::working_set(f, &dir).unwrap_or(0);
                self.target = Some(dir);
                self.why_not = None;
                self.update(total);
            }
            Err(why) => {
                if self.why_not.as_deref() != Some(why.as_str()) {
                    warn!("the owner's memory is not protected from guests: {why}");
                }
                self.why_not = Some(why);
            }
        }
    }

    /// While guests run: follows the owner's working set (its peak) upwards.
    pub fn update(&mut self, total: u64) {
        let (Some(f), Some(dir)) = (self.flavour, self.target.clone()) else { return };
        if let Some(ws) = Self::working_set(f, &dir) {
            self.peak_working_set = self.peak_working_set.max(ws);
        }
        let Some(want) = protection_for(&self.rules, self.peak_working_set, total) else { return };
        if let Some(v) = protection_update(want, self.written) {
            match self.write(dir.join(f.protect_file()), v) {
                Ok(()) => {
                    if self.written.is_none() {
                        info!(mib = v / MIB, cgroup = %dir.display(), file = f.protect_file(), "owner's memory protected while guests run");
                    }
                    self.written = Some(v);
                }
                Err(e) => {
                    let why = format!("writing {} of {}: {e}", f.protect_file(), dir.display());
                    warn!("the owner's memory is not protected from guests: {why}");
                    self.why_not = Some(why);
                    self.target = None;
                }
            }
        }
    }

    /// The last guest has gone (or the agent ends): every value written is put back.
    pub fn release(&mut self) {
        for (file, before) in self.saved.drain(..).rev() {
            // The guests' own cgroup may be gone already: nothing to put back there.
            if file.exists() {
                if let Err(e) = std::fs::write(&file, &before) {
                    warn!("could not put back {} = {before}: {e}", file.display());
                }
            }
        }
        self.target = None;
        self.written = None;
        self.peak_working_set = 0;
    }

    /// The processes of the owner's session (the configured owner cgroup, or the one
    /// protected now) and of every cgroup below it; `None` when it is not known.
    pub fn session_pids(&self) -> Option<Vec<u32>> {
        self.flavour?;
        let top = match (&self.target, self.configured.is_empty()) {
            (Some(t), _) => t.clone(),
            (None, false) => self.root.join(self.configured.trim_start_matches('/')),
            (None, true) => return None,
        };
        let mut pids = Vec::new();
        let mut stack = vec![top];
        while let Some(dir) = stack.pop() {
            let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else { continue };
            pids.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
            if let Ok(rd) = std::fs::read_dir(&dir) {
                stack.extend(rd.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()));
            }
        }
        let me = std::process::id();
        pids.retain(|&p| p != me);
        Some(pids)
    }

    /// Whether a protection is written now.
    pub fn engaged(&self) -> bool {
        self.written.is_some()
    }
}

/// The memory cgroup path of one `/proc/PID/cgroup` line: v2 `0::/path`, v1
/// `N:controllers:/path` whose controllers include `memory`.
fn memory_cgroup_of_line(f: Flavour, line: &str) -> Option<String> {
    let mut it = line.splitn(3, ':');
    let (id, controllers, path) = (it.next()?, it.next()?, it.next()?);
    let ours = match f {
        Flavour::V2 => id == "0" && controllers.is_empty(),
        Flavour::V1 => controllers.split(',').any(|c| c == "memory"),
    };
    ours.then(|| path.to_owned())
}

impl Drop for OwnerProtection {
    fn drop(&mut self) {
        self.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The machine's cgroup v2 hierarchy: `/sys/fs/cgroup` on a pure v2 system, the
    /// unified hierarchy of a hybrid one.
    fn v2_hierarchy() -> Option<PathBuf> {
        [PathBuf::from(ROOT), Path::new(ROOT).join("unified")].into_iter().find(|r| r.join("cgroup.controllers").exists())
    }

    fn has_controller(dir: &Path, name: &str) -> bool {
        std::fs::read_to_string(dir.join("cgroup.controllers")).is_ok_and(|c| c.split_whitespace().any(|w| w == name))
    }

    /// A test cgroup tree in the v2 hierarchy, its processes killed and the tree removed
    /// when dropped (even on failure).
    struct Tree {
        top: PathBuf,
        children: Vec<std::process::Child>,
    }

    impl Drop for Tree {
        fn drop(&mut self) {
            for c in &mut self.children {
                let _ = c.kill();
                let _ = c.wait();
            }
            // Deepest first; a killed process may take a moment to leave its cgroup.
            for rel in ["user-4242.slice/session-1.scope", "user-4242.slice", "pool/guests", "pool", ""] {
                let dir = self.top.join(rel);
                for _ in 0..100 {
                    if std::fs::remove_dir(&dir).is_ok() || !dir.exists() {
                        break;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
            }
        }
    }

    /// The v2 `memory.low` path on the real v2 hierarchy of this machine: the owner's
    /// session is found from a real process's `0::` line (the `user-UID.slice` above it,
    /// not the guests' cgroup), and — where the memory controller can be enabled in v2 —
    /// `memory.low` is written there while guests run and put back after. Where the memory
    /// controller is bound to v1 (a hybrid system, like the machine this was written on),
    /// `memory.low` does not exist: the selection still runs for real and must say which
    /// file of which cgroup it could not write; the write itself is skipped with a message,
    /// and `LULL_REQUIRE_CGROUP_V2_MEMORY=1` makes that skip a failure.
    #[test]
    fn the_v2_memory_low_path_on_this_machines_cgroup2_hierarchy() {
        let required = std::env::var("LULL_REQUIRE_CGROUPS").is_ok_and(|v| v == "1");
        let Some(root) = v2_hierarchy() else {
            assert!(!required, "LULL_REQUIRE_CGROUPS=1 but there is no cgroup v2 hierarchy at {ROOT} or {ROOT}/unified");
            eprintln!("SKIPPED: no cgroup v2 hierarchy here; set LULL_REQUIRE_CGROUPS=1 to require");
            return;
        };
        let top = root.join(format!("lull-test-v2low-{}", std::process::id()));
        let session = top.join("user-4242.slice/session-1.scope");
        let guests = top.join("pool/guests");
        let mut tree = Tree { top: top.clone(), children: Vec::new() };
        if let Err(e) = std::fs::create_dir_all(&session).and_then(|_| std::fs::create_dir_all(&guests)) {
            assert!(!required, "LULL_REQUIRE_CGROUPS=1 but no cgroup can be made in {}: {e}", root.display());
            eprintln!("SKIPPED: cannot create cgroups in {} ({e}); set LULL_REQUIRE_CGROUPS=1 to require", root.display());
            return;
        }
        // The memory controller in v2, where the machine has it there (pure v2, or a
        // hybrid system booted with cgroup_no_v1=memory).
        let slice = top.join("user-4242.slice");
        let memory_in_v2 = has_controller(&root, "memory") && {
            for d in [&root, &top, &slice, &top.join("pool")] {
                let _ = std::fs::write(d.join("cgroup.subtree_control"), "+memory");
            }
            slice.join("memory.low").exists()
        };
        // The owner: a real process in its session cgroup.
        let owner = std::process::Command::new("sh")
            .args(["-c", &format!("echo $$ > {} && exec sleep 600", session.join("cgroup.procs").display())])
            .spawn()
            .expect("owner process");
        let pid = owner.id();
        tree.children.push(owner);
        let line = |p: u32| std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap_or_default();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !line(pid).contains("user-4242.slice/session-1.scope") {
            assert!(std::time::Instant::now() < deadline, "the owner never joined {}: {}", session.display(), line(pid));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let rel = |d: &Path| format!("/{}", d.strip_prefix(&root).expect("inside the hierarchy").display());
        // The v2 line of the owner's real /proc/PID/cgroup names its session.
        assert_eq!(OwnerProtection::owner_cgroups(Flavour::V2, &[pid]), vec![rel(&session)]);

        let memory = crate::config::Memory::default();
        let rules = WarmRules { protect: true, protect_bytes: Some(64 * MIB), cache_max_bytes: 0, cache_max_files: 1 };
        let mut p = OwnerProtection::v2_at(&root, &guests, &memory, rules);
        if memory_in_v2 {
            let before = std::fs::read_to_string(slice.join("memory.low")).expect("memory.low").trim().to_owned();
            p.probe(&[pid]);
            assert!(p.why_not.is_none(), "{:?}", p.why_not);
            p.engage(&[pid], 16 << 30);
            assert_eq!(std::fs::read_to_string(slice.join("memory.low")).expect("memory.low").trim(), (64 * MIB).to_string());
            assert!(p.engaged());
            assert_eq!(p.describe(), format!("memory.low 64 MiB on {} while guests run", rel(&slice)));
            assert!(p.session_pids().is_some_and(|v| v.contains(&pid)), "{:?}", p.session_pids());
            // Never the guests' cgroup, nor written on it.
            assert_eq!(std::fs::read_to_string(guests.join("memory.low")).unwrap_or_else(|_| "0".into()).trim(), "0");
            p.release();
            assert_eq!(std::fs::read_to_string(slice.join("memory.low")).expect("memory.low").trim(), before, "put back");
            assert!(!p.engaged());
        } else {
            // The selection ran on the real hierarchy: the owner's user slice is the
            // first candidate, and with no memory controller in v2 there is no memory.low
            // to write — which the agent must say, naming file and cgroup.
            p.probe(&[pid]);
            let why = p.why_not.clone().expect("nothing can be protected without the memory controller");
            assert!(why.contains("cannot write memory.low of") && why.contains(&rel(&slice)), "{why}");
            p.engage(&[pid], 16 << 30);
            assert!(!p.engaged() && p.describe().starts_with("none: cannot write memory.low"), "{}", p.describe());
            assert!(!slice.join("memory.low").exists());
            let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            let msg = format!(
                "the memory controller is not available in the cgroup v2 hierarchy at {} (its controllers: {:?}; on a hybrid system memory is bound to v1): memory.low was not written; the v2 selection path ran",
                root.display(),
                controllers.trim()
            );
            assert!(!std::env::var("LULL_REQUIRE_CGROUP_V2_MEMORY").is_ok_and(|v| v == "1"), "LULL_REQUIRE_CGROUP_V2_MEMORY=1 but {msg}");
            eprintln!("SKIPPED (in part): {msg}; set LULL_REQUIRE_CGROUP_V2_MEMORY=1 to require the write");
        }
        drop(tree);
        assert!(!top.exists(), "test cgroup removed");
    }

    #[test]
    fn the_memory_cgroup_is_read_from_the_right_line() {
        let v1 = "9:name=systemd:/user.slice/user-1000.slice/session-2.scope\n4:memory:/user.slice/user-1000.slice\n0::/user.slice";
        let find = |f| v1.lines().find_map(|l| memory_cgroup_of_line(f, l));
        assert_eq!(find(Flavour::V1).as_deref(), Some("/user.slice/user-1000.slice"));
        assert_eq!(find(Flavour::V2).as_deref(), Some("/user.slice"));
        assert_eq!(memory_cgroup_of_line(Flavour::V1, "5:cpu,memory:/a"), Some("/a".into()));
        assert_eq!(memory_cgroup_of_line(Flavour::V1, "5:cpuacct:/a"), None);
    }
}
