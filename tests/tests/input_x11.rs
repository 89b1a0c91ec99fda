//! Real input under a real X server: a `lull agent` with the X11 (XInput 2 raw events) backend on
//! Xvfb goes from idle to recruitable with no input, and to owner_active when xdotool
//! injects input (as `lull status --json` shows). And privacy: after typing a distinctive
//! string, neither the ledger, the logs, nor the agent's stdout/stderr hold it or any
//! key name or code, and the status's input timings hold the return, not the typing's rhythm. And an X server that goes away ends X11 input, not the agent.

use agent_core::policy::StateKind;
use lull_e2e::{all_files, skip_without, Agent, Xvfb};
use std::time::{Duration, Instant};

const REQUIRE: &str = "LULL_REQUIRE_X11";

/// Short thresholds, CPU and memory rules that the machine's other work cannot trip
/// (this test is about input only), the X11 backend by name.
const CONFIG: &str = "[sampling]\ninterval_ms = 200\n\n[availability]\nrecruitment_threshold_s = 2\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\n[input]\nbackend = \"x11\"\n";

fn agent_on(x: &Xvfb) -> Agent {
    agent_with(x, CONFIG, "x11-xi2")
}

fn agent_with(x: &Xvfb, config: &str, backend: &str) -> Agent {
    let mut a = Agent::new(config);
    a.env.push(("DISPLAY".into(), x.display.clone()));
    a.env.push(("WAYLAND_DISPLAY".into(), String::new()));
    a.env.push(("LULL_LOG".into(), "trace".into()));
    a.start();
    let s = a.status();
    assert!(s.input_backends.iter().any(|b| b.starts_with(&format!("{backend} (cannot see: "))), "{:?}", s.input_backends);
    a
}

#[test]
fn polled_screensaver_fallback_sees_xdotool_input() {
    if skip_without("Xvfb", REQUIRE) || skip_without("xdotool", REQUIRE) {
        return;
    }
    let x = Xvfb::start();
    let a = agent_with(&x, &CONFIG.replace("backend = \"x11\"", "backend = \"polled\""), "x11-screensaver-polled");
    a.wait_for("recruitable without input", Duration::from_secs(20), |s| s.policy.state == StateKind::Recruitable);
    // Recruitable stays so without input; one pointer move ends it within a poll or two.
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(a.status().policy.state, StateKind::Recruitable);
    x.xdotool(&["mousemove", "33", "44"]);
    a.wait_for("input seen by polling", Duration::from_secs(5), |s| s.policy.state != StateKind::Recruitable);
}

fn status_json(a: &Agent) -> serde_json::Value {
    let out = a.lull(&["status", "--json"]).output().expect("lull status");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("status JSON")
}

#[test]
fn xdotool_input_moves_the_agent_from_idle_to_owner_active() {
    if skip_without("Xvfb", REQUIRE) || skip_without("xdotool", REQUIRE) {
        return;
    }
    let x = Xvfb::start();
    let a = agent_on(&x);
    // No input: the machine becomes idle, then recruitable after 2 s.
    a.wait_for("recruitable without input", Duration::from_secs(20), |s| s.policy.state == StateKind::Recruitable);
    assert_eq!(status_json(&a)["state"], "recruitable");

    // Input: owner_active, seen through `lull status --json`.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = None;
    let mut i = 0;
    while Instant::now() < deadline {
        i += 1;
        // Relative motion moves the (XTest) device; an absolute `mousemove` warps the
        // pointer, which generates no device event (a blind spot of raw input).
        x.xdotool(&["mousemove_relative", "--", if i % 2 == 0 { "5" } else { "-5" }, "0"]);
        let s = status_json(&a);
        if s["state"] == "owner_active" {
            seen = Some(s);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = seen.unwrap_or_else(|| panic!("never owner_active; stdout:\n{}\nstderr:\n{}", a.stdout(), a.stderr()));
    assert_eq!(s["available"], false);
    assert!(a.stdout().contains("recruitable → owner_active"), "{}", a.stdout());

    // A key press counts too: once recruitable again (which it stays without input),
    // one key press takes it out of recruitable.
    a.wait_for("recruitable again after the mouse stopped", Duration::from_secs(20), |s| s.policy.state == StateKind::Recruitable);
    x.xdotool(&["key", "space"]);
    a.wait_for("a key press ends recruitable", Duration::from_secs(5), |s| s.policy.state != StateKind::Recruitable);
}

#[test]
fn typed_keys_never_reach_the_ledger_logs_or_output() {
    if skip_without("Xvfb", REQUIRE) || skip_without("xdotool", REQUIRE) {
        return;
    }
    let x = Xvfb::start();
    // `auto` (no backend named, no Wayland): picks XInput 2 on an X display.
    let mut a = agent_with(&x, &CONFIG.replace("backend = \"x11\"", "backend = \"auto\""), "x11-xi2");
    a.wait_for("recruitable without input", Duration::from_secs(20), |s| s.policy.state == StateKind::Recruitable);
    const SECRET: &str = "Zq7xSecret";
    x.xdotool(&["type", "--delay", "30", SECRET]);
    x.xdotool(&["click", "1"]);
    // The state change is in the agent's output for good (a status poll could miss a
    // short owner_active on a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(5);
    while !a.stdout().contains("recruitable → owner_active") {
        assert!(Instant::now() < deadline, "typing was not seen:\n{}", a.stdout());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The status's input timings (for timing the owner's return from outside) keep an
    // owner's return, never the rhythm of the typing: kept signals lie at least
    // TIMING_AFTER_SILENCE_NS apart (typing at 30 ms a key would give eight within it).
    let timings: Vec<u64> = status_json(&a)["input_timings"]
        .as_array()
        .map(|v| v.iter().filter_map(|t| t["received_ns"].as_u64()).collect())
        .unwrap_or_default();
    assert!(!timings.is_empty(), "the return is kept in lull status --json");
    assert!(
        timings.windows(2).all(|w| w[1] - w[0] >= agent_core::input::TIMING_AFTER_SILENCE_NS),
        "the typing's rhythm is in lull status --json: {timings:?}"
    );
    // Let a trace row and the logs be written, then stop cleanly (flushes the log).
    std::thread::sleep(Duration::from_secs(3));
    a.stop();

    let files = all_files(&a.dir);
    let names: Vec<String> = files.iter().map(|(p, _)| p.display().to_string()).collect();
    assert!(names.iter().any(|n| n.ends_with("ledger.db")), "{names:?}");
    assert!(names.iter().any(|n| n.contains("agent") && n.ends_with(".log")), "the log file exists: {names:?}");
    let log = files
        .iter()
        .filter(|(p, _)| p.to_string_lossy().ends_with(".log"))
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .collect::<String>();
    assert!(log.contains("x11-xi2"), "the log names the backend in use:\n{log}");
    assert!(a.stdout().contains("owner_active"), "the agent saw the typing:\n{}", a.stdout());

    // The secret, its letters as X11 key names (and rdev's, the former backend), key or button event words.
    let mut needles: Vec<String> = vec![SECRET.into(), SECRET.to_lowercase(), "KeyZ".into(), "KeyQ".into(), "Num7".into()];
    needles.extend(["KeyPress", "KeyRelease", "ButtonPress", "MouseMove", "keycode", "Button(", "Key(", "root_x"].map(String::from));
    for (path, bytes) in &files {
        let lower = String::from_utf8_lossy(bytes).to_lowercase();
        for n in &needles {
            assert!(!lower.contains(&n.to_lowercase()), "{} contains {n:?}", path.display());
        }
        // Also as UTF-16 and as raw bytes of the secret, in case of binary encodings.
        assert!(!bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()), "{}", path.display());
    }
}

#[test]
fn the_x_server_going_away_stops_x11_input_but_not_the_agent() {
    if skip_without("Xvfb", REQUIRE) {
        return;
    }
    let x = Xvfb::start();
    let a = agent_on(&x);
    a.wait_for("recruitable without input", Duration::from_secs(20), |s| s.policy.state == StateKind::Recruitable);
    // Kills the X server under the listening backend.
    drop(x);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.stderr().contains("input backend x11-xi2 stopped") {
        assert!(Instant::now() < deadline, "no warning on stderr:\n{}", a.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(a.stderr().contains("connection broke"), "{}", a.stderr());
    std::thread::sleep(Duration::from_millis(500));
    let s = a.try_status().unwrap_or_else(|| panic!("the agent keeps running:\n{}", a.stderr()));
    // Status shows what is live, and apart from it what stopped and why.
    assert!(!s.input_backends.iter().any(|b| b.starts_with("x11-xi2")), "a stopped backend listed as live: {:?}", s.input_backends);
    assert!(s.input_stopped.iter().any(|b| b.starts_with("x11-xi2: ") && b.contains("connection broke")), "{:?}", s.input_stopped);
    let out = a.lull(&["status"]).output().expect("lull status");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("stopped") && text.contains("x11-xi2"), "{text}");
}

#[test]
fn a_named_backend_that_cannot_work_here_says_why_and_the_agent_runs_on() {
    let mut a = Agent::new("[sampling]\ninterval_ms = 200\n");
    a.env.push(("LULL_INPUT".into(), "x11".into()));
    a.env.push(("DISPLAY".into(), String::new()));
    a.start();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !a.stderr().contains("input backend x11-xi2 stopped") {
        assert!(Instant::now() < deadline, "no warning on stderr:\n{}", a.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(a.stderr().contains("DISPLAY is not set"), "{}", a.stderr());
    // Status shows it stopped, with why, and not as live.
    let s = a.status();
    assert!(!s.input_backends.iter().any(|b| b.starts_with("x11-xi2")), "{:?}", s.input_backends);
    assert!(s.input_stopped.iter().any(|b| b.starts_with("x11-xi2: ") && b.contains("DISPLAY is not set")), "{:?}", s.input_stopped);
    assert!(a.try_status().is_some(), "the agent keeps running");
}

/// The owner's first action goes to the X server and nowhere else: one XTest motion
/// flushed without a round trip, from a client that then does nothing more with X (and
/// keeps a core busy, as an owner starting a build would). No other client of this
/// display asks for anything meanwhile. The event must still reach the agent at once:
/// with the former XRecord backend it sat in the X server's buffers until some other
/// client's output flushed them (0.35-1.2 s, or for good).
#[test]
fn an_input_event_no_client_asked_for_reaches_the_agent_at_once() {
    use x11rb::connection::Connection as _;
    use x11rb::protocol::xproto;
    use x11rb::protocol::xtest::ConnectionExt as _;
    if skip_without("Xvfb", REQUIRE) {
        return;
    }
    let x = Xvfb::start();
    let a = agent_on(&x);
    let (conn, screen) = x11rb::connect(Some(&x.display)).expect("connect to Xvfb");
    let root = conn.setup().roots[screen].root;
    conn.xtest_get_version(2, 2).expect("XTest").reply().expect("XTest reply");
    for round in 0..3 {
        a.wait_for("recruitable without input", Duration::from_secs(20), |s| s.policy.state == StateKind::Recruitable);
        let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let spin = {
            let busy = busy.clone();
            std::thread::spawn(move || while busy.load(std::sync::atomic::Ordering::Relaxed) {})
        };
        let t0 = Instant::now();
        // detail 1: relative motion, as a mouse moves.
        conn.xtest_fake_input(xproto::MOTION_NOTIFY_EVENT, 1, x11rb::CURRENT_TIME, root, 3, 0, 0).expect("fake input");
        conn.flush().expect("flush");
        let mut seen = None;
        while t0.elapsed() < Duration::from_secs(3) {
            if a.try_status().is_some_and(|s| s.policy.state != StateKind::Recruitable) {
                seen = Some(t0.elapsed());
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        busy.store(false, std::sync::atomic::Ordering::Relaxed);
        spin.join().expect("spinner");
        let took = seen.unwrap_or_else(|| panic!("round {round}: the agent never saw the motion:\n{}", a.stdout()));
        assert!(took < Duration::from_millis(300), "round {round}: the motion reached the agent only after {took:?}");
    }
}
