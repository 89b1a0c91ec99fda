//! Exclusive programs (`rules.exclusive_programs`): which of the programs the owner named
//! is running now, found by a scan of `/proc/*/comm` folded into the agent's reading (no
//! wake-up of its own: every `sampling.interval_ms` while guests run, every
//! `sampling.relaxed_interval_ms` otherwise), and the list of running programs the
//! Settings window offers to pick from.
//!
//! A name matches a process's `comm` (the executable's name as the kernel keeps it,
//! truncated to 15 bytes) or, for longer names, the basename of its `/proc/PID/exe`; an
//! entry starting with `/` matches the full path of `exe`. Guest processes (in a cgroup
//! under `guests/`) never hold the machine, or a guest named `steam` would evict itself.
//! Reading another user's `exe` needs root; a non-root agent then matches by `comm` only.
//!
//! Cost: one `open`+`read` of `comm` per process per reading, and only while the list is
//! not empty (about 0.3 ms for 150 processes here; see docs/BENCHMARKS.md).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The kernel's limit on `comm`: 15 bytes and the NUL.
const COMM_MAX: usize = 15;

/// Whether `entry` (a name or an absolute path from the config) names a process whose
/// `comm` is `comm`; `exe` is asked for only when the comm cannot decide (full paths and
/// names longer than `comm` holds).
pub fn matches(entry: &str, comm: &str, exe: impl FnOnce() -> Option<PathBuf>) -> bool {
    if entry.starts_with('/') {
        let base = entry.rsplit('/').next().unwrap_or(entry);
        return truncated(base) == comm && exe().is_some_and(|p| p == Path::new(entry));
    }
    if entry.len() <= COMM_MAX {
        return entry == comm;
    }
    truncated(entry) == comm && exe().is_some_and(|p| p.file_name().is_some_and(|n| n == entry))
}

/// `name` as `comm` shows it: cut to 15 bytes (at a character boundary).
fn truncated(name: &str) -> &str {
    let mut end = name.len().min(COMM_MAX);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// The process ids in `/proc`.
fn pids(proc_root: &Path) -> impl Iterator<Item = u32> {
    std::fs::read_dir(proc_root).into_iter().flatten().flatten().filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
}

fn read_comm(proc_root: &Path, pid: u32) -> Option<String> {
    let mut s = std::fs::read_to_string(proc_root.join(format!("{pid}/comm"))).ok()?;
    if s.ends_with('\n') {
        s.pop();
    }
    Some(s)
}

/// Whether the process runs in a guest's cgroup (`…/guests/…`).
fn is_guest(proc_root: &Path, pid: u32) -> bool {
    std::fs::read_to_string(proc_root.join(format!("{pid}/cgroup"))).is_ok_and(|s| s.lines().any(|l| l.contains("/guests/")))
}

/// Finds running exclusive programs. Holds nothing between scans.
#[derive(Debug)]
pub struct ProgramWatch {
    proc_root: PathBuf,
}

impl Default for ProgramWatch {
    fn default() -> Self {
        Self { proc_root: "/proc".into() }
    }
}

impl ProgramWatch {
    /// A watch over another `/proc` (tests).
    pub fn with_root(proc_root: impl Into<PathBuf>) -> Self {
        Self { proc_root: proc_root.into() }
    }

    /// The first entry of `wanted` found running (outside the guests), as the owner wrote
    /// it; `None` at once when the list is empty.
    pub fn scan(&self, wanted: &[String]) -> Option<String> {
        if wanted.is_empty() {
            return None;
        }
        for pid in pids(&self.proc_root) {
            let Some(comm) = read_comm(&self.proc_root, pid) else { continue };
            let exe = || std::fs::read_link(self.proc_root.join(format!("{pid}/exe"))).ok();
            if let Some(entry) = wanted.iter().find(|w| matches(w, &comm, exe)) {
                if !is_guest(&self.proc_root, pid) {
                    return Some(entry.clone());
                }
            }
        }
        None
    }

    /// The names of the programs running now (user processes: kernel threads, which have
    /// no command line, are left out), sorted and each once: what the Settings window
    /// offers to pick from. Names only; no arguments, paths or owners.
    pub fn running(&self) -> Vec<String> {
        let mut out = BTreeSet::new();
        for pid in pids(&self.proc_root) {
            let user = std::fs::read(self.proc_root.join(format!("{pid}/cmdline"))).is_ok_and(|c| !c.is_empty());
            if !user || is_guest(&self.proc_root, pid) {
                continue;
            }
            if let Some(c) = read_comm(&self.proc_root, pid).filter(|c| !c.is_empty()) {
                out.insert(c);
            }
        }
        out.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_paths_and_long_names() {
        let none = || None;
        assert!(matches("steam", "steam", none));
        assert!(!matches("steam", "steamwebhelper", none));
        assert!(!matches("zoom", "zoo", none));
        let exe = || Some(PathBuf::from("/opt/blender/blender"));
        assert!(matches("/opt/blender/blender", "blender", exe));
        assert!(!matches("/usr/bin/blender", "blender", exe));
        assert!(!matches("/opt/blender/blender", "blender", none));
        // comm keeps 15 bytes: a longer name is confirmed by the executable's name.
        let long = "a-very-long-game-name";
        assert!(matches(long, "a-very-long-gam", || Some(PathBuf::from("/games/a-very-long-game-name"))));
        assert!(!matches(long, "a-very-long-gam", || Some(PathBuf::from("/games/a-very-long-gamble"))));
        assert!(!matches(long, "a-very-long-gam", none));
    }

    #[test]
    fn a_real_process_is_found_by_name_and_listed() {
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("lullfakegame");
        std::fs::copy("/bin/sleep", &exe).unwrap();
        let mut child = std::process::Command::new(&exe).arg("30").spawn().unwrap();
        let w = ProgramWatch::default();
        let want = |s: &str| vec!["nothing-here".to_owned(), s.to_owned()];
        // The child may not have exec'd yet.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while w.scan(&want("lullfakegame")).is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(w.scan(&want("lullfakegame")).as_deref(), Some("lullfakegame"));
        assert_eq!(w.scan(&want(exe.to_str().unwrap())).as_deref(), exe.to_str());
        assert_eq!(w.scan(&want("/usr/bin/lullfakegame")), None);
        assert!(w.running().iter().any(|n| n == "lullfakegame"));
        assert_eq!(w.scan(&[]), None);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(w.scan(&want("lullfakegame")), None);
    }
}
