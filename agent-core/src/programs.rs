//! Exclusive programs (`rules.exclusive_programs`): which of the programs the owner named
//! is running now, found by a scan of `/proc/*/comm` folded into the agent's reading (no
//! wake-up of its own: every `sampling.interval_ms` while guests run, every
//! `sampling.relaxed_interval_ms` otherwise), and the list of running programs the
//! Settings window offers to pick from.
//!
//! Event-driven where the kernel lets the agent: [`ExecWatch`] listens to the netlink
//! process connector (exec and exit of every process; needs CAP_NET_ADMIN, so a root
//! agent), matches each exec'd process's `comm` against the list on its own thread, and
//! asks the driver for a reading at once when a named program starts or one it saw ends.
//! Without it (an ordinary user's agent) the program is found at the next reading.
//!
//! A name matches a process's `comm` (the executable's name as the kernel keeps it,
//! truncated to 15 bytes) or, for longer names, the basename of its `/proc/PID/exe`; an
//! entry starting with `/` matches the full path of `exe`. Guest processes (in a cgroup
//! under `guests/`) never hold the machine, or a guest named `steam` would evict itself.
//! Reading another user's `exe` needs root; a non-root agent then matches by `comm` only.
//!
//! Cost: one `open`+`read` of `comm` per process per reading, and only while the list is
//! not empty (about 0.3 ms for 150 processes here; see docs/BENCHMARKS.md).

use crate::sys::proc_events::{ProcConnector, ProcEvent};
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

/// The netlink process connector: exec and exit events of every process, matched here
/// against the exclusive programs so the driver is woken only for a named program.
///
/// Subscribed only while [`ExecWatch::set_active`] says so: every exec on the machine
/// wakes the thread (25 a second with builds running here, about 30 µs each: 0.07 % of
/// a core, more than the idle agent's whole goal), and a prompt answer matters only while
/// guests run. With no guest the relaxed reading finds the program, and a guest never
/// starts without a fresh reading.
pub struct ExecWatch {
    connector: std::sync::Arc<ProcConnector>,
    active: bool,
}

impl ExecWatch {
    /// Opens the process connector (subscribed only by `set_active(true)`) and starts
    /// the thread that calls `wake` when a process named in `wanted` (read anew for every
    /// event: the configuration may change) execs, or one found so exits. Fails without
    /// CAP_NET_ADMIN.
    pub fn start(wanted: std::sync::Arc<std::sync::RwLock<Vec<String>>>, wake: impl Fn() + Send + 'static) -> std::io::Result<Self> {
        let connector = std::sync::Arc::new(ProcConnector::open()?);
        let mut watch = Self { connector: connector.clone(), active: false };
        // Proves the privilege now rather than at the first guest.
        watch.set_active(true)?;
        watch.set_active(false)?;
        std::thread::Builder::new().name("exclusive-programs".into()).spawn(move || {
            let proc_root = Path::new("/proc");
            let mut seen: BTreeSet<u32> = BTreeSet::new();
            let mut buf = [0u8; 1024];
            loop {
                let event = match connector.next(&mut buf) {
                    Ok(Some(e)) => e,
                    // Events dropped under a burst of execs: the next reading scans.
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!("exclusive programs: the process connector failed ({e}); readings still scan");
                        return;
                    }
                };
                match event {
                    ProcEvent::Exec { tgid } => {
                        let list = wanted.read().unwrap_or_else(|p| p.into_inner());
                        if list.is_empty() {
                            continue;
                        }
                        let Some(comm) = read_comm(proc_root, tgid) else { continue };
                        let exe = || std::fs::read_link(proc_root.join(format!("{tgid}/exe"))).ok();
                        if list.iter().any(|w| matches(w, &comm, exe)) && !is_guest(proc_root, tgid) {
                            seen.insert(tgid);
                            wake();
                        }
                    }
                    ProcEvent::Exit { tgid } if seen.remove(&tgid) => wake(),
                    _ => {}
                }
            }
        })?;
        Ok(watch)
    }

    /// Joins (`true`) or leaves the connector's group; nothing when unchanged.
    pub fn set_active(&mut self, on: bool) -> std::io::Result<()> {
        if on == self.active {
            return Ok(());
        }
        self.connector.subscribe(on)?;
        self.active = on;
        Ok(())
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

    /// As root, the connector reports a named program's exec and exit.
    #[test]
    fn exec_and_exit_of_a_named_program_wake_the_driver() {
        if !crate::sys::id::is_root() {
            eprintln!("SKIPPED: the process connector needs CAP_NET_ADMIN");
            return;
        }
        let (tx, rx) = std::sync::mpsc::channel();
        let wanted = std::sync::Arc::new(std::sync::RwLock::new(vec!["lullexecgame".to_owned()]));
        let mut w = ExecWatch::start(wanted, move || {
            let _ = tx.send(());
        })
        .unwrap();
        w.set_active(true).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("lullexecgame");
        std::fs::copy("/bin/sleep", &exe).unwrap();
        let mut child = std::process::Command::new(&exe).arg("30").spawn().unwrap();
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok(), "no wake-up for the exec");
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok(), "no wake-up for the exit");
        // Inactive: no events at all.
        w.set_active(false).unwrap();
        let mut child = std::process::Command::new(&exe).arg("30").spawn().unwrap();
        assert!(rx.recv_timeout(std::time::Duration::from_millis(500)).is_err(), "woken while inactive");
        child.kill().unwrap();
        child.wait().unwrap();
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
