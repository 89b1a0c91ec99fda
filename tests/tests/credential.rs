//! An agent whose coordinator credential stops working (issue 27 item 1, the agent's
//! side), with a real coordinator (`lull up`) and a real enrolled `lull agent`:
//! the pool's admin removes the machine, so its credential answers 401. The agent then
//! says so in `lull status` (text and `--json`) with what to do, instead of only a log
//! line; it stops asking the coordinator (at most a couple of refused requests in 25 s,
//! counted by the coordinator's own /metrics); and once the owner enrols the machine
//! again (`lull enrol --replace`, which writes a new `coordinator.json`) the running
//! agent takes the new credential by itself: the alert goes and its heartbeats arrive.

use lull_e2e::pool::{http, Machine};
use serde_json::Value;
use std::time::{Duration, Instant};

/// The agent's `lull status --json` and `lull status`.
fn statuses(m: &Machine) -> (Value, String) {
    let json = m.lull(&["status", "--json"]).output().expect("lull status --json");
    let text = m.lull(&["status"]).output().expect("lull status");
    (serde_json::from_slice(&json.stdout).unwrap_or(Value::Null), String::from_utf8_lossy(&text.stdout).into_owned())
}

/// Refused requests (401) the coordinator has answered on the agents' routes so far.
fn refused(url: &str) -> u64 {
    let text = http().get(format!("{url}/metrics")).send().and_then(|r| r.text()).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains("status=\"401\"") && ["/api/v1/heartbeat", "/api/v1/lease", "/api/v1/records"].iter().any(|r| l.contains(r)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// When the coordinator last heard from the agent `id`, if it knows it.
fn last_seen(url: &str, admin: &str, id: &str) -> Option<i64> {
    let agents: Value = http().get(format!("{url}/api/v1/agents")).bearer_auth(admin).send().ok()?.json().ok()?;
    agents.as_array()?.iter().find(|a| a["id"] == id)?["last_seen_ms"].as_i64()
}

fn wait<T>(what: &str, secs: u64, log: impl Fn() -> String, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(secs), "timed out waiting for {what}\n{}", log());
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_refused_credential_is_said_in_the_status_backs_off_and_recovers_with_a_new_enrolment() {
    let mut c = Machine::new("");
    let url = c.up(&[]);
    let admin = c.admin();
    let mut a = Machine::new("");
    a.enrol(&c, &url, "bob", "desk");
    a.spawn(&["agent"], &[("LULL_INPUT", "none")]);
    let (s, _) = wait("the agent's status", 30, || a.log(), || Some(statuses(&a)).filter(|(s, _)| !s.is_null()));
    let id = s["coordinator"]["agent_id"].as_str().expect("enrolled").to_string();
    wait("a heartbeat", 60, || a.agent_log(), || last_seen(&url, &admin, &id));

    // The pool's admin removes the machine: its credential now answers 401.
    let r = http().delete(format!("{url}/api/v1/agents/{id}")).bearer_auth(&admin).send().expect("remove");
    assert!(r.status().is_success(), "{}", r.text().unwrap_or_default());
    let (s, text) = wait(
        "the refusal in the status",
        60,
        || a.agent_log(),
        || {
            let (s, text) = statuses(&a);
            let found = s["alerts"].as_array().is_some_and(|v| v.iter().any(|x| x["kind"] == "credential_refused"));
            found.then_some((s, text))
        },
    );
    let alert = s["alerts"].as_array().and_then(|v| v.iter().find(|x| x["kind"] == "credential_refused")).cloned().expect("alert");
    let (message, action) = (alert["message"].as_str().unwrap_or_default(), alert["action"].as_str().unwrap_or_default());
    assert!(message.contains(&url) && message.contains("refuses this machine's credential"), "{message}");
    assert!(action.contains("lull enrol --replace"), "{action}");
    assert!(text.contains("Attention:") && text.contains("lull enrol --replace"), "{text}");

    // It does not hammer the coordinator meanwhile.
    let before = refused(&url);
    std::thread::sleep(Duration::from_secs(25));
    let during = refused(&url) - before;
    assert!(during <= 2, "{during} refused requests in 25 s after the refusal was said\n{}", a.agent_log());

    // The owner enrols the machine again; the running agent takes the new credential.
    let out = c.lull(&["coordinator", "token", "create", "--uses", "1"]).output().expect("token");
    let token = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let out =
        a.lull(&["enrol", "--replace", "--url", &url, "--token", &token, "--owner", "bob", "--machine", "desk"]).output().expect("enrol");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (s, _) = wait(
        "the alert to go",
        60,
        || a.agent_log(),
        || {
            let (s, text) = statuses(&a);
            (s["alerts"].as_array().is_some_and(|v| v.is_empty()) && !text.contains("Attention:")).then_some((s, text))
        },
    );
    let new_id = s["coordinator"]["agent_id"].as_str().expect("enrolled").to_string();
    assert_ne!(new_id, id, "enrolled again after removal: a new agent id, shown as such");
    wait("heartbeats under the new credential", 60, || a.agent_log(), || last_seen(&url, &admin, &new_id));
    a.stop();
}
