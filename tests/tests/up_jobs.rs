//! Issue 5's first check, with real processes: `lull up`, `lull submit` 20 short
//! CPU-bound jobs, the local agent leases them and runs each as a guest under the policy
//! (cgroup-contained, SCHED_IDLE), reports each completion with the guest's CPU, and
//! `lull report` then shows the owner's donated CPU-seconds for the day equal to what
//! the agent's ledger accounted.
//!
//! Compared, once every job has completed and the agent's outbox is drained:
//! - the report's `cpu_s` for owner `alice` on the agent's budget day equals the ledger's
//!   `donated_days.cpu_us` for that day (and the agent's own `donated_cpu_s_today`);
//! - the sum of the 20 tasks' `user_cpu_s + sys_cpu_s` the coordinator stored equals the
//!   sum of the ledger's per-guest totals (`guest_usage.cpu_us`);
//!
//! each to the microsecond (far inside the second the issue asks for), and the report
//! counts the 20 completed jobs. A second test pauses the agent while a job's guest runs:
//! the policy evicts it, the link gives the task back (`evicted`), and after `resume`
//! the re-queued task runs again and completes. It needs cgroups (root here; `LULL_REQUIRE_CGROUPS=1`
//! makes it required) and uses its own cgroup base, purged even when it fails.

use agent_core::control::{call, AgentStatus, Request, Response};
use agent_core::policy::PauseSpan;
use lull_e2e::{lull_bin, purge_cgroup_base, skip_without_cgroups};
use serde_json::Value;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// Guest work is accepted at once whatever the load of the shared machine: owner CPU is
/// left out of the availability definition and there is no recruitment wait. Two job
/// slots, so guests also run side by side.
const EAGER: &str = "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                     recruitment_threshold_s = 0\n[guests]\nmax_jobs = 2\n";
/// One job slot: nothing else leases while the only job runs.
const ONE_SLOT: &str = "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                        recruitment_threshold_s = 0\n";
/// The jobs: a short CPU-bound shell loop.
const JOB: &str = "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done";
const JOBS: usize = 20;

/// `lull up` in a directory of its own, with its own cgroup base; killed and purged on drop.
struct Up {
    dir: tempfile::TempDir,
    base: String,
    child: Option<Child>,
    url: String,
}

impl Up {
    fn lull(&self, args: &[&str]) -> Command {
        let dir = self.dir.path();
        let mut c = Command::new(lull_bin());
        c.args(args).env("LULL_DATA_DIR", dir).env("LULL_CONFIG", dir.join("config.toml")).env("LULL_SOCKET", dir.join("agent.sock"));
        c.env("LULL_CGROUP", &self.base).env_remove("LULL_COORDINATOR_URL").env_remove("LULL_KEY");
        c
    }

    fn start(config: &str) -> Self {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), config).unwrap();
        let base = format!("lull-e2e-upjobs-{}-{n}", std::process::id());
        let mut up = Self { base, dir, child: None, url: String::new() };
        let (out, err) = (up.dir.path().join("up.txt"), up.dir.path().join("up-err.txt"));
        let child = up
            .lull(&["up", "--listen", "127.0.0.1:0", "--owner", "alice", "--machine", "box1"])
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .unwrap();
        up.child = Some(child);
        let t0 = Instant::now();
        loop {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            // The coordinator's line (the dashboard's says "none" in a build without it).
            if let Some(line) = text.lines().find(|l| l.trim_start().starts_with("coordinator")) {
                up.url = line.split_whitespace().nth(1).unwrap().trim_end_matches('/').to_string();
                return up;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "lull up did not come up: {text}\n{}", up.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("up-err.txt")).unwrap_or_default()
    }

    fn admin(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("coordinator-admin.key")).unwrap().trim().to_string()
    }

    fn jobs(&self) -> Vec<Value> {
        let v: Value = reqwest::blocking::Client::new()
            .get(format!("{}/api/v1/jobs", self.url))
            .bearer_auth(self.admin())
            .send()
            .unwrap()
            .json()
            .unwrap();
        v.as_array().cloned().unwrap_or_default()
    }

    fn call(&self, req: &Request) -> AgentStatus {
        match call(&self.dir.path().join("agent.sock"), req) {
            Ok(Response::Status(s)) => *s,
            other => panic!("the agent answered {other:?}"),
        }
    }

    /// Waits until `what` holds of the job list.
    fn wait_jobs(&self, what: &str, secs: u64, ok: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let t0 = Instant::now();
        loop {
            let jobs = self.jobs();
            if ok(&jobs) {
                return jobs;
            }
            assert!(t0.elapsed() < Duration::from_secs(secs), "never {what}: {jobs:?}\n{}", self.log());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Stops `lull up` with SIGTERM; it must exit cleanly.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        // SAFETY: kill with a pid we spawned.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                assert!(st.success(), "lull up exited with {st}: {}", self.log());
                return;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "lull up did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        purge_cgroup_base(&self.base);
    }
}

#[test]
fn up_runs_submitted_jobs_as_guests_and_the_report_matches_the_ledger() {
    if skip_without_cgroups() {
        return;
    }
    let mut up = Up::start(EAGER);
    let t_start = Instant::now();
    let out = up.lull(&["submit", "--count", &JOBS.to_string(), "--", "sh", "-c", JOB]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // Every job is leased, run as a guest and completed by this machine's agent.
    let t0 = Instant::now();
    let jobs = loop {
        let jobs = up.jobs();
        let done = jobs.iter().filter(|j| j["state"] == "completed").count();
        if jobs.len() == JOBS && done == JOBS {
            break jobs;
        }
        assert!(jobs.iter().all(|j| j["state"] != "failed"), "a job failed: {jobs:?}\n{}", up.log());
        assert!(t0.elapsed() < Duration::from_secs(240), "{done} of {JOBS} jobs completed: {jobs:?}\n{}", up.log());
        std::thread::sleep(Duration::from_millis(250));
    };
    let jobs_took = t0.elapsed();
    let mut task_cpu_s = 0.0;
    for j in &jobs {
        let t = &j["tasks"][0];
        assert_eq!(t["exit_code"].as_i64(), Some(0), "{j}");
        assert_eq!(t["evictions"].as_u64(), Some(0), "{j}");
        let (u, s) = (t["user_cpu_s"].as_f64().unwrap(), t["sys_cpu_s"].as_f64().unwrap());
        assert!(u + s > 0.0, "a guest that ran a loop used CPU: {j}");
        task_cpu_s += u + s;
    }

    // The outbox drains: every donation the ledger accounted has reached the coordinator.
    let ledger_path = up.dir.path().join("ledger.db");
    let t0 = Instant::now();
    loop {
        let pending = agent_core::ledger::Ledger::open(&ledger_path).unwrap().outbox_pending(1).unwrap();
        if pending.is_empty() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the outbox never drained: {pending:?}\n{}", up.log());
        std::thread::sleep(Duration::from_millis(250));
    }
    let Ok(Response::Status(status)) = call(&up.dir.path().join("agent.sock"), &Request::Status) else {
        panic!("the agent does not answer on its socket")
    };
    let day = status.policy.budget_day;
    let db = rusqlite::Connection::open(&ledger_path).unwrap();
    let day_cpu_us: i64 = db.query_row("SELECT cpu_us FROM donated_days WHERE day = ?1", [day.to_string()], |r| r.get(0)).unwrap();
    let guests_cpu_us: i64 = db.query_row("SELECT SUM(cpu_us) FROM guest_usage", [], |r| r.get(0)).unwrap();
    let guests: i64 = db.query_row("SELECT COUNT(*) FROM guest_usage", [], |r| r.get(0)).unwrap();
    assert_eq!(guests, JOBS as i64, "one ledger entry per job's guest");

    let out = up.lull(&["report", "--by", "owner", "--since", "7d", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = report["rows"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["key"] == "alice" && r["period"] == day.to_string()).cloned())
        .unwrap_or_else(|| panic!("no row for alice on {day}: {report}"));
    let report_cpu_s = row["cpu_s"].as_f64().unwrap();
    eprintln!(
        "{JOBS} jobs completed in {:.1} s ({:.1} s after start): report {report_cpu_s:.6} CPU-s for alice on {day}, ledger \
         {:.6} (day) / {:.6} (guests), tasks {task_cpu_s:.6}",
        jobs_took.as_secs_f64(),
        t_start.elapsed().as_secs_f64(),
        day_cpu_us as f64 / 1e6,
        guests_cpu_us as f64 / 1e6,
    );
    let us = |s: f64| (s * 1e6).round() as i64;
    assert_eq!(us(report_cpu_s), day_cpu_us, "the report's CPU-seconds equal the ledger's for the day");
    assert_eq!(us(status.donated_cpu_s_today), day_cpu_us, "the agent's status shows the ledger's figure");
    assert_eq!(guests_cpu_us, day_cpu_us, "all of the day's donation is the jobs' guests");
    assert!((us(task_cpu_s) - guests_cpu_us).abs() <= JOBS as i64, "completions carry the ledger's per-guest CPU");
    assert_eq!(row["jobs_completed"].as_u64(), Some(JOBS as u64), "{row}");
    up.stop();
}

#[test]
fn a_job_evicted_by_the_policy_is_given_back_and_runs_again() {
    if skip_without_cgroups() {
        return;
    }
    let mut up = Up::start(ONE_SLOT);
    let out = up.lull(&["submit", "--", "sh", "-c", "sleep 3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    up.wait_jobs("leased", 120, |j| j.len() == 1 && j[0]["tasks"][0]["state"] == "leased");
    let t0 = Instant::now();
    while !up.call(&Request::Status).policy.guests_present {
        assert!(t0.elapsed() < Duration::from_secs(60), "the job's guest never ran: {}", up.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The owner pauses Lull: the guest is evicted and the task given back, not failed.
    up.call(&Request::Pause { span: PauseSpan::UntilResumed });
    let jobs = up.wait_jobs("given back", 60, |j| j[0]["tasks"][0]["evictions"] == 1);
    assert_ne!(jobs[0]["state"], "completed", "the guest was evicted before it ended: {jobs:?}");
    std::thread::sleep(Duration::from_secs(2));
    let jobs = up.jobs();
    assert_eq!(jobs[0]["tasks"][0]["state"], "queued", "nothing is leased while paused: {jobs:?}");
    assert!(!up.call(&Request::Status).policy.guests_present, "no guest runs while paused");
    // Resumed, the agent leases the task again and it completes.
    up.call(&Request::Resume);
    let jobs = up.wait_jobs("completed", 120, |j| j[0]["state"] == "completed");
    let t = &jobs[0]["tasks"][0];
    assert_eq!((t["exit_code"].as_i64(), t["evictions"].as_u64()), (Some(0), Some(1)), "{t}");
    up.stop();
}

#[test]
fn a_submitted_jobs_output_is_read_back_with_lull_jobs() {
    if skip_without_cgroups() {
        return;
    }
    let mut up = Up::start(ONE_SLOT);
    let out = up.lull(&["submit", "--json", "--", "sh", "-c", "echo hello; echo oops >&2; exit 3"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let id = serde_json::from_slice::<Value>(&out.stdout).unwrap()["id"].as_i64().unwrap().to_string();
    // A non-zero exit is a failure, with its code and why (issue 28).
    let jobs = up.wait_jobs("failed", 120, |j| j.len() == 1 && j[0]["state"] == "failed");
    assert_eq!(jobs[0]["tasks"][0]["exit_code"].as_i64(), Some(3), "{jobs:?}");
    assert_eq!(jobs[0]["reason"], "exit code 3", "{jobs:?}");

    let out = up.lull(&["jobs", "output", &id]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "oops\n");

    let out = up.lull(&["jobs"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let list = String::from_utf8_lossy(&out.stdout);
    assert!(
        list.lines().any(|l| l.split_whitespace().next() == Some(id.as_str()) && l.contains("failed") && l.contains("exit code 3")),
        "{list}"
    );
    let out = up.lull(&["jobs", "show", &id, "--json"]).output().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap()["state"], "failed");
    let out = up.lull(&["jobs", "list", "--json"]).output().unwrap();
    assert_eq!(serde_json::from_slice::<Value>(&out.stdout).unwrap().as_array().map(|a| a.len()), Some(1));

    // A job that is not there: one line, non-zero.
    let out = up.lull(&["jobs", "output", "999"]).output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no job 999"), "{err}");
    up.stop();
}
