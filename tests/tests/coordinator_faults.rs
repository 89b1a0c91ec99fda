//! The coordinator as a real `lull coordinator serve` process over embedded SQLite, with
//! simulated agents (HTTP clients on threads) working through 1,000 short jobs submitted
//! by `lull submit`, while the coordinator is killed with SIGKILL twice and restarted:
//! no job is lost, no task runs on two agents at once, and every completion is counted
//! exactly once (in the agents' answers, in the job states and in the report). The same
//! on PostgreSQL with two replicas, the one leading the scheduler killed.

use lull_e2e::lull_bin;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const JOBS: usize = 1000;
const AGENTS: usize = 8;

struct Coordinator {
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    /// The database URL (given in `LULL_COORDINATOR_DB`); `None`: SQLite in `dir`.
    db: Option<String>,
}

impl Coordinator {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(lull_bin());
        c.args(args)
            .env("LULL_DATA_DIR", &self.dir)
            .env("LULL_CONFIG", self.dir.join("config.toml"))
            .env("LULL_SOCKET", self.dir.join("agent.sock"));
        c
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start(&mut self) {
        let err = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join("coordinator.log")).unwrap();
        let db = self.db.clone().unwrap_or_else(|| format!("sqlite:{}", self.dir.join("coordinator.db").display()));
        let listen = format!("127.0.0.1:{}", self.port);
        // The URL (a password in it) by the environment: never on a command line.
        let child = self
            .cmd(&["coordinator", "serve", "--listen", &listen, "--lease-ttl-s", "10"])
            .env("LULL_COORDINATOR_DB", &db)
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .expect("spawn coordinator");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        let http = reqwest::blocking::Client::new();
        while Instant::now() < deadline {
            if http.get(format!("{}/healthz", self.url())).send().is_ok_and(|r| r.status().is_success()) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("coordinator did not start: {}", std::fs::read_to_string(self.dir.join("coordinator.log")).unwrap_or_default());
    }

    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            c.kill().unwrap();
            c.wait().unwrap();
        }
    }
}

impl Drop for Coordinator {
    fn drop(&mut self) {
        self.kill9();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn key(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("coordinator-admin.key")).unwrap().trim().to_string()
}

/// One run of a task on an agent: (job, rank, lease, started, finished).
type Run = (i64, i64, i64, Instant, Instant);

/// One task's runs: (lease, started, finished).
type Spans = Vec<(i64, Instant, Instant)>;

/// The runs grouped by task (job, rank), each task's in order of start.
fn runs_by_task(runs: &[Run]) -> HashMap<(i64, i64), Spans> {
    let mut by_task: HashMap<(i64, i64), Spans> = HashMap::new();
    for &(job, rank, epoch, s, f) in runs {
        by_task.entry((job, rank)).or_default().push((epoch, s, f));
    }
    for rs in by_task.values_mut() {
        rs.sort_by_key(|r| r.1);
    }
    by_task
}

#[test]
fn kill9_during_1000_jobs_loses_none_and_counts_each_once() {
    let tmp = tempfile::tempdir().unwrap();
    let mut c = Coordinator { dir: tmp.path().to_path_buf(), port: free_port(), child: None, db: None };
    c.start();
    let admin = key(&c.dir);
    let out = c.cmd(&["submit", "--url", &c.url(), "--key", &admin, "--count", &JOBS.to_string(), "--", "/bin/true"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), JOBS);

    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let token: Value = http
        .post(format!("{}/api/v1/join-tokens", c.url()))
        .bearer_auth(&admin)
        .json(&json!({"uses": AGENTS}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let mut secrets = vec![];
    for i in 0..AGENTS {
        let e: Value = http
            .post(format!("{}/api/v1/enrol", c.url()))
            .json(&json!({"token": token["token"], "owner": format!("owner{}", i % 2), "machine": format!("m{i}"), "cpus": 2}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        secrets.push(e["secret"].as_str().unwrap().to_string());
    }

    let pool = Agents::start(vec![c.url()], secrets);
    let (counted, stop, runs, threads) = (pool.counted, pool.stop, pool.runs, pool.threads);
    // Kill -9 twice while jobs run, restarting after each.
    for at in [250, 650] {
        let t0 = Instant::now();
        while counted.load(Ordering::SeqCst) < at {
            assert!(t0.elapsed() < Duration::from_secs(120), "stuck at {} completions", counted.load(Ordering::SeqCst));
            std::thread::sleep(Duration::from_millis(5));
        }
        c.kill9();
        std::thread::sleep(Duration::from_millis(700));
        c.start();
    }
    let t0 = Instant::now();
    while counted.load(Ordering::SeqCst) < JOBS {
        assert!(t0.elapsed() < Duration::from_secs(120), "only {} of {JOBS} completions counted", counted.load(Ordering::SeqCst));
        std::thread::sleep(Duration::from_millis(20));
    }
    // A little longer, to catch any extra completion.
    std::thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::Relaxed);
    let retries: u32 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(retries > 0, "the agents did see the coordinator die");
    assert_eq!(counted.load(Ordering::SeqCst), JOBS, "each completion counted exactly once");

    let jobs: Vec<Value> = http.get(format!("{}/api/v1/jobs?limit=5000", c.url())).bearer_auth(&admin).send().unwrap().json().unwrap();
    assert_eq!(jobs.len(), JOBS);
    assert!(jobs.iter().all(|j| j["state"] == "completed"), "none lost");
    let report: Value =
        http.get(format!("{}/api/v1/reports?by=machine&since=7d", c.url())).bearer_auth(&admin).send().unwrap().json().unwrap();
    let completed: u64 = report["rows"].as_array().unwrap().iter().map(|r| r["jobs_completed"].as_u64().unwrap()).sum();
    assert_eq!(completed, JOBS as u64, "the report counts each completion once");

    // No task ran on two agents at once: runs of one task never overlap in time.
    let runs = runs.lock().unwrap();
    let by_task = runs_by_task(&runs);
    assert_eq!(by_task.len(), JOBS);
    for (task, rs) in by_task {
        for w in rs.windows(2) {
            assert!(w[0].2 <= w[1].1, "task {task:?} ran twice at once: {rs:?}");
            assert!(w[0].0 < w[1].0, "a re-run has a newer lease: {rs:?}");
        }
    }
}

/// Simulated agents (HTTP clients on threads) leasing and completing tasks until `stop`,
/// each asking the coordinators in `urls` in turn, moving on when one does not answer.
struct Agents {
    counted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    runs: Arc<Mutex<Vec<Run>>>,
    threads: Vec<std::thread::JoinHandle<u32>>,
}

impl Agents {
    fn start(urls: Vec<String>, secrets: Vec<String>) -> Agents {
        let counted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let runs: Arc<Mutex<Vec<Run>>> = Arc::default();
        let mut threads = vec![];
        for (n, secret) in secrets.into_iter().enumerate() {
            let (counted, stop, runs, urls) = (counted.clone(), stop.clone(), runs.clone(), urls.clone());
            threads.push(std::thread::spawn(move || agent_loop(n, &urls, &secret, &counted, &stop, &runs)));
        }
        Agents { counted, stop, runs, threads }
    }
}

fn agent_loop(n: usize, urls: &[String], secret: &str, counted: &AtomicUsize, stop: &AtomicBool, runs: &Mutex<Vec<Run>>) -> u32 {
    let mut which = n;
    let url = |which: usize| urls[which % urls.len()].clone();
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let mut retried = 0u32;
    while !stop.load(Ordering::Relaxed) {
        let r = http
            .post(format!("{}/api/v1/lease", url(which)))
            .bearer_auth(secret)
            .json(&json!({"free_mem_bytes": 1u64 << 30, "wait_ms": 500}))
            .send();
        let lease: Value = match r {
            Ok(r) if r.status().as_u16() == 200 => r.json().unwrap(),
            Ok(r) if r.status().as_u16() == 204 => {
                // Nothing within the wait: ask the next coordinator (if several).
                which += 1;
                continue;
            }
            Ok(r) => panic!("lease answered {}", r.status()),
            Err(_) => {
                // The coordinator is down: try again shortly (the next one, if several).
                // Seeing it die counts whether the kill hit a poll or a completion (a
                // poll is where an agent spends nearly all its time).
                retried += 1;
                which += 1;
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let (job, rank, epoch) = (lease["job_id"].as_i64().unwrap(), lease["rank"].as_i64().unwrap(), lease["lease"].as_i64().unwrap());
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(2)); // the "job"
        let finished = Instant::now();
        runs.lock().unwrap().push((job, rank, epoch, started, finished));
        // Report completion until the coordinator answers (it may be down).
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let r = http
                .post(format!("{}/api/v1/tasks/{job}/{rank}/complete", url(which)))
                .bearer_auth(secret)
                .json(&json!({"lease": epoch, "exit_code": 0, "user_cpu_s": 0.001, "sys_cpu_s": 0.0}))
                .send();
            match r {
                Ok(r) if r.status().as_u16() == 200 => {
                    let v: Value = r.json().unwrap();
                    match v["counted"].as_bool() {
                        Some(true) => {
                            counted.fetch_add(1, Ordering::SeqCst);
                        }
                        // Idempotent retry: an earlier attempt of this same
                        // (agent, lease) was committed, and the coordinator was
                        // killed before its answer arrived. That attempt counted.
                        Some(false) => {
                            assert!(attempts > 1, "a first completion answered counted: false");
                            counted.fetch_add(1, Ordering::SeqCst);
                        }
                        None => panic!("complete answered {v}"),
                    }
                    break;
                }
                // The lease was lost while the coordinator was down: the task is
                // someone else's now.
                Ok(r) if r.status().as_u16() == 409 => break,
                Ok(r) => panic!("complete answered {}", r.status()),
                Err(_) => {
                    retried += 1;
                    which += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
    }
    retried
}

/// Two `lull coordinator serve` replicas on one PostgreSQL database (a fresh one per run),
/// agents asking both in turn: the replica leading the scheduler is killed with SIGKILL
/// midway; the other takes the lead within seconds, no job is lost, no task runs on two
/// agents at once and every completion counts once. (Skipped without `LULL_TEST_PG_URL`,
/// unless `LULL_REQUIRE_POSTGRES=1`.)
#[test]
fn kill9_of_the_leading_replica_on_postgres_loses_no_job_and_leases_none_twice() {
    let Some(base) = std::env::var("LULL_TEST_PG_URL").ok() else {
        assert!(std::env::var("LULL_REQUIRE_POSTGRES").is_err(), "LULL_REQUIRE_POSTGRES=1 but LULL_TEST_PG_URL is unset");
        return;
    };
    const N: usize = 400;
    let name = format!("lull_faults_{}", std::process::id());
    let created = Command::new("psql").args([base.as_str(), "-qc", &format!("CREATE DATABASE {name}")]).output().expect("psql");
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let i = base.rfind('/').expect("LULL_TEST_PG_URL must be postgres://user:pass@host/db");
    let db = format!("{}/{name}", &base[..i]);
    let (t1, t2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut r1 = Coordinator { dir: t1.path().to_path_buf(), port: free_port(), child: None, db: Some(db.clone()) };
    r1.start();
    let mut r2 = Coordinator { dir: t2.path().to_path_buf(), port: free_port(), child: None, db: Some(db.clone()) };
    r2.start();
    let admin = key(&r1.dir);
    let out = r1.cmd(&["submit", "--url", &r1.url(), "--key", &admin, "--count", &N.to_string(), "--", "/bin/true"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let token: Value = http
        .post(format!("{}/api/v1/join-tokens", r1.url()))
        .bearer_auth(&admin)
        .json(&json!({"uses": AGENTS}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let secrets: Vec<String> = (0..AGENTS)
        .map(|i| {
            let e: Value = http
                .post(format!("{}/api/v1/enrol", r2.url()))
                .json(&json!({"token": token["token"], "owner": "pool", "machine": format!("m{i}"), "cpus": 2}))
                .send()
                .unwrap()
                .json()
                .unwrap();
            e["secret"].as_str().unwrap().to_string()
        })
        .collect();
    let leads = |c: &Coordinator| {
        std::fs::read_to_string(c.dir.join("coordinator.log")).unwrap_or_default().matches("this replica leads scheduling").count()
    };
    let pool = Agents::start(vec![r1.url(), r2.url()], secrets);
    let t0 = Instant::now();
    while pool.counted.load(Ordering::SeqCst) < N / 3 {
        assert!(t0.elapsed() < Duration::from_secs(120), "stuck at {} completions", pool.counted.load(Ordering::SeqCst));
        std::thread::sleep(Duration::from_millis(5));
    }
    let (leader, follower) = if leads(&r1) > 0 { (&mut r1, &mut r2) } else { (&mut r2, &mut r1) };
    assert_eq!(leads(leader), 1, "one replica leads");
    assert_eq!(leads(follower), 0, "the other does not");
    leader.kill9();
    let killed = Instant::now();
    while leads(follower) == 0 {
        assert!(killed.elapsed() < Duration::from_secs(10), "no new leader 10 s after the leader's kill -9");
        std::thread::sleep(Duration::from_millis(20));
    }
    let took_over = killed.elapsed();
    let t0 = Instant::now();
    while pool.counted.load(Ordering::SeqCst) < N {
        assert!(t0.elapsed() < Duration::from_secs(120), "only {} of {N} completions counted", pool.counted.load(Ordering::SeqCst));
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    pool.stop.store(true, Ordering::Relaxed);
    for t in pool.threads {
        t.join().unwrap();
    }
    assert_eq!(pool.counted.load(Ordering::SeqCst), N, "each completion counted exactly once");
    let jobs: Vec<Value> =
        http.get(format!("{}/api/v1/jobs?limit=5000", follower.url())).bearer_auth(&admin).send().unwrap().json().unwrap();
    assert_eq!(jobs.len(), N);
    assert!(jobs.iter().all(|j| j["state"] == "completed"), "none lost");
    let runs = pool.runs.lock().unwrap();
    let by_task = runs_by_task(&runs);
    assert_eq!(by_task.len(), N);
    for (task, rs) in by_task {
        for w in rs.windows(2) {
            assert!(w[0].2 <= w[1].1, "task {task:?} ran twice at once: {rs:?}");
        }
    }
    eprintln!("the other replica led {:.2} s after the leader's kill -9", took_over.as_secs_f64());
    drop(runs);
    r1.kill9();
    r2.kill9();
    let _ = Command::new("psql").args([base.as_str(), "-qc", &format!("DROP DATABASE {name} WITH (FORCE)")]).output();
}
