//! Restart: `kill -9` of a real agent during an active pause keeps the pause (and its
//! remaining time), and the ledger survives intact.

use agent_core::control::Request;
use agent_core::policy::{PauseSpan, StateKind};
use lull_e2e::Agent;
use std::time::Duration;

#[test]
fn pause_survives_kill_minus_nine() {
    let mut a = Agent::new("[sampling]\ninterval_ms = 200\n");
    a.start();
    let out = a.lull(&["pause", "1h", "--json"]).output().expect("lull pause");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON status");
    assert_eq!(s["state"], "paused");
    let left_before = s["paused_for_s"].as_u64().expect("seconds left");
    assert!((3590..=3600).contains(&left_before), "{left_before}");

    for _ in 0..3 {
        a.kill9();
        a.start();
        let s = a.wait_for("paused after restart", Duration::from_secs(10), |s| s.policy.state == StateKind::Paused);
        let left = s.policy.paused_for_s.expect("timed pause");
        assert!(left <= left_before && left + 30 >= left_before, "pause shifted: {left_before} → {left}");
    }

    // Until tomorrow, and forever, survive too; resume ends them.
    a.request(Request::Pause { span: PauseSpan::UntilTomorrow });
    a.kill9();
    a.start();
    let s = a.wait_for("paused until tomorrow", Duration::from_secs(10), |s| s.policy.state == StateKind::Paused);
    assert!(s.policy.paused_for_s.is_none());
    let out = a.lull(&["resume"]).output().expect("lull resume");
    assert!(out.status.success());
    a.kill9();
    a.start();
    let s = a.wait_for("not paused", Duration::from_secs(10), |s| s.policy.state != StateKind::Paused);
    assert_ne!(s.policy.state, StateKind::Paused);
    a.stop();
    let ledger = agent_core::ledger::Ledger::open(&a.dir.join("ledger.db")).expect("ledger opens");
    assert!(ledger.check().expect("integrity check"), "ledger is intact after kill -9");
}

#[test]
fn limits_are_persisted_and_bad_values_refused() {
    let mut a = Agent::new("");
    a.start();
    let out = a.lull(&["limits", "--interruptions", "3", "--json"]).output().expect("lull limits");
    assert!(out.status.success());
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(s["interruption_limit"], 3);
    let out = a.lull(&["limits", "--interruptions", "42"]).output().expect("lull limits");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0..=20"), "{err}");
    a.kill9();
    a.start();
    assert_eq!(a.status().policy.interruption_limit, 3, "limit survives a restart via the config file");
}

#[test]
fn bad_config_is_refused_naming_the_field() {
    let a = Agent::new("[availability]\nrecruitment_threshold_s = -5\n");
    let out = a.lull(&["agent"]).output().expect("lull agent");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("recruitment_threshold_s"), "{err}");
    let a = Agent::new("[budget]\ninterruptions_per_day = 99\n");
    let out = a.lull(&["agent"]).output().expect("lull agent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("budget.interruptions_per_day") && err.contains("0..=20"), "{err}");
}

#[test]
fn status_without_agent_says_how_to_start_one() {
    let a = Agent::new("");
    let out = a.lull(&["status"]).output().expect("lull status");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("lull agent"));
}

#[test]
fn control_socket_is_owner_only_and_survives_garbage() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::fs::PermissionsExt;
    let mut a = Agent::new("");
    a.start();
    let mode = std::fs::metadata(a.socket()).expect("socket").permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let mut s = std::os::unix::net::UnixStream::connect(a.socket()).expect("connect");
    s.write_all(b"{\"op\":\"explode\"}\n").expect("write");
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line).expect("answer");
    assert!(line.contains("malformed request"), "{line}");
    // A second agent on the same socket refuses to steal it.
    let out = a.lull(&["agent"]).output().expect("second agent");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("already listening"));
    assert!(a.try_status().is_some(), "the first agent still answers");
}
