//! The coordinator dashboard in a real browser against a real coordinator with real data.
//!
//! `lull up` runs a coordinator and this machine's agent (owner alice); the agent is
//! paused by its owner, and its heartbeats (carrying its daily interruption limit) show
//! it so. Four more machines enrol through the API as agents do and send heartbeats,
//! ledger records (donated time over several days, interruptions up to a limit) and
//! lease, complete, fail and give back jobs submitted by the admin and by owners. Then
//! `ui/tests/dashboard.mjs` drives Debian's Chromium (playwright-core, headless) through
//! every page and checks the charts are drawn, the tables equal the API's JSON and the
//! CSV export equals the API's CSV byte for byte; screenshots land in
//! `artifacts/dashboard/`.
//!
//! Skips, loudly, only when Chromium is not installed (`LULL_REQUIRE_CHROMIUM=1`, set by
//! scripts/test.sh, makes that a failure). Node, playwright-core (ui/node_modules) and
//! the built dashboard (ui/dist-dashboard) are required.

use agent_core::control::{call, Request, Response};
use agent_core::policy::PauseSpan;
use lull_e2e::{lull_bin, required, workspace};
use reqwest::blocking::Client;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn chromium() -> Option<PathBuf> {
    let p = PathBuf::from(std::env::var("LULL_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    if p.exists() {
        return Some(p);
    }
    assert!(!required("LULL_REQUIRE_CHROMIUM"), "LULL_REQUIRE_CHROMIUM=1 but {} is missing (apt-get install chromium)", p.display());
    eprintln!("\n{0}\nSKIPPED: the dashboard browser test needs Chromium at {1} (apt-get install chromium; scripts/deps.sh test installs it).\n{0}\n", "!".repeat(78), p.display());
    None
}

/// The API as a given key sees it.
struct Api {
    http: Client,
    base: String,
}

impl Api {
    fn send(&self, key: &str, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let mut r = if method == "GET" { self.http.get(url) } else { self.http.post(url) };
        if !key.is_empty() {
            r = r.bearer_auth(key);
        }
        if let Some(b) = body {
            r = r.json(&b);
        }
        let resp = r.send().unwrap();
        let status = resp.status();
        let text = resp.text().unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
    fn post(&self, key: &str, path: &str, body: Value) -> Value {
        self.send(key, "POST", path, Some(body))
    }
    fn get(&self, key: &str, path: &str) -> Value {
        self.send(key, "GET", path, None)
    }
}

/// `lull up` in its own directory; stopped with SIGTERM on drop.
struct Up {
    dir: tempfile::TempDir,
    child: Child,
}

impl Drop for Up {
    fn drop(&mut self) {
        // SAFETY: kill with a pid we spawned.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_up() -> (Up, String) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("up.txt");
    let child = Command::new(lull_bin())
        .args(["up", "--listen", "127.0.0.1:0", "--owner", "alice", "--machine", "alice-desk"])
        .env("LULL_DATA_DIR", d)
        .env("LULL_CONFIG", d.join("config.toml"))
        .env("LULL_SOCKET", d.join("agent.sock"))
        .env("LULL_CGROUP", format!("lull-e2e-dashboard-{}", std::process::id()))
        .env_remove("LULL_COORDINATOR_URL")
        .env_remove("LULL_KEY")
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::fs::File::create(d.join("up-err.txt")).unwrap())
        .spawn()
        .unwrap();
    let up = Up { dir, child };
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.trim_start().starts_with("dashboard")) {
            let url = line.split_whitespace().nth(1).unwrap().trim_end_matches('/').to_string();
            return (up, url);
        }
        let err = std::fs::read_to_string(up.dir.path().join("up-err.txt")).unwrap_or_default();
        assert!(t0.elapsed() < Duration::from_secs(60), "lull up did not come up: {text}\n{err}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An agent enrolled through the API: (agent id, secret).
fn enrol(api: &Api, admin: &str, owner: &str, machine: &str) -> (String, String) {
    let t = api.post(admin, "/api/v1/join-tokens", json!({}));
    let e = api.post("", "/api/v1/enrol", json!({"token": t["token"], "owner": owner, "machine": machine, "cpus": 4}));
    (e["agent_id"].as_str().unwrap().to_string(), e["secret"].as_str().unwrap().to_string())
}

fn heartbeat(api: &Api, secret: &str, state: &str, budget_left: u32, limit: u32) {
    api.post(
        secret,
        "/api/v1/heartbeat",
        json!({"state": state, "available": state == "idle", "budget_left": budget_left, "free_mem_bytes": 6u64 << 30,
               "base_speed": 100.0, "current_speed": 80.0, "interruption_limit": limit}),
    );
}

/// Donated time on each of the last days (UTC, as reports count them), and interruptions.
fn records(api: &Api, secret: &str, cpu_s_per_day: &[f64], interruptions: &[(i64, u32, u32)]) {
    let today = chrono::Utc::now().date_naive();
    let day = |ago: i64| (today - chrono::Duration::days(ago)).to_string();
    let mut recs = vec![];
    for (ago, cpu) in cpu_s_per_day.iter().enumerate() {
        if *cpu > 0.0 {
            let cpu_us = (cpu * 1e6) as u64 + 123;
            recs.push(json!({"seq": recs.len() + 1, "kind": "donation",
                "payload": {"guest": format!("g{ago}"), "day": day(ago as i64), "cpu_us": cpu_us, "wall_ms": cpu_us / 800}}));
        }
    }
    for (ago, number, limit) in interruptions {
        recs.push(json!({"seq": recs.len() + 1, "kind": "interruption", "payload": {"day": day(*ago), "number": number, "limit": limit}}));
    }
    let ack = api.post(secret, "/api/v1/records", json!({ "records": recs }));
    assert_eq!(ack["stored"].as_u64(), Some(recs.len() as u64));
}

fn lease(api: &Api, secret: &str) -> Value {
    let l = api.post(secret, "/api/v1/lease", json!({"free_mem_bytes": 1u64 << 32, "wait_ms": 0}));
    assert!(l["job_id"].is_i64(), "work to lease: {l}");
    l
}

fn task(l: &Value, what: &str) -> String {
    format!("/api/v1/tasks/{}/{}/{what}", l["job_id"], l["rank"])
}

#[test]
fn the_dashboard_shows_the_pool_as_the_api_does() {
    let Some(chromium) = chromium() else { return };
    let ui = workspace().join("ui");
    assert!(ui.join("dist-dashboard/dashboard.html").exists(), "the dashboard is not built: run (cd ui && npm install && npm run build)");
    assert!(ui.join("node_modules/playwright-core").exists(), "playwright-core is missing: run (cd ui && npm install)");
    let (up, url) = start_up();
    let api = Api { http: Client::new(), base: url.clone() };
    let admin = std::fs::read_to_string(up.dir.path().join("coordinator-admin.key")).unwrap().trim().to_string();

    // This machine's real agent: its owner pauses it (so it leases nothing here).
    let sock = up.dir.path().join("agent.sock");
    let t0 = Instant::now();
    loop {
        match call(&sock, &Request::Pause { span: PauseSpan::UntilResumed }) {
            Ok(Response::Status(_)) => break,
            other => assert!(t0.elapsed() < Duration::from_secs(30), "the agent does not answer: {other:?}"),
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    let (laptop_id, laptop) = enrol(&api, &admin, "alice", "alice-laptop");
    let (_, lab) = enrol(&api, &admin, "bob", "bob-lab");
    let (_, ws) = enrol(&api, &admin, "carol", "carol-ws");
    let _never = enrol(&api, &admin, "dave", "dave-spare");
    // They joined the pool a week ago: the time they donated since counts.
    let db = rusqlite::Connection::open(up.dir.path().join("coordinator.db")).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    db.execute("UPDATE agents SET enrolled_ms = enrolled_ms - 7 * 86400000", []).unwrap();
    drop(db);
    // Two heartbeats each: the interval between them is today's observed availability,
    // whose row also keeps the day's limit.
    for _ in 0..2 {
        heartbeat(&api, &laptop, "donating", 4, 5);
        heartbeat(&api, &lab, "owner_active", 0, 2);
        heartbeat(&api, &ws, "idle", 4, 4);
        std::thread::sleep(Duration::from_millis(300));
    }
    records(&api, &laptop, &[1800.0, 5400.0, 0.0, 7200.0, 3600.0, 9000.0], &[(1, 1, 5)]);
    records(&api, &lab, &[2700.0, 900.0, 4500.0, 0.0, 6300.0], &[(0, 1, 2), (0, 2, 2), (2, 1, 2)]);
    records(&api, &ws, &[0.0, 3000.0, 3000.0, 1200.0], &[]);

    // Jobs: submitted by the admin and by owners; completed, failed (an exit code, a program
    // not found), lost, evicted and running (with output so far), one cancelled, one the
    // pool cannot run.
    let alice_key = api.post(&admin, "/api/v1/keys", json!({"role": "owner", "owner": "alice"}))["key"].as_str().unwrap().to_string();
    let bob_key = api.post(&admin, "/api/v1/keys", json!({"role": "owner", "owner": "bob"}))["key"].as_str().unwrap().to_string();
    let job = |key: &str, cmd: &str, retries: u32| {
        api.post(key, "/api/v1/jobs", json!({"command": cmd, "args": ["-c", "true"], "max_retries": retries}))
    };
    for _ in 0..3 {
        job(&admin, "/usr/bin/render-frame", 3);
    }
    job(&alice_key, "/opt/sim/montecarlo", 3);
    job(&admin, "/usr/bin/flaky-tool", 0);
    job(&alice_key, "/opt/sim/montecarlo", 3);
    let cancelled = job(&bob_key, "/home/bob/train", 3);
    for _ in 0..3 {
        let l = lease(&api, &laptop);
        api.post(&laptop, &task(&l, "complete"), json!({"lease": l["lease"], "exit_code": 0, "user_cpu_s": 1.5, "sys_cpu_s": 0.25}));
    }
    // bob-lab has no interruption left today: the scheduler never places work there.
    let none = api.post(&lab, "/api/v1/lease", json!({"free_mem_bytes": 1u64 << 32, "wait_ms": 0}));
    assert!(none.is_null(), "a machine out of budget gets no work: {none}");
    let l = lease(&api, &ws);
    api.post(&ws, &task(&l, "evicted"), json!({"lease": l["lease"], "reason": "owner came back"}));
    let l = lease(&api, &laptop);
    assert_eq!(l["job_id"].as_i64(), Some(4), "the evicted job is leased again");
    let l = lease(&api, &laptop);
    api.post(&laptop, &task(&l, "fail"), json!({"lease": l["lease"], "reason": "exit 127"}));
    api.post(&admin, &format!("/api/v1/jobs/{}/cancel", cancelled["id"]), json!({}));
    // Jobs that failed: alice's exits with 2 on her laptop, bob's program is not found.
    let l = lease(&api, &laptop);
    let ended = |l: &Value, outcome: Value, code: i32| json!({"lease": l["lease"], "exit_code": code, "outcome": outcome, "user_cpu_s": 1.5, "sys_cpu_s": 0.5});
    api.post(&laptop, &task(&l, "complete"), ended(&l, json!({"kind": "exited", "code": 2}), 2));
    job(&bob_key, "nosuch-tool", 3);
    let l = lease(&api, &ws);
    api.post(&ws, &task(&l, "complete"), ended(&l, json!({"kind": "program_not_found", "program": "nosuch-tool"}), 127));
    // One running and writing (its lease renewed with its output until the end), one the
    // pool cannot run (9 machines).
    let running = job(&bob_key, "/usr/bin/long-run", 3);
    let l = lease(&api, &ws);
    assert_eq!(l["job_id"], running["id"]);
    let stop_renewing = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let renewer = {
        let (base, ws, stop) = (url.clone(), ws.clone(), stop_renewing.clone());
        std::thread::spawn(move || {
            let api = Api { http: Client::new(), base };
            let out = json!({"stdout": "step 1\nstep 2\n", "stderr": "warming up\n", "stdout_bytes": 14, "stderr_bytes": 11});
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                api.post(&ws, &task(&l, "progress"), json!({"lease": l["lease"], "output": out}));
                std::thread::sleep(Duration::from_secs(5));
            }
        })
    };
    let wide = api.post(&admin, "/api/v1/jobs", json!({"command": "/usr/bin/mpi-sim", "machines": 9}));
    assert_eq!(wide["waiting"]["cannot_run"], true, "{wide}");

    // The real agent's heartbeat says it is paused and carries its interruption limit.
    let t0 = Instant::now();
    loop {
        let agents = api.get(&admin, "/api/v1/agents");
        let desk = agents.as_array().unwrap().iter().find(|a| a["machine"] == "alice-desk").cloned().unwrap();
        if desk["heartbeat"]["state"] == "paused" {
            assert!(desk["heartbeat"]["interruption_limit"].as_u64().is_some(), "the agent reports its limit: {desk}");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(60), "the paused agent's heartbeat never arrived: {desk}");
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(api.get(&admin, "/api/v1/agents").as_array().unwrap().iter().filter(|a| a["id"] == laptop_id.as_str()).count(), 1);

    // A second coordinator with nothing in it, for the empty states.
    let empty_dir = tempfile::tempdir().unwrap();
    let mut empty = Command::new(lull_bin())
        .args(["coordinator", "serve", "--listen", "127.0.0.1:0"])
        .env("LULL_DATA_DIR", empty_dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let (empty_url, empty_key) = loop {
        let url = std::fs::read_to_string(empty_dir.path().join("coordinator.url")).unwrap_or_default();
        let key = std::fs::read_to_string(empty_dir.path().join("coordinator-admin.key")).unwrap_or_default();
        if !url.trim().is_empty() && !key.trim().is_empty() {
            break (url.trim().to_string(), key.trim().to_string());
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "the empty coordinator did not start");
        std::thread::sleep(Duration::from_millis(100));
    };

    let artifacts = workspace().join("artifacts/dashboard");
    let _ = std::fs::remove_dir_all(&artifacts);
    let t = Instant::now();
    let out = Command::new("node")
        .arg("tests/dashboard.mjs")
        .current_dir(&ui)
        .env("LULL_URL", &url)
        .env("LULL_ADMIN_KEY", &admin)
        .env("LULL_OWNER_KEY", &alice_key)
        .env("LULL_OWNER", "alice")
        .env("LULL_ARTIFACTS", &artifacts)
        .env("LULL_CHROMIUM", &chromium)
        .env("LULL_EMPTY_URL", &empty_url)
        .env("LULL_EMPTY_KEY", &empty_key)
        .env("LULL_RUNNING_JOB", running["id"].to_string())
        .env("LULL_WIDE_JOB", wide["id"].to_string())
        .output()
        .expect("node (Node.js) runs");
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(empty.id() as i32, libc::SIGTERM) };
    let _ = empty.wait();
    stop_renewing.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = renewer.join();
    let (so, se) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!("{so}{se}browser checks took {:.1} s; screenshots in {}", t.elapsed().as_secs_f64(), artifacts.display());
    assert!(out.status.success(), "the dashboard checks failed:\n{so}\n{se}");
    for name in ["1-overview", "2-donated-by-owner", "4-interruptions", "5-jobs", "5b-job-output", "6-owner-jobs", "7-empty-overview"] {
        let png = artifacts.join(format!("{name}.png"));
        assert!(Path::new(&png).metadata().is_ok_and(|m| m.len() > 10_000), "screenshot {name} is missing or blank");
    }
    drop(up);
}
