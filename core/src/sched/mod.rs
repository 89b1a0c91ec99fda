//! The coordinator's scheduler: which queued job starts on which donated machines.
//!
//! Pure: no IO, no clock, no threads, no OS randomness. Time comes in as [`Millis`]
//! (milliseconds since the Unix epoch, chosen by the driver: the coordinator's clock or a
//! simulator's virtual time); durations are seconds as `f64`.
//!
//! # Model
//! * **Jobs** ([`JobSpec`]): sequential (width 1) or gangs (width k > 1, all members at
//!   once on k distinct machines, or none), identified for runtime history by their
//!   program name (`program_id`).
//! * **Machines** ([`Machine`]): base speed `S_b`, owner load, free memory, the owner's
//!   interruptions left today, allowed/available flags, idle-since, slots.
//! * **Events** ([`Event`]) go in through [`Scheduler::handle`]; a **pass**
//!   ([`Scheduler::pass`]) returns [`Assignment`]s and marks those jobs running.
//! * **Algorithms** ([`Algorithm`]): the six of seed 002 — FIFO, FirstFit, Random, SPT,
//!   LPT and FIFO with backfilling (the default) — choose *which* job; **placement**
//!   (`placement`) is shared: greedy, fastest effective speed `S_b × (1 − load)` first,
//!   ties to more interruptions left, then longer idle, then lower id; never on a machine
//!   that is unavailable, not allowed, out of interruption budget, full or short of memory.
//! * **Prediction** ([`Predictor`], `predict.rs`): normtime `Σ S_b · cpu_seconds` per finished job,
//!   last-two average per program, runtime `T_norm / (n · S_min)`, doubled when outlived,
//!   error tracked per program ([`ProgramStats`]).
//! * **Instant recruitment** ([`Recruiter`], seed 003): up to K machines predicted idle
//!   for S seconds by a windowed mean of recent load, keeping a reserve back.
//! * **Memory-centric choice** (`memory.rs`, seed 001): which job to migrate off a
//!   machine whose jobs outgrew its memory ([`job_to_migrate`]), and where to
//!   ([`migration_target`]).
//! * **Lingering migration** ([`decide_migration`], seed 000 §5.2): whether to move a task whose
//!   agent asks (its owner is back and it lingers): a free machine, and sooner there.
//! * **Gangs that hold**: a gang member lost while the others run leaves a vacancy
//!   (`Event::MemberLost`); the others stay placed, halted, and the next pass places the
//!   replacement alone, before any queued job ([`Reason::ReplacesLostMembers`]).
//! * **Memory-centric placement and migration** (`memory.rs`, seed 001): machines with a
//!   live memory report ([`Machine::memory`]) take no job that would bring their
//!   oversize to MT (`memory_threshold`); a job with no declared memory needs its last
//!   measured working set once it has run; [`Scheduler::memory_migration`] names the
//!   job to move off a machine over MT or under pressure (`migration_choice`) and where
//!   to, and `Event::JobMigrated` re-queues it preferring that machine.
//!
//! # Driving it
//! ```
//! use lull_core::sched::*;
//! let mut s = Scheduler::new(SchedConfig::default()).unwrap();
//! let t0 = Millis::from_secs(1_700_000_000);
//! s.handle(t0, Event::MachineUpdated(Machine::new(1, "ada", 1.5))).unwrap();
//! s.handle(t0, Event::JobSubmitted(JobSpec::sequential(7, "povray", t0).with_estimate(60.0))).unwrap();
//! let a = s.pass(t0);
//! assert_eq!(a[0].machines, vec![MachineId(1)]);
//! assert_eq!(a[0].predicted_runtime_s, 40.0); // 60 s at speed 1 on a speed-1.5 machine
//! let t1 = Millis::from_secs(1_700_000_041);
//! s.handle(t1, Event::JobFinished { job: JobId(7), machine: MachineId(1), cpu_seconds: 41.0, wall_seconds: 41.0 }).unwrap();
//! assert_eq!(s.predictor().history("povray").unwrap().last_two_average(), Some(61.5));
//! ```
//! The driver feeds every event as it learns it (with its own `now`), runs a pass after
//! any event that can free capacity or add work (submission, finish, failure, eviction,
//! machine update) and at least periodically (a pass also corrects outlived predictions),
//! and turns each assignment into one lease per machine. Passes are cheap: see
//! `benches/sched.rs`.

#![deny(missing_docs)]

mod assignment;
mod backfill;
mod config;
mod error;
mod event;
mod free;
mod hash;
mod ids;
mod job;
mod machine;
mod memory;
mod migrate;
mod pass;
mod placement;
mod predict;
mod queue;
mod recruit;
mod rng;
mod scheduler;
mod time;

// The façade: the file modules are private; what other crates (and this crate's tests and
// benches) name, or a public signature shows, is re-exported here. The rest is
// `pub(crate)` or private.
pub use assignment::{Assignment, Reason, Reservation};
pub use config::{check_memory_threshold, Algorithm, PredictConfig, SchedConfig, DEFAULT_MEMORY_THRESHOLD};
pub use error::SchedError;
pub use event::{Event, Stop, StopWhy};
pub use ids::{JobId, MachineId};
pub use job::{Job, JobSpec, Member, RunningJob};
pub use machine::Machine;
pub use memory::{
    accepts, job_to_migrate, migration_target, overloaded, oversize, paging_rate, room_under, Choice, HostLoad, JobLoad, MachineMemory,
    Migration, Thresholds,
};
pub use migrate::{decide_migration, MigrateAsk, MigrateDecision, StayWhy};
pub use placement::{check_eligible, placement_order, rank_key, rank_machines, Ineligible, RankKey};
pub use predict::{
    corrected_runtime, normtime, predicted_runtime_s, Prediction, PredictionSource, Predictor, ProgramHistory, ProgramStats,
};
pub use recruit::{window_for, Grant, RecruitConfig, Recruiter, Request, HISTORY};
pub use rng::SplitMix64;
pub use scheduler::Scheduler;
pub use time::Millis;
