//! Restart: `kill -9` of a real agent during an active pause keeps the pause (and its
//! remaining time), and the ledger survives intact. Around it, what an owner's mistakes
//! and accidents do to a real agent: settings written into their own config file in place,
//! one agent per data directory, SIGHUP, a missing `--config`, the data directory
//! removed under the agent, and durations past their bounds.

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
    // Setting a limit prints the limits as they now stand (not the whole status).
    let out = a.lull(&["limits", "--interruptions", "3", "--json"]).output().expect("lull limits");
    assert!(out.status.success());
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(s["interruptions_per_day"], 3, "{s}");
    let out = a.lull(&["limits", "--interruptions", "3"]).output().expect("lull limits");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("Interruptions:     at most 3 a day"), "{text}");
    let out = a.lull(&["limits", "--interruptions", "42"]).output().expect("lull limits");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0..=20"), "{err}");
    a.kill9();
    a.start();
    assert_eq!(a.status().policy.interruption_limit, 3, "limit survives a restart via the config file");
    // With nothing to set, `lull limits` shows them (and changes nothing).
    let out = a.lull(&["limits"]).output().expect("lull limits");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("at most 3 a day") && text.contains("Lend while light:  off"), "{text}");
    let out = a.lull(&["limits", "--json"]).output().expect("lull limits --json");
    let l: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (l["interruptions_per_day"].as_u64(), l["interruptions_today"].as_u64(), l["lend_while_light"].as_bool()),
        (Some(3), Some(0), Some(false)),
        "{l}"
    );
    // 21 and 99999999999 are one mistake: one error, one exit code, the agent unchanged.
    let mut seen = Vec::new();
    for v in ["21", "99999999999"] {
        let out = a.lull(&["limits", "--interruptions", v]).output().expect("lull limits");
        let err = String::from_utf8_lossy(&out.stderr).replace(v, "N");
        seen.push((out.status.code(), err.lines().find(|l| l.contains("0..=20")).map(str::to_owned)));
    }
    assert_eq!(seen[0], seen[1], "{seen:?}");
    assert!(seen[0].1.is_some(), "{seen:?}");
    assert_eq!(a.status().policy.interruption_limit, 3);
}

#[test]
fn settings_from_the_cli_keep_the_owners_file_and_hand_edits() {
    let written = "# Lull, as I like it.\n[availability]\n# I read a lot before I type.\nrecruitment_threshold_s = 120 # two minutes\n\n[budget] # interruptions\ninterruptions_per_day = 5\n";
    let mut a = Agent::new(written);
    a.start();
    // A hand edit while the agent runs, then a change from the CLI.
    let edited = written.replace("= 120", "= 60");
    std::fs::write(a.dir.join("config.toml"), &edited).expect("edit");
    let out = a.lull(&["limits", "--interruptions", "3"]).output().expect("lull limits");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let now = std::fs::read_to_string(a.dir.join("config.toml")).expect("config");
    assert_eq!(now, edited.replace("interruptions_per_day = 5", "interruptions_per_day = 3"), "the file was rewritten:\n{now}");
    let s = a.status();
    assert_eq!((s.policy.interruption_limit, s.policy.recruitment_threshold_s), (3, 60), "the hand edit is in effect too");
    // A file the owner broke by hand is named and left alone; the agent keeps its settings.
    let broken = edited.replace("= 60", "= -1");
    std::fs::write(a.dir.join("config.toml"), &broken).expect("break");
    let out = a.lull(&["limits", "--interruptions", "4"]).output().expect("lull limits");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("recruitment_threshold_s"), "{err}");
    assert_eq!(std::fs::read_to_string(a.dir.join("config.toml")).expect("config"), broken);
    assert_eq!(a.status().policy.interruption_limit, 3);
}

#[test]
fn sighup_ends_the_agent_like_sigterm() {
    let mut a = Agent::new("[sampling]\ninterval_ms = 200\n");
    a.start();
    assert!(a.lull(&["pause", "2h"]).output().expect("pause").status.success());
    let mut child = a.child.take().expect("started");
    // SAFETY: signals the agent we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGHUP) };
    let status = child.wait().expect("wait");
    assert!(status.success(), "SIGHUP ends the agent cleanly: {status}\n{}", a.stderr());
    assert!(!a.socket().exists(), "its socket is removed, as on SIGTERM");
    // Its lock went with it and its state was kept.
    a.start();
    assert_eq!(a.status().policy.state, StateKind::Paused);
}

#[test]
fn a_config_named_on_the_command_line_must_exist() {
    let a = Agent::new("");
    let missing = a.dir.join("missing.toml");
    let dangling = a.dir.join("dangling.toml");
    std::os::unix::fs::symlink(&missing, &dangling).expect("symlink");
    for (cmd, f) in [("agent", &missing), ("agent", &dangling), ("run", &missing)] {
        let mut args = vec![cmd, "--config", f.to_str().expect("utf-8")];
        if cmd == "run" {
            args.extend(["--", "true"]);
        }
        let out = a.lull(&args).output().expect("lull");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{cmd} {f:?} started on defaults");
        assert!(err.contains("no such file") && err.contains(&*f.to_string_lossy()), "{err}");
        assert_eq!(err.trim().lines().count(), 1, "said once: {err}");
        assert!(!a.socket().exists());
    }
}

#[test]
fn the_data_directory_removed_under_the_agent_stops_it_cleanly() {
    let mut a = Agent::new("[sampling]\ninterval_ms = 200\n");
    let data = a.dir.join("data");
    a.env.push(("LULL_DATA_DIR".into(), data.to_string_lossy().into_owned()));
    a.start();
    assert!(data.join("ledger.db").exists());
    std::fs::remove_dir_all(&data).expect("rm -rf the data directory");
    let mut child = a.child.take().expect("started");
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(15), "the agent ran on without its data directory");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let err = a.stderr();
    assert!(err.contains("was removed while the agent ran"), "{err}");
    // Nothing half-made is left where the data directory was.
    assert!(!data.exists(), "the agent recreated a partial data directory");
}

#[test]
fn durations_are_bounded_and_share_one_grammar() {
    let mut a = Agent::new("");
    a.start();
    for bad in ["5124095576030432h", "31d", "90", "7x"] {
        let out = a.lull(&["pause", bad]).output().expect("pause");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains("30d") && err.contains("45s, 90m"), "{bad}: {err}");
    }
    assert_ne!(a.status().policy.state, StateKind::Paused, "a refused pause changed the agent");
    for (ok, left) in [("Tomorrow", None), (" 2H30M", Some(9000)), ("1s", Some(1))] {
        let out = a.lull(&["pause", ok, "--json"]).output().expect("pause");
        assert!(out.status.success(), "{ok}: {}", String::from_utf8_lossy(&out.stderr));
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        if let Some(left) = left {
            let shown = s["paused_for_s"].as_u64().expect("timed");
            assert!(shown >= 1 && shown <= left, "{ok}: {shown} s left shown");
        }
        assert!(a.lull(&["resume"]).output().expect("resume").status.success());
    }
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
    let pid = a.try_status().expect("status").pid;
    // A second agent on the same data directory refuses, naming the first, whatever its socket.
    let elsewhere = tempfile::tempdir().expect("dir");
    let out = a.lull(&["agent"]).env("LULL_SOCKET", elsewhere.path().join("agent.sock")).output().expect("second agent");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&format!("another Lull agent (pid {pid}) is using the data directory")), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "said once: {stderr}");
    assert!(!elsewhere.path().join("agent.sock").exists());
    // A second agent on the same socket (its own data directory) refuses to steal it.
    let out = a.lull(&["agent"]).env("LULL_DATA_DIR", elsewhere.path()).output().expect("second agent");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&format!("another Lull agent (pid {pid}) is already listening")), "{stderr}");
    assert!(a.try_status().is_some(), "the first agent still answers");
}

#[test]
fn a_stopped_agent_is_named_once_not_with_an_errno_twice() {
    let mut a = Agent::new("");
    a.start();
    let pid = a.status().pid;
    // SAFETY: stops and continues the agent we spawned.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let out = a.lull(&["status"]).output().expect("lull status");
    // SAFETY: as above.
    unsafe { libc::kill(pid as i32, libc::SIGCONT) };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&format!("the agent (pid {pid})")) && err.contains("did not answer within 10 s"), "{err}");
    assert!(!err.contains("temporarily unavailable"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(a.try_status().is_some(), "the agent answers again once continued");
}

#[test]
fn a_file_where_the_socket_goes_is_never_deleted() {
    let a = Agent::new("");
    std::fs::write(a.socket(), "the owner's notes\n").expect("a regular file at the socket path");
    let out = a.lull(&["agent"]).output().expect("lull agent");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("not a socket") && err.contains(&*a.socket().to_string_lossy()), "{err}");
    assert_eq!(std::fs::read_to_string(a.socket()).expect("still there"), "the owner's notes\n");
}

#[test]
fn todays_timeline_starts_with_the_state_the_agent_started_in() {
    // Paused until resumed, then restarted: each start's state is in the timeline.
    let mut a = Agent::new("[sampling]\ninterval_ms = 200\n");
    a.start();
    a.request(Request::Pause { span: PauseSpan::UntilResumed });
    a.stop();
    a.start();
    let s = a.wait_for("paused after restart", Duration::from_secs(10), |s| s.policy.state == StateKind::Paused);
    let timeline = match a.request(Request::Today) {
        agent_core::control::Response::Today(t) => t.timeline,
        other => panic!("unexpected answer {other:?}"),
    };
    let starts: Vec<_> = timeline.iter().filter(|r| r.reason == agent_core::agent::STARTED).collect();
    assert_eq!(starts.len(), 2, "one row per start: {timeline:#?}");
    assert!(starts.iter().all(|r| r.from == r.to), "a start is a state, not a change: {timeline:#?}");
    assert_eq!(timeline[0].reason, agent_core::agent::STARTED, "the day's timeline opens with the start: {timeline:#?}");
    assert_eq!(s.policy.state.as_str(), timeline.last().expect("a timeline").to, "{timeline:#?}");
    a.stop();
}
