//! The platform seam on Windows: the control channel on a named pipe ([`ipc`]); every
//! other call is still the portable fallback of `other.rs` (issue 30).

pub use super::other::{cpu, errno, fs, id, memory, proc_events, procfs, sched, signal, time, timer};

pub mod ipc;
