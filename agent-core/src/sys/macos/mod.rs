//! The platform seam on macOS: the POSIX calls Linux's side makes serve unchanged (owner-only
//! modes and the umask, user ids, the stop signals, the control socket: a Unix socket
//! whose peer is checked with `getpeereid` and `LOCAL_PEERPID`), included from `linux/`;
//! every other call is still the portable fallback of `other.rs` (no boot-clock timer, no
//! per-thread slice, no page dropping, no process connector: issue 30).

pub use super::other::{cpu, memory, proc_events, procfs, sched, time, timer};

#[path = "../linux/errno.rs"]
pub mod errno;
#[path = "../linux/fs.rs"]
pub mod fs;
#[path = "../linux/id.rs"]
pub mod id;
#[path = "../linux/ipc.rs"]
pub mod ipc;
#[path = "../linux/signal.rs"]
pub mod signal;
