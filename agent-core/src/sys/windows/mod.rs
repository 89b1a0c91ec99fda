//! The platform seam on Windows: the control channel on a named pipe ([`ipc`]), Lull's
//! files and directories owner-only by their access control lists ([`fs`]), both built on
//! [`security`]; [`time`]'s `monotonic_ns` is the performance counter, which every
//! process reads alike; every other call is still the portable fallback of `other.rs`
//! (issue 30).

pub use super::other::{cpu, errno, id, memory, proc_events, procfs, sched, signal, timer};

pub mod fs;
pub mod ipc;
pub mod security;
pub mod time;
