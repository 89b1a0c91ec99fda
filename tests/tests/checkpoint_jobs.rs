//! Issue 12 item 6, agent side, with real processes: a checkpointable job evicted on one
//! machine resumes on another from its checkpoint, and a cancel reaches the guest.
//!
//! - `a_checkpointed_job_evicted_on_one_machine_finishes_on_another_doing_each_step_once`:
//!   `lull up` (coordinator + agent A) runs a counting shell job that keeps its count in
//!   `$LULL_CHECKPOINT` (write + rename, one step every 0.2 s, each step appended to its
//!   output). The owner pauses A mid-run: the guest gets SIGTERM, finishes its step and
//!   exits, A uploads the checkpoint and gives the task back. A second machine (B, enrolled
//!   with a join token, its own `lull agent`) leases it, downloads the checkpoint and the
//!   job completes there: A's steps and B's steps together are 1..N, each exactly once.
//! - `a_cancelled_job_stops_its_guest_within_seconds`: a running job (checkpointable, its
//!   guest ignoring SIGTERM, a 30-s kill grace) is cancelled through the API; with
//!   renewals every 0.5 s (`LULL_PROGRESS_MS`) the guest's process is gone from outside
//!   within 5 s (so it was killed, not signalled and waited for), nothing was reported as
//!   an eviction, and the owner was not counted as interrupted.
//!
//! Both need cgroups (root here; `LULL_REQUIRE_CGROUPS=1` makes them required) and use
//! their own cgroup bases, purged even when they fail.

use agent_core::control::Request;
use agent_core::policy::PauseSpan;
use lull_e2e::pool::{http, job, skip_without_cgroups, submit, wait_job, Machine};
use std::time::{Duration, Instant};

/// Guest work accepted at once whatever the load, one job slot, and a grace long enough
/// for the counting job to finish its step.
const CONFIG: &str = "[sampling]\ninterval_ms = 100\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                      recruitment_threshold_s = 0\n[eviction]\nkill_grace_s = 30\n";

/// Steps the counting job takes in all.
const STEPS: u32 = 40;

/// The counting job. Its state is the count in `$LULL_CHECKPOINT`, committed by a rename;
/// a step is printed only once its count is committed (read back with the shell's own
/// `read`, so a `mv` killed by the eviction's SIGTERM — which reaches every process of the
/// guest — cannot leave a printed step uncommitted or the reverse). SIGTERM sets a flag:
/// the step under way ends and the job exits.
const COUNTER: &str = r#"n=$1; i=0; stop=0; c="$LULL_CHECKPOINT"
trap 'stop=1' TERM
[ -n "$c" ] || { echo "no LULL_CHECKPOINT" >&2; exit 2; }
if [ -s "$c" ]; then read i < "$c"; fi
echo "start $i"
while [ "$i" -lt "$n" ] && [ "$stop" = 0 ]; do
  next=$((i+1))
  echo "$next" > "$c.tmp"
  mv -f "$c.tmp" "$c"
  read i < "$c"
  [ "$i" = "$next" ] && echo "step $i"
  sleep 0.2
done
[ "$i" -ge "$n" ] || exit 143
"#;

/// The step numbers in a job's output, in order.
fn steps(out: &str) -> Vec<u32> {
    out.lines().filter_map(|l| l.strip_prefix("step ")).map(|n| n.trim().parse().unwrap()).collect()
}

#[test]
fn a_checkpointed_job_evicted_on_one_machine_finishes_on_another_doing_each_step_once() {
    if skip_without_cgroups() {
        return;
    }
    let mut a = Machine::new(CONFIG);
    let url = a.up(&[]);
    let admin = a.admin();
    let n = STEPS.to_string();
    let id = submit(&a, &["--checkpointable", "--", "sh", "-c", COUNTER, "counter", &n]);

    // A runs it; the owner comes back (pauses Lull) after a few steps.
    let t0 = Instant::now();
    let a_out = loop {
        let out = a.workdirs(id).first().and_then(|d| std::fs::read_to_string(d.join("stdout.log")).ok()).unwrap_or_default();
        if steps(&out).len() >= 5 {
            break out;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the job never ran on A: {out:?}\n{}", a.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(a_out.starts_with("start 0\n"), "a first lease starts from nothing: {a_out:?}");
    let paused = Instant::now();
    a.call(&Request::Pause { span: PauseSpan::UntilResumed });
    let j = wait_job(&url, &admin, id, "given back by A", 60, |j| j["tasks"][0]["evictions"] == 1, || a.log());
    let back = paused.elapsed();
    assert_ne!(j["state"], "completed", "evicted before it ended: {j}");
    assert!(back < Duration::from_secs(10), "the guest finished its step and the task was given back in {back:?}, not after the grace");
    let dirs_a = a.workdirs(id);
    assert_eq!(dirs_a.len(), 1, "{dirs_a:?}");
    let a_out = std::fs::read_to_string(dirs_a[0].join("stdout.log")).unwrap();
    let a_steps = steps(&a_out);
    let a_ck = std::fs::read_to_string(dirs_a[0].join("lull-checkpoint")).unwrap();
    assert_eq!(a_ck.trim(), a_steps.last().unwrap().to_string(), "A's checkpoint holds its last step");
    assert!((a_steps.len() as u32) < STEPS, "A did not finish: {a_out}");

    // B, a second machine, enrols and takes the task over.
    let mut b = Machine::new(CONFIG);
    b.enrol(&a, &url, "bob", "box2");
    b.spawn(&["agent"], &[]);
    let j = wait_job(&url, &admin, id, "completed on B", 120, |j| j["state"] == "completed", || format!("A: {}\nB: {}", a.log(), b.log()));
    let t = &j["tasks"][0];
    assert_eq!((t["exit_code"].as_i64(), t["evictions"].as_u64()), (Some(0), Some(1)), "{j}");

    let dirs_b = b.workdirs(id);
    assert_eq!(dirs_b.len(), 1, "{dirs_b:?}");
    let b_out = std::fs::read_to_string(dirs_b[0].join("stdout.log")).unwrap();
    let last_a = *a_steps.last().unwrap();
    assert!(b_out.starts_with(&format!("start {last_a}\n")), "B resumed from A's checkpoint ({last_a}): {b_out:?}");
    // The coordinator's copy of the output is B's.
    let out = a.lull(&["jobs", "output", &id.to_string()]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), b_out);

    let all: Vec<u32> = a_steps.iter().chain(steps(&b_out).iter()).copied().collect();
    let want: Vec<u32> = (1..=STEPS).collect();
    assert_eq!(all, want, "each step done once: A {a_out:?} B {b_out:?}");
    eprintln!(
        "A did steps 1..={last_a} and gave the task back {:.2} s after the pause; B did {}..={STEPS}",
        back.as_secs_f64(),
        last_a + 1
    );
    b.stop();
    a.stop();
}

#[test]
fn a_cancelled_job_stops_its_guest_within_seconds() {
    if skip_without_cgroups() {
        return;
    }
    let mut a = Machine::new(CONFIG);
    let url = a.up(&[("LULL_PROGRESS_MS", "500")]);
    let admin = a.admin();
    // A guest that ignores SIGTERM: only a kill ends it before the 30-s grace.
    let id = submit(&a, &["--checkpointable", "--", "sh", "-c", "trap '' TERM; echo $$ > pid; exec sleep 987"]);
    let t0 = Instant::now();
    let pid = loop {
        let pid = a.workdirs(id).first().and_then(|d| std::fs::read_to_string(d.join("pid")).ok()).unwrap_or_default();
        if let Ok(pid) = pid.trim().parse::<u32>() {
            break pid;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "the job never ran: {}", a.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    let cmdline = |pid: u32| std::fs::read(format!("/proc/{pid}/cmdline")).ok();
    let ours = |c: Option<Vec<u8>>| c.is_some_and(|c| c == b"sleep\x00987\x00");
    // The exec may not have happened yet.
    while !ours(cmdline(pid)) {
        assert!(t0.elapsed() < Duration::from_secs(120), "pid {pid} never became the job's sleep: {:?}", cmdline(pid));
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_secs(1));
    assert!(ours(cmdline(pid)), "the guest runs until it is cancelled");

    let r = http().post(format!("{url}/api/v1/jobs/{id}/cancel")).bearer_auth(&admin).send().unwrap();
    assert!(r.status().is_success(), "{}", r.text().unwrap_or_default());
    let cancelled = Instant::now();
    while ours(cmdline(pid)) {
        assert!(cancelled.elapsed() < Duration::from_secs(5), "the cancelled job's guest still runs after 5 s\n{}", a.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = cancelled.elapsed();
    // The agent saw its end; nothing was given back as an eviction or counted against the owner.
    let t1 = Instant::now();
    while a.call(&Request::Status).policy.guests_present {
        assert!(t1.elapsed() < Duration::from_secs(10), "the agent still has the guest\n{}", a.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    let j = job(&url, &admin, id);
    assert_eq!(j["state"], "cancelled", "{j}");
    assert_eq!(j["tasks"][0]["evictions"].as_u64(), Some(0), "a cancel is not an eviction: {j}");
    let status = a.call(&Request::Status);
    assert_eq!(status.policy.interruptions_today, 0, "a cancel does not interrupt the owner");
    eprintln!("the cancelled job's guest was gone {:.2} s after the cancel", took.as_secs_f64());
    a.stop();
}
