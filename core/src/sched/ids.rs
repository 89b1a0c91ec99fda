//! The scheduler's ids: [`JobId`] and [`MachineId`], the coordinator's numbers for a job
//! and an enrolled machine. They name things in every other file of `sched/`, so this
//! file imports nothing of the scheduler.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A job's id, allocated by the coordinator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct JobId(pub u64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "job {}", self.0)
    }
}

/// A machine's id, allocated by the coordinator at enrolment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MachineId(pub u64);

impl fmt::Display for MachineId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "machine {}", self.0)
    }
}
