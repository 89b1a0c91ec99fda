//! The no-cgroup fallback: each guest is a process group (its leader calls setpgid before
//! exec), frozen with SIGSTOP, thawed with SIGCONT and killed with SIGKILL to the group,
//! with RLIMIT_AS as its memory cap. Weak: a guest that calls setsid leaves its group and
//! escapes all three, which is why the agent says so loudly at start-up.

/// Sends `sig` to a process group.
pub fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill has no memory-safety preconditions.
        unsafe { libc::kill(-pgid, sig) };
    }
}

/// The live members of a process group, from /proc (field 5 of stat is the pgrp).
pub fn members(pgid: i32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
            let Some((_, rest)) = stat.rsplit_once(')') else { return false };
            let f: Vec<&str> = rest.split_whitespace().collect();
            f.first() != Some(&"Z") && f.get(2).and_then(|g| g.parse::<i32>().ok()) == Some(pgid)
        })
        .collect()
}

/// CPU time (user, system) in µs and resident bytes of the group's live members.
pub fn usage(pgid: i32) -> ((u64, u64), u64) {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let (mut u, mut s, mut rss) = (0, 0, 0);
    for pid in members(pgid) {
        if let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            if let Some((_, rest)) = stat.rsplit_once(')') {
                let f: Vec<&str> = rest.split_whitespace().collect();
                let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                u += (n(11) + n(13)) * 1_000_000 / hz;
                s += (n(12) + n(14)) * 1_000_000 / hz;
                rss += n(21) * 4096;
            }
        }
    }
    ((u, s), rss)
}
