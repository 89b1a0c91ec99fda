//! Files only their owner can read: the process's umask, owner-only modes, opening
//! without following a symbolic link, and a file's owner, mode and identity.

pub use crate::sys::portable::replace_durably;
use crate::sys::types::{FileId, Ownership};
use std::fs::{DirBuilder, Metadata, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Sets the process's file-creation mask; returns the previous one.
pub fn set_umask(mask: u32) -> u32 {
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe { libc::umask(mask as libc::mode_t) as u32 }
}

/// Runs `f` with the umask set to `mask`, then restores the previous one (for an object
/// that must never exist with wider permissions, such as a socket being bound).
pub fn with_umask<T>(mask: u32, f: impl FnOnce() -> T) -> T {
    let old = set_umask(mask);
    let out = f();
    set_umask(old);
    out
}

/// A directory builder that creates missing parents with `mode` (before the umask).
pub fn dir_builder(mode: u32) -> DirBuilder {
    let mut b = DirBuilder::new();
    b.recursive(true).mode(mode);
    b
}

/// Creates `dir` and its missing parents owner-only (0700 before the umask); an existing
/// one keeps its mode.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    dir_builder(0o700).create(dir)
}

/// Makes `opts` create a file with `mode` (before the umask).
pub fn create_mode(opts: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
    opts.mode(mode)
}

/// Makes `opts` refuse a symbolic link as the last path component (see
/// [`is_symlink_refusal`]).
pub fn no_follow(opts: &mut OpenOptions) -> &mut OpenOptions {
    opts.custom_flags(libc::O_NOFOLLOW)
}

/// As [`no_follow`], and never block opening a FIFO.
pub fn no_follow_nonblocking(opts: &mut OpenOptions) -> &mut OpenOptions {
    opts.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
}

/// Whether opening failed because the path is a symbolic link ([`no_follow`]).
pub fn is_symlink_refusal(e: &io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// Creates a FIFO (named pipe) at `path` with `mode` (before the umask).
pub fn make_fifo(path: &Path, mode: u32) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: mkfifo reads a NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets `path`'s permission bits (following links).
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// Sets an open file's permission bits.
pub fn set_file_mode(file: &std::fs::File, mode: u32) -> io::Result<()> {
    file.set_permissions(std::fs::Permissions::from_mode(mode))
}

/// Sets `path`'s permission bits, refusing to change a link's target should the path
/// have become one since it was looked at.
pub fn set_mode_no_follow(path: &Path, mode: u32) -> io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).map_err(io::Error::other)?;
    // SAFETY: fchmodat reads a NUL-terminated path.
    let r = unsafe { libc::fchmodat(libc::AT_FDCWD, c.as_ptr(), mode as libc::mode_t, libc::AT_SYMLINK_NOFOLLOW) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The owner and permission bits of a file.
pub fn ownership(meta: &Metadata) -> Ownership {
    Ownership { uid: meta.uid(), mode: meta.mode() & 0o7777 }
}

/// Whether `path`'s group or other bits let others in (a link itself, not followed).
pub fn others_may_access(path: &Path) -> io::Result<bool> {
    Ok(std::fs::symlink_metadata(path)?.mode() & 0o077 != 0)
}

/// A file's identity on its file system.
pub fn file_id(meta: &Metadata) -> FileId {
    FileId { dev: meta.dev(), ino: meta.ino() }
}

/// A file's modification time: seconds and nanoseconds since the epoch.
pub fn mtime(meta: &Metadata) -> (i64, i64) {
    (meta.mtime(), meta.mtime_nsec())
}

/// Whether the metadata is a Unix socket's.
pub fn is_socket(meta: &Metadata) -> bool {
    use std::os::unix::fs::FileTypeExt;
    meta.file_type().is_socket()
}
