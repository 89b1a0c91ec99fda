//! The coordinator's operations on the database (keys, tokens and enrolment are in
//! [`crate::identity`], jobs as people read them in [`job_view`]), by concern:
//! [`agents`] (machines, heartbeat snapshots written in batches), [`jobs`] (submit,
//! cancel), [`tasks`] (leases with expiry, re-queueing, idempotent completion, bounded
//! retries, checkpoints), [`gangs`] (how a rank's loss moves its peers), [`records`]
//! (ledger records, idempotent on agent and sequence), and [`common`] (the error, the
//! clock, checks, statement chunking).
//!
//! Every state change is one conditional statement or one transaction, so it is safe
//! with several replicas on one PostgreSQL: a task changes hands only through an
//! `UPDATE … WHERE state = … AND lease_epoch = …` that at most one caller can win.

pub mod agents;
pub mod common;
pub mod gangs;
pub mod job_view;
pub mod jobs;
pub mod records;
pub mod tasks;

pub use agents::{flush_snapshots, list_agents, remove_agent, Snapshot};
pub use common::{check_text, day_of, now_ms, retry_transient, StoreError};
pub(crate) use common::{id_list, placeholders};
pub use gangs::resolve_halts;
pub(crate) use jobs::insert_job_in;
pub use jobs::{cancel, cancel_job, check_job, submit};
pub use records::{ingest, machine_facts};
pub use tasks::{
    complete, gang, get_checkpoint, give_back_all, lease_facts, migrate_task, progress, put_checkpoint, release, requeue_expired, GiveBack,
};
