//! Lull's files and directories on Windows, owner-only by their access control list: a
//! protected DACL (nothing inherited from the parent) that grants full control to the
//! current user and to SYSTEM, and nothing to anyone else. A directory's two entries are
//! inheritable (object and container inherit), so what a library creates inside it
//! (SQLite's `-wal` and `-shm`, the daily log files) inherits the same list: Windows' own
//! counterpart of the umask of 077 Lull sets on Unix.
//!
//! SYSTEM is kept because Windows' own per-user files (the profile, `%LOCALAPPDATA%`) grant
//! it too: the services that back up, index and restore a user's files run as SYSTEM, and
//! it can take any file's ownership anyway, so shutting it out would break them and keep
//! no one out. Administrators are not granted (the profile grants them): like 0600 on
//! Unix, another account of the machine, an administrator's included, reads nothing
//! without first taking ownership, which Windows audits. The control channel's pipe
//! (`ipc.rs`) grants the user alone: no service needs to connect to it.
//!
//! The rest is `other.rs`'s portable fallback: no umask, no symbolic-link refusal, no
//! owner or mode read back.

use super::security::{wide_to_string, Descriptor, LocalMemory};
use std::ffi::OsStr;
use std::fs::OpenOptions;
use std::io;
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::os::windows::io::AsRawHandle;
use std::path::Path;
use windows_sys::Win32::Foundation::{ERROR_ALREADY_EXISTS, GENERIC_READ, GENERIC_WRITE};
use windows_sys::Win32::Security::Authorization::{
    ConvertSecurityDescriptorToStringSecurityDescriptorW, GetNamedSecurityInfoW, SetNamedSecurityInfoW, SetSecurityInfo, SDDL_REVISION_1,
    SE_FILE_OBJECT,
};
use windows_sys::Win32::Security::{ACL, DACL_SECURITY_INFORMATION, PROTECTED_DACL_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR};
use windows_sys::Win32::Storage::FileSystem::{
    CreateDirectoryW, MoveFileExW, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH, READ_CONTROL, WRITE_DAC,
};

pub use crate::sys::other::fs::{
    dir_builder, file_id, is_socket, is_symlink_refusal, make_fifo, mtime, no_follow, no_follow_nonblocking, ownership, set_umask,
    with_umask,
};

/// A private file's access control list: the user and SYSTEM, full control, protected.
pub const FILE_SDDL: &str = "D:P(A;;FA;;;{user})(A;;FA;;;SY)";
/// A private directory's: the same, inherited by what is created inside it.
pub const DIR_SDDL: &str = "D:P(A;OICI;FA;;;{user})(A;OICI;FA;;;SY)";

/// Group and other permission bits: a mode with none of them is owner-only.
const OTHERS: u32 = 0o077;

/// `path` as a NUL-terminated wide string.
fn wide(path: &Path) -> Vec<u16> {
    OsStr::new(path).encode_wide().chain([0]).collect()
}

/// The owner-only descriptor for a directory or a file.
fn private_descriptor(is_dir: bool) -> io::Result<Descriptor> {
    Descriptor::from_sddl(if is_dir { DIR_SDDL } else { FILE_SDDL })
}

/// Only owner-only modes have an access control list here; a wider one (a root agent's
/// passable directories on Unix) is not set.
fn owner_only_or_unsupported(mode: u32) -> io::Result<()> {
    if mode & OTHERS == 0 {
        Ok(())
    } else {
        Err(io::Error::new(io::ErrorKind::Unsupported, format!("mode {mode:o} has no access control list on Windows")))
    }
}

/// Creates `dir` and its missing parents, each with the owner-only, inheritable list;
/// an existing one keeps its own.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        create_private_dir(parent)?;
    }
    let sd = private_descriptor(true)?;
    let attrs = sd.attributes();
    // SAFETY: a NUL-terminated path; attrs and its descriptor outlive the call.
    if unsafe { CreateDirectoryW(wide(dir).as_ptr(), &attrs) } == 0 {
        let e = io::Error::last_os_error();
        if !(e.raw_os_error() == Some(ERROR_ALREADY_EXISTS as i32) && dir.is_dir()) {
            return Err(e);
        }
    }
    Ok(())
}

/// Makes `opts` open its file with the right to set its access control list (which
/// [`set_file_mode`] does next) when `mode` is owner-only; the file is created with its
/// directory's inherited list.
pub fn create_mode(opts: &mut OpenOptions, mode: u32) -> &mut OpenOptions {
    if mode & OTHERS == 0 {
        opts.access_mode(GENERIC_READ | GENERIC_WRITE | READ_CONTROL | WRITE_DAC);
    }
    opts
}

/// Gives an open file (opened through [`create_mode`]) the owner-only list.
pub fn set_file_mode(file: &std::fs::File, mode: u32) -> io::Result<()> {
    set_private_list(mode, file.metadata()?.is_dir(), |dacl, what| {
        // SAFETY: a live handle with WRITE_DAC; the list outlives the call.
        unsafe {
            SetSecurityInfo(file.as_raw_handle(), SE_FILE_OBJECT, what, std::ptr::null_mut(), std::ptr::null_mut(), dacl, std::ptr::null())
        }
    })
}

/// Gives `path` the owner-only list (a directory's inherited by what is inside it).
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    let name = wide(path);
    set_private_list(mode, std::fs::metadata(path)?.is_dir(), |dacl, what| {
        // SAFETY: a NUL-terminated path; the list outlives the call.
        unsafe {
            SetNamedSecurityInfoW(name.as_ptr(), SE_FILE_OBJECT, what, std::ptr::null_mut(), std::ptr::null_mut(), dacl, std::ptr::null())
        }
    })
}

/// Sets the owner-only list of a file or directory through `set` (given the list and what
/// it replaces: the DACL, protected), for an owner-only `mode`.
fn set_private_list(mode: u32, is_dir: bool, set: impl FnOnce(*const ACL, u32) -> u32) -> io::Result<()> {
    owner_only_or_unsupported(mode)?;
    let sd = private_descriptor(is_dir)?;
    win32_result(set(sd.dacl()?, DACL_SECURITY_INFORMATION | PROTECTED_DACL_SECURITY_INFORMATION))
}

/// As [`set_mode`], refusing a symbolic link (or junction) should the path be one.
pub fn set_mode_no_follow(path: &Path, mode: u32) -> io::Result<()> {
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "a symbolic link's target is not changed"));
    }
    set_mode(path, mode)
}

/// Renames `from` over `to`, not returning before the rename is on disk
/// (`MOVEFILE_WRITE_THROUGH`: Windows cannot open a directory to flush it as Unix does).
pub fn replace_durably(from: &Path, to: &Path) -> io::Result<()> {
    // SAFETY: two NUL-terminated paths.
    if unsafe { MoveFileExW(wide(from).as_ptr(), wide(to).as_ptr(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH) } == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `path`'s access control list in SDDL (`D:P(A;;FA;;;S-1-5-21-…)…`), as Windows reads it
/// back: what the tests check.
pub fn dacl_sddl(path: &Path) -> io::Result<String> {
    let mut sd: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: a NUL-terminated path; only the descriptor is asked for.
    let err = unsafe {
        GetNamedSecurityInfoW(
            wide(path).as_ptr(),
            SE_FILE_OBJECT,
            DACL_SECURITY_INFORMATION,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            &mut sd,
        )
    };
    win32_result(err)?;
    let _sd = LocalMemory(sd);
    let mut text: *mut u16 = std::ptr::null_mut();
    // SAFETY: the descriptor GetNamedSecurityInfoW gave; text is an out-pointer.
    let ok = unsafe {
        ConvertSecurityDescriptorToStringSecurityDescriptorW(
            sd,
            SDDL_REVISION_1,
            DACL_SECURITY_INFORMATION,
            &mut text,
            std::ptr::null_mut(),
        )
    };
    if ok == 0 {
        return Err(io::Error::last_os_error());
    }
    let _text = LocalMemory(text.cast());
    // SAFETY: a NUL-terminated wide string.
    Ok(unsafe { wide_to_string(text) })
}

/// Whether anyone but the current user and SYSTEM is granted anything on `path` (or its
/// list cannot be read as allow entries for those two).
pub fn others_may_access(path: &Path) -> io::Result<bool> {
    Ok(!grants_only_owner(&dacl_sddl(path)?, &super::security::current_user_sid()?))
}

/// Whether the SDDL list `sddl` holds allow entries for `user` and SYSTEM alone.
pub fn grants_only_owner(sddl: &str, user: &str) -> bool {
    let Some(aces) = sddl.strip_prefix("D:") else { return false };
    let aces = &aces[aces.find('(').unwrap_or(aces.len())..];
    !aces.is_empty()
        && aces.trim_start_matches('(').trim_end_matches(')').split(")(").all(|ace| {
            let f: Vec<&str> = ace.split(';').collect();
            f.len() == 6 && f[0] == "A" && (f[5] == user || f[5] == "SY")
        })
}

/// A Win32 error code as a result.
fn win32_result(err: u32) -> io::Result<()> {
    if err == 0 {
        Ok(())
    } else {
        Err(io::Error::from_raw_os_error(err as i32))
    }
}
