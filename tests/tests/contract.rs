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

/// Owner CPU left out (the test machine is shared), X11 input, a one-second threshold.
const AWAY_CONFIG: &str = "[sampling]\ninterval_ms = 200\n\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                           recruitment_threshold_s = 1\n\n[input]\nbackend = \"x11\"\n";

/// The tray app built from this tree (`lull-tray` beside `lull`), if it was built.
fn tray_bin() -> Option<std::path::PathBuf> {
    let bin = lull_e2e::lull_bin().with_file_name("lull-tray");
    bin.exists().then_some(bin)
}

/// Waits (with no input) until a recruited guest of `lull run` runs: the pool's work
/// while the owner is away, the case a return would count.
fn recruited_guest(a: &Agent) -> Child {
    a.wait_for("the machine to be recruitable", Duration::from_secs(30), |s| s.policy.state == StateKind::Recruitable);
    let run = start_guest(a);
    a.wait_for("the recruited guest to run", Duration::from_secs(30), |s| s.policy.guests_present && !s.policy.donate_now);
    run
}

/// Waits for `child` to exit on its own.
fn exits(child: &mut Child, what: &str) {
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(t0.elapsed() < Duration::from_secs(30), "{what} did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn quitting_the_agent_or_the_tray_or_losing_the_data_directory_never_counts() {
    if skip_without_x() || skip_without_cgroups() {
        return;
    }
    let x = Xvfb::start();
    let mut a = Agent::new(AWAY_CONFIG);
    a.env.push(("DISPLAY".into(), x.display.clone()));
    a.env.push(("WAYLAND_DISPLAY".into(), String::new()));
    let back = |a: &Agent| {
        // The owner comes back just after (the guest ended moments before: within the
        // after-guest window, which would count a return).
        x.xdotool(&["key", "shift"]);
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(ledger_interruptions(a), 0, "stderr:\n{}", a.stderr());
    };

    // 1. The owner quits the agent while the pool's guest runs, and comes back.
    a.start();
    let mut run = recruited_guest(&a);
    a.stop();
    exits(&mut run, "lull run after its agent quit");
    x.xdotool(&["key", "shift"]);
    a.start();
    back(&a);

    // 2. The data directory goes away under the agent (moved aside, as a clean-up would):
    // the agent stops on its own; put back, the ledger it kept holds nothing counted.
    let mut run = recruited_guest(&a);
    let aside = a.dir.with_extension("aside");
    std::fs::rename(&a.dir, &aside).unwrap();
    let mut child = a.child.take().unwrap();
    exits(&mut child, "the agent whose data directory went away");
    exits(&mut run, "lull run after its agent stopped");
    x.xdotool(&["key", "shift"]);
    std::fs::rename(&aside, &a.dir).unwrap();
    a.start();
    back(&a);

    // 3. The tray app (the same complete agent), quit while its guest runs.
    a.stop();
    if let Some(tray) = tray_bin() {
        let mut t = Command::new(tray);
        t.arg("--headless").env("LULL_CONFIG", a.dir.join("config.toml")).env("LULL_DATA_DIR", &a.dir).env("LULL_SOCKET", a.socket());
        for (k, v) in &a.env {
            t.env(k, v);
        }
        let mut tray = t.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
        let t0 = std::time::Instant::now();
        while a.try_status().is_none() {
            assert!(t0.elapsed() < Duration::from_secs(30), "lull-tray did not answer");
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut run = recruited_guest(&a);
        // SAFETY: kill with a pid we spawned (Quit and SIGTERM take the same stop).
        unsafe { libc::kill(tray.id() as i32, libc::SIGTERM) };
        exits(&mut tray, "lull-tray");
        exits(&mut run, "lull run after the tray quit");
        a.start();
        back(&a);
    } else {
        eprintln!("SKIPPED the tray case: build lull-tray (cargo build -p lull-tray) to run it");
    }

    // The same reading counts a real return: the owner comes back to a running guest.
    let mut run = recruited_guest(&a);
    x.xdotool(&["key", "shift"]);
    let s = a.wait_for("the owner's return to count", Duration::from_secs(20), |s| s.policy.interruptions_today == 1);
    assert_eq!(ledger_interruptions(&a), 1, "{:#?}", s.policy);
    let _ = run.kill();
    let _ = run.wait();
}
