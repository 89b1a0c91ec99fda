//! What the driver tells the scheduler ([`Event`], fed to
//! [`Scheduler::handle`](super::Scheduler::handle)) and what the scheduler asks back when
//! an event ends part of a job ([`Stop`]).
//!
//! A *task* is one member of a job on one machine. Job-level events about a running job
//! name the member's machine. A gang runs all together or not at all, so when one member
//! fails or is evicted (`TaskEvicted`), the whole job goes back to the queue and `handle`
//! returns a [`Stop`] for each other member still running: the driver must end those
//! leases. A gang member *lost* while the others hold ([`Event::MemberLost`], and a gang
//! member on a machine that leaves, [`Event::MachineLost`]) instead leaves a *vacancy*:
//! the others stay placed (halted by their agents) and the next pass places a
//! replacement for the lost member alone.

use super::ids::{JobId, MachineId};
use super::job::JobSpec;
use super::machine::Machine;
use super::time::Millis;
use serde::{Deserialize, Serialize};

/// An input to the scheduler. Each is applied at the `now` given to `handle`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum Event {
    /// A new job joins the queue (ordered by `submitted_at`, then arrival).
    JobSubmitted(JobSpec),
    /// One member finished normally. The job completes when all members have; its
    /// normtime `Σ S_b · cpu_seconds` (S_b of each member's machine as known now) then
    /// goes into the program's history.
    JobFinished {
        /// The job.
        job: JobId,
        /// The member's machine.
        machine: MachineId,
        /// CPU seconds the member used (user + system).
        cpu_seconds: f64,
        /// Wall-clock seconds the member ran.
        wall_seconds: f64,
    },
    /// A member failed (non-zero exit, crash). The job goes back to the queue at its
    /// original position (before every job submitted after it); `failures` counts up.
    JobFailed {
        /// The job.
        job: JobId,
        /// The member's machine.
        machine: MachineId,
    },
    /// A member was evicted (the owner came back). The job goes back to the queue at its
    /// original position; a checkpointable sequential job keeps `S_b · cpu_seconds` of
    /// credit (see [`super::Job::credited_normtime_s`]).
    TaskEvicted {
        /// The job.
        job: JobId,
        /// The member's machine.
        machine: MachineId,
        /// CPU seconds the member had used when evicted (user + system).
        cpu_seconds: f64,
    },
    /// One member of a running gang was lost (its owner came back and it was evicted, its
    /// lease expired, or it moved away): the others stay placed, halted, and the job gets
    /// a *vacancy* the next pass fills with a replacement on a machine the gang does not
    /// use (see [`super::Scheduler::pass`]). For a sequential job, or a gang with no other
    /// member still running, this is the same as `TaskEvicted`. Counts as an eviction.
    MemberLost {
        /// The job.
        job: JobId,
        /// The lost member's machine.
        machine: MachineId,
        /// CPU seconds the member had used (user + system).
        cpu_seconds: f64,
    },
    /// A memory migration (seed 001, [`super::Scheduler::memory_migration`]) took the
    /// sequential job off `from`: it goes back to the queue at its original position,
    /// needing `working_set` bytes from now on (when it declared none) and placed on `to`
    /// first when that machine can take it. Not an eviction: the owner did not return.
    JobMigrated {
        /// The job.
        job: JobId,
        /// The machine it leaves.
        from: MachineId,
        /// The machine preferred for it.
        to: MachineId,
        /// Its measured working set, bytes (0: unknown).
        working_set: u64,
    },
    /// A gang found halted when the scheduler is (re)built from the driver's records — a
    /// new leader, a restart — with `members` still holding their machines, frozen, and
    /// `vacancies` lost members waiting for a replacement: the state `MemberLost` leaves.
    /// The next pass places the replacements first, as for a gang halted under this
    /// scheduler; without this event a new leader could only hold such a gang as if it
    /// ran whole, and the halt would last until the driver's timeout re-queued it.
    HaltedGangFound {
        /// The job as submitted (`width` counts every member, placed or vacant).
        spec: JobSpec,
        /// The machines of its members still placed (halted), at most one per machine.
        members: Vec<MachineId>,
        /// Lost members not yet replaced (`members.len() + vacancies == spec.width`).
        vacancies: u32,
        /// When the gang first started.
        started_at: Millis,
        /// Since when it has been halted.
        halted_since: Millis,
    },
    /// The job is withdrawn, queued or running.
    JobCancelled {
        /// The job.
        job: JobId,
    },
    /// A full snapshot of a machine's reported state; enrols an unknown machine. A
    /// machine turning ineligible does not evict its guests here: the agent evicts and the
    /// driver reports `TaskEvicted`.
    MachineUpdated(Machine),
    /// The machine left the pool (unenrolled, or silent for too long by the driver's
    /// rule). Its guests' jobs go back to the queue.
    MachineLost {
        /// The machine.
        machine: MachineId,
    },
    /// The machine's agent is alive; see [`Scheduler::stale_machines`](super::Scheduler::stale_machines).
    Heartbeat {
        /// The machine.
        machine: MachineId,
    },
}

/// Why the driver must stop a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopWhy {
    /// Another member of the gang failed, was evicted or was lost; the gang requeued.
    GangRequeued,
    /// The job was cancelled.
    Cancelled,
}

/// A task the driver must stop (end its lease) because of the event just handled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    /// The job.
    pub job: JobId,
    /// The member's machine.
    pub machine: MachineId,
    /// Why.
    pub why: StopWhy,
}
