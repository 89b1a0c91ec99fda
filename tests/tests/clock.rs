//! Clock: a real agent under libfaketime (the wall clock faked from a file, the
//! monotonic clock real) crosses local midnight, has its clock set backwards across
//! midnight, and lives through a DST change. The budget day must move forward exactly
//! once, never back; a timed pause must last its real duration.

use agent_core::control::Request;
use agent_core::policy::{PauseSpan, StateKind};
use lull_e2e::{skip_without, Agent};
use std::path::Path;
use std::time::Duration;

const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// libfaketime's relative form ("+N" / "-N" seconds from the real clock) for a UTC
/// instant, which avoids its local-time parsing (ambiguous during a DST fall-back).
fn offset_to(utc: &str) -> String {
    let target = chrono::DateTime::parse_from_rfc3339(utc).expect("RFC 3339 instant");
    let secs = (target.with_timezone(&chrono::Utc) - chrono::Utc::now()).num_seconds();
    format!("{secs:+}")
}

fn faked_agent(start: &str) -> Option<Agent> {
    if !Path::new(LIBFAKETIME).exists() {
        assert!(!lull_e2e::required("LULL_REQUIRE_FAKETIME"), "LULL_REQUIRE_FAKETIME=1 but libfaketime is missing");
        eprintln!("SKIPPED: libfaketime is not installed (apt-get install faketime)");
        return None;
    }
    let _ = skip_without("true", "LULL_REQUIRE_FAKETIME");
    // Build (or find) the binary first: a build between computing the offset and the
    // agent's start would eat the seconds before the faked midnight.
    let _ = lull_e2e::lull_bin();
    let mut a = Agent::new("[sampling]\ninterval_ms = 250\n");
    let ts = a.dir.join("faketime");
    std::fs::write(&ts, format!("{}\n", offset_to(start))).expect("timestamp file");
    a.env = vec![
        ("TZ".into(), "Europe/Berlin".into()),
        ("LD_PRELOAD".into(), LIBFAKETIME.into()),
        ("FAKETIME_TIMESTAMP_FILE".into(), ts.display().to_string()),
        ("FAKETIME_NO_CACHE".into(), "1".into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC".into(), "1".into()),
    ];
    a.start();
    Some(a)
}

fn set_clock(a: &Agent, to: &str) {
    std::fs::write(a.dir.join("faketime"), format!("{}\n", offset_to(to))).expect("timestamp file");
}

#[test]
fn midnight_and_clock_set_backwards() {
    let Some(a) = faked_agent("2026-11-22T22:59:50Z") else { return };
    let s = a.status();
    assert_eq!(s.policy.budget_day.to_string(), "2026-11-22", "{}", s.local_time);
    a.request(Request::Pause { span: PauseSpan::UntilTomorrow });
    assert_eq!(a.status().policy.state, StateKind::Paused);
    // Real seconds pass; local midnight comes: new budget day, pause over.
    let s = a.wait_for("the new day", Duration::from_secs(40), |s| s.policy.budget_day.to_string() == "2026-11-23");
    assert!(s.local_time.starts_with("2026-11-23T00:00"), "{}", s.local_time);
    a.wait_for("the pause to end at midnight", Duration::from_secs(5), |s| s.policy.state != StateKind::Paused);
    assert!(a.stdout().contains("new day 2026-11-23"), "{}", a.stdout());

    // The clock is set back an hour, across midnight: the day does not go back.
    set_clock(&a, "2026-11-22T22:10:00Z");
    let s = a.wait_for("the clock step", Duration::from_secs(10), |s| s.local_time.starts_with("2026-11-22T23:1"));
    assert_eq!(s.policy.budget_day.to_string(), "2026-11-23", "budget day stays");
    // The step is noticed at the agent's next wake-up (its relaxed reading, with no
    // guest work: 10 s by default).
    let t0 = std::time::Instant::now();
    while !a.stdout().contains("wall clock set by") {
        assert!(t0.elapsed() < Duration::from_secs(15), "the clock step was not noticed: {}", a.stdout());
        std::thread::sleep(Duration::from_millis(100));
    }
    // And forward again across midnight: no second "new day" for the same date.
    set_clock(&a, "2026-11-22T23:05:00Z");
    a.wait_for("the clock forward", Duration::from_secs(10), |s| s.local_time.starts_with("2026-11-23T00:0"));
    // Once the agent has seen the step forward (its second clock step), the day is checked.
    let t0 = std::time::Instant::now();
    while a.stdout().matches("wall clock set by").count() < 2 {
        assert!(t0.elapsed() < Duration::from_secs(15), "the step forward was not noticed: {}", a.stdout());
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(a.stdout().matches("new day 2026-11-23").count(), 1, "{}", a.stdout());
}

#[test]
fn dst_change_keeps_day_and_pause_length() {
    // Europe/Berlin: 2026-10-25 03:00 CEST (01:00 UTC) becomes 02:00 CET.
    let Some(a) = faked_agent("2026-10-25T00:59:50Z") else { return };
    assert!(a.status().local_time.starts_with("2026-10-25T02:59:"), "{}", a.status().local_time);
    let out = a.lull(&["pause", "1h", "--json"]).output().expect("lull pause");
    assert!(out.status.success());
    let left0: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let left0 = left0["paused_for_s"].as_u64().expect("timed pause");
    // Local time repeats 02:00–03:00; the day and the pause's real length don't change.
    let s = a.wait_for("local time to fall back", Duration::from_secs(40), |s| s.local_time.starts_with("2026-10-25T02:00"));
    assert_eq!(s.policy.budget_day.to_string(), "2026-10-25");
    let left = s.policy.paused_for_s.expect("still paused");
    assert!(left + 10 >= left0 && left <= left0, "the pause jumped with the DST change: {left0} → {left}");
    assert!(!a.stdout().contains("wall clock set"), "a DST change is not a clock step: {}", a.stdout());
}
