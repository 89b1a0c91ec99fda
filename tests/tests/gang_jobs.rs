//! Issue 12 item 6, gangs that hold, with real agents: a 2-machine gang starts only when
//! both machines are recruited, halts (the surviving member's guest frozen in its
//! cgroup) when one owner comes back, resumes when a third machine takes the lost rank,
//! and completes.
//!
//! Machines, each with its own data directory, cgroup base and process:
//! - A: `lull up` (coordinator + agent) on an Xvfb display; its owner comes back with
//!   xdotool motion. Immediate eviction and a budget of one interruption a day, so after
//!   its return A leaves the pool for the day (it does not take the rank back itself).
//! - B: an enrolled `lull agent` on a second Xvfb display nobody touches.
//! - C: an enrolled `lull agent` started only once the gang is halted.
//!
//! Needs Xvfb, xdotool and cgroups (root); `LULL_REQUIRE_X11=1` / `LULL_REQUIRE_CGROUPS=1`
//! make them required. `LULL_E2E_DISPLAYS=:65,:66` keeps the X servers on those displays.

use agent_core::control::Request;
use lull_e2e::pool::{http, job, skip_without_cgroups, submit, wait_job, Machine};
use lull_e2e::{guest_frozen, skip_without, Xvfb};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

const REQUIRE_X11: &str = "LULL_REQUIRE_X11";

/// Recruited at once; the owner's return evicts at once (no linger), one interruption a
/// day; a 1-s kill grace.
const CONFIG: &str = "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                      recruitment_threshold_s = 0\n[eviction]\nmode = \"immediate-eviction\"\nkill_grace_s = 1\n\
                      [budget]\ninterruptions_per_day = 1\n";

/// Steps each rank takes (one every 0.25 s: 10 s of work).
const STEPS: u32 = 40;

/// Each rank writes its pid and counts.
const RANK: &str = r#"echo $$ > pid; i=0
while [ "$i" -lt "$1" ]; do i=$((i+1)); echo "step $i"; sleep 0.25; done"#;

/// Renewals every 0.5 s, so a halt and its end are learnt within about that.
const ENV: &[(&str, &str)] = &[("LULL_PROGRESS_MS", "500"), ("WAYLAND_DISPLAY", "")];

fn steps(dir: &Path) -> Vec<u32> {
    let out = std::fs::read_to_string(dir.join("stdout.log")).unwrap_or_default();
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

/// Agent id → machine name, from the coordinator.
fn machine_names(url: &str, admin: &str) -> Vec<(String, String)> {
    let v: Value = http().get(format!("{url}/api/v1/agents")).bearer_auth(admin).send().unwrap().json().unwrap();
    v.as_array().unwrap().iter().map(|a| (a["id"].as_str().unwrap().to_string(), a["machine"].as_str().unwrap().to_string())).collect()
}

#[test]
fn a_gang_starts_together_halts_frozen_when_one_owner_returns_and_completes_with_a_replacement() {
    if skip_without("Xvfb", REQUIRE_X11) || skip_without("xdotool", REQUIRE_X11) || skip_without_cgroups() {
        return;
    }
    let started = Instant::now();
    let xa = Xvfb::start_listed(0);
    let xb = Xvfb::start_listed(1);
    let mut a = Machine::new(CONFIG);
    let mut env_a = ENV.to_vec();
    env_a.push(("DISPLAY", &xa.display));
    let url = a.up(&env_a);
    let admin = a.admin();
    let logs = |ms: &[&Machine]| ms.iter().map(|m| m.log()).collect::<Vec<_>>().join("\n----\n");

    // Only A is recruited: the gang waits in the queue, nothing leased.
    let id = submit(&a, &["--machines", "2", "--", "sh", "-c", RANK, "rank", &STEPS.to_string()]);
    wait("A recruitable", 60, || a.log(), || a.try_status().filter(|s| s.policy.state == agent_core::policy::StateKind::Recruitable));
    std::thread::sleep(Duration::from_secs(2));
    let j = job(&url, &admin, id);
    assert_eq!(j["state"], "queued", "a 2-machine gang does not start on one recruited machine: {j}");
    assert!(j["tasks"].as_array().unwrap().iter().all(|t| t["state"] == "queued"), "{j}");

    // B is recruited: both ranks are leased and both guests start.
    let mut b = Machine::new(CONFIG);
    b.enrol(&a, &url, "bob", "box2");
    let mut env_b = ENV.to_vec();
    env_b.push(("DISPLAY", &xb.display));
    b.spawn(&["agent"], &env_b);
    let j = wait_job(
        &url,
        &admin,
        id,
        "leased on both",
        60,
        |j| j["tasks"].as_array().unwrap().iter().all(|t| t["state"] == "leased"),
        || logs(&[&a, &b]),
    );
    let names = machine_names(&url, &admin);
    let name_of =
        |agent: &Value| names.iter().find(|(i, _)| Some(i.as_str()) == agent.as_str()).map(|(_, n)| n.clone()).unwrap_or_default();
    let rank_on =
        |m: &str| j["tasks"].as_array().unwrap().iter().find(|t| name_of(&t["agent_id"]) == m).unwrap()["rank"].as_u64().unwrap() as u32;
    let (ra, rb) = (rank_on("box1"), rank_on("box2"));
    let dir_of = |m: &Machine, rank: u32| {
        wait(
            "a work directory with a pid",
            60,
            || logs(&[&a, &b]),
            || m.rank_workdirs(id, rank).into_iter().next().filter(|d| d.join("work/pid").exists()),
        )
    };
    let (dir_a, dir_b) = (dir_of(&a, ra), dir_of(&b, rb));
    // Both run: steps on both.
    wait("steps on both ranks", 60, || logs(&[&a, &b]), || (steps(&dir_a).len() >= 4 && steps(&dir_b).len() >= 4).then_some(()));
    let pid_b = lull_e2e::guest_pid(&dir_b.join("work"), "pid").expect("B's guest's host pid");
    assert_eq!(guest_frozen(pid_b).map(|f| f.0), Some("0".into()), "B's guest runs");

    // A's owner comes back: A's rank is evicted, B's guest is halted (frozen), not stopped.
    let back = Instant::now();
    for i in 0..5 {
        xa.xdotool(&["mousemove_relative", "--", if i % 2 == 0 { "7" } else { "-7" }, "0"]);
        std::thread::sleep(Duration::from_millis(30));
    }
    let frozen = wait("B's guest frozen", 20, || logs(&[&a, &b]), || guest_frozen(pid_b).filter(|(f, ev)| f == "1" && *ev));
    let halted_after = back.elapsed();
    assert_eq!(frozen.0, "1");
    let j = job(&url, &admin, id);
    let task = |j: &Value, r: u32| j["tasks"][r as usize].clone();
    assert_eq!((task(&j, ra)["state"].as_str(), task(&j, ra)["evictions"].as_u64()), (Some("queued"), Some(1)), "A's rank lost: {j}");
    assert_eq!(task(&j, rb)["state"], "leased", "B's rank keeps its lease: {j}");
    assert_eq!(j["state"], "running");
    // Frozen: no step for 2 s, the process still there.
    let before = steps(&dir_b);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(steps(&dir_b), before, "B's guest made no progress while halted");
    assert!(lull_e2e::alive(pid_b), "B's guest was frozen, not killed");
    assert!((before.len() as u32) < STEPS);
    // The halt is no interruption of B's owner; A's owner was interrupted once.
    assert_eq!(b.call(&Request::Status).policy.interruptions_today, 0, "a gang halt is not an interruption");
    assert_eq!(a.call(&Request::Status).policy.interruptions_today, 1);

    // C, a third machine, takes the lost rank; B thaws and both finish.
    let mut c = Machine::new(CONFIG);
    c.enrol(&a, &url, "carol", "box3");
    c.spawn(&["agent"], &[("LULL_PROGRESS_MS", "500"), ("DISPLAY", ""), ("WAYLAND_DISPLAY", "")]);
    let c_started = Instant::now();
    wait("B's guest thawed", 90, || logs(&[&a, &b, &c]), || guest_frozen(pid_b).filter(|(f, ev)| f == "0" && !*ev));
    let thawed_after = c_started.elapsed();
    let j = wait_job(&url, &admin, id, "completed", 90, |j| j["state"] == "completed", || logs(&[&a, &b, &c]));
    let names = machine_names(&url, &admin);
    let name_of =
        |agent: &Value| names.iter().find(|(i, _)| Some(i.as_str()) == agent.as_str()).map(|(_, n)| n.clone()).unwrap_or_default();
    assert_eq!(name_of(&task(&j, ra)["agent_id"]), "box3", "C completed the lost rank: {j}");
    assert_eq!(name_of(&task(&j, rb)["agent_id"]), "box2");
    assert!(j["tasks"].as_array().unwrap().iter().all(|t| t["exit_code"].as_i64() == Some(0)), "{j}");
    // B went on where it stood: one lease, each step once, in order.
    let want: Vec<u32> = (1..=STEPS).collect();
    assert_eq!(b.rank_workdirs(id, rb).len(), 1, "B kept its one lease");
    assert_eq!(steps(&dir_b), want, "B's rank did each step once");
    let dirs_c = c.rank_workdirs(id, ra);
    assert_eq!(dirs_c.len(), 1);
    assert_eq!(steps(&dirs_c[0]), want, "C ran the lost rank");
    assert!(a.rank_workdirs(id, rb).is_empty() && steps(&dir_a).len() < STEPS as usize);
    eprintln!(
        "gang halted {:.2} s after the owner's return; B thawed {:.2} s after C started; whole test {:.1} s",
        halted_after.as_secs_f64(),
        thawed_after.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    c.stop();
    b.stop();
    a.stop();
}
