//! What a pass decides: [`Assignment`]s, each with the algorithm and a human-readable
//! [`Reason`] (the driver turns each into leases, one per machine), and Backfill's
//! [`Reservation`] for the blocked head job (see `backfill.rs`).

use super::config::Algorithm;
use super::ids::{JobId, MachineId};
use super::predict::Prediction;
use super::time::Millis;
use serde::{Deserialize, Serialize};
use std::fmt;

/// One job started by a pass, or (reason [`Reason::ReplacesLostMembers`]) the
/// replacements of a running gang's lost members.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assignment {
    /// The job.
    pub job: JobId,
    /// One machine per member started, distinct, fastest first (for a replacement: one
    /// per lost member, none of them a machine the gang still uses).
    pub machines: Vec<MachineId>,
    /// The algorithm that chose the job.
    pub algorithm: Algorithm,
    /// Why this job, now.
    pub reason: Reason,
    /// The normtime prediction used.
    pub prediction: Prediction,
    /// Predicted wall time on these machines, seconds.
    pub predicted_runtime_s: f64,
    /// `now + predicted_runtime_s`, rounded up to the millisecond.
    pub predicted_end: Millis,
}

impl Assignment {
    /// Whether this places replacements for a running gang's lost members (rather than
    /// starting a queued job).
    pub fn is_replacement(&self) -> bool {
        matches!(self.reason, Reason::ReplacesLostMembers { .. })
    }
}

/// Why a pass started a job. `Display` gives the sentence for logs and the dashboard.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Reason {
    /// FIFO: the job at the head of the queue fits.
    FifoHead,
    /// FirstFit: the first job in arrival order that fits.
    FirstFit {
        /// Earlier waiting jobs this pass passed over because they did not fit.
        passed_over: u32,
    },
    /// Random: drawn uniformly among the waiting jobs that fit.
    Random,
    /// SPT: the shortest predicted processing time among the waiting jobs.
    ShortestFirst {
        /// Its predicted normtime, seconds.
        normtime_s: f64,
    },
    /// LPT: the longest predicted processing time among the waiting jobs.
    LongestFirst {
        /// Its predicted normtime, seconds.
        normtime_s: f64,
    },
    /// Backfill: the job is next in FIFO order and fits.
    InOrder,
    /// Backfill: predicted to end before the head job's reservation.
    EndsBeforeReservation {
        /// The blocked head job.
        head: JobId,
        /// Its reservation.
        reservation: Millis,
        /// This job's predicted end.
        predicted_end: Millis,
    },
    /// Backfill: uses only machines the head job will not need at its reservation.
    OffReservedMachines {
        /// The blocked head job.
        head: JobId,
        /// Its reservation.
        reservation: Millis,
    },
    /// Backfill: the head job cannot fit even when every running job has ended (the
    /// pool is too small for it now), so there is nothing to hold back for it.
    HeadCannotFit {
        /// The blocked head job.
        head: JobId,
    },
    /// A running gang lost members and its others are halted: these machines replace
    /// the lost ones (placed before any queued job, whatever the algorithm, since the
    /// halted members hold their machines idle meanwhile). The assignment's machines are
    /// the replacements only.
    ReplacesLostMembers {
        /// Members still placed and halted, waiting for these.
        halted: u32,
    },
    /// Not placed by this scheduler: found running (a halted gang) when it was rebuilt
    /// from the driver's records (see [`super::Event::HaltedGangFound`]).
    FoundAtRebuild,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::FifoHead => f.write_str("fifo head"),
            Reason::FirstFit { passed_over: 0 } => f.write_str("first fit: the first waiting job"),
            Reason::FirstFit { passed_over } => write!(f, "first fit: {passed_over} earlier waiting job(s) did not fit"),
            Reason::Random => f.write_str("random: drawn among the waiting jobs that fit"),
            Reason::ShortestFirst { normtime_s } => write!(f, "shortest predicted processing time first ({normtime_s:.0} s)"),
            Reason::LongestFirst { normtime_s } => write!(f, "longest predicted processing time first ({normtime_s:.0} s)"),
            Reason::InOrder => f.write_str("backfill: next in fifo order"),
            Reason::EndsBeforeReservation { head, reservation, predicted_end } => {
                write!(f, "backfilled: predicted to end at {predicted_end}, before the reservation of {head} at {reservation}")
            }
            Reason::OffReservedMachines { head, reservation } => {
                write!(f, "backfilled: uses only machines {head} will not need at its reservation at {reservation}")
            }
            Reason::ReplacesLostMembers { halted } => {
                write!(f, "replaces lost gang member(s): {halted} halted member(s) resume when it runs")
            }
            Reason::FoundAtRebuild => f.write_str("found running when the scheduler was rebuilt"),
            Reason::HeadCannotFit { head } => {
                write!(f, "backfilled: {head} cannot fit on the pool even when every running job ends, so nothing is held back for it")
            }
        }
    }
}

/// The blocked head job's reservation, as computed by the last Backfill pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reservation {
    /// The head job.
    pub head: JobId,
    /// When it is predicted to be able to start.
    pub at: Millis,
    /// The machines it would get then, in placement order (one per member).
    pub machines: Vec<MachineId>,
    /// The pass that computed it.
    pub computed_at: Millis,
}
