//! What `/proc` says about other processes: their namespaces, cgroups and working
//! directories (the control socket's refusal of guests, the retention of work directories).

use std::collections::HashSet;
use std::io;
use std::path::PathBuf;

/// Whether process `pid` is in another `ns` namespace (`"user"`, `"pid"`) than this one;
/// an error when either cannot be read.
pub fn in_other_namespace(pid: i32, ns: &str) -> io::Result<bool> {
    let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{ns}"))?;
    let ours = std::fs::read_link(format!("/proc/self/ns/{ns}"))?;
    Ok(theirs != ours)
}

/// The cgroup paths of process `pid`, one per hierarchy (empty when unreadable).
pub fn cgroups_of(pid: i32) -> Vec<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    text.lines().filter_map(|l| l.splitn(3, ':').nth(2)).map(str::to_owned).collect()
}

/// The working directories of the processes this one can see.
pub fn working_dirs() -> HashSet<PathBuf> {
    let mut out = HashSet::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if e.file_name().to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
            if let Ok(cwd) = std::fs::read_link(e.path().join("cwd")) {
                out.insert(cwd);
            }
        }
    }
    out
}
