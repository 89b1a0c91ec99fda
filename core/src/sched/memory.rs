//! Memory-centric load sharing (seed 001): jobs' memory demand is not known in advance,
//! so each machine watches it live and, once its jobs outgrow its memory, blocks new
//! placements and migrates one job away.
//!
//! * **Thresholds** ([`Thresholds`]): CT, the most jobs a machine takes; MT, the oversize
//!   `Q_o = (demand − memory) / memory` it tolerates (best around 0 %, seed 001 §6.2).
//!   A machine accepts work while `Q_o < MT` and it runs fewer than CT jobs ([`accepts`]).
//! * **Which job** ([`job_to_migrate`]): by age, working set, page-fault rate, or the combined
//!   weight of eq. 5 (`weight`: the mean of age, fault rate, working set and I/O rate,
//!   each over its maximum among the machine's jobs). Combined was best overall.
//! * **Where** ([`migration_target`]): the machine with the most free memory among those with
//!   fewer than CT jobs, if it is under MT or its free memory holds the job's working set.
//! * **Paging** ([`paging_rate`]): seed 001's measured model (eq. 1), page faults per
//!   second as a function of the oversize, for drivers that simulate.
//!
//! * **Live reports** ([`MachineMemory`]): what an agent measures of its machine (the
//!   memory its guests may hold, M) and of each guest (a [`JobLoad`]); the scheduler
//!   keeps it with the machine, places nothing where a job would take the oversize to
//!   MT ([`room_under`]) and, when a report shows the machine over MT or under memory
//!   pressure, names one job to move ([`Migration`], `Scheduler::memory_migration`).
//!
//! Pure: the driver measures the jobs and machines and passes them in.

use super::ids::{JobId, MachineId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Migration-choice policies of seed 001 §4.2 / §6.1 (`[scheduler] migration_choice`:
/// `age`, `worksize`, `pf-rate` or `combined`, the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Choice {
    /// The oldest job (it is likely to run longest, so the move pays).
    #[serde(rename = "age")]
    Age,
    /// The largest working set (frees the most memory).
    #[serde(rename = "worksize")]
    WorkingSet,
    /// The highest page-fault rate.
    #[serde(rename = "pf-rate")]
    PageFaultRate,
    /// The highest combined weight of eq. 5 (best overall in seed 001 §6.1).
    #[default]
    #[serde(rename = "combined")]
    Combined,
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Choice {
    type Err = String;

    /// The paper's short name; anything else is refused with the names allowed.
    fn from_str(s: &str) -> Result<Choice, String> {
        Choice::ALL
            .into_iter()
            .find(|c| c.name() == s.trim())
            .ok_or_else(|| format!("migration_choice {s:?} is not one of age, worksize, pf-rate, combined"))
    }
}

impl Choice {
    /// All four, in the paper's order.
    pub const ALL: [Choice; 4] = [Choice::PageFaultRate, Choice::WorkingSet, Choice::Age, Choice::Combined];

    /// The paper's short name.
    pub fn name(self) -> &'static str {
        match self {
            Choice::Age => "age",
            Choice::WorkingSet => "worksize",
            Choice::PageFaultRate => "pf-rate",
            Choice::Combined => "combined",
        }
    }
}

/// What a machine measures of one of its jobs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobLoad {
    /// The job.
    pub job: JobId,
    /// Seconds it has run.
    pub age_s: f64,
    /// Memory it holds now, bytes.
    pub working_set: u64,
    /// Its major page faults per second.
    pub fault_rate: f64,
    /// Its reads and writes per second.
    pub io_rate: f64,
}

/// What a machine measures of itself.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HostLoad {
    /// The machine.
    pub machine: MachineId,
    /// Jobs it runs.
    pub jobs: usize,
    /// Memory available to jobs, bytes.
    pub memory: u64,
    /// Memory the jobs demand (sum of working sets), bytes.
    pub demand: u64,
}

impl HostLoad {
    /// `Q_o`: how far the demand exceeds the memory, as a fraction of it (negative when
    /// it fits).
    pub fn oversize(&self) -> f64 {
        oversize(self.demand, self.memory)
    }
    /// Memory not demanded, bytes.
    pub(crate) fn free(&self) -> u64 {
        self.memory.saturating_sub(self.demand)
    }
}

/// A machine's thresholds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Thresholds {
    /// CT: the most jobs it takes.
    pub ct: usize,
    /// MT: the oversize tolerated, as a fraction (0.0 = demand may reach the memory).
    pub mt: f64,
}

/// `Q_o = (demand − memory) / memory`; a machine with no memory counts as fully oversized.
pub fn oversize(demand: u64, memory: u64) -> f64 {
    if memory == 0 {
        return f64::INFINITY;
    }
    (demand as f64 - memory as f64) / memory as f64
}

/// Whether the machine takes a new job: `Q_o < MT` and fewer than CT jobs.
pub fn accepts(host: &HostLoad, th: Thresholds) -> bool {
    host.oversize() < th.mt && host.jobs < th.ct
}

/// Whether the machine must shed a job: its oversize reached MT with page faults
/// possible (`Q_o ≥ MT` and `Q_o > 0`, or `Q_o ≥ MT` for a negative MT, which warns
/// before faults), or it runs more than CT jobs.
pub fn overloaded(host: &HostLoad, th: Thresholds) -> bool {
    let q = host.oversize();
    (q >= th.mt && (q > 0.0 || th.mt < 0.0)) || host.jobs > th.ct
}

/// Eq. 5: `¼ (Age/max Age + R_p/max R_p + WS/max WS + N_io/max N_io)` of `jobs[i]`
/// among `jobs` (a term whose maximum is 0 contributes 0).
pub(crate) fn weight(jobs: &[JobLoad], i: usize) -> f64 {
    let max = |f: fn(&JobLoad) -> f64| jobs.iter().map(f).fold(0.0, f64::max);
    let part = |v: f64, m: f64| if m > 0.0 { v / m } else { 0.0 };
    let j = &jobs[i];
    (part(j.age_s, max(|j| j.age_s))
        + part(j.fault_rate, max(|j| j.fault_rate))
        + part(j.working_set as f64, max(|j| j.working_set as f64))
        + part(j.io_rate, max(|j| j.io_rate)))
        / 4.0
}

/// The job to migrate off a machine under `choice`: the highest age, working set,
/// fault rate or weight; ties to the lower job id. `None` without jobs.
pub fn job_to_migrate(jobs: &[JobLoad], choice: Choice) -> Option<JobId> {
    let key = |i: usize| -> f64 {
        let j = &jobs[i];
        match choice {
            Choice::Age => j.age_s,
            Choice::WorkingSet => j.working_set as f64,
            Choice::PageFaultRate => j.fault_rate,
            Choice::Combined => weight(jobs, i),
        }
    };
    (0..jobs.len()).max_by(|a, b| key(*a).total_cmp(&key(*b)).then(jobs[*b].job.cmp(&jobs[*a].job))).map(|i| jobs[i].job)
}

/// Where to move a job of working set `ws` (or, with `ws = None`, where to submit a new
/// job remotely): the machine with the most free memory among those with fewer than CT
/// jobs, other than `from`; it qualifies if under MT or (for a migration) its free memory
/// holds `ws`. Ties to the lower machine id.
pub fn migration_target(hosts: &[HostLoad], th: Thresholds, ws: Option<u64>, from: Option<MachineId>) -> Option<MachineId> {
    let k = hosts
        .iter()
        .filter(|h| Some(h.machine) != from && h.jobs < th.ct)
        .max_by(|a, b| a.free().cmp(&b.free()).then(b.machine.cmp(&a.machine)))?;
    let fits = ws.is_some_and(|w| k.free() > w);
    (k.oversize() < th.mt || fits).then_some(k.machine)
}

/// A machine's live memory report, as its agent measured it (seed 001 §4.1: demand is
/// not known in advance, so it is watched).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MachineMemory {
    /// M: bytes the guests may hold in all now — what they hold plus what the owner can
    /// spare (available memory, reclaimable cache counted, beyond the owner's reserve),
    /// at most the owner's share for guests.
    pub guest_memory: u64,
    /// Each running guest's job with its measured working set, fault rate, age and I/O.
    pub guests: Vec<JobLoad>,
    /// The agent's own memory guard reports pressure (it froze its guests for the
    /// owner's memory stall).
    pub pressure: bool,
}

impl MachineMemory {
    /// The measured load of `job`'s guest here, if the report has it.
    pub(crate) fn job(&self, job: JobId) -> Option<&JobLoad> {
        self.guests.iter().find(|g| g.job == job)
    }
}

/// The most bytes a new job may add to a machine holding `demand` of `memory` while its
/// oversize stays below `mt` (`Q_o(demand + need) < MT`); `None` when even a job needing
/// nothing would not (the machine is at or over MT).
pub fn room_under(mt: f64, memory: u64, demand: u64) -> Option<u64> {
    let limit = (1.0 + mt) * memory as f64;
    let gap = limit - demand as f64;
    if gap.is_nan() || gap <= 0.0 {
        return None;
    }
    // The largest whole n with demand + n < limit.
    Some((gap.ceil() - 1.0).max(0.0).min(u64::MAX as f64) as u64)
}

/// A memory-centric move decided by the scheduler: `job` leaves `from` (over MT or under
/// memory pressure) for `to` (the machine with the most free memory below CT).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Migration {
    /// The job moved.
    pub job: JobId,
    /// The machine it leaves.
    pub from: MachineId,
    /// The machine it is moved to (preferred when it is placed again).
    pub to: MachineId,
    /// The rule that chose it.
    pub choice: Choice,
    /// `Q_o` of `from` when it was chosen.
    pub oversize: f64,
    /// MT in force.
    pub threshold: f64,
    /// `from` reported memory pressure.
    pub pressure: bool,
    /// The job's measured working set, bytes (its memory need from now on).
    pub working_set: u64,
    /// Bytes free for guests on `to` before the move (M − demand).
    pub target_free: u64,
}

impl Migration {
    /// The sentence for logs and the job's placement reason, naming the machines `from`
    /// and `to` as the driver knows them.
    pub fn describe(&self, from: &str, to: &str) -> String {
        let why = if self.pressure && self.oversize < self.threshold {
            "it reported memory pressure".to_string()
        } else {
            format!("its oversize Q_o {:+.1} % reached MT {:+.1} %", self.oversize * 100.0, self.threshold * 100.0)
        };
        format!(
            "memory migration (seed 001): moved off {from} because {why}; chosen by {} (working set {} MiB); to {to}, the machine with the most free memory below CT ({} MiB free)",
            self.choice,
            self.working_set >> 20,
            self.target_free >> 20
        )
    }
}

impl fmt::Display for Migration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe(&self.from.to_string(), &self.to.to_string()))
    }
}

/// Seed 001 eq. 1: page faults per second at oversize `q` (a fraction), `R_max −
/// α / (β q² + γ q + δ)` with the paper's fit (R_max 120, α 4, β 0.31, γ 0.19, δ 0.034),
/// 0 when the demand fits and never below 0.
pub fn paging_rate(q: f64) -> f64 {
    if q.is_nan() || q <= 0.0 {
        return 0.0;
    }
    (120.0 - 4.0 / (0.31 * q * q + 0.19 * q + 0.034)).clamp(0.0, 120.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(id: u64, age: f64, ws_mb: u64, pf: f64, io: f64) -> JobLoad {
        JobLoad { job: JobId(id), age_s: age, working_set: ws_mb << 20, fault_rate: pf, io_rate: io }
    }

    #[test]
    fn each_choice_picks_its_own_maximum() {
        let jobs = [job(1, 500.0, 10, 0.0, 1.0), job(2, 10.0, 60, 5.0, 0.0), job(3, 100.0, 20, 40.0, 50.0)];
        assert_eq!(job_to_migrate(&jobs, Choice::Age), Some(JobId(1)));
        assert_eq!(job_to_migrate(&jobs, Choice::WorkingSet), Some(JobId(2)));
        assert_eq!(job_to_migrate(&jobs, Choice::PageFaultRate), Some(JobId(3)));
        // Weights: 1 → (1 + 0 + 1/6 + 0.02)/4 ≈ 0.30; 2 → (0.02 + 0.125 + 1 + 0)/4 ≈ 0.29;
        // 3 → (0.2 + 1 + 1/3 + 1)/4 ≈ 0.63.
        assert!((weight(&jobs, 2) - (0.2 + 1.0 + 20.0 / 60.0 + 1.0) / 4.0).abs() < 1e-12);
        assert_eq!(job_to_migrate(&jobs, Choice::Combined), Some(JobId(3)));
        assert_eq!(job_to_migrate(&[], Choice::Combined), None);
        // Ties go to the lower id.
        assert_eq!(job_to_migrate(&[job(7, 1.0, 1, 0.0, 0.0), job(4, 1.0, 1, 0.0, 0.0)], Choice::Age), Some(JobId(4)));
    }

    #[test]
    fn thresholds_block_and_shed() {
        let th = Thresholds { ct: 4, mt: 0.0 };
        let h = |jobs, demand_mb: u64| HostLoad { machine: MachineId(1), jobs, memory: 100 << 20, demand: demand_mb << 20 };
        assert!(accepts(&h(3, 99), th));
        assert!(!accepts(&h(3, 100), th), "Q_o = 0 reaches MT = 0");
        assert!(!accepts(&h(4, 10), th), "CT reached");
        assert!(!overloaded(&h(3, 100), th), "demand that just fits pages nothing");
        assert!(overloaded(&h(3, 101), th));
        assert!(overloaded(&h(5, 10), th));
        // A negative MT warns before faults.
        assert!(overloaded(&h(1, 96), Thresholds { ct: 4, mt: -0.05 }));
    }

    #[test]
    fn the_target_has_most_free_memory_and_room() {
        let th = Thresholds { ct: 2, mt: 0.0 };
        let hosts = [
            HostLoad { machine: MachineId(1), jobs: 1, memory: 100, demand: 90 },
            HostLoad { machine: MachineId(2), jobs: 2, memory: 100, demand: 0 }, // full (CT)
            HostLoad { machine: MachineId(3), jobs: 1, memory: 100, demand: 40 },
        ];
        assert_eq!(migration_target(&hosts, th, Some(30), Some(MachineId(1))), Some(MachineId(3)));
        assert_eq!(migration_target(&hosts, th, None, None), Some(MachineId(3)));
        assert_eq!(migration_target(&hosts, th, Some(30), Some(MachineId(3))), Some(MachineId(1)));
        let over = [HostLoad { machine: MachineId(9), jobs: 0, memory: 100, demand: 120 }];
        assert_eq!(migration_target(&over, th, Some(10), None), None);
    }

    #[test]
    fn paging_follows_the_papers_curve() {
        assert_eq!(paging_rate(-0.1), 0.0);
        assert_eq!(paging_rate(0.0), 0.0);
        let a = paging_rate(0.05);
        let b = paging_rate(0.25);
        let c = paging_rate(0.65);
        assert!(a < b && b < c && c < 120.0, "{a} {b} {c}");
        assert!(c > 100.0, "near R_max at 65 % oversize: {c}");
    }
}
