//! The Linux side of the platform seam (see the parent module).

pub mod cpu;
pub mod errno;
pub mod fs;
pub mod id;
pub mod ipc;
pub mod memory;
pub mod proc_events;
pub mod procfs;
pub mod sched;
pub mod signal;
pub mod time;
pub mod timer;
