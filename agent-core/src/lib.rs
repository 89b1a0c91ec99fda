//! Lull's agent core.
//!
//! The pure part — [`policy`], [`sample`] and the [`clock::Now`] they take — lives in the
//! `lull-core` crate (re-exported here under its old paths) and never reads the clock, the
//! OS or the network, so the live agent, the coordinator and the simulator all drive the
//! very same code. This crate is the edge: sensors, input backends, guest runtime, ledger,
//! control socket, the owner's config file and the agent loop, each in its own module.
//! See `docs/ARCHITECTURE.md`.

// Product code handles its errors; `.unwrap()` is for tests (clippy.toml allows it there).
#![warn(clippy::unwrap_used)]

pub use lull_core::{policy, sample};

pub mod agent;
pub mod alarm;
pub mod assembly;
pub mod budget_record;
pub mod calibration;
pub mod checkpoint;
pub mod clock;
pub mod config;
mod config_fields;
pub mod config_file;
pub mod control;
pub mod coordinator_client;
pub mod data_lock;
pub mod driver_link;
pub mod footprint;
pub mod guest;
pub mod input;
pub mod latency;
pub mod ledger;
pub mod ledger_integrity;
pub mod logging;
pub mod message;
pub mod owner_load;
pub mod paths;
pub mod private_files;
pub mod programs;
pub mod retention;
pub mod sensors;
pub mod stdout;
pub mod sys;
pub mod ts_module;
