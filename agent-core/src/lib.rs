//! Lull's agent core.
//!
//! The pure part — [`policy`] — takes time and readings as arguments and returns
//! decisions; it never reads the clock, the OS or the network, so the live agent, the
//! coordinator and the simulator all drive the very same code. Everything that touches
//! the world (sensors, input backends, guest runtime, ledger, control socket, agent loop)
//! sits at the edge in its own module. See `docs/ARCHITECTURE.md`.

pub mod agent;
pub mod assembly;
pub mod clock;
pub mod config;
pub mod config_file;
pub mod control;
pub mod coordinator_client;
pub mod data_lock;
pub mod footprint;
pub mod guest;
pub mod input;
pub mod ledger;
pub mod logging;
pub mod message;
pub mod paths;
pub mod policy;
pub mod retention;
pub mod sample;
pub mod sensors;
pub mod ticker;
pub mod ts_module;
