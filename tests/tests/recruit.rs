//! Instant recruitment end to end (seed 003), with real processes: a `lull coordinator
//! serve`, two real `lull agent`s each in a directory of its own (enrolled with `lull
//! enrol`, heartbeating their owner-load readings), and `lull recruit 2 --for 1m -- CMD`
//! from outside. The grant names both machines; CMD runs on exactly those two as one
//! group (rank 0 and rank 1, each told `LULL_MACHINES=2`), each on a different agent; the
//! group is released when it ends, so a second `lull recruit 2` gets both again.
//!
//! The shared test machine is loaded by other builds, and owner CPU counts every process
//! that is not a guest, so the coordinator runs with `--recruit-idle-pct 100` (any
//! machine that wants work is idle): the prediction's threshold is the core's, unit- and
//! property-tested there; here the wire, the lease and the release are what is checked.
//! Needs cgroups (root; `LULL_REQUIRE_CGROUPS=1` makes it required).

use lull_e2e::coordinator::Coordinator;
use lull_e2e::{lull_bin, purge_cgroup_base, skip_without_cgroups, Agent};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Guest work accepted at once whatever the machine's load, no input backend.
const EAGER: &str = "[sampling]\ninterval_ms = 200\n[availability]\nowner_cpu_max = 1.0\nmemory_growth_max = 1.0\n\
                     recruitment_threshold_s = 0\n[input]\nbackend = \"none\"\n";

/// An agent enrolled to `c` as `machine`, started.
fn agent(c: &Coordinator, machine: &str) -> Agent {
    let mut a = Agent::new(EAGER);
    c.enrol(&a.dir, "alice", machine).unwrap();
    a.start();
    a
}

/// `lull recruit 2 --for 1m --json -- CMD`, retried while the coordinator has not yet
/// heard both agents' readings and polls; the JSON lines it printed.
fn recruit_both(c: &Coordinator, cmd: &str) -> Vec<Value> {
    let t0 = Instant::now();
    loop {
        let out = c.lull(&["recruit", "2", "--for", "1m", "--json", "--", "sh", "-c", cmd]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let lines: Vec<Value> = stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let granted = lines.first().and_then(|g| g["machines"].as_array()).map_or(0, |m| m.len());
        if out.status.success() && granted == 2 {
            return lines;
        }
        assert!(granted < 2, "both granted but the run failed: {stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), c.log());
        // None or one heard from yet (a group of one runs and ends): ask again.
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "never granted both: {stdout}\n{}\n{}",
            String::from_utf8_lossy(&out.stderr),
            c.log()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn lull_recruit_runs_one_group_on_both_agents_and_releases_it() {
    if skip_without_cgroups() {
        return;
    }
    let c = Coordinator::start(&["--heartbeat-s", "1", "--recruit-idle-pct", "100"]);
    let mut agents = [agent(&c, "box1"), agent(&c, "box2")];
    let bases: Vec<String> = agents.iter().map(|a| a.env[0].1.clone()).collect();

    let lines = recruit_both(&c, "echo rank $LULL_RANK of $LULL_MACHINES");
    assert_eq!(lines.len(), 2, "{lines:?}");
    let (grant, done) = (&lines[0], &lines[1]);
    let machines = grant["machines"].as_array().unwrap();
    let names: std::collections::BTreeSet<&str> = machines.iter().map(|m| m["machine"].as_str().unwrap()).collect();
    assert_eq!(names, ["box1", "box2"].into_iter().collect(), "{grant}");
    assert!(machines.iter().all(|m| m["predicted_idle_s"] == 60 && m["predicted_load"].as_f64().is_some()), "{grant}");
    // One gang job of two ranks, on exactly the two granted agents, each rank's own output.
    assert_eq!(done["group"], grant["group"]);
    assert_eq!(done["state"], "released", "{done}");
    assert_eq!(done["job"]["state"], "completed", "{done}");
    assert_eq!(done["job"]["machines"], 2);
    let tasks = done["output"]["tasks"].as_array().unwrap();
    let mut ran_on = std::collections::BTreeSet::new();
    for t in tasks {
        let rank = t["rank"].as_u64().unwrap();
        assert_eq!(t["exit_code"], 0, "{t}");
        assert_eq!(t["output"]["stdout"].as_str().unwrap().trim(), format!("rank {rank} of 2"), "{t}");
        let on = t["agent_id"].as_str().unwrap().to_string();
        let granted = machines.iter().find(|m| m["rank"] == rank).unwrap();
        assert_eq!(granted["agent_id"].as_str().unwrap(), on, "rank {rank} ran where it was granted");
        ran_on.insert(on);
    }
    assert_eq!(ran_on.len(), 2, "two different machines");

    // Released: both can be recruited again at once.
    let again = recruit_both(&c, "true");
    assert_eq!(again[0]["machines"].as_array().unwrap().len(), 2, "{:?}", again);
    assert_ne!(again[0]["group"], grant["group"]);

    for a in &mut agents {
        a.stop();
    }
    for b in &bases {
        purge_cgroup_base(b);
    }
}

#[test]
fn a_reserve_or_idle_threshold_out_of_range_is_refused_naming_it() {
    for (flag, value, field) in
        [("--reserve-pct", "100", "reserve_pct"), ("--reserve-pct", "-5", "reserve_pct"), ("--recruit-idle-pct", "0", "recruit_idle_pct")]
    {
        let arg = format!("{flag}={value}");
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(lull_bin())
            .args(["coordinator", "serve", "--listen", "127.0.0.1:0", &arg])
            .env("LULL_DATA_DIR", dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag} {value} was accepted");
        assert!(err.contains(field) && err.contains("100"), "{flag} {value}: {err}");
        assert!(!dir.path().join("coordinator.url").exists(), "nothing started");
    }
}
