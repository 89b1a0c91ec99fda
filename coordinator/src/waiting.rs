//! Why a queued job waits, said from the pool's machines as they are now: "needs 5
//! machines, the pool has 1", "needs 8.0 GiB per machine; the most any machine offers
//! guests now is 2.0 GiB (vm)", "no machine idle — vm: owner active (CPU 99 %)". The
//! same words answer a submission (a job the pool cannot run is said at once), `lull jobs
//! show` and the dashboard.
//!
//! Machines an owner key may not see are counted, never named.

use crate::model::{AgentInfo, Job, Waiting};

/// One enrolled machine as the explanation needs it.
pub struct PoolMachine<'a> {
    pub info: &'a AgentInfo,
    /// Its state for the pool overview (`recruitable`, `owner_active`, …, `offline`,
    /// `never_seen`).
    pub state: String,
    /// Whether the viewer may see it (and so read its name).
    pub visible: bool,
}

/// Machines named at most in one explanation; the rest are counted.
const NAMED: usize = 5;

/// `n thing`/`n things`.
fn count(n: usize, thing: &str) -> String {
    format!("{n} {thing}{}", if n == 1 { "" } else { "s" })
}

/// Bytes as GiB or MiB with one decimal.
pub fn bytes(b: u64) -> String {
    if b >= 1 << 30 {
        format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    }
}

/// The owner's CPU a heartbeat implies (1 − S_c/S_b), percent.
fn owner_cpu_pct(m: &AgentInfo) -> Option<f64> {
    let hb = m.heartbeat.as_ref()?;
    (hb.base_speed > 0.0).then(|| ((1.0 - hb.current_speed / hb.base_speed) * 100.0).clamp(0.0, 100.0))
}

/// Why a machine takes no job now, in words ("owner active (CPU 99 %)", "paused by its
/// owner", "offline"); `None` when it is ready for guest work.
pub fn machine_words(m: &PoolMachine) -> Option<String> {
    let cpu = owner_cpu_pct(m.info).map_or(String::new(), |c| format!(" (CPU {c:.0} %)"));
    let busy = m.info.heartbeat.as_ref().and_then(|h| h.busy.as_deref());
    Some(match m.state.as_str() {
        "recruitable" => return None,
        "owner_active" => match busy {
            Some("input") => "owner at the keyboard".to_string(),
            Some("owner_memory") => "owner's memory use is growing".to_string(),
            Some("inhibitor") => "owner present (a call or video holds an idle inhibitor)".to_string(),
            Some("exclusive_program") => "an exclusive program runs".to_string(),
            Some(_) => format!("owner active{cpu}"),
            // No cause yet: the agent has just started and has not seen the machine idle.
            None => format!("not seen idle yet{cpu}"),
        },
        "idle" => {
            let idle = m.info.heartbeat.as_ref().and_then(|h| h.idle_for_s).unwrap_or(0);
            format!("idle for {} s, not yet for the recruitment threshold", idle)
        }
        "paused" => "paused by its owner".to_string(),
        "out_of_budget" => "out of interruptions for today".to_string(),
        "not_allowed" => "outside its allowed hours or rules".to_string(),
        "evicting" => "stopping guest work (its owner is back)".to_string(),
        "lingering" => "its owner is back; a guest lingers".to_string(),
        "donating" | "lending_light" => "running guest work".to_string(),
        "offline" => "offline (not heard from lately)".to_string(),
        "never_seen" => "never connected".to_string(),
        other => other.replace('_', " "),
    })
}

/// Why the pool as it is cannot run `job` at all: too few machines enrolled, or more
/// memory per machine than any offers guests.
fn cannot_run(job: &Job, machines: &[PoolMachine]) -> Option<String> {
    let (width, n) = (job.machines as usize, machines.len());
    if width > n {
        return Some(match n {
            0 => format!("needs {}, no machine is enrolled yet", count(width, "machine")),
            _ => format!("needs {}, the pool has {n}", count(width, "machine")),
        });
    }
    let reported: Vec<&PoolMachine> = machines.iter().filter(|m| m.info.heartbeat.is_some()).collect();
    if job.mem_bytes == 0 || reported.len() < n {
        return None;
    }
    let fits = reported.iter().filter(|m| m.info.heartbeat.as_ref().is_some_and(|h| h.free_mem_bytes >= job.mem_bytes)).count();
    if fits >= width {
        return None;
    }
    let most = reported.iter().max_by_key(|m| m.info.heartbeat.as_ref().map_or(0, |h| h.free_mem_bytes))?;
    let free = most.info.heartbeat.as_ref().map_or(0, |h| h.free_mem_bytes);
    let name = if most.visible { format!(" ({})", most.info.machine) } else { String::new() };
    Some(match width {
        1 => format!("needs {} of memory; the most any machine offers guests now is {}{name}", bytes(job.mem_bytes), bytes(free)),
        _ => format!("needs {} of memory on each of {width} machines; {} of {n} offer that much now", bytes(job.mem_bytes), fits),
    })
}

/// Why `job` (queued) waits, or `None` for a job that does not wait. `ahead`: queued
/// jobs submitted before it, when known, counted up to
/// [`QUEUED_BEFORE_CAP`](crate::store::job_view::QUEUED_BEFORE_CAP) + 1.
pub fn explain(job: &Job, machines: &[PoolMachine], ahead: Option<u32>) -> Option<Waiting> {
    if job.state != "queued" {
        return None;
    }
    if let Some(reason) = cannot_run(job, machines) {
        return Some(Waiting { reason, cannot_run: true });
    }
    let busy: Vec<(&PoolMachine, String)> = machines.iter().filter_map(|m| machine_words(m).map(|w| (m, w))).collect();
    let ready = machines.len() - busy.len();
    let width = job.machines as usize;
    if ready >= width {
        let reason = match ahead {
            Some(n) if n > crate::store::job_view::QUEUED_BEFORE_CAP => {
                format!(
                    "waiting to be placed: more than {} ahead in the queue",
                    count(crate::store::job_view::QUEUED_BEFORE_CAP as usize, "job")
                )
            }
            Some(n) if n > 0 => format!("waiting to be placed: {} ahead in the queue", count(n as usize, "job")),
            _ => "waiting to be placed on an idle machine".to_string(),
        };
        return Some(Waiting { reason, cannot_run: false });
    }
    let head = match (ready, width) {
        (0, 1) => "no machine idle".to_string(),
        (0, _) => format!("needs {} at once, none idle", count(width, "machine")),
        (r, _) => format!("needs {} at once, {r} idle", count(width, "machine")),
    };
    let mut named: Vec<String> =
        busy.iter().filter(|(m, _)| m.visible).take(NAMED).map(|(m, w)| format!("{}: {w}", m.info.machine)).collect();
    let unnamed = busy.len() - named.len();
    if unnamed > 0 {
        named.push(format!("{} {}", count(unnamed, if named.is_empty() { "machine" } else { "other machine" }), "busy"));
    }
    Some(Waiting { reason: format!("{head} — {}", named.join("; ")), cannot_run: false })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Heartbeat, JobSpec};

    fn machine(name: &str, free: u64, current_speed: f64, busy: Option<&str>) -> AgentInfo {
        AgentInfo {
            id: format!("id-{name}"),
            owner: "alice".into(),
            machine: name.into(),
            enrolled_ms: 0,
            last_seen_ms: Some(0),
            why: None,
            heartbeat: Some(Heartbeat {
                state: "owner_active".into(),
                available: false,
                budget_left: 3,
                free_mem_bytes: free,
                base_speed: 100.0,
                current_speed,
                interruption_limit: Some(3),
                idle_for_s: None,
                owner_load: Vec::new(),
                memory: None,
                busy: busy.map(str::to_string),
                cpus: None,
            }),
        }
    }

    fn job(machines: u32, mem_bytes: u64) -> Job {
        Job {
            id: 7,
            submitter: "admin".into(),
            program: "sh".into(),
            spec: JobSpec { command: "sh".into(), args: vec![], env: Default::default(), inputs: Default::default() },
            mem_bytes,
            checkpointable: false,
            machines,
            max_retries: 3,
            state: "queued".into(),
            created_ms: 0,
            finished_ms: None,
            reason: None,
            exit: None,
            tasks: vec![],
            placement: None,
            waiting: None,
            may_cancel: true,
        }
    }

    fn pool<'a>(ms: &'a [AgentInfo], states: &[&str], visible: bool) -> Vec<PoolMachine<'a>> {
        ms.iter().zip(states).map(|(info, s)| PoolMachine { info, state: s.to_string(), visible }).collect()
    }

    #[test]
    fn a_job_wider_than_the_pool_or_bigger_than_any_machine_cannot_run() {
        let ms = [machine("vm", 2 << 30, 1.0, Some("owner_cpu"))];
        let w = explain(&job(5, 0), &pool(&ms, &["recruitable"], true), None).unwrap();
        assert_eq!(w, Waiting { reason: "needs 5 machines, the pool has 1".into(), cannot_run: true });
        let w = explain(&job(1, 8 << 30), &pool(&ms, &["recruitable"], true), None).unwrap();
        assert_eq!(w.reason, "needs 8.0 GiB of memory; the most any machine offers guests now is 2.0 GiB (vm)");
        assert!(w.cannot_run);
        let w = explain(&job(1, 0), &[], None).unwrap();
        assert_eq!(w.reason, "needs 1 machine, no machine is enrolled yet");
    }

    #[test]
    fn a_waiting_job_names_what_keeps_each_machine_and_counts_the_ones_it_may_not_see() {
        let ms = [machine("vm", 1 << 30, 1.0, Some("owner_cpu")), machine("lab", 1 << 30, 100.0, Some("input"))];
        let w = explain(&job(1, 0), &pool(&ms, &["owner_active", "paused"], true), None).unwrap();
        assert_eq!(w.reason, "no machine idle — vm: owner active (CPU 99 %); lab: paused by its owner");
        assert!(!w.cannot_run);
        let w = explain(&job(1, 0), &pool(&ms, &["owner_active", "offline"], false), None).unwrap();
        assert_eq!(w.reason, "no machine idle — 2 machines busy", "another owner's machines are not named");
        let w = explain(&job(2, 0), &pool(&ms, &["recruitable", "owner_active"], true), None).unwrap();
        assert_eq!(w.reason, "needs 2 machines at once, 1 idle — lab: owner at the keyboard");
        let w = explain(&job(1, 0), &pool(&ms, &["recruitable", "owner_active"], true), Some(3)).unwrap();
        assert_eq!(w.reason, "waiting to be placed: 3 jobs ahead in the queue");
        // The count stops one past its cap: the queue is said to be longer than the cap.
        let w = explain(&job(1, 0), &pool(&ms, &["recruitable", "owner_active"], true), Some(1_001)).unwrap();
        assert_eq!(w.reason, "waiting to be placed: more than 1000 jobs ahead in the queue");
        let w = explain(&job(1, 0), &pool(&ms, &["recruitable", "owner_active"], true), Some(1_000)).unwrap();
        assert_eq!(w.reason, "waiting to be placed: 1000 jobs ahead in the queue");
        // An agent that has only just started has no cause to give: it is not called active.
        let fresh = [machine("new", 1 << 30, 100.0, None)];
        let w = explain(&job(1, 0), &pool(&fresh, &["owner_active"], true), None).unwrap();
        assert_eq!(w.reason, "no machine idle — new: not seen idle yet (CPU 0 %)");
        let mut running = job(1, 0);
        running.state = "running".into();
        assert_eq!(explain(&running, &pool(&ms, &["owner_active", "paused"], true), None), None);
    }
}
