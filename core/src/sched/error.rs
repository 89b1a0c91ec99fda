//! Errors of the scheduler: events that do not match its state, invalid inputs and
//! invalid configuration. An event that returns an error changes nothing.

use super::ids::{JobId, MachineId};

/// Why an event or a configuration was refused. The state is unchanged.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum SchedError {
    /// The job is not held by the scheduler (never submitted, finished or cancelled).
    #[error("{0} is not known to the scheduler")]
    UnknownJob(JobId),
    /// A job with this id is already held.
    #[error("{0} was already submitted")]
    DuplicateJob(JobId),
    /// The machine is not known (never updated, or lost).
    #[error("{0} is not known to the scheduler")]
    UnknownMachine(MachineId),
    /// The job is queued, not running, so it cannot finish, fail or be evicted.
    #[error("{0} is not running")]
    NotRunning(JobId),
    /// The job runs, but has no unfinished member on that machine.
    #[error("{job} has no running member on {machine}")]
    NotRunningOn {
        /// The job.
        job: JobId,
        /// The machine named by the event.
        machine: MachineId,
    },
    /// A submitted job is malformed (the message says how).
    #[error("invalid {job}: {why}")]
    InvalidJob {
        /// The job.
        job: JobId,
        /// What is wrong.
        why: &'static str,
    },
    /// A machine update is malformed (the message says how).
    #[error("invalid update of {machine}: {why}")]
    InvalidMachine {
        /// The machine.
        machine: MachineId,
        /// What is wrong.
        why: &'static str,
    },
    /// A reported number (CPU or wall seconds) is negative or not finite.
    #[error("invalid report for {job}: {why}")]
    InvalidReport {
        /// The job.
        job: JobId,
        /// What is wrong.
        why: &'static str,
    },
    /// The configuration is invalid.
    #[error("invalid scheduler configuration: {0}")]
    InvalidConfig(String),
}
