//! The agent's side of the coordinator protocol (HTTP/JSON over reqwest with rustls):
//! enrolment with a join token, heartbeats carrying the policy state, availability,
//! budget left, free memory and the speeds `S_b`/`S_c`, and the idempotent sync of the
//! ledger's outbox — records are sent in sequence order, marked sent only after the
//! coordinator acknowledged them, and the coordinator stores each (agent, sequence) once,
//! so a crash, a lost answer or a long disconnection neither loses nor doubles any.
//!
//! [`run_link`] is the loop an agent process runs beside its driver: it asks the
//! driver's status and reads the outbox through its one in-process handle to the driver
//! ([`crate::driver_link::DriverHandle`]), so the driver's ledger is the only one open.
//! Through the same handle, the link also leases tasks while the policy accepts
//! guest work and hands each to the driver to run as a guest, renewing the lease while
//! it runs and reporting `complete` (exit code, the guest's CPU from its final ledger
//! totals) or `evicted` when it ends. Around that it moves checkpoints (a checkpointable
//! guest writes its state to `$LULL_CHECKPOINT`; the link uploads it with each renewal
//! and after an eviction, and downloads the last one before a new lease starts), stops
//! the guest when its job is cancelled or its lease lost, holds a gang member back
//! until every rank of its gang is leased, and asks the coordinator to migrate a
//! lingering guest when the driver says it is time (seed 000 §5.2, [`ask_migration`]).
//!
//! The request and answer bodies are the `lull-protocol` types the coordinator serves.
//!
//! By concern: [`http`] the client and its calls, [`machine`] what a heartbeat says of
//! this machine, [`guest_io`] a task's guest spec and output, [`task`] the task runner,
//! [`checkpoints`], [`gang`] and [`lease`] its steps, [`link`] the link loop.

pub mod checkpoints;
pub mod gang;
pub mod guest_io;
pub mod http;
pub mod lease;
pub mod link;
pub mod machine;
pub mod task;
#[cfg(test)]
mod tests;

pub use checkpoints::{ask_migration, fetch_checkpoint, upload_checkpoint, MIGRATE_TIMEOUT};
pub use gang::{wait_for_gang, GangWait, GANG_FILL_TIMEOUT};
pub use guest_io::{guest_output, guest_spec, OutputShipper};
pub use http::{enrol, ClientError, CoordinatorClient, Credentials, SyncStats, SYNC_BATCH};
pub use lease::{renewal, Stopped};
pub use link::{lease_wait, next_lease_wait, run_link, JobLink, LEASE_WAIT};
pub use machine::{base_speed, free_memory, heartbeat_from, machine_cpus, MemoryReporter};
pub use task::RunningTasks;
