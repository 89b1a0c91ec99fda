//! Jobs: what a job author submits ([`JobSpec`]) and what the scheduler keeps about it
//! ([`Job`], [`RunningJob`]).
//!
//! A job is *sequential* (width 1) or a *gang* (width k > 1): all k members start
//! together, each on a distinct machine, or none starts. A job is identified across runs
//! of the same program by its *program identifier*, the program's name without a leading
//! path or arguments, as in WINNER (seed 002 §4.2); [`program_id`] derives it from a
//! command line. Runtime history is kept per program identifier (see [`super::predict`]).

use super::assignment::Reason;
use super::config::Algorithm;
use super::ids::{JobId, MachineId};
use super::predict::Prediction;
use super::time::Millis;
use serde::{Deserialize, Serialize};

/// What a job author submits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// The job's id (unique among the jobs the scheduler holds).
    pub id: JobId,
    /// The program identifier: the program's name without path or arguments
    /// (see `program_id`). Runtime history is keyed by it.
    pub program: String,
    /// Number of members: 1 for a sequential job, k > 1 for a gang.
    pub width: u32,
    /// Memory each member needs, in bytes; `None` places without a memory check.
    #[serde(default)]
    pub memory_per_member: Option<u64>,
    /// When the job was submitted. The queue is ordered by (`submitted_at`, order of
    /// arrival at the scheduler).
    pub submitted_at: Millis,
    /// The author's runtime estimate in seconds of wall time on an idle reference machine
    /// (base speed 1.0). Used only while the program has no history.
    #[serde(default)]
    pub user_estimate_s: Option<f64>,
    /// The job can resume from a checkpoint after an eviction (see
    /// [`Job::credited_normtime_s`]).
    #[serde(default)]
    pub checkpointable: bool,
}

impl JobSpec {
    /// A sequential job with no memory need, no estimate, not checkpointable.
    pub fn sequential(id: u64, program: impl Into<String>, submitted_at: Millis) -> JobSpec {
        JobSpec {
            id: JobId(id),
            program: program.into(),
            width: 1,
            memory_per_member: None,
            submitted_at,
            user_estimate_s: None,
            checkpointable: false,
        }
    }

    /// The same job with `width` members (a gang when `width > 1`).
    pub fn with_width(mut self, width: u32) -> JobSpec {
        self.width = width;
        self
    }

    /// The same job needing `bytes` of free memory per member.
    pub fn with_memory(mut self, bytes: u64) -> JobSpec {
        self.memory_per_member = Some(bytes);
        self
    }

    /// The same job with the author's runtime estimate (seconds on a speed-1.0 machine).
    pub fn with_estimate(mut self, secs: f64) -> JobSpec {
        self.user_estimate_s = Some(secs);
        self
    }

    /// The same job, marked checkpointable.
    pub fn checkpointable(mut self) -> JobSpec {
        self.checkpointable = true;
        self
    }

    /// Memory per member in bytes, 0 when none was given.
    pub fn memory_needed(&self) -> u64 {
        self.memory_per_member.unwrap_or(0)
    }
}

/// The program identifier of a command line: its first word with any leading path
/// removed (`"/usr/bin/povray -W800 scene.pov"` → `"povray"`), as WINNER identifies jobs
/// (seed 002 §4.2). An empty command gives an empty string.
#[cfg(test)]
pub(crate) fn program_id(command: &str) -> String {
    let first = command.split_whitespace().next().unwrap_or("");
    first.rsplit(['/', '\\']).next().unwrap_or("").to_string()
}

/// A job the scheduler holds: queued (`running == None`) or running.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Job {
    /// What was submitted.
    pub spec: JobSpec,
    /// How many times it failed (`Event::JobFailed`) and went back to the queue.
    pub failures: u32,
    /// How many times it was evicted or lost with its machine and went back to the queue.
    pub evictions: u32,
    /// Normtime (seconds at base speed 1.0) already done and kept by checkpoints: for a
    /// checkpointable sequential job, each eviction adds `S_b × cpu_seconds` of the run
    /// it ended. It shortens the next prediction and counts in the job's final normtime.
    pub credited_normtime_s: f64,
    /// Present while the job runs (boxed: most held jobs are queued, and a pass writes a
    /// new run to fresh memory rather than into the job table).
    pub running: Option<Box<RunningJob>>,
    /// The largest working set its machines' memory reports measured in its last run,
    /// bytes (seed 001: demand is learnt live). A job with no declared memory needs this
    /// much when it is placed again.
    pub last_working_set: Option<u64>,
    /// How many times a memory migration moved it.
    pub migrations: u32,
    /// The machine a memory migration chose for it: tried first when it is placed again.
    pub prefer: Option<MachineId>,
    /// The machine a memory migration took it off: not used when it is placed again
    /// (empty, that machine could take it back and be over MT again).
    pub avoid: Option<MachineId>,
}

impl Job {
    /// A newly submitted job.
    pub(crate) fn new(spec: JobSpec) -> Job {
        Job {
            spec,
            failures: 0,
            evictions: 0,
            credited_normtime_s: 0.0,
            running: None,
            last_working_set: None,
            migrations: 0,
            prefer: None,
            avoid: None,
        }
    }

    /// The job's id.
    pub fn id(&self) -> JobId {
        self.spec.id
    }

    /// Memory one member needs to be placed, bytes: the declared need, else the working
    /// set last measured (a job that ran), else 0.
    pub fn memory_need(&self) -> u64 {
        self.spec.memory_per_member.or(self.last_working_set).unwrap_or(0)
    }
}

/// One member of a running job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Member {
    /// The machine the member runs on.
    pub machine: MachineId,
    /// The member reported `JobFinished`.
    pub finished: bool,
}

/// A job's current run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunningJob {
    /// One entry per member, in placement order (fastest machine first).
    pub members: Vec<Member>,
    /// When the pass placed it.
    pub started_at: Millis,
    /// The prediction the pass used.
    pub prediction: Prediction,
    /// Predicted wall-clock runtime on its machines, seconds; raised when outlived
    /// (see [`super::predict::corrected_runtime`]).
    pub predicted_runtime_s: f64,
    /// `started_at + predicted_runtime_s`, rounded up to the millisecond.
    pub predicted_end: Millis,
    /// The runtime predicted at placement, before any correction (scored at the end).
    pub initial_runtime_s: f64,
    /// How many times the prediction was raised because the job outlived it.
    pub corrections: u32,
    /// The algorithm that placed it.
    pub algorithm: Algorithm,
    /// Why it was placed.
    pub reason: Reason,
    /// Σ `S_b × cpu_seconds` of the members finished so far (seed 002 eq. 4).
    pub normtime_so_far_s: f64,
    /// Longest wall time reported by a finished member, seconds.
    pub wall_s: f64,
    /// Members of a gang lost while the others ran (`Event::MemberLost`), not yet
    /// replaced: their slots wait for a pass to place a replacement (see
    /// [`super::Scheduler::pass`]); meanwhile the remaining members are halted (their
    /// agents freeze them). 0 for a job running whole.
    pub vacancies: u32,
    /// Since when the gang has been halted waiting for replacements (`None`: not halted).
    pub halted_since: Option<Millis>,
    /// Memory per member it was placed with ([`Job::memory_need`] then), bytes: what its
    /// machines count as in use for it until it ends.
    pub memory_per_member: u64,
}

impl RunningJob {
    /// Machines of members still running.
    pub fn unfinished_machines(&self) -> impl Iterator<Item = MachineId> + '_ {
        self.members.iter().filter(|m| !m.finished).map(|m| m.machine)
    }

    /// Whether the job waits for replacements of lost members (its others halted).
    pub fn halted(&self) -> bool {
        self.vacancies > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_id_strips_path_and_args() {
        assert_eq!(program_id("/usr/bin/povray -W800 scene.pov"), "povray");
        assert_eq!(program_id("  pi 20000"), "pi");
        assert_eq!(program_id("./sim"), "sim");
        assert_eq!(program_id(r"C:\tools\mandel.exe"), "mandel.exe");
        assert_eq!(program_id(""), "");
    }
}
