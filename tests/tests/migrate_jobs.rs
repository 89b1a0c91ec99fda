//! Issue 12 item 6, migration on request (seed 000 §5.2), with real agents and a real
//! coordinator: a lingering guest is moved when its agent asks and a machine is free.
//!
//! - A: `lull up` (coordinator + agent) under Xvfb, Linger-Longer, recruited after 3 s
//!   idle; its owner comes back with xdotool motion every half second (one interruption,
//!   the return) and the guest lingers.
//! - The counting checkpointable job of `checkpoint_jobs.rs` (one step every 0.5 s, its
//!   count committed in `$LULL_CHECKPOINT`), submitted with an estimate of 3 s of work
//!   at this machine's speed so the coordinator has a remaining time to weigh.
//! - First no machine is free: A's owner load is a CPU spinner of the test's own (so h
//!   is about one core), A asks once it has lingered `T_lingr`, the coordinator answers
//!   "stay" and the guest, frozen while A asked, is thawed and runs on.
//! - Then B (an enrolled `lull agent`, no input backend) joins and the same spinner
//!   becomes B's guest work: both agents run on this one host and see the same CPU, and
//!   what tells them apart is that an agent's guests are not its owner's load. B's own
//!   `lull run` guest (a sleep) gives it a guest cgroup, and the test moves its spinner
//!   there: A still sees a core of owner load, B an idle owner, so B is free and lighter.
//!   (A `lull run` spinner would be the same to B, but runs at idle priority: on a host
//!   whose cores other work keeps busy it would get no CPU, and B would look as loaded
//!   as A.) A asks again, the coordinator answers "migrate", A kills its frozen guest and
//!   the job completes on B from A's last checkpoint: nothing A committed is lost or
//!   redone, no eviction is counted on the task and A's owner counts only the return.
//!
//! Needs Xvfb, xdotool and cgroups v2 (root); `LULL_REQUIRE_X11=1` /
//! `LULL_REQUIRE_CGROUPS=1` make them required. `LULL_E2E_DISPLAYS=:92` keeps the X server
//! on that display.

use agent_core::control::{call, Request, Response};
use agent_core::guest::GuestSpec;
use agent_core::policy::StateKind;
use lull_e2e::pool::{job, skip_without_cgroups, submit, wait_job, Machine};
use lull_e2e::{guest_frozen, skip_without, unified_cgroup_dir, Xvfb};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const REQUIRE_X11: &str = "LULL_REQUIRE_X11";

/// A: recruited after 3 s without input (so the owner's motion every half second keeps
/// them present), CPU never makes the owner busy, Linger-Longer lingers at any h over a
/// 5-s window.
const CONFIG_A: &str = "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                        recruitment_threshold_s = 3\n[eviction]\nmode = \"linger-longer\"\nlinger_cpu_max = 1.0\n\
                        linger_window_s = 5\nkill_grace_s = 30\n[guests]\npressure_freeze_pct = 100\n";

/// B: recruited at once; two guests at a time (its own and the moved task).
const CONFIG_B: &str = "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                        recruitment_threshold_s = 0\n[guests]\nmax_jobs = 2\npressure_freeze_pct = 100\n";

/// Steps the counting job takes in all (about 60 s of work on an idle host; a loaded
/// one runs the guests, at idle priority, much slower).
const STEPS: u32 = 120;

/// The counting job (see `checkpoint_jobs.rs`): the count is committed by a rename, a
/// step printed once committed.
const COUNTER: &str = r#"echo $$ > pid; n=$1; i=0; c="$LULL_CHECKPOINT"
[ -n "$c" ] || { echo "no LULL_CHECKPOINT" >&2; exit 2; }
if [ -s "$c" ]; then read i < "$c"; fi
echo "start $i"
while [ "$i" -lt "$n" ]; do
  next=$((i+1))
  echo "$next" > "$c.tmp"
  mv -f "$c.tmp" "$c"
  read i < "$c"
  [ "$i" = "$next" ] && echo "step $i"
  sleep 0.5
done
"#;

const SPIN: &str = "while :; do :; done";

fn steps(out: &str) -> Vec<u32> {
    out.lines().filter_map(|l| l.strip_prefix("step ")).filter_map(|n| n.trim().parse().ok()).collect()
}

fn wait<T>(what: &str, secs: u64, log: impl Fn() -> String, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(t0.elapsed() < Duration::from_secs(secs), "never {what}\n{}", log());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills the test's own spinner when dropped.
struct Spinner(std::process::Child);

impl Drop for Spinner {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_lingering_guest_moves_when_its_agent_asks_and_a_machine_is_free_and_completes_there_once() {
    if skip_without("Xvfb", REQUIRE_X11) || skip_without("xdotool", REQUIRE_X11) || skip_without_cgroups() {
        return;
    }
    let xa = Arc::new(Xvfb::start_listed(0));
    let mut a = Machine::new(CONFIG_A);
    let env_a = [("LULL_PROGRESS_MS", "500"), ("WAYLAND_DISPLAY", ""), ("DISPLAY", xa.display.as_str())];
    let url = a.up(&env_a);
    let admin = a.admin();
    // `lull up` logs warnings on stderr and everything in its log files.
    let a_log = || format!("{}\n{}", a.log(), a.agent_log());

    // 3 s of work at this machine's speed (normtime is S_b × CPU seconds): the job is
    // mostly asleep, so its CPU so far says little of what is left.
    let estimate = format!("{:.0}", 3.0 * agent_core::coordinator_client::base_speed());
    let n = STEPS.to_string();
    let id = submit(&a, &["--checkpointable", "--estimate", &estimate, "--", "sh", "-c", COUNTER, "counter", &n]);
    let a_out = || a.workdirs(id).first().and_then(|d| std::fs::read_to_string(d.join("stdout.log")).ok()).unwrap_or_default();
    wait("the job running on A", 120, || a.log(), || (steps(&a_out()).len() >= 5).then_some(()));

    // A's owner: a core busy, then back at the keyboard (motion every half second).
    let spinner = Spinner(std::process::Command::new("sh").args(["-c", SPIN]).spawn().unwrap());
    std::thread::sleep(Duration::from_secs(2));
    let present = Arc::new(AtomicBool::new(true));
    let mover = {
        let (xa, present) = (xa.clone(), present.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while present.load(Ordering::Relaxed) {
                xa.xdotool(&["mousemove_relative", "--", if i % 2 == 0 { "5" } else { "-5" }, "0"]);
                i += 1;
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    wait("A lingering", 30, a_log, || a.try_status().filter(|s| s.policy.state == StateKind::Lingering));
    assert_eq!(a.call(&Request::Status).policy.interruptions_today, 1, "the owner's return counted once");

    // No other machine: A asks, the answer is to stay, and the guest runs on.
    wait("A's migration request answered 'stay'", 60, a_log, || a_log().contains("task stays: stay: no other machine").then_some(()));
    let after_stay = steps(&a_out()).len();
    let pid_a = lull_e2e::guest_pid(&a.workdirs(id)[0].join("work"), "pid").expect("A's guest's host pid");
    wait("A's guest thawed after the answer", 10, a_log, || guest_frozen(pid_a).filter(|(f, ev)| f == "0" && !*ev));
    // At idle priority under a busy owner it may step slowly, but it steps.
    wait("A's guest stepping after the answer", 60, a_log, || (steps(&a_out()).len() > after_stay).then_some(()));
    assert_eq!(job(&url, &admin, id)["tasks"][0]["state"], "leased", "a 'stay' keeps the lease");
    let st = a.call(&Request::Status);
    assert_eq!((st.policy.state, st.policy.interruptions_today), (StateKind::Lingering, 1), "still lingering, nothing more counted");

    // B joins with a guest of its own, and the spinner becomes B's guest work: B is free
    // and its owner idle, A's owner as busy as before.
    let mut b = Machine::new(CONFIG_B);
    b.enrol(&a, &url, "bob", "box2");
    b.spawn(&["agent"], &[("LULL_PROGRESS_MS", "500"), ("DISPLAY", ""), ("WAYLAND_DISPLAY", "")]);
    wait("B's agent", 60, || b.log(), || b.try_status());
    let sock_b = b.dir.path().join("agent.sock");
    let spec = GuestSpec::new("sleep", ["3600"]);
    let guest_b = match call(&sock_b, &Request::RunJob { spec: Box::new(spec), donate_now: false }) {
        Ok(Response::Guest(g)) => g.id,
        other => panic!("B did not take its guest: {other:?}\n{}", b.log()),
    };
    let pid_b = wait(
        "B's guest running",
        30,
        || b.log(),
        || match call(&sock_b, &Request::Guest { id: guest_b.clone() }) {
            Ok(Response::Guest(g)) => g.pid,
            _ => None,
        },
    );
    let cgroup_b = unified_cgroup_dir(pid_b as i32).expect("B's guest cgroup");
    std::fs::write(cgroup_b.join("cgroup.procs"), spinner.0.id().to_string()).unwrap();
    let asked_from = Instant::now();
    let logs = || format!("A: {}\n----\nB: {}\n{}", a_log(), b.log(), b.agent_log());
    wait_job(&url, &admin, id, "moved to B", 180, |j| j["placement"]["machines"][0] == "box2", logs);
    let moved_after = asked_from.elapsed();
    // Its part played: the host's CPU back for the guests, which run at idle priority.
    drop(spinner);
    let answer = a_log().lines().find(|l| l.contains("task migrated: migrate:")).map(str::to_string);
    let answer = answer.unwrap_or_else(|| panic!("A asked and was told to move: {}", a_log()));
    let j = wait_job(&url, &admin, id, "completed on B", 600, |j| j["state"] == "completed", logs);
    present.store(false, Ordering::Relaxed);
    mover.join().unwrap();
    let t = &j["tasks"][0];
    assert_eq!((t["exit_code"].as_i64(), t["evictions"].as_u64()), (Some(0), Some(0)), "a migration is not an eviction: {j}");

    // A's guest is gone; its owner was interrupted only by the return.
    wait("A without guests", 10, a_log, || (!a.call(&Request::Status).policy.guests_present).then_some(()));
    assert_eq!(a.call(&Request::Status).policy.interruptions_today, 1, "the migration counted no interruption");

    // Nothing A committed was lost or redone: B resumed at A's last committed count.
    let dirs_a = a.workdirs(id);
    assert_eq!(dirs_a.len(), 1, "{dirs_a:?}");
    let a_out = std::fs::read_to_string(dirs_a[0].join("stdout.log")).unwrap();
    let a_steps = steps(&a_out);
    let committed: u32 = std::fs::read_to_string(dirs_a[0].join("work/lull-checkpoint")).unwrap().trim().parse().unwrap();
    assert!(committed > 0 && committed < STEPS, "A did part of the work: {committed}");
    // The guest is frozen between two instructions: a step whose count was committed
    // just before may not have printed its line yet (done once, not shown).
    let printed_all = a_steps == (1..=committed).collect::<Vec<u32>>();
    let printed_but_last = a_steps == (1..committed).collect::<Vec<u32>>();
    assert!(printed_all || printed_but_last, "A's steps are 1..={committed}: {a_out:?}");
    let dirs_b = b.workdirs(id);
    assert_eq!(dirs_b.len(), 1, "{dirs_b:?}");
    let b_out = std::fs::read_to_string(dirs_b[0].join("stdout.log")).unwrap();
    assert!(b_out.starts_with(&format!("start {committed}\n")), "B resumed from A's last checkpoint ({committed}): {b_out:?}");
    assert_eq!(steps(&b_out), (committed + 1..=STEPS).collect::<Vec<u32>>(), "B did the rest, each step once");
    eprintln!(
        "A did steps 1..={committed} and lingered; 'stay' with no free machine; moved to B {:.1} s after B joined; B did {}..={STEPS}\n{answer}",
        moved_after.as_secs_f64(),
        committed + 1
    );
    b.stop();
    a.stop();
}
