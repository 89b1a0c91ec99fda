//! The contract charges only the pool (issue 28), end to end with the real agent: the
//! owner's own acts never count as interruptions, read back from the ledger, not just the
//! status. `lull resume` while donating on a loaded machine stops the guest without
//! counting; "donate until I return" survives the owner's CPU load and ends with a single
//! key press (XTest, under Xvfb), uncounted.

use agent_core::control::{Request, Response};
use agent_core::policy::StateKind;
use lull_e2e::{skip_without_cgroups, Agent, Xvfb};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Input from X11, a short recruitment threshold, the default owner-CPU limit (20 %) so
/// that a busy loop makes the machine busy.
const CONFIG: &str = "[sampling]\ninterval_ms = 200\n\n[availability]\nrecruitment_threshold_s = 1\n\n[input]\nbackend = \"x11\"\n";

fn skip_without_x() -> bool {
    lull_e2e::skip_without("Xvfb", "LULL_REQUIRE_X11")
}

/// Busy loops on every core, standing for the owner's build: owner CPU well over 20 %.
struct Load(Vec<Child>);
impl Load {
    fn start() -> Self {
        let n = std::thread::available_parallelism().map_or(2, |n| n.get());
        Self((0..n).map(|_| Command::new("sh").args(["-c", "while :; do :; done"]).spawn().expect("busy loop")).collect())
    }
}
impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn agent_on(x: &Xvfb) -> Agent {
    let mut a = Agent::new(CONFIG);
    a.env.push(("DISPLAY".into(), x.display.clone()));
    a.env.push(("WAYLAND_DISPLAY".into(), String::new()));
    a.start();
    a
}

/// Today's interruptions as the ledger holds them.
fn ledger_interruptions(a: &Agent) -> usize {
    match a.request(Request::Today) {
        Response::Today(t) => t.interruptions.len(),
        other => panic!("today: {other:?}"),
    }
}

/// A guest handed to the running agent (`lull run` beside it), which keeps running.
fn start_guest(a: &Agent) -> Child {
    a.lull(&["run", "--", "sleep", "120"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("lull run")
}

fn lull_ok(a: &Agent, args: &[&str]) -> String {
    let out = a.lull(args).output().expect("run lull");
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lull {args:?}: {text}");
    text
}

#[test]
fn resume_while_donating_on_a_loaded_machine_counts_nothing() {
    if skip_without_x() || skip_without_cgroups() {
        return;
    }
    let x = Xvfb::start();
    let a = agent_on(&x);
    let _load = Load::start();
    a.wait_for("the owner's load to make the machine busy", Duration::from_secs(20), |s| {
        s.policy.state == StateKind::OwnerActive && s.policy.owner_cpu > 0.2
    });
    lull_ok(&a, &["donate", "30m"]);
    let mut run = start_guest(&a);
    a.wait_for("the guest to run under the offer", Duration::from_secs(20), |s| {
        s.policy.guests_present && s.policy.state == StateKind::Donating
    });

    let said = lull_ok(&a, &["resume"]);
    assert!(!said.contains("because you are back"), "resume blames the owner's return:\n{said}");
    let s = a.wait_for("the guest to make way", Duration::from_secs(30), |s| !s.policy.guests_present && !s.policy.donate_now);
    assert_eq!(s.policy.interruptions_today, 0, "the owner's resume was counted: {:#?}", s.policy);
    assert_eq!(ledger_interruptions(&a), 0, "the ledger holds an interruption for the owner's own resume");
    let _ = run.kill();
    let _ = run.wait();
}

#[test]
fn a_single_key_press_ends_donate_until_return_uncounted() {
    if skip_without_x() || skip_without_cgroups() {
        return;
    }
    let x = Xvfb::start();
    let a = agent_on(&x);
    let _load = Load::start();
    lull_ok(&a, &["donate", "until-return"]);
    let mut run = start_guest(&a);
    a.wait_for("the guest to run under the offer", Duration::from_secs(20), |s| {
        s.policy.guests_present && s.policy.state == StateKind::Donating
    });
    // The owner's CPU load does not end the offer; no input for 10 s arms it.
    std::thread::sleep(Duration::from_secs(12));
    let s = a.status();
    assert!(s.policy.donate_now && s.policy.guests_present, "the offer ended without the owner's input: {:#?}", s.policy);
    assert!(s.policy.owner_cpu > 0.2, "the load was there: {}", s.policy.owner_cpu);

    // One key press, through XTest.
    x.xdotool(&["key", "shift"]);
    let s = a.wait_for("one key press to end the offer", Duration::from_secs(10), |s| !s.policy.donate_now);
    assert_eq!(s.policy.interruptions_today, 0, "ending the owner's own offer was counted: {:#?}", s.policy);
    a.wait_for("the guest to make way", Duration::from_secs(30), |s| !s.policy.guests_present);
    assert_eq!(ledger_interruptions(&a), 0, "the ledger holds an interruption for the end of the owner's offer");
    let _ = run.kill();
    let _ = run.wait();
}
