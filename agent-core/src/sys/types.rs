//! Plain data the platform calls return, the same on every platform.

/// A file's identity on its file system: it changes when the path is replaced by another
/// file (a rename over it, a delete and re-create), not when the file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    pub dev: u64,
    pub ino: u64,
}

/// What the metadata of a file says about its owner and its permission bits (`mode`
/// without the file type, `0o7777` at most; 0 where the platform has none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ownership {
    pub uid: u32,
    pub mode: u32,
}

/// Why a program could not be started, from the OS error of the attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpawnRefusal {
    /// No such file.
    NotFound,
    /// A file that cannot be run: no permission, not an executable format, a
    /// directory, or busy being written.
    NotExecutable,
    /// The operation was not permitted (a sandbox or account refusing it).
    NotPermitted,
    /// Another failure.
    Other,
}

/// One event of the kernel's process connector (see `proc_events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcEvent {
    /// Process `tgid` called exec.
    Exec { tgid: u32 },
    /// Process `tgid` exited.
    Exit { tgid: u32 },
    /// Any other kind (fork, uid change, …).
    Other,
}
