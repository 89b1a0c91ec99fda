//! Reading OS errors the agent acts on.

use crate::sys::types::SpawnRefusal;
use std::io;

/// Why starting a program failed, from the error `spawn` returned.
pub fn spawn_refusal(e: &io::Error) -> SpawnRefusal {
    match e.raw_os_error() {
        Some(libc::ENOENT) => SpawnRefusal::NotFound,
        Some(libc::EACCES | libc::ENOEXEC | libc::EISDIR | libc::ETXTBSY) => SpawnRefusal::NotExecutable,
        Some(libc::EPERM) => SpawnRefusal::NotPermitted,
        _ => SpawnRefusal::Other,
    }
}

/// Whether `e` says "try again" (EAGAIN / EWOULDBLOCK).
pub fn is_try_again(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::EAGAIN)
}
