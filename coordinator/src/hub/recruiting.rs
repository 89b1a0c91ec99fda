//! Instant recruitment's state (seed 003): the leader's pool of machines with their
//! owner-load readings and standing, the groups lent, and the request and grant types.
//! Every decision here is made in memory, at once; the tasks that write a grant's gang
//! job and release it are in `scheduling::recruiting`, whose docs tell the whole design.

use crate::auth::Principal;
use crate::model::SubmitJob;
use crate::store::{self, now_ms};
use lull_core::sched::MachineId;
use lull_core::sched::{window_for, RecruitConfig, Recruiter, Request, HISTORY};
use lull_protocol::LoadReading;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use utoipa::ToSchema;

/// Groups remembered (for `GET /api/v1/recruit/{group}`) before ended ones are forgotten.
const GROUPS_KEPT: usize = 10_000;

/// The default reserve: 20 % of the idle machines (seed 003 Table 1: 20–30 % did best).
pub const DEFAULT_RESERVE_PCT: f64 = 20.0;

/// The default idle threshold: predicted owner CPU below 10 % (seed 003).
pub const DEFAULT_IDLE_LOAD_PCT: f64 = 10.0;

/// The coordinator's recruitment settings with a reserve of `reserve_pct` percent and
/// the default idle threshold; refused (naming the setting and its range) outside
/// 0 ≤ x < 100.
pub fn config_with_reserve(reserve_pct: f64) -> Result<RecruitConfig, String> {
    config_with(reserve_pct, DEFAULT_IDLE_LOAD_PCT)
}

/// The settings with a reserve of `reserve_pct` % (0 ≤ x < 100) and machines idle below
/// `idle_load_pct` % predicted owner CPU (0 < x ≤ 100; 100: load is not looked at).
pub fn config_with(reserve_pct: f64, idle_load_pct: f64) -> Result<RecruitConfig, String> {
    if !(reserve_pct.is_finite() && (0.0..100.0).contains(&reserve_pct)) {
        return Err(format!("[scheduler] reserve_pct (--reserve-pct) {reserve_pct} is not in 0 ≤ x < 100 (percent of the idle machines)"));
    }
    if !(idle_load_pct.is_finite() && idle_load_pct > 0.0 && idle_load_pct <= 100.0) {
        return Err(format!("[scheduler] recruit_idle_pct (--recruit-idle-pct) {idle_load_pct} is not in 0 < x ≤ 100 (percent owner CPU)"));
    }
    Ok(RecruitConfig { reserve_pct: reserve_pct / 100.0, idle_load_max: idle_load_pct / 100.0 })
}

/// A request for machines now.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecruitRequest {
    /// How many machines at most (1–1024).
    pub k: u32,
    /// How long the work will run, seconds (1–86400): machines are chosen predicted idle
    /// for this long.
    pub seconds: u32,
    /// What each machine runs (as a gang job's member; `LULL_RANK`, `LULL_MACHINES` set).
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Input files: name → content (UTF-8).
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Memory per machine in bytes (the guest's cap).
    #[serde(default)]
    pub mem_bytes: u64,
}

/// One machine of a grant.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RecruitedMachine {
    pub agent_id: String,
    pub machine: String,
    pub owner: String,
    /// The group's rank this machine runs.
    pub rank: u32,
    /// Predicted owner load over the requested seconds (fraction 0–1; idle is < 0.1).
    pub predicted_load: f64,
    /// Seconds the machine is predicted to stay idle: the request's, since every machine
    /// granted is predicted idle for all of it.
    pub predicted_idle_s: u32,
    /// Seconds it has been available so far, as its agent last said.
    pub idle_for_s: u64,
}

/// The answer to a [`RecruitRequest`].
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RecruitGrant {
    /// The group's id (null when no machine was granted): follow or release it with
    /// `/api/v1/recruit/{group}`.
    pub group: Option<String>,
    /// The machines lent, least loaded first.
    pub machines: Vec<RecruitedMachine>,
    /// Machines that were idle (and could have been granted) when the request came.
    pub idle: u32,
    /// Of those, how many were kept in reserve.
    pub reserved: u32,
    /// The reserve in force, percent of the idle machines.
    pub reserve_pct: f64,
    /// Readings in the prediction window (one per second).
    pub window: u32,
    /// Microseconds the decision took inside the coordinator.
    pub decided_us: u64,
}

/// A group's state.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct RecruitGroup {
    pub group: String,
    /// The gang job the group runs as (null until written, a few ms after the grant).
    pub job_id: Option<i64>,
    /// `leasing` (being written), `leased`, `released` (released or ended) or `failed`.
    pub state: String,
    /// Agent id per rank.
    pub agents: Vec<String>,
    pub error: Option<String>,
}

/// What the pool knows of one machine.
#[derive(Clone, Debug)]
struct Known {
    agent_id: String,
    machine: String,
    owner: String,
    idle_for_s: u64,
}

#[derive(Clone, Debug)]
struct Group {
    submitter: String,
    machines: Vec<MachineId>,
    agents: Vec<String>,
    job: Option<i64>,
    state: &'static str,
    error: Option<String>,
}

#[derive(Default)]
struct Pool {
    /// `None` while this replica does not lead.
    recruiter: Option<Recruiter>,
    known: HashMap<MachineId, Known>,
    groups: HashMap<String, Group>,
    job_groups: HashMap<i64, String>,
    next_group: u64,
}

/// The leader's recruitment state, shared by the driver (which feeds it) and the API
/// (which asks it).
#[derive(Default)]
pub struct Recruiting {
    pool: Mutex<Pool>,
}

impl std::fmt::Debug for Recruiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recruiting")
    }
}

/// Why a request was not answered.
#[derive(Debug, thiserror::Error)]
pub enum RecruitError {
    #[error("{0}")]
    Invalid(String),
    #[error("instant recruitment is answered by the leading replica, which this one is not (yet): retry")]
    NotLeading,
    #[error("no such recruit group")]
    NotFound,
    /// Releasing the group's job failed in the database.
    #[error(transparent)]
    Store(#[from] store::StoreError),
}

impl Recruiting {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pool> {
        self.pool.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts afresh (the replica took the lead): no readings, nothing lent.
    pub(crate) fn reset(&self, cfg: RecruitConfig) {
        let mut p = self.lock();
        let recruiter = match Recruiter::new(cfg) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!(error = %e, "instant recruitment is off: its configuration is refused");
                None
            }
        };
        *p = Pool { recruiter, next_group: (now_ms().max(0) as u64) << 8, ..Pool::default() };
    }

    /// Stops answering (the replica stepped down).
    pub(crate) fn stop(&self) {
        *self.lock() = Pool::default();
    }

    /// Feeds a heartbeat's owner-load readings (the latest [`HISTORY`] seconds of them).
    pub(crate) fn observe(&self, id: MachineId, readings: &[LoadReading]) {
        if readings.is_empty() {
            return;
        }
        let mut seconds = Vec::with_capacity(HISTORY);
        for r in readings.iter().rev() {
            for _ in 0..r.secs.max(1) {
                if seconds.len() == HISTORY {
                    break;
                }
                seconds.push(r.cpu_pct.min(100) as f32 / 100.0);
            }
        }
        let mut guard = self.lock();
        let p = &mut *guard;
        if let Some(rec) = p.recruiter.as_mut() {
            if !p.known.contains_key(&id) {
                // Not recruitable before the driver has said it may be (set_standing).
                rec.set_eligible(id, false);
            }
            seconds.reverse();
            rec.observe_all(id, &seconds);
        }
    }

    /// Records what else decides whether `id` may be recruited: `eligible` when it has a
    /// free slot, is allowed and has interruption budget left. Returns whether it is lent
    /// to a group now (the scheduler places nothing else there).
    pub(crate) fn set_standing(&self, id: MachineId, agent_id: &str, machine: &str, owner: &str, idle_for_s: u64, eligible: bool) -> bool {
        let mut p = self.lock();
        let Some(rec) = p.recruiter.as_mut() else { return false };
        rec.set_eligible(id, eligible);
        let lent = rec.is_lent(id);
        match p.known.get_mut(&id) {
            Some(k) => k.idle_for_s = idle_for_s,
            None => {
                let k = Known { agent_id: agent_id.into(), machine: machine.into(), owner: owner.into(), idle_for_s };
                p.known.insert(id, k);
            }
        }
        lent
    }

    /// The machine left the pool.
    pub(crate) fn forget(&self, id: MachineId) {
        let mut p = self.lock();
        p.known.remove(&id);
        if let Some(r) = p.recruiter.as_mut() {
            r.forget(id);
        }
    }

    /// The job ran as a group and is no longer running: its machines are released.
    /// Returns them (for the driver to look at again).
    pub(crate) fn job_left(&self, job: i64) -> Vec<MachineId> {
        let mut p = self.lock();
        let Some(g) = p.job_groups.remove(&job) else { return Vec::new() };
        release_group(&mut p, &g, "released")
    }

    /// Answers a request at once: lends the machines and records the group, still to be
    /// written (by `scheduling::recruiting`).
    pub(crate) fn grant(&self, req: &RecruitRequest, submitter: &str) -> Result<RecruitGrant, RecruitError> {
        let started = std::time::Instant::now();
        let mut guard = self.lock();
        let p = &mut *guard;
        let Some(rec) = p.recruiter.as_mut() else { return Err(RecruitError::NotLeading) };
        let g = rec.recruit(Request { k: req.k as usize, forecast_s: req.seconds as f64 });
        let reserve_pct = rec.config().reserve_pct * 100.0;
        let mut machines = Vec::with_capacity(g.machines.len());
        let mut lent = Vec::with_capacity(g.machines.len());
        for (id, load) in g.machines.iter().zip(&g.predicted) {
            // Every eligible machine is known (set_standing names it first).
            let Some(k) = p.known.get(id).cloned() else {
                rec.release(*id);
                continue;
            };
            lent.push(*id);
            let rank = machines.len();
            machines.push(RecruitedMachine {
                agent_id: k.agent_id,
                machine: k.machine,
                owner: k.owner,
                rank: rank as u32,
                predicted_load: *load,
                predicted_idle_s: req.seconds,
                idle_for_s: k.idle_for_s,
            });
        }
        if p.groups.len() >= GROUPS_KEPT {
            // Ended groups are forgotten first; live ones are kept however many.
            p.groups.retain(|_, g| g.state == "leasing" || g.state == "leased");
        }
        let group = (!machines.is_empty()).then(|| {
            p.next_group += 1;
            let id = format!("g{:x}", p.next_group);
            let agents = machines.iter().map(|m| m.agent_id.clone()).collect();
            p.groups.insert(
                id.clone(),
                Group { submitter: submitter.into(), machines: lent, agents, job: None, state: "leasing", error: None },
            );
            id
        });
        drop(guard);
        Ok(RecruitGrant {
            group,
            machines,
            idle: g.idle as u32,
            reserved: g.reserved as u32,
            reserve_pct,
            window: window_for(req.seconds as f64) as u32,
            decided_us: started.elapsed().as_micros() as u64,
        })
    }

    /// Ends group `id` for `who` (`POST /api/v1/recruit/{group}/release`): its machines
    /// are given back. Returns its job, if written (to cancel), and the machines.
    pub(crate) fn give_back(&self, who: &Principal, id: &str) -> Result<(Option<i64>, Vec<MachineId>), RecruitError> {
        let mut p = self.lock();
        let g = p.groups.get(id).filter(|g| may_see(who, g)).ok_or(RecruitError::NotFound)?;
        let job = g.job;
        if let Some(j) = job {
            p.job_groups.remove(&j);
        }
        Ok((job, release_group(&mut p, id, "released")))
    }

    /// The agents of these machines, as far as the pool knows them.
    pub(crate) fn agents_of(&self, machines: &[MachineId]) -> Vec<String> {
        let p = self.lock();
        machines.iter().filter_map(|m| p.known.get(m).map(|k| k.agent_id.clone())).collect()
    }

    /// Group `group` could not be written: it fails with `error` and gives its machines
    /// back (returned).
    pub(crate) fn fail(&self, group: &str, error: String) -> Vec<MachineId> {
        let mut p = self.lock();
        if let Some(g) = p.groups.get_mut(group) {
            g.error = Some(error);
        }
        release_group(&mut p, group, "failed")
    }

    /// Group `group` was written as `job`. Returns whether it was released meanwhile (the
    /// job is then to be cancelled); otherwise the job's end will release it.
    pub(crate) fn written(&self, group: &str, job: i64) -> bool {
        let mut p = self.lock();
        let released = match p.groups.get_mut(group) {
            Some(g) => {
                g.job = Some(job);
                if g.state == "leasing" {
                    g.state = "leased";
                }
                g.state == "released"
            }
            None => true,
        };
        if !released {
            p.job_groups.insert(job, group.to_string());
        }
        released
    }

    /// A group as `who` may see it.
    pub fn group(&self, who: &Principal, id: &str) -> Result<RecruitGroup, RecruitError> {
        let p = self.lock();
        let g = p.groups.get(id).filter(|g| may_see(who, g)).ok_or(RecruitError::NotFound)?;
        Ok(view(id, g))
    }
}

fn may_see(who: &Principal, g: &Group) -> bool {
    matches!(who, Principal::Admin) || who.submitter() == g.submitter
}

fn view(id: &str, g: &Group) -> RecruitGroup {
    RecruitGroup { group: id.to_string(), job_id: g.job, state: g.state.to_string(), agents: g.agents.clone(), error: g.error.clone() }
}

/// Marks a group `state` and gives its machines back to the recruiter.
fn release_group(p: &mut Pool, id: &str, state: &'static str) -> Vec<MachineId> {
    let Some(g) = p.groups.get_mut(id) else { return Vec::new() };
    if g.state == "released" || g.state == "failed" {
        return Vec::new();
    }
    g.state = state;
    let machines = g.machines.clone();
    if let Some(r) = p.recruiter.as_mut() {
        for m in &machines {
            r.release(*m);
        }
    }
    machines
}

/// Checks a request (each failure names the field and its range).
pub fn validate(req: &RecruitRequest) -> Result<(), RecruitError> {
    let bad = |m: String| Err(RecruitError::Invalid(m));
    if !(1..=1024).contains(&req.k) {
        return bad(format!("k {} is not in 1–1024", req.k));
    }
    if !(1..=86_400).contains(&req.seconds) {
        return bad(format!("seconds {} is not in 1–86400", req.seconds));
    }
    let job = submit_of(req, req.k);
    // The job's own checks (command, args, env, inputs, memory), before anything is lent.
    store::check_job(&job).map(|_| ()).map_err(|e| RecruitError::Invalid(e.to_string()))
}

pub(crate) fn submit_of(req: &RecruitRequest, machines: u32) -> SubmitJob {
    SubmitJob {
        command: req.command.clone(),
        args: req.args.clone(),
        env: req.env.clone(),
        inputs: req.inputs.clone(),
        mem_bytes: req.mem_bytes,
        checkpointable: false,
        program: None,
        machines,
        // A group runs on the machines it was given: a member lost ends it.
        max_retries: Some(0),
        estimate_s: Some(req.seconds as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reserve_is_checked_and_named() {
        assert_eq!(config_with_reserve(20.0).unwrap().reserve_pct, 0.2);
        for bad in [-1.0, 100.0, f64::NAN] {
            let e = config_with_reserve(bad).unwrap_err();
            assert!(e.contains("reserve_pct") && e.contains("0 ≤ x < 100"), "{e}");
        }
    }

    #[test]
    fn a_long_reading_counts_as_that_many_seconds_and_only_the_latest_minute_is_kept() {
        let r = Recruiting::default();
        r.reset(RecruitConfig { idle_load_max: 0.1, reserve_pct: 0.0 });
        let m = MachineId(1);
        r.observe(m, &[LoadReading { cpu_pct: 90, secs: 600 }, LoadReading { cpu_pct: 0, secs: 10 }]);
        r.set_standing(m, "a", "m", "o", 5, true);
        let req = |s: u32| RecruitRequest {
            k: 1,
            seconds: s,
            command: "true".into(),
            args: vec![],
            env: Default::default(),
            inputs: Default::default(),
            mem_bytes: 0,
        };
        // 20-s forecast → window 10: the last 10 s were idle.
        let g = r.grant(&req(20), "x").unwrap();
        assert_eq!(g.machines.len(), 1);
        assert_eq!(g.machines[0].agent_id, "a");
        let id = g.group.unwrap();
        assert_eq!(r.group(&Principal::Admin, &id).unwrap().state, "leasing");
        // Lent: nothing more; a 60-s forecast would see the busy minute anyway.
        assert!(r.grant(&req(20), "x").unwrap().machines.is_empty());
        r.lock().recruiter.as_mut().unwrap().release(m);
        assert!(r.grant(&req(60), "x").unwrap().machines.is_empty());
        r.set_standing(m, "a", "m", "o", 5, false);
        assert_eq!(r.grant(&req(20), "x").unwrap().idle, 0, "no free slot: not even counted idle");
    }
}
