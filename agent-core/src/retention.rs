//! Old guest work directories: each guest runs in a directory of its own under the data
//! directory (`guests/<id>` for `lull run`, `jobs/<job>-<rank>-<lease>` for leased
//! tasks) holding its files and its `stdout.log`/`stderr.log`. Once a guest has ended
//! nothing reads them again (a completion has sent its output's tail to the
//! coordinator), so directories untouched for `guests.retention_days` are removed, at
//! agent start and once a day. A directory some process still has as its working
//! directory (a guest that runs on, silent) is kept whatever its age.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The folders under the data directory that hold guests' work directories.
pub const WORK_PARENTS: [&str; 2] = ["guests", "jobs"];

/// The newest modification time of `dir` and of the entries directly inside it.
fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut newest = std::fs::symlink_metadata(dir).and_then(|m| m.modified()).ok()?;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if let Ok(t) = e.metadata().and_then(|m| m.modified()) {
            newest = newest.max(t);
        }
    }
    Some(newest)
}

/// Removes the work directories under `data_dir`'s `guests/` and `jobs/` not modified
/// within `keep` of `now` and no process's working directory (nor one's ancestor);
/// returns how many it removed. Failures are logged and skipped.
pub fn clean_work_dirs(data_dir: &Path, keep: Duration, now: SystemTime) -> usize {
    let Some(cutoff) = now.checked_sub(keep) else { return 0 };
    let busy = crate::sys::procfs::working_dirs();
    let mut removed = 0;
    for parent in WORK_PARENTS {
        for e in std::fs::read_dir(data_dir.join(parent)).into_iter().flatten().flatten() {
            let dir = e.path();
            if !e.file_type().is_ok_and(|t| t.is_dir()) || newest_mtime(&dir).is_none_or(|t| t >= cutoff) {
                continue;
            }
            if busy.iter().any(|cwd| cwd.starts_with(&dir)) {
                continue;
            }
            match std::fs::remove_dir_all(&dir) {
                Ok(()) => removed += 1,
                Err(e) => tracing::warn!("could not remove the old work directory {}: {e}", dir.display()),
            }
        }
    }
    removed
}

/// Cleans old work directories now and then once a day, until dropped.
pub async fn run(data_dir: PathBuf, retention_days: u32) {
    const DAY: Duration = Duration::from_secs(86_400);
    let keep = DAY * retention_days.max(1);
    loop {
        let dir = data_dir.clone();
        match tokio::task::spawn_blocking(move || clean_work_dirs(&dir, keep, SystemTime::now())).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(removed = n, days = retention_days, "removed guest work directories older than the retention"),
            Err(e) => tracing::warn!("cleaning old work directories: {e}"),
        }
        tokio::time::sleep(DAY).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn age(path: &Path, secs: u64) {
        let t = SystemTime::now() - Duration::from_secs(secs);
        let f = std::fs::File::options().read(true).open(path).unwrap();
        f.set_modified(t).unwrap();
    }

    #[test]
    fn only_old_idle_work_directories_are_removed() {
        let data = tempfile::tempdir().unwrap();
        let week = Duration::from_secs(7 * 86_400);
        let mk = |rel: &str, secs: u64| {
            let d = data.path().join(rel);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("stdout.log"), "x").unwrap();
            age(&d.join("stdout.log"), secs);
            age(&d, secs);
            d
        };
        let old_guest = mk("guests/g1", 8 * 86_400);
        let old_job = mk("jobs/1-0-1", 30 * 86_400);
        let fresh = mk("jobs/2-0-1", 86_400);
        // An old directory whose log was written an hour ago: its guest still writes.
        let writing = mk("jobs/3-0-1", 9 * 86_400);
        age(&writing.join("stdout.log"), 3600);
        // An old, silent directory a process still works in.
        let busy = mk("guests/busy", 9 * 86_400);
        let mut child = std::process::Command::new("sleep").arg("30").current_dir(&busy).spawn().unwrap();
        age(&busy, 9 * 86_400);
        let other = data.path().join("ledger.db");
        std::fs::write(&other, "keep").unwrap();
        age(&other, 90 * 86_400);

        let n = clean_work_dirs(data.path(), week, SystemTime::now());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(n, 2);
        assert!(!old_guest.exists() && !old_job.exists());
        assert!(fresh.exists() && writing.exists() && busy.exists() && other.exists());
        assert_eq!(clean_work_dirs(&data.path().join("missing"), week, SystemTime::now()), 0);
    }
}
