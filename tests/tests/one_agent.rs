//! One agent, assembled once (issue 10). Every entry point a user runs — `lull agent`,
//! `lull run`, `lull-tray` and `lull up` — builds the same complete agent through
//! `agent_core::assembly`: under Xvfb each reports, through `lull status --json`, the same
//! input backends, the same guest runtime and (enrolled) the same coordinator link.
//!
//! And `lull run` beside a running agent: it hands its job to that agent and follows it
//! (its output, its exit code, 75 when stopped by SIGINT); `--now` is an offer that ends
//! with the job and is never saved; a `lull run` that is refused says why once and leaves
//! the running agent as it was. And the start-up state does not flap.

use agent_core::control::{call, AgentStatus, Request, Response};
use agent_core::policy::StateKind;
use lull_e2e::coordinator::Coordinator;
use lull_e2e::{lull_bin, purge_cgroup_base, skip_without_cgroups, tray_bin, Agent, Xvfb};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Input from X11 by name, CPU and memory out of the availability definition (the shared
/// machine's load must not decide these tests), a short recruitment threshold.
const CONFIG: &str = "[sampling]\ninterval_ms = 200\n\n[availability]\nrecruitment_threshold_s = 1\nowner_cpu_max = 1.0\n\
                      memory_growth_max = 1.0\n\n[input]\nbackend = \"x11\"\n";

fn skip_without_x() -> bool {
    lull_e2e::skip_without("Xvfb", "LULL_REQUIRE_X11")
}

/// The environment every entry point of one machine shares: its directories, its
/// display, its cgroup base, no session bus.
fn machine_env(dir: &Path, display: &str, base: &str) -> Vec<(String, String)> {
    vec![
        ("LULL_CONFIG".into(), dir.join("config.toml").display().to_string()),
        ("LULL_DATA_DIR".into(), dir.display().to_string()),
        ("LULL_SOCKET".into(), dir.join("agent.sock").display().to_string()),
        ("LULL_CGROUP".into(), base.into()),
        ("DISPLAY".into(), display.into()),
        ("WAYLAND_DISPLAY".into(), String::new()),
        ("XDG_CONFIG_HOME".into(), dir.join("xdg-config").display().to_string()),
        ("DBUS_SESSION_BUS_ADDRESS".into(), format!("unix:path={}", dir.join("no-bus").display())),
        ("NO_AT_BRIDGE".into(), "1".into()),
    ]
}

fn status_at(socket: &Path) -> Option<AgentStatus> {
    match call(socket, &Request::Status) {
        Ok(Response::Status(s)) => Some(*s),
        _ => None,
    }
}

/// A process killed on drop.
struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Spawns `cmd` (output to `log`) and waits until an agent answers on `socket` with this
/// process's pid.
fn start_entry(mut cmd: Command, socket: &Path, log: &Path) -> (Proc, AgentStatus) {
    let out = std::fs::File::create(log).expect("log");
    let err = out.try_clone().expect("log");
    let mut child = Proc(cmd.stdout(out).stderr(err).spawn().expect("spawn"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = status_at(socket).filter(|s| s.pid == child.0.id()) {
            // Let each input backend connect (or fail and say so) before comparing.
            std::thread::sleep(Duration::from_millis(500));
            return (child, status_at(socket).unwrap_or(s));
        }
        if let Ok(Some(st)) = child.0.try_wait() {
            panic!("exited early ({st}):\n{}", std::fs::read_to_string(log).unwrap_or_default());
        }
        assert!(Instant::now() < deadline, "no agent answered:\n{}", std::fs::read_to_string(log).unwrap_or_default());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGTERM, then the exit status.
fn stop(mut p: Proc) -> std::process::ExitStatus {
    // SAFETY: signals a child of ours.
    unsafe { libc::kill(p.0.id() as i32, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(st)) = p.0.try_wait() {
            return st;
        }
        assert!(Instant::now() < deadline, "did not stop within 30 s of SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn lull_in(env: &[(String, String)], args: &[&str]) -> Command {
    let mut c = Command::new(lull_bin());
    c.args(args).envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str()))).env_remove("LULL_COORDINATOR_URL").env_remove("LULL_KEY");
    c
}

/// What must be the same in every entry point's status.
fn assembled(s: &AgentStatus) -> (Vec<String>, String, Option<(String, String)>) {
    (s.input_backends.clone(), s.guest_runtime.clone(), s.coordinator.as_ref().map(|c| (c.url.clone(), c.agent_id.clone())))
}

#[test]
fn every_entry_point_assembles_the_same_complete_agent() {
    if skip_without_x() || skip_without_cgroups() {
        return;
    }
    let x = Xvfb::start();
    // A coordinator of its own, and this machine enrolled to it.
    let coordinator = Coordinator::start(&[]);
    let (url, token) = (coordinator.url.clone(), coordinator.token().expect("join token"));

    let machine = tempfile::tempdir().expect("dir");
    let dir = machine.path();
    std::fs::write(dir.join("config.toml"), CONFIG).expect("config");
    let base = format!("lull-e2e-one-{}", std::process::id());
    let env = machine_env(dir, &x.display, &base);
    let out = lull_in(&env, &["enrol", "--url", &url, "--token", &token, "--owner", "olga", "--machine", "desk1"]).output().expect("enrol");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let socket = dir.join("agent.sock");

    // lull agent
    let (p, agent) = start_entry(lull_in(&env, &["agent"]), &socket, &dir.join("agent.log"));
    let want = assembled(&agent);
    assert!(want.0.iter().any(|b| b.starts_with("x11-xi2")), "real X11 input: {:?}", want.0);
    assert!(agent.input_stopped.is_empty(), "{:?}", agent.input_stopped);
    assert!(want.1.starts_with("linux: cgroup"), "the cgroup guest runtime: {}", want.1);
    let link = want.2.clone().expect("enrolled: the coordinator link");
    assert_eq!(link.0, url);
    // The text form says the same.
    let text = lull_in(&env, &["status"]).output().expect("status");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains(&format!("Coordinator:    {url}")), "{text}");
    assert!(stop(p).success());

    // lull run (no agent running: it runs its own complete agent)
    let (p, run) = start_entry(lull_in(&env, &["run", "--", "sleep", "60"]), &socket, &dir.join("run.log"));
    assert_eq!(assembled(&run), want, "lull run's agent");
    // SAFETY: signals a child of ours.
    unsafe { libc::kill(p.0.id() as i32, libc::SIGINT) };
    let mut p = p;
    let st = p.0.wait().expect("run");
    assert_eq!(st.code(), Some(75), "stopped by SIGINT: evicted\n{}", std::fs::read_to_string(dir.join("run.log")).unwrap_or_default());

    // lull-tray
    let mut tray = Command::new(tray_bin());
    tray.envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .env("WEBKIT_DISABLE_DMABUF_RENDERER", "1")
        .env("WEBKIT_DISABLE_COMPOSITING_MODE", "1")
        .env("LIBGL_ALWAYS_SOFTWARE", "1");
    let (p, tray) = start_entry(tray, &socket, &dir.join("tray.log"));
    assert_eq!(assembled(&tray), want, "the tray app's agent\n{}", std::fs::read_to_string(dir.join("tray.log")).unwrap_or_default());
    assert!(stop(p).success());

    // lull up: the same agent, linked to the coordinator it starts (its own directory,
    // since it enrols this machine to that coordinator).
    drop(coordinator);
    let up_dir = tempfile::tempdir().expect("dir");
    std::fs::write(up_dir.path().join("config.toml"), CONFIG).expect("config");
    let up_env = machine_env(up_dir.path(), &x.display, &base);
    let (p, up) =
        start_entry(lull_in(&up_env, &["up", "--listen", "127.0.0.1:0"]), &up_dir.path().join("agent.sock"), &up_dir.path().join("up.log"));
    let (inputs, runtime, up_link) = assembled(&up);
    assert_eq!((inputs, runtime), (want.0.clone(), want.1.clone()), "lull up's agent");
    let up_url = std::fs::read_to_string(up_dir.path().join("coordinator.url")).expect("url").trim().to_string();
    assert_eq!(up_link.map(|l| l.0), Some(up_url), "lull up links its agent to its own coordinator");
    assert!(stop(p).success());
    purge_cgroup_base(&base);
}

/// An agent with X11 input and cgroups, plus the env `lull run` needs to reach it.
fn running_agent(x: &Xvfb) -> Agent {
    let mut a = Agent::new(CONFIG);
    a.env.push(("DISPLAY".into(), x.display.clone()));
    a.env.push(("WAYLAND_DISPLAY".into(), String::new()));
    a.start();
    a
}

fn run_beside(a: &Agent, args: &[&str]) -> Command {
    let mut c = a.lull(&["run"]);
    c.args(args);
    c
}

#[test]
fn lull_run_beside_a_running_agent_hands_its_job_over() {
    if skip_without_x() || skip_without_cgroups() {
        return;
    }
    let x = Xvfb::start();
    let mut a = running_agent(&x);
    let before = a.status();
    assert!(!before.policy.donate_now);

    // The job runs in the running agent, offered now, and its output and exit code come back.
    let out = run_beside(&a, &["--now", "--", "sh", "-c", "echo hello-from-the-guest; exit 7"]).output().expect("lull run");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(7), "the job's exit code\nstdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("hello-from-the-guest"), "the job's output:\n{stdout}\nstderr:\n{stderr}");
    assert!(a.stdout().contains("donat"), "the running agent ran it:\n{}", a.stdout());
    // The offer ended with the job, and was never saved.
    a.wait_for("the offer to end with the job", Duration::from_secs(10), |s| !s.policy.donate_now);
    a.stop();
    a.start();
    assert!(!a.status().policy.donate_now, "a restart finds no offer left by the job");

    // A refused run says why once, exits non-zero, and changes nothing.
    let before = a.status();
    let out = run_beside(&a, &["--now", "--mode", "ie", "--", "true"]).output().expect("lull run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "one line:\n{stderr}");
    assert!(stderr.contains("already running") && stderr.contains("--mode"), "{stderr}");
    std::thread::sleep(Duration::from_millis(600));
    let after = a.status();
    assert_eq!((after.policy.donate_now, after.policy.guests_present), (before.policy.donate_now, false), "nothing changed");

    // SIGINT stops the job as an eviction would: 75, and the guest is gone.
    let mut run = run_beside(&a, &["--now", "--", "sleep", "60"]).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("lull run");
    a.wait_for("the job's guest", Duration::from_secs(20), |s| s.policy.guests_present);
    // SAFETY: signals a child of ours.
    unsafe { libc::kill(run.id() as i32, libc::SIGINT) };
    let st = run.wait().expect("lull run");
    assert_eq!(st.code(), Some(75), "stopped by SIGINT");
    a.wait_for("the guest to be gone", Duration::from_secs(20), |s| !s.policy.guests_present && !s.policy.donate_now);
}

#[test]
fn the_start_up_state_does_not_flap() {
    // A busy core (an owner building something as the agent starts): the agent must not
    // report owner_active → idle → owner_active in its first seconds.
    let busy = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let spin: Vec<_> = (0..2)
        .map(|_| {
            let busy = busy.clone();
            std::thread::spawn(move || while busy.load(std::sync::atomic::Ordering::Relaxed) {})
        })
        .collect();
    let mut a = Agent::new("[sampling]\ninterval_ms = 200\n[availability]\nowner_cpu_max = 0.2\n[input]\nbackend = \"none\"\n");
    a.start();
    std::thread::sleep(Duration::from_secs(2));
    let state = a.status().policy.state;
    busy.store(false, std::sync::atomic::Ordering::Relaxed);
    for s in spin {
        s.join().expect("spinner");
    }
    let out = a.stdout();
    assert!(!out.contains("→ idle"), "the state flapped at start-up:\n{out}");
    assert_eq!(state, StateKind::OwnerActive, "{out}");
}
