//! Owner presence beyond the desktop (issue 15), with a real `lull agent`, real cgroups
//! and a real guest handed to it by `lull run`:
//! - the owner typing into a pty session (`script`, as over ssh or in a terminal) while a
//!   guest runs: the terminal backend sees the shell read it, the guest is frozen from
//!   the input path, and the interruption is counted with cause `input`;
//! - a program named in `rules.exclusive_programs` (a copy of `sleep` called `fakegame`)
//!   starting: the guest is evicted, the status names the program, nothing is counted;
//!   once it ends the machine is back after the recruitment threshold.
//!
//! They need root for cgroups (`LULL_REQUIRE_CGROUPS=1` makes them required) and, for the
//! pty, `script` from util-linux. The pty test's agent uses only the terminal backend
//! (`LULL_INPUT=terminal`); the other uses none, so a pty elsewhere cannot disturb it.

use agent_core::control::{Request, Response};
use agent_core::policy::{NotAllowedReason, StateKind};
use lull_e2e::{alive, instance_frozen, owner_pty, skip_without, skip_without_cgroups, Agent, Kid};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A guest that leaves a setsid'ed, double-forked daemon that spins (its main process
/// stays: in its own PID namespace the daemon would end with it).
const DAEMON: &str = r#"(setsid sh -c 'echo $$ > daemon.pid; while :; do :; done' &) ; exec sleep 100000"#;

/// Guest work is accepted after `threshold` s of idleness, whatever the build load;
/// readings every 100 ms with guests, every second without.
fn config(threshold: u64, extra: &str) -> String {
    format!(
        "[sampling]\ninterval_ms = 100\nrelaxed_interval_ms = 1000\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\nrecruitment_threshold_s = {threshold}\n{extra}"
    )
}

/// Hands a spinning daemon guest to the agent with `lull run` and waits for its pid.
fn start_guest(agent: &Agent) -> (Kid, i32) {
    let run = agent
        .lull(&["run", "--", "sh", "-c", DAEMON])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(agent.dir.join("run-stderr.txt")).expect("stderr file"))
        .spawn()
        .expect("lull run");
    let run = Kid(run);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(pid) =
            lull_e2e::guest_workdirs(&lull_e2e::work_root_of(&agent.dir)).last().and_then(|wd| lull_e2e::guest_pid(wd, "daemon.pid"))
        {
            return (run, pid);
        }
        assert!(Instant::now() < deadline, "the guest did not start\n{}", agent.stderr());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn interruptions(agent: &Agent) -> Vec<agent_core::ledger::InterruptionRow> {
    match agent.request(Request::Today) {
        Response::Today(t) => t.interruptions,
        other => panic!("unexpected answer {other:?}"),
    }
}

#[test]
fn typing_in_a_pty_freezes_the_guest_and_counts_an_input_interruption() {
    if skip_without_cgroups() || skip_without("script", "LULL_REQUIRE_CGROUPS") {
        return;
    }
    // PM keeps the guest frozen for the pause, so the freeze can be seen.
    let mut agent = Agent::new(&config(5, "[eviction]\nmode = \"pause-and-migrate\"\n"));
    agent.env.push(("LULL_INPUT".into(), "terminal".into()));
    agent.start();
    let s = agent.status();
    assert!(s.input_backends.iter().any(|b| b.starts_with("terminal (cannot see: ")), "{:?}", s.input_backends);

    // The owner's terminal session, opened after the agent started (a new pty): `sh`
    // reads each line written to `script`, as a shell reads what is typed.
    let mut script = owner_pty();
    let (_run, daemon) = start_guest(&agent);
    agent.wait_for("donating", Duration::from_secs(60), |s| s.policy.state == StateKind::Donating);
    assert!(!instance_frozen(daemon), "the guest is frozen before any input");

    let t0 = Instant::now();
    let stdin = script.0.stdin.as_mut().expect("script stdin");
    stdin.write_all(b"true\n").and_then(|_| stdin.flush()).expect("typing into the pty");
    while !instance_frozen(daemon) {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "the guest was not frozen within 5 s of a line typed into a pty\n{}",
            agent.stderr()
        );
        std::thread::sleep(Duration::from_micros(200));
    }
    eprintln!("pty write → guest frozen (real agent, from outside): {:?}", t0.elapsed());
    assert!(alive(daemon), "PM freezes the guest, it does not kill it");
    let s = agent.wait_for("evicting", Duration::from_secs(5), |s| s.policy.state == StateKind::Evicting);
    assert_eq!(s.policy.interruptions_today, 1);
    let rows = interruptions(&agent);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].cause, "input", "{rows:?}");
    agent.stop();
}

#[test]
fn an_exclusive_program_evicts_guests_without_an_interruption_and_gives_the_machine_back_after_the_threshold() {
    if skip_without_cgroups() {
        return;
    }
    let threshold = 3;
    let mut agent = Agent::new(&config(threshold, "[rules]\nexclusive_programs = [\"steam\", \"fakegame\"]\n"));
    agent.env.push(("LULL_INPUT".into(), "none".into()));
    agent.start();
    let (run, daemon) = start_guest(&agent);
    agent.wait_for("donating", Duration::from_secs(60), |s| s.policy.state == StateKind::Donating);

    // The owner starts their game: a copy of sleep called `fakegame`.
    let game = agent.dir.join("fakegame");
    std::fs::copy("/bin/sleep", &game).expect("copy sleep");
    let started = Instant::now();
    let mut game = Kid(Command::new(&game).arg("120").spawn().expect("fakegame"));
    let s = agent.wait_for("the program named", Duration::from_secs(10), |s| {
        s.policy.state == StateKind::NotAllowed && s.policy.exclusive_program.as_deref() == Some("fakegame")
    });
    eprintln!("exclusive program start → not_allowed: {:?}", started.elapsed());
    assert_eq!(s.policy.not_allowed, Some(NotAllowedReason::ExclusiveProgram));
    // Evicted: SIGTERM, then SIGKILL after the grace (10 s).
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(daemon) {
        assert!(Instant::now() < deadline, "the guest outlived the eviction\n{}", agent.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(run);
    let s = agent.status();
    assert_eq!((s.policy.interruptions_today, interruptions(&agent).len()), (0, 0), "making way for a program is no interruption");
    assert_eq!(s.policy.exclusive_program.as_deref(), Some("fakegame"));

    // The Settings window's picker lists it among the running programs.
    match agent.request(Request::RunningPrograms) {
        Response::Programs { names } => assert!(names.iter().any(|n| n == "fakegame"), "{names:?}"),
        other => panic!("unexpected answer {other:?}"),
    }

    // The game ends: the machine is idle again, and recruitable only after the threshold.
    let _ = game.0.kill();
    let _ = game.0.wait();
    let ended = Instant::now();
    agent.wait_for("idle", Duration::from_secs(5), |s| s.policy.state == StateKind::Idle && s.policy.exclusive_program.is_none());
    agent.wait_for("recruitable", Duration::from_secs(threshold + 10), |s| s.policy.state == StateKind::Recruitable);
    let back = ended.elapsed();
    eprintln!("exclusive program end → recruitable: {back:?}");
    // The threshold runs from the last reading that saw the program, up to one relaxed
    // reading (1 s) before it ended.
    assert!(
        back + Duration::from_millis(1100) >= Duration::from_secs(threshold),
        "back after {back:?}, before the {threshold} s threshold"
    );
    assert_eq!(agent.status().policy.interruptions_today, 0);
    agent.stop();
}
