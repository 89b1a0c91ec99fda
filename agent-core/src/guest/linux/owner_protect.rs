//! The owner's memory protected while guests run, so the kernel reclaims from guests
//! before the owner (seed 000 §4's priority page pools, in cgroup terms):
//!
//! - **cgroup v2**: the cgroups the owner's programs run in ([`protection_cover`]: a root
//!   agent's owner's `user-UID.slice`; for an owner's agent, whose guests are in a scope
//!   of the owner's user manager, the login session's scope and the manager's
//!   `app.slice`, `session.slice`, …) get `memory.low` where it can take effect: the
//!   agent may write it and no ancestor's `memory.low` bounds it to nothing
//!   ([`plan_protection`], [`lull_core::owner_memory::low_bound`]; `memory_recursiveprot`
//!   read from the cgroup2 mount's options). A root agent raises the ancestors it may
//!   write. Wherever it cannot (an ordinary owner under ancestors at 0, the usual case),
//!   the guests' instance gets `memory.high` = RAM − the owner's protection − the owner
//!   reserve, so the kernel throttles and reclaims the guests first; the PSI-driven
//!   freeze (`LinuxRuntime::watch_memory`) stays behind it.
//! - **cgroup v1** (the memory controller of a hybrid system): `memory.soft_limit_in_bytes`
//!   of 0 on the guests' instance cgroup and the protection as the owner's session's soft
//!   limit. Under machine-wide pressure the kernel first reclaims from the groups furthest
//!   above their soft limit — the guests, whose every page is above 0. (A v1 soft limit is
//!   not consulted when a *parent's* hard limit is hit; v2's `memory.low` is.) The target
//!   is the first writable of [`session_candidates`].
//!
//! How much ([`protection_for`]: fixed, or the owner's recent working set, peak while
//! guests run, plus a quarter) is decided in the core, as are where and by which means.
//! `[memory] owner_cgroup` names the one cgroup to protect instead. The protection is
//! written when the first guest starts, follows the owner's working set while guests run,
//! and every value written is put back when the last guest has gone and when the agent
//! exits. Status names the cgroups, the amounts and why `memory.low` is not used where
//! it is not.

use super::cgroup::{keyed, Cgroups};
use crate::guest::Containment;
use lull_core::guest_memory::MIB;
use lull_core::owner_memory::{
    plan_protection, protection_cover, protection_for, protection_update, session_candidates, working_set, LowSetting, OwnerGroup,
    ProtectionPlan, WarmRules,
};
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

/// One owner cgroup followed while guests run (v2).
#[derive(Clone, Debug)]
struct Tracked {
    /// Its path in the hierarchy (`/user.slice/…`).
    path: String,
    peak: u64,
    write_error: Option<String>,
    ancestors: Vec<LowSetting>,
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
    /// The guests' instance cgroup in the memory hierarchy (v1: its soft limit is set to 0;
    /// v2: its `memory.high` when the owner's `memory.low` cannot take effect).
    guests_memory: Option<PathBuf>,
    /// The guests' cgroup (v2: their delegated scope, if any) as a path in the hierarchy,
    /// which no owner cgroup may hold.
    guests_path: String,
    /// The owner reserve, bytes: left out of the guests' `memory.high` too.
    reserve: u64,
    /// Whether the cgroup2 mount has `memory_recursiveprot`.
    recursiveprot: bool,
    /// v1: the cgroup protected now, while guests run.
    target: Option<PathBuf>,
    /// v2: the owner's cgroups followed now, while guests run.
    groups: Vec<Tracked>,
    /// v2: the plan in force (while guests run) or foreseen (`probe`, none run).
    plan: Option<ProtectionPlan>,
    /// Files written, with the value each held before (put back on release).
    saved: Vec<(PathBuf, String)>,
    /// Values written now.
    written: Vec<(PathBuf, u64)>,
    peak_working_set: u64,
    /// Why there is no protection, once said.
    why_not: Option<String>,
}

/// Whether the cgroup2 hierarchy mounted at `root` applies memory protection recursively.
fn recursiveprot_at(root: &Path) -> bool {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    mounts.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 4 && f[2] == "cgroup2" && Path::new(f[1]) == root && f[3].split(',').any(|o| o == "memory_recursiveprot")
    })
}

/// Why `file` cannot be written by this process (`None`: it can).
fn write_error(file: &Path) -> Option<String> {
    std::fs::OpenOptions::new().write(true).open(file).err().map(|e| e.to_string())
}

/// A `memory.low`-style value: a number, or `max`.
fn bytes_value(text: &str) -> Option<u64> {
    match text.trim() {
        "max" => Some(u64::MAX),
        v => v.parse().ok(),
    }
}

/// "5,632 MiB"-style amounts for status.
fn mib(bytes: u64) -> String {
    format!("{} MiB", bytes / MIB)
}

impl OwnerProtection {
    /// Protection for guests under `cgroups` (none: nothing to protect against);
    /// `reserve` is the owner reserve in bytes.
    pub fn new(cgroups: Option<&Cgroups>, memory: &crate::config::Memory, rules: WarmRules, reserve: u64) -> Self {
        let flavour = cgroups.and_then(|c| match c.kind {
            Containment::CgroupV2 => Some(Flavour::V2),
            Containment::Hybrid => Some(Flavour::V1),
            Containment::ProcessGroup | Containment::JobObject => None,
        });
        let root = flavour.map_or_else(|| PathBuf::from(ROOT), |f| f.root());
        Self {
            rules,
            configured: memory.owner_cgroup.clone(),
            recursiveprot: flavour == Some(Flavour::V2) && recursiveprot_at(&root),
            root,
            flavour,
            guests_memory: cgroups.map(|c| c.memory.clone()),
            guests_path: cgroups.map(Cgroups::marker).unwrap_or_default(),
            reserve,
            target: None,
            groups: Vec::new(),
            plan: None,
            saved: Vec::new(),
            written: Vec::new(),
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
        let mut p = Self::new(None, memory, rules, 0);
        p.flavour = Some(Flavour::V2);
        p.root = root.to_path_buf();
        p.recursiveprot = recursiveprot_at(root);
        p.guests_memory = Some(guests.to_path_buf());
        p.guests_path = p.in_hierarchy(guests);
        p
    }

    /// A directory of the hierarchy as a path in it (`/user.slice/…`).
    fn in_hierarchy(&self, dir: &Path) -> String {
        dir.strip_prefix(&self.root).map(|p| format!("/{}", p.display())).unwrap_or_else(|_| dir.display().to_string())
    }

    fn dir_of(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// What `lull status` says about it.
    pub fn describe(&self) -> String {
        let Some(f) = self.flavour else {
            return "none: guests are not in cgroups".into();
        };
        if !self.rules.protect {
            return "off (memory.protect_owner = false)".into();
        }
        if f == Flavour::V2 {
            return match (&self.plan, self.engaged(), &self.why_not) {
                (Some(plan), true, _) => format!("{} while guests run", self.describe_plan(plan)),
                (Some(plan), false, _) => format!("while guests run: {} (none run now)", self.describe_plan(plan)),
                (None, _, Some(why)) => format!("none: {why}"),
                (None, _, None) => "memory.low on the owner's session while guests run (none run now)".into(),
            };
        }
        match (&self.target, self.v1_written(), &self.why_not) {
            (Some(t), Some(b), _) => format!("soft limit (guests' soft limit 0) {} on {} while guests run", mib(b), self.in_hierarchy(t)),
            (_, _, Some(why)) => format!("none: {why}"),
            _ => format!("{} on the owner's session while guests run (none run now)", f.protect_file()),
        }
    }

    /// A plan in words: where `memory.low` goes, the guests' `memory.high`, and why
    /// `memory.low` is not used where it is not.
    fn describe_plan(&self, plan: &ProtectionPlan) -> String {
        let mut parts = Vec::new();
        if !plan.protected.is_empty() {
            let on: Vec<String> = plan.protected.iter().map(|(cg, b)| format!("{} on {cg}", mib(*b))).collect();
            parts.push(format!("memory.low {}", on.join(", ")));
        }
        if let Some(high) = plan.guests_high {
            parts.push(format!(
                "memory.high {} on the guests (RAM less your {} protection for a {} working set, and the {} reserve)",
                mib(high),
                mib(plan.want),
                mib(plan.working_set),
                mib(self.reserve)
            ));
        }
        let mut why: Vec<(String, Vec<&str>)> = Vec::new();
        for (cg, reason) in &plan.unprotected {
            let name = cg.rsplit('/').next().unwrap_or(cg);
            match why.iter_mut().find(|(r, _)| r == reason) {
                Some((_, names)) => names.push(name),
                None => why.push((reason.clone(), vec![name])),
            }
        }
        let why: Vec<String> = why.iter().map(|(r, names)| format!("{}: {r}", names.join(", "))).collect();
        if why.is_empty() {
            parts.join("; ")
        } else {
            format!("{} (memory.low not in effect for {})", parts.join("; "), why.join("; "))
        }
    }

    /// The cgroups (in the protected hierarchy) the processes `pids` are in.
    fn owner_cgroups(f: Flavour, pids: &[u32]) -> Vec<String> {
        pids.iter()
            .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/cgroup")).ok())
            .filter_map(|text| text.lines().find_map(|l| memory_cgroup_of_line(f, l)))
            .collect()
    }

    /// v1: the first writable of the owner's session candidates (or the configured one).
    fn find_target(&self, f: Flavour, owner_pids: &[u32]) -> Result<PathBuf, String> {
        let file = f.protect_file();
        if !self.configured.is_empty() {
            let dir = self.dir_of(&self.configured);
            return match write_error(&dir.join(file)) {
                None => Ok(dir),
                Some(e) => Err(format!("cannot write {file} of the configured owner cgroup {}: {e}", dir.display())),
            };
        }
        let owner = Self::owner_cgroups(f, owner_pids);
        let candidates = session_candidates(&owner, &self.guests_path_v1());
        if candidates.is_empty() {
            return Err(no_session(&owner));
        }
        let mut last = String::new();
        for c in &candidates {
            let dir = self.dir_of(c);
            match write_error(&dir.join(file)) {
                None => return Ok(dir),
                Some(e) => last = format!("cannot write {file} of {c} (nor of {} other candidates): {e}", candidates.len() - 1),
            }
        }
        Err(last)
    }

    /// v1 candidates exclude the guests' memory cgroup.
    fn guests_path_v1(&self) -> String {
        self.guests_memory.as_ref().map(|g| self.in_hierarchy(g)).unwrap_or_default()
    }

    /// v2: the owner's cgroups to protect (or the configured one), each with its ancestors'
    /// `memory.low` read.
    fn find_groups(&self, owner_pids: &[u32]) -> Result<Vec<Tracked>, String> {
        let paths = if self.configured.is_empty() {
            let owner = Self::owner_cgroups(Flavour::V2, owner_pids);
            let cover = protection_cover(&owner, &self.guests_path);
            if cover.is_empty() {
                return Err(no_session(&owner));
            }
            cover
        } else {
            vec![format!("/{}", self.configured.trim_start_matches('/'))]
        };
        Ok(paths.into_iter().map(|path| self.track(path)).collect())
    }

    fn track(&self, path: String) -> Tracked {
        let dir = self.dir_of(&path);
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let ancestors = (1..parts.len())
            .map(|d| {
                let cgroup = format!("/{}", parts[..d].join("/"));
                let file = self.dir_of(&cgroup).join("memory.low");
                let low = std::fs::read_to_string(&file).ok().and_then(|t| bytes_value(&t)).unwrap_or(0);
                LowSetting { cgroup, low, writable: write_error(&file).is_none() }
            })
            .collect();
        let peak = Self::working_set(Flavour::V2, &dir).unwrap_or(0);
        Tracked { write_error: write_error(&dir.join("memory.low")), path, peak, ancestors }
    }

    /// The owner's working set now, from a cgroup's counters.
    fn working_set(f: Flavour, dir: &Path) -> Option<u64> {
        let usage: u64 = std::fs::read_to_string(dir.join(f.usage_file())).ok()?.trim().parse().ok()?;
        let inactive = keyed(&dir.join("memory.stat"), f.inactive_file_key()).unwrap_or(0);
        Some(working_set(usage, inactive))
    }

    /// Writes `value` into `file` if it moved enough since last written
    /// ([`protection_update`]), saving the value it held first.
    fn write(&mut self, file: PathBuf, value: u64) -> std::io::Result<bool> {
        let current = self.written.iter().find(|(p, _)| p == &file).map(|(_, v)| *v);
        let Some(v) = protection_update(value, current) else { return Ok(false) };
        if !self.saved.iter().any(|(p, _)| p == &file) {
            let before = std::fs::read_to_string(&file)?.trim().to_owned();
            std::fs::write(&file, v.to_string())?;
            self.saved.push((file.clone(), before));
        } else {
            std::fs::write(&file, v.to_string())?;
        }
        self.written.retain(|(p, _)| p != &file);
        self.written.push((file, v));
        Ok(true)
    }

    /// At start-up: finds the owner's cgroups without writing anything, so that status
    /// says what will be done (or, once, why nothing can) before any guest runs.
    pub fn probe(&mut self, owner_pids: &[u32], total: u64) {
        let Some(f) = self.flavour else { return };
        if !self.rules.protect {
            return;
        }
        let found = match f {
            Flavour::V1 => self.find_target(f, owner_pids).map(|_| ()),
            Flavour::V2 => self.find_groups(owner_pids).map(|groups| self.plan = self.plan_for(&groups, total)),
        };
        if let Err(why) = found {
            warn!("the owner's memory will not be protected from guests: {why}");
            self.why_not = Some(why);
        }
    }

    fn plan_for(&self, groups: &[Tracked], total: u64) -> Option<ProtectionPlan> {
        let owner: Vec<OwnerGroup> = groups
            .iter()
            .map(|g| OwnerGroup {
                cgroup: g.path.clone(),
                working_set: g.peak,
                write_error: g.write_error.clone(),
                ancestors: g.ancestors.clone(),
            })
            .collect();
        plan_protection(&self.rules, &owner, self.recursiveprot, total, self.reserve)
    }

    /// The first guest is starting: find the owner's cgroups and protect them.
    /// `owner_pids`: the owner's processes (guests excluded).
    pub fn engage(&mut self, owner_pids: &[u32], total: u64) {
        let Some(f) = self.flavour else { return };
        if !self.rules.protect || self.target.is_some() || !self.groups.is_empty() {
            return;
        }
        let found = match f {
            Flavour::V1 => self.find_target(f, owner_pids).map(|dir| {
                if let Some(g) = self.guests_memory.clone() {
                    if let Err(e) = self.write(g.join("memory.soft_limit_in_bytes"), 0) {
                        warn!("could not set the guests' memory soft limit to 0: {e}");
                    }
                }
                self.peak_working_set = Self::working_set(f, &dir).unwrap_or(0);
                self.target = Some(dir);
            }),
            Flavour::V2 => self.find_groups(owner_pids).map(|groups| self.groups = groups),
        };
        match found {
            Ok(()) => {
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
        match self.flavour {
            Some(Flavour::V1) => self.update_v1(total),
            Some(Flavour::V2) if !self.groups.is_empty() => self.update_v2(total),
            _ => {}
        }
    }

    fn update_v1(&mut self, total: u64) {
        let Some(dir) = self.target.clone() else { return };
        if let Some(ws) = Self::working_set(Flavour::V1, &dir) {
            self.peak_working_set = self.peak_working_set.max(ws);
        }
        let Some(want) = protection_for(&self.rules, self.peak_working_set, total) else { return };
        let first = !self.written.iter().any(|(p, _)| p.starts_with(&dir));
        match self.write(dir.join(Flavour::V1.protect_file()), want) {
            Ok(true) if first => {
                info!(mib = want / MIB, cgroup = %dir.display(), "owner's memory protected while guests run (v1 soft limit)")
            }
            Ok(_) => {}
            Err(e) => {
                let why = format!("writing {} of {}: {e}", Flavour::V1.protect_file(), dir.display());
                warn!("the owner's memory is not protected from guests: {why}");
                self.why_not = Some(why);
                self.target = None;
            }
        }
    }

    fn update_v2(&mut self, total: u64) {
        for g in &mut self.groups {
            if let Some(ws) = Self::working_set(Flavour::V2, &self.root.join(g.path.trim_start_matches('/'))) {
                g.peak = g.peak.max(ws);
            }
        }
        let Some(plan) = self.plan_for(&self.groups, total) else { return };
        let first = self.written.is_empty();
        let mut failed = Vec::new();
        for (cg, v) in &plan.low {
            let file = self.dir_of(cg).join("memory.low");
            if let Err(e) = self.write(file, *v) {
                failed.push(format!("writing memory.low of {cg}: {e}"));
            }
        }
        if let (Some(high), Some(g)) = (plan.guests_high, self.guests_memory.clone()) {
            if let Err(e) = self.write(g.join("memory.high"), high) {
                failed.push(format!("writing memory.high of the guests ({}): {e}", g.display()));
            }
        }
        if first && self.engaged() {
            info!(protection = %self.describe_plan(&plan), "owner's memory protected while guests run");
        }
        if !failed.is_empty() && self.why_not.as_deref() != Some(failed.join("; ").as_str()) {
            warn!("the owner's memory is not fully protected from guests: {}", failed.join("; "));
            self.why_not = Some(failed.join("; "));
        }
        self.plan = Some(plan);
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
        self.groups.clear();
        self.written.clear();
        self.peak_working_set = 0;
    }

    /// The processes of the owner's session (the configured owner cgroup, or those
    /// protected now) and of every cgroup below; `None` when it is not known.
    pub fn session_pids(&self) -> Option<Vec<u32>> {
        self.flavour?;
        let tops: Vec<PathBuf> = match (&self.target, self.groups.is_empty(), self.configured.is_empty()) {
            (Some(t), _, _) => vec![t.clone()],
            (None, false, _) => self.groups.iter().map(|g| self.dir_of(&g.path)).collect(),
            (None, true, false) => vec![self.dir_of(&self.configured)],
            (None, true, true) => return None,
        };
        let mut pids = Vec::new();
        let mut stack = tops;
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

    /// v1: the soft limit written on the owner's cgroup.
    fn v1_written(&self) -> Option<u64> {
        let t = self.target.as_ref()?;
        self.written.iter().find(|(p, _)| p.starts_with(t)).map(|(_, v)| *v)
    }

    /// Whether a protection is written now.
    pub fn engaged(&self) -> bool {
        !self.written.is_empty()
    }

    /// The structured part of status: the cgroups protected with their amounts, the
    /// guests' `memory.high`, and why `memory.low` is not in effect where it is not.
    pub fn status(&self) -> (Vec<crate::guest::ProtectedCgroup>, Option<u64>, Vec<String>) {
        if self.flavour == Some(Flavour::V1) {
            let protected = match (&self.target, self.v1_written()) {
                (Some(t), Some(b)) => vec![crate::guest::ProtectedCgroup { cgroup: self.in_hierarchy(t), bytes: b }],
                _ => Vec::new(),
            };
            return (protected, None, self.why_not.iter().cloned().collect());
        }
        let Some(plan) = &self.plan else { return (Vec::new(), None, self.why_not.iter().cloned().collect()) };
        let protected = plan.protected.iter().map(|(cg, b)| crate::guest::ProtectedCgroup { cgroup: cg.clone(), bytes: *b }).collect();
        let not = plan.unprotected.iter().map(|(cg, why)| format!("{cg}: {why}")).collect();
        (protected, plan.guests_high, not)
    }
}

/// Why no owner cgroup was found among the owner's processes' cgroups.
fn no_session(owner: &[String]) -> String {
    let mut seen: Vec<&String> = owner.iter().collect();
    seen.sort();
    seen.dedup();
    let shown: Vec<&str> = seen.iter().take(3).map(|s| s.as_str()).collect();
    format!(
        "no owner session cgroup (user-UID.slice) among the owner's processes' cgroups ({}); set [memory] owner_cgroup",
        shown.join(", ")
    )
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
            let low = |d: &Path| std::fs::read_to_string(d.join("memory.low")).expect("memory.low").trim().to_owned();
            let (before, top_before) = (low(&slice), low(&top));
            p.probe(&[pid], 16 << 30);
            assert!(p.why_not.is_none(), "{:?}", p.why_not);
            assert!(p.describe().starts_with(&format!("while guests run: memory.low 64 MiB on {}", rel(&slice))), "{}", p.describe());
            p.engage(&[pid], 16 << 30);
            // The owner's slice, and its ancestor (writable by root, at 0) raised so that
            // the protection reaches it.
            assert_eq!(low(&slice), (64 * MIB).to_string());
            assert_eq!(low(&top), (64 * MIB).to_string(), "the ancestor raised");
            assert!(p.engaged());
            assert_eq!(p.describe(), format!("memory.low 64 MiB on {} while guests run", rel(&slice)));
            assert!(p.session_pids().is_some_and(|v| v.contains(&pid)), "{:?}", p.session_pids());
            // Never the guests' cgroup, nor written on it.
            assert_eq!(std::fs::read_to_string(guests.join("memory.low")).unwrap_or_else(|_| "0".into()).trim(), "0");
            p.release();
            assert_eq!((low(&slice), low(&top)), (before, top_before), "put back");
            assert!(!p.engaged());
        } else {
            // The selection ran on the real hierarchy: the owner's user slice is what the
            // owner's processes run in, and with no memory controller in v2 there is no
            // memory.low to write — which the agent must say, naming file and cgroup,
            // and fall back to memory.high on the guests (which it cannot write either).
            p.probe(&[pid], 16 << 30);
            let (protected, high, not) = p.status();
            assert!(protected.is_empty() && high.is_some(), "{protected:?} {high:?}");
            assert!(not.len() == 1 && not[0].starts_with(&format!("{}: cannot write its memory.low", rel(&slice))), "{not:?}");
            assert!(p.describe().contains("memory.high"), "{}", p.describe());
            p.engage(&[pid], 16 << 30);
            assert!(!p.engaged(), "nothing could be written");
            assert!(p.why_not.as_deref().is_some_and(|w| w.contains("memory.high of the guests")), "{:?}", p.why_not);
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
