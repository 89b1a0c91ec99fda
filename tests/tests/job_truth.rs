//! Jobs that tell the truth (issue 28), end to end with the real `lull up` (coordinator
//! and agent), `lull submit`, `lull jobs`, `lull run` and an enrolled `lull agent`:
//!
//! - a program that does not exist, a non-zero exit and a signal each end `failed`, with
//!   "program not found: NAME", the exit code or the signal's name in `lull jobs`, `lull
//!   jobs show`, `--json` and the job's own output; `lull jobs --state failed` lists them;
//!   `lull run` exits 127 / the job's code and says why;
//! - a job the pool cannot run (5 machines on a pool of 1) is said at submit and in
//!   `lull jobs show`, and `lull jobs cancel` ends it;
//! - a long job followed with `lull jobs output --follow` while it runs, then cancelled:
//!   the follower shows each line once, in order, and says how the job ended;
//! - an agent killed and started again gives its task back at once (not after the
//!   lease's 60 s), neither as an eviction nor as a retry.
//!
//! They need cgroups (root here; `LULL_REQUIRE_CGROUPS=1` makes them required).

use lull_e2e::pool::{self, Machine};
use lull_e2e::skip_without_cgroups;
use serde_json::Value;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Guest work at once whatever the shared machine's load; renewals every half second so
/// output and cancels travel fast.
const EAGER: &str = "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                     recruitment_threshold_s = 0\n";
const FAST_RENEWALS: [(&str, &str); 1] = [("LULL_PROGRESS_MS", "500")];

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).to_string(), String::from_utf8_lossy(&o.stderr).to_string())
}

fn lull_ok(m: &Machine, args: &[&str]) -> (String, String) {
    let o = m.lull(args).output().unwrap();
    let (out, err) = text(&o);
    assert!(o.status.success(), "lull {args:?} failed: {out}{err}\n{}", m.log());
    (out, err)
}

fn ended(j: &Value) -> bool {
    !matches!(j["state"].as_str(), Some("queued" | "running"))
}

#[test]
fn failing_and_impossible_jobs_say_why_everywhere() {
    if skip_without_cgroups() {
        return;
    }
    let mut m = Machine::new(EAGER);
    let url = m.up(&FAST_RENEWALS);
    let admin = m.admin();
    let log = || m.log();
    // Said at submit: the pool has one machine.
    let (out, err) = lull_ok(&m, &["submit", "--machines", "5", "--", "true"]);
    let wide: i64 = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(err.contains(&format!("warning: job {wide} cannot run with the pool as it is: needs 5 machines, the pool has 1")), "{err}");
    let missing = pool::submit(&m, &["--", "lull-no-such-program", "--flag"]);
    let exit3 = pool::submit(&m, &["--", "sh", "-c", "echo partial; exit 3"]);
    let killed = pool::submit(&m, &["--", "sh", "-c", "kill -9 $$"]);
    let fine = pool::submit(&m, &["--", "true"]);
    for id in [missing, exit3, killed, fine] {
        pool::wait_job(&url, &admin, id, "ended", 120, ended, log);
    }
    let want = [
        (missing, "failed", Value::Null, "program not found: lull-no-such-program"),
        (exit3, "failed", "3".into(), "exit code 3"),
        (killed, "failed", "SIGKILL".into(), "killed by SIGKILL"),
    ];
    for (id, state, exit, reason) in &want {
        let j = pool::job(&url, &admin, *id);
        assert_eq!((j["state"].as_str(), &j["exit"], j["reason"].as_str()), (Some(*state), exit, Some(*reason)), "{j}");
        assert_eq!(j["tasks"][0]["machine"], "box1", "{j}");
        let (show, _) = lull_ok(&m, &["jobs", "show", &id.to_string()]);
        assert!(show.contains(&format!("job {id}: failed")) && show.contains(&format!("why        {reason}")), "{show}");
        assert!(show.contains("on box1") && !show.contains(j["tasks"][0]["agent_id"].as_str().unwrap()), "names, not ids: {show}");
    }
    assert_eq!(pool::job(&url, &admin, fine)["state"], "completed");
    // The job's own output says why it never ran.
    let o = m.lull(&["jobs", "output", &missing.to_string()]).output().unwrap();
    assert!(text(&o).1.contains("lull: program not found: lull-no-such-program"), "{:?}", text(&o));
    // The list, filtered: exit and why on each row.
    let (list, _) = lull_ok(&m, &["jobs", "--state", "failed"]);
    assert_eq!(list.lines().count(), 4, "a header and three jobs: {list}");
    for (id, _, exit, reason) in &want {
        let row = list.lines().find(|l| l.trim_start().starts_with(&format!("{id} "))).unwrap_or_else(|| panic!("{id}: {list}"));
        assert!(row.contains(reason) && row.contains(exit.as_str().unwrap_or("-")), "{row}");
    }
    let (json, _) = lull_ok(&m, &["jobs", "--state", "failed", "--json"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 3);
    // The impossible job waits, says why, and is cancelled.
    let (show, _) = lull_ok(&m, &["jobs", "show", &wide.to_string()]);
    assert!(show.contains("waiting    needs 5 machines, the pool has 1 (the pool as it is cannot run it)"), "{show}");
    assert!(show.contains(&format!("cancel: lull jobs cancel {wide}")), "{show}");
    let (out, _) = lull_ok(&m, &["jobs", "cancel", &wide.to_string(), &fine.to_string()]);
    assert!(out.contains(&format!("job {wide} cancelled")) && out.contains(&format!("job {fine} had already ended: completed")), "{out}");
    assert_eq!(pool::job(&url, &admin, wide)["reason"], "cancelled by admin");
    // Cancelling it again says it had ended, not "cancelled" a second time.
    let (again, _) = lull_ok(&m, &["jobs", "cancel", &wide.to_string()]);
    assert_eq!(again.trim(), format!("job {wide} had already ended: cancelled (cancelled by admin); nothing to cancel"), "{again}");
    let o = m.lull(&["jobs", "cancel", "99999"]).output().unwrap();
    assert!(!o.status.success() && text(&o).1.contains("no job 99999"), "{:?}", text(&o));
    // `lull run` beside the running agent: the job's code, and why.
    let o = m.lull(&["run", "--now", "--", "lull-no-such-program"]).output().unwrap();
    assert_eq!(o.status.code(), Some(127), "{:?}", text(&o));
    assert!(text(&o).1.contains("not started: program not found: lull-no-such-program"), "{:?}", text(&o));
    assert_eq!(text(&o).1.matches("program not found").count(), 1, "said once: {:?}", text(&o));
    let o = m.lull(&["run", "--now", "--", "sh", "-c", "exit 4"]).output().unwrap();
    assert_eq!(o.status.code(), Some(4), "{:?}", text(&o));
    assert!(text(&o).1.contains("failed: exit code 4"), "{:?}", text(&o));
    m.stop();
}

#[test]
fn a_running_job_is_followed_and_cancelled() {
    if skip_without_cgroups() {
        return;
    }
    let mut m = Machine::new(EAGER);
    let url = m.up(&FAST_RENEWALS);
    let admin = m.admin();
    let id = pool::submit(&m, &["--", "sh", "-c", "i=0; while [ $i -lt 600 ]; do i=$((i+1)); echo step $i; sleep 0.2; done"]);
    let follow = m
        .lull(&["jobs", "output", &id.to_string(), "--follow"])
        .stdout(std::fs::File::create(m.dir.path().join("follow.out")).unwrap())
        .stderr(std::fs::File::create(m.dir.path().join("follow.err")).unwrap())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let read = |f: &str| std::fs::read_to_string(m.dir.path().join(f)).unwrap_or_default();
    let t0 = Instant::now();
    while !read("follow.out").contains("step 10\n") {
        assert!(t0.elapsed() < Duration::from_secs(90), "the follower showed nothing: {}\n{}", read("follow.err"), m.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let running = pool::job(&url, &admin, id);
    assert_eq!(running["state"], "running", "output was shown while the job ran: {running}");
    let (out, _) = lull_ok(&m, &["jobs", "cancel", &id.to_string()]);
    assert!(out.contains(&format!("job {id} cancelled")), "{out}");
    let mut follow = follow;
    let t0 = Instant::now();
    while follow.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "the follower did not end with the job");
        std::thread::sleep(Duration::from_millis(100));
    }
    let shown = read("follow.out");
    let steps: Vec<u32> = shown.lines().map(|l| l.trim_start_matches("step ").parse().unwrap()).collect();
    assert!(steps.windows(2).all(|w| w[1] == w[0] + 1) && steps[0] == 1, "each line once, in order: {shown}");
    assert!(read("follow.err").contains(&format!("job {id} cancelled: cancelled by admin")), "{}", read("follow.err"));
    // The guest was stopped: its output stops growing.
    let wd = m.workdirs(id).pop().expect("work directory");
    std::thread::sleep(Duration::from_secs(2));
    let size = std::fs::metadata(wd.join("stdout.log")).unwrap().len();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(std::fs::metadata(wd.join("stdout.log")).unwrap().len(), size, "the cancelled guest still runs");
    m.stop();
}

#[test]
fn an_agent_that_restarts_gives_its_task_back_at_once() {
    if skip_without_cgroups() {
        return;
    }
    let mut a = Machine::new(EAGER);
    let url = a.up(&FAST_RENEWALS);
    let admin = a.admin();
    // Only b takes work: a's owner paused.
    let t0 = Instant::now();
    while a.try_status().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "a's agent never answered: {}", a.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    lull_ok(&a, &["pause", "forever"]);
    let mut b = Machine::new(EAGER);
    b.enrol(&a, &url, "bob", "box2");
    b.spawn(&["agent"], &FAST_RENEWALS);
    let id = pool::submit(&a, &["--", "sleep", "600"]);
    let j = pool::wait_job(&url, &admin, id, "running on box2", 120, |j| j["tasks"][0]["machine"] == "box2", || b.agent_log());
    assert_eq!(j["state"], "running");
    // b dies (its guest with it) and comes back paused by its owner: it runs nothing,
    // so its lease (60 s) is given back at once.
    b.child.take().map(|mut c| {
        c.kill().unwrap();
        c.wait().unwrap()
    });
    std::fs::write(b.dir.path().join("config.toml"), EAGER.replace("recruitment_threshold_s = 0", "recruitment_threshold_s = 3600"))
        .unwrap();
    let t0 = Instant::now();
    b.spawn(&["agent"], &FAST_RENEWALS);
    // On failure: the agent's log and its stderr (a start that failed or stalled before
    // its log opened says so only there).
    let j = pool::wait_job(
        &url,
        &admin,
        id,
        "given back",
        20,
        |j| j["state"] == "queued",
        || format!("{}\n--- stderr:\n{}", b.agent_log(), b.log()),
    );
    eprintln!("given back {:?} after the restart", t0.elapsed());
    let t = &j["tasks"][0];
    assert_eq!((t["evictions"].as_u64(), t["retries_used"].as_u64(), t["attempts"].as_u64()), (Some(0), Some(0), Some(1)), "{j}");
    assert!(b.agent_log().contains("gave back the tasks an earlier run of this agent held"), "{}", b.agent_log());
    lull_ok(&a, &["resume"]);
    pool::wait_job(&url, &admin, id, "running on box1", 60, |j| j["tasks"][0]["machine"] == "box1", || a.log());
    lull_ok(&a, &["jobs", "cancel", &id.to_string()]);
    b.stop();
    a.stop();
}
