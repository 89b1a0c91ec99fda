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
            flavour,
            guests_memory: cgroups.map(|c| c.memory.clone()),
            target: None,
            saved: Vec::new(),
            written: None,
            peak_working_set: 0,
            why_not: None,
        }
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
                let cg = t.strip_prefix(f.root()).map(|p| format!("/{}", p.display())).unwrap_or_else(|_| t.display().to_string());
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
            let dir = f.root().join(self.configured.trim_start_matches('/'));
            return writable(&dir)
                .map(|_| dir.clone())
                .map_err(|e| format!("cannot write {file} of the configured owner cgroup {}: {e}", dir.display()));
        }
        let guests = self
            .guests_memory
            .as_ref()
            .and_then(|g| g.strip_prefix(f.root()).ok())
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
            let dir = f.root().join(c.trim_start_matches('/'));
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
        let f = self.flavour?;
        let top = match (&self.target, self.configured.is_empty()) {
            (Some(t), _) => t.clone(),
            (None, false) => f.root().join(self.configured.trim_start_matches('/')),
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
