//! Lull's simulator: the pure core's policy and scheduler, unchanged, driven in virtual
//! time by owner-activity traces and job streams.
//!
//! * Traces: [`trace`] (the agent's ledger trace, exported as CSV), [`fta`] (the Failure
//!   Trace Archive's `event_trace`), [`swf`] (the Standard Workload Format for job
//!   streams) and [`gen`] (a seeded generator whose statistics come from the seeds).
//! * [`driver`]: per machine a `lull_core::policy::Policy` stepped at each sample, one
//!   `lull_core::sched::Scheduler` for the pool, guests progressing at their machine's
//!   speed in virtual time.
//! * [`dispatch`]: seed 000 §5.1's node-level model of a lingering guest beside the
//!   owner's run and idle bursts (the owner's delay at dispatch granularity).
//! * [`experiments`]: the seeds' experiments as named runs, each producing a
//!   [`Report`] (Markdown with the paper's figures beside ours, plus SVG plots).
//!   [`run_experiment`] is the entry point the CLI (`lull sim`) calls.
//!
//! Every run is reproducible from its seed.

// Product code handles its errors; `.unwrap()` is for tests (clippy.toml allows it there).
#![warn(clippy::unwrap_used)]

pub mod dispatch;
pub mod driver;
pub mod error;
pub mod experiments;
pub mod fta;
pub mod gen;
pub mod input;
pub mod parallel;
pub mod rng;
pub mod swf;
pub mod trace;

pub use error::{Result, SimError, TraceError};
pub use experiments::{run_experiment, Inputs, JobLog, Options, OwnerLog, Report, Scale, DEFAULT_SEEDS, EXPERIMENTS};
