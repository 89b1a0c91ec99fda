//! Machines in a real pool for end-to-end tests: each a throw-away data directory, its
//! own cgroup base and a real `lull up` (coordinator + agent) or enrolled `lull agent`
//! process, with helpers to submit jobs through `lull submit` and follow them through the
//! coordinator's API. Used by `checkpoint_jobs.rs` and `gang_jobs.rs`.

use crate::{lull_bin, purge_cgroup_base};
use agent_core::control::{call, AgentStatus, Request, Response};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

pub use crate::skip_without_cgroups;

/// One machine: a data directory, a cgroup base and a `lull up` or `lull agent` process;
/// killed and purged on drop.
pub struct Machine {
    pub dir: tempfile::TempDir,
    pub base: String,
    pub child: Option<Child>,
}

impl Machine {
    pub fn new(config: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        Self { dir, base: format!("lull-e2e-pool-{}-{n}", std::process::id()), child: None }
    }

    pub fn lull(&self, args: &[&str]) -> Command {
        let dir = self.dir.path();
        let mut c = Command::new(lull_bin());
        crate::agent_env(c.args(args), dir).env("LULL_CGROUP", &self.base);
        c
    }

    /// Starts `lull <args>` in the background, its output in `out.txt` / `err.txt`.
    pub fn spawn(&mut self, args: &[&str], env: &[(&str, &str)]) {
        let mut c = self.lull(args);
        c.envs(env.iter().copied());
        let out = std::fs::File::create(self.dir.path().join("out.txt")).unwrap();
        let err = std::fs::File::create(self.dir.path().join("err.txt")).unwrap();
        self.child = Some(c.stdout(out).stderr(err).spawn().unwrap());
    }

    /// `lull up` (coordinator + this machine's agent); returns the coordinator's URL.
    pub fn up(&mut self, env: &[(&str, &str)]) -> String {
        self.spawn(&["up", "--listen", "127.0.0.1:0", "--owner", "alice", "--machine", "box1"], env);
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(self.dir.path().join("out.txt")).unwrap_or_default();
            if let Some(line) = text.lines().find(|l| l.trim_start().starts_with("coordinator")) {
                return line.split_whitespace().nth(1).unwrap().trim_end_matches('/').to_string();
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "lull up did not come up: {text}\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its stderr, and how its process ended if it has (a process killed from outside
    /// leaves no line of its own).
    pub fn log(&self) -> String {
        let mut text = std::fs::read_to_string(self.dir.path().join("err.txt")).unwrap_or_default();
        if let Some(end) = self.child.as_ref().and_then(|c| ended(c.id())) {
            text.push_str(&format!("\n[the lull process {end}]"));
        }
        text
    }

    /// The agent's own log files (`lull agent` writes them in `logs/`), concatenated.
    pub fn agent_log(&self) -> String {
        let Ok(rd) = std::fs::read_dir(self.dir.path().join("logs")) else { return String::new() };
        rd.flatten().map(|e| std::fs::read_to_string(e.path()).unwrap_or_default()).collect()
    }

    pub fn admin(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("coordinator-admin.key")).unwrap().trim().to_string()
    }

    /// The agent's status, or `None` while its socket does not answer (yet).
    pub fn try_status(&self) -> Option<AgentStatus> {
        crate::agent_status(&self.dir.path().join("agent.sock"))
    }

    pub fn call(&self, req: &Request) -> AgentStatus {
        match call(&self.dir.path().join("agent.sock"), req) {
            Ok(Response::Status(s)) => *s,
            other => panic!("the agent answered {other:?}\n{}", self.log()),
        }
    }

    /// The directories of the job's rank-0 leases on this machine (see [`Self::rank_workdirs`]).
    pub fn workdirs(&self, job: i64) -> Vec<PathBuf> {
        self.rank_workdirs(job, 0)
    }

    /// The directories of the job's leases of `rank` on this machine, oldest first: each
    /// holds the guest's work directory `work/` and its `stdout.log`, `stderr.log`.
    pub fn rank_workdirs(&self, job: i64, rank: u32) -> Vec<PathBuf> {
        let prefix = format!("{job}-{rank}-");
        let Ok(rd) = std::fs::read_dir(crate::work_root_of(self.dir.path()).join("jobs")) else { return Vec::new() };
        let mut dirs: Vec<PathBuf> =
            rd.flatten().filter(|e| e.file_name().to_string_lossy().starts_with(&prefix)).map(|e| e.path()).collect();
        dirs.sort();
        dirs
    }

    /// Enrols this machine in the coordinator at `url` with a one-use token minted by
    /// `coordinator` (the `lull up` machine), as `owner`'s `machine`.
    pub fn enrol(&self, coordinator: &Machine, url: &str, owner: &str, machine: &str) {
        let out = coordinator.lull(&["coordinator", "token", "create", "--uses", "1"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let out = self.lull(&["enrol", "--url", url, "--token", &token, "--owner", owner, "--machine", machine]).output().unwrap();
        assert!(out.status.success(), "{}\nthe coordinator's machine: {}", String::from_utf8_lossy(&out.stderr), coordinator.log());
    }

    /// Asserts that this machine's `lull` process still holds SQLite's locks on its
    /// databases (the coordinator's when it runs one, and the ledger), as SQLite holds a
    /// POSIX lock on each open database's `-shm` file: losing them lets another
    /// process's SQLite truncate a `-shm` this process has mapped (SIGBUS).
    pub fn assert_holds_sqlite_locks(&self, when: &str) {
        let pid = self.child.as_ref().expect("a running lull process").id();
        for db in ["coordinator.db", "ledger.db"] {
            let shm = self.dir.path().join(format!("{db}-shm"));
            if shm.exists() {
                assert!(
                    holds_posix_lock(pid, &shm),
                    "{when}, lull (pid {pid}) no longer holds SQLite's lock on {}\n{}",
                    shm.display(),
                    self.log()
                );
            }
        }
    }

    /// Stops the process with SIGTERM; it must exit cleanly.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        // SAFETY: kill with a pid we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                assert!(st.success(), "lull exited with {st}: {}", self.log());
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "lull did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Whether process `pid` holds a POSIX record lock on `file` (a line of `/proc/locks`:
/// `N: POSIX ADVISORY READ|WRITE PID MAJ:MIN:INODE START END`).
pub fn holds_posix_lock(pid: u32, file: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(ino) = std::fs::metadata(file).map(|m| m.ino().to_string()) else { return false };
    let pid = pid.to_string();
    std::fs::read_to_string("/proc/locks").unwrap_or_default().lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 6 && f[1] == "POSIX" && f[4] == pid && f[5].rsplit(':').next() == Some(ino.as_str())
    })
}

/// How child `pid` ended ("exited with code 1", "was killed by signal 9"), or `None` while
/// it runs; it is left unreaped (`WNOWAIT`) for the owner of its `Child`.
fn ended(pid: u32) -> Option<String> {
    // SAFETY: waitid fills the zeroed siginfo_t it is given; WNOWAIT leaves the child as is.
    let info = unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(libc::P_PID, pid, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
        if r != 0 || info.si_pid() == 0 {
            return None;
        }
        info
    };
    // SAFETY: si_status is set for the CLD_* codes waitid returns.
    let status = unsafe { info.si_status() };
    Some(match info.si_code {
        libc::CLD_EXITED => format!("exited with code {status}"),
        _ => format!("was killed by signal {status}"),
    })
}

impl Drop for Machine {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        purge_cgroup_base(&self.base);
    }
}

pub fn http() -> reqwest::blocking::Client {
    reqwest::blocking::Client::new()
}

pub fn job(url: &str, admin: &str, id: i64) -> Value {
    http().get(format!("{url}/api/v1/jobs/{id}")).bearer_auth(admin).send().unwrap().json().unwrap()
}

/// Waits until `ok` holds of the job.
pub fn wait_job(url: &str, admin: &str, id: i64, what: &str, secs: u64, ok: impl Fn(&Value) -> bool, log: impl Fn() -> String) -> Value {
    let t0 = Instant::now();
    loop {
        let j = job(url, admin, id);
        if ok(&j) {
            return j;
        }
        assert!(t0.elapsed() < Duration::from_secs(secs), "never {what}: {j}\n{}", log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Submits a job through `lull submit` on `m`; returns its id.
pub fn submit(m: &Machine, args: &[&str]) -> i64 {
    let mut all = vec!["submit", "--json"];
    all.extend_from_slice(args);
    let out = m.lull(&all).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"].as_i64().unwrap()
}

#[cfg(test)]
mod tests {
    use super::ended;

    #[test]
    fn how_a_child_ended_is_read_without_reaping_it() {
        let mut sleeper = std::process::Command::new("sleep").arg("100").spawn().unwrap();
        assert_eq!(ended(sleeper.id()), None, "still running");
        // SAFETY: kill with a pid we spawned.
        unsafe { libc::kill(sleeper.id() as i32, libc::SIGKILL) };
        let t0 = std::time::Instant::now();
        while ended(sleeper.id()).is_none() {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "never seen to end");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(ended(sleeper.id()).as_deref(), Some("was killed by signal 9"));
        assert!(sleeper.wait().unwrap().code().is_none(), "left for its Child to reap");
        let mut quitter = std::process::Command::new("sh").args(["-c", "exit 3"]).spawn().unwrap();
        let t0 = std::time::Instant::now();
        while ended(quitter.id()).is_none() {
            assert!(t0.elapsed() < std::time::Duration::from_secs(10), "never seen to end");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(ended(quitter.id()).as_deref(), Some("exited with code 3"));
        assert_eq!(quitter.wait().unwrap().code(), Some(3));
    }
}
