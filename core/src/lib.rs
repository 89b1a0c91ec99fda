//! Lull's pure core.
//!
//! Everything here takes `now` and readings as arguments and returns decisions: the
//! owner's availability policy ([`policy`]), the coordinator's scheduler ([`sched`]) and a
//! machine's calibration from its own recorded trace ([`calibrate`]).
//! Nothing in this crate reads the clock, the OS, files or the network, and it depends
//! on nothing that could (`scripts/check-core-purity.sh` holds that line in CI). The
//! drivers — the agent loop, the coordinator server and the simulator — feed it events
//! and act on what it returns. See `docs/ARCHITECTURE.md`.
//!
//! The façade: an item is `pub` only when another crate (or this crate's integration
//! tests and benches) names it or a public signature shows it; the rest is `pub(crate)`
//! or private. The top-level modules are the namespaces (`lull_core::policy`,
//! `lull_core::sched`, …); the file modules below `policy/` and `sched/` are private and
//! their `mod.rs` re-exports what is public, so no public path reaches into one.

// Product code handles its errors; `.unwrap()` is for tests (clippy.toml allows it there).
#![warn(clippy::unwrap_used)]

pub mod calibrate;
pub mod chart;
pub mod clock;
pub mod field;
pub mod guest_memory;
pub mod owner_memory;
pub mod policy;
pub mod sample;
pub mod sched;
