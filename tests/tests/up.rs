//! `lull up` as a real process: a coordinator on embedded SQLite and this machine's agent
//! enrolled to it and linked (heartbeats, ledger records); the dashboard page,
//! `lull submit` and `lull report` against it with the defaults it left in the data
//! directory; a restart that keeps the enrolment; and a clean stop on SIGTERM.

use agent_core::ledger::{GuestTotals, Ledger};
use lull_e2e::lull_bin;
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn lull(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new(lull_bin());
    c.args(args).env("LULL_DATA_DIR", dir).env("LULL_CONFIG", dir.join("config.toml")).env("LULL_SOCKET", dir.join("agent.sock"));
    c.env_remove("LULL_COORDINATOR_URL").env_remove("LULL_KEY");
    c
}

fn up(dir: &Path) -> (Child, String) {
    let out = std::fs::File::create(dir.join("up.txt")).unwrap();
    let err = std::fs::File::create(dir.join("up-err.txt")).unwrap();
    let mut child =
        lull(dir, &["up", "--listen", "127.0.0.1:0", "--owner", "alice", "--machine", "box1"]).stdout(out).stderr(err).spawn().unwrap();
    let url = dashboard_url(dir, &mut child);
    (child, url)
}

/// The dashboard's URL once `lull up` printed it; kills and reaps `child` if it does not
/// within 30 s, so that a failed test leaves no `lull up` running.
fn dashboard_url(dir: &Path, child: &mut Child) -> String {
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(dir.join("up.txt")).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.trim_start().starts_with("dashboard")) {
            return line.split_whitespace().nth(1).unwrap().trim_end_matches('/').to_string();
        }
        if t0.elapsed() >= Duration::from_secs(30) {
            child.kill().ok();
            child.wait().ok();
            panic!("lull up did not come up: {text}\n{}", std::fs::read_to_string(dir.join("up-err.txt")).unwrap_or_default());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn stop(mut child: Child) {
    // SAFETY: kill with a pid we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success(), "lull up exited with {st}");
            return;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "lull up did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn get(url: &str, key: &str) -> Value {
    reqwest::blocking::Client::new().get(url).bearer_auth(key).send().unwrap().json().unwrap()
}

#[test]
fn up_runs_coordinator_and_enrolled_agent_and_syncs_the_ledger() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Donated time already in the agent's ledger, waiting in its outbox.
    let day = chrono::Local::now().date_naive();
    {
        let mut l = Ledger::open(&dir.join("ledger.db")).unwrap();
        l.record_guest_totals(
            day,
            chrono::Utc::now(),
            &GuestTotals { guest: "g".into(), cpu_us: 12_345_678, wall_ms: 20_000, peak_mem_bytes: 1 },
        )
        .unwrap();
    }
    let (child, url) = up(dir);
    let admin = std::fs::read_to_string(dir.join("coordinator-admin.key")).unwrap().trim().to_string();
    let page = reqwest::blocking::get(format!("{url}/")).unwrap().text().unwrap();
    assert!(page.contains("dashboard"), "{page}");

    // The agent is enrolled, heartbeats, and its ledger records arrive.
    let t0 = Instant::now();
    let agent_id = loop {
        let agents = get(&format!("{url}/api/v1/agents"), &admin);
        let a = &agents[0];
        let report = get(&format!("{url}/api/v1/reports?by=owner&since=7d"), &admin);
        let cpu = report["rows"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["key"] == "alice" && r["period"] == day.to_string()))
            .map(|r| r["cpu_s"].clone());
        let beating = a["heartbeat"]["base_speed"].as_f64().is_some_and(|s| s > 0.0);
        if let (true, Some(cpu)) = (beating, cpu) {
            assert_eq!(agents.as_array().unwrap().len(), 1);
            assert_eq!((a["owner"].as_str(), a["machine"].as_str()), (Some("alice"), Some("box1")));
            assert_eq!(cpu.as_f64(), Some(12.345678), "report equals the ledger");
            break a["id"].as_str().unwrap().to_string();
        }
        assert!(t0.elapsed() < Duration::from_secs(40), "no heartbeat/records yet: {agents} {report}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(lull(dir, &["status", "--json"]).output().unwrap().status.success(), "the agent answers on its socket");

    // submit and report use the defaults `lull up` left in the data directory.
    let out = lull(dir, &["submit", "--", "/bin/echo", "hi"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("queued"));
    let out = lull(dir, &["report", "--by", "machine", "--since", "7d", "--csv"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.lines().any(|l| l.starts_with(&format!("{agent_id},box1,{day},12.345678,20.000"))), "{csv}");
    stop(child);

    // A restart keeps the enrolment (a new port; the credentials follow it).
    let (child, url) = up(dir);
    let agents = get(&format!("{url}/api/v1/agents"), &admin);
    assert_eq!(agents.as_array().unwrap().len(), 1, "not enrolled twice: {agents}");
    assert_eq!(agents[0]["id"].as_str(), Some(agent_id.as_str()));
    stop(child);
}

#[test]
fn a_second_machine_enrols_with_a_token_and_its_agent_reports() {
    let pool = tempfile::tempdir().unwrap();
    let (coordinator, url) = up(pool.path());
    let admin = std::fs::read_to_string(pool.path().join("coordinator-admin.key")).unwrap().trim().to_string();
    let out = lull(pool.path(), &["coordinator", "token", "create", "--uses", "1"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();

    let desk = tempfile::tempdir().unwrap();
    let out = lull(desk.path(), &["enrol", "--url", &url, "--token", &token, "--owner", "bob", "--machine", "box2"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The token was for one machine only.
    let other = tempfile::tempdir().unwrap();
    let out = lull(other.path(), &["enrol", "--url", &url, "--token", &token, "--owner", "eve"]).output().unwrap();
    assert!(!out.status.success(), "a spent token enrols no one");

    let day = chrono::Local::now().date_naive();
    {
        let mut l = Ledger::open(&desk.path().join("ledger.db")).unwrap();
        l.record_guest_totals(
            day,
            chrono::Utc::now(),
            &GuestTotals { guest: "g".into(), cpu_us: 2_000_001, wall_ms: 3_000, peak_mem_bytes: 1 },
        )
        .unwrap();
    }
    let err = std::fs::File::create(desk.path().join("agent-err.txt")).unwrap();
    let mut agent =
        lull(desk.path(), &["agent"]).stdout(std::fs::File::create(desk.path().join("agent.txt")).unwrap()).stderr(err).spawn().unwrap();
    let t0 = Instant::now();
    let found = loop {
        let report = get(&format!("{url}/api/v1/reports?by=owner&since=7d"), &admin);
        let cpu = report["rows"].as_array().and_then(|r| r.iter().find(|r| r["key"] == "bob").map(|r| r["cpu_s"].as_f64()));
        if let Some(cpu) = cpu {
            break cpu;
        }
        if t0.elapsed() > Duration::from_secs(40) {
            let _ = agent.kill();
            let _ = agent.wait();
            panic!(
                "bob's records never arrived: {report} {}",
                std::fs::read_to_string(desk.path().join("agent-err.txt")).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(found, Some(2.000001));
    stop(agent);
    stop(coordinator);
}

/// A second `lull up` in the same HOME (another runtime directory, so another socket)
/// refuses before printing its banner and changes no file; the first one serves on.
#[test]
fn a_second_up_refuses_before_anything_and_the_first_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    let (first, url) = up(dir.path());
    let files = ["coordinator.url", "coordinator.json"];
    let before: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(dir.path().join(f)).unwrap()).collect();
    let elsewhere = tempfile::tempdir().unwrap();
    let out = lull(dir.path(), &["up", "--listen", "127.0.0.1:0", "--owner", "alice", "--machine", "box1"])
        .env("LULL_SOCKET", elsewhere.path().join("agent.sock"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a second lull up started: {err}");
    assert!(out.stdout.is_empty(), "it printed: {}", String::from_utf8_lossy(&out.stdout));
    assert!(err.contains("another Lull agent (pid ") && err.contains("data directory"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "said once: {err}");
    let after: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(dir.path().join(f)).unwrap()).collect();
    assert_eq!(before, after, "the second lull up rewrote {files:?}");
    let key = std::fs::read_to_string(dir.path().join("coordinator-admin.key")).unwrap();
    let pool = get(&format!("{url}/api/v1/pool"), key.trim());
    assert!(pool.is_object(), "{pool}");
    assert!(lull(dir.path(), &["status"]).output().unwrap().status.success(), "the first agent answers");
    stop(first);
}

#[test]
fn a_config_the_agent_refuses_stops_up_before_anything_is_written() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("data");
    let config = base.path().join("config.toml");
    std::fs::write(&config, "[sampling]\ninterval_ms = 5\n").unwrap();
    let out = lull(&dir, &["up", "--listen", "127.0.0.1:0"]).env("LULL_CONFIG", &config).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "lull up accepted interval_ms = 5: {err}");
    assert!(err.contains("sampling.interval_ms") && err.contains("100..=60000"), "the field and its range are named: {err}");
    assert_eq!(err.lines().filter(|l| l.contains("interval_ms")).count(), 1, "said once: {err}");
    assert!(!dir.exists(), "a refused lull up wrote {}", dir.display());
}

/// A `lull up` refused after its checks of the arguments — an address another program
/// holds, a database it cannot reach — says why once and leaves no data directory (no
/// lock, log or database) behind in a HOME that had none.
#[test]
fn a_taken_address_or_an_unreachable_database_stops_up_and_leaves_nothing() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    // Port 1 on loopback: nothing listens there, so the connection is refused at once.
    let cases: [(&[&str], &str); 2] = [
        (&["up", "--listen", &taken], "is already in use"),
        (&["up", "--listen", "127.0.0.1:0", "--db", "postgres://nobody@127.0.0.1:1/lull"], "Connection refused"),
    ];
    for (args, why) in cases {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("share").join("lull");
        let out = lull(&dir, args).env("LULL_CONFIG", base.path().join("none.toml")).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} started: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "said once: {err}");
        let left: Vec<_> = std::fs::read_dir(base.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(left.is_empty(), "{args:?} left {left:?} in a HOME that had no data directory");
    }
}
